import Foundation
import Subscriptions

/// Post to 10 subscribers on a name after 50,000 subscribe+cancel pairs made while one delivery
/// of that name runs all along (it is still running while the posts are timed), against a fresh
/// center: the engine must not need a quiet route to squeeze tombstones out.
func longDeliverySection(_ config: RunConfig) -> Section {
    let churn = 50_000
    let limit = 1.5
    var section = Section(
        id: "longDelivery",
        title: "Post to 10 subscribers after \(grouped(churn)) cancels during one long delivery of the name",
        notes: [
            "Both centers: 10 counting handlers and an 11th that returns at once, except for a post of -1, which it holds.",
            "Busy: a thread's post of -1 sits in the 11th while \(grouped(churn)) subscriptions are made and cancelled on the name,",
            "and keeps sitting there while the posts are timed. Fresh: a new center.",
        ],
        columns: ["contender", "fresh ns/post", "busy ns/post", "busy/fresh", "target", "result"])
    let n = 10
    let counter = Counter.make()
    let name = "bench.long"
    let topic = Topic<Int>(name)
    var keep: [Subscription] = []
    let inside = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let held = DispatchGroup()

    func makeCenter(busy: Bool) -> PostCenter {
        let center = PostCenter()
        subscribeManyTyped(center, topic, counter, n, into: &keep)
        // An 11th handler on both centers; on the busy one, a post of -1 sits in it.
        keep.append(
            center.subscribe(topic) { v in
                guard v == -1 else { return }
                inside.signal()
                release.wait()
            })
        guard busy else { return center }
        held.enter()
        Thread {
            _ = center.post(topic, -1)
            held.leave()
        }.start()
        inside.wait()
        for _ in 0..<churn { center.subscribe(name) { _ in }.cancel() }
        return center
    }
    let fresh = makeCenter(busy: false)
    let busy = makeCenter(busy: true)
    let value = postedValue
    func typedCase(_ center: PostCenter, _ label: String) -> Case {
        var delivered = 0
        return Case(
            label, prepare: { counter.reset() }, body: { delivered = postTyped(center, topic, value, $0) },
            verify: {
                expectCalls(counter.value, $0 * n * value, "typed post to 10 (\(label))")
                expectCalls(delivered, $0 * (n + 1), "typed post to 11 (\(label), returned count)")
            })
    }
    let freshCase = typedCase(fresh, "fresh")
    let busyCase = typedCase(busy, "busy")
    measure([freshCase, busyCase], config)
    release.signal()
    held.wait()
    let ratio = busyCase.stats.median / freshCase.stats.median
    let check = section.check(
        "typed post after \(grouped(churn)) cancels during one long delivery vs fresh", target: "≤ \(limit)×",
        measured: ratio, text: times(ratio), pass: ratio <= limit)
    section.add(
        [
            "PostCenter typed Topic<Int>", ns(freshCase.stats.median), ns(busyCase.stats.median), times(ratio),
            check.target, verdict([check]),
        ],
        Row(
            contender: "PostCenter typed Topic<Int>", size: n,
            figures: [
                "freshNsPerPost": freshCase.stats.median, "busyNsPerPost": busyCase.stats.median, "ratio": ratio,
            ],
            target: check.target, pass: check.pass))
    withExtendedLifetime((keep, fresh, busy)) {}
    return section
}
