import Dispatch

/// Counts a center's scheduled deliveries (queued on a dispatch queue) that have not run or been
/// dropped yet, so that `waitForPendingDeliveries()` can wait for them without polling; holds
/// the center's main mailbox and knows its actor subscriptions with deliveries pending, whose
/// mailboxes count their own.
///
/// Deliveries are counted per *epoch*. Each call of `wait` closes the current epoch (the
/// deliveries scheduled so far) and opens the next; it resumes once no delivery of its epoch or
/// an earlier one is pending. Deliveries scheduled after the call fall into a later epoch and do
/// not hold it up, so a steady stream of posts cannot starve a waiter. Epochs only advance when
/// somebody waits, so at most a few have pending deliveries at once.
///
/// - Threading: every method is safe from any thread; waiters are resumed after unlocking.
final class _DeliveryTracker: Sendable {
    private struct State {
        /// The epoch deliveries scheduled now belong to.
        var epoch: UInt64 = 0
        /// Pending deliveries of each epoch that has any.
        var pending: [UInt64: Int] = [:]
        /// Suspended waiters and the last epoch each waits for.
        var waiters: [(epoch: UInt64, continuation: CheckedContinuation<Void, Never>)] = []

        /// Whether every delivery of `epoch` and the epochs before it has run or been dropped.
        func isSettled(through epoch: UInt64) -> Bool {
            !pending.keys.contains { $0 <= epoch }
        }
    }

    private let state = _PlatformMutex(State())
    /// The center's main-actor deliveries posted off the main actor.
    let main = _Mailbox(queue: .main)
    /// The mailboxes of `.queue(q)` subscriptions, one per queue, held weakly (by their
    /// subscriptions and scheduled jobs), keyed by the queue's identity.
    private let queues = _PlatformMutex<(boxes: [ObjectIdentifier: _WeakMailbox], pruneAt: Int)>(([:], 16))
    /// Actor subscriptions whose mailbox is being drained, with how many times each registered
    /// (a subscription registers when its drain starts and unregisters when it ends, under its
    /// mailbox's lock, so it is here exactly while it has deliveries pending).
    private let draining = _PlatformMutex<[ObjectIdentifier: (work: any _PendingWork, count: Int)]>([:])

    init() {}

    /// The center's mailbox for `queue`, made on first use. Subscriptions hold it strongly.
    func mailbox(for queue: DispatchQueue) -> _Mailbox {
        queues.withLock { state in
            let key = ObjectIdentifier(queue)
            if let box = state.boxes[key]?.mailbox, box.queue === queue { return box }
            let box = _Mailbox(queue: queue)
            state.boxes[key] = _WeakMailbox(box)
            if state.boxes.count >= state.pruneAt {
                state.boxes = state.boxes.filter { $0.value.mailbox != nil }
                state.pruneAt = max(16, 2 * state.boxes.count)
            }
            return box
        }
    }

    /// Notes that `work` has deliveries pending (an actor subscription's drain starts).
    func register(_ work: any _PendingWork) {
        draining.withLock { table in
            let key = ObjectIdentifier(work)
            table[key, default: (work, 0)].count += 1
        }
    }

    /// Notes that `work` has none any more; returns the reference, to be released after the
    /// caller unlocked (it may be the last one).
    func unregister(_ work: any _PendingWork) -> (any _PendingWork)? {
        draining.withLock { table -> (any _PendingWork)? in
            let key = ObjectIdentifier(work)
            guard let item = table[key] else { return nil }
            if item.count <= 1 {
                table[key] = nil
                return item.work
            }
            table[key] = (item.work, item.count - 1)
            return nil
        }
    }

    /// Counts a delivery being scheduled; pass the result to `end` when it ran or was dropped.
    /// - Complexity: O(1), one lock acquisition.
    func begin() -> UInt64 {
        state.withLock { state in
            state.pending[state.epoch, default: 0] += 1
            return state.epoch
        }
    }

    /// Counts a delivery of `epoch` as done, and resumes the waiters it was the last one for.
    func end(_ epoch: UInt64) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            let left = (state.pending[epoch] ?? 1) - 1
            state.pending[epoch] = left == 0 ? nil : left
            guard left == 0, !state.waiters.isEmpty else { return [] }
            var ready: [CheckedContinuation<Void, Never>] = []
            var waiting: [(epoch: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
            for waiter in state.waiters {
                if state.isSettled(through: waiter.epoch) {
                    ready.append(waiter.continuation)
                } else {
                    waiting.append(waiter)
                }
            }
            state.waiters = waiting
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// Returns once every delivery counted by `begin` before this call ended, and every delivery
    /// the main mailbox and the actor subscriptions of the center held when it was called.
    func wait() async {
        // Marks first, all at once: deliveries appended later are not waited for.
        let works =
            [main as any _PendingWork] + draining.withLock { $0.values.map(\.work) }
            + queues.withLock { $0.boxes.values.compactMap(\.mailbox) }
        let marks = works.compactMap { work in work.mark().map { (work, $0) } }
        await waitForCounted()
        for (work, mark) in marks {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if !work.resume(continuation, after: mark) { continuation.resume() }
            }
        }
    }

    /// Returns once every delivery counted by `begin` before this call ended.
    private func waitForCounted() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let settled = state.withLock { state -> Bool in
                let epoch = state.epoch
                state.epoch += 1
                if state.isSettled(through: epoch) { return true }
                state.waiters.append((epoch, continuation))
                return false
            }
            if settled { continuation.resume() }
        }
    }
}

/// A weak reference to a queue's mailbox.
struct _WeakMailbox: @unchecked Sendable {
    // @unchecked: only touched under the tracker's lock.
    weak var mailbox: _Mailbox?
    init(_ mailbox: _Mailbox) { self.mailbox = mailbox }
}
