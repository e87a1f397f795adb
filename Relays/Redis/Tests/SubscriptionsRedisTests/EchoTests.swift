import Foundation
import Subscriptions
import SubscriptionsRedis
import Testing

/// The fence: a name both relays relay. Redis delivers everything published before it (by the
/// same connection, or earlier by any) to a subscriber first, so once the fence arrives, an echo
/// would have arrived too.
let fence = "fence"

@Suite("No echo between relays")
struct EchoTests {
    @Test func aRelayDoesNotReceiveItsOwnPostsBack() throws {
        let pair = try Pair(prefix: uniquePrefix())
        let tokens = [pair.relayA.relay(.chat), pair.relayA.relay(fence), pair.relayB.relay(fence)]
        let atA = Collector<Int>()
        let fences = Collector<String>()
        let locals = [
            pair.a.subscribe(.chat) { atA.append($0.seq) }, pair.a.subscribe(fence) { fences.append($0.flag) },
        ]
        #expect(pair.waitUntilReady())

        for seq in 0..<10 { pair.a.post(.chat, Message(seq: seq, text: "")) }
        #expect(eventually { pair.relayA.publishedPosts == 10 })
        pair.b.post(fence, flag: "done")

        #expect(eventually { fences.count >= 1 })
        #expect(fences.values == ["done"])
        #expect(atA.values == Array(0..<10))  // the local posts only, once each
        withExtendedLifetime((tokens, locals)) {}
    }

    @Test func aPostReceivedFromRedisIsNeverPublishedAgain() throws {
        let pair = try Pair(prefix: uniquePrefix())
        let tokens = [
            pair.relayA.relay(.chat), pair.relayB.relay(.chat), pair.relayA.relay(fence), pair.relayB.relay(fence),
        ]
        let atA = Collector<Int>()
        let atB = Collector<Int>()
        let fences = Collector<String>()
        let locals = [
            pair.a.subscribe(.chat) { atA.append($0.seq) }, pair.b.subscribe(.chat) { atB.append($0.seq) },
            pair.a.subscribe(fence) { fences.append($0.flag) },
        ]
        #expect(pair.waitUntilReady())

        pair.a.post(.chat, Message(seq: 7, text: ""))
        #expect(eventually { atB.count >= 1 })
        // Had B re-published the post, its publisher would have sent it before this fence.
        pair.b.post(fence, flag: "done")

        #expect(eventually { fences.count >= 1 })
        #expect(fences.values == ["done"])
        #expect(atA.values == [7])
        #expect(atB.values == [7])
        withExtendedLifetime((tokens, locals)) {}
    }

    @Test func aPostMadeOnTheSameNameInsideAReceivedPostStaysLocal() throws {
        let pair = try Pair(prefix: uniquePrefix())
        let tokens = [
            pair.relayA.relay(.chat), pair.relayB.relay(.chat), pair.relayA.relay(fence), pair.relayB.relay(fence),
        ]
        let atA = Collector<Int>()
        let atB = Collector<Int>()
        let fences = Collector<String>()
        // B answers every chat with a chat: relayed, this would ping-pong between the processes.
        let answer = pair.b.subscribe(.chat) { message in
            atB.append(message.seq)
            if message.seq < 100 { pair.b.post(.chat, Message(seq: message.seq + 100, text: "")) }
        }
        let locals = [
            pair.a.subscribe(.chat) { atA.append($0.seq) }, pair.a.subscribe(fence) { fences.append($0.flag) },
        ]
        #expect(pair.waitUntilReady())

        pair.a.post(.chat, Message(seq: 1, text: ""))
        #expect(eventually { atB.count >= 2 })
        pair.b.post(fence, flag: "done")

        #expect(eventually { fences.count >= 1 })
        #expect(fences.values == ["done"])
        #expect(atB.values == [1, 101])
        #expect(atA.values == [1])
        withExtendedLifetime((tokens, locals, answer)) {}
    }
}
