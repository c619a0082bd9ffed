/* Internals shared by the elastic node's files, each calling only those
 * after it (docs/house.md): src/elastic/elastic_node.c (the loop),
 * elastic_ctl.c (the control commands and the job's status),
 * command_ckpt.c (a command job's checkpoints) and elastic_jobs.c (the
 * jobs followed, their records in the store, their writes and logs). The
 * way up is a function passed down (sl_en_restored_fn), never a call. */
#ifndef STARLING_ELASTIC_NODE_INTERNAL_H
#define STARLING_ELASTIC_NODE_INTERNAL_H

#include <cjson/cJSON.h>

#include "elastic/command.h"
#include "elastic/trainer.h"
#include "starling/elastic.h"
#include "starling/elastic_node.h"
#include "starling/hash.h"
#include "starling/study.h"

#define EN_MAX_JOBS 16       /* jobs one peer follows at once (an ended one makes room) */
#define EN_LOG_MAX 60000     /* bytes of a peer's job log kept in the store */
#define EN_PROG_GAP_MS 250   /* rank 0 writes its progress at most this often */

/* A job as this peer follows it. */
typedef struct {
    bool used;                              /* the slot holds a job */
    char id[SL_ELASTIC_JOB_ID_LEN + 1];     /* its id */
    sl_elastic_job_t spec;                  /* its job file */
    sl_elastic_records_t *recs;             /* its records, as the rendezvous reads them */
    sl_elastic_t *core;                     /* the rendezvous core */
    char dir[640];                          /* DATA/jobs/ID: checkpoints, the command's files */
    bool finished;                          /* done, failed here, or cancelled: no more turns */

    /* the trainer on this peer */
    sl_elastic_trainer_t *trainer;          /* builtin */
    sl_elastic_command_t *command;          /* command: the running world's process */
    uint32_t restarts;                      /* command: worlds run before this one */
    bool in_world;                          /* a world started here and not yet left */
    sl_elastic_enter_t world;               /* that world */
    bool pending;                           /* a START waits for the last world's LEFT
                                               or its checkpoint's copy */
    sl_elastic_enter_t next;                /* that START */
    bool fetching;                          /* the checkpoint is being copied here */
    sl_elastic_ref_t broken;                /* the world whose collective broke here */
    uint64_t step;                          /* the newest step the trainer reached */
    uint64_t prog_ms;                       /* when rank 0 last wrote its progress */

    /* the newest checkpoint the store names (job/J/ckpt) */
    bool has_ckpt;                          /* one was read */
    uint64_t ckpt_step;                     /* its step */
    uint8_t ckpt_blob[SL_BLAKE2B_LEN];      /* its blob (builtin) */
    uint64_t ck_scan_ms;                    /* command, rank 0: when the checkpoint
                                               directory is looked at next */
    uint64_t ck_stored, ck_stored_ms;       /* the fingerprint last stored, and when */

    sl_buf_t log;                           /* this peer's log of the job (its tail) */
    bool log_dirty;                         /* not yet in the store */
} en_job_t;

struct sl_elastic_node {
    sl_node_t *node;                        /* the peer */
    sl_store_node_t *store;                 /* its replica */
    sl_elastic_node_config_t cfg;           /* settings (key copied below) */
    bool has_key;                           /* the cluster is keyed */
    sl_net_key_t key;                       /* its key */
    char ring[SL_ELASTIC_EP_MAX];           /* this peer's ring endpoint, as others dial it */
    bool ring_written;                      /* peer/NAME/ring is in the store */
    char root[600];                         /* DATA/jobs */
    en_job_t jobs[EN_MAX_JOBS];             /* the jobs followed */
    bool rescan;                            /* read every job's records again (a RESET) */
    uint64_t started_ms;                    /* when this peer started */
    uint64_t joined_ms;                     /* when it first saw another member */
    int wake[2];                            /* the trainers' wake pipe */
    sl_round_member_t *members;             /* the membership view of a turn */
    char (*member_names)[SL_ELASTIC_ID_MAX + 1];
    size_t member_cap;                      /* entries allocated */
    size_t member_count;                    /* entries in use */
    bool members_stale;                     /* a member joined, changed state or left
                                               since: rebuilt before the next turn (not
                                               on every tick: fleets have hundreds) */
    uint64_t log_flush_ms;                  /* when logs go to the store next */

    /* the study commands this node shares (a job id or name: ours; else theirs) */
    struct {
        sl_ctl_fn fn;
        void *ctx;
    } prev[8];

    /* counters (stats.elastic) */
    uint64_t turns, writes, bad_records, worlds_started, worlds_left, broken_worlds;
};

/* ---- the jobs followed (elastic_jobs.c) ---- */

const char *sl_en_self(const sl_elastic_node_t *en);
/* The job with this id or name this peer follows, or NULL. */
en_job_t *sl_en_find(sl_elastic_node_t *en, const char *id_or_name, size_t len);
/* The same, or a job the store holds that this peer let go (read back). */
en_job_t *sl_en_lookup(sl_elastic_node_t *en, const char *id_or_name, size_t len);
/* Follows a job newly seen in the store (its spec). */
en_job_t *sl_en_add(sl_elastic_node_t *en, const char *id, const sl_elastic_job_t *spec);
/* Writes a key of job `j` (durable here when it returns SL_OK). */
sl_err sl_en_put(sl_elastic_node_t *en, const en_job_t *j, const sl_elastic_key_t *k,
                 const void *val, size_t len);
/* Appends a line to this peer's log of the job (and the daemon's log). */
void sl_en_log(sl_elastic_node_t *en, en_job_t *j, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Puts every job's log that changed into the store. */
void sl_en_flush_logs(sl_elastic_node_t *en);
/* Takes one store entry of job j (key job/J/...) into its records or its
 * checkpoint pointer; a malformed one is counted and left out. */
void sl_en_take_entry(sl_elastic_node_t *en, en_job_t *j, const uint8_t *key, size_t key_len,
                      const uint8_t *val, size_t val_len);
/* A spec seen in the store (job/J/spec): checked and followed. */
void sl_en_take_spec(sl_elastic_node_t *en, const uint8_t *key, size_t key_len,
                     const uint8_t *val, size_t val_len);
/* Follows every job whose spec the replica holds (a restart, a RESET). */
void sl_en_read_specs(sl_elastic_node_t *en);
/* Reads every record of job j from the replica again. */
sl_err sl_en_reload(sl_elastic_node_t *en, en_job_t *j);
/* Forgets a job (its records stay in the store: a command reads it back). */
void sl_en_job_free(sl_elastic_node_t *en, en_job_t *j);

/* ---- a command job's checkpoints (command_ckpt.c) ---- */

/* Told when a restore ends: the directory holds the generation (ok), or a
 * file of it could not be copied. */
typedef void (*sl_en_restored_fn)(sl_elastic_node_t *en, en_job_t *j, bool ok);
/* A command job's checkpoint directory: rank 0 stores it as blobs once it
 * holds still (scan); every peer restores the newest generation before a
 * world's command starts (restore: true while the copy runs, which ends in
 * a call of `done`). */
void sl_en_cmd_ckpt_dir(const en_job_t *j, char *out, size_t cap);
void sl_en_cmd_ckpt_scan(sl_elastic_node_t *en, en_job_t *j, uint64_t now);
bool sl_en_cmd_ckpt_restore(sl_elastic_node_t *en, en_job_t *j, sl_en_restored_fn done);

/* ---- the control commands (elastic_ctl.c) ---- */

/* Registers them, chained before the study's commands of the same names
 * (a job's id or name: ours; anything else: the study's). */
sl_err sl_en_ctl_register(sl_elastic_node_t *en);
/* The job's status, as `status --json` shows it. */
cJSON *sl_en_status_json(sl_elastic_node_t *en, en_job_t *j);

#endif
