#!/usr/bin/env bash
# pg.sh: a throwaway or embedded PostgreSQL cluster in a folder of its own.
#
#   scripts/pg.sh start DIR [PORT]  initdb when DIR/data is missing, start the server
#                                   (127.0.0.1 only, unix socket in DIR), create the
#                                   database "fusionbench", print its URL last on stdout.
#                                   Starting a running cluster only prints the URL.
#   scripts/pg.sh stop DIR          stop it (fast); no error when it is not running.
#   scripts/pg.sh url DIR           print the URL of a cluster started in DIR.
#
# FB_PG_FAST=1 turns off fsync and friends: for tests only, a crash loses the data.
# As root, DIR belongs to the postgres user and every server command runs as it
# (initdb refuses root); the URL then names user postgres.
set -euo pipefail

DEFAULT_PORT=55432
DB_NAME=fusionbench

die() {
    echo "pg.sh: $*" >&2
    exit 1
}

usage() {
    echo "usage: pg.sh start DIR [PORT] | stop DIR | url DIR" >&2
    exit 2
}

find_bindir() {
    local d
    if command -v pg_config >/dev/null 2>&1; then
        d=$(pg_config --bindir 2>/dev/null || true)
        if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
            echo "$d"
            return 0
        fi
    fi
    # Newest installed major version first.
    for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -t/ -k4 -n -r); do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
            echo "$d"
            return 0
        fi
    done
    die "no PostgreSQL server binaries found (initdb, pg_ctl): install postgresql or put pg_config on PATH"
}

# Runs a server command as the cluster's owner.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

owner_name() {
    if [ "$(id -u)" -eq 0 ]; then
        echo postgres
    else
        id -un
    fi
}

valid_port() {
    case "$1" in
    '' | *[!0-9]*) return 1 ;;
    esac
    [ "$1" -ge 1 ] && [ "$1" -le 65535 ]
}

print_url() {
    local dir=$1 port user
    [ -f "$dir/port" ] || die "no cluster was started in $dir (missing $dir/port)"
    port=$(cat "$dir/port")
    user=$(cat "$dir/user" 2>/dev/null || owner_name)
    echo "postgresql://$user@127.0.0.1:$port/$DB_NAME"
}

is_running() {
    local dir=$1 bindir=$2
    [ -f "$dir/data/PG_VERSION" ] || return 1
    as_owner "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1
}

prepare_dir() {
    local dir=$1
    mkdir -p "$dir" || die "cannot create $dir"
    if [ "$(id -u)" -eq 0 ]; then
        id postgres >/dev/null 2>&1 || die "running as root needs a 'postgres' user to own the cluster"
        chown -R postgres: "$dir" || die "cannot chown $dir to postgres"
        runuser -u postgres -- test -w "$dir" ||
            die "user postgres cannot write $dir (a parent folder is closed to it?): choose a folder under /tmp or /var/lib"
    fi
}

init_cluster() {
    local dir=$1 bindir=$2
    echo "pg.sh: initdb in $dir/data" >&2
    if ! as_owner "$bindir/initdb" -D "$dir/data" -E UTF8 --locale=C \
        --auth-local=trust --auth-host=trust -U "$(owner_name)" >"$dir/initdb.log" 2>&1; then
        tail -n 20 "$dir/initdb.log" >&2
        die "initdb failed (log: $dir/initdb.log)"
    fi
    # Our settings live in one included file, rewritten on every start.
    echo "include_if_exists = 'fusionbench.conf'" | as_owner tee -a "$dir/data/postgresql.conf" >/dev/null
}

write_conf() {
    local dir=$1 port=$2
    {
        echo "# written by scripts/pg.sh on every start"
        echo "listen_addresses = '127.0.0.1'"
        echo "port = $port"
        echo "unix_socket_directories = '$dir'"
        echo "max_connections = 200"
        if [ "${FB_PG_FAST:-0}" = "1" ]; then
            echo "fsync = off"
            echo "synchronous_commit = off"
            echo "full_page_writes = off"
        fi
    } | as_owner tee "$dir/data/fusionbench.conf" >/dev/null
}

create_db() {
    local dir=$1 bindir=$2 port=$3 have
    have=$(as_owner "$bindir/psql" -X -h "$dir" -p "$port" -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'") ||
        die "cannot query the new server on port $port"
    if [ "$have" != "1" ]; then
        as_owner "$bindir/createdb" -h "$dir" -p "$port" "$DB_NAME" ||
            die "createdb $DB_NAME failed"
    fi
}

cmd_start() {
    local dir=$1 port=${2:-$DEFAULT_PORT} bindir
    valid_port "$port" || die "bad port '$port'"
    bindir=$(find_bindir)
    if is_running "$dir" "$bindir"; then
        if [ -n "${2:-}" ] && [ "$(cat "$dir/port" 2>/dev/null)" != "$port" ]; then
            echo "pg.sh: already running in $dir on port $(cat "$dir/port"), not $port" >&2
        fi
        print_url "$dir"
        return 0
    fi
    prepare_dir "$dir"
    [ -f "$dir/data/PG_VERSION" ] || init_cluster "$dir" "$bindir"
    write_conf "$dir" "$port"
    echo "$port" | as_owner tee "$dir/port" >/dev/null
    owner_name | as_owner tee "$dir/user" >/dev/null
    if ! as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null; then
        tail -n 20 "$dir/server.log" >&2 || true
        die "server did not start (port $port taken? log: $dir/server.log)"
    fi
    create_db "$dir" "$bindir" "$port"
    print_url "$dir"
}

cmd_stop() {
    local dir=$1 bindir
    bindir=$(find_bindir)
    if ! is_running "$dir" "$bindir"; then
        echo "pg.sh: no server running in $dir" >&2
        return 0
    fi
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || die "pg_ctl stop failed"
}

[ $# -ge 2 ] || usage
action=$1
dir=$(realpath -m -- "$2")
case "$action" in
start)
    [ $# -le 3 ] || usage
    cmd_start "$dir" "${3:-}"
    ;;
stop) cmd_stop "$dir" ;;
url) print_url "$dir" ;;
*) usage ;;
esac
