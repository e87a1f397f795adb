import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

/// History mode (`historyLength` > 0) on the real topologies: in the cluster suite and the Sentinel
/// suite (extensions, so that they are serialized with the other faults of their topology).
extension ClusterTests {
    /// A history long enough for every post of a test: nothing is trimmed before it is read.
    static let history = 100_000

    /// The slot map once every live node says `cluster_state:ok` and the same map, and every
    /// primary of it answers: an earlier fault's failover is over (a node that has not heard of it
    /// would send a relay to a dead primary). Waits at most 30 s. Also used by
    /// ClusterRetainedTests.
    func settledMap() async -> _SlotMap? {
        var agreed: _SlotMap?
        let settled = await settles(timeout: .seconds(30)) {
            let maps = (TopologyEnvironment.clusterPorts ?? []).compactMap { port -> _SlotMap? in
                guard let reply = redisCall(port, ["CLUSTER", "SLOTS"]) else { return nil }  // a killed node
                return _SlotMap(clusterSlots: reply, asked: _Address(host: "127.0.0.1", port: port))
            }
            guard clusterIsOK(), let first = maps.first, first.isComplete, maps.allSatisfy({ $0 == first }),
                first.primaries.allSatisfy({ redisCall($0.port, ["PING"]) != nil })
            else { return false }
            agreed = first
            return true
        }
        return settled ? agreed : nil
    }

    /// The cluster's URL with every node that answers as a seed: the two seeds of
    /// `TopologyEnvironment.clusterURL` may both have been killed by earlier faults. Also used by
    /// ClusterRetainedTests.
    /// `rejoin`, then a map every node agrees on (what `redis-cli --cluster reshard`, in a later
    /// test, checks first): a failover's new epochs take a moment to reach every node.
    func rejoinSettled(configFile: String, port: Int) async -> Bool {
        guard await rejoin(configFile: configFile, port: port) else { return false }
        return await settledMap() != nil
    }

    var liveClusterURL: String {
        let live = (TopologyEnvironment.clusterPorts ?? []).filter { redisCall($0, ["PING"]) != nil }
        return "redis://" + live.map { "127.0.0.1:\($0)" }.joined(separator: ",")
    }

    /// Whether the primary on `port` has a replica connected (one that can take over).
    private func hasReplica(_ port: Int) -> Bool {
        (redisInfo(port, "replication", "connected_slaves").flatMap { Int($0) } ?? 0) > 0
    }

    /// A name (with `prefix`) whose slot `owner` owns.
    private func name(ownedBy owner: _Address, in map: _SlotMap, prefix: String, _ stem: String) -> String? {
        (0..<100_000).lazy.map { "\(stem)\($0)" }.first { map.owner(ofChannel: prefix + $0) == owner }
    }

    /// Each stream is appended to on the primary that owns its name's slot (XADD counted per node,
    /// and the stream is a key there: XLEN), every post arrives once, and a relay holds at most 2
    /// connections per primary.
    @Test func historyModeAppendsAndReadsEachStreamOnItsOwner() async throws {
        let map = try #require(await settledMap())
        let primaries = map.primaries.sorted { $0.port < $1.port }
        let prefix = uniquePrefix()
        // One name on each primary.
        var names: [String] = []
        for (index, primary) in primaries.enumerated() {
            names.append(try #require(name(ownedBy: primary, in: map, prefix: prefix, "o\(index)-")))
        }
        let clientsBefore = primaries.map {
            redisInfo($0.port, "clients", "connected_clients").flatMap { Int($0) } ?? 0
        }
        let addsBefore = primaries.map { redisCalls($0.port, "xadd") }
        let traffic = try Traffic(
            url: liveClusterURL, topology: .cluster, prefix: prefix, names: names,
            historyLength: Self.history)
        #expect(await traffic.ready())
        let clientsAfter = primaries.map { redisInfo($0.port, "clients", "connected_clients").flatMap { Int($0) } ?? 0 }
        for (before, after) in zip(clientsBefore, clientsAfter) { #expect(after - before <= 4, "\(before) → \(after)") }
        let rounds = 50
        traffic.post(rounds: rounds)
        #expect(await settles { traffic.receivedCount == rounds * names.count })
        #expect(traffic.relayB.missedPosts == 0)
        traffic.expectEveryPostAccountedForInOrder()
        for (index, primary) in primaries.enumerated() {
            // Each XADD carries one post or a batch of one name's: at least one, at most `rounds`
            // (and the two initializers' probes, `XADD <prefix> NOMKSTREAM`, on the prefix's owner).
            let adds = redisCalls(primary.port, "xadd") - addsBefore[index]
            #expect((1...rounds + 2).contains(adds), "\(primary): \(adds) XADDs")
            let length = redisCall(primary.port, ["XLEN", prefix + names[index]])?.number ?? -1
            #expect((1...rounds).contains(length), "\(primary): XLEN \(length)")
        }
        await traffic.close()
    }

    /// A primary killed during traffic in history mode (its replica is promoted): the streams read
    /// there are read on from where they stopped on the new primary; the sender drops nothing (what
    /// the killed primary never answered is sent again to the new one, posts made meanwhile wait);
    /// every post is received once or counted missed (acknowledged by the killed primary and lost by
    /// asynchronous replication), in order, none twice.
    @Test func historyModeFollowsAKilledPrimaryAndAccountsForEveryPost() async throws {
        let map = try #require(await settledMap())
        // A primary with a replica to take over (an earlier fault may have left one without).
        let victim = try #require(map.primaries.sorted { $0.port < $1.port }.first { hasReplica($0.port) })
        let configFile = try #require(redisInfo(victim.port, "server", "config_file"))
        let prefix = uniquePrefix()
        let names = [try #require(name(ownedBy: victim, in: map, prefix: prefix, "hk"))] + (0..<5).map { "hl\($0)" }
        let traffic = try Traffic(
            url: liveClusterURL, topology: .cluster, prefix: prefix, names: names,
            historyLength: Self.history)
        #expect(await traffic.ready())
        traffic.start()
        try await Task.sleep(for: .milliseconds(300))
        #expect(killServer(victim.port))
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
            "no stream left unread: \(traffic.receivedPerName.mapValues(\.last))")
        traffic.expectEveryPostAccountedForInOrder()
        // The XADDs that every node refused with CLUSTERDOWN until the replica took over, those
        // answered -MOVED and those the killed primary never answered were sent again, and posts for
        // it waited: none dropped. What is missed is what it acknowledged and did not replicate.
        #expect(traffic.relayA.droppedPosts == 0, "\(traffic.relayA.dropCounts)")
        print(
            "cluster history, primary killed: made \(traffic.posts), received \(traffic.receivedCount), missed \(traffic.relayB.missedPosts), recovered \(traffic.relayB.recoveredPosts), dropped \(traffic.relayA.dropCounts), events \(traffic.logB.values)"
        )
        await traffic.close()
        #expect(await rejoinSettled(configFile: configFile, port: victim.port), "the killed node back as a replica")
    }

    /// `redis-cli --cluster reshard` moves a relayed name's slot, and with it its stream, during
    /// traffic in history mode: the publisher sends a redirected XADD again to the new owner, the
    /// reader reads on there from where it stopped; every post is received, once, in order, none
    /// missed.
    @Test func historyModeFollowsAReshardAndDeliversEveryAcknowledgedPost() async throws {
        let map = try #require(await settledMap())
        let source = try #require(map.primaries.sorted { $0.port < $1.port }.first)
        let target = try #require(map.primaries.sorted { $0.port < $1.port }.last)
        let prefix = uniquePrefix()
        let owned = (0..<_ClusterSlot.count).filter { map.owner(of: $0) == source }.prefix(40)
        let moving = try #require(
            (0..<100_000).lazy.map { "hr\($0)" }.first { owned.contains(_ClusterSlot.of(prefix + $0)) })
        let count = owned.firstIndex(of: _ClusterSlot.of(prefix + moving))! - owned.startIndex + 1
        let names = [moving] + (0..<5).map { "hs\($0)" }
        let traffic = try Traffic(
            url: liveClusterURL, topology: .cluster, prefix: prefix, names: names,
            historyLength: Self.history)
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
            "no stream left unread: \(traffic.receivedPerName.mapValues(\.last))")
        traffic.expectEveryPostAccountedForInOrder()
        // The stream moved with its slot: it is on the target now, whole.
        #expect((redisCall(target.port, ["XLEN", prefix + moving])?.number ?? 0) > 0)
        let drops = traffic.relayA.dropCounts
        let missed = traffic.relayB.missedPosts
        // An XADD that met the move (-ASK while the key migrated, -MOVED after) was sent again to
        // the new owner: nothing refused, nothing missed, every post made received.
        #expect(missed == 0 && drops.total == 0, "missed \(missed), \(drops)")
        #expect(traffic.receivedCount == traffic.posts)
        print(
            "cluster history reshard (\(count) slots): made \(traffic.posts), received \(traffic.receivedCount), missed \(missed), recovered \(traffic.relayB.recoveredPosts), dropped \(drops), events \(traffic.logB.values)"
        )
        await traffic.close()
    }
}

extension SentinelTests {
    /// A Sentinel failover during traffic in history mode: both relays move to the new primary and
    /// read on from where they stopped (the promoted replica has the streams); every post is received
    /// once or counted missed, in order, none twice.
    @Test func historyModeFollowsAFailoverAndAccountsForEveryPost() async throws {
        let sentinel = try #require(TopologyEnvironment.sentinelPorts?.first)
        let primary = {
            redisCall(sentinel, ["SENTINEL", "get-master-addr-by-name", TopologyEnvironment.masterName])
                .flatMap(_Sentinel.primary(from:))
        }
        let old = try #require(primary())
        let prefix = uniquePrefix()
        let traffic = try Traffic(
            url: TopologyEnvironment.sentinelURL, topology: .sentinel(masterName: TopologyEnvironment.masterName),
            prefix: prefix, names: ["x", "y", "z"], historyLength: ClusterTests.history)
        #expect(await traffic.ready())
        traffic.start()
        try await Task.sleep(for: .milliseconds(300))
        let answer = redisCall(sentinel, ["SENTINEL", "FAILOVER", TopologyEnvironment.masterName])
        #expect(answer == .string(Array("OK".utf8)), "\(String(describing: answer))")
        #expect(await settles(timeout: .seconds(30)) { primary().map { $0 != old } ?? false })
        let new = try #require(primary())
        #expect(
            await settles(timeout: .seconds(30)) {
                traffic.logB.values.contains {
                    if case .disconnected(let reason) = $0 { reason.hasPrefix("\(old):") } else { false }
                }
            })
        #expect(await traffic.ready())
        try await Task.sleep(for: .milliseconds(300))
        traffic.stop()
        // Appended on the new primary from now on.
        let before = redisCalls(new.port, "xadd")
        traffic.post(rounds: 1)
        #expect(
            await settles { traffic.lastRoundArrived() },
            "no stream left unread: \(traffic.receivedPerName.mapValues(\.last))")
        #expect(redisCalls(new.port, "xadd") - before >= 1)
        #expect((redisCall(new.port, ["XLEN", prefix + "x"])?.number ?? 0) > 0)
        traffic.expectEveryPostAccountedForInOrder()
        print(
            "sentinel history failover \(old) → \(new): made \(traffic.posts), received \(traffic.receivedCount), "
                + "missed \(traffic.relayB.missedPosts), recovered \(traffic.relayB.recoveredPosts), "
                + "dropped \(traffic.relayA.dropCounts), events \(traffic.logB.values)"
        )
        await traffic.close()
    }
}

extension ClusterTests {
    /// History mode: a primary frozen (SIGSTOP) for 3 s, twice, with the cluster's node timeout
    /// raised for the test (no failover). First while the relay is idle: it gives its connection up
    /// (its PING unanswered), and posts made for that primary meanwhile find it without a
    /// connection: they wait at the head of the queue. Then with posts in flight to it: they are
    /// not answered, the connection is given up, and they are sent again once it answers, after
    /// waiting for a connection to it. Every post arrives, once, in order; nothing is dropped.
    @Test func historyModeKeepsThePostsForAnUnreachablePrimaryUntilItAnswers() async throws {
        let map = try #require(await settledMap())
        let victim = try #require(map.primaries.sorted { $0.port < $1.port }.first)
        let live = (TopologyEnvironment.clusterPorts ?? []).filter { redisCall($0, ["PING"]) != nil }
        for port in live { _ = redisCall(port, ["CONFIG", "SET", "cluster-node-timeout", "20000"]) }
        defer { for port in live { _ = redisCall(port, ["CONFIG", "SET", "cluster-node-timeout", "2000"]) } }
        let prefix = uniquePrefix()
        let names = [try #require(name(ownedBy: victim, in: map, prefix: prefix, "fz"))] + ["fy0", "fy1"]
        // PINGs every 200 ms: an idle connection to a silent primary is given up within about 0.6 s.
        let traffic = try Traffic(
            url: liveClusterURL, topology: .cluster, prefix: prefix, names: names, historyLength: Self.history,
            pingInterval: .milliseconds(200))
        #expect(await traffic.ready())
        traffic.post(rounds: 5)
        #expect(await settles { traffic.receivedCount == 5 * names.count })
        let pid = try #require(redisInfo(victim.port, "server", "process_id").flatMap { Int32($0) })
        var frozen = false
        defer { if frozen { kill(pid, SIGCONT) } }

        // Idle: given up at about 0.6 s; the map read and the connection tried again each wait 0.5 s
        // for it; the posts made at 1.5 s find no connection to it.
        frozen = kill(pid, SIGSTOP) == 0
        #expect(frozen)
        try await Task.sleep(for: .milliseconds(1500))
        traffic.post(rounds: 10)
        try await Task.sleep(for: .milliseconds(1500))
        kill(pid, SIGCONT)
        frozen = false
        #expect(await settles(timeout: .seconds(30)) { traffic.lastRoundArrived() })

        // In flight: posted right after the freeze, unanswered, given up at about 0.4 s, and sent again
        // once a connection to it is made (tried again and again while it is frozen).
        frozen = kill(pid, SIGSTOP) == 0
        traffic.post(rounds: 10)
        try await Task.sleep(for: .milliseconds(3000))
        kill(pid, SIGCONT)
        frozen = false
        #expect(await settles(timeout: .seconds(30)) { traffic.lastRoundArrived() })

        traffic.expectEveryPostAccountedForInOrder()
        #expect(
            traffic.receivedPerName == Dictionary(uniqueKeysWithValues: names.map { ($0, Array(0..<25)) }),
            "\(traffic.receivedPerName.mapValues(\.count))")
        #expect(
            traffic.relayA.droppedPosts == 0 && traffic.relayB.missedPosts == 0,
            "dropped \(traffic.relayA.dropCounts), missed \(traffic.relayB.missedPosts)")
        await traffic.close()
    }
}
