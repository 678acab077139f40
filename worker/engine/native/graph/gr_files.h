/* gr_files: the files a job may name (params.weights, params.input).
 *
 * A job spec is outside input: it must never name a file on the worker's host.
 * It names a file *inside* the weights folder instead: a relative name of
 * letters, digits, '.', '_', '-' and '/', no component starting with '.', opened
 * component by component under the folder with O_NOFOLLOW (no symbolic link is
 * followed, so nothing outside can be reached), O_NONBLOCK (a FIFO cannot hold
 * the job), and accepted only as a regular file.  Every refusal gives the same
 * message, so the errors tell nothing about the host's tree.
 *
 * The weights folder: $FUSIONBENCH_WEIGHTS_DIR, else <data folder>/weights
 * ($FB_DATA_DIR/weights, the shipped data/ of the build by default). */
#ifndef GR_FILES_H
#define GR_FILES_H

#include "fb_err.h"
#include "fb_spec.h"

#define GR_FILES_NAME_MAX FB_FILE_NAME_MAX /* the form: fb_spec_check_file_name */

/* The weights folder in use (never NULL). */
const char *gr_files_dir(void);

/* Opens name (relative, see above) under the weights folder for reading:
 * FB_OK with *fd (the caller closes it), or FB_EINVAL on field. */
FB_MUSTCHECK fb_code gr_files_open(const char *name, const char *field, int *fd, fb_err *err);

#endif
