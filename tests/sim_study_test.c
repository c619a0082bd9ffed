/* A study on a simulated fleet: N peers run the real study turn
 * (src/study/turn.c: the daemon's decisions, leadership, the scheduler's
 * writes, claims, renewals, releases, a trial's state) and the cores it
 * calls (spec, searcher, scheduler, rounds, claims) on a virtual clock,
 * with simulated training time, under random kills (the round leader
 * among them, and a peer killed between its trial's last report and its
 * result), pauses (SIGSTOP: a peer neither trains nor talks, then
 * carries on), restarts and partitions, over many seeds. Each peer takes
 * a turn every step as the daemon does (study_node.c's study_turn): its
 * workers' reports, then sl_turn_jobs, sl_turn_lead and sl_turn_claims,
 * the actions of each carried out on its replica before the next. The
 * workers (training, a report per epoch, the result, the release at a
 * rung) are simulated here, as study_node.c's drain_job would write them.
 *
 * The replicated store is still modelled in the test: every peer holds a
 * replica whose fields are joins (proposals: a set; target rung: max;
 * claim: sl_claim_merge, the join the live view makes of the peers'
 * registers; metrics: a grow-only map; checkpoint: max; failures: a set
 * of claim epochs; result: sl_result_merge; stop, finished: or), persisted
 * across crashes, and anti-entropy merges one peer's replica into another
 * at random while they can reach each other. Membership: a peer deems
 * another alive while it has heard from it in the last 1.5 s.
 *
 * Checked (INVARIANTS.md): T1 every trial ends done or failed, none left
 * running; T2 every metric reported is in the final store; T3 claim
 * epochs only grow in every replica, a worker never keeps working once its
 * replica shows a higher epoch, and when quiet at most one peer works on a
 * trial; T4 every promotion is justified by the leader's view when made,
 * and a synchronous scheduler (sh) ends exactly as its fault-free run;
 * T5 the study finishes once quiet; R1 two peers with the same view never
 * both lead a round (who leads is the turn's answer); R2 every proposal
 * slot holds exactly one trial and the budget is met, across leader
 * changes. Each checker has a planted bug (a test-only switch, planted in
 * what the test gives the turn or in how it carries out the turn's
 * actions) and a test that shows it firing. The test used to run a model
 * of the turn (its own lead, take_claims and derive_state); the model
 * paused a Hyperband trial of bracket 1 or above at its rung where the
 * real rule left it pending for ever, a bug this test found once it ran
 * the real turn; and once its peers could be killed between a trial's
 * last report and its result, it found such a trial left for ever
 * (neither claimable nor paused), which the leader now closes.
 *
 * A failing seed is printed (SL_VERBOSE=1: the trials as peer 0 sees them
 * when a study does not finish); SL_SEEDS=N runs N seeds; SL_SEED=S one. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

#include "starling/hash.h"
#include "starling/round.h"
#include "starling/study.h"
#include "study/turn.h"
#include "testlib.h"

#define PEERS 4
#define MAX_T 64
#define MAX_E 16
#define STEP_MS 50
#define LEASE_MS 3000
#define DEAD_AFTER_MS 1500
#define SUSPECT_AFTER_MS 400 /* not heard from this long: suspect (its trials may be taken over) */
#define FAULTS_UNTIL_MS 15000
#define DOUBLE_WORK_MS 1000 /* quiet: two workers on a trial resolve within this */
#define DEADLINE_MS 240000

/* Planted bugs, one per checker. */
typedef enum {
    BUG_NONE = 0,
    BUG_T1_SKIP_STOPS,     /* leader drops STOP decisions but still finishes */
    BUG_T2_METRICS_BY_CLAIM, /* metrics kept per claim epoch; a new claim starts empty */
    BUG_T3_IGNORE_EPOCH,   /* workers ignore a higher claim epoch */
    BUG_T3_SAME_EPOCH,     /* workers ignore losing their epoch to another owner */
    BUG_T4_EXTRA_PROMOTION, /* leader promotes one extra paused trial */
    BUG_T5_NO_TAKEOVER,    /* a dead owner's or lapsed claim is never taken, nor released
                              by its owner restarted */
    BUG_R1_MEMBER_CAP,     /* a peer gives the turn its first PEERS-1 members in its own
                              order (the 64-member cap that was): leaders differ */
    BUG_R2_ORDINAL_SKEW    /* proposal ordinals depend on the leader */
} bug_t;

/* The content of a proposal (immutable, content-addressed). */
typedef struct {
    char id[SL_TRIAL_ID_LEN + 1]; /* trial id */
    uint64_t ordinal;             /* proposal slot */
    int bracket;                  /* bracket */
    int rung0;                    /* first rung */
    sl_config_t config;           /* configuration */
} prop_t;

/* One trial in one replica. */
typedef struct {
    bool known;             /* the proposal is in this replica */
    int rung;               /* target rung (max register) */
    sl_claim_t claim;       /* claim register */
    uint32_t metrics;       /* bit e-1: metric of epoch e recorded (grow-only) */
    uint64_t metrics_claim; /* BUG_T2 only: claim epoch the metric map belongs to */
    int ckpt;               /* epochs in the latest checkpoint (max) */
    uint64_t fails;         /* set of claim epochs (bit min(e,63)) that failed on their own */
    bool has_result;        /* result present */
    sl_result_t result;     /* result register */
    bool stop;              /* the leader asked it to stop (or) */
} rtrial_t;

/* A peer's replica of the study. */
typedef struct {
    rtrial_t t[MAX_T]; /* by registry index */
    bool finished;     /* study finished (or) */
} replica_t;

/* A trial a peer is training. */
typedef struct {
    int t;             /* registry index */
    uint64_t epoch;    /* claim epoch held */
    int next_epoch;    /* epoch being trained */
    int64_t epoch_end; /* when it finishes */
    uint64_t renew_ms; /* next lease renewal (the turn's) */
} job_t;

typedef struct {
    char id[16];                 /* "peer-N" */
    bool up;                     /* running */
    int64_t paused_until;        /* SIGSTOPped until then: no steps, no messages */
    int64_t down_until;          /* restart time when down */
    replica_t rep;               /* persisted replica */
    job_t jobs[2];               /* running trials (volatile) */
    int job_count;               /* used */
    int64_t heard[PEERS];        /* last time it heard from each peer */
    uint64_t last_epoch[MAX_T];  /* T3: claim epochs only grow in this replica */
    uint64_t claimable_since[MAX_T]; /* when it saw each trial claimable (0: not; volatile;
                                        the turn keeps it) */
} peer_t;

typedef struct {
    uint64_t seed;
    bug_t bug;
    bool faults;
    sl_study_spec_t spec;
    char study_id[SL_TRIAL_ID_LEN + 1];
    int concurrency;
    prop_t props[MAX_T];  /* registry of proposals */
    int prop_count;
    peer_t peers[PEERS];
    int group[PEERS];     /* partition side */
    int64_t heal_at;      /* partition ends */
    int64_t now;
    sl_rng_t rng;
    /* checks */
    char violation[256];  /* the first violation, "T3: ..." */
    int leader_kills;     /* kills of a peer that was leading */
    int takeovers;        /* claims taken from a dead or lapsed owner */
    int promotions;       /* promotions applied */
    bool reported[MAX_T][MAX_E]; /* T2: metrics reported by some worker */
    bool finished_all;
    int64_t last_fault;   /* last crash, restart, partition or heal */
    int64_t double_since[MAX_T]; /* T3: two workers on the trial since (0: not) */
    int quiet_steps;      /* steps checked as quiet */
    int pauses;           /* SIGSTOPs */
    int torn;             /* kills between a trial's last report and its result */
    int64_t faults_until; /* faults stop then: 5, 10 or 15 s by seed */
    bool led[PEERS];      /* R1: the peer led at this step (sl_turn_lead) */
    uint64_t led_round[PEERS]; /* the round it led */
    sl_study_members_t members; /* a peer's members for its turn */
    sl_turn_out_t out;    /* a turn phase's actions */
} world_t;

static void violate(world_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violate(world_t *w, const char *fmt, ...) {
    if (w->violation[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->violation, sizeof w->violation, fmt, ap);
    va_end(ap);
}

static int find_prop(const world_t *w, const char *id) {
    for (int i = 0; i < w->prop_count; i++)
        if (strcmp(w->props[i].id, id) == 0)
            return i;
    return -1;
}

static bool running(const world_t *w, int p) {
    return w->peers[p].up && w->now >= w->peers[p].paused_until;
}

static bool connected(const world_t *w, int a, int b) {
    return running(w, a) && running(w, b) && w->group[a] == w->group[b];
}

static bool alive_in_view(const world_t *w, int p, int q) {
    return p == q || w->now - w->peers[p].heard[q] <= DEAD_AFTER_MS;
}

/* Alive, but not heard from for a while: membership's SUSPECT. A paused
 * or partitioned peer is suspect while it still works, so its trials are
 * taken over from it (sl_turn_claims) and T3 checks it stops. */
static bool suspect_in_view(const world_t *w, int p, int q) {
    return alive_in_view(w, p, q) && w->now - w->peers[p].heard[q] > SUSPECT_AFTER_MS;
}

static int peer_index(const world_t *w, const char *id) {
    for (int i = 0; i < PEERS; i++)
        if (strcmp(w->peers[i].id, id) == 0)
            return i;
    return -1;
}

/* Deterministic "training": the metric of trial t at epoch e. */
static double train_metric(const world_t *w, int t, int e) {
    const sl_study_spec_t *s = &w->spec;
    double lr = log10(w->props[t].config.values[sl_study_spec_param(s, "lr")].real) + 2.5;
    double q = 0.92 - 0.05 * lr * lr;
    uint64_t h = sl_hash64(w->props[t].id, SL_TRIAL_ID_LEN, (uint64_t)e);
    return q * (1 - pow(0.6, e)) + ((double)(h % 1000) / 1000.0 - 0.5) * 0.01;
}

static int epoch_ms(const world_t *w, int t) {
    return 300 + (int)(sl_hash64(w->props[t].id, SL_TRIAL_ID_LEN, 99) % 400);
}

/* Trials that fail on their own at epoch 1, every time. */
static bool bad_trial(const world_t *w, int t) { return w->props[t].ordinal % 9 == 4; }

/* The last epoch with a recorded metric. */
static int recorded(const rtrial_t *r) {
    int e = 0;
    for (int i = 0; i < MAX_E; i++)
        if (r->metrics >> i & 1)
            e = i + 1;
    return e;
}

/* ---- the store model: joins ---- */

static void merge_trial(const world_t *w, rtrial_t *a, const rtrial_t *b) {
    if (!b->known)
        return;
    a->known = true;
    if (b->rung > a->rung)
        a->rung = b->rung;
    sl_claim_t c;
    sl_claim_merge(&a->claim, &b->claim, &c);
    a->claim = c;
    if (w->bug == BUG_T2_METRICS_BY_CLAIM) {
        if (b->metrics_claim > a->metrics_claim) {
            a->metrics = b->metrics;
            a->metrics_claim = b->metrics_claim;
        } else if (b->metrics_claim == a->metrics_claim) {
            a->metrics |= b->metrics;
        }
    } else {
        a->metrics |= b->metrics;
    }
    if (b->ckpt > a->ckpt)
        a->ckpt = b->ckpt;
    a->fails |= b->fails;
    a->stop = a->stop || b->stop;
    if (b->has_result) {
        if (a->has_result) {
            sl_result_t r;
            sl_result_merge(&a->result, &b->result, &r);
            a->result = r;
        } else {
            a->result = b->result;
            a->has_result = true;
        }
    }
}

static void merge_replica(const world_t *w, replica_t *a, const replica_t *b) {
    for (int i = 0; i < w->prop_count; i++)
        merge_trial(w, &a->t[i], &b->t[i]);
    a->finished = a->finished || b->finished;
}

/* ---- a peer's view ---- */

typedef struct {
    sl_trial_t trials[MAX_T];
    double curves[MAX_T][MAX_E];
    int map[MAX_T]; /* view index -> registry index */
    size_t count;
    int capacity;
    sl_turn_open_t open[MAX_T]; /* the open trials, for the turn */
    sl_turn_view_t tv;          /* the turn's view of them */
} view_t;

static bool has_job(const peer_t *me, int t) {
    for (int k = 0; k < me->job_count; k++)
        if (me->jobs[k].t == t)
            return true;
    return false;
}

/* Peer p's view of the study, as the daemon's live view derives it from
 * its replica: each trial's state by the turn core's rule. */
static void build_view(world_t *w, int p, view_t *v) {
    peer_t *me = &w->peers[p];
    v->count = 0;
    v->capacity = 0;
    size_t nopen = 0;
    for (int q = 0; q < PEERS; q++)
        if (alive_in_view(w, p, q))
            v->capacity += w->concurrency;
    for (int i = 0; i < w->prop_count; i++) {
        const rtrial_t *r = &me->rep.t[i];
        if (!r->known)
            continue;
        sl_trial_t *t = &v->trials[v->count];
        memset(t, 0, sizeof *t);
        memcpy(t->id, w->props[i].id, sizeof t->id);
        t->ordinal = w->props[i].ordinal;
        t->bracket = w->props[i].bracket;
        t->rung = r->rung;
        t->config = w->props[i].config;
        t->epochs_done = recorded(r);
        for (int e = 0; e < MAX_E; e++)
            v->curves[v->count][e] = (r->metrics >> e & 1) ? train_metric(w, i, e + 1) : NAN;
        t->curve = v->curves[v->count];
        t->curve_len = MAX_E;
        for (int o = 0; o < SL_STUDY_MAX_OBJECTIVES; o++)
            t->objectives[o] = NAN;
        if (t->epochs_done > 0)
            t->objectives[0] = train_metric(w, i, t->epochs_done);
        bool has_claim = r->claim.epoch > 0;
        int owner = has_claim ? peer_index(w, r->claim.owner) : -1;
        bool owner_alive = has_claim && (owner < 0 || alive_in_view(w, p, owner));
        bool owner_suspect = owner_alive && owner >= 0 && suspect_in_view(w, p, owner);
        bool mine = has_job(me, i);
        t->state = sl_turn_trial_state(&w->spec, t, &r->claim, has_claim,
                                       r->has_result ? &r->result : NULL, owner_alive, mine,
                                       me->id, (uint64_t)w->now);
        if (!r->has_result)
            v->open[nopen++] = (sl_turn_open_t){.id = w->props[i].id, .t = t,
                                                .claim = r->claim, .has_claim = has_claim,
                                                .stop = r->stop, .owner_alive = owner_alive,
                                                .owner_suspect = owner_suspect, .mine = mine,
                                                .claimable_ms = &me->claimable_since[i]};
        v->map[v->count] = i;
        v->count++;
    }
    uint64_t lapse = UINT64_MAX;
    for (size_t o = 0; o < nopen; o++) {
        const sl_claim_t *c = &v->open[o].claim;
        if (v->open[o].has_claim && !c->released && c->lease_expiry_ms > (uint64_t)w->now &&
            c->lease_expiry_ms < lapse)
            lapse = c->lease_expiry_ms;
    }
    v->tv = (sl_turn_view_t){.study_id = w->study_id, .spec = &w->spec, .trials = v->trials,
                             .trial_count = v->count, .open = v->open, .open_count = nopen,
                             .finished = me->rep.finished, .next_lapse_ms = lapse};
}

/* The members peer p's turn sees: those alive in its view, each with the
 * study's slots (the turn takes off the trials each runs). */
static void build_members(world_t *w, int p) {
    sl_study_members_t *ms = &w->members;
    ms->count = 0;
    if (sl_study_members_reserve(ms, PEERS) != SL_OK)
        return;
    for (int i = 0; i < PEERS; i++) {
        int q = w->bug == BUG_R1_MEMBER_CAP ? (p + i) % PEERS : i;
        if (!alive_in_view(w, p, q))
            continue;
        if (w->bug == BUG_R1_MEMBER_CAP && ms->count == PEERS - 1)
            break; /* the bug: a cap over its own order of the table */
        size_t k = ms->count++;
        snprintf(ms->names[k], sizeof ms->names[k], "%s", w->peers[q].id);
        ms->slots[k] = w->concurrency;
        ms->suspect[k] = suspect_in_view(w, p, q);
        ms->m[k] = (sl_round_member_t){ms->names[k], true, w->concurrency};
    }
}

/* The leader of the round as peer p's membership makes it (to choose a
 * victim for the faults: the turn decides who leads). */
static int leader_of(const world_t *w, int p, uint64_t round) {
    sl_round_member_t m[PEERS];
    for (int q = 0; q < PEERS; q++) {
        m[q].id = w->peers[q].id;
        m[q].alive = alive_in_view(w, p, q);
        m[q].free_slots = 0;
    }
    return sl_round_leader(m, PEERS, sl_round_key(w->study_id, round));
}

/* A peer's id into a record of the same world (snprintf's restrict rules
 * cannot tell that the two are different parts of it). */
static void copy_id(char *dst, size_t cap, const char *id) {
    size_t n = strnlen(id, cap - 1);
    memcpy(dst, id, n);
    dst[n] = 0;
}

/* ---- the workers (simulated training; study_node.c's drain_job) ---- */

static void crash(world_t *w, int p, int64_t down_ms);

static void drop_job(peer_t *me, int k) {
    me->jobs[k] = me->jobs[--me->job_count];
}

/* Each job whose epoch ended: its report, checkpoint and outcome, as the
 * daemon writes a worker's events (a result when done or failed, the
 * claim released unless done). */
static void work(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    for (int k = 0; k < me->job_count; k++) {
        job_t *j = &me->jobs[k];
        rtrial_t *r = &me->rep.t[j->t];
        if (w->now < j->epoch_end)
            continue;
        int e = j->next_epoch;
        if (e > MAX_E) {
            violate(w, "test: epoch %d over %d", e, MAX_E);
            return;
        }
        bool failed = bad_trial(w, j->t) && e == 1;
        if (failed) /* counted once per claim epoch */
            r->fails |= 1ull << (j->epoch < 63 ? j->epoch : 63);
        sl_epoch_outcome out = sl_claim_after_epoch(&w->spec, r->rung, e, failed,
                                                    __builtin_popcountll(r->fails));
        if (!failed) {
            r->metrics |= 1u << (e - 1);
            w->reported[j->t][e - 1] = true;
        }
        if (sl_claim_checkpoint_due(&w->spec, e, out) && e > r->ckpt)
            r->ckpt = e;
        if (out == SL_EPOCH_DONE && w->faults && w->now < w->faults_until &&
            sl_rng_below(&w->rng, 8) == 0) {
            /* killed between its last report and its result (a worker's
               END comes after its last epoch's line) */
            crash(w, p, 300 + (int64_t)sl_rng_below(&w->rng, 3000));
            w->torn++;
            return;
        }
        if (out == SL_EPOCH_DONE || out == SL_EPOCH_FAILED) {
            sl_result_t res;
            memset(&res, 0, sizeof res);
            memcpy(res.trial_id, w->props[j->t].id, sizeof res.trial_id);
            res.state = out == SL_EPOCH_DONE ? SL_TRIAL_DONE : SL_TRIAL_FAILED;
            res.epochs = out == SL_EPOCH_DONE ? e : e - 1;
            res.claim_epoch = j->epoch;
            copy_id(res.writer, sizeof res.writer, me->id);
            snprintf(res.reason, sizeof res.reason, "%s",
                     out == SL_EPOCH_DONE ? "completed" : "diverged at epoch 1");
            if (r->has_result)
                sl_result_merge(&r->result, &res, &r->result);
            else
                r->result = res;
            r->has_result = true;
        }
        if (out != SL_EPOCH_CONTINUE) {
            sl_claim_t rel;
            if (out != SL_EPOCH_DONE &&
                sl_claim_release(&r->claim, me->id, j->epoch, &rel) == SL_OK)
                r->claim = rel;
            drop_job(me, k--);
            continue;
        }
        j->next_epoch = e + 1;
        j->epoch_end = w->now + epoch_ms(w, j->t);
    }
}

/* ---- the turn (study_node.c's study_turn, on the replica) ---- */

/* Carries out a turn phase's actions on peer p's replica and jobs, as
 * study_node.c's turn_do does on the store and the workers. `drop`
 * gathers the jobs a phase ended (indexes into the jobs it was given). */
static void apply(world_t *w, int p, const sl_turn_out_t *out, bool *drop) {
    peer_t *me = &w->peers[p];
    replica_t *rep = &me->rep;
    for (size_t i = 0; i < out->count; i++) {
        const sl_turn_action_t *a = &out->items[i];
        int t = a->trial_id[0] ? find_prop(w, a->trial_id) : -1;
        switch (a->kind) {
        case SL_TURN_WRITE_CLAIM:
            if (t >= 0) /* (this peer's register, joined with the others') */
                sl_claim_merge(&rep->t[t].claim, &a->claim, &rep->t[t].claim);
            break;
        case SL_TURN_WRITE_RECORD: {
            uint64_t ordinal = a->trial.ordinal;
            char id[SL_TRIAL_ID_LEN + 1];
            memcpy(id, a->trial_id, sizeof id);
            if (w->bug == BUG_R2_ORDINAL_SKEW && p % 2 == 1) {
                ordinal += 1; /* the bug: slots depend on the leader */
                snprintf(id, sizeof id, "%016llx",
                         (unsigned long long)sl_mix64(strtoull(a->trial_id, NULL, 16) + 1));
            }
            t = find_prop(w, id);
            if (t < 0) {
                if (w->prop_count == MAX_T) {
                    violate(w, "test: over %d trials", MAX_T);
                    break;
                }
                t = w->prop_count++;
                prop_t *pr = &w->props[t];
                memcpy(pr->id, id, sizeof pr->id);
                pr->ordinal = ordinal;
                pr->bracket = a->trial.bracket;
                pr->rung0 = a->trial.rung;
                pr->config = a->trial.config;
            }
            rep->t[t].known = true;
            if (a->trial.rung > rep->t[t].rung)
                rep->t[t].rung = a->trial.rung;
            break;
        }
        case SL_TURN_WRITE_RUNG:
            if (t >= 0 && a->rung > rep->t[t].rung) {
                rep->t[t].rung = a->rung;
                w->promotions++;
            }
            break;
        case SL_TURN_WRITE_STOP:
            if (t >= 0)
                rep->t[t].stop = true;
            break;
        case SL_TURN_WRITE_RESULT:
            if (t < 0)
                break;
            if (rep->t[t].has_result)
                sl_result_merge(&rep->t[t].result, &a->result, &rep->t[t].result);
            else
                rep->t[t].result = a->result;
            rep->t[t].has_result = true;
            break;
        case SL_TURN_WRITE_FINISHED: rep->finished = true; break;
        case SL_TURN_JOB_START: {
            if (t < 0 || me->job_count == (int)(sizeof me->jobs / sizeof me->jobs[0])) {
                violate(w, "test: %s starts a job it has no room for", me->id);
                break;
            }
            rtrial_t *r = &rep->t[t];
            if (w->bug == BUG_T2_METRICS_BY_CLAIM) {
                r->metrics = 0; /* the bug: a new claim starts a new metric map */
                r->metrics_claim = a->claim.epoch;
            }
            job_t *j = &me->jobs[me->job_count++];
            j->t = t;
            j->epoch = a->claim.epoch;
            j->next_epoch = r->ckpt + 1; /* resume from the latest checkpoint */
            j->epoch_end = w->now + epoch_ms(w, t);
            j->renew_ms = (uint64_t)w->now + w->spec.lease_ms / 3;
            break;
        }
        case SL_TURN_JOB_LOST:
            if (w->bug == BUG_T3_IGNORE_EPOCH)
                break; /* the bug: a higher epoch goes unnoticed */
            if (w->bug == BUG_T3_SAME_EPOCH && a->claim.epoch == me->jobs[a->job].epoch)
                break; /* the bug: its epoch won by another goes unnoticed */
            drop[a->job] = true;
            break;
        case SL_TURN_JOB_END: drop[a->job] = true; break;
        case SL_TURN_JOB_RENEW_AT: me->jobs[a->job].renew_ms = a->at_ms; break;
        }
    }
}

/* Planted bugs of the leader's phase: STOPs dropped (T1), one promotion
 * too many (T4). */
static void plant_lead(world_t *w, const view_t *v, sl_turn_out_t *out) {
    if (w->bug == BUG_T1_SKIP_STOPS) {
        size_t k = 0;
        for (size_t i = 0; i < out->count; i++)
            if (out->items[i].kind != SL_TURN_WRITE_STOP &&
                out->items[i].kind != SL_TURN_WRITE_RESULT)
                out->items[k++] = out->items[i];
        out->count = k;
    }
    if (w->bug == BUG_T4_EXTRA_PROMOTION) {
        /* promote the worst paused trial at rung 0 as well */
        int worst = -1;
        for (size_t i = 0; i < v->count; i++)
            if (v->trials[i].state == SL_TRIAL_PAUSED && v->trials[i].rung == 0 &&
                (worst < 0 || v->trials[i].objectives[0] < v->trials[worst].objectives[0]))
                worst = (int)i;
        bool dup = false;
        for (size_t i = 0; worst >= 0 && i < out->count; i++)
            dup |= out->items[i].kind == SL_TURN_WRITE_RUNG &&
                   strcmp(out->items[i].trial_id, v->trials[worst].id) == 0;
        if (worst >= 0 && !dup && v->count >= 3 && out->count < out->cap) {
            sl_turn_action_t *a = &out->items[out->count++];
            memset(a, 0, sizeof *a);
            a->kind = SL_TURN_WRITE_RUNG;
            memcpy(a->trial_id, v->trials[worst].id, sizeof a->trial_id);
            a->rung = 1;
        }
    }
}

/* The planted T5 bug: a dead owner's or lapsed claim is never taken (its
 * claim write and job start are dropped), nor released by its owner once
 * restarted. Counts the takeovers. */
static void plant_claims(world_t *w, int p, sl_turn_out_t *out) {
    peer_t *me = &w->peers[p];
    size_t k = 0;
    for (size_t i = 0; i < out->count; i++) {
        sl_turn_action_t *a = &out->items[i];
        bool take = a->kind == SL_TURN_WRITE_CLAIM && a->why == SL_TURN_CLAIM_TAKE;
        if (w->bug == BUG_T5_NO_TAKEOVER && a->kind == SL_TURN_WRITE_CLAIM &&
            a->why == SL_TURN_CLAIM_ORPHAN)
            continue; /* nor given back by its owner restarted */
        if (take || a->kind == SL_TURN_JOB_START) {
            int t = find_prop(w, a->trial_id);
            const sl_claim_t *c = &me->rep.t[t].claim;
            int owner = c->owner[0] ? peer_index(w, c->owner) : -1;
            sl_claim_status st = sl_claim_status_of(c, me->id, (uint64_t)w->now,
                                                    owner >= 0 && alive_in_view(w, p, owner));
            bool over = st == SL_CLAIM_OWNER_DEAD || st == SL_CLAIM_LAPSED;
            if (over && w->bug == BUG_T5_NO_TAKEOVER)
                continue;
            w->takeovers += over && take;
        }
        out->items[k++] = *a;
    }
    out->count = k;
}

/* Peer p's turn: its workers' reports, then the turn's three phases,
 * each one's actions carried out before the next is decided. */
static void turn(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    static view_t v;
    sl_turn_out_t *out = &w->out;
    uint64_t now = (uint64_t)w->now;
    work(w, p);
    /* the jobs */
    build_view(w, p, &v);
    sl_turn_job_t tj[2];
    bool drop[2] = {false, false};
    int nj = me->job_count;
    for (int k = 0; k < nj; k++) {
        const job_t *j = &me->jobs[k];
        const rtrial_t *r = &me->rep.t[j->t];
        tj[k] = (sl_turn_job_t){.trial_id = w->props[j->t].id, .epoch = j->epoch,
                                .renew_ms = j->renew_ms, .last_epoch = j->next_epoch - 1,
                                .found = r->known, .claim = r->claim,
                                .has_claim = r->claim.epoch > 0, .has_result = r->has_result,
                                .stop = r->stop};
    }
    sl_turn_out_clear(out);
    if (sl_turn_jobs(&v.tv, tj, (size_t)nj, me->id, now, out) != SL_OK) {
        violate(w, "turn: jobs phase failed");
        return;
    }
    apply(w, p, out, drop);
    for (int k = nj - 1; k >= 0; k--) /* (from the end: drop_job moves the last) */
        if (drop[k])
            drop_job(me, k);
    if (me->rep.finished)
        return;
    /* the leader */
    build_view(w, p, &v);
    build_members(w, p);
    sl_turn_members_load(&v.tv, &w->members, me->id, me->job_count);
    sl_turn_out_clear(out);
    if (sl_turn_lead(&v.tv, &w->members, me->id, now, out) != SL_OK) {
        violate(w, "turn: lead phase failed");
        return;
    }
    sl_sched_view_t sv = {.study_id = w->study_id, .trials = v.trials, .trial_count = v.count,
                          .capacity = v.capacity};
    if (out->led) {
        w->led[p] = true;
        w->led_round[p] = sl_sched_round(&w->spec, &sv);
    }
    plant_lead(w, &v, out);
    for (size_t i = 0; i < out->count; i++) {
        const sl_turn_action_t *a = &out->items[i];
        char why[200] = "";
        if (a->kind == SL_TURN_WRITE_RUNG &&
            sl_sched_check_promotion(&w->spec, &sv, a->trial_id, a->rung, why, sizeof why))
            violate(w, "T4: %s (leader %s)", why, me->id);
    }
    apply(w, p, out, NULL);
    if (me->rep.finished)
        return;
    /* the claims (a simulated peer has caught up: its replica is the
       store's) */
    build_view(w, p, &v);
    sl_turn_out_clear(out);
    if (sl_turn_claims(&v.tv, &w->members, me->id, now, true, out) != SL_OK) {
        violate(w, "turn: claims phase failed");
        return;
    }
    plant_claims(w, p, out);
    apply(w, p, out, NULL);
}

/* ---- faults ---- */

static void crash(world_t *w, int p, int64_t down_ms) {
    peer_t *me = &w->peers[p];
    me->up = false;
    me->job_count = 0; /* volatile state gone; the replica is on disk */
    memset(me->claimable_since, 0, sizeof me->claimable_since);
    me->down_until = w->now + down_ms;
    w->last_fault = w->now;
}

static void inject_faults(world_t *w) {
    sl_rng_t *rng = &w->rng;
    for (int p = 0; p < PEERS; p++) {
        peer_t *me = &w->peers[p];
        if (me->up && w->now < me->paused_until) /* frozen: its epochs do not advance */
            for (int k = 0; k < me->job_count; k++)
                me->jobs[k].epoch_end += STEP_MS;
    }
    for (int p = 0; p < PEERS; p++) {
        peer_t *me = &w->peers[p];
        if (!me->up && w->now >= me->down_until) {
            me->up = true;
            w->last_fault = w->now;
            for (int q = 0; q < PEERS; q++)
                me->heard[q] = w->now; /* it starts believing everyone alive */
        }
    }
    if (w->heal_at && w->now >= w->heal_at) {
        memset(w->group, 0, sizeof w->group);
        w->heal_at = 0;
        w->last_fault = w->now;
    }
    if (!w->faults || w->now >= w->faults_until)
        return;
    uint64_t dice = sl_rng_below(rng, 1000);
    if (dice < 15) {
        /* kill the leader of the current round as peer 0..N sees it, or anyone */
        int victim = (int)sl_rng_below(rng, PEERS);
        if (sl_rng_below(rng, 2)) {
            view_t *v = malloc(sizeof *v);
            int obs = (int)sl_rng_below(rng, PEERS);
            if (v && w->peers[obs].up) {
                build_view(w, obs, v);
                sl_sched_view_t sv = {.study_id = w->study_id, .trials = v->trials,
                                      .trial_count = v->count, .capacity = v->capacity};
                int l = leader_of(w, obs, sl_sched_round(&w->spec, &sv));
                if (l >= 0) {
                    victim = l;
                    w->leader_kills++;
                }
            }
            free(v);
        }
        if (w->peers[victim].up)
            crash(w, victim, 300 + (int64_t)sl_rng_below(rng, 3000));
    } else if (dice < 20) {
        /* SIGSTOP a peer for 0.5-4 s: it neither trains nor talks, then
         * carries on with what it had (claims it may have lost) */
        int victim = (int)sl_rng_below(rng, PEERS);
        if (running(w, victim)) {
            w->peers[victim].paused_until = w->now + 500 + (int64_t)sl_rng_below(rng, 3500);
            w->last_fault = w->peers[victim].paused_until;
            w->pauses++;
        }
    } else if (dice < 25 && !w->heal_at) {
        for (int p = 0; p < PEERS; p++)
            w->group[p] = (int)sl_rng_below(rng, 2);
        w->heal_at = w->now + 500 + (int64_t)sl_rng_below(rng, 4000);
        w->last_fault = w->now;
    }
}

/* ---- one run ---- */

static const char *asha_json =
    "{\"name\": \"sim-asha\", \"trainer\": {\"type\": \"command\", \"command\": \"t {lr}\"},"
    " \"search_space\": {\"lr\": {\"type\": \"real\", \"low\": 0.0001, \"high\": 0.1, \"log\": true}},"
    " \"scheduler\": {\"type\": \"asha\", \"min_epochs\": 1, \"max_epochs\": 9, \"reduction\": 3},"
    " \"objectives\": [{\"metric\": \"val_acc\", \"goal\": \"max\"}],"
    " \"budget\": {\"trials\": 36}, \"retries\": 1, \"checkpoint_every\": 2}";
static const char *sh_json =
    "{\"name\": \"sim-sh\", \"trainer\": {\"type\": \"command\", \"command\": \"t {lr}\"},"
    " \"search_space\": {\"lr\": {\"type\": \"real\", \"low\": 0.0001, \"high\": 0.1, \"log\": true}},"
    " \"scheduler\": {\"type\": \"sh\", \"min_epochs\": 1, \"max_epochs\": 9, \"reduction\": 3},"
    " \"objectives\": [{\"metric\": \"val_acc\", \"goal\": \"max\"}],"
    " \"budget\": {\"trials\": 18}, \"retries\": 1, \"checkpoint_every\": 2}";

static const char *hb_json =
    "{\"name\": \"sim-hb\", \"trainer\": {\"type\": \"command\", \"command\": \"t {lr}\"},"
    " \"search_space\": {\"lr\": {\"type\": \"real\", \"low\": 0.0001, \"high\": 0.1, \"log\": true}},"
    " \"scheduler\": {\"type\": \"hyperband\", \"min_epochs\": 1, \"max_epochs\": 9, \"reduction\": 3},"
    " \"objectives\": [{\"metric\": \"val_acc\", \"goal\": \"max\"}], \"retries\": 1}";
static const char *grid_json =
    "{\"name\": \"sim-grid\", \"trainer\": {\"type\": \"command\", \"command\": \"t {lr} {k}\"},"
    " \"search_space\": {\"lr\": {\"type\": \"real\", \"low\": 0.0001, \"high\": 0.1, \"log\": true,"
    " \"grid_points\": 4}, \"k\": {\"type\": \"categorical\", \"values\": [\"a\", \"b\", \"c\"]}},"
    " \"searcher\": {\"type\": \"grid\"}, \"scheduler\": {\"type\": \"fifo\", \"epochs\": 3},"
    " \"objectives\": [{\"metric\": \"val_acc\", \"goal\": \"max\"}], \"retries\": 1}";
static const char *evo_json =
    "{\"name\": \"sim-evo\", \"trainer\": {\"type\": \"command\", \"command\": \"t {lr}\"},"
    " \"search_space\": {\"lr\": {\"type\": \"real\", \"low\": 0.0001, \"high\": 0.1, \"log\": true}},"
    " \"searcher\": {\"type\": \"evolution\", \"population\": 6},"
    " \"scheduler\": {\"type\": \"fifo\", \"epochs\": 2},"
    " \"objectives\": [{\"metric\": \"val_acc\", \"goal\": \"max\"}],"
    " \"budget\": {\"trials\": 24}, \"retries\": 1}";

static void checks_step(world_t *w) {
    /* T3: claim epochs only grow in every replica; no worker holds an
     * epoch below its replica's; when quiet, one worker per trial */
    for (int p = 0; p < PEERS; p++) {
        peer_t *me = &w->peers[p];
        for (int i = 0; i < w->prop_count; i++) {
            if (me->rep.t[i].claim.epoch < me->last_epoch[i])
                violate(w, "T3: %s's claim epoch of trial %d went back", me->id, i);
            me->last_epoch[i] = me->rep.t[i].claim.epoch;
        }
        for (int k = 0; k < me->job_count; k++)
            if (me->rep.t[me->jobs[k].t].claim.epoch > me->jobs[k].epoch)
                violate(w, "T3: %s works on trial %d at epoch %llu after seeing epoch %llu",
                        me->id, me->jobs[k].t, (unsigned long long)me->jobs[k].epoch,
                        (unsigned long long)me->rep.t[me->jobs[k].t].claim.epoch);
    }
    /* quiet: every peer up, no partition, no fault for a lease and a
     * detection period; two workers on one trial (claims that crossed
     * before anti-entropy met) must resolve within DOUBLE_WORK_MS */
    bool quiet = !w->heal_at && w->now >= w->last_fault + LEASE_MS + DEAD_AFTER_MS;
    for (int p = 0; p < PEERS; p++)
        quiet &= running(w, p);
    w->quiet_steps += quiet;
    for (int i = 0; i < w->prop_count; i++) {
        int workers = 0;
        for (int p = 0; p < PEERS; p++)
            for (int k = 0; k < w->peers[p].job_count; k++)
                workers += w->peers[p].jobs[k].t == i;
        if (workers < 2 || !quiet) {
            w->double_since[i] = 0;
            continue;
        }
        if (!w->double_since[i])
            w->double_since[i] = w->now;
        if (w->now - w->double_since[i] > DOUBLE_WORK_MS)
            violate(w, "T3: %d peers work on trial %d while quiet for %lld ms", workers, i,
                    (long long)(w->now - w->double_since[i]));
    }
    /* R1: two peers that share an alive view never both lead one round
     * (who led is the turn's answer, sl_turn_lead) */
    for (int p = 0; p < PEERS; p++)
        for (int q = p + 1; q < PEERS; q++) {
            if (!w->led[p] || !w->led[q] || w->led_round[p] != w->led_round[q])
                continue;
            bool same = true;
            for (int r = 0; r < PEERS; r++)
                same &= alive_in_view(w, p, r) == alive_in_view(w, q, r);
            if (same)
                violate(w, "R1: %s and %s share a view but both lead round %llu",
                        w->peers[p].id, w->peers[q].id, (unsigned long long)w->led_round[p]);
        }
}

static void run_world(world_t *w, const char *json, uint64_t seed, bool faults, bug_t bug) {
    sl_study_members_fini(&w->members); /* (a run before this one's) */
    sl_turn_out_fini(&w->out);
    memset(w, 0, sizeof *w);
    sl_turn_out_init(&w->out);
    w->seed = seed;
    w->bug = bug;
    w->faults = faults;
    char why[256] = "";
    if (sl_study_spec_parse(json, strlen(json), &w->spec, why, sizeof why) != SL_OK) {
        violate(w, "spec: %s", why);
        return;
    }
    w->spec.seed = seed;
    w->spec.lease_ms = LEASE_MS;
    sl_study_spec_id(&w->spec, w->study_id);
    w->concurrency = 1 + (int)(seed % 2);
    w->faults_until = FAULTS_UNTIL_MS / 3 * (1 + (int64_t)(seed % 3));
    sl_rng_seed(&w->rng, seed * 7919 + 17);
    for (int p = 0; p < PEERS; p++) {
        snprintf(w->peers[p].id, sizeof w->peers[p].id, "peer-%d", p);
        w->peers[p].up = true;
    }
    for (w->now = 0; w->now < DEADLINE_MS && !w->violation[0]; w->now += STEP_MS) {
        inject_faults(w);
        /* membership: hear those reachable */
        for (int p = 0; p < PEERS; p++)
            for (int q = 0; q < PEERS; q++)
                if (connected(w, p, q))
                    w->peers[p].heard[q] = w->now;
        /* anti-entropy */
        for (int p = 0; p < PEERS; p++)
            for (int q = 0; q < PEERS; q++)
                if (p != q && connected(w, p, q) && sl_rng_below(&w->rng, 10) < 4)
                    merge_replica(w, &w->peers[q].rep, &w->peers[p].rep);
        /* each peer: its turn */
        memset(w->led, 0, sizeof w->led);
        for (int p = 0; p < PEERS && !w->violation[0]; p++)
            if (running(w, p))
                turn(w, p);
        checks_step(w);
        /* done: every peer up, finished, idle */
        bool all = w->now >= w->faults_until && !w->heal_at;
        for (int p = 0; p < PEERS && all; p++)
            all = running(w, p) && w->peers[p].rep.finished && w->peers[p].job_count == 0;
        if (all) {
            w->finished_all = true;
            break;
        }
    }
    if (w->violation[0])
        return;
    /* T5: finished once quiet */
    if (!w->finished_all) {
        int open = 0;
        for (int i = 0; i < w->prop_count; i++)
            open += !w->peers[0].rep.t[i].has_result;
        violate(w, "T5: not finished by %d s (%d trials open in peer-0's replica)",
                DEADLINE_MS / 1000, open);
        if (getenv("SL_VERBOSE")) {
            static view_t dv;
            build_view(w, 0, &dv);
            for (size_t i = 0; i < dv.count; i++) {
                const rtrial_t *r = &w->peers[0].rep.t[dv.map[i]];
                printf("  %s ord %llu br %d rung %d %s epochs %d claim %s/%llu rel %d stop %d res %d\n",
                       dv.trials[i].id, (unsigned long long)dv.trials[i].ordinal, dv.trials[i].bracket,
                       dv.trials[i].rung, sl_trial_state_name(dv.trials[i].state),
                       dv.trials[i].epochs_done, r->claim.owner, (unsigned long long)r->claim.epoch,
                       r->claim.released, r->stop, r->has_result);
            }
        }
        return;
    }
    /* converge the replicas, then check the end state */
    for (int round = 0; round < 2; round++)
        for (int p = 0; p < PEERS; p++)
            for (int q = 0; q < PEERS; q++)
                if (p != q)
                    merge_replica(w, &w->peers[q].rep, &w->peers[p].rep);
    const replica_t *fin = &w->peers[0].rep;
    for (int i = 0; i < w->prop_count; i++) {
        const rtrial_t *r = &fin->t[i];
        /* T1 */
        if (!r->has_result)
            violate(w, "T1: trial %d (%s, rung %d, %d epochs) has no outcome", i, w->props[i].id,
                    r->rung, recorded(r));
        else if (r->result.state != SL_TRIAL_DONE && r->result.state != SL_TRIAL_FAILED)
            violate(w, "T1: trial %d ends %s", i, sl_trial_state_name(r->result.state));
        /* T2 */
        for (int e = 0; e < MAX_E; e++)
            if (w->reported[i][e] && !(r->metrics >> e & 1))
                violate(w, "T2: trial %d lost the metric of epoch %d", i, e + 1);
        for (int p = 1; p < PEERS; p++)
            if (memcmp(&w->peers[p].rep.t[i], r, sizeof *r) != 0)
                violate(w, "store: replicas differ on trial %d once quiet", i);
    }
    /* R2: every slot once, the budget met */
    for (uint64_t o = 0; o < w->spec.budget_trials; o++) {
        int n = 0;
        for (int i = 0; i < w->prop_count; i++)
            n += w->props[i].ordinal == o && fin->t[i].known;
        if (n != 1)
            violate(w, "R2: proposal slot %llu holds %d trials", (unsigned long long)o, n);
    }
    if ((uint32_t)w->prop_count != w->spec.budget_trials)
        violate(w, "R2: %d trials proposed for a budget of %u", w->prop_count,
                w->spec.budget_trials);
}

/* The end state a synchronous scheduler must reproduce: per trial id, the
 * rung, the outcome and the epochs. */
static bool same_outcome(const world_t *a, const world_t *b, char *why, size_t why_len) {
    if (a->prop_count != b->prop_count) {
        snprintf(why, why_len, "%d trials vs %d", a->prop_count, b->prop_count);
        return false;
    }
    for (int i = 0; i < a->prop_count; i++) {
        int j = find_prop(b, a->props[i].id);
        if (j < 0) {
            snprintf(why, why_len, "trial %s missing", a->props[i].id);
            return false;
        }
        const rtrial_t *x = &a->peers[0].rep.t[i], *y = &b->peers[0].rep.t[j];
        if (x->rung != y->rung || x->result.state != y->result.state ||
            recorded(x) != recorded(y)) {
            snprintf(why, why_len, "trial %s: rung %d/%d, %s/%s, %d/%d epochs", a->props[i].id,
                     x->rung, y->rung, sl_trial_state_name(x->result.state),
                     sl_trial_state_name(y->result.state), recorded(x), recorded(y));
            return false;
        }
    }
    return true;
}

static world_t W, W0;

static uint64_t first_seed(void) {
    const char *s = getenv("SL_SEED");
    return s ? strtoull(s, NULL, 10) : 1;
}

static void test_asha_faults(void) {
    int seeds = getenv("SL_SEED") ? 1 : sl_test_seed_count(150);
    int kills = 0, takeovers = 0, promotions = 0, quiet = 0, pauses = 0, torn = 0;
    for (int i = 0; i < seeds; i++) {
        uint64_t seed = first_seed() + (uint64_t)i;
        run_world(&W, asha_json, seed, true, BUG_NONE);
        CHECK_MSG(!W.violation[0], "seed %llu (SL_SEED=%llu to replay): %s",
                  (unsigned long long)seed, (unsigned long long)seed, W.violation);
        if (W.violation[0])
            break;
        if (getenv("SL_VERBOSE"))
            printf("  seed %llu: finished at %.1f s, %d trials, %d promotions, %d leader kills, "
                   "%d takeovers, %d pauses, %d quiet steps\n", (unsigned long long)seed,
                   W.now / 1000.0, W.prop_count, W.promotions, W.leader_kills, W.takeovers,
                   W.pauses, W.quiet_steps);
        kills += W.leader_kills;
        takeovers += W.takeovers;
        promotions += W.promotions;
        quiet += W.quiet_steps;
        pauses += W.pauses;
        torn += W.torn;
    }
    /* the faults did happen */
    CHECK_MSG(kills > seeds / 4, "only %d leader kills", kills);
    CHECK_MSG(takeovers > seeds / 4, "only %d takeovers", takeovers);
    CHECK(promotions > seeds);
    CHECK(quiet > 0);
    CHECK_MSG(pauses > seeds / 4, "only %d pauses", pauses);
    CHECK_MSG(torn > seeds / 8, "only %d kills between a last report and its result", torn);
}

/* Synchronous schedulers (sh, hyperband, grid, generational evolution)
 * end exactly as their fault-free run with the same seed. */
static void sync_same_as_fault_free(const char *json, int seeds) {
    if (getenv("SL_SEED"))
        seeds = 1;
    for (int i = 0; i < seeds; i++) {
        uint64_t seed = first_seed() + (uint64_t)i;
        run_world(&W0, json, seed, false, BUG_NONE);
        CHECK_MSG(!W0.violation[0], "seed %llu fault-free: %s", (unsigned long long)seed,
                  W0.violation);
        run_world(&W, json, seed, true, BUG_NONE);
        CHECK_MSG(!W.violation[0], "seed %llu (SL_SEED=%llu to replay): %s",
                  (unsigned long long)seed, (unsigned long long)seed, W.violation);
        char why[200];
        bool same = same_outcome(&W0, &W, why, sizeof why);
        CHECK_MSG(same, "T4 seed %llu: faults changed a synchronous decision: %s",
                  (unsigned long long)seed, why);
        if (W.violation[0] || W0.violation[0] || !same)
            break;
    }
}

static void test_sh_same_as_fault_free(void) {
    sync_same_as_fault_free(sh_json, sl_test_seed_count(150) / 2);
}
static void test_hyperband_same_as_fault_free(void) {
    sync_same_as_fault_free(hb_json, sl_test_seed_count(150) / 3);
}
static void test_grid_same_as_fault_free(void) {
    sync_same_as_fault_free(grid_json, sl_test_seed_count(150) / 3);
}
static void test_evolution_same_as_fault_free(void) {
    sync_same_as_fault_free(evo_json, sl_test_seed_count(150) / 3);
}

/* Same seed, no faults: the same run (T4 determinism). */
static void test_deterministic(void) {
    run_world(&W0, asha_json, 42, false, BUG_NONE);
    run_world(&W, asha_json, 42, false, BUG_NONE);
    char why[200];
    CHECK_MSG(same_outcome(&W0, &W, why, sizeof why), "%s", why);
    CHECK_INT(W0.now, W.now);
    run_world(&W, asha_json, 42, true, BUG_NONE);
    CHECK_INT(W.prop_count, W0.prop_count); /* random search: the same trials */
    for (int i = 0; i < W0.prop_count; i++)
        CHECK(find_prop(&W, W0.props[i].id) >= 0);
}

/* Each checker fires on its planted bug within a few seeds. */
static void planted_in(bug_t bug, const char *json, const char *prefix, bool faults) {
    bool fired = false;
    for (uint64_t seed = 1; seed <= 40 && !fired; seed++) {
        run_world(&W, json, seed, faults, bug);
        fired = strncmp(W.violation, prefix, strlen(prefix)) == 0;
    }
    if (getenv("SL_VERBOSE"))
        printf("  bug %d fired at seed %llu: %s\n", bug, (unsigned long long)(W.seed), W.violation);
    CHECK_MSG(fired, "planted bug %d: the %s checker never fired (last: \"%s\")", bug, prefix,
              W.violation);
}

static void planted(bug_t bug, const char *json, const char *prefix) {
    planted_in(bug, json, prefix, true);
}

static void test_planted_t1(void) { planted(BUG_T1_SKIP_STOPS, asha_json, "T1"); }
static void test_planted_t2(void) { planted(BUG_T2_METRICS_BY_CLAIM, asha_json, "T2"); }
static void test_planted_t3(void) { planted(BUG_T3_IGNORE_EPOCH, asha_json, "T3: peer-"); }
static void test_planted_t3_quiet(void) {
    planted_in(BUG_T3_SAME_EPOCH, asha_json, "T3: 2 peers work on trial", false);
}
static void test_planted_t4(void) { planted(BUG_T4_EXTRA_PROMOTION, asha_json, "T4"); }
static void test_planted_t4_sync(void) { planted(BUG_T4_EXTRA_PROMOTION, sh_json, "T4"); }
static void test_planted_t5(void) { planted(BUG_T5_NO_TAKEOVER, asha_json, "T5"); }
static void test_planted_r1(void) { planted(BUG_R1_MEMBER_CAP, asha_json, "R1"); }
static void test_planted_r2(void) { planted(BUG_R2_ORDINAL_SKEW, asha_json, "R2"); }

int main(void) {
    sl_test_run("deterministic", test_deterministic);
    sl_test_run("asha_faults", test_asha_faults);
    sl_test_run("sh_same_as_fault_free", test_sh_same_as_fault_free);
    sl_test_run("hyperband_same_as_fault_free", test_hyperband_same_as_fault_free);
    sl_test_run("grid_same_as_fault_free", test_grid_same_as_fault_free);
    sl_test_run("evolution_same_as_fault_free", test_evolution_same_as_fault_free);
    sl_test_run("planted_t1", test_planted_t1);
    sl_test_run("planted_t2", test_planted_t2);
    sl_test_run("planted_t3", test_planted_t3);
    sl_test_run("planted_t3_quiet", test_planted_t3_quiet);
    sl_test_run("planted_t4", test_planted_t4);
    sl_test_run("planted_t4_sync", test_planted_t4_sync);
    sl_test_run("planted_t5", test_planted_t5);
    sl_test_run("planted_r1", test_planted_r1);
    sl_test_run("planted_r2", test_planted_r2);
    return sl_test_finish();
}
