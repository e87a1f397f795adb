import Dispatch
import Foundation
import SubscriptionsTestSupport
import Synchronization
import Testing

@testable import Subscriptions

/// A task-local value a poster sets around its posts.
private enum PostTrace {
    @TaskLocal static var id: Int?
}

/// An actor that keeps what its handlers received and reports the count.
private actor MailboxLog<Value: Sendable> {
    var values: [Value] = []
    private let reached: AsyncStream<Int>.Continuation?

    init(reached: AsyncStream<Int>.Continuation? = nil) {
        self.reached = reached
    }

    func receive(_ value: Value) {
        values.append(value)
        reached?.yield(values.count)
    }

    func clear() { values = [] }
}

/// The same on a `QueueExecutor` of its own: its handlers run on the queue's thread, never on
/// Swift's cooperative pool, so a test may hold them back (by suspending the queue) or let them
/// block without starving the tasks of every other test.
private actor QueueLog<Value: Sendable> {
    let executor: QueueExecutor
    var values: [Value] = []
    private let reached: AsyncStream<Int>.Continuation?

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    init(_ label: String, reached: AsyncStream<Int>.Continuation? = nil) {
        executor = QueueExecutor(label)
        self.reached = reached
    }

    func receive(_ value: Value) {
        values.append(value)
        reached?.yield(values.count)
    }
}

/// Waits until the main queue has run everything it holds when this is called.
@MainActor private func drainMain() async {
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        DispatchQueue.main.async { done.resume() }
    }
}

/// Main-actor state for the tests below.
@MainActor private final class MainLog {
    var values: [String] = []
}

@Suite("Mailboxes: main-actor and actor delivery per burst", .timeLimit(.minutes(2)))
struct MailboxDeliveryTests {
    // MARK: Main actor, posted from another thread

    @Test @MainActor func postsFromAnotherThreadInOneBurstRunInOneMainQueueJob() async {
        let center = PostCenter()
        let log = MainLog()
        let a = center.subscribe(Topic<Int>("burst.a"), delivery: .mainActor) { log.values.append("a\($0)") }
        let b = center.subscribe(Topic<Int>("burst.b"), delivery: .mainActor) { log.values.append("b\($0)") }
        // The main queue is blocked while a thread posts the first post, then queues a marker
        // job, then posts the rest. One job per burst: the job the first post scheduled runs
        // every delivery of the burst, so the marker (queued after that job) sees them all. With
        // a job per delivery, the marker would run after the first one only.
        let gate = DispatchSemaphore(value: 0)
        DispatchQueue.main.async { gate.wait() }
        let seenByMarker = Recorder<Int>()
        let poster = TestThread {
            center.post(Topic<Int>("burst.a"), 0)
            DispatchQueue.main.async { MainActor.assumeIsolated { seenByMarker.append(log.values.count) } }
            for i in 1..<50 {
                center.post(Topic<Int>("burst.b"), i)
                center.post(Topic<Int>("burst.a"), i)
            }
            gate.signal()
        }
        poster.join()
        await drainMain()
        #expect(seenByMarker.values == [99])
        // Post order across the center's main-actor subscriptions, not only within each.
        let expected = ["a0"] + (1..<50).flatMap { ["b\($0)", "a\($0)"] }
        #expect(log.values == expected)
        withExtendedLifetime((a, b)) {}
    }

    @Test @MainActor func payloadsQueuedForTheMainActorAreReleasedOnceHandledOrDropped() async {
        let center = PostCenter()
        let live = LiveObjects()
        let log = MainLog()
        let kept = center.subscribe(Topic<Tracked>("tracked"), delivery: .mainActor) { log.values.append($0.name) }
        let dropped = center.subscribe(Topic<Tracked>("tracked"), delivery: .mainActor) { _ in
            Issue.record("a cancelled main-actor subscription ran")
        }
        let gate = DispatchSemaphore(value: 0)
        DispatchQueue.main.async { gate.wait() }
        let poster = TestThread {
            for i in 0..<20 { center.post(Topic<Tracked>("tracked"), Tracked("\(i)", live: live)) }
        }
        poster.join()
        #expect(live.alive == 20)
        dropped.cancel()
        gate.signal()
        await center.waitForPendingDeliveries()
        #expect(log.values == (0..<20).map { "\($0)" })
        #expect(live.alive == 0, "payloads handed to the main actor outlived their delivery")
        withExtendedLifetime(kept) {}
    }

    /// `Subscription.cancel()`: "the center has released the handler closure and everything it
    /// captured", for a main-actor handler whose deliveries wait in the main mailbox (each
    /// record holds the entry, not the closure).
    @Test @MainActor func cancelReleasesAMainActorHandlersCapturesWhileItsDeliveriesWait() async {
        let center = PostCenter()
        let live = LiveObjects()
        let log = MainLog()
        let topic = Topic<Int>("captured")
        var tracked: Tracked? = Tracked("capture", live: live)
        let token = center.subscribe(topic, delivery: .mainActor) { [tracked] value in
            _ = tracked
            log.values.append("\(value)")
        }
        weak var weakTracked: Tracked?
        weakTracked = tracked
        tracked = nil
        // This test holds the main actor: the deliveries wait in the main mailbox.
        let poster = TestThread {
            for i in 0..<3 { center.post(topic, i) }
        }
        poster.join()
        #expect(weakTracked != nil)  // held by the handler while the subscription lives
        token.cancel()
        #expect(weakTracked == nil, "a main-actor handler's captures outlived cancel()")
        #expect(live.alive == 0)
        await center.waitForPendingDeliveries()
        #expect(log.values.isEmpty, "a delivery of a cancelled main-actor subscription ran")
        // Posted here afterwards: nothing runs either.
        #expect(center.post(topic, 9) == 0)
        #expect(log.values.isEmpty)
    }

    /// Several main-actor handlers of a typed post on the main thread run before `post` returns,
    /// in subscription order, between immediate handlers and the others; paused ones are
    /// skipped, and the same handlers posted from another thread all run later on the main
    /// actor, in order (one post asks where it runs once, for all of them).
    @Test @MainActor func mainActorHandlersMixedWithOthersRunInOrderOnAndOffTheMainThread() async {
        let center = PostCenter()
        let log = MainLog()
        let topic = Topic<Int>("mixed")
        let calls = Recorder<String>()
        var tokens: [Subscription] = []
        for i in 0..<6 {
            if i % 3 == 1 {
                tokens.append(center.subscribe(topic) { value in calls.append("i\(i):\(value)") })
            } else {
                tokens.append(
                    center.subscribe(topic, delivery: .mainActor) { value in
                        MainActor.assertIsolated()
                        log.values.append("m\(i):\(value)")
                    })
            }
        }
        tokens[3].pause()
        #expect(center.post(topic, 1) == 5)
        #expect(log.values == ["m0:1", "m2:1", "m5:1"])
        #expect(calls.values == ["i1:1", "i4:1"])
        log.values = []
        let poster = TestThread {
            for value in 2...3 { center.post(topic, value) }
        }
        poster.join()
        #expect(log.values.isEmpty)  // this test holds the main actor
        #expect(calls.values.count == 6)
        await center.waitForPendingDeliveries()
        #expect(log.values == ["m0:2", "m2:2", "m5:2", "m0:3", "m2:3", "m5:3"])
        withExtendedLifetime(tokens) {}
    }

    @Test @MainActor func aMainActorHandlerPostedOnTheMainThreadRunsBeforePostReturns() {
        let center = PostCenter()
        let log = MainLog()
        let token = center.subscribe(Topic<Int>("sync"), delivery: .mainActor) { log.values.append("\($0)") }
        let plain = center.subscribe("sync.plain", delivery: .mainActor) { log.values.append($0.flag) }
        for i in 0..<3 {
            #expect(center.post(Topic<Int>("sync"), i) == 1)
            #expect(log.values.last == "\(i)")
        }
        #expect(center.post("sync.plain", flag: "p") == 1)
        #expect(log.values == ["0", "1", "2", "p"])
        withExtendedLifetime((token, plain)) {}
    }

    // MARK: Actor drains

    @Test func postsFromFourThreadsRacingTheEndOfTheDrainAreNeitherLostNorReordered() async {
        let center = PostCenter()
        let topic = Topic<Point>("race")
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        let log = MailboxLog<Point>(reached: continuation)
        let token = center.subscribe(topic, on: log) { log, point in log.receive(point) }
        var counts = stream.makeAsyncIterator()
        let threads = 4
        let perThread = 3
        for round in 0..<1_000 {
            // Each round starts with an idle mailbox: the drain of the last round found it empty
            // and is ending, while four threads post again.
            let posters = (0..<threads).map { t in
                TestThread { for i in 0..<perThread { center.post(topic, Point(x: t, y: i)) } }
            }
            for poster in posters { await poster.joined() }
            var reached = 0
            while reached < threads * perThread, let count = await counts.next() { reached = count }
            let values = await log.values
            #expect(values.count == threads * perThread, "round \(round)")
            for t in 0..<threads {
                #expect(values.filter { $0.x == t }.map(\.y) == Array(0..<perThread), "thread \(t), round \(round)")
            }
            await log.clear()
            if values.count != threads * perThread { break }
        }
        withExtendedLifetime(token) {}
    }

    // MARK: waitForPendingDeliveries and actors

    @Test func waitForPendingDeliveriesWaitsForActorDeliveriesOfEarlierPosts() async {
        for round in 0..<20 {
            let center = PostCenter()
            let topic = Topic<Int>("pending.actor")
            let log = MailboxLog<Int>()
            let other = MailboxLog<Int>()
            let token = center.subscribe(topic, on: log) { log, value in log.receive(value) }
            let second = center.subscribe(topic, on: other) { other, value in other.receive(value) }
            for i in 0..<500 { center.post(topic, i) }
            await center.waitForPendingDeliveries()
            #expect(await log.values == Array(0..<500), "round \(round)")
            #expect(await other.values == Array(0..<500), "round \(round)")
            withExtendedLifetime((token, second)) {}
        }
    }

    @Test func waitForPendingDeliveriesReturnsUnderASteadyStreamOfActorPosts() async {
        let center = PostCenter()
        let topic = Topic<Int>("pending.stream")
        let log = MailboxLog<Int>()
        let token = center.subscribe(topic, on: log) { log, value in log.receive(value) }
        let stop = Flag()
        let poster = TestThread {
            var i = 0
            while !stop.isSet {
                center.post(topic, i)
                i += 1
            }
        }
        for _ in 0..<20 { await center.waitForPendingDeliveries() }
        stop.set()
        await poster.joined()
        await center.waitForPendingDeliveries()
        let values = await log.values
        #expect(values == Array(0..<values.count))
        withExtendedLifetime(token) {}
    }

    /// Six actor subscriptions start draining at once (a mailbox joins the center's list of
    /// draining subscriptions at its first payload, so they are listed newest first: 5, 4, …, 0),
    /// with every actor held back. The test lets all but one (a different one each round) end
    /// their bursts, in ascending order: each leaves the list from its middle, with a later one
    /// still ahead of it and the held one behind it. Only then does the test wait: the center
    /// must still know the held one. The held actor runs only once the wait is known to wait for
    /// deliveries (a debug-build hook runs when a mailbox keeps the wait's continuation), so a
    /// wait that forgot it returns first, with the held subscription's record empty, every time.
    /// (Held 4 or 5 would have no unlinking from the middle ahead of it.) The actors run on
    /// queues of their own, held back by suspending them: nothing blocks a cooperative thread.
    @Test(.tags(.mutantPin)) func waitForPendingDeliveriesWaitsForEveryActorDrainingAtOnceWhicheverEndsFirst() async {
        enum Event { case waiting, returned }
        let posts = 10
        for held in 0..<4 {
            let center = PostCenter()
            let topic = Topic<Int>("pending.many")
            var reached: [AsyncStream<Int>] = []
            var logs: [QueueLog<Int>] = []
            for i in 0..<6 {
                let (stream, continuation) = AsyncStream<Int>.makeStream()
                reached.append(stream)
                logs.append(QueueLog("pending.many.\(i)", reached: continuation))
            }
            let records = (0..<6).map { _ in Recorder<Int>() }
            for log in logs { log.executor.queue.suspend() }
            var tokens: [Subscription] = []
            for (i, log) in logs.enumerated() {
                tokens.append(
                    center.subscribe(topic, on: log) { log, value in
                        records[i].append(value)
                        log.receive(value)
                    })
            }
            for value in 0..<posts { center.post(topic, value) }
            for (i, log) in logs.enumerated() where i != held {
                log.executor.queue.resume()
                for await count in reached[i] where count == posts { break }
                // Runs on the actor after the drain that reached the count: its burst has ended.
                #expect(await log.values == Array(0..<posts), "held \(held), subscription \(i)")
            }
            let (events, event) = AsyncStream<Event>.makeStream()
            center._deliveries._waitHook.withLock { $0 = { event.yield(.waiting) } }
            let waiter = Task {
                await center.waitForPendingDeliveries()
                event.yield(.returned)
            }
            var next = events.makeAsyncIterator()
            let first = await next.next()
            #expect(
                first == .waiting,
                "held \(held): waitForPendingDeliveries() returned with \(records[held].count) of \(posts) deliveries")
            logs[held].executor.queue.resume()
            await waiter.value
            for (i, record) in records.enumerated() {
                #expect(record.values == Array(0..<posts), "held \(held), subscription \(i)")
            }
            withExtendedLifetime(tokens) {}
        }
    }

    /// A coalesced actor delivery is counted by the center until it ran: a wait that starts
    /// while it is held back (its actor's queue suspended) waits for it. The actor runs only once
    /// the wait is known to wait (the debug-build hook), so a wait that did not count the
    /// delivery returns first, with nothing delivered, in every round.
    @Test(.tags(.mutantPin)) func waitForPendingDeliveriesWaitsForACoalescedActorDelivery() async {
        enum Event { case waiting, returned }
        for round in 0..<5 {
            let center = PostCenter()
            let topic = Topic<Int>("pending.coalesced")
            let log = QueueLog<Int>("pending.coalesced")
            let delivered = Recorder<Int>()
            let token = center.subscribe(topic, on: log, coalesced: true) { log, value in
                delivered.append(value)
                log.receive(value)
            }
            log.executor.queue.suspend()
            center.post(topic, round)
            let (events, event) = AsyncStream<Event>.makeStream()
            center._deliveries._waitHook.withLock { $0 = { event.yield(.waiting) } }
            let waiter = Task {
                await center.waitForPendingDeliveries()
                event.yield(.returned)
            }
            var next = events.makeAsyncIterator()
            let first = await next.next()
            #expect(
                first == .waiting,
                "round \(round): waitForPendingDeliveries() returned with \(delivered.count) of 1 delivery")
            log.executor.queue.resume()
            await waiter.value
            #expect(delivered.values == [round], "round \(round)")
            #expect(await log.values == [round], "round \(round)")
            withExtendedLifetime(token) {}
        }
    }

    // MARK: priority and task-local values

    @Test func actorHandlersRunAtMediumPriorityWhateverThePostersPriority() async {
        let center = PostCenter()
        let topic = Topic<Int>("priority")
        let log = MailboxLog<TaskPriority>()
        let coalescedLog = MailboxLog<TaskPriority>()
        let token = center.subscribe(topic, on: log) { log, _ in log.receive(Task.currentPriority) }
        let coalesced = center.subscribe(topic, on: coalescedLog, coalesced: true) { log, _ in
            log.receive(Task.currentPriority)
        }
        let priorities: [TaskPriority] = [.high, .low, .background, .userInitiated, .utility]
        for priority in priorities {
            await Task(priority: priority) { _ = center.post(topic, 1) }.value
            await center.waitForPendingDeliveries()
        }
        let thread = TestThread { center.post(topic, 2) }
        await thread.joined()
        await center.waitForPendingDeliveries()
        #expect(await log.values == Array(repeating: .medium, count: priorities.count + 1))
        let seen = await coalescedLog.values
        #expect(seen.count == priorities.count + 1)
        #expect(seen.allSatisfy { $0 == .medium }, "\(seen)")
        withExtendedLifetime((token, coalesced)) {}
    }

    @Test func actorHandlersSeeNoneOfThePostersTaskLocalValues() async {
        let center = PostCenter()
        let topic = Topic<Int>("task.local")
        let log = MailboxLog<Int?>()
        let coalescedLog = MailboxLog<Int?>()
        let token = center.subscribe(topic, on: log) { log, _ in log.receive(PostTrace.id) }
        let coalesced = center.subscribe(topic, on: coalescedLog, coalesced: true) { log, _ in
            log.receive(PostTrace.id)
        }
        await Task {
            PostTrace.$id.withValue(7) { _ = center.post(topic, 1) }
        }.value
        await center.waitForPendingDeliveries()
        PostTrace.$id.withValue(8) { _ = center.post(topic, 2) }
        await center.waitForPendingDeliveries()
        #expect(await log.values == [nil, nil])
        #expect(await coalescedLog.values == [nil, nil])
        withExtendedLifetime((token, coalesced)) {}
    }

    // MARK: replay on actors

    @Test func replayOnAnActorSubscriptionDeliversTheRetainedPostFirst() async {
        let center = PostCenter()
        let topic = Topic<Int>("tick")
        let log = MailboxLog<Int>()
        center.post(topic, 1, retain: true)
        center.post(topic, 2, retain: true)
        let token = center.subscribe(topic, on: log, replay: true) { log, value in log.receive(value) }
        center.post(topic, 3)
        center.post(topic, 4, retain: true)
        await center.waitForPendingDeliveries()
        #expect(await log.values == [2, 3, 4])
        let plain = MailboxLog<Int>()
        let withoutReplay = center.subscribe(topic, on: plain) { log, value in log.receive(value) }
        let names = MailboxLog<String>()
        let envelopes = center.subscribe("tick", on: names, replay: true) { log, post in
            log.receive("\(post.payload(as: Int.self) ?? -1)")
        }
        center.post(topic, 5)
        await center.waitForPendingDeliveries()
        #expect(await plain.values == [5])
        #expect(await names.values == ["4", "5"])
        withExtendedLifetime((token, withoutReplay, envelopes)) {}
    }

    @Test func replayOnAnActorRacingRetainedPostsDeliversEachOnceInOrder() async {
        for round in 0..<10 {
            let center = PostCenter()
            let topic = Topic<Int>("race.retained")
            center.post(topic, 0, retain: true)
            let last = 3_000
            let poster = TestThread { for i in 1...last { center.post(topic, i, retain: true) } }
            // Subscriptions made while retained posts race with them: each must get the one it
            // replays, then every later post exactly once, in order (a retained post stored
            // before the subscription and reaching it live is dropped, not delivered twice).
            var logs: [(MailboxLog<Int>, Subscription)] = []
            for _ in 0..<40 {
                let log = MailboxLog<Int>()
                logs.append((log, center.subscribe(topic, on: log, replay: true) { log, value in log.receive(value) }))
            }
            await poster.joined()
            await center.waitForPendingDeliveries()
            for (index, (log, _)) in logs.enumerated() {
                let values = await log.values
                #expect(
                    values.first.map { values == Array($0...last) } ?? false,
                    "round \(round), subscription \(index): \(values.prefix(4))…")
            }
            withExtendedLifetime(logs) {}
        }
    }
}
