/* fb_table: the result table of fusionbench-run and of the fusionbench client,
 * printed from a job's spec and result in their typed form (fusionbench-run
 * has its structs; the client decodes the server's JSON with fb_spec_from_json
 * and fb_result_from_json), so both print the same table from one formatter.
 * Unknown figures (NaN, -1) print as "-".
 *
 * The explanation is the one part printed from JSON (docs/EXPLAIN.md's object,
 * outside input for the client): a member that is missing, null or of another
 * type prints as unknown, never as a crash. */
#ifndef FB_TABLE_H
#define FB_TABLE_H

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "fb_result.h"
#include "fb_spec.h"

/* Prints the header line, one row per variant, the messages of variants that
 * are not ok, the baseline line, the noise lines, the env line and the
 * explanation (when the result has one) to f. */
void fb_table_print(FILE *f, const fb_spec *spec, const fb_result *r);

/* The explanation of a result (its "explain" object, docs/EXPLAIN.md): the
 * waterfall, the counts and the groups largest effect first (fb_table_print
 * prints it when the result has one). */
void fb_table_explain(FILE *f, const cJSON *explain);

/* b bytes as "512 B", "18.1 KiB", "2.4 MiB", ... ("-" when not a number);
 * negative amounts keep their sign ("-1.2 MiB"). */
void fb_table_bytes(char *buf, size_t cap, double b);

/* True when r has at least one variant and every variant's status is ok. */
bool fb_table_all_ok(const fb_result *r);

#endif
