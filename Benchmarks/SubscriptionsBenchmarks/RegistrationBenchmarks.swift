import Foundation
import Subscriptions

/// Subscribe + cancel on a name that already holds 10 … 100,000 subscriptions, against
/// NotificationCenter's addObserver + removeObserver on a name with as many observers.
///
/// All sizes of both contenders are measured in one interleaved group, so that the flatness
/// check compares figures taken under the same load.
func subscribeCancelSection(_ config: RunConfig) -> Section {
    let flatLimit = 2.0
    let sizes = [10, 1_000, 10_000, 100_000]
    var section = Section(
        id: "subscribeCancel", title: "Subscribe + cancel on a name that already holds K subscriptions",
        notes: [
            "ns/op: one subscribe (a new handler closure, as in real code) and one cancel of that token;",
            "NotificationCenter: addObserver(forName:object:queue:using:) + removeObserver. Median over \(config.repetitions) repetitions,",
            "all sizes measured interleaved. O(1) check: the slowest of PostCenter's four sizes ÷ the fastest ≤ \(flatLimit)×",
            "(an O(K) cost would grow 10,000× from K = 10 to 100,000).",
        ],
        columns: ["K", "contender", "ns/op", "spread", "NC/ours", "target", "result"])
    let name = "bench.registry"
    let notificationName = Notification.Name(name)
    let counter = Counter.make()
    var tokens: [Subscription] = []
    var observers: [NSObjectProtocol] = []
    var groups: [(k: Int, center: PostCenter, foundation: NotificationCenter, ours: Case, theirs: Case)] = []
    for k in sizes {
        let center = PostCenter()
        let foundation = NotificationCenter()
        subscribeMany(center, name, counter, k, into: &tokens)
        observeMany(foundation, notificationName, counter, k, into: &observers)
        let ours = Case(
            "PostCenter subscribe + cancel", prepare: { counter.reset() },
            body: { subscribeAndCancel(center, name, counter, $0) },
            verify: { _ in
                expectCalls(counter.value, 0, "subscribe + cancel with \(k) held")
                precondition(
                    center.subscriptionCount(for: name) == k,
                    "subscribe + cancel with \(k) held: the name should still hold \(k) subscriptions")
            })
        let theirs = Case(
            "NotificationCenter add + remove observer", prepare: { counter.reset() },
            body: { observeAndRemove(foundation, notificationName, counter, $0) },
            verify: { _ in expectCalls(counter.value, 0, "addObserver + removeObserver with \(k) held") })
        groups.append((k, center, foundation, ours, theirs))
    }
    measure(groups.flatMap { [$0.ours, $0.theirs] }, config)

    // The held subscriptions are intact: one post reaches each exactly once.
    for g in groups {
        counter.reset()
        expectCalls(
            g.center.post(name, PostObject()), g.k, "post after subscribe + cancel with \(g.k) held (returned count)")
        g.foundation.post(name: notificationName, object: nil)
        expectCalls(counter.value, 2 * g.k, "posts after subscribe + cancel with \(g.k) held")
    }

    let medians = groups.map(\.ours.stats.median)
    let flatness = medians.max()! / medians.min()!
    let flat = section.check(
        "subscribe + cancel is O(1): slowest ÷ fastest of K = 10 … 100,000", target: "≤ \(flatLimit)× (flat)",
        measured: flatness, text: times(flatness), pass: flatness <= flatLimit)
    section.notes.append("Flatness (PostCenter, slowest ÷ fastest K): \(times(flatness)).")
    for g in groups {
        let speedup = g.theirs.stats.median / g.ours.stats.median
        var checks = [flat]
        if g.k == 10_000 {
            checks.append(
                section.check(
                    "subscribe + cancel with 10,000 on the name vs NotificationCenter", target: "≥ 2× faster",
                    measured: speedup, text: times(speedup) + " faster", pass: speedup >= 2))
            checks.append(
                section.check(
                    "subscribe + cancel with 10,000 on the name vs NotificationCenter (issue 37)",
                    target: "≥ 4× faster", measured: speedup, text: times(speedup) + " faster", pass: speedup >= 4))
        }
        for c in [g.ours, g.theirs] {
            let s = c.stats
            let mine = c === g.ours
            section.add(
                [
                    grouped(g.k), c.label, ns(s.median), percent(s.spread), times(g.theirs.stats.median / s.median),
                    mine ? (g.k == 10_000 ? "flat; ≥2×, ≥4× NC" : "flat") : "(reference)",
                    mine ? verdict(checks) : "",
                ],
                Row(
                    contender: c.label, size: g.k,
                    figures: [
                        "nsPerOperation": s.median, "nsPerOperationMin": s.min, "nsPerOperationMax": s.max,
                        "speedupVsNotificationCenter": g.theirs.stats.median / s.median,
                        "iterationsPerRepetition": Double(c.iterations),
                    ],
                    target: mine ? checks.map(\.target).joined(separator: "; ") : nil,
                    pass: mine ? checks.allSatisfy(\.pass) : nil))
        }
    }
    withExtendedLifetime((tokens, observers)) {}
    return section
}

/// Subscribe + cancel at a priority other than the default on a name that holds 1,000
/// subscriptions of the default priority: first (priority 1, before all of them) and last
/// (priority -1, after all of them), against the default.
func prioritySection(_ config: RunConfig) -> Section {
    let held = 1_000
    let limit = 2.0
    var section = Section(
        id: "priority", title: "Subscribe + cancel at a priority on a name that holds \(grouped(held)) subscriptions",
        notes: [
            "ns/op: one subscribe at the priority and one cancel of that token; the name holds \(grouped(held)) subscriptions",
            "of priority 0. Priority 1 goes before all of them (a new slot array: O(K)); -1 after them (appended).",
            "Median over \(config.repetitions) repetitions, measured interleaved. Target: ≤ \(limit)× the default.",
        ],
        columns: ["priority", "ns/op", "spread", "vs default", "target", "result"])
    let name = "bench.priority"
    let counter = Counter.make()
    var tokens: [Subscription] = []
    let cases = [0, 1, -1].map { priority -> (Int, Case) in
        let center = PostCenter()
        subscribeMany(center, name, counter, held, into: &tokens)
        return (
            priority,
            Case(
                "PostCenter subscribe + cancel at priority \(priority)", prepare: { counter.reset() },
                body: { subscribeAndCancel(center, name, counter, priority: priority, $0) },
                verify: { _ in
                    expectCalls(counter.value, 0, "subscribe + cancel at priority \(priority)")
                    precondition(
                        center.subscriptionCount(for: name) == held,
                        "subscribe + cancel at priority \(priority): the name should still hold \(held)")
                })
        )
    }
    measure(cases.map(\.1), config)
    let base = cases[0].1.stats.median
    for (priority, c) in cases {
        let s = c.stats
        let ratio = s.median / base
        var checks: [Check] = []
        if priority != 0 {
            checks.append(
                section.check(
                    "subscribe + cancel at priority \(priority) with \(grouped(held)) held vs priority 0",
                    target: "≤ \(limit)×", measured: ratio, text: times(ratio), pass: ratio <= limit))
        }
        section.add(
            [
                "\(priority)", ns(s.median), percent(s.spread), times(ratio),
                priority == 0 ? "(reference)" : "≤ \(limit)×",
                priority == 0 ? "" : verdict(checks),
            ],
            Row(
                contender: c.label, size: held,
                figures: [
                    "nsPerOperation": s.median, "nsPerOperationMin": s.min, "nsPerOperationMax": s.max,
                    "ratioToDefault": ratio, "iterationsPerRepetition": Double(c.iterations),
                ],
                target: priority == 0 ? nil : "≤ \(limit)×", pass: priority == 0 ? nil : checks.allSatisfy(\.pass)))
    }
    withExtendedLifetime(tokens) {}
    return section
}

/// Post to 10 subscribers on a name after 100,000 other subscriptions came and went on it,
/// against a fresh center.
func churnSection(_ config: RunConfig) -> Section {
    let churn = 100_000
    let limit = 1.2
    var section = Section(
        id: "churn", title: "Post to 10 subscribers after \(grouped(churn)) subscriptions came and went on the name",
        notes: [
            "Churned: 5 subscribers, then \(grouped(churn)) more held at once and cancelled in a scattered order, then 5 more.",
            "Fresh: 10 subscribers on a new center. after/fresh: ns/post after churn ÷ fresh (medians, measured interleaved).",
        ],
        columns: ["contender", "fresh ns/post", "churned ns/post", "after/fresh", "target", "result"])
    let n = 10
    let value = postedValue
    let counter = Counter.make()
    let name = "bench.churned"
    let topic = Topic<Int>(name)
    let notificationName = Notification.Name(name)
    let order = scatteredOrder(churn)
    var keep: [Subscription] = []
    var keepObservers: [NSObjectProtocol] = []

    func makeCenter(typed: Bool, churned: Bool) -> PostCenter {
        let center = PostCenter()
        func add(_ count: Int, _ into: inout [Subscription]) {
            if typed {
                subscribeManyTyped(center, topic, counter, count, into: &into)
            } else {
                subscribeMany(center, name, counter, count, into: &into)
            }
        }
        add(n / 2, &keep)
        if churned {
            var transient: [Subscription] = []
            transient.reserveCapacity(churn)
            add(churn, &transient)
            for i in order { transient[i].cancel() }
            transient.removeAll()
        }
        add(n - n / 2, &keep)
        precondition(center.subscriptionCount(for: name) == n, "churn setup: expected \(n) subscriptions on the name")
        return center
    }
    func makeFoundation(churned: Bool) -> NotificationCenter {
        let center = NotificationCenter()
        observeMany(center, notificationName, counter, n / 2, into: &keepObservers)
        if churned {
            var transient: [NSObjectProtocol] = []
            transient.reserveCapacity(churn)
            observeMany(center, notificationName, counter, churn, into: &transient)
            for i in order { center.removeObserver(transient[i]) }
            transient.removeAll()
        }
        observeMany(center, notificationName, counter, n - n / 2, into: &keepObservers)
        return center
    }

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
    func typedCase(_ churned: Bool) -> Case {
        let center = makeCenter(typed: true, churned: churned)
        return Case(
            "PostCenter typed Topic<Int>", prepare: prepare, body: { delivered = postTyped(center, topic, value, $0) },
            verify: verifier("typed post to 10 (churned: \(churned))", perCall: value))
    }
    func plainCase(_ churned: Bool) -> Case {
        let center = makeCenter(typed: false, churned: churned)
        return Case(
            "PostCenter plain, new PostObject", prepare: prepare,
            body: { delivered = postPlain(center, name, nil, $0) },
            verify: verifier("plain post to 10 (churned: \(churned))", perCall: 1))
    }
    func foundationCase(_ churned: Bool) -> Case {
        let center = makeFoundation(churned: churned)
        return Case(
            "NotificationCenter, object: nil", prepare: prepare,
            body: { postNotification(center, notificationName, nil, $0) },
            verify: verifier("NotificationCenter post to 10 (churned: \(churned))", perCall: 1, returnsCount: false))
    }
    let pairs = [
        (typedCase(false), typedCase(true)), (plainCase(false), plainCase(true)),
        (foundationCase(false), foundationCase(true)),
    ]
    measure(pairs.flatMap { [$0.0, $0.1] }, config)

    for (index, (fresh, churned)) in pairs.enumerated() {
        let ratio = churned.stats.median / fresh.stats.median
        var checks: [Check] = []
        if index < 2 {
            checks.append(
                section.check(
                    "\(index == 0 ? "typed" : "plain") post after 100k churn vs fresh", target: "≤ \(limit)×",
                    measured: ratio, text: times(ratio), pass: ratio <= limit))
        }
        section.add(
            [
                fresh.label, ns(fresh.stats.median), ns(churned.stats.median), times(ratio),
                checks.isEmpty ? "(reference)" : "≤\(limit)×", verdict(checks),
            ],
            Row(
                contender: fresh.label, size: n,
                figures: [
                    "freshNsPerPost": fresh.stats.median, "churnedNsPerPost": churned.stats.median,
                    "churnedOverFresh": ratio,
                ],
                target: checks.first?.target, pass: checks.isEmpty ? nil : checks.allSatisfy(\.pass)))
    }
    withExtendedLifetime((keep, keepObservers)) {}
    return section
}
