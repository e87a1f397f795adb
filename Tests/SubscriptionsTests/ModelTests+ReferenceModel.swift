// The reference model of the model-based tests: the obviously correct, single-threaded center.

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
