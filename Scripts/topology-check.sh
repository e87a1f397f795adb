#!/usr/bin/env bash
# Smoke check of the topology scripts the relay's cluster and Sentinel tests use (issue 40):
# Scripts/redis-cluster.sh and Scripts/redis-sentinel.sh. Everything on 127.0.0.1, in temporary
# directories, killed and removed on exit (also after a failure). Needs redis-server and
# redis-cli 7; installs them when missing (Debian, Scripts/redis-server.sh's redis_dependencies).
#
#   cluster:  6 nodes up and cluster_state:ok; an SSUBSCRIBE/SPUBLISH round trip through the node
#             owning the channel's slot (and a MOVED from another primary); a primary killed, its
#             replica promoted and the cluster ok again; the killed node restarted as a replica;
#             100 slots resharded from one primary to another
#   Sentinel: a primary, a replica and 3 sentinels that know each other; SENTINEL
#             get-master-addr-by-name; a failover: the reported primary changes and the old one
#             becomes a replica
#
# One line per step; exits non-zero on the first failure. 25 to 27 s on 2 shared cores (4 runs
# on 6 December 2026, load average 5 to 6): the cluster 9 to 12 s (its failover 4 to 5 s), the
# Sentinel set about 15 s (its failover 11 to 12 s, mostly the sentinels waiting before they turn
# the old primary into a replica). Every wait is bounded (30 s a cluster wait, 45 s a Sentinel one).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS

# shellcheck source=Scripts/redis-server.sh
source "$root/Scripts/redis-server.sh"
# shellcheck source=Scripts/redis-cluster.sh
source "$root/Scripts/redis-cluster.sh"
# shellcheck source=Scripts/redis-sentinel.sh
source "$root/Scripts/redis-sentinel.sh"

scratch=""
subscriber=""
cleanup() {
    if [ -n "$subscriber" ]; then
        kill "$subscriber" 2> /dev/null || true
        wait "$subscriber" 2> /dev/null || true
    fi
    redis_cluster_stop
    redis_sentinel_stop
    if [ -n "$scratch" ]; then rm -rf "$scratch"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ok() { echo "ok   $* ($((SECONDS - start)) s)"; }
fail() {
    echo "FAIL $* ($((SECONDS - start)) s)" >&2
    exit 1
}

if ! command -v redis-server > /dev/null || ! command -v redis-cli > /dev/null; then redis_dependencies; fi
version=$(redis-server --version | sed -n 's/.* v=\([0-9]*\)\..*/\1/p')
[ "${version:-0}" -ge 7 ] || fail "redis-server 7 or later needed (sharded pub/sub), found: $(redis-server --version)"
scratch=$(mktemp -d)

# Cluster.

redis_cluster_start || fail "cluster: start 6 nodes and create the cluster"
ok "cluster: 6 nodes on 127.0.0.1 (${redis_cluster_ports[*]}), cluster_state:ok on every node, 16384 slots ok"

[ "$(redis_cluster_primaries | wc -l)" = 3 ] || fail "cluster: 3 primaries with slots"
for port in $(redis_cluster_primaries); do
    [ "$(redis_cluster_replicas_of "$port" | wc -l)" = 1 ] || fail "cluster: the primary on $port has one replica"
done
ok "cluster: 3 primaries, one replica each"

channel="topology-check.news"
any=${redis_cluster_ports[0]}
slot=$(redis_cluster_cli "$any" cluster keyslot "$channel" | tr -d '\r')
owner=$(redis_cluster_slot_owner "$slot")
[ -n "$owner" ] || fail "cluster: an owner for slot $slot"
timeout 20 redis-cli -h 127.0.0.1 -p "$owner" ssubscribe "$channel" > "$scratch/subscriber.out" 2>&1 &
subscriber=$!
for _ in $(seq 100); do
    if grep -qx ssubscribe "$scratch/subscriber.out" 2> /dev/null; then break; fi
    sleep 0.1
done
grep -qx ssubscribe "$scratch/subscriber.out" || fail "cluster: SSUBSCRIBE $channel on $owner"
receivers=$(redis_cluster_cli "$owner" spublish "$channel" "hello from topology-check" | tr -d '\r')
[ "$receivers" = 1 ] || fail "cluster: SPUBLISH $channel on $owner reached $receivers subscribers, not 1"
for _ in $(seq 50); do
    if grep -qx "hello from topology-check" "$scratch/subscriber.out"; then break; fi
    sleep 0.1
done
grep -qx "hello from topology-check" "$scratch/subscriber.out" || fail "cluster: the subscriber on $owner got the message"
kill "$subscriber" 2> /dev/null || true
wait "$subscriber" 2> /dev/null || true
subscriber=""
other=$(redis_cluster_primaries | grep -vx "$owner" | head -n 1)
redis_cluster_cli "$other" spublish "$channel" x 2>&1 | grep -q "^MOVED $slot 127.0.0.1:$owner" ||
    fail "cluster: SPUBLISH on $other, which does not own slot $slot, answers MOVED to $owner"
ok "cluster: SSUBSCRIBE/SPUBLISH round trip on $channel (slot $slot) through its owner $owner; MOVED from $other"

mapfile -t before < <(redis_cluster_primaries)
victim=$owner
redis_cluster_kill_primary "$victim" || fail "cluster: kill the primary on $victim"
[ ${#redis_cluster_killed_replicas[@]} = 1 ] || fail "cluster: the killed primary on $victim had one replica"
heir=${redis_cluster_killed_replicas[0]}
failover_start=$SECONDS
redis_cluster_wait_promoted "$heir" 30 || fail "cluster: the replica on $heir promoted after its primary $victim was killed"
[ "$(redis_cluster_slot_owner "$slot")" = "$heir" ] || fail "cluster: slot $slot now owned by $heir"
ok "cluster: primary $victim killed, replica $heir promoted and cluster_state:ok again in $((SECONDS - failover_start)) s"

redis_cluster_restart_node "$victim" || fail "cluster: restart the node on $victim"
redis_cluster_wait_ok 30 || fail "cluster: ok with the restarted node $victim"
[ "$(redis_cluster_cli "$victim" role | head -n 1 | tr -d '\r')" = slave ] || fail "cluster: the restarted node $victim is a replica"
ok "cluster: node $victim restarted, rejoined as a replica of $heir"

from=${before[0]}
[ "$from" != "$victim" ] || from=${before[1]}
to=$heir
from_before=$(redis_cluster_slot_count "$from")
to_before=$(redis_cluster_slot_count "$to")
redis_cluster_reshard "$from" "$to" 100 || fail "cluster: reshard 100 slots from $from to $to"
from_after=$(redis_cluster_slot_count "$from")
to_after=$(redis_cluster_slot_count "$to")
[ "$from_after" = $((from_before - 100)) ] && [ "$to_after" = $((to_before + 100)) ] ||
    fail "cluster: reshard moved 100 slots ($from: $from_before -> $from_after, $to: $to_before -> $to_after)"
timeout 30 redis-cli --cluster check "127.0.0.1:$from" > "$scratch/check.out" 2>&1 ||
    { cat "$scratch/check.out" >&2; fail "cluster: redis-cli --cluster check after the reshard"; }
ok "cluster: 100 slots resharded from $from ($from_before -> $from_after) to $to ($to_before -> $to_after), cluster check clean"

pids=("${redis_cluster_pids[@]}")
dir=$redis_cluster_dir
redis_cluster_stop
for pid in "${pids[@]}"; do
    if [ -n "$pid" ] && kill -0 "$pid" 2> /dev/null; then fail "cluster: node process $pid gone after stop"; fi
done
[ ! -e "$dir" ] || fail "cluster: $dir removed after stop"
ok "cluster: stopped, every node process gone, directory removed"

# Sentinel.

redis_sentinel_start || fail "sentinel: start a primary, a replica and 3 sentinels"
ok "sentinel: primary $redis_sentinel_primary_port, replica $redis_sentinel_replica_port, sentinels ${redis_sentinel_ports[*]} know each other"

old=$redis_sentinel_primary_port
for port in "${redis_sentinel_ports[@]}"; do
    address=$(redis_sentinel_cli "$port" sentinel get-master-addr-by-name "$redis_sentinel_master_name" | tr -d '\r' | paste -sd: -)
    [ "$address" = "127.0.0.1:$old" ] || fail "sentinel: sentinel $port reports the primary 127.0.0.1:$old, not $address"
done
ok "sentinel: get-master-addr-by-name $redis_sentinel_master_name is 127.0.0.1:$old on every sentinel"

failover_start=$SECONDS
redis_sentinel_failover 45 || fail "sentinel: failover"
new=$(redis_sentinel_primary)
[ "$new" != "$old" ] && [ "$new" = "$redis_sentinel_primary_port" ] || fail "sentinel: the reported primary changed from $old (now $new)"
redis_sentinel_cli "$old" info replication | tr -d '\r' | grep -qx "master_port:$new" ||
    fail "sentinel: the old primary $old is a replica of $new"
ok "sentinel: failover in $((SECONDS - failover_start)) s: primary $old -> $new, $old is now its replica"

pids=("${redis_sentinel_pids[@]}")
dir=$redis_sentinel_dir
redis_sentinel_stop
for pid in "${pids[@]}"; do
    if kill -0 "$pid" 2> /dev/null; then fail "sentinel: process $pid gone after stop"; fi
done
[ ! -e "$dir" ] || fail "sentinel: $dir removed after stop"
ok "sentinel: stopped, every process gone, directory removed"

echo "topology check passed in $((SECONDS - start)) s"
