import Foundation
import Subscriptions

/// A consumer task's running count, bumped only by that task and read by the measuring thread
/// after the round's group was left (ordered by the group).
private final class Tally: @unchecked Sendable {
    // @unchecked: written by one consumer task, read by the measuring thread after `group.wait()`.
    var count = 0
}

/// `.queue(q)` delivery against `q.async { handler(payload) }` written by hand, and `posts()`
/// sequences against one `AsyncStream` per subscriber.
func queueAndPostsSection(_ config: RunConfig) -> Section {
    var section = Section(
        id: "queueAndPosts", title: "Queued delivery and async sequences against their hand-written forms",
        notes: [
            "CPU time of the whole process per post (or wall time with --clock wall), median of the rounds.",
            ".queue(q): one subscriber on a serial queue, 10,000 posts then q.sync {} (all handled); by hand: q.async per post.",
            "posts(): N consumer tasks `for await v in center.posts(topic)`, 10,000 posts until every consumer has them all;",
            "by hand: N immediate subscribers each yielding to its own AsyncStream, consumed the same way.",
            "hand/ours: the hand-written form's CPU ÷ ours (> 1: ours is cheaper). Information, no target.",
        ],
        columns: ["N", "contender", "ns/post", "spread", "hand/ours"])
    let few = RunConfig(repetitions: max(3, config.repetitions / 3), minimumRunNanos: 1, clock: config.clock)
    let read = config.clock == .cpu ? processCPUNow : now
    let posts = 10_000
    let value = postedValue

    // .queue(q)
    do {
        let topic = Topic<Int>("bench.queue")
        let queue = DispatchQueue(label: "bench.queue")
        let counter = Counter.make()
        let center = PostCenter()
        let token = center.subscribe(topic, delivery: .queue(queue)) { v in counter.pointer.pointee &+= v }
        let ours = Case("PostCenter .queue(q)") { rounds, _ in
            var total: UInt64 = 0
            for _ in 0..<rounds {
                counter.reset()
                let start = read()
                _ = postTyped(center, topic, value, posts)
                queue.sync {}
                total += read() - start
                expectCalls(counter.value, posts * value, ".queue(q) deliveries of one round")
            }
            return total
        }
        let hand = Case("q.async { handler(payload) }") { rounds, _ in
            var total: UInt64 = 0
            let handler: @Sendable (Int) -> Void = { v in counter.pointer.pointee &+= v }
            for _ in 0..<rounds {
                counter.reset()
                let start = read()
                for _ in 0..<posts { queue.async { handler(value) } }
                queue.sync {}
                total += read() - start
                expectCalls(counter.value, posts * value, "q.async deliveries of one round")
            }
            return total
        }
        measure([ours, hand], few)
        withExtendedLifetime(token) {}
        for c in [ours, hand] {
            let s = c.stats
            section.add(
                ["1", c.label, ns(s.median / Double(posts)), percent(s.spread), times(hand.stats.median / s.median)],
                Row(
                    contender: c.label, size: 1,
                    figures: ["nsPerPost": s.median / Double(posts), "handOverOurs": hand.stats.median / s.median],
                    target: nil, pass: nil))
        }
    }

    // posts() against one AsyncStream per subscriber
    for n in [1, 10] {
        let topic = Topic<Int>("bench.posts")
        let center = PostCenter()
        let group = DispatchGroup()
        var tasks: [Task<Void, Never>] = []
        var tallies: [Tally] = []
        /// Starts a consumer of `sequence` that leaves `group` after every `posts` values.
        func consume<S: AsyncSequence & Sendable>(_ sequence: S) where S.Element == Int {
            let tally = Tally()
            tallies.append(tally)
            tasks.append(
                Task.detached {
                    do {
                        for try await _ in sequence {
                            tally.count += 1
                            if tally.count % posts == 0 { group.leave() }
                        }
                    } catch {}
                })
        }
        for _ in 0..<n { consume(center.posts(topic)) }
        while center.subscriptionCount(for: topic.name) < n { usleep(1000) }
        let handCenter = PostCenter()
        var tokens: [Subscription] = []
        var continuations: [AsyncStream<Int>.Continuation] = []
        for _ in 0..<n {
            let (stream, continuation) = AsyncStream<Int>.makeStream()
            continuations.append(continuation)
            tokens.append(handCenter.subscribe(topic) { v in continuation.yield(v) })
            consume(stream)
        }
        func rounds(_ center: PostCenter, _ mine: ArraySlice<Tally>, _ count: Int) -> UInt64 {
            var total: UInt64 = 0
            for _ in 0..<count {
                let before = mine.map(\.count)
                for _ in 0..<n { group.enter() }
                let start = read()
                _ = postTyped(center, topic, value, posts)
                group.wait()
                total += read() - start
                for (tally, was) in zip(mine, before) {
                    expectCalls(tally.count - was, posts, "values a consumer got in one round")
                }
            }
            return total
        }
        let ours = Case("PostCenter posts()") { count, _ in rounds(center, tallies[0..<n], count) }
        let hand = Case("AsyncStream per subscriber") { count, _ in rounds(handCenter, tallies[n...], count) }
        measure([ours, hand], few)
        for c in [ours, hand] {
            let s = c.stats
            section.add(
                [
                    "\(n)", c.label, ns(s.median / Double(posts)), percent(s.spread),
                    times(hand.stats.median / s.median),
                ],
                Row(
                    contender: c.label, size: n,
                    figures: ["nsPerPost": s.median / Double(posts), "handOverOurs": hand.stats.median / s.median],
                    target: nil, pass: nil))
        }
        for continuation in continuations { continuation.finish() }
        for task in tasks { task.cancel() }
        withExtendedLifetime(tokens) {}
    }
    return section
}
