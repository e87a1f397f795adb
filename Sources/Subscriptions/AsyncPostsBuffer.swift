import Synchronization

/// The mailbox between a subscription handler (the producer, on posting threads) and the one task
/// that iterates a ``Posts`` sequence (the consumer).
///
/// The handler calls ``push(_:)``; the consumer calls ``next(isolation:)``. A post that arrives
/// while the consumer is suspended in `next` is handed over directly; otherwise it is kept
/// according to the ``PostsBufferingPolicy``. Everything mutable lives in one `Mutex`; no user
/// code runs under it: continuations are resumed and discarded elements released after unlocking.
final class _PostsBuffer<Element: Sendable>: Sendable {
    struct State {
        /// Posts waiting for the consumer, oldest first.
        var items = _Ring<Element>()
        /// The consumer, when it is suspended in `next` with nothing to read.
        var waiter: UnsafeContinuation<Element?, Never>?
        /// Set when the consuming task was cancelled (or the consumer went away): later pushes are
        /// dropped and `next` returns `nil`.
        var finished = false
    }

    let policy: PostsBufferingPolicy
    let state = Mutex(State())

    init(policy: PostsBufferingPolicy) {
        self.policy = policy
    }

    /// Hands `element` to the waiting consumer, or buffers it by the policy. Never blocks on the
    /// consumer and never suspends. Called by the subscription handler on the posting thread.
    func push(_ element: Element) {
        let (waiter, discarded) = state.withLock { s -> (UnsafeContinuation<Element?, Never>?, Element?) in
            if s.finished { return (nil, nil) }
            if let waiter = s.waiter {
                s.waiter = nil
                return (waiter, nil)
            }
            switch policy {
            case .unbounded:
                s.items.append(element)
            case .bufferingOldest(let limit):
                if s.items.count < limit { s.items.append(element) }
            case .bufferingNewest(let limit):
                guard limit > 0 else { return (nil, nil) }
                let oldest = s.items.count >= limit ? s.items.popFirst() : nil
                s.items.append(element)
                return (nil, oldest)
            }
            return (nil, nil)
        }
        waiter?.resume(returning: element)
        // `discarded` (the element that made room) is released here, after unlocking.
        withExtendedLifetime(discarded) {}
    }

    /// The next buffered element; `.some(nil)` once finished; `nil` when the consumer must wait.
    func poll() -> Element?? {
        state.withLock { s -> Element?? in
            if s.finished { return .some(nil) }
            if let element = s.items.popFirst() { return .some(element) }
            return nil
        }
    }

    /// Suspends until a post arrives or the consuming task is cancelled.
    func next(isolation actor: isolated (any Actor)?) async -> Element? {
        if Task.isCancelled {
            finish()
            return nil
        }
        if let ready = poll() { return ready }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation(isolation: actor) { (continuation: UnsafeContinuation<Element?, Never>) in
                let ready = state.withLock { s -> Element?? in
                    if s.finished { return .some(nil) }
                    if let element = s.items.popFirst() { return .some(element) }
                    precondition(
                        s.waiter == nil,
                        "Posts: next() was called from two tasks at once. A Posts sequence has a single "
                            + "consumer: iterate it from one task, or call posts(_:) once per consumer.")
                    s.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            self.finish()
        }
    }

    /// Ends the sequence: the waiting consumer (if any) gets `nil`, buffered elements are
    /// released (after unlocking) and later pushes are dropped. Idempotent.
    func finish() {
        let (waiter, dropped) = state.withLock { s -> (UnsafeContinuation<Element?, Never>?, [Element]) in
            s.finished = true
            let waiter = s.waiter
            s.waiter = nil
            return (waiter, s.items.removeAll())
        }
        waiter?.resume(returning: nil)
        withExtendedLifetime(dropped) {}
    }
}

/// A first-in first-out ring of elements that grows by doubling. Popping moves the element out
/// of its slot, so the ring never keeps a reference to an element it handed out.
struct _Ring<Element> {
    private var slots: [Element?] = []
    private var head = 0
    private(set) var count = 0

    /// - Complexity: amortised O(1).
    mutating func append(_ element: Element) {
        if count == slots.count { grow() }
        slots[(head + count) % slots.count] = element
        count += 1
    }

    /// - Complexity: O(1).
    mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = slots[head].take()
        head = (head + 1) % slots.count
        count -= 1
        return element
    }

    /// Empties the ring and returns its elements, oldest first, so that the caller can release
    /// them where it chooses (outside a lock).
    mutating func removeAll() -> [Element] {
        var all: [Element] = []
        all.reserveCapacity(count)
        while let element = popFirst() { all.append(element) }
        return all
    }

    private mutating func grow() {
        var fresh = [Element?](repeating: nil, count: Swift.max(4, 2 * slots.count))
        for i in 0..<count { fresh[i] = slots[(head + i) % slots.count].take() }
        slots = fresh
        head = 0
    }
}
