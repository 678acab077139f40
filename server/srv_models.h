/* srv_models: the models people bring themselves (docs/API-EXTENSIONS.md,
 * "Your own models"): POST /api/v1/models streams an archive into the
 * database (db_models.h) as it arrives, never holding it whole; GET lists and
 * shows them, DELETE removes one, GET .../archive streams the bytes back. */
#ifndef SRV_MODELS_H
#define SRV_MODELS_H

#include "srv_req.h"

/* POST /api/v1/models?name=NAME[&visibility=private|lab], the archive as the body. */
extern const srv_stream srv_models_upload;

void srv_models_list(srv_req *r);
void srv_models_get(srv_req *r);
void srv_models_delete(srv_req *r);
void srv_models_archive(srv_req *r);

#endif
