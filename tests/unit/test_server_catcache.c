/* Unit tests of srv_catcache (the workload catalog cached in the server): one
 * read serves many submits, a rejected spec is checked again against a fresh
 * read (a worker that registered a moment ago), read errors reach the caller,
 * and the retry does not keep defaults the stale copy picked. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "srv_catcache.h"

#define W1_NATIVE                                                                                  \
    "{\"name\":\"w1\",\"engine\":\"native\",\"devices\":[\"cpu\"],\"dtypes\":[\"float32\"],"       \
    "\"variants\":[\"eager\",\"fused\"],\"default_batch_size\":2}"
#define W2_CUDA                                                                                    \
    "{\"name\":\"w2\",\"engine\":\"native\",\"devices\":[\"cpu\",\"cuda\"],"                       \
    "\"registered_devices\":[\"cpu\",\"cuda\"],\"dtypes\":[\"float32\"],\"variants\":[\"eager\","  \
    "\"fused\"],\"default_batch_size\":1}"
#define W2_CPU                                                                                     \
    "{\"name\":\"w2\",\"engine\":\"native\",\"devices\":[\"cpu\"],"                                \
    "\"dtypes\":[\"float32\"],\"variants\":[\"eager\",\"fused\"],\"default_batch_size\":1}"

/* The fake database: what the next read returns, and how many reads there were. */
typedef struct fake_db {
    const char *catalog; /* JSON text; NULL: the read fails with FB_EUNAVAIL */
    int reads;
} fake_db;

static fb_code fake_fetch(void *ctx, char **json, fb_err *err)
{
    fake_db *db = ctx;
    db->reads++;
    if (!db->catalog)
        return fb_err_set(err, FB_EUNAVAIL, NULL, "database unreachable");
    *json = strdup(db->catalog);
    return *json ? FB_OK : fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
}

/* Resolves {"workload": name, ...extra} against the cache; returns the code. */
static fb_code submit(fake_db *db, const char *spec_json, fb_spec *spec, fb_err *err)
{
    fb_spec_init(spec);
    fb_err_clear(err);
    assert_int_equal(fb_spec_parse(spec_json, strlen(spec_json), spec, err), FB_OK);
    return srv_catcache_resolve(fake_fetch, db, spec, err);
}

static int clear_setup(void **state)
{
    (void)state;
    srv_catcache_clear();
    return 0;
}

static void test_one_read_serves_many(void **state)
{
    fake_db db = {"[" W1_NATIVE "]", 0};
    fb_spec spec;
    fb_err err;
    (void)state;
    uint64_t before = srv_catcache_fetches();
    for (int i = 0; i < 100; i++) {
        assert_int_equal(submit(&db, "{\"workload\":\"w1\"}", &spec, &err), FB_OK);
        assert_string_equal(spec.engine, "native");
        assert_string_equal(spec.device, "cpu");
        assert_int_equal(spec.batch_size, 2);
        fb_spec_free(&spec);
    }
    assert_int_equal(db.reads, 1);
    assert_int_equal(srv_catcache_fetches() - before, 1);
}

static void test_miss_reads_again(void **state)
{
    fake_db db = {"[" W1_NATIVE "]", 0};
    fb_spec spec;
    fb_err err;
    (void)state;
    assert_int_equal(submit(&db, "{\"workload\":\"w1\"}", &spec, &err), FB_OK);
    fb_spec_free(&spec);
    /* A worker offering w2 registers: the cached copy does not know it yet. */
    db.catalog = "[" W1_NATIVE "," W2_CPU "]";
    assert_int_equal(submit(&db, "{\"workload\":\"w2\"}", &spec, &err), FB_OK);
    fb_spec_free(&spec);
    assert_int_equal(db.reads, 2);
    /* Now cached: no further read. */
    assert_int_equal(submit(&db, "{\"workload\":\"w2\"}", &spec, &err), FB_OK);
    fb_spec_free(&spec);
    assert_int_equal(db.reads, 2);
}

static void test_unknown_is_422_after_one_read(void **state)
{
    fake_db db = {"[" W1_NATIVE "]", 0};
    fb_spec spec;
    fb_err err;
    (void)state;
    assert_int_equal(submit(&db, "{\"workload\":\"nope\"}", &spec, &err), FB_ENOTFOUND);
    assert_string_equal(err.field, "workload");
    fb_spec_free(&spec);
    assert_int_equal(db.reads, 1); /* no copy yet: one read, then the answer */
    assert_int_equal(submit(&db, "{\"workload\":\"w1\",\"device\":\"cuda\"}", &spec, &err),
                     FB_EUNSUPPORTED);
    assert_string_equal(err.field, "device");
    fb_spec_free(&spec);
    assert_int_equal(db.reads, 2); /* a miss on the cached copy reads once more */
}

static void test_read_error_reaches_caller(void **state)
{
    fake_db db = {NULL, 0};
    fb_spec spec;
    fb_err err;
    (void)state;
    assert_int_equal(submit(&db, "{\"workload\":\"w1\"}", &spec, &err), FB_EUNAVAIL);
    fb_spec_free(&spec);
    assert_int_equal(db.reads, 1);
}

/* The stale copy offers w2 on cpu only (default device cpu); the fresh one adds
 * a registered CUDA worker, which is preferred: the retry must not keep the
 * stale "cpu" default. */
static void test_retry_drops_stale_defaults(void **state)
{
    fake_db db = {"[" W2_CPU "]", 0};
    fb_spec spec;
    fb_err err;
    (void)state;
    assert_int_equal(submit(&db, "{\"workload\":\"w2\"}", &spec, &err), FB_OK);
    assert_string_equal(spec.device, "cpu");
    fb_spec_free(&spec);
    db.catalog = "[" W2_CUDA "]";
    /* The cached copy rejects dtype float16 after picking device cpu. */
    assert_int_equal(submit(&db, "{\"workload\":\"w2\",\"dtype\":\"float16\"}", &spec, &err),
                     FB_EUNSUPPORTED);
    assert_string_equal(err.field, "dtype");
    assert_string_equal(spec.device, "cuda"); /* picked from the fresh copy */
    fb_spec_free(&spec);
    assert_int_equal(db.reads, 2);
}

static void test_expiry_reads_again(void **state)
{
    fake_db db = {"[" W1_NATIVE "]", 0};
    fb_spec spec;
    fb_err err;
    long wait_ms = SRV_CATCACHE_TTL_MS + 50;
    struct timespec ts = {wait_ms / 1000, (wait_ms % 1000) * 1000000L};
    (void)state;
    assert_int_equal(submit(&db, "{\"workload\":\"w1\"}", &spec, &err), FB_OK);
    fb_spec_free(&spec);
    while (nanosleep(&ts, &ts) != 0) /* EINTR: sleep the rest; anything else is a bug */
        assert_int_equal(errno, EINTR);
    db.catalog = "[]"; /* the worker went stale meanwhile */
    assert_int_equal(submit(&db, "{\"workload\":\"w1\"}", &spec, &err), FB_ENOTFOUND);
    fb_spec_free(&spec);
    assert_int_equal(db.reads, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_one_read_serves_many, clear_setup),
        cmocka_unit_test_setup(test_miss_reads_again, clear_setup),
        cmocka_unit_test_setup(test_unknown_is_422_after_one_read, clear_setup),
        cmocka_unit_test_setup(test_read_error_reaches_caller, clear_setup),
        cmocka_unit_test_setup(test_retry_drops_stale_defaults, clear_setup),
        cmocka_unit_test_setup(test_expiry_reads_again, clear_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
