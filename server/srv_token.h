/* srv_token: API tokens.
 *
 * A token is "fbu_" KEYID "_" SECRET: KEYID 12 and SECRET 32 characters of
 * [A-Za-z0-9] drawn from the operating system's random source (getrandom), so
 * 190 bits of secret.  The key id is public (listed, revoked by); the database
 * keeps only the SHA-256 digest of the whole token (OpenSSL's libcrypto), which
 * srv_token_matches compares in constant time (CRYPTO_memcmp). */
#ifndef SRV_TOKEN_H
#define SRV_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

#include "fb_err.h"

#define SRV_TOKEN_PREFIX     "fbu_"
#define SRV_TOKEN_KEYID_LEN  12
#define SRV_TOKEN_SECRET_LEN 32
#define SRV_TOKEN_LEN        (4 + SRV_TOKEN_KEYID_LEN + 1 + SRV_TOKEN_SECRET_LEN)
#define SRV_TOKEN_DIGEST_LEN 32

/* A new token: text (SRV_TOKEN_LEN + 1 bytes), its key id (KEYID_LEN + 1) and
 * its digest.  FB_EIO when the random source fails. */
FB_MUSTCHECK fb_code srv_token_new(char *text, char *key_id,
                                   unsigned char digest[SRV_TOKEN_DIGEST_LEN], fb_err *err);

/* Parses text as a token: true with its key id when the shape is right (no
 * other check: the digest decides). */
bool srv_token_parse(const char *text, size_t len, char key_id[SRV_TOKEN_KEYID_LEN + 1]);

/* SHA-256 of text[0..len). */
FB_MUSTCHECK bool srv_token_digest(const char *text, size_t len,
                                   unsigned char digest[SRV_TOKEN_DIGEST_LEN]);

/* True when text's digest equals want, compared in constant time. */
bool srv_token_matches(const char *text, size_t len,
                       const unsigned char want[SRV_TOKEN_DIGEST_LEN]);

/* The token from an Authorization header value ("Bearer <token>", the scheme
 * case-insensitive): points into header, *len set; NULL when absent or not Bearer. */
const char *srv_token_from_header(const char *header, size_t *len);

#endif
