/// One-line call sites for ``PostCenter/default``, without global functions.
///
/// Each static method forwards to the instance method of `PostCenter.default` with the same name
/// and parameters, so it has the same guarantees and cost:
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
    // MARK: Subscribing

    /// `PostCenter.default.subscribe(name, …)`: subscribes `handler` to the posts of `name` on
    /// ``default``.
    ///
    /// Takes the parameters of the instance method, with the same defaults and rules; `fileID`
    /// and `line` record the caller (see <doc:CallSites>).
    ///
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread.
    public static func subscribe(
        _ name: String, from sender: AnyObject? = nil, delivery: Delivery = .immediate, replay: Bool = false,
        once: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @Sendable (PostObject) throws -> Void
    ) -> Subscription {
        PostCenter.default.subscribe(
            name, from: sender, delivery: delivery, replay: replay, once: once, priority: priority, fileID: fileID,
            line: line, handler: handler)
    }

    /// `PostCenter.default.subscribe(name, delivery: .mainActor, …)`: subscribes a `@MainActor`
    /// handler to the posts of `name` on ``default``.
    ///
    /// Takes the parameters of the instance method, with the same defaults and rules; `fileID`
    /// and `line` record the caller (see <doc:CallSites>).
    ///
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread.
    public static func subscribe(
        _ name: String, from sender: AnyObject? = nil, delivery: MainActorDelivery, replay: Bool = false,
        once: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @MainActor (PostObject) throws -> Void
    ) -> Subscription {
        PostCenter.default.subscribe(
            name, from: sender, delivery: delivery, replay: replay, once: once, priority: priority, fileID: fileID,
            line: line, handler: handler)
    }

    /// `PostCenter.default.subscribe(topic, …)`: subscribes `handler` to the posts of `topic` on
    /// ``default``, on the posting thread; `Payload` need not be `Sendable`.
    ///
    /// Takes the parameters of the instance method, with the same defaults and rules; `fileID`
    /// and `line` record the caller (see <doc:CallSites>).
    ///
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread.
    public static func subscribe<Payload>(
        _ topic: Topic<Payload>, from sender: AnyObject? = nil, delivery: ImmediateDelivery = .immediate,
        replay: Bool = false, once: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @Sendable (Payload) throws -> Void
    ) -> Subscription {
        PostCenter.default.subscribe(
            topic, from: sender, delivery: delivery, replay: replay, once: once, priority: priority, fileID: fileID,
            line: line, handler: handler)
    }

    /// `PostCenter.default.subscribe(topic, delivery: delivery, …)`: subscribes `handler` to the
    /// posts of `topic` on ``default``, with any ``Delivery``; the payload is `Sendable`.
    ///
    /// Takes the parameters of the instance method, with the same defaults and rules; `fileID`
    /// and `line` record the caller (see <doc:CallSites>).
    ///
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread.
    public static func subscribe<Payload: Sendable>(
        _ topic: Topic<Payload>, from sender: AnyObject? = nil, delivery: Delivery, replay: Bool = false,
        once: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @Sendable (Payload) throws -> Void
    ) -> Subscription {
        PostCenter.default.subscribe(
            topic, from: sender, delivery: delivery, replay: replay, once: once, priority: priority, fileID: fileID,
            line: line, handler: handler)
    }

    /// `PostCenter.default.subscribe(topic, delivery: .mainActor, …)`: subscribes a
    /// `@MainActor` handler to the posts of `topic` on ``default``.
    ///
    /// Takes the parameters of the instance method, with the same defaults and rules; `fileID`
    /// and `line` record the caller (see <doc:CallSites>).
    ///
    /// - Returns: The token that keeps the subscription alive. Dropping it cancels at once.
    /// - Threading: safe from any thread.
    public static func subscribe<Payload: Sendable>(
        _ topic: Topic<Payload>, from sender: AnyObject? = nil, delivery: MainActorDelivery, replay: Bool = false,
        once: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        handler: @escaping @MainActor (Payload) throws -> Void
    ) -> Subscription {
        PostCenter.default.subscribe(
            topic, from: sender, delivery: delivery, replay: replay, once: once, priority: priority, fileID: fileID,
            line: line, handler: handler)
    }

    // MARK: Registering

    /// `PostCenter.default.register(name, observer: observer, …)`: registers `observer` for
    /// `name` on ``default``, selector style, holding it weakly; the instance method's warning
    /// about `@MainActor` observers applies.
    ///
    /// Takes the parameters of the instance method, with the same defaults and rules; `fileID`
    /// and `line` record the caller (see <doc:CallSites>).
    ///
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    public static func register<Observer: AnyObject>(
        _ name: String, observer: Observer, delivery: Delivery = .immediate, replay: Bool = false,
        priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        selector: @escaping (Observer) -> (PostObject) throws -> Void
    ) -> Subscription {
        PostCenter.default.register(
            name, observer: observer, delivery: delivery, replay: replay, priority: priority, fileID: fileID,
            line: line,
            selector: selector)
    }

    /// `PostCenter.default.register(name, observer: observer, delivery: .mainActor, …)`:
    /// registers a `@MainActor` observer's method for `name` on ``default``.
    ///
    /// Takes the parameters of the instance method, with the same defaults and rules; `fileID`
    /// and `line` record the caller (see <doc:CallSites>).
    ///
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    public static func register<Observer: AnyObject>(
        _ name: String, observer: Observer, delivery: MainActorDelivery, replay: Bool = false,
        priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        selector: @escaping @MainActor (Observer) -> (PostObject) throws -> Void
    ) -> Subscription {
        PostCenter.default.register(
            name, observer: observer, delivery: delivery, replay: replay, priority: priority, fileID: fileID,
            line: line,
            selector: selector)
    }

    /// `PostCenter.default.register(topic, observer: observer, …)`: registers `observer` for
    /// `topic` on ``default``, on the posting thread; `Payload` need not be `Sendable`.
    ///
    /// Takes the parameters of the instance method, with the same defaults and rules; `fileID`
    /// and `line` record the caller (see <doc:CallSites>).
    ///
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    public static func register<Observer: AnyObject, Payload>(
        _ topic: Topic<Payload>, observer: Observer, delivery: ImmediateDelivery = .immediate,
        replay: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        selector: @escaping (Observer) -> (Payload) throws -> Void
    ) -> Subscription {
        PostCenter.default.register(
            topic, observer: observer, delivery: delivery, replay: replay, priority: priority, fileID: fileID,
            line: line,
            selector: selector)
    }

    /// `PostCenter.default.register(topic, observer: observer, delivery: delivery, …)`: registers
    /// `observer` for `topic` on ``default`` with any ``Delivery``; the payload is `Sendable`.
    ///
    /// Takes the parameters of the instance method, with the same defaults and rules; `fileID`
    /// and `line` record the caller (see <doc:CallSites>).
    ///
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    public static func register<Observer: AnyObject, Payload: Sendable>(
        _ topic: Topic<Payload>, observer: Observer, delivery: Delivery, replay: Bool = false,
        priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        selector: @escaping (Observer) -> (Payload) throws -> Void
    ) -> Subscription {
        PostCenter.default.register(
            topic, observer: observer, delivery: delivery, replay: replay, priority: priority, fileID: fileID,
            line: line,
            selector: selector)
    }

    /// `PostCenter.default.register(topic, observer: observer, delivery: .mainActor, …)`:
    /// registers a `@MainActor` observer's method for `topic` on ``default``.
    ///
    /// Takes the parameters of the instance method, with the same defaults and rules; `fileID`
    /// and `line` record the caller (see <doc:CallSites>).
    ///
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    public static func register<Observer: AnyObject, Payload: Sendable>(
        _ topic: Topic<Payload>, observer: Observer, delivery: MainActorDelivery, replay: Bool = false,
        priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        selector: @escaping @MainActor (Observer) -> (Payload) throws -> Void
    ) -> Subscription {
        PostCenter.default.register(
            topic, observer: observer, delivery: delivery, replay: replay, priority: priority, fileID: fileID,
            line: line,
            selector: selector)
    }

    // MARK: Posting

    /// `PostCenter.default.post(name, object, from: sender)`.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public static func post(_ name: String, _ object: PostObject, from sender: AnyObject? = nil) -> Int {
        PostCenter.default.post(name, object, from: sender)
    }

    /// `PostCenter.default.post(name, flag: flag, data: data, from: sender)`: posts a new
    /// ``PostObject`` (holding `data` weakly) on ``default``.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public static func post(
        _ name: String, flag: String = "", data: AnyObject? = nil, from sender: AnyObject? = nil
    ) -> Int {
        PostCenter.default.post(name, flag: flag, data: data, from: sender)
    }

    /// `PostCenter.default.post(topic, payload, from: sender)`.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public static func post<Payload: Sendable>(
        _ topic: Topic<Payload>, _ payload: Payload, from sender: AnyObject? = nil
    ) -> Int {
        PostCenter.default.post(topic, payload, from: sender)
    }

    /// `PostCenter.default.post(topic, payload, from: sender)` for a payload that is not
    /// `Sendable`: it stays on the posting thread (see the instance method).
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public static func post<Payload>(_ topic: Topic<Payload>, _ payload: Payload, from sender: AnyObject? = nil) -> Int
    {
        PostCenter.default.post(topic, payload, from: sender)
    }

    /// `PostCenter.default.post(topic, from: sender)`: posts to a topic without a payload on
    /// ``default``, as in `PostCenter.post(.logout)`.
    ///
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public static func post(_ topic: Topic<Void>, from sender: AnyObject? = nil) -> Int {
        PostCenter.default.post(topic, from: sender)
    }

    // MARK: Async sequences

    /// `PostCenter.default.posts(name, …)`: the posts of `name` on ``default`` as a
    /// single-consumer asynchronous sequence of envelopes.
    ///
    /// Takes the parameters of the instance method, with the same defaults and rules; `fileID`
    /// and `line` record the caller (see <doc:CallSites>).
    ///
    /// - Returns: A single-consumer sequence: iterate it once, from one task.
    public static func posts(
        _ name: String, from sender: AnyObject? = nil, bufferingPolicy: PostsBufferingPolicy = .unbounded,
        replay: Bool = false, fileID: String = #fileID, line: Int = #line
    ) -> Posts<PostObject> {
        PostCenter.default.posts(
            name, from: sender, bufferingPolicy: bufferingPolicy, replay: replay, fileID: fileID, line: line)
    }

    /// `PostCenter.default.posts(topic, …)`: the posts of `topic` on ``default`` as a
    /// single-consumer asynchronous sequence of payloads.
    ///
    /// Takes the parameters of the instance method, with the same defaults and rules; `fileID`
    /// and `line` record the caller (see <doc:CallSites>).
    ///
    /// - Returns: A single-consumer sequence: iterate it once, from one task.
    public static func posts<Payload: Sendable>(
        _ topic: Topic<Payload>, from sender: AnyObject? = nil, bufferingPolicy: PostsBufferingPolicy = .unbounded,
        replay: Bool = false, fileID: String = #fileID, line: Int = #line
    ) -> Posts<Payload> {
        PostCenter.default.posts(
            topic, from: sender, bufferingPolicy: bufferingPolicy, replay: replay, fileID: fileID, line: line)
    }
}
