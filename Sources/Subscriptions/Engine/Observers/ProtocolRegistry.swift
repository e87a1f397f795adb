import Synchronization

/// One registration of one observer for one protocol.
///
/// **Lifetime.** The entry holds its observer weakly (`object`) and keeps, next to it, a bitwise
/// image of the observer as a value of the protocol type `P` (an existential: the object
/// reference followed by witness tables or type metadata). The image owns nothing: it is only
/// read (copied, which retains the object) while `object` has been loaded strongly, so it never
/// outlives the object it points to. This spares `notify` a dynamic cast from `AnyObject` to `P`
/// for every observer, which more than doubles the instructions per call (callgrind: 1,278
/// against 577). Representations whose first word is not the object reference itself (the box
/// of an `any Error`) get no image and use the cast instead.
///
/// **State.** `state` is written only under the registry's lock and read without it by `notify`,
/// which checks it right before each call.
final class _ProtocolEntry: @unchecked Sendable {
    // @unchecked: `object` is a weak reference written only in `init` (the runtime makes its
    // loads atomic) and `image` is written once in `init` and only read afterwards; `state` is
    // atomic.

    static let active: UInt8 = 0
    static let paused: UInt8 = 1
    static let removed: UInt8 = 2

    /// The observer. `nil` once it deinitialised (or while its deinit runs). Written only in
    /// `init`: a `weak var` because immutable weak properties need Swift 6.3 (SE-0481).
    weak var object: AnyObject?
    /// The observer's identity at registration; the key in its list's `byObject`. An address
    /// can be reused after the observer died, so a match means "this observer or a dead one".
    let objectID: ObjectIdentifier
    /// `active`, `paused` or `removed`; `removed` is final.
    let state = Atomic<UInt8>(_ProtocolEntry.active)
    /// A non-owning copy of the observer as a `P`, or `nil` when the cast is used instead.
    private let image: UnsafeMutableRawPointer?
    /// The protocol registered for, and where (an id of `_CallSites`), for `debugDescription`.
    let protocolType: Any.Type
    let site: UInt16

    /// Registers `object`, which is `observer` seen as a class instance, from call site `site`.
    init<P>(_ observer: P, object: AnyObject, site: UInt16 = 0) {
        self.protocolType = P.self
        self.site = site
        self.object = object
        self.objectID = ObjectIdentifier(object)
        let size = MemoryLayout<P>.size
        let firstWord = withUnsafeBytes(of: observer) { bytes in
            bytes.count >= MemoryLayout<UInt>.size ? bytes.loadUnaligned(as: UInt.self) : 0
        }
        if firstWord == UInt(bitPattern: ObjectIdentifier(object)) {
            let image = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: MemoryLayout<P>.alignment)
            withUnsafeBytes(of: observer) { bytes in
                image.copyMemory(from: bytes.baseAddress.unsafelyUnwrapped, byteCount: size)
            }
            image.bindMemory(to: P.self, capacity: 1)
            self.image = image
        } else {
            self.image = nil
        }
    }

    deinit {
        // The image owns no reference: free the bytes without destroying a value.
        image?.deallocate()
    }

    /// Calls `body` with the observer as a `P`. `object` is the strong reference the caller just
    /// loaded from `object`; it keeps the observer alive during the call. Returns whether `body`
    /// was called (always, except when the fallback cast fails).
    @inline(__always)
    func call<P>(_ object: AnyObject, as type: P.Type, _ body: (P) -> Void) -> Bool {
        if let image {
            // The image holds the observer's bits; reading it copies (retains) the observer,
            // which `object` keeps alive meanwhile. Cheaper than `object as? P` (about 2x in
            // instructions per call), and no `Optional<P>` is formed.
            withExtendedLifetime(object) { body(image.assumingMemoryBound(to: P.self).pointee) }
            return true
        }
        guard let observer = object as? P else { return false }
        body(observer)
        return true
    }
}

/// The registrations for one protocol, in registration order. Guarded by the registry's lock.
///
/// `entries` may hold removed entries (state `removed`, counted in `removedCount`) and dead ones
/// (observer gone, not noticed yet); both are squeezed out lazily: removed ones once they are
/// half of the array, dead ones when `notify` meets them or when the array reaches `sweepAt`.
/// `sweepAt` is twice the array's size after the last compaction or sweep, so it follows the
/// live registrations down (removals) as well as up: dead slots never pile up to an old peak,
/// and the array stays within a constant factor of the registrations that were live at its last
/// compaction, plus those added since. `notify` iterates a copy-on-write snapshot of `entries`, so
/// compaction never disturbs a notification in progress.
struct _ProtocolList {
    var entries: ContiguousArray<_ProtocolEntry> = []
    /// The registration of each observer that is not removed. A key may belong to a dead
    /// observer whose address a live one now reuses; see `_ProtocolEntry.objectID`.
    var byObject: [ObjectIdentifier: _ProtocolEntry] = [:]
    var removedCount = 0
    var sweepAt = 8

    var isEmpty: Bool { byObject.isEmpty }

    /// Marks `entry` removed, unless it already is or belongs to another list.
    /// - Complexity: amortised O(1).
    mutating func remove(_ entry: _ProtocolEntry) {
        if unlink(entry) && removedCount * 2 >= entries.count { compact() }
    }

    /// Marks `entry` removed without compacting. Returns whether it was registered here.
    private mutating func unlink(_ entry: _ProtocolEntry) -> Bool {
        guard byObject[entry.objectID] === entry else { return false }
        byObject[entry.objectID] = nil
        entry.state.store(_ProtocolEntry.removed, ordering: .releasing)
        removedCount += 1
        return true
    }

    /// Drops removed entries, keeping order. Does not look at observers (no weak loads).
    /// - Complexity: O(entries).
    mutating func compact() {
        entries.removeAll { $0.state.load(ordering: .relaxed) == _ProtocolEntry.removed }
        removedCount = 0
        // Follow the count down too: after a peak, the next sweep comes when the array has
        // doubled from here, not from the peak.
        sweepAt = max(8, 2 * entries.count)
    }

    /// Removes the entries of dead observers and compacts. Strong references to live observers
    /// go to `keep`: the caller releases them after unlocking, since releasing an observer may
    /// run its deinit.
    /// - Complexity: O(entries).
    mutating func sweep(keeping keep: inout [AnyObject]) {
        for entry in entries where entry.state.load(ordering: .relaxed) != _ProtocolEntry.removed {
            if let object = entry.object {
                keep.append(object)
            } else {
                _ = unlink(entry)
            }
        }
        compact()
    }
}

/// The protocol-keyed observers of one `PostCenter`: a lock around a table from protocol type
/// identity (`ObjectIdentifier(P.self)`) to that protocol's `_ProtocolList`.
///
/// No user code ever runs under the lock: the registry holds observers weakly and nothing else
/// of the user's, and every strong observer reference it loads while locked is released after
/// unlocking. `notify` takes a snapshot under the lock and calls observers without it.
final class _ProtocolRegistry: Sendable {
    let mutex = _PlatformMutex<[ObjectIdentifier: _ProtocolList]>([:])

    /// Registers `object` (which is `observer`) for `key`, or finds its registration.
    /// - Returns: The registration, new or existing.
    /// - Complexity: amortised O(1); a sweep for dead observers, O(registrations of `key`),
    ///   happens each time the list doubles.
    func add<P>(_ observer: P, object: AnyObject, for key: ObjectIdentifier, site: UInt16 = 0) -> _ProtocolEntry {
        var keep: [AnyObject] = []
        let entry = mutex.withLock { lists -> _ProtocolEntry in
            let id = ObjectIdentifier(object)
            if let existing = lists[key]?.byObject[id] {
                // `existing.object` is either `object` itself or nil (a dead observer whose
                // address was reused). The load's release is not the last one: the caller holds
                // `object` for the whole call.
                if existing.object != nil { return existing }
                lists[key]?.remove(existing)
            }
            let entry = _ProtocolEntry(observer, object: object, site: site)
            lists[key, default: _ProtocolList()].append(entry, keeping: &keep)
            return entry
        }
        withExtendedLifetime(keep) {}
        return entry
    }

    /// Removes `entry` from the list of `key`. Idempotent.
    /// - Complexity: amortised O(1).
    func remove(_ entry: _ProtocolEntry, for key: ObjectIdentifier) {
        mutex.withLock { lists in
            lists[key]?.remove(entry)
            if lists[key]?.isEmpty == true { lists[key] = nil }
        }
    }

    /// Removes the registration of the observer with identity `id` from the list of `key`, or
    /// from every list when `key` is nil. A dead observer's entry found under the same identity
    /// is removed too, which is right: it is garbage either way.
    /// - Complexity: amortised O(1) for one protocol, O(protocols) for all.
    func remove(objectID id: ObjectIdentifier, for key: ObjectIdentifier?) {
        mutex.withLock { lists in
            let keys = key.map { [$0] } ?? Array(lists.keys)
            for key in keys {
                guard let entry = lists[key]?.byObject[id] else { continue }
                lists[key]?.remove(entry)
                if lists[key]?.isEmpty == true { lists[key] = nil }
            }
        }
    }

    /// Removes entries whose observers `notify` found dead.
    func reclaim(_ dead: [_ProtocolEntry], for key: ObjectIdentifier) {
        mutex.withLock { lists in
            for entry in dead { lists[key]?.remove(entry) }
            if lists[key]?.isEmpty == true { lists[key] = nil }
        }
    }

    /// Pauses or resumes `entry`, unless it was removed.
    func setPaused(_ paused: Bool, _ entry: _ProtocolEntry) {
        mutex.withLock { _ in
            guard entry.state.load(ordering: .relaxed) != _ProtocolEntry.removed else { return }
            entry.state.store(paused ? _ProtocolEntry.paused : _ProtocolEntry.active, ordering: .releasing)
        }
    }

    /// The entries of `key` in registration order, as they are now (O(1): a retained buffer).
    @inline(__always)
    func snapshot(_ key: ObjectIdentifier) -> ContiguousArray<_ProtocolEntry>? {
        mutex.withLock { lists in lists[key]?.entries }
    }

    /// Calls `body` on each live, active observer of `key` in registration order, without the
    /// lock; see `PostCenter.notify(_:_:)` for the contract.
    /// - Returns: How many observers `body` was called on.
    func notify<P>(_ key: ObjectIdentifier, _ body: (P) -> Void) -> Int {
        guard let snapshot = snapshot(key) else { return 0 }
        var called = 0
        var dead: [_ProtocolEntry] = []
        for entry in snapshot {
            // Checked right before each call: an entry removed or paused by an earlier call of
            // this very notify (or by another thread, before this point) is skipped.
            guard entry.state.load(ordering: .acquiring) == _ProtocolEntry.active else { continue }
            guard let object = entry.object else {
                dead.append(entry)
                continue
            }
            if entry.call(object, as: P.self, body) { called += 1 }
        }
        if !dead.isEmpty { reclaim(dead, for: key) }
        return called
    }

    /// The live, active observers of `key` in registration order.
    func observers<P>(_ key: ObjectIdentifier, as type: P.Type) -> [P] {
        guard let snapshot = snapshot(key) else { return [] }
        var result: [P] = []
        result.reserveCapacity(snapshot.count)
        var dead: [_ProtocolEntry] = []
        for entry in snapshot where entry.state.load(ordering: .acquiring) == _ProtocolEntry.active {
            guard let object = entry.object else {
                dead.append(entry)
                continue
            }
            _ = entry.call(object, as: P.self) { result.append($0) }
        }
        if !dead.isEmpty { reclaim(dead, for: key) }
        return result
    }

    /// How many entries the list of `key` holds, live or not: the storage in use (for tests).
    func slotCount(_ key: ObjectIdentifier) -> Int {
        mutex.withLock { lists in lists[key]?.entries.count ?? 0 }
    }
}

extension _ProtocolList {
    /// Appends `entry` at the end of the notification order, sweeping dead observers out first
    /// when the array reached `sweepAt`.
    /// - Complexity: amortised O(1).
    mutating func append(_ entry: _ProtocolEntry, keeping keep: inout [AnyObject]) {
        if entries.count >= sweepAt { sweep(keeping: &keep) }
        entries.append(entry)
        byObject[entry.objectID] = entry
    }
}

/// The home of a token made by `PostCenter.observe(_:for:)`: one per token, pointing at the
/// registration it controls.
final class _ProtocolHome: _SubscriptionHome, @unchecked Sendable {
    // @unchecked: all stored properties are written only in `init`; `registry` is a weak
    // reference (atomic loads) and the entry's mutable state is atomic and written under the
    // registry's lock.

    /// Weak, so that a token outliving its center does not keep the registry: it then reads nil
    /// and the token is inactive and harmless. Written only in `init` (a `weak var` for Swift 6.2).
    weak var registry: _ProtocolRegistry?
    let key: ObjectIdentifier
    let entry: _ProtocolEntry

    init(registry: _ProtocolRegistry, key: ObjectIdentifier, entry: _ProtocolEntry) {
        self.registry = registry
        self.key = key
        self.entry = entry
    }

    override func _cancel(_ token: Subscription) {
        registry?.remove(entry, for: key)
    }

    override func _setPaused(_ paused: Bool, _ token: Subscription) {
        registry?.setPaused(paused, entry)
    }

    override func _describe(_ token: Subscription) -> (name: String, site: UInt16, state: String) {
        let raw = entry.state.load(ordering: .acquiring)
        let state: String
        if registry == nil || raw == _ProtocolEntry.removed {
            state = "cancelled"
        } else if entry.object == nil {
            state = "observer gone"
        } else {
            state = raw == _ProtocolEntry.paused ? "paused" : "active"
        }
        return (String(describing: entry.protocolType), entry.site, state)
    }

    override func _isActive(_ token: Subscription) -> Bool {
        // No lock here: the observer loaded by `entry.object` may be released last right here,
        // running its deinit, which is fine outside the lock.
        registry != nil && entry.state.load(ordering: .acquiring) == _ProtocolEntry.active
            && entry.object != nil
    }
}
