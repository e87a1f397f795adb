#include "SubscriptionsShims.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__linux__)
#include <linux/futex.h>
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

_Atomic int _subscriptions_fence_state = 2;
static _Atomic long heavy_fences = 0;
static int fence_available = 0;
static int adaptive = 0;                     // the state may move (set once, before main)
static _Atomic long open_sections = 0;       // sections open now
// Set when a section ends, cleared by the switching job's try: whether a section ran since the
// last try. A flag, not a count: sections store it only while it reads 0, so a burst of them
// (every cancel in the symmetric form) writes the shared line once per try, not once each.
static _Atomic int section_seen = 0;
static __thread long sections_opened_here = 0;   // sections this thread opened (for tests)

// Runs before main (and before any Swift code of the library): chooses the fence form the process
// starts with, and whether it may move at run time (see SubscriptionsShims.h).
__attribute__((constructor)) static void choose_fence_mode(void) {
    const char *setting = getenv("SUBSCRIPTIONS_PROCESS_FENCE");
    int forced_off = setting && strcmp(setting, "off") == 0;
    int fixed_asymmetric = setting && strcmp(setting, "asymmetric") == 0;
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
    fence_available = 0;
#endif
    atomic_store_explicit(&_subscriptions_fence_state, fence_available ? 0 : 2, memory_order_seq_cst);
    adaptive = fence_available && !fixed_asymmetric;
}

int _subscriptions_process_fence_available(void) { return fence_available; }

int _subscriptions_fence_adaptive(void) { return adaptive; }

long _subscriptions_sections_opened(void) { return sections_opened_here; }

// Sections open on the calling thread. An open section is also a scan section: records are
// unmapped only when no section of either kind is open (`free_limbo_if_quiet`), and the section
// counted itself in and fenced before any load of the list, so the scans inside it need not count
// themselves in and fence again (`_subscriptions_scan_begin`).
static __thread int sections_here = 0;

static void free_limbo_soon(void);

int _subscriptions_section_begin(void) {
    // Counted in before the state is read (both sequentially consistent): a switch back that
    // moved the state first makes this read see it; one that moved it later sees this count
    // and waits for the section's end before posts stop fencing.
    atomic_fetch_add_explicit(&open_sections, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&_subscriptions_fence_state, memory_order_seq_cst) == 2) {
        atomic_thread_fence(memory_order_seq_cst);
        sections_here += 1;
        return 1;
    }
    if (atomic_fetch_sub_explicit(&open_sections, 1, memory_order_release) == 1) free_limbo_soon();
    return 0;
}

void _subscriptions_section_end(void) {
    sections_here -= 1;
    sections_opened_here += 1;
    if (!atomic_load_explicit(&section_seen, memory_order_relaxed)) {
        atomic_store_explicit(&section_seen, 1, memory_order_relaxed);
    }
    // Releasing: the section's stores and scan happen before a switch back that sees it closed.
    if (atomic_fetch_sub_explicit(&open_sections, 1, memory_order_release) == 1) free_limbo_soon();
}

int _subscriptions_heavy_fence(void) {
    atomic_fetch_add_explicit(&heavy_fences, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    int switched_on = 0;
#if defined(__linux__)
    if (fence_available) {
        int expected = 0;
        int switching = adaptive
            && atomic_compare_exchange_strong_explicit(
                &_subscriptions_fence_state, &expected, 1, memory_order_seq_cst, memory_order_relaxed);
        // Every thread runs a full barrier before this returns: a post whose state load read 0
        // came before that barrier, so its frame store (made before the load) is visible from
        // here on; any later state load reads 1 or more, and fences.
        long failed = syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
        if (switching) {
            // A membarrier that failed (it cannot once registered) made no thread fence: then
            // back to asymmetric, never on to symmetric.
            atomic_store_explicit(&_subscriptions_fence_state, failed ? 0 : 2, memory_order_release);
            switched_on = failed ? 0 : 1;
        }
    }
#endif
    return switched_on;
}

// Attempts of `_subscriptions_try_switch_off` that could move the state, counted before they
// try (for tests: a cancel that ran the process-wide fence after one of these is the first of a
// new symmetric period, not a cancel that missed the symmetric form).
static _Atomic long switch_off_attempts = 0;

long _subscriptions_switch_off_attempts(void) {
    return atomic_load_explicit(&switch_off_attempts, memory_order_seq_cst);
}

int _subscriptions_try_switch_off(void) {
    if (atomic_exchange_explicit(&section_seen, 0, memory_order_relaxed)) return 0;
    atomic_fetch_add_explicit(&switch_off_attempts, 1, memory_order_seq_cst);
    int expected = 2;
    if (!atomic_compare_exchange_strong_explicit(
            &_subscriptions_fence_state, &expected, 3, memory_order_seq_cst, memory_order_relaxed)) {
        return 0;
    }
    // Sections that read 2 are counted in: wait for their ends (each a fence and a scan long).
    while (atomic_load_explicit(&open_sections, memory_order_seq_cst) != 0) sched_yield();
    atomic_thread_fence(memory_order_acquire);
    atomic_store_explicit(&_subscriptions_fence_state, 0, memory_order_release);
    return 1;
}

// MARK: Thread records

__thread void *_subscriptions_current_record;

// The records of live threads form a list (word 0: next, word 7: prev), changed only under
// `records_lock` and read without it by scanners (cancellers, reclaimers, orphan sweeps) inside
// a scan section. A record is claimed on a thread's first use and, when the thread exits,
// unlinked and parked in `limbo` (linked through word 1); parked records are unmapped once no
// scan section is open: a scanner that entered its section after the unlink cannot reach them
// (it loads the head after counting itself in), and every scanner from before has left. So a
// scan visits only the threads alive now, and an exited thread costs no memory.
static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(uintptr_t *) first_record = NULL;
static _Atomic long claimed_records = 0;
static _Atomic long open_scans = 0;
static _Atomic int limbo_pending = 0;
static uintptr_t *limbo = NULL;  // guarded by records_lock
static pthread_key_t release_key;
static pthread_once_t release_once = PTHREAD_ONCE_INIT;
static size_t record_bytes = 0;

// The hint directory: one slot per live record, dense, so that a scan filtered by route reads
// the hints of N threads from N/8 cache lines instead of one page per record (a record is a
// mapping of its own: walking the list costs a TLB and cache miss per record, about 5 ns here,
// for threads that are idle). A chunk holds `HINT_CHUNK` hints, then the records they belong to
// (NULL for a free slot). Chunks are allocated on first use and kept. A claim takes the lowest
// free slot, and `_subscriptions_hint_high` (one past the highest slot in use) falls back when
// the top slots are released, so a scan covers about the threads alive now. Slots, chunks and
// the high mark change under `records_lock`. Scanners read the hints without a scan section
// (chunks are never freed) and a slot's record inside one, which keeps it mapped (a released
// slot is cleared before its record goes to limbo). More live records than slots: the extras
// get none (`_subscriptions_hint_overflow` counts them), and filtered scans walk the list
// instead while any exists.
#define HINT_CHUNK (1L << HINT_CHUNK_SHIFT)
#define HINT_SLOTS (HINT_CHUNK * HINT_CHUNKS)
_Atomic(uintptr_t *) _subscriptions_hint_chunks[HINT_CHUNKS];
static uint64_t hint_used[HINT_SLOTS / 64];  // guarded by records_lock
static long hint_limit = HINT_SLOTS;           // guarded by records_lock; lowered only by tests
_Atomic long _subscriptions_hint_high = 0;
_Atomic long _subscriptions_hint_overflow = 0;

long _subscriptions_heavy_fence_count(void) {
    return atomic_load_explicit(&heavy_fences, memory_order_relaxed);
}

// Unmaps the parked records when no scan section (and no fence section, which is one too) is
// open. Called with records_lock held.
static void free_limbo_if_quiet(void) {
    if (!limbo) return;
    // Orders the unlinks (earlier, under this lock) before the loads of the counts: a scanner
    // that counted itself in after this fence loads a head that no longer leads to them.
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&open_scans, memory_order_seq_cst) != 0) return;
    if (atomic_load_explicit(&open_sections, memory_order_seq_cst) != 0) return;
    while (limbo) {
        uintptr_t *next = (uintptr_t *)limbo[SUBSCRIPTIONS_RECORD_HINT_CELL];
        munmap(limbo, record_bytes);
        limbo = next;
    }
    atomic_store_explicit(&limbo_pending, 0, memory_order_relaxed);
}

// Frees the record's directory slot (word 1 points at its hint; NULL when it got none). Called
// with records_lock held, before the record goes to limbo.
static void release_hint_slot(uintptr_t *r) {
    _Atomic uintptr_t *cell = (_Atomic uintptr_t *)r[SUBSCRIPTIONS_RECORD_HINT_CELL];
    if (!cell) {
        atomic_fetch_sub_explicit(&_subscriptions_hint_overflow, 1, memory_order_seq_cst);
        return;
    }
    // The chunk that holds the cell, and the cell's index in it.
    long c = 0;
    uintptr_t *chunk = NULL;
    for (; c < HINT_CHUNKS; c++) {
        chunk = atomic_load_explicit(&_subscriptions_hint_chunks[c], memory_order_relaxed);
        if (chunk && (uintptr_t *)cell >= chunk && (uintptr_t *)cell < chunk + HINT_CHUNK) break;
    }
    if (c == HINT_CHUNKS) abort();
    long i = (uintptr_t *)cell - chunk;
    long slot = c * HINT_CHUNK + i;
    atomic_store_explicit(cell, 0, memory_order_release);
    __atomic_store_n(&chunk[HINT_CHUNK + i], 0, __ATOMIC_RELEASE);
    hint_used[slot / 64] &= ~(1ULL << (slot % 64));
    long high = atomic_load_explicit(&_subscriptions_hint_high, memory_order_relaxed);
    while (high > 0 && !(hint_used[(high - 1) / 64] & (1ULL << ((high - 1) % 64)))) high--;
    atomic_store_explicit(&_subscriptions_hint_high, high, memory_order_seq_cst);
}

// Gives `record` the lowest free directory slot and points its word 1 at the slot's hint; none
// (word 1 stays 0, counted in `_subscriptions_hint_overflow`) when all are taken. Called with
// records_lock held.
static void claim_hint_slot(uintptr_t *record) {
    long high = atomic_load_explicit(&_subscriptions_hint_high, memory_order_relaxed);
    long slot = -1;
    for (long w = 0; w < HINT_SLOTS / 64 && slot < 0; w++) {
        if (hint_used[w] != ~0ULL) slot = w * 64 + __builtin_ctzll(~hint_used[w]);
    }
    if (slot < 0 || slot >= hint_limit) {
        atomic_fetch_add_explicit(&_subscriptions_hint_overflow, 1, memory_order_seq_cst);
        return;
    }
    uintptr_t *chunk = atomic_load_explicit(&_subscriptions_hint_chunks[slot >> HINT_CHUNK_SHIFT], memory_order_relaxed);
    if (!chunk) {
        // A mapping of its own (page-aligned, zeroed): a heap block would share its first and
        // last cache lines with other allocations, whose writes would make every scan miss.
        void *memory =
            mmap(NULL, 2 * HINT_CHUNK * sizeof(uintptr_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
        if (memory == MAP_FAILED) abort();
        chunk = memory;
        atomic_store_explicit(&_subscriptions_hint_chunks[slot >> HINT_CHUNK_SHIFT], chunk, memory_order_release);
    }
    hint_used[slot / 64] |= 1ULL << (slot % 64);
    long i = slot & (HINT_CHUNK - 1);
    __atomic_store_n(&chunk[i], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&chunk[HINT_CHUNK + i], (uintptr_t)record, __ATOMIC_RELEASE);
    record[SUBSCRIPTIONS_RECORD_HINT_CELL] = (uintptr_t)&chunk[i];
    if (slot + 1 > high) atomic_store_explicit(&_subscriptions_hint_high, slot + 1, memory_order_seq_cst);
}

void _subscriptions_limit_hint_slots(long slots) {
    pthread_mutex_lock(&records_lock);
    hint_limit = slots;
    pthread_mutex_unlock(&records_lock);
}

static void release_record(void *record) {
    uintptr_t *r = record;
    _subscriptions_current_record = NULL;
    pthread_mutex_lock(&records_lock);
    release_hint_slot(r);
    uintptr_t *next = (uintptr_t *)__atomic_load_n(&r[SUBSCRIPTIONS_RECORD_NEXT], __ATOMIC_RELAXED);
    uintptr_t *prev = (uintptr_t *)__atomic_load_n(&r[SUBSCRIPTIONS_RECORD_PREVIOUS], __ATOMIC_RELAXED);
    if (prev) {
        __atomic_store_n(&prev[SUBSCRIPTIONS_RECORD_NEXT], (uintptr_t)next, __ATOMIC_RELEASE);
    } else {
        atomic_store_explicit(&first_record, next, memory_order_seq_cst);
    }
    if (next) __atomic_store_n(&next[SUBSCRIPTIONS_RECORD_PREVIOUS], (uintptr_t)prev, __ATOMIC_RELAXED);
    // r[SUBSCRIPTIONS_RECORD_NEXT] stays: a scanner standing on r goes on to the records after it.
    __atomic_store_n(&r[SUBSCRIPTIONS_RECORD_HINT_CELL], (uintptr_t)limbo, __ATOMIC_RELAXED);
    limbo = r;
    atomic_store_explicit(&limbo_pending, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&claimed_records, 1, memory_order_seq_cst);
    free_limbo_if_quiet();
    pthread_mutex_unlock(&records_lock);
}

static void make_release_key(void) { pthread_key_create(&release_key, release_record); }

void *_subscriptions_claim_record(long words) {
    pthread_once(&release_once, make_release_key);
    // A mapping of its own (zeroed), so that an exited thread's record goes back to the system
    // at once when it is unmapped, whatever the allocator keeps.
    size_t bytes = (size_t)words * sizeof(uintptr_t);
    void *memory = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
    if (memory == MAP_FAILED) abort();
    uintptr_t *record = memory;
    pthread_mutex_lock(&records_lock);
    record_bytes = bytes;
    uintptr_t *head = atomic_load_explicit(&first_record, memory_order_relaxed);
    record[SUBSCRIPTIONS_RECORD_NEXT] = (uintptr_t)head;
    record[SUBSCRIPTIONS_RECORD_PREVIOUS] = 0;
    claim_hint_slot(record);
    if (head) __atomic_store_n(&head[SUBSCRIPTIONS_RECORD_PREVIOUS], (uintptr_t)record, __ATOMIC_RELAXED);
    atomic_store_explicit(&first_record, record, memory_order_seq_cst);
    atomic_fetch_add_explicit(&claimed_records, 1, memory_order_seq_cst);
    free_limbo_if_quiet();
    pthread_mutex_unlock(&records_lock);
    // A thread that claims a record may post right after: order the claim before its reads.
    atomic_thread_fence(memory_order_seq_cst);
    _subscriptions_current_record = record;
    pthread_setspecific(release_key, record);
    return record;
}

void *_subscriptions_scan_begin(void) {
    // Inside a fence section of this thread, which counted itself in and fenced already.
    if (sections_here > 0) return atomic_load_explicit(&first_record, memory_order_seq_cst);
    atomic_fetch_add_explicit(&open_scans, 1, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
    return atomic_load_explicit(&first_record, memory_order_seq_cst);
}

// Unmaps parked records if the lock is free and no section is open (the last section to close
// calls this; a busy lock means a claim or a release, which tries itself).
static void free_limbo_soon(void) {
    if (atomic_load_explicit(&limbo_pending, memory_order_relaxed)) {
        if (pthread_mutex_trylock(&records_lock) == 0) {
            free_limbo_if_quiet();
            pthread_mutex_unlock(&records_lock);
        }
    }
}

void _subscriptions_scan_end(void) {
    if (sections_here > 0) return;
    if (atomic_fetch_sub_explicit(&open_scans, 1, memory_order_release) == 1) free_limbo_soon();
}

long _subscriptions_claimed_records(void) {
    return atomic_load_explicit(&claimed_records, memory_order_seq_cst);
}

int _subscriptions_owns_only_record(void) {
    // The caller's record counts in `claimed_records` from its claim on; the fence orders the
    // caller's earlier stores (a newly published buffer) before the count is read, against a
    // claimer's increment-then-fence-then-read. A caller without a record (a subscriber that
    // never posted, a dispatch worker settling dropped tokens) is alone only when no record is
    // claimed at all: it must not claim one to ask, or every later cancel of the thread that
    // does post would find two records and pay the process-wide fence.
    long alone = _subscriptions_current_record == NULL ? 0 : 1;
    // More than that seen without a fence: certainly not alone (a stale count can only be
    // higher than the claims the fence would order: releases only lower it), and "not alone" is
    // always a safe answer. Spares the fence where many threads exist.
    if (atomic_load_explicit(&claimed_records, memory_order_relaxed) > alone) return 0;
    atomic_thread_fence(memory_order_seq_cst);
    return atomic_load_explicit(&claimed_records, memory_order_seq_cst) <= alone;
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

void _subscriptions_futex_wait(uint32_t *address, uint32_t expected) {
#if defined(__linux__)
    syscall(SYS_futex, address, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
#else
    (void)address;
    (void)expected;
    sched_yield();
#endif
}

void _subscriptions_futex_wake_one(uint32_t *address) {
#if defined(__linux__)
    syscall(SYS_futex, address, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#else
    (void)address;
#endif
}
