/* fb_spec: strict decoding, defaults and encoding of the job spec (docs/API.md).
 *
 * Decoding walks the object's members against one table of allowed fields, so an
 * unknown or repeated field is caught where it appears and the error names it.
 * Every string a client sends that we later echo (error messages, the stored
 * spec) is checked or sanitized here: the database stores the spec as jsonb,
 * which refuses invalid UTF-8, and error bodies must stay valid JSON. */
#include "fb_spec.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The text is scanned for bracket depth before cJSON sees it, so cJSON's
 * recursion stays shallow whatever the input.  The scan limit is looser than
 * FB_JSON_MAX_DEPTH so that a modestly deep params gets the precise error
 * ("params" too deep) from the tree walk; beyond it the whole text is refused. */
#define SPEC_SCAN_MAX_DEPTH (2 * FB_JSON_MAX_DEPTH)

/* Params are capped below FB_SPEC_JSON_MAX so that the whole encoded spec (params
 * plus at most ~7 KiB of other fields: 16 labels, 8 variants, names, integers)
 * always fits FB_SPEC_JSON_MAX again: what we accept, we can store and re-read. */
#define SPEC_PARAMS_JSON_MAX (FB_SPEC_JSON_MAX - 8 * 1024)

#define SPEC_TIMEOUT_MAX  86400
#define SPEC_ATTEMPTS_MAX 10
#define SPEC_PRIORITY_MAX 100

static const char *const spec_devices[] = {"cpu", "cuda", NULL};
static const char *const spec_dtypes[] = {"float32", "float16", "bfloat16", NULL};

struct spec_field;
typedef fb_code (*spec_decode_fn)(const struct spec_field *f, const cJSON *item, fb_spec *s,
                                  fb_err *err);

/* One allowed top-level field: its decoder and, for names and integers, where it
 * goes in fb_spec and what it accepts. */
struct spec_field {
    const char *key;
    spec_decode_fn decode;
    size_t off;                 /* offsetof the int or char[FB_NAME_MAX] member */
    int lo, hi;                 /* integer range, inclusive */
    const char *const *allowed; /* names: NULL-terminated set, or NULL for any */
};

static fb_code spec_dec_name(const struct spec_field *f, const cJSON *item, fb_spec *s,
                             fb_err *err);
static fb_code spec_dec_int(const struct spec_field *f, const cJSON *item, fb_spec *s, fb_err *err);
static fb_code spec_dec_variants(const struct spec_field *f, const cJSON *item, fb_spec *s,
                                 fb_err *err);
static fb_code spec_dec_params(const struct spec_field *f, const cJSON *item, fb_spec *s,
                               fb_err *err);
static fb_code spec_dec_labels(const struct spec_field *f, const cJSON *item, fb_spec *s,
                               fb_err *err);
static fb_code spec_dec_bool(const struct spec_field *f, const cJSON *item, fb_spec *s,
                             fb_err *err);

#define SPEC_NAME(k, allow)                                                                        \
    {                                                                                              \
#k, spec_dec_name, offsetof(fb_spec, k), 0, 0, allow                                       \
    }
#define SPEC_INT(k, lo, hi)                                                                        \
    {                                                                                              \
#k, spec_dec_int, offsetof(fb_spec, k), lo, hi, NULL                                       \
    }

/* Keep in step with proto/schema/job_spec.schema.json (tests/unit/test_proto.c
 * checks the property names). */
static fb_code spec_dec_workload(const struct spec_field *f, const cJSON *item, fb_spec *s,
                                 fb_err *err);

static const struct spec_field spec_fields[] = {
    {"workload", spec_dec_workload, offsetof(fb_spec, workload), 0, 0, NULL},
    SPEC_NAME(engine, NULL),
    SPEC_NAME(device, spec_devices),
    SPEC_INT(batch_size, 1, FB_MAX_BATCH),
    SPEC_NAME(dtype, spec_dtypes),
    {"variants", spec_dec_variants, 0, 0, 0, NULL},
    {"params", spec_dec_params, 0, 0, 0, NULL},
    SPEC_INT(warmup, 0, FB_MAX_WARMUP),
    SPEC_INT(iterations, 1, FB_MAX_ITERATIONS),
    SPEC_INT(priority, -SPEC_PRIORITY_MAX, SPEC_PRIORITY_MAX),
    {"labels", spec_dec_labels, 0, 0, 0, NULL},
    SPEC_INT(timeout_s, 1, SPEC_TIMEOUT_MAX),
    SPEC_INT(max_attempts, 1, SPEC_ATTEMPTS_MAX),
    {"explain", spec_dec_bool, offsetof(fb_spec, explain), 0, 0, NULL},
};
#define SPEC_N_FIELDS (sizeof spec_fields / sizeof spec_fields[0])

#define SPEC_ALLOWED_LIST                                                                          \
    "workload, engine, device, batch_size, dtype, variants, params, warmup, iterations, "          \
    "priority, labels, timeout_s, max_attempts, explain"

/* ---- small helpers ---- */

/* Copies client text into out (size n) for use in messages and field paths:
 * printable ASCII kept, anything else becomes '?', truncated with "...". */
static void spec_sanitize(const char *in, char *out, size_t n)
{
    size_t i = 0;
    for (; in[i] && i + 1 < n; i++) {
        unsigned char c = (unsigned char)in[i];
        out[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    out[i] = '\0';
    if (in[i] && n > 4)
        memcpy(out + n - 4, "...", 4);
}

/* Describes a JSON value for "got ..." in messages; returns buf. */
static const char *spec_describe(const cJSON *item, char *buf, size_t n)
{
    if (cJSON_IsNumber(item) && isfinite(item->valuedouble))
        snprintf(buf, n, "%.15g", item->valuedouble);
    else if (cJSON_IsNumber(item))
        snprintf(buf, n, "a number out of range");
    else if (cJSON_IsString(item))
        snprintf(buf, n, "a string");
    else if (cJSON_IsBool(item))
        snprintf(buf, n, "%s", cJSON_IsTrue(item) ? "true" : "false");
    else if (cJSON_IsNull(item))
        snprintf(buf, n, "null");
    else if (cJSON_IsArray(item))
        snprintf(buf, n, "an array");
    else
        snprintf(buf, n, "an object");
    return buf;
}

size_t fb_utf8_prefix(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p, need, min;
        if (c < 0x80) {
            p++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            need = 1, min = 0x80;
        else if (c >= 0xe0 && c <= 0xef)
            need = 2, min = 0x800;
        else if (c >= 0xf0 && c <= 0xf4)
            need = 3, min = 0x10000;
        else
            break;
        unsigned cp = c & (0x3f >> need), k = 1;
        for (; k <= need && (p[k] & 0xc0) == 0x80; k++)
            cp = (cp << 6) | (p[k] & 0x3f);
        if (k <= need || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            break;
        p += need + 1;
    }
    return (size_t)(p - (const unsigned char *)s);
}

bool fb_utf8_valid(const char *s)
{
    return s[fb_utf8_prefix(s)] == '\0';
}

void fb_utf8_mend(char *s)
{
    for (size_t n; s[n = fb_utf8_prefix(s)]; s += n + 1)
        s[n] = '?';
}

bool fb_name_valid(const char *s)
{
    if (!s || !s[0])
        return false;
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (n == 0 || !strchr("_+.-", c)))
            return false;
        if (n + 1 >= FB_NAME_MAX)
            return false;
    }
    return true;
}

/* Joins a NULL-terminated name set as "a, b, c" into buf; returns buf. */
static const char *spec_join(const char *const *names, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; names[i] && used < n; i++) {
        int w = snprintf(buf + used, n - used, "%s%s", i ? ", " : "", names[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return buf;
}

/* Checks that item is a valid name (and in allowed, when given); copies it to out.
 * field is the JSON path used in the error. */
static fb_code spec_get_name(const cJSON *item, const char *field, const char *const *allowed,
                             char out[FB_NAME_MAX], fb_err *err)
{
    char got[32], shown[FB_NAME_MAX + 8], set[64];
    if (!cJSON_IsString(item))
        return fb_err_set(err, FB_EINVAL, field, "%s must be a string, got %s", field,
                          spec_describe(item, got, sizeof got));
    spec_sanitize(item->valuestring, shown, sizeof shown);
    if (!fb_name_valid(item->valuestring))
        return fb_err_set(err, FB_EINVAL, field,
                          "%s must be 1 to %d characters of a-z, 0-9, _, +, ., - starting with "
                          "a letter or digit, got \"%s\"",
                          field, FB_NAME_MAX - 1, shown);
    size_t i = 0;
    while (allowed && allowed[i] && strcmp(allowed[i], item->valuestring) != 0)
        i++;
    if (allowed && !allowed[i])
        return fb_err_set(err, FB_EINVAL, field, "%s must be one of %s, got \"%s\"", field,
                          spec_join(allowed, set, sizeof set), shown);
    snprintf(out, FB_NAME_MAX, "%s", item->valuestring);
    return FB_OK;
}

/* ---- field decoders ---- */

/* A model name or a user name in a model reference: letters, digits, '.',
 * '_', '-', starting with a letter or digit (db_model_name_valid's rule). */
static bool ref_part_valid(const char *s, size_t n)
{
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || !strchr("._-", c)))
            return false;
    }
    return true;
}

bool fb_model_ref_parse(const char *workload, char owner[FB_NAME_MAX], char name[FB_NAME_MAX])
{
    const char *p, *slash;

    if (!workload || strncmp(workload, FB_MODEL_REF_PREFIX, strlen(FB_MODEL_REF_PREFIX)) != 0 ||
        strlen(workload) >= FB_NAME_MAX)
        return false;
    p = workload + strlen(FB_MODEL_REF_PREFIX);
    slash = strchr(p, '/');
    if (slash ? !ref_part_valid(p, (size_t)(slash - p)) ||
                    !ref_part_valid(slash + 1, strlen(slash + 1))
              : !ref_part_valid(p, strlen(p)))
        return false;
    snprintf(owner, FB_NAME_MAX, "%.*s", slash ? (int)(slash - p) : 0, p);
    snprintf(name, FB_NAME_MAX, "%s", slash ? slash + 1 : p);
    return true;
}

/* A workload name, or a reference to an uploaded model (model:NAME,
 * model:OWNER/NAME) that the server resolves to model.<id> at submit. */
static fb_code spec_dec_workload(const struct spec_field *f, const cJSON *item, fb_spec *s,
                                 fb_err *err)
{
    char owner[FB_NAME_MAX], name[FB_NAME_MAX];

    if (cJSON_IsString(item) && fb_model_ref_parse(item->valuestring, owner, name)) {
        snprintf(s->workload, sizeof s->workload, "%s", item->valuestring);
        return FB_OK;
    }
    if (cJSON_IsString(item) &&
        strncmp(item->valuestring, FB_MODEL_REF_PREFIX, strlen(FB_MODEL_REF_PREFIX)) == 0)
        return fb_err_set(err, FB_EINVAL, "workload",
                          "workload: a model is named model:NAME or model:OWNER/NAME (letters, "
                          "digits, ., _, -; at most %d characters in all; else model.ID)",
                          FB_NAME_MAX - 1);
    return spec_dec_name(f, item, s, err);
}

static fb_code spec_dec_name(const struct spec_field *f, const cJSON *item, fb_spec *s, fb_err *err)
{
    return spec_get_name(item, f->key, f->allowed, (char *)s + f->off, err);
}

static fb_code spec_dec_bool(const struct spec_field *f, const cJSON *item, fb_spec *s, fb_err *err)
{
    char got[40];
    if (!cJSON_IsBool(item))
        return fb_err_set(err, FB_EINVAL, f->key, "%s must be true or false, got %s", f->key,
                          spec_describe(item, got, sizeof got));
    *(bool *)((char *)s + f->off) = cJSON_IsTrue(item);
    return FB_OK;
}

static fb_code spec_dec_int(const struct spec_field *f, const cJSON *item, fb_spec *s, fb_err *err)
{
    char got[40];
    double d = item->valuedouble;
    if (!cJSON_IsNumber(item) || !isfinite(d) || d != floor(d) || d < f->lo || d > f->hi)
        return fb_err_set(err, FB_EINVAL, f->key, "%s must be an integer between %d and %d, got %s",
                          f->key, f->lo, f->hi, spec_describe(item, got, sizeof got));
    *(int *)((char *)s + f->off) = (int)d;
    return FB_OK;
}

static fb_code spec_dec_variants(const struct spec_field *f, const cJSON *item, fb_spec *s,
                                 fb_err *err)
{
    char got[32], path[32];
    if (!cJSON_IsArray(item))
        return fb_err_set(err, FB_EINVAL, "variants",
                          "variants must be a non-empty array of names, got %s",
                          spec_describe(item, got, sizeof got));
    int n = cJSON_GetArraySize(item);
    if (n < 1 || n > FB_MAX_VARIANTS)
        return fb_err_set(err, FB_EINVAL, "variants", "variants must hold 1 to %d names, got %d",
                          FB_MAX_VARIANTS, n);
    int i = 0;
    for (const cJSON *v = item->child; v; v = v->next, i++) {
        snprintf(path, sizeof path, "variants[%d]", i);
        fb_code rc = spec_get_name(v, path, NULL, s->variants[i], err);
        if (rc)
            return rc;
        for (int j = 0; j < i; j++)
            if (strcmp(s->variants[j], s->variants[i]) == 0)
                return fb_err_set(err, FB_EINVAL, path, "%s repeats variant \"%s\"", path,
                                  s->variants[i]);
    }
    s->n_variants = n;
    return FB_OK;
}

static int spec_cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* FB_EINVAL when obj repeats a key: cJSON would read the first and PostgreSQL's
 * jsonb keep the last, so the worker and the stored spec would disagree.
 * Sorting keeps it O(n log n) for objects with thousands of keys. */
static fb_code spec_check_unique(const cJSON *obj, fb_err *err)
{
    fb_code rc = FB_OK;
    int n = cJSON_GetArraySize(obj);
    if (n < 2)
        return FB_OK;
    const char **keys = malloc((size_t)n * sizeof *keys);
    if (!keys)
        return fb_err_set(err, FB_ENOMEM, "params", "out of memory checking params");
    int i = 0;
    for (const cJSON *c = obj->child; c && i < n; c = c->next)
        keys[i++] = c->string ? c->string : "";
    qsort(keys, (size_t)i, sizeof *keys, spec_cmp_str);
    for (int k = 1; k < i && !rc; k++) {
        char shown[64];
        spec_sanitize(keys[k], shown, sizeof shown);
        if (strcmp(keys[k - 1], keys[k]) == 0)
            rc = fb_err_set(err, FB_EINVAL, "params", "params repeats the key \"%s\"", shown);
    }
    free(keys);
    return rc;
}

/* Walks a params subtree: depth (the params object is 1), numbers within
 * +/-FB_PARAM_NUM_MAX, UTF-8 keys and strings, unique keys.  Recursion is
 * bounded by FB_JSON_MAX_DEPTH + 1. */
static fb_code spec_check_tree(const cJSON *node, int depth, fb_err *err)
{
    if (cJSON_IsNumber(node) && !(fabs(node->valuedouble) <= FB_PARAM_NUM_MAX))
        return fb_err_set(err, FB_EINVAL, "params",
                          "params holds a number out of range (beyond +/-1e308)");
    if (cJSON_IsString(node) && !fb_utf8_valid(node->valuestring))
        return fb_err_set(err, FB_EINVAL, "params", "params holds a string that is not UTF-8");
    if (!cJSON_IsArray(node) && !cJSON_IsObject(node))
        return FB_OK;
    if (depth > FB_JSON_MAX_DEPTH)
        return fb_err_set(err, FB_ETOOBIG, "params", "params nests deeper than %d levels",
                          FB_JSON_MAX_DEPTH);
    fb_code rc = cJSON_IsObject(node) ? spec_check_unique(node, err) : FB_OK;
    for (const cJSON *c = node->child; c && !rc; c = c->next) {
        if (cJSON_IsObject(node) && (!c->string || !fb_utf8_valid(c->string)))
            return fb_err_set(err, FB_EINVAL, "params", "params holds a key that is not UTF-8");
        rc = spec_check_tree(c, depth + 1, err);
    }
    return rc;
}

/* Size of params as stored (unformatted); SIZE_MAX when it cannot be printed. */
static size_t spec_params_size(const cJSON *params)
{
    char *txt = cJSON_PrintUnformatted(params);
    size_t n = txt ? strlen(txt) : SIZE_MAX;
    cJSON_free(txt);
    return n;
}

static fb_code spec_dec_params(const struct spec_field *f, const cJSON *item, fb_spec *s,
                               fb_err *err)
{
    char got[32];
    if (!cJSON_IsObject(item))
        return fb_err_set(err, FB_EINVAL, "params", "params must be an object, got %s",
                          spec_describe(item, got, sizeof got));
    fb_code rc = spec_check_tree(item, 1, err);
    if (rc)
        return rc;
    size_t n = spec_params_size(item);
    if (n == SIZE_MAX)
        return fb_err_set(err, FB_ENOMEM, "params", "out of memory encoding params");
    if (n > SPEC_PARAMS_JSON_MAX)
        return fb_err_set(err, FB_ETOOBIG, "params", "params is %zu bytes encoded, over %d", n,
                          SPEC_PARAMS_JSON_MAX);
    s->params = cJSON_Duplicate(item, true);
    if (!s->params)
        return fb_err_set(err, FB_ENOMEM, "params", "out of memory copying params");
    return FB_OK;
}

/* Label keys are ASCII words (they appear in ?label=k:v filters, so no ':'). */
static bool spec_label_key_valid(const char *k)
{
    size_t n = strlen(k);
    if (n < 1 || n >= FB_LABEL_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = k[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  strchr("_.-/", c);
        if (!ok)
            return false;
    }
    return true;
}

/* Label values: UTF-8 text without control characters, under FB_LABEL_MAX bytes. */
static bool spec_label_value_valid(const char *v)
{
    size_t n = strlen(v);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
            return false;
    return n < FB_LABEL_MAX && fb_utf8_valid(v);
}

static fb_code spec_dec_label(const cJSON *item, fb_spec *s, fb_err *err)
{
    char shown[64], path[96], got[32];
    spec_sanitize(item->string ? item->string : "", shown, sizeof shown);
    snprintf(path, sizeof path, "labels.%s", shown);
    if (!item->string || !spec_label_key_valid(item->string))
        return fb_err_set(err, FB_EINVAL, path,
                          "label key \"%s\" must be 1 to %d characters of A-Z, a-z, 0-9, _, ., "
                          "-, /",
                          shown, FB_LABEL_MAX - 1);
    if (!cJSON_IsString(item))
        return fb_err_set(err, FB_EINVAL, path, "%s must be a string, got %s", path,
                          spec_describe(item, got, sizeof got));
    if (!spec_label_value_valid(item->valuestring))
        return fb_err_set(err, FB_EINVAL, path,
                          "%s must be UTF-8 text of at most %d bytes without control characters",
                          path, FB_LABEL_MAX - 1);
    if (fb_spec_label(s, item->string))
        return fb_err_set(err, FB_EINVAL, path, "label \"%s\" appears twice", shown);
    fb_label *l = &s->labels[s->n_labels++];
    snprintf(l->key, sizeof l->key, "%s", item->string);
    snprintf(l->value, sizeof l->value, "%s", item->valuestring);
    return FB_OK;
}

static fb_code spec_dec_labels(const struct spec_field *f, const cJSON *item, fb_spec *s,
                               fb_err *err)
{
    char got[32];
    if (!cJSON_IsObject(item))
        return fb_err_set(err, FB_EINVAL, "labels", "labels must be an object, got %s",
                          spec_describe(item, got, sizeof got));
    int n = cJSON_GetArraySize(item);
    if (n > FB_MAX_LABELS)
        return fb_err_set(err, FB_EINVAL, "labels", "labels must hold at most %d entries, got %d",
                          FB_MAX_LABELS, n);
    s->n_labels = 0;
    for (const cJSON *c = item->child; c; c = c->next) {
        fb_code rc = spec_dec_label(c, s, err);
        if (rc)
            return rc;
    }
    return FB_OK;
}

/* ---- public API ---- */

void fb_spec_init(fb_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->warmup = -1;
}

void fb_spec_free(fb_spec *spec)
{
    if (!spec)
        return;
    cJSON_Delete(spec->params);
    spec->params = NULL;
}

/* Finds the table entry for key, or NULL. */
static const struct spec_field *spec_field_find(const char *key)
{
    for (size_t i = 0; i < SPEC_N_FIELDS; i++)
        if (strcmp(spec_fields[i].key, key) == 0)
            return &spec_fields[i];
    return NULL;
}

/* Decodes every member of obj into tmp; tmp may own params on return either way. */
static fb_code spec_decode_members(const cJSON *obj, fb_spec *tmp, fb_err *err)
{
    bool seen[SPEC_N_FIELDS] = {false};
    char shown[FB_ERR_FIELD_MAX];
    for (const cJSON *c = obj->child; c; c = c->next) {
        spec_sanitize(c->string ? c->string : "", shown, sizeof shown);
        const struct spec_field *f = c->string ? spec_field_find(c->string) : NULL;
        if (!f)
            return fb_err_set(err, FB_EINVAL, shown, "unknown field \"%s\" (allowed: %s)", shown,
                              SPEC_ALLOWED_LIST);
        if (seen[f - spec_fields])
            return fb_err_set(err, FB_EINVAL, shown, "field \"%s\" appears twice", shown);
        seen[f - spec_fields] = true;
        fb_code rc = f->decode(f, c, tmp, err);
        if (rc)
            return rc;
    }
    if (!seen[0]) /* spec_fields[0] is workload, the one required field */
        return fb_err_set(err, FB_EINVAL, "workload", "workload is required");
    return FB_OK;
}

fb_code fb_spec_from_json(const cJSON *obj, fb_spec *spec, fb_err *err)
{
    fb_spec tmp;
    fb_code rc;
    fb_spec_init(&tmp);
    fb_spec_init(spec);
    if (!cJSON_IsObject(obj)) {
        rc = fb_err_set(err, FB_EINVAL, "", "a job spec must be a JSON object");
        goto out;
    }
    rc = spec_decode_members(obj, &tmp, err);
    if (rc)
        goto out;
    if (!tmp.params)
        tmp.params = cJSON_CreateObject();
    if (!tmp.params) {
        rc = fb_err_set(err, FB_ENOMEM, "params", "out of memory");
        goto out;
    }
    *spec = tmp;
    tmp.params = NULL;
out:
    fb_spec_free(&tmp);
    return rc;
}

/* Scans the raw text before cJSON sees it: bracket depth over limit is
 * FB_ETOOBIG (cJSON recurses once per level), and a raw control character in a
 * string, or outside one other than tab/LF/CR, is FB_EJSON (RFC 8259 forbids
 * them; cJSON would let them through).  The escape \u0000 is FB_EINVAL: cJSON
 * ends the string there, silently dropping the rest. */
static fb_code spec_text_scan(const char *text, size_t len, int limit, fb_err *err)
{
    int depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 && (in_str || !strchr("\t\n\r", c)))
            return fb_err_set(err, FB_EJSON, "",
                              "the body is not valid JSON (control character at byte %zu)", i);
        if (in_str) {
            if (c == '\\' && len - i >= 6 && memcmp(text + i + 1, "u0000", 5) == 0)
                return fb_err_set(err, FB_EINVAL, "",
                                  "a string holds \\u0000 (at byte %zu): NUL characters "
                                  "cannot be stored",
                                  i);
            if (c == '\\')
                i++; /* the escaped character cannot end the string */
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if ((c == '[' || c == '{') && ++depth > limit) {
            return fb_err_set(err, FB_ETOOBIG, "", "the job spec nests deeper than %d levels",
                              limit);
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return FB_OK;
}

/* True when only JSON whitespace lies in [p, end). */
static bool spec_only_space(const char *p, const char *end)
{
    for (; p < end; p++)
        if (!strchr(" \t\r\n", *p) || *p == '\0')
            return false;
    return true;
}

/* Parses text (len bytes) with cJSON; *out is the tree or NULL with err set.
 * The text is copied NUL-terminated so cJSON never reads past the caller's bytes;
 * trailing non-space after the value is an error (cJSON would ignore it). */
static fb_code spec_parse_text(const char *text, size_t len, cJSON **out, fb_err *err)
{
    fb_code rc = FB_OK;
    const char *end = NULL;
    char *copy = malloc(len + 1);
    *out = NULL;
    if (!copy)
        return fb_err_set(err, FB_ENOMEM, "", "out of memory");
    memcpy(copy, text, len);
    copy[len] = '\0';
    *out = cJSON_ParseWithLengthOpts(copy, len, &end, false);
    if (!*out || !end || !spec_only_space(end, copy + len)) {
        cJSON_Delete(*out);
        *out = NULL;
        size_t at = end && end >= copy ? (size_t)(end - copy) : 0;
        rc = fb_err_set(err, FB_EJSON, "", "the body is not valid JSON (near byte %zu)", at);
    }
    free(copy);
    return rc;
}

fb_code fb_json_parse_body(const char *text, size_t len, cJSON **out, fb_err *err)
{
    *out = NULL;
    fb_code rc = spec_text_scan(text, len, SPEC_SCAN_MAX_DEPTH, err);
    return rc ? rc : spec_parse_text(text, len, out, err);
}

fb_code fb_spec_parse(const char *text, size_t len, fb_spec *spec, fb_err *err)
{
    cJSON *obj = NULL;
    fb_code rc;
    fb_spec_init(spec);
    if (len > FB_SPEC_JSON_MAX) {
        rc = fb_err_set(err, FB_ETOOBIG, "", "the job spec is %zu bytes, over the limit of %d", len,
                        FB_SPEC_JSON_MAX);
        goto out;
    }
    rc = fb_json_parse_body(text, len, &obj, err);
    if (rc)
        goto out;
    rc = fb_spec_from_json(obj, spec, err);
out:
    cJSON_Delete(obj);
    return rc;
}

static void spec_default_name(char dst[FB_NAME_MAX], const char *def)
{
    if (!dst[0])
        snprintf(dst, FB_NAME_MAX, "%s", def);
}

/* Unset fields get their defaults.  default_device NULL means "cpu"; a NULL or
 * empty default_variants means eager and fused (the native engine's pair);
 * default_batch below 1 means 1.  Never fails; params stays NULL only when out of
 * memory, and the encoder writes {} for it. */
void fb_spec_apply_defaults(fb_spec *spec, const char *default_device, int default_batch,
                            const char *const *default_variants)
{
    static const char *const fallback_variants[] = {"eager", "fused", NULL};
    spec_default_name(spec->engine, "native");
    spec_default_name(spec->device, default_device ? default_device : "cpu");
    spec_default_name(spec->dtype, "float32");
    if (spec->batch_size <= 0)
        spec->batch_size = default_batch > 0 ? default_batch : 1;
    if (!default_variants || !default_variants[0])
        default_variants = fallback_variants;
    for (int n = 0; spec->n_variants == 0 && n < FB_MAX_VARIANTS && default_variants[n]; n++) {
        snprintf(spec->variants[n], FB_NAME_MAX, "%s", default_variants[n]);
        if (n == FB_MAX_VARIANTS - 1 || !default_variants[n + 1])
            spec->n_variants = n + 1;
    }
    if (spec->warmup < 0)
        spec->warmup = 10;
    if (spec->iterations <= 0)
        spec->iterations = 50;
    if (spec->timeout_s <= 0)
        spec->timeout_s = 600;
    if (spec->max_attempts <= 0)
        spec->max_attempts = 3;
    if (!spec->params)
        spec->params = cJSON_CreateObject();
}

const char *const fb_spec_file_params[] = {"weights", "input", NULL};

static bool file_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

static bool file_name_ok(const char *name)
{
    size_t n = name ? strnlen(name, FB_FILE_NAME_MAX + 1) : 0;
    bool start = true;

    if (n == 0 || n > FB_FILE_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (c == '/') {
            if (start)
                return false; /* leading '/' or an empty component */
            start = true;
            continue;
        }
        if (!file_name_char(c) || (start && c == '.'))
            return false;
        start = false;
    }
    return !start; /* no trailing '/' */
}

fb_code fb_spec_check_file_name(const char *name, const char *field, fb_err *err)
{
    if (file_name_ok(name))
        return FB_OK;
    return fb_err_set(err, FB_EINVAL, field,
                      "must name a file in the worker's weights folder: a relative name of at "
                      "most %d letters, digits, '.', '_', '-' and '/', no part empty or starting "
                      "with '.'",
                      FB_FILE_NAME_MAX);
}

fb_code fb_spec_check_files(const fb_spec *spec, fb_err *err)
{
    for (int i = 0; fb_spec_file_params[i]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(spec->params, fb_spec_file_params[i]);
        char field[48];
        if (!v)
            continue;
        snprintf(field, sizeof field, "params.%s", fb_spec_file_params[i]);
        fb_code rc = fb_spec_check_file_name(cJSON_GetStringValue(v), field, err);
        if (rc)
            return rc;
    }
    return FB_OK;
}

/* "fuse-" or "group-" and 12 lowercase hex digits. */
static bool inductor_fusion_id(const char *s)
{
    const char *hex = strncmp(s, "fuse-", 5) == 0    ? s + 5
                      : strncmp(s, "group-", 6) == 0 ? s + 6
                                                     : NULL;
    if (!hex || strlen(hex) != 12)
        return false;
    for (int i = 0; i < 12; i++)
        if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
            return false;
    return true;
}

static bool same_id(const cJSON *a, const cJSON *b)
{
    if (cJSON_IsString(a) && cJSON_IsString(b))
        return strcmp(a->valuestring, b->valuestring) == 0;
    return cJSON_IsNumber(a) && cJSON_IsNumber(b) && a->valuedouble == b->valuedouble;
}

fb_code fb_spec_check_unfuse(const fb_spec *spec, fb_err *err)
{
    const cJSON *arr =
        spec->params ? cJSON_GetObjectItemCaseSensitive(spec->params, "unfuse") : NULL;
    bool inductor = strcmp(spec->engine, "inductor") == 0;
    int n = cJSON_GetArraySize(arr), i = 0;

    if (!arr)
        return FB_OK;
    if (!cJSON_IsArray(arr) || n < 1 || n > FB_UNFUSE_MAX)
        return fb_err_set(err, FB_EINVAL, "params.unfuse",
                          "must be an array of 1 to %d fusion ids (%s)", FB_UNFUSE_MAX,
                          inductor ? "\"fuse-\" or \"group-\" and 12 hex digits, as the "
                                     "inductor result's fusion decisions name them"
                                   : "fusion group numbers, as the explanation names them");
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        char field[32];
        bool ok = inductor ? cJSON_IsString(e) && inductor_fusion_id(e->valuestring)
                           : cJSON_IsNumber(e) && e->valuedouble >= 0 && e->valuedouble <= 1e6 &&
                                 e->valuedouble == (double)(int)e->valuedouble;
        snprintf(field, sizeof field, "params.unfuse[%d]", i);
        if (!ok)
            return fb_err_set(err, FB_EINVAL, field,
                              inductor ? "must be an inductor fusion id: \"fuse-\" or \"group-\" "
                                         "and 12 lowercase hex digits"
                                       : "must be a fusion group id (an integer 0..1000000)");
        for (const cJSON *p = arr->child; p != e; p = p->next)
            if (same_id(p, e))
                return fb_err_set(err, FB_EINVAL, field, "repeats an earlier id");
    }
    return FB_OK;
}

fb_code fb_spec_check_resolved(const fb_spec *spec, fb_err *err)
{
    const char *unset = !spec->engine[0]                ? "engine"
                        : !spec->device[0]              ? "device"
                        : !spec->dtype[0]               ? "dtype"
                        : spec->batch_size <= 0         ? "batch_size"
                        : spec->n_variants <= 0         ? "variants"
                        : spec->warmup < 0              ? "warmup"
                        : spec->iterations <= 0         ? "iterations"
                        : spec->timeout_s <= 0          ? "timeout_s"
                        : spec->max_attempts <= 0       ? "max_attempts"
                        : !cJSON_IsObject(spec->params) ? "params"
                                                        : NULL;
    if (!unset)
        return FB_OK;
    return fb_err_set(err, FB_EINVAL, unset,
                      "%s is unset: a job's spec gets its defaults when it is submitted, and "
                      "this one was queued without them",
                      unset);
}

/* Adds the string member when set; false on ENOMEM. */
static bool spec_put_name(cJSON *o, const char *key, const char *v)
{
    return !v[0] || cJSON_AddStringToObject(o, key, v);
}

/* Adds the integer member when it is not its "unset" sentinel (below min). */
static bool spec_put_int(cJSON *o, const char *key, int v, int min)
{
    return v < min || cJSON_AddNumberToObject(o, key, v);
}

static bool spec_put_lists(cJSON *o, const fb_spec *s)
{
    if (s->n_variants > 0) {
        cJSON *arr = cJSON_AddArrayToObject(o, "variants");
        for (int i = 0; arr && i < s->n_variants; i++)
            if (!cJSON_AddItemToArray(arr, cJSON_CreateString(s->variants[i])))
                return false;
        if (!arr)
            return false;
    }
    cJSON *labels = cJSON_AddObjectToObject(o, "labels");
    for (int i = 0; labels && i < s->n_labels; i++)
        if (!cJSON_AddStringToObject(labels, s->labels[i].key, s->labels[i].value))
            return false;
    cJSON *params = s->params ? cJSON_Duplicate(s->params, true) : cJSON_CreateObject();
    if (!params || !cJSON_AddItemToObject(o, "params", params)) {
        cJSON_Delete(params);
        return false;
    }
    return labels != NULL;
}

cJSON *fb_spec_to_json(const fb_spec *spec)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && spec_put_name(o, "workload", spec->workload) &&
              spec_put_name(o, "engine", spec->engine) &&
              spec_put_name(o, "device", spec->device) &&
              spec_put_int(o, "batch_size", spec->batch_size, 1) &&
              spec_put_name(o, "dtype", spec->dtype) && spec_put_lists(o, spec) &&
              spec_put_int(o, "warmup", spec->warmup, 0) &&
              spec_put_int(o, "iterations", spec->iterations, 1) &&
              spec_put_int(o, "priority", spec->priority, -SPEC_PRIORITY_MAX) &&
              spec_put_int(o, "timeout_s", spec->timeout_s, 1) &&
              spec_put_int(o, "max_attempts", spec->max_attempts, 1) &&
              (!spec->explain || cJSON_AddTrueToObject(o, "explain"));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

const char *fb_spec_label(const fb_spec *spec, const char *key)
{
    for (int i = 0; i < spec->n_labels; i++)
        if (strcmp(spec->labels[i].key, key) == 0)
            return spec->labels[i].value;
    return NULL;
}

/* params.<key> as a path, with the key sanitized for the error body. */
static void spec_param_path(const char *key, char *path, size_t n)
{
    char shown[FB_ERR_FIELD_MAX - 8];
    spec_sanitize(key, shown, sizeof shown);
    snprintf(path, n, "params.%s", shown);
}

/* Integers arrive as doubles: the value must be integral and inside [lo, hi].
 * The explicit 2^63 bounds keep the cast defined. */
fb_code fb_spec_param_int(const fb_spec *spec, const char *key, int64_t def, int64_t lo, int64_t hi,
                          int64_t *out, fb_err *err)
{
    char path[FB_ERR_FIELD_MAX], got[40];
    const cJSON *item = spec->params ? cJSON_GetObjectItemCaseSensitive(spec->params, key) : NULL;
    *out = def;
    if (!item)
        return FB_OK;
    double d = item->valuedouble;
    bool ok = cJSON_IsNumber(item) && isfinite(d) && d == floor(d) && d >= -9223372036854775808.0 &&
              d < 9223372036854775808.0;
    if (ok && (int64_t)d >= lo && (int64_t)d <= hi) {
        *out = (int64_t)d;
        return FB_OK;
    }
    spec_param_path(key, path, sizeof path);
    return fb_err_set(err, FB_EINVAL, path, "%s must be an integer between %lld and %lld, got %s",
                      path, (long long)lo, (long long)hi, spec_describe(item, got, sizeof got));
}

fb_code fb_spec_param_bool(const fb_spec *spec, const char *key, bool def, bool *out, fb_err *err)
{
    char path[FB_ERR_FIELD_MAX], got[40];
    const cJSON *item = spec->params ? cJSON_GetObjectItemCaseSensitive(spec->params, key) : NULL;
    *out = def;
    if (!item)
        return FB_OK;
    if (cJSON_IsBool(item)) {
        *out = cJSON_IsTrue(item);
        return FB_OK;
    }
    spec_param_path(key, path, sizeof path);
    return fb_err_set(err, FB_EINVAL, path, "%s must be true or false, got %s", path,
                      spec_describe(item, got, sizeof got));
}

/* params.key when it is a positive number, else dflt. */
static double param_or(const fb_spec *spec, const char *key, double dflt)
{
    const cJSON *v = spec->params ? cJSON_GetObjectItemCaseSensitive(spec->params, key) : NULL;
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? v->valuedouble : dflt;
}

double fb_spec_input_bytes(const fb_spec *spec, const char *domain)
{
    double batch = spec->batch_size > 0 ? spec->batch_size : 1;
    double dt = strcmp(spec->dtype, "float16") == 0 || strcmp(spec->dtype, "bfloat16") == 0 ? 2 : 4;

    if (!domain)
        return 0;
    if (strcmp(domain, "vision") == 0 || strcmp(domain, "test") == 0) {
        double size = param_or(spec, "image_size", strcmp(domain, "vision") == 0 ? 224 : 32);
        return batch * 3 * size * size * dt;
    }
    if (strcmp(domain, "nlp") == 0) /* t5-small's 512 is the smallest hidden size */
        return batch * param_or(spec, "seq_len", 128) * param_or(spec, "hidden", 512) * dt;
    if (strcmp(domain, "speech") == 0) {
        const cJSON *mel =
            spec->params ? cJSON_GetObjectItemCaseSensitive(spec->params, "mel_frames") : NULL;
        if (cJSON_IsNumber(mel) && mel->valuedouble > 0)
            return batch * 80 * mel->valuedouble * dt;
        return batch * 16000 * param_or(spec, "audio_s", 1.0) * dt; /* 16 kHz samples */
    }
    return 0;
}
