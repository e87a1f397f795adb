#!/usr/bin/env bash
# Checks the Redis relay (Relays/Redis) against a real server: installs redis-server, redis-tools,
# libhiredis-dev, libssl-dev and openssl when missing (Debian/Ubuntu, non-interactive), starts a redis-server on a free
# 127.0.0.1 port (no persistence, not daemonized, killed on exit), then lints the package, builds it
# with warnings as errors, runs its tests and its benchmark in quick mode beside redis-benchmark.
# About 3 to 5 minutes on 2 cores from a clean checkout (most of it compiling).
#
#   Scripts/relay-check.sh            # everything
#   Scripts/relay-check.sh --no-bench # skip the benchmark
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS
step() { echo; echo "== $* ($((SECONDS - start)) s)"; }

step "dependencies: redis-server, redis-tools, libhiredis-dev, libssl-dev, openssl"
missing=()
command -v redis-server > /dev/null || missing+=(redis-server)
command -v redis-cli > /dev/null && command -v redis-benchmark > /dev/null || missing+=(redis-tools)
command -v pkg-config > /dev/null || missing+=(pkg-config)
if ! pkg-config --exists hiredis 2> /dev/null; then missing+=(libhiredis-dev); fi
if ! pkg-config --exists openssl 2> /dev/null; then missing+=(libssl-dev); fi
command -v openssl > /dev/null || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    if ! $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"; then
        $sudo apt-get update -q
        $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
    fi
fi
redis-server --version

step "redis-server on a free loopback port"
server_pid=""
server_log=$(mktemp)
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2> /dev/null || true; wait "$server_pid" 2> /dev/null || true; fi
    rm -f "$server_log"
}
trap cleanup EXIT
port=""
for _ in $(seq 20); do
    candidate=$((20000 + RANDOM % 40000))
    redis-server --port "$candidate" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
        --loglevel warning > "$server_log" 2>&1 &
    server_pid=$!
    for _ in $(seq 50); do
        if redis-cli -p "$candidate" ping 2> /dev/null | grep -q PONG; then port=$candidate; break; fi
        if ! kill -0 "$server_pid" 2> /dev/null; then break; fi
        sleep 0.1
    done
    if [ -n "$port" ]; then break; fi
    kill "$server_pid" 2> /dev/null || true
    wait "$server_pid" 2> /dev/null || true
    server_pid=""
done
if [ -z "$port" ]; then echo "could not start redis-server:" >&2; cat "$server_log" >&2; exit 1; fi
echo "redis-server pid $server_pid on 127.0.0.1:$port"

cd "$root/Relays/Redis"

step "swift format lint (Relays/Redis)"
swift format lint --strict --recursive Package.swift Sources Tests Examples

step "build: the relay package and its tests, warnings as errors"
swift build --build-tests -Xswiftc -warnings-as-errors

step "every public symbol of SubscriptionsRedis has a doc comment"
graphs="$root/Relays/Redis/.build/symbol-graphs/graphs"
# The whole scratch path, not only the graphs: an up-to-date build emits no graphs, so a rerun
# with no source change would otherwise check an empty directory and fail.
rm -rf "$root/Relays/Redis/.build/symbol-graphs"
mkdir -p "$graphs"
swift build --scratch-path .build/symbol-graphs --target SubscriptionsRedis -Xswiftc -emit-symbol-graph \
    -Xswiftc -emit-symbol-graph-dir -Xswiftc "$graphs" -Xswiftc -symbol-graph-minimum-access-level -Xswiftc public
python3 "$root/Scripts/check-doc-comments.py" "$graphs" SubscriptionsRedis

step "swift test (RELAY_REDIS_PORT=$port)"
RELAY_REDIS_PORT=$port swift test --skip-build

step "example runs"
RELAY_REDIS_PORT=$port swift run --skip-build RelayChat > /dev/null

if [ "${1:-}" != "--no-bench" ]; then
    step "RelayBenchmarks, release, quick, beside redis-benchmark on the same server"
    swift build -c release --product RelayBenchmarks -Xswiftc -warnings-as-errors
    "$(swift build -c release --show-bin-path)/RelayBenchmarks" --port "$port" --quick
fi

step "relay check passed"
