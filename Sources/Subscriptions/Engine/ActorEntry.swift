import Synchronization

/// A registration whose handler runs isolated to an actor, which it holds weakly.
///
/// **Mailbox.** A post appends its payload to the `pending` buffer under the mailbox's own lock
/// (never the route's) and returns. The first post of a burst (`draining` was `false`) also starts
/// one task, which hops onto the actor and drains the mailbox: it exchanges the pending buffer for
/// its own empty one under the lock, calls the handler for each payload without the lock, and
/// repeats until it finds the mailbox empty, clearing `draining` under the same lock and ending at
/// once (it does not linger: a later post sees `draining` cleared, under the lock, and starts the
/// next task, so no wake-up is lost). So the posts
/// of a burst cost one task, payloads reach the handler in the order their posts took the lock
/// (post order, for posts of one thread), nothing is run twice, and in the steady state a delivery
/// allocates nothing: the two buffers keep their capacity.
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
final class _ActorEntry<A: Actor, Payload: Sendable>: _Entry, _PendingWork, @unchecked Sendable {
    // @unchecked: `handler` is written only by `releaseHandler()`, after the canceller's wait,
    // and read only inside a queued-call frame after checking the state, so the two never
    // overlap; `actor` is a weak reference, written once in `init`; `mailbox` is locked.

    /// How many payloads a drain hands to the handler before it lets other work run on the actor.
    static var batchLimit: Int { 256 }

    @exclusivity(unchecked) weak var actor: A?
    @exclusivity(unchecked) var handler: ((isolated A, Payload) -> Void)?
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
    /// A spin lock around the mailbox (`pending`, `spare`, `draining`): its sections are a few
    /// instructions long (an append, an exchange), and the poster and the draining task take it
    /// alternately from two threads, where a mutex that sleeps at once on contention (glibc's)
    /// costs a system call per handover. It spins a little, then yields the processor, so a
    /// preempted holder does not stall the other side. An atomic of this module, so
    /// ThreadSanitizer sees it.
    private let locked = Atomic<Bool>(false)

    init(actor: A, tracker: _DeliveryTracker?, handler: @escaping (isolated A, Payload) -> Void) {
        self.actor = actor
        self.tracker = tracker
        self.handler = handler
    }

    override func deliver(_ post: PostObject, sender: AnyObject?, route: _Route) -> Bool {
        if replayed != 0, let version = _RetainedPost.version(of: sender), version <= replayed { return false }
        guard actor != nil, let payload = _extract(Payload.self, from: post) else { return false }
        append(payload, route)
        return true
    }

    /// A typed post of exactly `Payload` (the common case) hands the value over without an
    /// envelope or a cast; any other type takes the envelope path, which casts.
    override func deliver(payload: UnsafeRawPointer, of type: Any.Type, route: _Route) -> Bool? {
        guard ObjectIdentifier(type) == ObjectIdentifier(Payload.self) else { return nil }
        guard actor != nil else { return false }
        append(payload.assumingMemoryBound(to: Payload.self).pointee, route)
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

    /// Starts the one task of a burst. It holds the actor strongly only while it runs.
    func startDraining(_ route: _Route) {
        let box = _UncheckedSendable((self, route))
        Task {
            let (entry, route) = box.value
            guard let actor = entry.actor else {
                entry.dropPending()
                return
            }
            await entry.drain(on: actor, route)
        }
    }

    /// Runs on the actor until the mailbox is empty, letting other jobs of the actor run after
    /// every `batchLimit` payloads.
    ///
    /// Found empty, the drain ends the burst at once rather than yield and look again for more
    /// posts: a poster that posts one payload at a time and waits for its delivery would pay for
    /// those trips through the executor on every post. A drain that found payloads looks again
    /// at once.
    private func drain(on actor: isolated A, _ route: _Route) async {
        lock()
        var batch = spare.take()
        unlock()
        while drainBatch(actor, route, &batch) {
            await Task.yield()
        }
        // Keep the capacity for the next burst, unless a big burst left a big buffer.
        if batch.capacity <= 4 * Self.batchLimit {
            lock()
            swap(&batch, &spare)
            unlock()
        }
        batch.free(Payload.self)
    }

    /// Hands pending payloads to the handler, synchronously on the actor, until the mailbox is
    /// empty or `batchLimit` payloads were handled. Returns `true` when it stopped at the limit
    /// (the caller yields, then calls again), `false` when it found the mailbox empty and ended
    /// the burst (cleared `draining`).
    private func drainBatch(_ actor: isolated A, _ route: _Route, _ batch: inout _PayloadBuffer) -> Bool {
        var handled = 0
        while true {
            lock()
            swap(&batch, &pending)
            let count = batch.count
            var unregistered: (any _PendingWork)?
            if count == 0 {
                draining = false
                unregistered = tracker?.unregister(self)
            }
            unlock()
            if count == 0 {
                withExtendedLifetime(unregistered) {}
                return false
            }
            handled += count
            let payloads = batch.items(Payload.self)
            // Payloads taken before the frame is refused were posted before the pause or
            // cancellation that refused it: dropped, like queued deliveries.
            route._inQueuedCall(self) {
                for payload in payloads {
                    guard state.load(ordering: .relaxed) == _Entry.active, let handler else { continue }
                    handler(actor, payload)
                }
                // Released inside the frame, so that a waiting `cancel()` returns after them.
                batch.removeAll(Payload.self)
            }
            batch.removeAll(Payload.self)
            lock()
            let ready = progress.finish(count)
            unlock()
            for continuation in ready { continuation.resume() }
            if handled >= Self.batchLimit { return true }
        }
    }

    /// Drops what is pending and ends the burst (the actor is gone).
    private func dropPending() {
        lock()
        var dropped = pending.take()
        draining = false
        let unregistered = tracker?.unregister(self)
        let ready = progress.finish(dropped.count)
        unlock()
        withExtendedLifetime(unregistered) {}
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

    func mark() -> UInt64? {
        lock()
        defer { unlock() }
        return progress.mark()
    }

    func resume(_ continuation: CheckedContinuation<Void, Never>, after mark: UInt64) -> Bool {
        lock()
        defer { unlock() }
        return progress.keep(continuation, after: mark)
    }

    override func isReachable(keeping keep: inout [AnyObject]) -> Bool {
        guard let actor else { return false }
        keep.append(actor)
        return true
    }

    deinit {
        pending.free(Payload.self)
        spare.free(Payload.self)
    }
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
    /// retained post (if it is a `Payload`) goes into the mailbox first.
    ///
    /// Under the retained table's lock, the retained post is read, appended to the mailbox
    /// (which starts the burst, without its task) and the entry is published: live posts that
    /// reach the entry append behind it, and a retained post stored before that section and
    /// still walking reaches the entry only to be dropped (its version is at most `replayed`).
    /// The task starts after unlocking. See `Retained.swift` for why this hand-over is exact.
    func _addActor<A, Payload>(
        _ entry: _ActorEntry<A, Payload>, to key: _NameKey, replay: Bool, _ fileID: String, _ line: Int
    ) -> Subscription {
        entry.site = _CallSites.shared.intern(fileID, line)
        guard replay else { return _add(entry, to: key) }
        let (token, route, live, start) = _retained.withLock { table in
            var start = false
            if let record = table.records[key.name] {
                entry.replayed = record.version
                if let payload = record.payload(as: Payload.self) { start = entry.preload(payload) }
            }
            let (token, route, live) = _insert(entry, to: key)
            return (token, route, live, start)
        }
        _noteSubscriptionCount(key, live)
        if start { entry.startDraining(route) }
        return token
    }
}
