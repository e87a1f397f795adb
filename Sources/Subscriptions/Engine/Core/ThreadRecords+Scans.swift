import Synchronization
internal import _SubscriptionsShims

extension _ThreadRecord {
    // MARK: All records

    /// Runs `body` inside a scan section: no record that `body` reaches (through the list or a
    /// `waitingFor` link read inside it) is unmapped before it returns. Sections nest.
    static func withScan<R>(_ body: () -> R) -> R {
        _ = _subscriptions_scan_begin()
        defer { _subscriptions_scan_end() }
        return body()
    }

    /// Calls `body` with the record of every thread that may be calling an entry: with
    /// `onlyThread` (the answer of `onlyThread`, read after the stores this scan must see) only
    /// the calling thread's own record, if it has one, since no other thread holds a record;
    /// else every record (`visitAll`).
    @inline(__always)
    static func visitAll(onlyThread: Bool, _ body: (_ThreadRecord) -> Void) {
        guard onlyThread else { return visitAll(body) }
        // Its own record stays mapped while the thread runs: no scan section is needed.
        if let mine = _subscriptions_record_if_claimed() {
            body(_ThreadRecord(words: mine.assumingMemoryBound(to: Atomic<UInt>.self)))
        }
    }

    /// Calls `body` with every record of a live thread (in a scan section of its own; `body`
    /// must not keep a record past its call unless the caller holds a section too).
    static func visitAll(_ body: (_ThreadRecord) -> Void) {
        var record = UnsafeMutablePointer<Atomic<UInt>>(bitPattern: UInt(bitPattern: _subscriptions_scan_begin()))
            .map { _ThreadRecord(words: $0) }
        defer { _subscriptions_scan_end() }
        while let r = record {
            body(r)
            record = r.next
        }
    }

    /// Whether no other thread holds a record: the calling thread holds the only claimed one,
    /// or it holds none (a subscriber that never posted, a dispatch worker settling dropped
    /// tokens) and no record is claimed. Then no other thread is inside a post (a thread claims
    /// its record, with a full fence, before its first post). A thread that holds none never
    /// mistakes another thread's sole record for its own, and does not claim one to ask: a
    /// record claimed by a settling worker would make every later cancel of the posting thread
    /// pay the process-wide fence.
    static var onlyThread: Bool {
        _subscriptions_owns_only_record() != 0
    }

    /// Calls `body` with the record of every thread whose route hint says it may be calling
    /// entries of `route` (`mayCall(on:)`): with `onlyThread` only the caller's own record (as
    /// `visitAll(onlyThread:)`); else through the shim's hint directory, which holds the hints of
    /// all live records side by side, so a thread that is idle or posts other names costs a load
    /// from a shared line, not a miss on its own page. The directory's chunks are never freed, so
    /// its hints are read outside any scan section; one is opened at the first hint that names
    /// `route`, before the slot's record is read, and keeps every record read after it mapped
    /// until `visitHinted` returns. A scan that finds no such hint (a drop beside threads posting
    /// other names) pays no section: no shared counter, no fence. While a live record has no slot
    /// (the directory full) it walks the list instead.
    ///
    /// Sound like the list walk: a thread that may call an entry of `route` stored its hint in
    /// its slot before its frame's fence, and got the slot (and the high mark covered it) when it
    /// claimed its record, before its first post; a slot whose record changed since it was read
    /// names a thread that claimed its record after the caller's fence, which cannot be calling
    /// an entry cleared before that fence. A slot's record read inside the section is mapped: a
    /// release clears the slot before its record goes to limbo, and limbo is unmapped only when
    /// no section is open after that.
    @inline(__always)
    static func visitHinted(_ route: UInt, onlyThread: Bool, _ body: (_ThreadRecord) -> Void) {
        if onlyThread { return visitAll(onlyThread: true) { r in if r.mayCall(on: route) { body(r) } } }
        guard hintsComplete else {
            return visitAll { r in if r.mayCall(on: route) { body(r) } }
        }
        var scanning = false
        defer { if scanning { _subscriptions_scan_end() } }
        let high = hintSlotsInUse
        var slot = 0
        while slot < high {
            let chunk = _subscriptions_hint_chunk(slot >> hintChunkShift).unsafelyUnwrapped
                .assumingMemoryBound(to: Atomic<UInt>.self)
            let end = Swift.min(high, (slot | (hintChunk - 1)) + 1)
            while slot < end {
                let i = slot & (hintChunk - 1)
                if hintNames(route, chunk[i].load(ordering: .acquiring)) {
                    if !scanning {
                        _ = _subscriptions_scan_begin()
                        scanning = true
                    }
                    if let raw = UnsafeMutablePointer<Atomic<UInt>>(
                        bitPattern: chunk[hintChunk + i].load(ordering: .acquiring))
                    {
                        body(_ThreadRecord(words: raw))
                    }
                }
                slot += 1
            }
        }
    }

    // MARK: What a heavy fence's scan asks

    // Each query runs its scan here and returns what it found, so that a walk through a cancel
    // enters this file and returns, rather than coming back into its caller's file through a
    // closure. Call them between `_Fence.beginHeavy(onlyThread:)` and `_Fence.endHeavy(_:)`,
    // with the `onlyThread` the fence was given.

    /// "for each holder H": whether the calling thread's record `me` calls the entry `bits` of
    /// `route` (`mine`), and how many other records do.
    @inline(__always)
    static func holders(of bits: UInt, on route: UInt, me: _ThreadRecord, onlyThread: Bool) -> (
        mine: Bool, others: Int
    ) {
        var mine = false
        var others = 0
        visitHinted(route, onlyThread: onlyThread) { r in
            if r.calls(bits) {
                if r == me { mine = true } else { others += 1 }
            }
        }
        return (mine, others)
    }

    /// The entries some frame of some record calls (one scan for a whole batch of dropped
    /// tokens).
    static func entriesBeingCalled(onlyThread: Bool) -> Set<UInt> {
        var calling: Set<UInt> = []
        visitAll(onlyThread: onlyThread) { r in r.insertCalls(into: &calling) }
        return calling
    }

    /// Whether a frame of some record reads the table or buffer `bits`.
    static func anyReads(_ bits: UInt, onlyThread: Bool) -> Bool {
        var read = false
        visitAll(onlyThread: onlyThread) { r in read = read || r.reads(bits) }
        return read
    }

    /// Whether a frame of some record whose hint names `route` reads the slot buffer `bits`.
    static func anyReads(_ bits: UInt, hintedBy route: UInt, onlyThread: Bool) -> Bool {
        var read = false
        visitHinted(route, onlyThread: onlyThread) { r in read = read || r.reads(bits) }
        return read
    }

    // MARK: Waiting for the holders of an entry

    /// "for each other holder H: wait": waits until no record but `me` calls the entry `bits`,
    /// publishing each wait (`beginWait`) for the cycle check. Returns `false`, at once, when
    /// waiting would close a cycle of waits (the caller then orphans the entry). Needs no heavy
    /// fence of its own: it runs after the canceller's, which found the holders.
    static func waitForOtherCallers(of bits: UInt, me: _ThreadRecord) -> Bool {
        var cycle = false
        // Inside `visitAll`'s scan section: `r`, and every record a `waitingFor` link names, stay
        // mapped while we wait and follow links.
        visitAll { r in
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
        return !cycle
    }

    /// The hint directory's chunks hold `1 << hintChunkShift` slots.
    @inline(__always) static var hintChunkShift: Int { Int(HINT_CHUNK_SHIFT) }
    @inline(__always) static var hintChunk: Int { 1 << hintChunkShift }

    /// Whether a record is seen calling the entry `bits` of `route` without any fence first:
    /// `true` is certain (the call may have ended since), `false` may miss a call whose frame is
    /// not visible yet. For choosing between paths that are both correct.
    static func anyVisiblyCalls(_ bits: UInt, on route: UInt) -> Bool {
        var seen = false
        visitHinted(route, onlyThread: false) { r in seen = seen || r.calls(bits) }
        return seen
    }

    /// One past the highest hint-directory slot in use (read by `visitHinted`, and by tests).
    @inline(__always) static var hintSlotsInUse: Int { _subscriptions_hint_slots() }

    /// Whether every live record has a hint-directory slot (read by `visitHinted`, and by tests).
    @inline(__always) static var hintsComplete: Bool { _subscriptions_hints_complete() != 0 }

    /// Makes records claimed from now on get a directory slot only below `slots`, as if the
    /// directory were that small. For tests (in a child process).
    static func limitHintSlots(_ slots: Int) { _subscriptions_limit_hint_slots(slots) }

    /// How many records live threads hold. For tests.
    static var claimedCount: Int { _subscriptions_claimed_records() }

    /// How many times the process-wide (heavy) fence ran. For tests.
    static var heavyFenceCount: Int { _subscriptions_heavy_fence_count() }

    /// How many heavy fences ran without the one-thread shortcut: the process-wide ones (of any
    /// thread) and the symmetric form's sections of the calling thread. For tests.
    static var unsharedFenceCount: Int { _subscriptions_heavy_fence_count() + _subscriptions_sections_opened() }
}
