import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

/// A message of another relay (origin 0x777…) with sequence number `sequence`.
func frame(_ sequence: UInt64, _ kind: UInt8, _ body: [UInt8]) -> [UInt8] {
    var bytes = otherRelayHeader + [kind] + body
    _Wire.setSequence(sequence, in: &bytes, at: 0)
    return bytes
}

@Suite("No silent loss: gaps, stale messages and limits")
struct LossTests {
    @Test func aGapInAnOriginsNumbersIsCountedAndAStaleMessageSkipped() async throws {
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
        let batch =
            [t, 2] + entry(try binary(Message(seq: 6, text: ""))) + entry(try binary(Message(seq: 7, text: "")))
        try publishRaw(
            port: port, channel: prefix + "chat",
            [
                frame(0, t, try binary(Message(seq: 0, text: ""))),
                frame(1, t, try binary(Message(seq: 1, text: ""))),
                frame(5, t, try binary(Message(seq: 5, text: ""))),  // 2, 3 and 4 lost
                frame(2, t, try binary(Message(seq: 2, text: "stale"))),  // overtaken: skipped
                frame(6, _Wire.batch, batch),
                frame(10, t, try binary(Message(seq: 10, text: ""))),  // 8 and 9 lost
            ])
        // Six posts arrive (10 last, after the second gap): waiting for five let the check run
        // before the last one arrived (CI, 7 December: [0, 1, 5, 6, 7]).
        #expect(eventually { received.count >= 6 })
        #expect(received.values == [0, 1, 5, 6, 7, 10])
        #expect(relay.missedPosts == 5)
        #expect(relay.rejectedMessages == 0)
        #expect(await events.next() == .missed(count: 3))
        #expect(await events.next() == .missed(count: 2))
        withExtendedLifetime(tokens) {}
    }

    @Test func aSlowSubscriberThrownOutByTheServerCountsWhatItMissed() async throws {
        // Small output-buffer limits, so that a stalled subscriber is disconnected soon.
        let server = try RedisServer(arguments: ["--client-output-buffer-limit", "pubsub 1mb 512kb 1"])
        let prefix = uniquePrefix()
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(
            center: a, host: "127.0.0.1", port: server.port, channelPrefix: prefix, options: fastOptions)
        let relayB = try RedisRelay(
            center: b, host: "127.0.0.1", port: server.port, channelPrefix: prefix, options: fastOptions)
        var events = EventReader(relayB)
        let received = Collector<Int>()
        let tokens = [
            relayA.relay(.chat), relayB.relay(.chat),
            b.subscribe(.chat) { message in received.append(message.seq) },
        ]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))
        #expect(await events.next() == .connected)
        // B's reader stalls (a slow handler no longer can: handlers run on a thread of their own).
        relayB._pauseReading(true)

        let text = String(repeating: "x", count: 1000)
        let total = 20_000
        for seq in 0..<total { a.post(.chat, Message(seq: seq, text: text)) }
        #expect(eventually { relayA.publishedPosts + relayA.droppedPosts == total })
        #expect(relayA.droppedPosts == 0)
        relayB._pauseReading(false)
        // B reads what reached it, sees the connection closed, reconnects; A's next post shows the gap.
        let again = await events.read { $0 == .connected }
        #expect(again.count == 2, "\(again)")
        #expect(relayB.waitUntilReady(timeout: .seconds(10)))
        a.post(.chat, Message(seq: total, text: "last"))
        #expect(eventually { received.values.last == total })
        let values = received.values
        #expect(values == values.sorted() && Set(values).count == values.count)
        #expect(relayB.missedPosts > 0, "\(again)")
        #expect(values.count + relayB.missedPosts == total + 1, "\(values.count) + \(relayB.missedPosts)")
        withExtendedLifetime(tokens) {}
    }

    @Test func aPostOverTheCapIsDroppedAtSendAndAMessageOverItRejectedAtReceive() async throws {
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(center: a, host: "127.0.0.1", port: port, channelPrefix: prefix)
        var small = RedisRelay.Options()
        small.maximumMessageBytes = 4096
        let relayB = try RedisRelay(center: b, host: "127.0.0.1", port: port, channelPrefix: prefix, options: small)
        var events = EventReader(relayB)
        let received = Collector<Int>()
        let tokens = [relayA.relay(.chat), relayB.relay(.chat), b.subscribe(.chat) { received.append($0.seq) }]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))
        #expect(await events.next() == .connected)

        a.post(.chat, Message(seq: 0, text: "first"))
        a.post(.chat, Message(seq: 1, text: String(repeating: "x", count: 50 << 20)))  // 50 MB: not sent
        #expect(relayA.droppedPosts == 1)
        a.post(.chat, Message(seq: 2, text: String(repeating: "y", count: 10_000)))  // sent, too big for B
        #expect(eventually { relayA.publishedPosts == 2 })  // alone in its message
        a.post(.chat, Message(seq: 3, text: "small"))
        #expect(eventually { received.count >= 2 })
        #expect(received.values == [0, 3])
        #expect(relayA.publishedPosts == 3 && relayA.droppedPosts == 1)
        #expect(relayA.dropCounts.tooLarge == 1 && relayA.dropCounts.total == 1)
        #expect(relayB.rejectedMessages == 1)
        guard case .rejected(let reason) = await events.next() else { return }
        #expect(reason.contains("maximumMessageBytes"), "\(reason)")
        // The rejected post shows as missed once the next one arrives: each loss counts somewhere.
        #expect(relayB.missedPosts == 1)
        withExtendedLifetime(tokens) {}
    }

    @Test func theSignatureCountsInTheMessageCapAtSend() throws {
        var options = RedisRelay.Options(signingKey: Array(repeating: 7, count: 32))
        options.maximumMessageBytes = 256
        let center = PostCenter()
        let relay = try RedisRelay(
            center: center, host: "127.0.0.1", port: RedisServer.shared, channelPrefix: uniquePrefix(),
            options: options)
        let token = relay.relay("theme")
        #expect(relay.waitUntilReady(timeout: .seconds(10)))
        // A plain post's message: the header and kind byte (28 bytes), the flag, and when signed the
        // 32-byte signature. Exactly the cap is sent; one byte more is dropped at send.
        let fits = 256 - _Wire.headerLength - _Wire.signatureLength
        center.post("theme", flag: String(repeating: "x", count: fits))
        center.post("theme", flag: String(repeating: "x", count: fits + 1))
        #expect(eventually { relay.publishedPosts + relay.droppedPosts == 2 })
        #expect(relay.publishedPosts == 1 && relay.droppedPosts == 1)
        withExtendedLifetime(token) {}
    }

    @Test func aPublishTheServerRefusesIsCountedDropped() async throws {
        let server = try RedisServer(arguments: ["--requirepass", "hunter2"])
        let prefix = uniquePrefix()
        // The README's ACL user: with the retained keys too, so that the only refusal is the PUBLISH
        // below (without them, the read of the retained key is refused as well, an event that may come
        // before or after `.connected`: see RetainedTests).
        let admin = "redis://:hunter2@127.0.0.1:\(server.port)"
        _ = try redisCommand(
            admin,
            [
                "ACL", "SETUSER", "reader", "on", ">readerpass", "resetchannels", "&\(prefix)*", "+subscribe",
                "+unsubscribe", "+ping", "+publish", "resetkeys", "~\(prefix)retained:*", "+set", "+del",
                "+getrange",
            ])
        let center = PostCenter()
        let relay = try RedisRelay(
            center: center, url: "redis://reader:readerpass@127.0.0.1:\(server.port)", channelPrefix: prefix)
        var events = EventReader(relay)
        let token = relay.relay(.chat)
        #expect(relay.waitUntilReady(timeout: .seconds(10)))
        let firstEvent = await events.next()
        #expect(firstEvent == .connected, "\(String(describing: firstEvent))")
        // The user loses +publish once the relay runs (a refusal at start throws, see AuthTests): the
        // server answers each PUBLISH with a NOPERM error.
        _ = try redisCommand(admin, ["ACL", "SETUSER", "reader", "-publish"])
        for seq in 0..<5 { center.post(.chat, Message(seq: seq, text: "refused")) }
        #expect(eventually { relay.publishedPosts + relay.droppedPosts == 5 })
        #expect(relay.droppedPosts == 5 && relay.publishedPosts == 0)
        var refused = RedisRelay.DropCounts()
        refused.refused = 5
        #expect(relay.dropCounts == refused)
        let nextEvent = await events.next()
        guard case .permissionDenied(let text) = nextEvent else {
            Issue.record("no permissionDenied event: \(String(describing: nextEvent))")
            return
        }
        #expect(text.hasPrefix("NOPERM"), "\(text)")
        withExtendedLifetime(token) {}
    }

    @Test func theQueueIsBoundedInBytesAndCountsStayExact() throws {
        let server = try RedisServer()
        var options = fastOptions
        options.pipelineDepth = 1
        options.maxQueuedBytes = 10_000
        options.connectTimeout = .milliseconds(300)
        let a = PostCenter()
        let relay = try RedisRelay(
            center: a, host: "127.0.0.1", port: server.port, channelPrefix: uniquePrefix(), options: options)
        let token = relay.relay(.chat)
        #expect(relay.waitUntilReady(timeout: .seconds(10)))

        server.freeze(true)
        let text = String(repeating: "x", count: 1000)
        for seq in 0..<100 { a.post(.chat, Message(seq: seq, text: text)) }
        // At most one command in flight (16 posts of ~1 KB) and ~10 KB queued: the rest is dropped now.
        #expect(relay.droppedPosts >= 70)
        server.freeze(false)
        #expect(eventually { relay.publishedPosts + relay.droppedPosts == 100 })
        // Every drop is for one reason: the queue was full, or posts in flight were unanswered.
        let counts = relay.dropCounts
        #expect(counts.queueFull >= 70 && counts.total == relay.droppedPosts, "\(counts)")
        #expect(counts.queueFull + counts.unacknowledged == counts.total, "\(counts)")
        withExtendedLifetime(token) {}
    }
}
