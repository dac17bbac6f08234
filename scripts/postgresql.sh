#!/usr/bin/env bash
# A throw-away PostgreSQL server for the tests, from Debian's package (install-test-services.sh).
#   scripts/postgresql.sh start DIR PORT   initialise DIR, start the server on 127.0.0.1:PORT and
#                                          print its URL (database llmperf, user llmperf)
#   scripts/postgresql.sh stop DIR         stop it (fast shutdown)
# As root, the server runs as the postgres user (PostgreSQL refuses to run as root).
set -euo pipefail
action=$1 dir=$2
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
case "$action" in
start)
    port=$3
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U llmperf --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-h 127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=50" start >/dev/null \
        || { tail -20 "$dir/server.log" >&2; exit 1; }
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U llmperf llmperf
    echo "postgresql://llmperf@127.0.0.1:$port/llmperf"
    ;;
stop)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    ;;
*)
    echo "usage: $0 start DIR PORT | stop DIR" >&2
    exit 2
    ;;
esac
