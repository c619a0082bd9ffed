/* Rounds and leaders. R1: peers with the same view compute the same leader
 * for every round, whatever order they list members in; the leader is the
 * alive member of highest weight; when it dies the next in succession
 * takes over and nobody else changes rank. Claims: peers with the same
 * view assign each trial to one member, within capacity, and spread. */
#include <stdlib.h>

#include "starling/hash.h"
#include "starling/rng.h"
#include "starling/round.h"
#include "testlib.h"

static char names[16][16];

static void members(sl_round_member_t *m, int n) {
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "peer-%02d", i);
        m[i].id = names[i];
        m[i].alive = true;
        m[i].free_slots = 1;
    }
}

static void test_same_view_same_leader(void) {
    sl_round_member_t m[16], shuffled[16];
    members(m, 16);
    sl_rng_t rng;
    sl_rng_seed(&rng, 3);
    int led[16] = {0};
    for (uint64_t r = 0; r < 2000; r++) {
        uint64_t key = sl_round_key("study-1", r);
        int a = sl_round_leader(m, 16, key);
        CHECK(a >= 0);
        led[a]++;
        memcpy(shuffled, m, sizeof m);
        for (int i = 15; i > 0; i--) {
            int j = (int)sl_rng_below(&rng, (uint64_t)i + 1);
            sl_round_member_t t = shuffled[i];
            shuffled[i] = shuffled[j];
            shuffled[j] = t;
        }
        int b = sl_round_leader(shuffled, 16, key);
        CHECK_STR(m[a].id, shuffled[b].id);
        /* it is the highest weight */
        for (int i = 0; i < 16; i++)
            CHECK(sl_hrw_weight(m[i].id, strlen(m[i].id), key) <=
                  sl_hrw_weight(m[a].id, strlen(m[a].id), key));
    }
    /* leadership spreads over members */
    for (int i = 0; i < 16; i++)
        CHECK_MSG(led[i] > 60, "member %d led %d of 2000 rounds", i, led[i]);
    /* different studies, different leaders for the same round number */
    int differ = 0;
    for (uint64_t r = 0; r < 100; r++)
        differ += sl_round_leader(m, 16, sl_round_key("a", r)) !=
                  sl_round_leader(m, 16, sl_round_key("b", r));
    CHECK(differ > 80);
}

static void test_takeover(void) {
    sl_round_member_t m[8];
    members(m, 8);
    for (uint64_t r = 0; r < 200; r++) {
        uint64_t key = sl_round_key("s", r);
        size_t order[8], order2[8];
        size_t n = sl_round_succession(m, 8, key, order);
        CHECK_INT(n, 8);
        CHECK_INT(order[0], sl_round_leader(m, 8, key));
        /* the leader dies: the second takes over, the rest keep their order */
        m[order[0]].alive = false;
        CHECK_INT(sl_round_leader(m, 8, key), order[1]);
        size_t n2 = sl_round_succession(m, 8, key, order2);
        CHECK_INT(n2, 7);
        for (size_t i = 0; i < n2; i++)
            CHECK_INT(order2[i], order[i + 1]);
        m[order[0]].alive = true;
    }
    for (int i = 0; i < 8; i++)
        m[i].alive = false;
    CHECK_INT(sl_round_leader(m, 8, 1), -1);
    CHECK_INT(sl_round_leader(m, 0, 1), -1);
}

static void test_assign(void) {
    sl_round_member_t m[5];
    members(m, 5);
    m[0].free_slots = 2;
    m[3].alive = false;
    m[4].free_slots = 0;
    char ids[40][17];
    const char *tid[40];
    for (int i = 0; i < 40; i++) {
        snprintf(ids[i], sizeof ids[i], "%016x", (unsigned)sl_mix64((uint64_t)i));
        tid[i] = ids[i];
    }
    int owner[40], owner2[40];
    CHECK_OK(sl_round_assign(m, 5, tid, 40, owner));
    int got[5] = {0}, none = 0;
    for (int i = 0; i < 40; i++) {
        if (owner[i] < 0) {
            none++;
            continue;
        }
        got[owner[i]]++;
    }
    CHECK_INT(got[0], 2);
    CHECK_INT(got[1], 1);
    CHECK_INT(got[2], 1);
    CHECK_INT(got[3], 0); /* dead */
    CHECK_INT(got[4], 0); /* full */
    CHECK_INT(none, 36);
    /* the same view assigns the same (member order does not matter) */
    sl_round_member_t r[5] = {m[4], m[3], m[2], m[1], m[0]};
    CHECK_OK(sl_round_assign(r, 5, tid, 40, owner2));
    for (int i = 0; i < 40; i++)
        CHECK(owner[i] < 0 ? owner2[i] < 0 : strcmp(m[owner[i]].id, r[owner2[i]].id) == 0);
    /* with plenty of room, trials spread by rendezvous weight */
    for (int i = 0; i < 5; i++) {
        m[i].alive = true;
        m[i].free_slots = 100;
    }
    CHECK_OK(sl_round_assign(m, 5, tid, 40, owner));
    memset(got, 0, sizeof got);
    for (int i = 0; i < 40; i++) {
        CHECK(owner[i] >= 0);
        got[owner[i]]++;
        /* each trial goes to its highest-weight member */
        for (int j = 0; j < 5; j++)
            CHECK(sl_round_trial_weight(m[j].id, tid[i]) <=
                  sl_round_trial_weight(m[owner[i]].id, tid[i]));
    }
    for (int i = 0; i < 5; i++)
        CHECK(got[i] >= 2);
}

int main(void) {
    sl_test_run("same_view_same_leader", test_same_view_same_leader);
    sl_test_run("takeover", test_takeover);
    sl_test_run("assign", test_assign);
    return sl_test_finish();
}
