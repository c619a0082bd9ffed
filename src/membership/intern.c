/* Interned, reference-counted byte strings for the membership core: names,
 * addresses and metadata blobs are stored once per pool, however many member
 * tables hold them (the simulator shares one pool among all its cores).
 * A leaf: it includes nothing of the core (membership/intern.h). */
#include <string.h>

#include "starling/rng.h" /* sl_mix64 */
#include "membership/intern.h"

struct sl_intern {
    sl_istr_t **buckets; /* hash chains */
    size_t bucket_count; /* a power of two */
    size_t count;        /* strings held */
    size_t bytes;        /* their total length */
};

uint64_t intern_hash(const uint8_t *p, size_t len) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ len;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = sl_mix64(h ^ w);
    }
    uint64_t tail = 0;
    for (size_t j = 0; i < len; i++, j++)
        tail |= (uint64_t)p[i] << (8 * j);
    return sl_mix64(h ^ tail ^ 0xA5A5A5A5A5A5A5A5ull);
}

sl_err sl_intern_new(sl_intern_t **out) {
    *out = NULL;
    sl_intern_t *pool = sl_calloc(1, sizeof *pool);
    if (!pool)
        return SL_ENOMEM;
    pool->bucket_count = 64;
    pool->buckets = sl_calloc(pool->bucket_count, sizeof *pool->buckets);
    if (!pool->buckets) {
        sl_free(pool);
        return SL_ENOMEM;
    }
    *out = pool;
    return SL_OK;
}

void sl_intern_destroy(sl_intern_t **pp) {
    if (!pp || !*pp)
        return;
    sl_intern_t *pool = *pp;
    for (size_t i = 0; i < pool->bucket_count; i++) {
        sl_istr_t *s = pool->buckets[i];
        while (s) {
            sl_istr_t *next = s->next;
            sl_free(s);
            s = next;
        }
    }
    sl_free(pool->buckets);
    sl_free(pool);
    *pp = NULL;
}

void sl_intern_usage(const sl_intern_t *pool, size_t *count, size_t *bytes) {
    *count = pool ? pool->count : 0;
    *bytes = pool ? pool->bytes : 0;
}

sl_istr_t *intern_find(const sl_intern_t *pool, const uint8_t *p, size_t len, uint64_t hash) {
    for (sl_istr_t *s = pool->buckets[hash & (pool->bucket_count - 1)]; s; s = s->next)
        if (s->hash == hash && istr_eq(s, p, len))
            return s;
    return NULL;
}

static void grow(sl_intern_t *pool) {
    size_t n = pool->bucket_count * 2;
    sl_istr_t **b = sl_calloc(n, sizeof *b);
    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < pool->bucket_count; i++) {
        sl_istr_t *s = pool->buckets[i];
        while (s) {
            sl_istr_t *next = s->next;
            s->next = b[s->hash & (n - 1)];
            b[s->hash & (n - 1)] = s;
            s = next;
        }
    }
    sl_free(pool->buckets);
    pool->buckets = b;
    pool->bucket_count = n;
}

sl_istr_t *intern_get(sl_intern_t *pool, const uint8_t *p, size_t len) {
    uint64_t h = intern_hash(p, len);
    sl_istr_t *s = intern_find(pool, p, len, h);
    if (s) {
        s->refs++;
        return s;
    }
    s = sl_malloc(sizeof *s + len);
    if (!s)
        return NULL;
    s->hash = h;
    s->refs = 1;
    s->len = (uint32_t)len;
    if (len)
        memcpy(s->bytes, p, len);
    size_t b = h & (pool->bucket_count - 1);
    s->next = pool->buckets[b];
    pool->buckets[b] = s;
    pool->count++;
    pool->bytes += len;
    if (pool->count > pool->bucket_count)
        grow(pool);
    return s;
}

void intern_put(sl_intern_t *pool, sl_istr_t *s) {
    if (!s || --s->refs > 0)
        return;
    sl_istr_t **pp = &pool->buckets[s->hash & (pool->bucket_count - 1)];
    while (*pp && *pp != s)
        pp = &(*pp)->next;
    if (*pp)
        *pp = s->next;
    pool->count--;
    pool->bytes -= s->len;
    sl_free(s);
}
