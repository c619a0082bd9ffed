/* The study turn's claims phase (src/study/turn.c) on hand-made views:
 * a trial whose owner is suspect is taken over, as from a dead owner,
 * by a slot nothing else would use; a suspect member is given no free
 * slot (no trial is assigned to it); an owner alive and not suspect
 * keeps its trial; the end of an ASHA study written by a peer that does
 * not lead, once every open trial is paused and nothing is promotable
 * (sl_turn_finish); a lease renewed early by the turn that writes the
 * job's report, never late; overdue fresh trials taken by each idle
 * peer's own rank, not by its view of who else is idle. The simulators
 * (sim_study_test, sim_study_scale_test) run the same turn over whole
 * studies with kills and wrong suspicions. */
#include <math.h>
#include <stdlib.h>

#include "starling/study.h"
#include "study/turn.h"
#include "testlib.h"

#define NOW 100000
#define LEASE 3000

static sl_study_spec_t spec;

/* A command study of one real parameter, `scheduler` its scheduler's
 * JSON object, `trials` its budget. */
static bool spec_make(const char *scheduler, int trials, sl_study_spec_t *out) {
    char json[1024], why[256];
    snprintf(json, sizeof json,
             "{\"name\": \"turn\", \"trainer\": {\"type\": \"command\", \"command\": \"t {x}\"},"
             " \"search_space\": {\"x\": {\"type\": \"real\", \"low\": 0.0, \"high\": 1.0}},"
             " \"searcher\": {\"type\": \"random\"}, \"scheduler\": %s,"
             " \"objectives\": [{\"metric\": \"score\", \"goal\": \"max\"}],"
             " \"budget\": {\"trials\": %d}, \"lease_ms\": 3000}",
             scheduler, trials);
    sl_err err = sl_study_spec_parse(json, strlen(json), out, why, sizeof why);
    CHECK_MSG(err == SL_OK, "spec: %s", why);
    return err == SL_OK;
}

static void spec_init(void) {
    if (!spec_make("{\"type\": \"fifo\", \"max_epochs\": 4}", 10, &spec))
        exit(1);
}

/* Two open trials: "t-held", claimed by b (lease live, epoch 1, one
 * epoch done), and "t-fresh", never claimed, claimable here since 200 ms
 * (past the fresh trials' wait). Members a (self) and b, one slot each. */
typedef struct {
    sl_trial_t trials[2];
    uint64_t claimable[2];
    sl_turn_open_t open[2];
    sl_turn_view_t v;
    sl_study_members_t ms;
    sl_turn_out_t out;
} fix_t;

static void fix_init(fix_t *f, bool b_suspect, bool with_fresh, int a_slots) {
    memset(f, 0, sizeof *f);
    const char *ids[2] = {"t-held", "t-fresh"};
    for (int i = 0; i < 2; i++) {
        sl_trial_t *t = &f->trials[i];
        snprintf(t->id, sizeof t->id, "%s", ids[i]);
        t->ordinal = (uint64_t)i;
        for (int o = 0; o < SL_STUDY_MAX_OBJECTIVES; o++)
            t->objectives[o] = NAN;
    }
    f->trials[0].state = SL_TRIAL_RUNNING;
    f->trials[0].epochs_done = 1;
    f->trials[1].state = SL_TRIAL_PENDING;
    f->claimable[1] = NOW - 200;
    sl_claim_t held = {.epoch = 1, .lease_expiry_ms = NOW + LEASE};
    snprintf(held.owner, sizeof held.owner, "b");
    f->open[0] = (sl_turn_open_t){.id = f->trials[0].id, .t = &f->trials[0], .claim = held,
                                  .has_claim = true, .owner_alive = true,
                                  .owner_suspect = b_suspect, .claimable_ms = &f->claimable[0]};
    f->open[1] = (sl_turn_open_t){.id = f->trials[1].id, .t = &f->trials[1],
                                  .claimable_ms = &f->claimable[1]};
    f->v = (sl_turn_view_t){.study_id = "s", .spec = &spec, .trials = f->trials,
                            .trial_count = 2, .open = f->open,
                            .open_count = with_fresh ? 2 : 1, .next_lapse_ms = UINT64_MAX};
    CHECK_OK(sl_study_members_reserve(&f->ms, 2));
    snprintf(f->ms.names[0], sizeof f->ms.names[0], "a");
    snprintf(f->ms.names[1], sizeof f->ms.names[1], "b");
    f->ms.slots[0] = a_slots;
    f->ms.slots[1] = 1;
    f->ms.suspect[1] = b_suspect;
    f->ms.count = 2;
    sl_turn_members_load(&f->v, &f->ms, "a", 0);
    sl_turn_out_init(&f->out);
}

static void fix_fini(fix_t *f) {
    sl_study_members_fini(&f->ms);
    sl_turn_out_fini(&f->out);
}

/* The trial ids of the jobs the turn starts, in order, joined by ",". */
static void started(const sl_turn_out_t *o, char *buf, size_t len) {
    buf[0] = 0;
    for (size_t i = 0; i < o->count; i++)
        if (o->items[i].kind == SL_TURN_JOB_START)
            snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? "," : "",
                     o->items[i].trial_id);
}

static void test_alive_owner_keeps(void) {
    fix_t f;
    fix_init(&f, false, false, 1);
    CHECK_INT(f.ms.m[1].free_slots, 0); /* b runs t-held */
    CHECK_OK(sl_turn_claims(&f.v, &f.ms, "a", NOW, true, &f.out));
    char s[64];
    started(&f.out, s, sizeof s);
    CHECK_STR(s, "");
    fix_fini(&f);
}

static void test_suspect_taken_over(void) {
    fix_t f;
    fix_init(&f, true, false, 1);
    CHECK_INT(f.ms.m[0].free_slots, 1);
    CHECK_OK(sl_turn_claims(&f.v, &f.ms, "a", NOW, true, &f.out));
    char s[64];
    started(&f.out, s, sizeof s);
    CHECK_STR(s, "t-held");
    for (size_t i = 0; i < f.out.count; i++) {
        const sl_turn_action_t *a = &f.out.items[i];
        if (a->kind == SL_TURN_WRITE_CLAIM) { /* a's claim, one epoch up */
            CHECK_STR(a->claim.owner, "a");
            CHECK_INT(a->claim.epoch, 2);
            CHECK_INT(a->why, SL_TURN_CLAIM_TAKE);
        }
        if (a->kind == SL_TURN_JOB_START)
            CHECK_STR(a->reason, "taken over from a suspect owner");
    }
    /* b, as it sees the register now, stops its job */
    CHECK(sl_claim_must_stop(&f.out.items[0].claim, "b", 1));
    fix_fini(&f);
}

static void test_suspect_last(void) {
    /* one slot: the fresh trial first, the suspect's trial waits */
    fix_t f;
    fix_init(&f, true, true, 1);
    CHECK_OK(sl_turn_claims(&f.v, &f.ms, "a", NOW, true, &f.out));
    char s[64];
    started(&f.out, s, sizeof s);
    CHECK_STR(s, "t-fresh");
    fix_fini(&f);
    /* two slots: both */
    fix_init(&f, true, true, 2);
    CHECK_OK(sl_turn_claims(&f.v, &f.ms, "a", NOW, true, &f.out));
    started(&f.out, s, sizeof s);
    CHECK_STR(s, "t-fresh,t-held");
    fix_fini(&f);
}

static void test_suspect_member_no_slots(void) {
    /* b suspect and idle: no free slot, so a fresh trial goes to a */
    fix_t f;
    fix_init(&f, true, true, 1);
    f.open[0].has_claim = false; /* (b holds nothing) */
    f.trials[0].state = SL_TRIAL_PENDING;
    sl_turn_members_load(&f.v, &f.ms, "a", 0);
    CHECK_INT(f.ms.m[1].free_slots, 0);
    CHECK_INT(f.ms.m[0].free_slots, 1);
    fix_fini(&f);
}

/* ---- overdue fresh trials: each idle peer by a rank of its own ---- */

#define SPREAD_TRIALS 16
#define SPREAD_MEMBERS 32
#define SPREAD_IDLE 4

static void spread_name(int k, char *out, size_t len) { snprintf(out, len, "p%02d", k); }
static void spread_trial(int i, char *out, size_t len) { snprintf(out, len, "t-%02d", i); }

/* The trial `self` starts in one turn, in a view of SPREAD_TRIALS fresh
 * trials all overdue and SPREAD_MEMBERS members of one slot each: self
 * idle, and the other SPREAD_IDLE - 1 of the first ones idle too
 * (`others_free`) or seen as busy, as the rest; "" if none. */
static void spread_pick(const char *self, bool others_free, char *got, size_t len) {
    sl_trial_t trials[SPREAD_TRIALS];
    uint64_t claimable[SPREAD_TRIALS];
    sl_turn_open_t open[SPREAD_TRIALS];
    memset(trials, 0, sizeof trials);
    memset(open, 0, sizeof open);
    for (int i = 0; i < SPREAD_TRIALS; i++) {
        spread_trial(i, trials[i].id, sizeof trials[i].id);
        trials[i].ordinal = (uint64_t)i;
        trials[i].state = SL_TRIAL_PENDING;
        for (int o = 0; o < SL_STUDY_MAX_OBJECTIVES; o++)
            trials[i].objectives[o] = NAN;
        claimable[i] = NOW - 200;
        open[i] = (sl_turn_open_t){.id = trials[i].id, .t = &trials[i],
                                   .claimable_ms = &claimable[i]};
    }
    sl_turn_view_t v = {.study_id = "s", .spec = &spec, .trials = trials,
                        .trial_count = SPREAD_TRIALS, .open = open,
                        .open_count = SPREAD_TRIALS, .next_lapse_ms = UINT64_MAX};
    sl_study_members_t ms;
    memset(&ms, 0, sizeof ms);
    CHECK_OK(sl_study_members_reserve(&ms, SPREAD_MEMBERS));
    for (int k = 0; k < SPREAD_MEMBERS; k++) {
        spread_name(k, ms.names[k], sizeof ms.names[k]);
        ms.slots[k] = 1;
    }
    ms.count = SPREAD_MEMBERS;
    sl_turn_members_load(&v, &ms, self, 0);
    for (int k = 0; k < SPREAD_MEMBERS; k++)
        if (strcmp(ms.names[k], self) && (k >= SPREAD_IDLE || !others_free))
            ms.m[k].free_slots = 0;
    sl_turn_out_t out;
    sl_turn_out_init(&out);
    CHECK_OK(sl_turn_claims(&v, &ms, self, NOW, true, &out));
    started(&out, got, len);
    sl_turn_out_fini(&out);
    sl_study_members_fini(&ms);
}

/* An idle peer takes, of the fresh trials ranked first to it or overdue
 * (here all of them), the one that weighs most for it, whatever it sees
 * of the others' free slots: idle peers whose views of each other are
 * some hops of the store's rumor apart need not agree on who is idle to
 * take different trials. Under the load-aware assignment, a peer that saw
 * the others busy took the oldest trial, whoever else did. */
static void test_overdue_spread(void) {
    char seen[SPREAD_IDLE][16];
    for (int p = 0; p < SPREAD_IDLE; p++) {
        char self[8], busy[16], want[16] = "", id[16];
        spread_name(p, self, sizeof self);
        spread_pick(self, true, seen[p], sizeof seen[p]);
        spread_pick(self, false, busy, sizeof busy);
        CHECK_STR(busy, seen[p]);
        uint64_t bw = 0;
        for (int i = 0; i < SPREAD_TRIALS; i++) {
            spread_trial(i, id, sizeof id);
            uint64_t w = sl_round_trial_weight(self, id);
            if (!want[0] || w > bw) {
                bw = w;
                snprintf(want, sizeof want, "%s", id);
            }
        }
        CHECK_STR(seen[p], want);
        for (int q = 0; q < p; q++)
            CHECK_MSG(strcmp(seen[p], seen[q]) != 0, "%s and p%02d both took %s", self, q,
                      seen[p]);
    }
}

/* ---- the end of an ASHA study by the owner of its last job ---- */

static sl_study_spec_t asha;

/* Three trials of an ASHA study (rungs of 1 and 3 epochs, reduction 3,
 * budget 3): t0 trained to the top rung and done; t1 and t2 paused at
 * rung 0 with the scores given (t0 scored 0.9 there); t2 running
 * instead when `t2_runs`. */
typedef struct {
    sl_trial_t trials[3];
    double curves[3][3];
    uint64_t claimable[3];
    sl_turn_open_t open[2];
    sl_turn_view_t v;
    sl_turn_out_t out;
} end_t;

static void end_init(end_t *f, double s1, double s2, bool t2_runs) {
    memset(f, 0, sizeof *f);
    double first[3] = {0.9, s1, s2};
    for (int i = 0; i < 3; i++) {
        sl_trial_t *t = &f->trials[i];
        snprintf(t->id, sizeof t->id, "t%d", i);
        t->ordinal = (uint64_t)i;
        t->state = SL_TRIAL_PAUSED;
        t->epochs_done = 1;
        f->curves[i][0] = first[i];
        t->curve = f->curves[i];
        t->curve_len = 1;
        for (int o = 0; o < SL_STUDY_MAX_OBJECTIVES; o++)
            t->objectives[o] = NAN;
        t->objectives[0] = first[i];
    }
    sl_trial_t *t0 = &f->trials[0];
    t0->rung = 1;
    t0->state = SL_TRIAL_DONE;
    t0->epochs_done = 3;
    f->curves[0][1] = f->curves[0][2] = 0.9;
    t0->curve_len = 3;
    if (t2_runs)
        f->trials[2].state = SL_TRIAL_RUNNING;
    for (int o = 0; o < 2; o++)
        f->open[o] = (sl_turn_open_t){.id = f->trials[o + 1].id, .t = &f->trials[o + 1],
                                      .claimable_ms = &f->claimable[o + 1]};
    f->v = (sl_turn_view_t){.study_id = "s", .spec = &asha, .trials = f->trials,
                            .trial_count = 3, .open = f->open, .open_count = 2,
                            .next_lapse_ms = UINT64_MAX};
    sl_turn_out_init(&f->out);
}

static void test_finish_by_last_owner(void) {
    if (!spec_make("{\"type\": \"asha\", \"min_epochs\": 1, \"max_epochs\": 3, \"reduction\": 3}",
                   3, &asha))
        return;
    /* every open trial paused, none promotable (t0 was rung 0's best): the
       paused ones stopped as the leader would, and the study's end */
    end_t f;
    end_init(&f, 0.5, 0.4, false);
    CHECK_OK(sl_turn_finish(&f.v, "a", &f.out));
    int results = 0, finished = 0;
    for (size_t i = 0; i < f.out.count; i++) {
        const sl_turn_action_t *a = &f.out.items[i];
        if (a->kind == SL_TURN_WRITE_RESULT) {
            results++;
            CHECK_INT(a->result.state, SL_TRIAL_DONE);
            CHECK_STR(a->result.writer, "a");
        } else if (a->kind == SL_TURN_WRITE_FINISHED) {
            finished++;
            CHECK_MSG(strstr(a->reason, "all 3 trials final") &&
                          strstr(a->reason, "(by the owner of its last job)"),
                      "reason: %s", a->reason);
        } else {
            CHECK_MSG(false, "an action of kind %d", (int)a->kind);
        }
    }
    CHECK_INT(results, 2);
    CHECK_INT(finished, 1);
    sl_turn_out_fini(&f.out);
    /* a trial still running: nothing (the common case) */
    end_init(&f, 0.5, 0.4, true);
    CHECK_OK(sl_turn_finish(&f.v, "a", &f.out));
    CHECK_INT(f.out.count, 0);
    sl_turn_out_fini(&f.out);
    /* t1 now rung 0's best: a promotion is due, which is the leader's */
    end_init(&f, 0.95, 0.4, false);
    CHECK_OK(sl_turn_finish(&f.v, "a", &f.out));
    CHECK_INT(f.out.count, 0);
    sl_turn_out_fini(&f.out);
    /* not ASHA (fifo): the leader's */
    end_init(&f, 0.5, 0.4, false);
    f.v.spec = &spec;
    CHECK_OK(sl_turn_finish(&f.v, "a", &f.out));
    CHECK_INT(f.out.count, 0);
    sl_turn_out_fini(&f.out);
}

/* Whether b's job of t-held (lease renewal due at `renew_ms`, its report
 * written this turn or not) is renewed by the jobs phase at NOW. */
static bool renews(uint64_t renew_ms, bool reported) {
    fix_t f;
    fix_init(&f, false, false, 1);
    sl_turn_job_t j = {.trial_id = "t-held", .epoch = 1, .renew_ms = renew_ms, .last_epoch = 1,
                       .reported = reported, .found = true, .claim = f.open[0].claim,
                       .has_claim = true};
    f.out.due_ms = UINT64_MAX;
    CHECK_OK(sl_turn_jobs(&f.v, &j, 1, "b", NOW, &f.out));
    bool renewed = false;
    for (size_t i = 0; i < f.out.count; i++) {
        const sl_turn_action_t *a = &f.out.items[i];
        if (a->kind == SL_TURN_WRITE_CLAIM) {
            CHECK_INT(a->why, SL_TURN_CLAIM_RENEW);
            CHECK(a->claim.lease_expiry_ms == NOW + LEASE);
            renewed = true;
        }
        if (a->kind == SL_TURN_JOB_RENEW_AT)
            CHECK(a->at_ms == NOW + LEASE / 3);
    }
    /* (not renewed: the turn is due again when the renewal is) */
    CHECK(renewed || f.out.due_ms == renew_ms);
    fix_fini(&f);
    return renewed;
}

/* A renewal is written when due, or early, within lease_ms /
 * SL_TURN_RENEW_RIDE of due, by the turn that writes the job's report
 * (one commit and DELTA for both); never early without a report. */
static void test_renew_rides_report(void) {
    uint64_t ride = LEASE / SL_TURN_RENEW_RIDE;
    CHECK(renews(NOW, false));
    CHECK(renews(NOW - 1, false));
    CHECK(!renews(NOW + 1, false));
    CHECK(!renews(NOW + ride, false));
    CHECK(renews(NOW + ride, true));
    CHECK(renews(NOW + 1, true));
    CHECK(!renews(NOW + ride + 1, true));
    CHECK(!renews(NOW + LEASE / 3, true));
}

int main(void) {
    spec_init();
    sl_test_run("alive_owner_keeps", test_alive_owner_keeps);
    sl_test_run("suspect_taken_over", test_suspect_taken_over);
    sl_test_run("suspect_last", test_suspect_last);
    sl_test_run("suspect_member_no_slots", test_suspect_member_no_slots);
    sl_test_run("overdue_spread", test_overdue_spread);
    sl_test_run("finish_by_last_owner", test_finish_by_last_owner);
    sl_test_run("renew_rides_report", test_renew_rides_report);
    return sl_test_finish();
}
