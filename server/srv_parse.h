/* srv_parse: pure functions for the parts of a request that come from outside —
 * path patterns, ids, query values, Content-Type, static file paths.  No I/O, no
 * allocation, no global state: unit tested and fuzzed (tests/fuzz/fuzz_query.c). */
#ifndef SRV_PARSE_H
#define SRV_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fb_err.h"

#define SRV_MAX_CAPS   2    /* captures per route pattern */
#define SRV_PATH_MAX   1024 /* longer request paths never match a route */
#define SRV_STATIC_MAX 255  /* longest relative static file path */

typedef struct srv_span {
    size_t off, len; /* into the matched path */
} srv_span;

typedef struct srv_caps {
    int n;
    srv_span cap[SRV_MAX_CAPS];
} srv_caps;

/* Matches path against a pattern of literal segments, "{name}" (one non-empty
 * segment) and a final "{*}" (the non-empty rest, slashes included).  Both must
 * start with '/'.  On a match, fills caps (may be NULL) in pattern order and
 * returns true.  A trailing slash is significant ("/a/" does not match "/a"). */
bool srv_path_match(const char *pattern, const char *path, srv_caps *caps);

/* Parses len bytes as a job id: decimal digits only, value 1..INT64_MAX. */
FB_MUSTCHECK bool srv_parse_id(const char *s, size_t len, int64_t *out);

/* Parses a whole NUL-terminated decimal integer in lo..hi (no sign, no spaces). */
FB_MUSTCHECK bool srv_parse_int_range(const char *s, long lo, long hi, long *out);

/* Characters in the first n bytes of UTF-8 text (the bytes that are not
 * continuation bytes): what a schema's maxLength counts. */
size_t srv_utf8_chars(const char *s, size_t n);

/* Splits "key:value" at the first ':' into key and value (both non-empty, each
 * at most maxchars UTF-8 characters and shorter than its buffer).  key and val
 * are written only on success. */
FB_MUSTCHECK bool srv_parse_label(const char *s, size_t maxchars, char *key, size_t keysz,
                                  char *val, size_t valsz);

/* Splits "ID/ACTION" (the tail of /api/v1/workers/...) at its last slash into id,
 * percent-decoded, and action.  False when either part is empty, a part does not
 * fit its buffer, or the id is badly escaped or holds other than printable
 * ASCII (no spaces).  id and action are written only on success. */
FB_MUSTCHECK bool srv_parse_worker_action(const char *s, char *id, size_t idsz, char *action,
                                          size_t actsz);

/* True when s is a date that exists ("2026-11-22") or an RFC 3339 date-time
 * ("2026-11-22T10:00:00Z", "...T10:00:00.5+01:00"; 'T' or a space, seconds up
 * to 60 for a leap second, years 0001..9999, offsets up to +/-23:59).  When utc
 * is not NULL it gets (n >= SRV_TIME_MAX) the date as written, or the instant
 * in UTC ("2026-11-22T09:00:00.5Z"), so the database never sees a time it
 * would refuse. */
#define SRV_TIME_MAX 40
bool srv_parse_rfc3339(const char *s, char *utc, size_t n);

/* An Idempotency-Key header's value: 1..SRV_IDEM_KEY_MAX visible ASCII
 * characters (0x21-0x7e: a UUID, a ULID, any client's token). */
#define SRV_IDEM_KEY_MAX 255
bool srv_parse_idem_key(const char *s);

/* True when the Host header value host ("name", "name:port", "[v6]:port")
 * names one of allowed (a comma-separated list of host names or addresses,
 * compared without the port, case-insensitively).  An empty or NULL allowed list
 * allows every host; a missing host is refused when there is a list. */
bool srv_host_allowed(const char *host, const char *allowed);

/* True for a job state name of docs/API.md. */
bool srv_state_valid(const char *s);

/* True when a Content-Type header value is application/json, case-insensitive,
 * with optional parameters; a charset parameter must be utf-8 (quoted or not).
 * NULL is false. */
bool srv_content_type_is_json(const char *ct);

/* True when rel (the part of /static/... after the prefix) is a safe relative
 * path: 1..SRV_STATIC_MAX bytes of [A-Za-z0-9._-/], no empty segment, no segment
 * starting with '.', so never "..", hidden files or absolute paths. */
bool srv_static_path_ok(const char *rel);

/* Content-Type for a file name by extension, or NULL when we do not serve it. */
const char *srv_content_type_for(const char *name);

#endif
