// The receiving process (`--receive`), which the sending process starts: its own relay on the
// same server, and a `Receiver` that collects the posts and reports each phase on standard output.
import Foundation
import Subscriptions
import SubscriptionsRedis

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

/// Runs the receiving process until the sending process posts `exit` or ends; never returns.
func runReceivingProcess() -> Never {
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
