import Dispatch
import Foundation
import Subscriptions
import SubscriptionsTestSupport
import Synchronization
import Testing

/// A sender (the "player" of `addObserver(forName: nil, object: player, …)`).
private final class Player: Sendable {}

/// Not `Sendable`: a typed payload that pattern subscribers must not read through `payload(as:)`.
private final class Draft {
    var text = "draft"
}

private struct Failed: Error, Equatable {
    let code: Int
}

private actor PatternActor {
    var seen: [String] = []
    func note(_ line: String) { seen.append(line) }
}

@Suite("Guarantee 18: pattern subscriptions run after the name's own, every option applies")
struct Guarantee18PatternSubscriptions {
    /// `.all` from a sender gets every name that sender posts, with the name and the payload
    /// (typed posts readable through `payload(as:)`), and nothing another sender posts.
    @Test(.tags(.pin)) func allFromASenderGetsEveryNameItPostsWithThePayload() {
        let center = PostCenter()
        let player = Player()
        let other = Player()
        let log = Recorder<String>()
        let token = center.subscribe(matching: .all, from: player) { name, post in
            log.append("\(name):\(post.flag):\(post.payload(as: Int.self).map(String.init) ?? "-")")
        }
        #expect(center.post("play", flag: "go", from: player) == 1)
        #expect(center.post(Topic<Int>("volume"), 7, from: player) == 1)
        #expect(center.post("play", flag: "other", from: other) == 0)
        #expect(center.post("stop") == 0)
        #expect(center.post(Topic<Void>("stop"), from: player) == 1)
        #expect(log.values == ["play:go:-", "volume::7", "stop::-"])
        withExtendedLifetime(token) {}
    }

    /// A prefix matches the names that start with it (the prefix itself included), and no other.
    @Test(.tags(.pin)) func aPrefixMatchesOnlyTheNamesThatStartWithIt() {
        let center = PostCenter()
        let log = Recorder<String>()
        let token = center.subscribe(matching: .prefix("orders.")) { name, _ in log.append(name) }
        for name in ["orders.created", "orders.", "order", "orders", "payments.orders.x", "orders.a.b", "Orders.x"] {
            center.post(name)
        }
        #expect(log.values == ["orders.created", "orders.", "orders.a.b"])
        #expect(NamePattern.prefix("orders.").matches("orders.x"))
        #expect(!NamePattern.prefix("orders.").matches("order"))
        #expect(NamePattern.all.matches(""))
        withExtendedLifetime(token) {}
    }

    /// A post runs its name's own subscriptions first, whatever their priorities, then the
    /// patterns: `.all` (and `.prefix("")`), then prefixes from the shortest; within one pattern,
    /// higher priorities first, then subscription order.
    @Test(.tags(.pin)) func patternsRunAfterTheNamesOwnSubscriptionsShortestPrefixFirst() {
        let center = PostCenter()
        let log = Recorder<String>()
        var tokens: [Subscription] = []
        tokens.append(center.subscribe(matching: .prefix("a.b.")) { _, _ in log.append("ab") })
        tokens.append(center.subscribe(matching: .prefix("a.")) { _, _ in log.append("a0") })
        tokens.append(center.subscribe(matching: .prefix("a."), priority: 3) { _, _ in log.append("a3") })
        tokens.append(center.subscribe(matching: .all) { _, _ in log.append("all") })
        tokens.append(center.subscribe(matching: .prefix("")) { _, _ in log.append("empty") })
        tokens.append(center.subscribe("a.b.c", priority: -5) { _ in log.append("own") })
        tokens.append(center.subscribe(matching: .prefix("a."), priority: 3) { _, _ in log.append("a3b") })
        #expect(center.post("a.b.c") == 7)
        #expect(log.values == ["own", "all", "empty", "a3", "a3b", "a0", "ab"])
        withExtendedLifetime(tokens) {}
    }

    /// Queued and paced deliveries carry each post's name to the queue, in post order.
    @Test(.tags(.pin)) func queuedDeliveryCarriesEachPostsName() async {
        let center = PostCenter()
        let queue = DispatchQueue(label: "patterns")
        let log = Recorder<String>()
        let token = center.subscribe(matching: .prefix("orders."), delivery: .queue(queue)) { name, post in
            log.append("\(name):\(post.payload(as: Int.self) ?? -1)")
        }
        #expect(center.post(Topic<Int>("orders.created"), 1) == 1)
        #expect(center.post(Topic<Int>("orders.paid"), 2) == 1)
        #expect(center.post(Topic<Int>("stock.low"), 3) == 0)
        #expect(center.post("orders.shipped") == 1)
        await center.waitForPendingDeliveries()
        #expect(log.values == ["orders.created:1", "orders.paid:2", "orders.shipped:-1"])
        withExtendedLifetime(token) {}
    }

    /// Actor and main-actor deliveries carry the name too.
    @Test(.tags(.pin)) @MainActor func actorAndMainActorDeliveriesCarryTheName() async {
        let center = PostCenter()
        let actor = PatternActor()
        let log = Recorder<String>()
        let onActor = center.subscribe(matching: .prefix("ui."), on: actor) { actor, name, post in
            actor.note("\(name):\(post.flag)")
        }
        let onMain = center.subscribe(matching: .prefix("ui."), delivery: .mainActor) { name, post in
            MainActor.assertIsolated()
            log.append("\(name):\(post.flag)")
        }
        #expect(center.post("ui.tap", flag: "here") == 2)
        let away = await Task.detached { center.post("ui.swipe", flag: "away") }.value
        #expect(away == 2)
        await center.waitForPendingDeliveries()
        #expect(log.values == ["ui.tap:here", "ui.swipe:away"])
        #expect(await actor.seen == ["ui.tap:here", "ui.swipe:away"])
        withExtendedLifetime((onActor, onMain)) {}
    }

    /// `once:` delivers exactly one post, whichever matching name it has; pause skips and is
    /// not counted; cancel ends it.
    @Test(.tags(.pin)) func onceAndPauseAndCancelFollowTheRulesOfNames() {
        let center = PostCenter()
        let log = Recorder<String>()
        let one = center.subscribe(matching: .all, once: true) { name, _ in log.append("once:\(name)") }
        let paused = center.subscribe(matching: .prefix("x")) { name, _ in log.append("paused:\(name)") }
        paused.pause()
        #expect(center.post("x1") == 1)
        #expect(center.post("x2") == 0)
        #expect(!one.isActive)
        paused.resume()
        #expect(center.post("x3") == 1)
        paused.cancel()
        #expect(center.post("x4") == 0)
        #expect(!paused.isActive)
        #expect(log.values == ["once:x1", "paused:x3"])
    }

    /// A pattern handler that throws does not stop the post; the error is reported with the
    /// pattern as the name, and the handler counts as run.
    @Test(.tags(.pin)) func aThrowingPatternHandlerIsReportedWithThePatternAndTheNextRuns() async {
        let center = PostCenter()
        // A Recorder, not a Mutex: the two handlers throw on two threads, and ThreadSanitizer does
        // not see a Mutex's futex on Linux (see `Recorder`).
        let reports = Recorder<String>()
        center.diagnostics = .init { issue in
            if case .handlerThrew(let name, let site, let error as Failed) = issue {
                reports.append("\(name):\(site.line):\(error.code)")
            }
        }
        let queue = DispatchQueue(label: "throwing patterns")
        let log = Recorder<String>()
        let first = center.subscribe(matching: .prefix("job."), line: 10) { name, _ in throw Failed(code: name.count) }
        let second = center.subscribe(matching: .all, delivery: .queue(queue), line: 11) { _, _ in
            throw Failed(code: 0)
        }
        let third = center.subscribe(matching: .prefix("job.")) { name, _ in log.append(name) }
        #expect(center.post("job.run") == 3)
        await center.waitForPendingDeliveries()
        #expect(log.values == ["job.run"])
        #expect(reports.values.sorted() == ["*:11:0", "job.*:10:7"])
        withExtendedLifetime((first, second, third)) {}
    }

    /// A typed payload posted as not `Sendable` is withheld from a pattern subscriber's
    /// `payload(as:)`, and readable with `unsafePayload(as:)` in an immediate handler.
    @Test(.tags(.pin)) func aNonSendablePayloadIsWithheldFromPatternSubscribers() {
        let center = PostCenter()
        let log = Recorder<String>()
        let token = center.subscribe(matching: .all) { name, post in
            let safe = post.data == nil && post.payload(as: (any Sendable).self) == nil ? "withheld" : "read"
            log.append("\(name):\(safe):\(post.unsafePayload(as: Draft.self)?.text ?? "-")")
        }
        let draft = Draft()
        #expect(center.post(Topic<Draft>("draft"), draft) == 1)
        #expect(log.values == ["draft:withheld:draft"])
        withExtendedLifetime(token) {}
    }

    /// `subscriptionCount(for:)` counts the pattern subscriptions that the next post of the name
    /// would reach, and a post that only a pattern hears is not unheard.
    @Test(.tags(.pin)) func countsIncludeMatchingPatterns() {
        let center = PostCenter()
        let unheard = Recorder<String>()
        center.diagnostics = .init(reportsUnheardPosts: true) { issue in
            if case .unheardPost(let name) = issue { unheard.append(name) }
        }
        let all = center.subscribe(matching: .all) { _, _ in }
        let prefix = center.subscribe(matching: .prefix("m.")) { _, _ in }
        let own = center.subscribe("m.x") { _ in }
        #expect(center.subscriptionCount(for: "m.x") == 3)
        #expect(center.subscriptionCount(for: "n") == 1)
        all.pause()
        #expect(center.subscriptionCount(for: "m.y") == 1)
        #expect(center.post("n") == 0)
        #expect(center.post("m.z") == 1)
        #expect(unheard.values == ["n"])
        withExtendedLifetime((all, prefix, own)) {}
    }

    /// Among a thousand prefixes of several lengths (and one longer than 63 bytes), a post
    /// reaches exactly the ones its name starts with; retained posts reach them live.
    @Test(.tags(.pin)) func manyPrefixesOfManyLengthsMatchExactlyTheirNames() {
        let center = PostCenter()
        let hits = Recorder<String>()
        var tokens: [Subscription] = []
        let long = String(repeating: "L", count: 70) + "."
        let prefixes = (0..<1_000).map { "p\($0)." } + [long, "p1", "q"]
        for prefix in prefixes {
            tokens.append(center.subscribe(matching: .prefix(prefix)) { _, _ in hits.append(prefix) })
        }
        #expect(center.post("p12.x") == 2)
        #expect(center.post("p1.y", PostObject(), retain: true) == 2)
        #expect(center.post(long + "z") == 1)
        #expect(center.post("r") == 0)
        #expect(center.post("q") == 1)
        #expect(hits.values == ["p1", "p12.", "p1", "p1.", long, "q"])
        withExtendedLifetime(tokens) {}
    }

    /// A pattern subscription made during a post does not receive it when the center had no
    /// pattern subscription when the post started (read once, before the name's own handlers),
    /// nor when it is made by a handler of its own pattern (its slot array was read already);
    /// it does when a pattern existed and the post had not reached the patterns yet.
    @Test(.tags(.pin)) func aPatternSubscribedDuringAPostGetsItOnlyBeforeThePostReachesPatterns() {
        let center = PostCenter()
        let log = Recorder<String>()
        let late = Mutex<[Subscription]>([])
        let first = center.subscribe("n.1") { _ in
            let token = center.subscribe(matching: .prefix("n.")) { name, _ in log.append("fromName:\(name)") }
            late.withLock { $0.append(token) }
        }
        #expect(center.post("n.1") == 1)
        #expect(center.post("n.1") == 3)
        first.cancel()
        let inPattern = center.subscribe(matching: .prefix("n.")) { name, _ in
            guard name == "n.2" else { return }
            let token = center.subscribe(matching: .prefix("n.")) { name, _ in log.append("fromPattern:\(name)") }
            late.withLock { $0.append(token) }
        }
        #expect(center.post("n.2") == 3)
        #expect(center.post("n.3") == 4)
        #expect(
            log.values == [
                "fromName:n.1", "fromName:n.1", "fromName:n.2", "fromName:n.2", "fromName:n.3", "fromName:n.3",
                "fromPattern:n.3",
            ])
        withExtendedLifetime(inPattern) {}
    }

    /// `replay: true` replays every retained post whose name the pattern matches, oldest first
    /// (with `from:`, only that sender's), then live posts; retained posts of other names are
    /// not replayed, and a once-replayed one is not delivered again.
    @Test(.tags(.pin)) func replayHandsOverEveryMatchingRetainedPostOldestFirst() async {
        let center = PostCenter()
        let player = Player()
        center.post("doc.b", PostObject(flag: "b"), retain: true)
        center.post(Topic<Int>("doc.a"), 1, from: player, retain: true)
        center.post("other", PostObject(flag: "x"), retain: true)
        center.post("doc.b", PostObject(flag: "b2"), retain: true)
        let log = Recorder<String>()
        let token = center.subscribe(matching: .prefix("doc."), replay: true) { name, post in
            log.append("\(name):\(post.flag)\(post.payload(as: Int.self).map(String.init) ?? "")")
        }
        let filtered = center.subscribe(matching: .all, from: player, replay: true) { name, _ in
            log.append("player:\(name)")
        }
        let queue = DispatchQueue(label: "replay")
        let queuedLog = Recorder<String>()
        let queued = center.subscribe(matching: .all, delivery: .queue(queue), replay: true) { name, _ in
            queuedLog.append(name)
        }
        await center.waitForPendingDeliveries()
        #expect(center.post("doc.c") == 2)
        await center.waitForPendingDeliveries()
        #expect(log.values == ["doc.a:1", "doc.b:b2", "player:doc.a", "doc.c:"])
        #expect(queuedLog.values == ["doc.a", "other", "doc.b", "doc.c"])
        withExtendedLifetime((token, filtered, queued)) {}
    }

    /// An actor pattern subscription with `replay: true` gets every matching retained post on
    /// the actor, oldest first (with `from:`, only that sender's), then live posts; with
    /// `once: true` the oldest alone; with `coalesced: true` the newest as its first call.
    @Test(.tags(.pin)) func actorReplayHandsOverEveryMatchingRetainedPostOldestFirst() async {
        let center = PostCenter()
        let player = Player()
        center.post("doc.b", PostObject(flag: "b"), retain: true)
        center.post(Topic<Int>("doc.a"), 1, from: player, retain: true)
        center.post("other", PostObject(flag: "x"), retain: true)
        center.post("doc.b", PostObject(flag: "b2"), retain: true)
        let every = PatternActor()
        let fromPlayer = PatternActor()
        let one = PatternActor()
        let newest = PatternActor()
        let everyToken = center.subscribe(matching: .prefix("doc."), on: every, replay: true) { actor, name, post in
            actor.note("\(name):\(post.flag)\(post.payload(as: Int.self).map(String.init) ?? "")")
        }
        let playerToken = center.subscribe(matching: .all, from: player, on: fromPlayer, replay: true) {
            actor, name, _ in actor.note(name)
        }
        let oneToken = center.subscribe(matching: .all, on: one, replay: true, once: true) { actor, name, post in
            actor.note("\(name):\(post.flag)")
        }
        let newestToken = center.subscribe(matching: .all, on: newest, replay: true, coalesced: true) {
            actor, name, post in actor.note("\(name):\(post.flag)")
        }
        await center.waitForPendingDeliveries()
        #expect(center.post("doc.c", PostObject(flag: "c")) == 2)
        await center.waitForPendingDeliveries()
        #expect(await every.seen == ["doc.a:1", "doc.b:b2", "doc.c:c"])
        #expect(await fromPlayer.seen == ["doc.a"])
        #expect(await one.seen == ["doc.a:"])
        #expect(await newest.seen == ["doc.b:b2", "doc.c:c"])
        withExtendedLifetime((everyToken, playerToken, oneToken, newestToken)) {}
    }

    /// A retained post made while an actor pattern subscription replays reaches it exactly once:
    /// a thread retains 300 posts of one name while the subscription is made, so the replayed
    /// post and the live ones meet; the actor sees a run of consecutive numbers ending at the
    /// last, none twice, none out of order.
    @Test(.tags(.pin)) func actorReplayMeetsConcurrentRetainedPostsExactlyOnce() async {
        for _ in 0..<20 {
            let center = PostCenter()
            let topic = Topic<Int>("race.x")
            center.post(topic, 0, retain: true)
            let actor = PatternActor()
            let started = Atomic<Bool>(false)
            let poster = TestThread {
                started.store(true, ordering: .releasing)
                for i in 1...300 { center.post(topic, i, retain: true) }
            }
            while !started.load(ordering: .acquiring) {}
            let token = center.subscribe(matching: .prefix("race."), on: actor, replay: true) { actor, _, post in
                actor.note(String(post.payload(as: Int.self) ?? -1))
            }
            await poster.joined()
            await center.waitForPendingDeliveries()
            let seen = await actor.seen.compactMap(Int.init)
            #expect(seen.last == 300)
            #expect(seen == Array((seen.first ?? 0)...300))
            withExtendedLifetime(token) {}
        }
    }

    /// The same race for the pattern replays that keep only the newest post: a queued,
    /// coalesced subscription and a coalesced actor one. Each sees strictly increasing numbers
    /// ending at the last: a replayed post that also reaches it live would repeat a number.
    @Test(.tags(.pin)) func newestOnlyReplaysMeetConcurrentRetainedPostsExactlyOnce() async {
        for _ in 0..<20 {
            let center = PostCenter()
            let topic = Topic<Int>("race.y")
            center.post(topic, 0, retain: true)
            let actor = PatternActor()
            let queued = Recorder<Int>()
            let queue = DispatchQueue(label: "race.y")
            let started = Atomic<Bool>(false)
            let poster = TestThread {
                started.store(true, ordering: .releasing)
                for i in 1...300 { center.post(topic, i, retain: true) }
            }
            while !started.load(ordering: .acquiring) {}
            let paced = center.subscribe(matching: .prefix("race."), delivery: .queue(queue).coalesced, replay: true) {
                _, post in queued.append(post.payload(as: Int.self) ?? -1)
            }
            let onActor = center.subscribe(matching: .all, on: actor, replay: true, coalesced: true) { actor, _, post in
                actor.note(String(post.payload(as: Int.self) ?? -1))
            }
            await poster.joined()
            await center.waitForPendingDeliveries()
            for seen in [queued.values, await actor.seen.compactMap(Int.init)] {
                #expect(seen.last == 300)
                #expect(zip(seen, seen.dropFirst()).allSatisfy { $0 < $1 }, "\(seen)")
            }
            withExtendedLifetime((paced, onActor)) {}
        }
    }

    /// The race above, driven: a retained post is held by its name's own handler (so before it
    /// reaches any pattern) while pattern subscriptions replay it and handle it; released, it
    /// reaches them live and each drops it. Every entry kind that replays on its own: an actor,
    /// a coalesced actor, a coalesced queue.
    @Test(.tags(.pin)) func aReplayedPostHeldBeforeThePatternsIsNotDeliveredAgainLive() async {
        let center = PostCenter()
        let topic = Topic<Int>("held.x")
        let early = center.subscribe(matching: .prefix("zzz.")) { _, _ in }  // the center has patterns
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holder = center.subscribe(topic) { _ in
            entered.signal()
            release.wait()
        }
        let poster = TestThread { center.post(topic, 1, retain: true) }
        await TestThread.run { entered.wait() }
        let plain = PatternActor()
        let coalesced = PatternActor()
        let queued = Recorder<Int>()
        let tokens = [
            center.subscribe(matching: .prefix("held."), on: plain, replay: true) { actor, _, post in
                actor.note(String(post.payload(as: Int.self) ?? -1))
            },
            center.subscribe(matching: .prefix("held."), on: coalesced, replay: true, coalesced: true) {
                actor, _, post in actor.note(String(post.payload(as: Int.self) ?? -1))
            },
            center.subscribe(
                matching: .prefix("held."), delivery: .queue(DispatchQueue(label: "held")).coalesced, replay: true
            ) { _, post in queued.append(post.payload(as: Int.self) ?? -1) },
        ]
        await center.waitForPendingDeliveries()
        release.signal()
        await poster.joined()
        await center.waitForPendingDeliveries()
        #expect(await plain.seen == ["1"])
        #expect(await coalesced.seen == ["1"])
        #expect(queued.values == [1])
        withExtendedLifetime((early, holder, tokens)) {}
    }

    /// A name's route remembers that no pattern matched it, and forgets it at the next pattern
    /// subscription: a prefix subscribed after posts of the name reaches its next post.
    @Test(.tags(.pin)) func aPrefixSubscribedAfterPostsOfTheNameReachesItsNextPost() {
        let center = PostCenter()
        let log = Recorder<String>()
        let own = center.subscribe(Topic<Int>("x.y")) { _ in log.append("own") }
        let other = center.subscribe(matching: .prefix("zzz.")) { _, _ in log.append("zzz") }
        #expect(center.post(Topic<Int>("x.y"), 1) == 1)
        #expect(center.post(Topic<Int>("x.y"), 2) == 1)
        let late = center.subscribe(matching: .prefix("x.")) { name, post in
            log.append("\(name):\(post.payload(as: Int.self) ?? 0)")
        }
        #expect(center.post(Topic<Int>("x.y"), 3) == 2)
        #expect(center.post("x.y") == 1)
        #expect(log.values == ["own", "own", "own", "x.y:3", "x.y:0"])
        withExtendedLifetime((own, other, late)) {}
    }
}
