#include "SubscriptionsShims.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SUBSCRIPTIONS_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define SUBSCRIPTIONS_TSAN 1
#endif

int _subscriptions_symmetric = 1;
static int fence_available = 0;

// Runs before main (and before any Swift code of the library): choose the protocol once, so the
// post path reads a plain global.
__attribute__((constructor)) static void choose_fence_mode(void) {
    const char *setting = getenv("SUBSCRIPTIONS_PROCESS_FENCE");
    int forced_off = setting && strcmp(setting, "off") == 0;
#if defined(__linux__)
    if (!forced_off) {
        long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        fence_available = supported > 0 && (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED)
            && syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    }
#else
    (void)forced_off;
#endif
#if defined(SUBSCRIPTIONS_TSAN)
    _subscriptions_symmetric = 1;
#else
    _subscriptions_symmetric = fence_available ? 0 : 1;
#endif
}

int _subscriptions_process_fence_available(void) { return fence_available; }

void _subscriptions_heavy_fence(void) {
    atomic_thread_fence(memory_order_seq_cst);
#if defined(__linux__)
    if (fence_available) {
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    }
#endif
}

// MARK: Thread records

__thread void *_subscriptions_current_record;

// Word 0 of a record: the next record (immutable once linked). Word 1: 1 while claimed.
static _Atomic(uintptr_t *) first_record = NULL;
static _Atomic long claimed_records = 0;
static pthread_key_t release_key;
static pthread_once_t release_once = PTHREAD_ONCE_INIT;

static void release_record(void *record) {
    uintptr_t *words = record;
    _subscriptions_current_record = NULL;
    __atomic_store_n(&words[1], 0, __ATOMIC_RELEASE);
    atomic_fetch_sub_explicit(&claimed_records, 1, memory_order_seq_cst);
}

static void make_release_key(void) { pthread_key_create(&release_key, release_record); }

void *_subscriptions_claim_record(long words) {
    pthread_once(&release_once, make_release_key);
    uintptr_t *record = NULL;
    for (uintptr_t *r = atomic_load_explicit(&first_record, memory_order_acquire); r; r = (uintptr_t *)r[0]) {
        uintptr_t expected = 0;
        if (__atomic_load_n(&r[1], __ATOMIC_RELAXED) == 0
            && __atomic_compare_exchange_n(&r[1], &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            record = r;
            break;
        }
    }
    if (!record) {
        void *memory = NULL;
        if (posix_memalign(&memory, 128, (size_t)words * sizeof(uintptr_t)) != 0) abort();
        record = memory;
        memset(record, 0, (size_t)words * sizeof(uintptr_t));
        record[1] = 1;
        uintptr_t *head = atomic_load_explicit(&first_record, memory_order_relaxed);
        do {
            record[0] = (uintptr_t)head;
        } while (!atomic_compare_exchange_weak_explicit(
            &first_record, &head, record, memory_order_release, memory_order_relaxed));
    }
    atomic_fetch_add_explicit(&claimed_records, 1, memory_order_seq_cst);
    // A thread that claims a record may post right after: order the claim before its reads.
    atomic_thread_fence(memory_order_seq_cst);
    _subscriptions_current_record = record;
    pthread_setspecific(release_key, record);
    return record;
}

void *_subscriptions_first_record(void) {
    return atomic_load_explicit(&first_record, memory_order_acquire);
}

long _subscriptions_claimed_records(void) {
    return atomic_load_explicit(&claimed_records, memory_order_seq_cst);
}

// MARK: The main thread

__thread int _subscriptions_main_state = 0;

#if defined(__APPLE__)
int _subscriptions_is_main_thread(void) { return pthread_main_np() == 1 ? 1 : 0; }
#elif defined(__linux__)
int _subscriptions_is_main_thread(void) { return syscall(SYS_gettid) == getpid() ? 1 : 0; }
#else
// No portable test elsewhere: only the main queue's marker (checked by the caller) counts.
int _subscriptions_is_main_thread(void) { return 0; }
#endif
