import Foundation
import Subscriptions
import SubscriptionsRedis
import Testing

/// The `RelayPeer` executable built beside this test bundle (or at `RELAY_PEER`).
func peerExecutable() throws -> URL {
    var candidates: [URL] = []
    if let path = ProcessInfo.processInfo.environment["RELAY_PEER"] { candidates.append(URL(fileURLWithPath: path)) }
    if let executable = Bundle.main.executableURL { candidates.append(executable.deletingLastPathComponent()) }
    candidates.append(Bundle.main.bundleURL)
    candidates.append(Bundle.main.bundleURL.deletingLastPathComponent())
    candidates.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent())
    for candidate in candidates {
        let file =
            candidate.lastPathComponent == "RelayPeer" ? candidate : candidate.appendingPathComponent("RelayPeer")
        if FileManager.default.isExecutableFile(atPath: file.path) { return file }
    }
    Issue.record("RelayPeer not found beside the tests (looked in \(candidates.map(\.path))); set RELAY_PEER")
    throw CocoaError(.fileNoSuchFile)
}

@Suite("Two processes exchange posts")
struct ProcessTests {
    @Test func postsCrossToAnotherProcessAndItsAnswersComeBackInOrder() throws {
        let prefix = uniquePrefix()
        let port = RedisServer.shared
        let peer = Process()
        peer.executableURL = try peerExecutable()
        peer.arguments = ["\(port)", prefix]
        let output = Pipe()
        peer.standardOutput = output
        try peer.run()
        defer { if peer.isRunning { peer.terminate() } }

        // The peer prints "ready" once its subscriptions are confirmed.
        let firstLine = output.fileHandleForReading.readLine()
        try #require(firstLine == "ready")

        let center = PostCenter()
        let relay = try RedisRelay(center: center, host: "127.0.0.1", port: port, channelPrefix: prefix)
        let tokens = [
            relay.relay(.chat), relay.relay(.reply), relay.relay("theme"), relay.relay("theme-ack"),
            relay.relay("stop"),
        ]
        let replies = Collector<Message>()
        let acks = Collector<String>()
        let locals = [
            center.subscribe(.reply) { replies.append($0) }, center.subscribe("theme-ack") { acks.append($0.flag) },
        ]
        #expect(relay.waitUntilReady(timeout: .seconds(10)))

        let sent = (0..<20_000).map { Message(seq: $0, text: "hello \($0)") }
        for message in sent { center.post(.chat, message) }
        for flag in ["dark", "light", "sepia"] { center.post("theme", flag: flag) }

        #expect(eventually { replies.count >= sent.count && acks.count >= 3 })
        #expect(replies.values == sent.map { Message(seq: $0.seq, text: $0.text.uppercased()) })
        #expect(acks.values == ["dark", "light", "sepia"])

        center.post("stop", flag: "")
        peer.waitUntilExit()
        #expect(peer.terminationStatus == 0)
        let summary = output.fileHandleForReading.readLine()
        #expect(summary == "stopped dropped=0 rejected=0 tokens=8")
        #expect(relay.droppedPosts == 0 && relay.rejectedMessages == 0)
        withExtendedLifetime((tokens, locals)) {}
    }
}

extension FileHandle {
    /// The next line, without its newline; `nil` at end of file.
    func readLine() -> String? {
        var bytes: [UInt8] = []
        while true {
            let data = readData(ofLength: 1)
            guard let byte = data.first else { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
    }
}
