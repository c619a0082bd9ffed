/* The operating-system pieces the daemon and the clients need: clocks,
 * signals, small files, the host name, child processes. Only the files in
 * src/platform implement these; the protocol cores never call them (they
 * get `now` passed in). */
#ifndef STARLING_PLATFORM_H
#define STARLING_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

/* Reads a whole file, gunzipping it when it is gzip (a plain file is read
 * as it is), into a buffer from sl_malloc of at most `max_len` bytes
 * (SL_ETOOBIG past it). SL_ENOTFOUND: no such file; SL_EINVAL: a
 * directory; SL_ETRUNC or SL_ECORRUPT: bad gzip data; `why` names the
 * file and what is wrong. The training engine's data sets. */
sl_err sl_plat_read_file_gz(const char *path, size_t max_len, uint8_t **data, size_t *len,
                            char *why, size_t why_len);

/* What a path names (stat, following links): nothing, a directory, or
 * anything else. */
typedef enum { SL_PLAT_PATH_NONE, SL_PLAT_PATH_FILE, SL_PLAT_PATH_DIR } sl_plat_path_kind_t;
sl_plat_path_kind_t sl_plat_path_kind(const char *path);

/* Whether this process may read `path` (access R_OK). */
bool sl_plat_can_read(const char *path);

/* A file's size and last modification (stat, following links). */
typedef struct {
    uint64_t len;      /* size in bytes */
    uint64_t mtime_s;  /* modified: seconds since the Unix epoch */
    uint64_t mtime_ns; /* and nanoseconds within that second */
} sl_plat_file_info_t;
/* SL_ENOTFOUND when `path` cannot be looked at. */
sl_err sl_plat_file_info(const char *path, sl_plat_file_info_t *out);

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

/* The regular files of a directory (names only, no dot files and no
 * "*.tmp*" ones being written, up to `max`), in name order, not the
 * directory's: what is built from them must not depend on the file
 * system. The count (0 when the directory cannot be read). */
int sl_plat_dir_files(const char *dir, char names[][128], int max);
/* Removes a directory's regular files (those sl_plat_dir_files lists). */
void sl_plat_dir_clear(const char *dir);
/* Whether a directory exists and holds nothing at all. */
bool sl_plat_dir_empty(const char *dir);

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

/* The machine's runnable threads now, this process's included (the
 * fourth field of /proc/loadavg); -1 when unknown. */
int sl_plat_runnable_threads(void);

/* The CPUs online (sysconf); -1 when unknown. */
int sl_plat_cpu_count(void);

/* Gives the allocator's free memory back to the system (glibc's
 * malloc_trim): what a burst of work freed stops counting as resident. */
void sl_plat_trim_memory(void);

/* ---- Child processes (src/platform/spawn.c) ---- */

/* A variable a child's environment sets over the peer's (value NULL:
 * removed from it). */
typedef struct {
    const char *name;  /* NAME */
    const char *value; /* its value, or NULL to unset it */
} sl_plat_env_t;

/* A user a child switches to before it runs anything (resolved by the
 * caller, e.g. sl_study_user_resolve). */
typedef struct {
    uid_t uid;            /* user id (never 0) */
    gid_t gid;            /* primary group */
    const gid_t *groups;  /* supplementary groups */
    int group_count;      /* how many */
} sl_plat_user_t;

/* ---- Users (src/platform/users.c) ---- */

/* Looks user `name` up: its ids and its groups (initgroups' list, written
 * to `groups`, at most `cap`; out->groups points there). SL_ENOTFOUND: no
 * such user; SL_ETOOBIG: in more than `cap` groups. */
sl_err sl_plat_user_find(const char *name, sl_plat_user_t *out, gid_t *groups, int cap);
/* This process's effective user id. */
uid_t sl_plat_euid(void);
/* The absolute path of `path`, links resolved, into out (SL_ENOTFOUND,
 * SL_ETOOBIG when it does not fit cap, SL_EINVAL). */
sl_err sl_plat_realpath(const char *path, char *out, size_t cap);
/* Whether user `u` may search directory `dir` (by its owner, group or
 * other bits); true when dir cannot be seen at all. */
bool sl_plat_user_can_search(const sl_plat_user_t *u, const char *dir);
/* Makes a directory searchable by others (o+x, not listable) when it is
 * not. Best effort. */
void sl_plat_make_searchable(const char *dir);
/* Changes a file's owner; false when it could not. */
bool sl_plat_chown(const char *path, uid_t uid, gid_t gid);

/* What sl_plat_spawn starts. */
typedef struct {
    const char *command;         /* a shell command, as `sh -c` takes it */
    const char *name;            /* the supervisor's $0, seen in ps ("starling-trial") */
    const sl_plat_env_t *env;    /* set over the peer's environment */
    size_t env_count;            /* entries of env */
    const char *cwd;             /* working directory (NULL or "": the peer's) */
    int out_fd;                  /* the child's stdout and stderr (stdin: /dev/null) */
    const sl_plat_user_t *user;  /* switch to this user (NULL: run as the peer) */
} sl_plat_spawn_t;

/* Starts `command` under a supervisor shell, in a process group of its
 * own whose id is *pid (the shell's pid). When the peer dies, even by
 * SIGKILL, the shell kills the whole group with SIGKILL (a parent-death
 * signal, SIGHUP, that the shell traps). A SIGTERM sent to the group is for
 * the command: the shell waits on for it. The shell ends as the command
 * did (its exit status, or killed by the same signal). The calling thread
 * must live until the child is reaped: the parent-death signal follows the
 * thread that forked, not the process. SL_ENOMEM, or SL_EIO when vfork
 * failed; a command that cannot start (no such directory, no such user)
 * writes why to out_fd and exits 127. */
sl_err sl_plat_spawn(const sl_plat_spawn_t *sp, pid_t *pid);

/* Whether the child `pid` has ended (it is not reaped: its process group
 * id cannot be reused until sl_plat_reap). */
bool sl_plat_child_ended(pid_t pid);

/* Waits up to `grace_ms` for the child `pid` to end, then kills what is
 * left of its process group with SIGKILL (a command's leftovers, or all
 * of it) and reaps the child. Returns its wait status, or -1 when the
 * grace ran out before it ended. */
int sl_plat_reap(pid_t pid, int grace_ms);

/* Sends SIGKILL to the whole process group of the child `pid` (a pid of
 * sl_plat_spawn; 0 or less: nothing). */
void sl_plat_kill_group(pid_t pid);
/* Sends SIGTERM to it: the command's chance to stop cleanly (0 or less:
 * nothing). */
void sl_plat_term_group(pid_t pid);

/* A wait status of sl_plat_reap: the exit code of a child that exited
 * (-1: it did not, or status is -1), the signal that killed one (0: none). */
int sl_plat_exit_code(int status);
int sl_plat_exit_signal(int status);

/* A pipe for a child's output: fds[1] is its out_fd, fds[0] the caller's
 * to read; both close on exec (the child's copies of fds[1] are its
 * stdout and stderr). SL_EIO (fds are then -1). */
sl_err sl_plat_pipe(int fds[2]);
/* Closes a descriptor (below 0: nothing). */
void sl_plat_close(int fd);
/* Waits up to `timeout_ms` for `fd` to have something to read (or its end
 * of file): true when it has. */
bool sl_plat_readable(int fd, int timeout_ms);

/* A child's output, split into lines. */
typedef struct {
    char *buf;   /* the caller's buffer */
    size_t cap;  /* its size: a line longer than cap - 1 comes in pieces */
    size_t len;  /* bytes held that are not a line yet */
} sl_plat_lines_t;

/* Reads once from `fd` (poll said it is readable) and calls `line` with
 * each complete line (NUL-terminated, without its newline), each piece of
 * cap - 1 bytes of a longer one, and at end of file the unfinished rest;
 * stops early, keeping the rest, when `line` returns false. Returns false
 * at end of file or on a read error. */
bool sl_plat_lines_read(sl_plat_lines_t *lb, int fd,
                        bool (*line)(void *arg, char *text, size_t len), void *arg);

#ifdef __cplusplus
}
#endif
#endif
