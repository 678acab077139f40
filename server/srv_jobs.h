/* srv_jobs: the /api/v1/jobs resource (create, get, list, cancel, kernels). */
#ifndef SRV_JOBS_H
#define SRV_JOBS_H

#include "db.h"
#include "fb_spec.h"
#include "srv_req.h"
#include "srv_parse.h"

/* What the user's role allows of a resolved spec: a priority above 0 only for
 * admins (FB_EFORBIDDEN), a timeout clamped to SRV_USER_TIMEOUT_MAX below. */
FB_MUSTCHECK fb_code srv_jobs_admit(fb_spec *spec, const srv_user *u, fb_err *err);

/* Encodes a resolved spec for db_job_insert/db_job_create, owned by u: *text is
 * the spec's JSON (caller frees), nj's strings point into spec and *text. */
FB_MUSTCHECK fb_code srv_jobs_encode(const fb_spec *spec, const srv_user *u, char **text,
                                     db_new_job *nj, fb_err *err);

/* Resolves a parsed spec against the catalog (defaults filled), admits it
 * for r's user and encodes it into *text (caller frees) and nj; false after
 * answering the error (422 for a catalog miss). */
bool srv_jobs_prepare(srv_req *r, fb_spec *spec, char **text, db_new_job *nj);

/* The route's {id} capture as a job id; false after answering 404 (a bad id
 * is answered like a missing job). */
bool srv_job_id(srv_req *r, int64_t *id);

/* A new JSON object for j, as GET /api/v1/jobs/{id} answers (caller deletes),
 * NULL on ENOMEM. */
cJSON *srv_job_json(const db_job *j);

/* A submit's Idempotency-Key header (docs/API-EXTENSIONS.md): present or
 * not, and when present the key and the SHA-256 of the request's body. */
typedef struct srv_idem {
    bool present;
    char key[SRV_IDEM_KEY_MAX + 1];
    char hash[65];
    db_idem db; /* points into key and hash */
} srv_idem;

/* Reads r's Idempotency-Key into *out; false after answering 400 for a bad
 * key. */
bool srv_idem_read(srv_req *r, srv_idem *out);

/* Answers 422 idempotency_mismatch: key was used for another request. */
void srv_idem_mismatch(srv_req *r, const srv_idem *idem, const char *what);

void srv_jobs_create(srv_req *r);  /* POST /api/v1/jobs */
void srv_jobs_list(srv_req *r);    /* GET /api/v1/jobs */
void srv_jobs_get(srv_req *r);     /* GET /api/v1/jobs/{id} */
void srv_jobs_cancel(srv_req *r);  /* POST /api/v1/jobs/{id}/cancel */
void srv_jobs_kernels(srv_req *r); /* GET /api/v1/jobs/{id}/kernels */

#endif
