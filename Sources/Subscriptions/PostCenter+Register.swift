/// Registering an observer's method, selector style: `register("login", observer: self,
/// selector: Screen.didLogin)`. The center holds the observer weakly and calls the method on it.
///
/// The `delivery:` and `replay:` axes are those of `subscribe`; `delivery: .mainActor` takes a
/// `@MainActor` method (in `PostCenter+MainActor.swift`).
extension PostCenter {
    /// Registers `observer` for `name`, selector style: each post calls
    /// `selector(observer)(post)`, for example `Screen.didLogin`.
    ///
    /// The center holds `observer` weakly. Once it deallocates the registration stops: it is not
    /// called, not counted by ``subscriptionCount(for:)``, and its token reports `isActive == false`.
    /// ``removeObserver(_:)`` ends it too.
    ///
    /// ```swift
    /// token = center.register("login", observer: self, selector: Screen.didLogin)
    /// ```
    ///
    /// > Warning: For a `@MainActor` observer, pass `delivery: .mainActor`. The compiler cannot
    /// > catch its absence: an unapplied method reference such as `Screen.didLogin` loses its
    /// > actor isolation, and a post from another thread would call the method off the main
    /// > actor. Write `center.register("login", observer: self, delivery: .mainActor,
    /// > selector: Screen.didLogin)`.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>; `fileID:` and `line:` record the caller, see
    /// <doc:CallSites>.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: Where the method runs; ``Delivery/immediate`` by default.
    ///   - replay: When `true`, the observer first gets the name's retained post, if any.
    ///   - priority: Where the handler runs among the name\'s handlers: higher first; equal
    ///     priorities in subscription order. Default 0.
    ///   - fileID: The caller's file, recorded for diagnostics; leave the default.
    ///   - line: The caller's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    ///     It may throw; the post then goes on with the next handler, and the error is reported as
    ///     `handlerThrew` (Guarantees, "Handlers that throw").
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    /// - Complexity: amortised O(1).
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public func register<Observer: AnyObject>(
        _ name: String, observer: Observer, delivery: Delivery = .immediate, replay: Bool = false,
        priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        selector: @escaping (Observer) -> (PostObject) throws -> Void
    ) -> Subscription {
        let entry = _observerEntry(observer, delivery._executor, pacing: delivery._pacing(), replay: replay, selector)
        return _add(entry, to: _NameKey(name), fileID, line, priority)
    }

    /// Registers `observer` for `topic`, selector style, holding it weakly, on the posting thread;
    /// `Payload` need not be `Sendable`.
    ///
    /// The rules are those of the `register` of a plain name, including the warning about
    /// `@MainActor` observers.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: ``ImmediateDelivery/immediate``, the default.
    ///   - replay: When `true`, the observer first gets the name's retained post, if any and if it
    ///     is a `Payload`.
    ///   - priority: Where the handler runs among the name\'s handlers: higher first; equal
    ///     priorities in subscription order. Default 0.
    ///   - fileID: The caller's file, recorded for diagnostics; leave the default.
    ///   - line: The caller's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    ///     It may throw; the post then goes on with the next handler, and the error is reported as
    ///     `handlerThrew` (Guarantees, "Handlers that throw").
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    public func register<Observer: AnyObject, Payload>(
        _ topic: Topic<Payload>, observer: Observer, delivery: ImmediateDelivery = .immediate,
        replay: Bool = false, priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        selector: @escaping (Observer) -> (Payload) throws -> Void
    ) -> Subscription {
        let entry = _observerEntry(observer, .immediate, replay: replay, selector)
        return _add(entry, to: topic._key, fileID, line, priority)
    }

    /// Registers `observer` for `topic`, selector style, holding it weakly, with any
    /// ``Delivery``; the payload may cross threads, so it must be `Sendable`.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - observer: The object whose method is called. Held weakly.
    ///   - delivery: Where the method runs.
    ///   - replay: When `true`, the observer first gets the name's retained post, if any and if it
    ///     is a `Payload`.
    ///   - priority: Where the handler runs among the name\'s handlers: higher first; equal
    ///     priorities in subscription order. Default 0.
    ///   - fileID: The caller's file, recorded for diagnostics; leave the default.
    ///   - line: The caller's line; leave the default.
    ///   - selector: The method, as an unapplied reference such as `Screen.didLogin`.
    ///     It may throw; the post then goes on with the next handler, and the error is reported as
    ///     `handlerThrew` (Guarantees, "Handlers that throw").
    /// - Returns: The token that keeps the registration alive. Store it in the observer.
    /// - Threading: safe from any thread.
    @_disfavoredOverload  // so that a literal `.mainActor` picks the `@MainActor` overload
    public func register<Observer: AnyObject, Payload: Sendable>(
        _ topic: Topic<Payload>, observer: Observer, delivery: Delivery, replay: Bool = false,
        priority: Int = 0, fileID: String = #fileID, line: Int = #line,
        selector: @escaping (Observer) -> (Payload) throws -> Void
    ) -> Subscription {
        let entry = _observerEntry(observer, delivery._executor, pacing: delivery._pacing(), replay: replay, selector)
        return _add(entry, to: topic._key, fileID, line, priority)
    }
}
