import Synchronization

/// One delivery in progress on a route: which post (by ticket, in start order) on which thread.
struct _Frame {
    var ticket: UInt64
    var thread: UInt
}

/// What a post reads from its route under the lock before it walks the slots without it.
struct _PostStart {
    /// The route stays alive while the post's frame is linked (routes leave their table only
    /// when no frame is linked), so the post does not retain it.
    let route: Unmanaged<_Route>
    let slots: UnsafeMutablePointer<Atomic<UInt>>
    let count: Int
    let ticket: UInt64
    /// Frames the posting thread already had on this route: the re-entrant nesting depth.
    let outer: Int
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
    let mutex = Mutex(_NameTable())
    /// Keeps the lock words of stripes allocated one after another on different cache lines,
    /// so that threads posting names of different stripes do not slow each other down.
    private let _padding: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
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
/// **Cancellation.** Under the lock: mark the entry cancelled, zero its slot. Then wait, without
/// the lock, until every frame that other threads linked before the cancellation has unlinked;
/// frames linked later see the zeroed slot or the cancelled state (the lock orders them). Frames
/// of the cancelling thread itself are not waited for (they may be running the very handler that
/// cancels); the entry is instead parked in `deferred` until that thread's last frame on this
/// route unlinks, so no frame of it can dereference a released entry.
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
    @exclusivity(unchecked) var deferred: [(thread: UInt, entry: _Entry)] = []
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
    /// buffer is compacted into the new one and freed; otherwise it is copied as is and retired
    /// until the route is quiet, since posts may still be reading it.
    private func lockedGrow() {
        let quiet = frames.isEmpty
        let newCapacity = max(4, 2 * (quiet ? live + 1 : count))
        let fresh = _Route.allocateSlots(newCapacity)
        var w = 0
        for r in 0..<count {
            let b = slots[r].load(ordering: .relaxed)
            if quiet && b == 0 { continue }
            fresh[w].store(b, ordering: .relaxed)
            if quiet && b != 0 { _Route.entry(b)._withUnsafeGuaranteedRef { $0.index = UInt32(truncatingIfNeeded: w) } }
            w += 1
        }
        if quiet {
            _Route.freeSlots(slots, capacity)
            tombstones = 0
        } else {
            retired.append((slots, capacity))
        }
        count = w
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
    func lockedBeginPost(_ thread: UInt) -> _PostStart {
        let ticket = nextTicket
        nextTicket &+= 1
        let outer = frames.isEmpty ? 0 : frames.count(thread: thread)
        frames.append(_Frame(ticket: ticket, thread: thread))
        return _PostStart(route: .passUnretained(self), slots: slots, count: count, ticket: ticket, outer: outer)
    }

    /// Unlinks a frame. Returns what the caller must release after unlocking, `nil` (the common
    /// case) when there is nothing.
    @inline(__always)
    func lockedEndPost(_ ticket: UInt64, _ thread: UInt, _ routes: inout _NameTable) -> _Garbage? {
        frames.remove(ticket)
        if deferred.isEmpty && (!frames.isEmpty || (live != 0 && tombstones == 0 && retired.isEmpty)) {
            return nil
        }
        return lockedEndPostSlow(thread, &routes)
    }

    private func lockedEndPostSlow(_ thread: UInt, _ routes: inout _NameTable) -> _Garbage {
        var garbage = _Garbage()
        if !deferred.isEmpty && !frames.contains(thread: thread) {
            deferred.removeAll { item in
                guard item.thread == thread else { return false }
                garbage.entries.append(item.entry)
                return true
            }
        }
        if frames.isEmpty && (live == 0 || tombstones > 0 || !retired.isEmpty) {
            lockedQuiesce(&routes, into: &garbage)
        }
        return garbage
    }

    /// Cancels `token`'s entry. Returns what to release after unlocking (and after waiting), and
    /// the ticket mark to wait for when other threads have frames linked.
    func lockedCancel(_ token: Subscription, _ thread: UInt, _ routes: inout _NameTable)
        -> (garbage: _Garbage, waitBelow: UInt64?)
    {
        var garbage = _Garbage()
        guard let entry = token._entry else { return (garbage, nil) }
        token._entry = nil
        entry.state.store(_Entry.cancelled, ordering: .relaxed)
        lockedDetach(entry)
        if frames.isEmpty {
            garbage.entry = entry
            if live == 0 || tombstones > 0 { lockedQuiesce(&routes, into: &garbage) }
            return (garbage, nil)
        }
        if frames.contains(thread: thread) {
            deferred.append((thread, entry))
        } else {
            garbage.entry = entry
        }
        let othersRunning = frames.containsOther(than: thread, below: .max)
        return (garbage, othersRunning ? nextTicket : nil)
    }

    /// Takes `entry` out of the slot array (a tombstone, or a pop of the last slot when no frame
    /// is linked). Idempotent: a one-shot detaches itself when it fires and again when cancelled.
    func lockedDetach(_ entry: _Entry) {
        let i = Int(entry.index)
        guard entry.index != _Entry.detached else { return }
        entry.index = _Entry.detached
        slots[i].store(0, ordering: .relaxed)
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

    /// Whether a frame of another thread that started before `mark` is still linked.
    func lockedOthersRunning(below mark: UInt64, _ thread: UInt) -> Bool {
        frames.containsOther(than: thread, below: mark)
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
    func _beginQueuedCall(_ entry: _Entry) -> UInt64? {
        let thread = _currentThreadID()
        return stripe.mutex.withLock { _ -> UInt64? in
            let state = entry.state.load(ordering: .relaxed)
            guard !detached, state == _Entry.active || state == _Entry.spent else { return nil }
            return lockedBeginPost(thread).ticket
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

    override func _cancel(_ token: Subscription) {
        let thread = _currentThreadID()
        let (garbage, mark) = stripe.mutex.withLock { routes in
            lockedCancel(token, thread, &routes)
        }
        if let mark {
            var attempt = 0
            while stripe.mutex.withLock({ _ in lockedOthersRunning(below: mark, thread) }) {
                _backoff(attempt)
                attempt += 1
            }
        }
        // Released here, outside the lock and after the wait: the handler's captures go now.
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

    func contains(thread: UInt) -> Bool {
        for i in 0..<count where base[i].thread == thread { return true }
        return false
    }

    func containsOther(than thread: UInt, below mark: UInt64) -> Bool {
        for i in 0..<count where base[i].thread != thread && base[i].ticket < mark { return true }
        return false
    }
}
