import Foundation
import Subscriptions
import Synchronization
import Testing

@testable import SubscriptionsRedis

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The cluster and the Sentinel set that `Scripts/relay-topology-tests.sh` starts, read from the
/// environment; `nil` (and their tests skipped) without it.
enum TopologyEnvironment {
    /// The cluster's node ports, the primaries at creation first (`RELAY_CLUSTER_PORTS`).
    static let clusterPorts: [Int]? = ports("RELAY_CLUSTER_PORTS")
    /// The sentinels' ports (`RELAY_SENTINEL_PORTS`).
    static let sentinelPorts: [Int]? = ports("RELAY_SENTINEL_PORTS")
    /// The name the sentinels monitor (`RELAY_SENTINEL_MASTER`).
    static let masterName = ProcessInfo.processInfo.environment["RELAY_SENTINEL_MASTER"] ?? "relay"

    private static func ports(_ variable: String) -> [Int]? {
        guard let text = ProcessInfo.processInfo.environment[variable], !text.isEmpty else { return nil }
        return text.split(separator: ",").compactMap { Int($0) }
    }

    static var clusterURL: String {
        "redis://" + (clusterPorts ?? []).prefix(2).map { "127.0.0.1:\($0)" }.joined(separator: ",")
    }

    static var sentinelURL: String {
        "redis://" + (sentinelPorts ?? []).map { "127.0.0.1:\($0)" }.joined(separator: ",")
    }
}

/// One command to a server on loopback, answered as a plain value; `nil` when it cannot be reached.
func redisCall(_ port: Int, _ command: [String]) -> _Reply? {
    guard let connection = try? _Connection.open(host: "127.0.0.1", port: port, timeout: .seconds(2)) else {
        return nil
    }
    return try? connection.call(command, _Endpoint(host: "127.0.0.1", port: port))
}

/// A field of an `INFO` section (`INFO stats`, `INFO commandstats`, …) as text.
func redisInfo(_ port: Int, _ section: String, _ field: String) -> String? {
    guard let text = redisCall(port, ["INFO", section])?.text else { return nil }
    for line in text.split(whereSeparator: \.isNewline) where line.hasPrefix(field + ":") {
        return String(line.dropFirst(field.count + 1))
    }
    return nil
}

/// How many times the server on `port` ran `command` (`cmdstat_<command>:calls=`), 0 when never.
func redisCalls(_ port: Int, _ command: String) -> Int {
    guard let stat = redisInfo(port, "commandstats", "cmdstat_\(command)") else { return 0 }
    let calls = stat.split(separator: ",").first { $0.hasPrefix("calls=") }
    return calls.flatMap { Int($0.dropFirst("calls=".count)) } ?? 0
}

/// The cluster's current slot map, read from the first node that answers.
func clusterMap() -> _SlotMap? {
    for port in TopologyEnvironment.clusterPorts ?? [] {
        if let reply = redisCall(port, ["CLUSTER", "SLOTS"]),
            let map = _SlotMap(clusterSlots: reply, asked: _Address(host: "127.0.0.1", port: port)), map.isComplete
        {
            return map
        }
    }
    return nil
}

/// Kills (SIGKILL, a crash) the server on `port`, found by the pid it reports, and waits until
/// the port no longer answers: `kill` returns before the process is gone, and a server started
/// again on its files before then finds the port or its nodes file still taken, and exits.
func killServer(_ port: Int) -> Bool {
    guard let pid = redisInfo(port, "server", "process_id").flatMap({ Int32($0) }) else { return false }
    guard kill(pid, SIGKILL) == 0 else { return false }
    return eventually(timeout: .seconds(10)) { redisCall(port, ["PING"]) == nil }
}

/// Whether every reachable cluster node says `cluster_state:ok`.
func clusterIsOK() -> Bool {
    (TopologyEnvironment.clusterPorts ?? []).allSatisfy { port in
        guard let text = redisCall(port, ["CLUSTER", "INFO"])?.text else { return true }  // a killed node
        return text.contains("cluster_state:ok")
    }
}

/// Records a relay's events, from its stream, on a task of its own.
final class EventLog: Sendable {
    private let events = Collector<RedisRelay.Event>()
    private let task: Task<Void, Never>

    init(_ relay: RedisRelay) {
        let events = self.events
        task = Task.detached { for await event in relay.events { events.append(event) } }
    }

    deinit { task.cancel() }

    var values: [RedisRelay.Event] { events.values }

    func count(_ match: (RedisRelay.Event) -> Bool) -> Int { values.filter(match).count }
}

/// Runs a program (found on the PATH) to its end, at most `timeout`; whether it exited with 0.
func runProgram(_ arguments: [String], timeout: Duration = .seconds(120)) -> Bool {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["timeout", "\(timeout.components.seconds)"] + arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
}

/// Moves `count` slots from the primary `source` to `target` with `redis-cli --cluster reshard`
/// (the lowest slots of `source` first).
func reshard(from source: _Address, to target: _Address, count: Int) -> Bool {
    guard let sourceID = redisCall(source.port, ["CLUSTER", "MYID"])?.text,
        let targetID = redisCall(target.port, ["CLUSTER", "MYID"])?.text
    else { return false }
    return runProgram([
        "redis-cli", "--cluster", "reshard", "127.0.0.1:\(source.port)", "--cluster-from", sourceID,
        "--cluster-to", targetID, "--cluster-slots", "\(count)", "--cluster-yes",
    ])
}

/// Starts the server that used to run on `port` again, from its configuration file (its nodes file
/// makes it rejoin the cluster), and waits until it answers. It daemonizes, so it outlives this test
/// process: the topology stays whole for the next process that runs in it (the mutation check runs
/// many), and the topology script stops it with the nodes it started (by the configuration file
/// the node reports).
func restartServer(configFile: String, port: Int) -> Bool {
    // Started up to 5 times: a start that comes while the killed process's last file (its nodes
    // file's lock, the port) is not yet released exits at once; a later one finds them free. A
    // start that overlaps one that succeeded exits the same way, harmlessly.
    for _ in 0..<5 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["redis-server", configFile, "--daemonize", "yes"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return false }
        // Not `waitUntilExit()`: called from a task, it can wait for ever for the daemonizing parent.
        if eventually(timeout: .seconds(4), { redisCall(port, ["PING"]) != nil }) { return true }
    }
    return false
}

/// Starts a killed node again and waits until the cluster is whole: every node ok, and the node
/// back as a replica whose link to its primary is up (when a replica took over meanwhile) or as the
/// primary it was. For the fault tests that kill a primary: later tests (and later processes in
/// the same topology) find a replica for every primary again.
func rejoin(configFile: String, port: Int) async -> Bool {
    guard restartServer(configFile: configFile, port: port) else { return false }
    return await settles(timeout: .seconds(30)) {
        guard clusterIsOK(), let role = redisInfo(port, "replication", "role") else { return false }
        return role == "master" || redisInfo(port, "replication", "master_link_status") == "up"
    }
}

/// `eventually` for async tests: polls `condition` until it holds or `timeout` passes, suspending
/// between polls instead of blocking a thread of the cooperative pool (on 2 cores the pool has 2
/// threads, and a blocked one can starve the tasks that read the relays' events). Bounds a wait;
/// asserts nothing about time.
func settles(timeout: Duration = .seconds(20), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return true
}
