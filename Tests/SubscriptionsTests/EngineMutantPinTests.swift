import Dispatch
import Foundation
import SubscriptionsTestSupport
import Synchronization
import Testing

@testable import Subscriptions

/// Tests that pin mechanisms of the lock-free engine (`Sources/Subscriptions/Engine/DESIGN.md`)
/// which the rest of the suite did not reach: each was written against a mutant of
/// `Scripts/mutants.txt` that survived the suite, and states the guarantee of the Guarantees
/// article that the mechanism keeps. `@testable` is used where no public API can tell (slot
/// counts, which names share a stripe).
///
/// No assertion depends on timing; waits are bounded (a deadlock fails instead of hanging), and
/// semaphores only order the threads.
@Suite("Engine mechanism pins (orphans, grace periods, one-shot slots, fences)")
struct EngineMutantPinTests {
    // MARK: Guarantee 8: a cancel waits only for the calls of its own handler

    /// Thread T1 runs handler B; thread T2 is inside a post of another name whose handler waits
    /// for the canceller. `cancel()` of B from a third thread must wait for T1's call of B, and for
    /// nothing else: waiting for T2 too (a thread merely inside some post) would deadlock with it.
    /// B returns only once the canceller is seen waiting (its record's `waitingFor`), so the
    /// canceller is sure to reach its wait loop; T2 gives up after 10 s and records the deadlock.
    @Test func cancelWaitingForItsRunningHandlerDoesNotAlsoWaitForOtherPosts() {
        let center = PostCenter()
        let bRunning = DispatchSemaphore(value: 0)
        let t2Inside = DispatchSemaphore(value: 0)
        let cancelReturned = DispatchSemaphore(value: 0)
        let t2Done = DispatchSemaphore(value: 0)
        let t1Done = DispatchSemaphore(value: 0)
        let t2TimedOut = Flag()
        let tokenB = center.subscribe("pin.wait.b") { (_: PostObject) in
            bRunning.signal()
            // Return once some thread waits in cancel(): the canceller reached its wait loop.
            var waiting = false
            while !waiting {
                _ThreadRecord.visitAll { if $0.waitingFor != 0 { waiting = true } }
                if !waiting { sched_yield() }
            }
        }
        let tokenA = center.subscribe("pin.wait.a") { (_: PostObject) in
            t2Inside.signal()
            if cancelReturned.wait(timeout: .now() + 10) == .timedOut { t2TimedOut.set() }
        }
        Thread.detachNewThread {
            center.post("pin.wait.a")
            t2Done.signal()
        }
        t2Inside.wait()
        Thread.detachNewThread {
            center.post("pin.wait.b")
            t1Done.signal()
        }
        bRunning.wait()
        tokenB.cancel()
        cancelReturned.signal()
        t1Done.wait()
        t2Done.wait()
        #expect(!t2TimedOut.isSet, "cancel() waited for a post that does not call its handler")
        withExtendedLifetime(tokenA) {}
    }

    /// Thread T runs a post of one name with handlers B then C. `cancel()` of B waits for T's
    /// call of B and returns once it ends, while T goes on with C: waiting for the rest of T's
    /// post would deadlock here, because C waits for that cancel to return (T gives up after 10
    /// s and records it). B returns only once the canceller's own record is seen waiting.
    @Test func cancelWaitsForItsHandlerNotForTheRestOfThePostThatCalledIt() {
        let center = PostCenter()
        let canceller = _ThreadRecord.current
        let bRunning = DispatchSemaphore(value: 0)
        let cancelReturned = DispatchSemaphore(value: 0)
        let posted = DispatchSemaphore(value: 0)
        let cTimedOut = Flag()
        let tokenB = center.subscribe("pin.rest") { (_: PostObject) in
            bRunning.signal()
            while canceller.waitingFor == 0 { sched_yield() }
        }
        let tokenC = center.subscribe("pin.rest") { (_: PostObject) in
            if cancelReturned.wait(timeout: .now() + 10) == .timedOut { cTimedOut.set() }
        }
        Thread.detachNewThread {
            center.post("pin.rest")
            posted.signal()
        }
        bRunning.wait()
        tokenB.cancel()
        cancelReturned.signal()
        posted.wait()
        #expect(!cTimedOut.isSet, "cancel() kept waiting for the post after the cancelled handler returned")
        withExtendedLifetime(tokenC) {}
    }

    // MARK: Guarantee 11: an orphan keeps its closure until its last call ends

    /// A token is dropped (its deinit cancels without waiting) while its handler runs on another
    /// thread. The handler's captures stay alive while that call runs, and go when it ends: on
    /// the thread that ran the call, before its post returns.
    @Test func aTokenDroppedWhileItsHandlerRunsKeepsItsCapturesUntilTheCallEnds() {
        let center = PostCenter()
        let name = "pin.orphan.release"
        let started = DispatchSemaphore(value: 0)
        let dropped = DispatchSemaphore(value: 0)
        let callEnded = Flag()
        let log = ReleaseLog()
        let posterThread = Reliability.Locked<ObjectIdentifier?>(nil)
        var probe: ReleaseProbe? = ReleaseProbe(log, callEnded)
        weak var weakProbe: ReleaseProbe?
        weakProbe = probe
        var token: Subscription? = center.subscribe(name) { [probe] _ in
            withExtendedLifetime(probe) {}
            started.signal()
            dropped.wait()
            callEnded.set()
        }
        probe = nil
        // The entry the post is calling (`@testable`): it must stay allocated until the call ends.
        weak var weakEntry: _Entry?
        weakEntry = token?._entry
        let poster = TestThread {
            posterThread.withLock { $0 = currentThreadID() }
            center.post(name)
        }
        started.wait()
        token = nil  // the last reference: the deinit cancels without waiting
        let aliveWhileTheCallRuns = weakProbe != nil && weakEntry != nil
        dropped.signal()
        poster.join()
        #expect(token == nil)
        #expect(aliveWhileTheCallRuns, "the entry or its captures were released while the handler was still running")
        #expect(weakProbe == nil, "the captures outlived the last call of the dropped subscription")
        let release = log.entries
        #expect(release.count == 1)
        #expect(release.first?.afterTheCall == true)
        #expect(release.first?.thread == posterThread.current, "the captures were not released by the last call")
        #expect(center.post(name) == 0)
    }

    /// A handler cancels its own subscription (an orphan, noted in its thread's record); its call
    /// ends, and the post goes on to a later handler of the name that blocks. Meanwhile another
    /// thread parks and collects an orphan of its own, on another center. That collect must leave
    /// the first orphan alone, though no call of it runs any more: it belongs to the posting thread,
    /// which releases it when it closes its frame, before its post returns.
    @Test func anOrphanIsReleasedByTheThreadThatCalledItNotByAnotherThreadsCollect() {
        let center = PostCenter()
        let other = PostCenter()
        let log = ReleaseLog()
        let callEnded = Flag()
        let inSecond = DispatchSemaphore(value: 0)
        let goOn = DispatchSemaphore(value: 0)
        let posterThread = Reliability.Locked<ObjectIdentifier?>(nil)
        let slot = TokenSlot()
        do {
            let probe = ReleaseProbe(log, callEnded)
            slot.token = center.subscribe("pin.orphan.owner") { [probe] _ in
                withExtendedLifetime(probe) {}
                slot.cancel()  // inside its own handler: an orphan of this thread
                callEnded.set()
            }
        }
        let second = center.subscribe("pin.orphan.owner") { _ in
            inSecond.signal()
            goOn.wait()
        }
        let poster = TestThread {
            posterThread.withLock { $0 = currentThreadID() }
            center.post("pin.orphan.owner")
        }
        inSecond.wait()
        // The first handler's call has ended; the poster is inside the second one.
        let ownSlot = TokenSlot()
        ownSlot.token = other.subscribe("pin.orphan.stranger") { _ in ownSlot.cancel() }
        #expect(other.post("pin.orphan.stranger") == 1)  // parks and collects an orphan of its own
        let releasedByTheStranger = log.entries.count
        goOn.signal()
        poster.join()
        #expect(releasedByTheStranger == 0, "another thread's collect released an orphan it never called")
        let release = log.entries
        #expect(release.count == 1)
        #expect(release.first?.afterTheCall == true)
        #expect(
            release.first?.thread == posterThread.current, "the orphan was not released by the thread that called it")
        withExtendedLifetime(second) {}
    }

    // MARK: Guarantee 7: an orphan's captures are released with no lock held

    /// A handler cancels its own subscription (the entry becomes an orphan, released when the
    /// call ends). The deinit of one of its captures uses the center from another thread, in a
    /// way that parks an orphan too, and waits (bounded) for it: were the orphan released while
    /// the engine holds a lock, that other thread would block on it.
    @Test func anOrphansCapturesAreReleasedWithNoLockHeld() {
        let center = PostCenter()
        let blocked = Flag()
        let released = Flag()
        let threads = Reliability.Locked<[TestThread]>([])
        let slot = TokenSlot()
        do {
            let capture = ReentersFromAnotherThread(center, blocked: blocked, released: released, threads: threads)
            slot.token = center.subscribe("pin.orphan.lock") { [capture] _ in
                withExtendedLifetime(capture) {}
                slot.cancel()  // from inside its own handler: never waits, the entry is an orphan
            }
        }
        #expect(center.post("pin.orphan.lock") == 1)
        for thread in threads.current { thread.join() }
        #expect(released.isSet, "the orphan's captures outlived its last call")
        #expect(!blocked.isSet, "an orphan's captures were released while the engine held a lock")
        #expect(slot.token?.isActive == false)
    }

    // MARK: Guarantees 1 and 7: a retired name table keeps its routes until no post reads it

    /// A post is inside the first of 40 handlers of a name when every subscription of the name
    /// goes (the running one by its token's deinit), and enough other names of the same stripe
    /// empty out that the stripe drops the empty routes into a new name table and frees the old
    /// one at the next cancel. The route the post walks, and the slot buffer it reads, must stay
    /// until the post ends: fresh subscriptions of other names, whose slot buffers have the same
    /// size and reuse freed memory, are never called by it.
    @Test func aRouteEmptiedDuringItsOwnDeliveryStaysReadableUntilThePostEnds() {
        let center = PostCenter()
        let name = "pin.table.walk"
        let stripe = center._stripes[_NameKey(name).hash].toOpaque()
        let sameStripe = (0..<10_000).lazy.map { "pin.table.other.\($0)" }
            .filter { center._stripes[_NameKey($0).hash].toOpaque() == stripe }
        let others = Array(sameStripe.prefix(24))
        #expect(others.count == 24)
        let inside = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        let wrongCalls = Counter()
        let cancelledCalls = Counter()
        var running: Subscription? = center.subscribe(name) { _ in
            inside.signal()
            proceed.wait()
        }
        var later: [Subscription]? = (0..<39).map { _ in center.subscribe(name) { _ in cancelledCalls.increment() } }
        let returned = Counter()
        let poster = TestThread { returned.add(center.post(name)) }
        inside.wait()
        for token in later ?? [] { token.cancel() }
        later = nil
        running = nil  // the route is empty now; its only call still runs
        // Empty routes of the same stripe: the stripe builds a table without them, retires the
        // old one, and tries to free it at every later cancel on the stripe.
        for other in others {
            let token = center.subscribe(other) { _ in }
            token.cancel()
        }
        // Fresh slot buffers of the same capacity, made on this thread: they reuse what was freed
        // here.
        let fresh = (0..<4).flatMap { i in
            (0..<40).map { _ in center.subscribe("pin.table.fresh.\(i)") { _ in wrongCalls.increment() } }
        }
        proceed.signal()
        poster.join()
        #expect(wrongCalls.count == 0, "the post walked memory freed under it: it called handlers of other names")
        #expect(cancelledCalls.count == 0)
        #expect(returned.count == 1)
        #expect(running == nil)
        #expect(center.post(name) == 0)
        withExtendedLifetime(fresh) {}
    }

    // MARK: One-shot: a fired one-shot leaves the delivery order at once (#15)

    /// A thousand one-shots of one name fire on one post while their tokens live on (as owners
    /// keep them). Each fired one-shot leaves the slot buffer when it fires, not when its token
    /// goes, so the next post walks slots for the live subscriptions only.
    @Test func firedOneShotsLeaveTheDeliveryOrderWhileTheirTokensLive() {
        let center = PostCenter()
        let name = "pin.once.slots"
        let fired = Counter()
        let tokens = (0..<1_000).map { _ in center.subscribeOnce(name) { _ in fired.increment() } }
        let keeper = center.subscribe(name) { _ in }
        #expect(center.post(name) == 1_001)
        let slots = center._route(_NameKey(name))?._slotCount ?? -1
        #expect(slots >= 1 && slots <= 2 + 8, "\(slots) slots kept for 1 live subscription")
        #expect(center.post(name) == 1)
        #expect(fired.count == 1_000)
        #expect(tokens.allSatisfy { !$0.isActive })
        withExtendedLifetime((tokens, keeper)) {}
    }

    // MARK: Guarantee 8: the post/cancel handshake (fences on both sides)

    /// One thread posts a name without pause while another subscribes a handler to it and
    /// cancels it, many times over. Each handler checks, all through its call, that the
    /// `cancel()` of its subscription has not returned yet: a cancel that missed a post about to
    /// call the entry (the post's store of the entry not yet visible when the canceller read the
    /// thread records) returns while the call runs. CI runs this in both fence modes.
    @Test func cancelNeverReturnsWhileAPostThatReadTheSlotCallsTheHandler() {
        let center = PostCenter()
        let name = "pin.handshake"
        let stop = Flag()
        let violations = Counter()
        let calls = Counter()
        let poster = TestThread {
            while !stop.isSet { center.post(name) }
        }
        for _ in 0..<Reliability.scaled(20_000, minimum: 2_000) {
            let returned = Flag()
            let token = center.subscribe(name) { _ in
                calls.increment()
                for _ in 0..<64 where returned.isSet {
                    violations.increment()
                    break
                }
            }
            token.cancel()
            returned.set()
        }
        stop.set()
        poster.join()
        #expect(violations.count == 0, "a handler ran after the cancel() of its subscription returned")
        #expect(center.post(name) == 0)
    }
}

/// Captured by a handler: its deinit (user code, run when the center releases the closure) makes
/// another thread park an orphan of its own, and waits for that thread at most 10 seconds.
private final class ReentersFromAnotherThread: Sendable {
    let center: PostCenter
    let blocked: Flag
    let released: Flag
    let threads: Reliability.Locked<[TestThread]>

    init(_ center: PostCenter, blocked: Flag, released: Flag, threads: Reliability.Locked<[TestThread]>) {
        self.center = center
        self.blocked = blocked
        self.released = released
        self.threads = threads
    }

    deinit {
        let center = self.center
        let done = DispatchSemaphore(value: 0)
        let thread = TestThread {
            let own = TokenSlot()
            own.token = center.subscribe("pin.orphan.lock.inner") { _ in own.cancel() }
            center.post("pin.orphan.lock.inner")
            own.token = nil
            done.signal()
        }
        threads.withLock { $0.append(thread) }
        // A deadlock guard, not a timing assertion: the other thread needs no lock held here.
        if done.wait(timeout: .now() + 10) == .timedOut { blocked.set() }
        released.set()
    }
}
