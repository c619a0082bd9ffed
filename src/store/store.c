/* The replicated store, the map itself (records, index, arena, replicas,
 * local operations, reads); anti-entropy is src/store/store_sync.c. See
 * include/starling/store.h for the model.
 *
 * Layout (sized for 10^6 keys and more):
 *   recs    32-byte records in one array; a free list reuses them
 *   slots   open addressing (linear probing): 32 bits of the key's hash
 *           (home slot and tag: most misses never touch a record) and the
 *           record number + 1
 *   blocks  the arena: 1 MiB blocks holding each key followed by its LWW
 *           value; an overwrite that fits is done in place, otherwise the
 *           old bytes become garbage, and the arena is compacted when
 *           garbage passes half of what is live
 *   reps    the replicas this store knows (index "rix" fits in 16 bits),
 *           with their version vector entry; rmap finds a rix by id
 *   peers   what each peer's last DIGEST said it has (for deltas, garbage
 *           collection and retiring) */
#include "starling/store.h"
#include "store/store_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "starling/hash.h"
#include "starling/hlc.h"
#include "starling/mpack.h"
#include "starling/msg.h"
#include "starling/rng.h"


sl_err sl_store_set_addr(sl_store_t *s, const char *addr) {
    size_t n = strlen(addr);
    if (n > SL_STORE_MAX_ADDR)
        return SL_ETOOBIG;
    for (size_t i = 0; i < n; i++)
        if ((uint8_t)addr[i] < 0x20 || addr[i] == 0x7f)
            return SL_EINVAL;
    memcpy(s->addr, addr, n + 1);
    return SL_OK;
}

void sl_store_mark_durable(sl_store_t *s) {
    s->fp_cached = 0;
    s->track_durable = true;
    for (uint32_t i = 0; i < s->rep_count; i++)
        s->reps[i].durable = s->reps[i].seq;
}

void sl_store_request_reset(sl_store_t *s) {
    s->fp_cached = 0;
    s->want_reset = true;
}

void sl_store_set_bug(sl_store_t *s, sl_store_bug bug) { s->bug = bug; }

sl_err store_grow(void **p, uint32_t *cap, uint32_t need, size_t elem) {
    if (need <= *cap)
        return SL_OK;
    uint32_t n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    void *q = sl_realloc(*p, (size_t)n * elem);
    if (!q)
        return SL_ENOMEM;
    *p = q;
    *cap = n;
    return SL_OK;
}

/* ---- arena ---- */

static sl_err arena_alloc(sl_store_t *s, size_t len, uint64_t *kv) {
    if (s->block_count == 0 || s->block_pos + len > BLOCK_LEN) {
        sl_err err = store_grow((void **)&s->blocks, &s->block_cap, s->block_count + 1, sizeof *s->blocks);
        if (err)
            return err;
        uint8_t *b = sl_malloc(BLOCK_LEN);
        if (!b)
            return SL_ENOMEM;
        if (s->block_count)
            s->arena_garbage += BLOCK_LEN - s->block_pos; /* tail left unused */
        s->blocks[s->block_count++] = b;
        s->block_pos = 0;
    }
    *kv = ((uint64_t)(s->block_count - 1) << BLOCK_SHIFT) | s->block_pos;
    s->block_pos += (uint32_t)len;
    s->arena_used += len;
    return SL_OK;
}

static void arena_release(sl_store_t *s, size_t len) {
    s->arena_used -= len;
    s->arena_garbage += len;
}

/* Copies every record's bytes into fresh blocks; on failure nothing
 * changes. */
static sl_err arena_compact(sl_store_t *s) {
    uint64_t *kvs = sl_malloc(((size_t)s->rec_count + 1) * sizeof *kvs);
    if (!kvs)
        return SL_ENOMEM;
    sl_store_t fresh; /* only its arena fields are used */
    memset(&fresh, 0, sizeof fresh);
    for (uint32_t i = 0; i < s->rec_count; i++) {
        const rec_t *r = &s->recs[i];
        if (r->type == SL_CRDT_NONE)
            continue;
        size_t len = r->key_len + (r->type == SL_CRDT_LWW ? r->val_len : 0);
        if (arena_alloc(&fresh, len, &kvs[i]) != SL_OK) {
            for (uint32_t b = 0; b < fresh.block_count; b++)
                sl_free(fresh.blocks[b]);
            sl_free(fresh.blocks);
            sl_free(kvs);
            return SL_ENOMEM;
        }
        memcpy(arena_ptr(&fresh, kvs[i]), arena_ptr(s, r->kv), len);
    }
    for (uint32_t i = 0; i < s->rec_count; i++)
        if (s->recs[i].type != SL_CRDT_NONE)
            s->recs[i].kv = kvs[i];
    for (uint32_t b = 0; b < s->block_count; b++)
        sl_free(s->blocks[b]);
    sl_free(s->blocks);
    s->blocks = fresh.blocks;
    s->block_count = fresh.block_count;
    s->block_cap = fresh.block_cap;
    s->block_pos = fresh.block_pos;
    s->arena_used = fresh.arena_used;
    s->arena_garbage = fresh.arena_garbage;
    sl_free(kvs);
    return SL_OK;
}

void store_maybe_compact(sl_store_t *s) {
    if (s->arena_garbage > (8u << 20) && s->arena_garbage > s->arena_used / 2) {
        /* compaction needs room for the live bytes; on failure keep going */
        uint64_t before = s->arena_garbage;
        if (arena_compact(s) != SL_OK)
            sl_log(SL_LOG_WARNING, "STORE-COMPACT", "arena compaction failed, %" PRIu64
                   " bytes stay unused", before);
    }
}

/* ---- replicas ---- */

uint32_t store_rix_find(const sl_store_t *s, uint64_t rid) {
    if (!s->rmap)
        return NO_REC;
    for (uint32_t i = (uint32_t)sl_mix64(rid) & s->rmap_mask;; i = (i + 1) & s->rmap_mask) {
        uint32_t v = s->rmap[i];
        if (!v)
            return NO_REC;
        if (s->reps[v - 1].rid == rid)
            return v - 1;
    }
}

sl_err store_rix_get(sl_store_t *s, uint64_t rid, uint32_t *out) {
    uint32_t rix = store_rix_find(s, rid);
    if (rix != NO_REC) {
        *out = rix;
        return SL_OK;
    }
    if (s->rep_count >= SL_STORE_MAX_REPLICAS)
        return SL_ETOOBIG;
    sl_err err = store_grow((void **)&s->reps, &s->rep_cap, s->rep_count + 1, sizeof *s->reps);
    if (err)
        return err;
    if ((s->rep_count + 1) * 2 > s->rmap_mask + 1 || !s->rmap) {
        uint32_t size = s->rmap ? (s->rmap_mask + 1) * 2 : 64;
        uint32_t *m = sl_calloc(size, sizeof *m);
        if (!m)
            return SL_ENOMEM;
        for (uint32_t r = 0; r < s->rep_count; r++) {
            uint32_t i = (uint32_t)sl_mix64(s->reps[r].rid) & (size - 1);
            while (m[i])
                i = (i + 1) & (size - 1);
            m[i] = r + 1;
        }
        sl_free(s->rmap);
        s->rmap = m;
        s->rmap_mask = size - 1;
    }
    rix = s->rep_count++;
    s->reps[rix] = (replica_t){.rid = rid};
    uint32_t i = (uint32_t)sl_mix64(rid) & s->rmap_mask;
    while (s->rmap[i])
        i = (i + 1) & s->rmap_mask;
    s->rmap[i] = rix + 1;
    *out = rix;
    return SL_OK;
}

uint64_t sl_store_vv_get(const sl_store_t *s, uint64_t rid) {
    uint32_t rix = store_rix_find(s, rid);
    return rix == NO_REC || s->reps[rix].retired ? 0 : s->reps[rix].seq;
}


/* ---- index ---- */

static uint32_t find(const sl_store_t *s, const void *key, size_t len, uint64_t h, uint32_t *slot) {
    uint32_t tag = slot_hash(h);
    for (uint32_t i = tag & s->slot_mask;; i = (i + 1) & s->slot_mask) {
        uint64_t v = s->slots[i];
        if (!v) {
            if (slot)
                *slot = i;
            return NO_REC;
        }
        if ((uint32_t)(v >> 32) != tag)
            continue;
        const rec_t *r = &s->recs[(uint32_t)v - 1];
        if (r->key_len == len && memcmp(rec_key(s, r), key, len) == 0) {
            if (slot)
                *slot = i;
            return (uint32_t)v - 1;
        }
    }
}

static sl_err index_grow(sl_store_t *s) {
    uint32_t size = (s->slot_mask + 1) * 2;
    uint64_t *slots = sl_calloc(size, sizeof *slots);
    if (!slots)
        return SL_ENOMEM;
    for (uint32_t i = 0; i <= s->slot_mask; i++) {
        uint64_t v = s->slots[i];
        if (!v)
            continue;
        uint32_t j = (uint32_t)(v >> 32) & (size - 1);
        while (slots[j])
            j = (j + 1) & (size - 1);
        slots[j] = v;
    }
    sl_free(s->slots);
    s->slots = slots;
    s->slot_mask = size - 1;
    return SL_OK;
}

/* Removes a record from the index (backward-shift deletion) and frees it. */
void store_rec_delete(sl_store_t *s, uint32_t idx) {
    rec_t *r = &s->recs[idx];
    uint32_t i;
    find(s, rec_key(s, r), r->key_len, key_hash(rec_key(s, r), r->key_len), &i);
    s->slots[i] = 0;
    for (uint32_t j = (i + 1) & s->slot_mask; s->slots[j]; j = (j + 1) & s->slot_mask) {
        uint32_t home = (uint32_t)(s->slots[j] >> 32) & s->slot_mask;
        /* move j back to i unless its home lies cyclically in (i, j] */
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            s->slots[i] = s->slots[j];
            s->slots[j] = 0;
            i = j;
        }
    }
    s->indexed--;
    arena_release(s, r->key_len + (r->type == SL_CRDT_LWW ? r->val_len : 0));
    if (r->type != SL_CRDT_LWW && r->u.val) {
        sl_crdt_val_fini(r->u.val);
        sl_free(r->u.val);
    }
    memset(r, 0, sizeof *r);
    r->kv = s->free_head; /* chain the free record */
    s->free_head = (uint64_t)idx + 1;
}

/* Creates a record for `key` (not present; `slot` from find) with `extra`
 * arena bytes after the key. */
static sl_err rec_create(sl_store_t *s, const void *key, size_t len, uint64_t h, size_t extra,
                         uint32_t *out) {
    sl_err err;
    if ((uint64_t)(s->indexed + 1) * 4 > (uint64_t)(s->slot_mask + 1) * 3) {
        if ((err = index_grow(s)))
            return err;
    }
    uint32_t idx;
    if (s->free_head) {
        idx = (uint32_t)(s->free_head - 1);
        s->free_head = s->recs[idx].kv;
    } else {
        if (s->rec_count == NO_REC - 1)
            return SL_ETOOBIG;
        if ((err = store_grow((void **)&s->recs, &s->rec_cap, s->rec_count + 1, sizeof *s->recs)))
            return err;
        idx = s->rec_count++;
    }
    uint64_t kv;
    if ((err = arena_alloc(s, len + extra, &kv))) {
        s->recs[idx].type = SL_CRDT_NONE;
        s->recs[idx].kv = s->free_head;
        s->free_head = (uint64_t)idx + 1;
        return err;
    }
    rec_t *r = &s->recs[idx];
    memset(r, 0, sizeof *r);
    r->kv = kv;
    r->key_len = (uint16_t)len;
    memcpy(arena_ptr(s, kv), key, len);
    uint32_t slot;
    find(s, key, len, h, &slot);
    s->slots[slot] = (uint64_t)slot_hash(h) << 32 | (idx + 1);
    s->indexed++;
    *out = idx;
    return SL_OK;
}

/* ---- applying atoms ---- */

/* Writes an LWW atom into record `idx` (new or being overwritten). */
static sl_err lww_store(sl_store_t *s, uint32_t idx, const sl_crdt_item_t *it, uint32_t rix) {
    rec_t *r = &s->recs[idx];
    uint32_t len = (it->flags & SL_ITEM_DELETED) ? 0 : it->a_len;
    uint32_t old = r->type == SL_CRDT_LWW ? r->val_len : 0;
    if (r->type != SL_CRDT_LWW && r->type != SL_CRDT_NONE && r->u.val) {
        sl_crdt_val_fini(r->u.val);
        sl_free(r->u.val);
        r->u.val = NULL;
    }
    if (len > old) {
        uint64_t kv;
        sl_err err = arena_alloc(s, r->key_len + len, &kv);
        if (err)
            return err;
        memcpy(arena_ptr(s, kv), rec_key(s, r), r->key_len);
        arena_release(s, r->key_len + old);
        r->kv = kv;
    } else {
        arena_release(s, old - len);
    }
    if (len)
        memcpy(arena_ptr(s, r->kv) + r->key_len, it->a, len);
    r->val_len = len;
    r->hlc = it->hlc;
    r->u.dot = ((uint64_t)rix << SEQ_BITS) | it->dot.seq;
    r->type = SL_CRDT_LWW;
    r->flags = (it->flags & SL_ITEM_DELETED) ? REC_DELETED : 0;
    return SL_OK;
}

/* Joins one atom (already checked) into the map. */
sl_err store_apply_item_h(sl_store_t *s, const uint8_t *key, size_t key_len, uint64_t h,
                           const sl_crdt_item_t *it, uint32_t rix, bool *changed) {
    *changed = false;
    uint32_t idx = find(s, key, key_len, h, NULL);
    sl_err err;
    if (it->kind == SL_ITEM_LWW) {
        if (idx == NO_REC) {
            /* room for the value right after the key: written in place */
            uint32_t len = (it->flags & SL_ITEM_DELETED) ? 0 : it->a_len;
            if ((err = rec_create(s, key, key_len, h, len, &idx)))
                return err;
            s->recs[idx].type = SL_CRDT_LWW;
            s->recs[idx].val_len = len;
        } else {
            const rec_t *r = &s->recs[idx];
            if (r->type == SL_CRDT_LWW &&
                sl_crdt_lww_cmp(r->hlc, rec_dot(s, r), it->hlc, it->dot) >= 0)
                return SL_OK;
        }
        *changed = true;
        return lww_store(s, idx, it, rix);
    }
    if (idx == NO_REC) {
        if ((err = rec_create(s, key, key_len, h, 0, &idx)))
            return err;
        sl_crdt_val_t *v = sl_malloc(sizeof *v);
        if (!v) {
            store_rec_delete(s, idx);
            return SL_ENOMEM;
        }
        sl_crdt_val_init(v);
        s->recs[idx].u.val = v;
        s->recs[idx].type = it->type;
    }
    rec_t *r = &s->recs[idx];
    if (r->type == SL_CRDT_LWW)
        return SL_OK; /* a register holds the key: the smaller type wins */
    err = sl_crdt_val_apply(r->u.val, it, changed);
    if (r->u.val->type != SL_CRDT_NONE)
        r->type = r->u.val->type;
    return err;
}

sl_err store_apply_item(sl_store_t *s, const uint8_t *key, size_t key_len, const sl_crdt_item_t *it,
                         uint32_t rix, bool *changed) {
    return store_apply_item_h(s, key, key_len, key_hash(key, key_len), it, rix, changed);
}

/* Prefetching for a batch of atoms (random keys miss the cache three
 * times: slot, record, key bytes): stage 1 hashes item i + 8 and fetches
 * its slot, stage 2 fetches the record of item i + 4, stage 3 its key. */
void store_prefetch_item(const sl_store_t *s, const sl_store_dmsg_t *m, uint64_t *hs, uint32_t i) {
    if (i + PF_SLOT < m->item_count) {
        const sl_store_item_t *a = &m->items[i + PF_SLOT];
        uint64_t h = key_hash(a->key, a->key_len);
        hs[(i + PF_SLOT) % 16] = h;
        __builtin_prefetch(&s->slots[slot_hash(h) & s->slot_mask]);
    }
    if (i + PF_REC < m->item_count) {
        uint64_t v = s->slots[slot_hash(hs[(i + PF_REC) % 16]) & s->slot_mask];
        if (v && (uint32_t)v - 1 < s->rec_count)
            __builtin_prefetch(&s->recs[(uint32_t)v - 1]);
    }
    if (i + PF_KEY < m->item_count) {
        uint64_t v = s->slots[slot_hash(hs[(i + PF_KEY) % 16]) & s->slot_mask];
        if (v && (uint32_t)v - 1 < s->rec_count) {
            const rec_t *r = &s->recs[(uint32_t)v - 1];
            if (r->type != SL_CRDT_NONE)
                __builtin_prefetch(arena_ptr(s, r->kv));
        }
    }
}

/* ---- lifecycle ---- */

sl_err sl_store_new(uint64_t rid, const sl_store_config_t *cfg, sl_store_t **out) {
    *out = NULL;
    if (rid == 0)
        return SL_EINVAL;
    sl_store_t *s = sl_calloc(1, sizeof *s);
    if (!s)
        return SL_ENOMEM;
    if (cfg)
        s->cfg = *cfg;
    if (!s->cfg.max_msg_len || s->cfg.max_msg_len > SL_MSG_MAX_LEN)
        s->cfg.max_msg_len = s->cfg.max_msg_len ? SL_MSG_MAX_LEN : (1u << 20);
    if (!s->cfg.max_sync_len)
        s->cfg.max_sync_len = 8u << 20;
    sl_hlc_init(&s->hlc, s->cfg.max_clock_offset_ms);
    s->rid = rid;
    s->slots = sl_calloc(1024, sizeof *s->slots);
    sl_err err = s->slots ? SL_OK : SL_ENOMEM;
    s->slot_mask = 1023;
    if (!err)
        err = store_rix_get(s, rid, &s->self_rix);
    if (err) {
        sl_store_destroy(&s);
        return err;
    }
    *out = s;
    return SL_OK;
}

void sl_store_destroy(sl_store_t **sp) {
    sl_store_t *s = *sp;
    if (!s)
        return;
    for (uint32_t i = 0; i < s->rec_count; i++) {
        rec_t *r = &s->recs[i];
        if (r->type != SL_CRDT_NONE && r->type != SL_CRDT_LWW && r->u.val) {
            sl_crdt_val_fini(r->u.val);
            sl_free(r->u.val);
        }
    }
    for (uint32_t b = 0; b < s->block_count; b++)
        sl_free(s->blocks[b]);
    for (uint32_t p = 0; p < s->peer_count; p++) {
        sl_free(s->peers[p].vv);
        sl_free(s->peers[p].retired);
    }
    sl_free(s->blocks);
    sl_free(s->recs);
    sl_free(s->slots);
    sl_free(s->reps);
    sl_free(s->rmap);
    sl_free(s->peers);
    sl_free(s->live);
    sl_free(s->gc_cut_next);
    sl_free(s->gc_target);
    sl_free(s->gc_cut);
    sl_free(s->gc_done);
    sl_store_destroy(&s->shadow);
    for (uint32_t i = 0; i < s->held_count; i++)
        sl_store_msg_fini(&s->held[i]);
    sl_free(s->held);
    sl_free(s);
    *sp = NULL;
}

uint64_t sl_store_rid(const sl_store_t *s) { return s->rid; }

void sl_store_out_init(sl_store_out_t *o) { memset(o, 0, sizeof *o); }

void sl_store_out_fini(sl_store_out_t *o) {
    for (size_t i = 0; i < o->count; i++)
        sl_store_msg_fini(&o->msgs[i]);
    sl_free(o->msgs);
    sl_free(o->changed);
    memset(o, 0, sizeof *o);
}

void store_out_changed(sl_store_out_t *o, const uint8_t *key, uint32_t key_len) {
    if (o->changed_count &&
        o->changed[o->changed_count - 1].key_len == key_len &&
        memcmp(o->changed[o->changed_count - 1].key, key, key_len) == 0)
        return; /* (the same key's next atom) */
    if (o->changed_count == o->changed_cap) {
        size_t cap = o->changed_cap ? o->changed_cap * 2 : 16;
        sl_store_key_t *n = sl_realloc(o->changed, cap * sizeof *n);
        if (!n) {
            o->all_changed = true; /* (the state changed all the same: re-read) */
            return;
        }
        o->changed = n;
        o->changed_cap = cap;
    }
    o->changed[o->changed_count++] = (sl_store_key_t){.key = key, .key_len = key_len};
}

sl_err store_out_push(sl_store_out_t *o, sl_store_msg_t *m) {
    if (o->count == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 4;
        sl_store_msg_t *n = sl_realloc(o->msgs, cap * sizeof *n);
        if (!n) {
            sl_store_msg_fini(m);
            return SL_ENOMEM;
        }
        o->msgs = n;
        o->cap = cap;
    }
    o->msgs[o->count++] = *m;
    return SL_OK;
}

/* ---- local operations ---- */

bool sl_store_key_valid(const void *key, size_t len) {
    const uint8_t *p = key;
    if (!key || len == 0 || len > SL_STORE_MAX_KEY_LEN)
        return false;
    /* keys are text: the wire carries them as msgpack str */
    if (!sl_mpack_utf8_valid(p, len))
        return false;
    /* and printed: no control characters (C0, DEL, and C1 as UTF-8's
     * C2 80..C2 9F, which some terminals obey as escapes) */
    for (size_t i = 0; i < len; i++)
        if (p[i] < 0x20 || p[i] == 0x7f || (p[i] == 0xc2 && i + 1 < len && p[i + 1] < 0xa0))
            return false;
    return true;
}

static sl_err check_key(const void *key, size_t len) {
    return sl_store_key_valid(key, len) ? SL_OK : SL_EINVAL;
}

/* Issues the next dot for `it`, applies it and encodes its DELTA. */
static sl_err local_op(sl_store_t *s, const void *key, size_t key_len, sl_crdt_item_t *it,
                       sl_store_msg_t *delta) {
    replica_t *self = &s->reps[s->self_rix];
    if (self->seq >= SEQ_MAX)
        return SL_ERANGE;
    it->dot = (sl_dot_t){s->rid, self->seq + 1};
    sl_err err = sl_crdt_item_check(it);
    if (err)
        return err == SL_EPROTO ? SL_EINVAL : err;
    sl_store_item_t item = {.key = key, .key_len = (uint32_t)key_len, .it = *it};
    sl_store_range_t range = {s->rid, self->seq, self->seq + 1};
    /* the first write after a heal covers the dots the counter skipped,
     * so the WAL replays it without a gap (and peers take it whole) */
    if (s->heal_pending && self->seq + 1 - s->heal_from <= SL_STORE_MAX_DOT_LEAD)
        range.from = s->heal_from;
    sl_store_dmsg_t m = {.type = SL_STORE_MSG_DELTA, .sender = s->rid, .ranges = &range,
                         .range_count = 1, .items = &item, .item_count = 1};
    if ((err = sl_store_msg_encode(&m, SL_MSG_MAX_LEN, delta)))
        return err;
    bool changed;
    s->fp_cached = 0; /* (every local write passes here) */
    if ((err = store_apply_item(s, key, key_len, it, s->self_rix, &changed))) {
        sl_store_msg_fini(delta);
        return err;
    }
    s->reps[s->self_rix].seq++;
    s->heal_pending = false;
    s->st.applied++;
    store_maybe_compact(s);
    return SL_OK;
}

/* The key's record, checking it holds `type` (or nothing live). */
static sl_err lookup_typed(sl_store_t *s, const void *key, size_t len, uint8_t type, rec_t **out) {
    uint32_t idx = find(s, key, len, key_hash(key, len), NULL);
    *out = idx == NO_REC ? NULL : &s->recs[idx];
    if (!*out)
        return SL_OK;
    rec_t *r = *out;
    bool live = r->type == SL_CRDT_LWW ? !(r->flags & REC_DELETED) : sl_crdt_val_live(r->u.val);
    if (live && r->type != type) {
        sl_log(SL_LOG_INFO, "STORE-TYPE", "key holds a value of another type (%d, not %d)",
               r->type, type);
        return SL_EINVAL;
    }
    return SL_OK;
}

sl_err sl_store_put(sl_store_t *s, const void *key, size_t key_len, const void *val,
                    size_t val_len, uint64_t now_ms, sl_store_msg_t *delta) {
    sl_err err = check_key(key, key_len);
    if (err)
        return err;
    if (val_len > SL_STORE_MAX_VALUE_LEN || (val_len && !val))
        return val_len > SL_STORE_MAX_VALUE_LEN ? SL_ETOOBIG : SL_EINVAL;
    rec_t *r;
    if ((err = lookup_typed(s, key, key_len, SL_CRDT_LWW, &r)))
        return err;
    sl_crdt_item_t it = {.kind = SL_ITEM_LWW, .type = SL_CRDT_LWW, .hlc = sl_hlc_now(&s->hlc, now_ms),
                         .a = val_len ? val : NULL, .a_len = (uint32_t)val_len};
    return local_op(s, key, key_len, &it, delta);
}

sl_err sl_store_del(sl_store_t *s, const void *key, size_t key_len, uint64_t now_ms,
                    sl_store_msg_t *delta) {
    sl_err err = check_key(key, key_len);
    if (err)
        return err;
    uint32_t idx = find(s, key, key_len, key_hash(key, key_len), NULL);
    if (idx == NO_REC)
        return SL_ENOTFOUND;
    rec_t *r = &s->recs[idx];
    if (r->type == SL_CRDT_LWW) {
        if (r->flags & REC_DELETED)
            return SL_ENOTFOUND;
        sl_crdt_item_t it = {.kind = SL_ITEM_LWW, .type = SL_CRDT_LWW, .flags = SL_ITEM_DELETED,
                             .hlc = sl_hlc_now(&s->hlc, now_ms)};
        return local_op(s, key, key_len, &it, delta);
    }
    sl_dot_t ctx[SL_CRDT_MAX_CTX];
    size_t n = sl_crdt_val_ctx(r->u.val, NULL, 0, true, ctx, SL_CRDT_MAX_CTX);
    if (n == 0)
        return SL_ENOTFOUND;
    if (n > SL_CRDT_MAX_CTX)
        return SL_ETOOBIG;
    sl_crdt_item_t it = {.kind = SL_ITEM_DEAD, .type = r->type, .flags = SL_ITEM_ALL, .ctx = ctx,
                         .ctx_count = (uint32_t)n};
    return local_op(s, key, key_len, &it, delta);
}

sl_err sl_store_set_add(sl_store_t *s, const void *key, size_t key_len, const void *elem,
                        size_t elem_len, uint64_t now_ms, sl_store_msg_t *delta) {
    (void)now_ms;
    sl_err err = check_key(key, key_len);
    rec_t *r;
    if (err || (err = lookup_typed(s, key, key_len, SL_CRDT_SET, &r)))
        return err;
    if (elem_len > SL_CRDT_MAX_BYTES)
        return SL_ETOOBIG;
    sl_crdt_item_t it = {.kind = SL_ITEM_ADD, .type = SL_CRDT_SET, .a = elem,
                         .a_len = (uint32_t)elem_len};
    return local_op(s, key, key_len, &it, delta);
}

sl_err sl_store_set_remove(sl_store_t *s, const void *key, size_t key_len, const void *elem,
                           size_t elem_len, uint64_t now_ms, sl_store_msg_t *delta) {
    (void)now_ms;
    sl_err err = check_key(key, key_len);
    rec_t *r;
    if (err || (err = lookup_typed(s, key, key_len, SL_CRDT_SET, &r)))
        return err;
    if (!r || r->type != SL_CRDT_SET)
        return SL_ENOTFOUND;
    sl_dot_t ctx[SL_CRDT_MAX_CTX];
    size_t n = sl_crdt_val_ctx(r->u.val, elem, (uint32_t)elem_len, false, ctx, SL_CRDT_MAX_CTX);
    if (n == 0)
        return SL_ENOTFOUND;
    if (n > SL_CRDT_MAX_CTX)
        return SL_ETOOBIG;
    sl_crdt_item_t it = {.kind = SL_ITEM_DEAD, .type = SL_CRDT_SET, .a = elem,
                         .a_len = (uint32_t)elem_len, .ctx = ctx, .ctx_count = (uint32_t)n};
    return local_op(s, key, key_len, &it, delta);
}

sl_err sl_store_counter_add(sl_store_t *s, const void *key, size_t key_len, int64_t by,
                            uint64_t now_ms, sl_store_msg_t *delta) {
    (void)now_ms;
    sl_err err = check_key(key, key_len);
    rec_t *r;
    if (err || (err = lookup_typed(s, key, key_len, SL_CRDT_COUNTER, &r)))
        return err;
    sl_crdt_item_t it = {.kind = SL_ITEM_CTR, .type = SL_CRDT_COUNTER};
    if (r && r->type == SL_CRDT_COUNTER)
        sl_crdt_counter_own(r->u.val, s->rid, &it.p, &it.n);
    uint64_t mag = by < 0 ? (uint64_t)0 - (uint64_t)by : (uint64_t)by;
    uint64_t *t = by < 0 ? &it.n : &it.p;
    if (*t > UINT64_MAX - mag)
        return SL_ERANGE;
    *t += mag;
    return local_op(s, key, key_len, &it, delta);
}

sl_err sl_store_gmap_put(sl_store_t *s, const void *key, size_t key_len, const void *field,
                         size_t field_len, const void *val, size_t val_len, uint64_t now_ms,
                         sl_store_msg_t *delta) {
    sl_err err = check_key(key, key_len);
    rec_t *r;
    if (err || (err = lookup_typed(s, key, key_len, SL_CRDT_GMAP, &r)))
        return err;
    if (field_len > SL_CRDT_MAX_BYTES || val_len > SL_CRDT_MAX_BYTES)
        return SL_ETOOBIG;
    sl_crdt_item_t it = {.kind = SL_ITEM_FIELD, .type = SL_CRDT_GMAP,
                         .hlc = sl_hlc_now(&s->hlc, now_ms), .a = field,
                         .a_len = (uint32_t)field_len, .b = val, .b_len = (uint32_t)val_len};
    return local_op(s, key, key_len, &it, delta);
}

/* ---- reads ---- */

static bool rec_live(const rec_t *r) {
    if (r->type == SL_CRDT_NONE)
        return false;
    if (r->type == SL_CRDT_LWW)
        return !(r->flags & REC_DELETED);
    return sl_crdt_val_live(r->u.val);
}

static void rec_entry(const sl_store_t *s, const rec_t *r, sl_store_entry_t *e) {
    memset(e, 0, sizeof *e);
    e->type = r->type;
    if (r->type == SL_CRDT_LWW) {
        e->val = arena_ptr(s, r->kv) + r->key_len;
        e->val_len = r->val_len;
        e->hlc = r->hlc;
        e->dot = rec_dot(s, r);
    } else {
        e->crdt = r->u.val;
    }
}

sl_err sl_store_lookup(const sl_store_t *s, const void *key, size_t key_len, sl_store_entry_t *out) {
    if (!key || key_len == 0 || key_len > SL_STORE_MAX_KEY_LEN)
        return SL_EINVAL;
    uint32_t idx = find(s, key, key_len, key_hash(key, key_len), NULL);
    if (idx == NO_REC || !rec_live(&s->recs[idx]))
        return SL_ENOTFOUND;
    rec_entry(s, &s->recs[idx], out);
    return SL_OK;
}

sl_err sl_store_get(const sl_store_t *s, const void *key, size_t key_len, const uint8_t **val,
                    size_t *val_len) {
    sl_store_entry_t e;
    sl_err err = sl_store_lookup(s, key, key_len, &e);
    if (err)
        return err;
    if (e.type != SL_CRDT_LWW)
        return SL_EINVAL;
    *val = e.val;
    *val_len = e.val_len;
    return SL_OK;
}

void sl_store_scan(const sl_store_t *s, const void *prefix, size_t prefix_len,
                   bool (*fn)(void *ctx, const uint8_t *key, size_t key_len,
                              const sl_store_entry_t *e),
                   void *ctx) {
    for (uint32_t i = 0; i < s->rec_count; i++) {
        const rec_t *r = &s->recs[i];
        if (!rec_live(r) || r->key_len < prefix_len ||
            (prefix_len && memcmp(rec_key(s, r), prefix, prefix_len) != 0))
            continue;
        sl_store_entry_t e;
        rec_entry(s, r, &e);
        if (!fn(ctx, rec_key(s, r), r->key_len, &e))
            return;
    }
}

/* ---- introspection ---- */

void sl_store_stats(const sl_store_t *s, sl_store_stats_t *out) {
    *out = s->st;
    out->keys = 0;
    for (uint32_t i = 0; i < s->rec_count; i++)
        if (rec_live(&s->recs[i]))
            out->keys++;
    out->records = s->indexed;
    out->replicas = out->retired = 0;
    for (uint32_t i = 0; i < s->rep_count; i++) {
        if (s->reps[i].retired)
            out->retired++;
        else
            out->replicas++;
    }
    out->arena_bytes = s->arena_used;
    out->arena_garbage = s->arena_garbage;
    out->mem_bytes = (uint64_t)s->rec_cap * sizeof(rec_t) +
                     (uint64_t)(s->slot_mask + 1) * 8 + (uint64_t)s->block_count * BLOCK_LEN +
                     (uint64_t)s->rep_cap * sizeof(replica_t) + (uint64_t)(s->rmap_mask + 1) * 4;
    out->clock_rejected = s->st.clock_rejected;
}

uint64_t sl_store_state_hash(const sl_store_t *s) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < s->rec_count; i++) {
        const rec_t *r = &s->recs[i];
        if (!rec_live(r))
            continue;
        uint64_t h = key_hash(rec_key(s, r), r->key_len);
        if (r->type == SL_CRDT_LWW) {
            sl_dot_t d = rec_dot(s, r);
            uint64_t x[3] = {r->hlc, d.rid, d.seq};
            h ^= sl_hash64(x, sizeof x, 1);
            h = sl_mix64(h ^ sl_hash64(arena_ptr(s, r->kv) + r->key_len, r->val_len, 2));
        } else {
            h = sl_mix64(h ^ sl_crdt_val_hash(r->u.val, 3));
        }
        sum += sl_mix64(h);
    }
    return sum;
}

sl_err sl_store_check(const sl_store_t *s) {
    uint32_t used = 0;
    for (uint32_t i = 0; i < s->rec_count; i++) {
        const rec_t *r = &s->recs[i];
        if (r->type == SL_CRDT_NONE)
            continue;
        used++;
        const uint8_t *k = rec_key(s, r);
        if (find(s, k, r->key_len, key_hash(k, r->key_len), NULL) != i) {
            sl_log(SL_LOG_ERR, "STORE-CHECK", "record %u is not reachable through the index", i);
            return SL_EINTERNAL;
        }
        uint32_t atoms = r->type == SL_CRDT_LWW ? 1 : r->u.val->count;
        for (uint32_t a = 0; a < atoms; a++) {
            sl_dot_t d = r->type == SL_CRDT_LWW ? rec_dot(s, r) : r->u.val->atoms[a].dot;
            uint32_t rix = store_rix_find(s, d.rid);
            bool covered = rix != NO_REC && (s->reps[rix].retired || d.seq <= s->reps[rix].seq);
            if (!covered) {
                sl_log(SL_LOG_ERR, "STORE-CHECK", "atom %016" PRIx64 ":%" PRIu64
                       " is not covered by the version vector", d.rid, d.seq);
                return SL_EINTERNAL;
            }
        }
    }
    if (used != s->indexed) {
        sl_log(SL_LOG_ERR, "STORE-CHECK", "%u records in use, %u indexed", used, s->indexed);
        return SL_EINTERNAL;
    }
    return SL_OK;
}
