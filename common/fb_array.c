#include "fb_array.h"

#include <stdlib.h>

bool fb_array_grow(void **arr, int *cap, int need, int max, size_t elem_size)
{
    if (need <= *cap)
        return true;
    if (need > max)
        return false;
    int nc = *cap ? *cap * 2 : 64;
    nc = nc < need ? need : (nc > max ? max : nc);
    void *p = realloc(*arr, (size_t)nc * elem_size);
    if (!p)
        return false;
    *arr = p;
    *cap = nc;
    return true;
}
