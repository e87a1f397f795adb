/// One-shot subscriptions, sender filtering and main-actor handlers.
extension PostCenter {
    // MARK: One-shot

    /// Subscribes `handler` to the next post of `name` only.
    ///
    /// Exactly one post is delivered, even when several threads post at once: the first post
    /// that reaches the subscription claims it and the subscription leaves the route before the
    /// handler runs (``Subscription/isActive`` turns `false`). Cancelling the token before that
    /// post works as usual.
    ///
    /// With `replay: true` the name's retained post, if any, is that one post (see
    /// <doc:RetainedPosts>).
    ///
    /// - Returns: The token; dropping it before the post cancels the subscription.
    public func subscribeOnce(
        _ name: String, delivery: Delivery = .immediate, replay: Bool = false,
        handler: @escaping @Sendable (PostObject) -> Void
    ) -> Subscription {
        if replay {
            let entry = _replayableEntry(delivery._executor, once: true, handler)
            return _addReplaying(entry, PostObject.self, to: _NameKey(name))
        }
        return _add(_makeEnvelopeEntry(delivery._executor, once: true, handler), to: _NameKey(name))
    }

    /// Subscribes `handler` to the next post of `topic` whose payload is a `Payload` only.
    ///
    /// Exactly one post is delivered, even under concurrent posts; see
    /// ``subscribeOnce(_:delivery:replay:handler:)-(String,_,_,_)``. With `replay: true` the
    /// retained post of the name, if it is a `Payload`, is that one post.
    public func subscribeOnce<Payload>(
        _ topic: Topic<Payload>, delivery: Delivery = .immediate, replay: Bool = false,
        handler: @escaping @Sendable (Payload) -> Void
    ) -> Subscription {
        if replay {
            return _addReplaying(
                _replayableEntry(delivery._executor, once: true, handler), Payload.self, to: topic._key)
        }
        return _add(_makeEntry(delivery._executor, once: true, handler), to: topic._key)
    }

    // MARK: Sender filtering

    /// Subscribes `handler` to the posts of `name` made `from: sender`, like the `object:`
    /// parameter of `NotificationCenter.addObserver`.
    ///
    /// The sender is held weakly: once it deallocates, the subscription receives nothing more
    /// and is no longer counted. Posts made without a sender never match.
    public func subscribe(
        _ name: String, from sender: AnyObject, delivery: Delivery = .immediate,
        handler: @escaping @Sendable (PostObject) -> Void
    ) -> Subscription {
        _add(_makeEnvelopeEntry(delivery._executor, sender: sender, handler), to: _NameKey(name))
    }

    /// Subscribes `handler` to the posts of `topic` made `from: sender` (held weakly).
    public func subscribe<Payload>(
        _ topic: Topic<Payload>, from sender: AnyObject, delivery: Delivery = .immediate,
        handler: @escaping @Sendable (Payload) -> Void
    ) -> Subscription {
        _add(_makeEntry(delivery._executor, sender: sender, handler), to: topic._key)
    }

    /// Posts `object` to `name` on behalf of `sender`.
    ///
    /// Reaches every subscription without a sender filter, and those filtered on `sender`.
    /// - Returns: How many handlers ran or were scheduled.
    @discardableResult
    public func post(_ name: String, _ object: PostObject, from sender: AnyObject) -> Int {
        let key = _NameKey(name)
        return _heard(_post(key, sender: sender) { object }, key)
    }

    /// Posts `payload` to `topic` on behalf of `sender`.
    ///
    /// Reaches every subscription without a sender filter, and those filtered on `sender`.
    /// - Returns: How many handlers ran or were scheduled.
    @discardableResult
    public func post<Payload>(_ topic: Topic<Payload>, _ payload: Payload, from sender: AnyObject) -> Int {
        _heard(_post(topic._key, payload, direct: topic._direct, sender: sender), topic._key)
    }

    // MARK: Main actor

    /// Subscribes a `@MainActor` handler to every post of `name`; see ``MainActorDelivery``.
    ///
    /// Posts on the main thread run it synchronously; posts elsewhere schedule it on the main
    /// queue without blocking the poster. With `replay: true` the name's retained post comes
    /// first: synchronously when subscribing on the main thread, else scheduled like a post.
    public func subscribe(
        _ name: String, delivery: MainActorDelivery, replay: Bool = false,
        handler: @escaping @MainActor (PostObject) -> Void
    ) -> Subscription {
        if replay { return _addReplaying(_mainActorEntry(handler), PostObject.self, to: _NameKey(name)) }
        return _add(_mainActorEntry(handler), to: _NameKey(name))
    }

    /// Subscribes a `@MainActor` handler to every post of `topic`; see ``MainActorDelivery``.
    /// With `replay: true` the retained post of the name, if it is a `Payload`, comes first.
    public func subscribe<Payload>(
        _ topic: Topic<Payload>, delivery: MainActorDelivery, replay: Bool = false,
        handler: @escaping @MainActor (Payload) -> Void
    ) -> Subscription {
        if replay { return _addReplaying(_mainActorEntry(handler), Payload.self, to: topic._key) }
        return _add(_mainActorEntry(handler), to: topic._key)
    }

    /// Registers a `@MainActor` observer's method for `name`, holding the observer weakly; the
    /// method runs on the main actor (see ``MainActorDelivery``).
    ///
    /// ```swift
    /// token = center.register("login", observer: self, delivery: .mainActor, selector: Screen.didLogin)
    /// ```
    ///
    /// With `replay: true` the name's retained post, if any, comes first.
    public func register<Observer: AnyObject>(
        _ name: String, observer: Observer, delivery: MainActorDelivery, replay: Bool = false,
        selector: @escaping @MainActor (Observer) -> (PostObject) -> Void
    ) -> Subscription {
        let entry = _mainActorObserverEntry(observer, selector)
        if replay { return _addReplaying(entry, PostObject.self, to: _NameKey(name)) }
        return _add(entry, to: _NameKey(name))
    }

    /// Registers a `@MainActor` observer's method for `topic`, holding the observer weakly.
    /// With `replay: true` the retained post of the name, if it is a `Payload`, comes first.
    public func register<Observer: AnyObject, Payload>(
        _ topic: Topic<Payload>, observer: Observer, delivery: MainActorDelivery, replay: Bool = false,
        selector: @escaping @MainActor (Observer) -> (Payload) -> Void
    ) -> Subscription {
        let entry = _mainActorObserverEntry(observer, selector)
        if replay { return _addReplaying(entry, Payload.self, to: topic._key) }
        return _add(entry, to: topic._key)
    }

    func _mainActorEntry<Payload>(_ handler: @escaping @MainActor (Payload) -> Void) -> _Entry {
        _Slow<Payload>(executor: .mainActor, once: false, observer: nil, sender: nil, tracker: _deliveries) {
            _, payload in
            let box = _UncheckedSendable(payload)
            MainActor.assumeIsolated { handler(box.value) }
            return true
        }
    }

    func _mainActorObserverEntry<Observer: AnyObject, Payload>(
        _ observer: Observer, _ selector: @escaping @MainActor (Observer) -> (Payload) -> Void
    ) -> _Entry {
        _Slow<Payload>(executor: .mainActor, once: false, observer: observer, sender: nil, tracker: _deliveries) {
            target, payload in
            guard let target else { return false }
            let box = _UncheckedSendable((unsafeDowncast(target, to: Observer.self), payload))
            MainActor.assumeIsolated { selector(box.value.0)(box.value.1) }
            return true
        }
    }
}
