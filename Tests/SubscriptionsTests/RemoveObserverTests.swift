import Dispatch
import Subscriptions
import Testing

private protocol LoginObserver: AnyObject {
    func didLogin()
}

private final class Migrated: LoginObserver, Sendable {
    let calls = Counter()
    func didLogin() { calls.add(1000) }
    func onLogin(_ post: PostObject) { calls.increment() }
    func onCount(_ value: Int) { calls.add(10) }
}

@Suite("removeObserver(_:) removes every registration")
struct RemoveObserverTests {
    @Test func removeObserverEndsSelectorAndProtocolRegistrationsAlike() {
        let center = PostCenter()
        let observer = Migrated()
        let bystander = Migrated()
        let topic = Topic<Int>("count")
        let tokens = [
            center.register("login", observer: observer, selector: Migrated.onLogin),
            center.register(topic, observer: observer, selector: Migrated.onCount),
            center.observe(observer, for: LoginObserver.self),
        ]
        let other = center.register("login", observer: bystander, selector: Migrated.onLogin)
        center.post("login")
        center.post(topic, 1)
        center.notify(LoginObserver.self) { $0.didLogin() }
        #expect(observer.calls.count == 1011)

        center.removeObserver(observer)
        #expect(tokens.allSatisfy { !$0.isActive })
        #expect(other.isActive)
        #expect(center.post("login") == 1)  // the bystander only
        #expect(center.post(topic, 1) == 0)
        #expect(center.notify(LoginObserver.self) { $0.didLogin() } == 0)
        #expect(observer.calls.count == 1011)
        #expect(bystander.calls.count == 2)
        #expect(center.subscriptionCount(for: "login") == 1)
        // Resuming or cancelling a removed registration's token is harmless.
        tokens[0].resume()
        #expect(!tokens[0].isActive)
        for token in tokens { token.cancel() }
        #expect(center.post("login") == 1)
    }

    @Test func removeObserverDropsQueuedDeliveriesThatHaveNotStarted() {
        let center = PostCenter()
        let observer = Migrated()
        let queue = DispatchQueue(label: "remove-observer")
        let gate = DispatchSemaphore(value: 0)
        queue.async { gate.wait() }
        let token = center.register("login", observer: observer, delivery: .queue(queue), selector: Migrated.onLogin)
        #expect(center.post("login") == 1)
        center.removeObserver(observer)
        gate.signal()
        queue.sync {}
        #expect(observer.calls.count == 0)
        #expect(!token.isActive)
    }

    @Test func removeObserverFromInsideAHandlerSkipsTheObserversLaterRegistrations() {
        let center = PostCenter()
        let observer = Migrated()
        let first = center.subscribe("login") { _ in center.removeObserver(observer) }
        let second = center.register("login", observer: observer, selector: Migrated.onLogin)
        #expect(center.post("login") == 1)
        #expect(observer.calls.count == 0)
        withExtendedLifetime((first, second)) {}
    }
}
