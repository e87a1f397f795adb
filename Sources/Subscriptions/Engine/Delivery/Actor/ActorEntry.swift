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
final class _ActorEntry<A: Actor, Payload: Sendable>: _ActorLineEntry<A>, @unchecked Sendable {
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
    @exclusivity(unchecked) private var progress = _DeliveryProgress()
    /// The center's tracker, which knows this subscription while its drain runs.
    let tracker: _DeliveryTracker?
    /// For `replay: true`: the version of the retained post replayed (0: none). Written before
    /// the entry is published; a retained post up to it reaching the entry live is dropped.
    @exclusivity(unchecked) var replayed: UInt64 = 0
    /// The only sender this subscription accepts (its sender filter), held weakly.
    let targets: _WeakTargets
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
        self.targets = _WeakTargets(sender: sender)
        self.once = once
    }

    override func deliver(_ post: PostObject, sender postSender: AnyObject?, route: _Route) -> Bool {
        if replayed != 0, let version = _RetainedPost.version(of: postSender), version <= replayed { return false }
        guard targets.admits(postSender) else { return false }
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
        guard ObjectIdentifier(type) == ObjectIdentifier(Payload.self), !targets.filtered, replayed == 0 else {
            return nil
        }
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
        guard let actor else { return "actor gone" }
        keep.append(actor)
        return targets.goneTarget(keeping: &keep)
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
            var unregistered: Unmanaged<_DrainingEntry>?
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
            if let frame = route._beginQueuedCall(self) {
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
                route._endQueuedCall(frame)
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
        guard targets.isReachable(keeping: &keep), let actor else { return false }
        keep.append(actor)
        return true
    }

    deinit {
        pending.free(Payload.self)
        spare.free(Payload.self)
    }
}
