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
#define MAX_FILE_LEN (1ull << 30)      /* sl_blob_node_put_file */
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

/* Reads chunk `i` of `m` from disk and checks it: SL_ENOTFOUND, SL_ECORRUPT. */
static sl_err read_chunk(sl_blob_node_t *bn, const sl_blob_manifest_t *m, uint32_t i,
                         uint8_t **data, size_t *len) {
    char hex[HEX_LEN + 1];
    sl_hex(m->chunks[i], SL_BLAKE2B_LEN, hex);
    sl_err err = sl_disk_chunk_get(bn->disk, hex, data, len);
    if (err)
        return err;
    if (*len != chunk_size(m, i) || sl_blob_verify(*data, *len, m->chunks[i]) != SL_OK) {
        sl_free(*data);
        *data = NULL;
        return SL_ECORRUPT;
    }
    return SL_OK;
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

/* Writes a blob held here to `path` atomically. */
static sl_err write_file(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN], const char *path) {
    uint8_t *data;
    size_t len;
    sl_err err = sl_blob_node_read(bn, hash, &data, &len);
    if (err)
        return err;
    err = sl_plat_write_file(path, data, len, 0644);
    sl_free(data);
    return err;
}

static sl_err commit(sl_blob_node_t *bn, const sl_blob_manifest_t *m);

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
    for (size_t i = 0; i < job->waiter_count; i++) {
        waiter_t *w = &job->waiters[i];
        sl_err e = err;
        if (!e && w->path)
            e = write_file(bn, job->hash, w->path);
        if (w->done)
            w->done(w->ctx, e, job->hash);
    }
    free_job(job);
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
        sl_err err = read_chunk(bn, &job->m, i, &c, &n);
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
        err = sl_blob_builder_add(job->whole, c, n, NULL);
        sl_free(c);
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
            if (got.size != job->m.size || memcmp(got.hash, job->hash, SL_BLAKE2B_LEN) != 0) {
                bn->st.corrupt++;
                log_corrupt("whole", job->hash, 0, "as assembled here");
                err = SL_ECORRUPT;
            }
            sl_blob_manifest_fini(&got);
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

/* Drops this peer's copy of a blob placed elsewhere (chunks other blobs
 * held here share are kept). */
static void drop_copy(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                      const uint8_t (*others)[SL_BLAKE2B_LEN], size_t other_count,
                      const char *why) {
    sl_blob_manifest_t m;
    if (lookup_manifest(bn, hash, &m) != SL_OK)
        return;
    bool *keep = sl_calloc(m.chunk_count ? m.chunk_count : 1, sizeof *keep);
    if (!keep || set_holder(bn, hash, false) != SL_OK) {
        sl_free(keep);
        sl_blob_manifest_fini(&m);
        return;
    }
    forget(bn, hash);
    for (size_t j = 0; j < other_count; j++) {
        sl_blob_manifest_t o;
        if (!memcmp(others[j], hash, SL_BLAKE2B_LEN) || lookup_manifest(bn, others[j], &o))
            continue;
        for (uint32_t c = 0; c < o.chunk_count; c++)
            for (uint32_t i = 0; i < m.chunk_count; i++)
                keep[i] |= !memcmp(o.chunks[c], m.chunks[i], SL_BLAKE2B_LEN);
        sl_blob_manifest_fini(&o);
    }
    for (uint32_t i = 0; i < m.chunk_count; i++) {
        if (keep[i])
            continue;
        char hex[HEX_LEN + 1];
        sl_hex(m.chunks[i], SL_BLAKE2B_LEN, hex);
        sl_disk_chunk_del(bn->disk, hex);
    }
    char hex[HEX_LEN + 1];
    sl_hex(hash, SL_BLAKE2B_LEN, hex);
    sl_log(SL_LOG_INFO, "BLOB-DROP", "blob %s: %s; copy removed", hex, why);
    bn->st.dropped++;
    sl_free(keep);
    sl_blob_manifest_fini(&m);
}

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
    /* blobs this peer holds, for drop_copy's shared-chunk check */
    uint8_t (*mine)[SL_BLAKE2B_LEN] = sl_malloc((l.count ? l.count : 1) * SL_BLAKE2B_LEN);
    size_t mine_count = 0;
    for (size_t b = 0; mine && b < l.count; b++)
        if (holds(bn, l.hashes[b], self))
            memcpy(mine[mine_count++], l.hashes[b], SL_BLAKE2B_LEN);
    for (size_t b = 0; names && h && mine && me < n && b < l.count; b++) {
        const uint8_t *hash = l.hashes[b];
        for (size_t i = 0; i < n; i++)
            h[i] = holds(bn, hash, ms[i].name);
        sl_blob_plan_t plan;
        if (sl_blob_plan(hash, names, h, n, bn->r, &plan) != SL_OK)
            continue;
        job_t *job = find_job(bn, hash);
        if (job && job->f) /* keep its holders current */
            refresh_sources(bn, job);
        if (is_dead(bn, hash)) {
            /* deleted: every holder drops its copy; then anyone removes
               the manifest (a holder that is down keeps it until it comes
               back and drops its copy too) */
            if (job)
                continue;
            if (h[me])
                drop_copy(bn, hash, (const uint8_t(*)[SL_BLAKE2B_LEN])mine, mine_count,
                          "deleted");
            else if (!has_holders(bn, hash))
                forget_manifest(bn, hash);
            continue;
        }
        for (size_t i = 0; i < plan.fetch_count; i++)
            if (plan.fetch[i] == me && !h[me])
                start_job(bn, hash, NULL, NULL, true, false, NULL, NULL, NULL);
        for (size_t i = 0; i < plan.drop_count; i++)
            if (plan.drop[i] == me && !job)
                drop_copy(bn, hash, (const uint8_t(*)[SL_BLAKE2B_LEN])mine, mine_count,
                          "placed peers hold it; an extra copy");
    }
    sl_free(mine);
    sl_free(names);
    sl_free(h);
    sl_free(l.hashes);
    sl_free(ms);
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
    uint8_t *data;
    size_t len;
    sl_err err = sl_plat_read_file(path, MAX_FILE_LEN, &data, &len);
    if (err)
        return err;
    err = sl_blob_node_put(bn, data, len, hash);
    sl_free(data);
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
        sl_err werr = sl_disk_chunk_put(bn->disk, hex, c->data, c->data_len);
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
    sl_err err = sl_disk_chunk_put(bn->disk, hex, req->args[0].ptr, req->args[0].len);
    if (err)
        return reply_err(call, err, "cannot write the chunk here (disk full or unwritable?)");
    bn->st.chunks_written++;
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
    sl_disk_close(&bn->disk);
    sl_free(bn);
    *pbn = NULL;
}
