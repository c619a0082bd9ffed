/* The store on the simulator (sim/sim_store.h): the real store core,
 * spread policy and anti-entropy round core of every node on an sl_sim.
 * A message on the wire is its store type byte, then its body. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_store.h"
#include "store/store_spread.h"

#define PUSH_MAX_LEN (256u << 10) /* a joined push, at most (store_spread.h) */

typedef struct {
    sl_store_t *store;       /* the replica (kept across a crash: the daemon's is on disk) */
    sl_store_round_t *round; /* its anti-entropy round (NULL while down) */
    int64_t first_round;     /* no round before (nodes start apart) */
    sl_store_msg_t *queue;   /* local writes not pushed yet */
    size_t queued;           /* used */
    size_t queue_cap;        /* allocated */
    sl_simstore_counts_t counts;
} snode_t;

struct sl_simstore {
    sl_simstore_config_t cfg;
    sl_sim_t *sim;
    snode_t *nodes;
};

static sl_err send_msg(sl_simstore_t *c, uint32_t from, uint32_t to, uint8_t type,
                       const uint8_t *body, size_t len) {
    uint8_t *buf = sl_malloc(len + 1);
    if (!buf)
        return SL_ENOMEM;
    buf[0] = type;
    memcpy(buf + 1, body, len);
    sl_sim_send(c->sim, from, to, buf, len + 1);
    sl_free(buf);
    return SL_OK;
}

typedef struct {
    sl_simstore_t *c;
    uint32_t self;
} pick_ctx_t;

static bool is_member(sl_simstore_t *c, uint32_t self, uint32_t other) {
    return other != self &&
           (!c->cfg.hooks.member || c->cfg.hooks.member(c->cfg.hooks.ctx, self, other));
}

static bool may_receive(void *ctx, size_t i) {
    const pick_ctx_t *p = ctx;
    return is_member(p->c, p->self, (uint32_t)i);
}

/* Other members, counted up to one past SL_SPREAD_PUSH_ALL: the fan-out
 * is the same for any number past it (store_spread.h). */
static size_t others(sl_simstore_t *c, uint32_t self) {
    size_t n = 0;
    for (uint32_t i = 0; i < c->cfg.nodes && n <= SL_SPREAD_PUSH_ALL; i++)
        n += is_member(c, self, i);
    return n;
}

/* The real policy: how many, and which (store_node.c's spread). */
static sl_err spread(sl_simstore_t *c, uint32_t id, uint8_t type, const uint8_t *body,
                     size_t len, sl_spread_origin origin) {
    uint32_t to[SL_SPREAD_MAX_TARGETS];
    pick_ctx_t p = {c, id};
    size_t k = sl_store_spread_fanout(others(c, id), origin, body, len);
    size_t got = sl_store_spread_pick(sl_sim_rng(c->sim), c->cfg.nodes, k, may_receive, &p, to);
    sl_err err = SL_OK;
    for (size_t i = 0; i < got && !err; i++)
        err = send_msg(c, id, to[i], type, body, len);
    if (origin == SL_SPREAD_RELAY)
        c->nodes[id].counts.relayed += got;
    else
        c->nodes[id].counts.pushed += got;
    return err;
}

/* Node `id`'s key in the round tables (what a daemon's address is). */
static size_t node_key(char *key, size_t cap, uint32_t id) {
    return (size_t)snprintf(key, cap, "n%u", id);
}

static sl_err round_peer(snode_t *n, uint32_t other, bool create, uint32_t *peer) {
    char key[16];
    return sl_store_round_peer(n->round, key, node_key(key, sizeof key, other), create, peer);
}

static void drop_queue(snode_t *n) {
    for (size_t i = 0; i < n->queued; i++)
        sl_store_msg_fini(&n->queue[i]);
    n->queued = 0;
}

static sl_err op_start(void *ctx, sl_sim_t *sim, uint32_t id, uint32_t restarts, int64_t now) {
    sl_simstore_t *c = ctx;
    snode_t *n = &c->nodes[id];
    uint64_t rid = (uint64_t)id + 1;
    sl_store_config_t cfg = {0};
    sl_err err = n->store ? SL_OK : sl_store_new(rid, &cfg, &n->store);
    sl_store_round_config_t rcfg = c->cfg.round;
    if (!rcfg.max_peers)
        rcfg.max_peers = c->cfg.nodes;
    if (!err)
        err = sl_store_round_new(&rcfg, rid + ((uint64_t)restarts << 32), &n->round);
    /* every other node a peer of the round: up as membership says, urgent
       after a restart (SWIM's joins) */
    for (uint32_t i = 0; !err && i < c->cfg.nodes; i++) {
        uint32_t peer;
        if (i == id || (err = round_peer(n, i, true, &peer)))
            continue;
        bool up = is_member(c, id, i);
        sl_store_round_set_up(n->round, peer, up);
        if (restarts && up)
            sl_store_round_back(n->round, peer);
    }
    n->first_round = now + 1 + (int64_t)sl_rng_below(sl_sim_rng(sim), rcfg.sync_ms ? rcfg.sync_ms : 100);
    /* the others hear it came back */
    for (uint32_t i = 0; !err && restarts && i < c->cfg.nodes; i++)
        if (i != id)
            sl_simstore_back(c, i, id);
    return err;
}

static void op_stop(void *ctx, sl_sim_t *sim, uint32_t id) {
    sl_simstore_t *c = ctx;
    (void)sim;
    sl_store_round_destroy(&c->nodes[id].round);
    drop_queue(&c->nodes[id]);
}

/* A message arrives: the store takes it, what it changed is told, its
 * answers go back, and a DELTA that brought something new goes on (with
 * the deltas it let out of hold), as in store_node.c's on_msg. */
static sl_err receive(sl_simstore_t *c, uint32_t id, uint32_t from, uint8_t type,
                      const uint8_t *body, size_t len) {
    snode_t *n = &c->nodes[id];
    sl_store_out_t out;
    sl_store_out_init(&out);
    out.list_changed = c->cfg.list_changed;
    bool persist = false;
    sl_err err = sl_store_receive(n->store, type, body, len, sl_simstore_clock(c), &out, &persist);
    if (err) {
        sl_log(SL_LOG_ERR, "SIM-STORE", "n%u refused a message of type %u from n%u: %s", id,
               type, from, sl_strerror(err));
        sl_store_out_fini(&out);
        return err;
    }
    /* what a DIGEST or SUMMARY tells of its sender, as the daemon learns it */
    if ((type == SL_STORE_MSG_DIGEST || type == SL_STORE_MSG_SUMMARY) && out.from) {
        uint32_t peer;
        uint64_t old;
        if (round_peer(n, from, false, &peer) == SL_OK)
            sl_store_round_heard(n->round, peer, out.from, out.peer_fp, &old);
    }
    if (persist && c->cfg.hooks.changed)
        c->cfg.hooks.changed(c->cfg.hooks.ctx, id, &out);
    for (size_t i = 0; !err && i < out.count; i++) {
        err = send_msg(c, id, from, out.msgs[i].type, out.msgs[i].body, out.msgs[i].len);
        n->counts.ae_sent++;
    }
    sl_store_out_fini(&out);
    if (err || !persist)
        return err;
    if (type == SL_STORE_MSG_DELTA)
        err = spread(c, id, type, body, len, SL_SPREAD_RELAY);
    sl_store_msg_t ready;
    while (!err && sl_store_take_ready(n->store, &ready) == SL_OK) {
        err = receive(c, id, from, ready.type, ready.body, ready.len);
        sl_store_msg_fini(&ready);
    }
    return err;
}

static sl_err op_deliver(void *ctx, sl_sim_t *sim, uint32_t id, uint32_t from, int64_t now,
                         const uint8_t *data, size_t len) {
    sl_simstore_t *c = ctx;
    (void)sim;
    (void)now;
    if (!c->nodes[id].round || len < 1)
        return SL_OK;
    return receive(c, id, from, data[0], data + 1, len - 1);
}

/* Anti-entropy: the round core picks, as in store_node.c's round_run. */
static sl_err op_tick(void *ctx, sl_sim_t *sim, uint32_t id, int64_t now) {
    sl_simstore_t *c = ctx;
    snode_t *n = &c->nodes[id];
    (void)sim;
    uint64_t now_ns = (uint64_t)now * 1000000ull;
    if (!n->round || now < n->first_round || now_ns < sl_store_round_due_ns(n->round))
        return SL_OK;
    bool ae = !c->cfg.no_anti_entropy;
    sl_store_round_pick_t pick;
    sl_store_round_run(n->round, now_ns, ae ? sl_store_fingerprint(n->store) : 0, &pick);
    if (!ae || pick.kind == SL_STORE_ROUND_QUIET)
        return SL_OK;
    const char *key = sl_store_round_peer_key(n->round, pick.peer);
    uint32_t to = (uint32_t)strtoul(key + 1, NULL, 10);
    sl_store_msg_t m;
    sl_err err = pick.kind == SL_STORE_ROUND_DIGEST ? sl_store_digest(n->store, false, &m)
                                                    : sl_store_summary(n->store, false, &m);
    if (err)
        return err;
    err = send_msg(c, id, to, m.type, m.body, m.len);
    n->counts.ae_sent++;
    sl_store_round_sent(n->round, &pick);
    sl_store_msg_fini(&m);
    return err;
}

static int64_t op_next(void *ctx, sl_sim_t *sim, uint32_t id) {
    sl_simstore_t *c = ctx;
    (void)sim;
    const snode_t *n = &c->nodes[id];
    if (!n->round)
        return INT64_MAX;
    int64_t due = (int64_t)((sl_store_round_due_ns(n->round) + 999999) / 1000000);
    return due > n->first_round ? due : n->first_round;
}

static const sl_sim_ops_t ops = {
    .start = op_start, .stop = op_stop, .deliver = op_deliver, .tick = op_tick,
    .next_deadline = op_next,
};

sl_err sl_simstore_new(const sl_simstore_config_t *cfg, sl_simstore_t **out) {
    *out = NULL;
    if (!cfg->nodes)
        return SL_EINVAL;
    sl_simstore_t *c = sl_calloc(1, sizeof *c);
    if (!c)
        return SL_ENOMEM;
    c->cfg = *cfg;
    c->nodes = sl_calloc(cfg->nodes, sizeof *c->nodes);
    sl_sim_config_t sc = {.nodes = cfg->nodes, .seed = cfg->seed, .net = cfg->net, .ops = &ops,
                          .ctx = c};
    sl_err err = c->nodes ? sl_sim_new(&sc, &c->sim) : SL_ENOMEM;
    for (uint32_t i = 0; !err && i < cfg->nodes; i++)
        err = sl_sim_start(c->sim, i);
    if (err) {
        sl_simstore_destroy(&c);
        return err;
    }
    *out = c;
    return SL_OK;
}

void sl_simstore_destroy(sl_simstore_t **cp) {
    sl_simstore_t *c = *cp;
    if (!c)
        return;
    sl_sim_destroy(&c->sim);
    for (uint32_t i = 0; c->nodes && i < c->cfg.nodes; i++) {
        snode_t *n = &c->nodes[i];
        sl_store_destroy(&n->store);
        sl_store_round_destroy(&n->round);
        drop_queue(n);
        sl_free(n->queue);
    }
    sl_free(c->nodes);
    sl_free(c);
    *cp = NULL;
}

sl_sim_t *sl_simstore_sim(sl_simstore_t *c) { return c->sim; }

sl_store_t *sl_simstore_store(sl_simstore_t *c, uint32_t id) { return c->nodes[id].store; }

uint64_t sl_simstore_clock(const sl_simstore_t *c) {
    return (uint64_t)(c->cfg.clock_ms + sl_sim_now(c->sim));
}

sl_err sl_simstore_run_until(sl_simstore_t *c, int64_t until_ms) {
    return sl_sim_run_until(c->sim, until_ms);
}

sl_err sl_simstore_wrote(sl_simstore_t *c, uint32_t id, sl_store_msg_t *d) {
    snode_t *n = &c->nodes[id];
    if (!n->round) { /* (down: nothing goes out) */
        sl_store_msg_fini(d);
        return SL_OK;
    }
    if (n->queued == n->queue_cap) {
        size_t cap = n->queue_cap ? 2 * n->queue_cap : 16;
        sl_store_msg_t *q = sl_realloc(n->queue, cap * sizeof *q);
        if (!q) {
            sl_store_msg_fini(d);
            return SL_ENOMEM;
        }
        n->queue = q;
        n->queue_cap = cap;
    }
    n->queue[n->queued++] = *d;
    *d = (sl_store_msg_t){0};
    return SL_OK;
}

sl_err sl_simstore_push(sl_simstore_t *c, uint32_t id) {
    snode_t *n = &c->nodes[id];
    sl_err err = SL_OK;
    /* runs of writes joined into one DELTA each, as long as they fit */
    for (size_t from = 0; from < n->queued && !err;) {
        size_t to = n->queued;
        sl_store_msg_t joined;
        while (to > from + 1 &&
               sl_store_spread_join(n->queue + from, to - from, PUSH_MAX_LEN, &joined) != SL_OK)
            to = from + (to - from) / 2;
        if (to == from + 1) {
            err = spread(c, id, n->queue[from].type, n->queue[from].body, n->queue[from].len,
                         SL_SPREAD_LOCAL);
        } else {
            err = spread(c, id, joined.type, joined.body, joined.len, SL_SPREAD_LOCAL);
            sl_store_msg_fini(&joined);
        }
        from = to;
    }
    drop_queue(n);
    return err;
}

void sl_simstore_set_up(sl_simstore_t *c, uint32_t id, uint32_t other, bool up) {
    snode_t *n = &c->nodes[id];
    uint32_t peer;
    if (n->round && other != id && round_peer(n, other, true, &peer) == SL_OK)
        sl_store_round_set_up(n->round, peer, up);
}

void sl_simstore_back(sl_simstore_t *c, uint32_t id, uint32_t other) {
    snode_t *n = &c->nodes[id];
    uint32_t peer;
    if (!n->round || other == id || round_peer(n, other, true, &peer) != SL_OK)
        return;
    sl_store_round_set_up(n->round, peer, true);
    sl_store_round_back(n->round, peer);
    sl_sim_reschedule(c->sim, id); /* (its next round is due at once) */
}

void sl_simstore_crash(sl_simstore_t *c, uint32_t id) { sl_sim_crash(c->sim, id); }

sl_err sl_simstore_restart(sl_simstore_t *c, uint32_t id) { return sl_sim_start(c->sim, id); }

void sl_simstore_counts(const sl_simstore_t *c, uint32_t id, sl_simstore_counts_t *out) {
    *out = c->nodes[id].counts;
}
