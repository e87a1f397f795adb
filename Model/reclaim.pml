/*
 * reclaim.pml: slot buffers replaced while a post walks them (Route.lockedAppend growth,
 * lockedRebuild, lockedReclaim; Post._publishStable, _walk). Thread 0 posts: it publishes the
 * buffer it reads as a hazard pointer (frame.buffer), fences, re-reads the route's published
 * buffer until stable, and walks the slots; afterwards it may exit. Thread 1 subscribes F to
 * the full buffer 1 ([E]): it builds buffer 2 ([E, F]), publishes it, retires buffer 1 and
 * reclaims: heavy fence (or the only-thread shortcut), then frees buffer 1 if no record's
 * frame holds it. Thread 1 may own a record (it posted before) or not (the breach-3 case).
 */
#define NT 2
#define NE 2
#define E 1
#define F 2

bit freed[3];    /* ghost: buffer b was freed */

#include "engine.pml"

inline HANDLER(me, e) { skip }

proctype poster(byte me) {
    THREAD_LOCALS;
    CLAIM(me);
    ANNOUNCE(me);   /* _inPostFrame: before the buffer's publication */
    /* _publishStable: publish, fence, re-read until the two agree */
    p_b = LOADV(me, PUB);
    do
    :: STORE(me, HP(me), p_b);
       LIGHT(me);
#ifdef MUT_NO_HP_REREAD
       break
#else
       p_b2 = LOADV(me, PUB);
       if :: p_b2 == p_b -> break :: else -> p_b = p_b2 fi
#endif
    od;
    /* _walk */
    for (p_i : 0 .. NS - 1) {
        d_step { assert(!freed[p_b]); p_s = LOADV(me, SLOTB(p_b, p_i)) };
        if
        :: p_s != 0 ->
            STORE(me, AT(me), p_s);
            LIGHT(me);
            d_step { assert(!freed[p_b]); p_b2 = LOADV(me, SLOTB(p_b, p_i)) };
            if
            :: atomic { p_b2 == p_s && state[p_s] == ACTIVE -> BEGIN_CALL(me, p_s) }; CALL(me, p_s)
            :: else -> skip
            fi
        :: else -> skip
        fi
    }
    POP(me);
    if :: true -> EXIT(me) :: true -> skip fi;
    DONE
}

proctype subscriber(byte me) {
    THREAD_LOCALS;
    if :: true -> CLAIM(me) :: true -> skip fi;   /* it posted before, or never did */
    LOCK(me, STRIPE);
    /* lockedRebuild: a fresh buffer, initialised before it is published (releasing store) */
    d_step { mem[SLOTB(2, 0)] = E; mem[SLOTB(2, 1)] = F };
    tok[F] = 1;
    STORE(me, PUB, 2);
    /* lockedReclaim */
#ifndef MUT_RECLAIM_NO_HEAVY
    HEAVY(me, p_sec);
#endif
    p_s = 0;
    for (p_i : 0 .. NT - 1) {
        if :: claimed[p_i] && MAYCALL(me, p_i) && LOADV(me, HP(p_i)) == 1 -> p_s = 1 :: else -> skip fi
    }
    SECTION_END(me, p_sec);
    if :: p_s == 0 -> freed[1] = 1 :: else -> skip fi;
    UNLOCK(me, STRIPE);
    DONE
}

init {
    atomic {
        tok[E] = 1; mem[PUB] = 1; mem[SLOTB(1, 0)] = E;
        run poster(0); run subscriber(1)
#ifdef ADAPTIVE
        run switcher()
#endif
    }
    FINAL_CHECK(2)
}
