import Dispatch
import Subscriptions
import Testing

/// Guarantee 9: `Subscription` is `Hashable` by identity; `cancel()` is idempotent;
/// `pause()`/`resume()` after cancel do nothing; `isActive` is true only while the subscription
/// would receive the next post; a token that outlives its center is harmless. Also: reusing a
/// removed token's identity never removes another live subscription.
@Suite("Guarantee 9: tokens are simple to hold")
struct Guarantee09Tokens {
    @Test(.tags(.pin)) func tokensAreHashableByIdentity() {
        let center = PostCenter()
        let handler: @Sendable (PostObject) -> Void = { _ in }
        let a = center.subscribe("x", handler: handler)
        let b = center.subscribe("x", handler: handler)
        #expect(a == a)
        #expect(a != b)
        #expect(a.hashValue == a.hashValue)
        var set = Set<Subscription>()
        a.store(in: &set)
        a.store(in: &set)
        b.store(in: &set)
        #expect(set.count == 2)
        #expect(set.contains(a) && set.contains(b))
        a.cancel()
        #expect(set.contains(a))  // identity, not state
    }

    @Test(.tags(.pin)) func aSetOfTokensOwnsItsSubscriptions() {
        let center = PostCenter()
        let calls = Counter()
        var tokens = Set<Subscription>()
        for _ in 0..<100 { center.subscribe("x") { _ in calls.increment() }.store(in: &tokens) }
        #expect(tokens.count == 100)
        #expect(center.post("x") == 100)
        let removed = tokens.removeFirst()
        #expect(center.post("x") == 100)  // still alive: `removed` holds it
        #expect(center.subscriptionCount(for: "x") == 100)
        tokens.removeAll()
        #expect(center.post("x") == 1)
        #expect(calls.count == 201)
        withExtendedLifetime(removed) {}
    }

    @Test(.tags(.pin)) func removingATokenFromItsSetEndsOnlyThatSubscription() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        var tokens = Set<Subscription>()
        var byIndex: [Subscription] = []
        for i in 0..<10 {
            let token = center.subscribe("x") { _ in seen.append(i) }
            token.store(in: &tokens)
            byIndex.append(token)
        }
        let third = ObjectIdentifier(byIndex[3])
        byIndex.removeAll()
        tokens = tokens.filter { ObjectIdentifier($0) != third }
        #expect(tokens.count == 9)
        #expect(center.post("x") == 9)
        #expect(seen.values == [0, 1, 2, 4, 5, 6, 7, 8, 9])
    }

    @Test(.tags(.pin)) func cancelIsIdempotentAndLeavesOtherSubscriptionsAlone() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let tokens = (0..<5).map { i in center.subscribe("x") { _ in seen.append(i) } }
        tokens[2].cancel()
        tokens[2].cancel()
        tokens[4].cancel()
        tokens[4].cancel()
        tokens[2].cancel()
        #expect(center.post("x") == 3)
        #expect(seen.values == [0, 1, 3])
        #expect(center.subscriptionCount(for: "x") == 3)
        #expect(tokens.map(\.isActive) == [true, true, false, true, false])
    }

    @Test(.tags(.pin)) func reusingARemovedTokensIdentityNeverRemovesAnotherLiveSubscription() {
        // Cancel A, make many new subscriptions (the allocator may hand A's released entry, or
        // released tokens' memory, to them), then cancel A again: every new one still delivers.
        let center = PostCenter()
        let calls = Counter()
        let a = center.subscribe("x") { _ in calls.increment() }
        for round in 0..<20 {
            a.cancel()
            var fresh: [Subscription] = []
            for _ in 0..<50 {
                // Short-lived tokens too, so that freed memory is recycled within the round.
                _ = center.subscribe("x") { _ in calls.increment() }
                fresh.append(center.subscribe("x") { _ in calls.increment() })
            }
            a.cancel()
            a.pause()
            a.resume()
            #expect(center.subscriptionCount(for: "x") == 50, "round \(round)")
            let before = calls.count
            #expect(center.post("x") == 50, "round \(round)")
            #expect(calls.count - before == 50)
            #expect(fresh.filter(\.isActive).count == 50)
        }
        #expect(!a.isActive)
    }

    @Test(.tags(.pin)) func pauseAndResumeAfterCancelDoNothing() {
        let center = PostCenter()
        let calls = Counter()
        let token = center.subscribe("x") { _ in calls.increment() }
        token.cancel()
        token.resume()
        #expect(!token.isActive)
        token.pause()
        token.resume()
        #expect(!token.isActive)
        #expect(center.post("x") == 0)
        #expect(center.subscriptionCount(for: "x") == 0)
        #expect(calls.count == 0)
    }

    @Test(.tags(.pin)) func pausedPostsAreDroppedNotBuffered() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let token = center.subscribe("x") { seen.append($0.flag) }
        token.pause()
        token.pause()
        #expect(center.post("x", flag: "while-paused") == 0)
        token.resume()
        #expect(center.post("x", flag: "after") == 1)
        token.resume()
        #expect(seen.values == ["after"])
    }

    @Test(.tags(.pin)) func isActiveIsTrueOnlyWhileTheNextPostWouldReachIt() {
        final class Observer {
            func didPost(_ post: PostObject) {}
        }
        let center = PostCenter()
        let token = center.subscribe("x") { _ in }
        #expect(token.isActive)
        token.pause()
        #expect(!token.isActive)
        token.resume()
        #expect(token.isActive)
        token.cancel()
        #expect(!token.isActive)

        var observer: Observer? = Observer()
        let registration = center.register("x", observer: observer!, selector: Observer.didPost)
        #expect(registration.isActive)
        observer = nil
        #expect(!registration.isActive)
        registration.resume()
        #expect(!registration.isActive)

        let queue = makeSerialQueue("token.active")
        let queued = center.subscribe("x", delivery: .queue(queue)) { _ in }
        #expect(queued.isActive)
        queued.pause()
        #expect(!queued.isActive)
    }

    @Test(.tags(.pin)) func aTokenThatOutlivesItsCenterIsHarmless() {
        let calls = Counter()
        var center: PostCenter? = PostCenter()
        weak var weakCenter: PostCenter?
        weakCenter = center
        let token = center!.subscribe("x") { _ in calls.increment() }
        let paused = center!.subscribe("x") { _ in calls.increment() }
        paused.pause()
        let typed = center!.subscribe(Topic<Int>("y")) { _ in calls.increment() }
        #expect(center!.post("x") == 1)
        center = nil
        // Tokens do not keep their center alive.
        #expect(weakCenter == nil)
        #expect(!token.isActive)
        #expect(!paused.isActive)
        #expect(!typed.isActive)
        paused.resume()
        #expect(!paused.isActive)
        token.pause()
        token.resume()
        #expect(!token.isActive)
        token.cancel()
        token.cancel()
        typed.cancel()
        #expect(calls.count == 1)
    }

    @Test(.tags(.pin)) func aTokenReleasedAfterItsCenterIsHarmless() {
        let live = LiveObjects()
        var center: PostCenter? = PostCenter()
        var tracked: Tracked? = Tracked("capture", live: live)
        var token: Subscription? = center!.subscribe("x") { [tracked] _ in _ = tracked }
        tracked = nil
        center = nil
        #expect(token?.isActive == false)
        token = nil
        #expect(token == nil)
        #expect(eventually { live.alive == 0 })  // with the next batch of dropped tokens
    }

    @Test(.tags(.pin)) func pendingQueuedDeliveryOfACenterThatWentAwayIsHarmless() {
        let queue = makeSerialQueue("token.center-gone")
        let calls = Counter()
        var center: PostCenter? = PostCenter()
        let token = center!.subscribe("x", delivery: .queue(queue)) { _ in calls.increment() }
        queue.suspend()
        #expect(center!.post("x") == 1)
        center = nil
        #expect(!token.isActive)
        queue.resume()
        queue.sync {}
        token.cancel()
        #expect(!token.isActive)
        #expect(calls.count <= 1)
    }
}
