import Foundation
import Testing

@testable import Subscriptions

/// Guarantee 16: a sequence keeps every post by default; bounded policies report what they
/// discard through diagnostics.
///
/// A regression here would leave a `for await` loop waiting forever, so the suite has a time
/// limit: a deadlock guard, not a timing assertion.
@Suite("Guarantee 16: a sequence keeps every post by default", .timeLimit(.minutes(1)))
struct Guarantee16SequencesKeepEveryPost {
    // MARK: Default policy

    @Test(.tags(.pin)) func consumerNotYetScheduledReceivesEveryPostByDefault() async {
        let center = PostCenter()
        let numbers = center.posts(count)
        let consumer = Task {
            var seen: [Int] = []
            for await n in numbers {
                seen.append(n)
                if n == 20_001 { break }
            }
            return seen
        }
        for i in 1...20_001 { center.post(count, i) }  // most likely before the task runs at all
        #expect(await consumer.value == Array(1...20_001))
        let plain = center.posts("async.end.default")
        for i in 1...1_000 { center.post("async.end.default", flag: "\(i)") }
        var iterator = plain.makeAsyncIterator()
        var flags: [String] = []
        for _ in 1...1_000 { flags.append(await iterator.next()?.flag ?? "") }
        #expect(flags == (1...1_000).map { "\($0)" })
    }

    // MARK: Drops are reported

    @Test(
        .tags(.pin),
        arguments: [
            (PostsBufferingPolicy.bufferingNewest(10), Array(91...100)), (.bufferingOldest(10), Array(1...10)),
        ])
    func boundedPolicyReportsWhatItDiscardedOnceDiagnosticsAreOn(policy: PostsBufferingPolicy, kept: [Int]) async {
        let center = PostCenter()
        let reports = Recorder<PostCenter.Diagnostic>()
        center.diagnostics = .init { reports.append($0) }
        let numbers = center.posts(count, bufferingPolicy: policy)
        for i in 1...100 { center.post(count, i) }
        #expect(reports.values == [])  // counted on the posting path, reported by the consumer
        var iterator = numbers.makeAsyncIterator()
        var seen: [Int] = []
        for _ in 0..<10 { seen.append(await iterator.next() ?? -1) }
        #expect(seen == kept)
        #expect(reports.values == [.droppedPosts(name: count.name, count: 90)])
        #expect(reports.values.first?.description.contains("unbounded") == true)
        // Nothing more discarded, nothing more reported.
        center.post(count, 101)
        #expect(await iterator.next() == 101)
        #expect(reports.count == 1)
    }

    @Test(.tags(.pin)) func plainBoundedSequenceReportsItsName() async {
        let center = PostCenter()
        let reports = Recorder<PostCenter.Diagnostic>()
        center.diagnostics = .init { reports.append($0) }
        let posts = center.posts("async.end.drops", bufferingPolicy: .bufferingNewest(1))
        for _ in 1...5 { center.post("async.end.drops") }
        var iterator = posts.makeAsyncIterator()
        _ = await iterator.next()
        #expect(reports.values == [.droppedPosts(name: "async.end.drops", count: 4)])
    }

    @Test(.tags(.pin)) func nothingIsReportedWithoutDiagnosticsOrWithoutDrops() async {
        let center = PostCenter()
        let silent = center.posts(count, bufferingPolicy: .bufferingNewest(1))
        for i in 1...5 { center.post(count, i) }
        var iterator = silent.makeAsyncIterator()
        #expect(await iterator.next() == 5)
        let reports = Recorder<PostCenter.Diagnostic>()
        center.diagnostics = .init { reports.append($0) }
        let unbounded = center.posts("async.end.all")
        for _ in 1...500 { center.post("async.end.all") }
        var all = unbounded.makeAsyncIterator()
        for _ in 1...500 { _ = await all.next() }
        #expect(reports.values == [])
    }

    // MARK: The defaults of the async sequences

    /// "By default every post (.unbounded), like AsyncStream": each overload, given no
    /// `bufferingPolicy:`, keeps every post made before its loop starts. The center then goes
    /// away, so each loop gets what was buffered and ends (a bounded default ends early, with a
    /// gap, instead of hanging).
    @Test(.tags(.mutantPin)) func everyPostsOverloadKeepsEveryPostByDefault() async {
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
    @Test(.tags(.mutantPin)) func theStaticPostsShorthandsKeepEveryPostByDefault() async {
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
}

private let count = Topic<Int>("async.end.count")

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
