import Dispatch
import Foundation
import SubscriptionsTestSupport
import Synchronization
import Testing

@testable import Subscriptions

#if canImport(Glibc)
    import Glibc
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// Set by `TouchesCenterInDeinit.deinit` once it used the center.
private let deinitUsedTheCenter = Atomic<Bool>(false)

/// Captured by a `report` closure: its deinit uses the center that held the closure.
private final class TouchesCenterInDeinit: Sendable {
    let center: PostCenter
    init(_ center: PostCenter) { self.center = center }
    deinit {
        _ = center.diagnostics
        let token = center.subscribe("touch") { _ in }
        center.post("touch")
        token.cancel()
        deinitUsedTheCenter.store(true, ordering: .sequentiallyConsistent)
    }
}

/// Runs `body` in its deinit.
private final class RunsInDeinit: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    deinit { body() }
}

/// Keeps the calling thread on the first CPU, where the platform allows it: two setter threads
/// woken at once then share it, and the second one's wake-up preempts the first at a random
/// point of its assignment (as on a single-core device). A stronger test on Linux; elsewhere the
/// same test with less pressure.
private func pinToOneCPU() {
    #if canImport(Glibc)
        // `sched_setaffinity` is a GNU extension that the Glibc module does not import.
        typealias SetAffinity = @convention(c) (Int32, Int, UnsafeRawPointer) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sched_setaffinity") else { return }
        let setAffinity = unsafeBitCast(symbol, to: SetAffinity.self)
        var mask = [UInt64](repeating: 0, count: 16)  // a cpu_set_t of 1,024 CPUs: CPU 0 only
        mask[0] = 1
        _ = mask.withUnsafeBytes { setAffinity(0, $0.count, $0.baseAddress!) }
    #endif
}

/// The body of the exit tests below: sets a `report` that holds the last reference to a
/// `TouchesCenterInDeinit`, then replaces the diagnostics with `replacement`, which releases that
/// report. Exits 42 when the deinit ran and used the center, 3 when it did not run, and 2 (from a
/// watchdog) when the release deadlocked.
private func replaceAReportHoldingACenterToucherAndExit(with replacement: PostCenter.Diagnostics?) -> Never {
    let watchdog = Thread {
        sleep(5)
        _exit(2)
    }
    watchdog.start()
    let center = PostCenter()
    var captured: TouchesCenterInDeinit? = TouchesCenterInDeinit(center)
    center.diagnostics = .init { [captured] _ in _ = captured }
    captured = nil
    center.diagnostics = replacement  // the previous report and its capture go here
    _exit(deinitUsedTheCenter.load(ordering: .sequentiallyConsistent) ? 42 : 3)
}

/// Guarantee: setting `diagnostics` is safe from any thread; the old `report` closure is released
/// with no lock held, and the last setter always wins (its value reports). `manySubscriptions`
/// is reported once per level until the count falls below half the limit.
@Suite("Diagnostics setting")
struct DiagnosticsSettingTests {
    @Test func replacingDiagnosticsReleasesTheOldReportWithNoLockHeld() async {
        // The old `report` holds the last reference to an object whose deinit reads the
        // diagnostics, subscribes and posts. Released under the center's lock, it deadlocks on
        // the non-recursive lock: a child process with a watchdog turns that into exit code 2.
        await #expect(processExitsWith: .exitCode(42)) {
            replaceAReportHoldingACenterToucherAndExit(with: .init { _ in })
        }
    }

    @Test func resettingDiagnosticsToNilAlsoReleasesTheReportUnlocked() async {
        await #expect(processExitsWith: .exitCode(42)) {
            replaceAReportHoldingACenterToucherAndExit(with: nil)
        }
    }

    @Test func racingSettersLeaveTheValueThatIsReadAfterwardsReporting() {
        // One thread sets nil, the other a value, at once, many rounds. Whatever the order, the
        // value read afterwards must be the one in effect: set means a subscription is reported.
        let rounds = 2000
        var silent = 0
        for round in 0..<rounds {
            let center = PostCenter()
            let reports = Counter()
            let go = DispatchSemaphore(value: 0)
            let clearer = TestThread {
                pinToOneCPU()
                go.wait()
                center.diagnostics = nil
            }
            let setter = TestThread {
                pinToOneCPU()
                go.wait()
                center.diagnostics = .init(subscriptionLimit: 1) { _ in reports.increment() }
            }
            go.signal()
            go.signal()
            clearer.join()
            setter.join()
            let isSet = center.diagnostics != nil
            let token = center.subscribe("race.\(round)") { _ in }
            if reports.count != (isSet ? 1 : 0) { silent += 1 }
            withExtendedLifetime(token) {}
        }
        #expect(silent == 0, "\(silent) of \(rounds) rounds left diagnostics set but silent (or the reverse)")
    }

    @Test func aSetterDelayedAfterItsAssignmentDoesNotSilenceALaterOne() {
        // The setter of nil is held up right after its assignment took effect, by the deinit of
        // the report it replaced (user code, run unlocked). Meanwhile another thread sets a
        // value and returns. That later value must be the one in effect, and it must report.
        let center = PostCenter()
        let reports = Counter()
        let other = Mutex<TestThread?>(nil)
        var hook: RunsInDeinit? = RunsInDeinit {
            let thread = TestThread {
                center.diagnostics = .init(subscriptionLimit: 1) { _ in reports.increment() }
            }
            thread.join()  // the later setter has returned before the delayed one goes on
            other.withLock { $0 = thread }
        }
        center.diagnostics = .init { [hook] _ in _ = hook }
        hook = nil
        center.diagnostics = nil  // releases `hook` (the last reference) before returning
        #expect(other.withLock { $0 } != nil, "the hook ran")
        #expect(center.diagnostics != nil)
        let token = center.subscribe("delayed") { _ in }
        #expect(reports.count == 1, "diagnostics are set but silent")
        withExtendedLifetime(token) {}
    }

    @Test func manySubscriptionsIsReportedOnceWhileTheCountOscillatesAroundTheLimit() {
        let center = PostCenter()
        let reports = Recorder<PostCenter.Diagnostic>()
        center.diagnostics = .init(subscriptionLimit: 4) { reports.append($0) }
        var tokens = (0..<4).map { _ in center.subscribe("wobble") { _ in } }
        for _ in 0..<10 {
            tokens.removeLast()  // 3
            tokens.append(center.subscribe("wobble") { _ in })  // 4 again: not reported again
        }
        #expect(counts(reports.values) == ["wobble:4"])
        // Falling below half the limit (to 1) forgets the report: reaching 4 again reports.
        tokens.removeLast(3)
        for _ in 0..<3 { tokens.append(center.subscribe("wobble") { _ in }) }
        #expect(counts(reports.values) == ["wobble:4", "wobble:4"])
        // Doublings are still reported, once each.
        for _ in 0..<4 { tokens.append(center.subscribe("wobble") { _ in }) }
        tokens.removeLast()
        tokens.append(center.subscribe("wobble") { _ in })
        #expect(counts(reports.values).last == "wobble:8")
        #expect(reports.count == 3)
    }

    @Test func fallingToHalfTheLimitIsNotWellBelowIt() {
        let center = PostCenter()
        let reports = Counter()
        center.diagnostics = .init(subscriptionLimit: 4) { _ in reports.increment() }
        var tokens = (0..<4).map { _ in center.subscribe("half") { _ in } }
        tokens.removeLast(2)  // 2: half the limit, not below it
        for _ in 0..<2 { tokens.append(center.subscribe("half") { _ in }) }
        #expect(reports.count == 1)
        withExtendedLifetime(tokens) {}
    }

    // MARK: Diagnostics remember reports per name

    /// "Reported once per level: a count that goes up and down around the limit is not reported
    /// again until it has fallen below half the limit" — per name: another name's falling below
    /// half does not make this name report its level again.
    @Test(.tags(.mutantPin)) func anotherNameFallingBelowHalfTheLimitDoesNotForgetThisNamesReport() {
        let center = PostCenter()
        let reports = Recorder<PostCenter.Diagnostic>()
        center.diagnostics = .init(subscriptionLimit: 4) { reports.append($0) }
        var a = (0..<4).map { _ in center.subscribe("a") { _ in } }
        #expect(reports.values.map(\.name) == ["a"])
        // "b" is far below half the limit: its subscription forgets what was reported of "b" only.
        let b = center.subscribe("b") { _ in }
        // "a" goes down by one (not below half) and back up to the limit: not reported again.
        a.removeLast()
        a.append(center.subscribe("a") { _ in })
        #expect(reports.values.map(\.name) == ["a"])
        withExtendedLifetime((a, b)) {}
    }

    /// `Diagnostics.init`: "subscriptionLimit: Live subscriptions of one name before a warning;
    /// default 1,000", "nestingLimit: ... default 32", "reportsUnheardPosts: ... default false".
    @Test(.tags(.mutantPin)) func diagnosticsDefaultToAThousandSubscriptionsADepthOf32AndNoUnheardReports() {
        let center = PostCenter()
        let reports = Recorder<PostCenter.Diagnostic>()
        center.diagnostics = .init { reports.append($0) }
        var tokens = (0..<999).map { _ in center.subscribe("many") { _ in } }
        #expect(reports.values.isEmpty)
        tokens.append(center.subscribe("many") { _ in })
        #expect(reports.values.map(\.name) == ["many"])
        if case .manySubscriptions(_, let count, _)? = reports.values.first { #expect(count == 1000) }
        tokens.removeAll()
        reports.reset()

        let depth = Counter()
        let token = center.subscribe("deep") { _ in
            depth.increment()
            if depth.count < 40 { center.post("deep") }
        }
        center.post("deep")
        #expect(reports.values == [.deepNesting(name: "deep", depth: 32)])
        reports.reset()
        center.post("nobody listens")
        #expect(reports.values.isEmpty)
        withExtendedLifetime(token) {}
    }
}

/// The `name:count` of each `manySubscriptions` report (the site is checked elsewhere).
private func counts(_ reports: [PostCenter.Diagnostic]) -> [String] {
    reports.map { report in
        guard case .manySubscriptions(let name, let count, _) = report else { return "\(report)" }
        return "\(name):\(count)"
    }
}

extension PostCenter.Diagnostic {
    /// The name a diagnostic is about.
    fileprivate var name: String {
        switch self {
        case .manySubscriptions(let name, _, _), .deepNesting(let name, _), .unheardPost(let name),
            .droppedPosts(let name, _), .subscriberGone(let name, _, _), .handlerThrew(let name, _, _):
            return name
        }
    }
}
