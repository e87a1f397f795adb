import Foundation
import Subscriptions
import SubscriptionsTestSupport
import Testing

/// `.immediate` runs every handler on the posting thread before `post` returns.
@Suite("Immediate delivery")
struct ImmediateDeliveryTests {
    @Test(.tags(.pin)) func immediateHandlersRunOnThePostingThreadBeforePostReturns() {
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

    @Test(.tags(.pin)) func typedImmediateHandlersRunBeforePostReturns() {
        let center = PostCenter()
        let seen = Recorder<Point>()
        let topic = Topic<Point>("point")
        let token = center.subscribe(topic) { seen.append($0) }
        center.post(topic, Point(x: 1, y: 2))
        #expect(seen.values == [Point(x: 1, y: 2)])
        withExtendedLifetime(token) {}
    }
}
