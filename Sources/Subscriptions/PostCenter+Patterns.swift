/// Subscribing to every name, or to every name under a prefix.
///
/// A pattern subscription is a name subscription whose handler also gets the post's name:
/// `from:`, every delivery (immediate, `.queue(q)`, paced, `.mainActor`, an actor with `on:`),
/// `once:` and `priority:` work as for a name, and so do cancel, pause, the post count and the
/// diagnostics. The payload arrives as a ``PostObject``: a typed post's payload is read with
/// ``PostObject/payload(as:)``, under the rules of Guarantees, "Sendable payloads".
///
/// Where they run: a post first runs the subscriptions of its own name, then those of the
/// patterns that match it, pattern by pattern: `.all` first, then prefixes from the shortest to
/// the longest; within one pattern, in priority order, then subscription order (Guarantees,
/// rule 18). A center with no pattern subscription pays one load per post for this feature;
/// one with some pays, per post, a filter check per distinct prefix length, and a route lookup
/// only for a prefix whose filter bit the post's name hits.
///
/// With `replay: true` a pattern subscription first gets every retained post whose name it
/// matches, oldest first, then live posts, none twice and none out of order (a paced one: the
/// newest of them, as the first post its pacing sees; a coalesced actor one: the newest of them,
/// as the newest post of a burst).
extension PostCenter {
    /// Subscribes `handler` to the posts of every name that `pattern` matches.
    ///
    /// ```swift
    /// final class Player {}
    /// let center = PostCenter()
    /// let player = Player()
    /// let everything = center.subscribe(matching: .all, from: player) { name, post in
    ///     print(name, post.flag)
    /// }
    /// ```
    ///
    /// > Important: Keep the token: `_ = center.subscribe(…)` cancels at once.
    ///
    /// - Parameters:
    ///   - pattern: ``NamePattern/all`` or ``NamePattern/prefix(_:)``.
    ///   - sender: When given, only posts made `from:` this object are delivered; posts without a
    ///     sender never match. Held weakly: once it deallocates, nothing more is delivered.
    ///   - delivery: Where the handler runs: ``Delivery/immediate`` (the default), `.queue(q)`,
    ///     a paced delivery, or `.mainActor` (which, written literally, picks the overload that
    ///     takes a `@MainActor` handler). A paced delivery paces the pattern's posts together,
    ///     whatever their names: the newest one wins.
    ///   - replay: When `true`, the handler first gets every retained post whose name `pattern`
    ///     matches (with `from:`, only those made `from:` that sender, still alive), in the order
    ///     they were retained, then every later post.
    ///   - once: When `true`, exactly one post is delivered, whichever matching name it has.
    ///   - priority: Where the handler runs among the pattern's handlers: higher first; equal
    ///     priorities in subscription order. Default 0. The name's own subscriptions run before
    ///     every pattern's, whatever their priorities.
    ///   - fileID: The caller's file, recorded for diagnostics; leave the default.
    ///   - line: The caller's line; leave the default.
    ///   - handler: Called with the post's name and its envelope. Held by the center until the
    ///     token is cancelled or deinitialised (or its one post was delivered), then released.
    ///     It may throw; the post then goes on with the next handler, and the error is reported
    ///     as `handlerThrew` with the pattern as the name (`orders.*`, or `*` for `.all`).
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread, also inside a handler.
    /// - Complexity: amortised O(1).
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public func subscribe(
        matching pattern: NamePattern, from sender: AnyObject? = nil, delivery: Delivery = .immediate,
        replay: Bool = false, once: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @Sendable (String, PostObject) throws -> Void
    ) -> Subscription {
        let key = _notePattern(pattern)
        let entry = _handlerEntry(delivery, sender: sender, replay: replay, once: once) { (post: _NamedPost) in
            try handler(post.name, post.post)
        }
        return _addPattern(entry, pattern, key, fileID, line, priority)
    }

    /// Subscribes a `@MainActor` `handler` to the posts of every name that `pattern` matches.
    ///
    /// Posts made on the main actor run it synchronously, in order; posts made elsewhere schedule
    /// it on the main queue, as for a name's subscription with `delivery: .mainActor`.
    ///
    /// - Parameters:
    ///   - pattern: ``NamePattern/all`` or ``NamePattern/prefix(_:)``.
    ///   - sender: When given, only posts made `from:` this object are delivered. Held weakly.
    ///   - delivery: `.mainActor`, or a paced main-actor delivery.
    ///   - replay: When `true`, the handler first gets every retained post whose name `pattern`
    ///     matches, in the order they were retained, then every later post.
    ///   - once: When `true`, exactly one post is delivered.
    ///   - priority: Where the handler runs among the pattern's handlers. Default 0.
    ///   - fileID: The caller's file, recorded for diagnostics; leave the default.
    ///   - line: The caller's line; leave the default.
    ///   - handler: Called on the main actor with the post's name and its envelope. Held until
    ///     the token is cancelled or deinitialised (or its one post was delivered). It may throw,
    ///     as any handler.
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread, also inside a handler.
    /// - Complexity: amortised O(1).
    public func subscribe(
        matching pattern: NamePattern, from sender: AnyObject? = nil, delivery: MainActorDelivery,
        replay: Bool = false, once: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @MainActor (String, PostObject) throws -> Void
    ) -> Subscription {
        let key = _notePattern(pattern)
        let entry = _mainActorHandlerEntry(delivery, sender: sender, replay: replay, once: once) {
            @MainActor (post: _NamedPost) in try handler(post.name, post.post)
        }
        return _addPattern(entry, pattern, key, fileID, line, priority)
    }

    /// Subscribes `handler`, isolated to `actor`, to the posts of every name that `pattern`
    /// matches.
    ///
    /// Calls run on the actor in post order, as for a name's actor subscription. The center
    /// holds the actor weakly.
    ///
    /// - Parameters:
    ///   - pattern: ``NamePattern/all`` or ``NamePattern/prefix(_:)``.
    ///   - sender: When given, only posts made `from:` this object are delivered. Held weakly.
    ///   - actor: The actor the handler runs on. Held weakly: once it deallocates, nothing more
    ///     is delivered.
    ///   - replay: When `true`, the handler first gets every retained post whose name `pattern`
    ///     matches (with `from:`, only those made `from:` that sender), oldest first, on the actor,
    ///     then every later post, none twice; with `coalesced: true`, the newest of them; with
    ///     `once: true`, the oldest of them is its one post.
    ///   - once: When `true`, exactly one post is delivered.
    ///   - coalesced: When `true`, a burst of posts reaches the actor as its newest post only.
    ///   - priority: Where the handler runs among the pattern's handlers. Default 0.
    ///   - fileID: The caller's file, recorded for diagnostics; leave the default.
    ///   - line: The caller's line; leave the default.
    ///   - handler: Called on `actor` with the post's name and its envelope. Held until the
    ///     token is cancelled or deinitialised (or its one post was delivered). It may throw,
    ///     as any handler.
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread, also inside a handler.
    /// - Complexity: amortised O(1).
    public func subscribe<A: Actor>(
        matching pattern: NamePattern, from sender: AnyObject? = nil, on actor: A, replay: Bool = false,
        once: Bool = false, coalesced: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @Sendable (isolated A, String, PostObject) throws -> Void
    ) -> Subscription {
        let key = _notePattern(pattern)
        let named: @Sendable (isolated A, _NamedPost) throws -> Void = { actor, post in
            try handler(actor, post.name, post.post)
        }
        if coalesced && !once {
            return _addPatternCoalescingActor(
                _CoalescingActorEntry(actor: actor, tracker: _deliveries, sender: sender, handler: named), pattern,
                key, replay: replay, fileID, line, priority)
        }
        let entry = _ActorEntry(
            queue: _actorQueue(for: actor), tracker: _deliveries, sender: sender, once: once, handler: named)
        return _addPatternActor(entry, pattern, key, replay: replay, fileID, line, priority)
    }
}
