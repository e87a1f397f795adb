import Synchronization

/// A registration's token: while it lives, its handler is called; when it is cancelled or
/// deinitialised, the registration is gone.
///
/// Keep tokens in the object that owns the interest. When that object goes away, its tokens go
/// with it and nothing is called into it again: no `removeObserver` bookkeeping.
///
/// ```swift
/// final class Screen {
///     var tokens = Set<Subscription>()
///     init(center: PostCenter) {
///         center.subscribe("login") { post in print(post.flag) }.store(in: &tokens)
///     }
/// }
/// ```
///
/// - Threading: every method may be called from any thread at any time, also from inside a
///   handler.
/// - Lifetime: the center never retains a token. Dropping the last reference cancels without
///   waiting: no post that starts after the token's `deinit` reaches the handler, a call already
///   under way completes, and the closure is released when it ends, on the thread that ran it.
///   With no call under way, the closure goes with the next batch of dropped tokens: inside the
///   `deinit` when no other thread holds a thread record (it never posted or cancelled) or the
///   engine runs the symmetric fence form (as on Apple platforms, and on Linux for about 10 ms
///   after a cancel beside another thread), else
///   within about a millisecond, on a job of a global dispatch queue (whether the next
///   `cancel()`, the drop that fills the batch of 512 or a job that the batch's first drop
///   scheduled ran the batch's fence); never under a lock, and never inside another token's
///   `cancel()` or drop, so an unrelated cancel or drop never runs (nor waits for) what this
///   token's captures do in their `deinit`. Call ``cancel()`` first where you need to wait for a
///   running call or need the captures gone when it returns. A token that outlives its center is harmless: it is inactive and its
///   methods do nothing.
/// - Identity: equality and hashing are by object identity, so tokens can live in a `Set`.
public final class Subscription: Hashable, @unchecked Sendable {
    // @unchecked: `_entry` is mutable, but only read or written while holding the lock of
    // `_home` (the route's stripe lock for name subscriptions); `_home` is immutable.

    /// Where the registration lives: the engine object that cancels, pauses and resumes it.
    let _home: _SubscriptionHome
    /// The registration itself, owned by the token; `nil` once cancelled. Guarded by `_home`'s lock.
    @exclusivity(unchecked) var _entry: _Entry?
    /// The entry's order of subscription in its route (see `_Route.lockedDetach`), kept here
    /// rather than in the entry: the token's allocation has room for it, the entry's has not.
    /// Written under the route's lock before the token is returned; `cancel()` then sets its top
    /// bit (`_cancelledBit`, under the lock too) once it took the entry, so that dropping a
    /// cancelled token takes no lock (`_Route._drop`). An atomic, so that the drop's read outside
    /// the lock is a read ThreadSanitizer sees ordered after the cancel's write.
    let _seqWord = Atomic<UInt>(0)

    /// The top bit of `_seqWord`: `cancel()` took the entry.
    static var _cancelledBit: UInt { 1 << (UInt.bitWidth - 1) }

    /// The entry's order of subscription in its route (`_seqWord` without its top bit).
    var _seq: UInt { _seqWord.load(ordering: .relaxed) & ~Subscription._cancelledBit }

    init(home: _SubscriptionHome, entry: _Entry?) {
        self._home = home
        self._entry = entry
    }

    deinit {
        // Borrowed: the token holds its home until its stored properties are destroyed, after this.
        Unmanaged.passUnretained(_home)._withUnsafeGuaranteedRef { $0._drop(self) }
    }

    /// Ends the registration.
    ///
    /// When `cancel()` returns, the handler is not running on any other thread and never starts
    /// again, and the center has released the handler closure and everything it captured.
    /// Deliveries still waiting in a queue (or for the main actor) are dropped. (Dropping the last
    /// reference to the token cancels too, but never waits: see the type's lifetime note.)
    ///
    /// `cancel()` waits only for calls of this very handler running on other threads: a post
    /// calling it right now, or a queued or main-actor call of it. It never waits for other
    /// handlers of the name or for posts that have not reached this subscription, on every
    /// platform.
    ///
    /// Cancelling from inside the handler itself (at any depth of nested posts) returns at once,
    /// without waiting for anything: that call finishes normally, calls of the same handler that
    /// are already running on other threads may still be finishing, and the closure is released
    /// when the last call that may reach it ends. The same happens when waiting would close a
    /// circle of cancels (two running handlers that cancel each other's subscriptions).
    ///
    /// > Warning: Do not call `cancel()` while holding a lock that the running handler being
    /// > cancelled waits for, or on a thread it waits for (such as the main thread, while the
    /// > handler calls `DispatchQueue.main.sync`): `cancel()` waits for the handler and the
    /// > handler waits for you. Drop the token instead, or release the lock first.
    ///
    /// > Warning: The wait has no timeout. A handler that never returns (it waits for a signal
    /// > nobody sends, blocks on a read that never ends, or loops for ever) makes `cancel()` called
    /// > from any other thread wait for ever. Where a handler may block for a long time, drop the
    /// > token instead of cancelling it: a token's deinit never waits.
    ///
    /// Tokens from ``PostCenter/observe(_:for:fileID:line:)`` remove a protocol observer and do not wait: a
    /// `notify` on another thread that already started calling the observer finishes that call.
    ///
    /// Idempotent: a second call does nothing.
    ///
    /// - Complexity: O(1), plus the wait for deliveries that may still call the handler.
    public func cancel() {
        _home._cancel(self)
    }

    /// Stops deliveries until ``resume()``. Posts made while paused are dropped, not buffered;
    /// queued deliveries that have not started yet are dropped too.
    ///
    /// The subscription keeps its place in the delivery order. Does nothing after ``cancel()``.
    /// Unlike `cancel()`, `pause()` never waits: a handler already running on another thread may
    /// still be finishing when it returns.
    public func pause() {
        _home._setPaused(true, self)
    }

    /// Restarts deliveries after ``pause()``, in the same place in the delivery order.
    /// Does nothing after ``cancel()``.
    public func resume() {
        _home._setPaused(false, self)
    }

    /// Whether the next post would reach this subscription: `false` once cancelled, while
    /// paused, after its observer deallocated, or after its center deinitialised.
    ///
    /// The answer can change right after it is read if another thread cancels, pauses or
    /// releases the observer.
    public var isActive: Bool {
        _home._isActive(self)
    }

    /// Inserts the token into `set`, so the set owns the registration.
    ///
    /// ```swift
    /// center.subscribe("login") { _ in }.store(in: &tokens)
    /// ```
    public func store(in set: inout Set<Subscription>) {
        set.insert(self)
    }

    /// Tokens are equal when they are the same object.
    public static func == (lhs: Subscription, rhs: Subscription) -> Bool {
        lhs === rhs
    }

    /// Hashes the token's object identity.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }
}
