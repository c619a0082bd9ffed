/* The transport's index of slots by address (src/net/addr_index.h). */
#include <string.h>

#include "starling/hash.h"
#include "net/addr_index.h"

static uint64_t addr_hash(const char *addr) {
    return sl_hash64(addr, strlen(addr), 0x5354524c);
}

sl_err sl_addr_index_init(sl_addr_index_t *ix, size_t slots) {
    memset(ix, 0, sizeof *ix);
    size_t buckets = 16;
    while (buckets < 2 * slots)
        buckets *= 2;
    ix->heads = sl_calloc(buckets, sizeof *ix->heads);
    ix->next = sl_calloc(slots ? slots : 1, sizeof *ix->next);
    ix->hashes = sl_calloc(slots ? slots : 1, sizeof *ix->hashes);
    ix->in = sl_calloc(slots ? slots : 1, sizeof *ix->in);
    if (!ix->heads || !ix->next || !ix->hashes || !ix->in) {
        sl_addr_index_fini(ix);
        return SL_ENOMEM;
    }
    ix->mask = buckets - 1;
    ix->slots = slots;
    return SL_OK;
}

void sl_addr_index_fini(sl_addr_index_t *ix) {
    sl_free(ix->heads);
    sl_free(ix->next);
    sl_free(ix->hashes);
    sl_free(ix->in);
    memset(ix, 0, sizeof *ix);
}

void sl_addr_index_add(sl_addr_index_t *ix, size_t slot, const char *addr) {
    if (slot >= ix->slots || ix->in[slot])
        return;
    uint64_t h = addr_hash(addr);
    size_t b = (size_t)h & ix->mask;
    ix->hashes[slot] = h;
    ix->next[slot] = ix->heads[b];
    ix->heads[b] = (uint32_t)slot + 1;
    ix->in[slot] = 1;
}

void sl_addr_index_del(sl_addr_index_t *ix, size_t slot) {
    if (slot >= ix->slots || !ix->in[slot])
        return;
    uint32_t *p = &ix->heads[(size_t)ix->hashes[slot] & ix->mask];
    while (*p && *p != slot + 1)
        p = &ix->next[*p - 1];
    if (*p)
        *p = ix->next[slot];
    ix->next[slot] = 0;
    ix->in[slot] = 0;
}

size_t sl_addr_index_find(const sl_addr_index_t *ix, const char *addr, sl_addr_index_key_fn key,
                          const void *table) {
    uint64_t h = addr_hash(addr);
    for (uint32_t v = ix->heads[(size_t)h & ix->mask]; v; v = ix->next[v - 1])
        if (ix->hashes[v - 1] == h && !strcmp(key(table, v - 1), addr))
            return v - 1;
    return SL_ADDR_INDEX_NONE;
}
