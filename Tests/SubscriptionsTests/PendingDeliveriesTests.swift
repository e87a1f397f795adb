import Dispatch
import Foundation
import Subscriptions
import SubscriptionsTestSupport
import Synchronization
import Testing

@Suite("Waiting for pending deliveries")
struct PendingDeliveriesTests {
    @Test func returnsAtOnceWhenNothingIsPending() async {
        let center = PostCenter()
        let token = center.subscribe("now") { _ in }
        center.post("now")
        await center.waitForPendingDeliveries()
        #expect(center.subscriptionCount(for: "now") == 1)
        withExtendedLifetime(token) {}
    }

    @Test func returnsOnceEveryQueuedDeliveryRan() async {
        let center = PostCenter()
        let queue = DispatchQueue(label: "pending.queue")
        let other = DispatchQueue(label: "pending.other")
        let seen = Recorder<Int>()
        queue.suspend()
        other.suspend()
        let a = center.subscribe(Topic<Int>("pending"), delivery: .queue(queue)) { seen.append($0) }
        let b = center.subscribe(Topic<Int>("pending"), delivery: .queue(other)) { seen.append($0 * 10) }
        for i in 1...50 { center.post(Topic<Int>("pending"), i) }
        #expect(seen.count == 0)
        let resumer = TestThread {
            queue.resume()
            other.resume()
        }
        await center.waitForPendingDeliveries()
        #expect(seen.count == 100)
        await resumer.joined()
        withExtendedLifetime((a, b)) {}
    }

    @Test func deliveriesDroppedByCancelOrPauseCountAsDone() async {
        let center = PostCenter()
        let queue = DispatchQueue(label: "pending.dropped")
        let seen = Counter()
        queue.suspend()
        let cancelled = center.subscribe("dropped", delivery: .queue(queue)) { _ in seen.increment() }
        let paused = center.subscribe("dropped", delivery: .queue(queue)) { _ in seen.increment() }
        center.post("dropped")
        cancelled.cancel()
        paused.pause()
        queue.resume()
        await center.waitForPendingDeliveries()
        #expect(seen.count == 0)
        withExtendedLifetime(paused) {}
    }

    @Test func waitsForMainActorDeliveriesPostedFromOtherThreads() async {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let token = center.subscribe(Topic<Int>("pending.main"), delivery: .mainActor) { value in
            seen.append(value)
        }
        // Hold the main queue until the waiter is about to wait, so that the deliveries are still
        // pending when it starts.
        let gate = DispatchSemaphore(value: 0)
        DispatchQueue.main.async { gate.wait() }
        let poster = TestThread { for i in 1...2000 { center.post(Topic<Int>("pending.main"), i) } }
        await poster.joined()
        // Released from a thread, not a task: the main queue must not wait for Swift's
        // cooperative pool, which other tests may hold meanwhile (and which waits for it).
        _ = TestThread { gate.signal() }
        // Waited for off the main actor, so that only the wait can order it after the deliveries.
        let observed = await Task.detached {
            await center.waitForPendingDeliveries()
            return seen.values
        }.value
        #expect(observed == Array(1...2000))
        withExtendedLifetime(token) {}
    }

    @Test func eachCenterWaitsOnlyForItsOwnDeliveries() async {
        let center = PostCenter()
        let other = PostCenter()
        let stuck = DispatchQueue(label: "pending.stuck")
        stuck.suspend()
        let token = other.subscribe("stuck", delivery: .queue(stuck)) { _ in }
        other.post("stuck")
        await center.waitForPendingDeliveries()
        #expect(other.subscriptionCount(for: "stuck") == 1)
        stuck.resume()
        await other.waitForPendingDeliveries()
        withExtendedLifetime(token) {}
    }
}
