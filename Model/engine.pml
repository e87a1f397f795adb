/*
 * engine.pml: the memory model and the engine's protocols (post, cancel, wait and cycle check,
 * orphans, batched token drops, reclaim), shared by the scenario files of this folder.
 * See README.md for what is abstracted, why that is sound, and the map to the Swift code.
 *
 * A scenario file defines NT (threads), NE (entries 1..NE) and HANDLER(me, e), includes this
 * file, and declares its thread processes (each starts with THREAD_LOCALS).
 *
 * Switches (cpp -D): SYMMETRIC (the symmetric fence mode; default asymmetric), ADAPTIVE (the
 * fence mode switches at run time: fence_state, sections, a switcher thread; see README.md) and
 * the mutants MUT_* (each removes or weakens one mechanism; listed in README.md and
 * Scripts/model-check.sh).
 */

/* Store buffers: one per record-holding thread, plus one for the switcher (ADAPTIVE). */
#ifdef ADAPTIVE
#ifdef SYMMETRIC
#error ADAPTIVE and SYMMETRIC exclude each other
#endif
#define SW NT                           /* the switcher's thread number (it holds no record) */
#define NB (NT + 1)
#else
#define NB NT
#endif

/* ---------- Memory: TSO, one FIFO store buffer per thread ---------- */

/* Addresses of the words posts publish or read without a lock. */
#define AT(t)       (t)                 /* record t's frame: the entry it calls (0: none)        */
#define HP(t)       (NT + (t))          /* record t's frame: the slot buffer it reads (0: none)  */
#define PUB         (2 * NT)            /* the route's published buffer (reclaim scenario)       */
#define SLOTE(e)    (2 * NT + (e))      /* entry e's slot in its route's current buffer          */
#define NS 2                            /* slots per buffer (reclaim scenario)                   */
#define SLOTB(b, i) (2 * NT + NE + 1 + ((b) - 1) * NS + (i))
#define HINT(t)     (2 * NT + NE + 1 + 2 * NS + (t))   /* record t's routeHint (0: none yet)  */
#ifdef ADAPTIVE
#define FST         (3 * NT + NE + 1 + 2 * NS)   /* fence_state (ADAPTIVE)                    */
#define NA          (FST + 1)
#else
#define NA          (3 * NT + NE + 1 + 2 * NS)
#endif
#define ROUTE 1                         /* the one route of every scenario: its routeHint value */
#define IX(t, a)    ((t) * NA + (a))
#define SBCAP 3

byte mem[NA];
chan sb[NB] = [SBCAP] of { byte, byte };   /* pending (address, value), oldest first */
byte pend[NB * NA];                        /* pending stores of thread t to address a */
byte lastv[NB * NA];                       /* the newest of them (store forwarding)   */
bit mbreq[NB];                             /* membarrier: thread t owes a full barrier */
byte _fa, _fv, _u;   /* scratch of the d_steps, always reset (not hidden: pan's backtracking needs them) */

/* A plain (relaxed or releasing) store: enters the store buffer. */
inline STORE(t, a, v) {
    atomic { nfull(sb[t]) -> sb[t]!a, v; pend[IX(t, a)]++; lastv[IX(t, a)] = v }
}

/* A load: the thread's own newest pending store to the address, or memory. */
#define LOADV(t, a) (pend[IX(t, a)] > 0 -> lastv[IX(t, a)] : mem[a])

/* Writes the oldest pending store of thread t to memory (inside a d_step). */
#define FLUSH1(t) \
    sb[t]?_fa, _fv; mem[_fa] = _fv; pend[IX(t, _fa)]--; \
    if :: pend[IX(t, _fa)] == 0 -> lastv[IX(t, _fa)] = 0 :: else -> skip fi; \
    _fa = 0; _fv = 0

/* A full barrier of thread t: its store buffer drains (inside a d_step). */
#define DRAIN1(t) if :: nempty(sb[t]) -> FLUSH1(t) :: empty(sb[t]) -> skip fi
#define DRAIN(t) DRAIN1(t); DRAIN1(t); DRAIN1(t)   /* SBCAP times */

/* A sequentially consistent store of a word no post reads without a lock (x86 xchg: drains). */
inline SCSET(t, var, v) { d_step { DRAIN(t); var = v } }
/* The same for a word in `mem`. */
inline SCSTORE(t, a, v) { d_step { DRAIN(t); mem[a] = v } }

/* The processor: writes buffered stores to memory in order, at any time, and runs the full
 * barrier a membarrier owes a thread at any point of that thread's program. */
active proctype memory() {
end:
    do
    :: d_step { nempty(sb[0]) -> FLUSH1(0) }
    :: d_step { mbreq[0] -> DRAIN(0); mbreq[0] = 0 }
    :: d_step { nempty(sb[1]) -> FLUSH1(1) }
    :: d_step { mbreq[1] -> DRAIN(1); mbreq[1] = 0 }
#if NB > 2
    :: d_step { nempty(sb[2]) -> FLUSH1(2) }
    :: d_step { mbreq[2] -> DRAIN(2); mbreq[2] = 0 }
#endif
#if NB > 3
    :: d_step { nempty(sb[3]) -> FLUSH1(3) }
    :: d_step { mbreq[3] -> DRAIN(3); mbreq[3] = 0 }
#endif
    od
}

/* membarrier reaches every thread with a store buffer (the switcher too); NOT_IN: the
 * record-holding threads (the switcher never runs a handler). */
#if NB > 3
#define MBREQ_OTHERS(t) mbreq[0] = (t != 0) || mbreq[0]; mbreq[1] = (t != 1) || mbreq[1]; mbreq[2] = (t != 2) || mbreq[2]; mbreq[3] = (t != 3) || mbreq[3]
#define MB_DONE (mbreq[0] + mbreq[1] + mbreq[2] + mbreq[3] == 0)
#elif NB > 2
#define MBREQ_OTHERS(t) mbreq[0] = (t != 0) || mbreq[0]; mbreq[1] = (t != 1) || mbreq[1]; mbreq[2] = (t != 2) || mbreq[2]
#define MB_DONE (mbreq[0] + mbreq[1] + mbreq[2] == 0)
#else
#define MBREQ_OTHERS(t) mbreq[0] = (t != 0) || mbreq[0]; mbreq[1] = (t != 1) || mbreq[1]
#define MB_DONE (mbreq[0] + mbreq[1] == 0)
#endif
#if NT > 2
#define NOT_IN(e) (inh[0] != e && inh[1] != e && inh[2] != e)
#else
#define NOT_IN(e) (inh[0] != e && inh[1] != e)
#endif

/* ---------- Fences (Fence.swift) ---------- */

/* fence_state (ADAPTIVE): the word `mem[FST]`. */
#define ASYM 0
#define ON_PENDING 1
#define SYM 2
#define OFF_PENDING 3

/* _Fence.light(): a compiler fence (nothing) in the asymmetric mode, a full fence in the
 * symmetric one. ADAPTIVE: load fence_state (acquire: a plain load on x86); a full fence
 * unless it reads ASYM. */
inline LIGHT(t) {
#if defined(ADAPTIVE)
    if
#if defined(MUT_ADAPT_LIGHT_ON_PENDING_ONLY_SYM)
    :: LOADV(t, FST) == SYM -> FULL(t)
#elif defined(MUT_ADAPT_LIGHT_NO_FENCE_OFF_PENDING)
    :: LOADV(t, FST) == SYM || LOADV(t, FST) == ON_PENDING -> FULL(t)
#else
    :: LOADV(t, FST) != ASYM -> FULL(t)
#endif
    :: else -> skip
    fi
#elif defined(SYMMETRIC) && !defined(MUT_SYM_LIGHT_NOOP)
    d_step { DRAIN(t) }
#else
    skip
#endif
}

/* A full fence of the calling thread only (atomicMemoryFence(.sequentiallyConsistent)). */
inline FULL(t) { d_step { DRAIN(t) } }

/* _Fence.beginHeavy(): the shim's full fence, then membarrier(PRIVATE_EXPEDITED): every thread
 * runs a full barrier at some point before the call returns. Symmetric: the full fence only. */
inline MEMBARRIER(t) {
#ifdef SYMMETRIC
    FULL(t)
#else
    d_step { DRAIN(t); MBREQ_OTHERS(t) }
    MB_DONE
#endif
}

/* ---------- Thread records (ThreadRecords.swift, the C shim) ---------- */

bit claimed[NT];      /* t holds a claimed record (in the scanned set)  */
byte nclaimed;        /* _subscriptions_claimed_records()               */
byte wf[NT];          /* waitingFor: record + 1 (0: none), seq_cst      */
byte won[NT];         /* waitingOn: the entry waited for, seq_cst       */
bit note[NT];         /* the orphan note, seq_cst                       */
byte lk[3];           /* locks: holder + 1 (0: free)                    */
#define STRIPE 0
#define OLIST 1
#define PARK 2

/* A lock: acquire and release are read-modify-writes (full barriers on x86). */
inline LOCK(t, l) { atomic { lk[l] == 0 -> lk[l] = t + 1; DRAIN(t) } }
inline UNLOCK(t, l) { d_step { DRAIN(t); lk[l] = 0 } }

/* _subscriptions_claim_record: an atomic increment, then a full fence. */
inline CLAIM(t) {
    if
    :: !claimed[t] -> d_step { DRAIN(t); claimed[t] = 1; nclaimed++ }
    :: else -> skip
    fi
}

/* A thread exits: its record leaves the scanned set (release_record: an atomic decrement). */
inline EXIT(t) {
    if
    :: claimed[t] -> d_step { DRAIN(t); claimed[t] = 0; nclaimed-- }
    :: else -> skip
    fi
}

/* The heavy fence with the only-thread shortcut: a plain full fence when no other thread
 * holds a record (the calling thread owns the sole claimed record, or holds none and none is
 * claimed). The full fence runs BEFORE the claimed count is read;
 * SHORTCUT_AS_CODED reads the count first, as Route.swift does today (refuted: README.md,
 * "Findings"). */
#ifdef MUT_SHORTCUT_ANY_OWNER
#define ONLY(t) (nclaimed <= 1)
#else
#define ONLY(t) (nclaimed == claimed[t])   /* its own record alone, or none at all */
#endif
inline HEAVY_FIXED(t) {
#ifndef SHORTCUT_AS_CODED
    FULL(t);
#endif
    if
    :: ONLY(t) -> skip   /* the full fence above is the shortcut's fence (_Fence.heavy runs none) */
    :: else -> MEMBARRIER(t)
    fi
}

/* ---------- Adaptive fences (ADAPTIVE; the shim's fence_state and sections) ---------- */

byte sections;   /* heavy fences inside a section; changed only by read-modify-writes */

/* The heavy fence's begin (_subscriptions_heavy_begin): count in (an RMW: drains), read
 * fence_state; SYM: a plain full fence, and the caller is inside a section (sec = 1) until
 * SECTION_END after its scan; otherwise count out (an RMW) and take the membarrier path. */
inline SECTION_BEGIN(t, sec) {
#ifdef MUT_ADAPT_READ_BEFORE_COUNT
    h_st = LOADV(t, FST);
    d_step { DRAIN(t); sections++ };
#else
    d_step { DRAIN(t); sections++ };
    h_st = LOADV(t, FST);
#endif
    if
#ifdef MUT_ADAPT_SECTION_ON_PENDING
    :: h_st == SYM || h_st == ON_PENDING -> FULL(t); sec = 1
#else
    :: h_st == SYM -> FULL(t); sec = 1
#endif
    :: else -> d_step { DRAIN(t); sections-- }
    fi;
    h_st = 0
}

/* The heavy fence's end (_subscriptions_heavy_end), after the scan: count out (an RMW). */
inline SECTION_END(t, sec) {
#if defined(ADAPTIVE) && !defined(MUT_ADAPT_NO_END)
    if :: sec -> d_step { DRAIN(t); sections--; sec = 0 } :: else -> skip fi
#elif defined(ADAPTIVE)
    sec = 0
#else
    skip
#endif
}

/* _Fence.beginHeavy(onlyThread:): ADAPTIVE: a section when fence_state reads SYM, else the
 * fixed-mode heavy fence (full fence, only-thread shortcut or membarrier). */
inline HEAVY(t, sec) {
#ifdef ADAPTIVE
    SECTION_BEGIN(t, sec);
    if :: sec -> skip :: else -> HEAVY_FIXED(t) fi
#else
    HEAVY_FIXED(t)
#endif
}

/* The same without the only-thread shortcut (the orphan sweep's fence). */
inline HEAVY_MB(t, sec) {
#ifdef ADAPTIVE
    SECTION_BEGIN(t, sec);
    if :: sec -> skip :: else -> MEMBARRIER(t) fi
#else
    MEMBARRIER(t)
#endif
}

#ifdef ADAPTIVE
#ifndef CYCLES
#define CYCLES 2
#endif
/* The switcher (switch-on by a heavy-path canceller, switch-off by the decay job _Fence.decay),
 * as one extra thread that holds no record and never posts: up to CYCLES times, switch on
 * (CAS ASYM -> ON_PENDING, membarrier, release store SYM), then switch off (CAS SYM ->
 * OFF_PENDING, wait until sections == 0, release store ASYM); it may stop at any point. Its
 * release stores go through its store buffer. */
proctype switcher() {
    byte s_n;
    bit s_ok;
    do
    :: s_n < CYCLES ->
        s_n++;
        /* switch on */
        d_step { DRAIN(SW); if :: mem[FST] == ASYM -> mem[FST] = ON_PENDING; s_ok = 1 :: else -> s_ok = 0 fi };
        if :: !s_ok -> break :: else -> skip fi;
#ifndef MUT_ADAPT_ON_NO_MEMBARRIER
        d_step { DRAIN(SW); MBREQ_OTHERS(SW) };
        MB_DONE;
#endif
        STORE(SW, FST, SYM);
        if :: true -> skip :: true -> break fi;
        /* switch off (the decay job) */
        d_step { DRAIN(SW); if :: mem[FST] == SYM -> mem[FST] = OFF_PENDING; s_ok = 1 :: else -> s_ok = 0 fi };
        if :: !s_ok -> break :: else -> skip fi;
#ifndef MUT_ADAPT_OFF_NO_WAIT
        sections == 0;
#endif
        STORE(SW, FST, ASYM)
    :: true -> break
    od;
    s_n = 0; s_ok = 0
}
#endif

/* The entry record t's frame calls, as t itself sees it (the truth, for the ghost checks). */
#define OWNAT(t) LOADV(t, AT(t))

/* ---------- Entries (Entry.swift) ---------- */

#define ACTIVE 0
#define CANCELLED 2
byte state[NE + 1];   /* seq_cst stores */
bit tok[NE + 1];      /* the token still owns the entry (token._entry != nil) */
/* Ghosts. */
bit released[NE + 1]; /* the handler closure was released                                   */
bit cret[NE + 1];     /* a cancel() or drop of the entry returned                            */
bit exempt[NE + 1];   /* it returned at once: inside the handler itself, a cycle, or a drop   */
byte inh[NT];         /* the entry whose handler thread t is running (0: none)               */
byte nrel;            /* releases so far                                                     */

inline RELEASE(e) {
    d_step { assert(!released[e]); released[e] = 1; nrel++ }
}

/* ---------- Orphans (Orphans.swift) ---------- */

byte opark[NE + 1];   /* parked in the orphan list     */
byte ohold[NE + 1];   /* holders last seen (bit mask)  */

/* One pass over the list (Orphans.sweep), under the list lock. o_me: the noticed record + 1
 * (0: none); o_parked: the entry this collect parked (0: none). Sets o_new to the holders it
 * noted that no earlier pass of this collect had noted. */
inline SWEEP(me) {
    LOCK(me, OLIST);
    o_all = 0;
    for (o_e : 1 .. NE) {
        if
        :: opark[o_e] ->
            o_h = 0;
            for (o_t : 0 .. NT - 1) {
                if
                :: claimed[o_t] && LOADV(me, AT(o_t)) == o_e ->
                    SCSET(me, note[o_t], 1);
                    o_h = o_h | (1 << o_t)
                :: else -> skip
                fi
            }
            if
            :: o_h != 0 ->
                o_all = o_all | o_h;
#ifdef ORPHAN_AS_CODED
                ohold[o_e] = o_h
#else
                ohold[o_e] = ohold[o_e] | o_h      /* every record ever seen calling it */
#endif
            :: o_h == 0 && (o_e == o_parked || (o_me != 0 && (ohold[o_e] & (1 << (o_me - 1))) != 0)) ->
                o_free = o_free | (1 << o_e); opark[o_e] = 0; ohold[o_e] = 0
            :: else -> skip
            fi
        :: else -> skip
        fi
    }
    o_new = o_all & ~o_seen; o_seen = o_seen | o_all;
    UNLOCK(me, OLIST)
}

/* Orphans.collect: clear the note, sweep; while a pass noted a holder no earlier pass noted:
 * heavy fence, sweep again (as coded today: once, if any holder was noted); release what this
 * thread may release, outside the lock. */
inline COLLECT(me, noticed, parked) {
    o_me = noticed; o_parked = parked; o_free = 0; o_seen = 0; o_pass = 0;
    if :: o_me != 0 -> SCSET(me, note[me], 0) :: else -> skip fi;
    do
    :: SWEEP(me);
       SECTION_END(me, o_sec);
       o_pass++;
#if defined(MUT_NO_SECOND_SWEEP)
       break
#elif defined(ORPHAN_AS_CODED)
       if :: o_all == 0 || o_pass == 2 -> break :: else -> skip fi;
#else
       if :: o_new == 0 -> break :: else -> skip fi;
#endif
#ifndef MUT_ORPHAN_NO_HEAVY
       HEAVY_MB(me, o_sec)
#else
       skip
#endif
    od;
    for (o_e : 1 .. NE) {
        if :: (o_free & (1 << o_e)) != 0 -> RELEASE(o_e) :: else -> skip fi
    }
    o_me = 0; o_parked = 0; o_free = 0; o_all = 0; o_new = 0; o_seen = 0; o_e = 0; o_t = 0; o_h = 0; o_pass = 0
}

/* Orphans.add */
inline ORPHAN(me, e) {
    LOCK(me, OLIST); opark[e] = 1; UNLOCK(me, OLIST);
    COLLECT(me, 0, e)
}

/* ---------- Frames and calls (Post.swift, Route._beginQueuedCall, ThreadRecord.pop) ---------- */

/* The handler runs: the ghost `inh` is set in the same step as the state check that admits it
 * (the check is the call's start: a canceller's state store is ordered before or after it). */
inline BEGIN_CALL(me, e) {
    assert(!released[e]);
    assert(!cret[e] || exempt[e]);   /* after a waiting cancel() returned, no call starts */
    inh[me] = e
}
inline END_CALL(me, e) {
    assert(!released[e]);            /* the handler's captures are alive while it runs */
    inh[me] = 0
}
inline CALL(me, e) {
    HANDLER(me, e);
    END_CALL(me, e)
}

/* ThreadRecord.pop: at = buffer = 0 (releasing), light fence, collect if noted. */
inline POP(me) {
    STORE(me, AT(me), 0);
    if :: LOADV(me, HP(me)) != 0 -> STORE(me, HP(me), 0) :: else -> skip fi;
    LIGHT(me);
    if :: note[me] -> COLLECT(me, me + 1, 0) :: else -> skip fi
}

/* _ThreadRecord.announce: the route hint, stored only when it changes, before the frame
 * publishes what it calls and before that frame's fence (MUT_HINT_AFTER_FENCE: after it). */
inline ANNOUNCE(me) {
    if :: LOADV(me, HINT(me)) != ROUTE -> STORE(me, HINT(me), ROUTE) :: else -> skip fi
}

/* A canceller's filter (_ThreadRecord.mayCall(on:)): record t's hint names the route. */
#define MAYCALL(me, t) (LOADV(me, HINT(t)) == ROUTE)

/* A post that reaches entry e in its slot (Post._walk for one slot): at = e, light fence,
 * re-read the slot, check the state, call. */
inline POST(me, e) {
    CLAIM(me);
#ifndef MUT_HINT_AFTER_FENCE
    ANNOUNCE(me);
#endif
    p_s = LOADV(me, SLOTE(e));
    if
    :: p_s != 0 ->
        STORE(me, AT(me), e);
        LIGHT(me);
#ifdef MUT_HINT_AFTER_FENCE
        ANNOUNCE(me);
#endif
#ifndef MUT_NO_REREAD
        p_s = LOADV(me, SLOTE(e));
#endif
        /* the state check reads the entry: it must not have been released (freed) */
        d_step {
            p_b = 0;
            if
            :: p_s != 0 -> assert(!released[e]); if :: state[e] == ACTIVE -> p_b = 1; BEGIN_CALL(me, e) :: else -> skip fi
            :: else -> skip
            fi
        };
        if :: p_b -> CALL(me, e) :: else -> skip fi;
        p_b = 0
    :: else -> skip
    fi;
    POP(me)
}

/* A call outside a post (Route._beginQueuedCall / _endQueuedCall, and the replay hand-over):
 * push a frame, at = e, light fence, check the state word, call, pop. */
inline FRAMED_CALL(me, e) {
    CLAIM(me);
    ANNOUNCE(me);
    STORE(me, AT(me), e);
    LIGHT(me);
    if
#ifndef MUT_NO_STATE_CHECK
    :: atomic { state[e] == ACTIVE -> BEGIN_CALL(me, e) }; CALL(me, e)
#else
    :: atomic { BEGIN_CALL(me, e) }; CALL(me, e)
#endif
    :: else -> skip
    fi;
    POP(me)
}

/* ---------- Cancel (Route.cancel) ---------- */

/* Ghost: whether record t waits (a live wait) for a record that still calls what t waits on. */
#define LIVE(t) (wf[t] != 0 && OWNAT(wf[t] - 1) == won[t])
#define LINK1(h, me) (LIVE(h) && wf[h] - 1 == me)
#if NT > 2
#define LINK2(h, me) (LIVE(h) && LIVE(wf[h] - 1) && wf[wf[h] - 1] - 1 == me)
#else
#define LINK2(h, me) false
#endif
#define REAL_CYCLE(h, e, me) (OWNAT(h) != e || LINK1(h, me) || LINK2(h, me))

/* Ghost: a real cycle existed at some moment of the check (it holds from then until one of
 * its waiters sees it and returns). */
#define NOTE_REAL(me) if :: REAL_CYCLE(c_h, c_e, me) -> c_real = 1 :: else -> skip fi

/* Whether following waitingFor links from record c_r leads back to `me`, each link counting only
 * while its target still calls the waiter's waitingOn (ThreadRecord.closesCycle, fixed). */
inline CYCLE_CHECK(me) {
    c_cyc = 0; c_steps = 0; c_real = 0;
    do
#ifndef MUT_BOUND_IS_CYCLE
    /* The code's step bound (4096 in closesCycle): no cycle, as the code returns. NT hops that
     * did not reach `me` went round a loop of other threads: `me` is in no cycle, the loop's
     * members see their own, and `me` re-checks on its next wake. */
    :: c_steps >= NT -> c_cyc = 0; break
#else
    :: c_steps >= NT -> c_cyc = 1; break      /* the old model: the bound treated as a cycle */
#endif
    :: else ->
        d_step { c_nx = wf[c_r]; NOTE_REAL(me) };
        if :: c_nx == 0 -> break :: else -> skip fi;
        d_step { c_on = won[c_r]; NOTE_REAL(me) };
#ifndef MUT_STALE_LINK
        if :: d_step { LOADV(me, AT(c_nx - 1)) != c_on -> NOTE_REAL(me) }; break :: else -> NOTE_REAL(me) fi;
        if :: d_step { wf[c_r] != c_nx -> NOTE_REAL(me) }; break :: else -> NOTE_REAL(me) fi;   /* the link still stands */
#endif
        if :: c_nx - 1 == me -> c_cyc = 1; break :: else -> skip fi;
        c_r = c_nx - 1; c_steps++
    od
}


/* The wait loop's sleep: blocks until a re-check could end differently (the holder moved off
 * `e`, or some waitingFor link changed). Spin then reports a wait that never ends as an
 * invalid end state (a deadlock). */
#define WAKE(me) (LOADV(me, AT(c_h)) != c_e || wf[0] != c_w0 || wf[1] != c_w1 || WF2CHG)
#if NT > 2
#define WF2CHG (wf[2] != c_w2)
#define SNAP_WF c_w0 = wf[0]; c_w1 = wf[1]; c_w2 = wf[2]
#else
#define WF2CHG false
#define SNAP_WF c_w0 = wf[0]; c_w1 = wf[1]
#endif

/* Route.cancel(token, wait:). wait = 0 is a token drop: see DROP for the batched form. */
inline CANCEL(me, e, wait) {
    CLAIM(me);
    c_e = e; c_found = 0; c_mine = 0; c_others = 0; c_cyc = 0;
    LOCK(me, STRIPE);
    if
    :: tok[c_e] ->
        tok[c_e] = 0; c_found = 1;
        /* Route.cancel stores both relaxed: the unlock's read-modify-write drains them (x86),
         * and the heavy fence after it orders them in any case. `state` is not a buffered word
         * of this model: its store takes effect where the slot's leaves the buffer at the latest. */
        SCSET(me, state[c_e], CANCELLED);
        STORE(me, SLOTE(c_e), 0)
    :: else -> skip
    fi;
    UNLOCK(me, STRIPE);
    if
    :: c_found ->
#ifndef MUT_NO_HEAVY
        HEAVY(me, c_sec);
#endif
        for (c_t : 0 .. NT - 1) {
            c_hit = (claimed[c_t] && MAYCALL(me, c_t) && LOADV(me, AT(c_t)) == c_e);
            if
            :: c_hit ->
#ifndef MUT_IGNORE_SELF
                if :: c_t == me -> c_mine = 1 :: else -> c_others = c_others | (1 << c_t) fi
#else
                if :: c_t == me -> skip :: else -> c_others = c_others | (1 << c_t) fi
#endif
            :: else -> skip
            fi
        }
        SECTION_END(me, c_sec);
        if
        :: c_others == 0 && !c_mine ->
            RELEASE(c_e);
            d_step { cret[c_e] = 1; assert(NOT_IN(c_e)) }
        :: else -> if
            :: c_mine || !wait -> c_cyc = 1   /* returns at once, like a cycle */
            :: else ->
                for (c_h : 0 .. NT - 1) {
                    if
                    :: !c_cyc && (c_others & (1 << c_h)) != 0 ->
                        SCSET(me, won[me], c_e);
                        SCSET(me, wf[me], c_h + 1);
                        do
                        :: LOADV(me, AT(c_h)) != c_e -> break
                        :: else ->
#ifndef MUT_NO_CYCLE_CHECK
                            c_r = c_h;
                            CYCLE_CHECK(me);
                            if
                            :: c_cyc -> assert(c_real); break
                            :: else -> skip
                            fi;
#endif
                            /* backoff: sleep until something could have changed */
                            SNAP_WF;
                            WAKE(me)
                        od;
                        SCSET(me, wf[me], 0);
                        SCSET(me, won[me], 0)
                    :: else -> skip
                    fi
                }
                if
                :: !c_cyc ->
                    RELEASE(c_e);
                    d_step { cret[c_e] = 1; assert(NOT_IN(c_e)) }
                :: else -> skip
                fi
            fi
        fi;
        if
        :: c_cyc ->
            d_step { cret[c_e] = 1; exempt[c_e] = 1 };
            ORPHAN(me, c_e)
        :: else -> skip
        fi
    :: else -> skip
    fi;
    c_e = 0; c_found = 0; c_mine = 0; c_others = 0; c_cyc = 0; c_h = 0; c_t = 0; c_r = 0;
    c_nx = 0; c_on = 0; c_steps = 0; c_real = 0; c_w0 = 0; c_w1 = 0; c_w2 = 0
}

/* ---------- Token drops, batched (one heavy fence per batch) ---------- */

byte batch;   /* bit mask of dropped entries not yet fenced, under the stripe lock */

/* A token's deinit: under the lock, cancel the entry and zero its slot; retire it into the
 * batch. Never waits, never fences. */
inline DROP(me, e) {
    CLAIM(me);
    LOCK(me, STRIPE);
    if
    :: tok[e] ->
        tok[e] = 0;
        SCSET(me, state[e], CANCELLED);
        STORE(me, SLOTE(e), 0);   /* relaxed, as in CANCEL */
        batch = batch | (1 << e)
    :: else -> skip
    fi;
    UNLOCK(me, STRIPE);
    d_step { cret[e] = 1; exempt[e] = 1 }
}

/* The settling job's flush (Retirements.settleByJob): one heavy fence, then each entry no record
 * calls is released, each other one becomes an orphan, on the job's own thread. */
inline FLUSH_BATCH(me) {
    LOCK(me, STRIPE);
    b_set = batch; batch = 0;
    UNLOCK(me, STRIPE);
    if
    :: b_set != 0 ->
#ifndef MUT_DROP_NO_HEAVY
        HEAVY(me, b_sec);
#endif
        for (b_e : 1 .. NE) {
            if
            :: (b_set & (1 << b_e)) != 0 ->
                b_held = 0;
#ifndef MUT_DROP_NO_SCAN
                for (b_t : 0 .. NT - 1) {
                    if :: claimed[b_t] && LOADV(me, AT(b_t)) == b_e -> b_held = 1 :: else -> skip fi
                }
#endif
                if :: b_held -> ORPHAN(me, b_e) :: else -> RELEASE(b_e) fi
            :: else -> skip
            fi
        }
        SECTION_END(me, b_sec)
    :: else -> skip
    fi;
    b_set = 0; b_e = 0; b_t = 0; b_held = 0
}

/* A batch sorted out by a thread that is not the settling job (Retirements: the drop that fills
 * the batch, or cancel(), whose own fence serves the batch): take, heavy fence, scan, as
 * FLUSH_BATCH; then the entries go to the settling job (`job_rel`, `job_orph`), which releases
 * them and runs what their captures' deinits do (SETTLE_JOB). MUT_SETTLE_INLINE: the old code,
 * the sorting thread releases them itself, deinits included. A scenario that uses it defines
 * DEINIT(me, e): what releasing entry e's captures runs (`skip` for none). */
byte job_rel;    /* entries handed to the job to release (bit mask), seq_cst */
byte job_orph;   /* entries handed to the job to orphan */

inline SORT_BATCH(me) {
    LOCK(me, STRIPE);
    b_set = batch; batch = 0;
    UNLOCK(me, STRIPE);
    if
    :: b_set != 0 ->
        HEAVY(me, b_sec);
        for (b_e : 1 .. NE) {
            if
            :: (b_set & (1 << b_e)) != 0 ->
                b_held = 0;
                for (b_t : 0 .. NT - 1) {
                    if :: claimed[b_t] && LOADV(me, AT(b_t)) == b_e -> b_held = 1 :: else -> skip fi
                }
#ifndef MUT_SETTLE_INLINE
                if
                :: b_held -> d_step { job_orph = job_orph | (1 << b_e) }
                :: else -> d_step { job_rel = job_rel | (1 << b_e) }
                fi
#else
                if :: b_held -> b_orph = b_orph | (1 << b_e) :: else -> b_rel = b_rel | (1 << b_e) fi
#endif
            :: else -> skip
            fi
        }
        SECTION_END(me, b_sec);
#ifdef MUT_SETTLE_INLINE
        /* after the scan section, outside every lock, as the old Settled.finish() */
        for (b_e : 1 .. NE) {
            if
            :: (b_orph & (1 << b_e)) != 0 -> ORPHAN(me, b_e)
            :: (b_rel & (1 << b_e)) != 0 -> RELEASE(b_e); DEINIT(me, b_e)
            :: else -> skip
            fi
        }
#endif
        skip
    :: else -> skip
    fi;
    b_set = 0; b_e = 0; b_t = 0; b_held = 0; b_rel = 0; b_orph = 0
}

/* The settling job's finish (Settled.finishOnJob): orphans and releases what a SORT_BATCH handed
 * over, captures' deinits included, on the job's thread. Runs once, when something was handed
 * over (or returns at once when `give_up` holds: nothing will be). */
inline SETTLE_JOB(me, give_up) {
    if
    :: job_rel != 0 || job_orph != 0 ->
        d_step { b_rel = job_rel; b_orph = job_orph; job_rel = 0; job_orph = 0 };
        for (b_e : 1 .. NE) {
            if
            :: (b_orph & (1 << b_e)) != 0 -> ORPHAN(me, b_e)
            :: (b_rel & (1 << b_e)) != 0 -> RELEASE(b_e); DEINIT(me, b_e)
            :: else -> skip
            fi
        }
    :: give_up -> skip
    fi;
    b_e = 0; b_rel = 0; b_orph = 0
}

/* ---------- Locals of every thread process ---------- */

#define THREAD_LOCALS \
    byte p_s, p_b, p_b2, p_i; \
    byte c_e, c_t, c_h, c_r, c_nx, c_on, c_steps, c_others, c_w0, c_w1, c_w2; \
    bit c_found, c_mine, c_cyc, c_hit, c_real; \
    byte o_e, o_t, o_h, o_me, o_parked, o_free, o_all, o_new, o_seen, o_pass; \
    byte b_set, b_e, b_t, b_rel, b_orph; bit b_held; \
    bit c_sec, o_sec, b_sec, p_sec; byte h_st

/* ---------- End of run: every cancelled entry released exactly once ---------- */

byte ndone;
#define DONE ndone++

inline FINAL_CHECK(nthreads) {
    ndone == nthreads;
    for (_u : 1 .. NE) {
        assert(opark[_u] == 0);
        assert(tok[_u] || released[_u])
    }
}
