/* Schedulers on synthetic results. A small driver plays W workers that
 * train trials one epoch at a time in a seeded random order (so results
 * arrive in different orders for different seeds), calls
 * sl_sched_decide after every epoch, and applies its decisions. Checked:
 * every promotion is justified by the view it was made from (checked by
 * sl_sched_check_promotion, which counts independently), none is
 * repeated, every study finishes with every trial final and the budget
 * spent, and the synchronous schedulers (sh, hyperband) make the same
 * decisions whatever the arrival order. */
#include <math.h>
#include <stdlib.h>

#include "starling/hash.h"
#include "starling/study.h"
#include "testlib.h"

#define MAX_TRIALS 256
#define MAX_EP 64

typedef struct {
    sl_study_spec_t spec;
    char study_id[SL_TRIAL_ID_LEN + 1];
    sl_trial_t trials[MAX_TRIALS];
    double curves[MAX_TRIALS][MAX_EP];
    size_t count;
    int workers;
    bool finished;
    int promotions, stops, proposals;
    char log[MAX_TRIALS * 8][40]; /* "P id rung" / "S id" decisions, for comparison */
    int log_count;
    int max_waiting; /* most fresh trials pending at once */
} drv_t;

static double quality(const drv_t *d, const sl_trial_t *t) {
    /* a smooth function of lr (best at 0.01) plus a per-trial offset */
    int lr = sl_study_spec_param(&d->spec, "lr");
    double x = log10(t->config.values[lr].real) + 2;
    return 0.9 - 0.1 * x * x;
}

static double metric(const drv_t *d, const sl_trial_t *t, int epoch) {
    uint64_t h = sl_hash64(t->id, strlen(t->id), (uint64_t)epoch);
    double noise = ((double)(h % 1000) / 1000.0 - 0.5) * 0.02;
    return quality(d, t) * (1 - pow(0.5, epoch)) + noise;
}

static sl_trial_t *find(drv_t *d, const char *id) {
    for (size_t i = 0; i < d->count; i++)
        if (strcmp(d->trials[i].id, id) == 0)
            return &d->trials[i];
    return NULL;
}

static void view_of(drv_t *d, sl_sched_view_t *v) {
    memset(v, 0, sizeof *v);
    v->study_id = d->study_id;
    v->trials = d->trials;
    v->trial_count = d->count;
    v->capacity = d->workers;
}

static void init(drv_t *d, const char *json, int workers) {
    memset(d, 0, sizeof *d);
    char why[256] = "";
    sl_err err = sl_study_spec_parse(json, strlen(json), &d->spec, why, sizeof why);
    CHECK_MSG(err == SL_OK, "%s", why);
    sl_study_spec_id(&d->spec, d->study_id);
    d->workers = workers;
}

/* One decide+apply pass. */
static void decide(drv_t *d) {
    sl_sched_view_t v;
    view_of(d, &v);
    sl_decisions_t out = {0};
    CHECK_OK(sl_sched_decide(&d->spec, &v, &out));
    /* justify every promotion against the view it was made from */
    for (size_t i = 0; i < out.count; i++)
        if (out.items[i].kind == SL_DECISION_PROMOTE) {
            char why[200] = "";
            sl_err err = sl_sched_check_promotion(&d->spec, &v, out.items[i].trial_id,
                                                  out.items[i].rung, why, sizeof why);
            CHECK_MSG(err == SL_OK, "unjustified: %s", why);
        }
    /* an owner asking sl_sched_asha_promotes of this view gets the answer
       the leader's decisions give each paused trial */
    if (d->spec.scheduler == SL_SCHED_ASHA)
        for (size_t i = 0; i < d->count; i++) {
            const sl_trial_t *t = &d->trials[i];
            if (t->state != SL_TRIAL_PAUSED)
                continue;
            bool promoted = false;
            for (size_t k = 0; k < out.count; k++)
                promoted |= out.items[k].kind == SL_DECISION_PROMOTE &&
                            !strcmp(out.items[k].trial_id, t->id);
            char why[200] = "";
            bool says = sl_sched_asha_promotes(&d->spec, &v, t->id, t->rung, why, sizeof why);
            CHECK_MSG(says == promoted, "trial %s at rung %d: leader %d, owner's check %d (%s)",
                      t->id, t->rung, promoted, says, why);
        }
    /* the same view decides the same */
    sl_decisions_t again = {0};
    CHECK_OK(sl_sched_decide(&d->spec, &v, &again));
    CHECK_INT(again.count, out.count);
    for (size_t i = 0; i < out.count && i < again.count; i++)
        CHECK(memcmp(&out.items[i], &again.items[i], sizeof out.items[i]) == 0);
    sl_decisions_fini(&again);
    for (size_t i = 0; i < out.count; i++) {
        const sl_decision_t *x = &out.items[i];
        sl_trial_t *t = x->kind == SL_DECISION_FINISH ? NULL : find(d, x->trial_id);
        switch (x->kind) {
        case SL_DECISION_PROPOSE:
            CHECK_MSG(t == NULL, "trial %s proposed twice", x->trial_id);
            CHECK(d->count < MAX_TRIALS);
            for (size_t k = 0; k < d->count; k++)
                CHECK(d->trials[k].ordinal != x->ordinal);
            t = &d->trials[d->count];
            memset(t, 0, sizeof *t);
            memcpy(t->id, x->trial_id, sizeof t->id);
            t->ordinal = x->ordinal;
            t->bracket = x->bracket;
            t->rung = x->rung;
            t->state = SL_TRIAL_PENDING;
            t->config = x->config;
            t->curve = d->curves[d->count];
            for (int o = 0; o < SL_STUDY_MAX_OBJECTIVES; o++)
                t->objectives[o] = NAN;
            d->count++;
            d->proposals++;
            CHECK_INT(x->epochs, d->spec.rungs[x->rung]);
            break;
        case SL_DECISION_PROMOTE:
            CHECK(t != NULL);
            if (!t)
                break;
            CHECK_MSG(t->state == SL_TRIAL_PAUSED && t->rung == x->rung - 1,
                      "promotion of %s repeated or out of place", x->trial_id);
            t->rung = x->rung;
            t->state = SL_TRIAL_PENDING;
            d->promotions++;
            snprintf(d->log[d->log_count++], sizeof d->log[0], "P %s %d", t->id, x->rung);
            break;
        case SL_DECISION_STOP:
            CHECK(t != NULL);
            if (!t)
                break;
            CHECK(t->state != SL_TRIAL_DONE && t->state != SL_TRIAL_FAILED);
            t->state = SL_TRIAL_DONE;
            d->stops++;
            snprintf(d->log[d->log_count++], sizeof d->log[0], "S %s", t->id);
            break;
        case SL_DECISION_FINISH:
            d->finished = true;
            break;
        }
    }
    sl_decisions_fini(&out);
    size_t waiting = 0;
    for (size_t i = 0; i < d->count; i++)
        if (d->trials[i].state == SL_TRIAL_PENDING && d->trials[i].epochs_done == 0)
            waiting++;
    if ((int)waiting > d->max_waiting)
        d->max_waiting = (int)waiting;
}

/* Runs to the end: workers take pending trials (higher rungs first), one
 * random running trial advances one epoch per step. */
static void run(drv_t *d, uint64_t seed, bool fail_some) {
    sl_rng_t rng;
    sl_rng_seed(&rng, seed);
    for (int step = 0; step < 100000 && !d->finished; step++) {
        decide(d);
        if (d->finished)
            break;
        int running = 0;
        for (size_t i = 0; i < d->count; i++)
            running += d->trials[i].state == SL_TRIAL_RUNNING;
        while (running < d->workers) {
            sl_trial_t *best = NULL;
            for (size_t i = 0; i < d->count; i++) {
                sl_trial_t *t = &d->trials[i];
                if (t->state != SL_TRIAL_PENDING)
                    continue;
                if (!best || t->rung > best->rung ||
                    (t->rung == best->rung && t->ordinal < best->ordinal))
                    best = t;
            }
            if (!best)
                break;
            best->state = SL_TRIAL_RUNNING;
            running++;
        }
        if (running == 0) {
            CHECK_MSG(0, "stuck: nothing running, nothing decided, study not finished");
            return;
        }
        int pick = (int)sl_rng_below(&rng, (uint64_t)running);
        for (size_t i = 0; i < d->count; i++) {
            sl_trial_t *t = &d->trials[i];
            if (t->state != SL_TRIAL_RUNNING || pick-- != 0)
                continue;
            if (fail_some && t->ordinal % 7 == 3) {
                t->state = SL_TRIAL_FAILED;
                break;
            }
            int e = ++t->epochs_done;
            d->curves[i][e - 1] = metric(d, t, e);
            t->curve_len = e;
            t->objectives[0] = d->curves[i][e - 1];
            if (e >= d->spec.rungs[t->rung])
                t->state = t->rung == d->spec.rung_count - 1 ? SL_TRIAL_DONE : SL_TRIAL_PAUSED;
            break;
        }
    }
    CHECK_MSG(d->finished, "study did not finish");
    for (size_t i = 0; i < d->count; i++)
        CHECK_MSG(d->trials[i].state == SL_TRIAL_DONE || d->trials[i].state == SL_TRIAL_FAILED,
                  "trial %s left %s", d->trials[i].id, sl_trial_state_name(d->trials[i].state));
}

#define SPACE                                                                                  \
    " \"trainer\": {\"type\": \"command\", \"command\": \"t {lr}\"},"                           \
    " \"search_space\": {\"lr\": {\"type\": \"real\", \"low\": 0.0001, \"high\": 1, \"log\": true}},"

static const char *asha_json =
    "{\"name\": \"a\", \"seed\": 1," SPACE
    " \"scheduler\": {\"type\": \"asha\", \"min_epochs\": 1, \"max_epochs\": 9, \"reduction\": 3},"
    " \"objectives\": [{\"metric\": \"acc\", \"goal\": \"max\"}], \"budget\": {\"trials\": 40}}";
static const char *sh_json =
    "{\"name\": \"s\", \"seed\": 2," SPACE
    " \"scheduler\": {\"type\": \"sh\", \"min_epochs\": 1, \"max_epochs\": 9, \"reduction\": 3},"
    " \"objectives\": [{\"metric\": \"acc\", \"goal\": \"max\"}], \"budget\": {\"trials\": 27}}";
static const char *hb_json =
    "{\"name\": \"h\", \"seed\": 3," SPACE
    " \"scheduler\": {\"type\": \"hyperband\", \"min_epochs\": 1, \"max_epochs\": 9, \"reduction\": 3},"
    " \"objectives\": [{\"metric\": \"acc\", \"goal\": \"max\"}]}";
static const char *fifo_json =
    "{\"name\": \"f\", \"seed\": 4," SPACE " \"scheduler\": {\"type\": \"fifo\", \"epochs\": 4},"
    " \"objectives\": [{\"metric\": \"acc\", \"goal\": \"min\"}], \"budget\": {\"trials\": 12}}";

static drv_t D1, D2; /* big: static */

static void test_fifo(void) {
    init(&D1, fifo_json, 3);
    run(&D1, 1, false);
    CHECK_INT(D1.count, 12);
    CHECK_INT(D1.promotions, 0);
    for (size_t i = 0; i < D1.count; i++)
        CHECK_INT(D1.trials[i].epochs_done, 4);
    CHECK(D1.max_waiting <= 3);
}

/* At the end of an ASHA study, the top floor(n_k/eta) results of every
 * rung k below the top were promoted (none left behind). */
static void asha_complete(drv_t *d) {
    for (int k = 0; k + 1 < d->spec.rung_count; k++) {
        double vals[MAX_TRIALS];
        int n = 0;
        for (size_t i = 0; i < d->count; i++) {
            double v = sl_trial_metric_at(&d->trials[i], d->spec.rungs[k]);
            if (!isnan(v))
                vals[n++] = v;
        }
        int top = n / d->spec.reduction;
        for (size_t i = 0; i < d->count; i++) {
            double v = sl_trial_metric_at(&d->trials[i], d->spec.rungs[k]);
            if (isnan(v))
                continue;
            int better = 0;
            for (int j = 0; j < n; j++)
                better += vals[j] > v;
            if (better < top)
                CHECK_MSG(d->trials[i].rung > k, "trial %s is #%d at rung %d of %d but was not "
                          "promoted", d->trials[i].id, better + 1, k, n);
        }
    }
}

static void test_asha(void) {
    for (uint64_t seed = 1; seed <= 30; seed++) {
        init(&D1, asha_json, 1 + (int)(seed % 5));
        run(&D1, seed, seed % 3 == 0);
        CHECK_INT(D1.count, 40);
        int top = 0;
        for (size_t i = 0; i < D1.count; i++)
            top += D1.trials[i].rung == 2;
        CHECK_MSG(top >= 1, "seed %llu: nobody reached the top rung", (unsigned long long)seed);
        CHECK(D1.max_waiting <= D1.workers);
        asha_complete(&D1);
    }
}

/* Sequential ASHA with one worker: no trial waits, the promoted set
 * includes the final top third. */
static void test_asha_sequential(void) {
    init(&D1, asha_json, 1);
    run(&D1, 7, false);
    int at[3] = {0};
    for (size_t i = 0; i < D1.count; i++)
        at[D1.trials[i].rung]++;
    CHECK(at[1] + at[2] >= 13);
    CHECK(at[2] >= 4);
    asha_complete(&D1);
}

static int cmp_str(const void *a, const void *b) { return strcmp(a, b); }

static void same_decisions(drv_t *a, drv_t *b) {
    qsort(a->log, (size_t)a->log_count, sizeof a->log[0], cmp_str);
    qsort(b->log, (size_t)b->log_count, sizeof b->log[0], cmp_str);
    CHECK_INT(a->log_count, b->log_count);
    for (int i = 0; i < a->log_count && i < b->log_count; i++)
        CHECK_STR(a->log[i], b->log[i]);
    CHECK_INT(a->count, b->count);
    for (size_t i = 0; i < a->count; i++)
        CHECK(find(b, a->trials[i].id) != NULL);
}

static void test_sh_order_independent(void) {
    init(&D1, sh_json, 1);
    run(&D1, 1, false);
    /* 27 -> 9 -> 3 */
    int at[3] = {0};
    for (size_t i = 0; i < D1.count; i++)
        at[D1.trials[i].rung]++;
    CHECK_INT(at[0], 18);
    CHECK_INT(at[1], 6);
    CHECK_INT(at[2], 3);
    for (uint64_t seed = 2; seed <= 25; seed++) {
        init(&D2, sh_json, 1 + (int)(seed % 6));
        run(&D2, seed, false);
        same_decisions(&D1, &D2);
    }
    /* failures too: the same trials fail whatever the order */
    init(&D1, sh_json, 2);
    run(&D1, 100, true);
    for (uint64_t seed = 101; seed <= 110; seed++) {
        init(&D2, sh_json, 1 + (int)(seed % 4));
        run(&D2, seed, true);
        same_decisions(&D1, &D2);
    }
}

static void test_hyperband(void) {
    init(&D1, hb_json, 1);
    CHECK_INT(D1.spec.brackets, 3);
    /* s_max = 2: brackets of 9 (from 1 epoch), 5 (from 3), 3 (from 9) */
    CHECK_INT(D1.spec.budget_trials, 9 + 5 + 3);
    run(&D1, 1, false);
    int per[3] = {0}, start_ok = 1;
    for (size_t i = 0; i < D1.count; i++) {
        per[D1.trials[i].bracket]++;
        start_ok &= D1.trials[i].rung >= D1.trials[i].bracket;
    }
    CHECK_INT(per[0], 9);
    CHECK_INT(per[1], 5);
    CHECK_INT(per[2], 3);
    CHECK(start_ok);
    for (uint64_t seed = 2; seed <= 15; seed++) {
        init(&D2, hb_json, 1 + (int)(seed % 5));
        run(&D2, seed, false);
        same_decisions(&D1, &D2);
    }
}

static void test_budget_and_cancel(void) {
    init(&D1, asha_json, 2);
    decide(&D1);
    CHECK_INT(D1.count, 2); /* paced by capacity */
    D1.trials[0].state = SL_TRIAL_RUNNING;
    sl_sched_view_t v;
    view_of(&D1, &v);
    v.cancelled = true;
    sl_decisions_t out = {0};
    CHECK_OK(sl_sched_decide(&D1.spec, &v, &out));
    CHECK_INT(out.count, 2); /* stop both, no finish while one runs */
    for (size_t i = 0; i < out.count; i++)
        CHECK_INT(out.items[i].kind, SL_DECISION_STOP);
    sl_decisions_fini(&out);
    D1.trials[0].state = SL_TRIAL_DONE;
    D1.trials[1].state = SL_TRIAL_DONE;
    view_of(&D1, &v);
    D1.spec.budget_time_s = 60;
    v.elapsed_s = 61;
    CHECK_OK(sl_sched_decide(&D1.spec, &v, &out));
    CHECK_INT(out.count, 1);
    CHECK_INT(out.items[0].kind, SL_DECISION_FINISH);
    CHECK_STR(out.items[0].reason, "time budget spent");
    sl_decisions_fini(&out);
}

/* The checker itself: an unjustified promotion is refused. */
static void test_check_promotion(void) {
    init(&D1, asha_json, 3);
    /* 6 trials paused at rung 0 with known values */
    for (int i = 0; i < 6; i++) {
        sl_trial_t *t = &D1.trials[i];
        memset(t, 0, sizeof *t);
        snprintf(t->id, sizeof t->id, "%016d", i);
        t->ordinal = (uint64_t)i;
        t->state = SL_TRIAL_PAUSED;
        t->epochs_done = 1;
        D1.curves[i][0] = 0.1 * i;
        t->curve = D1.curves[i];
        t->curve_len = 1;
    }
    D1.count = 6;
    sl_sched_view_t v;
    view_of(&D1, &v);
    char why[200];
    /* top floor(6/3) = 2: trials 5 and 4 */
    CHECK_OK(sl_sched_check_promotion(&D1.spec, &v, "0000000000000005", 1, why, sizeof why));
    CHECK_OK(sl_sched_check_promotion(&D1.spec, &v, "0000000000000004", 1, why, sizeof why));
    CHECK_ERR(sl_sched_check_promotion(&D1.spec, &v, "0000000000000003", 1, why, sizeof why),
              SL_EINTERNAL);
    CHECK(strstr(why, "#3 of 6") != NULL);
    CHECK_ERR(sl_sched_check_promotion(&D1.spec, &v, "0000000000000005", 2, why, sizeof why),
              SL_EINTERNAL);
    CHECK_ERR(sl_sched_check_promotion(&D1.spec, &v, "nope", 1, why, sizeof why), SL_EINTERNAL);
    /* the owner's question: the same rule, whatever the trial's state (its
       owner still holds it when it asks) */
    CHECK(sl_sched_asha_promotes(&D1.spec, &v, "0000000000000005", 0, why, sizeof why));
    CHECK(strstr(why, "#1 of 6 (top 2)") != NULL);
    CHECK(!sl_sched_asha_promotes(&D1.spec, &v, "0000000000000003", 0, NULL, 0));
    CHECK(!sl_sched_asha_promotes(&D1.spec, &v, "0000000000000005", 1, NULL, 0)); /* no result there */
    CHECK(!sl_sched_asha_promotes(&D1.spec, &v, "nope", 0, NULL, 0));
    D1.trials[4].state = SL_TRIAL_RUNNING;
    CHECK(sl_sched_asha_promotes(&D1.spec, &v, "0000000000000004", 0, NULL, 0));
    D1.trials[4].state = SL_TRIAL_PAUSED;
    sl_decisions_t out = {0};
    CHECK_OK(sl_sched_decide(&D1.spec, &v, &out));
    int promos = 0;
    for (size_t i = 0; i < out.count; i++)
        promos += out.items[i].kind == SL_DECISION_PROMOTE;
    CHECK_INT(promos, 2);
    sl_decisions_fini(&out);
    /* a promoted trial is not promoted again */
    D1.trials[5].rung = 1;
    D1.trials[5].state = SL_TRIAL_RUNNING;
    D1.trials[4].rung = 1;
    D1.trials[4].state = SL_TRIAL_PENDING;
    view_of(&D1, &v);
    CHECK_OK(sl_sched_decide(&D1.spec, &v, &out));
    for (size_t i = 0; i < out.count; i++)
        CHECK(out.items[i].kind != SL_DECISION_PROMOTE);
    sl_decisions_fini(&out);
}

static void test_round(void) {
    init(&D1, sh_json, 3);
    sl_sched_view_t v;
    view_of(&D1, &v);
    CHECK_INT(sl_sched_round(&D1.spec, &v), 0);
    run(&D1, 3, false);
    view_of(&D1, &v);
    CHECK_INT(sl_sched_round(&D1.spec, &v), 2);
}

int main(void) {
    sl_test_run("fifo", test_fifo);
    sl_test_run("asha", test_asha);
    sl_test_run("asha_sequential", test_asha_sequential);
    sl_test_run("sh_order_independent", test_sh_order_independent);
    sl_test_run("hyperband", test_hyperband);
    sl_test_run("budget_and_cancel", test_budget_and_cancel);
    sl_test_run("check_promotion", test_check_promotion);
    sl_test_run("round", test_round);
    return sl_test_finish();
}
