import Foundation
import Subscriptions
import Testing

@testable import SubscriptionsRedis

@Suite("Refusals are visible: NOPERM throws at start and is an event later")
struct PermissionTests {
    /// An ACL user lacking one thing the relay needs: each is refused by the initializer, with the
    /// server's text.
    @Test func anACLUserWithoutSubscribePublishOrTheChannelsIsRefusedByTheInitializer() throws {
        let server = try RedisServer(arguments: ["--requirepass", "hunter2"])
        let admin = "redis://:hunter2@127.0.0.1:\(server.port)"
        let prefix = uniquePrefix()
        let all = ["+publish", "+subscribe", "+unsubscribe", "+ping"]
        let users: [(String, [String])] = [
            ("nosubscribe", ["&\(prefix)*"] + all.filter { $0 != "+subscribe" }),
            ("nounsubscribe", ["&\(prefix)*"] + all.filter { $0 != "+unsubscribe" }),
            ("nopublish", ["&\(prefix)*"] + all.filter { $0 != "+publish" }),
            ("otherchannels", ["&elsewhere:*"] + all),
        ]
        for (user, rules) in users {
            try redisCommand(admin, ["ACL", "SETUSER", user, "on", ">pass", "resetchannels"] + rules)
            do {
                let relay = try RedisRelay(
                    center: PostCenter(), url: "redis://\(user):pass@127.0.0.1:\(server.port)", channelPrefix: prefix)
                Issue.record("\(user): no error; relay \(relay.originID)")
            } catch .permissionDenied(let text) {
                #expect(text.hasPrefix("NOPERM"), "\(user): \(text)")
                #expect(!text.contains("pass"), "\(text)")
            } catch {
                Issue.record("\(user): \(error)")
            }
        }
        // The user of the README has everything: no error. What the check publishes is one empty
        // message on the channel named by the prefix alone.
        try redisCommand(admin, ["ACL", "SETUSER", "app", "on", ">pass", "resetchannels", "&\(prefix)*"] + all)
        let watcher = try RawSubscriber(port: server.port, channels: [prefix], password: "hunter2")
        let relay = try RedisRelay(
            center: PostCenter(), url: "redis://app:pass@127.0.0.1:\(server.port)", channelPrefix: prefix)
        #expect(relay.waitUntilReady(timeout: .seconds(10)))
        #expect(watcher.receive { $0.count >= 1 })
        #expect(watcher.messages == [[]])
    }

    @Test func aSubscribeRefusedAfterStartIsAnEventAndTheRelayIsNotReady() async throws {
        let server = try RedisServer(arguments: ["--requirepass", "hunter2"])
        let admin = "redis://:hunter2@127.0.0.1:\(server.port)"
        let prefix = uniquePrefix()
        try redisCommand(
            admin,
            [
                "ACL", "SETUSER", "app", "on", ">pass", "resetchannels", "&\(prefix)*", "+publish", "+subscribe",
                "+unsubscribe", "+ping",
            ])
        let relay = try RedisRelay(
            center: PostCenter(), url: "redis://app:pass@127.0.0.1:\(server.port)", channelPrefix: prefix)
        var events = EventReader(relay)
        #expect(await events.next() == .connected)
        try redisCommand(admin, ["ACL", "SETUSER", "app", "-subscribe"])
        let token = relay.relay(.chat)
        guard case .permissionDenied(let text) = await events.next() else {
            Issue.record("no permissionDenied event")
            return
        }
        #expect(text.hasPrefix("NOPERM"), "\(text)")
        #expect(!relay.waitUntilReady(timeout: .milliseconds(200)))
        withExtendedLifetime(token) {}
    }
}
