// The baseline: `redis-benchmark`'s PUBLISH (or XADD) on the same server, with and without a
// `redis-cli` subscriber, and the size of the relay's message it is given.
import Foundation

/// redis-benchmark's PUBLISH on the same server: one connection, the same pipelining and message
/// size. With `subscriber: false` on a channel nobody subscribes to (what `-t publish` measures,
/// which redis-benchmark has from Redis 7.2 on; the explicit command works with older ones too): the
/// server only counts receivers, so this is an upper bound no relay can reach. With `subscriber:
/// true`, a `redis-cli` subscribed to the channel (output discarded) receives every message, as the
/// relay's receiving process does. Requests per second.
func redisBenchmark(count: Int, size: Int, subscriber: Bool) -> Double {
    let channel = prefix + (subscriber ? "redis-benchmark-subscribed" : "redis-benchmark")
    var listener: Process?
    if subscriber {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["redis-cli", "-h", "127.0.0.1", "-p", "\(port)", "subscribe", channel]
        let output = Pipe()
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardInput = output
        do { try process.run() } catch { fail("cannot run redis-cli: \(error)") }
        listener = process
        // Until the server counts the subscriber (PUBSUB NUMSUB), so that every message reaches it.
        var subscribed = false
        for _ in 0..<100 where !subscribed {
            subscribed = redisCLI(["pubsub", "numsub", channel]).split(separator: "\n").last == "1"
            if !subscribed { Thread.sleep(forTimeInterval: 0.02) }
        }
        if !subscribed { fail("redis-cli did not subscribe to \(channel)") }
    }
    defer {
        if let listener {
            listener.terminate()
            listener.waitUntilExit()
        }
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    let payload = String(repeating: "x", count: size)
    // History mode: what the relay's publisher sends instead (a stream nobody reads: an upper bound).
    let command =
        historyLength > 0
        ? ["XADD", channel, "MAXLEN", "~", "\(historyLength)", "*", "m", payload] : ["PUBLISH", channel, payload]
    process.arguments =
        [
            ProcessInfo.processInfo.environment["REDIS_BENCHMARK"] ?? "redis-benchmark", "-h", "127.0.0.1", "-p",
            "\(port)", "-n", "\(count)", "-c", "1", "-P", "\(pipeline)", "--csv",
        ] + command
    let output = Pipe()
    process.standardOutput = output
    do { try process.run() } catch { fail("cannot run redis-benchmark: \(error)") }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    for line in text.split(separator: "\n") where line.hasPrefix("\"\(command[0])") {
        let columns = line.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
        if columns.count > 1, let rate = Double(columns[1]) { return rate }
    }
    fail("unexpected redis-benchmark output: \(text)")
}

/// `redis-cli`'s output for one command.
func redisCLI(_ command: [String]) -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["redis-cli", "-h", "127.0.0.1", "-p", "\(port)"] + command
    let output = Pipe()
    process.standardOutput = output
    do { try process.run() } catch { fail("cannot run redis-cli: \(error)") }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// The size of the relay's message for a typed tick: the 20-byte header (magic, origin, kind)
/// and the payload in the relay's binary format (a keyed container: per field a length-prefixed
/// key and a tagged LEB128 integer; see `_Codec` in SubscriptionsRedis).
func relayMessageSize(_ tick: Tick) -> Int {
    func leb(_ value: UInt64) -> Int { max(1, (64 - value.leadingZeroBitCount + 6) / 7) }
    let seq = UInt64(bitPattern: Int64(tick.seq) << 1 ^ Int64(tick.seq) >> 63)
    // Header (magic, origin, sequence number) and kind: 28 bytes; a signature adds 32.
    let body = 1 + (1 + "seq".utf8.count) + 1 + leb(seq) + (1 + "sent".utf8.count) + 1 + leb(tick.sent) + 1
    return 28 + (signs ? 32 : 0) + body
}
