/* Store messages (proto/store.md): DIGEST, DELTA, SNAPSHOT, SUMMARY bodies in the
 * canonical msgpack profile. Strict and bounded: every count is checked
 * against its limit and against the bytes left before anything is
 * allocated for it. */
#include <string.h>

#include "starling/mpack.h"
#include "starling/msg.h"
#include "starling/store.h"

#define MAX_ITEMS (1u << 20)

/* ---- sizes (must match what sl_mpack_write_* produce) ---- */

static size_t uint_len(uint64_t v) {
    return v < 128 ? 1 : v <= 0xff ? 2 : v <= 0xffff ? 3 : v <= 0xffffffffu ? 5 : 9;
}
static size_t str_hdr_len(size_t n) { return n < 32 ? 1 : n <= 0xff ? 2 : n <= 0xffff ? 3 : 5; }
static size_t bin_hdr_len(size_t n) { return n <= 0xff ? 2 : n <= 0xffff ? 3 : 5; }
static size_t arr_hdr_len(size_t n) { return n < 16 ? 1 : n <= 0xffff ? 3 : 5; }

size_t sl_store_item_encoded_len(const sl_store_item_t *item, uint32_t ridx) {
    const sl_crdt_item_t *it = &item->it;
    size_t n = 1 + 1 + uint_len(ridx) + uint_len(it->dot.seq) + str_hdr_len(item->key_len) +
               item->key_len;
    switch (it->kind) {
    case SL_ITEM_LWW:
        n += uint_len(it->hlc) + ((it->flags & SL_ITEM_DELETED) ? 1 : bin_hdr_len(it->a_len) + it->a_len);
        break;
    case SL_ITEM_ADD: n += bin_hdr_len(it->a_len) + it->a_len; break;
    case SL_ITEM_CTR: n += uint_len(it->p) + uint_len(it->n); break;
    case SL_ITEM_FIELD:
        n += uint_len(it->hlc) + bin_hdr_len(it->a_len) + it->a_len + bin_hdr_len(it->b_len) + it->b_len;
        break;
    case SL_ITEM_DEAD:
        n += 1 + ((it->flags & SL_ITEM_ALL) ? 1 : bin_hdr_len(it->a_len) + it->a_len);
        n += arr_hdr_len(2 * (size_t)it->ctx_count);
        for (uint32_t i = 0; i < it->ctx_count; i++)
            n += uint_len(it->ctx[i].rid) + uint_len(it->ctx[i].seq);
        break;
    default: break;
    }
    return n;
}

/* ---- encoding ---- */

static void write_pairs(sl_mpack_writer_t *w, const sl_store_range_t *r, uint32_t n, bool triple) {
    sl_mpack_write_array(w, n * (triple ? 3 : 2));
    for (uint32_t i = 0; i < n; i++) {
        sl_mpack_write_uint(w, r[i].rid);
        if (triple)
            sl_mpack_write_uint(w, r[i].from);
        sl_mpack_write_uint(w, r[i].to);
    }
}

static uint32_t find_ridx(const sl_store_dmsg_t *m, uint64_t rid, bool *ok) {
    /* ranges (vv) first, then retired; both sorted by rid */
    const sl_store_range_t *tabs[2] = {m->ranges, m->retired};
    uint32_t counts[2] = {m->range_count, m->type == SL_STORE_MSG_SNAPSHOT ? m->retired_count : 0};
    uint32_t base = 0;
    for (int t = 0; t < 2; t++) {
        uint32_t lo = 0, hi = counts[t];
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (tabs[t][mid].rid == rid) {
                *ok = true;
                return base + mid;
            }
            if (tabs[t][mid].rid < rid)
                lo = mid + 1;
            else
                hi = mid;
        }
        base += counts[t];
    }
    *ok = false;
    return 0;
}

static sl_err write_items(sl_mpack_writer_t *w, const sl_store_dmsg_t *m) {
    sl_mpack_write_array(w, m->item_count);
    for (uint32_t i = 0; i < m->item_count; i++) {
        const sl_store_item_t *item = &m->items[i];
        const sl_crdt_item_t *it = &item->it;
        bool ok;
        uint32_t ridx = find_ridx(m, it->dot.rid, &ok);
        if (!ok)
            return SL_EINVAL;
        static const uint8_t arity[] = {0, 6, 5, 6, 7, 7};
        sl_mpack_write_array(w, arity[it->kind <= SL_ITEM_KIND_MAX ? it->kind : 0]);
        sl_mpack_write_uint(w, it->kind);
        sl_mpack_write_uint(w, ridx);
        sl_mpack_write_uint(w, it->dot.seq);
        sl_mpack_write_str(w, item->key, item->key_len);
        switch (it->kind) {
        case SL_ITEM_LWW:
            sl_mpack_write_uint(w, it->hlc);
            if (it->flags & SL_ITEM_DELETED)
                sl_mpack_write_nil(w);
            else
                sl_mpack_write_bin(w, it->a, it->a_len);
            break;
        case SL_ITEM_ADD: sl_mpack_write_bin(w, it->a, it->a_len); break;
        case SL_ITEM_CTR:
            sl_mpack_write_uint(w, it->p);
            sl_mpack_write_uint(w, it->n);
            break;
        case SL_ITEM_FIELD:
            sl_mpack_write_uint(w, it->hlc);
            sl_mpack_write_bin(w, it->a, it->a_len);
            sl_mpack_write_bin(w, it->b, it->b_len);
            break;
        case SL_ITEM_DEAD:
            sl_mpack_write_uint(w, it->type);
            if (it->flags & SL_ITEM_ALL)
                sl_mpack_write_nil(w);
            else
                sl_mpack_write_bin(w, it->a, it->a_len);
            sl_mpack_write_array(w, it->ctx_count * 2);
            for (uint32_t k = 0; k < it->ctx_count; k++) {
                sl_mpack_write_uint(w, it->ctx[k].rid);
                sl_mpack_write_uint(w, it->ctx[k].seq);
            }
            break;
        default: return SL_EINVAL;
        }
    }
    return w->err;
}

sl_err sl_store_msg_encode(const sl_store_dmsg_t *m, size_t max_len, sl_store_msg_t *out) {
    sl_mpack_writer_t w;
    sl_mpack_writer_init(&w, max_len);
    sl_err err = SL_OK;
    out->type = m->type;
    out->body = NULL;
    out->len = 0;
    switch (m->type) {
    case SL_STORE_MSG_DIGEST:
        sl_mpack_write_map(&w, 6);
        sl_mpack_write_uint(&w, 0);
        sl_mpack_write_uint(&w, m->sender);
        sl_mpack_write_uint(&w, 1);
        sl_mpack_write_bool(&w, m->reply);
        sl_mpack_write_uint(&w, 2);
        write_pairs(&w, m->ranges, m->range_count, false);
        sl_mpack_write_uint(&w, 3);
        write_pairs(&w, m->retired, m->retired_count, false);
        sl_mpack_write_uint(&w, 4);
        sl_mpack_write_bool(&w, m->want_reset);
        sl_mpack_write_uint(&w, 5);
        sl_mpack_write_str(&w, m->reply_to, m->reply_to_len);
        break;
    case SL_STORE_MSG_SUMMARY:
        sl_mpack_write_map(&w, 4);
        sl_mpack_write_uint(&w, 0);
        sl_mpack_write_uint(&w, m->sender);
        sl_mpack_write_uint(&w, 1);
        sl_mpack_write_bool(&w, m->reply);
        sl_mpack_write_uint(&w, 2);
        sl_mpack_write_uint(&w, m->fingerprint);
        sl_mpack_write_uint(&w, 3);
        sl_mpack_write_str(&w, m->reply_to, m->reply_to_len);
        break;
    case SL_STORE_MSG_DELTA:
        sl_mpack_write_map(&w, 3);
        sl_mpack_write_uint(&w, 0);
        sl_mpack_write_uint(&w, m->sender);
        sl_mpack_write_uint(&w, 1);
        write_pairs(&w, m->ranges, m->range_count, true);
        sl_mpack_write_uint(&w, 2);
        err = write_items(&w, m);
        break;
    case SL_STORE_MSG_SNAPSHOT:
        sl_mpack_write_map(&w, 8);
        sl_mpack_write_uint(&w, 0);
        sl_mpack_write_uint(&w, m->sender);
        sl_mpack_write_uint(&w, 1);
        sl_mpack_write_uint(&w, m->snap_id);
        sl_mpack_write_uint(&w, 2);
        sl_mpack_write_uint(&w, m->chunk);
        sl_mpack_write_uint(&w, 3);
        sl_mpack_write_uint(&w, m->chunks);
        sl_mpack_write_uint(&w, 4);
        sl_mpack_write_uint(&w, m->flags);
        sl_mpack_write_uint(&w, 5);
        write_pairs(&w, m->ranges, m->range_count, false);
        sl_mpack_write_uint(&w, 6);
        write_pairs(&w, m->retired, m->retired_count, false);
        sl_mpack_write_uint(&w, 7);
        err = write_items(&w, m);
        break;
    default:
        err = SL_ETYPE;
    }
    if (err) {
        sl_mpack_writer_fini(&w);
        return err;
    }
    return sl_mpack_writer_finish(&w, &out->body, &out->len);
}

void sl_store_msg_fini(sl_store_msg_t *m) {
    sl_free(m->body);
    m->body = NULL;
    m->len = 0;
}

/* ---- decoding ---- */

void sl_store_dmsg_fini(sl_store_dmsg_t *m) {
    sl_free(m->ranges);
    sl_free(m->retired);
    sl_free(m->items);
    sl_free(m->dots);
    memset(m, 0, sizeof *m);
}

/* A flat array of (rid, [from,] to) groups, rid strictly ascending. */
static sl_err read_pairs(sl_mpack_reader_t *r, bool triple, sl_store_range_t **out, uint32_t *count) {
    uint32_t n;
    uint32_t width = triple ? 3 : 2;
    if (sl_mpack_read_array(r, SL_STORE_MAX_RANGES * width, &n))
        return r->err;
    if (n % width)
        return sl_mpack_reader_fail(r, SL_EPROTO);
    if (n > sl_mpack_reader_left(r))
        return sl_mpack_reader_fail(r, SL_ETRUNC);
    *count = n / width;
    if (!*count)
        return SL_OK;
    *out = sl_calloc(*count, sizeof **out);
    if (!*out)
        return sl_mpack_reader_fail(r, SL_ENOMEM);
    for (uint32_t i = 0; i < *count; i++) {
        sl_store_range_t *g = &(*out)[i];
        sl_mpack_read_uint(r, UINT64_MAX, &g->rid);
        if (triple)
            sl_mpack_read_uint(r, UINT64_MAX, &g->from);
        sl_mpack_read_uint(r, UINT64_MAX, &g->to);
        if (r->err)
            return r->err;
        if (g->rid == 0 || (i && g->rid <= (*out)[i - 1].rid) ||
            (triple && g->from >= g->to))
            return sl_mpack_reader_fail(r, SL_EPROTO);
    }
    return SL_OK;
}

static sl_err read_bytes_or_nil(sl_mpack_reader_t *r, const uint8_t **p, uint32_t *len, bool *nil) {
    *nil = sl_mpack_peek(r) == SL_MPACK_NIL;
    if (*nil) {
        *p = NULL;
        *len = 0;
        return sl_mpack_read_nil(r);
    }
    size_t n = 0;
    sl_mpack_read_bin(r, 0, SL_CRDT_MAX_BYTES, p, &n);
    *len = (uint32_t)n;
    return r->err;
}

static sl_err read_items(sl_mpack_reader_t *r, sl_store_dmsg_t *m) {
    uint32_t n;
    if (sl_mpack_read_array(r, MAX_ITEMS, &n))
        return r->err;
    if ((size_t)n * 6 > sl_mpack_reader_left(r))
        return sl_mpack_reader_fail(r, SL_ETRUNC);
    m->item_count = 0;
    if (!n)
        return SL_OK;
    m->items = sl_calloc(n, sizeof *m->items);
    if (!m->items)
        return sl_mpack_reader_fail(r, SL_ENOMEM);
    uint32_t dot_cap = 0;
    bool snap = m->type == SL_STORE_MSG_SNAPSHOT;
    uint32_t nref = m->range_count + (snap ? m->retired_count : 0);
    for (uint32_t i = 0; i < n; i++) {
        sl_store_item_t *item = &m->items[i];
        sl_crdt_item_t *it = &item->it;
        uint32_t arity;
        uint64_t kind, ridx, v;
        if (sl_mpack_read_array(r, 7, &arity))
            return r->err;
        if (sl_mpack_read_uint(r, SL_ITEM_KIND_MAX, &kind))
            return r->err;
        static const uint8_t want[] = {0, 6, 5, 6, 7, 7};
        if (kind == 0 || arity != want[kind])
            return sl_mpack_reader_fail(r, SL_EPROTO);
        it->kind = (uint8_t)kind;
        if (sl_mpack_read_uint(r, nref ? nref - 1 : 0, &ridx) || nref == 0)
            return sl_mpack_reader_fail(r, SL_EPROTO);
        const sl_store_range_t *g = ridx < m->range_count ? &m->ranges[ridx]
                                                          : &m->retired[ridx - m->range_count];
        sl_mpack_read_uint(r, UINT64_MAX, &it->dot.seq);
        it->dot.rid = g->rid;
        if (!r->err && (it->dot.seq <= g->from || it->dot.seq > g->to))
            return sl_mpack_reader_fail(r, SL_EPROTO); /* dot outside its range */
        size_t kl = 0;
        sl_mpack_read_str(r, 1, SL_STORE_MAX_KEY_LEN, &item->key, &kl);
        item->key_len = (uint32_t)kl;
        bool nil;
        switch (kind) {
        case SL_ITEM_LWW:
            it->type = SL_CRDT_LWW;
            sl_mpack_read_uint(r, UINT64_MAX, &it->hlc);
            read_bytes_or_nil(r, &it->a, &it->a_len, &nil);
            it->flags = nil ? SL_ITEM_DELETED : 0;
            break;
        case SL_ITEM_ADD:
            it->type = SL_CRDT_SET;
            read_bytes_or_nil(r, &it->a, &it->a_len, &nil);
            if (nil)
                return sl_mpack_reader_fail(r, SL_EPROTO);
            break;
        case SL_ITEM_CTR:
            it->type = SL_CRDT_COUNTER;
            sl_mpack_read_uint(r, UINT64_MAX, &it->p);
            sl_mpack_read_uint(r, UINT64_MAX, &it->n);
            break;
        case SL_ITEM_FIELD: {
            it->type = SL_CRDT_GMAP;
            size_t al = 0, bl = 0;
            sl_mpack_read_uint(r, UINT64_MAX, &it->hlc);
            sl_mpack_read_bin(r, 0, SL_CRDT_MAX_BYTES, &it->a, &al);
            sl_mpack_read_bin(r, 0, SL_CRDT_MAX_BYTES, &it->b, &bl);
            it->a_len = (uint32_t)al;
            it->b_len = (uint32_t)bl;
            break;
        }
        case SL_ITEM_DEAD: {
            sl_mpack_read_uint(r, SL_CRDT_TYPE_MAX, &v);
            it->type = (uint8_t)v;
            read_bytes_or_nil(r, &it->a, &it->a_len, &nil);
            it->flags = nil ? SL_ITEM_ALL : 0;
            uint32_t cn;
            if (sl_mpack_read_array(r, 2 * SL_CRDT_MAX_CTX, &cn))
                return r->err;
            if (cn % 2 || cn == 0)
                return sl_mpack_reader_fail(r, SL_EPROTO);
            if (cn > sl_mpack_reader_left(r))
                return sl_mpack_reader_fail(r, SL_ETRUNC);
            if (m->dot_count + cn / 2 > dot_cap) {
                uint32_t cap = dot_cap ? dot_cap * 2 : 64;
                while (cap < m->dot_count + cn / 2)
                    cap *= 2;
                sl_dot_t *d = sl_realloc(m->dots, cap * sizeof *d);
                if (!d)
                    return sl_mpack_reader_fail(r, SL_ENOMEM);
                /* re-point earlier contexts */
                for (uint32_t k = 0; k < i; k++)
                    if (m->items[k].it.ctx_count)
                        m->items[k].it.ctx = d + (m->items[k].it.ctx - m->dots);
                m->dots = d;
                dot_cap = cap;
            }
            sl_dot_t *ctx = m->dots + m->dot_count;
            for (uint32_t k = 0; k < cn / 2; k++) {
                sl_mpack_read_uint(r, UINT64_MAX, &ctx[k].rid);
                sl_mpack_read_uint(r, UINT64_MAX, &ctx[k].seq);
            }
            it->ctx = ctx;
            it->ctx_count = cn / 2;
            m->dot_count += cn / 2;
            break;
        }
        }
        if (r->err)
            return r->err;
        sl_err e = sl_crdt_item_check(it);
        if (e)
            return sl_mpack_reader_fail(r, e);
        m->item_count++;
    }
    return SL_OK;
}

/* A reply address: a str of 0..SL_STORE_MAX_ADDR octets, no control
 * characters. */
static void read_addr(sl_mpack_reader_t *r, sl_store_dmsg_t *out) {
    size_t n = 0;
    sl_mpack_read_str(r, 0, SL_STORE_MAX_ADDR, &out->reply_to, &n);
    out->reply_to_len = (uint32_t)n;
    for (size_t i = 0; !r->err && i < n; i++)
        if (out->reply_to[i] < 0x20 || out->reply_to[i] == 0x7f)
            sl_mpack_reader_fail(r, SL_EPROTO); /* no control characters */
}

sl_err sl_store_msg_decode(uint8_t type, const uint8_t *body, size_t len, sl_store_dmsg_t *out) {
    memset(out, 0, sizeof *out);
    out->type = type;
    if (type < SL_STORE_MSG_DIGEST || type > SL_STORE_MSG_SUMMARY)
        return SL_ETYPE;
    if (len > SL_MSG_MAX_LEN && type != SL_STORE_MSG_SNAPSHOT)
        return SL_ETOOBIG;
    sl_mpack_reader_t r;
    sl_mpack_reader_init(&r, body, len);
    sl_mpack_map_t map;
    uint64_t key, v;
    static const uint32_t nkeys[] = {6, 3, 8, 4};
    uint32_t want = nkeys[type - SL_STORE_MSG_DIGEST];
    uint32_t seen = 0;
    sl_mpack_map_begin(&r, 16, &map);
    while (sl_mpack_map_next(&r, &map, &key)) {
        if (key >= want) {
            sl_mpack_skip(&r, SL_MPACK_MAX_DEPTH); /* a later version's field */
            continue;
        }
        seen |= 1u << key;
        if (key == 0) {
            sl_mpack_read_uint(&r, UINT64_MAX, &out->sender);
            if (!r.err && out->sender == 0)
                sl_mpack_reader_fail(&r, SL_EPROTO);
            continue;
        }
        switch (type) {
        case SL_STORE_MSG_DIGEST:
            if (key == 1)
                sl_mpack_read_bool(&r, &out->reply);
            else if (key == 2)
                read_pairs(&r, false, &out->ranges, &out->range_count);
            else if (key == 3)
                read_pairs(&r, false, &out->retired, &out->retired_count);
            else if (key == 4)
                sl_mpack_read_bool(&r, &out->want_reset);
            else
                read_addr(&r, out);
            break;
        case SL_STORE_MSG_SUMMARY:
            if (key == 1)
                sl_mpack_read_bool(&r, &out->reply);
            else if (key == 2) {
                sl_mpack_read_uint(&r, UINT64_MAX, &out->fingerprint);
                if (!r.err && out->fingerprint == 0)
                    sl_mpack_reader_fail(&r, SL_EPROTO);
            } else
                read_addr(&r, out);
            break;
        case SL_STORE_MSG_DELTA:
            if (key == 1)
                read_pairs(&r, true, &out->ranges, &out->range_count);
            else
                read_items(&r, out);
            break;
        default:
            switch (key) {
            case 1: sl_mpack_read_uint(&r, UINT64_MAX, &out->snap_id); break;
            case 2: sl_mpack_read_uint(&r, UINT32_MAX - 1, &v); out->chunk = (uint32_t)v; break;
            case 3:
                sl_mpack_read_uint(&r, UINT32_MAX, &v);
                out->chunks = (uint32_t)v;
                if (!r.err && (v == 0 || out->chunk >= v))
                    sl_mpack_reader_fail(&r, SL_EPROTO);
                break;
            case 4:
                sl_mpack_read_uint(&r, SL_STORE_SNAP_RESET, &v);
                out->flags = (uint8_t)v;
                break;
            case 5: read_pairs(&r, false, &out->ranges, &out->range_count); break;
            case 6:
                read_pairs(&r, false, &out->retired, &out->retired_count);
                /* a replica is either in the vv or retired, not both */
                for (uint32_t i = 0, j = 0; !r.err && i < out->range_count && j < out->retired_count;) {
                    if (out->ranges[i].rid == out->retired[j].rid)
                        sl_mpack_reader_fail(&r, SL_EPROTO);
                    else if (out->ranges[i].rid < out->retired[j].rid)
                        i++;
                    else
                        j++;
                }
                break;
            default: read_items(&r, out); break;
            }
        }
    }
    sl_mpack_reader_end(&r);
    if (!r.err && seen != (1u << want) - 1)
        sl_mpack_reader_fail(&r, SL_EPROTO); /* a required field is missing */
    if (r.err) {
        sl_err err = r.err;
        sl_store_dmsg_fini(out);
        out->type = type;
        return err;
    }
    return SL_OK;
}
