/* watch-keys: streams store changes to clients (store_watch.h). */
#include "starling/store_watch.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "starling/common.h"
#include "starling/crdt.h"
#include "starling/mpack.h"
#include "starling/platform.h"

#define FLUSH_MS 20u
/* Bytes of lines per reply part. Small, because ZeroMQ bounds its queue to
 * a client in messages (1,024 on a control socket), not bytes: with parts
 * of up to 1 MiB a client that did not read pinned up to 1 GiB in that
 * queue (75 MB a watch in the campaign) and the watch never ended, as
 * its own backlog always went out. 4 KiB parts bound the queue to about
 * 4 MiB, and a full queue leaves the rest in the watch's backlog, which
 * is what ends it. */
#define PART_MAX 4096u
/* A watch whose parts all stay refused this long ends: its client is gone
 * (or reads nothing, not even the keepalives). */
#define STALL_MS (2u * SL_STORE_WATCH_KEEPALIVE_MS)
/* The watch's own backlog: with the connection's queue (1,024 parts of at
 * most PART_MAX) a watch holds at most SL_STORE_WATCH_MAX_BACKLOG here. */
#define BACKLOG_MAX (SL_STORE_WATCH_MAX_BACKLOG - 1024u * PART_MAX)

typedef struct {
    sl_ctl_call_t *call;                  /* the deferred request */
    uint8_t prefix[SL_STORE_MAX_KEY_LEN]; /* keys reported start with it */
    size_t prefix_len;
    char *buf;                            /* lines not sent yet */
    size_t len, cap;
    uint64_t next_keepalive_ns;           /* when an empty part is due */
    uint64_t stalled_since_ns;            /* first refused part since one went (0: none) */
} watcher_t;

struct sl_store_watch {
    sl_store_node_t *sn;
    watcher_t w[SL_STORE_WATCH_MAX];
    size_t count;
    uint64_t next_flush_ns; /* batches go out no more often than FLUSH_MS */
    uint64_t started;       /* watches opened */
    uint64_t ended;         /* watches ended: client gone, too slow */
    uint64_t ended_behind;  /* of which: over SL_STORE_WATCH_MAX_BACKLOG behind */
};

/* ---- formatting ---- */

static bool reserve(watcher_t *w, size_t more) {
    if (w->len + more <= w->cap)
        return true;
    if (w->len + more > BACKLOG_MAX)
        return false;
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < w->len + more)
        cap *= 2;
    char *b = sl_realloc(w->buf, cap);
    if (!b)
        return false;
    w->buf = b;
    w->cap = cap;
    return true;
}

/* Appends `p` as a JSON string; the caller reserved 6 bytes per byte + 2. */
static void put_json_string(watcher_t *w, const uint8_t *p, size_t n) {
    w->buf[w->len++] = '"';
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '"' || p[i] == '\\') {
            w->buf[w->len++] = '\\';
            w->buf[w->len++] = (char)p[i];
        } else if (p[i] < 0x20 || p[i] == 0x7f) {
            w->len += (size_t)snprintf(w->buf + w->len, 7, "\\u%04x", p[i]);
        } else {
            w->buf[w->len++] = (char)p[i];
        }
    }
    w->buf[w->len++] = '"';
}

static void put_raw(watcher_t *w, const char *s) {
    size_t n = strlen(s);
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

/* One line for one change; false when the watch's backlog is full. */
static bool append_change(watcher_t *w, const uint8_t *key, size_t key_len,
                          const sl_store_entry_t *e) {
    size_t val_len = e && e->type == SL_CRDT_LWW ? e->val_len : 0;
    if (!reserve(w, 6 * (key_len + val_len) + 128))
        return false;
    put_raw(w, "{\"key\":");
    put_json_string(w, key, key_len);
    if (!e) {
        put_raw(w, ",\"deleted\":true}\n");
        return true;
    }
    switch (e->type) {
    case SL_CRDT_LWW:
        put_raw(w, ",\"type\":\"register\",\"value\":");
        if (sl_mpack_utf8_valid(e->val, e->val_len)) {
            put_json_string(w, e->val, e->val_len);
            put_raw(w, ",\"encoding\":\"utf-8\"}\n");
        } else {
            w->buf[w->len++] = '"';
            sodium_bin2base64(w->buf + w->len, w->cap - w->len, e->val, e->val_len,
                              sodium_base64_VARIANT_ORIGINAL);
            w->len += strlen(w->buf + w->len);
            put_raw(w, "\",\"encoding\":\"base64\"}\n");
        }
        break;
    case SL_CRDT_COUNTER:
        w->len += (size_t)snprintf(w->buf + w->len, 64, ",\"type\":\"counter\",\"value\":%" PRId64 "}\n",
                                   sl_crdt_counter_value(e->crdt));
        break;
    case SL_CRDT_SET:
        put_raw(w, ",\"type\":\"set\"}\n");
        break;
    default:
        put_raw(w, ",\"type\":\"map\"}\n");
        break;
    }
    return true;
}

/* ---- watches ---- */

static void on_change(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e);

static void drop(sl_store_watch_t *sw, size_t i, const char *why) {
    watcher_t *w = &sw->w[i];
    if (why)
        sl_ctl_reply(w->call, SL_EAGAIN, why, strlen(why), false);
    sl_ctl_call_free(&w->call);
    size_t cap = w->cap;
    sl_free(w->buf);
    sw->w[i] = sw->w[--sw->count];
    sw->ended++;
    if (!sw->count)
        sl_store_node_on_change(sw->sn, NULL, NULL);
    if (cap >= (64u << 10))
        sl_plat_trim_memory(); /* a backlog of megabytes stops counting as resident */
}

static void on_change(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e) {
    sl_store_watch_t *sw = ctx;
    for (size_t i = sw->count; i-- > 0;) {
        watcher_t *w = &sw->w[i];
        if (key_len < w->prefix_len || memcmp(key, w->prefix, w->prefix_len) != 0)
            continue;
        if (!append_change(w, key, key_len, e)) {
            sw->ended_behind++;
            drop(sw, i, "watch fell too far behind (over 8 MiB of changes not read); "
                        "start it again");
        }
    }
}

/* Sends a watch's backlog in parts of at most PART_MAX bytes, cut at line
 * ends (a longer line goes whole); what the connection's queue refuses
 * stays in the backlog for the next flush. False when nothing went. */
static bool flush(watcher_t *w) {
    size_t off = 0;
    while (off < w->len) {
        size_t n = w->len - off;
        if (n > PART_MAX) {
            n = PART_MAX;
            while (n > 1 && w->buf[off + n - 1] != '\n')
                n--;
            if (w->buf[off + n - 1] != '\n') { /* one line longer than a part */
                const char *nl = memchr(w->buf + off, '\n', w->len - off);
                n = nl ? (size_t)(nl - (w->buf + off)) + 1 : w->len - off;
            }
        }
        if (sl_ctl_reply(w->call, SL_OK, w->buf + off, n, true) != SL_OK)
            break;
        off += n;
    }
    memmove(w->buf, w->buf + off, w->len - off);
    w->len -= off;
    return off > 0;
}

static uint64_t on_tick(void *ctx, sl_node_t *node, uint64_t now_ns) {
    sl_store_watch_t *sw = ctx;
    (void)node;
    if (!sw->count)
        return 0;
    if (now_ns < sw->next_flush_ns)
        return sw->next_flush_ns;
    sw->next_flush_ns = now_ns + FLUSH_MS * 1000000ull;
    for (size_t i = sw->count; i-- > 0;) {
        watcher_t *w = &sw->w[i];
        bool ok = true;
        if (w->len)
            ok = flush(w);
        else if (now_ns >= w->next_keepalive_ns)
            ok = sl_ctl_reply(w->call, SL_OK, NULL, 0, true) == SL_OK;
        else
            continue;
        if (ok) {
            w->stalled_since_ns = 0;
            w->next_keepalive_ns = now_ns + SL_STORE_WATCH_KEEPALIVE_MS * 1000000ull;
        } else if (!w->stalled_since_ns) {
            w->stalled_since_ns = now_ns;
        } else if (now_ns - w->stalled_since_ns >= STALL_MS * 1000000ull) {
            drop(sw, i, NULL); /* its client is gone or reads nothing */
        }
    }
    return sw->count ? sw->next_flush_ns : 0;
}

static sl_err ctl_watch(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    sl_store_watch_t *sw = ctx;
    (void)node;
    const char *msg = NULL;
    sl_err status = SL_EINVAL;
    if (req->arg_count > 1)
        msg = "usage: watch-keys [PREFIX]";
    else if (req->arg_count && req->args[0].len > SL_STORE_MAX_KEY_LEN)
        msg = "the prefix is longer than a key may be (512 bytes)";
    else if (sw->count == SL_STORE_WATCH_MAX) {
        msg = "this peer already serves 64 watches; end one or watch through another peer";
        status = SL_EBUSY;
    }
    if (msg)
        return sl_ctl_reply(call, status, msg, strlen(msg), false);
    watcher_t *w = &sw->w[sw->count];
    memset(w, 0, sizeof *w);
    if (!(w->call = sl_ctl_defer(call)))
        return SL_ENOMEM;
    if (req->arg_count) {
        w->prefix_len = req->args[0].len;
        memcpy(w->prefix, req->args[0].ptr, w->prefix_len);
    }
    w->next_keepalive_ns = 0; /* an empty part at once: the watch is open */
    if (sw->count++ == 0)
        sl_store_node_on_change(sw->sn, on_change, sw);
    sw->started++;
    sw->next_flush_ns = 0;
    return SL_OK;
}

static size_t watch_stats(void *ctx, sl_node_counter_t *out, size_t cap) {
    const sl_store_watch_t *sw = ctx;
    sl_node_counter_t c[] = {{"open", sw->count},
                             {"started", sw->started},
                             {"ended", sw->ended},
                             {"ended_behind", sw->ended_behind}};
    size_t n = sizeof c / sizeof c[0] < cap ? sizeof c / sizeof c[0] : cap;
    memcpy(out, c, n * sizeof *c);
    return n;
}

/* ---- lifecycle ---- */

sl_err sl_store_watch_attach(sl_node_t *node, sl_store_node_t *sn, sl_store_watch_t **out) {
    sl_store_watch_t *sw = sl_calloc(1, sizeof *sw);
    if (!sw)
        return SL_ENOMEM;
    sw->sn = sn;
    sl_err err;
    if ((err = sl_node_tick_register(node, on_tick, sw)) ||
        (err = sl_node_ctl_register(node, "watch-keys", ctl_watch, sw)) ||
        (err = sl_node_stats_register(node, "watch", watch_stats, sw))) {
        sl_free(sw);
        return err;
    }
    *out = sw;
    return SL_OK;
}

void sl_store_watch_destroy(sl_store_watch_t **swp) {
    sl_store_watch_t *sw = *swp;
    if (!sw)
        return;
    while (sw->count) {
        watcher_t *w = &sw->w[--sw->count];
        sl_ctl_call_free(&w->call);
        sl_free(w->buf);
    }
    sl_store_node_on_change(sw->sn, NULL, NULL);
    sl_free(sw);
    *swp = NULL;
}
