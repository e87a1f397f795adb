// The cancellation races of the stress tests: `CancelRace`, the poster thread, and the raced observer,
// gate and styles.

import Dispatch
import Foundation
import Subscriptions
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How the raced subscription is made and posted to.
enum RaceStyle: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case plain, typed, selector, queued, senderFiltered, mainActor
    var testDescription: String { rawValue }

    /// 2,000 rounds for the plain handler, 600 for each other style (they share the engine's
    /// cancellation path and differ only in how the call is made).
    var rounds: Int { Reliability.scaled(self == .plain ? 2000 : 600, minimum: 100) }
}

/// Who holds the observer's token in the observer race.
enum ObserverTokenOwner: String, Sendable, CustomTestStringConvertible {
    case observer, test
    var testDescription: String { rawValue }
}

/// A thread that posts to `name` in a loop (plain, typed and from `sender`, so every style of
/// subscription gets deliveries), counting complete rounds in `posts`, until `stop()`.
final class PosterThread: Sendable {
    let center: PostCenter
    let name: String
    let sender = RaceSender()
    let posts = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init(center: PostCenter, name: String) {
        self.center = center
        self.name = name
    }

    func start() {
        Thread { [self] in
            let topic = Topic<Int>(name)
            while !stopped.load(ordering: .acquiring) {
                center.post(name, flag: "plain")
                center.post(topic, 1)
                center.post(name, PostObject(flag: "from"), from: sender)
                posts.add(1, ordering: .acquiringAndReleasing)
            }
            finished.signal()
        }.start()
    }

    /// Waits until the poster has completed two more rounds, so at least one whole round of
    /// posts started after this call.
    func awaitTwoMoreRounds() {
        let mark = posts.load(ordering: .acquiring)
        Reliability.wait(for: "two post rounds") { posts.load(ordering: .acquiring) >= mark + 2 }
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
        finished.wait()
    }
}

final class RaceSender: Sendable {}

/// Keeps a handler busy for a moment, so that `cancel()` often lands while it runs.
@inline(never)
private func busyWork(_ n: Int) -> Int {
    var x = 0
    for i in 0..<n { x = x &+ i &* 31 }
    return x
}

/// An observer whose method reports to a probe.
private final class RaceObserver: Sendable {
    let probe: Reliability.CallProbe
    let gate: RaceGate
    init(probe: Reliability.CallProbe, gate: RaceGate) {
        self.probe = probe
        self.gate = gate
    }
    func receive(_ post: PostObject) {
        probe.enter()
        gate.pass()
        probe.exit()
    }
}

/// What a raced handler does: a little work, or, when the gate `holds`, wait until the test
/// thread is about to end the subscription and then a longer piece of work, so that the end
/// lands while the handler runs and `cancel()` must wait for it.
private final class RaceGate: Sendable {
    let holds: Bool
    private let opened = Atomic<Bool>(false)

    init(holds: Bool) { self.holds = holds }

    func pass() {
        guard holds else {
            _ = busyWork(100)
            return
        }
        while !opened.load(ordering: .acquiring) { sched_yield() }
        _ = busyWork(2000)
    }

    func open() { opened.store(true, ordering: .releasing) }
}

/// Rounds of: subscribe, let the poster thread deliver, end the subscription while it is being
/// delivered, then watch a whole round of posts for late starts.
struct CancelRace {
    enum End { case cancel, dropToken }

    struct Result {
        var lateStarts = 0
        var runningAtReturn = 0
        var leftovers = 0
        var liveCaptures = 0
    }

    let style: RaceStyle
    let end: End

    func run(rounds: Int) -> Result {
        let center = PostCenter()
        let name = "race"
        let poster = PosterThread(center: center, name: name)
        let queue = DispatchQueue(label: "race.queue")
        let captures = Reliability.Tally()
        var random = Reliability.Random(seed: 0xCA_9CE1 &+ UInt64(RaceStyle.allCases.firstIndex(of: style)!))
        var result = Result()
        poster.start()
        for round in 0..<rounds {
            let probe = Reliability.CallProbe()
            let capture = Reliability.Capture(captures)
            // Every other round the handler holds until the end is requested, so that the end
            // surely lands while a handler runs; the other rounds let it land anywhere.
            let gate = RaceGate(holds: round % 2 == 0)
            let handler: @Sendable () -> Void = {
                withExtendedLifetime(capture) {}
                probe.enter()
                gate.pass()
                probe.exit()
            }
            var observer: RaceObserver? = nil
            var token: Subscription?
            switch style {
            case .plain: token = center.subscribe(name) { _ in handler() }
            case .typed: token = center.subscribe(Topic<Int>(name)) { _ in handler() }
            case .selector:
                observer = RaceObserver(probe: probe, gate: gate)
                token = center.register(name, observer: observer!, selector: RaceObserver.receive)
            case .queued: token = center.subscribe(name, delivery: .queue(queue)) { _ in handler() }
            case .senderFiltered: token = center.subscribe(name, from: poster.sender) { _ in handler() }
            case .mainActor: token = center.subscribe(name, delivery: .mainActor) { _ in handler() }
            }
            Reliability.wait(for: "the first \(style) delivery") { probe.calls.load(ordering: .relaxed) > 0 }
            for _ in 0..<random.below(4) { sched_yield() }
            gate.open()
            switch end {
            case .cancel: token!.cancel()
            case .dropToken: token = nil
            }
            // A deinit does not wait: a call under way (or past its check) may still finish.
            if end == .cancel && probe.close() { result.runningAtReturn += 1 }
            poster.awaitTwoMoreRounds()
            // Let deliveries scheduled before the end reach their queue: they must be dropped.
            if style == .queued { queue.sync {} }
            if style == .mainActor && !Thread.isMainThread { DispatchQueue.main.sync {} }
            if end == .cancel {
                result.lateStarts += probe.lateStarts.load(ordering: .relaxed)
            } else {
                // Every post counted now started after the deinit: none may reach the handler.
                let settled = probe.calls.load(ordering: .relaxed)
                poster.awaitTwoMoreRounds()
                if style == .queued { queue.sync {} }
                if style == .mainActor && !Thread.isMainThread { DispatchQueue.main.sync {} }
                result.lateStarts += probe.calls.load(ordering: .relaxed) - settled
            }
            token = nil
            observer = nil
        }
        poster.stop()
        result.leftovers = center.subscriptionCount(for: name)
        _ = eventually { captures.current == 0 }  // dropped tokens' closures go with the next batch
        result.liveCaptures = captures.current
        return result
    }
}
