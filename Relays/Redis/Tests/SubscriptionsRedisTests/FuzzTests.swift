import Foundation
import Synchronization
import Testing

@testable import SubscriptionsRedis

/// A small seeded generator (SplitMix64): the same seed gives the same frames on every run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What a fuzz run of the receive path saw; printed by the child process as one line of
/// `key=value` words.
struct FuzzReport {
    var frames = 0
    var delivered = 0
    var rejected = 0
    var ignored = 0
    var missed = 0
    var maxOrigins = 0
    var residentGrowthMiB = 0
    var framesPerSecond = 0

    var line: String {
        "frames=\(frames) delivered=\(delivered) rejected=\(rejected) ignored=\(ignored) missed=\(missed) "
            + "maxOrigins=\(maxOrigins) residentGrowthMiB=\(residentGrowthMiB) framesPerSecond=\(framesPerSecond)"
    }

    init() {}

    init(line: String) {
        var values: [String: Int] = [:]
        for word in line.split(separator: " ") {
            let parts = word.split(separator: "=")
            if parts.count == 2, let value = Int(parts[1]) { values[String(parts[0])] = value }
        }
        frames = values["frames"] ?? -1
        delivered = values["delivered"] ?? -1
        rejected = values["rejected"] ?? -1
        ignored = values["ignored"] ?? -1
        missed = values["missed"] ?? -1
        maxOrigins = values["maxOrigins"] ?? -1
        residentGrowthMiB = values["residentGrowthMiB"] ?? -1
        framesPerSecond = values["framesPerSecond"] ?? -1
    }
}

/// The resident memory of this process in MiB (Linux: /proc/self/statm), or 0 where unknown.
func residentMiB() -> Int {
    guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let pages = statm.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return pages * Int(sysconf(Int32(_SC_PAGESIZE))) >> 20
}

/// Feeds `frames` frames through the pure receive path (`_Reception.receive`: size, framing,
/// signature, per-origin sequences, then the relayed type's decoding, as a subscriber does), half of
/// them to a relay with a signing key: random bytes, and valid frames (typed, plain, batches)
/// mutated in every way a forger could, re-signed half of the time so that they get past the
/// signature to the decoder and the sequence state.
func fuzzReceivePath(frames: Int, seed: UInt64) -> FuzzReport {
    var random = SplitMix64(state: seed)
    let key = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    let signer = _Signer(key: key)
    let channels = [Array("fuzz:chat".utf8), Array("fuzz:theme".utf8)]
    var sequences = [[_OriginSequences]](repeating: [_OriginSequences(), _OriginSequences()], count: 2)
    let headers = [_Wire.header(origin: 1), _Wire.header(origin: 1, signed: true)]
    let interesting: [UInt64] = [0, 1, 2, 63, 64, 1 << 31, 1 << 32, 1 << 63, (1 << 63) + 1, .max - 64, .max - 1, .max]
    let origins: [UInt64] = [0x777, 0xabc, 1, 2, .max]
    var next = [UInt64](repeating: 0, count: origins.count)
    var report = FuzzReport()
    let missedPosts = Atomic<Int>(0)
    let residentBefore = residentMiB()
    let start = ContinuousClock.now

    func body(_ typed: Bool, _ random: inout SplitMix64) -> [UInt8] {
        if typed {
            var bytes: [UInt8] = []
            let text = String(repeating: "x", count: Int(random.next() % 8))
            try? _Codec.encode(Message(seq: Int(truncatingIfNeeded: random.next()), text: text), into: &bytes)
            return bytes
        }
        return Array(String(repeating: "f", count: Int(random.next() % 20)).utf8)
    }

    for index in 0..<frames {
        let signed = index & 1 == 1
        let channel = Int(random.next() % 2)
        let typed = channel == 0
        var frame: [UInt8]
        let shape = random.next() % 16
        if shape == 0 {
            // Random bytes.
            frame = (0..<Int(random.next() % 200)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        } else {
            // A valid frame of a random origin and number, then mutated.
            // Mostly a few well-behaved origins numbering onwards (with gaps and stale repeats), so
            // that frames reach the decoder and the gap accounting; some forged origins with
            // numbers from the edges of the range.
            let forged = shape <= 2
            let which = Int(random.next() % UInt64(origins.count))
            // A mutated number can move a well-behaved origin to the end of the range for good: a
            // new generation of them every 4,096 frames.
            let generation = UInt64(index >> 12) << 8
            let origin = forged ? (shape == 1 ? random.next() : origins[which]) : 0x1000 + generation + UInt64(which)
            frame = _Wire.header(origin: origin, signed: signed)
            let kind = typed ? _Wire.typed : _Wire.plain
            if random.next() % 16 == 0 {
                // An announcement of the origin's next number (tail losses), with a stray body at times.
                frame.append(_Wire.announcement)
                if random.next() % 4 == 0 { frame += body(typed, &random) }
            } else if random.next() % 3 == 0 {
                frame.append(_Wire.batch)
                frame.append(kind)
                let count = 1 + Int(random.next() % (random.next() % 16 == 0 ? UInt64(_Wire.batchMaxPosts) : 4))
                _appendVarint(UInt64(count), to: &frame)
                for _ in 0..<count {
                    let entry = body(typed, &random)
                    _appendVarint(UInt64(entry.count), to: &frame)
                    frame += entry
                }
            } else {
                frame.append(random.next() % 8 == 0 ? (typed ? _Wire.plain : _Wire.typed) : kind)
                frame += body(typed, &random)
            }
            let sequence: UInt64
            if forged {
                sequence =
                    random.next() % 2 == 0
                    ? interesting[Int(random.next() % UInt64(interesting.count))] : random.next()
            } else {
                sequence = next[which]
                next[which] += random.next() % 4 == 0 ? 0 : 1 + random.next() % 3
            }
            _Wire.setSequence(sequence, in: &frame, at: 0)
            for _ in 0..<(random.next() % 2 == 0 ? 0 : 1 + Int(random.next() % 3)) {
                guard !frame.isEmpty else { break }
                let at = Int(random.next() % UInt64(frame.count))
                switch random.next() % 6 {
                case 0: frame[at] ^= UInt8(truncatingIfNeeded: 1 << (random.next() % 8))
                case 1: frame[at] = UInt8(truncatingIfNeeded: random.next())
                case 2: frame.removeLast(Int(random.next() % UInt64(frame.count)))
                case 3: frame += (0..<Int(random.next() % 16)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                case 4: frame.insert(contentsOf: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F], at: at)
                default: frame[at] = [0, 0x7F, 0x80, 0xFF][Int(random.next() % 4)]
                }
            }
            if signed && random.next() % 4 != 0 {
                frame += signer.signature(channel: channels[channel], message: frame[...])
            }
        }
        let limit = random.next() % 8 == 0 ? 256 : 1 << 20
        let action = frame.withUnsafeBytes { bytes in
            channels[channel].withUnsafeBytes { name in
                _Reception.receive(
                    bytes, channel: name, ownHeader: headers[signed ? 1 : 0], signer: signed ? signer : nil,
                    maximumMessageBytes: limit, sequences: &sequences[signed ? 1 : 0][channel]
                ) { parsed in
                    // What the relay's inbound bindings do (RedisRelay+Relaying.swift), without posting.
                    switch parsed {
                    case .post(let kind, let body):
                        guard kind == (typed ? _Wire.typed : _Wire.plain) else { return false }
                        if typed { return (try? _Codec.decode(Message.self, from: body)) != nil }
                        return String(validating: body, as: UTF8.self) != nil
                    case .batch(let batch):
                        guard batch.kind == (typed ? _Wire.typed : _Wire.plain) else { return false }
                        var posts = 0
                        for body in batch {
                            let ok =
                                typed
                                ? (try? _Codec.decode(Message.self, from: body)) != nil
                                : String(validating: body, as: UTF8.self) != nil
                            guard ok else { return false }
                            posts += 1
                        }
                        return posts == batch.count
                    case .mine, .foreign, .announcement:
                        return false
                    }
                }
            }
        }
        report.frames += 1
        switch action {
        case .ignore: report.ignored += 1
        case .reject: report.rejected += 1
        case .delivered(let missed), .announced(let missed):
            report.delivered += 1  // an announcement counts as delivered: it reached the sequence state
            missedPosts.addSaturating(missed)  // as the subscriber counts them
        }
        for side in sequences { for state in side { report.maxOrigins = max(report.maxOrigins, state.expected.count) } }
    }
    report.missed = missedPosts.load(ordering: .relaxed)
    let elapsed = ContinuousClock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    report.framesPerSecond = Int(Double(frames) / max(seconds, 1e-9))
    report.residentGrowthMiB = residentMiB() - residentBefore
    return report
}

@Suite("Fuzzing the receive path: no trap, bounded memory")
struct FuzzTests {
    /// `RELAY_FUZZ_FRAMES` frames (Scripts/relay-check.sh runs this test alone with 1,000,000; 20,000
    /// by default, so that the whole suite's other tests do not compete with it for the CPU), in a
    /// child process of its own, so that a trap fails this test instead of ending the run, and the
    /// memory measured is the fuzz run's alone.
    @Test func aMillionRandomAndMutatedFramesNeverTrapAndMemoryStaysBounded() async throws {
        let result = try await #require(processExitsWith: .success, observing: [\.standardOutputContent]) {
            let frames = ProcessInfo.processInfo.environment["RELAY_FUZZ_FRAMES"].flatMap(Int.init) ?? 20_000
            print(fuzzReceivePath(frames: frames, seed: 39).line)
        }
        let output = String(decoding: result.standardOutputContent, as: UTF8.self)
        let report = FuzzReport(line: output.split(separator: "\n").last.map(String.init) ?? "")
        print("fuzz: \(output)")
        let frames = ProcessInfo.processInfo.environment["RELAY_FUZZ_FRAMES"].flatMap(Int.init) ?? 20_000
        #expect(report.frames == frames)
        #expect(report.delivered + report.rejected + report.ignored == frames)
        // Deep enough to mean something: many frames got through to the decoder and the sequence
        // state, and many were refused.
        #expect(report.delivered >= frames / 10, "\(output)")
        #expect(report.rejected >= frames / 10, "\(output)")
        #expect(report.missed > 0)
        #expect(report.maxOrigins <= _OriginSequences.maxOrigins)
        #expect(report.residentGrowthMiB < 64, "\(output)")
    }

    @Test func theLengthGatePassesEveryStreamUnchangedWhateverItsChunks() {
        let message = Array("*3\r\n$7\r\nmessage\r\n$4\r\nchat\r\n$5\r\nhello\r\n".utf8)
        let stream =
            Array("*3\r\n$9\r\nsubscribe\r\n$4\r\nchat\r\n:1\r\n".utf8) + message + Array("+PONG\r\n-ERR no\r\n".utf8)
            + Array("*2\r\n$4\r\npong\r\n$0\r\n\r\n$-1\r\n*-1\r\n".utf8) + message
        var random = SplitMix64(state: 7)
        var changed = 0
        for _ in 0..<2000 {
            // "subscribe" is the longest string: exactly the limit passes.
            var gate = _LengthGate(limit: 9)
            var output: [UInt8] = []
            var index = 0
            var framed = true
            while index < stream.count {
                let end = min(stream.count, index + 1 + Int(random.next() % 12))
                framed = framed && stream[index..<end].withUnsafeBytes { gate.feed($0, into: &output) }
                index = end
            }
            if !framed || output != stream || !gate.oversized.isEmpty { changed += 1 }
        }
        #expect(changed == 0)
    }

    @Test func aBulkStringOverTheLimitIsNeverPassedOnNorBuffered() {
        var gate = _LengthGate(limit: 4096)
        var output: [UInt8] = []
        let head = Array("*3\r\n$7\r\nmessage\r\n$4\r\nchat\r\n$1000000000\r\n".utf8)
        #expect(head.withUnsafeBytes { gate.feed($0, into: &output) })
        #expect(output == Array("*3\r\n$7\r\nmessage\r\n$4\r\nchat\r\n$-1\r\n".utf8))
        // A gigabyte announced: its bytes go nowhere as they arrive, a chunk at a time.
        let chunk = [UInt8](repeating: 0x41, count: 64 * 1024)
        var fed = 0
        while fed + chunk.count <= 1_000_000_000 {
            output.removeAll()
            #expect(chunk.withUnsafeBytes { gate.feed($0, into: &output) })
            if !output.isEmpty { break }
            fed += chunk.count
        }
        #expect(fed == 1_000_000_000 / chunk.count * chunk.count)
        guard fed == 1_000_000_000 / chunk.count * chunk.count else { return }
        let tail = [UInt8](repeating: 0x41, count: 1_000_000_000 - fed) + Array("\r\n+PONG\r\n".utf8)
        output.removeAll()
        #expect(tail.withUnsafeBytes { gate.feed($0, into: &output) })
        #expect(output == Array("+PONG\r\n".utf8))
        #expect(gate.takeOversized() == 1_000_000_000)
        #expect(gate.takeOversized() == nil)
        // Exactly the limit passes.
        let fits = Array("$4096\r\n".utf8) + chunk[..<4096] + Array("\r\n".utf8)
        output.removeAll()
        #expect(fits.withUnsafeBytes { gate.feed($0, into: &output) })
        #expect(output == fits)
    }

    @Test func hostileFramingIsAProtocolError() {
        for stream in ["*1025\r\n", "$-2\r\n", "?\r\n", "$123456789012345678901234\r\n", "*x\r\n", "$5\n"] {
            var gate = _LengthGate(limit: 4096)
            var output: [UInt8] = []
            let bytes = Array(stream.utf8)
            #expect(!bytes.withUnsafeBytes { gate.feed($0, into: &output) }, "\(stream)")
        }
    }
}
