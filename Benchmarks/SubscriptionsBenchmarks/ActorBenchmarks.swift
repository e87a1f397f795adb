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

/// Posts `iterations` times with `post`, waiting after each until `sink` has handled its
/// `subscribers` deliveries; returns the posts made.
@inline(never)
func postEachUntilHandled(_ sink: BenchSink, _ subscribers: Int, _ iterations: Int, _ post: () -> Void) -> Int {
    guard iterations > 0 else { return 0 }
    for i in 1...iterations {
        sink.target = i * subscribers * postedValue
        post()
        sink.done.wait()
    }
    return iterations
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

/// Posts `posts` times to `subscribers` handlers on `sink`, either all at once and then waits
/// (`oneAtATime == false`) or waiting after each post until its handlers ran; returns the
/// nanoseconds (process CPU time, or wall time) of `rounds` rounds.
@inline(never)
private func actorRounds(
    _ sink: BenchSink, _ rounds: Int, _ posts: Int, _ subscribers: Int, oneAtATime: Bool, _ clock: Clock,
    _ post: () -> Void
) -> UInt64 {
    let read = clock == .cpu ? processCPUNow : now
    let perPost = subscribers * postedValue
    var total: UInt64 = 0
    for _ in 0..<rounds {
        sink.counter.reset()
        let start = read()
        if oneAtATime {
            _ = postEachUntilHandled(sink, subscribers, posts, post)
        } else {
            sink.target = posts * perPost
            for _ in 0..<posts { post() }
            sink.done.wait()
        }
        total += read() - start
        expectCalls(sink.counter.value, posts * perPost, "actor deliveries of one round")
    }
    return total
}

/// The voluntary context switches of the whole process so far (`getrusage`'s `ru_nvcsw`): each
/// is a thread that blocked, so each wake-up of a sleeping thread shows up as one.
private func voluntarySwitches() -> Int {
    var usage = rusage()
    let status = getrusage(numericCast(rusageWho(RUSAGE_SELF)), &usage)
    precondition(status == 0, "getrusage(RUSAGE_SELF) failed")
    return Int(usage.ru_nvcsw)
}

/// `RUSAGE_SELF` as `getrusage` takes it: an imported C enum on Linux (Glibc), a plain `Int32`
/// on Apple platforms; one overload each, so the same line compiles on both.
private func rusageWho<Who: RawRepresentable>(_ who: Who) -> Int32 where Who.RawValue: BinaryInteger {
    Int32(truncatingIfNeeded: who.rawValue)
}
private func rusageWho(_ who: Int32) -> Int32 { who }

/// Delivery to N subscriptions on one actor against SF-0011's `AsyncMessage` observers that call
/// the actor: posts one at a time (each waited for) and in bursts.
func actorMessagesSection(_ config: RunConfig) -> Section {
    let oneTarget = 0.5
    let burstTarget = 0.1
    var section = Section(
        id: "actorMessages", title: "Post to N subscribers on one actor vs AsyncMessage, one at a time and in bursts",
        notes: [
            "CPU time of the whole process per post (or wall time with --clock wall), median of \(config.repetitions) rounds one at a time, \(max(3, config.repetitions / 3)) in bursts.",
            "one at a time: post, wait until its N handlers ran, repeat (1,000 posts); burst: 10,000 / N posts, then wait.",
            "Ours: N × subscribe(topic, on: sink) { sink, v in sink.receive(v) }. AsyncMessage: N × SF-0011's",
            "addObserver(of:for:using:) { m in await sink.receive(m.value) }, post(_:subject:) from the measuring thread.",
            "ours/Msg: this row's CPU per post ÷ AsyncMessage's (the target: ≤ \(oneTarget) one at a time, ≤ \(burstTarget) in bursts).",
            "blocks/post: voluntary context switches of the process per post in one more round (getrusage): threads that went",
            "to sleep, each woken again later. One at a time, the measuring thread's wait is one of them on both sides.",
            "Task per post (one at a time only): by hand, one Task.detached(priority: .medium) per post that calls the actor N",
            "times: the least any delivery that runs on the actor's executor can cost (a task, a wake-up), for reference.",
        ],
        columns: ["N", "posting", "contender", "ns/post", "spread", "ours/Msg", "blocks/post", "target", "result"])
    let topic = Topic<Int>("bench.actor.n")
    let value = postedValue
    for n in [1, 10, 100] {
        let oursSink = BenchSink(Counter.make())
        let center = PostCenter()
        var tokens: [Subscription] = []
        for _ in 0..<n { tokens.append(center.subscribe(topic, on: oursSink) { sink, v in sink.receive(v) }) }
        let messageSink = BenchSink(Counter.make())
        let messages = NotificationCenter()
        var messageTokens: [NotificationCenter.ObservationToken] = []
        for _ in 0..<n {
            messageTokens.append(
                messages.addObserver(of: nil, for: BenchAsyncMessage.self) { m in await messageSink.receive(m.value) })
        }
        let floorSink = BenchSink(Counter.make())
        for oneAtATime in [true, false] {
            let posts = oneAtATime ? 1_000 : max(100, 10_000 / n)
            let ours = Case("PostCenter, on: actor") { rounds, clock in
                actorRounds(oursSink, rounds, posts, n, oneAtATime: oneAtATime, clock) { center.post(topic, value) }
            }
            let message = Case("AsyncMessage") { rounds, clock in
                actorRounds(messageSink, rounds, posts, n, oneAtATime: oneAtATime, clock) {
                    messages.post(BenchAsyncMessage(value: value), subject: benchSubject)
                }
            }
            let floor = Case("Task per post, by hand") { rounds, clock in
                actorRounds(floorSink, rounds, posts, n, oneAtATime: oneAtATime, clock) {
                    Task.detached(priority: .medium) { for _ in 0..<n { await floorSink.receive(value) } }
                }
            }
            let cases = oneAtATime ? [ours, message, floor] : [ours, message]
            // One at a time, a round's CPU time is mostly the kernel's thread wake-ups on both
            // sides, which vary from round to round on a shared machine: the full repetitions keep
            // the medians steady. Bursts vary little and take longer: a third of them.
            let rounds = oneAtATime ? config.repetitions : max(3, config.repetitions / 3)
            let few = RunConfig(repetitions: rounds, minimumRunNanos: 1, clock: config.clock)
            measure(cases, few)
            var blocks: [ObjectIdentifier: Double] = [:]
            for c in cases {
                let before = voluntarySwitches()
                _ = c.run(1, config)
                blocks[ObjectIdentifier(c)] = Double(voluntarySwitches() - before) / Double(posts)
            }
            let ratio = ours.stats.median / message.stats.median
            let limit = oneAtATime ? oneTarget : burstTarget
            let posting = oneAtATime ? "one at a time" : "burst"
            let check = section.check(
                "actor delivery, \(posting), \(n) subscriber\(n == 1 ? "" : "s"), CPU per post vs AsyncMessage",
                target: "≤ \(limit)×", measured: ratio, text: times(ratio), pass: ratio <= limit)
            for c in cases {
                let s = c.stats
                let mine = c === ours
                section.add(
                    [
                        "\(n)", posting, c.label, ns(s.median / Double(posts)), percent(s.spread),
                        times(s.median / message.stats.median), fmt(blocks[ObjectIdentifier(c)] ?? 0, 2),
                        mine ? "≤\(limit)× Msg" : "(reference)",
                        mine ? verdict([check]) : "",
                    ],
                    Row(
                        contender: c.label + ", " + posting, size: n,
                        figures: [
                            "nsPerPost": s.median / Double(posts),
                            "ratioVsAsyncMessage": s.median / message.stats.median,
                            "blocksPerPost": blocks[ObjectIdentifier(c)] ?? 0,
                        ],
                        target: mine ? check.target : nil, pass: mine ? check.pass : nil))
            }
        }
        withExtendedLifetime(tokens) {}
        for token in messageTokens { messages.removeObserver(token) }
    }
    return section
}
