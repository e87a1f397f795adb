import Dispatch
import Foundation
import Subscriptions

// Helpers that the core suite (SubscriptionsTests) and the bridge's suite
// (SubscriptionsFoundationTests) share. Not part of any product.

/// A slot for a token that a handler needs to reach (to cancel or pause itself).
public final class TokenSlot: @unchecked Sendable {
    // @unchecked: `storage` is only touched while holding `lock` (an `NSLock`, which
    // ThreadSanitizer understands).
    private let lock = NSLock()
    private var storage: Subscription?

    /// An empty slot.
    public init() {}

    /// The stored token. Setting it releases the old one after unlocking (its deinit cancels).
    public var token: Subscription? {
        get { lock.withLock { storage } }
        set {
            // The old token is released after unlocking: its deinit cancels, which may wait.
            let old = lock.withLock { () -> Subscription? in
                let old = storage
                storage = newValue
                return old
            }
            withExtendedLifetime(old) {}
        }
    }

    /// Cancels the stored token, if any (keeping it stored).
    public func cancel() { token?.cancel() }
}

/// A thread that the test joins: started at once, `join()` waits until `body` returned.
///
/// An `async` test joins with `await joined()`, never `join()`: the threads of an async test (of
/// any test, and of actors on the default executor) are Swift's cooperative pool, as many as
/// there are cores, which every test of the run shares; a thread of it blocked in `join()` runs
/// nothing else meanwhile, and with two of them blocked (two cores) no task of any test runs.
public final class TestThread: Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let ended = _Ending()

    /// Starts a thread (1 MiB of stack) that runs `body`.
    public init(_ body: @escaping @Sendable () -> Void) {
        let done = self.done
        let ended = self.ended
        let thread = Thread {
            body()
            ended.end()
            done.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Waits until the thread's body returned. Blocks the calling thread: not for async code
    /// (see ``joined()``).
    public func join() {
        done.wait()
    }

    /// Waits at most `seconds` for the body to return; `false` when it did not (a deadlock guard,
    /// never a timing assertion).
    public func join(timeout seconds: Double) -> Bool {
        done.wait(timeout: .now() + seconds) == .success
    }

    /// Suspends the calling task until the thread's body returned, without blocking a thread.
    public func joined() async {
        await ended.wait()
    }

    /// Runs `body` on a thread of its own and returns its result, suspending the calling task
    /// meanwhile: for an async test whose work blocks (joins threads, waits at gates, spins in
    /// `cancel()` while a handler runs elsewhere), so that it blocks a thread of its own instead
    /// of one of Swift's cooperative pool.
    public static func run<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result {
        let result = _ResultBox<Result>()
        await TestThread { result.set(body()) }.joined()
        return result.get()
    }
}

/// Whether a thread's body returned, and the tasks waiting for it.
private final class _Ending: @unchecked Sendable {
    // @unchecked: `ended` and `waiters` are only touched while holding `lock` (an `NSLock`,
    // which ThreadSanitizer understands); the continuations are resumed after unlocking.
    private let lock = NSLock()
    private var ended = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func end() {
        let ready = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            ended = true
            defer { waiters = [] }
            return waiters
        }
        for waiter in ready { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = lock.withLock { () -> Bool in
                if ended { return true }
                waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// A value handed from a thread to the task that joined it (the join orders the two).
private final class _ResultBox<Value: Sendable>: @unchecked Sendable {
    // @unchecked: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value: Value?

    func set(_ newValue: Value) { lock.withLock { value = newValue } }
    func get() -> Value { lock.withLock { value! } }
}
