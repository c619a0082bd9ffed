/* This process: its id, its environment, sleeping, its executable,
 * shared libraries loaded at run time, the wake pipe (process.h). */
#include "platform/process.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t sl_plat_pid(void) { return (uint64_t)getpid(); }

const char *sl_plat_getenv(const char *name) { return getenv(name); }

sl_err sl_plat_setenv(const char *name, const char *value, bool overwrite) {
    if (setenv(name, value, overwrite ? 1 : 0) == 0)
        return SL_OK;
    return errno == ENOMEM ? SL_ENOMEM : SL_EINVAL;
}

void sl_plat_sleep_ms(uint32_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void sl_plat_sleep_us(uint32_t us) {
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000L};
    nanosleep(&ts, NULL);
}

void sl_plat_yield(void) { sched_yield(); }

sl_err sl_plat_exe_dir(char *out, size_t cap) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return SL_ENOTFOUND;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return SL_ENOTFOUND;
    *slash = '\0';
    int w = snprintf(out, cap, "%s", exe);
    return w < 0 || (size_t)w >= cap ? SL_ETOOBIG : SL_OK;
}

void *sl_plat_lib_open(const char *path, char *err, size_t err_len) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h && err_len) {
        const char *e = dlerror();
        snprintf(err, err_len, "%s", e ? e : "unknown dlopen error");
    }
    return h;
}

void *sl_plat_lib_sym(void *lib, const char *name) { return lib ? dlsym(lib, name) : NULL; }

void sl_plat_lib_close(void *lib) {
    if (lib)
        dlclose(lib);
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
