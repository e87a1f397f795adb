#!/usr/bin/env bash
# Checks the Redis relay (Relays/Redis) against a real server: installs redis-server, redis-tools,
# libhiredis-dev, libssl-dev and openssl when missing (Debian/Ubuntu, non-interactive), starts a redis-server on a free
# 127.0.0.1 port (no persistence, not daemonized, killed on exit), then lints the package, builds it
# with warnings as errors, runs its tests, then its cluster and Sentinel tests against topologies
# of their own (Scripts/relay-topology-tests.sh, about 20 s of it), fuzzes its receive path with a
# million frames under AddressSanitizer (a build of its own: about 3.5 minutes from clean), and
# runs its benchmark in quick mode beside redis-benchmark (pub/sub, signed, and history mode) and
# its payload codec against Foundation's encoders (--codec). The tests of restarts with appendonly
# start servers of their own (RecoveryTests). About 6 to 8 minutes on 2 cores from a clean
# checkout (most of it compiling).
#
#   Scripts/relay-check.sh            # everything
#   Scripts/relay-check.sh --no-bench # skip the benchmark
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS
step() { echo; echo "== $* ($((SECONDS - start)) s)"; }

# shellcheck source=Scripts/redis-server.sh
source "$root/Scripts/redis-server.sh"

step "dependencies: redis-server, redis-tools, libhiredis-dev, libssl-dev, openssl"
redis_dependencies
redis-server --version

step "redis-server on a free loopback port"
trap redis_server_stop EXIT
redis_server_start
port=$redis_port
echo "redis-server pid $redis_pid on 127.0.0.1:$port"

cd "$root/Relays/Redis"

step "swift format lint (Relays/Redis)"
swift format lint --strict --recursive Package.swift Sources Tests Examples

step "build: the relay package and its tests, warnings as errors"
swift build --build-tests -Xswiftc -warnings-as-errors

step "every public symbol of SubscriptionsRedis has a doc comment"
# The library is a target of the root package (trait "Redis"): its symbol graph is built there, in
# a scratch path of its own. The whole scratch path is rebuilt, not only the graphs: an up-to-date
# build emits no graphs, so a rerun with no source change would otherwise check an empty directory.
scratch="$root/.build/relay-symbol-graphs"
graphs="$scratch/graphs"
rm -rf "$scratch"
mkdir -p "$graphs"
(cd "$root" && swift build --traits Redis --scratch-path "$scratch" --target SubscriptionsRedis \
    -Xswiftc -warnings-as-errors -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$graphs" \
    -Xswiftc -symbol-graph-minimum-access-level -Xswiftc public)
python3 "$root/Scripts/check-doc-comments.py" "$graphs" SubscriptionsRedis
rm -rf "$scratch"

step "swift test (RELAY_REDIS_PORT=$port)"
RELAY_REDIS_PORT=$port swift test --skip-build

step "cluster and Sentinel tests: Scripts/relay-topology-tests.sh (a 6-node cluster and a Sentinel set of their own, about 20 to 40 s)"
# Their servers are started and stopped by that script (an EXIT trap, also after a failure); the
# tests there kill a primary, move a slot and fail the Sentinel primary over, each wait bounded.
"$root/Scripts/relay-topology-tests.sh"

step "fuzz under AddressSanitizer: 1,000,000 random and mutated frames through the receive path (FuzzTests, alone)"
# Issue 39 asks for the million-frame run under ASan. The package is built again with
# --sanitize=address in a scratch path of its own (.build/asan: about 2 minutes from clean, its
# own cache afterwards), then the fuzz test runs alone (about 80 s on 2 idle cores, against 25 s
# without ASan; the same test runs 20,000 frames without it within the suite above). The frames go
# through a child process (an exit test): an ASan report or a leak there exits non-zero and fails
# the test. --disable-xctest: with no XCTest cases, the XCTest harness would only add its own
# leak at exit (144 bytes of XCTest's suite objects, allocated in XCTMainMisc; .ci/run suppresses
# the same leak for the core's suite), which LeakSanitizer reports and which fails swift test;
# here nothing needs suppressing. The gold linker warns
# "Cannot export local symbol '__asan_…'" for each instrumented module: harmless, filtered out.
asan_log=$(mktemp)
if ! swift build --build-tests --sanitize=address --scratch-path .build/asan > "$asan_log" 2>&1; then
    cat "$asan_log"
    exit 1
fi
grep -v "Cannot export local symbol '__asan" "$asan_log" | tail -n 3
fuzz_log=$(mktemp)
RELAY_REDIS_PORT=$port RELAY_FUZZ_FRAMES=1000000 ASAN_OPTIONS="halt_on_error=1:detect_leaks=1" \
    swift test --skip-build --disable-xctest --sanitize=address --scratch-path .build/asan \
    --filter aMillionRandomAndMutatedFramesNeverTrapAndMemoryStaysBounded 2>&1 | tee "$fuzz_log"
grep -q "fuzz: frames=1000000 " "$fuzz_log"
# As .ci/run's ASan steps do: a report from a process whose exit status swift test does not see.
if grep -q "ERROR: AddressSanitizer\|ERROR: LeakSanitizer" "$fuzz_log"; then
    echo "AddressSanitizer or LeakSanitizer reported an error in the fuzz run" >&2
    exit 1
fi
rm -f "$fuzz_log" "$asan_log"

step "example runs"
RELAY_REDIS_PORT=$port swift run --skip-build RelayChat > /dev/null

step "a consumer package gets Subscriptions and SubscriptionsRedis from a checkout not named Subscriptions"
# One dependency line with the trait "Redis": no "multiple similar targets" clash, whatever the
# checkout's folder is called (here "my-fork", a link to this repository).
consumer=$(mktemp -d)
ln -s "$root" "$consumer/my-fork"
mkdir -p "$consumer/app/Sources/App"
cat > "$consumer/app/Package.swift" << 'MANIFEST'
// swift-tools-version:6.2
import PackageDescription

let package = Package(
    name: "App",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "../my-fork", traits: ["Redis"])],
    targets: [
        .executableTarget(
            name: "App",
            dependencies: [
                .product(name: "Subscriptions", package: "my-fork"),
                .product(name: "SubscriptionsRedis", package: "my-fork"),
            ])
    ]
)
MANIFEST
cat > "$consumer/app/Sources/App/main.swift" << 'PROGRAM'
import Foundation
import Subscriptions
import SubscriptionsRedis

let port = ProcessInfo.processInfo.environment["RELAY_REDIS_PORT"] ?? "6379"
let relay = try RedisRelay(center: PostCenter(), url: "redis://127.0.0.1:\(port)")
print("consumer ready: \(relay.waitUntilReady(timeout: .seconds(10)))")
PROGRAM
consumer_log=$(mktemp)
swift build --package-path "$consumer/app" 2>&1 | tee "$consumer_log"
if grep -Eq "multiple similar targets|warning:" "$consumer_log"; then
    echo "the consumer build clashed or warned" >&2
    exit 1
fi
RELAY_REDIS_PORT=$port "$(swift build --package-path "$consumer/app" --show-bin-path)/App" | tee "$consumer_log"
grep -q "consumer ready: true" "$consumer_log"
rm -rf "$consumer" "$consumer_log"

if [ "${1:-}" != "--no-bench" ]; then
    step "RelayBenchmarks, release, quick, beside redis-benchmark on the same server"
    swift build -c release --product RelayBenchmarks -Xswiftc -warnings-as-errors
    "$(swift build -c release --show-bin-path)/RelayBenchmarks" --port "$port" --quick
    step "RelayBenchmarks with signing (Options.signingKey), quick"
    "$(swift build -c release --show-bin-path)/RelayBenchmarks" --port "$port" --quick --sign
    step "RelayBenchmarks in history mode (Options.historyLength 10,000) beside redis-benchmark's XADD, quick"
    "$(swift build -c release --show-bin-path)/RelayBenchmarks" --port "$port" --quick --history 10000
    step "RelayBenchmarks --codec: the payload codec against JSONEncoder and binary PropertyListEncoder, quick"
    "$(swift build -c release --show-bin-path)/RelayBenchmarks" --codec --quick
fi

step "relay check passed"
