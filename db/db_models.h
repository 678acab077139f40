/* db_models: the models people upload (migration 0011), their archives stored
 * once by content in 1 MiB chunks.
 *
 * An upload is one transaction on a connection of its own:
 * db_model_upload_begin (name free, quota, a new blob), db_model_upload_chunk
 * per chunk as the bytes arrive, db_model_upload_finish (the same bytes stored
 * before: the new chunks rolled back and the old blob named; the model row;
 * COMMIT) or db_model_upload_abort (ROLLBACK: nothing stays).  Owner 0 is
 * "no one" (a server without authentication). */
#ifndef DB_MODELS_H
#define DB_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"

#define DB_MODEL_CHUNK    (1u << 20) /* bytes per stored chunk (the last may be shorter) */
#define DB_MODEL_NAME_MAX 64
#define DB_SHA256_LEN     32

/* True for a model name: 1-64 of letters, digits, '.', '_', '-', not starting
 * with '.', '_' or '-'. */
bool db_model_name_valid(const char *name);

typedef struct db_model_upload {
    int64_t owner_id;       /* 0: no one */
    const char *name;       /* db_model_name_valid */
    const char *visibility; /* "private" or "lab" */
    int64_t declared;       /* the body's Content-Length */
    int64_t quota;          /* the owner's storage quota in bytes when the user has none of
                               their own (users.model_quota_bytes); < 0: none */
    int64_t blob_id;        /* set by begin */
    int next_seq;           /* the next chunk's number */
    int64_t stored;         /* bytes stored so far */
} db_model_upload;

/* BEGIN, then: FB_ECONFLICT (field "name") when the owner has a model of that
 * name, FB_ETOOBIG (field "quota") when declared bytes would take the owner
 * past their quota; else a new blob to write chunks to.  On any error the
 * transaction is rolled back. */
FB_MUSTCHECK fb_code db_model_upload_begin(db_conn *c, db_model_upload *u, fb_err *err);

/* Stores the next chunk (n <= DB_MODEL_CHUNK bytes). */
FB_MUSTCHECK fb_code db_model_upload_chunk(db_conn *c, db_model_upload *u, const void *data,
                                           size_t n, fb_err *err);

/* Ends the upload with the archive's SHA-256: the model row (status
 * "preparing"), committed; *json is the model as db_model_get returns it
 * (caller frees).  FB_ETOOBIG when the stored bytes take the owner past the
 * quota after all; the transaction is rolled back on any error. */
FB_MUSTCHECK fb_code db_model_upload_finish(db_conn *c, db_model_upload *u,
                                            const unsigned char sha[DB_SHA256_LEN], char **json,
                                            fb_err *err);

/* ROLLBACK (the connection may be broken: nothing is reported). */
void db_model_upload_abort(db_conn *c);

/* Who asks: models another user keeps private are not there for them. */
typedef struct db_model_viewer {
    int64_t user_id; /* 0: no one (authentication off, sees everything) */
    bool admin;      /* sees everything */
} db_model_viewer;

/* The models v may see, newest first, as a JSON array text (caller frees): id,
 * name, owner, visibility, status, error, size, sha256 (hex), format, info,
 * created_at, updated_at, and "mine". */
FB_MUSTCHECK fb_code db_model_list(db_conn *c, const db_model_viewer *v, char **json, fb_err *err);

/* One model as a JSON object text; FB_ENOTFOUND when there is none that v may see. */
FB_MUSTCHECK fb_code db_model_get(db_conn *c, const db_model_viewer *v, int64_t id, char **json,
                                  fb_err *err);

/* The model named name of owner (a user's name; NULL: v's own, or with
 * authentication off the owner-less ones) that v may see, as db_model_get
 * returns it.  FB_ENOTFOUND (field "workload") when there is none. */
FB_MUSTCHECK fb_code db_model_find(db_conn *c, const db_model_viewer *v, const char *owner,
                                   const char *name, char **json, fb_err *err);

/* Deletes a model (its owner or an admin; FB_EFORBIDDEN for another user who
 * may see it, FB_ENOTFOUND for one who may not), and its archive when no other
 * model names it. */
FB_MUSTCHECK fb_code db_model_delete(db_conn *c, const db_model_viewer *v, int64_t id, fb_err *err);

/* The archive of a model v may see: its blob, size and chunk count. */
typedef struct db_model_blob {
    int64_t blob_id;
    int64_t size;
    int chunks;
    char sha256[2 * DB_SHA256_LEN + 1]; /* hex */
    char name[DB_MODEL_NAME_MAX + 1];
} db_model_blob;

FB_MUSTCHECK fb_code db_model_blob_get(db_conn *c, const db_model_viewer *v, int64_t id,
                                       db_model_blob *out, fb_err *err);

/* Chunk seq of a blob into buf (cap >= DB_MODEL_CHUNK); *n its length.
 * FB_ENOTFOUND when the blob has no such chunk (deleted meanwhile). */
FB_MUSTCHECK fb_code db_model_chunk_read(db_conn *c, int64_t blob_id, int seq, void *buf,
                                         size_t cap, size_t *n, fb_err *err);

/* ---- preparing (worker side, migration 0012) ---- */

/* A model a worker claimed to prepare: its archive and the attempt that fences
 * what the worker writes back. */
typedef struct db_model_prep {
    int64_t id;
    int attempt;
    int64_t blob_id;
    int64_t size;
    char sha256[2 * DB_SHA256_LEN + 1]; /* hex */
} db_model_prep;

/* Claims the oldest model still preparing whose lease is free or older than
 * stale_s seconds, with attempts left (fewer than max_attempts made): it is
 * this worker's, attempt + 1.  Models stale at their last attempt end invalid
 * ("preparing did not finish after N attempts") in the same statement.
 * FB_ENOTFOUND when there is none. */
FB_MUSTCHECK fb_code db_model_prepare_claim(db_conn *c, const char *worker_id, int stale_s,
                                            int max_attempts, db_model_prep *out, fb_err *err);

/* Renews the lease of (id, attempt).  FB_ESTALE when it is no longer this
 * attempt's (claimed again, deleted, or finished). */
FB_MUSTCHECK fb_code db_model_prepare_heartbeat(db_conn *c, int64_t id, int attempt, fb_err *err);

/* Ends the attempt: "ready" with info_json (a JSON object), or "invalid" with
 * error (at most 2000 bytes are kept).  FB_ESTALE when fenced out (nothing
 * written). */
FB_MUSTCHECK fb_code db_model_prepare_finish(db_conn *c, int64_t id, int attempt, bool ready,
                                             const char *error, const char *info_json, fb_err *err);

/* Worker side: the archive of model id, whoever owns it (out's attempt is 0).
 * FB_ENOTFOUND when the model is gone. */
FB_MUSTCHECK fb_code db_model_archive(db_conn *c, int64_t id, db_model_prep *out, fb_err *err);

/* ---- the native form (worker side, migration 0013) ---- */

/* An uploaded model's native form (the file the native engine runs it from,
 * made while preparing it) is stored like an upload, in one transaction:
 * db_model_form_begin (BEGIN, the model's row locked so that no other worker
 * claims it meanwhile, a new blob), db_model_upload_chunk per chunk, then
 * db_model_form_finish, which seals the blob (or names the same bytes stored
 * before), ends attempt `attempt` of model id ready with info_json and this
 * form, and commits.  FB_ESTALE when the attempt is no longer this worker's;
 * on any error everything is rolled back. */
FB_MUSTCHECK fb_code db_model_form_begin(db_conn *c, db_model_upload *u, int64_t id, int attempt,
                                         fb_err *err);
FB_MUSTCHECK fb_code db_model_form_finish(db_conn *c, db_model_upload *u,
                                          const unsigned char sha[DB_SHA256_LEN], int64_t id,
                                          int attempt, const char *info_json, fb_err *err);

/* The native form of model id, as db_model_archive gives the archive.
 * FB_ENOTFOUND when the model is gone, FB_EUNSUPPORTED (why in err) when it
 * has none. */
FB_MUSTCHECK fb_code db_model_form(db_conn *c, int64_t id, db_model_prep *out, fb_err *err);

#endif
