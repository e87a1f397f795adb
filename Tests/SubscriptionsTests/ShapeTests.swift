import Dispatch
import Subscriptions
import Testing

// Compile-time checks of the public API's shapes: every method is called from a plain class and
// from a `@MainActor` class in Swift 6 language mode. If a signature loses a `Sendable`
// annotation or gains an isolation requirement, this file stops compiling. The tests then pin the
// call counts so that they can fail at run time too.

private let loginTopic = Topic<ShapeUser>("shape.login")
private let pointTopic = Topic<Int>("shape.point")

private final class ShapeUser: Sendable {
    let name: String
    init(_ name: String) { self.name = name }
}

/// A plain (non-isolated, non-Sendable) owner of tokens.
private final class PlainOwner {
    var tokens = Set<Subscription>()
    var namedCalls: [String] = []
    var typedCalls: [String] = []
    let queuedCalls = Recorder<String>()
    let closureCalls = Counter()
    let queue = DispatchQueue(label: "shape.plain")
    var namedToken: Subscription?

    init(center: PostCenter) {
        center.subscribe("shape.login") { [closureCalls] _ in closureCalls.increment() }.store(in: &tokens)
        center.subscribe("shape.login", delivery: .queue(queue)) { [closureCalls] _ in closureCalls.increment() }
            .store(in: &tokens)
        center.subscribe(loginTopic) { [closureCalls] _ in closureCalls.increment() }.store(in: &tokens)
        center.subscribe(pointTopic, delivery: .immediate) { [closureCalls] _ in closureCalls.increment() }
            .store(in: &tokens)
        namedToken = center.register("shape.login", observer: self, selector: PlainOwner.didLogin)
        center.register(loginTopic, observer: self, selector: PlainOwner.didLoginTyped).store(in: &tokens)
        let queued = center.register(
            "shape.login", observer: self, delivery: .queue(queue), selector: PlainOwner.didLoginOnQueue)
        queued.store(in: &tokens)
    }

    func didLogin(_ post: PostObject) { namedCalls.append(post.flag) }
    func didLoginTyped(_ user: ShapeUser) { typedCalls.append(user.name) }
    // Runs on `queue` while the test thread goes on: only touches the thread-safe recorder.
    func didLoginOnQueue(_ post: PostObject) { queuedCalls.append(post.flag) }
}

/// A `@MainActor` owner of tokens, registering its own isolated methods.
@MainActor
private final class Screen {
    var tokens = Set<Subscription>()
    var namedCalls: [String] = []
    var typedCalls: [String] = []
    let closureCalls = Counter()
    var token: Subscription?

    init(center: PostCenter) {
        token = center.register("shape.login", observer: self, selector: Screen.didLogin)
        center.register(loginTopic, observer: self, selector: Screen.didLoginTyped).store(in: &tokens)
        center.subscribe("shape.login") { [closureCalls] _ in closureCalls.increment() }.store(in: &tokens)
        center.subscribe(loginTopic) { [closureCalls] _ in closureCalls.increment() }.store(in: &tokens)
    }

    func didLogin(_ post: PostObject) { namedCalls.append(post.flag) }
    func didLoginTyped(_ user: ShapeUser) { typedCalls.append(user.name) }

    func everyOtherCall(_ center: PostCenter) -> [Int] {
        let user = ShapeUser("ann")
        let results = [
            center.post("shape.login", PostObject(flag: "a", data: user)),
            center.post("shape.login", flag: "b"),
            center.post("shape.login"),
            center.post(loginTopic, user),
            center.subscriptionCount(for: "shape.login"),
        ]
        let queue = DispatchQueue(label: "shape.main-actor")
        let queued = center.subscribe(pointTopic, delivery: .queue(queue)) { [closureCalls] _ in
            closureCalls.increment()
        }
        let pointResult = center.post(pointTopic, 1)
        queue.sync {}
        queued.cancel()
        let defaultCount = PostCenter.default.subscriptionCount(for: "shape.nobody")
        token?.pause()
        token?.resume()
        let active = token?.isActive == true
        token?.cancel()
        return results + [pointResult, defaultCount, active ? 1 : 0, center.subscriptionCount(for: "shape.login")]
    }
}

@Suite("API shapes compile from plain and @MainActor code")
struct ShapeTests {
    @Test func everyAPICompilesAndRunsFromAPlainClass() throws {
        let center = PostCenter()
        let owner = PlainOwner(center: center)
        let user = ShapeUser("bob")
        // Plain subscribers: 2 closures + 2 registered observers (1 queued) + 1 queued closure;
        // topic subscribers (closure + observer) receive the plain post because data is a ShapeUser.
        #expect(center.post("shape.login", PostObject(flag: "a", data: user)) == 6)
        #expect(center.post("shape.login", flag: "b") == 4)
        #expect(center.post(loginTopic, user) == 6)
        #expect(center.post(pointTopic, 7) == 1)
        #expect(center.subscriptionCount(for: "shape.login") == 6)
        owner.queue.sync {}
        #expect(owner.namedCalls == ["a", "b", ""])
        #expect(owner.queuedCalls.values == ["a", "b", ""])
        #expect(owner.typedCalls == ["bob", "bob"])
        #expect(owner.closureCalls.count == 3 + 2 + 3 + 1)
        let token = try #require(owner.namedToken)
        token.pause()
        #expect(!token.isActive)
        token.resume()
        #expect(token.isActive)
        token.cancel()
        #expect(!token.isActive)
        #expect(center.subscriptionCount(for: "shape.login") == 5)
        #expect(PostCenter.default.subscriptionCount(for: "shape.nobody") == 0)
        #expect(PostObject(flag: "f", data: user).payload(as: ShapeUser.self) === user)
        #expect(loginTopic.name == "shape.login")
    }

    @Test @MainActor func everyAPICompilesAndRunsFromAMainActorClass() {
        let center = PostCenter()
        let screen = Screen(center: center)
        let results = screen.everyOtherCall(center)
        // Each plain post reaches: the observer, the closure, and (when data is a ShapeUser) the
        // two topic subscribers. The typed post reaches all four.
        #expect(results == [4, 2, 2, 4, 4, 1, 0, 1, 3])
        #expect(screen.namedCalls == ["a", "b", "", ""])
        #expect(screen.typedCalls == ["ann", "ann"])
        #expect(screen.closureCalls.count == 2 + 1 + 1 + 2 + 1)
    }
}
