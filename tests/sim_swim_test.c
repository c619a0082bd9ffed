/* Membership under faults: many seeds, each a random cluster (4-13 nodes)
 * on a network that delays, reorders, duplicates and (in most seeds) loses
 * messages, with crashes, restarts, pauses, partitions and leaves; then a
 * quiet period and the checks of INVARIANTS.md M1-M6 (M2, M3 and M4 also
 * on every event, M6 also per probe period and via sl_swim_check after
 * every step).
 *
 *   SL_SEEDS=N   number of seeds (default 200)
 *   SL_SEED=S    run only seed S, verbosely (the replay command) */
#include <stdio.h>
#include <stdlib.h>

#include "starling/sim.h"
#include "testlib.h"

#define FAULT_START_MS 3000
#define FAULT_END_MS 30000
#define QUIET_MS 45000 /* heal and detection bound after the last fault */
#define REST_MS 10000  /* bytes at rest measured over this */
#define REST_CAP_BPS 2500.0

typedef struct {
    int64_t at_ms; /* when */
    int kind;      /* fault kind */
    uint32_t node; /* subject */
    int64_t len_ms; /* duration (pause, partition, crash before restart) */
} fault_t;

enum { F_CRASH, F_CRASH_RESTART, F_PAUSE, F_PARTITION, F_LEAVE, F_KINDS };

static bool verbose;

/* Runs one seed; returns the number of violations (and prints them). */
static size_t run_seed(uint64_t seed) {
    sl_rng_t rng;
    sl_rng_seed(&rng, seed);
    sl_simswim_config_t cfg = {0};
    cfg.nodes = 4 + (uint32_t)sl_rng_below(&rng, 10);
    cfg.seed = seed;
    cfg.net.delay_min_ms = (uint32_t)sl_rng_below(&rng, 5);
    cfg.net.delay_max_ms = cfg.net.delay_min_ms + (uint32_t)sl_rng_below(&rng, 40);
    cfg.net.duplicate = sl_rng_below(&rng, 2) ? 0.05 : 0;
    static const double losses[] = {0, 0, 0.01, 0.05, 0.1};
    double loss = losses[sl_rng_below(&rng, 5)];
    cfg.net.loss = loss;
    cfg.timing.push_pull_interval_ms = 5000;
    cfg.timing.seed_redial_ms = 10000;
    cfg.join_spread_ms = 2000;
    cfg.check_cores = true;
    cfg.check_safety = true;
    sl_simswim_t *c = NULL;
    sl_err err = sl_simswim_new(&cfg, &c);
    if (err) {
        printf("seed %llu: sl_simswim_new: %s\n", (unsigned long long)seed, sl_errname(err));
        return 1;
    }
    /* the fault schedule: at most a third of the nodes lost for good */
    fault_t faults[8];
    int nf = 1 + (int)sl_rng_below(&rng, 4);
    uint32_t lost = 0, max_lost = cfg.nodes / 3;
    bool busy[16] = {0};
    int kept = 0;
    for (int i = 0; i < nf; i++) {
        fault_t f;
        f.at_ms = FAULT_START_MS + (int64_t)sl_rng_below(&rng, FAULT_END_MS - FAULT_START_MS - 8000);
        f.kind = (int)sl_rng_below(&rng, F_KINDS);
        f.node = (uint32_t)sl_rng_below(&rng, cfg.nodes);
        f.len_ms = 300 + (int64_t)sl_rng_below(&rng, 7000);
        if (busy[f.node])
            continue;
        if ((f.kind == F_CRASH || f.kind == F_LEAVE) && lost >= max_lost)
            f.kind = F_PAUSE;
        if (f.kind == F_CRASH || f.kind == F_LEAVE)
            lost++;
        busy[f.node] = true;
        faults[kept++] = f;
    }
    /* in time order */
    for (int i = 1; i < kept; i++)
        for (int j = i; j > 0 && faults[j].at_ms < faults[j - 1].at_ms; j--) {
            fault_t t = faults[j];
            faults[j] = faults[j - 1];
            faults[j - 1] = t;
        }
    if (verbose) {
        printf("seed %llu: %u nodes, delay %u..%u ms, dup %.2f, loss %.2f\n",
               (unsigned long long)seed, cfg.nodes, cfg.net.delay_min_ms, cfg.net.delay_max_ms,
               cfg.net.duplicate, loss);
        for (int i = 0; i < kept; i++)
            printf("  t=%lld fault %d on n%u for %lld ms\n", (long long)faults[i].at_ms,
                   faults[i].kind, faults[i].node, (long long)faults[i].len_ms);
    }
    uint32_t group[16];
    for (int i = 0; i < kept && !err; i++) {
        fault_t *f = &faults[i];
        if ((err = sl_simswim_run_until(c, f->at_ms)) != SL_OK)
            break;
        switch (f->kind) {
        case F_CRASH: sl_simswim_crash(c, f->node); break;
        case F_CRASH_RESTART:
            sl_simswim_crash(c, f->node);
            err = sl_simswim_run_until(c, f->at_ms + f->len_ms);
            if (!err)
                err = sl_simswim_restart(c, f->node);
            break;
        case F_PAUSE:
            if (sl_simswim_core(c, f->node)) {
                sl_simswim_pause(c, f->node, true);
                err = sl_simswim_run_until(c, f->at_ms + f->len_ms);
                sl_simswim_pause(c, f->node, false);
            }
            break;
        case F_PARTITION:
            for (uint32_t j = 0; j < cfg.nodes; j++)
                group[j] = (uint32_t)sl_rng_below(&rng, 2);
            sl_simswim_partition(c, group);
            err = sl_simswim_run_until(c, f->at_ms + f->len_ms + 5000);
            sl_simswim_partition(c, NULL);
            break;
        case F_LEAVE:
            if (sl_simswim_core(c, f->node))
                err = sl_simswim_leave(c, f->node);
            break;
        }
    }
    /* quiet: the network whole, no loss */
    sl_sim_net_t net = cfg.net;
    net.loss = 0;
    sl_simswim_set_net(c, &net);
    int64_t t = FAULT_END_MS + 8000 + QUIET_MS;
    if (!err)
        err = sl_simswim_run_until(c, t);
    sl_simswim_mark(c);
    if (!err)
        err = sl_simswim_run_until(c, t + REST_MS);
    if (err)
        printf("seed %llu: run failed: %s\n", (unsigned long long)seed, sl_errname(err));
    sl_simswim_check_quiet(c, REST_CAP_BPS);
    size_t v = sl_simswim_violations(c) + (err != SL_OK);
    if (v || verbose) {
        for (size_t i = 0; i < sl_simswim_violations(c) && i < 10; i++)
            printf("seed %llu: %s\n", (unsigned long long)seed, sl_simswim_violation(c, i));
        if (v)
            printf("seed %llu FAILED (%zu violations); replay: SL_SEED=%llu "
                   "build/tests/sim_swim_test\n",
                   (unsigned long long)seed, v, (unsigned long long)seed);
    }
    if (verbose) {
        sl_sim_stats_t st;
        sl_sim_stats(sl_simswim_sim(c), &st);
        printf("seed %llu: %llu messages, %llu lost, %llu cut, %llu bytes\n",
               (unsigned long long)seed, (unsigned long long)st.sent,
               (unsigned long long)st.lost, (unsigned long long)st.cut,
               (unsigned long long)st.bytes);
    }
    sl_simswim_destroy(&c);
    return v;
}

static void test_seeds(void) {
    const char *one = getenv("SL_SEED");
    if (one) {
        verbose = true;
        CHECK_INT(run_seed(strtoull(one, NULL, 10)), 0);
        return;
    }
    int n = sl_test_seed_count(200);
    int failed = 0;
    for (int i = 1; i <= n; i++)
        failed += run_seed((uint64_t)i) != 0;
    printf("%d of %d seeds failed\n", failed, n);
    CHECK_INT(failed, 0);
}

int main(void) {
    sl_log_set_level(SL_LOG_WARNING);
    sl_test_run("seeds", test_seeds);
    return sl_test_finish();
}
