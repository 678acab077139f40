/* gr_input: real inputs (gr_input.h). */
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr_input.h"

#ifndef FB_DATA_DIR
#define FB_DATA_DIR "data"
#endif

#define FILE_MAX   (64 << 20) /* no input file is larger */
#define MAX_IMAGES 8
#define VOCAB_MAX  4096
#define TOKEN_MAX  32

static const char *data_dir(void)
{
    const char *d = getenv("FB_DATA_DIR");
    return d && *d ? d : FB_DATA_DIR;
}

/* Reads a whole file (at most FILE_MAX bytes); caller frees *buf. */
static fb_code slurp(const char *path, unsigned char **buf, size_t *len, fb_err *err)
{
    FILE *f = fopen(path, "rb");
    *buf = NULL;
    if (!f)
        return fb_err_set(err, FB_EINVAL, NULL, "cannot open input file %.200s", path);
    fb_code rc = FB_OK;
    unsigned char *b = malloc(FILE_MAX);
    size_t n = b ? fread(b, 1, FILE_MAX, f) : 0;
    if (!b)
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot read %.200s", path);
    else if (n == FILE_MAX)
        rc = fb_err_set(err, FB_ETOOBIG, NULL, "%.200s is over %d bytes", path, FILE_MAX);
    fclose(f);
    if (rc) {
        free(b);
        return rc;
    }
    *buf = b;
    *len = n;
    return FB_OK;
}

/* ---- PPM ---- */

/* Skips whitespace and # comments, then reads a decimal (at most 5 digits). */
static bool ppm_num(const unsigned char *b, size_t len, size_t *pos, int *out)
{
    while (*pos < len && (isspace(b[*pos]) || b[*pos] == '#')) {
        if (b[*pos] == '#')
            while (*pos < len && b[*pos] != '\n')
                (*pos)++;
        else
            (*pos)++;
    }
    int v = 0, digits = 0;
    while (*pos < len && isdigit(b[*pos]) && digits < 6) {
        v = v * 10 + (b[(*pos)++] - '0');
        digits++;
    }
    *out = v;
    return digits > 0 && digits < 6;
}

fb_code gr_ppm_parse(const unsigned char *buf, size_t len, int *w, int *h,
                     const unsigned char **rgb, fb_err *err)
{
    size_t pos = 2;
    int maxv = 0;
    if (len < 3 || buf[0] != 'P' || buf[1] != '6' || !ppm_num(buf, len, &pos, w) ||
        !ppm_num(buf, len, &pos, h) || !ppm_num(buf, len, &pos, &maxv) || pos >= len ||
        !isspace(buf[pos]))
        return fb_err_set(err, FB_EINVAL, NULL, "not a binary PPM");
    pos++;
    if (maxv != 255 || *w < 1 || *h < 1 || *w > 8192 || *h > 8192 ||
        (size_t)*w * (size_t)*h * 3 > len - pos)
        return fb_err_set(err, FB_EINVAL, NULL, "PPM size or depth not supported");
    *rgb = buf + pos;
    return FB_OK;
}

/* Bilinear sample of channel c at (y, x) in pixel coordinates (half-pixel
 * centers, as torchvision's resize without antialiasing). */
static float sample(const unsigned char *rgb, int w, int h, int c, float y, float x)
{
    y = y < 0 ? 0 : (y > h - 1 ? (float)(h - 1) : y);
    x = x < 0 ? 0 : (x > w - 1 ? (float)(w - 1) : x);
    int y0 = (int)y, x0 = (int)x, y1 = y0 + 1 < h ? y0 + 1 : y0, x1 = x0 + 1 < w ? x0 + 1 : x0;
    float fy = y - (float)y0, fx = x - (float)x0;
    float a = rgb[(y0 * w + x0) * 3 + c], b = rgb[(y0 * w + x1) * 3 + c];
    float d = rgb[(y1 * w + x0) * 3 + c], e = rgb[(y1 * w + x1) * 3 + c];
    return (a * (1 - fx) + b * fx) * (1 - fy) + (d * (1 - fx) + e * fx) * fy;
}

static void resize_norm(const unsigned char *rgb, int w, int h, float *out, int64_t size)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    float sy = (float)h / (float)size, sx = (float)w / (float)size;
    for (int c = 0; c < 3; c++)
        for (int64_t y = 0; y < size; y++)
            for (int64_t x = 0; x < size; x++) {
                float v = sample(rgb, w, h, c, ((float)y + 0.5f) * sy - 0.5f,
                                 ((float)x + 0.5f) * sx - 0.5f);
                out[(c * size + y) * size + x] = (v / 255.0f - mean[c]) / std[c];
            }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

/* Names of the .ppm files in data/images, sorted; returns the count. */
static int list_images(char names[MAX_IMAGES][256])
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/images", data_dir());
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && n < MAX_IMAGES && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l > 4 && l < 200 && strcmp(e->d_name + l - 4, ".ppm") == 0)
            snprintf(names[n++], 256, "%s/%s", dir, e->d_name);
    }
    if (d)
        closedir(d);
    qsort(names, (size_t)n, 256, cmp_str);
    return n;
}

fb_code gr_input_images(float *out, int64_t batch, int64_t size, fb_err *err)
{
    char names[MAX_IMAGES][256];
    int n = list_images(names);
    if (n == 0)
        return fb_err_set(err, FB_EINVAL, NULL, "no images in %.200s/images", data_dir());
    fb_code rc = FB_OK;
    for (int i = 0; i < n && i < batch && !rc; i++) {
        unsigned char *buf = NULL;
        size_t len = 0;
        const unsigned char *rgb;
        int w, h;
        rc = slurp(names[i], &buf, &len, err);
        if (!rc)
            rc = gr_ppm_parse(buf, len, &w, &h, &rgb, err);
        if (!rc)
            resize_norm(rgb, w, h, out + (int64_t)i * 3 * size * size, size);
        free(buf);
    }
    for (int64_t b = n; b < batch && !rc; b++) /* more items than photos: repeat them */
        memcpy(out + b * 3 * size * size, out + (b % n) * 3 * size * size,
               (size_t)(3 * size * size) * sizeof *out);
    return rc;
}

/* ---- tokens ---- */

typedef struct vocab {
    int n;
    char (*tok)[TOKEN_MAX];
} vocab;

static int vocab_find(const vocab *v, const char *s)
{
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->tok[i], s) == 0)
            return i;
    return -1;
}

static fb_code vocab_load(vocab *v, fb_err *err)
{
    char path[512];
    snprintf(path, sizeof path, "%s/text/vocab.txt", data_dir());
    unsigned char *buf = NULL;
    size_t len = 0;
    fb_code rc = slurp(path, &buf, &len, err);
    if (rc)
        return rc;
    v->tok = calloc(VOCAB_MAX, sizeof *v->tok);
    v->n = 0;
    size_t s = 0;
    for (size_t i = 0; v->tok && i <= len && v->n < VOCAB_MAX; i++) {
        if (i == len || buf[i] == '\n') {
            size_t l = i - s < TOKEN_MAX - 1 ? i - s : TOKEN_MAX - 1;
            memcpy(v->tok[v->n], buf + s, l);
            v->tok[v->n++][l] = 0;
            s = i + 1;
        }
    }
    free(buf);
    if (!v->tok || v->n < 104)
        return fb_err_set(err, FB_EINVAL, NULL, "%.200s: no usable vocabulary", path);
    return FB_OK;
}

/* Greedy longest-match WordPiece of one lower-cased word; appends ids. */
static void wordpiece(const vocab *v, const char *w, int *ids, int *n, int max)
{
    size_t len = strlen(w), start = 0;
    while (start < len && *n < max) {
        int found = -1;
        size_t end = len;
        for (; end > start && found < 0; end--) {
            char piece[TOKEN_MAX + 2];
            int l = snprintf(piece, sizeof piece, "%s%.*s", start ? "##" : "", (int)(end - start),
                             w + start);
            if (l < (int)sizeof piece)
                found = vocab_find(v, piece);
        }
        if (found < 0) {
            ids[(*n)++] = 100; /* [UNK] */
            return;
        }
        ids[(*n)++] = found;
        start = end + 1;
    }
}

/* Splits text into words (alphanumeric runs, single punctuation marks). */
static int tokenize(const vocab *v, const char *text, int *ids, int max)
{
    int n = 0;
    char word[64];
    for (size_t i = 0; text[i] && n < max;) {
        if (isspace((unsigned char)text[i])) {
            i++;
            continue;
        }
        size_t l = 0;
        if (isalnum((unsigned char)text[i]))
            while (isalnum((unsigned char)text[i]) && l < sizeof word - 1)
                word[l++] = (char)tolower((unsigned char)text[i++]);
        else
            word[l++] = text[i++];
        word[l] = 0;
        wordpiece(v, word, ids, &n, max);
    }
    return n;
}

fb_code gr_input_tokens(float *out, int64_t batch, int64_t seq, int64_t vocab_n, fb_err *err)
{
    vocab v = {0};
    unsigned char *text = NULL;
    size_t len = 0;
    char path[512];
    int ids[512];
    snprintf(path, sizeof path, "%s/text/sentence.txt", data_dir());
    fb_code rc = vocab_load(&v, err);
    if (!rc)
        rc = slurp(path, &text, &len, err);
    if (!rc) {
        text[len < FILE_MAX ? len : FILE_MAX - 1] = 0;
        int n = tokenize(&v, (const char *)text, ids, 512);
        if (n == 0)
            rc = fb_err_set(err, FB_EINVAL, NULL, "%.200s has no tokens", path);
        for (int64_t b = 0; !rc && b < batch; b++) {
            float *o = out + b * seq;
            o[0] = 101; /* [CLS], then the sentence over and over, [SEP] between */
            for (int64_t j = 1, k = (int)(b % (n + 1)); j < seq; j++, k = (k + 1) % (n + 1))
                o[j] = k == n ? 102 : (float)ids[k];
            for (int64_t j = 0; j < seq; j++)
                o[j] = (float)((int64_t)o[j] % vocab_n);
        }
    }
    free(v.tok);
    free(text);
    return rc;
}

/* ---- log-mel ---- */

fb_code gr_input_mel(float *out, int64_t batch, int64_t frames, fb_err *err)
{
    char path[512];
    snprintf(path, sizeof path, "%s/speech/mel80.f32", data_dir());
    unsigned char *buf = NULL;
    size_t len = 0;
    fb_code rc = slurp(path, &buf, &len, err);
    if (rc)
        return rc;
    int64_t n = (int64_t)(len / (80 * sizeof(float)));
    if (n < 1 || len % (80 * sizeof(float))) {
        free(buf);
        return fb_err_set(err, FB_EINVAL, NULL, "%.200s is not 80 rows of float32", path);
    }
    float lo = INFINITY, v;
    for (int64_t i = 0; i < 80 * n; i++) {
        memcpy(&v, buf + i * 4, 4); /* the file is little-endian, as is this host */
        lo = v < lo ? v : lo;
    }
    for (int64_t m = 0; m < 80; m++)
        for (int64_t f = 0; f < frames; f++) {
            if (f < n)
                memcpy(&out[m * frames + f], buf + (m * n + f) * 4, 4);
            else
                out[m * frames + f] = lo;
        }
    for (int64_t b = 1; b < batch; b++)
        memcpy(out + b * 80 * frames, out, (size_t)(80 * frames) * sizeof *out);
    free(buf);
    return FB_OK;
}
