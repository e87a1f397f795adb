// The only file of the module that touches the C library directly.
import Synchronization

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
    /// The library's lock: `Mutex` (an `os_unfair_lock` on Apple platforms, which
    /// ThreadSanitizer understands).
    ///
    /// Linux builds select this branch with `-Xswiftc -DSUBSCRIPTIONS_MUTEX_LOCK`, so that CI
    /// compiles and runs the code Apple platforms run (`.ci/run` builds and tests it that way,
    /// not under ThreadSanitizer, which cannot see a Linux `Mutex`).
    typealias _PlatformMutex<State: ~Copyable> = Mutex<State>
#else
    internal import _SubscriptionsShims

    /// The library's lock on Linux: a futex lock whose word is an atomic of this module.
    ///
    /// Not `Synchronization.Mutex`: on Linux that one is a futex driven by atomics compiled into
    /// the standard library, which ThreadSanitizer does not see, so every section it guards
    /// would be reported as a race, in our CI and in the ThreadSanitizer runs of apps that use
    /// this package. This lock's atomics are compiled into this module, so ThreadSanitizer sees
    /// the acquiring exchange that takes it and the releasing one that gives it up; only the
    /// sleep is a system call (`_subscriptions_futex_wait`). Not a `pthread_mutex_t` (what it
    /// replaced): uncontended, taking and releasing it is two atomic instructions inlined at the
    /// call, where glibc's mutex cost two calls and about 110 instructions (callgrind).
    ///
    /// The word holds 0 (free), 1 (held, nobody asleep) or 2 (held, someone may sleep on it); a
    /// release that finds 2 wakes one sleeper (the protocol of Drepper's "Futexes Are Tricky",
    /// mutex 2). Like glibc's default mutex it does not spin, is not fair, and is not reentrant:
    /// a thread that takes it twice sleeps for ever.
    struct _PlatformMutex<State: ~Copyable>: ~Copyable, @unchecked Sendable {
        // @unchecked: `state` is only reached inside `withLock`, while the lock is held; both live
        // in memory of their own that never moves (a futex word must not move while a thread
        // sleeps on it).
        private let word: UnsafeMutablePointer<Atomic<UInt32>>
        private let state: UnsafeMutablePointer<State>

        init(_ initial: consuming State) {
            // A cache line (two, for adjacent-line prefetch) of its own: locks allocated one
            // after another (a center's stripes) must not share one, or threads taking
            // different locks slow each other down.
            let raw = UnsafeMutableRawPointer.allocate(byteCount: 128, alignment: 128)
            word = raw.bindMemory(to: Atomic<UInt32>.self, capacity: 1)
            word.initialize(to: Atomic(0))
            state = .allocate(capacity: 1)
            state.initialize(to: initial)
        }

        deinit {
            word.deinitialize(count: 1)
            UnsafeMutableRawPointer(word).deallocate()
            state.deinitialize(count: 1)
            state.deallocate()
        }

        /// The lock word as the plain 32-bit word the futex system calls take.
        private var address: UnsafeMutablePointer<UInt32> {
            UnsafeMutableRawPointer(word).assumingMemoryBound(to: UInt32.self)
        }

        /// Runs `body` with exclusive access to the state.
        @inline(__always)
        borrowing func withLock<Result, E: Error>(_ body: (inout State) throws(E) -> Result) throws(E) -> Result {
            if !word.pointee.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged {
                _lockContended()
            }
            defer {
                if word.pointee.exchange(0, ordering: .releasing) == 2 { _subscriptions_futex_wake_one(address) }
            }
            return try body(&state.pointee)
        }

        /// The lock's slow path: marks the word "someone may sleep" (2) and sleeps until an
        /// exchange finds it free. It leaves 2 behind, so the release that follows wakes the next
        /// sleeper, if any (at worst one wake-up too many).
        @inline(never)
        private func _lockContended() {
            while word.pointee.exchange(2, ordering: .acquiring) != 0 {
                _subscriptions_futex_wait(address, 2)
            }
        }
    }
#endif
