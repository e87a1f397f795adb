// RelayBenchmarks: posts per second and one-way latency from one process to another through a
// RedisRelay, beside `redis-benchmark`'s PUBLISH on the same server at the same pipelining and
// the size of one post's message, both without a subscriber (the issue's baseline: the target is
// a relay rate of at least half of it, and p99 under 1 ms) and, for information, with a redis-cli
// subscriber. Under load the relay packs consecutive queued posts of one name into one PUBLISH
// (up to 64), so its posts per second are compared with redis-benchmark's PUBLISH commands per second.
//
//     swift run -c release RelayBenchmarks --port 6379 [--quick] [--pipeline 128]
//     RELAY_CLUSTER_PORTS=… RelayBenchmarks --port 6379 --cluster-throughput [--quick]
//         (one relay against a cluster beside one server: ClusterThroughput.swift)
//     RelayBenchmarks --codec [--quick]
//         (the payload codec against JSON and binary plists, no server: CodecComparison.swift)
//
// The benchmark starts itself a second time as the receiving process (`--receive`). Each row is
// the median of several repetitions, interleaved with redis-benchmark's, so that a burst of load
// on a shared machine hits both. Throughput: N posts as fast as the sender can make them, measured
// from the first post to the last receipt in the other process. Latency: posts paced at a fixed
// rate (the relay is not saturated), each carrying its send time (a monotonic clock shared by the
// processes); p50/p99 of receipt minus send. The receiver checks it got every post, so that no
// work is optimised away and no drop goes unseen.
import Foundation
import Subscriptions
import SubscriptionsRedis

struct Tick: Codable, Sendable {
    var seq: Int
    var sent: UInt64
}

extension Topic where Payload == Tick {
    static let tick = Topic("bench.tick")
}

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("RelayBenchmarks: \(message)\n".utf8))
    exit(1)
}

func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

func percentile(_ sorted: [UInt64], _ p: Double) -> UInt64 {
    sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

/// CPU time this process has used (all threads, user and system), in microseconds: unlike rates,
/// hardly affected by other load on the machine.
func cpuMicros() -> Double {
    var usage = rusage()
    #if os(Linux)
        getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
        getrusage(RUSAGE_SELF, &usage)
    #endif
    let user = Double(usage.ru_utime.tv_sec) * 1e6 + Double(usage.ru_utime.tv_usec)
    return user + Double(usage.ru_stime.tv_sec) * 1e6 + Double(usage.ru_stime.tv_usec)
}

let arguments = CommandLine.arguments
func option(_ name: String) -> String? {
    arguments.firstIndex(of: name).flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
}
let port = option("--port").flatMap(Int.init) ?? 6379
let prefix = option("--prefix") ?? "bench:\(UInt32.random(in: 0...UInt32.max)):"
let pipeline = option("--pipeline").flatMap(Int.init) ?? 128
let quick = arguments.contains("--quick")
// `--sign`: both relays sign and check every message (Options.signingKey); the target is then 0.35.
let signs = arguments.contains("--sign")
let signingKey: [UInt8]? = signs ? Array("RelayBenchmarks signing key, 32+".utf8) : nil
let target = signs ? 0.35 : 0.5
// `--history N`: both relays in history mode (Options.historyLength = N), compared with
// redis-benchmark's `XADD key MAXLEN ~ N * m <message>` instead of PUBLISH (the same target).
let historyLength = option("--history").flatMap(Int.init) ?? 0
let benchmarkCommand = historyLength > 0 ? "XADD" : "PUBLISH"

if arguments.contains("--cluster-throughput") { clusterThroughput(port: port, quick: quick) }
if arguments.contains("--codec") { codecComparison(quick: quick) }

// MARK: Receiving process

/// Collects ticks until a `bench.done` post arrives (sent after the last tick on the same
/// connection), then prints what it received. In history mode each name is a stream of its own, so
/// `bench.done` (its flag `phase/count`) may overtake the last ticks: the report then waits for
/// `count` posts.
final class Receiver: @unchecked Sendable {
    // @unchecked: every member is touched only on the relay's subscriber thread (immediate
    // handlers of received posts).
    var received = 0
    var lastReceipt: UInt64 = 0
    var latencies: [UInt64] = []
    var inOrder = true
    /// History mode: the phase whose `bench.done` came before its last posts, and their count.
    var awaited: (phase: String, count: Int)?

    func take(_ tick: Tick) {
        let at = now()
        if tick.seq != received { inOrder = false }
        received += 1
        lastReceipt = at
        latencies.append(at &- tick.sent)
        reportIfAwaited()
    }

    /// A plain post whose flag is its sequence number: no payload codec either way.
    func take(flag: String) {
        let at = now()
        if Int(flag) != received { inOrder = false }
        received += 1
        lastReceipt = at
        reportIfAwaited()
    }

    private func reportIfAwaited() {
        guard let awaited, received >= awaited.count else { return }
        self.awaited = nil
        report(awaited.phase)
    }

    /// `flag` is `phase/count`: reports now, or (history mode) once `count` posts arrived.
    func done(_ flag: String) {
        let parts = flag.split(separator: "/")
        let phase = String(parts.first ?? "")
        let count = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
        if historyLength > 0 && received < count {
            awaited = (phase, count)
        } else {
            report(phase)
        }
    }

    func report(_ phase: String) {
        latencies.sort()
        say(
            "\(phase) received=\(received) inOrder=\(inOrder) last=\(lastReceipt) cpu=\(UInt64(cpuMicros())) "
                + "p50=\(percentile(latencies, 0.5)) p99=\(percentile(latencies, 0.99)) max=\(latencies.last ?? 0)")
        received = 0
        latencies.removeAll(keepingCapacity: true)
        inOrder = true
    }
}

if arguments.contains("--receive") {
    let center = PostCenter()
    let relay: RedisRelay
    do {
        var options = RedisRelay.Options(signingKey: signingKey)
        options.historyLength = historyLength
        relay = try RedisRelay(
            center: center, host: "127.0.0.1", port: port, channelPrefix: prefix, options: options)
    } catch {
        fail("\(error)")
    }
    let receiver = Receiver()
    let finished = DispatchSemaphore(value: 0)
    let tokens = [
        relay.relay(.tick), relay.relay("bench.done"), relay.relay("bench.flag"),
        center.subscribe(.tick) { receiver.take($0) },
        center.subscribe("bench.flag") { receiver.take(flag: $0.flag) },
        center.subscribe("bench.done") { post in
            if post.flag == "exit" { finished.signal() } else { receiver.done(post.flag) }
        },
    ]
    guard relay.waitUntilReady(timeout: .seconds(10)) else { fail("receiver: subscriptions not confirmed") }
    // Standard input is a pipe from the sending process: end of file means it is gone, and so
    // must this process be (no orphan left behind by a failed or interrupted run).
    Thread.detachNewThread {
        _ = FileHandle.standardInput.readDataToEndOfFile()
        exit(0)
    }
    say("ready")
    finished.wait()
    withExtendedLifetime(tokens) {}
    exit(0)
}

// MARK: Sending process

let center = PostCenter()
var options = RedisRelay.Options()
options.pipelineDepth = pipeline
options.maxQueuedPosts = 10_000_000
options.maxQueuedBytes = 1 << 30
options.signingKey = signingKey
options.historyLength = historyLength
let relay: RedisRelay
do {
    relay = try RedisRelay(center: center, host: "127.0.0.1", port: port, channelPrefix: prefix, options: options)
} catch {
    fail("\(error) (start redis-server, or pass --port)")
}
let tokens = [relay.relay(.tick), relay.relay("bench.done"), relay.relay("bench.flag")]
guard relay.waitUntilReady(timeout: .seconds(10)) else { fail("sender: not connected") }

let child = Process()
child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
if let path = Bundle.main.executablePath { child.executableURL = URL(fileURLWithPath: path) }
child.arguments =
    ["--receive", "--port", "\(port)", "--prefix", prefix, "--history", "\(historyLength)"] + (signs ? ["--sign"] : [])
let childOutput = Pipe()
child.standardOutput = childOutput
let childInput = Pipe()  // never written: closes when this process ends, which ends the child
child.standardInput = childInput
do { try child.run() } catch { fail("cannot start the receiving process: \(error)") }

/// The next line the receiving process prints (a few short lines in all: read byte by byte).
func nextLine() -> String {
    var bytes: [UInt8] = []
    while true {
        guard let byte = childOutput.fileHandleForReading.readData(ofLength: 1).first else {
            fail("the receiving process ended")
        }
        if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(byte)
    }
}

func field(_ line: String, _ name: String) -> UInt64 {
    for part in line.split(separator: " ") where part.hasPrefix(name + "=") {
        return UInt64(part.dropFirst(name.count + 1)) ?? 0
    }
    return 0
}

guard nextLine() == "ready" else { fail("the receiving process did not start") }

/// Waits until every post so far was acknowledged or dropped, then asks the receiver to report.
func finishPhase(_ phase: String, posted: Int, before: (published: Int, dropped: Int)) -> String {
    while relay.publishedPosts + relay.droppedPosts - before.published - before.dropped < posted {
        Thread.sleep(forTimeInterval: 0.0005)
    }
    center.post("bench.done", flag: "\(phase)/\(posted)")
    let line = nextLine()
    let received = Int(field(line, "received"))
    if received != posted || !line.contains("inOrder=true") {
        fail("\(phase): the receiver got \(received) of \(posted) posts (\(line))")
    }
    return line
}

/// CPU microseconds per post of each kind, in the sending and in the receiving process.
/// `nonisolated(unsafe)`: only the main thread of the sending process touches these.
nonisolated(unsafe) var senderCost: [String: [Double]] = [:]
nonisolated(unsafe) var receiverCost: [String: [Double]] = [:]
nonisolated(unsafe) var receiverCPU: UInt64 = 0

func cost(_ kind: String, count: Int, senderCPU: Double, _ line: String) {
    let cpu = field(line, "cpu")
    defer { receiverCPU = cpu }
    guard receiverCPU != 0 else { return }  // the warm-up, or no earlier report to subtract
    senderCost[kind, default: []].append(senderCPU / Double(count))
    receiverCost[kind, default: []].append(Double(cpu - receiverCPU) / Double(count))
}

/// Posts `count` ticks as fast as possible; posts per second from the first post to the last
/// receipt, and of the posting loop alone (encoding and queueing on the posting thread).
func relayThroughput(count: Int) -> (endToEnd: Double, posting: Double) {
    let before = (relay.publishedPosts, relay.droppedPosts)
    let cpu = cpuMicros()
    let start = now()
    for seq in 0..<count { center.post(.tick, Tick(seq: seq, sent: now())) }
    let posted = now()
    let line = finishPhase("throughput", posted: count, before: before)
    cost("typed", count: count, senderCPU: cpuMicros() - cpu, line)
    return (Double(count) / (Double(field(line, "last") - start) / 1e9), Double(count) / (Double(posted - start) / 1e9))
}

/// Posts `count` plain posts (flag only) as fast as possible: the relay's own cost, without a payload codec.
func plainThroughput(count: Int) -> Double {
    let before = (relay.publishedPosts, relay.droppedPosts)
    let flags = (0..<count).map(String.init)
    let cpu = cpuMicros()
    let start = now()
    for flag in flags { center.post("bench.flag", flag: flag) }
    let line = finishPhase("plain", posted: count, before: before)
    cost("plain", count: count, senderCPU: cpuMicros() - cpu, line)
    return Double(count) / (Double(field(line, "last") - start) / 1e9)
}

/// Posts `count` ticks at `rate` per second (at most: sleeping is coarse); one-way latency p50
/// and p99 in microseconds.
func relayLatency(count: Int, rate: Double) -> (p50: Double, p99: Double) {
    let before = (relay.publishedPosts, relay.droppedPosts)
    let interval = UInt64(1e9 / rate)
    let start = now()
    for seq in 0..<count {
        // Sleep, not spin, until the post is due: on a small machine a spinning sender takes
        // the core that the relay's threads and Redis need, and measures its own interference.
        let due = start + UInt64(seq) * interval
        let current = now()
        if current < due { Thread.sleep(forTimeInterval: Double(due - current) / 1e9) }
        center.post(.tick, Tick(seq: seq, sent: now()))
    }
    let line = finishPhase("latency", posted: count, before: before)
    receiverCPU = field(line, "cpu")
    return (Double(field(line, "p50")) / 1000, Double(field(line, "p99")) / 1000)
}

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

let repetitions = quick ? 3 : 7
let throughputCount = quick ? 100_000 : 500_000
let latencyCount = quick ? 5_000 : 20_000
let latencyRate = 10_000.0
let messageSize = relayMessageSize(Tick(seq: throughputCount / 2, sent: now()))

_ = relayThroughput(count: throughputCount / 10)  // warm-up: connections, allocator, JIT-free code paths
var relayRates: [Double] = []
var postingRates: [Double] = []
var plainRates: [Double] = []
var redisRates: [Double] = []
var subscribedRates: [Double] = []
var p50s: [Double] = []
var p99s: [Double] = []
for _ in 0..<repetitions {
    let throughput = relayThroughput(count: throughputCount)
    relayRates.append(throughput.endToEnd)
    postingRates.append(throughput.posting)
    redisRates.append(redisBenchmark(count: throughputCount, size: messageSize, subscriber: false))
    subscribedRates.append(redisBenchmark(count: throughputCount, size: messageSize, subscriber: true))
    plainRates.append(plainThroughput(count: throughputCount))
    let latency = relayLatency(count: latencyCount, rate: latencyRate)
    p50s.append(latency.p50)
    p99s.append(latency.p99)
}
center.post("bench.done", flag: "exit")
child.waitUntilExit()
withExtendedLifetime(childInput) {}

let relayRate = median(relayRates)
let redisRate = median(redisRates)
func rate(_ value: Double) -> String { String(format: "%9.0f", value) }
say(
    "RelayBenchmarks (\(quick ? "quick" : "full"), medians of \(repetitions); pipelining \(pipeline), ~\(messageSize)-byte messages"
        + (signs ? ", signed" : "") + (historyLength > 0 ? ", history \(historyLength): XADD)" : ")")
)
let subscribedRate = median(subscribedRates)
say("  relay, process to process:     \(rate(relayRate)) posts/s   (runs: \(relayRates.map { Int($0) }))")
say("  posting loop alone (sender):   \(rate(median(postingRates))) posts/s")
say("  relay, plain name:             \(rate(median(plainRates))) posts/s   (runs: \(plainRates.map { Int($0) }))")
say("  redis-benchmark \(benchmarkCommand), no subscriber (server counts nobody; an upper bound):")
say("                                 \(rate(redisRate)) req/s     (runs: \(redisRates.map { Int($0) }))")
say("  redis-benchmark \(benchmarkCommand), one redis-cli subscriber (like the relay's receiving process):")
say("                                 \(rate(subscribedRate)) req/s     (runs: \(subscribedRates.map { Int($0) }))")
say(
    String(
        format: "  ratio relay / redis-benchmark, no subscriber:  %.2f typed, %.2f plain  (target >= %.2f)",
        relayRate / redisRate, median(plainRates) / redisRate, target))
say(
    String(
        format: "  ratio relay / redis-benchmark, subscriber:     %.2f typed, %.2f plain  (for information)",
        relayRate / subscribedRate, median(plainRates) / subscribedRate))
// Load from other processes only slows a run down, so the best run of each is the closest to the
// machine's unloaded rate: the same estimate for both sides, steadier than medians when it is busy.
let best = (relay: relayRates.max()!, plain: plainRates.max()!, redis: redisRates.max()!, sub: subscribedRates.max()!)
say(
    String(
        format: "  best runs: relay %.0f typed, %.0f plain; ratio %.2f typed, %.2f plain (subscriber), "
            + "%.2f, %.2f (no subscriber)",
        best.relay, best.plain, best.relay / best.sub, best.plain / best.sub, best.relay / best.redis,
        best.plain / best.redis))
say(
    String(
        format: "  one-way latency at %.0f posts/s: p50 %.0f us, p99 %.0f us  (target p99 < 1000 us; p99 runs: %@)",
        latencyRate, median(p50s), median(p99s), p99s.map { String(Int($0)) }.joined(separator: ", ")))
let typedRatio = relayRate / redisRate
let plainRatio = median(plainRates) / redisRate
let p99 = median(p99s)
let met = typedRatio >= target && plainRatio >= target && p99 < 1000
say(
    String(
        format: "  target (medians): typed %.2f, plain %.2f of redis-benchmark without subscriber (>= %.2f), "
            + "p99 %.0f us (< 1000): %@",
        typedRatio, plainRatio, target, p99, met ? "MET" : "NOT MET"))
for kind in ["typed", "plain"] {
    let sender = senderCost[kind].map(median) ?? 0
    let receiver = receiverCost[kind].map(median) ?? 0
    say(
        String(
            format: "  CPU per post, %@: sender %.2f us, receiver %.2f us (all threads; load-insensitive)",
            kind, sender, receiver))
}
say("  dropped \(relay.droppedPosts), rejected \(relay.rejectedMessages)")
if historyLength > 0 {
    // The streams this run filled stay on the server otherwise.
    let names = ["bench.tick", "bench.done", "bench.flag", "redis-benchmark", "redis-benchmark-subscribed"]
    _ = redisCLI(["del"] + names.map { prefix + $0 })
}
withExtendedLifetime(tokens) {}
