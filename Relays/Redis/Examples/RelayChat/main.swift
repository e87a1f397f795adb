// RelayChat: two app instances share chat messages and a theme through a local Redis.
//
//     redis-server &                       # or any Redis on 127.0.0.1:6379
//     cd Relays/Redis && swift run RelayChat
//
// Each instance has its own PostCenter and its own RedisRelay, exactly as two processes would
// (start two processes with the same names and they talk the same way). RELAY_REDIS_PORT picks
// another port.
import Foundation
import Subscriptions
import SubscriptionsRedis

struct ChatMessage: Codable, Sendable {
    var from: String
    var text: String
}

extension Topic where Payload == ChatMessage {
    static let chat = Topic("chat")
}

let port = ProcessInfo.processInfo.environment["RELAY_REDIS_PORT"].flatMap(Int.init) ?? 6379

/// One app instance: a center, a relay, and the names it relays.
final class Instance: Sendable {
    let name: String
    let center = PostCenter()
    let relay: RedisRelay
    let tokens: [Subscription]

    init(_ name: String) throws {
        self.name = name
        relay = try RedisRelay(center: center, host: "127.0.0.1", port: port, channelPrefix: "relaychat:")
        tokens = [relay.relay(.chat), relay.relay("theme")]
    }
}

do {
    let web = try Instance("web")
    let worker = try Instance("worker")
    let done = DispatchSemaphore(value: 0)

    // The worker listens with the same API as for local posts.
    let listening = [
        worker.center.subscribe(.chat) { message in print("worker got chat from \(message.from): \(message.text)") },
        worker.center.subscribe("theme") { post in
            print("worker got theme \"\(post.flag)\" (data stays home: \(post.data == nil ? "nil" : "set"))")
            done.signal()
        },
    ]
    guard web.relay.waitUntilReady(timeout: .seconds(5)), worker.relay.waitUntilReady(timeout: .seconds(5)) else {
        print("Redis did not confirm the subscriptions")
        exit(1)
    }

    web.center.post(.chat, ChatMessage(from: "web", text: "hello from another process"))
    web.center.post(.chat, ChatMessage(from: "web", text: "posts arrive in order"))
    web.center.post("theme", flag: "dark", data: NSObject())

    guard done.wait(timeout: .now() + 5) == .success else {
        print("no message came back from Redis")
        exit(1)
    }
    print("web dropped \(web.relay.droppedPosts), worker rejected \(worker.relay.rejectedMessages)")
    withExtendedLifetime(listening) {}
} catch {
    print(error)  // RedisRelay: cannot reach Redis at 127.0.0.1:6379: Connection refused
    exit(1)
}
