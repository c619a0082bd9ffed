/* The study turn's core (src/study/turn.c): what one peer decides for one
 * study at one turn, from its view of the study, the members and their
 * free slots, its own running jobs and the time, as a list of actions
 * (store writes, jobs to start, end or renew). No store, node, threads or
 * clock inside: the daemon's loop (src/study/study_node.c) builds the view
 * from its live view and carries the actions out, and the simulator
 * (tests/sim_study_test.c) runs the same functions for every simulated
 * peer on a virtual clock. docs/studies.md, "The runtime".
 *
 * A turn has three phases, each a pure function; the caller carries out
 * a phase's actions and derives its view again before the next, so a
 * decision sees the writes of the phase before it (a slot a job freed is
 * taken again, a proposal is claimed, in the same turn):
 *
 *   sl_turn_jobs    the jobs this peer runs: stop (claim lost, stopped by
 *                   the leader, study ended) or renew their leases;
 *   sl_turn_lead    when this peer leads the study's round: the
 *                   scheduler's decisions as writes;
 *   sl_turn_claims  claims this peer holds with no job released, and the
 *                   trials it claims now, each with a job to start. */
#ifndef STARLING_STUDY_TURN_H
#define STARLING_STUDY_TURN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/msg.h"
#include "starling/round.h"
#include "starling/study.h"

/* Proposals kept waiting, in fleet slots, for searchers that do not learn. */
#define SL_TURN_LOOKAHEAD 3
/* A fresh trial that ranks another member first is left to it this long
 * before a peer with free slots takes it, by a rank of its own
 * (docs/studies.md, "Claims"): as long as a trial claimed before and
 * assigned to another member waits for the next in line (the claim core's
 * hand-off step). */
#define SL_TURN_STEAL_MS SL_CLAIM_HANDOFF_MS
/* A job's lease is renewed every lease_ms / 3; a turn that writes the
 * job's report renews it early once it is within lease_ms / this of due
 * (half the wait), so a job that reports more often than that never
 * renews in a commit of its own: at 32 peers each such commit was a
 * DELTA to 31 others (bench/results/study.md, "Scaling"). */
#define SL_TURN_RENEW_RIDE 6
/* Orphaned claims (held here, no job) released in one turn at most. */
#define SL_TURN_ORPHANS_MAX 16

/* The members a study turn sees: every alive or suspect member, however
 * many (no cap: peers with the same view pick the same leader and rank
 * claims the same at any N). The arrays grow on the heap and are kept
 * from turn to turn; m[k].id points into names[k]. */
typedef struct {
    char (*names)[SL_NAME_MAX + 1]; /* member ids */
    sl_round_member_t *m;           /* the cores' view (free_slots: sl_turn_members_load) */
    int *slots;                     /* each one's slots, loaded or not */
    bool *suspect;                  /* suspect in this peer's view: no trial is assigned
                                       to it (false unless the caller sets it) */
    size_t count;                   /* used */
    size_t cap;                     /* allocated */
} sl_study_members_t;

/* Makes room for `want` members (the room added: not suspect). */
sl_err sl_study_members_reserve(sl_study_members_t *ms, size_t want);
void sl_study_members_fini(sl_study_members_t *ms);
/* The member a fresh trial ranks first (rendezvous weight) among those
 * with slots at all, loaded or not: every peer with the same membership
 * agrees on it whatever it knows of the others' load. -1: none. */
int sl_study_members_top(const sl_study_members_t *ms, const char *trial_id);

/* An open trial (a record and no result) as the view shows it. */
typedef struct {
    const char *id;         /* trial id (borrowed) */
    const sl_trial_t *t;    /* its record, state derived (borrowed from the view's trials) */
    sl_claim_t claim;       /* the join of its claim registers */
    bool has_claim;         /* one was seen */
    bool has_result;        /* a result was seen (then it is no longer open) */
    bool stop;              /* the leader asked it to stop */
    bool owner_alive;       /* the claim's owner is alive in this peer's view (one not
                               heard of yet counts as alive: its lease decides) */
    bool owner_suspect;     /* ... but suspect (a probe went unanswered): its trial is
                               taken over by a slot nothing else would use */
    bool mine;              /* this peer runs a job of it */
    uint64_t *claimable_ms; /* in/out, the caller's, kept across turns: since when this
                               peer has seen it claimable (wall ms; 0: not) */
} sl_turn_open_t;

/* One study as this peer's replica shows it. */
typedef struct {
    const char *study_id;        /* study id */
    const sl_study_spec_t *spec; /* its spec */
    const sl_trial_t *trials;    /* every trial with a record, states derived */
    size_t trial_count;          /* entries */
    sl_turn_open_t *open;        /* the open ones */
    size_t open_count;           /* entries */
    bool cancelled;              /* cancel key present */
    bool finished;               /* finished key present */
    uint64_t start_ms;           /* submit time (0: unknown) */
    uint64_t next_lapse_ms;      /* earliest lease of an open trial still to lapse
                                    (UINT64_MAX: none) */
} sl_turn_view_t;

/* A job this peer runs, with its trial as the view shows it. */
typedef struct {
    const char *trial_id; /* borrowed */
    uint64_t epoch;       /* claim epoch held */
    uint64_t renew_ms;    /* next lease renewal (wall ms) */
    int last_epoch;       /* last epoch reported */
    bool reported;        /* its report was written this turn (a renewal
                             nearly due rides it: SL_TURN_RENEW_RIDE) */
    bool found;           /* the view has its trial */
    sl_claim_t claim;     /* the join of its claim registers */
    bool has_claim;       /* one was seen */
    bool has_result;      /* a result was seen */
    bool stop;            /* the leader asked it to stop */
} sl_turn_job_t;

typedef enum {
    SL_TURN_WRITE_CLAIM = 0, /* this peer's claim register of the trial: `claim` */
    SL_TURN_WRITE_RECORD,    /* a proposal: the trial's record, `trial` */
    SL_TURN_WRITE_RUNG,      /* a promotion to `rung`, `reason` */
    SL_TURN_WRITE_STOP,      /* the trial's stop flag, `reason` (its owner stops) */
    SL_TURN_WRITE_RESULT,    /* a result by this peer: `result` */
    SL_TURN_WRITE_FINISHED,  /* the study's finished flag, `reason` */
    SL_TURN_JOB_START,       /* start a job of `trial` under claim `claim` */
    SL_TURN_JOB_LOST,        /* job `job`: another peer holds its claim (`claim`): end it */
    SL_TURN_JOB_END,         /* job `job` ends (the writes before it said how) */
    SL_TURN_JOB_RENEW_AT     /* job `job`: its next renewal is due at `at_ms` */
} sl_turn_kind;

/* Why a claim is written (for the logs). */
typedef enum {
    SL_TURN_CLAIM_TAKE = 0,  /* taken: a job starts with it */
    SL_TURN_CLAIM_RENEW,     /* a lease renewed */
    SL_TURN_CLAIM_RELEASE,   /* a job's claim given up */
    SL_TURN_CLAIM_ORPHAN     /* held here with no job (from before a restart): released */
} sl_turn_claim_why;

/* One action, to be carried out in order. */
typedef struct {
    sl_turn_kind kind;                  /* what */
    char trial_id[SL_TRIAL_ID_LEN + 1]; /* the trial ("" for FINISHED) */
    int job;                            /* JOB_*: index into the jobs given */
    sl_claim_t claim;                   /* WRITE_CLAIM, JOB_START, JOB_LOST */
    sl_turn_claim_why why;              /* WRITE_CLAIM */
    sl_trial_t trial;                   /* WRITE_RECORD, JOB_START (curve not kept) */
    int rung;                           /* WRITE_RUNG */
    sl_result_t result;                 /* WRITE_RESULT */
    char reason[96];                    /* RUNG, STOP, FINISHED; JOB_START: "fresh, ranked
                                           first", "fresh, overdue", "claimed before" */
    uint64_t at_ms;                     /* JOB_RENEW_AT; JOB_START: claimable since */
} sl_turn_action_t;

/* A turn's actions, and when a wait it saw ends. */
typedef struct {
    sl_turn_action_t *items; /* in order */
    size_t count;            /* used */
    size_t cap;              /* allocated */
    uint64_t due_ms;         /* the earliest end of a wait seen (wall ms; UINT64_MAX:
                                none): turn again then, even with no change */
    bool led;                /* sl_turn_lead: this peer leads the round */
} sl_turn_out_t;

/* An empty list (due_ms UINT64_MAX). Clear empties it, keeping due_ms. */
void sl_turn_out_init(sl_turn_out_t *o);
void sl_turn_out_clear(sl_turn_out_t *o);
void sl_turn_out_fini(sl_turn_out_t *o);

/* A trial's state from its parts, the clock and membership
 * (docs/studies.md: a result -> its state; a live lease held by an alive
 * owner -> running, unless the owner is `self` with no job of it (from
 * before a restart); epochs at its rung's, below the top -> paused;
 * claimed before -> preempted; else pending). */
sl_trial_state sl_turn_trial_state(const sl_study_spec_t *spec, const sl_trial_t *t,
                                   const sl_claim_t *claim, bool has_claim,
                                   const sl_result_t *result, bool owner_alive, bool mine,
                                   const char *self, uint64_t now_ms);

/* Free slots of each member: its slots (ms->slots, set by the caller)
 * less the trials it runs: `self_busy` for `self`, for another the
 * running trials it owns among the open ones; none for a suspect member
 * (a trial assigned to a member that may be gone waits for the hand-off
 * past it). */
void sl_turn_members_load(const sl_turn_view_t *v, const sl_study_members_t *ms,
                          const char *self, int self_busy);

/* The jobs phase: for each job, in order, JOB_LOST when another peer took
 * its claim; when the leader stopped its trial or the study ended, a
 * "stopped by the leader" result (unless one is there), the claim's
 * release and JOB_END; else a renewal when due (a claim write and
 * JOB_RENEW_AT), or early, within lease_ms / SL_TURN_RENEW_RIDE of due,
 * when the job's report is written this turn: the renewal then
 * rides the report's group commit and DELTA instead of costing every
 * member one of its own (never later than due: the lease keeps its
 * margin). SL_ENOMEM: the list is short. */
sl_err sl_turn_jobs(const sl_turn_view_t *v, const sl_turn_job_t *jobs, size_t count,
                    const char *self, uint64_t now_ms, sl_turn_out_t *out);

/* The leader's phase: when `self` leads the study's round among `ms`
 * (free slots loaded), the scheduler's decisions as writes (out->led),
 * and a "completed" result for each trial trained to the study's top
 * rung that has none and no live claim (its owner was killed between its
 * last report and its result). */
sl_err sl_turn_lead(const sl_turn_view_t *v, const sl_study_members_t *ms, const char *self,
                    uint64_t now_ms, sl_turn_out_t *out);

/* The end of an ASHA study decided by a peer that does not lead the
 * round: when every open trial in `v` is paused and the scheduler's rule
 * (sl_sched_decide, on this view) only stops them and finishes, the
 * writes of those decisions, as the leader would make them (the FINISHED
 * write's reason says who made it); else nothing. The daemon asks it on
 * the turn that ended one of its jobs, so the peer whose job ended the
 * study ends it: the leader of the last round may be a peer killed a
 * moment before, and the study waited for its restart and catch-up (in
 * the 32-peer scaling runs the last round's leader is always p29, a
 * churner killed about 6 s in and back 1 s later: 4-1131 ms from the
 * last result to the end, 360 ms at the median of nine runs; 1-12 ms in
 * twelve runs with this).
 * Asynchronous ASHA only: its end is a function of the results, which
 * the leader's decision repeats when it comes (results merge:
 * sl_result_merge); a synchronous scheduler's decisions stay its
 * leader's. SL_ENOMEM: the list is short. */
sl_err sl_turn_finish(const sl_turn_view_t *v, const char *self, sl_turn_out_t *out);

/* The claims phase: the waits that end later (lapses, the time budget),
 * the release of claims held here with no job, then, when `may_claim`,
 * the trials `self` claims (a claim write and JOB_START each), as
 * docs/studies.md's "Claims" says: with the slots left after every
 * other claimable trial, the trials of suspect owners too (taken over as
 * from a dead owner). Updates the open trials' claimable_ms. Nothing
 * when the study finished or was cancelled. */
sl_err sl_turn_claims(const sl_turn_view_t *v, const sl_study_members_t *ms, const char *self,
                      uint64_t now_ms, bool may_claim, sl_turn_out_t *out);

#endif
