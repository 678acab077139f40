/* fb_parse: strict parsing of numbers from outside text (command lines,
 * environment).  Unlike atoi, a partial number, trailing text, overflow or a
 * value out of range is an error, never a silent 0. */
#ifndef FB_PARSE_H
#define FB_PARSE_H

#include <stdbool.h>

/* Parses the whole of s as a decimal integer in [lo, hi] into *out.  Returns
 * false (leaving *out alone) when s is empty, has any other character, or the
 * value is out of range. */
bool fb_parse_int(const char *s, int lo, int hi, int *out);

/* The exit status of a program given bad arguments. */
#define FB_EXIT_USAGE 2

/* A bad command-line argument: "PROGRAM: ARG: WHY" on stderr (PROGRAM is the
 * name the program was started by; "PROGRAM: WHY" where WHY begins with ARG,
 * as an fb_err's message often names its field, or ARG is empty).  Returns
 * FB_EXIT_USAGE. */
int fb_cli_bad_arg(const char *arg, const char *why);

/* fb_parse_int for the value s of the option arg: 0, or fb_cli_bad_arg's
 * status with a message naming the range and the value. */
int fb_cli_parse_int(const char *arg, const char *s, int lo, int hi, int *out);

/* True for an environment entry "NAME=VALUE" that carries the database's
 * address or credentials: DATABASE_URL and libpq's PG* (PGPASSWORD,
 * PGPASSFILE, PGHOST, ...).  What a job's process and the inductor runner are
 * started without. */
bool fb_env_is_database(const char *kv);

#endif
