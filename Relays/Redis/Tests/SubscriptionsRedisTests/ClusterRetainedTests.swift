import Foundation
import Subscriptions
import Synchronization
import Testing

@testable import SubscriptionsRedis

/// Which key holds a name's retained post in a cluster (`_RetainedOnServer.clusterKey`): pure, no
/// server.
@Suite("Retained posts in a cluster: the key rule")
struct ClusterRetainedKeyTests {
    private func clusterKey(_ prefix: String, _ name: String) -> String? {
        let channel = Array((prefix + name).utf8)
        let keys = _RetainedKeys(prefixLength: prefix.utf8.count, cluster: true)
        return keys.key(channel).map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func theRetainedKeyOfAClusterNameLiesInItsChannelsSlotOrThereIsNone() throws {
        // A name without braces: the tagged form, whose hash tag is the channel itself.
        #expect(clusterKey("app:", "theme") == "app:retained:{app:theme}")
        // A name or prefix that carries a hash tag: the standalone key is already in the slot.
        #expect(clusterKey("app:", "{user1}.mode") == "app:retained:{user1}.mode")
        #expect(clusterKey("{app}:", "theme") == "{app}:retained:theme")
        // Braces that defeat both forms (a `}` closes the added tag early): no key.
        #expect(clusterKey("app:", "a}b") == nil)
        #expect(clusterKey("app:", "é{}") == nil)
        for (prefix, name) in [("app:", "theme"), ("app:", "{user1}.mode"), ("{app}:", "theme"), ("x:", "é")] {
            let key = try #require(clusterKey(prefix, name))
            #expect(_ClusterSlot.of(key) == _ClusterSlot.of(prefix + name), "\(key)")
            #expect(key.hasPrefix(prefix + "retained:"), "\(key)")  // the README's ACL pattern
        }
        // Standalone and Sentinel keep `<prefix>retained:<name>`, braces or not.
        let standalone = _RetainedKeys(prefixLength: 4, cluster: false)
        for name in ["theme", "a}b", "{user1}.mode"] {
            let key = standalone.key(Array(("app:" + name).utf8)).map { String(decoding: $0, as: UTF8.self) }
            #expect(key == "app:retained:" + name)
        }
    }
}

/// Retained posts kept on a real cluster, in both modes: in the cluster suite (an extension, so
/// that they are serialized with its faults).
extension ClusterTests {
    private static let retainedSecret = Array("a shared secret of thirty-two by".utf8)

    func retainedRelay(
        _ center: PostCenter, prefix: String, history: Int, signed: Bool = true
    ) throws -> RedisRelay {
        var options = RetainedTests.options(history: history, key: signed ? Self.retainedSecret : nil)
        options.topology = .cluster
        return try RedisRelay(center: center, url: liveClusterURL, channelPrefix: prefix, options: options)
    }

    /// The value of `key` on the node that owns its slot in `map`: `nil` when it does not exist.
    func storedValue(_ map: _SlotMap, _ key: String) -> [UInt8]? {
        guard let owner = map.owner(ofChannel: key), case .string(let bytes) = redisCall(owner.port, ["GET", key])
        else { return nil }
        return bytes
    }

    private func connectedClients(_ primaries: [_Address]) -> [Int] {
        primaries.map { redisInfo($0.port, "clients", "connected_clients").flatMap { Int($0) } ?? 0 }
    }

    /// Both modes, signed: retained posts are stored in keys of their channels' slots (the tagged
    /// form for plain names, the standalone form for a name with a hash tag), a relay that starts
    /// later posts them retained (live once, replayed), a clear deletes the key for relays that
    /// start after it, and no relay keeps more than 2 connections per primary once it is done.
    @Test(arguments: [0, 10_000])
    func aRetainedPostOnAClusterIsStoredInItsSlotAndPostedRetainedByALaterRelay(history: Int) async throws {
        let map = try #require(await settledMap())
        let primaries = map.primaries.sorted { $0.port < $1.port }
        let prefix = uniquePrefix()
        let clientsBefore = connectedClients(primaries)
        let a = PostCenter()
        let relayA = try retainedRelay(a, prefix: prefix, history: history)
        let tokensA = [relayA.relay(.chat), relayA.relay("theme"), relayA.relay("{pin}mode")]
        #expect(await settles { relayA.waitUntilReady(timeout: .zero) })
        a.post(.chat, Message(seq: 1, text: "first"), retain: true)
        a.post(.chat, Message(seq: 2, text: "last"), retain: true)
        a.post(.chat, Message(seq: 3, text: "not retained"))
        a.post("theme", flag: "dark", retain: true)
        a.post("{pin}mode", flag: "on", retain: true)
        #expect(await settles { relayA.publishedPosts == 5 })
        let chatKey = prefix + "retained:{" + prefix + "chat}"
        let modeKey = prefix + "retained:{pin}mode"
        #expect(await settles { storedValue(map, chatKey) != nil && storedValue(map, modeKey) != nil })
        #expect(map.owner(ofChannel: chatKey) == map.owner(ofChannel: prefix + "chat"))

        // B starts later: each name's last retained post, posted retained on its center.
        let b = PostCenter()
        let live = Collector<Int>()
        let liveToken = b.subscribe(.chat) { live.append($0.seq) }
        let relayB = try retainedRelay(b, prefix: prefix, history: history)
        let tokensB = [relayB.relay(.chat), relayB.relay("theme"), relayB.relay("{pin}mode")]
        #expect(
            await settles { b.retained(.chat) != nil && b.retained("theme") != nil && b.retained("{pin}mode") != nil })
        #expect(b.retained(.chat) == Message(seq: 2, text: "last"))
        #expect(b.retained("theme")?.flag == "dark")
        #expect(b.retained("{pin}mode")?.flag == "on")
        let replayed = Collector<Int>()
        let replayToken = b.subscribe(.chat, replay: true) { replayed.append($0.seq) }
        #expect(replayed.values == [2])
        #expect(live.values == [2])
        #expect(relayB.publishedPosts == 0)
        #expect(relayB.rejectedMessages == 0)
        #expect(relayA.rejectedMessages == 0)
        // The side connections that read the keys are closed: at most 2 per relay per primary.
        #expect(
            await settles {
                zip(clientsBefore, connectedClients(primaries)).allSatisfy { before, after in after - before <= 4 }
            }, "\(clientsBefore) → \(connectedClients(primaries))")

        // A clears chat: the key goes, B clears it, and C (started later) gets the theme only.
        a.clearRetained(.chat)
        #expect(await settles { storedValue(map, chatKey) == nil })
        #expect(await settles { b.retained(.chat) == nil })
        let c = PostCenter()
        let relayC = try retainedRelay(c, prefix: prefix, history: history)
        // Chat first, theme after it: on one node they are read in that order; on two, chat's
        // confirmation may come later, so C waits until it is ready and theme was read.
        let tokensC = [relayC.relay(.chat), relayC.relay("theme")]
        #expect(await settles { relayC.waitUntilReady(timeout: .zero) && c.retained("theme") != nil })
        #expect(c.retained("theme")?.flag == "dark")
        #expect(c.retained(.chat) == nil)
        #expect(relayA.publishedPosts == 5)  // a clear is no post, a SET none either
        #expect(relayA.droppedPosts == 0)
        #expect(relayB.missedPosts == 0)
        withExtendedLifetime((tokensA, tokensB, tokensC, liveToken, replayToken)) {}
    }

    /// Both modes: a value forged into the key (a message signed for the channel, moved there) is
    /// refused; the same message signed for the key is taken.
    @Test(arguments: [0, 10_000])
    func aForgedStoredValueOnAClusterIsRefused(history: Int) async throws {
        let map = try #require(await settledMap())
        let prefix = uniquePrefix()
        let signer = _Signer(key: Self.retainedSecret)
        var header = otherRelayHeader
        header.replaceSubrange(0..<3, with: Array("SS4".utf8))
        let message = header + [_Wire.retainedPlain] + Array("forged".utf8)
        let channel = prefix + "theme"
        let key = prefix + "retained:{" + channel + "}"
        let owner = try #require(map.owner(ofChannel: channel))
        let moved = message + signer.signature(channel: Array(channel.utf8), message: message[...])
        let connection = try _Connection.open(host: "127.0.0.1", port: owner.port, timeout: .seconds(2))
        let endpoint = _Endpoint(host: "127.0.0.1", port: owner.port)
        let set = { (value: [UInt8]) throws -> _Reply in
            try connection.call(bytes: [Array("SET".utf8), Array(key.utf8), value], endpoint)
        }
        #expect(try set(moved) == .string(Array("OK".utf8)))
        let center = PostCenter()
        let relay = try retainedRelay(center, prefix: prefix, history: history)
        let token = relay.relay("theme")
        #expect(await settles { relay.rejectedMessages == 1 })
        #expect(center.retained("theme") == nil)

        let good = message + signer.signature(channel: Array(key.utf8), message: message[...])
        #expect(try set(good) == .string(Array("OK".utf8)))
        let other = PostCenter()
        let relayOther = try retainedRelay(other, prefix: prefix, history: history)
        let otherToken = relayOther.relay("theme")
        #expect(await settles { other.retained("theme") != nil })
        #expect(other.retained("theme")?.flag == "forged")
        #expect(relayOther.rejectedMessages == 0)
        withExtendedLifetime((token, otherToken)) {}
    }

    /// Both modes: a name whose braces leave no key in its slot (`a}b`) has its retained posts
    /// relayed (running relays retain them) but not stored, reported once as `.rejected` naming it.
    @Test(arguments: [0, 10_000])
    func aNameWithNoRetainedKeyInItsSlotIsRelayedAndReportedOnce(history: Int) async throws {
        let map = try #require(await settledMap())
        let prefix = uniquePrefix()
        let name = "a}b"
        let a = PostCenter()
        let relayA = try retainedRelay(a, prefix: prefix, history: history, signed: false)
        let events = EventLog(relayA)
        let b = PostCenter()
        let relayB = try retainedRelay(b, prefix: prefix, history: history, signed: false)
        let tokens = [relayA.relay(name), relayB.relay(name)]
        #expect(await settles { relayA.waitUntilReady(timeout: .zero) && relayB.waitUntilReady(timeout: .zero) })
        a.post(name, flag: "one", retain: true)
        a.post(name, flag: "two", retain: true)
        #expect(await settles { b.retained(name)?.flag == "two" })
        #expect(await settles { relayA.publishedPosts == 2 })
        let reports = events.count {
            if case .rejected(let reason) = $0 { return reason.contains("\"a}b\"") }
            return false
        }
        #expect(reports == 1)
        #expect(relayA.rejectedMessages == 1)
        #expect(relayB.rejectedMessages == 0)
        // Neither form of the key was written anywhere.
        for key in [prefix + "retained:" + name, prefix + "retained:{" + prefix + name + "}"] {
            #expect(storedValue(map, key) == nil, "\(key)")
        }
        a.clearRetained(name)
        #expect(await settles { b.retained(name) == nil })
        #expect(relayA.rejectedMessages == 1)
        withExtendedLifetime(tokens) {}
    }

    /// History mode: retained posts of a name made while its slot is resharded (each a `SET` then
    /// an `XADD`, sent again together after `-ASK` or `-MOVED`): every post is acknowledged (none
    /// dropped, every reply matched to its command), received once in order, and the key, moved
    /// with its slot, holds the last one for a relay that starts later.
    @Test func historyModeRetainedPostsFollowAReshardAndTheLastOneIsStored() async throws {
        let map = try #require(await settledMap())
        let source = try #require(map.primaries.sorted { $0.port < $1.port }.first)
        let target = try #require(map.primaries.sorted { $0.port < $1.port }.last)
        let prefix = uniquePrefix()
        let owned = (0..<_ClusterSlot.count).filter { map.owner(of: $0) == source }.prefix(40)
        let moving = try #require(
            (0..<100_000).lazy.map { "rr\($0)" }.first { owned.contains(_ClusterSlot.of(prefix + $0)) })
        let count = owned.firstIndex(of: _ClusterSlot.of(prefix + moving))! - owned.startIndex + 1
        let topic = Topic<Message>(moving)
        let a = PostCenter()
        let relayA = try retainedRelay(a, prefix: prefix, history: ClusterTests.history)
        let b = PostCenter()
        let relayB = try retainedRelay(b, prefix: prefix, history: ClusterTests.history)
        let received = Collector<Int>()
        let tokens = [relayA.relay(topic), relayB.relay(topic), b.subscribe(topic) { received.append($0.seq) }]
        #expect(await settles { relayA.waitUntilReady(timeout: .zero) && relayB.waitUntilReady(timeout: .zero) })
        let primaries = map.primaries
        let setsBefore = primaries.map { redisCalls($0.port, "set") }
        let stop = Atomic<Bool>(false)
        let poster = Task.detached { () -> Int in
            var made = 0
            while !stop.load(ordering: .acquiring) {
                a.post(topic, Message(seq: made, text: "r"), retain: true)
                made += 1
                if made % 4 == 0 { try? await Task.sleep(for: .milliseconds(1)) }
            }
            return made
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(reshard(from: source, to: target, count: count))
        #expect(await settles { clusterMap()?.owner(ofChannel: prefix + moving) == target })
        try await Task.sleep(for: .milliseconds(300))
        stop.store(true, ordering: .releasing)
        let made = await poster.value
        #expect(await settles(timeout: .seconds(30)) { relayA.publishedPosts == made && received.count == made })
        #expect(relayA.dropCounts.total == 0, "\(relayA.dropCounts)")
        #expect(received.values == Array(0..<made))
        #expect(relayB.missedPosts == 0)
        // Each SET ran exactly once, on the slot's owner of the moment: none lost to a redirection,
        // none run twice.
        let sets = zip(primaries.map { redisCalls($0.port, "set") }, setsBefore).map { $0 - $1 }.reduce(0, +)
        #expect(sets == made)
        let sourceSetStats = redisInfo(source.port, "commandstats", "cmdstat_set") ?? ""
        // The key moved with its slot and holds the last post, for a relay that starts now.
        let key = prefix + "retained:{" + prefix + moving + "}"
        #expect(_ClusterSlot.of(key) == _ClusterSlot.of(prefix + moving))
        #expect(
            await settles {
                if case .string = redisCall(target.port, ["GET", key]) { return true }
                return false
            })
        let later = PostCenter()
        let relayLater = try retainedRelay(later, prefix: prefix, history: ClusterTests.history)
        let laterToken = relayLater.relay(topic)
        #expect(await settles { later.retained(topic) != nil })
        #expect(later.retained(topic)?.seq == made - 1)
        print(
            "cluster retained reshard (\(count) slots): made \(made), received \(received.count), SETs \(sets), "
                + "source's SET stats \(sourceSetStats), \(relayA.dropCounts)")
        withExtendedLifetime((tokens, laterToken)) {}
    }
}
