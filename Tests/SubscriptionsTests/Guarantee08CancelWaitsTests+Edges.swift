import Dispatch
import Foundation
import SubscriptionsTestSupport
import Synchronization
import Testing

@testable import Subscriptions

extension Guarantee08CancelWaits {
    /// The cancel contract at its last edges (issue 24): a finished wait is not a cycle, the replay
    /// hand-over honours cancellation, a reclaim takes its "only thread" shortcut only when the caller
    /// owns the sole record, and records of exited threads leave the set every cancel scans.
    ///
    /// `@testable` is used to see what no public API shows: whether a thread waits (its record's
    /// `waitingFor`), how many heavy fences ran, how many records a scan visits. Waits are bounded;
    /// semaphores and short pauses only arrange the threads, and no assertion depends on timing.
    @Suite("Edges: stale waits, the replay hand-over, reclaim shortcut, exited threads", .tags(.pin))
    struct CancelEdges {
        /// A record of a live thread, from its address (the thread publishes it itself).
        static func record(_ bits: UInt) -> _ThreadRecord {
            _ThreadRecord(words: UnsafeMutablePointer(bitPattern: bits)!)
        }

        /// Spins until `bits` names a record that waits, or `done()` holds, or `bound` spins passed
        /// (a failed round, not a hang).
        static func untilWaiting(
            _ bits: borrowing Atomic<UInt>, orUntil done: () -> Bool = { false }, bound: Int = 2_000_000
        ) {
            var spins = 0
            while !done()
                && (bits.load(ordering: .sequentiallyConsistent) == 0
                    || record(bits.load(ordering: .sequentiallyConsistent)).waitingFor == 0)
            {
                spins += 1
                if spins > bound { break }
                sched_yield()
            }
        }

        /// Thread A, inside X's handler, cancels E and waits for thread B, which runs E's handler.
        /// B's handler returns while A sleeps between two checks of its wait, so A's `waitingFor`
        /// still names B; B then cancels X. That link is a finished wait, not a cycle: B's `cancel()`
        /// must wait for X's handler on A, and return only after it ended.
        @Test(arguments: 0..<6)
        func aFinishedWaitIsNotMistakenForACycle(round: Int) {
            let center = PostCenter()
            let tokenE = TokenSlot()
            let tokenX = TokenSlot()
            let aBits = Atomic<UInt>(0)
            let bBits = Atomic<UInt>(0)
            let eRunning = DispatchSemaphore(value: 0)
            let xMayEnd = DispatchSemaphore(value: 0)
            let xEnded = Flag()
            let bReturned = Flag()
            let xEndedWhenBReturned = Flag()
            tokenX.token = center.subscribe("edge.x.\(round)") { _ in
                aBits.store(_ThreadRecord.current.bits, ordering: .sequentiallyConsistent)
                eRunning.wait()
                tokenE.cancel()  // waits for E's handler on B
                xMayEnd.wait()
                xEnded.set()
            }
            tokenE.token = center.subscribe("edge.e.\(round)") { _ in
                eRunning.signal()
                // Until A waits for this call, then long enough for A to sleep between two checks
                // (its backoff yields 16 times before it sleeps).
                CancelEdges.untilWaiting(aBits)
                usleep(3000)
            }
            let b = TestThread {
                bBits.store(_ThreadRecord.current.bits, ordering: .sequentiallyConsistent)
                center.post("edge.e.\(round)")
                tokenX.cancel()
                if xEnded.isSet { xEndedWhenBReturned.set() }
                bReturned.set()
            }
            while bBits.load(ordering: .sequentiallyConsistent) == 0 { sched_yield() }
            let a = TestThread { center.post("edge.x.\(round)") }
            // Let X end once B waits for it (or once B returned without waiting: the breach).
            CancelEdges.untilWaiting(bBits, orUntil: { bReturned.isSet }, bound: 50_000_000)
            xMayEnd.signal()
            #expect(b.join(timeout: 20), "B's cancel() never returned")
            #expect(a.join(timeout: 20), "A's post never returned")
            #expect(
                xEndedWhenBReturned.isSet,
                "cancel() returned while the handler it cancelled still ran on another thread")
            #expect(center.post("edge.x.\(round)") == 0)
            #expect(center.post("edge.e.\(round)") == 0)
        }

        /// The same with the finished wait in the middle of the chain: thread A, inside X's handler,
        /// cancels E and waits for B, which runs E's handler. B's handler returns while A sleeps
        /// between two checks (A's link to B is now a finished wait); B then cancels F and waits
        /// for C, which runs F's handler (a live wait); C, inside F's handler, cancels X. The chain
        /// C → A → B → C has one finished link, so it is no cycle: C's `cancel()` must wait for X's
        /// handler on A and return only after it ended.
        @Test(arguments: 0..<6)
        func aFinishedWaitInsideAChainIsNotMistakenForACycle(round: Int) {
            let center = PostCenter()
            let tokenE = TokenSlot()
            let tokenF = TokenSlot()
            let tokenX = TokenSlot()
            let aBits = Atomic<UInt>(0)
            let bBits = Atomic<UInt>(0)
            let cBits = Atomic<UInt>(0)
            let eRunning = DispatchSemaphore(value: 0)
            let fRunning = DispatchSemaphore(value: 0)
            let xMayEnd = DispatchSemaphore(value: 0)
            let xEnded = Flag()
            let cReturned = Flag()
            let xEndedWhenCReturned = Flag()
            tokenX.token = center.subscribe("edge.chain.x.\(round)") { _ in
                aBits.store(_ThreadRecord.current.bits, ordering: .sequentiallyConsistent)
                eRunning.wait()
                tokenE.cancel()  // waits for E's handler on B
                xMayEnd.wait()
                xEnded.set()
            }
            tokenE.token = center.subscribe("edge.chain.e.\(round)") { _ in
                eRunning.signal()
                // Until A waits for this call, then long enough for A's backoff to sleep a
                // millisecond between two checks.
                CancelEdges.untilWaiting(aBits)
                usleep(20_000)
            }
            tokenF.token = center.subscribe("edge.chain.f.\(round)") { _ in
                cBits.store(_ThreadRecord.current.bits, ordering: .sequentiallyConsistent)
                fRunning.signal()
                CancelEdges.untilWaiting(bBits)  // B waits for this call
                tokenX.cancel()
                if xEnded.isSet { xEndedWhenCReturned.set() }
                cReturned.set()
            }
            let c = TestThread { center.post("edge.chain.f.\(round)") }
            fRunning.wait()
            let b = TestThread {
                bBits.store(_ThreadRecord.current.bits, ordering: .sequentiallyConsistent)
                center.post("edge.chain.e.\(round)")
                tokenF.cancel()  // waits for F's handler on C
            }
            while bBits.load(ordering: .sequentiallyConsistent) == 0 { sched_yield() }
            let a = TestThread { center.post("edge.chain.x.\(round)") }
            // Let X end once C waits for it (or once C returned without waiting: the breach).
            CancelEdges.untilWaiting(cBits, orUntil: { cReturned.isSet }, bound: 50_000_000)
            xMayEnd.signal()
            #expect(c.join(timeout: 20), "C's post never returned")
            #expect(b.join(timeout: 20), "B's cancel() never returned")
            #expect(a.join(timeout: 20), "A's post never returned")
            #expect(
                xEndedWhenCReturned.isSet,
                "cancel() returned while the handler it cancelled still ran on another thread")
            #expect(center.post("edge.chain.x.\(round)") == 0)
        }

        /// The cycle rule still holds for a real cycle: two handlers running on two threads cancel
        /// each other's subscriptions; neither waits forever, and both calls complete.
        @Test func twoHandlersCancellingEachOtherStillDoNotDeadlock() {
            let center = PostCenter()
            let first = TokenSlot()
            let second = TokenSlot()
            let bothIn = DispatchGroup()
            bothIn.enter()
            bothIn.enter()
            let completed = Atomic<Int>(0)
            first.token = center.subscribe("edge.cycle.1") { _ in
                bothIn.leave()
                bothIn.wait()
                second.cancel()
                completed.add(1, ordering: .relaxed)
            }
            second.token = center.subscribe("edge.cycle.2") { _ in
                bothIn.leave()
                bothIn.wait()
                first.cancel()
                completed.add(1, ordering: .relaxed)
            }
            let one = TestThread { center.post("edge.cycle.1") }
            let two = TestThread { center.post("edge.cycle.2") }
            #expect(one.join(timeout: 20))
            #expect(two.join(timeout: 20))
            #expect(completed.load(ordering: .relaxed) == 2)
            #expect(center.post("edge.cycle.1") + center.post("edge.cycle.2") == 0)
        }

        final class Observer: @unchecked Sendable {
            // @unchecked: `seen` is only touched on the registering thread (the hand-over runs there).
            var seen: [String] = []
            var onRetained: (() -> Void)?
            func receive(_ post: PostObject) {
                seen.append(post.flag)
                if post.flag == "retained" { onRetained?() }
            }
        }

        /// A post that arrives while a `replay: true` registration receives its retained post is
        /// parked and handed over after it. When the observer is removed meanwhile, the parked post
        /// must be dropped like any delivery that has not started: nothing reaches the observer after
        /// `removeObserver(_:)` returned.
        @Test func postsParkedDuringTheReplayAreDroppedOnceTheObserverIsRemoved() {
            let center = PostCenter()
            let name = "edge.replay.remove"
            center.post(name, flag: "retained", retain: true)
            let observer = Observer()
            let removed = Flag()
            var afterRemoval: [String] = []
            observer.onRetained = {
                center.post(name, flag: "live")  // parked: the replay is not over
                center.removeObserver(observer)
                removed.set()
            }
            let token = center.register(name, observer: observer, replay: true, selector: Observer.receive)
            afterRemoval = Array(observer.seen.drop(while: { $0 == "retained" }))
            #expect(removed.isSet)
            #expect(observer.seen == ["retained"], "a parked post reached the observer after removeObserver returned")
            #expect(afterRemoval.isEmpty)
            #expect(!token.isActive)
        }

        /// Growing a slot buffer retires the old one; reclaiming it may use a plain full fence only
        /// when the calling thread owns the sole thread record. Here the only record belongs to a
        /// thread walking the route and the subscriber (a fresh thread) holds none: every reclaim
        /// must run the process-wide fence (or, in the symmetric form, a fence inside a section,
        /// which keeps the posts fencing). Run in a child process, so that no other test's thread
        /// holds a record.
        @Test func aReclaimRunsTheProcessWideFenceWhenTheOnlyRecordIsAnotherThreads() async {
            await #expect(processExitsWith: .success) {
                let center = PostCenter()
                let inside = DispatchSemaphore(value: 0)
                let release = DispatchSemaphore(value: 0)
                let walker = center.subscribe("edge.reclaim") { _ in
                    inside.signal()
                    release.wait()
                }
                let poster = TestThread { center.post("edge.reclaim") }
                inside.wait()
                let fences = Atomic<Int>(0)
                let subscriber = TestThread {
                    let before = _ThreadRecord.unsharedFenceCount
                    var tokens: [Subscription] = []
                    // Enough growths for a subscribe to reclaim (`_Route.reclaimSlots` retired slots).
                    for _ in 0..<5_000 { tokens.append(center.subscribe("edge.reclaim") { _ in }) }
                    // Counted before the tokens go (their deinits cancel, with fences of their own).
                    fences.store(_ThreadRecord.unsharedFenceCount - before, ordering: .relaxed)
                    withExtendedLifetime(tokens) {}
                }
                subscriber.join()
                release.signal()
                poster.join()
                withExtendedLifetime(walker) {}
                if fences.load(ordering: .relaxed) == 0 {
                    print("growing the slot buffer under another thread's walk ran no process-wide fence")
                    exit(1)
                }
            }
        }

        /// A dispatch worker that settles a batch of dropped tokens holds no thread record and
        /// does not claim one: otherwise, once the other posting threads are gone, every cancel of
        /// the thread left alone would still find two records and pay the process-wide fence.
        /// Run in a child process, so that no other test's thread holds a record.
        @Test func settlingDroppedTokensClaimsNoRecordSoALoneThreadCancelsWithoutTheProcessWideFence() async {
            await #expect(processExitsWith: .success) {
                let center = PostCenter()
                center.post("edge.settle")  // this thread's record
                let posted = DispatchSemaphore(value: 0)
                let idle = DispatchSemaphore(value: 0)
                let other = TestThread {
                    center.post("edge.settle.other")  // a second record, so that drops park
                    posted.signal()
                    idle.wait()
                }
                posted.wait()
                var tokens = (0..<20).map { _ in center.subscribe("edge.settle") { _ in } }
                tokens.removeAll()
                // Parked drops are settled by the job on a global queue (nothing else settles them here).
                _ = eventually { _Retirements.count == 0 }
                let claimedWhileBoth = _ThreadRecord.claimedCount
                idle.signal()
                other.join()
                // The exited thread's record goes with its exit (a key destructor): wait, bounded.
                _ = eventually { _ThreadRecord.claimedCount == 1 }
                let before = _ThreadRecord.heavyFenceCount
                center.subscribe("edge.settle") { _ in }.cancel()
                let fences = _ThreadRecord.heavyFenceCount - before
                if claimedWhileBoth != 2 || _ThreadRecord.claimedCount != 1 || fences != 0 {
                    print(
                        "records: \(claimedWhileBoth) after the settle, \(_ThreadRecord.claimedCount) when alone;"
                            + " process-wide fences of a lone cancel: \(fences)")
                    exit(1)
                }
                withExtendedLifetime(tokens) {}
            }
        }

        /// A canceller skips the frames of a thread whose route hint names another route
        /// (`_ThreadRecord.announce`); the hint must follow the thread. Thread P posts one name,
        /// then another whose handler blocks (`switched`), or posts a name whose handler posts a
        /// second name and then blocks (`nested`: the outer frame goes on calling after the
        /// inner post ended). Another thread cancels the blocked handler's subscription:
        /// `cancel()` returns only after the handler did. The short pause only lets the canceller
        /// reach its wait; a slow machine can miss a bug, never fail a correct engine.
        @Test(arguments: ["switched", "nested"])
        func cancelWaitsForAHandlerWhoseThreadPostedAnotherNameBefore(_ shape: String) {
            let center = PostCenter()
            let call = BlockedCall(first: { if shape == "nested" { center.post("edge.hint.inner") } })
            let inner = center.subscribe("edge.hint.inner") { _ in }
            let before = center.subscribe("edge.hint.before") { _ in }
            let token = center.subscribe("edge.hint.blocks", handler: call.handler)
            let poster = TestThread {
                if shape == "switched" { center.post("edge.hint.before") }
                center.post("edge.hint.blocks")
            }
            call.started.wait()
            let returnedAfterTheHandler = call.cancelOnAnotherThread(token)
            poster.join()
            #expect(returnedAfterTheHandler, "\(shape): cancel() returned while the handler was still running")
            withExtendedLifetime((inner, before)) {}
        }

        /// A thread alone (no other thread holds a record: the one-thread shortcut, which scans
        /// only the caller's own record) that cancels from inside the handler itself: `cancel()`
        /// returns, the call finishes, and the closure (with its captures) goes only when the call
        /// ends, on that thread (`Subscription.cancel()`'s contract for a cancel from inside the
        /// handler). It does not catch a scan that skips the caller's own record: the running call
        /// holds its closure's context either way (`aLoneThreadsCancelNeverFreesTheSlotStorage…`
        /// does). Run in a child process, so that no other test's thread holds a record.
        @Test func aLoneThreadCancellingInsideItsOwnHandlerKeepsTheClosureUntilTheCallEnds() async {
            await #expect(processExitsWith: .success) {
                let center = PostCenter()
                let log = ReleaseLog()
                let callEnded = Flag()
                let token = Reliability.Locked<Subscription?>(nil)
                let ranAfterCancel = Flag()
                do {
                    let probe = ReleaseProbe(log, callEnded)
                    token.withLock {
                        $0 = center.subscribe("edge.alone.self") { _ in
                            token.withLock { $0 }?.cancel()
                            withExtendedLifetime(probe) {}
                            ranAfterCancel.set()
                            callEnded.set()
                        }
                    }
                }
                let claimed = _ThreadRecord.claimedCount
                let delivered = center.post("edge.alone.self")
                let entries = log.entries
                let afterwards = center.post("edge.alone.self")
                if claimed > 1 || delivered != 1 || !ranAfterCancel.isSet || entries.count != 1
                    || !entries[0].afterTheCall || entries[0].thread != currentThreadID() || afterwards != 0
                {
                    print(
                        "records \(claimed), delivered \(delivered), ran on after cancel \(ranAfterCancel.isSet), "
                            + "releases \(entries.map { ($0.afterTheCall, $0.thread == currentThreadID()) }), "
                            + "later post delivered \(afterwards)")
                    exit(1)
                }
            }
        }

        /// A thread alone whose handler makes the engine replace the slot storage its own post is
        /// walking, and then cancels: the cancel frees replaced storage (one-thread shortcut,
        /// which reads only the caller's own record), but never the storage the post walks.
        /// Fresh subscriptions of another name then take freed memory; when the post resumes it
        /// calls none of them. Run in a child process, so that no other test's thread holds a
        /// record (a freed walk usually crashes the child, which fails the test too).
        @Test func aLoneThreadsCancelNeverFreesTheSlotStorageItsOwnPostWalks() async {
            await #expect(processExitsWith: .success) {
                let center = PostCenter()
                let name = "edge.alone.walk"
                let wrong = Counter()
                let late = Counter()
                let held = Reliability.Locked<[Subscription]>([])
                let first = center.subscribe(name) { _ in
                    guard held.withLock({ $0.isEmpty }) else { return }
                    var made = (0..<256).map { _ in center.subscribe(name) { _ in late.increment() } }
                    made.removeLast().cancel()
                    let fresh = (0..<512).map { _ in center.subscribe(name + ".fresh") { _ in wrong.increment() } }
                    held.withLock { $0 = made + fresh }
                }
                let others = (0..<63).map { _ in center.subscribe(name) { _ in } }
                let claimed = _ThreadRecord.claimedCount
                let delivered = center.post(name)
                if claimed > 1 || delivered != 64 || wrong.count != 0 || late.count != 0 {
                    print(
                        "records \(claimed), delivered \(delivered), other name's handlers \(wrong.count), late \(late.count)"
                    )
                    exit(1)
                }
                withExtendedLifetime((first, others)) {}
            }
        }

        /// Threads that posted and exited leave the set of records that cancels scan, and their
        /// records are unmapped: after 300 such threads, a scan visits as many records as threads
        /// hold one now. Run in a child process, so that the count is not other tests' threads.
        @Test func recordsOfExitedThreadsLeaveTheScannedSet() async {
            await #expect(processExitsWith: .success) {
                let center = PostCenter()
                let token = center.subscribe("edge.exited") { _ in }
                for _ in 0..<30 {
                    let threads = (0..<10).map { _ in TestThread { center.post("edge.exited") } }
                    for thread in threads { thread.join() }
                }
                token.cancel()  // a scan (and the last section's close frees the parked records)
                // A joined thread's body has returned, but its exit (the pthread key destructor that
                // releases its record) may still be under way: wait for it, bounded.
                var visited = 0
                var claimed = 0
                for _ in 0..<1_000 {
                    visited = 0
                    _ThreadRecord.visitAll { _ in visited += 1 }
                    claimed = _ThreadRecord.claimedCount
                    if visited == claimed && visited <= 4 { break }
                    usleep(10_000)
                }
                if visited != claimed || visited > 4 {
                    print("a scan visited \(visited) records with \(claimed) claimed after 300 threads exited")
                    exit(1)
                }
            }
        }

        /// The hint directory that cancels read (`_ThreadRecord.visitHinted`) follows the threads
        /// alive now: 40 threads that posted and wait hold 40 more slots, and once they exited
        /// the slots in use fall back to the one of this thread, so a scan after a burst reads no
        /// more slots than before it. Run in a child process, so that no other test's thread
        /// holds a slot.
        @Test func theHintDirectoryFallsBackToTheThreadsAliveNow() async {
            await #expect(processExitsWith: .success) {
                let center = PostCenter()
                _ = _ThreadRecord.current
                let before = _ThreadRecord.hintSlotsInUse
                let gate = DispatchSemaphore(value: 0)
                let posted = DispatchSemaphore(value: 0)
                let threads = (0..<40).map { _ in
                    TestThread {
                        center.post("edge.directory")
                        posted.signal()
                        gate.wait()
                    }
                }
                for _ in threads { posted.wait() }
                let during = _ThreadRecord.hintSlotsInUse
                for _ in threads { gate.signal() }
                for thread in threads { thread.join() }
                // A joined thread's record goes with its exit (a key destructor): wait, bounded.
                let fellBack = eventually { _ThreadRecord.hintSlotsInUse == before }
                if before != 1 || during != 41 || !fellBack || !_ThreadRecord.hintsComplete {
                    print(
                        "slots in use: \(before) before, \(during) with 40 threads, "
                            + "\(_ThreadRecord.hintSlotsInUse) after (claimed \(_ThreadRecord.claimedCount))")
                    exit(1)
                }
            }
        }

        /// The thread holding the hint directory's highest slot is scanned too: this thread holds
        /// slot 0, thread P (slot 1, the last) runs a blocking handler, and this thread's
        /// `cancel()` returns only after the handler did. The thread that releases the handler
        /// touches no library code, so it claims no slot of its own. Run in a child process, so
        /// that no other test's thread holds a slot.
        @Test func cancelWaitsForAHandlerOnTheThreadHoldingTheDirectorysLastSlot() async {
            await #expect(processExitsWith: .success) {
                let center = PostCenter()
                let call = BlockedCall()
                let token = center.subscribe("edge.last.blocks", handler: call.handler)
                _ = _ThreadRecord.current
                let poster = TestThread { center.post("edge.last.blocks") }
                call.started.wait()
                let slots = _ThreadRecord.hintSlotsInUse
                // Cancelled here, on slot 0's thread: a canceller thread would take the last slot.
                let releaser = TestThread {
                    usleep(50_000)
                    call.release.signal()
                }
                token.cancel()
                let returnedAfterTheHandler = call.finished.isSet
                releaser.join()
                poster.join()
                if slots != 2 || !returnedAfterTheHandler {
                    print("slots in use: \(slots); cancel returned after the handler: \(returnedAfterTheHandler)")
                    exit(1)
                }
            }
        }

        /// A record that a scan filtered by route (`visitHinted`) reached stays mapped until the
        /// scan ends, although the scan read the directory's hints outside any section: it opened
        /// one before it read the slot's record. Inside the scan's visit, the record's thread
        /// exits and its record is released; reading the record afterwards must not fault. Run
        /// in a child process, so that a fault fails this test only.
        @Test func aRecordAHintedScanReachedStaysMappedUntilTheScanEnds() async {
            await #expect(processExitsWith: .success) {
                let center = PostCenter()
                let token = center.subscribe("edge.mapped") { _ in }
                let posted = DispatchSemaphore(value: 0)
                let exitNow = DispatchSemaphore(value: 0)
                let thread = TestThread {
                    center.post("edge.mapped")
                    posted.signal()
                    exitNow.wait()
                }
                posted.wait()
                guard let route = center._route(_NameKey("edge.mapped")) else { exit(2) }
                var visited = 0
                var released = false
                var depth = -1
                _ThreadRecord.visitHinted(route._routeBits, onlyThread: false) { r in
                    visited += 1
                    exitNow.signal()
                    thread.join()
                    // Its exit (a key destructor) releases the record: wait for it, bounded.
                    released = eventually { _ThreadRecord.claimedCount == 0 }
                    depth = r.depth
                }
                withExtendedLifetime(token) {}
                if visited != 1 || !released || depth != 0 {
                    print("visited \(visited) records, released \(released), depth read \(depth)")
                    exit(1)
                }
            }
        }

        /// A thread whose record got no hint-directory slot (the directory full: here made so by
        /// limiting it to the slots in use) is still found: while one exists, cancels walk the
        /// list of records. Thread P, without a slot, posts one name and then one whose handler
        /// blocks; `cancel()` on another thread returns only after the handler did. Run in a
        /// child process, so that the limit touches no other test.
        @Test func cancelWaitsForAHandlerOnAThreadTheHintDirectoryHadNoSlotFor() async {
            await #expect(processExitsWith: .success) {
                let center = PostCenter()
                let call = BlockedCall()
                let token = center.subscribe("edge.full.blocks", handler: call.handler)
                let before = center.subscribe("edge.full.before") { _ in }
                _ = _ThreadRecord.current
                _ThreadRecord.limitHintSlots(_ThreadRecord.hintSlotsInUse)
                let poster = TestThread {
                    center.post("edge.full.before")
                    center.post("edge.full.blocks")
                }
                call.started.wait()
                let complete = _ThreadRecord.hintsComplete
                let returnedAfterTheHandler = call.cancelOnAnotherThread(token)
                poster.join()
                let completeAgain = eventually { _ThreadRecord.hintsComplete }
                withExtendedLifetime(before) {}
                if complete || !returnedAfterTheHandler || !completeAgain {
                    print(
                        "directory complete with a slotless thread: \(complete); cancel returned after the "
                            + "handler: \(returnedAfterTheHandler); complete once it exited: \(completeAgain)")
                    exit(1)
                }
            }
        }

        /// The same rule, driven: a fence section is held open (in the symmetric state, where
        /// a cancel's scan runs inside one: the adaptive form switches to it at a process-wide
        /// fence, the fixed one is always there) while a thread that claimed a record exits;
        /// its record must stay mapped until the section closes: the child reads it inside the
        /// section (a read of an unmapped record crashes the child). Where no section opens (the
        /// asymmetric-only form) there is nothing to pin and the child says so and succeeds.
        @Test(.tags(.mutantPin)) func anExitedThreadsRecordStaysMappedWhileAFenceSectionIsOpen() async {
            await #expect(processExitsWith: .success) {
                _Fence.endHeavy(_Fence.beginHeavy())  // the adaptive form switches to symmetric here
                let before = _ThreadRecord.claimedCount
                let opened = _inFenceSection {
                    let address = Atomic<UInt>(0)
                    let thread = TestThread {
                        address.store(UInt(bitPattern: _ThreadRecord.current.words), ordering: .releasing)
                    }
                    thread.join()
                    // The record is released by the thread's exit, after its body returned.
                    let deadline = ContinuousClock.now + .seconds(30)
                    while _ThreadRecord.claimedCount > before {
                        if ContinuousClock.now > deadline {
                            print("the exited thread's record was never released")
                            exit(3)
                        }
                        sched_yield()
                    }
                    let record = UnsafeMutablePointer<Atomic<UInt>>(
                        bitPattern: address.load(ordering: .acquiring))
                    _ = record?.pointee.load(ordering: .relaxed)
                }
                if !opened { print("no fence section opens in this form") }
            }
        }

        /// Records of exiting threads are unmapped only when no scan is open, and a cancel's
        /// fence section (the symmetric form, which cancels beside a posting thread switch to, or
        /// the fixed one of `SUBSCRIPTIONS_PROCESS_FENCE=off`) is a scan section too. Threads that
        /// post once and exit, over and over, while this thread cancels beside a posting thread:
        /// a record unmapped under a scan's walk would crash the child. Run in a child process,
        /// so that a crash fails this test only.
        @Test func recordsOfExitingThreadsStayMappedWhileCancelsWalkThem() async {
            await #expect(processExitsWith: .success) {
                let center = PostCenter()
                let token = center.subscribe("edge.exiting") { _ in }
                let stop = Flag()
                let poster = TestThread { while !stop.isSet { center.post("edge.exiting.other") } }
                let churn = TestThread {
                    for _ in 0..<400 {
                        let threads = (0..<4).map { _ in TestThread { center.post("edge.exiting") } }
                        for thread in threads { thread.join() }
                    }
                    stop.set()
                }
                var cancels = 0
                while !stop.isSet {
                    center.subscribe("edge.exiting") { _ in }.cancel()
                    cancels += 1
                }
                churn.join()
                poster.join()
                withExtendedLifetime(token) {}
                if cancels == 0 {
                    print("no cancel ran while the threads came and went")
                    exit(1)
                }
            }
        }
    }
}

/// A handler call that blocks until released: `handler` signals `started`, waits for `release`,
/// then sets `finished`. For tests where `cancel()` must return only after such a call.
private final class BlockedCall: Sendable {
    let started = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let finished = Flag()
    private let first: @Sendable () -> Void

    /// `first` runs inside the call before it signals `started` (a nested post, say).
    init(first: @escaping @Sendable () -> Void = {}) { self.first = first }

    var handler: @Sendable (PostObject) -> Void {
        { [self] _ in
            first()
            started.signal()
            release.wait()
            finished.set()
        }
    }

    /// Cancels `token` on a thread of its own while the call is blocked, releases the call after
    /// a short pause (it only lets the canceller reach its wait: a slow machine can miss a bug,
    /// never fail a correct engine), and returns whether `cancel()` returned after the call.
    func cancelOnAnotherThread(_ token: Subscription) -> Bool {
        let returnedAfterTheCall = Flag()
        let canceller = TestThread {
            token.cancel()
            if self.finished.isSet { returnedAfterTheCall.set() }
        }
        usleep(50_000)
        release.signal()
        canceller.join()
        return returnedAfterTheCall.isSet
    }
}
