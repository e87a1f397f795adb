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
final class _PostsBuffer<Element: Sendable>: @unchecked Sendable {
    // @unchecked: every `var` is read and written only while holding `lock` (or in `deinit`, when
    // no other reference exists); the elements themselves are `Sendable`.

    private let lock = _Lock<Void>(())
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

    init(policy: PostsBufferingPolicy) {
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
            if finished { return nil }
            if let waiter {
                self.waiter = nil
                handoff.initialize(to: element)
                hasHandoff = true
                return waiter
            }
            if count < limit {
                lockedAppend(element)
            } else if keepNewest && count > 0 {
                lockedReplaceOldest(&element)
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

    /// The next post, suspending until one arrives; `nil` once the consuming task is cancelled.
    func next(isolation actor: isolated (any Actor)?) async -> Element? {
        while true {
            if Task.isCancelled {
                finish()
                return nil
            }
            var ended = false
            let element = lock.withLock { _ -> Element? in
                if finished {
                    ended = true
                    return nil
                }
                return lockedTake()
            }
            if let element { return element }
            if ended { return nil }
            await withTaskCancellationHandler {
                await withUnsafeContinuation(isolation: actor) { (continuation: UnsafeContinuation<Void, Never>) in
                    let ready = lock.withLock { _ -> Bool in
                        if finished || hasHandoff || count > 0 { return true }
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
