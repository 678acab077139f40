/* db_int: what the db/ files share and nobody outside db/ sees: the connection
 * struct, the one statement runner, result readers, the embedded migrations. */
#ifndef FB_DB_INT_H
#define FB_DB_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "db.h"

/* Hot statements prepared on one session (db_exec_prep): at most this many; the
 * rest run unprepared, which is only slower. */
#define DB_PREPARED_MAX 32

struct db_conn {
    PGconn *pg;
    bool listening; /* LISTEN fb_jobs done on this session (lost on reset) */
    /* Statements prepared on this session, as server-side "fb_p<index>"; a new
     * session (reset) has none, so the count goes back to 0 there. */
    const struct db_stmt *prepared[DB_PREPARED_MAX];
    int n_prepared;
    bool resent; /* the last statement was sent again after a reconnect */
};

/* A statement: a short name for logs, its SQL, and whether it may run twice
 * (reads, and writes fenced by attempt) when the connection broke under it. */
typedef struct db_stmt {
    const char *name;
    const char *sql;
    bool retry;
} db_stmt;

/* A timestamptz column as RFC 3339 UTC text (NULL stays NULL). */
#define DB_TS(col) "to_char((" col ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

/* Largest text a db function hands out (JSON of a list, kernels, a result). */
#define DB_TEXT_MAX (64u * 1024 * 1024)

/* Runs st with n text parameters (NULL entries are SQL NULL) through
 * PQexecParams.  On FB_OK *res is the caller's (PQclear); on error *res is NULL,
 * the statement is logged and err says why.  A broken connection is reset once,
 * and st is run again when st->retry. */
FB_MUSTCHECK fb_code db_exec(db_conn *c, const db_stmt *st, int n, const char *const *params,
                             PGresult **res, fb_err *err);

/* db_exec for the hot statements (claim, heartbeat, complete, insert, get): st is
 * prepared once per session (PQprepare on first use, again after a reconnect) and
 * run with PQexecPrepared, which saves the server parsing and planning it on every
 * call.  st must be a static statement (the cache is keyed by its address) whose
 * parameter types are fixed by casts or context in its SQL.  Not for statements
 * whose best plan depends on which parameters are NULL (the server may switch a
 * prepared statement to one generic plan after five runs). */
FB_MUSTCHECK fb_code db_exec_prep(db_conn *c, const db_stmt *st, int n, const char *const *params,
                                  PGresult **res, fb_err *err);

/* db_exec with binary parameters (formats[i] 1: params[i] is lengths[i] raw
 * bytes, a bytea) and, with result_format 1, binary results: for a model's
 * chunks, which text would double.  Never retried and never reconnects: it
 * runs inside a transaction the caller holds, which a broken connection ends. */
FB_MUSTCHECK fb_code db_exec_bin(db_conn *c, const db_stmt *st, int n, const char *const *params,
                                 const int *lengths, const int *formats, int result_format,
                                 PGresult **res, fb_err *err);

/* Like db_exec, for trusted multi-statement text with no parameters (migrations):
 * PQexec, never retried.  res may be NULL when the caller needs no rows. */
FB_MUSTCHECK fb_code db_exec_script(db_conn *c, const char *name, const char *sql, PGresult **res,
                                    fb_err *err);

/* Readers of one field of a result.  db_get_text: strdup of the value, NULL for
 * SQL NULL (*out owned by the caller).  db_get_i64: FB_EINTERNAL unless an integer. */
FB_MUSTCHECK fb_code db_get_text(const PGresult *res, int row, int col, char **out, fb_err *err);
FB_MUSTCHECK fb_code db_get_i64(const PGresult *res, int row, int col, int64_t *out, fb_err *err);
FB_MUSTCHECK fb_code db_get_int(const PGresult *res, int row, int col, int *out, fb_err *err);
/* Copies the value into buf (size cap), "" for SQL NULL; FB_ETOOBIG when longer. */
FB_MUSTCHECK fb_code db_get_buf(const PGresult *res, int row, int col, char *buf, size_t cap,
                                fb_err *err);

/* Decimal text of v in buf (>= 24 bytes); returns buf. */
const char *db_i64_text(int64_t v, char *buf, size_t cap);

/* Runs st ($1 the owner id, $2 the key; prepared) for what owner_id made under
 * idem's key: FB_ENOTFOUND when nothing (err untouched), else *res holds the
 * row, hash_col its request's hash, and *how says whether idem's hash is it
 * (DB_IDEM_REPLAY) or not (DB_IDEM_MISMATCH).  The caller clears *res. */
FB_MUSTCHECK fb_code db_idem_row(db_conn *c, const db_stmt *st, int64_t owner_id,
                                 const db_idem *idem, int hash_col, PGresult **res,
                                 db_idem_outcome *how, fb_err *err);

typedef struct db_migration {
    int version;
    const char *name; /* "0001_init" */
    const char *sql;
} db_migration;

/* In version order; defined by the generated db_migrations_gen.c. */
extern const db_migration db_migrations[];
extern const int db_migrations_count;

#endif
