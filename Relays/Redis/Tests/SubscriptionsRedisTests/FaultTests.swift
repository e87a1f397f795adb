import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

@Suite("Faults: unreachable, restarted and foreign servers")
struct FaultTests {
    @Test func anUnreachableServerThrowsAnErrorNamingTheAddress() {
        let port = freePort()
        #expect {
            _ = try RedisRelay(center: PostCenter(), host: "127.0.0.1", port: port)
        } throws: { error in
            guard case RedisRelayError.unreachable(let host, let errorPort, let reason) = error else { return false }
            let text = "\(error)"
            return host == "127.0.0.1" && errorPort == port && !reason.isEmpty
                && text.contains("127.0.0.1:\(port)") && text.contains("cannot reach Redis")
        }
    }

    /// A kill -9 and a restart, with and without `appendonly yes` (pub/sub keeps nothing on the
    /// server: the two behave alike; history mode's restart is in RecoveryTests).
    @Test(arguments: [false, true])
    func theRelayRecoversFromAServerRestartAndCountsWhatItDropped(appendOnly: Bool) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-aof-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try RedisServer(arguments: appendOnly ? ["--appendonly", "yes", "--dir", directory] : [])
        // Redis 7 keeps its append-only files in `appendonlydir` (6 writes `appendonly.aof`), made
        // in the background after the server answers: waited for, bounded.
        let aof = {
            ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).contains {
                $0.hasPrefix("appendonly")
            }
        }
        if appendOnly { #expect(eventually { aof() }) } else { #expect(!aof()) }
        let pair = try Pair(port: server.port, prefix: uniquePrefix())
        let tokens = [pair.relayA.relay(.chat), pair.relayB.relay(.chat)]
        let atB = Collector<Int>()
        let local = pair.b.subscribe(.chat) { atB.append($0.seq) }
        #expect(pair.waitUntilReady())

        for seq in 0..<50 { pair.a.post(.chat, Message(seq: seq, text: "before")) }
        #expect(eventually { atB.count == 50 && pair.relayA.publishedPosts == 50 })

        server.stop()
        // Posting while the server is gone neither blocks nor throws; every one of these is dropped.
        for seq in 50..<70 { pair.a.post(.chat, Message(seq: seq, text: "while down")) }
        #expect(eventually { pair.relayA.droppedPosts == 20 })

        try server.start()
        #expect(pair.waitUntilReady())
        for seq in 70..<120 { pair.a.post(.chat, Message(seq: seq, text: "after")) }

        #expect(eventually { atB.count >= 100 })
        #expect(atB.values == Array(0..<50) + Array(70..<120))
        #expect(pair.relayA.droppedPosts == 20)
        #expect(pair.relayA.dropCounts.disconnected == 20)
        #expect(pair.relayA.publishedPosts == 100)
        #expect(pair.relayB.rejectedMessages == 0)
        // The posts A dropped were never sent (never numbered): nothing is missing at B.
        #expect(pair.relayB.missedPosts == 0)
        withExtendedLifetime((tokens, local)) {}
    }

    @Test func aServerThatStopsAnsweringCountsTheUnacknowledgedPostsAndIsLeft() throws {
        let server = try RedisServer()
        var options = fastOptions
        options.connectTimeout = .milliseconds(300)
        let prefix = uniquePrefix()
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(
            center: a, host: "127.0.0.1", port: server.port, channelPrefix: prefix, options: options)
        let relayB = try RedisRelay(center: b, host: "127.0.0.1", port: server.port, channelPrefix: prefix)
        let tokens = [relayA.relay(.chat), relayB.relay(.chat)]
        let atB = Collector<Int>()
        let local = b.subscribe(.chat) { atB.append($0.seq) }
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))

        server.freeze(true)
        // Sent, never acknowledged: after the time-out the publisher gives the connection up.
        for seq in 0..<5 { a.post(.chat, Message(seq: seq, text: "unanswered")) }
        #expect(eventually { relayA.droppedPosts == 5 })
        server.freeze(false)

        #expect(relayA.waitUntilReady(timeout: .seconds(10)))
        for seq in 5..<10 { a.post(.chat, Message(seq: seq, text: "after")) }
        #expect(eventually { atB.values.filter { $0 >= 5 } == Array(5..<10) })
        #expect(relayA.droppedPosts == 5)
        // The unacknowledged ones may have reached the server once it thawed (it reads the old
        // connection's buffer too, in no particular order with the new one): at most once each.
        let unanswered = atB.values.filter { $0 < 5 }
        #expect(Set(unanswered).count == unanswered.count, "\(atB.values)")
        withExtendedLifetime((tokens, local)) {}
    }

    @Test func aFrozenServerKeepsOrderAndExactCountsWith64KiBPosts() throws {
        let server = try RedisServer()
        var options = fastOptions
        options.connectTimeout = .milliseconds(300)
        options.pingInterval = .milliseconds(150)
        let prefix = uniquePrefix()
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(
            center: a, host: "127.0.0.1", port: server.port, channelPrefix: prefix, options: options)
        let relayB = try RedisRelay(
            center: b, host: "127.0.0.1", port: server.port, channelPrefix: prefix, options: options)
        let received = Collector<Int>()
        let tokens = [relayA.relay(.chat), relayB.relay(.chat), b.subscribe(.chat) { received.append($0.seq) }]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))

        let text = String(repeating: "z", count: 64 * 1024)
        for seq in 0..<50 { a.post(.chat, Message(seq: seq, text: text)) }
        server.freeze(true)
        for seq in 50..<150 { a.post(.chat, Message(seq: seq, text: text)) }
        Thread.sleep(forTimeInterval: 1)  // long enough for both relays to give their connections up
        // On a busy machine A may take longer to give up: thaw only once it has (bounded), so that
        // what the freeze costs is counted by A, as asserted below.
        _ = eventually { relayA.droppedPosts > 0 }
        server.freeze(false)
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))
        for seq in 150..<200 { a.post(.chat, Message(seq: seq, text: text)) }

        #expect(eventually { received.values.last == 199 })
        #expect(eventually { relayA.publishedPosts + relayA.droppedPosts == 200 })
        let values = received.values
        #expect(values == values.sorted() && Set(values).count == values.count, "\(values)")
        #expect(Array(values.suffix(50)) == Array(150..<200))
        // Every post A sent either reached B or is counted missed there; what A dropped before
        // sending is counted by A alone.
        #expect(relayA.droppedPosts > 0)
        #expect(values.count + relayB.missedPosts <= 200)
        #expect(values.count + relayB.missedPosts + relayA.droppedPosts >= 200)
        withExtendedLifetime(tokens) {}
    }

    @Test func malformedAndForeignMessagesAreCountedAndSkipped() throws {
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        let center = PostCenter()
        let relay = try RedisRelay(center: center, host: "127.0.0.1", port: port, channelPrefix: prefix)
        let tokens = [relay.relay(.chat), relay.relay("theme")]
        let chats = Collector<Message>()
        let themes = Collector<String>()
        let locals = [
            center.subscribe(.chat) { chats.append($0) }, center.subscribe("theme") { themes.append($0.flag) },
        ]
        #expect(relay.waitUntilReady(timeout: .seconds(10)))

        let other = otherRelayHeader
        let good = try binary(Message(seq: 1, text: "ok"))
        let garbage: [[UInt8]] = [
            [],  // empty
            Array("hello".utf8),  // not from a relay
            Array("SR4zzzzzzzzzzzzzzzz".utf8) + [0, 0, 0, 0, 0, 0, 0, 0, UInt8(ascii: "t")] + good,  // origin not hex
            // Version 1 (JSON bodies):
            Array("SR1".utf8) + Array(other.dropFirst(3).prefix(16)) + Array("t{\"seq\":1,\"text\":\"ok\"}".utf8),
            // Version 2 (no batches) and version 3 (no sequence numbers), otherwise well formed:
            Array("SR2".utf8) + Array(other.dropFirst(3).prefix(16)) + [UInt8(ascii: "t")] + good,
            Array("SR3".utf8) + Array(other.dropFirst(3).prefix(16)) + [UInt8(ascii: "t")] + good,
            other + Array("t{not json".utf8),  // body does not decode
            other + [UInt8(ascii: "t")] + good.dropLast(3),  // body truncated
            other + [UInt8(ascii: "t")] + good + [0],  // trailing bytes
            other + [UInt8(ascii: "t")] + (try binary(["seq": "one", "text": ""])),  // wrong field type
            other + Array("x{}".utf8),  // unknown kind
            other + Array("pdark".utf8),  // a plain post on a typed channel
            [0xFF, 0x00, 0xFE, 0x80, 0x01],  // binary noise
        ]
        try publishRaw(port: port, channel: prefix + "chat", garbage)
        try publishRaw(port: port, channel: prefix + "theme", [other + [UInt8(ascii: "p"), 0xFF, 0xFE]])  // not UTF-8
        // Then one good post of each kind: once they arrive, every message before them was handled.
        try publishRaw(port: port, channel: prefix + "chat", [other + [UInt8(ascii: "t")] + good])
        try publishRaw(port: port, channel: prefix + "theme", [other + Array("plight".utf8)])

        #expect(eventually { chats.count >= 1 && themes.count >= 1 })
        #expect(chats.values == [Message(seq: 1, text: "ok")])
        #expect(themes.values == ["light"])
        #expect(relay.rejectedMessages == garbage.count + 1)
        withExtendedLifetime((tokens, locals)) {}
    }

    @Test func malformedBatchesAreCountedAndSkippedWhole() throws {
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        let center = PostCenter()
        let relay = try RedisRelay(center: center, host: "127.0.0.1", port: port, channelPrefix: prefix)
        let tokens = [relay.relay(.chat), relay.relay("theme")]
        let chats = Collector<Int>()
        let themes = Collector<String>()
        let locals = [
            center.subscribe(.chat) { chats.append($0.seq) }, center.subscribe("theme") { themes.append($0.flag) },
        ]
        #expect(relay.waitUntilReady(timeout: .seconds(10)))

        let batch = otherRelayHeader + [UInt8(ascii: "b")]
        let t = UInt8(ascii: "t")
        let p = UInt8(ascii: "p")
        let one = try entry(binary(Message(seq: 1, text: "one")))
        let two = try entry(binary(Message(seq: 2, text: "two")))
        let good = try binary(Message(seq: 3, text: "bad"))
        let chatGarbage: [[UInt8]] = [
            batch,  // no body at all
            batch + [t],  // no count
            batch + [t, 0x80],  // count truncated
            batch + [t, 0],  // count zero
            batch + [t, 1],  // count, no entry
            batch + [t, 1, 0x80],  // entry length truncated
            batch + [t, 1, UInt8(good.count + 5)] + good,  // length runs past the end
            batch + [t, 3] + one + two,  // fewer entries than counted
            batch + [t, 1] + one + [0],  // trailing bytes
            batch + [UInt8(ascii: "x"), 1] + one,  // bad inner kind
            batch + [p, 1] + entry(Array("dark".utf8)),  // plain posts on a typed channel
            batch + [t, 2] + one + entry(Array(good.dropLast(2))),  // second payload truncated
            batch + [t, 2] + one + entry(try binary(["seq": "two", "text": ""])),  // second does not decode
            batch + [t, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F] + one,  // absurd count
        ]
        let themeGarbage: [[UInt8]] = [
            batch + [p, 2] + entry(Array("first".utf8)) + entry([0xFF, 0xFE]),  // second is not UTF-8
            batch + [t, 1] + one,  // typed posts on a plain channel
        ]
        try publishRaw(port: port, channel: prefix + "chat", chatGarbage)
        try publishRaw(port: port, channel: prefix + "theme", themeGarbage)
        // Then a good batch of each kind: once they arrive, every message before them was handled.
        try publishRaw(port: port, channel: prefix + "chat", [batch + [t, 2] + one + two])
        try publishRaw(
            port: port, channel: prefix + "theme", [batch + [p, 2] + entry(Array("light".utf8)) + entry([])])

        #expect(eventually { chats.count >= 2 && themes.count >= 2 })
        // Nothing of a rejected batch was posted, not even the entries before its bad one.
        #expect(chats.values == [1, 2])
        #expect(themes.values == ["light", ""])
        #expect(relay.rejectedMessages == chatGarbage.count + themeGarbage.count)
        withExtendedLifetime((tokens, locals)) {}
    }
}

/// The header of another relay's messages: the current magic, a fixed origin id and sequence
/// number zero.
let otherRelayHeader =
    Array("SR4".utf8) + Array(repeating: UInt8(ascii: "7"), count: 16) + Array(repeating: 0, count: 8)

/// `value` in the relay's binary format.
func binary(_ value: some Encodable) throws -> [UInt8] {
    var bytes: [UInt8] = []
    try _Codec.encode(value, into: &bytes)
    return bytes
}

/// A batch entry: `body`'s length in LEB128, then `body`.
func entry(_ body: [UInt8]) -> [UInt8] {
    var bytes: [UInt8] = []
    _appendVarint(UInt64(body.count), to: &bytes)
    return bytes + body
}
