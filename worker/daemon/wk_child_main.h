/* wk_child_main: what a job's child process runs, from fork to _exit. */
#ifndef WK_CHILD_MAIN_H
#define WK_CHILD_MAIN_H

#include <sys/types.h>

#include "wk_opts.h"

/* Runs spec_json and _exits: 0 after writing the final JSON to result_fd, 3 when
 * it could not be written, 4 when the parent was already gone.  Never returns. */
__attribute__((noreturn)) void wk_child_main(const wk_config *cfg, const char *spec_json,
                                             pid_t parent, int progress_fd, int result_fd);

#endif
