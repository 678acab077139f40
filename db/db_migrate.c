/* db_migrate: applies the embedded migrations, once each, under an advisory lock. */
#include "db_int.h"

#include <stdio.h>

#include "fb_log.h"

/* Any fixed key: every FusionBench process migrating this database takes it. */
#define MIGRATE_LOCK_KEY "4604297001"

static const db_stmt st_lock = {"migrate lock", "SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")",
                                false};
static const db_stmt st_unlock = {"migrate unlock",
                                  "SELECT pg_advisory_unlock(" MIGRATE_LOCK_KEY ")", false};
static const db_stmt st_table = {"migrate table",
                                 "CREATE TABLE IF NOT EXISTS schema_migrations ("
                                 " version integer PRIMARY KEY,"
                                 " name text NOT NULL,"
                                 " applied_at timestamptz NOT NULL DEFAULT now())",
                                 false};
static const db_stmt st_applied = {
    "migrate check", "SELECT 1 FROM schema_migrations WHERE version = $1::integer", false};
static const db_stmt st_record = {
    "migrate record", "INSERT INTO schema_migrations (version, name) VALUES ($1::integer, $2)",
    false};

/* Runs a statement whose rows nobody needs. */
static fb_code run(db_conn *c, const db_stmt *st, int n, const char *const *params, fb_err *err)
{
    PGresult *res = NULL;
    fb_code rc = db_exec(c, st, n, params, &res, err);
    PQclear(res);
    return rc;
}

/* Applies m in its own transaction unless schema_migrations has it already. */
static fb_code apply_one(db_conn *c, const db_migration *m, fb_err *err)
{
    char version[16];
    snprintf(version, sizeof version, "%d", m->version);
    const char *params[] = {version, m->name};
    PGresult *res = NULL;
    fb_code rc = db_exec(c, &st_applied, 1, params, &res, err);
    if (rc)
        goto out;
    if (PQntuples(res) > 0)
        goto out;
    fb_info("db: applying migration %s", m->name);
    rc = db_exec_script(c, "migrate begin", "BEGIN", NULL, err);
    if (rc)
        goto out;
    rc = db_exec_script(c, m->name, m->sql, NULL, err);
    if (!rc)
        rc = run(c, &st_record, 2, params, err);
    if (!rc)
        rc = db_exec_script(c, "migrate commit", "COMMIT", NULL, err);
    if (rc) {
        fb_err ignored;
        /* Logged inside; the first error is the one to report. */
        if (db_exec_script(c, "migrate rollback", "ROLLBACK", NULL, &ignored))
            fb_warn("db: rollback of %s failed: %s", m->name, ignored.msg);
    }
out:
    PQclear(res);
    return rc;
}

fb_code db_migrate(db_conn *c, fb_err *err)
{
    fb_code rc = run(c, &st_lock, 0, NULL, err);
    if (rc)
        return rc;
    /* Under the lock: two starters racing on CREATE TABLE IF NOT EXISTS could
     * otherwise both try to create it. */
    rc = run(c, &st_table, 0, NULL, err);
    for (int i = 0; !rc && i < db_migrations_count; i++)
        rc = apply_one(c, &db_migrations[i], err);
    /* The lock is per session: a broken connection released it already. */
    fb_err ignored;
    if (run(c, &st_unlock, 0, NULL, &ignored))
        fb_warn("db: could not release the migration lock: %s", ignored.msg);
    return rc;
}
