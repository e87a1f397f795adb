import Dispatch
import Subscriptions
import Testing

private final class Device: Sendable {}

/// The wrapper of the Call Sites article: it takes `fileID:` and `line:` and passes them on.
private final class Screen: Sendable {
    func show(_ user: String) {}

    func observeLogins(on center: PostCenter, fileID: String = #fileID, line: Int = #line) -> Subscription {
        center.subscribe(Topic<String>("axes.login"), fileID: fileID, line: line) { [weak self] user in
            self?.show(user)
        }
    }
}

/// The axes of `subscribe`, `post` and `posts` as defaulted parameters: every combination the
/// parameter lists allow does what each parameter's doc says, on the instance methods and on the
/// static shorthands of `PostCenter.default`.
@Suite("API axes: from:, once:, replay: and the static shorthands")
struct APIAxesTests {
    /// `once:` with `from:`: the first post *from the sender* is the one post; posts without a
    /// sender or from another sender neither count nor claim it.
    @Test func aOneShotFilteredOnASenderTakesTheFirstPostOfThatSenderOnly() {
        let center = PostCenter()
        let (a, b) = (Device(), Device())
        let typed = Recorder<Int>()
        let plain = Recorder<String>()
        let topic = Topic<Int>("axes.once-from")
        let t1 = center.subscribe(topic, from: a, once: true) { typed.append($0) }
        let t2 = center.subscribe(topic.name, from: a, once: true) {
            plain.append($0.payload(as: Int.self).map(String.init) ?? $0.flag)
        }
        center.post(topic, 1)
        center.post(topic, 2, from: b)
        #expect(t1.isActive && t2.isActive)
        center.post(topic, 3, from: a)
        center.post(topic, 4, from: a)
        #expect(typed.values == [3])
        #expect(plain.values == ["3"])
        #expect(!t1.isActive && !t2.isActive)
        withExtendedLifetime((a, b)) {}
    }

    /// The same on the main actor and on a queue: `once:` and `from:` reach every delivery.
    @MainActor @Test func aOneShotFilteredOnASenderWorksOnTheMainActorAndOnAQueue() async {
        let center = PostCenter()
        let (a, b) = (Device(), Device())
        let topic = Topic<Int>("axes.once-from.delivery")
        let queue = DispatchQueue(label: "axes.once-from")
        let queued = Recorder<Int>()
        var main: [Int] = []
        let t1 = center.subscribe(topic, from: a, delivery: .queue(queue), once: true) { queued.append($0) }
        let t2 = center.subscribe(topic, from: a, delivery: .mainActor, once: true) { main.append($0) }
        center.post(topic, 1, from: b)
        center.post(topic, 2, from: a)
        center.post(topic, 3, from: a)
        await center.waitForPendingDeliveries()
        #expect(queued.values == [2])
        #expect(main == [2])
        #expect(!t1.isActive && !t2.isActive)
        withExtendedLifetime((a, b)) {}
    }

    /// `posts(…, replay: true)` of a name and of a topic: the retained post first, then live ones.
    @Test func postsWithReplayStartsWithTheRetainedPostThenLivePosts() async {
        let center = PostCenter()
        let topic = Topic<Int>("axes.posts-replay")
        center.post(topic, 80, retain: true)
        let typed = center.posts(topic, replay: true)
        let plain = center.posts(topic.name, replay: true)
        center.post(topic, 81)
        var typedIterator = typed.makeAsyncIterator()
        var plainIterator = plain.makeAsyncIterator()
        #expect(await typedIterator.next() == 80)
        #expect(await typedIterator.next() == 81)
        #expect(await plainIterator.next()?.payload(as: Int.self) == 80)
        #expect(await plainIterator.next()?.payload(as: Int.self) == 81)
    }

    /// The static shorthands take every parameter of the instance methods, and pass each on.
    @Test func theStaticShorthandsTakeEveryOptionOfTheInstanceMethods() async {
        let (a, b) = (Device(), Device())
        let topic = Topic<Int>("axes.statics")
        defer { PostCenter.default.clearRetained(topic) }
        PostCenter.default.post(topic, 10, retain: true)
        let fromA = Recorder<Int>()
        let onceReplayed = Recorder<Int>()
        let plainFromA = Recorder<String>()
        let tokens = [
            PostCenter.subscribe(topic, from: a) { fromA.append($0) },
            PostCenter.subscribe(topic, replay: true, once: true) { onceReplayed.append($0) },
            PostCenter.subscribe(topic.name, from: a, once: true) { plainFromA.append($0.flag) },
        ]
        let replayed = PostCenter.posts(topic, replay: true)
        let plainReplayed = PostCenter.posts(topic.name, replay: true)
        let sequenceFromA = PostCenter.posts(topic, from: a)
        PostCenter.post(topic, 11, from: b)
        PostCenter.post(topic.name, flag: "from a", from: a)
        PostCenter.post(topic, 12, from: a)
        PostCenter.post(topic.name, PostObject(flag: "from b"), from: b)
        #expect(fromA.values == [12])
        #expect(onceReplayed.values == [10])
        #expect(plainFromA.values == ["from a"])
        #expect(!tokens[1].isActive && !tokens[2].isActive)
        var r = replayed.makeAsyncIterator()
        #expect(await r.next() == 10)
        #expect(await r.next() == 11)
        var p = plainReplayed.makeAsyncIterator()
        #expect(await p.next()?.payload(as: Int.self) == 10)
        var s = sequenceFromA.makeAsyncIterator()
        #expect(await s.next() == 12)
        withExtendedLifetime((tokens, a, b)) {}
    }

    /// `Topic<Void>` posts take `from:` too, on an instance and on the type.
    @Test func aPayloadlessPostCarriesItsSender() {
        let center = PostCenter()
        let a = Device()
        let logout = Topic<Void>("axes.logout")
        let calls = Counter()
        let token = center.subscribe(logout, from: a) { calls.increment() }
        center.post(logout)
        center.post(logout, from: a)
        #expect(calls.count == 1)
        let shared = Counter()
        let staticToken = PostCenter.subscribe(logout, from: a) { shared.increment() }
        PostCenter.post(logout)
        PostCenter.post(logout, from: a)
        #expect(shared.count == 1)
        withExtendedLifetime((token, staticToken, a)) {}
    }

    /// `replay: true` with `from:` can never replay (a retained post has no sender): it traps,
    /// naming both parameters, on every form that takes both.
    @Test func replayWithASenderFilterTrapsNamingTheConflict() async {
        let message = "replay: true cannot be combined with from:"
        let typed = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let token = PostCenter().subscribe(Topic<Int>("x"), from: Device(), replay: true) { _ in }
            withExtendedLifetime(token) {}
        }
        let main = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let token = PostCenter().subscribe("x", from: Device(), delivery: .mainActor, replay: true) { _ in }
            withExtendedLifetime(token) {}
        }
        let sequence = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let posts = PostCenter().posts("x", from: Device(), replay: true)
            withExtendedLifetime(posts) {}
        }
        for result in [typed, main, sequence] {
            let stderr = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
            #expect(stderr.contains(message))
        }
    }

    /// The Call Sites article: a wrapper that forwards `fileID:` and `line:` records its caller's
    /// place, not its own.
    @Test func aWrapperThatForwardsFileIDAndLineRecordsItsCallersPlace() {
        let center = PostCenter()
        let screen = Screen()
        let (token, line) = (screen.observeLogins(on: center), #line)
        let sites = center.subscriptionSites(for: "axes.login")
        #expect(sites.map(\.line) == [line])
        #expect(sites.map(\.fileID) == [#fileID])
        withExtendedLifetime(token) {}
    }
}
