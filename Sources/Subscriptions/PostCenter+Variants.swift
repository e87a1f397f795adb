/// One-shot subscriptions, sender filtering and main-actor handlers.
///
/// Every method that takes a delivery comes in the same three shapes:
/// - immediate (``ImmediateDelivery``, the default): any payload type, `@Sendable` handler;
/// - any ``Delivery``: a `Sendable` payload (it may cross threads), `@Sendable` handler;
/// - ``MainActorDelivery`` (`delivery: .mainActor`): a `Sendable` payload, `@MainActor` handler.
extension PostCenter {
    // MARK: One-shot

    /// Subscribes `handler` to the next post of `name` only.
    ///
    /// Exactly one post is delivered, even when several threads post at once: the first post
    /// that reaches the subscription claims it and the subscription leaves the route before the
    /// handler runs (``Subscription/isActive`` turns `false`). Cancelling the token before that
    /// post works as usual.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - delivery: Where the handler runs; ``Delivery/immediate`` by default.
    ///   - replay: When `true`, the name's retained post, if any, is that one post.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called with the one post's envelope, then released.
    /// - Returns: The token; dropping it before the post cancels the subscription.
    /// - Threading: safe from any thread.
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public func subscribeOnce(
        _ name: String, delivery: Delivery = .immediate, replay: Bool = false, fileID: String = #fileID,
        line: Int = #line, handler: @escaping @Sendable (PostObject) -> Void
    ) -> Subscription {
        let executor = delivery._executor
        let entry =
            replay
            ? _replayableEntry(executor, once: true, handler) : _makeEnvelopeEntry(executor, once: true, handler)
        return _add(entry, PostObject.self, to: _NameKey(name), replay: replay, fileID, line)
    }

    /// Subscribes a `@MainActor` handler to the next post of `name` only; see ``MainActorDelivery``.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - delivery: `.mainActor`.
    ///   - replay: When `true`, the name's retained post, if any, is that one post.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called on the main actor with the one post's envelope.
    /// - Returns: The token; dropping it before the post cancels the subscription.
    /// - Threading: safe from any thread.
    public func subscribeOnce(
        _ name: String, delivery: MainActorDelivery, replay: Bool = false, fileID: String = #fileID,
        line: Int = #line, handler: @escaping @MainActor (PostObject) -> Void
    ) -> Subscription {
        _add(_mainActorEntry(once: true, handler), PostObject.self, to: _NameKey(name), replay: replay, fileID, line)
    }

    /// Subscribes `handler` to the next post of `topic` whose payload is a `Payload` only, on the
    /// posting thread; `Payload` need not be `Sendable`.
    ///
    /// Exactly one post is delivered, even under concurrent posts.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - delivery: ``ImmediateDelivery/immediate``, the default.
    ///   - replay: When `true`, the name's retained post, if any and if it is a `Payload`, is that one post.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called with the one payload, then released.
    /// - Returns: The token; dropping it before the post cancels the subscription.
    /// - Threading: safe from any thread.
    public func subscribeOnce<Payload>(
        _ topic: Topic<Payload>, delivery: ImmediateDelivery = .immediate, replay: Bool = false,
        fileID: String = #fileID, line: Int = #line, handler: @escaping @Sendable (Payload) -> Void
    ) -> Subscription {
        let entry =
            replay ? _replayableEntry(.immediate, once: true, handler) : _makeEntry(.immediate, once: true, handler)
        return _add(entry, Payload.self, to: topic._key, replay: replay, fileID, line)
    }

    /// Subscribes `handler` to the next post of `topic` only, with any ``Delivery``; the payload
    /// may cross threads, so it must be `Sendable`.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - delivery: Where the handler runs.
    ///   - replay: When `true`, the name's retained post, if any and if it is a `Payload`, is that one post.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called with the one payload, then released.
    /// - Returns: The token; dropping it before the post cancels the subscription.
    /// - Threading: safe from any thread.
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public func subscribeOnce<Payload: Sendable>(
        _ topic: Topic<Payload>, delivery: Delivery, replay: Bool = false, fileID: String = #fileID,
        line: Int = #line, handler: @escaping @Sendable (Payload) -> Void
    ) -> Subscription {
        let executor = delivery._executor
        let entry =
            replay ? _replayableEntry(executor, once: true, handler) : _makeEntry(executor, once: true, handler)
        return _add(entry, Payload.self, to: topic._key, replay: replay, fileID, line)
    }

    /// Subscribes a `@MainActor` handler to the next post of `topic` only; see ``MainActorDelivery``.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to; its payload crosses to the main thread when posted
    ///     elsewhere, so it is `Sendable`.
    ///   - delivery: `.mainActor`.
    ///   - replay: When `true`, the name's retained post, if any and if it is a `Payload`, is that one post.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called on the main actor with the one payload.
    /// - Returns: The token; dropping it before the post cancels the subscription.
    /// - Threading: safe from any thread.
    public func subscribeOnce<Payload: Sendable>(
        _ topic: Topic<Payload>, delivery: MainActorDelivery, replay: Bool = false, fileID: String = #fileID,
        line: Int = #line, handler: @escaping @MainActor (Payload) -> Void
    ) -> Subscription {
        _add(_mainActorEntry(once: true, handler), Payload.self, to: topic._key, replay: replay, fileID, line)
    }

    // MARK: Sender filtering

    /// Subscribes `handler` to the posts of `name` made `from: sender`, like the `object:`
    /// parameter of `NotificationCenter.addObserver`.
    ///
    /// The sender is held weakly: once it deallocates, the subscription receives nothing more
    /// and is no longer counted. Posts made without a sender never match.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - sender: The only sender whose posts are delivered. Held weakly.
    ///   - delivery: Where the handler runs; ``Delivery/immediate`` by default.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called with each matching post's envelope.
    /// - Returns: The token that keeps the subscription alive.
    /// - Threading: safe from any thread.
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public func subscribe(
        _ name: String, from sender: AnyObject, delivery: Delivery = .immediate, fileID: String = #fileID,
        line: Int = #line, handler: @escaping @Sendable (PostObject) -> Void
    ) -> Subscription {
        let pacing = delivery._pacing(replay: false)
        return _add(
            _makeEnvelopeEntry(delivery._executor, sender: sender, pacing: pacing, handler), to: _NameKey(name), fileID,
            line)
    }

    /// Subscribes a `@MainActor` handler to the posts of `name` made `from: sender` (held weakly);
    /// see ``MainActorDelivery``.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - sender: The only sender whose posts are delivered. Held weakly.
    ///   - delivery: `.mainActor`.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called on the main actor with each matching post's envelope.
    /// - Returns: The token that keeps the subscription alive.
    /// - Threading: safe from any thread.
    public func subscribe(
        _ name: String, from sender: AnyObject, delivery: MainActorDelivery, fileID: String = #fileID,
        line: Int = #line, handler: @escaping @MainActor (PostObject) -> Void
    ) -> Subscription {
        _add(
            _mainActorEntry(sender: sender, pacing: delivery._pacing(replay: false), handler), to: _NameKey(name),
            fileID, line)
    }

    /// Subscribes `handler` to the posts of `topic` made `from: sender` (held weakly), on the
    /// posting thread; `Payload` need not be `Sendable`.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - sender: The only sender whose posts are delivered. Held weakly.
    ///   - delivery: ``ImmediateDelivery/immediate``, the default.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called with each matching payload.
    /// - Returns: The token that keeps the subscription alive.
    /// - Threading: safe from any thread.
    public func subscribe<Payload>(
        _ topic: Topic<Payload>, from sender: AnyObject, delivery: ImmediateDelivery = .immediate,
        fileID: String = #fileID, line: Int = #line, handler: @escaping @Sendable (Payload) -> Void
    ) -> Subscription {
        _add(_makeEntry(.immediate, sender: sender, handler), to: topic._key, fileID, line)
    }

    /// Subscribes `handler` to the posts of `topic` made `from: sender` (held weakly), with any
    /// ``Delivery``; the payload may cross threads, so it must be `Sendable`.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - sender: The only sender whose posts are delivered. Held weakly.
    ///   - delivery: Where the handler runs.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called with each matching payload.
    /// - Returns: The token that keeps the subscription alive.
    /// - Threading: safe from any thread.
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public func subscribe<Payload: Sendable>(
        _ topic: Topic<Payload>, from sender: AnyObject, delivery: Delivery, fileID: String = #fileID,
        line: Int = #line, handler: @escaping @Sendable (Payload) -> Void
    ) -> Subscription {
        let pacing = delivery._pacing(replay: false)
        return _add(
            _makeEntry(delivery._executor, sender: sender, pacing: pacing, handler), to: topic._key, fileID, line)
    }

    /// Subscribes a `@MainActor` handler to the posts of `topic` made `from: sender` (held
    /// weakly); see ``MainActorDelivery``.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to; its payload crosses to the main thread when posted
    ///     elsewhere, so it is `Sendable`.
    ///   - sender: The only sender whose posts are delivered. Held weakly.
    ///   - delivery: `.mainActor`.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called on the main actor with each matching payload.
    /// - Returns: The token that keeps the subscription alive.
    /// - Threading: safe from any thread.
    public func subscribe<Payload: Sendable>(
        _ topic: Topic<Payload>, from sender: AnyObject, delivery: MainActorDelivery, fileID: String = #fileID,
        line: Int = #line, handler: @escaping @MainActor (Payload) -> Void
    ) -> Subscription {
        _add(
            _mainActorEntry(sender: sender, pacing: delivery._pacing(replay: false), handler), to: topic._key, fileID,
            line)
    }

    /// Posts `object` to `name` on behalf of `sender`.
    ///
    /// Reaches every subscription without a sender filter, and those filtered on `sender`.
    /// - Returns: How many handlers ran or were scheduled.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public func post(_ name: String, _ object: PostObject, from sender: AnyObject) -> Int {
        let key = _NameKey(name)
        return _heard(_post(key, sender: sender) { object }, key)
    }

    /// Posts a new ``PostObject`` made of `flag` and `data` (held weakly) to `name` on behalf of
    /// `sender`.
    ///
    /// Reaches every subscription without a sender filter, and those filtered on `sender`.
    /// - Returns: How many handlers ran or were scheduled.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public func post(_ name: String, flag: String = "", data: AnyObject? = nil, from sender: AnyObject) -> Int {
        let key = _NameKey(name)
        return _heard(_post(key, sender: sender) { PostObject(flag: flag, data: data) }, key)
    }

    /// Posts `payload` to `topic` on behalf of `sender`.
    ///
    /// Reaches every subscription without a sender filter, and those filtered on `sender`.
    /// - Returns: How many handlers ran or were scheduled.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public func post<Payload>(_ topic: Topic<Payload>, _ payload: Payload, from sender: AnyObject) -> Int {
        _heard(_post(topic._key, payload, direct: topic._direct, main: topic._mainDirect, sender: sender), topic._key)
    }

    /// Posts to a topic without a payload on behalf of `sender`: `center.post(.logout, from: self)`.
    ///
    /// - Returns: How many handlers ran or were scheduled.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public func post(_ topic: Topic<Void>, from sender: AnyObject) -> Int {
        _heard(_post(topic._key, (), direct: topic._direct, main: topic._mainDirect, sender: sender), topic._key)
    }

    // MARK: Main actor

    /// Subscribes a `@MainActor` handler to every post of `name`; see ``MainActorDelivery``.
    ///
    /// Posts on the main thread run it synchronously; posts elsewhere schedule it on the main
    /// queue without blocking the poster.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - delivery: `.mainActor`.
    ///   - replay: When `true`, the handler first gets the name's retained post, if any: synchronously
    ///     when subscribing on the main thread, else scheduled like a post.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called on the main actor with each post's envelope.
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread.
    public func subscribe(
        _ name: String, delivery: MainActorDelivery, replay: Bool = false, fileID: String = #fileID,
        line: Int = #line, handler: @escaping @MainActor (PostObject) -> Void
    ) -> Subscription {
        let pacing = delivery._pacing(replay: replay)
        let entry = pacing != nil || replay ? _mainActorEntry(pacing: pacing, handler) : _mainHandler(handler)
        return _add(entry, PostObject.self, to: _NameKey(name), replay: replay, fileID, line)
    }

    /// Subscribes a `@MainActor` handler to every post of `topic`; see ``MainActorDelivery``.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to; its payload crosses to the main thread, so it is `Sendable`.
    ///   - delivery: `.mainActor`.
    ///   - replay: When `true`, the handler first gets the name's retained post, if any and if it is a `Payload`: synchronously
    ///     when subscribing on the main thread, else scheduled like a post.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called on the main actor with each payload.
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread.
    public func subscribe<Payload: Sendable>(
        _ topic: Topic<Payload>, delivery: MainActorDelivery, replay: Bool = false, fileID: String = #fileID,
        line: Int = #line, handler: @escaping @MainActor (Payload) -> Void
    ) -> Subscription {
        let pacing = delivery._pacing(replay: replay)
        let entry = pacing != nil || replay ? _mainActorEntry(pacing: pacing, handler) : _mainHandler(handler)
        return _add(entry, Payload.self, to: topic._key, replay: replay, fileID, line)
    }

    /// Registers a `@MainActor` observer's method for `name`, holding the observer weakly; the
    /// method runs on the main actor (see ``MainActorDelivery``).
    ///
    /// ```swift
    /// token = center.register("login", observer: self, delivery: .mainActor, selector: Screen.didLogin)
    /// ```
    ///
    /// For `replay: true`, see <doc:RetainedPosts>.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: `.mainActor`.
    ///   - replay: When `true`, the observer first gets the name's retained post, if any: synchronously
    ///     when subscribing on the main thread, else scheduled like a post.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    public func register<Observer: AnyObject>(
        _ name: String, observer: Observer, delivery: MainActorDelivery, replay: Bool = false,
        fileID: String = #fileID, line: Int = #line, selector: @escaping @MainActor (Observer) -> (PostObject) -> Void
    ) -> Subscription {
        let entry = _mainActorObserverEntry(observer, pacing: delivery._pacing(replay: replay), selector)
        return _add(entry, PostObject.self, to: _NameKey(name), replay: replay, fileID, line)
    }

    /// Registers a `@MainActor` observer's method for `topic`, holding the observer weakly.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to; its payload crosses to the main thread, so it is `Sendable`.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: `.mainActor`.
    ///   - replay: When `true`, the observer first gets the name's retained post, if any and if it is a `Payload`: synchronously
    ///     when subscribing on the main thread, else scheduled like a post.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    public func register<Observer: AnyObject, Payload: Sendable>(
        _ topic: Topic<Payload>, observer: Observer, delivery: MainActorDelivery, replay: Bool = false,
        fileID: String = #fileID, line: Int = #line, selector: @escaping @MainActor (Observer) -> (Payload) -> Void
    ) -> Subscription {
        let entry = _mainActorObserverEntry(observer, pacing: delivery._pacing(replay: replay), selector)
        return _add(entry, Payload.self, to: topic._key, replay: replay, fileID, line)
    }

    /// The entry of a plain `@MainActor` handler: called directly by posts on the main actor.
    func _mainHandler<Payload>(_ handler: @escaping @MainActor (Payload) -> Void) -> _Entry {
        // Global-actor isolation does not change a function's representation; the entry calls it
        // only on the main actor (see `_MainHandler`).
        _MainHandler(_nonisolated(handler), mailbox: _deliveries.main)
    }

    func _mainActorEntry<Payload>(
        once: Bool = false, sender: AnyObject? = nil, pacing: Pacing? = nil,
        _ handler: @escaping @MainActor (Payload) -> Void
    ) -> _Entry {
        let invoke: (AnyObject?, Payload) -> Bool = { _, payload in
            let box = _UncheckedSendable(payload)
            MainActor.assumeIsolated { handler(box.value) }
            return true
        }
        if let pacing, !once { return _pacedEntry(.mainActor, pacing, observer: nil, sender: sender, invoke: invoke) }
        return _Slow<Payload>(
            executor: .mainActor, once: once, observer: nil, sender: sender, tracker: _deliveries, invoke: invoke)
    }

    func _mainActorObserverEntry<Observer: AnyObject, Payload>(
        _ observer: Observer, pacing: Pacing? = nil, _ selector: @escaping @MainActor (Observer) -> (Payload) -> Void
    ) -> _Entry {
        let invoke: (AnyObject?, Payload) -> Bool = { target, payload in
            guard let target else { return false }
            let box = _UncheckedSendable((unsafeDowncast(target, to: Observer.self), payload))
            MainActor.assumeIsolated { selector(box.value.0)(box.value.1) }
            return true
        }
        if let pacing { return _pacedEntry(.mainActor, pacing, observer: observer, sender: nil, invoke: invoke) }
        return _Slow<Payload>(
            executor: .mainActor, once: false, observer: observer, sender: nil, tracker: _deliveries, invoke: invoke)
    }
}
