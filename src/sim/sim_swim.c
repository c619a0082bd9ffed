/* Membership on the simulator (include/starling/sim.h): N sl_swim cores on
 * an sl_sim, every message through the real codec (sl_msg_encode and
 * sl_msg_decode), with the ground truth of the faults and the checkers of
 * INVARIANTS.md M1-M6. Node i is named "n<i>" at "sim://n<i>". */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/msg.h"
#include "starling/sim.h"
#include "sim/sim_test.h"

#define ADDR_PREFIX "sim://n"
#define MAX_VIOLATIONS 64
#define PAIR_MAX_NODES 2048 /* per-pair detection times kept up to this N */

/* The driver's view of one node. */
typedef struct {
    sl_swim_t *core;       /* the core while up, else NULL */
    uint64_t disk_inc;     /* incarnation persisted ("disk") */
    uint64_t life_inc;     /* incarnation this life started with */
    bool left;             /* it left (this life or the last) */
    bool left_heard;       /* another node held it LEFT at some point */
    int64_t left_at_ms;    /* when it left */
    uint64_t left_inc;     /* incarnation it left at */
    bool crashed;          /* down after a crash or after leaving */
    int64_t crash_ms;      /* last crash, -1 never */
    int64_t life_start_ms; /* when this life started */
    int64_t start_at_ms;   /* pending first start, -1 started */
    int64_t exit_at_ms;    /* a leaving node exits at this time, -1 none */
    uint64_t mark_bytes;   /* sl_sim_bytes_sent at the mark */
    int64_t win_start_ms;  /* M6 window start */
    uint32_t win_msgs;     /* messages sent in the window */
    int64_t watch_ms;      /* when it first held the watched update, -1 */
} snode_t;

struct sl_simswim {
    sl_simswim_config_t cfg; /* as given (timing filled) */
    sl_sim_t *sim;           /* the simulator */
    sl_intern_t *pool;       /* one string pool for all cores */
    snode_t *nodes;          /* per node */
    sl_swim_bug bug;         /* planted in every core */
    bool clean;              /* no loss, pause or partition so far (M2) */
    int64_t *dead_seen;      /* [observer * N + member]: first DEAD, -1 */
    int64_t mark_ms;         /* sl_simswim_mark time */
    uint32_t watch_member;   /* watched member, UINT32_MAX none */
    uint64_t watch_inc;      /* watched incarnation */
    uint8_t watch_state;     /* watched state, SL_SWIM_STATE_NONE: any */
    uint32_t watch_have;     /* nodes holding it */
    int64_t *watch_times;    /* sorted arrival times */
    char *violations[MAX_VIOLATIONS]; /* messages */
    size_t violation_count;  /* recorded (may exceed MAX_VIOLATIONS) */
    bool violated[8];        /* by property number; 0: core check/codec */
    uint8_t *buf;            /* encode buffer */
    size_t buf_cap;          /* allocated */
};

static void violation(sl_simswim_t *c, int m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void violation(sl_simswim_t *c, int m, const char *fmt, ...) {
    c->violated[m] = true;
    if (c->violation_count < MAX_VIOLATIONS) {
        char line[512];
        va_list ap;
        va_start(ap, fmt);
        int n = snprintf(line, sizeof line, "%s%d t=%lld: ", m ? "M" : "CHECK", m,
                         (long long)sl_sim_now(c->sim));
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        va_end(ap);
        c->violations[c->violation_count] = sl_strdup(line);
    }
    c->violation_count++;
}

static uint32_t parse_id(sl_bytes_t b, size_t skip) {
    if (b.len <= skip || b.len > skip + 10)
        return UINT32_MAX;
    uint64_t v = 0;
    for (size_t i = skip; i < b.len; i++) {
        if (b.ptr[i] < '0' || b.ptr[i] > '9')
            return UINT32_MAX;
        v = v * 10 + (b.ptr[i] - '0');
    }
    return v < UINT32_MAX ? (uint32_t)v : UINT32_MAX;
}

static uint32_t addr_id(sl_bytes_t addr) {
    if (addr.len < sizeof ADDR_PREFIX - 1 || memcmp(addr.ptr, ADDR_PREFIX, sizeof ADDR_PREFIX - 1))
        return UINT32_MAX;
    return parse_id(addr, sizeof ADDR_PREFIX - 1);
}

static uint32_t name_id(sl_bytes_t name) {
    if (name.len < 2 || name.ptr[0] != 'n')
        return UINT32_MAX;
    return parse_id(name, 1);
}

static void watch_record(sl_simswim_t *c, uint32_t obs, int64_t now) {
    snode_t *o = &c->nodes[obs];
    if (o->watch_ms >= 0)
        return;
    o->watch_ms = now;
    c->watch_times[c->watch_have++] = now;
}

/* Feeds one event of node `obs` to the checkers. */
static void on_event(sl_simswim_t *c, uint32_t obs, const sl_swim_event_t *ev) {
    uint32_t n = c->cfg.nodes;
    uint32_t mid = name_id(ev->name);
    if (mid >= n)
        return;
    snode_t *m = &c->nodes[mid];
    int64_t now = sl_sim_now(c->sim);
    if (ev->new_state == SL_STATE_LEFT && obs != mid && m->left)
        m->left_heard = true;
    if (c->watch_member == mid && obs != mid && ev->incarnation >= c->watch_inc &&
        ev->kind != SL_SWIM_EV_REAP &&
        (c->watch_state == SL_SWIM_STATE_NONE || c->watch_state == ev->new_state))
        watch_record(c, obs, now);
    if (!c->cfg.check_safety)
        return;
    if (ev->kind != SL_SWIM_EV_JOIN && ev->incarnation < ev->old_incarnation)
        violation(c, 3, "n%u saw n%u's incarnation go down %llu -> %llu", obs, mid,
                  (unsigned long long)ev->old_incarnation, (unsigned long long)ev->incarnation);
    if (ev->new_state == SL_STATE_DEAD && ev->kind != SL_SWIM_EV_REAP) {
        if (c->dead_seen && c->dead_seen[(size_t)obs * n + mid] < 0)
            c->dead_seen[(size_t)obs * n + mid] = now;
        if (c->clean && m->core && !m->left && ev->incarnation >= m->life_inc)
            violation(c, 2, "n%u declared n%u dead at incarnation %llu while it answers", obs,
                      mid, (unsigned long long)ev->incarnation);
    }
    if (ev->kind == SL_SWIM_EV_STATE && ev->old_state == SL_STATE_LEFT) {
        /* back only as a new life: a higher incarnation from a restart */
        if (ev->incarnation <= ev->old_incarnation || m->life_inc <= ev->old_incarnation)
            violation(c, 4, "n%u moved n%u from left to %u at incarnation %llu", obs, mid,
                      ev->new_state, (unsigned long long)ev->incarnation);
    }
}

static sl_err grow_buf(sl_simswim_t *c, size_t len) {
    if (len <= c->buf_cap)
        return SL_OK;
    size_t cap = c->buf_cap ? c->buf_cap : 4096;
    while (cap < len)
        cap *= 2;
    uint8_t *b = sl_realloc(c->buf, cap);
    if (!b)
        return SL_ENOMEM;
    c->buf = b;
    c->buf_cap = cap;
    return SL_OK;
}

/* After any call into node `id`'s core: send its outputs, feed its events
 * to the checkers, persist its incarnation, check it. */
static sl_err after(sl_simswim_t *c, uint32_t id) {
    snode_t *nd = &c->nodes[id];
    sl_swim_t *core = nd->core;
    if (!core)
        return SL_OK;
    int64_t now = sl_sim_now(c->sim);
    sl_swim_output_t out;
    int64_t period = sl_swim_timing(core)->probe_interval_ms;
    while (sl_swim_next_output(core, &out) == SL_OK) {
        uint8_t header[SL_WIRE_HEADER_LEN];
        uint8_t *body = NULL;
        size_t body_len = 0;
        sl_err err = sl_msg_encode(&out.msg, header, &body, &body_len);
        if (err) {
            violation(c, 0, "n%u: encode of %s failed: %s", id, sl_msg_type_name(out.msg.type),
                      sl_errname(err));
            continue;
        }
        uint32_t to = addr_id(out.to_addr);
        if (to < c->cfg.nodes && grow_buf(c, body_len + SL_WIRE_HEADER_LEN) == SL_OK) {
            memcpy(c->buf, header, SL_WIRE_HEADER_LEN);
            memcpy(c->buf + SL_WIRE_HEADER_LEN, body, body_len);
            sl_sim_send(c->sim, id, to, c->buf, body_len + SL_WIRE_HEADER_LEN);
        }
        sl_free(body);
        if (now - nd->win_start_ms >= period) {
            nd->win_start_ms = now;
            nd->win_msgs = 0;
        }
        if (++nd->win_msgs == c->cfg.msgs_per_period_cap + 1)
            violation(c, 6, "n%u sent over %u messages in one probe period", id,
                      c->cfg.msgs_per_period_cap);
    }
    sl_swim_event_t ev;
    while (sl_swim_next_event(core, &ev) == SL_OK)
        on_event(c, id, &ev);
    if (nd->left && sl_swim_leave_acked(core))
        nd->left_heard = true; /* somebody received the leave */
    if (nd->left && nd->exit_at_ms > now && sl_swim_leave_acked(core)) {
        /* heard: exit after the leave's gossip had a moment */
        int64_t soon = nd->left_at_ms + 2 * (int64_t)sl_swim_timing(core)->gossip_interval_ms + 1;
        nd->exit_at_ms = soon > now ? soon : now + 1;
    }
    uint64_t inc = sl_swim_incarnation(core);
    if (inc > nd->disk_inc)
        nd->disk_inc = inc;
    if (c->cfg.check_cores && sl_swim_check(core) != SL_OK)
        violation(c, 0, "n%u: sl_swim_check failed (see the log)", id);
    return SL_OK;
}

static void addr_of(uint32_t id, char *buf, size_t len) {
    snprintf(buf, len, ADDR_PREFIX "%u", id);
}

static sl_err op_start(void *ctx, sl_sim_t *sim, uint32_t id, uint32_t restarts, int64_t now) {
    sl_simswim_t *c = ctx;
    snode_t *nd = &c->nodes[id];
    char name[32], addr[48];
    snprintf(name, sizeof name, "n%u", id);
    addr_of(id, addr, sizeof addr);
    sl_swim_config_t cfg;
    sl_swim_config_defaults(&cfg);
    cfg.name = name;
    cfg.addr = addr;
    cfg.incarnation = restarts ? nd->disk_inc + 1 : 0;
    cfg.seed = sl_mix64(c->cfg.seed * 0x9E3779B97F4A7C15ull + id * 1000003ull + restarts);
    cfg.intern = c->pool;
    cfg.timing = c->cfg.timing;
    cfg.any_addr = true; /* "sim://n3": no resolver in the simulator */
    if (c->cfg.nodes >= cfg.timing.max_members && c->cfg.nodes >= 4096)
        cfg.timing.max_members = c->cfg.nodes + 1; /* the 10,000-node runs */
    sl_err err = sl_swim_new(&cfg, &nd->core);
    if (err)
        return err;
    sl_swim_set_bug(nd->core, c->bug);
    nd->life_inc = cfg.incarnation;
    nd->life_start_ms = now;
    nd->disk_inc = cfg.incarnation;
    nd->crashed = false;
    nd->exit_at_ms = -1;
    if (restarts)
        nd->left = false;
    if (c->dead_seen)
        for (uint32_t o = 0; o < c->cfg.nodes; o++)
            c->dead_seen[(size_t)o * c->cfg.nodes + id] = -1;
    uint32_t n = c->cfg.nodes;
    if (c->cfg.preload && restarts == 0) {
        if ((err = sl_swim_reserve(nd->core, n)) != SL_OK)
            return err;
        for (uint32_t j = 0; j < n; j++) {
            if (j == id)
                continue;
            char jn[32], ja[48];
            snprintf(jn, sizeof jn, "n%u", j);
            addr_of(j, ja, sizeof ja);
            sl_member_msg_t r = {0};
            r.name = sl_bytes_str(jn);
            r.addr = sl_bytes_str(ja);
            r.state = SL_STATE_ALIVE;
            if ((err = sl_swim_add_member(nd->core, now, &r)) != SL_OK)
                return err;
        }
    } else if (n > 1) {
        /* seeds: nodes 0..2 and two others at random (a peers file) */
        char seeds[5][48];
        const char *ptrs[5];
        size_t k = 0;
        for (uint32_t j = 0; j < 3 && j < n; j++)
            if (j != id)
                addr_of(j, seeds[k], sizeof seeds[k]), ptrs[k] = seeds[k], k++;
        for (int t = 0; t < 2 && n > 3; t++) {
            uint32_t j = 3 + (uint32_t)sl_rng_below(sl_sim_rng(sim), n - 3);
            if (j != id)
                addr_of(j, seeds[k], sizeof seeds[k]), ptrs[k] = seeds[k], k++;
        }
        if ((err = sl_swim_join(nd->core, now, ptrs, k)) != SL_OK)
            return err;
    }
    return after(c, id);
}

static void op_stop(void *ctx, sl_sim_t *sim, uint32_t id) {
    sl_simswim_t *c = ctx;
    (void)sim;
    sl_swim_destroy(&c->nodes[id].core);
}

static sl_err op_deliver(void *ctx, sl_sim_t *sim, uint32_t id, uint32_t from, int64_t now,
                         const uint8_t *data, size_t len) {
    sl_simswim_t *c = ctx;
    snode_t *nd = &c->nodes[id];
    (void)sim;
    (void)from;
    if (!nd->core || len < SL_WIRE_HEADER_LEN)
        return SL_OK;
    sl_msg_t msg;
    sl_err err = sl_msg_decode(data, SL_WIRE_HEADER_LEN, data + SL_WIRE_HEADER_LEN,
                               len - SL_WIRE_HEADER_LEN, &msg);
    if (err) {
        violation(c, 0, "n%u: decode failed: %s", id, sl_errname(err));
        return SL_OK;
    }
    err = sl_swim_receive(nd->core, now, &msg);
    sl_msg_fini(&msg);
    if (err && err != SL_EPROTO && err != SL_ETOOBIG) /* ETOOBIG: records over a cap, refused */
        return err;
    return after(c, id);
}

static sl_err op_tick(void *ctx, sl_sim_t *sim, uint32_t id, int64_t now) {
    sl_simswim_t *c = ctx;
    snode_t *nd = &c->nodes[id];
    (void)sim;
    if (!nd->core)
        return SL_OK;
    sl_err err = sl_swim_tick(nd->core, now);
    if (err)
        return err;
    return after(c, id);
}

static int64_t op_deadline(void *ctx, sl_sim_t *sim, uint32_t id) {
    sl_simswim_t *c = ctx;
    (void)sim;
    return c->nodes[id].core ? sl_swim_next_deadline_ms(c->nodes[id].core) : INT64_MAX;
}

static const sl_sim_ops_t swim_ops = {
    .start = op_start,
    .stop = op_stop,
    .deliver = op_deliver,
    .tick = op_tick,
    .next_deadline = op_deadline,
};

sl_err sl_simswim_new(const sl_simswim_config_t *cfg, sl_simswim_t **out) {
    *out = NULL;
    if (!cfg || cfg->nodes == 0)
        return SL_EINVAL;
    sl_simswim_t *c = sl_calloc(1, sizeof *c);
    if (!c)
        return SL_ENOMEM;
    sl_err err = SL_ENOMEM;
    c->cfg = *cfg;
    if (!c->cfg.msgs_per_period_cap)
        c->cfg.msgs_per_period_cap = 64 + 4 * cfg->nodes;
    c->clean = cfg->net.loss == 0;
    c->watch_member = UINT32_MAX;
    c->nodes = sl_calloc(cfg->nodes, sizeof *c->nodes);
    c->watch_times = sl_calloc(cfg->nodes, sizeof *c->watch_times);
    if (!c->nodes || !c->watch_times)
        goto fail;
    if (cfg->check_safety && cfg->nodes <= PAIR_MAX_NODES) {
        c->dead_seen = sl_malloc((size_t)cfg->nodes * cfg->nodes * sizeof *c->dead_seen);
        if (!c->dead_seen)
            goto fail;
        memset(c->dead_seen, 0xFF, (size_t)cfg->nodes * cfg->nodes * sizeof *c->dead_seen);
    }
    if ((err = sl_intern_new(&c->pool)) != SL_OK)
        goto fail;
    sl_sim_config_t sc = {0};
    sc.nodes = cfg->nodes;
    sc.seed = cfg->seed;
    sc.net = cfg->net;
    sc.ops = &swim_ops;
    sc.ctx = c;
    if ((err = sl_sim_new(&sc, &c->sim)) != SL_OK)
        goto fail;
    for (uint32_t i = 0; i < cfg->nodes; i++) {
        snode_t *nd = &c->nodes[i];
        nd->crash_ms = -1;
        nd->exit_at_ms = -1;
        nd->watch_ms = -1;
        nd->start_at_ms = 0;
        if (!cfg->preload && cfg->join_spread_ms && i > 0)
            nd->start_at_ms = (int64_t)sl_rng_below(sl_sim_rng(c->sim), cfg->join_spread_ms + 1);
    }
    for (uint32_t i = 0; i < cfg->nodes; i++) {
        if (c->nodes[i].start_at_ms == 0) {
            c->nodes[i].start_at_ms = -1;
            if ((err = sl_sim_start(c->sim, i)) != SL_OK)
                goto fail;
        }
    }
    *out = c;
    return SL_OK;
fail:
    sl_simswim_destroy(&c);
    return err;
}

void sl_simswim_destroy(sl_simswim_t **pp) {
    if (!pp || !*pp)
        return;
    sl_simswim_t *c = *pp;
    if (c->nodes)
        for (uint32_t i = 0; i < c->cfg.nodes; i++)
            sl_swim_destroy(&c->nodes[i].core);
    sl_sim_destroy(&c->sim);
    sl_intern_destroy(&c->pool);
    for (size_t i = 0; i < c->violation_count && i < MAX_VIOLATIONS; i++)
        sl_free(c->violations[i]);
    sl_free(c->nodes);
    sl_free(c->dead_seen);
    sl_free(c->watch_times);
    sl_free(c->buf);
    sl_free(c);
    *pp = NULL;
}

sl_sim_t *sl_simswim_sim(sl_simswim_t *c) { return c->sim; }
sl_swim_t *sl_simswim_core(sl_simswim_t *c, uint32_t id) {
    return id < c->cfg.nodes ? c->nodes[id].core : NULL;
}

/* Next pending start or exit after `now`, or INT64_MAX. */
static int64_t next_lifecycle(const sl_simswim_t *c) {
    int64_t t = INT64_MAX;
    for (uint32_t i = 0; i < c->cfg.nodes; i++) {
        if (c->nodes[i].start_at_ms >= 0 && c->nodes[i].start_at_ms < t)
            t = c->nodes[i].start_at_ms;
        if (c->nodes[i].exit_at_ms >= 0 && c->nodes[i].exit_at_ms < t)
            t = c->nodes[i].exit_at_ms;
    }
    return t;
}

sl_err sl_simswim_run_until(sl_simswim_t *c, int64_t until) {
    for (;;) {
        int64_t t = next_lifecycle(c);
        if (t > until)
            return sl_sim_run_until(c->sim, until);
        sl_err err = sl_sim_run_until(c->sim, t);
        if (err)
            return err;
        for (uint32_t i = 0; i < c->cfg.nodes; i++) {
            snode_t *nd = &c->nodes[i];
            if (nd->start_at_ms == t) {
                nd->start_at_ms = -1;
                if ((err = sl_sim_start(c->sim, i)) != SL_OK)
                    return err;
            }
            if (nd->exit_at_ms == t) {
                /* a left node's process exits */
                nd->exit_at_ms = -1;
                nd->crashed = true;
                sl_sim_crash(c->sim, i);
            }
        }
    }
}

void sl_simswim_crash(sl_simswim_t *c, uint32_t id) {
    if (id >= c->cfg.nodes || !c->nodes[id].core)
        return;
    snode_t *nd = &c->nodes[id];
    nd->crashed = true;
    nd->crash_ms = sl_sim_now(c->sim);
    nd->exit_at_ms = -1;
    if (c->dead_seen) /* detection is timed from this crash */
        for (uint32_t o = 0; o < c->cfg.nodes; o++)
            c->dead_seen[(size_t)o * c->cfg.nodes + id] = -1;
    sl_sim_crash(c->sim, id);
}

sl_err sl_simswim_restart(sl_simswim_t *c, uint32_t id) {
    if (id >= c->cfg.nodes || c->nodes[id].core || c->nodes[id].start_at_ms >= 0)
        return SL_ESTATE;
    return sl_sim_start(c->sim, id);
}

sl_err sl_simswim_pause(sl_simswim_t *c, uint32_t id, bool paused) {
    if (id >= c->cfg.nodes)
        return SL_EINVAL;
    c->clean = false;
    return sl_sim_pause(c->sim, id, paused);
}

sl_err sl_simswim_leave(sl_simswim_t *c, uint32_t id) {
    if (id >= c->cfg.nodes || !c->nodes[id].core)
        return SL_ESTATE;
    if (sl_sim_node(c->sim, id) != SL_SIM_UP)
        return SL_ESTATE;
    snode_t *nd = &c->nodes[id];
    int64_t now = sl_sim_now(c->sim);
    sl_err err = sl_swim_leave(nd->core, now);
    if (err)
        return err;
    nd->left = true;
    nd->left_heard = false;
    nd->left_at_ms = now;
    nd->left_inc = sl_swim_incarnation(nd->core);
    /* like the daemon: exit once a member acknowledged, or after 1 s */
    nd->exit_at_ms = now + 1000;
    return sl_simswim_touch(c, id);
}

sl_err sl_simswim_partition(sl_simswim_t *c, const uint32_t *group) {
    if (group)
        c->clean = false;
    return sl_sim_partition(c->sim, group);
}

void sl_simswim_set_net(sl_simswim_t *c, const sl_sim_net_t *net) {
    if (net->loss > 0)
        c->clean = false;
    sl_sim_set_net(c->sim, net);
}

sl_err sl_simswim_touch(sl_simswim_t *c, uint32_t id) {
    if (id >= c->cfg.nodes || !c->nodes[id].core)
        return SL_ESTATE;
    sl_err err = after(c, id);
    return err ? err : sl_sim_reschedule(c->sim, id);
}

void sl_simswim_set_bug(sl_simswim_t *c, sl_swim_bug bug) {
    c->bug = bug;
    for (uint32_t i = 0; i < c->cfg.nodes; i++)
        if (c->nodes[i].core)
            sl_swim_set_bug(c->nodes[i].core, bug);
}

void sl_simswim_watch(sl_simswim_t *c, uint32_t member, uint64_t inc, uint8_t state) {
    c->watch_member = member;
    c->watch_inc = inc;
    c->watch_state = state;
    c->watch_have = 0;
    sl_bytes_t name;
    char nm[32];
    snprintf(nm, sizeof nm, "n%u", member);
    name = sl_bytes_str(nm);
    int64_t now = sl_sim_now(c->sim);
    for (uint32_t i = 0; i < c->cfg.nodes; i++) {
        c->nodes[i].watch_ms = -1;
        sl_swim_member_t m;
        if (i != member && c->nodes[i].core &&
            sl_swim_member_find(c->nodes[i].core, name, &m) == SL_OK && m.incarnation >= inc &&
            (state == SL_SWIM_STATE_NONE || m.state == state))
            watch_record(c, i, now);
    }
}

uint32_t sl_simswim_watch_count(const sl_simswim_t *c) { return c->watch_have; }

int64_t sl_simswim_watch_time(const sl_simswim_t *c, uint32_t k) {
    return k >= 1 && k <= c->watch_have ? c->watch_times[k - 1] : -1;
}

void sl_simswim_mark(sl_simswim_t *c) {
    c->mark_ms = sl_sim_now(c->sim);
    for (uint32_t i = 0; i < c->cfg.nodes; i++)
        c->nodes[i].mark_bytes = sl_sim_bytes_sent(c->sim, i);
}

uint64_t sl_simswim_bytes_since_mark(const sl_simswim_t *c, uint32_t id) {
    return sl_sim_bytes_sent(c->sim, id) - c->nodes[id].mark_bytes;
}

int64_t sl_simswim_dead_seen(const sl_simswim_t *c, uint32_t obs, uint32_t member) {
    if (!c->dead_seen || obs >= c->cfg.nodes || member >= c->cfg.nodes)
        return -1;
    return c->dead_seen[(size_t)obs * c->cfg.nodes + member];
}

int64_t sl_simswim_crash_time(const sl_simswim_t *c, uint32_t id) {
    return id < c->cfg.nodes ? c->nodes[id].crash_ms : -1;
}

static const char *sname(uint8_t s) {
    static const char *n[] = {"alive", "suspect", "dead", "left"};
    return s <= 3 ? n[s] : "?";
}

void sl_simswim_check_quiet(sl_simswim_t *c, int64_t detect_bound_ms, double rest_cap_bps) {
    uint32_t n = c->cfg.nodes;
    uint32_t ref = UINT32_MAX;
    for (uint32_t o = 0; o < n; o++) {
        sl_swim_t *oc = c->nodes[o].core;
        if (!oc || c->nodes[o].left || sl_sim_node(c->sim, o) != SL_SIM_UP)
            continue;
        for (uint32_t x = 0; x < n; x++) {
            snode_t *xn = &c->nodes[x];
            if (x == o || xn->start_at_ms >= 0)
                continue;
            char nm[32];
            snprintf(nm, sizeof nm, "n%u", x);
            sl_swim_member_t m;
            bool have = sl_swim_member_find(oc, sl_bytes_str(nm), &m) == SL_OK;
            if (xn->left && (!xn->core || xn->crashed)) {
                /* a leave nobody heard (cut off, lost) is a crash */
                if (!xn->left_heard) {
                    if (have && m.state != SL_STATE_DEAD && m.state != SL_STATE_LEFT)
                        violation(c, 1, "n%u holds unheard-left n%u as %s", o, x,
                                  sname(m.state));
                } else if (!have || m.state != SL_STATE_LEFT)
                    violation(c, 4, "n%u holds left n%u as %s", o, x,
                              have ? sname(m.state) : "unknown");
            } else if (!xn->core) {
                /* one that never heard of it has nothing to declare */
                if (have && m.state != SL_STATE_DEAD && m.state != SL_STATE_LEFT)
                    violation(c, 1, "n%u holds crashed n%u as %s", o, x, sname(m.state));
                int64_t seen = sl_simswim_dead_seen(c, o, x);
                if (detect_bound_ms && xn->crash_ms >= 0 &&
                    c->nodes[o].life_start_ms <= xn->crash_ms && seen >= 0 &&
                    seen - xn->crash_ms > detect_bound_ms)
                    violation(c, 1, "n%u declared crashed n%u dead after %lld ms (bound %lld)", o,
                              x, (long long)(seen - xn->crash_ms), (long long)detect_bound_ms);
            } else if (!xn->left) {
                uint64_t inc = sl_swim_incarnation(xn->core);
                if (!have)
                    violation(c, 5, "n%u does not know n%u", o, x);
                else if (m.state != SL_STATE_ALIVE || m.incarnation != inc)
                    violation(c, m.state == SL_STATE_ALIVE ? 5 : 3,
                              "n%u holds running n%u as %s at %llu (it is at %llu)", o, x,
                              sname(m.state), (unsigned long long)m.incarnation,
                              (unsigned long long)inc);
            }
        }
        if (ref == UINT32_MAX) {
            ref = o;
            continue;
        }
        /* M5: the same view as the reference node, record for record */
        sl_swim_t *rc = c->nodes[ref].core;
        if (sl_swim_member_count(rc) != sl_swim_member_count(oc))
            violation(c, 5, "n%u holds %zu records, n%u holds %zu", o,
                      sl_swim_member_count(oc), ref, sl_swim_member_count(rc));
        for (size_t i = 0; i < sl_swim_member_count(rc); i++) {
            sl_swim_member_t a, b;
            sl_swim_member_at(rc, i, &a);
            if (sl_swim_member_find(oc, a.name, &b) != SL_OK) {
                violation(c, 5, "n%u lacks %.*s that n%u holds", o, (int)a.name.len,
                          (const char *)a.name.ptr, ref);
            } else if (a.state != b.state || a.incarnation != b.incarnation) {
                violation(c, 5, "views differ on %.*s: n%u %s/%llu, n%u %s/%llu",
                          (int)a.name.len, (const char *)a.name.ptr, ref, sname(a.state),
                          (unsigned long long)a.incarnation, o, sname(b.state),
                          (unsigned long long)b.incarnation);
            }
        }
    }
    if (rest_cap_bps > 0) {
        int64_t span = sl_sim_now(c->sim) - c->mark_ms;
        for (uint32_t o = 0; o < n && span > 0; o++) {
            if (!c->nodes[o].core)
                continue;
            double bps = (double)sl_simswim_bytes_since_mark(c, o) * 1000.0 / (double)span;
            if (bps > rest_cap_bps)
                violation(c, 6, "n%u sends %.0f B/s at rest (cap %.0f)", o, bps, rest_cap_bps);
        }
    }
}

size_t sl_simswim_violations(const sl_simswim_t *c) { return c->violation_count; }

const char *sl_simswim_violation(const sl_simswim_t *c, size_t i) {
    return i < c->violation_count && i < MAX_VIOLATIONS ? c->violations[i] : "(not kept)";
}

bool sl_simswim_violated(const sl_simswim_t *c, int m) {
    return m >= 0 && m < 8 && c->violated[m];
}
