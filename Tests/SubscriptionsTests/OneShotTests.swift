import Dispatch
import Subscriptions
import Synchronization
import Testing

@Suite("One-shot subscriptions")
struct OneShotTests {
    @Test func oneShotDeliversOnlyTheFirstPostAndBecomesInactive() {
        let center = PostCenter()
        let calls = Mutex<[String]>([])
        let token = center.subscribe("x", once: true) { post in calls.withLock { $0.append(post.flag) } }
        #expect(token.isActive)
        #expect(center.subscriptionCount(for: "x") == 1)
        #expect(center.post("x", flag: "first") == 1)
        #expect(!token.isActive)
        #expect(center.subscriptionCount(for: "x") == 0)
        #expect(center.post("x", flag: "second") == 0)
        #expect(calls.withLock { $0 } == ["first"])
        token.pause()
        token.resume()  // a fired one-shot stays inactive
        #expect(!token.isActive)
        #expect(center.post("x", flag: "third") == 0)
        token.cancel()  // harmless after it fired
    }

    @Test func oneShotFiresExactlyOnceUnderConcurrentPosts() {
        let center = PostCenter()
        let topic = Topic<Int>("race")
        for _ in 0..<200 {
            let calls = Atomic<Int>(0)
            let returned = Atomic<Int>(0)
            let token = center.subscribe(topic, once: true) { _ in calls.add(1, ordering: .relaxed) }
            DispatchQueue.concurrentPerform(iterations: 4) { i in
                for _ in 0..<5 { returned.add(center.post(topic, i), ordering: .relaxed) }
            }
            #expect(calls.load(ordering: .relaxed) == 1)
            #expect(returned.load(ordering: .relaxed) == 1)
            #expect(!token.isActive)
        }
    }

    @Test func oneShotOnAQueueRunsItsWonDeliveryOnce() {
        let center = PostCenter()
        let queue = DispatchQueue(label: "once")
        let calls = Mutex<[Int]>([])
        let token = center.subscribe(Topic<Int>("q"), delivery: .queue(queue), once: true) { v in
            calls.withLock { $0.append(v) }
        }
        #expect(center.post(Topic<Int>("q"), 1) == 1)
        #expect(center.post(Topic<Int>("q"), 2) == 0)
        queue.sync {}
        #expect(calls.withLock { $0 } == [1])
        withExtendedLifetime(token) {}
    }

    @Test func oneShotCancelledBeforeAnyPostNeverRuns() {
        let center = PostCenter()
        let calls = Atomic<Int>(0)
        let token = center.subscribe("x", once: true) { _ in calls.add(1, ordering: .relaxed) }
        token.cancel()
        #expect(center.post("x") == 0)
        #expect(calls.load(ordering: .relaxed) == 0)
    }
}
