import Dispatch
import Foundation
import Subscriptions
import Testing

/// Guarantee 10: the center never retains an observer or a token; when a registered observer
/// deallocates, its registration stops (not called, not counted, `isActive == false`).
///
/// Lifetimes are observed with `weak` references and live-instance counters.
@Suite("Guarantee 10: the center never retains an observer or a token")
struct Guarantee10NoRetainedObserver {
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

    @Test(.tags(.pin)) func centerDoesNotRetainTokens() {
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

    @Test(.tags(.pin)) func centerDoesNotRetainTokensWithAQueuedDeliveryPending() {
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

    @Test(.tags(.pin)) func deallocatedObserverIsNotCalledNotCountedAndItsTokenIsInactive() {
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

    @Test(.tags(.pin)) func queuedDeliveryDoesNotRetainTheObserver() {
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

    @Test(.tags(.pin)) func ownerThatKeepsItsTokensEndsItsRegistrationsWhenItGoesAway() {
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
}
