import Dispatch
import Foundation
import Subscriptions
import SubscriptionsTestSupport
import Testing

/// Guarantee 10: the center never retains an observer or a token; when a registered observer
/// deallocates, its registration stops (not called, not counted, `isActive == false`).
/// Guarantee 11: the center holds a handler closure only while its subscription lives; after
/// cancel or deinit the closure and everything it captured are released.
///
/// Lifetimes are observed with `weak` references and live-instance counters.
@Suite("Lifetimes (guarantees 10 and 11)")
struct LifetimeTests {
    final class Observer: Sendable {
        let calls: Counter
        let tracked: Tracked

        init(calls: Counter, live: LiveObjects) {
            self.calls = calls
            self.tracked = Tracked("observer", live: live)
        }

        func didPost(_ post: PostObject) { calls.increment() }
        func didPostInt(_ value: Int) { calls.increment() }
    }

    /// An owner that keeps its tokens, as users are told to.
    final class Owner {
        var tokens = Set<Subscription>()
        let calls: Counter
        let tracked: Tracked

        init(center: PostCenter, calls: Counter, live: LiveObjects) {
            self.calls = calls
            self.tracked = Tracked("owner", live: live)
            center.register("x", observer: self, selector: Owner.didPost).store(in: &tokens)
            center.register(Topic<Int>("x"), observer: self, selector: Owner.didPostInt).store(in: &tokens)
            center.subscribe("x") { [calls] _ in calls.increment() }.store(in: &tokens)
        }

        func didPost(_ post: PostObject) { calls.increment() }
        func didPostInt(_ value: Int) { calls.increment() }
    }

    // MARK: Guarantee 10, tokens

    @Test func centerDoesNotRetainTokens() {
        let center = PostCenter()
        let calls = Counter()
        var token: Subscription? = center.subscribe("x") { _ in calls.increment() }
        weak var weakToken: Subscription?
        weakToken = token
        #expect(center.post("x") == 1)
        token = nil
        #expect(weakToken == nil)
        #expect(center.post("x") == 0)
        #expect(center.subscriptionCount(for: "x") == 0)
        #expect(calls.count == 1)
    }

    @Test func centerDoesNotRetainTokensWithAQueuedDeliveryPending() {
        let center = PostCenter()
        let queue = makeSerialQueue("lifetime.token")
        let calls = Counter()
        queue.suspend()
        var token: Subscription? = center.subscribe("x", delivery: .queue(queue)) { _ in calls.increment() }
        weak var weakToken: Subscription?
        weakToken = token
        #expect(center.post("x") == 1)
        token = nil
        #expect(weakToken == nil)
        queue.resume()
        queue.sync {}
        #expect(calls.count == 0)
    }

    // MARK: Guarantee 10, observers

    @Test func deallocatedObserverIsNotCalledNotCountedAndItsTokenIsInactive() {
        let center = PostCenter()
        let live = LiveObjects()
        let calls = Counter()
        var observer: Observer? = Observer(calls: calls, live: live)
        let named = center.register("x", observer: observer!, selector: Observer.didPost)
        let typed = center.register(Topic<Int>("x"), observer: observer!, selector: Observer.didPostInt)
        #expect(center.post(Topic<Int>("x"), 1) == 2)
        #expect(center.subscriptionCount(for: "x") == 2)
        #expect(named.isActive && typed.isActive)
        weak var weakObserver: Observer?
        weakObserver = observer
        observer = nil
        // The center held it weakly: it is gone although both tokens are alive.
        #expect(weakObserver == nil)
        #expect(live.alive == 0)
        #expect(center.post(Topic<Int>("x"), 2) == 0)
        #expect(center.post("x") == 0)
        #expect(center.subscriptionCount(for: "x") == 0)
        #expect(!named.isActive)
        #expect(!typed.isActive)
        #expect(calls.count == 2)
    }

    @Test func queuedDeliveryDoesNotRetainTheObserver() {
        let center = PostCenter()
        let queue = makeSerialQueue("lifetime.observer")
        let live = LiveObjects()
        let calls = Counter()
        var observer: Observer? = Observer(calls: calls, live: live)
        let token = center.register("x", observer: observer!, delivery: .queue(queue), selector: Observer.didPost)
        queue.suspend()
        #expect(center.post("x") == 1)
        observer = nil
        #expect(live.alive == 0)
        #expect(!token.isActive)
        queue.resume()
        queue.sync {}
        #expect(calls.count == 0)
    }

    @Test func ownerThatKeepsItsTokensEndsItsRegistrationsWhenItGoesAway() {
        let center = PostCenter()
        let live = LiveObjects()
        let calls = Counter()
        var owner: Owner? = Owner(center: center, calls: calls, live: live)
        #expect(center.post(Topic<Int>("x"), 1) == 3)
        #expect(center.subscriptionCount(for: "x") == 3)
        owner = nil
        #expect(owner == nil)
        #expect(live.alive == 0)
        #expect(center.subscriptionCount(for: "x") == 0)
        #expect(center.post(Topic<Int>("x"), 2) == 0)
        #expect(calls.count == 3)
    }

    // MARK: Guarantee 11

    @Test func handlerCapturesAreReleasedWhenCancelReturns() {
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

    @Test func handlerCapturesAreReleasedWhenTheTokenDeinitialises() {
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

    @Test func queuedHandlerCapturesAreReleasedWhenCancelReturnsWithDeliveriesPending() {
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

    @Test func handlerCapturesAreReleasedWhenCancelReturnsAfterWaitingForTheHandler() {
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

    @Test func queuedHandlerCapturesAreReleasedWhenCancelReturnsAfterWaitingForTheHandler() {
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

    @Test func capturesOfAHandlerThatCancelsItselfAreReleasedWhenThePostReturns() {
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

    @Test func capturesOfASubscriptionCancelledInANestedPostAreReleasedWhenTheOuterPostReturns() {
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

    @Test func releasingCapturesNeverHoldsALock() {
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
}
