/* gr_costmodel: the cost planner's per-class prediction (gr_costmodel.h). */
#include "gr_costmodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_stats.h"
#include "nat_cost.h"

void gr_cm_init(gr_cm *m, double gbps, double gflops, int threads)
{
    memset(m, 0, sizeof *m);
    if (threads < 1)
        threads = 1;
    m->gbps = gbps > 0 ? gbps : 20.0;
    m->gflops = gflops > 0 ? gflops : 50.0 * threads;
}

void gr_cm_free(gr_cm *m)
{
    free(m->c);
    memset(m, 0, sizeof *m);
}

double gr_cm_raw_ms(const gr_cm *m, const nat_launch *l)
{
    nat_cost c = nat_launch_cost(l, 4);
    double mem = (c.bytes_read + c.bytes_written) / (m->gbps * 1e6);
    double comp = c.flops / (m->gflops * 1e6);
    return mem > comp ? mem : comp;
}

/* The size step of a raw time: 0 below 1 us, 1 from 1 us, then one more
 * per factor of 4, at most 9 (from 65 ms). */
static int size_step(double raw_ms)
{
    int s = 0;
    for (double t = 1e-3; raw_ms >= t && s < 9; t *= 4)
        s++;
    return s;
}

void gr_cm_class_key(const gr_cm *m, const nat_launch *l, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "%s:", l->name ? l->name : "?");
    for (int i = 0; i < l->n_ops && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? "+" : "", l->ops[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, ":%s:b%d", nat_impl_name(nat_launch_impl(l)),
                 size_step(gr_cm_raw_ms(m, l)));
}

static gr_cm_class *find(const gr_cm *m, const char *key)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->c[i].key, key) == 0)
            return &m->c[i];
    return NULL;
}

/* The median of a class's samples, and the 90th percentile of their
 * distances from it (fb_stats: linear interpolation, as numpy's default). */
static void class_stats(const gr_cm_class *c, double *med, double *spread)
{
    double d[GR_CM_SAMPLES];
    fb_stats st;
    fb_stats_compute(c->lr, c->n, &st);
    *med = st.median;
    for (int i = 0; i < c->n; i++)
        d[i] = fabs(c->lr[i] - *med);
    fb_stats_compute(d, c->n, &st);
    *spread = st.p90;
}

bool gr_cm_predict(const gr_cm *m, const nat_launch *l, double *ms, double *err)
{
    char key[GR_CM_KEY];
    gr_cm_class_key(m, l, key, sizeof key);
    const gr_cm_class *c = find(m, key);
    double med, spread;
    if (!c || c->n < GR_CM_MIN_SAMPLES)
        return false;
    class_stats(c, &med, &spread);
    *ms = gr_cm_raw_ms(m, l) * exp(med);
    *err = spread > GR_CM_MIN_ERR ? spread : GR_CM_MIN_ERR;
    return true;
}

/* The class of key, made empty where there is none; NULL when full. */
static gr_cm_class *class_of(gr_cm *m, const char *key)
{
    gr_cm_class *c = find(m, key);
    if (c)
        return c;
    if (m->n >= GR_CM_MAX_CLASSES)
        return NULL;
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 64;
        gr_cm_class *nc = realloc(m->c, (size_t)cap * sizeof *nc);
        if (!nc)
            return NULL;
        m->c = nc;
        m->cap = cap;
    }
    c = &m->c[m->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->key, sizeof c->key, "%s", key);
    return c;
}

static void class_push(gr_cm_class *c, double lr)
{
    c->lr[c->next] = lr;
    c->next = (c->next + 1) % GR_CM_SAMPLES;
    if (c->n < GR_CM_SAMPLES)
        c->n++;
}

bool gr_cm_add(gr_cm *m, const nat_launch *l, double ms)
{
    char key[GR_CM_KEY];
    double raw = gr_cm_raw_ms(m, l);
    if (!(ms > 0) || !(raw > 0) || !isfinite(ms))
        return true; /* nothing to learn from: no bytes, no time */
    gr_cm_class_key(m, l, key, sizeof key);
    gr_cm_class *c = class_of(m, key);
    if (!c)
        return false;
    class_push(c, log(ms / raw));
    return true;
}

bool gr_cm_from_json(gr_cm *m, const cJSON *j, double gbps, double gflops, int threads)
{
    const cJSON *bw = cJSON_GetObjectItemCaseSensitive(j, "gbps");
    const cJSON *fl = cJSON_GetObjectItemCaseSensitive(j, "gflops");
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(j, "classes"), *e;
    gr_cm_init(m, gbps, gflops, threads);
    if (!cJSON_IsNumber(bw) || !cJSON_IsNumber(fl) || !(bw->valuedouble > 0) ||
        !(fl->valuedouble > 0) || !cJSON_IsObject(cls))
        return false;
    m->gbps = bw->valuedouble;
    m->gflops = fl->valuedouble;
    cJSON_ArrayForEach(e, cls)
    {
        const cJSON *s;
        gr_cm_class *c;
        if (!cJSON_IsArray(e) || strlen(e->string) >= GR_CM_KEY || !(c = class_of(m, e->string)))
            continue;
        cJSON_ArrayForEach(s, e)
        {
            if (cJSON_IsNumber(s) && isfinite(s->valuedouble) && fabs(s->valuedouble) < 50)
                class_push(c, s->valuedouble);
        }
    }
    return true;
}

cJSON *gr_cm_to_json(const gr_cm *m)
{
    cJSON *o = cJSON_CreateObject(), *cls = cJSON_CreateObject();
    bool ok = o && cls && cJSON_AddNumberToObject(o, "gbps", m->gbps) &&
              cJSON_AddNumberToObject(o, "gflops", m->gflops);
    for (int i = 0; ok && i < m->n; i++) {
        const gr_cm_class *c = &m->c[i];
        cJSON *a = cJSON_CreateArray();
        ok = a != NULL;
        /* oldest first, so reading them back keeps the ring's order */
        for (int k = 0; ok && k < c->n; k++) {
            int at = c->n < GR_CM_SAMPLES ? k : (c->next + k) % GR_CM_SAMPLES;
            ok = cJSON_AddItemToArray(a, cJSON_CreateNumber(c->lr[at]));
        }
        if (a && !(ok = ok && cJSON_AddItemToObject(cls, c->key, a)))
            cJSON_Delete(a);
    }
    if (ok && cJSON_AddItemToObject(o, "classes", cls))
        return o;
    cJSON_Delete(cls);
    cJSON_Delete(o);
    return NULL;
}
