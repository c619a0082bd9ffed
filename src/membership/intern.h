/* Interned, reference-counted byte strings (src/membership/intern.c):
 * names, addresses and metadata blobs stored once per pool, however many
 * member tables hold them. A leaf below the membership core: it includes
 * nothing of the core (swim_internal.h includes it). The pool's lifecycle
 * (sl_intern_new, sl_intern_destroy, sl_intern_usage) is part of the
 * embedder's API in include/starling/swim.h; the prototypes below repeat
 * it, so that this file needs nothing from above. */
#ifndef STARLING_MEMBERSHIP_INTERN_H
#define STARLING_MEMBERSHIP_INTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "starling/common.h"
#include "starling/msg.h" /* sl_bytes_t */

typedef struct sl_intern sl_intern_t;

sl_err sl_intern_new(sl_intern_t **out);
void sl_intern_destroy(sl_intern_t **pool);
void sl_intern_usage(const sl_intern_t *pool, size_t *count, size_t *bytes);

/* One interned byte string. Shared by every holder; freed when the last
 * reference goes. */
typedef struct sl_istr {
    struct sl_istr *next; /* hash chain in the pool */
    uint64_t hash;        /* intern_hash of the bytes */
    uint32_t refs;        /* holders */
    uint32_t len;         /* bytes */
    uint8_t bytes[];      /* the string (not NUL-terminated) */
} sl_istr_t;

uint64_t intern_hash(const uint8_t *p, size_t len);
/* Finds or adds `p[0..len)` and takes a reference; NULL on ENOMEM. */
sl_istr_t *intern_get(sl_intern_t *pool, const uint8_t *p, size_t len);
/* Finds without adding or referencing; NULL if absent. */
sl_istr_t *intern_find(const sl_intern_t *pool, const uint8_t *p, size_t len, uint64_t hash);
static inline sl_istr_t *intern_ref(sl_istr_t *s) {
    if (s)
        s->refs++;
    return s;
}
/* Drops a reference (NULL is a no-op). */
void intern_put(sl_intern_t *pool, sl_istr_t *s);

static inline sl_bytes_t istr_bytes(const sl_istr_t *s) {
    sl_bytes_t b = {NULL, 0};
    if (s && s->len) {
        b.ptr = s->bytes;
        b.len = s->len;
    }
    return b;
}

static inline bool istr_eq(const sl_istr_t *s, const uint8_t *p, size_t len) {
    return s && s->len == len && (len == 0 || memcmp(s->bytes, p, len) == 0);
}

#endif
