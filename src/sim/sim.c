/* The deterministic simulator (include/starling/sim.h, docs/simulator.md):
 * one binary heap of timed events (deliveries and timer wake-ups) ordered by
 * (time, sequence number), a virtual network that loses, delays, duplicates
 * and partitions, and nodes that pause, crash and restart. No wall clock,
 * no threads: a run is a function of its seed. */
#include <stdlib.h>
#include <string.h>

#include "starling/sim.h"

enum { EV_DELIVER = 1, EV_TIMER = 2 };

/* One scheduled event. */
typedef struct {
    int64_t at_ms;  /* when */
    uint64_t seq;   /* tie-break: scheduling order */
    uint8_t kind;   /* EV_DELIVER or EV_TIMER */
    uint32_t node;  /* destination / timer owner */
    uint32_t from;  /* sender (EV_DELIVER) */
    uint8_t *data;  /* message bytes (EV_DELIVER, owned) */
    size_t len;     /* bytes */
} sim_event_t;

/* A message held for a paused node. */
typedef struct {
    uint32_t from; /* sender */
    uint8_t *data; /* bytes (owned) */
    size_t len;    /* bytes */
} held_t;

/* One node's simulator-side state. */
typedef struct {
    uint8_t state;        /* sl_sim_node_state */
    uint32_t restarts;    /* lives before this one */
    uint32_t group;       /* partition side */
    int64_t timer_at;     /* scheduled wake-up, INT64_MAX none */
    uint64_t bytes_sent;  /* bytes sent, all lives */
    held_t *held;         /* messages waiting while paused */
    uint32_t held_count;  /* used */
    uint32_t held_cap;    /* allocated */
} sim_node_t;

struct sl_sim {
    sl_sim_config_t cfg;  /* as given */
    sl_sim_net_t net;     /* current network */
    sl_rng_t rng;         /* every random choice */
    int64_t now_ms;       /* virtual time */
    uint64_t next_seq;    /* event sequence numbers */
    sim_event_t *heap;    /* min-heap on (at_ms, seq) */
    size_t heap_count;    /* used */
    size_t heap_cap;      /* allocated */
    sim_node_t *nodes;    /* per node */
    bool partitioned;     /* any group differs */
    int depth;            /* callbacks on the stack (timers rescheduled after) */
    sl_sim_stats_t stats; /* counters */
};

static bool before(const sim_event_t *a, const sim_event_t *b) {
    return a->at_ms < b->at_ms || (a->at_ms == b->at_ms && a->seq < b->seq);
}

static sl_err heap_push(sl_sim_t *s, sim_event_t ev) {
    if (s->heap_count == s->heap_cap) {
        size_t cap = s->heap_cap ? s->heap_cap * 2 : 256;
        sim_event_t *h = sl_realloc(s->heap, cap * sizeof *h);
        if (!h)
            return SL_ENOMEM;
        s->heap = h;
        s->heap_cap = cap;
    }
    ev.seq = s->next_seq++;
    size_t i = s->heap_count++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&ev, &s->heap[p]))
            break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = ev;
    return SL_OK;
}

static sim_event_t heap_pop(sl_sim_t *s) {
    sim_event_t top = s->heap[0];
    sim_event_t last = s->heap[--s->heap_count];
    size_t i = 0, n = s->heap_count;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const sim_event_t *best = &last;
        if (l < n && before(&s->heap[l], best)) {
            m = l;
            best = &s->heap[l];
        }
        if (r < n && before(&s->heap[r], best))
            m = r;
        if (m == i)
            break;
        s->heap[i] = s->heap[m];
        i = m;
    }
    if (n)
        s->heap[i] = last;
    return top;
}

sl_err sl_sim_new(const sl_sim_config_t *cfg, sl_sim_t **out) {
    *out = NULL;
    if (!cfg || !cfg->ops || cfg->nodes == 0)
        return SL_EINVAL;
    sl_sim_t *s = sl_calloc(1, sizeof *s);
    if (!s)
        return SL_ENOMEM;
    s->cfg = *cfg;
    s->net = cfg->net;
    sl_rng_seed(&s->rng, sl_mix64(cfg->seed ^ 0x51ADE5EEDull));
    s->nodes = sl_calloc(cfg->nodes, sizeof *s->nodes);
    if (!s->nodes) {
        sl_free(s);
        return SL_ENOMEM;
    }
    for (uint32_t i = 0; i < cfg->nodes; i++)
        s->nodes[i].timer_at = INT64_MAX;
    *out = s;
    return SL_OK;
}

void sl_sim_destroy(sl_sim_t **pp) {
    if (!pp || !*pp)
        return;
    sl_sim_t *s = *pp;
    for (size_t i = 0; i < s->heap_count; i++)
        sl_free(s->heap[i].data);
    for (uint32_t i = 0; i < s->cfg.nodes; i++) {
        for (uint32_t j = 0; j < s->nodes[i].held_count; j++)
            sl_free(s->nodes[i].held[j].data);
        sl_free(s->nodes[i].held);
    }
    sl_free(s->heap);
    sl_free(s->nodes);
    sl_free(s);
    *pp = NULL;
}

int64_t sl_sim_now(const sl_sim_t *s) { return s->now_ms; }
sl_rng_t *sl_sim_rng(sl_sim_t *s) { return &s->rng; }
uint32_t sl_sim_node_count(const sl_sim_t *s) { return s->cfg.nodes; }
sl_sim_node_state sl_sim_node(const sl_sim_t *s, uint32_t id) {
    return id < s->cfg.nodes ? (sl_sim_node_state)s->nodes[id].state : SL_SIM_DOWN;
}
uint64_t sl_sim_bytes_sent(const sl_sim_t *s, uint32_t id) {
    return id < s->cfg.nodes ? s->nodes[id].bytes_sent : 0;
}
void sl_sim_stats(const sl_sim_t *s, sl_sim_stats_t *st) { *st = s->stats; }
void sl_sim_set_net(sl_sim_t *s, const sl_sim_net_t *net) { s->net = *net; }
const sl_sim_net_t *sl_sim_net(const sl_sim_t *s) { return &s->net; }
bool sl_sim_partitioned(const sl_sim_t *s) { return s->partitioned; }

static bool cut(const sl_sim_t *s, uint32_t a, uint32_t b) {
    return s->partitioned && s->nodes[a].group != s->nodes[b].group;
}

static int64_t delay(sl_sim_t *s) {
    uint32_t lo = s->net.delay_min_ms, hi = s->net.delay_max_ms;
    if (hi < lo)
        hi = lo;
    return lo + (int64_t)sl_rng_below(&s->rng, (uint64_t)(hi - lo) + 1);
}

static void schedule_copy(sl_sim_t *s, uint32_t from, uint32_t to, const uint8_t *data,
                          size_t len) {
    sim_event_t ev = {0};
    ev.at_ms = s->now_ms + delay(s);
    ev.kind = EV_DELIVER;
    ev.node = to;
    ev.from = from;
    ev.len = len;
    ev.data = sl_malloc(len ? len : 1);
    if (!ev.data)
        return;
    if (len)
        memcpy(ev.data, data, len);
    if (heap_push(s, ev) != SL_OK)
        sl_free(ev.data);
}

void sl_sim_send(sl_sim_t *s, uint32_t from, uint32_t to, const uint8_t *data, size_t len) {
    if (from >= s->cfg.nodes || to >= s->cfg.nodes)
        return;
    s->stats.sent++;
    s->stats.bytes += len;
    s->nodes[from].bytes_sent += len;
    if (cut(s, from, to)) {
        s->stats.cut++;
        return;
    }
    if (s->net.loss > 0 && sl_rng_double(&s->rng) < s->net.loss) {
        s->stats.lost++;
        return;
    }
    schedule_copy(s, from, to, data, len);
    if (s->net.duplicate > 0 && sl_rng_double(&s->rng) < s->net.duplicate) {
        s->stats.duplicated++;
        schedule_copy(s, from, to, data, len);
    }
}

/* Asks node `id` for its next deadline and schedules a wake-up for it. */
static sl_err reschedule(sl_sim_t *s, uint32_t id) {
    sim_node_t *n = &s->nodes[id];
    if (n->state != SL_SIM_UP)
        return SL_OK;
    int64_t d = s->cfg.ops->next_deadline(s->cfg.ctx, s, id);
    if (d == INT64_MAX)
        return SL_OK;
    if (d <= s->now_ms)
        d = s->now_ms + 1; /* never spin at one instant */
    if (d >= n->timer_at && n->timer_at > s->now_ms)
        return SL_OK; /* an earlier wake-up is already scheduled */
    n->timer_at = d;
    sim_event_t ev = {0};
    ev.at_ms = d;
    ev.kind = EV_TIMER;
    ev.node = id;
    return heap_push(s, ev);
}

sl_err sl_sim_reschedule(sl_sim_t *s, uint32_t id) {
    if (id >= s->cfg.nodes)
        return SL_EINVAL;
    return reschedule(s, id);
}

sl_err sl_sim_start(sl_sim_t *s, uint32_t id) {
    if (id >= s->cfg.nodes)
        return SL_EINVAL;
    sim_node_t *n = &s->nodes[id];
    if (n->state != SL_SIM_DOWN)
        return SL_ESTATE;
    n->state = SL_SIM_UP;
    n->timer_at = INT64_MAX;
    sl_err err = s->cfg.ops->start(s->cfg.ctx, s, id, n->restarts, s->now_ms);
    if (err) {
        n->state = SL_SIM_DOWN;
        return err;
    }
    return reschedule(s, id);
}

void sl_sim_crash(sl_sim_t *s, uint32_t id) {
    if (id >= s->cfg.nodes || s->nodes[id].state == SL_SIM_DOWN)
        return;
    sim_node_t *n = &s->nodes[id];
    for (uint32_t j = 0; j < n->held_count; j++)
        sl_free(n->held[j].data);
    n->held_count = 0;
    n->state = SL_SIM_DOWN;
    n->restarts++;
    n->timer_at = INT64_MAX;
    s->cfg.ops->stop(s->cfg.ctx, s, id);
}

static sl_err deliver(sl_sim_t *s, uint32_t id, uint32_t from, const uint8_t *data, size_t len) {
    s->stats.delivered++;
    sl_err err = s->cfg.ops->deliver(s->cfg.ctx, s, id, from, s->now_ms, data, len);
    if (err)
        return err;
    return reschedule(s, id);
}

sl_err sl_sim_pause(sl_sim_t *s, uint32_t id, bool paused) {
    if (id >= s->cfg.nodes)
        return SL_EINVAL;
    sim_node_t *n = &s->nodes[id];
    if (paused) {
        if (n->state == SL_SIM_UP)
            n->state = SL_SIM_PAUSED;
        return SL_OK;
    }
    if (n->state != SL_SIM_PAUSED)
        return SL_OK;
    n->state = SL_SIM_UP;
    n->timer_at = INT64_MAX;
    /* the process wakes: its timers are late, then the socket drains */
    sl_err err = s->cfg.ops->tick(s->cfg.ctx, s, id, s->now_ms);
    s->stats.ticks++;
    for (uint32_t j = 0; j < n->held_count && !err; j++) {
        if (n->state == SL_SIM_UP)
            err = deliver(s, id, n->held[j].from, n->held[j].data, n->held[j].len);
    }
    for (uint32_t j = 0; j < n->held_count; j++)
        sl_free(n->held[j].data);
    n->held_count = 0;
    if (!err)
        err = reschedule(s, id);
    return err;
}

sl_err sl_sim_partition(sl_sim_t *s, const uint32_t *group) {
    s->partitioned = false;
    for (uint32_t i = 0; i < s->cfg.nodes; i++) {
        s->nodes[i].group = group ? group[i] : 0;
        if (group && group[i] != group[0])
            s->partitioned = true;
    }
    return SL_OK;
}

static sl_err hold(sim_node_t *n, sim_event_t *ev) {
    if (n->held_count == n->held_cap) {
        uint32_t cap = n->held_cap ? n->held_cap * 2 : 16;
        held_t *h = sl_realloc(n->held, cap * sizeof *h);
        if (!h)
            return SL_ENOMEM;
        n->held = h;
        n->held_cap = cap;
    }
    n->held[n->held_count].from = ev->from;
    n->held[n->held_count].data = ev->data;
    n->held[n->held_count].len = ev->len;
    n->held_count++;
    ev->data = NULL;
    return SL_OK;
}

sl_err sl_sim_run_until(sl_sim_t *s, int64_t until_ms) {
    sl_err err = SL_OK;
    while (s->heap_count && s->heap[0].at_ms <= until_ms && !err) {
        sim_event_t ev = heap_pop(s);
        s->now_ms = ev.at_ms;
        sim_node_t *n = &s->nodes[ev.node];
        if (ev.kind == EV_TIMER) {
            if (n->state != SL_SIM_UP || ev.at_ms != n->timer_at)
                continue; /* stale, or the node is down or paused */
            n->timer_at = INT64_MAX;
            s->stats.ticks++;
            err = s->cfg.ops->tick(s->cfg.ctx, s, ev.node, s->now_ms);
            if (!err)
                err = reschedule(s, ev.node);
            continue;
        }
        if (n->state == SL_SIM_DOWN) {
            s->stats.to_down++;
        } else if (cut(s, ev.from, ev.node)) {
            s->stats.cut++;
        } else if (n->state == SL_SIM_PAUSED) {
            err = hold(n, &ev);
        } else {
            err = deliver(s, ev.node, ev.from, ev.data, ev.len);
        }
        sl_free(ev.data);
    }
    if (!err && s->now_ms < until_ms)
        s->now_ms = until_ms;
    return err;
}
