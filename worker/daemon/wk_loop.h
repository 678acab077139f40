/* wk_loop: the worker's life: connect, migrate, register, then claim and run
 * jobs until told to stop (docs/DESIGN.md "Queue and reliability"). */
#ifndef WK_LOOP_H
#define WK_LOOP_H

#include "wk_opts.h"

/* Runs the worker; returns the process exit status (0 after a clean stop or
 * --max-jobs, 1 when the database setup failed for good). */
int wk_loop_run(const wk_config *cfg);

#endif
