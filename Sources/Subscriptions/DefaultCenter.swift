/// One-line call sites for ``PostCenter/default``, without global functions.
///
/// Each static method forwards to the same instance method of `PostCenter.default`, with the same
/// parameters, guarantees and cost:
///
/// ```swift
/// let token = PostCenter.subscribe("login") { post in print(post.flag) }
/// PostCenter.post("login", flag: "sso", data: user)
/// PostCenter.post(.login, user)                       // typed topic
/// ```
///
/// Static and instance methods share their names without ambiguity: `PostCenter.post(…)` (on the
/// type) always means the default center, `center.post(…)` (on a value) always means `center`.
/// Inside your own `extension PostCenter`, an unqualified `post(…)` means `self` in an instance
/// method and the default center in a static one.
/// Prefer an injected `PostCenter` in code you want to test in isolation; the statics suit app
/// code and scripts that use one process-wide center.
extension PostCenter {
    // MARK: Plain names

    /// Subscribes `handler` to every post of `name` on ``default``.
    ///
    /// Same as `PostCenter.default.subscribe(name, delivery: delivery, handler: handler)`.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - delivery: Where the handler runs; ``Delivery/immediate`` by default.
    ///   - replay: When `true`, the name's retained post, if any, comes first, as for the
    ///     instance method.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called with the post's envelope.
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread.
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public static func subscribe(
        _ name: String, delivery: Delivery = .immediate, replay: Bool = false, fileID: String = #fileID,
        line: Int = #line,
        handler: @escaping @Sendable (PostObject) -> Void
    ) -> Subscription {
        PostCenter.default.subscribe(
            name, delivery: delivery, replay: replay, fileID: fileID, line: line, handler: handler)
    }

    /// Subscribes a `@MainActor` handler to every post of `name` on ``default``; see
    /// ``MainActorDelivery``.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - delivery: `.mainActor`.
    ///   - replay: When `true`, the name's retained post, if any, comes first, as for the
    ///     instance method.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called on the main actor with the post's envelope.
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread.
    public static func subscribe(
        _ name: String, delivery: MainActorDelivery, replay: Bool = false, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @MainActor (PostObject) -> Void
    ) -> Subscription {
        PostCenter.default.subscribe(
            name, delivery: delivery, replay: replay, fileID: fileID, line: line, handler: handler)
    }

    /// Registers `observer` for `name` on ``default``, selector style, holding it weakly.
    ///
    /// Same as `PostCenter.default.register(name, observer: observer, delivery: delivery,
    /// selector: selector)`, including its warning about `@MainActor` observers.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: Where the method runs; ``Delivery/immediate`` by default.
    ///   - replay: When `true`, the name's retained post, if any, comes first, as for the
    ///     instance method.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public static func register<Observer: AnyObject>(
        _ name: String, observer: Observer, delivery: Delivery = .immediate, replay: Bool = false,
        fileID: String = #fileID,
        line: Int = #line, selector: @escaping (Observer) -> (PostObject) -> Void
    ) -> Subscription {
        PostCenter.default.register(
            name, observer: observer, delivery: delivery, replay: replay, fileID: fileID, line: line, selector: selector
        )
    }

    /// Registers a `@MainActor` observer's method for `name` on ``default``, holding the
    /// observer weakly; the method runs on the main actor.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: `.mainActor`.
    ///   - replay: When `true`, the name's retained post, if any, comes first, as for the
    ///     instance method.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    public static func register<Observer: AnyObject>(
        _ name: String, observer: Observer, delivery: MainActorDelivery, replay: Bool = false, fileID: String = #fileID,
        line: Int = #line, selector: @escaping @MainActor (Observer) -> (PostObject) -> Void
    ) -> Subscription {
        PostCenter.default.register(
            name, observer: observer, delivery: delivery, replay: replay, fileID: fileID, line: line, selector: selector
        )
    }

    /// Posts `object` to every subscription of `name` on ``default``.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread.
    @discardableResult
    public static func post(_ name: String, _ object: PostObject) -> Int {
        PostCenter.default.post(name, object)
    }

    /// Posts a new ``PostObject`` made of `flag` and `data` (held weakly) to every subscription
    /// of `name` on ``default``.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread.
    @discardableResult
    public static func post(_ name: String, flag: String = "", data: AnyObject? = nil) -> Int {
        PostCenter.default.post(name, flag: flag, data: data)
    }

    /// The posts of `name` on ``default`` as a single-consumer asynchronous sequence of
    /// envelopes; same as `PostCenter.default.posts(name, bufferingPolicy: bufferingPolicy)`,
    /// recording the caller's `fileID` and `line` (leave the defaults).
    public static func posts(
        _ name: String, bufferingPolicy: PostsBufferingPolicy = .unbounded, fileID: String = #fileID,
        line: Int = #line
    ) -> Posts<PostObject> {
        PostCenter.default.posts(name, bufferingPolicy: bufferingPolicy, fileID: fileID, line: line)
    }

    // MARK: Typed topics

    /// Subscribes `handler` to every post of `topic` on ``default``, on the posting thread;
    /// `Payload` need not be `Sendable`.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - delivery: ``ImmediateDelivery/immediate``, the default.
    ///   - replay: When `true`, the name's retained post, if any, comes first, as for the
    ///     instance method.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called with each payload.
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread.
    public static func subscribe<Payload>(
        _ topic: Topic<Payload>, delivery: ImmediateDelivery = .immediate, replay: Bool = false,
        fileID: String = #fileID,
        line: Int = #line, handler: @escaping @Sendable (Payload) -> Void
    ) -> Subscription {
        PostCenter.default.subscribe(
            topic, delivery: delivery, replay: replay, fileID: fileID, line: line, handler: handler)
    }

    /// Subscribes `handler` to every post of `topic` on ``default`` with any ``Delivery``; the
    /// payload may cross threads, so it must be `Sendable`.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - delivery: Where the handler runs.
    ///   - replay: When `true`, the name's retained post, if any, comes first, as for the
    ///     instance method.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called with each payload.
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread.
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public static func subscribe<Payload: Sendable>(
        _ topic: Topic<Payload>, delivery: Delivery, replay: Bool = false, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @Sendable (Payload) -> Void
    ) -> Subscription {
        PostCenter.default.subscribe(
            topic, delivery: delivery, replay: replay, fileID: fileID, line: line, handler: handler)
    }

    /// Subscribes a `@MainActor` handler to every post of `topic` on ``default``; see
    /// ``MainActorDelivery``.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - delivery: `.mainActor`.
    ///   - replay: When `true`, the name's retained post, if any, comes first, as for the
    ///     instance method.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - handler: Called on the main actor with each payload.
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread.
    public static func subscribe<Payload: Sendable>(
        _ topic: Topic<Payload>, delivery: MainActorDelivery, replay: Bool = false, fileID: String = #fileID,
        line: Int = #line,
        handler: @escaping @MainActor (Payload) -> Void
    ) -> Subscription {
        PostCenter.default.subscribe(
            topic, delivery: delivery, replay: replay, fileID: fileID, line: line, handler: handler)
    }

    /// Registers `observer` for `topic` on ``default``, selector style, holding it weakly, on the
    /// posting thread.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: ``ImmediateDelivery/immediate``, the default.
    ///   - replay: When `true`, the name's retained post, if any, comes first, as for the
    ///     instance method.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    public static func register<Observer: AnyObject, Payload>(
        _ topic: Topic<Payload>, observer: Observer, delivery: ImmediateDelivery = .immediate,
        replay: Bool = false, fileID: String = #fileID, line: Int = #line,
        selector: @escaping (Observer) -> (Payload) -> Void
    ) -> Subscription {
        PostCenter.default.register(
            topic, observer: observer, delivery: delivery, replay: replay, fileID: fileID, line: line,
            selector: selector)
    }

    /// Registers `observer` for `topic` on ``default``, selector style, holding it weakly, with
    /// any ``Delivery``; the payload must be `Sendable`, since a `.queue` delivery hands it to the
    /// queue's thread.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: Where the method runs.
    ///   - replay: When `true`, the name's retained post, if any, comes first, as for the
    ///     instance method.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public static func register<Observer: AnyObject, Payload: Sendable>(
        _ topic: Topic<Payload>, observer: Observer, delivery: Delivery, replay: Bool = false, fileID: String = #fileID,
        line: Int = #line, selector: @escaping (Observer) -> (Payload) -> Void
    ) -> Subscription {
        PostCenter.default.register(
            topic, observer: observer, delivery: delivery, replay: replay, fileID: fileID, line: line,
            selector: selector)
    }

    /// Registers a `@MainActor` observer's method for `topic` on ``default``, holding the
    /// observer weakly; the method runs on the main actor.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: `.mainActor`.
    ///   - replay: When `true`, the name's retained post, if any, comes first, as for the
    ///     instance method.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    public static func register<Observer: AnyObject, Payload: Sendable>(
        _ topic: Topic<Payload>, observer: Observer, delivery: MainActorDelivery, replay: Bool = false,
        fileID: String = #fileID,
        line: Int = #line, selector: @escaping @MainActor (Observer) -> (Payload) -> Void
    ) -> Subscription {
        PostCenter.default.register(
            topic, observer: observer, delivery: delivery, replay: replay, fileID: fileID, line: line,
            selector: selector)
    }

    /// Posts `payload` to every subscription of `topic` on ``default``.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread.
    @discardableResult
    public static func post<Payload>(_ topic: Topic<Payload>, _ payload: Payload) -> Int {
        PostCenter.default.post(topic, payload)
    }

    /// Posts to a topic without a payload on ``default``: `PostCenter.post(.logout)`.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread.
    @discardableResult
    public static func post(_ topic: Topic<Void>) -> Int {
        PostCenter.default.post(topic)
    }

    /// The posts of `topic` on ``default`` as a single-consumer asynchronous sequence of
    /// payloads; same as `PostCenter.default.posts(topic, bufferingPolicy: bufferingPolicy)`,
    /// recording the caller's `fileID` and `line` (leave the defaults). `Payload` must be
    /// `Sendable`: the posting thread buffers it and the iterating task takes it.
    public static func posts<Payload: Sendable>(
        _ topic: Topic<Payload>, bufferingPolicy: PostsBufferingPolicy = .unbounded, fileID: String = #fileID,
        line: Int = #line
    ) -> Posts<Payload> {
        PostCenter.default.posts(topic, bufferingPolicy: bufferingPolicy, fileID: fileID, line: line)
    }
}
