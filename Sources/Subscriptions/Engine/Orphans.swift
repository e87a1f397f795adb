import Synchronization

/// Cancelled entries whose handler may still be running on some thread when their canceller
/// returned: cancelled from inside the handler itself, by a token's deinit (which never waits),
/// or by a `cancel()` that would have closed a cycle of waiting threads.
///
/// Each orphan is released (its closure and captures with it) by the thread that ends the last
/// call of it: the canceller notes the orphan in the record of every thread calling it, and a
/// thread that closes a frame with a note pending collects the orphans no thread calls any more.
enum _Orphans {
    private static let list = _Lock<[_Entry]>([])

    /// Parks `entry` (already cancelled and out of every slot) until no thread calls it.
    static func add(_ entry: _Entry) {
        list.withLock { $0.append(entry) }
        collect(noticed: nil)
    }

    /// Releases the orphans that no thread calls any more, and notes the others in the records
    /// of the threads that still call them. `noticed` is the calling thread's record when it
    /// collects because of a note.
    static func collect(noticed: _ThreadRecord?) {
        noticed?.clearOrphanNotice()
        var free: [_Entry] = []
        var noted = false
        list.withLock { entries in
            entries.removeAll { entry in
                let bits = _Route.bits(entry)
                var held = false
                _ThreadRecord.visitAll { r in
                    if r.calls(bits) {
                        r.noteOrphan()
                        held = true
                    }
                }
                if !held { free.append(entry) }
                noted = noted || held
                return !held
            }
        }
        if noted {
            // A holder that closed its frame before seeing the note: after this fence, either it
            // sees the note, or the second pass below sees its frame closed.
            _Fence.heavy()
            list.withLock { entries in
                entries.removeAll { entry in
                    let bits = _Route.bits(entry)
                    var held = false
                    _ThreadRecord.visitAll { r in held = held || r.calls(bits) }
                    if !held { free.append(entry) }
                    return !held
                }
            }
        }
        // Released here, outside the lock, on the thread that ended the last call.
        for entry in free { entry.releaseHandler() }
    }

    /// How many orphans wait for a call to end. For tests.
    static var count: Int { list.withLock { $0.count } }
}
