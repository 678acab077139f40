/* srv_token: the shape, randomness and digest of API tokens (issue 13). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_token.h"

static void test_new_and_parse(void **state)
{
    char text[SRV_TOKEN_LEN + 1], key[SRV_TOKEN_KEYID_LEN + 1], back[SRV_TOKEN_KEYID_LEN + 1];
    unsigned char digest[SRV_TOKEN_DIGEST_LEN];
    fb_err err = {0};
    (void)state;

    assert_int_equal(srv_token_new(text, key, digest, &err), FB_OK);
    assert_int_equal(strlen(text), SRV_TOKEN_LEN);
    assert_memory_equal(text, "fbu_", 4);
    assert_true(srv_token_parse(text, strlen(text), back));
    assert_string_equal(back, key);
    assert_true(srv_token_matches(text, strlen(text), digest));
    text[SRV_TOKEN_LEN - 1] = text[SRV_TOKEN_LEN - 1] == 'A' ? 'B' : 'A';
    assert_false(srv_token_matches(text, strlen(text), digest));
}

/* 2,000 tokens: all different, and every character of the alphabet appears in
 * the secrets at a rate near 1/62 (a biased draw would skew some). */
static void test_random(void **state)
{
    enum { N = 2000 };
    static char seen[N][SRV_TOKEN_LEN + 1];
    int counts[128] = {0};
    fb_err err = {0};
    (void)state;

    for (int i = 0; i < N; i++) {
        char key[SRV_TOKEN_KEYID_LEN + 1];
        unsigned char digest[SRV_TOKEN_DIGEST_LEN];
        assert_int_equal(srv_token_new(seen[i], key, digest, &err), FB_OK);
        for (int k = 5 + SRV_TOKEN_KEYID_LEN; k < SRV_TOKEN_LEN; k++)
            counts[(unsigned char)seen[i][k]]++;
        for (int j = 0; j < i; j++)
            assert_string_not_equal(seen[i], seen[j]);
    }
    double expect = (double)N * SRV_TOKEN_SECRET_LEN / 62;
    for (int c = 0; c < 128; c++) {
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum) {
            assert_int_equal(counts[c], 0);
            continue;
        }
        if (counts[c] < expect * 0.75 || counts[c] > expect * 1.25)
            fail_msg("character %c drawn %d times, expected about %.0f", c, counts[c], expect);
    }
}

static void test_parse_bad(void **state)
{
    static const char *const bad[] = {
        "",
        "fbu_",
        "fbw_AAAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
        "fbu_AAAAAAAAAAAA-BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
        "fbu_AAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
        "fbu_AAAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
        "fbu_AAAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
        "fbu_AAAAAA+AAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
        "fbu_AAAAAAAAAAAA_BBBBBBBBBBBBBBBB BBBBBBBBBBBBBBB",
    };
    char key[SRV_TOKEN_KEYID_LEN + 1];
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (srv_token_parse(bad[i], strlen(bad[i]), key))
            fail_msg("accepted '%s'", bad[i]);
    assert_true(srv_token_parse("fbu_AAAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", 49, key));
    assert_string_equal(key, "AAAAAAAAAAAA");
    assert_false(srv_token_parse("fbu_AAAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", 48, key));
    assert_false(srv_token_parse(NULL, 0, key));
}

/* FIPS 180-2's first test vector: the digest is SHA-256 itself. */
static void test_digest(void **state)
{
    static const unsigned char abc[SRV_TOKEN_DIGEST_LEN] = {
        0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
        0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
        0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
    unsigned char got[SRV_TOKEN_DIGEST_LEN];
    (void)state;
    assert_true(srv_token_digest("abc", 3, got));
    assert_memory_equal(got, abc, sizeof abc);
    assert_true(srv_token_matches("abc", 3, abc));
    assert_false(srv_token_matches("abd", 3, abc));
}

static void test_from_header(void **state)
{
    size_t len = 0;
    const char *t;
    (void)state;
    t = srv_token_from_header("Bearer fbu_x", &len);
    assert_non_null(t);
    assert_int_equal(len, 5);
    assert_memory_equal(t, "fbu_x", 5);
    t = srv_token_from_header("bearer   abc  ", &len);
    assert_non_null(t);
    assert_int_equal(len, 3);
    assert_null(srv_token_from_header("Basic dXNlcjpwYXNz", &len));
    assert_null(srv_token_from_header("Bearer ", &len));
    assert_null(srv_token_from_header("Bearerabc", &len));
    assert_null(srv_token_from_header(NULL, &len));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_and_parse), cmocka_unit_test(test_random),
        cmocka_unit_test(test_parse_bad),     cmocka_unit_test(test_digest),
        cmocka_unit_test(test_from_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
