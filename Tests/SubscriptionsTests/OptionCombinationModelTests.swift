import Dispatch
import Subscriptions
import Testing

/// Every option combines with every other: seeded random sequences of subscribe (every payload
/// kind, every delivery, `from:`, `replay:`, `once:`), post (typed `Int` and `String` posts and
/// plain posts of one name, each with or without a sender, retained or not), `clearRetained` (by
/// either topic or by name), cancel, pause and resume, run against a real `PostCenter` and
/// against `ComboModel`, a few arrays. After every operation (and `waitForPendingDeliveries()`,
/// so queued, paced and actor deliveries have landed) everything observable is compared: each
/// subscription's deliveries in order, `post`'s count, `isActive`, `subscriptionCount(for:)`,
/// and the retained post as each payload type and as an envelope. The typed and plain posts of
/// the name share one retained slot, so it is retained, replayed and cleared in every direction.
/// One subscription in three throws after each delivery: that changes none of the above, and
/// the center reports each of those throws exactly once (`Diagnostic.handlerThrew`).
@Suite("Option combinations, model-based", .tags(.modelBased), .timeLimit(.minutes(2)))
@MainActor
struct OptionCombinationModelTests {
    nonisolated static let seeds: [UInt64] = (1...6).map { 0x0C0B_0000 &+ $0 }

    /// 6 seeds × 600 operations, on the main actor (so that `.mainActor` handlers run at once
    /// when posted there, as the model assumes of every delivery once the center is quiet).
    @Test(arguments: seeds)
    func everyCombinationMatchesTheModel(seed: UInt64) async {
        var run = ComboRun(seed: seed)
        if let failure = await run.run(operations: 600) {
            Issue.record(Comment(rawValue: failure))
        } else {
            // The run exercised what it is meant to: every delivery delivered, and a filtered
            // subscription was replayed a retained post.
            #expect(run.deliveringKinds() == Set(ComboDelivery.allCases))
            #expect(run.filteredReplays > 0)
        }
    }

    /// The checker can fail: a model that forgets the sender of a retained post (it replays it
    /// to every filtered subscription) diverges from the center, and the report names the seed.
    @Test func aModelThatIgnoresTheRetainedSenderDiverges() async {
        var run = ComboRun(seed: Self.seeds[0])
        run.model.plantedBug = true
        let failure = await run.run(operations: 400)
        #expect(failure?.contains("seed \(Self.seeds[0])") == true)
    }
}

// MARK: - Operations

private enum ComboPayload: CaseIterable, CustomStringConvertible {
    /// A plain subscription of the name: every post, as an envelope.
    case object
    /// `Topic<Int>`.
    case int
    /// `Topic<String>`.
    case string

    var description: String {
        switch self {
        case .object: "object"
        case .int: "Int"
        case .string: "String"
        }
    }
}

private enum ComboDelivery: CaseIterable, CustomStringConvertible {
    case immediate, queue, queueCoalesced, queueThrottled, mainActor, mainActorDebounced, actor, actorCoalesced

    var description: String {
        switch self {
        case .immediate: ".immediate"
        case .queue: ".queue"
        case .queueCoalesced: ".queue.coalesced"
        case .queueThrottled: ".queue.throttled"
        case .mainActor: ".mainActor"
        case .mainActorDebounced: ".mainActor.debounced"
        case .actor: "on: actor"
        case .actorCoalesced: "on: actor, coalesced"
        }
    }
}

/// A post of the model: what was posted, in the form a subscription of each payload sees it.
private enum ComboPost: Equatable, CustomStringConvertible {
    case int(Int)
    case string(String)
    case plain(String)

    var description: String {
        switch self {
        case .int(let v): "i\(v)"
        case .string(let s): "s\(s)"
        case .plain(let f): "f\(f)"
        }
    }

    /// What a subscription of `payload` records for this post, or `nil` when it does not take it.
    func seen(by payload: ComboPayload) -> String? {
        switch (payload, self) {
        case (.object, _), (.int, .int), (.string, .string): description
        default: nil
        }
    }
}

private enum ComboOp: CustomStringConvertible {
    case subscribe(ComboPayload, ComboDelivery, from: Int?, replay: Bool, once: Bool)
    case post(ComboPost, from: Int?, retain: Bool)
    /// By `Topic<Int>`, `Topic<String>` or the name.
    case clear(ComboPayload)
    case cancel(Int)
    case pause(Int)
    case resume(Int)

    var description: String {
        func sender(_ s: Int?) -> String { s.map { ", from: s\($0)" } ?? "" }
        switch self {
        case .subscribe(let p, let d, let from, let replay, let once):
            return "subscribe(\(p)\(sender(from)), \(d), replay: \(replay), once: \(once))"
        case .post(let post, let from, let retain): return "post(\(post)\(sender(from)), retain: \(retain))"
        case .clear(let p): return "clearRetained(by \(p))"
        case .cancel(let i): return "cancel(#\(i))"
        case .pause(let i): return "pause(#\(i))"
        case .resume(let i): return "resume(#\(i))"
        }
    }
}

// MARK: - The reference model

private struct ComboModel {
    enum State { case active, paused, spent, cancelled }

    struct Sub {
        let payload: ComboPayload
        let from: Int?
        let once: Bool
        var state = State.active
        var log: [String] = []
    }

    var subs: [Sub] = []
    var retained: (post: ComboPost, from: Int?)?
    /// How many replays reached a subscription made `from:` a sender.
    var filteredReplays = 0
    /// For the checker's own test: replays ignore the retained post's sender.
    var plantedBug = false

    /// Delivers `post` made from `sender` to subscription `i` if it takes it.
    mutating func deliver(_ post: ComboPost, from sender: Int?, to i: Int, replaying: Bool = false) -> Bool {
        guard subs[i].state == .active, let seen = post.seen(by: subs[i].payload) else { return false }
        if let filter = subs[i].from, filter != sender, !(replaying && plantedBug) { return false }
        subs[i].log.append(seen)
        if subs[i].once { subs[i].state = .spent }
        return true
    }

    mutating func post(_ post: ComboPost, from sender: Int?, retain: Bool) -> Int {
        if retain { retained = (post, sender) }
        var reached = 0
        for i in subs.indices where deliver(post, from: sender, to: i) { reached += 1 }
        return reached
    }

    mutating func subscribe(_ payload: ComboPayload, from: Int?, replay: Bool, once: Bool) {
        subs.append(Sub(payload: payload, from: from, once: once))
        if replay, let retained, deliver(retained.post, from: retained.from, to: subs.count - 1, replaying: true),
            from != nil
        {
            filteredReplays += 1
        }
    }

    mutating func set(_ i: Int, from old: State, to new: State) {
        if subs[i].state == old { subs[i].state = new }
    }

    var liveCount: Int { subs.filter { $0.state == .active }.count }
}

// MARK: - The run

private final class ComboSender: Sendable {}
private actor ComboActor {}

@MainActor
/// What a throwing handler of the run throws: its subscription's index.
private struct ComboThrow: Error {
    let index: Int
}

private struct ComboRun {
    let seed: UInt64
    var random: SplitMix
    var model = ComboModel()
    var ops: [ComboOp] = []
    let center = PostCenter()
    let name = "combo"
    let ints = Topic<Int>("combo")
    let strings = Topic<String>("combo")
    let senders = [ComboSender(), ComboSender()]
    let queue = DispatchQueue(label: "combo.queue")
    let actor = ComboActor()
    var tokens: [Subscription] = []
    var logs: [Recorder<String>] = []
    /// The subscription index of each `Diagnostic.handlerThrew` the center reported, in order.
    let thrown = Recorder<Int>()
    var filteredReplays: Int { model.filteredReplays }

    init(seed: UInt64) {
        self.seed = seed
        random = SplitMix(seed)
        center.diagnostics = .init { [thrown] issue in
            if case .handlerThrew(_, _, let error as ComboThrow) = issue { thrown.append(error.index) }
        }
    }

    /// Whether the handler of subscription `i` throws after it logged: one in three. Throwing
    /// changes nothing the model sees; every delivery it got is reported once.
    static func throwing(_ i: Int) -> Bool { i % 3 == 1 }

    /// Runs `operations` random operations; returns a report of the first divergence, if any.
    mutating func run(operations: Int) async -> String? {
        for step in 0..<operations {
            let op = nextOperation()
            ops.append(op)
            if let problem = await apply(op) ?? check() {
                let recent = ops.suffix(40).enumerated().map { "  \(ops.count - min(ops.count, 40) + $0): \($1)" }
                return "seed \(seed), operation \(step): \(problem)\nlast operations:\n"
                    + recent.joined(separator: "\n")
            }
        }
        withExtendedLifetime(tokens) {}
        return nil
    }

    mutating func nextOperation() -> ComboOp {
        let roll = random.next(100)
        let from = pickSender()
        switch roll {
        case 0..<24 where tokens.count < 60 || roll < 4:
            let payload = ComboPayload.allCases[random.next(3)]
            let delivery = ComboDelivery.allCases[random.next(ComboDelivery.allCases.count)]
            return .subscribe(
                payload, delivery, from: random.next(3) == 0 ? nil : from, replay: random.next(3) != 0,
                once: random.next(4) == 0)
        case 0..<66:
            let value = random.next(100)
            let post: ComboPost
            switch random.next(3) {
            case 0: post = .int(value)
            case 1: post = .string("\(value)")
            default: post = .plain("\(value)")
            }
            return .post(post, from: from, retain: random.next(2) == 0)
        case 66..<74:
            return .clear(ComboPayload.allCases[random.next(3)])
        case 74..<84 where !tokens.isEmpty:
            return .cancel(random.next(tokens.count))
        case 84..<92 where !tokens.isEmpty:
            return .pause(random.next(tokens.count))
        default:
            return tokens.isEmpty ? .clear(.object) : .resume(random.next(tokens.count))
        }
    }

    /// `nil` (no sender) or the index of one of the two senders.
    mutating func pickSender() -> Int? {
        let r = random.next(3)
        return r == 2 ? nil : r
    }

    func sender(_ index: Int?) -> ComboSender? { index.map { senders[$0] } }

    /// Applies `op` to the center and the model; returns a divergence in `post`'s count, if any.
    mutating func apply(_ op: ComboOp) async -> String? {
        switch op {
        case .subscribe(let payload, let delivery, let from, let replay, let once):
            let log = Recorder<String>()
            let index = logs.count
            logs.append(log)
            tokens.append(
                subscribe(payload, delivery, from: sender(from), replay: replay, once: once) { seen in
                    log.append(seen)
                    if Self.throwing(index) { throw ComboThrow(index: index) }
                })
            model.subscribe(payload, from: from, replay: replay, once: once)
        case .post(let post, let from, let retain):
            let count: Int
            switch post {
            case .int(let v):
                count =
                    retain
                    ? center.post(ints, v, from: sender(from), retain: true) : center.post(ints, v, from: sender(from))
            case .string(let s):
                count = center.post(strings, s, from: sender(from), retain: retain)
            case .plain(let flag):
                count =
                    random.next(2) == 0
                    ? center.post(name, flag: flag, from: sender(from), retain: retain)
                    : center.post(name, PostObject(flag: flag), from: sender(from), retain: retain)
            }
            let expected = model.post(post, from: from, retain: retain)
            if count != expected { return "post returned \(count), the model \(expected)" }
        case .clear(let by):
            switch by {
            case .object: center.clearRetained(name)
            case .int: center.clearRetained(ints)
            case .string: center.clearRetained(strings)
            }
            model.retained = nil
        case .cancel(let i):
            tokens[i].cancel()
            model.set(i, from: model.subs[i].state, to: .cancelled)
        case .pause(let i):
            tokens[i].pause()
            model.set(i, from: .active, to: .paused)
        case .resume(let i):
            tokens[i].resume()
            model.set(i, from: .paused, to: .active)
        }
        await center.waitForPendingDeliveries()
        return nil
    }

    /// Compares everything observable with the model.
    func check() -> String? {
        let reports = thrown.values
        for i in tokens.indices where Self.throwing(i) {
            let reported = reports.filter { $0 == i }.count
            if reported != model.subs[i].log.count {
                return "#\(i) (\(subscriptionOp(i))) threw \(model.subs[i].log.count) times, \(reported) reported"
            }
        }
        for i in tokens.indices {
            let seen = logs[i].values
            if seen != model.subs[i].log {
                return "#\(i) (\(subscriptionOp(i))) got \(seen), the model \(model.subs[i].log)"
            }
            if tokens[i].isActive != (model.subs[i].state == .active) {
                return "#\(i) isActive is \(tokens[i].isActive), the model's state \(model.subs[i].state)"
            }
        }
        if center.subscriptionCount(for: name) != model.liveCount {
            return "subscriptionCount \(center.subscriptionCount(for: name)), the model \(model.liveCount)"
        }
        let expectedInt: Int? = if case .int(let v) = model.retained?.post { v } else { nil }
        let expectedString: String? = if case .string(let s) = model.retained?.post { s } else { nil }
        if center.retained(ints) != expectedInt { return "retained(Int) \(String(describing: center.retained(ints)))" }
        if center.retained(strings) != expectedString {
            return "retained(String) \(String(describing: center.retained(strings)))"
        }
        let envelope = center.retained(name).map { post -> String in
            if let v = post.payload(as: Int.self) { return "i\(v)" }
            if let s = post.payload(as: String.self) { return "s\(s)" }
            return "f\(post.flag)"
        }
        if envelope != model.retained?.post.description {
            return "retained(name) \(envelope ?? "nil"), the model \(model.retained?.post.description ?? "nil")"
        }
        return nil
    }

    /// The deliveries of the subscriptions that got at least one post.
    func deliveringKinds() -> Set<ComboDelivery> {
        var kinds = Set<ComboDelivery>()
        var n = -1
        for op in ops {
            guard case .subscribe(_, let delivery, _, _, _) = op else { continue }
            n += 1
            if !logs[n].values.isEmpty { kinds.insert(delivery) }
        }
        return kinds
    }

    /// The operation that made subscription `i`.
    func subscriptionOp(_ i: Int) -> String {
        var n = -1
        for op in ops {
            if case .subscribe = op { n += 1 }
            if n == i { return op.description }
        }
        return "?"
    }

    /// Subscribes with exactly the options drawn, through the public overload that takes them.
    func subscribe(
        _ payload: ComboPayload, _ delivery: ComboDelivery, from: ComboSender?, replay: Bool, once: Bool,
        log: @escaping @Sendable (String) throws -> Void
    ) -> Subscription {
        switch payload {
        case .object:
            return subscribeName(delivery, from: from, replay: replay, once: once) { post in
                if let v = post.payload(as: Int.self) { return "i\(v)" }
                if let s = post.payload(as: String.self) { return "s\(s)" }
                return "f\(post.flag)"
            } log: {
                try log($0)
            }
        case .int:
            return subscribeTopic(ints, delivery, from: from, replay: replay, once: once) {
                "i\($0)"
            } log: {
                try log($0)
            }
        case .string:
            return subscribeTopic(strings, delivery, from: from, replay: replay, once: once) {
                "s\($0)"
            } log: {
                try log($0)
            }
        }
    }

    func subscribeTopic<Payload: Sendable>(
        _ topic: Topic<Payload>, _ delivery: ComboDelivery, from: ComboSender?, replay: Bool, once: Bool,
        format: @escaping @Sendable (Payload) -> String, log: @escaping @Sendable (String) throws -> Void
    ) -> Subscription {
        switch delivery {
        case .immediate:
            return center.subscribe(topic, from: from, replay: replay, once: once) { try log(format($0)) }
        case .queue:
            return center.subscribe(topic, from: from, delivery: .queue(queue), replay: replay, once: once) {
                try log(format($0))
            }
        case .queueCoalesced:
            return center.subscribe(topic, from: from, delivery: .queue(queue).coalesced, replay: replay, once: once) {
                try log(format($0))
            }
        case .queueThrottled:
            return center.subscribe(
                topic, from: from, delivery: .queue(queue).throttled(.milliseconds(1)), replay: replay, once: once
            ) { try log(format($0)) }
        case .mainActor:
            return center.subscribe(topic, from: from, delivery: .mainActor, replay: replay, once: once) {
                try log(format($0))
            }
        case .mainActorDebounced:
            return center.subscribe(
                topic, from: from, delivery: .mainActor.debounced(.milliseconds(1)), replay: replay, once: once
            ) { try log(format($0)) }
        case .actor:
            return center.subscribe(topic, from: from, on: actor, replay: replay, once: once) { _, value in
                try log(format(value))
            }
        case .actorCoalesced:
            return center.subscribe(topic, from: from, on: actor, replay: replay, once: once, coalesced: true) {
                _, value in try log(format(value))
            }
        }
    }

    func subscribeName(
        _ delivery: ComboDelivery, from: ComboSender?, replay: Bool, once: Bool,
        format: @escaping @Sendable (PostObject) -> String, log: @escaping @Sendable (String) throws -> Void
    ) -> Subscription {
        switch delivery {
        case .immediate:
            return center.subscribe(name, from: from, replay: replay, once: once) { try log(format($0)) }
        case .queue:
            return center.subscribe(name, from: from, delivery: .queue(queue), replay: replay, once: once) {
                try log(format($0))
            }
        case .queueCoalesced:
            return center.subscribe(name, from: from, delivery: .queue(queue).coalesced, replay: replay, once: once) {
                try log(format($0))
            }
        case .queueThrottled:
            return center.subscribe(
                name, from: from, delivery: .queue(queue).throttled(.milliseconds(1)), replay: replay, once: once
            ) { try log(format($0)) }
        case .mainActor:
            return center.subscribe(name, from: from, delivery: .mainActor, replay: replay, once: once) {
                try log(format($0))
            }
        case .mainActorDebounced:
            return center.subscribe(
                name, from: from, delivery: .mainActor.debounced(.milliseconds(1)), replay: replay, once: once
            ) { try log(format($0)) }
        case .actor:
            return center.subscribe(name, from: from, on: actor, replay: replay, once: once) { _, post in
                try log(format(post))
            }
        case .actorCoalesced:
            return center.subscribe(name, from: from, on: actor, replay: replay, once: once, coalesced: true) {
                _, post in try log(format(post))
            }
        }
    }
}

/// A small seeded generator (SplitMix64): the same seed gives the same operations everywhere.
private struct SplitMix {
    var state: UInt64

    init(_ seed: UInt64) { state = seed }

    /// A number in `0..<bound`.
    mutating func next(_ bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Int(z % UInt64(bound))
    }
}
