/* The blob node's work (see blob_node.c for the order of its files):
 * transfers (check what is here, fetch the rest, verify the whole, record
 * or commit), copies out to files (get_file), placement (fetch where this
 * peer is placed, drop extra and deleted copies) and local puts, moved on
 * by the tick a slice at a time. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/disk.h"
#include "starling/hash.h"
#include "starling/platform.h"
#include "starling/rng.h"

#include "blob/blob_node_internal.h"

/* Work for the tick (a job, a writer, a placement check) was started
 * between two ticks: run it at the end of this loop turn rather than at
 * its next deadline (an idle blob node otherwise woke every 20 ms to look
 * for such work, a peer's most frequent wake-up at rest). */
void sl_blob_node_tick_soon(sl_blob_node_t *bn) {
    sl_node_tick_soon(bn->node, sl_blob_node_on_tick, bn);
}

static sl_err set_holder(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN], bool on) {
    char key[256];
    size_t n = sl_blob_holder_key(hash, sl_node_name(bn->node), key, sizeof key);
    if (!n)
        return SL_EINVAL;
    if (on)
        return sl_blob_node_holds(bn, hash, sl_node_name(bn->node))
                   ? SL_OK
                   : sl_store_node_put(bn->store, key, n, "1", 1);
    sl_err err = sl_store_node_del(bn->store, key, n);
    return err == SL_ENOTFOUND ? SL_OK : err;
}

/* A local chunk file was found bad or missing: remove it, and stop
 * claiming the blob, so placement repairs this copy from another. */
void sl_blob_node_lost_chunk(sl_blob_node_t *bn, const uint8_t blob[SL_BLAKE2B_LEN],
                             const uint8_t chunk[SL_BLAKE2B_LEN], uint32_t index, sl_err why) {
    char hex[HEX_LEN + 1];
    sl_hex(chunk, SL_BLAKE2B_LEN, hex);
    if (why == SL_ECORRUPT) {
        bn->st.corrupt++;
        sl_blob_log_corrupt("local chunk", blob, index, "on disk");
        sl_disk_chunk_del(bn->disk, hex);
    }
    sl_blob_node_forget(bn, blob);
    if (sl_blob_node_holds(bn, blob, sl_node_name(bn->node))) {
        set_holder(bn, blob, false);
        bn->next_reconcile_ms = 0;
        sl_blob_node_tick_soon(bn);
    }
}

/* Addresses of the alive holders of `hash` other than this peer. */
static size_t holder_addrs(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                           const member_t *ms, size_t n, const char **out, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k < cap; i++)
        if (strcmp(ms[i].name, sl_node_name(bn->node)) != 0 &&
            sl_blob_node_holds(bn, hash, ms[i].name))
            out[k++] = ms[i].addr;
    return k;
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

/* Writes up to SLICE_BYTES of the blob; ends the copy after the last. */
static void pump_writer(sl_blob_node_t *bn, writer_t *w) {
    sl_err err = SL_OK;
    for (size_t bytes = 0; !err && bytes < SLICE_BYTES && w->next < w->m.chunk_count; w->next++) {
        uint8_t *c;
        size_t n;
        if ((err = sl_blob_node_read_chunk(bn, &w->m, w->next, &c, &n))) {
            sl_blob_node_lost_chunk(bn, w->hash, w->m.chunks[w->next], w->next, err);
            if (w->retry_path &&
                sl_blob_node_start_job(bn, w->hash, &w->m, NULL, false, false, w->done, w->ctx,
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
                sl_blob_log_corrupt("whole", w->hash, 0, "as copied out");
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
    sl_blob_node_tick_soon(bn);
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
    sl_blob_node_remember(bn, job->hash, err);
    /* fetched for a reader, on a peer that does not hold it: a cached copy */
    bool cached = !err && !job->record && !job->commit &&
                  !sl_blob_node_holds(bn, job->hash, sl_node_name(bn->node));
    if (cached)
        sl_blob_cache_add(bn, &job->m, now_ms());
    for (size_t i = 0; i < job->waiter_count; i++) {
        waiter_t *w = &job->waiters[i];
        if (!err && w->path)
            start_writer(bn, &job->m, w->path, false, w->done, w->ctx); /* calls done */
        else if (w->done)
            w->done(w->ctx, err, job->hash);
    }
    free_job(job);
    if (cached)
        sl_blob_cache_trim(bn, now_ms());
}

/* The holders to ask: the job's extra source, then the alive holders. */
static sl_err refresh_sources(sl_blob_node_t *bn, job_t *job) {
    member_t *ms;
    size_t n = sl_blob_node_alive(bn, &ms);
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
        sl_err err = sl_blob_node_load_chunk(bn, &job->m, i, check, &c, &n);
        bytes += err == SL_ENOTFOUND ? 0 : sl_blob_chunk_size(&job->m, i);
        if (job->phase == PHASE_CHECK) {
            if (!err) {
                job->have[i] = true;
                sl_free(c);
            } else if (err == SL_ECORRUPT) {
                /* remove it: a good copy of the same size would not replace it */
                char hex[HEX_LEN + 1];
                sl_hex(job->m.chunks[i], SL_BLAKE2B_LEN, hex);
                bn->st.corrupt++;
                sl_blob_log_corrupt("local chunk", job->hash, i, "on disk");
                sl_disk_chunk_del(bn->disk, hex);
            }
            continue;
        }
        if (err) {
            sl_blob_node_lost_chunk(bn, job->hash, job->m.chunks[i], i, err);
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
void sl_blob_node_pump(sl_blob_node_t *bn, job_t *job, uint64_t now) {
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
                sl_blob_log_corrupt("whole", job->hash, 0, "as assembled here");
                err = SL_ECORRUPT;
            }
        }
    }
    finish_job(bn, job, err);
}

/* Starts (or joins) a job for `hash`: check what is here, fetch the rest
 * from `extra_source` and the alive holders, verify the whole. With
 * `commit`, verify only, then commit. `done` is called when it ends. */
sl_err sl_blob_node_start_job(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                              const sl_blob_manifest_t *given, const char *extra_source,
                              bool record, bool commit_after, sl_blob_done_fn done, void *ctx,
                              const char *path) {
    job_t *job = sl_blob_node_find_job(bn, hash);
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
    sl_err err =
        given ? sl_blob_manifest_copy(given, &job->m) : sl_blob_node_lookup(bn, hash, &job->m);
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
    sl_blob_node_forget(bn, hash);
    sl_blob_node_pump(bn, job, now_ms()); /* may finish it at once */
    sl_blob_node_tick_soon(bn);
    return SL_OK;
}

/* Drops this peer's copy of a blob placed elsewhere or deleted; chunks
 * something else here uses (kept_chunks) stay. */
static void drop_copy(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN], const char *why) {
    sl_blob_manifest_t m;
    if (sl_blob_node_lookup(bn, hash, &m) != SL_OK)
        return;
    if (set_holder(bn, hash, false) != SL_OK) {
        sl_blob_manifest_fini(&m);
        return;
    }
    sl_blob_node_forget(bn, hash);
    sl_blob_cache_forget(bn, hash);
    chunk_set_t keep;
    /* when what stays cannot be told, the files stay: found again as a cached copy */
    if (sl_blob_cache_kept(bn, NULL, &keep)) {
        for (uint32_t i = 0; i < m.chunk_count; i++) {
            if (keep.count &&
                bsearch(m.chunks[i], keep.h, keep.count, SL_BLAKE2B_LEN, sl_blob_node_cmp_hash))
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
    sl_blob_manifest_key(hash, key);
    sl_store_node_del(bn->store, key, PREFIX_LEN + HEX_LEN);
    sl_store_node_del(bn->store, key, sl_blob_dead_key(hash, key));
}

/* Runs sl_blob_plan for every blob: fetch where this peer is placed and
 * lacks a copy, drop where it holds an extra one, drop every copy of a
 * deleted one. */
static void reconcile(sl_blob_node_t *bn, uint64_t now) {
    member_t *ms;
    size_t n = sl_blob_node_alive(bn, &ms);
    hash_list_t l;
    sl_blob_node_list(bn, &l);
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
            h[i] = sl_blob_node_holds(bn, hash, ms[i].name);
        sl_blob_plan_t plan;
        if (sl_blob_plan(hash, names, h, n, bn->r, &plan) != SL_OK)
            continue;
        job_t *job = sl_blob_node_find_job(bn, hash);
        if (job && job->f) /* keep its holders current */
            refresh_sources(bn, job);
        bool in_use = job || sl_blob_node_find_writer(bn, hash);
        if (sl_blob_node_is_dead(bn, hash)) {
            /* deleted: every holder drops its copy; then anyone removes
               the manifest (a holder that is down keeps it until it comes
               back and drops its copy too) */
            if (in_use)
                continue;
            if (h[me])
                drop_copy(bn, hash, "deleted");
            else if (!sl_blob_node_has_holders(bn, hash))
                forget_manifest(bn, hash);
            continue;
        }
        for (size_t i = 0; i < plan.fetch_count; i++)
            if (plan.fetch[i] == me && !h[me])
                sl_blob_node_start_job(bn, hash, NULL, NULL, true, false, NULL, NULL, NULL);
        for (size_t i = 0; i < plan.drop_count; i++)
            if (plan.drop[i] == me && !in_use)
                drop_copy(bn, hash, "placed peers hold it; an extra copy");
    }
    if (!bn->cache_scanned)
        sl_blob_cache_scan(bn, &l);
    sl_free(names);
    sl_free(h);
    sl_free(l.hashes);
    sl_free(ms);
    sl_blob_cache_trim(bn, now);
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
    sl_blob_manifest_key(m->hash, key);
    const uint8_t *old;
    size_t old_len;
    if (sl_store_get(sl_store_node_store(bn->store), key, PREFIX_LEN + HEX_LEN, &old, &old_len) != SL_OK ||
        old_len != enc_len || memcmp(old, enc, enc_len) != 0)
        err = sl_store_node_put(bn->store, key, PREFIX_LEN + HEX_LEN, enc, enc_len);
    if (!err && sl_blob_node_is_dead(bn, m->hash)) { /* stored again after a delete: it lives */
        char dk[PREFIX_LEN + HEX_LEN + 8];
        err = sl_store_node_del(bn->store, dk, sl_blob_dead_key(m->hash, dk));
    }
    if (!err)
        err = set_holder(bn, m->hash, true);
    if (!err) {
        bn->st.puts++;
        sl_blob_node_remember(bn, m->hash, SL_OK);
        /* tell the placed peers to pull their copy now rather than at their next check */
        member_t *ms;
        size_t n = sl_blob_node_alive(bn, &ms);
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
    return sl_blob_node_start_job(bn, hash, NULL, NULL, false, false, done, ctx, NULL);
}

sl_err sl_blob_node_get_file(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                             const char *path, sl_blob_done_fn done, void *ctx) {
    if (!path || !path[0])
        return SL_EINVAL;
    recent_t *r = sl_blob_node_recent(bn, hash);
    sl_blob_manifest_t m;
    if (!sl_blob_node_find_job(bn, hash) && r && r->err == SL_OK &&
        sl_blob_node_lookup(bn, hash, &m) == SL_OK) {
        /* whole here and verified not long ago: copy it out at once (the
           copy checks every chunk and the whole again, and fetches if a
           chunk went missing meanwhile) */
        sl_blob_cache_touch(bn, hash);
        start_writer(bn, &m, path, true, done, ctx);
        sl_blob_manifest_fini(&m);
        return SL_OK;
    }
    return sl_blob_node_start_job(bn, hash, NULL, NULL, false, false, done, ctx, path);
}

sl_err sl_blob_node_read(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN], uint8_t **data,
                         size_t *len) {
    sl_blob_manifest_t m;
    sl_err err = sl_blob_node_lookup(bn, hash, &m);
    if (err)
        return err;
    err = sl_blob_read(bn->disk, &m, data, len);
    if (err == SL_ECORRUPT)
        bn->st.corrupt++;
    if (!err)
        sl_blob_cache_touch(bn, hash);
    sl_blob_manifest_fini(&m);
    return err;
}

sl_err sl_blob_node_delete(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    sl_blob_manifest_t m;
    sl_err err = sl_blob_node_lookup(bn, hash, &m);
    if (err)
        return err;
    sl_blob_manifest_fini(&m);
    char key[PREFIX_LEN + HEX_LEN + 8];
    size_t n = sl_blob_dead_key(hash, key);
    if ((err = sl_store_node_put(bn->store, key, n, "1", 1)) == SL_OK) {
        bn->next_reconcile_ms = 0; /* this peer drops its copy at the next turn */
        sl_blob_node_tick_soon(bn);
    }
    return err;
}

uint32_t sl_blob_node_r(const sl_blob_node_t *bn) { return bn->r; }

size_t sl_blob_node_holders(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]) {
    member_t *ms;
    size_t n = sl_blob_node_alive(bn, &ms), k = 0;
    for (size_t i = 0; i < n; i++)
        k += sl_blob_node_holds(bn, hash, ms[i].name);
    sl_free(ms);
    return k;
}

void sl_blob_node_stats(const sl_blob_node_t *bn, sl_blob_node_stats_t *out) {
    *out = bn->st;
    out->jobs = bn->job_count;
    out->cache_bytes = sl_blob_cache_bytes(bn);
    out->cache_blobs = bn->cache_count;
}

uint64_t sl_blob_node_on_tick(void *ctx, sl_node_t *node, uint64_t now_ns) {
    (void)node;
    sl_blob_node_t *bn = ctx;
    uint64_t now = now_ns / 1000000ull;
    if (now >= bn->next_reconcile_ms)
        reconcile(bn, now);
    for (size_t i = bn->job_count; i-- > 0;)
        if (i < bn->job_count)
            sl_blob_node_pump(bn, bn->jobs[i], now);
    for (size_t i = bn->writer_count; i-- > 0;)
        if (i < bn->writer_count)
            pump_writer(bn, bn->writers[i]);
    if (bn->writer_count)
        return now_ns; /* copying out: the next slice at the next turn */
    /* (work started between two ticks asks for a tick: tick_soon) */
    uint64_t due = bn->next_reconcile_ms;
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

void sl_blob_node_free_work(sl_blob_node_t *bn) {
    for (size_t i = 0; i < bn->job_count; i++)
        free_job(bn->jobs[i]);
    sl_free(bn->jobs);
    bn->jobs = NULL;
    bn->job_count = 0;
    for (size_t i = 0; i < bn->writer_count; i++)
        free_writer(bn->writers[i]); /* removes its temporary file */
    sl_free(bn->writers);
    bn->writers = NULL;
    bn->writer_count = 0;
}
