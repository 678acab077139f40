/* libFuzzer target for the server's request parsing (server/srv_parse.c):
 * route patterns against arbitrary paths, ids, integers, labels, Content-Type
 * values, static file paths and worker actions.  Besides crashes it checks invariants: captures
 * stay inside the path, an accepted static path has no "." segment start, an
 * accepted id prints back to the same digits.  X-Forwarded-For and Forwarded
 * (server/srv_client.c): the client read behind a trusted proxy is always an
 * address's numeric text that fits, and nothing from an untrusted peer counts. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_client.h"
#include "srv_parse.h"
#include "srv_token.h"

static const char *const patterns[] = {
    "/",
    "/api/v1/jobs",
    "/api/v1/jobs/{id}",
    "/api/v1/jobs/{id}/cancel",
    "/api/v1/jobs/{id}/kernels",
    "/static/{*}",
    "/api/v1/workers/{*}",
    "/{a}/{b}",
};

static void check_client(const char *s)
{
    static srv_proxies p;
    static int ready;
    char out[SRV_CLIENT_MAX], back[SRV_CLIENT_MAX];
    fb_err err;

    if (!ready) {
        if (srv_proxies_parse("127.0.0.0/8,10.0.0.0/8,fd00::/8", &p, &err) != FB_OK)
            abort();
        ready = 1;
    }
    srv_client_of(&p, "127.0.0.3", s, NULL, out, sizeof out);
    srv_client_of(&p, "127.0.0.3", NULL, s, back, sizeof back);
    if (strlen(out) >= SRV_CLIENT_MAX || strlen(back) >= SRV_CLIENT_MAX)
        abort();
    if (strcmp(out, "127.0.0.3") != 0 && !srv_proxies_match(&p, out) && strchr(out, ' '))
        abort(); /* a client read from a header is an address's text, no spaces */
    srv_client_of(&p, "192.0.2.1", s, s, out, sizeof out);
    if (strcmp(out, "192.0.2.1") != 0)
        abort();                          /* an untrusted peer's headers are never believed */
    (void)srv_proxies_parse(s, &p, &err); /* parsing an operator's list: no crash */
    if (srv_proxies_parse("127.0.0.0/8,10.0.0.0/8,fd00::/8", &p, &err) != FB_OK)
        abort();
}

static void check_paths(const char *s)
{
    size_t len = strlen(s);
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        srv_caps c;
        if (!srv_path_match(patterns[i], s, &c))
            continue;
        if (c.n < 0 || c.n > SRV_MAX_CAPS)
            abort();
        for (int k = 0; k < c.n; k++)
            if (c.cap[k].len == 0 || c.cap[k].off + c.cap[k].len > len)
                abort();
    }
}

static void check_id(const char *s)
{
    int64_t id;
    char back[32];
    size_t len = strlen(s);

    if (!srv_parse_id(s, len, &id))
        return;
    snprintf(back, sizeof back, "%" PRId64, id);
    /* Leading zeros are the only accepted difference. */
    size_t skip = 0;
    while (skip + 1 < len && s[skip] == '0')
        skip++;
    if (id <= 0 || strcmp(back, s + skip) != 0)
        abort();
}

/* An accepted worker id is printable ASCII with no space; the action has no '/'. */
static void check_worker_action(const char *s)
{
    char id[32], act[8];

    if (!srv_parse_worker_action(s, id, sizeof id, act, sizeof act))
        return;
    if (!id[0] || !act[0] || strchr(act, '/') || strlen(id) >= sizeof id)
        abort();
    for (const char *p = id; *p; p++)
        if (*p < 0x21 || *p > 0x7e)
            abort();
}

/* A token found in a header lies inside it; a parsed one has the key id of
 * the shape the database's CHECK takes. */
static void check_token(const char *s)
{
    char key[SRV_TOKEN_KEYID_LEN + 1];
    size_t len = 0;
    const char *t = srv_token_from_header(s, &len);

    if (t && (t < s || t + len > s + strlen(s) || len == 0))
        abort();
    if (srv_token_parse(s, strlen(s), key) && strlen(key) != SRV_TOKEN_KEYID_LEN)
        abort();
}

static void check_static(const char *s)
{
    if (!srv_static_path_ok(s))
        return;
    if (s[0] == '/' || s[0] == '.' || strstr(s, "/.") || strstr(s, "//") ||
        strlen(s) > SRV_STATIC_MAX)
        abort();
    (void)srv_content_type_for(s);
}

/* An accepted time is 10..35 bytes; its UTC form is accepted too, ends in Z
 * (a date stays a date) and reads back as itself. */
static void check_time(const char *s)
{
    char utc[SRV_TIME_MAX], again[SRV_TIME_MAX];
    if (!srv_parse_rfc3339(s, utc, sizeof utc))
        return;
    size_t n = strlen(utc);
    if (strlen(s) < 10 || strlen(s) > 35 || !srv_parse_rfc3339(s, NULL, 0) ||
        !srv_parse_rfc3339(utc, again, sizeof again) || strcmp(utc, again) != 0 ||
        (n != 10 && utc[n - 1] != 'Z'))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    char key[16], val[16];
    long v;

    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    check_paths(s);
    check_id(s);
    check_static(s);
    check_worker_action(s);
    if (srv_parse_int_range(s, 1, 200, &v) && (v < 1 || v > 200))
        abort();
    if (srv_parse_label(s, 127, key, sizeof key, val, sizeof val) && (!key[0] || !val[0]))
        abort();
    (void)srv_content_type_is_json(s);
    check_time(s);
    if (srv_host_allowed(s, "localhost,127.0.0.1,::1") && strlen(s) > 300)
        abort();
    if (srv_parse_idem_key(s)) /* accepted: 1..255 visible ASCII, nothing else */
        for (size_t i = 0; s[i]; i++)
            if (i >= SRV_IDEM_KEY_MAX || (unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
                abort();
    check_token(s);
    check_client(s);
    (void)srv_state_valid(s);
    free(s);
    return 0;
}
