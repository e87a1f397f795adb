import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

/// The relay on a real Redis Cluster (3 primaries, 3 replicas) that `Scripts/relay-topology-tests.sh`
/// starts; skipped without it. Serialized: the scale measurement runs first, while the cluster is
/// whole, and the faults leave it changed for the tests after them.
@Suite(
    "Cluster: sharded pub/sub on the owning primaries", .serialized,
    .enabled(if: TopologyEnvironment.clusterPorts != nil))
struct ClusterTests {
    /// Names whose channels (with `prefix`) are spread 10/10/10 over the primaries of `map`: the
    /// premise of the measurement (with hashed names a split follows the slots; see the README).
    private func balancedNames(_ map: _SlotMap) -> (prefix: String, names: [String]) {
        for attempt in 0..<10_000 {
            let prefix = "scale\(attempt):"
            let names = (0..<30).map { "n\($0)" }
            var perNode: [_Address: Int] = [:]
            for name in names { perNode[map.owner(ofChannel: prefix + name)!, default: 0] += 1 }
            if perNode.count == 3 && perNode.values.allSatisfy({ $0 == 10 }) { return (prefix, names) }
        }
        fatalError("no balanced prefix")
    }

    /// 30 names over 3 primaries: each primary runs a third (±10%) of the SPUBLISH commands, while
    /// classic PUBLISH in the same cluster reaches every primary with every message; a relay holds at
    /// most 2 connections per primary.
    @Test func thirtyNamesSpreadTheirMessagesOverThreePrimaries() async throws {
        let map = try #require(await settledMap())
        let primaries = map.primaries.sorted { $0.port < $1.port }
        #expect(primaries.count == 3)
        let (prefix, names) = balancedNames(map)
        let clientsBefore = primaries.map {
            redisInfo($0.port, "clients", "connected_clients").flatMap { Int($0) } ?? 0
        }
        var options = fastOptions
        options.topology = .cluster
        let sender = PostCenter()
        let relay = try RedisRelay(
            center: sender, url: TopologyEnvironment.clusterURL, channelPrefix: prefix, options: options)
        let receiving = PostCenter()
        let receiver = try RedisRelay(
            center: receiving, url: TopologyEnvironment.clusterURL, channelPrefix: prefix, options: options)
        let got = Collector<Int>()
        var tokens: [Subscription] = []
        for name in names {
            tokens.append(relay.relay(Topic<Message>(name)))
            tokens.append(receiver.relay(Topic<Message>(name)))
            tokens.append(receiving.subscribe(Topic<Message>(name)) { got.append($0.seq) })
        }
        #expect(await settles { relay.waitUntilReady(timeout: .zero) && receiver.waitUntilReady(timeout: .zero) })
        // Two relays: at most 2 connections each per primary (the reading of INFO adds none: it is
        // counted in the baseline too).
        let clientsAfter = primaries.map { redisInfo($0.port, "clients", "connected_clients").flatMap { Int($0) } ?? 0 }
        for (before, after) in zip(clientsBefore, clientsAfter) { #expect(after - before <= 4, "\(before) → \(after)") }

        let before = primaries.map { redisCalls($0.port, "spublish") }
        let rounds = 100
        // Round-robin over the names: no two consecutive posts share a channel, so each post is one
        // SPUBLISH (no batching).
        for seq in 0..<rounds { for name in names { sender.post(Topic<Message>(name), Message(seq: seq, text: "m")) } }
        #expect(await settles { got.count == rounds * names.count })
        let sharded = zip(primaries, before).map { redisCalls($0.port, "spublish") - $1 }
        let total = rounds * names.count
        #expect(sharded.reduce(0, +) == total)
        for carried in sharded {
            let share = Double(carried) / Double(total)
            #expect(abs(share - 1.0 / 3) <= 0.1 / 3, "share \(share)")
        }

        // Classic PUBLISH in the same cluster, side by side: two standalone relays on two primaries.
        let classicPrefix = prefix + "classic:"
        var standalone = fastOptions
        standalone.topology = .standalone
        let classicSender = try RedisRelay(
            center: sender, host: "127.0.0.1", port: primaries[0].port, channelPrefix: classicPrefix,
            options: standalone)
        let classicReceiver = try RedisRelay(
            center: receiving, host: "127.0.0.1", port: primaries[1].port, channelPrefix: classicPrefix,
            options: standalone)
        let classicGot = Collector<Int>()
        for name in names {
            let topic = Topic<Message>("classic." + name)
            tokens.append(classicSender.relay(topic))
            tokens.append(classicReceiver.relay(topic))
            tokens.append(receiving.subscribe(topic) { classicGot.append($0.seq) })
        }
        #expect(
            await settles {
                classicSender.waitUntilReady(timeout: .zero) && classicReceiver.waitUntilReady(timeout: .zero)
            }
        )
        let classicBefore = primaries.map { classicLoad($0.port) }
        for seq in 0..<rounds {
            for name in names { sender.post(Topic<Message>("classic." + name), Message(seq: seq, text: "m")) }
        }
        #expect(await settles { classicGot.count == rounds * names.count })
        let classic = zip(primaries, classicBefore).map { classicLoad($0.port) - $1 }
        // Every primary carried (ran or received over the bus) every message.
        for carried in classic { #expect(carried >= total, "\(carried)") }
        print(
            "cluster scale: 30 names, \(total) messages; SPUBLISH per primary \(sharded); classic PUBLISH per primary \(classic)"
        )
        tokens = []
        await relay.close()
        await receiver.close()
        await classicSender.close()
        await classicReceiver.close()
    }

    /// The messages of classic `PUBLISH` a node carried: those it ran, and those it received over
    /// the cluster bus from the node that ran them.
    private func classicLoad(_ port: Int) -> Int {
        let bus =
            redisCall(port, ["CLUSTER", "INFO"])?.text?.split(whereSeparator: \.isNewline)
            .first { $0.hasPrefix("cluster_stats_messages_publish_received:") }
            .flatMap { Int($0.split(separator: ":")[1]) } ?? 0
        return redisCalls(port, "publish") + bus
    }

    /// A slot moved by hand during traffic (CLUSTER SETSLOT, as `redis-cli --cluster reshard` does
    /// it): the relay follows it (the server's SUNSUBSCRIBE, -MOVED), says `.topologyChanged`, loses
    /// no subscription, and every post is received or counted.
    @Test func aSlotMovedDuringTrafficIsFollowedAndEveryLossCounted() async throws {
        let map = try #require(await settledMap())
        let prefix = uniquePrefix()
        let names = (0..<6).map { "m\($0)" }
        let traffic = try Traffic(url: TopologyEnvironment.clusterURL, topology: .cluster, prefix: prefix, names: names)
        #expect(await traffic.ready())
        let slot = _ClusterSlot.of(prefix + names[0])
        let source = try #require(map.owner(of: slot))
        let target = try #require(map.primaries.first { $0 != source })
        traffic.start()
        try await Task.sleep(for: .milliseconds(300))
        #expect(moveSlot(slot, from: source, to: target, primaries: map.primaries))
        #expect(await settles(timeout: .seconds(20)) { traffic.logB.count { $0 == .topologyChanged } >= 1 })
        #expect(await traffic.ready())
        try await Task.sleep(for: .milliseconds(300))
        traffic.stop()
        traffic.post(rounds: 1)
        #expect(await settles { traffic.lastRoundArrived() }, "no subscription lost: \(traffic.receivedPerName)")
        traffic.expectEveryPostAccountedForInOrder()
        // An SPUBLISH answered -MOVED in the moment the slot moved was sent again, not refused.
        #expect(traffic.relayA.dropCounts.refused == 0)
        print(
            "cluster slot move: made \(traffic.posts), received \(traffic.receivedCount), missed \(traffic.relayB.missedPosts), dropped \(traffic.relayA.dropCounts), events \(traffic.logB.values)"
        )
        await traffic.close()
    }

    /// Moves `slot` from `source` to `target` and tells every primary; with `migratingKeys`, its keys
    /// go too (`MIGRATE`, as `redis-cli --cluster reshard` does), else it must hold none.
    func moveSlot(
        _ slot: Int, from source: _Address, to target: _Address, primaries: Set<_Address>, migratingKeys: Bool = false
    ) -> Bool {
        guard let sourceID = redisCall(source.port, ["CLUSTER", "MYID"])?.text,
            let targetID = redisCall(target.port, ["CLUSTER", "MYID"])?.text
        else { return false }
        let ok = _Reply.string(Array("OK".utf8))
        guard redisCall(target.port, ["CLUSTER", "SETSLOT", "\(slot)", "IMPORTING", sourceID]) == ok,
            redisCall(source.port, ["CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", targetID]) == ok
        else { return false }
        if migratingKeys,
            case .array(let keys)? = redisCall(source.port, ["CLUSTER", "GETKEYSINSLOT", "\(slot)", "100"])
        {
            for case .string(let key) in keys {
                let command = [
                    "MIGRATE", target.host, "\(target.port)", String(decoding: key, as: UTF8.self), "0", "5000",
                ]
                guard redisCall(source.port, command) == ok else { return false }
            }
        }
        let steps: [(Int, [String])] = [
            (target.port, ["CLUSTER", "SETSLOT", "\(slot)", "NODE", targetID]),
            (source.port, ["CLUSTER", "SETSLOT", "\(slot)", "NODE", targetID]),
        ]
        for (port, command) in steps where redisCall(port, command) != ok { return false }
        for primary in primaries where primary != source && primary != target {
            _ = redisCall(primary.port, ["CLUSTER", "SETSLOT", "\(slot)", "NODE", targetID])
        }
        return true
    }

    /// A primary killed during traffic (its replica is promoted): the relay follows, loses no
    /// subscription, and every post is received or counted.
    @Test func aPrimaryKilledDuringTrafficIsFollowedAndEveryLossCounted() async throws {
        let map = try #require(await settledMap())
        let prefix = uniquePrefix()
        let names = (0..<6).map { "k\($0)" }
        let traffic = try Traffic(url: TopologyEnvironment.clusterURL, topology: .cluster, prefix: prefix, names: names)
        #expect(await traffic.ready())
        let victim = try #require(map.owner(ofChannel: prefix + names[0]))
        let configFile = try #require(redisInfo(victim.port, "server", "config_file"))
        traffic.start()
        try await Task.sleep(for: .milliseconds(300))
        #expect(killServer(victim.port))
        // The node timeout (2 s) and the election, then the relays' return: bounded, not timed.
        #expect(
            await settles(timeout: .seconds(30)) {
                clusterMap()?.owner(ofChannel: prefix + names[0]).map { $0 != victim } ?? false
            })
        #expect(await settles(timeout: .seconds(30)) { traffic.logB.count { $0 == .topologyChanged } >= 1 })
        #expect(await traffic.ready())
        try await Task.sleep(for: .milliseconds(300))
        traffic.stop()
        traffic.post(rounds: 1)
        #expect(
            await settles { traffic.lastRoundArrived() },
            "no subscription lost: \(traffic.receivedPerName.mapValues(\.last))")
        traffic.expectEveryPostAccountedForInOrder()
        #expect(
            traffic.logB.values.contains {
                if case .disconnected(let reason) = $0 { reason.contains("\(victim.port)") } else { false }
            })
        print(
            "cluster primary killed: made \(traffic.posts), received \(traffic.receivedCount), missed \(traffic.relayB.missedPosts), dropped \(traffic.relayA.dropCounts), events \(traffic.logB.values)"
        )
        await traffic.close()
        #expect(await rejoinSettled(configFile: configFile, port: victim.port), "the killed node back as a replica")
    }
    /// `redis-cli --cluster reshard` moves slots, a relayed name's among them, from one primary to
    /// another during traffic: the relay follows, loses no subscription, and every post is received
    /// or counted.
    @Test func aReshardDuringTrafficIsFollowedAndEveryLossCounted() async throws {
        let map = try #require(await settledMap())
        let source = try #require(map.primaries.sorted { $0.port < $1.port }.first)
        let target = try #require(map.primaries.first { $0 != source })
        // A name whose slot is among the source's 40 lowest, so that a short reshard moves it.
        let prefix = uniquePrefix()
        let owned = (0..<_ClusterSlot.count).filter { map.owner(of: $0) == source }.prefix(40)
        let moving = try #require(
            (0..<100_000).lazy.map { "r\($0)" }.first { owned.contains(_ClusterSlot.of(prefix + $0)) })
        let count = owned.firstIndex(of: _ClusterSlot.of(prefix + moving))! - owned.startIndex + 1
        let names = [moving] + (0..<5).map { "s\($0)" }
        let traffic = try Traffic(url: TopologyEnvironment.clusterURL, topology: .cluster, prefix: prefix, names: names)
        #expect(await traffic.ready())
        traffic.start()
        try await Task.sleep(for: .milliseconds(300))
        #expect(reshard(from: source, to: target, count: count))
        #expect(await settles(timeout: .seconds(20)) { clusterMap()?.owner(ofChannel: prefix + moving) == target })
        #expect(await settles(timeout: .seconds(20)) { traffic.logB.count { $0 == .topologyChanged } >= 1 })
        #expect(await traffic.ready())
        try await Task.sleep(for: .milliseconds(300))
        traffic.stop()
        traffic.post(rounds: 1)
        #expect(
            await settles { traffic.lastRoundArrived() },
            "no subscription lost: \(traffic.receivedPerName.mapValues(\.last))")
        traffic.expectEveryPostAccountedForInOrder()
        #expect(traffic.relayA.dropCounts.refused == 0)  // what met -MOVED or -ASK was sent again
        print(
            "cluster reshard (\(count) slots): made \(traffic.posts), received \(traffic.receivedCount), missed \(traffic.relayB.missedPosts), dropped \(traffic.relayA.dropCounts), events \(traffic.logB.values)"
        )
        await traffic.close()
    }

    /// A primary restarted at once (killed and started again from its configuration, faster than
    /// the node timeout, so no replica takes over): the relay reconnects to the same node, loses no
    /// subscription, and every post is received or counted.
    @Test func aRestartedPrimaryIsReconnectedAndEveryLossCounted() async throws {
        let map = try #require(await settledMap())
        let prefix = uniquePrefix()
        let names = (0..<6).map { "t\($0)" }
        let traffic = try Traffic(url: TopologyEnvironment.clusterURL, topology: .cluster, prefix: prefix, names: names)
        #expect(await traffic.ready())
        let node = try #require(map.owner(ofChannel: prefix + names[0]))
        let configFile = try #require(redisInfo(node.port, "server", "config_file"))
        traffic.start()
        try await Task.sleep(for: .milliseconds(300))
        #expect(killServer(node.port))
        #expect(await rejoinSettled(configFile: configFile, port: node.port))
        #expect(
            await settles(timeout: .seconds(30)) {
                traffic.logB.values.contains {
                    if case .disconnected(let reason) = $0 { reason.contains("\(node.port)") } else { false }
                }
            })
        #expect(await traffic.ready())
        try await Task.sleep(for: .milliseconds(300))
        traffic.stop()
        traffic.post(rounds: 1)
        #expect(
            await settles { traffic.lastRoundArrived() },
            "no subscription lost: \(traffic.receivedPerName.mapValues(\.last))")
        traffic.expectEveryPostAccountedForInOrder()
        print(
            "cluster primary restarted: made \(traffic.posts), received \(traffic.receivedCount), missed \(traffic.relayB.missedPosts), dropped \(traffic.relayA.dropCounts), events \(traffic.logB.values)"
        )
        await traffic.close()
    }
}
