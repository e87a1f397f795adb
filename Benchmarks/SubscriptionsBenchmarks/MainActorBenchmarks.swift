import Foundation
import Subscriptions

// Main-actor delivery against SF-0011's `NotificationCenter.MainActorMessage` (Foundation's typed
// messages) and against `DispatchQueue.main.async` written by hand.

/// The subject SF-0011 messages are posted about (their API needs one).
final class BenchSubject: Sendable {}

/// A main-actor message carrying the posted number, like `Topic<Int>`.
struct BenchMainMessage: NotificationCenter.MainActorMessage {
    typealias Subject = BenchSubject
    let value: Int
}

/// An async message carrying the posted number.
struct BenchAsyncMessage: NotificationCenter.AsyncMessage {
    typealias Subject = BenchSubject
    let value: Int
}

let benchSubject = BenchSubject()

@inline(never)
@MainActor
func postMainActorMessages(_ center: NotificationCenter, _ value: Int, _ iterations: Int) {
    for _ in 0..<iterations { center.post(BenchMainMessage(value: value), subject: benchSubject) }
}

/// Runs the main queue (and the main run loop) on the main thread until `done()` holds.
func runMainUntil(_ done: () -> Bool) {
    while !done() {
        _ = RunLoop.main.run(mode: .default, before: Date(timeIntervalSinceNow: 0.05))
    }
}

/// The targets for `.mainActor` posted on the main thread: per handler at most this
/// many times an immediate handler, and at least this many times faster than MainActorMessage.
private let mainVsImmediate = 1.5
private let mainVsMessage = 10.0

/// `.mainActor` handlers posted on the main thread: ours, immediate, MainActorMessage and
/// NotificationCenter, at 1, 10, 100 and 1000 subscribers.
func mainActorSection(_ config: RunConfig) -> Section {
    var section = Section(
        id: "mainActor", title: "Post to N main-actor handlers, posted on the main thread",
        notes: [
            "ns/post: median over \(config.repetitions) repetitions (\(config.clock.rawValue) time); ns/handler = ns/post ÷ N.",
            "Every handler does `counter += value`. Ours: subscribe(topic, delivery: .mainActor) { @MainActor value in … };",
            "immediate: subscribe(topic) { value in … } (the same posts); MainActorMessage: SF-0011's",
            "addObserver(of:for:using:) and post(_:subject:), synchronous on the main actor; NotificationCenter: block observers.",
            "vs immediate: this row's ns/handler ÷ the immediate row's; Msg/ours: MainActorMessage's ns/post ÷ this row's.",
        ],
        columns: ["N", "contender", "ns/post", "ns/handler", "spread", "vs immediate", "Msg/ours", "target", "result"])
    MainActor.assumeIsolated {
        for n in [1, 10, 100, 1000] {
            let value = postedValue
            let counter = Counter.make()
            let topic = Topic<Int>("bench.main")
            let mainCenter = PostCenter()
            let immediateCenter = PostCenter()
            let messages = NotificationCenter()
            let foundation = NotificationCenter()
            let notificationName = Notification.Name("bench.main")
            var tokens: [Subscription] = []
            var observers: [NSObjectProtocol] = []
            var messageTokens: [NotificationCenter.ObservationToken] = []
            for _ in 0..<n {
                tokens.append(
                    mainCenter.subscribe(topic, delivery: .mainActor) { value in counter.pointer.pointee &+= value })
                messageTokens.append(
                    messages.addObserver(of: nil, for: BenchMainMessage.self) { message in
                        counter.pointer.pointee &+= message.value
                    })
            }
            subscribeManyTyped(immediateCenter, topic, counter, n, into: &tokens)
            observeMany(foundation, notificationName, counter, n, into: &observers)
            var delivered = 0
            let prepare = {
                counter.reset()
                delivered = -1
            }
            func verifier(_ what: String, perCall: Int, returnsCount: Bool = true) -> (Int) -> Void {
                { iterations in
                    expectCalls(counter.value, iterations * n * perCall, what)
                    if returnsCount { expectCalls(delivered, iterations * n, what + " (returned count)") }
                }
            }
            let ours = Case(
                "PostCenter .mainActor", prepare: prepare,
                body: { delivered = postTyped(mainCenter, topic, value, $0) },
                verify: verifier(".mainActor post on the main thread to \(n)", perCall: value))
            let immediate = Case(
                "PostCenter immediate", prepare: prepare,
                body: { delivered = postTyped(immediateCenter, topic, value, $0) },
                verify: verifier("immediate post to \(n)", perCall: value))
            let message = Case(
                "MainActorMessage", prepare: prepare,
                body: { iterations in MainActor.assumeIsolated { postMainActorMessages(messages, value, iterations) } },
                verify: verifier("MainActorMessage post to \(n)", perCall: value, returnsCount: false))
            let nc = Case(
                "NotificationCenter, object: nil", prepare: prepare,
                body: { postNotification(foundation, notificationName, nil, $0) },
                verify: verifier("NotificationCenter post to \(n)", perCall: 1, returnsCount: false))
            let cases = [ours, immediate, message, nc]
            measure(cases, config)
            let immediateHandler = immediate.stats.median / Double(n)
            for c in cases {
                let s = c.stats
                let perHandler = s.median / Double(n)
                let vsImmediate = perHandler / immediateHandler
                let vsMessage = message.stats.median / s.median
                var checks: [Check] = []
                var target = c === ours ? "(info at N = 1)" : "(reference)"
                if c === ours && n >= 10 {
                    checks.append(
                        section.check(
                            ".mainActor on the main thread per handler vs immediate, \(n) subscribers",
                            target: "≤ \(mainVsImmediate)×", measured: vsImmediate, text: times(vsImmediate),
                            pass: vsImmediate <= mainVsImmediate))
                    checks.append(
                        section.check(
                            ".mainActor on the main thread vs MainActorMessage, \(n) subscribers",
                            target: "≥ \(Int(mainVsMessage))× faster", measured: vsMessage,
                            text: times(vsMessage) + " faster", pass: vsMessage >= mainVsMessage))
                    target = "≤\(mainVsImmediate)× immediate, ≥\(Int(mainVsMessage))× Msg"
                }
                section.add(
                    [
                        "\(n)", c.label, ns(s.median), ns(perHandler), percent(s.spread), times(vsImmediate),
                        times(vsMessage), target, verdict(checks),
                    ],
                    Row(
                        contender: c.label, size: n,
                        figures: [
                            "nsPerPost": s.median, "nsPerHandler": perHandler, "ratioVsImmediate": vsImmediate,
                            "speedupVsMainActorMessage": vsMessage,
                        ],
                        target: checks.isEmpty ? nil : checks.map(\.target).joined(separator: "; "),
                        pass: checks.isEmpty ? nil : checks.allSatisfy(\.pass)))
            }
            withExtendedLifetime((tokens, observers, messageTokens)) {}
            for observer in observers { foundation.removeObserver(observer) }
            for token in messageTokens { messages.removeObserver(token) }
        }
    }
    return section
}

/// Nanoseconds of CPU time all threads of the process have used.
func processCPUNow() -> UInt64 {
    var t = timespec()
    let status = clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t)
    precondition(status == 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed; run with --clock wall")
    return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
}

/// `.mainActor` handlers posted from another thread: 10 subscribers, 10,000 posts until all are
/// handled on the main thread; ours against `DispatchQueue.main.async` per handler by hand.
func mainActorFromThreadSection(_ config: RunConfig) -> Section {
    let subscribers = 10
    let posts = 10_000
    let target = 5.0
    var section = Section(
        id: "mainActorFromThread",
        title:
            "Post to \(subscribers) main-actor handlers from another thread, \(grouped(posts)) posts until all handled",
        notes: [
            "One round: a thread posts \(grouped(posts)) typed Int posts; the main thread runs the main queue until every",
            "handler ran. Timed by the CPU time of the whole process (poster and main thread), median of \(config.repetitions).",
            "Ours: subscribe(topic, delivery: .mainActor) { @MainActor value in … }. By hand: \(subscribers) immediate",
            "subscribers, each doing `DispatchQueue.main.async { counter += value }`.",
        ],
        columns: ["contender", "ms/round", "ns/post", "spread", "hand/ours", "target", "result"])
    let value = postedValue
    let topic = Topic<Int>("bench.main.thread")

    func rounds(_ center: PostCenter, _ counter: Counter, _ n: Int) -> UInt64 {
        var total: UInt64 = 0
        for _ in 0..<n {
            counter.reset()
            let expected = posts * subscribers * value
            let start = processCPUNow()
            let poster = Thread { _ = postTyped(center, topic, value, posts) }
            poster.start()
            MainActor.assumeIsolated { runMainUntil { counter.value == expected } }
            total += processCPUNow() - start
            expectCalls(counter.value, expected, "main-actor handlers of one round")
        }
        return total
    }

    let oursCounter = Counter.make()
    let oursCenter = PostCenter()
    var tokens: [Subscription] = []
    for _ in 0..<subscribers {
        tokens.append(oursCenter.subscribe(topic, delivery: .mainActor) { v in oursCounter.pointer.pointee &+= v })
    }
    let ours = Case("PostCenter .mainActor") { n, _ in rounds(oursCenter, oursCounter, n) }

    let handCounter = Counter.make()
    let handCenter = PostCenter()
    for _ in 0..<subscribers {
        tokens.append(
            handCenter.subscribe(topic) { v in
                DispatchQueue.main.async { handCounter.pointer.pointee &+= v }
            })
    }
    let hand = Case("DispatchQueue.main.async per handler") { n, _ in rounds(handCenter, handCounter, n) }

    let few = RunConfig(repetitions: max(3, config.repetitions / 3), minimumRunNanos: 1, clock: config.clock)
    measure([ours, hand], few)
    withExtendedLifetime(tokens) {}
    let ratio = hand.stats.median / ours.stats.median
    let check = section.check(
        ".mainActor from another thread, \(subscribers) subscribers, vs DispatchQueue.main.async per handler",
        target: "≥ \(Int(target))× less CPU", measured: ratio, text: times(ratio) + " less", pass: ratio >= target)
    for c in [ours, hand] {
        let s = c.stats
        let mine = c === ours
        section.add(
            [
                c.label, fmt(s.median / 1e6, 2), ns(s.median / Double(posts)), percent(s.spread),
                times(hand.stats.median / s.median), mine ? "≥\(Int(target))× less CPU" : "(reference)",
                mine ? verdict([check]) : "",
            ],
            Row(
                contender: c.label, size: subscribers,
                figures: ["nsPerRound": s.median, "nsPerPost": s.median / Double(posts)],
                target: mine ? check.target : nil, pass: mine ? check.pass : nil))
    }
    return section
}
