/* How a DELTA spreads: see store_spread.h. */
#include "store/store_spread.h"

#include <assert.h>

#include "starling/mpack.h"
#include "starling/store.h"

/* Whether a DELTA body is one range of its sender's own dots: a write as
 * its writer pushed it (store_node.c's push_run), or relayed. Reads the
 * two fields that come first (keys ascending: sender, ranges), not the
 * atoms; the store decodes the whole of it in any case. */
static bool is_rumor(const uint8_t *body, size_t len) {
    sl_mpack_reader_t r;
    sl_mpack_map_t map;
    uint64_t key, sender = 0, rid = 0;
    uint32_t n = 0;
    sl_mpack_reader_init(&r, body, len);
    sl_mpack_map_begin(&r, 16, &map);
    if (!sl_mpack_map_next(&r, &map, &key) || key != 0 ||
        sl_mpack_read_uint(&r, UINT64_MAX, &sender) != SL_OK)
        return false;
    if (!sl_mpack_map_next(&r, &map, &key) || key != 1 ||
        sl_mpack_read_array(&r, 3 * SL_STORE_MAX_RANGES, &n) != SL_OK || n != 3)
        return false; /* (rid, from, to) triples: exactly one range */
    return sl_mpack_read_uint(&r, UINT64_MAX, &rid) == SL_OK && rid == sender && rid != 0;
}

/* The head of a DELTA as the core encodes a local write: map of 3 (keys
 * sender, ranges, atoms), one (rid, from, to) range of the sender's own
 * dots; `*atoms_off` gets where its atoms begin (past their array's
 * header) and `*atom_count` how many there are. The atoms run to the end
 * of the body (the last field). */
static bool delta_head(const uint8_t *body, size_t len, uint64_t *sender, sl_store_range_t *range,
                       size_t *atoms_off, uint32_t *atom_count) {
    sl_mpack_reader_t r;
    sl_mpack_map_t map;
    uint64_t key;
    uint32_t n = 0;
    sl_mpack_reader_init(&r, body, len);
    if (sl_mpack_map_begin(&r, 16, &map) != SL_OK || map.left != 3)
        return false;
    if (!sl_mpack_map_next(&r, &map, &key) || key != 0 ||
        sl_mpack_read_uint(&r, UINT64_MAX, sender) != SL_OK)
        return false;
    if (!sl_mpack_map_next(&r, &map, &key) || key != 1 ||
        sl_mpack_read_array(&r, 3 * SL_STORE_MAX_RANGES, &n) != SL_OK || n != 3 ||
        sl_mpack_read_uint(&r, UINT64_MAX, &range->rid) != SL_OK ||
        sl_mpack_read_uint(&r, UINT64_MAX, &range->from) != SL_OK ||
        sl_mpack_read_uint(&r, UINT64_MAX, &range->to) != SL_OK)
        return false;
    if (!sl_mpack_map_next(&r, &map, &key) || key != 2 ||
        sl_mpack_read_array(&r, UINT32_MAX, atom_count) != SL_OK)
        return false;
    *atoms_off = (size_t)(r.p - r.start);
    return range->rid == *sender && range->rid != 0 && range->from <= range->to;
}

bool sl_store_spread_range(const uint8_t *body, size_t len, uint64_t *sender,
                           sl_store_range_t *range) {
    size_t off;
    uint32_t n;
    return delta_head(body, len, sender, range, &off, &n);
}

sl_err sl_store_spread_join(const sl_store_msg_t *deltas, size_t count, size_t max_len,
                            sl_store_msg_t *out) {
    out->type = SL_STORE_MSG_DELTA;
    out->body = NULL;
    out->len = 0;
    if (!count)
        return SL_EINVAL;
    uint64_t sender = 0;
    sl_store_range_t all = {0, 0, 0};
    uint64_t atoms = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t s;
        sl_store_range_t rg;
        size_t off;
        uint32_t n;
        if (deltas[i].type != SL_STORE_MSG_DELTA ||
            !delta_head(deltas[i].body, deltas[i].len, &s, &rg, &off, &n) ||
            (i && (s != sender || rg.rid != all.rid || rg.from != all.to)))
            return SL_EINVAL;
        if (!i) {
            sender = s;
            all = rg;
        }
        all.to = rg.to;
        atoms += n;
    }
    if (atoms > UINT32_MAX)
        return SL_ETOOBIG;
    sl_mpack_writer_t w;
    sl_mpack_writer_init(&w, max_len);
    sl_mpack_write_map(&w, 3);
    sl_mpack_write_uint(&w, 0);
    sl_mpack_write_uint(&w, sender);
    sl_mpack_write_uint(&w, 1);
    sl_mpack_write_array(&w, 3);
    sl_mpack_write_uint(&w, all.rid);
    sl_mpack_write_uint(&w, all.from);
    sl_mpack_write_uint(&w, all.to);
    sl_mpack_write_uint(&w, 2);
    sl_mpack_write_array(&w, (uint32_t)atoms);
    for (size_t i = 0; i < count; i++) {
        uint64_t s;
        sl_store_range_t rg;
        size_t off = 0; /* (the first pass read every head: this one cannot fail) */
        uint32_t n;
        delta_head(deltas[i].body, deltas[i].len, &s, &rg, &off, &n);
        sl_mpack_write_raw(&w, deltas[i].body + off, deltas[i].len - off);
    }
    if (w.err) {
        sl_err err = w.err;
        sl_mpack_writer_fini(&w);
        return err;
    }
    return sl_mpack_writer_finish(&w, &out->body, &out->len);
}

size_t sl_store_spread_fanout(size_t others, sl_spread_origin origin, const uint8_t *body,
                              size_t len) {
    if (others <= SL_SPREAD_PUSH_ALL)
        return origin == SL_SPREAD_LOCAL ? others : 0;
    if (origin == SL_SPREAD_RELAY && (len > SL_SPREAD_RELAY_MAX_LEN || !is_rumor(body, len)))
        return 0;
    return SL_SPREAD_FANOUT < others ? SL_SPREAD_FANOUT : others;
}

static bool picked(const uint32_t *out, size_t n, size_t i) {
    for (size_t k = 0; k < n; k++)
        if (out[k] == i)
            return true;
    return false;
}

size_t sl_store_spread_pick(sl_rng_t *rng, size_t count, size_t k, sl_spread_ok_fn ok, void *ctx,
                            uint32_t *out) {
    assert(k <= SL_SPREAD_MAX_TARGETS && count <= UINT32_MAX);
    size_t n = 0;
    if (!k || !count)
        return 0;
    /* random tries: each costs one look at a member, so a pick is O(k),
       not a pass over a thousand members for every write and relay */
    if (2 * k < count)
        for (size_t tries = 4 * k + 8; tries && n < k; tries--) {
            size_t i = (size_t)sl_rng_below(rng, count);
            if (!picked(out, n, i) && ok(ctx, i))
                out[n++] = (uint32_t)i;
        }
    /* a small cluster (push to all), or mostly members that may not
       receive: one pass from a random start takes what is left */
    size_t start = (size_t)sl_rng_below(rng, count);
    for (size_t s = 0; s < count && n < k; s++) {
        size_t i = (start + s) % count;
        if (!picked(out, n, i) && ok(ctx, i))
            out[n++] = (uint32_t)i;
    }
    return n;
}
