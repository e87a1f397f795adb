import Foundation
import Subscriptions

/// Starts one thread per topic, releases them together, and returns the wall-clock nanoseconds
/// until the last one has posted `iterations` times to its topic. Thread start-up is not timed.
/// `returned[i]` receives the delivered count thread `i` saw.
@inline(never)
func postFromThreads(
    _ center: PostCenter, _ topics: [Topic<Int>], _ value: Int, _ iterations: Int, returned: [Counter]
) -> UInt64 {
    let ready = DispatchSemaphore(value: 0)
    let go = DispatchSemaphore(value: 0)
    let done = DispatchGroup()
    for (i, topic) in topics.enumerated() {
        let result = returned[i]
        done.enter()
        let thread = Thread {
            ready.signal()
            go.wait()
            result.pointer.pointee = postTyped(center, topic, value, iterations)
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
            "wall ns/post: elapsed wall time ÷ posts made by all threads. 2-thread/1-thread: throughput ratio (posts per second).",
            "The machine has \(ProcessInfo.processInfo.activeProcessorCount) logical CPUs, shared with other work: load lowers the 2-thread figure.",
        ],
        columns: ["subscribers", "contender", "wall ns/post", "Mposts/s", "spread", "vs 1 thread", "target", "result"])
    for subscribers in [1, 10] {
        let value = postedValue
        let center = PostCenter()
        let topics = [Topic<Int>("bench.thread.A"), Topic<Int>("bench.thread.B")]
        let counters = [Counter.make(), Counter.make()]
        let returned = [Counter.make(), Counter.make()]
        var tokens: [Subscription] = []
        for (topic, counter) in zip(topics, counters) {
            subscribeManyTyped(center, topic, counter, subscribers, into: &tokens)
        }
        func threadCase(_ threads: Int) -> Case {
            Case(threads == 1 ? "1 thread" : "2 threads, different names") { iterations in
                for c in counters + returned { c.reset() }
                let elapsed = postFromThreads(center, Array(topics.prefix(threads)), value, iterations, returned: returned)
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
                    times(one.stats.median / s.median),
                    mine ? (subscribers == 1 ? "≥\(target)×" : "(info)") : "", mine ? verdict(checks) : "",
                ],
                Row(
                    contender: c.label, size: subscribers,
                    figures: [
                        "wallNsPerPost": s.median, "wallNsPerPostMin": s.min, "wallNsPerPostMax": s.max,
                        "millionPostsPerSecond": 1_000 / s.median, "throughputVsOneThread": one.stats.median / s.median,
                        "iterationsPerThreadPerRepetition": Double(c.iterations),
                    ],
                    target: mine ? checks.first?.target : nil, pass: mine && !checks.isEmpty ? checks.allSatisfy(\.pass) : nil))
        }
        withExtendedLifetime(tokens) {}
    }
    return section
}
