/* fb_err: the project's one error type.
 *
 * Every fallible function returns an fb_code (0 = FB_OK) and, where the caller
 * passes one, fills an fb_err with a message and, for validation errors, the JSON
 * path of the field at fault.  Library statuses (libpq, cudaError_t, cuBLAS, CUPTI)
 * are converted into fb_code in exactly one place each, inside the module that
 * talks to that library. */
#ifndef FB_ERR_H
#define FB_ERR_H

#include <stdarg.h>
#include <stddef.h>

#define FB_MUSTCHECK    __attribute__((warn_unused_result))
#define FB_PRINTF(a, b) __attribute__((format(printf, a, b)))

typedef enum fb_code {
    FB_OK = 0,
    FB_EINVAL,       /* bad argument or input: a field is missing, mistyped, out of range */
    FB_EJSON,        /* text is not JSON */
    FB_ENOTFOUND,    /* no such row / object */
    FB_ECONFLICT,    /* state does not allow the operation (cancel a finished job) */
    FB_ESTALE,       /* fenced write lost: the job's attempt or state moved on */
    FB_ENOMEM,       /* allocation failed */
    FB_ETOOBIG,      /* over a hard limit */
    FB_EDB,          /* database error */
    FB_EUNAVAIL,     /* database (or another dependency) unreachable */
    FB_EIO,          /* file or process I/O */
    FB_EUNSUPPORTED, /* workload, device, dtype or variant not offered */
    FB_ETIMEOUT,     /* deadline passed */
    FB_EDEVICE,      /* device (CUDA) error */
    FB_EOOM,         /* device out of memory */
    FB_EINTERNAL,    /* a bug: an invariant did not hold */
    FB_EFORBIDDEN,   /* the signed-in user's role or ownership does not allow it */
} fb_code;

#define FB_ERR_MSG_MAX   512
#define FB_ERR_FIELD_MAX 128

typedef struct fb_err {
    fb_code code;
    char msg[FB_ERR_MSG_MAX];
    char field[FB_ERR_FIELD_MAX]; /* JSON path of the bad field ("variants[1]"), or "" */
} fb_err;

/* Sets *err (when err is not NULL) and returns code, so callers write
 *   return fb_err_set(err, FB_EINVAL, "batch_size", "must be >= 1, got %d", n);
 * field may be NULL. */
fb_code fb_err_set(fb_err *err, fb_code code, const char *field, const char *fmt, ...)
    FB_PRINTF(4, 5);
fb_code fb_err_vset(fb_err *err, fb_code code, const char *field, const char *fmt, va_list ap)
    FB_PRINTF(4, 0);

/* Clears an error to FB_OK with empty message and field. */
void fb_err_clear(fb_err *err);

/* A stable lower-case name for a code ("invalid_argument"), never NULL. */
const char *fb_code_name(fb_code code);

#endif
