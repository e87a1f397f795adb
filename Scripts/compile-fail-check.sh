#!/usr/bin/env bash
# Checks the rules the compiler must enforce: every Tests/CompileFail/Cases/fail-*.swift must fail
# to compile, with the diagnostic named on its first line (`// expect: TEXT`), and every
# Cases/ok-*.swift must compile (the controls: a broken setup fails them, not the rules).
#
#   Scripts/compile-fail-check.sh
#
# Each case is copied in turn to Tests/CompileFail/Sources/Case/main.swift and built against this
# package (Tests/CompileFail depends on it by path); the placeholder is restored on exit. The
# first build compiles Subscriptions once (about a minute); each case then takes seconds.
#
# Environment:
#   SCRATCH=path     build folder (default: .build/compile-fail)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
package=Tests/CompileFail
scratch=${SCRATCH:-$root/.build/compile-fail}
main=$package/Sources/Case/main.swift
placeholder=$(cat "$main")
trap 'printf "%s\n" "$placeholder" > "$main"' EXIT

build() {
    swift build --package-path "$package" --scratch-path "$scratch" 2>&1
}

# A scratch folder built before a source file of the library was renamed or removed fails every
# case with "missing inputs" (SwiftPM keeps the old file list); start it afresh once.
cp "$package/Cases/ok-immediate-and-sendable.swift" "$main"
if build | grep -q "because of missing inputs"; then
    echo "compile-fail check: the scratch folder names files that are gone; rebuilding it from scratch"
    rm -rf "$scratch"
fi

failures=0
for case in "$package"/Cases/*.swift; do
    name=$(basename "$case" .swift)
    cp "$case" "$main"
    if output=$(build); then compiled=1; else compiled=0; fi
    case $name in
    ok-*)
        if [ $compiled = 1 ]; then
            echo "ok    $name compiles"
        else
            echo "FAIL  $name must compile:" >&2
            echo "$output" | grep -E "error:" >&2 || echo "$output" >&2
            failures=$((failures + 1))
        fi
        ;;
    fail-*)
        expect=$(sed -n '1s|^// expect: ||p' "$case")
        if [ $compiled = 1 ]; then
            echo "FAIL  $name compiled, but must not" >&2
            failures=$((failures + 1))
        elif ! echo "$output" | grep -q -- "error: .*$expect"; then
            echo "FAIL  $name failed without the expected error ($expect):" >&2
            echo "$output" | grep -E "error:" >&2 || echo "$output" >&2
            failures=$((failures + 1))
        else
            echo "ok    $name does not compile: $(echo "$output" | grep -m1 -o "error: .*$expect.*" | cut -c1-110)"
        fi
        ;;
    *)
        echo "FAIL  $name: name cases fail-*.swift or ok-*.swift" >&2
        failures=$((failures + 1))
        ;;
    esac
done
if [ $failures -gt 0 ]; then
    echo "compile-fail check: $failures case(s) wrong" >&2
    exit 1
fi
echo "compile-fail check: every case as expected"
