/// A name and its hash, computed once. `Topic` stores one so typed posts never hash.
struct _NameKey: Sendable {
    let name: String
    let hash: UInt

    init(_ name: String) {
        self.name = name
        self.hash = _canonicalNameHash(name)
    }
}

/// A fast non-cryptographic hash of the name's UTF-8 bytes (eight bytes at a time, then a
/// multiply-xorshift finish). Names come from the program, not from an adversary, so the seeded
/// SipHash of `Hasher` (two of them per post with `Dictionary`) is not worth its cost here.
@inline(__always)
func _hashName(_ name: String) -> UInt {
    var name = name
    let h = name.withUTF8 { bytes -> UInt64 in
        let count = bytes.count
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(truncatingIfNeeded: count)
        guard let base = bytes.baseAddress else { return h }
        let raw = UnsafeRawPointer(base)
        var i = 0
        while i &+ 8 <= count {
            h = (h ^ raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) &* 0xFF51_AFD7_ED55_8CCD
            h ^= h &>> 29
            i &+= 8
        }
        if i < count {
            var tail: UInt64 = 0
            withUnsafeMutableBytes(of: &tail) { $0.baseAddress!.copyMemory(from: raw + i, byteCount: count &- i) }
            h = (h ^ tail) &* 0xC4CE_B9FE_1A85_EC53
        }
        return h
    }
    var x = h ^ (h &>> 32)
    x &*= 0xD6E8_FEB8_6659_FD93
    x ^= x &>> 32
    return UInt(truncatingIfNeeded: x)
}

/// An open-addressing (linear probing) table from name to route, guarded by its stripe's lock.
///
/// It holds each route with one manual retain (`Unmanaged`), so lookups on the post path do no
/// reference counting. Deletion shifts the following cluster back, so no tombstones accumulate
/// under churn.
struct _NameTable: ~Copyable {
    private var slots: [Unmanaged<_Route>?] = Array(repeating: nil, count: 8)
    private(set) var count = 0

    deinit {
        for case let route? in slots { route.release() }
    }

    @inline(__always)
    private func home(_ hash: UInt, _ mask: Int) -> Int {
        Int(truncatingIfNeeded: hash >> 7) & mask
    }

    /// The route of `key`, unretained: valid while the lock is held (or while a frame is linked).
    @inline(__always)
    func find(_ key: _NameKey) -> Unmanaged<_Route>? {
        let mask = slots.count - 1
        var i = home(key.hash, mask)
        while let route = slots[i] {
            let match = route._withUnsafeGuaranteedRef { $0.key.hash == key.hash && $0.key.name == key.name }
            if match { return route }
            i = (i + 1) & mask
        }
        return nil
    }

    /// Calls `body` with every route, unretained (valid while the lock is held).
    func forEachRoute(_ body: (_Route) -> Void) {
        for case let route? in slots { route._withUnsafeGuaranteedRef(body) }
    }

    /// Adds `route`, whose name is not in the table yet.
    mutating func insert(_ route: _Route) {
        if (count + 1) * 2 > slots.count { grow() }
        place(Unmanaged.passRetained(route))
        count += 1
    }

    /// Removes `route` and returns the table's reference to it, to be released after unlocking.
    mutating func remove(_ route: _Route) -> _Route? {
        let mask = slots.count - 1
        var i = home(route.key.hash, mask)
        while let candidate = slots[i] {
            if candidate.toOpaque() == Unmanaged.passUnretained(route).toOpaque() { break }
            i = (i + 1) & mask
        }
        guard let removed = slots[i] else { return nil }
        slots[i] = nil
        count -= 1
        // Backward-shift deletion: pull later members of the cluster into the hole when their
        // home position is not between the hole and their current position.
        var j = i
        while true {
            j = (j + 1) & mask
            guard let next = slots[j] else { break }
            let k = home(next._withUnsafeGuaranteedRef { $0.key.hash }, mask)
            let stays = i <= j ? (i < k && k <= j) : (i < k || k <= j)
            if stays { continue }
            slots[i] = next
            slots[j] = nil
            i = j
        }
        return removed.takeRetainedValue()
    }

    /// Empties the table and returns its references, to be released after unlocking.
    mutating func removeAll() -> [_Route] {
        let routes = slots.compactMap { $0?.takeRetainedValue() }
        slots = Array(repeating: nil, count: 8)
        count = 0
        return routes
    }

    private mutating func place(_ route: Unmanaged<_Route>) {
        let mask = slots.count - 1
        var i = home(route._withUnsafeGuaranteedRef { $0.key.hash }, mask)
        while slots[i] != nil { i = (i + 1) & mask }
        slots[i] = route
    }

    private mutating func grow() {
        let old = slots
        slots = Array(repeating: nil, count: old.count * 2)
        for case let route? in old { place(route) }
    }
}
