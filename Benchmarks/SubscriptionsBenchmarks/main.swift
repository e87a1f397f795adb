// The benchmark of issue 5: PostCenter against NotificationCenter and a bare closure loop.
//
//   swift run -c release SubscriptionsBenchmarks [--quick] [--json PATH] [--clock cpu|wall] [--only SECTIONS]
//   swift run -c release SubscriptionsBenchmarks --callgrind MODE [ITERATIONS]
//
// Files: Harness (timing, medians, checks), Handlers (the one handler body every contender
// runs), Contenders (the timed loops), *Benchmarks (one section each), Report (tables, JSON),
// Callgrind (tiny modes for Benchmarks/callgrind.sh).

import Foundation

let allSections = [
    "fanout", "unheard", "subscribeCancel", "priority", "patterns", "churn", "longDelivery", "memory", "threads",
    "actors",
    "mainActor",
    "actorMessages", "queueAndPosts", "cancelLoad", "coalesced",
]

let usage = """
    usage: SubscriptionsBenchmarks [--quick] [--json PATH] [--repetitions N] [--clock cpu|wall] [--only SECTION,...]
           SubscriptionsBenchmarks --callgrind MODE [ITERATIONS]

      --quick           3 repetitions of ≥ 5 ms, 1 memory run: a smoke run, not for quoting
      --json PATH       also write every figure and target check to PATH
      --repetitions N   timed repetitions per case (default 9); the median is reported
      --clock cpu|wall  time single-threaded cases by the thread's CPU time (default: robust on a
                        shared machine) or by wall-clock time (an idle machine gives the same)
      --only SECTIONS   comma-separated subset of: \(allSections.joined(separator: ", "))
      --callgrind MODE  run one tiny mode (default 100000 operations) for valgrind; modes:
    \(callgrindModes.map { "                          \($0.name): \($0.help)" }.joined(separator: "\n"))
    """

struct Options {
    var quick = false
    var jsonPath: String? = nil
    var repetitions: Int? = nil
    var only: Set<String>? = nil
    var clock = Clock.cpu
    var callgrind: (mode: String, iterations: Int)? = nil
}

func parseOptions(_ arguments: [String]) -> Options {
    var options = Options()
    var rest = arguments[...]
    func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data((message + "\n\n" + usage + "\n").utf8))
        exit(2)
    }
    func value(for flag: String) -> String {
        guard let v = rest.popFirst() else { fail("\(flag) needs a value") }
        return v
    }
    while let arg = rest.popFirst() {
        switch arg {
        case "--quick": options.quick = true
        case "--json": options.jsonPath = value(for: arg)
        case "--repetitions":
            guard let n = Int(value(for: arg)), n > 0 else { fail("--repetitions needs a positive integer") }
            options.repetitions = n
        case "--clock":
            guard let clock = Clock(rawValue: value(for: arg)) else { fail("--clock takes cpu or wall") }
            options.clock = clock
        case "--only":
            let names = Set(value(for: arg).split(separator: ",").map(String.init))
            let unknown = names.subtracting(allSections)
            if !unknown.isEmpty { fail("unknown section(s) \(unknown.sorted()); choose from \(allSections)") }
            options.only = names
        case "--callgrind":
            let mode = value(for: arg)
            var iterations = 100_000
            if let next = rest.first, let n = Int(next) {
                iterations = n
                rest.removeFirst()
            }
            options.callgrind = (mode, iterations)
        case "--help", "-h":
            print(usage)
            exit(0)
        default: fail("unknown argument \(arg)")
        }
    }
    return options
}

func runBenchmarks(_ options: Options) {
    if let (mode, iterations) = options.callgrind {
        guard runCallgrindMode(mode, iterations: iterations) else {
            FileHandle.standardError.write(Data("unknown callgrind mode \(mode)\n\n\(usage)\n".utf8))
            exit(2)
        }
        return
    }
    let config = RunConfig(
        repetitions: options.repetitions ?? (options.quick ? 3 : 9),
        minimumRunNanos: options.quick ? 5_000_000 : 20_000_000, clock: options.clock)
    let wanted = options.only ?? Set(allSections)
    let loadBefore = loadAverage()

    #if DEBUG
        print("WARNING: debug build. Figures are meaningless; run `swift run -c release SubscriptionsBenchmarks`.\n")
    #endif
    print("# Subscriptions benchmark")
    print(
        "CPU: \(cpuModel()), \(ProcessInfo.processInfo.activeProcessorCount) logical CPUs; load average \(loadBefore)")
    print(
        "Each figure: median of \(config.repetitions) timed repetitions of ≥ \(config.minimumRunNanos / 1_000_000) ms after a warm-up;"
            + " every repetition checks its exact handler-call count.")
    print("Clock: \(config.clock.description) (two-thread test: wall time).")
    if let load = Double(loadBefore.split(separator: " ").first ?? ""),
        load > Double(ProcessInfo.processInfo.activeProcessorCount) * 0.5
    {
        print(
            "Note: load average \(load) on \(ProcessInfo.processInfo.activeProcessorCount) CPUs: other processes compete for them."
        )
    }
    if options.quick { print("--quick: a smoke run, not for quoting.") }
    print()

    var sections: [Section] = []
    func run(_ id: String, _ make: () -> Section) {
        guard wanted.contains(id) else { return }
        let section = make()
        printSection(section)
        sections.append(section)
    }
    run("fanout") { fanoutSection(config) }
    run("unheard") { unheardSection(config) }
    run("subscribeCancel") { subscribeCancelSection(config) }
    run("priority") { prioritySection(config) }
    run("patterns") { patternSection(config) }
    run("churn") { churnSection(config) }
    run("longDelivery") { longDeliverySection(config) }
    run("memory") { memorySection(config, quick: options.quick) }
    run("threads") { threadsSection(config) }
    run("threads") { sameNameSection(config) }
    run("actors") { actorsSection(config) }
    run("mainActor") { mainActorSection(config) }
    run("mainActor") { mainActorFromThreadSection(config) }
    run("actorMessages") { actorMessagesSection(config) }
    run("queueAndPosts") { queueAndPostsSection(config) }
    run("cancelLoad") { cancelLoadSection(config) }
    run("coalesced") { coalescedSection(config) }

    let checks = sections.flatMap(\.checks)
    printSummary(checks)
    let machine = Machine.current(loadBefore: loadBefore)
    print("Load average before \(machine.loadAverageBefore), after \(machine.loadAverageAfter).")

    if let path = options.jsonPath {
        let report = Report(
            generated: ISO8601DateFormatter().string(from: Date()), machine: machine,
            repetitions: config.repetitions, minimumRunMilliseconds: Double(config.minimumRunNanos) / 1e6,
            clock: config.clock.rawValue,
            quick: options.quick, sections: sections, checks: checks,
            passed: checks.filter(\.pass).count, total: checks.count)
        do {
            try writeJSON(report, to: path)
            print("Wrote \(path).")
        } catch {
            FileHandle.standardError.write(Data("could not write \(path): \(error)\n".utf8))
            exit(1)
        }
    }
}

runBurstChildIfAsked()
runBenchmarks(parseOptions(Array(CommandLine.arguments.dropFirst())))
