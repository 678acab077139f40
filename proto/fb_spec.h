/* fb_spec: the job spec of docs/API.md (POST /api/v1/jobs), decoded, validated and
 * encoded with cJSON.
 *
 * Decoding is strict: unknown top-level fields, wrong types and out-of-range
 * values are errors that name the field as a JSON path ("variants[1]",
 * "labels.project").  Defaults are filled by fb_spec_apply_defaults, not by
 * decode, so a stored spec always shows what actually ran. */
#ifndef FB_SPEC_H
#define FB_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "fb_err.h"

#define FB_NAME_MAX       64 /* workload, engine, device, dtype, variant names */
#define FB_MAX_VARIANTS   8
#define FB_MAX_LABELS     16
#define FB_LABEL_MAX      128 /* a label key or value */
#define FB_MAX_ITERATIONS 100000
#define FB_MAX_WARMUP     10000
#define FB_MAX_BATCH      65536
#define FB_SPEC_JSON_MAX  (64 * 1024) /* encoded spec, params included */
#define FB_JSON_MAX_DEPTH 16
/* Largest magnitude of a number in params: cJSON prints a double with 15
 * significant digits when that reads back within its tolerance, and next to
 * DBL_MAX the 15-digit text (1.79769313486232e+308) reads back as infinity, so
 * a value that close would be stored as null. */
#define FB_PARAM_NUM_MAX 1e308

typedef struct fb_label {
    char key[FB_LABEL_MAX];
    char value[FB_LABEL_MAX];
} fb_label;

typedef struct fb_spec {
    char workload[FB_NAME_MAX]; /* required: [a-z0-9_+.-]{1,63} */
    char engine[FB_NAME_MAX];   /* "" until defaults: "native" */
    char device[FB_NAME_MAX];   /* "" until defaults: "cpu" or "cuda" */
    char dtype[FB_NAME_MAX];    /* "" until defaults: "float32"; float32|float16|bfloat16 */
    int batch_size;             /* 0 until defaults: the workload's default; 1..FB_MAX_BATCH */
    int n_variants;             /* 0 until defaults: the engine's standard variants */
    char variants[FB_MAX_VARIANTS][FB_NAME_MAX]; /* distinct names */
    cJSON *params;                               /* owned; a JSON object, never NULL after decode */
    int warmup;                                  /* -1 until defaults: 10; 0..FB_MAX_WARMUP */
    int iterations;                              /* 0 until defaults: 50; 1..FB_MAX_ITERATIONS */
    int priority;                                /* -100..100, higher runs first; default 0 */
    int timeout_s;                               /* 0 until defaults: 600; 1..86400, whole job */
    int max_attempts;                            /* 0 until defaults: 3; 1..10 */
    int n_labels;
    fb_label labels[FB_MAX_LABELS];
    bool explain; /* also explain every fusion group (docs/EXPLAIN.md); default false */
} fb_spec;

/* Initializes a spec to "nothing set" (the sentinels above). */
void fb_spec_init(fb_spec *spec);

/* The least memory a job of spec needs, for a workload of domain ("vision",
 * "test", "nlp", "speech"): its input tensors, or for "nlp" the embedding
 * output every transformer makes, from the batch size, the dtype and the
 * params that size them (image_size; seq_len and hidden; mel_frames or
 * audio_s), each missing param at the smallest default of the zoo's models of
 * that domain.  0 for domains whose inputs are not modelled (patterns,
 * graphs).  A floor, not a forecast: admission refuses a job that cannot fit
 * (srv_catalog), the worker's memory cap fails one that does not. */
double fb_spec_input_bytes(const fb_spec *spec, const char *domain);

/* Frees what the spec owns (params); the struct itself is the caller's. */
void fb_spec_free(fb_spec *spec);

/* Parses text (len bytes, need not be NUL-terminated) as a job spec.
 * FB_EJSON when the text is not JSON, FB_EINVAL (err->field set) when a field is
 * wrong, FB_ETOOBIG over FB_SPEC_JSON_MAX or FB_JSON_MAX_DEPTH.
 * On error the spec is left initialized and owns nothing. */
FB_MUSTCHECK fb_code fb_spec_parse(const char *text, size_t len, fb_spec *spec, fb_err *err);

/* Parses a request body from outside (len bytes, need not be NUL-terminated)
 * the way fb_spec_parse does before it reads fields: FB_EJSON when it is not
 * exactly one JSON value (raw control characters, trailing text), FB_ETOOBIG
 * when brackets nest past twice FB_JSON_MAX_DEPTH, FB_EINVAL when a string or
 * key holds \u0000 (cJSON's strings end there and jsonb refuses it, so it
 * would be cut short).  *out is the tree, or NULL with err set. */
FB_MUSTCHECK fb_code fb_json_parse_body(const char *text, size_t len, cJSON **out, fb_err *err);

/* The same from an already-parsed object (not consumed). */
FB_MUSTCHECK fb_code fb_spec_from_json(const cJSON *obj, fb_spec *spec, fb_err *err);

/* Fills unset fields: engine "native", device default_device, dtype "float32",
 * warmup 10, iterations 50, timeout 600, max_attempts 3; batch_size and variants
 * from the given defaults (default_variants is NULL-terminated).  Applied once,
 * where a job is made: the server at submit (srv_catalog_resolve, whose spec is
 * what the queue stores), fusionbench-run for its own. */
void fb_spec_apply_defaults(fb_spec *spec, const char *default_device, int default_batch,
                            const char *const *default_variants);

/* The params that name a file (params.weights, params.input): NULL-terminated.
 * A job spec is outside input and must never name a file on a host: such a
 * param names a file inside the worker's weights folder (gr_files.h), by a
 * relative name of at most FB_FILE_NAME_MAX bytes of letters, digits, '.',
 * '_', '-' and '/', no component empty or starting with '.' (so no "..", no
 * hidden file, no absolute path, no NUL). */
#define FB_FILE_NAME_MAX 255
extern const char *const fb_spec_file_params[];

/* FB_OK when name has that form, else FB_EINVAL on field with the one message
 * that says the form (the server at submit, the worker where it opens it). */
FB_MUSTCHECK fb_code fb_spec_check_file_name(const char *name, const char *field, fb_err *err);

/* FB_EINVAL naming the first file param of spec->params ("params.weights")
 * that is not a string of that form; FB_OK when none is set or all are. */
FB_MUSTCHECK fb_code fb_spec_check_files(const fb_spec *spec, fb_err *err);

/* params.unfuse names fusions to leave undone, at most FB_UNFUSE_MAX distinct
 * ids, in the form of spec->engine's ids: the inductor engine's are strings
 * "fuse-" or "group-" and 12 lowercase hex digits (worker/engine/inductor/
 * decisions.py), the native engine's fusion group numbers (integers 0..1e6).
 * FB_EINVAL naming "params.unfuse" or "params.unfuse[i]"; FB_OK when unset.
 * Call once spec->engine is known (the server at submit). */
#define FB_UNFUSE_MAX 64
FB_MUSTCHECK fb_code fb_spec_check_unfuse(const fb_spec *spec, fb_err *err);

/* FB_OK when every field fb_spec_apply_defaults fills is set (a spec as the
 * queue stores it); else FB_EINVAL naming the first unset field.  The worker
 * runs only such specs: it applies no defaults of its own. */
FB_MUSTCHECK fb_code fb_spec_check_resolved(const fb_spec *spec, fb_err *err);

/* Encodes every field (unset ones as their sentinel is never emitted: call after
 * defaults).  Returns a new cJSON object the caller deletes, or NULL on ENOMEM. */
cJSON *fb_spec_to_json(const fb_spec *spec);

/* Looks up a label value or returns NULL. */
const char *fb_spec_label(const fb_spec *spec, const char *key);

/* Integer param with default and range check; FB_EINVAL names "params.<key>". */
FB_MUSTCHECK fb_code fb_spec_param_int(const fb_spec *spec, const char *key, int64_t def,
                                       int64_t lo, int64_t hi, int64_t *out, fb_err *err);
/* Boolean param with default. */
FB_MUSTCHECK fb_code fb_spec_param_bool(const fb_spec *spec, const char *key, bool def, bool *out,
                                        fb_err *err);

/* An uploaded model as a workload (docs/API-EXTENSIONS.md, "Your own models"):
 * submitted as "model:NAME" or "model:OWNER/NAME", stored as "model.<id>". */
#define FB_MODEL_REF_PREFIX "model:"

/* True when workload is a model reference "model:[OWNER/]NAME"; owner ("" when
 * not given) and name are copied out. */
bool fb_model_ref_parse(const char *workload, char owner[FB_NAME_MAX], char name[FB_NAME_MAX]);

/* True when s is a valid name for workload/engine/device/dtype/variant. */
bool fb_name_valid(const char *s);

/* True when s is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
bool fb_utf8_valid(const char *s);
/* Bytes of s's longest well-formed UTF-8 prefix. */
size_t fb_utf8_prefix(const char *s);
/* Makes s well-formed UTF-8 in place: each byte that starts no valid sequence
 * (a message cut inside a character, client bytes) becomes '?'. */
void fb_utf8_mend(char *s);

#endif
