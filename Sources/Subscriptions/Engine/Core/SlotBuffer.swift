import Synchronization

/// Memory of `count` machine words, each an atomic initialised to 0: the storage of slot buffers
/// and name tables, which posts read without a lock.
func _allocateAtomicWords(_ count: Int) -> UnsafeMutablePointer<Atomic<UInt>> {
    let words = UnsafeMutablePointer<Atomic<UInt>>.allocate(capacity: count)
    for i in 0..<count { (words + i).initialize(to: Atomic(0)) }
    return words
}

/// Frees memory from `_allocateAtomicWords(count)`.
func _freeAtomicWords(_ words: UnsafeMutablePointer<Atomic<UInt>>, _ count: Int) {
    words.deinitialize(count: count)
    words.deallocate()
}

/// A route's entries in delivery order: a published array of entry addresses (unretained; the
/// tokens own the entries), `0` for a cancelled entry (a tombstone).
///
/// Posts read a buffer without any lock; the route's writers (under the stripe lock) only ever
/// append past `count` (publishing the new `count` with a releasing store) or zero a slot. A
/// slot index is never reused within a buffer: squeezing tombstones out builds a new buffer,
/// publishes it, and retires the old one until no post reads it (see `_Route`).
///
/// **Layout** (machine words): `count`, `capacity`, `lastSeq` (the sequence number of the
/// last entry appended, so a canceller can skip retired buffers that cannot hold its entry),
/// then `capacity` slots.
struct _SlotBuffer: @unchecked Sendable, Equatable {
    // @unchecked: a pointer to memory whose words are atomics; its lifetime is managed by the
    // route's retire protocol.
    let words: UnsafeMutablePointer<Atomic<UInt>>

    static let headerWords = 3

    /// Zero words after the last slot, never written: a post's walk reads `walkPadding` slots
    /// ahead of the one it calls (to hint the processor, see `PostCenter._walk`) without a bounds
    /// check. A read past `count` sees 0 or an entry being appended; either is only a hint.
    static let walkPadding = 4

    static func allocate(capacity: Int) -> _SlotBuffer {
        let words = _allocateAtomicWords(headerWords + capacity + walkPadding)
        words[1].store(UInt(capacity), ordering: .relaxed)
        return _SlotBuffer(words: words)
    }

    init(words: UnsafeMutablePointer<Atomic<UInt>>) {
        self.words = words
    }

    init(bits: UInt) {
        self.words = UnsafeMutablePointer(bitPattern: bits).unsafelyUnwrapped
    }

    func free() {
        _freeAtomicWords(words, _SlotBuffer.headerWords + capacity + _SlotBuffer.walkPadding)
    }

    var bits: UInt { UInt(bitPattern: words) }

    /// Slots published so far (acquiring: the slots below it are written).
    @inline(__always)
    var count: Int { Int(bitPattern: words[0].load(ordering: .acquiring)) }

    var capacity: Int { Int(bitPattern: words[1].load(ordering: .relaxed)) }

    var lastSeq: UInt {
        get { words[2].load(ordering: .relaxed) }
        nonmutating set { words[2].store(newValue, ordering: .relaxed) }
    }

    /// The word a slot holds for `entry` (its address; a frame's `at` holds the same word).
    @inline(__always)
    static func bits(of entry: _Entry) -> UInt {
        UInt(bitPattern: Unmanaged.passUnretained(entry).toOpaque())
    }

    /// The entry whose address a nonzero slot holds, unretained: valid while its token owns it,
    /// which the cancellation protocol guarantees to a post that re-read the slot after
    /// publishing it (see `_Route`).
    @inline(__always)
    static func entry(_ bits: UInt) -> Unmanaged<_Entry> {
        Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped)
    }

    /// The first slot's word: a walk steps through `slots ..< slots + count`.
    @inline(__always)
    var slots: UnsafeMutablePointer<Atomic<UInt>> { words + _SlotBuffer.headerWords }

    @inline(__always)
    func slot(_ i: Int) -> UInt {
        words[_SlotBuffer.headerWords &+ i].load(ordering: .relaxed)
    }

    /// Zeroes slot `i`. Sequentially consistent (`fenceFollows == false`), so that it is ordered
    /// before the caller's later loads of thread records without a fence; relaxed when the caller
    /// runs a full fence (a heavy fence, a section's, the one-thread shortcut's) or parks the
    /// entry for a batch (whose settling thread acquires it through the batch's lock, then
    /// fences) before it reads any record.
    @inline(__always)
    func clear(_ i: Int, fenceFollows: Bool = false) {
        if fenceFollows {
            words[_SlotBuffer.headerWords + i].store(0, ordering: .relaxed)
        } else {
            words[_SlotBuffer.headerWords + i].store(0, ordering: .sequentiallyConsistent)
        }
    }

    /// Appends `bits` (the caller holds the route's lock and checked the capacity).
    func append(_ bits: UInt, seq: UInt) {
        let n = Int(bitPattern: words[0].load(ordering: .relaxed))
        words[_SlotBuffer.headerWords + n].store(bits, ordering: .relaxed)
        words[2].store(seq, ordering: .relaxed)
        words[0].store(UInt(n + 1), ordering: .releasing)
    }

    /// A copy of this buffer (same capacity, every slot in its place) with `bits` in the empty
    /// slot `i`, and `seq` as its `lastSeq`, for a route that holds its lock (so no other thread
    /// writes these slots while they are copied: posts only read them). Published by the caller.
    /// Written into `reused` (a buffer of the same capacity that no post reads any more) when
    /// given, else into a new one.
    func copy(filling i: Int, with bits: UInt, seq: UInt, into reused: _SlotBuffer? = nil) -> _SlotBuffer {
        let n = Int(bitPattern: words[0].load(ordering: .relaxed))
        let fresh: _SlotBuffer
        if let reused {
            fresh = reused
            // Past the count, slots stay zero (the walk's read-ahead reads them as hints).
            let held = Int(bitPattern: reused.words[0].load(ordering: .relaxed))
            if held > n {
                UnsafeMutableRawPointer(reused.slots + n).initializeMemory(as: UInt.self, repeating: 0, count: held - n)
            }
        } else {
            fresh = _SlotBuffer.allocate(capacity: capacity)
        }
        UnsafeMutableRawPointer(fresh.slots).copyMemory(
            from: UnsafeRawPointer(slots), byteCount: n * MemoryLayout<Atomic<UInt>>.stride)
        fresh.slots[i].store(bits, ordering: .relaxed)
        fresh.words[2].store(seq, ordering: .relaxed)
        fresh.setCount(n)
        return fresh
    }

    /// Publishes `n` slots written directly (through `slots`) in a buffer no post reads yet.
    func setCount(_ n: Int) { words[0].store(UInt(n), ordering: .releasing) }

    /// The index of `bits` in this buffer, if it is there.
    func index(of bits: UInt) -> Int? {
        for i in 0..<Int(bitPattern: words[0].load(ordering: .relaxed)) where slot(i) == bits { return i }
        return nil
    }
}
