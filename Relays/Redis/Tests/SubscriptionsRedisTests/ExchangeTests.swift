import Foundation
import Subscriptions
import SubscriptionsRedis
import Testing

/// Two centers in one process, each with its own relay (and its own two connections).
struct Pair {
    let a = PostCenter()
    let b = PostCenter()
    let relayA: RedisRelay
    let relayB: RedisRelay

    init(port: Int = RedisServer.shared, prefix: String) throws {
        relayA = try RedisRelay(center: a, host: "127.0.0.1", port: port, channelPrefix: prefix, options: fastOptions)
        relayB = try RedisRelay(center: b, host: "127.0.0.1", port: port, channelPrefix: prefix, options: fastOptions)
    }

    func waitUntilReady() -> Bool {
        relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10))
    }
}

@Suite("Relays exchange posts through Redis")
struct ExchangeTests {
    @Test func typedPostsArriveOnTheOtherCenterInPostingOrder() throws {
        let pair = try Pair(prefix: uniquePrefix())
        let tokens = [pair.relayA.relay(.chat), pair.relayB.relay(.chat)]
        let received = Collector<Message>()
        let local = pair.b.subscribe(.chat) { received.append($0) }
        #expect(pair.waitUntilReady())

        let sent = (0..<500).map { Message(seq: $0, text: "message \($0) ünïcödé") }
        for message in sent { pair.a.post(.chat, message) }

        #expect(eventually { received.count >= sent.count })
        #expect(received.values == sent)
        #expect(pair.relayA.droppedPosts == 0)
        #expect(pair.relayB.rejectedMessages == 0)
        withExtendedLifetime((tokens, local)) {}
    }

    @Test func bothRelaysPublishAndReceiveOnTheSameName() throws {
        let pair = try Pair(prefix: uniquePrefix())
        let tokens = [pair.relayA.relay(.chat), pair.relayB.relay(.chat)]
        let atA = Collector<Message>()
        let atB = Collector<Message>()
        let locals = [pair.a.subscribe(.chat) { atA.append($0) }, pair.b.subscribe(.chat) { atB.append($0) }]
        #expect(pair.waitUntilReady())

        pair.a.post(.chat, Message(seq: 1, text: "from a"))
        #expect(eventually { atB.count == 1 })
        pair.b.post(.chat, Message(seq: 2, text: "from b"))
        #expect(eventually { atA.count == 2 })

        #expect(atA.values.map(\.seq) == [1, 2])
        #expect(atB.values.map(\.seq) == [1, 2])
        withExtendedLifetime((tokens, locals)) {}
    }

    @Test func plainPostsCarryTheFlagButNotTheData() throws {
        let pair = try Pair(prefix: uniquePrefix())
        let tokens = [pair.relayA.relay("theme"), pair.relayB.relay("theme")]
        let flags = Collector<String>()
        let withData = Collector<Bool>()
        let local = pair.b.subscribe("theme") { post in
            flags.append(post.flag)
            withData.append(post.data != nil)
        }
        #expect(pair.waitUntilReady())

        let object = NSObject()
        for flag in ["dark", "", "light", "high contrast ✓"] { pair.a.post("theme", flag: flag, data: object) }

        #expect(eventually { flags.count >= 4 })
        #expect(flags.values == ["dark", "", "light", "high contrast ✓"])
        #expect(withData.values == [false, false, false, false])
        withExtendedLifetime((tokens, local, object)) {}
    }

    @Test func relaysWithAnotherPrefixDoNotMeet() throws {
        let prefix = uniquePrefix()
        let pair = try Pair(prefix: prefix)
        let other = PostCenter()
        let otherRelay = try RedisRelay(
            center: other, host: "127.0.0.1", port: RedisServer.shared, channelPrefix: prefix + "other:")
        let tokens = [pair.relayA.relay(.chat), pair.relayB.relay(.chat), otherRelay.relay(.chat)]
        let atB = Collector<Int>()
        let atOther = Collector<Int>()
        let locals = [
            pair.b.subscribe(.chat) { atB.append($0.seq) }, other.subscribe(.chat) { atOther.append($0.seq) },
        ]
        #expect(pair.waitUntilReady() && otherRelay.waitUntilReady(timeout: .seconds(10)))

        pair.a.post(.chat, Message(seq: 1, text: ""))
        other.post(.chat, Message(seq: 2, text: ""))
        pair.a.post(.chat, Message(seq: 3, text: ""))

        // Redis delivers A's posts to B in order; the other app's post, published between them,
        // would have reached B before seq 3 had the prefixes not kept them apart.
        #expect(eventually { atB.count >= 2 })
        #expect(atB.values == [1, 3])
        #expect(atOther.values == [2])
        withExtendedLifetime((tokens, locals)) {}
    }
}
