import Dispatch
import Foundation
import SubscriptionsTestSupport
import Testing

@testable import Subscriptions

/// The library's lock (`_PlatformMutex`: a futex lock of the module's own atomics on Linux,
/// `Mutex` on Apple platforms and in the `SUBSCRIPTIONS_MUTEX_LOCK` build), on which every
/// registration, cancel, pause and retained post of a name relies (Guarantee 7).
@Suite("The library's lock: one thread inside at a time; a thread that waits for it is let in")
struct PlatformLockTests {
    /// What the lock guards in these tests: plain, non-atomic fields.
    struct Guarded {
        var inside = 0
        var total = 0
        var overlaps = 0
    }

    /// A box for the lock, shared by the threads.
    final class Shared: @unchecked Sendable {
        // @unchecked: `lock` is the thing under test; its state is only reached inside it.
        let lock = _PlatformMutex(Guarded())
    }

    @Test(.tags(.pin)) func oneThreadAtATimeRunsInsideTheLockAndNoUpdateIsLost() {
        let shared = Shared()
        let threads = 4
        let sections = 20_000
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<sections {
                shared.lock.withLock { state in
                    if state.inside != 0 { state.overlaps += 1 }
                    state.inside = 1
                    // A read-modify-write spread over a few steps: two threads inside at once
                    // lose updates.
                    let before = state.total
                    var spin = 0
                    for i in 0..<8 { spin &+= i &* before }
                    state.total = before &+ 1 &+ (spin & 0)
                    state.inside = 0
                }
            }
        }
        let result = shared.lock.withLock { $0 }
        #expect(result.overlaps == 0)
        #expect(result.total == threads * sections)
    }

    /// A thread that finds the lock held waits (on Linux it sleeps on the futex) and is let in
    /// when the holder leaves, after the holder's section: it sees what the holder wrote. A
    /// release that forgot to wake it would leave it asleep: the join's bound reports that.
    @Test(.tags(.pin)) func aThreadThatWaitsForTheLockIsLetInAfterTheHoldersSection() {
        let shared = Shared()
        for round in 1...20 {
            let held = DispatchSemaphore(value: 0)
            let waiterStarted = DispatchSemaphore(value: 0)
            let holder = TestThread {
                shared.lock.withLock { state in
                    held.signal()
                    waiterStarted.wait()
                    // Not a timing assertion: the pause only makes it likely that the waiter is
                    // asleep on the lock when it is released; the checks hold either way.
                    usleep(2_000)
                    state.total = round * 10
                }
            }
            held.wait()
            let saw = Recorder<Int>()
            let waiter = TestThread {
                waiterStarted.signal()
                let seen = shared.lock.withLock { state -> Int in
                    state.total += 1
                    return state.total
                }
                saw.append(seen)
            }
            #expect(holder.join(timeout: 30))
            let wokenUp = waiter.join(timeout: 30)
            #expect(wokenUp, "round \(round): a thread waiting for the lock was never let in")
            guard wokenUp else { return }
            #expect(saw.values == [round * 10 + 1])
        }
    }
}
