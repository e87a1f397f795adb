import Dispatch
import Synchronization
internal import _SubscriptionsShims

/// A plain main-actor handler (`delivery: .mainActor`, no option): the main-actor twin of
/// `_Handler`.
///
/// **On the main actor** a post recognises this class by its metadata (like `_Handler`), asks
/// once per post whether it runs on the main actor (a thread-local load once the thread was
/// asked, see `_isOnMainActor()`), and calls `handler` directly (`call`): no
/// envelope, no cast, no allocation, no virtual call, no reference counting, no load beyond the
/// entry's own memory.
///
/// **Elsewhere** the post appends the payload to the center's main mailbox (`_Mailbox`),
/// which one main-queue job per burst drains for every main-actor handler of the center, in
/// post order.
final class _MainHandler<Payload>: _Entry, @unchecked Sendable {
    // @unchecked: `function` is replaced only by `releaseHandler()`, after the canceller's wait,
    // and called only inside a frame after checking the state, so the two never overlap.

    /// The user's handler, stored in the entry and called in place: a noncopyable value is
    /// borrowed where it lies, so a call costs no reference counting (a closure in a `var`
    /// would be copied, a retain and a release per call), yet `releaseHandler()` can still let
    /// go of it while a queued delivery holds the entry.
    @exclusivity(unchecked) private var function: _InPlaceFunction<Payload>
    /// Where posts from other threads go.
    let mailbox: _Mailbox

    /// `handler` is a main-actor function stored as a plain one (see `_nonisolated`): it is only
    /// called on the main actor.
    init(_ handler: @escaping (Payload) throws -> Void, mailbox: _Mailbox) {
        self.function = _InPlaceFunction(handler)
        self.mailbox = mailbox
    }

    /// Calls the handler: only on the main actor, inside a frame, after checking the entry's
    /// state (the post path, once the post knows it runs on the main actor).
    /// Rethrows what the handler throws, for the caller to report.
    @inline(__always)
    func call(_ payload: Payload) throws {
        try function.call(payload)
    }

    /// The post path when the post does not know yet where it runs, or knows it runs elsewhere
    /// (inside the post's frame, the entry checked active): calls the handler when the post runs
    /// on the main actor, else hands the payload to the mailbox. Returns whether it called the
    /// handler.
    @inline(__always)
    @discardableResult
    func take(_ payload: Payload, onMainActor: Bool, route: Unmanaged<_Route>) -> Bool {
        if onMainActor {
            do { try call(payload) } catch { route._withUnsafeGuaranteedRef { _noteThrew(error, route: $0) } }
            return true
        }
        enqueue(payload, route: route)
        return false
    }

    /// Hands the payload to the mailbox; out of line, so that the post's walk stays small. The
    /// post's frame keeps `route` alive: no retain and release around the call.
    @inline(never)
    private func enqueue(_ payload: Payload, route: Unmanaged<_Route>) {
        route._withUnsafeGuaranteedRef { mailbox.append(payload, entry: self, route: $0) }
    }

    override func deliver(_ post: PostObject, sender: AnyObject?, route: _Route) -> Bool {
        guard let payload = _extract(Payload.self, from: post) else { return false }
        take(payload, onMainActor: _isOnMainActor(), route: .passUnretained(route))
        return true
    }

    override func deliver(payload: UnsafeRawPointer, of type: Any.Type, route: _Route) -> Bool? {
        guard ObjectIdentifier(type) == ObjectIdentifier(Payload.self) else { return nil }
        take(
            payload.assumingMemoryBound(to: Payload.self).pointee, onMainActor: _isOnMainActor(),
            route: .passUnretained(route))
        return true
    }

    override func runQueued(_ payload: UnsafeMutableRawPointer, route: _Route) {
        let value = _RecordBuffer.takePayload(Payload.self, payload)
        route._inQueuedCall(self) {
            do { try call(value) } catch { _noteThrew(error, route: route) }
        }
    }

    override func dropQueued(_ payload: UnsafeMutableRawPointer) {
        _ = _RecordBuffer.takePayload(Payload.self, payload)
    }

    override func releaseHandler() {
        function = _InPlaceFunction()
    }
}

/// A function that its owner calls where it lies: noncopyable, so that calling it through a
/// `var` of a class borrows it in place instead of copying it (a retain and a release of its
/// context per call). Replacing the value releases the function and what it captured.
struct _InPlaceFunction<Payload>: ~Copyable {
    private let function: (Payload) throws -> Void

    init(_ function: @escaping (Payload) throws -> Void) {
        self.function = function
    }

    /// A function that does nothing and captures nothing.
    init() {
        self.function = { _ in }
    }

    @inline(__always)
    borrowing func call(_ payload: Payload) throws {
        try function(payload)
    }
}

/// A main-actor function and the same function as a plain one: global-actor isolation does not
/// change a function's representation, and a generic struct stores both at the same abstraction,
/// so a bit cast between the two structs converts without the reabstraction thunks that casting
/// the function itself (through `unsafeBitCast`'s generic parameters) adds.
private struct _MainActorFunction<Payload> {
    let function: @MainActor (Payload) throws -> Void
}

private struct _PlainFunction<Payload> {
    let function: (Payload) throws -> Void
}

/// `function` as a plain function, to be called only on the main actor.
func _nonisolated<Payload>(_ function: @escaping @MainActor (Payload) throws -> Void) -> (Payload) throws -> Void {
    unsafeBitCast(_MainActorFunction(function: function), to: _PlainFunction<Payload>.self).function
}

/// What a center's `waitForPendingDeliveries()` waits for besides counted deliveries: a FIFO
/// of deliveries (the main mailbox, an actor subscription's mailbox) that can say how many it
/// took so far and wake a waiter once those are handled or dropped.
protocol _PendingWork: AnyObject, Sendable {
    /// How many deliveries were appended so far, or `nil` when all of them are done already.
    func mark() -> UInt64?
    /// Resumes `continuation` once the first `mark` deliveries are done; returns `false` (and
    /// does not keep it) when they are done already.
    func resume(_ continuation: CheckedContinuation<Void, Never>, after mark: UInt64) -> Bool
}

/// The progress of a mailbox, kept under its lock: deliveries appended and done (handled or
/// dropped), and the waiters of `waitForPendingDeliveries()`.
struct _MailboxProgress {
    var appended: UInt64 = 0
    var done: UInt64 = 0
    var waiters: [(mark: UInt64, continuation: CheckedContinuation<Void, Never>)] = []

    /// Counts `n` deliveries done; returns the waiters to resume (after unlocking).
    mutating func finish(_ n: Int) -> [CheckedContinuation<Void, Never>] {
        done &+= UInt64(n)
        guard !waiters.isEmpty else { return [] }
        var ready: [CheckedContinuation<Void, Never>] = []
        waiters.removeAll { waiter in
            guard waiter.mark <= done else { return false }
            ready.append(waiter.continuation)
            return true
        }
        return ready
    }

    /// `appended`, or `nil` when everything appended is done.
    func mark() -> UInt64? { done >= appended ? nil : appended }

    /// Keeps `continuation` until `mark` deliveries are done; `false` when they are.
    mutating func keep(_ continuation: CheckedContinuation<Void, Never>, after mark: UInt64) -> Bool {
        if done >= mark { return false }
        waiters.append((mark, continuation))
        return true
    }
}

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
final class _Mailbox: _PendingWork, @unchecked Sendable {
    // @unchecked: every stored property but `locked` and `queue` is guarded by `locked`.

    private let locked = Atomic<Bool>(false)
    @exclusivity(unchecked) private var pending = _RecordBuffer()
    @exclusivity(unchecked) private var spare = _RecordBuffer()
    /// Whether a job is scheduled that has not taken the records yet.
    @exclusivity(unchecked) private var scheduled = false
    @exclusivity(unchecked) private var progress = _MailboxProgress()
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

/// Takes a spin lock (an atomic of this module, which ThreadSanitizer sees): spins a little, then
/// yields the processor, so a preempted holder does not stall the other side. For sections of a
/// few instructions that run no user code.
@inline(__always)
func _spinLock(_ locked: borrowing Atomic<Bool>) {
    var attempt = 0
    while !locked.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged {
        repeat {
            if attempt >= 64 { _backoff(attempt - 64) }
            attempt += 1
        } while locked.load(ordering: .relaxed)
    }
}

/// Releases a spin lock taken by `_spinLock`.
@inline(__always)
func _spinUnlock(_ locked: borrowing Atomic<Bool>) {
    locked.store(false, ordering: .releasing)
}
