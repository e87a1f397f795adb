import Foundation
import Subscriptions
import SubscriptionsTestKit
import Testing

// The README's "A view model with a `for await` loop" (which the Testing Code That Posts article
// shows too) and the article's "Test a `for await` consumer", verbatim between the BEGIN and END
// lines, so that they run (Scripts/snippet-check.sh only compiles them).

// BEGIN README view model
extension Topic where Payload == String {
    static let message = Topic("message")
}
extension Topic where Payload == Int {
    static let unreadCount = Topic("unreadCount")
}

@MainActor final class InboxModel {
    private(set) var unread = 0
    private let center: PostCenter
    private var task: Task<Void, Never>?

    init(center: PostCenter) {
        self.center = center
        let messages = center.posts(.message)  // subscribed from here on: no post is lost
        task = Task { [weak self] in  // the task does not keep the model alive
            for await _ in messages {
                guard let self else { return }  // the model is gone: leave the loop
                self.unread += 1
                self.center.post(.unreadCount, self.unread)
            }
        }
    }

    deinit { task?.cancel() }  // ends the loop, and its subscription, now
}
// END README view model

// BEGIN article for-await test
@Test func theInboxCountsEachMessage() async throws {
    let center = PostCenter()
    let counts = PostRecorder(.unreadCount, in: center)  // what the model posts after each change
    let inbox = await InboxModel(center: center)

    center.post(.message, "hello")
    center.post(.message, "again")

    try await counts.waitForCount(2, timeout: .seconds(30))  // the loop has handled both
    #expect(counts.payloads == [1, 2])
    #expect(await inbox.unread == 2)
}
// END article for-await test

// BEGIN README actor options
extension Topic where Payload == Int { static let reading = Topic("reading") }

actor Cache {
    var values: [Int] = []
}

final class Dashboard {
    let cache = Cache()  // kept as long as the token: a local `let` would end right after `subscribe`
    var token: Subscription?

    init(center: PostCenter, sensor: AnyObject) {
        // Every option of `subscribe` applies: `from:`, `replay:`, `once:`, and `coalesced:` for the newest only.
        token = center.subscribe(.reading, from: sensor, on: cache, replay: true, coalesced: true) { cache, value in
            cache.values.append(value)
        }
    }
}
// END README actor options

// BEGIN article retained senders
extension Topic where Payload == Int { static let batteryLevel = Topic("batteryLevel") }

final class Phone {}
final class Watch {}

func showBatteryLevels(_ center: PostCenter, phone: Phone, watch: Watch) -> [Subscription] {
    center.post(.batteryLevel, 80, from: phone, retain: true)  // kept with its sender, held weakly
    return [
        center.subscribe(.batteryLevel, from: phone, replay: true) { print("phone", $0) },  // 80 at once
        center.subscribe(.batteryLevel, from: watch, replay: true) { print("watch", $0) },  // only live posts
        center.subscribe(.batteryLevel, replay: true) { print("any", $0) },  // 80 at once: whoever sent it
    ]
}
// END article retained senders

@Suite("The docs' for-await view model")
struct DocSnippetTests {
    /// The snippets above are the ones the docs show: each doc contains the text between its
    /// BEGIN and END lines, so a doc edited without this file (or the reverse) fails here.
    @Test(arguments: [
        ("README view model", "README.md"),
        ("README view model", "Sources/Subscriptions/Subscriptions.docc/TestingCodeThatPosts.md"),
        ("article for-await test", "Sources/Subscriptions/Subscriptions.docc/TestingCodeThatPosts.md"),
        ("README actor options", "README.md"),
        ("article retained senders", "Sources/Subscriptions/Subscriptions.docc/RetainedPosts.md"),
    ])
    func theDocsShowTheSnippetsThisFileCompiles(snippet: String, doc: String) throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let source = try String(contentsOf: here, encoding: .utf8)
        let begin = try #require(source.range(of: "// BEGIN \(snippet)\n"))
        let end = try #require(source.range(of: "// END \(snippet)\n"))
        let code = String(source[begin.upperBound..<end.lowerBound])
        let text = try String(contentsOf: root.appendingPathComponent(doc), encoding: .utf8)
        #expect(
            text.contains("```swift\n" + code + "```\n"),
            "\(doc) does not show the \(snippet) of \(here.lastPathComponent)")
    }

    /// The README's dashboard keeps its actor, so its token stays active and the sender's posts
    /// (the retained one first) reach the cache.
    @Test func theDashboardKeepsItsActorAndGetsTheSendersReadings() async {
        let center = PostCenter()
        let sensor = Phone()
        center.post(.reading, 1, from: sensor, retain: true)
        let dashboard = Dashboard(center: center, sensor: sensor)
        await center.waitForPendingDeliveries()
        #expect(await dashboard.cache.values == [1])
        #expect(String(reflecting: dashboard.token!).hasSuffix("active)"))
        withExtendedLifetime(sensor) {}
    }

    /// The article's battery levels: the phone's filter and the unfiltered one replay 80, the
    /// watch's does not.
    @Test func onlyTheSendersFilterAndTheUnfilteredOneReplayTheRetainedLevel() {
        let center = PostCenter()
        let (phone, watch) = (Phone(), Watch())
        let tokens = showBatteryLevels(center, phone: phone, watch: watch)
        #expect(tokens.count == 3)
        #expect(center.post(.batteryLevel, 81, from: watch) == 2)  // the watch's filter and the unfiltered one
        withExtendedLifetime((tokens, phone, watch)) {}
    }

    @Test @MainActor func theLoopEndsAndUnsubscribesWhenTheModelGoes() async throws {
        let center = PostCenter()
        var model: InboxModel? = InboxModel(center: center)
        weak var weakModel: InboxModel?
        weakModel = model
        #expect(center.subscriptionCount(for: "message") == 1)
        let counts = PostRecorder(.unreadCount, in: center)
        center.post(.message, "one")
        try await counts.waitForCount(1, timeout: .seconds(120))
        #expect(model?.unread == 1)

        model = nil
        // The task holds the model only while it handles a post: the model is freed at once.
        #expect(weakModel == nil)
        // Its deinit cancelled the task: the loop ends and its subscription goes (on the task,
        // so wait for it, bounded).
        for _ in 0..<10_000 where center.subscriptionCount(for: "message") != 0 {
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(center.subscriptionCount(for: "message") == 0)
        #expect(center.post(.message, "two") == 0)
        #expect(counts.payloads == [1])
    }
}
