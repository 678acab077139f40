/* fusionbench-worker: the queue daemon (docs/DESIGN.md "Queue and reliability").
 * One worker per device; each job runs in a child process. */
#include "fb_cpu.h"
#include "fb_log.h"
#include "fb_run.h"
#include "wk_loop.h"
#include "wk_opts.h"

int main(int argc, char **argv)
{
    wk_config cfg;
    int rc;

    fb_log_init("fusionbench-worker");
    fb_blas_fix_core(argv); /* before the job children it forks */
    rc = fb_cpu_isa_cli();
    if (rc != 0)
        return rc;
    rc = wk_opts_parse(argc, argv, &cfg);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    return wk_loop_run(&cfg);
}
