/* srv_admin: administration without a web form:
 *
 *   fusionbench-server user add NAME --role viewer|user|admin [LIMITS]
 *   fusionbench-server user set NAME [--role R] [LIMITS]
 *   fusionbench-server user list
 *     LIMITS: --quota-hours H|none (device-hours per rolling 24 h)
 *             --max-running N|none (jobs running at once)
 *   fusionbench-server token create USER [--name LABEL] [--expires-days N]
 *   fusionbench-server token list [USER]
 *   fusionbench-server token revoke KEY_ID
 *
 * Each works against DATABASE_URL (or --database-url URL first) and applies
 * the migrations.  A new token is printed once, alone on stdout; nothing else
 * ever prints or stores it. */
#include "srv_admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "db_auth.h"
#include "fb_parse.h"
#include "srv_token.h"

#define ADMIN_USAGE 2
#define ADMIN_FAIL  1

static int usage(void)
{
    fprintf(
        stderr,
        "usage: fusionbench-server [--database-url URL] user add NAME --role viewer|user|admin\n"
        "                                               [--quota-hours H] [--max-running N]\n"
        "       fusionbench-server [--database-url URL] user set NAME [--role R]\n"
        "                                               [--quota-hours H|none]\n"
        "                                               [--max-running N|none]\n"
        "       fusionbench-server [--database-url URL] user list\n"
        "       fusionbench-server [--database-url URL] token create USER [--name LABEL]\n"
        "                                               [--expires-days N]\n"
        "       fusionbench-server [--database-url URL] token list [USER]\n"
        "       fusionbench-server [--database-url URL] token revoke KEY_ID\n");
    return ADMIN_USAGE;
}

static int fail(const fb_err *err)
{
    fprintf(stderr, "fusionbench-server: %s%s%s\n", err->field[0] ? err->field : "",
            err->field[0] ? ": " : "", err->msg);
    return ADMIN_FAIL;
}

/* The value after option name in argv[i], or NULL (usage printed). */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
    if (strcmp(argv[*i], name) != 0)
        return NULL;
    if (*i + 1 >= argc) {
        fprintf(stderr, "fusionbench-server: %s needs a value\n", name);
        return NULL;
    }
    return argv[++*i];
}

/* Prints a JSON array text as a table of keys, one row per item. */
static void print_table(const char *json, const char *const *keys, int n)
{
    cJSON *arr = cJSON_Parse(json), *it;
    for (int k = 0; k < n; k++)
        printf("%s%s", k ? "\t" : "", keys[k]);
    printf("\n");
    cJSON_ArrayForEach(it, arr)
    {
        for (int k = 0; k < n; k++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, keys[k]);
            if (cJSON_IsString(v))
                printf("%s%s", k ? "\t" : "", v->valuestring);
            else if (cJSON_IsNumber(v))
                printf("%s%g", k ? "\t" : "", v->valuedouble);
            else
                printf("%s-", k ? "\t" : "");
        }
        printf("\n");
    }
    cJSON_Delete(arr);
}

/* --quota-hours H|none and --max-running N|none into l; 0 when argv[*i] is
 * neither, -1 after a bad value (message printed), 1 when taken. */
static int limit_opt(int argc, char **argv, int *i, db_user_limits *l)
{
    const char *v;
    char *end;

    if ((v = opt_value(argc, argv, i, "--quota-hours"))) {
        if (strcmp(v, "none") == 0) {
            l->quota_hours = -1;
            return 1;
        }
        l->quota_hours = strtod(v, &end);
        if (end != v && !*end && l->quota_hours > 0 && l->quota_hours <= 1e6)
            return 1;
        fprintf(stderr,
                "fusionbench-server: --quota-hours takes device-hours in (0, 1e6] or "
                "none, got '%s'\n",
                v);
        return -1;
    }
    if ((v = opt_value(argc, argv, i, "--max-running"))) {
        if (strcmp(v, "none") == 0) {
            l->max_running = -1;
            return 1;
        }
        if (fb_parse_int(v, 1, 100000, &l->max_running))
            return 1;
        fprintf(stderr, "fusionbench-server: --max-running takes 1..100000 or none, got '%s'\n", v);
        return -1;
    }
    return 0;
}

static int user_cmd(db_conn *c, int argc, char **argv)
{
    static const char *const cols[] = {"name",        "role",        "tokens",
                                       "quota_hours", "max_running", "created_at"};
    db_user_limits l = {0};
    bool add;
    char *json = NULL;
    int64_t id = 0;
    fb_err err = {0};

    if (argc == 1 && strcmp(argv[0], "list") == 0) {
        if (db_user_list(c, &json, &err) != FB_OK)
            return fail(&err);
        print_table(json, cols, 6);
        free(json);
        return 0;
    }
    if (argc < 2 || (strcmp(argv[0], "add") != 0 && strcmp(argv[0], "set") != 0))
        return usage();
    add = strcmp(argv[0], "add") == 0;
    for (int i = 2; i < argc; i++) {
        int taken = limit_opt(argc, argv, &i, &l);
        if (taken < 0)
            return ADMIN_USAGE;
        if (!taken && !(l.role = opt_value(argc, argv, &i, "--role")))
            return usage();
    }
    if (add && !l.role)
        return usage();
    if (add && db_user_add(c, argv[1], l.role, &id, &err) != FB_OK)
        return fail(&err);
    if ((!add || l.quota_hours != 0 || l.max_running != 0) &&
        db_user_set(c, argv[1], &l, &err) != FB_OK)
        return fail(&err);
    fprintf(stderr, "user %s %s\n", argv[1], add ? "added" : "changed");
    return 0;
}

static int token_create(db_conn *c, int argc, char **argv)
{
    char text[SRV_TOKEN_LEN + 1], key_id[SRV_TOKEN_KEYID_LEN + 1];
    db_new_token t = {.user = argv[0]};
    fb_err err = {0};

    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = opt_value(argc, argv, &i, "--name")))
            t.name = v;
        else if ((v = opt_value(argc, argv, &i, "--expires-days"))) {
            if (!fb_parse_int(v, 1, 3650, &t.expires_days)) {
                fprintf(stderr, "fusionbench-server: --expires-days must be 1..3650\n");
                return ADMIN_USAGE;
            }
        } else
            return usage();
    }
    if (srv_token_new(text, key_id, t.digest, &err) != FB_OK)
        return fail(&err);
    t.key_id = key_id;
    if (db_token_add(c, &t, &err) != FB_OK)
        return fail(&err);
    fprintf(stderr, "token %s for %s created; it is shown once, here:\n", key_id, t.user);
    printf("%s\n", text);
    memset(text, 0, sizeof text);
    return 0;
}

static int token_cmd(db_conn *c, int argc, char **argv)
{
    static const char *const cols[] = {"key_id",     "user",       "name",        "created_at",
                                       "expires_at", "revoked_at", "last_used_at"};
    char *json = NULL;
    fb_err err = {0};

    if (argc >= 2 && strcmp(argv[0], "create") == 0)
        return token_create(c, argc - 1, argv + 1);
    if (argc == 2 && strcmp(argv[0], "revoke") == 0) {
        if (db_token_revoke(c, argv[1], &err) != FB_OK)
            return fail(&err);
        fprintf(stderr, "token %s revoked\n", argv[1]);
        return 0;
    }
    if ((argc == 1 || argc == 2) && strcmp(argv[0], "list") == 0) {
        if (db_token_list(c, argc == 2 ? argv[1] : NULL, &json, &err) != FB_OK)
            return fail(&err);
        print_table(json, cols, 7);
        free(json);
        return 0;
    }
    return usage();
}

bool srv_admin_is_command(const char *arg)
{
    return arg && (strcmp(arg, "user") == 0 || strcmp(arg, "token") == 0);
}

int srv_admin_main(const char *database_url, int argc, char **argv)
{
    db_conn *c = NULL;
    fb_err err = {0};
    int rc;

    if (argc < 2)
        return usage();
    if (db_connect(database_url ? database_url : "", &c, &err) != FB_OK ||
        db_migrate(c, &err) != FB_OK) {
        rc = fail(&err);
        db_close(c);
        return rc;
    }
    rc = strcmp(argv[0], "user") == 0 ? user_cmd(c, argc - 1, argv + 1)
                                      : token_cmd(c, argc - 1, argv + 1);
    db_close(c);
    return rc;
}
