import Foundation
import Testing

@testable import Subscriptions

/// Documented rules outside the engine's protocol, each pinned by a mutant of
/// `Scripts/mutants.txt` (the `DOC` block): the defaults of the async sequences, name keys of
/// long non-ASCII names, how diagnostics remember reports across names, the call-site table's
/// limit, topic equality, and the envelope's defaults.
@Suite("Documented rules outside the engine")
struct DocumentedRulePinTests {
    // MARK: Name keys (Engine/NameKey.swift)

    /// "Names that are equal Strings are one name": also for names longer than one 8-byte word
    /// whose non-ASCII scalar sits in an early word, not in the last one.
    @Test(arguments: [3, 9, 17, 30])
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

    // MARK: The defaults of the async sequences

    /// "By default every post (.unbounded), like AsyncStream": each overload, given no
    /// `bufferingPolicy:`, keeps every post made before its loop starts. The center then goes
    /// away, so each loop gets what was buffered and ends (a bounded default ends early, with a
    /// gap, instead of hanging).
    @Test func everyPostsOverloadKeepsEveryPostByDefault() async {
        var center: PostCenter? = PostCenter()
        let topic = Topic<Int>("defaults")
        let sender = DefaultsSender()
        let typed = [
            center!.posts(topic), center!.posts(topic, from: sender), center!.posts(topic, replay: false),
        ]
        let plain = [
            center!.posts("defaults"), center!.posts("defaults", from: sender),
            center!.posts("defaults", replay: false),
        ]
        let count = 300
        for i in 0..<count { center!.post(topic, i, from: sender) }
        center = nil
        for (n, sequence) in typed.enumerated() {
            var seen: [Int] = []
            for await value in sequence { seen.append(value) }
            #expect(seen == Array(0..<count), "typed overload \(n)")
        }
        for (n, sequence) in plain.enumerated() {
            var seen: [Int] = []
            for await post in sequence { seen.append(post.payload(as: Int.self) ?? -1) }
            #expect(seen == Array(0..<count), "plain overload \(n)")
        }
    }

    /// The static shorthands on `PostCenter.default` keep every post by default too. The
    /// default center never goes away, so each loop ends at a last post made once it has taken
    /// its first element: kept with every other post, it comes after all of them; a bounded
    /// default has dropped posts by then, and the loop ends at once with a gap. (A bound, never
    /// reached when the rule holds, cancels a loop that gets no last post.)
    @Test func theStaticPostsShorthandsKeepEveryPostByDefault() async {
        let topic = Topic<Int>("documented-rules.static-defaults")
        let typed = PostCenter.posts(topic)
        let plain = PostCenter.posts(topic.name)
        let count = 300
        for i in 0..<count { PostCenter.default.post(topic, i) }
        let postLast: @Sendable () -> Void = { PostCenter.default.post(topic, count) }
        #expect(await collect(typed, postingTheLastAfterTheFirst: postLast) { $0 == count } == Array(0...count))
        let plainSeen = await collect(plain, postingTheLastAfterTheFirst: postLast) {
            $0.payload(as: Int.self) == count
        }
        #expect(plainSeen.map { $0.payload(as: Int.self) ?? -1 } == Array(0...count))
    }

    // MARK: Diagnostics remember reports per name

    /// "Reported once per level: a count that goes up and down around the limit is not reported
    /// again until it has fallen below half the limit" — per name: another name's falling below
    /// half does not make this name report its level again.
    @Test func anotherNameFallingBelowHalfTheLimitDoesNotForgetThisNamesReport() {
        let center = PostCenter()
        let reports = Recorder<PostCenter.Diagnostic>()
        center.diagnostics = .init(subscriptionLimit: 4) { reports.append($0) }
        var a = (0..<4).map { _ in center.subscribe("a") { _ in } }
        #expect(reports.values.map(\.name) == ["a"])
        // "b" is far below half the limit: its subscription forgets what was reported of "b" only.
        let b = center.subscribe("b") { _ in }
        // "a" goes down by one (not below half) and back up to the limit: not reported again.
        a.removeLast()
        a.append(center.subscribe("a") { _ in })
        #expect(reports.values.map(\.name) == ["a"])
        withExtendedLifetime((a, b)) {}
    }

    /// `Diagnostics.init`: "subscriptionLimit: Live subscriptions of one name before a warning;
    /// default 1,000", "nestingLimit: ... default 32", "reportsUnheardPosts: ... default false".
    @Test func diagnosticsDefaultToAThousandSubscriptionsADepthOf32AndNoUnheardReports() {
        let center = PostCenter()
        let reports = Recorder<PostCenter.Diagnostic>()
        center.diagnostics = .init { reports.append($0) }
        var tokens = (0..<999).map { _ in center.subscribe("many") { _ in } }
        #expect(reports.values.isEmpty)
        tokens.append(center.subscribe("many") { _ in })
        #expect(reports.values.map(\.name) == ["many"])
        if case .manySubscriptions(_, let count, _)? = reports.values.first { #expect(count == 1000) }
        tokens.removeAll()
        reports.reset()

        let depth = Counter()
        let token = center.subscribe("deep") { _ in
            depth.increment()
            if depth.count < 40 { center.post("deep") }
        }
        center.post("deep")
        #expect(reports.values == [.deepNesting(name: "deep", depth: 32)])
        reports.reset()
        center.post("nobody listens")
        #expect(reports.values.isEmpty)
        withExtendedLifetime(token) {}
    }

    // MARK: The call-site table (Engine/CallSites.swift)

    /// "`intern` returns 0 (unknown) once `capacity` distinct sites are recorded": the table
    /// records exactly `UInt16.max` sites, then answers 0 instead of trapping or reusing an id.
    /// In a child process: the table is process-wide, and filling it would blind other tests.
    @Test func theCallSiteTableRecordsUInt16MaxSitesThenAnswersUnknown() async {
        await #expect(processExitsWith: .exitCode(0)) {
            let table = _CallSites.shared
            let known = (0..<10).map { table.intern("Known/File.swift", $0) }
            var ids = Set(known)
            var n = 0
            while ids.count < _CallSites.capacity {
                ids.insert(table.intern("Filler/File\(n).swift", n))
                n += 1
            }
            let first = table.intern("Overflow/First.swift", 1)
            let second = table.intern("Overflow/Second.swift", 2)
            let ok =
                _CallSites.capacity == 65_535 && !ids.contains(0) && first == 0 && second == 0
                && table.site(0) == nil
                && known.enumerated().allSatisfy { line, id in
                    table.intern("Known/File.swift", line) == id
                        && table.site(id).map { $0.fileID == "Known/File.swift" && $0.line == line } == true
                }
            exit(ok ? 0 : 1)
        }
    }

    // MARK: Topic

    /// "Equality and hashing use `name` only", with `String`'s equality: two spellings of one
    /// name are one topic, and one element of a set.
    @Test func topicsOfCanonicallyEquivalentNamesAreEqualAndHashAlike() {
        let composed = Topic<Int>("caf\u{E9}")
        let decomposed = Topic<Int>("cafe\u{301}")
        #expect(composed == decomposed)
        // Equal hashes, asked directly: a set of two elements may put two different hashes in
        // one bucket and then merge the elements by `==` alone.
        #expect(composed.hashValue == decomposed.hashValue)
        #expect(Set([composed, decomposed]).count == 1)
        #expect(composed != Topic<Int>("cafe"))
    }

    // MARK: PostObject

    /// `PostObject(flag:data:)`: "Empty by default"; a typed post's object payload is held
    /// weakly like `data`, and is the very object posted.
    @Test func anEnvelopesFlagIsEmptyByDefaultAndATypedObjectPayloadIsItsWeakData() {
        #expect(PostObject().flag == "")
        #expect(PostObject().data == nil)
        let center = PostCenter()
        let topic = Topic<DefaultsSender>("documented-rules.object")
        let seen = Recorder<PostObject>()
        let token = center.subscribe(topic.name) { seen.append($0) }
        var object: DefaultsSender? = DefaultsSender()
        weak var weakObject: DefaultsSender?
        weakObject = object
        center.post(topic, object!)
        #expect(seen.values.first?.data === object)
        #expect(seen.values.first?.flag == "")
        object = nil
        #expect(weakObject == nil, "the envelope kept the typed object payload alive")
        #expect(seen.values.first?.data == nil)
        withExtendedLifetime(token) {}
    }
}

private final class DefaultsSender: Sendable {}

/// The elements of `posts` up to the first that `isLast` accepts, calling `postLast` once the
/// loop has taken its first element; or what came within 20 seconds.
private func collect<Element: Sendable>(
    _ posts: Posts<Element>, postingTheLastAfterTheFirst postLast: @escaping @Sendable () -> Void,
    isLast: @escaping @Sendable (Element) -> Bool
) async -> [Element] {
    let loop = Task {
        var seen: [Element] = []
        for await element in posts {
            seen.append(element)
            if seen.count == 1 { postLast() }
            if isLast(element) { break }
        }
        return seen
    }
    let watchdog = Task {
        try await Task.sleep(for: .seconds(20))
        loop.cancel()
    }
    let seen = await loop.value
    watchdog.cancel()
    return seen
}

extension PostCenter.Diagnostic {
    /// The name a diagnostic is about.
    fileprivate var name: String {
        switch self {
        case .manySubscriptions(let name, _, _), .deepNesting(let name, _), .unheardPost(let name),
            .droppedPosts(let name, _):
            return name
        }
    }
}
