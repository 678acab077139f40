/* srv_client: trusted-proxy ranges, the client behind them (X-Forwarded-For,
 * Forwarded), forged headers from untrusted senders, and the counts per key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "srv_client.h"

static void test_parse(void **state)
{
    srv_proxies p;
    fb_err err;
    (void)state;

    assert_int_equal(srv_proxies_parse("10.0.0.0/8,127.0.0.3,fd00::/8", &p, &err), FB_OK);
    assert_int_equal(p.n, 3);
    assert_int_equal(p.cidr[1].bits, 32);
    assert_int_equal(srv_proxies_parse(NULL, &p, &err), FB_OK);
    assert_int_equal(p.n, 0);
    static const char *const bad[] = {"10.0.0.0/33", "10.0.0.1,,10.0.0.2", "example.org",
                                      "::1/129",     "10.0.0.0/x",         "10.0.0.0/"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(srv_proxies_parse(bad[i], &p, &err), FB_EINVAL);
        assert_string_equal(err.field, "trusted-proxies");
    }
}

static void test_match(void **state)
{
    srv_proxies p;
    fb_err err;
    (void)state;

    assert_int_equal(
        srv_proxies_parse("10.1.0.0/16,127.0.0.3/32,fd00::/8,192.168.7.0/25", &p, &err), FB_OK);
    assert_true(srv_proxies_match(&p, "10.1.255.4"));
    assert_false(srv_proxies_match(&p, "10.2.0.1"));
    assert_true(srv_proxies_match(&p, "127.0.0.3"));
    assert_false(srv_proxies_match(&p, "127.0.0.4"));
    assert_true(srv_proxies_match(&p, "::ffff:127.0.0.3")); /* IPv4-mapped */
    assert_true(srv_proxies_match(&p, "fd12::1"));
    assert_false(srv_proxies_match(&p, "fe80::1"));
    assert_true(srv_proxies_match(&p, "192.168.7.127")); /* /25: a bit inside a byte */
    assert_false(srv_proxies_match(&p, "192.168.7.128"));
    assert_false(srv_proxies_match(&p, "not an address"));
    assert_false(srv_proxies_match(NULL, "10.1.0.1"));
}

static const char *client(const srv_proxies *p, const char *peer, const char *xff, const char *fwd)
{
    static char out[SRV_CLIENT_MAX];
    srv_client_of(p, peer, xff, fwd, out, sizeof out);
    return out;
}

static void test_client_of(void **state)
{
    srv_proxies p;
    fb_err err;
    (void)state;

    assert_int_equal(srv_proxies_parse("127.0.0.3,10.0.0.0/8", &p, &err), FB_OK);
    /* an untrusted sender's header is ignored, never believed */
    assert_string_equal(client(&p, "127.0.0.10", "192.0.2.99", NULL), "127.0.0.10");
    assert_string_equal(client(&p, "127.0.0.10", NULL, "for=192.0.2.99"), "127.0.0.10");
    /* from a trusted proxy: the nearest hop that is not a proxy, from the right */
    assert_string_equal(client(&p, "127.0.0.3", "127.0.0.11", NULL), "127.0.0.11");
    assert_string_equal(client(&p, "127.0.0.3", "192.0.2.99, 127.0.0.11, 10.9.8.7", NULL),
                        "127.0.0.11"); /* the forged leftmost hop is not reached */
    assert_string_equal(client(&p, "127.0.0.3", "10.0.0.5, 10.0.0.6", NULL), "10.0.0.5");
    assert_string_equal(client(&p, "127.0.0.3", NULL, NULL), "127.0.0.3");
    /* ports, brackets, quotes, spaces */
    assert_string_equal(client(&p, "127.0.0.3", " 198.51.100.7:4711 ", NULL), "198.51.100.7");
    assert_string_equal(client(&p, "127.0.0.3", "[2001:db8::17]:80", NULL), "2001:db8::17");
    assert_string_equal(client(&p, "127.0.0.3", NULL,
                               "for=192.0.2.43;proto=https, for=\"[2001:db8:cafe::17]:4711\""),
                        "2001:db8:cafe::17");
    assert_string_equal(client(&p, "127.0.0.3", NULL, "proto=http;for=198.51.100.1;by=x"),
                        "198.51.100.1");
    /* a hop that is no address ends the walk at the last address read */
    assert_string_equal(client(&p, "127.0.0.3", "198.51.100.9, unknown, 10.0.0.7", NULL),
                        "10.0.0.7");
    assert_string_equal(client(&p, "127.0.0.3", "garbage", NULL), "127.0.0.3");
    assert_string_equal(client(&p, "127.0.0.3", NULL, "for=_hidden"), "127.0.0.3");
}

static void test_addr_text(void **state)
{
    struct sockaddr_in a4 = {.sin_family = AF_INET};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
    char out[SRV_CLIENT_MAX];
    (void)state;

    inet_pton(AF_INET, "127.0.0.2", &a4.sin_addr);
    srv_addr_text(&a4, out, sizeof out);
    assert_string_equal(out, "127.0.0.2");
    inet_pton(AF_INET6, "::ffff:127.0.0.9", &a6.sin6_addr);
    srv_addr_text(&a6, out, sizeof out);
    assert_string_equal(out, "127.0.0.9");
    inet_pton(AF_INET6, "2001:db8::1", &a6.sin6_addr);
    srv_addr_text(&a6, out, sizeof out);
    assert_string_equal(out, "2001:db8::1");
    srv_addr_text(NULL, out, sizeof out);
    assert_string_equal(out, "?");
}

static void test_counts(void **state)
{
    srv_counts *c = srv_counts_new();
    char key[32];
    (void)state;

    assert_non_null(c);
    assert_int_equal(srv_counts_add(c, "a", 1), 1);
    assert_int_equal(srv_counts_add(c, "a", 1), 2);
    assert_int_equal(srv_counts_add(c, "b", 1), 1);
    assert_int_equal(srv_counts_keys(c), 2);
    assert_int_equal(srv_counts_add(c, "a", -1), 1);
    assert_int_equal(srv_counts_add(c, "a", -1), 0);
    assert_int_equal(srv_counts_keys(c), 1); /* at zero a key leaves */
    assert_int_equal(srv_counts_add(c, "nobody", -1), -1);
    for (int i = 0; i < 5000; i++) { /* more keys than buckets: chains */
        snprintf(key, sizeof key, "10.0.%d.%d", i / 256, i % 256);
        assert_int_equal(srv_counts_add(c, key, 1), 1);
    }
    assert_int_equal(srv_counts_keys(c), 5001);
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "10.0.%d.%d", i / 256, i % 256);
        assert_int_equal(srv_counts_add(c, key, -1), 0);
    }
    assert_int_equal(srv_counts_keys(c), 1);
    srv_counts_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),     cmocka_unit_test(test_match),
        cmocka_unit_test(test_client_of), cmocka_unit_test(test_addr_text),
        cmocka_unit_test(test_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
