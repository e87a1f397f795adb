#!/usr/bin/env bash
# The core module loads no Foundation: a program that imports only Subscriptions and posts once
# (Tests/Footprint/Core) must link no libFoundation and no ICU, and stay resident in at most half
# the memory of the same program importing Foundation too (Tests/Footprint/Foundation).
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
if [ $((core * 2)) -gt "$foundation" ]; then
    echo "the core-only program uses more than half the memory of the Foundation one" >&2
    exit 1
fi
