import Dispatch
import Subscriptions
import Testing

private final class ReplayObserver: Sendable {
    let seen = Recorder<String>()
    func take(_ post: PostObject) { seen.append(post.flag) }
    func level(_ level: Int) { seen.append("\(level)") }
}

@MainActor private final class MainReplayObserver {
    var seen: [String] = []
    func take(_ post: PostObject) { seen.append(post.flag) }
    func level(_ level: Int) { seen.append("\(level)") }
}

/// `replay:` sits on every delivery shape (immediate, any `Delivery`, `@MainActor`), beside the
/// call-site parameters, and on the default center's shorthands.
@Suite("Retained posts: replay on every overload")
struct ReplayOverloadTests {
    @Test func replaySubscriptionsRecordTheCallSitePassedToThem() {
        let center = PostCenter()
        let topic = Topic<Int>("sites.level")
        let owner = ReplayObserver()
        center.post(topic, 1, retain: true)
        let tokens = [
            center.subscribe("sites", replay: true, fileID: "App/A.swift", line: 1) { _ in },
            center.subscribe(topic, replay: true, fileID: "App/B.swift", line: 2) { _ in },
            center.subscribe(topic, delivery: .queue(.main), replay: true, fileID: "App/C.swift", line: 3) { _ in },
            center.subscribe("sites", replay: true, once: true, fileID: "App/D.swift", line: 4) { _ in },
            center.register(
                "sites", observer: owner, replay: true, fileID: "App/E.swift", line: 5, selector: ReplayObserver.take),
            center.subscribe(topic, delivery: .mainActor, replay: true, fileID: "App/F.swift", line: 6) { _ in },
        ]
        #expect(
            tokens.map { String(reflecting: $0) } == [
                "Subscription(\"sites\", App/A.swift:1, active)",
                "Subscription(\"sites.level\", App/B.swift:2, active)",
                "Subscription(\"sites.level\", App/C.swift:3, active)",
                "Subscription(\"sites\", App/D.swift:4, active)",
                "Subscription(\"sites\", App/E.swift:5, active)",
                "Subscription(\"sites.level\", App/F.swift:6, active)",
            ])
        #expect(center.subscriptionSites(for: "sites.level").map(\.line).sorted() == [2, 3, 6])
    }

    @Test func everyDeliveryShapeReplaysTheRetainedPost() async {
        let center = PostCenter()
        let topic = Topic<Int>("shapes.level")
        center.post(topic, 7, retain: true)
        center.post("shapes", PostObject(flag: "kept"), retain: true)
        let seen = Recorder<String>()
        let queue = makeSerialQueue("replay.shapes")
        let observer = ReplayObserver()
        let main = await MainActor.run { MainReplayObserver() }
        // Subscribed off the main actor, so that main-actor replays are scheduled like posts.
        let tokens = await Task.detached {
            [
                center.subscribe(topic, replay: true) { seen.append("immediate \($0)") },
                center.subscribe(topic, delivery: .queue(queue), replay: true) { seen.append("queue \($0)") },
                center.subscribe(topic, delivery: .mainActor, replay: true) { seen.append("main \($0)") },
                center.subscribe(topic, replay: true, once: true) { seen.append("once \($0)") },
                center.subscribe(topic, delivery: .queue(queue), replay: true, once: true) {
                    seen.append("once queue \($0)")
                },
                center.subscribe(topic, delivery: .mainActor, replay: true, once: true) {
                    seen.append("once main \($0)")
                },
                center.subscribe("shapes", delivery: .mainActor, replay: true, once: true) {
                    seen.append("once main \($0.flag)")
                },
                center.subscribe("shapes", delivery: .mainActor, replay: true) { seen.append("main \($0.flag)") },
                center.register(topic, observer: observer, replay: true, selector: ReplayObserver.level),
                center.register(
                    topic, observer: observer, delivery: .queue(queue), replay: true, selector: ReplayObserver.level),
                center.register(
                    "shapes", observer: main, delivery: .mainActor, replay: true, selector: MainReplayObserver.take),
                center.register(
                    topic, observer: main, delivery: .mainActor, replay: true, selector: MainReplayObserver.level),
            ]
        }.value
        await center.waitForPendingDeliveries()
        #expect(
            seen.values.sorted() == [
                "immediate 7", "main 7", "main kept", "once 7", "once main 7", "once main kept", "once queue 7",
                "queue 7",
            ])
        #expect(observer.seen.values == ["7", "7"])
        #expect(await MainActor.run { main.seen.sorted() } == ["7", "kept"])
        withExtendedLifetime(tokens) {}
    }

    @Test func defaultCenterShorthandsReplayTheRetainedPost() {
        let topic = Topic<Int>("replay.default.\(UInt64.random(in: 0...UInt64.max))")
        PostCenter.default.post(topic, 3, retain: true)
        defer { PostCenter.default.clearRetained(topic) }
        let seen = Recorder<Int>()
        let observer = ReplayObserver()
        let tokens = [
            PostCenter.subscribe(topic, replay: true) { seen.append($0) },
            PostCenter.subscribe(topic.name, replay: true) { seen.append($0.payload(as: Int.self) ?? -1) },
            PostCenter.register(topic, observer: observer, replay: true, selector: ReplayObserver.level),
        ]
        #expect(seen.values == [3, 3])
        #expect(observer.seen.values == ["3"])
        withExtendedLifetime(tokens) {}
    }

    @Test func postsWithReplayBufferEveryPostByDefault() async {
        let center = PostCenter()
        let topic = Topic<Int>("replay.unbounded")
        center.post(topic, 0, retain: true)
        let posts = center.posts(topic, replay: true)
        for level in 1...300 { center.post(topic, level) }
        var taken: [Int] = []
        for await level in posts {
            taken.append(level)
            if taken.count == 301 { break }
        }
        #expect(taken == Array(0...300))
    }
}
