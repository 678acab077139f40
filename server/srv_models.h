/* srv_models: the models people bring themselves (docs/API-EXTENSIONS.md,
 * "Your own models"): POST /api/v1/models streams an archive into the
 * database (db_models.h) as it arrives, never holding it whole; GET lists and
 * shows them, DELETE removes one, GET .../archive streams the bytes back. */
#ifndef SRV_MODELS_H
#define SRV_MODELS_H

#include <stdbool.h>

#include "fb_spec.h"
#include "srv_req.h"

/* POST /api/v1/models?name=NAME[&visibility=private|lab], the archive as the body. */
extern const srv_stream srv_models_upload;

void srv_models_list(srv_req *r);
void srv_models_get(srv_req *r);
void srv_models_delete(srv_req *r);
void srv_models_archive(srv_req *r);

/* True when a job's workload names an uploaded model: model:NAME,
 * model:OWNER/NAME, or model.<id>. */
bool srv_models_is_job(const char *workload);

/* Why a job of an uploaded model was refused: the HTTP status and error code
 * (with the fb_err's field and message). */
typedef struct srv_model_refusal {
    int status;
    const char *code;
} srv_model_refusal;

/* POST /api/v1/jobs (and a suite's jobs) of an uploaded model: the model the
 * submitter may see, ready, run by the inductor engine; spec's workload
 * becomes model.<id>, params.model names it (id, name, owner, sha256: set
 * here, whatever was sent), its defaults come from an inductor entry of the
 * live catalog with the export's batch.  On an error, why: 422
 * unknown_workload or invalid_model, 409 model_not_ready, 422 unsupported
 * (another engine, a batch a fixed export cannot take, no inductor worker). */
FB_MUSTCHECK fb_code srv_models_job(srv_req *r, fb_spec *spec, srv_model_refusal *why, fb_err *err);

#endif
