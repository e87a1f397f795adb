// The few things of the C library that Swift cannot reach on its own: a compiler-only fence,
// Linux's membarrier(2) system call (a variadic `syscall`, which Swift does not import) and the
// main-thread test.
#ifndef SUBSCRIPTIONS_SHIMS_H
#define SUBSCRIPTIONS_SHIMS_H

#include <stdatomic.h>

/// Keeps the compiler from moving memory accesses across this point; emits no instruction.
/// The fast side of an asymmetric fence (the slow side is `_subscriptions_process_fence`).
static inline void _subscriptions_compiler_fence(void) {
    atomic_signal_fence(memory_order_seq_cst);
}

/// Makes every thread of the process execute a full memory barrier before returning
/// (Linux membarrier, private expedited). Returns 1 when it did, 0 when it is not available
/// (other systems, old kernels, or a sandbox that refuses the call); callers then fall back to a
/// protocol that needs no such fence.
int _subscriptions_process_fence(void);

/// 1 when the calling thread is the process's main thread, else 0: Linux compares the thread id
/// with the process id, Apple platforms ask `pthread_main_np`. Spares the library Foundation's
/// `Thread.isMainThread`.
int _subscriptions_is_main_thread(void);

#endif
