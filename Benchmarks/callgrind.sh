#!/usr/bin/env bash
# Instructions per operation, counted by valgrind's callgrind: independent of machine load, so
# fit for comparing designs on a shared machine.
#
#   Benchmarks/callgrind.sh [MODE ...]
#
# Builds SubscriptionsBenchmarks in release, then for each mode runs
# `SubscriptionsBenchmarks --callgrind MODE N` under callgrind twice, with N = $ITERATIONS and
# with N = 0 (set-up and process start only), and prints (Ir(N) - Ir(0)) / N.
# Modes: see `SubscriptionsBenchmarks --help`. Default: every mode.
#
# Environment:
#   SCRATCH=path     build folder (default: .build)
#   ITERATIONS=n     operations per measured run (default: 100000)
#   OUT=dir          where the callgrind.out files go (default: a new temporary folder)
#   ANNOTATE=1       also print callgrind_annotate's top functions for each measured run
set -euo pipefail
cd "$(dirname "$0")/.."

scratch=${SCRATCH:-.build}
iterations=${ITERATIONS:-100000}
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/subscriptions-callgrind.XXXXXX")}
mkdir -p "$out"

command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }

echo "== build (release)" >&2
# DWARF 4 for the C shim: the valgrind of Debian 12 (3.19) cannot read clang's default DWARF 5.
swift build -c release -Xcc -gdwarf-4 --product SubscriptionsBenchmarks --scratch-path "$scratch" >&2
bin="$(swift build -c release -Xcc -gdwarf-4 --scratch-path "$scratch" --show-bin-path)/SubscriptionsBenchmarks"

if [ "$#" -gt 0 ]; then
    modes=("$@")
else
    modes=(typed1 typed10 coalesced1 plain1 plainsender1 envelope1 nc1 ncsender1 nc10 loop1 unheard typedunheard ncunheard subcancel subcancel100k subdrop ncsubcancel subcancel1k subcancelfirst)
fi

# Runs one mode with n operations under callgrind; prints the instructions executed.
instructions() {
    local mode=$1 n=$2
    local log="$out/log.$mode.$n"
    SWIFT_BACKTRACE=enable=no SWIFT_DETERMINISTIC_HASHING=1 \
        valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out.$mode.$n" \
        "$bin" --callgrind "$mode" "$n" >"$out/stdout.$mode.$n" 2>"$log" || {
        echo "callgrind run of '$mode' ($n operations) failed; see $log" >&2
        exit 1
    }
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$log"
}

echo "== instructions per operation (callgrind, $iterations operations minus 0), outputs in $out"
printf '%-14s %16s %16s %14s\n' mode "Ir($iterations)" "Ir(0)" "Ir/operation"
for mode in "${modes[@]}"; do
    base=$(instructions "$mode" 0)
    full=$(instructions "$mode" "$iterations")
    per=$(awk -v a="$full" -v b="$base" -v n="$iterations" 'BEGIN { printf "%.1f", (a - b) / n }')
    printf '%-14s %16s %16s %14s\n' "$mode" "$full" "$base" "$per"
    if [ "${ANNOTATE:-0}" = 1 ]; then
        callgrind_annotate --inclusive=no "$out/callgrind.out.$mode.$iterations" 2>/dev/null | sed -n '1,45p' | grep -v '^$' || true
    fi
done
