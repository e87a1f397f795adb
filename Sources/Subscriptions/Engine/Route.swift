import Synchronization
internal import _SubscriptionsShims

/// A lock and the routes whose names hash to it. A center has several stripes so that
/// subscribes and cancels of different names rarely meet on a lock. Posts take no lock: they
/// read the published `table`, holding it in their thread record while they use it.
final class _Stripe: Sendable {
    let mutex: _PlatformMutex<_StripeState>
    /// The address of the current `_NameTable`.
    let table: Atomic<UInt>
    /// The center's tracker, through which a route reports a handler that threw (its
    /// `reporter` is the center, held weakly). Read only on that cold path.
    let tracker: _DeliveryTracker
    /// Keeps stripes allocated one after another on different cache lines.
    private let _padding: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)

    init(tracker: _DeliveryTracker) {
        self.tracker = tracker
        let initial = _NameTable.allocate(capacity: 8)
        mutex = _PlatformMutex(_StripeState(table: initial))
        table = Atomic(initial.bits)
    }

    deinit {
        // The center is gone (`_detachAll` emptied the table): no post reads it.
        mutex.withLock { state in
            state.table.free()
            for item in state.retired { item.table.free() }
        }
    }

    /// Adds `route` to the table (the caller holds the lock): in place, or in a bigger copy.
    func lockedInsert(_ route: _Route, _ state: inout _StripeState) {
        if (state.count + 1) * 2 > state.table.capacity {
            lockedRebuild(&state, capacity: state.table.capacity * 2)
        }
        state.table.place(Unmanaged.passRetained(route))
        state.count += 1
    }

    /// Notes that a route became empty; drops the empty routes once they are as many as the
    /// others (amortised O(1) per emptied route).
    func lockedNoteEmpty(_ state: inout _StripeState) {
        state.emptied += 1
        if state.emptied >= max(8, state.count / 2) { lockedRebuild(&state, capacity: nil) }
    }

    /// Publishes a new table holding the routes that still have subscriptions (all of them when
    /// `capacity` is given), and retires the old one with the routes it alone holds.
    private func lockedRebuild(_ state: inout _StripeState, capacity: Int?) {
        var keep: [Unmanaged<_Route>] = []
        var drop: [_Route] = []
        state.table.visitRoutes { route in
            if capacity != nil || route._withUnsafeGuaranteedRef({ $0.live > 0 }) {
                keep.append(route)
            } else {
                drop.append(route.takeRetainedValue())
            }
        }
        var size = capacity ?? 8
        while (keep.count + 1) * 2 > size { size *= 2 }
        let fresh = _NameTable.allocate(capacity: size)
        for route in keep { fresh.place(route) }
        table.store(fresh.bits, ordering: .releasing)
        state.retired.append((state.table, drop))
        state.table = fresh
        state.count = keep.count
        state.emptied = 0
    }

    /// Frees the retired tables that no post reads any more. Returns the routes that no post can
    /// reach any more, to be released after unlocking.
    ///
    /// A route dropped by a rebuild is held by the table that rebuild retired, but a post may
    /// reach it through an *older* retired table too (growth copies every route into the new
    /// table, so the route is in every table since it was inserted), and a post walking the route
    /// reads its slot buffer, which the route's deinit frees. So the routes of a freed table go
    /// to the newest older table still read, and are released only with the oldest read table.
    /// (A post reads only the current table: a retired table that nobody reads after the fence
    /// is never read again.) Inlined for the common case, nothing retired, which every
    /// `cancel()` asks about.
    @inline(__always)
    func lockedReclaim(_ state: inout _StripeState) -> [_Route] {
        state.retired.isEmpty ? [] : lockedReclaimRetired(&state)
    }

    /// `lockedReclaim` when some tables are retired.
    private func lockedReclaimRetired(_ state: inout _StripeState) -> [_Route] {
        var released: [_Route] = []
        var kept: [(table: _NameTable, routes: [_Route])] = []
        let onlyThread = _ThreadRecord.onlyThread
        _Fence.heavy(onlyThread: onlyThread) {
            for item in state.retired {
                var read = false
                _ThreadRecord.visitAll(onlyThread: onlyThread) { read = read || $0.reads(item.table.bits) }
                if read {
                    kept.append(item)
                    continue
                }
                item.table.free()
                if kept.isEmpty {
                    released.append(contentsOf: item.routes)
                } else {
                    kept[kept.count - 1].routes.append(contentsOf: item.routes)
                }
            }
        }
        state.retired = kept
        return released
    }
}

/// The registry of one name: its entries in delivery order, published for posts that read them
/// without any lock. See DESIGN.md beside this file for the protocols.
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
    /// The priority of each live entry subscribed at a priority other than 0, by slot word;
    /// empty on a route whose entries all have the default (the common case costs one check).
    @exclusivity(unchecked) var priorities: [UInt: Int] = [:]
    /// At most the lowest priority of the live entries (0 while `priorities` is empty): an entry
    /// of a priority at most this goes last without a look at the others. Lowered by inserts,
    /// reset to 0 when `priorities` empties.
    @exclusivity(unchecked) var lowest = 0
    /// At least the highest priority of the live entries (0 while `priorities` is empty): an entry
    /// of a priority above this goes before every live entry, without a look at their priorities.
    /// Raised by inserts, reset to 0 when `priorities` empties.
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
    private func lockedReclaimIfPiledUp() {
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
    @inline(__always)
    func lockedInsert(_ entry: _Entry, priority: Int) -> UInt {
        if priority == 0 && priorities.isEmpty { return lockedAppend(entry) }
        return lockedInsertPrioritized(entry, priority: priority)
    }

    /// `lockedInsert` for an entry of another priority than 0, or on a route that has some: out
    /// of line, so that the default case stays as small as an append.
    @inline(never)
    private func lockedInsertPrioritized(_ entry: _Entry, priority: Int) -> UInt {
        if priority <= lowest || live == 0 {
            lowest = min(lowest, priority)
            highest = max(highest, priority)
            if priority != 0 { priorities[_SlotBuffer.bits(of: entry)] = priority }
            return lockedAppend(entry)
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
                if priorities[b, default: 0] >= priority { break }
                place = i
            }
        }
        highest = max(highest, priority)
        if priority != 0 { priorities[_SlotBuffer.bits(of: entry)] = priority }
        if place == buffer.count { return lockedAppend(entry) }
        nextSeq += 1
        lockedRebuild(capacity: max(4, 2 * (live + 1)), inserting: entry, before: place)
        live += 1
        lockedReclaimIfPiledUp()
        return nextSeq
    }

    /// Forgets the priority of the entry `bits`, which leaves the route. Out of line: only routes
    /// with priorities other than 0 get here.
    @inline(never)
    private func lockedForgetPriority(_ bits: UInt) {
        priorities[bits] = nil
        if priorities.isEmpty {
            lowest = 0
            highest = 0
        }
    }

    /// Publishes a new buffer holding the live entries in order, and retires the old one. With
    /// `inserting`, that entry goes in too, just before the slot `before` of the old buffer.
    /// - Complexity: O(slots).
    private func lockedRebuild(capacity: Int, inserting new: _Entry? = nil, before: Int = -1) {
        let fresh = _SlotBuffer.allocate(capacity: capacity)
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
            n &+= 1
        }
        fresh.setCount(n)
        fresh.lastSeq = nextSeq
        published.store(fresh.bits, ordering: .releasing)
        retired.append(buffer)
        retiredSlots += buffer.capacity
        buffer = fresh
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
        entry.index = _Entry.detached
        if !priorities.isEmpty { lockedForgetPriority(bits) }
        live -= 1
        tombstones += 1
        if tombstones >= max(8, live) { lockedRebuild(capacity: max(4, 2 * live)) }
        if live == 0 { stripe.lockedNoteEmpty(&state) }
    }

    /// Frees the retired buffers no post reads any more (after a fence: see `_Fence.heavy`), if
    /// any are retired.
    private func lockedReclaim() {
        guard !retired.isEmpty else { return }
        let onlyThread = _ThreadRecord.onlyThread
        _Fence.heavy(onlyThread: onlyThread) {
            retired.removeAll { old in
                var read = false
                _ThreadRecord.visitHinted(_routeBits, onlyThread: onlyThread) { read = read || $0.reads(old.bits) }
                if !read {
                    retiredSlots -= old.capacity
                    old.free()
                }
                return !read
            }
        }
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

    // MARK: Calls outside a post

    /// Opens a frame on the calling thread for one call of `entry` outside a post (a queued,
    /// main-actor or actor delivery), unless it was cancelled or paused meanwhile. Returns the
    /// index of the frame in the thread's record, to pass to `_endQueuedCall(_:)`, or `nil` when
    /// the call must not happen.
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

    /// Runs `call` inside a queued-call frame for `entry`, unless `_beginQueuedCall(_:)` refuses
    /// (the entry was cancelled or paused meanwhile). Returns what `call` returned, or `nil` when
    /// refused.
    @discardableResult
    @inline(__always)
    func _inQueuedCall<R>(_ entry: _Entry, _ call: () -> R) -> R? {
        guard let frame = _beginQueuedCall(entry) else { return nil }
        defer { _endQueuedCall(frame) }
        return call()
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

    // MARK: Token operations

    /// Cancels `token`'s entry and waits for the calls of its handler still running on other
    /// threads; see `Subscription.cancel()` for the contract and DESIGN.md for the protocol.
    override func _cancel(_ token: Subscription) {
        cancel(token, wait: true)
    }

    /// Cancels `token`'s entry without waiting (a token's deinit).
    override func _drop(_ token: Subscription) {
        cancel(token, wait: false)
    }

    private func cancel(_ token: Subscription, wait: Bool) {
        let me = _ThreadRecord.current
        var released: [_Route] = []
        let found = stripe.mutex.withLock { state -> _Entry? in
            released = stripe.lockedReclaim(&state)
            if wait { lockedReclaim() } else { lockedReclaimIfPiledUp() }
            guard let entry = token._entry else { return nil }
            token._entry = nil
            // Relaxed: every path below runs a full fence before it reads a record (a heavy
            // fence, a section's, the one-thread answer's), or parks the entry for a batch whose
            // settling thread takes it under the batch's lock and then fences.
            entry.state.store(_Entry.cancelled, ordering: .relaxed)
            lockedDetach(entry, seq: token._seq, fenceFollows: true, &state)
            return entry
        }
        withExtendedLifetime(released) {}
        guard let entry = found else { return }
        let bits = _SlotBuffer.bits(of: entry)
        let onlyThread = _ThreadRecord.onlyThread
        let routeBits = _routeBits
        if !wait && !onlyThread && !_Fence.symmetric && !_ThreadRecord.anyVisiblyCalls(bits, on: routeBits) {
            // A drop that sees no call under way: one heavy fence later serves a whole batch.
            // (In the symmetric mode the heavy fence is a plain full fence: nothing to save.)
            _Retirements.retire(entry)
            return
        }
        // Dropped tokens parked before this point are settled by the same fence.
        var parked = wait ? _Retirements.take() : []
        var settled: _Retirements.Settled?
        var mine = false
        var others = 0
        // After this fence, a post that has not published `bits` yet reads the zeroed slot (or
        // the cancelled state), and every call of the entry that may still run is visible.
        _Fence.heavy(onlyThread: onlyThread) {
            if !parked.isEmpty { settled = _Retirements.sortOut(&parked, onlyThread: onlyThread) }
            _ThreadRecord.visitHinted(routeBits, onlyThread: onlyThread) { r in
                if r.calls(bits) {
                    if r == me { mine = true } else { others += 1 }
                }
            }
        }
        // The parked entries' captures go on a settling job, never on this thread: an unrelated
        // cancel must not run (and wait for) what another token's captures do in their deinit.
        settled?.finishOnJob()
        if others == 0 && !mine {
            entry.releaseHandler()
            return
        }
        // Inside the handler itself, or a deinit: never wait.
        if mine || !wait {
            _Orphans.add(entry)
            return
        }
        var cycle = false
        // Inside `visitAll`'s scan section: `r`, and every record a `waitingFor` link names, stay
        // mapped while we wait and follow links.
        _ThreadRecord.visitAll { r in
            guard !cycle, r != me, r.calls(bits) else { return }
            me.beginWait(for: r, on: bits)
            var attempt = 0
            while r.calls(bits) {
                // The thread we wait for waits (through a chain of live waits) for us: do not
                // close the cycle.
                if me.closesCycle(waitingFor: r) {
                    cycle = true
                    break
                }
                _backoff(attempt)
                attempt += 1
            }
            me.endWait()
        }
        if cycle {
            _Orphans.add(entry)
        } else {
            // Released here, outside the lock and after the wait.
            entry.releaseHandler()
        }
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
