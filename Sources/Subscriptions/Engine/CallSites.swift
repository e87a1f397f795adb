/// The process-wide table of call sites (`#fileID`, `#line`) that subscribed, each named by a
/// small integer so that an entry records its call site in 2 bytes.
///
/// Call sites are places in the program's source, so the table stays small and is never
/// shrunk. Id 0 means "unknown": it is what an entry holds when it was made by the engine
/// itself, and what `intern` returns once `capacity` distinct sites are recorded (only a program
/// that passes computed `fileID:` strings could get there).
///
/// Interning costs one hash of the file ID, one uncontended lock and, normally, one string
/// comparison that finds the very same literal (a pointer comparison).
final class _CallSites: Sendable {
    /// The one table of the process.
    static let shared = _CallSites()

    /// Distinct sites beyond which `intern` answers 0.
    static let capacity = Int(UInt16.max)

    struct Site {
        let fileID: String
        let line: Int
        let hash: UInt
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
        let hash = _canonicalNameHash(fileID) &+ UInt(bitPattern: line) &* 0x9E37_79B9_7F4A_7C15
        return table.withLock { table -> UInt16 in
            var mask = table.slots.count - 1
            var i = Int(truncatingIfNeeded: hash) & mask
            while table.slots[i] != 0 {
                let site = table.sites[Int(table.slots[i]) - 1]
                if site.hash == hash && site.line == line && site.fileID == fileID { return table.slots[i] }
                i = (i + 1) & mask
            }
            guard table.sites.count < _CallSites.capacity else { return 0 }
            table.sites.append(Site(fileID: fileID, line: line, hash: hash))
            let id = UInt16(table.sites.count)
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
            return id
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
