/* fbc_file: JSON-lines record files (see fbc_file.h). */
#include "fbc_file.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include <cjson/cJSON.h>

/* ---- writer (libc only) ---- */

/* Writes s as a JSON string body: quotes, backslashes and control bytes
 * escaped (kernel names are plain ASCII in practice, but never trusted). */
static int put_escaped(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        int rc;
        if (c == '"' || c == '\\')
            rc = fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            rc = fprintf(f, "\\u%04x", c);
        else
            rc = fputc(c, f) == EOF ? -1 : 1;
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* Timestamps are written relative to the header's base: absolute CUPTI
 * timestamps exceed 2^53 and would lose nanoseconds in any JSON reader that
 * parses numbers as doubles (cJSON, JavaScript).  Earlier ones clamp to 0. */
static uint64_t rel(uint64_t t, uint64_t base)
{
    return t > base ? t - base : 0;
}

static const char *const kind_names[] = {"kernel", "memcpy", "memset", "alloc",
                                         "free",   "ext",    "range",  "launch"};

static int put_activity(FILE *f, const fbc_rec *r, uint64_t base)
{
    if (fprintf(f,
                "{\"t\":\"%s\",\"start\":%" PRIu64 ",\"end\":%" PRIu64 ",\"bytes\":%" PRIu64
                ",\"corr\":%" PRIu32 ",\"dev\":%" PRIu32 ",\"stream\":%" PRIu32,
                kind_names[r->kind], rel(r->start, base), rel(r->end, base), r->bytes, r->corr,
                r->device, r->stream) < 0)
        return -1;
    if (r->kind == FBC_MEMCPY && fprintf(f, ",\"copy_kind\":%d", r->copy_kind) < 0)
        return -1;
    if (r->kind == FBC_KERNEL &&
        (fprintf(f, ",\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d],\"name\":\"", r->grid[0], r->grid[1],
                 r->grid[2], r->block[0], r->block[1], r->block[2]) < 0 ||
         put_escaped(f, r->name) < 0 || fputc('"', f) == EOF))
        return -1;
    return fputs("}\n", f) == EOF ? -1 : 0;
}

int fbc_file_put(FILE *f, const fbc_rec *r, uint64_t base)
{
    switch (r->kind) {
    case FBC_KERNEL:
    case FBC_MEMCPY:
    case FBC_MEMSET:
        return put_activity(f, r, base);
    case FBC_ALLOC:
    case FBC_FREE:
        return fprintf(f,
                       "{\"t\":\"%s\",\"ts\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"addr\":%" PRIu64
                       ",\"dev\":%" PRIu32 "}\n",
                       kind_names[r->kind], rel(r->start, base), r->bytes, r->addr, r->device) < 0
                   ? -1
                   : 0;
    case FBC_EXTCORR:
    case FBC_LAUNCH:
        return fprintf(f, "{\"t\":\"%s\",\"ext\":%" PRIu64 ",\"corr\":%" PRIu32 "}\n",
                       kind_names[r->kind], r->ext_id, r->corr) < 0
                   ? -1
                   : 0;
    case FBC_RANGE:
        if (fprintf(f,
                    "{\"t\":\"range\",\"ext\":%" PRIu64 ",\"start\":%" PRIu64 ",\"end\":%" PRIu64
                    ",\"label\":\"",
                    r->ext_id, rel(r->start, base), rel(r->end, base)) < 0 ||
            put_escaped(f, r->name) < 0)
            return -1;
        return fputs("\"}\n", f) == EOF ? -1 : 0;
    }
    return -1;
}

int fbc_file_header(FILE *f, long pid, uint64_t base)
{
    return fprintf(f, "{\"t\":\"header\",\"version\":1,\"pid\":%ld,\"base_ns\":\"%" PRIu64 "\"}\n",
                   pid, base) < 0
               ? -1
               : 0;
}

int fbc_file_end(FILE *f, uint64_t dropped, const char *message)
{
    if (fprintf(f, "{\"t\":\"end\",\"dropped\":%" PRIu64 ",\"message\":\"", dropped) < 0 ||
        put_escaped(f, message ? message : "") < 0 || fputs("\"}\n", f) == EOF)
        return -1;
    return fflush(f) == 0 ? 0 : -1;
}

/* ---- reader ---- */

static uint64_t get_u64(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 ? (uint64_t)v->valuedouble : 0;
}

static void get_dim3(const cJSON *o, const char *key, int32_t out[3])
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    for (int i = 0; i < 3; i++) {
        const cJSON *v = cJSON_GetArrayItem(a, i);
        out[i] = cJSON_IsNumber(v) ? (int32_t)v->valueint : 0;
    }
}

static void get_str(const cJSON *o, const char *key, char *dst, size_t cap)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    snprintf(dst, cap, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static int kind_of(const char *t)
{
    for (int k = 0; k < (int)(sizeof kind_names / sizeof kind_names[0]); k++)
        if (strcmp(t, kind_names[k]) == 0)
            return k;
    return -1;
}

static void parse_rec(const cJSON *o, int kind, fbc_rec *r)
{
    memset(r, 0, sizeof *r);
    r->kind = (fbc_kind)kind;
    r->start = get_u64(o, kind == FBC_ALLOC || kind == FBC_FREE ? "ts" : "start");
    r->end = kind == FBC_ALLOC || kind == FBC_FREE ? r->start : get_u64(o, "end");
    r->bytes = get_u64(o, "bytes");
    r->addr = get_u64(o, "addr");
    r->ext_id = get_u64(o, "ext");
    r->corr = (uint32_t)get_u64(o, "corr");
    r->device = (uint32_t)get_u64(o, "dev");
    r->stream = (uint32_t)get_u64(o, "stream");
    r->copy_kind = (int)get_u64(o, "copy_kind");
    get_dim3(o, "grid", r->grid);
    get_dim3(o, "block", r->block);
    get_str(o, kind == FBC_RANGE ? "label" : "name", r->name, sizeof r->name);
}

/* One line: a record, the trailer, or the header (ignored). */
static fb_code read_line(const char *line, long no, fbc_store *s, fbc_file_info *info, fb_err *err)
{
    cJSON *o = cJSON_Parse(line);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "t");
    fb_code rc = FB_OK;
    fbc_rec r;
    int kind;

    if (!cJSON_IsString(t)) {
        rc = fb_err_set(err, FB_EJSON, NULL, "record file line %ld: not a record object", no);
    } else if (strcmp(t->valuestring, "end") == 0) {
        info->complete = 1;
        info->dropped = get_u64(o, "dropped");
        get_str(o, "message", info->message, sizeof info->message);
    } else if ((kind = kind_of(t->valuestring)) >= 0) {
        parse_rec(o, kind, &r);
        (void)fbc_store_add(s, &r); /* overflow is counted in the store */
    }
    cJSON_Delete(o);
    return rc;
}

fb_code fbc_file_read(const char *path, fbc_store *s, fbc_file_info *info, fb_err *err)
{
    char line[FBC_FILE_LINE_MAX];
    FILE *f = fopen(path, "r");
    fb_code rc = FB_OK;
    long no = 0;

    memset(info, 0, sizeof *info);
    if (!f)
        return fb_err_set(err, FB_EIO, NULL, "cannot open record file %s: %s", path,
                          strerror(errno));
    while (rc == FB_OK && fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        no++;
        if (len == sizeof line - 1 && line[len - 1] != '\n')
            rc = fb_err_set(err, FB_ETOOBIG, NULL, "record file line %ld is over %d bytes", no,
                            FBC_FILE_LINE_MAX);
        else if (len > 1)
            rc = read_line(line, no, s, info, err);
    }
    if (rc == FB_OK && ferror(f))
        rc = fb_err_set(err, FB_EIO, NULL, "reading %s failed", path);
    fclose(f);
    return rc;
}
