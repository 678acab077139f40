/* srv_catalog: checks a job spec against the workload catalog (the union of what
 * live workers offer, db_workload_catalog) and fills the catalog's defaults.
 * Pure: no I/O, so POST /jobs's rules are unit tested without a database. */
#ifndef SRV_CATALOG_H
#define SRV_CATALOG_H

#include <cjson/cJSON.h>

#include "fb_err.h"
#include "fb_spec.h"

/* catalog is the JSON array of workload infos (docs/API.md GET /workloads items).
 * On success the spec has every default applied (fb_spec_apply_defaults):
 * engine "native" when offered else the first offering engine, device "cuda" when
 * offered else "cpu", dtype "float32" when offered, batch size and variants from
 * the entry.  Errors name the field:
 *   FB_ENOTFOUND    "workload": no live worker offers it (→ 422 unknown_workload)
 *   FB_EUNSUPPORTED "engine" / "device" / "dtype" / "variants[i]" (→ 422 unsupported)
 *   FB_EINVAL       "params.KEY": a key the entry's "params" does not declare
 *                   (fb_catalog_params_check; an entry without "params": any);
 *                   the catalog is not an array. */
FB_MUSTCHECK fb_code srv_catalog_resolve(const cJSON *catalog, fb_spec *spec, fb_err *err);

/* A suite's params are shared by its workloads: drops from spec->params the
 * keys its workload's entry (for spec->engine, or the default one) does not
 * declare, before srv_catalog_resolve.  No entry or no "params": nothing. */
void srv_catalog_keep_params(const cJSON *catalog, fb_spec *spec);

#endif
