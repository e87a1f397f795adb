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
    let _diagnostics = _Lock<_DiagnosticsState>(_DiagnosticsState())
    let _diagnosing = Atomic<Bool>(false)
    /// Protocol-keyed observers (see `ProtocolObservers.swift`).
    let _protocols = _ProtocolRegistry()
    /// The latest retained post of each name (see `Engine/Retained.swift`).
    let _retained = _Lock(_RetainedTable())
    /// Scheduled deliveries still pending (see `waitForPendingDeliveries()`).
    let _deliveries = _DeliveryTracker()
    /// The `Posts` sequences to finish when the center goes (see `AsyncPostsBuffer.swift`).
    let _sequences = _PostsRegistry()

    /// Creates an empty center.
    ///
    /// When the center deinitialises, tokens still alive become inactive and harmless, and
    /// ``Posts`` sequences of it finish after yielding what they buffered.
    public init() {
        _stripes = _Stripes(count: 16)
    }

    deinit {
        _detachAll()
        _sequences.closeAll()
    }

    // MARK: Plain names

    /// Subscribes `handler` to every post of `name`.
    ///
    /// ```swift
    /// token = center.subscribe("login") { post in print("login via", post.flag) }
    /// ```
    ///
    /// > Important: Keep the token. `_ = center.subscribe(…)`, the compiler's fix-it for the
    /// > unused-result warning, drops it and so cancels at once. The warning is deliberate (the
    /// > method is not `@discardableResult`): store the token in the object that owns the interest.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - delivery: Where the handler runs: ``Delivery/immediate`` (the default), `.queue(q)`,
    ///     or `.mainActor` (which, written literally, picks the overload that takes a
    ///     `@MainActor` handler).
    ///   - replay: When `true`, the handler first gets the name's retained post, if any, then
    ///     every later post, none twice and none out of order.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)`` and the token's
    ///     `debugDescription`; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called with the post's envelope. Held by the center until the token is
    ///     cancelled or deinitialised, then released.
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread, also inside a handler.
    /// - Complexity: amortised O(1).
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public func subscribe(
        _ name: String, delivery: Delivery = .immediate, replay: Bool = false, fileID: String = #fileID,
        line: Int = #line, handler: @escaping @Sendable (PostObject) -> Void
    ) -> Subscription {
        let executor = delivery._executor
        let pacing = delivery._pacing(replay: replay)
        let entry =
            replay ? _replayableEntry(executor, handler) : _makeEnvelopeEntry(executor, pacing: pacing, handler)
        return _add(entry, PostObject.self, to: _NameKey(name), replay: replay, fileID, line)
    }

    /// Registers `observer` for `name`, selector style: each post calls
    /// `selector(observer)(post)`, for example `Screen.didLogin`.
    ///
    /// The center holds `observer` weakly. Once it deallocates the registration stops: it is not
    /// called, not counted by ``subscriptionCount(for:)``, and its token reports `isActive == false`.
    /// ``removeObserver(_:)`` ends it too.
    ///
    /// ```swift
    /// token = center.register("login", observer: self, selector: Screen.didLogin)
    /// ```
    ///
    /// > Warning: For a `@MainActor` observer, pass `delivery: .mainActor`. The compiler cannot
    /// > catch its absence: an unapplied method reference such as `Screen.didLogin` loses its
    /// > actor isolation, and a post from another thread would call the method off the main
    /// > actor. Write `center.register("login", observer: self, delivery: .mainActor,
    /// > selector: Screen.didLogin)`.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: Where the method runs; ``Delivery/immediate`` by default.
    ///   - replay: When `true`, the observer first gets the name's retained post, if any.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    /// - Complexity: amortised O(1).
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public func register<Observer: AnyObject>(
        _ name: String, observer: Observer, delivery: Delivery = .immediate, replay: Bool = false,
        fileID: String = #fileID, line: Int = #line, selector: @escaping (Observer) -> (PostObject) -> Void
    ) -> Subscription {
        let entry = _observerEntry(observer, delivery._executor, pacing: delivery._pacing(replay: replay), selector)
        return _add(entry, PostObject.self, to: _NameKey(name), replay: replay, fileID, line)
    }

    /// Posts `object` to every subscription of `name`.
    ///
    /// ``Delivery/immediate`` handlers run on the calling thread before `post` returns; queued
    /// ones are scheduled. Topic subscribers of `name` receive the post when `object.data` is of
    /// their payload type.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread, also inside a handler (nested posts run depth-first).
    @discardableResult
    public func post(_ name: String, _ object: PostObject) -> Int {
        let key = _NameKey(name)
        return _heard(_post(key, sender: nil) { object }, key)
    }

    /// Posts a new ``PostObject`` made of `flag` and `data` to every subscription of `name`.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public func post(_ name: String, flag: String = "", data: AnyObject? = nil) -> Int {
        let key = _NameKey(name)
        return _heard(_post(key, sender: nil) { PostObject(flag: flag, data: data) }, key)
    }

    // MARK: Typed topics

    /// Subscribes `handler` to every post of `topic`'s name whose payload is a `Payload`, on the
    /// posting thread.
    ///
    /// Immediate delivery never hands the payload to another thread, so `Payload` need not be
    /// `Sendable`. Queued and main-actor delivery (the other overloads) require it.
    ///
    /// With `replay: true`, the handler first gets the name's retained post, if it is a
    /// `Payload`, then every later post, none twice and none out of order (see
    /// <doc:RetainedPosts>). The retained payload is delivered on the calling thread before
    /// `subscribe` returns.
    ///
    /// ```swift
    /// let token = center.subscribe(.battery, replay: true) { level in print(level) }  // 80 at once
    /// ```
    ///
    /// > Important: Keep the token: `_ = center.subscribe(…)` cancels at once.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - delivery: ``ImmediateDelivery/immediate``, the default.
    ///   - replay: When `true`, the handler first gets the name's retained post, if any and if it
    ///     is a `Payload`.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called with each payload on the posting thread. Held until the token is
    ///     cancelled or deinitialised.
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread, also inside a handler.
    /// - Complexity: amortised O(1).
    public func subscribe<Payload>(
        _ topic: Topic<Payload>, delivery: ImmediateDelivery = .immediate, replay: Bool = false,
        fileID: String = #fileID, line: Int = #line, handler: @escaping @Sendable (Payload) -> Void
    ) -> Subscription {
        let entry = replay ? _replayableEntry(.immediate, handler) : _makeEntry(.immediate, handler)
        return _add(entry, Payload.self, to: topic._key, replay: replay, fileID, line)
    }

    /// Subscribes `handler` to every post of `topic`'s name whose payload is a `Payload`, with
    /// any ``Delivery``; the payload may cross threads, so it must be `Sendable`.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - delivery: Where the handler runs: `.immediate`, `.queue(q)` or `.mainActor`.
    ///   - replay: When `true`, the handler first gets the name's retained post, if any and if it
    ///     is a `Payload`.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called with each payload. Held until the token is cancelled or deinitialised.
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread, also inside a handler.
    /// - Complexity: amortised O(1).
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public func subscribe<Payload: Sendable>(
        _ topic: Topic<Payload>, delivery: Delivery, replay: Bool = false, fileID: String = #fileID,
        line: Int = #line, handler: @escaping @Sendable (Payload) -> Void
    ) -> Subscription {
        let executor = delivery._executor
        let pacing = delivery._pacing(replay: replay)
        let entry = replay ? _replayableEntry(executor, handler) : _makeEntry(executor, pacing: pacing, handler)
        return _add(entry, Payload.self, to: topic._key, replay: replay, fileID, line)
    }

    /// Registers `observer` for `topic`, selector style, holding it weakly, on the posting thread.
    ///
    /// See the `register` of a plain name for the rules, including the warning about
    /// `@MainActor` observers.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: ``ImmediateDelivery/immediate``, the default.
    ///   - replay: When `true`, the observer first gets the name's retained post, if any and if it
    ///     is a `Payload`.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    public func register<Observer: AnyObject, Payload>(
        _ topic: Topic<Payload>, observer: Observer, delivery: ImmediateDelivery = .immediate,
        replay: Bool = false, fileID: String = #fileID, line: Int = #line,
        selector: @escaping (Observer) -> (Payload) -> Void
    ) -> Subscription {
        let entry = _observerEntry(observer, .immediate, selector)
        return _add(entry, Payload.self, to: topic._key, replay: replay, fileID, line)
    }

    /// Registers `observer` for `topic`, selector style, holding it weakly, with any
    /// ``Delivery``; the payload may cross threads, so it must be `Sendable`.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: Where the method runs.
    ///   - replay: When `true`, the observer first gets the name's retained post, if any and if it
    ///     is a `Payload`.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public func register<Observer: AnyObject, Payload: Sendable>(
        _ topic: Topic<Payload>, observer: Observer, delivery: Delivery, replay: Bool = false,
        fileID: String = #fileID, line: Int = #line, selector: @escaping (Observer) -> (Payload) -> Void
    ) -> Subscription {
        let entry = _observerEntry(observer, delivery._executor, pacing: delivery._pacing(replay: replay), selector)
        return _add(entry, Payload.self, to: topic._key, replay: replay, fileID, line)
    }

    /// Posts `payload` to every subscription of `topic`'s name.
    ///
    /// Topic subscribers whose payload type matches receive `payload`; plain subscribers of the
    /// name receive a ``PostObject`` whose ``PostObject/payload(as:)`` returns it.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public func post<Payload>(_ topic: Topic<Payload>, _ payload: Payload) -> Int {
        _heard(_post(topic._key, payload, direct: topic._direct, main: topic._mainDirect, sender: nil), topic._key)
    }

    /// Posts to a topic without a payload: `center.post(.logout)` for a `Topic<Void>`.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public func post(_ topic: Topic<Void>) -> Int {
        _heard(_post(topic._key, (), direct: topic._direct, main: topic._mainDirect, sender: nil), topic._key)
    }

    // MARK: Introspection

    /// How many subscriptions the next post of `name` would reach: paused and cancelled ones,
    /// and registrations whose observer deallocated, are not counted.
    ///
    /// - Complexity: O(subscriptions of the name).
    public func subscriptionCount(for name: String) -> Int {
        _reachableCount(_NameKey(name))
    }

    /// Records the call site in `entry`, then registers it under `key`.
    @inline(__always)
    func _add(_ entry: _Entry, to key: _NameKey, _ fileID: String, _ line: Int) -> Subscription {
        entry.site = _CallSites.shared.intern(fileID, line)
        return _add(entry, to: key)
    }

    /// The entry for a plain handler: the direct-call `_Handler` when there is no option.
    func _makeEntry<Payload>(
        _ executor: _Executor, once: Bool = false, sender: AnyObject? = nil, pacing: Pacing? = nil,
        _ handler: @escaping (Payload) -> Void
    ) -> _Entry {
        if let pacing, !once {
            return _pacedEntry(executor, pacing, observer: nil, sender: sender) { (_, payload: Payload) in
                handler(payload)
                return true
            }
        }
        if case .immediate = executor, !once, sender == nil { return _Handler(handler) }
        if case .mainActor = executor, !once, sender == nil { return _MainHandler(handler, mailbox: _deliveries.main) }
        return _Slow(executor: executor, once: once, observer: nil, sender: sender, tracker: _tracker(executor)) {
            _, payload in
            handler(payload)
            return true
        }
    }

    /// The entry for a plain-name handler: the direct-call `_EnvelopeHandler` when there is no
    /// option.
    func _makeEnvelopeEntry(
        _ executor: _Executor, once: Bool = false, sender: AnyObject? = nil, pacing: Pacing? = nil,
        _ handler: @escaping (PostObject) -> Void
    ) -> _Entry {
        if case .immediate = executor, !once, sender == nil, pacing == nil { return _EnvelopeHandler(handler) }
        return _makeEntry(executor, once: once, sender: sender, pacing: pacing, handler)
    }

    /// The entry for a selector registration: the entry holds the observer weakly and passes
    /// it, loaded, to the calling closure.
    func _observerEntry<Observer: AnyObject, Payload>(
        _ observer: Observer, _ executor: _Executor, pacing: Pacing? = nil,
        _ selector: @escaping (Observer) -> (Payload) -> Void
    ) -> _Entry {
        let invoke: (AnyObject?, Payload) -> Bool = { target, payload in
            guard let target else { return false }
            selector(unsafeDowncast(target, to: Observer.self))(payload)
            return true
        }
        if let pacing { return _pacedEntry(executor, pacing, observer: observer, sender: nil, invoke: invoke) }
        return _Slow(
            executor: executor, once: false, observer: observer, sender: nil, tracker: _tracker(executor),
            invoke: invoke)
    }
}
