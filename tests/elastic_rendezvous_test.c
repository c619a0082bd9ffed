/* The rendezvous core (src/elastic/rendezvous.c) on hand-made stores: the
 * first world, a death, a joiner, a leader killed before its world
 * starts, cancel; and the partition rule on records written as a split
 * brain would write them (a minority never seals, two children of one
 * world are never both established, split votes and worlds that never
 * start do not block the lineage, the newest lineage survives, the source
 * is the newest state); grafts: rank 0 of a world of two, or 2 of 3, dying
 * for good, a graft dropped when the quorum side went on, and the state a
 * graft starts from; and a job of 3,000 world changes on a pruned view
 * (docs/elastic.md "The pruned view"). The simulation test
 * (sim_elastic_test) runs the same core under random faults. */
#include <stdlib.h>

#include "elastic/elastic_internal.h"
#include "starling/elastic.h"
#include "testlib.h"

#define NP 5
#define CAP 64

/* One store every peer reads at once (a replica that is always in sync),
 * each peer's view of who is alive, and its trainer's state. */
typedef struct {
    sl_elastic_world_t worlds[CAP];
    const sl_elastic_world_t *wp[CAP];
    size_t nw;
    sl_elastic_ack_t acks[CAP * NP];
    const sl_elastic_ack_t *ap[CAP * NP];
    size_t na;
    sl_elastic_vol_t vols[NP];
    size_t nv;
    bool up[NP];             /* running */
    sl_elastic_t *core[NP];
    sl_elastic_local_t local[NP];
    int rank[NP];            /* -1: not training */
    uint64_t started_round[NP];
    sl_elastic_ref_t world_of[NP]; /* the world each trains in */
    uint64_t start_step[NP];       /* the step its last START named */
    bool cancelled;
    int64_t now;
} cluster_t;

static const char *ids[NP] = {"ann", "bob", "cat", "dan", "eve"};

static void view_of(cluster_t *c, int p, sl_elastic_view_t *v, sl_round_member_t *m) {
    for (int q = 0; q < NP; q++) {
        m[q].id = ids[q];
        m[q].alive = c->up[q] && c->up[p];
        m[q].free_slots = 0;
    }
    for (size_t i = 0; i < c->nw; i++)
        c->wp[i] = &c->worlds[i];
    for (size_t i = 0; i < c->na; i++)
        c->ap[i] = &c->acks[i];
    *v = (sl_elastic_view_t){.worlds = c->wp, .world_count = c->nw, .acks = c->ap,
                             .ack_count = c->na, .vols = c->vols, .vol_count = c->nv,
                             .members = m, .member_count = NP, .cancelled = c->cancelled,
                             .synced = true};
}

static void boot(cluster_t *c, int p, uint32_t min, uint32_t max) {
    sl_elastic_config_t cfg = {.job_id = "job-t", .min_nodes = min, .max_nodes = max,
                               .settle_ms = 200, .ack_timeout_ms = 2000};
    CHECK_OK(sl_elastic_new(&cfg, ids[p], &c->core[p]));
    c->up[p] = true;
    c->rank[p] = -1;
    memset(&c->local[p], 0, sizeof c->local[p]);
}

static void crash(cluster_t *c, int p) {
    sl_elastic_destroy(&c->core[p]);
    c->up[p] = false;
    c->rank[p] = -1;
}

/* Every running peer takes a turn; then 50 ms pass and the trainers of
 * complete worlds take a step. */
static void tick(cluster_t *c) {
    for (int p = 0; p < NP; p++) {
        if (!c->up[p])
            continue;
        sl_elastic_view_t v;
        sl_round_member_t m[NP];
        view_of(c, p, &v, m);
        sl_elastic_out_t out;
        CHECK_OK(sl_elastic_step(c->core[p], &v, &c->local[p], c->now, &out));
        for (size_t i = 0; i < out.count; i++) {
            const sl_elastic_action_t *a = &out.actions[i];
            switch (a->kind) {
            case SL_ELASTIC_WRITE_VOL: {
                size_t k = 0;
                while (k < c->nv && strcmp(c->vols[k].peer, ids[p]) != 0)
                    k++;
                if (k == c->nv)
                    c->nv++;
                c->vols[k] = a->vol;
                break;
            }
            case SL_ELASTIC_WRITE_WORLD: c->worlds[c->nw++] = a->world; break;
            case SL_ELASTIC_WRITE_ACK: c->acks[c->na++] = a->ack; break;
            case SL_ELASTIC_START:
                c->rank[p] = (int)a->rank;
                c->started_round[p] = a->world.id.round;
                c->local[p].step = a->start_step;
                c->local[p].has_state = true;
                c->world_of[p] = a->world.id; /* its steps are this world's */
                c->start_step[p] = a->start_step;
                break;
            case SL_ELASTIC_STOP: c->rank[p] = -1; break;
            }
        }
    }
    c->now += 50;
    /* a step for everyone training (the test's worlds are always whole) */
    for (int p = 0; p < NP; p++)
        if (c->up[p] && c->rank[p] >= 0) {
            c->local[p].step++;
            c->local[p].state_world = c->world_of[p];
        }
}

static void run_for(cluster_t *c, int64_t ms) {
    for (int64_t end = c->now + ms; c->now < end;)
        tick(c);
}

static int training(const cluster_t *c) {
    int n = 0;
    for (int p = 0; p < NP; p++)
        n += c->up[p] && c->rank[p] >= 0;
    return n;
}

static cluster_t C;

static void reset(void) {
    for (int p = 0; p < NP; p++)
        sl_elastic_destroy(&C.core[p]);
    memset(&C, 0, sizeof C);
}

static void test_first_world_and_changes(void) {
    reset();
    for (int p = 0; p < 3; p++)
        boot(&C, p, 2, 4);
    run_for(&C, 1000);
    CHECK_INT(training(&C), 3);
    CHECK_INT(C.nw, 1);               /* one world, sealed once */
    CHECK_INT(C.worlds[0].count, 3);
    CHECK_INT(C.worlds[0].parent.round, 0);
    bool ranks[3] = {false};          /* ranks 0..2, each once */
    for (int p = 0; p < 3; p++)
        if (C.rank[p] >= 0 && C.rank[p] < 3)
            ranks[C.rank[p]] = true;
    CHECK(ranks[0] && ranks[1] && ranks[2]);
    /* a joiner: the world ends at a step boundary and grows */
    uint64_t before = C.local[0].step;
    boot(&C, 3, 2, 4);
    run_for(&C, 1000);
    CHECK_INT(training(&C), 4);
    CHECK_INT(C.started_round[3], C.started_round[0]);
    /* it got the state, not step 0 (steps here tick per peer, so within one) */
    CHECK(C.local[3].step + 1 >= C.local[0].step && C.local[3].step > before);
    CHECK(C.local[0].step > before);
    /* a fifth volunteer over max: the world of four keeps training */
    uint64_t round = C.started_round[0];
    boot(&C, 4, 2, 4);
    run_for(&C, 1000);
    CHECK_INT(C.started_round[0], round);
    CHECK_INT(C.rank[4], -1);
    /* a member dies: the others carry on without it, from their step */
    crash(&C, 1);
    run_for(&C, 1000);
    CHECK_INT(training(&C), 4); /* eve takes its place */
    CHECK(C.started_round[0] > round);
    CHECK_INT(C.rank[4] >= 0, 1);
}

/* Every peer is killed: their parameters are gone, their acks are in the
 * store; back, they continue the lineage from the checkpoint they name. */
static void test_full_restart_resumes_from_checkpoint(void) {
    reset();
    for (int p = 0; p < 3; p++)
        boot(&C, p, 2, 3);
    run_for(&C, 1000);
    CHECK_INT(training(&C), 3);
    uint64_t round = C.started_round[0];
    for (int p = 0; p < 3; p++)
        crash(&C, p);
    for (int p = 0; p < 3; p++) {
        boot(&C, p, 2, 3);
        C.local[p].step = 12; /* the checkpoint each can restore */
    }
    C.local[1].step = 10;     /* one holds an older one */
    run_for(&C, 1000);
    CHECK_INT(training(&C), 3);
    CHECK(C.started_round[0] > round);
    CHECK_INT(C.nw, 2); /* one new world, continuing the first */
    CHECK_INT(C.worlds[1].parent.round, round);
    for (int p = 0; p < 3; p++)
        CHECK_INT(C.start_step[p], 12); /* the newest checkpoint they name */
}

/* The leader of the next round dies after sealing, before its world
 * starts: the others give up on it and another leader seals. */
/* Rank 0 of a world of two dies for good (issue 13: "kill of any single
 * peer, the round leader included: the job always continues"): bob alone
 * is half of the world without its rank 0, so no child of it can be
 * established; once a fresh peer is there (min 2), bob grafts a new root
 * onto the world and carries its state on, without a step lost. When ann
 * returns, it joins the graft's lineage. */
static void test_rank_0_of_two_dies_graft(void) {
    reset();
    boot(&C, 0, 2, 3);
    boot(&C, 1, 2, 3);
    run_for(&C, 1500);
    CHECK_INT(training(&C), 2);
    CHECK_INT(C.rank[0], 0); /* ann */
    sl_elastic_ref_t h = C.world_of[1];
    crash(&C, 0);
    run_for(&C, 1000);
    CHECK_INT(training(&C), 0); /* bob alone: below min */
    uint64_t step = C.local[1].step;
    size_t nw = C.nw;
    boot(&C, 2, 2, 3); /* cat, fresh */
    run_for(&C, 1500);
    CHECK_INT(training(&C), 2);
    CHECK(C.nw > nw);
    const sl_elastic_world_t *g = &C.worlds[nw];
    CHECK_INT(g->parent.round, 0);             /* a root */
    CHECK(sl_elastic_ref_eq(&g->graft, &h));   /* grafted onto bob's last world */
    CHECK_STR(g->members[0], "bob");           /* the continuer keeps its rank order */
    CHECK_INT(C.start_step[1], step);          /* bob's state, no step lost */
    CHECK_INT(C.start_step[2], step);          /* cat takes it from bob */
    CHECK(sl_elastic_ref_eq(&C.world_of[2], &g->id));
    /* ann returns (its tip is the world it was rank 0 of): it joins the
     * graft's lineage, and the state goes on from bob's */
    uint64_t before = C.local[1].step;
    boot(&C, 0, 2, 3);
    run_for(&C, 2000);
    CHECK_INT(training(&C), 3);
    CHECK(C.start_step[0] >= before);
    sl_elastic_view_t v;
    sl_round_member_t m[NP];
    view_of(&C, 0, &v, m);
    sl_elastic_status_t st;
    CHECK_OK(sl_elastic_status(&v, &C.world_of[0], &st));
    CHECK(st.trainable && !st.dropped);
    CHECK(sl_elastic_ref_eq(&st.root, &g->id));
    for (size_t i = nw; i < C.nw; i++)
        CHECK(C.worlds[i].parent.round == 0 || !sl_elastic_ref_eq(&C.worlds[i].parent, &h));
}

/* 2 of 3 die together: the survivor waits while they may return, and
 * grafts once `min` volunteers are there. */
static void test_two_of_three_die_graft(void) {
    reset();
    for (int p = 0; p < 3; p++)
        boot(&C, p, 2, 3);
    run_for(&C, 1500);
    CHECK_INT(training(&C), 3);
    int survivor = C.rank[0] == 2 ? 0 : C.rank[1] == 2 ? 1 : 2;
    for (int p = 0; p < 3; p++)
        if (p != survivor)
            crash(&C, p);
    uint64_t step = C.local[survivor].step;
    boot(&C, 3, 2, 3);
    run_for(&C, 1500);
    CHECK_INT(training(&C), 2);
    CHECK(C.worlds[C.nw - 1].graft.round > 0);
    CHECK_INT(C.start_step[3], step);
}

static void test_leader_dies_before_start(void) {
    reset();
    for (int p = 0; p < 3; p++)
        boot(&C, p, 2, 3);
    /* run until a world is sealed, then kill its leader at once */
    while (C.nw == 0)
        tick(&C);
    int leader = -1;
    for (int p = 0; p < NP; p++)
        if (strcmp(ids[p], C.worlds[0].id.leader) == 0)
            leader = p;
    CHECK(leader >= 0);
    crash(&C, leader);
    run_for(&C, 3000);
    CHECK_INT(training(&C), 2);
    for (int p = 0; p < 3; p++)
        if (p != leader)
            CHECK(C.started_round[p] > 1);
}

static void test_cancel(void) {
    reset();
    for (int p = 0; p < 2; p++)
        boot(&C, p, 1, 2);
    run_for(&C, 1000);
    CHECK_INT(training(&C), 2);
    C.cancelled = true;
    tick(&C);
    CHECK_INT(training(&C), 0);
    CHECK_INT(sl_elastic_phase_of(C.core[0]), SL_ELASTIC_CANCELLED);
    size_t nw = C.nw;
    run_for(&C, 1000);
    CHECK_INT(C.nw, nw);
}

/* ---- the partition rule on hand-written records ---- */

static sl_elastic_world_t WS[12];
static const sl_elastic_world_t *WP[12];
static sl_elastic_ack_t AS[32];
static const sl_elastic_ack_t *AP[32];
static size_t nws, nas;

static sl_elastic_ref_t ref(uint64_t round, const char *leader) {
    sl_elastic_ref_t r;
    memset(&r, 0, sizeof r);
    r.round = round;
    if (leader)
        snprintf(r.leader, sizeof r.leader, "%s", leader);
    return r;
}

static void world(uint64_t round, const char *leader, uint64_t pr, const char *pl,
                  const char *members) {
    sl_elastic_world_t *w = &WS[nws];
    memset(w, 0, sizeof *w);
    w->id = ref(round, leader);
    w->parent = ref(pr, pl);
    char buf[128];
    snprintf(buf, sizeof buf, "%s", members);
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " "))
        snprintf(w->members[w->count++], sizeof w->members[0], "%s", t);
    WP[nws] = w;
    nws++;
}

static void ack(const char *peer, uint64_t round, const char *leader, uint64_t tr,
                const char *tl) {
    sl_elastic_ack_t *a = &AS[nas];
    memset(a, 0, sizeof *a);
    snprintf(a->peer, sizeof a->peer, "%s", peer);
    a->world = ref(round, leader);
    a->tip = ref(tr, tl);
    AP[nas] = a;
    nas++;
}

static sl_elastic_status_t status(uint64_t round, const char *leader) {
    sl_elastic_view_t v = {.worlds = WP, .world_count = nws, .acks = AP, .ack_count = nas};
    sl_elastic_ref_t r = ref(round, leader);
    sl_elastic_status_t st;
    CHECK_OK(sl_elastic_status(&v, &r, &st));
    return st;
}

/* The root world 1/ann of ann, bob, cat, established and all acked. */
static void root3(void) {
    nws = nas = 0;
    world(1, "ann", 0, NULL, "ann bob cat");
    ack("ann", 1, "ann", 0, NULL);
    ack("bob", 1, "ann", 0, NULL);
    ack("cat", 1, "ann", 0, NULL);
}

static void test_partition_minority_never_continues(void) {
    root3();
    CHECK(status(1, "ann").established);
    CHECK(status(1, "ann").trainable);
    /* partition {ann} | {bob, cat}: ann alone seals and acks 2/ann, the
     * others 3/bob */
    world(2, "ann", 1, "ann", "ann");
    ack("ann", 2, "ann", 1, "ann");
    CHECK(!status(2, "ann").established); /* 1 of 3 */
    world(3, "bob", 1, "ann", "bob cat");
    ack("bob", 3, "bob", 1, "ann");
    ack("cat", 3, "bob", 1, "ann");
    CHECK(status(3, "bob").established);   /* 2 of 3 */
    CHECK(status(2, "ann").dead);          /* no majority can come any more */
    sl_elastic_view_t v = {.worlds = WP, .world_count = nws, .acks = AP, .ack_count = nas};
    sl_elastic_ref_t head;
    CHECK_OK(sl_elastic_head(&v, &head));
    CHECK_INT(head.round, 3);
    /* after the heal ann continues through its dead world: 4/bob of all
     * three is established by bob and cat alone, and ann counts too */
    world(4, "bob", 3, "bob", "bob cat ann");
    ack("bob", 4, "bob", 3, "bob");
    ack("cat", 4, "bob", 3, "bob");
    CHECK(status(4, "bob").established);
    ack("ann", 4, "bob", 2, "ann");
    CHECK(status(4, "bob").trainable);
}

static void test_two_children_never_both_established(void) {
    root3();
    /* two leaders each seal a child of 1/ann: whatever order the acks
     * come in, ann (who acks both, in rising rounds) counts for one */
    world(2, "bob", 1, "ann", "ann bob cat");
    world(3, "cat", 1, "ann", "ann cat");
    ack("ann", 2, "bob", 1, "ann");
    ack("bob", 2, "bob", 1, "ann");
    ack("ann", 3, "cat", 2, "bob"); /* ann moved on to round 3 */
    ack("cat", 3, "cat", 1, "ann");
    CHECK(status(2, "bob").established);
    CHECK(!status(3, "cat").established);
    CHECK(status(3, "cat").dead);
}

static void test_split_vote_does_not_block(void) {
    /* a world of four; three leaders seal the next round; the votes split
     * two, one and one, none a quorum: all dead, and a fourth world
     * gathers all four */
    nws = nas = 0;
    world(1, "ann", 0, NULL, "ann bob cat dan");
    ack("ann", 1, "ann", 0, NULL);
    ack("bob", 1, "ann", 0, NULL);
    ack("cat", 1, "ann", 0, NULL);
    ack("dan", 1, "ann", 0, NULL);
    world(2, "ann", 1, "ann", "ann bob cat dan");
    world(2, "cat", 1, "ann", "ann bob cat dan");
    world(2, "dan", 1, "ann", "ann bob cat dan");
    ack("bob", 2, "ann", 1, "ann");
    ack("cat", 2, "ann", 1, "ann");
    ack("dan", 2, "cat", 1, "ann");
    ack("ann", 2, "dan", 1, "ann");
    CHECK(status(2, "ann").dead); /* half, without the parent's rank 0 */
    CHECK(status(2, "cat").dead);
    CHECK(status(2, "dan").dead); /* rank 0, but one of four */
    world(3, "bob", 1, "ann", "ann bob cat dan");
    ack("ann", 3, "bob", 2, "dan");
    ack("bob", 3, "bob", 2, "ann");
    ack("cat", 3, "bob", 2, "ann");
    CHECK(status(3, "bob").established); /* 3 of 4, through dead worlds */
    ack("dan", 3, "bob", 2, "cat");
    CHECK(status(3, "bob").trainable);
}

static void test_half_with_rank_0_goes_on(void) {
    /* the tie-break: exactly half of a world continues it when the half
     * holds its rank 0; the other half never can then */
    nws = nas = 0;
    world(1, "bob", 0, NULL, "ann bob");
    ack("ann", 1, "bob", 0, NULL);
    ack("bob", 1, "bob", 0, NULL);
    world(2, "bob", 1, "bob", "bob"); /* ann (rank 0) died: bob alone */
    ack("bob", 2, "bob", 1, "bob");
    CHECK(!status(2, "bob").established);
    CHECK(status(2, "bob").dead); /* half, without rank 0: bob waits for ann */
    world(2, "ann", 1, "bob", "ann"); /* ann alone (a partition) */
    ack("ann", 2, "ann", 1, "bob");
    CHECK(status(2, "ann").established);
    CHECK(status(2, "ann").trainable);
    CHECK(status(2, "bob").dead);
    /* a 2-2 split of four: the half with rank 0 goes on */
    nws = nas = 0;
    world(1, "ann", 0, NULL, "ann bob cat dan");
    ack("ann", 1, "ann", 0, NULL);
    ack("bob", 1, "ann", 0, NULL);
    ack("cat", 1, "ann", 0, NULL);
    ack("dan", 1, "ann", 0, NULL);
    world(2, "bob", 1, "ann", "ann bob");
    world(2, "dan", 1, "ann", "cat dan");
    ack("ann", 2, "bob", 1, "ann");
    ack("bob", 2, "bob", 1, "ann");
    ack("cat", 2, "dan", 1, "ann");
    ack("dan", 2, "dan", 1, "ann");
    CHECK(status(2, "bob").established);
    CHECK(status(2, "dan").dead);
}

static void test_world_that_never_starts_does_not_block(void) {
    /* 2/bob is established by bob and cat but ann acked 2/dan: it never
     * starts; bob, cat and ann (whose chain reaches 1/ann through the dead
     * 2/dan: it committed to nothing established since) continue it */
    nws = nas = 0;
    world(1, "ann", 0, NULL, "ann bob cat");
    ack("ann", 1, "ann", 0, NULL);
    ack("bob", 1, "ann", 0, NULL);
    ack("cat", 1, "ann", 0, NULL);
    world(2, "bob", 1, "ann", "bob cat ann dan");
    world(2, "dan", 1, "ann", "ann dan");
    ack("bob", 2, "bob", 1, "ann");
    ack("cat", 2, "bob", 1, "ann");
    ack("ann", 2, "dan", 1, "ann");
    ack("dan", 2, "dan", 0, NULL);
    CHECK(status(2, "bob").established);
    CHECK(!status(2, "bob").trainable);
    CHECK(status(2, "dan").dead);
    world(3, "cat", 2, "bob", "bob cat ann dan");
    ack("cat", 3, "cat", 2, "bob");
    ack("ann", 3, "cat", 2, "dan"); /* its chain reaches 1/ann through the dead 2/dan */
    CHECK(!status(3, "cat").established); /* 2 of 4 without 2/bob's rank 0 */
    ack("bob", 3, "cat", 2, "bob");
    CHECK(status(3, "cat").established);  /* 3 of 4 */
    ack("dan", 3, "cat", 2, "dan");
    CHECK(status(3, "cat").trainable);
}

static void test_newest_lineage_survives(void) {
    /* two roots sealed apart in one round: the larger leader id wins */
    nws = nas = 0;
    world(1, "bob", 0, NULL, "bob");
    ack("bob", 1, "bob", 0, NULL);
    world(1, "ann", 0, NULL, "ann cat");
    ack("ann", 1, "ann", 0, NULL);
    ack("cat", 1, "ann", 0, NULL);
    sl_elastic_view_t v = {.worlds = WP, .world_count = nws, .acks = AP, .ack_count = nas};
    sl_elastic_ref_t head;
    CHECK_OK(sl_elastic_head(&v, &head));
    CHECK_STR(head.leader, "bob");
    CHECK(!status(1, "ann").trainable);
    /* ann moved on to a newer root with dan and eve (cat never heard of
     * it; ann is its joiner, dan and eve establish it): its lineage is the
     * newest and survives; 1/ann's could never gather a majority again */
    world(2, "dan", 0, NULL, "ann dan eve");
    ack("ann", 2, "dan", 1, "ann");
    ack("dan", 2, "dan", 0, NULL);
    ack("eve", 2, "dan", 0, NULL);
    v.world_count = nws;
    v.ack_count = nas;
    CHECK_OK(sl_elastic_head(&v, &head));
    CHECK_INT(head.round, 2);
    CHECK(status(2, "dan").trainable);
    CHECK(!status(1, "bob").trainable);
}

/* The source is the state last stepped by the newest world, not the
 * highest step: 2/ann restarted from the checkpoint at 0 and stepped to
 * 10, so ann's state at step 50 (from 1/ann) is older than bob's. */
static void test_source_is_the_newest_state(void) {
    nws = nas = 0;
    world(1, "ann", 0, NULL, "ann bob cat");
    ack("ann", 1, "ann", 0, NULL);
    ack("bob", 1, "ann", 0, NULL);
    ack("cat", 1, "ann", 0, NULL);
    world(2, "ann", 1, "ann", "ann bob cat");
    ack("ann", 2, "ann", 1, "ann");
    ack("bob", 2, "ann", 1, "ann");
    ack("cat", 2, "ann", 1, "ann");
    world(3, "bob", 2, "ann", "cat bob ann");
    ack("bob", 3, "bob", 2, "ann");
    AS[nas - 1].has_state = true;
    AS[nas - 1].step = 10;
    AS[nas - 1].state_world = ref(2, "ann");
    ack("cat", 3, "bob", 2, "ann"); /* restarted: no state */
    sl_elastic_config_t cfg = {.job_id = "job-t", .min_nodes = 2, .max_nodes = 3,
                               .settle_ms = 200, .ack_timeout_ms = 2000};
    sl_elastic_t *e = NULL;
    CHECK_OK(sl_elastic_new(&cfg, "ann", &e));
    sl_round_member_t m[3] = {{"ann", true, 0}, {"bob", true, 0}, {"cat", true, 0}};
    sl_elastic_view_t v = {.worlds = WP, .world_count = nws, .acks = AP, .ack_count = nas,
                           .members = m, .member_count = 3, .synced = true};
    sl_elastic_local_t local = {.step = 50, .has_state = true, .state_world = ref(1, "ann")};
    sl_elastic_out_t out;
    CHECK_OK(sl_elastic_step(e, &v, &local, 0, &out));
    CHECK_INT(out.count, 1);
    CHECK_INT(out.actions[0].kind, SL_ELASTIC_WRITE_ACK);
    AS[nas] = out.actions[0].ack;
    AP[nas] = &AS[nas];
    nas++;
    v.ack_count = nas;
    CHECK_OK(sl_elastic_step(e, &v, &local, 50, &out));
    CHECK_INT(out.count, 1);
    CHECK_INT(out.actions[0].kind, SL_ELASTIC_START);
    CHECK_INT(out.actions[0].rank, 2);
    CHECK_INT(out.actions[0].source, 1); /* bob */
    CHECK_INT(out.actions[0].start_step, 10);
    CHECK_INT(sl_elastic_phase_of(e), SL_ELASTIC_TRAINING);
    sl_elastic_destroy(&e);
}

/* A graft onto 1/ann (ann, rank 0 of two, gone in bob's view) is the
 * lineage while 1/ann has no other continuation; it is dropped once a
 * child of 1/ann is established (ann was only cut off, and went on with
 * dan: the quorum side is preferred), and a second graft onto the same
 * world is dropped beside the first. */
static void test_graft_dropped_when_the_quorum_side_went_on(void) {
    nws = nas = 0;
    world(1, "ann", 0, NULL, "ann bob");
    ack("ann", 1, "ann", 0, NULL);
    ack("bob", 1, "ann", 0, NULL);
    world(2, "bob", 0, NULL, "bob cat");
    WS[nws - 1].graft = ref(1, "ann");
    ack("bob", 2, "bob", 1, "ann");
    CHECK(!status(2, "bob").established); /* 1 of 2 */
    ack("cat", 2, "bob", 0, NULL);
    CHECK(status(2, "bob").established);
    CHECK(status(2, "bob").trainable);
    CHECK(!status(2, "bob").dropped);
    sl_elastic_view_t v = {.worlds = WP, .world_count = nws, .acks = AP, .ack_count = nas};
    sl_elastic_ref_t head;
    CHECK_OK(sl_elastic_head(&v, &head));
    CHECK_STR(head.leader, "bob");
    /* a second graft onto 1/ann, by eve and fay (a third side): dropped
     * beside the first, even once established */
    world(3, "eve", 0, NULL, "eve fay");
    WS[nws - 1].graft = ref(1, "ann");
    ack("eve", 3, "eve", 0, NULL);
    ack("fay", 3, "eve", 0, NULL);
    CHECK(status(3, "eve").established);
    CHECK(status(3, "eve").dropped);
    /* ann, cut off, went on with dan: 3/ann continues 1/ann (half with
     * rank 0), and the graft's lineage is dropped, its child too */
    world(3, "bob", 2, "bob", "bob cat");
    ack("bob", 3, "bob", 2, "bob");
    ack("cat", 3, "bob", 2, "bob");
    CHECK(status(3, "bob").trainable);
    world(4, "ann", 1, "ann", "ann dan");
    ack("ann", 4, "ann", 1, "ann");
    CHECK(status(4, "ann").established);
    CHECK(status(2, "bob").dropped);
    CHECK(status(3, "bob").dropped);
    CHECK(!status(3, "bob").trainable);
    v.world_count = nws;
    v.ack_count = nas;
    CHECK_OK(sl_elastic_head(&v, &head));
    CHECK_INT(head.round, 4);
    CHECK_STR(head.leader, "ann");
    /* a graft member that committed to an established world since 1/ann
     * does not count for a graft onto it */
    nws = nas = 0;
    world(1, "ann", 0, NULL, "ann bob");
    ack("ann", 1, "ann", 0, NULL);
    ack("bob", 1, "ann", 0, NULL);
    world(2, "ann", 1, "ann", "ann");
    ack("ann", 2, "ann", 1, "ann");
    world(3, "bob", 0, NULL, "bob ann");
    WS[nws - 1].graft = ref(1, "ann");
    ack("bob", 3, "bob", 1, "ann");
    ack("ann", 3, "bob", 2, "ann");
    CHECK(!status(3, "bob").established); /* ann counts for 2/ann, not here */
    CHECK(status(3, "bob").dead);
}

/* A graft's source is the member holding the state the grafted-on world
 * stepped last (its lineage's newest), not a restart from a checkpoint. */
static void test_graft_takes_the_state(void) {
    nws = nas = 0;
    world(1, "ann", 0, NULL, "ann bob");
    ack("ann", 1, "ann", 0, NULL);
    ack("bob", 1, "ann", 0, NULL);
    world(2, "ann", 1, "ann", "ann bob");
    ack("ann", 2, "ann", 1, "ann");
    ack("bob", 2, "ann", 1, "ann");
    world(3, "cat", 0, NULL, "bob cat");
    WS[nws - 1].graft = ref(2, "ann");
    ack("bob", 3, "cat", 2, "ann");
    AS[nas - 1].has_state = true;
    AS[nas - 1].step = 40;
    AS[nas - 1].state_world = ref(2, "ann");
    sl_elastic_config_t cfg = {.job_id = "job-t", .min_nodes = 2, .max_nodes = 2,
                               .settle_ms = 200, .ack_timeout_ms = 2000};
    sl_elastic_t *e = NULL;
    CHECK_OK(sl_elastic_new(&cfg, "cat", &e));
    sl_round_member_t m[3] = {{"ann", false, 0}, {"bob", true, 0}, {"cat", true, 0}};
    sl_elastic_view_t v = {.worlds = WP, .world_count = nws, .acks = AP, .ack_count = nas,
                           .members = m, .member_count = 3, .synced = true};
    sl_elastic_local_t local = {.step = 0};
    sl_elastic_out_t out;
    CHECK_OK(sl_elastic_step(e, &v, &local, 0, &out));
    CHECK_INT(out.count, 1);
    CHECK_INT(out.actions[0].kind, SL_ELASTIC_WRITE_ACK);
    AS[nas] = out.actions[0].ack;
    AP[nas] = &AS[nas];
    nas++;
    v.ack_count = nas;
    CHECK_OK(sl_elastic_step(e, &v, &local, 50, &out));
    CHECK_INT(out.count, 1);
    CHECK_INT(out.actions[0].kind, SL_ELASTIC_START);
    CHECK_INT(out.actions[0].rank, 1);
    CHECK_INT(out.actions[0].source, 0); /* bob */
    CHECK_INT(out.actions[0].start_step, 40);
    sl_elastic_destroy(&e);
}

/* No graft while the head's quorum may still come: rank 0 of 1/ann is
 * alive in the view (training on, or about to volunteer), so neither bob
 * nor the fresh cat seals anything; once ann is dead in the view, the
 * round's leader grafts onto 1/ann, bob first. */
static void test_no_graft_while_rank_0_is_alive(void) {
    nws = nas = 0;
    world(1, "ann", 0, NULL, "ann bob");
    ack("ann", 1, "ann", 0, NULL);
    ack("bob", 1, "ann", 0, NULL);
    sl_elastic_vol_t vols[2] = {{"bob", 2}, {"cat", 2}};
    sl_round_member_t m[3] = {{"ann", true, 0}, {"bob", true, 0}, {"cat", true, 0}};
    sl_elastic_view_t v = {.worlds = WP, .world_count = nws, .acks = AP, .ack_count = nas,
                           .vols = vols, .vol_count = 2, .members = m, .member_count = 3,
                           .synced = true};
    sl_elastic_config_t cfg = {.job_id = "job-t", .min_nodes = 2, .max_nodes = 2,
                               .settle_ms = 200, .ack_timeout_ms = 2000};
    sl_elastic_t *e[2] = {NULL, NULL};
    CHECK_OK(sl_elastic_new(&cfg, "bob", &e[0]));
    CHECK_OK(sl_elastic_new(&cfg, "cat", &e[1]));
    sl_elastic_local_t local[2] = {{.step = 10, .has_state = true, .state_world = ref(1, "ann")},
                                   {.step = 0}};
    sl_elastic_out_t out;
    int sealed = 0;
    for (int64_t now = 0; now <= 1000; now += 50)
        for (int p = 0; p < 2; p++) {
            CHECK_OK(sl_elastic_step(e[p], &v, &local[p], now, &out));
            for (size_t i = 0; i < out.count; i++)
                sealed += out.actions[i].kind == SL_ELASTIC_WRITE_WORLD;
        }
    CHECK_INT(sealed, 0);
    m[0].alive = false; /* ann is dead in the view */
    sl_elastic_world_t g;
    memset(&g, 0, sizeof g);
    for (int64_t now = 1050; now <= 2000 && !sealed; now += 50)
        for (int p = 0; p < 2; p++) {
            CHECK_OK(sl_elastic_step(e[p], &v, &local[p], now, &out));
            for (size_t i = 0; i < out.count; i++)
                if (out.actions[i].kind == SL_ELASTIC_WRITE_WORLD) {
                    g = out.actions[i].world;
                    sealed++;
                }
        }
    CHECK_INT(sealed, 1);
    CHECK_INT(g.parent.round, 0);
    CHECK_INT(g.graft.round, 1);
    CHECK_STR(g.graft.leader, "ann");
    CHECK_INT(g.count, 2);
    CHECK_STR(g.members[0], "bob");
    CHECK_STR(g.members[1], "cat");
    sl_elastic_destroy(&e[0]);
    sl_elastic_destroy(&e[1]);
}

static void test_bad_views(void) {
    root3();
    ack("ann", 1, "ann", 0, NULL); /* a second ack of one round by one peer */
    sl_elastic_view_t v = {.worlds = WP, .world_count = nws, .acks = AP, .ack_count = nas};
    sl_elastic_ref_t head;
    CHECK_ERR(sl_elastic_head(&v, &head), SL_EINVAL);
    sl_elastic_config_t cfg = {.job_id = "j", .min_nodes = 3, .max_nodes = 2};
    sl_elastic_t *e = NULL;
    CHECK_ERR(sl_elastic_new(&cfg, "ann", &e), SL_EINVAL);
    cfg.max_nodes = SL_ELASTIC_MAX_NODES + 1;
    CHECK_ERR(sl_elastic_new(&cfg, "ann", &e), SL_EINVAL);
    cfg.max_nodes = 3;
    CHECK_ERR(sl_elastic_new(&cfg, "", &e), SL_EINVAL);
    CHECK(e == NULL);
    sl_elastic_destroy(&e); /* idempotent on NULL */
}

/* ---- a long job: the pruned view ---- */

#define LONG_JOB "0123456789abcdef"

/* One store every peer reads (sl_elastic_records, pruned after every
 * tick as a node prunes its own), the peers' cores and trainers. */
typedef struct {
    sl_elastic_records_t *recs;
    sl_elastic_t *core[NP];
    bool up[NP];
    sl_elastic_local_t local[NP];
    sl_elastic_ref_t world_of[NP]; /* the world it trains in (round 0: none) */
    size_t worlds;                 /* worlds sealed */
    size_t walked_max;             /* the most records one turn took in */
    int64_t now;
    sl_elastic_entry_t *log;       /* every entry written, in the order written */
    size_t logged, log_cap;        /* entries */
} long_t;

static void long_add(long_t *l, sl_elastic_key_kind kind, uint64_t round, const char *peer,
                     const uint8_t *val, size_t len) {
    sl_elastic_key_t k = {.kind = kind, .round = round};
    memcpy(k.job, LONG_JOB, sizeof k.job);
    snprintf(k.peer, sizeof k.peer, "%s", peer);
    char key[SL_ELASTIC_KEY_MAX], why[200];
    size_t key_len;
    CHECK_OK(sl_elastic_key_build(&k, key, sizeof key, &key_len));
    sl_err err = sl_elastic_records_add(l->recs, key, key_len, val, len, why, sizeof why);
    CHECK_MSG(err == SL_OK, "%s refused: %s", key, why);
    if (l->logged == l->log_cap) {
        l->log_cap = l->log_cap ? 2 * l->log_cap : 1024;
        l->log = realloc(l->log, l->log_cap * sizeof *l->log);
    }
    char *copy = malloc(key_len + len);
    memcpy(copy, key, key_len);
    memcpy(copy + key_len, val, len);
    l->log[l->logged++] = (sl_elastic_entry_t){copy, key_len, copy + key_len, len};
}

static void long_boot(long_t *l, int p) {
    sl_elastic_config_t cfg = {.job_id = LONG_JOB, .min_nodes = 3, .max_nodes = 4,
                               .settle_ms = 200, .ack_timeout_ms = 2000};
    CHECK_OK(sl_elastic_new(&cfg, ids[p], &l->core[p]));
    l->up[p] = true;
    memset(&l->world_of[p], 0, sizeof l->world_of[p]);
}

static void long_tick(long_t *l) {
    for (int p = 0; p < NP; p++) {
        if (!l->up[p])
            continue;
        sl_elastic_view_t v;
        memset(&v, 0, sizeof v);
        sl_elastic_records_view(l->recs, &v);
        sl_round_member_t m[NP];
        for (int q = 0; q < NP; q++)
            m[q] = (sl_round_member_t){.id = ids[q], .alive = l->up[q]};
        v.members = m;
        v.member_count = NP;
        v.synced = true;
        sl_elastic_out_t out;
        CHECK_OK(sl_elastic_step(l->core[p], &v, &l->local[p], l->now, &out));
        if (sl_elastic_walked(l->core[p]) > l->walked_max)
            l->walked_max = sl_elastic_walked(l->core[p]);
        for (size_t i = 0; i < out.count; i++) {
            const sl_elastic_action_t *a = &out.actions[i];
            uint8_t buf[SL_ELASTIC_VALUE_MAX];
            size_t len;
            switch (a->kind) {
            case SL_ELASTIC_WRITE_VOL:
                CHECK_OK(sl_elastic_vol_encode(&a->vol, buf, sizeof buf, &len));
                long_add(l, SL_ELASTIC_KEY_VOL, 0, ids[p], buf, len);
                break;
            case SL_ELASTIC_WRITE_WORLD:
                CHECK_OK(sl_elastic_world_encode(&a->world, 4, buf, sizeof buf, &len));
                long_add(l, SL_ELASTIC_KEY_WORLD, a->world.id.round, ids[p], buf, len);
                l->worlds++;
                break;
            case SL_ELASTIC_WRITE_ACK:
                CHECK_OK(sl_elastic_ack_encode(&a->ack, buf, sizeof buf, &len));
                long_add(l, SL_ELASTIC_KEY_ACK, a->ack.world.round, ids[p], buf, len);
                break;
            case SL_ELASTIC_START:
                l->world_of[p] = a->world.id;
                l->local[p].step = a->start_step;
                l->local[p].has_state = true;
                break;
            case SL_ELASTIC_STOP: memset(&l->world_of[p], 0, sizeof l->world_of[p]); break;
            }
        }
    }
    l->now += 50;
    for (int p = 0; p < NP; p++)
        if (l->up[p] && l->world_of[p].round) {
            l->local[p].step++;
            l->local[p].state_world = l->world_of[p];
        }
    bool moved;
    CHECK_OK(sl_elastic_records_prune(l->recs, &moved));
}

/* Ticks until a world of `size` trains (every up peer in it agrees). */
static bool long_until(long_t *l, int size) {
    for (int t = 0; t < 200; t++) {
        long_tick(l);
        int n = 0;
        sl_elastic_ref_t w = {0};
        bool same = true;
        for (int p = 0; p < NP; p++)
            if (l->up[p] && l->world_of[p].round) {
                same &= n == 0 || sl_elastic_ref_eq(&w, &l->world_of[p]);
                w = l->world_of[p];
                n++;
            }
        if (n == size && same)
            return true;
    }
    return false;
}

/* 3000 world changes at a world size of 4 (about 10,000 acks, where a
 * view holds 4096): the job keeps taking new worlds, and a turn takes in
 * as many records at the end as after the first changes. Four peers, at
 * least three in a world: a member dies, the other three go on, it comes
 * back, the four go on. */
static void test_long_job_pruned_view(void) {
    static long_t L;
    memset(&L, 0, sizeof L);
    CHECK_OK(sl_elastic_records_new(LONG_JOB, 4, &L.recs));
    for (int p = 0; p < 4; p++)
        long_boot(&L, p);
    CHECK(long_until(&L, 4));
    size_t early = 0;
    int victim = 0;
    while (L.worlds < 3000) {
        /* a member of the world dies for a while */
        while (!L.world_of[victim].round)
            victim = (victim + 1) % NP;
        sl_elastic_destroy(&L.core[victim]);
        L.up[victim] = false;
        memset(&L.world_of[victim], 0, sizeof L.world_of[victim]);
        memset(&L.local[victim], 0, sizeof L.local[victim]);
        if (!long_until(&L, 3)) {
            CHECK_MSG(false, "no world of 3 after %zu worlds", L.worlds);
            break;
        }
        long_boot(&L, victim);
        if (!long_until(&L, 4)) {
            CHECK_MSG(false, "no world of 4 after %zu worlds", L.worlds);
            break;
        }
        victim = (victim + 1) % NP;
        if (L.worlds >= 100 && !early) {
            early = L.walked_max; /* the first changes' turns, anchor moving */
            L.walked_max = 0;
        }
    }
    sl_elastic_view_t v;
    memset(&v, 0, sizeof v);
    sl_elastic_records_view(L.recs, &v);
    printf("  %zu worlds sealed; a turn took in at most %zu records after the first 100 (%zu "
           "before); the view holds %zu worlds, %zu acks, anchor round %llu\n", L.worlds,
           L.walked_max, early, v.world_count, v.ack_count, (unsigned long long)v.anchor.round);
    CHECK(L.worlds >= 3000);
    CHECK(v.anchor.round > 2900);   /* the anchor moved with the job */
    CHECK(L.walked_max <= early);   /* flat: no more than the first changes took */
    CHECK(L.walked_max <= 40);      /* a few worlds of 4 and their acks */
    CHECK(v.world_count <= 8);
    CHECK(v.past_count == 4);       /* one memory per peer */
    CHECK(sl_elastic_records_left_out(L.recs) == 0);

    /* a peer that restarts, or joins, reads the whole history from its
       replica (in the store's key order, not the rounds'): it is loaded
       in rising rounds and pruned as it comes, and says what the live
       records say */
    CHECK(L.logged % 7919 != 0);
    sl_elastic_entry_t *shuffled = malloc(L.logged * sizeof *shuffled);
    for (size_t i = 0; i < L.logged; i++)
        shuffled[i] = L.log[(i * 7919) % L.logged]; /* 7919 is prime, L.logged not its multiple */
    sl_elastic_records_t *fresh = NULL;
    CHECK_OK(sl_elastic_records_new(LONG_JOB, 4, &fresh));
    size_t refused = 1;
    char why[200] = "";
    CHECK_OK(sl_elastic_records_load(fresh, shuffled, L.logged, &refused, why, sizeof why));
    CHECK_MSG(refused == 0, "%zu refused: %s", refused, why);
    CHECK(!sl_elastic_records_stale(fresh));
    sl_elastic_view_t fv;
    memset(&fv, 0, sizeof fv);
    sl_elastic_records_view(fresh, &fv);
    sl_elastic_ref_t live_head, fresh_head;
    CHECK_OK(sl_elastic_head(&v, &live_head));
    CHECK_OK(sl_elastic_head(&fv, &fresh_head));
    CHECK(sl_elastic_ref_eq(&live_head, &fresh_head));
    CHECK(fv.anchor.round > 2000);
    CHECK(fv.ack_count < SL_ELASTIC_MAX_RECORDS);
    printf("  loaded again from %zu entries: anchor round %llu, %zu worlds, %zu acks, head "
           "%llu/%s\n", L.logged, (unsigned long long)fv.anchor.round, fv.world_count,
           fv.ack_count, (unsigned long long)fresh_head.round, fresh_head.leader);
    bool moved;
    CHECK_OK(sl_elastic_records_prune(fresh, &moved));
    sl_elastic_records_view(fresh, &fv);
    CHECK(sl_elastic_ref_eq(&fv.anchor, &v.anchor)); /* and prunes where the live ones are */
    sl_elastic_records_destroy(&fresh);
    free(shuffled);
    for (size_t i = 0; i < L.logged; i++)
        free((void *)L.log[i].key);
    free(L.log);

    for (int p = 0; p < NP; p++)
        sl_elastic_destroy(&L.core[p]);
    sl_elastic_records_destroy(&L.recs);
}

int main(void) {
    sl_log_set_level(SL_LOG_WARNING);
    sl_test_run("first_world_and_changes", test_first_world_and_changes);
    sl_test_run("full_restart_resumes_from_checkpoint",
                test_full_restart_resumes_from_checkpoint);
    sl_test_run("rank_0_of_two_dies_graft", test_rank_0_of_two_dies_graft);
    sl_test_run("two_of_three_die_graft", test_two_of_three_die_graft);
    sl_test_run("leader_dies_before_start", test_leader_dies_before_start);
    sl_test_run("cancel", test_cancel);
    sl_test_run("partition_minority_never_continues", test_partition_minority_never_continues);
    sl_test_run("two_children_never_both_established",
                test_two_children_never_both_established);
    sl_test_run("split_vote_does_not_block", test_split_vote_does_not_block);
    sl_test_run("half_with_rank_0_goes_on", test_half_with_rank_0_goes_on);
    sl_test_run("world_that_never_starts_does_not_block",
                test_world_that_never_starts_does_not_block);
    sl_test_run("newest_lineage_survives", test_newest_lineage_survives);
    sl_test_run("source_is_the_newest_state", test_source_is_the_newest_state);
    sl_test_run("graft_dropped_when_the_quorum_side_went_on",
                test_graft_dropped_when_the_quorum_side_went_on);
    sl_test_run("graft_takes_the_state", test_graft_takes_the_state);
    sl_test_run("no_graft_while_rank_0_is_alive", test_no_graft_while_rank_0_is_alive);
    sl_test_run("bad_views", test_bad_views);
    sl_test_run("long_job_pruned_view", test_long_job_pruned_view);
    reset();
    return sl_test_finish();
}
