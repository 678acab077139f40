#include "cl_args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_parse.h"

#define BIT(c) (1u << (c))
#define ALL    0xffffffffu

typedef struct opt_def {
    const char *name; /* without the leading "--" */
    bool has_arg;
    unsigned cmds; /* BIT(cl_cmd) of the commands that take it */
} opt_def;

#define SPEC_CMDS (BIT(CL_CMD_SUBMIT) | BIT(CL_CMD_SUITE_SUBMIT))

static const opt_def opts[CL_O_COUNT] = {
    [CL_O_JSON] = {"json", false, ALL},
    [CL_O_SERVER] = {"server", true, ALL},
    [CL_O_HELP] = {"help", false, ALL},
    [CL_O_VERSION] = {"version", false, BIT(CL_CMD_NONE)},
    [CL_O_VARIANTS] = {"variants", true, SPEC_CMDS},
    [CL_O_ENGINE] = {"engine", true, SPEC_CMDS},
    [CL_O_DEVICE] = {"device", true, SPEC_CMDS | BIT(CL_CMD_RESULTS)},
    [CL_O_DTYPE] = {"dtype", true, SPEC_CMDS},
    [CL_O_BATCH_SIZE] = {"batch-size", true, BIT(CL_CMD_SUBMIT)},
    [CL_O_BATCH_SIZES] = {"batch-sizes", true, BIT(CL_CMD_SUITE_SUBMIT)},
    [CL_O_ITERATIONS] = {"iterations", true, SPEC_CMDS},
    [CL_O_WARMUP] = {"warmup", true, SPEC_CMDS},
    [CL_O_PARAM] = {"param", true, SPEC_CMDS},
    [CL_O_LABEL] = {"label", true, SPEC_CMDS},
    [CL_O_PRIORITY] = {"priority", true, SPEC_CMDS},
    [CL_O_TIMEOUT] = {"timeout", true, BIT(CL_CMD_SUBMIT)},
    [CL_O_WAIT] = {"wait", false, SPEC_CMDS | BIT(CL_CMD_STATUS) | BIT(CL_CMD_EXPLAIN)},
    [CL_O_ALL] = {"all", false, BIT(CL_CMD_JOBS)},
    [CL_O_STATE] = {"state", true, BIT(CL_CMD_JOBS)},
    [CL_O_WORKLOAD] = {"workload", true, BIT(CL_CMD_JOBS) | BIT(CL_CMD_RESULTS)},
    [CL_O_LIMIT] = {"limit", true, BIT(CL_CMD_JOBS) | BIT(CL_CMD_RESULTS)},
    [CL_O_VARIANT] = {"variant", true, BIT(CL_CMD_RESULTS)},
    [CL_O_TOKEN_STDIN] = {"token-stdin", false, BIT(CL_CMD_LOGIN)},
    [CL_O_EXPLAIN] = {"explain", false, SPEC_CMDS},
    [CL_O_REQUEST] = {"request", false, BIT(CL_CMD_EXPLAIN)},
    [CL_O_VISIBILITY] = {"visibility", true, BIT(CL_CMD_MODEL_ADD)},
};

typedef struct cmd_def {
    const char *name;
    int min_pos, max_pos;
    const char *usage;
} cmd_def;

static const cmd_def cmds[CL_CMD_COUNT] = {
    [CL_CMD_NONE] = {"", 0, 0, NULL},
    [CL_CMD_LOGIN] = {"login", 1, 1,
                      "usage: fusionbench login URL [--token-stdin]\n"
                      "Checks an API token against the server at URL and saves both in\n"
                      "$XDG_CONFIG_HOME/fusionbench/config.json (mode 0600).  The token is read\n"
                      "from stdin: prompted for without echo on a terminal, else one line.\n"},
    [CL_CMD_LOGOUT] = {"logout", 0, 0,
                       "usage: fusionbench logout\nRemoves the saved server URL and token.\n"},
    [CL_CMD_SUBMIT] =
        {"submit", 1, 1,
         "usage: fusionbench submit WORKLOAD [--variants a,b] [--engine E] [--device D]\n"
         "         [--dtype T] [--batch-size N] [--iterations N] [--warmup N]\n"
         "         [--param k=v ...] [--param k:=JSON ...] [--label k=v ...]\n"
         "         [--priority N] [--timeout S] [--explain] [--wait] [--json]\n"
         "Queues a job and prints its id; --wait follows it to the end and prints\n"
         "its result table.  --param values are numbers, true/false or strings;\n"
         "k:=JSON sets any JSON value.  --explain: also explain every fusion group.\n"
         "Your own model (fusionbench model add): WORKLOAD model:NAME, model:OWNER/NAME\n"
         "or model.ID, run by the inductor engine (eager against torch.compile), or by\n"
         "the native engine with --engine native (its eager output checked against\n"
         "PyTorch's); --batch-size any size where the export's batch is dynamic.\n"},
    [CL_CMD_STATUS] = {"status", 1, 1,
                       "usage: fusionbench status ID [--wait] [--json]\n"
                       "Shows a job (its result table once finished); --wait follows it.\n"},
    [CL_CMD_CANCEL] = {"cancel", 1, 1,
                       "usage: fusionbench cancel ID [--json]\n"
                       "Cancels a queued or running job.\n"},
    [CL_CMD_JOBS] =
        {"jobs", 0, 0,
         "usage: fusionbench jobs [--all] [--state S] [--workload W] [--limit N] [--json]\n"
         "Lists your jobs, newest first (--all: everyone's).\n"},
    [CL_CMD_RESULTS] = {"results", 0, 0,
                        "usage: fusionbench results [--workload W] [--device D] [--variant V]\n"
                        "         [--limit N] [--json]\n"
                        "The latest point of each result series.\n"},
    [CL_CMD_COMPARE] =
        {"compare", 2, 2,
         "usage: fusionbench compare A B [--json]\n"
         "Compares two jobs (IDs, or job:ID) or two suites (suite:ID), A before B.\n"},
    [CL_CMD_SUITE_SUBMIT] =
        {"suite submit", 2, CL_MAX_POS,
         "usage: fusionbench suite submit NAME WORKLOAD... [--batch-sizes 1,8]\n"
         "         [--variants a,b] [--engine E] [--device D] [--dtype T]\n"
         "         [--iterations N] [--warmup N] [--param k=v ...]\n"
         "         [--label k=v ...] [--priority N] [--explain] [--wait] [--json]\n"
         "Queues one job per workload and batch size; a WORKLOAD may be a\n"
         "domain (pattern, vision, ...), all, or your own model:NAME.\n"
         "--explain: explain every job's fusions; the suite's summary adds them up.\n"},
    [CL_CMD_SUITE_SHOW] = {"suite show", 1, 1,
                           "usage: fusionbench suite show ID [--json]\nShows a suite's jobs and "
                           "summary.\n"},
    [CL_CMD_WORKERS] = {"workers", 0, 0,
                        "usage: fusionbench workers [--json]\nLists the workers.\n"},
    [CL_CMD_WORKLOADS] = {"workloads", 0, 0,
                          "usage: fusionbench workloads [--json]\nLists the workload catalog.\n"},
    [CL_CMD_EXPLAIN] =
        {"explain", 1, 1,
         "usage: fusionbench explain ID [--request] [--wait] [--json]\n"
         "Shows why each fusion group of job ID won or lost (docs/EXPLAIN.md).\n"
         "--request queues a job that explains it first; --wait follows that job.\n"},
    [CL_CMD_MODEL_ADD] =
        {"model add", 2, 2,
         "usage: fusionbench model add NAME FILE [--visibility private|lab] [--json]\n"
         "Uploads FILE, a model exported with torch.export.save (.pt2), as your model\n"
         "NAME, with a progress bar; prints its id.  private (the default): only you\n"
         "and admins see it; lab: everyone signed in.  The same bytes are stored once.\n"
         "A worker then reads it (fusionbench model show ID: preparing, then ready or\n"
         "invalid with why); then fusionbench submit model:NAME [--engine native].\n"
         "Inputs of your own go into the archive with the Python client\n"
         "(upload_model(..., inputs={\"x\": x})); without them jobs run on seeded ones.\n"},
    [CL_CMD_MODEL_LIST] = {"model list", 0, 0,
                           "usage: fusionbench model list [--json]\n"
                           "Lists the models you may use: yours and the lab's.\n"},
    [CL_CMD_MODEL_SHOW] = {"model show", 1, 1,
                           "usage: fusionbench model show ID [--json]\nShows one model.\n"},
    [CL_CMD_MODEL_RM] = {"model rm", 1, 1,
                         "usage: fusionbench model rm ID\n"
                         "Deletes one of your models (an admin: anyone's).\n"},
    [CL_CMD_MODEL_GET] = {"model get", 2, 2,
                          "usage: fusionbench model get ID FILE\n"
                          "Downloads a model's archive into FILE (not overwriting one) and\n"
                          "checks its SHA-256.\n"},
};

static const char usage_all[] =
    "usage: fusionbench [--server URL] [--json] COMMAND [ARGS]\n"
    "commands:\n"
    "  login URL                 save a server and an API token (read from stdin)\n"
    "  logout                    forget them\n"
    "  submit WORKLOAD [...]     queue a job (--wait: follow it, print its table)\n"
    "  status ID [--wait]        show a job\n"
    "  cancel ID                 cancel a job\n"
    "  jobs [--all] [...]        list your jobs\n"
    "  results [...]             latest result of each series\n"
    "  compare A B               compare two jobs or suites\n"
    "  suite submit NAME W...    queue a suite;  suite show ID: show one\n"
    "  workers, workloads        list the workers, the workload catalog\n"
    "  explain ID [--request]    why each fusion group of a job won or lost\n"
    "  model add NAME FILE       upload your own model (torch.export .pt2);\n"
    "  model list|show ID|rm ID|get ID FILE   your models and the lab's\n"
    "Server: --server, else $FUSIONBENCH_URL, else the saved login's, else\n"
    "http://127.0.0.1:8080.  Token: $FUSIONBENCH_TOKEN, else the saved login's.\n"
    "--json prints the server's JSON answer and nothing else on stdout.\n"
    "Exit status: 0 ok, 1 the job or a variant failed or was canceled, 2 bad usage,\n"
    "3 the server refused, failed or could not be reached, 130 interrupted.\n"
    "fusionbench COMMAND --help shows a command's options.\n";

const char *cl_cmd_name(cl_cmd cmd)
{
    return cmd < CL_CMD_COUNT ? cmds[cmd].name : "";
}

const char *cl_usage(cl_cmd cmd)
{
    return cmd > CL_CMD_NONE && cmd < CL_CMD_COUNT ? cmds[cmd].usage : usage_all;
}

static cl_cmd find_cmd(const char *word)
{
    for (int c = CL_CMD_LOGIN; c < CL_CMD_COUNT; c++) {
        if (!strchr(cmds[c].name, ' ') && strcmp(cmds[c].name, word) == 0)
            return (cl_cmd)c;
    }
    return CL_CMD_NONE;
}

static int find_opt(const char *name, size_t len)
{
    for (int o = 0; o < CL_O_COUNT; o++) {
        if (strlen(opts[o].name) == len && strncmp(opts[o].name, name, len) == 0)
            return o;
    }
    return -1;
}

/* The commands of two words ("suite submit") whose first word is group, as
 * "submit, show" in buf. */
static const char *subcommands(const char *group, char *buf, size_t cap)
{
    size_t n = strlen(group), len = 0;
    buf[0] = '\0';
    for (int c = CL_CMD_LOGIN; c < CL_CMD_COUNT; c++)
        if (strncmp(cmds[c].name, group, n) == 0 && cmds[c].name[n] == ' ' && len < cap)
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? ", " : "",
                                    cmds[c].name + n + 1);
    return buf;
}

/* A positional word: the command (and a group's subcommand: suite, model)
 * first, then arguments.  *group is the first word of a command of two. */
static fb_code take_word(cl_args *a, const char *w, const char **group, fb_err *err)
{
    char subs[96];
    if (*group) {
        for (int c = CL_CMD_LOGIN; c < CL_CMD_COUNT; c++) {
            size_t n = strlen(*group);
            if (strncmp(cmds[c].name, *group, n) == 0 && cmds[c].name[n] == ' ' &&
                strcmp(cmds[c].name + n + 1, w) == 0)
                a->cmd = (cl_cmd)c;
        }
        if (a->cmd == CL_CMD_NONE)
            return fb_err_set(err, FB_EINVAL, *group, "unknown %s command '%s' (%s)", *group, w,
                              subcommands(*group, subs, sizeof subs));
        *group = NULL;
        return FB_OK;
    }
    if (a->cmd == CL_CMD_NONE) {
        if (strcmp(w, "suite") == 0 || strcmp(w, "model") == 0) {
            *group = strcmp(w, "suite") == 0 ? "suite" : "model";
            return FB_OK;
        }
        a->cmd = find_cmd(w);
        if (a->cmd == CL_CMD_NONE)
            return fb_err_set(err, FB_EINVAL, w, "unknown command");
        return FB_OK;
    }
    if (a->n_pos >= CL_MAX_POS)
        return fb_err_set(err, FB_EINVAL, w, "too many arguments (at most %d)", CL_MAX_POS);
    a->pos[a->n_pos++] = w;
    return FB_OK;
}

/* "--name" or "--name=value"; a value may be the next word.  *i is advanced
 * past what was used. */
static fb_code take_opt(cl_args *a, int argc, char **argv, int *i, fb_err *err)
{
    const char *arg = argv[*i], *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    int o = strcmp(arg, "-h") == 0 ? CL_O_HELP : find_opt(name, len);
    const char *val = NULL;

    if (o < 0 || (arg[1] != '-' && o != CL_O_HELP))
        return fb_err_set(err, FB_EINVAL, arg, "unknown option");
    if (opts[o].has_arg) {
        if (eq)
            val = eq + 1;
        else if (*i + 1 < argc)
            val = argv[++*i];
        else
            return fb_err_set(err, FB_EINVAL, arg, "needs a value");
    } else if (eq) {
        return fb_err_set(err, FB_EINVAL, arg, "takes no value");
    }
    a->set[o] = true;
    a->val[o] = val;
    if (o == CL_O_PARAM || o == CL_O_LABEL) {
        int k = o == CL_O_PARAM ? 0 : 1;
        if (a->n_multi[o] >= CL_MAX_MULTI)
            return fb_err_set(err, FB_EINVAL, arg, "given more than %d times", CL_MAX_MULTI);
        a->multi[k][a->n_multi[o]++] = val;
    }
    return FB_OK;
}

/* Every option given must be one the command takes; then the positionals' count. */
static fb_code check_cmd(const cl_args *a, fb_err *err)
{
    const cmd_def *c = &cmds[a->cmd];

    for (int o = 0; o < CL_O_COUNT; o++) {
        if (a->set[o] && !(opts[o].cmds & BIT(a->cmd))) {
            if (a->cmd == CL_CMD_NONE)
                return fb_err_set(err, FB_EINVAL, opts[o].name, "--%s needs a command",
                                  opts[o].name);
            return fb_err_set(err, FB_EINVAL, opts[o].name, "--%s is not an option of %s",
                              opts[o].name, c->name);
        }
    }
    if (a->set[CL_O_HELP] || a->set[CL_O_VERSION])
        return FB_OK;
    if (a->cmd == CL_CMD_NONE)
        return fb_err_set(err, FB_EINVAL, "", "no command given");
    if (a->n_pos < c->min_pos)
        return fb_err_set(err, FB_EINVAL, c->name, "%s needs %d argument%s, got %d", c->name,
                          c->min_pos, c->min_pos > 1 ? "s" : "", a->n_pos);
    if (a->n_pos > c->max_pos)
        return fb_err_set(err, FB_EINVAL, a->pos[c->max_pos], "unexpected argument to %s", c->name);
    return FB_OK;
}

fb_code cl_args_parse(int argc, char **argv, cl_args *a, fb_err *err)
{
    const char *group = NULL;
    bool words_only = false;
    char subs[96];
    fb_code rc = FB_OK;

    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc && rc == FB_OK; i++) {
        const char *w = argv[i];
        if (!words_only && strcmp(w, "--") == 0)
            words_only = true;
        else if (!words_only && w[0] == '-' && w[1] != '\0')
            rc = take_opt(a, argc, argv, &i, err);
        else
            rc = take_word(a, w, &group, err);
    }
    if (rc == FB_OK && group && !a->set[CL_O_HELP])
        rc = fb_err_set(err, FB_EINVAL, group, "%s needs a command (%s)", group,
                        subcommands(group, subs, sizeof subs));
    return rc ? rc : check_cmd(a, err);
}

fb_code cl_args_int(const cl_args *a, cl_opt o, int lo, int hi, int *out, fb_err *err)
{
    if (fb_parse_int(a->val[o], lo, hi, out))
        return FB_OK;
    return fb_err_set(err, FB_EINVAL, opts[o].name, "--%s: expected an integer in %d..%d, got '%s'",
                      opts[o].name, lo, hi, a->val[o]);
}

/* A decimal JSON-like number: digits, sign, point, exponent only, finite. */
static bool parse_number(const char *s, double *out)
{
    char *end = NULL;

    if (!*s || strspn(s, "0123456789+-.eE") != strlen(s))
        return false;
    errno = 0;
    *out = strtod(s, &end);
    return errno == 0 && end && *end == '\0' && isfinite(*out);
}

static fb_code put(cJSON *obj, const char *key, cJSON *v, fb_err *err)
{
    if (!v)
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
    if (!cJSON_AddItemToObject(obj, key, v)) {
        cJSON_Delete(v);
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    }
    return FB_OK;
}

fb_code cl_param_set(cJSON *params, const char *kv, fb_err *err)
{
    const char *eq = strchr(kv, '=');
    bool is_json = eq && eq > kv && eq[-1] == ':';
    size_t klen = eq ? (size_t)(eq - kv) - (is_json ? 1 : 0) : 0;
    char key[128];
    double num;
    cJSON *v;

    if (!eq || klen == 0 || klen >= sizeof key)
        return fb_err_set(err, FB_EINVAL, "param",
                          "--param: expected key=value or key:=JSON, got '%s'", kv);
    memcpy(key, kv, klen);
    key[klen] = '\0';
    const char *s = eq + 1;
    if (is_json) {
        v = cJSON_ParseWithOpts(s, NULL, true);
        if (!v)
            return fb_err_set(err, FB_EINVAL, "param", "--param %s: '%s' is not JSON", key, s);
    } else if (parse_number(s, &num)) {
        v = cJSON_CreateNumber(num);
    } else if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
        v = cJSON_CreateBool(s[0] == 't');
    } else {
        v = cJSON_CreateString(s);
    }
    return put(params, key, v, err);
}

static fb_code set_label(cJSON *labels, const char *kv, fb_err *err)
{
    const char *eq = strchr(kv, '=');
    char key[128];

    if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof key)
        return fb_err_set(err, FB_EINVAL, "label", "--label: expected key=value, got '%s'", kv);
    memcpy(key, kv, (size_t)(eq - kv));
    key[eq - kv] = '\0';
    return put(labels, key, cJSON_CreateString(eq + 1), err);
}

/* "a,b" → ["a", "b"] (strings) or [1, 8] (ints in lo..hi when ints). */
static fb_code split_list(const char *s, cl_opt o, bool ints, int lo, int hi, int max_items,
                          cJSON **out, fb_err *err)
{
    cJSON *arr = cJSON_CreateArray();
    char item[128];
    int n = 0, iv;

    *out = NULL;
    if (!arr)
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    for (const char *p = s;; p++) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item || ++n > max_items) {
            cJSON_Delete(arr);
            return fb_err_set(err, FB_EINVAL, opts[o].name,
                              "--%s: expected a comma-separated list of at most %d items, got '%s'",
                              opts[o].name, max_items, s);
        }
        memcpy(item, p, len);
        item[len] = '\0';
        if (ints && !fb_parse_int(item, lo, hi, &iv)) {
            cJSON_Delete(arr);
            return fb_err_set(err, FB_EINVAL, opts[o].name,
                              "--%s: expected integers in %d..%d, got '%s'", opts[o].name, lo, hi,
                              item);
        }
        cJSON_AddItemToArray(arr, ints ? cJSON_CreateNumber(iv) : cJSON_CreateString(item));
        p += len;
        if (*p == '\0')
            break;
    }
    *out = arr;
    return FB_OK;
}

typedef struct int_field {
    cl_opt opt;
    const char *key;
    int lo, hi;
} int_field;

/* The members a job spec and a suite share; obj gets those that were given. */
static fb_code common_fields(const cl_args *a, cJSON *obj, fb_err *err)
{
    static const struct {
        cl_opt opt;
        const char *key;
    } strs[] = {{CL_O_ENGINE, "engine"}, {CL_O_DEVICE, "device"}, {CL_O_DTYPE, "dtype"}};
    static const int_field ints[] = {{CL_O_ITERATIONS, "iterations", 1, 100000},
                                     {CL_O_WARMUP, "warmup", 0, 10000},
                                     {CL_O_PRIORITY, "priority", -100, 100},
                                     {CL_O_BATCH_SIZE, "batch_size", 1, 65536},
                                     {CL_O_TIMEOUT, "timeout_s", 1, 86400}};
    fb_code rc = FB_OK;
    cJSON *v = NULL;
    int n;

    for (size_t i = 0; rc == FB_OK && i < sizeof strs / sizeof strs[0]; i++) {
        if (a->set[strs[i].opt])
            rc = put(obj, strs[i].key, cJSON_CreateString(a->val[strs[i].opt]), err);
    }
    for (size_t i = 0; rc == FB_OK && i < sizeof ints / sizeof ints[0]; i++) {
        if (!a->set[ints[i].opt])
            continue;
        rc = cl_args_int(a, ints[i].opt, ints[i].lo, ints[i].hi, &n, err);
        if (rc == FB_OK)
            rc = put(obj, ints[i].key, cJSON_CreateNumber(n), err);
    }
    if (rc == FB_OK && a->set[CL_O_VARIANTS]) {
        rc = split_list(a->val[CL_O_VARIANTS], CL_O_VARIANTS, false, 0, 0, 8, &v, err);
        if (rc == FB_OK)
            rc = put(obj, "variants", v, err);
    }
    if (rc == FB_OK && a->n_multi[CL_O_PARAM] > 0) {
        cJSON *params = cJSON_CreateObject();
        rc = put(obj, "params", params, err);
        for (int i = 0; rc == FB_OK && i < a->n_multi[CL_O_PARAM]; i++)
            rc = cl_param_set(params, a->multi[0][i], err);
    }
    if (rc == FB_OK && a->n_multi[CL_O_LABEL] > 0) {
        cJSON *labels = cJSON_CreateObject();
        rc = put(obj, "labels", labels, err);
        for (int i = 0; rc == FB_OK && i < a->n_multi[CL_O_LABEL]; i++)
            rc = set_label(labels, a->multi[1][i], err);
    }
    return rc;
}

fb_code cl_args_job_spec(const cl_args *a, cJSON **out, fb_err *err)
{
    cJSON *spec = cJSON_CreateObject();
    fb_code rc = spec ? put(spec, "workload", cJSON_CreateString(a->pos[0]), err)
                      : fb_err_set(err, FB_ENOMEM, NULL, "out of memory");

    if (rc == FB_OK)
        rc = common_fields(a, spec, err);
    if (rc == FB_OK && a->set[CL_O_EXPLAIN])
        rc = put(spec, "explain", cJSON_CreateTrue(), err);
    if (rc) {
        cJSON_Delete(spec);
        spec = NULL;
    }
    *out = spec;
    return rc;
}

fb_code cl_args_suite(const cl_args *a, cJSON **out, fb_err *err)
{
    cJSON *suite = cJSON_CreateObject(), *w = cJSON_CreateArray(), *bs = NULL;
    fb_code rc = suite && w ? put(suite, "name", cJSON_CreateString(a->pos[0]), err)
                            : fb_err_set(err, FB_ENOMEM, NULL, "out of memory");

    for (int i = 1; rc == FB_OK && i < a->n_pos; i++) {
        if (!cJSON_AddItemToArray(w, cJSON_CreateString(a->pos[i])))
            rc = fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    }
    if (rc == FB_OK) {
        rc = put(suite, "workloads", w, err);
        w = NULL;
    }
    if (rc == FB_OK && a->set[CL_O_BATCH_SIZES]) {
        rc = split_list(a->val[CL_O_BATCH_SIZES], CL_O_BATCH_SIZES, true, 1, 65536, 16, &bs, err);
        if (rc == FB_OK)
            rc = put(suite, "batch_sizes", bs, err);
    }
    if (rc == FB_OK)
        rc = common_fields(a, suite, err);
    if (rc == FB_OK && a->set[CL_O_EXPLAIN]) /* copied into every job */
        rc = put(suite, "explain", cJSON_CreateTrue(), err);
    cJSON_Delete(w);
    if (rc) {
        cJSON_Delete(suite);
        suite = NULL;
    }
    *out = suite;
    return rc;
}

fb_code cl_compare_ref(const char *arg, char *out, size_t cap, fb_err *err)
{
    const char *colon = strchr(arg, ':');
    const char *kind = "job", *id = arg;

    if (colon) {
        size_t klen = (size_t)(colon - arg);
        if (klen == 3 && strncmp(arg, "job", 3) == 0)
            kind = "job";
        else if (klen == 5 && strncmp(arg, "suite", 5) == 0)
            kind = "suite";
        else
            kind = NULL;
        id = colon + 1;
    }
    if (!kind || !cl_id_valid(id))
        return fb_err_set(err, FB_EINVAL, arg, "expected a job id, job:ID or suite:ID");
    snprintf(out, cap, "%s:%s", kind, id);
    return FB_OK;
}

bool cl_id_valid(const char *s)
{
    size_t n = strspn(s, "0123456789");
    return n > 0 && n <= 18 && s[n] == '\0' && s[0] != '0';
}
