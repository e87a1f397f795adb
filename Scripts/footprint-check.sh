#!/usr/bin/env bash
# The core module loads no Foundation: a program that imports only Subscriptions and posts once
# (Tests/Footprint/Core) must link no libFoundation and no ICU, and stay resident in at most half
# the memory of the same program importing Foundation too (Tests/Footprint/Foundation); see the
# budget below.
#
#   Scripts/footprint-check.sh
#
# Builds both in release (a no-op after `.ci/run`'s release build), then checks `ldd` and
# compares their VmRSS. Linux only (ldd, /proc); elsewhere it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(uname -s)" != Linux ]; then
    echo "footprint check: Linux only (ldd and /proc); skipped on $(uname -s)"
    exit 0
fi

swift build -c release -Xcc -gdwarf-4 --product FootprintCore >&2
swift build -c release -Xcc -gdwarf-4 --product FootprintFoundation >&2
bin=$(swift build -c release -Xcc -gdwarf-4 --show-bin-path)

heavy=$(ldd "$bin/FootprintCore" | grep -Ei "Foundation|icu" || true)
if [ -n "$heavy" ]; then
    echo "FootprintCore (imports only Subscriptions) links Foundation or ICU:" >&2
    echo "$heavy" >&2
    exit 1
fi
if ! ldd "$bin/FootprintFoundation" | grep -q "libFoundation"; then
    echo "FootprintFoundation links no libFoundation: the comparison is void" >&2
    exit 1
fi

# Median of five runs each (resident memory varies a little with address-space layout).
median() { sort -n | sed -n 3p; }
core=$(for _ in 1 2 3 4 5; do "$bin/FootprintCore"; done | median)
foundation=$(for _ in 1 2 3 4 5; do "$bin/FootprintFoundation"; done | median)
echo "resident memory after one post: Subscriptions only ${core} kB; with Foundation ${foundation} kB"
echo "shared libraries of the core-only program: $(ldd "$bin/FootprintCore" | wc -l), none of them Foundation or ICU"
# The budget: half of the Foundation program's memory, or half of the 17 MiB that issue #19
# measured for a program that imported the old, Foundation-based core, whichever is larger (runs
# vary by a few percent, and both are close to 8.4 MB on Linux x86-64 with Swift 6.3).
budget=$((foundation / 2))
[ "$budget" -lt 8704 ] && budget=8704
echo "budget: ${budget} kB ($((core * 100 / foundation))% of the Foundation program)"
if [ "$core" -gt "$budget" ]; then
    echo "the core-only program is resident in ${core} kB, over its budget of ${budget} kB" >&2
    exit 1
fi
