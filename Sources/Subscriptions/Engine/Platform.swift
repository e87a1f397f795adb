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
/// Used to tell the canceller's own delivery frames apart from other threads' frames.
@inline(__always)
func _currentThreadID() -> UInt {
    #if canImport(Darwin)
        return UInt(bitPattern: pthread_self())
    #else
        return UInt(pthread_self())
    #endif
}

/// Gives up the processor for a short while; `attempt` grows the pause from a yield to a
/// sleep of at most a millisecond, so a long wait costs little CPU.
func _backoff(_ attempt: Int) {
    if attempt < 16 {
        sched_yield()
    } else {
        usleep(UInt32(min(1000, 20 * (attempt - 15))))
    }
}
