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

    /// Runs a delivery that a mailbox (`_Mailbox`) held: moves the payload out of `payload`
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

/// The hot path: a handler that runs on the posting thread, with no options. A post whose
/// payload type is exactly `Payload` recognises this class by its metadata and calls `handler`
/// directly, with no cast and no virtual dispatch.
final class _Handler<Payload>: _Entry, @unchecked Sendable {
    /// Throwing, so that a handler written with `try` needs no overload: a non-throwing closure
    /// converts to it without a thunk, and a call costs one test of the error register more.
    let handler: (Payload) throws -> Void

    init(_ handler: @escaping (Payload) throws -> Void) {
        self.handler = handler
    }

    override func deliver(_ post: PostObject, sender: AnyObject?, route: _Route) -> Bool {
        guard let payload = _extract(Payload.self, from: post) else { return false }
        do { try handler(payload) } catch { _noteThrew(error, route: route) }
        return true
    }
}

/// The hot path of plain names: `_Handler` for envelopes, stored at the closure's own type.
/// (A `(PostObject) -> Void` stored as a generic `(Payload) -> Void` would need a
/// reabstraction thunk: one more allocation per subscription and one more call per delivery.)
final class _EnvelopeHandler: _Entry, @unchecked Sendable {
    let handler: (PostObject) throws -> Void

    init(_ handler: @escaping (PostObject) throws -> Void) {
        self.handler = handler
    }

    override func deliver(_ post: PostObject, sender: AnyObject?, route: _Route) -> Bool {
        do { try handler(post) } catch { _noteThrew(error, route: route) }
        return true
    }
}

/// How an `_OptionsEntry` runs its handler.
enum _Executor {
    /// On the posting thread.
    case immediate
    /// Asynchronously on a queue.
    case queue(DispatchQueue)
    /// On the main actor: synchronously when posted on the main thread, else via the main queue.
    case mainActor
}

/// Every registration with an option: queued or main-actor delivery, one-shot, a sender filter,
/// or a weakly held observer (selector style). Bigger than `_Handler` and reached through a
/// virtual call, which is fine: the option's own cost (a dispatch, a weak load) dominates.
final class _OptionsEntry<Payload>: _Entry, @unchecked Sendable {
    /// Calls the user's handler, or the selector on the observer passed in (loaded by the entry,
    /// which is the one place that holds it: the closure captures no second weak reference).
    /// Returns `false` when it did not run. Cleared by `releaseHandler()` once cancelled: read
    /// only inside a frame after checking the state, written only after the canceller's wait, so
    /// the two never overlap.
    @exclusivity(unchecked) var invoke: ((AnyObject?, Payload) throws -> Bool)?
    let executor: _Executor
    let once: Bool
    /// The observer of a selector registration (`observed`), held weakly.
    weak var observer: AnyObject?  // written only in init (an immutable weak property needs Swift 6.3)
    let observed: Bool
    /// The observer's identity at registration, for `removeObserver(_:)`, which must find the
    /// registrations without loading (retaining) any observer. An address can be reused after the
    /// observer died, so a match means "this observer or a dead one".
    let observerID: ObjectIdentifier?
    /// The only sender this subscription accepts (`filtered`), held weakly.
    weak var sender: AnyObject?  // written only in init (an immutable weak property needs Swift 6.3)
    let filtered: Bool
    /// Counts the deliveries this entry schedules, for `PostCenter.waitForPendingDeliveries()`;
    /// `nil` for immediate entries, which schedule nothing.
    let tracker: _DeliveryTracker?
    /// Set (before the entry is published) for a `replay: true` subscription: holds live posts
    /// back until the retained one was delivered (see `Retained.swift`).
    @exclusivity(unchecked) var replay: _Replay<Payload>?
    /// Whether a post found the observer gone and reported it (`Diagnostic.subscriberGone`).
    let goneNoted = Atomic<Bool>(false)
    /// Where queued and main-actor deliveries go (the center's mailbox of the queue, or its main
    /// mailbox); `nil` for immediate entries, and for entries without a tracker.
    let mailbox: _Mailbox?

    init(
        executor: _Executor, once: Bool, observer: AnyObject?, sender: AnyObject?, tracker: _DeliveryTracker?,
        invoke: @escaping (AnyObject?, Payload) throws -> Bool
    ) {
        self.invoke = invoke
        self.tracker = tracker
        switch executor {
        case .immediate: self.mailbox = nil
        case .queue(let queue): self.mailbox = tracker?.mailbox(for: queue)
        case .mainActor: self.mailbox = tracker?.main
        }
        self.executor = executor
        self.once = once
        self.observer = observer
        self.observed = observer != nil
        self.observerID = observer.map(ObjectIdentifier.init)
        self.sender = sender
        self.filtered = sender != nil
    }

    override func deliver(_ post: PostObject, sender postSender: AnyObject?, route: _Route) -> Bool {
        if filtered {
            guard let sender, let postSender = _postSender(postSender), sender === postSender else { return false }
        }
        let target = target()
        guard target.alive else { return noteGone(route) }
        guard let payload = _extract(Payload.self, from: post) else { return false }
        if let replay { return replay.admit(payload, sender: postSender, entry: self, target: target, route: route) }
        return run(payload, target: target, route: route)
    }

    /// A typed post of exactly `Payload` to an entry without a sender filter or replay hands the
    /// value over without an envelope (an allocation per post) or a cast.
    override func deliver(payload: UnsafeRawPointer, of type: Any.Type, route: _Route) -> Bool? {
        guard !filtered, replay == nil, ObjectIdentifier(type) == ObjectIdentifier(Payload.self) else { return nil }
        let target = target()
        guard target.alive else { return noteGone(route) }
        return run(payload.assumingMemoryBound(to: Payload.self).pointee, target: target, route: route)
    }

    /// Delivers an extracted payload: claims a one-shot, then calls or schedules the handler.
    func run(_ payload: Payload, target: (alive: Bool, observer: AnyObject?), route: _Route) -> Bool {
        if once {
            // Exactly one post wins, even when several threads post at once.
            guard
                state.compareExchange(expected: _Entry.active, desired: _Entry.spent, ordering: .acquiringAndReleasing)
                    .exchanged
            else { return false }
            route._detach(self)
        }
        switch executor {
        case .immediate:
            return call(target.observer, payload, route: route)
        case .mainActor where _isOnMainActor():
            return call(target.observer, payload, route: route)
        case .mainActor:
            if let mailbox {
                mailbox.append(payload, entry: self, route: route)
            } else {
                schedule(payload, on: .main, route: route)
            }
            return true
        case .queue(let queue):
            if let mailbox {
                mailbox.append(payload, entry: self, route: route)
            } else {
                schedule(payload, on: queue, route: route)
            }
            return true
        }
    }

    /// Runs the handler later on `queue`, inside a frame of its own so that `cancel()` waits for
    /// it; dropped if the subscription was cancelled or paused meanwhile, or the entry is gone.
    private func schedule(_ payload: Payload, on queue: DispatchQueue, route: _Route) {
        let box = _UncheckedSendable((payload, route))
        let pending = tracker?.begin()
        queue.async { [weak self, tracker] in
            defer { if let pending { tracker?.end(pending) } }
            box.value.1._runQueuedCall(
                self,
                call: { entry in
                    let target = entry.target()
                    if target.alive { _ = entry.call(target.observer, box.value.0, route: box.value.1) }
                }, refused: { _ in })
        }
    }

    /// A queued or main-actor delivery that a mailbox of the center held (see `_Mailbox`).
    override func runQueued(_ payload: UnsafeMutableRawPointer, route: _Route) {
        let value = _RecordBuffer.takePayload(Payload.self, payload)
        route._inQueuedCall(self) {
            let target = target()
            if target.alive { _ = call(target.observer, value, route: route) }
        }
    }

    /// Calls `invoke` (inside a frame, the state checked); an error it throws is reported
    /// (`Diagnostic.handlerThrew`) and the call counts as run. Returns whether it ran: `false`
    /// when the entry was released or the selector's observer is gone.
    @inline(__always)
    func call(_ observer: AnyObject?, _ payload: Payload, route: _Route) -> Bool {
        do {
            return try invoke?(observer, payload) ?? false
        } catch {
            route.noteThrew(error, site: site)
            return true
        }
    }

    override func dropQueued(_ payload: UnsafeMutableRawPointer) {
        _ = _RecordBuffer.takePayload(Payload.self, payload)
    }

    /// The observer to call the selector on, loaded once: `alive` is `false` when a selector
    /// registration's observer is gone; `observer` is `nil` for plain handlers.
    @inline(__always)
    func target() -> (alive: Bool, observer: AnyObject?) {
        guard observed else { return (true, nil) }
        let observer = self.observer
        return (observer != nil, observer)
    }

    override func releaseHandler() {
        invoke = nil
    }

    /// A post found the observer gone: reports it once, when the center has diagnostics set.
    /// Returns `false`, the post's answer.
    private func noteGone(_ route: _Route) -> Bool {
        if !goneNoted.exchange(true, ordering: .relaxed) { tracker?.noteGone(route, "observer", site: site) }
        return false
    }

    override func goneTarget(keeping keep: inout [AnyObject]) -> String? {
        _goneTarget(observed: observed, observer, filtered: filtered, sender, keeping: &keep)
    }

    override func isReachable(keeping keep: inout [AnyObject]) -> Bool {
        if filtered {
            guard let sender else { return false }
            keep.append(sender)
        }
        guard observed else { return true }
        guard let observer else { return false }
        keep.append(observer)
        return true
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
