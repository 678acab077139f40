/* cl_args: the fusionbench command line, parsed into a command, its
 * positionals and its options, checked against what each command takes; and
 * the request bodies built from it (a job spec, a suite).  Pure: no I/O. */
#ifndef CL_ARGS_H
#define CL_ARGS_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "fb_err.h"

#define CL_MAX_POS   64 /* positionals (suite submit's workloads) */
#define CL_MAX_MULTI 64 /* repeats of --param / --label */

typedef enum cl_cmd {
    CL_CMD_NONE, /* --help / --version alone */
    CL_CMD_LOGIN,
    CL_CMD_LOGOUT,
    CL_CMD_SUBMIT,
    CL_CMD_STATUS,
    CL_CMD_CANCEL,
    CL_CMD_JOBS,
    CL_CMD_RESULTS,
    CL_CMD_COMPARE,
    CL_CMD_SUITE_SUBMIT,
    CL_CMD_SUITE_SHOW,
    CL_CMD_WORKERS,
    CL_CMD_WORKLOADS,
    CL_CMD_EXPLAIN,
    CL_CMD_MODEL_ADD,
    CL_CMD_MODEL_LIST,
    CL_CMD_MODEL_SHOW,
    CL_CMD_MODEL_RM,
    CL_CMD_MODEL_GET,
    CL_CMD_COUNT
} cl_cmd;

typedef enum cl_opt {
    CL_O_JSON,
    CL_O_SERVER,
    CL_O_HELP,
    CL_O_VERSION,
    CL_O_VARIANTS,
    CL_O_ENGINE,
    CL_O_DEVICE,
    CL_O_DTYPE,
    CL_O_BATCH_SIZE,
    CL_O_BATCH_SIZES,
    CL_O_ITERATIONS,
    CL_O_WARMUP,
    CL_O_PARAM,
    CL_O_LABEL,
    CL_O_PRIORITY,
    CL_O_TIMEOUT,
    CL_O_WAIT,
    CL_O_ALL,
    CL_O_STATE,
    CL_O_WORKLOAD,
    CL_O_LIMIT,
    CL_O_VARIANT,
    CL_O_TOKEN_STDIN,
    CL_O_EXPLAIN,    /* submit: "explain": true */
    CL_O_REQUEST,    /* explain: ask for one first */
    CL_O_VISIBILITY, /* model add */
    CL_O_COUNT
} cl_opt;

/* Strings point into argv (not owned). */
typedef struct cl_args {
    cl_cmd cmd;
    int n_pos;
    const char *pos[CL_MAX_POS];
    bool set[CL_O_COUNT];
    const char *val[CL_O_COUNT];        /* last value of a valued option */
    int n_multi[CL_O_COUNT];            /* --param, --label: every value */
    const char *multi[2][CL_MAX_MULTI]; /* [0] params, [1] labels */
} cl_args;

/* Parses argv (argv[0] is the program).  FB_EINVAL with err->field set to the
 * bad flag or argument and a message fit for the user; args->cmd is set as far
 * as it was read, so the caller can print that command's usage. */
FB_MUSTCHECK fb_code cl_args_parse(int argc, char **argv, cl_args *args, fb_err *err);

/* The command's name as typed ("suite submit"), "" for CL_CMD_NONE. */
const char *cl_cmd_name(cl_cmd cmd);

/* The usage text of one command, or of all (CL_CMD_NONE). */
const char *cl_usage(cl_cmd cmd);

/* Parses a whole int option value in [lo, hi]; FB_EINVAL naming the flag. */
FB_MUSTCHECK fb_code cl_args_int(const cl_args *args, cl_opt opt, int lo, int hi, int *out,
                                 fb_err *err);

/* One --param value: "k=v" (v a JSON number when all of it parses as one,
 * true/false, else a string) or "k:=JSON" (any JSON value), set into params.
 * FB_EINVAL (field "--param") on an empty key or bad JSON. */
FB_MUSTCHECK fb_code cl_param_set(cJSON *params, const char *kv, fb_err *err);

/* The job spec of submit (POST /api/v1/jobs).  *out is the caller's to delete. */
FB_MUSTCHECK fb_code cl_args_job_spec(const cl_args *args, cJSON **out, fb_err *err);

/* The body of suite submit (POST /api/v1/suites). */
FB_MUSTCHECK fb_code cl_args_suite(const cl_args *args, cJSON **out, fb_err *err);

/* A compare side: "42" → "job:42"; "job:42" and "suite:3" as they are.
 * FB_EINVAL on anything else. */
FB_MUSTCHECK fb_code cl_compare_ref(const char *arg, char *out, size_t cap, fb_err *err);

/* True when s is a job or suite id: 1 to 18 decimal digits, no leading zero. */
bool cl_id_valid(const char *s);

#endif
