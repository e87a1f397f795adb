/// A growable buffer of payloads of one type, the type given by each call (its owner knows it):
/// `Array` without the array's type metadata, for code that runs unspecialised. Not a class and
/// not copyable in spirit: exactly one variable owns a buffer's memory at a time (the owner moves
/// it with `take()` or `swap`), and `free` must be called once with the payload type.
struct _PayloadBuffer {
    /// The storage, or `nil` before the first append.
    private var base: UnsafeMutableRawPointer?
    /// Initialised payloads at the start of the storage.
    private(set) var count = 0
    /// Payloads the storage has room for.
    private(set) var capacity = 0

    /// Appends `payload`, growing the storage (doubling, at least 16) when it is full.
    @inline(__always)
    mutating func append<Payload>(_ payload: Payload) {
        if count == capacity { grow(Payload.self) }
        (base.unsafelyUnwrapped.assumingMemoryBound(to: Payload.self) + count).initialize(to: payload)
        count += 1
    }

    private mutating func grow<Payload>(_: Payload.Type) {
        let newCapacity = Swift.max(16, capacity * 2)
        let storage = UnsafeMutablePointer<Payload>.allocate(capacity: newCapacity)
        if let base {
            storage.moveInitialize(from: base.assumingMemoryBound(to: Payload.self), count: count)
            base.deallocate()
        }
        base = UnsafeMutableRawPointer(storage)
        capacity = newCapacity
    }

    /// The payloads, valid until the next mutation.
    func items<Payload>(_: Payload.Type) -> UnsafeBufferPointer<Payload> {
        UnsafeBufferPointer(start: base?.assumingMemoryBound(to: Payload.self), count: count)
    }

    /// Deinitialises the payloads (which may run their deinits: never under a lock), keeping the
    /// storage.
    mutating func removeAll<Payload>(_: Payload.Type) {
        guard count > 0 else { return }
        base.unsafelyUnwrapped.assumingMemoryBound(to: Payload.self).deinitialize(count: count)
        count = 0
    }

    /// Moves the buffer out, leaving an empty one without storage.
    mutating func take() -> _PayloadBuffer {
        let taken = self
        self = _PayloadBuffer()
        return taken
    }

    /// Deinitialises the payloads and frees the storage (never under a lock).
    mutating func free<Payload>(_ type: Payload.Type) {
        removeAll(type)
        base?.deallocate()
        self = _PayloadBuffer()
    }
}
