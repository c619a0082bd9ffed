/* A trial's worker: one thread that trains a trial (the builtin trainer
 * through nn.h, or a command template as a child process) and hands what
 * happens to the node loop through a queue the loop drains in its tick.
 * The worker never touches the store or the node: only the queue.
 * Internal to src/study/study_node.c. */
#ifndef STARLING_STUDY_WORKER_H
#define STARLING_STUDY_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "starling/study.h"

/* What a worker reports. */
typedef enum {
    SL_WEV_EPOCH = 0, /* one epoch's report (and its checkpoint is on disk) */
    SL_WEV_LOG = 1,   /* a line of log text */
    SL_WEV_END = 2    /* the worker finished: ok, or failed with a reason */
} sl_wev_kind;

/* One event. */
typedef struct sl_wev {
    sl_wev_kind kind;     /* what */
    sl_report_t report;   /* EPOCH: the report */
    bool failed;          /* END: failed on its own */
    char text[512];       /* LOG: the line; END: the reason */
    struct sl_wev *next;  /* queue link */
} sl_wev_t;

typedef struct sl_study_worker sl_study_worker_t;

/* Shared data sets of the builtin trainer, loaded once per peer. */
typedef struct sl_study_data sl_study_data_t;

sl_err sl_study_data_new(sl_study_data_t **out);
void sl_study_data_destroy(sl_study_data_t **d);

#define SL_STUDY_USER_GROUPS_MAX 64 /* supplementary groups of a trial user */

/* The user command trials run as (peer --trial-user), resolved once at
 * start: the child switches to it with system calls only. */
typedef struct {
    bool set;                                 /* false: trials run as the peer's user */
    uid_t uid;                                /* its user id (never 0) */
    gid_t gid;                                /* its primary group */
    gid_t groups[SL_STUDY_USER_GROUPS_MAX];   /* its groups (initgroups' list) */
    int group_count;                          /* how many of groups */
    char name[64];                            /* its name, for messages */
} sl_study_user_t;

/* Looks `name` up (NULL or "": no trial user, out->set false). Refused,
 * with why: no such user, root, or a peer that is not root itself. */
sl_err sl_study_user_resolve(const char *name, sl_study_user_t *out, char *why, size_t why_len);

/* Checks that user `u` (when set) can search every directory above
 * `dir` and makes `dir` (the peer's own) searchable by others (o+x). */
sl_err sl_study_user_reach(const sl_study_user_t *u, const char *dir, char *why, size_t why_len);

/* A job: everything the thread needs (copied). */
typedef struct {
    sl_study_spec_t spec;            /* the study */
    char trial_id[SL_TRIAL_ID_LEN + 1]; /* the trial */
    sl_config_t config;              /* its configuration */
    int target_epochs;               /* train up to this epoch */
    char dir[1100];                  /* checkpoint directory (exists) */
    int threads;                     /* BLAS threads (0: the spec's) */
    sl_study_data_t *data;           /* shared data sets (builtin) */
    int wake_fd;                     /* a byte is written here for each event (0: none) */
    sl_study_user_t user;            /* a command runs as this user (user.set) */
} sl_study_job_t;

/* Starts the thread. */
sl_err sl_study_worker_start(const sl_study_job_t *job, sl_study_worker_t **out);
/* Asks the worker to stop (between epochs; a child process is killed). */
void sl_study_worker_stop(sl_study_worker_t *w);
/* Stops at once: a command's process group is killed; a builtin epoch in
 * progress still runs to its end (the thread then ends). */
void sl_study_worker_cancel(sl_study_worker_t *w);
/* Pops the next event (caller sl_free's it), or NULL. */
sl_wev_t *sl_study_worker_pop(sl_study_worker_t *w);
/* The thread has ended (every event queued). */
bool sl_study_worker_ended(sl_study_worker_t *w);
/* Whether events wait in the queue (the loop's cue to take a turn now). */
bool sl_study_worker_pending(sl_study_worker_t *w);
/* Joins (after stop, waits for the thread) and frees. */
void sl_study_worker_destroy(sl_study_worker_t **w);
/* Detaches without waiting (the process is leaving). */
void sl_study_worker_abandon(sl_study_worker_t **w);

/* Files of a checkpoint directory (regular files, names only, up to
 * `max`, in name order); for replicating them. */
int sl_study_dir_files(const char *dir, char names[][128], int max);
/* Empties a directory's regular files. */
void sl_study_dir_clear(const char *dir);
/* Whether a directory exists and holds nothing at all. */
bool sl_study_dir_empty(const char *dir);

#endif
