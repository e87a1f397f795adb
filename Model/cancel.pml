/*
 * cancel.pml: the post/cancel handshake, the wait, cancel from inside the handler itself,
 * batched token drops and orphans. Threads 0 and 1 post the name of entry E (1); thread 1
 * exits afterwards (its record leaves the scanned set). Thread 0's call of E may cancel E from
 * inside its handler. Thread 2 cancels E with cancel() (waits) or drops its token (batched,
 * never waits). Every interleaving, both fence modes.
 */
#define NT 3
#define NE 1
#define E 1

#include "engine.pml"

inline HANDLER(me, e) {
    if
    :: me == 0 -> if :: true -> CANCEL(me, e, 1) :: true -> skip fi
    :: else -> skip
    fi
}

proctype poster(byte me) {
    THREAD_LOCALS;
    POST(me, E);
    if :: me == 1 -> EXIT(me) :: else -> skip fi;
    DONE
}

proctype canceller(byte me) {
    THREAD_LOCALS;
    if
    :: true -> CANCEL(me, E, 1)
    :: true -> DROP(me, E); FLUSH_BATCH(me)
    fi;
    DONE
}

init {
    atomic {
        tok[E] = 1; mem[SLOTE(E)] = E;
#if defined(ADAPTIVE) && !defined(ADAPT_FULL)
        /* ADAPTIVE: thread 1 does not post (the state space of the full scenario with the
         * switcher is too large for CI; -DADAPT_FULL runs it, by hand); the switcher is the
         * extra thread */
        run poster(0); run canceller(2); run switcher()
    }
    FINAL_CHECK(2)
#elif defined(ADAPTIVE)
        run poster(0); run poster(1); run canceller(2); run switcher()
    }
    FINAL_CHECK(3)
#else
        run poster(0); run poster(1); run canceller(2)
    }
    FINAL_CHECK(3)
#endif
}
