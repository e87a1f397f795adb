# Sourced by Scripts/relay-check.sh (not run on its own): what the relay's tests need on a Debian
# machine, and a throwaway redis-server on loopback. Scripts/mutation-check.py --relay runs its
# redis_dependencies and starts its server the same way as redis_server_start, in Python.
#
#   redis_dependencies    installs redis-server, redis-tools, pkg-config, libhiredis-dev, libssl-dev
#                         and openssl when missing (apt-get, non-interactive; sudo when not root)
#   redis_server_start    starts a redis-server on a free 127.0.0.1 port (no persistence, not
#                         daemonized) and waits until it answers PING; sets redis_port and redis_pid
#   redis_server_stop     kills it (the caller traps EXIT to call it)

redis_dependencies() {
    local missing=() sudo=""
    command -v redis-server > /dev/null || missing+=(redis-server)
    command -v redis-cli > /dev/null && command -v redis-benchmark > /dev/null || missing+=(redis-tools)
    command -v pkg-config > /dev/null || missing+=(pkg-config)
    if ! pkg-config --exists hiredis 2> /dev/null; then missing+=(libhiredis-dev); fi
    if ! pkg-config --exists openssl 2> /dev/null; then missing+=(libssl-dev); fi
    command -v openssl > /dev/null || missing+=(openssl)
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing ${missing[*]}"
        if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
        export DEBIAN_FRONTEND=noninteractive
        if ! $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"; then
            $sudo apt-get update -q
            $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
        fi
    fi
}

redis_port=""
redis_pid=""
redis_log=""

redis_server_start() {
    local candidate
    redis_log=$(mktemp)
    redis_port=""
    for _ in $(seq 20); do
        candidate=$((20000 + RANDOM % 40000))
        redis-server --port "$candidate" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
            --loglevel warning > "$redis_log" 2>&1 &
        redis_pid=$!
        for _ in $(seq 50); do
            if redis-cli -p "$candidate" ping 2> /dev/null | grep -q PONG; then redis_port=$candidate; break; fi
            if ! kill -0 "$redis_pid" 2> /dev/null; then break; fi
            sleep 0.1
        done
        if [ -n "$redis_port" ]; then break; fi
        kill "$redis_pid" 2> /dev/null || true
        wait "$redis_pid" 2> /dev/null || true
        redis_pid=""
    done
    if [ -z "$redis_port" ]; then
        echo "could not start redis-server:" >&2
        cat "$redis_log" >&2
        return 1
    fi
}

redis_server_stop() {
    if [ -n "$redis_pid" ]; then
        kill "$redis_pid" 2> /dev/null || true
        wait "$redis_pid" 2> /dev/null || true
        redis_pid=""
    fi
    if [ -n "$redis_log" ]; then rm -f "$redis_log"; fi
}
