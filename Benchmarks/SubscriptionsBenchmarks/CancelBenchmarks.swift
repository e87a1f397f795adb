import Foundation
import Subscriptions
import Synchronization

/// Issue 24's rows: what a cancel costs when other threads exist.
///
/// 1. Subscribe + `cancel()` and subscribe + token drop on a name holding 10 others, against
///    NotificationCenter's add + remove observer on a name with 10 observers: alone, then while
///    a second thread keeps posting another name of the same center (the usual state of an app or
///    a server; a cancel's process-wide fence interrupts that thread's core).
/// 2. Subscribe + cancel before and after bursts of 10,000 threads, all alive at once (each
///    subscribed to one shared name, or to a name of its own, posted once, waited for the others,
///    and exited), and the resident memory such a burst leaves in a fresh process beyond what the
///    same threads leave without the library (issue 37: the own-name shape, cancelled after the
///    barrier, is the one an outside check measured).
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
            "Bursts: \(grouped(threads)) threads alive at once, each subscribing (to one shared name, or to a name of its own),",
            "posting once, waiting for the others and exiting (a shared-name token is dropped before the wait, an own name is",
            "cancelled after it); memory is VmRSS",
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
        "PostCenter subscribe + cancel(), before the bursts", prepare: { counter.reset() },
        body: { subscribeAndCancel(center, name, counter, $0) },
        verify: { _ in expectCalls(counter.value, 0, "subscribe + cancel before the bursts") })
    measure([before], config)
    // Each burst runs in a fresh process (this program again, see `runBurstChild`), against the
    // same burst of threads that never touch the library in another fresh process: what a first
    // burst leaves (tables grown, per-thread state, the allocator's arenas) is all counted, and
    // nothing earlier in this run hides it. Three of each, alternating; medians compared. The
    // bursts below, in this process, only age it for the "after" row.
    struct Growth {
        var label: String
        var with: BurstGrowth
        var without: BurstGrowth
        var bare: BurstGrowth
    }
    var growths: [Growth] = []
    for shape in [BurstShape.shared, .ownNames] {
        var runs: [BurstShape: [BurstGrowth]] = [:]
        for _ in 0..<3 {
            for kind in [BurstShape.control, .bare, shape] {
                runs[kind, default: []].append(burstGrowthInChild(kind, threads: threads))
            }
        }
        growths.append(
            Growth(
                label: shape.label, with: .median(runs[shape]!), without: .median(runs[.control]!),
                bare: .median(runs[.bare]!)))
        _ = burstGrowth(threads, shape.body(center, name))
    }
    let after = Case(
        "PostCenter subscribe + cancel(), after the bursts", prepare: { counter.reset() },
        body: { subscribeAndCancel(center, name, counter, $0) },
        verify: { _ in expectCalls(counter.value, 0, "subscribe + cancel after the bursts") })
    measure([after], config)
    let ratio = after.stats.median / before.stats.median
    let slowdown = section.check(
        "subscribe + cancel after the \(grouped(threads))-thread bursts ÷ before", target: "≤ 1.5×",
        measured: ratio, text: times(ratio), pass: ratio <= 1.5)
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
    for growth in growths {
        let extraMB = Double(growth.with.resident - growth.without.resident) / 1024
        let memory = section.check(
            "resident memory left by \(grouped(threads)) threads alive at once (\(growth.label)) beyond the same threads without the library",
            target: "≤ 2 MB", measured: extraMB, text: String(format: "%.2f MB", extraMB), pass: extraMB <= 2)
        section.add(
            [
                "burst",
                "\(growth.label): VmRSS growth with the library \(growth.with.resident) kB, without "
                    + "\(growth.without.resident) kB (threads that never allocate: \(growth.bare.resident) kB); "
                    + "after malloc_trim \(growth.with.trimmed), \(growth.without.trimmed) and \(growth.bare.trimmed) kB",
                String(format: "%.2f MB", extraMB), "", "", "≤ 2 MB", verdict([memory]),
            ],
            Row(
                contender: "resident memory beyond the threads' own (\(growth.label))", size: threads,
                figures: [
                    "extraMegabytes": extraMB, "withKilobytes": Double(growth.with.resident),
                    "withoutKilobytes": Double(growth.without.resident),
                    "neverAllocatingKilobytes": Double(growth.bare.resident),
                    "withKilobytesTrimmed": Double(growth.with.trimmed),
                    "withoutKilobytesTrimmed": Double(growth.without.trimmed),
                    "neverAllocatingKilobytesTrimmed": Double(growth.bare.trimmed),
                ],
                target: memory.target, pass: memory.pass))
    }
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
/// What a burst thread does after the barrier.
typealias BurstAfter = @Sendable () -> Void

/// The shapes of a 10,000-thread burst; every thread is alive until all have done their part.
enum BurstShape: String, CaseIterable {
    /// Threads that never touch the library: they allocate and free a few blocks, and make the
    /// name string a thread of `ownNames` makes.
    case control
    /// Threads that only wait at the barrier: they never call the allocator, which no real
    /// thread does; shown beside the control, not compared.
    case bare
    /// Each thread subscribes to one shared name, posts it and drops its token, then waits.
    case shared
    /// Each thread subscribes to a name of its own and posts it, waits with its subscription
    /// live, then cancels and exits.
    case ownNames

    var label: String {
        switch self {
        case .control: "without the library"
        case .bare: "threads that never allocate"
        case .shared: "one shared name, each token dropped before the barrier"
        case .ownNames: "a name of its own each, cancelled after the barrier"
        }
    }

    /// The body of each thread of the burst, on `center`.
    func body(_ center: PostCenter, _ name: String) -> @Sendable (Int) -> BurstAfter {
        switch self {
        case .control:
            return { index in
                allocateAndFree()
                let own = name + ".burst.\(index)"
                return { withExtendedLifetime(own) { allocateAndFree() } }
            }
        case .bare:
            return { _ in {} }
        case .shared:
            return { _ in
                let token = center.subscribe(name + ".burst") { _ in }
                center.post(name + ".burst")
                withExtendedLifetime(token) {}
                return {}
            }
        case .ownNames:
            return { index in
                let own = name + ".burst.\(index)"
                let token = center.subscribe(own) { _ in }
                center.post(own)
                return { token.cancel() }
            }
        }
    }
}

/// The environment variable that makes this program a burst child (see `runBurstChild`).
let burstChildVariable = "SUBSCRIPTIONS_BENCH_BURST"

/// The VmRSS growth a burst left in a fresh process, in kB: as measured, and after glibc's
/// `malloc_trim(0)` returned the allocator's free memory to the system (so what remains is
/// memory something still holds; equal to `resident` where there is no `malloc_trim`).
struct BurstGrowth {
    var resident: Int
    var trimmed: Int

    static func median(_ runs: [BurstGrowth]) -> BurstGrowth {
        BurstGrowth(
            resident: Int(Stats(runs.map { Double($0.resident) }).median),
            trimmed: Int(Stats(runs.map { Double($0.trimmed) }).median))
    }
}

/// In a burst child (the environment names a shape), runs one burst of that shape in this fresh
/// process, prints `BURST <kB> TRIMMED <kB>` (see `BurstGrowth`) and exits.
func runBurstChildIfAsked() {
    guard let value = ProcessInfo.processInfo.environment[burstChildVariable] else { return }
    guard let shape = BurstShape(rawValue: value), let threads = Int(CommandLine.arguments.last ?? "") else {
        FileHandle.standardError.write(Data("bad burst child: \(value)\n".utf8))
        exit(2)
    }
    let center = PostCenter()
    let before = residentKB()
    let growth = burstGrowth(threads, shape.body(center, "bench.cancelLoad"))
    // glibc's malloc_trim(0) (not in the Glibc module: found by name).
    if let trim = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") {
        _ = unsafeBitCast(trim, to: (@convention(c) (Int) -> Int32).self)(0)
    }
    let trimmed = residentKB() - before
    withExtendedLifetime(center) {}
    print("BURST \(growth) TRIMMED \(trimmed)")
    exit(0)
}

/// Runs one burst of `shape` in a fresh process and returns what it left.
func burstGrowthInChild(_ shape: BurstShape, threads: Int) -> BurstGrowth {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
    process.arguments = ["--burst-child", "\(threads)"]
    var environment = ProcessInfo.processInfo.environment
    environment[burstChildVariable] = shape.rawValue
    process.environment = environment
    let pipe = Pipe()
    process.standardOutput = pipe
    do { try process.run() } catch { fatalError("could not start a burst child: \(error)") }
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    for line in output.split(separator: "\n") where line.hasPrefix("BURST ") {
        let words = line.split(separator: " ")
        if words.count == 4, let resident = Int(words[1]), let trimmed = Int(words[3]) {
            return BurstGrowth(resident: resident, trimmed: trimmed)
        }
    }
    fatalError("a burst child (\(shape.rawValue)) printed no BURST line: \(output)")
}

/// Starts `threads` threads, all alive at once: each runs `body(index)`, waits until every thread
/// did, then runs what `body` returned and exits. Returns the VmRSS growth in kB, measured once
/// every thread exited.
func burstGrowth(_ threads: Int, _ body: @escaping @Sendable (Int) -> BurstAfter) -> Int {
    let before = residentKB()
    let baselineThreads = statusField("Threads:")
    let started = DispatchGroup()
    let finished = DispatchGroup()
    let go = DispatchSemaphore(value: 0)
    for index in 0..<threads {
        started.enter()
        finished.enter()
        let thread = Thread {
            let after = body(index)
            started.leave()
            go.wait()
            after()
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
