import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

@Suite("Liveness: a silent partition")
struct PartitionTests {
    @Test func aHealedSilentPartitionDeliversAgainAndCountsWhatWasLost() async throws {
        let proxy = try LoopbackProxy(to: RedisServer.shared)
        let prefix = uniquePrefix()
        let interval = Duration.milliseconds(200)
        var options = fastOptions
        options.pingInterval = interval
        options.connectTimeout = .milliseconds(400)
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(
            center: a, host: "127.0.0.1", port: RedisServer.shared, channelPrefix: prefix, options: options)
        let relayB = try RedisRelay(
            center: b, host: "127.0.0.1", port: proxy.port, channelPrefix: prefix, options: options)
        var events = EventReader(relayB)
        let received = Collector<Int>()
        let tokens = [relayA.relay(.chat), relayB.relay(.chat), b.subscribe(.chat) { received.append($0.seq) }]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))
        #expect(await events.next() == .connected)
        for seq in 0..<10 { a.post(.chat, Message(seq: seq, text: "")) }
        #expect(eventually { received.count == 10 })

        proxy.partition()
        for seq in 10..<20 { a.post(.chat, Message(seq: seq, text: "lost")) }
        // B notices the silence by itself (PING unanswered for two intervals).
        guard case .disconnected(let reason) = await events.next() else {
            Issue.record("no disconnection")
            return
        }
        #expect(reason.contains("PING") || reason.contains("no reply"), "\(reason)")
        proxy.heal()
        let healed = ContinuousClock.now

        // A keeps posting; B hears again.
        var seq = 20
        let back = eventually(timeout: .seconds(15)) {
            a.post(.chat, Message(seq: seq, text: ""))
            seq += 1
            Thread.sleep(forTimeInterval: 0.005)
            return (received.values.last ?? 0) >= 20
        }
        #expect(back)
        print("PartitionTests: B received again \(ContinuousClock.now - healed) after the heal (interval \(interval))")
        let values = received.values
        let last = values.last ?? 0
        #expect(values == values.sorted() && Set(values).count == values.count)
        #expect(Array(values.prefix(10)) == Array(0..<10))
        // Every post up to the last received one either arrived or was counted missed.
        #expect(values.count + relayB.missedPosts == last + 1, "\(values.count) + \(relayB.missedPosts) vs \(last)")
        #expect(relayB.missedPosts >= 10)
        withExtendedLifetime(tokens) {}
        proxy.close()
    }
}
