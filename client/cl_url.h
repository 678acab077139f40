/* cl_url: the server's base URL, normalized, and request URLs built on it
 * with every path segment and query value escaped (curl_easy_escape), in a
 * fixed buffer: a URL that would not fit is an error, never a cut one. */
#ifndef CL_URL_H
#define CL_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "fb_err.h"

#define CL_URL_MAX 4096

typedef struct cl_url {
    char s[CL_URL_MAX];
    size_t len;
    bool has_query;
    bool overflow; /* something did not fit (or could not be escaped) */
} cl_url;

/* Checks that in is an http:// or https:// URL with a host and copies it to
 * out without trailing slashes.  FB_EINVAL (field "url") otherwise. */
FB_MUSTCHECK fb_code cl_url_normalize(const char *in, char *out, size_t cap, fb_err *err);

/* Starts base + path (path is taken as is: a constant such as "/api/v1/jobs"). */
void cl_url_init(cl_url *u, const char *base, const char *path);

/* Appends "/" and the escaped segment. */
void cl_url_seg(cl_url *u, const char *seg);

/* Appends "?key=value" or "&key=value", the value escaped. */
void cl_url_query(cl_url *u, const char *key, const char *value);

/* FB_ETOOBIG when anything did not fit. */
FB_MUSTCHECK fb_code cl_url_done(const cl_url *u, fb_err *err);

#endif
