import Subscriptions
import Synchronization
import Testing

@Suite("Diagnostics: unheard posts")
struct UnheardPostTests {
    private static func watch(_ center: PostCenter, unheard: Bool = true) -> Recorder<PostCenter.Diagnostic> {
        let reports = Recorder<PostCenter.Diagnostic>()
        center.diagnostics = .init(reportsUnheardPosts: unheard) { reports.append($0) }
        return reports
    }

    @Test func postThatReachesNoHandlerIsReportedOncePerPost() {
        let center = PostCenter()
        let reports = Self.watch(center)
        center.post("nobody")
        center.post(Topic<Int>("nobody.typed"), 1)
        center.post("nobody", PostObject(flag: "x"), from: Tracked())
        #expect(
            reports.values == [
                .unheardPost(name: "nobody"), .unheardPost(name: "nobody.typed"), .unheardPost(name: "nobody"),
            ])
        #expect(reports.values.first?.description.contains("reached no handler") == true)
    }

    @Test func postThatReachesAHandlerIsNotReported() {
        let center = PostCenter()
        let reports = Self.watch(center)
        let token = center.subscribe("heard") { _ in }
        #expect(center.post("heard") == 1)
        #expect(reports.values.isEmpty)
        withExtendedLifetime(token) {}
    }

    @Test func postReachingOnlyPausedOrMismatchedSubscriptionsIsUnheard() {
        let center = PostCenter()
        let reports = Self.watch(center)
        let paused = center.subscribe("quiet") { _ in }
        paused.pause()
        let typed = center.subscribe(Topic<String>("quiet")) { _ in }
        center.post(Topic<Int>("quiet"), 1)
        #expect(reports.values == [.unheardPost(name: "quiet")])
        withExtendedLifetime((paused, typed)) {}
    }

    @Test func unheardPostsAreNotReportedUnlessAskedFor() {
        let center = PostCenter()
        let reports = Self.watch(center, unheard: false)
        center.post("nobody")
        #expect(reports.values.isEmpty)
        center.diagnostics = nil
        center.post("nobody")
        #expect(reports.values.isEmpty)
    }

    @Test func retainedPostWithNoListenerIsNotReported() {
        let center = PostCenter()
        let reports = Self.watch(center)
        #expect(center.post(Topic<Int>("kept"), 1, retain: true) == 0)
        #expect(reports.values.isEmpty)
    }
}

@Suite("Diagnostics: unheard posts of every post overload")
struct UnheardPostOverloadTests {
    @Test func flagDataSenderAndVoidPostsThatReachNobodyAreReported() {
        let center = PostCenter()
        let reports = Recorder<PostCenter.Diagnostic>()
        center.diagnostics = .init(reportsUnheardPosts: true) { reports.append($0) }
        let sender = Tracked()
        center.post("nobody.flag", flag: "x", from: sender)
        center.post(Topic<Void>("nobody.void"))
        center.post(Topic<Void>("nobody.void.from"), from: sender)
        #expect(
            reports.values == [
                .unheardPost(name: "nobody.flag"), .unheardPost(name: "nobody.void"),
                .unheardPost(name: "nobody.void.from"),
            ])
    }
}
