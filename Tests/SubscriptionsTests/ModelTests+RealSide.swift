// The real side of the model-based tests: a `PostCenter` driven by operations (`RealSide`), and the
// observer, protocols and sender it uses.

import Dispatch
import Subscriptions

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
