import Subscriptions
import SubscriptionsTestSupport
import Testing

/// Guarantee 5: a subscription made during a delivery does not receive the post in progress.
@Suite("Guarantee 5: a subscription made during a delivery misses the post in progress")
struct Guarantee05NotThePostInProgress {
    @Test(.tags(.pin)) func subscriptionMadeDuringDeliveryDoesNotReceiveThePostInProgress() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let late = TokenSlot()
        let first = center.subscribe("x") { post in
            seen.append("first:\(post.flag)")
            if late.token == nil {
                late.token = center.subscribe("x") { post in seen.append("late:\(post.flag)") }
            }
        }
        let second = center.subscribe("x") { post in seen.append("second:\(post.flag)") }
        #expect(center.post("x", flag: "1") == 2)
        #expect(seen.values == ["first:1", "second:1"])
        seen.reset()
        #expect(center.post("x", flag: "2") == 3)
        #expect(seen.values == ["first:2", "second:2", "late:2"])
        withExtendedLifetime((first, second)) {}
    }

    @Test(.tags(.pin)) func manySubscriptionsMadeDuringDeliveryMissItButTheRestOfTheDeliveryContinues() {
        // Enough new subscriptions to make the route grow its slot buffer mid-delivery.
        let center = PostCenter()
        let seen = Recorder<Int>()
        let made = Recorder<Subscription>()
        var tokens: [Subscription] = []
        for i in 0..<10 {
            tokens.append(
                center.subscribe("x") { _ in
                    seen.append(i)
                    if i == 2 && made.count == 0 {
                        for j in 100..<200 { made.append(center.subscribe("x") { _ in seen.append(j) }) }
                    }
                })
        }
        #expect(center.post("x") == 10)
        #expect(seen.values == Array(0..<10))
        seen.reset()
        #expect(center.post("x") == 110)
        #expect(seen.values == Array(0..<10) + Array(100..<200))
        withExtendedLifetime((tokens, made)) {}
    }

    @Test(.tags(.pin)) func subscriptionMadeDuringDeliveryReceivesANestedPostOfTheSameName() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let late = TokenSlot()
        let first = center.subscribe("x") { post in
            seen.append("first:\(post.flag)")
            if post.flag == "outer" {
                late.token = center.subscribe("x") { post in seen.append("late:\(post.flag)") }
                center.post("x", flag: "inner")
            }
        }
        let second = center.subscribe("x") { post in seen.append("second:\(post.flag)") }
        #expect(center.post("x", flag: "outer") == 2)
        #expect(seen.values == ["first:outer", "first:inner", "second:inner", "late:inner", "second:outer"])
        withExtendedLifetime((first, second)) {}
    }
}
