/* Blobs: see include/starling/blob.h. */
#include "starling/blob.h"

#include <string.h>

#include <sodium.h>

#include "starling/mpack.h"
#include "blob/blob_test.h"

static int planted_bug; /* sl_blob_set_bug: tests only */

void sl_blob_set_bug(int bug) { planted_bug = bug; }

void sl_blob_manifest_fini(sl_blob_manifest_t *m) {
    sl_free(m->chunks);
    memset(m, 0, sizeof *m);
}

sl_err sl_blob_manifest_build(const void *data, size_t len, uint32_t chunk_len,
                              sl_blob_manifest_t *out) {
    memset(out, 0, sizeof *out);
    if (!chunk_len)
        chunk_len = SL_BLOB_CHUNK_LEN;
    uint64_t count = (len + chunk_len - 1) / chunk_len;
    if (count > SL_BLOB_MAX_CHUNKS)
        return SL_ETOOBIG;
    if (count && !(out->chunks = sl_malloc(count * SL_BLAKE2B_LEN)))
        return SL_ENOMEM;
    const uint8_t *p = data;
    for (uint64_t i = 0; i < count; i++) {
        size_t n = len - i * chunk_len < chunk_len ? len - i * chunk_len : chunk_len;
        sl_blake2b(p + i * chunk_len, n, out->chunks[i]);
    }
    sl_blake2b(data, len, out->hash);
    out->size = len;
    out->chunk_len = chunk_len;
    out->chunk_count = (uint32_t)count;
    return SL_OK;
}

sl_err sl_blob_manifest_encode(const sl_blob_manifest_t *m, uint8_t **out, size_t *len) {
    sl_mpack_writer_t w;
    sl_mpack_writer_init(&w, 64 + (size_t)m->chunk_count * 40);
    sl_mpack_write_map(&w, 4);
    sl_mpack_write_uint(&w, 0);
    sl_mpack_write_bin(&w, m->hash, SL_BLAKE2B_LEN);
    sl_mpack_write_uint(&w, 1);
    sl_mpack_write_uint(&w, m->size);
    sl_mpack_write_uint(&w, 2);
    sl_mpack_write_uint(&w, m->chunk_len);
    sl_mpack_write_uint(&w, 3);
    sl_mpack_write_array(&w, m->chunk_count);
    for (uint32_t i = 0; i < m->chunk_count; i++)
        sl_mpack_write_bin(&w, m->chunks[i], SL_BLAKE2B_LEN);
    return sl_mpack_writer_finish(&w, out, len);
}

sl_err sl_blob_manifest_decode(const uint8_t *buf, size_t len, sl_blob_manifest_t *out) {
    memset(out, 0, sizeof *out);
    sl_mpack_reader_t r;
    sl_mpack_map_t map;
    uint64_t key, v;
    const uint8_t *p;
    size_t n;
    uint32_t seen = 0;
    sl_mpack_reader_init(&r, buf, len);
    sl_mpack_map_begin(&r, 8, &map);
    while (sl_mpack_map_next(&r, &map, &key)) {
        seen |= key < 4 ? 1u << key : 0;
        switch (key) {
        case 0:
            if (!sl_mpack_read_bin(&r, SL_BLAKE2B_LEN, SL_BLAKE2B_LEN, &p, &n))
                memcpy(out->hash, p, SL_BLAKE2B_LEN);
            break;
        case 1: sl_mpack_read_uint(&r, UINT64_MAX, &out->size); break;
        case 2:
            sl_mpack_read_uint(&r, UINT32_MAX, &v);
            out->chunk_len = (uint32_t)v;
            if (!r.err && v == 0)
                sl_mpack_reader_fail(&r, SL_EPROTO);
            break;
        case 3: {
            uint32_t count;
            if (sl_mpack_read_array(&r, SL_BLOB_MAX_CHUNKS, &count))
                break;
            if ((size_t)count * (SL_BLAKE2B_LEN + 2) > sl_mpack_reader_left(&r)) {
                sl_mpack_reader_fail(&r, SL_ETRUNC);
                break;
            }
            if (count && !(out->chunks = sl_malloc((size_t)count * SL_BLAKE2B_LEN))) {
                sl_mpack_reader_fail(&r, SL_ENOMEM);
                break;
            }
            out->chunk_count = count;
            for (uint32_t i = 0; i < count && !r.err; i++)
                if (!sl_mpack_read_bin(&r, SL_BLAKE2B_LEN, SL_BLAKE2B_LEN, &p, &n))
                    memcpy(out->chunks[i], p, SL_BLAKE2B_LEN);
            break;
        }
        default: sl_mpack_skip(&r, 2); break;
        }
    }
    sl_mpack_reader_end(&r);
    if (!r.err && seen != 0xf)
        sl_mpack_reader_fail(&r, SL_EPROTO);
    /* the chunk count must be what size and chunk_len say */
    if (!r.err && out->chunk_count != (out->size + out->chunk_len - 1) / out->chunk_len)
        sl_mpack_reader_fail(&r, SL_EPROTO);
    if (r.err) {
        sl_blob_manifest_fini(out);
        return r.err;
    }
    return SL_OK;
}

static uint64_t blob_round(const uint8_t hash[SL_BLAKE2B_LEN]) {
    uint64_t r = 0;
    for (int i = 0; i < 8; i++)
        r = r << 8 | hash[i];
    return r;
}

size_t sl_blob_place(const uint8_t hash[SL_BLAKE2B_LEN], const char *const *names, size_t n,
                     size_t r, size_t *out) {
    uint64_t round = blob_round(hash);
    size_t k = 0;
    uint64_t best_w[16];
    if (r > 16)
        r = 16;
    for (size_t i = 0; i < n; i++) {
        uint64_t w = sl_hrw_weight(names[i], strlen(names[i]), round);
        /* insert into the top-r list, highest first (ties by index) */
        size_t j = k < r ? k++ : r;
        while (j > 0 && best_w[j - 1] < w) {
            if (j < r) {
                best_w[j] = best_w[j - 1];
                out[j] = out[j - 1];
            }
            j--;
        }
        if (j < r) {
            best_w[j] = w;
            out[j] = i;
        }
    }
    return k;
}

sl_err sl_blob_plan(const uint8_t hash[SL_BLAKE2B_LEN], const char *const *names, const bool *holds,
                    size_t n, size_t r, sl_blob_plan_t *out) {
    memset(out, 0, sizeof *out);
    if (r == 0 || r > 16)
        return SL_EINVAL;
    size_t placed[16];
    size_t k = sl_blob_place(hash, names, n, r, placed);
    bool have_source = false;
    for (size_t i = 0; i < n; i++)
        if (holds[i]) {
            out->source = i;
            have_source = true;
            break;
        }
    out->lost = !have_source;
    bool all_placed_hold = true;
    for (size_t j = 0; j < k; j++) {
        if (holds[placed[j]])
            continue;
        all_placed_hold = false;
        if (have_source && planted_bug != 1)
            out->fetch[out->fetch_count++] = placed[j];
    }
    if (all_placed_hold)
        for (size_t i = 0; i < n && out->drop_count < 16; i++) {
            bool is_placed = false;
            for (size_t j = 0; j < k; j++)
                is_placed |= placed[j] == i;
            if (holds[i] && !is_placed)
                out->drop[out->drop_count++] = i;
        }
    return SL_OK;
}

sl_err sl_blob_verify(const void *data, size_t len, const uint8_t hash[SL_BLAKE2B_LEN]) {
    uint8_t got[SL_BLAKE2B_LEN];
    sl_blake2b(data, len, got);
    return memcmp(got, hash, SL_BLAKE2B_LEN) == 0 ? SL_OK : SL_ECORRUPT;
}

sl_err sl_blob_sync(sl_disk_t *disk, const sl_blob_manifest_t *m) {
    char hex[2 * SL_BLAKE2B_LEN + 1];
    sl_err err = SL_OK;
    for (uint32_t i = 0; !err && i < m->chunk_count; i++) {
        sl_hex(m->chunks[i], SL_BLAKE2B_LEN, hex);
        err = sl_disk_chunk_sync(disk, hex);
    }
    return err ? err : sl_disk_chunk_sync_dirs(disk);
}

sl_err sl_blob_write(sl_disk_t *disk, const void *data, size_t len, uint32_t chunk_len,
                     sl_blob_manifest_t *out) {
    sl_err err = sl_blob_manifest_build(data, len, chunk_len, out);
    const uint8_t *p = data;
    for (uint32_t i = 0; !err && i < out->chunk_count; i++) {
        char hex[2 * SL_BLAKE2B_LEN + 1];
        sl_hex(out->chunks[i], SL_BLAKE2B_LEN, hex);
        size_t off = (size_t)i * out->chunk_len;
        size_t n = len - off < out->chunk_len ? len - off : out->chunk_len;
        err = sl_disk_chunk_write(disk, hex, p + off, n);
    }
    if (!err)
        err = sl_blob_sync(disk, out); /* once for the blob, not per chunk */
    if (err)
        sl_blob_manifest_fini(out);
    return err;
}

sl_err sl_blob_write_file(sl_disk_t *disk, const char *path, uint32_t chunk_len,
                          uint32_t max_chunks, sl_blob_manifest_t *out) {
    memset(out, 0, sizeof *out);
    if (!chunk_len)
        chunk_len = SL_BLOB_CHUNK_LEN;
    sl_disk_in_t *in = NULL;
    sl_blob_builder_t *b = NULL;
    uint8_t *buf = NULL;
    sl_err err = sl_disk_in_open(path, &in);
    if (err)
        return err;
    /* refuse a file too large before writing any of it */
    if ((sl_disk_in_size(in) + chunk_len - 1) / chunk_len > max_chunks)
        err = SL_ETOOBIG;
    else if (!(buf = sl_malloc(chunk_len)))
        err = SL_ENOMEM;
    else
        err = sl_blob_builder_new(chunk_len, &b);
    /* one chunk in memory at a time */
    for (;;) {
        size_t n = 0;
        uint8_t h[SL_BLAKE2B_LEN];
        char hex[2 * SL_BLAKE2B_LEN + 1];
        if (err || (err = sl_disk_in_read(in, buf, chunk_len, &n)) || n == 0)
            break;
        if ((err = sl_blob_builder_add(b, buf, n, h)))
            break;
        sl_hex(h, SL_BLAKE2B_LEN, hex);
        if ((err = sl_disk_chunk_write(disk, hex, buf, n)))
            break;
        if (sl_blob_builder_count(b) > max_chunks) /* the file grew while read */
            err = SL_ETOOBIG;
    }
    if (!err && (err = sl_blob_builder_finish(b, out)) == SL_OK &&
        (err = sl_blob_sync(disk, out)) != SL_OK)
        sl_blob_manifest_fini(out);
    sl_blob_builder_destroy(&b);
    sl_free(buf);
    sl_disk_in_close(&in);
    return err;
}

sl_err sl_blob_read(sl_disk_t *disk, const sl_blob_manifest_t *m, uint8_t **data, size_t *len) {
    *data = NULL;
    *len = 0;
    if (m->size > (uint64_t)m->chunk_count * m->chunk_len)
        return SL_EPROTO;
    uint8_t *buf = sl_malloc(m->size ? m->size : 1);
    if (!buf)
        return SL_ENOMEM;
    sl_err err = SL_OK;
    char hex[2 * SL_BLAKE2B_LEN + 1];
    for (uint32_t i = 0; !err && i < m->chunk_count; i++) {
        uint8_t *c;
        size_t n;
        sl_hex(m->chunks[i], SL_BLAKE2B_LEN, hex);
        if ((err = sl_disk_chunk_get(disk, hex, &c, &n)))
            break;
        size_t off = (size_t)i * m->chunk_len;
        size_t want = m->size - off < m->chunk_len ? m->size - off : m->chunk_len;
        if (n != want || sl_blob_verify(c, n, m->chunks[i]) != SL_OK) {
            sl_log(SL_LOG_ERR, "BLOB-CORRUPT", "chunk %s does not match its hash: refusing it", hex);
            err = SL_ECORRUPT;
        } else {
            memcpy(buf + off, c, n);
        }
        sl_free(c);
    }
    if (!err && sl_blob_verify(buf, m->size, m->hash) != SL_OK) {
        sl_hex(m->hash, SL_BLAKE2B_LEN, hex);
        sl_log(SL_LOG_ERR, "BLOB-CORRUPT", "blob %s does not match its hash", hex);
        err = SL_ECORRUPT;
    }
    if (err) {
        sl_free(buf);
        return err;
    }
    *data = buf;
    *len = m->size;
    return SL_OK;
}

/* ---- incremental building ---- */

struct sl_blob_builder {
    crypto_generichash_state whole; /* hash of everything added (64-byte aligned) */
    void *block;                    /* the allocation holding this struct */
    uint32_t chunk_len;             /* bytes per chunk */
    uint32_t count;                 /* chunks added */
    uint32_t cap;                   /* entries allocated in chunks */
    uint64_t size;                  /* bytes added */
    bool short_seen;                /* a chunk shorter than chunk_len was added */
    bool spent;                     /* finish was called */
    uint8_t (*chunks)[SL_BLAKE2B_LEN]; /* each chunk's hash */
};

sl_err sl_blob_builder_new(uint32_t chunk_len, sl_blob_builder_t **out) {
    *out = NULL;
    /* the hash state needs 64-byte alignment, more than an allocator
       promises: place the struct at the first such address in the block */
    size_t align = _Alignof(sl_blob_builder_t);
    void *block = sl_calloc(1, sizeof(sl_blob_builder_t) + align - 1);
    if (!block)
        return SL_ENOMEM;
    sl_blob_builder_t *b = (void *)(((uintptr_t)block + align - 1) & ~(uintptr_t)(align - 1));
    b->block = block;
    b->chunk_len = chunk_len ? chunk_len : SL_BLOB_CHUNK_LEN;
    crypto_generichash_init(&b->whole, NULL, 0, SL_BLAKE2B_LEN);
    *out = b;
    return SL_OK;
}

void sl_blob_builder_destroy(sl_blob_builder_t **pb) {
    sl_blob_builder_t *b = pb ? *pb : NULL;
    if (!b)
        return;
    sl_free(b->chunks);
    sl_free(b->block);
    *pb = NULL;
}

sl_err sl_blob_builder_add(sl_blob_builder_t *b, const void *data, size_t len,
                           uint8_t chunk_hash[SL_BLAKE2B_LEN]) {
    if (b->spent || b->short_seen || len == 0 || len > b->chunk_len)
        return SL_EINVAL;
    uint8_t h[SL_BLAKE2B_LEN];
    sl_blake2b(data, len, h);
    sl_err err = sl_blob_builder_add_hashed(b, data, len, h);
    if (!err && chunk_hash)
        memcpy(chunk_hash, h, SL_BLAKE2B_LEN);
    return err;
}

sl_err sl_blob_builder_add_hashed(sl_blob_builder_t *b, const void *data, size_t len,
                                  const uint8_t chunk_hash[SL_BLAKE2B_LEN]) {
    if (b->spent || b->short_seen || len == 0 || len > b->chunk_len)
        return SL_EINVAL;
    if (b->count == SL_BLOB_MAX_CHUNKS)
        return SL_ETOOBIG;
    if (b->count == b->cap) {
        uint32_t cap = b->cap ? b->cap * 2 : 64;
        void *n = sl_realloc(b->chunks, (size_t)cap * SL_BLAKE2B_LEN);
        if (!n)
            return SL_ENOMEM;
        b->chunks = n;
        b->cap = cap;
    }
    memcpy(b->chunks[b->count], chunk_hash, SL_BLAKE2B_LEN);
    crypto_generichash_update(&b->whole, data, len);
    b->count++;
    b->size += len;
    b->short_seen = len < b->chunk_len;
    return SL_OK;
}

uint32_t sl_blob_builder_count(const sl_blob_builder_t *b) { return b->count; }

sl_err sl_blob_builder_finish(sl_blob_builder_t *b, sl_blob_manifest_t *out) {
    if (b->spent)
        return SL_ESTATE; /* `out` untouched */
    memset(out, 0, sizeof *out);
    b->spent = true;
    crypto_generichash_final(&b->whole, out->hash, SL_BLAKE2B_LEN);
    out->size = b->size;
    out->chunk_len = b->chunk_len;
    out->chunk_count = b->count;
    out->chunks = b->chunks; /* handed over */
    b->chunks = NULL;
    b->cap = 0;
    return SL_OK;
}

sl_err sl_blob_manifest_copy(const sl_blob_manifest_t *m, sl_blob_manifest_t *out) {
    *out = *m;
    out->chunks = NULL;
    if (m->chunk_count) {
        out->chunks = sl_malloc((size_t)m->chunk_count * SL_BLAKE2B_LEN);
        if (!out->chunks)
            return SL_ENOMEM;
        memcpy(out->chunks, m->chunks, (size_t)m->chunk_count * SL_BLAKE2B_LEN);
    }
    return SL_OK;
}
