import Subscriptions
import Synchronization
import Testing

private final class Sender {}

@Suite("Sender filtering")
struct SenderFilterTests {
    @Test func filteredSubscriptionReceivesOnlyPostsFromItsSender() {
        let center = PostCenter()
        let a = Sender()
        let b = Sender()
        let log = Mutex<[String]>([])
        let fromA = center.subscribe("x", from: a) { post in log.withLock { $0.append("A:" + post.flag) } }
        let all = center.subscribe("x") { post in log.withLock { $0.append("all:" + post.flag) } }

        #expect(center.post("x", PostObject(flag: "1"), from: a) == 2)
        #expect(center.post("x", PostObject(flag: "2"), from: b) == 1)
        #expect(center.post("x", flag: "3") == 1)
        #expect(log.withLock { $0 } == ["A:1", "all:1", "all:2", "all:3"])
        withExtendedLifetime((fromA, all)) {}
    }

    @Test func typedSenderFilter() {
        let center = PostCenter()
        let topic = Topic<Int>("n")
        let a = Sender()
        let sum = Mutex(0)
        let token = center.subscribe(topic, from: a) { v in sum.withLock { $0 += v } }
        #expect(center.post(topic, 5, from: a) == 1)
        #expect(center.post(topic, 7) == 0)
        #expect(center.post(topic, 11, from: Sender()) == 0)
        #expect(sum.withLock { $0 } == 5)
        withExtendedLifetime(token) {}
    }

    @Test func senderIsHeldWeaklyAndItsDeathEndsTheSubscription() {
        let center = PostCenter()
        var a: Sender? = Sender()
        weak var weakA: Sender?
        weakA = a
        let token = center.subscribe("x", from: a!) { _ in }
        #expect(token.isActive)
        #expect(center.subscriptionCount(for: "x") == 1)
        a = nil
        #expect(weakA == nil)
        #expect(!token.isActive)
        #expect(center.subscriptionCount(for: "x") == 0)
    }
}
