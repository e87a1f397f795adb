import Dispatch
import Foundation
import Subscriptions
import Synchronization
import Testing

/// Main-actor state the handlers below write to; only touched on the main actor.
@MainActor private final class Screen {
    var received: [String] = []
    var token: Subscription?

    func didLogin(_ post: PostObject) {
        MainActor.assertIsolated()
        received.append("selector:" + post.flag)
    }
}

/// Waits until everything the main queue had when this was called has run.
@MainActor private func drainMainQueue() async {
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        DispatchQueue.main.async { done.resume() }
    }
}

@Suite("Main-actor delivery")
struct MainActorDeliveryTests {
    @Test @MainActor func postOnMainThreadRunsMainActorHandlersSynchronouslyInOrder() {
        let center = PostCenter()
        let screen = Screen()
        let a = center.subscribe("login", delivery: .mainActor) { post in
            MainActor.assertIsolated()
            screen.received.append("a:" + post.flag)
        }
        screen.token = center.register("login", observer: screen, delivery: .mainActor, selector: Screen.didLogin)
        let b = center.subscribe("login", delivery: .mainActor) { post in screen.received.append("b:" + post.flag) }

        #expect(center.post("login", flag: "1") == 3)
        // Synchronous: already recorded when `post` returned, in subscription order.
        #expect(screen.received == ["a:1", "selector:1", "b:1"])
        withExtendedLifetime((a, b)) {}
    }

    @Test @MainActor func postFromBackgroundThreadHopsToMainActorInPostOrderWithoutBlocking() async {
        let center = PostCenter()
        let screen = Screen()
        let topic = Topic<Int>("count")
        let token = center.subscribe(topic, delivery: .mainActor) { value in
            MainActor.assertIsolated()
            screen.received.append(String(value))
        }
        let returned = await Task.detached {
            // The main actor is free (the test awaits), but `post` must not wait for it anyway:
            // record how many deliveries had already happened when each post returned.
            var counts: [Int] = []
            for i in 0..<5 { counts.append(center.post(topic, i)) }
            return counts
        }.value
        #expect(returned == [1, 1, 1, 1, 1])
        await drainMainQueue()
        #expect(screen.received == ["0", "1", "2", "3", "4"])
        withExtendedLifetime(token) {}
    }

    @Test @MainActor func mainActorDeliveryCancelledBeforeItRunsIsDropped() async {
        let center = PostCenter()
        let screen = Screen()
        let token = center.subscribe("x", delivery: .mainActor) { _ in screen.received.append("ran") }
        // Post from another thread while this test keeps the main actor busy: the delivery
        // must wait in the main queue, and `post` must return without it.
        let posted = DispatchSemaphore(value: 0)
        let scheduled = Mutex(0)
        Thread.detachNewThread {
            scheduled.withLock { $0 = center.post("x") }
            posted.signal()
        }
        posted.wait()
        #expect(scheduled.withLock { $0 } == 1)
        #expect(screen.received.isEmpty)
        token.cancel()
        await drainMainQueue()
        #expect(screen.received.isEmpty)
    }

    @Test @MainActor func selectorRegistrationFromMainActorClassRunsOnMainActorFromBackground() async {
        let center = PostCenter()
        let screen = Screen()
        screen.token = center.register("login", observer: screen, delivery: .mainActor, selector: Screen.didLogin)
        _ = await Task.detached { center.post("login", flag: "bg") }.value
        await drainMainQueue()
        #expect(screen.received == ["selector:bg"])
    }
}
