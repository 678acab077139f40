#!/usr/bin/env bash
# backup.sh: a backup of FusionBench's database and its restore (docs/DEPLOY.md,
# "Backup and restore").
#
#   scripts/backup.sh dump DATABASE_URL FILE      pg_dump in the custom format
#                                                 (compressed, every table, the
#                                                 migration version included) to
#                                                 FILE, written whole or not at
#                                                 all (FILE.partial, then renamed)
#   scripts/backup.sh restore FILE DATABASE_URL   pg_restore FILE into the empty
#                                                 database DATABASE_URL names (one
#                                                 transaction: all or nothing), then
#                                                 check it: the tables and the
#                                                 schema version are there
#
# A dump taken while servers and workers run is consistent (pg_dump reads one
# snapshot); jobs running at the time come back as running, and the first
# worker on the restored database finds their leases expired and
# queues them again (at-least-once). Restore into a
# database with no tables: the restore refuses a database that has them.
# The URL is passed to pg_dump/pg_restore/psql on their command lines, where
# other users of the host can read it with ps: keep the password out of it
# (PGPASSWORD or ~/.pgpass, as for any PostgreSQL client).
set -euo pipefail

die() {
    echo "backup.sh: $*" >&2
    exit 1
}

usage() {
    echo "usage: backup.sh dump DATABASE_URL FILE | restore FILE DATABASE_URL" >&2
    exit 2
}

need() {
    command -v "$1" >/dev/null 2>&1 || die "$1 not found (Debian: apt-get install postgresql-client)"
}

dump() {
    local url=$1 file=$2
    need pg_dump
    [ -n "$url" ] || die "no DATABASE_URL"
    [ -e "$file" ] && die "$file exists; choose a new file (a backup is never overwritten)"
    pg_dump --format=custom --no-owner --no-privileges --file="$file.partial" --dbname="$url" ||
        {
            rm -f "$file.partial"
            die "pg_dump failed; nothing written"
        }
    mv "$file.partial" "$file"
    echo "backup.sh: wrote $file ($(stat -c %s "$file") bytes)" >&2
}

restore() {
    local file=$1 url=$2 n version
    need pg_restore
    need psql
    [ -r "$file" ] || die "cannot read $file"
    n=$(psql -XAtq -d "$url" -c "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") ||
        die "cannot reach the database to restore into"
    [ "$n" = 0 ] || die "the database already has $n tables; restore into an empty one"
    pg_restore --no-owner --no-privileges --file=- "$file" |
        psql -Xq -v ON_ERROR_STOP=1 --single-transaction -d "$url" >/dev/null ||
        die "the restore failed; the database is left empty"
    version=$(psql -XAtq -d "$url" -c "SELECT max(version) FROM schema_migrations") ||
        die "restored, but no schema_migrations table: is $file a FusionBench backup?"
    echo "backup.sh: restored $file: schema version $version," \
        "$(psql -XAtq -d "$url" -c 'SELECT count(*) FROM jobs') jobs," \
        "$(psql -XAtq -d "$url" -c 'SELECT count(*) FROM results') results" >&2
}

[ $# -eq 3 ] || usage
case $1 in
dump) dump "$2" "$3" ;;
restore) restore "$2" "$3" ;;
*) usage ;;
esac
