/* itest: what the integration tests share: the throwaway database's URL, a
 * cmocka fixture that connects, migrates and empties the tables, and direct
 * libpq helpers (tests may reach under db/ to set the scene).  Include after
 * cmocka.h. */
#ifndef ITEST_H
#define ITEST_H

#include <libpq-fe.h>

#include "db.h"

/* FB_TEST_DATABASE_URL, set by itest_url_or_skip. */
extern const char *itest_url;

/* Reads FB_TEST_DATABASE_URL into itest_url; exits 77 (skipped, with the
 * reason) when it is not set. */
void itest_url_or_skip(void);

/* cmocka fixture: *state is a db_conn on a migrated database whose jobs,
 * results, kernels and workers are empty (ids restarted); teardown closes it. */
int itest_setup(void **state);
int itest_teardown(void **state);

/* A new libpq connection to itest_url (the test fails if it cannot). */
PGconn *raw_connect(void);
/* Runs sql on pg; the test fails unless it succeeds. */
void raw_on(PGconn *pg, const char *sql);
/* raw_on on a connection of its own. */
void raw_exec(const char *sql);
/* First column of the first row as text ("" for NULL), in buf. */
const char *raw_text(const char *sql, char *buf, size_t cap);
/* The same as an integer. */
long long raw_int(const char *sql);

void itest_sleep_ms(int ms);

#endif
