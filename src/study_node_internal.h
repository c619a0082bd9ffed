/* Internals shared by src/study_node.c (the loop) and src/study_ctl.c
 * (the control commands). */
#ifndef STARLING_STUDY_NODE_INTERNAL_H
#define STARLING_STUDY_NODE_INTERNAL_H

#include "starling/study.h"
#include "starling/study_node.h"
#include "study_worker.h"

#define MAX_STUDIES 16
#define MAX_JOBS 32
#define MAX_PENDING (2 * MAX_JOBS) /* checkpoints waiting for their copies */
#define LOG_MAX 60000
#define MAX_FILES 16
/* After joining, a peer waits this long before it claims: five anti-entropy
 * periods of the store (200 ms by default) to receive what it missed. */
#define CATCHUP_MS 1000
/* The loop takes a turn as soon as something changed (the replica, a
 * worker's queue, membership), polled every POLL_MS, but leaves at least
 * TURN_GAP_MS between turns, and at least TURN_COST_X times the last
 * turn's cost, so a large study's view (O(trials) to build) cannot take
 * over the core; with no change it still turns every tick_ms (leases,
 * the time budget, waits). */
#define POLL_MS 10
#define TURN_GAP_MS 10
#define TURN_COST_X 4
/* Proposals kept waiting, in fleet slots, for searchers that do not learn. */
#define LOOKAHEAD 3

/* A trial as read from the store in one pass. */
typedef struct {
    sl_trial_t t;                 /* the cores' view */
    bool has_record;              /* its record was seen */
    double *curve;                /* scheduler metric per epoch (max_epochs) */
    sl_report_t *reports;         /* reports per epoch (max_epochs); NULL until the first */
    bool *has_report;             /* which epochs have one */
    sl_claim_t claim;             /* claim register */
    bool has_claim;               /* one was seen */
    sl_result_t result;           /* merged result */
    bool has_result;              /* one was seen */
    int failures;                 /* failures recorded */
    bool stop;                    /* the leader asked it to stop */
    int ck_epoch;                 /* epoch of the replicated checkpoint (0 = none) */
} row_t;

/* A study's view. */
typedef struct {
    char id[SL_TRIAL_ID_LEN + 1]; /* study id */
    sl_study_spec_t *spec;        /* borrowed from the cache */
    struct cached *cache;         /* the study's cache entry (record memo) */
    row_t *rows;                  /* trials */
    size_t count;                 /* used */
    size_t cap;                   /* allocated */
    uint32_t *index;              /* open addressing by trial id: row + 1, 0 = empty */
    size_t index_cap;             /* slots in index (a power of two, > 2 * count) */
    bool cancelled;               /* cancel key present */
    bool finished;                /* finished key present */
    uint64_t start_ms;            /* submit time */
    bool borrowed;                /* rows' arrays belong to the cache's live rows */
} view_t;

/* A trial record as decoded before: records are written once, so the
 * view decodes each one once, not on every turn (a decode parses JSON
 * and re-encodes the config to check it: most of a turn's cost). */
typedef struct {
    char id[SL_TRIAL_ID_LEN];     /* trial id (id[0] == 0: empty slot) */
    uint64_t val_hash;            /* hash of the record's bytes it was decoded from */
    uint32_t val_len;             /* their length */
    sl_trial_t t;                 /* the decode: ordinal, bracket, rung, config */
} rec_memo_t;

/* A parsed spec kept per study. */
typedef struct cached {
    char id[SL_TRIAL_ID_LEN + 1]; /* study id ("" = free) */
    sl_study_spec_t spec;         /* parsed */
    rec_memo_t *memo;             /* decoded records, open addressing by trial id */
    size_t memo_cap;              /* slots (a power of two), 0 = none yet */
    size_t memo_count;            /* used */
    /* The study's rows as last parsed, kept across turns: a view build
       hashes every key of the study but parses again only the trials
       whose keys changed (digest: a sum of key-and-value hashes). */
    view_t live;                  /* persistent rows and their index */
    uint64_t *digest;             /* per live row: of the keys it was parsed from */
    uint64_t *digest_now;         /* per live row: this build's */
    size_t digest_cap;            /* entries in both */
} cached_t;

/* A trial this peer runs. */
typedef struct {
    char study[SL_TRIAL_ID_LEN + 1]; /* study id ("" = free) */
    char trial[SL_TRIAL_ID_LEN + 1]; /* trial id */
    uint64_t epoch;                  /* claim epoch held */
    int rung;                        /* rung it trains to */
    int last_epoch;                  /* last epoch reported */
    int ck_written;                  /* last checkpoint epoch replicated */
    uint64_t renew_ms;               /* next lease renewal */
    sl_study_worker_t *w;            /* the worker */
    char dir[1100];                  /* local checkpoint dir */
    sl_buf_t log;                    /* log text (tail kept) */
    bool log_dirty;                  /* log changed since written */
    int outcome;                     /* sl_epoch_outcome once the target is reached, else -1 */
    sl_study_job_t *launch;          /* while its checkpoint is restored: the worker to
                                        start then (w is NULL meanwhile) */
} job_t;

/* A checkpoint stored as a blob, waiting for its copies before the
 * trial's manifest names it (src/study_ckpt.c). */
typedef struct {
    char study[SL_TRIAL_ID_LEN + 1]; /* "" = free */
    char trial[SL_TRIAL_ID_LEN + 1];
    int epoch;
    uint8_t hash[SL_BLAKE2B_LEN];    /* the blob */
    char *manifest;                  /* what study/S/t/T/ck will hold */
} ck_pending_t;

typedef struct ck_restore ck_restore_t;

struct sl_study_node {
    sl_node_t *node;                 /* the daemon */
    sl_store_node_t *store;          /* its store */
    sl_study_node_config_t cfg;      /* settings */
    cached_t specs[MAX_STUDIES];     /* parsed specs */
    job_t jobs[MAX_JOBS];            /* running trials */
    sl_study_data_t *data;           /* shared data sets */
    char root[1024];                 /* data_dir/studies */
    uint64_t log_flush_ms;           /* next flush of the logs */
    bool slots_written;              /* peer/NAME/slots is in the store */
    uint64_t started_ms;             /* wall ms at attach */
    uint64_t joined_ms;              /* wall ms it first saw another member alive (0: not yet) */
    sl_study_worker_t *orphans[MAX_JOBS]; /* cancelled workers still ending */
    int orphan_count;                /* entries in orphans */
    uint64_t writes;                 /* store writes made by the loop (a view to rebuild) */
    uint64_t turn_fp;                /* store fingerprint at the last turn */
    uint64_t turn_ns;                /* monotonic ns of the last turn's start */
    uint64_t turn_cost_ns;           /* how long the last turn took */
    uint64_t full_ns;                /* monotonic ns of the last periodic turn */
    bool poked;                      /* membership changed since the last turn */
    bool active;                     /* a study is unfinished here or a job runs */
    ck_pending_t pending[MAX_PENDING]; /* checkpoints waiting for their copies */
    ck_restore_t *restores;          /* checkpoint fetches under way */
};

/* Store access (the study's keys are LWW registers). */
sl_err sl_study_node_put_str(sl_study_node_t *sn, const char *key, const char *val, size_t len);
sl_err sl_study_node_put_now(sl_study_node_t *sn, const char *key, const char *val, size_t len);
sl_err sl_study_node_get_str(sl_study_node_t *sn, const char *key, const uint8_t **v, size_t *len);
/* The parsed spec of study `id` (cached), or NULL. */
const sl_study_spec_t *sl_study_node_spec(sl_study_node_t *sn, const char *id);
/* A study id from an id or a study name (SL_ENOTFOUND). */
sl_err sl_study_node_resolve(sl_study_node_t *sn, const char *arg, char id[SL_TRIAL_ID_LEN + 1]);
/* A study's trials as this replica shows them, states derived. */
void sl_study_view_fini(view_t *v);
sl_err sl_study_view_build(sl_study_node_t *sn, const char *id, view_t *v);
/* This peer's running job of a trial, or NULL. */
job_t *sl_study_node_job(sl_study_node_t *sn, const char *study, const char *trial);
/* Checkpoints (src/study_ckpt.c). Write stores the directory's files as
 * one blob and queues the trial's manifest, which settle writes once the
 * blob has its copies (called from the tick; unsettled says whether any
 * wait). Restore fetches the latest manifest's blob and writes its files
 * into `dir`, then calls `done` on the loop (maybe before it returns)
 * with the epoch restored, 0 for none (`why` says what went wrong, NULL
 * when there simply is none) or -1 when the node is destroyed first
 * (only `ctx` is to be let go). */
void sl_study_ckpt_write(sl_study_node_t *sn, const char *study, const char *trial,
                         const char *dir, int epoch);
void sl_study_ckpt_settle(sl_study_node_t *sn);
bool sl_study_ckpt_unsettled(const sl_study_node_t *sn);
typedef void (*sl_study_ckpt_done_fn)(sl_study_node_t *sn, void *ctx, int epoch, const char *why);
void sl_study_ckpt_restore(sl_study_node_t *sn, const char *study, const char *trial,
                           const char *dir, sl_study_ckpt_done_fn done, void *ctx);
void sl_study_ckpt_fini(sl_study_node_t *sn);
/* A trial's log: every owner's run in claim-epoch order (this peer's
 * running job from its buffer), appended to `out`. */
sl_err sl_study_node_log(sl_study_node_t *sn, const char *study, const char *trial,
                         sl_buf_t *out);
/* Wall-clock milliseconds (leases, the time budget). */
uint64_t sl_study_node_wall_ms(void);

/* Registers the study commands on the node. */
sl_err sl_study_ctl_register(sl_study_node_t *sn);

#endif
