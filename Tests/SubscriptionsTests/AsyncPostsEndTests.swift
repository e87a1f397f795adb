import Dispatch
import Subscriptions
import Synchronization
import Testing

private let count = Topic<Int>("async.end.count")

private final class Sender: Sendable {}

/// Guarantees: a `Posts` sequence finishes once its center is gone (after yielding what it
/// buffered), in every buffering policy; it keeps every post by default; bounded policies report
/// what they discard through diagnostics; `posts(_:from:)` yields only the sender's posts.
///
/// A regression here would leave a `for await` loop waiting forever, so the suite has a time
/// limit: a deadlock guard, not a timing assertion.
@Suite("Posts sequences: end, default policy, drops, sender", .timeLimit(.minutes(1)))
struct AsyncPostsEndTests {
    // MARK: The center goes away

    @Test(arguments: [
        (PostsBufferingPolicy.unbounded, [1, 2, 3]), (.bufferingNewest(2), [2, 3]), (.bufferingOldest(2), [1, 2]),
        (.bufferingNewest(0), []), (.bufferingOldest(0), []),
    ])
    func typedSequenceYieldsItsBufferThenFinishesWhenTheCenterDeinitialises(
        policy: PostsBufferingPolicy, expected: [Int]
    ) async {
        var center: PostCenter? = PostCenter()
        weak var weakCenter: PostCenter?
        weakCenter = center
        let numbers = center!.posts(count, bufferingPolicy: policy)
        for i in 1...3 { center!.post(count, i) }
        center = nil
        #expect(weakCenter == nil, "the sequence must not keep its center alive")
        var seen: [Int] = []
        for await n in numbers { seen.append(n) }
        #expect(seen == expected)
    }

    @Test(arguments: [PostsBufferingPolicy.unbounded, .bufferingNewest(2), .bufferingOldest(2)])
    func plainSequenceYieldsItsBufferThenFinishesWhenTheCenterDeinitialises(policy: PostsBufferingPolicy) async {
        var center: PostCenter? = PostCenter()
        let posts = center!.posts("async.end.plain", bufferingPolicy: policy)
        center!.post("async.end.plain", flag: "a")
        center!.post("async.end.plain", flag: "b")
        center = nil
        var flags: [String] = []
        for await post in posts { flags.append(post.flag) }
        #expect(flags == ["a", "b"])
    }

    @Test(arguments: [PostsBufferingPolicy.unbounded, .bufferingNewest(1), .bufferingOldest(1)])
    func suspendedConsumerFinishesWhenTheCenterDeinitialises(policy: PostsBufferingPolicy) async {
        var center: PostCenter? = PostCenter()
        let numbers = center!.posts(count, bufferingPolicy: policy)
        let (acks, ack) = AsyncStream<Void>.makeStream()
        let consumer = Task {
            var seen: [Int] = []
            for await n in numbers {
                seen.append(n)
                ack.yield()  // then back into next(), where it waits
            }
            return seen
        }
        center!.post(count, 7)
        var ackIterator = acks.makeAsyncIterator()
        await ackIterator.next()
        center = nil  // the consumer is waiting in next(), or about to: either way it finishes
        #expect(await consumer.value == [7])
    }

    @Test func iteratorKeepsReturningNilAfterTheCenterWent() async {
        var center: PostCenter? = PostCenter()
        let numbers = center!.posts(count)
        center = nil
        var iterator = numbers.makeAsyncIterator()
        #expect(await iterator.next() == nil)
        #expect(await iterator.next() == nil)
    }

    // MARK: Default policy

    @Test func consumerNotYetScheduledReceivesEveryPostByDefault() async {
        let center = PostCenter()
        let numbers = center.posts(count)
        let consumer = Task {
            var seen: [Int] = []
            for await n in numbers {
                seen.append(n)
                if n == 20_001 { break }
            }
            return seen
        }
        for i in 1...20_001 { center.post(count, i) }  // most likely before the task runs at all
        #expect(await consumer.value == Array(1...20_001))
        let plain = center.posts("async.end.default")
        for i in 1...1_000 { center.post("async.end.default", flag: "\(i)") }
        var iterator = plain.makeAsyncIterator()
        var flags: [String] = []
        for _ in 1...1_000 { flags.append(await iterator.next()?.flag ?? "") }
        #expect(flags == (1...1_000).map { "\($0)" })
    }

    // MARK: Drops are reported

    @Test(arguments: [
        (PostsBufferingPolicy.bufferingNewest(10), Array(91...100)), (.bufferingOldest(10), Array(1...10)),
    ])
    func boundedPolicyReportsWhatItDiscardedOnceDiagnosticsAreOn(policy: PostsBufferingPolicy, kept: [Int]) async {
        let center = PostCenter()
        let reports = Recorder<PostCenter.Diagnostic>()
        center.diagnostics = .init { reports.append($0) }
        let numbers = center.posts(count, bufferingPolicy: policy)
        for i in 1...100 { center.post(count, i) }
        #expect(reports.values == [])  // counted on the posting path, reported by the consumer
        var iterator = numbers.makeAsyncIterator()
        var seen: [Int] = []
        for _ in 0..<10 { seen.append(await iterator.next() ?? -1) }
        #expect(seen == kept)
        #expect(reports.values == [.droppedPosts(name: count.name, count: 90)])
        #expect(reports.values.first?.description.contains("unbounded") == true)
        // Nothing more discarded, nothing more reported.
        center.post(count, 101)
        #expect(await iterator.next() == 101)
        #expect(reports.count == 1)
    }

    @Test func plainBoundedSequenceReportsItsName() async {
        let center = PostCenter()
        let reports = Recorder<PostCenter.Diagnostic>()
        center.diagnostics = .init { reports.append($0) }
        let posts = center.posts("async.end.drops", bufferingPolicy: .bufferingNewest(1))
        for _ in 1...5 { center.post("async.end.drops") }
        var iterator = posts.makeAsyncIterator()
        _ = await iterator.next()
        #expect(reports.values == [.droppedPosts(name: "async.end.drops", count: 4)])
    }

    @Test func nothingIsReportedWithoutDiagnosticsOrWithoutDrops() async {
        let center = PostCenter()
        let silent = center.posts(count, bufferingPolicy: .bufferingNewest(1))
        for i in 1...5 { center.post(count, i) }
        var iterator = silent.makeAsyncIterator()
        #expect(await iterator.next() == 5)
        let reports = Recorder<PostCenter.Diagnostic>()
        center.diagnostics = .init { reports.append($0) }
        let unbounded = center.posts("async.end.all")
        for _ in 1...500 { center.post("async.end.all") }
        var all = unbounded.makeAsyncIterator()
        for _ in 1...500 { _ = await all.next() }
        #expect(reports.values == [])
    }

    // MARK: Sender filter

    @Test func postsFromSenderYieldsOnlyThatSendersPosts() async {
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
