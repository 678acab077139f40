#include "fb_table.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading members leniently ---- */

static const cJSON *tb_get(const cJSON *o, const char *key)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

/* A number member, NaN when absent, null or not a number. */
static double tb_num(const cJSON *o, const char *key)
{
    const cJSON *v = tb_get(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* A whole number member in [lo, hi], or def. */
static int64_t tb_int(const cJSON *o, const char *key, int64_t lo, int64_t hi, int64_t def)
{
    double d = tb_num(o, key);
    if (!(d >= (double)lo && d <= (double)hi))
        return def;
    return (int64_t)d;
}

/* A string member, or def. */
static const char *tb_str(const cJSON *o, const char *key, const char *def)
{
    const cJSON *v = tb_get(o, key);
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : def;
}

static double tb_arr_num(const cJSON *arr, int i)
{
    const cJSON *v = cJSON_IsArray(arr) ? cJSON_GetArrayItem(arr, i) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* ---- formats (fusionbench-run's since its first table) ---- */

/* v with prec decimals and a suffix, or "-" when unknown (NaN). */
static void tb_fmt_num(char *buf, size_t cap, double v, int prec, const char *suffix)
{
    if (isnan(v))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.*f%s", prec, v, suffix);
}

static void tb_fmt_int(char *buf, size_t cap, int64_t v)
{
    if (v < 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%lld", (long long)v);
}

void fb_table_bytes(char *buf, size_t cap, double b)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    const char *sign = b < 0 ? "-" : "";
    int u = 0;
    if (!isfinite(b)) {
        snprintf(buf, cap, "-");
        return;
    }
    b = fabs(b);
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    snprintf(buf, cap, u ? "%s%.1f %s" : "%s%.0f %s", sign, b, unit[u]);
}

static bool tb_is_ok(const fb_variant_result *v)
{
    return v->status == FB_VS_OK;
}

static const fb_variant_result *tb_baseline(const fb_result *r)
{
    for (int i = 0; i < r->n_variants; i++)
        if (strcmp(r->variants[i].name, r->baseline) == 0)
            return &r->variants[i];
    return NULL;
}

/* Speedup = baseline median / variant median, only for ok variants against an
 * ok baseline (METHOD.md: no speedup for a variant over tolerance). */
static double tb_speedup(const fb_result *r, const fb_variant_result *v)
{
    const fb_variant_result *b = tb_baseline(r);
    double m = v->latency.median;

    if (!b || !tb_is_ok(b) || !tb_is_ok(v) || !(m > 0))
        return NAN;
    return b->latency.median / m;
}

/* The speedup's 95% interval and verdict (docs/METHOD.md), "-" when the
 * result has none. */
static void tb_change(const fb_variant_result *v, char *ci, size_t ci_cap, char *verdict,
                      size_t v_cap)
{
    const char *change = fb_change_name(v->change);

    if (isnan(v->speedup_lo) || isnan(v->speedup_hi))
        snprintf(ci, ci_cap, "-");
    else
        snprintf(ci, ci_cap, "[%.3f, %.3f]", v->speedup_lo, v->speedup_hi);
    snprintf(verdict, v_cap, "%s",
             !change                                ? "-"
             : strcmp(change, "no_difference") == 0 ? "no difference"
                                                    : change);
}

static void tb_row(FILE *f, const fb_result *r, const fb_variant_result *vr)
{
    char med[24], p90[24], ci[48], cv[16], kern[16], fk[16], fo[16], peak[24], err[16], sp[16];
    char status[40], sp_ci[48], verdict[24];
    const fb_stats *lat = &vr->latency;
    bool timed = vr->n_samples > 0;

    tb_fmt_num(med, sizeof med, timed ? lat->median : NAN, 4, "");
    tb_fmt_num(p90, sizeof p90, timed ? lat->p90 : NAN, 4, "");
    if (timed)
        snprintf(ci, sizeof ci, "[%.4f, %.4f]", lat->ci95_lo, lat->ci95_hi);
    else
        snprintf(ci, sizeof ci, "-");
    tb_fmt_num(cv, sizeof cv, timed ? lat->cv * 100.0 : NAN, 1, "%");
    tb_fmt_int(kern, sizeof kern, vr->kernels);
    tb_fmt_int(fk, sizeof fk, vr->fused_kernels);
    tb_fmt_int(fo, sizeof fo, vr->fused_ops);
    tb_fmt_num(peak, sizeof peak,
               vr->peak_mem_bytes < 0 ? NAN : (double)vr->peak_mem_bytes / (1024.0 * 1024.0), 2,
               "");
    if (isnan(vr->max_rel_error))
        snprintf(err, sizeof err, "-");
    else
        snprintf(err, sizeof err, "%.2e", vr->max_rel_error);
    tb_fmt_num(sp, sizeof sp, tb_speedup(r, vr), 3, "x");
    tb_change(vr, sp_ci, sizeof sp_ci, verdict, sizeof verdict);
    snprintf(status, sizeof status, "%s%s", fb_vstatus_name(vr->status),
             vr->unstable ? ", unstable" : "");
    fprintf(f, "%-12s %-16s %10s %10s %-22s %6s %7s %5s/%-5s %9s %9s %8s  %-18s %s\n", vr->name,
            status, med, p90, ci, cv, kern, fk, fo, peak, err, sp, sp_ci, verdict);
}

/* What else ran while it was timed, and the rounds it took; nothing for a
 * result from before these were recorded. */
static void tb_noise(FILE *f, const fb_result *r)
{
    const fb_interference *intf = &r->interference;
    const fb_gpu_interference *gpu = &intf->gpu;
    int unstable = 0;

    if (r->repetition.stop[0])
        fprintf(f, "rounds: %d of %d asked (%s; extra time allowed %.1f s)\n", r->repetition.rounds,
                r->repetition.rounds_requested, r->repetition.stop, r->repetition.budget_s);
    if (!isnan(intf->timed_ms)) {
        char steal[24];
        tb_fmt_num(steal, sizeof steal, intf->steal_ms, 1, " ms");
        fprintf(f,
                "noise: timed %.0f ms; CPU steal %s; %lld involuntary context switches; "
                "page faults %lld minor, %lld major\n",
                intf->timed_ms, steal, (long long)intf->invol_switches,
                (long long)intf->minor_faults, (long long)intf->major_faults);
    }
    if (gpu->n_samples > 0) {
        int n = 0;
        fprintf(f, "gpu: SM clock %.0f-%.0f MHz; hottest %.0f C; throttled by:", gpu->sm_mhz_min,
                gpu->sm_mhz_max, gpu->temp_c_max);
        for (int b = 1; b < 64; b++) {
            const char *name = fb_throttle_reason_name(b);
            if (!(gpu->throttle_reasons >> b & 1))
                continue;
            if (name)
                fprintf(f, "%s %s", n++ ? "," : "", name);
            else
                fprintf(f, "%s bit_%d", n++ ? "," : "", b);
        }
        fprintf(f, "%s\n", n ? "" : " nothing");
    }
    for (int i = 0; i < r->n_variants; i++)
        unstable += r->variants[i].unstable;
    if (unstable)
        fprintf(f,
                "unstable: %d variant(s) varied more than the device allows (cv over 10%% CPU, "
                "5%% GPU); their figures move with the machine's load\n",
                unstable);
}

/* Who wrote the kernels of a group's side, joined by ',' into buf. */
static void tb_join(const cJSON *arr, char *buf, size_t cap)
{
    const cJSON *e;
    size_t used = 0;
    buf[0] = '\0';
    cJSON_ArrayForEach(e, arr)
    {
        if (!cJSON_IsString(e) || used + 2 >= cap)
            continue;
        int w = snprintf(buf + used, cap - used, "%s%s", used ? "," : "", e->valuestring);
        used = w < 0 ? used : (used + (size_t)w >= cap ? cap - 1 : used + (size_t)w);
    }
}

static void tb_group(FILE *f, const cJSON *g)
{
    /* the interval the verdict was judged on: the median's (older results: the mean's) */
    const cJSON *ci = tb_get(g, "median_delta_ci95"), *costs = tb_get(g, "costs");
    if (!cJSON_IsArray(ci))
        ci = tb_get(g, "delta_ci95");
    const cJSON *cf = tb_get(g, "counterfactual"), *reason = tb_get(g, "reason");
    char ie[96], ifu[48], cfs[64] = "";
    tb_join(tb_get(g, "eager_impl"), ie, sizeof ie);
    tb_join(tb_get(g, "fused_impl"), ifu, sizeof ifu);
    if (cJSON_IsObject(cf))
        snprintf(cfs, sizeof cfs, "%s (%+.3f ms)", tb_str(cf, "verdict", "?"),
                 tb_num(cf, "recovered_ms"));
    fprintf(f, "%4d  %-12s %9.3f %9.3f %9.3f  [%7.3f, %7.3f] %9.2f %9.3g  %-22s %-16s %s\n",
            (int)tb_int(g, "id", 0, INT32_MAX, -1), tb_str(g, "verdict", "?"),
            tb_num(g, "eager_ms"), tb_num(g, "fused_ms"), tb_num(g, "delta_ms"), tb_arr_num(ci, 0),
            tb_arr_num(ci, 1), tb_num(costs, "bytes_saved") / 1048576.0,
            tb_num(costs, "flops_added"), tb_str(g, "rule", "-"),
            cJSON_IsObject(reason) ? tb_str(reason, "code", "") : "", cfs);
    fprintf(f, "      %s -> %s\n", ie, ifu);
}

#define TB_EXPLAIN_ROWS 15
/* A share past 100%: the roof is a stream through memory, not a ceiling on
 * every kernel (docs/METHOD.md, "The machine's limits"). */
#define TB_OVER_ROOF                                                                               \
    "* over 100% of the roofline: the roof is a measured stream through memory (a triad on a "     \
    "CPU, a copy on a GPU); a kernel whose data sat in cache, or that mostly reads, moves bytes "  \
    "faster"

/* The inductor engine's explanation: the ladder, then its fused kernels. */
/* v with `digits` decimals (signed: with its sign always), or "-" when it is
 * unknown (NaN). */
static void tb_fmt(char *buf, size_t cap, double v, int digits, bool sign)
{
    if (isfinite(v))
        snprintf(buf, cap, sign ? "%+.*f" : "%.*f", digits, v);
    else
        snprintf(buf, cap, "-");
}

/* Prints the ids of the JSON array ids, comma separated, on one line. */
static void tb_id_list(FILE *f, const cJSON *ids)
{
    const cJSON *id;
    int n = 0;
    cJSON_ArrayForEach(id, ids)
    {
        const char *s = cJSON_GetStringValue(id);
        fprintf(f, "%s%s", n++ ? ", " : "", s ? s : "?");
    }
    fprintf(f, "\n");
}

/* A keep-test search's sets needed together ("these <verb> kept together"),
 * and "no kept set found" when it found neither causes nor such sets. */
static void tb_kept_groups(FILE *f, const cJSON *search, const char *verb)
{
    const cJSON *g;
    cJSON_ArrayForEach(g, tb_get(search, "together"))
    {
        fprintf(f, "    these %s kept together, neither half alone: ", verb);
        tb_id_list(f, g);
    }
    if (cJSON_GetArraySize(tb_get(search, "causes")) == 0 &&
        cJSON_GetArraySize(tb_get(search, "together")) == 0)
        fprintf(f, "    no kept set found\n");
}

/* Every decision undone at once lost, none alone: the keep-tests' finding
 * (explain.py _interaction). */
static void tb_inductor_interaction(FILE *f, const cJSON *it)
{
    if (!cJSON_IsObject(it))
        return;
    fprintf(f,
            "  the decisions' interaction (%d keep-tests%s): all undone at once is faster, none "
            "alone is\n",
            cJSON_GetArraySize(tb_get(it, "tests")),
            strcmp(tb_str(it, "stopped", ""), "budget") == 0 ? ", stopped by the budget" : "");
    if (cJSON_GetArraySize(tb_get(it, "causes")) > 0) {
        fprintf(f, "    any one of these kept fused, everything else unfused, costs the loss: ");
        tb_id_list(f, tb_get(it, "causes"));
    }
    tb_kept_groups(f, it, "cost it");
    const cJSON *al = tb_get(tb_get(it, "evidence"), "allocated_per_call");
    fprintf(f, "    reason: %s", tb_str(it, "reason", "unexplained"));
    if (cJSON_IsObject(al))
        fprintf(f, " (allocated at each call: %.1f MB fused, %.1f MB with every decision undone)",
                tb_num(tb_get(al, "fused"), "bytes") / 1e6,
                tb_num(tb_get(al, "all_undone"), "bytes") / 1e6);
    fprintf(f, "\n");
}

/* One part measured against the job's compile: what, saved ms, its
 * interval, the verdict. */
static void tb_part(FILE *f, const cJSON *p)
{
    const cJSON *ci = tb_get(p, "ci95");
    char sv[24], cis[48] = "-";
    tb_fmt(sv, sizeof sv, tb_num(p, "saved_ms"), 3, true);
    if (cJSON_IsArray(ci))
        snprintf(cis, sizeof cis, "[%.3f, %.3f]", tb_arr_num(ci, 0), tb_arr_num(ci, 1));
    fprintf(f, "  %-42s %9s  %-20s %s\n", tb_str(p, "what", "?"), sv, cis,
            tb_str(p, "verdict", "?"));
}

/* The nofusion -> inductor step split by what the no-fusion rung switches
 * off: the fusion decisions undone at once, then each other knob alone. */
static void tb_inductor_step(FILE *f, const cJSON *st)
{
    const cJSON *p;
    if (cJSON_GetArraySize(tb_get(st, "parts")) == 0)
        return;
    fprintf(f, "the step, part by part (saved ms: > 0, inductor is faster with it):\n");
    cJSON_ArrayForEach(p, tb_get(st, "parts"))
    {
        tb_part(f, p);
    }
    if (isfinite(tb_num(st, "decisions_interaction_ms")))
        fprintf(f, "  the decisions together minus their sum alone: %+.3f ms\n",
                tb_num(st, "decisions_interaction_ms"));
    if (isfinite(tb_num(st, "rest_ms")))
        fprintf(f, "  the step's rest (interaction of all the parts): %+.3f ms\n",
                tb_num(st, "rest_ms"));
    tb_inductor_interaction(f, tb_get(st, "interaction"));
}

/* The compile's choices beside fusion (its convolutions' channels-last
 * layout), each switched off alone on top of inductor; with how far
 * inductor is behind eager, when it is. */
static void tb_inductor_beside(FILE *f, const cJSON *fx)
{
    const cJSON *p, *med = tb_get(fx, "medians");
    double gap = tb_num(med, "inductor") - tb_num(med, "eager");
    if (cJSON_GetArraySize(tb_get(fx, "beside")) == 0)
        return;
    fprintf(f, "beside fusion, each choice of the compile switched off alone (saved ms: > 0, "
               "inductor is faster with it)");
    if (gap > 0)
        fprintf(f, "; inductor is %.3f ms slower than eager", gap);
    fprintf(f, ":\n");
    cJSON_ArrayForEach(p, tb_get(fx, "beside"))
    {
        tb_part(f, p);
    }
}

/* A part's effect on inductor's memory, when it was measured: "name +X", the
 * first one after lead (peak_mem_delta_bytes > 0: the job's compile peaks
 * that much higher than with the part undone or switched off;
 * alloc_delta_bytes > 0: it allocates that much more at each call). */
static void tb_mem_delta(FILE *f, const char *name, const cJSON *o, const char *key,
                         const char *lead, int *n)
{
    double d = tb_num(o, key);
    char b[32];
    if (!isfinite(d) || d == 0)
        return;
    fb_table_bytes(b, sizeof b, fabs(d));
    fprintf(f, "%s%s %s%s", (*n)++ ? "; " : lead, name, d > 0 ? "+" : "-", b);
}

static void tb_peak_delta(FILE *f, const char *name, const cJSON *o, int *n)
{
    tb_mem_delta(f, name, o, "peak_mem_delta_bytes",
                 "  what each part adds to inductor's peak: ", n);
}

/* The causes of the extra peak, each with what it brings back kept alone
 * (its keep-test's adds_bytes): "fuse-x (+36.1 MiB), ...". */
static void tb_peak_causes(FILE *f, const cJSON *pi)
{
    const cJSON *id, *t;
    int n = 0;
    cJSON_ArrayForEach(id, tb_get(pi, "causes"))
    {
        const char *s = cJSON_GetStringValue(id);
        double adds = NAN;
        cJSON_ArrayForEach(t, tb_get(pi, "tests"))
        {
            const cJSON *kept = tb_get(t, "kept");
            const char *k = cJSON_GetStringValue(cJSON_GetArrayItem(kept, 0));
            if (s && k && cJSON_GetArraySize(kept) == 1 && strcmp(s, k) == 0)
                adds = tb_num(t, "adds_bytes");
        }
        fprintf(f, "%s%s", n++ ? ", " : "", s ? s : "?");
        if (isfinite(adds)) {
            char b[32];
            fb_table_bytes(b, sizeof b, adds);
            fprintf(f, " (+%s)", b);
        }
    }
    fprintf(f, "\n");
}

/* Inductor's extra peak held by fusions together or by any one of several:
 * the memory keep-tests' finding (explain.py _peak_interaction). */
static void tb_inductor_peak_interaction(FILE *f, const cJSON *pi)
{
    char b[32];
    if (!cJSON_IsObject(pi))
        return;
    fb_table_bytes(b, sizeof b, tb_num(pi, "extra_peak_bytes"));
    fprintf(f,
            "  inductor's peak is %s above every decision undone, and no decision undone alone "
            "lowers it by half of that (%d profiled keep-tests%s):\n",
            b, cJSON_GetArraySize(tb_get(pi, "tests")),
            strcmp(tb_str(pi, "stopped", ""), "budget") == 0 ? ", stopped by the budget" : "");
    if (cJSON_GetArraySize(tb_get(pi, "causes")) > 0) {
        fprintf(f, "    any one of these kept fused, everything else unfused, brings it back "
                   "(kept alone, it adds): ");
        tb_peak_causes(f, pi);
    }
    tb_kept_groups(f, pi, "bring it back");
    const cJSON *al = tb_get(tb_get(pi, "evidence"), "allocated_per_call");
    if (cJSON_IsObject(al))
        fprintf(f,
                "    allocated at each call: %.1f MB fused, %.1f MB with every decision undone\n",
                tb_num(tb_get(al, "fused"), "bytes") / 1e6,
                tb_num(tb_get(al, "all_undone"), "bytes") / 1e6);
}

/* The ladder's order of the rungs an object is keyed by (a server's JSONB
 * keeps its keys in an order of its own): eager, inductor-nofusion,
 * inductor, then the rest. */
static int tb_rung_rank(const char *name)
{
    static const char *order[] = {"eager", "inductor-nofusion", "inductor"};
    for (int i = 0; i < 3; i++)
        if (name && strcmp(name, order[i]) == 0)
            return i;
    return 3;
}

static int tb_by_value_desc(const void *a, const void *b)
{
    double x = (*(const cJSON *const *)a)->valuedouble, y = (*(const cJSON *const *)b)->valuedouble;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* One rung's peak and what held it, the largest holder first. */
static void tb_rung_memory(FILE *f, const cJSON *rung)
{
    const cJSON *h, *held[16];
    int k = 0;
    char b[32];
    fb_table_bytes(b, sizeof b, tb_num(rung, "peak_bytes"));
    fprintf(f, "  %-22s %10s ", rung->string ? rung->string : "?", b);
    cJSON_ArrayForEach(h, tb_get(rung, "held_by"))
    {
        if (cJSON_IsNumber(h) && k < 16)
            held[k++] = h;
    }
    qsort(held, (size_t)k, sizeof held[0], tb_by_value_desc);
    for (int i = 0; i < k; i++) {
        fb_table_bytes(b, sizeof b, held[i]->valuedouble);
        fprintf(f, "%s%s %s", i ? ", " : " ", held[i]->string ? held[i]->string : "?", b);
    }
    fprintf(f, "\n");
}

static void tb_break_even(FILE *f, const cJSON *be)
{
    double cold = tb_num(be, "iterations_cold"), warm = tb_num(be, "iterations_warm");
    double save = tb_num(be, "saving_ms_per_iter");
    fprintf(f, "compile against run time, %s: %s %.3f ms an iteration against eager; ",
            be->string ? be->string : "?", save < 0 ? "costs" : "saves", fabs(save));
    if (isfinite(cold))
        fprintf(f,
                "its cold compile (%.1f s) pays after %.0f iterations, a warm one (%.1f s) "
                "after %.0f\n",
                tb_num(be, "compile_cold_ms") / 1e3, cold, tb_num(be, "compile_warm_ms") / 1e3,
                warm);
    else
        fprintf(f, "its compile never pays\n");
}

/* Each rung's peak in one iteration and what held it, then the parts whose
 * undoing moved the job's peak; and compile time against run time, the
 * rungs in the ladder's order. */
static void tb_inductor_memory(FILE *f, const cJSON *fx)
{
    const cJSON *rung, *e;
    if (cJSON_GetArraySize(tb_get(fx, "memory")) > 0)
        fprintf(f, "memory, each rung's peak in one iteration (allocated over what was live "
                   "before it) and what held it:\n");
    for (int rank = 0; rank <= 3; rank++) {
        cJSON_ArrayForEach(rung, tb_get(fx, "memory"))
        {
            if (tb_rung_rank(rung->string) == rank)
                tb_rung_memory(f, rung);
        }
    }
    int n = 0;
    cJSON_ArrayForEach(e, tb_get(fx, "fusions"))
    {
        tb_peak_delta(f, tb_str(e, "id", "?"), e, &n);
    }
    cJSON_ArrayForEach(e, tb_get(tb_get(fx, "step"), "parts"))
    {
        tb_peak_delta(f, tb_str(e, "knob", "all fusion decisions"), e, &n);
    }
    cJSON_ArrayForEach(e, tb_get(fx, "beside"))
    {
        tb_peak_delta(f, tb_str(e, "knob", "?"), e, &n);
    }
    if (n)
        fprintf(f, " (against it undone or switched off)\n");
    n = 0; /* allocated at each call (CPU): a buffer past 32 MiB is mapped afresh each time */
    cJSON_ArrayForEach(e, tb_get(fx, "fusions"))
    {
        tb_mem_delta(f, tb_str(e, "id", "?"), e, "alloc_delta_bytes",
                     "  what each decision adds to what inductor allocates at each call: ", &n);
    }
    if (n)
        fprintf(f, " (against it undone alone)\n");
    tb_inductor_peak_interaction(f, tb_get(fx, "peak_interaction"));
    for (int rank = 0; rank <= 3; rank++) {
        cJSON_ArrayForEach(e, tb_get(fx, "break_even"))
        {
            if (tb_rung_rank(e->string) == rank)
                tb_break_even(f, e);
        }
    }
}

/* A fusion row's reason column: its reason when it lost, else what a
 * keep-test search made it (a cause of the interaction's loss or of the
 * extra peak, or a member of a set needed together), else "-". */
static const char *tb_fusion_reason(const cJSON *e)
{
    const char *r = tb_str(e, "reason", NULL), *it = tb_str(e, "interaction", ""),
               *pk = tb_str(e, "peak_interaction", "");
    if (r)
        return r;
    if (*it)
        return strcmp(it, "cause") == 0 ? "interaction: cause" : "interaction: group";
    if (*pk)
        return strcmp(pk, "cause") == 0 ? "extra peak: cause" : "extra peak: group";
    return "-";
}

/* The inductor explanation's "fusions" (worker/engine/inductor/explain.py):
 * each of Inductor's fusion decisions, undone, with its verdict. */
static void tb_inductor_fusions(FILE *f, const cJSON *fx)
{
    const cJSON *c = tb_get(fx, "counts"), *e, *all = tb_get(fx, "all_lost_undone");
    const cJSON *cm = tb_get(fx, "cost_model"), *missed = tb_get(fx, "missed");
    if (tb_get(fx, "error")) {
        fprintf(f, "\nfusion by fusion: not measured: %s\n", tb_str(fx, "error", ""));
        return;
    }
    char noise[24], parts[24], inter[24]; /* "-" where not measured (a budget of 0) */
    tb_fmt(noise, sizeof noise, tb_num(fx, "layout_noise_ms"), 3, false);
    tb_fmt(parts, sizeof parts, tb_num(fx, "sum_of_parts_ms"), 3, true);
    tb_fmt(inter, sizeof inter, tb_num(fx, "interaction_ms"), 3, true);
    fprintf(f,
            "\nInductor's fusions, each undone (%d decisions; %d won, %d lost, %d no difference, "
            "%d not measured in the %.0f s budget; layout noise %s ms)\n",
            (int)tb_int(fx, "decisions", 0, INT32_MAX, 0), (int)tb_int(c, "won", 0, INT32_MAX, 0),
            (int)tb_int(c, "lost", 0, INT32_MAX, 0),
            (int)tb_int(c, "no_difference", 0, INT32_MAX, 0),
            (int)tb_int(c, "not_measured", 0, INT32_MAX, 0), tb_num(fx, "budget_s"), noise);
    int64_t recompiled = tb_int(fx, "recompiles_during_comparisons", 0, INT32_MAX, 0);
    if (recompiled > 0)
        fprintf(f,
                "warning: %lld graphs compiled while comparisons ran: those comparisons timed "
                "code other than they name (\"recompiled\" in each comparison)\n",
                (long long)recompiled);
    if (isfinite(tb_num(fx, "ladder_step_ms")) && isfinite(tb_num(fx, "sum_of_parts_ms")))
        fprintf(f,
                "all fusion (inductor-nofusion -> inductor) saved %+.3f ms; the fusions measured "
                "alone add up to %s ms; interaction %s ms\n",
                tb_num(fx, "ladder_step_ms"), parts, inter);
    else if (isfinite(tb_num(fx, "ladder_step_ms")))
        fprintf(f,
                "all fusion (inductor-nofusion -> inductor) saved %+.3f ms; no fusion was "
                "measured alone, so there is no sum of parts to set against it\n",
                tb_num(fx, "ladder_step_ms"));
    tb_inductor_step(f, tb_get(fx, "step"));
    tb_inductor_beside(f, fx);
    if (cJSON_IsObject(all))
        fprintf(f, "all %d lost fusions undone at once: %+.3f ms recovered [%.3f, %.3f]\n",
                cJSON_GetArraySize(tb_get(all, "ids")), tb_num(all, "recovered_ms"),
                -tb_arr_num(tb_get(all, "ci95"), 1), -tb_arr_num(tb_get(all, "ci95"), 0));
    if (isfinite(tb_num(cm, "spearman")))
        fprintf(f,
                "Inductor's cost model: rank correlation %.2f between predicted shared bytes and "
                "measured saving; %d predicted to help and measured to hurt\n",
                tb_num(cm, "spearman"), cJSON_GetArraySize(tb_get(cm, "bad_fusions")));
    if (isfinite(tb_num(cm, "spearman_units")))
        fprintf(f,
                "Inductor's cost model over the %d units measured (a fusion alone, or a chunk "
                "within the noise, its predictions summed): rank correlation %.2f\n",
                cJSON_GetArraySize(tb_get(cm, "units")), tb_num(cm, "spearman_units"));
    double fused_share = tb_num(fx, "fused_roofline_share");
    bool over_roof = isfinite(fused_share) && fused_share > 1;
    if (isfinite(fused_share))
        fprintf(f,
                "the kernels holding a fusion reach %.0f%%%s of the roofline (time-weighted; "
                "Inductor's byte and FLOP counts)\n",
                100 * fused_share, over_roof ? "*" : "");
    fprintf(f, "%-18s %-12s %-14s %9s %9s  %-20s %12s %5s  %-18s %s\n", "fusion", "kind", "verdict",
            "kernel ms", "saved ms", "95% CI", "predicted B", "roof", "reason", "kernel");
    int n = 0;
    cJSON_ArrayForEach(e, tb_get(fx, "fusions"))
    {
        if (n++ >= TB_EXPLAIN_ROWS)
            break;
        const cJSON *ci = tb_get(e, "saved_ci95");
        char cis[48] = "-", km[24], sv[24], pb[24], rf[16] = "-";
        double share = tb_num(tb_get(e, "costs"), "roofline_share");
        if (cJSON_IsArray(ci))
            snprintf(cis, sizeof cis, "[%.3f, %.3f]", tb_arr_num(ci, 0), tb_arr_num(ci, 1));
        tb_fmt(km, sizeof km, tb_num(e, "kernel_ms"), 4, false);
        tb_fmt(sv, sizeof sv, tb_num(e, "saved_ms"), 4, true);
        tb_fmt(pb, sizeof pb, tb_num(e, "predicted_shared_bytes"), 0, false);
        if (isfinite(share))
            snprintf(rf, sizeof rf, "%.0f%%%s", 100 * share, share > 1 ? "*" : "");
        over_roof |= isfinite(share) && share > 1;
        fprintf(f, "%-18s %-12s %-14s %9s %9s  %-20s %12s %5s  %-18s %s\n", tb_str(e, "id", "?"),
                tb_str(e, "kind", "?"), tb_str(e, "verdict", "?"), km, sv, cis, pb, rf,
                tb_fusion_reason(e), tb_str(e, "kernel", "-"));
    }
    if (over_roof)
        fprintf(f, "%s\n", TB_OVER_ROOF);
    n = 0; /* each lost fusion's evidence in words (explain.py why_of) */
    cJSON_ArrayForEach(e, tb_get(fx, "fusions"))
    {
        if (strcmp(tb_str(e, "verdict", ""), "lost") != 0 || !tb_str(e, "why", NULL))
            continue;
        if (n++ == 0)
            fprintf(f, "why they lost:\n");
        if (n > TB_EXPLAIN_ROWS) {
            fprintf(f, "  ...\n");
            break;
        }
        fprintf(f, "  %s %s: %s\n", tb_str(e, "id", "?"), tb_str(e, "reason", "?"),
                tb_str(e, "why", ""));
    }
    if (cJSON_GetArraySize(tb_get(missed, "top")) > 0) {
        fprintf(f, "merges Inductor refused, by the bytes they would have shared:\n");
        n = 0;
        cJSON_ArrayForEach(e, tb_get(missed, "top"))
        {
            if (n++ >= 5)
                break;
            const char *a = cJSON_GetStringValue(cJSON_GetArrayItem(tb_get(e, "nodes"), 0));
            const char *b = cJSON_GetStringValue(cJSON_GetArrayItem(tb_get(e, "nodes"), 1));
            fprintf(f, "  %12.0f B  %s + %s: %s\n", tb_num(e, "shared_bytes"), a ? a : "?",
                    b ? b : "?", tb_str(e, "reason", "?"));
        }
    }
    tb_inductor_memory(f, fx);
}

static void tb_explain_inductor(FILE *f, const cJSON *ex)
{
    const cJSON *st, *k;
    fprintf(f, "\nexplanation (docs/EXPLAIN.md): %s\nthe ladder, what each step changes:\n",
            tb_str(ex, "note", ""));
    cJSON_ArrayForEach(st, tb_get(ex, "ladder"))
    {
        const cJSON *ci = tb_get(st, "saved_ci95");
        fprintf(f, "  %-22s -> %-22s %+9.3f ms [%.3f, %.3f]  %s\n", tb_str(st, "from", "?"),
                tb_str(st, "to", "?"), tb_num(st, "saved_ms"), tb_arr_num(ci, 0), tb_arr_num(ci, 1),
                tb_str(st, "mechanism", ""));
    }
    fprintf(f, "%-40s %6s %10s  %s\n", "fused Inductor kernel", "count", "mean ms",
            "ATen ops (eager's ms per call; * also a library call)");
    int n = 0;
    cJSON_ArrayForEach(k, tb_get(ex, "kernels"))
    {
        if (n++ >= TB_EXPLAIN_ROWS)
            break;
        const cJSON *op;
        char ops[320] = "";
        size_t used = 0;
        cJSON_ArrayForEach(op, tb_get(k, "ops"))
        {
            const char *name = tb_str(op, "op", "?");
            char ms[24]; /* "-": eager never called it (an op only the compile has) */
            tb_fmt(ms, sizeof ms, tb_num(op, "eager_ms_per_call"), 3, false);
            int w = snprintf(ops + used, sizeof ops - used, "%s%s%s (%s)", used ? ", " : "",
                             strncmp(name, "aten.", 5) == 0 ? name + 5 : name,
                             cJSON_IsTrue(tb_get(op, "extern")) ? "*" : "", ms);
            used = w < 0 || used + (size_t)w >= sizeof ops ? sizeof ops - 1 : used + (size_t)w;
        }
        fprintf(f, "%-40.40s %6d %10.4f  %s\n", tb_str(k, "kernel", "?"),
                (int)tb_int(k, "count", 0, INT32_MAX, 0), tb_num(k, "mean_ms"), ops);
    }
    if (tb_get(ex, "fusions"))
        tb_inductor_fusions(f, tb_get(ex, "fusions"));
}

void fb_table_explain(FILE *f, const cJSON *ex)
{
    if (!cJSON_IsObject(ex))
        return;
    if (tb_get(ex, "unavailable")) {
        fprintf(f, "\nno explanation: %s\n", tb_str(ex, "unavailable", ""));
        return;
    }
    if (strcmp(tb_str(ex, "engine", ""), "inductor") == 0) {
        tb_explain_inductor(f, ex);
        return;
    }
    const cJSON *w = tb_get(ex, "waterfall"), *s = tb_get(ex, "summary");
    const cJSON *ci = tb_get(w, "measured_ci95"), *groups = tb_get(ex, "groups"), *g;
    fprintf(f, "\nexplanation (docs/EXPLAIN.md): %d profiled rounds, noise threshold %.0f%%\n",
            (int)tb_int(ex, "rounds", 0, INT32_MAX, 0), 100 * tb_num(ex, "noise_threshold"));
    /* a GPU job's: where its launch times came from, and why not CUPTI */
    const char *lt = tb_str(ex, "launch_times", "");
    if (lt[0]) {
        fprintf(f, "launch times: %s", lt);
        if (strcmp(lt, "cupti_activity") == 0)
            fprintf(f, " (%d activity records no launch mark named)",
                    (int)tb_int(ex, "unmarked_activity", 0, INT32_MAX, 0));
        if (tb_str(ex, "launch_times_why", "")[0])
            fprintf(f, " (not CUPTI: %s)", tb_str(ex, "launch_times_why", ""));
        fputc('\n', f);
    }
    fprintf(f,
            "waterfall: eager %.3f ms - won %.3f - lost %.3f - within noise %.3f - outside "
            "groups %.3f - overhead %.3f - unexplained %.3f = fused %.3f ms\n"
            "  (measured difference %.3f ms, 95%% CI [%.3f, %.3f]; the bars %.3f [%.3f, %.3f]; "
            "re-measured beside them %.3f [%.3f, %.3f])\n",
            tb_num(w, "eager_ms"), tb_num(w, "won_ms"), tb_num(w, "lost_ms"),
            tb_num(w, "within_noise_ms"), tb_num(w, "outside_groups_ms"), tb_num(w, "overhead_ms"),
            tb_num(w, "unexplained_ms"), tb_num(w, "fused_ms"), tb_num(w, "measured_ms"),
            tb_arr_num(ci, 0), tb_arr_num(ci, 1), tb_num(w, "explained_ms"),
            tb_arr_num(tb_get(w, "explained_ci95"), 0), tb_arr_num(tb_get(w, "explained_ci95"), 1),
            tb_num(w, "remeasured_ms"), tb_arr_num(tb_get(w, "remeasured_ci95"), 0),
            tb_arr_num(tb_get(w, "remeasured_ci95"), 1));
    fprintf(f, "groups: %d won, %d lost, %d within noise; ", (int)tb_int(s, "won", 0, INT32_MAX, 0),
            (int)tb_int(s, "lost", 0, INT32_MAX, 0),
            (int)tb_int(s, "within_noise", 0, INT32_MAX, 0));
    double share = tb_num(s, "fused_roofline_share");
    if (isfinite(share))
        fprintf(f, "fused kernels at %.0f%% of the roofline\n", 100 * share);
    else
        fprintf(f, "no roofline measured (fusionbench-run --roofline; a worker measures it)\n");
    const cJSON *all = tb_get(ex, "all_lost_undone");
    if (cJSON_IsObject(all))
        fprintf(f,
                "all %d lost groups undone at once: %+.3f ms recovered, 95%% CI [%.3f, %.3f], of "
                "%.3f ms they lost: %s\n",
                (int)tb_int(all, "groups", 0, INT32_MAX, 0), tb_num(all, "recovered_ms"),
                tb_arr_num(tb_get(all, "recovered_ci95"), 0),
                tb_arr_num(tb_get(all, "recovered_ci95"), 1), -tb_num(all, "lost_ms"),
                tb_str(all, "verdict", "?"));
    if (isfinite(tb_num(ex, "layout_noise_ms")))
        fprintf(f,
                "counterfactuals: confirmed past %.3f ms, what two builds of the same plan "
                "differ by (memory layout)\n",
                tb_num(ex, "layout_noise_ms"));
    fprintf(f, "%4s  %-12s %9s %9s %9s  %-18s %9s %9s  %-22s %-16s %s\n", "id", "verdict",
            "eager ms", "fused ms", "delta ms", "verdict's 95% CI", "saved MiB", "FLOPs +", "rule",
            "reason", "counterfactual");
    int k = 0, n = cJSON_GetArraySize(groups);
    cJSON_ArrayForEach(g, groups)
    {
        if (k++ >= TB_EXPLAIN_ROWS)
            break;
        tb_group(f, g);
    }
    if (n > TB_EXPLAIN_ROWS)
        fprintf(f, "  ... %d more groups (--json has them all)\n", n - TB_EXPLAIN_ROWS);
}

void fb_table_print(FILE *f, const fb_spec *spec, const fb_result *r)
{
    const fb_env *env = &r->env;

    fprintf(f, "%s  engine %s  device %s  dtype %s  batch %d  warmup %d  iterations %d\n\n",
            spec->workload, spec->engine, spec->device, spec->dtype, spec->batch_size, spec->warmup,
            spec->iterations);
    fprintf(f, "%-12s %-16s %10s %10s %-22s %6s %7s %11s %9s %9s %8s  %-18s %s\n", "variant",
            "status", "median ms", "p90 ms", "95% CI of median", "cv", "kernels", "fused k/ops",
            "peak MiB", "max rel", "speedup", "95% CI of speedup", "verdict");
    for (int i = 0; i < r->n_variants; i++)
        tb_row(f, r, &r->variants[i]);
    for (int i = 0; i < r->n_variants; i++)
        if (!tb_is_ok(&r->variants[i]))
            fprintf(f, "  %s: %s\n", r->variants[i].name, r->variants[i].message);
    fprintf(f, "\nbaseline %s; plan %.3f ms (not in latency); speedup = baseline median / median\n",
            r->baseline, r->plan_ms);
    for (int i = 0; i < r->n_variants; i++) { /* an output checked against one from elsewhere */
        const fb_variant_result *v = &r->variants[i];
        const char *against =
            strcmp(v->extra_key, "reference") == 0
                ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v->extra, "against"))
                : NULL;
        if (against)
            fprintf(f, "%s's max rel is against %s\n", v->name, against);
    }
    tb_noise(f, r);
    fprintf(f, "env: %s | %d threads | %s | host %s | fusionbench %s\n", env->cpu, env->threads,
            env->blas, env->hostname, env->fusionbench);
    if (env->roofline_gbps > 0 && env->roofline_gflops > 0)
        fprintf(f, "roofline: triad %.1f GB/s, GEMM %.1f GFLOP/s on these threads\n",
                env->roofline_gbps, env->roofline_gflops);
    fb_table_explain(f, r->explain);
}

bool fb_table_all_ok(const fb_result *r)
{
    if (r->n_variants <= 0)
        return false;
    for (int i = 0; i < r->n_variants; i++)
        if (!tb_is_ok(&r->variants[i]))
            return false;
    return true;
}
