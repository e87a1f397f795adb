import Dispatch
import Foundation
import SubscriptionsTestSupport
import Synchronization
import Testing

@testable import Subscriptions

extension Guarantee08CancelWaits {
    /// A token's deinit never waits and needs no heavy fence of its own: its entry joins a batch that
    /// one fence settles (`Engine/Core/Retirements.swift`).
    @Suite("Dropped tokens settle in batches", .tags(.pin))
    struct DroppedTokens {
        /// In a program where the dropping thread holds the only thread record, nothing can be calling
        /// the handler: the captures go inside the drop, as they always did. Run in a child process,
        /// so that no other test's thread holds a record.
        @Test func aDropReleasesTheCapturesAtOnceWhenNoOtherThreadHoldsARecord() async {
            await #expect(processExitsWith: .success) {
                let center = PostCenter()
                center.post("batch.alone")  // this thread's record
                final class Box: Sendable {}
                var box: Box? = Box()
                weak var weakBox: Box?
                weakBox = box
                var token: Subscription? = center.subscribe("batch.alone") { [box] _ in withExtendedLifetime(box) {} }
                box = nil
                token = nil
                if weakBox != nil || token != nil || _Retirements.count != 0 {
                    print("a drop in a single-threaded program parked its entry instead of releasing it")
                    exit(1)
                }
            }
        }

        /// Without the process-wide fence (Apple platforms, `SUBSCRIPTIONS_PROCESS_FENCE=off`) a
        /// drop's fence is a plain full fence of its own, so it settles at once even while other
        /// threads hold records; with it, the drop parks the entry for the next batch. CI runs this in
        /// both modes.
        @Test func aDropBesideAnotherThreadReleasesAtOnceExactlyWithoutTheProcessWideFence() {
            let center = PostCenter()
            let idle = DispatchSemaphore(value: 0)
            let posted = DispatchSemaphore(value: 0)
            let other = TestThread {
                center.post("batch.mode.other")  // a record of another thread, alive while we drop
                posted.signal()
                idle.wait()
            }
            posted.wait()
            center.post("batch.mode")  // this thread's record
            let live = Reliability.Tally()
            let capture = Reliability.Capture(live)
            var token: Subscription? = center.subscribe("batch.mode") { _ in withExtendedLifetime(capture) {} }
            _ = consume capture
            token = nil
            if !_processFenceAvailable() {
                #expect(live.current == 0, "a drop without the process-wide fence parked its entry")
            }
            #expect(eventually { live.current == 0 })
            #expect(token == nil)
            idle.signal()
            other.join()
        }

        /// With other threads holding records, dropped tokens are parked; an explicit `cancel()`
        /// anywhere settles them with its own fence, and nothing of them is left afterwards.
        @Test func droppedTokensAreSettledByTheNextBatchAndNeverCalledAgain() {
            let center = PostCenter()
            let calls = Atomic<Int>(0)
            let live = Reliability.Tally()
            var tokens: [Subscription] = []
            for _ in 0..<200 {
                let capture = Reliability.Capture(live)
                tokens.append(
                    center.subscribe("batch.many") { _ in
                        withExtendedLifetime(capture) {}
                        calls.add(1, ordering: .relaxed)
                    })
            }
            let idle = DispatchSemaphore(value: 0)
            let other = TestThread {
                center.post("batch.other")  // holds a record while the tokens go
                idle.wait()
            }
            #expect(center.post("batch.many") == 200)
            tokens.removeAll()
            #expect(center.post("batch.many") == 0)
            center.subscribe("batch.trigger") { _ in }.cancel()
            #expect(eventually { live.current == 0 }, "closures of dropped tokens were never released")
            #expect(_Retirements.count == 0 || eventually { _Retirements.count == 0 })
            #expect(calls.load(ordering: .relaxed) == 200)
            idle.signal()
            other.join()
        }

        /// A dropped token's captures never go inside an unrelated `cancel()` or drop (Guarantees.md,
        /// rule 8): here they cancel, in their `deinit`, a subscription whose handler is held at a
        /// gate on another thread, so whichever thread releases them waits for the gate. An
        /// unrelated cancel (of a subscription that never ran) must return while the gate is held,
        /// without running that `deinit`. Child processes: the fence form and the records are
        /// this test's alone.
        @Test func anUnrelatedCancelNeverReleasesADroppedTokensCapturesNorWaitsForThem() async {
            let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                DroppedCaptureGate.run(unrelatedDrops: 0)
            }
            let printed = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
            #expect(result != nil && printed.isEmpty, "the child process saw: \(printed)")
        }

        /// The same with 600 unrelated drops instead of a cancel: one of them fills the batch that
        /// holds the dropped token and settles it, but the captures still go on a settling job.
        @Test func unrelatedDropsThatFillTheBatchNeverReleaseADroppedTokensCapturesNorWaitForThem() async {
            let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                DroppedCaptureGate.run(unrelatedDrops: 600)
            }
            let printed = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
            #expect(result != nil && printed.isEmpty, "the child process saw: \(printed)")
        }

        /// A batch holds up to 512 dropped tokens: the drop that would make it longer settles it
        /// (Guarantees.md, rule 8). Another thread holds a record while the tokens go, so that
        /// drops park their entries (in the process-wide fence mode).
        @Test func aBatchHoldsUpTo512DroppedTokens() {
            let center = PostCenter()
            let live = Reliability.Tally()
            var tokens: [Subscription] = []
            for _ in 0..<1_200 {
                let capture = Reliability.Capture(live)
                tokens.append(center.subscribe("batch.limit") { _ in withExtendedLifetime(capture) {} })
            }
            let idle = DispatchSemaphore(value: 0)
            let posted = DispatchSemaphore(value: 0)
            let other = TestThread {
                center.post("batch.limit.other")  // holds a record while the tokens go
                posted.signal()
                idle.wait()
            }
            posted.wait()
            var longest = 0
            while !tokens.isEmpty {
                tokens.removeLast()
                longest = max(longest, _Retirements.count)
            }
            #expect(longest < 512, "a batch held \(longest) dropped tokens")
            center.subscribe("batch.limit.trigger") { _ in }.cancel()
            #expect(eventually { live.current == 0 }, "closures of dropped tokens were never released")
            idle.signal()
            other.join()
        }
    }
}

/// The program of the two gate tests above, run in a child process.
enum DroppedCaptureGate {
    /// Holds a subscription's handler at a gate on thread H; drops (on thread D) a token whose
    /// closure captures an `Owner` whose `deinit` cancels that busy subscription; then, on thread
    /// U, runs `unrelatedDrops` drops of other tokens (or, with 0, subscribes and cancels a
    /// subscription that never runs). Exits 1 if U ran the `Owner`'s `deinit` (so waited for the
    /// gate) or if the captures were never released.
    static func currentThread() -> UInt { UInt(bitPattern: Int(bitPattern: pthread_self())) }

    static func run(unrelatedDrops: Int) {
        /// Which thread did what; every word is written once.
        final class Marks: Sendable {
            let ownerDeinitThread = Atomic<UInt>(0)
            let unrelatedThread = Atomic<UInt>(0)
            let unrelatedDone = Atomic<Bool>(false)
            let dropReturned = Atomic<Bool>(false)
        }
        final class Owner: Sendable {
            let busy: Subscription
            let marks: Marks
            init(busy: Subscription, marks: Marks) {
                self.busy = busy
                self.marks = marks
            }
            deinit {
                // Written before the deinit waits.
                marks.ownerDeinitThread.store(DroppedCaptureGate.currentThread(), ordering: .sequentiallyConsistent)
                busy.cancel()  // waits for the handler held at the gate
            }
        }
        let marks = Marks()
        let center = PostCenter()
        let gate = DispatchSemaphore(value: 0)
        let entered = DispatchSemaphore(value: 0)
        let busy = center.subscribe("gate.busy") { _ in
            entered.signal()
            gate.wait()
        }
        // Its record stays alive through the test, so that the drop below parks its entry in
        // the process-wide fence forms.
        let holder = TestThread { center.post("gate.busy") }
        entered.wait()
        _Retirements.holdsTimedJobForTesting.store(true, ordering: .relaxed)
        while _fenceAdaptive() && _Fence.symmetric { usleep(1_000) }
        let slot = TokenSlot()
        do {
            let owner = Owner(busy: busy, marks: marks)
            slot.token = center.subscribe("gate.owned") { _ in withExtendedLifetime(owner) {} }
        }
        let symmetricAtDrop = _Fence.symmetric
        let dropper = TestThread {
            slot.token = nil  // in the symmetric form this thread releases the captures and waits
            marks.dropReturned.store(true, ordering: .sequentiallyConsistent)
        }
        let dropSettled = eventually {
            marks.dropReturned.load(ordering: .sequentiallyConsistent)
                || marks.ownerDeinitThread.load(ordering: .sequentiallyConsistent) != 0
        }
        if !dropSettled {
            print("the drop of the owning token neither returned nor released its captures")
            exit(1)
        }
        if !symmetricAtDrop && marks.dropReturned.load(ordering: .sequentiallyConsistent) && _Retirements.count != 1 {
            print("the drop beside another thread's record did not park its entry in the process-wide fence form")
            exit(1)
        }
        // U stays alive until the end, so that no thread that starts later (the settling job's)
        // can have its identity.
        let endUnrelated = DispatchSemaphore(value: 0)
        let unrelated = TestThread {
            marks.unrelatedThread.store(currentThread(), ordering: .sequentiallyConsistent)
            if unrelatedDrops == 0 {
                center.subscribe("gate.never") { _ in }.cancel()
            } else {
                for _ in 0..<unrelatedDrops { _ = center.subscribe("gate.other") { _ in } }
            }
            marks.unrelatedDone.store(true, ordering: .sequentiallyConsistent)
            endUnrelated.wait()
        }
        let me = currentThread()
        let decided = eventually {
            let ranOn = marks.ownerDeinitThread.load(ordering: .sequentiallyConsistent)
            return marks.unrelatedDone.load(ordering: .sequentiallyConsistent)
                || (ranOn != 0 && [marks.unrelatedThread.load(ordering: .sequentiallyConsistent), me].contains(ranOn))
        }
        let done = marks.unrelatedDone.load(ordering: .sequentiallyConsistent)
        // Open the gate whatever happened, so that every thread can end.
        gate.signal()
        _Retirements.holdsTimedJobForTesting.store(false, ordering: .relaxed)
        holder.join()
        dropper.join()
        let released = eventually { marks.ownerDeinitThread.load(ordering: .sequentiallyConsistent) != 0 }
        // Read while U is alive: a thread's identity is unique among the live ones only.
        let ranOn = marks.ownerDeinitThread.load(ordering: .sequentiallyConsistent)
        let inUnrelated = ranOn != 0 && ranOn == marks.unrelatedThread.load(ordering: .sequentiallyConsistent)
        endUnrelated.signal()
        unrelated.join()
        if inUnrelated || ranOn == me {
            let what = unrelatedDrops == 0 ? "cancel" : "drop"
            print("an unrelated \(what) ran a dropped token's captures' deinit and waited for another handler")
            exit(1)
        }
        if !decided || !done {
            print("the unrelated operations did not return while the foreign handler was held")
            exit(1)
        }
        if !released {
            print("the dropped token's captures were never released")
            exit(1)
        }
    }
}
