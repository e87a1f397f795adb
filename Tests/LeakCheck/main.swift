// LeakCheck: creates and drops subscriptions, observers and payloads in every style, then checks
// that every tracked object was deinitialised, that no subscription is left, and that the malloc
// heap came back to its size after the warm-up (within a small bound).
//
//     swift run -c release LeakCheck [subscriptions] [--no-heap-check] [--run-loop] [--only=N] [--inject-leak]
//
// `subscriptions` (default 1,000,000) is the number of subscriptions made in total, spread evenly
// over the styles below; each comes with its payload objects and, for the selector styles, its
// observer. `Scripts/leak-check.sh` runs it natively and under valgrind's memcheck (with fewer
// subscriptions and `--no-heap-check`, since valgrind replaces malloc and reports leaks itself).
//
// The work runs on a worker thread while the main thread runs `dispatchMain()` (with `--run-loop`,
// its run loop instead, for valgrind), so that main-actor deliveries scheduled from the worker are
// really drained. Exit status 0 when everything was released, 1 with a message on standard error
// otherwise.

import Dispatch
import Foundation
import Subscriptions
import SubscriptionsFoundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// MARK: Tracking

/// Live instances of one kind of tracked object.
final class Census: Sendable {
    let name: String
    private let count = Atomic<Int>(0)
    init(_ name: String) { self.name = name }
    func up() { count.add(1, ordering: .relaxed) }
    func down() { count.subtract(1, ordering: .relaxed) }
    var live: Int { count.load(ordering: .acquiring) }
}

/// Globals are `static let`s of this namespace (top-level variables of `main.swift` belong to the
/// main actor, and the work runs on another thread).
enum Track {
    static let captures = Census("objects captured by handler closures")
    static let observers = Census("observers")
    static let payloads = Census("payload objects")
    static let senders = Census("senders")
    static let centers = Census("centers")
    static let all = [captures, observers, payloads, senders, centers]

    /// Handler calls, to check that the work was really done.
    static let calls = Atomic<Int>(0)
    /// The calls the styles said to expect (only touched by the worker thread).
    nonisolated(unsafe) static var expected = 0
    /// Where `--inject-leak` drops its blocks (a global, so the optimizer keeps the `malloc`).
    nonisolated(unsafe) static var leaked: UnsafeMutableRawPointer?
}

func called() { Track.calls.add(1, ordering: .relaxed) }

/// An object a handler closure captures: it lives exactly as long as the center holds the closure.
final class Capture: Sendable {
    init() { Track.captures.up() }
    deinit { Track.captures.down() }
}

/// A payload, sent as `PostObject.data` or as a typed topic's payload.
final class Payload: Sendable {
    let value: Int
    init(_ value: Int) {
        self.value = value
        Track.payloads.up()
    }
    deinit { Track.payloads.down() }
}

final class Sender: Sendable {
    init() { Track.senders.up() }
    deinit { Track.senders.down() }
}

/// The protocol of the protocol-observer style.
protocol LeakObserver: AnyObject {
    func leaked(_ payload: Payload)
}

/// An observer for selector registrations and protocol observers; it may own its token, as real
/// observers do.
final class Observer: LeakObserver, @unchecked Sendable {
    // @unchecked: `token` is only touched by the worker thread.
    var token: Subscription?
    init() { Track.observers.up() }
    deinit { Track.observers.down() }
    func receive(_ post: PostObject) { called() }
    func receive(payload: Payload) { called() }
    func leaked(_ payload: Payload) { called() }
}

// MARK: Styles

/// One way of subscribing, posting and letting go. Each makes exactly one subscription (its
/// `run` may make a few short-lived objects around it) and returns how many handler calls it
/// expects, so the total can be checked.
struct Style: Sendable {
    let name: String
    /// Goes through Dispatch queues (see `main()` for why the heap check leaves these out).
    var dispatch = false
    let run: @Sendable (_ center: PostCenter, _ i: Int, _ queue: DispatchQueue) -> Int
}

let countTopic = Topic<Int>("leak.count")
let itemTopic = Topic<Payload>("leak.typed")

extension Style {
    static let all: [Style] = [
        Style(name: "plain handler, post with data") { center, i, _ in
            let capture = Capture()
            var token: Subscription? = center.subscribe("leak.plain.\(i % 64)") { post in
                withExtendedLifetime(capture) {}
                if post.data is Payload { called() }
            }
            let payload = Payload(i)
            center.post("leak.plain.\(i % 64)", flag: "f", data: payload)
            token = nil
            if Options.injectLeak { Track.leaked = malloc(32) }  // the previous block is lost
            return 1
        },
        Style(name: "typed topic (object and value payloads)") { center, i, _ in
            let capture = Capture()
            let token = center.subscribe(itemTopic) { item in
                withExtendedLifetime(capture) {}
                if item.value >= 0 { called() }
            }
            center.post(itemTopic, Payload(i))
            center.post(countTopic, i)  // a value payload nobody takes
            token.cancel()
            return 1
        },
        Style(name: "selector, observer owns its token") { center, i, _ in
            var observer: Observer? = Observer()
            observer!.token = center.register("leak.observer", observer: observer!, selector: Observer.receive(_:))
            center.post("leak.observer", PostObject(flag: "x", data: Payload(i)))
            observer = nil  // takes its token with it
            center.post("leak.observer")  // reaches nobody now
            return 1
        },
        Style(name: "selector on a topic, observer dies first") { center, i, _ in
            var observer: Observer? = Observer()
            let token = center.register(itemTopic, observer: observer!, selector: Observer.receive(payload:))
            center.post(itemTopic, Payload(i))
            observer = nil
            center.post(itemTopic, Payload(i))  // reaches nobody now
            if token.isActive { fail("a registration whose observer died is still active") }
            return 1
        },
        Style(name: "one-shot, fired and unfired") { center, i, _ in
            let capture = Capture()
            let fired = center.subscribe("leak.once.\(i % 8)", once: true) { _ in
                withExtendedLifetime(capture) {}
                called()
            }
            center.post("leak.once.\(i % 8)")
            center.post("leak.once.\(i % 8)")
            withExtendedLifetime(fired) {}
            let unfired = center.subscribe(itemTopic, once: true) { _ in withExtendedLifetime(capture) {} }
            unfired.cancel()
            return 1
        },
        Style(name: "sender-filtered, sender dies") { center, i, _ in
            var sender: Sender? = Sender()
            let capture = Capture()
            let token = center.subscribe("leak.sender", from: sender!) { _ in
                withExtendedLifetime(capture) {}
                called()
            }
            center.post("leak.sender", PostObject(data: Payload(i)), from: sender!)
            sender = nil
            center.post("leak.sender", PostObject(), from: Sender())
            withExtendedLifetime(token) {}
            return 1
        },
        Style(name: "queued, some cancelled before they run", dispatch: true) { center, i, queue in
            let capture = Capture()
            let token = center.subscribe("leak.queued", delivery: .queue(queue)) { post in
                withExtendedLifetime(capture) {}
                called()
            }
            let payload = Payload(i)
            if i % 2 == 0 {
                // Held in the suspended queue until after the cancel: the scheduled delivery
                // (and what it holds) must be dropped.
                queue.suspend()
                center.post("leak.queued", flag: "q", data: payload)
                token.cancel()
                queue.resume()
                return 0
            }
            center.post("leak.queued", flag: "q", data: payload)
            queue.sync {}
            return 1
        },
        Style(name: "main actor, posted on the main thread and from the worker", dispatch: true) { center, i, _ in
            let capture = Capture()
            let token = center.subscribe("leak.main", delivery: .mainActor) { _ in
                withExtendedLifetime(capture) {}
                called()
            }
            DispatchQueue.main.sync { _ = center.post("leak.main", flag: "sync") }  // runs synchronously
            center.post("leak.main", flag: "async")  // scheduled on the main queue
            DispatchQueue.main.sync {}
            token.cancel()
            return 2
        },
        Style(name: "nested post, cancel from inside the handler") { center, i, _ in
            let capture = Capture()
            let inner = center.subscribe("leak.inner") { _ in called() }
            let box = TokenBox()
            box.token = center.subscribe("leak.outer") { [box] _ in
                withExtendedLifetime(capture) {}
                called()
                center.post("leak.inner", data: Payload(i))
                box.token?.cancel()  // deferred: its own delivery is in progress
                box.token = nil
            }
            center.post("leak.outer")
            inner.cancel()
            return 2
        },
        Style(name: "tokens outliving their center") { _, i, _ in
            var center: PostCenter? = PostCenter()
            Track.centers.up()
            let capture = Capture()
            let token = center!.subscribe("leak.orphan") { _ in
                withExtendedLifetime(capture) {}
                called()
            }
            center!.post("leak.orphan", data: Payload(i))
            center = nil
            Track.centers.down()
            token.pause()
            token.resume()
            token.cancel()
            return 1
        },
        Style(name: "async sequence: iterated, and dropped unused", dispatch: true) { center, i, _ in
            let sequence = center.posts(itemTopic)
            let unused = center.posts("leak.async")
            center.post(itemTopic, Payload(i))
            center.post("leak.async", data: Payload(i))
            let done = DispatchSemaphore(value: 0)
            Task {
                do {  // the iterator (and with it the subscription) goes before the signal
                    var iterator = sequence.makeAsyncIterator()
                    if let item = await iterator.next(), item.value == i { called() }
                }
                done.signal()
            }
            done.wait()
            withExtendedLifetime(unused) {}
            return 1
        },
        Style(name: "Foundation bridge: NotificationCenter token and forwarding") { center, i, _ in
            let notifications = NotificationCenter()
            let capture = Capture()
            let token = notifications.subscribe(to: Notification.Name("leak.foundation")) { _ in
                withExtendedLifetime(capture) {}
                called()
            }
            let forward = center.forward("leak.forward", to: notifications)
            let forwarded = notifications.subscribe(to: Notification.Name("leak.forward")) { note in
                if PostObject(note)?.data is Payload { called() }
            }
            notifications.post(name: Notification.Name("leak.foundation"), object: nil)
            center.post("leak.forward", data: Payload(i))
            token.cancel()
            forward.cancel()
            forwarded.cancel()
            return 2
        },
        Style(name: "protocol observers: added, observed with a token, removed, dying") { center, i, _ in
            var kept: Observer? = Observer()
            var dying: Observer? = Observer()
            center.addObserver(kept!, for: (any LeakObserver).self)
            dying!.token = center.observe(dying!, for: (any LeakObserver).self)
            let payload = Payload(i)
            let first = center.notify((any LeakObserver).self) { $0.leaked(payload) }
            dying = nil  // takes its token, and so its registration, with it
            center.removeObserver(kept!, for: (any LeakObserver).self)
            let second = center.notify((any LeakObserver).self) { $0.leaked(payload) }
            kept = nil
            if first != 2 || second != 0 { fail("notify reached \(first) then \(second) observers, expected 2 then 0") }
            return 2
        },
    ]
}

final class TokenBox: @unchecked Sendable {
    // @unchecked: only touched by the thread that posts (the worker).
    var token: Subscription?
}

// MARK: Heap

/// Bytes in use in the malloc heap (including mmapped chunks), or `nil` when unknown.
///
/// glibc's `mallinfo2()` is the direct way, but Swift's Glibc module does not import
/// `<malloc.h>`, and it returns a struct (which `dlsym` cannot call portably). `malloc_stats()`
/// takes no argument and prints the same totals to standard error, so it is called through
/// `dlsym` with standard error redirected to a temporary file, and its
/// "Total (incl. mmap): ... in use bytes" line is read back.
func heapInUse() -> Int? {
    #if canImport(Glibc)
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "malloc_stats") else { return nil }
        let mallocStats = unsafeBitCast(symbol, to: (@convention(c) () -> Void).self)
        var path = Array("/tmp/leakcheck-XXXXXX".utf8CString)
        let file = path.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard file >= 0 else { return nil }
        path.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        defer { close(file) }
        // `malloc_stats` writes with `fprintf(stderr, ...)`; nothing else is buffered in stderr
        // here (this program writes to it only through `FileHandle`, unbuffered).
        let saved = dup(2)
        dup2(file, 2)
        mallocStats()
        dup2(saved, 2)
        close(saved)
        lseek(file, 0, SEEK_SET)
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(file, $0.baseAddress, 4096) }
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let totals = text.range(of: "Total (incl. mmap):") else { return nil }
        let tail = text[totals.upperBound...]
        // "in use bytes     =      74352"
        guard let inUse = tail.range(of: "in use bytes"), let equals = tail[inUse.upperBound...].firstIndex(of: "=")
        else { return nil }
        let digits = tail[tail.index(after: equals)...].drop { $0 == " " }.prefix { $0.isNumber }
        return Int(digits)
    #else
        return nil
    #endif
}

// MARK: Main

enum Options {
    static let arguments = CommandLine.arguments.dropFirst()
    static let total = arguments.first { Int($0) != nil }.flatMap { Int($0) } ?? 1_000_000
    static let checkHeap = !arguments.contains("--no-heap-check")
    /// `--inject-leak`: the first style leaks a 32-byte `malloc` block per round, to show that
    /// the heap check (and valgrind) fail when they should.
    static let injectLeak = arguments.contains("--inject-leak")
    /// `--run-loop`: drain the main queue with the main run loop instead of `dispatchMain()`.
    static let runLoop = arguments.contains("--run-loop")
    /// `--only=N` runs style N alone (to find which one leaks).
    static let styles: [Style] =
        arguments.first { $0.hasPrefix("--only=") }
        .flatMap { Int($0.dropFirst("--only=".count)) }.map { [Style.all[$0]] } ?? Style.all
    /// Heap growth tolerated over the measured phase (see `main()`). A leak of the smallest
    /// malloc chunk (32 bytes) in a tenth of the rounds of a single style (10,000 of the
    /// 800,000 measured rounds) already exceeds it; the measured noise is 1 to 3 KB.
    static let heapBound = 256 * 1024
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data(("LeakCheck: FAILED: " + message + "\n").utf8))
    exit(1)
}

/// Runs `count` subscriptions, round robin over the styles, and returns the handler calls expected.
/// Runs `count` subscriptions, round robin over `styles`, and returns the handler calls expected.
func workload(_ styles: [Style], _ center: PostCenter, _ count: Int, _ queue: DispatchQueue) -> Int {
    guard !styles.isEmpty else { return 0 }
    var expected = 0
    for i in 0..<count {
        expected += styles[i % styles.count].run(center, i, queue)
    }
    queue.sync {}
    DispatchQueue.main.sync {}
    return expected
}

func check(_ center: PostCenter, _ phase: String) {
    // A dropped token whose handler is not running releases its closure with the next batch of
    // dropped tokens (Guarantees rule 8): shortly after the drop when other threads hold thread
    // records. Wait for it, bounded (10 s); a closure never released still fails below.
    for _ in 0..<10_000 where Track.all.contains(where: { $0.live != 0 }) {
        usleep(1_000)
    }
    for census in Track.all where census.live != 0 {
        fail("\(phase): \(census.live) \(census.name) still alive")
    }
    let names =
        (0..<64).map { "leak.plain.\($0)" } + (0..<8).map { "leak.once.\($0)" }
        + [
            "leak.typed", "leak.count", "leak.observer", "leak.sender", "leak.queued", "leak.main", "leak.inner",
            "leak.outer", "leak.async", "leak.forward",
        ]
    for name in names where center.subscriptionCount(for: name) != 0 {
        fail("\(phase): \(center.subscriptionCount(for: name)) subscriptions of \"\(name)\" left")
    }
    if !center.observers(for: (any LeakObserver).self).isEmpty {
        fail("\(phase): protocol observers left")
    }
    if Track.calls.load(ordering: .relaxed) != Track.expected {
        fail("\(phase): \(Track.calls.load(ordering: .relaxed)) handler calls, expected \(Track.expected)")
    }
}

/// Three phases:
/// 1. Warm-up, every style: fills the runtime's metadata and conformance caches, the center's
///    name table and Dispatch's thread pool, which all legitimately stay allocated.
/// 2. The styles that do not go through Dispatch, for their share of the subscriptions, between
///    two heap readings. These are exact to a kilobyte or two.
/// 3. The Dispatch styles (queued and main-actor delivery). They are left out of the heap
///    reading because libdispatch keeps a per-thread cache of up to 65,536 freed continuations
///    (64 bytes each, so up to 4 MiB per worker thread): a block allocated on this thread and
///    released on a queue's worker thread lands in that worker's cache, so the heap grows by
///    megabytes that are reused later, not leaked. Their leaks are caught by the instance
///    counts and subscription counts here, and by valgrind (`Scripts/leak-check.sh`).
func main() {
    let started = Date()
    let queue = DispatchQueue(label: "leakcheck.queue")
    var center: PostCenter? = PostCenter()
    let styles = Options.styles
    let plain = styles.filter { !$0.dispatch }
    let dispatch = styles.filter { $0.dispatch }
    let warmUp = min(Options.total, 20 * styles.count)
    let rest = Options.total - warmUp
    let plainShare = rest * plain.count / styles.count

    Track.expected += workload(styles, center!, warmUp, queue)
    check(center!, "after the warm-up")

    let baseline = Options.checkHeap ? heapInUse() : nil
    Track.expected += workload(plain, center!, plainShare, queue)
    check(center!, "after \(plainShare) subscriptions without Dispatch")
    let after = Options.checkHeap ? heapInUse() : nil

    Track.expected += workload(dispatch, center!, rest - plainShare, queue)
    check(center!, "after \(Options.total) subscriptions")
    center = nil
    check(PostCenter(), "after the center went away")

    var heapReport = "heap check skipped"
    if Options.checkHeap {
        guard let baseline, let after else { fail("cannot read the heap size (malloc_stats unavailable)") }
        let growth = after - baseline
        if growth > Options.heapBound {
            fail("the heap grew by \(growth) bytes over \(plainShare) subscriptions (bound \(Options.heapBound))")
        }
        heapReport =
            "heap \(baseline) -> \(after) bytes in use over \(plainShare) subscriptions without Dispatch "
            + "(\(growth >= 0 ? "+" : "")\(growth), bound \(Options.heapBound))"
    }
    let seconds = Date().timeIntervalSince(started)
    print(
        "LeakCheck: OK: \(Options.total) subscriptions in \(styles.count) styles, \(Track.expected) handler calls, "
            + "every observer, payload, sender, center and captured object released; \(heapReport); "
            + String(format: "%.1f s", seconds))
}

Thread {
    main()
    exit(0)
}.start()
if Options.runLoop {
    // For valgrind, which crashes when the main thread parks in `dispatchMain()` (that calls
    // `pthread_exit`): the main run loop drains the main queue too, but Foundation keeps two
    // small blocks per `run(mode:before:)` call (still reachable, so valgrind does not count
    // them as lost; the heap check is off under valgrind anyway).
    while true { _ = RunLoop.main.run(mode: .default, before: .distantFuture) }
} else {
    dispatchMain()
}
