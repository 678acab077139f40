/* srv_client: see srv_client.h. */
#include "srv_client.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define HOPS_MAX      64   /* hops of a header looked at, from the right */
#define COUNT_BUCKETS 1024 /* a power of two */

/* ---- addresses and ranges ---- */

/* addr as family and bytes; an IPv4-mapped IPv6 address as its IPv4. */
static bool addr_parse(const char *text, int *family, uint8_t out[16])
{
    struct in6_addr a6;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    memset(out, 0, 16);
    if (inet_pton(AF_INET, text, out) == 1) {
        *family = AF_INET;
        return true;
    }
    if (inet_pton(AF_INET6, text, &a6) != 1)
        return false;
    if (memcmp(a6.s6_addr, mapped, sizeof mapped) == 0) {
        *family = AF_INET;
        memcpy(out, a6.s6_addr + 12, 4);
    } else {
        *family = AF_INET6;
        memcpy(out, a6.s6_addr, 16);
    }
    return true;
}

static bool cidr_has(const srv_cidr *c, int family, const uint8_t a[16])
{
    int bits = c->bits, i = 0;

    if (c->family != family)
        return false;
    for (; bits >= 8; bits -= 8, i++)
        if (a[i] != c->addr[i])
            return false;
    return bits == 0 || ((a[i] ^ c->addr[i]) & (uint8_t)(0xff << (8 - bits))) == 0;
}

fb_code srv_proxies_parse(const char *list, srv_proxies *out, fb_err *err)
{
    const char *p = list;

    memset(out, 0, sizeof *out);
    while (p && *p) {
        size_t n = strcspn(p, ",");
        char item[64], *slash;
        srv_cidr *c = &out->cidr[out->n];
        long bits = -1;

        if (n == 0 || n >= sizeof item)
            return fb_err_set(err, FB_EINVAL, "trusted-proxies",
                              "an entry is empty or too long: %.40s", p);
        if (out->n == SRV_PROXIES_MAX)
            return fb_err_set(err, FB_EINVAL, "trusted-proxies", "more than %d ranges",
                              SRV_PROXIES_MAX);
        memcpy(item, p, n);
        item[n] = '\0';
        if ((slash = strchr(item, '/'))) {
            char *end;
            *slash = '\0';
            bits = strtol(slash + 1, &end, 10);
            if (end == slash + 1 || *end || bits < 0)
                bits = 999;
        }
        if (!addr_parse(item, &c->family, c->addr))
            return fb_err_set(err, FB_EINVAL, "trusted-proxies", "not an IPv4 or IPv6 address: %s",
                              item);
        if (bits < 0)
            bits = c->family == AF_INET ? 32 : 128;
        if (bits > (c->family == AF_INET ? 32 : 128))
            return fb_err_set(err, FB_EINVAL, "trusted-proxies", "not a prefix length for %s: %s",
                              item, slash + 1);
        c->bits = (int)bits;
        out->n++;
        p += n + (p[n] == ',');
    }
    return FB_OK;
}

bool srv_proxies_match(const srv_proxies *p, const char *addr)
{
    uint8_t a[16];
    int family;

    if (!p || p->n == 0 || !addr || !addr_parse(addr, &family, a))
        return false;
    for (int i = 0; i < p->n; i++)
        if (cidr_has(&p->cidr[i], family, a))
            return true;
    return false;
}

void srv_addr_text(const void *sockaddr, char *out, size_t n)
{
    const struct sockaddr *sa = sockaddr;
    uint8_t a[16];
    int family;

    snprintf(out, n, "?");
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sockaddr)->sin_addr, out, (socklen_t)n);
    else if (sa && sa->sa_family == AF_INET6 &&
             inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sockaddr)->sin6_addr, out,
                       (socklen_t)n) &&
             addr_parse(out, &family, a) && family == AF_INET)
        inet_ntop(AF_INET, a, out, (socklen_t)n); /* ::ffff:a.b.c.d as a.b.c.d */
}

/* ---- the client behind trusted proxies ---- */

/* One hop's text (spaces, quotes, "[v6]:port" and "v4:port" taken off) into
 * out as its numeric text; false when it is no address ("unknown", "_hidden"). */
static bool hop_addr(const char *s, size_t len, char *out, size_t n)
{
    char buf[64];
    uint8_t a[16];
    int family;

    while (len && isspace((unsigned char)*s))
        s++, len--;
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    if (len >= 2 && s[0] == '"' && s[len - 1] == '"')
        s++, len -= 2;
    if (len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *p = buf;
    if (*p == '[') { /* [v6] or [v6]:port */
        char *close = strchr(p, ']');
        if (!close)
            return false;
        *close = '\0';
        p++;
    } else if (strchr(p, ':') == strrchr(p, ':') && strchr(p, ':')) {
        *strchr(p, ':') = '\0'; /* v4:port */
    }
    if (!addr_parse(p, &family, a))
        return false;
    return inet_ntop(family, a, out, (socklen_t)n) != NULL;
}

/* The hops of a header: X-Forwarded-For's comma-separated values, or the
 * for= values of Forwarded's comma-separated elements; the rightmost
 * HOPS_MAX as (start, length) into h. */
static int hops_of(const char *h, bool forwarded, const char *start[], size_t len[])
{
    int n = 0;

    for (const char *p = h; p && *p;) {
        size_t el = strcspn(p, ",");
        const char *s = p;
        size_t l = el;
        if (forwarded) { /* for=...; within the element */
            s = NULL;
            for (const char *q = p; q < p + el;) {
                size_t pl = strcspn(q, ";");
                if (pl > (size_t)(p + el - q))
                    pl = (size_t)(p + el - q);
                const char *k = q;
                while (k < q + pl && isspace((unsigned char)*k))
                    k++;
                if (q + pl - k > 4 && strncasecmp(k, "for=", 4) == 0) {
                    s = k + 4;
                    l = (size_t)(q + pl - s);
                }
                q += pl + (q[pl] == ';');
            }
        }
        if (s) {
            if (n == HOPS_MAX) {
                memmove(start, start + 1, (HOPS_MAX - 1) * sizeof *start);
                memmove(len, len + 1, (HOPS_MAX - 1) * sizeof *len);
                n--;
            }
            start[n] = s;
            len[n++] = l;
        }
        p += el + (p[el] == ',');
    }
    return n;
}

void srv_client_of(const srv_proxies *p, const char *peer, const char *xff, const char *forwarded,
                   char *out, size_t n)
{
    const char *start[HOPS_MAX];
    size_t len[HOPS_MAX];
    char hop[SRV_CLIENT_MAX];
    int k;

    snprintf(out, n, "%s", peer ? peer : "?");
    if (!srv_proxies_match(p, peer))
        return; /* a direct client: whatever it says of others is ignored */
    if (xff && *xff)
        k = hops_of(xff, false, start, len);
    else if (forwarded && *forwarded)
        k = hops_of(forwarded, true, start, len);
    else
        return;
    while (k-- > 0) {
        if (!hop_addr(start[k], len[k], hop, sizeof hop))
            return; /* not an address: the last one read stands */
        snprintf(out, n, "%s", hop);
        if (!srv_proxies_match(p, hop))
            return;
    }
}

/* ---- counts per key ---- */

typedef struct count_node {
    struct count_node *next;
    int n;
    char key[SRV_CLIENT_MAX];
} count_node;

struct srv_counts {
    pthread_mutex_t mu;
    int keys;
    count_node *bucket[COUNT_BUCKETS];
};

srv_counts *srv_counts_new(void)
{
    srv_counts *c = calloc(1, sizeof *c);
    if (c)
        pthread_mutex_init(&c->mu, NULL);
    return c;
}

void srv_counts_free(srv_counts *c)
{
    if (!c)
        return;
    for (int i = 0; i < COUNT_BUCKETS; i++)
        for (count_node *x = c->bucket[i], *next; x; x = next) {
            next = x->next;
            free(x);
        }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static unsigned hash_key(const char *s)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h & (COUNT_BUCKETS - 1);
}

int srv_counts_add(srv_counts *c, const char *key, int delta)
{
    count_node **at, *x;
    int n = -1;

    pthread_mutex_lock(&c->mu);
    for (at = &c->bucket[hash_key(key)]; (x = *at); at = &x->next)
        if (strncmp(x->key, key, sizeof x->key - 1) == 0)
            break;
    if (!x && delta > 0 && (x = calloc(1, sizeof *x))) {
        snprintf(x->key, sizeof x->key, "%s", key);
        *at = x;
        c->keys++;
    }
    if (x) {
        n = x->n += delta;
        if (n <= 0) {
            *at = x->next;
            free(x);
            c->keys--;
            n = 0;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

int srv_counts_keys(srv_counts *c)
{
    pthread_mutex_lock(&c->mu);
    int n = c->keys;
    pthread_mutex_unlock(&c->mu);
    return n;
}
