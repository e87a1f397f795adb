import Dispatch
import Synchronization

/// Entries of dropped tokens that wait for the process-wide fence that lets them go: a token's
/// deinit never waits, so it need not pay a heavy fence of its own. One fence serves a batch.
///
/// A drop cancels the entry and zeroes its slot under the route's lock, exactly like `cancel()`,
/// then parks the entry here unless it can settle it at once (the dropping thread holds the only
/// thread record, or a scan without a fence already sees a thread calling it: both take the path
/// of `cancel()` that never waits). The batch is sorted out after one heavy fence: an entry that
/// no record calls is to be released, one that a record calls becomes an orphan and is released
/// by the last call (see `_Orphans`).
///
/// A batch is sorted out when it reaches `batchSize` entries (by the dropping thread), by the next
/// `cancel()` anywhere in the process (its own heavy fence serves the batch too), and otherwise
/// by a job on a global dispatch queue that the first entry of a batch schedules (`settleDelay`
/// later). Whoever sorts a batch out, its entries are released (and orphaned) only on a job of
/// that queue (`Settled.finishOnJob()`), never on the thread that sorted it out: a release runs
/// the closures' captures' `deinit`s, which may do anything (cancel a subscription whose handler
/// is running, and wait for it), and a `cancel()` or a drop of an unrelated token must not run,
/// nor wait for, what another token's captures do. A dropped token's captures therefore go
/// within about a millisecond on an idle machine, on that job's thread, never under a lock.
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
        if count >= batchSize { flush(onJob: false) }
        if schedule { scheduleJob() }
    }

    /// Schedules the settling job `settleDelay` from now.
    private static func scheduleJob() {
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + settleDelay) { settleByJob() }
    }

    /// For tests: while `true`, the timed settling job leaves the batch to the drop that fills it
    /// and to the next `cancel()` (it looks again `settleDelay` later), so that a test can see
    /// which thread releases what those settle.
    static let holdsTimedJobForTesting = Atomic<Bool>(false)

    /// The settling job: settles what is parked, and schedules itself again if a drop parked an
    /// entry while it ran.
    private static func settleByJob() {
        if holdsTimedJobForTesting.load(ordering: .relaxed) {
            scheduleJob()
            return
        }
        pending.withLock { box in
            var state = box.value
            state.jobScheduled = false
            box = _UncheckedSendable(state)
        }
        flush(onJob: true)
    }

    /// Takes the parked entries, to be settled after a heavy fence that comes after this call;
    /// `nil` when none may be parked (no array to make, retain and release on a cancel's path).
    static func take() -> [_Entry]? {
        guard mayHaveEntries.load(ordering: .relaxed) else { return nil }
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

    /// Settles every parked entry with one heavy fence. `onJob`: the caller is the settling job,
    /// which finishes the batch itself; any other caller hands it to a job.
    static func flush(onJob: Bool) {
        guard var batch = take(), !batch.isEmpty else { return }
        let onlyThread = _ThreadRecord.onlyThread
        let section = _Fence.beginHeavy(onlyThread: onlyThread)
        let settled = sortOut(&batch, onlyThread: onlyThread)
        _Fence.endHeavy(section)
        if onJob { settled.finish() } else { settled.finishOnJob() }
    }

    /// A batch sorted out by `sortOut`, to be finished after the heavy fence's scan.
    ///
    /// A class whose entries the finishing job takes out: the entries' last references must go
    /// on that job, since for most entries (`_Handler`) the closure goes with the entry object
    /// itself, not with `releaseHandler()`. Whoever else still holds the batch (the thread that
    /// sorted it out, until its call returns) then holds an empty one.
    final class Settled: @unchecked Sendable {
        // @unchecked: filled by `sortOut` before it is shared, then emptied once, by the one
        // job that finishes it; the thread that sorted it out never touches it again.
        fileprivate var release: [_Entry] = []
        fileprivate var orphan: [_Entry] = []

        /// Releases the entries no thread called and orphans the others. Runs user code (the
        /// closures' captures go), so only on a settling job (`finishOnJob()`): never inside a
        /// heavy fence's scan, under a lock, or on a thread that settles a batch for its own
        /// `cancel()` or drop.
        fileprivate func finish() {
            let (orphan, release) = (self.orphan, self.release)
            (self.orphan, self.release) = ([], [])
            for entry in orphan { _Orphans.add(entry) }
            for entry in release { entry.releaseHandler() }
        }

        /// Hands the batch to a job on the settling queue, which releases and orphans its entries.
        func finishOnJob() {
            DispatchQueue.global(qos: .utility).async { self.finish() }
        }
    }

    /// Moves the entries of `batch` (which it leaves empty) into those that no thread calls (to
    /// release) and the others (to orphan). Call inside a heavy fence (`_Fence.beginHeavy`), after `take()`: a
    /// post that had not published an entry by the fence reads its zeroed slot. `onlyThread` is
    /// the one the fence was given (then only the caller's own record can be calling an entry).
    static func sortOut(_ batch: inout [_Entry], onlyThread: Bool) -> Settled {
        // One scan for the whole batch: the entries some frame is calling.
        let calling = _ThreadRecord.entriesBeingCalled(onlyThread: onlyThread)
        let settled = Settled()
        for entry in batch {
            if calling.contains(_SlotBuffer.bits(of: entry)) {
                settled.orphan.append(entry)
            } else {
                settled.release.append(entry)
            }
        }
        batch = []
        return settled
    }

    /// How many entries wait for a batch. For tests.
    static var count: Int { pending.withLock { $0.value.entries.count } }
}
