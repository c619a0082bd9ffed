/* The replicated store: see include/starling/store.h for the model.
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

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "starling/hash.h"
#include "starling/hlc.h"
#include "starling/mpack.h"
#include "starling/msg.h"
#include "starling/rng.h"

#define BLOCK_SHIFT 20
#define BLOCK_LEN (1u << BLOCK_SHIFT)
#define REC_DELETED 0x01 /* LWW tombstone */
#define NO_REC UINT32_MAX
#define SEQ_BITS 48
#define SEQ_MAX ((UINT64_C(1) << SEQ_BITS) - 1)
#define KEY_SEED 0x53544f5245ull /* "STORE" */

typedef struct {
    uint64_t hlc;          /* LWW: timestamp of the winning write */
    union {
        uint64_t dot;      /* LWW: rix << 48 | seq of the winning write */
        sl_crdt_val_t *val;/* other types: the value */
    } u;                   /* per type */
    uint64_t kv;           /* arena offset of the key, then the LWW value */
    uint32_t val_len;      /* LWW value bytes */
    uint16_t key_len;      /* key bytes */
    uint8_t type;          /* sl_crdt_type; SL_CRDT_NONE: free record */
    uint8_t flags;         /* REC_DELETED */
} rec_t;

typedef struct {
    uint64_t rid;           /* replica id */
    uint64_t seq;           /* version vector entry: dots 1..seq seen */
    uint8_t retired;        /* left the vv: treated as all seen */
    uint8_t retire_pending; /* retire once every live peer has seq */
    uint64_t durable;       /* seq as of the last sl_store_mark_durable */
} replica_t;

typedef struct {
    uint64_t rid;               /* the peer's replica id */
    sl_store_range_t *vv;       /* its last digest's vv (rid ascending) */
    uint32_t vv_count;          /* entries */
    sl_store_range_t *retired;  /* its last digest's retired list */
    uint32_t retired_count;     /* entries */
} peer_t;

struct sl_store {
    uint64_t rid;               /* this replica (incarnation) */
    uint32_t self_rix;          /* its index in reps */
    sl_store_config_t cfg;      /* limits */
    sl_hlc_t hlc;               /* clock for local writes */
    rec_t *recs;                /* records */
    uint32_t rec_count;         /* records ever used (high-water mark) */
    uint32_t rec_cap;           /* allocated */
    uint64_t free_head;         /* first free record + 1 (free records chain through kv) */
    uint64_t *slots;            /* index: hash32 << 32 | record number + 1; 0 empty */
    uint32_t slot_mask;         /* slots - 1 (a power of two minus one) */
    uint32_t indexed;           /* records in the index */
    uint8_t **blocks;           /* arena blocks */
    uint32_t block_count;       /* blocks in use */
    uint32_t block_cap;         /* allocated block pointers */
    uint32_t block_pos;         /* bytes used in the last block */
    uint64_t arena_used;        /* live arena bytes */
    uint64_t arena_garbage;     /* dead arena bytes */
    replica_t *reps;            /* known replicas */
    uint32_t rep_count;         /* entries */
    uint32_t rep_cap;           /* allocated */
    uint32_t *rmap;             /* rid -> rix + 1, open addressing */
    uint32_t rmap_mask;         /* rmap size - 1 */
    peer_t *peers;              /* peers heard from */
    uint32_t peer_count;        /* entries */
    uint64_t *live;             /* live replica ids (from membership) */
    uint32_t live_count;        /* entries */
    bool gc_active;             /* a barrier is waiting for its target */
    uint64_t *gc_cut_next;      /* by rix: the barrier's cut */
    uint64_t *gc_target;        /* by rix: the barrier's target */
    uint32_t gc_len;            /* entries in the two above */
    uint64_t *gc_cut;           /* by rix: the last completed cut */
    uint32_t gc_cut_len;        /* entries */
    uint64_t snap_from;         /* snapshot being received: sender */
    uint64_t snap_id;           /* its id */
    uint32_t snap_next;         /* next chunk expected */
    struct sl_store *shadow;    /* RESET snapshot being received, built aside */
    uint64_t snap_counter;      /* snapshots built */
    sl_store_stats_t st;        /* counters */
    sl_store_bug bug;           /* planted bug (tests only) */
    bool want_reset;            /* ask peers for a RESET snapshot */
    bool track_durable;         /* digests report `durable`, not `seq` */
    char addr[SL_STORE_MAX_ADDR + 1]; /* where peers answer our digests */
};

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
    s->track_durable = true;
    for (uint32_t i = 0; i < s->rep_count; i++)
        s->reps[i].durable = s->reps[i].seq;
}

void sl_store_request_reset(sl_store_t *s) { s->want_reset = true; }

void sl_store_set_bug(sl_store_t *s, sl_store_bug bug) { s->bug = bug; }

/* ---- small helpers ---- */

static uint8_t *arena_ptr(const sl_store_t *s, uint64_t kv) {
    return s->blocks[kv >> BLOCK_SHIFT] + (kv & (BLOCK_LEN - 1));
}

static const uint8_t *rec_key(const sl_store_t *s, const rec_t *r) { return arena_ptr(s, r->kv); }

/* Hash of a key: 64-bit multiply-mix over 8-byte words (fast; keys come
 * from authenticated peers, and the seed is fixed per build). */
static uint64_t key_hash(const void *key, size_t len) {
    const uint8_t *p = key;
    uint64_t h = KEY_SEED ^ (len * 0x9e3779b97f4a7c15ull);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ (w * 0xbf58476d1ce4e5b9ull)) * 0x94d049bb133111ebull;
        h ^= h >> 29;
        p += 8;
        len -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, len);
    h = (h ^ (w * 0xbf58476d1ce4e5b9ull)) * 0x94d049bb133111ebull;
    return sl_mix64(h);
}

static uint32_t slot_hash(uint64_t h) { return (uint32_t)(h >> 32); }

static sl_err grow(void **p, uint32_t *cap, uint32_t need, size_t elem) {
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
        sl_err err = grow((void **)&s->blocks, &s->block_cap, s->block_count + 1, sizeof *s->blocks);
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

static void maybe_compact(sl_store_t *s) {
    if (s->arena_garbage > (8u << 20) && s->arena_garbage > s->arena_used / 2) {
        /* compaction needs room for the live bytes; on failure keep going */
        uint64_t before = s->arena_garbage;
        if (arena_compact(s) != SL_OK)
            sl_log(SL_LOG_WARNING, "STORE-COMPACT", "arena compaction failed, %" PRIu64
                   " bytes stay unused", before);
    }
}

/* ---- replicas ---- */

static uint32_t rix_find(const sl_store_t *s, uint64_t rid) {
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

static sl_err rix_get(sl_store_t *s, uint64_t rid, uint32_t *out) {
    uint32_t rix = rix_find(s, rid);
    if (rix != NO_REC) {
        *out = rix;
        return SL_OK;
    }
    if (s->rep_count >= SL_STORE_MAX_REPLICAS)
        return SL_ETOOBIG;
    sl_err err = grow((void **)&s->reps, &s->rep_cap, s->rep_count + 1, sizeof *s->reps);
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
    uint32_t rix = rix_find(s, rid);
    return rix == NO_REC || s->reps[rix].retired ? 0 : s->reps[rix].seq;
}

static sl_dot_t rec_dot(const sl_store_t *s, const rec_t *r) {
    return (sl_dot_t){s->reps[r->u.dot >> SEQ_BITS].rid, r->u.dot & SEQ_MAX};
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
static void rec_delete(sl_store_t *s, uint32_t idx) {
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
        if ((err = grow((void **)&s->recs, &s->rec_cap, s->rec_count + 1, sizeof *s->recs)))
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
static sl_err apply_item_h(sl_store_t *s, const uint8_t *key, size_t key_len, uint64_t h,
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
            rec_delete(s, idx);
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

static sl_err apply_item(sl_store_t *s, const uint8_t *key, size_t key_len, const sl_crdt_item_t *it,
                         uint32_t rix, bool *changed) {
    return apply_item_h(s, key, key_len, key_hash(key, key_len), it, rix, changed);
}

/* Prefetching for a batch of atoms (random keys miss the cache three
 * times: slot, record, key bytes): stage 1 hashes item i + 8 and fetches
 * its slot, stage 2 fetches the record of item i + 4, stage 3 its key. */
#define PF_SLOT 8
#define PF_REC 4
#define PF_KEY 2
static void prefetch_item(const sl_store_t *s, const sl_store_dmsg_t *m, uint64_t *hs, uint32_t i) {
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
        err = rix_get(s, rid, &s->self_rix);
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
    sl_store_destroy(&s->shadow);
    sl_free(s);
    *sp = NULL;
}

uint64_t sl_store_rid(const sl_store_t *s) { return s->rid; }

void sl_store_out_init(sl_store_out_t *o) { memset(o, 0, sizeof *o); }

void sl_store_out_fini(sl_store_out_t *o) {
    for (size_t i = 0; i < o->count; i++)
        sl_store_msg_fini(&o->msgs[i]);
    sl_free(o->msgs);
    memset(o, 0, sizeof *o);
}

static sl_err out_push(sl_store_out_t *o, sl_store_msg_t *m) {
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

static sl_err check_key(const void *key, size_t len) {
    if (!key || len == 0 || len > SL_STORE_MAX_KEY_LEN)
        return SL_EINVAL;
    /* keys are text: the wire carries them as msgpack str */
    if (!sl_mpack_utf8_valid(key, len))
        return SL_EINVAL;
    return SL_OK;
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
    sl_store_dmsg_t m = {.type = SL_STORE_MSG_DELTA, .sender = s->rid, .ranges = &range,
                         .range_count = 1, .items = &item, .item_count = 1};
    if ((err = sl_store_msg_encode(&m, SL_MSG_MAX_LEN, delta)))
        return err;
    bool changed;
    if ((err = apply_item(s, key, key_len, it, s->self_rix, &changed))) {
        sl_store_msg_fini(delta);
        return err;
    }
    s->reps[s->self_rix].seq++;
    s->st.applied++;
    maybe_compact(s);
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
        err = out_push(out, &msg);
    }
    b->range_count = b->item_count = 0;
    b->len = 32;
    return err;
}

/* Appends DELTA messages holding every atom `peer_vv` lacks (bounded by
 * max_sync_len); never the peer's own atoms. */
static sl_err build_deltas(sl_store_t *s, uint64_t peer_rid, const sl_store_range_t *pvv,
                           uint32_t pn, sl_store_out_t *out) {
    /* replicas in rid order, with what the peer has */
    uint32_t *order = sl_calloc(s->rep_count, sizeof *order);
    uint64_t *from = sl_calloc(s->rep_count, sizeof *from);
    uint32_t *rank = sl_calloc(s->rep_count, sizeof *rank);
    cand_t *cands = NULL;
    builder_t b = {0};
    sl_err err = SL_OK;
    size_t ncand = 0, cap = 0, total = 0;
    if (!order || !from || !rank) {
        err = SL_ENOMEM;
        goto fail;
    }
    bool any = false;
    for (uint32_t i = 0; i < s->rep_count; i++) {
        const replica_t *r = &s->reps[i];
        from[i] = pairs_get(pvv, pn, r->rid, NULL);
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
                rix = rix_find(s, d.rid);
                seq = d.seq;
            }
            const replica_t *rep = &s->reps[rix];
            if (rep->retired || rep->rid == peer_rid || seq <= from[rix] || seq > rep->seq)
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
        }
    }
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
        b.ranges[b.range_count] = (sl_store_range_t){rep->rid, lo, rep->seq};
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
                b.ranges[0] = (sl_store_range_t){rep->rid, lo, rep->seq};
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
fail:
    sl_free(order);
    sl_free(from);
    sl_free(rank);
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
            if ((err = grow((void **)&starts, &cap_chunks, nchunks + 1, sizeof *starts)))
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
                if ((err = grow((void **)&m.items, &icap, count + 1, sizeof *m.items)))
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
        if (err || (err = out_push(out, &msg)))
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

static sl_err apply_delta(sl_store_t *s, const sl_store_dmsg_t *m, bool trusted, bool *changed) {
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
        if ((err = rix_get(s, r->rid, &rixs[g])))
            break;
        replica_t *rep = &s->reps[rixs[g]];
        if (rep->retired && r->to > rep->seq) {
            /* retired on stale knowledge: more of its dots exist, take
             * it back and retire it again later */
            rep->retired = 0;
            rep->retire_pending = 1;
        }
        if (rep->retired || rep->seq >= r->to)
            continue; /* all seen */
        if (rep->seq < r->from) {
            s->st.gaps++;
            continue;
        }
        ok[g] = 1;
    }
    uint64_t hs[16];
    for (uint32_t i = 0; i < PF_SLOT && i < m->item_count; i++)
        hs[i % 16] = key_hash(m->items[i].key, m->items[i].key_len);
    for (uint32_t i = 0; !err && i < m->item_count; i++) {
        const sl_store_item_t *item = &m->items[i];
        uint64_t h = hs[i % 16];
        prefetch_item(s, m, hs, i);
        uint32_t g;
        if (!range_of(m, item->it.dot.rid, &g) || !ok[g])
            continue;
        if (item->it.dot.seq <= s->reps[rixs[g]].seq) {
            s->st.dup++;
            continue;
        }
        bool ch;
        if ((err = apply_item_h(s, item->key, item->key_len, h, &item->it, rixs[g], &ch)))
            break;
        if (ch)
            s->st.applied++;
    }
    for (uint32_t g = 0; !err && g < m->range_count; g++)
        if (ok[g]) {
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
    sl_err err = rix_get(sh, item->it.dot.rid, &rix);
    return err ? err : apply_item(sh, item->key, item->key_len, &item->it, rix, &ch);
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
        if ((err = rix_get(sh, r->rid, &rix)))
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
            if (p[i].rid == s->rid || (err = rix_get(sh, p[i].rid, &rix)))
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
    /* replica numbers changed: garbage collection starts afresh */
    sl_free(s->gc_cut);
    sl_free(s->gc_cut_next);
    sl_free(s->gc_target);
    s->gc_cut = s->gc_cut_next = s->gc_target = NULL;
    s->gc_cut_len = s->gc_len = 0;
    s->gc_active = false;
    s->want_reset = false;
    return SL_OK;
}

static sl_err apply_snapshot(sl_store_t *s, const sl_store_dmsg_t *m, bool *changed) {
    *changed = false;
    sl_err err = SL_OK;
    bool reset = m->flags & SL_STORE_SNAP_RESET;
    if (m->chunk == 0) {
        s->snap_from = m->sender;
        s->snap_id = m->snap_id;
        s->snap_next = 0;
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
        if ((err = rix_get(s, item->it.dot.rid, &rix)))
            return err;
        if (s->reps[rix].retired || item->it.dot.seq <= s->reps[rix].seq) {
            s->st.dup++;
            continue;
        }
        bool ch;
        if ((err = apply_item(s, item->key, item->key_len, &item->it, rix, &ch)))
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
            if ((err = rix_get(s, p[i].rid, &rix)))
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

static sl_err handle_digest(sl_store_t *s, const sl_store_dmsg_t *m, sl_store_out_t *replies) {
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
    sl_free(p->vv);
    sl_free(p->retired);
    p->vv = vv;
    p->vv_count = m->range_count;
    p->retired = ret;
    p->retired_count = m->retired_count;
    sl_err err;
    /* a replica that itself waits for a reset may hold stale atoms: it
     * answers with deltas only */
    if (!s->want_reset && (m->want_reset || needs_reset(s, p)))
        err = build_snapshot(s, SL_STORE_SNAP_RESET, s->cfg.max_msg_len, replies);
    else
        err = build_deltas(s, m->sender, m->ranges, m->range_count, replies);
    if (err || m->reply)
        return err;
    /* pull: does the peer have something we lack? */
    bool lack = false;
    for (uint32_t i = 0; i < m->range_count; i++) {
        uint32_t rix = rix_find(s, m->ranges[i].rid);
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
    if (lack) {
        sl_store_msg_t d;
        if ((err = sl_store_digest(s, true, &d)))
            return err;
        err = out_push(replies, &d);
    }
    return err;
}

sl_err sl_store_receive(sl_store_t *s, uint8_t type, const uint8_t *body, size_t len,
                        uint64_t now_ms, sl_store_out_t *replies, bool *persist) {
    *persist = false;
    sl_store_dmsg_t m;
    sl_err err = len > SL_MSG_MAX_LEN ? SL_ETOOBIG : sl_store_msg_decode(type, body, len, &m);
    if (err) {
        s->st.rejected++;
        sl_log(SL_LOG_NOTICE, "STORE-BAD-MSG", "store message type %u refused: %s", type,
               sl_strerror(err));
        return err;
    }
    if (type != SL_STORE_MSG_DIGEST) {
        uint64_t h = item_max_hlc(&m);
        if (h && (err = sl_hlc_update(&s->hlc, now_ms, h, m.sender, NULL))) {
            s->st.rejected++;
            s->st.clock_rejected++;
            sl_store_dmsg_fini(&m);
            return err;
        }
    }
    bool changed = false;
    replies->from = m.sender;
    if (type == SL_STORE_MSG_DIGEST) {
        memcpy(replies->reply_to, m.reply_to ? (const char *)m.reply_to : "", m.reply_to_len);
        replies->reply_to[m.reply_to_len] = 0;
        err = handle_digest(s, &m, replies);
    }
    else if (type == SL_STORE_MSG_DELTA)
        err = apply_delta(s, &m, false, &changed);
    else
        err = apply_snapshot(s, &m, &changed);
    sl_store_dmsg_fini(&m);
    if (err) {
        s->st.rejected++;
        sl_log(SL_LOG_NOTICE, "STORE-BAD-MSG", "store message type %u refused: %s", type,
               sl_strerror(err));
        return err;
    }
    *persist = changed;
    maybe_compact(s);
    return SL_OK;
}

sl_err sl_store_replay(sl_store_t *s, uint8_t type, const uint8_t *body, size_t len) {
    sl_store_dmsg_t m;
    if (type == SL_STORE_MSG_DIGEST)
        return SL_ETYPE;
    sl_err err = sl_store_msg_decode(type, body, len, &m);
    if (err)
        return err;
    uint64_t h = item_max_hlc(&m);
    if (h > s->hlc.last)
        s->hlc.last = h;
    bool changed;
    err = type == SL_STORE_MSG_DELTA ? apply_delta(s, &m, true, &changed) : apply_snapshot(s, &m, &changed);
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
    return SL_OK;
}

sl_err sl_store_retire(sl_store_t *s, uint64_t rid) {
    if (rid == s->rid)
        return SL_EINVAL;
    uint32_t rix;
    sl_err err = rix_get(s, rid, &rix);
    if (!err && !s->reps[rix].retired)
        s->reps[rix].retire_pending = 1;
    return err;
}

static bool gc_stable(void *ctx, sl_dot_t d) {
    const sl_store_t *s = ctx;
    uint32_t rix = rix_find(s, d.rid);
    if (rix == NO_REC)
        return false;
    if (s->reps[rix].retired)
        return true;
    return rix < s->gc_len && d.seq <= s->gc_cut_next[rix];
}

size_t sl_store_gc(sl_store_t *s) {
    peer_t **peers = NULL;
    size_t dropped = 0;
    if (s->bug == SL_STORE_BUG_NO_GC)
        return 0;
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
    for (uint32_t i = 0; i < s->rec_count; i++) {
        rec_t *r = &s->recs[i];
        if (r->type == SL_CRDT_NONE)
            continue;
        if (r->type == SL_CRDT_LWW) {
            if ((r->flags & REC_DELETED) && gc_stable(s, rec_dot(s, r))) {
                rec_delete(s, i);
                dropped++;
            }
            continue;
        }
        dropped += sl_crdt_val_gc(r->u.val, gc_stable, s);
        if (r->u.val->count == 0)
            rec_delete(s, i);
    }
    sl_free(s->gc_cut);
    s->gc_cut = s->gc_cut_next;
    s->gc_cut_len = s->gc_len;
    s->gc_cut_next = NULL;
    sl_free(s->gc_target);
    s->gc_target = NULL;
    s->gc_len = 0;
    s->gc_active = false;
    s->st.gc_dropped += dropped;
    maybe_compact(s);
    goto start; /* and begin the next barrier now */
done:
    sl_free(peers);
    return dropped;
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
            uint32_t rix = rix_find(s, d.rid);
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
