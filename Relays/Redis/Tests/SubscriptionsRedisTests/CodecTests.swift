import Foundation
import Testing

@testable import SubscriptionsRedis

private struct Inner: Codable, Equatable {
    var name: String
    var score: Double
}

private enum Shape: Codable, Equatable {
    case circle(radius: Float)
    case square(side: Int8, label: String?)
    case none
}

private struct Everything: Codable, Equatable {
    var int = -42
    var big = Int64.min
    var unsigned = UInt64.max
    var small: UInt8 = 200
    var flag = true
    var double = -1.5e300
    var float: Float = 3.25
    var text = "héllo \u{1F600}"
    var empty = ""
    var data = Data([0, 1, 2, 255])
    var missing: Int? = nil
    var present: String? = "here"
    var list = [1, -2, 3]
    var nested = [Inner(name: "a", score: 1), Inner(name: "b", score: .infinity)]
    var lists: [[String]] = [[], ["x", "y"]]
    var map = ["one": 1, "two": 2]
    var shapes: [Shape] = [.circle(radius: 2), .square(side: -3, label: nil), .square(side: 4, label: "q"), .none]
    var date = Date(timeIntervalSinceReferenceDate: 12345.5)
    var url = URL(string: "https://example.com/a?b=c")!
    var nothing = Nothing()
}

/// Encodes nothing at all (not even an empty container).
private struct Nothing: Codable, Equatable {
    init() {}
    init(from decoder: any Decoder) throws {}
    func encode(to encoder: any Encoder) throws {}
}

/// Decodes its keys in the opposite order from the one it encodes them in.
private struct Reordered: Codable, Equatable {
    var first: Int
    var second: [String]
    var third: Bool
    enum CodingKeys: String, CodingKey { case first, second, third }
    init(first: Int, second: [String], third: Bool) {
        self.first = first
        self.second = second
        self.third = third
    }
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        third = try container.decode(Bool.self, forKey: .third)
        second = try container.decode([String].self, forKey: .second)
        first = try container.decode(Int.self, forKey: .first)
    }
}

private class Base: Codable {
    var id = 7
}

private final class Derived: Base, @unchecked Sendable {
    var extra = "more"
    enum CodingKeys: String, CodingKey { case extra }
    override init() { super.init() }
    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        extra = try container.decode(String.self, forKey: .extra)
        try super.init(from: container.superDecoder())
    }
    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(extra, forKey: .extra)
        try super.encode(to: container.superEncoder())
    }
}

private func roundTrip<T: Codable>(_ value: T) throws -> T {
    var bytes: [UInt8] = []
    try _Codec.encode(value, into: &bytes)
    return try bytes.withUnsafeBytes { try _Codec.decode(T.self, from: $0) }
}

private func decodes<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBytes { (try? _Codec.decode(type, from: $0)) != nil }
}

@Suite struct BinaryCodecTests {
    @Test func everyCodableShapeRoundTrips() throws {
        #expect(try roundTrip(Everything()) == Everything())
        #expect(try roundTrip("plain string") == "plain string")
        #expect(try roundTrip(-7) == -7)
        #expect(try roundTrip([1.5, 2.5]) == [1.5, 2.5])
        #expect(try roundTrip(Data(repeating: 9, count: 1000)) == Data(repeating: 9, count: 1000))
        #expect(try roundTrip([Int?.none, 3]) == [nil, 3])
        #expect(try roundTrip(Optional<Int>.none) == nil)
        #expect(try roundTrip(Nothing()) == Nothing())
        let derived = try roundTrip(Derived())
        #expect(derived.id == 7 && derived.extra == "more")
    }

    @Test func keysDecodeInAnyOrder() throws {
        let value = Reordered(first: -1, second: ["a", "b"], third: true)
        #expect(try roundTrip(value) == value)
    }

    @Test func malformedBytesThrowInsteadOfCrashing() throws {
        var bytes: [UInt8] = []
        try _Codec.encode(Everything(), into: &bytes)
        // Every truncation and every single-byte change either throws or decodes some value.
        for length in 0..<bytes.count { #expect(!decodes(Everything.self, Array(bytes[..<length]))) }
        for index in bytes.indices {
            var changed = bytes
            changed[index] ^= 0xFF
            _ = decodes(Everything.self, changed)
        }
        #expect(!decodes(Everything.self, bytes + [0]))
        #expect(!decodes(Int8.self, try encoded(300)))
        #expect(!decodes(UInt.self, try encoded(-1)))
        #expect(!decodes(String.self, [_Codec.string, 2, 0xFF, 0xFE]))
        #expect(!decodes(Int.self, [_Codec.signed] + Array(repeating: 0xFF, count: 20)))
        // Nesting deep enough to overflow a recursive reader's stack is rejected.
        #expect(!decodes([Int].self, Array(repeating: _Codec.unkeyed, count: 100_000)))
    }

    private func encoded(_ value: some Encodable) throws -> [UInt8] {
        var bytes: [UInt8] = []
        try _Codec.encode(value, into: &bytes)
        return bytes
    }
}
