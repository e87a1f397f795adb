import Dispatch
import Foundation
import SubscriptionsTestSupport
import Synchronization
import Testing

@testable import Subscriptions

extension Guarantee08CancelWaits {
    /// On Linux the fence form moves at run time (Engine/DESIGN.md, "Fence mode selection"): a heavy fence that
    /// has to interrupt another thread switches the process to the symmetric form, in which
    /// cancels beside a posting thread need no process-wide fence, and it switches back once no
    /// cancel used that form for `_Fence.decayInterval`. `SUBSCRIPTIONS_PROCESS_FENCE=off` (and
    /// platforms without membarrier) keep the symmetric form, `=asymmetric` the asymmetric one;
    /// CI runs the suite in all three. Child processes, so that no other test's thread moves the
    /// form or holds a record.
    @Suite("The fence form moves between asymmetric and symmetric", .tags(.pin))
    struct AdaptiveFence {
        /// Cancels beside a posting thread: in the adaptive form the first runs the process-wide
        /// fence and switches to symmetric, the next 200 run none, and once they stop the form
        /// goes back to asymmetric. The fixed forms run one fence per cancel (asymmetric) or none
        /// (symmetric), and never move.
        ///
        /// A switch back needs `_Fence.decayInterval` (10 ms) without a cancel: a machine that
        /// stalls this thread that long between two cancels switches back legitimately, and the
        /// next cancel then starts a new symmetric period with one process-wide fence. The
        /// switch-back attempts are counted (`_fenceSwitchOffAttempts`), and a fence or a parked
        /// drop is held against the form only when no attempt came between.
        @Test func cancelsBesideAPostingThreadRunOneProcessWideFenceThenNoneUntilTheFormSwitchesBack() async {
            let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
                let center = PostCenter()
                let stop = Atomic<Bool>(false)
                let poster = TestThread {
                    while !stop.load(ordering: .relaxed) { center.post("adaptive.other") }
                }
                while _ThreadRecord.claimedCount < 1 { usleep(1_000) }
                let before = _ThreadRecord.heavyFenceCount
                let attemptsBefore = _fenceSwitchOffAttempts()
                center.subscribe("adaptive") { _ in }.cancel()
                let first = _ThreadRecord.heavyFenceCount - before
                let symmetricAfterFirst = _Fence.symmetric
                // Still symmetric after the first cancel, unless a switch back may have come.
                let stayedAfterFirst = symmetricAfterFirst || _fenceSwitchOffAttempts() != attemptsBefore
                let middle = _ThreadRecord.heavyFenceCount
                let attemptsMiddle = _fenceSwitchOffAttempts()
                for _ in 0..<200 { center.subscribe("adaptive") { _ in }.cancel() }
                let next = _ThreadRecord.heavyFenceCount - middle
                // A process-wide fence in the loop only for a new symmetric period: at most two
                // per switch-back attempt (one by a cancel that found the switch under way, one
                // that switched on again), so 0 when nothing stalled the loop.
                let switchBacks = _fenceSwitchOffAttempts() - attemptsMiddle
                // A drop beside the posting thread: at once in the symmetric form (Guarantees.md,
                // rule 8), parked for a batch in the asymmetric one.
                let live = Reliability.Tally()
                do {
                    let capture = Reliability.Capture(live)
                    var token: Subscription? = center.subscribe("adaptive") { _ in withExtendedLifetime(capture) {} }
                    _ = consume capture
                    let attemptsBeforeDrop = _fenceSwitchOffAttempts()
                    let symmetricBeforeDrop = _Fence.symmetric
                    token = nil
                    let switchedMeanwhile = _fenceSwitchOffAttempts() != attemptsBeforeDrop
                    if symmetricBeforeDrop && !switchedMeanwhile && live.current != 0 {
                        print("a drop in the symmetric form did not release its captures at once")
                    }
                    _ = token
                }
                // No more cancels: the form goes back (bounded wait, `eventually`'s 10 s).
                _ = eventually { !_fenceAdaptive() || !_Fence.symmetric }
                let symmetricAtEnd = _Fence.symmetric
                stop.store(true, ordering: .relaxed)
                poster.join()
                let seen =
                    "first cancel: \(first) fences, symmetric after it: \(symmetricAfterFirst);"
                    + " next 200: \(next) fences, \(switchBacks) switch-back attempts;"
                    + " symmetric at the end: \(symmetricAtEnd)"
                let asExpected: Bool
                if _fenceAdaptive() {
                    asExpected = first >= 1 && stayedAfterFirst && next <= 2 * switchBacks && !symmetricAtEnd
                } else if _processFenceAvailable() {
                    // One per cancel, and one more for each reclaim of replaced slot buffers.
                    asExpected = first >= 1 && !symmetricAfterFirst && next >= 200 && !symmetricAtEnd
                } else {
                    asExpected = first == 0 && symmetricAfterFirst && next == 0 && symmetricAtEnd
                }
                // Printed, not an exit status: the parent shows what the child saw.
                if !asExpected { print(seen) }
            }
            let printed = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
            #expect(result != nil && printed.isEmpty, "the child process saw: \(printed)")
        }

        /// The switch happens under load: posting threads run while cancels come in bursts with
        /// pauses longer than the decay interval between them, so the form switches on and off
        /// many times while posts walk the name and read the slots. No handler runs after its
        /// `cancel()` returned, in any of the switches.
        @Test(.tags(.stress)) func noHandlerRunsAfterItsCancelReturnedWhileTheFormSwitches() {
            let center = PostCenter()
            let name = "adaptive.switching"
            let stop = Flag()
            let violations = Counter()
            let posters = (0..<2).map { _ in
                TestThread { while !stop.isSet { center.post(name) } }
            }
            for _ in 0..<12 {
                for _ in 0..<Reliability.scaled(500, minimum: 100) {
                    let returned = Flag()
                    let token = center.subscribe(name) { _ in
                        for _ in 0..<64 where returned.isSet {
                            violations.increment()
                            break
                        }
                    }
                    token.cancel()
                    returned.set()
                }
                usleep(15_000)  // longer than the decay interval: the form may switch back
            }
            stop.set()
            for poster in posters { poster.join() }
            #expect(violations.count == 0, "a handler ran after the cancel() of its subscription returned")
            #expect(center.post(name) == 0)
        }
    }
}
