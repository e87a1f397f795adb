/// `@MainActor` handlers and observers: `delivery: .mainActor` (see ``MainActorDelivery``).
///
/// Posts made on the main thread run them synchronously, in subscription order, like immediate
/// handlers; posts made elsewhere schedule them on the main actor without blocking the poster.
/// The payload may cross to the main thread, so a topic's payload is `Sendable`.
extension PostCenter {
    /// Subscribes a `@MainActor` handler to the posts of `name`.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>; `fileID:` and `line:` record the caller, see
    /// <doc:CallSites>.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - sender: When given, only posts made `from:` this object are delivered. Held weakly.
    ///   - delivery: `.mainActor`, or a paced main-actor delivery such as `.mainActor.coalesced`.
    ///   - replay: When `true`, the handler first gets the name's retained post, if any:
    ///     synchronously when subscribing on the main thread, else scheduled like a post; with
    ///     `from:`, only one posted `from:` that sender. A paced delivery calls it later, as the
    ///     first post the pacing sees.
    ///   - once: When `true`, exactly one post is delivered, even under concurrent posts; a paced
    ///     delivery delivers it unpaced.
    ///   - priority: Where the handler runs among the name\'s handlers: higher first; equal
    ///     priorities in subscription order. Default 0.
    ///   - fileID: The caller's file, recorded for diagnostics; leave the default.
    ///   - line: The caller's line; leave the default.
    ///   - handler: Called on the main actor with each post's envelope. Held until the token is
    ///     cancelled or deinitialised (or its one post was delivered).
    ///     It may throw; the post then goes on with the next handler, and the error is reported as
    ///     `handlerThrew` (Guarantees, "Handlers that throw").
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread.
    public func subscribe(
        _ name: String, from sender: AnyObject? = nil, delivery: MainActorDelivery, replay: Bool = false,
        once: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @MainActor (PostObject) throws -> Void
    ) -> Subscription {
        let entry = _mainActorHandlerEntry(delivery, sender: sender, replay: replay, once: once, handler)
        return _add(entry, to: _NameKey(name), fileID, line, priority)
    }

    /// Subscribes a `@MainActor` handler to the posts of `topic`.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to; its payload crosses to the main thread, so it is `Sendable`.
    ///   - sender: When given, only posts made `from:` this object are delivered. Held weakly.
    ///   - delivery: `.mainActor`, or a paced main-actor delivery.
    ///   - replay: When `true`, the handler first gets the name's retained post, if any and if it
    ///     is a `Payload`: synchronously when subscribing on the main thread, else scheduled like
    ///     a post; with `from:`, only one posted `from:` that sender. A paced delivery calls it
    ///     later, as the first post the pacing sees.
    ///   - once: When `true`, exactly one post is delivered, even under concurrent posts.
    ///   - priority: Where the handler runs among the name\'s handlers: higher first; equal
    ///     priorities in subscription order. Default 0.
    ///   - fileID: The caller's file, recorded for diagnostics; leave the default.
    ///   - line: The caller's line; leave the default.
    ///   - handler: Called on the main actor with each payload. Held until the token is cancelled
    ///     or deinitialised (or its one post was delivered).
    ///     It may throw; the post then goes on with the next handler, and the error is reported as
    ///     `handlerThrew` (Guarantees, "Handlers that throw").
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread.
    public func subscribe<Payload: Sendable>(
        _ topic: Topic<Payload>, from sender: AnyObject? = nil, delivery: MainActorDelivery, replay: Bool = false,
        once: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @MainActor (Payload) throws -> Void
    ) -> Subscription {
        let entry = _mainActorHandlerEntry(delivery, sender: sender, replay: replay, once: once, handler)
        return _add(entry, to: topic._key, fileID, line, priority)
    }

    /// Registers a `@MainActor` observer's method for `name`, holding the observer weakly; the
    /// method runs on the main actor.
    ///
    /// ```swift
    /// token = center.register("login", observer: self, delivery: .mainActor, selector: Screen.didLogin)
    /// ```
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: `.mainActor`, or a paced main-actor delivery.
    ///   - replay: When `true`, the observer first gets the name's retained post, if any:
    ///     synchronously when subscribing on the main thread, else scheduled like a post (with a
    ///     paced delivery, later, as the first post the pacing sees).
    ///   - priority: Where the handler runs among the name\'s handlers: higher first; equal
    ///     priorities in subscription order. Default 0.
    ///   - fileID: The caller's file, recorded for diagnostics; leave the default.
    ///   - line: The caller's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    ///     It may throw; the post then goes on with the next handler, and the error is reported as
    ///     `handlerThrew` (Guarantees, "Handlers that throw").
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    public func register<Observer: AnyObject>(
        _ name: String, observer: Observer, delivery: MainActorDelivery, replay: Bool = false,
        priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        selector: @escaping @MainActor (Observer) -> (PostObject) throws -> Void
    ) -> Subscription {
        let entry = _mainActorObserverEntry(observer, pacing: delivery._pacing(), replay: replay, selector)
        return _add(entry, to: _NameKey(name), fileID, line, priority)
    }

    /// Registers a `@MainActor` observer's method for `topic`, holding the observer weakly.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to; its payload crosses to the main thread, so it is `Sendable`.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: `.mainActor`, or a paced main-actor delivery.
    ///   - replay: When `true`, the observer first gets the name's retained post, if any and if it
    ///     is a `Payload`: synchronously when subscribing on the main thread, else scheduled like
    ///     a post (with a paced delivery, later, as the first post the pacing sees).
    ///   - priority: Where the handler runs among the name\'s handlers: higher first; equal
    ///     priorities in subscription order. Default 0.
    ///   - fileID: The caller's file, recorded for diagnostics; leave the default.
    ///   - line: The caller's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    ///     It may throw; the post then goes on with the next handler, and the error is reported as
    ///     `handlerThrew` (Guarantees, "Handlers that throw").
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    public func register<Observer: AnyObject, Payload: Sendable>(
        _ topic: Topic<Payload>, observer: Observer, delivery: MainActorDelivery, replay: Bool = false,
        priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        selector: @escaping @MainActor (Observer) -> (Payload) throws -> Void
    ) -> Subscription {
        let entry = _mainActorObserverEntry(observer, pacing: delivery._pacing(), replay: replay, selector)
        return _add(entry, to: topic._key, fileID, line, priority)
    }
}
