#include "SubscriptionsShims.h"

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

// 0: not tried yet, 1: registered, -1: unavailable. Races on first use are harmless: both
// threads register (idempotent) and store the same answer.
static _Atomic int state = 0;

int _subscriptions_process_fence(void) {
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (s == 0) {
        long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        s = (supported > 0 && (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED)
             && syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0) ? 1 : -1;
        atomic_store_explicit(&state, s, memory_order_release);
    }
    if (s != 1) return 0;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0 ? 1 : 0;
}

int _subscriptions_is_main_thread(void) {
    return syscall(SYS_gettid) == getpid() ? 1 : 0;
}
#else
int _subscriptions_process_fence(void) { return 0; }
#endif

#if defined(__APPLE__)
#include <pthread.h>
int _subscriptions_is_main_thread(void) { return pthread_main_np() == 1 ? 1 : 0; }
#elif !defined(__linux__)
// No portable test elsewhere: only the main queue's marker (checked by the caller) counts.
int _subscriptions_is_main_thread(void) { return 0; }
#endif
