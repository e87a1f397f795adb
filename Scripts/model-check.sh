#!/usr/bin/env bash
# Model check: the Promela model of the engine's cancel protocol (Model/, see Model/README.md),
# verified exhaustively with Spin.
#
# 1. Every scenario of the model (cancel, cycle, replay, reclaim) in both fixed fence modes
#    (asymmetric: posts fence with a compiler fence only and cancellers run membarrier;
#    symmetric: full fences on both sides), and cancel, cycle and reclaim in the adaptive mode
#    (-DADAPTIVE: the mode switches at run time, a switcher thread turns it on and off twice)
#    must verify with no error: no assertion violated, no invalid end state (deadlock), no
#    search truncated.
# 2. Every mutant of the model (a -D switch of the Promela source that removes or weakens one
#    mechanism) must be refuted: Spin must find a counterexample. A mutant that survives fails
#    the script.
# 3. The findings (the protocol exactly as Swift code had it when the model was written, where
#    the model found it wrong) must be refuted too, so that the model keeps showing why the
#    fixed form is needed.
#
# Prints one line per run and last:
#
#   model: P of P runs verified; mutants: M, killed: K, survived: S; findings: F refuted;
#   equivalent (TSO or unreachable): Q of Q verified
#
# 4. The mutants listed as `equivalent` remove a mechanism the model cannot show is needed:
#    under x86-TSO (the model) they are safe, while the C11 argument of the code needs them
#    (Model/README.md, "Adaptive fences"), or the model cannot reach the branch they change
#    (MUT_BOUND_IS_CYCLE: the cycle check's step bound, see Model/README.md). They must verify;
#    should one ever be refuted, the model found more than the argument and the line says so.
#
# Installs Spin (Debian package `spin`) and gcc when missing (as root, non-interactive).
# About 2.5 minutes on 2 cores (two runs at a time); the largest runs (cycle, adaptive: 4.2 M
# states; cancel, asymmetric: 2.2 M) need ~400-600 MB of memory each.
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

rm -rf "$scratch"
mkdir -p "$scratch"

# One run: KIND (model, mutant, finding) ID SCENARIO MODE WHAT, in its own folder; writes
# `line` (what to print) and `status` (0: as expected).
run() {
    local n=$1 kind=$2 id=$3 scenario=$4 mode=$5 what=$6
    local dir="$scratch/$n"
    mkdir -p "$dir"
    cp "$root"/Model/*.pml "$dir"/
    cd "$dir"
    local defines=()
    [ "$mode" = symmetric ] && defines+=(-DSYMMETRIC)
    [ "$mode" = adaptive ] && defines+=(-DADAPTIVE)
    [ "$id" != - ] && defines+=("-D$id")
    local result stats="" errors states seconds
    if ! spin "${defines[@]}" -a "$scenario.pml" > spin.log 2>&1; then
        result="spin failed: $(head -1 spin.log)"
    else
        # -DSAFETY: safety properties (assertions, invalid end states); -DCOLLAPSE: compressed
        # state vectors; -O0: pan.c is large and -O2 compiles for minutes. pan -m: depth bound
        # (a truncated search counts as a failure).
        gcc -O0 -w -DSAFETY -DCOLLAPSE -o pan pan.c
        ./pan -m3000000 -w24 -n > pan.log 2>&1 || true
        errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.log | head -1)
        states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.log | head -1)
        seconds=$(sed -n 's/^pan: elapsed time \([0-9.e+-]*\) seconds.*/\1/p' pan.log | head -1)
        stats="${states:-?} states, ${seconds:-?} s"
        if [ "${errors:-x}" = 0 ] && ! grep -q "max search depth too small\|Search not completed" pan.log; then
            result=ok
        elif [ "${errors:-0}" != 0 ]; then
            result="refuted: $(grep -m1 "^pan:[0-9]*:" pan.log | cut -c1-100)"
        else
            result="incomplete search: $(grep -m1 "too small\|not completed" pan.log)"
        fi
        rm -f pan pan.[bchmpt]
    fi
    local ok=1 label
    case "$kind" in
    model)
        if [ "$result" = ok ]; then label=verified; ok=0; result="($stats)"; else label=FAILED; fi
        printf '%-11s %-8s %-10s %s\n' "$label" "$scenario" "$mode" "$result" > line ;;
    equivalent)
        if [ "$result" = ok ]; then label=equivalent; ok=0; result="verified ($stats)"; else label=REFUTED; fi
        printf '%-11s %-36s %-8s %-10s %s -> %s\n' "$label" "$id" "$scenario" "$mode" "$what" "$result" > line ;;
    *)
        if [ "${result#refuted}" != "$result" ]; then
            ok=0
            if [ "$kind" = mutant ]; then label=killed; else label=refuted; fi
        else
            if [ "$kind" = mutant ]; then label=SURVIVED; else label=NOT-REFUTED; fi
            [ "$result" = ok ] && result="verified ($stats)"
        fi
        printf '%-11s %-36s %-8s %-10s %s -> %s\n' "$label" "$id" "$scenario" "$mode" "$what" "$result" > line ;;
    esac
    echo "$ok" > status
}

# The runs: KIND ID SCENARIO MODE WHAT. Mutants: each removes or weakens one mechanism (the three
# breaches of issue 24 first); findings: the code as it was, refuted (Model/README.md).
runs_list() {
    for scenario in cancel cycle replay reclaim settle; do
        for mode in asymmetric symmetric; do
            echo "model - $scenario $mode the model"
        done
    done
    for scenario in cancel cycle reclaim; do
        echo "model - $scenario adaptive the model"
    done
    cat << 'EOF'
mutant MUT_STALE_LINK          cycle   asymmetric breach 1: a waitingFor link counts without checking that its target still calls waitingOn
mutant MUT_NO_CYCLE_CHECK      cycle   asymmetric a waiter never looks for a cycle: two handlers cancelling each other deadlock
mutant MUT_HANDOVER_NO_FRAME   replay  asymmetric breach 2: the replay hand-over calls without a frame or a state check
mutant MUT_NO_STATE_CHECK      replay  asymmetric a framed call outside a post (hand-over, queued) skips the state check
mutant MUT_SHORTCUT_ANY_OWNER  reclaim asymmetric breach 3: the only-thread shortcut when the sole record is another thread's
mutant MUT_NO_HP_REREAD        reclaim asymmetric a post publishes its buffer hazard pointer without re-reading the route
mutant MUT_RECLAIM_NO_HEAVY    reclaim asymmetric reclaim frees a retired buffer without the heavy fence
mutant MUT_NO_HEAVY            cancel  asymmetric cancel scans the records without the heavy fence
mutant MUT_NO_REREAD           cancel  asymmetric a post reads the entry without re-reading the slot after publishing at
mutant MUT_HINT_AFTER_FENCE    cancel  symmetric  a post stores its route hint after its full fence, so a canceller may skip its frame
mutant MUT_SYM_LIGHT_NOOP      cancel  symmetric  the symmetric mode without the posts' full fence
mutant MUT_IGNORE_SELF         cancel  asymmetric a cancel from inside the handler itself does not see its own frame
mutant MUT_NO_SECOND_SWEEP     cancel  asymmetric an orphan collect without the fence and second sweep
mutant MUT_ORPHAN_NO_HEAVY     cancel  asymmetric the orphan's second sweep without the heavy fence
mutant MUT_DROP_NO_HEAVY       cancel  asymmetric a batch of token drops flushed without its heavy fence
mutant MUT_DROP_NO_SCAN        cancel  asymmetric a batch of token drops releases without looking for holders
mutant MUT_SETTLE_INLINE       settle  asymmetric an unrelated cancel (or the drop that fills the batch) releases the batch itself and runs a dropped token's deinit, which waits for a held handler
mutant MUT_SETTLE_INLINE       settle  symmetric  the same in the symmetric form
mutant MUT_ADAPT_ON_NO_MEMBARRIER cancel adaptive switch-on stores SYM without its membarrier
mutant MUT_ADAPT_READ_BEFORE_COUNT reclaim adaptive the heavy fence reads fence_state before counting itself into sections
mutant MUT_ADAPT_LIGHT_ON_PENDING_ONLY_SYM cancel adaptive posts fence only when fence_state is SYM
mutant MUT_ADAPT_SECTION_ON_PENDING cancel adaptive the heavy fence takes the section path in ON_PENDING (before the switch-on's membarrier ended)
mutant MUT_ADAPT_NO_END        cancel  adaptive   a section never ends (a missing end): the switch-off waits forever
equivalent MUT_ADAPT_OFF_NO_WAIT  cancel  adaptive   switch-off stores ASYM without waiting for sections == 0
equivalent MUT_ADAPT_OFF_NO_WAIT  reclaim adaptive   switch-off stores ASYM without waiting for sections == 0
equivalent MUT_ADAPT_LIGHT_NO_FENCE_OFF_PENDING cancel adaptive posts do not fence in OFF_PENDING
equivalent MUT_BOUND_IS_CYCLE     cycle   asymmetric the cycle check's step bound taken for a cycle: unreachable with one frame per thread (Model/README.md)
finding SHORTCUT_AS_CODED      reclaim asymmetric the shortcut reads the claimed count before its full fence
finding ORPHAN_AS_CODED        cancel  asymmetric one second sweep; holders replaced, not accumulated
EOF
}

# Two runs at a time (the CI machine has 2 cores).
n=0
while read -r kind id scenario mode what; do
    n=$((n + 1))
    while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n || true; done
    (run "$n" "$kind" "$id" "$scenario" "$mode" "$what") &
done < <(runs_list)
wait

verified=0 runs=0 mutants=0 killed=0 survived=0 findings=0 failed=0 equivalents=0 equivalent=0
i=0
while read -r kind _; do
    i=$((i + 1))
    cat "$scratch/$i/line"
    status=$(cat "$scratch/$i/status")
    [ "$status" = 0 ] || failed=1
    case "$kind" in
    model) runs=$((runs + 1)); [ "$status" = 0 ] && verified=$((verified + 1)) ;;
    mutant) mutants=$((mutants + 1)); if [ "$status" = 0 ]; then killed=$((killed + 1)); else survived=$((survived + 1)); fi ;;
    finding) [ "$status" = 0 ] && findings=$((findings + 1)) ;;
    equivalent) equivalents=$((equivalents + 1)); [ "$status" = 0 ] && equivalent=$((equivalent + 1)) ;;
    esac
done < <(runs_list)

echo "model: $verified of $runs runs verified; mutants: $mutants, killed: $killed, survived: $survived; findings: $findings refuted; equivalent (TSO or unreachable): $equivalent of $equivalents verified"
exit "$failed"
