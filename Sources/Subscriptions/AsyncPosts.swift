import Synchronization

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
    /// - Parameters:
    ///   - topic: The topic to listen to. Like a `subscribe(_:delivery:handler:)` of the topic,
    ///     the sequence receives every post of the topic's name whose payload is a `Payload`.
    ///   - bufferingPolicy: What to keep while the consumer is busy. By default every post
    ///     (``PostsBufferingPolicy/unbounded``), like `AsyncStream`. A bounded policy discards
    ///     posts when the consumer falls behind and reports how many through ``diagnostics``
    ///     (``Diagnostic/droppedPosts(name:count:)``). See ``PostsBufferingPolicy``.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)`` and
    ///     ``Diagnostic/manySubscriptions(name:count:site:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    /// - Returns: A single-consumer sequence: iterate it once, from one task.
    /// - Complexity: subscribing is amortised O(1); each post costs the sequence one lock
    ///   acquisition and no suspension of the poster.
    public func posts<Payload: Sendable>(
        _ topic: Topic<Payload>, bufferingPolicy: PostsBufferingPolicy = .unbounded, fileID: String = #fileID,
        line: Int = #line
    ) -> Posts<Payload> {
        _posts(topic.name, bufferingPolicy) { buffer in
            self.subscribe(topic, fileID: fileID, line: line) { buffer.push($0) }
        }
    }

    /// The posts of `topic` made `from: sender` as an asynchronous sequence of payloads, like
    /// `subscribe(_:from:delivery:handler:)` of a topic.
    ///
    /// The sender is held weakly: once it deallocates, the sequence receives nothing more (it
    /// does not finish). Posts made without a sender never match. Otherwise the sequence behaves
    /// like the one of `posts(_:bufferingPolicy:)` of a topic: it subscribes now,
    /// yields in post order, ends with the loop, the task's cancellation or the center.
    /// `Payload` must be `Sendable`, as there: the posting thread buffers it and the iterating
    /// task takes it.
    ///
    /// - Parameters:
    ///   - topic: The topic to listen to.
    ///   - sender: The only sender whose posts are yielded; held weakly.
    ///   - bufferingPolicy: What to keep while the consumer is busy; every post by default.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    /// - Returns: A single-consumer sequence: iterate it once, from one task.
    public func posts<Payload: Sendable>(
        _ topic: Topic<Payload>, from sender: AnyObject, bufferingPolicy: PostsBufferingPolicy = .unbounded,
        fileID: String = #fileID, line: Int = #line
    ) -> Posts<Payload> {
        _posts(topic.name, bufferingPolicy) { buffer in
            self.subscribe(topic, from: sender, fileID: fileID, line: line) { buffer.push($0) }
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
    /// Behaves like the topic variant, `posts(_:bufferingPolicy:)`: the subscription starts now,
    /// posts are yielded in post order, and it ends with the loop, with the iterating task's
    /// cancellation, or when the sequence is dropped unused. When the center deinitialises the
    /// sequence yields what it buffered, then finishes.
    ///
    /// > Warning: A ``PostObject`` holds its ``PostObject/data`` weakly, also while it waits in
    /// > the buffer. If the poster released the data object before the consumer gets to the
    /// > envelope, `data` reads `nil`. Keep the object alive for as long as consumers may need it,
    /// > or post a typed ``Topic`` whose value payload the sequence keeps.
    ///
    /// - Parameters:
    ///   - name: The name to listen to. Every post of the name is yielded, typed posts included
    ///     (their payload is read with ``PostObject/payload(as:)``).
    ///   - bufferingPolicy: What to keep while the consumer is busy; every post by default. A
    ///     bounded policy reports what it discards through ``diagnostics``.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    /// - Returns: A single-consumer sequence: iterate it once, from one task.
    public func posts(
        _ name: String, bufferingPolicy: PostsBufferingPolicy = .unbounded, fileID: String = #fileID,
        line: Int = #line
    ) -> Posts<PostObject> {
        _posts(name, bufferingPolicy) { buffer in self.subscribe(name, fileID: fileID, line: line) { buffer.push($0) } }
    }

    /// The posts of `name` made `from: sender` as an asynchronous sequence of envelopes, like
    /// `subscribe(_:from:delivery:handler:)` of a name.
    ///
    /// The sender is held weakly: once it deallocates, the sequence receives nothing more (it
    /// does not finish). Posts made without a sender never match. Otherwise the sequence behaves
    /// like the one of `posts(_:bufferingPolicy:)` of a name.
    ///
    /// - Parameters:
    ///   - name: The name to listen to.
    ///   - sender: The only sender whose posts are yielded; held weakly.
    ///   - bufferingPolicy: What to keep while the consumer is busy; every post by default.
    ///   - fileID: The call site, recorded for ``subscriptionSites(for:)``; leave the default.
    ///   - line: The call site's line; leave the default.
    /// - Returns: A single-consumer sequence: iterate it once, from one task.
    public func posts(
        _ name: String, from sender: AnyObject, bufferingPolicy: PostsBufferingPolicy = .unbounded,
        fileID: String = #fileID, line: Int = #line
    ) -> Posts<PostObject> {
        _posts(name, bufferingPolicy) { buffer in
            self.subscribe(name, from: sender, fileID: fileID, line: line) { buffer.push($0) }
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

/// How a ``Posts`` sequence keeps posts that arrive while its consumer is busy.
///
/// Posting never waits for the consumer. A post that arrives while the consumer is suspended in
/// `next()` is handed over at once and never counts against the limit; the policy only decides
/// what happens to posts that arrive while the consumer is doing something else (running the
/// loop body, or not iterating yet).
public enum PostsBufferingPolicy: Sendable, Hashable {
    /// Keeps every post: the default. Memory grows without bound if the consumer falls behind
    /// for good.
    case unbounded
    /// Keeps at most `limit` waiting posts, the newest ones: when a post arrives and `limit`
    /// posts already wait, the oldest waiting post is discarded. With a limit of 0, only posts
    /// that find the consumer suspended in `next()` are delivered.
    ///
    /// A consumer that falls behind sees the latest state, with a gap. What is discarded is
    /// reported through `PostCenter.diagnostics`, when set, as
    /// ``PostCenter/Diagnostic/droppedPosts(name:count:)``.
    case bufferingNewest(Int)
    /// Keeps at most `limit` waiting posts, the oldest ones: when `limit` posts already wait,
    /// a new post is discarded. What is discarded is reported through `PostCenter.diagnostics`,
    /// when set, as ``PostCenter/Diagnostic/droppedPosts(name:count:)``.
    case bufferingOldest(Int)

    /// Traps on a negative limit, naming the fix.
    func _checked() -> PostsBufferingPolicy {
        switch self {
        case .unbounded:
            break
        case .bufferingNewest(let limit), .bufferingOldest(let limit):
            if limit < 0 {
                // fatalError, not precondition: optimised builds drop a precondition's message.
                fatalError(
                    "PostsBufferingPolicy: the limit must be 0 or more, not \(limit). Use .unbounded to keep every post."
                )
            }
        }
        return self
    }
}

/// The posts of one name or topic, as an `AsyncSequence` with one consumer.
///
/// Made by `center.posts(topic)` (yielding payloads) and `center.posts(name)` (yielding
/// ``PostObject``s), or their static shorthands on `PostCenter`. The subscription is already
/// active when you hold a `Posts`; iterating it reads what was buffered since, then waits for new
/// posts. It finishes (after yielding what it buffered) when its center deinitialises; otherwise
/// it ends when the loop is left or its task is cancelled.
///
/// ```swift
/// let logins = center.posts(.login)          // subscribed from here on
/// let task = Task {
///     for await user in logins { print(user.name) }
/// }
/// center.post(.login, alice)                 // buffered until the task reaches the loop
/// ```
///
/// - Threading: the `Posts` value is `Sendable`: create it on one task and iterate it on
///   another. It has a **single consumer**: `makeAsyncIterator()` may be called once per sequence
///   (a second call traps with a message), and its iterator must not be used from two tasks at
///   once (calling `next()` while another `next()` waits traps too). For several consumers, call
///   `posts(_:)` once for each; every sequence receives every post.
/// - Lifetime: the sequence (until iterated) or its iterator (after) owns the subscription.
///   Destroying the iterator, by leaving the `for await` loop, cancels it at once, even while a
///   copy of the sequence is still around. Dropping every copy of a sequence that was never
///   iterated cancels it too. Posts still buffered at that point are released, never delivered.
///   When the center deinitialises, the sequence finishes: the posts still buffered are
///   yielded, then `next()` returns `nil`, whatever the buffering policy. The sequence never
///   keeps its center alive.
/// - Cancellation: when the iterating task is cancelled, `next()` returns `nil` at once (also
///   while suspended), buffered posts are discarded and the subscription is cancelled.
public struct Posts<Element: Sendable>: AsyncSequence, Sendable {
    /// A `Posts` sequence never throws.
    public typealias Failure = Never

    let _source: _PostsSource<Element>

    /// Creates the one iterator of this sequence and hands it the subscription.
    ///
    /// - Precondition: not called before on this sequence (or a copy of it). Each call of
    ///   `center.posts(_:bufferingPolicy:)` makes a sequence for one loop.
    public func makeAsyncIterator() -> Iterator {
        let (buffer, token) = _source.take()
        return Iterator(_consumer: _PostsConsumer(buffer: buffer, token: token))
    }

    /// The iterator of a ``Posts`` sequence: yields buffered posts, then waits for new ones.
    ///
    /// Owns the subscription: when the iterator is destroyed (the `for await` loop ends), the
    /// subscription is cancelled. Use it from one task at a time.
    public struct Iterator: AsyncIteratorProtocol {
        /// A `Posts` iterator never throws.
        public typealias Failure = Never

        let _consumer: _PostsConsumer<Element>

        /// The next post, in post order, waiting for one if none is buffered.
        ///
        /// Stays on the caller's actor (`isolation`) while it waits, so elements reach an actor's
        /// loop without an extra hop.
        ///
        /// - Returns: The next post's payload, or `nil` once the iterating task was cancelled
        ///   or the center deinitialised and nothing is left in the buffer; after that the
        ///   subscription is cancelled and every later call returns `nil`.
        /// - Precondition: no other `next()` call of this iterator is waiting.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
            await _consumer.next(isolation: actor)
        }

        /// The next post, in post order, waiting for one if none is buffered.
        ///
        /// - Returns: The next post's payload, or `nil` once the iterating task was cancelled
        ///   or the center deinitialised and nothing is left in the buffer.
        public mutating func next() async -> Element? {
            await _consumer.next(isolation: nil)
        }
    }
}

/// What a ``Posts`` value shares among its copies: the buffer and the subscription, until the
/// one iterator takes them. Afterwards a sequence value holds nothing, so a copy kept alive after
/// the loop keeps neither the subscription nor the posts still buffered.
final class _PostsSource<Element: Sendable>: Sendable {
    private let parts: _Lock<(buffer: _PostsBuffer<Element>, token: Subscription)?>

    init(buffer: _PostsBuffer<Element>, token: Subscription) {
        self.parts = _Lock((buffer, token))
    }

    /// Hands the buffer and the subscription to the one iterator; traps on a second call.
    func take() -> (buffer: _PostsBuffer<Element>, token: Subscription) {
        guard let parts = parts.withLock({ $0.take() }) else {
            // fatalError, not preconditionFailure: optimised builds drop the latter's message.
            fatalError(
                "Posts: makeAsyncIterator() was called twice on the same sequence. A Posts sequence has a "
                    + "single consumer: call center.posts(_:) once for each loop that should receive the posts.")
        }
        return parts
    }

    deinit {
        // Never iterated: the last copy of the sequence ends the subscription.
        guard let parts = parts.withLock({ $0.take() }) else { return }
        parts.token.cancel()
        parts.buffer.unregister()
    }
}

/// The iterator's side: owns the subscription from `makeAsyncIterator()` until the iterator goes
/// away or the task is cancelled. Not `Sendable`: it lives in the iterating task.
final class _PostsConsumer<Element: Sendable> {
    let buffer: _PostsBuffer<Element>
    private var token: Subscription?

    init(buffer: _PostsBuffer<Element>, token: Subscription) {
        self.buffer = buffer
        self.token = token
    }

    func next(isolation actor: isolated (any Actor)?) async -> Element? {
        if let element = await buffer.next(isolation: actor) { return element }
        // Finished (the task was cancelled, or the center is gone): end the subscription now
        // rather than at deinit.
        if let token = token.take() {
            token.cancel()
            buffer.unregister()
        }
        return nil
    }

    deinit {
        if let token {
            token.cancel()
            buffer.unregister()
        }
    }
}
