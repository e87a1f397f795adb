import Foundation
import Subscriptions

/// Tells the handlers of a shared name which posting thread they run for, so that each thread
/// bumps a counter of its own (a shared counter would measure its cache line, not the center).
final class ThreadTag: Sendable {
    let index: Int
    init(_ index: Int) { self.index = index }
}

/// Runs `work(i, iterations)` on `threads` threads released together; returns the wall-clock
/// nanoseconds until the last one finished, and stores each thread's CPU nanoseconds in `cpu`.
/// Thread start-up is not timed.
func runOnThreads(
    _ threads: Int, _ iterations: Int, cpu: [Counter], _ work: @escaping @Sendable (Int, Int) -> Void
) -> UInt64 {
    let ready = DispatchSemaphore(value: 0)
    let go = DispatchSemaphore(value: 0)
    let done = DispatchGroup()
    for i in 0..<threads {
        done.enter()
        Thread {
            ready.signal()
            go.wait()
            let start = threadCPUNow()
            work(i, iterations)
            cpu[i].pointer.pointee = Int(threadCPUNow() - start)
            done.leave()
        }.start()
    }
    for _ in 0..<threads { ready.wait() }
    let start = now()
    for _ in 0..<threads { go.signal() }
    done.wait()
    return now() - start
}

/// Environment variable that makes a child process of the benchmark print the figures the
/// parent quotes for the fence-free protocol.
let childVariable = "SUBSCRIPTIONS_BENCH_CHILD"

/// 1, 2 and 4 threads posting one name with 10 subscribers, typed and plain, and the same load on
/// `NotificationCenter`; then the same in a child process without the process-wide fence.
func sameNameSection(_ config: RunConfig) -> Section {
    let child = ProcessInfo.processInfo.environment[childVariable] != nil
    var section = Section(
        id: "threads",
        title: "Threads posting the same name (10 subscribers)"
            + (child ? ", without the process-wide fence" : ""),
        notes: [
            "Each of N threads posts one name to 10 subscribers; each handler bumps the posting thread's own counter.",
            "wall ns/post: elapsed wall time ÷ posts made by all threads; vs 1 thread: throughput ratio (wall time: the targets).",
            "CPU ns/post: each thread's own CPU time per post (mean). CPU scaling: N × CPU ns/post alone ÷ CPU ns/post with N",
            "threads (N capped at the 2 CPUs): the ratio idle cores would give; contention raises the per-thread CPU time.",
            "This machine has \(ProcessInfo.processInfo.activeProcessorCount) logical CPUs, shared with other work.",
        ],
        columns: [
            "contender", "threads", "wall ns/post", "Mposts/s", "spread", "vs 1 thread", "CPU ns/post", "CPU scaling",
            "target", "result",
        ])
    let subscribers = 10
    let counters = (0..<4).map { _ in Counter.make() }
    let returned = (0..<4).map { _ in Counter.make() }
    let cpu = (0..<4).map { _ in Counter.make() }
    let tags = (0..<4).map { ThreadTag($0) }
    let flags = ["0", "1", "2", "3"]
    let center = PostCenter()
    let topic = Topic<Int>("bench.same.typed")
    let plainName = "bench.same.plain"
    let foundation = NotificationCenter()
    let notificationName = Notification.Name("bench.same.nc")
    var tokens: [Subscription] = []
    var observers: [NSObjectProtocol] = []
    for _ in 0..<subscribers {
        tokens.append(center.subscribe(topic) { i in counters[i].pointer.pointee &+= 1 })
        tokens.append(
            center.subscribe(plainName) { post in
                counters[Int(post.flag.utf8.first! &- 48)].pointer.pointee &+= 1
            })
        observers.append(
            foundation.addObserver(forName: notificationName, object: nil, queue: nil) { note in
                counters[unsafeDowncast(note.object as AnyObject, to: ThreadTag.self).index].pointer.pointee &+= 1
            })
    }
    let contenders: [(String, @Sendable (Int, Int) -> Void)] = [
        (
            "PostCenter typed Topic<Int>",
            { i, n in
                var d = 0
                for _ in 0..<n { d &+= center.post(topic, i) }
                returned[i].pointer.pointee = d
            }
        ),
        (
            "PostCenter plain, new PostObject",
            { i, n in
                var d = 0
                for _ in 0..<n { d &+= center.post(plainName, flag: flags[i]) }
                returned[i].pointer.pointee = d
            }
        ),
        (
            "NotificationCenter, object: tag",
            { i, n in
                for _ in 0..<n { foundation.post(name: notificationName, object: tags[i]) }
                returned[i].pointer.pointee = n * subscribers
            }
        ),
    ]
    var figures: [String: Double] = [:]
    for (label, work) in contenders {
        var cpuSamples: [Int: [Double]] = [1: [], 2: [], 4: []]
        let cases = [1, 2, 4].map { threads in
            Case("\(threads)") { iterations, _ in
                for c in counters + returned + cpu { c.reset() }
                let elapsed = runOnThreads(threads, iterations, cpu: cpu, work)
                cpuSamples[threads]!.append(
                    (0..<threads).map { Double(cpu[$0].value) / Double(iterations) }.reduce(0, +) / Double(threads))
                for t in 0..<threads {
                    expectCalls(
                        counters[t].value, iterations * subscribers, "\(label), \(threads) threads, thread \(t)")
                    expectCalls(returned[t].value, iterations * subscribers, "\(label), \(threads) threads (returned)")
                }
                return elapsed / UInt64(threads)
            }
        }
        measure(cases, config)
        let one = cases[0].stats.median
        let cpuMedian = [1, 2, 4].map { Stats(Array(cpuSamples[$0]!.suffix(config.repetitions))).median }
        for (index, c) in cases.enumerated() {
            let ratio = one / c.stats.median
            let threads = [1, 2, 4][index]
            let cpuScaling = Double(min(threads, 2)) * cpuMedian[0] / cpuMedian[index]
            var checks: [Check] = []
            let typed = label.contains("typed")
            if typed && threads == 2 {
                let target = child ? 1.6 : 1.8
                checks.append(
                    section.check(
                        "typed, same name, 2 threads vs 1\(child ? " (no fence)" : "")", target: "≥ \(target)×",
                        measured: ratio, text: times(ratio), pass: ratio >= target))
            }
            if typed && threads == 4 {
                let vsTwo = cases[1].stats.median / c.stats.median
                checks.append(
                    section.check(
                        "typed, same name, 4 threads vs 2 threads\(child ? " (no fence)" : "")", target: "≥ 0.9×",
                        measured: vsTwo, text: times(vsTwo), pass: vsTwo >= 0.9))
            }
            figures["\(label) \(threads)"] = ratio
            figures["\(label) \(threads) cpu"] = cpuScaling
            section.add(
                [
                    label, "\(threads)", ns(c.stats.median), fmt(1_000 / c.stats.median, 1), percent(c.stats.spread),
                    times(ratio), ns(cpuMedian[index]), times(cpuScaling), checks.first?.target ?? "", verdict(checks),
                ],
                Row(
                    contender: label, size: threads,
                    figures: [
                        "wallNsPerPost": c.stats.median, "throughputVsOneThread": ratio,
                        "cpuNsPerPostPerThread": cpuMedian[index], "cpuScaling": cpuScaling,
                        "iterationsPerThreadPerRepetition": Double(c.iterations),
                    ],
                    target: checks.first?.target, pass: checks.isEmpty ? nil : checks.allSatisfy(\.pass)))
        }
    }
    withExtendedLifetime((tokens, observers)) {}
    if child {
        // One subscriber, one thread: the typed post against NotificationCenter in this mode.
        let ratio = typedOneVersusFoundation(config)
        print("CHILD typed1-vs-nc \(ratio)")
        print("CHILD same-name-2 \(figures["PostCenter typed Topic<Int> 2"] ?? 0)")
        print("CHILD same-name-2-cpu \(figures["PostCenter typed Topic<Int> 2 cpu"] ?? 0)")
    } else {
        addFenceFreeChecks(&section, config)
    }
    return section
}

/// Single-thread typed post to 1 subscriber vs `NotificationCenter` to 1 observer: the ratio.
func typedOneVersusFoundation(_ config: RunConfig) -> Double {
    let counter = Counter.make()
    let center = PostCenter()
    let topic = Topic<Int>("bench.one")
    let token = center.subscribe(topic) { v in counter.pointer.pointee &+= v }
    let foundation = NotificationCenter()
    let name = Notification.Name("bench.one")
    let observer = foundation.addObserver(forName: name, object: nil, queue: nil) { _ in counter.pointer.pointee &+= 1 }
    let typed = Case(
        "typed", prepare: { counter.reset() }, body: { _ = postTyped(center, topic, 1, $0) },
        verify: { expectCalls(counter.value, $0, "typed post to 1") })
    let nc = Case(
        "nc", prepare: { counter.reset() }, body: { postNotification(foundation, name, nil, $0) },
        verify: { expectCalls(counter.value, $0, "NotificationCenter post to 1") })
    measure([typed, nc], config)
    withExtendedLifetime((token, observer)) {}
    return nc.stats.median / typed.stats.median
}

/// Runs this section again in a child process with `SUBSCRIPTIONS_PROCESS_FENCE=off` (the
/// protocol of platforms without a process-wide fence) and adds its two targets.
func addFenceFreeChecks(_ section: inout Section, _ config: RunConfig) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
    process.arguments = ["--only", "threads", "--repetitions", "\(config.repetitions)"]
    var environment = ProcessInfo.processInfo.environment
    environment["SUBSCRIPTIONS_PROCESS_FENCE"] = "off"
    environment[childVariable] = "1"
    process.environment = environment
    let pipe = Pipe()
    process.standardOutput = pipe
    do { try process.run() } catch { return }
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    var values: [String: Double] = [:]
    for line in output.split(separator: "\n") where line.hasPrefix("CHILD ") {
        let parts = line.split(separator: " ")
        if parts.count == 3 { values[String(parts[1])] = Double(parts[2]) }
    }
    let typed = values["typed1-vs-nc"] ?? 0
    let same = values["same-name-2"] ?? 0
    let sameCPU = values["same-name-2-cpu"] ?? 0
    let c1 = section.check(
        "no fence: typed post to 1 vs NotificationCenter", target: "≥ 10×", measured: typed, text: times(typed),
        pass: typed >= 10)
    let c2 = section.check(
        "no fence: typed, same name, 2 threads vs 1", target: "≥ 1.6×", measured: same, text: times(same),
        pass: same >= 1.6)
    for (label, check) in [("no fence: typed 1 sub vs NC (1 thread)", c1), ("no fence: typed same name", c2)] {
        section.add(
            [
                label, label.contains("same") ? "2" : "1", "", "", "", check.measuredText, "",
                label.contains("same") ? times(sameCPU) : "", check.target, verdict([check]),
            ],
            Row(
                contender: label, size: nil, figures: ["ratio": check.measured], target: check.target,
                pass: check.pass))
    }
}
