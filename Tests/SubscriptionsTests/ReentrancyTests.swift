import Dispatch
import Subscriptions
import SubscriptionsTestSupport
import Testing

/// Guarantee 4: a post made inside a handler is delivered at once, depth-first.
/// Guarantee 5: a subscription made during a delivery does not receive the post in progress.
/// Guarantee 6 (first half): a subscription cancelled or paused during a delivery, before its
/// turn, is not called for the rest of that delivery.
@Suite("Re-entrancy (guarantees 4, 5 and 6)")
struct ReentrancyTests {
    // MARK: Guarantee 4

    @Test func postInsideHandlerIsDeliveredDepthFirst() {
        let center = PostCenter()
        let seen = Recorder<String>()
        var tokens = Set<Subscription>()
        center.subscribe("x") { _ in
            seen.append("x1")
            center.post("y")
        }.store(in: &tokens)
        center.subscribe("x") { _ in seen.append("x2") }.store(in: &tokens)
        center.subscribe("y") { _ in
            seen.append("y1")
            center.post("z")
        }.store(in: &tokens)
        center.subscribe("y") { _ in seen.append("y2") }.store(in: &tokens)
        center.subscribe("z") { _ in seen.append("z1") }.store(in: &tokens)
        center.subscribe("z") { _ in seen.append("z2") }.store(in: &tokens)
        #expect(center.post("x") == 2)
        #expect(seen.values == ["x1", "y1", "z1", "z2", "y2", "x2"])
    }

    @Test func postOfTheSameNameInsideHandlerIsDeliveredDepthFirst() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let inner = Recorder<Int>()
        let first = center.subscribe("x") { post in
            seen.append("a:\(post.flag)")
            if post.flag == "outer" { inner.append(center.post("x", flag: "inner")) }
        }
        let second = center.subscribe("x") { post in seen.append("b:\(post.flag)") }
        #expect(center.post("x", flag: "outer") == 2)
        #expect(seen.values == ["a:outer", "a:inner", "b:inner", "b:outer"])
        #expect(inner.values == [2])
        withExtendedLifetime((first, second)) {}
    }

    @Test func typedPostInsideHandlerIsDeliveredDepthFirst() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let depth = Topic<Int>("depth")
        let first = center.subscribe(depth) { n in
            seen.append("a\(n)")
            if n < 3 { center.post(depth, n + 1) }
        }
        let second = center.subscribe(depth) { n in seen.append("b\(n)") }
        center.post(depth, 0)
        #expect(seen.values == ["a0", "a1", "a2", "a3", "b3", "b2", "b1", "b0"])
        withExtendedLifetime((first, second)) {}
    }

    @Test func deeplyNestedPostsOfTheSameNameAreDeliveredDepthFirst() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let depth = 60
        let first = center.subscribe(Topic<Int>("deep")) { n in
            seen.append("a\(n)")
            if n < depth { center.post(Topic<Int>("deep"), n + 1) }
        }
        let second = center.subscribe("deep") { post in seen.append("b\(post.payload(as: Int.self) ?? -1)") }
        #expect(center.post(Topic<Int>("deep"), 0) == 2)
        let expected = (0...depth).map { "a\($0)" } + (0...depth).reversed().map { "b\($0)" }
        #expect(seen.values == expected)
        withExtendedLifetime((first, second)) {}
    }

    // MARK: Guarantee 5

    @Test func subscriptionMadeDuringDeliveryDoesNotReceiveThePostInProgress() {
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

    @Test func manySubscriptionsMadeDuringDeliveryMissItButTheRestOfTheDeliveryContinues() {
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

    @Test func subscriptionMadeDuringDeliveryReceivesANestedPostOfTheSameName() {
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

    // MARK: Guarantee 6, during a delivery

    @Test func subscriptionCancelledDuringDeliveryBeforeItsTurnIsSkipped() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let victim = TokenSlot()
        let first = center.subscribe("x") { _ in
            seen.append(1)
            victim.cancel()
        }
        victim.token = center.subscribe("x") { _ in seen.append(2) }
        let third = center.subscribe("x") { _ in seen.append(3) }
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 3])
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 3, 1, 3])
        withExtendedLifetime((first, third)) {}
    }

    @Test func subscriptionPausedDuringDeliveryBeforeItsTurnIsSkipped() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let victim = TokenSlot()
        let first = center.subscribe("x") { _ in
            seen.append(1)
            victim.token?.pause()
        }
        victim.token = center.subscribe("x") { _ in seen.append(2) }
        let third = center.subscribe("x") { _ in seen.append(3) }
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 3])
        victim.token?.resume()
        first.cancel()
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 3, 2, 3])
        withExtendedLifetime(third) {}
    }

    @Test func subscriptionCancelledInANestedPostIsSkippedByTheOuterPost() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let victim = TokenSlot()
        let first = center.subscribe("x") { _ in
            seen.append("x1")
            center.post("y")
        }
        victim.token = center.subscribe("x") { _ in seen.append("x2") }
        let third = center.subscribe("x") { _ in seen.append("x3") }
        let killer = center.subscribe("y") { _ in
            seen.append("y")
            victim.cancel()
        }
        #expect(center.post("x") == 2)
        #expect(seen.values == ["x1", "y", "x3"])
        withExtendedLifetime((first, third, killer)) {}
    }

    @Test func subscriptionCancelledAfterTheSlotsGrewMidDeliveryIsSkipped() {
        // Subscribing many during a delivery replaces the slot buffer the delivery is walking;
        // a later cancellation must still be seen by that delivery.
        let center = PostCenter()
        let seen = Recorder<Int>()
        let made = Recorder<Subscription>()
        let victim = TokenSlot()
        let first = center.subscribe("x") { _ in
            seen.append(1)
            guard made.count == 0 else { return }
            for _ in 0..<100 { made.append(center.subscribe("x") { _ in seen.append(100) }) }
            victim.cancel()
        }
        victim.token = center.subscribe("x") { _ in seen.append(2) }
        let third = center.subscribe("x") { _ in seen.append(3) }
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 3])
        seen.reset()
        #expect(center.post("x") == 102)
        #expect(seen.values == [1, 3] + Array(repeating: 100, count: 100))
        withExtendedLifetime((first, third, made)) {}
    }

    @Test func subscriptionCancelledAfterItsTurnDoesNotChangeThatDelivery() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let victim = TokenSlot()
        victim.token = center.subscribe("x") { _ in seen.append(1) }
        let second = center.subscribe("x") { _ in
            seen.append(2)
            victim.cancel()
        }
        let third = center.subscribe("x") { _ in seen.append(3) }
        #expect(center.post("x") == 3)
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 2, 3, 2, 3])
        withExtendedLifetime((second, third)) {}
    }

    @Test func subscriptionCancelledFromAnotherThreadDuringDeliveryIsSkipped() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let victim = TokenSlot()
        let cancellers = Recorder<TestThread>()
        let first = center.subscribe("x") { _ in
            seen.append(1)
            guard let token = victim.token else { return }
            // The other thread's cancel waits for this delivery to end, so wait only until the
            // cancellation took effect (isActive turns false), not for cancel() to return.
            cancellers.append(TestThread { token.cancel() })
            while token.isActive {}
        }
        victim.token = center.subscribe("x") { _ in seen.append(2) }
        let third = center.subscribe("x") { _ in seen.append(3) }
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 3])
        for thread in cancellers.values { thread.join() }
        withExtendedLifetime((first, third)) {}
    }

    @Test func subscriptionPausedFromAnotherThreadDuringDeliveryIsSkipped() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let victim = TokenSlot()
        let first = center.subscribe("x") { _ in
            seen.append(1)
            guard let token = victim.token else { return }
            TestThread { token.pause() }.join()
        }
        victim.token = center.subscribe("x") { _ in seen.append(2) }
        let third = center.subscribe("x") { _ in seen.append(3) }
        #expect(center.post("x") == 2)
        #expect(seen.values == [1, 3])
        withExtendedLifetime((first, third)) {}
    }
}
