/* A study on a simulated fleet: N peers run the real study turn
 * (src/study/turn.c: the daemon's decisions, leadership, the scheduler's
 * writes, claims, renewals, releases) over the real live view
 * (src/study/live.c: a study's keys in, each trial's parts, its claim
 * join, merged result, rung, metrics and state out) and the cores they
 * call (spec, searcher, scheduler, rounds, claims, the key and value
 * codecs), on a virtual clock, with simulated training time, under random
 * kills (the round leader among them, and a peer killed between its
 * trial's last report and its result), pauses (SIGSTOP: a peer neither
 * trains nor talks, then carries on), restarts and partitions, over many
 * seeds. Each peer takes a turn every step as the daemon does
 * (study_node.c's study_turn): its live view refreshed, its workers'
 * reports, then sl_turn_jobs, sl_turn_lead and sl_turn_claims, each on
 * the view the live view gives (sl_study_live_turn_view, _turn_job), the
 * actions of each carried out as store writes before the next. The
 * workers (training, a report per epoch, the checkpoint, the result, the
 * release at a rung) are simulated here, and write the keys study_node.c's
 * drain_job writes.
 *
 * The store is the real one (src/store/) on the simulated network of
 * src/sim/sim_store.c: every peer holds an sl_store_t in memory
 * (study_keys.c's keys, with the values the daemon writes: records,
 * claim registers, reports, results, ...), kept across a kill as the
 * daemon's is on disk (same replica id: no RESET asked). Writes go
 * through sl_store_put and sl_store_del; a peer's writes of one turn
 * leave after it as one DELTA to every member it deems alive (the spread
 * policy below 33 members), 1-20 ms a message, LOSS_PCT of all messages
 * lost while faults are on, none across a partition, held while the
 * receiver is paused; every 100 ms each peer's round core (the daemon's,
 * src/store/store_round.c) picks whom it sends a DIGEST or SUMMARY, and
 * the answers go back as store_node.c's on_msg sends them, deltas held
 * past a gap received once it fills. A peer restarted meets the others
 * as joining and they hear it came back (DIGESTs both ways). Every key a
 * write or a received DELTA changes (the core's report,
 * sl_store_out_t.changed: no second decode) goes to that peer's live
 * view, as the store node's listener tells the daemon's; a peer
 * restarted reads its store whole into a fresh live view (a scan), as
 * after a RESET. Once the study is done and quiet, every replica must
 * hold what peer 0's does (state hash and fingerprint) within
 * CONVERGE_MS of rounds. (Until 2026-11-27 the anti-entropy here was a
 * direct SUMMARY/DIGEST exchange run to its end at once, and each DELTA
 * arrived at the next step.)
 *
 * What is still modelled: membership. A peer deems another alive while
 * it has heard from it in the last 1.5 s, suspect after 400 ms.
 *
 * Checked (INVARIANTS.md): T1 every trial ends done or failed, none left
 * running; T2 every metric reported is in the final store; T3 claim
 * epochs only grow in every live view, a worker never keeps working once
 * its view shows a higher epoch, and when quiet at most one peer works on
 * a trial; T4 every promotion is justified by the leader's view when
 * made, and a synchronous scheduler (sh) ends exactly as its fault-free
 * run; T5 the study finishes once quiet; R1 two peers with the same view
 * never both lead a round (who leads is the turn's answer); R2 every
 * proposal slot holds exactly one trial and the budget is met, across
 * leader changes. Each checker has a planted bug (a test-only switch,
 * planted in what the test gives the turn or in how it carries out the
 * turn's actions) and a test that shows it firing. The test used to run
 * a model of the turn (its own lead, take_claims and derive_state), then
 * a model of the live view (each trial's state from a replica of joins);
 * the model paused a Hyperband trial of bracket 1 or above at its rung
 * where the real rule left it pending for ever, a bug this test found
 * once it ran the real turn; and once its peers could be killed between
 * a trial's last report and its result, it found such a trial left for
 * ever (neither claimable nor paused), which the leader now closes.
 *
 * A failing seed is printed (SL_VERBOSE=1: the trials as peer 0 sees them
 * when a study does not finish); SL_SEEDS=N runs N seeds of ASHA (the
 * synchronous schedulers a half or a third of N; default 150: 75 sh, 50
 * each of Hyperband, grid and evolution; seeds 1 up); SL_SEED=S one. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

#include "starling/hash.h"
#include "starling/round.h"
#include "starling/store.h"
#include "starling/study.h"
#include "study/live.h"
#include "study/study_keys.h"
#include "study/turn.h"
#include "sim/sim_store.h"
#include "sim_study.h"
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
#define LOSS_PCT 10          /* of pushed DELTAs lost while faults are on */
#define EPOCH_MS 1000000     /* the stores' clock at the world's time 0 */
#define CONVERGE_MS 10000    /* once finished, the replicas agree within this */

/* Planted bugs, one per checker. */
typedef enum {
    BUG_NONE = 0,
    BUG_T1_SKIP_STOPS,     /* leader drops STOP decisions but still finishes */
    BUG_T2_METRICS_BY_CLAIM, /* a new claim starts the trial's metrics anew (deletes them) */
    BUG_T3_IGNORE_EPOCH,   /* workers ignore a higher claim epoch */
    BUG_T3_SAME_EPOCH,     /* workers ignore losing their epoch to another owner */
    BUG_T4_EXTRA_PROMOTION, /* leader promotes one extra paused trial */
    BUG_T5_NO_TAKEOVER,    /* a dead owner's or lapsed claim is never taken, nor released
                              by its owner restarted */
    BUG_R1_MEMBER_CAP,     /* a peer gives the turn its first PEERS-1 members in its own
                              order (the 64-member cap that was): leaders differ */
    BUG_R2_ORDINAL_SKEW    /* proposal ordinals depend on the leader */
} bug_t;

/* The content of a proposal (immutable, content-addressed): what the
 * simulated training reads. */
typedef struct {
    char id[SL_TRIAL_ID_LEN + 1]; /* trial id */
    uint64_t ordinal;             /* proposal slot */
    sl_config_t config;           /* configuration */
} prop_t;

/* A trial a peer is training. */
typedef struct {
    int t;             /* registry index */
    uint64_t epoch;    /* claim epoch held */
    int next_epoch;    /* epoch being trained */
    int64_t epoch_end; /* when it finishes */
    uint64_t renew_ms; /* next lease renewal (the turn's) */
} job_t;

typedef struct world world_t;

typedef struct {
    char id[16];                 /* "peer-N" */
    int index;                   /* N */
    world_t *w;                  /* its world (for the live view's questions) */
    bool up;                     /* running */
    int64_t paused_until;        /* SIGSTOPped until then: no steps, no messages */
    int64_t down_until;          /* restart time when down */
    live_t live;                 /* its live view (volatile: read whole after a restart) */
    sl_live_env_t env;           /* what the live view asks of it */
    job_t jobs[2];               /* running trials (volatile) */
    int job_count;               /* used */
    int64_t heard[PEERS];        /* last time it heard from each peer */
    uint64_t last_epoch[MAX_T];  /* T3: claim epochs only grow in this view */
} peer_t;

struct world {
    uint64_t seed;
    bug_t bug;
    bool faults;
    sl_study_spec_t spec;
    char study_id[SL_TRIAL_ID_LEN + 1];
    int concurrency;
    prop_t props[MAX_T];  /* registry of proposals */
    int prop_count;
    peer_t peers[PEERS];
    sl_simstore_t *net;   /* the peers' real stores on the simulated network
                             (src/sim/sim_store.h; a replica kept across a kill:
                             the daemon's is on disk) */
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

/* ---- the store: a real sl_store_t per peer on the simulator ---- */

static sl_store_t *store_of(const world_t *w, int p) {
    return sl_simstore_store(w->net, (uint32_t)p);
}

/* What a DELTA peer p received changed: its live view takes it, as the
 * store node's listener tells the daemon's (no second decode: the store
 * reports the keys). */
static void changed(void *ctx, uint32_t p, const sl_store_out_t *out) {
    world_t *w = ctx;
    sim_told_out(&w->peers[p].live, &w->spec, store_of(w, (int)p), out);
}

/* Peer p writes `key` (val NULL: deletes it), through the store's API as
 * study_store.c does; its live view takes it at once, and the DELTA goes
 * out with the turn's other writes (sl_simstore_push). */
static void put(world_t *w, int p, const char *key, const char *val, size_t vl) {
    peer_t *me = &w->peers[p];
    size_t kl = strlen(key);
    sl_store_msg_t d;
    uint64_t now = sl_simstore_clock(w->net);
    sl_err err = val ? sl_store_put(store_of(w, p), key, kl, val, vl, now, &d)
                     : sl_store_del(store_of(w, p), key, kl, now, &d);
    if (err == SL_ENOTFOUND)
        return; /* (a delete of what is gone) */
    if (err == SL_OK)
        err = sl_simstore_wrote(w->net, (uint32_t)p, &d);
    if (err != SL_OK) {
        violate(w, "store: %s cannot write: %s", me->id, sl_strerror(err));
        return;
    }
    sim_told(&me->live, &w->spec, store_of(w, p), (const uint8_t *)key, kl);
}

/* Whether peer p's replica holds `key` (live). */
static bool has_key(const world_t *w, int p, const char *key) {
    sl_store_entry_t e;
    return sl_store_lookup(store_of(w, p), key, strlen(key), &e) == SL_OK;
}

/* The key of trial t (kind, n, peer as sl_study_key_build takes them). */
static const char *tkey(const world_t *w, sl_study_key_kind kind, int t, uint64_t n,
                        const char *peer) {
    return sim_key(w->study_id, kind, t >= 0 ? w->props[t].id : NULL, n, peer);
}

static void put_str(world_t *w, int p, const char *key, const char *val) {
    put(w, p, key, val, strlen(val));
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

/* What the live view asks: membership as peer `ctx` sees it, and its
 * jobs. */
static sl_live_member member_of(void *ctx, const char *name) {
    const peer_t *me = ctx;
    int q = peer_index(me->w, name);
    return sim_member(q, q >= 0 && alive_in_view(me->w, me->index, q),
                      q >= 0 && suspect_in_view(me->w, me->index, q));
}

static bool runs(void *ctx, const char *study, const char *trial) {
    (void)study;
    const peer_t *me = ctx;
    for (int k = 0; k < me->job_count; k++)
        if (!strcmp(me->w->props[me->jobs[k].t].id, trial))
            return true;
    return false;
}

/* The daemon's sl_study_live_refresh: a live view read whole after a
 * restart (stale), then the rows that changed and the open trials'
 * states derived. */
static void refresh(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    sim_refresh(&me->live, store_of(w, p), w->study_id, &w->spec, &me->env, (uint64_t)w->now);
}

/* The row of trial t in peer p's live view, or NULL. */
static trial_row_t *row_of(world_t *w, int p, int t) {
    return sl_study_live_find(&w->peers[p].live, w->props[t].id);
}

/* The slots peer p's view counts (the scheduler's capacity). */
static int capacity(const world_t *w, int p) {
    int n = 0;
    for (int q = 0; q < PEERS; q++)
        if (alive_in_view(w, p, q))
            n += w->concurrency;
    return n;
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

/* Each job whose epoch ended: its report, checkpoint and outcome, written
 * as the daemon writes a worker's events (a result when done or failed,
 * the claim released unless done). */
static void work(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    for (int k = 0; k < me->job_count; k++) {
        job_t *j = &me->jobs[k];
        trial_row_t *r = row_of(w, p, j->t);
        if (w->now < j->epoch_end || !r)
            continue;
        int e = j->next_epoch;
        if (e > MAX_E || e > w->spec.max_epochs) {
            violate(w, "test: epoch %d over %d", e, w->spec.max_epochs);
            return;
        }
        bool failed = bad_trial(w, j->t) && e == 1;
        if (failed) /* counted once per claim epoch */
            put_str(w, p, tkey(w, SL_STUDY_KEY_FAIL, j->t, j->epoch, NULL), "diverged at epoch 1");
        sl_epoch_outcome out =
            sl_claim_after_epoch(&w->spec, sl_study_live_rung(r), e, failed, (int)r->fail_count);
        if (!failed) {
            sl_report_t rep = {.epoch = e, .metric_count = 1};
            snprintf(rep.metrics[0].name, sizeof rep.metrics[0].name, "val_acc");
            rep.metrics[0].value = train_metric(w, j->t, e);
            char line[SL_REPORT_LINE_MAX];
            size_t len;
            if (sl_report_encode(&rep, line, sizeof line, &len) == SL_OK)
                put(w, p, tkey(w, SL_STUDY_KEY_METRIC, j->t, (uint64_t)e, NULL), line, len);
            w->reported[j->t][e - 1] = true;
        }
        if (sl_claim_checkpoint_due(&w->spec, e, out) && e > r->ck_epoch) {
            char man[64];
            snprintf(man, sizeof man, "{\"epoch\":%d}", e);
            put_str(w, p, tkey(w, SL_STUDY_KEY_CKPT, j->t, 0, NULL), man);
        }
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
            put_result(w, p, j->t, &res);
        }
        if (out != SL_EPOCH_CONTINUE) {
            sl_claim_t cur, rel; /* (study_node.c's job_release) */
            if (out != SL_EPOCH_DONE && sl_study_live_claim(r, &cur) &&
                sl_claim_release(&cur, me->id, j->epoch, &rel) == SL_OK)
                put_claim(w, p, j->t, &rel);
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
    for (size_t i = 0; i < out->count; i++) {
        const sl_turn_action_t *a = &out->items[i];
        int t = a->trial_id[0] ? find_prop(w, a->trial_id) : -1;
        switch (a->kind) {
        case SL_TURN_WRITE_CLAIM:
            if (t >= 0) /* (this peer's register) */
                put_claim(w, p, t, &a->claim);
            break;
        case SL_TURN_WRITE_RECORD: {
            sl_trial_t rec = a->trial;
            if (w->bug == BUG_R2_ORDINAL_SKEW && p % 2 == 1)
                rec.ordinal += 1; /* the bug: slots depend on the leader */
            if (t < 0) {
                if (w->prop_count == MAX_T) {
                    violate(w, "test: over %d trials", MAX_T);
                    break;
                }
                t = w->prop_count++;
                prop_t *pr = &w->props[t];
                memcpy(pr->id, a->trial_id, sizeof pr->id);
                pr->ordinal = a->trial.ordinal;
                pr->config = a->trial.config;
            }
            char val[SL_STUDY_RECORD_MAX];
            size_t len;
            if (sl_trial_record_encode(&w->spec, &rec, val, sizeof val, &len) == SL_OK)
                put(w, p, tkey(w, SL_STUDY_KEY_RECORD, t, 0, NULL), val, len);
            break;
        }
        case SL_TURN_WRITE_RUNG:
            if (t >= 0) {
                const char *key = tkey(w, SL_STUDY_KEY_RUNG, t, (uint64_t)a->rung, NULL);
                w->promotions += !has_key(w, p, key);
                put_str(w, p, key, a->reason);
            }
            break;
        case SL_TURN_WRITE_STOP:
            if (t >= 0)
                put_str(w, p, tkey(w, SL_STUDY_KEY_STOP, t, 0, NULL), a->reason);
            break;
        case SL_TURN_WRITE_RESULT:
            if (t >= 0)
                put_result(w, p, t, &a->result);
            break;
        case SL_TURN_WRITE_FINISHED:
            put_str(w, p, tkey(w, SL_STUDY_KEY_FINISHED, -1, 0, NULL), a->reason);
            break;
        case SL_TURN_JOB_START: {
            trial_row_t *r = t >= 0 ? row_of(w, p, t) : NULL;
            if (!r || me->job_count == (int)(sizeof me->jobs / sizeof me->jobs[0])) {
                violate(w, "test: %s starts a job it has no room for", me->id);
                break;
            }
            if (w->bug == BUG_T2_METRICS_BY_CLAIM) /* the bug: a new claim starts anew */
                for (int e = 1; e <= w->spec.max_epochs; e++) {
                    const char *key = tkey(w, SL_STUDY_KEY_METRIC, t, (uint64_t)e, NULL);
                    if (has_key(w, p, key))
                        put(w, p, key, NULL, 0);
                }
            job_t *j = &me->jobs[me->job_count++];
            j->t = t;
            j->epoch = a->claim.epoch;
            j->next_epoch = r->ck_epoch + 1; /* resume from the latest checkpoint */
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
static void plant_lead(world_t *w, const sl_turn_view_t *v, sl_turn_out_t *out) {
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
        for (size_t i = 0; i < v->trial_count; i++)
            if (v->trials[i].state == SL_TRIAL_PAUSED && v->trials[i].rung == 0 &&
                (worst < 0 || v->trials[i].objectives[0] < v->trials[worst].objectives[0]))
                worst = (int)i;
        bool dup = false;
        for (size_t i = 0; worst >= 0 && i < out->count; i++)
            dup |= out->items[i].kind == SL_TURN_WRITE_RUNG &&
                   strcmp(out->items[i].trial_id, v->trials[worst].id) == 0;
        if (worst >= 0 && !dup && v->trial_count >= 3 && out->count < out->cap) {
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
            trial_row_t *r = sl_study_live_find(&me->live, a->trial_id);
            sl_claim_t c;
            if (!r || !sl_study_live_claim(r, &c))
                memset(&c, 0, sizeof c);
            int owner = c.owner[0] ? peer_index(w, c.owner) : -1;
            sl_claim_status st = sl_claim_status_of(&c, me->id, (uint64_t)w->now,
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

/* Peer p's turn: its live view refreshed, its workers' reports, then the
 * turn's three phases, each one's actions carried out before the view is
 * derived again for the next (study_node.c's study_turn). */
static void turn(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    live_t *lv = &me->live;
    sl_turn_out_t *out = &w->out;
    uint64_t now = (uint64_t)w->now;
    int jobs0 = me->job_count;
    work(w, p); /* (the keys of its trials as they are: no derive needed) */
    if (!me->up)
        return; /* (killed between a report and its result) */
    refresh(w, p);
    /* the jobs */
    sl_turn_job_t tj[2];
    bool drop[2] = {false, false};
    int nj = me->job_count;
    for (int k = 0; k < nj; k++) {
        const job_t *j = &me->jobs[k];
        tj[k] = (sl_turn_job_t){.trial_id = w->props[j->t].id, .epoch = j->epoch,
                                .renew_ms = j->renew_ms, .last_epoch = j->next_epoch - 1};
        sl_study_live_turn_job(lv, tj[k].trial_id, &tj[k]);
    }
    sl_turn_view_t v = {.study_id = w->study_id, .spec = &w->spec, .trials = lv->trials,
                        .trial_count = lv->trial_count, .cancelled = lv->cancelled,
                        .finished = lv->finished};
    sl_turn_out_clear(out);
    if (sl_turn_jobs(&v, tj, (size_t)nj, me->id, now, out) != SL_OK) {
        violate(w, "turn: jobs phase failed");
        return;
    }
    apply(w, p, out, drop);
    for (int k = nj - 1; k >= 0; k--) /* (from the end: drop_job moves the last) */
        if (drop[k])
            drop_job(me, k);
    if (lv->finished)
        return;
    /* the leader */
    refresh(w, p);
    build_members(w, p);
    if (sl_study_live_turn_view(lv, w->study_id, &w->spec, &me->env, &v) != SL_OK) {
        violate(w, "turn: no view");
        return;
    }
    sl_turn_members_load(&v, &w->members, me->id, me->job_count);
    sl_turn_out_clear(out);
    if (sl_turn_lead(&v, &w->members, me->id, now, out) != SL_OK) {
        violate(w, "turn: lead phase failed");
        return;
    }
    sl_sched_view_t sv = {.study_id = w->study_id, .trials = lv->trials,
                          .trial_count = lv->trial_count, .capacity = capacity(w, p)};
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
    /* a job of this peer ended this turn and another leads: its result
       may have been the study's last (sl_turn_finish, as the daemon asks
       it); the planted T1 bug drops its STOPs as the leader's */
    if (!out->led && me->job_count < jobs0) {
        sl_turn_out_clear(out);
        if (sl_turn_finish(&v, me->id, out) != SL_OK) {
            violate(w, "turn: finish failed");
            return;
        }
        if (w->bug == BUG_T1_SKIP_STOPS)
            plant_lead(w, &v, out);
        apply(w, p, out, NULL);
    }
    if (lv->finished)
        return;
    /* the claims (a simulated peer has caught up: its replica is the
       store's) */
    refresh(w, p);
    if (sl_study_live_turn_view(lv, w->study_id, &w->spec, &me->env, &v) != SL_OK) {
        violate(w, "turn: no view");
        return;
    }
    sl_turn_out_clear(out);
    if (sl_turn_claims(&v, &w->members, me->id, now, true, out) != SL_OK) {
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
    me->paused_until = 0; /* (a stopped process killed is no longer stopped) */
    me->job_count = 0; /* volatile state gone; the replica is on disk */
    sl_simstore_crash(w->net, (uint32_t)p); /* its round core and unsent writes too */
    sl_study_live_fini(&me->live);
    me->live.stale = true; /* read whole at its first turn back */
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
            if (sl_simstore_restart(w->net, (uint32_t)p) != SL_OK)
                violate(w, "store: %s cannot restart", me->id);
        }
        if (me->up && me->paused_until && w->now >= me->paused_until) {
            me->paused_until = 0; /* SIGCONT: what waited for it arrives */
            sl_sim_pause(sl_simstore_sim(w->net), (uint32_t)p, false);
        }
    }
    if (w->heal_at && w->now >= w->heal_at) {
        memset(w->group, 0, sizeof w->group);
        sl_sim_partition(sl_simstore_sim(w->net), NULL);
        w->heal_at = 0;
        w->last_fault = w->now;
    }
    /* while faults are on, LOSS_PCT of the messages are lost (anti-entropy
       repairs) */
    sl_sim_net_t net = *sl_sim_net(sl_simstore_sim(w->net));
    net.loss = w->faults && w->now < w->faults_until ? LOSS_PCT / 100.0 : 0;
    sl_sim_set_net(sl_simstore_sim(w->net), &net);
    if (!w->faults || w->now >= w->faults_until)
        return;
    uint64_t dice = sl_rng_below(rng, 1000);
    if (dice < 15) {
        /* kill the leader of the current round as peer 0..N sees it, or anyone */
        int victim = (int)sl_rng_below(rng, PEERS);
        if (sl_rng_below(rng, 2)) {
            int obs = (int)sl_rng_below(rng, PEERS);
            const live_t *lv = &w->peers[obs].live;
            if (w->peers[obs].up && !lv->stale) { /* (its view as of its last turn) */
                sl_sched_view_t sv = {.study_id = w->study_id, .trials = lv->trials,
                                      .trial_count = lv->trial_count,
                                      .capacity = capacity(w, obs)};
                int l = leader_of(w, obs, sl_sched_round(&w->spec, &sv));
                if (l >= 0) {
                    victim = l;
                    w->leader_kills++;
                }
            }
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
            sl_sim_pause(sl_simstore_sim(w->net), (uint32_t)victim, true);
            w->pauses++;
        }
    } else if (dice < 25 && !w->heal_at) {
        uint32_t sides[PEERS];
        for (int p = 0; p < PEERS; p++)
            sides[p] = (uint32_t)(w->group[p] = (int)sl_rng_below(rng, 2));
        sl_sim_partition(sl_simstore_sim(w->net), sides);
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

/* Trial t's claim as peer p's live view joins it (0: none, or its view is
 * not read yet after a restart). */
static uint64_t claim_epoch(world_t *w, int p, int t) {
    trial_row_t *r = row_of(w, p, t);
    sl_claim_t c;
    return r && sl_study_live_claim(r, &c) ? c.epoch : 0;
}

static void checks_step(world_t *w) {
    /* T3: claim epochs only grow in every live view; no worker holds an
     * epoch below its view's; when quiet, one worker per trial */
    for (int p = 0; p < PEERS; p++) {
        peer_t *me = &w->peers[p];
        if (!me->up || me->live.stale)
            continue; /* (no view: down, or not read since its restart) */
        for (int i = 0; i < w->prop_count; i++) {
            uint64_t e = claim_epoch(w, p, i);
            if (e < me->last_epoch[i])
                violate(w, "T3: %s's claim epoch of trial %d went back", me->id, i);
            me->last_epoch[i] = e;
        }
        for (int k = 0; k < me->job_count; k++) {
            uint64_t e = claim_epoch(w, p, me->jobs[k].t);
            if (e > me->jobs[k].epoch)
                violate(w, "T3: %s works on trial %d at epoch %llu after seeing epoch %llu",
                        me->id, me->jobs[k].t, (unsigned long long)me->jobs[k].epoch,
                        (unsigned long long)e);
        }
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

/* Whether peer p's replica holds what peer 0's does. */
static bool same_replica(const world_t *w, int p) {
    return sl_store_state_hash(store_of(w, 0)) == sl_store_state_hash(store_of(w, p)) &&
           sl_store_fingerprint(store_of(w, 0)) == sl_store_fingerprint(store_of(w, p));
}

/* The trials as peer 0's live view shows them (SL_VERBOSE). */
static void dump(world_t *w) {
    live_t *lv = &w->peers[0].live;
    for (size_t i = 0; i < lv->trial_count; i++) {
        const sl_trial_t *t = &lv->trials[i];
        const trial_row_t *r = &lv->rows[lv->trial_row[i]];
        printf("  %s ord %llu br %d rung %d %s epochs %d claim %s/%llu rel %d stop %d res %d\n",
               t->id, (unsigned long long)t->ordinal, t->bracket, t->rung,
               sl_trial_state_name(t->state), t->epochs_done, r->claim.owner,
               (unsigned long long)r->claim.epoch, r->claim.released, r->stop, r->has_result);
    }
}

static void world_fini(world_t *w) {
    sl_study_members_fini(&w->members);
    sl_turn_out_fini(&w->out);
    for (int p = 0; p < PEERS; p++)
        sl_study_live_fini(&w->peers[p].live);
    sl_simstore_destroy(&w->net);
}

/* Membership as peer `p` sees it: whom its DELTAs go to. */
static bool member_hook(void *ctx, uint32_t p, uint32_t q) {
    return alive_in_view(ctx, (int)p, (int)q);
}

static void run_world(world_t *w, const char *json, uint64_t seed, bool faults, bug_t bug) {
    world_fini(w); /* (a run before this one's) */
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
        peer_t *me = &w->peers[p];
        snprintf(me->id, sizeof me->id, "peer-%d", p);
        me->index = p;
        me->w = w;
        me->up = true;
        me->env = (sl_live_env_t){.self = me->id, .member = member_of, .runs = runs, .ctx = me};
    }
    /* the stores: each write's DELTA goes to every member (below
       SL_SPREAD_PUSH_ALL others), a message takes 1-20 ms; the rounds'
       default timers */
    sl_simstore_config_t nc = {.nodes = PEERS, .seed = seed, .clock_ms = EPOCH_MS,
                               .net = {.delay_min_ms = 1, .delay_max_ms = 20},
                               .list_changed = true,
                               .hooks = {.changed = changed, .member = member_hook, .ctx = w}};
    if (sl_simstore_new(&nc, &w->net) != SL_OK) {
        violate(w, "store: no stores");
        return;
    }
    for (w->now = 0; w->now < DEADLINE_MS && !w->violation[0]; w->now += STEP_MS) {
        inject_faults(w);
        /* membership: hear those reachable */
        for (int p = 0; p < PEERS; p++)
            for (int q = 0; q < PEERS; q++)
                if (connected(w, p, q))
                    w->peers[p].heard[q] = w->now;
        /* the network since the last step: pushes, relays, rounds */
        for (int p = 0; p < PEERS; p++)
            for (int q = 0; q < PEERS; q++)
                sl_simstore_set_up(w->net, (uint32_t)p, (uint32_t)q, alive_in_view(w, p, q));
        sl_err err = sl_simstore_run_until(w->net, w->now);
        if (err != SL_OK)
            violate(w, "store: a message was refused: %s", sl_strerror(err));
        /* each peer: its turn, its writes pushed after it */
        memset(w->led, 0, sizeof w->led);
        for (int p = 0; p < PEERS && !w->violation[0]; p++)
            if (running(w, p)) {
                turn(w, p);
                sl_simstore_push(w->net, (uint32_t)p);
            }
        checks_step(w);
        /* done: every peer up, finished, idle */
        bool all = w->now >= w->faults_until && !w->heal_at;
        for (int p = 0; p < PEERS && all; p++)
            all = running(w, p) && w->peers[p].live.finished && w->peers[p].job_count == 0;
        if (all) {
            w->finished_all = true;
            break;
        }
    }
    if (w->violation[0])
        return;
    /* T5: finished once quiet */
    if (!w->finished_all) {
        refresh(w, 0);
        violate(w, "T5: not finished by %d s (%zu trials open in peer-0's view)",
                DEADLINE_MS / 1000, w->peers[0].live.open_count);
        if (getenv("SL_VERBOSE"))
            dump(w);
        return;
    }
    /* the replicas converge (the rounds' SUMMARYs find what differs,
       within CONVERGE_MS), then the end state as peer 0's live view shows
       it */
    int64_t end = w->now + CONVERGE_MS;
    bool same = false;
    while (!same && w->now < end && !w->violation[0]) {
        w->now += STEP_MS;
        if (sl_simstore_run_until(w->net, w->now) != SL_OK)
            violate(w, "store: a message was refused");
        same = true;
        for (int p = 1; p < PEERS; p++)
            same &= same_replica(w, p);
    }
    if (w->violation[0])
        return;
    for (int p = 0; p < PEERS; p++)
        refresh(w, p);
    live_t *fin = &w->peers[0].live;
    for (int i = 0; i < w->prop_count; i++) {
        trial_row_t *r = row_of(w, 0, i);
        const sl_trial_t *t = r ? sl_study_live_trial(fin, r) : NULL;
        /* T1 */
        if (!t || !r->has_result)
            violate(w, "T1: trial %d (%s, rung %d, %d epochs) has no outcome", i, w->props[i].id,
                    t ? t->rung : -1, t ? t->epochs_done : 0);
        else if (r->result.state != SL_TRIAL_DONE && r->result.state != SL_TRIAL_FAILED)
            violate(w, "T1: trial %d ends %s", i, sl_trial_state_name(r->result.state));
        /* T2 */
        for (int e = 0; e < w->spec.max_epochs; e++)
            if (w->reported[i][e] && !(r && r->has_report[e]))
                violate(w, "T2: trial %d lost the metric of epoch %d", i, e + 1);
    }
    for (int p = 1; p < PEERS; p++)
        if (!same_replica(w, p))
            violate(w, "store: %s's replica differs from peer-0's once quiet", w->peers[p].id);
    /* R2: every slot once, the budget met */
    for (uint64_t o = 0; o < w->spec.budget_trials; o++) {
        int n = 0;
        for (size_t i = 0; i < fin->trial_count; i++)
            n += fin->trials[i].ordinal == o;
        if (n != 1)
            violate(w, "R2: proposal slot %llu holds %d trials", (unsigned long long)o, n);
    }
    if (fin->trial_count != w->spec.budget_trials)
        violate(w, "R2: %zu trials proposed for a budget of %u", fin->trial_count,
                w->spec.budget_trials);
}

/* The end state a synchronous scheduler must reproduce: per trial id, the
 * rung, the outcome and the epochs (as peer 0's live view shows them). */
static bool same_outcome(world_t *a, world_t *b, char *why, size_t why_len) {
    if (a->prop_count != b->prop_count) {
        snprintf(why, why_len, "%d trials vs %d", a->prop_count, b->prop_count);
        return false;
    }
    for (int i = 0; i < a->prop_count; i++) {
        trial_row_t *x = row_of(a, 0, i);
        trial_row_t *y = sl_study_live_find(&b->peers[0].live, a->props[i].id);
        const sl_trial_t *tx = x ? sl_study_live_trial(&a->peers[0].live, x) : NULL;
        const sl_trial_t *ty = y ? sl_study_live_trial(&b->peers[0].live, y) : NULL;
        if (!tx || !ty) {
            snprintf(why, why_len, "trial %s missing", a->props[i].id);
            return false;
        }
        if (tx->rung != ty->rung || x->result.state != y->result.state ||
            tx->epochs_done != ty->epochs_done) {
            snprintf(why, why_len, "trial %s: rung %d/%d, %s/%s, %d/%d epochs", a->props[i].id,
                     tx->rung, ty->rung, sl_trial_state_name(x->result.state),
                     sl_trial_state_name(y->result.state), tx->epochs_done, ty->epochs_done);
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
    world_fini(&W);
    world_fini(&W0);
    return sl_test_finish();
}
