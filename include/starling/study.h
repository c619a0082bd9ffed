/* Starling studies: the pure (sans-I/O) cores of a model search.
 *
 *   spec     a study file (JSON) parsed and validated into sl_study_spec_t;
 *            every refusal names the field: `search_space.lr.low: must be
 *            > 0 with log scale`                               (study_spec.c)
 *   space    sampling and canonical encoding of configurations; trial ids
 *            are hashes of the study id and the config content   (space.c)
 *   search   searchers: random, grid, evolutionary Pareto; deterministic
 *            from (study seed, trial ordinal, results seen)     (search.c)
 *   pareto   non-dominated sorting, crowding, fronts            (pareto.c)
 *   sched    schedulers: fifo, successive halving, ASHA, Hyperband: the
 *            view of recorded trials in, decisions out           (sched.c)
 *   claim    trial claims and leases as a register state machine (claim.c)
 *   report   a trial command's JSON lines; models.json, pareto.json and
 *            the leaderboard                                     (report.c)
 *   plot     SVG training curves and Pareto fronts                (plot.c)
 *
 * None of these touch a socket, a clock or a file: the peer reads the
 * store and the clock, calls them, and writes what they return. The
 * user's reference is docs/studies.md. */
#ifndef STARLING_STUDY_H
#define STARLING_STUDY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"
#include "starling/nn.h"
#include "starling/rng.h"
#include "starling/round.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- limits ---- */

#define SL_STUDY_NAME_MAX 64        /* characters in a study or param name */
#define SL_STUDY_MAX_PARAMS 16      /* parameters in a search space */
#define SL_STUDY_MAX_CHOICES 32     /* values of a categorical / arch dimension */
#define SL_STUDY_CHOICE_MAX 64      /* characters in one categorical value */
#define SL_STUDY_MAX_OBJECTIVES 4   /* objectives of a study */
#define SL_STUDY_MAX_RUNGS 12       /* rungs of a successive-halving ladder */
#define SL_STUDY_MAX_BRACKETS 8     /* Hyperband brackets */
#define SL_STUDY_MAX_EPOCHS 10000   /* epochs of one trial */
#define SL_STUDY_MAX_TRIALS 100000  /* budget.trials */
#define SL_STUDY_TEMPLATE_MAX 1024  /* characters in a command or model template */
#define SL_STUDY_SPEC_MAX_LEN (256 * 1024) /* bytes of a study file */
#define SL_TRIAL_ID_LEN 16          /* hex characters of a trial id */
#define SL_CONFIG_JSON_MAX 2048     /* bytes of a canonical config encoding */

/* ---- the spec ---- */

/* What a search-space parameter is. */
typedef enum {
    SL_PARAM_REAL = 0, /* real in [low, high], optionally log-uniform */
    SL_PARAM_INT = 1,  /* integer in [low, high], optionally log-uniform */
    SL_PARAM_CAT = 2,  /* one of a list of values */
    SL_PARAM_ARCH = 3  /* an architecture: family x layers x units/channels x kernel x fc */
} sl_param_kind;

/* Dimensions of an architecture parameter (Archai's (layers, kernel,
 * channels)), each a list of allowed values. An MLP uses family, layers
 * and units; a CNN family, layers, channels, kernel and fc. */
enum {
    SL_ARCH_FAMILY = 0,   /* index into families: "mlp" or "cnn" */
    SL_ARCH_LAYERS = 1,   /* hidden layers (dense for mlp, conv for cnn) */
    SL_ARCH_UNITS = 2,    /* mlp: units per dense layer */
    SL_ARCH_CHANNELS = 3, /* cnn: channels of the first conv (doubling after) */
    SL_ARCH_KERNEL = 4,   /* cnn: conv kernel size */
    SL_ARCH_FC = 5,       /* cnn: dense units after the convs, 0 = none */
    SL_ARCH_DIMS = 6
};

/* One parameter of the search space. */
typedef struct {
    char name[SL_STUDY_NAME_MAX + 1]; /* key in the config and in templates */
    sl_param_kind kind;               /* real, int, categorical or arch */
    double low;                       /* real/int lower bound (inclusive) */
    double high;                      /* real/int upper bound (inclusive) */
    bool log;                         /* sample uniformly in log space */
    int digits;                       /* reals: significant digits kept (canonical) */
    int grid_points;                  /* real/int: points per dimension in a grid */
    int choice_count;                 /* categorical: number of values */
    char choices[SL_STUDY_MAX_CHOICES][SL_STUDY_CHOICE_MAX + 1]; /* categorical values as text */
    bool choice_is_number[SL_STUDY_MAX_CHOICES]; /* value is a JSON number (not a string) */
    int arch_count[SL_ARCH_DIMS];                          /* arch: values per dimension */
    int arch_values[SL_ARCH_DIMS][SL_STUDY_MAX_CHOICES];   /* arch: values (family: 0 mlp, 1 cnn) */
} sl_param_t;

/* Searchers. */
typedef enum {
    SL_SEARCH_RANDOM = 0,   /* independent samples */
    SL_SEARCH_GRID = 1,     /* every point of the grid, in a fixed order */
    SL_SEARCH_EVOLUTION = 2 /* evolutionary Pareto search (NSGA-II style) */
} sl_search_kind;

/* Schedulers. */
typedef enum {
    SL_SCHED_FIFO = 0,     /* every trial runs max_epochs */
    SL_SCHED_SH = 1,       /* synchronous successive halving */
    SL_SCHED_ASHA = 2,     /* asynchronous successive halving */
    SL_SCHED_HYPERBAND = 3 /* brackets of synchronous successive halving */
} sl_sched_kind;

/* Trainers. */
typedef enum {
    SL_TRAINER_BUILTIN = 0, /* the C/CUDA trainer with a model spec */
    SL_TRAINER_COMMAND = 1  /* a command template, JSON lines on stdout */
} sl_trainer_kind;

/* One objective: a metric and its direction. */
typedef struct {
    char metric[SL_STUDY_NAME_MAX + 1]; /* "val_acc", "params", ... */
    bool maximize;                       /* true: higher is better */
} sl_objective_t;

/* A parsed, validated study. Plain data (no pointers): copy it freely. */
typedef struct {
    char name[SL_STUDY_NAME_MAX + 1];     /* study name (letters, digits, -_.) */
    uint64_t seed;                        /* seeds every searcher choice */
    char dataset[256];                    /* "fashion-mnist", a directory or a CSV */
    uint64_t dataset_limit;               /* training samples used (0 = all) */
    double val_split;                     /* fraction held out for validation */

    sl_trainer_kind trainer;              /* builtin or command */
    char model[SL_STUDY_TEMPLATE_MAX];    /* builtin: model spec template ("{arch}") */
    char optimizer[16];                   /* builtin: default optimizer */
    double lr;                            /* builtin: default learning rate */
    int batch;                            /* builtin: default minibatch */
    int threads;                          /* builtin: BLAS threads per trial */
    char command[SL_STUDY_TEMPLATE_MAX];  /* command: template with {param} */
    uint32_t command_timeout_s;           /* command: killed after this long */

    int param_count;                      /* parameters, sorted by name */
    sl_param_t params[SL_STUDY_MAX_PARAMS]; /* the search space */

    sl_search_kind searcher;              /* random, grid or evolution */
    int population;                       /* evolution: generation size */
    double mutation_rate;                 /* evolution: per-parameter mutation probability */
    double crossover_rate;                /* evolution: probability a child has two parents */
    bool generational;                    /* evolution: wait for a whole generation */

    sl_sched_kind scheduler;              /* fifo, sh, asha or hyperband */
    int min_epochs;                       /* first rung's epochs (sh/asha/hyperband) */
    int max_epochs;                       /* epochs of a fully trained trial */
    int reduction;                        /* eta: keep 1/eta at each rung */
    int brackets;                         /* hyperband: brackets (0 = all) */
    int rung_count;                       /* rungs of the ladder (computed) */
    int rungs[SL_STUDY_MAX_RUNGS];        /* epochs at each rung (computed) */

    int objective_count;                  /* objectives, the first drives the scheduler */
    sl_objective_t objectives[SL_STUDY_MAX_OBJECTIVES]; /* in file order */

    uint32_t budget_trials;               /* trials to propose in total */
    uint64_t budget_time_s;               /* wall time of the study (0 = none) */
    int checkpoint_every;                 /* epochs between checkpoints */
    int concurrency;                      /* trials one peer runs at a time */
    int retries;                          /* reruns of a trial that failed on its own */
    uint32_t lease_ms;                    /* claim lease length */
} sl_study_spec_t;

/* Parses and validates a study file. On error, returns SL_EINVAL (or
 * SL_ETOOBIG) and writes "field.path: problem" into `why`. */
sl_err sl_study_spec_parse(const char *json, size_t len, sl_study_spec_t *out, char *why,
                           size_t why_len);
/* The study's identity: the hash of its canonical spec (hex, 16 chars):
 * the same file submitted twice is the same study. */
void sl_study_spec_id(const sl_study_spec_t *spec, char out[SL_TRIAL_ID_LEN + 1]);
/* Whether `id` (len bytes) is a well-formed study or trial id: exactly
 * SL_TRIAL_ID_LEN lower-case hex digits. Every id read from the store (a
 * key's segment) is checked with it before it names a path or a key: the
 * store is writable by any member, and `study/../../../../x/spec` once
 * made peers run a study outside their data directories. */
bool sl_study_id_valid(const char *id, size_t len);
/* The index of the parameter called `name`, or -1. */
int sl_study_spec_param(const sl_study_spec_t *spec, const char *name);
/* Text names ("random", "asha", "builtin", ...). */
const char *sl_search_name(sl_search_kind kind);
const char *sl_sched_name(sl_sched_kind kind);

/* ---- configurations (space.c) ---- */

/* The value of one parameter. */
typedef struct {
    double real;                 /* SL_PARAM_REAL */
    int64_t integer;             /* SL_PARAM_INT */
    int choice;                  /* SL_PARAM_CAT: index into choices */
    int arch[SL_ARCH_DIMS];      /* SL_PARAM_ARCH: index into each dimension */
} sl_value_t;

/* A point of the search space, values aligned with spec->params. */
typedef struct {
    sl_value_t values[SL_STUDY_MAX_PARAMS]; /* one per parameter */
} sl_config_t;

/* The one text of a number in specs, configs and command templates: a
 * whole number (below 1e15) as an integer (3000, never 3e+03: a
 * command's integer option must read it), else the shortest %g that reads
 * back to it. */
void sl_number_text(double v, char *out, size_t cap);

/* Draws a configuration. */
void sl_space_sample(const sl_study_spec_t *spec, sl_rng_t *rng, sl_config_t *out);
/* Puts a value in canonical form (reals rounded to their digits and
 * clamped; arch dimensions that the family ignores set to 0). Sampling,
 * mutation and decoding all end with this. */
void sl_space_canon(const sl_study_spec_t *spec, sl_config_t *cfg);
/* Two configs are the same point. */
bool sl_space_equal(const sl_study_spec_t *spec, const sl_config_t *a, const sl_config_t *b);
/* Canonical JSON: keys sorted, reals in shortest round-trip form, arch as
 * its model spec text: {"arch":"mlp:256,256","lr":0.001}. Returns the
 * length, or SL_ETOOBIG. */
sl_err sl_space_encode(const sl_study_spec_t *spec, const sl_config_t *cfg, char *out,
                       size_t out_cap, size_t *out_len);
/* Decodes a canonical (or hand-written) config; every parameter must be
 * present and in range. */
sl_err sl_space_decode(const sl_study_spec_t *spec, const char *json, size_t len,
                       sl_config_t *out, char *why, size_t why_len);
/* The text of one value, as substituted into templates. */
sl_err sl_space_value_text(const sl_study_spec_t *spec, int param, const sl_value_t *v,
                           char *out, size_t out_cap);
/* Renders an arch value as a model spec ("cnn:16,32,k=3,pad=same/fc:128"). */
sl_err sl_space_arch_spec(const sl_param_t *p, const int arch[SL_ARCH_DIMS], char *out,
                          size_t out_cap);
/* Substitutes {name} in a template with the config's values ({{ and }}
 * are literal braces; {trial} the trial id when given). SL_EINVAL naming
 * an unknown placeholder. */
sl_err sl_space_render(const sl_study_spec_t *spec, const sl_config_t *cfg, const char *trial_id,
                       const char *tmpl, char *out, size_t out_cap, char *why, size_t why_len);
/* A trial id: hex of hash(study id, bracket, canonical config). Two
 * leaders proposing the same content produce the same id. */
void sl_trial_id(const char *study_id, int bracket, const char *config_json, size_t len,
                 char out[SL_TRIAL_ID_LEN + 1]);
/* Points of a grid over the space (categorical/arch: all values; real/int:
 * grid_points each); 0 when over UINT64_MAX / unbounded. */
uint64_t sl_space_grid_size(const sl_study_spec_t *spec);
/* The n-th grid point (mixed radix, last parameter fastest). */
sl_err sl_space_grid_point(const sl_study_spec_t *spec, uint64_t n, sl_config_t *out);
/* Mutates each parameter with probability `rate` (at least one) to a
 * neighbouring value (reals: Gaussian step in (log) space; arch: one
 * dimension one step). */
void sl_space_mutate(const sl_study_spec_t *spec, sl_rng_t *rng, double rate, sl_config_t *cfg);
/* Uniform crossover of two parents, per parameter. */
void sl_space_crossover(const sl_study_spec_t *spec, sl_rng_t *rng, const sl_config_t *a,
                        const sl_config_t *b, sl_config_t *out);

/* ---- trials, as the cores see them ---- */

/* A trial's state in the store. */
typedef enum {
    SL_TRIAL_PENDING = 0,   /* proposed or promoted, no live claim */
    SL_TRIAL_RUNNING = 1,   /* claimed and training */
    SL_TRIAL_PAUSED = 2,    /* reached its rung's epochs, waiting for a decision */
    SL_TRIAL_DONE = 3,      /* final: trained to the end or stopped early */
    SL_TRIAL_FAILED = 4,    /* final: failed on its own more than `retries` times */
    SL_TRIAL_PREEMPTED = 5  /* its owner died or left; claimable again */
} sl_trial_state;

const char *sl_trial_state_name(sl_trial_state s);

/* One trial as recorded (all borrowed by the cores; the peer builds these
 * from the store). */
typedef struct {
    char id[SL_TRIAL_ID_LEN + 1];  /* hash of content */
    uint64_t ordinal;              /* proposal index: 0, 1, 2, ... */
    int bracket;                   /* hyperband bracket (0 otherwise) */
    int rung;                      /* rung it is promoted to (target) */
    sl_trial_state state;          /* see above */
    sl_config_t config;            /* its point of the space */
    int epochs_done;               /* last epoch reported */
    const double *curve;           /* scheduler metric per epoch: curve[e-1], NaN = missing */
    int curve_len;                 /* entries in curve */
    double objectives[SL_STUDY_MAX_OBJECTIVES]; /* latest value of each objective (NaN = none) */
} sl_trial_t;

/* ---- searchers (search.c) ---- */

/* The configuration of the trial with proposal index `ordinal`, given the
 * trials recorded so far (`seen`, any order). SL_EAGAIN: must wait for
 * results (a generational evolution mid-generation); SL_ENOTFOUND: the
 * searcher is exhausted (a grid ran out). Pure: the same inputs give the
 * same output on every peer. */
sl_err sl_search_next(const sl_study_spec_t *spec, uint64_t ordinal, const sl_trial_t *seen,
                      size_t seen_count, sl_config_t *out);
/* The same with the trials seen in two lists, read as one (`seen`, then
 * `more`): a scheduler passes the view as it is and the trials it has
 * proposed since, instead of copying the view to append them. */
sl_err sl_search_next2(const sl_study_spec_t *spec, uint64_t ordinal, const sl_trial_t *seen,
                       size_t seen_count, const sl_trial_t *more, size_t more_count,
                       sl_config_t *out);

/* ---- Pareto fronts (pareto.c) ---- */

/* Non-dominated ranks (0 = the front) of `count` points of `dims`
 * objectives each (points[i*dims + d]); `maximize[d]` gives each
 * direction. NaN counts as the worst value. */
sl_err sl_pareto_rank(const double *points, size_t count, int dims, const bool *maximize,
                      int *rank_out);
/* Crowding distance within each rank (INFINITY at the ends). */
sl_err sl_pareto_crowding(const double *points, size_t count, int dims, const int *rank,
                          double *crowd_out);
/* a dominates b. */
bool sl_pareto_dominates(const double *a, const double *b, int dims, const bool *maximize);
/* Indexes of the front (rank 0), ascending; returns their count. */
size_t sl_pareto_front(const double *points, size_t count, int dims, const bool *maximize,
                       size_t *out);

/* ---- schedulers (sched.c) ---- */

/* What a scheduler decided. */
typedef enum {
    SL_DECISION_PROPOSE = 0, /* add a new trial (pending, rung 0) */
    SL_DECISION_PROMOTE = 1, /* a paused trial continues to `rung` */
    SL_DECISION_STOP = 2,    /* a paused trial ends (done) at its rung; on cancel or a
                                spent time budget, pending and running ones too (their
                                owners stop at the next epoch and record done) */
    SL_DECISION_FINISH = 3   /* the study is finished */
} sl_decision_kind;

/* One decision. */
typedef struct {
    sl_decision_kind kind;          /* what */
    char trial_id[SL_TRIAL_ID_LEN + 1]; /* the trial (propose: the new id) */
    uint64_t ordinal;               /* propose: proposal index */
    int bracket;                    /* propose: hyperband bracket */
    int rung;                       /* propose/promote: target rung */
    int epochs;                     /* propose/promote: epochs to reach */
    sl_config_t config;             /* propose: the configuration */
    char reason[96];                /* one line for logs and status */
} sl_decision_t;

/* The recorded state a decision is made from. */
typedef struct {
    const char *study_id;      /* sl_study_spec_id() */
    const sl_trial_t *trials;  /* every trial recorded, any order */
    size_t trial_count;        /* entries in trials */
    int capacity;              /* concurrent slots of alive peers (>= 1) */
    uint64_t elapsed_s;        /* time since the study began (budget) */
    bool cancelled;            /* the user cancelled the study */
} sl_sched_view_t;

/* A growable list of decisions. */
typedef struct {
    sl_decision_t *items; /* the decisions, in order */
    size_t count;         /* used */
    size_t cap;           /* allocated */
} sl_decisions_t;

void sl_decisions_fini(sl_decisions_t *d);

/* The next decisions given the view (appended to `out`, which the caller
 * clears). A pure function of (spec, view): two leaders with the same
 * view decide the same; every promotion is justified by the rung results
 * in the view, and a trial already promoted is never promoted again.
 * Proposals keep at most `capacity` rung-0 trials pending. */
sl_err sl_sched_decide(const sl_study_spec_t *spec, const sl_sched_view_t *view,
                       sl_decisions_t *out);
/* The study's round: which generation or rung step it is in (the leader
 * of this round makes the decisions). A function of the view. */
uint64_t sl_sched_round(const sl_study_spec_t *spec, const sl_sched_view_t *view);
/* The epochs a trial at `rung` of `bracket` trains to. */
int sl_sched_rung_epochs(const sl_study_spec_t *spec, int bracket, int rung);
/* Rungs of a bracket (1 for fifo). */
int sl_sched_rung_count(const sl_study_spec_t *spec, int bracket);
/* The scheduler metric of a trial at epoch `epoch` (NaN = not recorded). */
double sl_trial_metric_at(const sl_trial_t *t, int epoch);
/* Whether asynchronous ASHA promotes `trial_id` from rung `rung` now: it
 * has a result there and is among the top floor(n / reduction) of the n
 * results recorded at that rung in the view (the rule sl_sched_decide
 * applies to paused trials), whatever its state. The owner of a trial
 * that just reached its rung asks this of its own view, which holds its
 * result at once, and trains on (docs/studies.md, "Claims"). `reason`
 * (may be NULL) says why, as a promotion's. False for other schedulers. */
bool sl_sched_asha_promotes(const sl_study_spec_t *spec, const sl_sched_view_t *view,
                            const char *trial_id, int rung, char *reason, size_t reason_len);
/* Checks that a promotion of `trial_id` to `rung` is justified by the
 * trials in the view: SL_OK or SL_EINTERNAL with the reason. For tests
 * and the simulator. */
sl_err sl_sched_check_promotion(const sl_study_spec_t *spec, const sl_sched_view_t *view,
                                const char *trial_id, int rung, char *why, size_t why_len);

/* ---- claims and leases (claim.c) ---- */

#define SL_PEER_ID_MAX 64 /* characters in a peer id */

/* A trial's claim register. */
typedef struct {
    char owner[SL_PEER_ID_MAX + 1]; /* peer that holds it ("" = nobody) */
    uint64_t epoch;                 /* claim epoch: only grows */
    uint64_t lease_expiry_ms;       /* owner must renew before this */
    bool released;                  /* the owner gave it up (preempted, paused) */
} sl_claim_t;

/* Why a peer may or may not take a claim. */
typedef enum {
    SL_CLAIM_FREE = 0,       /* nobody holds it */
    SL_CLAIM_RELEASED = 1,   /* the owner released it */
    SL_CLAIM_OWNER_DEAD = 2, /* membership declared the owner dead or left */
    SL_CLAIM_LAPSED = 3,     /* the lease expired */
    SL_CLAIM_HELD = 4,       /* someone else holds a live lease: may not */
    SL_CLAIM_MINE = 5        /* this peer holds it already */
} sl_claim_status;

/* Whether `self` may claim now (FREE, RELEASED, OWNER_DEAD, LAPSED), or
 * not (HELD, MINE). */
sl_claim_status sl_claim_status_of(const sl_claim_t *cur, const char *self, uint64_t now_ms,
                                   bool owner_alive);
bool sl_claim_may_take(sl_claim_status s);
const char *sl_claim_status_name(sl_claim_status s);
/* The register after `self` takes the claim: epoch + 1, a fresh lease.
 * SL_EBUSY when sl_claim_status_of says it may not. */
sl_err sl_claim_take(const sl_claim_t *cur, const char *self, uint64_t now_ms, bool owner_alive,
                     uint32_t lease_ms, sl_claim_t *next);
/* Renews a lease `self` holds at `epoch`; SL_ESTATE when the register has
 * moved on (a higher epoch or another owner): stop working. */
sl_err sl_claim_renew(const sl_claim_t *cur, const char *self, uint64_t epoch, uint64_t now_ms,
                      uint32_t lease_ms, sl_claim_t *next);
/* Releases a claim `self` holds at `epoch` (same epoch, released). */
sl_err sl_claim_release(const sl_claim_t *cur, const char *self, uint64_t epoch,
                        sl_claim_t *next);
/* Whether a worker that took the claim at `epoch` must stop on seeing
 * `seen`: a higher epoch, or the same epoch won by another owner. */
bool sl_claim_must_stop(const sl_claim_t *seen, const char *self, uint64_t epoch);
/* Join of two replicas of the register (commutative, associative,
 * idempotent): higher epoch wins; at equal epochs the smaller owner id
 * wins, then released, then the later expiry. */
void sl_claim_merge(const sl_claim_t *a, const sl_claim_t *b, sl_claim_t *out);

/* A trial a worker might claim, as its replica shows it. */
typedef struct {
    const char *trial_id; /* borrowed */
    uint64_t ordinal;     /* proposal order */
    int rung;             /* target rung: higher rungs are claimed first */
    sl_claim_t claim;     /* its claim register */
    bool owner_alive;     /* the claim's owner is alive in this peer's view */
    bool needs_work;      /* no result, and fewer epochs recorded than its rung's */
    uint64_t waited_ms;   /* claimable this long in this peer's view, unclaimed */
} sl_claim_cand_t;

/* A candidate assigned to another member is handed on when that member
 * lets it wait: to the member ranked r below the top (sl_round_rank) once
 * it has waited (r + 1) x this long. */
#define SL_CLAIM_HANDOFF_MS 100

/* Which trials `self` claims now, and the registers to write. Among the
 * candidates that need work and that `self` may take (sl_claim_status_of),
 * in priority order (higher rung, then ordinal, then id), each goes to the
 * alive member with free slots that weighs highest for it
 * (sl_round_assign; `members` must include `self` with its own free
 * slots); those that land on `self` are picked. With slots left, `self`
 * then also takes, in the same order, a candidate assigned to another that
 * has waited (rank + 1) x SL_CLAIM_HANDOFF_MS: the member the view assigns
 * it to may have died unnoticed, or see the trial later. pick[k] indexes
 * cands, next[k] is the register to write (epoch + 1, a fresh lease).
 * `pick` and `next` hold `count` entries. `handoff_ms` (may be NULL): when
 * self's turn comes for the first candidate it let pass, were its slots
 * still free then (wall ms; UINT64_MAX: none), for the caller to look
 * again. */
sl_err sl_claim_pick(const sl_claim_cand_t *cands, size_t count,
                     const sl_round_member_t *members, size_t member_count, const char *self,
                     uint64_t now_ms, uint32_t lease_ms, size_t *pick, sl_claim_t *next,
                     size_t *pick_count, uint64_t *handoff_ms);

/* What a worker does after training epoch `epoch` of a trial at `rung`. */
typedef enum {
    SL_EPOCH_CONTINUE = 0, /* train the next epoch */
    SL_EPOCH_PAUSE = 1,    /* reached its rung (not the top): checkpoint, release */
    SL_EPOCH_DONE = 2,     /* reached the top rung: checkpoint, write done, release */
    SL_EPOCH_RETRY = 3,    /* failed on its own, retries left: record it, release */
    SL_EPOCH_FAILED = 4    /* failed on its own `retries` + 1 times: write failed */
} sl_epoch_outcome;

/* `failed`: this epoch failed on its own (exit status, divergence,
 * timeout); `failures`: the failures recorded for the trial, this one
 * included. */
sl_epoch_outcome sl_claim_after_epoch(const sl_study_spec_t *spec, int rung, int epoch,
                                      bool failed, int failures);
/* A checkpoint is due after this epoch: every checkpoint_every epochs, and
 * whenever the trial stops training here (pause, done), so a promotion
 * resumes exactly where the rung ended. */
bool sl_claim_checkpoint_due(const sl_study_spec_t *spec, int epoch, sl_epoch_outcome outcome);

/* A trial's final result, idempotent under duplicate writes. */
typedef struct {
    char trial_id[SL_TRIAL_ID_LEN + 1]; /* whose */
    sl_trial_state state;               /* done or failed */
    int epochs;                         /* epochs trained */
    uint64_t claim_epoch;               /* epoch of the claim that wrote it */
    char writer[SL_PEER_ID_MAX + 1];    /* peer that wrote it */
    char reason[96];                    /* failed: why; done: "completed", "stopped at rung 1" */
} sl_result_t;

/* Join of two result records of one trial: one result stays, the same
 * whichever order they arrive in (done beats failed, then more epochs,
 * then the lower claim epoch, then the smaller writer id). */
void sl_result_merge(const sl_result_t *a, const sl_result_t *b, sl_result_t *out);

/* ---- reports (report.c) ---- */

#define SL_REPORT_LINE_MAX 4096  /* bytes in one report line */
#define SL_REPORT_MAX_METRICS 32 /* metrics in one report */

/* One metric of a report. */
typedef struct {
    char name[SL_STUDY_NAME_MAX + 1]; /* "val_acc" */
    double value;                     /* finite */
} sl_metric_t;

/* One parsed report line. */
typedef struct {
    int epoch;                                 /* >= 1 */
    int metric_count;                          /* entries used */
    sl_metric_t metrics[SL_REPORT_MAX_METRICS]; /* in line order, without "epoch" */
} sl_report_t;

/* Parses one line of a trial's stdout. SL_OK: a report. SL_ENOTFOUND: not
 * a report (not a JSON object: plain log output, kept as log). SL_EPROTO /
 * SL_ETOOBIG / SL_ERANGE: a JSON object that breaks the rules (why says
 * which): counted as garbage, never fatal. */
sl_err sl_report_parse(const char *line, size_t len, sl_report_t *out, char *why,
                       size_t why_len);
/* The value of `name` in a report, or NaN. */
double sl_report_get(const sl_report_t *r, const char *name);

/* A growable text buffer for the writers below. */
typedef struct {
    char *data;   /* NUL-terminated text */
    size_t len;   /* bytes used, without the NUL */
    size_t cap;   /* bytes allocated */
    bool failed;  /* an allocation failed: the text is incomplete */
} sl_buf_t;

void sl_buf_fini(sl_buf_t *b);
void sl_buf_printf(sl_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One finished (or partial) trial for the result writers: a trial plus
 * its per-epoch metrics. */
typedef struct {
    const sl_trial_t *trial;      /* id, config, state, objectives */
    const sl_report_t *epochs;    /* reports in epoch order */
    int epoch_count;              /* entries in epochs */
    const char *owner;            /* last owner, or NULL */
} sl_trial_result_t;

/* models.json: the best `top` trials by the first objective, with their
 * configs, arch text and final metrics. */
sl_err sl_report_models_json(const sl_study_spec_t *spec, const char *study_id,
                             const sl_trial_result_t *rs, size_t count, int top, sl_buf_t *out);
/* pareto.json: the trials on the Pareto front of the objectives. */
sl_err sl_report_pareto_json(const sl_study_spec_t *spec, const char *study_id,
                             const sl_trial_result_t *rs, size_t count, sl_buf_t *out);
/* A plain-text leaderboard (rank, trial, objectives, epochs, state, config). */
sl_err sl_report_leaderboard(const sl_study_spec_t *spec, const sl_trial_result_t *rs,
                             size_t count, sl_buf_t *out);

/* ---- plots (plot.c) ---- */

/* SVG of a metric against epochs, one line per trial (best highlighted). */
sl_err sl_plot_curves(const sl_study_spec_t *spec, const sl_trial_result_t *rs, size_t count,
                      const char *metric, sl_buf_t *out);
/* SVG scatter of two objectives with the Pareto front drawn. */
sl_err sl_plot_pareto(const sl_study_spec_t *spec, const sl_trial_result_t *rs, size_t count,
                      int obj_x, int obj_y, sl_buf_t *out);
/* SVG of one series y(x), `n` points in x order: a line, or a step line
 * (`steps`: the value holds until the next point; an elastic job's world
 * size). NaN values are left out. */
sl_err sl_plot_series(const char *title, const char *xlabel, const char *ylabel,
                      const double *x, const double *y, size_t n, bool steps, sl_buf_t *out);

/* ---- integration helpers: store records, the builtin trainer, status ---- */

#define SL_STUDY_RECORD_MAX 4096 /* bytes of one encoded record */

/* A proposal as stored under study/S/trial/T (JSON):
 * {"ordinal":3,"bracket":0,"rung":0,"config":{...}}. (space.c) */
sl_err sl_trial_record_encode(const sl_study_spec_t *spec, const sl_trial_t *t, char *out,
                              size_t out_cap, size_t *out_len);
/* Decodes a proposal into `t` (id, ordinal, bracket, rung, config; state
 * PENDING, no metrics). The id is recomputed from the content; when
 * `want_id` is not NULL it must match (a record under the wrong key is
 * refused). Strict and bounded: SL_EPROTO / SL_ETOOBIG with `why`. */
sl_err sl_trial_record_decode(const sl_study_spec_t *spec, const char *study_id,
                              const char *want_id, const char *json, size_t len, sl_trial_t *t,
                              char *why, size_t why_len);
/* A claim register as JSON: {"owner":"p1","epoch":2,"lease_expiry_ms":..,"released":false}. (claim.c) */
sl_err sl_claim_encode(const sl_claim_t *c, char *out, size_t out_cap, size_t *out_len);
sl_err sl_claim_decode(const char *json, size_t len, sl_claim_t *out);
/* A result as JSON: {"state":"done","epochs":9,"claim_epoch":2,"writer":"p1","reason":".."}. */
sl_err sl_result_encode(const sl_result_t *r, char *out, size_t out_cap, size_t *out_len);
sl_err sl_result_decode(const char *json, size_t len, sl_result_t *out);
/* A report as one JSON line (no newline), parseable by sl_report_parse. (report.c) */
sl_err sl_report_encode(const sl_report_t *r, char *out, size_t out_cap, size_t *out_len);
/* The builtin trainer's epoch as a report: train/val/test loss and
 * accuracy (those present), lr, seconds, params and flops. */
void sl_report_from_epoch(const sl_nn_epoch_t *m, uint64_t params, uint64_t flops,
                          sl_report_t *out);
/* The status table (peerctl status): trial, state, epoch/target, owner,
 * the objectives' latest values, config. */
sl_err sl_report_status(const sl_study_spec_t *spec, const sl_trial_result_t *rs, size_t count,
                        sl_buf_t *out);
/* The builtin trainer's configuration of a trial: the model spec rendered
 * into `model` (cfg->model points at it), the trainer defaults, then the
 * trial's lr / batch / optimizer / momentum / weight_decay, `epochs`, the
 * dataset's val_split and limit, and a seed derived from the study seed
 * and the trial id. (study_spec.c) */
sl_err sl_study_train_cfg(const sl_study_spec_t *spec, const sl_config_t *config,
                          const char *trial_id, int epochs, sl_nn_train_cfg_t *cfg, char *model,
                          size_t model_cap, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
