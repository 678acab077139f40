/* srv_ratelimit: see srv_ratelimit.h.  An open-addressing table keyed by the
 * key's FNV-1a hash, linear probing, grown by doubling; full buckets are
 * swept out before it grows. */
#include "srv_ratelimit.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX    64
#define FIRST_CAP  64
#define MAX_LOAD_N 3 /* grow or sweep past 3/4 full */
#define MAX_LOAD_D 4

typedef struct bucket {
    char key[KEY_MAX]; /* "" = free slot */
    double tokens;
    double at; /* when tokens was last brought up to date */
} bucket;

struct srv_ratelimit {
    pthread_mutex_t mu;
    double rate, burst;
    bucket *slots;
    int cap, used;
};

static uint32_t hash_of(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

srv_ratelimit *srv_ratelimit_new(double rate, double burst)
{
    srv_ratelimit *rl = calloc(1, sizeof *rl);
    if (!rl)
        return NULL;
    rl->slots = calloc(FIRST_CAP, sizeof *rl->slots);
    if (!rl->slots) {
        free(rl);
        return NULL;
    }
    pthread_mutex_init(&rl->mu, NULL);
    rl->rate = rate > 0 ? rate : 1;
    rl->burst = burst >= 1 ? burst : 1;
    rl->cap = FIRST_CAP;
    return rl;
}

void srv_ratelimit_free(srv_ratelimit *rl)
{
    if (!rl)
        return;
    pthread_mutex_destroy(&rl->mu);
    free(rl->slots);
    free(rl);
}

/* The tokens b holds at now (refilled, at most burst). */
static double level(const srv_ratelimit *rl, const bucket *b, double now)
{
    double t = b->tokens + (now > b->at ? (now - b->at) * rl->rate : 0);
    return t < rl->burst ? t : rl->burst;
}

/* Puts b into slots (cap a power of two) at its hash's first free slot. */
static void place(bucket *slots, int cap, const bucket *b)
{
    unsigned i = hash_of(b->key) & (unsigned)(cap - 1);
    while (slots[i].key[0])
        i = (i + 1) & (unsigned)(cap - 1);
    slots[i] = *b;
}

/* Rebuilds the table with cap slots, keeping only buckets not yet full at
 * now: a full bucket is what a new key gets anyway.  False when out of memory
 * (the table is unchanged). */
static bool rebuild(srv_ratelimit *rl, int cap, double now)
{
    bucket *slots = calloc((size_t)cap, sizeof *slots);
    int used = 0;
    if (!slots)
        return false;
    for (int i = 0; i < rl->cap; i++) {
        const bucket *b = &rl->slots[i];
        if (b->key[0] && level(rl, b, now) < rl->burst) {
            place(slots, cap, b);
            used++;
        }
    }
    free(rl->slots);
    rl->slots = slots;
    rl->cap = cap;
    rl->used = used;
    return true;
}

/* Makes room for one more bucket: sweep full ones, grow when that is not
 * enough.  False when out of memory. */
static bool make_room(srv_ratelimit *rl, double now)
{
    if ((rl->used + 1) * MAX_LOAD_D <= rl->cap * MAX_LOAD_N)
        return true;
    if (!rebuild(rl, rl->cap, now))
        return false;
    if ((rl->used + 1) * MAX_LOAD_D <= rl->cap * MAX_LOAD_N)
        return true;
    return rebuild(rl, rl->cap * 2, now);
}

double srv_ratelimit_take(srv_ratelimit *rl, const char *key, double now_s)
{
    char k[KEY_MAX];
    unsigned i;
    double wait = 0;

    snprintf(k, sizeof k, "%s", key && key[0] ? key : "-");
    pthread_mutex_lock(&rl->mu);
    i = hash_of(k) & (unsigned)(rl->cap - 1);
    while (rl->slots[i].key[0] && strcmp(rl->slots[i].key, k) != 0)
        i = (i + 1) & (unsigned)(rl->cap - 1);
    if (!rl->slots[i].key[0]) {
        /* A new key starts with a full bucket.  Out of memory: let it pass
         * rather than refuse everyone. */
        if (!make_room(rl, now_s))
            goto out;
        bucket b = {.tokens = rl->burst, .at = now_s};
        memcpy(b.key, k, sizeof b.key);
        place(rl->slots, rl->cap, &b);
        rl->used++;
        i = hash_of(k) & (unsigned)(rl->cap - 1);
        while (strcmp(rl->slots[i].key, k) != 0)
            i = (i + 1) & (unsigned)(rl->cap - 1);
    }
    bucket *b = &rl->slots[i];
    double t = level(rl, b, now_s);
    if (t >= 1 - 1e-9) { /* clocks in floating seconds: 0.3 - 0.2 < 0.1 */
        b->tokens = t > 1 ? t - 1 : 0;
        b->at = now_s;
    } else {
        wait = (1 - t) / rl->rate;
    }
out:
    pthread_mutex_unlock(&rl->mu);
    return wait;
}

int srv_ratelimit_size(srv_ratelimit *rl)
{
    pthread_mutex_lock(&rl->mu);
    int n = rl->used;
    pthread_mutex_unlock(&rl->mu);
    return n;
}
