/* Membership: SWIM with Lifeguard, sans-I/O (include/starling/swim.h and
 * docs/membership.md). The member table, probing, suspicion, refutation,
 * push-pull and seeds; the dissemination queue is in swim_gossip.c and the
 * string pool in intern.c. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "starling/addr.h"
#include "starling/swim.h"
#include "membership/swim_internal.h"

#define REAP_SCAN_MS 10000 /* how often dead/left records are looked at */
#define REFUSE_LOG_MS 10000 /* at most one log line about refused records per this */

const char *swim_state_name(uint8_t s) {
    static const char *names[] = {"alive", "suspect", "dead", "left"};
    return s <= SL_STATE_LEFT ? names[s] : "?";
}

/* Order of records about one member at equal incarnations. */
static int state_rank(uint8_t s) { return s; }


void sl_swim_config_defaults(sl_swim_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    sl_swim_timing_t *t = &cfg->timing;
    /* A little slower than Serf's LAN pace (a probe a second), for fewer
     * bytes on the wire than Serf; detection stays fast with a short
     * suspicion (one period at N <= 10, log10 N periods above) and the
     * transport's hint when a member's connection closes. */
    t->probe_interval_ms = 1250;
    t->probe_timeout_ms = 400;
    t->indirect_count = 3;
    t->suspicion_mult = 1;
    t->suspicion_max_mult = 3;
    t->awareness_max = 8;
    t->gossip_interval_ms = 100;
    t->gossip_fanout = 3;
    t->retransmit_mult = 4;
    t->gossip_max_bytes = 1024;
    t->push_pull_interval_ms = 30000;
    t->dead_sync_every = 3;
    t->join_retry_ms = 1000;
    t->seed_redial_ms = 30000;
    t->leave_fanout = 16;
    t->reap_ms = 3600000;
    t->max_outputs = 4096;
    t->max_members = 4096;
    t->max_new_per_msg = 64;
    t->max_new_per_period = 1024;
}

static void fill_timing(sl_swim_timing_t *t, const sl_swim_timing_t *in) {
    sl_swim_config_t d;
    sl_swim_config_defaults(&d);
    *t = *in;
#define DEF(f) if (!t->f) t->f = d.timing.f
    DEF(probe_interval_ms); DEF(probe_timeout_ms); DEF(indirect_count); DEF(suspicion_mult);
    DEF(suspicion_max_mult); DEF(awareness_max); DEF(gossip_interval_ms); DEF(gossip_fanout);
    DEF(retransmit_mult); DEF(gossip_max_bytes); DEF(push_pull_interval_ms);
    DEF(dead_sync_every); DEF(join_retry_ms); DEF(seed_redial_ms); DEF(leave_fanout);
    DEF(reap_ms); DEF(max_outputs); DEF(max_members); DEF(max_new_per_msg);
    DEF(max_new_per_period);
#undef DEF
    if (t->probe_timeout_ms > t->probe_interval_ms)
        t->probe_timeout_ms = t->probe_interval_ms;
    if (t->suspicion_max_mult < 1)
        t->suspicion_max_mult = 1;
}

/* ---- Member table ---- */

static uint32_t index_slot(const sl_swim_t *s, uint64_t hash) {
    return (uint32_t)(hash & (s->index_cap - 1));
}

uint32_t swim_find_hashed(const sl_swim_t *s, const uint8_t *p, size_t len, uint64_t hash) {
    for (uint32_t i = index_slot(s, hash);; i = (i + 1) & (s->index_cap - 1)) {
        uint32_t v = s->index[i];
        if (v == 0)
            return NONE;
        const sl_istr_t *n = s->members[v - 1].name;
        if (n->hash == hash && istr_eq(n, p, len))
            return v - 1;
    }
}

static uint32_t find(const sl_swim_t *s, const uint8_t *p, size_t len) {
    return swim_find_hashed(s, p, len, intern_hash(p, len));
}

static void index_put(sl_swim_t *s, uint32_t idx) {
    uint32_t i = index_slot(s, s->members[idx].name->hash);
    while (s->index[i])
        i = (i + 1) & (s->index_cap - 1);
    s->index[i] = idx + 1;
}

static sl_err index_grow(sl_swim_t *s) {
    uint32_t cap = s->index_cap ? s->index_cap * 2 : 16;
    uint32_t *idx = sl_calloc(cap, sizeof *idx);
    if (!idx)
        return SL_ENOMEM;
    sl_free(s->index);
    s->index = idx;
    s->index_cap = cap;
    for (uint32_t i = 0; i < s->member_count; i++)
        index_put(s, i);
    return SL_OK;
}

/* Removes member `idx` from the index (backward-shift deletion). */
static void index_del(sl_swim_t *s, uint32_t idx) {
    uint32_t mask = s->index_cap - 1;
    uint32_t i = index_slot(s, s->members[idx].name->hash);
    while (s->index[i] != idx + 1)
        i = (i + 1) & mask;
    for (;;) {
        s->index[i] = 0;
        uint32_t j = i;
        for (;;) {
            j = (j + 1) & mask;
            if (s->index[j] == 0)
                return;
            uint32_t home = index_slot(s, s->members[s->index[j] - 1].name->hash);
            /* can the entry at j move to i? yes unless home lies in (i, j] */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j))
                break;
        }
        s->index[i] = s->index[j];
        i = j;
    }
}

static void index_rename(sl_swim_t *s, uint32_t from, uint32_t to) {
    uint32_t i = index_slot(s, s->members[to].name->hash);
    while (s->index[i] != from + 1)
        i = (i + 1) & (s->index_cap - 1);
    s->index[i] = to + 1;
}

static void order_insert(sl_swim_t *s, uint32_t idx) {
    if (s->order_count == s->order_cap) {
        uint32_t cap = s->order_cap ? s->order_cap * 2 : 16;
        uint32_t *o = sl_realloc(s->order, cap * sizeof *o);
        if (!o)
            return; /* the next rebuild picks it up */
        s->order = o;
        s->order_cap = cap;
    }
    /* a random place among those not yet probed this pass */
    uint32_t lo = s->order_pos < s->order_count ? s->order_pos : s->order_count;
    uint32_t at = lo + (uint32_t)sl_rng_below(&s->rng, s->order_count - lo + 1);
    if (at < s->order_count)
        s->order[s->order_count++] = s->order[at];
    else
        s->order_count++;
    s->order[at] = idx;
}

/* Adds a record; returns its index or NONE on ENOMEM. */
static uint32_t member_add(sl_swim_t *s, sl_bytes_t name, sl_bytes_t addr, sl_bytes_t meta,
                           uint64_t inc, uint8_t state, int64_t now) {
    if (s->member_count == s->member_cap) {
        uint32_t cap = s->member_cap ? s->member_cap * 2 : 16;
        member_t *m = sl_realloc(s->members, (size_t)cap * sizeof *m);
        if (!m)
            return NONE;
        s->members = m;
        s->member_cap = cap;
    }
    if ((s->member_count + 1) * 2 > s->index_cap && index_grow(s) != SL_OK)
        return NONE;
    member_t m = {0};
    m.name = intern_get(s->pool, name.ptr, name.len);
    m.addr = intern_get(s->pool, addr.ptr, addr.len);
    m.meta = meta.len ? intern_get(s->pool, meta.ptr, meta.len) : NULL;
    if (!m.name || !m.addr || (meta.len && !m.meta)) {
        intern_put(s->pool, m.name);
        intern_put(s->pool, m.addr);
        intern_put(s->pool, m.meta);
        return NONE;
    }
    m.incarnation = inc;
    m.state = state;
    m.state_change_ms = now;
    uint32_t idx = s->member_count++;
    s->members[idx] = m;
    index_put(s, idx);
    if (is_up(state))
        s->alive_count++;
    if (idx != s->self)
        order_insert(s, idx);
    return idx;
}

static void susp_clear(sl_swim_t *s, member_t *m);

/* Forgets record `idx` (reaping); the last record takes its place. */
static void member_remove(sl_swim_t *s, uint32_t idx) {
    member_t *m = &s->members[idx];
    assert(idx != s->self);
    susp_clear(s, m);
    gq_forget(&s->gq, m);
    if (is_up(m->state))
        s->alive_count--;
    index_del(s, idx);
    intern_put(s->pool, m->name);
    intern_put(s->pool, m->addr);
    intern_put(s->pool, m->meta);
    uint32_t last = --s->member_count;
    if (idx != last) {
        s->members[idx] = s->members[last];
        index_rename(s, last, idx);
        member_t *mv = &s->members[idx];
        if (mv->susp)
            s->susps[mv->susp - 1].member = idx;
        if (mv->gossip_gen) {
            gq_forget(&s->gq, mv);
            gq_push(&s->gq, s->members, idx);
        }
    }
    s->order_pos = s->order_count; /* reshuffle on the next probe */
}

/* ---- Queues ---- */

void swim_out_release(sl_swim_t *s, out_t *o) {
    intern_put(s->pool, o->to_addr);
    intern_put(s->pool, o->to_name);
    intern_put(s->pool, o->target);
    intern_put(s->pool, o->target_addr);
    memset(o, 0, sizeof *o);
}

void swim_ev_release(sl_swim_t *s, event_t *e) {
    intern_put(s->pool, e->name);
    intern_put(s->pool, e->addr);
    intern_put(s->pool, e->meta);
    memset(e, 0, sizeof *e);
}

/* Releases what the last polled output and event referenced: called on
 * entry to every function that may change the table. */
/* Frees a large SYNC scratch array once its message is gone. */
void swim_drop_scratch(sl_swim_t *s) {
    if (s->scratch_cap > 256) {
        sl_free(s->scratch);
        s->scratch = NULL;
        s->scratch_cap = 0;
    }
}

static void enter(sl_swim_t *s, int64_t now) {
    if (s->have_last_out) {
        swim_out_release(s, &s->last_out);
        s->have_last_out = false;
        swim_drop_scratch(s);
    }
    if (s->have_last_ev) {
        swim_ev_release(s, &s->last_ev);
        s->have_last_ev = false;
    }
    if (!s->clock_started) {
        /* The first timers were drawn at a random phase from 0: count them
         * from the first time we are given (a monotonic clock is far from
         * 0), or every peer started together would probe and push-pull in
         * step, all at its first tick. */
        s->clock_started = true;
        s->next_probe_ms += now;
        s->next_gossip_ms += now;
        s->sync_base_ms += now;
        s->next_reap_ms += now;
    }
    if (now > s->now_ms)
        s->now_ms = now;
    /* an idle gossip timer keeps its phase but never fires late */
    if (s->gq.live == 0 && s->next_gossip_ms <= s->now_ms) {
        int64_t iv = s->t.gossip_interval_ms;
        s->next_gossip_ms += ((s->now_ms - s->next_gossip_ms) / iv + 1) * iv;
    }
}

/* Queues an output; takes new references to the strings given. */
static void out_push(sl_swim_t *s, const out_t *o) {
    if (s->out_count >= s->t.max_outputs) {
        s->stats.outputs_dropped++;
        return;
    }
    if (s->out_count == s->out_cap) {
        uint32_t cap = s->out_cap ? s->out_cap * 2 : 16;
        out_t *r = sl_malloc((size_t)cap * sizeof *r);
        if (!r) {
            s->stats.outputs_dropped++;
            return;
        }
        for (uint32_t i = 0; i < s->out_count; i++)
            r[i] = s->outs[(s->out_head + i) % s->out_cap];
        sl_free(s->outs);
        s->outs = r;
        s->out_cap = cap;
        s->out_head = 0;
    }
    out_t *d = &s->outs[(s->out_head + s->out_count++) % s->out_cap];
    *d = *o;
    intern_ref(d->to_addr);
    intern_ref(d->to_name);
    intern_ref(d->target);
    intern_ref(d->target_addr);
}

static void ev_push(sl_swim_t *s, uint8_t kind, const member_t *m, uint8_t old_state,
                    uint64_t old_inc) {
    if (s->quiet)
        return;
    if (s->ev_count == EVENT_CAP) {
        swim_ev_release(s, &s->events[s->ev_head]);
        s->ev_head = (s->ev_head + 1) % s->ev_cap;
        s->ev_count--;
        s->stats.events_dropped++;
    }
    if (s->ev_count == s->ev_cap) {
        uint32_t cap = s->ev_cap ? s->ev_cap * 2 : 16;
        event_t *r = sl_malloc((size_t)cap * sizeof *r);
        if (!r) {
            s->stats.events_dropped++;
            return;
        }
        for (uint32_t i = 0; i < s->ev_count; i++)
            r[i] = s->events[(s->ev_head + i) % s->ev_cap];
        sl_free(s->events);
        s->events = r;
        s->ev_cap = cap;
        s->ev_head = 0;
    }
    event_t *e = &s->events[(s->ev_head + s->ev_count++) % s->ev_cap];
    e->kind = kind;
    e->old_state = old_state;
    e->new_state = m->state;
    e->old_incarnation = old_inc;
    e->incarnation = m->incarnation;
    e->at_ms = s->now_ms;
    e->name = intern_ref(m->name);
    e->addr = intern_ref(m->addr);
    e->meta = intern_ref(m->meta);
}

static void gossip(sl_swim_t *s, uint32_t idx) {
    if (gq_push(&s->gq, s->members, idx) != SL_OK)
        sl_log(SL_LOG_WARNING, "SWIM-NOMEM", "gossip queue: out of memory");
}

/* ---- Timing helpers ---- */

static int64_t scaled(const sl_swim_t *s, uint32_t ms) {
    return (int64_t)ms * (s->awareness + 1);
}

static void awareness_add(sl_swim_t *s, int delta) {
    int64_t a = (int64_t)s->awareness + delta;
    if (a < 0)
        a = 0;
    if (a > (int64_t)s->t.awareness_max - 1)
        a = s->t.awareness_max - 1;
    s->awareness = (uint32_t)a;
}

uint32_t swim_retransmit_limit(const sl_swim_t *s) {
    if (s->bug == SL_SWIM_BUG_GOSSIP_FOREVER)
        return 0;
    uint32_t n = s->alive_count, lg = 1;
    for (uint64_t p = 10; p <= n; p *= 10) /* ceil(log10(n + 1)) */
        lg++;
    return s->t.retransmit_mult * lg;
}

/* ---- Suspicion (Lifeguard) ---- */

static void susp_clear(sl_swim_t *s, member_t *m) {
    if (!m->susp)
        return;
    suspicion_t *sp = &s->susps[m->susp - 1];
    intern_put(s->pool, sp->from);
    for (uint32_t i = 0; i < sp->confirmer_count; i++)
        intern_put(s->pool, sp->confirmers[i]);
    memset(sp, 0, sizeof *sp);
    sp->member = NONE;
    m->susp = 0;
    s->susp_live--;
}

static int64_t susp_timeout(const suspicion_t *sp) {
    if (sp->k == 0 || sp->confirm_count == 0)
        return sp->k == 0 ? sp->min_ms : sp->max_ms;
    double frac = log((double)sp->confirm_count + 1) / log((double)sp->k + 1);
    int64_t t = sp->max_ms - (int64_t)((double)(sp->max_ms - sp->min_ms) * frac);
    return t < sp->min_ms ? sp->min_ms : t;
}

static bool susp_has(const suspicion_t *sp, const sl_istr_t *who) {
    for (uint32_t i = 0; i < sp->confirmer_count; i++)
        if (sp->confirmers[i] == who)
            return true;
    return false;
}

/* Starts a suspicion of member `idx` raised by `from` (interned). */
static void susp_start(sl_swim_t *s, uint32_t idx, sl_istr_t *from) {
    member_t *m = &s->members[idx];
    susp_clear(s, m);
    uint32_t slot = NONE;
    for (uint32_t i = 0; i < s->susp_count; i++)
        if (s->susps[i].member == NONE) {
            slot = i;
            break;
        }
    if (slot == NONE) {
        if (s->susp_count == s->susp_cap) {
            uint32_t cap = s->susp_cap ? s->susp_cap * 2 : 8;
            suspicion_t *r = sl_realloc(s->susps, cap * sizeof *r);
            if (!r) {
                /* no timer: keep the member SUSPECT; a later record or the
                 * member itself settles it */
                sl_log(SL_LOG_WARNING, "SWIM-NOMEM", "suspicion: out of memory");
                return;
            }
            s->susps = r;
            s->susp_cap = cap;
        }
        slot = s->susp_count++;
    }
    suspicion_t *sp = &s->susps[slot];
    memset(sp, 0, sizeof *sp);
    sp->member = idx;
    uint32_t n = s->alive_count;
    uint32_t k = s->t.suspicion_mult > 2 ? s->t.suspicion_mult - 2 : 0;
    if (n < k + 2)
        k = 0;
    double scale = n > 10 ? log10((double)n) : 1.0;
    sp->k = k;
    sp->min_ms = (int64_t)(s->t.suspicion_mult * scale * s->t.probe_interval_ms);
    sp->max_ms = sp->min_ms * s->t.suspicion_max_mult;
    sp->start_ms = s->now_ms;
    sp->deadline_ms = sp->start_ms + susp_timeout(sp);
    sp->from = intern_ref(from);
    if (from)
        sp->confirmers[sp->confirmer_count++] = intern_ref(from);
    m->susp = slot + 1;
    s->susp_live++;
}

/* An independent confirmation by `who`: true if it counted. */
static bool susp_confirm(sl_swim_t *s, member_t *m, sl_istr_t *who) {
    if (!m->susp || !who)
        return false;
    suspicion_t *sp = &s->susps[m->susp - 1];
    if (sp->confirm_count >= sp->k || susp_has(sp, who))
        return false;
    if (sp->confirmer_count < SUSP_MAX_CONFIRM)
        sp->confirmers[sp->confirmer_count++] = intern_ref(who);
    sp->confirm_count++;
    intern_put(s->pool, sp->from);
    sp->from = intern_ref(who);
    sp->deadline_ms = sp->start_ms + susp_timeout(sp);
    s->stats.confirmations++;
    return true;
}

/* ---- State changes ---- */

static void set_state(sl_swim_t *s, uint32_t idx, uint8_t state) {
    member_t *m = &s->members[idx];
    if (m->state == state)
        return;
    if (is_up(m->state) && !is_up(state))
        s->alive_count--;
    else if (!is_up(m->state) && is_up(state))
        s->alive_count++;
    m->state = state;
    m->state_change_ms = s->now_ms;
    if (state != SL_STATE_SUSPECT)
        susp_clear(s, m);
}

sl_istr_t *swim_self_name(const sl_swim_t *s) { return s->members[s->self].name; }

/* Raises our incarnation above `seen` and re-gossips ourselves. */
static void refute(sl_swim_t *s, uint64_t seen, bool accused) {
    member_t *me = &s->members[s->self];
    if (s->bug == SL_SWIM_BUG_NO_REFUTE)
        return;
    uint64_t old_inc = me->incarnation;
    uint64_t top = seen > me->incarnation ? seen : me->incarnation;
    if (top >= UINT64_MAX - 1)
        return; /* cannot happen: records above SL_SWIM_INC_MAX are refused */
    me->incarnation = top + 1;
    gossip(s, s->self);
    s->stats.refutations++;
    if (accused)
        awareness_add(s, 1);
    ev_push(s, SL_SWIM_EV_UPDATE, me, me->state, old_inc);
    sl_log(SL_LOG_INFO, "SWIM-REFUTE", "t=%lld %.*s refutes at incarnation %llu",
           (long long)s->now_ms, (int)me->name->len, (const char *)me->name->bytes,
           (unsigned long long)me->incarnation);
}

/* We (the prober) found member `idx` silent. */
static void suspect_local(sl_swim_t *s, uint32_t idx) {
    member_t *m = &s->members[idx];
    if (m->state == SL_STATE_ALIVE) {
        uint8_t old = m->state;
        set_state(s, idx, SL_STATE_SUSPECT);
        susp_start(s, idx, swim_self_name(s));
        gossip(s, idx);
        ev_push(s, SL_SWIM_EV_STATE, m, old, m->incarnation);
        s->stats.suspects++;
        sl_log(SL_LOG_INFO, "SWIM-SUSPECT", "t=%lld suspect %.*s incarnation %llu",
               (long long)s->now_ms, (int)m->name->len, (const char *)m->name->bytes,
               (unsigned long long)m->incarnation);
    } else if (m->state == SL_STATE_SUSPECT) {
        if (susp_confirm(s, m, swim_self_name(s)))
            gossip(s, idx);
    }
}

static void declare_dead(sl_swim_t *s, uint32_t idx) {
    member_t *m = &s->members[idx];
    uint8_t old = m->state;
    set_state(s, idx, SL_STATE_DEAD);
    gossip(s, idx);
    ev_push(s, SL_SWIM_EV_STATE, m, old, m->incarnation);
    s->stats.deaths++;
    sl_log(SL_LOG_NOTICE, "SWIM-DEAD", "t=%lld %.*s declared dead at incarnation %llu",
           (long long)s->now_ms, (int)m->name->len, (const char *)m->name->bytes,
           (unsigned long long)m->incarnation);
}

static bool record_ok(const sl_member_msg_t *r) {
    return r->name.len >= 1 && r->name.len <= SL_NAME_MAX && r->name.ptr && r->addr.len >= 1 &&
           r->addr.len <= SL_ADDR_MAX && r->addr.ptr && r->state <= SL_STATE_LEFT &&
           r->meta.len <= SL_META_MAX_LEN && (r->meta.len == 0 || r->meta.ptr) &&
           r->from.len <= SL_NAME_MAX;
}

static bool bytes_eq_istr(sl_bytes_t b, const sl_istr_t *s) {
    if (!s)
        return b.len == 0;
    return istr_eq(s, b.ptr, b.len);
}

static int64_t sync_interval(const sl_swim_t *s);

/* Whether address `a` has the host of `b` ("tcp://HOST:PORT"). */
static bool same_host(sl_bytes_t a, const sl_istr_t *b) {
    char ha[SL_ADDR_MAX + 1], hb[SL_ADDR_MAX + 1];
    return b && sl_addr_host(a.ptr, a.len, ha, sizeof ha) == SL_OK &&
           sl_addr_host(b->bytes, b->len, hb, sizeof hb) == SL_OK && !strcmp(ha, hb);
}

enum { REFUSE_INC, REFUSE_ADDR, REFUSE_NAME, REFUSE_NEW };

/* Counts a refused record and logs it, at most one line per REFUSE_LOG_MS
 * (with how many went unlogged): a flood of forgeries costs no disk.
 * Returns what sl_swim_receive reports for it. */
static sl_err refuse(sl_swim_t *s, int why, const sl_member_msg_t *r, const char *what) {
    static const char *const ids[] = {"SWIM-REFUSE-INC", "SWIM-REFUSE-ADDR", "SWIM-REFUSE-NAME",
                                      "SWIM-REFUSE-NEW"};
    s->stats.records_refused++;
    uint64_t *c[] = {&s->stats.refused_inc, &s->stats.refused_addr, &s->stats.refused_name,
                     &s->stats.refused_new};
    (*c[why])++;
    uint64_t left_out;
    if (sl_log_limit(&s->refuse_log, (uint64_t)s->now_ms, REFUSE_LOG_MS, &left_out))
        sl_log(SL_LOG_WARNING, ids[why],
               "t=%lld refused a record of %.*s (incarnation %llu, %.*s): %s; %llu more "
               "refused since the last such line",
               (long long)s->now_ms, (int)(r->name.len > SL_NAME_MAX ? SL_NAME_MAX : r->name.len),
               (const char *)r->name.ptr, (unsigned long long)r->incarnation,
               (int)(r->addr.len > SL_ADDR_MAX ? SL_ADDR_MAX : r->addr.len),
               (const char *)r->addr.ptr, what, (unsigned long long)left_out);
    return why == REFUSE_NEW ? SL_ETOOBIG : SL_EPROTO;
}

/* Whether one more unknown member may be added now (`from_msg`: learned
 * from a message rather than sl_swim_add_member). */
static bool new_member_ok(sl_swim_t *s, bool from_msg, const char **why) {
    /* the answer to our own SYNC brings the whole table */
    bool budget = from_msg && !s->joining_reply;
    if (budget) {
        if (s->now_ms - s->new_window_ms >= sync_interval(s)) {
            s->new_window_ms = s->now_ms;
            s->new_in_window = 0;
        }
        if (s->msg_new >= s->t.max_new_per_msg) {
            *why = "too many unknown members in one message (max_new_per_msg)";
            return false;
        }
        if (s->new_in_window >= s->t.max_new_per_period) {
            *why = "too many unknown members this push-pull interval (max_new_per_period)";
            return false;
        }
    }
    if (s->member_count >= s->t.max_members) {
        /* Full: a record of a member given up (DEAD or LEFT, the longest
         * so) makes room, as reaping would later; made-up members die
         * when probed, so a flood cannot keep real ones out for good. */
        uint32_t old = NONE;
        for (uint32_t i = 0; i < s->member_count; i++)
            if (i != s->self && !is_up(s->members[i].state) &&
                (old == NONE ||
                 s->members[i].state_change_ms < s->members[old].state_change_ms))
                old = i;
        if (old == NONE) {
            *why = "member table full (max_members)";
            return false;
        }
        member_t *m = &s->members[old];
        ev_push(s, SL_SWIM_EV_REAP, m, m->state, m->incarnation);
        member_remove(s, old);
    }
    if (budget) {
        s->msg_new++;
        s->new_in_window++;
    }
    return true;
}

/* Applies one record; `spread` queues it for gossip when it changed our
 * view. Returns SL_EPROTO for a malformed record. */
static sl_err apply(sl_swim_t *s, const sl_member_msg_t *r, bool spread) {
    if (!record_ok(r))
        return SL_EPROTO;
    s->stats.gossip_received++;
    if (!s->any_addr && !sl_addr_is_numeric(r->addr.ptr, r->addr.len))
        return refuse(s, REFUSE_NAME, r, "address is not a numeric HOST:PORT");
    if (r->incarnation > SL_SWIM_INC_MAX)
        return refuse(s, REFUSE_INC, r, "incarnation above the cap (2^62)");
    uint32_t idx = find(s, r->name.ptr, r->name.len);
    if (idx != NONE && r->incarnation > s->members[idx].incarnation &&
        r->incarnation - s->members[idx].incarnation > SL_SWIM_INC_JUMP_MAX)
        return refuse(s, REFUSE_INC, r, "incarnation jumps more than 2^20 above the known one");
    if (idx == s->self) {
        member_t *me = &s->members[s->self];
        if (s->left)
            return SL_OK;
        if (r->incarnation > me->incarnation ||
            (r->incarnation == me->incarnation && r->state != SL_STATE_ALIVE))
            refute(s, r->incarnation, r->state != SL_STATE_ALIVE);
        return SL_OK;
    }
    if (idx == NONE) {
        const char *why = NULL;
        if (!new_member_ok(s, spread, &why))
            return refuse(s, REFUSE_NEW, r, why);
        idx = member_add(s, r->name, r->addr, r->meta, r->incarnation, r->state, s->now_ms);
        if (idx == NONE)
            return SL_ENOMEM;
        member_t *m = &s->members[idx];
        if (r->state == SL_STATE_SUSPECT) {
            sl_istr_t *from = r->from.len ? intern_get(s->pool, r->from.ptr, r->from.len) : NULL;
            susp_start(s, idx, from);
            intern_put(s->pool, from);
        }
        if (spread)
            gossip(s, idx);
        ev_push(s, SL_SWIM_EV_JOIN, m, SL_SWIM_STATE_NONE, m->incarnation);
        sl_log(SL_LOG_INFO, "SWIM-JOIN", "t=%lld member %.*s (%s, incarnation %llu)",
               (long long)s->now_ms, (int)r->name.len, (const char *)r->name.ptr,
               swim_state_name(r->state), (unsigned long long)r->incarnation);
        return SL_OK;
    }
    member_t *m = &s->members[idx];
    if (r->state == SL_STATE_SUSPECT && m->state == SL_STATE_SUSPECT &&
        r->incarnation == m->incarnation) {
        if (r->from.len) {
            sl_istr_t *from = intern_get(s->pool, r->from.ptr, r->from.len);
            if (susp_confirm(s, m, from) && spread)
                gossip(s, idx);
            intern_put(s->pool, from);
        }
        return SL_OK;
    }
    bool newer = r->incarnation > m->incarnation ||
                 (r->incarnation == m->incarnation && state_rank(r->state) > state_rank(m->state));
    if (s->bug == SL_SWIM_BUG_INC_DOWN && r->incarnation < m->incarnation)
        newer = true;
    if (!newer)
        return SL_OK;
    /* A member moves only by restarting: while we hold it up its address
     * stays; once we hold it dead or left, it may come back on another
     * port of the same host at once, and on another host after a
     * push-pull interval (in which a member falsely declared dead hears
     * of it and refutes). Else anyone could redirect a member's traffic
     * to himself by gossip (docs/membership.md, "What a record may
     * claim"). */
    if (r->incarnation != m->incarnation && !bytes_eq_istr(r->addr, m->addr) &&
        (is_up(m->state) || (!same_host(r->addr, m->addr) &&
                             s->now_ms - m->state_change_ms < sync_interval(s))))
        return refuse(s, REFUSE_ADDR, r, "address change of a member not given up");
    uint8_t old = m->state;
    uint64_t old_inc = m->incarnation;
    bool new_inc = r->incarnation != m->incarnation;
    bool changed_body = false;
    if (new_inc) {
        if (!bytes_eq_istr(r->addr, m->addr)) {
            sl_istr_t *a = intern_get(s->pool, r->addr.ptr, r->addr.len);
            if (!a)
                return SL_ENOMEM;
            intern_put(s->pool, m->addr);
            m->addr = a;
            changed_body = true;
        }
        if (!bytes_eq_istr(r->meta, m->meta)) {
            sl_istr_t *mt = r->meta.len ? intern_get(s->pool, r->meta.ptr, r->meta.len) : NULL;
            if (r->meta.len && !mt)
                return SL_ENOMEM;
            intern_put(s->pool, m->meta);
            m->meta = mt;
            changed_body = true;
        }
    }
    m->incarnation = r->incarnation;
    set_state(s, idx, r->state);
    if (r->state == SL_STATE_SUSPECT && (new_inc || old != SL_STATE_SUSPECT)) {
        sl_istr_t *from = r->from.len ? intern_get(s->pool, r->from.ptr, r->from.len) : NULL;
        susp_start(s, idx, from);
        intern_put(s->pool, from);
    }
    if (spread)
        gossip(s, idx);
    if (old != m->state) {
        ev_push(s, SL_SWIM_EV_STATE, m, old, old_inc);
        sl_log(SL_LOG_INFO, "SWIM-STATE", "t=%lld %.*s %s -> %s (incarnation %llu)",
               (long long)s->now_ms, (int)m->name->len, (const char *)m->name->bytes,
               swim_state_name(old), swim_state_name(m->state), (unsigned long long)m->incarnation);
    } else if (new_inc || changed_body) {
        ev_push(s, SL_SWIM_EV_UPDATE, m, old, old_inc);
    }
    return SL_OK;
}

/* ---- Lifecycle ---- */

sl_err sl_swim_new(const sl_swim_config_t *cfg, sl_swim_t **out) {
    *out = NULL;
    if (!cfg || !cfg->name || !cfg->addr)
        return SL_EINVAL;
    size_t nlen = strlen(cfg->name), alen = strlen(cfg->addr);
    if (nlen < 1 || nlen > SL_NAME_MAX || alen < 1 || alen > SL_ADDR_MAX)
        return SL_EINVAL;
    if (cfg->meta_len && (!cfg->meta || sl_meta_validate(cfg->meta, cfg->meta_len) != SL_OK))
        return SL_EINVAL;
    if (cfg->incarnation > SL_SWIM_INC_MAX)
        return SL_ERANGE; /* its refutations could wrap */
    sl_swim_t *s = sl_calloc(1, sizeof *s);
    if (!s)
        return SL_ENOMEM;
    sl_err err = SL_ENOMEM;
    fill_timing(&s->t, &cfg->timing);
    s->any_addr = cfg->any_addr;
    sl_rng_seed(&s->rng, cfg->seed ^ intern_hash((const uint8_t *)cfg->name, nlen));
    gq_init(&s->gq);
    s->next_seq = 1;
    if (cfg->intern) {
        s->pool = cfg->intern;
    } else {
        if ((err = sl_intern_new(&s->pool)) != SL_OK)
            goto fail;
        s->own_pool = true;
    }
    sl_bytes_t meta = {cfg->meta, cfg->meta_len};
    s->self = 0;
    if (member_add(s, sl_bytes_str(cfg->name), sl_bytes_str(cfg->addr), meta, cfg->incarnation,
                   SL_STATE_ALIVE, 0) != 0) {
        err = SL_ENOMEM;
        goto fail;
    }
    /* first timers at a random phase so a fleet started together spreads */
    s->next_probe_ms = (int64_t)sl_rng_below(&s->rng, s->t.probe_interval_ms);
    s->next_gossip_ms = (int64_t)sl_rng_below(&s->rng, s->t.gossip_interval_ms);
    s->sync_base_ms = 0;
    s->sync_frac = sl_rng_double(&s->rng); /* spread a fleet's first push-pulls */
    s->next_reap_ms = REAP_SCAN_MS;
    *out = s;
    return SL_OK;
fail:
    sl_swim_destroy(&s);
    return err;
}

void sl_swim_destroy(sl_swim_t **pp) {
    if (!pp || !*pp)
        return;
    sl_swim_t *s = *pp;
    if (s->have_last_out)
        swim_out_release(s, &s->last_out);
    if (s->have_last_ev)
        swim_ev_release(s, &s->last_ev);
    for (uint32_t i = 0; i < s->out_count; i++)
        swim_out_release(s, &s->outs[(s->out_head + i) % s->out_cap]);
    for (uint32_t i = 0; i < s->ev_count; i++)
        swim_ev_release(s, &s->events[(s->ev_head + i) % s->ev_cap]);
    for (uint32_t i = 0; i < s->member_count; i++) {
        member_t *m = &s->members[i];
        susp_clear(s, m);
        intern_put(s->pool, m->name);
        intern_put(s->pool, m->addr);
        intern_put(s->pool, m->meta);
    }
    for (uint32_t i = 0; i < s->relay_count; i++) {
        intern_put(s->pool, s->relays[i].req_addr);
        intern_put(s->pool, s->relays[i].req_name);
        intern_put(s->pool, s->relays[i].target);
    }
    intern_put(s->pool, s->probe.target);
    intern_put(s->pool, s->probe_next);
    for (uint32_t i = 0; i < SYNC_ASKED_MAX; i++)
        intern_put(s->pool, s->asked[i]);
    for (uint32_t i = 0; i < s->seed_count; i++)
        intern_put(s->pool, s->seeds[i].addr);
    if (s->own_pool)
        sl_intern_destroy(&s->pool);
    gq_fini(&s->gq);
    sl_free(s->members);
    sl_free(s->index);
    sl_free(s->order);
    sl_free(s->susps);
    sl_free(s->outs);
    sl_free(s->events);
    sl_free(s->seeds);
    sl_free(s->scratch);
    sl_free(s);
    *pp = NULL;
}

/* ---- Sending ---- */

static void send_to_member(sl_swim_t *s, uint8_t type, uint32_t idx, uint32_t seq,
                           sl_istr_t *target, sl_istr_t *target_addr) {
    out_t o = {0};
    o.type = type;
    o.seq = seq;
    o.to_addr = s->members[idx].addr;
    o.to_name = s->members[idx].name;
    o.target = target;
    o.target_addr = target_addr;
    out_push(s, &o);
}

static void send_gossip_only(sl_swim_t *s, uint32_t idx) {
    out_t o = {0};
    o.type = SL_MSG_ACK;
    o.gossip_only = 1;
    o.to_addr = s->members[idx].addr;
    o.to_name = s->members[idx].name;
    o.target = swim_self_name(s);
    out_push(s, &o);
}

/* Whether we sent a SYNC request to `addr` within the last push-pull
 * interval; forgets it (one answer per request). */
static bool sync_asked(sl_swim_t *s, sl_bytes_t addr) {
    for (uint32_t i = 0; i < SYNC_ASKED_MAX; i++)
        if (s->asked[i] && istr_eq(s->asked[i], addr.ptr, addr.len) &&
            s->now_ms - s->asked_at[i] <= sync_interval(s)) {
            intern_put(s->pool, s->asked[i]);
            s->asked[i] = NULL;
            return true;
        }
    return false;
}

/* Queues a SYNC. `slice`: a periodic push-pull between members, which
 * carries at most SYNC_SLICE records (swim_out.c); else the whole table
 * (a join, a joiner's follow-up, a seed dial, a SYNC to a dead member,
 * and the answers to those). */
static void send_sync(sl_swim_t *s, sl_istr_t *addr, sl_istr_t *name, bool join, bool reply,
                      bool slice) {
    if (!reply) {
        uint32_t k = s->asked_next++ % SYNC_ASKED_MAX;
        intern_put(s->pool, s->asked[k]);
        s->asked[k] = intern_ref(addr);
        s->asked_at[k] = s->now_ms;
    }
    out_t o = {0};
    o.type = SL_MSG_SYNC;
    o.join = join;
    o.reply = reply;
    o.slice = slice;
    o.to_addr = addr;
    o.to_name = name;
    out_push(s, &o);
}

/* Whether a SYNC request to `addr` is waiting for its answer (sync_asked
 * without taking it). */
static bool sync_waiting(const sl_swim_t *s, sl_bytes_t addr) {
    for (uint32_t i = 0; i < SYNC_ASKED_MAX; i++)
        if (s->asked[i] && istr_eq(s->asked[i], addr.ptr, addr.len) &&
            s->now_ms - s->asked_at[i] <= sync_interval(s))
            return true;
    return false;
}

/* A message from a member we hold DEAD or do not know: it is up, so it
 * refuted a death whose refutation missed us, or joined while its join
 * gossip ran out before it reached us. Both happen when a cluster forms
 * in a storm of suspicions (200 peers on 2 cores: a peer kept a dead or
 * missing record until a periodic push-pull met a member that knew
 * better, 2 minutes at 200 members, 5 in one run). A push-pull with the
 * sender now repairs it: its answer carries the sender's own record (and
 * ours tells it of the death, if it had not heard). At most one per
 * REPAIR_PERIODS probe periods, none while we are alone (joining) or to a
 * member whose answer we wait for: a member that joins is often heard
 * from before its join gossip, and all of them must not each pull a
 * table then. A member that left is not asked: it still sends its leave
 * PINGs. */
#define REPAIR_PERIODS 2
static void repair_from(sl_swim_t *s, const sl_msg_t *msg) {
    if (s->bug == SL_SWIM_BUG_NO_PUSH_PULL || s->alive_count <= 1 || s->now_ms < s->repair_ms)
        return;
    uint32_t i = find(s, msg->from.ptr, msg->from.len);
    if (i == s->self || (i != NONE && s->members[i].state != SL_STATE_DEAD) ||
        sync_waiting(s, msg->from_addr))
        return;
    sl_istr_t *addr = intern_get(s->pool, msg->from_addr.ptr, msg->from_addr.len);
    sl_istr_t *name = intern_get(s->pool, msg->from.ptr, msg->from.len);
    if (addr && name) {
        send_sync(s, addr, name, false, false, false);
        s->stats.syncs_repair++;
        s->repair_ms = s->now_ms + (int64_t)REPAIR_PERIODS * s->t.probe_interval_ms;
    }
    intern_put(s->pool, addr);
    intern_put(s->pool, name);
}

static uint32_t next_seq(sl_swim_t *s) {
    uint32_t q = s->next_seq++;
    if (s->next_seq == 0)
        s->next_seq = 1;
    return q;
}

/* A random member other than us and `not` in a state accepted by `want`
 * (bit per state), or NONE. */
static uint32_t random_member(sl_swim_t *s, unsigned want, uint32_t not) {
    uint32_t n = s->member_count;
    if (n <= 1)
        return NONE;
    for (int tries = 0; tries < 8; tries++) {
        uint32_t i = (uint32_t)sl_rng_below(&s->rng, n);
        if (i != s->self && i != not && (want >> s->members[i].state & 1))
            return i;
    }
    uint32_t start = (uint32_t)sl_rng_below(&s->rng, n);
    for (uint32_t j = 0; j < n; j++) {
        uint32_t i = (start + j) % n;
        if (i != s->self && i != not && (want >> s->members[i].state & 1))
            return i;
    }
    return NONE;
}

#define WANT_UP (1u << SL_STATE_ALIVE | 1u << SL_STATE_SUSPECT)
#define WANT_ALIVE (1u << SL_STATE_ALIVE)
#define WANT_DEAD (1u << SL_STATE_DEAD)

/* Up to `k` distinct random members in `want`, excluding `not`. */
static uint32_t random_members(sl_swim_t *s, unsigned want, uint32_t not, uint32_t k,
                               uint32_t *out) {
    uint32_t n = 0;
    for (uint32_t tries = 0; n < k && tries < 4 * k + 8; tries++) {
        uint32_t i = random_member(s, want, not);
        if (i == NONE)
            break;
        bool dup = false;
        for (uint32_t j = 0; j < n; j++)
            dup |= out[j] == i;
        if (!dup)
            out[n++] = i;
    }
    return n;
}

/* ---- Probing ---- */

static void probe_end(sl_swim_t *s) {
    intern_put(s->pool, s->probe.target);
    memset(&s->probe, 0, sizeof s->probe);
}

static void probe_start(sl_swim_t *s) {
    uint32_t target = NONE;
    if (s->probe_next) {
        sl_istr_t *h = s->probe_next;
        target = swim_find_hashed(s, h->bytes, h->len, h->hash);
        if (target != NONE && (target == s->self || !is_up(s->members[target].state)))
            target = NONE;
        intern_put(s->pool, h);
        s->probe_next = NULL;
    }
    for (uint32_t tries = 0; tries <= s->order_count + 1 && target == NONE; tries++) {
        if (s->order_pos >= s->order_count) {
            /* a new pass: every other record, shuffled */
            s->order_count = 0;
            if (s->order_cap < s->member_count) {
                uint32_t *o = sl_realloc(s->order, s->member_count * sizeof *o);
                if (!o)
                    return;
                s->order = o;
                s->order_cap = s->member_count;
            }
            for (uint32_t i = 0; i < s->member_count; i++)
                if (i != s->self && is_up(s->members[i].state))
                    s->order[s->order_count++] = i;
            for (uint32_t i = s->order_count; i > 1; i--) {
                uint32_t j = (uint32_t)sl_rng_below(&s->rng, i);
                uint32_t t = s->order[i - 1];
                s->order[i - 1] = s->order[j];
                s->order[j] = t;
            }
            s->order_pos = 0;
            if (s->order_count == 0)
                return;
        }
        uint32_t i = s->order[s->order_pos++];
        if (i < s->member_count && i != s->self && is_up(s->members[i].state))
            target = i;
    }
    if (target == NONE)
        return;
    member_t *m = &s->members[target];
    s->probe.active = true;
    s->probe.seq = next_seq(s);
    s->probe.target = intern_ref(m->name);
    s->probe.incarnation = m->incarnation;
    s->probe.timeout_ms = s->now_ms + scaled(s, s->t.probe_timeout_ms);
    s->probe.period_end_ms = s->now_ms + scaled(s, s->t.probe_interval_ms);
    send_to_member(s, SL_MSG_PING, target, s->probe.seq, m->name, NULL);
    s->stats.probes++;
}

static void probe_indirect(sl_swim_t *s) {
    probe_t *p = &s->probe;
    p->indirect_sent = true;
    uint32_t tidx = swim_find_hashed(s, p->target->bytes, p->target->len, p->target->hash);
    if (tidx == NONE)
        return;
    uint32_t relays[16];
    uint32_t k = s->t.indirect_count < 16 ? s->t.indirect_count : 16;
    uint32_t n = random_members(s, WANT_ALIVE, tidx, k, relays);
    for (uint32_t i = 0; i < n; i++) {
        out_t o = {0};
        o.type = SL_MSG_PING_REQ;
        o.seq = p->seq;
        o.want_nack = 1;
        o.to_addr = s->members[relays[i]].addr;
        o.to_name = s->members[relays[i]].name;
        o.target = s->members[tidx].name;
        o.target_addr = s->members[tidx].addr;
        out_push(s, &o);
        s->stats.ping_reqs_sent++;
    }
    p->expected_nacks = n;
    /* and one more direct try (memberlist's fallback probe): on a lossy
     * network it turns most lost PING/ACK pairs into a late answer */
    send_to_member(s, SL_MSG_PING, tidx, p->seq, s->members[tidx].name, NULL);
}

static void probe_verdict(sl_swim_t *s) {
    probe_t *p = &s->probe;
    uint32_t tidx = swim_find_hashed(s, p->target->bytes, p->target->len, p->target->hash);
    if (s->bug == SL_SWIM_BUG_EAGER_DEAD) {
        if (tidx != NONE && is_up(s->members[tidx].state))
            declare_dead(s, tidx);
        probe_end(s);
        return;
    }
    if (p->acked) {
        probe_end(s);
        return;
    }
    s->stats.probe_failures++;
    if (p->expected_nacks > 0)
        awareness_add(s, (int)(p->expected_nacks - (p->nacks < p->expected_nacks ? p->nacks
                                                                                : p->expected_nacks)));
    else
        awareness_add(s, 1);
    if (tidx != NONE && s->members[tidx].incarnation == p->incarnation &&
        s->bug != SL_SWIM_BUG_NO_SUSPECT)
        suspect_local(s, tidx);
    probe_end(s);
}

/* ---- Receiving ---- */

static void on_ack(sl_swim_t *s, const sl_msg_t *msg) {
    uint32_t seq = msg->u.ack.seq;
    if (seq == 0)
        return; /* gossip only */
    probe_t *p = &s->probe;
    if (p->active && seq == p->seq && istr_eq(p->target, msg->u.ack.target.ptr,
                                              msg->u.ack.target.len)) {
        if (!p->acked) {
            p->acked = true;
            s->stats.probe_acks++;
            if (!p->indirect_sent)
                awareness_add(s, -1);
        }
        return;
    }
    for (uint32_t i = 0; i < s->relay_count; i++) {
        relay_t *r = &s->relays[i];
        if (r->our_seq != seq || !istr_eq(r->target, msg->u.ack.target.ptr, msg->u.ack.target.len))
            continue;
        out_t o = {0};
        o.type = SL_MSG_ACK;
        o.seq = r->their_seq;
        o.to_addr = r->req_addr;
        o.to_name = r->req_name;
        o.target = r->target;
        out_push(s, &o);
        intern_put(s->pool, r->req_addr);
        intern_put(s->pool, r->req_name);
        intern_put(s->pool, r->target);
        s->relays[i] = s->relays[--s->relay_count];
        return;
    }
    s->stats.msgs_ignored++; /* late or unknown */
}

static void on_ping(sl_swim_t *s, const sl_msg_t *msg) {
    if (!istr_eq(swim_self_name(s), msg->u.ping.target.ptr, msg->u.ping.target.len)) {
        s->stats.msgs_ignored++; /* meant for whoever had our address before */
        return;
    }
    sl_istr_t *addr = intern_get(s->pool, msg->from_addr.ptr, msg->from_addr.len);
    sl_istr_t *name = intern_get(s->pool, msg->from.ptr, msg->from.len);
    if (addr && name) {
        out_t o = {0};
        o.type = SL_MSG_ACK;
        o.seq = msg->u.ping.seq;
        o.to_addr = addr;
        o.to_name = name;
        o.target = swim_self_name(s);
        out_push(s, &o);
    }
    intern_put(s->pool, addr);
    intern_put(s->pool, name);
}

static void on_ping_req(sl_swim_t *s, const sl_msg_t *msg) {
    const sl_ping_req_t *pr = &msg->u.ping_req;
    if (s->relay_count >= RELAY_MAX || !pr->target.len || !pr->target_addr.len) {
        s->stats.msgs_ignored++;
        return;
    }
    relay_t r = {0};
    r.our_seq = next_seq(s);
    r.their_seq = pr->seq;
    r.want_nack = pr->want_nack;
    r.nack_at_ms = s->now_ms + (scaled(s, s->t.probe_timeout_ms) * 4) / 5;
    r.req_addr = intern_get(s->pool, msg->from_addr.ptr, msg->from_addr.len);
    r.req_name = intern_get(s->pool, msg->from.ptr, msg->from.len);
    r.target = intern_get(s->pool, pr->target.ptr, pr->target.len);
    sl_istr_t *taddr = intern_get(s->pool, pr->target_addr.ptr, pr->target_addr.len);
    if (!r.req_addr || !r.req_name || !r.target || !taddr) {
        intern_put(s->pool, r.req_addr);
        intern_put(s->pool, r.req_name);
        intern_put(s->pool, r.target);
        intern_put(s->pool, taddr);
        return;
    }
    out_t o = {0};
    o.type = SL_MSG_PING;
    o.seq = r.our_seq;
    o.to_addr = taddr;
    o.to_name = r.target;
    o.target = r.target;
    out_push(s, &o);
    intern_put(s->pool, taddr);
    s->relays[s->relay_count++] = r;
    s->stats.ping_reqs_served++;
}

sl_err sl_swim_receive(sl_swim_t *s, int64_t now, const sl_msg_t *msg) {
    enter(s, now);
    if (!msg)
        return SL_EINVAL;
    if (msg->type < SL_MSG_PING || msg->type > SL_MSG_SYNC)
        return SL_ETYPE;
    s->stats.msgs_received++;
    if (s->left) {
        /* only the answers to our leave PINGs still matter */
        if (msg->type == SL_MSG_ACK && msg->u.ack.seq && msg->u.ack.seq == s->leave_seq)
            s->leave_acked = true;
        return SL_OK;
    }
    if (!msg->from.len || msg->from.len > SL_NAME_MAX || !msg->from_addr.len ||
        msg->from_addr.len > SL_ADDR_MAX || msg->gossip_count > SL_GOSSIP_MAX) {
        s->stats.msgs_ignored++;
        return SL_EPROTO;
    }
    /* Every address in it may be dialled: none may need a resolver. */
    if (!s->any_addr && (!sl_addr_is_numeric(msg->from_addr.ptr, msg->from_addr.len) ||
                         (msg->type == SL_MSG_PING_REQ &&
                          !sl_addr_is_numeric(msg->u.ping_req.target_addr.ptr,
                                              msg->u.ping_req.target_addr.len)))) {
        s->stats.msgs_ignored++;
        s->stats.refused_name++;
        return SL_EPROTO;
    }
    s->msg_new = 0;
    s->joining_reply = false;
    sl_err err = SL_OK;
    if (msg->type != SL_MSG_SYNC) {
        for (size_t i = 0; i < msg->gossip_count; i++) {
            sl_err e = apply(s, &msg->gossip[i], true);
            if (e && !err)
                err = e;
        }
    }
    switch (msg->type) {
    case SL_MSG_PING: on_ping(s, msg); break;
    case SL_MSG_PING_REQ: on_ping_req(s, msg); break;
    case SL_MSG_ACK: on_ack(s, msg); break;
    case SL_MSG_NACK:
        if (s->probe.active && msg->u.nack.seq == s->probe.seq) {
            s->probe.nacks++;
            s->stats.nacks_received++;
        }
        break;
    case SL_MSG_SYNC: {
        const sl_sync_t *sy = &msg->u.sync;
        s->stats.syncs_received++;
        if (sy->member_count > SL_SYNC_MAX_MEMBERS || (sy->member_count && !sy->members))
            return SL_EPROTO;
        bool was_alone = s->alive_count <= 1;
        /* A push-pull from a member we hold up is answered with a slice
         * of our table; a joiner, a stranger (a seed dial from another
         * cluster, a partition healing) or one we hold dead gets all of
         * it. Looked at before its records are applied (they name it). */
        uint32_t from = find(s, msg->from.ptr, msg->from.len);
        bool member = from != NONE && from != s->self && is_up(s->members[from].state);
        /* ... and one whose table is behind ours (a record at a lower
         * incarnation than we hold: a refuted death it missed, as after
         * a storm of suspicions) gets all of it, so that one answer
         * repairs it as a whole-table push-pull did. */
        for (size_t i = 0; member && i < sy->member_count; i++) {
            const sl_member_msg_t *r = &sy->members[i];
            uint32_t k = find(s, r->name.ptr, r->name.len);
            if (k != NONE && s->members[k].incarnation > r->incarnation)
                member = false;
        }
        /* The answer to a SYNC we sent (our push-pull, or any answer while
         * we are alone: a seed may answer from another address than the
         * one we dialled) brings the whole table, up to max_members; any
         * other message adds few members we did not know. */
        s->joining_reply = sy->reply && (sync_asked(s, msg->from_addr) || was_alone);
        for (size_t i = 0; i < sy->member_count; i++) {
            sl_err e = apply(s, &sy->members[i], true);
            if (e && !err)
                err = e;
        }
        s->joining_reply = false;
        /* Our join is answered. Members that joined at the same time as
         * we did are missing from that table, and their join gossip may
         * have run out before anyone knew us: one more push-pull a few
         * probe periods from now catches them, instead of the next one a
         * whole interval (30-60 s) away. */
        if (sy->reply && was_alone && s->alive_count > 1) {
            s->sync_followup = true;
            s->sync_base_ms = s->now_ms;
            s->sync_frac = (double)s->t.probe_interval_ms * (2.0 + 2.0 * sl_rng_double(&s->rng)) /
                           (double)sync_interval(s);
        }
        if (!sy->reply) {
            sl_istr_t *addr = intern_get(s->pool, msg->from_addr.ptr, msg->from_addr.len);
            sl_istr_t *name = intern_get(s->pool, msg->from.ptr, msg->from.len);
            if (addr && name)
                send_sync(s, addr, name, false, true, member && !sy->join);
            intern_put(s->pool, addr);
            intern_put(s->pool, name);
        }
        break;
    }
    }
    if (msg->type != SL_MSG_SYNC)
        repair_from(s, msg);
    if (err == SL_EPROTO)
        s->stats.msgs_ignored++;
    return err;
}

sl_err sl_swim_add_member(sl_swim_t *s, int64_t now, const sl_member_msg_t *rec) {
    enter(s, now);
    s->quiet = true;
    sl_err err = apply(s, rec, false);
    s->quiet = false;
    return err;
}

sl_err sl_swim_reserve(sl_swim_t *s, size_t count) {
    if (count > SL_SYNC_MAX_MEMBERS * 4)
        return SL_ETOOBIG;
    if (count > s->member_cap) {
        member_t *m = sl_realloc(s->members, count * sizeof *m);
        if (!m)
            return SL_ENOMEM;
        s->members = m;
        s->member_cap = (uint32_t)count;
    }
    while (s->index_cap < 2 * count)
        if (index_grow(s) != SL_OK)
            return SL_ENOMEM;
    if (count > s->order_cap) {
        uint32_t *o = sl_realloc(s->order, count * sizeof *o);
        if (!o)
            return SL_ENOMEM;
        s->order = o;
        s->order_cap = (uint32_t)count;
    }
    return SL_OK;
}

/* ---- Timers ---- */

static void tick_seeds(sl_swim_t *s) {
    for (uint32_t i = 0; i < s->seed_count; i++) {
        seed_t *sd = &s->seeds[i];
        if (s->now_ms < sd->next_dial_ms)
            continue;
        bool alone = s->alive_count <= 1;
        bool known = false;
        for (uint32_t j = 0; j < s->member_count && !known; j++)
            known = j != s->self && s->members[j].addr == sd->addr &&
                    is_up(s->members[j].state);
        if (alone || (!known && s->bug != SL_SWIM_BUG_NO_PUSH_PULL)) {
            send_sync(s, sd->addr, NULL, alone, false, false);
            s->stats.seed_dials++;
        }
        sd->next_dial_ms = s->now_ms + (alone ? s->t.join_retry_ms : s->t.seed_redial_ms);
    }
}

int64_t swim_sync_interval(const sl_swim_t *s) {
    return sync_interval(s);
}

static int64_t sync_interval(const sl_swim_t *s) {
    /* memberlist's pushPullScale: above 32 members, slower with log2 N */
    uint32_t n = s->alive_count;
    int64_t mult = 1;
    if (n > 32)
        mult = (int64_t)ceil(log2((double)n) - log2(32.0)) + 1;
    return (int64_t)s->t.push_pull_interval_ms * mult;
}

/* The interval is recomputed from the current size, so a table that grew
 * (a join, a preload) slows the push-pulls at once. */
static int64_t next_sync(const sl_swim_t *s) {
    return s->sync_base_ms + 1 + (int64_t)(s->sync_frac * (double)sync_interval(s));
}

static void tick_sync(sl_swim_t *s) {
    s->sync_base_ms = s->now_ms;
    s->sync_frac = 1.0;
    if (s->bug == SL_SWIM_BUG_NO_PUSH_PULL)
        return;
    s->sync_counter++;
    uint32_t i = NONE;
    if (s->t.dead_sync_every && s->sync_counter % s->t.dead_sync_every == 0)
        i = random_member(s, WANT_DEAD, NONE);
    if (i == NONE)
        i = random_member(s, WANT_UP, NONE);
    if (i == NONE)
        return;
    /* A joiner's follow-up is flagged join: it and its answer carry whole
     * tables (it looks for the members that joined with it). */
    bool follow = s->sync_followup;
    s->sync_followup = false;
    send_sync(s, s->members[i].addr, s->members[i].name, follow, false,
              !follow && is_up(s->members[i].state));
}

static void tick_gossip(sl_swim_t *s) {
    int64_t iv = s->t.gossip_interval_ms;
    s->next_gossip_ms += ((s->now_ms - s->next_gossip_ms) / iv + 1) * iv;
    if (s->gq.live == 0)
        return;
    uint32_t to[64];
    uint32_t k = s->t.gossip_fanout < 64 ? s->t.gossip_fanout : 64;
    uint32_t n = random_members(s, WANT_UP, NONE, k, to);
    for (uint32_t i = 0; i < n; i++)
        send_gossip_only(s, to[i]);
}

static void tick_relays(sl_swim_t *s) {
    for (uint32_t i = 0; i < s->relay_count;) {
        relay_t *r = &s->relays[i];
        if (s->now_ms < r->nack_at_ms) {
            i++;
            continue;
        }
        if (r->want_nack) {
            out_t o = {0};
            o.type = SL_MSG_NACK;
            o.seq = r->their_seq;
            o.to_addr = r->req_addr;
            o.to_name = r->req_name;
            out_push(s, &o);
            s->stats.nacks_sent++;
        }
        intern_put(s->pool, r->req_addr);
        intern_put(s->pool, r->req_name);
        intern_put(s->pool, r->target);
        s->relays[i] = s->relays[--s->relay_count];
    }
}

static void tick_suspicions(sl_swim_t *s) {
    for (uint32_t i = 0; i < s->susp_count; i++) {
        suspicion_t *sp = &s->susps[i];
        if (sp->member != NONE && s->now_ms >= sp->deadline_ms)
            declare_dead(s, sp->member);
    }
}

static void tick_reap(sl_swim_t *s) {
    s->next_reap_ms = s->now_ms + REAP_SCAN_MS;
    for (uint32_t i = 0; i < s->member_count;) {
        member_t *m = &s->members[i];
        if (i != s->self && !is_up(m->state) && s->now_ms - m->state_change_ms >= s->t.reap_ms) {
            ev_push(s, SL_SWIM_EV_REAP, m, m->state, m->incarnation);
            member_remove(s, i);
            continue;
        }
        i++;
    }
}

sl_err sl_swim_tick(sl_swim_t *s, int64_t now) {
    enter(s, now);
    if (!s->left) {
        if (s->probe.active && !s->probe.acked && !s->probe.indirect_sent &&
            s->now_ms >= s->probe.timeout_ms)
            probe_indirect(s);
        if (s->probe.active && s->now_ms >= s->probe.period_end_ms)
            probe_verdict(s);
        if (s->now_ms >= s->next_probe_ms) {
            if (!s->probe.active)
                probe_start(s);
            s->next_probe_ms = s->probe.active ? s->probe.period_end_ms
                                               : s->now_ms + scaled(s, s->t.probe_interval_ms);
        }
        tick_relays(s);
        tick_suspicions(s);
        if (s->now_ms >= next_sync(s))
            tick_sync(s);
        tick_seeds(s);
    }
    if (s->now_ms >= s->next_gossip_ms)
        tick_gossip(s);
    if (s->now_ms >= s->next_reap_ms)
        tick_reap(s);
    return SL_OK;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

int64_t sl_swim_next_deadline_ms(const sl_swim_t *s) {
    int64_t d = s->next_reap_ms;
    if (s->gq.live)
        d = min64(d, s->next_gossip_ms);
    if (s->left)
        return d;
    d = min64(d, s->next_probe_ms);
    d = min64(d, next_sync(s));
    if (s->probe.active) {
        if (!s->probe.acked && !s->probe.indirect_sent)
            d = min64(d, s->probe.timeout_ms);
        d = min64(d, s->probe.period_end_ms);
    }
    for (uint32_t i = 0; i < s->relay_count; i++)
        d = min64(d, s->relays[i].nack_at_ms);
    if (s->susp_live)
        for (uint32_t i = 0; i < s->susp_count; i++)
            if (s->susps[i].member != NONE)
                d = min64(d, s->susps[i].deadline_ms);
    for (uint32_t i = 0; i < s->seed_count; i++)
        d = min64(d, s->seeds[i].next_dial_ms);
    return d;
}

/* ---- Local requests ---- */

sl_err sl_swim_join(sl_swim_t *s, int64_t now, const char *const *seeds, size_t count) {
    enter(s, now);
    if (s->left)
        return SL_ESTATE;
    for (size_t i = 0; i < count; i++) {
        size_t len = seeds[i] ? strlen(seeds[i]) : 0;
        if (len < 1 || len > SL_ADDR_MAX)
            return SL_EINVAL;
    }
    for (size_t i = 0; i < count; i++) {
        sl_istr_t *a = intern_get(s->pool, (const uint8_t *)seeds[i], strlen(seeds[i]));
        if (!a)
            return SL_ENOMEM;
        bool dup = a == s->members[s->self].addr;
        for (uint32_t j = 0; j < s->seed_count && !dup; j++)
            dup = s->seeds[j].addr == a;
        if (dup) {
            intern_put(s->pool, a);
            continue;
        }
        seed_t *r = sl_realloc(s->seeds, (s->seed_count + 1) * sizeof *r);
        if (!r) {
            intern_put(s->pool, a);
            return SL_ENOMEM;
        }
        s->seeds = r;
        s->seeds[s->seed_count].addr = a;
        s->seeds[s->seed_count].next_dial_ms = s->now_ms; /* dial at once */
        s->seed_count++;
    }
    tick_seeds(s);
    return SL_OK;
}

sl_err sl_swim_probe_soon(sl_swim_t *s, int64_t now, const char *addr, size_t addr_len) {
    enter(s, now);
    if (s->left)
        return SL_OK;
    uint32_t idx = NONE;
    for (uint32_t i = 0; i < s->member_count && idx == NONE; i++)
        if (i != s->self && is_up(s->members[i].state) &&
            istr_eq(s->members[i].addr, (const uint8_t *)addr, addr_len))
            idx = i;
    if (idx == NONE)
        return SL_ENOTFOUND;
    member_t *m = &s->members[idx];
    if (s->probe.active && !s->probe.acked && s->probe.target == m->name)
        return SL_OK; /* being probed now */
    intern_put(s->pool, s->probe_next);
    s->probe_next = intern_ref(m->name);
    s->stats.probes_hinted++;
    /* A probe whose answer is in has nothing left to decide: end it, so
     * that the hinted member need not wait out the rest of its period. */
    if (s->probe.active && s->probe.acked)
        probe_end(s);
    if (!s->probe.active) {
        probe_start(s);
        s->next_probe_ms = s->probe.active ? s->probe.period_end_ms
                                           : s->now_ms + scaled(s, s->t.probe_interval_ms);
    }
    return SL_OK;
}

sl_err sl_swim_leave(sl_swim_t *s, int64_t now) {
    enter(s, now);
    if (s->left)
        return SL_OK;
    s->left = true;
    member_t *me = &s->members[s->self];
    uint8_t old = me->state;
    set_state(s, s->self, s->bug == SL_SWIM_BUG_LEFT_AS_DEAD ? SL_STATE_DEAD : SL_STATE_LEFT);
    gossip(s, s->self);
    ev_push(s, SL_SWIM_EV_STATE, me, old, me->incarnation);
    if (s->probe.active)
        probe_end(s);
    uint32_t to[256];
    uint32_t k = s->t.leave_fanout < 256 ? s->t.leave_fanout : 256;
    uint32_t n = random_members(s, WANT_UP, NONE, k, to);
    /* PINGs, so that the ACKs tell us somebody heard (sl_swim_leave_acked) */
    s->leave_seq = next_seq(s);
    for (uint32_t i = 0; i < n; i++)
        send_to_member(s, SL_MSG_PING, to[i], s->leave_seq, s->members[to[i]].name, NULL);
    if (n == 0)
        s->leave_sent = s->leave_acked = true;
    sl_log(SL_LOG_NOTICE, "SWIM-LEAVE", "t=%lld leaving, telling %u members",
           (long long)s->now_ms, n);
    return SL_OK;
}

bool sl_swim_leave_sent(const sl_swim_t *s) { return s->left && s->leave_sent; }
bool sl_swim_leave_acked(const sl_swim_t *s) { return s->left && s->leave_acked; }

sl_err sl_swim_set_meta(sl_swim_t *s, int64_t now, const uint8_t *meta, size_t len) {
    enter(s, now);
    if (len && (!meta || sl_meta_validate(meta, len) != SL_OK))
        return SL_EINVAL;
    if (s->left)
        return SL_ESTATE;
    member_t *me = &s->members[s->self];
    if (me->incarnation >= SL_SWIM_INC_MAX)
        return SL_ERANGE;
    sl_istr_t *mt = len ? intern_get(s->pool, meta, len) : NULL;
    if (len && !mt)
        return SL_ENOMEM;
    intern_put(s->pool, me->meta);
    me->meta = mt;
    me->incarnation++;
    gossip(s, s->self);
    ev_push(s, SL_SWIM_EV_UPDATE, me, me->state, me->incarnation - 1);
    return SL_OK;
}
