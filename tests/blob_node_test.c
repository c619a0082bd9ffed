/* The blob service inside the daemon's loop (src/blob/blob_node.c): three
 * peers on loopback in one process, stepped in turn, R = 2. A put from a
 * buffer settles on exactly the two placed peers; a peer without a copy
 * gets it to a file through the completion callback; an unknown hash is
 * refused; when a holder stops, the survivors restore two copies; when it
 * comes back with its copy, the extra copy outside the placement goes; a
 * holder that sends bad bytes is refused (counted) and the blob arrives
 * from the honest one. A blob 16x the memory bound is put from a file,
 * replicated and written out to files with the heap never more than a few
 * chunks above where it started (counted through the allocation hook).
 * Copies fetched for readers on a peer that does not hold the blob are a
 * cache: least recently used out past its size, never a chunk that a blob
 * held there shares. */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "starling/blob_node.h"
#include "starling/msg.h"
#include "starling/peer.h"
#include "starling/platform.h"
#include "starling/store_node.h"
#include "testlib.h"

#define DEADLINE_MS 20000
#define NPEERS 4 /* the fourth is a bare node in test_corrupt_source */

static char tmpdir[256];
static uint64_t cache_max_bytes; /* the blob services' cache size (0: default) */
static const char *dir_tag = "";  /* before a peer's directory names: a test's own */

/* Live heap bytes through the allocation hook (a size header before each
 * block) and their high-water mark since peak_reset. */
#define HDR 16
static _Atomic int64_t live_bytes, peak_bytes;

static void *track_realloc(void *ctx, void *ptr, size_t len) {
    (void)ctx;
    uint8_t *base = ptr ? (uint8_t *)ptr - HDR : NULL;
    size_t old = 0;
    if (base)
        memcpy(&old, base, sizeof old);
    if (len == 0) {
        free(base);
        atomic_fetch_sub(&live_bytes, (int64_t)old);
        return NULL;
    }
    uint8_t *n = realloc(base, len + HDR);
    if (!n)
        return NULL;
    memcpy(n, &len, sizeof len);
    int64_t now = atomic_fetch_add(&live_bytes, (int64_t)len - (int64_t)old) + (int64_t)len - (int64_t)old;
    int64_t peak = atomic_load(&peak_bytes);
    while (now > peak && !atomic_compare_exchange_weak(&peak_bytes, &peak, now)) {
    }
    return n + HDR;
}

static void peak_reset(void) { atomic_store(&peak_bytes, atomic_load(&live_bytes)); }

static uint64_t ms_since(uint64_t t0) { return (sl_plat_now_ns() - t0) / 1000000ull; }

typedef struct {
    sl_node_t *node;        /* the loop */
    sl_store_node_t *store; /* the store module */
    sl_blob_node_t *blobs;  /* the blob service */
    const char *name;       /* member name */
} peer_t;

static void start(peer_t *p, const char *name, const char *seed) {
    char data[512], sdir[600], bdir[600];
    snprintf(data, sizeof data, "%s/%s%s", tmpdir, dir_tag, name);
    snprintf(sdir, sizeof sdir, "%s/%s%s-store", tmpdir, dir_tag, name);
    snprintf(bdir, sizeof bdir, "%s/%s%s-blob", tmpdir, dir_tag, name);
    const char *seeds[1] = {seed};
    sl_node_config_t cfg = {.name = name, .listen = "tcp://127.0.0.1:0", .data_dir = data,
                            .seeds = seeds, .seed_count = seed ? 1 : 0, .leave_wait_ms = 100};
    sl_test_swim_timing(&cfg.swim);
    p->name = name;
    CHECK_OK(sl_node_new(&cfg, &p->node));
    sl_store_node_config_t scfg = {.dir = sdir, .sync_ms = 50};
    if (p->node)
        CHECK_OK(sl_store_node_attach(p->node, &scfg, &p->store));
    sl_blob_node_config_t bcfg = {.dir = bdir, .reconcile_ms = 200, .timeout_ms = 1000,
                                  .cache_max_bytes = cache_max_bytes, .cache_idle_ms = 1};
    if (p->store)
        CHECK_OK(sl_blob_node_attach(p->node, p->store, &bcfg, &p->blobs));
}

static void stop(peer_t *p) {
    sl_node_destroy(&p->node);
    sl_blob_node_destroy(&p->blobs);
    sl_store_node_destroy(&p->store);
    CHECK(p->blobs == NULL);
}

static void step(peer_t *ps, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ps[i].node)
            sl_node_step(ps[i].node, 1);
}

#define WAIT_FOR(cond)                                                                             \
    do {                                                                                           \
        uint64_t t0_ = sl_plat_now_ns();                                                           \
        while (!(cond) && ms_since(t0_) < DEADLINE_MS)                                             \
            step(ps, NPEERS);                                                                      \
        CHECK_MSG(cond, "timed out waiting for %s", #cond);                                        \
    } while (0)

/* Does `viewer` record `who` as holder of `hash`? */
static bool holder(peer_t *viewer, peer_t *who, const uint8_t *hash) {
    char key[256], hex[65];
    sl_hex(hash, SL_BLAKE2B_LEN, hex);
    int n = snprintf(key, sizeof key, "blob/%s/h/%s", hex, who->name);
    const uint8_t *v;
    size_t vl;
    return sl_store_get(sl_store_node_store(viewer->store), key, (size_t)n, &v, &vl) == SL_OK;
}

typedef struct {
    int calls;     /* times called */
    sl_err err;    /* last outcome */
} done_t;

static void on_done(void *ctx, sl_err err, const uint8_t hash[SL_BLAKE2B_LEN]) {
    (void)hash;
    done_t *d = ctx;
    d->calls++;
    d->err = err;
}

static bool alive_all(peer_t *ps, size_t want) {
    for (int i = 0; i < NPEERS; i++)
        if (ps[i].node && sl_swim_alive_count(sl_node_swim(ps[i].node)) != want)
            return false;
    return true;
}

/* Three daemons a, b, c that see each other; false if one did not start. */
static const char *names[NPEERS] = {"a", "b", "c"};

static bool start_three(peer_t *ps) {
    start(&ps[0], names[0], NULL);
    if (!ps[0].blobs)
        return false;
    for (int i = 1; i < 3; i++)
        start(&ps[i], names[i], sl_node_addr(ps[0].node));
    WAIT_FOR(alive_all(ps, 3));
    return true;
}

static void test_put_get_rereplicate(void) {
    peer_t ps[NPEERS] = {{0}};
    if (!start_three(ps))
        return;

    size_t len = 2 * SL_BLOB_CHUNK_LEN + 12345;
    uint8_t *data = malloc(len);
    for (size_t i = 0; i < len; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 13);
    uint8_t h[SL_BLAKE2B_LEN];
    CHECK_OK(sl_blob_node_put(ps[0].blobs, data, len, h));
    sl_blob_manifest_t m;
    CHECK_OK(sl_blob_manifest_build(data, len, 0, &m));
    CHECK(!memcmp(m.hash, h, SL_BLAKE2B_LEN));
    sl_blob_manifest_fini(&m);

    /* durable here at once; two alive copies soon */
    CHECK(sl_blob_node_holders(ps[0].blobs, h) >= 1);
    WAIT_FOR(sl_blob_node_holders(ps[0].blobs, h) >= 2);
    /* placement settles on the two placed peers, as every peer sees it */
    size_t placed[2];
    CHECK_INT(sl_blob_place(h, names, 3, 2, placed), 2);
    peer_t *p0 = &ps[placed[0]], *p1 = &ps[placed[1]];
    peer_t *other = &ps[3 - placed[0] - placed[1]];
    for (int i = 0; i < 3; i++)
        WAIT_FOR(holder(&ps[i], p0, h) && holder(&ps[i], p1, h) && !holder(&ps[i], other, h));

    /* the third peer gets it to a file: the callback says when */
    char path[600];
    snprintf(path, sizeof path, "%s/out.bin", tmpdir);
    done_t d = {0, SL_EINTERNAL};
    CHECK_OK(sl_blob_node_get_file(other->blobs, h, path, on_done, &d));
    WAIT_FOR(d.calls == 1);
    CHECK_INT(d.err, SL_OK);
    uint8_t *got;
    size_t got_len;
    CHECK_OK(sl_plat_read_file(path, len + 1, &got, &got_len));
    CHECK(got_len == len && !memcmp(got, data, len));
    sl_free(got);
    /* ... and reads it in memory too, verified */
    CHECK_OK(sl_blob_node_read(other->blobs, h, &got, &got_len));
    CHECK(got_len == len && !memcmp(got, data, len));
    sl_free(got);
    /* it is a cached copy, not a holder */
    CHECK(!holder(other, other, h));

    /* an unknown blob */
    uint8_t nope[SL_BLAKE2B_LEN];
    memset(nope, 0xee, sizeof nope);
    CHECK_ERR(sl_blob_node_fetch(other->blobs, nope, on_done, &d), SL_ENOTFOUND);
    CHECK_INT(d.calls, 1);

    sl_blob_node_stats_t st;
    sl_blob_node_stats(ps[0].blobs, &st);
    CHECK_INT(st.puts, 1);
    CHECK_INT(st.corrupt, 0);
    uint64_t replicated = 0;
    for (int i = 0; i < 3; i++) {
        sl_blob_node_stats(ps[i].blobs, &st);
        replicated += st.replicated;
    }
    CHECK(replicated >= 1);

    /* a holder stops for good: the two alive peers both hold it again */
    stop(p0);
    WAIT_FOR(alive_all(ps, 2));
    WAIT_FOR(holder(other, other, h) && holder(other, p1, h) && holder(p1, other, h));
    CHECK_OK(sl_blob_node_read(other->blobs, h, &got, &got_len));
    CHECK(got_len == len && !memcmp(got, data, len));
    sl_free(got);
    CHECK_INT(sl_blob_node_holders(other->blobs, h), 2);

    /* the stopped holder comes back with its copy: three holders, and the
     * one outside the placement drops its extra copy */
    start(p0, names[placed[0]], sl_node_addr(p1->node));
    WAIT_FOR(alive_all(ps, 3));
    WAIT_FOR(holder(p1, p0, h) && holder(p1, p1, h) && !holder(p1, other, h) &&
             holder(other, p0, h) && !holder(other, other, h));
    uint64_t dropped = 0;
    for (int i = 0; i < 3; i++) {
        sl_blob_node_stats(ps[i].blobs, &st);
        dropped += st.dropped;
    }
    CHECK(dropped >= 1);
    CHECK_OK(sl_blob_node_read(p0->blobs, h, &got, &got_len));
    CHECK(got_len == len && !memcmp(got, data, len));
    sl_free(got);
    free(data);
    for (int i = 0; i < NPEERS; i++)
        stop(&ps[i]);
}

static bool has_manifest(peer_t *viewer, const uint8_t *hash) {
    char key[80], hex[65];
    sl_hex(hash, SL_BLAKE2B_LEN, hex);
    int n = snprintf(key, sizeof key, "blob/%s", hex);
    const uint8_t *v;
    size_t vl;
    return sl_store_get(sl_store_node_store(viewer->store), key, (size_t)n, &v, &vl) == SL_OK;
}

static bool any_holder(peer_t *ps, const uint8_t *hash) {
    for (int i = 0; i < NPEERS; i++)
        for (int k = 0; ps[i].store && k < NPEERS; k++)
            if (ps[k].name && holder(&ps[i], &ps[k], hash))
                return true;
    return false;
}

/* Deleting a blob: every holder drops its copy, then the manifest goes
 * everywhere; a blob that shares a chunk with it stays readable. */
static void test_delete(void) {
    peer_t ps[NPEERS] = {{0}};
    if (!start_three(ps))
        return;
    size_t len = SL_BLOB_CHUNK_LEN + 999;
    uint8_t *a = malloc(len), *b = malloc(len);
    for (size_t i = 0; i < len; i++)
        a[i] = b[i] = (uint8_t)(i * 2654435761u >> 11);
    b[len - 1] ^= 1; /* the same first chunk */
    uint8_t ha[SL_BLAKE2B_LEN], hb[SL_BLAKE2B_LEN];
    CHECK_OK(sl_blob_node_put(ps[0].blobs, a, len, ha));
    CHECK_OK(sl_blob_node_put(ps[0].blobs, b, len, hb));
    WAIT_FOR(sl_blob_node_holders(ps[0].blobs, ha) >= 2 && sl_blob_node_holders(ps[0].blobs, hb) >= 2);
    CHECK_INT(sl_blob_node_r(ps[0].blobs), 2);

    CHECK_OK(sl_blob_node_delete(ps[1].blobs, ha)); /* from any peer */
    WAIT_FOR(!any_holder(ps, ha));
    WAIT_FOR(!has_manifest(&ps[0], ha) && !has_manifest(&ps[1], ha) && !has_manifest(&ps[2], ha));
    uint8_t nope[SL_BLAKE2B_LEN];
    memset(nope, 0xee, sizeof nope);
    CHECK_ERR(sl_blob_node_delete(ps[0].blobs, nope), SL_ENOTFOUND);
    /* the other blob, sharing a chunk, is whole wherever it is held */
    for (int i = 0; i < 3; i++) {
        if (!holder(&ps[i], &ps[i], hb))
            continue;
        uint8_t *got;
        size_t got_len;
        CHECK_OK(sl_blob_node_read(ps[i].blobs, hb, &got, &got_len));
        CHECK(got_len == len && !memcmp(got, b, len));
        sl_free(got);
    }
    CHECK_INT(sl_blob_node_holders(ps[0].blobs, hb), 2);
    free(a);
    free(b);
    for (int i = 0; i < NPEERS; i++)
        stop(&ps[i]);
}

/* A holder that answers every GET with bytes that do not match: the
 * receiving daemon refuses them (counted as corrupt), asks the honest
 * holder, and the blob arrives intact. */
typedef struct {
    sl_node_t *node;         /* the liar (a bare node: no store, no blob service) */
    const uint8_t *data;     /* the blob it lies about */
    uint32_t chunk_len;      /* its chunk size */
    size_t len;              /* its size */
    int answered;            /* GETs answered with bad bytes */
} liar_t;

static void liar_msg(void *ctx, sl_node_t *node, uint8_t type, const uint8_t *body, size_t len,
                     uint64_t now_ns) {
    (void)now_ns;
    liar_t *l = ctx;
    sl_blob_msg_t g;
    if (type != SL_BLOB_MSG_GET || sl_blob_msg_decode(type, body, len, &g) != SL_OK)
        return;
    size_t off = (size_t)g.index * l->chunk_len;
    size_t n = l->len - off < l->chunk_len ? l->len - off : l->chunk_len;
    uint8_t *bad = malloc(n);
    memcpy(bad, l->data + off, n);
    bad[n / 3] ^= 0x40; /* right length, wrong bytes */
    sl_blob_msg_t c = {.type = SL_BLOB_MSG_CHUNK, .xfer = g.xfer, .index = g.index,
                       .status = SL_BLOB_CHUNK_OK, .data = bad, .data_len = n};
    memcpy(c.chunk, g.chunk, SL_BLAKE2B_LEN);
    char addr[SL_BLOB_XFER_MAX_ADDR + 1];
    memcpy(addr, g.addr, g.addr_len);
    addr[g.addr_len] = 0;
    uint8_t *out;
    size_t out_len;
    if (sl_blob_msg_encode(&c, &out, &out_len) == SL_OK) {
        if (sl_node_send(node, addr, SL_BLOB_MSG_CHUNK, out, out_len) == SL_OK)
            l->answered++;
        sl_free(out);
    }
    free(bad);
}

static void test_corrupt_source(void) {
    peer_t ps[NPEERS] = {{0}};
    if (!start_three(ps))
        return;
    liar_t liar = {0};
    char data_dir[600];
    snprintf(data_dir, sizeof data_dir, "%s/liar", tmpdir);
    const char *seeds[1] = {sl_node_addr(ps[0].node)};
    sl_node_config_t cfg = {.name = "liar", .listen = "tcp://127.0.0.1:0", .data_dir = data_dir,
                            .seeds = seeds, .seed_count = 1, .leave_wait_ms = 100};
    sl_test_swim_timing(&cfg.swim);
    CHECK_OK(sl_node_new(&cfg, &liar.node));
    if (!liar.node)
        return;
    CHECK_OK(sl_node_route_register(liar.node, SL_BLOB_MSG_GET, SL_BLOB_MSG_OFFER, liar_msg, &liar));
    ps[3].node = liar.node; /* stepped with the others; no modules */
    WAIT_FOR(alive_all(ps, 4));

    size_t len = 3 * SL_BLOB_CHUNK_LEN;
    uint8_t *data = malloc(len);
    for (size_t i = 0; i < len; i++)
        data[i] = (uint8_t)(i * 40503u >> 7);
    liar.data = data;
    liar.len = len;
    liar.chunk_len = SL_BLOB_CHUNK_LEN;
    uint8_t h[SL_BLAKE2B_LEN];
    CHECK_OK(sl_blob_node_put(ps[0].blobs, data, len, h));
    /* the liar claims a copy (written on its behalf: it has no store) */
    char key[256], hex[65];
    sl_hex(h, SL_BLAKE2B_LEN, hex);
    int kn = snprintf(key, sizeof key, "blob/%s/h/liar", hex);
    CHECK_OK(sl_store_node_put(ps[0].store, key, (size_t)kn, "1", 1));
    /* a real peer outside the placement: once settled it has no copy, and
     * it sees the liar and an honest peer as holders */
    static const char *all[4] = {"a", "b", "c", "liar"};
    size_t placed[2];
    CHECK_INT(sl_blob_place(h, all, 4, 2, placed), 2);
    peer_t *x = NULL;
    for (int i = 0; i < 3 && !x; i++)
        if ((size_t)i != placed[0] && (size_t)i != placed[1])
            x = &ps[i];
    peer_t liar_peer = {.name = "liar"};
    WAIT_FOR(!holder(x, x, h) && holder(x, &liar_peer, h) && sl_blob_node_holders(x->blobs, h) >= 2);
    char path[600];
    snprintf(path, sizeof path, "%s/liar-out.bin", tmpdir);
    done_t d = {0, SL_EINTERNAL};
    sl_blob_node_stats_t before;
    sl_blob_node_stats(x->blobs, &before);
    CHECK_OK(sl_blob_node_get_file(x->blobs, h, path, on_done, &d));
    WAIT_FOR(d.calls == 1);
    CHECK_INT(d.err, SL_OK);
    uint8_t *got;
    size_t got_len;
    CHECK_OK(sl_plat_read_file(path, len + 1, &got, &got_len));
    CHECK(got_len == len && !memcmp(got, data, len));
    sl_free(got);
    sl_blob_node_stats_t after;
    sl_blob_node_stats(x->blobs, &after);
    /* chunks are spread over the holders, so the liar was asked at least
     * once, and its bytes were refused and counted */
    CHECK(liar.answered >= 1);
    CHECK(after.corrupt >= before.corrupt + (uint64_t)liar.answered);
    CHECK_INT(after.chunks_fetched - before.chunks_fetched, 3);
    free(data);
    for (int i = 0; i < 3; i++)
        stop(&ps[i]);
    sl_node_destroy(&liar.node);
}

static int tmp_files(void);

/* A manifest whose chunks are all here and good but do not make up its
 * hash (written by a hostile or broken peer): the whole check refuses it,
 * counted, after a second pass that checks each chunk finds none bad, so
 * the chunks another blob uses stay. */
static void test_bad_manifest(void) {
    peer_t ps[NPEERS] = {{0}};
    if (!start_three(ps))
        return;
    size_t len = 2 * SL_BLOB_CHUNK_LEN;
    uint8_t *data = malloc(len);
    for (size_t i = 0; i < len; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 9);
    uint8_t h[SL_BLAKE2B_LEN];
    CHECK_OK(sl_blob_node_put(ps[0].blobs, data, len, h));
    sl_blob_manifest_t m;
    CHECK_OK(sl_blob_manifest_build(data, len, 0, &m));
    memcpy(m.chunks[0], m.chunks[1], SL_BLAKE2B_LEN); /* chunk 1 twice: not this hash */
    memset(m.hash, 0xab, SL_BLAKE2B_LEN);
    uint8_t *enc;
    size_t enc_len;
    CHECK_OK(sl_blob_manifest_encode(&m, &enc, &enc_len));
    char key[80], hex[65];
    sl_hex(m.hash, SL_BLAKE2B_LEN, hex);
    int kn = snprintf(key, sizeof key, "blob/%s", hex);
    CHECK_OK(sl_store_node_put(ps[0].store, key, (size_t)kn, enc, enc_len));
    sl_free(enc);
    sl_blob_node_stats_t before, after;
    sl_blob_node_stats(ps[0].blobs, &before);
    done_t d = {0, SL_EINTERNAL};
    CHECK_OK(sl_blob_node_fetch(ps[0].blobs, m.hash, on_done, &d));
    WAIT_FOR(d.calls == 1);
    CHECK_INT(d.err, SL_ECORRUPT);
    sl_blob_node_stats(ps[0].blobs, &after);
    CHECK_INT(after.corrupt, before.corrupt + 1);
    CHECK_INT(after.cache_blobs, before.cache_blobs);
    /* get_file of it: the same error, and no output file, whole or partial */
    char out[600];
    snprintf(out, sizeof out, "%s/bad-manifest.bin", tmpdir);
    d = (done_t){0, SL_EINTERNAL};
    CHECK_OK(sl_blob_node_get_file(ps[0].blobs, m.hash, out, on_done, &d));
    WAIT_FOR(d.calls == 1);
    CHECK_INT(d.err, SL_ECORRUPT);
    CHECK(access(out, F_OK) != 0);
    CHECK_INT(tmp_files(), 0);
    uint8_t *got;
    size_t got_len;
    CHECK_OK(sl_blob_node_read(ps[0].blobs, h, &got, &got_len)); /* the real blob is intact */
    CHECK(got_len == len && !memcmp(got, data, len));
    sl_free(got);
    sl_blob_manifest_fini(&m);
    free(data);
    for (int i = 0; i < NPEERS; i++)
        stop(&ps[i]);
}

/* ---- streaming: memory stays a few chunks whatever the blob's size ---- */

#define BIG_LEN (64u * SL_BLOB_CHUNK_LEN + 4321) /* 64 MiB and a bit */
#define MEM_BOUND (4u * SL_BLOB_CHUNK_LEN)        /* heap growth allowed: a few chunks */

/* Chunk i of the big blob, the same every time. */
static void big_chunk(uint32_t i, uint8_t *buf, size_t *len) {
    uint64_t off = (uint64_t)i * SL_BLOB_CHUNK_LEN;
    *len = BIG_LEN - off < SL_BLOB_CHUNK_LEN ? BIG_LEN - off : SL_BLOB_CHUNK_LEN;
    uint64_t x = 0x9e3779b97f4a7c15ull * (i + 1);
    for (size_t k = 0; k < *len; k += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(buf + k, &x, *len - k < 8 ? *len - k : 8);
    }
}

/* Does the file at `path` hold exactly the big blob? (read a chunk at a time) */
static bool is_big(const char *path, uint8_t *a, uint8_t *b) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    bool same = true;
    for (uint32_t i = 0; same && (uint64_t)i * SL_BLOB_CHUNK_LEN < BIG_LEN; i++) {
        size_t n;
        big_chunk(i, a, &n);
        same = fread(b, 1, SL_BLOB_CHUNK_LEN, f) == n && !memcmp(a, b, n);
    }
    same = same && fgetc(f) == EOF;
    fclose(f);
    return same;
}

/* Leftover temporary files (NAME.tmp-*) in the test directory. */
static int tmp_files(void) {
    DIR *d = opendir(tmpdir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".tmp-") != NULL;
    if (d)
        closedir(d);
    return n;
}

static void test_stream_large(void) {
    peer_t ps[NPEERS] = {{0}};
    if (!start_three(ps))
        return;
    /* the source file, and its hash, a chunk at a time (buffers from libc,
       outside the count) */
    char src[600];
    snprintf(src, sizeof src, "%s/big.bin", tmpdir);
    uint8_t *buf = malloc(SL_BLOB_CHUNK_LEN), *buf2 = malloc(SL_BLOB_CHUNK_LEN);
    FILE *f = fopen(src, "wb");
    CHECK(f && buf && buf2);
    if (!f || !buf || !buf2)
        return;
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, SL_BLAKE2B_LEN);
    for (uint32_t i = 0; (uint64_t)i * SL_BLOB_CHUNK_LEN < BIG_LEN; i++) {
        size_t n;
        big_chunk(i, buf, &n);
        CHECK(fwrite(buf, 1, n, f) == n);
        crypto_generichash_update(&st, buf, n);
    }
    fclose(f);
    uint8_t want[SL_BLAKE2B_LEN], h[SL_BLAKE2B_LEN];
    crypto_generichash_final(&st, want, SL_BLAKE2B_LEN);

    int64_t base = atomic_load(&live_bytes);
    peak_reset();
    CHECK_OK(sl_blob_node_put_file(ps[0].blobs, src, h));
    CHECK(!memcmp(h, want, SL_BLAKE2B_LEN));
    int64_t put_peak = atomic_load(&peak_bytes) - base;
    /* replication: the placed peers pull it (chunks served by a holder) */
    size_t placed[2];
    CHECK_INT(sl_blob_place(h, names, 3, 2, placed), 2);
    peer_t *p0 = &ps[placed[0]], *p1 = &ps[placed[1]];
    peer_t *other = &ps[3 - placed[0] - placed[1]];
    for (int i = 0; i < 3; i++)
        WAIT_FOR(holder(&ps[i], p0, h) && holder(&ps[i], p1, h) && !holder(&ps[i], other, h));
    /* a get on a peer without a copy (fetch, then the copy out), and one
       on a holder (straight to the copy out) */
    char out[600], out2[600];
    snprintf(out, sizeof out, "%s/big-out.bin", tmpdir);
    snprintf(out2, sizeof out2, "%s/big-out2.bin", tmpdir);
    done_t d = {0, SL_EINTERNAL}, d2 = {0, SL_EINTERNAL};
    CHECK_OK(sl_blob_node_get_file(other->blobs, h, out, on_done, &d));
    WAIT_FOR(d.calls == 1);
    CHECK_INT(d.err, SL_OK);
    CHECK_OK(sl_blob_node_get_file(p1->blobs, h, out2, on_done, &d2));
    WAIT_FOR(d2.calls == 1);
    CHECK_INT(d2.err, SL_OK);
    int64_t peak = atomic_load(&peak_bytes) - base;
    printf("     heap growth: put_file %.1f MiB, with replication and two get_file %.1f MiB "
           "(blob %.1f MiB)\n", put_peak / 1048576.0, peak / 1048576.0, BIG_LEN / 1048576.0);
    CHECK_MSG(peak < (int64_t)MEM_BOUND, "heap grew by %lld bytes for a %u-byte blob",
              (long long)peak, BIG_LEN);
    CHECK(is_big(out, buf, buf2));
    CHECK(is_big(out2, buf, buf2));
    CHECK_INT(tmp_files(), 0);

    /* a chunk of the cached copy goes bad: the next get finds it while
       copying out, fetches it again, and the file is still right */
    char hex[65], path[800];
    sl_blob_manifest_t m;
    size_t n;
    big_chunk(7, buf, &n);
    sl_blake2b(buf, n, (uint8_t *)want);
    sl_hex(want, SL_BLAKE2B_LEN, hex);
    snprintf(path, sizeof path, "%s/%s-blob/blobs/%.2s/%s", tmpdir, other->name, hex, hex);
    FILE *g = fopen(path, "r+b");
    CHECK(g != NULL);
    if (g) {
        fseek(g, 1000, SEEK_SET);
        fputc(0x5a ^ buf[1000], g);
        fclose(g);
    }
    (void)m;
    unlink(out);
    d = (done_t){0, SL_EINTERNAL};
    CHECK_OK(sl_blob_node_get_file(other->blobs, h, out, on_done, &d));
    WAIT_FOR(d.calls == 1);
    CHECK_INT(d.err, SL_OK);
    CHECK(is_big(out, buf, buf2));
    sl_blob_node_stats_t bst;
    sl_blob_node_stats(other->blobs, &bst);
    CHECK(bst.corrupt >= 1);

    /* an output directory that does not exist: an error, nothing written */
    snprintf(path, sizeof path, "%s/no-such-dir/big.bin", tmpdir);
    d = (done_t){0, SL_EINTERNAL};
    CHECK_OK(sl_blob_node_get_file(other->blobs, h, path, on_done, &d));
    WAIT_FOR(d.calls == 1);
    CHECK(d.err != SL_OK);
    CHECK(access(path, F_OK) != 0);
    CHECK_INT(tmp_files(), 0);
    unlink(src);
    unlink(out);
    unlink(out2);
    free(buf);
    free(buf2);
    for (int i = 0; i < NPEERS; i++)
        stop(&ps[i]);
}

/* ---- the cache of copies fetched for readers ---- */

#define CACHE_MAX (5u * SL_BLOB_CHUNK_LEN) /* room for two 2-chunk copies, not three */

/* Two-chunk blobs: `first` and `second` name their chunks' contents. */
static void two_chunks(uint8_t *buf, uint32_t first, uint32_t second) {
    size_t n;
    big_chunk(first, buf, &n);
    big_chunk(second, buf + SL_BLOB_CHUNK_LEN, &n);
}

static bool chunk_here(const peer_t *p, const uint8_t *data) {
    uint8_t h[SL_BLAKE2B_LEN];
    char hex[65], path[800];
    sl_blake2b(data, SL_BLOB_CHUNK_LEN, h);
    sl_hex(h, SL_BLAKE2B_LEN, hex);
    snprintf(path, sizeof path, "%s/%s%s-blob/blobs/%.2s/%s", tmpdir, dir_tag, p->name, hex, hex);
    return access(path, F_OK) == 0;
}

static bool readable(peer_t *p, const uint8_t *hash, const uint8_t *data) {
    uint8_t *got;
    size_t len;
    if (sl_blob_node_read(p->blobs, hash, &got, &len) != SL_OK)
        return false;
    bool same = len == 2 * SL_BLOB_CHUNK_LEN && !memcmp(got, data, len);
    sl_free(got);
    return same;
}

static void fetch(peer_t *ps, peer_t *p, const uint8_t *hash) {
    done_t d = {0, SL_EINTERNAL};
    CHECK_OK(sl_blob_node_fetch(p->blobs, hash, on_done, &d));
    WAIT_FOR(d.calls == 1);
    CHECK_INT(d.err, SL_OK);
}

static void test_cache(void) {
    cache_max_bytes = CACHE_MAX;
    dir_tag = "cache-"; /* no copies left by the other tests */
    peer_t ps[NPEERS] = {{0}};
    if (!start_three(ps)) {
        cache_max_bytes = 0;
        dir_tag = "";
        return;
    }
    peer_t *c = &ps[2]; /* the reader */
    /* P: placed on c (held there); A, B, C: placed on a and b. A shares
       its first chunk with P. The second chunks are picked until the
       placement is the one wanted. */
    size_t len = 2 * SL_BLOB_CHUNK_LEN;
    uint8_t *blob[4], hash[4][SL_BLAKE2B_LEN];
    uint32_t second = 100;
    for (int k = 0; k < 4; k++) {
        blob[k] = malloc(len);
        for (;;) {
            two_chunks(blob[k], k == 1 ? 1000 : 1000 + (uint32_t)k, second++);
            sl_blake2b(blob[k], len, hash[k]);
            size_t placed[2];
            sl_blob_place(hash[k], names, 3, 2, placed);
            bool on_c = placed[0] == 2 || placed[1] == 2;
            if (on_c == (k == 0))
                break;
        }
    }
    const uint8_t *hp = hash[0], *ha = hash[1], *hb = hash[2], *hc = hash[3];
    two_chunks(blob[0], 1000, 0); /* P's first chunk: the same as A's */
    for (uint32_t s2 = 0;; s2++) { /* ... and P still placed on c */
        two_chunks(blob[0], 1000, 5000 + s2);
        sl_blake2b(blob[0], len, hash[0]);
        size_t placed[2];
        sl_blob_place(hash[0], names, 3, 2, placed);
        if (placed[0] == 2 || placed[1] == 2)
            break;
    }
    for (int k = 0; k < 4; k++) {
        uint8_t h[SL_BLAKE2B_LEN];
        CHECK_OK(sl_blob_node_put(ps[0].blobs, blob[k], len, h));
        CHECK(!memcmp(h, hash[k], SL_BLAKE2B_LEN));
    }
    /* settled: c holds P, and only P */
    WAIT_FOR(holder(c, c, hp) && sl_blob_node_holders(c->blobs, hp) == 2 &&
             sl_blob_node_holders(c->blobs, ha) == 2 && sl_blob_node_holders(c->blobs, hb) == 2 &&
             sl_blob_node_holders(c->blobs, hc) == 2 && !holder(c, c, ha) && !holder(c, c, hb) &&
             !holder(c, c, hc));
    sl_blob_node_stats_t st;
    sl_blob_node_stats(c->blobs, &st);
    CHECK_INT(st.cache_blobs, 0); /* a held blob is not cache */

    /* A and B fit; A is read again; C does not fit: B, the least recently
       used, goes, its chunks with it */
    fetch(ps, c, ha);
    fetch(ps, c, hb);
    CHECK(readable(c, ha, blob[1]));
    fetch(ps, c, hc);
    WAIT_FOR((sl_blob_node_stats(c->blobs, &st), st.evicted == 1));
    CHECK_INT(st.cache_blobs, 2);
    CHECK(st.cache_bytes == 2 * len && st.cache_bytes <= CACHE_MAX);
    CHECK(!chunk_here(c, blob[2]) && !chunk_here(c, blob[2] + SL_BLOB_CHUNK_LEN));
    CHECK(readable(c, ha, blob[1]) && readable(c, hc, blob[3]));

    /* C is read; B comes back: now A is the least recently used and goes,
       but its first chunk stays: P, which c holds, shares it */
    CHECK(readable(c, hc, blob[3]));
    fetch(ps, c, hb);
    WAIT_FOR((sl_blob_node_stats(c->blobs, &st), st.evicted == 2));
    CHECK(!chunk_here(c, blob[1] + SL_BLOB_CHUNK_LEN)); /* A's own chunk gone */
    CHECK(chunk_here(c, blob[1]));                      /* the shared one kept */
    CHECK(readable(c, hp, blob[0]) && holder(c, c, hp));
    CHECK(readable(c, hb, blob[2]) && readable(c, hc, blob[3]));
    CHECK_INT(st.cache_blobs, 2);
    /* A evicted is not here any more */
    CHECK_ERR(sl_blob_node_read(c->blobs, ha, &(uint8_t *){NULL}, &(size_t){0}), SL_ENOTFOUND);

    /* c restarts with a smaller cache: the copies an earlier run left are
       found, counted, and trimmed to fit; the held blob stays */
    stop(c);
    cache_max_bytes = 3u * SL_BLOB_CHUNK_LEN;
    start(c, names[2], sl_node_addr(ps[0].node));
    WAIT_FOR(alive_all(ps, 3));
    WAIT_FOR((sl_blob_node_stats(c->blobs, &st), st.evicted == 1));
    CHECK_INT(st.cache_blobs, 1);
    CHECK(st.cache_bytes == len);
    CHECK(readable(c, hp, blob[0]) && holder(c, c, hp));
    CHECK(readable(c, hb, blob[2]) != readable(c, hc, blob[3])); /* one of the two left */
    for (int k = 0; k < 4; k++)
        free(blob[k]);
    for (int i = 0; i < NPEERS; i++)
        stop(&ps[i]);
    cache_max_bytes = 0;
    dir_tag = "";
}

/* ---- chunks of a blob being put through the CLI ---- */

/* One `blob-chunk` control request, as peerctl blob put sends it, from
 * its own thread while the test steps the peers. */
typedef struct {
    const char *addr;         /* the peer */
    const uint8_t *data;      /* the chunk */
    size_t len;               /* its bytes */
    sl_err status;            /* the reply's status (SL_EIO: none) */
    _Atomic bool finished;    /* the thread is done */
} upload_t;

static void *upload_chunk(void *arg) {
    upload_t *u = arg;
    sl_net_client_t *c;
    u->status = SL_EIO;
    if (sl_net_client_new(u->addr, NULL, &c) == SL_OK) {
        uint8_t header[SL_WIRE_HEADER_LEN], *body;
        size_t body_len;
        sl_bytes_t a = {u->data, u->len};
        if (sl_msg_ctl_req_encode(7, "blob-chunk", &a, 1, header, &body, &body_len) == SL_OK) {
            uint8_t *rh, *rb;
            size_t rhl, rbl;
            sl_msg_t rep;
            if (sl_net_client_send(c, header, body, body_len, 5000) == SL_OK &&
                sl_net_client_recv(c, 10000, &rh, &rhl, &rb, &rbl) == SL_OK) {
                if (sl_msg_decode(rh, rhl, rb, rbl, &rep) == SL_OK) {
                    if (rep.type == SL_MSG_CTL_REP)
                        u->status = (sl_err)rep.u.ctl_rep.status;
                    sl_msg_fini(&rep);
                }
                sl_free(rh);
                sl_free(rb);
            }
            sl_free(body);
        }
        sl_net_client_destroy(&c);
    }
    atomic_store(&u->finished, true);
    return NULL;
}

/* A blob put through the CLI has no manifest until blob-commit: a chunk
 * it sent (here one a cached copy already had) survives the eviction of
 * that copy, so the commit finds it. */
static void test_upload_kept(void) {
    cache_max_bytes = 3u * SL_BLOB_CHUNK_LEN; /* one 2-chunk copy */
    dir_tag = "upload-";
    peer_t ps[NPEERS] = {{0}};
    if (!start_three(ps)) {
        cache_max_bytes = 0;
        dir_tag = "";
        return;
    }
    peer_t *c = &ps[2];
    size_t len = 2 * SL_BLOB_CHUNK_LEN;
    uint8_t *blob[2], hash[2][SL_BLAKE2B_LEN];
    uint32_t second = 9000;
    for (int k = 0; k < 2; k++) { /* Y and Z, placed on a and b */
        blob[k] = malloc(len);
        for (;;) {
            two_chunks(blob[k], 7000 + (uint32_t)k, second++);
            sl_blake2b(blob[k], len, hash[k]);
            size_t placed[2];
            sl_blob_place(hash[k], names, 3, 2, placed);
            if (placed[0] != 2 && placed[1] != 2)
                break;
        }
        uint8_t h[SL_BLAKE2B_LEN];
        CHECK_OK(sl_blob_node_put(ps[0].blobs, blob[k], len, h));
    }
    WAIT_FOR(sl_blob_node_holders(c->blobs, hash[0]) == 2 && sl_blob_node_holders(c->blobs, hash[1]) == 2);
    fetch(ps, c, hash[0]);
    upload_t u = {.addr = sl_node_control_endpoint(c->node), .data = blob[0], .len = SL_BLOB_CHUNK_LEN};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, upload_chunk, &u) == 0);
    WAIT_FOR(atomic_load(&u.finished));
    pthread_join(t, NULL);
    CHECK_INT(u.status, SL_OK);
    fetch(ps, c, hash[1]); /* Y is evicted for Z */
    sl_blob_node_stats_t st;
    WAIT_FOR((sl_blob_node_stats(c->blobs, &st), st.evicted == 1));
    CHECK(chunk_here(c, blob[0]));                      /* the uploaded chunk stays */
    CHECK(!chunk_here(c, blob[0] + SL_BLOB_CHUNK_LEN)); /* the rest of Y goes */
    CHECK(chunk_here(c, blob[1]) && chunk_here(c, blob[1] + SL_BLOB_CHUNK_LEN));
    for (int k = 0; k < 2; k++)
        free(blob[k]);
    for (int i = 0; i < NPEERS; i++)
        stop(&ps[i]);
    cache_max_bytes = 0;
    dir_tag = "";
}

/* The peer's `stats` reply (its JSON), through its control endpoint. */
static bool stats_of(peer_t *ps, peer_t *p, char *out, size_t cap) {
    sl_net_client_t *c = NULL;
    if (sl_net_client_new(sl_node_control_endpoint(p->node), NULL, &c) != SL_OK)
        return false;
    sl_msg_t req;
    memset(&req, 0, sizeof req);
    req.type = SL_MSG_CTL_REQ;
    req.u.ctl_req.id = 9;
    req.u.ctl_req.cmd = sl_bytes_str("stats");
    uint8_t h[SL_WIRE_HEADER_LEN], *b = NULL;
    size_t bl = 0;
    bool got = false;
    if (sl_msg_encode(&req, h, &b, &bl) == SL_OK && sl_net_client_send(c, h, b, bl, DEADLINE_MS) == SL_OK) {
        uint64_t t0 = sl_plat_now_ns();
        while (!got && ms_since(t0) < DEADLINE_MS) {
            step(ps, NPEERS);
            uint8_t *rh = NULL, *rb = NULL;
            size_t rhl, rbl;
            if (sl_net_client_recv(c, 1, &rh, &rhl, &rb, &rbl) != SL_OK)
                continue;
            sl_msg_t rep;
            if (sl_msg_decode(rh, rhl, rb, rbl, &rep) == SL_OK) {
                size_t n = rep.u.ctl_rep.body.len < cap - 1 ? rep.u.ctl_rep.body.len : cap - 1;
                memcpy(out, rep.u.ctl_rep.body.ptr, n);
                out[n] = 0;
                got = true;
                sl_msg_fini(&rep);
            }
            sl_free(rh);
            sl_free(rb);
        }
    }
    sl_free(b);
    sl_net_client_destroy(&c);
    return got;
}

/* An OFFER whose manifest does not decode (proto/blob.md 3.3: a chunk
 * count other than size / chunk_len) is dropped and counted: in
 * blob.bad_msgs, and in the peer's bad_input under "blob" like every
 * module's refusals (it was only in blob.bad_msgs). */
static void test_bad_offer_counted(void) {
    peer_t ps[NPEERS] = {{0}};
    start(&ps[0], "a", NULL);
    if (!ps[0].blobs)
        return;
    sl_blob_manifest_t m;
    CHECK_OK(sl_blob_manifest_build((const uint8_t *)"abc", 3, 1, &m));
    m.chunk_count = 2; /* three chunks of 1 byte, says size */
    uint8_t *man = NULL, *body = NULL;
    size_t man_len = 0, body_len = 0;
    CHECK_OK(sl_blob_manifest_encode(&m, &man, &man_len));
    m.chunk_count = 3;
    sl_blob_manifest_fini(&m);
    sl_blob_msg_t o = {.type = SL_BLOB_MSG_OFFER, .data = man, .data_len = man_len,
                       .addr = (const uint8_t *)"tcp://127.0.0.1:9", .addr_len = 17};
    CHECK_OK(sl_blob_msg_encode(&o, &body, &body_len));
    CHECK_ERR(sl_blob_msg_decode(SL_BLOB_MSG_OFFER, body, body_len, &o), SL_EPROTO);
    sl_net_client_t *c = NULL;
    CHECK_OK(sl_net_client_new(sl_node_addr(ps[0].node), NULL, &c));
    uint8_t h[SL_WIRE_HEADER_LEN] = {SL_WIRE_MAGIC0, SL_WIRE_MAGIC1, SL_WIRE_VERSION,
                                     SL_BLOB_MSG_OFFER};
    if (c)
        CHECK_OK(sl_net_client_send(c, h, body, body_len, DEADLINE_MS));
    sl_blob_node_stats_t st;
    uint64_t t0 = sl_plat_now_ns();
    do {
        step(ps, NPEERS);
        sl_blob_node_stats(ps[0].blobs, &st);
    } while (st.bad_msgs == 0 && ms_since(t0) < DEADLINE_MS);
    CHECK_INT(st.bad_msgs, 1);
    CHECK_INT(st.jobs, 0);
    char out[16384];
    CHECK(stats_of(ps, &ps[0], out, sizeof out));
    CHECK_MSG(strstr(out, "\"bad_input_by_module\":{\"blob\":1}") != NULL,
              "the bad OFFER is not in bad_input: %.200s", strstr(out, "bad_input") ? strstr(out, "bad_input") : out);
    sl_net_client_destroy(&c);
    sl_free(man);
    sl_free(body);
    stop(&ps[0]);
}

int main(void) {
    /* before anything is allocated: every block must carry the header */
    sl_alloc_set_hook(&(sl_alloc_hook_t){track_realloc, NULL});
    sl_log_set_level(SL_LOG_ERR);
    snprintf(tmpdir, sizeof tmpdir, "%s/sl-blob-node-%d",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
    mkdir(tmpdir, 0700);
    sl_test_run("put_get_rereplicate", test_put_get_rereplicate);
    sl_test_run("corrupt_source", test_corrupt_source);
    sl_test_run("delete", test_delete);
    sl_test_run("bad_manifest", test_bad_manifest);
    sl_test_run("stream_large", test_stream_large);
    sl_test_run("cache", test_cache);
    sl_test_run("upload_kept", test_upload_kept);
    sl_test_run("bad_offer_counted", test_bad_offer_counted);
    sl_plat_remove_tree(tmpdir);
    return sl_test_finish();
}
