import Dispatch
import Foundation
import Subscriptions

// Helpers copied from the core suite's Support.swift: the bridge's tests live in a target of
// their own, like the bridge.

/// A slot for a token that a handler needs to reach (to cancel or pause itself).
final class TokenSlot: @unchecked Sendable {
    // @unchecked: `storage` is only touched while holding `lock` (an `NSLock`, which
    // ThreadSanitizer understands; see `Recorder`).
    private let lock = NSLock()
    private var storage: Subscription?

    init() {}

    var token: Subscription? {
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
    func cancel() { token?.cancel() }
}

/// A thread that the test joins: started at once, `join()` waits until `body` returned.
final class TestThread: Sendable {
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () -> Void) {
        let done = self.done
        let thread = Thread {
            body()
            done.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Waits until the thread's body returned.
    func join() {
        done.wait()
    }

    /// Waits at most `seconds` for the body to return; `false` when it did not (a deadlock guard,
    /// never a timing assertion).
    func join(timeout seconds: Double) -> Bool {
        done.wait(timeout: .now() + seconds) == .success
    }
}
