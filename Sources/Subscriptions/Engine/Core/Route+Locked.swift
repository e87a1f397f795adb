import Synchronization
internal import _SubscriptionsShims

extension _Route {
    // MARK: Locked operations (the caller holds `stripe.mutex`)

    /// How many replaced buffers a subscribe or a token drop lets pile up before it reclaims them
    /// (each reclaim costs a heavy fence, which interrupts every core running a thread of the
    /// process). An explicit `cancel()` reclaims whenever one is pending: it pays a heavy fence
    /// anyway. Buffers at most double, so the pile is O(live) words.
    static let reclaimBatch = 32

    /// How many retired slots (summed capacities) a subscribe or a token drop lets pile up before
    /// it reclaims, whatever their number: 32 KiB of slots. Small routes batch `reclaimBatch`
    /// reclaims into one fence; a large route reclaims at every growth past this size, one fence per doubling
    /// (O(log n) fences for n subscribes), so its retired buffers do not add about one more
    /// buffer's worth of memory to every subscription.
    static let reclaimSlots = 4096

    /// Reclaims if `reclaimBatch` buffers or `reclaimSlots` slots are retired.
    func lockedReclaimIfPiledUp() {
        if retired.count >= _Route.reclaimBatch || retiredSlots >= _Route.reclaimSlots { lockedReclaim() }
    }

    /// Appends `entry` at the end of the delivery order and returns its sequence number, which
    /// its token keeps (see `lockedDetach`). Buffers replaced because they were full are freed
    /// once `reclaimBatch` of them or `reclaimSlots` slots are pending (or by the next
    /// `cancel()`), unless a post still reads them.
    /// - Complexity: amortised O(1).
    func lockedAppend(_ entry: _Entry) -> UInt {
        if buffer.count == buffer.capacity {
            lockedRebuild(capacity: max(4, 2 * (live + 1)))
            lockedReclaimIfPiledUp()
        }
        nextSeq += 1
        entry.index = UInt32(truncatingIfNeeded: buffer.count)
        buffer.append(_SlotBuffer.bits(of: entry), seq: nextSeq)
        live += 1
        return nextSeq
    }

    /// Inserts `entry` at its place in the delivery order: after every live entry whose priority
    /// is at least `priority` (so equal priorities keep subscription order), before the others.
    /// Returns its sequence number, like `lockedAppend`. With priority 0 on a route whose entries
    /// all have priority 0 it is `lockedAppend`. An entry that goes last is appended; one that
    /// goes before another is placed in a new buffer, published and retired like a growth (a post
    /// in progress keeps walking the buffer it read, without the new entry: guarantee 5).
    /// - Complexity: amortised O(1) when the entry goes last (a walk back over the entries of
    ///   lower priority at the end, none in the common case), O(slots) otherwise (a copy of the
    ///   slots; finding the place of an entry that goes before all others reads no priority).
    ///   The copy is a block copy when a cancelled entry left the slot just before the place
    ///   empty (churn at one priority): the entry takes that slot and no other entry moves.
    @inline(__always)
    func lockedInsert(_ entry: _Entry, priority: Int) -> UInt {
        if priority == 0 && prioritized == 0 { return lockedAppend(entry) }
        return lockedInsertPrioritized(entry, priority: priority)
    }

    /// `lockedInsert` for an entry of another priority than 0, or on a route that has some: out
    /// of line, so that the default case stays as small as an append.
    @inline(never)
    private func lockedInsertPrioritized(_ entry: _Entry, priority: Int) -> UInt {
        if priority <= lowest || live == 0 {
            lowest = min(lowest, priority)
            highest = max(highest, priority)
            let seq = lockedAppend(entry)
            lockedSetPriority(priority, of: entry)
            return seq
        }
        // The slot before which the entry goes: the first of the live entries at the end whose
        // priority is lower than its own; the end if there is none. Above `highest`, that is the
        // first live entry.
        var place = buffer.count
        if priority > highest {
            place = 0
            while buffer.slot(place) == 0 { place &+= 1 }
        } else {
            var i = buffer.count
            while i > 0 {
                i &-= 1
                let b = buffer.slot(i)
                if b == 0 { continue }
                if (priorityOf.map { $0[i] } ?? 0) >= priority { break }
                place = i
            }
        }
        highest = max(highest, priority)
        if place == buffer.count {
            let seq = lockedAppend(entry)
            lockedSetPriority(priority, of: entry)
            return seq
        }
        nextSeq += 1
        if place > 0 && buffer.slot(place &- 1) == 0 {
            lockedFill(place &- 1, with: entry)
        } else {
            lockedRebuild(capacity: max(4, 2 * (live + 1)), inserting: entry, before: place)
        }
        lockedSetPriority(priority, of: entry)
        live += 1
        lockedReclaimIfPiledUp()
        return nextSeq
    }

    /// Notes the priority of `entry`, just placed in `buffer` (its word is 0 until then).
    private func lockedSetPriority(_ priority: Int, of entry: _Entry) {
        guard priority != 0 else { return }
        let words: UnsafeMutablePointer<Int>
        if let priorityOf {
            words = priorityOf
        } else {
            words = .allocate(capacity: buffer.capacity)
            words.initialize(repeating: 0, count: buffer.capacity)
            priorityOf = words
        }
        words[Int(entry.index)] = priority
        prioritized += 1
    }

    /// Forgets the priority of the entry in slot `i`, which leaves the route; resets the bounds
    /// when no entry of another priority than 0 is left. Out of line: only routes with
    /// priorities other than 0 get here.
    @inline(never)
    private func lockedForgetPriority(at i: Int) {
        guard let words = priorityOf, words[i] != 0 else { return }
        words[i] = 0
        prioritized -= 1
        if prioritized == 0 {
            lowest = 0
            highest = 0
        }
    }

    /// Publishes a copy of the buffer with `entry` in the empty slot `t` (a cancelled entry's, just
    /// before the new entry's place), and retires the old one, as a rebuild does (a post in
    /// progress keeps walking the old one, without the new entry). Every other entry keeps its
    /// place, so none is written: an allocation and a block copy of the slots.
    private func lockedFill(_ t: Int, with entry: _Entry) {
        entry.index = UInt32(truncatingIfNeeded: t)
        var reused = spare.take()
        if let r = reused, r.capacity != buffer.capacity {
            r.free()
            reused = nil
        }
        let fresh = buffer.copy(filling: t, with: _SlotBuffer.bits(of: entry), seq: nextSeq, into: reused)
        filled = buffer.bits
        lockedPublish(fresh)
        tombstones -= 1
    }

    /// Publishes `fresh` in place of `buffer`, which is retired: posts that read it keep walking
    /// it until a reclaim finds none does.
    private func lockedPublish(_ fresh: _SlotBuffer) {
        published.store(fresh.bits, ordering: .releasing)
        retired.append(buffer)
        retiredSlots += buffer.capacity
        buffer = fresh
    }

    /// Publishes a new buffer holding the live entries in order, and retires the old one. With
    /// `inserting`, that entry goes in too, just before the slot `before` of the old buffer.
    /// - Complexity: O(slots).
    private func lockedRebuild(capacity: Int, inserting new: _Entry? = nil, before: Int = -1) {
        let fresh = _SlotBuffer.allocate(capacity: capacity)
        // The priorities move with their slots (the new entry's is noted by the caller); with
        // none left, the words go.
        let oldPriorities = priorityOf
        var newPriorities: UnsafeMutablePointer<Int>?
        if prioritized != 0 && oldPriorities != nil {
            newPriorities = .allocate(capacity: fresh.capacity)
            newPriorities?.initialize(repeating: 0, count: fresh.capacity)
        }
        // The slots are written with a count of their own and published at once: no post reads
        // `fresh` before `published` names it.
        var n = 0
        let count = buffer.count
        for i in 0..<count {
            if i == before, let new {
                new.index = UInt32(truncatingIfNeeded: n)
                fresh.slots[n].store(_SlotBuffer.bits(of: new), ordering: .relaxed)
                n &+= 1
            }
            let b = buffer.slot(i)
            guard b != 0 else { continue }
            _SlotBuffer.entry(b)._withUnsafeGuaranteedRef { entry in entry.index = UInt32(truncatingIfNeeded: n) }
            fresh.slots[n].store(b, ordering: .relaxed)
            if let oldPriorities, let newPriorities { newPriorities[n] = oldPriorities[i] }
            n &+= 1
        }
        oldPriorities?.deallocate()
        priorityOf = newPriorities
        fresh.setCount(n)
        fresh.lastSeq = nextSeq
        lockedPublish(fresh)
        tombstones = 0
    }

    /// Takes `entry` out of the delivery order: zeroes its slot in the current buffer and in
    /// every retired buffer that holds it (posts may still walk those), and squeezes the
    /// tombstones out once they are as many as the live entries (amortised O(1) per cancel).
    /// Idempotent: a one-shot detaches itself when it fires and again when cancelled.
    ///
    /// `seq` is the entry's sequence number (kept by its token, not in the entry, which keeps
    /// entries small): retired buffers whose last entry came before it cannot hold the entry and
    /// are skipped. `nil` (a firing one-shot, `removeObserver`) searches every retired buffer.
    ///
    /// `fenceFollows`: the caller runs a full fence (or parks the entry for a batch that does)
    /// before it reads a thread record, so the slots may be zeroed with relaxed stores (see
    /// `_SlotBuffer.clear`).
    func lockedDetach(_ entry: _Entry, seq: UInt? = nil, fenceFollows: Bool = false, _ state: inout _StripeState) {
        guard entry.index != _Entry.detached else { return }
        let bits = _SlotBuffer.bits(of: entry)
        buffer.clear(Int(entry.index), fenceFollows: fenceFollows)
        // Buffers retire in order, so their `lastSeq`s never decrease: walk back from the newest
        // and stop at the first one that ends before the entry (no older one can hold it either).
        // Reading fewer headers matters: each is a cache miss on a different buffer.
        var r = retired.count
        while r > 0 {
            r &-= 1
            let old = retired[r]
            if let seq, old.lastSeq < seq { break }
            if let i = old.index(of: bits) { old.clear(i, fenceFollows: fenceFollows) }
        }
        if prioritized != 0 { lockedForgetPriority(at: Int(entry.index)) }
        entry.index = _Entry.detached
        live -= 1
        tombstones += 1
        if tombstones >= max(8, live) { lockedRebuild(capacity: max(4, 2 * live)) }
        if live == 0 { stripe.lockedNoteEmpty(&state) }
    }

    /// Frees the retired buffers no post reads any more (after a fence: see `_Fence.beginHeavy`), if
    /// any are retired.
    func lockedReclaim() {
        guard !retired.isEmpty else { return }
        let onlyThread = _ThreadRecord.onlyThread
        let section = _Fence.beginHeavy(onlyThread: onlyThread)
        // Compacted in place, in order: the buffers still read keep their places.
        var kept = 0
        for i in retired.indices {
            let old = retired[i]
            if _ThreadRecord.anyReads(old.bits, hintedBy: _routeBits, onlyThread: onlyThread) {
                retired[kept] = old
                kept += 1
            } else {
                retiredSlots -= old.capacity
                if old.bits == filled && spare == nil {
                    spare = old
                    filled = 0
                } else {
                    old.free()
                }
            }
        }
        retired.removeLast(retired.count - kept)
        _Fence.endHeavy(section)
    }

    /// Detaches a one-shot entry that just fired; its token still owns it.
    func _detach(_ entry: _Entry) {
        stripe.mutex.withLock { state in lockedDetach(entry, &state) }
    }

    /// How many subscriptions the next post would reach.
    func lockedReachableCount(keeping keep: inout [AnyObject]) -> Int {
        var n = 0
        for i in 0..<buffer.count {
            let b = buffer.slot(i)
            guard b != 0 else { continue }
            let reachable = _SlotBuffer.entry(b)._withUnsafeGuaranteedRef { entry in
                entry.state.load(ordering: .relaxed) == _Entry.active && entry.isReachable(keeping: &keep)
            }
            if reachable { n += 1 }
        }
        return n
    }

    /// Live subscriptions per call-site id. Loaded observers and senders go to `keep`.
    func lockedSiteCounts(keeping keep: inout [AnyObject]) -> [UInt16: Int] {
        var counts: [UInt16: Int] = [:]
        for i in 0..<buffer.count {
            let bits = buffer.slot(i)
            guard bits != 0 else { continue }
            _SlotBuffer.entry(bits)._withUnsafeGuaranteedRef { entry in
                let state = entry.state.load(ordering: .relaxed)
                guard state == _Entry.active || state == _Entry.paused, entry.isReachable(keeping: &keep) else {
                    return
                }
                counts[entry.site, default: 0] += 1
            }
        }
        return counts
    }
}
