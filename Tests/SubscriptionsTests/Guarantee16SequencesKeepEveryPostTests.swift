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
}

private let count = Topic<Int>("async.end.count")
