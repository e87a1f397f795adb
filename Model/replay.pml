/*
 * replay.pml: the replay hand-over (Retained.swift, _Replay.admit / finish). Thread 0
 * subscribed E with replay: the entry is published (in its slot, active) and not live yet; it
 * now delivers the retained value and then the posts parked meanwhile, each call inside a frame
 * (at = E, light fence, state check) like _beginQueuedCall. Thread 1 posts E: its call parks
 * the post while the entry is not live, else runs the handler. Thread 2 cancels E.
 */
#define NT 3
#define NE 1
#define E 1
#define S 0
#define P 1

bit live;        /* _Replay.live      */
byte parked;     /* parked posts      */

#include "engine.pml"

/* E's call on the posting thread is _Replay.admit; on the subscribing thread it is the handler. */
inline HANDLER(me, e) {
    if
    :: me == P ->
        if
        :: live -> skip                       /* delivered at once: the handler runs here */
        :: else ->
            LOCK(me, PARK);
            if :: live -> skip :: else -> parked++ fi;
            UNLOCK(me, PARK)
        fi
    :: else -> skip
    fi
}

/* One call of the hand-over: inside a frame with a state check (fixed), or bare (breach 2). */
inline HANDOVER_CALL(me) {
#ifdef MUT_HANDOVER_NO_FRAME
    atomic { BEGIN_CALL(me, E) }; CALL(me, E)
#else
    FRAMED_CALL(me, E)
#endif
}

proctype subscriber(byte me) {
    THREAD_LOCALS;
    byte n;
    HANDOVER_CALL(me);                        /* the retained value */
    do
    :: LOCK(me, PARK);
       if :: parked == 0 -> live = 1 :: else -> skip fi;
       n = parked; parked = 0;
       UNLOCK(me, PARK);
       if
       :: n == 0 -> break
       :: else -> do :: n > 0 -> HANDOVER_CALL(me); n-- :: else -> break od
       fi
    od;
    DONE
}

proctype poster(byte me) {
    THREAD_LOCALS;
    POST(me, E);
    DONE
}

proctype canceller(byte me) {
    THREAD_LOCALS;
    CANCEL(me, E, 1);
    DONE
}

init {
    atomic {
        tok[E] = 1; mem[SLOTE(E)] = E;
        run subscriber(0); run poster(1); run canceller(2)
#ifdef ADAPTIVE
        run switcher()
#endif
    }
    FINAL_CHECK(3)
}
