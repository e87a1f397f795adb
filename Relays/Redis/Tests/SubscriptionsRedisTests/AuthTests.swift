import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

@Suite("URLs and their parts")
struct URLTests {
    @Test func aURLGivesHostPortUserAndPassword() throws {
        let full = try _Endpoint(url: "rediss://app:s%40cr%3Aet@cache.internal:6380/0")
        #expect(full.host == "cache.internal" && full.port == 6380 && full.tls)
        #expect(full.user == "app" && full.password == "s@cr:et")
        let plain = try _Endpoint(url: "redis://127.0.0.1")
        #expect(
            plain.host == "127.0.0.1" && plain.port == 6379 && !plain.tls && plain.user == nil && plain.password == nil)
        let passwordOnly = try _Endpoint(url: "redis://:secret@[::1]:7000")
        #expect(passwordOnly.host == "::1" && passwordOnly.port == 7000)
        #expect(passwordOnly.user == nil && passwordOnly.password == "secret")
        #expect(passwordOnly.description == "redis://(password)@[::1]:7000")
        #expect(full.description == "rediss://app@cache.internal:6380")
    }

    @Test func aMalformedURLThrowsWithoutShowingThePassword() {
        for url in [
            "http://u:hunter2@host", "redis://u:hunter2@", "redis://u:hunter2@host:99999", "redis://u:hunter2@host?x=1",
            "redis://u:hunter2%zz@host", "redis://u:hunter2@[::1",
        ] {
            #expect(throws: RedisRelayError.self, "\(url)") { _ = try _Endpoint(url: url) }
            do {
                _ = try RedisRelay(center: PostCenter(), url: url)
                Issue.record("\(url) was accepted")
            } catch {
                guard case .invalidURL = error else {
                    Issue.record("\(url): \(error)")
                    continue
                }
                #expect(!"\(error)".contains("hunter2"), "\(error)")
            }
        }
    }
}

@Suite("Authentication, events and close")
struct AuthTests {
    @Test func aPasswordAndAnACLUserAuthenticateAndAWrongPasswordThrowsTheServersText() throws {
        let server = try RedisServer(arguments: ["--requirepass", "hunter2"])
        let base = "127.0.0.1:\(server.port)"
        // The ACL user of the README: its relay's channels and the four commands a relay sends, and
        // the keys and commands of retained posts.
        let prefix = uniquePrefix()
        try redisCommand(
            "redis://:hunter2@\(base)",
            [
                "ACL", "SETUSER", "app", "on", ">app pass", "resetchannels", "&\(prefix)*", "+publish", "+subscribe",
                "+unsubscribe", "+ping", "resetkeys", "~\(prefix)retained:*", "+set", "+del", "+getrange",
            ])

        // The default user with the password, and the ACL user (its password %-encoded).
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(center: a, url: "redis://:hunter2@\(base)", channelPrefix: prefix)
        let relayB = try RedisRelay(center: b, url: "redis://app:app%20pass@\(base)", channelPrefix: prefix)
        let received = Collector<Int>()
        let tokens = [relayA.relay(.chat), relayB.relay(.chat), b.subscribe(.chat) { received.append($0.seq) }]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))
        for seq in 0..<10 { a.post(.chat, Message(seq: seq, text: "")) }
        #expect(eventually { received.count == 10 })
        #expect(received.values == Array(0..<10))
        withExtendedLifetime(tokens) {}

        for (url, expected) in [
            ("redis://:wrong-one@\(base)", "WRONGPASS"), ("redis://app:wrong-one@\(base)", "WRONGPASS"),
            ("redis://\(base)", "NOAUTH"),
        ] {
            do {
                _ = try RedisRelay(center: PostCenter(), url: url)
                Issue.record("\(url) connected")
            } catch {
                guard case .authenticationFailed(let text) = error else {
                    Issue.record("\(url): \(error)")
                    continue
                }
                #expect(text.contains(expected), "\(text)")
                #expect(!"\(error)".contains("wrong-one") && !"\(error)".contains("hunter2"), "\(error)")
            }
        }
    }

    @Test func eventsReportConnectedDisconnectedAndARefusedPasswordWithoutThePassword() async throws {
        let server = try RedisServer(arguments: ["--requirepass", "hunter2"])
        var options = fastOptions
        options.connectTimeout = .milliseconds(500)
        let relay = try RedisRelay(
            center: PostCenter(), url: "redis://:hunter2@127.0.0.1:\(server.port)", options: options)
        var events = EventReader(relay)
        #expect(await events.next() == .connected)

        // The password changes and every client is thrown out: reconnections are refused.
        try redisCommand("redis://:hunter2@127.0.0.1:\(server.port)", ["CONFIG", "SET", "requirepass", "other"])
        try redisCommand("redis://:other@127.0.0.1:\(server.port)", ["CLIENT", "KILL", "TYPE", "pubsub"])
        try redisCommand("redis://:other@127.0.0.1:\(server.port)", ["CLIENT", "KILL", "TYPE", "normal"])
        let down = await events.read { if case .authenticationFailed = $0 { true } else { false } }
        #expect(down.count >= 2, "\(down)")
        if case .disconnected = down.first {} else { Issue.record("\(down)") }
        guard case .authenticationFailed(let text) = down.last else { return }
        #expect(text.hasPrefix("WRONGPASS") && !text.contains("hunter2"), "\(text)")

        // The password comes back: the relay reconnects.
        try redisCommand("redis://:other@127.0.0.1:\(server.port)", ["CONFIG", "SET", "requirepass", "hunter2"])
        let up = await events.read { $0 == .connected }
        #expect(up.last == .connected)
        #expect(up.allSatisfy { if case .authenticationFailed = $0 { true } else { $0 == .connected } }, "\(up)")
        await relay.close()
        #expect(await events.next() == nil)  // the stream ended
    }

    @Test func closeSendsWhatIsQueuedThenDropsLaterPosts() async throws {
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        let a = PostCenter()
        let b = PostCenter()
        let relayA = try RedisRelay(center: a, host: "127.0.0.1", port: port, channelPrefix: prefix)
        let relayB = try RedisRelay(center: b, host: "127.0.0.1", port: port, channelPrefix: prefix)
        let received = Collector<Int>()
        let tokens = [relayA.relay(.chat), relayB.relay(.chat), b.subscribe(.chat) { received.append($0.seq) }]
        #expect(relayA.waitUntilReady(timeout: .seconds(10)) && relayB.waitUntilReady(timeout: .seconds(10)))

        for seq in 0..<1000 { a.post(.chat, Message(seq: seq, text: String(repeating: "x", count: 100))) }
        await relayA.close()
        #expect(relayA.publishedPosts == 1000 && relayA.droppedPosts == 0)
        a.post(.chat, Message(seq: 1000, text: "after close"))
        #expect(relayA.droppedPosts == 1)
        #expect(relayA.dropCounts.disconnected == 1 && relayA.dropCounts.total == 1)
        #expect(eventually { received.count >= 1000 })
        #expect(received.values == Array(0..<1000))
        await relayA.close()  // again: returns
        withExtendedLifetime(tokens) {}
    }

    @Test func aRelayReleasedRightAfterPostingDeliversEverything() throws {
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        let b = PostCenter()
        let relayB = try RedisRelay(center: b, host: "127.0.0.1", port: port, channelPrefix: prefix)
        let received = Collector<Int>()
        let tokens = [relayB.relay(.chat), b.subscribe(.chat) { received.append($0.seq) }]
        #expect(relayB.waitUntilReady(timeout: .seconds(10)))

        for round in 0..<20 {
            let a = PostCenter()
            do {
                let relayA = try RedisRelay(center: a, host: "127.0.0.1", port: port, channelPrefix: prefix)
                let token = relayA.relay(.chat)
                for seq in 0..<5 { a.post(.chat, Message(seq: round * 5 + seq, text: "")) }
                withExtendedLifetime(token) {}
            }  // released here: deinit sends the five, then returns
            guard eventually(timeout: .seconds(10), { received.count >= (round + 1) * 5 }) else {
                Issue.record("round \(round): \(received.count) of \((round + 1) * 5) posts arrived")
                break
            }
        }
        #expect(received.values == Array(0..<100))
        withExtendedLifetime(tokens) {}
    }

    @Test func anUnreachableServerIsWaitedForWhenAsked() async throws {
        let port = freePort()
        var options = fastOptions
        options.waitsForServer = true
        let prefix = uniquePrefix()
        let a = PostCenter()
        let relay = try RedisRelay(center: a, url: "redis://127.0.0.1:\(port)", channelPrefix: prefix, options: options)
        var events = EventReader(relay)
        let token = relay.relay(.chat)
        #expect(!relay.waitUntilReady(timeout: .milliseconds(100)))
        a.post(.chat, Message(seq: 0, text: "nobody is there"))
        #expect(relay.droppedPosts == 1)

        let server = try RedisServer(port: port)
        #expect(await events.next() == .connected)
        #expect(relay.waitUntilReady(timeout: .seconds(10)))
        withExtendedLifetime((token, server)) {}
    }

    @Test func reconnectionWaitsAreJitteredBetweenHalfTheDelayAndAllOfIt() {
        let waits = (0..<1000).map { _ in _jittered(.milliseconds(100)) }
        #expect(waits.allSatisfy { $0 >= .milliseconds(50) && $0 <= .milliseconds(100) })
        #expect(Set(waits).count > 500)  // not one fixed wait
        #expect(waits.contains { $0 < .milliseconds(60) } && waits.contains { $0 > .milliseconds(90) })
    }

    @Test func theEventStreamKeepsTheNewest1024EventsWhenNobodyReads() async throws {
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        let relay = try RedisRelay(center: PostCenter(), host: "127.0.0.1", port: port, channelPrefix: prefix)
        let token = relay.relay(.chat)
        #expect(relay.waitUntilReady(timeout: .seconds(10)))
        try publishRaw(port: port, channel: prefix + "chat", Array(repeating: Array("junk".utf8), count: 1100))
        #expect(eventually { relay.rejectedMessages == 1100 })
        var events = EventReader(relay)
        // `.connected` and the first 76 rejections were let go; 1024 rejections remain.
        guard case .rejected = await events.next() else {
            Issue.record("the oldest event was kept")
            return
        }
        withExtendedLifetime(token) {}
    }
}
