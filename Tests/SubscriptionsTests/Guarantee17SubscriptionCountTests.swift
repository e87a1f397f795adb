import Dispatch
import Subscriptions
import SubscriptionsTestSupport
import Testing

/// Guarantee 17: `subscriptionCount(for:)` counts the subscriptions the next post of that name
/// would reach: paused, cancelled and dead-observer ones excluded.
@Suite("Guarantee 17: subscriptionCount(for:) counts what the next post would reach")
struct Guarantee17SubscriptionCount {
    final class Observer {
        func didPost(_ post: PostObject) {}
    }

    @Test(.tags(.pin)) func countIsZeroForANameNobodyUses() {
        let center = PostCenter()
        #expect(center.subscriptionCount(for: "nobody") == 0)
        let token = center.subscribe("somebody") { _ in }
        #expect(center.subscriptionCount(for: "nobody") == 0)
        #expect(center.subscriptionCount(for: "somebody") == 1)
        withExtendedLifetime(token) {}
    }

    @Test(.tags(.pin)) func countExcludesPausedCancelledReleasedAndDeadObserverSubscriptions() {
        let center = PostCenter()
        let queue = makeSerialQueue("count.queue")
        let live = (0..<3).map { _ in center.subscribe("x") { _ in } }
        let queued = center.subscribe("x", delivery: .queue(queue)) { _ in }
        let liveObserver = Observer()
        let registered = center.register("x", observer: liveObserver, selector: Observer.didPost)
        #expect(center.subscriptionCount(for: "x") == 5)

        let paused = center.subscribe("x") { _ in }
        paused.pause()
        let cancelled = center.subscribe("x") { _ in }
        cancelled.cancel()
        var released: Subscription? = center.subscribe("x") { _ in }
        released = nil
        var deadObserver: Observer? = Observer()
        let dead = center.register("x", observer: deadObserver!, selector: Observer.didPost)
        let deadQueued = center.register(
            "x", observer: deadObserver!, delivery: .queue(queue), selector: Observer.didPost)
        #expect(center.subscriptionCount(for: "x") == 7)
        deadObserver = nil

        #expect(released == nil)
        #expect(center.subscriptionCount(for: "x") == 5)
        #expect(center.post("x") == 5)
        paused.resume()
        #expect(center.subscriptionCount(for: "x") == 6)
        #expect(center.post("x") == 6)
        live[0].pause()
        #expect(center.subscriptionCount(for: "x") == 5)
        queue.sync {}
        withExtendedLifetime((live, queued, liveObserver, registered, dead, deadQueued)) {}
    }

    @Test(.tags(.pin)) func countMatchesWhatTheNextPlainPostReachesAcrossChurn() {
        let center = PostCenter()
        var tokens: [Subscription] = []
        for step in 0..<300 {
            switch step % 5 {
            case 0, 1, 2: tokens.append(center.subscribe("x") { _ in })
            case 3: tokens[step % tokens.count].pause()
            default: tokens[(step * 7) % tokens.count].cancel()
            }
            if step % 11 == 0 { tokens[(step * 3) % tokens.count].resume() }
            let counted = center.subscriptionCount(for: "x")
            #expect(counted == tokens.filter(\.isActive).count)
            #expect(center.post("x") == counted, "step \(step)")
        }
    }

    @Test(.tags(.pin)) func countIncludesTypedSubscriptionsOfTheName() {
        let center = PostCenter()
        let typed = center.subscribe(Topic<Int>("x")) { _ in }
        let plain = center.subscribe("x") { _ in }
        #expect(center.subscriptionCount(for: "x") == 2)
        #expect(center.post(Topic<Int>("x"), 1) == 2)
        withExtendedLifetime((typed, plain)) {}
    }

    @Test(.tags(.pin)) func countSeesChangesMadeDuringADelivery() {
        let center = PostCenter()
        let counts = Recorder<Int>()
        let late = TokenSlot()
        let victim = TokenSlot()
        let first = center.subscribe("x") { _ in
            counts.append(center.subscriptionCount(for: "x"))
            late.token = center.subscribe("x") { _ in }
            counts.append(center.subscriptionCount(for: "x"))
            victim.cancel()
            counts.append(center.subscriptionCount(for: "x"))
        }
        victim.token = center.subscribe("x") { _ in }
        #expect(center.post("x") == 1)
        #expect(counts.values == [2, 3, 2])
        #expect(center.subscriptionCount(for: "x") == 2)
        withExtendedLifetime(first) {}
    }

    @Test(.tags(.pin)) func countDropsAtOnceWhenAHandlerCancelsItself() {
        let center = PostCenter()
        let counts = Recorder<Int>()
        let slot = TokenSlot()
        slot.token = center.subscribe("x") { _ in
            counts.append(center.subscriptionCount(for: "x"))
            slot.cancel()
            counts.append(center.subscriptionCount(for: "x"))
        }
        center.post("x")
        #expect(counts.values == [1, 0])
        #expect(center.subscriptionCount(for: "x") == 0)
    }
}
