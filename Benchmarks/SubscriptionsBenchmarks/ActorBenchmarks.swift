import Foundation
import Subscriptions

/// The actor every contender delivers to: its one method bumps a counter and, at the last post
/// of a round, wakes the measuring thread.
actor BenchSink {
    let counter: Counter
    let done = DispatchSemaphore(value: 0)
    /// The count at which a round is complete. Written by the measuring thread only while no
    /// delivery is pending (ordered by `done`).
    nonisolated(unsafe) var target = 0

    init(_ counter: Counter) { self.counter = counter }

    func receive(_ value: Int) {
        counter.pointer.pointee += value
        if counter.pointer.pointee == target { done.signal() }
    }
}

/// Nanoseconds of CPU time all threads of the process have used: the poster's, the actor's and
/// the task pool's, but not time spent preempted by other processes.
private func processCPUNow() -> UInt64 {
    var t = timespec()
    let status = clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t)
    precondition(status == 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed; run with --clock wall")
    return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
}

/// Posts `posts` times, then waits until the actor has handled every one; returns the
/// nanoseconds of the `rounds` rounds: CPU time of the whole process (`clock == .cpu`) or wall
/// time.
@inline(never)
private func roundsUntilHandled(
    _ sink: BenchSink, _ rounds: Int, _ posts: Int, _ clock: Clock, _ post: () -> Void
) -> UInt64 {
    let read = clock == .cpu ? processCPUNow : now
    var total: UInt64 = 0
    for _ in 0..<rounds {
        sink.counter.reset()
        sink.target = posts * postedValue
        let start = read()
        for _ in 0..<posts { post() }
        sink.done.wait()
        total += read() - start
        expectCalls(sink.counter.value, posts * postedValue, "actor deliveries of one round")
    }
    return total
}

/// Delivery to one actor: ours (a per-subscription mailbox drained by one task per burst)
/// against a task per post, hand-written over PostCenter and over NotificationCenter.
func actorsSection(_ config: RunConfig) -> Section {
    let posts = 10_000
    let target = 5.0
    var section = Section(
        id: "actors", title: "Post to 1 actor subscriber, 10,000 posts until all handled",
        notes: [
            "One round: \(grouped(posts)) typed posts of an Int from the measuring thread, then a wait until the actor has handled",
            "them all. Timed by the CPU time of the whole process (poster, actor, task pool: the work spans threads), or by wall",
            "time with --clock wall. Ours: subscribe(_:on:handler:).",
            "Hand-written: an immediate handler doing `Task { await sink.receive(v) }` per post (which also loses the order);",
            "NotificationCenter: a block observer doing the same. Medians over \(config.repetitions) repetitions.",
        ],
        columns: ["contender", "ms/round", "ns/post", "spread", "vs ours", "target", "result"])
    let topic = Topic<Int>("bench.actor")
    let name = Notification.Name("bench.actor")
    let value = postedValue

    let oursSink = BenchSink(Counter.make())
    let center = PostCenter()
    let token = center.subscribe(topic, on: oursSink) { sink, v in sink.receive(v) }
    let ours = Case("PostCenter, on: actor") { n, clock in
        roundsUntilHandled(oursSink, n, posts, clock) { center.post(topic, value) }
    }

    let taskSink = BenchSink(Counter.make())
    let taskCenter = PostCenter()
    let taskToken = taskCenter.subscribe(topic) { v in Task { await taskSink.receive(v) } }
    let perTask = Case("PostCenter + Task per post") { n, clock in
        roundsUntilHandled(taskSink, n, posts, clock) { taskCenter.post(topic, value) }
    }

    let foundationSink = BenchSink(Counter.make())
    let foundation = NotificationCenter()
    let observer = foundation.addObserver(forName: name, object: nil, queue: nil) { _ in
        Task { await foundationSink.receive(value) }
    }
    let nc = Case("NotificationCenter + Task per post") { n, clock in
        roundsUntilHandled(foundationSink, n, posts, clock) { foundation.post(name: name, object: nil) }
    }

    measure([ours, perTask, nc], config)
    withExtendedLifetime((token, taskToken)) {}
    foundation.removeObserver(observer)

    let speedup = perTask.stats.median / ours.stats.median
    let check = section.check(
        "post to 1 actor subscriber until handled vs a hand-written Task per post", target: "≥ \(Int(target))× faster",
        measured: speedup, text: times(speedup) + " faster", pass: speedup >= target)
    for c in [ours, perTask, nc] {
        let s = c.stats
        let mine = c === ours
        section.add(
            [
                c.label, fmt(s.median / 1e6, 2), ns(s.median / Double(posts)), percent(s.spread),
                times(s.median / ours.stats.median), mine ? "≥\(Int(target))× Task per post" : "(reference)",
                mine ? verdict([check]) : "",
            ],
            Row(
                contender: c.label, size: posts,
                figures: ["nsPerRound": s.median, "nsPerPost": s.median / Double(posts), "spread": s.spread],
                target: mine ? check.target : nil, pass: mine ? check.pass : nil))
    }
    return section
}
