import Foundation
import Synchronization
import Testing

@testable import Subscriptions

private protocol SiteObserver: AnyObject {
    func ping()
}

private final class SitePinger: SiteObserver {
    func ping() {}
}

private actor SiteActor {}

private final class SiteOwner {
    func handle(_ post: PostObject) {}
}

@Suite("Who subscribed where")
struct CallSiteTests {
    /// The table's lock-free cache of recent sites answers only for the very site asked: sites
    /// that share a cache slot, a computed file ID equal to a literal one, and one that differs
    /// only in its text (same length, same line) each get the table's answer, also while 4
    /// threads intern them at once.
    @Test func recentSitesAnswerOnlyForTheSiteAskedAlsoFromManyThreads() {
        let sites = _CallSites.shared
        let literal = "SubscriptionsTests/CacheProbe.swift"
        let computed = String(["SubscriptionsTests", "CacheProbe.swift"].joined(separator: "/"))
        let sameLength = "SubscriptionsTests/CacheProbX.swift"
        // Lines 64 apart share a slot of the 64-slot cache (same file ID length).
        let asked: [(String, Int)] = [
            (literal, 9_001), (sameLength, 9_001), (literal, 9_065), (computed, 9_001), (sameLength, 9_065),
        ]
        let expected = asked.map { site -> (String, Int)? in
            sites.site(sites.intern(site.0, site.1)).map { ($0.fileID, $0.line) }
        }
        for (site, answer) in zip(asked, expected) {
            #expect(answer?.0 == site.0 && answer?.1 == site.1, "interned \(site) as \(String(describing: answer))")
        }
        #expect(sites.intern(literal, 9_001) == sites.intern(computed, 9_001))
        #expect(sites.intern(literal, 9_001) != sites.intern(sameLength, 9_001))
        let wrong = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for round in 0..<2_000 {
                let site = asked[round % asked.count]
                guard let answer = sites.site(sites.intern(site.0, site.1)) else {
                    wrong.add(1, ordering: .relaxed)
                    continue
                }
                if answer.fileID != site.0 || answer.line != site.1 { wrong.add(1, ordering: .relaxed) }
            }
        }
        #expect(wrong.load(ordering: .relaxed) == 0, "a cached site answered for another one")
    }

    @Test func debugDescriptionNamesTheNameTheCallSiteAndTheState() {
        let center = PostCenter()
        let line = #line + 1
        let token = center.subscribe("login") { _ in }
        let site = "SubscriptionsTests/CallSiteTests.swift:\(line)"
        #expect(String(reflecting: token) == "Subscription(\"login\", \(site), active)")
        token.pause()
        #expect(String(reflecting: token) == "Subscription(\"login\", \(site), paused)")
        token.resume()
        #expect(String(reflecting: token) == "Subscription(\"login\", \(site), active)")
        token.cancel()
        #expect(String(reflecting: token) == "Subscription(\"login\", cancelled)")
    }

    @Test func everySubscribingMethodRecordsTheCallSitePassedToIt() {
        let center = PostCenter()
        let topic = Topic<Int>("count")
        let owner = SiteOwner()
        let onActor = SiteActor()
        let tokens = [
            center.subscribe("a", fileID: "App/A.swift", line: 1) { _ in },
            center.subscribe(topic, fileID: "App/B.swift", line: 2) { _ in },
            center.subscribe(topic, delivery: .queue(.main), fileID: "App/C.swift", line: 3) { _ in },
            center.subscribe("a", once: true, fileID: "App/D.swift", line: 4) { _ in },
            center.subscribe("a", from: owner, fileID: "App/E.swift", line: 5) { _ in },
            center.register("a", observer: owner, fileID: "App/F.swift", line: 6, selector: SiteOwner.handle),
            PostCenter.subscribe("a", fileID: "App/G.swift", line: 7) { _ in },
            center.subscribe(topic, on: onActor, fileID: "App/H.swift", line: 8) { _, _ in },
            center.subscribe("a", on: onActor, fileID: "App/I.swift", line: 9) { _, _ in },
        ]
        #expect(
            tokens.map { String(reflecting: $0) } == [
                "Subscription(\"a\", App/A.swift:1, active)",
                "Subscription(\"count\", App/B.swift:2, active)",
                "Subscription(\"count\", App/C.swift:3, active)",
                "Subscription(\"a\", App/D.swift:4, active)",
                "Subscription(\"a\", App/E.swift:5, active)",
                "Subscription(\"a\", App/F.swift:6, active)",
                "Subscription(\"a\", App/G.swift:7, active)",
                "Subscription(\"count\", App/H.swift:8, active)",
                "Subscription(\"a\", App/I.swift:9, active)",
            ])
        withExtendedLifetime((owner, onActor)) {}
    }

    @Test func protocolObserverTokenNamesTheProtocolAndItsCallSite() {
        let center = PostCenter()
        let pinger = SitePinger()
        let token = center.observe(pinger, for: SiteObserver.self, fileID: "App/P.swift", line: 9)
        #expect(String(reflecting: token) == "Subscription(SiteObserver, App/P.swift:9, active)")
        center.removeObserver(pinger)
        #expect(String(reflecting: token) == "Subscription(SiteObserver, App/P.swift:9, cancelled)")
    }

    @Test func subscriptionSitesListsOneSitePerCallSiteBusiestFirst() {
        let center = PostCenter()
        var tokens: [Subscription] = []
        for _ in 0..<3 { tokens.append(center.subscribe("login", fileID: "App/Busy.swift", line: 20) { _ in }) }
        tokens.append(center.subscribe(Topic<Int>("login"), fileID: "App/Once.swift", line: 5) { _ in })
        for _ in 0..<2 { tokens.append(center.subscribe("login", fileID: "App/Two.swift", line: 7) { _ in }) }
        tokens.append(center.subscribe("other", fileID: "App/Other.swift", line: 1) { _ in })
        #expect(
            center.subscriptionSites(for: "login") == [
                SubscriptionSite(fileID: "App/Busy.swift", line: 20, count: 3),
                SubscriptionSite(fileID: "App/Two.swift", line: 7, count: 2),
                SubscriptionSite(fileID: "App/Once.swift", line: 5, count: 1),
            ])
        tokens[0].cancel()
        tokens[1].pause()  // paused subscriptions are still live
        tokens[4].cancel()
        #expect(
            center.subscriptionSites(for: "login") == [
                SubscriptionSite(fileID: "App/Busy.swift", line: 20, count: 2),
                SubscriptionSite(fileID: "App/Once.swift", line: 5, count: 1),
                SubscriptionSite(fileID: "App/Two.swift", line: 7, count: 1),
            ])
        #expect(center.subscriptionSites(for: "nobody").isEmpty)
        #expect(
            SubscriptionSite(fileID: "App/Busy.swift", line: 20, count: 2).description
                == "App/Busy.swift:20 (2 subscriptions)")
        withExtendedLifetime(tokens) {}
    }

    @Test func subscriptionSitesLeaveOutRegistrationsWhoseObserverDeallocated() {
        let center = PostCenter()
        var owner: SiteOwner? = SiteOwner()
        let token = center.register(
            "login", observer: owner!, fileID: "App/Gone.swift", line: 3, selector: SiteOwner.handle)
        #expect(
            center.subscriptionSites(for: "login") == [SubscriptionSite(fileID: "App/Gone.swift", line: 3, count: 1)])
        owner = nil
        #expect(center.subscriptionSites(for: "login").isEmpty)
        #expect(String(reflecting: token) == "Subscription(\"login\", App/Gone.swift:3, observer gone)")
    }

    // MARK: The call-site table (Engine/Core/CallSites.swift)

    /// "`intern` returns 0 (unknown) once `capacity` distinct sites are recorded": the table
    /// records exactly `UInt16.max` sites, then answers 0 instead of trapping or reusing an id.
    /// In a child process: the table is process-wide, and filling it would blind other tests.
    @Test(.tags(.mutantPin)) func theCallSiteTableRecordsUInt16MaxSitesThenAnswersUnknown() async {
        await #expect(processExitsWith: .exitCode(0)) {
            let table = _CallSites.shared
            let known = (0..<10).map { table.intern("Known/File.swift", $0) }
            var ids = Set(known)
            var n = 0
            while ids.count < _CallSites.capacity {
                ids.insert(table.intern("Filler/File\(n).swift", n))
                n += 1
            }
            let first = table.intern("Overflow/First.swift", 1)
            let second = table.intern("Overflow/Second.swift", 2)
            let ok =
                _CallSites.capacity == 65_535 && !ids.contains(0) && first == 0 && second == 0
                && table.site(0) == nil
                && known.enumerated().allSatisfy { line, id in
                    table.intern("Known/File.swift", line) == id
                        && table.site(id).map { $0.fileID == "Known/File.swift" && $0.line == line } == true
                }
            exit(ok ? 0 : 1)
        }
    }
}
