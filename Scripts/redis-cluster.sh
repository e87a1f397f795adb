# shellcheck shell=bash
# Sourced (not run on its own) by Scripts/topology-check.sh, and meant for the relay's cluster
# tests (issue 40): a throwaway Redis Cluster of 6 nodes (3 primaries, 3 replicas) on free
# 127.0.0.1 ports, in a temporary directory. Every node is a redis-server in the background (not
# daemonized), its pid recorded; nothing listens on anything but loopback. Needs redis-server and
# redis-cli 7 (Scripts/redis-server.sh's redis_dependencies installs them on Debian).
#
#   redis_cluster_start           starts the 6 nodes, creates the cluster (redis-cli --cluster create
#                                 --cluster-replicas 1) and waits until every node reports
#                                 cluster_state:ok with all 16384 slots assigned and ok
#   redis_cluster_stop            kills every node it started (and any a test started again from a
#                                 configuration in its directory) and removes the directory; safe to
#                                 call twice, and from an EXIT trap after a failure
#   redis_cluster_wait_ok [S]     waits (at most S seconds, default 30) until every running node
#                                 reports cluster_state:ok and all slots assigned and ok, every
#                                 replica's link to its primary is up, and every node sees them all
#   redis_cluster_primaries       prints the ports of the running primaries that own slots, one a line
#   redis_cluster_replicas_of P   prints the ports of the replicas of the primary on port P
#   redis_cluster_slot_owner N    prints the port of the primary owning slot N
#   redis_cluster_slot_count P    prints how many slots the primary on port P owns
#   redis_cluster_kill_primary P  kills the primary on port P (SIGKILL, a crash) and sets
#                                 redis_cluster_killed_replicas to its replicas' ports (it fails when
#                                 P is not a primary)
#   redis_cluster_wait_promoted P [S]  waits (at most S seconds, default 30) until the node on port P
#                                 is a primary and the cluster is ok again
#   redis_cluster_restart_node P  (re)starts the node on port P with its configuration and nodes file
#                                 (it rejoins the cluster; a killed primary comes back as a replica)
#   redis_cluster_reshard FROM TO N  moves N slots from the primary on port FROM to the one on port TO
#                                 (redis-cli --cluster reshard, non-interactive) and waits until ok
#
# Variables it sets: redis_cluster_ports (array, the 6 ports in creation order: the first 3 are
# the primaries at creation), redis_cluster_pids (array, same order; empty for a stopped node),
# redis_cluster_dir (the temporary directory: one folder per port with redis.conf, nodes.conf and
# redis.log). Environment it reads: REDIS_CLUSTER_APPENDONLY (yes or no, default no),
# REDIS_CLUSTER_NODE_TIMEOUT (milliseconds, default 2000).
#
# Ports: a node also listens on its port + 10000 (the cluster bus), so ports are drawn from
# 20000-49999. A port is taken only once the server on it answers INFO with our own pid, so a
# server of someone else on a drawn port is never mistaken for ours.

# shellcheck source=Scripts/redis-process.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis-process.sh"

redis_cluster_ports=()
redis_cluster_pids=()
redis_cluster_dir=""
redis_cluster_killed_replicas=()

# redis-cli on loopback, bounded: a frozen or dying node cannot hang the caller.
redis_cluster_cli() {
    local port=$1
    shift
    timeout 5 redis-cli -h 127.0.0.1 -p "$port" "$@"
}

# The index of a port in redis_cluster_ports, or nothing.
redis_cluster_index() {
    local i
    for i in "${!redis_cluster_ports[@]}"; do
        if [ "${redis_cluster_ports[$i]}" = "$1" ]; then echo "$i"; return 0; fi
    done
    return 1
}

# Starts redis-server with the configuration in $redis_cluster_dir/$port and waits (at most 5 s)
# until it answers with its own pid. Sets redis_cluster_spawned_pid; fails when it did not come up.
redis_cluster_spawn() {
    local port=$1 dir="$redis_cluster_dir/$1" pid answer
    redis-server "$dir/redis.conf" >> "$dir/redis.log" 2>&1 &
    pid=$!
    redis_cluster_spawned_pid=""
    for _ in $(seq 50); do
        if ! kill -0 "$pid" 2> /dev/null; then break; fi
        answer=$(redis_cluster_cli "$port" info server 2> /dev/null | tr -d '\r' | grep '^process_id:' || true)
        if [ "$answer" = "process_id:$pid" ]; then redis_cluster_spawned_pid=$pid; return 0; fi
        sleep 0.1
    done
    kill -9 "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
    return 1
}

redis_cluster_write_conf() {
    local port=$1 dir="$redis_cluster_dir/$1"
    mkdir -p "$dir"
    cat > "$dir/redis.conf" << CONF
port $port
bind 127.0.0.1
daemonize no
dir $dir
logfile $dir/redis.log
loglevel notice
save ""
appendonly ${REDIS_CLUSTER_APPENDONLY:-no}
cluster-enabled yes
cluster-config-file $dir/nodes.conf
cluster-node-timeout ${REDIS_CLUSTER_NODE_TIMEOUT:-2000}
repl-diskless-sync-delay 0
CONF
}

redis_cluster_start() {
    local candidate attempts=0 i addresses=()
    redis_cluster_stop
    redis_cluster_dir=$(mktemp -d "${TMPDIR:-/tmp}/redis-cluster.XXXXXX")
    while [ ${#redis_cluster_ports[@]} -lt 6 ]; do
        attempts=$((attempts + 1))
        if [ $attempts -gt 60 ]; then
            echo "redis_cluster_start: no free port pair after 60 tries" >&2
            return 1
        fi
        candidate=$((20000 + RANDOM % 30000))
        if redis_cluster_index "$candidate" > /dev/null; then continue; fi
        redis_cluster_write_conf "$candidate"
        if redis_cluster_spawn "$candidate"; then
            redis_cluster_ports+=("$candidate")
            redis_cluster_pids+=("$redis_cluster_spawned_pid")
        else
            rm -rf "${redis_cluster_dir:?}/$candidate"
        fi
    done
    for i in "${!redis_cluster_ports[@]}"; do addresses+=("127.0.0.1:${redis_cluster_ports[$i]}"); done
    # --cluster create makes the first 3 addresses the primaries and assigns the replicas.
    if ! timeout 60 redis-cli --cluster create "${addresses[@]}" --cluster-replicas 1 --cluster-yes \
        > "$redis_cluster_dir/create.log" 2>&1; then
        echo "redis_cluster_start: redis-cli --cluster create failed:" >&2
        cat "$redis_cluster_dir/create.log" >&2
        return 1
    fi
    redis_cluster_wait_ok 30
}

redis_cluster_stop() {
    local port info pid conf
    # A node a test started again (daemonized, so that it outlives the test process) is not among
    # our pids: it is ours when the configuration file it reports is in our directory.
    if [ -n "$redis_cluster_dir" ]; then
        for port in "${redis_cluster_ports[@]}"; do
            info=$(redis_cluster_cli "$port" info server 2> /dev/null | tr -d '\r') || continue
            pid=$(sed -n 's/^process_id://p' <<< "$info")
            conf=$(sed -n 's/^config_file://p' <<< "$info")
            if [ -n "$pid" ] && [[ "$conf" == "$redis_cluster_dir"/* ]]; then kill -9 "$pid" 2> /dev/null || true; fi
        done
    fi
    redis_reap "${redis_cluster_pids[@]}"
    redis_cluster_ports=()
    redis_cluster_pids=()
    redis_cluster_killed_replicas=()
    if [ -n "$redis_cluster_dir" ]; then rm -rf "$redis_cluster_dir"; fi
    redis_cluster_dir=""
}

# True when the node on this port reports a healthy cluster with every slot covered, and, when it
# is a replica, its link to its primary is up (a replica that never synced cannot be promoted).
redis_cluster_node_ok() {
    local info
    info=$(redis_cluster_cli "$1" cluster info 2> /dev/null | tr -d '\r') || return 1
    grep -qx 'cluster_state:ok' <<< "$info" && grep -qx 'cluster_slots_assigned:16384' <<< "$info" &&
        grep -qx 'cluster_slots_ok:16384' <<< "$info" || return 1
    info=$(redis_cluster_cli "$1" info replication 2> /dev/null | tr -d '\r') || return 1
    if grep -qx 'role:slave' <<< "$info"; then grep -qx 'master_link_status:up' <<< "$info" || return 1; fi
}

# The number of replicas the node on this port sees (CLUSTER NODES, not failed).
redis_cluster_seen_replicas() {
    redis_cluster_cli "$1" cluster nodes 2> /dev/null | tr -d '\r' | awk '$3 ~ /slave/ && $3 !~ /fail/' | wc -l
}

# Every running node is ok (above), and every one sees as many replicas as there are running
# nodes in the replica role: the gossip has settled, so any node's CLUSTER NODES tells the truth.
redis_cluster_wait_ok() {
    local limit=$((SECONDS + ${1:-30})) i all replicas role
    while [ $SECONDS -lt "$limit" ]; do
        all=yes
        replicas=0
        for i in "${!redis_cluster_ports[@]}"; do
            if [ -z "${redis_cluster_pids[$i]}" ]; then continue; fi
            if ! redis_cluster_node_ok "${redis_cluster_ports[$i]}"; then all=no; break; fi
            role=$(redis_cluster_cli "${redis_cluster_ports[$i]}" role 2> /dev/null | head -n 1 | tr -d '\r' || true)
            if [ "$role" = slave ]; then replicas=$((replicas + 1)); fi
        done
        if [ $all = yes ]; then
            for i in "${!redis_cluster_ports[@]}"; do
                if [ -z "${redis_cluster_pids[$i]}" ]; then continue; fi
                if [ "$(redis_cluster_seen_replicas "${redis_cluster_ports[$i]}")" != "$replicas" ]; then all=no; break; fi
            done
        fi
        if [ $all = yes ]; then return 0; fi
        sleep 0.2
    done
    echo "redis_cluster_wait_ok: the cluster is not ok after ${1:-30} s" >&2
    for i in "${!redis_cluster_ports[@]}"; do
        if [ -n "${redis_cluster_pids[$i]}" ]; then
            echo "-- node ${redis_cluster_ports[$i]}:" >&2
            redis_cluster_cli "${redis_cluster_ports[$i]}" cluster info 2>&1 | grep -E 'cluster_(state|slots)' >&2 || true
            redis_cluster_cli "${redis_cluster_ports[$i]}" info replication 2>&1 | grep -E '^(role|master_link_status)' >&2 || true
        fi
    done
    return 1
}

# CLUSTER NODES as seen by a running node (the first that answers).
redis_cluster_nodes() {
    local i
    for i in "${!redis_cluster_ports[@]}"; do
        if [ -z "${redis_cluster_pids[$i]}" ]; then continue; fi
        if redis_cluster_cli "${redis_cluster_ports[$i]}" cluster nodes 2> /dev/null | tr -d '\r'; then return 0; fi
    done
    return 1
}

redis_cluster_primaries() {
    redis_cluster_nodes | awk '$3 ~ /master/ && $3 !~ /fail/ && NF > 8 { split($2, a, "[:@]"); print a[2] }'
}

redis_cluster_replicas_of() {
    local id
    id=$(redis_cluster_cli "$1" cluster myid | tr -d '\r') || return 1
    redis_cluster_nodes | awk -v id="$id" '$4 == id { split($2, a, "[:@]"); print a[2] }'
}

redis_cluster_slot_owner() {
    redis_cluster_nodes | awk -v slot="$1" '$3 ~ /master/ && $3 !~ /fail/ {
        split($2, a, "[:@]")
        for (f = 9; f <= NF; f++) {
            if ($f ~ /^\[/) continue
            n = split($f, r, "-")
            lo = r[1] + 0; hi = (n == 2 ? r[2] : r[1]) + 0
            if (slot + 0 >= lo && slot + 0 <= hi) { print a[2]; exit }
        }
    }'
}

redis_cluster_slot_count() {
    local id
    id=$(redis_cluster_cli "$1" cluster myid | tr -d '\r') || return 1
    redis_cluster_nodes | awk -v id="$id" '$1 == id {
        total = 0
        for (f = 9; f <= NF; f++) {
            if ($f ~ /^\[/) continue
            n = split($f, r, "-")
            total += (n == 2 ? r[2] - r[1] + 1 : 1)
        }
        print total
    }'
}

redis_cluster_kill_primary() {
    local port=$1 i role
    i=$(redis_cluster_index "$port") || { echo "redis_cluster_kill_primary: $port is not a node" >&2; return 1; }
    role=$(redis_cluster_cli "$port" role 2> /dev/null | head -n 1 | tr -d '\r')
    if [ "$role" != master ]; then
        echo "redis_cluster_kill_primary: the node on $port is not a primary (role: ${role:-none})" >&2
        return 1
    fi
    # shellcheck disable=SC2034 # read by the caller
    mapfile -t redis_cluster_killed_replicas < <(redis_cluster_replicas_of "$port")
    kill -9 "${redis_cluster_pids[$i]}" 2> /dev/null || true
    wait "${redis_cluster_pids[$i]}" 2> /dev/null || true
    redis_cluster_pids[i]=""
}

redis_cluster_wait_promoted() {
    local port=$1 limit=$((SECONDS + ${2:-30})) role
    while [ $SECONDS -lt "$limit" ]; do
        role=$(redis_cluster_cli "$port" role 2> /dev/null | head -n 1 | tr -d '\r' || true)
        if [ "$role" = master ]; then
            redis_cluster_wait_ok $((limit - SECONDS > 1 ? limit - SECONDS : 1))
            return
        fi
        sleep 0.2
    done
    echo "redis_cluster_wait_promoted: the node on $port is not a primary after ${2:-30} s" >&2
    return 1
}

redis_cluster_restart_node() {
    local port=$1 i pid
    i=$(redis_cluster_index "$port") || { echo "redis_cluster_restart_node: $port is not a node" >&2; return 1; }
    pid=${redis_cluster_pids[$i]}
    if [ -n "$pid" ]; then
        kill "$pid" 2> /dev/null || true
        for _ in $(seq 50); do
            if ! kill -0 "$pid" 2> /dev/null; then break; fi
            sleep 0.1
        done
        kill -9 "$pid" 2> /dev/null || true
        wait "$pid" 2> /dev/null || true
        redis_cluster_pids[i]=""
    fi
    redis_cluster_spawn "$port" || { echo "redis_cluster_restart_node: the node on $port did not come back" >&2; return 1; }
    redis_cluster_pids[i]=$redis_cluster_spawned_pid
}

redis_cluster_reshard() {
    local from=$1 to=$2 count=$3 from_id to_id
    from_id=$(redis_cluster_cli "$from" cluster myid | tr -d '\r') || return 1
    to_id=$(redis_cluster_cli "$to" cluster myid | tr -d '\r') || return 1
    if ! timeout 120 redis-cli --cluster reshard "127.0.0.1:$from" --cluster-from "$from_id" \
        --cluster-to "$to_id" --cluster-slots "$count" --cluster-yes \
        > "$redis_cluster_dir/reshard.log" 2>&1; then
        echo "redis_cluster_reshard: redis-cli --cluster reshard failed:" >&2
        tail -n 20 "$redis_cluster_dir/reshard.log" >&2
        return 1
    fi
    redis_cluster_wait_ok 30
}
