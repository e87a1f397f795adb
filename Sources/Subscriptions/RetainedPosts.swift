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
    /// Delivery is exactly that of `post(_:_:from:)`. With `retain: false`
    /// the post is a plain `post(topic, payload, from: sender)` and leaves the retained post alone.
    ///
    /// The retained post keeps its sender, weakly: `subscribe(topic, from: sender, replay: true)`
    /// replays it only while `sender` is alive and is the object it was posted `from:`;
    /// `subscribe(topic, replay: true)` replays it whoever sent it (or none).
    ///
    /// ```swift
    /// center.post(.battery, 80, from: phone, retain: true)
    /// center.subscribe(.battery, from: phone, replay: true) { level in print(level) }   // prints 80
    /// center.subscribe(.battery, from: watch, replay: true) { level in print(level) }   // prints nothing yet
    /// ```
    ///
    /// `Payload` must be `Sendable` (a plain `post(_:_:)` need not): a retained payload may be
    /// replayed later on another thread, to whichever thread subscribes with `replay: true`, or
    /// to that subscription's queue.
    ///
    /// - Parameters:
    ///   - topic: The topic to post.
    ///   - payload: The value every matching subscriber is handed, and kept with `retain: true`.
    ///   - sender: Who posts, for subscriptions made `from:` it; kept weakly with the retained post.
    ///   - retain: Whether to keep the post as the name's retained post.
    /// - Lifetime: the center holds the retained payload strongly until it is replaced or
    ///   cleared with ``clearRetained(_:)-(Topic<Payload>)``; the name's entry stays in the
    ///   center's table until then. The sender is never kept alive by it.
    /// - Threading: safe from any thread. A subscription with `replay: true` made concurrently
    ///   gets this payload either replayed or live, never both and never before an older one.
    /// - Returns: How many handlers ran or were scheduled.
    /// - Complexity: O(subscribers of the name), plus one lock acquisition and one envelope
    ///   allocation when retaining; `post(_:_:)` without `retain:` pays nothing for this feature.
    @discardableResult
    public func post<Payload: Sendable>(
        _ topic: Topic<Payload>, _ payload: Payload, from sender: AnyObject? = nil, retain: Bool
    ) -> Int {
        guard retain else { return post(topic, payload, from: sender) }
        return _postRetained(topic._key, _RetainedPost(payload, sender: sender))
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
    /// `retain: false` this is `post(_:_:from:)` and leaves the retained post
    /// alone. The sender is kept weakly with the retained post, for replays to subscriptions
    /// made `from:` it; see ``post(_:_:from:retain:)-(Topic<Payload>,_,_,_)``.
    ///
    /// - Parameters:
    ///   - name: The name to post.
    ///   - object: The envelope every subscriber is handed, and kept with `retain: true`.
    ///   - sender: Who posts, for subscriptions made `from:` it; kept weakly with the retained post.
    ///   - retain: Whether to keep the post as the name's retained post.
    /// - Lifetime: the envelope is held until replaced or cleared with
    ///   ``clearRetained(_:)-(String)``; the name's entry stays in the center's table until then.
    /// - Threading: safe from any thread; see ``post(_:_:from:retain:)-(Topic<Payload>,_,_,_)``.
    /// - Returns: How many handlers ran or were scheduled.
    @discardableResult
    public func post(_ name: String, _ object: PostObject, from sender: AnyObject? = nil, retain: Bool) -> Int {
        guard retain else { return post(name, object, from: sender) }
        return _postRetained(_NameKey(name), _RetainedPost(object, sender: sender))
    }

    /// Posts a new ``PostObject`` made of `flag` and `data` to every subscription of `name` and,
    /// with `retain: true`, keeps it as the name's retained post, with its sender (held weakly);
    /// see ``post(_:_:from:retain:)-(String,PostObject,_,_)``.
    ///
    /// - Parameters:
    ///   - name: The name to post.
    ///   - flag: The envelope's ``PostObject/flag``; empty by default.
    ///   - data: The envelope's ``PostObject/data``, held weakly; `nil` by default.
    ///   - sender: Who posts, for subscriptions made `from:` it; kept weakly with the retained post.
    ///   - retain: Whether to keep the post as the name's retained post.
    /// - Returns: How many handlers ran or were scheduled.
    /// - Threading: safe from any thread.
    @discardableResult
    public func post(
        _ name: String, flag: String = "", data: AnyObject? = nil, from sender: AnyObject? = nil, retain: Bool
    ) -> Int {
        post(name, PostObject(flag: flag, data: data), from: sender, retain: retain)
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
