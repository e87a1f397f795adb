import Synchronization

/// Cancelled entries whose handler may still be running on some thread when their canceller
/// returned: cancelled from inside the handler itself, by a token's deinit (which never waits),
/// or by a `cancel()` that would have closed a cycle of waiting threads.
///
/// Each orphan is released (its closure and captures with it) by the thread that ends the last
/// call of it: the canceller notes the orphan in the record of every thread calling it, and a
/// thread that closes a frame with a note pending collects the orphans no thread calls any more.
///
/// Only a thread noted as calling an orphan, or the canceller that parked it, releases it. Every
/// collect scans the whole list, so without that rule a thread collecting for an orphan of its
/// own (another center's, say) could release one whose last call has just ended on another
/// thread that has not closed its frame yet: the captures would go on a third thread, possibly
/// after the post that ended the last call returned.
enum _Orphans {
    /// A parked entry and the records of the threads last seen calling it (empty until one was:
    /// such an orphan is released by the canceller that parked it, in the same `add`).
    private struct Orphan {
        let entry: _Entry
        var holders: [UInt] = []
    }

    private static let list = _PlatformMutex<[Orphan]>([])

    /// Parks `entry` (already cancelled and out of every slot) until no thread calls it.
    static func add(_ entry: _Entry) {
        list.withLock { $0.append(Orphan(entry: entry)) }
        collect(noticed: nil, parked: entry)
    }

    /// Releases the orphans that no thread calls any more and that this thread may release (it
    /// was noted as calling them, or it parked `parked`), and notes the others in the records of
    /// the threads that still call them. `noticed` is the calling thread's record when it
    /// collects because of a note.
    ///
    /// Out of line: every post's frame closes with a test that may call it (`_ThreadRecord.pop`),
    /// and inlined there it made the post itself too big to inline into `post` (measured: a
    /// typed post to one subscriber 201 → 356 instructions when the heavy fence became a pair).
    @inline(never)
    static func collect(noticed: _ThreadRecord?, parked: _Entry? = nil) {
        noticed?.clearOrphanNotice()
        let me = noticed?.bits
        var free: [_Entry] = []
        var seen: Set<UInt> = []
        var fresh = list.withLock { sweep(&$0, me: me, parked: parked, free: &free, seen: &seen) }
        // A holder that closed its frame before seeing the note: after this fence, either it sees
        // the note, or the next pass sees its frame closed. A pass can note a record the earlier
        // ones could not see (a post whose `at` store became visible only with the fence, and
        // which may already have read its note as 0): fence and sweep again while a pass notes a
        // record no earlier pass of this collect noted (each record at most once, so this ends).
        while fresh {
            let section = _Fence.beginHeavy()
            fresh = list.withLock { sweep(&$0, me: me, parked: parked, free: &free, seen: &seen) }
            _Fence.endHeavy(section)
        }
        // Released here, outside the lock, on the thread that ended the last call.
        for entry in free { entry.releaseHandler() }
    }

    /// One pass over the list: notes the threads calling each orphan, and moves to `free` each
    /// orphan no thread calls that this thread may release. Returns whether it noted a thread
    /// that is not in `seen` (which it adds).
    private static func sweep(
        _ orphans: inout [Orphan], me: UInt?, parked: _Entry?, free: inout [_Entry], seen: inout Set<UInt>
    ) -> Bool {
        var noted = false
        var kept: [Orphan] = []
        for var orphan in orphans {
            let bits = _SlotBuffer.bits(of: orphan.entry)
            var holders: [UInt] = []
            _ThreadRecord.visitAll { r in
                if r.calls(bits) {
                    r.noteOrphan()
                    holders.append(r.bits)
                    if seen.insert(r.bits).inserted { noted = true }
                }
            }
            if !holders.isEmpty {
                // Every record ever seen calling it may release it: a noted holder that is not
                // seen now has ended its call and collects when it closes its frame.
                for h in holders where !orphan.holders.contains(h) { orphan.holders.append(h) }
                kept.append(orphan)
            } else if orphan.entry === parked || me.map(orphan.holders.contains) == true {
                free.append(orphan.entry)
            } else {
                // A noted holder has ended its call but not yet closed its frame: it collects.
                kept.append(orphan)
            }
        }
        orphans = kept
        return noted
    }

    /// How many orphans wait for a call to end. For tests.
    static var count: Int { list.withLock { $0.count } }
}
