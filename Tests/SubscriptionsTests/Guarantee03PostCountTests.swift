import Dispatch
import Foundation
import Subscriptions
import Testing

/// Guarantee 3: `post` returns how many handlers it ran or scheduled (0 when nobody listens).
@Suite("Guarantee 3: post returns how many handlers it ran or scheduled")
struct Guarantee03PostCount {
    @Test(.tags(.pin)) func postReturnsZeroWhenNobodyListens() {
        let center = PostCenter()
        #expect(center.post("nobody") == 0)
        #expect(center.post("nobody", PostObject(flag: "f")) == 0)
        #expect(center.post(Topic<Int>("nobody"), 1) == 0)
        let token = center.subscribe("other") { _ in }
        #expect(center.post("nobody") == 0)
        token.cancel()
        #expect(center.post("other") == 0)
    }

    /// A handler that threw counts as run: immediate ones (called directly or through an option)
    /// and queued ones, whose throw comes after `post` returned.
    @Test(.tags(.pin)) func aHandlerThatThrewCountsAsRun() async {
        struct Failed: Error {}
        let center = PostCenter()
        center.diagnostics = .init { _ in }
        let queue = makeSerialQueue("delivery.throws")
        let direct = center.subscribe("x") { _ in throw Failed() }
        let once = center.subscribe("x", once: true) { _ in throw Failed() }
        let queued = center.subscribe("x", delivery: .queue(queue)) { _ in throw Failed() }
        let typed = center.subscribe(Topic<Int>("x")) { _ in throw Failed() }
        #expect(center.post(Topic<Int>("x"), 1) == 4)
        #expect(center.post("x") == 2)  // the one-shot fired; the typed one takes no envelope
        await center.waitForPendingDeliveries()
        withExtendedLifetime((direct, once, queued, typed)) {}
    }

    @Test(.tags(.pin)) func postReturnsHowManyHandlersRanOrWereScheduled() {
        final class Observer {
            func didPost(_ post: PostObject) {}
        }
        let center = PostCenter()
        let queue = makeSerialQueue("delivery.count")
        queue.suspend()
        var tokens = Set<Subscription>()
        let ran = Counter()
        // Reached: 2 immediate, 2 queued (one closure, one observer), 1 registered observer.
        center.subscribe("x") { _ in ran.increment() }.store(in: &tokens)
        center.subscribe("x", delivery: .queue(queue)) { _ in ran.increment() }.store(in: &tokens)
        center.subscribe("x") { _ in ran.increment() }.store(in: &tokens)
        let liveObserver = Observer()
        center.register("x", observer: liveObserver, selector: Observer.didPost).store(in: &tokens)
        center.register("x", observer: liveObserver, delivery: .queue(queue), selector: Observer.didPost)
            .store(in: &tokens)
        // Not reached: paused, cancelled, dead observer, dead queued observer, other payload type.
        let paused = center.subscribe("x") { _ in ran.increment() }
        paused.pause()
        let cancelled = center.subscribe("x") { _ in ran.increment() }
        cancelled.cancel()
        var deadObserver: Observer? = Observer()
        let dead = center.register("x", observer: deadObserver!, selector: Observer.didPost)
        let deadQueued = center.register(
            "x", observer: deadObserver!, delivery: .queue(queue), selector: Observer.didPost)
        deadObserver = nil
        let otherType = center.subscribe(Topic<String>("x")) { _ in ran.increment() }

        #expect(center.post("x") == 5)
        #expect(center.post("x", PostObject(flag: "f")) == 5)
        #expect(center.post(Topic<Int>("x"), 3) == 5)
        #expect(ran.count == 3 * 2)
        queue.resume()
        queue.sync {}
        #expect(ran.count == 3 * 3)
        withExtendedLifetime((tokens, liveObserver, paused, dead, deadQueued, otherType)) {}
    }

    @Test(.tags(.pin)) func typedPostCountsOnlySubscribersOfItsPayloadType() {
        let center = PostCenter()
        let ints = center.subscribe(Topic<Int>("t")) { _ in }
        let strings = center.subscribe(Topic<String>("t")) { _ in }
        let plain = center.subscribe("t") { _ in }
        #expect(center.post(Topic<Int>("t"), 1) == 2)
        #expect(center.post(Topic<String>("t"), "s") == 2)
        #expect(center.post(Topic<Double>("t"), 1.5) == 1)
        // A plain post without data reaches only the plain subscriber.
        #expect(center.post("t") == 1)
        withExtendedLifetime((ints, strings, plain)) {}
    }
}
