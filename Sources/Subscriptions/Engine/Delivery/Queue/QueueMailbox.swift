import Dispatch
import Synchronization

/// A center's deliveries to one dispatch queue: one FIFO for every subscription of the center
/// that delivers there (`.queue(q)`, or the main queue for main-actor handlers posted off the
/// main actor), drained on the queue by one job per burst, in post order.
///
/// A post appends a record (the entry and route, retained, and the payload) under the mailbox's
/// spin lock. When no job is waiting to start (`scheduled` was `false`), it sets `scheduled` and
/// schedules one: a burst of posts made before that job starts costs one job. The job, once it
/// runs, takes every record under the lock, clears `scheduled`, and runs them without the lock
/// (each in a queued-call frame, so `cancel()` waits for a running handler and a cancelled or
/// paused entry's record is dropped). A post made while a job runs schedules the next one, so
/// every post's delivery is scheduled on the queue before `post` returns (`q.sync {}` after a
/// post finds it done), and a delivery posted by a handler runs in a later job, after work the
/// queue took meanwhile, as if each delivery were its own block. No job lingers or loops.
final class _QueueMailbox: _PendingWork, @unchecked Sendable {
    // @unchecked: every stored property but `locked` and `queue` is guarded by `locked`.

    private let locked = Atomic<Bool>(false)
    @exclusivity(unchecked) private var pending = _RecordBuffer()
    @exclusivity(unchecked) private var spare = _RecordBuffer()
    /// Whether a job is scheduled that has not taken the records yet.
    @exclusivity(unchecked) private var scheduled = false
    @exclusivity(unchecked) private var progress = _DeliveryProgress()
    /// Where the job runs.
    let queue: DispatchQueue

    init(queue: DispatchQueue) {
        self.queue = queue
    }

    /// Appends a delivery of `payload` to `entry` and schedules a job if none is waiting.
    func append<Payload>(_ payload: Payload, entry: _Entry, route: _Route) {
        _spinLock(locked)
        pending.append(payload, entry: entry, route: route)
        progress.appended &+= 1
        let start = !scheduled
        scheduled = true
        _spinUnlock(locked)
        if start { queue.async { [self] in drain() } }
    }

    /// Runs on the queue: takes the records and runs them in order.
    private func drain() {
        _spinLock(locked)
        var batch = spare.take()
        swap(&batch, &pending)
        scheduled = false
        _spinUnlock(locked)
        let count = batch.count
        batch.run()
        _spinLock(locked)
        let ready = progress.finish(count)
        // Keep the capacity for the next job, unless a big burst left a big buffer.
        if batch.capacity <= 1 << 20 && spare.capacity == 0 { swap(&batch, &spare) }
        _spinUnlock(locked)
        batch.free()
        for continuation in ready { continuation.resume() }
    }

    func mark() -> UInt64? {
        _spinLock(locked)
        defer { _spinUnlock(locked) }
        return progress.mark()
    }

    func resume(_ continuation: CheckedContinuation<Void, Never>, after mark: UInt64) -> Bool {
        _spinLock(locked)
        defer { _spinUnlock(locked) }
        return progress.keep(continuation, after: mark)
    }

    deinit {
        // No job is scheduled (it would hold the mailbox): both buffers are empty.
        pending.free()
        spare.free()
    }
}

/// Records of deliveries of any payload type, back to back in one buffer: each record is the
/// entry and the route (both retained by the record), its size, then the payload, moved in.
/// The entry knows the payload's type: `runQueued` and `dropQueued` move it out. Records are
/// 16-byte aligned, the largest alignment of any Swift type on the supported platforms. Owned by exactly one variable at a time (moved with
/// `take()` or `swap`).
struct _RecordBuffer {
    /// Bytes of a record before its payload.
    private static var header: Int { 32 }
    private var base: UnsafeMutableRawPointer?
    /// Bytes used.
    private var used = 0
    /// Bytes allocated.
    private(set) var capacity = 0
    /// Records held.
    private(set) var count = 0

    /// Bytes a payload of `Payload` takes in a record (a multiple of 16).
    @inline(__always)
    private static func payloadSize<Payload>(_: Payload.Type) -> Int {
        (MemoryLayout<Payload>.size + 15) & ~15
    }

    mutating func append<Payload>(_ payload: Payload, entry: _Entry, route: _Route) {
        precondition(
            MemoryLayout<Payload>.alignment <= 16,
            "Subscriptions: a payload aligned beyond 16 bytes cannot be queued for the main actor")
        let size = Self.header + Self.payloadSize(Payload.self)
        if used + size > capacity { grow(used + size) }
        let record = base.unsafelyUnwrapped + used
        record.storeBytes(of: Unmanaged.passRetained(entry).toOpaque(), as: UnsafeMutableRawPointer.self)
        record.storeBytes(
            of: Unmanaged.passRetained(route).toOpaque(), toByteOffset: 8, as: UnsafeMutableRawPointer.self)
        record.storeBytes(of: size, toByteOffset: 16, as: Int.self)
        (record + Self.header).initializeMemory(as: Payload.self, repeating: payload, count: 1)
        used += size
        count += 1
    }

    /// Moves the payload out of a record's payload slot.
    @inline(__always)
    static func takePayload<Payload>(_: Payload.Type, _ slot: UnsafeMutableRawPointer) -> Payload {
        slot.assumingMemoryBound(to: Payload.self).move()
    }

    private mutating func grow(_ needed: Int) {
        let newCapacity = Swift.max(needed, Swift.max(1024, capacity * 2))
        let storage = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        if let base {
            storage.copyMemory(from: base, byteCount: used)  // records are moved bitwise
            base.deallocate()
        }
        base = storage
        capacity = newCapacity
    }

    /// Runs every record in order (`runQueued`), releases its entry and route, and empties the
    /// buffer, keeping the storage. Runs user code: never under a lock.
    mutating func run() {
        visit { entry, route, slot in entry.runQueued(slot, route: route) }
    }

    /// Drops every record (`dropQueued`), releasing payloads, entries and routes; keeps the
    /// storage. Never under a lock.
    mutating func drop() {
        visit { entry, _, slot in entry.dropQueued(slot) }
    }

    private mutating func visit(_ body: (_Entry, _Route, UnsafeMutableRawPointer) -> Void) {
        guard let base else { return }
        var offset = 0
        while offset < used {
            let record = base + offset
            let entry = Unmanaged<_Entry>.fromOpaque(record.load(as: UnsafeMutableRawPointer.self))
            let route = Unmanaged<_Route>.fromOpaque(record.load(fromByteOffset: 8, as: UnsafeMutableRawPointer.self))
            let size = record.load(fromByteOffset: 16, as: Int.self)
            body(entry.takeUnretainedValue(), route.takeUnretainedValue(), record + Self.header)
            entry.release()
            route.release()
            offset += size
        }
        used = 0
        count = 0
    }

    /// Moves the buffer out, leaving an empty one without storage.
    mutating func take() -> _RecordBuffer {
        let taken = self
        self = _RecordBuffer()
        return taken
    }

    /// Drops the records left and frees the storage. Never under a lock.
    mutating func free() {
        drop()
        base?.deallocate()
        self = _RecordBuffer()
    }
}
