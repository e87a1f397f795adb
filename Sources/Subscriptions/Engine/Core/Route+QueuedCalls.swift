import Synchronization
internal import _SubscriptionsShims

extension _Route {
    // MARK: Calls outside a post

    /// Opens a frame on the calling thread for one call of `entry` outside a post (a queued,
    /// main-actor or actor delivery), unless it was cancelled or paused meanwhile. Returns the
    /// index of the frame in the thread's record, to pass to `_endQueuedCall(_:)`, or `nil` when
    /// the call must not happen. A caller that got a frame closes it on every path: the code
    /// between the two neither returns nor throws (errors a handler throws are caught inside).
    /// A pair rather than a function taking the call as a closure, so that a delivery's walk
    /// enters this file and returns instead of coming back into the entry's file from here.
    func _beginQueuedCall(_ entry: _Entry) -> Int? {
        let me = _ThreadRecord.current
        let f = me.push()
        me.announce(f, route: _routeBits)
        me.setAt(f, _SlotBuffer.bits(of: entry))
        _Fence.light()
        let state = entry.state.load(ordering: .relaxed)
        guard !detached.load(ordering: .relaxed), state == _Entry.active || state == _Entry.spent else {
            me.pop(f)
            return nil
        }
        return f
    }

    /// Closes the frame `frame` opened by `_beginQueuedCall(_:)`.
    func _endQueuedCall(_ frame: Int) {
        let me = _ThreadRecord.current
        assert(frame == me.depth - 1, "Subscriptions: closing a delivery frame this thread does not hold")
        me.pop(frame)
    }

    /// Runs one queued call of an entry that the scheduled block holds weakly (a queued delivery
    /// without a mailbox, a paced wake-up): `call` inside a queued-call frame, or `refused` (with
    /// the entry, if it still exists) when there is no entry or `_beginQueuedCall(_:)` refuses.
    ///
    /// `entry` is the block's one strong reference, loaded from its weak capture and handed over
    /// here; it is released before the frame closes. So the block never holds the entry past its
    /// frame: a canceller that waited for the frame holds the last reference, and the entry (with
    /// whatever it still holds) goes with the canceller's release, not later on the queue.
    @inline(__always)
    func _runQueuedCall<E: _Entry>(_ entry: consuming E?, call: (E) -> Void, refused: (E?) -> Void) {
        guard let frame = entry.flatMap({ _beginQueuedCall($0) }) else {
            refused(entry)
            return
        }
        if let entry { call(entry) }
        entry = nil
        _endQueuedCall(frame)
    }
}
