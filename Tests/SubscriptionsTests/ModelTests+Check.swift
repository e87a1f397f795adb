// Running an operation sequence on both sides and shrinking a failing prefix (`ModelCheck`), with the
// failure it reports (`ModelFailure`) and the error the model's throwing handlers throw (`ModelThrow`).

import Subscriptions

/// What a throwing handler of the model throws: its subscription's identifier.
struct ModelThrow: Error {
    let id: Int
}

struct ModelFailure {
    /// Index of the diverging operation in the original sequence.
    let originalIndex: Int
    let originalMessage: String
    /// The shortest sequence found that still diverges (ending with the diverging operation).
    let shrunk: [ModelOp]
    let shrunkMessage: String

    func report(seed: UInt64) -> String {
        var lines = [
            "PostCenter diverged from the reference model: seed \(seed), operation \(originalIndex): \(originalMessage)",
            "Shortest failing sequence found (\(shrunk.count) operations), diverging with: \(shrunkMessage)",
        ]
        lines += shrunk.enumerated().map { "  \($0.offset): \($0.element)" }
        return lines.joined(separator: "\n")
    }
}

enum ModelCheck {
    /// Handlers run their nested operation only while at most this many handlers are running.
    static let maxDepth = 3

    /// Whether the handler of subscription `id` throws (`ModelThrow`) after it ran: one in four.
    static func throwing(_ id: Int) -> Bool { id % 4 == 3 }

    /// The priority subscription `id` is made at: mostly the default, some higher, some lower.
    static func priority(_ id: Int) -> Int { [0, 0, 0, 2, -1, 1, 0, 2][id % 8] }

    /// The pattern of a `.pattern` subscription to name index `i`: every name, every name
    /// (a prefix they all share), `name1` only, `name2` only.
    static let patterns: [NamePattern] = [.all, .prefix("name"), .prefix("name1"), .prefix("name2")]

    /// The pattern indices that a post of name index `name` reaches, in the documented order:
    /// `.all`, then prefixes from the shortest.
    static func patterns(matching name: Int) -> [Int] {
        [0, 1, 2, 3].filter { patterns[$0].matches("name\(name)") }
    }

    /// Runs `ops` on a fresh center and model; the first divergence, if any.
    static func firstDivergence(_ ops: [ModelOp], options: ModelOptions) -> (index: Int, message: String)? {
        let harness = ModelHarness(options: options)
        for (index, op) in ops.enumerated() {
            if let message = harness.apply(op) {
                harness.tearDown()
                return (index, message)
            }
        }
        if let message = harness.tearDown() { return (ops.count, message) }
        return nil
    }

    /// ``findFailure(_:options:)`` on the main actor, letting its other jobs run every 25
    /// operations of the first run (the shrinking, after a divergence, does not).
    @MainActor
    static func findFailureYieldingTheMainActor(_ ops: [ModelOp], options: ModelOptions) async -> ModelFailure? {
        let harness = ModelHarness(options: options)
        var divergence: (index: Int, message: String)?
        for (index, op) in ops.enumerated() {
            if let message = harness.apply(op) {
                divergence = (index, message)
                break
            }
            if index % 25 == 24 { await Task.yield() }
        }
        if let message = harness.tearDown(), divergence == nil { divergence = (ops.count, message) }
        guard let (index, message) = divergence else { return nil }
        // Shrunk without yielding; a divergence that needs the yields is reported unshrunk.
        return findFailure(ops, options: options)
            ?? ModelFailure(
                originalIndex: index, originalMessage: message, shrunk: Array(ops.prefix(index + 1)),
                shrunkMessage: message)
    }

    /// Runs `ops`; on a divergence, shrinks the failing prefix (chunk removal, halving the chunk
    /// size, a bounded number of reruns) and returns both.
    static func findFailure(_ ops: [ModelOp], options: ModelOptions) -> ModelFailure? {
        guard let (index, message) = firstDivergence(ops, options: options) else { return nil }
        var current = Array(ops.prefix(index + 1))
        var currentMessage = message
        var budget = 600
        var chunk = max(1, current.count / 2)
        while budget > 0 {
            var i = 0
            while i < current.count && budget > 0 {
                var candidate = current
                candidate.removeSubrange(i..<min(current.count, i + chunk))
                budget -= 1
                if let (j, m) = firstDivergence(candidate, options: options) {
                    current = Array(candidate.prefix(j + 1))
                    currentMessage = m
                } else {
                    i += chunk
                }
            }
            if chunk == 1 { break }
            chunk = max(1, chunk / 2)
        }
        // Then simpler handlers: drop the nested operations that the failure does not need.
        for i in current.indices.reversed() where budget > 0 && i < current.count {
            guard let simpler = current[i].withoutNested else { continue }
            var candidate = current
            candidate[i] = simpler
            budget -= 1
            if let (j, m) = firstDivergence(candidate, options: options) {
                current = Array(candidate.prefix(j + 1))
                currentMessage = m
            }
        }
        return ModelFailure(
            originalIndex: index, originalMessage: message, shrunk: current, shrunkMessage: currentMessage)
    }
}
