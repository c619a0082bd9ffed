/* Internals shared by the study node's files: study_node.c (the loop),
 * study_ctl.c (the control commands), study_ckpt.c (checkpoints),
 * study_store.c (its keys in the store) and study_view.c (the live view's
 * daemon side, over its pure core study/live.h), each calling only those
 * after it in this list. */
#ifndef STARLING_STUDY_NODE_INTERNAL_H
#define STARLING_STUDY_NODE_INTERNAL_H

#include <cjson/cJSON.h>

#include "starling/study.h"
#include "starling/study_node.h"
#include "starling/swim.h"
#include "study/live.h"
#include "study/study_keys.h"
#include "study/study_worker.h"
#include "study/turn.h"

#define MAX_STUDIES 16
#define MAX_JOBS 32
#define MAX_PENDING (2 * MAX_JOBS) /* checkpoints waiting for their copies */
#define LOG_MAX 60000
/* A running job's log is written with its report once LOG_EVERY_MS passed
 * since its last write (riding the report's group commit and DELTA), or
 * alone once LOG_ALONE_MS passed with no report to ride. It was written
 * every second on a timer of its own: a commit, and at 32 peers a DELTA
 * to 31 others, a job and a second beside its reports'. */
#define LOG_EVERY_MS 1000
#define LOG_ALONE_MS 1500
#define MAX_FILES 16
/* After joining, a peer claims once its store says it caught up with a
 * peer (sl_store_caught_up_ms), or at the latest after this long: ten
 * anti-entropy rounds of the store (100 ms by default). */
#define CATCHUP_MS 1000
/* The loop takes a turn as soon as something changed (a study key, told by
 * the store's listener; a worker's event, told by a byte on the wake pipe;
 * membership), but leaves at least TURN_GAP_MS between turns, and at
 * least TURN_COST_X times the last turn's (wall) cost, so a busy loop
 * leaves the core to the rest of the peer. With no change it turns when a
 * wait the last turn saw ends (due_at: a fresh trial's SL_TURN_STEAL_MS and the
 * hand-offs, most of the claims in a busy study; a lease that lapses; a
 * renewal; the catch-up; a time budget), and every tick_ms in any case.
 * It used to wake every 10 ms while a study was active and turn if
 * anything had changed, so a wait was seen at the next change: a peer
 * whose trials trained for minutes woke 100 times a second for nothing
 * (7.5 ms of CPU a second on 4 peers with 2 trials each; 3.5 now:
 * bench/study/busy_cpu.py). A turn costs
 * what changed and what is open, not the study's size (src/study/study_view.c);
 * the factor was 4 when it rebuilt the whole view. Workers' events used to
 * be polled every 10 ms, with turns at least 10 ms apart: a slot waited
 * 5-10 ms at each trial's end (no-op trials on 4 peers: 840 a second;
 * 1,100-1,500 with a 2 ms gap). */
#define TURN_GAP_MS 2
#define TURN_COST_X 2
/* Fills `ms` with the alive and suspect members of `sw`, each with one
 * slot, free (the loop then sets the slots; sl_study_members_t and the
 * rest of the members' functions are the turn core's, study/turn.h).
 * SL_ENOMEM: `ms` is empty. */
sl_err sl_study_members_alive(const sl_swim_t *sw, sl_study_members_t *ms);

/* A trial in a view (the control commands' copy of the live view). */
typedef struct {
    sl_trial_t t;                 /* the cores' view */
    bool has_record;              /* its record was seen (always, in a built view) */
    double *curve;                /* scheduler metric per epoch (borrowed) */
    sl_report_t *reports;         /* reports per epoch (borrowed); NULL until the first */
    bool *has_report;             /* which epochs have one (borrowed) */
    sl_claim_t claim;             /* claim register */
    bool has_claim;               /* one was seen */
    sl_result_t result;           /* merged result */
    bool has_result;              /* one was seen */
    int failures;                 /* failures recorded */
    bool stop;                    /* the leader asked it to stop */
    int ck_epoch;                 /* epoch of the replicated checkpoint (0 = none) */
} row_t;

/* A study's view for the control commands: a copy of the live rows with
 * a record, their arrays borrowed (valid until the loop's next turn). */
typedef struct {
    char id[SL_TRIAL_ID_LEN + 1]; /* study id */
    sl_study_spec_t *spec;        /* borrowed from the cache */
    row_t *rows;                  /* trials */
    size_t count;                 /* used */
    bool cancelled;               /* cancel key present */
    bool finished;                /* finished key present */
    uint64_t start_ms;            /* submit time */
} view_t;

/* A parsed spec kept per study, with its live view. */
typedef struct cached {
    char id[SL_TRIAL_ID_LEN + 1]; /* study id ("" = free) */
    sl_study_spec_t spec;         /* parsed */
    live_t live;                  /* the study as the replica shows it */
    uint32_t *free_dirs;          /* numbers of the empty job directories (DATA/studies/S/w/N) */
    uint32_t free_count;          /* entries */
    uint32_t free_cap;            /* allocated */
    uint32_t next_dir;            /* the next number never used by this process */
} cached_t;

/* Study ids seen in the store (study/S/spec keys). */
typedef struct {
    char ids[MAX_STUDIES][SL_TRIAL_ID_LEN + 1]; /* found */
    int count;                                  /* used */
} idlist_t;

/* A trial this peer runs. */
typedef struct {
    char study[SL_TRIAL_ID_LEN + 1]; /* study id ("" = free) */
    char trial[SL_TRIAL_ID_LEN + 1]; /* trial id */
    uint64_t epoch;                  /* claim epoch held */
    int rung;                        /* rung it trains to */
    int last_epoch;                  /* last epoch reported */
    int ck_written;                  /* last checkpoint epoch replicated */
    uint64_t renew_ms;               /* next lease renewal */
    uint64_t started_ms;             /* wall ms it was claimed */
    sl_study_worker_t *w;            /* the worker */
    char dir[1100];                  /* working (checkpoint) dir, DATA/studies/S/w/N */
    uint32_t dir_num;                /* its N */
    sl_buf_t log;                    /* log text (tail kept) */
    bool log_dirty;                  /* log changed since written */
    uint64_t log_written_ms;         /* wall ms the log was last written (or claimed) */
    bool reported;                   /* a report of it was written this turn */
    char *held;                      /* a command's report of its target epoch, held to
                                        ride its end's commit (hold_report; NULL: none) */
    size_t held_len;                 /* its length */
    int held_epoch;                  /* its epoch */
    int outcome;                     /* sl_epoch_outcome once the target is reached, else -1 */
    sl_study_job_t *launch;          /* while its checkpoint is restored: the worker to
                                        start then (w is NULL meanwhile) */
} job_t;

/* A checkpoint stored as a blob, waiting for its copies before the
 * trial's manifest names it (src/study/study_ckpt.c). */
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
    bool slots_written;              /* peer/NAME/slots is in the store */
    int slots_offered;               /* the value written there (-1: none yet, catching up) */
    uint64_t started_ms;             /* wall ms at attach */
    uint64_t ready_ms;               /* wall ms it first caught up after joining (0: not yet) */
    uint64_t joined_ms;              /* wall ms it first saw another member alive (0: not yet) */
    sl_study_worker_t *orphans[MAX_JOBS]; /* cancelled workers still ending */
    int orphan_count;                /* entries in orphans */
    int wake[2];                     /* pipe: workers write a byte per event (read, write) */
    sl_study_user_t trial_user;      /* command trials run as this user (set) */
    bool check_view;                 /* compare the live views with the store every turn */
    bool plant_lost_change;          /* test-only: drop a change in 50 from the live views */
    uint64_t plant_count;            /* changes seen while planted */
    idlist_t ids;                    /* studies in the store, kept by the listener */
    bool ids_stale;                  /* read them again (a RESET snapshot came) */
    uint64_t writes;                 /* store writes made by the loop */
    sl_log_limit_t write_failed_log; /* STUDY-PUT: once per 10 s (a full disk fails every write) */
    uint64_t turns;                  /* study turns taken (stats) */
    uint64_t turn_ns_total;          /* their cost (stats) */
    uint64_t claims;                 /* trials claimed here (stats) */
    uint64_t claims_lost;            /* jobs stopped: another peer held the claim (stats) */
    uint64_t view_errors;            /* turns whose view check failed (stats; the peer stops) */
    uint64_t jobs_ended;             /* jobs whose worker ended (stats) */
    uint64_t job_ms_total;           /* wall ms jobs held a slot, claim to end (stats) */
    uint64_t turn_fp;                /* store fingerprint at the last turn */
    uint64_t turn_ns;                /* monotonic ns of the last turn's start */
    uint64_t turn_cost_ns;           /* how long the last turn took */
    uint64_t full_ns;                /* monotonic ns of the last periodic turn */
    uint64_t due_ns;                 /* a wait the last turn saw ends then (monotonic;
                                        UINT64_MAX: none): a turn is due */
    bool poked;                      /* membership changed since the last turn */
    ck_pending_t pending[MAX_PENDING]; /* checkpoints waiting for their copies */
    ck_restore_t *restores;          /* checkpoint fetches under way */
    sl_study_members_t members;      /* the members of the last turn (kept for its arrays) */
    sl_turn_out_t turn_out;          /* a turn phase's actions (kept for the array) */
};

/* Store access (src/study/study_store.c; the study's keys are LWW
 * registers). */
sl_err sl_study_node_put_str(sl_study_node_t *sn, const char *key, const char *val, size_t len);
sl_err sl_study_node_put_now(sl_study_node_t *sn, const char *key, const char *val, size_t len);
sl_err sl_study_node_get_str(sl_study_node_t *sn, const char *key, const uint8_t **v, size_t *len);
/* The parsed spec of study `id` (cached), or NULL. */
const sl_study_spec_t *sl_study_node_spec(sl_study_node_t *sn, const char *id);
/* A study id from an id or a study name (SL_ENOTFOUND). */
sl_err sl_study_node_resolve(sl_study_node_t *sn, const char *arg, char id[SL_TRIAL_ID_LEN + 1]);
/* The cache entry of study `id` (its spec parsed and its live view read
 * on first use), or NULL. */
cached_t *sl_study_node_cache(sl_study_node_t *sn, const char *id);
/* The cache entry of the study whose key `k` is, if it is cached (no
 * read). */
cached_t *sl_study_node_cached(sl_study_node_t *sn, const sl_study_key_t *k);
/* Adds a study id to the list (once; past MAX_STUDIES, not at all). */
void sl_study_ids_add(idlist_t *l, const char *id);
/* The studies in the store: read once (and after a RESET snapshot), then
 * kept by the listener from their spec keys. */
const idlist_t *sl_study_node_studies(sl_study_node_t *sn);
/* A job's log key: one per (claim epoch, owner), so each has one writer. */
sl_err sl_study_node_log_key(sl_study_node_t *sn, const char *study, const char *trial,
                             uint64_t epoch, char key[SL_STUDY_KEY_MAX]);
/* A study's trials as this replica shows them, states derived (a copy
 * for the control commands). */
void sl_study_view_fini(view_t *v);
sl_err sl_study_view_build(sl_study_node_t *sn, const char *id, view_t *v);

/* The live view's daemon side (src/study/study_view.c; the core is
 * study/live.h). apply: key `key` of the study now holds `val` (present)
 * or is gone. refresh: reads the whole study when it is stale, then
 * derives the rows whose keys changed and the state of every open one,
 * with swim's members and this node's jobs. check: compares the live
 * view with a fresh read of the store (debug builds call it every turn);
 * false with `why` on a difference. env: what the core asks of the node
 * (sl_live_env_t, valid while `sn` is). */
void sl_study_live_apply(sl_study_node_t *sn, cached_t *c, const uint8_t *key, size_t key_len,
                         const uint8_t *val, size_t val_len, bool present);
void sl_study_live_refresh(sl_study_node_t *sn, cached_t *c, uint64_t now_ms);
bool sl_study_live_check(sl_study_node_t *sn, cached_t *c, uint64_t now_ms, char *why,
                         size_t why_len);
sl_live_env_t sl_study_live_env(sl_study_node_t *sn);
/* This peer's running job of a trial, or NULL. */
job_t *sl_study_node_job(sl_study_node_t *sn, const char *study, const char *trial);
/* Checkpoints (src/study/study_ckpt.c). Write stores the directory's files as
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
