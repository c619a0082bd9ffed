/* Issue 14, item 3: no member cap in the study views. Two peers that see
 * the same 150 alive members (listed in a different order in their swim
 * tables, as join order makes them) build the same member view, pick the
 * same leader for every round and rank every trial's members the same
 * (sl_round_rank, the claim core's ranking, and the fresh trial's top
 * member). members_build kept the first 64 records of the table: each
 * peer then saw itself and 63 others, and the leaders differed. */
#include <stdio.h>
#include <stdlib.h>

#include "starling/rng.h"
#include "starling/round.h"
#include "starling/swim.h"
#include "study/study_node_internal.h"
#include "testlib.h"

#define N 150

static void name_of(int i, char *buf, size_t cap) { snprintf(buf, cap, "peer-%03d", i); }

/* A swim core named peer-`self` that knows every other of the N peers,
 * alive, added in the order `order`. */
static sl_swim_t *core(int self, const int *order) {
    char name[16], addr[32];
    name_of(self, name, sizeof name);
    snprintf(addr, sizeof addr, "tcp://m%d", self);
    sl_swim_config_t cfg;
    sl_swim_config_defaults(&cfg);
    cfg.name = name;
    cfg.addr = addr;
    cfg.seed = 7 + (uint64_t)self;
    cfg.any_addr = true;
    sl_swim_t *s = NULL;
    CHECK_OK(sl_swim_new(&cfg, &s));
    for (int k = 0; k < N; k++) {
        int i = order[k];
        if (i == self)
            continue;
        char n[16], a[32];
        name_of(i, n, sizeof n);
        snprintf(a, sizeof a, "tcp://m%d", i);
        sl_member_msg_t r = {0};
        r.name = sl_bytes_str(n);
        r.addr = sl_bytes_str(a);
        r.state = SL_STATE_ALIVE;
        CHECK_OK(sl_swim_add_member(s, 0, &r));
    }
    CHECK_INT(sl_swim_member_count(s), N);
    return s;
}

static void test_same_view_any_n(void) {
    int up[N], shuffled[N];
    for (int i = 0; i < N; i++)
        up[i] = shuffled[i] = i;
    sl_rng_t rng;
    sl_rng_seed(&rng, 14);
    for (int i = N - 1; i > 0; i--) {
        int j = (int)sl_rng_below(&rng, (uint64_t)i + 1);
        int t = shuffled[i];
        shuffled[i] = shuffled[j];
        shuffled[j] = t;
    }
    sl_swim_t *a = core(0, up), *b = core(1, shuffled);
    sl_study_members_t ma = {0}, mb = {0};
    CHECK_OK(sl_study_members_alive(a, &ma));
    CHECK_OK(sl_study_members_alive(b, &mb));
    CHECK_MSG(ma.count == N && mb.count == N, "views hold %zu and %zu of %d alive members",
              ma.count, mb.count, N);
    int leaders_differ = 0, tops_differ = 0, ranks_differ = 0;
    for (uint64_t r = 0; r < 500; r++) {
        uint64_t key = sl_round_key("study-scale", r);
        int la = sl_round_leader(ma.m, ma.count, key), lb = sl_round_leader(mb.m, mb.count, key);
        CHECK(la >= 0 && lb >= 0);
        leaders_differ += la < 0 || lb < 0 || strcmp(ma.names[la], mb.names[lb]) != 0;
    }
    for (int t = 0; t < 300; t++) {
        char trial[32];
        snprintf(trial, sizeof trial, "trial-%04d", t);
        int ta = sl_study_members_top(&ma, trial), tb = sl_study_members_top(&mb, trial);
        tops_differ += ta < 0 || tb < 0 || strcmp(ma.names[ta], mb.names[tb]) != 0;
        for (int p = 0; p < N; p += 7) {
            char self[16];
            name_of(p, self, sizeof self);
            ranks_differ += sl_round_rank(ma.m, ma.count, trial, self) !=
                            sl_round_rank(mb.m, mb.count, trial, self);
        }
    }
    CHECK_MSG(leaders_differ == 0, "%d of 500 rounds have different leaders", leaders_differ);
    CHECK_MSG(tops_differ == 0, "%d of 300 trials rank a different member first", tops_differ);
    CHECK_MSG(ranks_differ == 0, "%d trial ranks differ", ranks_differ);
    sl_study_members_fini(&ma);
    sl_study_members_fini(&mb);
    sl_swim_destroy(&a);
    sl_swim_destroy(&b);
}

int main(void) {
    sl_test_run("same_view_any_n", test_same_view_any_n);
    return sl_test_finish();
}
