import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

/// How many posts each of `messages` carries (as another relay parses them; 0: not a post).
private func postCounts(_ messages: [[UInt8]]) -> [Int] {
    messages.map { message in
        message.withUnsafeBytes { bytes in
            switch _Wire.parse(bytes, ownHeader: _Wire.header(origin: 1)) {
            case .mine, .foreign, .announcement: return 0
            case .post: return 1
            case .batch(let batch): return batch.count
            }
        }
    }
}

@Suite("Queued posts of one name ride one message")
struct CoalescingTests {
    @Test func aBurstOfTypedAndPlainPostsArrivesCompleteAndInOrder() throws {
        let pair = try Pair(prefix: uniquePrefix())
        let tokens = [
            pair.relayA.relay(.chat), pair.relayB.relay(.chat), pair.relayA.relay("n"), pair.relayB.relay("n"),
            pair.relayA.relay(fence), pair.relayB.relay(fence),
        ]
        let chats = Collector<Message>()
        let flags = Collector<String>()
        let fences = Collector<String>()
        let locals = [
            pair.b.subscribe(.chat) { chats.append($0) }, pair.b.subscribe("n") { flags.append($0.flag) },
            pair.b.subscribe(fence) { fences.append($0.flag) },
        ]
        #expect(pair.waitUntilReady())

        let count = 20_000
        let sent = (0..<count).map { Message(seq: $0, text: "burst \($0)") }
        for message in sent { pair.a.post(.chat, message) }
        for seq in 0..<count { pair.a.post("n", flag: String(seq)) }
        // Posts of one relay arrive in post order (README, "Order per sender"): once this one
        // arrived, every post of the burst that arrives at all has arrived.
        pair.a.post(fence, flag: "sent")

        #expect(eventually { fences.count >= 1 })
        #expect(fences.values.first == "sent")
        #expect(chats.values == sent)
        #expect(flags.values == (0..<count).map(String.init))
        #expect(eventually { pair.relayA.publishedPosts == 2 * count + 1 })  // and the fence
        #expect(pair.relayA.droppedPosts == 0)
        #expect(pair.relayB.rejectedMessages == 0)
        // B relays both names too, but never publishes what it received: had it re-published the
        // batches' posts, they would have been acknowledged before this fence.
        pair.b.post(fence, flag: "done")
        #expect(eventually { pair.relayB.publishedPosts + pair.relayB.droppedPosts >= 1 })
        #expect(pair.relayB.publishedPosts == 1)
        #expect(pair.relayB.droppedPosts == 0)
        withExtendedLifetime((tokens, locals)) {}
    }

    @Test func runsOfThreeNamesKeepTheirGlobalOrder() throws {
        let pair = try Pair(prefix: uniquePrefix())
        let tokens = [
            pair.relayA.relay(.chat), pair.relayB.relay(.chat), pair.relayA.relay(.reply), pair.relayB.relay(.reply),
            pair.relayA.relay("n"), pair.relayB.relay("n"),
        ]
        let log = Collector<String>()
        let locals = [
            pair.b.subscribe(.chat) { log.append("c\($0.seq)") }, pair.b.subscribe(.reply) { log.append("r\($0.seq)") },
            pair.b.subscribe("n") { log.append("n\($0.flag)") },
        ]
        #expect(pair.waitUntilReady())

        // Two typed names (same kind: only the channel tells their posts apart) and a plain one.
        var expected: [String] = []
        var seq = 0
        for (round, run) in [1, 70, 3, 130, 2, 64, 65, 1, 1, 200, 5].cycled(to: 20_000).enumerated() {
            for _ in 0..<run {
                switch round % 3 {
                case 0:
                    pair.a.post(.chat, Message(seq: seq, text: ""))
                    expected.append("c\(seq)")
                case 1:
                    pair.a.post(.reply, Message(seq: seq, text: ""))
                    expected.append("r\(seq)")
                default:
                    pair.a.post("n", flag: String(seq))
                    expected.append("n\(seq)")
                }
                seq += 1
            }
        }

        #expect(eventually { log.count >= expected.count })
        #expect(log.values == expected)
        #expect(eventually { pair.relayA.publishedPosts == expected.count })
        #expect(pair.relayB.rejectedMessages == 0)
        withExtendedLifetime((tokens, locals)) {}
    }

    /// With one command in flight at most, every post made while the server is frozen waits in the
    /// queue, so how they are packed does not depend on timing: runs of one name, at most 64 each.
    @Test func postsQueuedBehindACommandRideFewMessagesAndCountAsPosts() throws {
        let server = try RedisServer()
        let prefix = uniquePrefix()
        var options = fastOptions
        options.pipelineDepth = 1
        options.connectTimeout = .seconds(30)  // the server is frozen on purpose: no reconnection
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(
            center: a, host: "127.0.0.1", port: server.port, channelPrefix: prefix, options: options)
        let relayB = try RedisRelay(center: b, host: "127.0.0.1", port: server.port, channelPrefix: prefix)
        let tokens = [
            relayA.relay(.chat), relayB.relay(.chat), relayA.relay(.reply), relayB.relay(.reply), relayA.relay("n"),
            relayB.relay("n"),
        ]
        let log = Collector<String>()
        let locals = [
            b.subscribe(.chat) { log.append("c\($0.seq)") }, b.subscribe(.reply) { log.append("r\($0.seq)") },
            b.subscribe("n") { log.append("n\($0.flag)") },
        ]
        let raw = try RawSubscriber(port: server.port, channels: [prefix + "chat", prefix + "reply", prefix + "n"])
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))

        server.freeze(true)
        var expected: [String] = []
        for seq in 0..<130 {
            a.post(.chat, Message(seq: seq, text: ""))
            expected.append("c\(seq)")
        }
        for seq in 130..<133 {
            a.post(.reply, Message(seq: seq, text: ""))
            expected.append("r\(seq)")
        }
        for seq in 133..<135 {
            a.post("n", flag: String(seq))
            expected.append("n\(seq)")
        }
        for seq in 135..<137 {
            a.post(.chat, Message(seq: seq, text: ""))
            expected.append("c\(seq)")
        }
        server.freeze(false)

        #expect(eventually { log.count >= expected.count })
        #expect(log.values == expected)
        #expect(eventually { relayA.publishedPosts == expected.count })
        #expect(relayA.droppedPosts == 0)
        #expect(relayB.rejectedMessages == 0)
        #expect(raw.receive { postCounts($0).reduce(0, +) >= expected.count })
        let counts = postCounts(raw.messages)
        #expect(counts.reduce(0, +) == expected.count)
        #expect(counts.allSatisfy { (1...64).contains($0) }, "\(counts)")
        // The first command takes what was queued when the publisher woke (1 to 64 chat posts);
        // the rest waited for its reply: the other chat posts in 64s, then the 3 replies, the 2
        // plain posts and the last 2 chats.
        #expect((6...7).contains(counts.count), "\(counts)")
        #expect(Array(counts.suffix(3)) == [3, 2, 2], "\(counts)")
        withExtendedLifetime((tokens, locals, server)) {}
    }
}

extension Array {
    /// The elements repeated in order until their running total (of `Int` elements) reaches `total`;
    /// the last one is cut to fit.
    func cycled(to total: Int) -> [Int] where Element == Int {
        var result: [Int] = []
        var sum = 0
        while sum < total {
            for value in self where sum < total {
                result.append(Swift.min(value, total - sum))
                sum += result.last!
            }
        }
        return result
    }
}
