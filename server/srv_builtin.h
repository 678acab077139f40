/* srv_builtin: the workload catalog built into this server (the native
 * engine's, on every device the build has), stored in the database at start
 * so that jobs for a device no live worker serves yet are queued, not refused
 * (docs/DEPLOY.md, "Scale from zero"). */
#ifndef SRV_BUILTIN_H
#define SRV_BUILTIN_H

#include "db.h"

/* A JSON array of workload infos, generated at build time. */
extern const char srv_builtin_catalog_json[];

/* Stores the built-in catalog in the database (db_catalog_builtin_put). */
FB_MUSTCHECK fb_code srv_builtin_store(db_conn *c, fb_err *err);

#endif
