/* fbc_file: the injection library's record file, one JSON object per line, so
 * that any reader (fusionbench, the inductor runner's Python) can stream it:
 *
 *   {"t":"header","version":1,"pid":123,"base_ns":"1700000000000000000"}
 *   {"t":"kernel","name":"...","start":1,"end":2,"corr":7,"dev":0,"stream":7,
 *    "grid":[1,1,1],"block":[128,1,1]}
 *   {"t":"memcpy","start":..,"end":..,"bytes":..,"copy_kind":8,"corr":..,...}
 *   {"t":"memset",...}  {"t":"alloc"|"free","ts":..,"bytes":..,"addr":..}
 *   {"t":"ext","ext":3,"corr":7}     (correlation id 7 was launched in range 3)
 *   {"t":"launch","ext":5,"corr":7}  (... by launch 4 of the plan being run)
 *   {"t":"range","ext":3,"label":"iter","start":..,"end":..}
 *   {"t":"end","dropped":0,"message":"..."}   (written at exit / SIGTERM)
 *
 * Timestamps are CUPTI nanoseconds after base_ns (a string: it exceeds 2^53).  The writer needs
 * only libc (the injection library links nothing else but CUPTI); the reader uses cJSON. */
#ifndef FBC_FILE_H
#define FBC_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "fb_err.h"
#include "fbc_analysis.h"

#define FBC_FILE_LINE_MAX 4096 /* a longer line is an error, not a crash */

/* Writes r as one line, timestamps relative to base (the header's).  0, or -1
 * on a write error. */
int fbc_file_put(FILE *f, const fbc_rec *r, uint64_t base);
/* base: the session's first CUPTI timestamp, written as a decimal string. */
int fbc_file_header(FILE *f, long pid, uint64_t base);
/* message may be NULL; it is escaped. */
int fbc_file_end(FILE *f, uint64_t dropped, const char *message);

/* What a file's trailer said. */
typedef struct fbc_file_info {
    int complete;      /* an "end" line was seen */
    uint64_t dropped;  /* from the end line */
    char message[256]; /* from the end line, "" none */
} fbc_file_info;

/* Appends every record line of path to s (store limits apply) and fills info.
 * FB_EIO when the file cannot be read, FB_EJSON (with the line number) on a
 * malformed line. */
FB_MUSTCHECK fb_code fbc_file_read(const char *path, fbc_store *s, fbc_file_info *info,
                                   fb_err *err);

#endif
