import Foundation
import Testing

@testable import SubscriptionsRedis

/// A queued post of `channel`: a whole single-post message from the relay with `header`.
private func outgoing(_ channel: String, _ kind: UInt8, _ body: [UInt8], header: [UInt8]) -> _Outgoing {
    _Outgoing(channel: Array(channel.utf8), message: _Wire.message(header: header, kind: kind, body: body))
}

/// What `bytes` parse as, seen by a relay other than the sender.
private func parsed(_ bytes: [UInt8]) -> String {
    bytes.withUnsafeBytes { bytes in
        switch _Wire.parse(bytes, ownHeader: _Wire.header(origin: 1)) {
        case .mine: return "mine"
        case .foreign: return "foreign"
        case .announcement: return "announcement"
        case .post(let kind, let body): return "post \(kind) \(Array(body))"
        case .batch(let batch): return "batch \(batch.kind) \(batch.count) \(batch.map { Array($0) })"
        }
    }
}

@Suite struct WireTests {
    let header = _Wire.header(origin: 0xabc_def)
    let t = _Wire.typed
    let p = _Wire.plain

    /// Bodies of several sizes, one with a two-byte LEB128 length and one empty.
    var bodies: [[UInt8]] { [[1, 2, 3], [], Array(repeating: 7, count: 200), [9]] }

    func batchMessage(_ kind: UInt8, _ bodies: [[UInt8]]) -> [UInt8] {
        let posts = bodies.map { outgoing("c", kind, $0, header: header) }
        var bytes: [UInt8] = []
        _Wire.appendBatch(posts[...], to: &bytes)
        #expect(bytes.count == _Wire.batchLength(posts[...]))
        return bytes
    }

    @Test func aBatchCarriesEveryBodyInOrder() {
        let bytes = batchMessage(t, bodies)
        #expect(Array(bytes.prefix(3)) == Array("SR4".utf8))
        #expect(parsed(bytes) == "batch \(t) 4 \(bodies)")
        #expect(parsed(batchMessage(p, [[65]])) == "batch \(p) 1 [[65]]")
        // The sender skips its own batches like its own posts.
        let mine = bytes.withUnsafeBytes { bytes in
            if case .mine = _Wire.parse(bytes, ownHeader: header) { return true }
            return false
        }
        #expect(mine)
        #expect(parsed(_Wire.message(header: header, kind: t, body: [5])) == "post \(t) [5]")
    }

    @Test func everyTruncationOrExtensionOfABatchIsForeign() {
        let bytes = batchMessage(t, bodies)
        for length in 0..<bytes.count { #expect(parsed(Array(bytes[..<length])) == "foreign", "length \(length)") }
        #expect(parsed(bytes + [0]) == "foreign")
        // Every single-byte change parses to something or is foreign, without trapping, and a batch
        // it still parses as yields exactly its count of bodies.
        for index in bytes.indices {
            for change: UInt8 in [0x01, 0x80, 0xFF] {
                var changed = bytes
                changed[index] ^= change
                changed.withUnsafeBytes { changed in
                    if case .batch(let batch) = _Wire.parse(changed, ownHeader: _Wire.header(origin: 1)) {
                        #expect(Array(batch).count == batch.count)
                    }
                }
            }
        }
    }

    @Test func malformedBatchBodiesAreForeign() {
        let start = header + [_Wire.batch]
        for body: [UInt8] in [
            [], [t], [t, 0x80], [t, 0], [t, 1], [t, 1, 0x81], [t, 1, 3, 1, 2], [t, 2, 1, 1], [t, 1, 1, 1, 0],
            [UInt8(ascii: "x"), 1, 1, 1], [_Wire.batch, 1, 1, 1],
            [t, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 1, 1],
            [t, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 1],
        ] {
            #expect(parsed(start + body) == "foreign", "\(body)")
        }
    }

    @Test func theOutboxCoalescesOnlyConsecutivePostsOfOneChannelAndKind() {
        var outbox = _Outbox(connected: true)
        let plan: [(String, UInt8)] = [
            ("a", t), ("a", t), ("a", t), ("b", t), ("a", t), ("a", t), ("a", p), ("a", p), ("b", p), ("b", t),
        ]
        for (index, (channel, kind)) in plan.enumerated() {
            outbox.items.append(outgoing(channel, kind, [UInt8(index)], header: header))
        }
        var batch: [_Outgoing] = []
        var counts: [Int] = []
        outbox.take(messages: 4, into: &batch, counts: &counts)
        #expect(counts == [3, 1, 2, 2])
        #expect(batch.map { $0.message.last! } == Array(0..<8))
        #expect(outbox.count == 2)
        outbox.take(messages: 100, into: &batch, counts: &counts)
        #expect(counts == [3, 1, 2, 2, 1, 1])
        #expect(batch.map { $0.message.last! } == Array(0..<10))
        #expect(outbox.count == 0)
    }

    @Test func aBatchHoldsAtMost64PostsAndAbout16KiB() {
        var outbox = _Outbox(connected: true)
        for _ in 0..<200 { outbox.items.append(outgoing("a", t, [1], header: header)) }
        var batch: [_Outgoing] = []
        var counts: [Int] = []
        outbox.take(messages: 3, into: &batch, counts: &counts)
        #expect(counts == [64, 64, 64])
        outbox.take(messages: 3, into: &batch, counts: &counts)
        #expect(counts == [64, 64, 64, 8])

        counts = []
        let big = Array(repeating: UInt8(3), count: 1000)
        for _ in 0..<40 { outbox.items.append(outgoing("a", t, big, header: header)) }
        outbox.items.append(outgoing("a", t, Array(repeating: 4, count: 20_000), header: header))
        outbox.items.append(outgoing("a", t, big, header: header))
        outbox.take(messages: 100, into: &batch, counts: &counts)
        #expect(counts == [16, 16, 8, 1, 1])
    }

    @Test func aBatchStaysUnderTheMessageCapAndAtMost64PostsAreAccepted() {
        var outbox = _Outbox(connected: true)
        let body = Array(repeating: UInt8(5), count: 1000)
        for _ in 0..<10 { outbox.items.append(outgoing("a", t, body, header: header)) }
        outbox.bytes = outbox.items.reduce(0) { $0 + $1.message.count }
        var batch: [_Outgoing] = []
        var counts: [Int] = []
        // Header, kind, inner kind and count: 31 bytes; each entry 1002.
        outbox.take(messages: 100, maxBytes: 31 + 3 * 1002, into: &batch, counts: &counts)
        #expect(counts == [3, 3, 3, 1])
        #expect(outbox.bytes == 0)
        for (index, count) in [(0, 3), (3, 3)] {
            #expect(_Wire.batchLength(batch[index..<(index + count)]) <= 31 + 3 * 1002)
        }

        let entries = Array(repeating: entry([1]), count: 65).flatMap { $0 }
        #expect(parsed(header + [_Wire.batch, t, 64] + entries.dropLast(2)) != "foreign")
        #expect(parsed(header + [_Wire.batch, t, 65] + entries) == "foreign")
    }

    @Test func theSequenceNumberIsWrittenAndReadBack() {
        var bytes = [UInt8](repeating: 9, count: 3) + _Wire.message(header: header, kind: t, body: [1])
        _Wire.setSequence(0x0102_0304_0506_0708, in: &bytes, at: 3)
        let (origin, sequence) = Array(bytes.dropFirst(3)).withUnsafeBytes { _Wire.sequence(of: $0) }
        #expect(origin == 0xabc_def && sequence == 0x0102_0304_0506_0708)
    }

    @Test func theInFlightFIFOAttributesRepliesToTheirPosts() {
        var inFlight = _InFlight()
        #expect(inFlight.pop() == nil)
        var expected: [Int] = []
        var popped: [Int] = []
        for round in 0..<5000 {
            let count = round % 64 + 1
            inFlight.push(count)
            expected.append(count)
            if round % 3 != 0, let count = inFlight.pop() { popped.append(count) }
        }
        #expect(inFlight.commands == expected.count - popped.count)
        #expect(inFlight.posts == expected.dropFirst(popped.count).reduce(0, +))
        while let count = inFlight.pop() { popped.append(count) }
        #expect(popped == expected)
        #expect(inFlight.posts == 0 && inFlight.commands == 0)
    }

    /// History mode's resend bookkeeping, against a model: a message attached to a command stays
    /// `unanswered` (in order) until that command's answer is popped, whatever commands without a
    /// message (a `SET` before its `XADD`, a `PING`) sit around it; the compaction keeps it exact.
    @Test func aMessageStaysUnansweredUntilItsLastCommandIsAnswered() {
        var inFlight = _InFlight()
        // The model: each command pushed, with the number of the message attached to it, if any.
        var commands: [Int?] = []
        var answered = 0
        var generator = SystemRandomNumberGenerator()
        for number in 0..<6000 {
            let first = UInt64(number)
            // A message of one or two commands (a retained post's `SET` first), maybe a `PING` before.
            if Bool.random(using: &generator) {
                inFlight.push(0)
                commands.append(nil)
            }
            let two = Int.random(in: 0..<4, using: &generator) == 0
            if two {
                inFlight.push(0)
                commands.append(nil)
            }
            inFlight.push(1)
            inFlight.attach(_Resend(posts: [], first: first))
            commands.append(number)
            for _ in 0..<Int.random(in: 0...2, using: &generator) where inFlight.pop() != nil { answered += 1 }
            if number % 500 == 0 {
                let model = commands[answered...].compactMap { $0 }.map(UInt64.init)
                #expect(inFlight.unanswered.map(\.first) == model)
            }
        }
        let model = commands[answered...].compactMap { $0 }.map(UInt64.init)
        #expect(inFlight.unanswered.map(\.first) == model)
        while inFlight.pop() != nil {}
        #expect(inFlight.unanswered.isEmpty)
    }
}
