import Subscriptions
import Testing

private final class PostsSender {}

/// Every `posts(…)` overload records its caller's `fileID` and `line`, so a leak of sequences
/// points at the line that made them, not at the library.
@Suite("posts(…) records its caller")
struct AsyncPostsCallSiteTests {
    @Test func everyPostsOverloadRecordsTheCallSitePassedToIt() {
        let center = PostCenter()
        let topic = Topic<Int>("count")
        let sender = PostsSender()
        let sequences: [any Sendable] = [
            center.posts(topic, fileID: "App/A.swift", line: 1),
            center.posts(topic, from: sender, fileID: "App/B.swift", line: 2),
            center.posts(topic, replay: true, fileID: "App/C.swift", line: 3),
            center.posts("count", fileID: "App/D.swift", line: 4),
            center.posts("count", from: sender, fileID: "App/E.swift", line: 5),
            center.posts("count", replay: true, fileID: "App/F.swift", line: 6),
            PostCenter.posts("count", fileID: "App/G.swift", line: 7),
            PostCenter.posts(topic, fileID: "App/H.swift", line: 8),
        ]
        let defaultSites = PostCenter.default.subscriptionSites(for: "count")
        #expect(
            center.subscriptionSites(for: "count").map(\.description) == [
                "App/A.swift:1 (1 subscription)", "App/B.swift:2 (1 subscription)",
                "App/C.swift:3 (1 subscription)", "App/D.swift:4 (1 subscription)",
                "App/E.swift:5 (1 subscription)", "App/F.swift:6 (1 subscription)",
            ])
        #expect(
            defaultSites.map(\.description) == ["App/G.swift:7 (1 subscription)", "App/H.swift:8 (1 subscription)"])
        withExtendedLifetime(sequences) {}
    }

    @Test func theDefaultCallSiteIsTheLineThatCalledPosts() {
        let center = PostCenter()
        let line = #line + 1
        let sequence = center.posts("login")
        #expect(
            center.subscriptionSites(for: "login") == [
                SubscriptionSite(fileID: "SubscriptionsTests/AsyncPostsCallSiteTests.swift", line: line, count: 1)
            ])
        withExtendedLifetime(sequence) {}
    }

    @Test func manySubscriptionsBlamesTheLineThatMadeTheLeakedSequences() {
        let center = PostCenter()
        let reports = Recorder<PostCenter.Diagnostic>()
        center.diagnostics = .init(subscriptionLimit: 4) { reports.append($0) }
        var leaked: [Posts<Int>] = []
        let line = #line + 1
        for _ in 0..<4 { leaked.append(center.posts(Topic<Int>("tick"))) }
        let site = SubscriptionSite(fileID: "SubscriptionsTests/AsyncPostsCallSiteTests.swift", line: line, count: 4)
        #expect(reports.values == [.manySubscriptions(name: "tick", count: 4, site: site)])
        #expect(reports.values.first?.description.contains("AsyncPostsCallSiteTests.swift:\(line) (4)") == true)
        withExtendedLifetime(leaked) {}
    }
}
