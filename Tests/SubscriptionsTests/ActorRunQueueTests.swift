import Dispatch
import Subscriptions
import SubscriptionsTestSupport
import Testing

/// An actor on a `QueueExecutor` (ActorDeliveryTests.swift, which counts its jobs) that keeps
/// what each subscription's handler received, by subscription, and reports the total count
/// after each.
private actor Sink {
    let executor: QueueExecutor
    var values: [Int: [Int]] = [:]
    private var total = 0
    private let reached: AsyncStream<Int>.Continuation

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    init(_ label: String, reached: AsyncStream<Int>.Continuation) {
        executor = QueueExecutor(label)
        self.reached = reached
    }

    func receive(_ value: Int, from subscription: Int) {
        values[subscription, default: []].append(value)
        total += 1
        reached.yield(total)
    }

    func clear() {
        values = [:]
    }

    /// How many deliveries the sink had when this call ran on the actor.
    func deliveriesSoFar() -> Int { total }
}

/// Waits until the sink reported `n` deliveries in all (bounded by the test's time limit).
private func wait(_ counts: inout AsyncStream<Int>.Iterator, for n: Int) async {
    while let count = await counts.next(), count < n {}
}

/// Actor delivery shares one task per burst among all of a center's subscriptions on one actor:
/// "a post that reaches N subscriptions on one actor costs one task, not N" (PostCenter+Actor).
@Suite("Actor delivery: one run queue per actor")
struct ActorRunQueueTests {
    /// A burst of posts to ten subscriptions of one name on one actor and one of another name,
    /// while the actor
    /// cannot run: one job on the actor's executor, and every subscription gets every payload in
    /// post order.
    @Test func aBurstToManySubscriptionsOnOneActorCostsOneJob() async {
        let center = PostCenter()
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        var counts = stream.makeAsyncIterator()
        let sink = Sink("burst", reached: continuation)
        let topic = Topic<Int>("run-queue.burst")
        let other = Topic<Int>("run-queue.burst.other")
        var tokens = (0..<10).map { s in
            center.subscribe(topic, on: sink) { sink, value in sink.receive(value, from: s) }
        }
        tokens.append(center.subscribe(other, on: sink) { sink, value in sink.receive(value, from: 10) })
        sink.executor.queue.suspend()
        // 220 payloads: fewer than the drain's batch limit (256), after which it yields the actor.
        for i in 0..<20 {
            #expect(center.post(topic, i) == 10)
            #expect(center.post(other, i) == 1)
        }
        sink.executor.queue.resume()
        await wait(&counts, for: 220)
        #expect(sink.executor.enqueued == 1)
        let values = await sink.values
        for s in 0...10 { #expect(values[s] == Array(0..<20), "subscription \(s)") }
        withExtendedLifetime(tokens) {}
    }

    /// Posted one at a time, each waited for: about one job per post, not one per subscription.
    @Test func postsOneAtATimeToManySubscriptionsCostAtMostOneJobEach() async {
        let center = PostCenter()
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        var counts = stream.makeAsyncIterator()
        let sink = Sink("one at a time", reached: continuation)
        let topic = Topic<Int>("run-queue.one")
        let tokens = (0..<10).map { s in
            center.subscribe(topic, on: sink) { sink, value in sink.receive(value, from: s) }
        }
        let posts = 50
        for i in 0..<posts {
            center.post(topic, i)
            await wait(&counts, for: 10 * (i + 1))
        }
        let jobs = sink.executor.enqueued
        // One task per post at most, plus a yield of the actor per 256 deliveries when a task
        // happens to run on into the next post: far from one task per subscription (10 per post).
        #expect(jobs <= posts + 10 * posts / 256 + 1)
        let values = await sink.values
        for s in 0..<10 { #expect(values[s] == Array(0..<posts), "subscription \(s)") }
        withExtendedLifetime(tokens) {}
    }

    /// Two actors: each has its own run queue, so neither waits for the other.
    @Test func subscriptionsOnTwoActorsRunOnTheirOwnActors() async {
        let center = PostCenter()
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        var counts = stream.makeAsyncIterator()
        let (otherStream, otherContinuation) = AsyncStream<Int>.makeStream()
        var otherCounts = otherStream.makeAsyncIterator()
        let held = Sink("held", reached: continuation)
        let free = Sink("free", reached: otherContinuation)
        let topic = Topic<Int>("run-queue.two")
        let tokens = [
            center.subscribe(topic, on: held) { sink, value in sink.receive(value, from: 0) },
            center.subscribe(topic, on: free) { sink, value in sink.receive(value, from: 0) },
        ]
        held.executor.queue.suspend()
        for i in 0..<5 { center.post(topic, i) }
        // The held actor cannot run; the other one still gets all five.
        await wait(&otherCounts, for: 5)
        #expect(await free.values[0] == Array(0..<5))
        held.executor.queue.resume()
        await wait(&counts, for: 5)
        #expect(held.executor.enqueued == 1)
        #expect(await held.values[0] == Array(0..<5))
        withExtendedLifetime(tokens) {}
    }

    /// Cancelling one of several subscriptions on one actor while their payloads wait drops only
    /// its payloads; the others still get theirs, in order.
    @Test func cancellingOneSubscriptionOnASharedActorDropsOnlyItsPayloads() async {
        let center = PostCenter()
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        var counts = stream.makeAsyncIterator()
        let sink = Sink("cancel one", reached: continuation)
        let topic = Topic<Int>("run-queue.cancel")
        let tokens = (0..<3).map { s in
            center.subscribe(topic, on: sink) { sink, value in sink.receive(value, from: s) }
        }
        sink.executor.queue.suspend()
        for i in 0..<20 { center.post(topic, i) }
        tokens[1].cancel()
        sink.executor.queue.resume()
        await wait(&counts, for: 40)
        await center.waitForPendingDeliveries()
        let values = await sink.values
        #expect(values[0] == Array(0..<20) && values[2] == Array(0..<20))
        #expect(values[1] == nil)
        withExtendedLifetime(tokens) {}
    }

    /// Four threads post to five subscriptions on one actor, racing the end of the shared drain:
    /// 500 rounds, nothing lost, each subscription in each thread's post order.
    @Test func postsFromFourThreadsRacingTheSharedDrainAreNeitherLostNorReordered() async {
        let center = PostCenter()
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        var counts = stream.makeAsyncIterator()
        let sink = Sink("race", reached: continuation)
        let topic = Topic<Int>("run-queue.race")
        let subscriptions = 5
        let tokens = (0..<subscriptions).map { s in
            center.subscribe(topic, on: sink) { sink, value in sink.receive(value, from: s) }
        }
        let (threads, perThread) = (4, 3)
        var expected = 0
        for round in 0..<500 {
            let posters = (0..<threads).map { t in
                TestThread { for i in 0..<perThread { center.post(topic, t * 100 + i) } }
            }
            for poster in posters { await poster.joined() }
            expected += subscriptions * threads * perThread
            await wait(&counts, for: expected)
            let values = await sink.values
            var intact = true
            for s in 0..<subscriptions {
                let mine = values[s] ?? []
                intact = intact && mine.count == threads * perThread
                for t in 0..<threads {
                    let fromT = mine.filter { $0 / 100 == t }.map { $0 % 100 }
                    intact = intact && fromT == Array(0..<perThread)
                }
            }
            #expect(intact, "round \(round): \(values)")
            await sink.clear()
            if !intact { break }
        }
        withExtendedLifetime(tokens) {}
    }

    /// A subscription whose drain stopped at the batch limit goes back in line: later posts
    /// still reach it, and so do the other subscriptions' posts.
    @Test func aSubscriptionThatFilledABatchStillGetsLaterPosts() async {
        let center = PostCenter()
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        var counts = stream.makeAsyncIterator()
        let sink = Sink("batch", reached: continuation)
        let topic = Topic<Int>("run-queue.batch")
        let tokens = (0..<2).map { s in
            center.subscribe(topic, on: sink) { sink, value in sink.receive(value, from: s) }
        }
        sink.executor.queue.suspend()
        for i in 0..<300 { center.post(topic, i) }
        sink.executor.queue.resume()
        await wait(&counts, for: 600)
        center.post(topic, 300)
        await wait(&counts, for: 602)
        let values = await sink.values
        #expect(values[0] == Array(0...300) && values[1] == Array(0...300))
        withExtendedLifetime(tokens) {}
    }

    /// The drain lets the actor's other work run after every batch of payloads, also while posts
    /// keep coming: here each delivery posts the next one, so the mailbox is never empty for
    /// 3,000 deliveries, and a call made on the actor meanwhile still runs long before the end.
    @Test func theDrainLetsTheActorsOtherWorkRunBetweenBatches() async {
        let center = PostCenter()
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        var counts = stream.makeAsyncIterator()
        let sink = Sink("fair", reached: continuation)
        let topic = Topic<Int>("run-queue.fair")
        let last = 3_000
        let token = center.subscribe(topic, on: sink) { sink, value in
            sink.receive(value, from: 0)
            if value < last { center.post(topic, value + 1) }
        }
        sink.executor.queue.suspend()
        center.post(topic, 1)
        let other = Task { await sink.deliveriesSoFar() }
        sink.executor.queue.resume()
        let seenByTheOtherCall = await other.value
        await wait(&counts, for: last)
        #expect(seenByTheOtherCall < last)
        withExtendedLifetime(token) {}
    }

    /// Inside a post, the task starts when the post ends, not at the first entry the post
    /// reaches: a task started at once could drain the entries reached so far, find the line
    /// empty and end before the post reaches the rest, and the post would cost two tasks. Here an
    /// immediate handler between the actor subscriptions holds the walk until the first half was
    /// drained (or a bound passed): the post must still cost one job on the actor.
    @Test func aPostStartsTheActorsTaskWhenItEndsNotAtItsFirstEntry() async {
        let center = PostCenter()
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        var counts = stream.makeAsyncIterator()
        let sink = Sink("deferred", reached: continuation)
        let topic = Topic<Int>("run-queue.deferred")
        let firstHalf = (0..<5).map { s in
            center.subscribe(topic, on: sink) { sink, value in sink.receive(value, from: s) }
        }
        let drained = DispatchSemaphore(value: 0)
        let (drainedStream, drainedContinuation) = AsyncStream<Int>.makeStream()
        let watcher = Task {
            for await count in drainedStream where count >= 5 {
                drained.signal()
                return
            }
        }
        let middle = center.subscribe(topic) { _ in
            // Bounded: with the start put off, nothing is drained until the post ends.
            _ = drained.wait(timeout: .now() + .milliseconds(300))
        }
        let secondHalf = (5..<10).map { s in
            center.subscribe(topic, on: sink) { sink, value in sink.receive(value, from: s) }
        }
        let forward = Task {
            var reached = 0
            while reached < 10, let count = await counts.next() {
                reached = count
                drainedContinuation.yield(count)
            }
        }
        let poster = TestThread { center.post(topic, 1) }
        await poster.joined()
        await forward.value
        watcher.cancel()
        #expect(sink.executor.enqueued == 1)
        withExtendedLifetime((firstHalf, middle, secondHalf)) {}
    }
}
