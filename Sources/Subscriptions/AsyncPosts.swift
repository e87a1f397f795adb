import Synchronization

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
    private let parts: _PlatformMutex<(buffer: _PostsBuffer<Element>, token: Subscription)?>

    init(buffer: _PostsBuffer<Element>, token: Subscription) {
        self.parts = _PlatformMutex((buffer, token))
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
