import Subscriptions
import Synchronization
import Testing

@Suite("Diagnostics")
struct DiagnosticsTests {
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
        // "ping" re-posts itself through "pong" until 6 deep: depth 4 of each is reported once,
        // "ping" first since it is the outermost.
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
            reports.withLock { $0 } == [
                .deepNesting(name: "ping", depth: 4),
                .deepNesting(name: "pong", depth: 4),
            ])
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
