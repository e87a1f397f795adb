/// A registration whose handler runs isolated to an actor, which it holds weakly.
///
/// **Mailbox.** A post appends its payload to `mailbox.pending` under the mailbox's own lock (never
/// the route's) and returns. The first post of a burst (`draining` was `false`) also starts one
/// task, which hops onto the actor and drains the mailbox: it swaps the pending array for its
/// own empty one under the lock, calls the handler for each payload without the lock, and repeats
/// until it finds the mailbox empty, clearing `draining` under the same lock. So the posts of a
/// burst cost one task, payloads reach the handler in the order their posts took the lock (post
/// order, for posts of one thread), nothing is run twice, and in the steady state a delivery
/// allocates nothing: the two arrays keep their capacity.
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
final class _ActorEntry<A: Actor, Payload: Sendable>: _Entry, @unchecked Sendable {
    // @unchecked: `handler` is written only by `releaseHandler()`, after the canceller's wait,
    // and read only inside a queued-call frame after checking the state, so the two never
    // overlap; `actor` is a weak reference, written once in `init`; `mailbox` is locked.

    /// The mailbox, guarded by its lock.
    struct Mailbox {
        /// Payloads posted and not yet taken by the draining task, oldest first.
        var pending: [Payload] = []
        /// An empty array with capacity, handed to the next draining task.
        var spare: [Payload] = []
        /// Whether a draining task is scheduled or running.
        var draining = false
    }

    /// How many payloads a drain hands to the handler before it lets other work run on the actor.
    static var batchLimit: Int { 256 }

    @exclusivity(unchecked) weak var actor: A?
    @exclusivity(unchecked) var handler: ((isolated A, Payload) -> Void)?
    let mailbox = _Lock(Mailbox())

    init(actor: A, handler: @escaping (isolated A, Payload) -> Void) {
        self.actor = actor
        self.handler = handler
    }

    override func deliver(_ post: PostObject, sender: AnyObject?, route: _Route) -> Bool {
        guard actor != nil, let payload = _extract(Payload.self, from: post) else { return false }
        let start = mailbox.withLock { box -> Bool in
            box.pending.append(payload)
            if box.draining { return false }
            box.draining = true
            return true
        }
        if start { startDraining(route) }
        return true
    }

    /// Starts the one task of a burst. It holds the actor strongly only while it runs.
    private func startDraining(_ route: _Route) {
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

    /// Runs on the actor until the mailbox is empty, letting other jobs of the actor run between
    /// batches of `batchLimit` payloads.
    private func drain(on actor: isolated A, _ route: _Route) async {
        var batch = mailbox.withLock { box in
            var spare: [Payload] = []
            swap(&spare, &box.spare)
            return spare
        }
        while drainBatch(actor, route, &batch) {
            await Task.yield()
        }
        // Keep the capacity for the next burst, unless a big burst left a big array.
        if batch.capacity <= 4 * Self.batchLimit {
            mailbox.withLock { box in swap(&batch, &box.spare) }
        }
    }

    /// Hands pending payloads to the handler, synchronously on the actor, until the mailbox is
    /// empty (clearing `draining`, returns `false`) or `batchLimit` payloads were handled
    /// (returns `true`: call again).
    private func drainBatch(_ actor: isolated A, _ route: _Route, _ batch: inout [Payload]) -> Bool {
        var handled = 0
        while true {
            let more = mailbox.withLock { box -> Bool in
                swap(&batch, &box.pending)
                if batch.isEmpty { box.draining = false }
                return !batch.isEmpty
            }
            guard more else { return false }
            handled += batch.count
            _withFrameCell { cell in
                // Payloads taken before the frame is refused were posted before the pause or
                // cancellation that refused it: dropped, like queued deliveries.
                guard let ticket = route._beginQueuedCall(self, cell) else { return }
                for payload in batch {
                    guard state.load(ordering: .relaxed) == _Entry.active, let handler else { continue }
                    handler(actor, payload)
                }
                // Released inside the frame, so that a waiting `cancel()` returns after them.
                batch.removeAll(keepingCapacity: true)
                route._endCall(ticket)
            }
            batch.removeAll(keepingCapacity: true)
            if handled >= Self.batchLimit { return true }
        }
    }

    /// Drops what is pending and ends the burst (the actor is gone).
    private func dropPending() {
        var dropped: [Payload] = []
        mailbox.withLock { box in
            swap(&dropped, &box.pending)
            box.draining = false
        }
        // Released here, outside the lock: a payload's deinit is user code.
        withExtendedLifetime(dropped) {}
    }

    override func releaseHandler() {
        var dropped: ([Payload], [Payload]) = ([], [])
        mailbox.withLock { box in
            swap(&dropped.0, &box.pending)
            swap(&dropped.1, &box.spare)
        }
        handler = nil
        withExtendedLifetime(dropped) {}
    }

    override func isReachable(keeping keep: inout [AnyObject]) -> Bool {
        guard let actor else { return false }
        keep.append(actor)
        return true
    }
}
