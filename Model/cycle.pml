/*
 * cycle.pml: cancels from inside handlers that wait for each other. Thread 0 posts X, and X's
 * handler cancels E (waiting for the thread running E). Thread 1 posts E; E's handler cancels
 * the next entry either from inside (a real cycle of waits) or after its post returned (the
 * stale-link case of breach 1: the waiter's waitingFor still names it). With -DTHREE a third
 * thread closes a cycle of three: 0 (in X) cancels E, 1 (in E) cancels Y, 2 (in Y) cancels X.
 */
#ifdef THREE
#define NT 3
#define NE 3
#else
#define NT 2
#define NE 2
#endif
#define X 1
#define E 2
#define Y 3

/* The entry thread `me` cancels: thread 0 cancels E; the last thread cancels X; in the cycle
 * of three, thread 1 cancels Y. */
#define TARGET(me) (me == 0 -> E : (me == NT - 1 -> X : Y))
#define OWN(me) (me == 0 -> X : (me == 1 -> E : Y))

#include "engine.pml"

inline HANDLER(me, e) {
    if
    :: me == 0 -> CANCEL(me, E, 1)
    :: me != 0 -> if :: true -> CANCEL(me, TARGET(me), 1) :: true -> skip fi
    fi
}

proctype thread(byte me) {
    THREAD_LOCALS;
    POST(me, OWN(me));
    if :: me != 0 -> CANCEL(me, TARGET(me), 1) :: else -> skip fi;
    DONE
}

init {
    atomic {
        tok[X] = 1; mem[SLOTE(X)] = X;
        tok[E] = 1; mem[SLOTE(E)] = E;
#ifdef THREE
        tok[Y] = 1; mem[SLOTE(Y)] = Y;
#endif
        run thread(0); run thread(1);
#ifdef THREE
        run thread(2);
#endif
#ifdef ADAPTIVE
        run switcher()
#endif
    }
    FINAL_CHECK(NT)
}
