/* The blob service inside the peer daemon: see include/starling/blob_node.h.
 * The transfer logic is the pure core in blob_xfer.c. The node's files
 * call only downwards, in this order: this file (the attachment to the
 * daemon: messages, ticks, membership, counters, lifecycle), blob_ctl.c
 * (the control commands), blob_jobs.c (transfers, copies out, placement,
 * puts), blob_cache.c (the cache of fetched copies), blob_state.c (what
 * the node knows and looks up); internals shared: blob_node_internal.h
 * (docs/house.md). */
#include "starling/blob_node.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "starling/addr.h"
#include "starling/hash.h"
#include "starling/net.h"
#include "starling/platform.h"

#include "blob/blob_node_internal.h"

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
        sl_blob_node_lost_chunk(bn, g->blob, g->chunk, g->index, err);
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
        sl_blob_log_corrupt("chunk", job->hash, c->index, "as received");
    }
    sl_blob_node_pump(bn, job, now);
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
    if (!sl_blob_node_holds(bn, m.hash, sl_node_name(bn->node)))
        sl_blob_node_start_job(bn, m.hash, &m, src, true, false, NULL, NULL, NULL);
    sl_blob_manifest_fini(&m);
}

/* A GET names where to send the chunk, an OFFER where to fetch the blob
 * from: both only the sender's own address, numeric (proto/blob.md,
 * "Receiver rules"). Else 200 GETs of 100 bytes naming a third party
 * made this peer send it 200 MiB, and a host name made ZeroMQ's I/O
 * thread wait on DNS. */
static bool addr_allowed(sl_blob_node_t *bn, sl_node_t *node, const sl_blob_msg_t *m,
                         uint64_t now_ns) {
    char addr[SL_BLOB_XFER_MAX_ADDR + 1];
    size_t n = m->addr_len < SL_BLOB_XFER_MAX_ADDR ? m->addr_len : SL_BLOB_XFER_MAX_ADDR;
    memcpy(addr, m->addr, n);
    addr[n] = 0;
    const char *why = NULL;
    if (!sl_addr_is_numeric(m->addr, m->addr_len))
        why = "is not a numeric HOST:PORT";
    else if (!sl_net_in_from(sl_node_net(node), addr))
        why = "is not the sender's own";
    if (!why)
        return true;
    bn->refused_addr++;
    sl_node_bad_input(node, "blob");
    uint64_t left_out;
    if (!sl_log_limit(&bn->refused_log, now_ns / 1000000, 10000, &left_out))
        return false;
    for (char *p = addr; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    sl_log(SL_LOG_WARNING, "BLOB-REFUSED",
           "refused a blob %s whose address %s %s (it came from %s); %" PRIu64
           " more refused since the last such line",
           m->type == SL_BLOB_MSG_GET ? "GET" : "OFFER", addr, why,
           sl_net_in_peer(sl_node_net(node))[0] ? sl_net_in_peer(sl_node_net(node)) : "?",
           left_out);
    return false;
}

static void on_msg(void *ctx, sl_node_t *node, uint8_t type, const uint8_t *body, size_t len,
                   uint64_t now_ns) {
    sl_blob_node_t *bn = ctx;
    sl_blob_msg_t m;
    sl_err err = sl_blob_msg_decode(type, body, len, &m);
    if (err != SL_OK) {
        /* refused input, counted where every module's is (proto/blob.md
           rule 1); a bad manifest inside an OFFER lands here too */
        bn->st.bad_msgs++;
        sl_node_bad_input(node, "blob");
        uint64_t left_out;
        if (sl_log_limit(&bn->bad_msg_log, now_ns / 1000000, 10000, &left_out))
            sl_log(SL_LOG_WARNING, "BLOB-BAD-MSG",
                   "dropped a blob message of type %u that does not decode: %s (from %s); "
                   "%" PRIu64 " more dropped since the last such line",
                   type, sl_errname(err),
                   sl_net_in_peer(sl_node_net(node))[0] ? sl_net_in_peer(sl_node_net(node)) : "?",
                   left_out);
        return;
    }
    if ((type == SL_BLOB_MSG_GET || type == SL_BLOB_MSG_OFFER) &&
        !addr_allowed(bn, node, &m, now_ns))
        return;
    switch (type) {
    case SL_BLOB_MSG_GET: on_get(bn, &m); break;
    case SL_BLOB_MSG_CHUNK: on_chunk(bn, &m, now_ns / 1000000ull); break;
    case SL_BLOB_MSG_OFFER: on_offer(bn, &m); break;
    }
    /* a chunk may have moved a fetch on to its checks, which run as tick
       slices: the tick's deadline was the fetch's timeout */
    sl_blob_node_tick_soon(bn);
}

static void on_member(void *ctx, sl_node_t *node, const sl_swim_event_t *ev) {
    (void)node;
    sl_blob_node_t *bn = ctx;
    if (ev->kind == SL_SWIM_EV_JOIN || ev->kind == SL_SWIM_EV_STATE) {
        bn->next_reconcile_ms = 0; /* a holder may have died: check placement now */
        sl_blob_node_tick_soon(bn);
    }
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
        err = sl_node_tick_register(node, sl_blob_node_on_tick, bn);
    if (!err)
        err = sl_node_member_listen(node, on_member, bn);
    if (!err)
        err = sl_node_stats_register(node, "blob", on_stats, bn);
    if (!err)
        err = sl_blob_ctl_register(bn);
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
    sl_blob_node_free_work(bn);
    for (size_t i = 0; i < bn->cache_count; i++)
        sl_blob_manifest_fini(&bn->cache[i].m);
    sl_free(bn->cache);
    sl_free(bn->uploads);
    sl_disk_close(&bn->disk);
    sl_free(bn);
    *pbn = NULL;
}
