/* The store's anti-entropy: digests, deltas since a version vector,
 * snapshots and resets, garbage collection and retiring (see
 * include/starling/store.h; the map itself is src/store/store.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/hash.h"
#include "starling/msg.h"
#include "store/store_internal.h"

/* ---- refusals ---- */

/* Logs one line per SL_STORE_LOG_EVERY_MS (of the caller's clock) at
 * most, saying how many were left out since: a peer that sends a hostile
 * message per millisecond costs a line per 10 s, not a line each. */
static void log_limited(sl_store_t *s, uint64_t now_ms, int level, const char *id,
                        const char *msg) {
    uint64_t left_out;
    if (!sl_log_limit(&s->refusal_log, now_ms, SL_STORE_LOG_EVERY_MS, &left_out))
        return;
    if (left_out)
        sl_log(level, id, "%s (and %" PRIu64 " store refusals or heals not logged in the"
               " %u s before)", msg, left_out, SL_STORE_LOG_EVERY_MS / 1000);
    else
        sl_log(level, id, "%s", msg);
}

static void log_refusal(sl_store_t *s, uint64_t now_ms, uint8_t type, const char *why) {
    char msg[200];
    snprintf(msg, sizeof msg, "store message type %u refused: %s", type, why);
    log_limited(s, now_ms, SL_LOG_NOTICE, "STORE-BAD-MSG", msg);
}

/* ---- digests ---- */

static int range_cmp(const void *a, const void *b) {
    const sl_store_range_t *x = a, *y = b;
    return x->rid < y->rid ? -1 : x->rid > y->rid;
}

/* The vv (non-retired) and the retired list, both sorted by rid. */
static sl_err vv_lists(const sl_store_t *s, bool durable, sl_store_range_t **vv, uint32_t *vn,
                       sl_store_range_t **ret, uint32_t *rn) {
    *vv = sl_calloc(s->rep_count, sizeof **vv);
    *ret = sl_calloc(s->rep_count, sizeof **ret);
    *vn = *rn = 0;
    if (!*vv || !*ret) {
        sl_free(*vv);
        sl_free(*ret);
        *vv = *ret = NULL;
        return SL_ENOMEM;
    }
    for (uint32_t i = 0; i < s->rep_count; i++) {
        const replica_t *r = &s->reps[i];
        if (r->retired)
            (*ret)[(*rn)++] = (sl_store_range_t){r->rid, 0, r->seq};
        else if (r->seq || i == s->self_rix)
            (*vv)[(*vn)++] = (sl_store_range_t){r->rid, 0, durable ? r->durable : r->seq};
    }
    qsort(*vv, *vn, sizeof **vv, range_cmp);
    qsort(*ret, *rn, sizeof **ret, range_cmp);
    return SL_OK;
}

sl_err sl_store_digest(sl_store_t *s, bool reply, sl_store_msg_t *out) {
    sl_store_dmsg_t m = {.type = SL_STORE_MSG_DIGEST, .sender = s->rid, .reply = reply,
                         .want_reset = s->want_reset, .reply_to = (const uint8_t *)s->addr,
                         .reply_to_len = (uint32_t)strlen(s->addr)};
    sl_err err = vv_lists(s, s->track_durable, &m.ranges, &m.range_count, &m.retired, &m.retired_count);
    if (err)
        return err;
    /* the self entry is 0 before the first write: send it only when > 0 */
    uint32_t w = 0;
    for (uint32_t i = 0; i < m.range_count; i++)
        if (m.ranges[i].to)
            m.ranges[w++] = m.ranges[i];
    m.range_count = w;
    if (m.range_count > SL_STORE_MAX_RANGES || m.retired_count > SL_STORE_MAX_RANGES)
        err = SL_ETOOBIG;
    else
        err = sl_store_msg_encode(&m, SL_MSG_MAX_LEN, out);
    sl_free(m.ranges);
    sl_free(m.retired);
    return err;
}

/* The fingerprint of a digest's content: want_reset, the vv (entries
 * above 0) and the retired list, each sorted by rid. The same function
 * hashes our own lists and a received DIGEST, so both sides agree. */
static uint64_t fp_of(bool want_reset, const sl_store_range_t *vv, uint32_t vn,
                      const sl_store_range_t *ret, uint32_t rn) {
    uint64_t h = sl_mix64(0x53554d4d ^ (want_reset ? 1 : 2));
    for (uint32_t i = 0; i < vn; i++)
        if (vv[i].to)
            h = sl_mix64(h ^ sl_mix64(vv[i].rid) ^ (vv[i].to * 0x9e3779b97f4a7c15ull));
    h = sl_mix64(h ^ 0x5245544952454400ull);
    for (uint32_t i = 0; i < rn; i++)
        h = sl_mix64(h ^ sl_mix64(ret[i].rid) ^ (ret[i].to * 0xc2b2ae3d27d4eb4full));
    return h ? h : 1;
}

/* A hash of everything the fingerprint and the collector read of the
 * replicas, in replica-number order: no allocation, no sort, a few
 * instructions a replica. */
static uint64_t reps_sig(const sl_store_t *s) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)s->rep_count << 32) ^ s->self_rix ^
                 ((uint64_t)s->want_reset << 62) ^ ((uint64_t)s->track_durable << 61);
    for (uint32_t i = 0; i < s->rep_count; i++) {
        const replica_t *r = &s->reps[i];
        h = (h ^ r->rid) * 0xff51afd7ed558ccdull;
        h = (h ^ r->seq) * 0xc4ceb9fe1a85ec53ull;
        h = (h ^ r->durable ^ ((uint64_t)r->retired << 62) ^ ((uint64_t)r->retire_pending << 63)) *
            0x9e3779b97f4a7c15ull;
    }
    return sl_mix64(h);
}

/* The fingerprint is kept while reps_sig does not move: a round asks for
 * it every 100 ms, and it sorted every replica each time (at rest, with
 * nothing changed; bench/results/scale.md). */
uint64_t sl_store_fingerprint(const sl_store_t *s) {
    sl_store_t *w = (sl_store_t *)s; /* (a cache: the value is the same either way) */
    /* every entry point that may change it drops it (fp_cached = 0); one
       call in 16 also checks the replicas' hash, in case */
    if (s->fp_cached && ++w->fp_calls % 16 != 0)
        return s->fp_cached;
    uint64_t sig = reps_sig(s);
    if (s->fp_cached && s->fp_sig == sig)
        return s->fp_cached;
    sl_store_range_t *vv, *ret;
    uint32_t vn, rn;
    if (vv_lists(s, s->track_durable, &vv, &vn, &ret, &rn) != SL_OK)
        return 1; /* no memory: a fingerprint that matches no one's */
    uint64_t h = fp_of(s->want_reset, vv, vn, ret, rn);
    sl_free(vv);
    sl_free(ret);
    w->fp_sig = sig;
    w->fp_cached = h;
    return h;
}

sl_err sl_store_summary(sl_store_t *s, bool reply, sl_store_msg_t *out) {
    sl_store_dmsg_t m = {.type = SL_STORE_MSG_SUMMARY, .sender = s->rid, .reply = reply,
                         .fingerprint = sl_store_fingerprint(s),
                         .reply_to = (const uint8_t *)s->addr,
                         .reply_to_len = (uint32_t)strlen(s->addr)};
    return sl_store_msg_encode(&m, SL_MSG_MAX_LEN, out);
}

static uint64_t pairs_get(const sl_store_range_t *p, uint32_t n, uint64_t rid, bool *found) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (p[mid].rid == rid) {
            if (found)
                *found = true;
            return p[mid].to;
        }
        if (p[mid].rid < rid)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (found)
        *found = false;
    return 0;
}

/* What peer `p` knows of replica `rid`: its vv entry, or its retired seq. */
static uint64_t peer_knows(const peer_t *p, uint64_t rid) {
    bool found;
    uint64_t v = pairs_get(p->vv, p->vv_count, rid, &found);
    if (found)
        return v;
    return pairs_get(p->retired, p->retired_count, rid, NULL);
}

/* Whether a peer's new lists are the ones it had (the collector reads
 * them: a change wakes it, a repeat at rest does not). */
static bool same_lists(const peer_t *p, const sl_store_range_t *vv, uint32_t vn,
                       const sl_store_range_t *ret, uint32_t rn) {
    return p->vv_count == vn && p->retired_count == rn &&
           (!vn || memcmp(p->vv, vv, vn * sizeof *vv) == 0) &&
           (!rn || memcmp(p->retired, ret, rn * sizeof *ret) == 0);
}

static peer_t *peer_get(sl_store_t *s, uint64_t rid, bool create) {
    for (uint32_t i = 0; i < s->peer_count; i++)
        if (s->peers[i].rid == rid)
            return &s->peers[i];
    if (!create || s->peer_count >= SL_STORE_MAX_REPLICAS)
        return NULL;
    peer_t *n = sl_realloc(s->peers, (s->peer_count + 1) * sizeof *n);
    if (!n)
        return NULL;
    s->peers = n;
    s->peers[s->peer_count] = (peer_t){.rid = rid};
    return &s->peers[s->peer_count++];
}

/* ---- building deltas and snapshots ---- */

typedef struct {
    uint64_t order;  /* rank of the replica by rid << 48 | seq */
    uint32_t rec;    /* record number */
    uint32_t atom;   /* atom index (0 for registers) */
} cand_t;

static int cand_cmp(const void *a, const void *b) {
    const cand_t *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The atom `c` as a wire item. */
static void cand_item(const sl_store_t *s, uint32_t rec, uint32_t atom, sl_store_item_t *out) {
    const rec_t *r = &s->recs[rec];
    memset(out, 0, sizeof *out);
    out->key = rec_key(s, r);
    out->key_len = r->key_len;
    if (r->type == SL_CRDT_LWW) {
        sl_crdt_item_t *it = &out->it;
        it->kind = SL_ITEM_LWW;
        it->type = SL_CRDT_LWW;
        it->dot = rec_dot(s, r);
        it->hlc = r->hlc;
        if (r->flags & REC_DELETED) {
            it->flags = SL_ITEM_DELETED;
        } else {
            it->a = arena_ptr(s, r->kv) + r->key_len;
            it->a_len = r->val_len;
        }
    } else {
        out->it = r->u.val->atoms[atom];
    }
}

typedef struct {
    sl_store_range_t *ranges; /* the message being built */
    uint32_t range_count;     /* entries */
    sl_store_item_t *items;   /* its items */
    uint32_t item_count;      /* entries */
    uint32_t item_cap;        /* allocated */
    size_t len;               /* estimated body bytes */
} builder_t;

static sl_err flush_delta(sl_store_t *s, builder_t *b, sl_store_out_t *out, size_t *total) {
    if (!b->range_count)
        return SL_OK;
    sl_store_dmsg_t m = {.type = SL_STORE_MSG_DELTA, .sender = s->rid, .ranges = b->ranges,
                         .range_count = b->range_count, .items = b->items,
                         .item_count = b->item_count};
    sl_store_msg_t msg;
    sl_err err = sl_store_msg_encode(&m, SL_MSG_MAX_LEN, &msg);
    if (!err) {
        *total += msg.len;
        s->st.deltas_sent++;
        err = store_out_push(out, &msg);
    }
    b->range_count = b->item_count = 0;
    b->len = 32;
    return err;
}

/* Appends DELTA messages holding every atom `peer_vv` lacks (bounded by
 * max_sync_len); never the peer's own atoms. With `resend`, our own atoms
 * from seq `own_from` on go too, even those the peer counts as seen (a
 * heal, rule 9); `*cut`: the answer stopped at max_sync_len. */
static sl_err build_deltas(sl_store_t *s, uint64_t peer_rid, const sl_store_range_t *pvv,
                           uint32_t pn, bool resend, uint64_t own_from, bool *cut,
                           sl_store_out_t *out) {
    /* replicas in rid order, with what the peer has */
    uint32_t *order = sl_calloc(s->rep_count, sizeof *order);
    uint64_t *from = sl_calloc(s->rep_count, sizeof *from);
    uint32_t *rank = sl_calloc(s->rep_count, sizeof *rank);
    uint64_t *top = sl_calloc(s->rep_count, sizeof *top);
    cand_t *cands = NULL;
    builder_t b = {0};
    sl_err err = SL_OK;
    size_t ncand = 0, cap = 0, total = 0;
    if (!order || !from || !rank || !top) {
        err = SL_ENOMEM;
        goto fail;
    }
    bool any = false;
    for (uint32_t i = 0; i < s->rep_count; i++) {
        const replica_t *r = &s->reps[i];
        from[i] = pairs_get(pvv, pn, r->rid, NULL);
        if (resend && i == s->self_rix && own_from < from[i])
            from[i] = own_from;
        /* a range claims at most SL_STORE_MAX_DOT_LEAD dots: the rest
         * goes with the next digest */
        top[i] = r->seq > from[i] && r->seq - from[i] > SL_STORE_MAX_DOT_LEAD
                     ? from[i] + SL_STORE_MAX_DOT_LEAD : r->seq;
        if (!r->retired && r->rid != peer_rid && r->seq > from[i])
            any = true;
    }
    if (!any)
        goto fail; /* nothing to send: no scan */
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->rep_count; i++)
        order[n++] = i;
    for (uint32_t i = 1; i < n; i++) /* insertion sort by rid: few replicas */
        for (uint32_t j = i; j > 0 && s->reps[order[j]].rid < s->reps[order[j - 1]].rid; j--) {
            uint32_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (uint32_t i = 0; i < n; i++)
        rank[order[i]] = i;
    /* candidates: every live atom the peer lacks */
    for (uint32_t i = 0; i < s->rec_count; i++) {
        const rec_t *r = &s->recs[i];
        if (r->type == SL_CRDT_NONE)
            continue;
        uint32_t atoms = r->type == SL_CRDT_LWW ? 1 : r->u.val->count;
        for (uint32_t a = 0; a < atoms; a++) {
            uint32_t rix;
            uint64_t seq;
            if (r->type == SL_CRDT_LWW) {
                rix = (uint32_t)(r->u.dot >> SEQ_BITS);
                seq = r->u.dot & SEQ_MAX;
            } else {
                sl_dot_t d = r->u.val->atoms[a].dot;
                rix = store_rix_find(s, d.rid);
                seq = d.seq;
            }
            const replica_t *rep = &s->reps[rix];
            if (rep->retired || rep->rid == peer_rid || seq <= from[rix] || seq > top[rix])
                continue;
            if (s->bug == SL_STORE_BUG_DELTA_DROP && seq % 5 == 0)
                continue; /* planted: the range still covers it */
            if (ncand == cap) {
                cap = cap ? cap * 2 : 1024;
                cand_t *c = sl_realloc(cands, cap * sizeof *c);
                if (!c) {
                    err = SL_ENOMEM;
                    goto fail;
                }
                cands = c;
            }
            cands[ncand++] = (cand_t){((uint64_t)rank[rix] << SEQ_BITS) | seq, i, a};
            if (resend && rix == s->self_rix && seq <= pairs_get(pvv, pn, s->rid, NULL))
                s->st.resent++;
        }
    }
    if (ncand)
        qsort(cands, ncand, sizeof *cands, cand_cmp);
    b.ranges = sl_calloc(s->rep_count, sizeof *b.ranges);
    if (!b.ranges) {
        err = SL_ENOMEM;
        goto fail;
    }
    b.len = 32;
    size_t c = 0;
    bool stop = false;
    for (uint32_t oi = 0; oi < n && !stop; oi++) {
        uint32_t rix = order[oi];
        const replica_t *rep = &s->reps[rix];
        if (rep->retired || rep->rid == peer_rid || rep->seq <= from[rix])
            continue;
        while (c < ncand && (uint32_t)(cands[c].order >> SEQ_BITS) < oi)
            c++; /* never leave a replica's candidates behind */
        uint64_t lo = from[rix];
        if (b.range_count >= SL_STORE_MAX_RANGES &&
            (err = flush_delta(s, &b, out, &total)))
            goto fail;
        b.ranges[b.range_count] = (sl_store_range_t){rep->rid, lo, top[rix]};
        b.range_count++;
        b.len += 30;
        for (; c < ncand && (uint32_t)(cands[c].order >> SEQ_BITS) == oi; c++) {
            uint64_t seq = cands[c].order & SEQ_MAX;
            sl_store_item_t item;
            cand_item(s, cands[c].rec, cands[c].atom, &item);
            size_t sz = sl_store_item_encoded_len(&item, b.range_count);
            if (b.item_count && b.len + sz > s->cfg.max_msg_len) {
                /* close this replica's range just before `seq` */
                if (seq - 1 > lo) {
                    b.ranges[b.range_count - 1].to = seq - 1;
                } else {
                    b.range_count--;
                }
                if ((err = flush_delta(s, &b, out, &total)))
                    goto fail;
                if (total >= s->cfg.max_sync_len) {
                    stop = true;
                    break;
                }
                lo = seq - 1;
                b.ranges[0] = (sl_store_range_t){rep->rid, lo, top[rix]};
                b.range_count = 1;
                b.len += 30;
            }
            if (b.item_count == b.item_cap) {
                uint32_t ic = b.item_cap ? b.item_cap * 2 : 256;
                sl_store_item_t *it = sl_realloc(b.items, ic * sizeof *it);
                if (!it) {
                    err = SL_ENOMEM;
                    goto fail;
                }
                b.items = it;
                b.item_cap = ic;
            }
            b.items[b.item_count++] = item;
            b.len += sz;
        }
    }
    if (!stop)
        err = flush_delta(s, &b, out, &total);
    if (cut)
        *cut = stop;
fail:
    sl_free(order);
    sl_free(from);
    sl_free(rank);
    sl_free(top);
    sl_free(cands);
    sl_free(b.ranges);
    sl_free(b.items);
    return err;
}

/* Appends the whole state as SNAPSHOT chunks of at most `max_len` bytes
 * (0: one chunk). */
static sl_err build_snapshot(sl_store_t *s, uint8_t flags, size_t max_len, sl_store_out_t *out) {
    sl_store_dmsg_t m = {.type = SL_STORE_MSG_SNAPSHOT, .sender = s->rid, .flags = flags};
    uint32_t *starts = NULL, nchunks = 0, cap_chunks = 0;
    sl_err err = vv_lists(s, false, &m.ranges, &m.range_count, &m.retired, &m.retired_count);
    if (err)
        return err;
    /* pass 1: where chunks start (record numbers) */
    size_t base = 64 + 20 * ((size_t)m.range_count + m.retired_count), len = base;
    for (uint32_t i = 0; i <= s->rec_count; i++) {
        if (i == 0 || (i < s->rec_count && max_len && len > max_len)) {
            if ((err = store_grow((void **)&starts, &cap_chunks, nchunks + 1, sizeof *starts)))
                goto fail;
            starts[nchunks++] = i;
            len = base;
        }
        if (i == s->rec_count)
            break;
        const rec_t *r = &s->recs[i];
        if (r->type == SL_CRDT_NONE)
            continue;
        uint32_t atoms = r->type == SL_CRDT_LWW ? 1 : r->u.val->count;
        for (uint32_t a = 0; a < atoms; a++) {
            sl_store_item_t item;
            cand_item(s, i, a, &item);
            len += sl_store_item_encoded_len(&item, m.range_count + m.retired_count);
        }
    }
    m.snap_id = sl_mix64(s->rid ^ ++s->snap_counter) | 1;
    m.chunks = nchunks;
    for (uint32_t c = 0; c < nchunks; c++) {
        uint32_t end = c + 1 < nchunks ? starts[c + 1] : s->rec_count;
        uint32_t count = 0, icap = 0;
        m.items = NULL;
        for (uint32_t i = starts[c]; i < end; i++) {
            const rec_t *r = &s->recs[i];
            if (r->type == SL_CRDT_NONE)
                continue;
            uint32_t atoms = r->type == SL_CRDT_LWW ? 1 : r->u.val->count;
            for (uint32_t a = 0; a < atoms; a++) {
                if ((err = store_grow((void **)&m.items, &icap, count + 1, sizeof *m.items)))
                    goto fail;
                cand_item(s, i, a, &m.items[count++]);
            }
        }
        m.item_count = count;
        m.chunk = c;
        sl_store_msg_t msg;
        err = sl_store_msg_encode(&m, max_len ? SL_MSG_MAX_LEN : SIZE_MAX, &msg);
        sl_free(m.items);
        m.items = NULL;
        if (err || (err = store_out_push(out, &msg)))
            goto fail;
        if (flags & SL_STORE_SNAP_RESET)
            s->st.snapshots_sent++;
    }
fail:
    sl_free(m.items);
    sl_free(starts);
    sl_free(m.ranges);
    sl_free(m.retired);
    return err;
}

sl_err sl_store_snapshot(sl_store_t *s, sl_store_msg_t *out) {
    sl_store_out_t o;
    sl_store_out_init(&o);
    sl_err err = build_snapshot(s, 0, 0, &o);
    if (!err) {
        *out = o.msgs[0];
        o.count = 0;
    }
    sl_store_out_fini(&o);
    return err;
}

/* ---- receiving ---- */

static uint64_t item_max_hlc(const sl_store_dmsg_t *m) {
    uint64_t h = 0;
    for (uint32_t i = 0; i < m->item_count; i++) {
        const sl_crdt_item_t *it = &m->items[i].it;
        if ((it->kind == SL_ITEM_LWW || it->kind == SL_ITEM_FIELD) && it->hlc > h)
            h = it->hlc;
    }
    return h;
}

/* Range of `rid` in a DELTA (binary search), or NULL. */
static const sl_store_range_t *range_of(const sl_store_dmsg_t *m, uint64_t rid, uint32_t *at) {
    uint32_t lo = 0, hi = m->range_count;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (m->ranges[mid].rid == rid) {
            *at = mid;
            return &m->ranges[mid];
        }
        if (m->ranges[mid].rid < rid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Applies DELTA `m`; `keys`, if given, gets each key whose value changed. */
static sl_err apply_delta(sl_store_t *s, const sl_store_dmsg_t *m, bool trusted, bool *changed,
                          sl_store_out_t *keys) {
    *changed = false;
    uint8_t *ok = sl_calloc(m->range_count ? m->range_count : 1, 1);
    uint32_t *rixs = sl_calloc(m->range_count ? m->range_count : 1, sizeof *rixs);
    sl_err err = ok && rixs ? SL_OK : SL_ENOMEM;
    for (uint32_t g = 0; !err && g < m->range_count; g++) {
        const sl_store_range_t *r = &m->ranges[g];
        if (r->to > SEQ_MAX) {
            err = SL_EPROTO;
            break;
        }
        if (r->rid == s->rid && !trusted) {
            /* my own dots: I have them all; more than I issued is a lie */
            if (r->to > s->reps[s->self_rix].seq)
                err = SL_EPROTO;
            continue;
        }
        if ((err = store_rix_get(s, r->rid, &rixs[g])))
            break;
        replica_t *rep = &s->reps[rixs[g]];
        if (rep->retired && r->to > rep->seq) {
            /* retired on stale knowledge: more of its dots exist, take
             * it back and retire it again later */
            rep->retired = 0;
            rep->retire_pending = 1;
        }
        if (rep->retired)
            continue; /* all seen */
        if (rep->seq < r->from && !(trusted && r->rid == s->rid)) {
            /* (our own log may jump: a heal moved the counter) */
            s->st.gaps++;
            continue;
        }
        /* 1: join the atoms past our entry; 2: every atom, from the
         * replica that made them (rule 4: its word on its own dots
         * outranks a claim that moved our entry past atoms we never got;
         * joins are idempotent, so honest duplicates change nothing) */
        if (r->rid == m->sender && r->rid != s->rid)
            ok[g] = 2;
        else if (rep->seq < r->to)
            ok[g] = 1;
    }
    uint64_t hs[16];
    for (uint32_t i = 0; i < PF_SLOT && i < m->item_count; i++)
        hs[i % 16] = key_hash(m->items[i].key, m->items[i].key_len);
    for (uint32_t i = 0; !err && i < m->item_count; i++) {
        const sl_store_item_t *item = &m->items[i];
        uint64_t h = hs[i % 16];
        store_prefetch_item(s, m, hs, i);
        uint32_t g;
        if (!range_of(m, item->it.dot.rid, &g) || !ok[g])
            continue;
        bool seen = item->it.dot.seq <= s->reps[rixs[g]].seq;
        /* (not under the last collection: a removal of it may be gone,
         * and only a stale duplicate brings such an atom) */
        if (seen && (ok[g] == 1 || (rixs[g] < s->gc_done_len &&
                                    item->it.dot.seq <= s->gc_done[rixs[g]]))) {
            s->st.dup++;
            continue;
        }
        bool ch;
        if ((err = store_apply_item_h(s, item->key, item->key_len, h, &item->it, rixs[g], &ch)))
            break;
        if (ch) {
            s->st.applied++;
            *changed = true;
            if (keys)
                store_out_changed(keys, item->key, item->key_len);
        }
        if (seen) {
            if (ch)
                s->st.rejoined++;
            else
                s->st.dup++;
        }
    }
    for (uint32_t g = 0; !err && g < m->range_count; g++)
        if (ok[g] && s->reps[rixs[g]].seq < m->ranges[g].to) {
            s->reps[rixs[g]].seq = m->ranges[g].to;
            *changed = true;
        }
    sl_free(ok);
    sl_free(rixs);
    return err;
}

/* What snapshot `m` knows of replica `rid` (vv entry or retired seq). */
static uint64_t snap_knows(const sl_store_dmsg_t *m, uint64_t rid) {
    bool found;
    uint64_t k = pairs_get(m->ranges, m->range_count, rid, &found);
    return found ? k : pairs_get(m->retired, m->retired_count, rid, NULL);
}

static sl_err shadow_apply(sl_store_t *sh, const sl_store_item_t *item) {
    uint32_t rix;
    bool ch;
    sl_err err = store_rix_get(sh, item->it.dot.rid, &rix);
    return err ? err : store_apply_item(sh, item->key, item->key_len, &item->it, rix, &ch);
}

#define SWAP(f)                                                                                    \
    do {                                                                                           \
        __typeof__(a->f) t_ = a->f;                                                                \
        a->f = b->f;                                                                               \
        b->f = t_;                                                                                 \
    } while (0)

/* Exchanges the map (records, index, arena, replicas) of two stores. */
static void swap_maps(sl_store_t *a, sl_store_t *b) {
    SWAP(recs); SWAP(rec_count); SWAP(rec_cap); SWAP(free_head); SWAP(slots); SWAP(slot_mask); SWAP(indexed); SWAP(blocks);
    SWAP(block_count); SWAP(block_cap); SWAP(block_pos); SWAP(arena_used); SWAP(arena_garbage);
    SWAP(reps); SWAP(rep_count); SWAP(rep_cap); SWAP(rmap); SWAP(rmap_mask); SWAP(self_rix);
}

/* A RESET snapshot is built aside (the shadow) and replaces the map only
 * when its last chunk arrives: the shadow then takes every atom of ours
 * the snapshot's sender did not know (our own, and writes the cluster
 * never saw), and the version vectors join. An abandoned snapshot is
 * simply dropped, so nothing is ever half replaced. */
static sl_err reset_complete(sl_store_t *s, const sl_store_dmsg_t *m) {
    sl_store_t *sh = s->shadow;
    sl_err err = SL_OK;
    for (uint32_t i = 0; !err && i < s->rec_count; i++) {
        const rec_t *r = &s->recs[i];
        if (r->type == SL_CRDT_NONE)
            continue;
        uint32_t atoms = r->type == SL_CRDT_LWW ? 1 : r->u.val->count;
        for (uint32_t a = 0; !err && a < atoms; a++) {
            sl_store_item_t item;
            cand_item(s, i, a, &item);
            if (item.it.dot.rid == s->rid || item.it.dot.seq > snap_knows(m, item.it.dot.rid))
                err = shadow_apply(sh, &item);
        }
    }
    for (uint32_t i = 0; !err && i < s->rep_count; i++) {
        const replica_t *r = &s->reps[i];
        uint32_t rix;
        if ((err = store_rix_get(sh, r->rid, &rix)))
            break;
        uint64_t k = snap_knows(m, r->rid);
        sh->reps[rix].seq = r->seq > k ? r->seq : k;
        sh->reps[rix].retired = r->retired && r->seq >= k;
        sh->reps[rix].retire_pending = r->retire_pending || (r->retired && r->seq < k);
    }
    for (int t = 0; !err && t < 2; t++) {
        const sl_store_range_t *p = t ? m->retired : m->ranges;
        uint32_t n = t ? m->retired_count : m->range_count;
        for (uint32_t i = 0; !err && i < n; i++) {
            uint32_t rix;
            if (p[i].rid == s->rid || (err = store_rix_get(sh, p[i].rid, &rix)))
                continue;
            if (p[i].to > sh->reps[rix].seq)
                sh->reps[rix].seq = p[i].to;
            if (t && sh->reps[rix].seq == p[i].to)
                sh->reps[rix].retired = 1;
        }
    }
    if (err)
        return err;
    swap_maps(s, sh);
    sl_store_destroy(&s->shadow); /* now holding the old map */
    /* replica numbers changed: garbage collection starts afresh (and
     * what the sender may have collected is under our vv now) */
    sl_free(s->gc_cut);
    sl_free(s->gc_cut_next);
    sl_free(s->gc_target);
    sl_free(s->gc_done);
    s->gc_cut = s->gc_cut_next = s->gc_target = NULL;
    s->gc_cut_len = s->gc_len = 0;
    s->gc_done = sl_calloc(s->rep_count ? s->rep_count : 1, sizeof *s->gc_done);
    s->gc_done_len = s->gc_done ? s->rep_count : 0;
    for (uint32_t i = 0; i < s->gc_done_len; i++)
        s->gc_done[i] = s->reps[i].seq;
    s->gc_active = false;
    s->want_reset = false;
    return SL_OK;
}

/* What every chunk of one snapshot must repeat: its chunk count, flags,
 * vv and retired list (the atoms of each chunk are checked against them
 * by the decoder, and the last chunk's lists are the ones joined). */
static uint64_t snap_fp_of(const sl_store_dmsg_t *m) {
    uint64_t h = sl_mix64(((uint64_t)m->chunks << 8 | m->flags) ^ 0x534e4150ull);
    h = sl_hash64(m->ranges, m->range_count * sizeof *m->ranges, h);
    h = sl_hash64(m->retired, m->retired_count * sizeof *m->retired, h ^ m->range_count);
    return h;
}

static sl_err apply_snapshot(sl_store_t *s, const sl_store_dmsg_t *m, bool *changed) {
    *changed = false;
    sl_err err = SL_OK;
    bool reset = m->flags & SL_STORE_SNAP_RESET;
    /* a plain snapshot is a disk snapshot: one chunk, applied whole (its
     * vv covers its atoms only at the end, so it may not be cut) */
    if (!reset && m->chunks != 1)
        return SL_EPROTO;
    if (m->chunk == 0) {
        s->snap_from = m->sender;
        s->snap_id = m->snap_id;
        s->snap_next = 0;
        s->snap_fp = snap_fp_of(m);
        sl_store_destroy(&s->shadow);
        if (reset) {
            sl_store_config_t cfg = s->cfg;
            if ((err = sl_store_new(s->rid, &cfg, &s->shadow)))
                return err;
            s->want_reset = true; /* until this one completes */
        }
    } else if (m->sender != s->snap_from || m->snap_id != s->snap_id || m->chunk != s->snap_next ||
               (reset && !s->shadow)) {
        s->st.gaps++;
        if (reset)
            s->want_reset = true; /* ask again: the next one starts over */
        return SL_OK;
    } else if (snap_fp_of(m) != s->snap_fp) {
        /* a chunk that names other replicas (or counts, or flags) than
         * the snapshot's first: its atoms would not be covered by the vv
         * joined at the end. The whole snapshot is dropped. */
        sl_store_destroy(&s->shadow);
        s->snap_from = s->snap_id = 0;
        if (reset)
            s->want_reset = true;
        s->st.forged++;
        return SL_EPROTO;
    }
    for (uint32_t i = 0; i < m->item_count; i++) {
        const sl_store_item_t *item = &m->items[i];
        if (item->it.dot.rid == s->rid)
            continue; /* my own atoms: I have every one */
        if (item->it.dot.seq > SEQ_MAX)
            return SL_EPROTO;
        if (reset) {
            if ((err = shadow_apply(s->shadow, item)))
                return err;
            *changed = true; /* every chunk goes to the WAL: replay rebuilds the reset */
            continue;
        }
        uint32_t rix;
        if ((err = store_rix_get(s, item->it.dot.rid, &rix)))
            return err;
        if (s->reps[rix].retired || item->it.dot.seq <= s->reps[rix].seq) {
            s->st.dup++;
            continue;
        }
        bool ch;
        if ((err = store_apply_item(s, item->key, item->key_len, &item->it, rix, &ch)))
            return err;
        if (ch)
            s->st.applied++;
    }
    s->snap_next = m->chunk + 1;
    if (m->chunk + 1 < m->chunks)
        return SL_OK;
    s->snap_from = s->snap_id = 0;
    *changed = true;
    if (reset)
        return reset_complete(s, m);
    /* last chunk: the snapshot's vv and retired list join ours */
    for (int t = 0; t < 2; t++) {
        const sl_store_range_t *p = t ? m->retired : m->ranges;
        uint32_t n = t ? m->retired_count : m->range_count;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t rix;
            if (p[i].rid == s->rid)
                continue;
            if ((err = store_rix_get(s, p[i].rid, &rix)))
                return err;
            if (p[i].to > s->reps[rix].seq)
                s->reps[rix].seq = p[i].to;
            if (t)
                s->reps[rix].retired = 1;
        }
    }
    return SL_OK;
}

/* Does peer (vv `m`) lack what only a snapshot can give: atoms of a
 * replica retired here, or anything under the last garbage cut? */
static bool needs_reset(const sl_store_t *s, const peer_t *p) {
    for (uint32_t i = 0; i < s->rep_count; i++) {
        const replica_t *r = &s->reps[i];
        if (i == s->self_rix || r->rid == p->rid)
            continue;
        uint64_t k = peer_knows(p, r->rid);
        if (r->retired && k < r->seq)
            return true;
        if (i < s->gc_cut_len && k < s->gc_cut[i])
            return true;
    }
    return false;
}

/* Does this replica hold every dot of the version vector `p` reported? */
static bool covers(const sl_store_t *s, const peer_t *p) {
    for (uint32_t i = 0; i < p->vv_count; i++) {
        if (p->vv[i].rid == s->rid || p->vv[i].to == 0)
            continue;
        uint32_t rix = store_rix_find(s, p->vv[i].rid);
        if (rix == NO_REC || (!s->reps[rix].retired && s->reps[rix].seq < p->vv[i].to))
            return false;
    }
    return true;
}

uint64_t sl_store_caught_up_ms(const sl_store_t *s) { return s->caught_up_ms; }

/* A peer believes this replica issued more dots than it did (a forged
 * claim got past the lead check somewhere, or this replica lost writes):
 * its later writes would look old to that peer and be dropped. The
 * counter moves past what the peer believes (check_claims bounded it by
 * SL_STORE_MAX_DOT_LEAD); the next write's range starts where the counter
 * was, so the WAL records the move (S4 unique dots) and peers take it. */
static void heal(sl_store_t *s, peer_t *p, const sl_store_dmsg_t *m, uint64_t now_ms) {
    replica_t *self = &s->reps[s->self_rix];
    uint64_t claim = pairs_get(m->ranges, m->range_count, s->rid, NULL);
    if (claim <= self->seq) {
        p->own_seen = claim;
        return;
    }
    /* Which of our writes may the peer count as seen without holding
     * them? Those past what it last reported (the forged range started
     * at or below its real entry): they go to it again, original dots and
     * all, and it joins them from us although its vv covers them (rule
     * 4). Only this window, so a forger repeating small claims costs us
     * our recent writes, not the whole store. */
    /* Every peer's window, not only this one's: the claim may have
     * reached others through this peer's deltas, and once the counter
     * moved their DIGESTs no longer show it. */
    for (uint32_t i = 0; i < s->peer_count; i++) {
        peer_t *q = &s->peers[i];
        uint64_t from = q->own_seen;
        if (self->seq - from > SL_STORE_MAX_DOT_LEAD)
            from = self->seq - SL_STORE_MAX_DOT_LEAD;
        if (self->seq > from && (!q->resend || from < q->resend_from)) {
            q->resend_from = from;
            q->resend = true;
        }
    }
    if (!s->heal_pending) {
        s->heal_pending = true;
        s->heal_from = self->seq;
    }
    char why[160];
    snprintf(why, sizeof why,
             "peer %016" PRIx64 " believes this replica issued %" PRIu64
             " dots, %" PRIu64 " more than it did: its counter moves past",
             m->sender, claim, claim - self->seq);
    self->seq = claim;
    /* the skipped dots hold no atom a crash could lose: digests may
     * report them (else peers never agree until the next write, and
     * garbage collection waits for it) */
    if (s->track_durable && self->durable < claim)
        self->durable = claim;
    s->st.healed++;
    log_limited(s, now_ms, SL_LOG_WARNING, "STORE-HEAL", why);
}

static sl_err handle_digest(sl_store_t *s, const sl_store_dmsg_t *m, uint64_t now_ms,
                            sl_store_out_t *replies) {
    if (m->sender == s->rid)
        return SL_EPROTO;
    peer_t *p = peer_get(s, m->sender, true);
    if (!p)
        return SL_ENOMEM;
    sl_store_range_t *vv = NULL, *ret = NULL;
    if (m->range_count && !(vv = sl_malloc(m->range_count * sizeof *vv)))
        return SL_ENOMEM;
    if (m->retired_count && !(ret = sl_malloc(m->retired_count * sizeof *ret))) {
        sl_free(vv);
        return SL_ENOMEM;
    }
    if (vv)
        memcpy(vv, m->ranges, m->range_count * sizeof *vv);
    if (ret)
        memcpy(ret, m->retired, m->retired_count * sizeof *ret);
    if (!same_lists(p, vv, m->range_count, ret, m->retired_count))
        s->gc_gen++;
    p->lists_fp = 0;
    sl_free(p->vv);
    sl_free(p->retired);
    p->vv = vv;
    p->vv_count = m->range_count;
    p->retired = ret;
    p->retired_count = m->retired_count;
    heal(s, p, m, now_ms);
    sl_err err;
    /* a replica that itself waits for a reset may hold stale atoms: it
     * answers with deltas only */
    if (!s->want_reset && (m->want_reset || needs_reset(s, p))) {
        err = build_snapshot(s, SL_STORE_SNAP_RESET, s->cfg.max_msg_len, replies);
        p->resend = false; /* a reset carries all our atoms */
    } else {
        bool cut = false;
        err = build_deltas(s, m->sender, m->ranges, m->range_count, p->resend, p->resend_from,
                           &cut, replies);
        if (!err && !cut)
            p->resend = false;
    }
    if (err)
        return err;
    if (m->reply) {
        if (covers(s, p))
            s->caught_up_ms = now_ms;
        return SL_OK;
    }
    /* pull: does the peer have something we lack? */
    bool lack = false;
    for (uint32_t i = 0; i < m->range_count; i++) {
        uint32_t rix = store_rix_find(s, m->ranges[i].rid);
        if (m->ranges[i].rid == s->rid || m->ranges[i].to == 0)
            continue;
        if (rix == NO_REC || s->reps[rix].seq < m->ranges[i].to) {
            lack = true;
            if (rix != NO_REC && s->reps[rix].retired) {
                s->reps[rix].retired = 0; /* retired too early: see apply_delta */
                s->reps[rix].retire_pending = 1;
            }
        }
    }
    if (!lack) {
        s->caught_up_ms = now_ms;
        return SL_OK;
    }
    sl_store_msg_t d;
    if ((err = sl_store_digest(s, true, &d)))
        return err;
    return store_out_push(replies, &d);
}

/* A heal's window of our own atoms still owed to peer `p` (rule 9): sent
 * with any answer to it, a SUMMARY's too (two replicas whose vvs agree
 * exchange no DIGEST, and the peer may still lack them). */
static sl_err resend_owed(sl_store_t *s, peer_t *p, sl_store_out_t *replies) {
    if (!p || !p->resend)
        return SL_OK;
    bool cut = false;
    sl_err err = build_deltas(s, p->rid, p->vv, p->vv_count, true, p->resend_from, &cut, replies);
    if (!err && !cut)
        p->resend = false;
    return err;
}

/* A SUMMARY: the same fingerprint means the same vv as ours (what the
 * peer holds is recorded as our own lists, for garbage collection) and an
 * answer only if it was not one; another fingerprint gets our DIGEST,
 * which starts a push-pull exchange. */
static sl_err handle_summary(sl_store_t *s, const sl_store_dmsg_t *m, uint64_t now_ms,
                             sl_store_out_t *replies) {
    sl_err err = resend_owed(s, peer_get(s, m->sender, false), replies);
    if (err)
        return err;
    uint64_t fp = sl_store_fingerprint(s);
    if (m->fingerprint == fp) {
        replies->agreed = true;
        s->caught_up_ms = now_ms;
        peer_t *p = peer_get(s, m->sender, true);
        if (!p)
            return SL_ENOMEM;
        /* it agreed at this fingerprint before: its lists are ours already
           (at rest every member's refresh came here and sorted our lists) */
        if (p->lists_fp == fp) {
            p->own_seen = pairs_get(p->vv, p->vv_count, s->rid, NULL);
            goto agreed;
        }
        sl_store_range_t *vv, *ret;
        uint32_t vn, rn;
        if ((err = vv_lists(s, s->track_durable, &vv, &vn, &ret, &rn)))
            return err;
        if (!same_lists(p, vv, vn, ret, rn))
            s->gc_gen++;
        sl_free(p->vv);
        sl_free(p->retired);
        p->vv = vv;
        p->vv_count = vn;
        p->retired = ret;
        p->retired_count = rn;
        p->own_seen = pairs_get(vv, vn, s->rid, NULL);
        p->lists_fp = fp;
    agreed:
        if (m->reply)
            return SL_OK;
        sl_store_msg_t d;
        if ((err = sl_store_summary(s, true, &d)))
            return err;
        return store_out_push(replies, &d);
    }
    sl_store_msg_t d;
    err = sl_store_digest(s, false, &d);
    return err ? err : store_out_push(replies, &d);
}

/* What a message claims, against what its sender may claim (proto/store.md,
 * rule 3): keys without control characters; no dot of this replica past
 * what it issued; no more than SL_STORE_MAX_DOT_LEAD dots of a replica
 * at once (a DELTA range's span, a RESET SNAPSHOT's entry over ours, a
 * DIGEST's belief about this replica over its counter). NULL: all fine. */
static const char *check_claims(const sl_store_t *s, const sl_store_dmsg_t *m) {
    const uint64_t own = s->reps[s->self_rix].seq;
    for (uint32_t i = 0; i < m->item_count; i++)
        if (!sl_store_key_valid(m->items[i].key, m->items[i].key_len))
            return "a key holds a control character";
    if (m->type == SL_STORE_MSG_DELTA) {
        for (uint32_t i = 0; i < m->range_count; i++) {
            const sl_store_range_t *r = &m->ranges[i];
            if (r->rid == s->rid && r->to > own)
                return "it claims dots of this replica that it never issued";
            if (r->to - r->from > SL_STORE_MAX_DOT_LEAD)
                return "a range claims more than 2^32 dots of one replica at once";
        }
    } else if (m->type == SL_STORE_MSG_SNAPSHOT) {
        for (int t = 0; t < 2; t++) {
            const sl_store_range_t *p = t ? m->retired : m->ranges;
            uint32_t n = t ? m->retired_count : m->range_count;
            for (uint32_t i = 0; i < n; i++) {
                if (p[i].rid == s->rid) {
                    if (p[i].to > own)
                        return "it claims dots of this replica that it never issued";
                    continue;
                }
                uint32_t rix = store_rix_find(s, p[i].rid);
                uint64_t k = rix == NO_REC ? 0 : s->reps[rix].seq;
                if (p[i].to > k && p[i].to - k > SL_STORE_MAX_DOT_LEAD)
                    return "it claims more than 2^32 dots of one replica past ours";
            }
        }
    } else if (m->type == SL_STORE_MSG_DIGEST) {
        uint64_t claim = pairs_get(m->ranges, m->range_count, s->rid, NULL);
        if (claim > own && claim - own > SL_STORE_MAX_DOT_LEAD)
            return "it believes this replica issued more than 2^32 dots past its counter";
    }
    return NULL;
}

/* A DELTA in our own name that covers only dots we issued: one of our
 * writes, relayed back to us by a member that got it from another
 * (store_spread.h: a relay sends the bytes as received, `sender` still
 * the writer's). Any other message in our name is refused (rule 3). */
static bool is_echo(const sl_store_t *s, const sl_store_dmsg_t *m) {
    if (m->type != SL_STORE_MSG_DELTA || m->sender != s->rid || !m->range_count)
        return false;
    for (uint32_t i = 0; i < m->range_count; i++)
        if (m->ranges[i].rid != s->rid || m->ranges[i].to > s->reps[s->self_rix].seq)
            return false;
    return true;
}

static sl_err receive(sl_store_t *s, uint8_t type, const uint8_t *body, size_t len,
                      uint64_t now_ms, sl_store_out_t *replies, bool *persist);

/* ---- deltas kept past a gap ---- */

static void held_drop(sl_store_t *s, uint32_t i) {
    s->held_bytes -= s->held[i].len;
    sl_store_msg_fini(&s->held[i]);
    memmove(&s->held[i], &s->held[i + 1], (s->held_count - i - 1) * sizeof *s->held);
    s->held_count--;
}

/* Keeps a copy of a DELTA that had a gap (the oldest go first past the
 * bounds; without memory it is not kept: anti-entropy brings it). A
 * delta kept already (a resend) is not kept twice. */
static void hold(sl_store_t *s, const uint8_t *body, size_t len) {
    if (len > SL_STORE_HELD_BYTES)
        return;
    for (uint32_t i = 0; i < s->held_count; i++)
        if (s->held[i].len == len && memcmp(s->held[i].body, body, len) == 0)
            return;
    if (!s->held && !(s->held = sl_calloc(SL_STORE_HELD_MAX, sizeof *s->held)))
        return;
    while (s->held_count && (s->held_count == SL_STORE_HELD_MAX ||
                             s->held_bytes + len > SL_STORE_HELD_BYTES)) {
        held_drop(s, 0);
        s->held_dropped++;
    }
    uint8_t *copy = sl_malloc(len);
    if (!copy)
        return;
    memcpy(copy, body, len);
    s->held[s->held_count++] = (sl_store_msg_t){.type = SL_STORE_MSG_DELTA, .body = copy, .len = len};
    s->held_bytes += len;
}

/* 1: every range of a kept delta can be applied now and one brings what
 * this replica lacks; 0: a gap is still open; -1: nothing in it is new
 * (or it no longer decodes): drop it. */
static int held_state(const sl_store_t *s, const sl_store_msg_t *h) {
    sl_store_dmsg_t m;
    if (sl_store_msg_decode(h->type, h->body, h->len, &m) != SL_OK)
        return -1;
    bool gap = false, news = false;
    for (uint32_t g = 0; g < m.range_count; g++) {
        const sl_store_range_t *r = &m.ranges[g];
        if (r->rid == s->rid)
            continue;
        uint32_t rix = store_rix_find(s, r->rid);
        uint64_t seq = rix == NO_REC ? 0 : s->reps[rix].seq;
        if (rix != NO_REC && s->reps[rix].retired)
            continue;
        if (seq < r->from)
            gap = true;
        if (seq < r->to)
            news = true;
    }
    sl_store_dmsg_fini(&m);
    return !news ? -1 : gap ? 0 : 1;
}

sl_err sl_store_take_ready(sl_store_t *s, sl_store_msg_t *out) {
    for (uint32_t i = 0; i < s->held_count;) {
        int st = held_state(s, &s->held[i]);
        if (st < 0) {
            held_drop(s, i);
            continue;
        }
        if (st > 0) {
            *out = s->held[i];
            s->held_bytes -= out->len;
            memmove(&s->held[i], &s->held[i + 1], (s->held_count - i - 1) * sizeof *s->held);
            s->held_count--;
            return SL_OK;
        }
        i++;
    }
    return SL_ENOTFOUND;
}

/* (the fingerprint kept by sl_store_fingerprint goes with any change: on
 * the way in and out, a RESET snapshot swaps the maps; a SUMMARY changes
 * no replica: at rest, N/30 of them a second reach a peer) */
sl_err sl_store_receive(sl_store_t *s, uint8_t type, const uint8_t *body, size_t len,
                        uint64_t now_ms, sl_store_out_t *replies, bool *persist) {
    bool keep = type == SL_STORE_MSG_SUMMARY;
    if (!keep)
        s->fp_cached = 0;
    sl_err err = receive(s, type, body, len, now_ms, replies, persist);
    if (!keep)
        s->fp_cached = 0;
    return err;
}

static sl_err receive(sl_store_t *s, uint8_t type, const uint8_t *body, size_t len,
                      uint64_t now_ms, sl_store_out_t *replies, bool *persist) {
    *persist = false;
    sl_store_dmsg_t m;
    sl_err err = len > SL_MSG_MAX_LEN ? SL_ETOOBIG : sl_store_msg_decode(type, body, len, &m);
    if (err) {
        s->st.rejected++;
        log_refusal(s, now_ms, type, sl_strerror(err));
        return err;
    }
    if (is_echo(s, &m)) {
        /* our own write relayed back to us (rule 3): nothing in it is new */
        s->st.dup += m.item_count;
        sl_store_dmsg_fini(&m);
        return SL_OK;
    }
    if (m.sender == s->rid || (type == SL_STORE_MSG_SNAPSHOT && !(m.flags & SL_STORE_SNAP_RESET))) {
        /* our own id, or a disk snapshot sent over the network */
        sl_store_dmsg_fini(&m);
        s->st.rejected++;
        log_refusal(s, now_ms, type, "not from a peer");
        return SL_EPROTO;
    }
    const char *why = check_claims(s, &m);
    if (why) {
        sl_store_dmsg_fini(&m);
        s->st.rejected++;
        s->st.forged++;
        log_refusal(s, now_ms, type, why);
        return SL_EPROTO;
    }
    if (type != SL_STORE_MSG_DIGEST && type != SL_STORE_MSG_SUMMARY) {
        uint64_t h = item_max_hlc(&m);
        if (h && (err = sl_hlc_update(&s->hlc, now_ms, h, m.sender, NULL))) {
            s->st.rejected++;
            s->st.clock_rejected++;
            sl_store_dmsg_fini(&m);
            return err;
        }
    }
    bool changed = false;
    uint64_t forged = s->st.forged;
    replies->from = m.sender;
    if (type == SL_STORE_MSG_DIGEST) {
        memcpy(replies->reply_to, m.reply_to ? (const char *)m.reply_to : "", m.reply_to_len);
        replies->reply_to[m.reply_to_len] = 0;
        replies->peer_fp = fp_of(m.want_reset, m.ranges, m.range_count, m.retired, m.retired_count);
        err = handle_digest(s, &m, now_ms, replies);
    } else if (type == SL_STORE_MSG_SUMMARY) {
        memcpy(replies->reply_to, m.reply_to ? (const char *)m.reply_to : "", m.reply_to_len);
        replies->reply_to[m.reply_to_len] = 0;
        replies->peer_fp = m.fingerprint;
        err = handle_summary(s, &m, now_ms, replies);
    }
    else if (type == SL_STORE_MSG_DELTA) {
        uint64_t gaps = s->st.gaps;
        err = apply_delta(s, &m, false, &changed, replies->list_changed ? replies : NULL);
        if (!err && s->st.gaps != gaps)
            hold(s, body, len); /* (past a gap: kept until it fills) */
    } else {
        err = apply_snapshot(s, &m, &changed);
        replies->all_changed |= !err && changed; /* (a RESET: not key by key) */
    }
    if (!err && changed) {
        /* the answer to our pull: do we now hold what the sender's
           last DIGEST said it held? */
        const peer_t *p = peer_get(s, m.sender, false);
        if (p && p->vv && covers(s, p))
            s->caught_up_ms = now_ms;
    }
    sl_store_dmsg_fini(&m);
    if (err) {
        s->st.rejected++;
        log_refusal(s, now_ms, type, s->st.forged != forged
                                         ? "its chunks disagree on the snapshot's replicas"
                                         : sl_strerror(err));
        return err;
    }
    *persist = changed;
    store_maybe_compact(s);
    return SL_OK;
}

static sl_err replay(sl_store_t *s, uint8_t type, const uint8_t *body, size_t len);

sl_err sl_store_replay(sl_store_t *s, uint8_t type, const uint8_t *body, size_t len) {
    s->fp_cached = 0;
    sl_err err = replay(s, type, body, len);
    s->fp_cached = 0;
    return err;
}

static sl_err replay(sl_store_t *s, uint8_t type, const uint8_t *body, size_t len) {
    sl_store_dmsg_t m;
    if (type == SL_STORE_MSG_DIGEST || type == SL_STORE_MSG_SUMMARY)
        return SL_ETYPE;
    sl_err err = sl_store_msg_decode(type, body, len, &m);
    if (err)
        return err;
    uint64_t h = item_max_hlc(&m);
    if (h > s->hlc.last)
        s->hlc.last = h;
    bool changed;
    err = type == SL_STORE_MSG_DELTA ? apply_delta(s, &m, true, &changed, NULL)
                                     : apply_snapshot(s, &m, &changed);
    sl_store_dmsg_fini(&m);
    return err;
}

/* ---- garbage collection and retiring ---- */

sl_err sl_store_set_live(sl_store_t *s, const uint64_t *rids, size_t count) {
    uint64_t *l = NULL;
    if (count && !(l = sl_malloc(count * sizeof *l)))
        return SL_ENOMEM;
    if (count)
        memcpy(l, rids, count * sizeof *l);
    sl_free(s->live);
    s->live = l;
    s->live_count = (uint32_t)count;
    s->gc_active = false; /* the view changed: start a new barrier */
    s->gc_gen++;
    s->fp_cached = 0;
    return SL_OK;
}

sl_err sl_store_retire(sl_store_t *s, uint64_t rid) {
    if (rid == s->rid)
        return SL_EINVAL;
    uint32_t rix;
    sl_err err = store_rix_get(s, rid, &rix);
    if (!err && !s->reps[rix].retired)
        s->reps[rix].retire_pending = 1;
    s->gc_gen++;
    s->fp_cached = 0;
    return err;
}

static bool gc_stable(void *ctx, sl_dot_t d) {
    const sl_store_t *s = ctx;
    uint32_t rix = store_rix_find(s, d.rid);
    if (rix == NO_REC)
        return false;
    if (s->reps[rix].retired)
        return true;
    return rix < s->gc_len && d.seq <= s->gc_cut_next[rix];
}

/* What the collector reads besides the records (which change only with a
 * replica's seq, in reps_sig). */
static uint64_t gc_sig(const sl_store_t *s) {
    return sl_mix64(reps_sig(s) ^ sl_mix64(s->gc_gen + 0x6763) ^ s->live_count);
}

size_t sl_store_gc(sl_store_t *s) {
    peer_t **peers = NULL;
    size_t dropped = 0;
    if (s->bug == SL_STORE_BUG_NO_GC)
        return 0;
    /* At rest a collection finds nothing, and the barrier after it is the
       one before: until something the collector reads moves, it would
       find nothing again (it looked at every replica of every live peer
       and every record, each second) */
    uint64_t sig = gc_sig(s);
    if (s->gc_idle && s->gc_idle_sig == sig)
        return 0;
    s->gc_idle = false;
    s->fp_cached = 0; /* (it retires replicas) */
    bool idle = false;
    if (s->live_count && !(peers = sl_calloc(s->live_count, sizeof *peers)))
        return 0;
    for (uint32_t i = 0; i < s->live_count; i++) {
        peers[i] = peer_get(s, s->live[i], false);
        if (!peers[i])
            goto done; /* no digest yet from a live peer */
    }
    /* retire what every live peer has in full */
    for (uint32_t r = 0; r < s->rep_count; r++) {
        replica_t *rep = &s->reps[r];
        if (!rep->retire_pending)
            continue;
        bool all = true;
        for (uint32_t i = 0; i < s->live_count && all; i++)
            all = peer_knows(peers[i], rep->rid) == rep->seq;
        if (all) {
            rep->retired = 1;
            rep->retire_pending = 0;
        }
    }
    /* a replica that is neither live nor retired (a crashed peer, an old
     * incarnation not retired yet) may still bring atoms concurrent with
     * a removal: nothing is stable until it is back or retired */
    for (uint32_t r = 0; r < s->rep_count; r++) {
        const replica_t *rep = &s->reps[r];
        if (r == s->self_rix || rep->retired || rep->seq == 0)
            continue;
        bool live = false;
        for (uint32_t i = 0; i < s->live_count && !live; i++)
            live = s->live[i] == rep->rid;
        if (!live) {
            s->gc_active = false;
            goto done;
        }
    }
    uint32_t n;
start:
    n = s->rep_count;
    if (!s->gc_active) {
        uint64_t *cut = sl_calloc(n + 1, sizeof *cut), *target = sl_calloc(n + 1, sizeof *target);
        if (!cut || !target) {
            sl_free(cut);
            sl_free(target);
            goto done;
        }
        for (uint32_t r = 0; r < n; r++) {
            uint64_t lo = s->reps[r].seq, hi = lo;
            for (uint32_t i = 0; i < s->live_count; i++) {
                uint64_t k = peer_knows(peers[i], s->reps[r].rid);
                lo = k < lo ? k : lo;
                hi = k > hi ? k : hi;
            }
            cut[r] = lo;
            target[r] = hi;
        }
        sl_free(s->gc_cut_next);
        sl_free(s->gc_target);
        s->gc_cut_next = cut;
        s->gc_target = target;
        s->gc_len = n;
        s->gc_active = true;
        s->gc_barrier_sig = sig;
        if (idle) {
            s->gc_idle = true;
            s->gc_idle_sig = sig;
        }
        goto done;
    }
    for (uint32_t r = 0; r < s->gc_len; r++) {
        if (s->reps[r].retired)
            continue;
        if (s->reps[r].seq < s->gc_target[r])
            goto done;
        for (uint32_t i = 0; i < s->live_count; i++)
            if (peer_knows(peers[i], s->reps[r].rid) < s->gc_target[r])
                goto done;
    }
    /* stable: collect under the cut */
    size_t dropped0 = dropped;
    for (uint32_t i = 0; i < s->rec_count; i++) {
        rec_t *r = &s->recs[i];
        if (r->type == SL_CRDT_NONE)
            continue;
        if (r->type == SL_CRDT_LWW) {
            if ((r->flags & REC_DELETED) && gc_stable(s, rec_dot(s, r))) {
                store_rec_delete(s, i);
                dropped++;
            }
            continue;
        }
        dropped += sl_crdt_val_gc(r->u.val, gc_stable, s);
        if (r->u.val->count == 0)
            store_rec_delete(s, i);
    }
    sl_free(s->gc_cut);
    s->gc_cut = s->gc_cut_next;
    s->gc_cut_len = s->gc_len;
    s->gc_cut_next = NULL;
    sl_free(s->gc_done);
    s->gc_done = s->gc_target;
    s->gc_done_len = s->gc_len;
    s->gc_target = NULL;
    s->gc_len = 0;
    s->gc_active = false;
    s->st.gc_dropped += dropped;
    store_maybe_compact(s);
    /* nothing found, and nothing moved since this barrier began: the next
       one is this one again */
    idle = dropped == dropped0 && s->gc_barrier_sig == sig && gc_sig(s) == sig;
    goto start; /* and begin the next barrier now */
done:
    sl_free(peers);
    return dropped;
}

