import Synchronization

/// The mailbox between a subscription handler (the producer, on posting threads) and the one task
/// that iterates a ``Posts`` sequence (the consumer).
///
/// The handler calls ``push(_:)``; the consumer calls ``next(isolation:)``. A post that arrives
/// while the consumer is suspended in `next` goes to the `handoff` slot and wakes it; otherwise it
/// waits in the ring, as the ``PostsBufferingPolicy`` allows. No user code runs under the lock:
/// the consumer is resumed, and discarded elements are released, after unlocking.
///
/// This code runs unspecialised (it is generic over the user's payload and not inlinable), so the
/// state is kept in plain stored properties and a manually managed ring of `Element`s rather than
/// in a `Mutex<State>` of generic optionals and tuples: each generic type touched per post would
/// cost a runtime metadata lookup, several times the cost of the work itself.
final class _PostsBuffer<Element: Sendable>: _PostsClosing, @unchecked Sendable {
    // @unchecked: every `var` but `center` is read and written only while holding `lock` (or in
    // `deinit`, when no other reference exists); `center` is a weak reference written only in
    // `init` (the runtime makes weak loads atomic); the elements themselves are `Sendable`.

    private let lock = _PlatformMutex<Void>(())
    /// How many posts may wait in the ring; `Int.max` for `.unbounded`.
    private let limit: Int
    /// Whether a full ring makes room by discarding its oldest post (`.bufferingNewest`).
    private let keepNewest: Bool

    /// Waiting posts: `count` initialised slots from `head`, wrapping at `capacity`. Oldest first.
    private var ring: UnsafeMutablePointer<Element>
    private var capacity = 0
    private var head = 0
    private var count = 0
    /// One slot for the post that woke the suspended consumer; it does not count against `limit`.
    private let handoff: UnsafeMutablePointer<Element>
    private var hasHandoff = false
    /// The consumer, when it is suspended in `next` with nothing to read.
    private var waiter: UnsafeContinuation<Void, Never>?
    /// Set when the consuming task was cancelled: later pushes are dropped, `next` returns `nil`.
    private var finished = false
    /// Set when the center deinitialised: `next` yields what is buffered, then `nil`.
    private var closed = false
    /// Posts discarded by the policy since the last report (see `Diagnostic.droppedPosts`).
    private var dropped = 0

    /// The name posted to, for diagnostics.
    let name: String
    /// The center, weakly: a sequence never keeps its center alive. Read only to report drops
    /// and to unregister; `nil` once the center started to deinitialise.
    private weak var center: PostCenter?

    init(policy: PostsBufferingPolicy, name: String, center: PostCenter) {
        self.name = name
        self.center = center
        switch policy {
        case .unbounded: (limit, keepNewest) = (Int.max, false)
        case .bufferingNewest(let n): (limit, keepNewest) = (n, true)
        case .bufferingOldest(let n): (limit, keepNewest) = (n, false)
        }
        ring = .allocate(capacity: 0)
        handoff = .allocate(capacity: 1)
    }

    deinit {
        for i in 0..<count { (ring + (head + i) % capacity).deinitialize(count: 1) }
        ring.deallocate()
        if hasHandoff { handoff.deinitialize(count: 1) }
        handoff.deallocate()
    }

    // MARK: Producer

    /// Hands `element` to the suspended consumer, or keeps it by the policy. Never blocks on the
    /// consumer and never suspends. Called by the subscription handler on the posting thread.
    ///
    /// - Complexity: amortised O(1).
    func push(_ element: Element) {
        // After the lock, `element` holds whatever was not kept: the new post, or the oldest one
        // it replaced. It is released when this function returns, outside the lock.
        var element = element
        let wake = lock.withLock { _ -> UnsafeContinuation<Void, Never>? in
            if finished || closed { return nil }
            if let waiter {
                self.waiter = nil
                handoff.initialize(to: element)
                hasHandoff = true
                return waiter
            }
            if count < limit {
                lockedAppend(element)
            } else {
                // Discarded: the oldest waiting post (`.bufferingNewest`) or this one. Counting
                // it is the only cost of diagnostics here; it is reported by the consumer.
                if keepNewest && count > 0 { lockedReplaceOldest(&element) }
                dropped &+= 1
            }
            return nil
        }
        wake?.resume()
    }

    private func lockedAppend(_ element: Element) {
        if count == capacity { lockedGrow() }
        (ring + (head + count) % capacity).initialize(to: element)
        count += 1
    }

    /// Removes the oldest post into `element` and puts the new one (from `element`) last.
    ///
    /// Only called when the ring is full: `count == limit`, and the ring never grows beyond
    /// `limit`, so `count == capacity`. Then the oldest post's slot is also the one after the
    /// newest: swapping the new post in and advancing `head` makes it the newest.
    private func lockedReplaceOldest(_ element: inout Element) {
        assert(count == capacity, "the ring grows up to the limit only")
        swap(&element, &ring[head])
        head = (head + 1) % capacity
    }

    private func lockedGrow() {
        let newCapacity = min(max(4, 2 * capacity), limit)
        let fresh = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        for i in 0..<count {
            (fresh + i).moveInitialize(from: ring + (head + i) % capacity, count: 1)
        }
        ring.deallocate()
        ring = fresh
        capacity = newCapacity
        head = 0
    }

    // MARK: Consumer

    /// The next post, suspending until one arrives; `nil` once the consuming task is cancelled,
    /// or once the center deinitialised and the buffer is empty.
    func next(isolation actor: isolated (any Actor)?) async -> Element? {
        while true {
            if Task.isCancelled {
                finish()
                return nil
            }
            var ended = false
            var drops = 0
            let element = lock.withLock { _ -> Element? in
                if finished {
                    ended = true
                    return nil
                }
                if dropped > 0 {
                    drops = dropped
                    dropped = 0
                }
                let element = lockedTake()
                if element == nil && closed { ended = true }
                return element
            }
            if drops > 0 { center?._reportDroppedPosts(name, drops) }
            if let element { return element }
            if ended { return nil }
            await withTaskCancellationHandler {
                await withUnsafeContinuation(isolation: actor) { (continuation: UnsafeContinuation<Void, Never>) in
                    let ready = lock.withLock { _ -> Bool in
                        if finished || closed || hasHandoff || count > 0 { return true }
                        if waiter != nil {
                            fatalError(
                                "Posts: next() was called from two tasks at once. A Posts sequence has a single "
                                    + "consumer: iterate it from one task, or call posts(_:) once per consumer.")
                        }
                        waiter = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
            } onCancel: {
                self.finish()
            }
        }
    }

    private func lockedTake() -> Element? {
        if hasHandoff {
            hasHandoff = false
            return handoff.move()
        }
        guard count > 0 else { return nil }
        let element = (ring + head).move()
        head = (head + 1) % capacity
        count -= 1
        return element
    }

    /// Ends the sequence: the suspended consumer (if any) wakes up to `nil`, waiting posts are
    /// released (after unlocking) and later pushes are dropped. Idempotent.
    func finish() {
        var dropped: [Element] = []
        let wake = lock.withLock { _ -> UnsafeContinuation<Void, Never>? in
            guard !finished else { return nil }
            finished = true
            while let element = lockedTake() { dropped.append(element) }
            let waiter = self.waiter
            self.waiter = nil
            return waiter
        }
        wake?.resume()
        withExtendedLifetime(dropped) {}
    }
}

extension _PostsBuffer {
    /// Ends the sequence because the center deinitialised: the consumer gets what is buffered,
    /// then `nil`. Idempotent; does nothing after `finish()`.
    func close() {
        let wake = lock.withLock { _ -> UnsafeContinuation<Void, Never>? in
            guard !finished, !closed else { return nil }
            closed = true
            let waiter = self.waiter
            self.waiter = nil
            return waiter
        }
        wake?.resume()
    }

    /// Tells the center that the subscription ended, so it no longer finishes this buffer.
    func unregister() {
        center?._sequences.remove(self)
    }
}

/// A buffer the center finishes when it deinitialises.
protocol _PostsClosing: AnyObject, Sendable {
    func close()
}

/// The `Posts` buffers of one center whose subscription is still on: when the center
/// deinitialises it closes each one, so every `for await` loop over its posts ends.
///
/// Holds the buffers strongly; a buffer is removed when its subscription ends (the loop ends,
/// the task is cancelled, the unused sequence is dropped). Buffers (and the posts in them) are
/// released after unlocking.
final class _PostsRegistry: Sendable {
    private let buffers = _PlatformMutex<[ObjectIdentifier: any _PostsClosing]>([:])

    init() {}

    /// - Complexity: amortised O(1).
    func insert(_ buffer: some _PostsClosing) {
        buffers.withLock { $0[ObjectIdentifier(buffer)] = buffer }
    }

    /// - Complexity: amortised O(1).
    func remove(_ buffer: AnyObject) {
        let removed = buffers.withLock { $0.removeValue(forKey: ObjectIdentifier(buffer)) }
        withExtendedLifetime(removed) {}
    }

    /// Closes every buffer, from the center's deinit.
    func closeAll() {
        let all = buffers.withLock { buffers -> [any _PostsClosing] in
            let all = Array(buffers.values)
            buffers = [:]
            return all
        }
        for buffer in all { buffer.close() }
    }
}
