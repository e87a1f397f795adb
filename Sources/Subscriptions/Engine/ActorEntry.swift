import Synchronization

/// A registration whose handler runs isolated to an actor, which it holds weakly.
///
/// **Mailbox.** A post appends its payload to the `pending` buffer under the mailbox's own lock
/// (never the route's) and returns. The first post of a burst (`draining` was `false`) also puts
/// the entry in its actor's run queue (`_ActorRunQueue`, one per center and actor), which runs
/// one task on the actor while any of its entries has payloads. For each entry in line, the task
/// exchanges the pending buffer for its own empty one under the lock, calls the handler for each
/// payload without the lock, and repeats until it finds the mailbox empty, clearing `draining`
/// under the same lock (a later post sees `draining` cleared, under the lock, and puts the entry
/// in line again, so no wake-up is lost). So the posts of a burst cost one task for all of a
/// center's subscriptions on one actor, payloads reach each handler in the order their posts took
/// the lock (post order, for posts of one thread), nothing is run twice, and in the steady state
/// a delivery allocates nothing: the two buffers keep their capacity.
///
/// The buffers are managed by hand (`_PayloadBuffer`) rather than as `[Payload]`: this class's
/// methods run unspecialised (they are reached through the entry's vtable), where every use of
/// `Array<Payload>` or of a generic struct or closure over `Payload` asks the runtime for its
/// type metadata, a hash-table lookup that cost more than the rest of the append.
///
/// **Cancellation.** Each run of handler calls happens inside a queued-call frame on the route
/// (`_beginQueuedCall`, which refuses a cancelled or paused entry), so `cancel()` on another
/// thread waits for a handler running on the actor, and one made by the handler itself, on the
/// frame's own thread, returns at once. Before each call the entry's state is read again: a
/// cancelled or paused entry skips the rest, and those payloads are dropped.
///
/// **Lifetime.** The actor is held weakly; a pending task holds it only while it runs on it. The
/// task holds the entry, so a token dropped meanwhile leaves a cancelled entry that the task
/// drains to nothing.
final class _ActorEntry<A: Actor, Payload: Sendable>: _ActorMailbox<A>, @unchecked Sendable {
    // @unchecked: `handler` is written only by `releaseHandler()`, after the canceller's wait,
    // and read only inside a queued-call frame after checking the state, so the two never
    // overlap; `mailbox` is locked.

    /// The actor, held weakly by the run queue: `nil` once it is gone.
    var actor: A? { queue.actor }
    @exclusivity(unchecked) var handler: ((isolated A, Payload) throws -> Void)?
    /// Payloads posted and not yet taken by the draining task, oldest first. Guarded by `locked`.
    @exclusivity(unchecked) private var pending = _PayloadBuffer()
    /// An empty buffer with capacity, handed to the next draining task. Guarded by `locked`.
    @exclusivity(unchecked) private var spare = _PayloadBuffer()
    /// Whether a draining task is scheduled or running. Guarded by `locked`.
    @exclusivity(unchecked) private var draining = false
    /// Payloads appended and done, and waiters of `waitForPendingDeliveries()`. Guarded by `locked`.
    @exclusivity(unchecked) private var progress = _MailboxProgress()
    /// The center's tracker, which knows this subscription while its drain runs.
    let tracker: _DeliveryTracker?
    /// For `replay: true`: the version of the retained post replayed (0: none). Written before
    /// the entry is published; a retained post up to it reaching the entry live is dropped.
    @exclusivity(unchecked) var replayed: UInt64 = 0
    /// The only sender this subscription accepts (`filtered`), held weakly.
    weak var sender: AnyObject?  // written only in init (an immutable weak property needs Swift 6.3)
    let filtered: Bool
    /// A one-shot (`once: true`): the first post that reaches it claims it (`spent`), and the
    /// entry leaves its route before the payload is appended.
    let once: Bool
    /// Whether a post found the actor gone and reported it (`Diagnostic.subscriberGone`).
    let goneNoted = Atomic<Bool>(false)
    /// A spin lock around the mailbox (`pending`, `spare`, `draining`): its sections are a few
    /// instructions long (an append, an exchange), and the poster and the draining task take it
    /// alternately from two threads, where a mutex that sleeps at once on contention (glibc's)
    /// costs a system call per handover. It spins a little, then yields the processor, so a
    /// preempted holder does not stall the other side. An atomic of this module, so
    /// ThreadSanitizer sees it.
    private let locked = Atomic<Bool>(false)

    /// The run queue of `actor` in this entry's center: it drains this entry's mailbox.
    let queue: _ActorRunQueue<A>

    init(
        queue: _ActorRunQueue<A>, tracker: _DeliveryTracker?, sender: AnyObject? = nil, once: Bool = false,
        handler: @escaping (isolated A, Payload) throws -> Void
    ) {
        self.queue = queue
        self.tracker = tracker
        self.handler = handler
        self.sender = sender
        self.filtered = sender != nil
        self.once = once
    }

    override func deliver(_ post: PostObject, sender postSender: AnyObject?, route: _Route) -> Bool {
        if replayed != 0, let version = _RetainedPost.version(of: postSender), version <= replayed { return false }
        if filtered {
            guard let sender, let postSender = _postSender(postSender), sender === postSender else { return false }
        }
        guard actor != nil else { return noteGone(route) }
        guard let payload = _extract(Payload.self, from: post) else { return false }
        if once && !claim(route) { return false }
        append(payload, route)
        return true
    }

    /// A typed post of exactly `Payload` (the common case) hands the value over without an
    /// envelope or a cast; any other type, a sender filter (which needs the post's sender), or a
    /// replay (whose check of a retained post's version needs the sender too: a pattern's posts
    /// are typed) takes the envelope path.
    override func deliver(payload: UnsafeRawPointer, of type: Any.Type, route: _Route) -> Bool? {
        guard ObjectIdentifier(type) == ObjectIdentifier(Payload.self), !filtered, replayed == 0 else { return nil }
        guard actor != nil else { return noteGone(route) }
        if once && !claim(route) { return false }
        append(payload.assumingMemoryBound(to: Payload.self).pointee, route)
        return true
    }

    /// A post found the actor gone: reports it once, when the center has diagnostics set.
    /// Returns `false`, the post's answer.
    private func noteGone(_ route: _Route) -> Bool {
        if !goneNoted.exchange(true, ordering: .relaxed) { tracker?.noteGone(route, "actor", site: site) }
        return false
    }

    override func goneTarget(keeping keep: inout [AnyObject]) -> String? {
        _goneTarget(actor: actor, filtered: filtered, sender, keeping: &keep)
    }

    /// Claims a one-shot for the post in hand: exactly one post wins, even when several threads
    /// post at once, and the entry leaves its route before its payload is appended.
    private func claim(_ route: _Route) -> Bool {
        guard
            state.compareExchange(expected: _Entry.active, desired: _Entry.spent, ordering: .acquiringAndReleasing)
                .exchanged
        else { return false }
        route._detach(self)
        return true
    }

    /// Appends `payload` to the mailbox and starts a drain if none is scheduled or running.
    @inline(__always)
    private func append(_ payload: Payload, _ route: _Route) {
        if preload(payload) { startDraining(route) }
    }

    /// Appends `payload` to the mailbox; returns whether the caller must start the drain (this
    /// post begins a burst). Runs no user code, so it may be called under another lock.
    func preload(_ payload: Payload) -> Bool {
        lock()
        pending.append(payload)
        progress.appended &+= 1
        let start = !draining
        if start {
            draining = true
            tracker?.register(self)
        }
        unlock()
        return start
    }

    /// Puts the entry in its actor's run queue, at the first post of a burst.
    func startDraining(_ route: _Route) {
        queue.schedule(self, route)
    }

    /// Hands pending payloads to the handler, on the actor, adding their number to `handled`,
    /// until the mailbox is empty or `handled` reaches `_ActorRunQueue.batchLimit`. Returns
    /// `true` when it stopped at the limit (the queue puts the entry back in line), `false` when
    /// it found the mailbox empty and ended the burst.
    override func drainSome(on actor: isolated A, _ route: _Route, handled: inout Int) -> Bool {
        lock()
        var batch = spare.take()
        unlock()
        let more = drainBatch(actor, route, &batch, &handled)
        // Keep the capacity for the next burst, unless a big burst left a big buffer.
        if batch.capacity <= 4 * _ActorRunQueue<A>.batchLimit {
            lock()
            swap(&batch, &spare)
            unlock()
        }
        batch.free(Payload.self)
        return more
    }

    /// Hands pending payloads to the handler, synchronously on the actor, until the mailbox is
    /// empty or `handled` reaches the limit. Returns `true` when it stopped at the limit,
    /// `false` when it found the mailbox empty and ended the burst (cleared `draining`).
    private func drainBatch(
        _ actor: isolated A, _ route: _Route, _ batch: inout _PayloadBuffer, _ handled: inout Int
    ) -> Bool {
        while true {
            lock()
            swap(&batch, &pending)
            let count = batch.count
            var unregistered: Unmanaged<_DrainingMailbox>?
            if count == 0 {
                draining = false
                unregistered = tracker?.unregister(self)
            }
            unlock()
            if count == 0 {
                unregistered?.release()
                return false
            }
            handled += count
            let payloads = batch.items(Payload.self)
            // Payloads taken before the frame is refused were posted before the pause or
            // cancellation that refused it: dropped, like queued deliveries.
            route._inQueuedCall(self) {
                // An index loop over the base pointer: this code runs unspecialised, where
                // `for payload in payloads` asks the runtime for the metadata of the buffer's
                // iterator and of `Payload?` on every drain (a hash-table lookup each).
                let first = payloads.baseAddress.unsafelyUnwrapped
                for i in 0..<count {
                    // A spent one-shot still runs the one payload it won.
                    let now = state.load(ordering: .relaxed)
                    guard now == _Entry.active || now == _Entry.spent, let handler else { continue }
                    do { try handler(actor, first[i]) } catch { _noteThrew(error, route: route) }
                }
                // Released inside the frame, so that a waiting `cancel()` returns after them.
                batch.removeAll(Payload.self)
            }
            batch.removeAll(Payload.self)
            lock()
            let ready = progress.finish(count)
            unlock()
            for continuation in ready { continuation.resume() }
            if handled >= _ActorRunQueue<A>.batchLimit { return true }
        }
    }

    /// Drops what is pending and ends the burst (the actor is gone).
    override func dropPending() {
        lock()
        var dropped = pending.take()
        draining = false
        let unregistered = tracker?.unregister(self)
        let ready = progress.finish(dropped.count)
        unlock()
        unregistered?.release()
        for continuation in ready { continuation.resume() }
        // Released here, outside the lock: a payload's deinit is user code.
        dropped.free(Payload.self)
    }

    /// Takes the mailbox's spin lock. The section it opens must not run user code.
    @inline(__always)
    private func lock() { _spinLock(locked) }

    /// Releases the mailbox's spin lock.
    @inline(__always)
    private func unlock() { _spinUnlock(locked) }

    override func releaseHandler() {
        lock()
        var dropped = (pending.take(), spare.take())
        let ready = progress.finish(dropped.0.count)
        unlock()
        for continuation in ready { continuation.resume() }
        handler = nil
        dropped.0.free(Payload.self)
        dropped.1.free(Payload.self)
    }

    override func mark() -> UInt64? {
        lock()
        defer { unlock() }
        return progress.mark()
    }

    override func resume(_ continuation: CheckedContinuation<Void, Never>, after mark: UInt64) -> Bool {
        lock()
        defer { unlock() }
        return progress.keep(continuation, after: mark)
    }

    override func isReachable(keeping keep: inout [AnyObject]) -> Bool {
        if filtered {
            guard let sender else { return false }
            keep.append(sender)
        }
        guard let actor else { return false }
        keep.append(actor)
        return true
    }

    deinit {
        pending.free(Payload.self)
        spare.free(Payload.self)
    }
}

/// An entry whose mailbox an `_ActorRunQueue` drains on actor `A`: what the queue needs of the
/// entries in line, whatever their payload type.
class _ActorMailbox<A: Actor>: _DrainingMailbox, @unchecked Sendable {
    // @unchecked: `nextInLine` and `routeInLine` are only touched under the queue's lock.
    /// The entry after this one in its queue's line, and the route to drain it for. Guarded by
    /// the queue's lock; set only while the entry is in line.
    @exclusivity(unchecked) final var nextInLine: _ActorMailbox<A>?
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
    @exclusivity(unchecked) private var first: _ActorMailbox<A>?
    @exclusivity(unchecked) private unowned(unsafe) var last: _ActorMailbox<A>?
    @exclusivity(unchecked) private var running = false
    /// A spin lock around the line: its sections are a few instructions long.
    private let locked = Atomic<Bool>(false)

    init(actor: A) {
        self.actor = actor
    }

    override func start() { startTask() }

    /// Puts `entry` (with payloads in its mailbox, `draining` set) at the end of the line, and
    /// starts the task unless one is running.
    func schedule(_ entry: _ActorMailbox<A>, _ route: _Route) {
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
    private func append(_ entry: _ActorMailbox<A>, _ route: _Route) {
        entry.routeInLine = route
        if let last { last.nextInLine = entry } else { first = entry }
        last = entry
    }

    /// The first entry in line, removed from it; `nil` (and the task's end) when the line is empty.
    private func next() -> (_ActorMailbox<A>, _Route)? {
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

/// A task start put off until the calling thread's post ends (`_ThreadRecord.deferredStarts`,
/// a chain through `nextDeferred`, touched only by that thread).
class _DeferredStart: @unchecked Sendable {
    // @unchecked: `nextDeferred` is touched only by the thread whose chain holds the object.
    @exclusivity(unchecked) final var nextDeferred: _DeferredStart?

    /// Starts what was put off.
    func start() { fatalError("abstract") }

    /// Puts `start()` off until the post in progress on `record`'s thread ends.
    final func deferStart(to record: _ThreadRecord) {
        let head = record.deferredStarts
        if head != 0 {
            nextDeferred = Unmanaged<_DeferredStart>.fromOpaque(UnsafeRawPointer(bitPattern: head).unsafelyUnwrapped)
                .takeRetainedValue()
        }
        record.deferredStarts = UInt(bitPattern: Unmanaged.passRetained(self).toOpaque())
    }

    /// Starts everything put off on `record`'s thread, which has just ended a post.
    @inline(never)
    static func startAll(_ record: _ThreadRecord) {
        var next: _DeferredStart? = Unmanaged<_DeferredStart>.fromOpaque(
            UnsafeRawPointer(bitPattern: record.deferredStarts).unsafelyUnwrapped
        ).takeRetainedValue()
        record.deferredStarts = 0
        while let item = next {
            next = item.nextDeferred
            item.nextDeferred = nil
            item.start()
        }
    }
}

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

/// A growable buffer of payloads of one type, the type given by each call (its owner knows it):
/// `Array` without the array's type metadata, for code that runs unspecialised. Not a class and
/// not copyable in spirit: exactly one variable owns a buffer's memory at a time (the owner moves
/// it with `take()` or `swap`), and `free` must be called once with the payload type.
struct _PayloadBuffer {
    /// The storage, or `nil` before the first append.
    private var base: UnsafeMutableRawPointer?
    /// Initialised payloads at the start of the storage.
    private(set) var count = 0
    /// Payloads the storage has room for.
    private(set) var capacity = 0

    /// Appends `payload`, growing the storage (doubling, at least 16) when it is full.
    @inline(__always)
    mutating func append<Payload>(_ payload: Payload) {
        if count == capacity { grow(Payload.self) }
        (base.unsafelyUnwrapped.assumingMemoryBound(to: Payload.self) + count).initialize(to: payload)
        count += 1
    }

    private mutating func grow<Payload>(_: Payload.Type) {
        let newCapacity = Swift.max(16, capacity * 2)
        let storage = UnsafeMutablePointer<Payload>.allocate(capacity: newCapacity)
        if let base {
            storage.moveInitialize(from: base.assumingMemoryBound(to: Payload.self), count: count)
            base.deallocate()
        }
        base = UnsafeMutableRawPointer(storage)
        capacity = newCapacity
    }

    /// The payloads, valid until the next mutation.
    func items<Payload>(_: Payload.Type) -> UnsafeBufferPointer<Payload> {
        UnsafeBufferPointer(start: base?.assumingMemoryBound(to: Payload.self), count: count)
    }

    /// Deinitialises the payloads (which may run their deinits: never under a lock), keeping the
    /// storage.
    mutating func removeAll<Payload>(_: Payload.Type) {
        guard count > 0 else { return }
        base.unsafelyUnwrapped.assumingMemoryBound(to: Payload.self).deinitialize(count: count)
        count = 0
    }

    /// Moves the buffer out, leaving an empty one without storage.
    mutating func take() -> _PayloadBuffer {
        let taken = self
        self = _PayloadBuffer()
        return taken
    }

    /// Deinitialises the payloads and frees the storage (never under a lock).
    mutating func free<Payload>(_ type: Payload.Type) {
        removeAll(type)
        base?.deallocate()
        self = _PayloadBuffer()
    }
}

extension PostCenter {
    /// Records the call site in `entry`, then registers it under `key`; with `replay`, the name's
    /// retained post (if it is a `Payload` and passes the sender filter) goes into the mailbox
    /// first.
    ///
    /// Under the retained table's lock, the retained post is read, appended to the mailbox
    /// (which starts the burst, without its task) and the entry is published: live posts that
    /// reach the entry append behind it, and a retained post stored before that section and
    /// still walking reaches the entry only to be dropped (its version is at most `replayed`).
    /// A one-shot that replays is spent before it is published (no live post can claim it), and
    /// leaves its route right after. The task starts after unlocking. See `Retained.swift` for
    /// why this hand-over is exact.
    func _addActor<A, Payload>(
        _ entry: _ActorEntry<A, Payload>, to key: _NameKey, replay: Bool, _ fileID: String, _ line: Int,
        _ priority: Int = 0
    ) -> Subscription {
        entry.site = _CallSites.shared.intern(fileID, line)
        guard replay else { return _add(entry, to: key, priority: priority) }
        let (token, route, live, start, spent) = _retained.withLock { table in
            var start = false
            var spent = false
            if let record = table.records[key.name] {
                entry.replayed = record.version
                if record.matches(filtered: entry.filtered, entry.sender),
                    let payload = record.payload(as: Payload.self)
                {
                    if entry.once {
                        entry.state.store(_Entry.spent, ordering: .relaxed)
                        spent = true
                    }
                    start = entry.preload(payload)
                }
            }
            let (token, route, live) = _insert(entry, to: key, priority: priority)
            return (token, route, live, start, spent)
        }
        if spent { route._detach(entry) }
        _noteSubscriptionCount(key, live)
        if start { entry.startDraining(route) }
        return token
    }

    /// `_addActor` for a coalescing actor entry: the retained post (if it is a `Payload` and
    /// passes the sender filter) is the first payload its slot holds, so the first call gets it
    /// unless a newer post replaced it meanwhile, exactly as for a live post.
    func _addCoalescingActor<A, Payload>(
        _ entry: _CoalescingActorEntry<A, Payload>, to key: _NameKey, replay: Bool, _ fileID: String, _ line: Int,
        _ priority: Int = 0
    ) -> Subscription {
        entry.site = _CallSites.shared.intern(fileID, line)
        guard replay else { return _add(entry, to: key, priority: priority) }
        let (token, route, live, start) = _retained.withLock { table in
            var start = false
            if let record = table.records[key.name] {
                entry.replayed = record.version
                if record.matches(filtered: entry.filtered, entry.sender),
                    let payload = record.payload(as: Payload.self)
                {
                    start = entry.slot.offer(payload) != nil
                }
            }
            let (token, route, live) = _insert(entry, to: key, priority: priority)
            return (token, route, live, start)
        }
        _noteSubscriptionCount(key, live)
        if start { entry.start(route) }
        return token
    }
}
