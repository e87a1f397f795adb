import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

@Suite("Tail losses: a sender that goes quiet announces its next number, so every loss is counted")
struct TailLossTests {
    @Test func anAnnouncementCountsTheGapSinceTheLastMessageOnceAndNeverGoesBack() {
        var sequences = _OriginSequences()
        #expect(sequences.announced(origin: 1, next: 10) == 0)  // first heard: remembered, no loss
        #expect(sequences.delivered(origin: 1, first: 10, posts: 2) == 0)
        #expect(sequences.announced(origin: 1, next: 12) == 0)  // nothing lost
        #expect(sequences.announced(origin: 1, next: 15) == 3)  // 12, 13 and 14 lost at the tail
        #expect(sequences.announced(origin: 1, next: 15) == 0)  // repeated: counted once
        #expect(sequences.announced(origin: 1, next: 13) == 0)  // behind: overtaken, ignored
        #expect(!sequences.isCurrent(origin: 1, first: 14))  // a lost post arriving late is stale
        #expect(sequences.delivered(origin: 1, first: 15, posts: 1) == 0)
        #expect(sequences.announced(origin: 1, next: .max) == Int.max)  // forged: saturates
        #expect(sequences.announced(origin: 1, next: 3) == 0)
    }

    @Test func aChannelIsAnnouncedAfterAQuietIntervalAndAgainEachIntervalItStaysQuiet() {
        let start = ContinuousClock.now
        let x = Array("x".utf8)
        let y = Array("y".utf8)
        var tails = _TailAnnouncements(interval: .seconds(1), now: start, channels: [x])
        #expect(tails.nextDue == start + .seconds(1))
        #expect(tails.due(now: start + .milliseconds(500)) == [])
        #expect(tails.due(now: start + .seconds(1)) == [x])
        tails.sent(on: y, now: start + .milliseconds(1200))
        tails.sent(on: x, now: start + .milliseconds(1500))  // a post: x is busy again
        #expect(tails.due(now: start + .milliseconds(2200)) == [y])
        #expect(tails.nextDue == start + .milliseconds(2500))
        #expect(tails.due(now: start + .milliseconds(2500)) == [x])
        #expect(tails.due(now: start + .milliseconds(3300)) == [y])
    }

    @Test func announcementsOnTheWireCountTailLossesAndAreCheckedLikeMessages() async throws {
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
        let n = _Wire.announcement
        try publishRaw(
            port: port, channel: prefix + "chat",
            [
                frame(0, t, try binary(Message(seq: 0, text: ""))),
                frame(1, t, try binary(Message(seq: 1, text: ""))),
                frame(5, n, []),  // 2, 3 and 4 lost: the sender went quiet
                frame(5, n, []),  // again: nothing new
                frame(3, n, []),  // behind: ignored
                frame(9, n, [1]),  // a body: malformed, rejected
                frame(5, t, try binary(Message(seq: 5, text: ""))),
            ])
        #expect(eventually { received.count >= 3 })
        #expect(received.values == [0, 1, 5])
        #expect(relay.missedPosts == 3)
        #expect(relay.rejectedMessages == 1)
        #expect(await events.next() == .missed(count: 3))
        withExtendedLifetime(tokens) {}
    }

    @Test func aSubscriberThrownOutAtTheEndOfABurstCountsTheLossWithoutAnotherPost() async throws {
        let server = try RedisServer(arguments: ["--client-output-buffer-limit", "pubsub 1mb 512kb 1"])
        let prefix = uniquePrefix()
        let a = PostCenter()
        let b = PostCenter()
        var options = fastOptions
        options.pingInterval = .milliseconds(200)
        let relayA = try RedisRelay(
            center: a, host: "127.0.0.1", port: server.port, channelPrefix: prefix, options: options)
        let relayB = try RedisRelay(
            center: b, host: "127.0.0.1", port: server.port, channelPrefix: prefix, options: fastOptions)
        var events = EventReader(relayB)
        let received = Collector<Int>()
        let tokens = [
            relayA.relay(.chat), relayB.relay(.chat), b.subscribe(.chat) { message in received.append(message.seq) },
        ]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))
        #expect(await events.next() == .connected)
        relayB._pauseReading(true)

        let text = String(repeating: "x", count: 1000)
        let total = 20_000
        for seq in 0..<total { a.post(.chat, Message(seq: seq, text: text)) }
        #expect(eventually { relayA.publishedPosts + relayA.droppedPosts == total })
        #expect(relayA.droppedPosts == 0)
        relayB._pauseReading(false)
        // A posts nothing more: its announcement, within two ping intervals, shows the loss.
        let seen = await events.read { if case .missed = $0 { true } else { false } }
        guard case .missed = seen.last else {
            Issue.record("no .missed event: \(seen)")
            return
        }
        #expect(eventually { received.count + relayB.missedPosts == total })
        let values = received.values
        #expect(values == values.sorted() && Set(values).count == values.count)
        #expect(relayB.missedPosts > 0)
        #expect(values.count + relayB.missedPosts == total, "\(values.count) + \(relayB.missedPosts)")
        withExtendedLifetime(tokens) {}
    }
}
