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
    ///   subscription's mailbox and, for the first post of a burst, puts the subscription in line
    ///   on the actor: one task per burst runs on the actor for all of the center's subscriptions
    ///   on it, so a post that reaches N subscriptions on one actor costs one task, not N. The
    ///   task hands each mailbox's payloads to its handler, in order, lets the actor's other work
    ///   run after every 256 payloads, and ends as soon as every mailbox is empty (the next post
    ///   starts another). The task is detached and runs at `.medium` priority whatever the
    ///   poster's, and the handler sees none of the poster's task-local values (one task serves
    ///   every poster of a burst). No thread blocks waiting for the actor. The mailbox is unbounded: a poster faster than
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
    /// `Payload` must be `Sendable` because the payload leaves the posting thread: it waits in
    /// the mailbox while the poster goes on, and the handler gets it on the actor, in another
    /// task. The handler is `@Sendable` for the same reason: the center calls it from that task.
    ///
    /// With `replay: true`, the name's retained post (see <doc:RetainedPosts>), if any and if it
    /// is a `Payload` (and, with `from:`, was posted from that sender), is the first payload the
    /// handler gets, before every post made after `subscribe` returned; a retained post it was
    /// handed this way does not reach it twice. With `coalesced: true` too, the retained post is
    /// the first payload the slot holds: a post made before the first call replaces it.
    ///
    /// Every option combines with every other: `from:` and `once:` work as for
    /// `subscribe(_:from:delivery:replay:once:)`, and a one-shot delivers its one post
    /// uncoalesced (a one-shot has no stream to coalesce).
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - sender: When given, only posts made `from:` this object are delivered (a retained post
    ///     is replayed only if it was posted `from:` it). Held weakly: once it deallocates,
    ///     nothing more is delivered and the subscription is no longer counted.
    ///   - actor: The actor the handler runs on, held weakly.
    ///   - replay: When `true`, the handler first gets the name's retained post, if any and if it
    ///     is a `Payload`, on the actor.
    ///   - once: When `true`, exactly one post is delivered (the replayed one, if any), even when
    ///     several threads post at once: the first post that reaches the subscription claims it,
    ///     and the subscription leaves the route before the payload is handed to the actor
    ///     (``Subscription/isActive`` turns `false`).
    ///   - coalesced: When `true`, only the newest payload waits for the actor, as a post made
    ///     while a call is pending replaces its payload; the call runs in a detached task at
    ///     `.medium` priority, as without it. Ignored with `once: true`.
    ///   - priority: Where the handler runs among the name\'s handlers: higher first; equal
    ///     priorities in subscription order. Default 0.
    ///   - fileID: The file of the call site, filled in by the compiler.
    ///   - line: The line of the call site, filled in by the compiler.
    ///   - handler: Called on `actor` with each payload. Held by the center until the token is
    ///     cancelled or deinitialised, then released.
    ///     It may throw; the post then goes on with the next handler, and the error is reported as
    ///     `handlerThrew` (Guarantees, "Handlers that throw").
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels.
    /// - Complexity: amortised O(1) per post, with no allocation in the steady state: one task
    ///   per burst of posts and actor, not one per post or per subscription.
    public func subscribe<A: Actor, Payload: Sendable>(
        _ topic: Topic<Payload>, from sender: AnyObject? = nil, on actor: A, replay: Bool = false,
        once: Bool = false, coalesced: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @Sendable (isolated A, Payload) throws -> Void
    ) -> Subscription {
        _actorSubscription(
            topic._key, sender: sender, actor: actor, replay: replay, once: once, coalesced: coalesced, priority,
            fileID, line, handler)
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
    /// Ordering, threading, lifetime, cancellation, `from`, `replay`, `once` and `coalesced` are
    /// those of
    /// ``subscribe(_:from:on:replay:once:coalesced:priority:fileID:line:handler:)-(Topic<Payload>,_,_,_,_,_,_,_,_,_)``: posts of one thread
    /// arrive in order, the poster never waits, the actor is held weakly, and when `cancel()`
    /// returns no handler starts again and a running one has returned (unless `cancel()` is
    /// called from inside it). The handler is `@Sendable` because it runs in a task of its own,
    /// not on the posting thread; an envelope is `Sendable`.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - sender: When given, only posts made `from:` this object are delivered. Held weakly.
    ///   - actor: The actor the handler runs on, held weakly.
    ///   - replay: When `true`, the handler first gets the name's retained post, if any (and, with
    ///     `from:`, if it was posted from that sender), on the actor.
    ///   - once: When `true`, exactly one post is delivered, even under concurrent posts.
    ///   - coalesced: When `true`, only the newest envelope waits for the actor, as a post made
    ///     while a call is pending replaces it. Ignored with `once: true`.
    ///   - priority: Where the handler runs among the name\'s handlers: higher first; equal
    ///     priorities in subscription order. Default 0.
    ///   - fileID: The file of the call site, filled in by the compiler.
    ///   - line: The line of the call site, filled in by the compiler.
    ///   - handler: Called on `actor` with each post's envelope.
    ///     It may throw; the post then goes on with the next handler, and the error is reported as
    ///     `handlerThrew` (Guarantees, "Handlers that throw").
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels.
    public func subscribe<A: Actor>(
        _ name: String, from sender: AnyObject? = nil, on actor: A, replay: Bool = false, once: Bool = false,
        coalesced: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @Sendable (isolated A, PostObject) throws -> Void
    ) -> Subscription {
        _actorSubscription(
            _NameKey(name), sender: sender, actor: actor, replay: replay, once: once, coalesced: coalesced, priority,
            fileID, line, handler)
    }

    /// The entry of an actor subscription, every option applied: a coalescing one unless it is a
    /// one-shot (whose one post needs no coalescing).
    func _actorSubscription<A: Actor, Payload: Sendable>(
        _ key: _NameKey, sender: AnyObject?, actor: A, replay: Bool, once: Bool, coalesced: Bool, _ priority: Int,
        _ fileID: String, _ line: Int, _ handler: @escaping @Sendable (isolated A, Payload) throws -> Void
    ) -> Subscription {
        if coalesced && !once {
            return _addCoalescingActor(
                _CoalescingActorEntry(actor: actor, tracker: _deliveries, sender: sender, handler: handler), to: key,
                replay: replay, fileID, line, priority)
        }
        return _addActor(
            _ActorEntry(
                queue: _actorQueue(for: actor), tracker: _deliveries, sender: sender, once: once, handler: handler),
            to: key, replay: replay, fileID, line, priority)
    }
}
