/* fb_table: the result table of fusionbench-run, printed from a job's spec and
 * result as JSON (docs/API.md), so that fusionbench-run (which encodes its structs
 * first) and the fusionbench client (which has the server's JSON) print the same
 * table from one formatter.
 *
 * The JSON is outside input for the client: a member that is missing, null or
 * of another type prints as unknown ("-", "" or 0), never as a crash. */
#ifndef FB_TABLE_H
#define FB_TABLE_H

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

/* Prints the header line, one row per variant of result.variants, the messages
 * of variants that are not ok, the baseline line and the env line to f.
 * spec and result may be NULL (their fields print as unknown). */
void fb_table_print(FILE *f, const cJSON *spec, const cJSON *result);

/* The explanation of a result (its "explain" object, docs/EXPLAIN.md): the
 * waterfall, the counts and the groups largest effect first (fb_table_print
 * prints it when the result has one). */
void fb_table_explain(FILE *f, const cJSON *explain);

/* True when result has at least one variant and every variant's status is "ok". */
bool fb_table_all_ok(const cJSON *result);

#endif
