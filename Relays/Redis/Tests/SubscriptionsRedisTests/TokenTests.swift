import Foundation
import Subscriptions
import SubscriptionsRedis
import Testing

@Suite("The relay token's lifetime")
struct TokenTests {
    @Test func droppingTheTokenStopsBothDirections() throws {
        let pair = try Pair(prefix: uniquePrefix())
        var chatAtA: Subscription? = pair.relayA.relay(.chat)
        let tokens = [pair.relayB.relay(.chat), pair.relayA.relay(fence), pair.relayB.relay(fence)]
        let atA = Collector<Int>()
        let atB = Collector<Int>()
        let fencesAtA = Collector<String>()
        let fencesAtB = Collector<String>()
        let locals = [
            pair.a.subscribe(.chat) { atA.append($0.seq) }, pair.b.subscribe(.chat) { atB.append($0.seq) },
            pair.a.subscribe(fence) { fencesAtA.append($0.flag) },
            pair.b.subscribe(fence) { fencesAtB.append($0.flag) },
        ]
        #expect(pair.waitUntilReady())
        pair.a.post(.chat, Message(seq: 1, text: ""))
        #expect(eventually { atB.count == 1 })

        #expect(chatAtA != nil)
        chatAtA = nil

        pair.a.post(.chat, Message(seq: 2, text: ""))  // local only now
        pair.a.post(fence, flag: "a")  // sent after seq 2 would have been
        pair.b.post(.chat, Message(seq: 3, text: ""))  // no longer reaches A
        pair.b.post(fence, flag: "b")

        // Each center also sees its own fence, locally; wait for the other's.
        #expect(eventually { Set(fencesAtA.values) == ["a", "b"] && Set(fencesAtB.values) == ["a", "b"] })
        #expect(atA.values == [1, 2])
        #expect(atB.values == [1, 3])
        #expect(pair.relayA.waitUntilReady(timeout: .seconds(10)))  // ready again without the channel
        withExtendedLifetime((tokens, locals)) {}
    }

    @Test func aRelayTokenRecordsItsCallersSite() throws {
        let center = PostCenter()
        let relay = try RedisRelay(
            center: center, host: "127.0.0.1", port: RedisServer.shared, channelPrefix: uniquePrefix())
        let line = #line + 1
        let tokens = [relay.relay(.chat), relay.relay("theme")]
        for name in ["chat", "theme"] {
            let sites = center.subscriptionSites(for: name)
            #expect(sites.map(\.fileID) == [#fileID] && sites.map(\.line) == [line], "\(sites)")
        }
        withExtendedLifetime(tokens) {}
    }

    @Test func relayingANameTwiceStopsWithAMessage() async throws {
        let result = try await #require(
            processExitsWith: .failure, observing: [\.standardErrorContent]
        ) {
            let relay = try! RedisRelay(center: PostCenter(), host: "127.0.0.1", port: RedisServer.shared)
            let first = relay.relay("twice")
            let second = relay.relay("twice")
            withExtendedLifetime((first, second)) {}
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("RedisRelay.relay(\"twice\"): this relay already relays \"twice\""))
    }

    @Test func aNameCanBeRelayedAgainOnceItsTokenIsGone() throws {
        let pair = try Pair(prefix: uniquePrefix())
        var first: Subscription? = pair.relayA.relay(.chat)
        #expect(first?.isActive == true)
        first = nil
        let again = pair.relayA.relay(.chat)
        let atB = Collector<Int>()
        let tokens = [pair.relayB.relay(.chat), pair.b.subscribe(.chat) { atB.append($0.seq) }]
        #expect(pair.waitUntilReady())

        pair.a.post(.chat, Message(seq: 1, text: ""))
        #expect(eventually { atB.count == 1 })
        #expect(atB.values == [1])  // published once, not once per relay() call
        withExtendedLifetime((tokens, again)) {}
    }
}
