import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

@Suite("No input crashes the relay: every number on the wire is checked")
struct HostileInputTests {
    @Test func forgedSequenceNumbersNearTheTopSaturateTheMissedCountInsteadOfTrapping() async throws {
        // Issue 39: three PUBLISHes from a plain client used to crash a relay without a signing key
        // (the second set missedPosts to Int.max, the third's gap overflowed it).
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        let center = PostCenter()
        let relay = try RedisRelay(center: center, host: "127.0.0.1", port: port, channelPrefix: prefix)
        var events = EventReader(relay)
        let received = Collector<Int>()
        let tokens = [relay.relay(.chat), center.subscribe(.chat) { received.append($0.seq) }]
        #expect(relay.waitUntilReady(timeout: .seconds(10)))
        #expect(await events.next() == .connected)

        let t = _Wire.typed
        let top: UInt64 = 1 << 63
        try publishRaw(
            port: port, channel: prefix + "chat",
            [
                frame(0, t, try binary(Message(seq: 0, text: ""))),
                frame(top, t, try binary(Message(seq: 1, text: ""))),  // 2^63 - 1 missed: Int.max
                frame(top + 2, t, try binary(Message(seq: 2, text: ""))),  // one more: stays Int.max
                frame(.max, t, try binary(Message(seq: 3, text: ""))),  // the last number there is
                frame(.max, t, try binary(Message(seq: 4, text: ""))),  // its successor saturates
            ])
        #expect(eventually { received.count >= 5 })
        #expect(received.values == [0, 1, 2, 3, 4])
        #expect(relay.missedPosts == Int.max)
        #expect(relay.rejectedMessages == 0)
        #expect(await events.next() == .missed(count: Int.max))
        #expect(await events.next() == .missed(count: 1))
        #expect(await events.next() == .missed(count: Int(clamping: UInt64.max - (top + 3))))
        withExtendedLifetime(tokens) {}
    }

    @Test func theOriginStateMachineSaturatesAndStaysBounded() {
        var sequences = _OriginSequences()
        #expect(sequences.delivered(origin: 1, first: 5, posts: 1) == 0)  // first heard: no gap
        #expect(!sequences.isCurrent(origin: 1, first: 5))  // stale
        #expect(sequences.isCurrent(origin: 1, first: 6))
        #expect(sequences.delivered(origin: 1, first: 9, posts: 64) == 3)
        #expect(sequences.delivered(origin: 1, first: .max - 1, posts: 64) == Int.max)
        #expect(sequences.expected[1] == .max)
        #expect(sequences.isCurrent(origin: 1, first: .max))
        #expect(sequences.delivered(origin: 1, first: .max, posts: 1) == 0)
        // A flood of origins never holds more than maxOrigins of them.
        for origin in 0..<UInt64(3 * _OriginSequences.maxOrigins) {
            _ = sequences.delivered(origin: origin &+ 100, first: origin, posts: 1)
            #expect(sequences.expected.count <= _OriginSequences.maxOrigins)
        }
    }
}
