// The churn of the eight-thread stress test: one thread's worker (`ChurnWorker`), the totals the
// threads share (`SharedLedger`), and the worker's records of its subscriptions and observers.

import Dispatch
import Subscriptions

/// Totals the eight threads share.
final class SharedLedger: Sendable {
    /// Handler calls on the shared names.
    let sharedCalls = Reliability.Tally()
    /// The sum of the return values of every post to a shared name (nested ones included).
    let sharedReturned = Reliability.Tally()
    let violations = Reliability.Tally()
    /// Deliveries and observer calls predicted on private names and protocols (to show the
    /// mix really exercised them).
    let privateDeliveries = Reliability.Tally()
    let privateProtocolCalls = Reliability.Tally()
    let liveObservers = Reliability.Tally()
    let liveCaptures = Reliability.Tally()
    let probes = Reliability.Locked<[Reliability.CallProbe]>([])
    let failures = Reliability.Locked<[String]>([])

    func fail(_ message: String) {
        failures.withLock { if $0.count < 50 { $0.append(message) } }
    }
}

/// One thread's share of the churn: its private names with an exact model, and its
/// subscriptions to the shared names.
struct ChurnWorker {
    static let sharedNames = ["shared.0", "shared.1"]
    static func privateNames(_ thread: Int) -> [String] { ["t\(thread).a", "t\(thread).b"] }
    static let topics = sharedNames.map { Topic<Int>($0) }

    let center: PostCenter
    let ledger: SharedLedger
    let thread: Int
    var random: Reliability.Random
    let names: [String]
    let queue: DispatchQueue

    /// Objects posts can come from; `generation` tells a recreated sender from the old one.
    var senders: [AnyObject?] = [Sender(), Sender()]
    var senderGeneration = [0, 0]

    var subs: [PrivateSub] = []
    /// Ended private subscriptions: their counts must never move again.
    var retired: [PrivateSub] = []
    var shared: [SharedSub] = []
    /// Observers of this thread's own protocol, with the model of their registration.
    var protocolObservers: [PrivateProtocolObserver] = []
    var retiredProtocolObservers: [PrivateProtocolObserver] = []
    /// Observers of the shared protocol (only totals are checked there).
    var sharedProtocolObservers: [ChurnObserver] = []
    var sharedProtocolTokens: [Subscription] = []
    let key: ChurnProtocolKey

    init(center: PostCenter, ledger: SharedLedger, thread: Int, random: Reliability.Random) {
        self.center = center
        self.ledger = ledger
        self.thread = thread
        self.random = random
        self.names = ChurnWorker.privateNames(thread)
        self.queue = DispatchQueue(label: "stress.\(thread)")
        self.key = ChurnProtocolKey.perThread[thread]
    }

    mutating func step() {
        let roll = random.below(100)
        switch roll {
        case 0..<10: subscribePrivate()
        case 10..<14: endPrivate(drop: false)
        case 14..<17: endPrivate(drop: true)
        case 17..<21: pausePrivate(true)
        case 21..<25: pausePrivate(false)
        case 25..<28: dropPrivateObserver()
        case 28..<30: replaceSender()
        case 30..<45: postPrivate()
        case 45..<50: subscribeShared()
        case 50..<54: endShared()
        case 54..<56: dropSharedObserver()
        case 56..<68: postShared()
        case 68..<71: checkIntrospection()
        case 71..<74: pauseShared()
        case 74..<78: addPrivateProtocolObserver()
        case 78..<81: removePrivateProtocolObserver()
        case 81..<83: pausePrivateProtocolObserver()
        case 83..<85: dropPrivateProtocolObserver()
        case 85..<91: notifyPrivate()
        case 91..<94: addSharedProtocolObserver()
        case 94..<96: removeSharedProtocolObserver()
        default: notifyShared()
        }
    }

    // MARK: Private names (exact model)

    mutating func subscribePrivate() {
        if subs.count >= 12 {
            endPrivate(drop: true)
            return
        }
        let nameIndex = random.below(names.count)
        let name = names[nameIndex]
        let counter = Reliability.Tally()
        let capture = Reliability.Capture(ledger.liveCaptures)
        let count: @Sendable () -> Void = {
            withExtendedLifetime(capture) {}
            counter.up()
        }
        var sub = PrivateSub(kind: .plain, name: nameIndex, counter: counter)
        switch random.below(6) {
        case 0:
            sub.token = center.subscribe(name) { _ in count() }
        case 1:
            sub.kind = .typed
            sub.token = center.subscribe(Topic<Int>(name)) { _ in count() }
        case 2:
            sub.kind = .once
            sub.token = center.subscribe(name, once: true) { _ in count() }
        case 3:
            sub.kind = .observer
            let observer = Reliability.DyingObserver(
                live: ledger.liveObservers, violations: ledger.violations, onCall: count)
            let token = center.register(name, observer: observer, selector: Reliability.DyingObserver.receive(_:))
            if random.chance(50) {
                observer.token = token
                sub.observerOwnsToken = true
            } else {
                sub.token = token
            }
            sub.observer = observer
        case 4:
            let s = random.below(senders.count)
            if senders[s] == nil { replaceSender(s) }
            sub.kind = .filtered(sender: s, generation: senderGeneration[s])
            sub.token = center.subscribe(name, from: senders[s]!) { _ in count() }
        default:
            sub.kind = .queued
            sub.token = center.subscribe(name, delivery: .queue(queue)) { _ in count() }
        }
        subs.append(sub)
    }

    mutating func endPrivate(drop: Bool) {
        guard !subs.isEmpty else { return }
        let i = random.below(subs.count)
        if drop {
            var sub = subs.remove(at: i)
            sub.token = nil
            if sub.observerOwnsToken { sub.observer = nil }  // the observer goes with its token
            sub.ended = true
            retired.append(sub)
        } else {
            subs[i].token?.cancel()
            subs[i].observer?.token?.cancel()
            subs[i].ended = true
        }
    }

    mutating func pausePrivate(_ pause: Bool) {
        guard !subs.isEmpty else { return }
        let i = random.below(subs.count)
        guard let token = subs[i].token ?? subs[i].observer?.token else { return }
        if pause { token.pause() } else { token.resume() }
        if !subs[i].ended { subs[i].paused = pause }
    }

    mutating func dropPrivateObserver() {
        guard let i = subs.firstIndex(where: { $0.observer != nil }) else { return }
        subs[i].observer = nil
        if subs[i].observerOwnsToken { subs[i].ended = true }
    }

    mutating func replaceSender(_ index: Int? = nil) {
        let s = index ?? random.below(senders.count)
        senders[s] = random.chance(50) || index != nil ? Sender() : nil
        senderGeneration[s] += 1
    }

    func senderAlive(_ s: Int, _ generation: Int) -> Bool {
        senders[s] != nil && senderGeneration[s] == generation
    }

    func reachable(_ sub: PrivateSub) -> Bool {
        guard !sub.ended, !sub.paused else { return false }
        switch sub.kind {
        case .observer: return sub.observer != nil
        case .filtered(let s, let g): return senderAlive(s, g)
        default: return true
        }
    }

    mutating func postPrivate() {
        let nameIndex = random.below(names.count)
        let name = names[nameIndex]
        enum Kind {
            case plain, typed
            case from(Int)
        }
        let kind: Kind
        switch random.below(3) {
        case 0: kind = .plain
        case 1: kind = .typed
        default:
            let s = random.below(senders.count)
            if senders[s] == nil { replaceSender(s) }
            kind = .from(s)
        }
        var expected = 0
        for i in subs.indices where subs[i].name == nameIndex && reachable(subs[i]) {
            let receives: Bool
            switch (subs[i].kind, kind) {
            case (.typed, .typed): receives = true
            case (.typed, _): receives = false
            case (.filtered(let s, _), .from(let from)): receives = s == from
            case (.filtered, _): receives = false
            default: receives = true
            }
            guard receives else { continue }
            expected += 1
            subs[i].expected += 1
            if case .once = subs[i].kind { subs[i].ended = true }
        }
        let returned: Int
        switch kind {
        case .plain: returned = center.post(name, flag: "p")
        case .typed: returned = center.post(Topic<Int>(name), 1)
        case .from(let s): returned = center.post(name, PostObject(flag: "s"), from: senders[s]!)
        }
        queue.sync {}  // queued deliveries of this post have run (or were dropped) now
        ledger.privateDeliveries.add(expected)
        if returned != expected { ledger.fail("t\(thread) \(name): post returned \(returned), expected \(expected)") }
        verifyCounts()
    }

    /// Checks the live subscriptions' counts, and with `all` the ended ones too (a count only
    /// grows, so checking those once at the end catches any call after the end).
    func verifyCounts(all: Bool = false) {
        for sub in subs + (all ? retired : []) where sub.counter.current != sub.expected {
            ledger.fail(
                "t\(thread) \(sub.kind) on \(names[sub.name]): \(sub.counter.current) calls, expected \(sub.expected)")
        }
    }

    func checkIntrospection() {
        for (index, name) in names.enumerated() {
            let expected = subs.filter { $0.name == index && reachable($0) }.count
            let counted = center.subscriptionCount(for: name)
            if counted != expected {
                ledger.fail("t\(thread) \(name): subscriptionCount \(counted), expected \(expected)")
            }
        }
        for sub in subs {
            guard let token = sub.token ?? sub.observer?.token else { continue }
            if token.isActive != reachable(sub) {
                ledger.fail("t\(thread) \(sub.kind): isActive \(token.isActive), expected \(reachable(sub))")
            }
        }
    }

    // MARK: Shared names (totals)

    mutating func subscribeShared() {
        if shared.count >= 8 {
            endShared()
            return
        }
        let n = random.below(2)
        let name = ChurnWorker.sharedNames[n]
        let ledger = self.ledger
        let center = self.center
        let probe = Reliability.CallProbe()
        ledger.probes.withLock { $0.append(probe) }
        let capture = Reliability.Capture(ledger.liveCaptures)
        var sub = SharedSub(probe: probe)
        let record: @Sendable () -> Void = {
            withExtendedLifetime(capture) {}
            probe.enter()
            ledger.sharedCalls.up()
            probe.exit()
        }
        switch random.below(5) {
        case 0:
            sub.token = center.subscribe(name) { _ in record() }
        case 1:
            sub.token = center.subscribe(ChurnWorker.topics[n]) { _ in record() }
        case 2:
            sub.token = center.subscribe(name, once: true) { _ in record() }
        case 3:
            let observer = Reliability.DyingObserver(live: ledger.liveObservers, violations: ledger.violations) {
                ledger.sharedCalls.up()
            }
            sub.token = center.register(name, observer: observer, selector: Reliability.DyingObserver.receive(_:))
            sub.observer = observer
        default:
            // A relay on shared.0 re-posts to shared.1 from inside the delivery (never the other
            // way round, so it terminates); the nested post's deliveries are counted too.
            sub.token = center.subscribe(ChurnWorker.sharedNames[0]) { _ in
                withExtendedLifetime(capture) {}
                probe.enter()
                ledger.sharedCalls.up()
                ledger.sharedReturned.add(center.post(ChurnWorker.sharedNames[1], flag: "relay"))
                probe.exit()
            }
        }
        shared.append(sub)
    }

    mutating func endShared() {
        guard !shared.isEmpty else { return }
        var sub = shared.remove(at: random.below(shared.count))
        let cancelled = random.chance(50)
        if cancelled {
            sub.token?.cancel()
        } else {
            sub.token = nil  // a deinit does not wait for a call under way
        }
        if cancelled && sub.probe.close() { ledger.violations.up() }
        sub.token = nil
    }

    mutating func dropSharedObserver() {
        guard let i = shared.firstIndex(where: { $0.observer != nil }) else { return }
        shared[i].observer = nil
    }

    mutating func pauseShared() {
        guard !shared.isEmpty else { return }
        let token = shared[random.below(shared.count)].token
        if random.chance(50) { token?.pause() } else { token?.resume() }
    }

    mutating func postShared() {
        let n = random.below(2)
        let returned: Int
        if random.chance(50) {
            returned = center.post(ChurnWorker.sharedNames[n], flag: "s")
        } else {
            returned = center.post(ChurnWorker.topics[n], n)
        }
        ledger.sharedReturned.add(returned)
    }

    // MARK: End

    mutating func finish() {
        checkIntrospection()
        for i in subs.indices {
            subs[i].token = nil
            subs[i].observer = nil
            subs[i].ended = true
        }
        retired += subs
        subs.removeAll()
        for name in names {
            let returned = center.post(name, flag: "after")
            if returned != 0 { ledger.fail("t\(thread) \(name): \(returned) deliveries after everything ended") }
        }
        queue.sync {}
        verifyCounts(all: true)
        while !shared.isEmpty { endShared() }

        checkProtocolObservers()
        for i in protocolObservers.indices { protocolObservers[i].end() }
        retiredProtocolObservers += protocolObservers
        protocolObservers.removeAll()
        let returned = key.notify(center)
        if returned != 0 { ledger.fail("t\(thread): notify reached \(returned) observers after everything ended") }
        verifyProtocolCounts(all: true)
        sharedProtocolTokens.removeAll()
        sharedProtocolObservers.removeAll()
    }

    // MARK: Protocol observers of this thread's protocol (exact model)

    mutating func addPrivateProtocolObserver() {
        if protocolObservers.count >= 8 {
            dropPrivateProtocolObserver()
            return
        }
        let observer = ChurnObserver(live: ledger.liveObservers, violations: ledger.violations)
        var entry = PrivateProtocolObserver(observer: observer)
        switch random.below(3) {
        case 0: key.add(center, observer)
        case 1: entry.token = key.observe(center, observer)
        default:
            observer.token = key.observe(center, observer)
            entry.ownsToken = true
        }
        protocolObservers.append(entry)
    }

    mutating func removePrivateProtocolObserver() {
        guard !protocolObservers.isEmpty else { return }
        let i = random.below(protocolObservers.count)
        guard let observer = protocolObservers[i].observer else { return }
        switch random.below(3) {
        case 0: key.remove(center, observer)
        case 1: center.removeObserver(observer)
        default:
            if let token = protocolObservers[i].token ?? observer.token {
                token.cancel()
            } else {
                key.remove(center, observer)
            }
        }
        protocolObservers[i].registered = false
    }

    mutating func pausePrivateProtocolObserver() {
        guard !protocolObservers.isEmpty else { return }
        let i = random.below(protocolObservers.count)
        guard let token = protocolObservers[i].token ?? protocolObservers[i].observer?.token else { return }
        let pause = random.chance(50)
        if pause { token.pause() } else { token.resume() }
        if protocolObservers[i].registered { protocolObservers[i].paused = pause }
    }

    mutating func dropPrivateProtocolObserver() {
        guard !protocolObservers.isEmpty else { return }
        var entry = protocolObservers.remove(at: random.below(protocolObservers.count))
        entry.end()
        retiredProtocolObservers.append(entry)
    }

    mutating func notifyPrivate() {
        var expected = 0
        for i in protocolObservers.indices where protocolObservers[i].reachable {
            expected += 1
            protocolObservers[i].expected += 1
        }
        let returned = key.notify(center)
        ledger.privateProtocolCalls.add(expected)
        if returned != expected { ledger.fail("t\(thread): notify returned \(returned), expected \(expected)") }
        verifyProtocolCounts()
        if random.chance(20) { checkProtocolObservers() }
    }

    func verifyProtocolCounts(all: Bool = false) {
        for entry in protocolObservers + (all ? retiredProtocolObservers : [])
        where entry.calls.current != entry.expected {
            ledger.fail("t\(thread): protocol observer called \(entry.calls.current) times, expected \(entry.expected)")
        }
    }

    func checkProtocolObservers() {
        let listed = key.observers(center)
        let expected = protocolObservers.filter(\.reachable).compactMap(\.observer)
        if listed.count != expected.count || zip(listed, expected).contains(where: { $0 !== $1 }) {
            ledger.fail("t\(thread): observers(for:) lists \(listed.count), expected \(expected.count) in order")
        }
        for entry in protocolObservers {
            guard let token = entry.token ?? entry.observer?.token else { continue }
            if token.isActive != entry.reachable {
                ledger.fail("t\(thread): protocol token isActive \(token.isActive), expected \(entry.reachable)")
            }
        }
    }

    // MARK: Protocol observers of the shared protocol (totals)

    mutating func addSharedProtocolObserver() {
        if sharedProtocolObservers.count >= 6 {
            removeSharedProtocolObserver()
            return
        }
        let ledger = self.ledger
        let observer = ChurnObserver(live: ledger.liveObservers, violations: ledger.violations) {
            ledger.sharedCalls.up()
        }
        if random.chance(50) {
            center.addObserver(observer, for: (any ChurnShared).self)
        } else {
            sharedProtocolTokens.append(center.observe(observer, for: (any ChurnShared).self))
        }
        sharedProtocolObservers.append(observer)
    }

    mutating func removeSharedProtocolObserver() {
        if !sharedProtocolTokens.isEmpty && random.chance(40) {
            sharedProtocolTokens.remove(at: random.below(sharedProtocolTokens.count)).cancel()
            return
        }
        guard !sharedProtocolObservers.isEmpty else { return }
        let observer = sharedProtocolObservers.remove(at: random.below(sharedProtocolObservers.count))
        // Either removed explicitly or just let go: a dying observer is never called.
        if random.chance(50) { center.removeObserver(observer, for: (any ChurnShared).self) }
    }

    mutating func notifyShared() {
        ledger.sharedReturned.add(center.notify((any ChurnShared).self) { $0.sharedCall() })
    }
}

private final class Sender {}

/// A thread's model of one observer of its own protocol.
struct PrivateProtocolObserver {
    /// Strong while the thread keeps the observer; `nil` once dropped.
    var observer: ChurnObserver?
    let calls: Reliability.Tally
    var token: Subscription?
    var ownsToken = false
    var registered = true
    var paused = false
    var expected = 0

    init(observer: ChurnObserver) {
        self.observer = observer
        self.calls = observer.calls
    }

    var reachable: Bool { observer != nil && registered && !paused }

    /// Lets go of the observer and its token.
    mutating func end() {
        token = nil
        observer = nil
        registered = false
    }
}

struct PrivateSub {
    enum Kind: CustomStringConvertible {
        case plain, typed, once, observer, queued
        case filtered(sender: Int, generation: Int)

        var description: String {
            switch self {
            case .plain: "plain"
            case .typed: "typed"
            case .once: "once"
            case .observer: "observer"
            case .queued: "queued"
            case .filtered(let s, let g): "filtered(\(s)#\(g))"
            }
        }
    }

    var kind: Kind
    let name: Int
    let counter: Reliability.Tally
    var token: Subscription?
    /// For `.observer`: the observer, until it is dropped.
    var observer: Reliability.DyingObserver?
    /// For `.observer`: the token lives in the observer, so dropping the observer ends it.
    var observerOwnsToken = false
    var expected = 0
    var paused = false
    /// Cancelled, dropped, or a one-shot that fired.
    var ended = false

    init(kind: Kind, name: Int, counter: Reliability.Tally) {
        self.kind = kind
        self.name = name
        self.counter = counter
    }
}

struct SharedSub {
    let probe: Reliability.CallProbe
    var token: Subscription?
    var observer: Reliability.DyingObserver?
}
