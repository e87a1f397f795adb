// The other process of the relay's two-process test (Tests/SubscriptionsRedisTests): started by
// the test with the server's port and a channel prefix. It relays `chat`, `reply`, `theme`,
// `theme-ack` and `stop`; answers each chat message with a reply (same sequence number, text
// upper-cased) and each theme flag with a `theme-ack` of the same flag; prints "ready" once its
// subscriptions are confirmed and exits on a `stop` post.
import Foundation
import Subscriptions
import SubscriptionsRedis

struct Message: Codable, Sendable, Equatable {
    var seq: Int
    var text: String
}

extension Topic where Payload == Message {
    static let chat = Topic("chat")
    static let reply = Topic("reply")
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let port = Int(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: RelayPeer <port> <channel-prefix>\n".utf8))
    exit(2)
}
let center = PostCenter()
let relay: RedisRelay
do {
    relay = try RedisRelay(center: center, host: "127.0.0.1", port: port, channelPrefix: arguments[2])
} catch {
    FileHandle.standardError.write(Data("\(error)\n".utf8))
    exit(1)
}
let stopped = DispatchSemaphore(value: 0)
let tokens = [
    relay.relay(.chat), relay.relay(.reply), relay.relay("theme"), relay.relay("theme-ack"), relay.relay("stop"),
    center.subscribe(.chat) { message in
        center.post(.reply, Message(seq: message.seq, text: message.text.uppercased()))
    },
    center.subscribe("theme") { post in center.post("theme-ack", flag: post.flag) },
    center.subscribe("stop") { _ in stopped.signal() },
]
guard relay.waitUntilReady(timeout: .seconds(10)) else {
    FileHandle.standardError.write(Data("RelayPeer: subscriptions not confirmed\n".utf8))
    exit(1)
}
FileHandle.standardOutput.write(Data("ready\n".utf8))
stopped.wait()
let summary = "stopped dropped=\(relay.droppedPosts) rejected=\(relay.rejectedMessages) tokens=\(tokens.count)\n"
FileHandle.standardOutput.write(Data(summary.utf8))
