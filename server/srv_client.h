/* srv_client: who a request comes from, and how much of the server each
 * client holds.
 *
 * The client is the connection's peer address, unless the peer is a trusted
 * proxy (--trusted-proxies CIDR,...): then it is the nearest hop of
 * X-Forwarded-For (else of RFC 7239 Forwarded's for=) that is not a trusted
 * proxy itself, read from the right.  A header from a sender that is not
 * trusted is ignored, never believed.  The per-client caps, the logs and
 * /metrics use that client.
 *
 * srv_counts: a count per key (open connections per address, requests in
 * flight per client), thread-safe; a key leaves the table at zero, so its
 * size is bounded by what is open. */
#ifndef SRV_CLIENT_H
#define SRV_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fb_err.h"

#define SRV_PROXIES_MAX 32
#define SRV_CLIENT_MAX  46 /* an IPv6 address's text and its NUL */

typedef struct srv_cidr {
    int family;       /* AF_INET or AF_INET6 */
    uint8_t addr[16]; /* network order, the first 4 for IPv4 */
    int bits;
} srv_cidr;

typedef struct srv_proxies {
    int n;
    srv_cidr cidr[SRV_PROXIES_MAX];
} srv_proxies;

/* Parses "10.0.0.0/8,127.0.0.1,fd00::/8" (an address alone is a /32 or /128)
 * into *out; NULL or "" is none.  FB_EINVAL naming the bad entry. */
FB_MUSTCHECK fb_code srv_proxies_parse(const char *list, srv_proxies *out, fb_err *err);

/* True when addr (numeric text; an IPv4-mapped IPv6 address counts as its
 * IPv4) is inside one of the proxies' ranges. */
bool srv_proxies_match(const srv_proxies *p, const char *addr);

/* The client of a request from peer (numeric text) into out (n bytes, at
 * least SRV_CLIENT_MAX): peer unless it is trusted; then, right to left, the
 * first hop of xff (else of forwarded's for= values) that is not trusted; a
 * hop that is not an address ends the walk at the last address read; all
 * trusted: the leftmost.  xff and forwarded may be NULL. */
void srv_client_of(const srv_proxies *p, const char *peer, const char *xff, const char *forwarded,
                   char *out, size_t n);

/* The numeric text of an IPv4 or IPv6 socket address ("?" for anything
 * else), IPv4-mapped IPv6 written as IPv4. */
void srv_addr_text(const void *sockaddr, char *out, size_t n);

typedef struct srv_counts srv_counts;

srv_counts *srv_counts_new(void);
void srv_counts_free(srv_counts *c);

/* Adds delta to key's count and returns the new count; -1 (nothing changed)
 * when a new key cannot be had (no memory).  A count that reaches 0 leaves. */
int srv_counts_add(srv_counts *c, const char *key, int delta);

/* Keys with a count now. */
int srv_counts_keys(srv_counts *c);

#endif
