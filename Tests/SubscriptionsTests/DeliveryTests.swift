import Dispatch
import Foundation
import Subscriptions
import SubscriptionsTestSupport
import Testing

/// Guarantee 2: `.immediate` runs every handler on the posting thread before `post` returns;
/// `.queue(q)` runs it asynchronously on `q`, in post order, and never blocks the poster.
/// Guarantee 3: `post` returns how many handlers it ran or scheduled (0 when nobody listens).
@Suite("Delivery (guarantees 2 and 3)")
struct DeliveryTests {
    // MARK: Guarantee 2, immediate

    @Test func immediateHandlersRunOnThePostingThreadBeforePostReturns() {
        let center = PostCenter()
        let threads = Recorder<ObjectIdentifier>()
        let tokens = (0..<3).map { _ in
            center.subscribe("x") { _ in threads.append(currentThreadID()) }
        }
        let posterThreads = Recorder<ObjectIdentifier>()
        let countsRightAfterPost = Recorder<Int>()
        let poster = TestThread {
            posterThreads.append(currentThreadID())
            center.post("x")
            countsRightAfterPost.append(threads.count)
            center.post("x")
            countsRightAfterPost.append(threads.count)
        }
        poster.join()
        #expect(countsRightAfterPost.values == [3, 6])
        #expect(threads.values == Array(repeating: posterThreads.values[0], count: 6))
        withExtendedLifetime(tokens) {}
    }

    @Test func typedImmediateHandlersRunBeforePostReturns() {
        let center = PostCenter()
        let seen = Recorder<Point>()
        let topic = Topic<Point>("point")
        let token = center.subscribe(topic) { seen.append($0) }
        center.post(topic, Point(x: 1, y: 2))
        #expect(seen.values == [Point(x: 1, y: 2)])
        withExtendedLifetime(token) {}
    }

    // MARK: Guarantee 2, queued

    @Test func queuedHandlersRunOnTheirQueueInPostOrder() {
        let center = PostCenter()
        let queue = makeSerialQueue("delivery.order")
        let seen = Recorder<String>()
        let wrongQueue = Counter()
        let first = center.subscribe(Topic<Int>("n"), delivery: .queue(queue)) { n in
            if currentQueueName() != "delivery.order" { wrongQueue.increment() }
            seen.append("a\(n)")
        }
        let second = center.subscribe("n", delivery: .queue(queue)) { post in
            if currentQueueName() != "delivery.order" { wrongQueue.increment() }
            seen.append("b\(post.payload(as: Int.self) ?? -1)")
        }
        for n in 0..<100 { #expect(center.post(Topic<Int>("n"), n) == 2) }
        queue.sync {}
        #expect(seen.values == (0..<100).flatMap { ["a\($0)", "b\($0)"] })
        #expect(wrongQueue.count == 0)
        withExtendedLifetime((first, second)) {}
    }

    @Test func queuedDeliveryDoesNotBlockThePosterWhileTheQueueIsSuspended() {
        let center = PostCenter()
        let queue = makeSerialQueue("delivery.suspended")
        let seen = Recorder<String>()
        let token = center.subscribe("x", delivery: .queue(queue)) { seen.append($0.flag) }
        queue.suspend()
        #expect(center.post("x", flag: "1") == 1)
        #expect(center.post("x", flag: "2") == 1)
        #expect(seen.values == [])
        queue.resume()
        queue.sync {}
        #expect(seen.values == ["1", "2"])
        withExtendedLifetime(token) {}
    }

    @Test func queuedDeliveryDoesNotBlockThePosterWhileTheQueueIsBusy() {
        let center = PostCenter()
        let queue = makeSerialQueue("delivery.busy")
        let seen = Recorder<String>()
        let token = center.subscribe("x", delivery: .queue(queue)) { seen.append($0.flag) }
        let busy = DispatchSemaphore(value: 0)
        let running = DispatchSemaphore(value: 0)
        queue.async {
            running.signal()
            busy.wait()
        }
        running.wait()
        // The queue is blocked by the block above: a poster that waited for it would never return.
        #expect(center.post("x", flag: "1") == 1)
        #expect(center.post("x", flag: "2") == 1)
        #expect(seen.values == [])
        busy.signal()
        queue.sync {}
        #expect(seen.values == ["1", "2"])
        withExtendedLifetime(token) {}
    }

    @Test func queuedRegisteredObserverRunsOnItsQueue() {
        final class Observer: Sendable {
            let seen = Recorder<String>()
            func didPost(_ post: PostObject) {
                seen.append("\(post.flag)@\(currentQueueName() ?? "?")")
            }
        }
        let center = PostCenter()
        let queue = makeSerialQueue("delivery.observer")
        let observer = Observer()
        let token = center.register("x", observer: observer, delivery: .queue(queue), selector: Observer.didPost)
        center.post("x", flag: "1")
        center.post("x", flag: "2")
        queue.sync {}
        #expect(observer.seen.values == ["1@delivery.observer", "2@delivery.observer"])
        withExtendedLifetime(token) {}
    }

    @Test func immediateHandlersRunBeforeEarlierQueuedOnesStart() {
        let center = PostCenter()
        let queue = makeSerialQueue("delivery.mixed")
        let seen = Recorder<String>()
        queue.suspend()
        let queued = center.subscribe("x", delivery: .queue(queue)) { _ in seen.append("queued") }
        let immediate = center.subscribe("x") { _ in seen.append("immediate") }
        #expect(center.post("x") == 2)
        #expect(seen.values == ["immediate"])
        queue.resume()
        queue.sync {}
        #expect(seen.values == ["immediate", "queued"])
        withExtendedLifetime((queued, immediate)) {}
    }

    // MARK: Guarantee 3

    @Test func postReturnsZeroWhenNobodyListens() {
        let center = PostCenter()
        #expect(center.post("nobody") == 0)
        #expect(center.post("nobody", PostObject(flag: "f")) == 0)
        #expect(center.post(Topic<Int>("nobody"), 1) == 0)
        let token = center.subscribe("other") { _ in }
        #expect(center.post("nobody") == 0)
        token.cancel()
        #expect(center.post("other") == 0)
    }

    @Test func postReturnsHowManyHandlersRanOrWereScheduled() {
        final class Observer {
            func didPost(_ post: PostObject) {}
        }
        let center = PostCenter()
        let queue = makeSerialQueue("delivery.count")
        queue.suspend()
        var tokens = Set<Subscription>()
        let ran = Counter()
        // Reached: 2 immediate, 2 queued (one closure, one observer), 1 registered observer.
        center.subscribe("x") { _ in ran.increment() }.store(in: &tokens)
        center.subscribe("x", delivery: .queue(queue)) { _ in ran.increment() }.store(in: &tokens)
        center.subscribe("x") { _ in ran.increment() }.store(in: &tokens)
        let liveObserver = Observer()
        center.register("x", observer: liveObserver, selector: Observer.didPost).store(in: &tokens)
        center.register("x", observer: liveObserver, delivery: .queue(queue), selector: Observer.didPost)
            .store(in: &tokens)
        // Not reached: paused, cancelled, dead observer, dead queued observer, other payload type.
        let paused = center.subscribe("x") { _ in ran.increment() }
        paused.pause()
        let cancelled = center.subscribe("x") { _ in ran.increment() }
        cancelled.cancel()
        var deadObserver: Observer? = Observer()
        let dead = center.register("x", observer: deadObserver!, selector: Observer.didPost)
        let deadQueued = center.register(
            "x", observer: deadObserver!, delivery: .queue(queue), selector: Observer.didPost)
        deadObserver = nil
        let otherType = center.subscribe(Topic<String>("x")) { _ in ran.increment() }

        #expect(center.post("x") == 5)
        #expect(center.post("x", PostObject(flag: "f")) == 5)
        #expect(center.post(Topic<Int>("x"), 3) == 5)
        #expect(ran.count == 3 * 2)
        queue.resume()
        queue.sync {}
        #expect(ran.count == 3 * 3)
        withExtendedLifetime((tokens, liveObserver, paused, dead, deadQueued, otherType)) {}
    }

    @Test func typedPostCountsOnlySubscribersOfItsPayloadType() {
        let center = PostCenter()
        let ints = center.subscribe(Topic<Int>("t")) { _ in }
        let strings = center.subscribe(Topic<String>("t")) { _ in }
        let plain = center.subscribe("t") { _ in }
        #expect(center.post(Topic<Int>("t"), 1) == 2)
        #expect(center.post(Topic<String>("t"), "s") == 2)
        #expect(center.post(Topic<Double>("t"), 1.5) == 1)
        // A plain post without data reaches only the plain subscriber.
        #expect(center.post("t") == 1)
        withExtendedLifetime((ints, strings, plain)) {}
    }
}
