/// The process-wide table of call sites (`#fileID`, `#line`) that subscribed, each named by a
/// small integer so that an entry records its call site in 2 bytes.
///
/// Call sites are places in the program's source, so the table stays small and is never
/// shrunk. Id 0 means "unknown": it is what an entry holds when it was made by the engine
/// itself, and what `intern` returns once `capacity` distinct sites are recorded (only a program
/// that passes computed `fileID:` strings could get there).
///
/// Interning a site seen recently costs a load and a string comparison that finds the very same
/// literal (a comparison of its bits), with no lock: `recent` holds, without a lock, the last
/// site interned in each of its slots. Otherwise it costs one hash of the file ID, one
/// uncontended lock and, normally, one string comparison.
final class _CallSites: @unchecked Sendable {
    // @unchecked: `table` is a mutex; `recent` is atomic words, each 0 or the address of a `Site`
    // that `table.sites` keeps for the life of the table (sites are immutable and never removed).
    /// The one table of the process.
    static let shared = _CallSites()

    /// Distinct sites beyond which `intern` answers 0.
    static let capacity = Int(UInt16.max)

    /// One call site: immutable, and kept by `table.sites` for the life of the table.
    final class Site: Sendable {
        let fileID: String
        let line: Int
        let hash: UInt
        let id: UInt16

        init(fileID: String, line: Int, hash: UInt, id: UInt16) {
            self.fileID = fileID
            self.line = line
            self.hash = hash
            self.id = id
        }
    }

    /// Slots of `recent` (a power of two).
    static let recentCount = 64

    /// The last site interned in each slot (chosen by `recentSlot`), or 0; read without a lock.
    private let recent = _allocateAtomicWords(_CallSites.recentCount)

    deinit { _freeAtomicWords(recent, _CallSites.recentCount) }

    /// The slot of `recent` for a site.
    @inline(__always)
    private static func recentSlot(_ fileID: String, _ line: Int) -> Int {
        (line &+ fileID.utf8.count &* 31) & (recentCount - 1)
    }

    struct Table {
        /// Open addressing (linear probing): 0 is an empty slot, otherwise an index into
        /// `sites`, plus one.
        var slots = [UInt16](repeating: 0, count: 64)
        /// Index `id - 1` holds the site of `id`.
        var sites: [Site] = []
    }

    let table = _PlatformMutex(Table())

    /// The id of the call site `fileID:line`, recorded on first use.
    /// - Complexity: O(length of `fileID`) for the hash; amortised O(1) otherwise.
    func intern(_ fileID: String, _ line: Int) -> UInt16 {
        let slot = _CallSites.recentSlot(fileID, line)
        // Acquiring: the site's fields were written before its address was stored (releasing).
        let bits = recent[slot].load(ordering: .acquiring)
        if bits != 0 {
            // Borrowed, not retained: the table keeps every site for the life of the table.
            let id = Unmanaged<Site>.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped)
                ._withUnsafeGuaranteedRef { site in site.line == line && site.fileID == fileID ? site.id : nil }
            if let id { return id }
        }
        guard let site = internLocked(fileID, line) else { return 0 }
        recent[slot].store(UInt(bitPattern: Unmanaged.passUnretained(site).toOpaque()), ordering: .releasing)
        return site.id
    }

    /// The site `fileID:line` from the table, recorded there on first use; `nil` once the table
    /// is full.
    private func internLocked(_ fileID: String, _ line: Int) -> Site? {
        let hash = _canonicalNameHash(fileID) &+ UInt(bitPattern: line) &* 0x9E37_79B9_7F4A_7C15
        return table.withLock { table -> Site? in
            var mask = table.slots.count - 1
            var i = Int(truncatingIfNeeded: hash) & mask
            while table.slots[i] != 0 {
                let site = table.sites[Int(table.slots[i]) - 1]
                if site.hash == hash && site.line == line && site.fileID == fileID { return site }
                i = (i + 1) & mask
            }
            guard table.sites.count < _CallSites.capacity else { return nil }
            let id = UInt16(table.sites.count + 1)
            let site = Site(fileID: fileID, line: line, hash: hash, id: id)
            table.sites.append(site)
            if table.sites.count * 2 > table.slots.count {
                table.slots = [UInt16](repeating: 0, count: table.slots.count * 2)
                mask = table.slots.count - 1
                for (n, site) in table.sites.enumerated() {
                    var j = Int(truncatingIfNeeded: site.hash) & mask
                    while table.slots[j] != 0 { j = (j + 1) & mask }
                    table.slots[j] = UInt16(n + 1)
                }
            } else {
                table.slots[i] = id
            }
            return site
        }
    }

    /// The file ID and line of `id`, or `nil` for 0 (unknown).
    func site(_ id: UInt16) -> (fileID: String, line: Int)? {
        guard id != 0 else { return nil }
        return table.withLock { table in
            let site = table.sites[Int(id) - 1]
            return (site.fileID, site.line)
        }
    }
}
