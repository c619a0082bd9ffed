/* Typed CRDT values: the value of one store key, as a set of "atoms", each
 * tagged with the dot (replica, sequence) of the update that made it.
 *
 * Types (a key has one; see "Type clash" below):
 *   SL_CRDT_LWW      last-writer-wins register: one atom, the largest
 *                    (hlc, replica, seq) wins; deleting the key writes a
 *                    tombstone atom (flag SL_ITEM_DELETED).
 *   SL_CRDT_SET      add-wins set (observed-remove): an ADD atom per add;
 *                    removing an element kills the adds the remover saw.
 *   SL_CRDT_COUNTER  PN counter: one CTR atom per replica holding that
 *                    replica's running totals (p, n); value = sum p - sum n.
 *   SL_CRDT_GMAP     grow-only map field -> bytes (per-epoch metrics): one
 *                    FIELD atom per (field, writer); a field reads as its
 *                    largest (hlc, replica, seq) atom.
 *
 * Removal (Almeida, Shoker, Baquero, "Delta state replicated data types"):
 * a DEAD atom carries a causal context, a list of (replica, seq) pairs:
 * it kills every atom of the key (or, for a set, of one element) whose dot
 * (r, s) has s <= ctx[r]. Deliveries of one replica's dots reach every
 * replica in sequence order (the store guarantees it), so "seq <= ctx[r]"
 * is exactly "the remover had seen it". Updates the remover had not seen
 * survive (add wins). DEAD atoms and LWW tombstones are dropped once the
 * store finds them causally stable (sl_crdt_val_gc), so a removed key ends
 * up costing nothing.
 *
 * Join: a value is the set of atoms it has received, minus the dominated
 * ones (a smaller LWW atom, an older CTR or FIELD atom of the same replica,
 * an atom a DEAD kills, anything of a larger type). Dominance is permanent,
 * so applying atoms in any order, any number of times, gives the same
 * value: join is commutative, associative and idempotent, and applying a
 * delta equals joining it (tests/crdt_test.c checks these on random
 * values).
 *
 * Type clash: if two replicas create a key with different types at once,
 * the smaller type code wins everywhere and the other's atoms are dropped.
 *
 * Pure: no I/O; allocation through sl_malloc. */
#ifndef STARLING_CRDT_H
#define STARLING_CRDT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    SL_CRDT_NONE = 0,
    SL_CRDT_LWW = 1,
    SL_CRDT_SET = 2,
    SL_CRDT_COUNTER = 3,
    SL_CRDT_GMAP = 4,
    SL_CRDT_TYPE_MAX = 4
} sl_crdt_type;

typedef enum {
    SL_ITEM_LWW = 1,   /* register write: hlc, value a (or tombstone) */
    SL_ITEM_ADD = 2,   /* set add: element a */
    SL_ITEM_CTR = 3,   /* counter: the writer's totals p, n */
    SL_ITEM_FIELD = 4, /* map field: hlc, name a, value b */
    SL_ITEM_DEAD = 5,  /* removal: ctx; element a unless SL_ITEM_ALL */
    SL_ITEM_KIND_MAX = 5
} sl_crdt_kind;

#define SL_ITEM_DELETED 0x01 /* LWW: tombstone (the key is deleted) */
#define SL_ITEM_ALL 0x02     /* DEAD: the whole key, not one element */

#define SL_CRDT_MAX_CTX 1024     /* pairs in one DEAD context */
#define SL_CRDT_MAX_BYTES 65536  /* a value, element, field name or value */

typedef struct {
    uint64_t rid; /* replica id (a peer incarnation) */
    uint64_t seq; /* that replica's update number, from 1 */
} sl_dot_t;

/* One atom: the unit of a delta. As an input it borrows its bytes; inside
 * an sl_crdt_val_t it owns them. */
typedef struct {
    uint8_t kind;       /* sl_crdt_kind */
    uint8_t type;       /* sl_crdt_type of the key it belongs to */
    uint8_t flags;      /* SL_ITEM_DELETED, SL_ITEM_ALL */
    sl_dot_t dot;       /* the update that made it */
    uint64_t hlc;       /* LWW and FIELD: hybrid logical timestamp */
    uint64_t p;         /* CTR: the writer's total increments */
    uint64_t n;         /* CTR: the writer's total decrements */
    const uint8_t *a;   /* LWW value, set element, field name, DEAD element */
    uint32_t a_len;     /* bytes at a */
    const uint8_t *b;   /* FIELD value */
    uint32_t b_len;     /* bytes at b */
    const sl_dot_t *ctx;/* DEAD: kill (r, s) with s <= ctx[r]; rid ascending */
    uint32_t ctx_count; /* pairs in ctx */
} sl_crdt_item_t;

/* A key's value: its atoms sorted by dot. */
typedef struct {
    uint8_t type;          /* sl_crdt_type; SL_CRDT_NONE when empty */
    uint32_t count;        /* atoms */
    uint32_t cap;          /* allocated atoms */
    sl_crdt_item_t *atoms; /* sorted by (rid, seq); bytes owned */
} sl_crdt_val_t;

/* Checks an item is well formed (kind and type agree, lengths within
 * limits, ctx sorted and bounded, dot nonzero): SL_EPROTO otherwise. */
sl_err sl_crdt_item_check(const sl_crdt_item_t *it);

/* Order of LWW and FIELD atoms: (hlc, rid, seq); <0, 0, >0. */
int sl_crdt_lww_cmp(uint64_t hlc_a, sl_dot_t a, uint64_t hlc_b, sl_dot_t b);

void sl_crdt_val_init(sl_crdt_val_t *v);
void sl_crdt_val_fini(sl_crdt_val_t *v);
/* Deep copy of `src` into an initialised, empty `dst`. */
sl_err sl_crdt_val_copy(sl_crdt_val_t *dst, const sl_crdt_val_t *src);

/* Joins one atom into `v` (a delta). `*changed` (may be NULL) is set when
 * the value's atoms changed. The item must pass sl_crdt_item_check. */
sl_err sl_crdt_val_apply(sl_crdt_val_t *v, const sl_crdt_item_t *it, bool *changed);

/* Joins every atom of `src` into `dst`. */
sl_err sl_crdt_val_join(sl_crdt_val_t *dst, const sl_crdt_val_t *src);

/* Same atoms (metadata and bytes). */
bool sl_crdt_val_equal(const sl_crdt_val_t *a, const sl_crdt_val_t *b);

/* Hash of what a reader sees (live atoms only, not DEAD atoms or
 * tombstones, so it does not depend on when garbage was collected). */
uint64_t sl_crdt_val_hash(const sl_crdt_val_t *v, uint64_t seed);

/* True if the value holds something a reader sees. */
bool sl_crdt_val_live(const sl_crdt_val_t *v);

/* Drops DEAD atoms and LWW tombstones for which `stable(ctx, dot)` is
 * true. Returns the number dropped. */
size_t sl_crdt_val_gc(sl_crdt_val_t *v, bool (*stable)(void *ctx, sl_dot_t dot), void *ctx);

/* Drops every atom (live or not) for which `pred(ctx, atom)` is true:
 * for a snapshot that replaces what its sender knows. Returns the number
 * dropped. */
size_t sl_crdt_val_drop(sl_crdt_val_t *v, bool (*pred)(void *ctx, const sl_crdt_item_t *atom),
                        void *ctx);

/* The context a local removal needs: per replica the largest seq of the
 * live atoms (of element `elem` when elem_len > 0 or elem != NULL, else
 * all), rid ascending, into `out` (cap entries). Returns the count, or
 * cap + 1 if it does not fit. */
size_t sl_crdt_val_ctx(const sl_crdt_val_t *v, const uint8_t *elem, uint32_t elem_len,
                       bool all, sl_dot_t *out, size_t cap);

/* Readers. */
const sl_crdt_item_t *sl_crdt_lww_get(const sl_crdt_val_t *v); /* NULL: none/deleted */
int64_t sl_crdt_counter_value(const sl_crdt_val_t *v);
/* This replica's current totals (0, 0 if it has no live atom). */
void sl_crdt_counter_own(const sl_crdt_val_t *v, uint64_t rid, uint64_t *p, uint64_t *n);
bool sl_crdt_set_contains(const sl_crdt_val_t *v, const uint8_t *elem, uint32_t len);
/* The winning atom of field `name`, or NULL. */
const sl_crdt_item_t *sl_crdt_gmap_get(const sl_crdt_val_t *v, const uint8_t *name, uint32_t len);

#ifdef __cplusplus
}
#endif
#endif
