import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Subscriptions

// MARK: Protocols and observers used by the tests

/// The protocol of most tests: one required method and one optional (defaulted) one.
protocol Greeter: AnyObject {
    func greet(_ word: String)
    func farewell()
}

extension Greeter {
    /// The default that makes `farewell()` optional.
    func farewell() {}
}

/// A second protocol, to show that registrations are per protocol.
protocol Closer: AnyObject {
    func close()
}

/// Records calls in a shared log as "name:word"; counts live instances in `life`.
final class Named: Greeter, Closer {
    let name: String
    let log: Log
    let life: Life?
    init(_ name: String, _ log: Log, life: Life? = nil) {
        self.name = name
        self.log = log
        self.life = life
        life?.alive += 1
    }
    deinit { life?.alive -= 1 }
    func greet(_ word: String) { log.append("\(name):\(word)") }
    func close() { log.append("\(name):close") }
}

/// Implements the optional method.
final class Polite: Greeter {
    let log: Log
    init(_ log: Log) { self.log = log }
    func greet(_ word: String) { log.append("polite:\(word)") }
    func farewell() { log.append("polite:farewell") }
}

/// Keeps a dead object's memory allocated (an unowned reference), so its address is not reused.
struct Zombie {
    unowned let object: AnyObject
    init(_ object: AnyObject) { self.object = object }
}

/// A single-threaded call log.
final class Log {
    var entries: [String] = []
    func append(_ entry: String) { entries.append(entry) }
}

/// An instance counter: observers increment it in `init` and decrement it in `deinit`.
final class Life {
    var alive = 0
}

/// A protocol that a value type can conform to (it is not class-bound).
protocol Pinger {
    func ping()
}

/// A misuse that protocol observers reject: a struct observer.
struct ValuePinger: Pinger {
    func ping() {}
}

final class ClassPinger: Pinger {
    var pings = 0
    func ping() { pings += 1 }
}

/// Two protocols with the same name, `Ping`, in different scopes (the Identity guarantee of
/// protocol observers).
enum Left {
    protocol Ping: AnyObject { func ping() -> String }
}

enum Right {
    protocol Ping: AnyObject { func ping() -> String }
}

final class LeftPinger: Left.Ping {
    func ping() -> String { "left" }
}

final class RightPinger: Right.Ping {
    func ping() -> String { "right" }
}

/// Counts calls from its own thread and from all threads (the Threads guarantee of protocol
/// observers).
protocol Tally: AnyObject {
    func hit(from thread: Int)
}

final class TallyObserver: Tally, Sendable {
    let owner: Int
    let index: Int
    let own = Atomic<Int>(0)
    let total = Atomic<Int>(0)
    init(owner: Int, index: Int) {
        self.owner = owner
        self.index = index
    }
    func hit(from thread: Int) {
        total.add(1, ordering: .relaxed)
        if thread == owner { own.add(1, ordering: .relaxed) }
    }
}

/// An observer whose deinit calls back into the center (user code in a deinit).
final class ReentrantDeinit: Greeter {
    let center: PostCenter
    let log: Log
    init(_ center: PostCenter, _ log: Log) {
        self.center = center
        self.log = log
    }
    deinit {
        center.removeObserver(self)
        log.append("deinit, others: \(center.notify(Greeter.self) { _ in })")
    }
    func greet(_ word: String) { log.append("reentrant:\(word)") }
}

// MARK: Tests

@Suite("Protocol-keyed observers")
struct ProtocolObserverTests {
    // MARK: 1. Weak references

    @Test func deallocatedObserverIsNeverCalledNorReturnedAndItsSlotIsReclaimed() {
        let center = PostCenter()
        let log = Log()
        let life = Life()
        let a = Named("a", log, life: life)
        var b: Named? = Named("b", log, life: life)
        weak var weakB: Named?
        weakB = b
        center.addObserver(a, for: Greeter.self)
        center.addObserver(b!, for: Greeter.self)
        #expect(center._protocolSlotCount(for: Greeter.self) == 2)

        b = nil
        #expect(weakB == nil, "the center must not retain observers")
        #expect(life.alive == 1)
        #expect(center.notify(Greeter.self) { $0.greet("hi") } == 1)
        #expect(log.entries == ["a:hi"])
        #expect(center._protocolSlotCount(for: Greeter.self) == 1, "notify reclaims the dead observer's slot")
        #expect(center.observers(for: Greeter.self).map { ($0 as! Named).name } == ["a"])
    }

    @Test func observersForSkipsAndReclaimsDeallocatedObservers() {
        let center = PostCenter()
        let log = Log()
        let a = Named("a", log)
        center.addObserver(Named("gone", log), for: Greeter.self)
        center.addObserver(a, for: Greeter.self)
        #expect(center.observers(for: Greeter.self).map { ($0 as! Named).name } == ["a"])
        #expect(center._protocolSlotCount(for: Greeter.self) == 1)
    }

    @Test func deadObserversSlotsStayBoundedWithoutAnyNotify() {
        let center = PostCenter()
        let log = Log()
        let keeper = Named("keeper", log)
        center.addObserver(keeper, for: Greeter.self)
        // Unowned references keep the dead observers' memory allocated, so no new observer
        // reuses an address: only the sweep on insertion can find the dead entries.
        var zombies: [Zombie] = []
        for i in 0..<1_000 {
            let temporary = Named("t\(i)", log)
            center.addObserver(temporary, for: Greeter.self)
            zombies.append(Zombie(temporary))
        }  // each temporary died at the end of its iteration, never removed nor notified
        #expect(center._protocolSlotCount(for: Greeter.self) <= 16)
        #expect(center.notify(Greeter.self) { $0.greet("x") } == 1)
        #expect(log.entries == ["keeper:x"])
        withExtendedLifetime(zombies) {}
    }

    @Test func newObserverAtTheAddressOfADeadOneIsRegistered() {
        // Allocation often reuses the address of the observer that just died, so the new
        // observer has the same ObjectIdentifier as a stale entry: it must not be mistaken for
        // a duplicate.
        let center = PostCenter()
        let log = Log()
        let keeper = Named("keeper", log)
        center.addObserver(keeper, for: Greeter.self)
        var reached = 0
        for i in 0..<500 {
            let temporary = Named("t\(i)", log)
            center.addObserver(temporary, for: Greeter.self)
            reached += center.notify(Greeter.self) { _ in }
        }
        #expect(reached == 1_000)
    }

    @Test func observerIsKeptAliveDuringItsOwnCall() {
        let center = PostCenter()
        let log = Log()
        let life = Life()
        var holder: Named? = Named("a", log, life: life)
        center.addObserver(holder!, for: Greeter.self)
        let n = center.notify(Greeter.self) { observer in
            holder = nil  // the last outside reference goes while the observer runs
            observer.greet("still here")
        }
        #expect(n == 1)
        #expect(log.entries == ["a:still here"])
        #expect(life.alive == 0, "released once its call is over")
    }

    // MARK: 2. Order, duplicates, last observer

    @Test func notificationOrderIsRegistrationOrder() {
        let center = PostCenter()
        let log = Log()
        let (a, b, c) = (Named("a", log), Named("b", log), Named("c", log))
        for o in [a, b, c] { center.addObserver(o, for: Greeter.self) }
        #expect(center.notify(Greeter.self) { $0.greet("1") } == 3)
        #expect(log.entries == ["a:1", "b:1", "c:1"])

        center.removeObserver(b, for: Greeter.self)
        center.addObserver(b, for: Greeter.self)  // re-registering goes to the end
        center.notify(Greeter.self) { $0.greet("2") }
        #expect(log.entries.suffix(3) == ["a:2", "c:2", "b:2"])
        #expect(center.observers(for: Greeter.self).map { ($0 as! Named).name } == ["a", "c", "b"])
    }

    @Test func addingTheSameObserverTwiceIsANoOpThatKeepsItsPlace() {
        let center = PostCenter()
        let log = Log()
        let (a, b) = (Named("a", log), Named("b", log))
        center.addObserver(a, for: Greeter.self)
        center.addObserver(b, for: Greeter.self)
        center.addObserver(a, for: Greeter.self)
        #expect(center.notify(Greeter.self) { $0.greet("x") } == 2)
        #expect(log.entries == ["a:x", "b:x"])
        center.removeObserver(a, for: Greeter.self)  // one removal undoes the one registration
        #expect(center.notify(Greeter.self) { _ in } == 1)
    }

    @Test func theLastObserverCanBeRemoved() {
        let center = PostCenter()
        let log = Log()
        let a = Named("a", log)
        center.addObserver(a, for: Greeter.self)
        center.removeObserver(a, for: Greeter.self)
        #expect(center.notify(Greeter.self) { $0.greet("x") } == 0)
        #expect(center.observers(for: Greeter.self).isEmpty)
        #expect(center._protocolSlotCount(for: Greeter.self) == 0)
        #expect(log.entries.isEmpty)

        center.addObserver(a, for: Greeter.self)
        #expect(center.notify(Greeter.self) { $0.greet("again") } == 1)
        #expect(log.entries == ["a:again"])
    }

    // MARK: 3. notify: count and snapshot

    @Test func notifyReturnsHowManyObserversItCalled() {
        let center = PostCenter()
        let log = Log()
        #expect(center.notify(Greeter.self) { $0.greet("nobody") } == 0)
        let observers = (0..<5).map { Named("o\($0)", log) }
        for o in observers { center.addObserver(o, for: Greeter.self) }
        #expect(center.notify(Greeter.self) { $0.greet("x") } == 5)
        #expect(log.entries.count == 5)
    }

    @Test func observerAddedDuringNotifyIsNotCalledByIt() {
        let center = PostCenter()
        let log = Log()
        let (a, b, late) = (Named("a", log), Named("b", log), Named("late", log))
        center.addObserver(a, for: Greeter.self)
        center.addObserver(b, for: Greeter.self)
        let n = center.notify(Greeter.self) { observer in
            if observer === a { center.addObserver(late, for: Greeter.self) }
            observer.greet("1")
        }
        #expect(n == 2)
        #expect(log.entries == ["a:1", "b:1"])
        #expect(center.notify(Greeter.self) { $0.greet("2") } == 3)
        #expect(log.entries.suffix(3) == ["a:2", "b:2", "late:2"])
    }

    @Test func observerRemovedDuringNotifyIsNotCalledAfterRemoval() {
        let center = PostCenter()
        let log = Log()
        let (a, b, c, d) = (Named("a", log), Named("b", log), Named("c", log), Named("d", log))
        for o in [a, b, c, d] { center.addObserver(o, for: Greeter.self) }
        let n = center.notify(Greeter.self) { observer in
            observer.greet("x")
            if observer === a { center.removeObserver(c, for: Greeter.self) }  // a later one
            if observer === b { center.removeObserver(b) }  // itself, during its own call
        }
        #expect(n == 3)
        #expect(log.entries == ["a:x", "b:x", "d:x"])
        #expect(center.observers(for: Greeter.self).map { ($0 as! Named).name } == ["a", "d"])
    }

    @Test func observerRemovedAndReaddedDuringNotifyIsNotCalledByIt() {
        let center = PostCenter()
        let log = Log()
        let (a, b) = (Named("a", log), Named("b", log))
        center.addObserver(a, for: Greeter.self)
        center.addObserver(b, for: Greeter.self)
        let n = center.notify(Greeter.self) { observer in
            observer.greet("x")
            if observer === a {
                center.removeObserver(b, for: Greeter.self)
                center.addObserver(b, for: Greeter.self)  // a new registration, after the snapshot
            }
        }
        #expect(n == 1)
        #expect(log.entries == ["a:x"])
    }

    // MARK: 4. Optional methods

    @Test func methodWithADefaultImplementationIsOptional() {
        let center = PostCenter()
        let log = Log()
        let plain = Named("plain", log)  // does not implement farewell()
        let polite = Polite(log)  // does
        center.addObserver(plain, for: Greeter.self)
        center.addObserver(polite, for: Greeter.self)
        #expect(center.notify(Greeter.self) { $0.farewell() } == 2)
        #expect(log.entries == ["polite:farewell"])
        #expect(center.notify(Greeter.self) { $0.greet("hi") } == 2)
        #expect(log.entries == ["polite:farewell", "plain:hi", "polite:hi"])
    }

    // MARK: 5. Removal from one protocol or all

    @Test func removeObserverRemovesFromEveryProtocol() {
        let center = PostCenter()
        let log = Log()
        let (a, b) = (Named("a", log), Named("b", log))
        for o in [a, b] {
            center.addObserver(o, for: Greeter.self)
            center.addObserver(o, for: Closer.self)
        }
        center.removeObserver(a)
        #expect(center.notify(Greeter.self) { $0.greet("x") } == 1)
        #expect(center.notify(Closer.self) { $0.close() } == 1)
        #expect(log.entries == ["b:x", "b:close"])
    }

    @Test func removeObserverForOneProtocolKeepsTheOthers() {
        let center = PostCenter()
        let log = Log()
        let a = Named("a", log)
        center.addObserver(a, for: Greeter.self)
        center.addObserver(a, for: Closer.self)
        center.removeObserver(a, for: Closer.self)
        #expect(center.notify(Closer.self) { $0.close() } == 0)
        #expect(center.notify(Greeter.self) { $0.greet("x") } == 1)
        #expect(log.entries == ["a:x"])
    }

    @Test func removingWhatIsNotRegisteredDoesNothing() {
        let center = PostCenter()
        let log = Log()
        let (a, stranger) = (Named("a", log), Named("stranger", log))
        center.addObserver(a, for: Greeter.self)
        center.removeObserver(stranger)
        center.removeObserver(stranger, for: Greeter.self)
        center.removeObserver(a, for: Closer.self)  // registered, but for another protocol
        center.removeObserver(ValuePinger(), for: Pinger.self)  // a value can never be registered
        center.removeObserver(a, for: Closer.self)  // twice
        #expect(center.notify(Greeter.self) { $0.greet("x") } == 1)
        #expect(log.entries == ["a:x"])
    }

    // MARK: 6. Keyed by type identity

    @Test func protocolsWithTheSameNameInDifferentScopesStayApart() {
        // Keyed by name, these two would collide: their names are the same string.
        #expect(String(describing: Left.Ping.self) == String(describing: Right.Ping.self))
        let center = PostCenter()
        let (left, right) = (LeftPinger(), RightPinger())
        center.addObserver(left, for: Left.Ping.self)
        center.addObserver(right, for: Right.Ping.self)
        var heard: [String] = []
        #expect(center.notify(Left.Ping.self) { heard.append($0.ping()) } == 1)
        #expect(center.notify(Right.Ping.self) { heard.append($0.ping()) } == 1)
        #expect(heard == ["left", "right"])
        center.removeObserver(left, for: Left.Ping.self)
        #expect(center.observers(for: Right.Ping.self).count == 1)
    }

    @Test func theKeyIsExactlyTheTypePassed() {
        let center = PostCenter()
        let log = Log()
        let a = Named("a", log)
        center.addObserver(a, for: Named.self)  // a class type, not the protocol
        #expect(center.notify(Greeter.self) { $0.greet("x") } == 0)
        #expect(center.notify(Named.self) { $0.greet("y") } == 1)
        #expect(log.entries == ["a:y"])
    }

    @Test func nonClassBoundProtocolsWorkWithClassObservers() {
        let center = PostCenter()
        let pinger = ClassPinger()
        center.addObserver(pinger, for: Pinger.self)
        #expect(center.notify(Pinger.self) { $0.ping() } == 1)
        #expect(pinger.pings == 1)
        #expect((center.observers(for: Pinger.self).first as? ClassPinger) === pinger)
    }

    @Test func boxedExistentialsWorkToo() {
        // `any Error` stores its value in a box, so the entry cannot reuse the existential's
        // bits and falls back to a dynamic cast. The behaviour must be the same.
        final class ErrorObject: Error { let seen = Atomic<Int>(0) }
        let center = PostCenter()
        let object = ErrorObject()
        center.addObserver(object as any Error, for: (any Error).self)
        #expect(center.notify((any Error).self) { ($0 as? ErrorObject)?.seen.add(1, ordering: .relaxed) } == 1)
        #expect(object.seen.load(ordering: .relaxed) == 1)
        center.removeObserver(object)
        #expect(center.notify((any Error).self) { _ in } == 0)
    }

    // MARK: 7. Values are rejected

    @Test func registeringAStructStopsWithAMessageNamingTheType() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            PostCenter().addObserver(ValuePinger(), for: Pinger.self)
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("addObserver(_:for:): ValuePinger is not a class"))
        #expect(message.contains("Make ValuePinger a class"))
    }

    @Test func observingAStructStopsWithAMessageNamingTheType() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = PostCenter().observe(ValuePinger(), for: Pinger.self)
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("observe(_:for:): ValuePinger is not a class"))
    }

    // MARK: 8. Threads and re-entrancy

    @Test func concurrentAddRemoveNotifyFromEightThreadsKeepsExactCounts() throws {
        let center = PostCenter()
        let threads = 8
        let rounds = 300
        let returned = Atomic<Int>(0)
        // Recorders, not Mutexes: eight threads add to them, and ThreadSanitizer does not see a
        // Mutex's futex on Linux (see `Recorder`).
        let observers = Recorder<TallyObserver>()
        let kept = Recorder<TallyObserver>()

        DispatchQueue.concurrentPerform(iterations: threads) { t in
            var mine: [TallyObserver] = []
            var keep: [TallyObserver] = []
            for i in 0..<rounds {
                let o = TallyObserver(owner: t, index: i)
                mine.append(o)
                center.addObserver(o, for: Tally.self)
                center.addObserver(o, for: Tally.self)  // no-op
                returned.add(center.notify(Tally.self) { $0.hit(from: t) }, ordering: .relaxed)
                if i % 10 == 0 {
                    keep.append(o)
                } else if i % 2 == 0 {
                    center.removeObserver(o, for: Tally.self)
                } else {
                    center.removeObserver(o)
                }
                returned.add(center.notify(Tally.self) { $0.hit(from: t) }, ordering: .relaxed)
            }
            for o in mine { observers.append(o) }
            for o in keep { kept.append(o) }
        }

        let all = observers.values
        let keptObservers = kept.values
        #expect(all.count == threads * rounds)
        // Each observer is called by its own thread's notifies made while it was registered:
        // once if removed in its round; if kept, twice in its round and twice in each later one.
        let wrongOwnCounts = all.filter { o in
            let expected = o.index % 10 == 0 ? 2 + 2 * (rounds - 1 - o.index) : 1
            return o.own.load(ordering: .relaxed) != expected
        }
        #expect(wrongOwnCounts.count == 0)
        // Every call that notify reported happened, and no other.
        #expect(all.reduce(0) { $0 + $1.total.load(ordering: .relaxed) } == returned.load(ordering: .relaxed))
        // Exactly the kept observers remain, each thread's in its registration order.
        let remaining = center.observers(for: Tally.self).map { $0 as! TallyObserver }
        #expect(Set(remaining.map(ObjectIdentifier.init)) == Set(keptObservers.map(ObjectIdentifier.init)))
        for t in 0..<threads {
            let indices = remaining.filter { $0.owner == t }.map(\.index)
            #expect(indices == indices.sorted())
            #expect(indices.count == rounds / 10)
        }
        #expect(center.notify(Tally.self) { _ in } == threads * rounds / 10)
        #expect(center._protocolSlotCount(for: Tally.self) <= 2 * keptObservers.count + 1)
    }

    @Test func removingAndAddingFromInsideNotifyDoesNotDeadlock() {
        let center = PostCenter()
        let log = Log()
        let (a, b) = (Named("a", log), Named("b", log))
        center.addObserver(a, for: Greeter.self)
        center.addObserver(b, for: Greeter.self)
        center.addObserver(a, for: Closer.self)
        var inner: [Int] = []
        let n = center.notify(Greeter.self) { observer in
            center.removeObserver(observer, for: Greeter.self)
            center.removeObserver(a)
            center.addObserver(observer as! Named, for: Closer.self)
            inner.append(center.observers(for: Greeter.self).count)
            inner.append(center.notify(Closer.self) { $0.close() })
            let token = center.observe(observer as! Named, for: Closer.self)
            token.cancel()
            observer.greet("x")
        }
        #expect(n == 2)
        #expect(inner == [1, 1, 0, 1])
        #expect(log.entries == ["a:close", "a:x", "b:close", "b:x"])
        #expect(center.notify(Greeter.self) { _ in } == 0)
        #expect(center.notify(Closer.self) { _ in } == 0)  // the tokens' cancel removed them
    }

    @Test func noLockIsHeldWhileTheBodyRuns() {
        // Another thread uses the center while the body runs and the body waits for it: with a
        // lock held across the body this would deadlock.
        let center = PostCenter()
        let log = Log()
        let a = Named("a", log)
        center.addObserver(a, for: Greeter.self)
        let otherThreadResult = SharedInt()
        let n = center.notify(Greeter.self) { _ in
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                let local = Probe()
                center.addObserver(local, for: Closer.self)
                otherThreadResult.value.store(
                    center.notify(Closer.self) { _ in } + center.notify(Greeter.self) { _ in }, ordering: .relaxed)
                center.removeObserver(local)
                done.signal()
            }
            done.wait()
        }
        #expect(n == 1)
        #expect(otherThreadResult.value.load(ordering: .relaxed) == 2)
    }

    @Test func observerDeinitRunsOutsideTheLock() {
        // The last reference to an observer is released by notify, after its call: its deinit
        // re-enters the center (removeObserver and notify), which must not deadlock.
        let center = PostCenter()
        let log = Log()
        let b = Named("b", log)
        var holder: ReentrantDeinit? = ReentrantDeinit(center, log)
        center.addObserver(holder!, for: Greeter.self)
        center.addObserver(b, for: Greeter.self)
        let n = center.notify(Greeter.self) { observer in
            observer.greet("x")
            if observer is ReentrantDeinit { holder = nil }
        }
        #expect(n == 2)
        #expect(log.entries == ["reentrant:x", "deinit, others: 1", "b:x"])
    }

    // MARK: Actors

    @Test @MainActor func mainActorClassesRegisterThemselves() {
        let center = PostCenter()
        let isolated = IsolatedScreen(center)
        let mainProtocol = MainScreen(center)
        #expect(center.notify(Greeter.self) { $0.greet("hi") } == 1)
        #expect(center.notify(MainObserver.self) { $0.refresh() } == 1)
        #expect(isolated.greetings == ["hi"])
        #expect(mainProtocol.refreshes == 1)
    }

    // MARK: Tokens

    @Test func cancellingATokenRemovesTheObserverForThatProtocolOnly() {
        let center = PostCenter()
        let log = Log()
        let a = Named("a", log)
        let token = center.observe(a, for: Greeter.self)
        center.addObserver(a, for: Closer.self)
        #expect(token.isActive)
        #expect(center.notify(Greeter.self) { _ in } == 1)
        token.cancel()
        token.cancel()  // idempotent
        #expect(!token.isActive)
        #expect(center.notify(Greeter.self) { _ in } == 0)
        #expect(center.notify(Closer.self) { _ in } == 1)
    }

    @Test func droppingTheTokenRemovesTheObserver() {
        let center = PostCenter()
        let log = Log()
        let a = Named("a", log)
        var token: Subscription? = center.observe(a, for: Greeter.self)
        #expect(center.notify(Greeter.self) { _ in } == 1)
        token = nil
        #expect(token == nil)
        #expect(center.notify(Greeter.self) { _ in } == 0)
    }

    @Test func pausedTokenIsSkippedAndKeepsItsPlace() {
        let center = PostCenter()
        let log = Log()
        let (a, b) = (Named("a", log), Named("b", log))
        let tokenA = center.observe(a, for: Greeter.self)
        let tokenB = center.observe(b, for: Greeter.self)
        tokenA.pause()
        #expect(!tokenA.isActive)
        #expect(center.notify(Greeter.self) { $0.greet("1") } == 1)
        #expect(center.observers(for: Greeter.self).count == 1)
        tokenA.resume()
        #expect(center.notify(Greeter.self) { $0.greet("2") } == 2)
        #expect(log.entries == ["b:1", "a:2", "b:2"])
        withExtendedLifetime(tokenB) {}
    }

    @Test func pausingDuringNotifySkipsTheLaterObserver() {
        let center = PostCenter()
        let log = Log()
        let (a, b) = (Named("a", log), Named("b", log))
        center.addObserver(a, for: Greeter.self)
        let tokenB = center.observe(b, for: Greeter.self)
        let n = center.notify(Greeter.self) { observer in
            observer.greet("x")
            tokenB.pause()
        }
        #expect(n == 1)
        #expect(log.entries == ["a:x"])
    }

    @Test func tokenIsActiveReflectsRemovalPauseDeathAndCenterLifetime() {
        let log = Log()
        var center: PostCenter? = PostCenter()
        let a = Named("a", log)
        let token = center!.observe(a, for: Greeter.self)
        #expect(token.isActive)
        center!.removeObserver(a, for: Greeter.self)
        #expect(!token.isActive)
        token.resume()  // does not revive a removed registration
        #expect(!token.isActive)
        center!.addObserver(a, for: Greeter.self)  // a new registration, not the token's
        #expect(!token.isActive)
        token.cancel()  // must not remove the new registration
        #expect(center!.notify(Greeter.self) { _ in } == 1)

        var b: Named? = Named("b", log)
        let tokenB = center!.observe(b!, for: Greeter.self)
        #expect(tokenB.isActive)
        b = nil
        #expect(!tokenB.isActive)

        let tokenA = center!.observe(a, for: Closer.self)
        #expect(tokenA.isActive)
        center = nil
        #expect(!tokenA.isActive)
        tokenA.cancel()  // harmless after the center went away
        tokenA.pause()
    }

    @Test func tokenForAnAlreadyRegisteredObserverControlsThatRegistration() {
        let center = PostCenter()
        let log = Log()
        let a = Named("a", log)
        center.addObserver(a, for: Greeter.self)
        let token = center.observe(a, for: Greeter.self)
        #expect(center.notify(Greeter.self) { _ in } == 1)
        token.cancel()
        #expect(center.notify(Greeter.self) { _ in } == 0)
    }

    @Test func observerOwningItsTokenIsReleased() {
        let center = PostCenter()
        let life = Life()
        var owner: TokenOwner? = TokenOwner(center, life)
        weak var weakOwner: TokenOwner?
        weakOwner = owner
        #expect(center.notify(Greeter.self) { _ in } == 1)
        owner = nil
        #expect(weakOwner == nil)
        #expect(life.alive == 0)
        #expect(center.notify(Greeter.self) { _ in } == 0)
        #expect(center._protocolSlotCount(for: Greeter.self) == 0)
    }
}

// MARK: Observers for the actor and token tests

/// A main-actor class conforming to a nonisolated protocol through an isolated conformance.
@MainActor final class IsolatedScreen {
    var greetings: [String] = []
    init(_ center: PostCenter) {
        center.addObserver(self, for: Greeter.self)
    }
    func greet(_ word: String) { greetings.append(word) }
}

extension IsolatedScreen: @MainActor Greeter {}

/// A main-actor protocol.
@MainActor protocol MainObserver: AnyObject {
    func refresh()
}

@MainActor final class MainScreen: MainObserver {
    var refreshes = 0
    init(_ center: PostCenter) {
        center.addObserver(self, for: MainObserver.self)
    }
    func refresh() { refreshes += 1 }
}

/// Keeps its own token: no reference cycle, since the token does not retain the observer.
final class TokenOwner: Greeter {
    var token: Subscription?
    let life: Life
    init(_ center: PostCenter, _ life: Life) {
        self.life = life
        life.alive += 1
        token = center.observe(self, for: Greeter.self)
    }
    deinit { life.alive -= 1 }
    func greet(_ word: String) {}
}

/// A throwaway observer for the thread test.
final class Probe: Closer, Sendable {
    func close() {}
}

/// An atomic integer that escaping closures can capture.
final class SharedInt: Sendable {
    let value = Atomic<Int>(-1)
}
