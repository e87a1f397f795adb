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
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    public static func subscribe(
        _ name: String, delivery: Delivery = .immediate,
        handler: @escaping @Sendable (PostObject) -> Void
    ) -> Subscription {
        PostCenter.default.subscribe(name, delivery: delivery, handler: handler)
    }

    /// Registers `observer` for `name` on ``default``, selector style, holding it weakly.
    ///
    /// Same as `PostCenter.default.register(name, observer: observer, delivery: delivery,
    /// selector: selector)`.
    ///
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    public static func register<Observer: AnyObject>(
        _ name: String, observer: Observer, delivery: Delivery = .immediate,
        selector: @escaping (Observer) -> (PostObject) -> Void
    ) -> Subscription {
        PostCenter.default.register(name, observer: observer, delivery: delivery, selector: selector)
    }

    /// Posts `object` to every subscription of `name` on ``default``.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    @discardableResult
    public static func post(_ name: String, _ object: PostObject) -> Int {
        PostCenter.default.post(name, object)
    }

    /// Posts a new ``PostObject`` made of `flag` and `data` (held weakly) to every subscription
    /// of `name` on ``default``.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    @discardableResult
    public static func post(_ name: String, flag: String = "", data: AnyObject? = nil) -> Int {
        PostCenter.default.post(name, flag: flag, data: data)
    }

    /// The posts of `name` on ``default`` as a single-consumer asynchronous sequence of
    /// envelopes; same as `PostCenter.default.posts(name, bufferingPolicy: bufferingPolicy)`.
    public static func posts(
        _ name: String, bufferingPolicy: PostsBufferingPolicy = .unbounded
    ) -> Posts<PostObject> {
        PostCenter.default.posts(name, bufferingPolicy: bufferingPolicy)
    }

    // MARK: Typed topics

    /// Subscribes `handler` to every post of `topic` on ``default``.
    ///
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    public static func subscribe<Payload>(
        _ topic: Topic<Payload>, delivery: Delivery = .immediate,
        handler: @escaping @Sendable (Payload) -> Void
    ) -> Subscription {
        PostCenter.default.subscribe(topic, delivery: delivery, handler: handler)
    }

    /// Registers `observer` for `topic` on ``default``, selector style, holding it weakly.
    ///
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    public static func register<Observer: AnyObject, Payload>(
        _ topic: Topic<Payload>, observer: Observer, delivery: Delivery = .immediate,
        selector: @escaping (Observer) -> (Payload) -> Void
    ) -> Subscription {
        PostCenter.default.register(topic, observer: observer, delivery: delivery, selector: selector)
    }

    /// Posts `payload` to every subscription of `topic` on ``default``.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    @discardableResult
    public static func post<Payload>(_ topic: Topic<Payload>, _ payload: Payload) -> Int {
        PostCenter.default.post(topic, payload)
    }

    /// The posts of `topic` on ``default`` as a single-consumer asynchronous sequence of
    /// payloads; same as `PostCenter.default.posts(topic, bufferingPolicy: bufferingPolicy)`.
    public static func posts<Payload: Sendable>(
        _ topic: Topic<Payload>, bufferingPolicy: PostsBufferingPolicy = .unbounded
    ) -> Posts<Payload> {
        PostCenter.default.posts(topic, bufferingPolicy: bufferingPolicy)
    }
}
