import Dispatch
import Foundation
import Subscriptions
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

// MARK: - Operations

/// Which payload a subscription takes.
enum ModelPayload: Sendable, CustomStringConvertible {
    /// `PostObject` (a plain subscription: every post of the name).
    case object
    /// `Topic<Int>`.
    case int
    /// `Topic<ModelTag>` (typed posts of a tag, and plain posts whose data is a tag).
    case tag
    /// `subscribe(matching:)`: the subscription's name index picks the pattern
    /// (`ModelCheck.patterns`), and the handler gets the post's name and envelope.
    case pattern

    var description: String {
        switch self {
        case .object: "object"
        case .int: "Int"
        case .tag: "Tag"
        case .pattern: "pattern"
        }
    }
}

/// How a subscription is made.
enum ModelStyle: Sendable, CustomStringConvertible {
    case handler
    case once
    /// `subscribe(_:from:)` with sender slot `sender`.
    case filtered(sender: Int)
    /// `register(_:observer:)` with observer slot `observer`; `owned`: the token is stored in
    /// the observer (it goes with it) rather than held by the test.
    case observer(Int, owned: Bool)

    var description: String {
        switch self {
        case .handler: "handler"
        case .once: "once"
        case .filtered(let s): "from sender\(s)"
        case .observer(let o, let owned): "observer\(o)\(owned ? " (owns token)" : "")"
        }
    }
}

enum ModelDelivery: Sendable, CustomStringConvertible {
    case immediate, queued, mainActor
    var description: String {
        switch self {
        case .immediate: "immediate"
        case .queued: "queued"
        case .mainActor: "mainActor"
        }
    }
}

/// What a post carries.
enum ModelPost: Sendable, CustomStringConvertible {
    /// `post(name, flag:, data:)`.
    case plain(flag: Int, tag: Int?)
    /// `post(name, PostObject(flag:data:))`, or `post(name, _, from:)` with a sender.
    case envelope(flag: Int, tag: Int?)
    /// `post(Topic<Int>(name), value)`.
    case int(Int)
    /// `post(Topic<ModelTag>(name), tag)`.
    case tag(Int)

    var description: String {
        switch self {
        case .plain(let f, let t): "plain(flag f\(f), data \(t.map { "tag\($0)" } ?? "nil"))"
        case .envelope(let f, let t): "PostObject(flag f\(f), data \(t.map { "tag\($0)" } ?? "nil"))"
        case .int(let v): "Int \(v)"
        case .tag(let t): "Tag tag\(t)"
        }
    }
}

/// One step of a generated sequence. Identifiers are assigned by the generator, so dropping
/// operations while shrinking keeps the others meaningful (an operation on an identifier that
/// does not exist does nothing, on both sides).
indirect enum ModelOp: Sendable, CustomStringConvertible {
    /// Makes token `id` (replacing, and so dropping, an existing token `id`). `nested` runs
    /// inside every call of the handler, up to `ModelCheck.maxDepth` handlers deep.
    case subscribe(
        id: Int, name: Int, payload: ModelPayload, style: ModelStyle, delivery: ModelDelivery, nested: ModelOp?)
    case cancel(Int)
    case pause(Int)
    case resume(Int)
    /// Lets go of token `id` (its deinit cancels).
    case drop(Int)
    case newObserver(Int)
    case dropObserver(Int)
    case newSender(Int)
    case dropSender(Int)
    case post(name: Int, ModelPost, from: Int?)
    /// Runs the queued deliveries that were waiting when it started.
    case drain
    /// `addObserver(observer, for: protocol)`.
    case addProtocolObserver(protocol: Int, observer: Int)
    /// `observe(observer, for: protocol)`, making token `id` (held by the observer if `owned`).
    case observeProtocol(id: Int, protocol: Int, observer: Int, owned: Bool)
    /// `removeObserver(observer, for: protocol)`.
    case removeProtocolObserver(protocol: Int, observer: Int)
    /// `removeObserver(observer)`: from every protocol and every selector registration.
    case removeObserverEverywhere(observer: Int)
    /// `notify(protocol)`; the body calls the observer, then runs `nested`.
    case notify(protocol: Int, nested: ModelOp?)

    /// The same operation without its nested operation, or `nil` when it has none.
    var withoutNested: ModelOp? {
        switch self {
        case .subscribe(let id, let name, let payload, let style, let delivery, _?):
            return .subscribe(id: id, name: name, payload: payload, style: style, delivery: delivery, nested: nil)
        case .notify(let p, _?):
            return .notify(protocol: p, nested: nil)
        default:
            return nil
        }
    }

    /// "post" or "notify", for the log of a nested operation's return value.
    var verb: String {
        if case .notify = self { return "notify" }
        return "post"
    }

    var description: String {
        switch self {
        case .subscribe(let id, let name, let payload, let style, let delivery, let nested):
            "subscribe #\(id) to name\(name): \(payload), \(style), \(delivery)"
                + (nested.map { ", handler does [\($0)]" } ?? "")
        case .cancel(let id): "cancel #\(id)"
        case .pause(let id): "pause #\(id)"
        case .resume(let id): "resume #\(id)"
        case .drop(let id): "drop token #\(id)"
        case .newObserver(let o): "new observer\(o)"
        case .dropObserver(let o): "drop observer\(o)"
        case .newSender(let s): "new sender\(s)"
        case .dropSender(let s): "drop sender\(s)"
        case .post(let name, let post, let from): "post name\(name) \(post)" + (from.map { " from sender\($0)" } ?? "")
        case .drain: "drain queue"
        case .addProtocolObserver(let p, let o): "addObserver(observer\(o), for: protocol\(p))"
        case .observeProtocol(let id, let p, let o, let owned):
            "observe(observer\(o), for: protocol\(p)) as #\(id)\(owned ? " (observer owns token)" : "")"
        case .removeProtocolObserver(let p, let o): "removeObserver(observer\(o), for: protocol\(p))"
        case .removeObserverEverywhere(let o): "removeObserver(observer\(o)) everywhere"
        case .notify(let p, let nested): "notify protocol\(p)" + (nested.map { ", body does [\($0)]" } ?? "")
        }
    }
}

struct ModelOptions: Sendable {
    var queued = true
    var mainActor = false
    /// For the checker's own test: the model forgets `resume()`.
    var plantedBug = false

    static let standard = ModelOptions()
    static let mainActor = ModelOptions(queued: false, mainActor: true)
}

/// Random operation sequences from a seed.
struct ModelGenerator {
    static let names = 4
    static let observers = 4
    static let senders = 2
    static let tags = 3
    static let protocols = 2

    var random: Reliability.Random
    let options: ModelOptions
    var nextID = 0
    /// Tokens the generator believes alive (operations mostly target these).
    var live: [Int] = []

    init(seed: UInt64, options: ModelOptions) {
        random = Reliability.Random(seed: seed)
        self.options = options
    }

    mutating func operations(_ count: Int) -> [ModelOp] {
        (0..<count).map { _ in next() }
    }

    mutating func next() -> ModelOp {
        let roll = random.below(100)
        switch roll {
        case 0..<18:
            if live.count >= 24 { return .drop(live.remove(at: random.below(live.count))) }
            let op = subscribe(nested: random.chance(25) ? nested() : nil)
            if case .subscribe(let id, _, _, _, _, _) = op { live.append(id) }
            return op
        case 18..<23:
            return .cancel(target())
        case 23..<28:
            let id = target()
            live.removeAll { $0 == id }
            return .drop(id)
        case 28..<33: return .pause(target())
        case 33..<38: return .resume(target())
        case 38..<42: return .newObserver(random.below(Self.observers))
        case 42..<45: return .dropObserver(random.below(Self.observers))
        case 45..<47: return .newSender(random.below(Self.senders))
        case 47..<49: return .dropSender(random.below(Self.senders))
        case 49..<80: return post()
        case 80..<83: return addProtocolObserver()
        case 83..<86:
            if live.count >= 24 { return .drop(live.remove(at: random.below(live.count))) }
            let id = nextID
            nextID += 1
            live.append(id)
            return .observeProtocol(
                id: id, protocol: random.below(Self.protocols), observer: random.below(Self.observers),
                owned: random.chance(50))
        case 86..<88: return removeProtocolObserver()
        case 88..<89: return .removeObserverEverywhere(observer: random.below(Self.observers))
        case 89..<95: return .notify(protocol: random.below(Self.protocols), nested: random.chance(30) ? nested() : nil)
        default: return options.queued ? .drain : post()
        }
    }

    /// A live token most of the time, sometimes one that is long gone (to exercise idempotence).
    mutating func target() -> Int {
        if live.isEmpty || random.chance(10) { return random.below(max(nextID, 1)) }
        return random.pick(live)
    }

    mutating func subscribe(nested: ModelOp?) -> ModelOp {
        let id = nextID
        nextID += 1
        let payload = random.pick([ModelPayload.object, .object, .int, .tag, .pattern])
        var style: ModelStyle
        switch random.below(8) {
        case 0, 1, 2: style = .handler
        case 3: style = .once
        case 4: style = .filtered(sender: random.below(Self.senders))
        default: style = .observer(random.below(Self.observers), owned: random.chance(50))
        }
        var delivery = ModelDelivery.immediate
        if options.queued && random.chance(25) { delivery = .queued }
        if options.mainActor && random.chance(40) {
            delivery = .mainActor
            // The main-actor API has handler and observer forms only.
            if case .once = style { style = .handler }
            if case .filtered = style { style = .handler }
        }
        // Patterns have no selector-style form.
        if case .pattern = payload, case .observer = style { style = .handler }
        return .subscribe(
            id: id, name: random.below(Self.names), payload: payload, style: style, delivery: delivery, nested: nested)
    }

    mutating func addProtocolObserver() -> ModelOp {
        .addProtocolObserver(protocol: random.below(Self.protocols), observer: random.below(Self.observers))
    }

    mutating func removeProtocolObserver() -> ModelOp {
        .removeProtocolObserver(protocol: random.below(Self.protocols), observer: random.below(Self.observers))
    }

    mutating func post() -> ModelOp {
        let name = random.below(Self.names)
        let tag: Int? = random.chance(50) ? random.below(Self.tags) : nil
        let flag = random.below(10)
        switch random.below(7) {
        case 0, 1: return .post(name: name, .plain(flag: flag, tag: tag), from: nil)
        case 2: return .post(name: name, .envelope(flag: flag, tag: tag), from: nil)
        case 3: return .post(name: name, .envelope(flag: flag, tag: tag), from: random.below(Self.senders))
        case 4:
            return .post(
                name: name, .int(random.below(100)), from: random.chance(30) ? random.below(Self.senders) : nil)
        default:
            return .post(
                name: name, .tag(random.below(Self.tags)), from: random.chance(30) ? random.below(Self.senders) : nil)
        }
    }

    /// What a handler does when it runs: mostly a nested post, sometimes a change to another
    /// (or its own) subscription, observer or sender.
    mutating func nested() -> ModelOp {
        switch random.below(100) {
        case 0..<40: return post()
        case 40..<48: return .cancel(target())
        case 48..<56: return .pause(target())
        case 56..<62: return .resume(target())
        case 62..<68: return .drop(target())
        case 68..<75: return subscribe(nested: nil)
        case 75..<78: return .dropObserver(random.below(Self.observers))
        case 78..<80: return .dropSender(random.below(Self.senders))
        case 80..<88: return .notify(protocol: random.below(Self.protocols), nested: nil)
        case 88..<94: return addProtocolObserver()
        default: return removeProtocolObserver()
        }
    }
}

// MARK: - Running and shrinking

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

// MARK: - The real side

/// A `PostCenter` driven by operations. Handlers append to `log` and run their nested operation.
///
/// Used by one thread at a time: the test's, or the queue's while the test waits in
/// `queue.sync` during `drain`.
final class RealSide: @unchecked Sendable {
    // @unchecked: see above; every hand-over goes through `queue.sync`, which orders the accesses.
    let center = PostCenter()
    let captures = Reliability.Tally()
    var log: [String] = []
    var depth = 0
    var serial = 0
    /// Tokens held by the test, by identifier.
    var tokens: [Int: Subscription] = [:]
    var observers: [Int: ModelObserver] = [:]
    var senders: [Int: ModelSender] = [:]
    let tags = (0..<ModelGenerator.tags).map(ModelTag.init)
    /// Suspended except during `drain`, so queued deliveries run at known points.
    let queue = DispatchQueue(label: "model.queue")
    var suspended = true

    init() {
        queue.suspend()
        // A handler that threw is reported right after it returns, where it ran: the log gets
        // the report between the handler's own lines and the next handler's.
        center.diagnostics = .init { [weak self] issue in
            if case .handlerThrew(_, _, let error as ModelThrow) = issue { self?.log.append("threw #\(error.id)") }
        }
    }

    var tokenIDs: [Int] {
        Array(tokens.keys) + observers.values.flatMap { $0.tokens.keys }
    }

    func token(_ id: Int) -> Subscription? {
        if let token = tokens[id] { return token }
        for observer in observers.values { if let token = observer.tokens[id] { return token } }
        return nil
    }

    /// Removes token `id` from wherever it is held (dropping it).
    func dropToken(_ id: Int) {
        if tokens.removeValue(forKey: id) != nil { return }
        for observer in observers.values where observer.tokens[id] != nil {
            observer.tokens[id] = nil
            return
        }
    }

    func apply(_ op: ModelOp) -> Int? {
        switch op {
        case .subscribe(let id, let name, let payload, let style, let delivery, let nested):
            subscribe(id, name, payload, style, delivery, nested)
        case .cancel(let id): token(id)?.cancel()
        case .pause(let id): token(id)?.pause()
        case .resume(let id): token(id)?.resume()
        case .drop(let id): dropToken(id)
        case .newObserver(let o): if observers[o] == nil { observers[o] = ModelObserver(slot: o) }
        case .dropObserver(let o): observers[o] = nil
        case .newSender(let s): if senders[s] == nil { senders[s] = ModelSender() }
        case .dropSender(let s): senders[s] = nil
        case .post(let name, let post, let from):
            return self.post(name, post, from)
        case .addProtocolObserver(let p, let o):
            guard let observer = observers[o] else { break }
            if p == 0 {
                center.addObserver(observer, for: (any ModelProtocolA).self)
            } else {
                center.addObserver(observer, for: (any ModelProtocolB).self)
            }
        case .observeProtocol(let id, let p, let o, let owned):
            guard let observer = observers[o] else { break }
            let token =
                p == 0
                ? center.observe(observer, for: (any ModelProtocolA).self)
                : center.observe(observer, for: (any ModelProtocolB).self)
            dropToken(id)
            if owned { observer.tokens[id] = token } else { tokens[id] = token }
        case .removeProtocolObserver(let p, let o):
            guard let observer = observers[o] else { break }
            if p == 0 {
                center.removeObserver(observer, for: (any ModelProtocolA).self)
            } else {
                center.removeObserver(observer, for: (any ModelProtocolB).self)
            }
        case .removeObserverEverywhere(let o):
            guard let observer = observers[o] else { break }
            center.removeObserver(observer)
        case .notify(let p, let nested):
            if p == 0 {
                return center.notify((any ModelProtocolA).self) { observer in
                    observer.ping()
                    self.notified(0, observer as AnyObject, nested)
                }
            }
            return center.notify((any ModelProtocolB).self) { observer in
                observer.pong()
                self.notified(1, observer as AnyObject, nested)
            }
        case .drain:
            // The marker goes in behind the deliveries already waiting, before the queue runs:
            // it suspends the queue from inside, which stops it right after the marker, so
            // deliveries scheduled while draining wait for the next drain (as in the model).
            let drained = DispatchSemaphore(value: 0)
            queue.async { [queue] in
                queue.suspend()
                drained.signal()
            }
            queue.resume()
            drained.wait()
        }
        return nil
    }

    func post(_ name: Int, _ post: ModelPost, _ from: Int?) -> Int? {
        let key = "name\(name)"
        if let from {
            guard let sender = senders[from] else { return nil }
            switch post {
            case .plain(let f, let t), .envelope(let f, let t):
                return center.post(key, PostObject(flag: "f\(f)", data: t.map { tags[$0] }), from: sender)
            case .int(let v): return center.post(Topic<Int>(key), v, from: sender)
            case .tag(let t): return center.post(Topic<ModelTag>(key), tags[t], from: sender)
            }
        }
        switch post {
        case .plain(let f, let t): return center.post(key, flag: "f\(f)", data: t.map { tags[$0] })
        case .envelope(let f, let t): return center.post(key, PostObject(flag: "f\(f)", data: t.map { tags[$0] }))
        case .int(let v): return center.post(Topic<Int>(key), v)
        case .tag(let t): return center.post(Topic<ModelTag>(key), tags[t])
        }
    }

    /// What a notify body does for each observer: log the call, then run the nested operation.
    func notified(_ p: Int, _ observer: AnyObject, _ nested: ModelOp?) {
        ran("protocol\(p) observer\((observer as! ModelObserver).slot)", nested)
    }

    /// The observers `observers(for:)` lists, by slot.
    func observerSlots(_ p: Int) -> [Int] {
        let listed: [AnyObject] =
            p == 0
            ? center.observers(for: (any ModelProtocolA).self).map { $0 as AnyObject }
            : center.observers(for: (any ModelProtocolB).self).map { $0 as AnyObject }
        return listed.map { ($0 as! ModelObserver).slot }
    }

    /// What every handler does: log the call, then run the nested operation if not too deep;
    /// then throw, for the subscriptions that `ModelCheck.throwing` picks.
    func handled(_ id: Int, _ serial: Int, _ description: String, _ nested: ModelOp?) throws {
        ran("#\(id).\(serial) \(description)", nested)
        if ModelCheck.throwing(id) { throw ModelThrow(id: id) }
    }

    func ran(_ call: String, _ nested: ModelOp?) {
        depth += 1
        defer { depth -= 1 }
        log.append(call)
        guard let nested, depth <= ModelCheck.maxDepth else { return }
        if let returned = apply(nested) { log.append("nested \(nested.verb) returned \(returned)") }
    }

    static func describe(_ post: PostObject) -> String {
        "object(\(post.flag), \((post.data as? ModelTag).map { "tag\($0.index)" } ?? "nil"), \(post.payload(as: Int.self).map(String.init) ?? "nil"))"
    }

    func subscribe(
        _ id: Int, _ nameIndex: Int, _ payload: ModelPayload, _ style: ModelStyle, _ delivery: ModelDelivery,
        _ nested: ModelOp?
    ) {
        let name = "name\(nameIndex)"
        // Preconditions shared with the model: the observer or sender must exist.
        var observer: ModelObserver?
        var owned = false
        var sender: ModelSender?
        switch style {
        case .observer(let o, let ownsToken):
            guard let existing = observers[o] else { return }
            observer = existing
            owned = ownsToken
        case .filtered(let s):
            guard let existing = senders[s] else { return }
            sender = existing
        default: break
        }
        serial += 1
        let token: Subscription
        switch payload {
        case .object:
            token = make(name, style, delivery, id, nested, observer, sender, Self.describe)
        case .int:
            token = make(Topic<Int>(name), style, delivery, id, nested, observer, sender) { "Int \($0)" }
        case .tag:
            token = make(Topic<ModelTag>(name), style, delivery, id, nested, observer, sender) { "Tag tag\($0.index)" }
        case .pattern:
            token = make(ModelCheck.patterns[nameIndex], style, delivery, id, nested, sender)
        }
        dropToken(id)
        if let observer, owned {
            observer.tokens[id] = token
        } else {
            tokens[id] = token
        }
    }

    /// The handler every subscription gets: it captures a `Reliability.Capture` (to prove the center lets
    /// go of it) and reports to `handled`.
    func handler<Payload>(
        _ id: Int, _ nested: ModelOp?, _ describe: @escaping @Sendable (Payload) -> String
    ) -> @Sendable (Payload) throws -> Void {
        let capture = Reliability.Capture(captures)
        let serial = self.serial
        return { [weak self] payload in
            withExtendedLifetime(capture) {}
            try self?.handled(id, serial, describe(payload), nested)
        }
    }

    func make(
        _ name: String, _ style: ModelStyle, _ delivery: ModelDelivery, _ id: Int, _ nested: ModelOp?,
        _ observer: ModelObserver?, _ sender: ModelSender?, _ describe: @escaping @Sendable (PostObject) -> String
    ) -> Subscription {
        let body = handler(id, nested, describe)
        let serial = self.serial
        let priority = ModelCheck.priority(id)
        let route: Delivery = delivery == .queued ? .queue(queue) : .immediate
        switch style {
        case .handler where delivery == .mainActor:
            return center.subscribe(name, delivery: .mainActor, priority: priority, handler: body)
        case .handler: return center.subscribe(name, delivery: route, priority: priority, handler: body)
        case .once: return center.subscribe(name, delivery: route, once: true, priority: priority, handler: body)
        case .filtered: return center.subscribe(name, from: sender!, delivery: route, priority: priority, handler: body)
        case .observer:
            let selector = observerSelector(id, serial, nested, describe)
            if delivery == .mainActor {
                return center.register(
                    name, observer: observer!, delivery: .mainActor, priority: priority, selector: selector)
            }
            return center.register(name, observer: observer!, delivery: route, priority: priority, selector: selector)
        }
    }

    func make<Payload: Sendable>(
        _ topic: Topic<Payload>, _ style: ModelStyle, _ delivery: ModelDelivery, _ id: Int, _ nested: ModelOp?,
        _ observer: ModelObserver?, _ sender: ModelSender?, _ describe: @escaping @Sendable (Payload) -> String
    ) -> Subscription {
        let body = handler(id, nested, describe)
        let serial = self.serial
        let priority = ModelCheck.priority(id)
        let route: Delivery = delivery == .queued ? .queue(queue) : .immediate
        switch style {
        case .handler where delivery == .mainActor:
            return center.subscribe(topic, delivery: .mainActor, priority: priority, handler: body)
        case .handler: return center.subscribe(topic, delivery: route, priority: priority, handler: body)
        case .once: return center.subscribe(topic, delivery: route, once: true, priority: priority, handler: body)
        case .filtered:
            return center.subscribe(topic, from: sender!, delivery: route, priority: priority, handler: body)
        case .observer:
            let selector = observerSelector(id, serial, nested, describe)
            if delivery == .mainActor {
                return center.register(
                    topic, observer: observer!, delivery: .mainActor, priority: priority, selector: selector)
            }
            return center.register(topic, observer: observer!, delivery: route, priority: priority, selector: selector)
        }
    }

    /// A pattern subscription: the handler logs the post's name before the envelope.
    func make(
        _ pattern: NamePattern, _ style: ModelStyle, _ delivery: ModelDelivery, _ id: Int, _ nested: ModelOp?,
        _ sender: ModelSender?
    ) -> Subscription {
        let body = handler(id, nested) { (post: (name: String, object: PostObject)) in
            "\(post.name) \(Self.describe(post.object))"
        }
        let priority = ModelCheck.priority(id)
        let route: Delivery = delivery == .queued ? .queue(queue) : .immediate
        switch style {
        case .handler where delivery == .mainActor:
            return center.subscribe(matching: pattern, delivery: .mainActor, priority: priority) { try body(($0, $1)) }
        case .once:
            return center.subscribe(matching: pattern, delivery: route, once: true, priority: priority) {
                try body(($0, $1))
            }
        case .filtered:
            return center.subscribe(matching: pattern, from: sender!, delivery: route, priority: priority) {
                try body(($0, $1))
            }
        default: return center.subscribe(matching: pattern, delivery: route, priority: priority) { try body(($0, $1)) }
        }
    }

    /// A selector for `register`: the observer is passed in by the center on each call (it holds
    /// the observer weakly), and the call is reported like a handler's. Captures nothing strong
    /// but a `Reliability.Capture`.
    func observerSelector<Payload>(
        _ id: Int, _ serial: Int, _ nested: ModelOp?, _ describe: @escaping @Sendable (Payload) -> String
    ) -> @Sendable (ModelObserver) -> (Payload) throws -> Void {
        let capture = Reliability.Capture(captures)
        return { [weak self] observer in
            { payload in
                withExtendedLifetime((capture, observer)) {}
                try self?.handled(id, serial, describe(payload), nested)
            }
        }
    }

    func tearDown() {
        tokens.removeAll()
        observers.removeAll()
        if suspended {
            suspended = false
            queue.resume()
        }
        queue.sync {}
    }
}

/// The protocols of the protocol-observer operations.
protocol ModelProtocolA: AnyObject {
    func ping()
}

protocol ModelProtocolB: AnyObject {
    func pong()
}

/// An observer for selector registrations and for both protocols; it may own tokens.
final class ModelObserver: ModelProtocolA, ModelProtocolB, @unchecked Sendable {
    // @unchecked: only used by the harness's one thread at a time (see `RealSide`).
    let slot: Int
    var tokens: [Int: Subscription] = [:]
    var pings = 0

    init(slot: Int) { self.slot = slot }

    func ping() { pings += 1 }
    func pong() { pings += 1 }
}

final class ModelSender: Sendable {}

// MARK: - The reference model

/// The obviously correct center: arrays of entries in subscription order, a FIFO of queued
/// deliveries, and the rules of the documented guarantees, one line each.
final class ReferenceModel {
    enum State { case active, paused, cancelled, spent }

    struct Entry {
        let id: Int
        let serial: Int
        let name: Int
        let payload: ModelPayload
        let once: Bool
        let delivery: ModelDelivery
        let nested: ModelOp?
        /// Observer slot and generation, for selector registrations.
        let observer: (slot: Int, generation: Int)?
        let owned: Bool
        /// Sender slot and generation, for sender-filtered subscriptions.
        let sender: (slot: Int, generation: Int)?
        var state = State.active
    }

    /// A protocol registration: one observer (slot and generation) for one protocol.
    struct Registration {
        let observer: (slot: Int, generation: Int)
        var state = State.active  // active, paused or cancelled (removed)
    }

    /// What a token controls, and the generation of the observer holding it, if one does.
    struct Token {
        enum Target {
            case entry(Int)
            case registration(Int)
        }
        let target: Target
        let ownerGeneration: Int?
    }

    let plantedBug: Bool
    var entries: [Int: Entry] = [:]
    /// Per name, entry serials in subscription order (guarantee 1).
    var routes: [[Int]] = Array(repeating: [], count: ModelGenerator.names)
    /// Per pattern (`ModelCheck.patterns`), its subscriptions' entry serials in delivery order.
    var patternRoutes: [[Int]] = Array(repeating: [], count: ModelCheck.patterns.count)
    /// Whether a pattern subscription was ever made (the center never forgets it).
    var hadPatterns = false
    /// Per protocol, registration serials in registration order.
    var protocolLists: [[Int]] = Array(repeating: [], count: ModelGenerator.protocols)
    var registrations: [Int: Registration] = [:]
    /// Token id → what it controls, while the token exists.
    var present: [Int: Token] = [:]
    /// Live observers and senders: slot → generation.
    var observers: [Int: Int] = [:]
    var senders: [Int: Int] = [:]
    var generation = 0
    var pending: [(serial: Int, description: String)] = []
    var log: [String] = []
    var depth = 0
    var serial = 0
    var registrationSerial = 0

    init(plantedBug: Bool) { self.plantedBug = plantedBug }

    func apply(_ op: ModelOp) -> Int? {
        switch op {
        case .subscribe(let id, let name, let payload, let style, let delivery, let nested):
            subscribe(id, name, payload, style, delivery, nested)
        case .cancel(let id):
            cancel(id)
        case .pause(let id):
            switch present[id]?.target {
            case .entry(let s)?: if entries[s]!.state == .active { entries[s]!.state = .paused }
            case .registration(let r)?: if registrations[r]!.state != .cancelled { registrations[r]!.state = .paused }
            case nil: break
            }
        case .resume(let id):
            guard !plantedBug else { break }
            switch present[id]?.target {
            case .entry(let s)?: if entries[s]!.state == .paused { entries[s]!.state = .active }
            case .registration(let r)?: if registrations[r]!.state != .cancelled { registrations[r]!.state = .active }
            case nil: break
            }
        case .drop(let id):
            drop(id)
        case .newObserver(let o):
            if observers[o] == nil {
                generation += 1
                observers[o] = generation
            }
        case .dropObserver(let o):
            guard let g = observers.removeValue(forKey: o) else { break }
            // Tokens the observer owned go with it.
            for (id, token) in present where token.ownerGeneration == g { drop(id) }
        case .newSender(let s):
            if senders[s] == nil {
                generation += 1
                senders[s] = generation
            }
        case .dropSender(let s):
            senders[s] = nil
        case .post(let name, let post, let from):
            if let from, senders[from] == nil { return nil }
            return self.post(name, post, from)
        case .drain:
            let due = pending
            pending.removeAll()
            for item in due {
                // Guarantee 6: a queued delivery whose subscription was cancelled or paused
                // before it ran never runs; a fired one-shot's won delivery does.
                let e = entries[item.serial]!
                guard e.state == .active || e.state == .spent else { continue }
                if let o = e.observer, observers[o.slot] != o.generation { continue }
                call(e, item.description)
            }
        case .addProtocolObserver(let p, let o):
            _ = register(p, o)
        case .observeProtocol(let id, let p, let o, let owned):
            guard let r = register(p, o) else { break }
            drop(id)
            present[id] = Token(target: .registration(r), ownerGeneration: owned ? observers[o] : nil)
        case .removeProtocolObserver(let p, let o):
            if let r = registration(p, o) { registrations[r]!.state = .cancelled }
        case .removeObserverEverywhere(let o):
            for p in 0..<ModelGenerator.protocols {
                if let r = registration(p, o) { registrations[r]!.state = .cancelled }
            }
            // Selector registrations of the observer end too.
            guard let g = observers[o] else { break }
            for (serial, e) in entries where e.observer?.slot == o && e.observer?.generation == g {
                if e.state == .active || e.state == .paused { entries[serial]!.state = .cancelled }
            }
        case .notify(let p, let nested):
            // Observers added during the notify are not called by it (a copy); each one is
            // checked right before its call.
            var called = 0
            for r in protocolLists[p] where reachable(registrations[r]!) {
                called += 1
                call("protocol\(p) observer\(registrations[r]!.observer.slot)", nested)
            }
            compact()
            return called
        }
        compact()
        return nil
    }

    /// The current (not removed) registration of observer slot `o` for protocol `p`.
    func registration(_ p: Int, _ o: Int) -> Int? {
        guard let g = observers[o] else { return nil }
        return protocolLists[p].first { r in
            let registration = registrations[r]!
            return registration.observer == (o, g) && registration.state != .cancelled
        }
    }

    /// Finds or makes the registration of observer slot `o` for protocol `p` (an observer
    /// registered twice keeps its one registration and its place).
    func register(_ p: Int, _ o: Int) -> Int? {
        guard let g = observers[o] else { return nil }
        if let r = registration(p, o) { return r }
        registrationSerial += 1
        registrations[registrationSerial] = Registration(observer: (o, g))
        protocolLists[p].append(registrationSerial)
        return registrationSerial
    }

    func reachable(_ r: Registration) -> Bool {
        r.state == .active && observers[r.observer.slot] == r.observer.generation
    }

    func observerSlots(_ p: Int) -> [Int] {
        protocolLists[p].map { registrations[$0]! }.filter(reachable).map(\.observer.slot)
    }

    func cancel(_ id: Int) {
        switch present[id]?.target {
        case .entry(let s)?: entries[s]!.state = .cancelled
        case .registration(let r)?: registrations[r]!.state = .cancelled
        case nil: break
        }
    }

    func drop(_ id: Int) {
        cancel(id)
        present[id] = nil
    }

    func subscribe(
        _ id: Int, _ name: Int, _ payload: ModelPayload, _ style: ModelStyle, _ delivery: ModelDelivery,
        _ nested: ModelOp?
    ) {
        var observer: (Int, Int)?
        var owned = false
        var sender: (Int, Int)?
        switch style {
        case .observer(let o, let ownsToken):
            guard let g = observers[o] else { return }
            observer = (o, g)
            owned = ownsToken
        case .filtered(let s):
            guard let g = senders[s] else { return }
            sender = (s, g)
        default: break
        }
        serial += 1
        var once = false
        if case .once = style { once = true }
        entries[serial] = Entry(
            id: id, serial: serial, name: name, payload: payload, once: once, delivery: delivery, nested: nested,
            observer: observer, owned: owned, sender: sender)
        // After every entry of a priority at least its own, before the others.
        let priority = ModelCheck.priority(id)
        if case .pattern = payload {
            hadPatterns = true
            let place =
                patternRoutes[name].lastIndex { ModelCheck.priority(entries[$0]!.id) >= priority }.map { $0 + 1 } ?? 0
            patternRoutes[name].insert(serial, at: place)
        } else {
            let place =
                routes[name].lastIndex { ModelCheck.priority(entries[$0]!.id) >= priority }.map { $0 + 1 } ?? 0
            routes[name].insert(serial, at: place)
        }
        drop(id)
        present[id] = Token(target: .entry(serial), ownerGeneration: owned ? observer?.1 : nil)
    }

    /// Whether the entry would be reached by the next post (guarantees 10, 9, 17).
    func reachable(_ e: Entry) -> Bool {
        guard e.state == .active else { return false }
        if let o = e.observer, observers[o.slot] != o.generation { return false }
        if let s = e.sender, senders[s.slot] != s.generation { return false }
        return true
    }

    func reachableCount(_ name: Int) -> Int {
        let patterns = ModelCheck.patterns(matching: name).flatMap { patternRoutes[$0] }
        return (routes[name] + patterns).filter { reachable(entries[$0]!) }.count
    }

    func isActive(_ id: Int) -> Bool {
        switch present[id]!.target {
        case .entry(let s): return reachable(entries[s]!)
        case .registration(let r): return reachable(registrations[r]!)
        }
    }

    /// What a subscription taking `payload` receives from `post`, or `nil` if it does not
    /// receive it (guarantee 13: typed topics share the names of plain posts).
    func describe(_ payload: ModelPayload, _ post: ModelPost) -> String? {
        switch (payload, post) {
        case (.object, .plain(let f, let t)), (.object, .envelope(let f, let t)):
            return "object(f\(f), \(t.map { "tag\($0)" } ?? "nil"), nil)"
        case (.object, .int(let v)): return "object(, nil, \(v))"
        case (.object, .tag(let t)): return "object(, tag\(t), nil)"
        case (.int, .int(let v)): return "Int \(v)"
        case (.tag, .tag(let t)): return "Tag tag\(t)"
        case (.tag, .plain(_, let t?)), (.tag, .envelope(_, let t?)): return "Tag tag\(t)"
        default: return nil
        }
    }

    func post(_ name: Int, _ post: ModelPost, _ from: Int?) -> Int {
        // The poster holds its sender for the whole post: a handler dropping the sender's last
        // other reference does not end filtered subscriptions later in the same post.
        let postSender = from.flatMap { senders[$0] }
        // Guarantee 5: entries added during this post are not reached (the list is copied). The
        // name's own subscriptions first, then each matching pattern's, whose list is copied
        // when the post reaches it (Guarantees, rule 18).
        // Whether the center has pattern subscriptions at all is read once, when the post starts.
        let patterns = hadPatterns ? ModelCheck.patterns(matching: name) : []
        var delivered = walk(routes[name], name, post, from, postSender)
        for p in patterns {
            delivered += walk(patternRoutes[p], name, post, from, postSender)
        }
        return delivered
    }

    func walk(_ snapshot: [Int], _ name: Int, _ post: ModelPost, _ from: Int?, _ postSender: Int?) -> Int {
        var delivered = 0
        for s in snapshot {
            // Guarantee 6: the state is read at the entry's turn, so a cancel or pause made by
            // an earlier handler of this post is seen.
            let e = entries[s]!
            guard e.state == .active else { continue }
            if let filter = e.sender {
                guard let from, filter.slot == from, postSender == filter.generation else { continue }
            }
            if let o = e.observer, observers[o.slot] != o.generation { continue }
            let pattern = "name\(name) " + describe(.object, post)!
            guard let description = e.payload == .pattern ? pattern : describe(e.payload, post) else { continue }
            if e.once { entries[s]!.state = .spent }
            delivered += 1
            if e.delivery == .queued {
                pending.append((s, description))
            } else {
                call(e, description)  // guarantee 4: nested posts run depth-first, right here
            }
        }
        return delivered
    }

    func call(_ e: Entry, _ description: String) {
        call("#\(e.id).\(e.serial) \(description)", e.nested)
        // It threw: reported right after it returned, and the post went on (counted as run).
        if ModelCheck.throwing(e.id) { log.append("threw #\(e.id)") }
    }

    /// A handler or notify body runs: it logs, then runs its nested operation if not too deep.
    func call(_ text: String, _ nested: ModelOp?) {
        depth += 1
        defer { depth -= 1 }
        log.append(text)
        guard let nested, depth <= ModelCheck.maxDepth else { return }
        if let returned = apply(nested) { log.append("nested \(nested.verb) returned \(returned)") }
    }

    /// Forgets entries that can never be reached again, outside any post.
    func compact() {
        guard depth == 0 else { return }
        let waiting = Set(pending.map(\.serial))
        var held = Set<Int>()
        var heldRegistrations = Set<Int>()
        for token in present.values {
            switch token.target {
            case .entry(let s): held.insert(s)
            case .registration(let r): heldRegistrations.insert(r)
            }
        }
        for name in patternRoutes.indices {
            patternRoutes[name].removeAll { s in
                let state = entries[s]!.state
                let gone = (state == .cancelled || state == .spent) && !waiting.contains(s)
                if gone && !held.contains(s) { entries[s] = nil }
                return gone
            }
        }
        for name in routes.indices {
            routes[name].removeAll { s in
                let state = entries[s]!.state
                let gone = (state == .cancelled || state == .spent) && !waiting.contains(s)
                if gone && !held.contains(s) { entries[s] = nil }
                return gone
            }
        }
        for p in protocolLists.indices {
            protocolLists[p].removeAll { r in
                let registration = registrations[r]!
                let gone =
                    registration.state == .cancelled
                    || observers[registration.observer.slot] != registration.observer.generation
                if gone && !heldRegistrations.contains(r) { registrations[r] = nil }
                return gone
            }
        }
    }
}
