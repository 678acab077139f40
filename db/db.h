/* db: the only code that talks to libpq.
 *
 * Every statement goes through PQexecParams with parameters, checks the expected
 * status, logs the statement with the error, and PQclears.  A db_conn reconnects
 * by itself: a call that finds the connection broken resets it once and retries
 * when the statement is safe to retry (reads, and writes fenced by attempt);
 * FB_EUNAVAIL when the database does not answer.
 *
 * Queue rules (docs/DESIGN.md): claim is a CTE selecting FOR UPDATE SKIP LOCKED with
 * LIMIT 1, then UPDATE; every later write of a worker (heartbeat, progress,
 * complete, fail, release) is fenced by (id, attempt, state = 'running') and
 * returns FB_ESTALE when the fence does not hold.  Results and kernel rows are
 * written in the transaction that completes the job.  NOTIFY fb_jobs is sent on
 * insert and requeue; workers LISTEN and poll as a safety net. */
#ifndef FB_DB_H
#define FB_DB_H

#include <stdbool.h>
#include <stdint.h>

#include "fb_err.h"

typedef struct db_conn db_conn;

/* Connects with a libpq conninfo string or URL.  *out is the caller's, freed with
 * db_close.  FB_EUNAVAIL when the server does not answer. */
FB_MUSTCHECK fb_code db_connect(const char *conninfo, db_conn **out, fb_err *err);

/* Whether the last statement on c was sent a second time after its connection
 * broke under it (a fenced write refused then may have landed the first time). */
bool db_resent(const db_conn *c);

/* db_connect's bound on a silent peer (db_connect_io). */
#define DB_IO_TIMEOUT_MS 10000

/* db_connect, with a session that counts as broken (FB_EUNAVAIL) when the
 * server leaves sent data unacknowledged for io_timeout_ms (at least 500), or
 * stops answering keepalives while a statement waits: a partition or a dead
 * host ends a call in about 1.5 io_timeout_ms, not TCP's quarter of an hour.
 * Settings in conninfo win (keepalives_idle, tcp_user_timeout, ...). */
FB_MUSTCHECK fb_code db_connect_io(const char *conninfo, int io_timeout_ms, db_conn **out,
                                   fb_err *err);

/* Sets the session's statement_timeout (ms, 0 = none): a statement that runs
 * longer is canceled and its call returns FB_ETIMEOUT. */
FB_MUSTCHECK fb_code db_set_statement_timeout(db_conn *c, int ms, fb_err *err);
void db_close(db_conn *c);

/* Applies db/migrations/NNNN_*.sql (embedded at build time) that are not yet
 * recorded in schema_migrations, each in its own transaction, all under
 * pg_advisory_lock so concurrent starters apply each migration once. */
FB_MUSTCHECK fb_code db_migrate(db_conn *c, fb_err *err);

/* SELECT 1.  FB_OK or FB_EUNAVAIL. */
FB_MUSTCHECK fb_code db_ping(db_conn *c, fb_err *err);

/* ---- jobs (server side) ---- */

#define DB_TS_MAX 40 /* RFC 3339 UTC: "2026-11-22T10:00:00.123456Z" */

typedef struct db_job {
    int64_t id;
    char state[16];  /* queued running succeeded failed canceled */
    char *spec_json; /* owned, never NULL */
    int attempt, max_attempts;
    char *progress_json; /* owned JSON object text, or NULL */
    char worker[128];    /* "" when none */
    char created_at[DB_TS_MAX], started_at[DB_TS_MAX], finished_at[DB_TS_MAX]; /* "" = null */
    char *error_json;  /* owned {"code":..,"message":..} text, or NULL */
    char *result_json; /* owned, or NULL until succeeded */
    bool cancel_requested;
    int64_t owner_id; /* 0: none (submitted with authentication off) */
    char owner[64];   /* the owner's user name, "" when none */
} db_job;

void db_job_free(db_job *j); /* frees owned strings; the struct is the caller's */

typedef struct db_new_job {
    const char *spec_json; /* the validated spec with defaults applied */
    const char *workload, *engine, *device, *dtype;
    int batch_size, priority, max_attempts, timeout_s;
    int64_t owner_id; /* the submitting user, 0 = none */
} db_new_job;

/* Inserts a queued job and NOTIFYs fb_jobs.  *id is set. */
FB_MUSTCHECK fb_code db_job_insert(db_conn *c, const db_new_job *nj, int64_t *id, fb_err *err);

/* db_job_insert that also reads the new job back (as db_job_get would) in the
 * same round trip.  *out is the caller's (db_job_free), zeroed on error. */
FB_MUSTCHECK fb_code db_job_create(db_conn *c, const db_new_job *nj, db_job *out, fb_err *err);

/* A submit's Idempotency-Key (docs/API-EXTENSIONS.md): the client's key and
 * the SHA-256 of its request body, hex. */
typedef struct db_idem {
    const char *key, *hash;
} db_idem;

/* What a keyed submit found: nothing under its key (it made the job or
 * suite), the same request made before (the first one's is answered), or
 * another request under the same key (nothing made). */
typedef enum db_idem_outcome { DB_IDEM_NEW, DB_IDEM_REPLAY, DB_IDEM_MISMATCH } db_idem_outcome;

/* db_job_create under idem: unless nj's owner already made a job with
 * idem->key, creates it (DB_IDEM_NEW); else *out is that job when its body
 * hash is idem->hash (DB_IDEM_REPLAY), and *out is zeroed when not
 * (DB_IDEM_MISMATCH).  A concurrent submit of the same key waits for the
 * first's commit and finds its job. */
/* The job owner_id (0: none) made under idem's key: FB_ENOTFOUND when none (err
 * untouched); else *how is DB_IDEM_REPLAY (same hash, *out filled, the caller
 * frees it) or DB_IDEM_MISMATCH. */
FB_MUSTCHECK fb_code db_job_find_idem(db_conn *c, int64_t owner_id, const db_idem *idem,
                                      db_job *out, db_idem_outcome *how, fb_err *err);

FB_MUSTCHECK fb_code db_job_create_idem(db_conn *c, const db_new_job *nj, const db_idem *idem,
                                        db_job *out, db_idem_outcome *how, fb_err *err);

#define DB_JOB_BATCH_MAX   1024                /* jobs per db_job_create_many */
#define DB_JOB_BATCH_BYTES (32u * 1024 * 1024) /* array text of one batch statement */

/* What became of one job of db_job_create_many. */
typedef struct db_job_outcome {
    fb_code rc; /* FB_OK: job is set and the caller's (db_job_free) */
    db_job job; /* zeroed unless rc is FB_OK */
    fb_err err; /* why, when rc is not FB_OK */
} db_job_outcome;

/* Group commit: creates n jobs (1..DB_JOB_BATCH_MAX) as db_job_create does, all
 * in one statement and so one transaction (one round trip, one WAL flush, one
 * NOTIFY fb_jobs), and reads each back: out[i] is nj[i]'s outcome, every one set
 * on return.  When the batch statement fails on its input (a bad value, a
 * violated constraint), each job is then created alone, so only the jobs at
 * fault fail, each with its own error.  Returns FB_EUNAVAIL when the connection
 * broke (the jobs not yet answered get FB_EUNAVAIL too; as with db_job_create,
 * a commit cut off in flight may still have stored them), FB_EINVAL for n out of
 * range, else FB_OK: look at each out[i].rc. */
FB_MUSTCHECK fb_code db_job_create_many(db_conn *c, const db_new_job *const *nj, int n,
                                        db_job_outcome *out, fb_err *err);

/* FB_ENOTFOUND when there is no such job. */
FB_MUSTCHECK fb_code db_job_get(db_conn *c, int64_t id, db_job *out, fb_err *err);

typedef struct db_job_filter {
    const char *state, *workload, *engine, *device; /* NULL = any */
    const char *label_key, *label_value;            /* both or neither */
    int limit;                                      /* 1..200 */
    int64_t before_id;                              /* cursor: ids < this; 0 = from newest */
    int64_t owner_id;                               /* this user's jobs only; 0 = anyone's */
} db_job_filter;

/* Newest first.  *items is a malloc'd array of *n jobs (free each with
 * db_job_free, then free the array).  *next_before is the cursor for the next page,
 * 0 when this was the last. */
FB_MUSTCHECK fb_code db_job_list(db_conn *c, const db_job_filter *f, db_job **items, int *n,
                                 int64_t *next_before, fb_err *err);

/* Queued → canceled at once; running → cancel_requested = true (its worker stops
 * it and marks it canceled); finished → FB_ECONFLICT; none → FB_ENOTFOUND. */
FB_MUSTCHECK fb_code db_job_cancel(db_conn *c, int64_t id, fb_err *err);

/* Kernel rows of a job as a JSON array text (owned by caller), filtered by
 * variant when variant is not NULL.  FB_ENOTFOUND when the job does not exist. */
FB_MUSTCHECK fb_code db_job_kernels(db_conn *c, int64_t id, const char *variant, char **rows_json,
                                    fb_err *err);

/* ---- queue (worker side) ---- */

typedef struct db_claim {
    int64_t id;
    int attempt;
    int timeout_s;
    char *spec_json; /* owned */
} db_claim;

void db_claim_free(db_claim *cl);

/* Claims the highest-priority, oldest queued job whose engine is one of engines
 * (n_engines names) and whose device equals device, and whose backoff has passed.
 * FB_ENOTFOUND when none.  Sets worker, started_at, heartbeat_at, attempt+1. */
FB_MUSTCHECK fb_code db_queue_claim(db_conn *c, const char *worker_id, const char *const *engines,
                                    int n_engines, const char *device, db_claim *out, fb_err *err);

/* Heartbeat (and progress, when progress_json is not NULL) for (id, attempt).
 * *cancel is set when a cancel was requested.  FB_ESTALE when fenced out. */
FB_MUSTCHECK fb_code db_queue_heartbeat(db_conn *c, int64_t id, int attempt,
                                        const char *progress_json, bool *cancel, fb_err *err);

/* In one transaction: fenced state → succeeded, insert result_json into results
 * and kernel rows from kernels_json ({"variant": [row, ...], ...}, may be NULL).
 * FB_ESTALE when fenced out (nothing written). */
FB_MUSTCHECK fb_code db_queue_complete(db_conn *c, int64_t id, int attempt, const char *result_json,
                                       const char *kernels_json, fb_err *err);

/* Fenced: the attempt failed with code/message.  When retry is true and attempts
 * remain, the job goes back to queued with backoff (2^attempt seconds, capped at
 * 300) else to failed.  A job whose cancel was requested goes to canceled. */
FB_MUSTCHECK fb_code db_queue_fail(db_conn *c, int64_t id, int attempt, const char *code,
                                   const char *message, bool retry, fb_err *err);

/* Fenced: the worker is shutting down before finishing; the job goes back to
 * queued at once and the attempt is not counted (attempt - 1). */
FB_MUSTCHECK fb_code db_queue_release(db_conn *c, int64_t id, int attempt, fb_err *err);

/* Fenced: the worker stopped a running job on a cancel request → canceled. */
FB_MUSTCHECK fb_code db_queue_mark_canceled(db_conn *c, int64_t id, int attempt, fb_err *err);

/* Requeues running jobs whose heartbeat is older than stale_s seconds (with
 * backoff), or fails them with code "lost" when attempts are used up.  Safe to run
 * from every worker and server at once.  Counts are optional (NULL). */
FB_MUSTCHECK fb_code db_queue_rescue(db_conn *c, int stale_s, int *requeued, int *failed,
                                     fb_err *err);

/* LISTEN fb_jobs once, then wait up to timeout_ms for a notification.  *woken is
 * true when one came.  FB_EUNAVAIL when the connection broke (caller reconnects). */
FB_MUSTCHECK fb_code db_queue_wait(db_conn *c, int timeout_ms, bool *woken, fb_err *err);

/* ---- workers ---- */

typedef struct db_worker_reg {
    const char *id; /* "host/cpu0" or "host/gpu3" */
    const char *host;
    const char *device_json;    /* fb_device_info_to_json */
    const char *engines_json;   /* ["native"] */
    const char *workloads_json; /* [fb_workload_info_to_json, ...] */
} db_worker_reg;

/* Inserts or updates the worker, state "idle", last_heartbeat now. */
FB_MUSTCHECK fb_code db_worker_register(db_conn *c, const db_worker_reg *w, fb_err *err);

/* state "idle" | "busy" | "draining" | "stopped"; current_job 0 = none.  *drain
 * (may be NULL) is set to whether an operator asked this worker to drain
 * (db_worker_drain). */
FB_MUSTCHECK fb_code db_worker_heartbeat(db_conn *c, const char *id, const char *state,
                                         int64_t current_job, bool *drain, fb_err *err);

/* Asks the live worker id (heartbeat within stale_s) to drain: finish its
 * running job, claim no more, exit.  FB_ENOTFOUND for an unknown id,
 * FB_ECONFLICT for a stopped or lost worker. */
FB_MUSTCHECK fb_code db_worker_drain(db_conn *c, const char *id, int stale_s, fb_err *err);

/* Stores a built-in catalog (a JSON array of workload infos, each naming its
 * devices) under source ("native/cpu,cuda": engine and devices built),
 * replacing that source's earlier one. */
FB_MUSTCHECK fb_code db_catalog_builtin_put(db_conn *c, const char *source,
                                            const char *workloads_json, fb_err *err);

/* Takes the session-level advisory lock of a GPU without waiting (key: a hash
 * of "fusionbench-gpu:" || uuid): one worker per GPU across every host that
 * shares the database.  *got is false when another session holds it.  Held
 * until the connection closes; taking it again on the same session is harmless
 * (re-entrant), and after a reconnect it is taken anew, so the worker calls
 * this with every heartbeat and a reset connection never leaves the GPU
 * unguarded for long. */
FB_MUSTCHECK fb_code db_worker_lock_gpu(db_conn *c, const char *uuid, bool *got, fb_err *err);

/* GET /workers body "items" array as JSON text (caller frees).  A worker whose
 * heartbeat is older than stale_s is reported with state "lost". */
FB_MUSTCHECK fb_code db_worker_list(db_conn *c, int stale_s, char **items_json, fb_err *err);

/* Union of the workloads that every registered worker and every built-in
 * catalog offer, as a JSON array text of workload infos, one per (name, engine),
 * devices merged, with "registered_devices" (offered by a worker that ever
 * registered) and "alive_devices" (offered by a live worker now: heartbeat
 * within stale_s). */
FB_MUSTCHECK fb_code db_workload_catalog(db_conn *c, int stale_s, char **items_json, fb_err *err);

/* ---- operations ---- */

typedef struct db_stats {
    int64_t jobs_by_state[5];   /* queued running succeeded failed canceled */
    double oldest_queued_age_s; /* 0 when none */
    int64_t workers_alive;
} db_stats;

FB_MUSTCHECK fb_code db_get_stats(db_conn *c, int stale_s, db_stats *out, fb_err *err);

#endif
