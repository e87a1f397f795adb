import Dispatch
import Synchronization

/// One registration in a route: its state word and the way to call its handler.
///
/// The token owns the entry (one strong reference); the route's slot array only holds its
/// address, unretained. The cancellation protocol in `Route` guarantees that nobody dereferences
/// a slot after the entry is released.
class _Entry: @unchecked Sendable {
    // @unchecked: `state` is atomic; `index` is only touched under the route's stripe lock;
    // everything else in subclasses is immutable.

    static let active: UInt32 = 0
    static let paused: UInt32 = 1
    static let cancelled: UInt32 = 2

    /// `active`, `paused` or `cancelled`. Read without the lock by posters; written under it.
    let state = Atomic<UInt32>(_Entry.active)
    /// Position in the route's slot array. Guarded by the stripe lock.
    @exclusivity(unchecked) var index: UInt32 = 0

    /// The slow path: deliver `post` to this entry if its payload type matches. Returns whether
    /// the handler ran or was scheduled. Called without any lock held.
    func deliver(_ post: PostObject, route: _Route) -> Bool {
        fatalError("_Entry.deliver must be overridden")
    }

    /// Whether the registration can still be reached. For observer registrations this loads the
    /// observer: the strong reference is appended to `keep`, so that the caller releases it after
    /// unlocking (an observer's deinit is user code and must never run under a lock).
    func isReachable(keeping keep: inout [AnyObject]) -> Bool { true }
}

/// The hot path: a handler that runs on the posting thread. The poster recognises this class by
/// its metadata and calls `handler` directly, with no cast and no virtual dispatch.
final class _Handler<Payload>: _Entry, @unchecked Sendable {
    let handler: (Payload) -> Void

    init(_ handler: @escaping (Payload) -> Void) {
        self.handler = handler
    }

    override func deliver(_ post: PostObject, route: _Route) -> Bool {
        guard let payload = _extract(Payload.self, from: post) else { return false }
        handler(payload)
        return true
    }
}

/// A handler that runs asynchronously on a dispatch queue.
final class _QueuedHandler<Payload>: _Entry, @unchecked Sendable {
    let handler: (Payload) -> Void
    let queue: DispatchQueue

    init(queue: DispatchQueue, _ handler: @escaping (Payload) -> Void) {
        self.queue = queue
        self.handler = handler
    }

    override func deliver(_ post: PostObject, route: _Route) -> Bool {
        guard let payload = _extract(Payload.self, from: post) else { return false }
        let box = _UncheckedSendable((payload, route))
        queue.async { [weak self] in
            var entry: _QueuedHandler? = self
            guard let strong = entry, let ticket = box.value.1._beginQueuedCall(strong) else { return }
            strong.handler(box.value.0)
            // Drop our reference before unlinking the frame: the canceller's release stays the
            // last one, so the handler's captures are gone when `cancel()` returns.
            entry = nil
            box.value.1._endCall(ticket)
        }
        return true
    }
}

/// A selector-style registration: a weakly held observer and an unapplied method.
final class _ObserverEntry<Observer: AnyObject, Payload>: _Entry, @unchecked Sendable {
    weak let observer: Observer?
    let selector: (Observer) -> (Payload) -> Void
    let queue: DispatchQueue?

    init(observer: Observer, queue: DispatchQueue?, selector: @escaping (Observer) -> (Payload) -> Void) {
        self.observer = observer
        self.selector = selector
        self.queue = queue
    }

    override func deliver(_ post: PostObject, route: _Route) -> Bool {
        guard let observer, let payload = _extract(Payload.self, from: post) else { return false }
        guard let queue else {
            selector(observer)(payload)
            return true
        }
        let box = _UncheckedSendable((payload, route))
        queue.async { [weak self] in
            var entry: _ObserverEntry? = self
            guard let strong = entry, let ticket = box.value.1._beginQueuedCall(strong) else { return }
            if let observer = strong.observer {
                strong.selector(observer)(box.value.0)
            }
            entry = nil
            box.value.1._endCall(ticket)
        }
        return true
    }

    override func isReachable(keeping keep: inout [AnyObject]) -> Bool {
        guard let observer else { return false }
        keep.append(observer)
        return true
    }
}

/// Reads a payload of type `T` out of an envelope; for `T == PostObject` the envelope itself.
@inline(__always)
func _extract<T>(_ type: T.Type, from post: PostObject) -> T? {
    if T.self == PostObject.self { return unsafeBitCast(post, to: T.self) }
    return post.payload(as: T.self)
}

/// Carries a value across a `@Sendable` boundary where the library, not the compiler, knows it
/// is safe: payloads are handed to the handler's queue exactly like `NotificationCenter` hands
/// its `object` over, and the poster vouches for them (documented on `PostCenter`).
struct _UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
