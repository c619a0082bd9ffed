/* Membership core, the outward side: materialising queued outputs into
 * sl_msg_t (with piggybacked gossip), events, queries and the invariant
 * checker (include/starling/swim.h). The protocol is in swim.c. */
#include <stdlib.h>
#include <string.h>

#include "starling/swim.h"
#include "membership/swim_internal.h"

/* ---- Outputs and events ---- */

static void fill_record(const sl_swim_t *s, const member_t *m, sl_member_msg_t *r) {
    memset(r, 0, sizeof *r);
    r->name = istr_bytes(m->name);
    r->addr = istr_bytes(m->addr);
    r->meta = istr_bytes(m->meta);
    r->incarnation = m->incarnation;
    r->state = m->state;
    if (m->susp)
        r->from = istr_bytes(s->susps[m->susp - 1].from);
}

/* Whether a record is news a slice carries first: not ALIVE, or changed
 * within the last push-pull interval. */
static bool sync_news(const sl_swim_t *s, const member_t *m, int64_t since_ms) {
    return m->state != SL_STATE_ALIVE || m->state_change_ms >= since_ms;
}

/* Fills `r` with a periodic push-pull's slice of the table, at most `cap`
 * records: our own first, then the news (sync_news) and then the other
 * records in turn, from where the last slice's turn stopped. A table of
 * N records so goes out whole every ceil(N / (cap - 1)) push-pulls, and
 * what changed lately at every one. One pass over the table (once a
 * push-pull interval, 30 s or more); the message stays at `cap` records
 * whatever N. Returns the count. */
static uint32_t sync_slice(sl_swim_t *s, sl_member_msg_t *r, uint32_t cap) {
    uint32_t n = 0, count = s->member_count;
    int64_t since = s->now_ms - swim_sync_interval(s);
    fill_record(s, &s->members[s->self], &r[n++]);
    uint32_t start = s->slice_pos % count;
    uint32_t j = 0;
    for (; j < count && n < cap; j++) {
        uint32_t i = (start + j) % count;
        if (i != s->self && sync_news(s, &s->members[i], since))
            fill_record(s, &s->members[i], &r[n++]);
    }
    if (n == cap) {
        /* More news than fits (a cluster starting, a partition healing):
         * the next slice goes on from the last one taken, so all of it
         * goes out in turn, not the same first ones every time. */
        s->slice_pos = (start + j) % count;
        return n;
    }
    for (j = 0; j < count && n < cap; j++) {
        uint32_t i = (start + j) % count;
        if (i != s->self && !sync_news(s, &s->members[i], since))
            fill_record(s, &s->members[i], &r[n++]);
    }
    s->slice_pos = (start + j) % count;
    return n;
}

/* Fills msg->gossip: `first` (NONE: none) and then the queue's picks. */
static void fill_gossip(sl_swim_t *s, sl_msg_t *msg, uint32_t first, uint32_t dest) {
    size_t budget = s->t.gossip_max_bytes;
    size_t n = 0;
    uint32_t picked[SL_GOSSIP_MAX];
    if (s->left) {
        fill_record(s, &s->members[s->self], &msg->gossip[n++]);
        s->last_out_leave = true;
        budget = budget > 200 ? budget - 200 : 0;
        first = first == s->self ? NONE : first;
    }
    if (first != NONE && first < s->member_count) {
        fill_record(s, &s->members[first], &msg->gossip[n++]);
        size_t l = gq_record_len(&s->members[first]);
        budget = budget > l ? budget - l : 0;
    }
    uint32_t skip = s->left ? s->self : first;
    (void)dest;
    uint32_t k = gq_pick(&s->gq, s->members, s->member_count, swim_retransmit_limit(s), budget,
                         (uint32_t)(SL_GOSSIP_MAX - n), picked, skip);
    for (uint32_t i = 0; i < k; i++) {
        if (s->left && picked[i] == s->self)
            continue;
        fill_record(s, &s->members[picked[i]], &msg->gossip[n++]);
    }
    msg->gossip_count = n;
    s->stats.gossip_sent += n;
}

sl_err sl_swim_next_output(sl_swim_t *s, sl_swim_output_t *out) {
    if (s->have_last_out) {
        swim_out_release(s, &s->last_out);
        s->have_last_out = false;
    }
    if (s->out_count == 0)
        swim_drop_scratch(s);
    while (s->out_count) {
        out_t o = s->outs[s->out_head];
        s->out_head = (s->out_head + 1) % s->out_cap;
        s->out_count--;
        memset(out, 0, sizeof *out);
        sl_msg_t *msg = &out->msg;
        msg->type = o.type;
        msg->from = istr_bytes(swim_self_name(s));
        msg->from_addr = istr_bytes(s->members[s->self].addr);
        out->to_addr = istr_bytes(o.to_addr);
        out->to_name = istr_bytes(o.to_name);
        s->last_out_leave = false;
        uint32_t dest = o.to_name ? swim_find_hashed(s, o.to_name->bytes, o.to_name->len,
                                                o.to_name->hash)
                                  : NONE;
        switch (o.type) {
        case SL_MSG_PING: {
            msg->u.ping.seq = o.seq;
            msg->u.ping.target = istr_bytes(o.target);
            /* buddy system: a suspect hears of it from its prober first */
            uint32_t first =
                dest != NONE && s->members[dest].state == SL_STATE_SUSPECT ? dest : NONE;
            fill_gossip(s, msg, first, dest);
            break;
        }
        case SL_MSG_PING_REQ:
            msg->u.ping_req.seq = o.seq;
            msg->u.ping_req.target = istr_bytes(o.target);
            msg->u.ping_req.target_addr = istr_bytes(o.target_addr);
            msg->u.ping_req.want_nack = o.want_nack;
            fill_gossip(s, msg, NONE, dest);
            break;
        case SL_MSG_ACK:
            msg->u.ack.seq = o.seq;
            msg->u.ack.target = istr_bytes(o.target);
            fill_gossip(s, msg, NONE, dest);
            break;
        case SL_MSG_NACK:
            msg->u.nack.seq = o.seq;
            fill_gossip(s, msg, NONE, dest);
            break;
        case SL_MSG_SYNC: {
            uint32_t want = o.slice && s->member_count > SYNC_SLICE ? SYNC_SLICE
                                                                    : s->member_count;
            if (s->scratch_cap < want) {
                sl_member_msg_t *r = sl_realloc(s->scratch, want * sizeof *r);
                if (!r) {
                    swim_out_release(s, &o);
                    s->stats.outputs_dropped++;
                    continue;
                }
                s->scratch = r;
                s->scratch_cap = want;
            }
            uint32_t n = want;
            if (want < s->member_count)
                n = sync_slice(s, s->scratch, want);
            else
                for (uint32_t i = 0; i < s->member_count; i++)
                    fill_record(s, &s->members[i], &s->scratch[i]);
            msg->u.sync.join = o.join;
            msg->u.sync.reply = o.reply;
            msg->u.sync.members = s->scratch;
            msg->u.sync.member_count = n;
            s->stats.syncs_sent++;
            if (s->left)
                s->last_out_leave = true;
            break;
        }
        }
        if (o.gossip_only && msg->gossip_count == 0) {
            swim_out_release(s, &o);
            continue; /* nothing left to spread */
        }
        if (s->last_out_leave)
            s->leave_sent = true;
        s->last_out = o;
        s->have_last_out = true;
        s->stats.msgs_sent++;
        return SL_OK;
    }
    return SL_EAGAIN;
}

sl_err sl_swim_next_event(sl_swim_t *s, sl_swim_event_t *ev) {
    if (s->have_last_ev) {
        swim_ev_release(s, &s->last_ev);
        s->have_last_ev = false;
    }
    if (s->ev_count == 0)
        return SL_EAGAIN;
    event_t e = s->events[s->ev_head];
    s->ev_head = (s->ev_head + 1) % s->ev_cap;
    s->ev_count--;
    memset(ev, 0, sizeof *ev);
    ev->kind = e.kind;
    ev->name = istr_bytes(e.name);
    ev->addr = istr_bytes(e.addr);
    ev->meta = istr_bytes(e.meta);
    ev->old_state = e.old_state;
    ev->new_state = e.new_state;
    ev->old_incarnation = e.old_incarnation;
    ev->incarnation = e.incarnation;
    ev->at_ms = e.at_ms;
    s->last_ev = e;
    s->have_last_ev = true;
    return SL_OK;
}

/* ---- Queries ---- */

size_t sl_swim_member_count(const sl_swim_t *s) { return s->member_count; }
size_t sl_swim_alive_count(const sl_swim_t *s) { return s->alive_count; }

static void fill_member(const sl_swim_t *s, uint32_t i, sl_swim_member_t *out) {
    const member_t *m = &s->members[i];
    out->name = istr_bytes(m->name);
    out->addr = istr_bytes(m->addr);
    out->meta = istr_bytes(m->meta);
    out->incarnation = m->incarnation;
    out->state = m->state;
    out->is_self = i == s->self;
    out->state_change_ms = m->state_change_ms;
}

sl_err sl_swim_member_at(const sl_swim_t *s, size_t i, sl_swim_member_t *m) {
    if (i >= s->member_count)
        return SL_ENOTFOUND;
    fill_member(s, (uint32_t)i, m);
    return SL_OK;
}

sl_err sl_swim_member_find(const sl_swim_t *s, sl_bytes_t name, sl_swim_member_t *m) {
    if (!name.len)
        return SL_ENOTFOUND;
    uint32_t i = swim_find_hashed(s, name.ptr, name.len, intern_hash(name.ptr, name.len));
    if (i == NONE)
        return SL_ENOTFOUND;
    fill_member(s, i, m);
    return SL_OK;
}

static int cmp_bytes(const void *a, const void *b) {
    const sl_bytes_t *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->ptr, y->ptr, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

size_t sl_swim_alive_names(const sl_swim_t *s, sl_bytes_t *names, size_t cap) {
    size_t n = 0;
    for (uint32_t i = 0; i < s->member_count; i++) {
        if (!is_up(s->members[i].state))
            continue;
        if (n < cap)
            names[n] = istr_bytes(s->members[i].name);
        n++;
    }
    if (names && cap)
        qsort(names, n < cap ? n : cap, sizeof *names, cmp_bytes);
    return n;
}

uint64_t sl_swim_incarnation(const sl_swim_t *s) { return s->members[s->self].incarnation; }
uint32_t sl_swim_health(const sl_swim_t *s) { return s->awareness; }
const sl_swim_timing_t *sl_swim_timing(const sl_swim_t *s) { return &s->t; }
void sl_swim_stats(const sl_swim_t *s, sl_swim_stats_t *st) { *st = s->stats; }
void sl_swim_set_bug(sl_swim_t *s, sl_swim_bug bug) { s->bug = bug; }

/* ---- Invariant checker ---- */

#define FAIL(...)                                                                        \
    do {                                                                                 \
        sl_log(SL_LOG_ERR, "SWIM-CHECK", __VA_ARGS__);                                   \
        return SL_EINTERNAL;                                                             \
    } while (0)

sl_err sl_swim_check(const sl_swim_t *s) {
    if (!s || s->member_count == 0 || s->self != 0)
        FAIL("no own record");
    const member_t *me = &s->members[s->self];
    if (s->left ? !(me->state == SL_STATE_LEFT || me->state == SL_STATE_DEAD)
                : me->state != SL_STATE_ALIVE)
        FAIL("own record is %s", swim_state_name(me->state));
    if (s->index_cap < 2 * s->member_count || (s->index_cap & (s->index_cap - 1)))
        FAIL("index capacity %u for %u members", s->index_cap, s->member_count);
    uint32_t alive = 0, gossiping = 0, suspects = 0, used = 0;
    for (uint32_t i = 0; i < s->member_count; i++) {
        const member_t *m = &s->members[i];
        if (!m->name || !m->addr || m->name->refs == 0 || m->addr->refs == 0 ||
            m->name->len < 1 || m->name->len > SL_NAME_MAX)
            FAIL("record %u has bad strings", i);
        if (m->state > SL_STATE_LEFT)
            FAIL("record %u has state %u", i, m->state);
        if (swim_find_hashed(s, m->name->bytes, m->name->len, m->name->hash) != i)
            FAIL("record %u is not found by its name", i);
        alive += is_up(m->state);
        gossiping += m->gossip_gen != 0;
        if ((m->state == SL_STATE_SUSPECT) != (m->susp != 0) && m->state != SL_STATE_SUSPECT)
            FAIL("record %u: suspicion timer without suspicion", i);
        if (m->susp) {
            suspects++;
            if (m->susp > s->susp_count || s->susps[m->susp - 1].member != i)
                FAIL("record %u: suspicion points elsewhere", i);
        }
    }
    for (uint32_t i = 0; i < s->index_cap; i++)
        used += s->index[i] != 0;
    if (used != s->member_count)
        FAIL("index holds %u entries for %u members", used, s->member_count);
    if (alive != s->alive_count)
        FAIL("alive count %u, counted %u", s->alive_count, alive);
    if (gossiping != s->gq.live)
        FAIL("gossip queue live %u, counted %u", s->gq.live, gossiping);
    if (suspects != s->susp_live)
        FAIL("suspicions %u, counted %u", s->susp_live, suspects);
    if (s->out_count > s->t.max_outputs)
        FAIL("%u outputs queued over the cap %u", s->out_count, s->t.max_outputs);
    if (s->ev_count > EVENT_CAP)
        FAIL("%u events queued", s->ev_count);
    if (s->relay_count > RELAY_MAX)
        FAIL("%u relays", s->relay_count);
    if (s->awareness >= s->t.awareness_max)
        FAIL("health score %u", s->awareness);
    if (s->probe.active && !s->probe.target)
        FAIL("probe without a target");
    return SL_OK;
}
