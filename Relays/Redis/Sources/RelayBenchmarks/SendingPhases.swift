// The sending process's phases: typed and plain throughput and paced latency through the relay,
// each finished by asking the receiving process for its report (read from its standard output),
// and the CPU cost per post on both sides.
import Foundation
import Subscriptions

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
