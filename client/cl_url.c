#include "cl_url.h"

#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

fb_code cl_url_normalize(const char *in, char *out, size_t cap, fb_err *err)
{
    const char *host;
    size_t len = strlen(in);

    if (strncmp(in, "http://", 7) == 0)
        host = in + 7;
    else if (strncmp(in, "https://", 8) == 0)
        host = in + 8;
    else
        return fb_err_set(err, FB_EINVAL, "url", "'%s' is not an http:// or https:// URL", in);
    if (*host == '\0' || *host == '/' || strpbrk(in, " \t\r\n?#"))
        return fb_err_set(err, FB_EINVAL, "url", "'%s' is not a server URL", in);
    while (len > 0 && in[len - 1] == '/')
        len--;
    if (len >= cap)
        return fb_err_set(err, FB_ETOOBIG, "url", "the URL is too long");
    memcpy(out, in, len);
    out[len] = '\0';
    return FB_OK;
}

static void put(cl_url *u, const char *s)
{
    size_t n = strlen(s);

    if (u->overflow || u->len + n >= sizeof u->s) {
        u->overflow = true;
        return;
    }
    memcpy(u->s + u->len, s, n + 1);
    u->len += n;
}

/* curl_easy_escape takes a NULL handle since curl 7.82. */
static void put_escaped(cl_url *u, const char *s)
{
    char *e = curl_easy_escape(NULL, s, 0);

    if (!e) {
        u->overflow = true;
        return;
    }
    put(u, e);
    curl_free(e);
}

void cl_url_init(cl_url *u, const char *base, const char *path)
{
    memset(u, 0, sizeof *u);
    put(u, base);
    put(u, path);
}

void cl_url_seg(cl_url *u, const char *seg)
{
    put(u, "/");
    put_escaped(u, seg);
}

void cl_url_query(cl_url *u, const char *key, const char *value)
{
    put(u, u->has_query ? "&" : "?");
    u->has_query = true;
    put_escaped(u, key);
    put(u, "=");
    put_escaped(u, value);
}

fb_code cl_url_done(const cl_url *u, fb_err *err)
{
    if (u->overflow)
        return fb_err_set(err, FB_ETOOBIG, "url", "the request URL is over %d bytes", CL_URL_MAX);
    return FB_OK;
}
