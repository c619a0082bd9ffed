/* sl-sim: the membership core at scale on the deterministic simulator
 * (docs/simulator.md). Forms a cluster, spreads one update, crashes
 * members, and prints rounds to convergence, rounds for the update to reach
 * 50 % / 99 % / 99.99 % / all of the nodes, detection times and bytes per
 * node per second. Same flags and seed, same output. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "starling/sim.h"

typedef struct {
    uint32_t nodes;        /* --nodes */
    uint64_t seed;         /* --seed */
    double loss;           /* --loss */
    double dup;            /* --dup */
    uint32_t delay_min;    /* --delay MIN..MAX */
    uint32_t delay_max;
    int join;              /* --join / --preload; -1: by size */
    uint32_t crash;        /* --crash K */
    sl_swim_timing_t timing; /* --probe-interval ... */
    bool check;            /* --check: sl_swim_check after every step */
} opts_t;

static void usage(FILE *f) {
    fprintf(f,
        "usage: sl-sim [options]\n"
        "Runs N membership cores (SWIM + Lifeguard) in one process on a virtual\n"
        "clock and network, deterministic from --seed, and prints:\n"
        "  convergence  rounds until every node holds every other one alive\n"
        "               (a fresh cluster joining through seeds; --join)\n"
        "  spread       rounds until a metadata update of one node reaches\n"
        "               50 %%, 99 %%, 99.99 %% and 100 %% of the others\n"
        "  detection    time from a crash to DEAD in each survivor's view\n"
        "               (median, max) and rounds until every survivor has it\n"
        "  bytes        bytes sent per node per second at rest and while\n"
        "               spreading, on the wire encoding (header + body)\n"
        "A round is one gossip interval (default 100 ms); probe periods\n"
        "(default 1250 ms) are printed beside it.\n"
        "\n"
        "options:\n"
        "  --nodes N            cluster size (default 1000)\n"
        "  --seed S             run seed (default 1)\n"
        "  --loss P             message loss rate, 0..1 (default 0)\n"
        "  --dup P              duplicate rate, 0..1 (default 0)\n"
        "  --delay MIN..MAX     one-way delay in ms, uniform (default 1..5)\n"
        "  --join               form the cluster by joins through seeds\n"
        "                       (default for N <= 2000)\n"
        "  --preload            start formed: every node knows every other\n"
        "                       (default for N > 2000)\n"
        "  --crash K            members crashed for the detection figures (1)\n"
        "  --probe-interval MS  (default 1250)  --probe-timeout MS  (400)\n"
        "  --gossip-interval MS (default 100)   --fanout K          (3)\n"
        "  --lambda L           retransmit multiplier (default 4)\n"
        "  --suspicion-mult M   (default 1)     --push-pull MS  (30000)\n"
        "  --check              run sl_swim_check after every step (slow)\n"
        "  --help               this text\n"
        "\n"
        "example: sl-sim --nodes 10000 --seed 1 --loss 0.1\n");
}

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static long rss_mib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * 4096 / (1 << 20);
}

static void die_on(sl_err err, const char *what) {
    if (err) {
        fprintf(stderr, "sl-sim: %s: %s\n", what, sl_strerror(err));
        exit(1);
    }
}

static int parse(int argc, char **argv, opts_t *o) {
    static const struct option longopts[] = {
        {"nodes", required_argument, 0, 'n'},        {"seed", required_argument, 0, 's'},
        {"loss", required_argument, 0, 'l'},         {"dup", required_argument, 0, 'd'},
        {"delay", required_argument, 0, 'D'},        {"join", no_argument, 0, 'j'},
        {"preload", no_argument, 0, 'p'},            {"crash", required_argument, 0, 'c'},
        {"probe-interval", required_argument, 0, 1}, {"probe-timeout", required_argument, 0, 2},
        {"gossip-interval", required_argument, 0, 3}, {"fanout", required_argument, 0, 4},
        {"lambda", required_argument, 0, 5},         {"suspicion-mult", required_argument, 0, 6},
        {"push-pull", required_argument, 0, 7},      {"check", no_argument, 0, 8},
        {"help", no_argument, 0, 'h'},               {0, 0, 0, 0}};
    int ch;
    char *end;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        unsigned long v = optarg ? strtoul(optarg, &end, 10) : 0;
        switch (ch) {
        case 'n': o->nodes = (uint32_t)v; break;
        case 's': o->seed = strtoull(optarg, NULL, 10); break;
        case 'l': o->loss = strtod(optarg, NULL); break;
        case 'd': o->dup = strtod(optarg, NULL); break;
        case 'D':
            if (sscanf(optarg, "%u..%u", &o->delay_min, &o->delay_max) != 2) {
                fprintf(stderr, "sl-sim: --delay wants MIN..MAX in ms, e.g. 1..5\n");
                return 2;
            }
            break;
        case 'j': o->join = 1; break;
        case 'p': o->join = 0; break;
        case 'c': o->crash = (uint32_t)v; break;
        case 1: o->timing.probe_interval_ms = (uint32_t)v; break;
        case 2: o->timing.probe_timeout_ms = (uint32_t)v; break;
        case 3: o->timing.gossip_interval_ms = (uint32_t)v; break;
        case 4: o->timing.gossip_fanout = (uint32_t)v; break;
        case 5: o->timing.retransmit_mult = (uint32_t)v; break;
        case 6: o->timing.suspicion_mult = (uint32_t)v; break;
        case 7: o->timing.push_pull_interval_ms = (uint32_t)v; break;
        case 8: o->check = true; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sl-sim: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }
    if (o->nodes < 2 || o->nodes > 100000) {
        fprintf(stderr, "sl-sim: --nodes must be 2..100000\n");
        return 2;
    }
    if (o->loss < 0 || o->loss >= 1 || o->dup < 0 || o->dup >= 1) {
        fprintf(stderr, "sl-sim: --loss and --dup are rates in [0, 1)\n");
        return 2;
    }
    if (o->crash >= o->nodes / 2) {
        fprintf(stderr, "sl-sim: --crash must be below half of --nodes\n");
        return 2;
    }
    return 0;
}

/* Time at which `frac` of `total` watchers held the watched update. */
static int64_t time_at(sl_simswim_t *c, uint32_t total, double frac) {
    uint32_t k = (uint32_t)ceil(frac * total - 1e-9);
    if (k < 1)
        k = 1;
    return sl_simswim_watch_time(c, k);
}

static void print_spread(const char *label, int64_t t, int64_t t0, uint32_t giv, uint32_t piv) {
    if (t < 0) {
        printf("  %-7s not reached\n", label);
        return;
    }
    int64_t d = t - t0;
    printf("  %-7s %6lld ms  %5.1f rounds  %4.1f probe periods\n", label, (long long)d,
           (double)d / giv, (double)d / piv);
}

int main(int argc, char **argv) {
    opts_t o = {0};
    o.nodes = 1000;
    o.seed = 1;
    o.delay_min = 1;
    o.delay_max = 5;
    o.join = -1;
    o.crash = 1;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;
    if (o.join < 0)
        o.join = o.nodes <= 2000;
    sl_log_set_level(SL_LOG_WARNING);
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows in a log file */
    sl_swim_config_t defaults;
    sl_swim_config_defaults(&defaults);
    sl_simswim_config_t cfg = {0};
    cfg.nodes = o.nodes;
    cfg.seed = o.seed;
    cfg.net.delay_min_ms = o.delay_min;
    cfg.net.delay_max_ms = o.delay_max;
    cfg.net.duplicate = o.dup;
    cfg.net.loss = o.loss;
    cfg.timing = o.timing;
    cfg.preload = !o.join;
    cfg.check_cores = o.check;
    cfg.check_safety = false;
    cfg.msgs_per_period_cap = UINT32_MAX - 1;
    uint32_t giv = o.timing.gossip_interval_ms ? o.timing.gossip_interval_ms
                                               : defaults.timing.gossip_interval_ms;
    uint32_t piv = o.timing.probe_interval_ms ? o.timing.probe_interval_ms
                                              : defaults.timing.probe_interval_ms;

    printf("sl-sim: %u nodes, seed %llu, loss %.3f, dup %.3f, delay %u..%u ms, %s\n", o.nodes,
           (unsigned long long)o.seed, o.loss, o.dup, o.delay_min, o.delay_max,
           o.join ? "joining through seeds" : "preloaded tables");
    double w0 = wall();
    sl_simswim_t *c = NULL;
    die_on(sl_simswim_new(&cfg, &c), "creating the cluster");
    sl_sim_t *sim = sl_simswim_sim(c);
    printf("setup: %.1f s wall, %ld MiB resident\n", wall() - w0, rss_mib());

    /* 1. convergence: every node holds all N alive */
    int64_t conv = -1, t = 0, step = giv;
    if (o.join) {
        int64_t limit = 600000;
        for (t = step; t <= limit; t += step) {
            die_on(sl_simswim_run_until(c, t), "running");
            bool all = true;
            for (uint32_t i = 0; i < o.nodes && all; i++)
                all = sl_swim_alive_count(sl_simswim_core(c, i)) == o.nodes;
            if (all) {
                conv = t;
                break;
            }
        }
        if (conv < 0)
            printf("convergence: not within %lld ms\n", (long long)limit);
        else
            printf("convergence: %lld ms = %.0f rounds = %.1f probe periods (all %u nodes "
                   "hold all alive)\n",
                   (long long)conv, (double)conv / giv, (double)conv / piv, o.nodes);
        t = conv < 0 ? t : conv;
    } else {
        printf("convergence: n/a (preloaded tables; run with --join to measure it)\n");
    }

    /* 2. bytes at rest over 10 s */
    int64_t warm = t + 5000;
    die_on(sl_simswim_run_until(c, warm), "running");
    sl_simswim_mark(c);
    sl_sim_stats_t s0, s1;
    sl_sim_stats(sim, &s0);
    die_on(sl_simswim_run_until(c, warm + 10000), "running");
    sl_sim_stats(sim, &s1);
    double rest = 0;
    for (uint32_t i = 0; i < o.nodes; i++)
        rest += (double)sl_simswim_bytes_since_mark(c, i);
    rest /= o.nodes * 10.0;
    printf("bytes at rest: %.0f B/s per node (%.1f messages/s per node)\n", rest,
           (double)(s1.sent - s0.sent) / o.nodes / 10.0);

    /* 3. spread of one update (node 0 changes its metadata) */
    int64_t t0 = warm + 10000;
    die_on(sl_simswim_run_until(c, t0), "running");
    sl_swim_t *origin = sl_simswim_core(c, 0);
    uint64_t inc = sl_swim_incarnation(origin) + 1;
    sl_simswim_watch(c, 0, inc, SL_SWIM_STATE_NONE);
    const uint8_t meta[] = {0x81, 0xA3, 'v', 'e', 'r', 0xA1, '2'}; /* {"ver": "2"} */
    die_on(sl_swim_set_meta(origin, t0, meta, sizeof meta), "updating metadata");
    die_on(sl_simswim_touch(c, 0), "updating metadata");
    sl_simswim_mark(c);
    uint32_t others = o.nodes - 1;
    int64_t done = -1;
    for (t = t0 + 10; t <= t0 + 60000; t += 10) {
        die_on(sl_simswim_run_until(c, t), "running");
        if (sl_simswim_watch_count(c) >= others) {
            done = t;
            break;
        }
    }
    int64_t spread_end = done >= 0 ? done : t;
    double spread_bps = 0;
    for (uint32_t i = 0; i < o.nodes; i++)
        spread_bps += (double)sl_simswim_bytes_since_mark(c, i);
    spread_bps = spread_bps * 1000.0 / o.nodes / (double)(spread_end - t0 + 1);
    printf("spread of one update to the %u other nodes (from t=%lld ms):\n", others,
           (long long)t0);
    print_spread("50%", time_at(c, others, 0.5), t0, giv, piv);
    print_spread("99%", time_at(c, others, 0.99), t0, giv, piv);
    print_spread("99.99%", time_at(c, others, 0.9999), t0, giv, piv);
    print_spread("100%", done >= 0 ? sl_simswim_watch_time(c, others) : -1, t0, giv, piv);
    printf("  bytes while spreading: %.0f B/s per node\n", spread_bps);

    /* 4. detection: crash K members, one after another, 30 s apart */
    int64_t tc = spread_end + 5000;
    die_on(sl_simswim_run_until(c, tc), "running");
    for (uint32_t k = 0; k < o.crash; k++) {
        uint32_t victim = 1 + (uint32_t)sl_rng_below(sl_sim_rng(sim), o.nodes - 1);
        while (!sl_simswim_core(c, victim))
            victim = 1 + (victim % (o.nodes - 1));
        uint32_t alive = 0;
        for (uint32_t i = 0; i < o.nodes; i++)
            alive += sl_simswim_core(c, i) != NULL;
        sl_simswim_crash(c, victim);
        sl_simswim_watch(c, victim, 0, SL_STATE_DEAD);
        uint32_t survivors = alive - 1;
        int64_t all = -1;
        for (t = tc + 50; t <= tc + 60000; t += 50) {
            die_on(sl_simswim_run_until(c, t), "running");
            if (sl_simswim_watch_count(c) >= survivors) {
                all = t;
                break;
            }
        }
        int64_t first = sl_simswim_watch_time(c, 1);
        int64_t med = time_at(c, survivors, 0.5);
        int64_t last = all >= 0 ? sl_simswim_watch_time(c, survivors) : -1;
        if (last < 0)
            printf("detection of crashed n%u: %u of %u survivors within 60 s\n", victim,
                   sl_simswim_watch_count(c), survivors);
        else
            printf("detection of crashed n%u: first %lld ms, median %lld ms, max %lld ms "
                   "(%.0f rounds, %.1f probe periods until every survivor)\n",
                   victim, (long long)(first - tc), (long long)(med - tc),
                   (long long)(last - tc), (double)(last - tc) / giv,
                   (double)(last - tc) / piv);
        tc = (all >= 0 ? all : t) + 30000;
        die_on(sl_simswim_run_until(c, tc), "running");
    }
    sl_sim_stats_t st;
    sl_sim_stats(sim, &st);
    printf("run: %lld ms simulated in %.1f s wall; %llu messages (%llu lost, %llu "
           "duplicated), %llu ticks, %ld MiB resident\n",
           (long long)sl_sim_now(sim), wall() - w0, (unsigned long long)st.sent,
           (unsigned long long)st.lost, (unsigned long long)st.duplicated,
           (unsigned long long)st.ticks, rss_mib());
    if (sl_simswim_violations(c)) {
        for (size_t i = 0; i < sl_simswim_violations(c) && i < 10; i++)
            printf("violation: %s\n", sl_simswim_violation(c, i));
        sl_simswim_destroy(&c);
        return 1;
    }
    sl_simswim_destroy(&c);
    return 0;
}
