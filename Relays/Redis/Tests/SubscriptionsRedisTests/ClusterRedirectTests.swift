import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

/// Commands a cluster node declines without running them (`-MOVED`, `-ASK`) are sent again in
/// pub/sub mode too: the publisher is made to meet them on purpose, by moving a slot behind its
/// back (it reads the map again only when a node tells it to). In the cluster suite (an
/// extension), serialized with its faults.
extension ClusterTests {
    /// Pub/sub mode: a slot moved behind the publisher's back (its map still names the old owner),
    /// so the retained post's `SET` and its `SPUBLISH` are answered `-MOVED`: both are sent again
    /// to the new owner, the post arrives, none is refused, and the value is stored there; the slot
    /// moved back (its key migrated with it), a clear's `DEL` and message are answered `-MOVED` in
    /// turn and sent again: the key is deleted and the receiver clears the name.
    @Test func aRetainedPostAndAClearAnsweredMovedInPubSubModeAreSentAgainToTheNewOwner() async throws {
        let scene = try #require(await scene("theme"))
        let (map, name, key, slot, source, target) = (
            scene.map, scene.name, scene.key, scene.slot, scene.source, scene.target
        )
        let pair = try await relayPair(prefix: scene.prefix, name: name, history: 0)
        let (a, relayA, b, relayB, flags) = (pair.a, pair.relayA, pair.b, pair.relayB, pair.flags)
        let logB = EventLog(relayB)

        #expect(moveSlot(slot, from: source, to: target, primaries: map.primaries))
        // B follows (the old owner's SUNSUBSCRIBE); A's publisher knows of nothing yet.
        #expect(await settles { logB.count { $0 == .topologyChanged } >= 1 && relayB.waitUntilReady(timeout: .zero) })
        let movedBefore = movedCount(source)
        a.post(name, flag: "dark", retain: true)
        #expect(await settles { flags.values == ["dark"] }, "\(flags.values), dropped \(relayA.dropCounts)")
        #expect(await settles { relayA.publishedPosts == 1 })
        #expect(movedCount(source) >= movedBefore + 2, "the SET and the SPUBLISH met -MOVED")
        #expect(relayA.dropCounts.refused == 0)
        #expect(relayB.missedPosts == 0)
        #expect(await settles { storedValue(map: target, key) != nil })

        // Back to the source, the key migrated with the slot; A's map names the target now.
        #expect(moveSlot(slot, from: target, to: source, primaries: map.primaries, migratingKeys: true))
        #expect(await settles { logB.count { $0 == .topologyChanged } >= 2 && relayB.waitUntilReady(timeout: .zero) })
        #expect(storedValue(map: source, key) != nil)
        #expect(b.retained(name)?.flag == "dark")
        let movedOnTarget = movedCount(target)
        a.clearRetained(name)
        #expect(await settles { storedValue(map: source, key) == nil }, "the DEL was sent again to the source")
        #expect(await settles { b.retained(name) == nil }, "the clear's message was sent again")
        #expect(movedCount(target) >= movedOnTarget + 2, "the DEL and the clear's SPUBLISH met -MOVED")
        #expect(relayA.dropCounts.refused == 0)
        #expect(relayA.publishedPosts == 1)  // a clear is no post
        withExtendedLifetime(pair) {}
    }

    /// Pub/sub mode: while a slot migrates, its old owner still runs an `SPUBLISH` (sharded pub/sub
    /// has no keys to move) but answers a `SET` of a key it does not hold with `-ASK`: the `SET` is
    /// sent again, after `ASKING`, to the importing node, so the value is where the slot ends up, and
    /// a relay that starts after the move posts it retained.
    @Test func aRetainedPostsSetAnsweredAskInPubSubModeIsStoredOnTheImportingNode() async throws {
        let scene = try #require(await scene("mode"))
        let (map, name, key, slot, source, target) = (
            scene.map, scene.name, scene.key, scene.slot, scene.source, scene.target
        )
        let pair = try await relayPair(prefix: scene.prefix, name: name, history: 0)
        let (a, relayA, flags) = (pair.a, pair.relayA, pair.flags)

        let ids = try #require(nodeIDs(source, target))
        #expect(redisCall(target.port, ["CLUSTER", "SETSLOT", "\(slot)", "IMPORTING", ids.source])?.text == "OK")
        #expect(redisCall(source.port, ["CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", ids.target])?.text == "OK")
        let askedBefore = askCount(source)
        a.post(name, flag: "on", retain: true)
        #expect(await settles { flags.values == ["on"] })  // the SPUBLISH ran on the old owner
        #expect(await settles { relayA.publishedPosts == 1 })
        #expect(await settles { redisCalls(target.port, "asking") > 0 && askCount(source) > askedBefore })
        #expect(await settles { keyCount(target, slot) == 1 }, "the SET ran on the importing node")
        #expect(keyCount(source, slot) == 0)
        #expect(finishMove(slot, to: target, ids: ids, primaries: map.primaries))
        #expect(await settles { storedValue(map: target, key) != nil })
        #expect(relayA.dropCounts.refused == 0)

        let c = PostCenter()
        let relayC = try retainedRelay(c, prefix: scene.prefix, history: 0)
        let tokenC = relayC.relay(name)
        #expect(await settles { c.retained(name)?.flag == "on" })
        withExtendedLifetime((pair, tokenC)) {}
    }

    /// Pub/sub mode: a slot left half-migrating (its owner says `MIGRATING`, the other node does not
    /// import it) sends a `SET` back and forth, `-ASK` then `-MOVED`, until the 5 redirections are
    /// spent: the value is not stored, and that is reported (`.rejected`, naming the key), not
    /// silent; the post itself ran on the owner and arrives.
    @Test func aRetainedPostsSetDeclinedForGoodIsReportedNotSilent() async throws {
        let scene = try #require(await scene("loop"))
        let (name, key, slot, source, target) = (scene.name, scene.key, scene.slot, scene.source, scene.target)
        let pair = try await relayPair(prefix: scene.prefix, name: name, history: 0)
        let (a, relayA, flags) = (pair.a, pair.relayA, pair.flags)
        let logA = EventLog(relayA)

        let ids = try #require(nodeIDs(source, target))
        #expect(redisCall(source.port, ["CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", ids.target])?.text == "OK")
        defer { _ = redisCall(source.port, ["CLUSTER", "SETSLOT", "\(slot)", "STABLE"]) }
        a.post(name, flag: "kept nowhere", retain: true)
        #expect(await settles { flags.values == ["kept nowhere"] })
        let reported = {
            logA.values.contains {
                if case .rejected(let reason) = $0 { reason.contains("\"\(key)\" was not updated") } else { false }
            }
        }
        #expect(await settles { reported() }, "\(logA.values)")
        #expect(relayA.rejectedMessages == 1)
        #expect(relayA.publishedPosts == 1 && relayA.dropCounts.refused == 0)
        #expect(storedValue(map: source, key) == nil)
        withExtendedLifetime(pair) {}
    }

    /// Both modes: while a slot is unassigned a node refuses keyed commands with `CLUSTERDOWN` (the
    /// cluster's state during a failover, made here on purpose by `CLUSTER DELSLOTS` of another of
    /// its slots); a retained post's `SET` (and in history mode its `XADD`; an `SPUBLISH` is served
    /// while the cluster is down, Redis's `cluster-allow-pubsubshard-when-down`) so refused is sent
    /// again once the slot is back: the post arrives once, its value is stored, nothing is lost.
    @Test(arguments: [0, 10_000])
    func aPostAnsweredClusterDownIsSentAgainOnceTheClusterIsBack(history: Int) async throws {
        let map = try #require(await settledMap())
        let prefix = uniquePrefix()
        let name = "down"
        let key = prefix + "retained:{" + prefix + name + "}"
        let owner = try #require(map.owner(ofChannel: prefix + name))
        let nameSlot = _ClusterSlot.of(prefix + name)
        let pair = try await relayPair(prefix: prefix, name: name, history: history)
        let (a, relayA, relayB, flags) = (pair.a, pair.relayA, pair.relayB, pair.flags)

        // Another slot of the same owner, unassigned: the cluster is down until it is back.
        let slot = try #require((0..<_ClusterSlot.count).first { $0 != nameSlot && map.owner(of: $0) == owner })
        let downBefore = errorCount(owner, "CLUSTERDOWN")
        #expect(redisCall(owner.port, ["CLUSTER", "DELSLOTS", "\(slot)"])?.text == "OK")
        #expect(
            await settles {
                redisCall(owner.port, ["CLUSTER", "INFO"])?.text?.contains("cluster_state:fail") == true
            })
        a.post(name, flag: "while down", retain: true)
        #expect(await settles { errorCount(owner, "CLUSTERDOWN") > downBefore }, "the SET met CLUSTERDOWN")
        #expect(storedValue(map: owner, key) == nil)
        #expect(redisCall(owner.port, ["CLUSTER", "ADDSLOTS", "\(slot)"])?.text == "OK")
        #expect(await settles(timeout: .seconds(30)) { clusterIsOK() })
        #expect(await settles(timeout: .seconds(30)) { flags.values == ["while down"] }, "\(relayA.dropCounts)")
        #expect(await settles { relayA.publishedPosts == 1 })
        #expect(await settles { storedValue(map: owner, key) != nil }, "the SET was sent again")
        #expect(relayA.droppedPosts == 0, "\(relayA.dropCounts)")
        #expect(relayA.rejectedMessages == 0)
        #expect(relayB.missedPosts == 0)
        withExtendedLifetime(pair) {}
    }

    /// History mode: a relay that starts while its name's slot migrates reads the name's stream on
    /// the old owner (the stream is still there), but the retained key was migrated already, so its
    /// read is answered `-ASK`; once the move ends (the next `XREAD` meets `-MOVED`), the key is read
    /// again, on the new owner, and the retained post is posted.
    @Test func aRetainedKeyReadAnsweredAskInHistoryModeIsReadAgainOnTheNewOwner() async throws {
        let map = try #require(await settledMap())
        let prefix = uniquePrefix()
        let name = "theme"
        let channel = prefix + name
        let key = prefix + "retained:{" + channel + "}"
        let slot = _ClusterSlot.of(channel)
        let source = try #require(map.owner(of: slot))
        let target = try #require(map.primaries.sorted { $0.port < $1.port }.first { $0 != source })
        let a = PostCenter()
        let relayA = try retainedRelay(a, prefix: prefix, history: 10_000)
        let tokenA = relayA.relay(name)
        #expect(await settles { relayA.waitUntilReady(timeout: .zero) })
        a.post(name, flag: "dark", retain: true)
        #expect(await settles { relayA.publishedPosts == 1 && storedValue(map: source, key) != nil })

        // The slot starts to migrate, and only the retained key has moved yet.
        let ids = try #require(nodeIDs(source, target))
        let ok = _Reply.string(Array("OK".utf8))
        #expect(redisCall(target.port, ["CLUSTER", "SETSLOT", "\(slot)", "IMPORTING", ids.source]) == ok)
        #expect(redisCall(source.port, ["CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", ids.target]) == ok)
        #expect(redisCall(source.port, ["MIGRATE", target.host, "\(target.port)", key, "0", "5000"]) == ok)
        let askedBefore = askCount(source)
        let b = PostCenter()
        let relayB = try retainedRelay(b, prefix: prefix, history: 10_000)
        let tokenB = relayB.relay(name)
        #expect(await settles { askCount(source) > askedBefore }, "the key's read met -ASK")
        #expect(b.retained(name) == nil)

        // The move ends: the stream follows, the slot is the target's.
        #expect(redisCall(source.port, ["MIGRATE", target.host, "\(target.port)", channel, "0", "5000"]) == ok)
        #expect(finishMove(slot, to: target, ids: ids, primaries: map.primaries))
        #expect(await settles { b.retained(name)?.flag == "dark" }, "read again on the new owner")
        #expect(relayB.rejectedMessages == 0)
        withExtendedLifetime((tokenA, tokenB)) {}
    }

    /// Pub/sub mode: while a name's primary cannot be reached (killed, then started again before
    /// the node timeout, so no replica takes over), a post of the name is dropped as `disconnected`
    /// and a clear of it is not counted at all (a clear is no post); the name works again after.
    @Test func aClearForAPrimaryWithoutAConnectionIsNoDroppedPost() async throws {
        let map = try #require(await settledMap())
        let prefix = uniquePrefix()
        let name = "gone"
        let node = try #require(map.owner(ofChannel: prefix + name))
        // A name on another primary: a post of it, made last, shows that the ones before it were routed.
        let other = try #require(
            (0..<1000).lazy.map { "alive\($0)" }.first { map.owner(ofChannel: prefix + $0) != node })
        let configFile = try #require(redisInfo(node.port, "server", "config_file"))
        let a = PostCenter()
        let relayA = try retainedRelay(a, prefix: prefix, history: 0)
        let b = PostCenter()
        let relayB = try retainedRelay(b, prefix: prefix, history: 0)
        let flags = Collector<String>()
        let tokens = [
            relayA.relay(name), relayB.relay(name), relayA.relay(other), relayB.relay(other),
            b.subscribe(name) { flags.append($0.flag) }, b.subscribe(other) { flags.append($0.flag) },
        ]
        #expect(await settles { relayA.waitUntilReady(timeout: .zero) && relayB.waitUntilReady(timeout: .zero) })

        #expect(killServer(node.port))
        // Probes until one is dropped as `disconnected`: the publisher has no connection to the node.
        #expect(
            await settles {
                if relayA.dropCounts.disconnected > 0 { return true }
                a.post(name, flag: "probe")
                return false
            })
        // Probes still queued are counted before the mark behind them arrives.
        a.post(other, flag: "probes done")
        #expect(await settles { flags.values.contains("probes done") })
        let dropped = relayA.dropCounts.disconnected
        let received = flags.values.count { $0 == "lost" }
        a.clearRetained(name)
        a.post(name, flag: "lost")
        a.post(other, flag: "mark")
        #expect(await settles { flags.values.contains("mark") })
        // The post is dropped, or (if a replica took over meanwhile) received: one either way; the
        // clear adds nothing.
        let lost = relayA.dropCounts.disconnected - dropped + flags.values.count { $0 == "lost" } - received
        #expect(lost == 1, "\(relayA.dropCounts), \(flags.values)")
        #expect(await rejoinSettled(configFile: configFile, port: node.port))
        #expect(await settles { relayA.waitUntilReady(timeout: .zero) && relayB.waitUntilReady(timeout: .zero) })
        #expect(relayA.dropCounts.refused == 0)
        a.post(name, flag: "back")
        #expect(await settles { flags.values.last == "back" })
        withExtendedLifetime(tokens) {}
    }

    /// A name of a fresh prefix on a cluster whose nodes agree on the map: its retained key, its
    /// slot, the primary that owns it (`source`) and another one (`target`, the lowest port).
    private struct Scene {
        let map: _SlotMap
        let prefix: String
        let name: String
        let source: _Address
        let target: _Address
        var channel: String { prefix + name }
        var key: String { prefix + "retained:{" + channel + "}" }
        var slot: Int { _ClusterSlot.of(channel) }
    }

    private func scene(_ name: String, test: String = #function) async -> Scene? {
        guard let map = await settledMap() else { return nil }
        let prefix = uniquePrefix(test)
        guard let source = map.owner(ofChannel: prefix + name),
            let target = map.primaries.sorted(by: { $0.port < $1.port }).first(where: { $0 != source })
        else { return nil }
        return Scene(map: map, prefix: prefix, name: name, source: source, target: target)
    }

    /// Two relays of `name` (A posts, B's center collects the flags of what arrives), both ready.
    private struct RelayPair {
        let a: PostCenter
        let relayA: RedisRelay
        let b: PostCenter
        let relayB: RedisRelay
        let flags: Collector<String>
        let tokens: [Subscription]
    }

    private func relayPair(prefix: String, name: String, history: Int) async throws -> RelayPair {
        let a = PostCenter()
        let relayA = try retainedRelay(a, prefix: prefix, history: history)
        let b = PostCenter()
        let relayB = try retainedRelay(b, prefix: prefix, history: history)
        let flags = Collector<String>()
        let tokens = [relayA.relay(name), relayB.relay(name), b.subscribe(name) { flags.append($0.flag) }]
        #expect(await settles { relayA.waitUntilReady(timeout: .zero) && relayB.waitUntilReady(timeout: .zero) })
        return RelayPair(a: a, relayA: relayA, b: b, relayB: relayB, flags: flags, tokens: tokens)
    }

    /// The value of `key` on `node` (which must own its slot): `nil` when it does not exist.
    private func storedValue(map node: _Address, _ key: String) -> [UInt8]? {
        guard case .string(let bytes) = redisCall(node.port, ["GET", key]) else { return nil }
        return bytes
    }

    /// How many keys `node` holds in `slot`.
    private func keyCount(_ node: _Address, _ slot: Int) -> Int {
        guard case .integer(let count) = redisCall(node.port, ["CLUSTER", "COUNTKEYSINSLOT", "\(slot)"]) else {
            return -1
        }
        return Int(count)
    }

    /// The `-MOVED` and `-ASK` answers `node` gave (`INFO errorstats`), 0 when none.
    private func movedCount(_ node: _Address) -> Int { errorCount(node, "MOVED") }
    private func askCount(_ node: _Address) -> Int { errorCount(node, "ASK") }

    private func errorCount(_ node: _Address, _ error: String) -> Int {
        guard let stat = redisInfo(node.port, "errorstats", "errorstat_\(error)") else { return 0 }
        return Int(stat.dropFirst("count=".count)) ?? 0
    }

    private func nodeIDs(_ source: _Address, _ target: _Address) -> (source: String, target: String)? {
        guard let sourceID = redisCall(source.port, ["CLUSTER", "MYID"])?.text,
            let targetID = redisCall(target.port, ["CLUSTER", "MYID"])?.text
        else { return nil }
        return (sourceID, targetID)
    }

    /// Gives `slot` to `target` on every primary (the end of a migration).
    private func finishMove(
        _ slot: Int, to target: _Address, ids: (source: String, target: String), primaries: Set<_Address>
    ) -> Bool {
        var done = redisCall(target.port, ["CLUSTER", "SETSLOT", "\(slot)", "NODE", ids.target])?.text == "OK"
        for primary in primaries where primary != target {
            done = redisCall(primary.port, ["CLUSTER", "SETSLOT", "\(slot)", "NODE", ids.target])?.text == "OK" && done
        }
        return done
    }
}
