import Synchronization

/// A name and its hash, computed once. `Topic` stores one so typed posts never hash.
struct _NameKey: Sendable {
    let name: String
    let hash: UInt

    init(_ name: String) {
        self.name = name
        self.hash = _canonicalNameHash(name)
    }

    /// A key whose hash the caller chose (a pattern's route: see `Patterns.swift`).
    init(_ name: String, hash: UInt) {
        self.name = name
        self.hash = hash
    }
}

/// An open-addressing (linear probing) table from name to route, read by posts without any lock.
///
/// It holds each route with one manual retain (`Unmanaged`). Writers hold the stripe's lock: a
/// new name is inserted in place (a releasing store into an empty cell, which a concurrent
/// reader either sees or does not); growing, and dropping routes that have no subscriptions
/// left, build a new table, publish it and retire the old one until no post reads it (readers
/// publish the table they probe in their thread record; see `_Stripe`).
///
/// **Layout** (machine words): `capacity` (a power of two), then the cells (route addresses, 0
/// when empty).
struct _NameTable: @unchecked Sendable {
    // @unchecked: a pointer to memory whose words are atomics; its lifetime is managed by the
    // stripe's retire protocol.
    let words: UnsafeMutablePointer<Atomic<UInt>>

    static func allocate(capacity: Int) -> _NameTable {
        let words = _allocateAtomicWords(1 + capacity)
        words[0].store(UInt(capacity), ordering: .relaxed)
        return _NameTable(words: words)
    }

    init(words: UnsafeMutablePointer<Atomic<UInt>>) {
        self.words = words
    }

    init(bits: UInt) {
        self.words = UnsafeMutablePointer(bitPattern: bits).unsafelyUnwrapped
    }

    var bits: UInt { UInt(bitPattern: words) }

    var capacity: Int { Int(bitPattern: words[0].load(ordering: .relaxed)) }

    /// Frees the memory; the routes' references must have been moved or released.
    func free() {
        _freeAtomicWords(words, 1 + capacity)
    }

    @inline(__always)
    private static func home(_ hash: UInt, _ mask: Int) -> Int {
        Int(truncatingIfNeeded: hash >> 7) & mask
    }

    @inline(__always)
    private func cell(_ i: Int) -> UInt { words[1 &+ i].load(ordering: .acquiring) }

    /// The route whose address a nonzero cell holds, unretained.
    @inline(__always)
    private static func route(_ bits: UInt) -> Unmanaged<_Route> {
        Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped)
    }

    /// The route of `key`, unretained: valid while the caller holds the stripe lock or publishes
    /// this table in its thread record.
    @inline(__always)
    func find(_ key: _NameKey) -> Unmanaged<_Route>? {
        let mask = capacity &- 1
        var i = _NameTable.home(key.hash, mask)
        while true {
            let bits = cell(i)
            if bits == 0 { return nil }
            let route = _NameTable.route(bits)
            let match = route._withUnsafeGuaranteedRef { $0.key.hash == key.hash && $0.key.name == key.name }
            if match { return route }
            i = (i &+ 1) & mask
        }
    }

    /// Stores `route` (already retained by the caller) into its empty cell. The caller checked
    /// the load factor.
    func place(_ route: Unmanaged<_Route>) {
        let mask = capacity - 1
        var i = _NameTable.home(route._withUnsafeGuaranteedRef { $0.key.hash }, mask)
        while cell(i) != 0 { i = (i + 1) & mask }
        words[1 + i].store(UInt(bitPattern: route.toOpaque()), ordering: .releasing)
    }

    /// Calls `body` with every route, unretained (valid while the stripe lock is held).
    func forEachRoute(_ body: (_Route) -> Void) {
        visitRoutes { $0._withUnsafeGuaranteedRef(body) }
    }

    /// Every route in the table, unretained.
    func visitRoutes(_ body: (Unmanaged<_Route>) -> Void) {
        for i in 0..<capacity {
            let bits = cell(i)
            if bits != 0 { body(_NameTable.route(bits)) }
        }
    }
}

/// What a stripe's writers keep under its lock: how full the published table is, and the
/// tables replaced while posts may still read them.
struct _StripeState {
    var table: _NameTable
    var count = 0
    /// Routes that became empty since the last sweep (some may have been reused since).
    var emptied = 0
    /// Replaced tables, each with the routes it alone still holds (released when it is freed).
    var retired: [(table: _NameTable, routes: [_Route])] = []
}
