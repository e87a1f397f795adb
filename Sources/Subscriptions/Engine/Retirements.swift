import Dispatch
import Synchronization

/// Entries of dropped tokens that wait for the process-wide fence that lets them go: a token's
/// deinit never waits, so it need not pay a heavy fence of its own. One fence serves a batch.
///
/// A drop cancels the entry and zeroes its slot under the route's lock, exactly like `cancel()`,
/// then parks the entry here unless it can settle it at once (the dropping thread holds the only
/// thread record, or a scan without a fence already sees a thread calling it: both take the path
/// of `cancel()` that never waits). The batch is settled after one heavy fence: an entry that no
/// record calls is released on the settling thread, one that a record calls becomes an orphan
/// and is released by the last call (see `_Orphans`). Closures are therefore released by the last
/// call's thread or by the settling one, never under a lock.
///
/// A batch is settled when it reaches `batchSize` entries (by the dropping thread), by the next
/// `cancel()` anywhere in the process (its own heavy fence serves the batch too), and otherwise
/// by a job on a global dispatch queue that the first entry of a batch schedules (`settleDelay`
/// later): a dropped token's captures go within about a millisecond on an idle machine, without
/// the dropping thread paying for the fence.
enum _Retirements {
    /// The most entries one batch collects before the dropping thread settles it itself.
    static let batchSize = 512

    /// How long the settling job waits after a batch's first drop, so that a burst of drops
    /// fills batches (settled by the drops themselves) instead of paying a fence per drop.
    static let settleDelay = DispatchTimeInterval.microseconds(500)

    /// The parked entries, and whether a settling job is scheduled.
    private struct State {
        var entries: [_Entry] = []
        var jobScheduled = false
    }

    private static let pending = _PlatformMutex<_UncheckedSendable<State>>(_UncheckedSendable(State()))

    /// Whether entries may be parked: set under the lock by `retire`, cleared by `take`. Read
    /// without it by `cancel()`, which skips the lock when nothing is parked (a stale `false` only
    /// leaves a batch to the job or the next cancel).
    private static let mayHaveEntries = Atomic<Bool>(false)

    /// Parks `entry`, already cancelled and out of every slot.
    static func retire(_ entry: _Entry) {
        let item = _UncheckedSendable(entry)
        let (count, schedule) = pending.withLock { box -> (Int, Bool) in
            var state = box.value
            state.entries.append(item.value)
            mayHaveEntries.store(true, ordering: .relaxed)
            let schedule = !state.jobScheduled
            state.jobScheduled = true
            box = _UncheckedSendable(state)
            return (state.entries.count, schedule)
        }
        if count >= batchSize { flush() }
        if schedule {
            DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + settleDelay) { settleByJob() }
        }
    }

    /// The settling job: settles what is parked, and schedules itself again if a drop parked an
    /// entry while it ran.
    private static func settleByJob() {
        pending.withLock { box in
            var state = box.value
            state.jobScheduled = false
            box = _UncheckedSendable(state)
        }
        flush()
    }

    /// Takes the parked entries, to be settled after a heavy fence that comes after this call.
    static func take() -> [_Entry] {
        guard mayHaveEntries.load(ordering: .relaxed) else { return [] }
        let taken = pending.withLock { box -> _UncheckedSendable<[_Entry]> in
            mayHaveEntries.store(false, ordering: .relaxed)
            var state = box.value
            let entries = state.entries
            state.entries = []
            box = _UncheckedSendable(state)
            return _UncheckedSendable(entries)
        }
        return taken.value
    }

    /// Settles every parked entry with one heavy fence.
    static func flush() {
        let batch = take()
        guard !batch.isEmpty else { return }
        let onlyThread = _ThreadRecord.onlyThread
        let settled = _Fence.heavy(onlyThread: onlyThread) { sortOut(batch, onlyThread: onlyThread) }
        settled.finish()
    }

    /// A batch sorted out by `sortOut`, to be finished after the heavy fence's scan.
    struct Settled {
        var release: [_Entry] = []
        var orphan: [_Entry] = []

        /// Releases the entries no thread called and orphans the others. Runs user code (the
        /// closures' captures go), so never inside a heavy fence's scan or under a lock.
        func finish() {
            for entry in orphan { _Orphans.add(entry) }
            for entry in release { entry.releaseHandler() }
        }
    }

    /// Sorts the entries of `batch` into those that no thread calls (to release) and the others
    /// (to orphan). Call inside a heavy fence's scan, after `take()`: a post that had not
    /// published an entry by the fence reads its zeroed slot. `onlyThread` is the one the fence
    /// was given (then only the caller's own record can be calling an entry).
    static func sortOut(_ batch: [_Entry], onlyThread: Bool) -> Settled {
        // One scan for the whole batch: the entries some frame is calling.
        var calling: Set<UInt> = []
        _ThreadRecord.visitAll(onlyThread: onlyThread) { r in r.forEachCall { calling.insert($0) } }
        var settled = Settled()
        for entry in batch {
            if calling.contains(_SlotBuffer.bits(of: entry)) {
                settled.orphan.append(entry)
            } else {
                settled.release.append(entry)
            }
        }
        return settled
    }

    /// How many entries wait for a batch. For tests.
    static var count: Int { pending.withLock { $0.value.entries.count } }
}
