/* A checker that cannot fail proves nothing (INVARIANTS.md): for each of
 * M1-M6, one scenario run twice on the simulator, first as written (no
 * violation) and then with a bug planted behind sl_swim_set_bug, which the
 * checker of that property must catch. */
#include <stdio.h>

#include "starling/sim.h"
#include "sim/sim_test.h"
#include "testlib.h"

#define N 8

typedef enum { SC_CRASH, SC_STEADY, SC_PAUSE, SC_FLAP, SC_LEAVE, SC_PARTITION } scenario;

/* Runs `sc` with `bug` planted; returns the checker's verdict for `m`. */
static bool run(scenario sc, sl_swim_bug bug, int m, uint64_t seed) {
    sl_simswim_config_t cfg = {0};
    cfg.nodes = N;
    cfg.seed = seed;
    cfg.net.delay_min_ms = 1;
    cfg.net.delay_max_ms = 10;
    cfg.timing.push_pull_interval_ms = 5000;
    cfg.timing.seed_redial_ms = 10000;
    cfg.join_spread_ms = 1000;
    cfg.check_cores = true;
    cfg.check_safety = true;
    sl_simswim_t *c = NULL;
    CHECK_OK(sl_simswim_new(&cfg, &c));
    if (!c)
        return false;
    sl_simswim_set_bug(c, bug);
    CHECK_OK(sl_simswim_run_until(c, 5000));
    uint32_t group[N];
    switch (sc) {
    case SC_CRASH: sl_simswim_crash(c, 3); break;
    case SC_STEADY: break;
    case SC_PAUSE:
        CHECK_OK(sl_simswim_pause(c, 3, true));
        CHECK_OK(sl_simswim_run_until(c, 15000));
        CHECK_OK(sl_simswim_pause(c, 3, false));
        break;
    case SC_FLAP: /* paused again and again: refutations race old records */
        for (int i = 0; i < 6; i++) {
            CHECK_OK(sl_simswim_pause(c, 3, true));
            CHECK_OK(sl_simswim_run_until(c, 5000 + 6000 * i + 4000));
            CHECK_OK(sl_simswim_pause(c, 3, false));
            CHECK_OK(sl_simswim_run_until(c, 5000 + 6000 * i + 6000));
        }
        break;
    case SC_LEAVE: CHECK_OK(sl_simswim_leave(c, 3)); break;
    case SC_PARTITION:
        for (uint32_t i = 0; i < N; i++)
            group[i] = i % 2;
        CHECK_OK(sl_simswim_partition(c, group));
        CHECK_OK(sl_simswim_run_until(c, 25000));
        CHECK_OK(sl_simswim_partition(c, NULL));
        break;
    }
    CHECK_OK(sl_simswim_run_until(c, 70000));
    sl_simswim_mark(c);
    CHECK_OK(sl_simswim_run_until(c, 80000));
    sl_simswim_check_quiet(c, 20000, 2500.0);
    bool caught = sl_simswim_violated(c, m);
    if (bug == SL_SWIM_BUG_NONE && sl_simswim_violations(c))
        for (size_t i = 0; i < sl_simswim_violations(c) && i < 5; i++)
            printf("  unexpected: %s\n", sl_simswim_violation(c, i));
    if (bug != SL_SWIM_BUG_NONE && caught)
        printf("  caught: %s\n", sl_simswim_violation(c, 0));
    sl_simswim_destroy(&c);
    return caught;
}

static void expect(scenario sc, sl_swim_bug bug, int m) {
    for (uint64_t seed = 1; seed <= 3; seed++) {
        CHECK_MSG(!run(sc, SL_SWIM_BUG_NONE, m, seed), "M%d flagged without the bug (seed %llu)",
                  m, (unsigned long long)seed);
        CHECK_MSG(run(sc, bug, m, seed), "M%d checker missed planted bug %d (seed %llu)", m, bug,
                  (unsigned long long)seed);
    }
}

static void test_m1_completeness(void) { expect(SC_CRASH, SL_SWIM_BUG_NO_SUSPECT, 1); }
static void test_m2_accuracy(void) { expect(SC_STEADY, SL_SWIM_BUG_EAGER_DEAD, 2); }
static void test_m3_refutation(void) { expect(SC_PAUSE, SL_SWIM_BUG_NO_REFUTE, 3); }
static void test_m3_incarnations(void) { expect(SC_FLAP, SL_SWIM_BUG_INC_DOWN, 3); }
static void test_m4_leave(void) { expect(SC_LEAVE, SL_SWIM_BUG_LEFT_AS_DEAD, 4); }
static void test_m5_convergence(void) { expect(SC_PARTITION, SL_SWIM_BUG_NO_PUSH_PULL, 5); }
static void test_m6_resources(void) { expect(SC_STEADY, SL_SWIM_BUG_GOSSIP_FOREVER, 6); }

int main(void) {
    sl_log_set_level(SL_LOG_WARNING - 1); /* the planted bugs make noise */
    sl_test_run("m1_completeness", test_m1_completeness);
    sl_test_run("m2_accuracy", test_m2_accuracy);
    sl_test_run("m3_refutation", test_m3_refutation);
    sl_test_run("m3_incarnations", test_m3_incarnations);
    sl_test_run("m4_leave", test_m4_leave);
    sl_test_run("m5_convergence", test_m5_convergence);
    sl_test_run("m6_resources", test_m6_resources);
    return sl_test_finish();
}
