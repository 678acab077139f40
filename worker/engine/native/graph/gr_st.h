/* gr_st: a safetensors reader.  The format: an 8-byte little-endian header
 * length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets": [b, e]},
 * "__metadata__": {...}}, then the data; offsets are relative to the data.
 * Every size from the file is checked against the file before it is used. */
#ifndef GR_ST_H
#define GR_ST_H

#include <stddef.h>
#include <stdint.h>

#include "fb_err.h"
#include "gr.h"

#define GR_ST_HEADER_MAX  ((uint64_t)100 << 20) /* the format's own limit */
#define GR_ST_MAX_TENSORS 100000

enum gr_st_dtype { GR_ST_OTHER = -1, GR_ST_F32, GR_ST_F16, GR_ST_BF16 };

typedef struct gr_st_tensor {
    char name[GR_NAME_MAX];
    int dtype; /* gr_st_dtype; OTHER tensors are listed but cannot be read */
    int rank;
    int64_t dims[GR_MAX_DIMS];
    uint64_t begin, end; /* in the data section */
} gr_st_tensor;

typedef struct gr_st {
    int n;
    gr_st_tensor *t;          /* owned */
    const unsigned char *map; /* the whole file, mmapped; NULL after parse-only */
    size_t map_len;
    uint64_t data_off; /* 8 + header length */
    cJSON *meta;       /* the header's "__metadata__" object (owned), or NULL */
} gr_st;

/* Parses a header (json, len bytes) whose data section has data_len bytes into
 * st (zeroed by the caller).  FB_EINVAL naming field (e.g. "params.weights")
 * for anything malformed or out of bounds.  Free with gr_st_close. */
FB_MUSTCHECK fb_code gr_st_parse_header(const char *json, size_t len, uint64_t data_len, gr_st *st,
                                        const char *field, fb_err *err);

/* Opens and maps path, parses its header. */
FB_MUSTCHECK fb_code gr_st_open(const char *path, gr_st *st, const char *field, fb_err *err);

/* gr_st_open on a file already open on fd (closed here in every case: the
 * mapping outlives it); name is for messages only. */
FB_MUSTCHECK fb_code gr_st_open_fd(int fd, const char *name, gr_st *st, const char *field,
                                   fb_err *err);

/* The header's __metadata__ string under key, or NULL (absent, or not a
 * string). */
const char *gr_st_meta(const gr_st *st, const char *key);

/* The tensor named name, or NULL. */
const gr_st_tensor *gr_st_find(const gr_st *st, const char *name);

/* Reads tensor name, which must have the given shape, as float32 into out.
 * FB_EINVAL naming field when it is missing, of another shape or dtype. */
FB_MUSTCHECK fb_code gr_st_read(const gr_st *st, const char *name, int rank, const int64_t *dims,
                                float *out, const char *field, fb_err *err);

void gr_st_close(gr_st *st);

#endif
