import Dispatch
import Foundation
import SubscriptionsTestSupport
import Synchronization
import Testing

@testable import Subscriptions

extension Guarantee08CancelWaits {
    /// A token's deinit never waits and needs no heavy fence of its own: its entry joins a batch that
    /// one fence settles (`Engine/Retirements.swift`).
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
