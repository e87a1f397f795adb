import Subscriptions
import Synchronization
import Testing

/// The README's actor, made inside a function: its life ends at its last use.
private actor GoneCache {
    var values: [Int] = []
}

private final class GoneObserver {
    func handle(_ post: PostObject) {}
}

private protocol GoneWatching: AnyObject {}
private final class GoneWatcher: GoneWatching {}

/// The README's `let cache = Cache()` example, inside a function: the actor deallocates when the
/// function returns (or earlier, after its last use), while the token it returns lives on.
private func watchReadings(_ center: PostCenter, coalesced: Bool = false, line: Int = #line) -> Subscription {
    let cache = GoneCache()
    return center.subscribe(
        Topic<Int>("reading"), on: cache, coalesced: coalesced, fileID: "App/Watch.swift", line: line
    ) { cache, value in cache.values.append(value) }
}

@Suite("Diagnostics")
struct DiagnosticsTests {
    /// A subscription whose actor is gone says so in its description (not "cancelled"), and the
    /// first post that reaches it reports `subscriberGone` once, with its call site.
    @Test(.tags(.pin)) func aSubscriptionWhoseActorIsGoneSaysSoAndIsReportedOnce() {
        let center = PostCenter()
        let reports = Mutex<[PostCenter.Diagnostic]>([])
        center.diagnostics = .init { issue in reports.withLock { $0.append(issue) } }
        let token = watchReadings(center, line: 10)
        let coalesced = watchReadings(center, coalesced: true, line: 11)
        #expect(String(reflecting: token) == "Subscription(\"reading\", App/Watch.swift:10, actor gone)")
        #expect("\(coalesced)" == "Subscription(\"reading\", App/Watch.swift:11, actor gone)")
        #expect(center.post(Topic<Int>("reading"), 1) == 0)
        #expect(center.post(Topic<Int>("reading"), 2) == 0)
        let site = { (line: Int) in SubscriptionSite(fileID: "App/Watch.swift", line: line, count: 1) }
        #expect(
            reports.withLock { $0 } == [
                .subscriberGone(name: "reading", subscriber: "actor", site: site(10)),
                .subscriberGone(name: "reading", subscriber: "actor", site: site(11)),
            ])
        #expect(
            PostCenter.Diagnostic.subscriberGone(name: "reading", subscriber: "actor", site: site(10)).description
                .contains("whose actor is gone (made at App/Watch.swift:10)"))
        token.cancel()
        #expect(String(reflecting: token) == "Subscription(\"reading\", cancelled)")
        withExtendedLifetime(coalesced) {}
    }

    /// The same for an observer (immediate and paced registrations, and protocol observers, whose
    /// description says so too); a sender filter whose sender is gone reads "sender gone" and is
    /// not reported (dropping the sender is how such a subscription ends).
    @Test(.tags(.pin)) func aRegistrationWhoseObserverOrSenderIsGoneSaysSo() {
        let center = PostCenter()
        let reports = Mutex<[PostCenter.Diagnostic]>([])
        center.diagnostics = .init { issue in reports.withLock { $0.append(issue) } }
        var observer: GoneObserver? = GoneObserver()
        var sender: GoneObserver? = GoneObserver()
        var watcher: GoneWatcher? = GoneWatcher()
        let registered = center.register("gone", observer: observer!, line: 1, selector: GoneObserver.handle)
        let paced = center.register(
            "gone", observer: observer!, delivery: .queue(.main).coalesced, line: 2, selector: GoneObserver.handle)
        let filtered = center.subscribe("gone", from: sender!, line: 3) { _ in }
        let observed = center.observe(watcher!, for: (any GoneWatching).self)
        #expect(String(reflecting: observed).hasSuffix(", active)"))
        observer = nil
        sender = nil
        watcher = nil
        #expect(String(reflecting: registered).hasSuffix(":1, observer gone)"))
        #expect(String(reflecting: paced).hasSuffix(":2, observer gone)"))
        #expect(String(reflecting: filtered).hasSuffix(":3, sender gone)"))
        #expect(String(reflecting: observed).hasSuffix(", observer gone)"))
        #expect(center.post("gone") == 0)
        #expect(center.post("gone") == 0)
        #expect(reports.withLock { $0.map { "\($0)".contains("whose observer is gone") } } == [true, true])
        #expect(
            reports.withLock {
                $0.compactMap { if case .subscriberGone(_, _, let site) = $0 { site?.line } else { nil } }
            }
                == [1, 2])
        withExtendedLifetime((registered, paced, filtered, observed)) {}
    }
    @Test func manySubscriptionsIsReportedAtTheLimitAndAtEachDoubling() {
        let center = PostCenter()
        let reports = Mutex<[PostCenter.Diagnostic]>([])
        center.diagnostics = .init(subscriptionLimit: 3) { issue in reports.withLock { $0.append(issue) } }
        var tokens: [Subscription] = []
        tokens.append(center.subscribe("leaky", fileID: "App/Once.swift", line: 3) { _ in })
        for _ in 0..<12 { tokens.append(center.subscribe("leaky", fileID: "App/Leak.swift", line: 7) { _ in }) }
        let leak = { (count: Int) in SubscriptionSite(fileID: "App/Leak.swift", line: 7, count: count) }
        #expect(
            reports.withLock { $0 } == [
                .manySubscriptions(name: "leaky", count: 3, site: leak(2)),
                .manySubscriptions(name: "leaky", count: 6, site: leak(5)),
                .manySubscriptions(name: "leaky", count: 12, site: leak(11)),
            ])
        #expect(reports.withLock { $0 }.first?.description.contains("possible leak") == true)
        #expect(reports.withLock { $0 }.first?.description.contains("most from App/Leak.swift:7 (2)") == true)
        tokens.removeAll()
        #expect(center.subscriptionCount(for: "leaky") == 0)
    }

    @Test func noDiagnosticsByDefaultAndAfterReset() {
        let center = PostCenter()
        #expect(center.diagnostics == nil)
        let reports = Mutex(0)
        center.diagnostics = .init(subscriptionLimit: 1) { _ in reports.withLock { $0 += 1 } }
        let a = center.subscribe("x") { _ in }
        center.diagnostics = nil
        let b = center.subscribe("y") { _ in }
        #expect(reports.withLock { $0 } == 1)
        withExtendedLifetime((a, b)) {}
    }

    @Test func deepNestingIsReportedWhenReentrantPostsReachTheLimit() {
        let center = PostCenter()
        let reports = Mutex<[PostCenter.Diagnostic]>([])
        center.diagnostics = .init(nestingLimit: 4) { issue in reports.withLock { $0.append(issue) } }
        let depth = Mutex(0)
        // "ping" re-posts itself through "pong" until 6 deep: the depth counts posts in progress
        // on the thread across names, so the fourth post ("pong") is reported, once.
        let ping = center.subscribe("ping") { _ in
            let d = depth.withLock {
                $0 += 1
                return $0
            }
            if d < 6 { center.post("pong") }
        }
        let pong = center.subscribe("pong") { _ in center.post("ping") }
        center.post("ping")
        #expect(depth.withLock { $0 } == 6)
        #expect(
            reports.withLock { $0 } == [.deepNesting(name: "pong", depth: 4)])
        withExtendedLifetime((ping, pong)) {}
    }

    @Test func runawayRecursivePostStopsWithAMessageInsteadOfOverflowingTheStack() async {
        await #expect(processExitsWith: .failure) {
            let center = PostCenter()
            let token = center.subscribe("loop") { _ in center.post("loop") }
            center.post("loop")
            withExtendedLifetime(token) {}
        }
    }
}
