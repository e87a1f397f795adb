import Dispatch
import Foundation
import SubscriptionsTestSupport
import Synchronization
import Testing

@testable import Subscriptions

// Coalesced, throttled and debounced delivery (`Delivery.coalesced` and friends).
//
// Timing: the state machine is tested with made-up times, without threads or clocks. The tests
// that run real deliveries assert counts, orders and payloads, never durations; the only time
// comparison is a lower bound the code guarantees (a throttle's call starts at least one interval
// after the previous call returned, read by the handler on the clock the engine schedules by),
// which a slow machine can only widen.

/// A post of one of the stress threads: which thread, and its sequence number there.
private struct Stamp: Sendable, Equatable {
    let thread: Int
    let seq: Int
}

/// Records a handler's calls and whether two of them ever overlapped.
private final class CallLog<Value: Sendable>: @unchecked Sendable {
    // @unchecked: everything is behind `lock` (an NSLock, which ThreadSanitizer sees).
    private let lock = NSLock()
    private var running = 0
    private var values: [Value] = []
    private var starts: [UInt64] = []
    private var ends: [UInt64] = []
    private(set) var overlapped = false

    func enter(_ value: Value) {
        lock.withLock {
            running += 1
            if running > 1 { overlapped = true }
            values.append(value)
            starts.append(DispatchTime.now().uptimeNanoseconds)
        }
    }

    func exit() {
        lock.withLock {
            running -= 1
            ends.append(DispatchTime.now().uptimeNanoseconds)
        }
    }

    var received: [Value] { lock.withLock { values } }
    var startTimes: [UInt64] { lock.withLock { starts } }
    var endTimes: [UInt64] { lock.withLock { ends } }
    var hasOverlapped: Bool { lock.withLock { overlapped } }
}

@Suite("Paced delivery: the state machine")
struct PacingMachineTests {
    @Test func coalescedArmsOnceAndCallsAgainOnlyForANewerPayload() {
        var m = _PacingMachine(interval: 0, debounce: false)
        do {
            let r = m.posted(at: 0)
            #expect(r == (true, 0))
        }
        do {
            let r = m.posted(at: 1)
            #expect(r == (false, nil))  // replaces the pending payload, nothing armed
        }
        do {
            let r = m.woke(at: 2)
            #expect(r == .call)
        }
        do {
            let r = m.posted(at: 3)
            #expect(r == (true, nil))  // during the call: the chain is still armed
        }
        do {
            let r = m.called(at: 4)
            #expect(r == 0)  // so the call's end schedules the next one
        }
        do {
            let r = m.woke(at: 5)
            #expect(r == .call)
        }
        do {
            let r = m.called(at: 6)
            #expect(r == nil)  // nothing new: the chain ends
        }
        do {
            let r = m.posted(at: 7)
            #expect(r == (true, 0))
        }
        // Coalescing posts pass no time (they never read the clock): a post at "0" after a call
        // at a late time still wakes up at once.
        do {
            let r = m.woke(at: 1_000_000_000)
            #expect(r == .call)
        }
        do {
            let r = m.called(at: 1_000_000_001)
            #expect(r == nil)
        }
        do {
            let r = m.posted(at: 0)
            #expect(r == (true, 0))
        }
    }

    /// Each public pacing drives the machine its documentation describes: `.throttled` calls the
    /// first post at once and then waits an interval after each call (not for the posts to
    /// stop), `.debounced` waits an interval after every post, `.coalesced` never waits; the
    /// interval keeps its fraction of a second. A throttle counts from the end of the call.
    @Test func eachPacingDrivesTheMachineItsDocumentationDescribes() {
        let ms100: UInt64 = 100_000_000
        var throttle = Pacing.throttled(.milliseconds(100))._machine
        #expect(throttle.posted(at: 1_000) == (true, 0))  // leading edge: at once
        #expect(throttle.woke(at: 1_000) == .call)
        #expect(throttle.posted(at: 2_000) == (true, nil))
        #expect(throttle.called(at: 3_000) == ms100)  // one interval after the call returned
        // Posts that keep coming do not push a throttle's next call back.
        #expect(throttle.posted(at: 50_000_000) == (false, nil))
        #expect(throttle.woke(at: 2_000 + ms100) == .wait(1_000))
        #expect(throttle.woke(at: 3_000 + ms100) == .call)

        var debounce = Pacing.debounced(.milliseconds(100))._machine
        #expect(debounce.posted(at: 1_000) == (true, ms100))
        #expect(debounce.posted(at: 50_000_000) == (false, nil))
        #expect(debounce.woke(at: 1_000 + ms100) == .wait(50_000_000 - 1_000))  // counts from the last post

        var coalesce = Pacing.coalesced._machine
        #expect(coalesce.posted(at: 1_000) == (true, 0))
        #expect(coalesce.woke(at: 1_000) == .call)
        #expect(coalesce.posted(at: 1_001) == (true, nil))
        #expect(coalesce.called(at: 1_002) == 0)

        var fractional = Pacing.throttled(.seconds(1.5))._machine
        #expect(fractional.posted(at: 0) == (true, 0))
        #expect(fractional.woke(at: 0) == .call)
        #expect(fractional.posted(at: 1) == (true, nil))
        #expect(fractional.called(at: 0) == 1_500_000_000)
    }

    @Test func throttledCallsAtOnceThenAtMostOncePerIntervalWithTheTrailingEdge() {
        var m = _PacingMachine(interval: 100, debounce: false)
        do {
            let r = m.posted(at: 1_000)
            #expect(r == (true, 0))  // leading edge: at once
        }
        do {
            let r = m.woke(at: 1_000)
            #expect(r == .call)
        }
        do {
            let r = m.posted(at: 1_010)
            #expect(r == (true, nil))
        }
        do {
            let r = m.called(at: 1_020)
            #expect(r == 100)  // trailing edge: at 1_120, one interval after the call returned
        }
        do {
            let r = m.woke(at: 1_050)
            #expect(r == .wait(70))  // a wake-up too early waits again
        }
        do {
            let r = m.woke(at: 1_120)
            #expect(r == .call)
        }
        do {
            let r = m.called(at: 1_121)
            #expect(r == nil)
        }
        do {
            let r = m.posted(at: 1_150)
            #expect(r == (true, 71))  // quiet for less than an interval: waits for it
        }
        do {
            let r = m.woke(at: 1_221)
            #expect(r == .call)
        }
        do {
            let r = m.called(at: 1_221)
            #expect(r == nil)
        }
        do {
            let r = m.posted(at: 5_000)
            #expect(r == (true, 0))  // quiet for longer: at once again
        }
    }

    @Test func debouncedCallsOnceThePostsStoppedForTheInterval() {
        var m = _PacingMachine(interval: 100, debounce: true)
        do {
            let r = m.posted(at: 0)
            #expect(r == (true, 100))
        }
        do {
            let r = m.posted(at: 60)
            #expect(r == (false, nil))
        }
        do {
            let r = m.woke(at: 100)
            #expect(r == .wait(60))  // the last post was at 60: wait until 160
        }
        do {
            let r = m.posted(at: 150)
            #expect(r == (false, nil))
        }
        do {
            let r = m.woke(at: 160)
            #expect(r == .wait(90))
        }
        do {
            let r = m.woke(at: 250)
            #expect(r == .call)
        }
        do {
            let r = m.posted(at: 260)
            #expect(r == (true, nil))  // during the call
        }
        do {
            let r = m.called(at: 270)
            #expect(r == 90)  // one interval after that post
        }
        do {
            let r = m.woke(at: 360)
            #expect(r == .call)
        }
        do {
            let r = m.called(at: 361)
            #expect(r == nil)
        }
    }

    @Test func aDroppedPayloadEndsTheChainAndTheNextPostStartsANewOne() {
        var m = _PacingMachine(interval: 0, debounce: false)
        _ = m.posted(at: 0)
        do {
            let r = m.drop()
            #expect(r)
        }
        do {
            let r = m.drop()
            #expect(!r)
        }
        do {
            let r = m.posted(at: 1)
            #expect(r == (true, 0))
        }
        do {
            let r = m.empty()
            #expect(r)
        }
        do {
            let r = m.woke(at: 2)
            #expect(r == .idle)  // the scheduled wake-up finds nothing and ends the chain
        }
        do {
            let r = m.posted(at: 3)
            #expect(r == (true, 0))
        }
    }

    @Test func pacingReplacesThePacingOfAPacedDelivery() {
        let queue = DispatchQueue(label: "paced.replace")
        guard case .paced(let base, let pacing) = Delivery.queue(queue).throttled(.seconds(3600)).coalesced else {
            Issue.record("not paced")
            return
        }
        guard case .queue = base else {
            Issue.record("the base is not the queue")
            return
        }
        #expect(pacing == .coalesced)
        guard case .paced(let pacing) = MainActorDelivery.mainActor.coalesced else {
            Issue.record("not paced")
            return
        }
        #expect(pacing == .coalesced)
        #expect(Pacing.throttled(.milliseconds(1_500))._machine.interval == 1_500_000_000)
    }
}

@Suite("Paced delivery")
struct PacedDeliveryTests {
    /// 100,000 posts from 4 threads to a coalesced subscriber whose handler takes 1 ms, on a
    /// concurrent queue: the handler runs far fewer times, never twice at once, never goes back to
    /// an older post of a thread, and ends with the last post; after `cancel()` returns nothing
    /// runs, although the threads go on posting.
    @Test func coalescedStressEndsWithTheLastPostAndNothingRunsAfterCancel() async {
        let center = PostCenter()
        let topic = Topic<Stamp>("paced.stress")
        let queue = DispatchQueue(label: "paced.stress", attributes: .concurrent)
        let log = CallLog<Stamp>()
        let cancelled = Flag()
        let lateCalls = Counter()
        let token = center.subscribe(topic, delivery: .queue(queue).coalesced) { stamp in
            if cancelled.isSet { lateCalls.increment() }
            log.enter(stamp)
            usleep(1_000)
            log.exit()
        }
        let perThread = 25_000
        await TestThread.run {
            Reliability.onThreads(4) { thread in
                for seq in 0..<perThread { center.post(topic, Stamp(thread: thread, seq: seq)) }
            }
        }
        center.post(topic, Stamp(thread: 9, seq: 0))  // the last post
        await center.waitForPendingDeliveries()

        let received = log.received
        #expect(received.last == Stamp(thread: 9, seq: 0))
        #expect(received.count < 4 * perThread / 10)
        #expect(!log.hasOverlapped)
        for thread in 0..<4 {
            let seqs = received.filter { $0.thread == thread }.map(\.seq)
            #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "thread \(thread) went back")
        }

        // Cancel while four threads keep posting: nothing runs once `cancel()` returned.
        let stop = Flag()
        let posters = (0..<4).map { thread in
            TestThread {
                var seq = perThread
                while !stop.isSet {
                    center.post(topic, Stamp(thread: thread, seq: seq))
                    seq += 1
                }
            }
        }
        // Calls are under way.
        while log.received.count < received.count + 3 { try? await Task.sleep(for: .milliseconds(1)) }
        token.cancel()
        cancelled.set()
        let countAtCancel = log.received.count
        for _ in 0..<20 { center.post(topic, Stamp(thread: 9, seq: 1)) }
        stop.set()
        for poster in posters { await poster.joined() }
        queue.sync(flags: .barrier) {}
        await center.waitForPendingDeliveries()
        #expect(lateCalls.count == 0)
        #expect(log.received.count == countAtCancel)
    }

    /// `cancel()` waits for the running call and drops the pending payload, which is released
    /// by the time it returns.
    @Test func cancelWaitsForTheRunningCallAndDropsThePendingPayload() {
        let center = PostCenter()
        let topic = Topic<Tracked>("paced.cancel")
        let queue = DispatchQueue(label: "paced.cancel")
        let live = LiveObjects()
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let log = Recorder<String>()
        let token = center.subscribe(topic, delivery: .queue(queue).coalesced) { payload in
            log.append(payload.name)
            started.signal()
            release.wait()
        }
        center.post(topic, Tracked("first", live: live))
        started.wait()  // the first call is running
        let gate = DispatchSemaphore(value: 0)
        queue.async { gate.wait() }  // the next wake-up waits behind this: only cancel can drop
        center.post(topic, Tracked("pending", live: live))
        center.post(topic, Tracked("newest", live: live))  // replaces "pending", which is released
        #expect(live.alive == 2)  // "first" (in the call) and "newest" (pending)
        let canceller = TestThread { token.cancel() }
        #expect(!canceller.join(timeout: 0.2))  // waits for the running call
        release.signal()
        canceller.join()
        #expect(live.alive == 0)  // the pending payload was dropped, the call's one released
        gate.signal()
        queue.sync {}
        #expect(log.values == ["first"])
    }

    /// A payload of a class (not trivially copyable) is replaced like any other: the handler gets
    /// the newest, and each replaced payload is released when it is replaced.
    @Test func replacedClassPayloadsAreReleasedAndTheNewestDelivered() async {
        let center = PostCenter()
        let topic = Topic<Tracked>("paced.class")
        let queue = DispatchQueue(label: "paced.class")
        let live = LiveObjects()
        let log = Recorder<String>()
        let token = center.subscribe(topic, delivery: .queue(queue).coalesced) { log.append($0.name) }
        let gate = DispatchSemaphore(value: 0)
        queue.async { gate.wait() }  // holds the queue, so the call stays pending
        for name in ["a", "b", "c"] { center.post(topic, Tracked(name, live: live)) }
        #expect(live.alive == 1)
        gate.signal()
        await center.waitForPendingDeliveries()
        #expect(log.values == ["c"])
        #expect(live.alive == 0)
        withExtendedLifetime(token) {}
    }

    /// A payload pending when its call comes up while paused is dropped; after `resume()` the
    /// next post is delivered.
    @Test func pauseDropsThePendingPayloadAndResumeDeliversTheNextPost() async {
        let center = PostCenter()
        let topic = Topic<Int>("paced.pause")
        let queue = DispatchQueue(label: "paced.pause")
        let log = Recorder<Int>()
        let token = center.subscribe(topic, delivery: .queue(queue).coalesced) { log.append($0) }
        let gate = DispatchSemaphore(value: 0)
        queue.async { gate.wait() }  // holds the queue, so the call stays pending
        center.post(topic, 1)
        token.pause()
        #expect(center.post(topic, 2) == 0)  // paused: not delivered
        gate.signal()
        await center.waitForPendingDeliveries()
        token.resume()
        center.post(topic, 3)
        await center.waitForPendingDeliveries()
        #expect(log.values == [3])
    }

    /// Throttled: the first post at once, then at most one call per interval with the newest
    /// payload, and the last post always delivered. The interval counts from the end of a call:
    /// each call takes 10 ms, so a throttle counting from the start would begin the next call
    /// 30 ms after the previous one returned.
    @Test func throttledDeliversTheFirstAndTheLastAndSpacesCallsByTheInterval() async {
        let center = PostCenter()
        let topic = Topic<Int>("paced.throttle")
        let queue = DispatchQueue(label: "paced.throttle")
        let log = CallLog<Int>()
        let interval: UInt64 = 40_000_000
        let token = center.subscribe(topic, delivery: .queue(queue).throttled(.nanoseconds(Int(interval)))) {
            log.enter($0)
            usleep(10_000)
            log.exit()
        }
        for i in 0..<200 {
            center.post(topic, i)
            usleep(1_000)
        }
        await center.waitForPendingDeliveries()
        // The leading edge (a call scheduled at once) is pinned by the state machine's test: here
        // the first call gets whatever was newest when the queue ran it.
        let received = log.received
        #expect(received.last == 199)
        #expect(received == received.sorted())
        #expect(received.count < 200)
        let starts = log.startTimes
        let ends = log.endTimes
        #expect(starts.count == ends.count)
        for (end, start) in zip(ends, starts.dropFirst()) {
            #expect(start - end >= interval, "a call started within one interval of the previous call's end")
        }
        withExtendedLifetime(token) {}
    }

    /// Debounced: one call with the last payload once the posts stopped; a later burst makes one
    /// more.
    @Test func debouncedCallsOnceWithTheLastPayloadOfEachBurst() async {
        let center = PostCenter()
        let topic = Topic<Int>("paced.debounce")
        let queue = DispatchQueue(label: "paced.debounce")
        let log = Recorder<Int>()
        let token = center.subscribe(topic, delivery: .queue(queue).debounced(.milliseconds(300))) {
            log.append($0)
        }
        for i in 0..<50 { center.post(topic, i) }
        #expect(log.values.isEmpty)
        await center.waitForPendingDeliveries()
        #expect(log.values == [49])
        for i in 100..<120 { center.post(topic, i) }
        await center.waitForPendingDeliveries()
        #expect(log.values == [49, 119])
        withExtendedLifetime(token) {}
    }

    /// A pending timer holds neither the handler's captures nor a selector's observer, and the
    /// payload it waits with is released with the token.
    @Test func aPendingTimerHoldsNoStrongReferenceToTheSubscriber() {
        let center = PostCenter()
        let topic = Topic<Tracked>("paced.timer")
        let queue = DispatchQueue(label: "paced.timer")
        let live = LiveObjects()
        let calls = Counter()
        var subscriber: Tracked? = Tracked("subscriber", live: live)
        var token: Subscription? = center.subscribe(topic, delivery: .queue(queue).debounced(.seconds(3600))) {
            [subscriber] _ in
            withExtendedLifetime(subscriber) { calls.increment() }
        }
        subscriber = nil
        center.post(topic, Tracked("payload", live: live))
        #expect(live.alive == 2)
        token = nil
        // The handler's capture and the pending payload, with a timer still armed: with the next
        // batch of dropped tokens (Guarantees rule 8).
        #expect(eventually { live.alive == 0 })
        withExtendedLifetime(token) {}

        final class Observer: Sendable {
            func receive(_ value: Tracked) {}
        }
        var observer: Observer? = Observer()
        weak var weakObserver: Observer?
        weakObserver = observer
        let registration = center.register(
            topic, observer: observer!, delivery: .queue(queue).throttled(.seconds(3600)), selector: Observer.receive)
        center.post(topic, Tracked("first", live: live))  // leading edge
        center.post(topic, Tracked("trailing", live: live))  // waits an hour
        queue.sync {}
        observer = nil
        #expect(weakObserver == nil)
        #expect(calls.count == 0)
        withExtendedLifetime(registration) {}
    }

    /// On the main actor: posted on the main thread, a burst becomes one later call with the
    /// newest payload (not one synchronous call per post).
    @Test @MainActor func mainActorCoalescedTurnsABurstOnTheMainThreadIntoOneCall() async {
        let center = PostCenter()
        let topic = Topic<Double>("paced.progress")
        var values: [Double] = []
        let token = center.subscribe(topic, delivery: .mainActor.coalesced) { p in
            MainActor.assertIsolated()
            values.append(p)
        }
        for i in 1...1_000 { center.post(topic, Double(i) / 1_000) }
        #expect(values.isEmpty)
        await center.waitForPendingDeliveries()
        #expect(values == [1.0])
        withExtendedLifetime(token) {}
    }

    /// Posted from other threads, main-actor throttling hands over the newest payload and the
    /// last one; selectors of a paced registration are ended by `removeObserver(_:)`.
    @Test @MainActor func mainActorThrottledFromAnotherThreadAndRemoveObserver() async {
        @MainActor final class Bar {
            var values: [Int] = []
            func show(_ value: Int) { values.append(value) }
        }
        let center = PostCenter()
        let topic = Topic<Int>("paced.bar")
        let bar = Bar()
        let token = center.register(
            topic, observer: bar, delivery: .mainActor.throttled(.milliseconds(20)), selector: Bar.show)
        await Task.detached {
            for i in 0..<100 {
                center.post(topic, i)
                usleep(500)
            }
        }.value
        await center.waitForPendingDeliveries()
        #expect(bar.values.last == 99)
        #expect(bar.values.count < 100)
        #expect(bar.values == bar.values.sorted())
        center.removeObserver(bar)
        #expect(center.post(topic, 100) == 0)
        withExtendedLifetime(token) {}
    }

    /// A sender filter works with pacing; a one-shot delivers its one post with the base delivery.
    @Test func senderFilterAndOneShotWithPacing() async {
        final class Sender: Sendable {}
        let center = PostCenter()
        let topic = Topic<Int>("paced.sender")
        let queue = DispatchQueue(label: "paced.sender")
        let sender = Sender()
        let log = Recorder<Int>()
        let filtered = center.subscribe(topic, from: sender, delivery: .queue(queue).coalesced) { log.append($0) }
        #expect(center.post(topic, 1) == 0)
        #expect(center.post(topic, 2, from: sender) == 1)
        await center.waitForPendingDeliveries()
        #expect(log.values == [2])

        let once = Recorder<Int>()
        let one = center.subscribe(topic, delivery: .queue(queue).debounced(.seconds(3600)), once: true) {
            once.append($0)
        }
        center.post(topic, 7)
        center.post(topic, 8)
        await center.waitForPendingDeliveries()
        #expect(once.values == [7])
        withExtendedLifetime((filtered, one)) {}
    }

    /// On an actor: the handler runs far fewer times than posts arrive, ends with the last post,
    /// and nothing runs after `cancel()` returns, although a thread goes on posting.
    @Test func actorCoalescedEndsWithTheLastPostAndStopsAtCancel() async {
        // On a queue of its own: its handler sleeps there, not on a cooperative thread.
        actor Model {
            let executor = QueueExecutor("paced.actor")
            nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
            var values: [Int] = []
            func record(_ value: Int) {
                values.append(value)
                usleep(1_000)
            }
        }
        let center = PostCenter()
        let topic = Topic<Int>("paced.actor")
        let model = Model()
        let cancelled = Flag()
        let lateCalls = Counter()
        let token = center.subscribe(topic, on: model, coalesced: true) { model, value in
            if cancelled.isSet { lateCalls.increment() }
            model.record(value)
        }
        let posts = 20_000
        await TestThread.run {
            Reliability.onThreads(2) { thread in
                for i in 0..<posts / 2 { center.post(topic, thread == 0 ? i : -1) }
            }
        }
        center.post(topic, posts)  // the last post
        var values: [Int] = []
        for _ in 0..<60_000 {
            values = await model.values
            if values.last == posts { break }
            try? await Task.sleep(for: .milliseconds(1))
        }
        #expect(values.last == posts)
        #expect(values.count < posts / 10)
        let own = values.filter { $0 >= 0 }
        #expect(own == own.sorted())

        let stop = Flag()
        let poster = TestThread {
            while !stop.isSet { center.post(topic, 0) }
        }
        while await model.values.count < values.count + 2 { try? await Task.sleep(for: .milliseconds(1)) }
        token.cancel()
        cancelled.set()
        stop.set()
        await poster.joined()
        #expect(center.post(topic, 1) == 0)
        try? await Task.sleep(for: .milliseconds(20))  // room for a wrongly started call to show
        #expect(lateCalls.count == 0)
    }

    /// Misuse stops with a message naming it.
    @Test func pacedImmediateTraps() async {
        await #expect(processExitsWith: .failure) {
            let token = PostCenter().subscribe(Topic<Int>("x"), delivery: Delivery.immediate.coalesced) { _ in }
            withExtendedLifetime(token) {}
        }
    }

    /// Pacing with `replay: true`: the retained post is the first post the pacing sees. Alone, it
    /// is called (coalesced, throttled and debounced alike); a post made before the first call
    /// replaces it, as any pending payload.
    @Test(.tags(.pin)) func replayFeedsTheRetainedPostToThePacingFirst() async {
        let center = PostCenter()
        let topic = Topic<Int>("paced.replay")
        center.post(topic, 5, retain: true)
        let queue = DispatchQueue(label: "paced.replay")
        let deliveries: [Delivery] = [
            .queue(queue).coalesced, .queue(queue).throttled(.milliseconds(1)),
            .queue(queue).debounced(.milliseconds(1)),
        ]
        for delivery in deliveries {
            let alone = Recorder<Int>()
            let token = center.subscribe(topic, delivery: delivery, replay: true) { alone.append($0) }
            await center.waitForPendingDeliveries()
            #expect(alone.values == [5], "\(delivery)")
            queue.suspend()
            let replaced = Recorder<Int>()
            let second = center.subscribe(topic, delivery: delivery, replay: true) { replaced.append($0) }
            center.post(topic, 6)
            queue.resume()
            await center.waitForPendingDeliveries()
            #expect(replaced.values == [6], "\(delivery)")
            #expect(alone.values == [5, 6], "\(delivery)")
            withExtendedLifetime((token, second)) {}
        }
    }

    /// A paced `.mainActor` subscription replays later, on the main queue, like every paced call,
    /// also when subscribing on the main actor; a register with a paced delivery replays too.
    @MainActor @Test(.tags(.pin)) func pacedMainActorReplayRunsLaterOnTheMainQueue() async {
        let center = PostCenter()
        let topic = Topic<Int>("paced.replay.main")
        center.post(topic, 9, retain: true)
        var seen: [Int] = []
        let token = center.subscribe(topic, delivery: .mainActor.coalesced, replay: true) { seen.append($0) }
        #expect(seen.isEmpty)
        await center.waitForPendingDeliveries()
        #expect(seen == [9])
        withExtendedLifetime(token) {}
    }

    @Test func aNegativeIntervalTraps() async {
        await #expect(processExitsWith: .failure) {
            let queue = DispatchQueue(label: "negative")
            let token = PostCenter().subscribe(Topic<Int>("x"), delivery: .queue(queue).throttled(.seconds(-1))) { _ in
            }
            withExtendedLifetime(token) {}
        }
    }
}
