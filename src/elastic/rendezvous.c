/* The rendezvous of an elastic job, sans-I/O (include/starling/elastic.h,
 * docs/elastic.md).
 *
 *   volunteer  an idle peer writes job/J/vol/P with a round above every
 *              world it knows of
 *   seal       the leader of the next round (rendezvous hashing over the
 *              alive volunteers, as studies choose theirs) writes the world
 *              job/J/w/R/L once `min` volunteers are there, a quorum of
 *              the last world's members among them (or a graft, when no
 *              quorum is possible any more), and the settle window has
 *              passed (at once when the whole last world is back);
 *              any volunteer takes over a dead leader's round, since the
 *              leader is computed from each peer's own view
 *   ack        a peer acks at most one world per round, in rising rounds,
 *              naming its tip (the world it acked before); the ack is
 *              final
 *   start      a world trains when it is established (the partition
 *              rule, below), every member acked it, and it is the newest
 *              established world of the surviving lineage
 *   stop       a world ends when a member is no longer alive in the view,
 *              when an alive volunteer can be taken (up to `max`) or a
 *              member restarted, when a newer world supersedes it, or on
 *              cancel; its members volunteer again at once
 *
 * The partition rule. A member m of world P "continues" P into its child
 * W when m acked W and the chain of m's acks, from that ack back through
 * the tips (each ack names the one before), reaches P's round or earlier
 * through worlds that are dead (can never be established): m has
 * committed to nothing established since P. W is established when P is
 * and a strict majority of P's members continue P into W (a root world: a
 * majority of its own members, from no world). Two children of P are
 * never both established: their majorities share a member m, who acked
 * both in rising rounds, so the later ack's chain passes through the
 * earlier world, which is established, not dead (and after P), and m does
 * not count there. Dead is provable from the records (the members that
 * can no longer continue P into W leave no majority), and both properties
 * only ever become true, so every reader agrees once it holds the records.
 * A member that acked a sibling of P, or never acked P, still continues P
 * if that sibling died: a world whose members split between two records
 * of one round does not block the lineage.
 * Grafts. When the head H can no longer gather a quorum (its members
 * alive in the leader's view and not committed since are too few: rank 0
 * of a world of two died, or 2 of 3), the leader seals a root that names
 * H as the world it grafts onto and carries H's state on (a continuer is
 * its source). It is established when H is and a majority of its own
 * members continue H into it, so its members are H's continuers, then the
 * others whose chain still reaches H's round, then the rest, and the
 * leader seals it only when a majority can (else it waits). A lineage
 * whose root grafts onto G is dropped when G has an established child
 * (the quorum side went on), when
 * an established graft onto G of a lower (round, leader) exists, or when
 * G's lineage is dropped: of the worlds that carry G on, at most one
 * lineage is kept, and dropped, as established, only becomes true.
 * Two lineages exist when a job's first world was sealed twice, on both
 * sides of a partition or by peers whose volunteer records had not met,
 * or by a graft. Of those not dropped, the lineage of the newest
 * established world (highest round, then leader id) survives: its head's
 * ackers have acked nothing established since, so it can always go on,
 * where an older root some of whose members moved on might never gather
 * a majority again.
 *
 * Cost: each call sorts the view's records (O(n log n)) and memoises each
 * world's status: 4 us a turn with 3 worlds of 8 members, 115 us with 30,
 * 1.1 ms with 200 (-O2, this machine). A long job's view is pruned at an
 * anchor (sl_elastic_anchor, below; docs/elastic.md "The pruned view"):
 * the records below it are left out, the anchor is taken as established
 * and as the root of what descends from it, and each peer's newest ack
 * below it is remembered (its tip, the states it may still hold, where
 * its chain leads), so n is the records past the anchor, not the job's
 * history. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elastic_internal.h"
#include "starling/hash.h"
#include "starling/round.h"

static sl_elastic_bug g_bug;

void sl_elastic_set_bug(sl_elastic_bug bug) { g_bug = bug; }

sl_elastic_bug sl_elastic_bug_now(void) { return g_bug; }

struct sl_elastic {
    sl_elastic_config_t cfg;            /* the job's settings (job_id borrowed) */
    char self[SL_ELASTIC_ID_MAX + 1];   /* this peer */
    sl_elastic_phase phase;             /* where it stands */
    sl_elastic_ref_t cur;               /* WAITING/TRAINING: the world */
    int64_t since_ms;                   /* WAITING: when it acked */
    uint64_t settle_round;              /* leader: the round the settle window is for */
    int64_t settle_since_ms;            /* leader: when sealing first became possible */
    uint64_t sealed_round;              /* leader: the last round it sealed */
    size_t walked;                      /* world and ack records its last turn took in */
    sl_elastic_world_t sealing;         /* leader: the world it is about to seal */
};

bool sl_elastic_ref_eq(const sl_elastic_ref_t *a, const sl_elastic_ref_t *b) {
    return a->round == b->round && (a->round == 0 || strcmp(a->leader, b->leader) == 0);
}

static int ref_cmp(const sl_elastic_ref_t *a, const sl_elastic_ref_t *b) {
    if (a->round != b->round)
        return a->round < b->round ? -1 : 1;
    return a->round == 0 ? 0 : strcmp(a->leader, b->leader);
}

const char *sl_elastic_phase_name(sl_elastic_phase p) {
    switch (p) {
    case SL_ELASTIC_IDLE: return "idle";
    case SL_ELASTIC_WAITING: return "waiting";
    case SL_ELASTIC_TRAINING: return "training";
    case SL_ELASTIC_CANCELLED: return "cancelled";
    }
    return "?";
}

/* ---- what a view's records say ---- */

enum { NO = 0, MAYBE = 1, YES = 2 };

typedef struct {
    const sl_elastic_world_t *w; /* the record */
    int8_t est;                  /* established: -1 not computed */
    int8_t dead;                 /* dead: -1 not computed */
    int8_t dropped;              /* its lineage was dropped (a root's): -1 not computed */
    int root;                    /* index of its root, -1 unknown, -2 not computed */
} wnode_t;

typedef struct {
    const sl_elastic_view_t *v;      /* the view */
    wnode_t *worlds;                 /* sorted by (round, leader) */
    size_t nw;                       /* entries */
    const sl_elastic_ack_t **acks;   /* sorted by (peer, round) */
    size_t na;                       /* entries */
    const sl_round_member_t **members; /* the membership view, sorted by id (alive: a
                                          binary search, not a pass per look-up) */
    size_t nm;                       /* entries */
    int win_root;                    /* the surviving lineage's root, -1: none */
    int head;                        /* its newest established world, -1: none */
    int anchor;                      /* a pruned view: the anchor's entry, -1: full view */
    uint64_t cut;                    /* a pruned view: the anchor's round (records below
                                        it are left out), 0: full view */
} an_t;

static int member_cmp(const void *a, const void *b) {
    return strcmp((*(const sl_round_member_t *const *)a)->id,
                  (*(const sl_round_member_t *const *)b)->id);
}

static int wnode_cmp(const void *a, const void *b) {
    return ref_cmp(&((const wnode_t *)a)->w->id, &((const wnode_t *)b)->w->id);
}

static int ack_cmp(const void *a, const void *b) {
    const sl_elastic_ack_t *x = *(const sl_elastic_ack_t *const *)a;
    const sl_elastic_ack_t *y = *(const sl_elastic_ack_t *const *)b;
    int c = strcmp(x->peer, y->peer);
    if (c)
        return c;
    return x->world.round < y->world.round ? -1 : x->world.round > y->world.round;
}

static int find_world(const an_t *an, const sl_elastic_ref_t *ref) {
    size_t lo = 0, hi = an->nw;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = ref_cmp(&an->worlds[mid].w->id, ref);
        if (c == 0)
            return (int)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* Index of the first ack of `peer` (or where it would be). */
static size_t acks_from(const an_t *an, const char *peer) {
    size_t lo = 0, hi = an->na;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(an->acks[mid]->peer, peer) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Index just past the last ack of `peer`. */
static size_t acks_end(const an_t *an, const char *peer) {
    size_t lo = 0, hi = an->na;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(an->acks[mid]->peer, peer) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Index of the first ack of `peer` at or after `round`. */
static size_t acks_at(const an_t *an, const char *peer, uint64_t round) {
    size_t lo = acks_from(an, peer), hi = acks_end(an, peer);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (an->acks[mid]->world.round < round)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static const sl_elastic_ack_t *find_ack(const an_t *an, const char *peer, uint64_t round) {
    size_t i = acks_at(an, peer, round);
    if (i < an->na && strcmp(an->acks[i]->peer, peer) == 0 && an->acks[i]->world.round == round)
        return an->acks[i];
    return NULL;
}

/* A pruned view's memory of `peer`'s acks below the anchor, or NULL. */
static const sl_elastic_past_t *past_of(const an_t *an, const char *peer) {
    size_t lo = 0, hi = an->v->past_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(an->v->past[mid].peer, peer);
        if (c == 0)
            return &an->v->past[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The world `peer` acked last (round 0: none). */
static sl_elastic_ref_t tip_of(const an_t *an, const char *peer) {
    sl_elastic_ref_t t;
    memset(&t, 0, sizeof t);
    size_t lo = acks_from(an, peer), hi = acks_end(an, peer);
    const sl_elastic_past_t *e;
    if (hi > lo)
        t = an->acks[hi - 1]->world;
    else if (an->cut && (e = past_of(an, peer)) != NULL)
        t = e->tip; /* it acked nothing since the anchor */
    return t;
}

static bool is_member(const sl_elastic_world_t *w, const char *peer) {
    for (uint32_t i = 0; i < w->count; i++)
        if (strcmp(w->members[i], peer) == 0)
            return true;
    return false;
}

static bool established(an_t *an, int x);
static bool dead(an_t *an, int x);

/* A chain of acks that reaches below the anchor at tip `t` before it
 * reaches `p`: only a root's base (no world) is behind the anchor, and
 * the view remembers where each peer's newest ack below it leads. */
static int chain_past(const an_t *an, const char *peer, const sl_elastic_ref_t *t,
                      const sl_elastic_ref_t *p) {
    const sl_elastic_past_t *e = past_of(an, peer);
    if (p->round != 0 || !e || !sl_elastic_ref_eq(&e->tip, t))
        return MAYBE; /* a base below the anchor, or a tip it does not know */
    return e->from_none;
}

/* Whether `peer`'s chain of acks from tip `t` reaches back to `p`'s round
 * or before through dead worlds only: YES; it stops at an established
 * world after `p` (it committed to that one): NO; at a world not yet
 * decided or not yet seen: MAYBE. */
static int chain(an_t *an, const char *peer, sl_elastic_ref_t t, const sl_elastic_ref_t *p) {
    for (;;) {
        if (t.round <= p->round)
            return YES;
        if (t.round < an->cut)
            return chain_past(an, peer, &t, p);
        int x = find_world(an, &t);
        if (x < 0)
            return MAYBE;
        if (established(an, x))
            return NO;
        if (!dead(an, x))
            return MAYBE;
        const sl_elastic_ack_t *b = find_ack(an, peer, t.round);
        if (!b || !sl_elastic_ref_eq(&b->world, &t))
            return MAYBE;
        t = b->tip;
    }
}

/* Whether `peer` continues `p` into world `w`: YES (its ack says so), NO
 * (it never can), MAYBE (not yet known). */
static int continues(an_t *an, const char *peer, const sl_elastic_world_t *w,
                     const sl_elastic_ref_t *p) {
    if (!is_member(w, peer))
        return NO;
    const sl_elastic_ack_t *a = find_ack(an, peer, w->id.round);
    if (a && !sl_elastic_ref_eq(&a->world, &w->id))
        return NO; /* it acked another world of this round */
    if (a)
        return chain(an, peer, a->tip, p);
    /* no ack yet: it never will continue p into w once it acked a round
     * at or after w's, or an established world after p (p no world, in a
     * pruned view: its chain from its newest ack below the anchor met
     * one; a base below the anchor cannot be judged, and makes the
     * records stale) */
    const sl_elastic_past_t *e = p->round == 0 && an->cut ? past_of(an, peer) : NULL;
    if (e && e->from_none == NO)
        return NO;
    for (size_t i = acks_at(an, peer, p->round + 1);
         i < an->na && strcmp(an->acks[i]->peer, peer) == 0; i++) {
        const sl_elastic_ref_t *r = &an->acks[i]->world;
        if (r->round >= w->id.round)
            return NO;
        int x = find_world(an, r);
        if (x >= 0 && established(an, x))
            return NO;
    }
    return MAYBE;
}

/* The partition rule's quorum of a parent's members (docs/elastic.md,
 * "Partitions: the rule"): a strict majority, or exactly half when the
 * half holds the parent's first member (rank 0) -- the tie-break that
 * lets a world of two go on when its rank 1 dies. Two halves can never
 * both hold rank 0, so two children of one world still cannot both have
 * their quorum. `first` says whether the parent's member 0 is among the
 * `count` members counted. */
static bool quorum(uint32_t count, bool first, uint32_t of) {
    if (g_bug == SL_ELASTIC_BUG_NO_MAJORITY)
        return count >= 1;
    return 2 * count > of || (2 * count == of && first);
}

/* The world a root's members count from: none, or for a graft the world
 * it grafts onto (they continue that world's state, having committed to
 * nothing established since). */
static const sl_elastic_ref_t *base_of(const sl_elastic_world_t *w) {
    return w->parent.round ? &w->parent : &w->graft;
}

static bool established(an_t *an, int x) {
    wnode_t *n = &an->worlds[x];
    if (n->est >= 0)
        return n->est;
    const sl_elastic_world_t *w = n->w;
    bool r;
    if (w->parent.round == 0) {
        /* a root: a majority of its own members, from no world or (a
         * graft) from the world it grafts onto, which must be established
         * as a child's parent must */
        int gx = w->graft.round ? find_world(an, &w->graft) : -1;
        uint32_t yes = 0;
        for (uint32_t i = 0; i < w->count; i++)
            yes += continues(an, w->members[i], w, base_of(w)) == YES;
        r = g_bug == SL_ELASTIC_BUG_NO_MAJORITY ? yes >= 1 : 2 * yes > w->count;
        if (w->graft.round && (gx < 0 || !established(an, gx)))
            r = false;
    } else {
        int px = find_world(an, &w->parent);
        if (px < 0 || !established(an, px)) {
            r = false;
        } else {
            const sl_elastic_world_t *p = an->worlds[px].w;
            uint32_t yes = 0;
            bool first = false;
            for (uint32_t i = 0; i < p->count; i++) {
                bool c = continues(an, p->members[i], w, &w->parent) == YES;
                yes += c;
                first |= c && i == 0;
            }
            r = quorum(yes, first, p->count);
        }
    }
    n->est = r;
    return r;
}

static bool dead(an_t *an, int x) {
    wnode_t *n = &an->worlds[x];
    if (n->dead >= 0)
        return n->dead;
    const sl_elastic_world_t *w = n->w;
    bool r = false;
    if (w->parent.round == 0) {
        int gx = w->graft.round ? find_world(an, &w->graft) : -1;
        uint32_t possible = 0;
        for (uint32_t i = 0; i < w->count; i++)
            possible += continues(an, w->members[i], w, base_of(w)) != NO;
        r = g_bug == SL_ELASTIC_BUG_NO_MAJORITY ? possible == 0 : 2 * possible <= w->count;
        r |= gx >= 0 && dead(an, gx);
    } else {
        int px = find_world(an, &w->parent);
        if (px >= 0 && dead(an, px)) {
            r = true;
        } else if (px >= 0 && established(an, px)) {
            const sl_elastic_world_t *p = an->worlds[px].w;
            uint32_t possible = 0;
            bool first = false;
            for (uint32_t i = 0; i < p->count; i++) {
                bool c = continues(an, p->members[i], w, &w->parent) != NO;
                possible += c;
                first |= c && i == 0;
            }
            r = !quorum(possible, first, p->count);
        }
    }
    n->dead = r;
    return r;
}

static int root_of(an_t *an, int x) {
    wnode_t *n = &an->worlds[x];
    if (n->root != -2)
        return n->root;
    int r;
    if (n->w->parent.round == 0) {
        r = x;
    } else {
        int px = find_world(an, &n->w->parent);
        r = px < 0 ? -1 : root_of(an, px);
    }
    n->root = r;
    return r;
}

/* Whether world x's lineage was dropped: its root grafts onto a world g
 * that has an established child (g's own lineage went on: the quorum
 * side is preferred), or onto which an established graft of a lower
 * (round, leader) exists (the first graft is kept), or whose own lineage
 * was dropped. Computed from the records alone, final once true. */
static bool dropped(an_t *an, int x) {
    int rx = root_of(an, x);
    if (rx < 0)
        return false;
    wnode_t *n = &an->worlds[rx];
    if (n->dropped >= 0)
        return n->dropped;
    const sl_elastic_world_t *w = n->w;
    int gx = w->graft.round ? find_world(an, &w->graft) : -1;
    bool r = false;
    if (gx >= 0 && g_bug != SL_ELASTIC_BUG_GRAFT_KEPT) {
        r = dropped(an, gx);
        for (size_t i = (size_t)gx + 1; i < an->nw && !r; i++) {
            const sl_elastic_world_t *o = an->worlds[i].w;
            if ((sl_elastic_ref_eq(&o->parent, &w->graft) ||
                 (o->parent.round == 0 && sl_elastic_ref_eq(&o->graft, &w->graft) &&
                  ref_cmp(&o->id, &w->id) < 0)) &&
                established(an, (int)i))
                r = true;
        }
    }
    n->dropped = r;
    return r;
}

/* Whether the state that world sx stepped belongs to the lineage of world
 * x: sx is of x's tree, or of the tree x's root grafts onto at or before
 * the graft's world, and so on. */
static bool in_lineage(an_t *an, int x, int sx) {
    int r = root_of(an, x), sr = root_of(an, sx);
    uint64_t limit = UINT64_MAX;
    while (r >= 0 && sr >= 0) {
        if (r == sr && an->worlds[sx].w->id.round <= limit)
            return true;
        const sl_elastic_ref_t *g = &an->worlds[r].w->graft;
        int gx = g->round ? find_world(an, g) : -1;
        if (gx < 0)
            return false;
        limit = g->round; /* rounds fall along the way: it ends */
        r = root_of(an, gx);
    }
    return false;
}

/* Whether x's lineage reaches the anchor's tree (through the worlds its
 * grafts graft onto): then the worlds below the anchor that are of the
 * anchor's lineage are of x's too. */
static bool reaches_anchor(an_t *an, int x) {
    for (int r = root_of(an, x); r >= 0;) {
        if (r == an->anchor)
            return true;
        const sl_elastic_ref_t *g = &an->worlds[r].w->graft;
        int gx = g->round && g_bug != SL_ELASTIC_BUG_ANCHOR_GRAFT ? find_world(an, g) : -1;
        if (gx < 0)
            return false;
        r = root_of(an, gx);
    }
    return false;
}

/* Whether the state that world `sw` stepped is of x's lineage. Below the
 * anchor, from what the view remembers of each peer's newest ack there: a
 * state changes only by a step (then its world is one the peer acked) or
 * at a start (then it is the source's), and no world at or past the
 * anchor steps a state to a world below it, so every state below the
 * anchor that a peer can hold is one a peer held at its newest ack below
 * it: the state it named, the one that world stepped, or the one that
 * world started from. */
static bool state_in_lineage(an_t *an, int x, const sl_elastic_ref_t *sw) {
    if (sw->round >= an->cut) {
        int sx = find_world(an, sw);
        if (sx < 0)
            return false;
        if (g_bug == SL_ELASTIC_BUG_GRAFT_NO_STATE)
            return root_of(an, sx) == root_of(an, x);
        return in_lineage(an, x, sx);
    }
    if (!reaches_anchor(an, x))
        return false;
    for (size_t i = 0; i < an->v->past_count; i++) {
        const sl_elastic_past_t *e = &an->v->past[i];
        if ((sl_elastic_ref_eq(sw, &e->tip) && e->tip_in_lineage) ||
            (sl_elastic_ref_eq(sw, &e->state_world) && e->state_in_lineage) ||
            (sl_elastic_ref_eq(sw, &e->source_world) && e->source_in_lineage))
            return true;
    }
    return false;
}

/* The rank whose state world x starts from (-1: none; *step its step),
 * and the checkpoint step the continuers without a state name (start(),
 * below, has the rule). */
static int source_of(an_t *an, int x, uint64_t *step, uint64_t *ckpt) {
    const sl_elastic_world_t *w = an->worlds[x].w;
    uint64_t src_round = 0, src_step = 0;
    int src = -1;
    *ckpt = 0;
    for (uint32_t i = 0; i < w->count; i++) {
        const sl_elastic_ack_t *k = find_ack(an, w->members[i], w->id.round);
        if (!k)
            continue;
        if (k->has_state && state_in_lineage(an, x, &k->state_world)) {
            bool newer = src < 0 || k->state_world.round > src_round ||
                         (k->state_world.round == src_round && k->step > src_step);
            if (g_bug == SL_ELASTIC_BUG_LOWEST_STEP)
                newer = src < 0 || k->step < src_step;
            if (newer) {
                src = (int)i;
                src_round = k->state_world.round;
                src_step = k->step;
            }
        } else if (!k->has_state && k->step > *ckpt &&
                   continues(an, w->members[i], w, base_of(w)) == YES) {
            *ckpt = k->step; /* the checkpoint it can restore */
        }
    }
    *step = src_step;
    return src;
}

static bool all_acked(an_t *an, const sl_elastic_world_t *w) {
    for (uint32_t i = 0; i < w->count; i++) {
        const sl_elastic_ack_t *a = find_ack(an, w->members[i], w->id.round);
        if (!a || !sl_elastic_ref_eq(&a->world, &w->id))
            return false;
    }
    return true;
}

static bool bounds_ok(const sl_elastic_world_t *w) {
    return w->count >= 1 && w->count <= SL_ELASTIC_MAX_NODES;
}

static void an_free(an_t *an) {
    sl_free(an->worlds);
    sl_free(an->acks);
    sl_free(an->members);
    memset(an, 0, sizeof *an);
}

static sl_err an_build(an_t *an, const sl_elastic_view_t *v) {
    memset(an, 0, sizeof *an);
    an->v = v;
    an->win_root = an->head = an->anchor = -1;
    an->cut = v->anchor.round;
    an->worlds = sl_calloc(v->world_count ? v->world_count : 1, sizeof *an->worlds);
    an->acks = sl_calloc(v->ack_count ? v->ack_count : 1, sizeof *an->acks);
    an->members = sl_calloc(v->member_count ? v->member_count : 1, sizeof *an->members);
    if (!an->worlds || !an->acks || !an->members) {
        an_free(an);
        return SL_ENOMEM;
    }
    for (size_t i = 0; i < v->world_count; i++) {
        const sl_elastic_world_t *w = v->worlds[i];
        if (!bounds_ok(w) || w->id.round == 0 || w->parent.round >= w->id.round ||
            w->graft.round >= w->id.round || (w->graft.round && w->parent.round))
            continue; /* not a world any peer would write */
        if (w->id.round < an->cut)
            continue; /* below the anchor: pruned */
        wnode_t *n = &an->worlds[an->nw++];
        n->w = w;
        n->est = n->dead = n->dropped = -1;
        n->root = -2;
    }
    for (size_t i = 0; i < v->ack_count; i++)
        if (v->acks[i]->world.round > 0 && v->acks[i]->tip.round < v->acks[i]->world.round &&
            v->acks[i]->world.round >= an->cut)
            an->acks[an->na++] = v->acks[i];
    for (size_t i = 0; i < v->member_count; i++)
        an->members[an->nm++] = &v->members[i];
    qsort(an->members, an->nm, sizeof *an->members, member_cmp);
    qsort(an->worlds, an->nw, sizeof *an->worlds, wnode_cmp);
    qsort(an->acks, an->na, sizeof *an->acks, ack_cmp);
    for (size_t i = 1; i < an->nw; i++)
        if (ref_cmp(&an->worlds[i - 1].w->id, &an->worlds[i].w->id) == 0)
            goto bad;
    for (size_t i = 1; i < an->na; i++)
        if (ack_cmp(&an->acks[i - 1], &an->acks[i]) == 0)
            goto bad;
    for (size_t i = 1; i < v->past_count; i++)
        if (strcmp(v->past[i - 1].peer, v->past[i].peer) >= 0)
            goto bad;
    if (an->cut) {
        /* the anchor is taken as established and as the root of the
         * worlds that descend from it: what is below it is left out */
        an->anchor = find_world(an, &v->anchor);
        if (an->anchor < 0)
            goto bad;
        wnode_t *n = &an->worlds[an->anchor];
        n->est = 1;
        n->dead = n->dropped = 0;
        n->root = an->anchor;
    }
    /* sorted: the last established world of a lineage not dropped is the
     * newest; its lineage survives (an established world's parents are
     * established, so its root is known) */
    for (size_t i = an->nw; i-- > 0;)
        if (established(an, (int)i) && !dropped(an, (int)i)) {
            an->head = (int)i;
            an->win_root = root_of(an, (int)i);
            break;
        }
    return SL_OK;
bad:
    an_free(an);
    return SL_EINVAL;
}

static bool trainable(an_t *an, int x) {
    return x >= 0 && x == an->head && all_acked(an, an->worlds[x].w);
}

static void status_of(an_t *an, int x, sl_elastic_status_t *out) {
    memset(out, 0, sizeof *out);
    if (x < 0)
        return;
    out->found = true;
    out->established = established(an, x);
    out->dead = dead(an, x);
    out->dropped = dropped(an, x);
    out->all_acked = all_acked(an, an->worlds[x].w);
    out->trainable = trainable(an, x);
    int r = root_of(an, x);
    if (r >= 0)
        out->root = an->worlds[r].w->id;
}

sl_err sl_elastic_status(const sl_elastic_view_t *view, const sl_elastic_ref_t *world,
                         sl_elastic_status_t *out) {
    memset(out, 0, sizeof *out);
    an_t an;
    sl_err err = an_build(&an, view);
    if (err)
        return err;
    status_of(&an, find_world(&an, world), out);
    an_free(&an);
    return SL_OK;
}

sl_err sl_elastic_status_all(const sl_elastic_view_t *view, sl_elastic_status_t *out) {
    an_t an;
    sl_err err = an_build(&an, view);
    if (err)
        return err;
    for (size_t i = 0; i < view->world_count; i++)
        status_of(&an, find_world(&an, &view->worlds[i]->id), &out[i]);
    an_free(&an);
    return SL_OK;
}

sl_err sl_elastic_head(const sl_elastic_view_t *view, sl_elastic_ref_t *out) {
    memset(out, 0, sizeof *out);
    an_t an;
    sl_err err = an_build(&an, view);
    if (err)
        return err;
    if (an.head >= 0)
        *out = an.worlds[an.head].w->id;
    an_free(&an);
    return SL_OK;
}

/* ---- the pruned view (docs/elastic.md, "The pruned view") ---- */

bool sl_elastic_anchor_judges(const sl_elastic_ref_t *anchor, const sl_elastic_world_t *w) {
    const sl_elastic_ref_t *b = base_of(w);
    return w->id.round >= anchor->round &&
           (!b->round || b->round >= anchor->round || sl_elastic_ref_eq(&w->id, anchor));
}

static int parent_of(an_t *an, int x) {
    const sl_elastic_world_t *w = an->worlds[x].w;
    return w->parent.round ? find_world(an, &w->parent) : -1;
}

/* Whether the view may be cut at world x: every world below x's round is
 * decided (its status is final: what is kept of it is all any later
 * record can ask), and no other world at or past it names a parent or
 * graft below it (one would need what is cut). */
static bool may_cut_at(an_t *an, int x, uint64_t undecided, uint64_t limit) {
    const sl_elastic_ref_t *a = &an->worlds[x].w->id;
    if (a->round > undecided || a->round > limit)
        return false;
    for (size_t i = 0; i < an->nw; i++) {
        const sl_elastic_world_t *w = an->worlds[i].w;
        if (w->id.round >= a->round && !sl_elastic_anchor_judges(a, w))
            return false;
    }
    return true;
}

/* What the view pruned at world x keeps of `peer`'s acks below x's round:
 * its newest ack there `k` (or, NULL, the entry of the view's own past). */
static void past_entry(an_t *an, int x, const char *peer, const sl_elastic_ack_t *k,
                       const sl_elastic_past_t *old, sl_elastic_past_t *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->peer, sizeof out->peer, "%s", peer);
    if (k) {
        sl_elastic_ref_t none;
        memset(&none, 0, sizeof none);
        out->tip = k->world;
        out->state_world = k->state_world;
        out->from_none = (uint8_t)chain(an, peer, k->world, &none);
    } else {
        out->tip = old->tip;
        out->state_world = old->state_world;
        out->from_none = old->from_none;
    }
    out->tip_in_lineage = state_in_lineage(an, x, &out->tip);
    out->state_in_lineage = state_in_lineage(an, x, &out->state_world);
    /* the state the world of that ack started from, the source's */
    int wx = k ? find_world(an, &k->world) : -1;
    uint64_t step, ckpt;
    int src = wx >= 0 && all_acked(an, an->worlds[wx].w) ? source_of(an, wx, &step, &ckpt) : -1;
    if (src >= 0) {
        const char *m = an->worlds[wx].w->members[src];
        out->source_world = find_ack(an, m, k->world.round)->state_world;
        out->source_in_lineage = state_in_lineage(an, x, &out->source_world);
    } else if (!k) {
        out->source_world = old->source_world;
        out->source_in_lineage = state_in_lineage(an, x, &old->source_world);
    }
}

sl_err sl_elastic_anchor(const sl_elastic_view_t *view, uint64_t limit, sl_elastic_ref_t *anchor,
                         sl_elastic_past_t *past, size_t past_cap, size_t *past_count) {
    memset(anchor, 0, sizeof *anchor);
    *past_count = 0;
    an_t an;
    sl_err err = an_build(&an, view);
    if (err)
        return err;
    uint64_t undecided = UINT64_MAX; /* the lowest round of a world not yet decided */
    for (size_t i = 0; i < an.nw; i++)
        if (!established(&an, (int)i) && !dead(&an, (int)i) &&
            an.worlds[i].w->id.round < undecided)
            undecided = an.worlds[i].w->id.round;
    int head = an.head;
    /* the newest world before the head, along its parents, down to the
     * view's own anchor */
    int x = -1;
    for (int y = head >= 0 ? parent_of(&an, head) : -1; y >= 0 && y != an.anchor;
         y = parent_of(&an, y))
        if (may_cut_at(&an, y, undecided, limit)) {
            x = y;
            break;
        }
    if (x < 0) { /* it stays */
        if (view->past_count > past_cap) {
            err = SL_ETOOBIG;
            goto done;
        }
        *anchor = view->anchor;
        if (view->past_count)
            memcpy(past, view->past, view->past_count * sizeof *past);
        *past_count = view->past_count;
        goto done;
    }
    uint64_t cut = an.worlds[x].w->id.round;
    size_t n = 0, i = 0, j = 0;
    while (i < an.na || j < view->past_count) {
        /* the next peer in id order, from the acks and the old past */
        const char *peer = i < an.na ? an.acks[i]->peer : view->past[j].peer;
        if (j < view->past_count && strcmp(view->past[j].peer, peer) < 0)
            peer = view->past[j].peer;
        const sl_elastic_ack_t *k = NULL;
        for (; i < an.na && strcmp(an.acks[i]->peer, peer) == 0; i++)
            if (an.acks[i]->world.round < cut)
                k = an.acks[i];
        const sl_elastic_past_t *old = NULL;
        if (j < view->past_count && strcmp(view->past[j].peer, peer) == 0)
            old = &view->past[j++];
        if (!k && !old)
            continue; /* nothing of it below the cut */
        if (n == past_cap) {
            err = SL_ETOOBIG;
            goto done;
        }
        past_entry(&an, x, peer, k, old, &past[n++]);
    }
    *anchor = an.worlds[x].w->id;
    *past_count = n;
done:
    an_free(&an);
    return err;
}

/* ---- the core ---- */

sl_err sl_elastic_new(const sl_elastic_config_t *cfg, const char *self, sl_elastic_t **out) {
    *out = NULL;
    if (!cfg->job_id || !self || !self[0] || strlen(self) > SL_ELASTIC_ID_MAX ||
        cfg->min_nodes < 1 || cfg->max_nodes < cfg->min_nodes ||
        cfg->max_nodes > SL_ELASTIC_MAX_NODES)
        return SL_EINVAL;
    sl_elastic_t *e = sl_calloc(1, sizeof *e);
    if (!e)
        return SL_ENOMEM;
    e->cfg = *cfg;
    memcpy(e->self, self, strlen(self) + 1);
    e->phase = SL_ELASTIC_IDLE;
    *out = e;
    return SL_OK;
}

void sl_elastic_destroy(sl_elastic_t **e) {
    if (!e || !*e)
        return;
    sl_free(*e);
    *e = NULL;
}

sl_elastic_phase sl_elastic_phase_of(const sl_elastic_t *e) { return e->phase; }

size_t sl_elastic_walked(const sl_elastic_t *e) { return e->walked; }

sl_elastic_ref_t sl_elastic_current(const sl_elastic_t *e) { return e->cur; }

static uint32_t min_nodes(const sl_elastic_t *e) {
    uint32_t m = e->cfg.min_nodes;
    return g_bug == SL_ELASTIC_BUG_MIN_MINUS_1 && m > 1 ? m - 1 : m;
}

/* Whether `peer` is alive in this peer's view (absent: not; the view's
 * ids are distinct). */
static bool alive(const an_t *an, const char *peer) {
    size_t lo = 0, hi = an->nm;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(an->members[mid]->id, peer) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < an->nm && strcmp(an->members[lo]->id, peer) == 0 && an->members[lo]->alive;
}

static sl_elastic_action_t *emit(sl_elastic_out_t *out, sl_elastic_action_kind kind) {
    sl_elastic_action_t *a = &out->actions[out->count++];
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->source = -1;
    return a;
}

static void set_id(char *dst, const char *src) {
    size_t n = strnlen(src, SL_ELASTIC_ID_MAX);
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* The reason the world this peer trains in ends, or NULL. */
static const char *ends(const sl_elastic_t *e, an_t *an, int x) {
    const sl_elastic_view_t *v = an->v;
    if (x < 0 || x != an->head)
        return "a newer world or another lineage took over";
    const sl_elastic_world_t *w = an->worlds[x].w;
    for (uint32_t i = 0; i < w->count; i++)
        if (!alive(an, w->members[i]))
            return "a member is gone";
    for (size_t i = 0; i < v->vol_count; i++) {
        const sl_elastic_vol_t *vol = &v->vols[i];
        if (vol->round <= w->id.round || !alive(an, vol->peer))
            continue;
        if (is_member(w, vol->peer))
            return "a member volunteers again (it restarted or left the world)";
        if (w->count < e->cfg.max_nodes)
            return "a volunteer can be taken";
    }
    return NULL;
}

/* Whether this peer stops waiting for world x. */
static bool gives_up(const sl_elastic_t *e, an_t *an, int x, int64_t now_ms) {
    if (g_bug == SL_ELASTIC_BUG_NEVER_GIVE_UP)
        return false;
    if (x < 0 || dead(an, x) || dropped(an, x) ||
        now_ms - e->since_ms > (int64_t)e->cfg.ack_timeout_ms)
        return true;
    const sl_elastic_world_t *w = an->worlds[x].w;
    for (uint32_t i = 0; i < w->count; i++) {
        if (!alive(an, w->members[i]))
            return true;
        sl_elastic_ref_t t = tip_of(an, w->members[i]);
        if (t.round >= w->id.round && !sl_elastic_ref_eq(&t, &w->id))
            return true; /* it acked another world: this one never starts */
    }
    for (size_t i = 0; i < an->nw; i++)
        if (an->worlds[i].w->id.round > w->id.round && is_member(an->worlds[i].w, e->self) &&
            !dead(an, (int)i))
            return true;
    return false;
}

/* Starts world x. The source of the state is the member whose state was
 * last stepped by the newest world of this lineage (then the highest step,
 * then the lowest rank), continuer or joiner: every world of a lineage
 * descends from the one before, so that state is the lineage's latest a
 * member holds (a world that started but never stepped produced nothing). With none, the members restore the checkpoint the continuers
 * named (the highest step), or initialise at step 0. */
static void start(sl_elastic_t *e, an_t *an, int x, sl_elastic_out_t *out) {
    const sl_elastic_world_t *w = an->worlds[x].w;
    sl_elastic_action_t *a = emit(out, SL_ELASTIC_START);
    a->world = *w;
    for (uint32_t i = 0; i < w->count; i++)
        if (strcmp(w->members[i], e->self) == 0)
            a->rank = i;
    uint64_t src_step, ckpt;
    int src = source_of(an, x, &src_step, &ckpt);
    if (g_bug == SL_ELASTIC_BUG_SORTED_RANKS) { /* the rank among the sorted ids */
        a->rank = 0;
        for (uint32_t i = 0; i < w->count; i++)
            a->rank += strcmp(w->members[i], e->self) < 0;
    }
    a->source = src;
    a->start_step = src >= 0 ? src_step : ckpt;
    e->phase = SL_ELASTIC_TRAINING;
}

/* The world an idle peer acks: the newest that includes it, is not dead,
 * and is the head or continues it (or is a root while no lineage is
 * established), or, for a peer that does not continue the head, is newer
 * than the head and undecided;
 * of two in one round, the one whose leader ranks higher for the round. */
static int pick(const sl_elastic_t *e, an_t *an, const sl_elastic_ref_t *tip) {
    int best = -1;
    uint64_t bw = 0;
    const sl_elastic_world_t *h = an->head >= 0 ? an->worlds[an->head].w : NULL;
    /* a peer that does not continue the head has no vote to keep for it:
     * it may also ack a world newer than the head that is still undecided
     * (neither established nor dead), which its ack may decide; a member
     * of that world's parent that never acks it would hold it undecided,
     * and with it the acks that passed through it, for ever */
    bool continuing = h && is_member(h, e->self) && chain(an, e->self, *tip, &h->id) == YES;
    for (size_t i = 0; i < an->nw; i++) {
        const sl_elastic_world_t *w = an->worlds[i].w;
        if (w->id.round <= tip->round || !is_member(w, e->self) || dead(an, (int)i) ||
            dropped(an, (int)i) || w->count < min_nodes(e) || w->count > e->cfg.max_nodes)
            continue;
        /* the head itself (established, not all acked yet), a child of it
         * or a graft onto it */
        bool fits = w->parent.round == 0
                        ? an->win_root < 0 || an->win_root == (int)i ||
                              (h && sl_elastic_ref_eq(&w->graft, &h->id))
                        : (int)i == an->head ||
                              (an->head >= 0 &&
                               sl_elastic_ref_eq(&w->parent, &an->worlds[an->head].w->id));
        if (!fits && (continuing || established(an, (int)i) || (h && w->id.round <= h->id.round)))
            continue;
        uint64_t wt = sl_hrw_weight(w->id.leader, strlen(w->id.leader),
                                    sl_round_key(e->cfg.job_id, w->id.round));
        if (best < 0 || w->id.round > an->worlds[best].w->id.round ||
            (w->id.round == an->worlds[best].w->id.round && wt > bw)) {
            best = (int)i;
            bw = wt;
        }
    }
    return best;
}

static int id_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether head h can still gather a quorum of its members in this peer's
 * view: those alive whose chain of acks may still continue h (not
 * committed to an established world since). When it cannot, its lineage
 * would wait for a member to return; a graft carries its state on. */
static bool head_possible(const sl_elastic_t *e, an_t *an, const sl_elastic_world_t *h) {
    uint32_t possible = 0;
    bool first = false;
    for (uint32_t i = 0; i < h->count; i++) {
        const char *m = h->members[i];
        bool c = (strcmp(m, e->self) == 0 || alive(an, m)) &&
                 chain(an, m, tip_of(an, m), &h->id) != NO;
        possible += c;
        first |= c && i == 0;
    }
    return quorum(possible, first, h->count);
}

/* As the round's leader: seals the next world when it may: a child of
 * the head when a quorum of its members continue it, or a graft onto it
 * when none can any more (its dead members leave no quorum possible). A
 * continuer brings the head's state to the graft; with none left, it
 * restores the newest checkpoint (a full restart's rule). */
static void lead(sl_elastic_t *e, an_t *an, uint64_t my_vol, uint64_t max_round, int64_t now_ms,
                 sl_elastic_out_t *out) {
    const sl_elastic_view_t *v = an->v;
    const sl_elastic_world_t *h = an->head >= 0 ? an->worlds[an->head].w : NULL;
    uint64_t hround = h ? h->id.round : 0;
    size_t n = 0;
    sl_round_member_t *cand = sl_calloc(v->vol_count + 1, sizeof *cand);
    const char **joiners = sl_calloc(v->vol_count + 1, sizeof *joiners);
    bool *cont = sl_calloc(v->vol_count + 1, sizeof *cont);
    if (!cand || !joiners || !cont)
        goto done;
    uint64_t round = max_round + 1;
    bool self_seen = false;
    for (size_t i = 0; i < v->vol_count; i++) {
        const sl_elastic_vol_t *vol = &v->vols[i];
        bool me = strcmp(vol->peer, e->self) == 0;
        uint64_t r = me ? my_vol : vol->round;
        if (r <= hround || !(me || alive(an, vol->peer)))
            continue;
        self_seen |= me;
        cand[n].id = vol->peer;
        cand[n].alive = true;
        n++;
        if (r > round)
            round = r;
    }
    if (!self_seen) {
        cand[n].id = e->self;
        cand[n].alive = true;
        n++;
    }
    if (round <= e->sealed_round || !v->synced)
        goto done;
    int l = sl_round_leader(cand, n, sl_round_key(e->cfg.job_id, round));
    if (l < 0 || strcmp(cand[l].id, e->self) != 0)
        goto done;
    uint32_t ncont = 0;
    bool first = false;
    for (size_t i = 0; i < n; i++) {
        sl_elastic_ref_t none, t = tip_of(an, cand[i].id);
        memset(&none, 0, sizeof none);
        cont[i] = (!h || is_member(h, cand[i].id)) &&
                  chain(an, cand[i].id, t, h ? &h->id : &none) == YES;
        ncont += cont[i];
        first |= cont[i] && h && strcmp(cand[i].id, h->members[0]) == 0;
    }
    bool graft = h && !quorum(ncont, first, h->count) && !head_possible(e, an, h);
    bool may = n >= min_nodes(e) && (!h || quorum(ncont, first, h->count) || graft);
    if (!may) {
        e->settle_round = 0;
        goto done;
    }
    if (e->settle_round != round) {
        e->settle_round = round;
        e->settle_since_ms = now_ms;
    }
    bool all_back = h != NULL;
    for (uint32_t i = 0; h && i < h->count && all_back; i++) {
        bool in = false;
        for (size_t j = 0; j < n && !in; j++)
            in = strcmp(cand[j].id, h->members[i]) == 0;
        all_back = in || !alive(an, h->members[i]);
    }
    if (!all_back && n < e->cfg.max_nodes &&
        now_ms - e->settle_since_ms < (int64_t)e->cfg.settle_ms)
        goto done;
    /* members: the continuers in their old rank order, then the others
     * by id, up to max; in a graft, first the others whose chain of acks
     * still reaches H's round (a graft needs a majority of its own members
     * to continue H: a peer committed since, if only to a world of a
     * lineage dropped since, never can) */
    sl_elastic_world_t *w = &e->sealing;
    memset(w, 0, sizeof *w);
    w->id.round = round;
    set_id(w->id.leader, e->self);
    if (graft)
        w->graft = h->id;
    else if (h)
        w->parent = h->id;
    for (uint32_t i = 0; h && i < h->count && w->count < e->cfg.max_nodes; i++)
        for (size_t j = 0; j < n; j++)
            if (cont[j] && strcmp(cand[j].id, h->members[i]) == 0)
                set_id(w->members[w->count++], cand[j].id);
    size_t nj = 0;
    for (size_t j = 0; j < n; j++)
        if (!cont[j] || !h)
            joiners[nj++] = cand[j].id;
    qsort(joiners, nj, sizeof *joiners, id_cmp);
    uint32_t reach = w->count; /* members that can continue H into a graft */
    for (int pass = graft ? 0 : 1; pass < 2; pass++)
        for (size_t j = 0; j < nj && w->count < e->cfg.max_nodes; j++) {
            bool yes = graft && chain(an, joiners[j], tip_of(an, joiners[j]), &h->id) == YES;
            if (pass == 0 ? !yes : (graft && yes))
                continue; /* in the other pass */
            reach += yes;
            set_id(w->members[w->count++], joiners[j]);
        }
    if (graft && 2 * reach <= w->count && g_bug != SL_ELASTIC_BUG_NO_MAJORITY) {
        /* it would be dead at once: wait for a peer that can count (a
           fresh one, or one back from a partition) */
        e->settle_round = 0;
        goto done;
    }
    emit(out, SL_ELASTIC_WRITE_WORLD)->world = *w;
    e->sealed_round = round;
    if (graft)
        sl_log(SL_LOG_INFO, "ELASTIC-GRAFT",
               "%s seals round %llu of %s: %u members, grafted onto round %llu/%s (its quorum "
               "is gone)", e->self, (unsigned long long)round, e->cfg.job_id, w->count,
               (unsigned long long)w->graft.round, w->graft.leader);
    else
        sl_log(SL_LOG_INFO, "ELASTIC-SEAL",
               "%s seals round %llu of %s: %u members, parent round %llu", e->self,
               (unsigned long long)round, e->cfg.job_id, w->count,
               (unsigned long long)w->parent.round);
done:
    sl_free(cand);
    sl_free(joiners);
    sl_free(cont);
}

sl_err sl_elastic_step(sl_elastic_t *e, const sl_elastic_view_t *view,
                       const sl_elastic_local_t *local, int64_t now_ms, sl_elastic_out_t *out) {
    out->count = 0;
    an_t an;
    sl_err err = an_build(&an, view);
    if (err)
        return err;
    e->walked = an.nw + an.na;
    sl_elastic_ref_t tip = tip_of(&an, e->self);
    uint64_t max_round = tip.round;
    for (size_t i = 0; i < an.nw; i++)
        if (an.worlds[i].w->id.round > max_round)
            max_round = an.worlds[i].w->id.round;
    if (e->phase == SL_ELASTIC_CANCELLED)
        goto done;
    if (view->cancelled) {
        if (e->phase == SL_ELASTIC_TRAINING)
            emit(out, SL_ELASTIC_STOP)->reason = "the job was cancelled";
        e->phase = SL_ELASTIC_CANCELLED;
        memset(&e->cur, 0, sizeof e->cur);
        goto done;
    }
    if (e->phase == SL_ELASTIC_TRAINING) {
        const char *why = local->broken.round && sl_elastic_ref_eq(&local->broken, &e->cur)
                              ? "the collective broke (a member's connection closed or went silent)"
                              : ends(e, &an, find_world(&an, &e->cur));
        if (!why)
            goto done;
        emit(out, SL_ELASTIC_STOP)->reason = why;
        e->phase = SL_ELASTIC_IDLE;
        memset(&e->cur, 0, sizeof e->cur);
    }
    if (e->phase == SL_ELASTIC_WAITING) {
        int x = find_world(&an, &e->cur);
        if (trainable(&an, x) && an.worlds[x].w->count >= min_nodes(e)) {
            start(e, &an, x, out);
            goto done;
        }
        if (!gives_up(e, &an, x, now_ms))
            goto done;
        e->phase = SL_ELASTIC_IDLE;
        memset(&e->cur, 0, sizeof e->cur);
    }
    /* idle: join the newest world that has a place for this peer (not
     * from a replica that has not caught up since this peer started: it
     * would join a world the others left long ago) */
    int x = view->synced ? pick(e, &an, &tip) : -1;
    if (x >= 0) {
        sl_elastic_action_t *a = emit(out, SL_ELASTIC_WRITE_ACK);
        set_id(a->ack.peer, e->self);
        a->ack.world = an.worlds[x].w->id;
        a->ack.tip = tip;
        a->ack.step = local->step;
        a->ack.has_state = local->has_state;
        a->ack.state_world = local->state_world;
        e->phase = SL_ELASTIC_WAITING;
        e->cur = a->ack.world;
        e->since_ms = now_ms;
        goto done;
    }
    /* volunteer above every world it knows of */
    uint64_t my_vol = 0;
    for (size_t i = 0; i < view->vol_count; i++)
        if (strcmp(view->vols[i].peer, e->self) == 0)
            my_vol = view->vols[i].round;
    if (my_vol <= max_round) {
        sl_elastic_action_t *a = emit(out, SL_ELASTIC_WRITE_VOL);
        set_id(a->vol.peer, e->self);
        a->vol.round = max_round + 1;
        my_vol = a->vol.round;
    }
    lead(e, &an, my_vol, max_round, now_ms, out);
done:
    an_free(&an);
    return SL_OK;
}

sl_err sl_elastic_check(const sl_elastic_t *e, char *why, size_t why_len) {
    bool in_world = e->phase == SL_ELASTIC_WAITING || e->phase == SL_ELASTIC_TRAINING;
    if (e->phase > SL_ELASTIC_CANCELLED) {
        snprintf(why, why_len, "phase %d is none", (int)e->phase);
        return SL_EINTERNAL;
    }
    if (in_world != (e->cur.round > 0)) {
        snprintf(why, why_len, "%s %s with world round %llu", e->self,
                 sl_elastic_phase_name(e->phase), (unsigned long long)e->cur.round);
        return SL_EINTERNAL;
    }
    return SL_OK;
}
