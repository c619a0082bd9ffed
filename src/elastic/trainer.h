/* An elastic job's built-in trainer on this peer: one thread that trains
 * the job's model data-parallel in the worlds the rendezvous starts, and
 * keeps the parameters and optimizer state in memory from one world to
 * the next (no restart, no reload: docs/elastic.md "The trainer").
 *
 * The node (src/elastic/elastic_node.c) tells it which world to train in
 * (sl_elastic_trainer_enter) and when to stop (sl_elastic_trainer_leave,
 * honoured at the next step boundary); the thread never touches the store
 * or the node: what happens comes back as events through a queue, and a
 * byte on wake_fd for each. What it holds (step, whether it has a state,
 * the world that last stepped it) is read at any time with
 * sl_elastic_trainer_local, for the rendezvous core.
 *
 * In a world of W ranks, each step:
 *   1. rank r takes its slice of the step's global batch
 *      (sl_elastic_batch: the epoch's shuffled order and a cursor that is
 *      a function of the step alone), forward and backward over it,
 *      gradients summed over its samples (not averaged);
 *   2. the gradients are all-reduced over the ring (ring_link.h), divided
 *      by the step's sample count: every rank holds the same mean, bit for
 *      bit;
 *   3. every rank applies the optimizer step with the job's learning-rate
 *      schedule at (epoch, step within the epoch).
 * When every member trains on a GPU with libnccl at hand, step 2 goes
 * over NCCL on the device instead (the communicator made on entering,
 * its unique id sent by rank 0 over the ring); the ring carries the rest.
 * On entering a world the source rank's state (parameters, optimizer
 * state, running statistics) is sent to the others over the same ring
 * (an all-reduce in which the others give zeros); with no source, every
 * rank restores the named checkpoint, or initialises from the job's seed
 * at step 0. Rank 0 evaluates at each epoch's end and writes a checkpoint
 * every checkpoint_every steps (and at the end). */
#ifndef STARLING_ELASTIC_TRAINER_H
#define STARLING_ELASTIC_TRAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/elastic.h"
#include "starling/net.h"
#include "starling/nn.h"

#define SL_ELASTIC_EP_MAX 128 /* bytes of a ring endpoint, with its NUL */

/* What the thread needs for the job's life (copied at start). */
typedef struct {
    sl_elastic_job_t job;                   /* the job (builtin trainer) */
    char job_id[SL_ELASTIC_JOB_ID_LEN + 1]; /* its id */
    int threads;                            /* BLAS threads (0: the backend's default) */
    const char *device;                     /* nn backend: "cpu", "cuda", "auto" (NULL: auto) */
    bool has_key;                           /* the cluster is keyed: the ring uses CurveZMQ */
    sl_net_key_t key;                       /* the cluster key (has_key) */
    char dir[512];                          /* this peer's directory for the job (exists):
                                               checkpoints are written here */
    int wake_fd;                            /* a byte is written here for each event (0: none) */
    uint32_t ring_timeout_ms;               /* no progress this long ends a world (0: the link's default) */
    int nccl;                               /* SL_ELASTIC_NCCL_*: when the gradients go over NCCL */
    uint32_t nccl_timeout_ms;               /* a communicator's creation, and one all-reduce over
                                               it, at most (0: ring_timeout_ms, or 10 s) */
} sl_elastic_trainer_cfg_t;

/* When a world's gradient all-reduce goes over NCCL (docs/elastic.md
 * "NCCL") instead of the ring. */
enum {
    SL_ELASTIC_NCCL_AUTO = 0,  /* a world of two or more whose members can all use it */
    SL_ELASTIC_NCCL_OFF = 1,   /* never: the ring */
    SL_ELASTIC_NCCL_ALWAYS = 2 /* as AUTO, a world of one too (the GPU test) */
};

/* A world to train in, from the rendezvous core's START. */
typedef struct {
    sl_elastic_ref_t world;                               /* the world */
    uint32_t rank;                                        /* this peer's rank */
    uint32_t size;                                        /* ranks */
    char endpoints[SL_ELASTIC_MAX_NODES][SL_ELASTIC_EP_MAX]; /* ring endpoints in rank order */
    char bind[SL_ELASTIC_EP_MAX];                         /* where this rank binds ("": endpoints[rank]) */
    uint64_t start_step;                                  /* the step it starts from */
    int source;                                           /* the rank whose state the others take;
                                                             -1: restore `restore` (start_step > 0)
                                                             or initialise (start_step 0) */
    sl_elastic_ref_t source_world;                        /* the source's state world (its ack's),
                                                             which the receivers' state keeps */
    char restore[600];                                    /* source -1, start_step > 0: a checkpoint
                                                             file of that step, on disk */
} sl_elastic_enter_t;

typedef enum {
    SL_ETEV_STEP = 0,       /* progress: `step` reached, `loss` the mean train loss since the
                               last STEP; `first` on a world's first step */
    SL_ETEV_EPOCH = 1,      /* rank 0: epoch `epoch` ended, `metrics` (val/test) */
    SL_ETEV_CHECKPOINT = 2, /* rank 0: a checkpoint of `step` is at `path` (the node copies it) */
    SL_ETEV_LEFT = 3,       /* the world ended for this rank: asked to (err SL_OK) or the ring
                               broke (err, `text` says why); `step` where it stands */
    SL_ETEV_DONE = 4,       /* every epoch is trained (`step` the last); the world is left;
                               rank 0: the final weights are at `path` (.npz) */
    SL_ETEV_FAILED = 5,     /* cannot train at all (data set, model, backend) or the
                               loss diverged: `text`; the world is left (no LEFT follows) */
    SL_ETEV_LOG = 6         /* a line of log text */
} sl_etev_kind;

/* One event. */
typedef struct sl_etev {
    sl_etev_kind kind;         /* what */
    sl_elastic_ref_t world;    /* the world it happened in (round 0: none) */
    uint64_t step;             /* the step reached (steps applied so far) */
    uint32_t epoch;            /* STEP, EPOCH: the epoch (1-based) */
    bool first;                /* STEP: the world's first step */
    double loss;               /* STEP: mean train loss */
    sl_nn_epoch_t metrics;     /* EPOCH */
    sl_err err;                /* LEFT, FAILED */
    char path[600];            /* CHECKPOINT, DONE (rank 0) */
    char text[512];            /* LEFT, FAILED, LOG */
    struct sl_etev *next;      /* queue link */
} sl_etev_t;

typedef struct sl_elastic_trainer sl_elastic_trainer_t;

/* Starts the thread (it loads the data set and builds the model when it
 * first enters a world). */
sl_err sl_elastic_trainer_new(const sl_elastic_trainer_cfg_t *cfg, sl_elastic_trainer_t **out);
/* Trains in world `w` from now on. SL_ESTATE while still in another world
 * (leave first and wait for its LEFT). */
sl_err sl_elastic_trainer_enter(sl_elastic_trainer_t *t, const sl_elastic_enter_t *w);
/* Leaves the current world at the next step boundary (a step in progress
 * ends first, or is abandoned when its all-reduce cannot finish); a LEFT
 * event follows. Nothing when in no world. */
void sl_elastic_trainer_leave(sl_elastic_trainer_t *t);
/* What the trainer holds now, for the rendezvous core (thread-safe). */
void sl_elastic_trainer_local(sl_elastic_trainer_t *t, sl_elastic_local_t *out);
/* Whether it is in a world (entered, not yet LEFT). */
bool sl_elastic_trainer_in_world(sl_elastic_trainer_t *t);
/* Pops the next event (caller sl_free's it), or NULL. */
sl_etev_t *sl_elastic_trainer_pop(sl_elastic_trainer_t *t);
/* Leaves, joins the thread and frees (a step in progress ends first: its
 * all-reduce finishes, or fails within the ring's timeout). */
void sl_elastic_trainer_destroy(sl_elastic_trainer_t **t);

/* Test hook: `fn` runs on the trainer's thread with the whole state vector
 * (parameters, optimizer state, running statistics: sl_nn_dp_state_get)
 * once the state is taken on entering a world, and after every step
 * applied; `step` is the step it is at. NULL: none. */
typedef void (*sl_elastic_trainer_state_fn)(void *ctx, uint64_t step, const float *state,
                                            size_t count);
void sl_elastic_trainer_test_on_state(sl_elastic_trainer_t *t, sl_elastic_trainer_state_fn fn,
                                      void *ctx);
/* Test switch: this rank's ring dies (SL_ECLOSED, its sockets closed) at
 * its `sends`-th send in the next step's all-reduce: a rank killed
 * mid-step (sl_ring_link_test_die_after). */
void sl_elastic_trainer_test_die_after(sl_elastic_trainer_t *t, uint64_t sends);

#endif
