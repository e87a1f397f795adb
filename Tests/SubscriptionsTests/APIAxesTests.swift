import Dispatch
import Subscriptions
import Testing

private final class Device: Sendable {}

/// An actor that keeps what its handler received.
private actor AxesInbox {
    var values: [Int] = []
    func receive(_ value: Int) { values.append(value) }
}

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

    /// `replay: true` with `from:` replays the retained post only when it was posted `from:` that
    /// very sender; without `from:`, whoever sent it. On every form that takes both: immediate,
    /// queued, main-actor, paced, actor and `posts`, for topics and names.
    @MainActor @Test(.tags(.pin)) func replayWithASenderFilterReplaysOnlyThatSendersRetainedPost() async {
        let center = PostCenter()
        let (a, b) = (Device(), Device())
        let topic = Topic<Int>("axes.replay-from")
        center.post(topic, 7, from: a, retain: true)
        let immediateA = Recorder<Int>()
        let immediateB = Recorder<Int>()
        let anyone = Recorder<Int>()
        let queued = Recorder<Int>()
        let paced = Recorder<Int>()
        let names = Recorder<String>()
        var main: [Int] = []
        let queue = DispatchQueue(label: "axes.replay-from")
        let inbox = AxesInbox()
        let tokens = [
            center.subscribe(topic, from: a, replay: true) { immediateA.append($0) },
            center.subscribe(topic, from: b, replay: true) { immediateB.append($0) },
            center.subscribe(topic, replay: true) { anyone.append($0) },
            center.subscribe(topic, from: a, delivery: .queue(queue), replay: true) { queued.append($0) },
            center.subscribe(topic, from: b, delivery: .queue(queue), replay: true) { queued.append(-$0) },
            center.subscribe(topic, from: a, delivery: .queue(queue).coalesced, replay: true) { paced.append($0) },
            center.subscribe(topic, from: a, delivery: .mainActor, replay: true) { main.append($0) },
            center.subscribe(topic, from: b, delivery: .mainActor, replay: true) { main.append(-$0) },
            center.subscribe(topic.name, from: a, replay: true) { names.append("\($0.payload(as: Int.self) ?? 0)") },
            center.subscribe(topic.name, from: b, replay: true) { names.append("b\($0.payload(as: Int.self) ?? 0)") },
            center.subscribe(topic, from: a, on: inbox, replay: true) { inbox, value in inbox.receive(value) },
            center.subscribe(topic, from: b, on: inbox, replay: true) { inbox, value in inbox.receive(-value) },
        ]
        var fromA = center.posts(topic, from: a, replay: true).makeAsyncIterator()
        var fromB = center.posts(topic, from: b, replay: true).makeAsyncIterator()
        center.post(topic, 8, from: b)
        await center.waitForPendingDeliveries()
        #expect(immediateA.values == [7])
        #expect(immediateB.values == [8])
        #expect(anyone.values == [7, 8])
        #expect(queued.values == [7, -8])
        #expect(paced.values == [7])
        #expect(main == [7, -8])
        #expect(names.values == ["7", "b8"])
        #expect(await inbox.values == [7, -8])
        #expect(await fromA.next() == 7)
        #expect(await fromB.next() == 8)
        withExtendedLifetime((tokens, a, b)) {}
    }

    /// The name forms of a retained post keep their sender too.
    @Test(.tags(.pin)) func theNameFormsOfARetainedPostKeepTheirSender() {
        let center = PostCenter()
        let (a, b) = (Device(), Device())
        center.post("axes.kept", PostObject(flag: "object"), from: a, retain: true)
        let first = Recorder<String>()
        let t1 = center.subscribe("axes.kept", from: a, replay: true) { first.append($0.flag) }
        let t2 = center.subscribe("axes.kept", from: b, replay: true) { first.append("b " + $0.flag) }
        center.post("axes.kept", flag: "flag", from: b, retain: true)
        let second = Recorder<String>()
        let t3 = center.subscribe("axes.kept", from: b, replay: true) { second.append($0.flag) }
        let t4 = center.subscribe("axes.kept", from: a, replay: true) { second.append("a " + $0.flag) }
        #expect(first.values == ["object", "b flag"])
        #expect(second.values == ["flag"])
        withExtendedLifetime((t1, t2, t3, t4, a, b)) {}
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
