/* This process: its id, its environment, sleeping, the wake pipe
 * (process.h). */
#include "platform/process.h"

#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

uint64_t sl_plat_pid(void) { return (uint64_t)getpid(); }

const char *sl_plat_getenv(const char *name) { return getenv(name); }

void sl_plat_sleep_ms(uint32_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

sl_err sl_plat_wake_open(int fds[2]) {
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        fds[0] = fds[1] = 0;
        return SL_EIO;
    }
    for (int i = 0; i < 2; i++)
        if (fds[i] == 0) { /* stdin was closed: move it above 0 */
            int moved = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
            close(fds[i]);
            fds[i] = moved;
        }
    if (fds[0] < 0 || fds[1] < 0) {
        if (fds[0] >= 0)
            close(fds[0]);
        if (fds[1] >= 0)
            close(fds[1]);
        fds[0] = fds[1] = 0; /* (none, for the caller's clean-up) */
        return SL_EIO;
    }
    return SL_OK;
}

void sl_plat_wake(int fd) {
    char b = 1;
    ssize_t n = write(fd, &b, 1);
    (void)n; /* full (EAGAIN): a wake-up is already waiting */
}

void sl_plat_wake_drain(int fd) {
    char buf[256];
    while (read(fd, buf, sizeof buf) > 0) {
    }
}

void sl_plat_wake_close(int fds[2]) {
    for (int i = 0; i < 2; i++) {
        if (fds[i] > 0)
            close(fds[i]);
        fds[i] = 0;
    }
}
