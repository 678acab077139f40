#!/bin/bash
# The stand-in postgres:15's entry point: a small subset of the official image's
# docker-entrypoint.sh (see the Dockerfile for what it honours).
set -euo pipefail

say() { echo "postgres-standin: $*" >&2; }

if [[ "${1:-}" == -* ]]; then
    set -- postgres "$@"
fi

# Anything but the server itself runs as is.
if [[ "${1:-}" != postgres ]]; then
    exec "$@"
fi

PGDATA=${PGDATA:-/var/lib/postgresql/data}
export PGDATA

# As root: make the data folder (a volume, maybe a bind mount) the postgres
# user's, then run this script again as that user.
if [[ $(id -u) -eq 0 ]]; then
    mkdir -p "$PGDATA"
    chown -R postgres:postgres "$PGDATA"
    chmod 700 "$PGDATA"
    install -d -o postgres -g postgres -m 2775 /var/run/postgresql
    exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
fi

POSTGRES_USER=${POSTGRES_USER:-postgres}
POSTGRES_DB=${POSTGRES_DB:-$POSTGRES_USER}
AUTH=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}

if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
    if [[ -z "${POSTGRES_PASSWORD:-}" && "$AUTH" != trust ]]; then
        say "error: the database is uninitialized and POSTGRES_PASSWORD is not set"
        say "  (set it, or POSTGRES_HOST_AUTH_METHOD=trust to allow connections without one)"
        exit 1
    fi
    say "initializing $PGDATA (user $POSTGRES_USER, database $POSTGRES_DB, host auth $AUTH)"
    pwfile=$(mktemp)
    printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
    pwopt=()
    [[ -n "${POSTGRES_PASSWORD:-}" ]] && pwopt=(--pwfile="$pwfile")
    # shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of arguments
    initdb --username="$POSTGRES_USER" "${pwopt[@]}" --encoding=UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host="$AUTH" ${POSTGRES_INITDB_ARGS:-} >&2
    rm -f "$pwfile"
    {
        echo
        echo "# docker: password authentication from any address"
        echo "host all all all $AUTH"
    } >>"$PGDATA/pg_hba.conf"
    # scram needs the password stored as SCRAM (the default since 14), md5 as md5.
    if [[ "$AUTH" == md5 ]]; then
        echo "password_encryption = md5" >>"$PGDATA/postgresql.auto.conf"
    fi
    echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"

    # A server on the Unix socket only, for POSTGRES_DB and the init scripts.
    pg_ctl -D "$PGDATA" -w -o "-c listen_addresses=''" start >&2
    psql=(psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname postgres)
    if [[ "$POSTGRES_DB" != postgres ]]; then
        "${psql[@]}" --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";' >&2
    fi
    for f in /docker-entrypoint-initdb.d/*; do
        [[ -e "$f" ]] || continue
        case "$f" in
        *.sh)
            say "running $f"
            # shellcheck disable=SC1090 # the image's own init scripts
            . "$f"
            ;;
        *.sql) say "running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" >&2 ;;
        *) say "ignoring $f" ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >&2
    say "init done; starting"
fi

exec "$@"
