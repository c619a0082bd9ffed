/* The blob service's control commands (peerctl blob put/get/ls): see
 * include/starling/blob_node.h. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob_node_internal.h"

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
    return i < req->arg_count && sl_blob_node_unhex(req->args[i].ptr, req->args[i].len, hash);
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
    if (!err && sl_blob_node_lookup(bn, m.hash, &known) == SL_OK) {
        recorded = sl_blob_node_holds(bn, m.hash, sl_node_name(bn->node));
        sl_blob_manifest_fini(&known);
    }
    job_t *job = err ? NULL : sl_blob_node_find_job(bn, m.hash);
    recent_t *r = sl_blob_node_recent(bn, m.hash);
    if (err || job) {
        /* running, or refused */
    } else if (recorded) {
        state = "done";
    } else if (r && r->err) {
        err = r->err;
        r->used = false; /* reported once */
    } else {
        err = sl_blob_node_start_job(bn, m.hash, &m, NULL, false, true, NULL, NULL, NULL);
        r = sl_blob_node_recent(bn, m.hash);
        if (!err && !sl_blob_node_find_job(bn, m.hash)) { /* over at once (a small blob) */
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
    sl_err err = sl_blob_node_lookup(bn, h, &m);
    if (err == SL_ENOTFOUND)
        return reply_err(call, err, "no such blob (is the hash right? a blob just put elsewhere "
                                    "shows up here within a second)");
    if (err)
        return reply_err(call, err, "the blob's manifest in the store is unreadable");
    recent_t *r = sl_blob_node_recent(bn, h);
    job_t *job = sl_blob_node_find_job(bn, h);
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
        sl_blob_cache_touch(bn, h);
    if (!ready && !job) {
        err = sl_blob_node_start_job(bn, h, &m, NULL, false, false, NULL, NULL, NULL);
        if (err) {
            sl_blob_manifest_fini(&m);
            return reply_err(call, err, err == SL_EBUSY ? "too many transfers running; try again"
                                                        : sl_strerror(err));
        }
        job = sl_blob_node_find_job(bn, h);
        r = sl_blob_node_recent(bn, h);
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
    sl_err err = sl_blob_node_lookup(bn, h, &m);
    if (err)
        return reply_err(call, err, "no such blob");
    if (*end || i >= m.chunk_count) {
        sl_blob_manifest_fini(&m);
        return reply_err(call, SL_ERANGE, "chunk index out of range");
    }
    uint8_t *c;
    size_t n;
    err = sl_blob_node_read_chunk(bn, &m, (uint32_t)i, &c, &n);
    if (err)
        sl_blob_node_lost_chunk(bn, h, m.chunks[i], (uint32_t)i, err);
    else
        sl_blob_cache_touch(bn, h); /* a reader streams it: keep it */
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
    if (req->arg_count)
        return reply_err(call, SL_EINVAL, "usage: blob-ls (it takes no arguments)");
    sl_blob_node_t *bn = ctx;
    hash_list_t l;
    sl_blob_node_list(bn, &l);
    member_t *ms;
    size_t mn = sl_blob_node_alive(bn, &ms);
    cJSON *arr = cJSON_CreateArray();
    for (size_t b = 0; arr && b < l.count; b++) {
        sl_blob_manifest_t m;
        if (sl_blob_node_lookup(bn, l.hashes[b], &m) != SL_OK)
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

sl_err sl_blob_ctl_register(sl_blob_node_t *bn) {
    static const struct {
        const char *name; /* the command */
        sl_ctl_fn fn;     /* its handler */
    } cmds[] = {{"blob-chunk", ctl_chunk}, {"blob-commit", ctl_commit}, {"blob-fetch", ctl_fetch},
                {"blob-read", ctl_read},   {"blob-ls", ctl_ls}};
    sl_err err = SL_OK;
    for (size_t i = 0; !err && i < sizeof cmds / sizeof cmds[0]; i++)
        err = sl_node_ctl_register(bn->node, cmds[i].name, cmds[i].fn, bn);
    return err;
}
