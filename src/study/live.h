/* A study's live view, the pure core (src/study/live.c): what a replica
 * holds of each trial, kept up to date key by key, and the trials' states
 * derived from it (docs/studies.md, "The live view").
 *
 * Its inputs are the study's keys that changed (sl_study_live_set; after
 * sl_study_live_reset, every key of the study: a full read), this peer's
 * name, a members lookup and its running jobs (sl_live_env_t, asked only
 * where the answer counts) and the time. No store, node or membership
 * handle inside: the daemon (src/study/study_view.c) feeds it from the
 * store node's listener and asks swim for the members; the simulator
 * (tests/sim_study_test.c) feeds it each simulated peer's replica. The
 * turn core (study/turn.h) reads its view from it
 * (sl_study_live_turn_view, sl_study_live_turn_job). */
#ifndef STARLING_STUDY_LIVE_H
#define STARLING_STUDY_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "starling/study.h"
#include "study/turn.h"

/* How this peer's membership holds a member. */
typedef enum {
    SL_LIVE_UNKNOWN = 0, /* not heard of yet (this peer just started): its lease decides */
    SL_LIVE_ALIVE,       /* alive */
    SL_LIVE_SUSPECT,     /* alive, but a probe of it went unanswered */
    SL_LIVE_GONE         /* dead or left */
} sl_live_member;

/* What the live view asks of its caller besides the keys. */
typedef struct {
    const char *self; /* this peer's name */
    /* membership's state of member `name` (never this peer's own name) */
    sl_live_member (*member)(void *ctx, const char *name);
    /* whether this peer runs a job of trial `trial` of study `study` */
    bool (*runs)(void *ctx, const char *study, const char *trial);
    void *ctx;        /* given to both */
} sl_live_env_t;

/* A part of a trial kept by the key it came from: a key rewritten
 * replaces its part, a key deleted removes it. key_hash is the hash of
 * the key's text after the trial id. */
typedef struct {
    uint64_t key_hash;            /* which claim/P key */
    sl_claim_t claim;             /* peer P's register */
} claim_part_t;

typedef struct {
    uint64_t key_hash;            /* which res/W@E key */
    sl_result_t result;           /* the result it holds */
} result_part_t;

/* What the replica holds of one trial, kept across turns: each key of
 * the trial updates it when it changes, so a turn never reads the whole
 * study. */
typedef struct {
    char id[SL_TRIAL_ID_LEN + 1]; /* trial id */
    uint32_t tix;                 /* its sl_trial_t in live->trials, + 1; 0: no record yet */
    int rec_rung;                 /* the rung its record names */
    uint64_t rec_hash;            /* hash of the record's bytes (0: none) */
    uint32_t rung_keys;           /* bit R: a rung/R key (a promotion) */
    double *curve;                /* scheduler metric per epoch (max_epochs), NaN = none */
    sl_report_t *reports;         /* report per epoch (max_epochs); NULL until the first */
    bool *has_report;             /* which epochs have one */
    claim_part_t *claims;         /* every peer's claim register */
    uint32_t claim_count;         /* entries */
    result_part_t *results;       /* every result written */
    uint32_t result_count;        /* entries */
    uint64_t *fails;              /* key hashes of its fail/E keys */
    uint32_t fail_count;          /* entries: the failures recorded */
    bool stop;                    /* the leader asked it to stop */
    int ck_epoch;                 /* epoch of the replicated checkpoint (0 = none) */
    sl_claim_t claim;             /* derived: the join of the claim registers */
    bool has_claim;               /* derived: one was seen */
    sl_result_t result;           /* derived: the results merged */
    bool has_result;              /* derived: one was seen */
    bool dirty;                   /* a key changed since it was derived (in live->dirty) */
    uint32_t open_at;             /* its place in live->open, + 1; 0: not open */
    uint64_t claimable_ms;        /* wall ms since when this peer has seen it claimable (0: not) */
} trial_row_t;

/* A study as this replica shows it, kept up to date key by key. Rows
 * never move (their index is stable); the trials with a record are also
 * in `trials`, contiguous, which the cores read as they are. All zero is
 * an empty view. */
typedef struct {
    trial_row_t *rows;            /* every trial with a key under study/S/t/ */
    size_t count;                 /* used */
    size_t cap;                   /* allocated */
    uint32_t *index;              /* open addressing by trial id: row + 1, 0 = empty */
    size_t index_cap;             /* slots (a power of two, > 2 * count) */
    sl_trial_t *trials;           /* trials with a record, states derived */
    uint32_t *trial_row;          /* the row of each */
    size_t trial_count;           /* used */
    size_t trial_cap;             /* allocated */
    uint32_t *dirty;              /* rows whose keys changed since the last derive */
    size_t dirty_count;           /* used */
    size_t dirty_cap;             /* allocated */
    uint32_t *open;               /* rows with a record and no result: their state moves
                                     with time and membership, not only with their keys */
    size_t open_count;            /* used */
    size_t open_cap;              /* allocated */
    sl_turn_open_t *turn_open;    /* the turn view's open trials (sl_study_live_turn_view) */
    size_t turn_open_cap;         /* allocated */
    bool cancelled;               /* cancel key present */
    bool finished;                /* finished key present */
    uint64_t start_ms;            /* submit time */
    uint64_t next_lapse_ms;       /* the earliest lease of an open trial still to lapse
                                     (wall ms; UINT64_MAX: none), from the last derive */
    bool stale;                   /* the caller is to read the whole study again
                                     (sl_study_live_reset, then every key) */
    uint64_t applied;             /* keys applied (stats) */
    uint64_t rescans;             /* whole reads (stats) */
} live_t;

/* Key `key` of the study whose spec is `spec` now holds `val` (present)
 * or is gone. A key that is not one of a trial's parts or the study's
 * flags is ignored; out of memory marks the view stale. */
void sl_study_live_set(live_t *lv, const sl_study_spec_t *spec, const uint8_t *key,
                       size_t key_len, const uint8_t *val, size_t val_len, bool present);
/* Empties the view for a full read (its stats kept, the read counted):
 * the caller then sets every key of the study. */
void sl_study_live_reset(live_t *lv);
/* Derives the rows whose keys changed and the state of every open one
 * (docs/studies.md's rule, sl_turn_trial_state) at `now_ms`. The caller
 * reads the whole study first when the view is stale. */
void sl_study_live_derive(live_t *lv, const char *study, const sl_study_spec_t *spec,
                          const sl_live_env_t *env, uint64_t now_ms);
/* Whether view `a` (kept key by key) shows what `b` (a full read of the
 * same replica) does, both derived at the same time; false with `why`. */
bool sl_study_live_same(const live_t *a, const live_t *b, const char *study, char *why,
                        size_t why_len);
void sl_study_live_fini(live_t *lv);

/* The row of a trial, or NULL. */
trial_row_t *sl_study_live_find(const live_t *lv, const char *trial_id);
/* The trial's sl_trial_t, or NULL before its record. */
static inline sl_trial_t *sl_study_live_trial(const live_t *lv, const trial_row_t *r) {
    return r->tix ? &lv->trials[r->tix - 1] : NULL;
}
/* The join of the trial's claim registers as they are now (before a
 * derive); false when it has none. */
bool sl_study_live_claim(const trial_row_t *r, sl_claim_t *out);
/* The trial's rung as its keys say now (before a derive): its record's,
 * or the highest promotion. */
int sl_study_live_rung(const trial_row_t *r);

/* Membership's answer for the owner of a claim: this peer itself is
 * alive, no owner is gone, any other is `env`'s member(). Alive in this
 * peer's view: anything but SL_LIVE_GONE (one not heard of yet counts as
 * alive: its lease decides); SUSPECT: alive, but a probe of it went
 * unanswered (the turn may take its trials over). */
sl_live_member sl_study_live_owner(const sl_live_env_t *env, const char *owner);

/* The turn core's view of the study (study/turn.h) as last derived: the
 * open trials with what the turn reads of them. Borrowed from the live
 * view until its next derive or set. SL_ENOMEM: no view. */
sl_err sl_study_live_turn_view(live_t *lv, const char *study, const sl_study_spec_t *spec,
                               const sl_live_env_t *env, sl_turn_view_t *v);
/* What the jobs phase reads of the trial of a job this peer runs (x's
 * found, claim, has_claim, has_result and stop; the rest is the
 * caller's). */
void sl_study_live_turn_job(live_t *lv, const char *trial_id, sl_turn_job_t *x);

/* A checkpoint manifest's epoch: a whole number in 1..SL_STUDY_MAX_EPOCHS,
 * or 0 when the manifest (another peer's write) has none such (the
 * manifests are src/study/study_ckpt.c's). */
int sl_study_manifest_epoch(const cJSON *manifest);

#endif
