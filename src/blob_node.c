/* The blob service inside the peer daemon: see include/starling/blob_node.h.
 * The transfer logic is the pure core in blob_xfer.c; this file is the
 * glue: disk, store, membership, messages, commands. */
#include "starling/blob_node.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/disk.h"
#include "starling/hash.h"
#include "starling/platform.h"
#include "starling/rng.h"

#define HEX_LEN (2 * SL_BLAKE2B_LEN)
#define MAX_MEMBERS 1024
#define MAX_WAITERS 8
#define RECENT 64                      /* finished fetches remembered for blob-fetch */
#define SLICE_BYTES (4u << 20)         /* chunk bytes read per job per loop turn (~20 ms) */
#define IDLE_TICK_MS 20                /* longest a new job waits for its next slice */
/* chunks in a manifest that fits one store value: 34 bytes each, ~60 of header */
#define MAX_MANIFEST_CHUNKS ((SL_STORE_MAX_VALUE_LEN - 64) / (SL_BLAKE2B_LEN + 2))
#define DEFAULT_CACHE_BYTES (2ull << 30) /* fetched copies kept when not a holder */
#define DEFAULT_CACHE_IDLE_MS 10000      /* a cached copy used this recently stays */
#define UPLOADS 2048 /* blob-chunk hashes kept from removal until their commit (2 GiB of chunks) */
#define PREFIX "blob/"
#define PREFIX_LEN 5

/* Someone waiting for a fetch. */
typedef struct {
    sl_blob_done_fn done; /* callback (NULL: none) */
    void *ctx;            /* its context */
    char *path;           /* get_file: write the blob here first (sl_free'd) */
} waiter_t;

/* What a job is doing. Checking and verifying read and hash chunk files,
 * a few per loop turn, so a large blob never stalls the loop. */
enum { PHASE_CHECK, PHASE_FETCH, PHASE_VERIFY };

/* One transfer (or, for blob-commit, one verification) running. */
typedef struct {
    uint8_t hash[SL_BLAKE2B_LEN];     /* the blob */
    sl_blob_manifest_t m;             /* its manifest (owned) */
    int phase;                        /* PHASE_* */
    uint32_t next;                    /* CHECK, VERIFY: next chunk to read */
    bool *have;                       /* CHECK: chunks found here and good */
    sl_blob_fetch_t *f;               /* FETCH: the pure state machine */
    sl_blob_builder_t *whole;         /* VERIFY: hash of the chunks read so far */
    char sources[SL_BLOB_XFER_MAX_ADDR + 1]; /* an extra holder to ask (an OFFER's) */
    bool record;                      /* record this peer as holder when done */
    bool commit;                      /* verify only, then commit (blob-commit) */
    bool synced;                      /* VERIFY fdatasyncs each chunk as it reads it */
    bool per_chunk;                   /* VERIFY checks each chunk's hash too (after the
                                         whole failed: to find and remove the bad one) */
    uint64_t progress_ms;             /* last time a chunk arrived (or start) */
    uint64_t timeouts_seen;           /* FETCH: the fetch's timeouts already counted */
    waiter_t waiters[MAX_WAITERS];    /* callbacks */
    size_t waiter_count;              /* entries */
} job_t;

/* How a recent fetch ended (for blob-fetch polls). */
typedef struct {
    uint8_t hash[SL_BLAKE2B_LEN]; /* the blob */
    sl_err err;                   /* its outcome */
    bool used;                    /* entry holds something */
} recent_t;

/* sl_blob_node_get_file after the fetch: a blob held here copied out to
 * a temporary file beside the target, a slice per loop turn, each chunk
 * verified and the whole hashed again, then fsync and rename. */
typedef struct {
    uint8_t hash[SL_BLAKE2B_LEN]; /* the blob */
    sl_blob_manifest_t m;         /* its manifest (owned) */
    sl_disk_out_t *out;           /* the temporary file */
    sl_blob_builder_t *whole;     /* hash of the chunks written so far */
    uint32_t next;                /* next chunk to write */
    sl_blob_done_fn done;         /* callback (NULL: none) */
    void *ctx;                    /* its context */
    char *retry_path;             /* started without a fetch: on a missing or bad
                                     chunk, fetch and write again to this path */
} writer_t;

/* A copy fetched for a reader (blob get, sl_blob_node_fetch) on a peer
 * that is not one of its holders: kept as a cache, least recently used
 * out first once the cache is over its size. */
typedef struct {
    sl_blob_manifest_t m; /* its manifest (owned: the chunks to remove even
                             once the store has forgotten the blob) */
    uint64_t used_ms;     /* last fetched or read (0: found on disk at start) */
} cached_t;

/* An alive member. */
typedef struct {
    char name[SL_NAME_MAX + 1]; /* member name */
    char addr[SL_ADDR_MAX + 1]; /* advertised address */
} member_t;

struct sl_blob_node {
    sl_node_t *node;             /* the daemon */
    sl_store_node_t *store;      /* manifests and holders */
    sl_disk_t *disk;             /* chunk files */
    uint32_t r;                  /* copies kept */
    sl_blob_fetch_config_t fcfg; /* per-transfer settings */
    uint32_t reconcile_ms;       /* placement check period */
    uint32_t max_jobs;           /* transfers at once */
    job_t **jobs;                /* transfers running */
    size_t job_count;            /* entries */
    recent_t recent[RECENT];     /* outcomes of finished fetches */
    size_t recent_next;          /* ring position */
    uint64_t next_reconcile_ms;  /* when to check placement next */
    writer_t **writers;          /* get_file copies being written */
    size_t writer_count;         /* entries */
    cached_t *cache;             /* cached copies, in no order */
    size_t cache_count;          /* entries */
    uint64_t cache_max_bytes;    /* cache size past which copies go */
    uint32_t cache_idle_ms;      /* a copy used this recently is never evicted */
    bool cache_scanned;          /* copies left on disk by an earlier run looked for */
    uint8_t (*uploads)[SL_BLAKE2B_LEN]; /* the last UPLOADS chunks blob-chunk stored (a ring,
                                           allocated at the first): a blob being put through
                                           the CLI has no manifest yet to protect them */
    size_t upload_count;         /* entries used */
    size_t upload_next;          /* ring position */
    sl_rng_t rng;                /* transfer ids */
    sl_blob_node_stats_t st;     /* counters */
};

static uint64_t now_ms(void) { return sl_plat_now_ns() / 1000000ull; }

static bool unhex(const uint8_t *s, size_t len, uint8_t out[SL_BLAKE2B_LEN]) {
    if (len != HEX_LEN)
        return false;
    for (size_t i = 0; i < SL_BLAKE2B_LEN; i++) {
        int v = 0;
        for (int k = 0; k < 2; k++) {
            uint8_t c = s[2 * i + k];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0)
                return false;
            v = v << 4 | d;
        }
        out[i] = (uint8_t)v;
    }
    return true;
}

static void manifest_key(const uint8_t hash[SL_BLAKE2B_LEN], char *out) {
    memcpy(out, PREFIX, PREFIX_LEN);
    sl_hex(hash, SL_BLAKE2B_LEN, out + PREFIX_LEN);
}

/* blob/HEX/h/NAME */
static size_t holder_key(const uint8_t hash[SL_BLAKE2B_LEN], const char *name, char *out,
                         size_t cap) {
    char hex[HEX_LEN + 1];
    sl_hex(hash, SL_BLAKE2B_LEN, hex);
    int n = snprintf(out, cap, PREFIX "%s/h/%s", hex, name);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

static bool holds(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN], const char *name) {
    char key[256];
    size_t n = holder_key(hash, name, key, sizeof key);
    const uint8_t *v;
    size_t vl;
    return n && sl_store_get(sl_store_node_store(bn->store), key, n, &v, &vl) == SL_OK;
}

/* blob/HEX/dead: the blob was deleted (sl_blob_node_delete) */
static size_t dead_key(const uint8_t hash[SL_BLAKE2B_LEN], char *out) {
    manifest_key(hash, out);
    memcpy(out + PREFIX_LEN + HEX_LEN, "/dead", 6);
    return PREFIX_LEN + HEX_LEN + 5;
}

static bool is_dead(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    char key[PREFIX_LEN + HEX_LEN + 8];
    size_t n = dead_key(hash, key);
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
static bool has_holders(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    char pre[PREFIX_LEN + HEX_LEN + 8];
    manifest_key(hash, pre);
    memcpy(pre + PREFIX_LEN + HEX_LEN, "/h/", 4);
    bool any = false;
    sl_store_scan(sl_store_node_store(bn->store), pre, PREFIX_LEN + HEX_LEN + 3, any_key, &any);
    return any;
}

static sl_err set_holder(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN], bool on) {
    char key[256];
    size_t n = holder_key(hash, sl_node_name(bn->node), key, sizeof key);
    if (!n)
        return SL_EINVAL;
    if (on)
        return holds(bn, hash, sl_node_name(bn->node)) ? SL_OK
                                                        : sl_store_node_put(bn->store, key, n, "1", 1);
    sl_err err = sl_store_node_del(bn->store, key, n);
    return err == SL_ENOTFOUND ? SL_OK : err;
}

/* The manifest of a blob the store knows. */
static sl_err lookup_manifest(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                              sl_blob_manifest_t *m) {
    char key[PREFIX_LEN + HEX_LEN + 1]; /* sl_hex adds a NUL */
    manifest_key(hash, key);
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

static size_t chunk_size(const sl_blob_manifest_t *m, uint32_t i) {
    uint64_t off = (uint64_t)i * m->chunk_len;
    return (size_t)(m->size - off < m->chunk_len ? m->size - off : m->chunk_len);
}

static void log_corrupt(const char *what, const uint8_t hash[SL_BLAKE2B_LEN], uint32_t index,
                        const char *where) {
    char hex[HEX_LEN + 1];
    sl_hex(hash, SL_BLAKE2B_LEN, hex);
    sl_log(SL_LOG_ERR, "BLOB-CORRUPT", "%s %" PRIu32 " of blob %s %s does not match its hash: refused",
           what, index, hex, where);
}

/* Reads chunk `i` of `m` from disk and checks its size and, with
 * `check_hash`, its bytes: SL_ENOTFOUND, SL_ECORRUPT. */
static sl_err load_chunk(sl_blob_node_t *bn, const sl_blob_manifest_t *m, uint32_t i,
                         bool check_hash, uint8_t **data, size_t *len) {
    char hex[HEX_LEN + 1];
    sl_hex(m->chunks[i], SL_BLAKE2B_LEN, hex);
    sl_err err = sl_disk_chunk_get(bn->disk, hex, data, len);
    if (err)
        return err;
    if (*len != chunk_size(m, i) ||
        (check_hash && sl_blob_verify(*data, *len, m->chunks[i]) != SL_OK)) {
        sl_free(*data);
        *data = NULL;
        return SL_ECORRUPT;
    }
    return SL_OK;
}

/* Reads chunk `i` of `m` from disk and checks it against its hash. */
static sl_err read_chunk(sl_blob_node_t *bn, const sl_blob_manifest_t *m, uint32_t i,
                         uint8_t **data, size_t *len) {
    return load_chunk(bn, m, i, true, data, len);
}

/* A local chunk file was found bad or missing: remove it, and stop
 * claiming the blob, so placement repairs this copy from another. */
static void forget(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]);

static void lost_chunk(sl_blob_node_t *bn, const uint8_t blob[SL_BLAKE2B_LEN],
                       const uint8_t chunk[SL_BLAKE2B_LEN], uint32_t index, sl_err why) {
    char hex[HEX_LEN + 1];
    sl_hex(chunk, SL_BLAKE2B_LEN, hex);
    if (why == SL_ECORRUPT) {
        bn->st.corrupt++;
        log_corrupt("local chunk", blob, index, "on disk");
        sl_disk_chunk_del(bn->disk, hex);
    }
    forget(bn, blob);
    if (holds(bn, blob, sl_node_name(bn->node))) {
        set_holder(bn, blob, false);
        bn->next_reconcile_ms = 0;
    }
}

/* ---- membership ---- */

static size_t alive_members(const sl_blob_node_t *bn, member_t **out) {
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

/* Addresses of the alive holders of `hash` other than this peer. */
static size_t holder_addrs(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                           const member_t *ms, size_t n, const char **out, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k < cap; i++)
        if (strcmp(ms[i].name, sl_node_name(bn->node)) != 0 && holds(bn, hash, ms[i].name))
            out[k++] = ms[i].addr;
    return k;
}

/* ---- transfers ---- */

static job_t *find_job(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    for (size_t i = 0; i < bn->job_count; i++)
        if (!memcmp(bn->jobs[i]->hash, hash, SL_BLAKE2B_LEN))
            return bn->jobs[i];
    return NULL;
}

static void remember(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN], sl_err err) {
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

static recent_t *recent_of(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    for (size_t i = 0; i < RECENT; i++)
        if (bn->recent[i].used && !memcmp(bn->recent[i].hash, hash, SL_BLAKE2B_LEN))
            return &bn->recent[i];
    return NULL;
}

/* The blob is no longer known to be whole here. */
static void forget(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    recent_t *r = recent_of(bn, hash);
    if (r)
        r->used = false;
}

/* ---- get_file: copying a blob held here out to a file ---- */

static writer_t *find_writer(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    for (size_t i = 0; i < bn->writer_count; i++)
        if (!memcmp(bn->writers[i]->hash, hash, SL_BLAKE2B_LEN))
            return bn->writers[i];
    return NULL;
}

/* A job or a writer reads or writes this blob's chunks: leave them be. */
static bool busy(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    return find_job(bn, hash) || find_writer(bn, hash);
}

static void free_writer(writer_t *w) {
    sl_free(w->retry_path);
    sl_disk_out_abort(&w->out);
    sl_blob_builder_destroy(&w->whole);
    sl_blob_manifest_fini(&w->m);
    sl_free(w);
}

/* Ends a copy: in place (fsync, rename, directory fsync) or removed. */
static void finish_writer(sl_blob_node_t *bn, writer_t *w, sl_err err) {
    for (size_t i = 0; i < bn->writer_count; i++)
        if (bn->writers[i] == w) {
            bn->writers[i] = bn->writers[--bn->writer_count];
            break;
        }
    if (!err)
        err = sl_disk_out_commit(&w->out);
    if (err) {
        char hex[HEX_LEN + 1];
        sl_hex(w->hash, SL_BLAKE2B_LEN, hex);
        sl_log(SL_LOG_WARNING, "BLOB-GET-FAILED", "blob %s: %s; the output file is untouched", hex,
               sl_strerror(err));
    }
    if (w->done)
        w->done(w->ctx, err, w->hash);
    free_writer(w);
}

static sl_err start_job(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                        const sl_blob_manifest_t *given, const char *extra_source, bool record,
                        bool commit_after, sl_blob_done_fn done, void *ctx, const char *path);

/* Writes up to SLICE_BYTES of the blob; ends the copy after the last. */
static void pump_writer(sl_blob_node_t *bn, writer_t *w) {
    sl_err err = SL_OK;
    for (size_t bytes = 0; !err && bytes < SLICE_BYTES && w->next < w->m.chunk_count; w->next++) {
        uint8_t *c;
        size_t n;
        if ((err = read_chunk(bn, &w->m, w->next, &c, &n))) {
            lost_chunk(bn, w->hash, w->m.chunks[w->next], w->next, err);
            if (w->retry_path && start_job(bn, w->hash, &w->m, NULL, false, false, w->done, w->ctx,
                                           w->retry_path) == SL_OK) {
                w->done = NULL; /* the fetch calls it, then a new copy */
                err = SL_EAGAIN;
            }
            break;
        }
        if (!(err = sl_blob_builder_add_hashed(w->whole, c, n, w->m.chunks[w->next])))
            err = sl_disk_out_write(w->out, c, n);
        sl_free(c);
        bytes += n;
    }
    if (!err && w->next < w->m.chunk_count)
        return;
    if (!err) {
        sl_blob_manifest_t got;
        if (!(err = sl_blob_builder_finish(w->whole, &got))) {
            if (got.size != w->m.size || memcmp(got.hash, w->hash, SL_BLAKE2B_LEN) != 0) {
                bn->st.corrupt++;
                log_corrupt("whole", w->hash, 0, "as copied out");
                err = SL_ECORRUPT;
            }
            sl_blob_manifest_fini(&got);
        }
    }
    if (err == SL_EAGAIN) { /* handed over to a fetch: end quietly */
        for (size_t i = 0; i < bn->writer_count; i++)
            if (bn->writers[i] == w)
                bn->writers[i] = bn->writers[--bn->writer_count];
        free_writer(w);
        return;
    }
    finish_writer(bn, w, err);
}

/* Starts copying a blob whose chunks are here (verified) to `path`;
 * `done` is called when it ends, on every path. */
static void start_writer(sl_blob_node_t *bn, const sl_blob_manifest_t *m, const char *path,
                         bool may_retry, sl_blob_done_fn done, void *ctx) {
    writer_t *w = sl_calloc(1, sizeof *w);
    writer_t **ws = NULL;
    sl_err err = w ? SL_OK : SL_ENOMEM;
    if (!err && may_retry && !(w->retry_path = sl_strdup(path)))
        err = SL_ENOMEM;
    if (!err && !(err = sl_blob_manifest_copy(m, &w->m)) &&
        !(err = sl_blob_builder_new(m->chunk_len, &w->whole)) &&
        !(err = sl_disk_out_open(path, 0644, &w->out)) &&
        !(ws = sl_realloc(bn->writers, (bn->writer_count + 1) * sizeof *ws)))
        err = SL_ENOMEM;
    if (ws)
        bn->writers = ws;
    if (err) {
        if (w)
            free_writer(w);
        if (done)
            done(ctx, err, m->hash);
        return;
    }
    memcpy(w->hash, m->hash, SL_BLAKE2B_LEN);
    w->done = done;
    w->ctx = ctx;
    bn->writers[bn->writer_count++] = w;
    pump_writer(bn, w); /* a small blob is written at once */
}

/* ---- the cache of copies fetched for readers ---- */

static cached_t *cache_find(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    for (size_t i = 0; i < bn->cache_count; i++)
        if (!memcmp(bn->cache[i].m.hash, hash, SL_BLAKE2B_LEN))
            return &bn->cache[i];
    return NULL;
}

static void cache_touch(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    cached_t *c = cache_find(bn, hash);
    if (c)
        c->used_ms = now_ms();
}

/* A copy is here for readers (`used_ms` 0: found on disk at start). */
static void cache_add(sl_blob_node_t *bn, const sl_blob_manifest_t *m, uint64_t used_ms) {
    cached_t *c = cache_find(bn, m->hash);
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

static void cache_forget(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    cached_t *c = cache_find(bn, hash);
    if (c)
        cache_remove_at(bn, (size_t)(c - bn->cache));
}

static uint64_t cache_bytes(const sl_blob_node_t *bn) {
    uint64_t total = 0;
    for (size_t i = 0; i < bn->cache_count; i++)
        total += bn->cache[i].m.size;
    return total;
}

static sl_err commit(sl_blob_node_t *bn, const sl_blob_manifest_t *m);
static void cache_trim(sl_blob_node_t *bn, uint64_t now);

static void free_job(job_t *job) {
    for (size_t k = 0; k < job->waiter_count; k++)
        sl_free(job->waiters[k].path);
    sl_blob_fetch_destroy(&job->f);
    sl_blob_builder_destroy(&job->whole);
    sl_blob_manifest_fini(&job->m);
    sl_free(job->have);
    sl_free(job);
}

/* Ends a job (the blob verified whole, or err): record, tell the waiters. */
static void finish_job(sl_blob_node_t *bn, job_t *job, sl_err err) {
    for (size_t i = 0; i < bn->job_count; i++)
        if (bn->jobs[i] == job) {
            bn->jobs[i] = bn->jobs[--bn->job_count];
            break;
        }
    bn->st.jobs = bn->job_count;
    /* a copy is recorded (or a put acknowledged) only once its chunks are
       durable: VERIFY fdatasynced each as it read it; the directories
       they were renamed into are synced once here */
    if (!err && (job->commit || job->record))
        err = job->synced ? sl_disk_chunk_sync_dirs(bn->disk) : sl_blob_sync(bn->disk, &job->m);
    if (!err && job->commit)
        err = commit(bn, &job->m);
    else if (!err && job->record) {
        err = set_holder(bn, job->hash, true);
        if (!err)
            bn->st.replicated++;
    }
    char hex[HEX_LEN + 1];
    sl_hex(job->hash, SL_BLAKE2B_LEN, hex);
    if (job->commit) {
        if (err)
            sl_log(SL_LOG_WARNING, "BLOB-COMMIT-FAILED", "blob %s: %s", hex, sl_strerror(err));
    } else if (err) {
        bn->st.fetches_failed++;
        sl_log(SL_LOG_WARNING, "BLOB-FETCH-FAILED", "blob %s: %s", hex, sl_strerror(err));
    } else {
        bn->st.fetches_done++;
        sl_log(SL_LOG_INFO, "BLOB-FETCHED", "blob %s: %" PRIu64 " bytes here%s", hex, job->m.size,
               job->record ? ", recorded as holder" : "");
    }
    remember(bn, job->hash, err);
    /* fetched for a reader, on a peer that does not hold it: a cached copy */
    bool cached = !err && !job->record && !job->commit && !holds(bn, job->hash, sl_node_name(bn->node));
    if (cached)
        cache_add(bn, &job->m, now_ms());
    for (size_t i = 0; i < job->waiter_count; i++) {
        waiter_t *w = &job->waiters[i];
        if (!err && w->path)
            start_writer(bn, &job->m, w->path, false, w->done, w->ctx); /* calls done */
        else if (w->done)
            w->done(w->ctx, err, job->hash);
    }
    free_job(job);
    if (cached)
        cache_trim(bn, now_ms());
}

/* The holders to ask: the job's extra source, then the alive holders. */
static sl_err refresh_sources(sl_blob_node_t *bn, job_t *job) {
    member_t *ms;
    size_t n = alive_members(bn, &ms);
    const char *src[SL_BLOB_XFER_MAX_SOURCES];
    size_t k = 0;
    if (job->sources[0] && strcmp(job->sources, sl_node_addr(bn->node)) != 0)
        src[k++] = job->sources;
    size_t more = holder_addrs(bn, job->hash, ms, n, src + k, SL_BLOB_XFER_MAX_SOURCES - k);
    for (size_t i = k; i < k + more; i++) /* the offerer may also be listed */
        if (k && !strcmp(src[i], src[0]))
            src[i--] = src[k + --more];
    k += more;
    sl_err err = SL_OK;
    if (!job->f)
        err = sl_blob_fetch_new(sl_rng_next(&bn->rng), &job->m, job->have, src, k, &bn->fcfg,
                                &job->f);
    else if (k)
        err = sl_blob_fetch_set_sources(job->f, src, k);
    sl_free(ms);
    return err;
}

/* Reads up to SLICE_BYTES of chunk files for a CHECK or VERIFY phase. */
static sl_err read_slice(sl_blob_node_t *bn, job_t *job) {
    /* by bytes read, not chunks: chunks that are not here cost nothing */
    for (size_t bytes = 0; bytes < SLICE_BYTES && job->next < job->m.chunk_count; job->next++) {
        uint32_t i = job->next;
        uint8_t *c;
        size_t n = 0;
        /* VERIFY: the sizes and the whole hash are the check (any changed
           byte changes the whole); each chunk's own hash only to find a bad one */
        bool check = job->phase == PHASE_CHECK || job->per_chunk;
        sl_err err = load_chunk(bn, &job->m, i, check, &c, &n);
        bytes += err == SL_ENOTFOUND ? 0 : chunk_size(&job->m, i);
        if (job->phase == PHASE_CHECK) {
            if (!err) {
                job->have[i] = true;
                sl_free(c);
            } else if (err == SL_ECORRUPT) {
                /* remove it: a good copy of the same size would not replace it */
                char hex[HEX_LEN + 1];
                sl_hex(job->m.chunks[i], SL_BLAKE2B_LEN, hex);
                bn->st.corrupt++;
                log_corrupt("local chunk", job->hash, i, "on disk");
                sl_disk_chunk_del(bn->disk, hex);
            }
            continue;
        }
        if (err) {
            lost_chunk(bn, job->hash, job->m.chunks[i], i, err);
            return err;
        }
        err = sl_blob_builder_add_hashed(job->whole, c, n, job->m.chunks[i]);
        sl_free(c);
        if (!err && job->synced) {
            char hex[HEX_LEN + 1];
            sl_hex(job->m.chunks[i], SL_BLAKE2B_LEN, hex);
            err = sl_disk_chunk_sync(bn->disk, hex);
        }
        if (err)
            return err;
    }
    return SL_OK;
}

/* Moves a job on: a slice of checking or verifying, or the GETs the fetch
 * wants now. Ends the job when it is over. */
static void pump(sl_blob_node_t *bn, job_t *job, uint64_t now) {
    sl_err err = SL_OK;
    if (job->phase == PHASE_CHECK) {
        err = read_slice(bn, job);
        if (!err && job->next == job->m.chunk_count) {
            err = refresh_sources(bn, job);
            job->phase = PHASE_FETCH;
            job->progress_ms = now;
        }
        if (err || job->phase == PHASE_CHECK) {
            if (err)
                finish_job(bn, job, err);
            return;
        }
    }
    if (job->phase == PHASE_FETCH) {
        sl_blob_req_t reqs[SL_BLOB_XFER_MAX_WINDOW];
        size_t k = sl_blob_fetch_poll(job->f, now, reqs, SL_BLOB_XFER_MAX_WINDOW);
        const char *self = sl_node_addr(bn->node);
        for (size_t i = 0; i < k; i++) {
            sl_blob_msg_t g = {.type = SL_BLOB_MSG_GET, .xfer = sl_blob_fetch_xfer(job->f),
                               .index = reqs[i].index, .addr = (const uint8_t *)self,
                               .addr_len = strlen(self)};
            memcpy(g.blob, job->hash, SL_BLAKE2B_LEN);
            memcpy(g.chunk, reqs[i].chunk, SL_BLAKE2B_LEN);
            uint8_t *body;
            size_t len;
            if (sl_blob_msg_encode(&g, &body, &len) != SL_OK)
                continue;
            if (sl_node_send(bn->node, reqs[i].addr, SL_BLOB_MSG_GET, body, len) != SL_OK)
                bn->st.send_dropped++; /* the request times out and goes elsewhere */
            sl_free(body);
        }
        sl_blob_fetch_stats_t fs;
        sl_blob_fetch_stats(job->f, &fs);
        bn->st.timeouts += fs.timeouts - job->timeouts_seen;
        job->timeouts_seen = fs.timeouts;
        err = sl_blob_fetch_status(job->f);
        if (err == SL_EAGAIN && fs.in_flight == 0 && now > job->progress_ms + 10ull * bn->fcfg.timeout_ms)
            err = SL_ENOTFOUND; /* no holder to ask for this long */
        if (err == SL_EAGAIN)
            return;
        if (err) {
            finish_job(bn, job, err);
            return;
        }
        job->phase = PHASE_VERIFY;
        job->next = 0;
        job->synced = job->record;
        if ((err = sl_blob_builder_new(job->m.chunk_len, &job->whole))) {
            finish_job(bn, job, err);
            return;
        }
    }
    /* PHASE_VERIFY: the chunks read back in order must make up the blob */
    err = read_slice(bn, job);
    if (!err && job->next < job->m.chunk_count)
        return;
    if (!err) {
        sl_blob_manifest_t got;
        if (!(err = sl_blob_builder_finish(job->whole, &got))) {
            bool bad = got.size != job->m.size || memcmp(got.hash, job->hash, SL_BLAKE2B_LEN) != 0;
            sl_blob_manifest_fini(&got);
            sl_blob_builder_destroy(&job->whole);
            if (bad && !job->per_chunk) {
                /* read it again checking each chunk: a bad one is removed
                   and fetched again (or, for a commit, reported) */
                job->per_chunk = true;
                job->next = 0;
                if (!(err = sl_blob_builder_new(job->m.chunk_len, &job->whole)))
                    return;
            } else if (bad) {
                bn->st.corrupt++;
                log_corrupt("whole", job->hash, 0, "as assembled here");
                err = SL_ECORRUPT;
            }
        }
    }
    finish_job(bn, job, err);
}

/* Starts (or joins) a job for `hash`: check what is here, fetch the rest
 * from `extra_source` and the alive holders, verify the whole. With
 * `commit`, verify only, then commit. `done` is called when it ends. */
static sl_err start_job(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                        const sl_blob_manifest_t *given, const char *extra_source, bool record,
                        bool commit_after, sl_blob_done_fn done, void *ctx, const char *path) {
    job_t *job = find_job(bn, hash);
    if (job) {
        job->record |= record;
        if (!done && !path)
            return SL_OK;
        if (job->waiter_count == MAX_WAITERS)
            return SL_EBUSY;
        char *p = path ? sl_strdup(path) : NULL;
        if (path && !p)
            return SL_ENOMEM;
        job->waiters[job->waiter_count++] = (waiter_t){done, ctx, p};
        return SL_OK;
    }
    if (bn->job_count >= bn->max_jobs)
        return SL_EBUSY;
    job = sl_calloc(1, sizeof *job);
    if (!job)
        return SL_ENOMEM;
    sl_err err = given ? sl_blob_manifest_copy(given, &job->m) : lookup_manifest(bn, hash, &job->m);
    char *p = NULL;
    job_t **jobs = NULL;
    if (!err && ((path && !(p = sl_strdup(path))) ||
                 !(job->have = sl_calloc(job->m.chunk_count ? job->m.chunk_count : 1, 1)) ||
                 !(jobs = sl_realloc(bn->jobs, (bn->job_count + 1) * sizeof *jobs))))
        err = SL_ENOMEM;
    if (jobs)
        bn->jobs = jobs; /* the old array may be gone: keep the new one whatever follows */
    if (commit_after && !err)
        err = sl_blob_builder_new(job->m.chunk_len, &job->whole);
    if (err) {
        sl_free(p);
        free_job(job);
        return err;
    }
    memcpy(job->hash, hash, SL_BLAKE2B_LEN);
    if (extra_source)
        snprintf(job->sources, sizeof job->sources, "%s", extra_source);
    job->record = record;
    job->commit = commit_after;
    job->phase = commit_after ? PHASE_VERIFY : PHASE_CHECK;
    job->synced = commit_after;
    job->progress_ms = now_ms();
    if (done || p)
        job->waiters[job->waiter_count++] = (waiter_t){done, ctx, p};
    bn->jobs[bn->job_count++] = job;
    bn->st.jobs = bn->job_count;
    forget(bn, hash);
    pump(bn, job, now_ms()); /* may finish it at once */
    return SL_OK;
}

/* ---- placement ---- */

typedef struct {
    uint8_t (*hashes)[SL_BLAKE2B_LEN]; /* manifests found */
    size_t count;                      /* entries */
    size_t cap;                        /* allocated */
} hash_list_t;

static bool collect_manifest(void *ctx, const uint8_t *key, size_t key_len,
                             const sl_store_entry_t *e) {
    hash_list_t *l = ctx;
    uint8_t h[SL_BLAKE2B_LEN];
    if (key_len != PREFIX_LEN + HEX_LEN || e->type != SL_CRDT_LWW ||
        !unhex(key + PREFIX_LEN, HEX_LEN, h))
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

static int cmp_hash(const void *a, const void *b) { return memcmp(a, b, SL_BLAKE2B_LEN); }

static void list_blobs(const sl_blob_node_t *bn, hash_list_t *l) {
    memset(l, 0, sizeof *l);
    sl_store_scan(sl_store_node_store(bn->store), PREFIX, PREFIX_LEN, collect_manifest, l);
    if (l->count)
        qsort(l->hashes, l->count, SL_BLAKE2B_LEN, cmp_hash);
}

/* ---- cache eviction ---- */

typedef struct {
    uint8_t (*h)[SL_BLAKE2B_LEN]; /* chunk hashes, sorted once built */
    size_t count;                 /* entries */
    size_t cap;                   /* allocated */
} chunk_set_t;

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
static bool kept_chunks(sl_blob_node_t *bn, const bool *evict, chunk_set_t *keep) {
    memset(keep, 0, sizeof *keep);
    hash_list_t l;
    list_blobs(bn, &l);
    bool ok = true;
    for (size_t b = 0; ok && b < l.count; b++) {
        sl_blob_manifest_t m;
        if (!holds(bn, l.hashes[b], sl_node_name(bn->node)))
            continue;
        if (lookup_manifest(bn, l.hashes[b], &m) != SL_OK) {
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
        qsort(keep->h, keep->count, SL_BLAKE2B_LEN, cmp_hash);
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
static void cache_trim(sl_blob_node_t *bn, uint64_t now) {
    const char *self = sl_node_name(bn->node);
    for (size_t i = bn->cache_count; i-- > 0;)
        if (holds(bn, bn->cache[i].m.hash, self))
            cache_remove_at(bn, i);
    if (!bn->cache_count)
        return;
    bool *evict = sl_calloc(bn->cache_count, sizeof *evict);
    if (!evict)
        return;
    uint64_t total = cache_bytes(bn);
    size_t mru = bn->cache_count, victims = 0; /* none yet: copies found at start are not used */
    for (size_t i = 0; i < bn->cache_count; i++) {
        const uint8_t *h = bn->cache[i].m.hash;
        if (bn->cache[i].used_ms &&
            (mru == bn->cache_count || bn->cache[i].used_ms > bn->cache[mru].used_ms))
            mru = i;
        sl_blob_manifest_t m;
        bool gone = is_dead(bn, h) || lookup_manifest(bn, h, &m) != SL_OK;
        if (!gone)
            sl_blob_manifest_fini(&m);
        if (gone && !busy(bn, h)) {
            evict[i] = true;
            total -= bn->cache[i].m.size;
            victims++;
        }
    }
    while (total > bn->cache_max_bytes) {
        size_t lru = bn->cache_count;
        for (size_t i = 0; i < bn->cache_count; i++) {
            const cached_t *c = &bn->cache[i];
            if (evict[i] || i == mru || busy(bn, c->m.hash) ||
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
    if (!victims || !kept_chunks(bn, evict, &keep)) {
        sl_free(evict);
        return;
    }
    for (size_t i = bn->cache_count; i-- > 0;) {
        if (!evict[i])
            continue;
        const sl_blob_manifest_t *m = &bn->cache[i].m;
        for (uint32_t c = 0; c < m->chunk_count; c++) {
            if (keep.count && bsearch(m->chunks[c], keep.h, keep.count, SL_BLAKE2B_LEN, cmp_hash))
                continue;
            char hex[HEX_LEN + 1];
            sl_hex(m->chunks[c], SL_BLAKE2B_LEN, hex);
            sl_disk_chunk_del(bn->disk, hex);
        }
        char hex[HEX_LEN + 1];
        sl_hex(m->hash, SL_BLAKE2B_LEN, hex);
        sl_log(SL_LOG_INFO, "BLOB-EVICT", "blob %s: cached copy of %" PRIu64 " bytes removed (cache "
               "over %" PRIu64 " bytes, or the blob deleted)", hex, m->size, bn->cache_max_bytes);
        forget(bn, m->hash);
        bn->st.evicted++;
        cache_remove_at(bn, i);
    }
    sl_free(keep.h);
    sl_free(evict);
}

/* Copies an earlier run fetched for readers are still on disk: count them
 * in the cache (as the least recently used), so they can go. A blob
 * counts as here when its first and last chunks are. */
static void cache_scan(sl_blob_node_t *bn, const hash_list_t *l) {
    const char *self = sl_node_name(bn->node);
    for (size_t b = 0; b < l->count; b++) {
        sl_blob_manifest_t m;
        if (holds(bn, l->hashes[b], self) || busy(bn, l->hashes[b]) || cache_find(bn, l->hashes[b]) ||
            lookup_manifest(bn, l->hashes[b], &m) != SL_OK)
            continue;
        char first[HEX_LEN + 1], last[HEX_LEN + 1];
        if (m.chunk_count) {
            sl_hex(m.chunks[0], SL_BLAKE2B_LEN, first);
            sl_hex(m.chunks[m.chunk_count - 1], SL_BLAKE2B_LEN, last);
            if (sl_disk_chunk_has(bn->disk, first) && sl_disk_chunk_has(bn->disk, last))
                cache_add(bn, &m, 0);
        }
        sl_blob_manifest_fini(&m);
    }
    bn->cache_scanned = true;
}

/* Drops this peer's copy of a blob placed elsewhere or deleted; chunks
 * something else here uses (kept_chunks) stay. */
static void drop_copy(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN], const char *why) {
    sl_blob_manifest_t m;
    if (lookup_manifest(bn, hash, &m) != SL_OK)
        return;
    if (set_holder(bn, hash, false) != SL_OK) {
        sl_blob_manifest_fini(&m);
        return;
    }
    forget(bn, hash);
    cache_forget(bn, hash);
    chunk_set_t keep;
    if (kept_chunks(bn, NULL, &keep)) { /* else the files stay: found again as a cached copy */
        for (uint32_t i = 0; i < m.chunk_count; i++) {
            if (keep.count && bsearch(m.chunks[i], keep.h, keep.count, SL_BLAKE2B_LEN, cmp_hash))
                continue;
            char hex[HEX_LEN + 1];
            sl_hex(m.chunks[i], SL_BLAKE2B_LEN, hex);
            sl_disk_chunk_del(bn->disk, hex);
        }
        sl_free(keep.h);
    }
    char hex[HEX_LEN + 1];
    sl_hex(hash, SL_BLAKE2B_LEN, hex);
    sl_log(SL_LOG_INFO, "BLOB-DROP", "blob %s: %s; copy removed", hex, why);
    bn->st.dropped++;
    sl_blob_manifest_fini(&m);
}

/* The last trace of a deleted blob that no member holds. */
static void forget_manifest(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    char key[PREFIX_LEN + HEX_LEN + 8];
    manifest_key(hash, key);
    sl_store_node_del(bn->store, key, PREFIX_LEN + HEX_LEN);
    sl_store_node_del(bn->store, key, dead_key(hash, key));
}

/* Runs sl_blob_plan for every blob: fetch where this peer is placed and
 * lacks a copy, drop where it holds an extra one, drop every copy of a
 * deleted one. */
static void reconcile(sl_blob_node_t *bn, uint64_t now) {
    member_t *ms;
    size_t n = alive_members(bn, &ms);
    hash_list_t l;
    list_blobs(bn, &l);
    const char **names = sl_calloc(n ? n : 1, sizeof *names);
    bool *h = sl_calloc(n ? n : 1, sizeof *h);
    const char *self = sl_node_name(bn->node);
    size_t me = n;
    for (size_t i = 0; names && i < n; i++) {
        names[i] = ms[i].name;
        if (!strcmp(ms[i].name, self))
            me = i;
    }
    for (size_t b = 0; names && h && me < n && b < l.count; b++) {
        const uint8_t *hash = l.hashes[b];
        for (size_t i = 0; i < n; i++)
            h[i] = holds(bn, hash, ms[i].name);
        sl_blob_plan_t plan;
        if (sl_blob_plan(hash, names, h, n, bn->r, &plan) != SL_OK)
            continue;
        job_t *job = find_job(bn, hash);
        if (job && job->f) /* keep its holders current */
            refresh_sources(bn, job);
        bool in_use = job || find_writer(bn, hash);
        if (is_dead(bn, hash)) {
            /* deleted: every holder drops its copy; then anyone removes
               the manifest (a holder that is down keeps it until it comes
               back and drops its copy too) */
            if (in_use)
                continue;
            if (h[me])
                drop_copy(bn, hash, "deleted");
            else if (!has_holders(bn, hash))
                forget_manifest(bn, hash);
            continue;
        }
        for (size_t i = 0; i < plan.fetch_count; i++)
            if (plan.fetch[i] == me && !h[me])
                start_job(bn, hash, NULL, NULL, true, false, NULL, NULL, NULL);
        for (size_t i = 0; i < plan.drop_count; i++)
            if (plan.drop[i] == me && !in_use)
                drop_copy(bn, hash, "placed peers hold it; an extra copy");
    }
    if (!bn->cache_scanned)
        cache_scan(bn, &l);
    sl_free(names);
    sl_free(h);
    sl_free(l.hashes);
    sl_free(ms);
    cache_trim(bn, now);
    bn->next_reconcile_ms = now + bn->reconcile_ms;
}

/* ---- local puts ---- */

/* Records a blob whose chunks are all here and tells the placed peers. */
static sl_err commit(sl_blob_node_t *bn, const sl_blob_manifest_t *m) {
    uint8_t *enc;
    size_t enc_len;
    sl_err err = sl_blob_manifest_encode(m, &enc, &enc_len);
    if (err)
        return err;
    if (enc_len > SL_STORE_MAX_VALUE_LEN || enc_len > SL_BLOB_XFER_MAX_MANIFEST) {
        sl_free(enc);
        return SL_ETOOBIG;
    }
    char key[PREFIX_LEN + HEX_LEN + 1]; /* sl_hex adds a NUL */
    manifest_key(m->hash, key);
    const uint8_t *old;
    size_t old_len;
    if (sl_store_get(sl_store_node_store(bn->store), key, PREFIX_LEN + HEX_LEN, &old, &old_len) != SL_OK ||
        old_len != enc_len || memcmp(old, enc, enc_len) != 0)
        err = sl_store_node_put(bn->store, key, PREFIX_LEN + HEX_LEN, enc, enc_len);
    if (!err && is_dead(bn, m->hash)) { /* stored again after a delete: it lives */
        char dk[PREFIX_LEN + HEX_LEN + 8];
        err = sl_store_node_del(bn->store, dk, dead_key(m->hash, dk));
    }
    if (!err)
        err = set_holder(bn, m->hash, true);
    if (!err) {
        bn->st.puts++;
        remember(bn, m->hash, SL_OK);
        /* tell the placed peers to pull their copy now rather than at their next check */
        member_t *ms;
        size_t n = alive_members(bn, &ms);
        const char **names = sl_calloc(n ? n : 1, sizeof *names);
        size_t placed[16];
        size_t k = 0;
        if (names) {
            for (size_t i = 0; i < n; i++)
                names[i] = ms[i].name;
            k = sl_blob_place(m->hash, names, n, bn->r, placed);
        }
        const char *self = sl_node_addr(bn->node);
        sl_blob_msg_t o = {.type = SL_BLOB_MSG_OFFER, .data = enc, .data_len = enc_len,
                           .addr = (const uint8_t *)self, .addr_len = strlen(self)};
        uint8_t *body;
        size_t len;
        if (k && sl_blob_msg_encode(&o, &body, &len) == SL_OK) {
            for (size_t j = 0; j < k; j++)
                if (strcmp(ms[placed[j]].name, sl_node_name(bn->node)) != 0 &&
                    sl_node_send(bn->node, ms[placed[j]].addr, SL_BLOB_MSG_OFFER, body, len))
                    bn->st.send_dropped++;
            sl_free(body);
        }
        sl_free(names);
        sl_free(ms);
        char hex[HEX_LEN + 1];
        sl_hex(m->hash, SL_BLAKE2B_LEN, hex);
        sl_log(SL_LOG_INFO, "BLOB-PUT", "blob %s: %" PRIu64 " bytes in %" PRIu32 " chunks", hex,
               m->size, m->chunk_count);
    }
    sl_free(enc);
    return err;
}

sl_err sl_blob_node_put(sl_blob_node_t *bn, const void *data, size_t len,
                        uint8_t hash[SL_BLAKE2B_LEN]) {
    sl_blob_manifest_t m;
    sl_err err = sl_blob_write(bn->disk, data, len, 0, &m);
    if (err)
        return err;
    bn->st.chunks_written += m.chunk_count;
    err = commit(bn, &m);
    if (!err && hash)
        memcpy(hash, m.hash, SL_BLAKE2B_LEN);
    sl_blob_manifest_fini(&m);
    return err;
}

sl_err sl_blob_node_put_file(sl_blob_node_t *bn, const char *path, uint8_t hash[SL_BLAKE2B_LEN]) {
    sl_blob_manifest_t m;
    sl_err err = sl_blob_write_file(bn->disk, path, 0, MAX_MANIFEST_CHUNKS, &m);
    if (err)
        return err;
    bn->st.chunks_written += m.chunk_count;
    err = commit(bn, &m);
    if (!err && hash)
        memcpy(hash, m.hash, SL_BLAKE2B_LEN);
    sl_blob_manifest_fini(&m);
    return err;
}

sl_err sl_blob_node_fetch(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                          sl_blob_done_fn done, void *ctx) {
    return start_job(bn, hash, NULL, NULL, false, false, done, ctx, NULL);
}

sl_err sl_blob_node_get_file(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                             const char *path, sl_blob_done_fn done, void *ctx) {
    if (!path || !path[0])
        return SL_EINVAL;
    recent_t *r = recent_of(bn, hash);
    sl_blob_manifest_t m;
    if (!find_job(bn, hash) && r && r->err == SL_OK && lookup_manifest(bn, hash, &m) == SL_OK) {
        /* whole here and verified not long ago: copy it out at once (the
           copy checks every chunk and the whole again, and fetches if a
           chunk went missing meanwhile) */
        cache_touch(bn, hash);
        start_writer(bn, &m, path, true, done, ctx);
        sl_blob_manifest_fini(&m);
        return SL_OK;
    }
    return start_job(bn, hash, NULL, NULL, false, false, done, ctx, path);
}

sl_err sl_blob_node_read(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN], uint8_t **data,
                         size_t *len) {
    sl_blob_manifest_t m;
    sl_err err = lookup_manifest(bn, hash, &m);
    if (err)
        return err;
    err = sl_blob_read(bn->disk, &m, data, len);
    if (err == SL_ECORRUPT)
        bn->st.corrupt++;
    if (!err)
        cache_touch(bn, hash);
    sl_blob_manifest_fini(&m);
    return err;
}

sl_err sl_blob_node_delete(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    sl_blob_manifest_t m;
    sl_err err = lookup_manifest(bn, hash, &m);
    if (err)
        return err;
    sl_blob_manifest_fini(&m);
    char key[PREFIX_LEN + HEX_LEN + 8];
    size_t n = dead_key(hash, key);
    if ((err = sl_store_node_put(bn->store, key, n, "1", 1)) == SL_OK)
        bn->next_reconcile_ms = 0; /* this peer drops its copy at the next turn */
    return err;
}

uint32_t sl_blob_node_r(const sl_blob_node_t *bn) { return bn->r; }

size_t sl_blob_node_holders(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    member_t *ms;
    size_t n = alive_members(bn, &ms), k = 0;
    for (size_t i = 0; i < n; i++)
        k += holds(bn, hash, ms[i].name);
    sl_free(ms);
    return k;
}

void sl_blob_node_stats(const sl_blob_node_t *bn, sl_blob_node_stats_t *out) {
    *out = bn->st;
    out->jobs = bn->job_count;
    out->cache_bytes = cache_bytes(bn);
    out->cache_blobs = bn->cache_count;
}

/* ---- messages ---- */

static void on_get(sl_blob_node_t *bn, const sl_blob_msg_t *g) {
    char addr[SL_BLOB_XFER_MAX_ADDR + 1];
    memcpy(addr, g->addr, g->addr_len);
    addr[g->addr_len] = 0;
    char hex[HEX_LEN + 1];
    sl_hex(g->chunk, SL_BLAKE2B_LEN, hex);
    uint8_t *data = NULL;
    size_t len = 0;
    sl_err err = sl_disk_chunk_get(bn->disk, hex, &data, &len);
    if (!err && (len > SL_BLOB_XFER_MAX_DATA || sl_blob_verify(data, len, g->chunk) != SL_OK))
        err = SL_ECORRUPT;
    if (err) {
        lost_chunk(bn, g->blob, g->chunk, g->index, err);
        sl_free(data);
        data = NULL;
        len = 0;
        bn->st.gets_missing++;
    } else {
        bn->st.gets_served++;
    }
    sl_blob_msg_t c = {.type = SL_BLOB_MSG_CHUNK, .xfer = g->xfer, .index = g->index,
                       .status = err ? SL_BLOB_CHUNK_MISSING : SL_BLOB_CHUNK_OK, .data = data,
                       .data_len = len};
    memcpy(c.chunk, g->chunk, SL_BLAKE2B_LEN);
    uint8_t *body;
    size_t body_len;
    if (sl_blob_msg_encode(&c, &body, &body_len) == SL_OK) {
        if (sl_node_send(bn->node, addr, SL_BLOB_MSG_CHUNK, body, body_len) != SL_OK)
            bn->st.send_dropped++;
        sl_free(body);
    }
    sl_free(data);
}

static void on_chunk(sl_blob_node_t *bn, const sl_blob_msg_t *c, uint64_t now) {
    job_t *job = NULL;
    for (size_t i = 0; i < bn->job_count && !job; i++)
        if (bn->jobs[i]->f && bn->jobs[i]->phase == PHASE_FETCH &&
            sl_blob_fetch_xfer(bn->jobs[i]->f) == c->xfer)
            job = bn->jobs[i];
    if (!job)
        return; /* late answer for a transfer that ended */
    sl_err err = sl_blob_fetch_on_chunk(job->f, now, c);
    if (err == SL_OK) {
        char hex[HEX_LEN + 1];
        sl_hex(c->chunk, SL_BLAKE2B_LEN, hex);
        /* synced once before this peer records itself as holder */
        sl_err werr = sl_disk_chunk_write(bn->disk, hex, c->data, c->data_len);
        sl_blob_fetch_stored(job->f, c->index, werr);
        if (!werr) {
            bn->st.chunks_fetched++;
            bn->st.chunks_written++;
        }
        job->progress_ms = now;
    } else if (err == SL_ECORRUPT) {
        bn->st.corrupt++;
        log_corrupt("chunk", job->hash, c->index, "as received");
    }
    pump(bn, job, now);
}

static void on_offer(sl_blob_node_t *bn, const sl_blob_msg_t *o) {
    sl_blob_manifest_t m;
    if (sl_blob_manifest_decode(o->data, o->data_len, &m) != SL_OK) {
        bn->st.bad_msgs++;
        return;
    }
    char src[SL_BLOB_XFER_MAX_ADDR + 1];
    memcpy(src, o->addr, o->addr_len);
    src[o->addr_len] = 0;
    if (!holds(bn, m.hash, sl_node_name(bn->node)))
        start_job(bn, m.hash, &m, src, true, false, NULL, NULL, NULL);
    sl_blob_manifest_fini(&m);
}

static void on_msg(void *ctx, sl_node_t *node, uint8_t type, const uint8_t *body, size_t len,
                   uint64_t now_ns) {
    (void)node;
    sl_blob_node_t *bn = ctx;
    sl_blob_msg_t m;
    if (sl_blob_msg_decode(type, body, len, &m) != SL_OK) {
        bn->st.bad_msgs++;
        return;
    }
    switch (type) {
    case SL_BLOB_MSG_GET: on_get(bn, &m); break;
    case SL_BLOB_MSG_CHUNK: on_chunk(bn, &m, now_ns / 1000000ull); break;
    case SL_BLOB_MSG_OFFER: on_offer(bn, &m); break;
    }
}

static uint64_t on_tick(void *ctx, sl_node_t *node, uint64_t now_ns) {
    (void)node;
    sl_blob_node_t *bn = ctx;
    uint64_t now = now_ns / 1000000ull;
    if (now >= bn->next_reconcile_ms)
        reconcile(bn, now);
    for (size_t i = bn->job_count; i-- > 0;)
        if (i < bn->job_count)
            pump(bn, bn->jobs[i], now);
    for (size_t i = bn->writer_count; i-- > 0;)
        if (i < bn->writer_count)
            pump_writer(bn, bn->writers[i]);
    if (bn->writer_count)
        return now_ns; /* copying out: the next slice at the next turn */
    /* A job started by a message or a command between two ticks must not
     * wait for the next reconcile: look in at least every IDLE_TICK_MS. */
    uint64_t due = now + IDLE_TICK_MS;
    if (bn->next_reconcile_ms < due)
        due = bn->next_reconcile_ms;
    for (size_t i = 0; i < bn->job_count; i++) {
        if (bn->jobs[i]->phase != PHASE_FETCH)
            return now_ns; /* reading chunk files: the next slice at the next turn */
        uint64_t d = sl_blob_fetch_deadline(bn->jobs[i]->f);
        if (!d)
            d = bn->jobs[i]->progress_ms + 10ull * bn->fcfg.timeout_ms + 1;
        if (d < due)
            due = d;
    }
    return due * 1000000ull;
}

static void on_member(void *ctx, sl_node_t *node, const sl_swim_event_t *ev) {
    (void)node;
    sl_blob_node_t *bn = ctx;
    if (ev->kind == SL_SWIM_EV_JOIN || ev->kind == SL_SWIM_EV_STATE)
        bn->next_reconcile_ms = 0; /* a holder may have died: check placement now */
}

static size_t on_stats(void *ctx, sl_node_counter_t *c, size_t cap) {
    const sl_blob_node_t *bn = ctx;
    sl_blob_node_stats_t s;
    sl_blob_node_stats(bn, &s);
    const sl_node_counter_t all[] = {
        {"puts", s.puts},
        {"chunks_written", s.chunks_written},
        {"gets_served", s.gets_served},
        {"gets_missing", s.gets_missing},
        {"chunks_fetched", s.chunks_fetched},
        {"corrupt", s.corrupt},
        {"timeouts", s.timeouts},
        {"fetches_done", s.fetches_done},
        {"fetches_failed", s.fetches_failed},
        {"replicated", s.replicated},
        {"dropped", s.dropped},
        {"send_dropped", s.send_dropped},
        {"bad_msgs", s.bad_msgs},
        {"jobs", s.jobs},
        {"cache_bytes", s.cache_bytes},
        {"cache_blobs", s.cache_blobs},
        {"evicted", s.evicted},
    };
    size_t n = sizeof all / sizeof all[0];
    if (n > cap)
        n = cap;
    memcpy(c, all, n * sizeof *c);
    return n;
}

/* ---- commands ---- */

static sl_err reply_err(sl_ctl_call_t *call, sl_err err, const char *msg) {
    return sl_ctl_reply(call, err, msg, strlen(msg), false);
}

static sl_err reply_json(sl_ctl_call_t *call, cJSON *root) {
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return SL_ENOMEM;
    sl_err err = sl_ctl_reply(call, SL_OK, text, strlen(text), false);
    free(text);
    return err;
}

static bool arg_hash(const sl_ctl_req_t *req, size_t i, uint8_t hash[SL_BLAKE2B_LEN]) {
    return i < req->arg_count && unhex(req->args[i].ptr, req->args[i].len, hash);
}

static sl_err ctl_chunk(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    (void)node;
    sl_blob_node_t *bn = ctx;
    if (req->arg_count != 1 || req->args[0].len == 0 || req->args[0].len > SL_BLOB_CHUNK_LEN)
        return reply_err(call, SL_EINVAL, "usage: blob-chunk BYTES (1 byte to 1 MiB)");
    uint8_t h[SL_BLAKE2B_LEN];
    char hex[HEX_LEN + 1];
    sl_blake2b(req->args[0].ptr, req->args[0].len, h);
    sl_hex(h, SL_BLAKE2B_LEN, hex);
    /* durable only at blob-commit, once for the whole blob */
    sl_err err = sl_disk_chunk_write(bn->disk, hex, req->args[0].ptr, req->args[0].len);
    if (err)
        return reply_err(call, err, "cannot write the chunk here (disk full or unwritable?)");
    bn->st.chunks_written++;
    if (!bn->uploads)
        bn->uploads = sl_malloc((size_t)UPLOADS * SL_BLAKE2B_LEN);
    if (bn->uploads) { /* not removed by a drop or an eviction before blob-commit */
        memcpy(bn->uploads[bn->upload_next++ % UPLOADS], h, SL_BLAKE2B_LEN);
        if (bn->upload_count < UPLOADS)
            bn->upload_count++;
    }
    return sl_ctl_reply(call, SL_OK, hex, HEX_LEN, false);
}

/* blob-commit MANIFEST: polled by the client. The first call starts
 * verifying the chunks here (a few per loop turn); the reply says
 * "verifying" until the blob is recorded ("done") or failed (an error,
 * reported once). */
static sl_err ctl_commit(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    (void)node;
    sl_blob_node_t *bn = ctx;
    sl_blob_manifest_t m;
    if (req->arg_count != 1 || sl_blob_manifest_decode(req->args[0].ptr, req->args[0].len, &m))
        return reply_err(call, SL_EINVAL, "usage: blob-commit MANIFEST (an encoded manifest)");
    uint8_t *enc;
    size_t enc_len;
    sl_err err = sl_blob_manifest_encode(&m, &enc, &enc_len);
    if (!err) {
        sl_free(enc);
        if (enc_len > SL_STORE_MAX_VALUE_LEN)
            err = SL_ETOOBIG; /* say so before verifying anything */
    }
    char hex[HEX_LEN + 1];
    sl_hex(m.hash, SL_BLAKE2B_LEN, hex);
    const char *state = "verifying";
    sl_blob_manifest_t known;
    bool recorded = false;
    if (!err && lookup_manifest(bn, m.hash, &known) == SL_OK) {
        recorded = holds(bn, m.hash, sl_node_name(bn->node));
        sl_blob_manifest_fini(&known);
    }
    job_t *job = err ? NULL : find_job(bn, m.hash);
    recent_t *r = recent_of(bn, m.hash);
    if (err || job) {
        /* running, or refused */
    } else if (recorded) {
        state = "done";
    } else if (r && r->err) {
        err = r->err;
        r->used = false; /* reported once */
    } else {
        err = start_job(bn, m.hash, &m, NULL, false, true, NULL, NULL, NULL);
        r = recent_of(bn, m.hash);
        if (!err && !find_job(bn, m.hash)) { /* over at once (a small blob) */
            if (r && r->err)
                err = r->err;
            else
                state = "done";
        }
    }
    sl_blob_manifest_fini(&m);
    if (err == SL_ENOTFOUND)
        return reply_err(call, err, "a chunk of this blob is not here: send every chunk first");
    if (err == SL_ECORRUPT)
        return reply_err(call, err, "the chunks here do not make up this blob: send it again");
    if (err == SL_ETOOBIG)
        return reply_err(call, err, "blob too large: its manifest is over 64 KiB "
                                    "(about 1.8 GiB of content); split it");
    if (err == SL_EBUSY)
        return reply_err(call, err, "too many transfers running here; try again");
    if (err)
        return reply_err(call, err, sl_strerror(err));
    char out[HEX_LEN + 48];
    int n = snprintf(out, sizeof out, "{\"hash\":\"%s\",\"state\":\"%s\"}", hex, state);
    return sl_ctl_reply(call, SL_OK, out, (size_t)n, false);
}

static sl_err ctl_fetch(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    (void)node;
    sl_blob_node_t *bn = ctx;
    uint8_t h[SL_BLAKE2B_LEN];
    if (req->arg_count != 1 || !arg_hash(req, 0, h))
        return reply_err(call, SL_EINVAL, "usage: blob-fetch HASH (64 hex digits)");
    sl_blob_manifest_t m;
    sl_err err = lookup_manifest(bn, h, &m);
    if (err == SL_ENOTFOUND)
        return reply_err(call, err, "no such blob (is the hash right? a blob just put elsewhere "
                                    "shows up here within a second)");
    if (err)
        return reply_err(call, err, "the blob's manifest in the store is unreadable");
    recent_t *r = recent_of(bn, h);
    job_t *job = find_job(bn, h);
    if (!job && r && r->err && r->err != SL_EAGAIN) {
        err = r->err;
        r->used = false; /* reported once; the next fetch starts afresh */
        sl_blob_manifest_fini(&m);
        return reply_err(call, err, err == SL_ENOTFOUND
                                        ? "no alive holder could give every chunk of this blob"
                                        : sl_strerror(err));
    }
    /* whole here, verified, and nothing lost since (drops and bad chunks forget it) */
    bool ready = !job && r && r->err == SL_OK;
    if (ready)
        cache_touch(bn, h);
    if (!ready && !job) {
        err = start_job(bn, h, &m, NULL, false, false, NULL, NULL, NULL);
        if (err) {
            sl_blob_manifest_fini(&m);
            return reply_err(call, err, err == SL_EBUSY ? "too many transfers running; try again"
                                                        : sl_strerror(err));
        }
        job = find_job(bn, h);
        r = recent_of(bn, h);
        ready = !job && r && r->err == SL_OK;
        if (!job && r && r->err) {
            sl_blob_manifest_fini(&m);
            return reply_err(call, r->err, "cannot fetch this blob here");
        }
    }
    cJSON *o = cJSON_CreateObject();
    char hex[HEX_LEN + 1];
    sl_hex(h, SL_BLAKE2B_LEN, hex);
    cJSON_AddStringToObject(o, "hash", hex);
    cJSON_AddStringToObject(o, "state", ready ? "ready" : "fetching");
    cJSON_AddNumberToObject(o, "size", (double)m.size);
    cJSON_AddNumberToObject(o, "chunks", m.chunk_count);
    cJSON_AddNumberToObject(o, "chunk_len", m.chunk_len);
    if (job && job->f) {
        sl_blob_fetch_stats_t fs;
        sl_blob_fetch_stats(job->f, &fs);
        cJSON_AddNumberToObject(o, "held", fs.held);
    }
    sl_blob_manifest_fini(&m);
    return reply_json(call, o);
}

static sl_err ctl_read(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    (void)node;
    sl_blob_node_t *bn = ctx;
    uint8_t h[SL_BLAKE2B_LEN];
    char num[16];
    if (req->arg_count != 2 || !arg_hash(req, 0, h) || req->args[1].len == 0 ||
        req->args[1].len >= sizeof num)
        return reply_err(call, SL_EINVAL, "usage: blob-read HASH INDEX");
    memcpy(num, req->args[1].ptr, req->args[1].len);
    num[req->args[1].len] = 0;
    char *end;
    unsigned long i = strtoul(num, &end, 10);
    sl_blob_manifest_t m;
    sl_err err = lookup_manifest(bn, h, &m);
    if (err)
        return reply_err(call, err, "no such blob");
    if (*end || i >= m.chunk_count) {
        sl_blob_manifest_fini(&m);
        return reply_err(call, SL_ERANGE, "chunk index out of range");
    }
    uint8_t *c;
    size_t n;
    err = read_chunk(bn, &m, (uint32_t)i, &c, &n);
    if (err)
        lost_chunk(bn, h, m.chunks[i], (uint32_t)i, err);
    else
        cache_touch(bn, h); /* a reader streams it: keep it */
    sl_blob_manifest_fini(&m);
    if (err == SL_ECORRUPT)
        return reply_err(call, err, "the copy here is corrupt (BLOB-CORRUPT); run blob get again");
    if (err)
        return reply_err(call, err, "chunk not here: run blob-fetch first");
    err = sl_ctl_reply(call, SL_OK, c, n, false);
    sl_free(c);
    return err;
}

typedef struct {
    cJSON *arr;  /* holder names */
    size_t skip; /* bytes of the key before the name */
} holder_scan_t;

static bool collect_holder(void *ctx, const uint8_t *key, size_t key_len,
                           const sl_store_entry_t *e) {
    holder_scan_t *hc = ctx;
    if (e->type != SL_CRDT_LWW || key_len <= hc->skip || key_len - hc->skip > SL_NAME_MAX)
        return true;
    char name[SL_NAME_MAX + 1];
    memcpy(name, key + hc->skip, key_len - hc->skip);
    name[key_len - hc->skip] = 0;
    cJSON_AddItemToArray(hc->arr, cJSON_CreateString(name));
    return true;
}

static sl_err ctl_ls(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    (void)node;
    (void)req;
    sl_blob_node_t *bn = ctx;
    hash_list_t l;
    list_blobs(bn, &l);
    member_t *ms;
    size_t mn = alive_members(bn, &ms);
    cJSON *arr = cJSON_CreateArray();
    for (size_t b = 0; arr && b < l.count; b++) {
        sl_blob_manifest_t m;
        if (lookup_manifest(bn, l.hashes[b], &m) != SL_OK)
            continue;
        cJSON *o = cJSON_CreateObject();
        char hex[HEX_LEN + 1];
        sl_hex(m.hash, SL_BLAKE2B_LEN, hex);
        cJSON_AddStringToObject(o, "hash", hex);
        cJSON_AddNumberToObject(o, "size", (double)m.size);
        cJSON_AddNumberToObject(o, "chunks", m.chunk_count);
        cJSON *hs = cJSON_AddArrayToObject(o, "holders");
        /* holders: the blob/HASH/h/ keys */
        char prefix[PREFIX_LEN + HEX_LEN + 4];
        int pn = snprintf(prefix, sizeof prefix, PREFIX "%s/h/", hex);
        holder_scan_t hc = {hs, (size_t)pn};
        sl_store_scan(sl_store_node_store(bn->store), prefix, (size_t)pn, collect_holder, &hc);
        /* which of them are alive in this peer's view (a dead holder's key stays) */
        cJSON *alive = cJSON_AddArrayToObject(o, "alive_holders");
        const cJSON *nm;
        cJSON_ArrayForEach(nm, hs) {
            for (size_t i = 0; i < mn; i++)
                if (!strcmp(ms[i].name, nm->valuestring)) {
                    cJSON_AddItemToArray(alive, cJSON_CreateString(nm->valuestring));
                    break;
                }
        }
        cJSON_AddItemToArray(arr, o);
        sl_blob_manifest_fini(&m);
    }
    sl_free(l.hashes);
    sl_free(ms);
    return reply_json(call, arr);
}

/* ---- lifecycle ---- */

sl_err sl_blob_node_attach(sl_node_t *node, sl_store_node_t *store,
                           const sl_blob_node_config_t *cfg, sl_blob_node_t **out) {
    *out = NULL;
    if (!node || !store || !cfg || !cfg->dir)
        return SL_EINVAL;
    sl_blob_node_t *bn = sl_calloc(1, sizeof *bn);
    if (!bn)
        return SL_ENOMEM;
    bn->node = node;
    bn->store = store;
    bn->r = cfg->r ? cfg->r : SL_BLOB_DEFAULT_R;
    bn->fcfg.window = cfg->window;
    bn->fcfg.timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 3000;
    bn->reconcile_ms = cfg->reconcile_ms ? cfg->reconcile_ms : 1000;
    bn->max_jobs = cfg->max_jobs ? cfg->max_jobs : 8;
    bn->cache_max_bytes = cfg->cache_max_bytes ? cfg->cache_max_bytes : DEFAULT_CACHE_BYTES;
    bn->cache_idle_ms = cfg->cache_idle_ms ? cfg->cache_idle_ms : DEFAULT_CACHE_IDLE_MS;
    sl_rng_seed(&bn->rng, sl_plat_now_ns() ^ sl_hash64(sl_node_name(node),
                                                        strlen(sl_node_name(node)), 0x626c6f62));
    sl_err err = sl_disk_open(cfg->dir, &bn->disk);
    if (!err)
        err = sl_node_route_register(node, SL_BLOB_MSG_GET, SL_BLOB_MSG_OFFER, on_msg, bn);
    if (!err)
        err = sl_node_tick_register(node, on_tick, bn);
    if (!err)
        err = sl_node_member_listen(node, on_member, bn);
    if (!err)
        err = sl_node_stats_register(node, "blob", on_stats, bn);
    static const struct {
        const char *name;
        sl_ctl_fn fn;
    } cmds[] = {{"blob-chunk", ctl_chunk}, {"blob-commit", ctl_commit}, {"blob-fetch", ctl_fetch},
                {"blob-read", ctl_read},   {"blob-ls", ctl_ls}};
    for (size_t i = 0; !err && i < sizeof cmds / sizeof cmds[0]; i++)
        err = sl_node_ctl_register(node, cmds[i].name, cmds[i].fn, bn);
    if (err) {
        sl_blob_node_destroy(&bn);
        return err;
    }
    *out = bn;
    return SL_OK;
}

void sl_blob_node_destroy(sl_blob_node_t **pbn) {
    sl_blob_node_t *bn = pbn ? *pbn : NULL;
    if (!bn)
        return;
    for (size_t i = 0; i < bn->job_count; i++)
        free_job(bn->jobs[i]);
    sl_free(bn->jobs);
    for (size_t i = 0; i < bn->writer_count; i++)
        free_writer(bn->writers[i]); /* removes its temporary file */
    sl_free(bn->writers);
    for (size_t i = 0; i < bn->cache_count; i++)
        sl_blob_manifest_fini(&bn->cache[i].m);
    sl_free(bn->cache);
    sl_free(bn->uploads);
    sl_disk_close(&bn->disk);
    sl_free(bn);
    *pbn = NULL;
}
