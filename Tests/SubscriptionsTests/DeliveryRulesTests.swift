import Dispatch
import Foundation
import Subscriptions
import Synchronization
import Testing

/// A payload that is not `Sendable`: allowed with immediate delivery only (the queued and
/// main-actor overloads reject it at compile time; see `Tests/CompileFail`).
private final class Counted {
    var value = 0
}

@MainActor private final class Panel {
    var seen: [String] = []
    func didLogin(_ post: PostObject) {
        MainActor.assertIsolated()
        seen.append("selector:" + post.flag)
    }
    func didCount(_ value: Int) {
        MainActor.assertIsolated()
        seen.append("count:\(value)")
    }
}

private final class Sender: Sendable {}

/// Set on the main queue: on Linux the main actor may run on the main queue off the main thread.
private let mainQueueKey: DispatchSpecificKey<Bool> = {
    let key = DispatchSpecificKey<Bool>()
    DispatchQueue.main.setSpecific(key: key, value: true)
    return key
}()

/// Whether the caller runs on the main thread or the main queue, where the main actor runs.
private func onMainActorExecutor() -> Bool {
    Thread.isMainThread || DispatchQueue.getSpecific(key: mainQueueKey) == true
}

/// Waits until everything the main queue had when this was called has run.
@MainActor private func drainMainQueue() async {
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        DispatchQueue.main.async { done.resume() }
    }
}

@Suite("Delivery rules: Sendable crossing, .mainActor everywhere")
struct DeliveryRulesTests {
    @Test func immediateDeliveryTakesANonSendablePayload() {
        let center = PostCenter()
        let topic = Topic<Counted>("counted")
        let a = center.subscribe(topic) { $0.value += 1 }
        let b = center.subscribe(topic, delivery: .immediate) { $0.value += 10 }
        let c = center.subscribe(topic, once: true) { $0.value += 100 }
        let counted = Counted()
        #expect(center.post(topic, counted) == 3)
        #expect(center.post(topic, counted) == 2)
        #expect(counted.value == 122)
        withExtendedLifetime((a, b, c)) {}
    }

    @Test @MainActor func mainActorWorksForOneShotsOnTheMainThread() {
        let center = PostCenter()
        let panel = Panel()
        let topic = Topic<Int>("count")
        let once = center.subscribe("login", delivery: .mainActor, once: true) { post in
            panel.seen.append("once:" + post.flag)
        }
        let typed = center.subscribe(topic, delivery: .mainActor, once: true) { value in
            panel.seen.append("typed:\(value)")
        }
        center.post("login", flag: "1")
        center.post("login", flag: "2")
        center.post(topic, 7)
        center.post(topic, 8)
        #expect(panel.seen == ["once:1", "typed:7"])
        #expect(!once.isActive && !typed.isActive)
    }

    @Test @MainActor func mainActorWorksWithASenderFilter() async {
        let center = PostCenter()
        let panel = Panel()
        let sender = Sender()
        let other = Sender()
        let topic = Topic<Int>("count")
        let plain = center.subscribe("login", from: sender, delivery: .mainActor) { post in
            panel.seen.append("plain:" + post.flag)
        }
        let typed = center.subscribe(topic, from: sender, delivery: .mainActor) { value in
            panel.seen.append("typed:\(value)")
        }
        center.post("login", flag: "other", from: other)
        center.post("login", flag: "mine", from: sender)
        center.post(topic, 1, from: other)
        center.post(topic, 2, from: sender)
        // From another thread: scheduled on the main queue, still filtered.
        let scheduled = await Task.detached {
            center.post("login", flag: "bg-other", from: other) + center.post("login", flag: "bg", from: sender)
        }.value
        #expect(scheduled == 1)
        await drainMainQueue()
        #expect(panel.seen == ["plain:mine", "typed:2", "plain:bg"])
        withExtendedLifetime((plain, typed)) {}
    }

    @Test @MainActor func mainActorWorksForSelectorRegistrationsOfNamesAndTopics() async {
        let center = PostCenter()
        let panel = Panel()
        let topic = Topic<Int>("count")
        let a = center.register("login", observer: panel, delivery: .mainActor, selector: Panel.didLogin)
        let b = center.register(topic, observer: panel, delivery: .mainActor, selector: Panel.didCount)
        _ = await Task.detached {
            center.post("login", flag: "bg")
            center.post(topic, 3)
        }.value
        await drainMainQueue()
        #expect(panel.seen == ["selector:bg", "count:3"])
        withExtendedLifetime((a, b)) {}
    }

    @Test @MainActor func mainActorAsADeliveryValueRunsASendableHandlerOnTheMainThread() async {
        let center = PostCenter()
        let delivery: Delivery = .mainActor
        let onMain = Mutex<[Bool]>([])
        _ = mainQueueKey
        let token = center.subscribe("tick", delivery: delivery) { _ in
            onMain.withLock { $0.append(onMainActorExecutor()) }
        }
        center.post("tick")  // on the main thread: synchronous
        #expect(onMain.withLock { $0 } == [true])
        let scheduled = await Task.detached { center.post("tick") }.value
        #expect(scheduled == 1)
        await drainMainQueue()
        #expect(onMain.withLock { $0 } == [true, true])
        withExtendedLifetime(token) {}
    }

    @Test func postOfAVoidTopicNeedsNoPayload() {
        let center = PostCenter()
        let logout = Topic<Void>("logout")
        let calls = Counter()
        let sender = Sender()
        let a = center.subscribe(logout) { calls.increment() }
        let b = center.subscribe(logout, from: sender) { calls.add(10) }
        #expect(center.post(logout) == 1)
        #expect(center.post(logout, from: sender) == 2)
        #expect(calls.count == 12)
        withExtendedLifetime((a, b)) {}
    }

    @Test func postWithFlagDataAndSenderReachesTheSendersSubscribers() {
        let center = PostCenter()
        let sender = Sender()
        let other = Sender()
        let seen = Recorder<String>()
        let data = Tracked("payload")
        let token = center.subscribe("login", from: sender) { post in
            seen.append(post.flag + ":" + ((post.data as? Tracked)?.name ?? "nil"))
        }
        #expect(center.post("login", flag: "x", data: data, from: other) == 0)
        #expect(center.post("login", flag: "sso", data: data, from: sender) == 1)
        #expect(center.post("login", from: sender) == 1)
        #expect(seen.values == ["sso:payload", ":nil"])
        withExtendedLifetime(token) {}
    }
}
