/* Internals shared by src/study_node.c (the loop) and src/study_ctl.c
 * (the control commands). */
#ifndef STARLING_STUDY_NODE_INTERNAL_H
#define STARLING_STUDY_NODE_INTERNAL_H

#include "starling/study.h"
#include "starling/study_node.h"
#include "study_worker.h"

#define CHUNK 60000
#define MAX_STUDIES 16
#define MAX_JOBS 32
#define LOG_MAX 60000
#define MAX_FILES 16
/* After joining, a peer waits this long before it claims: five anti-entropy
 * periods of the store (200 ms by default) to receive what it missed. */
#define CATCHUP_MS 1000

/* A trial as read from the store in one pass. */
typedef struct {
    sl_trial_t t;                 /* the cores' view */
    bool has_record;              /* its record was seen */
    double *curve;                /* scheduler metric per epoch (max_epochs) */
    sl_report_t *reports;         /* reports per epoch (max_epochs) */
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
    row_t *rows;                  /* trials */
    size_t count;                 /* used */
    size_t cap;                   /* allocated */
    bool cancelled;               /* cancel key present */
    bool finished;                /* finished key present */
    uint64_t start_ms;            /* submit time */
} view_t;

/* A parsed spec kept per study. */
typedef struct {
    char id[SL_TRIAL_ID_LEN + 1]; /* study id ("" = free) */
    sl_study_spec_t spec;         /* parsed */
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
} job_t;

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
};

/* Store access (the study's keys are LWW registers). */
sl_err sl_study_node_put_str(sl_study_node_t *sn, const char *key, const char *val, size_t len);
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
/* Writes a trial's replicated checkpoint into `dir`; its epoch, or 0. */
int sl_study_node_restore(sl_study_node_t *sn, const char *study, const char *trial,
                          const char *dir);
/* A trial's log: every owner's run in claim-epoch order (this peer's
 * running job from its buffer), appended to `out`. */
sl_err sl_study_node_log(sl_study_node_t *sn, const char *study, const char *trial,
                         sl_buf_t *out);
/* Wall-clock milliseconds (leases, the time budget). */
uint64_t sl_study_node_wall_ms(void);

/* Registers the study commands on the node. */
sl_err sl_study_ctl_register(sl_study_node_t *sn);

#endif
