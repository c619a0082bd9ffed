/* The store inside the peer daemon: see include/starling/store_node.h. */
#include "starling/store_node.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/addr.h"
#include "starling/disk.h"
#include "starling/hash.h"
#include "starling/net.h"
#include "starling/platform.h"
#include "starling/rng.h"
#include "store/store_round.h"
#include "store/store_spread.h"

#define GC_MS 1000u
#define LIVE_EVERY_MS 30000u /* update_live with no change seen, in case */
#define KEYS_PART_LEN (1u << 20)

/* A local write appended to the WAL but not synced yet: at the end of
 * the loop's turn one sync covers every staged write, then each is pushed
 * to peers, reported to the change hook and, for a put or del from a
 * client, answered. */
typedef struct {
    sl_store_msg_t delta;  /* the write, to push once durable */
    uint8_t *key;          /* its key (sl_malloc'd) */
    size_t key_len;
    sl_ctl_call_t *call;   /* the client's request, deferred (NULL: a module's write) */
} staged_t;

struct sl_store_node {
    sl_node_t *node;              /* the daemon's loop (borrowed) */
    sl_store_t *store;            /* the replica */
    sl_disk_t *disk;              /* its WAL and snapshot */
    sl_rng_t rng;                 /* peer choice for spreading */
    sl_store_round_t *round;      /* anti-entropy: whom to send what (store_round.h) */
    uint32_t snapshot_records;    /* WAL records between snapshots */
    uint64_t records;             /* WAL records since the last snapshot */
    bool dirty;                   /* records appended, not synced */
    uint64_t next_gc_ns;          /* next garbage collection step */
    uint32_t *seen;               /* by round peer id: update_live's pass that last found it a member */
    uint32_t seen_cap;            /* entries allocated */
    bool live_dirty;              /* membership or a replica id changed: update_live */
    uint32_t live_pass;           /* update_live's passes */
    uint64_t next_live_ns;        /* update_live at the latest then, changed or not */
    uint64_t *live;               /* the last list given to sl_store_set_live */
    size_t live_count;            /* entries */
    uint64_t pushed;              /* DELTAs of local writes sent (store_spread.h) */
    uint64_t relayed;             /* received DELTAs sent on to other members */
    sl_store_node_change_fn on_change; /* told of every changed key, or NULL */
    void *on_change_ctx;          /* its context */
    struct {
        sl_store_node_change_fn fn; /* told of every changed key, and of a RESET (key NULL) */
        void *ctx;                  /* its context */
    } listeners[SL_STORE_NODE_MAX_LISTENERS]; /* sl_store_node_listen */
    size_t listener_count;        /* entries */
    char (*blocked)[SL_STORE_MAX_ADDR + 1]; /* test-only: store traffic to and from these is dropped */
    size_t blocked_count;         /* entries */
    uint64_t fault_dropped;       /* messages dropped by the fault command */
    staged_t *staged;             /* writes in the WAL waiting for this turn's sync */
    size_t staged_count;          /* entries */
    size_t staged_cap;            /* allocated */
    uint64_t group_commits;       /* syncs that made staged writes durable */
    uint64_t group_writes;        /* staged writes they covered */
    uint64_t disk_retry_ns;       /* next try of a disk that refused a write */
    uint32_t disk_backoff_ms;     /* wait before the try after it (doubles to DISK_BACKOFF_MAX_MS) */
    uint64_t snap_retry_ns;       /* no snapshot before this (one failed) */
    uint32_t snap_backoff_ms;     /* wait after the next failed snapshot */
    uint64_t disk_refused;        /* local writes refused while the disk was down */
    uint64_t disk_dropped;        /* received deltas and snapshots not applied while it was */
    sl_log_limit_t reply_refused_log; /* STORE-REFUSED: a line per 10 s */
    sl_log_limit_t wal_failed_log;    /* STORE-WAL for received deltas: a line per 10 s */
};

/* A disk that refused a write is tried again after 100 ms, then twice as
 * long each time up to 5 s; a failed snapshot after 1 s, up to 60 s. */
#define DISK_BACKOFF_MS 100u
#define DISK_BACKOFF_MAX_MS 5000u
#define SNAP_BACKOFF_MS 1000u
#define SNAP_BACKOFF_MAX_MS 60000u

/* Replays one record of the disk. Once the disk skipped a bad record, a
 * later DELTA's range may start past what the replica holds (the bad
 * record held the dots between): it is applied from its first dot on
 * (range.from = 0), so that one bad record costs that record and not
 * every later write of its replica. The replica then asks for a RESET
 * snapshot (sl_store_request_reset at every restart), which brings back
 * what the bad record held from any peer that has it. */
static sl_err replay(void *ctx, uint8_t type, const uint8_t *body, size_t len) {
    sl_store_node_t *sn = ctx;
    sl_disk_stats_t ds;
    sl_disk_stats(sn->disk, &ds);
    if (!ds.skipped || type != SL_STORE_MSG_DELTA)
        return sl_store_replay(sn->store, type, body, len);
    sl_store_dmsg_t m;
    sl_err err = sl_store_msg_decode(type, body, len, &m);
    if (err)
        return err;
    sl_store_msg_t again = {0};
    for (uint32_t i = 0; i < m.range_count; i++)
        m.ranges[i].from = 0;
    if (!(err = sl_store_msg_encode(&m, 2 * len + 1024, &again)))
        err = sl_store_replay(sn->store, again.type, again.body, again.len);
    sl_store_msg_fini(&again);
    sl_store_dmsg_fini(&m);
    return err;
}

/* Whether the disk refuses writes now: local writes are then refused
 * before they touch the replica, and received deltas are not applied. */
static bool disk_refuses(const sl_store_node_t *sn) { return sl_disk_down(sn->disk); }

#define DISK_DOWN_MSG "the disk refuses writes (full?): writes are refused until it takes them again; reads go on"

/* Control replies: an error's message, or success's empty object. */
static sl_err reply_err(sl_ctl_call_t *call, sl_err err, const char *msg) {
    return sl_ctl_reply(call, err, msg, strlen(msg), false);
}
static sl_err reply_ok(sl_ctl_call_t *call) {
    static const char empty[] = "{}";
    return sl_ctl_reply(call, SL_OK, empty, sizeof empty - 1, false);
}

static bool is_blocked(const sl_store_node_t *sn, const char *addr) {
    for (size_t i = 0; i < sn->blocked_count; i++)
        if (strcmp(sn->blocked[i], addr) == 0)
            return true;
    return false;
}

static sl_err send_to(sl_store_node_t *sn, const char *addr, size_t addr_len,
                      const sl_store_msg_t *m) {
    char a[SL_STORE_MAX_ADDR + 1];
    if (addr_len > SL_STORE_MAX_ADDR)
        return SL_ETOOBIG;
    memcpy(a, addr, addr_len);
    a[addr_len] = 0;
    if (is_blocked(sn, a)) {
        sn->fault_dropped++;
        return SL_EAGAIN;
    }
    return sl_node_send(sn->node, a, m->type, m->body, m->len);
}

/* A member a DELTA may go to: alive (or suspect), not this peer. */
static bool may_receive(void *ctx, size_t i) {
    sl_swim_member_t m;
    return sl_swim_member_at(ctx, i, &m) == SL_OK && !m.is_self &&
           (m.state == SL_STATE_ALIVE || m.state == SL_STATE_SUSPECT);
}

/* Sends a DELTA on as store_spread.h says: a local write (to every alive
 * member up to SL_SPREAD_PUSH_ALL others, else to SL_SPREAD_FANOUT random
 * ones), or a received one that applied something new (relayed, as
 * received, to SL_SPREAD_FANOUT random members past SL_SPREAD_PUSH_ALL).
 * Every member up to 32 others receives each write of a replica straight
 * from its writer, in order: 32, not 8, since with two random receivers
 * out of 15 a 16-peer study saw others' claims 100-350 ms late and ran
 * each promoted trial 2.4 times (bench/results/study.md). Past 32 it
 * was 2 random members, and anti-entropy for the rest: 0.54 s for a
 * write to reach 100 peers, 4.2 s at 200 (issue 14). */
static void spread(sl_store_node_t *sn, const sl_store_msg_t *m, sl_spread_origin origin) {
    const sl_swim_t *sw = sl_node_swim(sn->node);
    size_t alive = sl_swim_alive_count(sw);
    size_t k = sl_store_spread_fanout(alive ? alive - 1 : 0, origin, m->body, m->len);
    uint32_t to[SL_SPREAD_MAX_TARGETS];
    size_t n = sl_store_spread_pick(&sn->rng, sl_swim_member_count(sw), k, may_receive,
                                    (void *)sw, to);
    for (size_t i = 0; i < n; i++) {
        sl_swim_member_t mm;
        if (sl_swim_member_at(sw, to[i], &mm) == SL_OK)
            send_to(sn, (const char *)mm.addr.ptr, mm.addr.len, m);
    }
    if (origin == SL_SPREAD_RELAY)
        sn->relayed += n;
    else
        sn->pushed += n;
}

static void push(sl_store_node_t *sn, const sl_store_msg_t *m) { spread(sn, m, SL_SPREAD_LOCAL); }

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
    uint64_t now_ns = sl_plat_now_ns();
    sl_err err = sl_disk_sync(sn->disk);
    if (err) { /* down: tried again by on_tick, with back-off */
        sn->disk_retry_ns = now_ns + (uint64_t)sn->disk_backoff_ms * 1000000ull;
        return err;
    }
    sn->dirty = false;
    sn->disk_backoff_ms = DISK_BACKOFF_MS;
    sl_store_mark_durable(sn->store);
    if (sn->records >= sn->snapshot_records && now_ns >= sn->snap_retry_ns) {
        sl_store_msg_t snap;
        if ((err = sl_store_snapshot(sn->store, &snap)) == SL_OK) {
            err = sl_disk_snapshot(sn->disk, snap.type, snap.body, snap.len);
            sl_store_msg_fini(&snap);
        }
        if (!err) {
            sn->records = 0;
            sn->snap_backoff_ms = SNAP_BACKOFF_MS;
        } else { /* the log still holds everything: try later, not at every sync */
            sn->snap_retry_ns = now_ns + (uint64_t)sn->snap_backoff_ms * 1000000ull;
            if (sn->snap_backoff_ms < SNAP_BACKOFF_MAX_MS)
                sn->snap_backoff_ms *= 2;
            err = SL_OK;
        }
    }
    return err;
}

/* A disk that refused a write, tried again when its back-off is over:
 * the queued records, or a probe. Up again, what was queued is durable. */
static void disk_retry(sl_store_node_t *sn, uint64_t now_ns) {
    if (!disk_refuses(sn) || now_ns < sn->disk_retry_ns)
        return;
    if (sl_disk_retry(sn->disk) == SL_OK) {
        commit(sn);
        return;
    }
    if (sn->disk_backoff_ms < DISK_BACKOFF_MAX_MS)
        sn->disk_backoff_ms *= 2;
    sn->disk_retry_ns = now_ns + (uint64_t)sn->disk_backoff_ms * 1000000ull;
}

/* Whether anyone is told of changes (the watch hook or a listener). */
static bool told(const sl_store_node_t *sn) { return sn->on_change || sn->listener_count; }

/* Tells the hook and every listener that `key` changed (e: its entry now,
 * NULL when gone); key NULL tells the listeners that anything may have. */
static void tell(sl_store_node_t *sn, const uint8_t *key, size_t key_len,
                 const sl_store_entry_t *e) {
    if (key && sn->on_change)
        sn->on_change(sn->on_change_ctx, key, key_len, e);
    for (size_t i = 0; i < sn->listener_count; i++)
        sn->listeners[i].fn(sn->listeners[i].ctx, key, key_len, e);
}

/* A local write's delta: logged, synced, pushed. */
static void notify_local(sl_store_node_t *sn, const void *key, size_t key_len) {
    if (!told(sn))
        return;
    sl_store_entry_t e;
    bool live = sl_store_lookup(sn->store, key, key_len, &e) == SL_OK;
    tell(sn, key, key_len, live ? &e : NULL);
}

static uint64_t on_tick(void *ctx, sl_node_t *node, uint64_t now_ns);

/* Appends a local write to the WAL and stages it for the turn's group
 * commit (flush_staged). Takes `d` whatever happens. */
static sl_err stage(sl_store_node_t *sn, sl_store_msg_t *d, const void *key, size_t key_len,
                    sl_ctl_call_t *call) {
    if (sn->staged_count == sn->staged_cap) {
        size_t cap = sn->staged_cap ? 2 * sn->staged_cap : 64;
        staged_t *s = sl_realloc(sn->staged, cap * sizeof *s);
        if (!s) {
            sl_store_msg_fini(d);
            return SL_ENOMEM;
        }
        sn->staged = s;
        sn->staged_cap = cap;
    }
    staged_t *s = &sn->staged[sn->staged_count];
    s->key = sl_malloc(key_len ? key_len : 1);
    sl_err err = s->key ? log_record(sn, d) : SL_ENOMEM;
    if (err) {
        sl_free(s->key);
        sl_store_msg_fini(d);
        return err;
    }
    memcpy(s->key, key, key_len);
    s->key_len = key_len;
    s->delta = *d;
    s->call = call;
    if (sn->staged_count++ == 0)
        sl_node_tick_soon(sn->node, on_tick, sn); /* the group commit ends this turn */
    return SL_OK;
}

/* A DELTA pushed for a turn's writes stays well under the message limit. */
#define PUSH_BATCH_LEN (256u << 10)

/* Pushes staged writes [from, to), which hold contiguous dots of this
 * replica, as one DELTA: a receiver then applies a turn's writes at once,
 * and a peer's several writes for one trial (claim, report, result) cost
 * one message to each member, not one each. The DELTA is spliced from the
 * bytes the core encoded (sl_store_spread_join): each write passes the
 * codec once. It was decoded again and the batch encoded anew (issue 14). */
static void push_run(sl_store_node_t *sn, size_t from, size_t to) {
    if (to - from == 1) {
        push(sn, &sn->staged[from].delta);
        return;
    }
    sl_store_msg_t *run = sl_malloc((to - from) * sizeof *run);
    sl_store_msg_t msg = {0};
    sl_err err = run ? SL_OK : SL_ENOMEM;
    for (size_t i = from; !err && i < to; i++)
        run[i - from] = sn->staged[i].delta;
    if (!err && (err = sl_store_spread_join(run, to - from, SL_MSG_MAX_LEN, &msg)) == SL_OK)
        push(sn, &msg);
    sl_store_msg_fini(&msg);
    sl_free(run);
    if (err) /* one by one, as they were made */
        for (size_t i = from; i < to; i++)
            push(sn, &sn->staged[i].delta);
}

/* Pushes every staged write, in order, in runs of contiguous dots. */
static void push_staged(sl_store_node_t *sn) {
    size_t from = 0, len = 0;
    sl_store_range_t prev = {0, 0, 0};
    for (size_t i = 0; i < sn->staged_count; i++) {
        sl_store_range_t r;
        uint64_t sender;
        const sl_store_msg_t *d = &sn->staged[i].delta;
        bool joins = sl_store_spread_range(d->body, d->len, &sender, &r);
        if (i > from && (!joins || r.rid != prev.rid || r.from != prev.to ||
                         len + sn->staged[i].delta.len > PUSH_BATCH_LEN)) {
            push_run(sn, from, i);
            from = i;
            len = 0;
        }
        if (!joins) { /* (never: a local write is one range) */
            push_run(sn, i, i + 1);
            from = i + 1;
            len = 0;
            continue;
        }
        prev = r;
        len += sn->staged[i].delta.len;
    }
    if (from < sn->staged_count)
        push_run(sn, from, sn->staged_count);
}

/* One sync for every staged write; then they leave the peer. With
 * `answer` false (the node is gone) the requests are only let go. */
static sl_err flush_staged(sl_store_node_t *sn, bool answer) {
    if (!sn->staged_count)
        return SL_OK;
    sl_err err = commit(sn);
    if (err)
        sl_log(SL_LOG_ERR, "STORE-WAL", "cannot sync the store's log: %s; %zu writes refused",
               sl_strerror(err), sn->staged_count);
    else {
        sn->group_commits++;
        sn->group_writes += sn->staged_count;
    }
    if (!err && answer)
        push_staged(sn);
    for (size_t i = 0; i < sn->staged_count; i++) {
        staged_t *s = &sn->staged[i];
        if (!err && answer)
            notify_local(sn, s->key, s->key_len);
        if (s->call && answer) {
            if (err)
                reply_err(s->call, err, "cannot sync the write to disk");
            else
                reply_ok(s->call);
        }
        sl_ctl_call_free(&s->call);
        sl_store_msg_fini(&s->delta);
        sl_free(s->key);
    }
    sn->staged_count = 0;
    return err;
}

/* A write durable before the call returns: staged and flushed at once,
 * with the writes staged before it (so they leave in order, and a
 * receiver never sees this one before them). */
static sl_err write_now(sl_store_node_t *sn, sl_store_msg_t *d, const void *key,
                        size_t key_len) {
    sl_err err = stage(sn, d, key, key_len, NULL);
    return err ? err : flush_staged(sn, true);
}

sl_err sl_store_node_put(sl_store_node_t *sn, const void *key, size_t key_len, const void *val,
                         size_t val_len) {
    if (disk_refuses(sn)) {
        sn->disk_refused++;
        return SL_EIO;
    }
    sl_store_msg_t d;
    sl_err err = sl_store_put(sn->store, key, key_len, val, val_len, sl_plat_wall_ms(), &d);
    return err ? err : write_now(sn, &d, key, key_len);
}

sl_err sl_store_node_del(sl_store_node_t *sn, const void *key, size_t key_len) {
    if (disk_refuses(sn)) {
        sn->disk_refused++;
        return SL_EIO;
    }
    sl_store_msg_t d;
    sl_err err = sl_store_del(sn->store, key, key_len, sl_plat_wall_ms(), &d);
    return err ? err : write_now(sn, &d, key, key_len);
}

sl_err sl_store_node_put_later(sl_store_node_t *sn, const void *key, size_t key_len,
                               const void *val, size_t val_len) {
    if (disk_refuses(sn)) {
        sn->disk_refused++;
        return SL_EIO;
    }
    sl_store_msg_t d;
    sl_err err = sl_store_put(sn->store, key, key_len, val, val_len, sl_plat_wall_ms(), &d);
    return err ? err : stage(sn, &d, key, key_len, NULL);
}

void sl_store_node_on_change(sl_store_node_t *sn, sl_store_node_change_fn fn, void *ctx) {
    sn->on_change = fn;
    sn->on_change_ctx = ctx;
}

sl_err sl_store_node_listen(sl_store_node_t *sn, sl_store_node_change_fn fn, void *ctx) {
    if (!fn)
        return SL_EINVAL;
    if (sn->listener_count == SL_STORE_NODE_MAX_LISTENERS)
        return SL_EBUSY;
    sn->listeners[sn->listener_count].fn = fn;
    sn->listeners[sn->listener_count].ctx = ctx;
    sn->listener_count++;
    return SL_OK;
}

sl_store_t *sl_store_node_store(sl_store_node_t *sn) { return sn->store; }

/* ---- messages ---- */

/* What a DIGEST or SUMMARY tells of its sender: its replica id and its
 * fingerprint. */
static void learn_peer(sl_store_node_t *sn, const char *addr, uint64_t rid, uint64_t fp) {
    uint32_t id;
    if (!addr[0] || !rid || sl_store_round_peer(sn->round, addr, strlen(addr), true, &id) != SL_OK)
        return;
    uint64_t old;
    sl_store_round_heard(sn->round, id, rid, fp, &old);
    if (old && old != rid)
        sl_store_retire(sn->store, old); /* restarted: its old incarnation is gone for good */
    if (old != rid)
        sn->live_dirty = true;
}

/* Test-only partitions: is this message from a blocked peer? DELTAs
 * carry no address: they come from a replica id learnt from its digests. */
static bool from_blocked(const sl_store_node_t *sn, uint8_t type, const uint8_t *body, size_t len) {
    sl_store_dmsg_t m;
    if (sl_store_msg_decode(type, body, len, &m) != SL_OK)
        return false;
    bool blocked = false;
    if (m.reply_to_len) {
        char a[SL_STORE_MAX_ADDR + 1];
        memcpy(a, m.reply_to, m.reply_to_len);
        a[m.reply_to_len] = 0;
        blocked = is_blocked(sn, a);
    }
    for (uint32_t i = 0; !blocked && i < sl_store_round_peer_count(sn->round); i++)
        blocked = sl_store_round_peer_rid(sn->round, i) == m.sender &&
                  is_blocked(sn, sl_store_round_peer_key(sn->round, i));
    sl_store_dmsg_fini(&m);
    return blocked;
}

/* Tells the change hook of every key a received message changed, as the
 * store reports them (no second decode), with the key's value now (NULL:
 * deleted or empty); a SNAPSHOT replaced the map: not told key by key. */
static void notify_received(sl_store_node_t *sn, const sl_store_out_t *out) {
    if (!told(sn))
        return;
    if (out->all_changed) {
        tell(sn, NULL, 0, NULL);
        return;
    }
    for (size_t i = 0; i < out->changed_count; i++) {
        const sl_store_key_t *k = &out->changed[i];
        sl_store_entry_t e;
        bool live = sl_store_lookup(sn->store, k->key, k->key_len, &e) == SL_OK;
        tell(sn, k->key, k->key_len, live ? &e : NULL);
    }
}

static void on_msg(void *ctx, sl_node_t *node, uint8_t type, const uint8_t *body, size_t len,
                   uint64_t now_ns) {
    sl_store_node_t *sn = ctx;
    (void)now_ns;
    sl_store_out_t out;
    sl_store_out_init(&out);
    out.list_changed = told(sn);
    bool persist = false;
    sl_store_msg_t in = {.type = type, .body = (uint8_t *)body, .len = len};
    if (sn->blocked_count && from_blocked(sn, type, body, len)) {
        sn->fault_dropped++;
        return;
    }
    if ((type == SL_STORE_MSG_DELTA || type == SL_STORE_MSG_SNAPSHOT) && disk_refuses(sn)) {
        /* not applied, so not in our version vector: anti-entropy sends it
           again once the disk takes writes (docs/store.md) */
        sn->disk_dropped++;
        return;
    }
    sl_err err = sl_store_receive(sn->store, type, body, len, sl_plat_wall_ms(), &out, &persist);
    if (err != SL_OK && err != SL_ENOMEM)
        sl_node_bad_input(node, "store"); /* refused (and logged, rate-limited) by the store */
    if (err == SL_OK && persist)
        notify_received(sn, &out);
    /* Answers go only to the sender's own host, and only to a numeric
     * address: else a SUMMARY naming a third party would have us send it
     * our deltas, and a host name would stall ZeroMQ's I/O thread in DNS
     * (issue 12, items 5 and 8; docs/security.md). */
    if (err == SL_OK && out.reply_to[0] &&
        (!sl_addr_is_numeric((const uint8_t *)out.reply_to, strlen(out.reply_to)) ||
         !sl_net_in_from(sl_node_net(node), out.reply_to))) {
        sl_node_bad_input(node, "store");
        uint64_t left_out;
        if (sl_log_limit(&sn->reply_refused_log, now_ns / 1000000, 10000, &left_out)) {
            for (char *c = out.reply_to; *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                    *c = '?';
            const char *peer = sl_net_in_peer(sl_node_net(node));
            sl_log(SL_LOG_WARNING, "STORE-REFUSED",
                   "refused a store %s whose reply address %s is %s (it came from %s); %" PRIu64
                   " more refused since the last such line",
                   type == SL_STORE_MSG_DIGEST ? "DIGEST" : "SUMMARY", out.reply_to,
                   sl_addr_is_numeric((const uint8_t *)out.reply_to, strlen(out.reply_to))
                       ? "not the sender's own"
                       : "not a numeric HOST:PORT",
                   peer[0] ? peer : "?", left_out);
        }
        out.reply_to[0] = 0;
    }
    if (err == SL_OK) {
        if (type == SL_STORE_MSG_DIGEST || type == SL_STORE_MSG_SUMMARY)
            learn_peer(sn, out.reply_to, out.from, out.peer_fp);
        uint64_t left_out;
        if (persist && log_record(sn, &in) != SL_OK &&
            sl_log_limit(&sn->wal_failed_log, now_ns / 1000000, 10000, &left_out))
            sl_log(SL_LOG_ERR, "STORE-WAL",
                   "cannot log a received delta; peers will resend it (%" PRIu64
                   " more not logged in the 10 s before)", left_out);
        for (size_t i = 0; i < out.count && out.reply_to[0]; i++)
            send_to(sn, out.reply_to, strlen(out.reply_to), &out.msgs[i]);
        /* news travels on, as it came (store_spread.h); a duplicate stops */
        if (persist && type == SL_STORE_MSG_DELTA)
            spread(sn, &in, SL_SPREAD_RELAY);
    }
    sl_store_out_fini(&out);
    /* deltas kept past a gap that this one filled: received now, as if
       they had just come (logged, told); they waited for anti-entropy */
    if (err == SL_OK && persist && type != SL_STORE_MSG_DIGEST && type != SL_STORE_MSG_SUMMARY) {
        sl_store_msg_t ready;
        while (sl_store_take_ready(sn->store, &ready) == SL_OK) {
            on_msg(sn, node, ready.type, ready.body, ready.len, now_ns);
            sl_store_msg_fini(&ready);
        }
    }
}

/* Members of a join or refutation that one peer makes urgent, on
 * average (on_member). */
#define URGENT_FANOUT 3

/* Whether this peer takes a member that joined or refuted a suspicion as
 * urgent: with URGENT_FANOUT chances in the number of other members, so
 * that about that many members exchange with it at once, whatever N (at
 * most 4 peers: every one, as before). */
static bool urgent_pick(sl_store_node_t *sn) {
    size_t alive = sl_swim_alive_count(sl_node_swim(sn->node));
    size_t others = alive > 1 ? alive - 1 : 1;
    return others <= URGENT_FANOUT || sl_rng_below(&sn->rng, others) < URGENT_FANOUT;
}

/* A member that came back (from dead or left) gets our DIGEST at the next
 * round: we sent it nothing while it was down, and what we heard from it
 * may be stale. A member that joined or refuted a suspicion (a new
 * incarnation: maybe a quick restart) gets it from about URGENT_FANOUT
 * members: every member made each one urgent, so a joiner received N - 1
 * DIGESTs and answered each with its own (and sent one to each member
 * itself), and each refutation in a storm of suspicions brought N - 1
 * more: O(N) exchanges of O(N)-entry digests per join, O(N^2) for a
 * cluster forming, on peers already short of CPU (bench/results/scale.md,
 * "Starting 150-200 peers at once"). The joiner pulls the store from the
 * members it picks, and the rounds (a DIGEST to members whose fingerprint
 * differs while the state changes, a SUMMARY each second after) reach
 * the rest. */
static void on_member(void *ctx, sl_node_t *node, const sl_swim_event_t *ev) {
    sl_store_node_t *sn = ctx;
    sn->live_dirty = true; /* a member joined, changed state, left or was reaped */
    const char *self = sl_node_addr(node);
    if (ev->addr.len == strlen(self) && memcmp(ev->addr.ptr, self, ev->addr.len) == 0)
        return; /* this peer (a refuted suspicion) */
    bool up = ev->kind != SL_SWIM_EV_REAP &&
              (ev->new_state == SL_STATE_ALIVE || ev->new_state == SL_STATE_SUSPECT);
    bool returned = ev->kind == SL_SWIM_EV_STATE && ev->new_state == SL_STATE_ALIVE &&
                    (ev->old_state == SL_STATE_DEAD || ev->old_state == SL_STATE_LEFT);
    bool renewed = ev->new_state == SL_STATE_ALIVE &&
                   (ev->kind == SL_SWIM_EV_JOIN || ev->kind == SL_SWIM_EV_STATE ||
                    (ev->kind == SL_SWIM_EV_UPDATE && ev->incarnation != ev->old_incarnation));
    bool back = returned || (renewed && urgent_pick(sn));
    uint32_t id;
    if (sl_store_round_peer(sn->round, ev->addr.ptr, ev->addr.len, up, &id) != SL_OK)
        return;
    sl_store_round_set_up(sn->round, id, up);
    if (back)
        sl_store_round_back(sn->round, id); /* a round at the next turn */
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
    sn->live_dirty = false;
    uint32_t pass = ++sn->live_pass;
    /* every alive member a peer of the round (up), the others not: what
       membership's events said, in case one was dropped from its queue */
    for (size_t i = 0; i < count; i++) {
        sl_swim_member_t m;
        if (sl_swim_member_at(sw, i, &m) != SL_OK || m.state == SL_STATE_LEFT)
            continue;
        bool up = !m.is_self && (m.state == SL_STATE_ALIVE || m.state == SL_STATE_SUSPECT);
        uint32_t id;
        bool known = sl_store_round_peer(sn->round, m.addr.ptr, m.addr.len, up, &id) == SL_OK;
        if (known && id >= sn->seen_cap) {
            uint32_t cap = sn->seen_cap ? sn->seen_cap : 64;
            while (cap <= id)
                cap *= 2;
            uint32_t *seen = sl_realloc(sn->seen, cap * sizeof *seen);
            if (!seen) {
                sl_free(live);
                sn->live_dirty = true;
                return;
            }
            memset(seen + sn->seen_cap, 0, (cap - sn->seen_cap) * sizeof *seen);
            sn->seen = seen;
            sn->seen_cap = cap;
        }
        if (known) {
            sn->seen[id] = pass;
            sl_store_round_set_up(sn->round, id, up);
        }
        if (m.is_self)
            continue;
        uint64_t rid = known ? sl_store_round_peer_rid(sn->round, id) : 0;
        live[n++] = rid ? rid : sl_hash64(m.addr.ptr, m.addr.len, 77) | (1ull << 63);
    }
    /* members that left or were reaped: their replica ids go for good,
       and the round forgets them (a returning one is met anew) */
    for (uint32_t k = 0; k < sl_store_round_peer_count(sn->round); k++) {
        if (k < sn->seen_cap && sn->seen[k] == pass)
            continue;
        if (sl_store_round_peer_rid(sn->round, k))
            sl_store_retire(sn->store, sl_store_round_peer_rid(sn->round, k));
        sl_store_round_forget(sn->round, k);
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

/* One anti-entropy round: the core (store_round.h) says whom to send
 * our DIGEST or SUMMARY, or nobody (at rest, once every member agrees). */
static void round_run(sl_store_node_t *sn, uint64_t now_ns) {
    sl_store_round_pick_t pick;
    sl_store_round_run(sn->round, now_ns, sl_store_fingerprint(sn->store), &pick);
    if (pick.kind == SL_STORE_ROUND_QUIET)
        return;
    sl_store_msg_t msg;
    sl_err err = pick.kind == SL_STORE_ROUND_DIGEST ? sl_store_digest(sn->store, false, &msg)
                                                    : sl_store_summary(sn->store, false, &msg);
    if (err)
        return;
    const char *to = sl_store_round_peer_key(sn->round, pick.peer);
    if (send_to(sn, to, strlen(to), &msg) == SL_OK)
        sl_store_round_sent(sn->round, &pick);
    sl_store_msg_fini(&msg);
}

static uint64_t on_tick(void *ctx, sl_node_t *node, uint64_t now_ns) {
    sl_store_node_t *sn = ctx;
    (void)node;
    flush_staged(sn, true);
    disk_retry(sn, now_ns);
    if (now_ns >= sl_store_round_due_ns(sn->round)) {
        if (!disk_refuses(sn))
            commit(sn); /* a failure puts the disk down, logged once (DISK-DOWN) */
        round_run(sn, now_ns);
    }
    if (now_ns >= sn->next_gc_ns) {
        sn->next_gc_ns = now_ns + (uint64_t)GC_MS * 1000000ull;
        /* the live list when membership or a replica id changed (and every
           LIVE_EVERY_MS in any case): it looked at every pair of member
           and peer each second */
        if (sn->live_dirty || now_ns >= sn->next_live_ns) {
            sn->next_live_ns = now_ns + (uint64_t)LIVE_EVERY_MS * 1000000ull;
            update_live(sn);
        }
        sl_store_gc(sn->store);
    }
    uint64_t next_sync_ns = sl_store_round_due_ns(sn->round);
    uint64_t next = next_sync_ns < sn->next_gc_ns ? next_sync_ns : sn->next_gc_ns;
    return disk_refuses(sn) && sn->disk_retry_ns < next ? sn->disk_retry_ns : next;
}

static size_t store_stats(void *ctx, sl_node_counter_t *out, size_t cap) {
    sl_store_node_t *sn = ctx;
    sl_store_stats_t st;
    sl_store_stats(sn->store, &st);
    sl_store_round_stats_t rs;
    sl_store_round_stats(sn->round, &rs);
    sl_disk_stats_t ds;
    sl_disk_stats(sn->disk, &ds);
    sl_node_counter_t c[] = {{"keys", st.keys},
                             {"replicas", st.replicas},
                             {"applied", st.applied},
                             {"gaps", st.gaps},
                             {"rejected", st.rejected},
                             {"forged", st.forged},
                             {"healed", st.healed},
                             {"resent", st.resent},
                             {"rejoined", st.rejoined},
                             {"seq", sl_store_vv_get(sn->store, sl_store_rid(sn->store))},
                             {"deltas_sent", st.deltas_sent},
                             {"snapshots_sent", st.snapshots_sent},
                             {"digests_sent", rs.digests_sent},
                             {"summaries_sent", rs.summaries_sent},
                             {"rounds_silent", rs.rounds_silent},
                             {"pushed", sn->pushed},
                             {"relayed", sn->relayed},
                             {"fault_dropped", sn->fault_dropped},
                             {"group_commits", sn->group_commits},
                             {"group_writes", sn->group_writes},
                             {"wal_syncs", ds.syncs},
                             {"disk_down", ds.down},
                             {"disk_refused", sn->disk_refused},
                             {"disk_dropped", sn->disk_dropped},
                             {"disk_corrupt", ds.corrupt},
                             {"state_hash", sl_store_state_hash(sn->store)}};
    size_t n = sizeof c / sizeof c[0] < cap ? sizeof c / sizeof c[0] : cap;
    memcpy(out, c, n * sizeof *c);
    return n;
}

/* ---- commands ---- */

/* A client's put or del: answered once the turn's group commit made it
 * durable. */
static sl_err stage_request(sl_store_node_t *sn, sl_store_msg_t *d, const void *key,
                            size_t key_len, sl_ctl_call_t *call) {
    sl_ctl_call_t *later = sl_ctl_defer(call);
    if (!later) {
        sl_store_msg_fini(d);
        return SL_ENOMEM;
    }
    sl_err err = stage(sn, d, key, key_len, later);
    if (err) {
        reply_err(later, err, "cannot append the write to the log");
        sl_ctl_call_free(&later);
    }
    return SL_OK;
}

static sl_err ctl_put(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    (void)node;
    if (req->arg_count != 2)
        return reply_err(call, SL_EINVAL, "usage: put KEY VALUE");
    sl_store_node_t *sn = ctx;
    if (disk_refuses(sn)) {
        sn->disk_refused++;
        return reply_err(call, SL_EIO, DISK_DOWN_MSG);
    }
    sl_store_msg_t d;
    sl_err err = sl_store_put(sn->store, req->args[0].ptr, req->args[0].len, req->args[1].ptr,
                              req->args[1].len, sl_plat_wall_ms(), &d);
    if (!err)
        return stage_request(sn, &d, req->args[0].ptr, req->args[0].len, call);
    if (err == SL_EINVAL && !sl_store_key_valid(req->args[0].ptr, req->args[0].len))
        return reply_err(call, err, "key must be 1..512 bytes of UTF-8 without control characters");
    if (err == SL_EINVAL)
        return reply_err(call, err, "key holds a set, counter or map, not a register");
    if (err == SL_ETOOBIG)
        return reply_err(call, err, "value over 64 KiB: store it as a blob");
    return err ? reply_err(call, err, sl_strerror(err)) : reply_ok(call);
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
    sl_store_node_t *sn = ctx;
    if (disk_refuses(sn)) {
        sn->disk_refused++;
        return reply_err(call, SL_EIO, DISK_DOWN_MSG);
    }
    sl_store_msg_t d;
    sl_err err = sl_store_del(sn->store, req->args[0].ptr, req->args[0].len, sl_plat_wall_ms(), &d);
    if (!err)
        return stage_request(sn, &d, req->args[0].ptr, req->args[0].len, call);
    if (err == SL_ENOTFOUND)
        return reply_err(call, err, "no such key");
    if (err == SL_EINVAL)
        return reply_err(call, err, "key must be 1..512 bytes of UTF-8 without control characters");
    return err ? reply_err(call, err, sl_strerror(err)) : reply_ok(call);
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

/* store-fault block ADDR... | heal: test-only partitions (benchmarks and
 * cluster tests): store messages to and from the listed peers' store
 * addresses are dropped until heal. Membership is left alone, so this
 * splits the store's traffic only (bench/store/cluster.py). */
static sl_err ctl_fault(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    sl_store_node_t *sn = ctx;
    if (!sl_node_test_faults(node)) { /* never in production (docs/security.md) */
        sl_node_bad_input(node, "store");
        return reply_err(call, SL_EAUTH, "store-fault is a test-only command: it answers only a "
                         "peer started with --test-faults");
    }
    if (req->arg_count == 1 && req->args[0].len == 4 && !memcmp(req->args[0].ptr, "heal", 4)) {
        sl_free(sn->blocked);
        sn->blocked = NULL;
        sn->blocked_count = 0;
        sl_store_round_heal(sn->round); /* as membership would after a heal */
        return reply_ok(call);
    }
    if (req->arg_count < 2 || req->args[0].len != 5 || memcmp(req->args[0].ptr, "block", 5))
        return reply_err(call, SL_EINVAL, "usage: store-fault block ADDR... | store-fault heal");
    size_t n = req->arg_count - 1;
    char(*b)[SL_STORE_MAX_ADDR + 1] = sl_calloc(n, sizeof *b);
    if (!b)
        return SL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const sl_bytes_t *a = &req->args[i + 1];
        size_t l = a->len > SL_STORE_MAX_ADDR - 6 ? SL_STORE_MAX_ADDR - 6 : a->len;
        /* "tcp://" as the store's addresses carry it */
        bool has = l >= 6 && !memcmp(a->ptr, "tcp://", 6);
        snprintf(b[i], sizeof b[i], "%s%.*s", has ? "" : "tcp://", (int)l, (const char *)a->ptr);
    }
    sl_free(sn->blocked);
    sn->blocked = b;
    sn->blocked_count = n;
    return reply_ok(call);
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
    sn->snapshot_records = cfg->snapshot_records ? cfg->snapshot_records : 100000;
    sl_err err = sl_disk_open(cfg->dir, &sn->disk);
    if (err)
        goto fail;
    sn->disk_backoff_ms = DISK_BACKOFF_MS;
    sn->snap_backoff_ms = SNAP_BACKOFF_MS;
    /* replica id: the data directory's random id (made at its first open,
       never the peer's name: a peer back under its name on an empty disk
       is a new replica and catches up in full) and the store's
       incarnation (each start a new replica, so no dot is reused) */
    uint64_t rid = sl_mix64(sl_hash64(sl_disk_id(sn->disk), SL_DISK_ID_LEN, 0x5354) ^
                            sl_mix64(sl_disk_incarnation(sn->disk)));
    rid = rid ? rid : 1;
    sl_rng_seed(&sn->rng, rid);
    sl_store_round_config_t rcfg = {.sync_ms = cfg->sync_ms, .idle_ms = cfg->idle_ms,
                                    .refresh_ms = cfg->refresh_ms};
    if ((err = sl_store_round_new(&rcfg, sl_mix64(rid), &sn->round)))
        goto fail;
    sl_store_config_t scfg = {0};
    if ((err = sl_store_new(rid, &scfg, &sn->store)))
        goto fail;
    if ((err = sl_store_set_addr(sn->store, sl_node_addr(node))))
        goto fail;
    if ((err = sl_disk_recover(sn->disk, replay, sn)))
        goto fail;
    if (sl_disk_incarnation(sn->disk) > 1)
        sl_store_request_reset(sn->store); /* what we hold may be stale */
    sl_store_mark_durable(sn->store);
    sl_log(SL_LOG_INFO, "STORE-START", "store replica %016" PRIx64 " (incarnation %" PRIu64 ")",
           rid, sl_disk_incarnation(sn->disk));
    if ((err = sl_node_route_register(node, SL_STORE_MSG_DIGEST, SL_STORE_MSG_SUMMARY, on_msg, sn)) ||
        (err = sl_node_tick_register(node, on_tick, sn)) ||
        (err = sl_node_member_listen(node, on_member, sn)) ||
        (err = sl_node_stats_register(node, "store", store_stats, sn)) ||
        (err = sl_node_ctl_register(node, "put", ctl_put, sn)) ||
        (err = sl_node_ctl_register(node, "get", ctl_get, sn)) ||
        (err = sl_node_ctl_register(node, "del", ctl_del, sn)) ||
        (err = sl_node_ctl_register(node, "keys", ctl_keys, sn)) ||
        (err = sl_node_ctl_register(node, "store-fault", ctl_fault, sn)))
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
    if (sn->disk && sn->store) {
        flush_staged(sn, false);
        commit(sn);
    }
    sl_free(sn->staged);
    sl_store_destroy(&sn->store);
    sl_disk_close(&sn->disk);
    sl_store_round_destroy(&sn->round);
    sl_free(sn->seen);
    sl_free(sn->live);
    sl_free(sn->blocked);
    sl_free(sn);
    *snp = NULL;
}
