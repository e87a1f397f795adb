#!/usr/bin/env bash
# Checks issue 42's rule for the walks it names: a typed post to an immediate handler, a typed
# post to a handler on an actor (the drain that calls it), and cancel() beside a running post
# (the cancelling thread while it waits) enter each file of the library at most once on the way
# down, that is, no file of Sources/ appears twice in a stack with another file between (a
# closure passed down and called back from a deeper file would). It builds the program
# Scripts/walk-check/main.swift in debug (so that every frame has its file and line) in a scratch
# package that depends on this checkout by path, stops it at the deepest point of each walk, and
# reads the crashed thread's stack from Swift's backtracer. A stack that does not reach the point
# (the cancel not yet waiting) is taken again, up to three times.
#
#   Scripts/walk-check.sh        prints each walk, top of the stack first; exits 1 on a violation
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scratch="$root/.build/walk-check"
mkdir -p "$scratch/Sources/Walks"
cp Scripts/walk-check/main.swift "$scratch/Sources/Walks/main.swift"
cat > "$scratch/Package.swift" <<PACKAGE
// swift-tools-version:6.2
import PackageDescription
let package = Package(
    name: "Walks",
    dependencies: [.package(path: "$root")],
    targets: [
        .executableTarget(
            name: "Walks", dependencies: [.product(name: "Subscriptions", package: "$(basename "$root")")],
            swiftSettings: [.swiftLanguageMode(.v6)])
    ]
)
PACKAGE
swift build --package-path "$scratch" -c debug -Xswiftc -warnings-as-errors | tail -1
program="$(swift build --package-path "$scratch" -c debug --show-bin-path)/Walks"

# The walk's expected deepest frame, per mode: the stack must reach it.
declare -A deepest=([immediate]="closure" [actor]="Inbox.note" [cancel]="waitForOtherCallers")
failed=0
for mode in immediate actor cancel; do
    ok=0
    for _ in 1 2 3; do
        out="$scratch/$mode.txt"
        # The program stops itself with a signal; the shell's report of it is not shown.
        { SWIFT_BACKTRACE=enable=yes,interactive=no,color=no,limit=64 "$program" "$mode" >"$out" 2>&1; } 2>/dev/null || true
        if python3 - "$out" "$mode" "${deepest[$mode]}" "$root/Sources/" <<'PY'
import re, sys
text, mode, deepest, sources = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3], sys.argv[4]
blocks = re.split(r"\n(?=Thread \d+ )", text)
crashed = [b for b in blocks if " crashed:" in b.split("\n")[0]]
if not crashed:
    print(f"{mode}: no crashed thread in the backtrace"); sys.exit(2)
frames = []
for line in crashed[0].split("\n"):
    m = re.search(r"0x[0-9a-f]+ (.*?) \+ \d+ in Walks at (/[^:]+):(\d+)", line)
    if m:
        frames.append((m.group(2), m.group(3), m.group(1)))
if not any(deepest in f[2] for f in frames[:4]):
    print(f"{mode}: the stack does not reach {deepest} (attempt again)"); sys.exit(2)
print(f"== {mode}, top of the stack first")
for path, line, function in frames:
    shown = path[len(sources):] if path.startswith(sources) else path.rsplit("/", 1)[-1]
    print(f"   {shown}:{line}  {function[:100]}")
# Library files only, in stack order: each must form one run.
files = [p for p, _, _ in frames if p.startswith(sources)]
seen, runs = set(), []
for f in files:
    if runs and runs[-1] == f: continue
    if f in seen:
        print(f"{mode}: {f[len(sources):]} is entered twice on the way down"); sys.exit(1)
    seen.add(f); runs.append(f)
print(f"   {len(runs)} files, each entered once")
PY
        then
            ok=1
            break
        elif [ $? -eq 1 ]; then
            break
        fi
    done
    [ "$ok" = 1 ] || failed=1
done
exit $failed
