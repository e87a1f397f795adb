import Dispatch
import Foundation
import SubscriptionsTestSupport
import Synchronization
import Testing

@testable import Subscriptions

/// Guarantee 8: when `cancel()` returns, the handler is not running on any other thread and never
/// starts again, and its closure is released; cancelling from a thread that is itself running
/// that handler (at any depth) returns at once; a token's deinit never waits.
///
/// No assertion depends on timing: waits are bounded, so that a deadlock fails instead of
/// hanging, and sleeps and semaphores only arrange the threads.
@Suite("Guarantee 8: when cancel() returns the handler is not running and never starts again")
struct Guarantee08CancelWaits {
    // MARK: Guarantee 8, cancelling from another thread

    /// Posts `name` from a new thread, `count` times, and returns the thread and the summed result.
    private func postRepeatedly(_ center: PostCenter, _ name: String, count: Int) -> (TestThread, Counter) {
        let returned = Counter()
        let thread = TestThread {
            for _ in 0..<count { returned.add(center.post(name)) }
        }
        return (thread, returned)
    }

    @Test(.tags(.pin)) func cancelFromAnotherThreadWaitsForRunningHandler() {
        let center = PostCenter()
        let started = DispatchSemaphore(value: 0)
        let cancelling = Flag()
        let cancelReturned = Flag()
        let finished = Flag()
        let calls = Counter()
        let callsAfterCancelReturned = Counter()
        let token = center.subscribe("x") { _ in
            if cancelReturned.isSet { callsAfterCancelReturned.increment() }
            calls.increment()
            guard calls.count == 1 else { return }
            started.signal()
            while !cancelling.isSet {}
            usleep(20_000)  // give cancel() time to start waiting; it must wait this out
            finished.set()
        }
        let (poster, returned) = postRepeatedly(center, "x", count: 2_000)
        started.wait()
        cancelling.set()
        token.cancel()
        cancelReturned.set()
        #expect(finished.isSet)
        #expect(!token.isActive)
        poster.join()
        #expect(callsAfterCancelReturned.count == 0)
        #expect(returned.count == calls.count)
        #expect(center.subscriptionCount(for: "x") == 0)
    }

    @Test(.tags(.pin)) func tokenDeinitOnAnotherThreadDoesNotWaitForRunningHandler() {
        // The handler runs on the poster thread and waits for the deinit to have returned: a
        // deinit that waited for it would time out here.
        let center = PostCenter()
        let started = DispatchSemaphore(value: 0)
        let dropped = DispatchSemaphore(value: 0)
        let deinitWaited = Flag()
        let captures = Reliability.Tally()
        let calls = Counter()
        var token: Subscription? = {
            let capture = Reliability.Capture(captures)
            return center.subscribe("x") { _ in
                withExtendedLifetime(capture) {}
                calls.increment()
                guard calls.count == 1 else { return }
                started.signal()
                if dropped.wait(timeout: .now() + 5) == .timedOut { deinitWaited.set() }
            }
        }()
        let poster = TestThread { center.post("x") }
        started.wait()
        token = nil  // the last reference: the deinit cancels without waiting
        dropped.signal()
        poster.join()
        #expect(token == nil)
        #expect(!deinitWaited.isSet, "the token's deinit waited for the handler running on another thread")
        // The closure went when the running call ended.
        #expect(captures.current == 0)
        #expect(center.post("x") == 0)
        #expect(calls.count == 1)
    }

    @Test(.tags(.pin)) func cancelFromAnotherThreadWaitsForRunningQueuedHandler() {
        let center = PostCenter()
        let queue = makeSerialQueue("cancel.running")
        let started = DispatchSemaphore(value: 0)
        let cancelling = Flag()
        let finished = Flag()
        let calls = Counter()
        let token = center.subscribe("x", delivery: .queue(queue)) { _ in
            calls.increment()
            guard calls.count == 1 else { return }
            started.signal()
            while !cancelling.isSet {}
            usleep(20_000)
            finished.set()
        }
        for _ in 0..<10 { #expect(center.post("x") == 1) }
        started.wait()
        cancelling.set()
        token.cancel()
        #expect(finished.isSet)
        queue.sync {}
        // The nine deliveries still queued when cancel() returned never run.
        #expect(calls.count == 1)
    }

    // MARK: Guarantee 8, cancelling from inside the handler

    @Test(.tags(.pin)) func cancelFromInsideItsOwnHandlerReturns() {
        let center = PostCenter()
        let slot = TokenSlot()
        let calls = Counter()
        let activeAfterCancel = Recorder<Bool>()
        slot.token = center.subscribe("x") { _ in
            calls.increment()
            slot.cancel()
            activeAfterCancel.append(slot.token?.isActive ?? true)
        }
        #expect(center.post("x") == 1)
        #expect(center.post("x") == 0)
        #expect(calls.count == 1)
        #expect(activeAfterCancel.values == [false])
    }

    @Test(.tags(.pin)) func cancelFromInsideItsOwnHandlerAtDepthThreeReturns() {
        let center = PostCenter()
        let slot = TokenSlot()
        let seen = Recorder<String>()
        var tokens = Set<Subscription>()
        slot.token = center.subscribe("x") { _ in
            seen.append("x")
            center.post("y")
            seen.append("x-end")
        }
        center.subscribe("y") { _ in
            seen.append("y")
            center.post("z")
        }.store(in: &tokens)
        center.subscribe("z") { _ in
            seen.append("z")
            slot.cancel()
            seen.append("z-cancelled")
        }.store(in: &tokens)
        #expect(center.post("x") == 1)
        #expect(seen.values == ["x", "y", "z", "z-cancelled", "x-end"])
        #expect(center.post("x") == 0)
        #expect(slot.token?.isActive == false)
        #expect(center.subscriptionCount(for: "x") == 0)
    }

    @Test(.tags(.pin)) func droppingTheLastTokenReferenceInsideItsOwnHandlerReturns() {
        let center = PostCenter()
        let slot = TokenSlot()
        let calls = Counter()
        slot.token = center.subscribe("x") { _ in
            calls.increment()
            slot.token = nil  // deinit of the token while its handler runs
        }
        #expect(center.post("x") == 1)
        #expect(center.post("x") == 0)
        #expect(calls.count == 1)
    }

    @Test(.tags(.pin)) func cancelFromInsideAQueuedHandlerReturns() {
        let center = PostCenter()
        let queue = makeSerialQueue("cancel.self")
        let slot = TokenSlot()
        let calls = Counter()
        queue.suspend()
        slot.token = center.subscribe("x", delivery: .queue(queue)) { _ in
            calls.increment()
            slot.cancel()
        }
        #expect(center.post("x") == 1)
        #expect(center.post("x") == 1)
        queue.resume()
        queue.sync {}
        #expect(calls.count == 1)
    }

    @Test(.tags(.pin), .timeLimit(.minutes(1)))
    func cancelFromOwnHandlerDoesNotWaitForAnotherSubscriptionsHandler() {
        // Thread 1 runs A's handler, which cancels A. Thread 2 is inside B's handler (same name)
        // and waits for thread 1 to get past that cancel. Nobody runs A on another thread, so
        // A's cancel must return at once; if it waits for thread 2's delivery, thread 2's wait
        // times out (a deadlock guard, not a timing assertion).
        let center = PostCenter()
        let bStarted = DispatchSemaphore(value: 0)
        let aCancelled = DispatchSemaphore(value: 0)
        let bTimedOut = Flag()
        let a = TokenSlot()
        let aCalls = Recorder<String>()
        let b = center.subscribe("x") { post in
            guard post.flag == "t2" else { return }
            bStarted.signal()
            if aCancelled.wait(timeout: .now() + 10) == .timedOut { bTimedOut.set() }
        }
        a.token = center.subscribe("x") { post in
            aCalls.append(post.flag)
            guard post.flag == "t1" else { return }
            bStarted.wait()
            a.cancel()
            aCancelled.signal()
        }
        let t1 = TestThread { center.post("x", flag: "t1") }
        let t2 = TestThread { center.post("x", flag: "t2") }
        t1.join()
        t2.join()
        #expect(!bTimedOut.isSet, "cancel() from A's own handler waited for B's handler on another thread")
        #expect(aCalls.values == ["t1"])
        withExtendedLifetime(b) {}
    }

    @Test(.tags(.pin), .timeLimit(.minutes(1)))
    func cancelDoesNotWaitForOtherHandlersOfTheSameName() {
        // The one deadlock guarantee 8 allows is cancelling while holding a lock that *the
        // cancelled* handler waits for. Here B's handler, running on another thread, waits for
        // the cancelling thread (as a handler doing `DispatchQueue.main.sync` waits for a main
        // thread that cancels an unrelated token of the same name). A's handler is not running,
        // so cancelling A must not wait for B.
        let center = PostCenter()
        let bStarted = DispatchSemaphore(value: 0)
        let aCancelled = DispatchSemaphore(value: 0)
        let bTimedOut = Flag()
        let aCalls = Counter()
        let b = center.subscribe("x") { _ in
            bStarted.signal()
            if aCancelled.wait(timeout: .now() + 10) == .timedOut { bTimedOut.set() }
        }
        let a = center.subscribe("x") { _ in aCalls.increment() }
        let poster = TestThread { center.post("x") }
        bStarted.wait()
        a.cancel()
        aCancelled.signal()
        poster.join()
        #expect(!bTimedOut.isSet, "cancel() of A waited for B's handler, which was waiting for the canceller")
        #expect(aCalls.count == 0)
        withExtendedLifetime(b) {}
    }

    @Test(.tags(.pin)) func twoThreadsCancellingTheirOwnHandlersAtOnceBothReturn() async {
        // Each thread is inside its own subscription's handler (same name) when both cancel
        // themselves. Each cancel must return at once; waiting for the other thread's delivery
        // deadlocks both. Runs in a child process with a watchdog, so a deadlock fails this test
        // (exit code 2) instead of hanging the run. Success is exit code 42, not 0, so that a
        // ThreadSanitizer run (which turns a zero status into 66 when it reported anything,
        // including its false positives on `Mutex`) still tells the two outcomes apart.
        await #expect(processExitsWith: .exitCode(42)) {
            let watchdog = Thread {
                sleep(3)
                _exit(2)
            }
            watchdog.start()
            let center = PostCenter()
            let inA = DispatchSemaphore(value: 0)
            let inB = DispatchSemaphore(value: 0)
            let a = TokenSlot()
            let b = TokenSlot()
            a.token = center.subscribe("x") { post in
                guard post.flag == "a" else { return }
                inA.signal()
                inB.wait()
                a.cancel()
            }
            b.token = center.subscribe("x") { post in
                guard post.flag == "b" else { return }
                inB.signal()
                inA.wait()
                b.cancel()
            }
            let t1 = TestThread { center.post("x", flag: "a") }
            let t2 = TestThread { center.post("x", flag: "b") }
            t1.join()
            t2.join()
            _exit(center.subscriptionCount(for: "x") == 0 ? 42 : 3)
        }
    }
}
