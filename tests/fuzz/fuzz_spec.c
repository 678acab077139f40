/* libFuzzer target for fb_spec_parse, the parser of outside input (POST /jobs).
 *
 * Properties checked on every input:
 *  - no crash, leak or undefined behaviour (ASan/UBSan), and no read past the
 *    given bytes (the input is copied to an exact-size, unterminated buffer);
 *  - an error is one of the codes the contract allows and leaves the spec owning
 *    nothing, with a message;
 *  - what is accepted is valid, encodes within FB_SPEC_JSON_MAX, and re-parses to
 *    an equal spec, before and after defaults;
 *  - params.unfuse's form check (run on every POST /jobs) accepts or refuses
 *    with FB_EINVAL naming params.unfuse or one of its elements, the same
 *    answer twice. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_spec.h"

/* abort() so libFuzzer records the input as a crash. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_spec: check failed: %s (line %d)\n", #cond, __LINE__);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static bool fuzz_spec_equal(const fb_spec *a, const fb_spec *b)
{
    bool eq = strcmp(a->workload, b->workload) == 0 && strcmp(a->engine, b->engine) == 0 &&
              strcmp(a->device, b->device) == 0 && strcmp(a->dtype, b->dtype) == 0 &&
              a->batch_size == b->batch_size && a->n_variants == b->n_variants &&
              a->warmup == b->warmup && a->iterations == b->iterations &&
              a->priority == b->priority && a->timeout_s == b->timeout_s &&
              a->max_attempts == b->max_attempts && a->n_labels == b->n_labels &&
              cJSON_Compare(a->params, b->params, true);
    for (int i = 0; eq && i < a->n_variants; i++)
        eq = strcmp(a->variants[i], b->variants[i]) == 0;
    for (int i = 0; eq && i < a->n_labels; i++)
        eq = strcmp(a->labels[i].key, b->labels[i].key) == 0 &&
             strcmp(a->labels[i].value, b->labels[i].value) == 0;
    return eq;
}

static void fuzz_check_valid(const fb_spec *s)
{
    char owner[FB_NAME_MAX], name[FB_NAME_MAX];
    /* a workload name, or an uploaded model's reference (model:[OWNER/]NAME) */
    FUZZ_CHECK(fb_name_valid(s->workload) || fb_model_ref_parse(s->workload, owner, name));
    FUZZ_CHECK(s->params && cJSON_IsObject(s->params));
    FUZZ_CHECK(s->n_variants >= 0 && s->n_variants <= FB_MAX_VARIANTS);
    FUZZ_CHECK(s->n_labels >= 0 && s->n_labels <= FB_MAX_LABELS);
    for (int i = 0; i < s->n_variants; i++)
        FUZZ_CHECK(fb_name_valid(s->variants[i]));
    FUZZ_CHECK(s->batch_size >= 0 && s->batch_size <= FB_MAX_BATCH);
    FUZZ_CHECK(s->warmup >= -1 && s->warmup <= FB_MAX_WARMUP);
    FUZZ_CHECK(s->iterations >= 0 && s->iterations <= FB_MAX_ITERATIONS);
}

/* Encodes a, checks the size, re-parses and compares. */
static void fuzz_round_trip(const fb_spec *a)
{
    cJSON *j = fb_spec_to_json(a);
    FUZZ_CHECK(j);
    char *txt = cJSON_PrintUnformatted(j);
    FUZZ_CHECK(txt);
    size_t len = strlen(txt);
    FUZZ_CHECK(len <= FB_SPEC_JSON_MAX);
    fb_spec b;
    fb_err err;
    fb_code rc = fb_spec_parse(txt, len, &b, &err);
    if (rc)
        fprintf(stderr, "fuzz_spec: re-parse failed: %s (%s): %s\n", fb_code_name(rc), err.field,
                err.msg);
    FUZZ_CHECK(rc == FB_OK);
    FUZZ_CHECK(fuzz_spec_equal(a, &b));
    fb_spec_free(&b);
    cJSON_free(txt);
    cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    fb_spec a;
    fb_err err;
    fb_err_clear(&err);
    fb_code rc = fb_spec_parse(buf, size, &a, &err);
    free(buf);
    if (rc != FB_OK) {
        FUZZ_CHECK(rc == FB_EINVAL || rc == FB_EJSON || rc == FB_ETOOBIG || rc == FB_ENOMEM);
        FUZZ_CHECK(err.code == rc && err.msg[0] != '\0');
        FUZZ_CHECK(a.params == NULL);
        return 0;
    }
    fuzz_check_valid(&a);
    fuzz_round_trip(&a);
    fb_err_clear(&err);
    rc = fb_spec_check_unfuse(&a, &err);
    FUZZ_CHECK(rc == FB_OK || (rc == FB_EINVAL && err.msg[0] != '\0' &&
                               strncmp(err.field, "params.unfuse", 13) == 0));
    FUZZ_CHECK(fb_spec_check_unfuse(&a, &err) == rc);
    static const char *const vars[] = {"eager", "fused", NULL};
    fb_spec_apply_defaults(&a, "cpu", 4, vars);
    fuzz_check_valid(&a);
    fuzz_round_trip(&a);
    fb_spec_free(&a);
    return 0;
}
