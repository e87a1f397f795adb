// The model-based suite. Its parts: operations and generator in ModelTests+Generator.swift, running and
// shrinking in ModelTests+Check.swift, the comparison in ModelTests+Harness.swift, and the two sides in
// ModelTests+RealSide.swift and ModelTests+ReferenceModel.swift.

import SubscriptionsTestSupport
import Testing

/// Model-based randomized testing: seeded random operation sequences run against a real
/// `PostCenter` and against `ReferenceModel`, a single-threaded center made of plain arrays.
/// After every operation every observable result is compared: the handler and observer calls
/// (order and payloads, nested posts and notifies included), `post` and `notify` return values,
/// `subscriptionCount(for:)` of every name, `observers(for:)` of every protocol, the set of live
/// tokens and `isActive` of each. On a divergence the test fails with the
/// seed and the shortest failing operation sequence the shrinker found.
///
/// Serialized: each run is seconds of CPU (minutes under ThreadSanitizer) on a thread of its own;
/// ten at once on two cores would leave Swift's cooperative pool, which every async test of the
/// run shares, a sixth of the CPU.
@Suite("Model-based", .serialized, .tags(.modelBased))
struct ModelTests {
    static let seeds: [UInt64] = (1...10).map { 0xC0FF_EE00 &+ $0 }

    /// 10 seeds × 10,000 operations: every kind of subscription (plain, typed, one-shot,
    /// sender-filtered, selector with or without the observer owning its token), immediate and
    /// queued delivery, protocol observers (added, observed with a token, removed, notified),
    /// nested operations from inside handlers and notify bodies, observer and sender deaths, and
    /// handlers that throw after they ran (one subscription in four: `ModelCheck.throwing`), and
    /// priorities (`ModelCheck.priority`: the model inserts each subscription after every one of
    /// a priority at least its own).
    ///
    /// Each run is seconds of synchronous work (minutes under ThreadSanitizer) that waits for
    /// queues to drain: it runs on a thread of its own, so that it holds none of the two threads
    /// of Swift's cooperative pool that every async test of the run shares.
    @Test(arguments: seeds)
    func centerMatchesReferenceModel(seed: UInt64) async {
        let report = await TestThread.run { () -> String? in
            let count = Reliability.scaled(10_000, minimum: 2_000)
            var generator = ModelGenerator(seed: seed, options: .standard)
            let ops = generator.operations(count)
            return ModelCheck.findFailure(ops, options: .standard)?.report(seed: seed)
        }
        if let report { Issue.record(Comment(rawValue: report)) }
    }

    /// Main-actor delivery, on the main actor: posts made there run `.mainActor` handlers
    /// synchronously, so the same model applies (queued delivery is left out here).
    ///
    /// The run lets the main actor's other work in between operations (the main actor is shared
    /// by every test of the run, and a run lasts seconds, minutes under ThreadSanitizer).
    @Test(arguments: [0xAC70_0001 as UInt64, 0xAC70_0002])
    @MainActor
    func mainActorDeliveryMatchesReferenceModel(seed: UInt64) async {
        let count = Reliability.scaled(5_000, minimum: 1_000)
        var generator = ModelGenerator(seed: seed, options: .mainActor)
        let ops = generator.operations(count)
        if let failure = await ModelCheck.findFailureYieldingTheMainActor(ops, options: .mainActor) {
            Issue.record(Comment(rawValue: failure.report(seed: seed)))
        }
    }

    /// The checker itself can fail: with a bug planted in the model (it forgets `resume()`),
    /// a divergence is found, and shrinking reduces it to a handful of operations.
    @Test func divergenceIsReportedWithSeedAndShrunkPrefix() throws {
        var options = ModelOptions.standard
        options.plantedBug = true
        var generator = ModelGenerator(seed: 7, options: options)
        let ops = generator.operations(2_000)
        let failure = try #require(ModelCheck.findFailure(ops, options: options))
        #expect(failure.shrunk.count <= 6, "shrunk to \(failure.shrunk.count) operations: \(failure.shrunk)")
        #expect(failure.shrunk.count < failure.originalIndex + 1)
        #expect(failure.shrunk.contains { if case .resume = $0 { true } else { false } })
        let report = failure.report(seed: 7)
        #expect(report.contains("seed 7"))
        #expect(report.contains("resume"))
    }
}
