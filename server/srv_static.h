/* srv_static: the dashboard's files from the web directory (GET / and
 * GET /static/...), only safe relative paths, known content types. */
#ifndef SRV_STATIC_H
#define SRV_STATIC_H

#include "srv_req.h"

void srv_static_index(srv_req *r); /* GET / → index.html */
void srv_static_file(srv_req *r);  /* GET /static/{*} */
/* GET /api/v1/openapi.json: the API as OpenAPI 3.1 (web/openapi.json, kept
 * equal to the route table by unit.test_openapi). */
void srv_static_openapi(srv_req *r);

#endif
