import Foundation
import Subscriptions

/// Starts one thread per topic, releases them together, and returns the wall-clock nanoseconds
/// until the last one has posted `iterations` times to its topic. Thread start-up is not timed.
/// `returned[i]` receives the delivered count thread `i` saw, `cpu[i]` the CPU nanoseconds its
/// posts took.
@inline(never)
func postFromThreads(
    _ center: PostCenter, _ topics: [Topic<Int>], _ value: Int, _ iterations: Int, returned: [Counter], cpu: [Counter]
) -> UInt64 {
    let ready = DispatchSemaphore(value: 0)
    let go = DispatchSemaphore(value: 0)
    let done = DispatchGroup()
    for (i, topic) in topics.enumerated() {
        let result = returned[i]
        let time = cpu[i]
        done.enter()
        let thread = Thread {
            ready.signal()
            go.wait()
            let start = threadCPUNow()
            result.pointer.pointee = postTyped(center, topic, value, iterations)
            time.pointer.pointee = Int(threadCPUNow() - start)
            done.leave()
        }
        thread.start()
    }
    for _ in topics { ready.wait() }
    let start = now()
    for _ in topics { go.signal() }
    done.wait()
    return now() - start
}

/// Two threads posting typed topics of different names against one thread.
func threadsSection(_ config: RunConfig) -> Section {
    let target = 1.5
    var section = Section(
        id: "threads", title: "Two threads posting to different names vs one thread (typed topics)",
        notes: [
            "Each thread posts to its own Topic<Int> (\"bench.thread.A\", \"bench.thread.B\"), whose handlers bump that thread's own counter.",
            "wall ns/post: elapsed wall time ÷ posts made by all threads; vs 1 thread: throughput ratio (the target, always wall time).",
            "CPU ns/post: each thread's own CPU time per post (mean over threads). CPU scaling: 2 × CPU ns/post alone ÷ CPU ns/post",
            "per thread when two run: the throughput ratio two idle cores would give. Contention (locks, shared cache lines) raises",
            "the per-thread CPU time; other processes on the machine lower only the wall-time ratio.",
            "This machine has \(ProcessInfo.processInfo.activeProcessorCount) logical CPUs, shared with other work.",
        ],
        columns: [
            "subscribers", "contender", "wall ns/post", "Mposts/s", "spread", "vs 1 thread", "CPU ns/post",
            "CPU scaling", "target",
            "result",
        ])
    for subscribers in [1, 10] {
        let value = postedValue
        let center = PostCenter()
        let topics = [Topic<Int>("bench.thread.A"), Topic<Int>("bench.thread.B")]
        let counters = [Counter.make(), Counter.make()]
        let returned = [Counter.make(), Counter.make()]
        let cpu = [Counter.make(), Counter.make()]
        var cpuSamples: [Int: [Double]] = [1: [], 2: []]
        var tokens: [Subscription] = []
        for (topic, counter) in zip(topics, counters) {
            subscribeManyTyped(center, topic, counter, subscribers, into: &tokens)
        }
        func threadCase(_ threads: Int) -> Case {
            Case(threads == 1 ? "1 thread" : "2 threads, different names") { iterations, _ in
                for c in counters + returned + cpu { c.reset() }
                let elapsed = postFromThreads(
                    center, Array(topics.prefix(threads)), value, iterations, returned: returned, cpu: cpu)
                let cpuPerPost =
                    (0..<threads).map { Double(cpu[$0].value) / Double(iterations) }.reduce(0, +) / Double(threads)
                cpuSamples[threads]!.append(cpuPerPost)
                for t in 0..<threads {
                    let what = "\(threads)-thread post, thread \(t), \(subscribers) subscriber(s)"
                    expectCalls(counters[t].value, iterations * subscribers * value, what)
                    expectCalls(returned[t].value, iterations * subscribers, what + " (returned count)")
                }
                // Samples are wall nanoseconds per post over all threads.
                return elapsed / UInt64(threads)
            }
        }
        let one = threadCase(1)
        let two = threadCase(2)
        measure([one, two], config)
        // The last `repetitions` CPU samples of each are the timed rounds (calibration came first).
        let cpuOne = Stats(Array(cpuSamples[1]!.suffix(config.repetitions))).median
        let cpuTwo = Stats(Array(cpuSamples[2]!.suffix(config.repetitions))).median
        let cpuScaling = 2 * cpuOne / cpuTwo
        let ratio = one.stats.median / two.stats.median
        var checks: [Check] = []
        if subscribers == 1 {
            checks.append(
                section.check(
                    "two threads on different names vs one thread (throughput, 1 subscriber each)",
                    target: "≥ \(target)×", measured: ratio, text: times(ratio), pass: ratio >= target))
        }
        for c in [one, two] {
            let s = c.stats
            let mine = c === two
            section.add(
                [
                    "\(subscribers)", c.label, ns(s.median), fmt(1_000 / s.median, 1), percent(s.spread),
                    times(one.stats.median / s.median), ns(mine ? cpuTwo : cpuOne), mine ? times(cpuScaling) : "",
                    mine ? (subscribers == 1 ? "≥\(target)×" : "(info)") : "", mine ? verdict(checks) : "",
                ],
                Row(
                    contender: c.label, size: subscribers,
                    figures: [
                        "wallNsPerPost": s.median, "wallNsPerPostMin": s.min, "wallNsPerPostMax": s.max,
                        "millionPostsPerSecond": 1_000 / s.median, "throughputVsOneThread": one.stats.median / s.median,
                        "iterationsPerThreadPerRepetition": Double(c.iterations),
                        "cpuNsPerPostPerThread": mine ? cpuTwo : cpuOne, "cpuScaling": cpuScaling,
                    ],
                    target: mine ? checks.first?.target : nil,
                    pass: mine && !checks.isEmpty ? checks.allSatisfy(\.pass) : nil))
        }
        withExtendedLifetime(tokens) {}
    }
    return section
}
