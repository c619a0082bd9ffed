/* This process, for the library's own modules: its id, its environment,
 * sleeping, and a wake pipe its threads wake the event loop with
 * (src/platform/process.c). Internal: an embedder's program has its own
 * process calls; include/starling/platform.h holds what the daemon's and
 * the clients' command lines use. */
#ifndef STARLING_PLATFORM_PROCESS_H
#define STARLING_PLATFORM_PROCESS_H

#include <stdint.h>

#include "starling/common.h"

/* This process's id (getpid). */
uint64_t sl_plat_pid(void);

/* The environment variable `name` (getenv: NULL when unset, "" when set
 * empty). */
const char *sl_plat_getenv(const char *name);

/* Sleeps `ms` milliseconds (a signal may end it early). For waits at exit
 * only: the event loop never sleeps, it polls. */
void sl_plat_sleep_ms(uint32_t ms);

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
