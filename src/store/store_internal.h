/* Internals of the store shared by src/store/store.c (the map: records, index,
 * arena, replicas, local operations, reads) and src/store/store_sync.c
 * (anti-entropy: digests, deltas, snapshots and resets, garbage
 * collection, retiring). Not a public API. */
#ifndef STARLING_STORE_INTERNAL_H
#define STARLING_STORE_INTERNAL_H

#include <string.h>

#include "starling/hlc.h"
#include "starling/rng.h"
#include "starling/store.h"
#include "store/store_test.h"

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
    uint64_t own_seen;          /* our own seq its digests last reported, when
                                   not past our counter (0: never) */
    uint64_t resend_from;       /* a heal: our own atoms past this seq go to it
                                   again (rule 9) ... */
    bool resend;                /* ... until one answer carried them all */
    uint64_t lists_fp;          /* our fingerprint when vv and retired were set to our
                                   own lists (an agreeing SUMMARY); 0: from its DIGEST */
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
    uint64_t *gc_done;          /* by rix: every replica held these dots before the
                                   last collection (its target; after a reset, our
                                   vv then): a removal of them may be gone */
    uint32_t gc_done_len;       /* entries */
    uint64_t gc_gen;            /* bumped when a peer's lists, the live list or a
                                   retirement change: with reps_sig, all that
                                   the collector reads besides the records */
    uint64_t gc_barrier_sig;    /* gc_sig when the running barrier began */
    uint64_t gc_idle_sig;       /* gc_sig of a collection that found nothing to do
                                   and saw nothing change since its barrier began */
    bool gc_idle;               /* gc_idle_sig holds: skip until gc_sig moves */
    uint64_t fp_sig;            /* reps_sig when fp_cached was computed */
    uint64_t fp_cached;         /* sl_store_fingerprint then (0: none; every entry
                                   point that may change it sets 0) */
    uint32_t fp_calls;          /* sl_store_fingerprint calls (one in 16 checks fp_sig) */
    sl_store_msg_t *held;       /* DELTAs kept past a gap (sl_store_take_ready), oldest first */
    uint32_t held_count;        /* entries (at most SL_STORE_HELD_MAX) */
    size_t held_bytes;          /* their bodies' bytes (at most SL_STORE_HELD_BYTES) */
    uint64_t held_dropped;      /* kept deltas dropped to stay within the bounds */
    uint64_t snap_from;         /* snapshot being received: sender */
    uint64_t snap_id;           /* its id */
    uint32_t snap_next;         /* next chunk expected */
    uint64_t snap_fp;           /* its chunk 0's chunks, flags, vv and retired (hashed): every chunk repeats them */
    struct sl_store *shadow;    /* RESET snapshot being received, built aside */
    uint64_t snap_counter;      /* snapshots built */
    sl_store_stats_t st;        /* counters */
    sl_store_bug bug;           /* planted bug (tests only) */
    bool want_reset;            /* ask peers for a RESET snapshot */
    uint64_t caught_up_ms;      /* when this replica last held all a peer's DIGEST or SUMMARY said it held */
    bool track_durable;         /* digests report `durable`, not `seq` */
    char addr[SL_STORE_MAX_ADDR + 1]; /* where peers answer our digests */
    bool heal_pending;          /* a heal moved the self seq; no write since */
    uint64_t heal_from;         /* self seq before that (the next write's range starts here) */
    sl_log_limit_t refusal_log; /* refusals and heals: a line per SL_STORE_LOG_EVERY_MS */
};


static inline uint8_t *arena_ptr(const sl_store_t *s, uint64_t kv) {
    return s->blocks[kv >> BLOCK_SHIFT] + (kv & (BLOCK_LEN - 1));
}

static inline const uint8_t *rec_key(const sl_store_t *s, const rec_t *r) { return arena_ptr(s, r->kv); }

/* Hash of a key: 64-bit multiply-mix over 8-byte words (fast; keys come
 * from authenticated peers, and the seed is fixed per build). */
static inline uint64_t key_hash(const void *key, size_t len) {
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

static inline uint32_t slot_hash(uint64_t h) { return (uint32_t)(h >> 32); }

static inline sl_dot_t rec_dot(const sl_store_t *s, const rec_t *r) {
    return (sl_dot_t){s->reps[r->u.dot >> SEQ_BITS].rid, r->u.dot & SEQ_MAX};
}

/* Prefetch distances for batched deltas (store_prefetch_item). */
#define PF_SLOT 8
#define PF_REC 4
#define PF_KEY 2

/* Grows an array to hold `need` elements (doubling). */
sl_err store_grow(void **p, uint32_t *cap, uint32_t need, size_t elem);
/* Replica index of `rid` (NO_REC if unknown), or a new one. */
uint32_t store_rix_find(const sl_store_t *s, uint64_t rid);
sl_err store_rix_get(sl_store_t *s, uint64_t rid, uint32_t *out);
/* Removes a record from the index and frees it. */
void store_rec_delete(sl_store_t *s, uint32_t idx);
/* Joins one checked atom into the map (with its key's hash, or not). */
sl_err store_apply_item_h(sl_store_t *s, const uint8_t *key, size_t key_len, uint64_t h,
                          const sl_crdt_item_t *it, uint32_t rix, bool *changed);
sl_err store_apply_item(sl_store_t *s, const uint8_t *key, size_t key_len,
                        const sl_crdt_item_t *it, uint32_t rix, bool *changed);
/* Prefetches what atom i + k of a batch will touch (hs: hashes ring). */
void store_prefetch_item(const sl_store_t *s, const sl_store_dmsg_t *m, uint64_t *hs, uint32_t i);
/* Compacts the arena when garbage passes half of what is live. */
void store_maybe_compact(sl_store_t *s);
/* Appends a message to an output list (consumes it, even on failure). */
sl_err store_out_push(sl_store_out_t *o, sl_store_msg_t *m);
/* Notes that a received message changed `key` (a run of one key's atoms
 * once); a list that cannot grow sets all_changed. */
void store_out_changed(sl_store_out_t *o, const uint8_t *key, uint32_t key_len);

#endif
