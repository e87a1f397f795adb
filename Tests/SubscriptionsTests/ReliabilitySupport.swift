import Dispatch
import Foundation
import Subscriptions
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Helpers shared by the stress, race and model tests (a namespace, so their names cannot clash
/// with other test files of the module).
enum Reliability {
    /// SplitMix64 (Steele, Lea and Flood): a tiny seeded generator whose sequence is the same on
    /// every platform and every Swift version, unlike `Int.random(in:using:)`, whose reduction
    /// algorithm belongs to the standard library. Only `next()`, `below(_:)` and `chance(_:)`
    /// are used, so a seed printed by a failing test reproduces the failure anywhere.
    struct Random {
        private var state: UInt64

        init(seed: UInt64) { state = seed }

        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }

        /// A number in `0..<bound` (the tiny modulo bias does not matter for tests).
        mutating func below(_ bound: Int) -> Int {
            precondition(bound > 0)
            return Int(next() % UInt64(bound))
        }

        /// `true` with probability `percent`/100.
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

        /// A random element of a non-empty collection.
        mutating func pick<C: RandomAccessCollection>(_ items: C) -> C.Element where C.Index == Int {
            items[items.startIndex + below(items.count)]
        }
    }

    /// Whether this process runs with ThreadSanitizer (its runtime is linked into the test
    /// binary and exports `__tsan_init`). Instrumented code runs 5 to 15 times slower, so the
    /// stress tests do fewer operations there.
    static let underThreadSanitizer: Bool = dlsym(dlopen(nil, RTLD_NOW), "__tsan_init") != nil

    /// The factor applied to operation counts: `SUBSCRIPTIONS_STRESS_SCALE` when set (for
    /// example `10` for a long soak run), else 1, or 1/2 under ThreadSanitizer.
    static let scale: Double = {
        if let text = ProcessInfo.processInfo.environment["SUBSCRIPTIONS_STRESS_SCALE"], let value = Double(text),
            value > 0
        {
            return value
        }
        return underThreadSanitizer ? 0.5 : 1
    }()

    /// `count` scaled by ``scale``, never below `minimum`.
    static func scaled(_ count: Int, minimum: Int = 1) -> Int {
        max(minimum, Int((Double(count) * scale).rounded()))
    }

    /// Runs `body(0..<count)` on `count` dedicated threads (not the 2-thread dispatch pool, so
    /// that all of them really interleave), released together, and returns when all are done.
    static func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let arrived = Atomic<Int>(0)
        let done = DispatchGroup()
        let gate = Gate(arrived: arrived, count: count)
        for index in 0..<count {
            done.enter()
            let thread = Thread {
                gate.pass()
                body(index)
                done.leave()
            }
            thread.start()
        }
        done.wait()
    }

    /// A start line: every thread waits until all have arrived.
    private final class Gate: Sendable {
        let arrived: Atomic<Int>
        let count: Int
        init(arrived: consuming Atomic<Int>, count: Int) {
            self.arrived = arrived
            self.count = count
        }
        func pass() {
            arrived.add(1, ordering: .acquiringAndReleasing)
            while arrived.load(ordering: .acquiring) < count { sched_yield() }
        }
    }

    /// Waits until `condition` holds: yields the processor for a while, then sleeps 50 µs
    /// between checks, so a waiting thread does not starve the ones it waits for on 2 cores.
    ///
    /// Not a timing assertion: the bound (a million sleeps, a minute or more) only turns a
    /// wait that can never end (a lost delivery, a broken test) into a crash that names it,
    /// instead of a CI job that hangs until it is killed.
    static func wait(
        for what: @autoclosure () -> String, file: StaticString = #file, line: UInt = #line,
        until condition: () -> Bool
    ) {
        var attempt = 0
        while !condition() {
            if attempt < 64 { sched_yield() } else { usleep(50) }
            attempt += 1
            if attempt > 1_000_000 {
                fatalError("gave up waiting for \(what()) (a lost delivery?)", file: file, line: line)
            }
        }
    }
}

// MARK: - Shared test doubles (nested, so that their names cannot clash with other test files)

extension Reliability {
    /// A value behind an `NSLock`.
    ///
    /// The tests use this instead of `Mutex` on purpose: on Linux the contended paths of
    /// `Synchronization.Mutex` are futex system calls inside the uninstrumented
    /// `libswiftSynchronization`, invisible to ThreadSanitizer, so a contended `Mutex` produces false
    /// race reports. `NSLock` is a `pthread_mutex_t`, which ThreadSanitizer intercepts.
    final class Locked<Value>: @unchecked Sendable {
        // @unchecked: `value` is only touched while `lock` is held.
        private let lock = NSLock()
        private var value: Value

        init(_ value: Value) { self.value = value }

        func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
            lock.lock()
            defer { lock.unlock() }
            return try body(&value)
        }

        var current: Value { withLock { $0 } }
    }

    /// A shared atomic count: live instances of the classes that report to it (+1 in `init`, −1
    /// in `deinit`), calls, or violations.
    final class Tally: Sendable {
        private let value = Atomic<Int>(0)
        func up() { value.add(1, ordering: .acquiringAndReleasing) }
        func down() { value.subtract(1, ordering: .acquiringAndReleasing) }
        func add(_ n: Int) { value.add(n, ordering: .acquiringAndReleasing) }
        var current: Int { value.load(ordering: .acquiring) }
    }

    /// An object captured by a handler closure: while it lives the center still holds the closure.
    final class Capture: Sendable {
        let live: Tally
        init(_ live: Tally) {
            self.live = live
            live.up()
        }
        deinit { live.down() }
    }

    /// A counter of calls plus the two facts the cancellation race tests check: whether a call
    /// started after the subscription's end returned (`closed`), and whether one was still running.
    final class CallProbe: Sendable {
        let calls = Atomic<Int>(0)
        let running = Atomic<Int>(0)
        /// Set right after `cancel()` (or the token's deinit, or the observer's deinit) returned.
        let closed = Atomic<Bool>(false)
        /// Calls that started while `closed` was already set: each one breaks guarantee 8.
        let lateStarts = Atomic<Int>(0)

        func enter() {
            if closed.load(ordering: .acquiring) { lateStarts.add(1, ordering: .relaxed) }
            running.add(1, ordering: .acquiringAndReleasing)
            calls.add(1, ordering: .relaxed)
        }

        func exit() { running.subtract(1, ordering: .acquiringAndReleasing) }

        /// Marks the end; returns whether a call was still running at that moment.
        func close() -> Bool {
            let stillRunning = running.load(ordering: .acquiring) != 0
            closed.store(true, ordering: .releasing)
            return stillRunning
        }
    }

    /// An observer for selector registrations that records whether any of its methods ran once its
    /// deinit had started (the center must never call into a dying or dead observer).
    final class DyingObserver: @unchecked Sendable {
        // @unchecked: `token` is only set and cleared by the thread that owns the observer; the
        // rest is immutable or atomic. The deinit may run on a posting thread, which only reads atomics.
        let live: Tally
        /// Calls that found `deinitStarted` set (shared, since it is read after the observer died).
        let violations: Tally
        let deinitStarted = Atomic<Bool>(false)
        let calls = Atomic<Int>(0)
        /// Runs on every call (for shared accounting in the stress test).
        let onCall: @Sendable () -> Void
        /// A token the observer owns, as a real observer would: it goes with the observer.
        var token: Subscription?

        init(live: Tally, violations: Tally, onCall: @escaping @Sendable () -> Void = {}) {
            self.live = live
            self.violations = violations
            self.onCall = onCall
            live.up()
        }

        func receive(_ post: PostObject) { called() }
        func receive(value: Int) { called() }

        private func called() {
            if deinitStarted.load(ordering: .acquiring) { violations.up() }
            calls.add(1, ordering: .relaxed)
            onCall()
        }

        deinit {
            deinitStarted.store(true, ordering: .releasing)
            live.down()
        }
    }
}
