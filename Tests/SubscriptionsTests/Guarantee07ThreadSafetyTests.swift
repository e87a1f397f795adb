import Dispatch
import Foundation
import SubscriptionsTestSupport
import Testing

@testable import Subscriptions

/// Guarantee 7: every method is safe from any thread at any time, including from inside
/// handlers, and no lock is held while user code runs.
///
/// The concurrent tests are bounded in operations and assert exact counts.
@Suite("Guarantee 7: every method is safe from any thread; no lock is held while user code runs")
struct Guarantee07ThreadSafety {
    @Test(.tags(.pin)) func concurrentSubscribePostAndCancelKeepExactCounts() {
        let center = PostCenter()
        let threads = 8
        let rounds = 200
        let stableCalls = (0..<4).map { _ in Counter() }
        let stable = stableCalls.map { calls in center.subscribe("shared") { _ in calls.increment() } }
        let transientCalls = Counter()
        let sharedReturned = Counter()
        let ownCalls = (0..<threads).map { _ in Counter() }
        let ownReturned = (0..<threads).map { _ in Counter() }

        DispatchQueue.concurrentPerform(iterations: threads) { i in
            let name = "own-\(i)"
            for round in 0..<rounds {
                let own = center.subscribe(name) { _ in ownCalls[i].increment() }
                let shared = center.subscribe(Topic<Int>("shared")) { _ in transientCalls.increment() }
                ownReturned[i].add(center.post(name))
                sharedReturned.add(center.post(Topic<Int>("shared"), round))
                if round % 2 == 0 { own.cancel() }
                shared.cancel()
                // Odd rounds end the subscription by releasing the token instead.
            }
        }

        for i in 0..<threads {
            #expect(ownCalls[i].count == rounds)
            #expect(ownReturned[i].count == rounds)
            #expect(center.subscriptionCount(for: "own-\(i)") == 0)
        }
        for calls in stableCalls { #expect(calls.count == threads * rounds) }
        // Every shared post reached the 4 stable subscribers, its own transient one, and maybe
        // other threads' transient ones: what post returned is exactly what ran.
        #expect(transientCalls.count >= threads * rounds)
        #expect(sharedReturned.count == 4 * threads * rounds + transientCalls.count)
        #expect(center.subscriptionCount(for: "shared") == 4)
        withExtendedLifetime(stable) {}
    }

    @Test(.tags(.pin)) func concurrentPostsReachEveryHandlerExactlyOnceInEachPostersOrder() {
        let center = PostCenter()
        let posters = 4
        let posts = 500
        let topic = Topic<Int>("numbers")
        let seen = (0..<3).map { _ in Recorder<Int>() }
        let tokens = seen.map { recorder in center.subscribe(topic) { recorder.append($0) } }
        DispatchQueue.concurrentPerform(iterations: posters) { p in
            for n in 0..<posts { center.post(topic, p * 1_000_000 + n) }
        }
        for recorder in seen {
            let values = recorder.values
            #expect(values.count == posters * posts)
            for p in 0..<posters {
                let mine = values.filter { $0 / 1_000_000 == p }.map { $0 % 1_000_000 }
                #expect(mine == Array(0..<posts))
            }
        }
        withExtendedLifetime(tokens) {}
    }

    @Test(.tags(.pin)) func concurrentCancelsOfTheSameTokenAreIdempotent() {
        let center = PostCenter()
        for _ in 0..<50 {
            let victimCalls = Counter()
            let otherCalls = Counter()
            let victim = center.subscribe("x") { _ in victimCalls.increment() }
            let other = center.subscribe("x") { _ in otherCalls.increment() }
            DispatchQueue.concurrentPerform(iterations: 6) { i in
                if i % 2 == 0 { victim.cancel() } else { center.post("x") }
            }
            let before = otherCalls.count
            #expect(center.post("x") == 1)
            #expect(otherCalls.count == before + 1)
            #expect(otherCalls.count == 4)
            #expect(victimCalls.count <= 3)
            #expect(!victim.isActive)
            other.cancel()
            #expect(center.subscriptionCount(for: "x") == 0)
        }
    }

    @Test(.tags(.pin)) func noHandlerStartsAfterCancelReturnsUnderConcurrentPosts() {
        let center = PostCenter()
        let subscriptions = 16
        let cancelled = (0..<subscriptions).map { _ in Flag() }
        let lateCalls = Counter()
        let calls = Counter()
        let tokens = (0..<subscriptions).map { k in
            center.subscribe("hot") { _ in
                if cancelled[k].isSet { lateCalls.increment() }
                calls.increment()
            }
        }
        let stop = Flag()
        let returned = Counter()
        let posters = (0..<2).map { _ in
            TestThread {
                var n = 0
                while !stop.isSet && n < 200_000 {
                    returned.add(center.post("hot"))
                    n += 1
                }
            }
        }
        for k in 0..<subscriptions {
            tokens[k].cancel()
            cancelled[k].set()
            usleep(200)
        }
        stop.set()
        for poster in posters { poster.join() }
        #expect(lateCalls.count == 0)
        #expect(returned.count == calls.count)
        #expect(center.subscriptionCount(for: "hot") == 0)
    }

    @Test(.tags(.pin)) func concurrentPauseAndResumeSettleToTheLastCall() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let tokens = (0..<4).map { i in center.subscribe("x") { _ in seen.append(i) } }
        DispatchQueue.concurrentPerform(iterations: 4) { t in
            for round in 0..<500 {
                switch (t + round) % 4 {
                case 0: tokens[t].pause()
                case 1: tokens[t].resume()
                case 2: _ = tokens[(t + 1) % 4].isActive
                default: center.post("x")
                }
            }
            tokens[t].resume()
        }
        seen.reset()
        #expect(tokens.filter(\.isActive).count == 4)
        #expect(center.post("x") == 4)
        #expect(seen.values == [0, 1, 2, 3])
    }

    @Test(.tags(.pin)) func observersDeallocatingWhilePostsRunEndCleanly() {
        final class Observer: Sendable {
            let calls: Counter
            init(_ calls: Counter) { self.calls = calls }
            func didPost(_ post: PostObject) { calls.increment() }
        }
        let center = PostCenter()
        let calls = Counter()
        let returned = Counter()
        var observers: [Observer] = (0..<64).map { _ in Observer(calls) }
        let tokens = observers.map { center.register("x", observer: $0, selector: Observer.didPost) }
        let stop = Flag()
        let poster = TestThread {
            var n = 0
            while !stop.isSet && n < 100_000 {
                returned.add(center.post("x"))
                n += 1
            }
        }
        while !observers.isEmpty {
            observers.removeLast()
            usleep(100)
        }
        stop.set()
        poster.join()
        #expect(returned.count == calls.count)
        #expect(center.subscriptionCount(for: "x") == 0)
        #expect(center.post("x") == 0)
        #expect(tokens.filter(\.isActive).isEmpty)
    }

    @Test(.tags(.pin)) func manyNamesFromManyThreads() {
        let center = PostCenter()
        let calls = Counter()
        let returned = Counter()
        DispatchQueue.concurrentPerform(iterations: 4) { t in
            var tokens: [Subscription] = []
            for i in 0..<250 {
                tokens.append(center.subscribe("t\(t)-n\(i)") { _ in calls.increment() })
            }
            for i in 0..<250 { returned.add(center.post("t\(t)-n\(i)")) }
            tokens.removeAll()
            for i in 0..<250 { returned.add(center.post("t\(t)-n\(i)")) }
        }
        #expect(calls.count == 1_000)
        #expect(returned.count == 1_000)
    }

    @Test(.tags(.pin)) func everyMethodIsCallableFromInsideAHandler() {
        final class Observer: Sendable {
            let seen: Recorder<String>
            init(_ seen: Recorder<String>) { self.seen = seen }
            func didPost(_ post: PostObject) { seen.append("observer:\(post.flag)") }
        }
        let center = PostCenter()
        let seen = Recorder<String>()
        let results = Recorder<Int>()
        let neighbour = TokenSlot()
        let made = Recorder<Subscription>()
        let observer = Observer(seen)
        let token = center.subscribe("x") { post in
            guard post.flag == "outer" else { return }
            var set = Set<Subscription>()
            center.subscribe("y") { seen.append("y:\($0.flag)") }.store(in: &set)
            center.subscribe(Topic<Int>("y")) { seen.append("y-int:\($0)") }.store(in: &set)
            made.append(center.register("y", observer: observer, selector: Observer.didPost))
            results.append(center.post("y", flag: "1"))
            results.append(center.post(Topic<Int>("y"), 2))
            results.append(center.post("y", PostObject(flag: "3")))
            results.append(center.subscriptionCount(for: "y"))
            results.append(center.subscriptionCount(for: "x"))
            neighbour.token?.pause()
            results.append(neighbour.token?.isActive == true ? 1 : 0)
            neighbour.token?.resume()
            results.append(neighbour.token?.isActive == true ? 1 : 0)
            results.append(center.post("x", flag: "inner"))
            neighbour.cancel()
            results.append(center.subscriptionCount(for: "x"))
            set.removeAll()
            results.append(center.subscriptionCount(for: "y"))
        }
        neighbour.token = center.subscribe("x") { seen.append("neighbour:\($0.flag)") }
        #expect(center.post("x", flag: "outer") == 1)
        #expect(results.values == [2, 3, 2, 3, 2, 0, 1, 2, 1, 1])
        #expect(
            seen.values == [
                "y:1", "observer:1", "y:", "y-int:2", "observer:", "y:3", "observer:3", "neighbour:inner",
            ])
        withExtendedLifetime((token, observer)) {}
    }

    @Test(.tags(.pin), .timeLimit(.minutes(1)))
    func otherThreadsCanUseTheNameWhileAHandlerRuns() {
        // A handler blocks until another thread has called into the center for the same name.
        // Were a lock held while the handler runs, that thread would block and the handler's
        // wait would time out (a deadlock guard, not a timing assertion).
        let center = PostCenter()
        let done = DispatchSemaphore(value: 0)
        let timedOut = Flag()
        let results = Recorder<Int>()
        // The helper's token is kept here and released after the post: a cancel on the helper
        // thread would wait for this delivery (guarantee 8), which waits for the helper.
        let kept = Recorder<Subscription>()
        let other = center.subscribe("x") { post in
            guard post.flag == "slow" else { return }
            let helper = TestThread {
                let token = center.subscribe("x") { _ in }
                results.append(center.subscriptionCount(for: "x"))
                results.append(center.post("x", flag: "from-helper"))
                token.pause()
                results.append(token.isActive ? 1 : 0)
                token.resume()
                results.append(center.subscriptionCount(for: "x"))
                kept.append(token)
                done.signal()
            }
            if done.wait(timeout: .now() + 10) == .timedOut { timedOut.set() }
            helper.join()
        }
        #expect(center.post("x", flag: "slow") == 1)
        #expect(!timedOut.isSet)
        #expect(results.values == [2, 2, 0, 2])
        withExtendedLifetime(other) {}
    }

    @Test(.tags(.pin)) func theAPIIsUsableFromDetachedTasks() async {
        let center = PostCenter()
        let calls = Counter()
        let tokens = (0..<3).map { _ in center.subscribe(Topic<Int>("async")) { _ in calls.increment() } }
        let total = await withTaskGroup(of: Int.self) { group in
            for i in 0..<8 {
                group.addTask {
                    await Task.detached {
                        let own = center.subscribe("async-\(i)") { _ in calls.increment() }
                        var sum = 0
                        for n in 0..<50 { sum += center.post(Topic<Int>("async"), n) }
                        sum += center.post("async-\(i)")
                        own.cancel()
                        return sum
                    }.value
                }
            }
            return await group.reduce(0, +)
        }
        #expect(total == 8 * (50 * 3 + 1))
        #expect(calls.count == total)
        withExtendedLifetime(tokens) {}
    }

    // MARK: Guarantee 7: an orphan's captures are released with no lock held

    /// A handler cancels its own subscription (the entry becomes an orphan, released when the
    /// call ends). The deinit of one of its captures uses the center from another thread, in a
    /// way that parks an orphan too, and waits (bounded) for it: were the orphan released while
    /// the engine holds a lock, that other thread would block on it.
    @Test(.tags(.mutantPin)) func anOrphansCapturesAreReleasedWithNoLockHeld() {
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
