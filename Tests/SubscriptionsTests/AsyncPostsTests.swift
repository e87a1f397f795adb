import Dispatch
import Subscriptions
import Synchronization
import Testing

private let number = Topic<Int>("async.number")
private let tracked = Topic<AsyncTracked>("async.tracked")

/// A payload object that counts its live instances, for lifetime tests.
private final class AsyncTracked: Sendable {
    static let live = Atomic<Int>(0)
    let id: Int
    init(_ id: Int) {
        self.id = id
        AsyncTracked.live.add(1, ordering: .relaxed)
    }
    deinit { AsyncTracked.live.subtract(1, ordering: .relaxed) }
}

private final class DataObject {}

/// Reads exactly `count` elements from `iterator`.
private func take<Element>(_ count: Int, from iterator: inout Posts<Element>.Iterator) async -> [Element] {
    var out: [Element] = []
    for _ in 0..<count {
        guard let element = await iterator.next() else { break }
        out.append(element)
    }
    return out
}

@Suite struct AsyncPostsTests {
    // MARK: Delivery and order

    @Test func postsMadeBeforeTheLoopBeginsAreYieldedFirstInPostOrder() async {
        let center = PostCenter()
        let numbers = center.posts(number)
        for i in 1...5 { #expect(center.post(number, i) == 1) }
        var seen: [Int] = []
        for await n in numbers {
            seen.append(n)
            if seen.count == 5 { center.post(number, 6) }
            if seen.count == 6 { break }
        }
        #expect(seen == [1, 2, 3, 4, 5, 6])
    }

    @Test func concurrentPosterAndConsumerSeeEveryPostInOrder() async {
        let center = PostCenter()
        let numbers = center.posts(number, bufferingPolicy: .unbounded)
        let consumer = Task {
            var seen: [Int] = []
            for await n in numbers {
                seen.append(n)
                if seen.count == 2_000 { break }
            }
            return seen
        }
        let poster = Task.detached {
            for i in 1...2_000 { center.post(number, i) }
        }
        await poster.value
        #expect(await consumer.value == Array(1...2_000))
        #expect(center.subscriptionCount(for: number.name) == 0)
    }

    @Test func postsFromSeveralThreadsKeepEachThreadsOrder() async {
        let center = PostCenter()
        let numbers = center.posts(number, bufferingPolicy: .unbounded)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for i in 0..<250 { center.post(number, thread * 1_000 + i) }
        }
        center.post(number, -1)  // sentinel: nothing may come between the 1000 posts and it
        var iterator = numbers.makeAsyncIterator()
        let seen = await take(1_001, from: &iterator)
        #expect(seen.count == 1_001)
        #expect(seen.last == -1)
        for thread in 0..<4 {
            let mine = seen.filter { $0 >= thread * 1_000 && $0 < thread * 1_000 + 1_000 }
            #expect(mine == Array(thread * 1_000..<thread * 1_000 + 250))
        }
    }

    @Test func plainNameSequenceYieldsEnvelopesOfPlainAndTypedPosts() async throws {
        let center = PostCenter()
        let object = DataObject()
        let posts = center.posts(number.name)
        #expect(center.post(number.name, flag: "a", data: object) == 1)
        #expect(center.post(number, 7) == 1)
        var iterator = posts.makeAsyncIterator()
        let first = try #require(await iterator.next())
        let second = try #require(await iterator.next())
        #expect(first.flag == "a")
        #expect(first.data === object)
        #expect(second.payload(as: Int.self) == 7)
        withExtendedLifetime(object) {}
    }

    @Test func typedSequenceSkipsPostsOfOtherPayloadTypes() async {
        let center = PostCenter()
        let numbers = center.posts(number)
        #expect(center.post(Topic<String>(number.name), "not a number") == 0)
        #expect(center.post(number.name, flag: "no data") == 0)
        #expect(center.post(number, 1) == 1)
        center.post(number, -1)
        var iterator = numbers.makeAsyncIterator()
        #expect(await take(2, from: &iterator) == [1, -1])
    }

    @Test func sequenceIsUsableAsSomeAsyncSequenceOfNever() async {
        let center = PostCenter()
        let numbers: some AsyncSequence<Int, Never> = center.posts(number)
        center.post(number, 42)
        var got: Int?
        for await n in numbers {  // no `try`: Failure == Never
            got = n
            break
        }
        #expect(got == 42)
    }

    @MainActor @Test func loopOnTheMainActorRunsItsBodyOnTheMainActor() async {
        let center = PostCenter()
        let numbers = center.posts(number)
        Task.detached { center.post(number, 1) }
        var got: [Int] = []
        for await n in numbers {
            MainActor.assertIsolated()
            got.append(n)
            break
        }
        #expect(got == [1])
    }

    // MARK: Cancellation and lifetime

    @Test func breakCancelsTheSubscriptionEvenWhileTheSequenceIsStillHeld() async {
        let center = PostCenter()
        let numbers = center.posts(number)
        #expect(center.subscriptionCount(for: number.name) == 1)
        center.post(number, 1)
        for await _ in numbers { break }
        #expect(center.subscriptionCount(for: number.name) == 0)
        #expect(center.post(number, 2) == 0)
        withExtendedLifetime(numbers) {}
    }

    @Test func returnFromTheLoopCancelsTheSubscription() async {
        func first(of numbers: Posts<Int>) async -> Int? {
            for await n in numbers { return n }
            return nil
        }
        let center = PostCenter()
        let numbers = center.posts(number)
        center.post(number, 5)
        #expect(await first(of: numbers) == 5)
        #expect(center.subscriptionCount(for: number.name) == 0)
    }

    @Test func droppingAnUnusedSequenceCancelsTheSubscription() {
        let center = PostCenter()
        _ = center.posts(number)
        #expect(center.subscriptionCount(for: number.name) == 0)
        do {
            let numbers = center.posts(number)
            let copy = numbers
            #expect(center.subscriptionCount(for: number.name) == 1)
            withExtendedLifetime((numbers, copy)) {}
        }
        #expect(center.subscriptionCount(for: number.name) == 0)
        #expect(center.post(number, 1) == 0)
    }

    @Test func cancellingTheIteratingTaskWakesTheConsumerAndCancelsTheSubscription() async {
        let center = PostCenter()
        let numbers = center.posts(number)
        let (acks, ack) = AsyncStream<Int>.makeStream()
        let consumer = Task {
            var count = 0
            for await n in numbers {
                count += 1
                ack.yield(n)  // then suspends in next(): nothing else is posted
            }
            return count
        }
        center.post(number, 1)
        var acked = acks.makeAsyncIterator()
        #expect(await acked.next() == 1)
        consumer.cancel()
        #expect(await consumer.value == 1)
        #expect(center.subscriptionCount(for: number.name) == 0)
        #expect(center.post(number, 2) == 0)
    }

    @Test func cancelledTaskGetsNothingEvenWithPostsBuffered() async {
        let center = PostCenter()
        let numbers = center.posts(number)
        for i in 1...3 { center.post(number, i) }
        let consumer = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            var count = 0
            for await _ in numbers { count += 1 }
            return count
        }
        #expect(await consumer.value == 0)
        #expect(center.subscriptionCount(for: number.name) == 0)
    }

    @Test func bufferedPostsAreReleasedWhenTheLoopEnds() async {
        let center = PostCenter()
        let baseline = AsyncTracked.live.load(ordering: .relaxed)
        do {
            let objects = center.posts(tracked)
            for i in 1...3 { center.post(tracked, AsyncTracked(i)) }
            #expect(AsyncTracked.live.load(ordering: .relaxed) == baseline + 3)
            for await object in objects {
                #expect(object.id == 1)
                break
            }
            // Two posts were still buffered: the subscription's end released them.
            #expect(AsyncTracked.live.load(ordering: .relaxed) == baseline)
        }
        do {
            let unused = center.posts(tracked)
            center.post(tracked, AsyncTracked(4))
            #expect(AsyncTracked.live.load(ordering: .relaxed) == baseline + 1)
            withExtendedLifetime(unused) {}
        }
        #expect(AsyncTracked.live.load(ordering: .relaxed) == baseline)
    }

    // MARK: Buffering policy

    @Test func bufferingNewest128KeepsTheNewest128Posts() async {
        let center = PostCenter()
        let numbers = center.posts(number, bufferingPolicy: .bufferingNewest(128))
        for i in 1...200 { center.post(number, i) }
        center.post(number, -1)
        var iterator = numbers.makeAsyncIterator()
        let seen = await take(128, from: &iterator)
        #expect(seen == Array(74...200) + [-1])
    }

    @Test func bufferingNewestDiscardsTheOldestWhileTheConsumerIsBusy() async {
        let center = PostCenter()
        let numbers = center.posts(number, bufferingPolicy: .bufferingNewest(4))
        let (acks, ack) = AsyncStream<Void>.makeStream()
        let (gates, gate) = AsyncStream<Void>.makeStream()
        let consumer = Task {
            var iterator = numbers.makeAsyncIterator()
            var seen = await take(1, from: &iterator)
            ack.yield()
            var gateIterator = gates.makeAsyncIterator()
            await gateIterator.next()  // busy: not in next() while 2...20 are posted
            seen += await take(4, from: &iterator)
            center.post(number, -1)  // the 4 kept posts are all there was
            seen += await take(1, from: &iterator)
            return seen
        }
        center.post(number, 1)
        var ackIterator = acks.makeAsyncIterator()
        await ackIterator.next()
        for i in 2...20 { #expect(center.post(number, i) == 1) }
        gate.yield()
        #expect(await consumer.value == [1, 17, 18, 19, 20, -1])
    }

    @Test func bufferingOldestDiscardsNewPostsWhenFull() async {
        let center = PostCenter()
        let numbers = center.posts(number, bufferingPolicy: .bufferingOldest(3))
        for i in 1...10 { center.post(number, i) }
        var iterator = numbers.makeAsyncIterator()
        var seen = await take(3, from: &iterator)
        center.post(number, -1)  // room again after draining
        seen += await take(1, from: &iterator)
        #expect(seen == [1, 2, 3, -1])
    }

    @Test func unboundedKeepsEveryPost() async {
        let center = PostCenter()
        let numbers = center.posts(number, bufferingPolicy: .unbounded)
        for i in 1...1_000 { center.post(number, i) }
        center.post(number, -1)
        var iterator = numbers.makeAsyncIterator()
        #expect(await take(1_001, from: &iterator) == Array(1...1_000) + [-1])
    }

    @Test func limitZeroOnlyDeliversPostsThatFindTheConsumerWaiting() async {
        let center = PostCenter()
        let numbers = center.posts(number, bufferingPolicy: .bufferingNewest(0))
        center.post(number, 1)  // nobody waiting: dropped
        center.post(number, 2)
        let consumer = Task {
            var iterator = numbers.makeAsyncIterator()
            return await iterator.next()
        }
        // Post 3 until the waiting consumer takes one (bounded: it is waiting within a few yields).
        // The consumer's iterator dies when it returns, so the count drops to 0 once it took one.
        var attempts = 0
        while center.subscriptionCount(for: number.name) == 1 && attempts < 100_000 {
            center.post(number, 3)
            attempts += 1
            await Task.yield()
        }
        #expect(await consumer.value == 3)
    }

    @Test(arguments: [
        PostsBufferingPolicy.unbounded, .bufferingNewest(0), .bufferingNewest(1), .bufferingNewest(3),
        .bufferingNewest(4), .bufferingNewest(5), .bufferingOldest(0), .bufferingOldest(1), .bufferingOldest(5),
    ])
    func bufferMatchesAModelOfItsPolicyAcrossWrapAround(policy: PostsBufferingPolicy) async {
        let center = PostCenter()
        let numbers = center.posts(number, bufferingPolicy: policy)
        var iterator = numbers.makeAsyncIterator()
        var model: [Int] = []
        var seed: UInt64 = 42
        func random(_ bound: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(seed >> 33) % bound
        }
        var next = 0
        for _ in 0..<500 {
            for _ in 0..<random(8) {
                next += 1
                center.post(number, next)
                switch policy {
                case .unbounded: model.append(next)
                case .bufferingNewest(let limit):
                    model.append(next)
                    if model.count > limit { model.removeFirst() }
                case .bufferingOldest(let limit):
                    if model.count < limit { model.append(next) }
                }
            }
            let amount = random(model.count + 1)  // never more than is buffered: next() never waits
            let got = await take(amount, from: &iterator)
            #expect(got == Array(model.prefix(amount)))
            model.removeFirst(amount)
        }
    }

    // MARK: Misuse

    @Test func iteratingASequenceTwiceTraps() async {
        await #expect(processExitsWith: .failure) {
            let numbers = PostCenter().posts(Topic<Int>("twice"))
            _ = numbers.makeAsyncIterator()
            _ = numbers.makeAsyncIterator()
        }
    }

    @Test func negativeBufferLimitTraps() async {
        await #expect(processExitsWith: .failure) {
            _ = PostCenter().posts("negative", bufferingPolicy: .bufferingNewest(-1))
        }
    }

    // MARK: Sender filter

    @Test(.timeLimit(.minutes(1)), .tags(.pin)) func postsFromSenderYieldsOnlyThatSendersPosts() async {
        let center = PostCenter()
        let a = Sender()
        let b = Sender()
        let fromA = center.posts(count, from: a)
        let plainFromA = center.posts(count.name, from: a)
        center.post(count, 1)  // no sender: never matches
        center.post("async.end.count", PostObject(flag: "b", data: nil), from: b)
        center.post("async.end.count", PostObject(flag: "a", data: nil), from: a)
        center.post(count, 2, from: b)
        center.post(count, 3, from: a)
        #expect(center.subscriptionCount(for: count.name) == 2)
        var typed = fromA.makeAsyncIterator()
        #expect(await typed.next() == 3)
        var plain = plainFromA.makeAsyncIterator()
        #expect(await plain.next()?.flag == "a")
        #expect(await plain.next()?.payload(as: Int.self) == 3)
        withExtendedLifetime((a, b)) {}
    }
}

private let count = Topic<Int>("async.end.count")

private final class Sender: Sendable {}
