import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

/// The relay on a real Sentinel set (a primary, a replica, 3 sentinels) that
/// `Scripts/relay-topology-tests.sh` starts; skipped without it.
@Suite("Sentinel: the primary found and followed", .serialized, .enabled(if: TopologyEnvironment.sentinelPorts != nil))
struct SentinelTests {
    /// The primary the first sentinel names.
    private func currentPrimary() -> _Address? {
        let port = TopologyEnvironment.sentinelPorts?.first ?? 0
        return redisCall(port, ["SENTINEL", "get-master-addr-by-name", TopologyEnvironment.masterName])
            .flatMap(_Sentinel.primary(from:))
    }

    /// The relay talks to the primary the sentinels name, not to a sentinel or the replica: both
    /// relays' subscriptions are on the primary (PUBSUB NUMSUB), and their posts arrive through it.
    @Test func theRelayUsesThePrimaryTheSentinelsName() async throws {
        let primary = try #require(currentPrimary())
        let prefix = uniquePrefix()
        let traffic = try Traffic(
            url: TopologyEnvironment.sentinelURL, topology: .sentinel(masterName: TopologyEnvironment.masterName),
            prefix: prefix, names: ["a", "b"])
        #expect(await traffic.ready())
        let subscribers = redisCall(primary.port, ["PUBSUB", "NUMSUB", prefix + "a"])?.elements?.last?.number
        #expect(subscribers == 2)
        traffic.post(rounds: 10)
        #expect(await settles { traffic.receivedCount == 20 })
        #expect(traffic.relayB.missedPosts == 0 && traffic.relayA.droppedPosts == 0)
        await traffic.close()
    }

    /// An unknown master name is said at once, naming a sentinel.
    @Test func anUnknownMasterNameThrowsUnreachable() {
        var options = fastOptions
        options.topology = .sentinel(masterName: "no-such-primary")
        #expect {
            _ = try RedisRelay(center: PostCenter(), url: TopologyEnvironment.sentinelURL, options: options)
        } throws: { error in
            guard case RedisRelayError.unreachable(_, _, let reason) = error else { return false }
            return reason.contains("no-such-primary")
        }
    }

    /// A failover during traffic (SENTINEL FAILOVER: the replica is promoted, the old primary
    /// demoted): both relays move to the new primary, lose no subscription, and every post is
    /// received or counted.
    @Test func aFailoverDuringTrafficIsFollowedAndEveryLossCounted() async throws {
        let old = try #require(currentPrimary())
        let traffic = try Traffic(
            url: TopologyEnvironment.sentinelURL, topology: .sentinel(masterName: TopologyEnvironment.masterName),
            prefix: uniquePrefix(), names: ["x", "y", "z"])
        #expect(await traffic.ready())
        traffic.start()
        try await Task.sleep(for: .milliseconds(300))
        let sentinel = try #require(TopologyEnvironment.sentinelPorts?.first)
        let answer = redisCall(sentinel, ["SENTINEL", "FAILOVER", TopologyEnvironment.masterName])
        #expect(answer == .string(Array("OK".utf8)), "\(String(describing: answer))")
        // Bounded waits for the sentinels and the relays, not timings.
        #expect(await settles(timeout: .seconds(30)) { currentPrimary().map { $0 != old } ?? false })
        let new = try #require(currentPrimary())
        #expect(
            await settles(timeout: .seconds(30)) {
                traffic.logB.values.contains {
                    if case .disconnected(let reason) = $0 { reason.hasPrefix("\(old):") } else { false }
                }
            })
        #expect(await traffic.ready())
        try await Task.sleep(for: .milliseconds(300))
        traffic.stop()
        // Published on the new primary from now on.
        let before = redisCalls(new.port, "publish")
        traffic.post(rounds: 1)
        #expect(
            await settles { traffic.lastRoundArrived() },
            "no subscription lost: \(traffic.receivedPerName.mapValues(\.last))")
        #expect(redisCalls(new.port, "publish") - before >= 1)
        traffic.expectEveryPostAccountedForInOrder()
        print(
            "sentinel failover \(old) → \(new): made \(traffic.posts), received \(traffic.receivedCount), "
                + "missed \(traffic.relayB.missedPosts), dropped \(traffic.relayA.dropCounts), events \(traffic.logB.values)"
        )
        await traffic.close()
    }
}
