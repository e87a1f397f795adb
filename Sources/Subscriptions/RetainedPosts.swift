/// Retained posts: the latest post of a name, kept for subscribers that come later (see
/// <doc:RetainedPosts>).
extension PostCenter {
    // MARK: Posting

    /// Posts `payload` to every subscription of `topic`'s name and, with `retain: true`, keeps it
    /// as the name's retained post, replacing the previous one.
    ///
    /// ```swift
    /// center.post(.battery, 80, retain: true)     // delivered as usual, and kept
    /// center.retained(.battery)                   // 80
    /// center.subscribe(.battery, replay: true) { level in print(level) }   // prints 80 at once
    /// ```
    ///
    /// Delivery is exactly that of `post(_:_:)`. With `retain: false`
    /// the post is a plain `post(topic, payload)` and leaves the retained post alone.
    ///
    /// `Payload` must be `Sendable` (a plain `post(_:_:)` need not): a retained payload may be
    /// replayed later on another thread, to whichever thread subscribes with `replay: true`, or
    /// to that subscription's queue.
    ///
    /// - Lifetime: the center holds the retained payload strongly until it is replaced or
    ///   cleared with ``clearRetained(_:)-(Topic<Payload>)``; the name's entry stays in the
    ///   center's table until then.
    /// - Threading: safe from any thread. A subscription with `replay: true` made concurrently
    ///   gets this payload either replayed or live, never both and never before an older one.
    /// - Returns: How many handlers ran or were scheduled.
    /// - Complexity: O(subscribers of the name), plus one lock acquisition and one envelope
    ///   allocation when retaining; `post(_:_:)` without `retain:` pays nothing for this feature.
    @discardableResult
    public func post<Payload: Sendable>(_ topic: Topic<Payload>, _ payload: Payload, retain: Bool) -> Int {
        guard retain else { return post(topic, payload) }
        return _postRetained(topic._key, _RetainedPost(payload))
    }

    /// Posts `object` to every subscription of `name` and, with `retain: true`, keeps it as the
    /// name's retained post, replacing the previous one.
    ///
    /// ```swift
    /// center.post("theme", PostObject(flag: "dark"), retain: true)
    /// center.retained("theme")?.flag              // "dark"
    /// ```
    ///
    /// The center keeps the envelope itself; its ``PostObject/data`` stays weak as always, so a
    /// replayed envelope reads `nil` data once the poster let the object go. With
    /// `retain: false` this is `post(_:_:)` and leaves the retained post
    /// alone.
    ///
    /// - Lifetime: the envelope is held until replaced or cleared with
    ///   ``clearRetained(_:)-(String)``; the name's entry stays in the center's table until then.
    /// - Threading: safe from any thread; see ``post(_:_:retain:)-(Topic<Payload>,_,_)``.
    /// - Returns: How many handlers ran or were scheduled.
    @discardableResult
    public func post(_ name: String, _ object: PostObject, retain: Bool) -> Int {
        guard retain else { return post(name, object) }
        return _postRetained(_NameKey(name), _RetainedPost(object))
    }

    /// Posts a new ``PostObject`` made of `flag` and `data` to every subscription of `name` and,
    /// with `retain: true`, keeps it as the name's retained post; see
    /// ``post(_:_:retain:)-(String,PostObject,_)``.
    ///
    /// - Returns: How many handlers ran or were scheduled.
    @discardableResult
    public func post(_ name: String, flag: String = "", data: AnyObject? = nil, retain: Bool) -> Int {
        post(name, PostObject(flag: flag, data: data), retain: retain)
    }

    // MARK: Reading and clearing

    /// The payload of the retained post of `topic`'s name, or `nil` when there is none or it is
    /// not a `Payload`.
    ///
    /// - Threading: safe from any thread; the answer can change right after it is read.
    /// - Complexity: one lock acquisition and one hash lookup.
    public func retained<Payload>(_ topic: Topic<Payload>) -> Payload? {
        _retainedRecord(topic.name)?.payload(as: Payload.self)
    }

    /// The retained post of `name` as an envelope, or `nil` when there is none. A typed retained
    /// payload is read with ``PostObject/payload(as:)``.
    ///
    /// - Threading: safe from any thread; the answer can change right after it is read.
    public func retained(_ name: String) -> PostObject? {
        _retainedRecord(name)?.envelope
    }

    /// Forgets the retained post of `topic`'s name (whatever its payload type), releasing it,
    /// and removes the name's entry from the retained table. Later `replay: true` subscriptions
    /// get only live posts until something is retained again.
    ///
    /// - Threading: safe from any thread. The payload is released after the center's lock.
    public func clearRetained<Payload>(_ topic: Topic<Payload>) {
        _clearRetained(topic.name)
    }

    /// Forgets the retained post of `name`, releasing it; see
    /// ``clearRetained(_:)-(Topic<Payload>)``.
    public func clearRetained(_ name: String) {
        _clearRetained(name)
    }
}
