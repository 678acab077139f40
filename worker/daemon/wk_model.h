/* wk_model: preparing the models people upload (docs/API-EXTENSIONS.md, "Your
 * own models").
 *
 * An idle worker whose build reads uploaded models (fb_model_reader: the
 * inductor engine, when this worker serves it) claims a model still
 * preparing (db_model_prepare_claim: a lease like a job's), copies its archive
 * from the database into its model cache as a file named by its SHA-256 (the
 * digest checked before the file is named), has the engine read it in a
 * process without the database's credentials, and writes back ready with what
 * it found (and the native form the engine made, stored as a blob), or
 * invalid with why.  The lease is renewed while it copies and
 * reads. */
#ifndef WK_MODEL_H
#define WK_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fb_err.h"
#include "wk_ctx.h"

/* Prepares one model when there is one to claim; true when it claimed one
 * (whatever came of it). */
bool wk_model_prepare_one(wk_ctx *ctx);

/* The files of an uploaded model in the cache: its archive, and its native
 * form (made when it was prepared, db_model_form). */
#define WK_MODEL_ARCHIVE ".pt2"
#define WK_MODEL_FORM    ".fbn"

/* The archive of uploaded model model_id (form false), or its native form
 * (form true), in this worker's model cache (copied from the database when it
 * is not there yet, checked against its SHA-256): path out.  tick(ud) between
 * chunks (the job's heartbeat).  FB_ENOTFOUND when the model is gone,
 * FB_EUNSUPPORTED when it has no native form (err says why), FB_EINVAL when
 * its stored bytes do not match their digest, FB_ETOOBIG when it can never
 * fit the cache. */
FB_MUSTCHECK fb_code wk_model_file_path(wk_ctx *ctx, int64_t model_id, bool form,
                                        void (*tick)(void *ud), void *ud, char *path, size_t cap,
                                        fb_err *err);

/* The cache file of an archive or a native form: dir/<sha256 hex><ext>. */
FB_MUSTCHECK fb_code wk_model_cache_path(const char *dir, const char *sha_hex, const char *ext,
                                         char *path, size_t cap, fb_err *err);

/* Makes room for need more bytes in dir (at most cap_bytes in all): removes
 * the least recently used files (*.pt2, *.fbn, oldest modification time first;
 * a use touches the file) but never keep (a file name, may be NULL).
 * FB_ETOOBIG when need alone is over cap_bytes. */
FB_MUSTCHECK fb_code wk_model_cache_trim(const char *dir, int64_t cap_bytes, int64_t need,
                                         const char *keep, fb_err *err);

#endif
