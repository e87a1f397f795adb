// `ModelHarness`: applies each operation to the real side and to the reference model and compares what
// can be observed; `ModelTag`, the payload object both sides post.

import Subscriptions

/// A payload object for typed and plain posts (kept alive by the harness for the whole run).
final class ModelTag: Sendable {
    let index: Int
    init(_ index: Int) { self.index = index }
}

/// Runs each operation on both sides and compares what can be observed.
final class ModelHarness {
    let real: RealSide
    let model: ReferenceModel

    init(options: ModelOptions) {
        real = RealSide()
        model = ReferenceModel(plantedBug: options.plantedBug)
    }

    /// Applies `op` to both; a description of the first difference, or `nil`.
    func apply(_ op: ModelOp) -> String? {
        let realResult = real.apply(op)
        let modelResult = model.apply(op)
        if realResult != modelResult {
            return
                "`\(op)` returned \(realResult.map(String.init) ?? "nothing"), model says \(modelResult.map(String.init) ?? "nothing")"
        }
        return compare(after: op)
    }

    func compare(after op: ModelOp) -> String? {
        defer {
            real.log.removeAll()
            model.log.removeAll()
        }
        if real.log != model.log {
            let first = zip(real.log, model.log).prefix { $0 == $1 }.count
            let window = max(0, first - 2)..<(first + 3)
            return "after `\(op)` handler calls differ from call \(first) on: "
                + "\(real.log[window.clamped(to: real.log.indices)]), model says "
                + "\(model.log[window.clamped(to: model.log.indices)]) (\(real.log.count) calls, model \(model.log.count))"
        }
        for name in 0..<ModelGenerator.names {
            let counted = real.center.subscriptionCount(for: "name\(name)")
            let expected = model.reachableCount(name)
            if counted != expected {
                return "after `\(op)` subscriptionCount(for: name\(name)) is \(counted), model says \(expected)"
            }
        }
        for p in 0..<ModelGenerator.protocols {
            let listed = real.observerSlots(p)
            let expected = model.observerSlots(p)
            if listed != expected {
                return "after `\(op)` observers(for: protocol\(p)) is \(listed.map { "observer\($0)" }), "
                    + "model says \(expected.map { "observer\($0)" })"
            }
        }
        let realIDs = Set(real.tokenIDs)
        let modelIDs = Set(model.present.keys)
        if realIDs != modelIDs {
            return "after `\(op)` live tokens are \(realIDs.sorted()), model says \(modelIDs.sorted())"
        }
        for id in modelIDs.sorted() {
            let active = real.token(id)!.isActive
            if active != model.isActive(id) {
                return "after `\(op)` #\(id).isActive is \(active), model says \(!active)"
            }
        }
        return nil
    }

    /// Ends everything; afterwards nothing may be counted or held. Returns a problem, or `nil`.
    @discardableResult
    func tearDown() -> String? {
        real.tearDown()
        for name in 0..<ModelGenerator.names where real.center.subscriptionCount(for: "name\(name)") != 0 {
            return "after tear-down name\(name) still has subscriptions"
        }
        // Dropped tokens release their closures with the next batch, shortly after the drop.
        if !eventually({ real.captures.current == 0 }) {
            return "after tear-down the center still holds \(real.captures.current) handler closures"
        }
        return nil
    }
}
