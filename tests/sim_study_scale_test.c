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
 * continue_promoted), then sl_turn_jobs, sl_turn_lead, sl_turn_claims,
 * each on the view the real live view gives (src/study/live.c, fed the
 * keys and values the daemon writes). The store is the real one on the
 * simulated network (src/sim/sim_store.c): each peer holds an
 * sl_store_t (kept across a kill, as the daemon's is on disk), its
 * writes go through sl_store_put, and the writes of its turn leave after
 * it as one DELTA through the real spread policy (past 32 others: to
 * SL_SPREAD_FANOUT random members, each relaying what was new to it) and
 * take 5-20 ms a message; every 100 ms the real round core picks whom
 * each peer sends a DIGEST or SUMMARY. The keys a received DELTA changed
 * (sl_store_out_t.changed) go to the peer's live view, as study_view.c
 * feeds the daemon's. A peer restarted reads its store whole into a
 * fresh live view, catches up through the DIGESTs of the members that
 * hear it came back (and its own), and claims once its replica caught up
 * (sl_store_caught_up_ms) or CATCHUP_MS passed, as study_node.c's
 * may_claim. Until 2026-11-27 the store here was a model (last-writer-
 * wins keys, a trial's keys pushed to every peer after 1-4 steps, a
 * restarted peer merging a live peer's replica at once); the figures of
 * both are in bench/results/sim.md. Membership: a peer down is
 * suspect to the others SUSPECT_AFTER_MS after it went down (the turn may then take
 * its trial over), dead DEAD_AFTER_MS after, alive again when back; a
 * peer up is wrongly suspected for FALSE_SUSPECT_MS now and then (its
 * trial taken over, it must stop: the double-work check).
 *
 * Pauses and a partition, beside the kills: every PAUSE_EVERY_MS a peer
 * up that does not churn may be SIGSTOPped for 0.3-1.8 s (no turns, no
 * training, nothing sent; messages to it wait in sl_sim until it
 * resumes); and once, in mid-study (when as many epochs were trained as
 * there are trials), a random quarter of the fleet is cut off from the
 * rest for 1-2 s (messages across lost), then healed. Membership treats
 * silence alike: a peer not heard from (down, paused, across the cut) is
 * suspect after SUSPECT_AFTER_MS and dead after DEAD_AFTER_MS, when the
 * round cores drop it; on resuming or at the heal, those that said it
 * dead hear it is back (an urgent DIGEST). A paused peer does no work, so
 * the double-work check counts it only once it runs again (its job must
 * stop within DOUBLE_WORK_MS if its trial was taken over). Each side of
 * the partition takes the other's trials over, so a trial may run on both
 * sides while it lasts: such a stretch must end within DOUBLE_WORK_MS of
 * the heal. After the study the faults end (healed, every peer resumed or
 * restarted) and every replica must hold what peer 0's does (fingerprint
 * and state hash) within CONVERGE_MS. SL_SCALE_PAUSES=0 and
 * SL_SCALE_PARTITION=0 turn either off.
 *
 * The ctest run is small (32 peers, 150 trials). The benchmark of
 * bench/results/sim.md: SL_SCALE_PEERS=256 SL_SCALE_TRIALS=1000
 * SL_SCALE_SCORES=FILE (the trials' scores in proposal order, for
 * asha_bound.py --scores); SL_SEED=S another study; SL_SCALE_CHURN=0 no
 * kills, wrong suspicions, pauses or partition; SL_SCALE_TRACE=FILE the
 * events (S start, E epoch, K kill, B back, Z pause, C resume, Q
 * partition, H heal, ...) and, every 25 ms, the idle slots beside the
 * work there was for them (on every write made so far, joined in one
 * more store). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "starling/hash.h"
#include "starling/rng.h"
#include "starling/round.h"
#include "starling/study.h"
#include "study/live.h"
#include "study/study_keys.h"
#include "study/turn.h"
#include "sim/sim_store.h"
#include "sim_study.h"
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
#define STORE_CLOCK_MS 1000000 /* the stores' clock at virtual time 0 */
#define CATCHUP_MS 1000 /* a peer restarted claims once caught up, or after this (study_node.c) */
#define PAUSE_EVERY_MS 500 /* a peer up (not a churner) is SIGSTOPped this often ... */
#define PAUSE_MIN_MS 300   /* ... for 300 ms to 1.8 s (past DEAD_AFTER_MS now and then) */
#define PAUSE_SPAN_MS 1500
#define PART_MIN_MS 1000   /* the partition lasts 1-2 s */
#define PART_SPAN_MS 1000
#define CONVERGE_MS 10000  /* after the study, every replica agrees within this */


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

typedef struct world world_t;

typedef struct {
    char id[16];           /* "pN" */
    int index;             /* N */
    world_t *w;            /* its world (for the live view's questions) */
    bool up;               /* running */
    bool churns;           /* one of the quarter killed in turn */
    int64_t down_at;       /* when it last went down */
    int64_t back_at;       /* when it comes back (down) or next goes down (churner, up) */
    live_t live;           /* its live view (volatile: read whole after a restart) */
    sl_live_env_t env;     /* what the live view asks of it */
    job_t job;             /* its one slot */
    bool busy;             /* job in use */
    int64_t suspect_until; /* up, but suspect to the others until then (a slow peer) */
    uint64_t started_ms;   /* the store's clock when it last restarted (0: up from the start) */
    int64_t restarted_at;  /* when (virtual ms) */
    bool gone;             /* down, and the others' membership said so */
    int64_t paused_at;     /* SIGSTOPped at (while paused_until is set) */
    int64_t paused_until;  /* SIGSTOPped until then: no turns, no training, no messages out
                              (0: running) */
    bool faded;            /* paused, and the others' membership said it is dead */
    bool cut;              /* on the partition's small side */
} peer_t;

struct world {
    int n, budget;          /* peers, trials */
    sl_study_spec_t spec;   /* the study */
    char study_id[SL_TRIAL_ID_LEN + 1];
    peer_t *peers;          /* n */
    prop_t *props;          /* the proposals, by registry index */
    int prop_count;         /* used */
    int64_t now;            /* virtual ms */
    sl_rng_t rng;           /* faults */
    sl_simstore_t *net;     /* the peers' real stores on the simulated network
                               (src/sim/sim_store.h; a replica kept across a kill) */
    sl_store_t *all;        /* SL_SCALE_TRACE: every write made anywhere (the fleet's
                               writes joined, for trace_idle) */
    sl_study_members_t members;
    sl_turn_out_t out;
    /* measures and checks */
    char violation[256];
    int64_t finished_at;    /* the first finished flag */
    int64_t *double_since;  /* per trial: two peers on it since (0: not) */
    int64_t double_ms;      /* total time trials had two workers */
    int64_t double_max_ms;  /* longest such stretch */
    int kills, takeovers, releases, owner_promotions, claims;
    int suspect_takeovers, false_suspicions; /* trials taken from suspects; wrong suspicions */
    bool calm;              /* SL_SCALE_CHURN=0: no kills, no wrong suspicions, no pauses,
                               no partition */
    bool no_pauses, no_partition; /* SL_SCALE_PAUSES=0, SL_SCALE_PARTITION=0 */
    int epochs;             /* epochs trained (an ASHA study of B trials trains ~2.3 B) */
    int pauses, part_takeovers;   /* SIGSTOPs; trials taken over while the fleet was cut */
    int64_t part_double_ms;       /* double work in stretches the partition excuses */
    uint32_t *sides;        /* n: the partition's sides (1: the small one) */
    int64_t part_at, heal_at; /* the partition: from, to (part_at 0: not yet) */
    bool parted, part_dead; /* it is on; its sides have said each other dead */
    int64_t converge_ms;    /* after the study, until every replica agreed */
    FILE *trace;            /* SL_SCALE_TRACE: events and idle slots, for where time goes */
};

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

static bool paused(const peer_t *me) { return me->paused_until != 0; }

/* Since when peer p has heard nothing from q (INT64_MAX: it hears q): q
 * down, SIGSTOPped, or across the partition. */
static int64_t silent_since(const world_t *w, int p, int q) {
    const peer_t *o = &w->peers[q];
    int64_t since = !o->up ? o->down_at : paused(o) ? o->paused_at : INT64_MAX;
    if (w->parted && w->peers[p].cut != o->cut && w->part_at < since)
        since = w->part_at;
    return since;
}

static bool alive_in_view(const world_t *w, int p, int q) {
    int64_t since = silent_since(w, p, q);
    return p == q || since == INT64_MAX || w->now - since < DEAD_AFTER_MS;
}

/* Membership's SUSPECT (alive to the turn, but a probe went unanswered):
 * a peer silent (down, paused or cut off) for SUSPECT_AFTER_MS (the probe
 * timeout after its closed connection's hint, docs/membership.md), or
 * one up that is wrongly suspected for a while. */
static bool suspect_in_view(const world_t *w, int p, int q) {
    const peer_t *o = &w->peers[q];
    if (p == q || !alive_in_view(w, p, q))
        return false;
    int64_t since = silent_since(w, p, q);
    return (o->up && w->now < o->suspect_until) ||
           (since != INT64_MAX && w->now - since >= SUSPECT_AFTER_MS);
}

/* ---- the store: a real sl_store_t per peer on the simulator ---- */

static sl_store_t *store_of(const world_t *w, int p) {
    return sl_simstore_store(w->net, (uint32_t)p);
}

/* What a DELTA peer p received changed: its live view takes it, as the
 * store node's listener tells the daemon's. */
static void changed(void *ctx, uint32_t p, const sl_store_out_t *out) {
    world_t *w = ctx;
    sim_told_out(&w->peers[p].live, &w->spec, store_of(w, (int)p), out);
}

/* Membership as peer p sees q: whom p's DELTAs go to. */
static bool member_hook(void *ctx, uint32_t p, uint32_t q) {
    return alive_in_view(ctx, (int)p, (int)q);
}

/* Peer p writes `key` through the store's API as study_store.c does: its
 * live view takes it at once, and the DELTA goes out with the turn's
 * other writes (sl_simstore_push after its turn). */
static void put(world_t *w, int p, const char *key, const char *val, size_t vl) {
    peer_t *me = &w->peers[p];
    size_t kl = strlen(key);
    sl_store_msg_t d;
    sl_err err = sl_store_put(store_of(w, p), key, kl, val, vl, sl_simstore_clock(w->net), &d);
    if (!err && w->all) {
        sl_store_out_t out;
        sl_store_out_init(&out);
        err = sl_store_receive(w->all, d.type, d.body, d.len, sl_simstore_clock(w->net), &out,
                               &(bool){0});
        sl_store_out_fini(&out);
    }
    if (!err)
        err = sl_simstore_wrote(w->net, (uint32_t)p, &d);
    if (err) {
        violate(w, "store: %s cannot write: %s", me->id, sl_strerror(err));
        return;
    }
    sim_told(&me->live, &w->spec, store_of(w, p), (const uint8_t *)key, kl);
}

static void put_str(world_t *w, int p, const char *key, const char *val) {
    put(w, p, key, val, strlen(val));
}

/* The key of trial t (kind, n, peer as sl_study_key_build takes them). */
static const char *tkey(const world_t *w, sl_study_key_kind kind, int t, uint64_t n,
                        const char *peer) {
    return sim_key(w->study_id, kind, t >= 0 ? w->props[t].id : NULL, n, peer);
}

static void put_claim(world_t *w, int p, int t, const sl_claim_t *c) {
    char val[512];
    size_t len = sim_claim_val(c, val);
    put(w, p, tkey(w, SL_STUDY_KEY_CLAIM, t, 0, w->peers[p].id), val, len);
}

static void put_result(world_t *w, int p, int t, const sl_result_t *r) {
    char val[1024];
    size_t len = sim_result_val(r, val);
    put(w, p, tkey(w, SL_STUDY_KEY_RESULT, t, r->claim_epoch, r->writer), val, len);

}

/* ---- a peer's live view ---- */

static double metric(const world_t *w, int t, int e) { return w->props[t].q * e; }

/* What the live view asks: membership as peer `ctx` sees it, and its
 * job. */
static sl_live_member member_of(void *ctx, const char *name) {
    const peer_t *me = ctx;
    int q = peer_index(me->w, name);
    return sim_member(q, q >= 0 && alive_in_view(me->w, me->index, q),
                      q >= 0 && suspect_in_view(me->w, me->index, q));
}

static bool runs(void *ctx, const char *study, const char *trial) {
    (void)study;
    const peer_t *me = ctx;
    return me->busy && !strcmp(me->w->props[me->job.t].id, trial);
}

/* The daemon's sl_study_live_refresh: read whole after a restart, then
 * what changed and the open trials' states derived. */
static void refresh(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    sim_refresh(&me->live, store_of(w, p), w->study_id, &w->spec, &me->env, (uint64_t)w->now);
}

static trial_row_t *row_of(world_t *w, int p, int t) {
    return sl_study_live_find(&w->peers[p].live, w->props[t].id);
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
    live_t *lv = &me->live;
    job_t *j = &me->job;
    if (!me->busy || w->now < j->epoch_end)
        return;
    trial_row_t *r = row_of(w, p, j->t);
    if (!r)
        return;
    int rung = sl_study_live_rung(r), e = j->next_epoch;
    sl_report_t rep = {.epoch = e, .metric_count = 1};
    snprintf(rep.metrics[0].name, sizeof rep.metrics[0].name, "score");
    rep.metrics[0].value = metric(w, j->t, e);
    char line[SL_REPORT_LINE_MAX], man[64];
    size_t len;
    if (sl_report_encode(&rep, line, sizeof line, &len) == SL_OK)
        put(w, p, tkey(w, SL_STUDY_KEY_METRIC, j->t, (uint64_t)e, NULL), line, len);
    snprintf(man, sizeof man, "{\"epoch\":%d}", e); /* checkpoint_every 1 */
    put_str(w, p, tkey(w, SL_STUDY_KEY_CKPT, j->t, 0, NULL), man);
    sl_epoch_outcome out = sl_claim_after_epoch(&w->spec, rung, e, false, 0);
    tr(w, "E %d %s %d", j->t, me->id, e);
    w->epochs++;
    if (out == SL_EPOCH_CONTINUE) {
        j->next_epoch = e + 1;
        j->epoch_end = w->now + EPOCH_MS;
        return;
    }
    if (out == SL_EPOCH_DONE) {
        sl_result_t res;
        memset(&res, 0, sizeof res);
        memcpy(res.trial_id, w->props[j->t].id, sizeof res.trial_id);
        res.state = SL_TRIAL_DONE;
        res.epochs = e;
        res.claim_epoch = j->epoch;
        snprintf(res.writer, sizeof res.writer, "%s", me->id);
        snprintf(res.reason, sizeof res.reason, "completed");
        put_result(w, p, j->t, &res);
        me->busy = false;
        tr(w, "D %d %s", j->t, me->id);
        return;
    }
    /* paused at its rung: its owner promotes it and trains on when its
       view lets ASHA promote it (continue_promoted) */
    refresh(w, p);
    r = row_of(w, p, j->t);
    sl_sched_view_t sv = {.study_id = w->study_id, .capacity = 1, .trials = lv->trials,
                          .trial_count = lv->trial_count};
    sl_claim_t cur;
    bool has = sl_study_live_claim(r, &cur);
    if (!lv->finished && !r->stop && !r->has_result && has &&
        !sl_claim_must_stop(&cur, me->id, j->epoch) &&
        sl_sched_asha_promotes(&w->spec, &sv, w->props[j->t].id, rung, NULL, 0)) {
        put_str(w, p, tkey(w, SL_STUDY_KEY_RUNG, j->t, (uint64_t)rung + 1, NULL),
                "promoted (by its owner)");
        w->owner_promotions++;
        tr(w, "P %d %s %d", j->t, me->id, rung + 1);
        j->next_epoch = e + 1;
        j->epoch_end = w->now + EPOCH_MS;
        return;
    }
    sl_claim_t rel;
    if (has && sl_claim_release(&cur, me->id, j->epoch, &rel) == SL_OK)
        put_claim(w, p, j->t, &rel);
    me->busy = false;
    tr(w, "R %d %s %d", j->t, me->id, rung);
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
            put_claim(w, p, t, &a->claim);
            w->releases += a->why == SL_TURN_CLAIM_ORPHAN;
            break;
        case SL_TURN_WRITE_RECORD: {
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
            char val[SL_STUDY_RECORD_MAX];
            size_t len;
            if (sl_trial_record_encode(&w->spec, &a->trial, val, sizeof val, &len) == SL_OK)
                put(w, p, tkey(w, SL_STUDY_KEY_RECORD, t, 0, NULL), val, len);
            break;
        }
        case SL_TURN_WRITE_RUNG:
            if (t >= 0 && row_of(w, p, t) && a->rung > sl_study_live_rung(row_of(w, p, t))) {
                tr(w, "L %d %s %d", t, me->id, a->rung);
                put_str(w, p, tkey(w, SL_STUDY_KEY_RUNG, t, (uint64_t)a->rung, NULL),
                        a->reason);
            }
            break;
        case SL_TURN_WRITE_STOP:
            if (t >= 0) {
                put_str(w, p, tkey(w, SL_STUDY_KEY_STOP, t, 0, NULL), a->reason);
            }
            break;
        case SL_TURN_WRITE_RESULT:
            if (t >= 0) {
                put_result(w, p, t, &a->result);
            }
            break;
        case SL_TURN_WRITE_FINISHED:
            put_str(w, p, tkey(w, SL_STUDY_KEY_FINISHED, -1, 0, NULL), a->reason);
            if (!w->finished_at)
                w->finished_at = w->now;
            break;
        case SL_TURN_JOB_START: {
            trial_row_t *r = t >= 0 ? row_of(w, p, t) : NULL;
            if (!r || me->busy) {
                violate(w, "%s starts a second job", me->id);
                break;
            }
            w->claims++;
            w->takeovers += a->claim.epoch > 1;
            w->part_takeovers += a->claim.epoch > 1 && w->parted;
            w->suspect_takeovers += !strcmp(a->reason, "taken over from a suspect owner");
            me->busy = true;
            me->job = (job_t){.t = t, .epoch = a->claim.epoch, .next_epoch = r->ck_epoch + 1,
                              .epoch_end = w->now + EPOCH_MS,
                              .renew_ms = (uint64_t)w->now + w->spec.lease_ms / 3};
            tr(w, "S %d %s %llu rung %d from %d since %llu: %s", t, me->id,
               (unsigned long long)a->claim.epoch, a->trial.rung, r->ck_epoch,
               (unsigned long long)a->at_ms, a->reason);
            break;
        }
        case SL_TURN_JOB_LOST:
        case SL_TURN_JOB_END:
            tr(w, "%c %d %s", a->kind == SL_TURN_JOB_LOST ? 'X' : 'Y', me->job.t, me->id);
            me->busy = false;
            break;
        case SL_TURN_JOB_RENEW_AT: me->job.renew_ms = a->at_ms; break;
        }
    }
}

/* study_node.c's may_claim: a peer restarted claims once its replica
 * caught up (it held all that a DIGEST or SUMMARY received since its
 * restart said the sender held), or CATCHUP_MS after it. */
static bool may_claim(const world_t *w, int p) {
    const peer_t *me = &w->peers[p];
    return !me->started_ms || sl_store_caught_up_ms(store_of(w, p)) >= me->started_ms ||
           w->now >= me->restarted_at + CATCHUP_MS;
}

/* The turn core's view from peer p's live view, derived again. */
static bool view(world_t *w, int p, sl_turn_view_t *v) {
    peer_t *me = &w->peers[p];
    refresh(w, p);
    if (sl_study_live_turn_view(&me->live, w->study_id, &w->spec, &me->env, v) == SL_OK)
        return true;
    violate(w, "turn: no view");
    return false;
}

static void turn(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    live_t *lv = &me->live;
    uint64_t now = (uint64_t)w->now;
    bool busy0 = me->busy;
    work(w, p); /* (the keys of its trial as they are: no derive needed) */
    sl_turn_view_t v;
    if (!view(w, p, &v))
        return;
    if (me->busy) {
        sl_turn_job_t tj = {.trial_id = w->props[me->job.t].id, .epoch = me->job.epoch,
                            .renew_ms = me->job.renew_ms, .last_epoch = me->job.next_epoch - 1};
        sl_study_live_turn_job(lv, tj.trial_id, &tj);
        sl_turn_out_clear(&w->out);
        if (sl_turn_jobs(&v, &tj, 1, me->id, now, &w->out) != SL_OK) {
            violate(w, "turn: jobs phase failed");
            return;
        }
        apply(w, p, &w->out);
        if (w->out.count && !view(w, p, &v))
            return;
    }
    if (lv->finished)
        return;
    build_members(w, p);
    sl_turn_members_load(&v, &w->members, me->id, me->busy);
    sl_turn_out_clear(&w->out);
    if (sl_turn_lead(&v, &w->members, me->id, now, &w->out) != SL_OK) {
        violate(w, "turn: lead phase failed");
        return;
    }
    apply(w, p, &w->out);
    /* its job ended this turn and another leads: its result may have been
       the study's last (sl_turn_finish, as the daemon asks it) */
    if (!w->out.led && busy0 && !me->busy) {
        sl_turn_out_clear(&w->out);
        if (sl_turn_finish(&v, me->id, &w->out) != SL_OK) {
            violate(w, "turn: finish failed");
            return;
        }
        apply(w, p, &w->out);
    }
    if (lv->finished)
        return;
    if (w->out.count && !view(w, p, &v))
        return;
    sl_turn_out_clear(&w->out);
    if (sl_turn_claims(&v, &w->members, me->id, now, may_claim(w, p), &w->out) != SL_OK) {
        violate(w, "turn: claims phase failed");
        return;
    }
    apply(w, p, &w->out);
}

/* ---- churn ---- */

/* Peer p back on its replica: every member hears it came back, and their
 * DIGESTs (and its own) bring what it missed. */
static void bring_back(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    tr(w, "B -1 %s", me->id);
    me->up = true;
    me->gone = false;
    me->back_at = w->now + CHURN_PERIOD_MS;
    me->restarted_at = w->now;
    me->started_ms = sl_simstore_clock(w->net);
    if (sl_simstore_restart(w->net, (uint32_t)p) != SL_OK)
        violate(w, "store: %s cannot restart", me->id);
}

/* SIGCONT: what waited for peer p arrives; the members that said it dead
 * hear it is back (an urgent DIGEST), as SWIM's refutation makes it. */
static void resume(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    tr(w, "C %d %s", me->busy ? me->job.t : -1, me->id);
    me->paused_until = 0;
    sl_sim_pause(sl_simstore_sim(w->net), (uint32_t)p, false);
    if (me->faded)
        for (int q = 0; q < w->n; q++)
            if (q != p && alive_in_view(w, q, p))
                sl_simstore_back(w->net, (uint32_t)q, (uint32_t)p);
    me->faded = false;
}

/* SIGSTOP now and then: a peer up (not a churner) for 0.3-1.8 s neither
 * trains nor takes turns nor sends; messages to it wait (sl_sim_pause).
 * The others suspect it, take its trial over and, past DEAD_AFTER_MS,
 * say it dead; when it carries on, its job must stop (the double-work
 * check). */
static void pauses(world_t *w) {
    for (int p = 0; p < w->n; p++) {
        peer_t *me = &w->peers[p];
        if (!paused(me))
            continue;
        if (w->now >= me->paused_until) {
            resume(w, p);
            continue;
        }
        if (me->busy) /* frozen: its epoch does not advance */
            me->job.epoch_end += STEP_MS;
        if (!me->faded && w->now - me->paused_at >= DEAD_AFTER_MS) {
            me->faded = true;
            for (int q = 0; q < w->n; q++)
                sl_simstore_set_up(w->net, (uint32_t)q, (uint32_t)p, false);
        }
    }
    if (w->calm || w->no_pauses || w->now == 0 || w->now % PAUSE_EVERY_MS != PAUSE_EVERY_MS / 2)
        return;
    int q = (int)sl_rng_below(&w->rng, (uint64_t)w->n);
    peer_t *o = &w->peers[q];
    if (!o->up || o->churns || paused(o))
        return;
    o->paused_at = w->now;
    o->paused_until = w->now + PAUSE_MIN_MS + (int64_t)sl_rng_below(&w->rng, PAUSE_SPAN_MS + 1);
    sl_sim_pause(sl_simstore_sim(w->net), (uint32_t)q, true);
    w->pauses++;
    tr(w, "Z %d %s %" PRId64, o->busy ? o->job.t : -1, o->id, o->paused_until - w->now);
}

/* Every round core on one side of the partition hears the other side's
 * members go (dead) or come back (healed). */
static void across(world_t *w, bool up) {
    for (int p = 0; p < w->n; p++)
        for (int q = 0; q < w->n; q++) {
            if (w->peers[p].cut == w->peers[q].cut)
                continue;
            if (!up)
                sl_simstore_set_up(w->net, (uint32_t)p, (uint32_t)q, false);
            else if (w->peers[q].up && !w->peers[q].faded && alive_in_view(w, p, q))
                sl_simstore_back(w->net, (uint32_t)p, (uint32_t)q);
        }
}

/* One partition in mid-study (once as many epochs were trained as the
 * budget has trials, some 40 % of the work): a random quarter of
 * the fleet cut off from the rest for 1-2 s (messages across are lost),
 * then healed. Each side suspects the other, takes its trials over and
 * says it dead, as for peers down. */
static void partition(world_t *w) {
    sl_sim_t *sim = sl_simstore_sim(w->net);
    if (w->parted && w->now >= w->heal_at) {
        w->parted = false;
        sl_sim_partition(sim, NULL);
        across(w, true);
        tr(w, "H -1 -");
        return;
    }
    if (w->parted && !w->part_dead && w->now - w->part_at >= DEAD_AFTER_MS) {
        w->part_dead = true;
        across(w, false);
    }
    if (w->calm || w->no_partition || w->part_at || w->epochs < w->budget)
        return;
    for (int p = 0; p < w->n; p++)
        w->sides[p] = w->peers[p].cut = sl_rng_below(&w->rng, 4) == 0;
    w->part_at = w->now;
    w->heal_at = w->now + PART_MIN_MS + (int64_t)sl_rng_below(&w->rng, PART_SPAN_MS + 1);
    w->parted = true;
    if (sl_sim_partition(sim, w->sides) != SL_OK)
        violate(w, "sim: no partition");
    tr(w, "Q -1 - %" PRId64, w->heal_at - w->now);
}

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
            sl_simstore_crash(w->net, (uint32_t)p); /* its round core and unsent writes too */
            sl_study_live_fini(&me->live); /* (volatile: read whole when it is back) */
            me->live.stale = true;
            w->kills++;
        } else {
            bring_back(w, p);
        }
    }
    pauses(w);
    partition(w);
    /* a peer down DEAD_AFTER_MS is dead to every other: no round
       candidate any more */
    for (int p = 0; p < w->n; p++) {
        peer_t *me = &w->peers[p];
        if (me->up || me->gone || w->now - me->down_at < DEAD_AFTER_MS)
            continue;
        me->gone = true;
        for (int q = 0; q < w->n; q++)
            sl_simstore_set_up(w->net, (uint32_t)q, (uint32_t)p, false);
    }
}

static void check_double(world_t *w) {
    int *workers = sl_calloc((size_t)w->prop_count + 1, sizeof *workers);
    if (!workers)
        return;
    for (int p = 0; p < w->n; p++) /* (a peer paused does no work) */
        if (w->peers[p].up && !paused(&w->peers[p]) && w->peers[p].busy)
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
        /* the partition's sides may each run a trial: that ends within
           DOUBLE_WORK_MS of the heal */
        int64_t until = w->double_since[i] + DOUBLE_WORK_MS;
        if (w->part_at && w->now >= w->part_at && w->double_since[i] <= w->heal_at) {
            w->part_double_ms += STEP_MS;
            if (w->heal_at + DOUBLE_WORK_MS > until)
                until = w->heal_at + DOUBLE_WORK_MS;
        }
        if (w->now + STEP_MS > until)
            violate(w, "%d peers run trial %s at once for %" PRId64 " ms", workers[i],
                    w->props[i].id, len);
    }
    sl_free(workers);
}

static sl_live_member all_alive(void *ctx, const char *name) {
    (void)ctx;
    (void)name;
    return SL_LIVE_ALIVE;
}

static bool runs_none(void *ctx, const char *study, const char *trial) {
    (void)ctx;
    (void)study;
    (void)trial;
    return false;
}

/* The idle slots and the work there is for them, as the whole fleet's
 * writes joined show it: trials with epochs to train that no peer up
 * runs (fresh, promoted or interrupted) and paused trials ASHA would
 * promote on that joined view. */
static void trace_idle(world_t *w) {
    int up = 0, busy = 0, need = 0, fresh = 0, promotable = 0;
    size_t T = (size_t)w->prop_count;
    live_t lv = {0};
    bool *run = sl_calloc(T + 1, sizeof *run);
    if (!run)
        return;
    for (int p = 0; p < w->n; p++) {
        const peer_t *me = &w->peers[p];
        if (!me->up)
            continue;
        up++;
        busy += me->busy;
        if (me->busy)
            run[me->job.t] = true;
    }
    sim_scan_t scan = {&lv, &w->spec};
    sl_store_scan(w->all, "", 0, sim_scan_key, &scan);
    sl_live_env_t env = {.self = "", .member = all_alive, .runs = runs_none};
    sl_study_live_derive(&lv, w->study_id, &w->spec, &env, (uint64_t)w->now);
    for (int i = 0; i < w->prop_count; i++) { /* (in proposal order) */
        const trial_row_t *r = sl_study_live_find(&lv, w->props[i].id);
        sl_trial_t *t = r ? sl_study_live_trial(&lv, r) : NULL;
        if (!t)
            continue;
        int target = w->spec.rungs[t->rung];
        t->state = r->has_result ? SL_TRIAL_DONE
                   : run[i]      ? SL_TRIAL_RUNNING
                   : t->epochs_done >= target && t->rung + 1 < w->spec.rung_count ? SL_TRIAL_PAUSED
                                                                                  : SL_TRIAL_PENDING;
        if (r->has_result || run[i])
            continue;
        if (r->ck_epoch < target) {
            if (need < 3)
                tr(w, "N %d rung %d ckpt %d claim %s/%llu%s", i, t->rung, r->ck_epoch,
                   r->claim.owner, (unsigned long long)r->claim.epoch,
                   r->claim.released ? " released" : "");
            need++;
            fresh += r->claim.epoch == 0;
        }
    }
    sl_sched_view_t sv = {.study_id = w->study_id, .capacity = 1, .trials = lv.trials,
                          .trial_count = lv.trial_count};
    for (size_t c = 0; c < lv.trial_count; c++)
        promotable += lv.trials[c].state == SL_TRIAL_PAUSED &&
                      sl_sched_asha_promotes(&w->spec, &sv, lv.trials[c].id, lv.trials[c].rung,
                                             NULL, 0);
    tr(w, "I up %d busy %d idle %d need %d fresh %d promotable %d proposed %d", up, busy,
       up - busy, need, fresh, promotable, w->prop_count);
    sl_free(run);
    sl_study_live_fini(&lv);
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
    for (int p = 0; w->peers && p < w->n; p++)
        sl_study_live_fini(&w->peers[p].live);
    sl_free(w->peers);
    sl_free(w->props);
    sl_free(w->double_since);
    sl_free(w->sides);
    sl_simstore_destroy(&w->net);
    sl_store_destroy(&w->all);
    sl_study_members_fini(&w->members);
    sl_turn_out_fini(&w->out);
    if (w->trace)
        fclose(w->trace);
    w->trace = NULL;
}

/* After the study: the faults end (the partition healed, every peer
 * resumed or restarted) and, with no more writes, every replica holds
 * what peer 0's does (fingerprint and state hash) within CONVERGE_MS. */
static void converge(world_t *w) {
    int64_t end = w->now;
    if (w->parted) {
        w->heal_at = w->now;
        partition(w);
    }
    for (int p = 0; p < w->n; p++) {
        if (paused(&w->peers[p]))
            resume(w, p);
        else if (!w->peers[p].up)
            bring_back(w, p);
    }
    for (; w->now <= end + CONVERGE_MS; w->now += 100) {
        if (sl_simstore_run_until(w->net, w->now) != SL_OK) {
            violate(w, "store: a message was refused after the study");
            return;
        }
        uint64_t fp = sl_store_fingerprint(store_of(w, 0));
        int p = 1;
        while (p < w->n && sl_store_fingerprint(store_of(w, p)) == fp)
            p++;
        if (p < w->n)
            continue;
        uint64_t h = sl_store_state_hash(store_of(w, 0));
        for (p = 1; p < w->n; p++)
            if (sl_store_state_hash(store_of(w, p)) != h)
                violate(w, "replicas of p0 and %s: one fingerprint, two states", w->peers[p].id);
        w->converge_ms = w->now - end;
        return;
    }
    violate(w, "replicas still differ %d s after the study", CONVERGE_MS / 1000);
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
    w->double_since = sl_calloc(T, sizeof *w->double_since);
    w->sides = sl_calloc((size_t)n, sizeof *w->sides);
    if (!w->peers || !w->props || !w->double_since || !w->sides ||
        sl_study_members_reserve(&w->members, (size_t)n) != SL_OK) {
        violate(w, "test: out of memory");
        return;
    }
    const char *churn_env = getenv("SL_SCALE_CHURN"); /* "0": none (the bound without churn) */
    w->calm = churn_env && !strcmp(churn_env, "0");
    const char *pause_env = getenv("SL_SCALE_PAUSES"), *part_env = getenv("SL_SCALE_PARTITION");
    w->no_pauses = pause_env && !strcmp(pause_env, "0");
    w->no_partition = part_env && !strcmp(part_env, "0");
    int churners = w->calm ? 0 : n / 4;
    for (int p = 0; p < n; p++) {
        peer_t *me = &w->peers[p];
        snprintf(me->id, sizeof me->id, "p%d", p);
        me->index = p;
        me->w = w;
        me->up = true;
        me->down_at = -DEAD_AFTER_MS;
        me->env = (sl_live_env_t){.self = me->id, .member = member_of, .runs = runs, .ctx = me};
        int k = p - (n - churners); /* the last quarter churn, staggered */
        if (k >= 0) {
            me->churns = true;
            me->back_at = (int64_t)CHURN_PERIOD_MS * (k + 1) / churners;
        }
    }
    /* the stores: a write to every alive member up to SL_SPREAD_PUSH_ALL
       others, rumor past that; 5-20 ms a message (the model's 1-4 steps);
       the rounds' default timers */
    sl_simstore_config_t nc = {.nodes = (uint32_t)n, .seed = seed, .clock_ms = STORE_CLOCK_MS,
                               .net = {.delay_min_ms = 5, .delay_max_ms = 20},
                               .list_changed = true,
                               .hooks = {.changed = changed, .member = member_hook, .ctx = w}};
    sl_store_config_t all_cfg = {0};
    if (sl_simstore_new(&nc, &w->net) != SL_OK ||
        (w->trace && sl_store_new((uint64_t)n + 1, &all_cfg, &w->all) != SL_OK)) {
        violate(w, "store: no stores");
        return;
    }
    for (w->now = 0; w->now < DEADLINE_MS && !w->violation[0]; w->now += STEP_MS) {
        churn(w);
        sl_err err = sl_simstore_run_until(w->net, w->now); /* the messages due, the rounds */
        if (err != SL_OK)
            violate(w, "store: a message was refused: %s", sl_strerror(err));
        for (int p = 0; p < n && !w->violation[0]; p++)
            if (w->peers[p].up && !paused(&w->peers[p])) {
                turn(w, p);
                sl_simstore_push(w->net, (uint32_t)p); /* the turn's writes, one DELTA */
            }
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
    converge(w);
    /* no trial lost: the budget proposed, each with a result in the
       finishing leader's live view (the finished flag says all have one) */
    if (w->prop_count != budget)
        violate(w, "%d trials proposed for a budget of %d", w->prop_count, budget);
    int fin = -1;
    for (int p = 0; p < n && fin < 0; p++)
        if (w->peers[p].up && w->peers[p].live.finished)
            fin = p;
    if (fin >= 0)
        refresh(w, fin);
    for (int i = 0; fin >= 0 && i < w->prop_count; i++) {
        const trial_row_t *r = row_of(w, fin, i);
        if (!r || !r->has_result || r->result.state != SL_TRIAL_DONE)
            violate(w, "trial %s lost: %s at the end", w->props[i].id,
                    r && r->has_result ? sl_trial_state_name(r->result.state) : "no result");
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
    CHECK(W.pauses > 0 || W.calm || W.no_pauses);
    CHECK(W.part_at > 0 || W.calm || W.no_partition);
    sl_store_stats_t st; /* one replica's size (peer 0's) */
    sl_store_stats(sl_simstore_store(W.net, 0), &st);
    sl_simstore_counts_t sum = {0};
    for (int p = 0; p < n; p++) {
        sl_simstore_counts_t c;
        sl_simstore_counts(W.net, (uint32_t)p, &c);
        sum.pushed += c.pushed;
        sum.relayed += c.relayed;
        sum.ae_sent += c.ae_sent;
    }
    printf("{\"peers\": %d, \"trials\": %d, \"seed\": %llu, \"makespan_s\": %.3f, \"kills\": %d, "
           "\"false_suspicions\": %d, \"pauses\": %d, \"partition_s\": %.3f, "
           "\"partition_takeovers\": %d, \"partition_double_work_ms\": %lld, "
           "\"converge_ms\": %lld, \"claims\": %d, \"takeovers\": %d, "
           "\"from_suspects\": %d, \"orphan_releases\": %d, "
           "\"owner_promotions\": %d, \"double_work_ms\": %lld, \"double_work_max_ms\": %lld, "
           "\"deltas_pushed\": %llu, \"deltas_relayed\": %llu, \"anti_entropy_msgs\": %llu, "
           "\"store_keys\": %llu, \"store_mib\": %.1f}\n",
           n, budget, (unsigned long long)seed, W.finished_at / 1000.0, W.kills,
           W.false_suspicions, W.pauses, W.part_at ? (W.heal_at - W.part_at) / 1000.0 : 0.0,
           W.part_takeovers, (long long)W.part_double_ms, (long long)W.converge_ms, W.claims,
           W.takeovers, W.suspect_takeovers, W.releases,
           W.owner_promotions, (long long)W.double_ms, (long long)W.double_max_ms,
           (unsigned long long)sum.pushed, (unsigned long long)sum.relayed,
           (unsigned long long)sum.ae_sent, (unsigned long long)st.keys,
           (double)st.mem_bytes / (1 << 20));
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
