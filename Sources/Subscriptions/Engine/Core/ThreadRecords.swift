import Synchronization
internal import _SubscriptionsShims

/// What one thread publishes about the deliveries it is running: one record per thread, written
/// only by its thread (plain atomic stores, no read-modify-write) and read by cancellers.
///
/// Records of live threads form a list in the C shim: a thread claims one on its first post (or
/// cancel), through a thread-local pointer, and when it exits its record leaves the list at once
/// and is unmapped once no scan is open (`withScan`). So a scan costs O(threads alive now), and a
/// thread that exited costs no memory.
///
/// **Layout** (machine words): `next` (the list link), the address of the record's slot in the
/// hint directory (the shim's limbo link once released), `deferredStarts` (actor tasks to start
/// when the current post ends), `routeHint` (see `announce`), `waitingFor` (the record whose
/// call `cancel()` is waiting for, for cycle detection), `orphans` (set by a canceller that left a
/// cancelled entry for this thread to release), `waitingOn` (the entry that wait is for), `prev`
/// (the list link back, the shim's), `depth` (frames in use), `posts` (posts in progress, for the
/// nesting stop), then `frameCapacity` frames of four words: the `table` and `buffer` the frame's
/// post reads (hazard pointers that keep them from being freed) and `at`, the address of the entry
/// whose handler the frame is about to call or is calling (0 when none).
///
/// A record is page-aligned, so its first eight words fill one cache line, which its thread
/// rarely writes; `depth`, `posts` and the first frame share the next line, which every post
/// writes. A canceller scanning a posting thread's record then misses on one line, not two
/// (walking the list reads `next`, and `calls(_:)` reads `depth` and the frames' `at`).
struct _ThreadRecord: @unchecked Sendable, Equatable {
    // @unchecked: a pointer to a record that other threads read only inside a scan section
    // (`withScan`), which keeps it mapped; accessed through atomics only.
    let words: UnsafeMutablePointer<Atomic<UInt>>

    static let headerWords = SUBSCRIPTIONS_RECORD_HEADER_WORDS
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

    var next: _ThreadRecord? {
        let link = words[SUBSCRIPTIONS_RECORD_NEXT].load(ordering: .acquiring)
        guard let raw = UnsafeMutablePointer<Atomic<UInt>>(bitPattern: link) else { return nil }
        return _ThreadRecord(words: raw)
    }

    /// Frames in use. Written by the owner only.
    @inline(__always)
    var depth: Int { Int(bitPattern: words[SUBSCRIPTIONS_RECORD_DEPTH].load(ordering: .relaxed)) }

    /// Posts in progress on this thread (queued calls are not posts). Owner only.
    @inline(__always)
    var posts: Int {
        get { Int(bitPattern: words[SUBSCRIPTIONS_RECORD_POSTS].load(ordering: .relaxed)) }
        nonmutating set { words[SUBSCRIPTIONS_RECORD_POSTS].store(UInt(bitPattern: newValue), ordering: .relaxed) }
    }

    /// The record this thread's `cancel()` waits for, or 0. Written by the owner only, after
    /// `waitingOn`; read by other cancellers inside a scan section (see `closesCycle`).
    var waitingFor: UInt {
        get { words[SUBSCRIPTIONS_RECORD_WAITING_FOR].load(ordering: .sequentiallyConsistent) }
        nonmutating set { words[SUBSCRIPTIONS_RECORD_WAITING_FOR].store(newValue, ordering: .sequentiallyConsistent) }
    }

    /// The entry whose calls on `waitingFor`'s thread this thread's `cancel()` waits for, or 0.
    var waitingOn: UInt {
        get { words[SUBSCRIPTIONS_RECORD_WAITING_ON].load(ordering: .sequentiallyConsistent) }
        nonmutating set { words[SUBSCRIPTIONS_RECORD_WAITING_ON].store(newValue, ordering: .sequentiallyConsistent) }
    }

    /// Publishes that this thread waits for `target` to stop calling `entry` (`entry` first, so
    /// that a reader that sees the link sees what it is for).
    func beginWait(for target: _ThreadRecord, on entry: UInt) {
        waitingOn = entry
        waitingFor = target.bits
    }

    /// Withdraws the link of `beginWait(for:on:)`.
    func endWait() {
        waitingFor = 0
        waitingOn = 0
    }

    /// The actor run queues whose task this thread starts when its current post ends (see
    /// `_ActorRunQueue.schedule`): a retained `_DeferredStart`, the head of a chain, or 0.
    /// Owner only.
    @inline(__always)
    var deferredStarts: UInt {
        get { words[SUBSCRIPTIONS_RECORD_DEFERRED_STARTS].load(ordering: .relaxed) }
        nonmutating set { words[SUBSCRIPTIONS_RECORD_DEFERRED_STARTS].store(newValue, ordering: .relaxed) }
    }

    /// `routeHint` of a thread whose frames may be calling entries of several routes.
    static let anyRoute: UInt = 1

    /// Publishes, before frame `f` publishes an entry of `route` it calls (and before that
    /// frame's fence), which route this thread's frames may be calling: `route` for the
    /// outermost frame (no other frame is open), `anyRoute` for a nested one. The word stays
    /// after the frame closes, and is written only when it changes: a thread that keeps posting
    /// one name writes it once, so it stays in the caches of the threads that read it. A
    /// canceller reads it first (`visitHinted`) and skips the record's frames, a cache line
    /// every post writes, when it names another route: a frame about to call an entry of
    /// `route` stored its hint before its fence, so a canceller that cleared the entry's slot
    /// and fenced before the frame re-read the slot sees the hint (the same argument as for
    /// `at`, DESIGN.md "Post"). The store releases: a canceller that skips the frames because it
    /// read a new hint thereby acquires everything the thread did before, its calls of the
    /// entry under the old hint included (as a frame's `pop` releases for one that reads the
    /// frames), so `releaseHandler()` comes after those calls in the memory model, not only on
    /// x86 (where a store releases anyway: the same instruction).
    ///
    /// The hint is kept twice: in word 3, which its own thread compares against (a line it owns)
    /// and which the one-thread shortcut and the list walk read, and in the record's slot of the
    /// shim's hint directory (word 1 points at it; 0 when the directory was full), which
    /// `visitHinted` reads: the hints of all threads side by side, not one page per thread.
    @inline(__always)
    func announce(_ f: Int, route: UInt) {
        let hint = f == 0 ? route : _ThreadRecord.anyRoute
        if words[SUBSCRIPTIONS_RECORD_ROUTE_HINT].load(ordering: .relaxed) != hint { publishHint(hint) }
    }

    /// Stores a changed hint in both places (releasing, see `announce`).
    @inline(never)
    func publishHint(_ hint: UInt) {
        words[SUBSCRIPTIONS_RECORD_ROUTE_HINT].store(hint, ordering: .releasing)
        if let cell = UnsafeMutablePointer<Atomic<UInt>>(
            bitPattern: words[SUBSCRIPTIONS_RECORD_HINT_CELL].load(ordering: .relaxed))
        {
            cell.pointee.store(hint, ordering: .releasing)
        }
    }

    /// Whether this record's thread may be calling entries of `route` (its `routeHint`).
    @inline(__always)
    func mayCall(on route: UInt) -> Bool {
        _ThreadRecord.hintNames(route, words[SUBSCRIPTIONS_RECORD_ROUTE_HINT].load(ordering: .acquiring))
    }

    /// Whether a thread whose hint is `hint` may be calling entries of `route`.
    @inline(__always)
    static func hintNames(_ route: UInt, _ hint: UInt) -> Bool {
        hint == route || hint == anyRoute
    }

    /// Non-zero when a canceller left an orphan that this thread's frames may hold.
    @inline(__always)
    var orphanNotice: UInt { words[SUBSCRIPTIONS_RECORD_ORPHAN_NOTICE].load(ordering: .relaxed) }

    func noteOrphan() { words[SUBSCRIPTIONS_RECORD_ORPHAN_NOTICE].store(1, ordering: .sequentiallyConsistent) }
    func clearOrphanNotice() { words[SUBSCRIPTIONS_RECORD_ORPHAN_NOTICE].store(0, ordering: .sequentiallyConsistent) }

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
        words[SUBSCRIPTIONS_RECORD_DEPTH].store(UInt(bitPattern: f &+ 1), ordering: .releasing)
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
        words[SUBSCRIPTIONS_RECORD_DEPTH].store(UInt(bitPattern: f), ordering: .releasing)
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

    /// The word `setAt(f, _)` stores to, for a walk that publishes many entries in one frame.
    @inline(__always)
    func atWord(_ f: Int) -> UnsafeMutablePointer<Atomic<UInt>> { frame(f) + 2 }

    /// The entry frame `f` calls (its last `setAt`), read by the frame's own thread: the cold path
    /// of a handler that threw finds its entry here rather than keep it in a register.
    @inline(__always)
    func at(_ f: Int) -> UInt { frame(f)[2].load(ordering: .relaxed) }

    /// Whether one of this record's frames is calling (or about to call) the entry `bits`.
    /// Loads `at` with acquiring ordering, so that a canceller that sees the call over also sees
    /// everything the call did.
    func calls(_ bits: UInt) -> Bool {
        let d = Int(bitPattern: words[SUBSCRIPTIONS_RECORD_DEPTH].load(ordering: .acquiring))
        for f in 0..<min(d, _ThreadRecord.frameCapacity) where frame(f)[2].load(ordering: .acquiring) == bits {
            return true
        }
        return false
    }

    /// Adds to `calling` the entry of every frame of this record that calls one (loaded like
    /// `calls(_:)`).
    func insertCalls(into calling: inout Set<UInt>) {
        let d = Int(bitPattern: words[SUBSCRIPTIONS_RECORD_DEPTH].load(ordering: .acquiring))
        for f in 0..<min(d, _ThreadRecord.frameCapacity) {
            let at = frame(f)[2].load(ordering: .acquiring)
            if at != 0 { calling.insert(at) }
        }
    }

    /// Whether one of this record's frames reads the table or buffer at `bits`.
    func reads(_ bits: UInt) -> Bool {
        let d = Int(bitPattern: words[SUBSCRIPTIONS_RECORD_DEPTH].load(ordering: .acquiring))
        for f in 0..<min(d, _ThreadRecord.frameCapacity) {
            let cell = frame(f)
            if cell[0].load(ordering: .acquiring) == bits || cell[1].load(ordering: .acquiring) == bits {
                return true
            }
        }
        return false
    }

    /// Whether waiting for `start` to stop calling `entry` would close a cycle: following the
    /// links `r.waitingFor` from `start` leads back to this record, and every link on the way is
    /// a live wait (the record it names still calls the entry the link waits on). A link whose
    /// wait is over but whose owner has not noticed yet (it sleeps between two checks) is no
    /// cycle: its owner will return from its wait by itself. Call inside a scan section.
    func closesCycle(waitingFor start: _ThreadRecord) -> Bool {
        var r = start
        var steps = 0
        while steps < 4096 {
            let next = r.waitingFor
            if next == 0 { return false }
            let on = r.waitingOn
            // Changed while read: the owner ended (or began) a wait; the caller checks again.
            if on == 0 || r.waitingFor != next { return false }
            guard let raw = UnsafeMutablePointer<Atomic<UInt>>(bitPattern: next) else { return false }
            let target = _ThreadRecord(words: raw)
            if next == bits { return calls(on) }  // this thread's own frames: exact
            // Reading `target`'s link first orders the read of its frames after its last link
            // store: a target that left the call before it began a wait is seen out of it.
            _ = target.waitingFor
            if !target.calls(on) { return false }
            r = target
            steps += 1
        }
        return false  // a chain longer than any cycle through us: its own members see their cycle
    }
}
