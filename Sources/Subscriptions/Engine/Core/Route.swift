import Synchronization
internal import _SubscriptionsShims

/// The registry of one name: its entries in delivery order, published for posts that read them
/// without any lock. See Engine/DESIGN.md for the protocols.
///
/// Every `var` is guarded by `stripe.mutex`; posts read only `published` and the buffer it
/// points to.
final class _Route: _SubscriptionHome, @unchecked Sendable {
    // @unchecked: all `var`s are read and written only while holding `stripe.mutex`; the slot
    // buffers are atomics, read by posts without the lock.
    let key: _NameKey
    let stripe: _Stripe
    /// The address of the current `_SlotBuffer`.
    let published: Atomic<UInt>
    /// Set when the center deinitialised: the route is in no table any more.
    let detached = Atomic<Bool>(false)
    /// The center's pattern state (`PostCenter._patternState`) at which a post found that no
    /// pattern can match this name (0: not known). Written by posters, only when it changes
    /// (once per pattern subscription at most), so that later posts skip the pattern check.
    let patternMiss = Atomic<UInt>(0)

    @exclusivity(unchecked) var buffer: _SlotBuffer
    @exclusivity(unchecked) var live = 0
    @exclusivity(unchecked) var tombstones = 0
    @exclusivity(unchecked) var nextSeq: UInt = 0
    /// Replaced buffers that posts may still read.
    @exclusivity(unchecked) var retired: [_SlotBuffer] = []
    /// The slots of the buffers in `retired`, summed (their capacities).
    @exclusivity(unchecked) var retiredSlots = 0
    /// The buffer the last `lockedFill` retired (its address; 0: none), which `lockedReclaim`
    /// keeps as `spare` instead of freeing it.
    @exclusivity(unchecked) var filled: UInt = 0
    /// A buffer that no post reads any more, kept for the next `lockedFill`: churn at a priority
    /// (subscribe, cancel, subscribe again) then copies the slots into it instead of allocating,
    /// zeroing and freeing a buffer each time. At most one per route, and only on a route that
    /// filled a slot; freed with the route.
    @exclusivity(unchecked) var spare: _SlotBuffer?
    /// The priority of the entry in each slot of `buffer` (a word per slot of its capacity, 0 for
    /// an empty slot or the default), once an entry of another priority joined; `nil` on a route
    /// whose entries always had the default. It moves with the slots: a rebuild remaps it (or
    /// drops it when `prioritized` is 0), a fill or a detach writes one word. Kept while
    /// `prioritized` is 0 (every word 0), so that churn at a priority does not allocate it anew.
    @exclusivity(unchecked) var priorityOf: UnsafeMutablePointer<Int>?
    /// How many live entries have a priority other than 0 (their words in `priorityOf`): 0 on a
    /// route whose entries all have the default (the common case costs one check).
    @exclusivity(unchecked) var prioritized = 0
    /// At most the lowest priority of the live entries (0 while `prioritized` is 0): an entry
    /// of a priority at most this goes last without a look at the others. Lowered by inserts,
    /// reset to 0 when `prioritized` falls to 0.
    @exclusivity(unchecked) var lowest = 0
    /// At least the highest priority of the live entries (0 while `prioritized` is 0): an entry
    /// of a priority above this goes before every live entry, without a look at their priorities.
    /// Raised by inserts, reset to 0 when `prioritized` falls to 0.
    @exclusivity(unchecked) var highest = 0

    init(key: _NameKey, stripe: _Stripe) {
        self.key = key
        self.stripe = stripe
        let initial = _SlotBuffer.allocate(capacity: 4)
        self.buffer = initial
        self.published = Atomic(initial.bits)
    }

    deinit {
        // No post reads this route any more: the tables that held it are freed.
        for old in retired { old.free() }
        spare?.free()
        priorityOf?.deallocate()
        buffer.free()
    }

    /// This route's address: what a thread record's `routeHint` names (see `_ThreadRecord.announce`).
    @inline(__always)
    var _routeBits: UInt { UInt(bitPattern: Unmanaged.passUnretained(self).toOpaque()) }

    /// Slots in the current buffer (live entries and tombstones). For tests.
    var _slotCount: Int { stripe.mutex.withLock { _ in buffer.count } }

    /// Replaced buffers not freed yet. For tests.
    var _retiredCount: Int { stripe.mutex.withLock { _ in retired.count } }

    /// Slots of the replaced buffers not freed yet. For tests.
    var _retiredSlots: Int { stripe.mutex.withLock { _ in retiredSlots } }

    // MARK: Token operations

    /// Cancels `token`'s entry and waits for the calls of its handler still running on other
    /// threads; see `Subscription.cancel()` for the contract and DESIGN.md for the protocol.
    override func _cancel(_ token: Subscription) {
        cancel(token, wait: true)
    }

    /// Cancels `token`'s entry without waiting (a token's deinit). A token that `cancel()` ended
    /// has nothing left here: its drop takes no lock (the cancel that set the bit has returned,
    /// since it held the token, and it reclaimed what the drop would have).
    override func _drop(_ token: Subscription) {
        if token._seqWord.load(ordering: .acquiring) & Subscription._cancelledBit != 0 { return }
        cancel(token, wait: false)
    }

    /// The phases of DESIGN.md's "Cancel", in its order: the locked section, the drop that parks
    /// its entry for a batch, the heavy fence that finds the entry's holders, then release,
    /// orphaning or the wait.
    private func cancel(_ token: Subscription, wait: Bool) {
        // Claimed before the lock, as every canceller's record is: `onlyThread` below counts it.
        let me = _ThreadRecord.current
        guard let entry = lockedCancel(token, reclaimAll: wait) else { return }
        let bits = _SlotBuffer.bits(of: entry)
        let onlyThread = _ThreadRecord.onlyThread
        if !wait && parkIfNoCallIsSeen(entry, bits, onlyThread: onlyThread) { return }
        let (mine, others) = fenceAndFindHolders(bits, me, settlingParked: wait, onlyThread: onlyThread)
        if others == 0 && !mine {
            entry.releaseHandler()
            return
        }
        // Inside the handler itself, or a deinit: never wait.
        if mine || !wait {
            _Orphans.add(entry)
            return
        }
        if _ThreadRecord.waitForOtherCallers(of: bits, me: me) {
            // Released here, outside the lock and after the wait.
            entry.releaseHandler()
        } else {
            _Orphans.add(entry)
        }
    }

    /// "lock { … }": reclaims what the stripe and the route retired (every buffer for a
    /// `cancel()`, a pile for a drop), takes the entry from the token, marks it cancelled and
    /// zeroes its slots. Returns the entry, or `nil` when the token was cancelled already.
    private func lockedCancel(_ token: Subscription, reclaimAll: Bool) -> _Entry? {
        var released: [_Route]?
        let found = stripe.mutex.withLock { state -> _Entry? in
            released = stripe.lockedReclaim(&state)
            if reclaimAll { lockedReclaim() } else { lockedReclaimIfPiledUp() }
            guard let entry = token._entry else { return nil }
            token._entry = nil
            // Relaxed: every path below runs a full fence before it reads a record (a heavy
            // fence, a section's, the one-thread answer's), or parks the entry for a batch whose
            // settling thread takes it under the batch's lock and then fences.
            entry.state.store(_Entry.cancelled, ordering: .relaxed)
            let seq = token._seq
            lockedDetach(entry, seq: seq, fenceFollows: true, &state)
            // Releasing: a drop that reads it (acquiring) takes no lock (`_drop`).
            token._seqWord.store(seq | Subscription._cancelledBit, ordering: .releasing)
            return entry
        }
        withExtendedLifetime(released) {}
        return found
    }

    /// A token's drop that sees no call of `entry` under way (no fence: `false` may miss one,
    /// which the batch's fence then catches) parks it in the batch of dropped entries and returns
    /// `true`. Only in the asymmetric form with other threads alive: elsewhere the heavy fence is
    /// a plain full fence, with nothing to save.
    private func parkIfNoCallIsSeen(_ entry: _Entry, _ bits: UInt, onlyThread: Bool) -> Bool {
        let routeBits = _routeBits
        if !onlyThread && !_Fence.symmetric && !_ThreadRecord.anyVisiblyCalls(bits, on: routeBits) {
            // A drop that sees no call under way: one heavy fence later serves a whole batch.
            _Retirements.retire(entry)
            return true
        }
        return false
    }

    /// "HEAVY FENCE { … }": after it, a post that has not published `bits` yet reads the zeroed
    /// slot (or the cancelled state), and every call of the entry that may still run is visible.
    /// Returns whether the calling thread (`me`) calls it (`mine`) and how many other records do. With
    /// `settlingParked` (a `cancel()`), the dropped tokens parked so far are sorted out under the
    /// same fence, and their captures go on a settling job.
    private func fenceAndFindHolders(
        _ bits: UInt, _ me: _ThreadRecord, settlingParked: Bool, onlyThread: Bool
    ) -> (mine: Bool, others: Int) {
        // Dropped tokens parked before this point are settled by the same fence.
        var parked = settlingParked ? _Retirements.take() : nil
        let section = _Fence.beginHeavy(onlyThread: onlyThread)
        var settled: _Retirements.Settled?
        if var batch = parked.take(), !batch.isEmpty { settled = _Retirements.sortOut(&batch, onlyThread: onlyThread) }
        let holders = _ThreadRecord.holders(of: bits, on: _routeBits, me: me, onlyThread: onlyThread)
        _Fence.endHeavy(section)
        // The parked entries' captures go on a settling job, never on this thread: an unrelated
        // cancel must not run (and wait for) what another token's captures do in their deinit.
        settled?.finishOnJob()
        return holders
    }

    override func _setPaused(_ paused: Bool, _ token: Subscription) {
        stripe.mutex.withLock { _ in
            // Only active <-> paused: a fired one-shot stays spent.
            _ = token._entry?.state.compareExchange(
                expected: paused ? _Entry.active : _Entry.paused, desired: paused ? _Entry.paused : _Entry.active,
                ordering: .relaxed)
        }
    }

    override func _describe(_ token: Subscription) -> (name: String, site: UInt16, state: String) {
        var keep: [AnyObject] = []
        let (site, state) = stripe.mutex.withLock { _ -> (UInt16, String) in
            guard let entry = token._entry else { return (0, "cancelled") }
            let state = entry.state.load(ordering: .relaxed)
            if detached.load(ordering: .relaxed) || (state != _Entry.active && state != _Entry.paused)
                || !entry.isReachable(keeping: &keep)
            {
                return (entry.site, "cancelled")
            }
            return (entry.site, state == _Entry.paused ? "paused" : "active")
        }
        withExtendedLifetime(keep) {}
        return (key.name.debugDescription, site, state)
    }

    override func _isActive(_ token: Subscription) -> Bool {
        var keep: [AnyObject] = []
        let active = stripe.mutex.withLock { _ -> Bool in
            guard !detached.load(ordering: .relaxed), let entry = token._entry,
                entry.state.load(ordering: .relaxed) == _Entry.active
            else { return false }
            return entry.isReachable(keeping: &keep)
        }
        withExtendedLifetime(keep) {}
        return active
    }
}
