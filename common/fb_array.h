/* fb_array: growing arrays with a hard maximum (docs/STYLE.md: every buffer that
 * grows has one). */
#ifndef FB_ARRAY_H
#define FB_ARRAY_H

#include <stdbool.h>
#include <stddef.h>

/* Grows *arr, an array of *cap elements of elem_size bytes, so it holds at least
 * need elements: capacity doubles (appends stay amortized O(1)) but never
 * exceeds max.  Returns false, leaving *arr and *cap as they were, when need is
 * over max or realloc fails.  *arr may be NULL with *cap 0. */
bool fb_array_grow(void **arr, int *cap, int need, int max, size_t elem_size);

#endif
