import Foundation
import Subscriptions
import Synchronization

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
    busyChurnMemory(into: &section)
    return section
}

/// Resident memory while 200,000 subscribe+cancel pairs are made on a name that four threads
/// keep posting (so the route is never quiet): replaced slot buffers must be freed as posts move
/// on, and tombstones squeezed out, without waiting for a quiet moment.
private func busyChurnMemory(into section: inout Section) {
    let pairs = 200_000
    let limitMB = 4.0
    let center = PostCenter()
    let name = "bench.busyChurn"
    let topic = Topic<Int>(name)
    let counter = Counter.make()
    var keep: [Subscription] = []
    subscribeManyTyped(center, topic, counter, 10, into: &keep)
    let stop = Atomic<Bool>(false)
    let posters = DispatchGroup()
    for _ in 0..<4 {
        posters.enter()
        Thread {
            while !stop.load(ordering: .relaxed) { _ = center.post(topic, 1) }
            posters.leave()
        }.start()
    }
    // Warm up (the allocator's arenas, the route's buffers), then measure the growth.
    for _ in 0..<20_000 { center.subscribe(name) { _ in }.cancel() }
    let before = residentBytes()
    for _ in 0..<pairs { center.subscribe(name) { _ in }.cancel() }
    let after = residentBytes()
    stop.store(true, ordering: .relaxed)
    posters.wait()
    let growthMB = Double(max(0, after - before)) / 1_048_576
    let check = section.check(
        "resident memory growth, \(grouped(pairs)) subscribe+cancel while 4 threads post the name",
        target: "< \(Int(limitMB)) MB", measured: growthMB, text: String(format: "%.2f MB", growthMB),
        pass: growthMB < limitMB)
    section.add(
        [
            "RSS growth, \(grouped(pairs)) subscribe+cancel, 4 posting threads", "", "",
            String(format: "%.2f MB", growthMB), check.target, verdict([check]),
        ],
        Row(
            contender: "PostCenter busy churn RSS growth", size: pairs, figures: ["growthMB": growthMB],
            target: check.target, pass: check.pass))
    withExtendedLifetime((keep, center)) {}
}

/// The process's resident set size in bytes (Linux: `/proc/self/statm`; 0 where unavailable).
private func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}
