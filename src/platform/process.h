/* This process, for the library's own modules: its id, its environment,
 * sleeping, its executable, shared libraries loaded at run time, and a
 * wake pipe its threads wake the event loop with
 * (src/platform/process.c). Internal: an embedder's program has its own
 * process calls; include/starling/platform.h holds what the daemon's and
 * the clients' command lines use. */
#ifndef STARLING_PLATFORM_PROCESS_H
#define STARLING_PLATFORM_PROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"

/* This process's id (getpid). */
uint64_t sl_plat_pid(void);

/* The environment variable `name` (getenv: NULL when unset, "" when set
 * empty). */
const char *sl_plat_getenv(const char *name);

/* Sets the environment variable `name` to `value`; one already set is
 * left as it is unless `overwrite` (setenv). SL_EINVAL: a bad name;
 * SL_ENOMEM. Not while other threads may read the environment, except as
 * the caller's comment says why it is safe. */
sl_err sl_plat_setenv(const char *name, const char *value, bool overwrite);

/* Sleeps `ms` milliseconds (a signal may end it early). For waits at exit
 * only: the event loop never sleeps, it polls. */
void sl_plat_sleep_ms(uint32_t ms);
/* Sleeps `us` microseconds: a worker thread's back-off between polls of
 * something that has no condition to wait on (a signal may end it
 * early). */
void sl_plat_sleep_us(uint32_t us);
/* Lets another runnable thread have this one's CPU (sched_yield). */
void sl_plat_yield(void);

/* The directory of this process's executable (/proc/self/exe, links
 * resolved) into out. SL_ENOTFOUND when it cannot be read, SL_ETOOBIG
 * when it does not fit `cap`. */
sl_err sl_plat_exe_dir(char *out, size_t cap);

/* A shared library loaded at run time (dlopen with RTLD_NOW |
 * RTLD_LOCAL): a handle, or NULL with the loader's reason in err. */
void *sl_plat_lib_open(const char *path, char *err, size_t err_len);
/* The address of `name` in a library of sl_plat_lib_open, or NULL. */
void *sl_plat_lib_sym(void *lib, const char *name);
/* Unloads it (NULL: nothing). */
void sl_plat_lib_close(void *lib);

/* A wake pipe: worker threads write a byte to fds[1] (sl_plat_wake) when
 * they have news, and the loop watches fds[0] (sl_node_watch_fd). Both
 * ends are above 0 (a worker's wake fd of 0 means none), close on exec,
 * and never block: a full pipe already holds a wake-up. SL_EIO: no pipe
 * (fds are then 0). */
sl_err sl_plat_wake_open(int fds[2]);
/* One byte into the write end (a full pipe: already woken). */
void sl_plat_wake(int fd);
/* Empties the read end. */
void sl_plat_wake_drain(int fd);
/* Closes both ends (those above 0) and zeroes them. Idempotent. */
void sl_plat_wake_close(int fds[2]);

#endif
