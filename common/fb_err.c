#include "fb_err.h"

#include <stdio.h>
#include <string.h>

fb_code fb_err_vset(fb_err *err, fb_code code, const char *field, const char *fmt, va_list ap)
{
    if (!err)
        return code;
    err->code = code;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    return code;
}

fb_code fb_err_set(fb_err *err, fb_code code, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fb_err_vset(err, code, field, fmt, ap);
    va_end(ap);
    return code;
}

void fb_err_clear(fb_err *err)
{
    if (!err)
        return;
    err->code = FB_OK;
    err->msg[0] = '\0';
    err->field[0] = '\0';
}

const char *fb_code_name(fb_code code)
{
    switch (code) {
    case FB_OK:
        return "ok";
    case FB_EINVAL:
        return "invalid_argument";
    case FB_EJSON:
        return "invalid_json";
    case FB_ENOTFOUND:
        return "not_found";
    case FB_ECONFLICT:
        return "conflict";
    case FB_ESTALE:
        return "stale";
    case FB_ENOMEM:
        return "out_of_memory";
    case FB_ETOOBIG:
        return "too_big";
    case FB_EDB:
        return "database_error";
    case FB_EUNAVAIL:
        return "unavailable";
    case FB_EIO:
        return "io_error";
    case FB_EUNSUPPORTED:
        return "unsupported";
    case FB_ETIMEOUT:
        return "timeout";
    case FB_EDEVICE:
        return "device_error";
    case FB_EOOM:
        return "oom";
    case FB_EINTERNAL:
        return "internal";
    case FB_EFORBIDDEN:
        return "forbidden";
    }
    return "unknown";
}
