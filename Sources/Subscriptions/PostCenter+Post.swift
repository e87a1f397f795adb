/// Posting. Every `post` takes an optional `from:` sender, which reaches the subscriptions
/// filtered on it as well as every unfiltered one. Retaining posts is in `RetainedPosts.swift`.
extension PostCenter {
    /// Posts `object` to every subscription of `name`.
    ///
    /// ``Delivery/immediate`` handlers run on the calling thread before `post` returns; queued
    /// ones are scheduled. Topic subscribers of `name` receive the post when `object.data` is of
    /// their payload type.
    ///
    /// - Parameters:
    ///   - name: The name to post.
    ///   - object: The envelope every subscriber is handed.
    ///   - sender: Who posts, for subscriptions made `from:` it; `nil` (the default) reaches
    ///     only subscriptions without a sender filter.
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread, also inside a handler (nested posts run depth-first).
    @discardableResult
    public func post(_ name: String, _ object: PostObject, from sender: AnyObject? = nil) -> Int {
        let key = _NameKey(name)
        let patterns = _patternState.load(ordering: .relaxed)  // read when the post starts
        if _slowPath(patterns != 0) {
            return _postWithPatterns(key, patterns, sender: sender) { object }
        }
        return _heard(_post(key, sender: sender) { object }, key)
    }

    /// Posts a new ``PostObject`` made of `flag` and `data` to every subscription of `name`.
    ///
    /// - Parameters:
    ///   - name: The name to post.
    ///   - flag: The envelope's ``PostObject/flag``; empty by default.
    ///   - data: The envelope's ``PostObject/data``, held weakly; `nil` by default.
    ///   - sender: Who posts, for subscriptions made `from:` it.
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public func post(_ name: String, flag: String = "", data: AnyObject? = nil, from sender: AnyObject? = nil) -> Int {
        let key = _NameKey(name)
        let patterns = _patternState.load(ordering: .relaxed)  // read when the post starts
        if _slowPath(patterns != 0) {
            return _postWithPatterns(key, patterns, sender: sender) { PostObject(flag: flag, data: data) }
        }
        return _heard(_post(key, sender: sender) { PostObject(flag: flag, data: data) }, key)
    }

    /// Posts `payload` to every subscription of `topic`'s name.
    ///
    /// Topic subscribers whose payload type matches receive `payload`; plain subscribers of the
    /// name receive a ``PostObject`` whose ``PostObject/payload(as:)`` returns it.
    ///
    /// - Parameters:
    ///   - topic: The topic to post.
    ///   - payload: The value every matching subscriber is handed.
    ///   - sender: Who posts, for subscriptions made `from:` it.
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public func post<Payload: Sendable>(_ topic: Topic<Payload>, _ payload: Payload, from sender: AnyObject? = nil)
        -> Int
    {
        let patterns = _patternState.load(ordering: .relaxed)  // read when the post starts
        if _slowPath(patterns != 0) {
            return _postWithPatterns(topic, payload, sendable: true, patterns, sender: sender)
        }
        return _heard(
            _post(
                topic._key, payload, direct: topic._direct, main: topic._mainDirect, envelope: topic._envelope,
                sender: sender), topic._key)
    }

    /// Posts a payload that is not `Sendable` to a topic.
    ///
    /// The payload stays on the posting thread: typed subscribers of `Payload` (which only
    /// immediate delivery allows for a non-`Sendable` payload) receive it, and plain subscribers
    /// of the name receive a ``PostObject`` that withholds it from ``PostObject/data`` and
    /// ``PostObject/payload(as:)``; ``PostObject/unsafePayload(as:)`` reads it, where the reader
    /// vouches that it is safe (on the posting thread, in an immediate handler). Typed
    /// subscribers of the name with another payload type receive nothing of it. Everything else
    /// is as the `Sendable` form.
    ///
    /// - Parameters:
    ///   - topic: The topic to post.
    ///   - payload: The value every matching subscriber is handed.
    ///   - sender: Who posts, for subscriptions made `from:` it.
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public func post<Payload>(_ topic: Topic<Payload>, _ payload: Payload, from sender: AnyObject? = nil) -> Int {
        let patterns = _patternState.load(ordering: .relaxed)  // read when the post starts
        if _slowPath(patterns != 0) {
            return _postWithPatterns(topic, payload, sendable: false, patterns, sender: sender)
        }
        return _heard(
            _post(
                topic._key, payload, direct: topic._direct, main: topic._mainDirect, envelope: topic._envelope,
                sendable: false, sender: sender), topic._key)
    }

    /// Posts to a topic without a payload: `center.post(.logout)` for a `Topic<Void>`.
    ///
    /// - Parameters:
    ///   - topic: The topic to post.
    ///   - sender: Who posts, for subscriptions made `from:` it.
    /// - Returns: How many handlers ran or were scheduled; 0 when nobody listens.
    /// - Threading: safe from any thread, also inside a handler.
    @discardableResult
    public func post(_ topic: Topic<Void>, from sender: AnyObject? = nil) -> Int {
        let patterns = _patternState.load(ordering: .relaxed)  // read when the post starts
        if _slowPath(patterns != 0) {
            return _postWithPatterns(topic, (), sendable: true, patterns, sender: sender)
        }
        return _heard(
            _post(
                topic._key, (), direct: topic._direct, main: topic._mainDirect, envelope: false, sender: sender),
            topic._key)
    }
}
