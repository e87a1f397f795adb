import Dispatch
import Foundation
import Subscriptions
import Synchronization

/// A thread-safe, append-only log of what handlers saw, in the order they appended.
///
/// Handlers run on posting threads and queues, so every access takes `lock`.
final class Recorder<Value: Sendable>: @unchecked Sendable {
    // @unchecked: `storage` is only touched while holding `lock`. `NSLock` rather than
    // `Synchronization.Mutex`: on Linux, ThreadSanitizer does not see `Mutex`'s futex-based
    // locking and would report every recorder access as a race, hiding real ones.
    private let lock = NSLock()
    private var storage: [Value] = []

    init() {}

    /// Appends `value` at the end of the log.
    func append(_ value: Value) {
        lock.withLock { storage.append(value) }
    }

    /// A snapshot of the log.
    var values: [Value] {
        lock.withLock { storage }
    }

    /// How many values were appended.
    var count: Int {
        lock.withLock { storage.count }
    }

    /// Empties the log.
    func reset() {
        lock.withLock { storage.removeAll() }
    }
}

/// A thread-safe integer counter.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    init() {}

    /// Adds one.
    func increment() {
        value.add(1, ordering: .sequentiallyConsistent)
    }

    /// Adds `n`.
    func add(_ n: Int) {
        value.add(n, ordering: .sequentiallyConsistent)
    }

    /// The current count.
    var count: Int {
        value.load(ordering: .sequentiallyConsistent)
    }
}

/// A thread-safe boolean, for "this happened" facts checked across threads.
final class Flag: Sendable {
    private let value: Atomic<Bool>

    init(_ initial: Bool = false) {
        value = Atomic(initial)
    }

    func set() { value.store(true, ordering: .sequentiallyConsistent) }
    var isSet: Bool { value.load(ordering: .sequentiallyConsistent) }
}

/// An object whose lifetime a test watches: captured by handlers, passed as data. Counts live
/// instances in the `LiveObjects` it was made with (up in `init`, down in `deinit`).
final class Tracked: Sendable {
    let name: String
    private let live: LiveObjects?

    init(_ name: String = "", live: LiveObjects? = nil) {
        self.name = name
        self.live = live
        live?.enter()
    }

    deinit {
        live?.leave()
    }
}

/// A counter of live instances.
final class LiveObjects: Sendable {
    private let value = Atomic<Int>(0)

    init() {}

    func enter() { value.add(1, ordering: .sequentiallyConsistent) }
    func leave() { value.subtract(1, ordering: .sequentiallyConsistent) }

    /// How many instances are alive.
    var alive: Int { value.load(ordering: .sequentiallyConsistent) }
}

/// A class payload for typed topics.
final class User: Sendable, Equatable {
    let name: String
    init(_ name: String) { self.name = name }
    static func == (lhs: User, rhs: User) -> Bool { lhs.name == rhs.name }
}

/// A class hierarchy for payload-type matching.
class Animal: @unchecked Sendable {
    // @unchecked: immutable; non-final only so that `Dog` can subclass it.
    let name: String
    init(_ name: String) { self.name = name }
}

final class Dog: Animal, @unchecked Sendable {}

/// A value payload for typed topics.
struct Point: Sendable, Equatable {
    var x: Int
    var y: Int
}

/// An identity for the calling thread, comparable across threads while they live.
func currentThreadID() -> ObjectIdentifier {
    ObjectIdentifier(Thread.current)
}

/// A key to tell, from inside a block, which queue it runs on.
let queueNameKey = DispatchSpecificKey<String>()

/// A serial queue that records its name under `queueNameKey`.
func makeSerialQueue(_ label: String) -> DispatchQueue {
    let queue = DispatchQueue(label: label)
    queue.setSpecific(key: queueNameKey, value: label)
    return queue
}

/// The label of the queue the caller runs on, if it was made by `makeSerialQueue`.
func currentQueueName() -> String? {
    DispatchQueue.getSpecific(key: queueNameKey)
}

/// Where a captured object's deinit ran: on which thread, and whether the handler's running call
/// had ended by then.
final class ReleaseLog: Sendable {
    struct Entry: Sendable {
        let thread: ObjectIdentifier
        let afterTheCall: Bool
    }

    private let storage = Reliability.Locked<[Entry]>([])

    func append(_ entry: Entry) { storage.withLock { $0.append(entry) } }
    var entries: [Entry] { storage.current }
}

/// Captured by a handler: its deinit records where the center released the closure.
final class ReleaseProbe: Sendable {
    let log: ReleaseLog
    let callEnded: Flag

    init(_ log: ReleaseLog, _ callEnded: Flag) {
        self.log = log
        self.callEnded = callEnded
    }

    deinit {
        log.append(ReleaseLog.Entry(thread: currentThreadID(), afterTheCall: callEnded.isSet))
    }
}

/// Waits, bounded (10 s), until `condition` holds; returns whether it did.
///
/// For the closures of dropped tokens: a token's deinit never waits, and when other threads hold
/// thread records it parks the entry for the next batch (`Engine/Core/Retirements.swift`), settled by
/// a job on a global queue that the drop schedules, so the captures go shortly after the drop
/// rather than inside it. A closure that is never released still fails the test.
func eventually(_ condition: () -> Bool) -> Bool {
    for attempt in 0..<100_000 {
        if condition() { return true }
        if attempt < 100 { sched_yield() } else { usleep(100) }
    }
    return condition()
}

/// An object with an identity and nothing else: a sender, or the data of a typed post.
final class DefaultsSender: Sendable {}
