import Dispatch
import Synchronization

/// A name-keyed notification center whose registrations are tokens.
///
/// Subscribe to a name and keep the returned ``Subscription``; post to the name and every live
/// subscription of it runs, in subscription order. Dropping the token ends the registration.
///
/// ```swift
/// let center = PostCenter()
/// let token = center.subscribe("login") { post in print("login via", post.flag) }
/// center.post("login", flag: "sso", data: user)      // prints "login via sso"
/// ```
///
/// ## Guarantees
/// - **Order**: handlers of a name run in subscription order; pausing and resuming keeps the place.
/// - **Re-entrancy**: a post made inside a handler is delivered at once, depth-first. A
///   subscription made during a delivery does not receive that delivery. A subscription cancelled
///   or paused during a delivery, before its turn, is skipped.
/// - **Threads**: every method is safe from any thread, including inside handlers. No lock is held
///   while a handler (or any other user code, such as a deinit) runs.
/// - **Cancellation**: when ``Subscription/cancel()`` returns, the handler is not running on any
///   other thread and never starts again, and its closure has been released. Called from inside
///   that handler, `cancel()` returns at once. It waits only for deliveries that may still call
///   the cancelled handler; see ``Subscription/cancel()`` for the one deadlock this allows.
/// - **Lifetimes**: the center never retains a token or an observer, and keeps a handler closure
///   only while its subscription lives.
///
/// Payloads (``PostObject/data`` and typed payloads) are handed to handlers on whatever thread or
/// queue they run on; like `NotificationCenter`, the center does not copy or isolate them.
///
/// - Complexity: `post` is O(subscribers of the name) with no allocation for typed and envelope
///   posts to immediate handlers; subscribe and cancel are amortised O(1).
public final class PostCenter: Sendable {
    /// The process-wide center. Created on first use; never deinitialised.
    public static let `default` = PostCenter()

    /// Name tables, each behind its own lock.
    let _stripes: _Stripes
    /// See `diagnostics`; `_diagnosing` mirrors whether it is set (written under the lock), for
    /// a lock-free check.
    let _diagnostics = _PlatformMutex<_DiagnosticsState>(_DiagnosticsState())
    let _diagnosing = Atomic<Bool>(false)
    /// Protocol-keyed observers (see `ProtocolObservers.swift`).
    let _protocols = _ProtocolRegistry()
    /// The latest retained post of each name (see `Engine/Retained/Retained.swift`).
    let _retained = _PlatformMutex(_RetainedTable())
    /// Scheduled deliveries still pending (see `waitForPendingDeliveries()`).
    let _deliveries: _DeliveryTracker
    /// The `Posts` sequences to finish when the center goes (see `AsyncPostsBuffer.swift`).
    let _sequences = _PostsRegistry()
    /// The run queue of each actor that handlers are isolated to (see `Engine/Delivery/Actor/ActorRunQueue.swift`).
    let _actorQueues = _PlatformMutex(_ActorQueueTable())
    /// Whether any pattern was ever subscribed (`_PatternIndex.all`, `.prefixes`): read by every
    /// post, which looks pattern routes up only when it is not 0.
    let _patternState = Atomic<UInt>(0)
    let _patternIndex = _PatternIndex()

    /// Creates an empty center.
    ///
    /// When the center deinitialises, tokens still alive become inactive and harmless, and
    /// ``Posts`` sequences of it finish after yielding what they buffered.
    public init() {
        let deliveries = _DeliveryTracker()
        _deliveries = deliveries
        _stripes = _Stripes(count: 16, tracker: deliveries)
        deliveries.reporter = self
    }

    deinit {
        _detachAll()
        _sequences.closeAll()
    }

    // MARK: Introspection

    /// How many subscriptions the next post of `name` would reach: paused and cancelled ones,
    /// and registrations whose observer deallocated, are not counted. Pattern subscriptions
    /// (``subscribe(matching:from:delivery:replay:once:priority:fileID:line:handler:)-(_,_,Delivery,_,_,_,_,_,_)``) that match
    /// `name` are counted too.
    ///
    /// - Complexity: O(subscriptions of the name, and of the patterns that match it).
    public func subscriptionCount(for name: String) -> Int {
        let own = _reachableCount(_NameKey(name))
        guard _patternState.load(ordering: .relaxed) != 0 else { return own }
        return own &+ _patternReachableCount(name)
    }
}
