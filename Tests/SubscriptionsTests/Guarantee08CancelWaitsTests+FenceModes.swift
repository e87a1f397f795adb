import Dispatch
import Foundation
import SubscriptionsTestSupport
import Synchronization
import Testing

@testable import Subscriptions

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension Guarantee08CancelWaits {
    /// The engine's cancellation protocol (see `Engine/DESIGN.md`), in whichever fence mode the
    /// process runs: CI runs this suite with the process-wide fence and again with
    /// `SUBSCRIPTIONS_PROCESS_FENCE=off`. A deadlock is caught by a bounded wait; on failure the
    /// blocked threads and their tokens are leaked on purpose (releasing them could block again).
    @Suite("The cancellation protocol in both fence modes", .tags(.pin))
    struct FenceModes {
        /// Two threads each run a handler of their own name, and each handler cancels the other's
        /// subscription while both are running: each `cancel()` would wait for the other thread,
        /// which waits in its own `cancel()`. The second to wait sees the cycle and returns like a
        /// cancel from inside the handler; the closures go once the last call ended.
        @Test func runningHandlersCancellingEachOtherNeverDeadlock() {
            let rounds = Reliability.scaled(10_000, minimum: 500)
            let center = PostCenter()
            let captures = Reliability.Tally()
            let finished = DispatchSemaphore(value: 0)
            let progress = Atomic<Int>(0)
            let failures = Atomic<Int>(0)
            let worker = TestThread {
                let a = TokenSlot()
                let b = TokenSlot()
                let inA = DispatchSemaphore(value: 0)
                let inB = DispatchSemaphore(value: 0)
                for _ in 0..<rounds {
                    let ca = Reliability.Capture(captures)
                    let cb = Reliability.Capture(captures)
                    a.token = center.subscribe("mutual.a") { _ in
                        withExtendedLifetime(ca) {}
                        inA.signal()
                        inB.wait()
                        b.cancel()
                    }
                    b.token = center.subscribe("mutual.b") { _ in
                        withExtendedLifetime(cb) {}
                        inB.signal()
                        inA.wait()
                        a.cancel()
                    }
                    let other = TestThread { center.post("mutual.b") }
                    center.post("mutual.a")
                    other.join()
                    // Both cancels returned; both closures are gone (each released by the last call).
                    if a.token?.isActive != false || b.token?.isActive != false { failures.add(1, ordering: .relaxed) }
                    a.token = nil
                    b.token = nil
                    progress.add(1, ordering: .relaxed)
                }
                finished.signal()
            }
            // A deadlock stops the rounds: it is reported once no round ended for 15 s (a round
            // takes microseconds), or after 240 s in all.
            var done = false
            var (seconds, last, stalled) = (0, -1, 0)
            while !done && stalled < 15 && seconds < 240 {
                done = finished.wait(timeout: .now() + 1) == .success
                let now = progress.load(ordering: .relaxed)
                (seconds, last, stalled) = (seconds + 1, now, now == last ? stalled + 1 : 0)
            }
            if done { worker.join() }
            #expect(
                done, "two handlers cancelling each other deadlocked after \(progress.load(ordering: .relaxed)) rounds")
            #expect(failures.load(ordering: .relaxed) == 0)
            #expect(captures.current == 0, "closures of mutually cancelled subscriptions were not released")
            // The orphan list is the process's: a test running beside this one may hold an
            // orphan of its own for a moment (a cancel from inside its handler), so wait, bounded,
            // for the list to empty rather than read it once.
            #expect(eventually { _Orphans.count == 0 }, "orphans left: \(_Orphans.count)")
        }

        /// A background post's handler waits for a "main" queue (as `DispatchQueue.main.sync`
        /// does) while that queue cancels another subscription of the same name, one that is not
        /// running: a normal token not reached yet, or a one-shot that already fired. `cancel()`
        /// must not wait for the background delivery.
        @Test(arguments: [false, true])
        func cancelOnAQueueAHandlerWaitsForDoesNotDeadlock(firedOneShot: Bool) {
            for round in 0..<10 {
                let center = PostCenter()
                let main = makeSerialQueue("engine.main-like")
                let inHandler = DispatchSemaphore(value: 0)
                let cancelled = DispatchSemaphore(value: 0)
                let handlerTimedOut = Flag()
                let first = center.subscribe("sync") { post in
                    guard post.flag == "background" else { return }
                    inHandler.signal()
                    // `main.sync {}` with a bound, so a deadlock fails the test instead of hanging it.
                    let reached = DispatchSemaphore(value: 0)
                    main.async { reached.signal() }
                    if reached.wait(timeout: .now() + 5) == .timedOut { handlerTimedOut.set() }
                }
                let calls = Counter()
                let other =
                    firedOneShot
                    ? center.subscribe("sync", once: true) { _ in calls.increment() }
                    : center.subscribe("sync") { _ in calls.increment() }
                if firedOneShot { center.post("sync", flag: "fire") }
                let callsBefore = calls.count
                // The "main" queue is busy cancelling when the handler starts waiting for it.
                main.async {
                    inHandler.wait()
                    other.cancel()
                    cancelled.signal()
                }
                let poster = TestThread { center.post("sync", flag: "background") }
                let returned = cancelled.wait(timeout: .now() + 5) == .success
                let posted = poster.join(timeout: 10)
                #expect(returned, "round \(round): cancel() on the queue waited for the handler that waits for it")
                #expect(posted && !handlerTimedOut.isSet, "round \(round)")
                #expect(calls.count == callsBefore, "round \(round): the cancelled subscription was called")
                if !returned || !posted {
                    _ = Unmanaged.passRetained(center)
                    return
                }
                withExtendedLifetime(first) {}
            }
        }

        /// Thread 1's post fired a one-shot whose handler is still running; thread 2's post reaches
        /// another handler of the name, which cancels the one-shot. `cancel()` must wait for the
        /// one-shot's handler on thread 1, not take thread 2's frame for the handler's own.
        @Test func cancelOfARunningOneShotFromAnotherDeliveryWaitsForItsHandler() {
            for round in 0..<10 {
                let center = PostCenter()
                let started = DispatchSemaphore(value: 0)
                let cancelling = Flag()
                let finished = Flag()
                let finishedAtReturn = Flag()
                let slot = TokenSlot()
                let canceller = center.subscribe("once") { post in
                    guard post.flag == "second" else { return }
                    started.wait()
                    cancelling.set()
                    slot.cancel()
                    if finished.isSet { finishedAtReturn.set() }
                }
                slot.token = center.subscribe("once", once: true) { _ in
                    started.signal()
                    while !cancelling.isSet { sched_yield() }
                    usleep(2_000)  // a long handler: the cancel must wait for it whatever it takes
                    finished.set()
                }
                let first = TestThread { center.post("once", flag: "first") }
                let second = TestThread { center.post("once", flag: "second") }
                first.join()
                second.join()
                #expect(finishedAtReturn.isSet, "round \(round): cancel() returned while the one-shot's handler ran")
                withExtendedLifetime(canceller) {}
            }
        }

        /// A one-shot that cancels its own token inside its handler returns at once, even while
        /// another thread's delivery of the name waits for the canceller.
        @Test func oneShotCancellingItselfInsideItsHandlerReturnsAtOnce() {
            for round in 0..<10 {
                let center = PostCenter()
                let otherInHandler = DispatchSemaphore(value: 0)
                let cancelReturned = DispatchSemaphore(value: 0)
                let otherTimedOut = Flag()
                let blocker = center.subscribe("self") { post in
                    guard post.flag == "other" else { return }
                    otherInHandler.signal()
                    if cancelReturned.wait(timeout: .now() + 5) == .timedOut { otherTimedOut.set() }
                }
                let slot = TokenSlot()
                let ran = Counter()
                slot.token = center.subscribe("self", once: true) { _ in
                    ran.increment()
                    slot.cancel()
                    cancelReturned.signal()
                }
                let other = TestThread { center.post("self", flag: "other") }
                otherInHandler.wait()
                // The other post is held in the blocker, before the one-shot: fire it from here.
                center.post("self", flag: "mine")
                other.join()
                #expect(!otherTimedOut.isSet, "round \(round): a one-shot's cancel() inside its handler waited")
                #expect(ran.count == 1)
                #expect(slot.token?.isActive == false)
                withExtendedLifetime(blocker) {}
            }
        }

        /// 50,000 subscribe+cancel pairs while one delivery of the name runs all along: the route
        /// squeezes its tombstones out and frees replaced buffers without waiting for a quiet
        /// moment, so a post walks O(live) slots and memory stays O(live).
        @Test func cancelsDuringOneLongDeliveryKeepPostsAndMemoryProportionalToLiveSubscriptions() {
            let center = PostCenter()
            let key = _NameKey("long")
            let inside = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let live = (0..<10).map { _ in center.subscribe("long") { _ in } }
            let holder = center.subscribe("long") { post in
                guard post.flag == "hold" else { return }
                inside.signal()
                release.wait()
            }
            let poster = TestThread { center.post("long", flag: "hold") }
            inside.wait()
            let churn = Reliability.scaled(50_000, minimum: 5_000)
            var maxSlots = 0
            var maxRetired = 0
            for _ in 0..<churn {
                let token = center.subscribe("long") { _ in }
                token.cancel()
                let route = center._route(key)!
                maxSlots = max(maxSlots, route._slotCount)
                maxRetired = max(maxRetired, route._retiredCount)
            }
            // 11 live subscriptions: at most one tombstone per live one (or 8) beyond them.
            #expect(maxSlots <= 2 * 11 + 8, "a post would walk \(maxSlots) slots for 11 live subscriptions")
            // The buffer the long delivery reads, plus at most the one replaced last.
            #expect(maxRetired <= 2, "\(maxRetired) replaced slot buffers kept")
            #expect(center.post("long") == 11)
            release.signal()
            poster.join()
            withExtendedLifetime((live, holder)) {}
        }

        /// A route that only grows frees the buffers it replaced once they hold `reclaimSlots`
        /// slots, not only once `reclaimBatch` of them are retired: otherwise they add about one more buffer's
        /// worth of memory to every subscription of a large route.
        @Test func aGrowingRouteFreesReplacedBuffersBeforeTheyHoldAsManySlotsAsReclaimSlots() {
            let center = PostCenter()
            let key = _NameKey("growing")
            var tokens: [Subscription] = []
            var maxRetiredSlots = 0
            for _ in 0..<20_000 {
                tokens.append(center.subscribe("growing") { _ in })
                maxRetiredSlots = max(maxRetiredSlots, center._route(key)!._retiredSlots)
            }
            #expect(
                maxRetiredSlots < _Route.reclaimSlots,
                "\(maxRetiredSlots) slots of replaced buffers kept while 20,000 subscriptions were made")
            #expect(center.post("growing") == 20_000)
            withExtendedLifetime(tokens) {}
        }
    }
}
