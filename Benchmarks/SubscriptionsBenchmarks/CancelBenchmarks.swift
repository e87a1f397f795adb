import Foundation
import Subscriptions
import Synchronization

/// Issue 24's rows: what a cancel costs when other threads exist.
///
/// 1. Subscribe + `cancel()` and subscribe + token drop on a name holding 10 others, against
///    NotificationCenter's add + remove observer on a name with 10 observers: alone, then while
///    a second thread keeps posting another name of the same center (the usual state of an app or
///    a server; a cancel's process-wide fence interrupts that thread's core).
/// 2. Subscribe + cancel before and after 10,000 threads (all alive at once) subscribed, posted
///    once and exited, and the resident memory those threads leave behind beyond what the same
///    threads leave without the library.
func cancelLoadSection(_ config: RunConfig) -> Section {
    let threads = 10_000
    var section = Section(
        id: "cancelLoad",
        title: "Cancel and drop beside a posting thread; cancel after \(grouped(threads)) threads exited",
        notes: [
            "ns/op: one subscribe (a new handler closure) and its cancel() or token drop, on a name holding 10 others;",
            "NotificationCenter: addObserver(forName:object:queue:using:) + removeObserver on a name with 10 observers.",
            "\"posting\": a second thread posts another name of the same center without pause while these run.",
            "\"idle 30\": 30 more threads that posted another name once wait (holding their records) while these run.",
            "Burst: \(grouped(threads)) threads alive at once, each subscribing, posting once and exiting; memory is VmRSS",
            "after they were joined, minus the same for \(grouped(threads)) threads that do not touch the library.",
        ],
        columns: ["case", "contender", "ns/op", "spread", "NC/ours", "target", "result"])
    let name = "bench.cancelLoad"
    let counter = Counter.make()
    let center = PostCenter()
    let foundation = NotificationCenter()
    var tokens: [Subscription] = []
    var observers: [NSObjectProtocol] = []
    subscribeMany(center, name, counter, 10, into: &tokens)
    observeMany(foundation, Notification.Name(name), counter, 10, into: &observers)

    func contenders() -> (cancel: Case, drop: Case, foundation: Case) {
        let cancel = Case(
            "PostCenter subscribe + cancel()", prepare: { counter.reset() },
            body: { subscribeAndCancel(center, name, counter, $0) },
            verify: { _ in expectCalls(counter.value, 0, "subscribe + cancel") })
        let drop = Case(
            "PostCenter subscribe + token drop", prepare: { counter.reset() },
            body: { subscribeAndDrop(center, name, counter, $0) },
            verify: { _ in expectCalls(counter.value, 0, "subscribe + drop") })
        let theirs = Case(
            "NotificationCenter add + remove observer", prepare: { counter.reset() },
            body: { observeAndRemove(foundation, Notification.Name(name), counter, $0) },
            verify: { _ in expectCalls(counter.value, 0, "addObserver + removeObserver") })
        return (cancel, drop, theirs)
    }

    /// Adds the three rows of `c`, with checks against the targets when given (else informative).
    func report(
        _ label: String, _ c: (cancel: Case, drop: Case, foundation: Case),
        targets: (drop: Double, cancel: Double)?
    ) {
        let nc = c.foundation.stats.median
        let cancelSpeedup = nc / c.cancel.stats.median
        let dropSpeedup = nc / c.drop.stats.median
        let cancelCheck = targets.map { t in
            section.check(
                "subscribe + cancel() vs NotificationCenter, \(label)", target: "≥ \(t.cancel)× faster",
                measured: cancelSpeedup, text: times(cancelSpeedup), pass: cancelSpeedup >= t.cancel)
        }
        let dropCheck = targets.map { t in
            section.check(
                "subscribe + token drop vs NotificationCenter, \(label)", target: "≥ \(t.drop)× faster",
                measured: dropSpeedup, text: times(dropSpeedup), pass: dropSpeedup >= t.drop)
        }
        let reference = targets == nil ? "(informative)" : "(reference)"
        for (x, check) in [(c.cancel, cancelCheck), (c.drop, dropCheck), (c.foundation, nil)] {
            let s = x.stats
            section.add(
                [
                    label, x.label, ns(s.median), percent(s.spread), times(nc / s.median),
                    check.map { $0.target } ?? reference, check.map { verdict([$0]) } ?? "",
                ],
                Row(
                    contender: x.label + " (\(label))", size: 10,
                    figures: ["nsPerOperation": s.median, "speedupVsNotificationCenter": nc / s.median],
                    target: check?.target, pass: check?.pass))
        }
    }

    let alone = contenders()
    measure([alone.cancel, alone.drop, alone.foundation], config)
    report("alone", alone, targets: (drop: 2.4, cancel: 2.4))

    let loaded = contenders()
    let poster = BackgroundPoster(center: center, name: name + ".other")
    measure([loaded.cancel, loaded.drop, loaded.foundation], config)
    let posted = poster.stop()
    precondition(posted > 0, "the background thread posted nothing: the 'posting' rows measured nothing")
    report("posting", loaded, targets: (drop: 3, cancel: 1))

    // Beside idle threads: each posted another name once and waits, holding its record (as a
    // pool thread does after a queued delivery). A scan filtered by route reads their hints from
    // the directory, not their records. No target: the rows show what an idle thread costs.
    let idleThreads = 30
    let idleGate = DispatchSemaphore(value: 0)
    let idleReady = DispatchSemaphore(value: 0)
    for _ in 0..<idleThreads {
        Thread {
            center.post(name + ".idle")
            idleReady.signal()
            idleGate.wait()
        }.start()
    }
    for _ in 0..<idleThreads { idleReady.wait() }
    let idle = contenders()
    measure([idle.cancel, idle.drop, idle.foundation], config)
    for _ in 0..<idleThreads { idleGate.signal() }
    report("idle \(idleThreads)", idle, targets: nil)

    // The burst.
    let before = Case(
        "PostCenter subscribe + cancel(), before the burst", prepare: { counter.reset() },
        body: { subscribeAndCancel(center, name, counter, $0) },
        verify: { _ in expectCalls(counter.value, 0, "subscribe + cancel before the burst") })
    measure([before], config)
    // The allocator keeps per-thread arenas and freed stacks, so a burst's growth depends on what
    // ran before. A warm-up burst of each kind, then three of each, alternating; medians compared.
    // The control threads allocate and free too (as the library's subscribe does, and as any real
    // thread does).
    let burst: @Sendable () -> Void = {
        let token = center.subscribe(name + ".burst") { _ in }
        center.post(name + ".burst")
        withExtendedLifetime(token) {}
    }
    _ = burstGrowth(threads) { allocateAndFree() }
    _ = burstGrowth(threads, burst)
    var control: [Double] = []
    var library: [Double] = []
    for _ in 0..<3 {
        control.append(Double(burstGrowth(threads) { allocateAndFree() }))
        library.append(Double(burstGrowth(threads, burst)))
    }
    let controlGrowth = Int(Stats(control).median)
    let libraryGrowth = Int(Stats(library).median)
    let after = Case(
        "PostCenter subscribe + cancel(), after the burst", prepare: { counter.reset() },
        body: { subscribeAndCancel(center, name, counter, $0) },
        verify: { _ in expectCalls(counter.value, 0, "subscribe + cancel after the burst") })
    measure([after], config)
    let ratio = after.stats.median / before.stats.median
    let slowdown = section.check(
        "subscribe + cancel after \(grouped(threads)) threads exited ÷ before", target: "≤ 1.5×", measured: ratio,
        text: times(ratio), pass: ratio <= 1.5)
    for (x, check) in [(before, nil), (after, slowdown)] {
        let s = x.stats
        section.add(
            [
                "burst", x.label, ns(s.median), percent(s.spread), "", check.map { $0.target } ?? "(reference)",
                check.map { verdict([$0]) } ?? "",
            ],
            Row(
                contender: x.label, size: threads, figures: ["nsPerOperation": s.median], target: check?.target,
                pass: check?.pass))
    }
    let extraMB = Double(libraryGrowth - controlGrowth) / 1024
    let memory = section.check(
        "resident memory left by \(grouped(threads)) exited threads beyond the same threads without the library",
        target: "≤ 2 MB", measured: extraMB, text: String(format: "%.2f MB", extraMB), pass: extraMB <= 2)
    section.add(
        [
            "burst", "VmRSS growth: with the library \(libraryGrowth) kB, without \(controlGrowth) kB",
            String(format: "%.2f MB", extraMB), "", "", "≤ 2 MB", verdict([memory]),
        ],
        Row(
            contender: "resident memory beyond the threads' own", size: threads,
            figures: [
                "extraMegabytes": extraMB, "withKilobytes": Double(libraryGrowth),
                "withoutKilobytes": Double(controlGrowth),
            ],
            target: memory.target, pass: memory.pass))
    withExtendedLifetime((tokens, observers)) {}
    return section
}

/// Allocates and frees a few small blocks, so that a control thread touches the allocator like a
/// subscribing one.
@inline(never)
func allocateAndFree() {
    for size in [48, 64, 96, 128] {
        let block = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        block.storeBytes(of: size, as: Int.self)
        block.deallocate()
    }
}

/// Subscribe, then drop the token (its deinit cancels without waiting).
@inline(never)
func subscribeAndDrop(_ center: PostCenter, _ name: String, _ counter: Counter, _ iterations: Int) {
    for _ in 0..<iterations {
        let token = center.subscribe(name) { _ in counter.pointer.pointee &+= 1 }
        withExtendedLifetime(token) {}
    }
}

/// A thread that posts `name` on `center` (one subscriber) without pause until `stop()`.
final class BackgroundPoster: @unchecked Sendable {
    // @unchecked: `thread` is written once in init and joined in `stop()` on the creating thread.
    private let running = Atomic<Bool>(true)
    private let count = Atomic<Int>(0)
    private let begun = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    private let token: Subscription

    init(center: PostCenter, name: String) {
        token = center.subscribe(name) { _ in }
        let thread = Thread { [self] in
            var n = 0
            while running.load(ordering: .relaxed) {
                n += center.post(name)
                if n == 1 { begun.store(true, ordering: .relaxed) }
            }
            count.store(n, ordering: .relaxed)
            done.signal()
        }
        thread.start()
        // Until it posts: the measured rows must run beside a posting thread.
        while !begun.load(ordering: .relaxed) { usleep(1000) }
    }

    /// Stops the thread and returns how many posts it made.
    func stop() -> Int {
        running.store(false, ordering: .relaxed)
        done.wait()
        withExtendedLifetime(token) {}
        return count.load(ordering: .relaxed)
    }
}

/// Starts `threads` threads that all run `body` while alive at once, joins them, and returns how
/// much VmRSS grew (kB) from before they started to after they exited.
func burstGrowth(_ threads: Int, _ body: @escaping @Sendable () -> Void) -> Int {
    let before = residentKB()
    let baselineThreads = statusField("Threads:")
    let started = DispatchGroup()
    let finished = DispatchGroup()
    let go = DispatchSemaphore(value: 0)
    for _ in 0..<threads {
        started.enter()
        finished.enter()
        let thread = Thread {
            body()
            started.leave()
            go.wait()
            finished.leave()
        }
        thread.stackSize = 1 << 16
        thread.start()
    }
    started.wait()
    for _ in 0..<threads { go.signal() }
    finished.wait()
    // The threads' exits (pthread key destructors) complete after `leave()`: wait until the
    // process has no more threads than before (bounded: 60 s).
    for _ in 0..<600 where statusField("Threads:") > baselineThreads {
        usleep(100_000)
    }
    return residentKB() - before
}

/// The `VmRSS` of /proc/self/status, in kB (0 where there is no /proc).
func residentKB() -> Int { statusField("VmRSS:") }

/// A number field of /proc/self/status (0 where there is no /proc).
func statusField(_ field: String) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix(field) {
        return Int(line.dropFirst(field.count).filter(\.isNumber)) ?? 0
    }
    return 0
}
