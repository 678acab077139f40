/* itest: the integration tests' shared fixture and libpq helpers (itest.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "itest.h"

const char *itest_url;

void itest_url_or_skip(void)
{
    itest_url = getenv("FB_TEST_DATABASE_URL");
    if (!itest_url || !*itest_url) {
        printf("skipped: FB_TEST_DATABASE_URL not set\n");
        exit(77);
    }
}

int itest_setup(void **state)
{
    db_conn *c = NULL;
    fb_err err = {0};
    if (db_connect(itest_url, &c, &err) != FB_OK) {
        fprintf(stderr, "connect: %s\n", err.msg);
        return -1;
    }
    if (db_migrate(c, &err) != FB_OK) {
        fprintf(stderr, "migrate: %s\n", err.msg);
        db_close(c);
        return -1;
    }
    raw_exec("TRUNCATE jobs, results, kernels, workers, catalog_builtin, users, tokens RESTART "
             "IDENTITY CASCADE");
    *state = c;
    return 0;
}

int itest_teardown(void **state)
{
    db_close(*state);
    return 0;
}

PGconn *raw_connect(void)
{
    PGconn *pg = PQconnectdb(itest_url);
    assert_int_equal(PQstatus(pg), CONNECTION_OK);
    return pg;
}

void raw_on(PGconn *pg, const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
}

void raw_exec(const char *sql)
{
    PGconn *pg = raw_connect();
    raw_on(pg, sql);
    PQfinish(pg);
}

const char *raw_text(const char *sql, char *buf, size_t cap)
{
    PGconn *pg = raw_connect();
    PGresult *r = PQexec(pg, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1)
        fail_msg("%s: %s", sql, PQresultErrorMessage(r));
    snprintf(buf, cap, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(pg);
    return buf;
}

long long raw_int(const char *sql)
{
    char buf[64];
    return strtoll(raw_text(sql, buf, sizeof buf), NULL, 10);
}

void itest_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
