import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A counter that handlers bump through a captured pointer: no atomics, no exclusivity checks,
/// so every contender's handler does exactly the same tiny amount of work.
struct Counter: @unchecked Sendable {
    // @unchecked: a raw pointer to one `Int`. Each counter is written by one thread at a time
    // (the two-thread benchmark gives each thread its own), and read by the main thread only after
    // that thread has finished (ordered by a `DispatchGroup`).
    let pointer: UnsafeMutablePointer<Int>

    /// Allocates a counter on its own 128-byte block, so two threads' counters never share a
    /// cache line. Never freed: a benchmark makes a handful.
    static func make() -> Counter {
        let raw = UnsafeMutableRawPointer.allocate(byteCount: 128, alignment: 128)
        let pointer = raw.bindMemory(to: Int.self, capacity: 1)
        pointer.initialize(to: 0)
        return Counter(pointer: pointer)
    }

    var value: Int { pointer.pointee }
    func reset() { pointer.pointee = 0 }
}

/// Stops the run with a message naming the measurement when the handlers did not run as often as
/// they should have. This is also what keeps the optimiser from deleting the measured work.
func expectCalls(_ actual: Int, _ expected: Int, _ what: @autoclosure () -> String) {
    precondition(
        actual == expected,
        "benchmark '\(what())': expected \(expected) handler calls, counted \(actual): the measured work did not happen as written"
    )
}

/// Monotonic wall-clock nanoseconds.
@inline(__always)
func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Nanoseconds of CPU time the calling thread has used: time it spends preempted by other
/// processes does not count.
@inline(__always)
func threadCPUNow() -> UInt64 {
    var t = timespec()
    let status = clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
    precondition(status == 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed; run with --clock wall")
    return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
}

/// What a repetition's duration is measured with.
enum Clock: String {
    /// The measuring thread's CPU time: robust on a shared, loaded machine.
    case cpu
    /// Wall-clock time: what an idle machine gives.
    case wall

    @inline(__always)
    func read() -> UInt64 { self == .cpu ? threadCPUNow() : now() }

    var description: String {
        switch self {
        case .cpu:
            return
                "CPU time of the measuring thread (CLOCK_THREAD_CPUTIME_ID): time spent preempted by other processes does not count"
        case .wall: return "wall-clock time"
        }
    }
}

/// How much to measure.
struct RunConfig {
    /// Timed repetitions per case; the figure reported is their median.
    var repetitions: Int
    /// Each repetition runs at least this long (on `clock`).
    var minimumRunNanos: UInt64
    /// What single-threaded repetitions are timed with. The two-thread benchmark always
    /// measures wall-clock throughput (and reports CPU time beside it).
    var clock: Clock
}

/// One contender in a measurement group.
///
/// `body(n)` performs `n` operations and is timed; `prepare` runs before and `verify(n)` after it,
/// untimed. `verify` must check the exact number of handler calls.
final class Case {
    let label: String
    private let runner: (Int, Clock) -> UInt64
    private(set) var iterations = 0
    private(set) var samples: [Double] = []

    /// A case whose `body(n)` performs `n` operations; only `body` is timed.
    convenience init(
        _ label: String, prepare: @escaping () -> Void, body: @escaping (Int) -> Void, verify: @escaping (Int) -> Void
    ) {
        self.init(label) { n, clock in
            prepare()
            let start = clock.read()
            body(n)
            let elapsed = clock.read() - start
            verify(n)
            return elapsed
        }
    }

    /// A case that times itself: `runner(n, clock)` performs `n` operations, checks their
    /// handler calls, and returns the nanoseconds they took.
    init(_ label: String, runner: @escaping (Int, Clock) -> UInt64) {
        self.label = label
        self.runner = runner
    }

    /// Runs `n` operations once and returns their elapsed nanoseconds.
    func run(_ n: Int, _ config: RunConfig) -> UInt64 { runner(n, config.clock) }

    /// Grows the iteration count until one run lasts `minimumRunNanos`, then runs once more at that
    /// size as a warm-up.
    func calibrate(_ config: RunConfig) {
        var n = 1
        while true {
            let t = run(n, config)
            if t >= config.minimumRunNanos { break }
            let wanted = Double(config.minimumRunNanos) * 1.25 / Double(max(t, 1))
            n = Int(Double(n) * min(10, max(2, wanted)))
        }
        iterations = n
        _ = run(n, config)
    }

    func record(_ config: RunConfig) {
        samples.append(Double(run(iterations, config)) / Double(iterations))
    }

    var stats: Stats { Stats(samples) }
}

/// Median, minimum and maximum of a set of samples.
struct Stats: Codable {
    var median: Double
    var min: Double
    var max: Double
    var count: Int

    init(_ samples: [Double]) {
        precondition(!samples.isEmpty, "no samples were taken")
        let sorted = samples.sorted()
        let mid = sorted.count / 2
        median = sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
        min = sorted.first!
        max = sorted.last!
        count = sorted.count
    }

    /// (max − min) / median.
    var spread: Double { median > 0 ? (max - min) / median : 0 }
}

/// Calibrates every case, then takes the repetitions round-robin (starting with a different case
/// each round), so that load changes on a shared machine hit all contenders alike.
func measure(_ cases: [Case], _ config: RunConfig) {
    for c in cases { c.calibrate(config) }
    for round in 0..<config.repetitions {
        for k in 0..<cases.count {
            cases[(k + round) % cases.count].record(config)
        }
    }
}
