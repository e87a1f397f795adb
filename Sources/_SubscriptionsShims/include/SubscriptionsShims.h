// The few things of the C library that Swift cannot reach on its own: a compiler-only fence,
// Linux's membarrier(2) system call (a variadic `syscall`, which Swift does not import), a
// thread-local pointer to the calling thread's record (see Engine/Core/ThreadRecords.swift), and the
// main-thread test.
#ifndef SUBSCRIPTIONS_SHIMS_H
#define SUBSCRIPTIONS_SHIMS_H

#include <stdatomic.h>
#include <stdint.h>

/// Keeps the compiler from moving memory accesses across this point; emits no instruction.
/// The fast side of an asymmetric fence (the slow side is `_subscriptions_heavy_fence`).
static inline void _subscriptions_compiler_fence(void) {
    atomic_signal_fence(memory_order_seq_cst);
}

/// Asks the processor to start loading the cache line at `address` for reading; never faults,
/// even for an address that is no longer mapped, so a post may hint at an entry it has not yet
/// checked is alive.
static inline void _subscriptions_prefetch(const void *address) {
    __builtin_prefetch(address, 0, 3);
}

/// The fence protocol in force (see Engine/DESIGN.md, "Fence mode selection"):
/// 0, asymmetric: posts emit a compiler fence, heavy fences run membarrier;
/// 1, switching on: posts pay full fences, heavy fences run membarrier;
/// 2, symmetric: posts pay full fences, heavy fences are full fences of the caller's own, inside
///    a section (`_subscriptions_section_begin`);
/// 3, switching off: posts pay full fences, heavy fences run membarrier.
/// Fixed at 2 without membarrier, with `SUBSCRIPTIONS_PROCESS_FENCE=off`, or in a ThreadSanitizer
/// build (it cannot see membarrier); fixed at 0 with `SUBSCRIPTIONS_PROCESS_FENCE=asymmetric`;
/// otherwise it moves at run time: to 2 when a heavy fence interrupts another thread, back to 0
/// once no heavy fence used a section for a while (`_subscriptions_try_switch_off`).
extern _Atomic int _subscriptions_fence_state;

/// Whether posts must pay full fences themselves now (the state is not 0). An acquiring load: a
/// post's later loads come after it (see DESIGN.md for why the switch back to 0 needs that).
static inline int _subscriptions_posts_fence(void) {
    return atomic_load_explicit(&_subscriptions_fence_state, memory_order_acquire) != 0;
}

/// The current fence state (0 to 3, above). For choosing between paths that are all correct.
static inline int _subscriptions_fence_state_now(void) {
    return atomic_load_explicit(&_subscriptions_fence_state, memory_order_relaxed);
}

/// Whether the process-wide fence (Linux membarrier, private expedited) is registered and the
/// protocol is not fixed at symmetric: heavy fences may run it.
int _subscriptions_process_fence_available(void);

/// Whether the fence state moves at run time (membarrier available, neither
/// `SUBSCRIPTIONS_PROCESS_FENCE=off` nor `=asymmetric`, not a ThreadSanitizer build).
int _subscriptions_fence_adaptive(void);

/// Opens a section in which a full fence of the caller's own is a heavy fence: returns 1, after
/// that fence, when the state is symmetric (2), and the state cannot move to asymmetric until
/// `_subscriptions_section_end`; returns 0 (and opens nothing) otherwise.
int _subscriptions_section_begin(void);

/// How many sections the calling thread opened so far. For tests.
long _subscriptions_sections_opened(void);

/// Closes the section opened by `_subscriptions_section_begin` (which returned 1).
void _subscriptions_section_end(void);

/// The slow side of the fence outside a section: makes every thread of the process execute a
/// full memory barrier before returning (membarrier), after a full fence of the caller's own.
/// In the adaptive protocol, moves the state from asymmetric to symmetric on the way (switching
/// on, membarrier, symmetric) and then returns 1: the caller schedules
/// `_subscriptions_try_switch_off`. Returns 0 otherwise.
int _subscriptions_heavy_fence(void);

/// The switch back to asymmetric, for a job that runs a while after the switch on: returns 0
/// (stay, run again later) when heavy fences used a section since the last call, or when the
/// state is not symmetric; else moves to switching off, waits until no section is open, moves to
/// asymmetric and returns 1.
int _subscriptions_try_switch_off(void);

/// How many calls of `_subscriptions_try_switch_off` found no section since the previous one,
/// and so may have moved the state back to asymmetric; each is counted before it tries (for
/// tests).
long _subscriptions_switch_off_attempts(void);

/// The calling thread's record, or NULL before its first use on this thread.
#if defined(__linux__) && !defined(__APPLE__)
extern __thread void *_subscriptions_current_record __attribute__((tls_model("initial-exec")));
#else
extern __thread void *_subscriptions_current_record;
#endif

/// The layout of a thread record, shared by this shim and `ThreadRecords.swift`: the index of each
/// machine word of its header. The frames follow the header, `SUBSCRIPTIONS_RECORD_HEADER_WORDS` on.
enum {
    /// The next live record (the list's link, written by the shim; it stays while the record is in
    /// limbo, so that a scanner standing on it goes on).
    SUBSCRIPTIONS_RECORD_NEXT = 0,
    /// The record's cell in the hint directory (0: none); in limbo, the next record in limbo.
    SUBSCRIPTIONS_RECORD_HINT_CELL = 1,
    /// The chain of task starts put off until the thread's post ends (`deferredStarts`).
    SUBSCRIPTIONS_RECORD_DEFERRED_STARTS = 2,
    /// The route the thread's frames may be calling (`routeHint`).
    SUBSCRIPTIONS_RECORD_ROUTE_HINT = 3,
    /// The record this thread's `cancel()` waits for (`waitingFor`).
    SUBSCRIPTIONS_RECORD_WAITING_FOR = 4,
    /// Set when a canceller orphaned an entry this thread calls (`orphanNotice`).
    SUBSCRIPTIONS_RECORD_ORPHAN_NOTICE = 5,
    /// The entry whose calls this thread's `cancel()` waits for (`waitingOn`).
    SUBSCRIPTIONS_RECORD_WAITING_ON = 6,
    /// The previous live record (the list's back link, written by the shim).
    SUBSCRIPTIONS_RECORD_PREVIOUS = 7,
    /// The frames in use (`depth`).
    SUBSCRIPTIONS_RECORD_DEPTH = 8,
    /// The posts in progress (`posts`).
    SUBSCRIPTIONS_RECORD_POSTS = 9,
    /// The words of the header.
    SUBSCRIPTIONS_RECORD_HEADER_WORDS = 10,
};

/// Claims a record for the calling thread: a new zeroed mapping of `words` machine words, linked
/// into the list of live records. Registers its release at thread exit (unlinked at once, unmapped
/// once no scan section is open).
void *_subscriptions_claim_record(long words);

/// The calling thread's record (claimed on first use).
static inline void *_subscriptions_record(long words) {
    void *record = _subscriptions_current_record;
    return record ? record : _subscriptions_claim_record(words);
}

/// The calling thread's record, or NULL when it has none (never claims one).
static inline void *_subscriptions_record_if_claimed(void) { return _subscriptions_current_record; }

/// Opens a scan section and returns the first live record (`next` is word `SUBSCRIPTIONS_RECORD_NEXT`). Until the matching
/// `_subscriptions_scan_end`, no record reachable from it, or from a record's `waitingFor` link
/// read inside the section, is unmapped. Sections nest.
void *_subscriptions_scan_begin(void);

/// Closes a scan section; the last one to close unmaps the records of exited threads.
void _subscriptions_scan_end(void);

/// How many records are claimed by live threads.
long _subscriptions_claimed_records(void);

// The hint directory (see shims.c), read inline by scans filtered by route.
#define HINT_CHUNK_SHIFT 8
#define HINT_CHUNKS 256
extern _Atomic(uintptr_t *) _subscriptions_hint_chunks[HINT_CHUNKS];
extern _Atomic long _subscriptions_hint_high;
extern _Atomic long _subscriptions_hint_overflow;

/// One past the highest directory slot in use. Read without a scan section.
static inline long _subscriptions_hint_slots(void) {
    return atomic_load_explicit(&_subscriptions_hint_high, memory_order_seq_cst);
}

/// Chunk `index` of the hint directory: `1 << HINT_CHUNK_SHIFT` hints, then the records of those
/// slots (0 for a free slot); NULL when never used. Chunks are never freed: their hints are read
/// without a scan section, a slot's record only inside one.
static inline void *_subscriptions_hint_chunk(long index) {
    return atomic_load_explicit(&_subscriptions_hint_chunks[index], memory_order_acquire);
}

/// Lets later claims take only slots below `slots` (the directory's size by default): the
/// records claimed beyond get none, as when the directory is full. For tests.
void _subscriptions_limit_hint_slots(long slots);

/// 1 when every live record has a directory slot; 0 while one has none (then scans filtered by
/// route walk the list).
static inline int _subscriptions_hints_complete(void) {
    return atomic_load_explicit(&_subscriptions_hint_overflow, memory_order_seq_cst) == 0;
}

/// 1 when no other thread holds a record: the calling thread holds the only claimed one, or it
/// holds none and none is claimed. Then no other thread is inside a post (a thread claims its
/// record, with a full fence, before its first post). Runs a full fence before the final read.
int _subscriptions_owns_only_record(void);

/// Blocks the calling thread while the 32-bit word at `address` holds `expected` (Linux's
/// futex(2) wait, private to the process): returns at once when it holds something else, and
/// may return spuriously; the caller reads the word again. Elsewhere it yields the processor.
/// The library's lock on Linux (`_PlatformMutex`) sleeps here; its atomics, not this call, order
/// the memory its sections touch.
void _subscriptions_futex_wait(uint32_t *address, uint32_t expected);

/// Wakes one thread blocked in `_subscriptions_futex_wait` on `address` (none may be).
void _subscriptions_futex_wake_one(uint32_t *address);

/// How many times `_subscriptions_heavy_fence` ran in this process (for tests).
long _subscriptions_heavy_fence_count(void);

/// 1 when the calling thread is the process's main thread, else 0: Linux compares the thread id
/// with the process id, Apple platforms ask `pthread_main_np`. Spares the library Foundation's
/// `Thread.isMainThread`.
int _subscriptions_is_main_thread(void);

/// The calling thread's answer of `_subscriptions_is_main_thread`, kept once asked: 0 before,
/// 1 on the main thread, 2 elsewhere. A thread never changes that, so one system call per thread.
#if defined(__linux__) && !defined(__APPLE__)
extern __thread int _subscriptions_main_state __attribute__((tls_model("initial-exec")));
#else
extern __thread int _subscriptions_main_state;
#endif

/// `_subscriptions_is_main_thread`, asked once per thread: a thread-local load after the first call.
static inline int _subscriptions_is_main_thread_cached(void) {
    int state = _subscriptions_main_state;
    if (state == 0) {
        state = _subscriptions_is_main_thread() ? 1 : 2;
        _subscriptions_main_state = state;
    }
    return state == 1;
}

#endif
