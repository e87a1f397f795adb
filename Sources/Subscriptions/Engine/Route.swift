import Synchronization
internal import _SubscriptionsShims

/// What a delivery in progress publishes about itself, in memory owned by the delivering thread
/// (its stack) for as long as its frame is linked.
struct _FrameCell: ~Copyable {
    /// For a post: the index of the slot it is at (stored before the slot is read, so a value
    /// past an index means that slot's call has returned); -1 before the first.
    let progress = Atomic<Int>(-1)
    /// For a queued or main-actor call: the address bits of the one entry it calls; 0 for posts.
    let target = Atomic<UInt>(0)
}

/// One delivery in progress on a route: which post (by ticket, in start order) on which thread,
/// how many slots it walks, and where it publishes its progress.
struct _Frame {
    var ticket: UInt64
    var thread: UInt
    var count: Int
    var cell: UnsafePointer<_FrameCell>

    /// Whether this frame may still read or call the entry that was at `index` (with address
    /// `bits`) when it was cancelled. `precise` says a process-wide fence ran after the
    /// cancellation: then a post that has not reached `index` yet is sure to read the zeroed slot
    /// and the cancelled state, and only one that is at `index` counts; without the fence, one
    /// that has not passed `index` counts too.
    func mayReach(_ index: UInt32, _ bits: UInt, precise: Bool) -> Bool {
        let target = cell.pointee.target.load(ordering: .relaxed)
        if target != 0 { return target == bits }
        if index == _Entry.detached { return true }  // a fired one-shot: its slot is gone
        let i = Int(index)
        if i >= count { return false }
        let at = cell.pointee.progress.load(ordering: .acquiring)
        return precise ? at == i : at <= i
    }
}

/// A cancelled entry that frames linked before its cancellation (`mark`) may still reach; it is
/// released once none may.
struct _Deferred {
    let mark: UInt64
    let index: UInt32
    let bits: UInt
    let entry: _Entry
    var precise: Bool
    /// While its canceller is still inside `cancel()`, only the canceller releases it, so that
    /// the release happens before `cancel()` returns (not on some other thread a bit later).
    var claimed: Bool
}

/// How `cancel()` proceeds once the entry is marked: whether other threads had deliveries in
/// progress, and whether it must wait for them (not when it runs inside the handler itself).
struct _CancelPlan {
    var mark: UInt64 = 0
    var index: UInt32 = 0
    var bits: UInt = 0
    var othersInFlight = false
    var wait = false
    /// The entry was parked in `deferred` (deliveries were in progress).
    var deferred = false
}

/// What a post reads from its route under the lock before it walks the slots without it.
struct _PostStart: @unchecked Sendable {
    // @unchecked: it only carries addresses out of the lock to the thread that linked the frame,
    // which is the only one to use them; the route protocol keeps them valid while it is linked.
    /// The route stays alive while the post's frame is linked (routes leave their table only
    /// when no frame is linked), so the post does not retain it.
    let route: Unmanaged<_Route>
    let slots: UnsafeMutablePointer<Atomic<UInt>>
    let count: Int
    let ticket: UInt64
    /// Frames the posting thread already had on this route: the re-entrant nesting depth.
    let outer: Int
    /// Where the post publishes which slot it is at.
    let cell: UnsafePointer<_FrameCell>
}

/// Objects a locked operation let go of. They are released by the caller after unlocking,
/// because releasing an entry releases its handler closure, whose captures' deinits are user code.
struct _Garbage {
    var entry: _Entry? = nil
    var entries: [_Entry] = []
    var route: _Route? = nil

    /// Releases the handlers of the cancelled entries (see `_Entry.releaseHandler()`), then
    /// everything else. Call without any lock held.
    consuming func dispose() {
        entry?.releaseHandler()
        for entry in entries { entry.releaseHandler() }
    }
}

/// A lock and the routes whose names hash to it. A center has several stripes so that threads
/// posting different names rarely meet on a lock.
final class _Stripe: Sendable {
    let mutex = _Lock(_NameTable())
    /// Keeps the lock words of stripes allocated one after another on different cache lines,
    /// so that threads posting names of different stripes do not slow each other down.
    private let _padding:
        (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
}

/// The registry of one name.
///
/// **Layout.** `slots` is an array of entry addresses in subscription order, unretained (the
/// tokens own the entries); `0` marks a cancelled entry (a tombstone). A post reads `slots` and
/// `count` under the lock, then walks `slots[0..<count]` without it, so entries appended during
/// the post are not reached (they land at `count` or later).
///
/// **In-flight frames.** Every post and every queued call links a `_Frame` under the lock before
/// it touches entries, and unlinks it under the lock when it is done. While any frame is linked,
/// nothing moves: the slot buffer is never compacted and a replaced buffer is retired, not freed.
///
/// **Progress.** A post publishes, per slot, the index it is at (a plain store into its own
/// `_FrameCell`, then a compiler-only fence, then the slot and state loads); a queued call
/// publishes the one entry it calls. Posting pays no atomic read-modify-write per handler.
///
/// **Cancellation.** Under the lock: mark the entry cancelled, zero its slot (in retired buffers
/// too). Frames linked later see both (the lock orders them). For frames linked earlier by other
/// threads, the canceller runs a process-wide fence (Linux `membarrier`): afterwards a post that
/// has not reached the slot is sure to read it zeroed, so only a post that is *at* the slot (or a
/// queued call of the entry) may still be calling the handler, and `cancel()` waits for exactly
/// those. Where no such fence exists, it also waits for posts that have not passed the slot yet.
/// A canceller that is itself inside the handler (at any depth) does not wait at all. The entry
/// is parked in `deferred` and released once no frame linked before the cancellation may reach
/// it, which is at once for a canceller that waited and had no delivery of its own in progress.
///
/// Every mutable property is guarded by `stripe.mutex`.
final class _Route: _SubscriptionHome, @unchecked Sendable {
    // @unchecked: all `var`s are read and written only while holding `stripe.mutex`; the slot
    // cells are atomics, read by posts without the lock.
    let key: _NameKey
    let stripe: _Stripe

    @exclusivity(unchecked) var slots: UnsafeMutablePointer<Atomic<UInt>>
    @exclusivity(unchecked) var capacity: Int
    @exclusivity(unchecked) var count = 0
    @exclusivity(unchecked) var live = 0
    @exclusivity(unchecked) var tombstones = 0
    @exclusivity(unchecked) var nextTicket: UInt64 = 0
    @exclusivity(unchecked) var frames = _Frames()
    @exclusivity(unchecked) var retired: [(slots: UnsafeMutablePointer<Atomic<UInt>>, capacity: Int)] = []
    @exclusivity(unchecked) var deferred: [_Deferred] = []
    /// Set when the center deinitialised: the route is no longer in any table.
    @exclusivity(unchecked) var detached = false

    init(key: _NameKey, stripe: _Stripe) {
        self.key = key
        self.stripe = stripe
        self.capacity = 4
        self.slots = _Route.allocateSlots(4)
    }

    deinit {
        for old in retired { _Route.freeSlots(old.slots, old.capacity) }
        _Route.freeSlots(slots, capacity)
        frames.free()
    }

    static func allocateSlots(_ capacity: Int) -> UnsafeMutablePointer<Atomic<UInt>> {
        let buffer = UnsafeMutablePointer<Atomic<UInt>>.allocate(capacity: capacity)
        for i in 0..<capacity { (buffer + i).initialize(to: Atomic(0)) }
        return buffer
    }

    static func freeSlots(_ buffer: UnsafeMutablePointer<Atomic<UInt>>, _ capacity: Int) {
        buffer.deinitialize(count: capacity)
        buffer.deallocate()
    }

    @inline(__always)
    static func bits(_ entry: _Entry) -> UInt {
        UInt(bitPattern: Unmanaged.passUnretained(entry).toOpaque())
    }

    @inline(__always)
    static func entry(_ bits: UInt) -> Unmanaged<_Entry> {
        Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped)
    }

    // MARK: Locked operations (the caller holds `stripe.mutex`)

    /// Appends `entry` at the end of the delivery order.
    /// - Complexity: amortised O(1).
    func lockedAppend(_ entry: _Entry) {
        if count == capacity { lockedGrow() }
        entry.index = UInt32(truncatingIfNeeded: count)
        slots[count].store(_Route.bits(entry), ordering: .relaxed)
        count += 1
        live += 1
    }

    /// Replaces a full slot buffer with one twice the live size. With no frame linked the old
    /// buffer is compacted first and freed; otherwise it is copied as is and retired until the
    /// route is quiet, since posts may still be reading it.
    private func lockedGrow() {
        let quiet = frames.isEmpty
        if quiet && tombstones > 0 { lockedCompact() }
        let newCapacity = max(4, 2 * (quiet ? count + 1 : count))
        let fresh = _Route.allocateSlots(newCapacity)
        for i in 0..<count { fresh[i].store(slots[i].load(ordering: .relaxed), ordering: .relaxed) }
        if quiet {
            _Route.freeSlots(slots, capacity)
        } else {
            retired.append((slots, capacity))
        }
        slots = fresh
        capacity = newCapacity
    }

    /// Squeezes tombstones out, keeping order. Only while no frame is linked.
    /// - Complexity: O(count).
    private func lockedCompact() {
        var w = 0
        for r in 0..<count {
            let b = slots[r].load(ordering: .relaxed)
            guard b != 0 else { continue }
            if w != r {
                slots[w].store(b, ordering: .relaxed)
                _Route.entry(b)._withUnsafeGuaranteedRef { $0.index = UInt32(truncatingIfNeeded: w) }
            }
            w += 1
        }
        for r in w..<count { slots[r].store(0, ordering: .relaxed) }
        count = w
        tombstones = 0
    }

    /// Whether `lockedQuiesce` has anything to do once no frame is linked. (Retired buffers exist
    /// only while frames are linked, but are listed for clarity.)
    private var needsHousekeeping: Bool {
        live == 0 || tombstones > 0 || !retired.isEmpty
    }

    /// Housekeeping once no frame is linked: free retired buffers, compact when tombstones are a
    /// quarter of the live entries (amortised O(1) per cancel), and leave the table when empty.
    private func lockedQuiesce(_ routes: inout _NameTable, into garbage: inout _Garbage) {
        if !retired.isEmpty {
            for old in retired { _Route.freeSlots(old.slots, old.capacity) }
            retired.removeAll()
        }
        if tombstones > 0 && tombstones * 4 >= live { lockedCompact() }
        if live == 0 && !detached {
            garbage.route = routes.remove(self)
        }
    }

    /// Links a frame for a post and returns what the post walks.
    @inline(__always)
    func lockedBeginPost(_ thread: UInt, _ cell: UnsafePointer<_FrameCell>) -> _PostStart {
        let ticket = nextTicket
        nextTicket &+= 1
        let outer = frames.isEmpty ? 0 : frames.count(thread: thread)
        frames.append(_Frame(ticket: ticket, thread: thread, count: count, cell: cell))
        return _PostStart(
            route: .passUnretained(self), slots: slots, count: count, ticket: ticket, outer: outer, cell: cell)
    }

    /// Unlinks a frame. Returns what the caller must release after unlocking, `nil` (the common
    /// case) when there is nothing.
    @inline(__always)
    func lockedEndPost(_ ticket: UInt64, _ thread: UInt, _ routes: inout _NameTable) -> _Garbage? {
        frames.remove(ticket)
        if deferred.isEmpty && (!frames.isEmpty || !needsHousekeeping) {
            return nil
        }
        return lockedEndPostSlow(thread, &routes)
    }

    private func lockedEndPostSlow(_ thread: UInt, _ routes: inout _NameTable) -> _Garbage {
        var garbage = _Garbage()
        if !deferred.isEmpty { lockedCollectDeferred(into: &garbage) }
        if frames.isEmpty && needsHousekeeping { lockedQuiesce(&routes, into: &garbage) }
        return garbage
    }

    /// Ends the canceller's claim on its deferred entry: releases it when no linked frame may
    /// reach it any more, else leaves it to the frame that unlinks last.
    func lockedSettle(_ plan: _CancelPlan, precise: Bool, into garbage: inout _Garbage) {
        guard let i = deferred.firstIndex(where: { $0.mark == plan.mark && $0.bits == plan.bits }) else { return }
        deferred[i].precise = precise
        deferred[i].claimed = false
        if !frames.mayReach(deferred[i]) {
            garbage.entry = deferred.remove(at: i).entry
        }
    }

    /// Moves the deferred entries that no linked frame may reach any more into `garbage`.
    func lockedCollectDeferred(into garbage: inout _Garbage) {
        deferred.removeAll { item in
            if item.claimed || frames.mayReach(item) { return false }
            garbage.entries.append(item.entry)
            return true
        }
    }

    /// Cancels `token`'s entry: marks it, takes it out of the slot array, and either hands it
    /// back for release (no delivery in progress) or parks it in `deferred`.
    func lockedCancel(
        _ token: Subscription, _ thread: UInt, _ routes: inout _NameTable, into garbage: inout _Garbage
    ) -> _CancelPlan {
        var plan = _CancelPlan()
        guard let entry = token._entry else { return plan }
        token._entry = nil
        plan.index = entry.index
        plan.bits = _Route.bits(entry)
        entry.state.store(_Entry.cancelled, ordering: .relaxed)
        lockedDetach(entry)
        if frames.isEmpty {
            garbage.entry = entry
            if needsHousekeeping { lockedQuiesce(&routes, into: &garbage) }
            return plan
        }
        plan.mark = nextTicket
        plan.deferred = true
        deferred.append(
            _Deferred(mark: plan.mark, index: plan.index, bits: plan.bits, entry: entry, precise: false, claimed: true))
        // Inside the handler itself (at any depth): return at once, never wait.
        let selfRunning = frames.any { $0.thread == thread && $0.mayReach(plan.index, plan.bits, precise: true) }
        plan.othersInFlight = frames.any { $0.thread != thread }
        plan.wait = plan.othersInFlight && !selfRunning
        return plan
    }

    /// Takes `entry` out of the slot array (a tombstone, or a pop of the last slot when no frame
    /// is linked). Idempotent: a one-shot detaches itself when it fires and again when cancelled.
    func lockedDetach(_ entry: _Entry) {
        let i = Int(entry.index)
        guard entry.index != _Entry.detached else { return }
        entry.index = _Entry.detached
        slots[i].store(0, ordering: .relaxed)
        // Posts still walking a replaced buffer must find the slot empty there too.
        for old in retired where i < old.capacity { old.slots[i].store(0, ordering: .relaxed) }
        live -= 1
        if frames.isEmpty && i == count - 1 {
            count -= 1
        } else {
            tombstones += 1
        }
    }

    /// Detaches a one-shot entry that just fired; its token still owns it.
    func _detach(_ entry: _Entry) {
        stripe.mutex.withLock { _ in lockedDetach(entry) }
    }

    /// Whether a delivery of another thread, linked before `plan.mark`, may still call the entry.
    func lockedOthersMayCall(_ plan: _CancelPlan, _ thread: UInt, precise: Bool) -> Bool {
        frames.any {
            $0.thread != thread && $0.ticket < plan.mark && $0.mayReach(plan.index, plan.bits, precise: precise)
        }
    }

    /// How many subscriptions the next post would reach.
    func lockedReachableCount(keeping keep: inout [AnyObject]) -> Int {
        var n = 0
        for i in 0..<count {
            let b = slots[i].load(ordering: .relaxed)
            guard b != 0 else { continue }
            let reachable = _Route.entry(b)._withUnsafeGuaranteedRef { entry in
                entry.state.load(ordering: .relaxed) == _Entry.active && entry.isReachable(keeping: &keep)
            }
            if reachable { n += 1 }
        }
        return n
    }

    // MARK: Queued calls

    /// Links a frame for a queued call of `entry`, unless it was cancelled or paused meanwhile.
    /// `cell` must stay valid until `_endCall`.
    func _beginQueuedCall(_ entry: _Entry, _ cell: UnsafePointer<_FrameCell>) -> UInt64? {
        let thread = _currentThreadID()
        cell.pointee.target.store(_Route.bits(entry), ordering: .relaxed)
        return stripe.mutex.withLock { _ -> UInt64? in
            let state = entry.state.load(ordering: .relaxed)
            guard !detached, state == _Entry.active || state == _Entry.spent else { return nil }
            return lockedBeginPost(thread, cell).ticket
        }
    }

    /// Unlinks the frame of a post or queued call.
    func _endCall(_ ticket: UInt64) {
        let thread = _currentThreadID()
        let garbage = stripe.mutex.withLock { routes in
            lockedEndPost(ticket, thread, &routes)
        }
        garbage?.dispose()
    }

    // MARK: Token operations

    /// Cancels `token`'s entry; see `Subscription.cancel()` for the contract and the type's
    /// comment for the protocol.
    override func _cancel(_ token: Subscription) {
        let thread = _currentThreadID()
        var garbage = _Garbage()
        let plan = stripe.mutex.withLock { routes in
            lockedCancel(token, thread, &routes, into: &garbage)
        }
        var precise = false
        if plan.othersInFlight {
            // After this fence every other thread's later loads see the cancelled state and the
            // zeroed slot, so only a delivery that is *at* the entry can still call it.
            precise = _processFenceAvailable()
            var attempt = 0
            while plan.wait && stripe.mutex.withLock({ _ in lockedOthersMayCall(plan, thread, precise: precise) }) {
                _backoff(attempt)
                attempt += 1
            }
        }
        if plan.deferred {
            stripe.mutex.withLock { _ in
                lockedSettle(plan, precise: precise, into: &garbage)
            }
        }
        // Released here, outside the lock and after the wait: the handler's captures go now
        // (or, when a delivery of this thread may still reach the entry, when that one ends).
        garbage.dispose()
    }

    override func _setPaused(_ paused: Bool, _ token: Subscription) {
        stripe.mutex.withLock { _ in
            // Only active <-> paused: a fired one-shot stays spent.
            _ = token._entry?.state.compareExchange(
                expected: paused ? _Entry.active : _Entry.paused, desired: paused ? _Entry.paused : _Entry.active,
                ordering: .relaxed)
        }
    }

    override func _isActive(_ token: Subscription) -> Bool {
        var keep: [AnyObject] = []
        let active = stripe.mutex.withLock { _ -> Bool in
            guard !detached, let entry = token._entry,
                entry.state.load(ordering: .relaxed) == _Entry.active
            else { return false }
            return entry.isReachable(keeping: &keep)
        }
        withExtendedLifetime(keep) {}
        return active
    }
}

/// The frames linked on a route: a small manually managed array (usually of zero to two
/// elements), so linking and unlinking allocate nothing and do no reference counting.
struct _Frames {
    private var base = UnsafeMutablePointer<_Frame>.allocate(capacity: 4)
    private var capacity = 4
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    func free() { base.deallocate() }

    @inline(__always)
    mutating func append(_ frame: _Frame) {
        if count == capacity {
            let bigger = UnsafeMutablePointer<_Frame>.allocate(capacity: capacity * 2)
            bigger.moveInitialize(from: base, count: count)
            base.deallocate()
            base = bigger
            capacity *= 2
        }
        (base + count).initialize(to: frame)
        count += 1
    }

    /// Removes the frame with `ticket`, keeping the others in start order.
    @inline(__always)
    mutating func remove(_ ticket: UInt64) {
        var i = count - 1
        while i >= 0 && base[i].ticket != ticket { i -= 1 }
        guard i >= 0 else { return }
        while i + 1 < count {
            base[i] = base[i + 1]
            i += 1
        }
        count -= 1
    }

    func count(thread: UInt) -> Int {
        var n = 0
        for i in 0..<count where base[i].thread == thread { n += 1 }
        return n
    }

    func any(_ predicate: (_Frame) -> Bool) -> Bool {
        for i in 0..<count where predicate(base[i]) { return true }
        return false
    }

    /// Whether a frame linked before the item's cancellation may still reach its entry.
    func mayReach(_ item: _Deferred) -> Bool {
        any { $0.ticket < item.mark && $0.mayReach(item.index, item.bits, precise: item.precise) }
    }
}
