/// Subscribing a closure.
///
/// Every `subscribe` has the same axes, each a parameter with a default:
/// - what to listen to: a plain name (the handler gets a ``PostObject``) or a ``Topic`` (the
///   handler gets its payload);
/// - `from:`: only posts made by one sender (held weakly), like `NotificationCenter`'s `object:`;
/// - `delivery:`: where the handler runs. Immediate delivery (the default) takes any payload;
///   `.queue(q)` and the paced deliveries take a `Sendable` one, since it crosses threads;
///   `delivery: .mainActor` takes a `@MainActor` handler (in `PostCenter+MainActor.swift`);
/// - `replay:`: start with the name's retained post (<doc:RetainedPosts>);
/// - `once:`: deliver one post only, then end;
/// - `priority:`: where the handler runs among the name's handlers (higher first; equal
///   priorities in subscription order; default 0).
///
/// Every handler may throw: the post goes on with the next handler, and the error is reported
/// as ``PostCenter/Diagnostic/handlerThrew(name:site:error:)``.
///
/// Handlers isolated to an actor of your choice take `on:` instead of `delivery:`.
extension PostCenter {
    /// Subscribes `handler` to the posts of `name`.
    ///
    /// ```swift
    /// token = center.subscribe("login") { post in print("login via", post.flag) }
    /// ```
    ///
    /// > Important: Keep the token. `_ = center.subscribe(…)`, the compiler's fix-it for the
    /// > unused-result warning, drops it and so cancels at once. The warning is deliberate (the
    /// > method is not `@discardableResult`): store the token in the object that owns the interest.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>; `fileID:` and `line:` record the caller, see
    /// <doc:CallSites>.
    ///
    /// - Parameters:
    ///   - name: The name to listen to. Typed posts of the name arrive too, as envelopes whose
    ///     ``PostObject/payload(as:)`` reads the payload.
    ///   - sender: When given, only posts made `from:` this object are delivered; posts without a
    ///     sender never match. Held weakly: once it deallocates, nothing more is delivered and the
    ///     subscription is no longer counted.
    ///   - delivery: Where the handler runs: ``Delivery/immediate`` (the default), `.queue(q)`,
    ///     a paced delivery, or `.mainActor` (which, written literally, picks the overload that
    ///     takes a `@MainActor` handler).
    ///   - replay: When `true`, the handler first gets the name's retained post, if any, then
    ///     every later post, none twice and none out of order. With `from:`, only a retained post
    ///     made `from:` that sender (still alive) is replayed. With a paced delivery, the retained
    ///     post is the first post the pacing sees (see ``Pacing``).
    ///   - once: When `true`, exactly one post is delivered, even when several threads post at
    ///     once: the first post that reaches the subscription claims it, and the subscription
    ///     leaves the route before the handler runs (``Subscription/isActive`` turns `false`).
    ///     A paced delivery delivers that post with its base delivery.
    ///   - priority: Where the handler runs among the name\'s handlers: higher first; equal
    ///     priorities in subscription order. Default 0.
    ///   - fileID: The caller's file, recorded for diagnostics; leave the default.
    ///   - line: The caller's line; leave the default.
    ///   - handler: Called with each post's envelope. Held by the center until the token is
    ///     cancelled or deinitialised (or its one post was delivered), then released.
    ///     It may throw; the post then goes on with the next handler, and the error is reported as
    ///     `handlerThrew` (Guarantees, "Handlers that throw").
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread, also inside a handler.
    /// - Complexity: amortised O(1).
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public func subscribe(
        _ name: String, from sender: AnyObject? = nil, delivery: Delivery = .immediate, replay: Bool = false,
        once: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: consuming @escaping @Sendable (PostObject) throws -> Void
    ) -> Subscription {
        let entry = _envelopeEntry(delivery, sender: sender, replay: replay, once: once, consume handler)
        return _add(entry, to: _NameKey(name), fileID, line, priority)
    }

    /// Subscribes `handler` to the posts of `topic`'s name whose payload is a `Payload`, on the
    /// posting thread.
    ///
    /// Immediate delivery never hands the payload to another thread, so `Payload` need not be
    /// `Sendable`. Queued and main-actor delivery (the other overloads) require it.
    ///
    /// With `replay: true`, the retained payload is delivered on the calling thread before
    /// `subscribe` returns:
    ///
    /// ```swift
    /// let token = center.subscribe(.battery, replay: true) { level in print(level) }  // 80 at once
    /// ```
    ///
    /// > Important: Keep the token: `_ = center.subscribe(…)` cancels at once.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - sender: When given, only posts made `from:` this object are delivered. Held weakly.
    ///   - delivery: ``ImmediateDelivery/immediate``, the default.
    ///   - replay: When `true`, the handler first gets the name's retained post, if any and if it
    ///     is a `Payload` (with `from:`, only one posted `from:` that sender).
    ///   - once: When `true`, exactly one post is delivered, even under concurrent posts.
    ///   - priority: Where the handler runs among the name\'s handlers: higher first; equal
    ///     priorities in subscription order. Default 0.
    ///   - fileID: The caller's file, recorded for diagnostics; leave the default.
    ///   - line: The caller's line; leave the default.
    ///   - handler: Called with each payload on the posting thread. Held until the token is
    ///     cancelled or deinitialised (or its one post was delivered).
    ///     It may throw; the post then goes on with the next handler, and the error is reported as
    ///     `handlerThrew` (Guarantees, "Handlers that throw").
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread, also inside a handler.
    /// - Complexity: amortised O(1).
    public func subscribe<Payload>(
        _ topic: Topic<Payload>, from sender: AnyObject? = nil, delivery: ImmediateDelivery = .immediate,
        replay: Bool = false, once: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: consuming @escaping @Sendable (Payload) throws -> Void
    ) -> Subscription {
        let entry = _immediateEntry(sender: sender, replay: replay, once: once, consume handler)
        return _add(entry, to: topic._key, fileID, line, priority)
    }

    /// Subscribes `handler` to the posts of `topic`'s name whose payload is a `Payload`, with any
    /// ``Delivery``; the payload may cross threads, so it must be `Sendable`.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - sender: When given, only posts made `from:` this object are delivered. Held weakly.
    ///   - delivery: Where the handler runs: `.immediate`, `.queue(q)`, a paced delivery, or
    ///     `.mainActor`.
    ///   - replay: When `true`, the handler first gets the name's retained post, if any and if it
    ///     is a `Payload` (with `from:`, only one posted `from:` that sender); with a paced
    ///     delivery, as the first post the pacing sees.
    ///   - once: When `true`, exactly one post is delivered, even under concurrent posts; a paced
    ///     delivery delivers it with its base delivery.
    ///   - priority: Where the handler runs among the name\'s handlers: higher first; equal
    ///     priorities in subscription order. Default 0.
    ///   - fileID: The caller's file, recorded for diagnostics; leave the default.
    ///   - line: The caller's line; leave the default.
    ///   - handler: Called with each payload. Held until the token is cancelled or deinitialised
    ///     (or its one post was delivered).
    ///     It may throw; the post then goes on with the next handler, and the error is reported as
    ///     `handlerThrew` (Guarantees, "Handlers that throw").
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread, also inside a handler.
    /// - Complexity: amortised O(1).
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public func subscribe<Payload: Sendable>(
        _ topic: Topic<Payload>, from sender: AnyObject? = nil, delivery: Delivery, replay: Bool = false,
        once: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @Sendable (Payload) throws -> Void
    ) -> Subscription {
        let entry = _handlerEntry(delivery, sender: sender, replay: replay, once: once, handler)
        return _add(entry, to: topic._key, fileID, line, priority)
    }
}
