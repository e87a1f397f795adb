import Dispatch

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
/// by a job on a global dispatch queue that the first entry of a batch schedules: a dropped
/// token's captures go within a few microseconds on an idle machine, without the dropping thread
/// paying for the fence.
enum _Retirements {
    /// The most entries one batch collects before the dropping thread settles it itself.
    static let batchSize = 64

    private static let pending = _Lock<[_Entry]>([])

    /// Parks `entry`, already cancelled and out of every slot.
    static func retire(_ entry: _Entry) {
        let item = _UncheckedSendable(entry)
        let count = pending.withLock { list -> Int in
            list.append(item.value)
            return list.count
        }
        if count >= batchSize {
            flush()
        } else if count == 1 {
            DispatchQueue.global(qos: .utility).async { flush() }
        }
    }

    /// Takes the parked entries, to be settled after a heavy fence that comes after this call.
    static func take() -> [_Entry] {
        let taken = pending.withLock { list -> _UncheckedSendable<[_Entry]> in
            defer { list = [] }
            return _UncheckedSendable(list)
        }
        return taken.value
    }

    /// Settles every parked entry with one heavy fence.
    static func flush() {
        let batch = take()
        guard !batch.isEmpty else { return }
        _Fence.heavy(onlyThread: _ThreadRecord.onlyThread)
        settle(batch)
    }

    /// Releases the entries of `batch` that no thread calls and orphans the others. Call after a
    /// heavy fence that followed `take()`: a post that had not published an entry by then reads
    /// its zeroed slot.
    static func settle(_ batch: [_Entry]) {
        for entry in batch {
            let bits = _Route.bits(entry)
            var called = false
            _ThreadRecord.visitAll { r in called = called || r.calls(bits) }
            if called {
                _Orphans.add(entry)
            } else {
                entry.releaseHandler()
            }
        }
    }

    /// How many entries wait for a batch. For tests.
    static var count: Int { pending.withLock { $0.count } }
}
