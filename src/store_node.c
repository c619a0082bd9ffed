/* The store inside the peer daemon: see include/starling/store_node.h. */
#include "starling/store_node.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/disk.h"
#include "starling/hash.h"
#include "starling/platform.h"
#include "starling/rng.h"

#define GC_MS 1000u
#define MAX_PEERS 1024
#define KEYS_PART_LEN (1u << 20)

typedef struct {
    char addr[SL_STORE_MAX_ADDR + 1]; /* a member's advertised address */
    uint64_t rid;                     /* the replica id its digests carry */
} peer_rid_t;

struct sl_store_node {
    sl_node_t *node;              /* the daemon's loop (borrowed) */
    sl_store_t *store;            /* the replica */
    sl_disk_t *disk;              /* its WAL and snapshot */
    sl_rng_t rng;                 /* peer choice */
    uint32_t sync_ms;             /* anti-entropy period */
    uint32_t snapshot_records;    /* WAL records between snapshots */
    uint64_t records;             /* WAL records since the last snapshot */
    bool dirty;                   /* records appended, not synced */
    uint64_t next_sync_ns;        /* next anti-entropy round */
    uint64_t next_gc_ns;          /* next garbage collection step */
    peer_rid_t *peers;            /* address -> replica id, from digests */
    size_t peer_count;            /* entries */
    uint64_t *live;               /* the last list given to sl_store_set_live */
    size_t live_count;            /* entries */
};

static sl_err replay(void *ctx, uint8_t type, const uint8_t *body, size_t len) {
    return sl_store_replay(ctx, type, body, len);
}

static sl_err send_to(sl_store_node_t *sn, const char *addr, size_t addr_len,
                      const sl_store_msg_t *m) {
    char a[SL_STORE_MAX_ADDR + 1];
    if (addr_len > SL_STORE_MAX_ADDR)
        return SL_ETOOBIG;
    memcpy(a, addr, addr_len);
    a[addr_len] = 0;
    return sl_node_send(sn->node, a, m->type, m->body, m->len);
}

/* Sends `m` to up to `k` random alive members. */
static void push(sl_store_node_t *sn, const sl_store_msg_t *m, int k) {
    const sl_swim_t *sw = sl_node_swim(sn->node);
    size_t count = sl_swim_member_count(sw);
    sl_swim_member_t cand[64];
    size_t n = 0;
    for (size_t i = 0; i < count && n < 64; i++) {
        sl_swim_member_t mm;
        if (sl_swim_member_at(sw, i, &mm) != SL_OK || mm.is_self)
            continue;
        if (mm.state == SL_STATE_ALIVE || mm.state == SL_STATE_SUSPECT)
            cand[n++] = mm;
    }
    for (int i = 0; i < k && n > 0; i++) {
        size_t j = (size_t)sl_rng_below(&sn->rng, n);
        send_to(sn, (const char *)cand[j].addr.ptr, cand[j].addr.len, m);
        cand[j] = cand[--n];
    }
}

static sl_err log_record(sl_store_node_t *sn, const sl_store_msg_t *m) {
    sl_err err = sl_disk_append(sn->disk, m->type, m->body, m->len);
    if (!err) {
        sn->dirty = true;
        sn->records++;
    }
    return err;
}

static sl_err commit(sl_store_node_t *sn) {
    if (!sn->dirty)
        return SL_OK;
    sl_err err = sl_disk_sync(sn->disk);
    if (err)
        return err;
    sn->dirty = false;
    sl_store_mark_durable(sn->store);
    if (sn->records >= sn->snapshot_records) {
        sl_store_msg_t snap;
        if ((err = sl_store_snapshot(sn->store, &snap)) == SL_OK) {
            err = sl_disk_snapshot(sn->disk, snap.type, snap.body, snap.len);
            sl_store_msg_fini(&snap);
            if (!err)
                sn->records = 0;
        }
    }
    return err;
}

/* A local write's delta: logged, synced, pushed. */
static sl_err local_write(sl_store_node_t *sn, sl_store_msg_t *d) {
    sl_err err = log_record(sn, d);
    if (!err)
        err = commit(sn);
    if (!err)
        push(sn, d, 2);
    sl_store_msg_fini(d);
    return err;
}

sl_err sl_store_node_put(sl_store_node_t *sn, const void *key, size_t key_len, const void *val,
                         size_t val_len) {
    sl_store_msg_t d;
    sl_err err = sl_store_put(sn->store, key, key_len, val, val_len, sl_plat_wall_ms(), &d);
    return err ? err : local_write(sn, &d);
}

sl_err sl_store_node_del(sl_store_node_t *sn, const void *key, size_t key_len) {
    sl_store_msg_t d;
    sl_err err = sl_store_del(sn->store, key, key_len, sl_plat_wall_ms(), &d);
    return err ? err : local_write(sn, &d);
}

sl_store_t *sl_store_node_store(sl_store_node_t *sn) { return sn->store; }

/* ---- messages ---- */

static void learn_peer(sl_store_node_t *sn, const char *addr, uint64_t rid) {
    if (!addr[0] || !rid)
        return;
    for (size_t i = 0; i < sn->peer_count; i++) {
        if (strcmp(sn->peers[i].addr, addr) != 0)
            continue;
        if (sn->peers[i].rid != rid) {
            /* the member restarted: its old incarnation is gone for good */
            sl_store_retire(sn->store, sn->peers[i].rid);
            sn->peers[i].rid = rid;
        }
        return;
    }
    if (sn->peer_count >= MAX_PEERS)
        return;
    peer_rid_t *p = sl_realloc(sn->peers, (sn->peer_count + 1) * sizeof *p);
    if (!p)
        return;
    sn->peers = p;
    snprintf(p[sn->peer_count].addr, sizeof p[sn->peer_count].addr, "%s", addr);
    p[sn->peer_count].rid = rid;
    sn->peer_count++;
}

static void on_msg(void *ctx, sl_node_t *node, uint8_t type, const uint8_t *body, size_t len,
                   uint64_t now_ns) {
    sl_store_node_t *sn = ctx;
    (void)node;
    (void)now_ns;
    sl_store_out_t out;
    sl_store_out_init(&out);
    bool persist = false;
    sl_store_msg_t in = {.type = type, .body = (uint8_t *)body, .len = len};
    sl_err err = sl_store_receive(sn->store, type, body, len, sl_plat_wall_ms(), &out, &persist);
    if (err == SL_OK) {
        if (type == SL_STORE_MSG_DIGEST)
            learn_peer(sn, out.reply_to, out.from);
        if (persist && log_record(sn, &in) != SL_OK)
            sl_log(SL_LOG_ERR, "STORE-WAL", "cannot log a received delta; peers will resend it");
        for (size_t i = 0; i < out.count && out.reply_to[0]; i++)
            send_to(sn, out.reply_to, strlen(out.reply_to), &out.msgs[i]);
    }
    sl_store_out_fini(&out);
}

/* ---- timers ---- */

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Members (alive or not, but not left) as replica ids for garbage
 * collection; a member not heard from yet stands as an id that never
 * answers, which holds collection back. */
static void update_live(sl_store_node_t *sn) {
    const sl_swim_t *sw = sl_node_swim(sn->node);
    size_t count = sl_swim_member_count(sw), n = 0;
    uint64_t *live = sl_calloc(count + 1, sizeof *live);
    if (!live)
        return;
    for (size_t i = 0; i < count; i++) {
        sl_swim_member_t m;
        if (sl_swim_member_at(sw, i, &m) != SL_OK || m.is_self || m.state == SL_STATE_LEFT)
            continue;
        uint64_t rid = sl_hash64(m.addr.ptr, m.addr.len, 77) | (1ull << 63);
        for (size_t k = 0; k < sn->peer_count; k++)
            if (strlen(sn->peers[k].addr) == m.addr.len &&
                memcmp(sn->peers[k].addr, m.addr.ptr, m.addr.len) == 0)
                rid = sn->peers[k].rid;
        live[n++] = rid;
    }
    /* members that left or were reaped: their replica ids go for good */
    for (size_t k = 0; k < sn->peer_count; k++) {
        sl_swim_member_t m;
        sl_bytes_t a = {(const uint8_t *)sn->peers[k].addr, strlen(sn->peers[k].addr)};
        bool member = false;
        for (size_t i = 0; i < count && !member; i++)
            member = sl_swim_member_at(sw, i, &m) == SL_OK && m.state != SL_STATE_LEFT &&
                     m.addr.len == a.len && memcmp(m.addr.ptr, a.ptr, a.len) == 0;
        if (!member)
            sl_store_retire(sn->store, sn->peers[k].rid);
    }
    qsort(live, n, sizeof *live, u64_cmp);
    if (n == sn->live_count && (n == 0 || memcmp(live, sn->live, n * sizeof *live) == 0)) {
        sl_free(live);
        return;
    }
    if (sl_store_set_live(sn->store, live, n) == SL_OK) {
        sl_free(sn->live);
        sn->live = live;
        sn->live_count = n;
    } else {
        sl_free(live);
    }
}

static uint64_t on_tick(void *ctx, sl_node_t *node, uint64_t now_ns) {
    sl_store_node_t *sn = ctx;
    (void)node;
    if (now_ns >= sn->next_sync_ns) {
        sn->next_sync_ns = now_ns + (uint64_t)sn->sync_ms * 1000000ull;
        if (commit(sn) != SL_OK)
            sl_log(SL_LOG_ERR, "STORE-WAL", "cannot sync the store's log");
        sl_store_msg_t d;
        if (sl_store_digest(sn->store, false, &d) == SL_OK) {
            push(sn, &d, 1);
            sl_store_msg_fini(&d);
        }
    }
    if (now_ns >= sn->next_gc_ns) {
        sn->next_gc_ns = now_ns + (uint64_t)GC_MS * 1000000ull;
        update_live(sn);
        sl_store_gc(sn->store);
    }
    return sn->next_sync_ns < sn->next_gc_ns ? sn->next_sync_ns : sn->next_gc_ns;
}

/* ---- commands ---- */

static sl_err reply_err(sl_ctl_call_t *call, sl_err err, const char *msg) {
    return sl_ctl_reply(call, err, msg, strlen(msg), false);
}

static sl_err ctl_put(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    (void)node;
    if (req->arg_count != 2)
        return reply_err(call, SL_EINVAL, "usage: put KEY VALUE");
    sl_err err = sl_store_node_put(ctx, req->args[0].ptr, req->args[0].len, req->args[1].ptr,
                                   req->args[1].len);
    if (err == SL_EINVAL)
        return reply_err(call, err, "key must be 1..512 bytes of UTF-8 and hold a register "
                                    "(not a set, counter or map)");
    if (err == SL_ETOOBIG)
        return reply_err(call, err, "value over 64 KiB: store it as a blob");
    return err ? reply_err(call, err, sl_strerror(err)) : sl_ctl_reply(call, SL_OK, "{}", 2, false);
}

static sl_err ctl_get(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    sl_store_node_t *sn = ctx;
    (void)node;
    if (req->arg_count != 1)
        return reply_err(call, SL_EINVAL, "usage: get KEY");
    const uint8_t *v;
    size_t n;
    sl_err err = sl_store_get(sn->store, req->args[0].ptr, req->args[0].len, &v, &n);
    if (err == SL_ENOTFOUND)
        return reply_err(call, err, "no such key");
    if (err == SL_EINVAL)
        return reply_err(call, err, "the key holds a set, counter or map, not a register");
    return err ? reply_err(call, err, sl_strerror(err)) : sl_ctl_reply(call, SL_OK, v, n, false);
}

static sl_err ctl_del(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    (void)node;
    if (req->arg_count != 1)
        return reply_err(call, SL_EINVAL, "usage: del KEY");
    sl_err err = sl_store_node_del(ctx, req->args[0].ptr, req->args[0].len);
    if (err == SL_ENOTFOUND)
        return reply_err(call, err, "no such key");
    return err ? reply_err(call, err, sl_strerror(err)) : sl_ctl_reply(call, SL_OK, "{}", 2, false);
}

typedef struct {
    sl_bytes_t *keys; /* collected keys (into the arena) */
    size_t count;     /* entries */
    size_t cap;       /* allocated */
} key_list_t;

static bool collect_key(void *ctx, const uint8_t *key, size_t len, const sl_store_entry_t *e) {
    key_list_t *l = ctx;
    (void)e;
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        sl_bytes_t *k = sl_realloc(l->keys, cap * sizeof *k);
        if (!k)
            return false;
        l->keys = k;
        l->cap = cap;
    }
    l->keys[l->count++] = (sl_bytes_t){key, len};
    return true;
}

static int bytes_cmp(const void *a, const void *b) {
    const sl_bytes_t *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->ptr, y->ptr, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static sl_err ctl_keys(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    sl_store_node_t *sn = ctx;
    (void)node;
    if (req->arg_count > 1)
        return reply_err(call, SL_EINVAL, "usage: keys [PREFIX]");
    key_list_t l = {0};
    sl_store_scan(sn->store, req->arg_count ? req->args[0].ptr : NULL,
                  req->arg_count ? req->args[0].len : 0, collect_key, &l);
    if (l.count)
        qsort(l.keys, l.count, sizeof *l.keys, bytes_cmp);
    /* JSON, in parts of about 1 MiB */
    char *buf = sl_malloc(KEYS_PART_LEN + 8 * SL_STORE_MAX_KEY_LEN);
    sl_err err = buf ? SL_OK : SL_ENOMEM;
    size_t n = 0;
    if (buf)
        buf[n++] = '[';
    for (size_t i = 0; !err && i < l.count; i++) {
        if (i)
            buf[n++] = ',';
        buf[n++] = '"';
        for (size_t k = 0; k < l.keys[i].len; k++) {
            uint8_t c = l.keys[i].ptr[k];
            if (c == '"' || c == '\\') {
                buf[n++] = '\\';
                buf[n++] = (char)c;
            } else if (c < 0x20) {
                n += (size_t)snprintf(buf + n, 8, "\\u%04x", c);
            } else {
                buf[n++] = (char)c;
            }
        }
        buf[n++] = '"';
        if (n >= KEYS_PART_LEN) {
            err = sl_ctl_reply(call, SL_OK, buf, n, true);
            n = 0;
        }
    }
    if (!err) {
        buf[n++] = ']';
        err = sl_ctl_reply(call, SL_OK, buf, n, false);
    }
    sl_free(buf);
    sl_free(l.keys);
    return err;
}

/* ---- lifecycle ---- */

sl_err sl_store_node_attach(sl_node_t *node, const sl_store_node_config_t *cfg,
                            sl_store_node_t **out) {
    *out = NULL;
    if (!cfg || !cfg->dir)
        return SL_EINVAL;
    sl_store_node_t *sn = sl_calloc(1, sizeof *sn);
    if (!sn)
        return SL_ENOMEM;
    sn->node = node;
    sn->sync_ms = cfg->sync_ms ? cfg->sync_ms : 200;
    sn->snapshot_records = cfg->snapshot_records ? cfg->snapshot_records : 100000;
    sl_err err = sl_disk_open(cfg->dir, &sn->disk);
    if (err)
        goto fail;
    /* replica id: this peer's name and the store's incarnation */
    const sl_swim_t *sw = sl_node_swim(node);
    uint64_t name_hash = 0;
    for (size_t i = 0; i < sl_swim_member_count(sw); i++) {
        sl_swim_member_t m;
        if (sl_swim_member_at(sw, i, &m) == SL_OK && m.is_self)
            name_hash = sl_hash64(m.name.ptr, m.name.len, 0x5354);
    }
    uint64_t rid = sl_mix64(name_hash ^ sl_mix64(sl_disk_incarnation(sn->disk)));
    rid = rid ? rid : 1;
    sl_rng_seed(&sn->rng, rid);
    sl_store_config_t scfg = {0};
    if ((err = sl_store_new(rid, &scfg, &sn->store)))
        goto fail;
    if ((err = sl_store_set_addr(sn->store, sl_node_addr(node))))
        goto fail;
    if ((err = sl_disk_recover(sn->disk, replay, sn->store)))
        goto fail;
    if (sl_disk_incarnation(sn->disk) > 1)
        sl_store_request_reset(sn->store); /* what we hold may be stale */
    sl_store_mark_durable(sn->store);
    sl_log(SL_LOG_INFO, "STORE-START", "store replica %016" PRIx64 " (incarnation %" PRIu64 ")",
           rid, sl_disk_incarnation(sn->disk));
    if ((err = sl_node_route_register(node, SL_STORE_MSG_DIGEST, SL_STORE_MSG_SNAPSHOT, on_msg, sn)) ||
        (err = sl_node_tick_register(node, on_tick, sn)) ||
        (err = sl_node_ctl_register(node, "put", ctl_put, sn)) ||
        (err = sl_node_ctl_register(node, "get", ctl_get, sn)) ||
        (err = sl_node_ctl_register(node, "del", ctl_del, sn)) ||
        (err = sl_node_ctl_register(node, "keys", ctl_keys, sn)))
        goto fail;
    *out = sn;
    return SL_OK;
fail:
    sl_store_node_destroy(&sn);
    return err;
}

void sl_store_node_destroy(sl_store_node_t **snp) {
    sl_store_node_t *sn = *snp;
    if (!sn)
        return;
    if (sn->disk && sn->store)
        commit(sn);
    sl_store_destroy(&sn->store);
    sl_disk_close(&sn->disk);
    sl_free(sn->peers);
    sl_free(sn->live);
    sl_free(sn);
    *snp = NULL;
}
