import Dispatch
import Synchronization
internal import _SubscriptionsShims

/// One registration in a route: its state word and the way to call its handler.
///
/// The token owns the entry (one strong reference); the route's slot array only holds its
/// address, unretained. The cancellation protocol in `_Route` guarantees that nobody dereferences
/// a slot after the entry is released.
class _Entry: @unchecked Sendable {
    // @unchecked: `state` is atomic; `index` is only touched under the route's stripe lock;
    // everything else in subclasses is immutable or atomic.

    /// Receives posts.
    static let active: UInt16 = 0
    /// Skipped by posts until resumed.
    static let paused: UInt16 = 1
    /// Gone for good; its queued deliveries are dropped.
    static let cancelled: UInt16 = 2
    /// A one-shot subscription that fired: receives nothing more, but the delivery it won still runs.
    static let spent: UInt16 = 3

    /// `index` of an entry that is no longer in its route's slot array.
    static let detached = UInt32.max

    /// One of the states above. Read without the lock by posts; written under it (or, for
    /// `spent`, claimed with a compare-exchange by the post that wins a one-shot).
    /// 16 bits, so that `site` and `index` share one word with it: an entry is 24 bytes before
    /// its subclass's fields, which keeps a `_Handler` in a 48-byte malloc block.
    let state = Atomic<UInt16>(_Entry.active)
    /// Where it was subscribed: an id of `_CallSites`, 0 when unknown. Written before the entry
    /// is published to its route, immutable afterwards.
    @exclusivity(unchecked) var site: UInt16 = 0
    /// Position in the route's slot array, or `detached`. Guarded by the stripe lock.
    @exclusivity(unchecked) var index: UInt32 = 0

    /// The slow path: deliver `post` to this entry if its payload type (and sender filter)
    /// matches. Returns whether the handler ran or was scheduled. Called without any lock held,
    /// from inside the post's frame on `route`.
    func deliver(_ post: PostObject, sender: AnyObject?, route: _Route) -> Bool {
        fatalError("_Entry.deliver must be overridden")
    }

    /// The slow path of a typed post, offered before any envelope is made: `payload` points to
    /// the posted value, whose static type is exactly `type`. Returns whether the handler ran or
    /// was scheduled, or `nil` (the default) when this entry wants the envelope instead, and the
    /// post calls `deliver(_:sender:route:)`. Called like that method. An entry that takes the
    /// payload here skips the envelope's allocations and the dynamic cast out of it.
    func deliver(payload: UnsafeRawPointer, of type: Any.Type, route: _Route) -> Bool? { nil }

    /// Whether the registration can still be reached. For observer registrations this loads the
    /// observer: the strong reference is appended to `keep`, so that the caller releases it after
    /// unlocking (an observer's deinit is user code and must never run under a lock).
    func isReachable(keeping keep: inout [AnyObject]) -> Bool { true }

    /// What deallocated and left the registration unreachable while its token lives: `"actor
    /// gone"`, `"observer gone"` or `"sender gone"`, else `nil`. Like `isReachable(keeping:)`,
    /// it appends every object it loads to `keep`, for the caller to release after unlocking.
    func goneTarget(keeping keep: inout [AnyObject]) -> String? { nil }

    /// Runs a delivery that a mailbox (`_QueueMailbox`) held: moves the payload out of `payload`
    /// (its type is this entry's) and calls the handler inside a queued-call frame on `route`,
    /// unless the entry was cancelled or paused meanwhile (then the payload is dropped).
    func runQueued(_ payload: UnsafeMutableRawPointer, route: _Route) {
        fatalError("_Entry.runQueued must be overridden by entries that use a mailbox")
    }

    /// Drops a delivery that a mailbox held without running it: moves the payload out and
    /// releases it.
    func dropQueued(_ payload: UnsafeMutableRawPointer) {
        fatalError("_Entry.dropQueued must be overridden by entries that use a mailbox")
    }

    /// Lets go of the handler closure now, even if something else still holds the entry (a
    /// queued delivery that has not started yet keeps a reference). Called by the canceller once
    /// no frame can be running the handler any more.
    func releaseHandler() {}

    /// Reports that this entry's handler, called for a post of `route`'s name, threw `error`
    /// (see `ThrownErrors.swift`). Out of line: the cold path of every handler call.
    @inline(never)
    final func _noteThrew(_ error: any Error, route: _Route) {
        route.noteThrew(error, site: site)
    }
}

/// Reads a payload of type `T` out of an envelope; for `T == PostObject` the envelope itself.
@inline(__always)
func _extract<T>(_ type: T.Type, from post: PostObject) -> T? {
    if T.self == PostObject.self { return unsafeBitCast(post, to: T.self) }
    return post._payload(as: T.self)
}

/// Carries a value across a `@Sendable` boundary where the library, not the compiler, knows it
/// is safe: payloads are handed to the handler's queue exactly like `NotificationCenter` hands
/// its `object` over, and the poster vouches for them (documented on `PostCenter`). The
/// Foundation bridge uses it for the observer token `NotificationCenter` hands back, which is
/// only passed back to the thread-safe `removeObserver`.
package struct _UncheckedSendable<Value>: @unchecked Sendable {
    package let value: Value
    package init(_ value: Value) { self.value = value }
}

/// Marks the main queue, so that code running on it can be recognised on Linux too, where
/// `dispatchMain()` may drain the main queue from a thread other than the main thread.
private let _mainQueueKey: DispatchSpecificKey<UInt8> = {
    let key = DispatchSpecificKey<UInt8>()
    DispatchQueue.main.setSpecific(key: key, value: 1)
    return key
}()

/// Whether the caller runs on the main actor's executor: the main thread (asked of the kernel
/// once per thread, then a thread-local load), or the main queue.
@inline(__always)
func _isOnMainActor() -> Bool {
    _subscriptions_is_main_thread_cached() != 0 || DispatchQueue.getSpecific(key: _mainQueueKey) != nil
}
