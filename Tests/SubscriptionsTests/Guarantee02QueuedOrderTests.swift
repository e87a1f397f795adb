import Dispatch
import Foundation
import Subscriptions
import Testing

/// Guarantee 2: `.queue(q)` runs a handler asynchronously on `q`, in post order, and never blocks
/// the poster.
@Suite("Guarantee 2: queued handlers run in post order")
struct Guarantee02QueuedOrder {
    @Test(.tags(.pin)) func queuedHandlersRunOnTheirQueueInPostOrder() {
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

    @Test(.tags(.pin)) func queuedDeliveryDoesNotBlockThePosterWhileTheQueueIsSuspended() {
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

    @Test(.tags(.pin)) func queuedDeliveryDoesNotBlockThePosterWhileTheQueueIsBusy() {
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

    @Test(.tags(.pin)) func queuedRegisteredObserverRunsOnItsQueue() {
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

    @Test(.tags(.pin)) func immediateHandlersRunBeforeEarlierQueuedOnesStart() {
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
}
