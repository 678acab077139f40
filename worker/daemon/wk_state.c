/* wk_state: see wk_state.h. */
#include "wk_state.h"

#include <inttypes.h>
#include <signal.h>
#include <string.h>

#include "fb_log.h"
#include "wk_time.h"

static volatile sig_atomic_t st_signals; /* SIGTERM/SIGINT received */
static bool st_stop;                     /* stop now: this worker lost its GPU */
static bool st_drain_asked;              /* an operator's drain (db_worker_drain) */
static int64_t st_grace_ms;              /* --drain-grace */
static int64_t st_signal_ms = -1;        /* when the first signal was noticed */

static void on_stop_signal(int sig)
{
    (void)sig;
    if (st_signals < 2)
        st_signals++;
}

void wk_state_init(int64_t grace_ms)
{
    struct sigaction sa;

    st_grace_ms = grace_ms;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Dates the first signal (the handler only counts). */
static void notice_signal(void)
{
    if (st_signals && st_signal_ms < 0) {
        st_signal_ms = wk_time_now_ms();
        fb_info("stop signal: draining (claiming no more; a running job may go on for %" PRId64
                " s)",
                st_grace_ms / 1000);
    }
}

bool wk_state_stopping(void)
{
    notice_signal();
    if (st_stop || st_signals >= 2)
        return true;
    return st_signals == 1 && wk_time_now_ms() - st_signal_ms >= st_grace_ms;
}

bool wk_state_draining(void)
{
    notice_signal();
    return st_signals || st_drain_asked || st_stop;
}

void wk_state_drain_asked(bool asked)
{
    if (asked && !st_drain_asked) {
        st_drain_asked = true;
        fb_info("drain requested by an operator: finishing the running job, claiming no more");
    }
}

void wk_state_stop(void)
{
    st_stop = true;
}
