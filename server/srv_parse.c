#include "srv_parse.h"

#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Length of the segment at s (up to '/' or end). */
static size_t seg_len(const char *s)
{
    size_t n = 0;
    while (s[n] && s[n] != '/')
        n++;
    return n;
}

static bool add_cap(srv_caps *caps, size_t off, size_t len)
{
    if (!caps)
        return true;
    if (caps->n >= SRV_MAX_CAPS)
        return false;
    caps->cap[caps->n].off = off;
    caps->cap[caps->n].len = len;
    caps->n++;
    return true;
}

bool srv_path_match(const char *pattern, const char *path, srv_caps *caps)
{
    size_t pi = 0, si = 0;

    assert(pattern && path);
    if (caps)
        caps->n = 0;
    if (pattern[0] != '/' || path[0] != '/' || strnlen(path, SRV_PATH_MAX + 1) > SRV_PATH_MAX)
        return false;
    while (pattern[pi] && path[si]) {
        if (pattern[pi] == '/' || path[si] == '/') {
            if (pattern[pi] != path[si])
                return false;
            pi++, si++;
            continue;
        }
        size_t plen = seg_len(pattern + pi), slen = seg_len(path + si);
        if (plen == 3 && memcmp(pattern + pi, "{*}", 3) == 0 && pattern[pi + 3] == '\0')
            return add_cap(caps, si, strlen(path + si));
        if (plen >= 2 && pattern[pi] == '{' && pattern[pi + plen - 1] == '}') {
            if (!add_cap(caps, si, slen))
                return false;
        } else if (plen != slen || memcmp(pattern + pi, path + si, plen) != 0) {
            return false;
        }
        pi += plen, si += slen;
    }
    /* Both must end together; an empty capture ("/jobs/" vs "/jobs/{id}") fails. */
    return pattern[pi] == '\0' && path[si] == '\0';
}

bool srv_parse_id(const char *s, size_t len, int64_t *out)
{
    int64_t v = 0;

    if (!s || len == 0 || len > 19)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        int d = s[i] - '0';
        if (v > (INT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (v <= 0)
        return false;
    *out = v;
    return true;
}

bool srv_parse_int_range(const char *s, long lo, long hi, long *out)
{
    int64_t v;
    size_t len;

    if (!s)
        return false;
    len = strnlen(s, 20);
    if (len == 0 || len > 18)
        return false;
    if (strcmp(s, "0") == 0) {
        v = 0;
    } else if (!srv_parse_id(s, len, &v)) {
        return false;
    }
    if (v < lo || v > hi)
        return false;
    *out = (long)v;
    return true;
}

size_t srv_utf8_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

bool srv_parse_label(const char *s, size_t maxchars, char *key, size_t keysz, char *val,
                     size_t valsz)
{
    const char *colon;
    size_t klen, vlen;

    if (!s)
        return false;
    colon = strchr(s, ':');
    if (!colon)
        return false;
    klen = (size_t)(colon - s);
    vlen = strlen(colon + 1);
    if (klen == 0 || vlen == 0 || klen >= keysz || vlen >= valsz ||
        srv_utf8_chars(s, klen) > maxchars || srv_utf8_chars(colon + 1, vlen) > maxchars)
        return false;
    memcpy(key, s, klen);
    key[klen] = '\0';
    memcpy(val, colon + 1, vlen + 1);
    return true;
}

bool srv_state_valid(const char *s)
{
    static const char *const states[] = {"queued", "running", "succeeded", "failed", "canceled"};
    if (!s)
        return false;
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++)
        if (strcmp(s, states[i]) == 0)
            return true;
    return false;
}

static const char *skip_ows(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Checks one parameter of n bytes at p ("name=value", spaces around allowed; an
 * empty one from a trailing ';' is tolerated).  Only a charset other than utf-8
 * is refused: the body is always decoded as UTF-8. */
static bool param_ok(const char *p, size_t n)
{
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n == 0)
        return true;
    if (!memchr(p, '=', n))
        return false;
    if (n >= 8 && strncasecmp(p, "charset=", 8) == 0) {
        const char *v = p + 8;
        size_t vl = n - 8;
        if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"')
            v++, vl -= 2;
        return (vl == 5 && strncasecmp(v, "utf-8", 5) == 0) ||
               (vl == 4 && strncasecmp(v, "utf8", 4) == 0);
    }
    return true;
}

bool srv_content_type_is_json(const char *ct)
{
    static const char mt[] = "application/json";
    const char *p;

    if (!ct)
        return false;
    p = skip_ows(ct);
    if (strncasecmp(p, mt, sizeof mt - 1) != 0)
        return false;
    p = skip_ows(p + sizeof mt - 1);
    while (*p == ';') {
        const char *end;
        size_t n;
        p = skip_ows(p + 1);
        end = strchr(p, ';');
        n = end ? (size_t)(end - p) : strlen(p);
        if (!param_ok(p, n))
            return false;
        p += n;
    }
    return *p == '\0';
}

static bool static_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-' || c == '/';
}

bool srv_static_path_ok(const char *rel)
{
    size_t len;

    if (!rel)
        return false;
    len = strnlen(rel, SRV_STATIC_MAX + 1);
    if (len == 0 || len > SRV_STATIC_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        bool seg_start = i == 0 || rel[i - 1] == '/';
        if (!static_char_ok(rel[i]))
            return false;
        if (seg_start && (rel[i] == '.' || rel[i] == '/'))
            return false;
    }
    return rel[len - 1] != '/';
}

const char *srv_content_type_for(const char *name)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".json", "application/json"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".txt", "text/plain; charset=utf-8"},
        {".woff2", "font/woff2"},
    };
    const char *dot = name ? strrchr(name, '.') : NULL;

    if (!dot || strchr(dot, '/'))
        return NULL;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].type;
    return NULL;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes src[0..len) into dst (size dstsz); printable ASCII only. */
static bool decode_printable(const char *src, size_t len, char *dst, size_t dstsz)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)src[i];
        if (c == '%') {
            int hi = i + 2 < len ? hex_value(src[i + 1]) : -1;
            int lo = hi >= 0 ? hex_value(src[i + 2]) : -1;
            if (lo < 0)
                return false;
            c = hi * 16 + lo;
            i += 2;
        }
        if (c < 0x21 || c > 0x7e || n + 1 >= dstsz)
            return false;
        dst[n++] = (char)c;
    }
    if (n == 0)
        return false;
    dst[n] = '\0';
    return true;
}

bool srv_parse_worker_action(const char *s, char *id, size_t idsz, char *action, size_t actsz)
{
    const char *slash = s ? strrchr(s, '/') : NULL;
    size_t alen;

    if (!slash || slash == s)
        return false;
    alen = strlen(slash + 1);
    if (alen == 0 || alen >= actsz)
        return false;
    if (!decode_printable(s, (size_t)(slash - s), id, idsz))
        return false;
    memcpy(action, slash + 1, alen + 1);
    return true;
}

/* n digits at s as a number in lo..hi, else -1. */
static int digits(const char *s, int n, int lo, int hi)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v >= lo && v <= hi ? v : -1;
}

static int days_in_month(int y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

/* "Z", or "+HH:MM" / "-HH:MM": the rest of the string; *minutes is the
 * offset east of UTC. */
static bool zone_ok(const char *s, int *minutes)
{
    *minutes = 0;
    if ((s[0] == 'Z' || s[0] == 'z') && s[1] == '\0')
        return true;
    if (s[0] != '+' && s[0] != '-')
        return false;
    int h = digits(s + 1, 2, 0, 23), m = h >= 0 && s[3] == ':' ? digits(s + 4, 2, 0, 59) : -1;
    if (m < 0 || s[6] != '\0')
        return false;
    *minutes = (s[0] == '-' ? -1 : 1) * (h * 60 + m);
    return true;
}

bool srv_parse_rfc3339(const char *s, char *utc, size_t n)
{
    int y, m, d, hh, mi, off;
    const char *sec, *end;

    if (!s || strnlen(s, 11) < 10)
        return false;
    y = digits(s, 4, 1, 9999);
    m = s[4] == '-' ? digits(s + 5, 2, 1, 12) : -1;
    d = m > 0 && s[7] == '-' ? digits(s + 8, 2, 1, 31) : -1;
    if (y < 0 || m < 0 || d < 0 || d > days_in_month(y, m))
        return false;
    if (s[10] == '\0') {
        if (utc)
            snprintf(utc, n, "%.10s", s);
        return true;
    }
    const char *t = s + 10;
    if (!(t[0] == 'T' || t[0] == 't' || t[0] == ' ') || (hh = digits(t + 1, 2, 0, 23)) < 0 ||
        t[3] != ':' || (mi = digits(t + 4, 2, 0, 59)) < 0 || t[6] != ':' ||
        digits(t + 7, 2, 0, 60) < 0)
        return false;
    sec = t + 7;
    end = t + 9;
    if (end[0] == '.') {
        size_t frac = strspn(end + 1, "0123456789");
        if (frac == 0 || frac > 9)
            return false;
        end += 1 + frac;
    }
    if (!zone_ok(end, &off))
        return false;
    if (!utc)
        return true;
    /* The same instant in UTC: PostgreSQL refuses offsets past 15:59, RFC 3339
     * allows 23:59.  Seconds (60 included) are kept as written; an instant
     * shifted out of years 1..9999 is clamped to the range's end, which
     * filters the same rows. */
    struct tm tm = {
        .tm_year = y - 1900, .tm_mon = m - 1, .tm_mday = d, .tm_hour = hh, .tm_min = mi};
    time_t at = timegm(&tm) - (time_t)off * 60;
    if (!gmtime_r(&at, &tm) || tm.tm_year + 1900 < 1)
        snprintf(utc, n, "0001-01-01T00:00:00Z");
    else if (tm.tm_year + 1900 > 9999)
        snprintf(utc, n, "9999-12-31T23:59:59.999999Z");
    else
        snprintf(utc, n, "%04d-%02d-%02dT%02d:%02d:%.*sZ", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, (int)(end - sec), sec);
    return true;
}

/* The name part of a Host header value: "[::1]:80" -> "::1", "a:80" -> "a". */
/* Whether p is "" or ":" and a port of 1 to 5 digits, nothing after. */
static bool port_ok(const char *p)
{
    if (*p == '\0')
        return true;
    size_t d = p[0] == ':' ? strspn(p + 1, "0123456789") : 0;
    return d >= 1 && d <= 5 && p[1 + d] == '\0';
}

static bool host_name(const char *host, char *out, size_t size)
{
    const char *end;
    size_t n;

    if (host[0] == '[') {
        end = strchr(host, ']');
        if (!end || !port_ok(end + 1))
            return false;
        host++;
    } else {
        end = strchr(host, ':');
        if (!end)
            end = host + strlen(host);
        if (!port_ok(end))
            return false;
    }
    n = (size_t)(end - host);
    if (n == 0 || n >= size)
        return false;
    memcpy(out, host, n);
    out[n] = '\0';
    return true;
}

bool srv_host_allowed(const char *host, const char *allowed)
{
    char name[256];
    const char *p = allowed;

    if (!allowed || !allowed[0])
        return true;
    if (!host || !host_name(host, name, sizeof name))
        return false;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == strlen(name) && strncasecmp(p, name, n) == 0)
            return true;
        p += n;
        if (*p == ',')
            p++;
    }
    return false;
}

bool srv_parse_idem_key(const char *s)
{
    size_t n = 0;
    if (!s)
        return false;
    for (; s[n]; n++)
        if ((unsigned char)s[n] < 0x21 || (unsigned char)s[n] > 0x7e || n >= SRV_IDEM_KEY_MAX)
            return false;
    return n > 0;
}
