/* The store on the simulator (include/starling/sim.h): replicas issue
 * random operations of every type on a small key space while the network
 * drops, duplicates, delays (reorders) and partitions messages and nodes
 * crash and restart from their virtual disks; then the network heals and
 * goes quiet, and the INVARIANTS.md store properties are checked:
 *
 *   S1 laws        checked on values in crdt_test; here every replica's
 *                  sl_store_check after every callback
 *   S2 convergence every up replica ends with the same state hash and the
 *                  same version vector
 *   S3 durability  every acknowledged register write is still there, or a
 *                  write with a larger stamp replaced it; every
 *                  acknowledged set add is there unless a removal covers it
 *   S4 unique dots no (replica, seq) is issued twice, across restarts
 *   S5 bounded metadata: once quiet, no tombstone or DEAD atom is left and
 *                  old incarnations have left the version vectors
 *   (S6 blobs: tests/blob_test.c)
 *
 * A write is acknowledged only after its WAL record is synced (the next
 * tick); a crash loses the unsynced tail. Anti-entropy partners are the
 * daemon's: each replica runs the real round core (src/store/store_round.h)
 * on fast timers, told of membership as SWIM would tell it (a start is a
 * join of a new incarnation, a crash takes the member down, a healed
 * partition makes every member urgent) and of what each DIGEST or SUMMARY
 * it receives says. Each checker has a planted bug
 * (bugs test below) that makes it fire. A failing seed is printed:
 * SL_SEED=N replays one seed; SL_SEEDS=N runs N seeds. */
#include <stdlib.h>

#include "starling/sim.h"
#include "starling/store.h"
#include "store/store_round.h"
#include "store/store_spread.h"
#include "store/store_test.h"
#include "testlib.h"

#define NODES 5
#define KEYS 12
#define TICK_MS 50
#define MAX_REC 200000
#define MAX_ACK 20000
#define MAX_RIDS 256
/* The round core's timers: the cluster tests' fast ones, so that 12 s of
 * faults see many rounds (the daemon's defaults are 100 ms, 1 s, 30 s). */
#define SYNC_MS TICK_MS
#define IDLE_MS 500
#define REFRESH_MS 5000

typedef struct {
    uint8_t type;  /* store message type */
    uint8_t *body; /* bytes */
    size_t len;    /* bytes */
} vrec_t;

typedef struct {
    vrec_t snap;             /* durable snapshot (type 0: none) */
    vrec_t *recs;            /* durable WAL records */
    size_t count, cap;       /* entries, allocated */
    vrec_t *pending;         /* appended, not synced: lost on a crash */
    size_t pcount, pcap;     /* entries, allocated */
    uint64_t incarnation;    /* durable counter */
} vdisk_t;

typedef struct {
    sl_store_t *store;       /* NULL while down */
    sl_store_round_t *round; /* its anti-entropy round (NULL while down) */
    vdisk_t disk;            /* survives crashes */
    uint64_t rid;            /* current incarnation's replica id */
    int64_t next_tick;       /* next timer */
    uint32_t live_version;   /* membership version applied */
    uint32_t retired_seen;   /* entries of the retired list applied */
    int64_t next_gc;         /* next gc step */
    sl_store_msg_t *unacked; /* local deltas waiting for their sync */
    size_t unacked_count, unacked_cap; /* entries, allocated */
} node_t;

typedef enum {
    BUG_NONE = 0,
    BUG_ACK_EARLY,  /* S3: acknowledge before the WAL sync */
    BUG_REUSE_RID,  /* S4: restart with the same replica id */
    BUG_DELTA_DROP, /* S2: store deltas skip atoms */
    BUG_NO_GC       /* S5: no garbage collection */
} bug_t;

typedef struct {
    char key[16];      /* register key */
    uint8_t val[16];   /* value */
    size_t len;        /* value bytes */
    uint64_t hlc;      /* its stamp */
    sl_dot_t dot;      /* its dot */
} ack_t;

typedef struct {
    char key[16];      /* set key */
    char elem[8];      /* element */
    sl_dot_t dot;      /* the add's dot */
} set_ack_t;

typedef struct {
    node_t nodes[NODES];        /* replicas */
    sl_sim_t *sim;              /* the simulator */
    bool writes;                /* local operations on */
    bug_t bug;                  /* planted */
    uint32_t live_version;      /* bumped on every crash and restart */
    uint64_t retired[MAX_RIDS]; /* old incarnations */
    uint32_t retired_count;     /* entries */
    uint64_t issued_rid[MAX_RIDS];  /* S4: replicas that issued dots */
    uint64_t issued_seq[MAX_RIDS];  /* S4: their last issued seq */
    uint32_t issued_count;      /* entries */
    bool s4_broken;             /* a dot was issued twice */
    ack_t *acks;                /* S3: acknowledged register writes */
    size_t ack_count;           /* entries */
    set_ack_t *set_acks;        /* S3: acknowledged set adds */
    size_t set_ack_count;       /* entries */
    uint64_t tomb_hlc[KEYS];    /* largest tombstone stamp issued per register key */
    sl_dot_t tomb_dot[KEYS];    /* its dot */
    sl_store_msg_t *removes;    /* every set removal issued (decoded later) */
    size_t remove_count, remove_cap; /* entries, allocated */
    int64_t ops;                /* operations issued */
} world_t;

static void vrec_push(vrec_t **arr, size_t *count, size_t *cap, uint8_t type, const uint8_t *b,
                      size_t len) {
    if (*count == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *arr = realloc(*arr, *cap * sizeof **arr);
    }
    vrec_t *r = &(*arr)[(*count)++];
    r->type = type;
    r->len = len;
    r->body = malloc(len ? len : 1);
    memcpy(r->body, b, len);
}

static void vdisk_free(vdisk_t *d) {
    for (size_t i = 0; i < d->count; i++)
        free(d->recs[i].body);
    for (size_t i = 0; i < d->pcount; i++)
        free(d->pending[i].body);
    free(d->recs);
    free(d->pending);
    free(d->snap.body);
    memset(d, 0, sizeof *d);
}

static uint64_t rid_of(uint32_t id, uint64_t inc) { return ((uint64_t)(id + 1) << 32) | inc; }

static void send_msg(world_t *w, uint32_t from, uint32_t to, const sl_store_msg_t *m) {
    uint8_t *buf = malloc(m->len + 1);
    buf[0] = m->type;
    memcpy(buf + 1, m->body, m->len);
    sl_sim_send(w->sim, from, to, buf, m->len + 1);
    free(buf);
}

/* Node `id`'s key in the round tables (what a daemon's address is). */
static uint32_t round_peer(sl_store_round_t *r, uint32_t id) {
    char key[16];
    uint32_t peer;
    snprintf(key, sizeof key, "n%u", id);
    CHECK_OK(sl_store_round_peer(r, key, strlen(key), true, &peer));
    return peer;
}

typedef struct {
    world_t *w;   /* the world */
    uint32_t self; /* the sender */
} up_ctx_t;

/* A node a DELTA may go to: up, not the sender (membership's alive). */
static bool up_other(void *ctx, size_t i) {
    const up_ctx_t *c = ctx;
    return i != c->self && c->w->nodes[i].store;
}

/* A DELTA leaves node `id` as the daemon sends it (src/store/store_spread.h):
 * its own write to every up node (4 others at most here), a received one
 * nowhere (relays start past 32 others). */
static void spread(world_t *w, uint32_t id, const sl_store_msg_t *m, sl_spread_origin origin) {
    up_ctx_t c = {w, id};
    size_t others = 0;
    for (uint32_t i = 0; i < NODES; i++)
        others += up_other(&c, i);
    uint32_t to[SL_SPREAD_MAX_TARGETS];
    size_t n = sl_store_spread_pick(sl_sim_rng(w->sim), NODES,
                                    sl_store_spread_fanout(others, origin, m->body, m->len),
                                    up_other, &c, to);
    for (size_t i = 0; i < n; i++)
        send_msg(w, id, to[i], m);
}

static const char *last_action = ""; /* for a failing check's report */
static int last_type;

/* Replay aid: SL_TRACE_DOT=RIDHEX:SEQ prints every change of that atom's
 * presence (and of the vv entry) on every node after every callback. */
static int trace_state[NODES];
static void trace(world_t *w, uint32_t id) {
    static uint64_t rid, seq;
    static int init;
    if (!init) {
        const char *t = getenv("SL_TRACE_DOT");
        init = 1;
        if (t)
            sscanf(t, "%llx:%llu", (unsigned long long *)&rid, (unsigned long long *)&seq);
    }
    if (!rid)
        return;
    for (uint32_t n = 0; n < NODES; n++) {
        int st = -1;
        if (w->nodes[n].store) {
            sl_store_msg_t m;
            sl_store_dmsg_t d;
            st = (int)(sl_store_vv_get(w->nodes[n].store, rid) >= seq) * 2;
            if (sl_store_snapshot(w->nodes[n].store, &m) == SL_OK) {
                if (sl_store_msg_decode(m.type, m.body, m.len, &d) == SL_OK) {
                    for (uint32_t i = 0; i < d.item_count; i++)
                        if (d.items[i].it.dot.rid == rid && d.items[i].it.dot.seq == seq)
                            st |= 1;
                    for (uint32_t i = 0; i < d.retired_count; i++)
                        if (d.retired[i].rid == rid)
                            st |= 4;
                    sl_store_dmsg_fini(&d);
                }
                sl_store_msg_fini(&m);
            } else {
                st |= 8;
            }
        }
        if (st != trace_state[n])
            fprintf(stderr, "TRACE %lld node %u: %d -> %d (after %s type %d on node %u)\n",
                    (long long)sl_sim_now(w->sim), n, trace_state[n], st, last_action, last_type, id);
        trace_state[n] = st;
    }
}

static void check_node(world_t *w, uint32_t id) {
    trace(w, id);
    if (w->nodes[id].store && sl_store_check(w->nodes[id].store) != SL_OK)
        sl_test_fail(__FILE__, __LINE__, "node %u broken after %s (type %d) at %lld ms", id,
                     last_action, last_type, (long long)sl_sim_now(w->sim));
}

/* ---- driver ops ---- */

static sl_err op_start(void *ctx, sl_sim_t *sim, uint32_t id, uint32_t restarts, int64_t now) {
    world_t *w = ctx;
    node_t *n = &w->nodes[id];
    (void)sim;
    uint64_t old = n->rid;
    if (!(w->bug == BUG_REUSE_RID && restarts > 0))
        n->disk.incarnation++;
    n->rid = rid_of(id, n->disk.incarnation);
    sl_store_config_t cfg = {.max_msg_len = 2048, .max_clock_offset_ms = 1000};
    sl_err err = sl_store_new(n->rid, &cfg, &n->store);
    if (err)
        return err;
    if (w->bug == BUG_DELTA_DROP)
        sl_store_set_bug(n->store, SL_STORE_BUG_DELTA_DROP);
    if (w->bug == BUG_NO_GC)
        sl_store_set_bug(n->store, SL_STORE_BUG_NO_GC);
    last_action = "restart";
    if (n->disk.snap.type && (err = sl_store_replay(n->store, n->disk.snap.type, n->disk.snap.body,
                                                    n->disk.snap.len)))
        return err;
    for (size_t i = 0; i < n->disk.count; i++)
        if ((err = sl_store_replay(n->store, n->disk.recs[i].type, n->disk.recs[i].body,
                                   n->disk.recs[i].len)))
            return err;
    if (restarts > 0)
        sl_store_request_reset(n->store); /* what it holds may be stale */
    /* membership: it joins every up member's view as a new incarnation,
       and they all join its own (SWIM's JOIN events: urgent) */
    sl_store_round_config_t rcfg = {.sync_ms = SYNC_MS, .idle_ms = IDLE_MS,
                                    .refresh_ms = REFRESH_MS};
    if ((err = sl_store_round_new(&rcfg, n->rid, &n->round)))
        return err;
    for (uint32_t i = 0; i < NODES; i++) {
        if (i == id || !w->nodes[i].store)
            continue;
        uint32_t p = round_peer(n->round, i);
        sl_store_round_set_up(n->round, p, true);
        sl_store_round_back(n->round, p);
        p = round_peer(w->nodes[i].round, id);
        sl_store_round_set_up(w->nodes[i].round, p, true);
        sl_store_round_back(w->nodes[i].round, p);
    }
    if (restarts > 0 && old != n->rid && w->retired_count < MAX_RIDS)
        w->retired[w->retired_count++] = old; /* membership: that incarnation is gone */
    n->retired_seen = 0;
    n->live_version = 0;
    n->next_tick = now + 1 + (int64_t)sl_rng_below(sl_sim_rng(w->sim), TICK_MS);
    n->next_gc = now + 1000;
    w->live_version++;
    check_node(w, id);
    return SL_OK;
}

static void op_stop(void *ctx, sl_sim_t *sim, uint32_t id) {
    world_t *w = ctx;
    node_t *n = &w->nodes[id];
    (void)sim;
    sl_store_destroy(&n->store);
    sl_store_round_destroy(&n->round);
    for (uint32_t i = 0; i < NODES; i++) /* membership: it is down */
        if (w->nodes[i].round)
            sl_store_round_set_up(w->nodes[i].round, round_peer(w->nodes[i].round, id), false);
    for (size_t i = 0; i < n->disk.pcount; i++)
        free(n->disk.pending[i].body);
    n->disk.pcount = 0; /* the unsynced tail is lost */
    for (size_t i = 0; i < n->unacked_count; i++)
        sl_store_msg_fini(&n->unacked[i]);
    n->unacked_count = 0;
    w->live_version++;
}

static sl_err op_deliver(void *ctx, sl_sim_t *sim, uint32_t id, uint32_t from, int64_t now,
                         const uint8_t *data, size_t len) {
    world_t *w = ctx;
    node_t *n = &w->nodes[id];
    (void)sim;
    if (!n->store || len < 1)
        return SL_OK;
    sl_store_out_t out;
    sl_store_out_init(&out);
    bool persist = false;
    last_action = "receive";
    last_type = data[0];
    sl_err err = sl_store_receive(n->store, data[0], data + 1, len - 1, (uint64_t)now, &out, &persist);
    if (err && err != SL_ERANGE) {
        sl_log(SL_LOG_ERR, "SIM-STORE", "node %u refused a message from %u: %s", id, from,
               sl_strerror(err));
        sl_store_out_fini(&out);
        return err;
    }
    if (persist)
        vrec_push(&n->disk.pending, &n->disk.pcount, &n->disk.pcap, data[0], data + 1, len - 1);
    /* what a DIGEST or SUMMARY tells of its sender, as the daemon learns it
       (a new replica id: the sender restarted, its old one is retired) */
    if (!err && (data[0] == SL_STORE_MSG_DIGEST || data[0] == SL_STORE_MSG_SUMMARY) && out.from) {
        uint64_t old;
        sl_store_round_heard(n->round, round_peer(n->round, from), out.from, out.peer_fp, &old);
        if (old && old != out.from)
            CHECK_OK(sl_store_retire(n->store, old));
    }
    for (size_t i = 0; i < out.count; i++)
        send_msg(w, id, from, &out.msgs[i]);
    sl_store_out_fini(&out);
    if (persist && data[0] == SL_STORE_MSG_DELTA)
        spread(w, id, &(sl_store_msg_t){.type = data[0], .body = (uint8_t *)data + 1, .len = len - 1},
               SL_SPREAD_RELAY);
    check_node(w, id);
    return SL_OK;
}

/* Records the dots a local delta issues (S4) and what it acknowledges. */
static void note_issued(world_t *w, const sl_store_msg_t *m) {
    sl_store_dmsg_t d;
    CHECK_OK(sl_store_msg_decode(m->type, m->body, m->len, &d));
    for (uint32_t i = 0; i < d.item_count; i++) {
        sl_dot_t dot = d.items[i].it.dot;
        uint32_t k = 0;
        while (k < w->issued_count && w->issued_rid[k] != dot.rid)
            k++;
        if (k == w->issued_count && k < MAX_RIDS) {
            w->issued_rid[k] = dot.rid;
            w->issued_seq[k] = 0;
            w->issued_count++;
        }
        if (dot.seq <= w->issued_seq[k]) {
            if (!w->s4_broken && w->bug == BUG_NONE)
                sl_test_fail(__FILE__, __LINE__, "S4: dot %016llx:%llu issued twice",
                             (unsigned long long)dot.rid, (unsigned long long)dot.seq);
            w->s4_broken = true;
        }
        w->issued_seq[k] = dot.seq;
        const sl_crdt_item_t *it = &d.items[i].it;
        const char *tk = getenv("SL_TRACE_KEY");
        if (tk && strlen(tk) == d.items[i].key_len && memcmp(tk, d.items[i].key, d.items[i].key_len) == 0) {
            fprintf(stderr, "TRACE %lld op kind %d flags %d dot %llx:%llu a=%.*s ctx:",
                    (long long)sl_sim_now(w->sim), it->kind, it->flags,
                    (unsigned long long)dot.rid, (unsigned long long)dot.seq, (int)it->a_len,
                    it->a ? (const char *)it->a : "");
            for (uint32_t c = 0; c < it->ctx_count; c++)
                fprintf(stderr, " %llx:%llu", (unsigned long long)it->ctx[c].rid,
                        (unsigned long long)it->ctx[c].seq);
            fprintf(stderr, "\n");
        }
        if (it->kind == SL_ITEM_LWW && (it->flags & SL_ITEM_DELETED)) {
            int key = atoi((const char *)d.items[i].key + 2);
            if (sl_crdt_lww_cmp(it->hlc, it->dot, w->tomb_hlc[key], w->tomb_dot[key]) > 0) {
                w->tomb_hlc[key] = it->hlc;
                w->tomb_dot[key] = it->dot;
            }
        }
        if (it->kind == SL_ITEM_DEAD) {
            if (w->remove_count == w->remove_cap) {
                w->remove_cap = w->remove_cap ? w->remove_cap * 2 : 64;
                w->removes = realloc(w->removes, w->remove_cap * sizeof *w->removes);
            }
            sl_store_msg_t *c = &w->removes[w->remove_count++];
            c->type = m->type;
            c->len = m->len;
            c->body = sl_malloc(m->len);
            memcpy(c->body, m->body, m->len);
        }
    }
    sl_store_dmsg_fini(&d);
}

static void acknowledge(world_t *w, const sl_store_msg_t *m) {
    sl_store_dmsg_t d;
    CHECK_OK(sl_store_msg_decode(m->type, m->body, m->len, &d));
    const sl_store_item_t *item = &d.items[0];
    const sl_crdt_item_t *it = &item->it;
    if (it->kind == SL_ITEM_LWW && !(it->flags & SL_ITEM_DELETED) && w->ack_count < MAX_ACK) {
        ack_t *a = &w->acks[w->ack_count++];
        snprintf(a->key, sizeof a->key, "%.*s", (int)item->key_len, (const char *)item->key);
        memcpy(a->val, it->a, it->a_len);
        a->len = it->a_len;
        a->hlc = it->hlc;
        a->dot = it->dot;
    } else if (it->kind == SL_ITEM_ADD && w->set_ack_count < MAX_ACK) {
        set_ack_t *a = &w->set_acks[w->set_ack_count++];
        snprintf(a->key, sizeof a->key, "%.*s", (int)item->key_len, (const char *)item->key);
        snprintf(a->elem, sizeof a->elem, "%.*s", (int)it->a_len, (const char *)it->a);
        a->dot = it->dot;
    }
    sl_store_dmsg_fini(&d);
}

static void random_op(world_t *w, uint32_t id, int64_t now) {
    node_t *n = &w->nodes[id];
    sl_rng_t *r = sl_sim_rng(w->sim);
    char key[16], val[16], elem[8];
    int k = (int)sl_rng_below(r, KEYS);
    snprintf(elem, sizeof elem, "e%d", (int)sl_rng_below(r, 4));
    snprintf(val, sizeof val, "v%u.%lld", id, (long long)w->ops);
    sl_store_msg_t m = {0};
    sl_err err;
    uint64_t t = (uint64_t)now;
    switch (sl_rng_below(r, 8)) {
    case 0:
    case 1:
    case 2:
        snprintf(key, sizeof key, "r/%d", k);
        err = sl_store_put(n->store, key, strlen(key), val, strlen(val), t, &m);
        break;
    case 3:
        snprintf(key, sizeof key, "r/%d", k);
        err = sl_store_del(n->store, key, strlen(key), t, &m);
        break;
    case 4:
        snprintf(key, sizeof key, "s/%d", k);
        err = sl_store_set_add(n->store, key, strlen(key), elem, strlen(elem), t, &m);
        break;
    case 5:
        snprintf(key, sizeof key, "s/%d", k);
        err = sl_rng_below(r, 4) ? sl_store_set_remove(n->store, key, strlen(key), elem, strlen(elem), t, &m)
                                 : sl_store_del(n->store, key, strlen(key), t, &m);
        break;
    case 6:
        snprintf(key, sizeof key, "c/%d", k);
        err = sl_rng_below(r, 8) ? sl_store_counter_add(n->store, key, strlen(key),
                                                        (int64_t)sl_rng_below(r, 7) - 3, t, &m)
                                 : sl_store_del(n->store, key, strlen(key), t, &m);
        break;
    default:
        snprintf(key, sizeof key, "m/%d", k);
        snprintf(elem, sizeof elem, "ep%d", (int)sl_rng_below(r, 5));
        err = sl_rng_below(r, 10) ? sl_store_gmap_put(n->store, key, strlen(key), elem, strlen(elem),
                                                      val, strlen(val), t, &m)
                                  : sl_store_del(n->store, key, strlen(key), t, &m);
        break;
    }
    if (err == SL_ENOTFOUND)
        return;
    CHECK_OK(err);
    if (err)
        return;
    w->ops++;
    note_issued(w, &m);
    vrec_push(&n->disk.pending, &n->disk.pcount, &n->disk.pcap, m.type, m.body, m.len);
    if (w->bug == BUG_ACK_EARLY)
        acknowledge(w, &m);
    if (n->unacked_count == n->unacked_cap) {
        n->unacked_cap = n->unacked_cap ? n->unacked_cap * 2 : 16;
        n->unacked = realloc(n->unacked, n->unacked_cap * sizeof *n->unacked);
    }
    n->unacked[n->unacked_count++] = m;
}

/* Group commit: the pending records become durable; their writes are
 * acknowledged and pushed as the daemon pushes them (spread). */
static void sync_disk(world_t *w, uint32_t id) {
    node_t *n = &w->nodes[id];
    for (size_t i = 0; i < n->disk.pcount; i++) {
        vrec_t *p = &n->disk.pending[i];
        vrec_push(&n->disk.recs, &n->disk.count, &n->disk.cap, p->type, p->body, p->len);
        free(p->body);
    }
    n->disk.pcount = 0;
    sl_store_mark_durable(n->store);
    for (size_t i = 0; i < n->unacked_count; i++) {
        if (w->bug != BUG_ACK_EARLY)
            acknowledge(w, &n->unacked[i]);
        spread(w, id, &n->unacked[i], SL_SPREAD_LOCAL);
        sl_store_msg_fini(&n->unacked[i]);
    }
    n->unacked_count = 0;
    /* snapshot now and then: the log restarts */
    sl_store_msg_t s;
    if (n->disk.count > 400 && sl_store_snapshot(n->store, &s) == SL_OK) {
        for (size_t i = 0; i < n->disk.count; i++)
            free(n->disk.recs[i].body);
        n->disk.count = 0;
        free(n->disk.snap.body);
        n->disk.snap = (vrec_t){s.type, malloc(s.len), s.len};
        memcpy(n->disk.snap.body, s.body, s.len);
        sl_store_msg_fini(&s);
    }
}

/* An anti-entropy round when the core says one is due: its pick gets our
 * DIGEST or SUMMARY, as store_node.c's round_run sends it. */
static void round_tick(world_t *w, uint32_t id, int64_t now) {
    node_t *n = &w->nodes[id];
    uint64_t now_ns = (uint64_t)now * 1000000ull;
    if (now_ns < sl_store_round_due_ns(n->round))
        return;
    sl_store_round_pick_t pick;
    sl_store_round_run(n->round, now_ns, sl_store_fingerprint(n->store), &pick);
    CHECK_OK(sl_store_round_check(n->round));
    if (pick.kind == SL_STORE_ROUND_QUIET)
        return;
    uint32_t to = (uint32_t)atoi(sl_store_round_peer_key(n->round, pick.peer) + 1);
    sl_store_msg_t m;
    CHECK_OK(pick.kind == SL_STORE_ROUND_DIGEST ? sl_store_digest(n->store, false, &m)
                                                : sl_store_summary(n->store, false, &m));
    send_msg(w, id, to, &m);
    sl_store_msg_fini(&m);
    sl_store_round_sent(n->round, &pick);
}

static sl_err op_tick(void *ctx, sl_sim_t *sim, uint32_t id, int64_t now) {
    world_t *w = ctx;
    node_t *n = &w->nodes[id];
    if (!n->store)
        return SL_OK;
    last_action = "round";
    round_tick(w, id, now);
    if (now < n->next_tick)
        return SL_OK;
    n->next_tick = now + TICK_MS;
    last_action = "tick";
    sync_disk(w, id);
    /* membership: live peers and retired incarnations */
    if (n->live_version != w->live_version) {
        uint64_t live[NODES];
        size_t c = 0;
        /* membership's member list: every node's current incarnation,
         * up or crashed (a crashed member stays until it comes back) */
        for (uint32_t i = 0; i < NODES; i++)
            if (i != id && w->nodes[i].rid)
                live[c++] = w->nodes[i].rid;
        CHECK_OK(sl_store_set_live(n->store, live, c));
        n->live_version = w->live_version;
    }
    for (; n->retired_seen < w->retired_count; n->retired_seen++)
        if (w->retired[n->retired_seen] != n->rid)
            CHECK_OK(sl_store_retire(n->store, w->retired[n->retired_seen]));
    if (w->writes && sl_rng_below(sl_sim_rng(sim), 3) == 0)
        random_op(w, id, now);
    if (now >= n->next_gc) {
        sl_store_gc(n->store);
        n->next_gc = now + 500;
    }
    check_node(w, id);
    return SL_OK;
}

static int64_t op_next(void *ctx, sl_sim_t *sim, uint32_t id) {
    world_t *w = ctx;
    (void)sim;
    const node_t *n = &w->nodes[id];
    if (!n->store)
        return INT64_MAX;
    int64_t round = (int64_t)((sl_store_round_due_ns(n->round) + 999999) / 1000000);
    return round < n->next_tick ? round : n->next_tick;
}

static const sl_sim_ops_t ops = {
    .start = op_start, .stop = op_stop, .deliver = op_deliver, .tick = op_tick, .next_deadline = op_next,
};

/* ---- checkers ---- */

static bool covered_by_removal(world_t *w, const set_ack_t *a) {
    for (size_t i = 0; i < w->remove_count; i++) {
        sl_store_dmsg_t d;
        if (sl_store_msg_decode(w->removes[i].type, w->removes[i].body, w->removes[i].len, &d))
            continue;
        bool hit = false;
        const sl_store_item_t *item = &d.items[0];
        const sl_crdt_item_t *it = &item->it;
        if (item->key_len == strlen(a->key) && memcmp(item->key, a->key, item->key_len) == 0 &&
            ((it->flags & SL_ITEM_ALL) ||
             (it->a_len == strlen(a->elem) && memcmp(it->a, a->elem, it->a_len) == 0)))
            for (uint32_t k = 0; k < it->ctx_count; k++)
                if (it->ctx[k].rid == a->dot.rid && it->ctx[k].seq >= a->dot.seq)
                    hit = true;
        sl_store_dmsg_fini(&d);
        if (hit)
            return true;
    }
    return false;
}

/* S3 on one replica. */
static int check_s3(world_t *w, sl_store_t *s) {
    int broken = 0;
    for (size_t i = 0; i < w->ack_count; i++) {
        const ack_t *a = &w->acks[i];
        sl_store_entry_t e;
        int key = atoi(a->key + 2);
        if (sl_store_lookup(s, a->key, strlen(a->key), &e) != SL_OK) {
            if (sl_crdt_lww_cmp(w->tomb_hlc[key], w->tomb_dot[key], a->hlc, a->dot) <= 0) {
                broken++;
                if (getenv("SL_SEED"))
                    fprintf(stderr, "S3 lost (absent): %s %llx:%llu\n", a->key,
                            (unsigned long long)a->dot.rid, (unsigned long long)a->dot.seq);
            }
            continue;
        }
        int c = sl_crdt_lww_cmp(e.hlc, e.dot, a->hlc, a->dot);
        if (c < 0 || (c == 0 && (e.val_len != a->len || memcmp(e.val, a->val, a->len) != 0))) {
            broken++;
            if (getenv("SL_SEED"))
                fprintf(stderr, "S3 lost: %s %llx:%llu\n", a->key, (unsigned long long)a->dot.rid,
                        (unsigned long long)a->dot.seq);
        }
    }
    for (size_t i = 0; i < w->set_ack_count; i++) {
        const set_ack_t *a = &w->set_acks[i];
        sl_store_entry_t e;
        bool present = sl_store_lookup(s, a->key, strlen(a->key), &e) == SL_OK &&
                       e.type == SL_CRDT_SET &&
                       sl_crdt_set_contains(e.crdt, (const uint8_t *)a->elem, (uint32_t)strlen(a->elem));
        if (!present && !covered_by_removal(w, a)) {
            broken++;
            if (getenv("SL_SEED"))
                fprintf(stderr, "S3 lost: %s %s %llx:%llu\n", a->key, a->elem,
                        (unsigned long long)a->dot.rid, (unsigned long long)a->dot.seq);
        }
    }
    return broken;
}

/* S5 on one replica: no tombstone or DEAD atom, only current incarnations. */
static int check_s5(world_t *w, sl_store_t *s) {
    sl_store_msg_t m;
    int broken = 0;
    CHECK_OK(sl_store_snapshot(s, &m));
    sl_store_dmsg_t d;
    CHECK_OK(sl_store_msg_decode(m.type, m.body, m.len, &d));
    for (uint32_t i = 0; i < d.item_count; i++)
        if (d.items[i].it.kind == SL_ITEM_DEAD || (d.items[i].it.flags & SL_ITEM_DELETED))
            broken++;
    for (uint32_t i = 0; i < d.range_count; i++) {
        bool current = false;
        for (uint32_t n = 0; n < NODES; n++)
            current |= w->nodes[n].rid == d.ranges[i].rid;
        if (!current)
            broken++;
    }
    sl_store_dmsg_fini(&d);
    sl_store_msg_fini(&m);
    return broken;
}

typedef struct {
    int s2, s3, s4, s5; /* violations found */
} result_t;

/* Replay aid (SL_SEED set): one line per atom of every replica. */
static void dump(world_t *w) {
    for (uint32_t n = 0; n < NODES; n++) {
        sl_store_msg_t m;
        sl_store_dmsg_t d;
        if (sl_store_snapshot(w->nodes[n].store, &m) != SL_OK)
            continue;
        if (sl_store_msg_decode(m.type, m.body, m.len, &d) == SL_OK) {
            fprintf(stderr, "node %u rid %llx hash %016llx vv:", n,
                    (unsigned long long)w->nodes[n].rid,
                    (unsigned long long)sl_store_state_hash(w->nodes[n].store));
            for (uint32_t i = 0; i < d.range_count; i++)
                fprintf(stderr, " %llx=%llu", (unsigned long long)d.ranges[i].rid,
                        (unsigned long long)d.ranges[i].to);
            fprintf(stderr, " retired:");
            for (uint32_t i = 0; i < d.retired_count; i++)
                fprintf(stderr, " %llx=%llu", (unsigned long long)d.retired[i].rid,
                        (unsigned long long)d.retired[i].to);
            fprintf(stderr, "\n");
            for (uint32_t i = 0; i < d.item_count; i++) {
                const sl_crdt_item_t *it = &d.items[i].it;
                fprintf(stderr, "  %u %.*s k%d f%d %llx:%llu hlc %llu p%llu n%llu a=%.*s\n", n,
                        (int)d.items[i].key_len, (const char *)d.items[i].key, it->kind, it->flags,
                        (unsigned long long)it->dot.rid, (unsigned long long)it->dot.seq,
                        (unsigned long long)it->hlc, (unsigned long long)it->p,
                        (unsigned long long)it->n, (int)it->a_len, it->a ? (const char *)it->a : "");
            }
            sl_store_dmsg_fini(&d);
        }
        sl_store_msg_fini(&m);
    }
}

/* The network whole again; membership makes every member urgent (a long
 * partition is seen by SWIM as deaths, then returns). */
static void heal(world_t *w) {
    sl_sim_partition(w->sim, NULL);
    for (uint32_t i = 0; i < NODES; i++)
        if (w->nodes[i].round)
            sl_store_round_heal(w->nodes[i].round);
}

static result_t run_seed(uint64_t seed, bug_t bug, int64_t chaos_ms) {
    world_t *w = calloc(1, sizeof *w);
    w->acks = calloc(MAX_ACK, sizeof *w->acks);
    w->set_acks = calloc(MAX_ACK, sizeof *w->set_acks);
    w->bug = bug;
    w->writes = true;
    sl_sim_config_t cfg = {.nodes = NODES, .seed = seed, .ops = &ops, .ctx = w,
                           .net = {.loss = 0.05, .duplicate = 0.05, .delay_min_ms = 1, .delay_max_ms = 40}};
    result_t res = {0};
    CHECK_OK(sl_sim_new(&cfg, &w->sim));
    for (uint32_t i = 0; i < NODES; i++)
        CHECK_OK(sl_sim_start(w->sim, i));
    sl_rng_t *r = sl_sim_rng(w->sim);
    int64_t t = 0;
    sl_err err = SL_OK;
    while (!err && t < chaos_ms) {
        t += 250;
        err = sl_sim_run_until(w->sim, t);
        uint64_t f = sl_rng_below(r, 20);
        uint32_t id = (uint32_t)sl_rng_below(r, NODES);
        uint32_t up = 0;
        for (uint32_t i = 0; i < NODES; i++)
            up += w->nodes[i].store != NULL;
        if (f < 2 && w->nodes[id].store && up > 2) {
            sl_sim_crash(w->sim, id);
        } else if (f < 5 && !w->nodes[id].store) {
            CHECK_OK(sl_sim_start(w->sim, id));
        } else if (f == 5) {
            uint32_t g[NODES];
            for (uint32_t i = 0; i < NODES; i++)
                g[i] = (uint32_t)sl_rng_below(r, 2);
            sl_sim_partition(w->sim, g);
        } else if (f == 6) {
            heal(w);
        } else if (f == 7) {
            sl_sim_net_t net = {.loss = sl_rng_double(r) * 0.3, .duplicate = sl_rng_double(r) * 0.2,
                                .delay_min_ms = 1, .delay_max_ms = 1 + (uint32_t)sl_rng_below(r, 200)};
            sl_sim_set_net(w->sim, &net);
        }
    }
    /* quiet: everyone up, network whole, no new writes */
    w->writes = false;
    heal(w);
    sl_sim_net_t calm = {.loss = 0, .duplicate = 0, .delay_min_ms = 1, .delay_max_ms = 5};
    sl_sim_set_net(w->sim, &calm);
    for (uint32_t i = 0; i < NODES; i++)
        if (!w->nodes[i].store)
            CHECK_OK(sl_sim_start(w->sim, i));
    if (!err)
        err = sl_sim_run_until(w->sim, t + 15000);
    CHECK_OK(err);
    /* S2 */
    uint64_t h0 = sl_store_state_hash(w->nodes[0].store);
    for (uint32_t i = 1; i < NODES; i++) {
        if (sl_store_state_hash(w->nodes[i].store) != h0)
            res.s2++;
        for (uint32_t j = 0; j < NODES; j++) {
            uint64_t rid = w->nodes[j].rid;
            if (sl_store_vv_get(w->nodes[i].store, rid) != sl_store_vv_get(w->nodes[0].store, rid))
                res.s2++;
        }
    }
    for (uint32_t i = 0; i < NODES; i++) {
        res.s3 += check_s3(w, w->nodes[i].store);
        res.s5 += check_s5(w, w->nodes[i].store);
    }
    res.s4 = w->s4_broken;
    if (getenv("SL_SEED") && (res.s2 || res.s3 || res.s5))
        dump(w);
    for (uint32_t i = 0; i < NODES; i++) {
        sl_store_destroy(&w->nodes[i].store);
        sl_store_round_destroy(&w->nodes[i].round);
        vdisk_free(&w->nodes[i].disk);
        for (size_t k = 0; k < w->nodes[i].unacked_count; k++)
            sl_store_msg_fini(&w->nodes[i].unacked[k]);
        free(w->nodes[i].unacked);
    }
    for (size_t i = 0; i < w->remove_count; i++)
        sl_free(w->removes[i].body);
    free(w->removes);
    sl_sim_destroy(&w->sim);
    free(w->acks);
    free(w->set_acks);
    free(w);
    return res;
}

/* Virtual milliseconds of faults per seed ($SL_CHAOS_MS, else 12000). */
static int64_t chaos_ms(void) {
    const char *e = getenv("SL_CHAOS_MS");
    return e ? atoll(e) : 12000;
}

static void test_seeds(void) {
    const char *one = getenv("SL_SEED");
    int first = one ? atoi(one) : 1;
    int count = one ? 1 : sl_test_seed_count(200);
    int failed = 0;
    for (int seed = first; seed < first + count; seed++) {
        result_t r = run_seed((uint64_t)seed, BUG_NONE, chaos_ms());
        if (r.s2 || r.s3 || r.s4 || r.s5) {
            failed++;
            sl_test_fail(__FILE__, __LINE__,
                         "seed %d: S2 %d, S3 %d, S4 %d, S5 %d violations (replay: SL_SEED=%d)",
                         seed, r.s2, r.s3, r.s4, r.s5, seed);
            if (failed >= 3)
                break;
        }
    }
}

/* Each checker catches its planted bug on at least one of a few seeds. */
static void test_planted_bugs(void) {
    sl_log_set_level(0); /* the planted bugs make the store log errors */
    struct {
        bug_t bug;
        const char *name;
    } bugs[] = {{BUG_DELTA_DROP, "S2"}, {BUG_ACK_EARLY, "S3"}, {BUG_REUSE_RID, "S4"}, {BUG_NO_GC, "S5"}};
    for (size_t b = 0; b < sizeof bugs / sizeof bugs[0]; b++) {
        bool fired = false;
        int saved = sl_test_failures;
        /* S3 and S4 need a crash that loses a write not synced yet
           (seeds 14 and 21 with the round core's choices) */
        for (uint64_t seed = 1; seed <= 40 && !fired; seed++) {
            result_t r = run_seed(seed, bugs[b].bug, 6000);
            int v = bugs[b].bug == BUG_DELTA_DROP ? r.s2
                    : bugs[b].bug == BUG_ACK_EARLY ? r.s3
                    : bugs[b].bug == BUG_REUSE_RID ? r.s4 : r.s5;
            fired = v > 0;
        }
        sl_test_failures = saved; /* failures the bug causes elsewhere are expected */
        CHECK_MSG(fired, "%s checker did not catch its planted bug", bugs[b].name);
    }
    sl_log_set_level(SL_LOG_ERR);
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR);
    sl_test_run("seeds", test_seeds);
    if (!getenv("SL_SEED"))
        sl_test_run("planted_bugs", test_planted_bugs);
    return sl_test_finish();
}
