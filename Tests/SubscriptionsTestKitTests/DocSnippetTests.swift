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

@Suite("The docs' for-await view model")
struct DocSnippetTests {
    /// The snippets above are the ones the docs show: each doc contains the text between its
    /// BEGIN and END lines, so a doc edited without this file (or the reverse) fails here.
    @Test(arguments: [
        ("README view model", "README.md"),
        ("README view model", "Sources/Subscriptions/Subscriptions.docc/TestingCodeThatPosts.md"),
        ("article for-await test", "Sources/Subscriptions/Subscriptions.docc/TestingCodeThatPosts.md"),
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
