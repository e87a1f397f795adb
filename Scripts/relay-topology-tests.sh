#!/usr/bin/env bash
# Runs the Redis relay's cluster and Sentinel tests (issue 40) against throwaway topologies on
# 127.0.0.1: a 6-node cluster (Scripts/redis-cluster.sh) and a Sentinel set (Scripts/redis-sentinel.sh),
# both stopped and removed on exit, also after a failure. The tests read the topologies from
# RELAY_CLUSTER_PORTS (the nodes' ports, primaries first, comma-separated) and RELAY_SENTINEL_PORTS
# (the sentinels') with RELAY_SENTINEL_MASTER; without them those tests are skipped.
#
# Expects the relay package built (Scripts/relay-check.sh builds it first). With arguments, runs
# them instead of the tests (`Scripts/relay-topology-tests.sh sleep 3600` keeps both up for
# development; the ports are printed). Needs redis-server and redis-cli 7.
#
# 20 to 31 s on 2 shared cores (6 December 2026, load average 6 to 9): about 7 s to start both
# topologies, 2 s for the Sentinel tests (their failover about 1 s), 10 to 13 s for the cluster
# tests (the killed primary's replica takes over after the 2 s node timeout). Every wait in the
# tests is bounded (20 to 30 s each), so a hung fault fails within minutes, not never.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS

# shellcheck source=Scripts/redis-cluster.sh
source "$root/Scripts/redis-cluster.sh"
# shellcheck source=Scripts/redis-sentinel.sh
source "$root/Scripts/redis-sentinel.sh"

stop_all() {
    redis_cluster_stop
    redis_sentinel_stop
}
trap stop_all EXIT

redis_cluster_start
redis_sentinel_start
cluster_ports=$(IFS=,; echo "${redis_cluster_ports[*]}")
sentinel_ports=$(IFS=,; echo "${redis_sentinel_ports[*]}")
export RELAY_CLUSTER_PORTS=$cluster_ports
export RELAY_SENTINEL_PORTS=$sentinel_ports
export RELAY_SENTINEL_MASTER=$redis_sentinel_master_name
echo "cluster $RELAY_CLUSTER_PORTS, sentinels $RELAY_SENTINEL_PORTS (master $RELAY_SENTINEL_MASTER), up after $((SECONDS - start)) s"

cd "$root/Relays/Redis"
if [ $# -gt 0 ]; then
    "$@"
else
    swift test --skip-build --filter "ClusterTests|SentinelTests"
fi
echo "topology tests done after $((SECONDS - start)) s"
