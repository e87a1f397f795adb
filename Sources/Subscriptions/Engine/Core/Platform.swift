// The only file of the module that touches the C library directly.
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An integer naming the calling thread, unique among the threads that are alive.
///
/// Used to tell the canceller's own delivery frames apart from other threads' frames (and, in
/// `SubscriptionsFoundation`, a bridge handler's own thread).
@inline(__always)
package func _currentThreadID() -> UInt {
    #if canImport(Darwin)
        return UInt(bitPattern: pthread_self())
    #else
        return UInt(pthread_self())
    #endif
}

/// Writes `text` to the standard error stream (file descriptor 2) in one `write`, unbuffered:
/// the library's one message that is printed rather than reported (a handler threw and no
/// diagnostics are set). Not `fputs(stderr)`: a C global variable, which Swift 6 rejects.
func _writeStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
}

/// Gives up the processor for a short while; `attempt` grows the pause from a yield to a
/// sleep of at most a millisecond, so a long wait costs little CPU.
package func _backoff(_ attempt: Int) {
    if attempt < 16 {
        sched_yield()
    } else {
        usleep(UInt32(min(1000, 20 * (attempt - 15))))
    }
}

#if canImport(Darwin) || SUBSCRIPTIONS_MUTEX_LOCK
    import Synchronization

    /// The library's lock: `Mutex` (an `os_unfair_lock` on Apple platforms, which
    /// ThreadSanitizer understands).
    ///
    /// Linux builds select this branch with `-Xswiftc -DSUBSCRIPTIONS_MUTEX_LOCK`, so that CI
    /// compiles and runs the code Apple platforms run (`.ci/run` builds and tests it that way,
    /// not under ThreadSanitizer, which cannot see a Linux `Mutex`).
    typealias _PlatformMutex<State: ~Copyable> = Mutex<State>
#else
    /// The library's lock on Linux: a `pthread_mutex_t` around the guarded state.
    ///
    /// Not `Synchronization.Mutex`: on Linux that one is a futex driven by atomics compiled into
    /// the standard library, which ThreadSanitizer does not see, so every section it guards
    /// would be reported as a race, in our CI and in the ThreadSanitizer runs of apps that use
    /// this package. glibc's mutex is intercepted by ThreadSanitizer and, uncontended, costs
    /// about as much.
    struct _PlatformMutex<State: ~Copyable>: ~Copyable, @unchecked Sendable {
        // @unchecked: `state` is only reached inside `withLock`, while `mutex` is held; both live
        // in memory of their own that never moves (a pthread mutex must not be moved).
        private let mutex: UnsafeMutablePointer<pthread_mutex_t>
        private let state: UnsafeMutablePointer<State>

        init(_ initial: consuming State) {
            // A cache line (two, for adjacent-line prefetch) of its own: locks allocated one
            // after another (a center's stripes) must not share one, or threads taking
            // different locks slow each other down.
            let raw = UnsafeMutableRawPointer.allocate(byteCount: 128, alignment: 128)
            mutex = raw.bindMemory(to: pthread_mutex_t.self, capacity: 1)
            mutex.initialize(to: pthread_mutex_t())
            pthread_mutex_init(mutex, nil)
            state = .allocate(capacity: 1)
            state.initialize(to: initial)
        }

        deinit {
            pthread_mutex_destroy(mutex)
            mutex.deinitialize(count: 1)
            UnsafeMutableRawPointer(mutex).deallocate()
            state.deinitialize(count: 1)
            state.deallocate()
        }

        /// Runs `body` with exclusive access to the state.
        @inline(__always)
        borrowing func withLock<Result, E: Error>(_ body: (inout State) throws(E) -> Result) throws(E) -> Result {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&state.pointee)
        }
    }
#endif
