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
//
// This file reads the options and runs the sending process; its phases are in SendingPhases.swift,
// redis-benchmark's side in RedisBenchmark.swift, the receiving process in ReceivingProcess.swift
// and what they share in Support.swift.
import Foundation
import Subscriptions
import SubscriptionsRedis

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

if arguments.contains("--receive") { runReceivingProcess() }

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

guard nextLine() == "ready" else { fail("the receiving process did not start") }

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
