/* Elastic jobs: one model trained data-parallel by a world of peers that
 * changes while it trains (docs/elastic.md).
 *
 *   rendezvous  (src/elastic/rendezvous.c) the sans-I/O state machine that,
 *               from the job's records in the store, this peer's membership
 *               view and `now`, says what this peer writes next (a
 *               volunteer record, a world as round leader, an ack) and when
 *               it starts and stops training
 *   schedule    (src/elastic/schedule.c) which samples each rank trains on
 *               at each step: one shuffled order per epoch and a cursor,
 *               so every sample is seen once per epoch whatever the world
 *               size does
 *   ring        (src/elastic/ring.c) the ring all-reduce schedule
 *               (reduce-scatter then all-gather, chunked) that averages
 *               the gradients of a world
 *
 * The records (one writer per key, as study claims):
 *
 *   job/J/vol/P      peer P volunteers for round R or later
 *   job/J/w/R/L      the world of round R sealed by leader L: its parent
 *                    world (the one it continues), its members in rank
 *                    order and, for a graft, the world it grafts onto
 *   job/J/ack/R/P    peer P joins the world (R, L), naming the world it
 *                    acked before (its tip), its step, whether it holds
 *                    that state in memory and the world that last stepped it
 *
 * The partition rule (docs/elastic.md, "Partitions"): a world with a
 * parent is established only when a quorum of the parent's members (a
 * strict majority, or exactly half holding the parent's rank 0) acked it
 * as continuers (their chain of acks leads back to the
 * parent's round through worlds that can never be established). A peer acks at
 * most once per round and in rising rounds, so two children of one world
 * can never both be established: a lineage never forks, and only the side
 * of a partition holding a quorum of the last world continues it. When no
 * quorum is possible any more (rank 0 of a world of two died), a graft (a
 * root naming that world) carries its state on; a graft is dropped if the
 * world's own lineage went on after all. */
#ifndef STARLING_ELASTIC_H
#define STARLING_ELASTIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"
#include "starling/round.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_ELASTIC_ID_MAX 64     /* characters in a peer id (as SL_PEER_ID_MAX) */
#define SL_ELASTIC_MAX_NODES 32  /* members of one world at most */

/* Names a world: the round and the leader that sealed it. Round 0 is no
 * world (the parent of a root world, the tip of a peer that acked none). */
typedef struct {
    uint64_t round;                     /* round number, from 1 */
    char leader[SL_ELASTIC_ID_MAX + 1]; /* the peer that sealed it */
} sl_elastic_ref_t;

/* A world record (job/J/w/R/L), written once by its leader. */
typedef struct {
    sl_elastic_ref_t id;     /* (round, leader) */
    sl_elastic_ref_t parent; /* the world it continues (round 0: a root) */
    sl_elastic_ref_t graft;  /* a root only: the world whose state it carries on
                                when that world's quorum is gone (a graft,
                                docs/elastic.md "Partitions: the rule");
                                round 0: none */
    uint32_t count;          /* members */
    char members[SL_ELASTIC_MAX_NODES][SL_ELASTIC_ID_MAX + 1]; /* in rank order */
} sl_elastic_world_t;

/* An ack record (job/J/ack/R/P): peer `peer` joins world `world`. */
typedef struct {
    char peer[SL_ELASTIC_ID_MAX + 1]; /* the writer */
    sl_elastic_ref_t world;           /* the world it joins */
    sl_elastic_ref_t tip;             /* the world it acked before (round 0: none) */
    uint64_t step;                    /* the step its state is at (or its checkpoint's) */
    bool has_state;                   /* holds that state in memory */
    sl_elastic_ref_t state_world;     /* the last world that applied a step to it */
} sl_elastic_ack_t;

/* A volunteer record (job/J/vol/P): `peer` wants a place from `round` on. */
typedef struct {
    char peer[SL_ELASTIC_ID_MAX + 1]; /* the writer */
    uint64_t round;                   /* the first round it volunteers for */
} sl_elastic_vol_t;

/* A pruned view's memory of one peer's acks below its anchor (docs/elastic.md,
 * "The pruned view"): the newest of them and what the full view says of it. */
typedef struct {
    char peer[SL_ELASTIC_ID_MAX + 1]; /* the peer */
    sl_elastic_ref_t tip;             /* its newest ack below the anchor's round */
    sl_elastic_ref_t state_world;     /* the state world that ack named */
    uint8_t from_none;                /* its chain of acks from `tip` back to no world:
                                         0 committed (it acked an established world),
                                         2 through dead worlds only, 1 not known */
    sl_elastic_ref_t source_world;    /* the state world `tip` started from (its
                                         source's; round 0: none) */
    bool tip_in_lineage;              /* `tip` is of the anchor's lineage */
    bool state_in_lineage;            /* `state_world` is */
    bool source_in_lineage;           /* `source_world` is */
} sl_elastic_past_t;

/* What the store holds of a job, and this peer's membership view. The
 * arrays are borrowed for the call. At most one world per (round, leader),
 * one ack per (round, peer), one volunteer record per peer. */
typedef struct {
    const sl_elastic_world_t *const *worlds; /* every world record */
    size_t world_count;                      /* entries */
    const sl_elastic_ack_t *const *acks;     /* every ack record */
    size_t ack_count;                        /* entries */
    const sl_elastic_vol_t *vols;     /* every volunteer record */
    size_t vol_count;                 /* entries */
    const sl_round_member_t *members; /* this peer's view (alive or not) */
    size_t member_count;              /* entries */
    bool cancelled;                   /* the job was cancelled */
    bool synced;                      /* the replica caught up with another peer's
                                         since this peer started (or it waited out a
                                         sync alone): until then it only volunteers
                                         (a stale replica would join a world the
                                         others left, or seal a root beside a
                                         lineage it has not heard of) */
    sl_elastic_ref_t anchor;          /* a pruned view: the world taken as established
                                         (its record is among `worlds`); records of
                                         rounds below it are left out. Round 0: the
                                         full view (sl_elastic_anchor) */
    const sl_elastic_past_t *past;    /* a pruned view: each peer's newest ack below
                                         the anchor, sorted by peer */
    size_t past_count;                /* entries */
} sl_elastic_view_t;

/* A job's rendezvous settings. */
typedef struct {
    const char *job_id;      /* the job (round keys); borrowed for the core's life */
    uint32_t min_nodes;      /* a world starts with at least this many members */
    uint32_t max_nodes;      /* and never has more (<= SL_ELASTIC_MAX_NODES) */
    uint32_t settle_ms;      /* the leader waits this long for more volunteers */
    uint32_t ack_timeout_ms; /* a peer gives up on a world not started by then */
} sl_elastic_config_t;

/* What this peer's trainer holds, given at every call. */
typedef struct {
    uint64_t step;                /* the step its state is at (no state: the checkpoint's) */
    bool has_state;               /* it holds parameters in memory */
    sl_elastic_ref_t state_world; /* the last world that applied a step to these
                                     parameters (kept from the source when they
                                     were sent; round 0: initialised, or restored
                                     from a checkpoint) */
    sl_elastic_ref_t broken;      /* a world whose collective broke here (the trainer
                                     left it: a member's connection closed or went
                                     silent), seen before membership says who died;
                                     round 0: none */
} sl_elastic_local_t;

typedef enum {
    SL_ELASTIC_IDLE = 0,     /* volunteering; may lead */
    SL_ELASTIC_WAITING = 1,  /* acked a world, waiting for it to start */
    SL_ELASTIC_TRAINING = 2, /* training in a world */
    SL_ELASTIC_CANCELLED = 3 /* the job was cancelled */
} sl_elastic_phase;

typedef enum {
    SL_ELASTIC_WRITE_VOL = 1,   /* write `vol` under job/J/vol/self */
    SL_ELASTIC_WRITE_WORLD = 2, /* write `world` under job/J/w/R/self */
    SL_ELASTIC_WRITE_ACK = 3,   /* write `ack` under job/J/ack/R/self */
    SL_ELASTIC_START = 4,       /* start training in `world` */
    SL_ELASTIC_STOP = 5         /* stop training at the step boundary */
} sl_elastic_action_kind;

/* One thing the peer does next. */
typedef struct {
    sl_elastic_action_kind kind; /* which */
    sl_elastic_vol_t vol;        /* WRITE_VOL */
    sl_elastic_world_t world;    /* WRITE_WORLD, START: the world */
    sl_elastic_ack_t ack;        /* WRITE_ACK */
    uint32_t rank;               /* START: this peer's rank */
    uint64_t start_step;         /* START: the step the world starts from */
    int source;                  /* START: the rank that sends its state to the others,
                                    -1: every member restores the checkpoint at start_step
                                    (or initialises from the seed at step 0) */
    const char *reason;          /* STOP: why (static text) */
} sl_elastic_action_t;

#define SL_ELASTIC_OUT_MAX 4

/* The actions of one call, in order. */
typedef struct {
    sl_elastic_action_t actions[SL_ELASTIC_OUT_MAX]; /* to do, in order */
    size_t count;                                    /* entries */
} sl_elastic_out_t;

typedef struct sl_elastic sl_elastic_t;

/* A rendezvous core for peer `self` in one job. After a restart a new core
 * reads its own earlier acks from the store. */
sl_err sl_elastic_new(const sl_elastic_config_t *cfg, const char *self, sl_elastic_t **out);
void sl_elastic_destroy(sl_elastic_t **e);

/* One turn: decides from the view, the trainer's state and `now` what this
 * peer does next. The caller writes the records into its replica before the
 * next call (a write it makes is in its own view at once). SL_ENOMEM, or
 * SL_EINVAL for a view that breaks the record rules (two acks of one round
 * by one peer). */
sl_err sl_elastic_step(sl_elastic_t *e, const sl_elastic_view_t *view,
                       const sl_elastic_local_t *local, int64_t now_ms, sl_elastic_out_t *out);

sl_elastic_phase sl_elastic_phase_of(const sl_elastic_t *e);
const char *sl_elastic_phase_name(sl_elastic_phase p);
/* The world this peer trains in or waits for (round 0: none). */
sl_elastic_ref_t sl_elastic_current(const sl_elastic_t *e);

/* Whether two refs name the same world. */
bool sl_elastic_ref_eq(const sl_elastic_ref_t *a, const sl_elastic_ref_t *b);

/* What the records say of a world, as any reader computes it. */
typedef struct {
    bool found;       /* the record is in the view */
    bool established; /* its parent is established and a quorum of the
                         parent's members acked it as continuers (a root:
                         a majority of its own members; a graft: of its
                         members continuing the established world it
                         grafts onto); final once true */
    bool dead;        /* it can never be established; final once true */
    bool dropped;     /* its lineage grafted onto a world whose own lineage
                         went on (or an earlier graft did): it never trains
                         again; final once true */
    bool all_acked;   /* every member acked it */
    bool trainable;   /* established, all acked, the newest established world
                         of the surviving lineage */
    sl_elastic_ref_t root; /* the root of its lineage (round 0: unknown; in a
                              pruned view, the anchor for the worlds that
                              descend from it) */
} sl_elastic_status_t;

sl_err sl_elastic_status(const sl_elastic_view_t *view, const sl_elastic_ref_t *world,
                         sl_elastic_status_t *out);

/* The status of every world of the view, in the view's order (`out` holds
 * view->world_count entries): one pass where a checker needs them all. */
sl_err sl_elastic_status_all(const sl_elastic_view_t *view, sl_elastic_status_t *out);

/* The head: the newest established world (highest round, then leader id;
 * round 0: none) of a lineage not dropped. Its lineage is the one that
 * survives. */
sl_err sl_elastic_head(const sl_elastic_view_t *view, sl_elastic_ref_t *out);

/* The pruned view (docs/elastic.md, "The pruned view"): the newest world
 * of the view that may be its anchor, and what a view pruned to it keeps
 * of the acks below it. The anchor is an established world of the head's
 * lineage, an ancestor of the head by parents, every world below whose
 * round is established or dead, and past which no world of the view
 * names a parent or graft below it. `past` (past_cap entries: the view's
 * past_count plus ack_count is enough) gets one entry per peer with an
 * ack below it, sorted by peer. No anchor above round `limit` is taken
 * (UINT64_MAX: none; a reader that knows of worlds not yet in the view
 * sets it, sl_elastic_records_load). *anchor is the view's own anchor when
 * it cannot move, round 0 when a full view has none. SL_ENOMEM, SL_ETOOBIG
 * (past_cap short), or SL_EINVAL as sl_elastic_step. */
sl_err sl_elastic_anchor(const sl_elastic_view_t *view, uint64_t limit, sl_elastic_ref_t *anchor,
                         sl_elastic_past_t *past, size_t past_cap, size_t *past_count);

/* Whether a view pruned at `anchor` can judge world `w`: its round is at
 * or past the anchor's and it names no parent or graft below it (or it is
 * the anchor). A world it cannot judge makes the records stale
 * (sl_elastic_records_stale). */
bool sl_elastic_anchor_judges(const sl_elastic_ref_t *anchor, const sl_elastic_world_t *w);

/* The invariant checker the simulator and debug builds call: SL_OK or
 * SL_EINTERNAL with the reason. */
sl_err sl_elastic_check(const sl_elastic_t *e, char *why, size_t why_len);

/* ---- the data-parallel step schedule (src/elastic/schedule.c) ----
 *
 * Each epoch has one shuffled order of the training set (seeded by the
 * job's seed and the epoch) and a cursor into it. A step takes the next
 * `global_batch` samples of the order (the epoch's last step takes what is
 * left) and splits them across the world's ranks in contiguous slices, by
 * rank. The global batch does not depend on the world, so the cursor is a
 * function of the step: a world that starts at step s carries on where the
 * last one stopped, and every sample is seen once per epoch whatever the
 * world size does (E4). Ranks sum their gradients and the all-reduce's sum
 * is divided by the step's sample count (sl_elastic_batch_t.total), so an
 * uneven split weighs every sample the same. */

typedef struct {
    uint64_t seed;          /* the job's seed */
    uint64_t sample_count;  /* samples in the training set */
    uint32_t global_batch;  /* samples per step, all ranks together */
} sl_elastic_sched_t;

/* Where a step stands, and one rank's share of it. */
typedef struct {
    uint64_t epoch;  /* the step's epoch, from 0 */
    uint64_t cursor; /* index in the epoch's order of the step's first sample */
    uint64_t total;  /* samples of the step, all ranks together */
    uint64_t offset; /* index in the order of this rank's first sample */
    uint64_t count;  /* samples of this rank (0 when the world outnumbers them) */
} sl_elastic_batch_t;

/* Steps in one epoch: ceil(sample_count / global_batch). */
uint64_t sl_elastic_steps_per_epoch(const sl_elastic_sched_t *s);

/* Rank `rank`'s share of step `step` in a world of `world` ranks. */
sl_err sl_elastic_batch(const sl_elastic_sched_t *s, uint64_t step, uint32_t rank,
                        uint32_t world, sl_elastic_batch_t *out);

/* The shuffled order of epoch `epoch` (sample_count entries, a
 * permutation of 0..sample_count-1; the same on every peer). */
sl_err sl_elastic_epoch_order(const sl_elastic_sched_t *s, uint64_t epoch, uint32_t *order);

/* ---- the ring all-reduce schedule (src/elastic/ring.c) ----
 *
 * A buffer of `count` elements on each of `world` ranks is cut into
 * `world` segments (segment i: elements [i*count/world, (i+1)*count/world)).
 * Reduce-scatter: in steps 0..world-2, rank r sends segment (r-k) mod W to
 * rank r+1 and adds segment (r-k-1) mod W received from rank r-1; rank r
 * then holds the sum of segment (r+1) mod W. All-gather: in steps
 * world-1..2*world-3, rank r sends segment (r+1-k') mod W and copies
 * segment (r-k') mod W (k' = step - (world-1)). Each segment moves in
 * chunks of `chunk` elements, and chunk c of a step needs only chunk c of
 * the step before, so chunks pipeline: a transport may keep several in
 * flight. The owner scales its summed segment (finalize: by 1/world for an
 * average, by 1/samples for a sample-weighted mean) before its first
 * all-gather send, chunk by chunk, so every rank ends with the same bits. A message is named by (step, chunk) and its length is known to
 * both ends. */

typedef struct {
    uint32_t world; /* ranks in the ring, >= 1 */
    uint32_t rank;  /* this rank */
    uint64_t count; /* elements in the buffer */
    uint64_t chunk; /* elements per message, >= 1 */
} sl_ring_cfg_t;

/* One operation, in order: send (if any), then receive (if any). */
typedef struct {
    uint32_t step;     /* 0..2*world-3 */
    uint64_t chunk;    /* chunk index within the step's segments */
    bool finalize;     /* scale the send range (the summed segment) before sending */
    bool has_send;     /* send [send_off, send_off+send_len) to rank+1 */
    uint64_t send_off; /* element offset */
    uint64_t send_len; /* elements */
    bool has_recv;     /* receive recv_len elements from rank-1 into recv_off */
    uint64_t recv_off; /* element offset */
    uint64_t recv_len; /* elements */
    bool reduce;       /* add what is received (reduce-scatter) or copy it (all-gather) */
} sl_ring_op_t;

/* Walks one rank's operations. */
typedef struct {
    sl_ring_cfg_t cfg; /* the ring */
    uint32_t step;     /* next step */
    uint64_t chunk;    /* next chunk */
    uint64_t chunks;   /* chunks per step (of the largest segment) */
} sl_ring_iter_t;

/* Segment `seg`'s offset and length. */
void sl_ring_segment(uint32_t world, uint64_t count, uint32_t seg, uint64_t *off, uint64_t *len);

sl_err sl_ring_iter_init(sl_ring_iter_t *it, const sl_ring_cfg_t *cfg);
/* The next operation; false when the rank is done. A world of one has no
 * operation: its buffer is already the average. */
bool sl_ring_next(sl_ring_iter_t *it, sl_ring_op_t *op);


/* ---- the job file (src/elastic/job_spec.c; docs/elastic.md, "The job file") ----
 *
 * A JSON object with "kind": "elastic". Unknown fields are refused and
 * every refusal names the field ("nodes.min: must be in [1, 32], not 0").
 * sl_elastic_job_encode writes the canonical form (fixed key order, every
 * default filled in, numbers as %.17g): it parses back to the same job,
 * and the job id is a hash of it, so two files that mean the same job
 * have the same id. */

#define SL_ELASTIC_JOB_MAX_LEN (64 * 1024) /* bytes of a job file */
#define SL_ELASTIC_NAME_MAX 64             /* characters in a job name */
#define SL_ELASTIC_TEXT_MAX 1024           /* characters in a model spec or command */
#define SL_ELASTIC_DATASET_MAX 255         /* characters in a dataset name or path */
#define SL_ELASTIC_MAX_EPOCHS 10000        /* epochs of a job */
#define SL_ELASTIC_MAX_BATCH 1048576       /* global batch, all ranks together */
#define SL_ELASTIC_JOB_ID_LEN 16           /* hex characters of a job id */
#define SL_ELASTIC_JOB_CANON_MAX 4096      /* bytes of the canonical encoding */

typedef enum {
    SL_ELASTIC_TRAINER_BUILTIN = 1, /* the built-in trainer, data-parallel */
    SL_ELASTIC_TRAINER_COMMAND = 2  /* a command run with torchrun's environment */
} sl_elastic_trainer_kind;

/* A parsed, validated job file. */
typedef struct {
    char name[SL_ELASTIC_NAME_MAX + 1];       /* letters, digits, '_', '-', '.' */
    uint64_t seed;                            /* default 1 */
    uint32_t min_nodes, max_nodes;            /* 1 <= min <= max <= SL_ELASTIC_MAX_NODES */
    sl_elastic_trainer_kind trainer;          /* builtin or command */
    char model[SL_ELASTIC_TEXT_MAX + 1];      /* builtin: model spec ("mlp:256,128") */
    char command[SL_ELASTIC_TEXT_MAX + 1];    /* command: the shell command */
    uint32_t stop_grace_s;                    /* command: SIGTERM to SIGKILL (default 10) */
    char dataset[SL_ELASTIC_DATASET_MAX + 1]; /* builtin: required; command: optional */
    uint64_t dataset_limit;                   /* first N training samples (0: all) */
    double val_split;                         /* held-out fraction, [0, 0.9] (default 0.1) */
    uint32_t epochs;                          /* 1..SL_ELASTIC_MAX_EPOCHS */
    uint32_t global_batch;                    /* samples per step, all ranks (default 128) */
    char optimizer[16];                       /* sgd (default), nesterov, adam, adamw */
    double lr;                                /* (0, 10] (default 0.05) */
    double momentum;                          /* [0, 1) (default 0.9) */
    double weight_decay;                      /* [0, 1) (default 0) */
    char schedule[16];                        /* none (default), step, cosine */
    uint32_t step_epochs;                     /* step schedule period (default 10) */
    double step_gamma;                        /* step schedule factor, (0, 1] (default 0.1) */
    uint32_t warmup_epochs;                   /* linear warm-up (default 0) */
    uint32_t checkpoint_every;                /* steps between checkpoints (default 100) */
} sl_elastic_job_t;

/* Parses a job file. SL_EINVAL (SL_ETOOBIG over SL_ELASTIC_JOB_MAX_LEN)
 * with the reason in `why`, naming the field; SL_ENOMEM. */
sl_err sl_elastic_job_parse(const char *json, size_t len, sl_elastic_job_t *out, char *why,
                            size_t why_len);
/* The canonical encoding (NUL-terminated, `*len` bytes without the NUL);
 * SL_ETOOBIG if it does not fit `cap`. */
sl_err sl_elastic_job_encode(const sl_elastic_job_t *job, char *out, size_t cap, size_t *len);
/* The job id: 16 hex characters of a hash of the canonical encoding. */
sl_err sl_elastic_job_id(const sl_elastic_job_t *job, char out[SL_ELASTIC_JOB_ID_LEN + 1]);
/* Whether `id` (len bytes) has a job id's form. */
bool sl_elastic_job_id_valid(const char *id, size_t len);


/* ---- the job's store keys and records (src/elastic/job_records.c;
 * proto/elastic.md) ----
 *
 * The one place that builds and parses `job/J/...` keys and encodes and
 * decodes their values. J is a job id (16 lower-case hex), R a round in
 * decimal (1..SL_ELASTIC_ROUND_MAX, no leading zero), P and L peer ids
 * (1..64 bytes of UTF-8, no control character; the last segment, so they
 * may hold '/'):
 *
 *   job/J/spec        the job's canonical JSON (sl_elastic_job_encode)
 *   job/J/vol/P       msgpack {0: round}
 *   job/J/w/R/L       msgpack {0: parent round, 1: parent leader, 2: [members]}
 *   job/J/ack/R/P     msgpack {0: world leader, 1: tip round, 2: tip leader,
 *                              3: step, 4: has_state, 5: state_world round,
 *                              6: state_world leader}
 *   job/J/cancel      msgpack {} (any map: the job is cancelled)
 *
 * Values are canonical msgpack (proto/envelope.md section 3: integer keys
 * ascending, every field required, unknown keys skipped, no float).
 * Decoders are strict and bounded and say why in `why`: SL_EPROTO for a
 * malformed key or value, SL_ETRUNC for a value that ends early,
 * SL_ENONCANON for msgpack out of the canonical profile, SL_ETOOBIG over a
 * bound. */

#define SL_ELASTIC_ROUND_MAX UINT64_C(9007199254740991) /* rounds and steps: 2^53-1 */
#define SL_ELASTIC_KEY_MAX 192          /* bytes of the longest key, with its NUL */
#define SL_ELASTIC_VALUE_MAX 4096       /* bytes of a record value (not the spec) */
#define SL_ELASTIC_MAX_RECORDS 4096     /* records of each kind one view holds */

typedef enum {
    SL_ELASTIC_KEY_SPEC = 1,  /* job/J/spec */
    SL_ELASTIC_KEY_VOL = 2,   /* job/J/vol/P */
    SL_ELASTIC_KEY_WORLD = 3, /* job/J/w/R/L */
    SL_ELASTIC_KEY_ACK = 4,   /* job/J/ack/R/P */
    SL_ELASTIC_KEY_CANCEL = 5, /* job/J/cancel */
    /* What the peers report of the job, JSON objects (proto/elastic.md
       "Progress records"); the rendezvous does not read them. */
    SL_ELASTIC_KEY_START = 6,  /* job/J/start/R: rank 0 started world R */
    SL_ELASTIC_KEY_PROG = 7,   /* job/J/prog: the latest step (rank 0) */
    SL_ELASTIC_KEY_CURVE = 8,  /* job/J/c/S: a point of the loss curve at step S (`round`) */
    SL_ELASTIC_KEY_EPOCH = 9,  /* job/J/m/E: epoch E's metrics (E in `round`) */
    SL_ELASTIC_KEY_CKPT = 10,  /* job/J/ckpt: the newest checkpoint (step, blob) */
    SL_ELASTIC_KEY_DONE = 11,  /* job/J/done: the job ended (final model, metrics) */
    SL_ELASTIC_KEY_FAIL = 12,  /* job/J/fail/P: peer P cannot train the job */
    SL_ELASTIC_KEY_LOG = 13    /* job/J/log/P: the tail of peer P's log for the job */
} sl_elastic_key_kind;

/* A parsed key. `round` and `peer` are set for the kinds that have them
 * (the world's leader is `peer`). */
typedef struct {
    sl_elastic_key_kind kind;
    char job[SL_ELASTIC_JOB_ID_LEN + 1];
    uint64_t round;
    char peer[SL_ELASTIC_ID_MAX + 1];
} sl_elastic_key_t;

/* Writes the key (NUL-terminated, *len bytes without it); SL_EINVAL for a
 * key that would not parse back, SL_ETOOBIG if `cap` is short. */
sl_err sl_elastic_key_build(const sl_elastic_key_t *k, char *out, size_t cap, size_t *len);
/* Parses a key; SL_EPROTO with the reason otherwise. */
sl_err sl_elastic_key_parse(const char *key, size_t len, sl_elastic_key_t *out, char *why,
                            size_t why_len);

/* Each encoder writes the record's canonical value into `out` (`cap`
 * bytes; SL_ETOOBIG if short) and refuses (SL_EINVAL) a record its
 * decoder would refuse. Each decoder takes the parsed key (the writer,
 * round and leader come from it) and `max_nodes`, the job's bound on a
 * world's members (<= SL_ELASTIC_MAX_NODES). */
sl_err sl_elastic_vol_encode(const sl_elastic_vol_t *v, uint8_t *out, size_t cap, size_t *len);
sl_err sl_elastic_vol_decode(const sl_elastic_key_t *key, const void *val, size_t len,
                             sl_elastic_vol_t *out, char *why, size_t why_len);
sl_err sl_elastic_world_encode(const sl_elastic_world_t *w, uint32_t max_nodes, uint8_t *out,
                               size_t cap, size_t *len);
sl_err sl_elastic_world_decode(const sl_elastic_key_t *key, uint32_t max_nodes,
                               const void *val, size_t len, sl_elastic_world_t *out,
                               char *why, size_t why_len);
sl_err sl_elastic_ack_encode(const sl_elastic_ack_t *a, uint8_t *out, size_t cap, size_t *len);
sl_err sl_elastic_ack_decode(const sl_elastic_key_t *key, const void *val, size_t len,
                             sl_elastic_ack_t *out, char *why, size_t why_len);
sl_err sl_elastic_cancel_encode(uint8_t *out, size_t cap, size_t *len);
sl_err sl_elastic_cancel_decode(const void *val, size_t len, char *why, size_t why_len);
/* job/J/spec: the canonical encoding of a job whose id is J. */
sl_err sl_elastic_spec_decode(const sl_elastic_key_t *key, const void *val, size_t len,
                              sl_elastic_job_t *out, char *why, size_t why_len);

/* job/J/ckpt: the newest checkpoint, a JSON object (proto/elastic.md
 * "Progress records") with "step" (1 to 2^53-1) and, for a builtin job,
 * "blob" (64 lower-case hex: written to *blob), for a command job "files"
 * (an object: name -> 64 hex, at most 16, each a plain file name). At most
 * SL_ELASTIC_VALUE_MAX bytes. SL_EPROTO with the reason otherwise. */
sl_err sl_elastic_ckpt_decode(const void *val, size_t len, bool command, uint64_t *step,
                              uint8_t blob[32], char *why, size_t why_len);

/* The job's records as read from the store, turned into the core's view. */
typedef struct sl_elastic_records sl_elastic_records_t;

sl_err sl_elastic_records_new(const char *job_id, uint32_t max_nodes,
                              sl_elastic_records_t **out);
void sl_elastic_records_destroy(sl_elastic_records_t **r);
/* Adds one store entry of the job: a vol, world, ack or cancel record (the
 * spec is read with sl_elastic_spec_decode, and is skipped here). A key of
 * another job, a malformed key or value, a second record for one key, or a
 * record over SL_ELASTIC_MAX_RECORDS of its kind is refused (the view
 * keeps what it had) with the reason. */
sl_err sl_elastic_records_add(sl_elastic_records_t *r, const char *key, size_t key_len,
                              const void *val, size_t val_len, char *why, size_t why_len);
/* Fills the view's worlds, acks, vols, cancelled and, once pruned, its
 * anchor and past (borrowed from `r` until its next add, prune or
 * destroy); the caller sets members and synced. */
void sl_elastic_records_view(const sl_elastic_records_t *r, sl_elastic_view_t *view);
/* Moves the records' anchor to the newest their view allows
 * (sl_elastic_anchor; docs/elastic.md "The pruned view"): the world and
 * ack records below it are dropped, and from then on a record below it is
 * left out (counted), not kept. *moved: whether it moved. The view then
 * carries the anchor and its past. SL_ENOMEM. */
sl_err sl_elastic_records_prune(sl_elastic_records_t *r, bool *moved);
/* One store entry of a job (borrowed), for sl_elastic_records_load. */
typedef struct {
    const char *key;  /* job/J/... */
    size_t key_len;   /* bytes */
    const void *val;  /* its value */
    size_t val_len;   /* bytes */
} sl_elastic_entry_t;

/* Reads a job's whole history into records that hold none yet (a restart,
 * a fresh peer, records gone stale): every entry as sl_elastic_records_add
 * takes it, the world and ack records in rising rounds, and whenever they
 * near the bound, at a round's end, the records are pruned at the newest
 * anchor that prefix of the history allows and that no later world's
 * parent or graft is below (so nothing read after it is stale). A history
 * of any length fits, where adding it in the store's order would pass the
 * bound. *refused: the entries refused (the last one's reason in `why`).
 * SL_ENOMEM. */
sl_err sl_elastic_records_load(sl_elastic_records_t *r, const sl_elastic_entry_t *entries,
                               size_t count, size_t *refused, char *why, size_t why_len);
/* Records read and left out because they were below the anchor. */
uint64_t sl_elastic_records_left_out(const sl_elastic_records_t *r);
/* Whether a record arrived since the anchor was set that the pruned view
 * cannot judge: one below the anchor (new to this replica: a partition's
 * other side wrote it), or a world that carries on a world below it; or a
 * world or ack was refused for the bound. The caller then reads the job's
 * records again into new records (sl_elastic_records_load): the anchor's
 * argument holds only for records that respect it. */
bool sl_elastic_records_stale(const sl_elastic_records_t *r);

#ifdef __cplusplus
}
#endif
#endif
