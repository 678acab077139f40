/* gr_st: safetensors reader (gr_st.h), written from the format's description:
 * length-prefixed JSON header, then raw little-endian tensor data. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gr_st.h"

static int dtype_of(const char *s)
{
    if (strcmp(s, "F32") == 0)
        return GR_ST_F32;
    if (strcmp(s, "F16") == 0)
        return GR_ST_F16;
    if (strcmp(s, "BF16") == 0)
        return GR_ST_BF16;
    return GR_ST_OTHER;
}

static uint64_t dtype_size(int d)
{
    return d == GR_ST_F32 ? 4 : 2;
}

/* A JSON number that is an integer in [0, 2^53]. */
static bool as_u64(const cJSON *j, uint64_t *out)
{
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= 0) || j->valuedouble > 9007199254740992.0 ||
        floor(j->valuedouble) != j->valuedouble)
        return false;
    *out = (uint64_t)j->valuedouble;
    return true;
}

static fb_code bad(fb_err *err, const char *field, const char *name, const char *why)
{
    return fb_err_set(err, FB_EINVAL, field, "safetensors tensor %.64s: %s", name, why);
}

/* Fills t from entry e; checks shape, dtype and offsets against data_len. */
static fb_code parse_entry(const cJSON *e, uint64_t data_len, gr_st_tensor *t, const char *field,
                           fb_err *err)
{
    const char *nm = e->string;
    if (strlen(nm) >= sizeof t->name)
        return bad(err, field, nm, "name too long");
    snprintf(t->name, sizeof t->name, "%s", nm);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsObject(e) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) ||
        cJSON_GetArraySize(off) != 2)
        return bad(err, field, nm, "needs dtype, shape and data_offsets");
    t->dtype = dtype_of(dt->valuestring);
    int rank = cJSON_GetArraySize(sh);
    if (rank > GR_MAX_DIMS)
        return bad(err, field, nm, "rank over 6");
    t->rank = rank;
    uint64_t numel = 1;
    for (int i = 0; i < rank; i++) {
        uint64_t d;
        if (!as_u64(cJSON_GetArrayItem(sh, i), &d) || d > (uint64_t)GR_MAX_NUMEL ||
            __builtin_mul_overflow(numel, d, &numel))
            return bad(err, field, nm, "bad shape");
        t->dims[i] = (int64_t)d;
    }
    if (!as_u64(cJSON_GetArrayItem(off, 0), &t->begin) ||
        !as_u64(cJSON_GetArrayItem(off, 1), &t->end) || t->begin > t->end || t->end > data_len)
        return bad(err, field, nm, "data_offsets out of the file");
    if (t->dtype != GR_ST_OTHER &&
        (numel > (uint64_t)GR_MAX_NUMEL || t->end - t->begin != numel * dtype_size(t->dtype)))
        return bad(err, field, nm, "data size does not match shape and dtype");
    return FB_OK;
}

fb_code gr_st_parse_header(const char *json, size_t len, uint64_t data_len, gr_st *st,
                           const char *field, fb_err *err)
{
    fb_code rc = FB_OK;
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!cJSON_IsObject(root)) {
        rc = fb_err_set(err, FB_EINVAL, field, "safetensors header is not a JSON object");
        goto out;
    }
    int n = cJSON_GetArraySize(root);
    if (n > GR_ST_MAX_TENSORS) {
        rc = fb_err_set(err, FB_EINVAL, field, "safetensors file over %d tensors",
                        GR_ST_MAX_TENSORS);
        goto out;
    }
    st->t = calloc((size_t)n + 1, sizeof *st->t);
    if (!st->t) {
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the safetensors index");
        goto out;
    }
    for (const cJSON *e = root->child; e && !rc; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0)
            continue;
        rc = parse_entry(e, data_len, &st->t[st->n], field, err);
        if (!rc)
            st->n++;
    }
    if (!rc) {
        cJSON *meta = cJSON_DetachItemFromObjectCaseSensitive(root, "__metadata__");
        if (cJSON_IsObject(meta))
            st->meta = meta;
        else
            cJSON_Delete(meta);
    }
out:
    cJSON_Delete(root);
    return rc;
}

/* Maps the file open on fd (closed here in every case). */
static fb_code map_fd(int fd, const char *path, gr_st *st, const char *field, fb_err *err)
{
    struct stat sb;
    fb_code rc = FB_OK;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < 8) {
        rc = fb_err_set(err, FB_EINVAL, field, "%.200s is not a safetensors file", path);
    } else {
        void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
            rc = fb_err_set(err, FB_EINVAL, field, "cannot map %.200s", path);
        else {
            st->map = m;
            st->map_len = (size_t)sb.st_size;
        }
    }
    close(fd);
    return rc;
}

fb_code gr_st_open(const char *path, gr_st *st, const char *field, fb_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    memset(st, 0, sizeof *st);
    if (fd < 0)
        return fb_err_set(err, FB_EINVAL, field, "cannot open %.200s", path);
    return gr_st_open_fd(fd, path, st, field, err);
}

fb_code gr_st_open_fd(int fd, const char *name, gr_st *st, const char *field, fb_err *err)
{
    memset(st, 0, sizeof *st);
    fb_code rc = map_fd(fd, name, st, field, err);
    if (rc)
        return rc;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | st->map[i];
    if (hl > GR_ST_HEADER_MAX || hl > st->map_len - 8) {
        gr_st_close(st);
        return fb_err_set(err, FB_EINVAL, field, "safetensors header length out of the file");
    }
    st->data_off = 8 + hl;
    rc = gr_st_parse_header((const char *)st->map + 8, (size_t)hl, st->map_len - st->data_off, st,
                            field, err);
    if (rc)
        gr_st_close(st);
    return rc;
}

const char *gr_st_meta(const gr_st *st, const char *key)
{
    return st->meta ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st->meta, key)) : NULL;
}

const gr_st_tensor *gr_st_find(const gr_st *st, const char *name)
{
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->t[i].name, name) == 0)
            return &st->t[i];
    return NULL;
}

static float half_to_float(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023;
    float f;
    if (e == 0) { /* zero or subnormal: m * 2^-24 */
        f = (float)m * 5.9604644775390625e-8f;
        return s ? -f : f;
    }
    uint32_t bits = e == 31 ? (s | 0x7f800000u | m << 13) : (s | (e + 112) << 23 | m << 13);
    memcpy(&f, &bits, sizeof f);
    return f;
}

static void convert(const unsigned char *src, int dtype, int64_t n, float *out)
{
    for (int64_t i = 0; i < n; i++) {
        if (dtype == GR_ST_F32) {
            uint32_t b = (uint32_t)src[4 * i] | (uint32_t)src[4 * i + 1] << 8 |
                         (uint32_t)src[4 * i + 2] << 16 | (uint32_t)src[4 * i + 3] << 24;
            memcpy(&out[i], &b, sizeof b);
        } else {
            uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
            if (dtype == GR_ST_F16) {
                out[i] = half_to_float(h);
            } else {
                uint32_t b = (uint32_t)h << 16;
                memcpy(&out[i], &b, sizeof b);
            }
        }
    }
}

fb_code gr_st_read(const gr_st *st, const char *name, int rank, const int64_t *dims, float *out,
                   const char *field, fb_err *err)
{
    const gr_st_tensor *t = gr_st_find(st, name);
    if (!t)
        return bad(err, field, name, "missing");
    if (t->dtype == GR_ST_OTHER)
        return bad(err, field, name, "dtype is not F32, F16 or BF16");
    if (t->rank != rank || memcmp(t->dims, dims, (size_t)rank * sizeof *dims) != 0)
        return bad(err, field, name, "shape differs from the model's");
    if (!st->map)
        return bad(err, field, name, "no data mapped");
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    convert(st->map + st->data_off + t->begin, t->dtype, n, out);
    return FB_OK;
}

void gr_st_close(gr_st *st)
{
    if (!st)
        return;
    if (st->map)
        munmap((void *)st->map, st->map_len);
    free(st->t);
    cJSON_Delete(st->meta);
    memset(st, 0, sizeof *st);
}
