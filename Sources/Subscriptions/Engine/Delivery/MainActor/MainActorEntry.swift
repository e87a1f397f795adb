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
/// **Elsewhere** the post appends the payload to the center's main mailbox (`_QueueMailbox`),
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
    let mailbox: _QueueMailbox

    /// `handler` is a main-actor function stored as a plain one (see `_nonisolated`): it is only
    /// called on the main actor.
    init(_ handler: @escaping (Payload) throws -> Void, mailbox: _QueueMailbox) {
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
        guard let frame = route._beginQueuedCall(self) else { return }
        do { try call(value) } catch { _noteThrew(error, route: route) }
        route._endQueuedCall(frame)
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
