import Foundation
import Subscriptions

/// A typed post to a name with one subscriber, on a center that also holds 1,000 prefix
/// subscriptions that do not match it, against a center with none (issue 41's target: ≤ 1.1×).
/// Two shapes of "other prefixes": prefixes that start unlike the name (`other123.`), and
/// prefixes that share its first six bytes (`bench.other123.`, the case of one namespace).
/// A third row, not a target, adds one `.all` subscription: what a post pays once a pattern
/// matches it (one more route walked, one envelope made). The last two rows are the same target
/// for a plain post (`post(name)`, a new envelope per post), against the plain post without.
func patternSection(_ config: RunConfig) -> Section {
    let held = 1_000
    let limit = 1.1
    var section = Section(
        id: "patterns",
        title: "A post to 1 subscriber beside \(grouped(held)) prefix subscriptions of other prefixes",
        notes: [
            "ns/op: one typed post of an Int (or, in the plain rows, `post(name)`, a new envelope per post) to a",
            "name with 1 subscriber. The center also holds \(grouped(held)) prefix subscriptions",
            "(`subscribe(matching: .prefix(P))`) whose prefixes do not match the name, or none.",
            "Median over \(config.repetitions) repetitions, measured interleaved. Target: ≤ \(limit)× the center without.",
        ],
        columns: ["pattern subscriptions", "ns/op", "spread", "vs none", "target", "result"])
    let topic = Topic<Int>("bench.pattern")
    let counter = Counter.make()
    var tokens: [Subscription] = []
    let others = (0..<held).map { "other\($0)." }
    let shapes: [(label: String, prefixes: [String], all: Bool, plain: Bool, target: Bool)] = [
        ("none", [], false, false, false),
        ("\(grouped(held)) `other<i>.`", others, false, false, true),
        ("\(grouped(held)) `bench.other<i>.`", (0..<held).map { "bench.other\($0)." }, false, false, true),
        ("\(grouped(held)) `other<i>.` + 1 `.all`", others, true, false, false),
        ("plain post, none", [], false, true, false),
        ("plain post, \(grouped(held)) `other<i>.`", others, false, true, true),
    ]
    let cases = shapes.map { shape -> Case in
        let center = PostCenter()
        if shape.plain {
            tokens.append(center.subscribe(topic.name) { _ in counter.pointer.pointee &+= 1 })
        } else {
            tokens.append(center.subscribe(topic) { value in counter.pointer.pointee &+= value })
        }
        for prefix in shape.prefixes {
            tokens.append(center.subscribe(matching: .prefix(prefix)) { _, _ in counter.pointer.pointee &+= 1000 })
        }
        if shape.all { tokens.append(center.subscribe(matching: .all) { _, _ in counter.pointer.pointee &+= 1 }) }
        let perPost = shape.all ? 2 : 1
        let post: (Int) -> Int =
            shape.plain ? { n in postPlain(center, topic.name, nil, n) } : { n in postTyped(center, topic, 1, n) }
        return Case(
            "PostCenter \(shape.plain ? "plain" : "typed") post beside \(shape.label)", prepare: { counter.reset() },
            body: { n in expectCalls(post(n), n * perPost, "pattern posts (\(shape.label))") },
            verify: { n in expectCalls(counter.value, n * perPost, "pattern handler calls (\(shape.label))") })
    }
    measure(cases, config)
    for (shape, c) in zip(shapes, cases) {
        let s = c.stats
        // Each kind of post against the same kind on a center without patterns.
        let base = shape.plain ? cases[4].stats.median : cases[0].stats.median
        let ratio = s.median / base
        var checks: [Check] = []
        if shape.target {
            checks.append(
                section.check(
                    "\(shape.plain ? "" : "typed post beside ")\(shape.label) prefix subscriptions vs none",
                    target: "≤ \(limit)×",
                    measured: ratio, text: times(ratio), pass: ratio <= limit))
        }
        section.add(
            [
                shape.label, ns(s.median), percent(s.spread), times(ratio),
                shape.target ? "≤ \(limit)×" : shape.prefixes.isEmpty ? "(reference)" : "(no target)",
                shape.target ? verdict(checks) : "",
            ],
            Row(
                contender: c.label, size: shape.prefixes.count,
                figures: [
                    "nsPerOperation": s.median, "nsPerOperationMin": s.min, "nsPerOperationMax": s.max,
                    "ratioToNone": ratio, "iterationsPerRepetition": Double(c.iterations),
                ],
                target: shape.target ? "≤ \(limit)×" : nil, pass: shape.target ? checks.allSatisfy(\.pass) : nil))
    }
    withExtendedLifetime(tokens) {}
    return section
}
