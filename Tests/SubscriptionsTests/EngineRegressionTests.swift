import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Subscriptions

/// Regressions for engine bugs found while building other features.
@Suite("Engine regressions")
struct EngineBugTests {
    /// Two threads post the same name; from inside the same (first) handler each cancels a
    /// different later subscription of it. Neither cancelled handler is running, so neither
    /// cancel may wait for the other thread. (The engine once waited for every delivery of the
    /// name on other threads, and both threads hung forever.)
    ///
    /// The deadlock is detected with a generous bound instead of hanging the suite. On failure
    /// the two deadlocked threads are left behind, sleeping in the cancel's backoff, and the
    /// tokens are leaked on purpose: releasing them would cancel, and wait for those threads.
    @Test
    func cancelFromHandlersOnTwoThreadsDoesNotDeadlock() {
        let center = PostCenter()
        let tokens = Tokens()
        let arrived = SharedCounter()
        // `tokens` is captured weakly: it holds this handler's own token, so a strong capture
        // would be a cycle (token → handler → tokens → token) that LeakSanitizer reports. The
        // test's `tokens` outlives every post, so the handler always finds it.
        tokens.first = center.subscribe("x") { [weak tokens] post in
            arrived.value.add(1, ordering: .sequentiallyConsistent)
            // Wait until both threads are inside a post of "x" (bounded: the other thread has
            // already started posting, or starts within a few scheduling rounds).
            while arrived.value.load(ordering: .sequentiallyConsistent) < 2 { sched_yield() }
            if post.flag == "A" { tokens?.second?.cancel() } else { tokens?.third?.cancel() }
        }
        tokens.second = center.subscribe("x") { _ in }
        tokens.third = center.subscribe("x") { _ in }
        let done = DispatchSemaphore(value: 0)
        for flag in ["A", "B"] {
            Thread.detachNewThread {
                center.post("x", flag: flag)
                done.signal()
            }
        }
        let deadline = DispatchTime.now() + 3
        let finished = done.wait(timeout: deadline) == .success && done.wait(timeout: deadline) == .success
        if !finished { _ = Unmanaged.passRetained(tokens) }
        #expect(finished, "cross-thread cancels from handlers waited for each other")
        if finished {
            #expect(tokens.second?.isActive == false)
            #expect(tokens.third?.isActive == false)
        }
    }
}

private final class Tokens: @unchecked Sendable {
    // @unchecked: written before the posting threads start, then only read (cancel is thread-safe).
    var first: Subscription?
    var second: Subscription?
    var third: Subscription?
}

private final class SharedCounter: Sendable {
    let value = Atomic<Int>(0)
}
