import Foundation
import Subscriptions

// Token-returning observation of a `NotificationCenter`: `subscribe(to:object:queue:handler:)`.

// MARK: NotificationCenter → Subscription

extension NotificationCenter {
    /// Observes `name` and returns a token that removes the observer when it is cancelled or
    /// deinitialised, so Foundation notifications get the same auto-removal as ``PostCenter``.
    ///
    /// ```swift
    /// token = NotificationCenter.default.subscribe(to: .NSSystemTimeZoneDidChange) { _ in
    ///     refreshClock()
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - name: The notification name to observe.
    ///   - object: Only notifications posted with this sender are delivered; `nil` for every
    ///     sender. Matched by Foundation exactly as `addObserver(forName:object:queue:using:)`
    ///     does (swift-corelibs-foundation keeps `object` alive until the observer is removed,
    ///     that is until the token is cancelled or deinitialised).
    ///   - queue: Where the handler runs: `nil` for the posting thread, before `post` returns;
    ///     otherwise on that operation queue, scheduled by Foundation (swift-corelibs-foundation
    ///     makes `post` wait until the queue has run it).
    ///   - handler: Called with each notification. Held until the token is cancelled or
    ///     deinitialised, then released.
    /// - Returns: The token that keeps the observer registered.
    ///
    /// The token's guarantees are those of ``Subscription``, which Foundation alone does not give:
    /// - When ``Subscription/cancel()`` returns, the Foundation observer is removed, no handler
    ///   call is running on another thread, no call starts again (also for notifications already
    ///   waiting in `queue`), and the handler closure is released. Cancelling from inside the
    ///   handler returns at once; that call finishes normally, and the closure is released when
    ///   the last running call ends.
    /// - The token's deinit never waits: it removes the observer and no call starts afterwards,
    ///   but a call already running on another thread completes, and the closure is released when
    ///   it ends, on that thread (as for every ``Subscription``).
    /// - ``Subscription/pause()`` drops notifications until ``Subscription/resume()``; notifications
    ///   already waiting in `queue` are dropped too when they come up while paused.
    /// - ``Subscription/isActive`` is `false` once cancelled, while paused, or once the
    ///   notification center deallocated. The token holds the center weakly.
    ///
    /// > Warning: Like every cancellation, `cancel()` waits for a handler call running on another
    /// > thread. Do not call it while holding a lock that the handler waits for, or on a thread
    /// > that the handler waits for.
    public func subscribe(
        to name: Notification.Name, object: AnyObject? = nil, queue: OperationQueue? = nil,
        handler: @escaping @Sendable (Notification) -> Void
    ) -> Subscription {
        let home = _NotificationHome(center: self, name: name, handler: handler)
        let observer = addObserver(forName: name, object: object, queue: queue) { [home] notification in
            home.deliver(notification)
        }
        home.attach(observer)
        return Subscription(_external: home)
    }
}

/// The registration behind one `NotificationCenter` observer token.
///
/// Foundation's `removeObserver` stops future deliveries but (on Linux) does not wait for a block
/// that is already running, and a block already queued on an `OperationQueue` may still run. So
/// every delivery goes through ``deliver(_:)``: under the lock it checks that the registration is
/// live and records the calling thread as running; ``cancel()`` clears the handler under the
/// same lock, removes the Foundation observer, then waits until no other thread is running.
final class _NotificationHome: _ExternalRegistration, @unchecked Sendable {
    // @unchecked: the state is the weak `center`, written only in `init` (weak loads are
    // atomic), the immutable `name`, and the `_NSLockBox` `state`.

    typealias Handler = @Sendable (Notification) -> Void

    struct State {
        /// The user's handler; `nil` once cancelled.
        var handler: Handler?
        /// Foundation's observer token, until removed. Opaque: only handed back to
        /// `removeObserver`, which is thread-safe.
        var observer: _UncheckedSendable<any NSObjectProtocol>?
        var paused = false
        /// The threads inside the handler right now (a thread appears once per nested call).
        var running: [UInt] = []
    }

    /// Written only in `init`: a `weak var` because immutable weak properties need Swift 6.3
    /// (SE-0481) and the package supports Swift 6.2.
    private(set) weak var center: NotificationCenter?
    let name: Notification.Name
    let state: _NSLockBox<State>

    init(center: NotificationCenter, name: Notification.Name, handler: @escaping Handler) {
        self.center = center
        self.name = name
        self.state = _NSLockBox(State(handler: handler))
    }

    var debugName: String { name.rawValue.debugDescription }

    /// Records Foundation's observer token, or removes it at once if the registration was
    /// cancelled in the meantime (cannot happen before the token exists, but costs nothing).
    func attach(_ observer: any NSObjectProtocol) {
        let box = _UncheckedSendable(observer)
        let late = state.withLock { s -> Bool in
            guard s.handler != nil else { return true }
            s.observer = box
            return false
        }
        if late { center?.removeObserver(box.value) }
    }

    /// Runs the handler for one notification, unless cancelled or paused.
    func deliver(_ notification: Notification) {
        let thread = _currentThreadID()
        var handler = state.withLock { s -> Handler? in
            guard !s.paused, let handler = s.handler else { return nil }
            s.running.append(thread)
            return handler
        }
        guard handler != nil else { return }
        handler?(notification)
        // Release our reference before leaving: a canceller waiting for us then holds the last one.
        handler = nil
        state.withLock { s in
            if let i = s.running.lastIndex(of: thread) { s.running.remove(at: i) }
        }
    }

    func cancel(waiting: Bool) {
        let thread = _currentThreadID()
        let (handler, observer, selfRunning) = state.withLock { s in
            let taken = (s.handler, s.observer, s.running.contains(thread))
            s.handler = nil
            s.observer = nil
            return taken
        }
        // Outside our lock: Foundation takes its own lock, which it may hold while calling us.
        if let observer { center?.removeObserver(observer.value) }
        // No call starts from now on (the handler is gone); wait for those already running on
        // other threads, unless this thread is inside the handler itself: then return at once,
        // like `PostCenter` tokens (two threads cancelling from inside the handler would
        // otherwise wait for each other). Running calls hold their own reference to the closure.
        var attempt = 0
        // A token's deinit (`waiting` false) never waits: running calls hold their own reference,
        // so the last of them releases the closure on its thread.
        while waiting && !selfRunning && state.withLock({ s in s.running.contains { $0 != thread } }) {
            _backoff(attempt)
            attempt += 1
        }
        // The handler and its captures are released here, after the wait and outside the lock.
        withExtendedLifetime(handler) {}
    }

    func setPaused(_ paused: Bool) {
        state.withLock { s in
            if s.handler != nil { s.paused = paused }
        }
    }

    var isActive: Bool {
        center != nil && state.withLock { s in s.handler != nil && !s.paused }
    }
}

// MARK: Helpers

/// A value behind an `NSLock` (a pthread mutex, which ThreadSanitizer understands).
final class _NSLockBox<State>: @unchecked Sendable {
    // @unchecked: `state` is only reached inside `withLock`, while `lock` is held.
    private let lock = NSLock()
    private var state: State

    init(_ initial: State) { state = initial }

    func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}
