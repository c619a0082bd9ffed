/* What the blob node knows and looks up, calling nothing above it (see
 * blob_node.c for the order of its files): its keys in the store
 * (manifests, holders, deletions), chunk files read back and checked, the
 * members alive, and its running transfers, copies out and recent
 * outcomes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/disk.h"
#include "starling/hash.h"

#include "blob/blob_node_internal.h"

bool sl_blob_node_unhex(const uint8_t *s, size_t len, uint8_t out[SL_BLAKE2B_LEN]) {
    return len == HEX_LEN && sl_unhex((const char *)s, len, out);
}

void sl_blob_manifest_key(const uint8_t hash[SL_BLAKE2B_LEN], char *out) {
    memcpy(out, PREFIX, PREFIX_LEN);
    sl_hex(hash, SL_BLAKE2B_LEN, out + PREFIX_LEN);
}

/* blob/HEX/h/NAME */
size_t sl_blob_holder_key(const uint8_t hash[SL_BLAKE2B_LEN], const char *name, char *out,
                         size_t cap) {
    char hex[HEX_LEN + 1];
    sl_hex(hash, SL_BLAKE2B_LEN, hex);
    int n = snprintf(out, cap, PREFIX "%s/h/%s", hex, name);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

bool sl_blob_node_holds(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                        const char *name) {
    char key[256];
    size_t n = sl_blob_holder_key(hash, name, key, sizeof key);
    const uint8_t *v;
    size_t vl;
    return n && sl_store_get(sl_store_node_store(bn->store), key, n, &v, &vl) == SL_OK;
}

/* blob/HEX/dead: the blob was deleted (sl_blob_node_delete) */
size_t sl_blob_dead_key(const uint8_t hash[SL_BLAKE2B_LEN], char *out) {
    sl_blob_manifest_key(hash, out);
    static const char suffix[] = "/dead";
    memcpy(out + PREFIX_LEN + HEX_LEN, suffix, sizeof suffix);
    return PREFIX_LEN + HEX_LEN + sizeof suffix - 1;
}

bool sl_blob_node_is_dead(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    char key[PREFIX_LEN + HEX_LEN + 8];
    size_t n = sl_blob_dead_key(hash, key);
    const uint8_t *v;
    size_t vl;
    return sl_store_get(sl_store_node_store(bn->store), key, n, &v, &vl) == SL_OK;
}

static bool any_key(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e) {
    (void)key;
    (void)key_len;
    (void)e;
    *(bool *)ctx = true;
    return false;
}

/* Does any member, alive or not, still record a copy? */
bool sl_blob_node_has_holders(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    char pre[PREFIX_LEN + HEX_LEN + 8];
    sl_blob_manifest_key(hash, pre);
    memcpy(pre + PREFIX_LEN + HEX_LEN, "/h/", 4);
    bool any = false;
    sl_store_scan(sl_store_node_store(bn->store), pre, PREFIX_LEN + HEX_LEN + 3, any_key, &any);
    return any;
}

/* The manifest of a blob the store knows. */
sl_err sl_blob_node_lookup(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                           sl_blob_manifest_t *m) {
    char key[PREFIX_LEN + HEX_LEN + 1]; /* sl_hex adds a NUL */
    sl_blob_manifest_key(hash, key);
    const uint8_t *v;
    size_t vl;
    sl_err err = sl_store_get(sl_store_node_store(bn->store), key, PREFIX_LEN + HEX_LEN, &v, &vl);
    if (err)
        return err == SL_EINVAL ? SL_EPROTO : err;
    if ((err = sl_blob_manifest_decode(v, vl, m)))
        return err;
    if (memcmp(m->hash, hash, SL_BLAKE2B_LEN) != 0) {
        sl_blob_manifest_fini(m);
        return SL_EPROTO;
    }
    return SL_OK;
}

size_t sl_blob_chunk_size(const sl_blob_manifest_t *m, uint32_t i) {
    uint64_t off = (uint64_t)i * m->chunk_len;
    return (size_t)(m->size - off < m->chunk_len ? m->size - off : m->chunk_len);
}

void sl_blob_log_corrupt(const char *what, const uint8_t hash[SL_BLAKE2B_LEN], uint32_t index,
                        const char *where) {
    char hex[HEX_LEN + 1];
    sl_hex(hash, SL_BLAKE2B_LEN, hex);
    sl_log(SL_LOG_ERR, "BLOB-CORRUPT", "%s %" PRIu32 " of blob %s %s does not match its hash: refused",
           what, index, hex, where);
}

/* Reads chunk `i` of `m` from disk and checks its size and, with
 * `check_hash`, its bytes: SL_ENOTFOUND, SL_ECORRUPT. */
sl_err sl_blob_node_load_chunk(sl_blob_node_t *bn, const sl_blob_manifest_t *m, uint32_t i,
                         bool check_hash, uint8_t **data, size_t *len) {
    char hex[HEX_LEN + 1];
    sl_hex(m->chunks[i], SL_BLAKE2B_LEN, hex);
    sl_err err = sl_disk_chunk_get(bn->disk, hex, data, len);
    if (err)
        return err;
    if (*len != sl_blob_chunk_size(m, i) ||
        (check_hash && sl_blob_verify(*data, *len, m->chunks[i]) != SL_OK)) {
        sl_free(*data);
        *data = NULL;
        return SL_ECORRUPT;
    }
    return SL_OK;
}

/* Reads chunk `i` of `m` from disk and checks it against its hash. */
sl_err sl_blob_node_read_chunk(sl_blob_node_t *bn, const sl_blob_manifest_t *m, uint32_t i,
                               uint8_t **data, size_t *len) {
    return sl_blob_node_load_chunk(bn, m, i, true, data, len);
}

/* ---- membership ---- */

size_t sl_blob_node_alive(const sl_blob_node_t *bn, member_t **out) {
    const sl_swim_t *sw = sl_node_swim(bn->node);
    size_t total = sl_swim_member_count(sw), n = 0;
    member_t *ms = sl_calloc(total ? total : 1, sizeof *ms);
    *out = ms;
    if (!ms)
        return 0;
    for (size_t i = 0; i < total && n < MAX_MEMBERS; i++) {
        sl_swim_member_t m;
        if (sl_swim_member_at(sw, i, &m) != SL_OK ||
            (m.state != SL_STATE_ALIVE && m.state != SL_STATE_SUSPECT) ||
            m.name.len > SL_NAME_MAX || m.addr.len > SL_ADDR_MAX)
            continue;
        memcpy(ms[n].name, m.name.ptr, m.name.len);
        ms[n].name[m.name.len] = 0;
        if (m.is_self)
            snprintf(ms[n].addr, sizeof ms[n].addr, "%s", sl_node_addr(bn->node));
        else {
            memcpy(ms[n].addr, m.addr.ptr, m.addr.len);
            ms[n].addr[m.addr.len] = 0;
        }
        n++;
    }
    return n;
}

/* ---- transfers ---- */

job_t *sl_blob_node_find_job(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    for (size_t i = 0; i < bn->job_count; i++)
        if (!memcmp(bn->jobs[i]->hash, hash, SL_BLAKE2B_LEN))
            return bn->jobs[i];
    return NULL;
}

void sl_blob_node_remember(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN], sl_err err) {
    for (size_t i = 0; i < RECENT; i++)
        if (bn->recent[i].used && !memcmp(bn->recent[i].hash, hash, SL_BLAKE2B_LEN)) {
            bn->recent[i].err = err;
            return;
        }
    recent_t *r = &bn->recent[bn->recent_next++ % RECENT];
    memcpy(r->hash, hash, SL_BLAKE2B_LEN);
    r->err = err;
    r->used = true;
}

recent_t *sl_blob_node_recent(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    for (size_t i = 0; i < RECENT; i++)
        if (bn->recent[i].used && !memcmp(bn->recent[i].hash, hash, SL_BLAKE2B_LEN))
            return &bn->recent[i];
    return NULL;
}

/* The blob is no longer known to be whole here. */
void sl_blob_node_forget(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    recent_t *r = sl_blob_node_recent(bn, hash);
    if (r)
        r->used = false;
}

/* ---- get_file: copying a blob held here out to a file ---- */

writer_t *sl_blob_node_find_writer(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    for (size_t i = 0; i < bn->writer_count; i++)
        if (!memcmp(bn->writers[i]->hash, hash, SL_BLAKE2B_LEN))
            return bn->writers[i];
    return NULL;
}

/* A job or a writer reads or writes this blob's chunks: leave them be. */
bool sl_blob_node_busy(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    return sl_blob_node_find_job(bn, hash) || sl_blob_node_find_writer(bn, hash);
}

/* ---- placement ---- */

static bool collect_manifest(void *ctx, const uint8_t *key, size_t key_len,
                             const sl_store_entry_t *e) {
    hash_list_t *l = ctx;
    uint8_t h[SL_BLAKE2B_LEN];
    if (key_len != PREFIX_LEN + HEX_LEN || e->type != SL_CRDT_LWW ||
        !sl_blob_node_unhex(key + PREFIX_LEN, HEX_LEN, h))
        return true;
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        void *n = sl_realloc(l->hashes, cap * SL_BLAKE2B_LEN);
        if (!n)
            return false;
        l->hashes = n;
        l->cap = cap;
    }
    memcpy(l->hashes[l->count++], h, SL_BLAKE2B_LEN);
    return true;
}

int sl_blob_node_cmp_hash(const void *a, const void *b) { return memcmp(a, b, SL_BLAKE2B_LEN); }

void sl_blob_node_list(const sl_blob_node_t *bn, hash_list_t *l) {
    memset(l, 0, sizeof *l);
    sl_store_scan(sl_store_node_store(bn->store), PREFIX, PREFIX_LEN, collect_manifest, l);
    if (l->count)
        qsort(l->hashes, l->count, SL_BLAKE2B_LEN, sl_blob_node_cmp_hash);
}
