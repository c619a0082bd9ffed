/* Signals: SIGTERM and SIGINT become a flag the event loop reads, so the
 * daemon can leave the cluster gracefully; SIGPIPE is ignored. */
#include <signal.h>
#include <string.h>

#include "starling/platform.h"

static volatile sig_atomic_t stop_signal; /* last stop signal seen, or 0 */

static void on_stop(int sig) {
    stop_signal = sig;
}

sl_err sl_plat_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    /* No SA_RESTART: a blocking poll returns EINTR so the loop sees it. */
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0)
        return SL_EIO;
    signal(SIGPIPE, SIG_IGN);
    return SL_OK;
}

int sl_plat_stop_requested(void) {
    return (int)stop_signal;
}
