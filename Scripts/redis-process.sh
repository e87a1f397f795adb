# shellcheck shell=bash
# Sourced by Scripts/redis-cluster.sh and Scripts/redis-sentinel.sh (not run on its own): what
# both do with the redis-server processes they start in the background. Defines functions only.
#
#   redis_reap PID ...   asks each process to exit (SIGTERM), gives each at most 5 s, then kills
#                        it (SIGKILL) and reaps it; empty arguments are skipped

redis_reap() {
    local pid
    for pid in "$@"; do
        if [ -n "$pid" ]; then kill "$pid" 2> /dev/null || true; fi
    done
    for pid in "$@"; do
        if [ -z "$pid" ]; then continue; fi
        for _ in $(seq 50); do
            if ! kill -0 "$pid" 2> /dev/null; then break; fi
            sleep 0.1
        done
        kill -9 "$pid" 2> /dev/null || true
        wait "$pid" 2> /dev/null || true
    done
}
