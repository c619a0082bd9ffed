/* The store's anti-entropy round core (src/store/store_round.h): whom a
 * round picks in each situation, silence at rest, the refresh, urgent
 * members first, the table's invariants under random events, and the
 * cost of a round that does not grow with the members. */
#include <stdio.h>
#include <time.h>

#include "starling/rng.h"
#include "store/store_round.h"
#include "testlib.h"

#define MS 1000000ull /* ns */

static sl_store_round_t *make(uint32_t members, uint32_t *ids) {
    sl_store_round_t *r;
    CHECK_OK(sl_store_round_new(NULL, 42, &r));
    for (uint32_t i = 0; i < members; i++) {
        char key[32];
        snprintf(key, sizeof key, "tcp://10.0.0.%u:7000", i);
        CHECK_OK(sl_store_round_peer(r, key, strlen(key), true, &ids[i]));
        CHECK_INT(ids[i], i);
        sl_store_round_set_up(r, ids[i], true);
    }
    CHECK_OK(sl_store_round_check(r));
    return r;
}

static void run(sl_store_round_t *r, uint64_t now_ns, uint64_t fp, sl_store_round_pick_t *p) {
    sl_store_round_run(r, now_ns, fp, p);
    CHECK_OK(sl_store_round_check(r));
}

static void test_table(void) {
    sl_store_round_t *r;
    CHECK_OK(sl_store_round_new(&(sl_store_round_config_t){.max_peers = 3}, 1, &r));
    uint32_t a, b, again;
    CHECK_ERR(sl_store_round_peer(r, "x", 1, false, &a), SL_ENOTFOUND);
    CHECK_ERR(sl_store_round_peer(r, "", 0, true, &a), SL_EINVAL);
    CHECK_OK(sl_store_round_peer(r, "tcp://a:1", 9, true, &a));
    CHECK_OK(sl_store_round_peer(r, "tcp://b:1", 9, true, &b));
    CHECK_OK(sl_store_round_peer(r, "tcp://a:1", 9, false, &again));
    CHECK_INT(again, a);
    CHECK(a != b);
    CHECK_STR(sl_store_round_peer_key(r, b), "tcp://b:1");
    CHECK_OK(sl_store_round_peer(r, "tcp://c:1", 9, true, &again));
    CHECK_ERR(sl_store_round_peer(r, "tcp://d:1", 9, true, &again), SL_EBUSY);
    /* a peer not up is never picked, however urgent its news */
    CHECK(!sl_store_round_peer_up(r, a));
    sl_store_round_back(r, a);
    CHECK(!sl_store_round_peer_urgent(r, a));
    uint64_t old;
    sl_store_round_heard(r, a, 7, 99, &old);
    CHECK_INT(old, 0);
    CHECK_INT(sl_store_round_peer_rid(r, a), 7);
    sl_store_round_pick_t p;
    run(r, 0, 1234, &p);
    CHECK_INT(p.kind, SL_STORE_ROUND_QUIET);
    CHECK_INT(p.peer, SL_STORE_ROUND_NONE);
    sl_store_round_destroy(&r);
    sl_store_round_destroy(&r); /* idempotent */
    CHECK(r == NULL);
}

static void test_urgent_first(void) {
    uint32_t id[8];
    sl_store_round_t *r = make(8, id);
    uint64_t fp = 1000, t = 0;
    sl_store_round_pick_t p;
    /* our state is new to everyone: fresh DIGESTs, but the urgent ones first */
    sl_store_round_back(r, id[3]);
    sl_store_round_back(r, id[5]);
    CHECK_INT(sl_store_round_due_ns(r), 0); /* a round at once */
    bool got3 = false, got5 = false;
    for (int k = 0; k < 2; k++) {
        run(r, t, fp, &p);
        CHECK_INT(p.kind, SL_STORE_ROUND_DIGEST);
        CHECK_INT(p.why, SL_STORE_ROUND_WHY_URGENT);
        got3 |= p.peer == id[3];
        got5 |= p.peer == id[5];
        CHECK(!sl_store_round_peer_urgent(r, p.peer));
        sl_store_round_sent(r, &p);
        CHECK_INT(sl_store_round_due_ns(r), t + 100 * MS);
        t += 100 * MS;
    }
    CHECK(got3 && got5);
    /* a member that goes down stops being urgent */
    sl_store_round_back(r, id[1]);
    sl_store_round_set_up(r, id[1], false);
    CHECK(!sl_store_round_peer_urgent(r, id[1]));
    run(r, t, fp, &p);
    CHECK_INT(p.why, SL_STORE_ROUND_WHY_FRESH);
    CHECK(p.peer != id[1] && p.peer != id[3] && p.peer != id[5]); /* those two have this state */
    sl_store_round_destroy(&r);
}

static void test_fresh_then_idle(void) {
    uint32_t id[6];
    sl_store_round_t *r = make(6, id);
    uint64_t fp = 1000, t = 0, old;
    sl_store_round_pick_t p;
    /* two members already told us our new state: they are never sent it */
    sl_store_round_heard(r, id[0], 100, fp, &old);
    sl_store_round_heard(r, id[1], 101, fp, &old);
    bool sent[6] = {0};
    for (int k = 0; k < SL_STORE_ROUND_ACTIVE; k++) {
        run(r, t, fp, &p);
        CHECK_INT(p.kind, SL_STORE_ROUND_DIGEST);
        CHECK_INT(p.why, SL_STORE_ROUND_WHY_FRESH);
        CHECK(p.peer != id[0] && p.peer != id[1]);
        CHECK(!sent[p.peer]); /* each fresh member once */
        if (k != 1) {
            sent[p.peer] = true;
            sl_store_round_sent(r, &p);
        } /* the second DIGEST did not leave: its member stays fresh */
        t += 100 * MS;
    }
    sl_store_round_stats_t st;
    sl_store_round_stats(r, &st);
    CHECK_INT(st.digests_sent, 4);
    CHECK_INT(st.agree, 2);
    CHECK_INT(st.fresh, 0);
    /* active rounds spent: a SUMMARY once per idle period to one that differs */
    int summaries = 0;
    for (int k = 0; k < 30; k++, t += 100 * MS) {
        run(r, t, fp, &p);
        if (p.kind == SL_STORE_ROUND_QUIET)
            continue;
        CHECK_INT(p.kind, SL_STORE_ROUND_SUMMARY);
        CHECK_INT(p.why, SL_STORE_ROUND_WHY_DIFFER);
        CHECK(p.peer != id[0] && p.peer != id[1]);
        sl_store_round_sent(r, &p);
        summaries++;
    }
    CHECK(summaries >= 2 && summaries <= 4); /* 3 s of 1 s periods */
    sl_store_round_destroy(&r);
}

static void test_silent_at_rest_and_refresh(void) {
    uint32_t id[5];
    sl_store_round_t *r = make(5, id);
    uint64_t fp = 77, t = 0, old;
    for (uint32_t i = 0; i < 5; i++)
        sl_store_round_heard(r, id[i], 10 + i, fp, &old);
    sl_store_round_pick_t p;
    /* everyone agrees: nothing but a refresh SUMMARY every 30 s */
    int refresh = 0, other = 0;
    for (int k = 0; k < 1200; k++, t += 100 * MS) { /* 120 s */
        run(r, t, fp, &p);
        if (p.kind == SL_STORE_ROUND_SUMMARY && p.why == SL_STORE_ROUND_WHY_REFRESH) {
            refresh++;
            sl_store_round_sent(r, &p);
        } else if (p.kind != SL_STORE_ROUND_QUIET) {
            other++;
        }
    }
    CHECK_INT(other, 0);
    CHECK(refresh >= 4 && refresh <= 5); /* at 0, 30, 60, 90 (and 120) s */
    sl_store_round_stats_t st;
    sl_store_round_stats(r, &st);
    CHECK(st.rounds_silent >= 110);
    CHECK_INT(st.summaries_sent, (uint64_t)refresh);
    /* one member changes: it is the one a message goes to (a DIGEST: the
       fast rounds of our last change were not spent, nobody was fresh) */
    sl_store_round_heard(r, id[2], 12, 78, &old);
    t += 1000 * MS;
    run(r, t, fp, &p);
    CHECK_INT(p.kind, SL_STORE_ROUND_DIGEST);
    CHECK_INT(p.why, SL_STORE_ROUND_WHY_FRESH);
    CHECK_INT(p.peer, id[2]);
    sl_store_round_sent(r, &p);
    /* sent this state, it still differs: the idle SUMMARY goes to it */
    t += 1000 * MS;
    run(r, t, fp, &p);
    CHECK_INT(p.kind, SL_STORE_ROUND_SUMMARY);
    CHECK_INT(p.why, SL_STORE_ROUND_WHY_DIFFER);
    CHECK_INT(p.peer, id[2]);
    /* it restarted as a new replica: the old id comes back to be retired */
    sl_store_round_heard(r, id[2], 99, 79, &old);
    CHECK_INT(old, 12);
    /* our state becomes the one it told us: it agrees, the others are fresh */
    fp = 79;
    for (int k = 0; k < 4; k++) {
        t += 100 * MS;
        run(r, t, fp, &p);
        CHECK_INT(p.why, SL_STORE_ROUND_WHY_FRESH);
        CHECK(p.peer != id[2]);
        sl_store_round_sent(r, &p);
    }
    sl_store_round_stats(r, &st);
    CHECK_INT(st.agree, 1);
    CHECK_INT(st.fresh, 0);
    /* a heal: every up member urgent */
    sl_store_round_heal(r);
    sl_store_round_stats(r, &st);
    CHECK_INT(st.urgent, 5);
    sl_store_round_destroy(&r);
}

/* Random events against a plain model of the classes: the core's counts
 * and picks agree with it, and its invariants hold after each event. */
static void test_random_events(void) {
    int seeds = sl_test_seed_count(20);
    for (int seed = 1; seed <= seeds; seed++) {
        sl_store_round_t *r;
        CHECK_OK(sl_store_round_new(NULL, (uint64_t)seed, &r));
        sl_rng_t rng;
        sl_rng_seed(&rng, (uint64_t)seed * 7919);
        enum { N = 40 };
        uint64_t heard[N] = {0}, fp = 1, t = 0, last_fp = 0;
        bool up[N] = {0}, sent_now[N] = {0};
        uint32_t id[N];
        for (uint32_t i = 0; i < N; i++) {
            char key[16];
            snprintf(key, sizeof key, "p%u", i);
            CHECK_OK(sl_store_round_peer(r, key, strlen(key), true, &id[i]));
        }
        for (int step = 0; step < 3000; step++) {
            uint32_t i = (uint32_t)sl_rng_below(&rng, N);
            uint64_t old;
            switch (sl_rng_below(&rng, 6)) {
            case 0:
                up[i] = !up[i];
                sl_store_round_set_up(r, id[i], up[i]);
                break;
            case 1:
                sl_store_round_back(r, id[i]);
                heard[i] = 0;
                sent_now[i] = false;
                break;
            case 2: /* a few fingerprints, so that members agree often */
                heard[i] = 1 + sl_rng_below(&rng, 4);
                sl_store_round_heard(r, id[i], 1000 + i, heard[i], &old);
                break;
            case 3:
                fp = 1 + sl_rng_below(&rng, 4);
                break;
            default: {
                sl_store_round_pick_t p;
                t += 100 * MS;
                sl_store_round_run(r, t, fp, &p);
                if (fp != last_fp) {
                    last_fp = fp;
                    for (uint32_t k = 0; k < N; k++)
                        sent_now[k] = false;
                }
                if (p.peer != SL_STORE_ROUND_NONE) {
                    uint32_t k = p.peer;
                    CHECK(up[k]);
                    if (p.why == SL_STORE_ROUND_WHY_FRESH)
                        CHECK(heard[k] != fp && !sent_now[k]);
                    if (p.why == SL_STORE_ROUND_WHY_DIFFER)
                        CHECK(heard[k] != fp);
                    if (sl_rng_below(&rng, 4)) {
                        sl_store_round_sent(r, &p);
                        if (p.kind == SL_STORE_ROUND_DIGEST)
                            sent_now[k] = true;
                    }
                }
                sl_store_round_stats_t st;
                sl_store_round_stats(r, &st);
                uint32_t n_up = 0, n_agree = 0, n_fresh = 0;
                for (uint32_t k = 0; k < N; k++) {
                    n_up += up[k];
                    n_agree += up[k] && heard[k] == fp;
                    n_fresh += up[k] && heard[k] != fp && !sent_now[k];
                }
                CHECK_INT(st.up, n_up);
                CHECK_INT(st.agree, n_agree);
                CHECK_INT(st.fresh, n_fresh);
            }
            }
            if (sl_store_round_check(r) != SL_OK) {
                sl_test_fail(__FILE__, __LINE__, "seed %d step %d: table broken (replay: SL_SEEDS)",
                             seed, step);
                step = 1 << 30;
                seed = seeds;
            }
        }
        sl_store_round_destroy(&r);
    }
}

/* A fleet whose peers come and go with new addresses: a table that holds
 * eight at once meets 3,000 and never fills, its ids stay below eight,
 * every held key is found under its id, a forgotten one is gone, and
 * rounds pick only members held and up. */
static void test_forget(void) {
    sl_store_round_t *r;
    CHECK_OK(sl_store_round_new(&(sl_store_round_config_t){.max_peers = 8}, 5, &r));
    sl_rng_t rng;
    sl_rng_seed(&rng, 42);
    enum { SLOTS = 6 };
    int held[SLOTS]; /* the address number each slot holds (-1: none) */
    uint32_t id[SLOTS];
    for (int k = 0; k < SLOTS; k++)
        held[k] = -1;
    int next = 0;
    uint64_t t = 0, old;
    char key[64];
    while (next < 3000) {
        int k = (int)sl_rng_below(&rng, SLOTS);
        if (held[k] < 0) { /* a new peer, with a key longer or shorter than the last */
            held[k] = next++;
            snprintf(key, sizeof key, "tcp://10.%d.0.%d:%d", held[k] % 97, held[k], 7000 + k);
            CHECK_OK(sl_store_round_peer(r, key, strlen(key), true, &id[k]));
            CHECK(id[k] < 8);
            sl_store_round_set_up(r, id[k], true);
            sl_store_round_heard(r, id[k], 100 + (uint64_t)held[k], sl_rng_below(&rng, 3), &old);
            CHECK_INT(old, 0); /* a new peer, not a forgotten one's leftovers */
        } else if (sl_rng_below(&rng, 2)) { /* it leaves and is forgotten */
            snprintf(key, sizeof key, "tcp://10.%d.0.%d:%d", held[k] % 97, held[k], 7000 + k);
            sl_store_round_forget(r, id[k]);
            uint32_t gone;
            CHECK_ERR(sl_store_round_peer(r, key, strlen(key), false, &gone), SL_ENOTFOUND);
            CHECK_STR(sl_store_round_peer_key(r, id[k]), "");
            CHECK(!sl_store_round_peer_up(r, id[k]));
            held[k] = -1;
        }
        for (int j = 0; j < SLOTS; j++) {
            if (held[j] < 0)
                continue;
            uint32_t got;
            snprintf(key, sizeof key, "tcp://10.%d.0.%d:%d", held[j] % 97, held[j], 7000 + j);
            CHECK_OK(sl_store_round_peer(r, key, strlen(key), false, &got));
            CHECK_INT(got, id[j]);
            CHECK_STR(sl_store_round_peer_key(r, got), key);
        }
        sl_store_round_pick_t p;
        run(r, t += 100 * MS, 1 + sl_rng_below(&rng, 3), &p);
        if (p.peer != SL_STORE_ROUND_NONE) {
            bool ok = false;
            for (int j = 0; j < SLOTS; j++)
                ok |= held[j] >= 0 && id[j] == p.peer;
            CHECK_MSG(ok, "picked id %u, which no member holds", p.peer);
            sl_store_round_sent(r, &p);
        }
    }
    CHECK(sl_store_round_peer_count(r) <= 8);
    sl_store_round_stats_t st;
    sl_store_round_stats(r, &st);
    uint32_t n = 0;
    for (int k = 0; k < SLOTS; k++)
        n += held[k] >= 0;
    CHECK_INT(st.peers, n);
    CHECK_INT(st.up, n);
    sl_store_round_destroy(&r);
}

/* Rounds at rest and while the state changes cost the same at 10 and at
 * 1,000 members (no pass over them): timed, with a wide margin. */
static double round_ns(uint32_t members, bool changing) {
    sl_store_round_t *r;
    CHECK_OK(sl_store_round_new(NULL, 3, &r));
    uint64_t old;
    for (uint32_t i = 0; i < members; i++) {
        char key[24];
        uint32_t id;
        snprintf(key, sizeof key, "tcp://h%u:1", i);
        CHECK_OK(sl_store_round_peer(r, key, strlen(key), true, &id));
        sl_store_round_set_up(r, id, true);
        sl_store_round_heard(r, id, 1 + i, 5, &old);
    }
    sl_store_round_pick_t p;
    uint64_t t = 0, fp = 5;
    enum { ROUNDS = 50000 };
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int k = 0; k < ROUNDS; k++) {
        if (changing && k % 3 == 0)
            fp++; /* a write every third round: everyone fresh again */
        sl_store_round_run(r, t += 100 * MS, fp, &p);
        sl_store_round_sent(r, &p);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    sl_store_round_destroy(&r);
    return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / ROUNDS;
}

static void test_cost_flat(void) {
    for (int changing = 0; changing < 2; changing++) {
        double small = 1e18, big = 1e18; /* the best of 3, interleaved (a shared machine) */
        for (int k = 0; k < 3; k++) {
            double a = round_ns(10, changing), b = round_ns(1000, changing);
            small = a < small ? a : small;
            big = b < big ? b : big;
        }
        printf("round at %s: %.0f ns with 10 members, %.0f ns with 1,000\n",
               changing ? "a changing state" : "rest", small, big);
        /* a pass over 1,000 members would be 100x: 5x leaves room for noise */
        CHECK_MSG(big < 5 * small + 200, "a round costs %.0f ns at 1,000 members, %.0f at 10",
                  big, small);
    }
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR);
    sl_test_run("table", test_table);
    sl_test_run("urgent_first", test_urgent_first);
    sl_test_run("fresh_then_idle", test_fresh_then_idle);
    sl_test_run("silent_at_rest_and_refresh", test_silent_at_rest_and_refresh);
    sl_test_run("random_events", test_random_events);
    sl_test_run("forget", test_forget);
    sl_test_run("cost_flat", test_cost_flat);
    return sl_test_finish();
}
