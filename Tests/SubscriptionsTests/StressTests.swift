import Dispatch
import Foundation
import Subscriptions
import SubscriptionsTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Bounded multi-threaded stress: a fixed number of operations on dedicated threads, exact
/// delivery accounting, and everything back to zero at the end. Scaled down under
/// ThreadSanitizer (see `Reliability.scale`). Each test's racing part, which joins threads and
/// waits for them, runs on a thread of its own (`TestThread.run`), not on one of the two
/// cooperative threads every test of the run shares on two cores.
@Suite("Stress", .serialized, .tags(.stress))
struct StressTests {
    /// Eight threads run a seeded random mix of subscribe (plain, typed, one-shot, selector,
    /// sender-filtered, queued), cancel, token drop, pause, resume, observer death, sender death,
    /// posts, and protocol observers (add, observe with a token, remove, pause, death, notify).
    ///
    /// How the counts stay exact while the interleaving is arbitrary:
    /// - Each thread owns two private names and a protocol of its own: only it subscribes,
    ///   registers, posts and notifies there, and it keeps a model of its own registrations, so
    ///   every `post` and `notify` return value, every handler's and observer's call count,
    ///   `subscriptionCount(for:)`, `observers(for:)` and `isActive` are predicted exactly, while
    ///   the other threads churn the same stripes and locks.
    /// - All threads subscribe to, cancel and post to two shared names, and add, remove and
    ///   notify observers of a shared protocol. There every delivery is counted twice, by the
    ///   handler or observer that ran and by the `post` or `notify` that reports it (including
    ///   posts nested in a handler), and the two totals must be equal at the end. A shared handler
    ///   that starts after its `cancel()` returned, or was still running when it returned, is a
    ///   violation, as is an observer method running once the observer's deinit started.
    /// - At the end every subscription is gone: counts are zero, every observer and every object
    ///   captured by a handler closure has been deinitialised.
    @Test func eightThreadsChurningKeepExactCountsAndEndAtZero() async {
        let center = PostCenter()
        let ledger = SharedLedger()
        let operations = Reliability.scaled(30_000, minimum: 2_000)
        let seed: UInt64 = 0x5EED_0001

        await TestThread.run {
            Reliability.onThreads(8) { thread in
                var worker = ChurnWorker(
                    center: center, ledger: ledger, thread: thread,
                    random: Reliability.Random(seed: seed &+ UInt64(thread) &* 0x1_0000))
                for _ in 0..<operations { worker.step() }
                worker.finish()
            }
        }

        let failures = ledger.failures.current
        #expect(failures.isEmpty, "seed \(seed): \(failures.prefix(10).joined(separator: "\n"))")
        #expect(ledger.violations.current == 0, "observer called while dying, or handler running when cancel returned")
        let probes = ledger.probes.current
        #expect(probes.reduce(0) { $0 + $1.lateStarts.load(ordering: .relaxed) } == 0, "handler started after cancel()")
        #expect(ledger.sharedCalls.current == ledger.sharedReturned.current)
        #expect(ledger.sharedCalls.current > 0)
        #expect(ledger.privateDeliveries.current > 0)
        #expect(ledger.privateProtocolCalls.current > 0)
        for name in ChurnWorker.sharedNames + (0..<8).flatMap({ ChurnWorker.privateNames($0) }) {
            #expect(center.subscriptionCount(for: name) == 0, "\(name) still has subscriptions")
        }
        #expect(ledger.liveObservers.current == 0)
        #expect(eventually { ledger.liveCaptures.current == 0 }, "the center still holds handler closures")
        #expect(center.observers(for: (any ChurnShared).self).isEmpty)
        for key in ChurnProtocolKey.perThread { #expect(key.observers(center).isEmpty) }
    }

    // MARK: Guarantee 8 under races

    /// One thread posts in a loop; the test thread ends the subscription while handlers run.
    /// A handler that starts after `cancel()` returned, or is still running on the posting thread
    /// when it returns, breaks guarantee 8. In every other round the handler holds until the end
    /// is requested, so `cancel()` surely meets a running handler; in the others the end lands
    /// wherever the scheduling puts it. (With a `cancel()` that does not wait, both checks fail
    /// in every style, hundreds of times.)
    @Test(arguments: RaceStyle.allCases)
    func handlerNeverStartsAfterCancelReturned(style: RaceStyle) async {
        let result = await TestThread.run { CancelRace(style: style, end: .cancel).run(rounds: style.rounds) }
        #expect(result.lateStarts == 0, "\(style): a handler started after cancel() returned")
        #expect(result.runningAtReturn == 0, "\(style): a handler was still running when cancel() returned")
        #expect(result.leftovers == 0, "\(style): subscriptions left after cancel")
        #expect(result.liveCaptures == 0, "\(style): handler closures not released")
    }

    /// The same race, ended by dropping the last reference to the token instead of `cancel()`.
    /// The deinit does not wait for a call under way, but no post that starts after it reaches
    /// the handler, and the closure is released once the last call ended.
    @Test(arguments: RaceStyle.allCases)
    func noPostStartedAfterTokenDeinitReachesTheHandler(style: RaceStyle) async {
        let result = await TestThread.run { CancelRace(style: style, end: .dropToken).run(rounds: style.rounds) }
        #expect(result.lateStarts == 0, "\(style): a post started after the token's deinit reached the handler")
        #expect(result.leftovers == 0, "\(style): subscriptions left after deinit")
        #expect(result.liveCaptures == 0, "\(style): handler closures not released")
    }

    /// An observer registered selector style is dropped on the test thread while another thread
    /// posts to it (so its deinit runs on whichever thread lets go last). Its method must never
    /// run once its deinit started; afterwards it is not counted and not called.
    @Test(arguments: [ObserverTokenOwner.observer, .test])
    func observerMethodNeverRunsOnADeallocatingObserver(owner: ObserverTokenOwner) async {
        let center = PostCenter()
        let live = Reliability.Tally()
        let violations = Reliability.Tally()
        let failures = Reliability.Locked<[String]>([])
        let name = "dying"
        await TestThread.run {
            let poster = PosterThread(center: center, name: name)
            poster.start()
            var random = Reliability.Random(seed: 0xD1E5)
            for round in 0..<Reliability.scaled(1000, minimum: 100) {
                var observer: Reliability.DyingObserver? = Reliability.DyingObserver(live: live, violations: violations)
                let token = center.register(name, observer: observer!, selector: Reliability.DyingObserver.receive(_:))
                var held: Subscription? = token
                if owner == .observer {
                    observer!.token = token
                    held = nil
                }
                Reliability.wait(for: "the observer's first call") { observer!.calls.load(ordering: .relaxed) > 0 }
                for _ in 0..<random.below(3) { sched_yield() }
                observer = nil
                // The deinit may be running on the poster thread (it held the last strong reference
                // while calling the method): wait for it to finish there.
                Reliability.wait(for: "the observer's deinit") { live.current == 0 }
                poster.awaitTwoMoreRounds()
                if center.subscriptionCount(for: name) != 0 {
                    failures.withLock { $0.append("round \(round): still counted") }
                }
                if let held, held.isActive { failures.withLock { $0.append("round \(round): token still active") } }
                held = nil
            }
            poster.stop()
        }
        #expect(violations.current == 0, "an observer method ran after its deinit started")
        #expect(failures.current.isEmpty, "\(failures.current.prefix(5))")
        #expect(live.current == 0)
        #expect(center.subscriptionCount(for: name) == 0)
    }

    /// The same for protocol observers: one thread notifies in a loop while the test thread
    /// drops observers (added with `addObserver`, or with a token the observer owns). A dying
    /// observer is never called; once its deinit finished it is not listed nor counted.
    @Test(arguments: [false, true])
    func protocolObserverNeverCalledOnceItsDeinitStarted(ownsToken: Bool) async {
        let center = PostCenter()
        let live = Reliability.Tally()
        let violations = Reliability.Tally()
        let leftovers = await TestThread.run { () -> Int in
            let notifier = NotifierThread(center: center)
            notifier.start()
            var random = Reliability.Random(seed: 0xD1E6)
            var leftovers = 0
            for _ in 0..<Reliability.scaled(1000, minimum: 100) {
                var observer: ChurnObserver? = ChurnObserver(live: live, violations: violations)
                if ownsToken {
                    observer!.token = center.observe(observer!, for: (any ChurnShared).self)
                } else {
                    center.addObserver(observer!, for: (any ChurnShared).self)
                }
                let calls = observer!.calls
                Reliability.wait(for: "the observer's first call") { calls.current > 0 }
                for _ in 0..<random.below(3) { sched_yield() }
                observer = nil
                Reliability.wait(for: "the observer's deinit") { live.current == 0 }  // may run on the notifier
                notifier.awaitTwoMoreRounds()
                leftovers += center.observers(for: (any ChurnShared).self).count
            }
            notifier.stop()
            return leftovers
        }
        #expect(violations.current == 0, "a protocol observer was called after its deinit started")
        #expect(leftovers == 0, "dead observers still listed")
        #expect(center.notify((any ChurnShared).self) { $0.sharedCall() } == 0)
    }
}

/// A thread that notifies `ChurnShared` observers in a loop, counting rounds, until `stop()`.
private final class NotifierThread: Sendable {
    let center: PostCenter
    let rounds = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init(center: PostCenter) { self.center = center }

    func start() {
        Thread { [self] in
            while !stopped.load(ordering: .acquiring) {
                center.notify((any ChurnShared).self) { $0.sharedCall() }
                rounds.add(1, ordering: .acquiringAndReleasing)
            }
            finished.signal()
        }.start()
    }

    func awaitTwoMoreRounds() {
        let mark = rounds.load(ordering: .acquiring)
        Reliability.wait(for: "two notify rounds") { rounds.load(ordering: .acquiring) >= mark + 2 }
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
        finished.wait()
    }
}

// MARK: - The churn worker

/// Totals the eight threads share.
private final class SharedLedger: Sendable {
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
private struct ChurnWorker {
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

// MARK: Protocol observers for the churn

/// The shared protocol: every thread adds, removes and notifies its observers.
protocol ChurnShared: AnyObject {
    func sharedCall()
}

/// One protocol per thread (protocols are keyed by type, so a thread's own protocol is the way
/// to give it registrations nobody else touches).
protocol ChurnP0: AnyObject { func churn() }
protocol ChurnP1: AnyObject { func churn() }
protocol ChurnP2: AnyObject { func churn() }
protocol ChurnP3: AnyObject { func churn() }
protocol ChurnP4: AnyObject { func churn() }
protocol ChurnP5: AnyObject { func churn() }
protocol ChurnP6: AnyObject { func churn() }
protocol ChurnP7: AnyObject { func churn() }

/// An observer of every churn protocol that counts its calls and records calls made once its
/// deinit started.
final class ChurnObserver: ChurnShared, ChurnP0, ChurnP1, ChurnP2, ChurnP3, ChurnP4, ChurnP5, ChurnP6, ChurnP7,
    @unchecked Sendable
{
    // @unchecked: `token` is only touched by the thread that owns the observer; the rest is
    // immutable or atomic (the deinit may run on a notifying thread).
    let live: Reliability.Tally
    let violations: Reliability.Tally
    let calls = Reliability.Tally()
    let deinitStarted = Atomic<Bool>(false)
    let onShared: @Sendable () -> Void
    var token: Subscription?

    init(live: Reliability.Tally, violations: Reliability.Tally, onShared: @escaping @Sendable () -> Void = {}) {
        self.live = live
        self.violations = violations
        self.onShared = onShared
        live.up()
    }

    func churn() {
        if deinitStarted.load(ordering: .acquiring) { violations.up() }
        calls.up()
    }

    func sharedCall() {
        if deinitStarted.load(ordering: .acquiring) { violations.up() }
        calls.up()
        onShared()
    }

    deinit {
        deinitStarted.store(true, ordering: .releasing)
        live.down()
    }
}

/// The protocol-observer API for one of the `ChurnP…` protocols, behind closures.
struct ChurnProtocolKey: Sendable {
    let add: @Sendable (PostCenter, ChurnObserver) -> Void
    let observe: @Sendable (PostCenter, ChurnObserver) -> Subscription
    let remove: @Sendable (PostCenter, ChurnObserver) -> Void
    let notify: @Sendable (PostCenter) -> Int
    let observers: @Sendable (PostCenter) -> [AnyObject]

    static func make<P>(_ type: P.Type, _ cast: @escaping @Sendable (ChurnObserver) -> P) -> ChurnProtocolKey {
        ChurnProtocolKey(
            add: { $0.addObserver(cast($1), for: P.self) },
            observe: { $0.observe(cast($1), for: P.self) },
            remove: { $0.removeObserver(cast($1), for: P.self) },
            notify: { center in center.notify(P.self) { ($0 as AnyObject as! ChurnObserver).churn() } },
            observers: { $0.observers(for: P.self).map { $0 as AnyObject } })
    }

    static let perThread: [ChurnProtocolKey] = [
        make((any ChurnP0).self) { $0 }, make((any ChurnP1).self) { $0 }, make((any ChurnP2).self) { $0 },
        make((any ChurnP3).self) { $0 }, make((any ChurnP4).self) { $0 }, make((any ChurnP5).self) { $0 },
        make((any ChurnP6).self) { $0 }, make((any ChurnP7).self) { $0 },
    ]
}

/// A thread's model of one observer of its own protocol.
private struct PrivateProtocolObserver {
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

private struct PrivateSub {
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

private struct SharedSub {
    let probe: Reliability.CallProbe
    var token: Subscription?
    var observer: Reliability.DyingObserver?
}

// MARK: - Cancellation races

/// How the raced subscription is made and posted to.
enum RaceStyle: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case plain, typed, selector, queued, senderFiltered, mainActor
    var testDescription: String { rawValue }

    /// 2,000 rounds for the plain handler, 600 for each other style (they share the engine's
    /// cancellation path and differ only in how the call is made).
    var rounds: Int { Reliability.scaled(self == .plain ? 2000 : 600, minimum: 100) }
}

/// Who holds the observer's token in the observer race.
enum ObserverTokenOwner: String, Sendable, CustomTestStringConvertible {
    case observer, test
    var testDescription: String { rawValue }
}

/// A thread that posts to `name` in a loop (plain, typed and from `sender`, so every style of
/// subscription gets deliveries), counting complete rounds in `posts`, until `stop()`.
private final class PosterThread: Sendable {
    let center: PostCenter
    let name: String
    let sender = RaceSender()
    let posts = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init(center: PostCenter, name: String) {
        self.center = center
        self.name = name
    }

    func start() {
        Thread { [self] in
            let topic = Topic<Int>(name)
            while !stopped.load(ordering: .acquiring) {
                center.post(name, flag: "plain")
                center.post(topic, 1)
                center.post(name, PostObject(flag: "from"), from: sender)
                posts.add(1, ordering: .acquiringAndReleasing)
            }
            finished.signal()
        }.start()
    }

    /// Waits until the poster has completed two more rounds, so at least one whole round of
    /// posts started after this call.
    func awaitTwoMoreRounds() {
        let mark = posts.load(ordering: .acquiring)
        Reliability.wait(for: "two post rounds") { posts.load(ordering: .acquiring) >= mark + 2 }
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
        finished.wait()
    }
}

private final class RaceSender: Sendable {}

/// Keeps a handler busy for a moment, so that `cancel()` often lands while it runs.
@inline(never)
private func busyWork(_ n: Int) -> Int {
    var x = 0
    for i in 0..<n { x = x &+ i &* 31 }
    return x
}

/// An observer whose method reports to a probe.
private final class RaceObserver: Sendable {
    let probe: Reliability.CallProbe
    let gate: RaceGate
    init(probe: Reliability.CallProbe, gate: RaceGate) {
        self.probe = probe
        self.gate = gate
    }
    func receive(_ post: PostObject) {
        probe.enter()
        gate.pass()
        probe.exit()
    }
}

/// What a raced handler does: a little work, or, when the gate `holds`, wait until the test
/// thread is about to end the subscription and then a longer piece of work, so that the end
/// lands while the handler runs and `cancel()` must wait for it.
private final class RaceGate: Sendable {
    let holds: Bool
    private let opened = Atomic<Bool>(false)

    init(holds: Bool) { self.holds = holds }

    func pass() {
        guard holds else {
            _ = busyWork(100)
            return
        }
        while !opened.load(ordering: .acquiring) { sched_yield() }
        _ = busyWork(2000)
    }

    func open() { opened.store(true, ordering: .releasing) }
}

/// Rounds of: subscribe, let the poster thread deliver, end the subscription while it is being
/// delivered, then watch a whole round of posts for late starts.
private struct CancelRace {
    enum End { case cancel, dropToken }

    struct Result {
        var lateStarts = 0
        var runningAtReturn = 0
        var leftovers = 0
        var liveCaptures = 0
    }

    let style: RaceStyle
    let end: End

    func run(rounds: Int) -> Result {
        let center = PostCenter()
        let name = "race"
        let poster = PosterThread(center: center, name: name)
        let queue = DispatchQueue(label: "race.queue")
        let captures = Reliability.Tally()
        var random = Reliability.Random(seed: 0xCA_9CE1 &+ UInt64(RaceStyle.allCases.firstIndex(of: style)!))
        var result = Result()
        poster.start()
        for round in 0..<rounds {
            let probe = Reliability.CallProbe()
            let capture = Reliability.Capture(captures)
            // Every other round the handler holds until the end is requested, so that the end
            // surely lands while a handler runs; the other rounds let it land anywhere.
            let gate = RaceGate(holds: round % 2 == 0)
            let handler: @Sendable () -> Void = {
                withExtendedLifetime(capture) {}
                probe.enter()
                gate.pass()
                probe.exit()
            }
            var observer: RaceObserver? = nil
            var token: Subscription?
            switch style {
            case .plain: token = center.subscribe(name) { _ in handler() }
            case .typed: token = center.subscribe(Topic<Int>(name)) { _ in handler() }
            case .selector:
                observer = RaceObserver(probe: probe, gate: gate)
                token = center.register(name, observer: observer!, selector: RaceObserver.receive)
            case .queued: token = center.subscribe(name, delivery: .queue(queue)) { _ in handler() }
            case .senderFiltered: token = center.subscribe(name, from: poster.sender) { _ in handler() }
            case .mainActor: token = center.subscribe(name, delivery: .mainActor) { _ in handler() }
            }
            Reliability.wait(for: "the first \(style) delivery") { probe.calls.load(ordering: .relaxed) > 0 }
            for _ in 0..<random.below(4) { sched_yield() }
            gate.open()
            switch end {
            case .cancel: token!.cancel()
            case .dropToken: token = nil
            }
            // A deinit does not wait: a call under way (or past its check) may still finish.
            if end == .cancel && probe.close() { result.runningAtReturn += 1 }
            poster.awaitTwoMoreRounds()
            // Let deliveries scheduled before the end reach their queue: they must be dropped.
            if style == .queued { queue.sync {} }
            if style == .mainActor && !Thread.isMainThread { DispatchQueue.main.sync {} }
            if end == .cancel {
                result.lateStarts += probe.lateStarts.load(ordering: .relaxed)
            } else {
                // Every post counted now started after the deinit: none may reach the handler.
                let settled = probe.calls.load(ordering: .relaxed)
                poster.awaitTwoMoreRounds()
                if style == .queued { queue.sync {} }
                if style == .mainActor && !Thread.isMainThread { DispatchQueue.main.sync {} }
                result.lateStarts += probe.calls.load(ordering: .relaxed) - settled
            }
            token = nil
            observer = nil
        }
        poster.stop()
        result.leftovers = center.subscriptionCount(for: name)
        _ = eventually { captures.current == 0 }  // dropped tokens' closures go with the next batch
        result.liveCaptures = captures.current
        return result
    }
}
