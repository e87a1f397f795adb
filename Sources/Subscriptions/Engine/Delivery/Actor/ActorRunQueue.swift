import Synchronization

/// An entry whose mailbox an `_ActorRunQueue` drains on actor `A`: what the queue needs of the
/// entries in line, whatever their payload type.
class _ActorLineEntry<A: Actor>: _DrainingEntry, @unchecked Sendable {
    // @unchecked: `nextInLine` and `routeInLine` are only touched under the queue's lock.
    /// The entry after this one in its queue's line, and the route to drain it for. Guarded by
    /// the queue's lock; set only while the entry is in line.
    @exclusivity(unchecked) final var nextInLine: _ActorLineEntry<A>?
    @exclusivity(unchecked) final var routeInLine: _Route?

    /// Hands pending payloads to the handler on the actor, counting them in `handled`; `true`
    /// when it stopped at `_ActorRunQueue.batchLimit` (the entry goes back in line).
    func drainSome(on actor: isolated A, _ route: _Route, handled: inout Int) -> Bool { fatalError("abstract") }

    /// Drops what is pending and ends the burst: the actor is gone.
    func dropPending() { fatalError("abstract") }
}

/// The entries of one center on one actor that have payloads waiting, in line, and the one task
/// that drains them on the actor.
///
/// An entry whose mailbox gets the first payload of a burst joins the line; if no task is
/// running, the same call starts one (inside a post, when the post ends: `_DeferredStart`). The
/// task takes the entries in turn. It counts the payloads it hands over; once the count reaches
/// `batchLimit`, the entry being drained joins the line again, at its end, and the task yields
/// the actor so that its other work runs too. It ends as soon as it finds the line empty,
/// clearing `running` under the lock that a joining entry takes: no wake-up is lost. It does not
/// yield and look again for more posts first: a poster that posts one payload at a time and
/// waits for its delivery would pay for those trips through the executor on every post. So a
/// post that reaches N subscriptions on one actor costs one task, not N.
///
/// The queue holds the actor weakly; the task holds it only while it runs. Each entry holds its
/// queue; the center's table holds queues weakly (see `PostCenter._actorQueue(for:)`).
final class _ActorRunQueue<A: Actor>: _DeferredStart, @unchecked Sendable {
    // @unchecked: `first`, `last` and `running` are only touched under `locked`; `actor` is a
    // weak reference written once, in `init`.

    /// How many payloads the task hands to handlers before it lets other work run on the actor.
    static var batchLimit: Int { 256 }

    @exclusivity(unchecked) private(set) weak var actor: A?
    @exclusivity(unchecked) private var first: _ActorLineEntry<A>?
    @exclusivity(unchecked) private unowned(unsafe) var last: _ActorLineEntry<A>?
    @exclusivity(unchecked) private var running = false
    /// A spin lock around the line: its sections are a few instructions long.
    private let locked = Atomic<Bool>(false)

    init(actor: A) {
        self.actor = actor
    }

    override func start() { startTask() }

    /// Puts `entry` (with payloads in its mailbox, `draining` set) at the end of the line, and
    /// starts the task unless one is running.
    func schedule(_ entry: _ActorLineEntry<A>, _ route: _Route) {
        _spinLock(locked)
        append(entry, route)
        let start = !running
        running = true
        _spinUnlock(locked)
        guard start else { return }
        // Inside a post, the task starts when the post ends: the post may reach more entries of
        // this actor, and a task started now could find the line empty before they join it and
        // end, so that the post would start several tasks instead of one.
        let record = _ThreadRecord.current
        if record.posts > 0 { deferStart(to: record) } else { startTask() }
    }

    /// Appends `entry` to the line. Under the lock.
    @inline(__always)
    private func append(_ entry: _ActorLineEntry<A>, _ route: _Route) {
        entry.routeInLine = route
        if let last { last.nextInLine = entry } else { first = entry }
        last = entry
    }

    /// The first entry in line, removed from it; `nil` (and the task's end) when the line is empty.
    private func next() -> (_ActorLineEntry<A>, _Route)? {
        _spinLock(locked)
        guard let entry = first else {
            running = false
            _spinUnlock(locked)
            return nil
        }
        first = entry.nextInLine
        if first == nil { last = nil }
        entry.nextInLine = nil
        let route = entry.routeInLine.unsafelyUnwrapped
        entry.routeInLine = nil
        _spinUnlock(locked)
        return (entry, route)
    }

    /// Starts the one task of a burst.
    private func startTask() {
        let box = _UncheckedSendable(self)
        // Detached, at one fixed priority: the task serves every post of the burst, whoever
        // posted it, so it takes nothing from the poster that happened to start it (neither
        // its priority nor its task-local values).
        Task.detached(priority: _deliveryTaskPriority) {
            let queue = box.value
            guard let actor = queue.actor else {
                while let (entry, _) = queue.next() { entry.dropPending() }
                return
            }
            await queue.run(on: actor)
        }
    }

    /// Drains the entries in line, in turn, on the actor, until the line is empty.
    private func run(on actor: isolated A) async {
        var handled = 0
        while let (entry, route) = next() {
            if entry.drainSome(on: actor, route, handled: &handled) {
                _spinLock(locked)
                append(entry, route)
                _spinUnlock(locked)
            }
            if handled >= Self.batchLimit {
                handled = 0
                await Task.yield()
            }
        }
    }
}

/// The priority of the tasks that run actor handlers (`subscribe(_:on:…)`): `.medium`, for
/// every post, whatever the poster's priority. See `_ActorRunQueue.startTask()`.
let _deliveryTaskPriority = TaskPriority.medium

/// A weak reference to a center's run queue of one actor, in `PostCenter._actorQueues`.
struct _WeakRunQueue: @unchecked Sendable {
    // @unchecked: a weak reference to a `Sendable` class instance.
    weak var queue: AnyObject?
}

extension PostCenter {
    /// This center's run queue of `actor`, made on first use. The table holds queues weakly (the
    /// entries hold them); a queue whose actor is gone is replaced, so an actor allocated at a
    /// dead one's address gets a queue of its own.
    func _actorQueue<A: Actor>(for actor: A) -> _ActorRunQueue<A> {
        _actorQueues.withLock { table in
            let id = ObjectIdentifier(actor)
            if let queue = table.queues[id]?.queue as? _ActorRunQueue<A>, queue.actor === actor { return queue }
            let queue = _ActorRunQueue(actor: actor)
            table.queues[id] = _WeakRunQueue(queue: queue)
            if table.queues.count >= table.pruneAt {
                table.queues = table.queues.filter { $0.value.queue != nil }
                table.pruneAt = Swift.max(16, 2 * table.queues.count)
            }
            return queue
        }
    }
}

/// The run queues of a center, by actor; see `PostCenter._actorQueue(for:)`.
struct _ActorQueueTable {
    var queues: [ObjectIdentifier: _WeakRunQueue] = [:]
    /// The size at which dead queues are dropped from the table: twice the live ones at the
    /// last pruning, so that pruning costs O(1) per queue made.
    var pruneAt = 16
}
