/* srv_token: see srv_token.h. */
#include "srv_token.h"

#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/* n characters of the alphabet, uniformly: bytes >= 248 (4 * 62) are drawn
 * again, so no character is likelier than another. */
static fb_code random_chars(char *out, size_t n, fb_err *err)
{
    unsigned char buf[64];
    size_t have = 0;

    while (have < n) {
        ssize_t got = getrandom(buf, sizeof buf, 0);
        if (got <= 0)
            return fb_err_set(err, FB_EIO, NULL, "the random source failed");
        for (ssize_t i = 0; i < got && have < n; i++)
            if (buf[i] < 248)
                out[have++] = alphabet[buf[i] % 62];
    }
    return FB_OK;
}

bool srv_token_digest(const char *text, size_t len, unsigned char digest[SRV_TOKEN_DIGEST_LEN])
{
    unsigned int n = 0;
    return EVP_Digest(text, len, digest, &n, EVP_sha256(), NULL) == 1 && n == SRV_TOKEN_DIGEST_LEN;
}

fb_code srv_token_new(char *text, char *key_id, unsigned char digest[SRV_TOKEN_DIGEST_LEN],
                      fb_err *err)
{
    char *p = text;
    fb_code rc;

    memcpy(p, SRV_TOKEN_PREFIX, 4);
    p += 4;
    rc = random_chars(p, SRV_TOKEN_KEYID_LEN, err);
    if (rc)
        return rc;
    memcpy(key_id, p, SRV_TOKEN_KEYID_LEN);
    key_id[SRV_TOKEN_KEYID_LEN] = '\0';
    p += SRV_TOKEN_KEYID_LEN;
    *p++ = '_';
    rc = random_chars(p, SRV_TOKEN_SECRET_LEN, err);
    if (rc)
        return rc;
    text[SRV_TOKEN_LEN] = '\0';
    if (!srv_token_digest(text, SRV_TOKEN_LEN, digest))
        return fb_err_set(err, FB_EINTERNAL, NULL, "SHA-256 failed");
    return FB_OK;
}

static bool all_alnum(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strchr(alphabet, s[i]) || s[i] == '\0')
            return false;
    return true;
}

bool srv_token_parse(const char *text, size_t len, char key_id[SRV_TOKEN_KEYID_LEN + 1])
{
    if (!text || len != SRV_TOKEN_LEN || memcmp(text, SRV_TOKEN_PREFIX, 4) != 0 ||
        text[4 + SRV_TOKEN_KEYID_LEN] != '_' || !all_alnum(text + 4, SRV_TOKEN_KEYID_LEN) ||
        !all_alnum(text + 5 + SRV_TOKEN_KEYID_LEN, SRV_TOKEN_SECRET_LEN))
        return false;
    memcpy(key_id, text + 4, SRV_TOKEN_KEYID_LEN);
    key_id[SRV_TOKEN_KEYID_LEN] = '\0';
    return true;
}

bool srv_token_matches(const char *text, size_t len, const unsigned char want[SRV_TOKEN_DIGEST_LEN])
{
    unsigned char got[SRV_TOKEN_DIGEST_LEN];
    return srv_token_digest(text, len, got) && CRYPTO_memcmp(got, want, sizeof got) == 0;
}

const char *srv_token_from_header(const char *header, size_t *len)
{
    const char *t;

    if (!header || strncasecmp(header, "Bearer ", 7) != 0)
        return NULL;
    t = header + 7;
    while (*t == ' ')
        t++;
    *len = strcspn(t, " \t\r\n");
    return *len ? t : NULL;
}
