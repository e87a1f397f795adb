import Dispatch
import Foundation
import SubscriptionsTestSupport
import Testing

@testable import Subscriptions

/// Guarantee 1: handlers of a name run in subscription order; a paused then resumed subscription
/// keeps its place. (Foundation on Linux delivers in hash order, so the tests use many
/// subscribers: a small count can come out in order by chance.)
@Suite("Guarantee 1: handlers of a name run in subscription order")
struct Guarantee01Ordering {
    @Test(.tags(.pin)) func handlersRunInSubscriptionOrder() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let tokens = (0..<5).map { i in center.subscribe("x") { _ in seen.append(i) } }
        #expect(center.post("x") == 5)
        #expect(center.post("x") == 5)
        #expect(seen.values == Array(0..<5) + Array(0..<5))
        withExtendedLifetime(tokens) {}
    }

    @Test(.tags(.pin)) func twoHundredSubscribersRunInSubscriptionOrder() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let tokens = (0..<200).map { i in center.subscribe("many") { _ in seen.append(i) } }
        #expect(center.post("many") == 200)
        #expect(seen.values == Array(0..<200))
        withExtendedLifetime(tokens) {}
    }

    @Test(.tags(.pin)) func orderIsKeptAcrossCancellationChurn() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        var tokens: [Int: Subscription] = [:]
        var expected: [Int] = []
        var next = 0
        // Rounds of: add 60, cancel every other live one (growth, tombstones, compaction).
        for round in 0..<5 {
            for _ in 0..<60 {
                let i = next
                next += 1
                tokens[i] = center.subscribe("churn") { _ in seen.append(i) }
                expected.append(i)
            }
            let victims = expected.enumerated().filter { $0.offset % 2 == round % 2 }.map(\.element)
            for victim in victims { tokens.removeValue(forKey: victim)?.cancel() }
            expected.removeAll { victims.contains($0) }
            seen.reset()
            #expect(center.post("churn") == expected.count)
            #expect(seen.values == expected)
        }
        #expect(center.subscriptionCount(for: "churn") == expected.count)
    }

    @Test(.tags(.pin)) func pausedThenResumedSubscriptionKeepsItsPlace() {
        let center = PostCenter()
        let seen = Recorder<Int>()
        let tokens = (0..<200).map { i in center.subscribe("x") { _ in seen.append(i) } }
        tokens[100].pause()
        tokens[0].pause()
        #expect(center.post("x") == 198)
        #expect(seen.values == Array(1..<100) + Array(101..<200))
        seen.reset()
        // Later subscriptions and cancellations (which compact the slots) do not move it.
        let late = center.subscribe("x") { _ in seen.append(200) }
        for i in stride(from: 1, to: 100, by: 2) { tokens[i].cancel() }
        tokens[100].resume()
        tokens[0].resume()
        #expect(center.post("x") == 200 - 50 + 1)
        let expected = [0] + stride(from: 2, to: 100, by: 2) + Array(100..<200) + [200]
        #expect(seen.values == expected)
        withExtendedLifetime((tokens, late)) {}
    }

    @Test(.tags(.pin)) func plainTopicAndObserverSubscriptionsShareOneOrder() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let topic = Topic<Int>("mixed")
        final class Observer {
            let seen: Recorder<String>
            init(_ seen: Recorder<String>) { self.seen = seen }
            func plain(_ post: PostObject) { seen.append("observer-plain") }
            func typed(_ value: Int) { seen.append("observer-typed") }
        }
        let observer = Observer(seen)
        var tokens = Set<Subscription>()
        center.subscribe(topic) { _ in seen.append("typed-1") }.store(in: &tokens)
        center.subscribe("mixed") { _ in seen.append("plain-1") }.store(in: &tokens)
        center.register(topic, observer: observer, selector: Observer.typed).store(in: &tokens)
        center.register("mixed", observer: observer, selector: Observer.plain).store(in: &tokens)
        center.subscribe("mixed") { _ in seen.append("plain-2") }.store(in: &tokens)
        center.subscribe(topic) { _ in seen.append("typed-2") }.store(in: &tokens)
        #expect(center.post(topic, 1) == 6)
        #expect(
            seen.values == ["typed-1", "plain-1", "observer-typed", "observer-plain", "plain-2", "typed-2"])
        withExtendedLifetime(observer) {}
    }

    @Test(.tags(.pin)) func manyNamesKeepTheirOwnSubscribersAcrossChurn() {
        // Names share stripes and a probing table; removing emptied names must not lose others.
        let center = PostCenter()
        let seen = Recorder<String>()
        var tokens: [String: Subscription] = [:]
        for i in 0..<300 {
            let name = "name-\(i)"
            tokens[name] = center.subscribe(name) { _ in seen.append(name) }
        }
        for i in stride(from: 0, to: 300, by: 3) { tokens.removeValue(forKey: "name-\(i)") }
        for i in 0..<300 {
            seen.reset()
            let name = "name-\(i)"
            let expected = i % 3 == 0 ? 0 : 1
            #expect(center.post(name) == expected)
            #expect(seen.values == (expected == 1 ? [name] : []))
            #expect(center.subscriptionCount(for: name) == expected)
        }
    }

    // MARK: Guarantees 1 and 7: a retired name table keeps its routes until no post reads it

    /// A post is inside the first of 40 handlers of a name when every subscription of the name
    /// goes (the running one by its token's deinit), and enough other names of the same stripe
    /// empty out that the stripe drops the empty routes into a new name table and frees the old
    /// one at the next cancel. The route the post walks, and the slot buffer it reads, must stay
    /// until the post ends: fresh subscriptions of other names, whose slot buffers have the same
    /// size and reuse freed memory, are never called by it.
    @Test(.tags(.mutantPin)) func aRouteEmptiedDuringItsOwnDeliveryStaysReadableUntilThePostEnds() {
        let center = PostCenter()
        let name = "pin.table.walk"
        let stripe = center._stripes[_NameKey(name).hash].toOpaque()
        let sameStripe = (0..<10_000).lazy.map { "pin.table.other.\($0)" }
            .filter { center._stripes[_NameKey($0).hash].toOpaque() == stripe }
        let others = Array(sameStripe.prefix(24))
        #expect(others.count == 24)
        let inside = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        let wrongCalls = Counter()
        let cancelledCalls = Counter()
        var running: Subscription? = center.subscribe(name) { _ in
            inside.signal()
            proceed.wait()
        }
        var later: [Subscription]? = (0..<39).map { _ in center.subscribe(name) { _ in cancelledCalls.increment() } }
        let returned = Counter()
        let poster = TestThread { returned.add(center.post(name)) }
        inside.wait()
        for token in later ?? [] { token.cancel() }
        later = nil
        running = nil  // the route is empty now; its only call still runs
        // Empty routes of the same stripe: the stripe builds a table without them, retires the
        // old one, and tries to free it at every later cancel on the stripe.
        for other in others {
            let token = center.subscribe(other) { _ in }
            token.cancel()
        }
        // Fresh slot buffers of the same capacity, made on this thread: they reuse what was freed
        // here.
        let fresh = (0..<4).flatMap { i in
            (0..<40).map { _ in center.subscribe("pin.table.fresh.\(i)") { _ in wrongCalls.increment() } }
        }
        proceed.signal()
        poster.join()
        #expect(wrongCalls.count == 0, "the post walked memory freed under it: it called handlers of other names")
        #expect(cancelledCalls.count == 0)
        #expect(returned.count == 1)
        #expect(running == nil)
        #expect(center.post(name) == 0)
        withExtendedLifetime(fresh) {}
    }

    // MARK: Grace periods: a post re-reads what it published (`_publishStable`)

    /// A post reads its stripe's name table, then stops (a debug-build pause) before it notes that
    /// table in its frame. Meanwhile a subscribe grows the stripe into a new table holding the
    /// name's route, and a cancel on the stripe frees the old one, since no frame names it. The
    /// post must re-read after noting, see the new table, and deliver: trusting its first read, it
    /// would search a freed table that never held the route (AddressSanitizer reports the read;
    /// without it, the post finds no route and returns 0).
    @Test(.tags(.mutantPin)) func aPostThatReadTheNameTableBeforeItWasReplacedAndFreedReadsTheNewOne() {
        let center = PostCenter()
        let name = "pin.stable.table"
        let stripe = center._stripes[_NameKey(name).hash]
        var sameStripe = (0..<100_000).lazy.map { "pin.stable.other.\($0)" }
            .filter { center._stripes[_NameKey($0).hash].toOpaque() == stripe.toOpaque() }
            .makeIterator()
        // Fill the stripe up to the point where one more route makes it grow into a new table.
        var fillers: [Subscription] = []
        while stripe.takeUnretainedValue().mutex.withLock({ ($0.count + 1) * 2 <= $0.table.capacity }) {
            guard let other = sameStripe.next() else { break }
            fillers.append(center.subscribe(other) { _ in })
        }
        let before = stripe.takeUnretainedValue().table.load(ordering: .relaxed)
        let paused = DispatchSemaphore(value: 0)
        let resume = DispatchSemaphore(value: 0)
        let calls = Counter()
        let returned = Counter()
        let poster = TestThread {
            _PostPause.arm {
                paused.signal()
                resume.wait()
            }
            returned.add(center.post(name))
        }
        paused.wait()
        let token = center.subscribe(name) { _ in calls.increment() }
        let after = stripe.takeUnretainedValue().table.load(ordering: .relaxed)
        // Any cancel on the stripe reclaims the retired tables that no frame names.
        if let other = sameStripe.next() { center.subscribe(other) { _ in }.cancel() }
        let retired = stripe.takeUnretainedValue().mutex.withLock { $0.retired.count }
        resume.signal()
        poster.join()
        #expect(after != before, "the subscribe did not grow the stripe into a new table")
        #expect(retired == 0, "the old table was not freed while the post was paused")
        #expect(returned.count == 1, "the post trusted its first read of the name table")
        #expect(calls.count == 1)
        withExtendedLifetime((fillers, token)) {}
    }
}
