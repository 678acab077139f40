/* fb_engines: the engines compiled into this binary (fb_engine_list.c) and
 * the lookups over them: an engine by name, a workload in its catalog, and
 * the machine's roofline from whichever engine measures it. */
#ifndef FB_ENGINES_H
#define FB_ENGINES_H

#include "fb_engine.h"

/* The engines compiled into this binary; NULL-terminated. */
extern const fb_engine *const fb_engines[];

/* Finds an engine by name, or NULL. */
const fb_engine *fb_engine_find(const char *name);

/* Finds a workload info in an engine's catalog for device, or NULL. */
const fb_workload_info *fb_engine_workload(const fb_engine *e, const char *device,
                                           const char *workload);

/* The limits of device (fb_engine.roofline_measure of the first engine that
 * measures it) into *gbps, *gflops.  FB_EUNSUPPORTED when none does. */
FB_MUSTCHECK fb_code fb_roofline_measure(const char *device, int threads, double *gbps,
                                         double *gflops, fb_err *err);

/* The first engine that reads uploaded models (fb_engine.inspect_model), or
 * NULL. */
const fb_engine *fb_model_reader(void);

/* Tells every engine the limits of device (fb_engine.roofline_use). */
void fb_roofline_use(const char *device, double gbps, double gflops);

#endif
