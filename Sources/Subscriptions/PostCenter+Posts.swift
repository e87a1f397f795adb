/// Posts as asynchronous sequences: `for await user in center.posts(.login) { … }`.
///
/// The axes are those of `subscribe` (a name or a topic, `from:`, `replay:`), with a buffering
/// policy in place of a delivery: the sequence's consumer decides when it reads.
extension PostCenter {
    /// The posts of `topic` as an asynchronous sequence of payloads.
    ///
    /// ```swift
    /// for await user in center.posts(.login) {
    ///     print("welcome", user.name)
    /// }
    /// ```
    ///
    /// The subscription starts when this method returns, not when the loop starts: posts made
    /// between the call and the first `next()` are buffered (by `bufferingPolicy`) and yielded
    /// first. Create the sequence *before* handing it to the task that iterates it when no post
    /// may be missed. Payloads are yielded in post order (the order in which `post` calls reached
    /// the center; posts from one thread keep that thread's order).
    ///
    /// The subscription ends, and the center forgets it at once, when
    /// - the loop ends (`break`, `return`, a thrown error): the iterator is destroyed;
    /// - the iterating task is cancelled: the loop gets `nil` and ends;
    /// - the sequence is dropped without ever being iterated.
    ///
    /// The sequence finishes when the center deinitialises: the loop gets the posts still
    /// buffered, then `nil`, as an `AsyncStream` does when its continuation goes away.
    ///
    /// While it lives the sequence counts as one subscriber of the name, in
    /// ``subscriptionCount(for:)`` and in the value `post` returns.
    ///
    /// `Payload` must be `Sendable`: the posting thread puts each payload in the buffer and the
    /// iterating task takes it out, usually on another thread.
    ///
    /// For `replay: true`, see <doc:RetainedPosts>; `fileID:` and `line:` record the caller, see
    /// <doc:CallSites>.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to. Like a `subscribe` of the topic, the sequence receives
    ///     every post of the topic's name whose payload is a `Payload`.
    ///   - sender: When given, only posts made `from:` this object are yielded. Held weakly: once
    ///     it deallocates, the sequence receives nothing more (it does not finish).
    ///   - bufferingPolicy: What to keep while the consumer is busy. By default every post
    ///     (``PostsBufferingPolicy/unbounded``), like `AsyncStream`. A bounded policy discards
    ///     posts when the consumer falls behind and reports how many through ``diagnostics``
    ///     (``Diagnostic/droppedPosts(name:count:)``). See ``PostsBufferingPolicy``.
    ///   - replay: When `true`, the sequence starts with the name's retained payload, if any and
    ///     if it is a `Payload`, then yields every later post, none
    ///     twice and none out of order; the retained payload is the first buffered element and
    ///     counts against `bufferingPolicy`. With `from:`, only a retained post made `from:` that
    ///     sender (still alive) is replayed.
    ///   - fileID: The caller's file, recorded for ``subscriptionSites(for:)`` and
    ///     ``Diagnostic/manySubscriptions(name:count:site:)``; leave the default.
    ///   - line: The caller's line; leave the default.
    /// - Returns: A single-consumer sequence: iterate it once, from one task.
    /// - Complexity: subscribing is amortised O(1); each post costs the sequence one lock
    ///   acquisition and no suspension of the poster.
    public func posts<Payload: Sendable>(
        _ topic: Topic<Payload>, from sender: AnyObject? = nil, bufferingPolicy: PostsBufferingPolicy = .unbounded,
        replay: Bool = false, fileID: String = #fileID, line: Int = #line
    ) -> Posts<Payload> {
        _posts(topic.name, bufferingPolicy) { buffer in
            self.subscribe(topic, from: sender, replay: replay, fileID: fileID, line: line) { buffer.push($0) }
        }
    }

    /// The posts of `name` as an asynchronous sequence of envelopes.
    ///
    /// ```swift
    /// for await post in center.posts("login") {
    ///     print("login via", post.flag)
    /// }
    /// ```
    ///
    /// Behaves like the topic variant: the subscription starts now, posts are yielded in post
    /// order, and it ends with the loop, with the iterating task's cancellation, or when the
    /// sequence is dropped unused. When the center deinitialises the sequence yields what it
    /// buffered, then finishes.
    ///
    /// > Warning: A ``PostObject`` holds its ``PostObject/data`` weakly, also while it waits in
    /// > the buffer. If the poster released the data object before the consumer gets to the
    /// > envelope, `data` reads `nil`. Keep the object alive for as long as consumers may need it,
    /// > or post a typed ``Topic`` whose value payload the sequence keeps.
    ///
    /// - Parameters:
    ///   - name: The name to listen to. Every post of the name is yielded, typed posts included
    ///     (their payload is read with ``PostObject/payload(as:)``).
    ///   - sender: When given, only posts made `from:` this object are yielded. Held weakly.
    ///   - bufferingPolicy: What to keep while the consumer is busy; every post by default. A
    ///     bounded policy reports what it discards through ``diagnostics``.
    ///   - replay: When `true`, the sequence starts with the name's retained post, if any (with
    ///     `from:`, only one posted `from:` that sender).
    ///   - fileID: The caller's file, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The caller's line; leave the default.
    /// - Returns: A single-consumer sequence: iterate it once, from one task.
    public func posts(
        _ name: String, from sender: AnyObject? = nil, bufferingPolicy: PostsBufferingPolicy = .unbounded,
        replay: Bool = false, fileID: String = #fileID, line: Int = #line
    ) -> Posts<PostObject> {
        _posts(name, bufferingPolicy) { buffer in
            self.subscribe(name, from: sender, replay: replay, fileID: fileID, line: line) { buffer.push($0) }
        }
    }

    /// Makes the buffer, subscribes it with `subscribe`, and lets the center finish it when the
    /// center deinitialises.
    func _posts<Element: Sendable>(
        _ name: String, _ policy: PostsBufferingPolicy, subscribe: (_PostsBuffer<Element>) -> Subscription
    ) -> Posts<Element> {
        let buffer = _PostsBuffer<Element>(policy: policy._checked(), name: name, center: self)
        let token = subscribe(buffer)
        _sequences.insert(buffer)
        return Posts(_source: _PostsSource(buffer: buffer, token: token))
    }
}
