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
public final class TestThread: Sendable {
    private let done = DispatchSemaphore(value: 0)

    /// Starts a thread (1 MiB of stack) that runs `body`.
    public init(_ body: @escaping @Sendable () -> Void) {
        let done = self.done
        let thread = Thread {
            body()
            done.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Waits until the thread's body returned.
    public func join() {
        done.wait()
    }

    /// Waits at most `seconds` for the body to return; `false` when it did not (a deadlock guard,
    /// never a timing assertion).
    public func join(timeout seconds: Double) -> Bool {
        done.wait(timeout: .now() + seconds) == .success
    }
}
