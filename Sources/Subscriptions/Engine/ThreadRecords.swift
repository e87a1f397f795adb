import Synchronization
internal import _SubscriptionsShims

/// What one thread publishes about the deliveries it is running: one record per thread, written
/// only by its thread (plain atomic stores, no read-modify-write) and read by cancellers.
///
/// Records live in a global list and are never freed: a thread claims one on its first post (or
/// cancel), through a thread-local pointer in the C shim, and gives it back when it exits, for
/// the next new thread to reuse. So the list is as long as the most threads ever alive at once.
///
/// **Layout** (machine words): `next` (the list link), `claimed`, `depth` (frames in use),
/// `posts` (posts in progress, for the nesting stop), `waitingFor` (the record whose call
/// `cancel()` is waiting for, for cycle detection), `orphans` (set by a canceller that left a
/// cancelled entry for this thread to release), padding, then `frameCapacity` frames of four
/// words: the `table` and `buffer` the frame's post reads (hazard pointers that keep them from
/// being freed) and `at`, the address of the entry whose handler the frame is about to call or
/// is calling (0 when none).
struct _ThreadRecord: @unchecked Sendable, Equatable {
    // @unchecked: a pointer to memory that is never freed, accessed through atomics only.
    let words: UnsafeMutablePointer<Atomic<UInt>>

    static let headerWords = 8
    static let frameWords = 4
    /// Posts in progress on one thread plus queued or main-actor calls that run inside them.
    static let frameCapacity = PostCenter.maximumNestingDepth + 16
    static let totalWords = headerWords + frameWords * frameCapacity

    /// The calling thread's record.
    @inline(__always)
    static var current: _ThreadRecord {
        let raw = _subscriptions_record(totalWords).unsafelyUnwrapped
        return _ThreadRecord(words: raw.assumingMemoryBound(to: Atomic<UInt>.self))
    }

    var bits: UInt { UInt(bitPattern: words) }

    // MARK: Header

    private var next: _ThreadRecord? {
        let link = words[0].load(ordering: .relaxed)
        guard let raw = UnsafeMutablePointer<Atomic<UInt>>(bitPattern: link) else { return nil }
        return _ThreadRecord(words: raw)
    }

    /// Frames in use. Written by the owner only.
    @inline(__always)
    var depth: Int { Int(bitPattern: words[2].load(ordering: .relaxed)) }

    /// Posts in progress on this thread (queued calls are not posts). Owner only.
    @inline(__always)
    var posts: Int {
        get { Int(bitPattern: words[3].load(ordering: .relaxed)) }
        nonmutating set { words[3].store(UInt(bitPattern: newValue), ordering: .relaxed) }
    }

    /// The record this thread's `cancel()` waits for, or 0.
    var waitingFor: UInt {
        get { words[4].load(ordering: .sequentiallyConsistent) }
        nonmutating set { words[4].store(newValue, ordering: .sequentiallyConsistent) }
    }

    /// Non-zero when a canceller left an orphan that this thread's frames may hold.
    @inline(__always)
    var orphanNotice: UInt { words[5].load(ordering: .relaxed) }

    func noteOrphan() { words[5].store(1, ordering: .sequentiallyConsistent) }
    func clearOrphanNotice() { words[5].store(0, ordering: .sequentiallyConsistent) }

    // MARK: Frames

    @inline(__always)
    private func frame(_ f: Int) -> UnsafeMutablePointer<Atomic<UInt>> {
        words + (_ThreadRecord.headerWords &+ f &* _ThreadRecord.frameWords)
    }

    /// Opens a frame and returns its index. The caller then publishes what it reads.
    @inline(__always)
    func push() -> Int {
        let f = depth
        if f >= _ThreadRecord.frameCapacity { _ThreadRecord.tooDeep() }
        words[2].store(UInt(bitPattern: f &+ 1), ordering: .releasing)
        return f
    }

    static func tooDeep() -> Never {
        fatalError(
            "Subscriptions: more than \(frameCapacity) deliveries nested on one thread: a loop of posts "
                + "and handler calls. Break the cycle, or post asynchronously with delivery: .queue(_:).")
    }

    /// Closes frame `f` (the innermost): clears what it published, then releases orphans this
    /// thread may have been the last to hold.
    @inline(__always)
    func pop(_ f: Int) {
        assert(f == depth - 1, "Subscriptions: closing delivery frame \(f), which is not this thread's innermost")
        let cell = frame(f)
        cell[2].store(0, ordering: .releasing)
        cell[1].store(0, ordering: .releasing)
        cell[0].store(0, ordering: .releasing)
        words[2].store(UInt(bitPattern: f), ordering: .releasing)
        _Fence.light()
        if orphanNotice != 0 { _Orphans.collect(noticed: self) }
    }

    /// Publishes the name table frame `f` reads.
    @inline(__always)
    func setTable(_ f: Int, _ bits: UInt) { frame(f)[0].store(bits, ordering: .relaxed) }

    /// Publishes the slot buffer frame `f` reads.
    @inline(__always)
    func setBuffer(_ f: Int, _ bits: UInt) { frame(f)[1].store(bits, ordering: .relaxed) }

    /// Publishes the entry frame `f` is about to call (and then calls, until the next `setAt`).
    @inline(__always)
    func setAt(_ f: Int, _ bits: UInt) { frame(f)[2].store(bits, ordering: .releasing) }

    /// Whether one of this record's frames is calling (or about to call) the entry `bits`.
    /// Loads `at` with acquiring ordering, so that a canceller that sees the call over also sees
    /// everything the call did.
    func calls(_ bits: UInt) -> Bool {
        let d = Int(bitPattern: words[2].load(ordering: .acquiring))
        for f in 0..<min(d, _ThreadRecord.frameCapacity) where frame(f)[2].load(ordering: .acquiring) == bits {
            return true
        }
        return false
    }

    /// Whether one of this record's frames reads the table or buffer at `bits`.
    func reads(_ bits: UInt) -> Bool {
        let d = Int(bitPattern: words[2].load(ordering: .acquiring))
        for f in 0..<min(d, _ThreadRecord.frameCapacity) {
            let cell = frame(f)
            if cell[0].load(ordering: .acquiring) == bits || cell[1].load(ordering: .acquiring) == bits {
                return true
            }
        }
        return false
    }

    // MARK: All records

    /// Calls `body` with every record ever claimed (also those free now: their depth is 0).
    static func visitAll(_ body: (_ThreadRecord) -> Void) {
        var record = UnsafeMutablePointer<Atomic<UInt>>(
            bitPattern: UInt(bitPattern: _subscriptions_first_record())
        )
        .map { _ThreadRecord(words: $0) }
        while let r = record {
            body(r)
            record = r.next
        }
    }

    /// Whether the calling thread holds the only claimed record: then no other thread is inside
    /// a post (a thread claims its record, with a full fence, before its first post).
    static var onlyThread: Bool { _subscriptions_claimed_records() <= 1 }

    /// Whether a record that holds `bits` is reachable by following `waitingFor` links from
    /// `start`, which would make a wait of `self` for `start` a cycle.
    func closesCycle(waitingFor start: _ThreadRecord) -> Bool {
        var r = start
        var steps = 0
        while steps < 4096 {
            let next = r.waitingFor
            if next == 0 { return false }
            if next == bits { return true }
            guard let raw = UnsafeMutablePointer<Atomic<UInt>>(bitPattern: next) else { return false }
            r = _ThreadRecord(words: raw)
            steps += 1
        }
        return true
    }
}
