# shellcheck shell=bash
# Sourced (not run on its own) by Scripts/topology-check.sh, and meant for the relay's Sentinel
# tests (issue 40): a throwaway Sentinel set on 127.0.0.1 in a temporary directory: a primary, one
# replica and 3 sentinels (redis-server sentinel.conf --sentinel) monitoring it with a quorum of 2.
# Every process runs in the background (not daemonized), its pid recorded. Needs redis-server and
# redis-cli 7 (Scripts/redis-server.sh's redis_dependencies installs them on Debian).
#
#   redis_sentinel_start          starts the primary, the replica (replicaof the primary) and the 3
#                                 sentinels, and waits until every sentinel knows the primary, the
#                                 replica (in sync) and the 2 other sentinels
#   redis_sentinel_stop           kills every process it started and removes the directory; safe to
#                                 call twice, and from an EXIT trap after a failure
#   redis_sentinel_primary        prints the primary's port as the first sentinel reports it
#                                 (SENTINEL get-master-addr-by-name)
#   redis_sentinel_failover [S]   SENTINEL FAILOVER, then waits (at most S seconds, default 45) until
#                                 every sentinel reports the other server as the primary, that server
#                                 says it is a primary, and the old primary has become its replica in
#                                 sync; swaps redis_sentinel_primary_port and redis_sentinel_replica_port
#
# Variables it sets: redis_sentinel_master_name (the monitored name, REDIS_SENTINEL_MASTER_NAME or
# "relay"), redis_sentinel_primary_port and redis_sentinel_replica_port (the data servers' ports,
# kept current by redis_sentinel_failover), redis_sentinel_ports (array, the 3 sentinels' ports),
# redis_sentinel_pids (array, every process's pid), redis_sentinel_dir (the temporary directory).
# Environment it reads: REDIS_SENTINEL_MASTER_NAME, REDIS_SENTINEL_DOWN_AFTER (milliseconds,
# default 1000), REDIS_SENTINEL_FAILOVER_TIMEOUT (milliseconds, default 5000).

# shellcheck source=Scripts/redis-process.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis-process.sh"

redis_sentinel_master_name=""
redis_sentinel_primary_port=""
redis_sentinel_replica_port=""
redis_sentinel_ports=()
redis_sentinel_pids=()
redis_sentinel_dir=""

redis_sentinel_cli() {
    local port=$1
    shift
    timeout 5 redis-cli -h 127.0.0.1 -p "$port" "$@"
}

# Starts a server on a free loopback port: $1 names its folder, $2 is "server" or "sentinel",
# the rest are configuration lines written after "port". A port is taken once the process on it
# answers INFO with our own pid (another engineer's server on a drawn port is never mistaken for
# ours). Sets redis_sentinel_spawned_port.
redis_sentinel_spawn() {
    local name=$1 kind=$2 dir candidate pid answer
    shift 2
    dir="$redis_sentinel_dir/$name"
    mkdir -p "$dir"
    redis_sentinel_spawned_port=""
    for _ in $(seq 20); do
        candidate=$((20000 + RANDOM % 30000))
        {
            echo "port $candidate"
            echo "bind 127.0.0.1"
            echo "daemonize no"
            echo "dir $dir"
            echo "logfile $dir/redis.log"
            printf '%s\n' "$@"
        } > "$dir/redis.conf"
        if [ "$kind" = sentinel ]; then
            redis-server "$dir/redis.conf" --sentinel >> "$dir/redis.log" 2>&1 &
        else
            redis-server "$dir/redis.conf" >> "$dir/redis.log" 2>&1 &
        fi
        pid=$!
        for _ in $(seq 50); do
            if ! kill -0 "$pid" 2> /dev/null; then break; fi
            answer=$(redis_sentinel_cli "$candidate" info server 2> /dev/null | tr -d '\r' | grep '^process_id:' || true)
            if [ "$answer" = "process_id:$pid" ]; then
                redis_sentinel_pids+=("$pid")
                redis_sentinel_spawned_port=$candidate
                return 0
            fi
            sleep 0.1
        done
        kill -9 "$pid" 2> /dev/null || true
        wait "$pid" 2> /dev/null || true
    done
    echo "redis_sentinel_spawn: could not start $name:" >&2
    tail -n 20 "$dir/redis.log" >&2
    return 1
}

redis_sentinel_start() {
    local i
    redis_sentinel_stop
    redis_sentinel_master_name=${REDIS_SENTINEL_MASTER_NAME:-relay}
    redis_sentinel_dir=$(mktemp -d "${TMPDIR:-/tmp}/redis-sentinel.XXXXXX")
    redis_sentinel_spawn primary server 'save ""' 'appendonly no' 'repl-diskless-sync-delay 0' || return 1
    redis_sentinel_primary_port=$redis_sentinel_spawned_port
    redis_sentinel_spawn replica server 'save ""' 'appendonly no' 'repl-diskless-sync-delay 0' \
        "replicaof 127.0.0.1 $redis_sentinel_primary_port" || return 1
    redis_sentinel_replica_port=$redis_sentinel_spawned_port
    for i in 1 2 3; do
        # A sentinel rewrites its configuration file: each has its own, in its own folder.
        redis_sentinel_spawn "sentinel-$i" sentinel \
            "sentinel monitor $redis_sentinel_master_name 127.0.0.1 $redis_sentinel_primary_port 2" \
            "sentinel down-after-milliseconds $redis_sentinel_master_name ${REDIS_SENTINEL_DOWN_AFTER:-1000}" \
            "sentinel failover-timeout $redis_sentinel_master_name ${REDIS_SENTINEL_FAILOVER_TIMEOUT:-5000}" \
            "sentinel parallel-syncs $redis_sentinel_master_name 1" || return 1
        redis_sentinel_ports+=("$redis_sentinel_spawned_port")
    done
    redis_sentinel_wait_known 45
}

redis_sentinel_stop() {
    redis_reap "${redis_sentinel_pids[@]}"
    redis_sentinel_pids=()
    redis_sentinel_ports=()
    redis_sentinel_primary_port=""
    redis_sentinel_replica_port=""
    if [ -n "$redis_sentinel_dir" ]; then rm -rf "$redis_sentinel_dir"; fi
    redis_sentinel_dir=""
}

# A field of SENTINEL MASTER <name> as one sentinel reports it.
redis_sentinel_field() {
    redis_sentinel_cli "$1" sentinel master "$redis_sentinel_master_name" 2> /dev/null | tr -d '\r' |
        awk -v field="$2" 'found { print; exit } $0 == field { found = 1 }'
}

# True when the replica's link to the primary is up, and every sentinel reports the primary on
# redis_sentinel_primary_port, the replica on redis_sentinel_replica_port (not down) and 2 other
# sentinels.
redis_sentinel_known() {
    local port address replicas
    redis_sentinel_cli "$redis_sentinel_replica_port" info replication 2> /dev/null | tr -d '\r' |
        grep -qx 'master_link_status:up' || return 1
    for port in "${redis_sentinel_ports[@]}"; do
        address=$(redis_sentinel_cli "$port" sentinel get-master-addr-by-name "$redis_sentinel_master_name" 2> /dev/null |
            tr -d '\r' | paste -sd: -)
        [ "$address" = "127.0.0.1:$redis_sentinel_primary_port" ] || return 1
        [ "$(redis_sentinel_field "$port" flags)" = master ] || return 1
        [ "$(redis_sentinel_field "$port" num-other-sentinels)" = 2 ] || return 1
        replicas=$(redis_sentinel_cli "$port" sentinel replicas "$redis_sentinel_master_name" 2> /dev/null | tr -d '\r' |
            awk '$0 == "name" { getline; name = $0 } $0 == "flags" { getline; print name, $0 }')
        [ "$replicas" = "127.0.0.1:$redis_sentinel_replica_port slave" ] || return 1
    done
}

redis_sentinel_wait_known() {
    local limit=$((SECONDS + ${1:-45})) port
    while [ $SECONDS -lt "$limit" ]; do
        if redis_sentinel_known; then return 0; fi
        sleep 0.2
    done
    echo "redis_sentinel_wait_known: the sentinels do not agree after ${1:-45} s (primary $redis_sentinel_primary_port, replica $redis_sentinel_replica_port)" >&2
    for port in "${redis_sentinel_ports[@]}"; do
        echo "-- sentinel $port: master $(redis_sentinel_cli "$port" sentinel get-master-addr-by-name "$redis_sentinel_master_name" 2>&1 | tr -d '\r' | paste -sd: -)," \
            "flags $(redis_sentinel_field "$port" flags), other sentinels $(redis_sentinel_field "$port" num-other-sentinels)," \
            "replicas $(redis_sentinel_field "$port" num-slaves)" >&2
    done
    return 1
}

redis_sentinel_primary() {
    redis_sentinel_cli "${redis_sentinel_ports[0]}" sentinel get-master-addr-by-name "$redis_sentinel_master_name" |
        tr -d '\r' | sed -n 2p
}

redis_sentinel_failover() {
    local old=$redis_sentinel_primary_port new=$redis_sentinel_replica_port answer
    answer=$(redis_sentinel_cli "${redis_sentinel_ports[0]}" sentinel failover "$redis_sentinel_master_name" 2>&1 | tr -d '\r')
    if [ "$answer" != OK ]; then
        echo "redis_sentinel_failover: SENTINEL FAILOVER answered: $answer" >&2
        return 1
    fi
    # The sentinels switch to the promoted replica within a second or two; the old primary is
    # turned into its replica only after a sentinel sees it still claiming to be a primary, which
    # takes several seconds more (it is what most of the wait is for).
    redis_sentinel_primary_port=$new
    redis_sentinel_replica_port=$old
    redis_sentinel_wait_known "${1:-45}" || return 1
    [ "$(redis_sentinel_cli "$new" role | head -n 1 | tr -d '\r')" = master ] || {
        echo "redis_sentinel_failover: the server on $new is not a primary" >&2
        return 1
    }
}
