/* The operating-system pieces the daemon and the clients need: clocks,
 * signals, small files, the host name. Only the files in src/platform implement
 * these; the protocol cores never call them (they get `now` passed in). */
#ifndef STARLING_PLATFORM_H
#define STARLING_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Clock (src/platform/clock.c) ---- */

/* Monotonic time in nanoseconds (CLOCK_MONOTONIC): for timers. */
uint64_t sl_plat_now_ns(void);

/* Wall-clock time in milliseconds since the Unix epoch: for humans. */
uint64_t sl_plat_wall_ms(void);

/* ---- Signals (src/platform/signals.c) ---- */

/* Installs handlers so SIGTERM and SIGINT set a flag (read with
 * sl_plat_stop_requested) instead of killing the process, and ignores
 * SIGPIPE. Idempotent. */
sl_err sl_plat_signals_install(void);

/* The signal number that asked us to stop (SIGTERM/SIGINT), or 0. */
int sl_plat_stop_requested(void);

/* ---- Files (src/platform/files.c) ---- */

/* Reads a whole file of at most `max_len` bytes into a NUL-terminated
 * buffer from sl_malloc. SL_ENOTFOUND if it does not exist, SL_ETOOBIG if
 * it is larger, SL_EIO otherwise. */
sl_err sl_plat_read_file(const char *path, size_t max_len, uint8_t **data, size_t *len);

/* Writes a file atomically (temporary file, fsync, rename, fsync of the
 * directory) with permission bits `mode`. */
sl_err sl_plat_write_file(const char *path, const void *data, size_t len, unsigned mode);

/* Removes `path` and, when it is a directory, everything below it (like
 * rm -rf; symbolic links are removed, not followed). Best effort: what
 * cannot be removed is left. */
void sl_plat_remove_tree(const char *path);

/* fsyncs the directory holding `path`, so that a rename into it survives a
 * power loss. Best effort: errors are ignored. */
void sl_plat_sync_parent_dir(const char *path);

/* Creates a directory and its parents (like mkdir -p) with `mode`. */
sl_err sl_plat_mkdirs(const char *path, unsigned mode);

/* Takes an exclusive advisory lock on `path` (created if missing) for the
 * life of the process, or until sl_plat_unlock. SL_EBUSY when another
 * process holds it. *fd receives the descriptor. */
sl_err sl_plat_lock(const char *path, int *fd);
void sl_plat_unlock(int *fd);

/* True when the file can be read by group or others (a key file should not). */
bool sl_plat_file_is_shared(const char *path);

/* ---- Host (src/platform/host.c) ---- */

/* The machine's host name (short, as gethostname gives it). */
sl_err sl_plat_hostname(char *buf, size_t cap);

/* $HOME, or NULL when unset. */
const char *sl_plat_home(void);

/* Resident set size of this process in bytes (0 when unknown). */
uint64_t sl_plat_rss_bytes(void);

/* Gives the allocator's free memory back to the system (glibc's
 * malloc_trim): what a burst of work freed stops counting as resident. */
void sl_plat_trim_memory(void);

#ifdef __cplusplus
}
#endif
#endif
