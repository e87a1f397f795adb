import Dispatch
import Foundation
import SubscriptionsTestSupport
import Testing

@testable import Subscriptions

/// Guarantee 6: a subscription cancelled or paused during a delivery, before its turn, is not
/// called for the rest of that delivery; a queued delivery whose subscription was cancelled
/// before it ran never runs.
@Suite("Guarantee 6: a subscription cancelled or paused before its turn is skipped")
struct Guarantee06SkippedOnceCancelled {
    // MARK: Guarantee 6, during a delivery

    @Test(.tags(.pin)) func subscriptionCancelledDuringDeliveryBeforeItsTurnIsSkipped() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let victim = TokenSlot()
        let first = center.subscribe("x") { _ in
            seen.append(1)
            victim.cancel()
        }
        victim.token = center.subscribe("x") { _ in seen.append(2) }
        let third = center.subscribe("x") { _ in seen.append(3) }
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 3])
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 3, 1, 3])
        withExtendedLifetime((first, third)) {}
    }

    @Test(.tags(.pin)) func subscriptionPausedDuringDeliveryBeforeItsTurnIsSkipped() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let victim = TokenSlot()
        let first = center.subscribe("x") { _ in
            seen.append(1)
            victim.token?.pause()
        }
        victim.token = center.subscribe("x") { _ in seen.append(2) }
        let third = center.subscribe("x") { _ in seen.append(3) }
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 3])
        victim.token?.resume()
        first.cancel()
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 3, 2, 3])
        withExtendedLifetime(third) {}
    }

    @Test(.tags(.pin)) func subscriptionCancelledInANestedPostIsSkippedByTheOuterPost() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let victim = TokenSlot()
        let first = center.subscribe("x") { _ in
            seen.append("x1")
            center.post("y")
        }
        victim.token = center.subscribe("x") { _ in seen.append("x2") }
        let third = center.subscribe("x") { _ in seen.append("x3") }
        let killer = center.subscribe("y") { _ in
            seen.append("y")
            victim.cancel()
        }
        #expect(center.post("x") == 2)
        #expect(seen.values == ["x1", "y", "x3"])
        withExtendedLifetime((first, third, killer)) {}
    }

    @Test(.tags(.pin)) func subscriptionCancelledAfterTheSlotsGrewMidDeliveryIsSkipped() {
        // Subscribing many during a delivery replaces the slot buffer the delivery is walking;
        // a later cancellation must still be seen by that delivery.
        let center = PostCenter()
        let seen = Recorder<Int>()
        let made = Recorder<Subscription>()
        let victim = TokenSlot()
        let first = center.subscribe("x") { _ in
            seen.append(1)
            guard made.count == 0 else { return }
            for _ in 0..<100 { made.append(center.subscribe("x") { _ in seen.append(100) }) }
            victim.cancel()
        }
        victim.token = center.subscribe("x") { _ in seen.append(2) }
        let third = center.subscribe("x") { _ in seen.append(3) }
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 3])
        seen.reset()
        #expect(center.post("x") == 102)
        #expect(seen.values == [1, 3] + Array(repeating: 100, count: 100))
        withExtendedLifetime((first, third, made)) {}
    }

    @Test(.tags(.pin)) func subscriptionCancelledAfterItsTurnDoesNotChangeThatDelivery() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let victim = TokenSlot()
        victim.token = center.subscribe("x") { _ in seen.append(1) }
        let second = center.subscribe("x") { _ in
            seen.append(2)
            victim.cancel()
        }
        let third = center.subscribe("x") { _ in seen.append(3) }
        #expect(center.post("x") == 3)
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 2, 3, 2, 3])
        withExtendedLifetime((second, third)) {}
    }

    @Test(.tags(.pin)) func subscriptionCancelledFromAnotherThreadDuringDeliveryIsSkipped() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let victim = TokenSlot()
        let cancellers = Recorder<TestThread>()
        let first = center.subscribe("x") { _ in
            seen.append(1)
            guard let token = victim.token else { return }
            // The other thread's cancel waits for this delivery to end, so wait only until the
            // cancellation took effect (isActive turns false), not for cancel() to return.
            cancellers.append(TestThread { token.cancel() })
            while token.isActive {}
        }
        victim.token = center.subscribe("x") { _ in seen.append(2) }
        let third = center.subscribe("x") { _ in seen.append(3) }
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 3])
        for thread in cancellers.values { thread.join() }
        withExtendedLifetime((first, third)) {}
    }

    @Test(.tags(.pin)) func subscriptionPausedFromAnotherThreadDuringDeliveryIsSkipped() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let victim = TokenSlot()
        let first = center.subscribe("x") { _ in
            seen.append(1)
            guard let token = victim.token else { return }
            TestThread { token.pause() }.join()
        }
        victim.token = center.subscribe("x") { _ in seen.append(2) }
        let third = center.subscribe("x") { _ in seen.append(3) }
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 3])
        withExtendedLifetime((first, third)) {}
    }

    // MARK: Guarantee 6, queued deliveries

    @Test(.tags(.pin)) func queuedDeliveryWhoseSubscriptionWasCancelledBeforeItRanNeverRuns() {
        let center = PostCenter()
        let queue = makeSerialQueue("cancel.queued")
        let calls = Counter()
        let token = center.subscribe("x", delivery: .queue(queue)) { _ in calls.increment() }
        queue.suspend()
        #expect(center.post("x") == 1)
        #expect(center.post(Topic<Int>("x"), 1) == 1)
        token.cancel()
        queue.resume()
        queue.sync {}
        #expect(calls.count == 0)
    }

    @Test(.tags(.pin)) func queuedDeliveryWhoseTokenWasReleasedBeforeItRanNeverRuns() {
        let center = PostCenter()
        let queue = makeSerialQueue("cancel.released")
        let calls = Counter()
        var token: Subscription? = center.subscribe(Topic<Int>("x"), delivery: .queue(queue)) { _ in
            calls.increment()
        }
        queue.suspend()
        #expect(center.post(Topic<Int>("x"), 1) == 1)
        token = nil
        queue.resume()
        queue.sync {}
        #expect(token == nil)
        #expect(calls.count == 0)
    }

    @Test(.tags(.pin)) func queuedDeliveryWhoseObserverWasReleasedBeforeItRanNeverRuns() {
        final class Observer: Sendable {
            let calls: Counter
            init(_ calls: Counter) { self.calls = calls }
            func didPost(_ post: PostObject) { calls.increment() }
        }
        let center = PostCenter()
        let queue = makeSerialQueue("cancel.observer")
        let calls = Counter()
        var observer: Observer? = Observer(calls)
        let token = center.register("x", observer: observer!, delivery: .queue(queue), selector: Observer.didPost)
        queue.suspend()
        #expect(center.post("x") == 1)
        weak var weakObserver: Observer?
        weakObserver = observer
        observer = nil
        #expect(weakObserver == nil)
        queue.resume()
        queue.sync {}
        #expect(calls.count == 0)
        withExtendedLifetime(token) {}
    }

    @Test(.tags(.pin)) func queuedDeliveryCancelledFromAnEarlierQueuedHandlerNeverRuns() {
        let center = PostCenter()
        let queue = makeSerialQueue("cancel.earlier")
        let seen = Recorder<String>()
        let victim = TokenSlot()
        queue.suspend()
        let killer = center.subscribe("x", delivery: .queue(queue)) { _ in
            seen.append("killer")
            victim.cancel()
        }
        victim.token = center.subscribe("x", delivery: .queue(queue)) { _ in seen.append("victim") }
        #expect(center.post("x") == 2)
        queue.resume()
        queue.sync {}
        #expect(seen.values == ["killer"])
        withExtendedLifetime(killer) {}
    }
}
