/// Handlers isolated to an actor of your choice.
extension PostCenter {
    /// Subscribes `handler` to every post of `topic`, running it isolated to `actor`.
    ///
    /// The handler gets the actor as an `isolated` parameter, so it reads and writes the actor's
    /// state synchronously, with no `await`:
    ///
    /// ```swift
    /// actor Cache {
    ///     var values: [Int] = []
    /// }
    /// let cache = Cache()
    /// let token = center.subscribe(.reading, on: cache) { cache, value in
    ///     cache.values.append(value)
    /// }
    /// ```
    ///
    /// - Ordering: posts made on one thread reach the handler in the order they were posted;
    ///   posts of several threads in the order they reached the subscription. Nothing is lost or
    ///   run twice.
    /// - Threading: `post` never waits for the actor. It appends the payload to the
    ///   subscription's mailbox and, for the first post of a burst, starts one task that runs on
    ///   the actor and hands the mailbox's payloads to the handler, in order, until it is empty.
    ///   No thread blocks waiting for the actor. The mailbox is unbounded: a poster faster than
    ///   the actor makes it grow (each payload is kept until its turn). Use `posts(_:bufferingPolicy:)`
    ///   with a bounded policy when dropping the oldest or newest posts is preferable.
    /// - Lifetime: the actor is held weakly. Once it deallocates, posts no longer reach this
    ///   subscription, do not count it, and ``subscriptionCount(for:)`` excludes it; an actor may
    ///   therefore own its own token. A task that is running the handler keeps the actor alive
    ///   until it is done.
    /// - Cancellation: when ``Subscription/cancel()`` returns (or the token's deinit completes),
    ///   the handler never starts again, payloads still in the mailbox are dropped, and a handler
    ///   running on the actor has returned. Called on the actor from inside the handler itself,
    ///   `cancel()` returns at once. ``Subscription/pause()`` drops the payloads still waiting too.
    ///
    /// `post` counts the subscription when it appends the payload, before the handler runs.
    /// Global actors work the same way: pass `on: MyGlobalActor.shared`.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - actor: The actor the handler runs on, held weakly.
    ///   - coalesced: When `true`, only the newest payload waits for the actor, as a post made
    ///     while a call is pending replaces its payload.
    ///   - fileID: The file of the call site, filled in by the compiler.
    ///   - line: The line of the call site, filled in by the compiler.
    ///   - handler: Called on `actor` with each payload. Held by the center until the token is
    ///     cancelled or deinitialised, then released.
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels.
    /// - Complexity: amortised O(1) per post, with no allocation in the steady state: one task
    ///   per burst of posts, not one per post.
    public func subscribe<A: Actor, Payload: Sendable>(
        _ topic: Topic<Payload>, on actor: A, coalesced: Bool = false, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @Sendable (isolated A, Payload) -> Void
    ) -> Subscription {
        if coalesced {
            return _add(_CoalescingActorEntry(actor: actor, handler: handler), to: topic._key, fileID, line)
        }
        return _add(_ActorEntry(actor: actor, handler: handler), to: topic._key, fileID, line)
    }

    /// Subscribes `handler` to every post of `name`, running it isolated to `actor`, with the
    /// post's envelope.
    ///
    /// ```swift
    /// actor Session {
    ///     func didLogin(_ flag: String) { /* … */ }
    /// }
    /// let token = center.subscribe("login", on: session) { session, post in
    ///     session.didLogin(post.flag)
    /// }
    /// ```
    ///
    /// Ordering, threading, lifetime and cancellation are those of
    /// ``subscribe(_:on:coalesced:fileID:line:handler:)-(Topic<Payload>,_,_,_,_,_)``: posts of one thread
    /// arrive in order, the poster never waits, the actor is held weakly, and when `cancel()`
    /// returns no handler starts again and a running one has returned (unless `cancel()` is
    /// called from inside it).
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - actor: The actor the handler runs on, held weakly.
    ///   - coalesced: When `true`, only the newest envelope waits for the actor, as a post made
    ///     while a call is pending replaces it.
    ///   - fileID: The file of the call site, filled in by the compiler.
    ///   - line: The line of the call site, filled in by the compiler.
    ///   - handler: Called on `actor` with each post's envelope.
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels.
    public func subscribe<A: Actor>(
        _ name: String, on actor: A, coalesced: Bool = false, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @Sendable (isolated A, PostObject) -> Void
    ) -> Subscription {
        if coalesced {
            return _add(_CoalescingActorEntry(actor: actor, handler: handler), to: _NameKey(name), fileID, line)
        }
        return _add(_ActorEntry(actor: actor, handler: handler), to: _NameKey(name), fileID, line)
    }
}
