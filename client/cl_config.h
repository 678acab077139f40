/* cl_config: the saved login, $XDG_CONFIG_HOME/fusionbench/config.json
 * (~/.config when XDG_CONFIG_HOME is unset or not absolute): {"url", "token"}.
 * The folder is made 0700 and the file 0600, written to a temporary file in
 * the same folder and renamed over the old one, so a reader sees the old file
 * or the new one, never half of one, and the token is never readable by others. */
#ifndef CL_CONFIG_H
#define CL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "fb_err.h"

#define CL_CONFIG_PATH_MAX  1024
#define CL_CONFIG_URL_MAX   2048
#define CL_CONFIG_TOKEN_MAX 512
#define CL_CONFIG_FILE_MAX  (64 * 1024)

typedef struct cl_config {
    char url[CL_CONFIG_URL_MAX];
    char token[CL_CONFIG_TOKEN_MAX];
} cl_config;

/* The folder from the environment values given (either may be NULL).
 * FB_EINVAL when neither gives an absolute path. */
FB_MUSTCHECK fb_code cl_config_dir(const char *xdg_config_home, const char *home, char *out,
                                   size_t cap, fb_err *err);

/* Reads dir/config.json.  FB_ENOTFOUND when there is none; FB_EINVAL when it
 * is not what save writes; FB_ETOOBIG over CL_CONFIG_FILE_MAX. */
FB_MUSTCHECK fb_code cl_config_load(const char *dir, cl_config *c, fb_err *err);

/* Writes dir/config.json atomically (dir and its parent made when missing). */
FB_MUSTCHECK fb_code cl_config_save(const char *dir, const cl_config *c, fb_err *err);

/* Removes dir/config.json; FB_ENOTFOUND when there was none. */
FB_MUSTCHECK fb_code cl_config_remove(const char *dir, fb_err *err);

/* A token as typed or piped: trailing CR/LF/blanks stripped in place.  False
 * when it is empty or has a character outside printable ASCII (a space or a
 * control character would break, or inject into, the Authorization header). */
bool cl_token_clean(char *token);

#endif
