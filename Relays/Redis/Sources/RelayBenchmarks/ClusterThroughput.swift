// `--cluster-throughput`: one relay's throughput against a Redis Cluster beside its throughput
// against one server, in the same run (issue 40's target: at least 0.8 of it; routing costs
// little). Both sides are in this process: a sending relay and a receiving relay, 30 names posted
// round-robin (so no two consecutive posts share a channel: one command each, in both modes), timed
// from the first post to the last receipt. Each mode runs `repetitions` times, interleaved, and
// the medians are compared. The cluster's nodes come from RELAY_CLUSTER_PORTS (as
// Scripts/relay-topology-tests.sh sets it); the single server is `--port`'s.
import Foundation
import Subscriptions
import SubscriptionsRedis
import Synchronization

struct Load: Codable, Sendable {
    var seq: Int
}

/// Posts `count` posts over `names` through a sending relay to a receiving one; returns posts per
/// second end to end and this process's CPU time per post (both relays, in microseconds: hardly
/// moved by other load, it is what routing costs the relay), or fails when a post went missing
/// uncounted.
func clusterModeRate(url: String, topology: RedisRelay.Topology, count: Int) -> (rate: Double, cpu: Double) {
    var options = RedisRelay.Options()
    options.topology = topology
    let prefix = "bench-topology:\(UInt32.random(in: 0...UInt32.max)):"
    let names = (0..<30).map { Topic<Load>("load\($0)") }
    let sending = PostCenter()
    let receiving = PostCenter()
    let sender: RedisRelay
    let receiver: RedisRelay
    do {
        sender = try RedisRelay(center: sending, url: url, channelPrefix: prefix, options: options)
        receiver = try RedisRelay(center: receiving, url: url, channelPrefix: prefix, options: options)
    } catch {
        fail("\(error) (\(url))")
    }
    let received = Atomic<Int>(0)
    var tokens: [Subscription] = []
    for name in names {
        tokens.append(sender.relay(name))
        tokens.append(receiver.relay(name))
        tokens.append(receiving.subscribe(name) { _ in received.add(1, ordering: .relaxed) })
    }
    guard sender.waitUntilReady(timeout: .seconds(20)), receiver.waitUntilReady(timeout: .seconds(20)) else {
        fail("\(topology): not ready")
    }
    let start = now()
    let cpuStart = cpuMicros()
    for seq in 0..<count { sending.post(names[seq % names.count], Load(seq: seq)) }
    let deadline = start + 60_000_000_000
    while received.load(ordering: .relaxed) + receiver.missedPosts + sender.droppedPosts < count {
        if now() > deadline { fail("\(topology): \(received.load(ordering: .relaxed)) of \(count) after 60 s") }
        Thread.sleep(forTimeInterval: 0.0005)
    }
    let elapsed = Double(now() - start) / 1e9
    let cpu = (cpuMicros() - cpuStart) / Double(count)
    let got = received.load(ordering: .relaxed)
    guard got + receiver.missedPosts + sender.droppedPosts == count else { fail("\(topology): counts do not add up") }
    if got < count { say("  (\(topology): \(count - got) posts dropped or missed, counted)") }
    tokens.removeAll()
    withExtendedLifetime((sender, receiver)) {}
    return (Double(got) / elapsed, cpu)
}

/// The `--cluster-throughput` mode: prints both medians, their ratio and whether the target is met
/// (as the main mode does: a loaded machine moves the ratio, so it does not fail the run). Counts
/// that do not add up do fail it.
func clusterThroughput(port: Int, quick: Bool) -> Never {
    guard let ports = ProcessInfo.processInfo.environment["RELAY_CLUSTER_PORTS"], !ports.isEmpty else {
        fail("--cluster-throughput needs RELAY_CLUSTER_PORTS (Scripts/relay-topology-tests.sh sets it)")
    }
    let seeds = ports.split(separator: ",").prefix(3).map { "127.0.0.1:\($0)" }.joined(separator: ",")
    // Below maxQueuedPosts (100,000): the rate is the relay's, not that of a queue dropping posts.
    let count = quick ? 30_000 : 90_000
    let repetitions = quick ? 3 : 5
    var standalone: [Double] = []
    var cluster: [Double] = []
    var standaloneCPU: [Double] = []
    var clusterCPU: [Double] = []
    for _ in 0..<repetitions {
        let one = clusterModeRate(url: "redis://127.0.0.1:\(port)", topology: .standalone, count: count)
        let sharded = clusterModeRate(url: "redis://\(seeds)", topology: .cluster, count: count)
        standalone.append(one.rate)
        standaloneCPU.append(one.cpu)
        cluster.append(sharded.rate)
        clusterCPU.append(sharded.cpu)
    }
    let ratio = median(cluster) / median(standalone)
    say("relay throughput, \(count) posts over 30 names, median of \(repetitions):")
    say("  one server      \(rate(median(standalone))) posts/s   \(standalone.map { Int($0) })")
    say("  cluster (3 P)   \(rate(median(cluster))) posts/s   \(cluster.map { Int($0) })")
    say(String(format: "  cluster / one server: %.2f (target >= 0.8): %@", ratio, ratio >= 0.8 ? "MET" : "NOT MET"))
    say(
        String(
            format: "  relay CPU per post (both relays): one server %.2f us, cluster %.2f us (ratio %.2f)",
            median(standaloneCPU), median(clusterCPU), median(clusterCPU) / median(standaloneCPU)))
    exit(0)
}
