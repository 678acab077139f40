/* cl_http: one HTTP request to the server with libcurl, bounded: 10 s to
 * connect, 60 s per request, a response body of at most CL_HTTP_BODY_MAX. */
#ifndef CL_HTTP_H
#define CL_HTTP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "fb_err.h"

#define CL_HTTP_BODY_MAX    (64L * 1024 * 1024)
#define CL_HTTP_CONNECT_S   10L
#define CL_HTTP_TIMEOUT_S   60L
#define CL_HTTP_RETRY_AFTER 64

typedef struct cl_http_resp {
    long status;
    char *body; /* owned, NUL-terminated (may hold "" ) */
    size_t len;
    char retry_after[CL_HTTP_RETRY_AFTER]; /* the Retry-After header, or "" */
} cl_http_resp;

/* Once per process, before any thread (curl_global_init). */
FB_MUSTCHECK fb_code cl_http_global_init(fb_err *err);
void cl_http_global_cleanup(void);

/* When *interrupt becomes nonzero a transfer in flight stops (FB_ETIMEOUT with
 * "interrupted").  NULL: none. */
void cl_http_set_interrupt(volatile sig_atomic_t *interrupt);

/* Sends method to url with an optional bearer token (NULL or "" for none) and
 * an optional JSON body.  Every POST carries Content-Type: application/json,
 * with a body or without.  FB_OK whatever the HTTP status (resp->status says);
 * FB_EUNAVAIL when the server cannot be reached, FB_ETOOBIG past the body cap,
 * FB_ETIMEOUT on the time limits.  resp is the caller's to free with
 * cl_http_resp_free in every case. */
FB_MUSTCHECK fb_code cl_http_request(const char *method, const char *url, const char *token,
                                     const char *body, cl_http_resp *resp, fb_err *err);

/* cl_http_request with an Idempotency-Key header (NULL: none). */
FB_MUSTCHECK fb_code cl_http_request_key(const char *method, const char *url, const char *token,
                                         const char *body, const char *idem_key, cl_http_resp *resp,
                                         fb_err *err);

/* A fresh Idempotency-Key: 32 hex digits from the kernel's random source
 * (key has room for 33 bytes).  FB_EIO when it fails. */
FB_MUSTCHECK fb_code cl_http_new_key(char key[33], fb_err *err);

/* A file sent or received whole, streamed (a model's archive): in is sent as
 * the body of a POST (application/octet-stream, in_size bytes), or, with
 * in NULL, a GET whose body goes to out when the answer is 200 (any other
 * answer's body lands in resp as usual).  No total time limit: a transfer that
 * moves less than 1 KiB/s for 60 s ends FB_ETIMEOUT.  progress: a bar on
 * stderr, redrawn (label names it).  sha256_hex: when not NULL, the SHA-256
 * of what was sent or written (65 bytes). */
typedef struct cl_http_transfer {
    FILE *in;
    long long in_size;
    FILE *out;
    bool progress;
    const char *label;
    char *sha256_hex;
} cl_http_transfer;

FB_MUSTCHECK fb_code cl_http_transfer_file(const char *url, const char *token, cl_http_transfer *t,
                                           cl_http_resp *resp, fb_err *err);

void cl_http_resp_free(cl_http_resp *resp);

#endif
