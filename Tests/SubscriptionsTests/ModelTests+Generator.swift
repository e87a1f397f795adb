// The operations of the model-based tests (`ModelOp` and the choices it is made of), their options, and
// `ModelGenerator`, which makes seeded random sequences of them.

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
