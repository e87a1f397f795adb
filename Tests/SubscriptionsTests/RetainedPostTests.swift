import Dispatch
import Foundation
import Subscriptions
import SubscriptionsTestSupport
import Synchronization
import Testing

private let battery = Topic<Int>("retained.battery")

@Suite("Retained posts")
struct RetainedPostTests {
    @Test func retainedPostIsDeliveredAsUsualAndKeptAsTheLatest() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let token = center.subscribe(battery) { seen.append($0) }
        #expect(center.retained(battery) == nil)
        #expect(center.post(battery, 80, retain: true) == 1)
        #expect(center.post(battery, 81, retain: true) == 1)
        #expect(seen.values == [80, 81])
        #expect(center.retained(battery) == 81)
        #expect(center.retained(battery.name)?.payload(as: Int.self) == 81)
        withExtendedLifetime(token) {}
    }

    @Test func postWithoutRetainLeavesTheRetainedPostAlone() {
        let center = PostCenter()
        center.post(battery, 80, retain: true)
        center.post(battery, 81, retain: false)
        center.post(battery, 82)
        center.post(battery.name, flag: "other")
        #expect(center.retained(battery) == 80)
        let replayed = Recorder<Int>()
        let token = center.subscribe(battery, replay: true) { replayed.append($0) }
        #expect(replayed.values == [80])
        withExtendedLifetime(token) {}
    }

    @Test func immediateReplayRunsOnTheSubscribingThreadBeforeSubscribeReturns() {
        let center = PostCenter()
        center.post(battery, 80, retain: true)
        let seen = Recorder<Int>()
        let threads = Recorder<ObjectIdentifier>()
        let token = center.subscribe(battery, replay: true) { level in
            seen.append(level)
            threads.append(currentThreadID())
        }
        #expect(seen.values == [80])
        #expect(threads.values == [currentThreadID()])
        center.post(battery, 81)
        #expect(seen.values == [80, 81])
        withExtendedLifetime(token) {}
    }

    /// Why `post(_:_:retain: true)` requires `Sendable` (RetainedPosts article): the payload
    /// posted on one thread is replayed later on the thread that subscribes.
    @Test func aRetainedPayloadIsReplayedOnTheSubscribingThreadNotThePostersThread() {
        let center = PostCenter()
        let poster = currentThreadID()  // this thread outlives the test's other thread
        center.post(battery, 80, retain: true)
        let subscriber = Recorder<ObjectIdentifier>()
        let seen = Recorder<ObjectIdentifier>()
        TestThread {
            subscriber.append(currentThreadID())
            let token = center.subscribe(battery, replay: true) { _ in seen.append(currentThreadID()) }
            withExtendedLifetime(token) {}
        }.join()
        #expect(seen.values.count == 1)
        #expect(seen.values == subscriber.values)
        #expect(seen.values != [poster])
    }

    @Test func replayWithoutARetainedPostDeliversOnlyLivePosts() {
        let center = PostCenter()
        center.post(battery, 79)
        let seen = Recorder<Int>()
        let token = center.subscribe(battery, replay: true) { seen.append($0) }
        #expect(seen.values.isEmpty)
        center.post(battery, 80)
        #expect(seen.values == [80])
        withExtendedLifetime(token) {}
    }

    @Test func subscribeWithoutReplayDoesNotGetTheRetainedPost() {
        let center = PostCenter()
        center.post(battery, 80, retain: true)
        let seen = Recorder<Int>()
        let token = center.subscribe(battery) { seen.append($0) }
        #expect(seen.values.isEmpty)
        withExtendedLifetime(token) {}
    }

    @Test func clearRetainedForgetsThePostForLaterReplays() {
        let center = PostCenter()
        center.post(battery, 80, retain: true)
        center.post("retained.theme", PostObject(flag: "dark"), retain: true)
        center.clearRetained(battery)
        center.clearRetained("retained.theme")
        #expect(center.retained(battery) == nil)
        #expect(center.retained("retained.theme") == nil)
        let seen = Recorder<Int>()
        let token = center.subscribe(battery, replay: true) { seen.append($0) }
        #expect(seen.values.isEmpty)
        withExtendedLifetime(token) {}
    }

    @Test func typedRetainedPayloadIsHeldStronglyUntilReplacedOrCleared() {
        let center = PostCenter()
        let live = LiveObjects()
        let topic = Topic<Tracked>("retained.tracked")
        center.post(topic, Tracked("first", live: live), retain: true)
        #expect(live.alive == 1)
        #expect(center.retained(topic)?.name == "first")
        center.post(topic, Tracked("second", live: live), retain: true)
        #expect(live.alive == 1)  // the first one was released when replaced
        let replayed = Recorder<String>()
        let token = center.subscribe(topic, replay: true) { replayed.append($0.name) }
        #expect(replayed.values == ["second"])
        center.clearRetained(topic)
        #expect(live.alive == 0)
        withExtendedLifetime(token) {}
    }

    @Test func retainedPostObjectIsKeptWithItsDataWeak() {
        let center = PostCenter()
        let live = LiveObjects()
        var data: Tracked? = Tracked("user", live: live)
        let envelope = PostObject(flag: "dark", data: data)
        center.post("retained.theme", envelope, retain: true)
        #expect(center.retained("retained.theme") === envelope)
        #expect(center.retained("retained.theme")?.data === data)
        data = nil
        #expect(live.alive == 0)
        #expect(center.retained("retained.theme")?.flag == "dark")
        #expect(center.retained("retained.theme")?.data == nil)
        let flags = Recorder<String>()
        let token = center.subscribe("retained.theme", replay: true) { flags.append($0.flag) }
        #expect(flags.values == ["dark"])
        withExtendedLifetime(token) {}
    }

    @Test func retainedPostOfAnotherPayloadTypeIsSkippedLikeATypedMismatch() {
        let center = PostCenter()
        let text = Topic<String>("retained.mixed")
        let number = Topic<Int>("retained.mixed")
        center.post(text, "full", retain: true)
        #expect(center.retained(number) == nil)
        #expect(center.retained(text) == "full")
        let numbers = Recorder<Int>()
        let envelopes = Recorder<String>()
        let a = center.subscribe(number, replay: true) { numbers.append($0) }
        let b = center.subscribe("retained.mixed", replay: true) {
            envelopes.append($0.payload(as: String.self) ?? "?")
        }
        #expect(numbers.values.isEmpty)
        #expect(envelopes.values == ["full"])
        center.post(number, 5)
        #expect(numbers.values == [5])
        withExtendedLifetime((a, b)) {}
    }

    @Test func retainedPostDoesNotReachSenderFilteredSubscriptions() {
        let center = PostCenter()
        let sender = Tracked("sender")
        let seen = Counter()
        let token = center.subscribe(battery, from: sender) { _ in seen.increment() }
        #expect(center.post(battery, 80, retain: true) == 0)
        #expect(seen.count == 0)
        withExtendedLifetime((token, sender)) {}
    }

    /// A retained post made `from:` a sender reaches that sender's filtered subscriptions live,
    /// like any post from it, and keeps the sender weakly: the sender deallocates while its post
    /// stays retained, and unfiltered subscriptions still get it replayed.
    @Test(.tags(.pin)) func aRetainedPostFromASenderKeepsItWeaklyAndReachesItsFilteredSubscriptions() {
        let center = PostCenter()
        let live = LiveObjects()
        var sender: Tracked? = Tracked("sender", live: live)
        let seen = Recorder<Int>()
        let token = center.subscribe(battery, from: sender!) { seen.append($0) }
        #expect(center.post(battery, 80, from: sender, retain: true) == 1)
        #expect(seen.values == [80])
        token.cancel()
        sender = nil
        #expect(live.alive == 0)
        let replayed = Recorder<Int>()
        let later = center.subscribe(battery, replay: true) { replayed.append($0) }
        #expect(replayed.values == [80])
        withExtendedLifetime(later) {}
    }

    @Test func queuedReplayRunsOnTheQueueBeforeLivePosts() async {
        let center = PostCenter()
        center.post(battery, 80, retain: true)
        let queue = makeSerialQueue("retained.queue")
        let seen = Recorder<Int>()
        let queues = Recorder<String>()
        queue.suspend()
        let token = center.subscribe(battery, delivery: .queue(queue), replay: true) { level in
            seen.append(level)
            queues.append(currentQueueName() ?? "?")
        }
        center.post(battery, 81, retain: true)
        center.post(battery, 82)
        #expect(seen.values.isEmpty)
        queue.resume()
        await center.waitForPendingDeliveries()
        #expect(seen.values == [80, 81, 82])
        #expect(queues.values == ["retained.queue", "retained.queue", "retained.queue"])
        withExtendedLifetime(token) {}
    }

    @Test func queuedReplayIsDroppedWhenCancelledBeforeItRuns() async {
        let center = PostCenter()
        center.post(battery, 80, retain: true)
        let queue = DispatchQueue(label: "retained.dropped")
        let seen = Counter()
        queue.suspend()
        let token = center.subscribe(battery, delivery: .queue(queue), replay: true) { _ in seen.increment() }
        token.cancel()
        queue.resume()
        await center.waitForPendingDeliveries()
        #expect(seen.count == 0)
    }

    @MainActor
    @Test func mainActorReplayOnTheMainThreadRunsBeforeSubscribeReturns() async {
        let center = PostCenter()
        center.post(battery, 80, retain: true)
        var seen: [Int] = []
        let token = center.subscribe(battery, delivery: .mainActor, replay: true) { seen.append($0) }
        #expect(seen == [80])
        center.post(battery, 81)
        #expect(seen == [80, 81])
        withExtendedLifetime(token) {}
    }

    @Test func mainActorReplayFromAnotherThreadIsScheduledOnTheMainActor() async {
        let center = PostCenter()
        center.post("retained.main", PostObject(flag: "dark"), retain: true)
        let flags = Recorder<String>()
        let token = await Task.detached {
            center.subscribe("retained.main", delivery: .mainActor, replay: true) { post in
                MainActor.preconditionIsolated("a main-actor replay runs on the main actor")
                flags.append(post.flag)
            }
        }.value
        // Scheduled, not run on the subscribing thread: the pending delivery is waited for.
        await center.waitForPendingDeliveries()
        #expect(flags.values == ["dark"])
        withExtendedLifetime(token) {}
    }

    @Test func subscribeOnceWithReplayTakesTheRetainedPostAsItsOnePost() {
        let center = PostCenter()
        center.post(battery, 80, retain: true)
        let seen = Recorder<Int>()
        let token = center.subscribe(battery, replay: true, once: true) { seen.append($0) }
        center.post(battery, 81)
        #expect(seen.values == [80])
        #expect(!token.isActive)
        let flags = Recorder<String>()
        let named = center.subscribe(battery.name, replay: true, once: true) {
            flags.append("\($0.payload(as: Int.self) ?? -1)")
        }
        #expect(flags.values == ["80"])
        withExtendedLifetime(named) {}
    }

    @Test func registerWithReplayCallsTheObserverWithTheRetainedPost() {
        final class Gauge {
            var levels: [Int] = []
            var themes: [String] = []
            func show(_ level: Int) { levels.append(level) }
            func apply(_ post: PostObject) { themes.append(post.flag) }
        }
        let center = PostCenter()
        center.post(battery, 80, retain: true)
        center.post("retained.theme", flag: "dark", retain: true)
        let gauge = Gauge()
        let a = center.register(battery, observer: gauge, replay: true, selector: Gauge.show)
        let b = center.register("retained.theme", observer: gauge, replay: true, selector: Gauge.apply)
        center.post(battery, 81)
        #expect(gauge.levels == [80, 81])
        #expect(gauge.themes == ["dark"])
        withExtendedLifetime((a, b)) {}
    }

    @Test func postsSequenceWithReplayStartsWithTheRetainedPayload() async {
        let center = PostCenter()
        center.post(battery, 80, retain: true)
        let levels = center.posts(battery, replay: true)
        let themes = center.posts("retained.none", replay: true)
        center.post(battery, 81)
        var seen: [Int] = []
        for await level in levels {
            seen.append(level)
            if seen.count == 2 { break }
        }
        #expect(seen == [80, 81])
        withExtendedLifetime(themes) {}
    }

    @Test func postMadeByTheReplayedHandlerComesAfterTheReplay() {
        let center = PostCenter()
        center.post(battery, 80, retain: true)
        let seen = Recorder<Int>()
        let token = center.subscribe(battery, replay: true) { level in
            seen.append(level)
            if level == 80 { center.post(battery, 81, retain: true) }
        }
        #expect(seen.values == [80, 81])
        #expect(center.retained(battery) == 81)
        withExtendedLifetime(token) {}
    }
}

/// The hand-over between the replayed post and live posts, under concurrent posters.
@Suite("Retained posts: hand-over race")
struct RetainedHandOverTests {
    enum Mode: String, CaseIterable, Sendable {
        case immediate, queue
    }

    /// Payloads encode `poster * 10_000 + sequence`; the seed is -1.
    static func check(_ received: [Int], posters: Int, perPoster: Int, everyOtherRetained: Bool) -> String? {
        guard let first = received.first else { return "nothing received, not even the replayed seed" }
        if first != -1 && (everyOtherRetained && (first % 10_000) % 2 != 0) {
            return "replayed \(first), which was not a retained post"
        }
        if Set(received).count != received.count { return "a post was delivered twice: \(received)" }
        if received.dropFirst().contains(-1) { return "the seed came after the replay" }
        for poster in 0..<posters {
            let mine = received.filter { $0 >= 0 && $0 / 10_000 == poster }.map { $0 % 10_000 }
            guard let last = mine.last else { continue }
            if mine != mine.sorted() { return "poster \(poster) out of order: \(mine)" }
            // Live deliveries of one poster have no gaps. Only between the replayed post and the
            // poster's first live one may posts without `retain:` be missing (made before the
            // subscription).
            let replayedHere = first >= 0 && first / 10_000 == poster
            let live = replayedHere ? Array(mine.dropFirst()) : mine
            if let start = live.first, live != Array(start...last) { return "poster \(poster) has gaps: \(mine)" }
            if !live.isEmpty && last != perPoster - 1 { return "poster \(poster) lost its later posts: \(mine)" }
            if replayedHere {
                // Posts after the replayed one that were not delivered were made before the
                // subscription: only posts without `retain:` may be among them.
                let skipped = ((first % 10_000) + 1)..<(live.first ?? perPoster)
                if !everyOtherRetained && !skipped.isEmpty { return "poster \(poster) lost \(skipped)" }
                if skipped.contains(where: { $0 % 2 == 0 }) {
                    return "poster \(poster) lost a retained post in \(skipped)"
                }
            }
        }
        return nil
    }

    @Test(arguments: Mode.allCases, [false, true])
    func postRacingWithReplaySubscribeIsReplayedOrLiveNeverBothNeverOutOfOrder(
        mode: Mode, everyOtherRetained: Bool
    ) async {
        let posters = 3
        let perPoster = 150
        let rounds = 400
        var failures: [String] = []
        for round in 0..<rounds {
            let center = PostCenter()
            let topic = Topic<Int>("race")
            center.post(topic, -1, retain: true)
            let posted = Atomic<Int>(0)
            let threshold = (round * 7) % (posters * perPoster)
            let received = Recorder<Int>()
            let queue = DispatchQueue(label: "race.\(round)")
            let token = TokenSlot()
            let threads = (0..<posters).map { poster in
                TestThread {
                    for sequence in 0..<perPoster {
                        let retain = !everyOtherRetained || sequence % 2 == 0
                        center.post(topic, poster * 10_000 + sequence, retain: retain)
                        posted.add(1, ordering: .relaxed)
                    }
                }
            }
            let subscriber = TestThread {
                while posted.load(ordering: .relaxed) < threshold { sched_yield() }
                let delivery: Delivery = mode == .queue ? .queue(queue) : .immediate
                token.token = center.subscribe(topic, delivery: delivery, replay: true) { received.append($0) }
            }
            for thread in threads { thread.join() }
            subscriber.join()
            await center.waitForPendingDeliveries()
            if let failure = Self.check(
                received.values, posters: posters, perPoster: perPoster, everyOtherRetained: everyOtherRetained)
            {
                failures.append("round \(round): \(failure)")
            }
            token.token = nil
        }
        #expect(failures.isEmpty, "\(failures.prefix(3))")
    }
}
