/* How writes spread (src/store/store_spread.h, docs/store.md "How writes
 * spread"), with the real code on the simulator: N replicas of the real
 * store core, each sending its local writes and relaying what it newly
 * applied through the real spread policy (sl_store_spread_fanout,
 * sl_store_spread_pick), on a virtual clock and network with 1 % loss and
 * 1-20 ms one-way delays. Anti-entropy is the safety net: each replica
 * runs the daemon's round core (src/store/store_round.h, its default
 * timers), which picks whom to send a DIGEST or SUMMARY from what the
 * members told it: for 5 rounds 100 ms apart after its state changed a
 * DIGEST to a member that differs and was not sent that state, then a
 * SUMMARY a second to one that differs. Membership is whole and static
 * (every other replica up since long before the writes: none urgent).
 * The stores, the policy and the rounds on the simulator are
 * src/sim/sim_store.c's, which the study simulators run too.
 *
 * Measured per write: when each replica first holds it, so the time until
 * every replica does (p50, p99 over writes), and the DELTAs each peer sent
 * for it (pushes and relays), apart from anti-entropy's messages.
 *
 *   policy   the fan-out and the pick, alone
 *   n10      10 replicas: a write goes to all 9 from its writer; no relay
 *   n100     100 replicas: rumor mongering; every write reaches everyone,
 *            p99 under 1 s, about SL_SPREAD_FANOUT DELTAs per peer per
 *            write; also with lone writes 2 s apart
 *   n1000    the same at 1,000 replicas (50 writes, one seed)
 *
 * The figures in bench/results/store.md come from the same program:
 * SL_SPREAD_N=1000 [SL_SPREAD_WRITES=W] [SL_SPREAD_EVERY_MS=MS between
 * writes] [SL_SPREAD_AE=0: no anti-entropy, rumor alone] [SL_SEED=S]
 * prints one line of figures. */
#include <stdlib.h>

#include "sim/sim_store.h"
#include "starling/store.h"
#include "store/store_spread.h"
#include "testlib.h"

#define WRITE_EVERY_MS 100 /* one write somewhere in the cluster (SL_SPREAD_EVERY_MS) */
#define TAIL_MS 5000       /* after the last write */

typedef struct {
    uint64_t rid, seq; /* the write's dot */
    int64_t at;        /* when it was made */
    int64_t *seen;     /* by node: when it first held it (-1: not yet) */
    uint32_t holders;  /* nodes that hold it */
} write_t;

typedef struct {
    uint32_t n;          /* replicas */
    sl_simstore_t *net;  /* the stores on the simulator (src/sim/sim_store.h) */
    write_t *writes;     /* made so far */
    uint32_t write_count;/* entries */
    uint32_t open_from;  /* writes before this one are held by every node */
} world_t;

typedef struct {
    double p50_ms, p99_ms, max_ms; /* time until every replica held a write, over writes */
    double node_p99_ms;            /* time until one replica held a write, over (write, replica) */
    double spread_per_write;       /* DELTAs a peer sent per write (pushes and relays), mean over peers */
    double spread_max_per_write;   /* the same, the busiest peer */
    double ae_per_write;           /* anti-entropy messages a peer sent per write, mean */
    uint32_t all_held;             /* writes every replica held at the end */
    uint32_t by_rumor;             /* (write, replica) pairs reached before anti-entropy could matter:
                                      within 100 ms of the write */
    bool converged;                /* every replica ends with one state */
} figures_t;

/* Notes which open writes node `id` holds now. */
static void note_held(world_t *w, uint32_t id, int64_t now) {
    sl_store_t *st = sl_simstore_store(w->net, id);
    for (uint32_t k = w->open_from; k < w->write_count; k++) {
        write_t *wr = &w->writes[k];
        if (wr->seen[id] < 0 && sl_store_vv_get(st, wr->rid) >= wr->seq) {
            wr->seen[id] = now;
            wr->holders++;
        }
    }
    while (w->open_from < w->write_count && w->writes[w->open_from].holders == w->n)
        w->open_from++;
}

/* A message changed node `id`'s replica. */
static void changed(void *ctx, uint32_t id, const sl_store_out_t *out) {
    world_t *w = ctx;
    (void)out;
    note_held(w, id, sl_sim_now(sl_simstore_sim(w->net)));
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct(const int64_t *sorted, size_t count, double p) {
    if (!count)
        return -1;
    size_t i = (size_t)(p * (double)(count - 1) + 0.5);
    return (double)sorted[i];
}

/* One run: `writes` writes by random replicas, `every_ms` apart, on `n`
 * replicas; then TAIL_MS for the last to settle. */
static figures_t run(uint32_t n, uint32_t writes, bool ae, uint64_t seed, int64_t every_ms) {
    world_t w = {.n = n};
    w.writes = calloc(writes, sizeof *w.writes);
    sl_simstore_config_t cfg = {.nodes = n, .seed = seed, .no_anti_entropy = !ae,
                                .net = {.loss = 0.01, .delay_min_ms = 1, .delay_max_ms = 20},
                                .hooks = {.changed = changed, .ctx = &w}};
    CHECK_OK(sl_simstore_new(&cfg, &w.net));
    sl_sim_t *sim = sl_simstore_sim(w.net);
    int64_t t = 1000;
    CHECK_OK(sl_simstore_run_until(w.net, t));
    for (uint32_t k = 0; k < writes; k++) {
        uint32_t id = (uint32_t)sl_rng_below(sl_sim_rng(sim), n);
        sl_store_t *st = sl_simstore_store(w.net, id);
        char key[32], val[32];
        snprintf(key, sizeof key, "k/%u", k % 64);
        snprintf(val, sizeof val, "v%u", k);
        sl_store_msg_t d;
        CHECK_OK(sl_store_put(st, key, strlen(key), val, strlen(val), (uint64_t)t, &d));
        write_t *wr = &w.writes[w.write_count++];
        wr->rid = (uint64_t)id + 1;
        wr->seq = sl_store_vv_get(st, wr->rid);
        wr->at = t;
        wr->seen = malloc(n * sizeof *wr->seen);
        for (uint32_t i = 0; i < n; i++)
            wr->seen[i] = -1;
        note_held(&w, id, t);
        CHECK_OK(sl_simstore_wrote(w.net, id, &d)); /* once durable: pushed at once */
        CHECK_OK(sl_simstore_push(w.net, id));
        t += every_ms;
        CHECK_OK(sl_simstore_run_until(w.net, t));
    }
    CHECK_OK(sl_simstore_run_until(w.net, t + TAIL_MS));

    figures_t f = {.converged = true};
    int64_t *all = calloc(writes ? writes : 1, sizeof *all);
    int64_t *each = calloc((size_t)writes * n + 1, sizeof *each);
    size_t all_count = 0, each_count = 0;
    for (uint32_t k = 0; k < w.write_count; k++) {
        write_t *wr = &w.writes[k];
        int64_t last = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (wr->seen[i] < 0) {
                last = -1;
                continue;
            }
            each[each_count++] = wr->seen[i] - wr->at;
            f.by_rumor += wr->seen[i] - wr->at <= 100;
            if (last >= 0 && wr->seen[i] - wr->at > last)
                last = wr->seen[i] - wr->at;
        }
        if (last >= 0) {
            all[all_count++] = last;
            f.all_held++;
        }
        free(wr->seen);
    }
    qsort(all, all_count, sizeof *all, cmp_i64);
    qsort(each, each_count, sizeof *each, cmp_i64);
    f.p50_ms = pct(all, all_count, 0.50);
    f.p99_ms = pct(all, all_count, 0.99);
    f.max_ms = all_count ? (double)all[all_count - 1] : -1;
    f.node_p99_ms = pct(each, each_count, 0.99);
    uint64_t spread_sum = 0, spread_max = 0, ae_sum = 0;
    uint64_t h0 = sl_store_state_hash(sl_simstore_store(w.net, 0));
    for (uint32_t i = 0; i < n; i++) {
        sl_simstore_counts_t c;
        sl_simstore_counts(w.net, i, &c);
        uint64_t sent = c.pushed + c.relayed;
        spread_sum += sent;
        ae_sum += c.ae_sent;
        if (sent > spread_max)
            spread_max = sent;
        f.converged &= sl_store_state_hash(sl_simstore_store(w.net, i)) == h0;
    }
    double per = writes ? (double)writes * n : 1;
    f.spread_per_write = (double)spread_sum / per;
    f.spread_max_per_write = (double)spread_max / (writes ? writes : 1);
    f.ae_per_write = (double)ae_sum / per;
    free(all);
    free(each);
    sl_simstore_destroy(&w.net);
    free(w.writes);
    return f;
}

static void print_figures(uint32_t n, uint32_t writes, bool ae, uint64_t seed, const figures_t *f) {
    printf("N=%u writes=%u ae=%d seed=%llu: every replica holds a write after p50 %.0f ms, "
           "p99 %.0f ms, max %.0f ms (one replica: p99 %.0f ms); writes held by all %u/%u; "
           "reached within 100 ms %.1f %%; DELTAs a peer sent per write %.2f (busiest %.2f); "
           "anti-entropy messages a peer sent per write %.2f; converged %s\n",
           n, writes, (int)ae, (unsigned long long)seed, f->p50_ms, f->p99_ms, f->max_ms,
           f->node_p99_ms, f->all_held, writes, 100.0 * f->by_rumor / ((double)writes * n),
           f->spread_per_write, f->spread_max_per_write, f->ae_per_write,
           f->converged ? "yes" : "NO");
    fflush(stdout);
}

/* ---- tests ---- */

static bool odd_only(void *ctx, size_t i) {
    (void)ctx;
    return i % 2 == 1;
}

static bool all_ok(void *ctx, size_t i) {
    (void)ctx;
    (void)i;
    return true;
}

static void test_policy(void) {
    /* a write as its writer pushed it, and an answer of anti-entropy:
       another replica's DELTA of it */
    sl_store_t *a, *b;
    sl_store_config_t cfg = {0};
    CHECK_OK(sl_store_new(1, &cfg, &a));
    CHECK_OK(sl_store_new(2, &cfg, &b));
    sl_store_msg_t w, dig;
    CHECK_OK(sl_store_put(a, "k", 1, "v", 1, 1000, &w));
    CHECK_OK(sl_store_receive(b, w.type, w.body, w.len, 1000, &(sl_store_out_t){0}, &(bool){0}));
    sl_store_t *c;
    CHECK_OK(sl_store_new(3, &cfg, &c));
    CHECK_OK(sl_store_digest(c, false, &dig));
    sl_store_out_t ans;
    sl_store_out_init(&ans);
    CHECK_OK(sl_store_receive(b, dig.type, dig.body, dig.len, 1000, &ans, &(bool){0}));
    CHECK(ans.count >= 1 && ans.msgs[0].type == SL_STORE_MSG_DELTA);
    const uint8_t *wb = w.body, *ab = ans.msgs[0].body;
    size_t wl = w.len, al = ans.msgs[0].len;

    /* small clusters: a local write to all, no relay */
    CHECK_INT(sl_store_spread_fanout(0, SL_SPREAD_LOCAL, wb, wl), 0);
    CHECK_INT(sl_store_spread_fanout(9, SL_SPREAD_LOCAL, wb, wl), 9);
    CHECK_INT(sl_store_spread_fanout(SL_SPREAD_PUSH_ALL, SL_SPREAD_LOCAL, wb, wl), SL_SPREAD_PUSH_ALL);
    CHECK_INT(sl_store_spread_fanout(9, SL_SPREAD_RELAY, wb, wl), 0);
    /* past them: the same few whatever N */
    CHECK_INT(sl_store_spread_fanout(SL_SPREAD_PUSH_ALL + 1, SL_SPREAD_LOCAL, wb, wl), SL_SPREAD_FANOUT);
    CHECK_INT(sl_store_spread_fanout(999, SL_SPREAD_LOCAL, wb, wl), SL_SPREAD_FANOUT);
    CHECK_INT(sl_store_spread_fanout(99999, SL_SPREAD_RELAY, wb, wl), SL_SPREAD_FANOUT);
    /* not relayed: an answer of anti-entropy, a long DELTA, bytes that are no DELTA */
    CHECK_INT(sl_store_spread_fanout(999, SL_SPREAD_RELAY, ab, al), 0);
    CHECK_INT(sl_store_spread_fanout(999, SL_SPREAD_RELAY, wb, SL_SPREAD_RELAY_MAX_LEN + 1), 0);
    CHECK_INT(sl_store_spread_fanout(999, SL_SPREAD_RELAY, dig.body, dig.len), 0);
    CHECK_INT(sl_store_spread_fanout(999, SL_SPREAD_RELAY, wb, 3), 0);
    /* the writer takes its write relayed back as a duplicate, not as a
       forgery; a DELTA in its name of dots it never issued stays refused */
    sl_store_out_t none;
    sl_store_out_init(&none);
    bool persist = true;
    sl_store_stats_t st;
    CHECK_OK(sl_store_receive(a, w.type, w.body, w.len, 1000, &none, &persist));
    CHECK(!persist && none.count == 0);
    sl_store_stats(a, &st);
    CHECK_INT(st.rejected, 0);
    sl_store_range_t r = {1, 1, 5};
    sl_store_dmsg_t forged = {.type = SL_STORE_MSG_DELTA, .sender = 1, .ranges = &r, .range_count = 1};
    sl_store_msg_t fm;
    CHECK_OK(sl_store_msg_encode(&forged, 1 << 20, &fm));
    CHECK_ERR(sl_store_receive(a, fm.type, fm.body, fm.len, 1000, &none, &persist), SL_EPROTO);
    sl_store_msg_fini(&fm);
    sl_store_msg_fini(&w);
    sl_store_msg_fini(&dig);
    sl_store_out_fini(&ans);
    sl_store_destroy(&a);
    sl_store_destroy(&b);
    sl_store_destroy(&c);

    sl_rng_t rng;
    sl_rng_seed(&rng, 7);
    uint32_t out[SL_SPREAD_MAX_TARGETS];
    /* distinct, accepted, as many as asked; all when asked for more */
    uint32_t hits[1000] = {0};
    for (int r = 0; r < 2000; r++) {
        size_t got = sl_store_spread_pick(&rng, 1000, 4, odd_only, NULL, out);
        CHECK_INT(got, 4);
        for (size_t i = 0; i < got; i++) {
            CHECK(out[i] % 2 == 1 && out[i] < 1000);
            for (size_t j = 0; j < i; j++)
                CHECK(out[i] != out[j]);
            hits[out[i]]++;
        }
    }
    /* spread over all the members, not the first few: each odd one is
       picked about 2000 * 4 / 500 = 16 times */
    uint32_t never = 0;
    for (int i = 1; i < 1000; i += 2)
        never += hits[i] == 0;
    CHECK_MSG(never < 10, "%u of 500 members never picked", never);
    CHECK_INT(sl_store_spread_pick(&rng, 9, 9, all_ok, NULL, out), 9);
    CHECK_INT(sl_store_spread_pick(&rng, 10, 9, odd_only, NULL, out), 5);
    CHECK_INT(sl_store_spread_pick(&rng, 10, 0, all_ok, NULL, out), 0);
}

/* A run of local writes joined into one DELTA by splicing their atoms'
 * bytes: the same bytes as decoding them and encoding the batch (what
 * store_node.c's push_run did), and a replica that receives it holds
 * what the writer holds. */
static void test_join(void) {
    sl_store_t *a, *b;
    sl_store_config_t cfg = {0};
    CHECK_OK(sl_store_new(11, &cfg, &a));
    CHECK_OK(sl_store_new(12, &cfg, &b));
    enum { W = 7 };
    sl_store_msg_t d[W];
    uint64_t t = 1000;
    CHECK_OK(sl_store_put(a, "r/1", 3, "v1", 2, t++, &d[0]));
    CHECK_OK(sl_store_set_add(a, "s/1", 3, "e1", 2, t++, &d[1]));
    CHECK_OK(sl_store_set_add(a, "s/1", 3, "e2", 2, t++, &d[2]));
    CHECK_OK(sl_store_set_remove(a, "s/1", 3, "e1", 2, t++, &d[3])); /* a DEAD atom, with context */
    CHECK_OK(sl_store_counter_add(a, "c/1", 3, -3, t++, &d[4]));
    CHECK_OK(sl_store_gmap_put(a, "m/1", 3, "f", 1, "x", 1, t++, &d[5]));
    CHECK_OK(sl_store_del(a, "r/1", 3, t++, &d[6]));
    sl_store_range_t r;
    uint64_t sender;
    for (int i = 0; i < W; i++) {
        CHECK(sl_store_spread_range(d[i].body, d[i].len, &sender, &r));
        CHECK(sender == 11 && r.rid == 11 && r.from == (uint64_t)i && r.to == (uint64_t)i + 1);
    }
    sl_store_msg_t joined;
    CHECK_OK(sl_store_spread_join(d, W, 1 << 20, &joined));
    /* the codec's way: decode each, encode the batch */
    sl_store_dmsg_t dm[W];
    sl_store_item_t all[64];
    uint32_t items = 0;
    for (int i = 0; i < W; i++) {
        CHECK_OK(sl_store_msg_decode(d[i].type, d[i].body, d[i].len, &dm[i]));
        for (uint32_t k = 0; k < dm[i].item_count; k++)
            all[items++] = dm[i].items[k];
    }
    sl_store_range_t range = {11, 0, W};
    sl_store_dmsg_t m = {.type = SL_STORE_MSG_DELTA, .sender = 11, .ranges = &range,
                         .range_count = 1, .items = all, .item_count = items};
    sl_store_msg_t encoded;
    CHECK_OK(sl_store_msg_encode(&m, 1 << 20, &encoded));
    CHECK(joined.len == encoded.len && memcmp(joined.body, encoded.body, joined.len) == 0);
    for (int i = 0; i < W; i++)
        sl_store_dmsg_fini(&dm[i]);
    sl_store_out_t out;
    sl_store_out_init(&out);
    bool persist = false;
    CHECK_OK(sl_store_receive(b, joined.type, joined.body, joined.len, t, &out, &persist));
    CHECK(persist);
    CHECK(sl_store_state_hash(a) == sl_store_state_hash(b));
    sl_store_out_fini(&out);
    /* not a run: a gap, another replica's write, a DIGEST, too long */
    sl_store_msg_t gap[2] = {d[0], d[2]}, other, dig, bad;
    CHECK_ERR(sl_store_spread_join(gap, 2, 1 << 20, &bad), SL_EINVAL);
    CHECK_OK(sl_store_put(b, "r/2", 3, "w", 1, t, &other));
    sl_store_msg_t mixed[2] = {d[6], other};
    CHECK_ERR(sl_store_spread_join(mixed, 2, 1 << 20, &bad), SL_EINVAL);
    CHECK_OK(sl_store_digest(a, false, &dig));
    CHECK(!sl_store_spread_range(dig.body, dig.len, &sender, &r));
    CHECK_ERR(sl_store_spread_join(&dig, 1, 1 << 20, &bad), SL_EINVAL);
    CHECK_ERR(sl_store_spread_join(d, W, joined.len - 1, &bad), SL_ETOOBIG);
    CHECK(bad.body == NULL);
    sl_store_msg_fini(&dig);
    sl_store_msg_fini(&other);
    sl_store_msg_fini(&encoded);
    sl_store_msg_fini(&joined);
    for (int i = 0; i < W; i++)
        sl_store_msg_fini(&d[i]);
    sl_store_destroy(&a);
    sl_store_destroy(&b);
}

static void check_run(uint32_t n, uint32_t writes, uint64_t seed, double max_spread,
                      int64_t every_ms) {
    figures_t f = run(n, writes, true, seed, every_ms);
    print_figures(n, writes, true, seed, &f);
    CHECK_MSG(f.all_held == writes, "N=%u seed %llu: %u of %u writes reached every replica", n,
              (unsigned long long)seed, f.all_held, writes);
    CHECK_MSG(f.converged, "N=%u seed %llu: replicas differ at the end", n, (unsigned long long)seed);
    CHECK_MSG(f.p99_ms <= 1000, "N=%u seed %llu: p99 %.0f ms to reach every replica", n,
              (unsigned long long)seed, f.p99_ms);
    CHECK_MSG(f.spread_per_write <= max_spread, "N=%u seed %llu: %.2f DELTAs per peer per write",
              n, (unsigned long long)seed, f.spread_per_write);
}

static void test_n10(void) {
    /* every write straight from its writer to the 9 others: 0.9 per peer */
    for (uint64_t seed = 1; seed <= 3; seed++)
        check_run(10, 100, seed, 0.91, WRITE_EVERY_MS);
}

static void test_n100(void) {
    /* rumor: each peer that applied a write sends it to SL_SPREAD_FANOUT,
       once; the writer's own push adds FANOUT / N */
    for (uint64_t seed = 1; seed <= 2; seed++)
        check_run(100, 100, seed, SL_SPREAD_FANOUT + 0.1, WRITE_EVERY_MS);
    /* lone writes, 2 s apart: the rounds that find the peers a rumor
       missed run for each write alone */
    check_run(100, 30, 3, SL_SPREAD_FANOUT + 0.1, 2000);
}

static void test_n1000(void) {
    /* the target: p99 under 1 s virtual at 1,000 replicas (about
       6 s under ASan for 50 writes) */
    check_run(1000, 50, 1, SL_SPREAD_FANOUT + 0.01, WRITE_EVERY_MS);
}

int main(void) {
    sl_log_set_level(getenv("SL_LOG") ? atoi(getenv("SL_LOG")) : SL_LOG_ERR);
    const char *nenv = getenv("SL_SPREAD_N");
    if (nenv) { /* the benchmark: one run, its figures */
        uint32_t n = (uint32_t)atoi(nenv);
        const char *we = getenv("SL_SPREAD_WRITES"), *ae = getenv("SL_SPREAD_AE"),
                   *se = getenv("SL_SEED");
        uint32_t writes = we ? (uint32_t)atoi(we) : 100;
        uint64_t seed = se ? (uint64_t)atoll(se) : 1;
        const char *ev = getenv("SL_SPREAD_EVERY_MS");
        figures_t f = run(n, writes, !ae || atoi(ae) != 0, seed, ev ? atoll(ev) : WRITE_EVERY_MS);
        print_figures(n, writes, !ae || atoi(ae) != 0, seed, &f);
        return 0;
    }
    sl_test_run("policy", test_policy);
    sl_test_run("join", test_join);
    sl_test_run("n10", test_n10);
    sl_test_run("n100", test_n100);
    sl_test_run("n1000", test_n1000);
    return sl_test_finish();
}
