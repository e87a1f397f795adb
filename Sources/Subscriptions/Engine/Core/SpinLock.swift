import Synchronization
internal import _SubscriptionsShims

/// Takes a spin lock (an atomic of this module, which ThreadSanitizer sees): spins a little, then
/// yields the processor, so a preempted holder does not stall the other side. For sections of a
/// few instructions that run no user code.
@inline(__always)
func _spinLock(_ locked: borrowing Atomic<Bool>) {
    var attempt = 0
    while !locked.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged {
        repeat {
            if attempt >= 64 { _backoff(attempt - 64) }
            attempt += 1
        } while locked.load(ordering: .relaxed)
    }
}

/// Releases a spin lock taken by `_spinLock`.
@inline(__always)
func _spinUnlock(_ locked: borrowing Atomic<Bool>) {
    locked.store(false, ordering: .releasing)
}
