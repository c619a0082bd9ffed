/* Typed CRDT values: see include/starling/crdt.h for the model. */
#include "starling/crdt.h"

#include <string.h>

#include "starling/hash.h"
#include "starling/rng.h"
#include "store/crdt_test.h"

static bool kind_matches_type(uint8_t kind, uint8_t type) {
    switch (kind) {
    case SL_ITEM_LWW: return type == SL_CRDT_LWW;
    case SL_ITEM_ADD: return type == SL_CRDT_SET;
    case SL_ITEM_CTR: return type == SL_CRDT_COUNTER;
    case SL_ITEM_FIELD: return type == SL_CRDT_GMAP;
    case SL_ITEM_DEAD:
        return type == SL_CRDT_SET || type == SL_CRDT_COUNTER || type == SL_CRDT_GMAP;
    default: return false;
    }
}

sl_err sl_crdt_item_check(const sl_crdt_item_t *it) {
    if (!kind_matches_type(it->kind, it->type) || it->dot.rid == 0 || it->dot.seq == 0)
        return SL_EPROTO;
    if (it->a_len > SL_CRDT_MAX_BYTES || it->b_len > SL_CRDT_MAX_BYTES)
        return SL_ETOOBIG;
    if ((it->a_len && !it->a) || (it->b_len && !it->b))
        return SL_EPROTO;
    uint8_t allowed = it->kind == SL_ITEM_LWW ? SL_ITEM_DELETED
                      : it->kind == SL_ITEM_DEAD ? SL_ITEM_ALL : 0;
    if (it->flags & ~allowed)
        return SL_EPROTO;
    if (it->kind == SL_ITEM_LWW && (it->flags & SL_ITEM_DELETED) && it->a_len)
        return SL_EPROTO;
    if (it->kind != SL_ITEM_FIELD && it->b_len)
        return SL_EPROTO;
    if (it->kind == SL_ITEM_CTR && it->a_len)
        return SL_EPROTO;
    if (it->kind == SL_ITEM_DEAD) {
        if (it->ctx_count == 0 || !it->ctx)
            return SL_EPROTO;
        if (it->ctx_count > SL_CRDT_MAX_CTX)
            return SL_ETOOBIG;
        if ((it->flags & SL_ITEM_ALL) ? it->a_len != 0 : it->type != SL_CRDT_SET)
            return SL_EPROTO;
        for (uint32_t i = 0; i < it->ctx_count; i++) {
            if (it->ctx[i].rid == 0 || it->ctx[i].seq == 0)
                return SL_EPROTO;
            if (i && it->ctx[i].rid <= it->ctx[i - 1].rid)
                return SL_EPROTO;
        }
    } else if (it->ctx_count) {
        return SL_EPROTO;
    }
    return SL_OK;
}

static int planted_bug; /* sl_crdt_set_bug: tests only */

void sl_crdt_set_bug(int bug) { planted_bug = bug; }

int sl_crdt_lww_cmp(uint64_t hlc_a, sl_dot_t a, uint64_t hlc_b, sl_dot_t b) {
    if (hlc_a != hlc_b)
        return hlc_a < hlc_b ? -1 : 1;
    if (planted_bug == 1)
        return 1; /* planted: the newcomer always wins a tie */
    if (a.rid != b.rid)
        return a.rid < b.rid ? -1 : 1;
    if (a.seq != b.seq)
        return a.seq < b.seq ? -1 : 1;
    return 0;
}

static int dot_cmp(sl_dot_t a, sl_dot_t b) {
    if (a.rid != b.rid)
        return a.rid < b.rid ? -1 : 1;
    if (a.seq != b.seq)
        return a.seq < b.seq ? -1 : 1;
    return 0;
}

void sl_crdt_val_init(sl_crdt_val_t *v) { memset(v, 0, sizeof *v); }

/* An owned atom keeps a, b and ctx in one allocation. */
static void atom_free(sl_crdt_item_t *a) {
    void *block = (void *)(a->ctx_count ? (const void *)a->ctx
                           : a->a_len ? (const void *)a->a : (const void *)a->b);
    sl_free(block);
}

static sl_err atom_clone(sl_crdt_item_t *dst, const sl_crdt_item_t *src) {
    *dst = *src;
    size_t ctx_len = (size_t)src->ctx_count * sizeof(sl_dot_t);
    size_t total = ctx_len + src->a_len + src->b_len;
    dst->a = dst->b = NULL;
    dst->ctx = NULL;
    if (!total)
        return SL_OK;
    uint8_t *block = sl_malloc(total);
    if (!block)
        return SL_ENOMEM;
    uint8_t *p = block;
    if (ctx_len) {
        memcpy(p, src->ctx, ctx_len);
        dst->ctx = (const sl_dot_t *)p;
        p += ctx_len;
    }
    if (src->a_len) {
        memcpy(p, src->a, src->a_len);
        dst->a = p;
        p += src->a_len;
    }
    if (src->b_len) {
        memcpy(p, src->b, src->b_len);
        dst->b = p;
    }
    return SL_OK;
}

void sl_crdt_val_fini(sl_crdt_val_t *v) {
    for (uint32_t i = 0; i < v->count; i++)
        atom_free(&v->atoms[i]);
    sl_free(v->atoms);
    memset(v, 0, sizeof *v);
}

sl_err sl_crdt_val_copy(sl_crdt_val_t *dst, const sl_crdt_val_t *src) {
    sl_crdt_val_init(dst);
    if (!src->count) {
        dst->type = src->type;
        return SL_OK;
    }
    dst->atoms = sl_malloc(src->count * sizeof *dst->atoms);
    if (!dst->atoms)
        return SL_ENOMEM;
    dst->cap = src->count;
    dst->type = src->type;
    for (uint32_t i = 0; i < src->count; i++) {
        if (atom_clone(&dst->atoms[i], &src->atoms[i]) != SL_OK) {
            sl_crdt_val_fini(dst);
            return SL_ENOMEM;
        }
        dst->count++;
    }
    return SL_OK;
}

static void remove_at(sl_crdt_val_t *v, uint32_t i) {
    atom_free(&v->atoms[i]);
    memmove(&v->atoms[i], &v->atoms[i + 1], (v->count - i - 1) * sizeof *v->atoms);
    v->count--;
}

/* Index of the first atom with dot >= d. */
static uint32_t lower_bound(const sl_crdt_val_t *v, sl_dot_t d) {
    uint32_t lo = 0, hi = v->count;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (dot_cmp(v->atoms[mid].dot, d) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static sl_err insert(sl_crdt_val_t *v, const sl_crdt_item_t *it) {
    if (v->count == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : 2;
        sl_crdt_item_t *n = sl_realloc(v->atoms, cap * sizeof *n);
        if (!n)
            return SL_ENOMEM;
        v->atoms = n;
        v->cap = cap;
    }
    uint32_t i = lower_bound(v, it->dot);
    sl_crdt_item_t a;
    sl_err err = atom_clone(&a, it);
    if (err)
        return err;
    memmove(&v->atoms[i + 1], &v->atoms[i], (v->count - i) * sizeof *v->atoms);
    v->atoms[i] = a;
    v->count++;
    return SL_OK;
}

static uint64_t ctx_seq(const sl_crdt_item_t *dead, uint64_t rid) {
    uint32_t lo = 0, hi = dead->ctx_count;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (dead->ctx[mid].rid == rid)
            return dead->ctx[mid].seq;
        if (dead->ctx[mid].rid < rid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

static bool bytes_eq(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) {
    return al == bl && (al == 0 || memcmp(a, b, al) == 0);
}

/* Does DEAD atom `d` kill live atom `it`? */
static bool kills(const sl_crdt_item_t *d, const sl_crdt_item_t *it) {
    if (it->kind == SL_ITEM_DEAD)
        return false;
    if (!(d->flags & SL_ITEM_ALL) &&
        (it->kind != SL_ITEM_ADD || !bytes_eq(d->a, d->a_len, it->a, it->a_len)))
        return false;
    return it->dot.seq <= ctx_seq(d, it->dot.rid);
}

static bool killed(const sl_crdt_val_t *v, const sl_crdt_item_t *it) {
    for (uint32_t i = 0; i < v->count; i++)
        if (v->atoms[i].kind == SL_ITEM_DEAD && kills(&v->atoms[i], it))
            return true;
    return false;
}

sl_err sl_crdt_val_apply(sl_crdt_val_t *v, const sl_crdt_item_t *it, bool *changed) {
    if (changed)
        *changed = false;
    if (v->type == SL_CRDT_NONE || v->count == 0 || it->type < v->type) {
        if (v->count) {
            for (uint32_t i = 0; i < v->count; i++)
                atom_free(&v->atoms[i]);
            v->count = 0;
        }
        v->type = it->type;
    } else if (it->type > v->type) {
        return SL_OK; /* a smaller type holds the key */
    }
    uint32_t at = lower_bound(v, it->dot);
    if (at < v->count && dot_cmp(v->atoms[at].dot, it->dot) == 0)
        return SL_OK; /* seen */
    if (it->kind != SL_ITEM_DEAD && killed(v, it))
        return SL_OK;
    for (uint32_t i = 0; i < v->count;) {
        sl_crdt_item_t *a = &v->atoms[i];
        bool drop = false;
        switch (it->kind) {
        case SL_ITEM_LWW:
            if (a->kind == SL_ITEM_LWW) {
                if (sl_crdt_lww_cmp(a->hlc, a->dot, it->hlc, it->dot) > 0)
                    return SL_OK;
                drop = true;
            }
            break;
        case SL_ITEM_CTR:
            if (a->kind == SL_ITEM_CTR && a->dot.rid == it->dot.rid) {
                if (a->dot.seq > it->dot.seq)
                    return SL_OK;
                drop = true;
            }
            break;
        case SL_ITEM_FIELD:
            if (a->kind == SL_ITEM_FIELD && a->dot.rid == it->dot.rid &&
                bytes_eq(a->a, a->a_len, it->a, it->a_len)) {
                if (a->dot.seq > it->dot.seq)
                    return SL_OK;
                drop = true;
            }
            break;
        case SL_ITEM_DEAD:
            drop = kills(it, a);
            break;
        default:
            break;
        }
        if (drop) {
            remove_at(v, i);
            if (changed)
                *changed = true;
        } else {
            i++;
        }
    }
    sl_err err = insert(v, it);
    if (!err && changed)
        *changed = true;
    return err;
}

sl_err sl_crdt_val_join(sl_crdt_val_t *dst, const sl_crdt_val_t *src) {
    for (uint32_t i = 0; i < src->count; i++) {
        sl_err err = sl_crdt_val_apply(dst, &src->atoms[i], NULL);
        if (err)
            return err;
    }
    return SL_OK;
}

static bool atom_equal(const sl_crdt_item_t *a, const sl_crdt_item_t *b) {
    return a->kind == b->kind && a->type == b->type && a->flags == b->flags &&
           a->dot.rid == b->dot.rid && a->dot.seq == b->dot.seq && a->hlc == b->hlc &&
           a->p == b->p && a->n == b->n && bytes_eq(a->a, a->a_len, b->a, b->a_len) &&
           bytes_eq(a->b, a->b_len, b->b, b->b_len) && a->ctx_count == b->ctx_count &&
           (a->ctx_count == 0 ||
            memcmp(a->ctx, b->ctx, a->ctx_count * sizeof(sl_dot_t)) == 0);
}

bool sl_crdt_val_equal(const sl_crdt_val_t *a, const sl_crdt_val_t *b) {
    if (a->count != b->count)
        return false;
    if (a->count && a->type != b->type)
        return false;
    for (uint32_t i = 0; i < a->count; i++)
        if (!atom_equal(&a->atoms[i], &b->atoms[i]))
            return false;
    return true;
}

static bool atom_live(const sl_crdt_item_t *a) {
    return a->kind != SL_ITEM_DEAD && !(a->flags & SL_ITEM_DELETED);
}

bool sl_crdt_val_live(const sl_crdt_val_t *v) {
    for (uint32_t i = 0; i < v->count; i++)
        if (atom_live(&v->atoms[i]))
            return true;
    return false;
}

uint64_t sl_crdt_val_hash(const sl_crdt_val_t *v, uint64_t seed) {
    uint64_t h = sl_mix64(seed ^ v->type);
    for (uint32_t i = 0; i < v->count; i++) {
        const sl_crdt_item_t *a = &v->atoms[i];
        if (!atom_live(a))
            continue;
        uint64_t x[6] = {a->kind, a->dot.rid, a->dot.seq, a->hlc, a->p, a->n};
        h = sl_mix64(h ^ sl_hash64(x, sizeof x, seed));
        h = sl_mix64(h ^ sl_hash64(a->a, a->a_len, seed + 1));
        h = sl_mix64(h ^ sl_hash64(a->b, a->b_len, seed + 2));
    }
    return h;
}

size_t sl_crdt_val_gc(sl_crdt_val_t *v, bool (*stable)(void *ctx, sl_dot_t dot), void *ctx) {
    size_t dropped = 0;
    for (uint32_t i = 0; i < v->count;) {
        sl_crdt_item_t *a = &v->atoms[i];
        if (!atom_live(a) && stable(ctx, a->dot)) {
            remove_at(v, i);
            dropped++;
        } else {
            i++;
        }
    }
    if (!v->count)
        v->type = SL_CRDT_NONE;
    return dropped;
}

size_t sl_crdt_val_drop(sl_crdt_val_t *v, bool (*pred)(void *ctx, const sl_crdt_item_t *atom),
                        void *ctx) {
    size_t dropped = 0;
    for (uint32_t i = 0; i < v->count;) {
        if (pred(ctx, &v->atoms[i])) {
            remove_at(v, i);
            dropped++;
        } else {
            i++;
        }
    }
    if (!v->count)
        v->type = SL_CRDT_NONE;
    return dropped;
}

size_t sl_crdt_val_ctx(const sl_crdt_val_t *v, const uint8_t *elem, uint32_t elem_len,
                       bool all, sl_dot_t *out, size_t cap) {
    size_t n = 0;
    /* atoms are sorted by (rid, seq): the last live match of each rid wins */
    for (uint32_t i = 0; i < v->count; i++) {
        const sl_crdt_item_t *a = &v->atoms[i];
        if (!atom_live(a))
            continue;
        if (!all && !bytes_eq(a->a, a->a_len, elem, elem_len))
            continue;
        if (n && out[n - 1].rid == a->dot.rid) {
            out[n - 1].seq = a->dot.seq;
            continue;
        }
        if (n == cap)
            return cap + 1;
        out[n++] = a->dot;
    }
    return n;
}

const sl_crdt_item_t *sl_crdt_lww_get(const sl_crdt_val_t *v) {
    if (v->type != SL_CRDT_LWW)
        return NULL;
    for (uint32_t i = 0; i < v->count; i++)
        if (v->atoms[i].kind == SL_ITEM_LWW)
            return (v->atoms[i].flags & SL_ITEM_DELETED) ? NULL : &v->atoms[i];
    return NULL;
}

int64_t sl_crdt_counter_value(const sl_crdt_val_t *v) {
    uint64_t p = 0, n = 0;
    if (v->type != SL_CRDT_COUNTER)
        return 0;
    for (uint32_t i = 0; i < v->count; i++)
        if (v->atoms[i].kind == SL_ITEM_CTR) {
            p += v->atoms[i].p;
            n += v->atoms[i].n;
        }
    return (int64_t)(p - n);
}

void sl_crdt_counter_own(const sl_crdt_val_t *v, uint64_t rid, uint64_t *p, uint64_t *n) {
    *p = *n = 0;
    if (v->type != SL_CRDT_COUNTER)
        return;
    for (uint32_t i = 0; i < v->count; i++)
        if (v->atoms[i].kind == SL_ITEM_CTR && v->atoms[i].dot.rid == rid) {
            *p = v->atoms[i].p;
            *n = v->atoms[i].n;
        }
}

bool sl_crdt_set_contains(const sl_crdt_val_t *v, const uint8_t *elem, uint32_t len) {
    if (v->type != SL_CRDT_SET)
        return false;
    for (uint32_t i = 0; i < v->count; i++)
        if (v->atoms[i].kind == SL_ITEM_ADD && bytes_eq(v->atoms[i].a, v->atoms[i].a_len, elem, len))
            return true;
    return false;
}

const sl_crdt_item_t *sl_crdt_gmap_get(const sl_crdt_val_t *v, const uint8_t *name, uint32_t len) {
    const sl_crdt_item_t *best = NULL;
    if (v->type != SL_CRDT_GMAP)
        return NULL;
    for (uint32_t i = 0; i < v->count; i++) {
        const sl_crdt_item_t *a = &v->atoms[i];
        if (a->kind != SL_ITEM_FIELD || !bytes_eq(a->a, a->a_len, name, len))
            continue;
        if (!best || sl_crdt_lww_cmp(a->hlc, a->dot, best->hlc, best->dot) > 0)
            best = a;
    }
    return best;
}
