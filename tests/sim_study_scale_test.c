/* An ASHA study on a large simulated fleet through the real study turn
 * (src/study/turn.c), with churn: N peers of one slot each, a quarter of
 * them killed in turn (each every CHURN_PERIOD_MS, staggered, down for
 * CHURN_DOWN_MS, as bench/study/asha_bound.py --churn models), on a
 * virtual clock. It measures the study's makespan against ASHA's own
 * bound (asha_bound.py on the same trials' scores) and checks that no
 * trial is lost (every proposal ends with a result, the budget is met)
 * and none runs twice at once for long (two peers on one trial, from
 * claims that crossed, resolve within DOUBLE_WORK_MS).
 *
 * Each peer takes a turn every STEP_MS as the daemon does: its workers'
 * reports (an epoch of EPOCH_MS each; at a rung's end the owner promotes
 * and trains on when its view lets ASHA promote, as study_node.c's
 * continue_promoted), then sl_turn_jobs, sl_turn_lead, sl_turn_claims.
 * The store is a model: a peer's write reaches every peer up at the time
 * after 1-4 steps (push to all), a peer restarted merges a live peer's
 * replica (the store's catch-up). Membership: a peer down is suspect to
 * the others SUSPECT_AFTER_MS after it went down (the turn may then take
 * its trial over), dead DEAD_AFTER_MS after, alive again when back; a
 * peer up is wrongly suspected for FALSE_SUSPECT_MS now and then (its
 * trial taken over, it must stop: the double-work check).
 *
 * The ctest run is small (32 peers, 150 trials). The benchmark of
 * bench/results/sim.md: SL_SCALE_PEERS=256 SL_SCALE_TRIALS=1000
 * SL_SCALE_SCORES=FILE (the trials' scores in proposal order, for
 * asha_bound.py --scores); SL_SEED=S another study; SL_SCALE_CHURN=0 no
 * kills or wrong suspicions; SL_SCALE_TRACE=FILE the events and, every
 * 25 ms, the idle slots beside the work there was for them. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "starling/hash.h"
#include "starling/rng.h"
#include "starling/round.h"
#include "starling/study.h"
#include "study/turn.h"
#include "testlib.h"

#define MAX_E 9
#define STEP_MS 5
#define EPOCH_MS 250
#define LEASE_MS 3000
#define SUSPECT_AFTER_MS 400 /* a peer down is suspect to the others this much later */
#define DEAD_AFTER_MS 1500
#define FALSE_SUSPECT_MS 300 /* a peer up is suspected wrongly this long ... */
#define FALSE_SUSPECT_EVERY_MS 2000 /* ... one in the fleet this often */
#define CHURN_PERIOD_MS 8000
#define CHURN_DOWN_MS 1000
#define DOUBLE_WORK_MS 1000
#define DEADLINE_MS 600000
#define DELAY_STEPS 4 /* a write arrives 1..DELAY_STEPS steps later */

/* One trial in one replica: joins, as tests/sim_study_test.c's. */
typedef struct {
    bool known;         /* its record is here */
    int rung;           /* target rung (max) */
    sl_claim_t claim;   /* the join of the claim registers */
    uint16_t metrics;   /* bit e-1: epoch e reported */
    int ckpt;           /* epochs in the latest checkpoint (max) */
    bool has_result;    /* result present */
    sl_result_t result; /* merged result */
    bool stop;          /* stop flag (or) */
} rt_t;

typedef struct {
    char id[SL_TRIAL_ID_LEN + 1]; /* trial id */
    uint64_t ordinal;             /* proposal slot */
    sl_config_t config;           /* its configuration */
    double q;                     /* its quality: the metric is q x epoch */
} prop_t;

typedef struct {
    int t;             /* trial (registry index) */
    uint64_t epoch;    /* claim epoch held */
    int next_epoch;    /* epoch in training */
    int64_t epoch_end; /* when it ends */
    uint64_t renew_ms; /* next renewal (the turn's) */
} job_t;

typedef struct {
    char id[16];           /* "pN" */
    bool up;               /* running */
    bool churns;           /* one of the quarter killed in turn */
    int64_t down_at;       /* when it last went down */
    int64_t back_at;       /* when it comes back (down) or next goes down (churner, up) */
    rt_t *rep;             /* its replica (persisted) */
    bool finished;         /* the study's finished flag in its replica */
    job_t job;             /* its one slot */
    bool busy;             /* job in use */
    uint64_t *claimable;   /* per trial: claimable since (the turn keeps it) */
    bool dirty;            /* a write arrived since its last turn */
    int64_t suspect_until; /* up, but suspect to the others until then (a slow peer) */
} peer_t;

/* A write on its way: the writer's state of one trial after it. */
typedef struct {
    int writer; /* peer */
    int t;      /* trial; -1: the finished flag */
    rt_t st;    /* the state */
} delta_t;

typedef struct {
    delta_t *d;   /* deltas */
    size_t count; /* used */
    size_t cap;   /* allocated */
} bucket_t;

typedef struct {
    int n, budget;          /* peers, trials */
    sl_study_spec_t spec;   /* the study */
    char study_id[SL_TRIAL_ID_LEN + 1];
    peer_t *peers;          /* n */
    prop_t *props;          /* the proposals, by registry index */
    int prop_count;         /* used */
    int64_t now;            /* virtual ms */
    sl_rng_t rng;           /* faults and delays */
    bucket_t inflight[DELAY_STEPS + 1]; /* by arrival step, modulo */
    sl_study_members_t members;
    sl_turn_out_t out;
    /* the view a turn is given */
    sl_trial_t *vtrials;    /* its trials */
    double *curves;         /* MAX_E a trial */
    int *map;               /* view index -> registry index */
    sl_turn_open_t *open;   /* open trials */
    sl_turn_view_t tv;      /* the view */
    /* measures and checks */
    char violation[256];
    int64_t finished_at;    /* the first finished flag */
    int64_t *double_since;  /* per trial: two peers on it since (0: not) */
    int64_t double_ms;      /* total time trials had two workers */
    int64_t double_max_ms;  /* longest such stretch */
    int kills, takeovers, releases, owner_promotions, claims;
    int suspect_takeovers, false_suspicions; /* trials taken from suspects; wrong suspicions */
    bool calm;              /* SL_SCALE_CHURN=0: no kills, no wrong suspicions */
    FILE *trace;            /* SL_SCALE_TRACE: events and idle slots, for where time goes */
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

static void tr(world_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tr(world_t *w, const char *fmt, ...) {
    if (!w->trace)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(w->trace, "%" PRId64 " ", w->now);
    vfprintf(w->trace, fmt, ap);
    fputc('\n', w->trace);
    va_end(ap);
}

static int find_prop(const world_t *w, const char *id) {
    for (int i = w->prop_count - 1; i >= 0; i--) /* (recent ones first) */
        if (!strcmp(w->props[i].id, id))
            return i;
    return -1;
}

static int peer_index(const world_t *w, const char *id) {
    if (id[0] != 'p')
        return -1;
    int k = atoi(id + 1);
    return k >= 0 && k < w->n ? k : -1;
}

static bool alive_in_view(const world_t *w, int p, int q) {
    return p == q || w->peers[q].up || w->now - w->peers[q].down_at < DEAD_AFTER_MS;
}

/* Membership's SUSPECT (alive to the turn, but a probe went unanswered):
 * a peer down for SUSPECT_AFTER_MS (the probe timeout after its closed
 * connection's hint, docs/membership.md), or one up that is wrongly
 * suspected for a while. */
static bool suspect_in_view(const world_t *w, int p, int q) {
    const peer_t *o = &w->peers[q];
    if (p == q || !alive_in_view(w, p, q))
        return false;
    return o->up ? w->now < o->suspect_until : w->now - o->down_at >= SUSPECT_AFTER_MS;
}

/* ---- the store model ---- */

static void merge(rt_t *a, const rt_t *b) {
    if (!b->known)
        return;
    a->known = true;
    if (b->rung > a->rung)
        a->rung = b->rung;
    sl_claim_merge(&a->claim, &b->claim, &a->claim);
    a->metrics |= b->metrics;
    if (b->ckpt > a->ckpt)
        a->ckpt = b->ckpt;
    if (b->has_result) {
        if (a->has_result)
            sl_result_merge(&a->result, &b->result, &a->result);
        else
            a->result = b->result;
        a->has_result = true;
    }
    a->stop = a->stop || b->stop;
}

/* Peer p wrote trial t (-1: the finished flag): on its way to the others. */
static void sent(world_t *w, int p, int t) {
    bucket_t *b = &w->inflight[(w->now / STEP_MS + 1 + (int64_t)sl_rng_below(&w->rng, DELAY_STEPS)) %
                               (DELAY_STEPS + 1)];
    if (b->count == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 256;
        delta_t *n = sl_realloc(b->d, cap * sizeof *n);
        if (!n) {
            violate(w, "test: out of memory");
            return;
        }
        b->d = n;
        b->cap = cap;
    }
    delta_t *d = &b->d[b->count++];
    d->writer = p;
    d->t = t;
    if (t >= 0)
        d->st = w->peers[p].rep[t];
}

/* The writes due this step reach every peer up. */
static void deliver(world_t *w) {
    bucket_t *b = &w->inflight[(w->now / STEP_MS) % (DELAY_STEPS + 1)];
    for (size_t i = 0; i < b->count; i++) {
        const delta_t *d = &b->d[i];
        for (int q = 0; q < w->n; q++) {
            peer_t *me = &w->peers[q];
            if (q == d->writer || !me->up)
                continue;
            if (d->t < 0)
                me->finished = true;
            else
                merge(&me->rep[d->t], &d->st);
            me->dirty = true;
        }
    }
    b->count = 0;
}

/* ---- a peer's view ---- */

static double metric(const world_t *w, int t, int e) { return w->props[t].q * e; }

static void build_view(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    size_t count = 0, nopen = 0;
    uint64_t lapse = UINT64_MAX;
    for (int i = 0; i < w->prop_count; i++) {
        const rt_t *r = &me->rep[i];
        if (!r->known)
            continue;
        sl_trial_t *t = &w->vtrials[count];
        double *curve = &w->curves[count * MAX_E];
        memcpy(t->id, w->props[i].id, sizeof t->id);
        t->ordinal = w->props[i].ordinal;
        t->bracket = 0;
        t->rung = r->rung;
        t->config = w->props[i].config;
        int last = 0;
        for (int e = 0; e < MAX_E; e++) {
            curve[e] = (r->metrics >> e & 1) ? metric(w, i, e + 1) : NAN;
            if (r->metrics >> e & 1)
                last = e + 1;
        }
        t->epochs_done = last;
        t->curve = curve;
        t->curve_len = MAX_E;
        for (int o = 0; o < SL_STUDY_MAX_OBJECTIVES; o++)
            t->objectives[o] = NAN;
        if (last)
            t->objectives[0] = metric(w, i, last);
        bool has_claim = r->claim.epoch > 0;
        int owner = has_claim ? peer_index(w, r->claim.owner) : -1;
        bool owner_alive = has_claim && (owner < 0 || alive_in_view(w, p, owner));
        bool owner_suspect = owner_alive && owner >= 0 && suspect_in_view(w, p, owner);
        bool mine = me->busy && me->job.t == i;
        t->state = sl_turn_trial_state(&w->spec, t, &r->claim, has_claim,
                                       r->has_result ? &r->result : NULL, owner_alive, mine,
                                       me->id, (uint64_t)w->now);
        if (!r->has_result) {
            w->open[nopen++] = (sl_turn_open_t){.id = w->props[i].id, .t = t, .claim = r->claim,
                                                .has_claim = has_claim, .stop = r->stop,
                                                .owner_alive = owner_alive,
                                                .owner_suspect = owner_suspect, .mine = mine,
                                                .claimable_ms = &me->claimable[i]};
            if (has_claim && !r->claim.released && r->claim.lease_expiry_ms > (uint64_t)w->now &&
                r->claim.lease_expiry_ms < lapse)
                lapse = r->claim.lease_expiry_ms;
        }
        w->map[count++] = i;
    }
    w->tv = (sl_turn_view_t){.study_id = w->study_id, .spec = &w->spec, .trials = w->vtrials,
                             .trial_count = count, .open = w->open, .open_count = nopen,
                             .finished = me->finished, .next_lapse_ms = lapse};
}

static void build_members(world_t *w, int p) {
    sl_study_members_t *ms = &w->members;
    ms->count = 0;
    for (int q = 0; q < w->n; q++) {
        if (!alive_in_view(w, p, q))
            continue;
        size_t k = ms->count++;
        snprintf(ms->names[k], sizeof ms->names[k], "%s", w->peers[q].id);
        ms->slots[k] = 1;
        ms->suspect[k] = suspect_in_view(w, p, q);
        ms->m[k] = (sl_round_member_t){ms->names[k], true, 1};
    }
}

/* ---- the worker (simulated training; study_node.c's drain_job) ---- */

static void work(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    job_t *j = &me->job;
    if (!me->busy || w->now < j->epoch_end)
        return;
    rt_t *r = &me->rep[j->t];
    int e = j->next_epoch;
    r->metrics |= (uint16_t)(1u << (e - 1));
    r->ckpt = e; /* checkpoint_every 1 */
    sl_epoch_outcome out = sl_claim_after_epoch(&w->spec, r->rung, e, false, 0);
    tr(w, "E %d %s %d", j->t, me->id, e);
    if (out == SL_EPOCH_CONTINUE) {
        sent(w, p, j->t);
        j->next_epoch = e + 1;
        j->epoch_end = w->now + EPOCH_MS;
        return;
    }
    if (out == SL_EPOCH_DONE) {
        sl_result_t *res = &r->result;
        memset(res, 0, sizeof *res);
        memcpy(res->trial_id, w->props[j->t].id, sizeof res->trial_id);
        res->state = SL_TRIAL_DONE;
        res->epochs = e;
        res->claim_epoch = j->epoch;
        snprintf(res->writer, sizeof res->writer, "%s", me->id);
        snprintf(res->reason, sizeof res->reason, "completed");
        r->has_result = true;
        sent(w, p, j->t);
        me->busy = false;
        tr(w, "D %d %s", j->t, me->id);
        return;
    }
    /* paused at its rung: its owner promotes it and trains on when its
       view lets ASHA promote it (continue_promoted) */
    build_view(w, p);
    sl_sched_view_t sv = {.study_id = w->study_id, .capacity = 1, .trials = w->vtrials,
                          .trial_count = w->tv.trial_count};
    if (!me->finished && !r->stop && !r->has_result &&
        !sl_claim_must_stop(&r->claim, me->id, j->epoch) &&
        sl_sched_asha_promotes(&w->spec, &sv, w->props[j->t].id, r->rung, NULL, 0)) {
        r->rung++;
        w->owner_promotions++;
        tr(w, "P %d %s %d", j->t, me->id, r->rung);
        sent(w, p, j->t);
        j->next_epoch = e + 1;
        j->epoch_end = w->now + EPOCH_MS;
        return;
    }
    sl_claim_t rel;
    if (sl_claim_release(&r->claim, me->id, j->epoch, &rel) == SL_OK)
        r->claim = rel;
    sent(w, p, j->t);
    me->busy = false;
    tr(w, "R %d %s %d", j->t, me->id, r->rung);
}

/* ---- the turn ---- */

static void apply(world_t *w, int p, const sl_turn_out_t *out) {
    peer_t *me = &w->peers[p];
    for (size_t i = 0; i < out->count; i++) {
        const sl_turn_action_t *a = &out->items[i];
        int t = a->trial_id[0] ? find_prop(w, a->trial_id) : -1;
        switch (a->kind) {
        case SL_TURN_WRITE_CLAIM:
            if (t < 0)
                break;
            sl_claim_merge(&me->rep[t].claim, &a->claim, &me->rep[t].claim);
            w->releases += a->why == SL_TURN_CLAIM_ORPHAN;
            sent(w, p, t);
            break;
        case SL_TURN_WRITE_RECORD:
            if (t < 0) {
                if (w->prop_count == w->budget) {
                    violate(w, "over budget: a proposal past %d trials", w->budget);
                    break;
                }
                t = w->prop_count++;
                prop_t *pr = &w->props[t];
                memcpy(pr->id, a->trial_id, sizeof pr->id);
                pr->ordinal = a->trial.ordinal;
                pr->config = a->trial.config;
                pr->q = (double)(sl_hash64(pr->id, SL_TRIAL_ID_LEN, 5) >> 11) / 9007199254740992.0;
            }
            me->rep[t].known = true;
            if (a->trial.rung > me->rep[t].rung)
                me->rep[t].rung = a->trial.rung;
            sent(w, p, t);
            break;
        case SL_TURN_WRITE_RUNG:
            if (t >= 0 && a->rung > me->rep[t].rung) {
                tr(w, "L %d %s %d", t, me->id, a->rung);
                me->rep[t].rung = a->rung;
                sent(w, p, t);
            }
            break;
        case SL_TURN_WRITE_STOP:
            if (t >= 0) {
                me->rep[t].stop = true;
                sent(w, p, t);
            }
            break;
        case SL_TURN_WRITE_RESULT:
            if (t < 0)
                break;
            if (me->rep[t].has_result)
                sl_result_merge(&me->rep[t].result, &a->result, &me->rep[t].result);
            else
                me->rep[t].result = a->result;
            me->rep[t].has_result = true;
            sent(w, p, t);
            break;
        case SL_TURN_WRITE_FINISHED:
            me->finished = true;
            if (!w->finished_at)
                w->finished_at = w->now;
            sent(w, p, -1);
            break;
        case SL_TURN_JOB_START:
            if (t < 0 || me->busy) {
                violate(w, "%s starts a second job", me->id);
                break;
            }
            w->claims++;
            w->takeovers += a->claim.epoch > 1;
            w->suspect_takeovers += !strcmp(a->reason, "taken over from a suspect owner");
            me->busy = true;
            me->job = (job_t){.t = t, .epoch = a->claim.epoch, .next_epoch = me->rep[t].ckpt + 1,
                              .epoch_end = w->now + EPOCH_MS,
                              .renew_ms = (uint64_t)w->now + w->spec.lease_ms / 3};
            tr(w, "S %d %s %llu rung %d from %d since %llu: %s", t, me->id,
               (unsigned long long)a->claim.epoch, me->rep[t].rung, me->rep[t].ckpt,
               (unsigned long long)a->at_ms, a->reason);
            break;
        case SL_TURN_JOB_LOST:
        case SL_TURN_JOB_END:
            tr(w, "%c %d %s", a->kind == SL_TURN_JOB_LOST ? 'X' : 'Y', me->job.t, me->id);
            me->busy = false;
            break;
        case SL_TURN_JOB_RENEW_AT: me->job.renew_ms = a->at_ms; break;
        }
    }
}

static void turn(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    uint64_t now = (uint64_t)w->now;
    work(w, p);
    build_view(w, p);
    if (me->busy) {
        const rt_t *r = &me->rep[me->job.t];
        sl_turn_job_t tj = {.trial_id = w->props[me->job.t].id, .epoch = me->job.epoch,
                            .renew_ms = me->job.renew_ms, .last_epoch = me->job.next_epoch - 1,
                            .found = r->known, .claim = r->claim,
                            .has_claim = r->claim.epoch > 0, .has_result = r->has_result,
                            .stop = r->stop};
        sl_turn_out_clear(&w->out);
        if (sl_turn_jobs(&w->tv, &tj, 1, me->id, now, &w->out) != SL_OK) {
            violate(w, "turn: jobs phase failed");
            return;
        }
        apply(w, p, &w->out);
        if (w->out.count)
            build_view(w, p);
    }
    if (me->finished)
        return;
    build_members(w, p);
    sl_turn_members_load(&w->tv, &w->members, me->id, me->busy);
    sl_turn_out_clear(&w->out);
    if (sl_turn_lead(&w->tv, &w->members, me->id, now, &w->out) != SL_OK) {
        violate(w, "turn: lead phase failed");
        return;
    }
    apply(w, p, &w->out);
    if (me->finished)
        return;
    if (w->out.count)
        build_view(w, p);
    sl_turn_out_clear(&w->out);
    if (sl_turn_claims(&w->tv, &w->members, me->id, now, true, &w->out) != SL_OK) {
        violate(w, "turn: claims phase failed");
        return;
    }
    apply(w, p, &w->out);
}

/* ---- churn ---- */

static void churn(world_t *w) {
    /* a slow peer, wrongly suspected */
    if (!w->calm && w->now > 0 && w->now % FALSE_SUSPECT_EVERY_MS == 0) {
        int q = (int)sl_rng_below(&w->rng, (uint64_t)w->n);
        if (w->peers[q].up) {
            w->peers[q].suspect_until = w->now + FALSE_SUSPECT_MS;
            w->false_suspicions++;
            tr(w, "F -1 %s", w->peers[q].id);
        }
    }
    for (int p = 0; p < w->n; p++) {
        peer_t *me = &w->peers[p];
        if (!me->churns || w->now < me->back_at)
            continue;
        if (me->up) { /* kill -9: the job and its epoch in progress are lost */
            tr(w, "K %d %s", me->busy ? me->job.t : -1, me->id);
            me->up = false;
            me->busy = false;
            me->down_at = w->now;
            me->back_at = w->now + CHURN_DOWN_MS;
            memset(me->claimable, 0, (size_t)w->budget * sizeof *me->claimable);
            w->kills++;
        } else { /* back: catches up from a live peer's replica */
            tr(w, "B -1 %s", me->id);
            me->up = true;
            me->back_at = w->now + CHURN_PERIOD_MS;
            int from = -1;
            for (int k = 0; k < w->n && from < 0; k++) {
                int q = (int)((p + 1 + (int)sl_rng_below(&w->rng, (uint64_t)w->n) + k) % w->n);
                if (q != p && w->peers[q].up)
                    from = q;
            }
            if (from >= 0) {
                for (int i = 0; i < w->prop_count; i++)
                    merge(&me->rep[i], &w->peers[from].rep[i]);
                me->finished = me->finished || w->peers[from].finished;
            }
        }
    }
}

/* ---- checks ---- */

static void check_double(world_t *w) {
    int *workers = sl_calloc((size_t)w->prop_count + 1, sizeof *workers);
    if (!workers)
        return;
    for (int p = 0; p < w->n; p++)
        if (w->peers[p].up && w->peers[p].busy)
            workers[w->peers[p].job.t]++;
    for (int i = 0; i < w->prop_count; i++) {
        if (workers[i] < 2) {
            w->double_since[i] = 0;
            continue;
        }
        w->double_ms += STEP_MS;
        if (!w->double_since[i])
            w->double_since[i] = w->now;
        int64_t len = w->now - w->double_since[i] + STEP_MS;
        if (len > w->double_max_ms)
            w->double_max_ms = len;
        if (len > DOUBLE_WORK_MS)
            violate(w, "%d peers run trial %s at once for %" PRId64 " ms", workers[i],
                    w->props[i].id, len);
    }
    sl_free(workers);
}

/* The idle slots and the work there is for them, as the whole fleet's
 * writes joined show it: trials with epochs to train that no peer up
 * runs (fresh, promoted or interrupted) and paused trials ASHA would
 * promote on that joined view. */
static void trace_idle(world_t *w) {
    int up = 0, busy = 0, need = 0, fresh = 0, promotable = 0;
    size_t T = (size_t)w->prop_count;
    rt_t *u = sl_calloc(T + 1, sizeof *u);
    bool *run = sl_calloc(T + 1, sizeof *run);
    sl_trial_t *vt = sl_calloc(T + 1, sizeof *vt);
    double *cv = sl_calloc((T + 1) * MAX_E, sizeof *cv);
    if (!u || !run || !vt || !cv)
        goto out;
    for (int p = 0; p < w->n; p++) {
        const peer_t *me = &w->peers[p];
        if (!me->up)
            continue;
        up++;
        busy += me->busy;
        if (me->busy)
            run[me->job.t] = true;
        for (size_t i = 0; i < T; i++)
            merge(&u[i], &me->rep[i]);
    }
    size_t c = 0;
    for (size_t i = 0; i < T; i++) {
        if (!u[i].known)
            continue;
        int last = 0;
        for (int e = 0; e < MAX_E; e++) {
            cv[c * MAX_E + e] = (u[i].metrics >> e & 1) ? metric(w, (int)i, e + 1) : NAN;
            if (u[i].metrics >> e & 1)
                last = e + 1;
        }
        sl_trial_t *t = &vt[c++];
        memcpy(t->id, w->props[i].id, sizeof t->id);
        t->rung = u[i].rung;
        t->epochs_done = last;
        t->curve = &cv[(c - 1) * MAX_E];
        t->curve_len = MAX_E;
        int target = w->spec.rungs[u[i].rung];
        t->state = u[i].has_result ? SL_TRIAL_DONE
                   : run[i]        ? SL_TRIAL_RUNNING
                   : last >= target && u[i].rung + 1 < w->spec.rung_count ? SL_TRIAL_PAUSED
                                                                         : SL_TRIAL_PENDING;
        if (u[i].has_result || run[i])
            continue;
        if (u[i].ckpt < target) {
            if (need < 3)
                tr(w, "N %zu rung %d ckpt %d claim %s/%llu%s", i, u[i].rung, u[i].ckpt,
                   u[i].claim.owner, (unsigned long long)u[i].claim.epoch,
                   u[i].claim.released ? " released" : "");
            need++;
            fresh += u[i].claim.epoch == 0;
        }
    }
    sl_sched_view_t sv = {.study_id = w->study_id, .capacity = 1, .trials = vt, .trial_count = c};
    for (size_t i = 0; i < c; i++)
        promotable += vt[i].state == SL_TRIAL_PAUSED &&
                      sl_sched_asha_promotes(&w->spec, &sv, vt[i].id, vt[i].rung, NULL, 0);
    tr(w, "I up %d busy %d idle %d need %d fresh %d promotable %d proposed %d", up, busy,
       up - busy, need, fresh, promotable, w->prop_count);
out:
    sl_free(u);
    sl_free(run);
    sl_free(vt);
    sl_free(cv);
}

static const char *spec_json(int trials, char *buf, size_t len) {
    snprintf(buf, len,
             "{\"name\": \"scale-asha\", \"trainer\": {\"type\": \"command\", \"command\": \"t {x}\"},"
             " \"search_space\": {\"x\": {\"type\": \"real\", \"low\": 0.0, \"high\": 1.0}},"
             " \"searcher\": {\"type\": \"random\"},"
             " \"scheduler\": {\"type\": \"asha\", \"min_epochs\": 1, \"max_epochs\": 9, \"reduction\": 3},"
             " \"objectives\": [{\"metric\": \"score\", \"goal\": \"max\"}],"
             " \"budget\": {\"trials\": %d}, \"concurrency\": 1, \"retries\": 0,"
             " \"checkpoint_every\": 1, \"lease_ms\": %d}",
             trials, LEASE_MS);
    return buf;
}

static void world_fini(world_t *w) {
    for (int p = 0; w->peers && p < w->n; p++) {
        sl_free(w->peers[p].rep);
        sl_free(w->peers[p].claimable);
    }
    sl_free(w->peers);
    sl_free(w->props);
    sl_free(w->vtrials);
    sl_free(w->curves);
    sl_free(w->map);
    sl_free(w->open);
    sl_free(w->double_since);
    for (int b = 0; b <= DELAY_STEPS; b++)
        sl_free(w->inflight[b].d);
    sl_study_members_fini(&w->members);
    sl_turn_out_fini(&w->out);
    if (w->trace)
        fclose(w->trace);
    w->trace = NULL;
}

/* One study on n peers: the makespan in w->finished_at (0: it did not
 * finish), a violation in w->violation. */
static void run(world_t *w, int n, int budget, uint64_t seed) {
    memset(w, 0, sizeof *w);
    w->n = n;
    w->budget = budget;
    sl_turn_out_init(&w->out);
    char json[1024], why[256];
    spec_json(budget, json, sizeof json);
    if (sl_study_spec_parse(json, strlen(json), &w->spec, why, sizeof why) != SL_OK) {
        violate(w, "spec: %s", why);
        return;
    }
    w->spec.seed = seed;
    sl_study_spec_id(&w->spec, w->study_id);
    sl_rng_seed(&w->rng, seed * 7919 + 3);
    const char *trace = getenv("SL_SCALE_TRACE");
    w->trace = trace ? fopen(trace, "w") : NULL;
    size_t T = (size_t)budget;
    w->peers = sl_calloc((size_t)n, sizeof *w->peers);
    w->props = sl_calloc(T, sizeof *w->props);
    w->vtrials = sl_calloc(T, sizeof *w->vtrials);
    w->curves = sl_calloc(T * MAX_E, sizeof *w->curves);
    w->map = sl_calloc(T, sizeof *w->map);
    w->open = sl_calloc(T, sizeof *w->open);
    w->double_since = sl_calloc(T, sizeof *w->double_since);
    if (!w->peers || !w->props || !w->vtrials || !w->curves || !w->map || !w->open ||
        !w->double_since || sl_study_members_reserve(&w->members, (size_t)n) != SL_OK) {
        violate(w, "test: out of memory");
        return;
    }
    const char *churn_env = getenv("SL_SCALE_CHURN"); /* "0": none (the bound without churn) */
    w->calm = churn_env && !strcmp(churn_env, "0");
    int churners = w->calm ? 0 : n / 4;
    for (int p = 0; p < n; p++) {
        peer_t *me = &w->peers[p];
        snprintf(me->id, sizeof me->id, "p%d", p);
        me->up = true;
        me->down_at = -DEAD_AFTER_MS;
        me->rep = sl_calloc(T, sizeof *me->rep);
        me->claimable = sl_calloc(T, sizeof *me->claimable);
        if (!me->rep || !me->claimable) {
            violate(w, "test: out of memory");
            return;
        }
        int k = p - (n - churners); /* the last quarter churn, staggered */
        if (k >= 0) {
            me->churns = true;
            me->back_at = (int64_t)CHURN_PERIOD_MS * (k + 1) / churners;
        }
    }
    for (w->now = 0; w->now < DEADLINE_MS && !w->violation[0]; w->now += STEP_MS) {
        churn(w);
        deliver(w);
        for (int p = 0; p < n && !w->violation[0]; p++)
            if (w->peers[p].up)
                turn(w, p);
        check_double(w);
        if (w->trace && w->now % 25 == 0)
            trace_idle(w);
        if (w->finished_at)
            break;
    }
    if (w->violation[0])
        return;
    if (!w->finished_at) {
        violate(w, "not finished by %d s", DEADLINE_MS / 1000);
        return;
    }
    /* no trial lost: the budget proposed, each with a result in the
       finishing leader's replica (the finished flag says all have one) */
    if (w->prop_count != budget)
        violate(w, "%d trials proposed for a budget of %d", w->prop_count, budget);
    int fin = -1;
    for (int p = 0; p < n && fin < 0; p++)
        if (w->peers[p].finished)
            fin = p;
    for (int i = 0; fin >= 0 && i < w->prop_count; i++) {
        const rt_t *r = &w->peers[fin].rep[i];
        if (!r->has_result || r->result.state != SL_TRIAL_DONE)
            violate(w, "trial %s lost: %s at the end", w->props[i].id,
                    r->has_result ? sl_trial_state_name(r->result.state) : "no result");
    }
}

static world_t W;

static int env_int(const char *name, int dflt) {
    const char *s = getenv(name);
    return s && atoi(s) > 0 ? atoi(s) : dflt;
}

static void test_asha_churn(void) {
    int n = env_int("SL_SCALE_PEERS", 32), budget = env_int("SL_SCALE_TRIALS", 150);
    uint64_t seed = (uint64_t)env_int("SL_SEED", 1);
    run(&W, n, budget, seed);
    CHECK_MSG(!W.violation[0], "%d peers, %d trials, seed %llu: %s", n, budget,
              (unsigned long long)seed, W.violation);
    /* the churn did happen, and took trials over */
    CHECK(W.kills > 0 || getenv("SL_SCALE_CHURN"));
    printf("{\"peers\": %d, \"trials\": %d, \"seed\": %llu, \"makespan_s\": %.3f, \"kills\": %d, "
           "\"false_suspicions\": %d, \"claims\": %d, \"takeovers\": %d, "
           "\"from_suspects\": %d, \"orphan_releases\": %d, "
           "\"owner_promotions\": %d, \"double_work_ms\": %lld, \"double_work_max_ms\": %lld}\n",
           n, budget, (unsigned long long)seed, W.finished_at / 1000.0, W.kills,
           W.false_suspicions, W.claims, W.takeovers, W.suspect_takeovers, W.releases,
           W.owner_promotions, (long long)W.double_ms, (long long)W.double_max_ms);
    const char *out = getenv("SL_SCALE_SCORES");
    FILE *f = out ? fopen(out, "w") : NULL;
    if (f) { /* the trials' scores in proposal order, for asha_bound.py --scores */
        for (int o = 0; o < W.prop_count; o++)
            for (int i = 0; i < W.prop_count; i++)
                if (W.props[i].ordinal == (uint64_t)o)
                    fprintf(f, "%.17g\n", W.props[i].q);
        fclose(f);
    }
    world_fini(&W);
}

int main(void) {
    sl_test_run("asha_churn", test_asha_churn);
    return sl_test_finish();
}
