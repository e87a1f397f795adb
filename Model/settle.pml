/*
 * settle.pml: a batch of dropped tokens settled beside a running handler (issue 37). Thread 0
 * posts E, whose handler is held at a gate. Thread 1 drops D's token (parked in the batch); D's
 * captures cancel E in their deinit, so releasing them waits for thread 0. Thread 1 then serves
 * as the settling job (a dispatch worker): it finishes what another thread handed over, or
 * settles the batch itself (the timed job). Thread 2 does something unrelated, either a cancel()
 * of Z, which never ran (its fence serves the batch, so it sorts the batch out first), or a drop
 * of Z's token that fills the batch; then it opens the gate. Unrelated means it must return
 * while the handler is held: if it ran D's deinit, it would wait for thread 0, which waits for
 * the gate that only thread 2 opens, and Spin reports the deadlock (MUT_SETTLE_INLINE).
 */
#define NT 3
#define NE 3
#define E 1
#define D 2
#define Z 3

#include "engine.pml"

bit gate;      /* opened by thread 2 once its unrelated operation returned */
bit t2done;    /* thread 2 finished: nothing more will be handed over but what is pending */

inline HANDLER(me, e) {
    if :: e == E -> gate == 1 :: else -> skip fi
}

/* Releasing D's captures runs their deinit: a cancel() of E, which waits for E's running call. */
inline DEINIT(me, e) {
    if :: e == D -> CANCEL(me, E, 1) :: else -> skip fi
}

proctype poster() {
    THREAD_LOCALS;
    POST(0, E);
    DONE
}

proctype dropperThenJob() {
    THREAD_LOCALS;
    DROP(1, D);
    do
    :: job_rel != 0 || job_orph != 0 -> SETTLE_JOB(1, false)
    :: batch != 0 -> SORT_BATCH(1); SETTLE_JOB(1, true)   /* the timed job: sorts, then finishes */
    :: t2done && batch == 0 && job_rel == 0 && job_orph == 0 -> break
    od;
    DONE
}

proctype unrelated() {
    THREAD_LOCALS;
    if
    :: SORT_BATCH(2); CANCEL(2, Z, 1)
    :: DROP(2, Z); SORT_BATCH(2)
    fi;
    gate = 1;
    t2done = 1;
    DONE
}

init {
    atomic {
        tok[E] = 1; mem[SLOTE(E)] = E;
        tok[D] = 1; mem[SLOTE(D)] = D;
        tok[Z] = 1; mem[SLOTE(Z)] = Z;
        run poster(); run dropperThenJob(); run unrelated();
#ifdef ADAPTIVE
        run switcher()
#endif
    }
    FINAL_CHECK(3)
}
