/* srv_suite_explain: a suite's explanation (docs/EXPLAIN.md, "A suite"), summed
 * from its jobs' explanations: the native engine's fusion groups (verdicts,
 * the lost ones by reason, the fused kernels' share of the roofline) and
 * Inductor's fusion decisions undone one by one ("inductor": verdicts, the
 * lost ones by reason, what undoing them recovered, Inductor's cost model
 * over the suite, the merges it refused by reason).  Pure: unit tested. */
#ifndef SRV_SUITE_EXPLAIN_H
#define SRV_SUITE_EXPLAIN_H

#include <cjson/cJSON.h>

/* explains[i] is job i's explanation (NULL or not an object: none) and
 * workloads[i] its workload (may be NULL).  A new object, or JSON null when
 * no job carries an explanation; NULL on ENOMEM. */
cJSON *srv_suite_explain(const char *const *workloads, const cJSON *const *explains, int n);

#endif
