import Dispatch
import Foundation
import SubscriptionsTestSupport
import Testing

@testable import Subscriptions

/// Guarantee 11: the center holds a handler closure only while its subscription lives; after
/// cancel or deinit the closure and everything it captured are released (for an orphan, a token
/// dropped while its handler runs, when the last call ends).
///
/// Lifetimes are observed with `weak` references and live-instance counters.
@Suite("Guarantee 11: the center holds a handler closure only while its subscription lives")
struct Guarantee11ClosureLifetime {
    @Test(.tags(.pin)) func handlerCapturesAreReleasedWhenCancelReturns() {
        let center = PostCenter()
        let live = LiveObjects()
        var tracked: Tracked? = Tracked("capture", live: live)
        let token = center.subscribe("x") { [tracked] _ in _ = tracked }
        weak var weakTracked: Tracked?
        weakTracked = tracked
        tracked = nil
        #expect(center.post("x") == 1)
        #expect(weakTracked != nil)  // held by the handler while the subscription lives
        token.cancel()
        #expect(weakTracked == nil)
        #expect(live.alive == 0)
    }

    @Test(.tags(.pin)) func handlerCapturesAreReleasedWhenTheTokenDeinitialises() {
        let center = PostCenter()
        let live = LiveObjects()
        var tracked: Tracked? = Tracked("capture", live: live)
        var token: Subscription? = center.subscribe(Topic<Int>("x")) { [tracked] _ in _ = tracked }
        weak var weakTracked: Tracked?
        weakTracked = tracked
        tracked = nil
        #expect(weakTracked != nil)
        token = nil
        #expect(token == nil)
        // No call is under way: the closure goes with the next batch of dropped tokens, without
        // any further call into the library (a job the drop scheduled settles it).
        #expect(eventually { weakTracked == nil })
        #expect(live.alive == 0)
    }

    @Test(.tags(.pin)) func queuedHandlerCapturesAreReleasedWhenCancelReturnsWithDeliveriesPending() {
        let center = PostCenter()
        let queue = makeSerialQueue("lifetime.pending")
        let live = LiveObjects()
        var tracked: Tracked? = Tracked("capture", live: live)
        let token = center.subscribe("x", delivery: .queue(queue)) { [tracked] _ in _ = tracked }
        weak var weakTracked: Tracked?
        weakTracked = tracked
        tracked = nil
        queue.suspend()
        #expect(center.post("x") == 1)
        #expect(center.post("x") == 1)
        token.cancel()
        #expect(weakTracked == nil)
        queue.resume()
        queue.sync {}
        #expect(live.alive == 0)
    }

    @Test(.tags(.pin)) func handlerCapturesAreReleasedWhenCancelReturnsAfterWaitingForTheHandler() {
        // The handler runs on another thread when cancel() is called: cancel waits for it, then
        // releases the closure before returning.
        let center = PostCenter()
        let live = LiveObjects()
        let started = DispatchSemaphore(value: 0)
        let cancelling = Flag()
        var tracked: Tracked? = Tracked("capture", live: live)
        let token = center.subscribe("x") { [tracked] _ in
            _ = tracked
            started.signal()
            while !cancelling.isSet {}
            usleep(5_000)
        }
        weak var weakTracked: Tracked?
        weakTracked = tracked
        tracked = nil
        let poster = TestThread { center.post("x") }
        started.wait()
        cancelling.set()
        token.cancel()
        #expect(weakTracked == nil)
        #expect(live.alive == 0)
        poster.join()
    }

    @Test(.tags(.pin)) func queuedHandlerCapturesAreReleasedWhenCancelReturnsAfterWaitingForTheHandler() {
        // As above for a handler running on its queue. To hold the queue's thread right after
        // the delivery ends (where the engine's block may still reference the entry), the
        // handler cancels another subscription V of the name: V's captures are released when
        // the queued call ends, on the queue's thread, and V's capture deinit waits there until
        // the test has checked (a 5 s timeout only guards against a deadlock).
        final class Holder: Sendable {
            let checked: DispatchSemaphore
            init(_ checked: DispatchSemaphore) { self.checked = checked }
            deinit { _ = checked.wait(timeout: .now() + 5) }
        }
        let center = PostCenter()
        let queue = makeSerialQueue("lifetime.running")
        let live = LiveObjects()
        let started = DispatchSemaphore(value: 0)
        let checked = DispatchSemaphore(value: 0)
        let cancelling = Flag()
        let victim = TokenSlot()
        var holder: Holder? = Holder(checked)
        victim.token = center.subscribe("x", delivery: .queue(queue)) { [holder] _ in _ = holder }
        holder = nil
        var tracked: Tracked? = Tracked("capture", live: live)
        let token = center.subscribe("x", delivery: .queue(queue)) { [tracked] _ in
            _ = tracked
            victim.cancel()
            started.signal()
            while !cancelling.isSet {}
        }
        tracked = nil
        queue.suspend()
        #expect(center.post("x") == 2)
        queue.resume()
        started.wait()
        cancelling.set()
        token.cancel()
        let aliveAfterCancel = live.alive
        checked.signal()
        queue.sync {}
        #expect(aliveAfterCancel == 0, "the handler's captures outlived cancel()")
        #expect(live.alive == 0)
    }

    @Test(.tags(.pin)) func capturesOfAHandlerThatCancelsItselfAreReleasedWhenThePostReturns() {
        let center = PostCenter()
        let live = LiveObjects()
        let slot = TokenSlot()
        var tracked: Tracked? = Tracked("capture", live: live)
        slot.token = center.subscribe("x") { [tracked] _ in
            _ = tracked
            slot.cancel()
        }
        weak var weakTracked: Tracked?
        weakTracked = tracked
        tracked = nil
        #expect(center.post("x") == 1)
        #expect(weakTracked == nil)
        #expect(live.alive == 0)
    }

    @Test(.tags(.pin)) func capturesOfASubscriptionCancelledInANestedPostAreReleasedWhenTheOuterPostReturns() {
        let center = PostCenter()
        let live = LiveObjects()
        let slot = TokenSlot()
        var tracked: Tracked? = Tracked("capture", live: live)
        slot.token = center.subscribe("x") { [tracked] _ in
            _ = tracked
            center.post("y")
        }
        let killer = center.subscribe("y") { _ in slot.cancel() }
        weak var weakTracked: Tracked?
        weakTracked = tracked
        tracked = nil
        #expect(center.post("x") == 1)
        #expect(weakTracked == nil)
        #expect(live.alive == 0)
        withExtendedLifetime(killer) {}
    }

    @Test(.tags(.pin)) func releasingCapturesNeverHoldsALock() {
        // The captured object's deinit (user code) calls back into the center. Were a lock held
        // while the closure is released, this would deadlock.
        final class CallsBack: Sendable {
            let center: PostCenter
            let seen: Recorder<Int>
            init(_ center: PostCenter, _ seen: Recorder<Int>) {
                self.center = center
                self.seen = seen
            }
            deinit {
                seen.append(center.subscriptionCount(for: "x"))
                seen.append(center.post("x"))
                let token = center.subscribe("x") { _ in }
                seen.append(center.subscriptionCount(for: "x"))
                token.cancel()
            }
        }
        let center = PostCenter()
        let seen = Recorder<Int>()
        let other = center.subscribe("x") { _ in }
        var capture: CallsBack? = CallsBack(center, seen)
        let token = center.subscribe("x") { [capture] _ in _ = capture }
        capture = nil
        token.cancel()
        #expect(seen.values == [1, 1, 2])
        withExtendedLifetime(other) {}
    }

    // MARK: Guarantee 11: an orphan keeps its closure until its last call ends

    /// A token is dropped (its deinit cancels without waiting) while its handler runs on another
    /// thread. The handler's captures stay alive while that call runs, and go when it ends: on
    /// the thread that ran the call, before its post returns.
    @Test(.tags(.mutantPin)) func aTokenDroppedWhileItsHandlerRunsKeepsItsCapturesUntilTheCallEnds() {
        let center = PostCenter()
        let name = "pin.orphan.release"
        let started = DispatchSemaphore(value: 0)
        let dropped = DispatchSemaphore(value: 0)
        let callEnded = Flag()
        let log = ReleaseLog()
        let posterThread = Reliability.Locked<ObjectIdentifier?>(nil)
        var probe: ReleaseProbe? = ReleaseProbe(log, callEnded)
        weak var weakProbe: ReleaseProbe?
        weakProbe = probe
        var token: Subscription? = center.subscribe(name) { [probe] _ in
            withExtendedLifetime(probe) {}
            started.signal()
            dropped.wait()
            callEnded.set()
        }
        probe = nil
        // The entry the post is calling (`@testable`): it must stay allocated until the call ends.
        weak var weakEntry: _Entry?
        weakEntry = token?._entry
        let poster = TestThread {
            posterThread.withLock { $0 = currentThreadID() }
            center.post(name)
        }
        started.wait()
        token = nil  // the last reference: the deinit cancels without waiting
        let aliveWhileTheCallRuns = weakProbe != nil && weakEntry != nil
        dropped.signal()
        poster.join()
        #expect(token == nil)
        #expect(aliveWhileTheCallRuns, "the entry or its captures were released while the handler was still running")
        #expect(weakProbe == nil, "the captures outlived the last call of the dropped subscription")
        let release = log.entries
        #expect(release.count == 1)
        #expect(release.first?.afterTheCall == true)
        #expect(release.first?.thread == posterThread.current, "the captures were not released by the last call")
        #expect(center.post(name) == 0)
    }

    /// A handler cancels its own subscription (an orphan, noted in its thread's record); its call
    /// ends, and the post goes on to a later handler of the name that blocks. Meanwhile another
    /// thread parks and collects an orphan of its own, on another center. That collect must leave
    /// the first orphan alone, though no call of it runs any more: it belongs to the posting thread,
    /// which releases it when it closes its frame, before its post returns.
    @Test(.tags(.mutantPin)) func anOrphanIsReleasedByTheThreadThatCalledItNotByAnotherThreadsCollect() {
        let center = PostCenter()
        let other = PostCenter()
        let log = ReleaseLog()
        let callEnded = Flag()
        let inSecond = DispatchSemaphore(value: 0)
        let goOn = DispatchSemaphore(value: 0)
        let posterThread = Reliability.Locked<ObjectIdentifier?>(nil)
        let slot = TokenSlot()
        do {
            let probe = ReleaseProbe(log, callEnded)
            slot.token = center.subscribe("pin.orphan.owner") { [probe] _ in
                withExtendedLifetime(probe) {}
                slot.cancel()  // inside its own handler: an orphan of this thread
                callEnded.set()
            }
        }
        let second = center.subscribe("pin.orphan.owner") { _ in
            inSecond.signal()
            goOn.wait()
        }
        let poster = TestThread {
            posterThread.withLock { $0 = currentThreadID() }
            center.post("pin.orphan.owner")
        }
        inSecond.wait()
        // The first handler's call has ended; the poster is inside the second one.
        let ownSlot = TokenSlot()
        ownSlot.token = other.subscribe("pin.orphan.stranger") { _ in ownSlot.cancel() }
        #expect(other.post("pin.orphan.stranger") == 1)  // parks and collects an orphan of its own
        let releasedByTheStranger = log.entries.count
        goOn.signal()
        poster.join()
        #expect(releasedByTheStranger == 0, "another thread's collect released an orphan it never called")
        let release = log.entries
        #expect(release.count == 1)
        #expect(release.first?.afterTheCall == true)
        #expect(
            release.first?.thread == posterThread.current, "the orphan was not released by the thread that called it")
        withExtendedLifetime(second) {}
    }
}
