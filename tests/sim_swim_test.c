/* Membership under faults: many seeds, each a random cluster (4-24 nodes)
 * on a network that delays, reorders, duplicates and (in most seeds) loses
 * messages, with crashes, restarts, pauses, partitions and leaves; then a
 * quiet period and the checks of INVARIANTS.md M1-M6 (M2, M3 and M4 also
 * on every event, M6 also per probe period and via sl_swim_check after
 * every step).
 *
 *   SL_SEEDS=N   number of seeds (default 400)
 *   SL_SEED=S    run only seed S, verbosely (the replay command) */
#include <stdio.h>
#include <stdlib.h>

#include "starling/sim.h"
#include "testlib.h"

#define FAULT_START_MS 3000
#define FAULT_END_MS 40000 /* every fault is over by then */
#define QUIET_MS 45000     /* heal bound: quiet time before the checks */
#define REST_MS 10000      /* bytes at rest measured over this */
#define REST_CAP_BPS 3000.0
#define DETECT_BOUND_MS 30000 /* M1 bound (faults, loss and health slow it) */
#define MAX_NODES 24

enum { A_CRASH, A_RESTART, A_PAUSE, A_RESUME, A_SPLIT, A_HEAL, A_LEAVE, A_LOSS };
static const char *action_names[] = {"crash", "restart", "pause", "resume",
                                     "split", "heal", "leave", "loss"};

/* One scheduled action of a seed's fault plan. */
typedef struct {
    int64_t at_ms;  /* when */
    int action;     /* A_* */
    uint32_t node;  /* subject */
    uint32_t arg;   /* A_SPLIT: number of sides; A_LOSS: percent */
} action_t;

static bool verbose;

static int by_time(const void *a, const void *b) {
    const action_t *x = a, *y = b;
    return (x->at_ms > y->at_ms) - (x->at_ms < y->at_ms);
}

/* Draws the fault plan of a seed: 2-7 faults of random kinds, overlapping,
 * with at most a third of the nodes gone for good. */
static int plan(sl_rng_t *rng, uint32_t n, action_t *acts) {
    int k = 0;
    uint32_t gone = 0;
    bool used[MAX_NODES] = {0};
    int faults = 2 + (int)sl_rng_below(rng, 6);
    for (int f = 0; f < faults; f++) {
        int64_t at = FAULT_START_MS + (int64_t)sl_rng_below(rng, FAULT_END_MS - FAULT_START_MS - 12000);
        int64_t len = 200 + (int64_t)sl_rng_below(rng, 10000);
        uint32_t node = (uint32_t)sl_rng_below(rng, n);
        int kind = (int)sl_rng_below(rng, 6);
        if (kind <= 1 || kind == 4) { /* crash, crash+restart, leave */
            if (used[node])
                continue;
            used[node] = true;
        }
        switch (kind) {
        case 0:
            if (gone >= n / 3)
                continue;
            gone++;
            acts[k++] = (action_t){at, A_CRASH, node, 0};
            break;
        case 1:
            acts[k++] = (action_t){at, A_CRASH, node, 0};
            acts[k++] = (action_t){at + len, A_RESTART, node, 0};
            break;
        case 2:
            acts[k++] = (action_t){at, A_PAUSE, node, 0};
            acts[k++] = (action_t){at + len, A_RESUME, node, 0};
            break;
        case 3:
            acts[k++] = (action_t){at, A_SPLIT, 0, 2 + (uint32_t)sl_rng_below(rng, 2)};
            acts[k++] = (action_t){at + len, A_HEAL, 0, 0};
            break;
        case 4:
            if (sl_rng_below(rng, 2)) {
                acts[k++] = (action_t){at, A_LEAVE, node, 0};
                acts[k++] = (action_t){at + len + 1000, A_RESTART, node, 0};
            } else {
                if (gone >= n / 3)
                    continue;
                gone++;
                acts[k++] = (action_t){at, A_LEAVE, node, 0};
            }
            break;
        case 5: {
            static const uint32_t pct[] = {0, 1, 5, 10};
            acts[k++] = (action_t){at, A_LOSS, 0, pct[sl_rng_below(rng, 4)]};
            break;
        }
        }
    }
    qsort(acts, (size_t)k, sizeof *acts, by_time);
    return k;
}

/* Runs one seed; returns the number of violations (and prints them). */
static size_t run_seed(uint64_t seed) {
    sl_rng_t rng;
    sl_rng_seed(&rng, seed);
    sl_simswim_config_t cfg = {0};
    cfg.nodes = 4 + (uint32_t)sl_rng_below(&rng, MAX_NODES - 3);
    cfg.seed = seed;
    cfg.net.delay_min_ms = (uint32_t)sl_rng_below(&rng, 5);
    cfg.net.delay_max_ms = cfg.net.delay_min_ms + (uint32_t)sl_rng_below(&rng, 40);
    cfg.net.duplicate = sl_rng_below(&rng, 2) ? 0.05 : 0;
    static const double losses[] = {0, 0, 0.01, 0.05, 0.1};
    cfg.net.loss = losses[sl_rng_below(&rng, 5)];
    cfg.timing.push_pull_interval_ms = 5000;
    cfg.timing.seed_redial_ms = 10000;
    cfg.join_spread_ms = 2000;
    cfg.check_cores = true;
    cfg.check_safety = true;
    action_t acts[32];
    int nacts = plan(&rng, cfg.nodes, acts);
    if (verbose) {
        printf("seed %llu: %u nodes, delay %u..%u ms, dup %.2f, loss %.2f\n",
               (unsigned long long)seed, cfg.nodes, cfg.net.delay_min_ms, cfg.net.delay_max_ms,
               cfg.net.duplicate, cfg.net.loss);
        for (int i = 0; i < nacts; i++)
            printf("  t=%lld %s n%u (%u)\n", (long long)acts[i].at_ms,
                   action_names[acts[i].action], acts[i].node, acts[i].arg);
    }
    sl_simswim_t *c = NULL;
    sl_err err = sl_simswim_new(&cfg, &c);
    if (err) {
        printf("seed %llu: sl_simswim_new: %s\n", (unsigned long long)seed, sl_errname(err));
        return 1;
    }
    sl_sim_net_t net = cfg.net;
    uint32_t group[MAX_NODES];
    for (int i = 0; i < nacts && !err; i++) {
        action_t *a = &acts[i];
        if ((err = sl_simswim_run_until(c, a->at_ms)) != SL_OK)
            break;
        switch (a->action) {
        case A_CRASH: sl_simswim_crash(c, a->node); break;
        case A_RESTART:
            if (!sl_simswim_core(c, a->node))
                (void)sl_simswim_restart(c, a->node); /* may still be exiting */
            break;
        case A_PAUSE: (void)sl_simswim_pause(c, a->node, true); break;
        case A_RESUME: (void)sl_simswim_pause(c, a->node, false); break;
        case A_SPLIT:
            for (uint32_t j = 0; j < cfg.nodes; j++)
                group[j] = (uint32_t)sl_rng_below(&rng, a->arg);
            sl_simswim_partition(c, group);
            break;
        case A_HEAL: sl_simswim_partition(c, NULL); break;
        case A_LEAVE:
            if (sl_simswim_core(c, a->node))
                (void)sl_simswim_leave(c, a->node);
            break;
        case A_LOSS:
            net.loss = a->arg / 100.0;
            sl_simswim_set_net(c, &net);
            break;
        }
    }
    /* quiet: the network whole, no loss, nobody paused */
    net.loss = 0;
    sl_simswim_set_net(c, &net);
    sl_simswim_partition(c, NULL);
    for (uint32_t j = 0; j < cfg.nodes; j++)
        (void)sl_simswim_pause(c, j, false);
    int64_t t = FAULT_END_MS + QUIET_MS;
    if (!err)
        err = sl_simswim_run_until(c, t);
    sl_simswim_mark(c);
    if (!err)
        err = sl_simswim_run_until(c, t + REST_MS);
    if (err)
        printf("seed %llu: run failed: %s\n", (unsigned long long)seed, sl_errname(err));
    sl_simswim_check_quiet(c, DETECT_BOUND_MS, REST_CAP_BPS);
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
    int n = sl_test_seed_count(400);
    int failed = 0;
    for (int i = 1; i <= n; i++)
        failed += run_seed((uint64_t)i) != 0;
    printf("%d of %d seeds failed\n", failed, n);
    CHECK_INT(failed, 0);
}

/* The same seed gives the same run, message for message. */
static uint64_t fingerprint(uint64_t seed) {
    sl_simswim_config_t cfg = {0};
    cfg.nodes = 12;
    cfg.seed = seed;
    cfg.net.delay_max_ms = 30;
    cfg.net.loss = 0.05;
    cfg.net.duplicate = 0.05;
    cfg.join_spread_ms = 1000;
    sl_simswim_t *c = NULL;
    CHECK_OK(sl_simswim_new(&cfg, &c));
    if (!c)
        return 0;
    CHECK_OK(sl_simswim_run_until(c, 5000));
    sl_simswim_crash(c, 4);
    CHECK_OK(sl_simswim_pause(c, 7, true));
    CHECK_OK(sl_simswim_run_until(c, 9000));
    CHECK_OK(sl_simswim_pause(c, 7, false));
    CHECK_OK(sl_simswim_run_until(c, 20000));
    sl_sim_stats_t st;
    sl_sim_stats(sl_simswim_sim(c), &st);
    uint64_t h = st.sent * 31 + st.bytes * 17 + st.lost * 7 + st.ticks;
    for (uint32_t i = 0; i < cfg.nodes; i++) {
        sl_swim_t *core = sl_simswim_core(c, i);
        if (!core)
            continue;
        for (size_t j = 0; j < sl_swim_member_count(core); j++) {
            sl_swim_member_t m;
            sl_swim_member_at(core, j, &m);
            h = sl_mix64(h ^ (m.incarnation * 4 + m.state) ^ (uint64_t)m.state_change_ms << 8);
        }
    }
    sl_simswim_destroy(&c);
    return h;
}

static void test_replay_identical(void) {
    CHECK(fingerprint(7) == fingerprint(7));
    CHECK(fingerprint(7) != fingerprint(8));
}

int main(void) {
    sl_log_set_level(SL_LOG_WARNING);
    sl_test_run("replay_identical", test_replay_identical);
    sl_test_run("seeds", test_seeds);
    return sl_test_finish();
}
