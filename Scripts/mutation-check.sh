#!/usr/bin/env bash
# Mutation check: does the test suite fail when a guarantee breaks?
#
# Applies each mutant of Scripts/mutants.txt (a small edit that breaks one rule of the Guarantees
# article or one delivery option) to a scratch copy of the tree, one at a time, rebuilds
# incrementally and runs the tests. Prints one line per mutant (killed, and by which test; or
# SURVIVED; or equivalent, with the list's reason) and last:
#
#   mutants: N, killed: K, equivalent: E, survived: S
#
# Run it before and after any change to the engine or to a guarantee: `--all` runs both lists,
# this one and the relay's, side by side (about 14 minutes on 2 idle cores with the scratch copies
# built; the first run builds them, a few minutes more).
#
# Usage:
#   Scripts/mutation-check.sh --all
#       Both lists at once: this one and --relay's, each in its scratch copy, the relay's output
#       after this one's; exits non-zero when either list has a survivor or fails.
#   Scripts/mutation-check.sh [--full] [ID ...]
#       Every mutant (or the given ones). A mutant's `hint` test runs first; when it does not
#       fail, the whole suite runs. --full always runs the whole suite (slower, names every
#       killing test).
#   Scripts/mutation-check.sh --runs N --filter REGEX ID ...
#       Runs only the tests matching REGEX, N times, against each given mutant (`base`: no
#       mutant), and prints how many runs failed: how reliably a test kills its mutant.
#   Scripts/mutation-check.sh --check
#       Only checks the lists (Scripts/mutants.txt and Relays/Redis/mutants.txt): every snippet
#       occurs exactly once in its file. Needs no redis.
#   Scripts/mutation-check.sh --relay [--full | --runs N --filter REGEX] [ID ...]
#       The same, for the Redis relay: the mutants of Relays/Redis/mutants.txt, built and tested in
#       the relay's development package (Relays/Redis) of a scratch copy of its own
#       (.build/mutation-relay), against a throwaway redis-server on a free 127.0.0.1 port that the
#       tests find through RELAY_REDIS_PORT, killed on exit (Scripts/redis-server.sh, shared with
#       Scripts/relay-check.sh; it installs redis and the C libraries when missing).
#
# Environment: MUTATION_SCRATCH (default .build/mutation, .build/mutation-relay with --relay: the
# scratch copy, its builds, the logs), MUTATION_TIMEOUT (seconds per whole-suite run; default 3x
# the unmutated run, at least 120), MUTATION_HINT_TIMEOUT (seconds per hint run, default the
# mutant's `hint-timeout:`, else 45). A run that reaches its timeout
# counts as killed by the timeout (the mutant made something hang); the line names the tests on
# the hung stacks. A mutant's `env:` field (NAME=value words, see mutants.txt) is set for its test
# runs only: `SUBSCRIPTIONS_PROCESS_FENCE=off` runs them in the symmetric fence mode, `=on` in the
# adaptive default (every other mutant runs with `=asymmetric`, the form fixed). Needs git,
# python3, pgrep (procps) and setsid (util-linux).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)

full=false
all=false
check_only=false
relay=false
runs=0
filter=""
ids=()
while [ $# -gt 0 ]; do
    case "$1" in
    --full) full=true ;;
    --all) all=true ;;
    --check) check_only=true ;;
    --relay) relay=true ;;
    --runs) runs="$2"; shift ;;
    --filter) filter="$2"; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    *) ids+=("$1") ;;
    esac
    shift
done
if $all; then
    # The relay's list builds another package in another scratch copy and spends much of its
    # time on its server and its tests, so it overlaps well with this list's builds.
    [ ${#ids[@]} -eq 0 ] && ! $relay && ! $check_only && [ "$runs" -eq 0 ] ||
        { echo "--all takes no other option and no mutant id" >&2; exit 2; }
    relay_log=$(mktemp)
    "$0" --relay > "$relay_log" 2>&1 &
    relay_pid=$!
    status=0
    "$0" || status=$?
    relay_status=0
    wait "$relay_pid" || relay_status=$?
    echo "== the relay's list (Relays/Redis/mutants.txt)"
    cat "$relay_log"
    rm -f "$relay_log"
    [ "$status" -eq 0 ] && [ "$relay_status" -eq 0 ]
    exit
fi
if $relay; then
    list="$root/Relays/Redis/mutants.txt"
    scratch="${MUTATION_SCRATCH:-$root/.build/mutation-relay}"
    package_dir=Relays/Redis  # the package that is built and tested, inside the tree
else
    list="$root/Scripts/mutants.txt"
    scratch="${MUTATION_SCRATCH:-$root/.build/mutation}"
    package_dir=.
fi
tree="$scratch/tree"
logs="$scratch/logs"
package="$tree/$package_dir"
# NAME=value words set for every test run. The engine's mutants run with the fence form fixed at
# asymmetric: the adaptive default moves between the forms with the suite's load, so a mutant of
# one form would be seen only when the suite happens to run in it. Mutants of the adaptive switch
# and of the symmetric form set the variable in their own `env:` (it comes later and wins).
test_env=("SUBSCRIPTIONS_PROCESS_FENCE=asymmetric")

if [ "$runs" -gt 0 ] && { [ -z "$filter" ] || [ ${#ids[@]} -eq 0 ]; }; then
    echo "--runs needs --filter REGEX and at least one mutant ID (or base)" >&2
    exit 2
fi

# The list, the tree copy and the edits: python3, which reads the multi-line snippets exactly.
helper() {
    python3 - "$@" <<'PY'
import filecmp, os, shutil, subprocess, sys

def parse(path):
    """Blocks of the list, in order: dicts with id, name, file, breaks, hint, equivalent, find, replace."""
    mutants, block, body, line_no = [], None, None, 0
    for line_no, line in enumerate(open(path, encoding="utf-8").read().split("\n"), 1):
        if body is not None:
            if line == "--- replace" and body == "find":
                body = "replace"
            elif line == "--- end":
                body = None
            else:
                block[body].append(line)
            continue
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("=== "):
            parts = line[4:].split(None, 1)
            block = {"id": parts[0], "name": parts[1] if len(parts) > 1 else "", "line": line_no,
                     "find": [], "replace": []}
            mutants.append(block)
        elif line == "--- find" and block is not None:
            body = "find"
        elif ":" in line and block is not None:
            key, value = line.split(":", 1)
            block[key.strip()] = value.strip()
        else:
            sys.exit(f"{path}:{line_no}: cannot read this line: {line!r}")
    if body is not None:
        sys.exit(f"{path}: the last block has no '--- end'")
    return mutants

def snippet(lines):
    return "\n".join(lines) + "\n" if lines else ""

def check(root, mutants, path):
    problems, seen = [], set()
    for m in mutants:
        where = f"{m['id']} (line {m['line']})"
        if m["id"] in seen:
            problems.append(f"{where}: the id is used twice")
        seen.add(m["id"])
        for key in ("file", "breaks"):
            if not m.get(key):
                problems.append(f"{where}: no '{key}:'")
        if not m["find"]:
            problems.append(f"{where}: empty '--- find'")
            continue
        target = os.path.join(root, m.get("file", ""))
        if not os.path.isfile(target):
            problems.append(f"{where}: no file {m.get('file')}")
            continue
        found = open(target, encoding="utf-8").read().count(snippet(m["find"]))
        if found != 1:
            problems.append(f"{where}: the find snippet occurs {found} times in {m['file']}, not once")
        if not m.get("hint-timeout", "1").isdigit() or "hint" not in m and "hint-timeout" in m:
            problems.append(f"{where}: 'hint-timeout:' must be a number of seconds, with a 'hint:'")
        if m["find"] == m["replace"]:
            problems.append(f"{where}: the replacement changes nothing")
    if problems:
        sys.exit(f"{os.path.relpath(path, root)} is stale or malformed:\n  " + "\n  ".join(problems))

command, root, path = sys.argv[1], sys.argv[2], sys.argv[3]
mutants = parse(path)
check(root, mutants, path)
if command == "check":
    # id, name, file, hint, equivalent reason, env, hint timeout, breaks: one tab-separated line
    # per mutant, "-" for an empty field (bash's `read` would merge empty tab-separated fields).
    for m in mutants:
        fields = [m["id"], m["name"], m["file"], m.get("hint", ""), m.get("equivalent", ""), m.get("env", ""),
                  m.get("hint-timeout", ""), m["breaks"]]
        print("\t".join(f.replace("\t", " ") or "-" for f in fields))
elif command == "sync":
    # Copies the tracked and untracked-but-not-ignored files to the scratch tree, keeping the
    # modification times of unchanged files (so the build there stays incremental), and removes
    # files the source no longer has. Given a manifest (a path relative to the tree) and a
    # trailer, the copy of that manifest ends with the trailer.
    dest = sys.argv[4]
    trimmed, trailer = (os.path.normpath(sys.argv[5]), sys.argv[6]) if len(sys.argv) > 6 else (None, "")
    out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         check=True, capture_output=True).stdout.decode()
    files = {f for f in out.split("\0") if f and os.path.isfile(os.path.join(root, f))
             and not os.path.islink(os.path.join(root, f))}
    # Tracked symbolic links stay links (Relays/Redis/Dependencies/Subscriptions -> ../../..: the
    # relay's package finds the root package of the tree through it).
    for f in out.split("\0"):
        src, dst = os.path.join(root, f), os.path.join(dest, f)
        if f and os.path.islink(src):
            if not os.path.islink(dst) or os.readlink(dst) != os.readlink(src):
                if os.path.lexists(dst):
                    os.remove(dst)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                os.symlink(os.readlink(src), dst)
    for f in files:
        src, dst = os.path.join(root, f), os.path.join(dest, f)
        if f == trimmed:
            text = open(src, encoding="utf-8").read() + trailer
            if not os.path.isfile(dst) or open(dst, encoding="utf-8").read() != text:
                with open(dst, "w", encoding="utf-8") as out:
                    out.write(text)
        elif not os.path.isfile(dst) or not filecmp.cmp(src, dst, shallow=False):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)
    for dirpath, dirnames, filenames in os.walk(dest):
        dirnames[:] = [d for d in dirnames if d != ".build"]  # the builds (the relay's is in Relays/Redis)
        for name in filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), dest)
            if rel not in files:
                os.remove(os.path.join(dirpath, name))
elif command == "apply":
    # Writes the mutated file into the scratch tree (from the source tree's original).
    ident, dest = sys.argv[4], sys.argv[5]
    m = next(m for m in mutants if m["id"] == ident)
    text = open(os.path.join(root, m["file"]), encoding="utf-8").read()
    with open(os.path.join(dest, m["file"]), "w", encoding="utf-8") as out:
        out.write(text.replace(snippet(m["find"]), snippet(m["replace"]), 1))
PY
}

# Failing tests of a Swift Testing log, one name per line.
failed_tests() {
    grep -aoE '✘ Test [A-Za-z0-9_]+\(' "$1" | sed -E 's/^✘ Test //; s/\($//' | sort -u || true
}

# Tests on the stacks of a Swift backtrace in the log (a crash, or the SIGQUIT sent on a timeout):
# those of the crashed thread when it names one (`crashed` given), else those of every thread.
backtrace_tests() {
    local names=""
    if [ "$2" = crashed ]; then
        names=$(awk '/^Thread [0-9]+ .*crashed:/ { on = 1; next } /^Thread [0-9]+/ { on = 0 } on' "$1" |
            grep -aoE '[A-Z][A-Za-z0-9_]*Tests\.[a-z][A-Za-z0-9_]*\(' | sed 's/($//' | sort -u || true)
    fi
    [ -n "$names" ] || names=$(grep -aoE '[A-Z][A-Za-z0-9_]*Tests\.[a-z][A-Za-z0-9_]*\(' "$1" | sed 's/($//' |
        sort -u || true)
    echo "$names"
}

# Tests that started and never ended in a Swift Testing log: where a process died without a
# backtrace (a stack overflow), one name per line.
unfinished_tests() {
    local started ended
    started=$(grep -aoE '◇ Test [A-Za-z0-9_]+\(' "$1" | sed -E 's/^.* Test //; s/\($//' | sort -u || true)
    ended=$(grep -aoE '[✔✘] Test [A-Za-z0-9_]+\(' "$1" | sed -E 's/^.* Test //; s/\($//' | sort -u || true)
    comm -23 <(echo "$started") <(echo "$ended") | grep -v '^$' || true
}

join_lines() { paste -sd, - | sed 's/,/, /g'; }

descendants() {
    local child
    for child in $(pgrep -P "$1" || true); do
        echo "$child"
        descendants "$child"
    done
}

# The process group of the test run in progress (the bundle's: it runs in a session of its own,
# see run_tests), or empty. Whatever a run leaves behind is in it or below it.
run_group=""

# Ends every process of the run in progress: its process group, every process below the run's
# subshell and every process group one of them leads (an exit test's child may make its own).
# A process whose parent died is no longer found below it, but it stays in its group: the group
# is what catches it. Called on a timeout, and on the script's exit (an interrupted run).
end_run() {
    local pid=$1 procs groups
    procs=$(descendants "$pid")
    groups=$( { echo "$run_group"; for p in $procs; do ps -o pgid= -p "$p" 2> /dev/null || true; done; } |
        tr -d ' ' | grep -v '^$' | sort -u || true)
    kill -KILL $procs "$pid" 2> /dev/null || true
    for g in $groups; do
        # Never this script's own group (the bundle's session makes that impossible, but a
        # process that escaped into it must not take the script down with it).
        [ "$g" = "$(ps -o pgid= -p $$ | tr -d ' ')" ] || kill -KILL -- "-$g" 2> /dev/null || true
    done
}
run_pid=""  # the subshell of the run in progress, for the exit trap
# The bundle's session has no terminal: an interrupted or failed script ends the run itself.
trap '[ -z "$run_pid" ] || end_run "$run_pid"' EXIT
trap 'exit 130' INT TERM

linebuf=()
mutant_env=()  # NAME=value words of the current mutant's `env:` field
command -v stdbuf > /dev/null && linebuf=(stdbuf -oL)  # keeps the log complete up to a crash
# A background job of a script starts with SIGQUIT ignored, and the test bundle would keep that:
# restore the default, so that the SIGQUIT sent on a timeout prints the hung stacks (GNU env).
default_signals=()
env --default-signal=QUIT true 2> /dev/null && default_signals=(--default-signal=QUIT)

# Runs the tests (all, or those matching $2), logging to $1. Sets `verdict` to an empty string
# when every test passed, else to what killed the mutant. After $3 seconds the test process gets
# SIGQUIT, so that Swift's backtracer prints where every thread hangs, and is then killed.
run_tests() {
    local log=$1 regex=$2 limit=$3 rc=0 pid ticks=0 hung=false kids
    local args=(--testing-library swift-testing)
    [ -n "$regex" ] && args+=(--filter "$regex")
    # The test bundle itself, not `swift test --skip-build`: the same Swift Testing run and
    # output without SwiftPM's planning and the empty XCTest pass (about a second per run).
    # The subshell outlives the bundle (`exit` after it, so bash cannot exec it in its place): a
    # crash is reported by the subshell in the log, not by this shell on the console.
    # `setsid`: the bundle (and what it starts) runs in a session and process group of its own,
    # whose id is the bundle's pid, so that a timeout can end all of it, including exit-test
    # children whose parent died; killing the subshell alone would leave a hung bundle spinning.
    (
        cd "$package" && setsid env ${default_signals[@]+"${default_signals[@]}"} NO_COLOR=1 \
            ${test_env[@]+"${test_env[@]}"} ${mutant_env[@]+"${mutant_env[@]}"} "${linebuf[@]}" "$bundle" "${args[@]}"
        exit $?
    ) > "$log" 2>&1 &
    pid=$!
    run_pid=$pid
    run_group=""
    while kill -0 "$pid" 2> /dev/null; do
        # The bundle's pid is its group's id (`setsid`); noted once it is there.
        [ -n "$run_group" ] || run_group=$(pgrep -P "$pid" | head -1 || true)
        if [ $ticks -ge $((limit * 5)) ]; then
            hung=true
            break
        fi
        sleep 0.2
        ticks=$((ticks + 1))
    done
    if $hung; then
        # The test process and its exit-test children, listed before anything exits: a child
        # whose parent died is no longer found below it.
        kids=$(descendants "$pid")
        [ -n "$kids" ] && kill -QUIT $kids 2> /dev/null
        for _ in $(seq 50); do
            kill -0 "$pid" 2> /dev/null || break
            sleep 0.2
        done
        kill -KILL $kids 2> /dev/null || true
        end_run "$pid"
    fi
    { wait "$pid"; } 2> /dev/null || rc=$?  # (no "Killed" job notice from bash)
    # Nothing of a run outlives it: a test that left a process behind (an exit test's child)
    # must not spin beside the next runs.
    [ -n "$run_group" ] && kill -KILL -- "-$run_group" 2> /dev/null || true
    run_pid="" run_group=""
    verdict=""
    if ! $hung && [ $rc -eq 0 ]; then return 0; fi
    local failed
    failed=$(failed_tests "$log" | join_lines)
    if $hung; then
        verdict="timeout after ${limit} s (a hang) in: $(backtrace_tests "$log" all | join_lines)"
        verdict="$verdict${failed:+; failed first: $failed}"
    elif [ -n "$failed" ]; then
        verdict="$failed"
    else
        local signal tests
        signal=$(grep -aoE 'Program crashed: [^*]*' "$log" | head -1 | sed 's/Program crashed: //; s/ at 0x.*//' || true)
        [ -n "$signal" ] || signal=$(grep -aoE 'unexpected signal code [0-9]+' "$log" | head -1 | sed 's/unexpected //' || true)
        tests=$(backtrace_tests "$log" crashed)
        [ -n "$tests" ] || tests=$(unfinished_tests "$log")
        verdict="crash (${signal:-exit $rc}) in: $(echo "$tests" | join_lines)"
    fi
}

bundle=""  # the test bundle, set by build
build() {
    if ! (cd "$package" && swift build --build-tests) > "$1" 2>&1; then
        # A scratch build made before a file of the tree was renamed or removed fails with
        # "missing inputs" (SwiftPM keeps the old file list): start it afresh, once.
        grep -q "because of missing inputs" "$1" || return 1
        echo "the scratch build named files that are gone; building it afresh" >> "$1"
        rm -rf "$package/.build"
        (cd "$package" && swift build --build-tests) >> "$1" 2>&1 || return 1
    fi
    if [ -z "$bundle" ]; then
        bundle=$(find "$(cd "$package" && swift build --show-bin-path)/" -maxdepth 1 -name '*PackageTests.xctest' | head -1)
        [ -x "$bundle" ] || { echo "no test bundle (*PackageTests.xctest) after the build" >> "$1"; return 1; }
    fi
}

if $check_only; then
    for checked in "$root/Scripts/mutants.txt" "$root/Relays/Redis/mutants.txt"; do
        index=$(helper check "$root" "$checked")
        echo "$index" | awk -F'\t' '{ printf "%-4s %-48s %s\n", $1, $2, ($5 != "-" ? "equivalent" : $3) }'
        echo "${checked#"$root"/}: $(echo "$index" | wc -l) mutants, every snippet found exactly once"
    done
    exit 0
fi
index=$(helper check "$root" "$list")
if [ ${#ids[@]} -gt 0 ]; then
    for id in "${ids[@]}"; do
        [ "$id" = base ] || echo "$index" | cut -f1 | grep -qx "$id" || { echo "no mutant $id in the list" >&2; exit 2; }
    done
fi

start=$SECONDS
mkdir -p "$tree" "$logs"
# The scratch copy's manifest builds only the test bundle and what it runs, not the examples,
# benchmarks and checks that no verdict reads: fewer compiles and links per mutant.
if $relay; then
    unused='$0.type == .executable && $0.name != "RelayPeer"'  # the tests start RelayPeer
else
    unused='$0.type == .executable || $0.name == "FootprintSupport"'
fi
helper sync "$root" "$list" "$tree" "$package_dir/Package.swift" \
    $'\n// Added by Scripts/mutation-check.sh to its scratch copy: the tests need none of these.\n'"package.targets.removeAll { $unused }"$'\n'

if $relay; then
    # shellcheck source=Scripts/redis-server.sh
    source "$root/Scripts/redis-server.sh"
    redis_dependencies > "$logs/dependencies.log" 2>&1 || { cat "$logs/dependencies.log" >&2; exit 1; }
    trap '[ -z "$run_pid" ] || end_run "$run_pid"; redis_server_stop' EXIT
    redis_server_start
    test_env=("RELAY_REDIS_PORT=$redis_port")
fi

apply() { helper apply "$root" "$list" "$1" "$tree"; }
restore() { cp -p "$root/$1" "$tree/$1"; }

# --runs: how often the matching tests fail against each given mutant.
if [ "$runs" -gt 0 ]; then
    for id in "${ids[@]}"; do
        file=""
        if [ "$id" != base ]; then
            file=$(echo "$index" | awk -F'\t' -v id="$id" '$1 == id { print $3 }')
            envs=$(echo "$index" | awk -F'\t' -v id="$id" '$1 == id { print $6 }')
            mutant_env=()
            [ "$envs" = - ] || read -ra mutant_env <<< "$envs"
            apply "$id"
        fi
        if ! build "$logs/$id.build.log"; then
            [ -n "$file" ] && restore "$file"
            echo "$id: the build failed (see $logs/$id.build.log)" >&2
            exit 1
        fi
        failures=0
        for i in $(seq 1 "$runs"); do
            run_tests "$logs/$id.run$i.log" "$filter" "${MUTATION_HINT_TIMEOUT:-45}"
            if [ -n "$verdict" ]; then
                failures=$((failures + 1))
                echo "  $id run $i: failed: $verdict"
            else
                echo "  $id run $i: passed"
            fi
        done
        [ -n "$file" ] && restore "$file"
        echo "$id: '$filter' failed $failures of $runs runs"
    done
    exit 0
fi

# The unmutated suite must pass, or every mutant would look killed.
echo "mutation check: $(echo "$index" | wc -l) mutants, scratch copy in $scratch${redis_port:+, redis-server on 127.0.0.1:$redis_port}"
if ! build "$logs/base.build.log"; then
    echo "the unmutated tree does not build (see $logs/base.build.log)" >&2
    exit 1
fi
# A mutant that changes the module's interface (a default argument, a stored property) rebuilds
# every test file, and so does the next build, once the original is back. The build of the
# unmutated tree, kept aside, replaces the scratch build after such a mutant instead: a copy
# is as good as the original for SwiftPM (it compares modification times), and copying takes a
# second or two where rebuilding takes half a minute.
pristine="$scratch/pristine-build"
rm -rf "$pristine"
cp -a "$package/.build" "$pristine"
base_start=$SECONDS
run_tests "$logs/base.log" "" 1800
if [ -n "$verdict" ]; then
    echo "the unmutated suite fails ($verdict); fix that first (log: $logs/base.log)" >&2
    exit 1
fi
timeout_full=${MUTATION_TIMEOUT:-$((SECONDS - base_start < 40 ? 120 : 3 * (SECONDS - base_start)))}
echo "unmutated suite passed in $((SECONDS - base_start)) s; timeout per mutant run: $timeout_full s"

n=0 killed=0 equivalent=0 survived=0
while IFS=$'\t' read -r id name file hint reason envs hint_timeout breaks; do
    if [ ${#ids[@]} -gt 0 ] && ! printf '%s\n' "${ids[@]}" | grep -qx "$id"; then continue; fi
    n=$((n + 1))
    label=$(printf '%-4s %-48s' "$id" "$name")
    [ "$hint" = - ] && hint=""
    [ "$reason" = - ] && reason=""
    [ "$hint_timeout" = - ] && hint_timeout=""
    mutant_env=()
    [ "$envs" = - ] || read -ra mutant_env <<< "$envs"
    [ ${#mutant_env[@]} -gt 0 ] && label="$label [${mutant_env[*]}]"
    if [ -n "$reason" ]; then
        equivalent=$((equivalent + 1))
        echo "$label equivalent: $reason"
        continue
    fi
    t0=$SECONDS
    apply "$id"
    if ! build "$logs/$id.build.log"; then
        restore "$file"
        echo "$label the mutant does not build (see $logs/$id.build.log): fix ${list#"$root"/}" >&2
        exit 1
    fi
    verdict=""
    how=""
    if ! $full && [ -n "$hint" ]; then
        run_tests "$logs/$id.hint.log" "$hint" "${MUTATION_HINT_TIMEOUT:-${hint_timeout:-45}}"
        how="hint"
    fi
    if [ -z "$verdict" ]; then
        run_tests "$logs/$id.log" "" "$timeout_full"
        how="suite"
    fi
    restore "$file"
    if [ "$(grep -c 'Compiling' "$logs/$id.build.log")" -gt 3 ]; then
        rm -rf "$package/.build"
        cp -a "$pristine" "$package/.build"
    fi
    if [ -n "$verdict" ]; then
        killed=$((killed + 1))
        echo "$label killed ($how, $((SECONDS - t0)) s) by $verdict"
    else
        survived=$((survived + 1))
        echo "$label SURVIVED ($((SECONDS - t0)) s): $breaks"
    fi
done <<< "$index"

echo "done in $((SECONDS - start)) s; logs in $logs"
echo "mutants: $n, killed: $killed, equivalent: $equivalent, survived: $survived"
[ "$survived" -eq 0 ]
