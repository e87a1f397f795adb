import Foundation
import Subscriptions
import SubscriptionsTestKit
import Testing

extension Topic where Payload == Int {
    fileprivate static let battery = Topic("battery")
}

/// Code under test: posts the battery level.
private final class Battery: Sendable {
    let center: PostCenter
    init(center: PostCenter) { self.center = center }

    func charge(from level: Int, steps: Int) {
        for step in 0..<steps { center.post(.battery, level + step) }
    }
}

/// The issues a `withKnownIssue` matcher saw.
private final class IssueLog: @unchecked Sendable {
    // @unchecked: `issues` is only touched while holding `lock`.
    private let lock = NSLock()
    private var issues: [Issue] = []

    func append(_ issue: Issue) { lock.withLock { issues.append(issue) } }
    var all: [Issue] { lock.withLock { issues } }
}

@Suite("PostRecorder", .timeLimit(.minutes(1)))
struct PostRecorderTests {
    @Test func recordsTopicPayloadsOnThePostingThreadInPostOrder() {
        let center = PostCenter()
        center.post(.battery, 1)  // before the recorder: not recorded
        let recorder = PostRecorder(.battery, in: center)
        Battery(center: center).charge(from: 80, steps: 2)
        // Recorded before `post` returned, on this thread.
        #expect(recorder.payloads == [80, 81])
        #expect(recorder.count == 2)
    }

    @Test func theNameInitialiserRecordsEnvelopes() {
        let center = PostCenter()
        let recorder = PostRecorder("login", in: center)
        center.post("login", flag: "sso")
        center.post("login", flag: "password")
        #expect(recorder.payloads.map(\.flag) == ["sso", "password"])
    }

    @Test func waitForCountResumesWhenTheNthPostArrivesFromAnotherThread() async throws {
        let center = PostCenter()
        let recorder = PostRecorder(.battery, in: center)
        let poster = Task.detached { Battery(center: center).charge(from: 10, steps: 3) }
        try await recorder.waitForCount(3, timeout: .seconds(120))
        #expect(recorder.count >= 3)
        await poster.value
        #expect(recorder.payloads == [10, 11, 12])
    }

    @Test func waitForCountReturnsAtOnceWhenTheCountWasReached() async throws {
        let center = PostCenter()
        let recorder = PostRecorder(.battery, in: center)
        center.post(.battery, 5)
        try await recorder.waitForCount(1, timeout: .seconds(120))
        try await recorder.waitForCount(0, timeout: .seconds(120))
        #expect(recorder.payloads == [5])
    }

    @Test func severalTasksWaitForDifferentCounts() async throws {
        let center = PostCenter()
        let recorder = PostRecorder(.battery, in: center)
        async let first: Void = recorder.waitForCount(1, timeout: .seconds(120))
        async let third: Void = recorder.waitForCount(3, timeout: .seconds(120))
        for level in 0..<3 { center.post(.battery, level) }
        try await first
        try await third
        #expect(recorder.count == 3)
    }

    @Test func aTimeoutRecordsOneIssueAtTheCallListingWhatArrived() async throws {
        let center = PostCenter()
        let recorderLine = #line + 1
        let recorder = PostRecorder(.battery, in: center)
        center.post(.battery, 80)
        center.post(.battery, 81)
        let issues = IssueLog()
        let callLine = #line + 2
        try await withKnownIssue {
            try await recorder.waitForCount(3, timeout: .milliseconds(20))
            Issue.record("waitForCount returned after a timeout: the test did not stop at the call")
        } matching: { issue in
            issues.append(issue)
            return true
        }
        let recorded = issues.all
        #expect(recorded.count == 1, "one issue, not also one for the thrown error: \(recorded)")
        let issue = recorded.first
        #expect(issue?.sourceLocation?.line == callLine)
        #expect(issue?.sourceLocation?.fileID == "SubscriptionsTestKitTests/PostRecorderTests.swift")
        let text = issue?.comments.map(\.rawValue).joined() ?? ""
        #expect(
            text.hasPrefix(
                "PostRecorder of topic \"battery\" (SubscriptionsTestKitTests/PostRecorderTests.swift:\(recorderLine)): "
                    + "waited 0.02 seconds for 3 posts"), "\(text)")
        #expect(text.hasSuffix("received 2: [80, 81]"), "\(text)")
    }

    @Test func aTimeoutIsReportedWhereTheSourceLocationPointsWhenOneIsPassed() async throws {
        let center = PostCenter()
        let recorder = PostRecorder("login", in: center)
        let issues = IssueLog()
        let place = SourceLocation(
            fileID: "App/LoginTests.swift", filePath: "/App/LoginTests.swift", line: 7, column: 3)
        try await withKnownIssue {
            try await recorder.waitForCount(1, timeout: .milliseconds(20), sourceLocation: place)
        } matching: { issue in
            issues.append(issue)
            return true
        }
        #expect(issues.all.map(\.sourceLocation) == [place])
        let text = issues.all.first?.comments.map(\.rawValue).joined() ?? ""
        #expect(text.contains("name \"login\""), "\(text)")
        #expect(text.contains("for 1 post,"), "\(text)")
        #expect(text.hasSuffix("received 0: []"), "\(text)")
    }

    @Test func outsideATestATimeoutThrowsPostRecorderTimeoutNamingTheTopicTheCountsAndThePayloads() async {
        let center = PostCenter()
        let recorder = PostRecorder(.battery, in: center)
        center.post(.battery, 80)
        // A detached task does not inherit `Test.current`: as in XCTest or a plain program.
        let outcome = await Task.detached { () -> (any Error)? in
            #expect(Test.current == nil)
            do {
                try await recorder.waitForCount(2, timeout: .milliseconds(20))
                return nil
            } catch {
                return error
            }
        }.value
        let error = outcome as? PostRecorderTimeout
        #expect(error != nil, "\(String(describing: outcome))")
        #expect(error?.wanted == 2)
        #expect(error?.received == 1)
        #expect(error?.arrived == ["80"])
        let text = error?.description ?? ""
        #expect(text.contains("topic \"battery\""), "\(text)")
        #expect(text.contains("for 2 posts"), "\(text)")
        #expect(text.contains("received 1: [80]"), "\(text)")
        #expect(text.contains("PostRecorderTests.swift"), "\(text)")
    }

    @Test func theDefaultTimeoutIsOneSecond() async {
        let center = PostCenter()
        let recorder = PostRecorder(.battery, in: center)
        let error = await Task.detached { () -> PostRecorderTimeout? in
            do {
                try await recorder.waitForCount(1)
                return nil
            } catch {
                return error as? PostRecorderTimeout
            }
        }.value
        #expect(error?.timeout == .seconds(1))
        #expect(error?.description.contains("waited 1.0 seconds for 1 post,") == true, "\(String(describing: error))")
    }

    @Test func theTimeoutListsTheFirstTwentyPayloadsAndCountsTheRest() {
        let timeout = PostRecorderTimeout(
            source: "topic \"n\"", site: "T.swift:1", wanted: 30, received: 25, timeout: .seconds(1),
            arrived: (0..<20).map(String.init))
        #expect(PostRecorderTimeout.listedPayloads == 20)
        #expect(
            timeout.description.hasSuffix(
                "received 25: [\((0..<20).map(String.init).joined(separator: ", ")), … 5 more]"))
    }

    @Test func aTimeoutKeepsOnlyTheFirstListedPayloads() async {
        let center = PostCenter()
        let recorder = PostRecorder(.battery, in: center)
        for level in 0..<25 { center.post(.battery, level) }
        let error = await Task.detached { () -> PostRecorderTimeout? in
            do {
                try await recorder.waitForCount(26, timeout: .milliseconds(20))
                return nil
            } catch {
                return error as? PostRecorderTimeout
            }
        }.value
        #expect(error?.arrived == (0..<20).map(String.init))
        #expect(error?.received == 25)
        #expect(error?.description.hasSuffix(", 19, … 5 more]") == true, "\(String(describing: error))")
    }

    @Test func cancellingTheWaitingTaskThrowsCancellationError() async {
        let center = PostCenter()
        let recorder = PostRecorder(.battery, in: center)
        let waiter = Task { try await recorder.waitForCount(1, timeout: .seconds(120)) }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(recorder.count == 0)
    }

    @Test func cancelStopsRecordingAndKeepsWhatWasRecorded() {
        let center = PostCenter()
        let recorder = PostRecorder(.battery, in: center)
        center.post(.battery, 1)
        recorder.cancel()
        #expect(center.post(.battery, 2) == 0)
        #expect(recorder.payloads == [1])
    }

    @Test func droppingTheRecorderUnsubscribes() {
        let center = PostCenter()
        var recorder: PostRecorder<Int>? = PostRecorder(.battery, in: center)
        #expect(center.subscriptionCount(for: "battery") == 1)
        #expect(recorder?.count == 0)
        recorder = nil
        #expect(center.subscriptionCount(for: "battery") == 0)
    }

    @Test func postsFromSeveralThreadsAreAllRecordedEachThreadInOrder() async throws {
        let center = PostCenter()
        let topic = Topic<[Int]>("pairs")
        let recorder = PostRecorder(topic, in: center)
        let threads = 4
        let perThread = 1_000
        await withTaskGroup(of: Void.self) { group in
            for t in 0..<threads {
                group.addTask { for i in 0..<perThread { center.post(topic, [t, i]) } }
            }
        }
        try await recorder.waitForCount(threads * perThread, timeout: .seconds(120))
        let payloads = recorder.payloads
        #expect(payloads.count == threads * perThread)
        for t in 0..<threads {
            #expect(payloads.filter { $0[0] == t }.map { $0[1] } == Array(0..<perThread))
        }
    }
}
