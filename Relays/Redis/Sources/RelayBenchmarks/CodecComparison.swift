// `--codec`: the relay's payload codec (Codec*.swift, its hand-written binary `Codable` format)
// against Foundation's `JSONEncoder`/`JSONDecoder` and `PropertyListEncoder`/`PropertyListDecoder`
// (binary format), per typed post: encode and decode nanoseconds (the thread's CPU time), and
// bytes, for a few payload shapes (issue 39, item 8: keep a hand-written format only if the
// numbers justify it). No server is needed. Each contender is called as the relay calls its codec: generically, across the module
// boundary, one value at a time, with the encoder and decoder reused. Each row is the median of
// several repetitions, the contenders interleaved within each; every decoded value is compared with
// the original, so that no work is optimised away.
//
//     swift run -c release RelayBenchmarks --codec [--quick]
import Foundation
@_spi(Benchmarks) import SubscriptionsRedis

/// The payload shapes measured: a bare `Int`; two integers; a small struct (Int, String, Bool, Double); a struct with 20 strings and a
/// nested struct; optionals and enums (raw-valued and with associated values).
enum CodecShapes {
    /// The shape of `RelayBenchmarks`' own typed post (`Tick`): two integers.
    struct Pair: Codable, Equatable {
        var seq: Int
        var sent: UInt64
    }

    struct Small: Codable, Equatable {
        var id: Int
        var name: String
        var active: Bool
        var score: Double
    }

    struct Large: Codable, Equatable {
        struct Author: Codable, Equatable {
            var id: Int
            var name: String
            var verified: Bool
        }
        var id: Int
        var tags: [String]
        var author: Author
        var created: Double
    }

    enum Level: String, Codable { case low, medium, high }

    enum Change: Codable, Equatable {
        case moved(x: Int, y: Int)
        case renamed(String)
        case deleted
    }

    struct Optionals: Codable, Equatable {
        var level: Level
        var change: Change
        var note: String?
        var parent: Int?
    }

    static let pair = Pair(seq: 123_456, sent: 98_765_432_101_234)
    static let small = Small(id: 4711, name: "battery", active: true, score: 0.87)
    static let large = Large(
        id: 123_456_789, tags: (0..<20).map { "tag-\($0)-of-a-post" },
        author: .init(id: 42, name: "Ada Lovelace", verified: true), created: 1_765_000_000.25)
    static let optionals = Optionals(level: .high, change: .moved(x: 3, y: -7), note: nil, parent: 99)
}

/// ns per operation, and the bytes of one encoding.
private struct Measured {
    var encode: Double
    var decode: Double
    var bytes: Int
    var total: Double { encode + decode }
}

/// Times `iterations` calls of `body` in this thread's CPU time (hardly moved by other load on the
/// machine, unlike wall time); nanoseconds per call.
private func nanoseconds(_ iterations: Int, _ body: () throws -> Void) rethrows -> Double {
    let start = threadCPUNanoseconds()
    for _ in 0..<iterations { try body() }
    return Double(threadCPUNanoseconds() - start) / Double(iterations)
}

private func threadCPUNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Measures the three contenders on `value`: medians of `repetitions` rounds of `iterations`
/// encodes then `iterations` decodes each. `nil` for a contender that refuses the value.
private func measure<T: Codable & Equatable>(_ value: T, iterations: Int, repetitions: Int) -> [String: Measured?] {
    let json = JSONEncoder()
    let jsonDecoder = JSONDecoder()
    let plist = PropertyListEncoder()
    plist.outputFormat = .binary
    let plistDecoder = PropertyListDecoder()
    var relayBytes: [UInt8] = []
    var data = Data()

    // Each contender: an encode of the value (kept for the decode), and a checked decode.
    let contenders: [(String, () throws -> Int, () throws -> Bool)] = [
        (
            "relay",
            {
                relayBytes.removeAll(keepingCapacity: true)
                try _PayloadCodec.encode(value, into: &relayBytes)
                return relayBytes.count
            },
            { try relayBytes.withUnsafeBytes { try _PayloadCodec.decode(T.self, from: $0) } == value }
        ),
        (
            "JSON",
            {
                data = try json.encode(value)
                return data.count
            },
            { try jsonDecoder.decode(T.self, from: data) == value }
        ),
        (
            "plist",
            {
                data = try plist.encode(value)
                return data.count
            },
            { try plistDecoder.decode(T.self, from: data) == value }
        ),
    ]
    var samples: [String: (encode: [Double], decode: [Double], bytes: Int)] = [:]
    var refused: Set<String> = []
    for _ in 0..<repetitions {
        for (name, encode, decode) in contenders where !refused.contains(name) {
            do {
                var bytes = 0
                let encodeTime = try nanoseconds(iterations) { bytes = try encode() }
                var equal = 0
                let decodeTime = try nanoseconds(iterations) { equal += try decode() ? 1 : 0 }
                if equal != iterations { fail("codec: \(name) decoded \(T.self) to another value") }
                samples[name, default: ([], [], bytes)].encode.append(encodeTime)
                samples[name, default: ([], [], bytes)].decode.append(decodeTime)
            } catch {
                say("codec: \(name) refuses \(T.self): \(error)")
                refused.insert(name)
            }
        }
    }
    var result: [String: Measured?] = [:]
    for (name, _, _) in contenders {
        result[name] = samples[name].map {
            Measured(encode: median($0.encode), decode: median($0.decode), bytes: $0.bytes)
        }
    }
    return result
}

/// Prints the comparison and exits.
func codecComparison(quick: Bool) -> Never {
    let repetitions = quick ? 3 : 7
    let scale = quick ? 1 : 3
    say("codec: ns of CPU per post (encode + decode = total) and bytes per post; median of \(repetitions) repetitions")
    say("codec: ratios are Foundation / relay (above 1: the relay's format is faster or smaller)")
    let rows: [(String, () -> [String: Measured?])] = [
        ("Int", { measure(4711, iterations: 20_000 * scale, repetitions: repetitions) }),
        ("Tick (2 integers)", { measure(CodecShapes.pair, iterations: 20_000 * scale, repetitions: repetitions) }),
        ("small struct", { measure(CodecShapes.small, iterations: 20_000 * scale, repetitions: repetitions) }),
        ("20 strings + nested", { measure(CodecShapes.large, iterations: 4_000 * scale, repetitions: repetitions) }),
        ("optionals + enums", { measure(CodecShapes.optionals, iterations: 10_000 * scale, repetitions: repetitions) }),
    ]
    for (shape, run) in rows {
        let results = run()
        guard let relay = results["relay"] ?? nil else { fail("codec: the relay's codec refused \(shape)") }
        var line = "codec \(shape): relay \(format(relay))"
        for name in ["JSON", "plist"] {
            guard let other = results[name] ?? nil else {
                line += " | \(name) refused"
                continue
            }
            line +=
                " | \(name) \(format(other)) time x\(ratio(other.total, relay.total)) bytes x\(ratio(Double(other.bytes), Double(relay.bytes)))"
        }
        say(line)
    }
    exit(0)
}

private func format(_ m: Measured) -> String {
    "\(Int(m.encode.rounded())) + \(Int(m.decode.rounded())) = \(Int(m.total.rounded())) ns, \(m.bytes) B"
}

private func ratio(_ a: Double, _ b: Double) -> String { String(format: "%.1f", a / b) }
