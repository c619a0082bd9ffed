/* An elastic job on a simulated fleet: N peers each run the real
 * rendezvous core (src/elastic/rendezvous.c) on a virtual clock, under
 * random kills (the round leader among them, and rank 0 of a world for
 * good), late joins, pauses (SIGSTOP), restarts and partitions, over many
 * seeds; one seed in three has worlds of two at most, where rank 0's loss
 * leaves no quorum (the grafts).
 *
 * The store is modelled in the test as the job's records are: every
 * world and ack record is written once under its own key, so a replica is
 * the set of records it holds (a bit per record of the run's registry)
 * and anti-entropy is their union; a volunteer record is a register whose
 * round only grows. Replicas survive crashes (the store's WAL); a crash
 * loses the core and the trainer's parameters. Membership: a peer deems
 * another alive while it heard from it in the last second. Training: a
 * world applies one step per 50 ms tick when every member trains in it,
 * runs and reaches every other member (a synchronous all-reduce), and
 * every member's step moves together.
 *
 * Checked (INVARIANTS.md): E1 the members that start round r of a lineage
 * agree on the world (members, ranks, start step, source); E2 every world
 * started has min..max members; E3 a world starts from a state that
 * exists (the source's step, trained in this lineage), from the lineage's
 * newest state whenever a member holds it, and applies its steps one
 * after the other from there; E4 every step's samples (the real schedule,
 * src/elastic/schedule.c, cut by the world's size) are new to the state's
 * epoch, and each epoch ends with every sample seen once whatever the
 * world sizes were (a joiner gets what its source has seen); E5 no two
 * established worlds continue one world, and of the established worlds
 * that carry one on (children and grafts) at most one is in a lineage not
 * dropped (in the union of every replica), and a world steps only while
 * it is the head in every member's replica (a member that has seen a
 * newer world has stopped); E6 every peer's view is pruned at its anchor
 * (docs/elastic.md "The pruned view"), as a node's is, and says what its
 * whole replica says (the head; established, dead and dropped past the
 * anchor); progress: once quiet, the job trains with min(max, N) members,
 * N the peers not killed for good. A graft's lineage goes on from the
 * state of the world it grafts onto (E3). One seed in four is a long job
 * (its faults last LONG_MS longer), so that anchors move many times. Each
 * checker has a planted bug (src/elastic/elastic_internal.h) and a test
 * that shows it firing.
 *
 * A failing seed is printed; SL_SEEDS=N runs N seeds; SL_SEED=S one,
 * SL_FIRST_SEED=S a sweep from S; SL_VERBOSE=1 prints each seed's figures,
 * SL_TRACE=1 every action of every peer and the worlds at the end,
 * SL_NO_PRUNE=1 keeps every view whole (to tell the pruned view's doing
 * from the core's). */
#include <stdarg.h>
#include <stdlib.h>

#include "elastic/elastic_internal.h"
#include "starling/elastic.h"
#include "starling/rng.h"
#include "testlib.h"

#define MAXP 7
#define MAX_W 1024
#define MAX_A 4096
#define STEP_MS 50
#define DEAD_AFTER_MS 1000
#define QUIET_MS 25000        /* after the last fault */
#define SETTLE_MS 300
#define ACK_TIMEOUT_MS 3000
#define SYNC_ALONE_MS 2000    /* a peer that hears nobody seals a root after this */
#define LONG_MS 40000         /* one seed in four: faults this much longer */

typedef struct {
    sl_elastic_world_t w;  /* the record */
    bool started;          /* some member started it */
    uint64_t start_step;   /* E1: what the first starter computed */
    int source;            /* E1: ditto */
    int root;              /* registry index of its lineage's root */
    uint64_t steps;        /* steps applied in it */
    bool held;             /* E3: at its first start a member held the lineage's newest state */
    uint64_t truth;        /* E3: the lineage's last applied step then */
} wrec_t;

typedef struct {
    char id[24];              /* "peer-N" */
    bool up;                  /* running (not crashed) */
    int64_t paused_until;     /* SIGSTOPped until then */
    int64_t down_until;       /* restart time when down */
    uint64_t wbits[MAX_W / 64]; /* replica: world records held */
    uint64_t abits[MAX_A / 64]; /* replica: ack records held */
    uint64_t vol[MAXP];       /* replica: volunteer registers (0: none) */
    int64_t heard[MAXP];      /* last time it heard from each peer */
    sl_elastic_t *core;       /* volatile */
    bool has_state;           /* trainer: parameters in memory */
    uint64_t step;            /* trainer: the step they are at */
    sl_elastic_ref_t state_world; /* trainer: the last world that applied a step to them */
    uint64_t seen;            /* trainer: samples of the current epoch its state has seen */
    int training;             /* registry world it trains in, -1 */
    int64_t stuck_since;      /* its world cannot step since then (0: it can) */
    sl_elastic_ref_t broken;  /* trainer: the world whose collective broke here */
    int64_t booted;           /* when it last started */
    bool synced;              /* merged another replica since (or alone for SYNC_ALONE_MS) */
    sl_elastic_ref_t anchor;  /* its pruned view: records below it left out (volatile, as
                                 the node's records: a restart reads the replica again) */
    sl_elastic_past_t past[MAXP]; /* what its view keeps of each peer's acks below it */
    size_t past_count;        /* entries */
    uint64_t wbits_at[MAX_W / 64]; /* the replica when the anchor was set */
    uint64_t abits_at[MAX_A / 64];
} peer_t;

typedef struct {
    uint64_t seed;
    sl_elastic_bug bug;
    int n, min, max;
    peer_t peers[MAXP];
    int group[MAXP];          /* partition side */
    int64_t heal_at;          /* partition ends (0: none) */
    int64_t last_heal;        /* when the network was last made whole */
    int64_t faults_until;
    int64_t last_fault;
    int64_t now;
    sl_rng_t rng;
    wrec_t *worlds;           /* the registry of every record written */
    int nw;
    sl_elastic_ack_t *acks;
    int na;
    bool pair;                /* worlds of two at most (rank 0's death leaves no quorum) */
    sl_elastic_sched_t sched; /* E4: the job's step schedule (at most 62 samples) */
    uint64_t lineage_step[MAX_W]; /* by root index: the lineage's last applied step */
    int lineage_world[MAX_W];     /* by root index: the world that applied it (-1: none) */
    int64_t lineage_stepped[MAX_W]; /* by root index: when it last applied one */
    bool lineage_set[MAX_W];      /* by root index: a graft's lineage took its state */
    int gone;                     /* peers killed for good */
    int grafts;                   /* graft worlds started */
    char violation[320];
    /* figures */
    int kills, leader_kills, pauses, partitions, starts, redone;
    int anchor_moves;         /* a peer's anchor moved */
    int anchor_resets;        /* a peer read its whole replica again (a record the
                                 pruned view could not judge) */
    uint64_t anchor_round;    /* the newest anchor a peer held */
    int dropped_steps;        /* steps applied in lineages dropped in the end (a
                                 graft whose world went on on the other side) */
    uint64_t total_steps;
} world_t;

static void violate(world_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violate(world_t *w, const char *fmt, ...) {
    if (w->violation[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(w->violation, sizeof w->violation, "at %.2f s: ", w->now / 1000.0);
    vsnprintf(w->violation + n, sizeof w->violation - (size_t)n, fmt, ap);
    va_end(ap);
}

/* A member whose all-reduce moved nothing this long leaves the world
 * (the ring link's timeout, scaled to the simulated clock). */
#define RING_TIMEOUT_MS 2000

static bool running(const world_t *w, int p) {
    return w->peers[p].up && w->now >= w->peers[p].paused_until;
}

static bool connected(const world_t *w, int a, int b) {
    return running(w, a) && running(w, b) && w->group[a] == w->group[b];
}

static int peer_index(const world_t *w, const char *id) {
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->peers[i].id, id) == 0)
            return i;
    return -1;
}

static int find_wrec(const world_t *w, const sl_elastic_ref_t *ref) {
    for (int i = w->nw - 1; i >= 0; i--)
        if (sl_elastic_ref_eq(&w->worlds[i].w.id, ref))
            return i;
    return -1;
}

/* The world the records say x carries on: its parent, or the world a
 * graft grafts onto (-1: a root, or not written). */
static int carried(const world_t *w, int x) {
    const sl_elastic_world_t *wd = &w->worlds[x].w;
    if (wd->parent.round)
        return find_wrec(w, &wd->parent);
    return wd->graft.round ? find_wrec(w, &wd->graft) : -1;
}

/* The root of x's tree, by parents (the status's root is the anchor in a
 * pruned view). */
static int root_of(const world_t *w, int x) {
    for (int n = 0; x >= 0 && n < MAX_W; n++) {
        if (!w->worlds[x].w.parent.round)
            return x;
        x = find_wrec(w, &w->worlds[x].w.parent);
    }
    return -1;
}

/* Whether world sx is x or one of the worlds x carries on, back to its
 * first root through every graft. */
static bool carries(const world_t *w, int x, int sx) {
    for (int n = 0; x >= 0 && n < MAX_W; n++, x = carried(w, x))
        if (x == sx)
            return true;
    return false;
}

/* ---- views ---- */

static const sl_elastic_world_t *vw[MAX_W];
static const sl_elastic_ack_t *va[MAX_A];
static sl_elastic_vol_t vv[MAXP];
static sl_round_member_t vm[MAXP];

/* Peer p's view (p < 0: the union of every replica, all alive), pruned
 * at its anchor or (full) the whole replica. */
static void build_view_of(world_t *w, int p, bool full, sl_elastic_view_t *v) {
    memset(v, 0, sizeof *v);
    size_t nw = 0, na = 0, nv = 0;
    uint64_t cut = p >= 0 && !full ? w->peers[p].anchor.round : 0;
    for (int i = 0; i < w->nw; i++)
        if ((p < 0 || (w->peers[p].wbits[i / 64] >> (i % 64) & 1)) &&
            w->worlds[i].w.id.round >= cut)
            vw[nw++] = &w->worlds[i].w;
    for (int i = 0; i < w->na; i++)
        if ((p < 0 || (w->peers[p].abits[i / 64] >> (i % 64) & 1)) &&
            w->acks[i].world.round >= cut)
            va[na++] = &w->acks[i];
    if (cut) {
        v->anchor = w->peers[p].anchor;
        v->past = w->peers[p].past;
        v->past_count = w->peers[p].past_count;
    }
    for (int q = 0; q < w->n; q++) {
        uint64_t r = 0;
        if (p >= 0) {
            r = w->peers[p].vol[q];
        } else {
            for (int s = 0; s < w->n; s++)
                if (w->peers[s].vol[q] > r)
                    r = w->peers[s].vol[q];
        }
        if (r) {
            snprintf(vv[nv].peer, sizeof vv[nv].peer, "%s", w->peers[q].id);
            vv[nv++].round = r;
        }
        vm[q].id = w->peers[q].id;
        vm[q].alive = p < 0 || q == p || w->now - w->peers[p].heard[q] <= DEAD_AFTER_MS;
        vm[q].free_slots = 0;
    }
    v->worlds = vw;
    v->world_count = nw;
    v->acks = va;
    v->ack_count = na;
    v->vols = vv;
    v->vol_count = nv;
    v->members = vm;
    v->member_count = (size_t)w->n;
    v->synced = p < 0 || w->peers[p].synced || w->now - w->peers[p].booted >= SYNC_ALONE_MS;
}

static void build_view(world_t *w, int p, sl_elastic_view_t *v) { build_view_of(w, p, false, v); }

/* ---- the pruned view (E6) ---- */

static bool trace; /* SL_TRACE=1: every action of every peer */

/* Peer p moves its anchor as far as its view allows (a node does after
 * its turns). */
static bool no_prune; /* SL_NO_PRUNE=1: every view whole (to compare) */

static void prune(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    if (no_prune)
        return;
    static sl_elastic_view_t v;
    build_view(w, p, &v);
    sl_elastic_ref_t anchor;
    sl_elastic_past_t past[MAXP];
    size_t n;
    sl_err err = sl_elastic_anchor(&v, UINT64_MAX, &anchor, past, MAXP, &n);
    if (err) {
        violate(w, "core: %s's anchor: %s", me->id, sl_errname(err));
        return;
    }
    if (anchor.round && anchor.round < me->anchor.round)
        violate(w, "E6: %s's anchor goes back from round %llu to %llu", me->id,
                (unsigned long long)me->anchor.round, (unsigned long long)anchor.round);
    if (sl_elastic_ref_eq(&anchor, &me->anchor))
        return;
    me->anchor = anchor;
    memcpy(me->past, past, n * sizeof *past);
    me->past_count = n;
    memcpy(me->wbits_at, me->wbits, sizeof me->wbits);
    memcpy(me->abits_at, me->abits, sizeof me->abits);
    w->anchor_moves++;
    if (anchor.round > w->anchor_round)
        w->anchor_round = anchor.round;
    if (trace)
        printf("%8.2f %s anchors at %llu/%s\n", w->now / 1000.0, me->id,
               (unsigned long long)anchor.round, anchor.leader);
}

/* A record reached peer p's replica since its anchor was set that the
 * pruned view cannot judge (sl_elastic_records_stale): one below the
 * anchor, or a world carrying on one below it. It reads its whole
 * replica again, as a node does. */
static void check_stale(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    uint64_t cut = me->anchor.round;
    if (!cut)
        return;
    bool stale = false;
    for (int i = 0; i < w->nw && !stale; i++) {
        const sl_elastic_world_t *wd = &w->worlds[i].w;
        if (!(me->wbits[i / 64] >> (i % 64) & 1))
            continue;
        bool fresh = !(me->wbits_at[i / 64] >> (i % 64) & 1);
        /* a record below the anchor the replica did not hold then; a world
           the pruned view cannot judge (sl_elastic_records_stale's rule) */
        stale = (fresh || wd->id.round >= cut) && !sl_elastic_anchor_judges(&me->anchor, wd);
    }
    for (int i = 0; i < w->na && !stale; i++)
        stale = (me->abits[i / 64] >> (i % 64) & 1) && !(me->abits_at[i / 64] >> (i % 64) & 1) &&
                w->acks[i].world.round < cut;
    if (!stale)
        return;
    if (trace)
        printf("%8.2f %s reads its replica again (anchor %llu/%s)\n", w->now / 1000.0, me->id,
               (unsigned long long)cut, me->anchor.leader);
    memset(&me->anchor, 0, sizeof me->anchor);
    me->past_count = 0;
    w->anchor_resets++;
}

/* E6: what peer p's pruned view says is what its whole replica says: the
 * same head, and for every world at or past the anchor the same
 * established, dead and dropped. */
static sl_elastic_status_t pruned_status[MAX_W], full_status[MAX_W];
static sl_elastic_ref_t pruned_ids[MAX_W]; /* the pruned view's worlds (the views share vw) */

static void check_pruned(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    check_stale(w, p);
    if (!me->anchor.round)
        return;
    static sl_elastic_view_t pv, fv;
    build_view_of(w, p, false, &pv);
    size_t npw = pv.world_count;
    for (size_t i = 0; i < npw; i++)
        pruned_ids[i] = pv.worlds[i]->id;
    sl_elastic_ref_t ph, fh;
    if (sl_elastic_status_all(&pv, pruned_status) != SL_OK || sl_elastic_head(&pv, &ph) != SL_OK) {
        violate(w, "E6: %s's pruned view is refused", me->id);
        return;
    }
    build_view_of(w, p, true, &fv);
    if (sl_elastic_status_all(&fv, full_status) != SL_OK || sl_elastic_head(&fv, &fh) != SL_OK) {
        violate(w, "core: %s's replica is refused", me->id);
        return;
    }
    if (!sl_elastic_ref_eq(&ph, &fh))
        violate(w, "E6: %s's pruned view (anchor %llu/%s) has head %llu/%s, its replica %llu/%s",
                me->id, (unsigned long long)me->anchor.round, me->anchor.leader,
                (unsigned long long)ph.round, ph.leader, (unsigned long long)fh.round, fh.leader);
    for (size_t i = 0, j = 0; i < npw; i++) {
        while (j < fv.world_count && !sl_elastic_ref_eq(&fv.worlds[j]->id, &pruned_ids[i]))
            j++;
        if (j == fv.world_count)
            break;
        const sl_elastic_status_t *a = &pruned_status[i], *b = &full_status[j];
        if (a->established != b->established || a->dead != b->dead || a->dropped != b->dropped)
            violate(w, "E6: %s's pruned view (anchor %llu/%s) says world %llu/%s is %s%s%s, its "
                       "replica %s%s%s", me->id, (unsigned long long)me->anchor.round,
                    me->anchor.leader, (unsigned long long)pruned_ids[i].round,
                    pruned_ids[i].leader, a->established ? "established " : "",
                    a->dead ? "dead " : "", a->dropped ? "dropped" : "",
                    b->established ? "established " : "", b->dead ? "dead " : "",
                    b->dropped ? "dropped" : "");
    }
}

/* ---- E4: the samples of a step, with the real schedule ---- */

/* The samples (a bit each) that step `step` gives the ranks of a world of
 * `size`: the rank slices must be contiguous, in rank order, and cover the
 * step's batch. */
static uint64_t step_samples(world_t *w, uint64_t step, uint32_t size) {
    sl_elastic_batch_t b;
    uint32_t order[64];
    uint64_t mask = 0, end = 0;
    for (uint32_t r = 0; r < size; r++) {
        if (sl_elastic_batch(&w->sched, step, r, size, &b) != SL_OK) {
            violate(w, "E4: no batch for step %llu rank %u", (unsigned long long)step, r);
            return 0;
        }
        if (r == 0) {
            end = b.cursor;
            sl_elastic_epoch_order(&w->sched, b.epoch, order);
        }
        if (b.offset != end)
            violate(w, "E4: step %llu: rank %u's slice starts at %llu, not %llu",
                    (unsigned long long)step, r, (unsigned long long)b.offset,
                    (unsigned long long)end);
        for (uint64_t i = b.offset; i < b.offset + b.count; i++) {
            if (mask >> order[i] & 1)
                violate(w, "E4: step %llu gives sample %u twice", (unsigned long long)step,
                        order[i]);
            mask |= 1ull << order[i];
        }
        end = b.offset + b.count;
        if (r == size - 1 && end != b.cursor + b.total)
            violate(w, "E4: step %llu's slices end at %llu, its batch at %llu",
                    (unsigned long long)step, (unsigned long long)end,
                    (unsigned long long)(b.cursor + b.total));
    }
    return mask;
}

/* What a state restored (or initialised) at `step` has seen of its epoch. */
static uint64_t seen_before(world_t *w, uint64_t step) {
    uint64_t per = sl_elastic_steps_per_epoch(&w->sched), mask = 0;
    for (uint64_t s = step - step % per; s < step; s++)
        mask |= step_samples(w, s, 1);
    return mask;
}

/* ---- the peers' writes ---- */

static void write_world(world_t *w, int p, const sl_elastic_world_t *rec) {
    int i = find_wrec(w, &rec->id);
    if (i >= 0) {
        if (memcmp(&w->worlds[i].w, rec, sizeof *rec) != 0)
            violate(w, "store: %s wrote a second world under round %llu/%s", w->peers[p].id,
                    (unsigned long long)rec->id.round, rec->id.leader);
    } else if (w->nw == MAX_W) {
        violate(w, "test: more than %d worlds", MAX_W);
        return;
    } else {
        i = w->nw++;
        memset(&w->worlds[i], 0, sizeof w->worlds[i]);
        w->worlds[i].w = *rec;
        w->worlds[i].root = -1;
    }
    w->peers[p].wbits[i / 64] |= 1ull << (i % 64);
}

static void write_ack(world_t *w, int p, const sl_elastic_ack_t *rec) {
    for (int i = 0; i < w->na; i++)
        if (strcmp(w->acks[i].peer, rec->peer) == 0 && w->acks[i].world.round == rec->world.round) {
            violate(w, "store: %s acked round %llu twice", rec->peer,
                    (unsigned long long)rec->world.round);
            return;
        }
    if (w->na == MAX_A) {
        violate(w, "test: more than %d acks", MAX_A);
        return;
    }
    int i = w->na++;
    w->acks[i] = *rec;
    w->peers[p].abits[i / 64] |= 1ull << (i % 64);
}

/* The ack of the member at `rank` of world `wd`. */
static const sl_elastic_ack_t *source_ack(const world_t *w, const sl_elastic_world_t *wd,
                                          int rank) {
    if ((uint32_t)rank >= wd->count)
        return NULL;
    for (int i = 0; i < w->na; i++)
        if (strcmp(w->acks[i].peer, wd->members[rank]) == 0 &&
            sl_elastic_ref_eq(&w->acks[i].world, &wd->id))
            return &w->acks[i];
    return NULL;
}

/* A peer starts a world: E1, E2, E3. */
static void start(world_t *w, int p, const sl_elastic_view_t *v, const sl_elastic_action_t *a) {
    peer_t *me = &w->peers[p];
    int x = find_wrec(w, &a->world.id);
    if (x < 0) {
        violate(w, "test: %s starts a world nobody wrote", me->id);
        return;
    }
    wrec_t *r = &w->worlds[x];
    const sl_elastic_world_t *wd = &r->w;
    if (wd->count < (uint32_t)w->min || wd->count > (uint32_t)w->max)
        violate(w, "E2: round %llu starts with %u members (min %d, max %d)",
                (unsigned long long)wd->id.round, wd->count, w->min, w->max);
    if (a->rank >= wd->count || strcmp(wd->members[a->rank], me->id) != 0)
        violate(w, "E1: %s starts round %llu at rank %u, which the world gives to another",
                me->id, (unsigned long long)wd->id.round, a->rank);
    sl_elastic_status_t st;
    if (sl_elastic_status(v, &wd->id, &st) != SL_OK || !st.established || !st.root.round) {
        violate(w, "E1: %s starts round %llu, not established in its own view", me->id,
                (unsigned long long)wd->id.round);
        return;
    }
    int root = root_of(w, x);
    if (!r->started) {
        r->started = true;
        r->start_step = a->start_step;
        r->source = a->source;
        r->root = root;
        w->starts++;
        /* E1: one world per round of a lineage */
        for (int i = 0; i < w->nw; i++)
            if (i != x && w->worlds[i].started && w->worlds[i].root == root &&
                w->worlds[i].w.id.round == wd->id.round)
                violate(w, "E1: round %llu of one lineage started as two worlds (%s's and %s's)",
                        (unsigned long long)wd->id.round, w->worlds[i].w.id.leader, wd->id.leader);
        /* E5: a lineage never forks */
        for (int i = 0; i < w->nw; i++)
            if (i != x && w->worlds[i].started && wd->parent.round &&
                sl_elastic_ref_eq(&w->worlds[i].w.parent, &wd->parent))
                violate(w, "E5: worlds %llu/%s and %llu/%s both continue %llu/%s",
                        (unsigned long long)w->worlds[i].w.id.round, w->worlds[i].w.id.leader,
                        (unsigned long long)wd->id.round, wd->id.leader,
                        (unsigned long long)wd->parent.round, wd->parent.leader);
        /* E3: the source's state is real (its step, trained in this
         * lineage), and when a member holds the lineage's newest state (the
         * last world that applied a step, at its last step) the world
         * starts from it: survivors keep their state, and at most the
         * interrupted step is redone (here steps are whole, so none) */
        /* a graft's lineage goes on from the newest state of the world it
         * grafts onto: the last world of its chain that stepped */
        if (root >= 0 && !w->lineage_set[root]) {
            w->lineage_set[root] = true;
            if (w->worlds[root].w.graft.round)
                w->grafts++;
            for (int y = carried(w, root), n = 0; y >= 0 && n < MAX_W; y = carried(w, y), n++)
                if (w->worlds[y].steps) {
                    w->lineage_step[root] = w->worlds[y].start_step + w->worlds[y].steps;
                    w->lineage_world[root] = y;
                    break;
                }
        }
        uint64_t truth = root >= 0 ? w->lineage_step[root] : 0;
        int newest = root >= 0 ? w->lineage_world[root] : -1;
        bool held = false;
        for (uint32_t i = 0; i < wd->count; i++) {
            int q = peer_index(w, wd->members[i]);
            int sx = q >= 0 && w->peers[q].has_state ? find_wrec(w, &w->peers[q].state_world) : -1;
            held |= sx >= 0 && sx == newest && w->peers[q].step == truth;
        }
        const sl_elastic_ack_t *sa = a->source >= 0 ? source_ack(w, wd, a->source) : NULL;
        int sx = sa ? find_wrec(w, &sa->state_world) : -1;
        if (a->source >= 0 &&
            (!sa || !sa->has_state || sx < 0 ||
             (w->worlds[sx].root != root && (root < 0 || !carries(w, carried(w, root), sx))) ||
             sa->step != a->start_step || sa->step > w->worlds[sx].start_step + w->worlds[sx].steps))
            violate(w, "E3: round %llu starts at step %llu from rank %d, which held no such "
                       "state of the lineage", (unsigned long long)wd->id.round,
                    (unsigned long long)a->start_step, a->source);
        r->held = held; /* checked at its first step: a world a member starts
                           from a stale replica never steps, the others left it */
        r->truth = truth;
    } else if (r->start_step != a->start_step || r->source != a->source) {
        violate(w, "E1: members of round %llu start at steps %llu and %llu (sources %d, %d)",
                (unsigned long long)wd->id.round, (unsigned long long)r->start_step,
                (unsigned long long)a->start_step, r->source, a->source);
    }
    me->training = x;
    me->stuck_since = 0;
    /* the state: its own, the source's sent over, or the seed's at step 0;
     * a source that crashed or moved on since it acked sends nothing, and
     * the world cannot step without it */
    int q = a->source >= 0 ? peer_index(w, wd->members[a->source]) : -1;
    bool sent = a->source < 0 ||
                (q >= 0 && w->peers[q].up && w->peers[q].has_state &&
                 w->peers[q].step == a->start_step);
    if (sent) {
        me->has_state = true;
        me->step = a->start_step;
        if (a->source >= 0) {
            me->state_world = w->peers[q].state_world;
            me->seen = w->peers[q].seen;
        } else { /* initialised (the test has no checkpoints) */
            memset(&me->state_world, 0, sizeof me->state_world);
            me->seen = seen_before(w, a->start_step);
        }
    }
}


static void print_action(const world_t *w, int p, const sl_elastic_action_t *a) {
    printf("%8.2f %s ", w->now / 1000.0, w->peers[p].id);
    switch (a->kind) {
    case SL_ELASTIC_WRITE_VOL: printf("volunteers for %llu\n", (unsigned long long)a->vol.round); break;
    case SL_ELASTIC_WRITE_WORLD:
        printf("seals %llu (parent %llu/%s", (unsigned long long)a->world.id.round,
               (unsigned long long)a->world.parent.round, a->world.parent.leader);
        if (a->world.graft.round)
            printf(", graft onto %llu/%s", (unsigned long long)a->world.graft.round,
                   a->world.graft.leader);
        printf("):");
        for (uint32_t i = 0; i < a->world.count; i++)
            printf(" %s", a->world.members[i]);
        printf("\n");
        break;
    case SL_ELASTIC_WRITE_ACK:
        printf("acks %llu/%s (tip %llu/%s, step %llu%s %llu/%s)\n",
               (unsigned long long)a->ack.world.round, a->ack.world.leader,
               (unsigned long long)a->ack.tip.round, a->ack.tip.leader,
               (unsigned long long)a->ack.step, a->ack.has_state ? ", state of" : ", none",
               (unsigned long long)a->ack.state_world.round, a->ack.state_world.leader);
        break;
    case SL_ELASTIC_START:
        printf("starts %llu/%s rank %u at step %llu (source %d)\n",
               (unsigned long long)a->world.id.round, a->world.id.leader, a->rank,
               (unsigned long long)a->start_step, a->source);
        break;
    case SL_ELASTIC_STOP: printf("stops: %s\n", a->reason); break;
    }
}

static void turn(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    static sl_elastic_view_t v;
    check_stale(w, p);
    build_view(w, p, &v);
    sl_elastic_local_t local = {me->step, me->has_state, me->state_world, me->broken};
    sl_elastic_out_t out;
    sl_err err = sl_elastic_step(me->core, &v, &local, w->now, &out);
    if (err) {
        violate(w, "core: %s: %s", me->id, sl_errname(err));
        return;
    }
    char why[200];
    if (sl_elastic_check(me->core, why, sizeof why) != SL_OK)
        violate(w, "core check: %s", why);
    for (size_t i = 0; i < out.count && !w->violation[0]; i++) {
        const sl_elastic_action_t *a = &out.actions[i];
        if (trace)
            print_action(w, p, a);
        switch (a->kind) {
        case SL_ELASTIC_WRITE_VOL:
            if (a->vol.round > me->vol[p])
                me->vol[p] = a->vol.round;
            break;
        case SL_ELASTIC_WRITE_WORLD: write_world(w, p, &a->world); break;
        case SL_ELASTIC_WRITE_ACK: write_ack(w, p, &a->ack); break;
        case SL_ELASTIC_START: start(w, p, &v, a); break;
        case SL_ELASTIC_STOP: me->training = -1; me->stuck_since = 0; break;
        }
    }
}

/* ---- training: one step per tick for each world whose members are all
 * in it and reach each other ---- */

static void train(world_t *w) {
    for (int x = 0; x < w->nw; x++) {
        wrec_t *r = &w->worlds[x];
        if (!r->started)
            continue;
        bool ok = true, crashed = false;
        int idx[SL_ELASTIC_MAX_NODES] = {0};
        for (uint32_t i = 0; i < r->w.count; i++) {
            idx[i] = peer_index(w, r->w.members[i]);
            crashed |= idx[i] >= 0 && !w->peers[idx[i]].up;
            ok = ok && idx[i] >= 0 && running(w, idx[i]) && w->peers[idx[i]].training == x;
            for (uint32_t j = 0; j < i && ok; j++)
                ok = connected(w, idx[i], idx[j]);
        }
        if (!ok) {
            /* the all-reduce of a member in it breaks: at once when a
               member crashed (its connections close), after the ring's
               timeout when one is paused or cut off */
            for (uint32_t i = 0; i < r->w.count; i++) {
                peer_t *m = idx[i] >= 0 ? &w->peers[idx[i]] : NULL;
                if (!m || !running(w, idx[i]) || m->training != x)
                    continue;
                if (!m->stuck_since)
                    m->stuck_since = w->now;
                if (crashed || w->now - m->stuck_since >= RING_TIMEOUT_MS)
                    m->broken = r->w.id;
            }
            continue;
        }
        for (uint32_t i = 0; i < r->w.count; i++)
            w->peers[idx[i]].stuck_since = 0;
        /* E3: a world steps from the lineage's newest state when a member
         * held it at the start */
        if (r->steps == 0 && r->root >= 0) {
            if (r->held && r->start_step != r->truth)
                violate(w, "E3: round %llu steps from step %llu (source %d); a member held the "
                           "lineage's newest state, at %llu", (unsigned long long)r->w.id.round,
                        (unsigned long long)r->start_step, r->source,
                        (unsigned long long)r->truth);
            if (r->start_step < w->lineage_step[r->root])
                w->redone += (int)(w->lineage_step[r->root] - r->start_step);
        }
        uint64_t s = w->peers[idx[0]].step;
        for (uint32_t i = 1; i < r->w.count; i++)
            if (w->peers[idx[i]].step != s)
                violate(w, "E1: members of round %llu are at steps %llu and %llu",
                        (unsigned long long)r->w.id.round, (unsigned long long)s,
                        (unsigned long long)w->peers[idx[i]].step);
        /* E4: every sample once per epoch, whatever the world sizes */
        uint64_t m = step_samples(w, s, r->w.count), seen = w->peers[idx[0]].seen;
        uint64_t per = sl_elastic_steps_per_epoch(&w->sched);
        uint64_t all = w->sched.sample_count == 64 ? ~0ull : (1ull << w->sched.sample_count) - 1;
        for (uint32_t i = 1; i < r->w.count; i++)
            if (w->peers[idx[i]].seen != seen)
                violate(w, "E4: members of round %llu have seen different samples this epoch",
                        (unsigned long long)r->w.id.round);
        if (seen & m)
            violate(w, "E4: step %llu of round %llu gives samples seen this epoch already",
                    (unsigned long long)s, (unsigned long long)r->w.id.round);
        seen |= m;
        if ((s + 1) % per == 0) {
            if (seen != all)
                violate(w, "E4: epoch %llu ends with %d of %llu samples seen",
                        (unsigned long long)(s / per), __builtin_popcountll(seen),
                        (unsigned long long)w->sched.sample_count);
            seen = 0;
        }
        for (uint32_t i = 0; i < r->w.count; i++) {
            w->peers[idx[i]].step = s + 1;
            w->peers[idx[i]].seen = seen;
            w->peers[idx[i]].state_world = r->w.id;
        }
        r->steps++;
        w->total_steps++;
        if (r->root < 0)
            continue;
        if (s != r->start_step + r->steps - 1)
            violate(w, "E3: round %llu applies step %llu, having started at %llu and applied %llu",
                    (unsigned long long)r->w.id.round, (unsigned long long)(s + 1),
                    (unsigned long long)r->start_step, (unsigned long long)(r->steps - 1));
        w->lineage_step[r->root] = s + 1;
        w->lineage_world[r->root] = x;
        w->lineage_stepped[r->root] = w->now;
        /* E5: a world steps only while it is the head of the surviving
         * lineage in every member's replica (once a member has seen a newer
         * world or a lineage that wins, it has stopped) */
        for (uint32_t i = 0; i < r->w.count; i++) {
            static sl_elastic_view_t v;
            sl_elastic_ref_t head;
            build_view(w, idx[i], &v);
            if (sl_elastic_head(&v, &head) != SL_OK || !sl_elastic_ref_eq(&head, &r->w.id))
                violate(w, "E5: round %llu/%s steps while %s's replica has %llu/%s as the head",
                        (unsigned long long)r->w.id.round, r->w.id.leader,
                        w->peers[idx[i]].id, (unsigned long long)head.round, head.leader);
        }
    }
}

/* E5 in the union of every replica: no two established worlds continue
 * the same world, and of the established worlds that carry one on (its
 * children and the grafts onto it) at most one has a lineage that is not
 * dropped. */
static sl_elastic_status_t union_status[MAX_W];

static void check_union(world_t *w) {
    static sl_elastic_view_t v;
    build_view(w, -1, &v);
    if (sl_elastic_status_all(&v, union_status) != SL_OK) {
        violate(w, "core: the union of the replicas is refused");
        return;
    }
    for (size_t i = 0; i < v.world_count; i++) {
        const sl_elastic_world_t *a = v.worlds[i];
        const sl_elastic_ref_t *base = a->parent.round ? &a->parent : &a->graft;
        if (!union_status[i].established)
            continue;
        if (union_status[i].dead)
            violate(w, "E5: world %llu/%s is established and dead", (unsigned long long)a->id.round,
                    a->id.leader);
        for (size_t j = i + 1; j < v.world_count && base->round; j++) {
            const sl_elastic_world_t *b = v.worlds[j];
            if (union_status[j].established && !union_status[i].dropped &&
                !union_status[j].dropped &&
                sl_elastic_ref_eq(base, b->parent.round ? &b->parent : &b->graft))
                violate(w, "E5: established worlds %llu/%s and %llu/%s both carry on %llu/%s, "
                           "neither dropped", (unsigned long long)a->id.round, a->id.leader,
                        (unsigned long long)b->id.round, b->id.leader,
                        (unsigned long long)base->round, base->leader);
        }
        if (!a->parent.round)
            continue;
        for (size_t j = i + 1; j < v.world_count; j++)
            if (union_status[j].established &&
                sl_elastic_ref_eq(&v.worlds[i]->parent, &v.worlds[j]->parent))
                violate(w, "E5: established worlds %llu/%s and %llu/%s both continue %llu/%s",
                        (unsigned long long)v.worlds[i]->id.round, v.worlds[i]->id.leader,
                        (unsigned long long)v.worlds[j]->id.round, v.worlds[j]->id.leader,
                        (unsigned long long)v.worlds[i]->parent.round,
                        v.worlds[i]->parent.leader);
    }
}

/* ---- faults ---- */

static sl_err boot(world_t *w, int p) {
    peer_t *me = &w->peers[p];
    sl_elastic_config_t cfg = {.job_id = "job-1",
                               .min_nodes = (uint32_t)w->min,
                               .max_nodes = (uint32_t)w->max,
                               .settle_ms = SETTLE_MS,
                               .ack_timeout_ms = ACK_TIMEOUT_MS};
    me->up = true;
    me->booted = w->now;
    me->synced = false;
    me->training = -1;
    me->stuck_since = 0;
    me->has_state = false;
    me->step = 0;
    memset(&me->state_world, 0, sizeof me->state_world);
    for (int q = 0; q < w->n; q++)
        me->heard[q] = w->now; /* it starts believing everyone alive */
    return sl_elastic_new(&cfg, me->id, &me->core);
}

static void crash(world_t *w, int p, int64_t down_ms) {
    peer_t *me = &w->peers[p];
    if (trace)
        printf("%8.2f %s crashes for %lld ms\n", w->now / 1000.0, me->id, (long long)down_ms);
    me->up = false;
    sl_elastic_destroy(&me->core);
    memset(&me->anchor, 0, sizeof me->anchor); /* the records are read again */
    me->past_count = 0;
    me->training = -1;
    me->has_state = false;
    me->down_until = w->now + down_ms;
    me->paused_until = 0;
    w->last_fault = w->now;
    w->kills++;
}

static void inject_faults(world_t *w) {
    sl_rng_t *rng = &w->rng;
    for (int p = 0; p < w->n; p++)
        if (!w->peers[p].up && w->now >= w->peers[p].down_until) {
            if (boot(w, p) != SL_OK)
                violate(w, "core: %s does not start", w->peers[p].id);
            w->last_fault = w->now;
        }
    if (w->heal_at && w->now >= w->heal_at) {
        memset(w->group, 0, sizeof w->group);
        w->heal_at = 0;
        w->last_heal = w->now;
        w->last_fault = w->now;
    }
    if (w->now >= w->faults_until)
        return;
    uint64_t dice = sl_rng_below(rng, 1000);
    if (dice < 11) {
        int victim = (int)sl_rng_below(rng, (uint64_t)w->n);
        if (sl_rng_below(rng, 2)) { /* the leader of a world that trains */
            int p = (int)sl_rng_below(rng, (uint64_t)w->n);
            if (w->peers[p].up && w->peers[p].training >= 0) {
                int l = peer_index(w, w->worlds[w->peers[p].training].w.id.leader);
                if (l >= 0) {
                    victim = l;
                    w->leader_kills += w->peers[l].up;
                }
            }
        }
        if (w->peers[victim].up)
            crash(w, victim, 300 + (int64_t)sl_rng_below(rng, 4000));
    } else if (dice < 15) {
        int victim = (int)sl_rng_below(rng, (uint64_t)w->n);
        if (running(w, victim)) {
            w->peers[victim].paused_until = w->now + 300 + (int64_t)sl_rng_below(rng, 3000);
            w->last_fault = w->peers[victim].paused_until;
            w->pauses++;
        }
    } else if (dice < 19 && w->gone < w->n - w->min - (w->pair ? 0 : 1)) {
        /* rank 0 of a world of two or more that trains dies for good: the
         * others go on with a fresh or returning peer (a graft where its
         * world's quorum is gone with it). What it wrote reached the peers
         * that are up (the store sends each write to every up replica): a
         * record that only a peer dead for good holds is lost, and no
         * reader could decide what it decides */
        int p = (int)sl_rng_below(rng, (uint64_t)w->n);
        const sl_elastic_world_t *wd =
            w->peers[p].up && w->peers[p].training >= 0 ? &w->worlds[w->peers[p].training].w : NULL;
        int victim = wd && wd->count >= 2 ? peer_index(w, wd->members[0]) : -1;
        if (victim >= 0 && w->peers[victim].up) {
            peer_t *v = &w->peers[victim];
            for (int q = 0; q < w->n; q++) {
                peer_t *o = &w->peers[q];
                if (q == victim || !o->up)
                    continue;
                for (int i = 0; i < MAX_W / 64; i++)
                    o->wbits[i] |= v->wbits[i];
                for (int i = 0; i < MAX_A / 64; i++)
                    o->abits[i] |= v->abits[i];
                for (int i = 0; i < w->n; i++)
                    if (v->vol[i] > o->vol[i])
                        o->vol[i] = v->vol[i];
            }
            crash(w, victim, 0);
            v->down_until = INT64_MAX;
            w->gone++;
        }
    } else if (dice < 24 && !w->heal_at) {
        for (int p = 0; p < w->n; p++)
            w->group[p] = (int)sl_rng_below(rng, 2);
        if (trace) {
            printf("%8.2f partition:", w->now / 1000.0);
            for (int p = 0; p < w->n; p++)
                printf(" %d", w->group[p]);
            printf("\n");
        }
        w->heal_at = w->now + 500 + (int64_t)sl_rng_below(rng, 5000);
        w->last_fault = w->now;
        w->partitions++;
    }
}

/* ---- one run ---- */

static void run(world_t *w, uint64_t seed, bool faults, sl_elastic_bug bug) {
    wrec_t *worlds = w->worlds;
    sl_elastic_ack_t *acks = w->acks;
    memset(w, 0, sizeof *w);
    w->worlds = worlds;
    w->acks = acks;
    w->seed = seed;
    for (int i = 0; i < MAX_W; i++)
        w->lineage_world[i] = -1;
    w->bug = bug;
    sl_elastic_set_bug(bug);
    sl_rng_seed(&w->rng, seed * 7919 + 13);
    w->n = 3 + (int)sl_rng_below(&w->rng, MAXP - 2);      /* 3..7 peers */
    w->min = 1 + (int)sl_rng_below(&w->rng, 3);            /* 1..3 */
    w->max = w->min + (int)sl_rng_below(&w->rng, (uint64_t)(w->n - w->min + 2)); /* min..n+1 */
    w->pair = sl_rng_below(&w->rng, 3) == 0;
    if (w->pair) { /* worlds of two: rank 0's death leaves half without it */
        w->min = 1 + (int)sl_rng_below(&w->rng, 2);
        w->max = 2;
    }
    if (w->max > SL_ELASTIC_MAX_NODES)
        w->max = SL_ELASTIC_MAX_NODES;
    w->faults_until = faults ? 8000 + (int64_t)sl_rng_below(&w->rng, 17000) : 0;
    if (faults && seed % 4 == 0) /* a long job: its anchors move many times */
        w->faults_until += LONG_MS;
    w->sched.seed = seed;
    w->sched.sample_count = 5 + sl_rng_below(&w->rng, 58);       /* 5..62 */
    w->sched.global_batch = 1 + (uint32_t)sl_rng_below(&w->rng, 9); /* 1..9 */
    for (int p = 0; p < w->n; p++) {
        snprintf(w->peers[p].id, sizeof w->peers[p].id, "peer-%d", p);
        w->peers[p].training = -1;
        /* most start at once; some join later */
        w->peers[p].down_until = sl_rng_below(&w->rng, 3) ? 0 : (int64_t)sl_rng_below(&w->rng, 12000);
    }
    int64_t end = w->faults_until + QUIET_MS;
    for (w->now = 0; w->now <= end && !w->violation[0]; w->now += STEP_MS) {
        inject_faults(w);
        for (int p = 0; p < w->n; p++)
            for (int q = 0; q < w->n; q++)
                if (connected(w, p, q))
                    w->peers[p].heard[q] = w->now;
        for (int p = 0; p < w->n; p++)
            for (int q = 0; q < w->n; q++)
                if (p != q && connected(w, p, q) && sl_rng_below(&w->rng, 10) < 4) {
                    peer_t *a = &w->peers[q], *b = &w->peers[p];
                    a->synced = true;
                    for (int i = 0; i < MAX_W / 64; i++)
                        a->wbits[i] |= b->wbits[i];
                    for (int i = 0; i < MAX_A / 64; i++)
                        a->abits[i] |= b->abits[i];
                    for (int i = 0; i < w->n; i++)
                        if (b->vol[i] > a->vol[i])
                            a->vol[i] = b->vol[i];
                }
        for (int p = 0; p < w->n && !w->violation[0]; p++)
            if (running(w, p))
                turn(w, p);
        train(w);
        for (int p = 0; p < w->n && w->now % 200 == 0 && !w->violation[0]; p++)
            if (running(w, p))
                prune(w, p);
        if (w->now % 1000 == 0) {
            check_union(w);
            for (int p = 0; p < w->n && !w->violation[0]; p++)
                if (running(w, p))
                    check_pruned(w, p);
        }
    }
    if (!w->violation[0]) {
        check_union(w); /* union_status is by registry index: the view's order */
        for (int i = 0; i < w->nw; i++)
            if (union_status[i].dropped)
                w->dropped_steps += (int)w->worlds[i].steps;
    }
    if (trace) { /* the union's worlds, as every reader will see them */
        static sl_elastic_view_t v;
        build_view(w, -1, &v);
        if (sl_elastic_status_all(&v, union_status) == SL_OK)
            for (size_t i = 0; i < v.world_count; i++) {
                printf("world %llu/%s parent %llu/%s:", (unsigned long long)v.worlds[i]->id.round,
                       v.worlds[i]->id.leader, (unsigned long long)v.worlds[i]->parent.round,
                       v.worlds[i]->parent.leader);
                for (uint32_t j = 0; j < v.worlds[i]->count; j++)
                    printf(" %s", v.worlds[i]->members[j]);
                if (v.worlds[i]->graft.round)
                    printf(" (graft onto %llu/%s)", (unsigned long long)v.worlds[i]->graft.round,
                           v.worlds[i]->graft.leader);
                printf("%s%s%s%s\n", union_status[i].established ? " established" : "",
                       union_status[i].dead ? " dead" : "",
                       union_status[i].dropped ? " dropped" : "",
                       union_status[i].all_acked ? " all-acked" : "");
            }
    }
    /* progress: quiet, the job trains with min(max, n) members */
    if (!w->violation[0]) {
        int left = w->n - w->gone, want = w->max < left ? w->max : left;
        int x = -1;
        for (int p = 0; p < w->n; p++)
            if (w->peers[p].training >= 0)
                x = w->peers[p].training;
        bool recent = false;
        for (int r = 0; r < w->nw; r++)
            recent |= w->lineage_stepped[r] >= end - 2000;
        if (x < 0 || !recent)
            violate(w, "progress: no world trains %d s after the last fault",
                    QUIET_MS / 1000);
        else if ((int)w->worlds[x].w.count != want)
            violate(w, "progress: the world of round %llu has %u members once quiet, not %d",
                    (unsigned long long)w->worlds[x].w.id.round, w->worlds[x].w.count, want);
    }
    for (int p = 0; p < w->n; p++)
        sl_elastic_destroy(&w->peers[p].core);
    sl_elastic_set_bug(SL_ELASTIC_BUG_NONE);
}

static world_t W;

static void setup(void) {
    if (!W.worlds) {
        W.worlds = calloc(MAX_W, sizeof *W.worlds);
        W.acks = calloc(MAX_A, sizeof *W.acks);
    }
}

/* SL_SEED=S replays seed S; SL_FIRST_SEED=S starts a sweep there. */
static uint64_t first_seed(void) {
    const char *s = getenv("SL_SEED");
    if (!s)
        s = getenv("SL_FIRST_SEED");
    return s ? strtoull(s, NULL, 10) : 1;
}

static void test_faults(void) {
    setup();
    int seeds = getenv("SL_SEED") ? 1 : sl_test_seed_count(150);
    int kills = 0, leader_kills = 0, pauses = 0, partitions = 0, starts = 0, gone = 0, grafts = 0;
    int redone = 0, dropped = 0;
    uint64_t steps = 0;
    int ran = 0;
    for (int i = 0; i < seeds; i++, ran++) {
        uint64_t seed = first_seed() + (uint64_t)i;
        run(&W, seed, true, SL_ELASTIC_BUG_NONE);
        CHECK_MSG(!W.violation[0], "seed %llu (SL_SEED=%llu to replay): %s",
                  (unsigned long long)seed, (unsigned long long)seed, W.violation);
        if (W.violation[0])
            break;
        if (getenv("SL_VERBOSE"))
            printf("  seed %llu: %d peers, min %d, max %d: %d worlds started, %llu steps, "
                   "%d kills (%d leaders, %d for good), %d pauses, %d partitions, %d grafts, "
                   "%d steps redone, %d dropped; %d anchor moves (to round %llu), %d re-reads\n",
                   (unsigned long long)seed, W.n, W.min, W.max, W.starts,
                   (unsigned long long)W.total_steps, W.kills, W.leader_kills, W.gone, W.pauses,
                   W.partitions, W.grafts, W.redone, W.dropped_steps, W.anchor_moves,
                   (unsigned long long)W.anchor_round, W.anchor_resets);
        kills += W.kills;
        leader_kills += W.leader_kills;
        pauses += W.pauses;
        partitions += W.partitions;
        starts += W.starts;
        steps += W.total_steps;
        gone += W.gone;
        grafts += W.grafts;
        redone += W.redone;
        dropped += W.dropped_steps;
    }
    /* the faults did happen (over the seeds that passed) */
    if (ran < 20)
        return;
    CHECK_MSG(kills > ran, "only %d kills", kills);
    CHECK_MSG(leader_kills > ran / 4, "only %d leader kills", leader_kills);
    CHECK_MSG(pauses > ran / 2, "only %d pauses", pauses);
    CHECK_MSG(partitions > ran / 2, "only %d partitions", partitions);
    CHECK_MSG(starts > 3 * ran, "only %d worlds started", starts);
    CHECK_MSG(gone > ran / 4, "only %d peers killed for good", gone);
    CHECK_MSG(grafts > ran / 4, "only %d grafts started", grafts);
    printf("  %d seeds: %d worlds started, %llu steps, %d kills (%d of a leader, %d for good), "
           "%d pauses, %d partitions, %d grafts; %d steps redone, %d dropped with their "
           "lineage\n", seeds, starts, (unsigned long long)steps, kills, leader_kills, gone,
           pauses, partitions, grafts, redone, dropped);
}

/* No faults: one world of min(max, n) from the start of the last joiner on. */
static void test_fault_free(void) {
    setup();
    int seeds = getenv("SL_SEED") ? 1 : 20;
    for (uint64_t seed = first_seed(); seeds-- > 0; seed++) {
        run(&W, seed, false, SL_ELASTIC_BUG_NONE);
        CHECK_MSG(!W.violation[0], "seed %llu fault-free: %s", (unsigned long long)seed,
                  W.violation);
        if (W.violation[0])
            break;
    }
}

/* Same seed, same run. */
static void test_deterministic(void) {
    setup();
    run(&W, 7, true, SL_ELASTIC_BUG_NONE);
    uint64_t steps = W.total_steps;
    int starts = W.starts, nw = W.nw;
    run(&W, 7, true, SL_ELASTIC_BUG_NONE);
    CHECK_INT(W.total_steps, steps);
    CHECK_INT(W.starts, starts);
    CHECK_INT(W.nw, nw);
}

/* Each checker fires on its planted bug (src/elastic/elastic_internal.h)
 * within a few seeds. */
static void planted(sl_elastic_bug bug, const char *prefix) {
    setup();
    bool fired = false;
    uint64_t seed;
    for (seed = 1; seed <= 60 && !fired; seed++) {
        run(&W, seed, true, bug);
        fired = strstr(W.violation, prefix) != NULL;
    }
    if (getenv("SL_VERBOSE"))
        printf("  planted bug %d fired at seed %llu: %s\n", bug, (unsigned long long)(seed - 1),
               W.violation);
    CHECK_MSG(fired, "the %s checker never fired on planted bug %d (last: \"%s\")", prefix, bug,
              W.violation);
}

/* one continuer establishes a world: both sides of a partition continue
 * one lineage */
static void test_planted_e5(void) { planted(SL_ELASTIC_BUG_NO_MAJORITY, "E5"); }
static void test_planted_e1(void) { planted(SL_ELASTIC_BUG_SORTED_RANKS, "E1"); }
static void test_planted_e2(void) { planted(SL_ELASTIC_BUG_MIN_MINUS_1, "E2"); }
static void test_planted_e3(void) { planted(SL_ELASTIC_BUG_LOWEST_STEP, "E3"); }
static void test_planted_progress(void) { planted(SL_ELASTIC_BUG_NEVER_GIVE_UP, "progress"); }
static void test_planted_e4(void) { planted(SL_ELASTIC_BUG_EVEN_SLICES, "E4"); }
/* a graft is kept when the world it grafts onto went on on the other side
 * of a partition: two lineages carry that world on */
static void test_planted_graft_kept(void) { planted(SL_ELASTIC_BUG_GRAFT_KEPT, "E5"); }
/* a graft starts without the state of the world it grafts onto */
static void test_planted_graft_no_state(void) { planted(SL_ELASTIC_BUG_GRAFT_NO_STATE, "E3"); }

/* a pruned view ignores grafts when it judges a state stepped below its
 * anchor: a graft does not take the state of the world it grafts onto,
 * where a peer whose view is whole does */
static void test_planted_anchor_graft(void) { planted(SL_ELASTIC_BUG_ANCHOR_GRAFT, "E"); }

int main(void) {
    sl_log_set_level(SL_LOG_WARNING);
    trace = getenv("SL_TRACE") != NULL;
    no_prune = getenv("SL_NO_PRUNE") != NULL;
    sl_test_run("deterministic", test_deterministic);
    sl_test_run("fault_free", test_fault_free);
    sl_test_run("faults", test_faults);
    sl_test_run("planted_e1", test_planted_e1);
    sl_test_run("planted_e2", test_planted_e2);
    sl_test_run("planted_e3", test_planted_e3);
    sl_test_run("planted_e4", test_planted_e4);
    sl_test_run("planted_e5", test_planted_e5);
    sl_test_run("planted_progress", test_planted_progress);
    sl_test_run("planted_graft_kept", test_planted_graft_kept);
    sl_test_run("planted_graft_no_state", test_planted_graft_no_state);
    sl_test_run("planted_anchor_graft", test_planted_anchor_graft);
    int rc = sl_test_finish();
    free(W.worlds);
    free(W.acks);
    return rc;
}
