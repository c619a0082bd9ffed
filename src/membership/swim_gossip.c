/* The dissemination queue of the membership core: memberlist's
 * transmit-limited queue. Each member has at most one live update queued
 * (a newer one makes the older entry stale); an update is piggybacked on up
 * to `limit` = retransmit_mult * ceil(log10(N + 1)) messages, the least-sent
 * and newest first, then dropped. Stale entries are skipped when met. */
#include <string.h>

#include "membership/swim_internal.h"

#define GQ_MIN_RECORD 24 /* no record is smaller on the wire */

void gq_init(gqueue_t *q) {
    memset(q, 0, sizeof *q);
    q->next_gen = 1;
}

void gq_fini(gqueue_t *q) {
    for (int i = 0; i < GQ_MAX_BUCKETS; i++)
        sl_free(q->buckets[i].items);
    memset(q, 0, sizeof *q);
}

static sl_err bucket_push(gqueue_t *q, uint32_t t, gq_entry_t e) {
    gq_bucket_t *b = &q->buckets[t];
    if (b->count == b->cap) {
        uint32_t cap = b->cap ? b->cap * 2 : 16;
        gq_entry_t *items = sl_realloc(b->items, cap * sizeof *items);
        if (!items)
            return SL_ENOMEM;
        b->items = items;
        b->cap = cap;
    }
    b->items[b->count++] = e;
    q->entries++;
    return SL_OK;
}

static bool entry_live(const gq_entry_t *e, const member_t *members, uint32_t member_count) {
    return e->member < member_count && members[e->member].gossip_gen == e->gen;
}

/* Drops stale entries when they outnumber live ones by far. */
static void compact(gqueue_t *q, member_t *members, uint32_t member_count) {
    q->entries = 0;
    for (int t = 0; t < GQ_MAX_BUCKETS; t++) {
        gq_bucket_t *b = &q->buckets[t];
        uint32_t w = 0;
        for (uint32_t r = 0; r < b->count; r++)
            if (entry_live(&b->items[r], members, member_count))
                b->items[w++] = b->items[r];
        b->count = w;
        q->entries += w;
    }
}

sl_err gq_push(gqueue_t *q, member_t *members, uint32_t idx) {
    member_t *m = &members[idx];
    gq_entry_t e = {idx, q->next_gen};
    sl_err err = bucket_push(q, 0, e);
    if (err)
        return err;
    if (++q->next_gen == 0)
        q->next_gen = 1;
    if (m->gossip_gen == 0)
        q->live++;
    m->gossip_gen = e.gen;
    return SL_OK;
}

void gq_forget(gqueue_t *q, member_t *m) {
    if (m->gossip_gen) {
        m->gossip_gen = 0;
        q->live--;
    }
}

size_t gq_record_len(const member_t *m) {
    /* map header, 6 keys, string headers, incarnation, state; `from` is at
     * most a name. */
    return 16 + m->name->len + m->addr->len + (m->meta ? m->meta->len : 1) +
           (m->state == SL_STATE_SUSPECT || m->state == SL_STATE_DEAD ? SL_NAME_MAX : 0);
}

uint32_t gq_pick(gqueue_t *q, member_t *members, uint32_t member_count, uint32_t limit,
                 size_t budget, uint32_t max, uint32_t *picked, uint32_t skip) {
    gq_entry_t moved[SL_GOSSIP_MAX];
    uint32_t moved_t[SL_GOSSIP_MAX];
    uint32_t n = 0;
    if (max > SL_GOSSIP_MAX)
        max = SL_GOSSIP_MAX;
    if (limit >= GQ_MAX_BUCKETS)
        limit = GQ_MAX_BUCKETS - 1;
    if (q->live == 0)
        return 0;
    for (uint32_t t = 0; t < GQ_MAX_BUCKETS && n < max && budget >= GQ_MIN_RECORD; t++) {
        gq_bucket_t *b = &q->buckets[t];
        uint32_t i = b->count;
        while (i > 0 && n < max && budget >= GQ_MIN_RECORD) {
            gq_entry_t e = b->items[i - 1];
            bool live = entry_live(&e, members, member_count);
            if (live && limit && t >= limit) {
                /* the limit shrank (fewer members): retire it */
                gq_forget(q, &members[e.member]);
                live = false;
            }
            if (!live) {
                memmove(&b->items[i - 1], &b->items[i], (b->count - i) * sizeof e);
                b->count--;
                q->entries--;
                i--;
                continue;
            }
            i--;
            if (e.member == skip)
                continue;
            size_t len = gq_record_len(&members[e.member]);
            if (len > budget)
                continue;
            budget -= len;
            memmove(&b->items[i], &b->items[i + 1], (b->count - i - 1) * sizeof e);
            b->count--;
            q->entries--;
            picked[n] = e.member;
            moved[n] = e;
            moved_t[n] = t + 1 < GQ_MAX_BUCKETS ? t + 1 : t; /* limit 0: the top bucket */
            n++;
        }
    }
    /* Put the picked ones back one transmit higher, or retire them. Older
     * picks go in first so the newest stays on top. */
    for (uint32_t j = n; j-- > 0;) {
        if (limit && moved_t[j] >= limit) {
            gq_forget(q, &members[moved[j].member]);
            continue;
        }
        if (bucket_push(q, moved_t[j], moved[j]) != SL_OK)
            gq_forget(q, &members[moved[j].member]);
    }
    if (q->entries > 1024 && q->entries > 4 * q->live)
        compact(q, members, member_count);
    return n;
}
