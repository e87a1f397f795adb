import Subscriptions
import Synchronization
import Testing

// Tests run in parallel and share `PostCenter.default`: every test uses its own names.

private final class Hits: Sendable {
    private let values = Mutex<[String]>([])
    func append(_ value: String) { values.withLock { $0.append(value) } }
    var all: [String] { values.withLock { $0 } }
}

private struct Account: Sendable, Equatable {
    let name: String
}

private final class Screen {
    var seen: [String] = []
    func didLogin(_ post: PostObject) { seen.append(post.flag) }
    func didSignIn(_ account: Account) { seen.append(account.name) }
}

@Suite struct ShorthandTests {
    @Test func staticPostReachesSubscriptionsOfTheDefaultCenter() {
        let hits = Hits()
        let token = PostCenter.default.subscribe("short.post") { post in hits.append(post.flag) }
        #expect(PostCenter.post("short.post", flag: "a") == 1)
        #expect(PostCenter.post("short.post", PostObject(flag: "b")) == 1)
        PostCenter.post("short.post")  // discardable result, default flag and data
        #expect(hits.all == ["a", "b", ""])
        withExtendedLifetime(token) {}
    }

    @Test func staticSubscribeListensOnTheDefaultCenterUntilTheTokenGoes() {
        let hits = Hits()
        do {
            let token = PostCenter.subscribe("short.subscribe") { post in hits.append(post.flag) }
            #expect(PostCenter.default.subscriptionCount(for: "short.subscribe") == 1)
            #expect(PostCenter.default.post("short.subscribe", flag: "x") == 1)
            withExtendedLifetime(token) {}
        }
        #expect(PostCenter.default.subscriptionCount(for: "short.subscribe") == 0)
        #expect(PostCenter.post("short.subscribe", flag: "y") == 0)
        #expect(hits.all == ["x"])
    }

    @Test func instanceCallsOnAnotherCenterStayOnThatCenter() {
        let hits = Hits()
        let center = PostCenter()
        let onDefault = PostCenter.subscribe("short.separate") { _ in hits.append("default") }
        let onCenter = center.subscribe("short.separate") { _ in hits.append("center") }
        #expect(center.post("short.separate", flag: "") == 1)
        #expect(PostCenter.post("short.separate", flag: "") == 1)
        #expect(hits.all == ["center", "default"])
        #expect(center.subscriptionCount(for: "short.separate") == 1)
        withExtendedLifetime((onDefault, onCenter)) {}
    }

    @Test func staticTopicShorthandsPostAndSubscribeTypedPayloads() {
        let signIn = Topic<Account>("short.topic")
        let hits = Hits()
        let token = PostCenter.subscribe(signIn) { account in hits.append(account.name) }
        #expect(PostCenter.post(signIn, Account(name: "ada")) == 1)
        #expect(PostCenter.post(signIn, Account(name: "bob")) == 1)
        #expect(hits.all == ["ada", "bob"])
        withExtendedLifetime(token) {}
    }

    @Test func staticRegisterHoldsTheObserverWeakly() {
        let signIn = Topic<Account>("short.register.topic")
        var screen: Screen? = Screen()
        let byName = PostCenter.register("short.register", observer: screen!, selector: Screen.didLogin)
        let byTopic = PostCenter.register(signIn, observer: screen!, selector: Screen.didSignIn)
        #expect(PostCenter.post("short.register", flag: "sso") == 1)
        #expect(PostCenter.post(signIn, Account(name: "ada")) == 1)
        #expect(screen?.seen == ["sso", "ada"])
        screen = nil
        #expect(PostCenter.post("short.register", flag: "late") == 0)
        #expect(!byName.isActive)
        #expect(!byTopic.isActive)
    }

    @Test func staticPostsSequenceReadsTheDefaultCenter() async {
        let count = Topic<Int>("short.posts")
        let numbers = PostCenter.posts(count)
        let envelopes = PostCenter.posts(count.name)
        #expect(PostCenter.post(count, 1) == 2)
        var seen: [Int] = []
        for await n in numbers {
            seen.append(n)
            break
        }
        for await post in envelopes {
            seen.append(post.payload(as: Int.self) ?? -1)
            break
        }
        #expect(seen == [1, 1])
        #expect(PostCenter.default.subscriptionCount(for: count.name) == 0)
    }
}
