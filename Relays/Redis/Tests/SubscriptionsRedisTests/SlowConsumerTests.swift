import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

/// Polls `condition` until it holds or `timeout` passes, suspending between polls (a blocking wait would
/// hold one of the cooperative pool's few threads for seconds, starving other tests' event readers).
func settled(timeout: Duration = .seconds(20), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return true
}

@Suite("Liveness is judged by the server, never by handler speed")
struct SlowConsumerTests {
    /// In both modes (`historyLength` 0 and 10,000); in history mode reading waits for the handler,
    /// so nothing is missed at all.
    @Test(arguments: [0, 10_000])
    func aSlowHandlerNeverDisconnectsAndEveryPostIsReceivedOrMissed(historyLength: Int) async throws {
        // Issue 39: a 15 ms handler made the subscriber close its own connection ("no answer to PING"),
        // because the time of the last answer was taken before the handlers of a read ran.
        let prefix = uniquePrefix()
        var options = fastOptions
        // A 2 s deadline: handlers run for 4.5 s, so a reader that ran them (mutant R34) misses it
        // several times over, while a machine loaded by other test processes does not stall the
        // reader that long (with 250 ms, a 0.5 s deadline, it did, under the mutation check's load).
        options.pingInterval = .seconds(1)
        options.historyLength = historyLength
        let a = PostCenter()
        let b = PostCenter()
        let port = RedisServer.shared
        let relayA = try RedisRelay(center: a, host: "127.0.0.1", port: port, channelPrefix: prefix, options: options)
        let relayB = try RedisRelay(center: b, host: "127.0.0.1", port: port, channelPrefix: prefix, options: options)
        var events = EventReader(relayB)
        let received = Collector<Int>()
        let tokens = [
            relayA.relay(.chat), relayB.relay(.chat),
            b.subscribe(.chat) { message in
                usleep(15_000)
                received.append(message.seq)
            },
        ]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))
        #expect(await events.next() == .connected)

        // 300 posts at about 500 a second: 4.5 s of handlers, four and a half ping intervals.
        let made = 300
        for seq in 0..<made {
            a.post(.chat, Message(seq: seq, text: "slow"))
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(await settled(timeout: .seconds(60)) { received.values.last == made - 1 })
        let values = received.values
        print(
            "slow handler (historyLength \(historyLength)): made \(made), received \(values.count), missed \(relayB.missedPosts)"
        )
        #expect(values == values.sorted())
        #expect(values.count + relayB.missedPosts == made, "\(values.count) + \(relayB.missedPosts)")
        if historyLength > 0 { #expect(values == Array(0..<made) && relayB.missedPosts == 0) }
        #expect(relayA.droppedPosts == 0)
        await relayB.close()
        let rest = await events.read { _ in false }
        #expect(!rest.contains { if case .disconnected = $0 { true } else { false } }, "\(rest)")
        withExtendedLifetime(tokens) {}
    }

    @Test func aFullPendingQueueDropsTheOldestPostsCountsThemAndWarns() async throws {
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        var options = fastOptions
        options.maxPendingPosts = 10
        let center = PostCenter()
        let relay = try RedisRelay(
            center: center, host: "127.0.0.1", port: port, channelPrefix: prefix, options: options)
        var events = EventReader(relay)
        let entered = Collector<Bool>()
        let gate = DispatchSemaphore(value: 0)
        let received = Collector<Int>()
        let tokens = [
            relay.relay(.chat),
            center.subscribe(.chat) { message in
                if message.seq == 0 {
                    entered.append(true)
                    gate.wait()  // the handler stalls on the first post
                }
                received.append(message.seq)
            },
        ]
        #expect(relay.waitUntilReady(timeout: .seconds(10)))
        #expect(await events.next() == .connected)

        let t = _Wire.typed
        try publishRaw(port: port, channel: prefix + "chat", [frame(0, t, try binary(Message(seq: 0, text: "")))])
        #expect(await settled { entered.count == 1 })
        // 99 more, one post per message: 10 fit, the 89 oldest are dropped.
        try publishRaw(
            port: port, channel: prefix + "chat",
            try (1..<100).map { frame(UInt64($0), t, try binary(Message(seq: $0, text: ""))) })
        #expect(await settled { relay.missedPosts == 89 })
        #expect(await events.next() == .slowConsumer(pending: 10))
        gate.signal()
        #expect(await settled { received.count == 11 })
        #expect(received.values == [0] + Array(90..<100))
        #expect(relay.missedPosts == 89)
        #expect(relay.rejectedMessages == 0)
        withExtendedLifetime(tokens) {}
    }

    @Test func postsStillWaitingForTheirHandlersWhenTheRelayStopsAreCountedMissed() async throws {
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        let center = PostCenter()
        let relay = try RedisRelay(center: center, host: "127.0.0.1", port: port, channelPrefix: prefix)
        let entered = Collector<Bool>()
        let gate = DispatchSemaphore(value: 0)
        let received = Collector<Int>()
        let tokens = [
            relay.relay(.chat),
            center.subscribe(.chat) { message in
                if message.seq == 0 {
                    entered.append(true)
                    gate.wait()
                }
                received.append(message.seq)
            },
        ]
        #expect(relay.waitUntilReady(timeout: .seconds(10)))
        let t = _Wire.typed
        try publishRaw(port: port, channel: prefix + "chat", [frame(0, t, try binary(Message(seq: 0, text: "")))])
        #expect(await settled { entered.count == 1 })
        try publishRaw(
            port: port, channel: prefix + "chat",
            try (1...10).map { frame(UInt64($0), t, try binary(Message(seq: $0, text: ""))) })
        #expect(await settled { relay.core.deliveries.withLock { $0.pending } == 10 })
        // The relay stops while the handler still holds the first post: the 10 waiting are not
        // posted, and are counted.
        let closing = Task { await relay.close() }
        #expect(await settled { relay.core.stopping.load(ordering: .relaxed) })
        gate.signal()
        await closing.value
        #expect(received.values == [0])
        #expect(relay.missedPosts == 10)
        withExtendedLifetime(tokens) {}
    }

    @Test func thePendingQueueDropsWholeOldestMessagesAndWarnsAtMostOnceASecond() {
        let inbound = _Inbound(kind: _Wire.typed) { _, _ in
            nil
        } decodeBatch: { _ in
            nil
        }
        func entry(_ posts: Int) -> _Deliveries.Entry { _Deliveries.Entry(inbound: inbound, posts: posts) {} }
        var queue = _Deliveries(limit: 10)
        let start = ContinuousClock.now
        #expect(queue.push(entry(4), now: start) == (0, false))
        #expect(queue.push(entry(4), now: start) == (0, false))
        #expect(queue.push(entry(3), now: start) == (4, true))  // 4 + 4 + 3 > 10: the oldest goes
        #expect(queue.pending == 7)
        #expect(queue.push(entry(4), now: start + .milliseconds(999)) == (4, false))  // warned < 1 s ago
        #expect(queue.push(entry(64), now: start + .seconds(1)) == (7, true))  // alone, over the limit
        #expect(queue.pending == 64)
        #expect(queue.pop()?.posts == 64)
        #expect(queue.pop() == nil)
        #expect(queue.push(entry(2), now: start + .seconds(2)) == (0, false))
        #expect(queue.clear() == 2)
    }
}
