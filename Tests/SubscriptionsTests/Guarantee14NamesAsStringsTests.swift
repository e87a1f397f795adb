import Foundation
import Testing

@testable import Subscriptions

/// Guarantee 14: names are matched as Swift strings. Canonically equivalent spellings (equal
/// `String`s) are one name: they share subscriptions, posts and counts.
@Suite("Guarantee 14: names are matched as Swift strings")
struct Guarantee14NamesAsStrings {
    @Test(.tags(.pin)) func canonicallyEquivalentNamesShareARoute() {
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        #expect(composed == decomposed)
        let center = PostCenter()
        let seen = Counter()
        let token = center.subscribe(composed) { _ in seen.increment() }
        #expect(center.post(decomposed) == 1)
        #expect(center.post(composed) == 1)
        #expect(seen.count == 2)
        #expect(center.subscriptionCount(for: decomposed) == 1)
        let typed = center.subscribe(Topic<Int>(decomposed)) { _ in seen.increment() }
        #expect(center.post(Topic<Int>(composed), 1) == 2)
        #expect(center.subscriptionCount(for: composed) == 2)
        withExtendedLifetime((token, typed)) {}
    }

    @Test(.tags(.pin)) func nonASCIINamesEquivalentToAnASCIINameReachIt() {
        // U+212A KELVIN SIGN is canonically "K"; U+037E GREEK QUESTION MARK is ";".
        #expect("\u{212A}elvin" == "Kelvin")
        #expect("a\u{037E}b" == "a;b")
        let center = PostCenter()
        let kelvin = center.subscribe("Kelvin") { _ in }
        let semicolon = center.subscribe("a\u{037E}b") { _ in }
        #expect(center.post("\u{212A}elvin") == 1)
        #expect(center.post("a;b") == 1)
        #expect(center.subscriptionCount(for: "\u{212A}elvin") == 1)
        withExtendedLifetime((kelvin, semicolon)) {}
    }

    @Test(.tags(.pin)) func namesThatAreDifferentStringsStayApart() {
        let center = PostCenter()
        let token = center.subscribe("caf\u{E9}") { _ in }
        #expect(center.post("cafe") == 0)
        #expect(center.post("caf\u{E8}") == 0)  // è, not é
        #expect(center.post("Caf\u{E9}") == 0)
        #expect(center.subscriptionCount(for: "cafe") == 0)
        withExtendedLifetime(token) {}
    }

    @Test(.tags(.pin)) func equalNamesHaveEqualKeysAcrossForms() {
        let pairs = [
            ("caf\u{E9}", "cafe\u{301}"), ("\u{212B}", "\u{C5}"), ("\u{212A}", "K"), ("x\u{1FEF}y", "x`y"),
            ("a\u{301}\u{323}", "a\u{323}\u{301}"), ("\u{1E69}", "s\u{323}\u{307}"),
            (
                String(repeating: "long name ", count: 5) + "\u{E9}",
                String(repeating: "long name ", count: 5) + "e\u{301}"
            ),
        ]
        for (a, b) in pairs {
            #expect(a == b)
            #expect(
                _NameKey(a).hash == _NameKey(b).hash,
                "\(a.unicodeScalars.map(\.value)) vs \(b.unicodeScalars.map(\.value))")
        }
    }

    /// A name whose bytes are not contiguous (an `NSString` bridged lazily, on Apple platforms)
    /// is hashed through a contiguous copy: the same hash as the name itself, ASCII or not.
    @Test func aNameHashedThroughItsContiguousCopyKeepsItsHash() {
        for name in ["login", "bench.cancelLoad", "caf\u{E9}", "cafe\u{301}", "\u{212A}elvin", ""] {
            #expect(_contiguousNameHash(name) == _NameKey(name).hash, "\(name.unicodeScalars.map(\.value))")
        }
        #expect(_contiguousNameHash("caf\u{E9}") == _contiguousNameHash("cafe\u{301}"))
    }

    @Test(.tags(.pin)) func theTableOfScalarsEquivalentToASCIIIsComplete() {
        // Every Unicode scalar above ASCII whose one-scalar string equals a one-character ASCII
        // string, found by the standard library's own comparison, must be in the table, with its
        // ASCII character, and nothing else may be.
        let ascii = Dictionary(uniqueKeysWithValues: (0..<128).map { (String(UnicodeScalar(UInt8($0))), $0) })
        var found: [UInt32: Int] = [:]
        for value in UInt32(0x80)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            if let character = ascii[String(scalar)] { found[value] = character }
        }
        let table = Dictionary(
            uniqueKeysWithValues: _asciiEquivalents.map { ($0.scalar.value, Int($0.ascii.value)) })
        #expect(found == table)
    }

    // MARK: Name keys (Engine/Core/NameKey.swift)

    /// "Names that are equal Strings are one name": also for names longer than one 8-byte word
    /// whose non-ASCII scalar sits in an early word, not in the last one.
    @Test(.tags(.mutantPin), arguments: [3, 9, 17, 30])
    func longNamesWithAnEarlyNonASCIIScalarMeetTheirEquivalentSpelling(prefix: Int) {
        let head = String(repeating: "n", count: prefix)
        let tail = "-and-a-suffix-long-enough-to-span-several-words"
        let composed = head + "caf\u{E9}" + tail
        let decomposed = head + "cafe\u{301}" + tail
        #expect(composed == decomposed)
        #expect(_NameKey(composed).hash == _NameKey(decomposed).hash)
        let center = PostCenter()
        let token = center.subscribe(composed) { _ in }
        #expect(center.post(decomposed) == 1)
        #expect(center.subscriptionCount(for: decomposed) == 1)
        withExtendedLifetime(token) {}
    }

    // MARK: Topic

    /// "Equality and hashing use `name` only", with `String`'s equality: two spellings of one
    /// name are one topic, and one element of a set.
    @Test(.tags(.mutantPin)) func topicsOfCanonicallyEquivalentNamesAreEqualAndHashAlike() {
        let composed = Topic<Int>("caf\u{E9}")
        let decomposed = Topic<Int>("cafe\u{301}")
        #expect(composed == decomposed)
        // Equal hashes, asked directly: a set of two elements may put two different hashes in
        // one bucket and then merge the elements by `==` alone.
        #expect(composed.hashValue == decomposed.hashValue)
        #expect(Set([composed, decomposed]).count == 1)
        #expect(composed != Topic<Int>("cafe"))
    }
}
