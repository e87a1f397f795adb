import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

/// The value of `key` on the server: `nil` when it does not exist.
private func stored(_ port: Int, _ key: String) -> [UInt8]? {
    guard case .string(let bytes) = redisCall(port, ["GET", key]) else { return nil }
    return bytes
}

/// Sets `key` to `value` (any bytes), as a foreign client would.
private func setRaw(_ port: Int, _ key: String, _ value: [UInt8]) throws {
    let connection = try _Connection.open(host: "127.0.0.1", port: port, timeout: .seconds(2))
    let endpoint = _Endpoint(host: "127.0.0.1", port: port)
    let reply = try connection.call(bytes: [Array("SET".utf8), Array(key.utf8), value], endpoint)
    #expect(reply == .string(Array("OK".utf8)))
}

/// Retained posts across processes: the last retained post of a relayed name is kept on the server
/// (`<prefix>retained:<name>`), and a relay that starts later posts it on its center as retained.
@Suite("Retained posts across processes")
struct RetainedTests {
    /// The relay's options for `historyLength` (0: pub/sub mode), with fast reconnection.
    static func options(history: Int, key: [UInt8]? = nil) -> RedisRelay.Options {
        var options = fastOptions
        options.historyLength = history
        options.signingKey = key
        return options
    }

    func options(history: Int, key: [UInt8]? = nil) -> RedisRelay.Options { Self.options(history: history, key: key) }

    /// Both modes, with and without a signing key.
    @Test(arguments: [(0, false), (10_000, false), (0, true), (10_000, true)])
    func aRelayThatStartsLaterPostsTheLastRetainedPostAndAClearedOneNoMore(history: Int, signed: Bool) throws {
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        let key = signed ? Array("a shared secret of thirty-two by".utf8) : nil
        func options(history: Int) -> RedisRelay.Options { RetainedTests.options(history: history, key: key) }
        let a = PostCenter()
        let relayA = try RedisRelay(
            center: a, host: "127.0.0.1", port: port, channelPrefix: prefix, options: options(history: history))
        let tokensA = [relayA.relay(.chat), relayA.relay("theme")]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)))
        a.post(.chat, Message(seq: 1, text: "first"), retain: true)
        a.post(.chat, Message(seq: 2, text: "last"), retain: true)
        a.post(.chat, Message(seq: 3, text: "not retained"))
        a.post("theme", flag: "dark", retain: true)
        try #require(eventually { relayA.publishedPosts == 4 })
        try #require(stored(port, prefix + "retained:chat") != nil)

        // B starts later: the last retained post of each name is posted on its center, retained,
        // delivered to its current subscribers once and replayed to later ones.
        let b = PostCenter()
        let live = Collector<Int>()
        let liveToken = b.subscribe(.chat) { live.append($0.seq) }
        let relayB = try RedisRelay(
            center: b, host: "127.0.0.1", port: port, channelPrefix: prefix, options: options(history: history))
        let tokensB = [relayB.relay(.chat), relayB.relay("theme")]
        #expect(relayB.waitUntilReady(timeout: .seconds(10)))
        try #require(eventually { b.retained(.chat) != nil && b.retained("theme") != nil })
        #expect(b.retained(.chat) == Message(seq: 2, text: "last"))
        #expect(b.retained("theme")?.flag == "dark")
        let replayed = Collector<Int>()
        let replayToken = b.subscribe(.chat, replay: true) { replayed.append($0.seq) }
        #expect(replayed.values == [2])
        #expect(live.values == [2])
        #expect(relayB.publishedPosts == 0)  // not echoed back
        #expect(relayB.rejectedMessages == 0)

        // A clears chat: the key goes, and running relays clear it; C, started later, gets the
        // theme and no chat.
        a.clearRetained(.chat)
        try #require(eventually { stored(port, prefix + "retained:chat") == nil })
        let c = PostCenter()
        let relayC = try RedisRelay(
            center: c, host: "127.0.0.1", port: port, channelPrefix: prefix, options: options(history: history))
        let chatC = relayC.relay(.chat)
        #expect(relayC.waitUntilReady(timeout: .seconds(10)))
        // Read after chat's key (same connection, one after the other; delivered in that order).
        let themeC = relayC.relay("theme")
        try #require(eventually { c.retained("theme") != nil })
        #expect(c.retained(.chat) == nil)
        #expect(c.retained("theme")?.flag == "dark")
        // B, running, hears the clear: its retained post goes too, and nothing is replayed.
        try #require(eventually { b.retained(.chat) == nil })
        let afterClear = Collector<Int>()
        let afterToken = b.subscribe(.chat, replay: true) { afterClear.append($0.seq) }
        #expect(afterClear.values.isEmpty)
        #expect(b.retained("theme")?.flag == "dark")
        #expect(relayB.publishedPosts == 0)  // neither post nor clear echoed
        #expect(relayA.publishedPosts == 4)  // a clear is no post
        #expect(relayB.missedPosts == 0)
        withExtendedLifetime((tokensA, tokensB, liveToken, replayToken, chatC, themeC, afterToken)) {}
    }

    @Test(arguments: [0, 10_000])
    func aRetainedPostOfARunningRelayIsRetainedLiveOnceAndTheLastWriterWins(history: Int) throws {
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(
            center: a, host: "127.0.0.1", port: port, channelPrefix: prefix, options: options(history: history))
        let relayB = try RedisRelay(
            center: b, host: "127.0.0.1", port: port, channelPrefix: prefix, options: options(history: history))
        let received = Collector<Int>()
        let tokens = [relayA.relay(.chat), relayB.relay(.chat), b.subscribe(.chat) { received.append($0.seq) }]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))
        a.post(.chat, Message(seq: 1, text: "plain"))
        a.post(.chat, Message(seq: 2, text: "retained"), retain: true)
        a.post(.chat, Message(seq: 3, text: "plain"))
        try #require(eventually { received.count >= 3 })
        #expect(received.values == [1, 2, 3])
        #expect(b.retained(.chat)?.seq == 2)
        #expect(relayB.publishedPosts == 0)

        // B retains a post of its own: the server and A now hold B's (the last writer wins).
        b.post(.chat, Message(seq: 4, text: "from B"), retain: true)
        try #require(eventually { a.retained(.chat)?.seq == 4 })
        #expect(eventually { relayB.publishedPosts == 1 })
        let later = PostCenter()
        let relayLater = try RedisRelay(
            center: later, host: "127.0.0.1", port: port, channelPrefix: prefix, options: options(history: history))
        let laterToken = relayLater.relay(.chat)
        try #require(eventually { later.retained(.chat) != nil })
        #expect(later.retained(.chat)?.seq == 4)
        #expect(relayA.publishedPosts == 3)  // B's post was not echoed by A
        withExtendedLifetime((tokens, laterToken)) {}
    }

    @Test func withASigningKeyAStoredValueNotSignedForItsKeyIsRefused() throws {
        let key = Array("a shared secret of thirty-two by".utf8)
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        let signer = _Signer(key: key)
        var header = otherRelayHeader
        header.replaceSubrange(0..<3, with: Array("SS4".utf8))
        let message = header + [_Wire.retainedPlain] + Array("forged".utf8)
        let channel = Array((prefix + "theme").utf8)
        let keyName = prefix + "retained:theme"
        // Signed for the channel (a message moved from it), not for the key.
        let moved = message + signer.signature(channel: channel, message: message[...])
        try setRaw(port, keyName, moved)
        #expect(stored(port, keyName) == moved)
        let center = PostCenter()
        let relay = try RedisRelay(
            center: center, host: "127.0.0.1", port: port, channelPrefix: prefix,
            options: options(history: 0, key: key))
        let token = relay.relay("theme")
        #expect(eventually { relay.rejectedMessages == 1 })
        #expect(center.retained("theme") == nil)

        // The same message signed for the key is taken by a relay that starts then.
        let good = message + signer.signature(channel: Array(keyName.utf8), message: message[...])
        try setRaw(port, keyName, good)
        let other = PostCenter()
        let relayOther = try RedisRelay(
            center: other, host: "127.0.0.1", port: port, channelPrefix: prefix,
            options: options(history: 0, key: key))
        let otherToken = relayOther.relay("theme")
        #expect(eventually { other.retained("theme") != nil })
        #expect(other.retained("theme")?.flag == "forged")
        #expect(relayOther.rejectedMessages == 0)
        withExtendedLifetime((token, otherToken)) {}
    }
}

@Suite("Retained posts across processes: refusals")
struct RetainedRefusalTests {
    /// Both modes: an ACL user without the retained keys relays all the same; the refused read is a
    /// `.permissionDenied` event, and in history mode it holds no reading back.
    @Test(arguments: [0, 10_000])
    func aRefusedReadOfTheRetainedKeyIsAnEventAndTheNameIsRelayedAllTheSame(history: Int) async throws {
        let server = try RedisServer(arguments: ["--requirepass", "hunter2"])
        let admin = "redis://:hunter2@127.0.0.1:\(server.port)"
        let prefix = uniquePrefix()
        // Channels and streams of the relay, but no key of retained posts (`retained:` keys are
        // refused by a pattern that leaves them out: `~<prefix>c*` covers the stream of `chat`).
        try redisCommand(
            admin,
            [
                "ACL", "SETUSER", "app", "on", ">pass", "resetchannels", "&\(prefix)*", "resetkeys", "~\(prefix)c*",
                "~\(prefix)", "+publish", "+subscribe", "+unsubscribe", "+ping", "+xadd", "+xread", "+xrevrange",
                "+getrange",
            ])
        let url = "redis://app:pass@127.0.0.1:\(server.port)"
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(
            center: a, url: url, channelPrefix: prefix, options: RetainedTests.options(history: history))
        let relayB = try RedisRelay(
            center: b, url: url, channelPrefix: prefix, options: RetainedTests.options(history: history))
        var events = EventReader(relayB)
        #expect(await events.next() == .connected)
        let received = Collector<Int>()
        let tokens = [relayA.relay(.chat), relayB.relay(.chat), b.subscribe(.chat) { received.append($0.seq) }]
        guard case .permissionDenied(let text) = await events.next() else {
            Issue.record("no permissionDenied event")
            return
        }
        #expect(text.hasPrefix("NOPERM"), "\(text)")
        #expect(await settled { relayA.core.isReady && relayB.core.isReady })
        for seq in 0..<5 { a.post(.chat, Message(seq: seq, text: "relayed")) }
        #expect(await settled { received.count >= 5 })
        #expect(received.values == Array(0..<5))
        withExtendedLifetime(tokens) {}
    }
}

/// The pure parts: the outbox never batches a retained post or a clear, and a stored retained
/// post read from the server makes the same post stale on the channel without counting a gap.
@Suite("Retained posts across processes: the state machines")
struct RetainedStateTests {
    @Test func theOutboxSendsEachRetainedPostAndEachClearAlone() {
        var outbox = _Outbox(connected: true)
        let header = _Wire.header(origin: 7)
        let kinds =
            [_Wire.typed, _Wire.retainedTyped, _Wire.retainedTyped, _Wire.typed, _Wire.typed]
            + [_Wire.clearRetained, _Wire.clearRetained, _Wire.retainedPlain, _Wire.retainedPlain]
        for (index, kind) in kinds.enumerated() {
            outbox.items.append(
                _Outgoing(
                    channel: Array("a".utf8), message: _Wire.message(header: header, kind: kind, body: [UInt8(index)])))
        }
        var batch: [_Outgoing] = []
        var counts: [Int] = []
        outbox.take(messages: 100, into: &batch, counts: &counts)
        #expect(counts == [1, 1, 1, 2, 1, 1, 1, 1])
        #expect(batch.count == kinds.count)

        // A clear is no post: a disconnection drops only the posts.
        for kind in [_Wire.retainedTyped, _Wire.clearRetained, _Wire.typed] {
            outbox.items.append(_Outgoing(channel: [1], message: _Wire.message(header: header, kind: kind, body: [])))
        }
        #expect(outbox.clear() == 2)
    }

    @Test func aClearIsAMessageWithoutBody() {
        let message = _Wire.message(header: _Wire.header(origin: 5), kind: _Wire.clearRetained, body: [])
        let own = _Wire.header(origin: 6)
        let clear = message.withUnsafeBytes { bytes -> Bool in
            if case .post(let kind, let body) = _Wire.parse(bytes, ownHeader: own) {
                return kind == _Wire.clearRetained && body.isEmpty
            }
            return false
        }
        #expect(clear)
        let withBody = (message + [1]).withUnsafeBytes { bytes -> Bool in
            if case .foreign = _Wire.parse(bytes, ownHeader: own) { return true }
            return false
        }
        #expect(withBody)
    }

    @Test func aStoredPostMakesItselfStaleAndCountsNoGapForAnOriginNotHeardYet() {
        var sequences = _OriginSequences()
        #expect(sequences.stored(origin: 9, sequence: 5) == 0)
        #expect(!sequences.isCurrent(origin: 9, first: 5))  // the same post, heard on the channel
        #expect(sequences.isCurrent(origin: 9, first: 6))
        // The first post heard from it starts the count there: posts before were never this relay's.
        #expect(sequences.delivered(origin: 9, first: 12, posts: 1) == 0)
        #expect(sequences.delivered(origin: 9, first: 14, posts: 1) == 1)
        // Read again (a new subscription): stale.
        #expect(!sequences.isCurrent(origin: 9, first: 5))
    }

    @Test func aStoredPostOfAnOriginHeardBeforeIsADeliveryThatCountsItsGap() {
        var sequences = _OriginSequences()
        #expect(sequences.delivered(origin: 3, first: 0, posts: 2) == 0)
        #expect(sequences.stored(origin: 3, sequence: 6) == 4)
        #expect(!sequences.isCurrent(origin: 3, first: 6))
        #expect(sequences.delivered(origin: 3, first: 7, posts: 1) == 0)
    }

    @Test func aStoredValueMustBeASingleRetainedPost() {
        var sequences = _OriginSequences()
        let header = _Wire.header(origin: 5)
        let own = _Wire.header(origin: 6)
        for (kind, accepted) in [(_Wire.plain, false), (_Wire.retainedPlain, true), (_Wire.announcement, false)] {
            let message = _Wire.message(header: header, kind: kind, body: kind == _Wire.announcement ? [] : [65])
            let action = message.withUnsafeBytes { bytes in
                [UInt8(ascii: "k")].withUnsafeBytes { key in
                    _Reception.receive(
                        bytes, channel: key, ownHeader: own, signer: nil, maximumMessageBytes: 1024,
                        sequences: &sequences, stored: true
                    ) { _ in true }
                }
            }
            #expect((action == .delivered(missed: 0)) == accepted, "kind \(kind)")
        }
    }
}
