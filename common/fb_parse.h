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

#endif
