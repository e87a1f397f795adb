import Dispatch
import Foundation
import Subscriptions
import Synchronization
import Testing

/// An observer whose method logs (selector-style registrations at a priority).
private final class PriorityObserver: Sendable {
    let log: Recorder<String>
    init(_ log: Recorder<String>) { self.log = log }
    func handle(_ post: PostObject) { log.append("observer") }
}

private actor PriorityActor {
    var seen: [String] = []
    func note(_ label: String) { seen.append(label) }
}

@Suite("Priorities")
struct PriorityTests {
    /// Higher priorities run first; equal priorities run in subscription order, whatever the
    /// order they were made in, for plain, typed and selector-style registrations alike.
    @Test(.tags(.pin)) func higherPrioritiesRunFirstAndEqualOnesInSubscriptionOrder() {
        let center = PostCenter()
        let log = Recorder<String>()
        let observer = PriorityObserver(log)
        let topic = Topic<Int>("ranked")
        var tokens: [Subscription] = []
        tokens.append(center.subscribe("ranked") { _ in log.append("a0") })
        tokens.append(center.subscribe(topic, priority: 5) { _ in log.append("b5") })
        tokens.append(center.subscribe("ranked", priority: 0) { _ in log.append("c0") })
        tokens.append(center.subscribe("ranked", priority: 5) { _ in log.append("d5") })
        tokens.append(center.subscribe(topic, priority: -1) { _ in log.append("e-1") })
        tokens.append(center.register("ranked", observer: observer, priority: 10, selector: PriorityObserver.handle))
        tokens.append(center.subscribe("ranked", priority: -1) { _ in log.append("g-1") })
        tokens.append(center.subscribe("ranked") { _ in log.append("h0") })
        #expect(center.post(topic, 1) == 8)
        #expect(log.values == ["observer", "b5", "d5", "a0", "c0", "h0", "e-1", "g-1"])
        withExtendedLifetime((tokens, observer)) {}
    }

    /// The order holds whatever the route's bounds of the priorities present have seen: after
    /// the highest is cancelled, after every other priority left, and against a model over
    /// random subscribes and cancels of a few priorities (an entry above every live one goes
    /// first without a look at the others: the bounds must never let one pass an entry of its
    /// own or a higher priority).
    @Test func theOrderHoldsAsPrioritiesComeAndGo() {
        let center = PostCenter()
        let log = Recorder<String>()
        var live: [(name: String, priority: Int, token: Subscription)] = []
        func add(_ priority: Int) {
            let name = "s\(live.count)p\(priority)"
            live.append((name, priority, center.subscribe("bounds", priority: priority) { _ in log.append(name) }))
        }
        func expected() -> [String] {
            // Stable: equal priorities keep subscription order.
            live.enumerated().sorted { ($0.element.priority, -$0.offset) > ($1.element.priority, -$1.offset) }
                .map(\.element.name)
        }
        add(5)
        add(-1)
        live.removeFirst().token.cancel()  // the highest goes; -1 stays
        add(3)
        add(7)
        add(0)
        add(7)
        log.reset()
        center.post("bounds")
        #expect(log.values == expected())
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<400 {
            if !live.isEmpty && Int.random(in: 0..<3, using: &generator) == 0 {
                live.remove(at: Int.random(in: 0..<live.count, using: &generator)).token.cancel()
            } else {
                add(Int.random(in: -2...2, using: &generator))
            }
            log.reset()
            center.post("bounds")
            #expect(log.values == expected())
        }
    }

    /// Guarantee 5 when a subscription at a priority takes the slot a cancelled one left just
    /// before its place (the route copies the slots into a new array instead of rebuilding it):
    /// made during a delivery, ahead of where that post walks, it does not receive the post in
    /// progress, nor does one made after it cancelled and took the same slot again (the second
    /// copy must not go into the array the post still walks). Both receive the following posts,
    /// in priority order.
    @Test(.tags(.pin)) func aSubscriptionTakingACancelledSlotDuringADeliveryWaitsForTheNextPost() {
        let center = PostCenter()
        let log = Recorder<String>()
        let made = Mutex<[Subscription]>([])
        let first = Atomic<Bool>(true)
        let high = center.subscribe("refill", priority: 5) { _ in
            log.append("high")
            guard first.exchange(false, ordering: .relaxed) else { return }
            // The slot after this one is empty (x was cancelled): each of these takes it.
            let d = center.subscribe("refill", priority: 1) { _ in log.append("d") }
            d.cancel()
            let e = center.subscribe("refill", priority: 1) { _ in log.append("e") }
            let f = center.subscribe("refill", priority: 1) { _ in log.append("f") }
            made.withLock { $0 += [e, f] }
        }
        let x = center.subscribe("refill", priority: 1) { _ in log.append("x") }
        let low = center.subscribe("refill") { _ in log.append("low") }
        x.cancel()
        #expect(center.post("refill") == 2)
        #expect(log.values == ["high", "low"])
        log.reset()
        #expect(center.post("refill") == 4)
        #expect(log.values == ["high", "e", "f", "low"])
        #expect(made.withLock { $0.count } == 2)
        withExtendedLifetime((high, low)) {}
    }

    /// A paused and resumed subscription keeps its place among its priority; a cancelled one
    /// leaves no trace: once every subscription of another priority is gone, a default one
    /// goes last again.
    @Test(.tags(.pin)) func aPausedAndResumedSubscriptionKeepsItsPlace() {
        let center = PostCenter()
        let log = Recorder<String>()
        let low = center.subscribe("place", priority: -3) { _ in log.append("low") }
        let a = center.subscribe("place", priority: 2) { _ in log.append("a") }
        let b = center.subscribe("place", priority: 2) { _ in log.append("b") }
        a.pause()
        #expect(center.post("place") == 2)
        a.resume()
        #expect(center.post("place") == 3)
        #expect(log.values == ["b", "low", "a", "b", "low"])
        low.cancel()
        a.cancel()
        b.cancel()
        let first = center.subscribe("place") { _ in log.append("first") }
        let second = center.subscribe("place") { _ in log.append("second") }
        #expect(center.post("place") == 2)
        #expect(log.values.suffix(2) == ["first", "second"])
        withExtendedLifetime((first, second)) {}
    }

    /// A subscription made during a delivery, at a priority that places it before the handler
    /// running, does not receive the post in progress (guarantee 5); it receives the next one,
    /// in its place.
    @Test(.tags(.pin)) func aSubscriptionMadeDuringADeliveryBeforeTheRunningHandlerMissesIt() {
        let center = PostCenter()
        let log = Recorder<String>()
        let late = Mutex<Subscription?>(nil)
        let first = center.subscribe("during") { _ in
            log.append("first")
            if late.withLock({ $0 == nil }) {
                let token = center.subscribe("during", priority: 1) { _ in log.append("late") }
                late.withLock { $0 = token }
            }
        }
        let second = center.subscribe("during") { _ in log.append("second") }
        #expect(center.post("during") == 2)
        #expect(center.post("during") == 3)
        #expect(log.values == ["first", "second", "late", "first", "second"])
        withExtendedLifetime((first, second)) {}
    }

    /// Queued deliveries are scheduled in priority order, so a serial queue runs them so; a
    /// one-shot and a replay take a priority too, and replay is unchanged (the retained post
    /// first, on subscribing).
    @Test(.tags(.pin)) func queuedOnceAndReplaySubscriptionsTakeAPriority() async {
        let center = PostCenter()
        let log = Recorder<String>()
        let queue = DispatchQueue(label: "priority.queue")
        center.post("queued", flag: "kept", retain: true)
        let replayed = center.subscribe("queued", replay: true, priority: -1) { post in log.append("r:" + post.flag) }
        let q0 = center.subscribe("queued", delivery: .queue(queue)) { _ in log.append("q0") }
        let q9 = center.subscribe("queued", delivery: .queue(queue), priority: 9) { _ in log.append("q9") }
        let once = center.subscribe("queued", once: true, priority: 3) { _ in log.append("once") }
        queue.suspend()  // the queued calls run after the post, in the order it scheduled them
        #expect(center.post("queued", flag: "live") == 4)
        queue.resume()
        await center.waitForPendingDeliveries()
        #expect(log.values == ["r:kept", "once", "r:live", "q9", "q0"])
        withExtendedLifetime((replayed, q0, q9, once)) {}
    }

    /// Main-actor, actor and default-center forms take a priority as well.
    @Test(.tags(.pin)) @MainActor func mainActorActorAndStaticFormsTakeAPriority() async {
        let center = PostCenter()
        let log = Recorder<String>()
        let actor = PriorityActor()
        let low = center.subscribe("forms", delivery: .mainActor, priority: -1) { _ in log.append("main-1") }
        let high = center.subscribe("forms", delivery: .mainActor, priority: 1) { _ in log.append("main1") }
        let onActor = center.subscribe("forms", on: actor, priority: 7) { actor, _ in actor.note("actor7") }
        #expect(center.post("forms") == 3)
        await center.waitForPendingDeliveries()
        #expect(log.values == ["main1", "main-1"])
        #expect(await actor.seen == ["actor7"])
        let name = "priority.static.\(UUID().uuidString)"
        let s0 = PostCenter.subscribe(name) { _ in log.append("s0") }
        let s4 = PostCenter.subscribe(name, priority: 4) { _ in log.append("s4") }
        #expect(PostCenter.post(name) == 2)
        #expect(log.values.suffix(2) == ["s4", "s0"])
        withExtendedLifetime((low, high, onActor, s0, s4)) {}
    }
}
