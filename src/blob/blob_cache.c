/* The cache of blob copies fetched for readers on a peer that is not one
 * of their holders (include/starling/blob_node.h, docs/store.md "Blobs"):
 * the list, least recently used eviction past cache_max_bytes, and which
 * chunks must stay whatever is removed. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob_node_internal.h"

cached_t *sl_blob_cache_find(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    for (size_t i = 0; i < bn->cache_count; i++)
        if (!memcmp(bn->cache[i].m.hash, hash, SL_BLAKE2B_LEN))
            return &bn->cache[i];
    return NULL;
}

void sl_blob_cache_touch(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    cached_t *c = sl_blob_cache_find(bn, hash);
    if (c)
        c->used_ms = now_ms();
}

/* A copy is here for readers (`used_ms` 0: found on disk at start). */
void sl_blob_cache_add(sl_blob_node_t *bn, const sl_blob_manifest_t *m, uint64_t used_ms) {
    cached_t *c = sl_blob_cache_find(bn, m->hash);
    if (c) {
        c->used_ms = used_ms;
        return;
    }
    cached_t *n = sl_realloc(bn->cache, (bn->cache_count + 1) * sizeof *n);
    if (!n)
        return; /* not counted: kept until the next start finds it */
    bn->cache = n;
    c = &bn->cache[bn->cache_count];
    if (sl_blob_manifest_copy(m, &c->m) != SL_OK)
        return;
    c->used_ms = used_ms;
    bn->cache_count++;
}

/* Removes entry i from the list (not its chunks). */
static void cache_remove_at(sl_blob_node_t *bn, size_t i) {
    sl_blob_manifest_fini(&bn->cache[i].m);
    bn->cache[i] = bn->cache[--bn->cache_count];
}

void sl_blob_cache_forget(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    cached_t *c = sl_blob_cache_find(bn, hash);
    if (c)
        cache_remove_at(bn, (size_t)(c - bn->cache));
}

uint64_t sl_blob_cache_bytes(const sl_blob_node_t *bn) {
    uint64_t total = 0;
    for (size_t i = 0; i < bn->cache_count; i++)
        total += bn->cache[i].m.size;
    return total;
}

/* ---- eviction ---- */

static bool chunk_set_add(chunk_set_t *s, const sl_blob_manifest_t *m) {
    if (s->count + m->chunk_count > s->cap) {
        size_t cap = (s->count + m->chunk_count) * 2 + 64;
        void *n = sl_realloc(s->h, cap * SL_BLAKE2B_LEN);
        if (!n)
            return false;
        s->h = n;
        s->cap = cap;
    }
    memcpy(s->h[s->count], m->chunks, (size_t)m->chunk_count * SL_BLAKE2B_LEN);
    s->count += m->chunk_count;
    return true;
}

/* The chunks that must stay whatever is removed: those of every blob this
 * peer holds (recorded as one of its R holders), of every transfer and
 * copy-out under way, of the cached copies not being evicted (`evict`,
 * NULL: none), and of recent blob-chunk uploads not yet committed. */
bool sl_blob_cache_kept(sl_blob_node_t *bn, const bool *evict, chunk_set_t *keep) {
    memset(keep, 0, sizeof *keep);
    hash_list_t l;
    sl_blob_node_list(bn, &l);
    bool ok = true;
    for (size_t b = 0; ok && b < l.count; b++) {
        sl_blob_manifest_t m;
        if (!sl_blob_node_holds(bn, l.hashes[b], sl_node_name(bn->node)))
            continue;
        if (sl_blob_node_lookup(bn, l.hashes[b], &m) != SL_OK) {
            ok = false; /* cannot tell what it uses: evict nothing */
            break;
        }
        ok = chunk_set_add(keep, &m);
        sl_blob_manifest_fini(&m);
    }
    sl_free(l.hashes);
    for (size_t i = 0; ok && i < bn->job_count; i++)
        ok = chunk_set_add(keep, &bn->jobs[i]->m);
    for (size_t i = 0; ok && i < bn->writer_count; i++)
        ok = chunk_set_add(keep, &bn->writers[i]->m);
    for (size_t i = 0; ok && i < bn->cache_count; i++)
        if (!evict || !evict[i])
            ok = chunk_set_add(keep, &bn->cache[i].m);
    if (ok && bn->upload_count) {
        sl_blob_manifest_t up = {.chunk_count = (uint32_t)bn->upload_count, .chunks = bn->uploads};
        ok = chunk_set_add(keep, &up);
    }
    if (ok && keep->count)
        qsort(keep->h, keep->count, SL_BLAKE2B_LEN, sl_blob_node_cmp_hash);
    if (!ok) {
        sl_free(keep->h);
        memset(keep, 0, sizeof *keep);
    }
    return ok;
}

/* Keeps the cache of copies fetched for readers within cache_max_bytes:
 * least recently used first, never one used in the last cache_idle_ms
 * nor the most recently used (a reader may be streaming it), never one a
 * transfer or copy-out is using, never a chunk a held blob shares. A copy
 * of a deleted blob goes whatever the size. A copy this peer has since
 * been recorded as holder of is no longer cache. */
void sl_blob_cache_trim(sl_blob_node_t *bn, uint64_t now) {
    const char *self = sl_node_name(bn->node);
    for (size_t i = bn->cache_count; i-- > 0;)
        if (sl_blob_node_holds(bn, bn->cache[i].m.hash, self))
            cache_remove_at(bn, i);
    if (!bn->cache_count)
        return;
    bool *evict = sl_calloc(bn->cache_count, sizeof *evict);
    if (!evict)
        return;
    uint64_t total = sl_blob_cache_bytes(bn);
    size_t mru = bn->cache_count, victims = 0; /* none yet: copies found at start are not used */
    for (size_t i = 0; i < bn->cache_count; i++) {
        const uint8_t *h = bn->cache[i].m.hash;
        if (bn->cache[i].used_ms &&
            (mru == bn->cache_count || bn->cache[i].used_ms > bn->cache[mru].used_ms))
            mru = i;
        sl_blob_manifest_t m;
        bool gone = sl_blob_node_is_dead(bn, h) || sl_blob_node_lookup(bn, h, &m) != SL_OK;
        if (!gone)
            sl_blob_manifest_fini(&m);
        if (gone && !sl_blob_node_busy(bn, h)) {
            evict[i] = true;
            total -= bn->cache[i].m.size;
            victims++;
        }
    }
    while (total > bn->cache_max_bytes) {
        size_t lru = bn->cache_count;
        for (size_t i = 0; i < bn->cache_count; i++) {
            const cached_t *c = &bn->cache[i];
            if (evict[i] || i == mru || sl_blob_node_busy(bn, c->m.hash) ||
                (c->used_ms && now < c->used_ms + bn->cache_idle_ms))
                continue;
            if (lru == bn->cache_count || c->used_ms < bn->cache[lru].used_ms)
                lru = i;
        }
        if (lru == bn->cache_count)
            break; /* over the limit until a copy falls idle */
        evict[lru] = true;
        total -= bn->cache[lru].m.size;
        victims++;
    }
    chunk_set_t keep;
    if (!victims || !sl_blob_cache_kept(bn, evict, &keep)) {
        sl_free(evict);
        return;
    }
    for (size_t i = bn->cache_count; i-- > 0;) {
        if (!evict[i])
            continue;
        const sl_blob_manifest_t *m = &bn->cache[i].m;
        for (uint32_t c = 0; c < m->chunk_count; c++) {
            if (keep.count &&
                bsearch(m->chunks[c], keep.h, keep.count, SL_BLAKE2B_LEN, sl_blob_node_cmp_hash))
                continue;
            char hex[HEX_LEN + 1];
            sl_hex(m->chunks[c], SL_BLAKE2B_LEN, hex);
            sl_disk_chunk_del(bn->disk, hex);
        }
        char hex[HEX_LEN + 1];
        sl_hex(m->hash, SL_BLAKE2B_LEN, hex);
        sl_log(SL_LOG_INFO, "BLOB-EVICT",
               "blob %s: cached copy of %" PRIu64 " bytes removed (cache over %" PRIu64
               " bytes, or the blob deleted)",
               hex, m->size, bn->cache_max_bytes);
        sl_blob_node_forget(bn, m->hash);
        bn->st.evicted++;
        cache_remove_at(bn, i);
    }
    sl_free(keep.h);
    sl_free(evict);
}

/* Copies an earlier run fetched for readers are still on disk: count them
 * in the cache (as the least recently used), so they can go. A blob
 * counts as here when its first and last chunks are. */
void sl_blob_cache_scan(sl_blob_node_t *bn, const hash_list_t *l) {
    const char *self = sl_node_name(bn->node);
    for (size_t b = 0; b < l->count; b++) {
        sl_blob_manifest_t m;
        const uint8_t *h = l->hashes[b];
        if (sl_blob_node_holds(bn, h, self) || sl_blob_node_busy(bn, h) ||
            sl_blob_cache_find(bn, h) || sl_blob_node_lookup(bn, h, &m) != SL_OK)
            continue;
        char first[HEX_LEN + 1], last[HEX_LEN + 1];
        if (m.chunk_count) {
            sl_hex(m.chunks[0], SL_BLAKE2B_LEN, first);
            sl_hex(m.chunks[m.chunk_count - 1], SL_BLAKE2B_LEN, last);
            if (sl_disk_chunk_has(bn->disk, first) && sl_disk_chunk_has(bn->disk, last))
                sl_blob_cache_add(bn, &m, 0);
        }
        sl_blob_manifest_fini(&m);
    }
    bn->cache_scanned = true;
}
