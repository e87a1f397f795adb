#!/usr/bin/env bash
# Leak check (issue 6, part 4). Builds the LeakCheck executable (Tests/LeakCheck/main.swift) and:
#   1. self-test: with --inject-leak it must fail, natively and under valgrind;
#   2. runs it natively: 1,000,000 subscriptions in every style; every tracked object must be
#      deinitialised and the malloc heap back to its size within 256 KiB;
#   3. runs it under valgrind memcheck with 100,000 subscriptions: zero definitely-lost bytes and
#      no memory errors.
#
# Release build: it is what users ship (the optimiser changes retain/release placement, so
# lifetimes there are the ones that matter), it runs the million subscriptions in seconds, and
# SwiftPM's release builds carry DWARF debug info (-g), so valgrind's reports name source lines.
# With the same flags in the release step of .ci/run (see below) and the same scratch path, nothing
# is rebuilt here.
#
# Usage: Scripts/leak-check.sh [swift build options, e.g. --scratch-path /tmp/x]
# Environment: LEAKCHECK_COUNT (default 1000000), LEAKCHECK_VALGRIND_COUNT (default 100000).
set -euo pipefail
cd "$(dirname "$0")/.."

count="${LEAKCHECK_COUNT:-1000000}"
valgrind_count="${LEAKCHECK_VALGRIND_COUNT:-100000}"
# -Xcc -gdwarf-4: the C shim's debug info in DWARF 4, since the valgrind of Debian 12 (3.19) gives
# up on clang's default DWARF 5 ("Possibly corrupted debuginfo file") and checks nothing.
build=(swift build -c release --product LeakCheck -Xswiftc -warnings-as-errors -Xcc -gdwarf-4 "$@")

command -v valgrind >/dev/null || (apt-get update && apt-get install -y valgrind)

echo "== build LeakCheck (release)"
"${build[@]}"
bin="$("${build[@]}" --show-bin-path)/LeakCheck"

# No suppressions file: on Linux the Swift runtime, Foundation and Dispatch leave only "possibly
# lost" blocks (metadata caches with interior pointers, thread DTVs) and "still reachable" ones
# (caches, the main run loop's sources), which --errors-for-leak-kinds=definite does not count,
# and they raise no memcheck errors. --show-possibly-lost=no keeps those runtime blocks out of the
# log; the summary still counts them.
memcheck=(valgrind --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=1
    --show-possibly-lost=no)

echo "== self-test: an injected leak must fail"
if "$bin" 100000 --inject-leak >/dev/null 2>&1; then
    echo "leak-check: LeakCheck did not notice an injected leak" >&2
    exit 1
fi
if "${memcheck[@]}" -q "$bin" 1000 --inject-leak --no-heap-check --run-loop >/dev/null 2>&1; then
    echo "leak-check: valgrind did not notice an injected leak" >&2
    exit 1
fi

echo "== native: $count subscriptions"
"$bin" "$count"

echo "== valgrind memcheck: $valgrind_count subscriptions"
# --run-loop: valgrind crashes when the main thread parks in dispatchMain() (it calls pthread_exit).
# --no-heap-check: valgrind replaces malloc; its own leak report is the check here.
"${memcheck[@]}" "$bin" "$valgrind_count" --no-heap-check --run-loop
echo "leak-check: OK"
