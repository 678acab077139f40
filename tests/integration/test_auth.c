/* db_auth against a real PostgreSQL: users, tokens stored as digests, lookup,
 * revocation and expiry (issue 13). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "db_auth.h"
#include "itest.h"
#include "srv_token.h"

static void test_users(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    int64_t id = 0, id2 = 0;
    char *json = NULL;

    assert_int_equal(db_user_add(c, "alice", "admin", &id, &err), FB_OK);
    assert_int_equal(db_user_add(c, "bob", "user", &id2, &err), FB_OK);
    assert_true(id > 0 && id2 > id);
    assert_int_equal(db_user_add(c, "alice", "user", &id, &err), FB_ECONFLICT);
    assert_string_equal(err.field, "name");
    assert_int_equal(db_user_add(c, "carol", "root", &id, &err), FB_EINVAL);
    assert_string_equal(err.field, "role");
    assert_int_equal(db_user_add(c, "Carol", "user", &id, &err), FB_EINVAL);
    assert_string_equal(err.field, "name");
    assert_int_equal(db_user_add(c, "c d", "user", &id, &err), FB_EINVAL);
    assert_int_equal(db_user_list(c, &json, &err), FB_OK);
    cJSON *list = cJSON_Parse(json);
    free(json);
    assert_int_equal(cJSON_GetArraySize(list), 2);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 0), "name")->valuestring,
                        "alice");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 1), "role")->valuestring,
                        "user");
    cJSON_Delete(list);
}

/* A token is found by its key id; what the database holds is its digest, and
 * the digest is what matches the token.  Revoked and expired say so. */
static void test_tokens(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    int64_t id = 0;
    char text[SRV_TOKEN_LEN + 1], key[SRV_TOKEN_KEYID_LEN + 1], *json = NULL;
    db_new_token t = {.user = "alice", .key_id = key, .name = "laptop"};
    db_token_row row;

    assert_int_equal(db_user_add(c, "alice", "user", &id, &err), FB_OK);
    assert_int_equal(srv_token_new(text, key, t.digest, &err), FB_OK);
    assert_int_equal(db_token_add(c, &t, &err), FB_OK);
    assert_int_equal(db_token_lookup(c, key, &row, &err), FB_OK);
    assert_true(srv_token_matches(text, strlen(text), row.digest));
    assert_int_equal(row.user_id, id);
    assert_string_equal(row.user, "alice");
    assert_string_equal(row.role, "user");
    assert_false(row.revoked);
    assert_false(row.expired);

    /* The token itself is nowhere in the database. */
    PGconn *raw = raw_connect();
    PGresult *res = PQexec(raw, "SELECT t::text FROM tokens t");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_null(strstr(PQgetvalue(res, 0, 0), text + 17)); /* the secret part */
    PQclear(res);
    PQfinish(raw);

    assert_int_equal(db_token_list(c, "alice", &json, &err), FB_OK);
    assert_null(strstr(json, text + 17));
    assert_non_null(strstr(json, key));
    assert_non_null(strstr(json, "laptop"));
    free(json);

    assert_int_equal(db_token_touch(c, key, &err), FB_OK);
    assert_int_equal(db_token_revoke(c, key, &err), FB_OK);
    assert_int_equal(db_token_revoke(c, key, &err), FB_OK); /* again: fine */
    assert_int_equal(db_token_lookup(c, key, &row, &err), FB_OK);
    assert_true(row.revoked);
    assert_int_equal(db_token_revoke(c, "AAAAAAAAAAAA", &err), FB_ENOTFOUND);
    assert_int_equal(db_token_lookup(c, "AAAAAAAAAAAA", &row, &err), FB_ENOTFOUND);

    /* Expiry, and a token for nobody. */
    char text2[SRV_TOKEN_LEN + 1], key2[SRV_TOKEN_KEYID_LEN + 1];
    db_new_token t2 = {.user = "alice", .key_id = key2, .expires_days = 1};
    assert_int_equal(srv_token_new(text2, key2, t2.digest, &err), FB_OK);
    assert_int_equal(db_token_add(c, &t2, &err), FB_OK);
    assert_int_equal(db_token_lookup(c, key2, &row, &err), FB_OK);
    assert_false(row.expired);
    raw_exec("UPDATE tokens SET expires_at = now() - interval '1 second' WHERE name = ''");
    assert_int_equal(db_token_lookup(c, key2, &row, &err), FB_OK);
    assert_true(row.expired);
    t2.user = "nobody";
    assert_int_equal(srv_token_new(text2, key2, t2.digest, &err), FB_OK);
    assert_int_equal(db_token_add(c, &t2, &err), FB_ENOTFOUND);
}

int main(void)
{
    itest_url_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_users, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_tokens, itest_setup, itest_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
