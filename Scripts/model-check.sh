#!/usr/bin/env bash
# Model check: the Promela model of the engine's cancel protocol (Model/, see Model/README.md),
# verified exhaustively with Spin.
#
# 1. Every scenario of the model (cancel, cycle, replay, reclaim) in both fence modes
#    (asymmetric: posts fence with a compiler fence only and cancellers run membarrier;
#    symmetric: full fences on both sides) must verify with no error: no assertion violated,
#    no invalid end state (deadlock), no search truncated.
# 2. Every mutant of the model (a -D switch of the Promela source that removes or weakens one
#    mechanism) must be refuted: Spin must find a counterexample. A mutant that survives fails
#    the script.
# 3. The findings (the protocol exactly as Swift code had it when the model was written, where
#    the model found it wrong) must be refuted too, so that the model keeps showing why the
#    fixed form is needed.
#
# Prints one line per run and last:
#
#   model: P of P runs verified; mutants: M, killed: K, survived: S; findings: F refuted
#
# Installs Spin (Debian package `spin`) and gcc when missing (as root, non-interactive).
# About 40 s on 2 cores; at most ~700 MB of memory for the largest run (cancel, asymmetric).
# Environment: MODEL_SCRATCH (default .build/model-check): where pan is generated and built.
# Usage: Scripts/model-check.sh [-h]
set -euo pipefail

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
fi

root=$(cd "$(dirname "$0")/.." && pwd)
scratch="${MODEL_SCRATCH:-$root/.build/model-check}"

if ! command -v spin > /dev/null || ! command -v gcc > /dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq spin gcc > /dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq spin gcc > /dev/null; }
fi

mkdir -p "$scratch"
cp "$root"/Model/*.pml "$scratch"/
cd "$scratch"

verified=0
runs=0
mutants=0
killed=0
survived=0
findings=0
failed=0

# verify NAME FILE [DEFINES...]: runs Spin exhaustively; sets `result` (ok or the first error
# line) and `stats` (states and seconds).
verify() {
    local file=$1
    shift
    rm -f pan pan.* ./*.trail
    if ! spin "$@" -a "$file" > spin.log 2>&1; then
        result="spin failed: $(head -1 spin.log)"
        stats=""
        return
    fi
    # -DSAFETY: safety properties only (assertions, invalid end states); -DCOLLAPSE: compressed
    # state vectors. pan -m: depth bound (a truncated search is reported as a failure below).
    gcc -O0 -w -DSAFETY -DCOLLAPSE -o pan pan.c   # -O0: pan.c is large, -O2 compiles for minutes
    ./pan -m3000000 -w24 -n > pan.log 2>&1 || true
    local errors states seconds
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.log | head -1)
    states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.log | head -1)
    seconds=$(sed -n 's/^pan: elapsed time \([0-9.e+-]*\) seconds.*/\1/p' pan.log | head -1)
    stats="${states:-?} states, ${seconds:-?} s"
    if [ "${errors:-x}" = "0" ] && ! grep -q "max search depth too small\|Search not completed" pan.log; then
        result=ok
    elif [ "${errors:-0}" != "0" ]; then
        result=$(grep -m1 "^pan:[0-9]*:\|^pan: " pan.log | cut -c1-110)
    else
        result="incomplete search: $(grep -m1 "too small\|not completed" pan.log)"
    fi
}

mode_flag() { [ "$1" = symmetric ] && echo "-DSYMMETRIC" || true; }

# 1. The model.
for scenario in cancel cycle replay reclaim; do
    for mode in asymmetric symmetric; do
        runs=$((runs + 1))
        # shellcheck disable=SC2046
        verify "$scenario.pml" $(mode_flag "$mode")
        if [ "$result" = ok ]; then
            verified=$((verified + 1))
            printf 'verified  %-8s %-10s (%s)\n' "$scenario" "$mode" "$stats"
        else
            failed=1
            printf 'FAILED    %-8s %-10s %s\n' "$scenario" "$mode" "$result"
        fi
    done
done

# 2. Mutants: ID scenario mode what-it-breaks.
while read -r id scenario mode what; do
    [ -z "$id" ] && continue
    mutants=$((mutants + 1))
    # shellcheck disable=SC2046
    verify "$scenario.pml" $(mode_flag "$mode") "-D$id"
    if [ "$result" != ok ] && [ "${result#spin failed}" = "$result" ] && [ "${result#incomplete}" = "$result" ]; then
        killed=$((killed + 1))
        printf 'killed    %-24s %-8s %-10s %s -> %s\n' "$id" "$scenario" "$mode" "$what" "$result"
    else
        survived=$((survived + 1))
        failed=1
        printf 'SURVIVED  %-24s %-8s %-10s %s (%s)\n' "$id" "$scenario" "$mode" "$what" "$result ${stats}"
    fi
done << 'EOF'
MUT_STALE_LINK          cycle   asymmetric  breach 1: a waitingFor link counts without checking that its target still calls waitingOn
MUT_NO_CYCLE_CHECK      cycle   asymmetric  a waiter never looks for a cycle: two handlers cancelling each other deadlock
MUT_HANDOVER_NO_FRAME   replay  asymmetric  breach 2: the replay hand-over calls without a frame or a state check
MUT_NO_STATE_CHECK      replay  asymmetric  a framed call outside a post (hand-over, queued) skips the state check
MUT_SHORTCUT_ANY_OWNER  reclaim asymmetric  breach 3: the only-thread shortcut when the sole record is another thread's
MUT_NO_HP_REREAD        reclaim asymmetric  a post publishes its buffer hazard pointer without re-reading the route
MUT_RECLAIM_NO_HEAVY    reclaim asymmetric  reclaim frees a retired buffer without the heavy fence
MUT_NO_HEAVY            cancel  asymmetric  cancel scans the records without the heavy fence
MUT_NO_REREAD           cancel  asymmetric  a post calls without re-reading the slot after publishing at
MUT_SYM_LIGHT_NOOP      cancel  symmetric   the symmetric mode without the posts' full fence
MUT_IGNORE_SELF         cancel  asymmetric  a cancel from inside the handler itself does not see its own frame
MUT_NO_SECOND_SWEEP     cancel  asymmetric  an orphan collect without the fence and second sweep
MUT_ORPHAN_NO_HEAVY     cancel  asymmetric  the orphan's second sweep without the heavy fence
MUT_DROP_NO_HEAVY       cancel  asymmetric  a batch of token drops flushed without its heavy fence
MUT_DROP_NO_SCAN        cancel  asymmetric  a batch of token drops releases without looking for holders
EOF

# 3. Findings: the code as it was, refuted by the model (Model/README.md, "Findings").
while read -r id scenario mode what; do
    [ -z "$id" ] && continue
    # shellcheck disable=SC2046
    verify "$scenario.pml" $(mode_flag "$mode") "-D$id"
    if [ "$result" != ok ] && [ "${result#spin failed}" = "$result" ] && [ "${result#incomplete}" = "$result" ]; then
        findings=$((findings + 1))
        printf 'refuted   %-24s %-8s %-10s %s -> %s\n' "$id" "$scenario" "$mode" "$what" "$result"
    else
        failed=1
        printf 'NOT REFUTED %-22s %-8s %-10s %s (%s)\n' "$id" "$scenario" "$mode" "$what" "$result"
    fi
done << 'EOF'
SHORTCUT_AS_CODED       reclaim asymmetric  the shortcut reads the claimed count before its full fence
ORPHAN_AS_CODED         cancel  asymmetric  one second sweep; holders replaced, not accumulated
EOF

echo "model: $verified of $runs runs verified; mutants: $mutants, killed: $killed, survived: $survived; findings: $findings refuted"
exit "$failed"
