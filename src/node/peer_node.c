/* The daemon's event loop (include/starling/peer.h): poll the transport,
 * decode, feed the membership core, send its outputs, run timers at the
 * next deadline, answer control requests through a command table, route
 * other message types by range, persist the incarnation. This file does
 * no I/O itself: sockets are net.c's, files and clocks platform's. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/process.h"
#include "starling/disk.h"
#include "starling/hash.h"
#include "starling/mpack.h"
#include "starling/peer.h"
#include "starling/platform.h"

#include "node/node_bench.h"

#define CMD_MAX 32              /* bytes of a control command name */
#define MSGS_PER_TURN 256       /* inbound messages handled before timers run */
#define CTL_CHUNK (SL_MSG_MAX_LEN - 1024) /* reply body bytes per part */
#define INCARNATION_FILE "incarnation"
#define ALONE_WARN_FIRST_NS (5ull * 1000000000ull)  /* first "no seed answered" warning */
#define ALONE_WARN_EVERY_NS (60ull * 1000000000ull) /* and then at most this often */
#define TRIM_EVERY_NS (30ull * 1000000000ull) /* freed memory goes back this often */

/* A registered control command. */
typedef struct {
    char cmd[CMD_MAX + 1]; /* name */
    sl_ctl_fn fn;          /* handler */
    void *ctx;             /* handler's context */
} ctl_entry_t;

/* A registered range of message types. */
typedef struct {
    uint8_t lo, hi;    /* inclusive range within 16..63 */
    sl_node_msg_fn fn; /* handler */
    void *ctx;         /* handler's context */
} route_t;

/* A registered timer callback. */
typedef struct {
    sl_node_tick_fn fn; /* callback */
    void *ctx;          /* its context */
    uint64_t due_ns;    /* when it asked to run next (0: every turn) */
} tick_t;

/* A registered membership-event listener. */
typedef struct {
    sl_node_member_fn fn; /* callback */
    void *ctx;            /* its context */
} listener_t;

/* A registered group of counters for `stats` (sl_node_stats_register). */
typedef struct {
    char group[CMD_MAX + 1]; /* the JSON object's name */
    sl_node_stats_fn fn;     /* fills the counters */
    void *ctx;               /* its context */
} stats_hook_t;

typedef struct {
    const char *module; /* who refused (static string) */
    uint64_t count;     /* pieces of input it refused */
} bad_input_t;

/* A registered pre-leave hook (sl_node_stop_listen). */
typedef struct {
    sl_node_stop_fn fn; /* callback */
    void *ctx;          /* its context */
} stop_hook_t;

struct sl_ctl_call {
    sl_node_t *node;       /* the node answering */
    sl_net_route_t route;  /* the client's connection */
    uint32_t id;           /* the request's id */
    bool replied_last;     /* a part with more=false was sent */
    bool replied_any;      /* at least one part was sent */
    bool deferred;         /* sl_ctl_defer took it: the handler's return sends nothing */
};

struct sl_node {
    sl_net_t *net;                     /* transport */
    sl_swim_t *swim;                   /* membership core */
    char name[SL_NAME_MAX + 1];        /* member name */
    char addr[SL_ADDR_MAX + 16];       /* advertised address */
    char *data_dir;                    /* state directory, or NULL */
    int lock_fd;                       /* lock on data_dir/lock, or -1 */
    uint64_t incarnation_saved;        /* last incarnation written to disk */
    bool incarnation_copy_stale;       /* its text copy could not be rewritten */
    int leave_wait_ms;                 /* serve this long after announcing a leave */
    uint64_t start_ns;                 /* monotonic start time */
    ctl_entry_t ctl[SL_NODE_MAX_CTL];  /* control commands */
    size_t ctl_count;                  /* entries in ctl */
    route_t routes[SL_NODE_MAX_ROUTES]; /* message-type ranges */
    size_t route_count;                /* entries in routes */
    tick_t ticks[SL_NODE_MAX_TICKS];   /* timer callbacks */
    size_t tick_count;                 /* entries in ticks */
    listener_t listeners[SL_NODE_MAX_LISTENERS]; /* membership-event listeners */
    size_t listener_count;             /* entries in listeners */
    struct {
        int fd;                        /* watched descriptor */
        sl_node_fd_fn fn;              /* called when it is readable */
        void *ctx;                     /* its context */
    } watches[SL_NET_MAX_WATCHES];     /* sl_node_watch_fd */
    size_t watch_count;                /* entries in watches */
    stop_hook_t stop_hooks[SL_NODE_MAX_LISTENERS]; /* run on SIGTERM before the leave */
    size_t stop_hook_count;            /* entries in stop_hooks */
    stats_hook_t stats_hooks[SL_NODE_MAX_LISTENERS]; /* module counters for `stats` */
    size_t stats_hook_count;           /* entries in stats_hooks */
    uint64_t decode_ok;                /* messages decoded */
    uint64_t decode_bad;               /* messages the codec rejected */
    uint64_t decode_err[SL_ERR_COUNT]; /* rejections by error */
    uint64_t swim_rejected;            /* messages the core refused (SL_EPROTO, ...) */
    uint64_t unrouted;                 /* well-formed messages of a type nobody handles */
    bad_input_t bad_input[SL_NODE_MAX_LISTENERS]; /* refusals counted by modules */
    size_t bad_input_count;            /* entries in bad_input */
    uint64_t ctl_requests;             /* control requests answered */
    uint64_t ctl_unknown;              /* control requests for unknown commands */
    uint64_t send_errors;              /* outputs that could not be encoded */
    size_t seed_count;                 /* --join / peers-file addresses given */
    char first_seed[SL_ADDR_MAX + 16]; /* the first of them, for messages */
    uint64_t alone_warn_ns;            /* when to warn next that no seed answered */
    uint64_t trim_ns;                  /* when to give freed memory back next */
    sl_err failed;                     /* sl_node_fail: the loop stops with it */
    bool back_valid;                   /* back_* describe the message being handled */
    sl_net_route_t back_route;         /* the ROUTER connection it came in on */
    char back_addr[SL_ADDR_MAX + 1];   /* its sender's advertised address */
    size_t back_addr_len;              /* bytes of back_addr */
    bool has_key;                      /* a keyed cluster */
    bool allow_commands;               /* --allow-commands */
    bool test_faults;                  /* --test-faults */
    uint64_t ctl_refused;              /* control requests refused on the gossip port, or
                                          other messages on the control endpoint */
    sl_log_limit_t ctl_refused_log;    /* PEER-CTL-REFUSED: a line per 10 s */
};

static int64_t now_ms(void) {
    return (int64_t)(sl_plat_now_ns() / 1000000ull);
}

/* ---- Incarnation on disk ---- */

static sl_err incarnation_path(const sl_node_t *node, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "%s/%s", node->data_dir, INCARNATION_FILE);
    return n < 0 || (size_t)n >= cap ? SL_EINVAL : SL_OK;
}

/* The incarnation lives in two files: INCARNATION_FILE.slot, two
 * checksummed slots rewritten in place (sl_disk_slot_write: no free space
 * needed once it exists, and a torn write leaves the other slot), and
 * INCARNATION_FILE, the same number as text for people, rewritten when
 * the disk has room. The higher counts; either file present but corrupt
 * refuses the start. */
static sl_err incarnation_load(const sl_node_t *node, uint64_t *out) {
    *out = 0;
    char path[4200], slot[4210];
    uint8_t *data = NULL;
    size_t len = 0;
    sl_err err = incarnation_path(node, path, sizeof path);
    if (err != SL_OK)
        return err;
    snprintf(slot, sizeof slot, "%s.slot", path);
    uint64_t from_slot = 0;
    sl_err serr = sl_disk_slot_read(slot, &from_slot, NULL);
    err = sl_plat_read_file(path, 64, &data, &len);
    bool text_ok = false;
    unsigned long long v = 0;
    if (err == SL_OK) {
        char *end = NULL;
        v = strtoull((const char *)data, &end, 10);
        text_ok = end != (char *)data && (*end == '\n' || *end == 0);
        sl_free(data);
    }
    /* either file present but unreadable: refuse, as a corrupt file
       always was (a full disk leaves the text copy old, never torn) */
    if ((serr == SL_OK || serr == SL_ENOTFOUND) && (text_ok || err == SL_ENOTFOUND)) {
        *out = text_ok && v > from_slot ? v : from_slot;
        return SL_OK;
    }
    bool slot_bad = serr != SL_OK && serr != SL_ENOTFOUND;
    sl_log(SL_LOG_ERR, "PEER-DATA", "%s is corrupt; remove it to start over", slot_bad ? slot : path);
    return slot_bad ? serr : err == SL_OK ? SL_ECORRUPT : err;
}

static sl_err incarnation_save(sl_node_t *node, uint64_t inc) {
    if (!node->data_dir || inc <= node->incarnation_saved)
        return SL_OK;
    char path[4200], slot[4210], text[32];
    sl_err err = incarnation_path(node, path, sizeof path);
    if (err != SL_OK)
        return err;
    snprintf(slot, sizeof slot, "%s.slot", path);
    err = sl_disk_slot_write(slot, inc, NULL);
    if (err != SL_OK) {
        sl_log(SL_LOG_ERR, "PEER-DATA", "cannot write incarnation %s: %s", slot, sl_strerror(err));
        return err;
    }
    node->incarnation_saved = inc;
    /* the text copy: best effort (a full disk has no room for its rename) */
    int n = snprintf(text, sizeof text, "%" PRIu64 "\n", inc);
    bool failed = sl_plat_write_file(path, text, (size_t)n, 0644) != SL_OK;
    if (failed && !node->incarnation_copy_stale)
        sl_log(SL_LOG_WARNING, "PEER-DATA",
               "cannot update %s (disk full?): %s.slot holds the incarnation", path, path);
    node->incarnation_copy_stale = failed;
    return SL_OK;
}

/* ---- Built-in control commands ---- */

static const char *state_name(uint8_t s) {
    switch (s) {
    case SL_STATE_ALIVE: return "alive";
    case SL_STATE_SUSPECT: return "suspect";
    case SL_STATE_DEAD: return "dead";
    case SL_STATE_LEFT: return "left";
    default: return "unknown";
    }
}

static cJSON *json_bytes(sl_bytes_t b) {
    char *s = sl_strndup(b.ptr ? (const char *)b.ptr : "", b.len);
    cJSON *j = cJSON_CreateString(s ? s : "");
    sl_free(s);
    return j;
}

/* Decodes an encoded metadata map into a JSON object (empty on error). */
static cJSON *json_meta(sl_bytes_t meta) {
    cJSON *obj = cJSON_CreateObject();
    if (!obj || meta.len == 0)
        return obj;
    sl_mpack_reader_t r;
    sl_mpack_reader_init(&r, meta.ptr, meta.len);
    uint32_t count = 0;
    if (sl_mpack_read_map(&r, SL_META_MAX_ENTRIES, &count) != SL_OK)
        return obj;
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *k, *v;
        size_t kl, vl;
        if (sl_mpack_read_str(&r, 0, SL_META_KEY_MAX, &k, &kl) != SL_OK ||
            sl_mpack_read_str(&r, 0, SL_META_VALUE_MAX, &v, &vl) != SL_OK)
            break;
        char key[SL_META_KEY_MAX + 1];
        memcpy(key, k, kl);
        key[kl] = 0;
        cJSON_AddItemToObject(obj, key, json_bytes((sl_bytes_t){v, vl}));
    }
    return obj;
}

/* Sends a cJSON value as the (possibly multi-part) reply. */
static sl_err reply_json(sl_ctl_call_t *call, cJSON *root) {
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return SL_ENOMEM;
    size_t len = strlen(text), off = 0;
    sl_err err = SL_OK;
    do {
        size_t n = len - off < CTL_CHUNK ? len - off : CTL_CHUNK;
        err = sl_ctl_reply(call, SL_OK, text + off, n, off + n < len);
        off += n;
    } while (err == SL_OK && off < len);
    free(text);
    return err;
}

static void add_u64(cJSON *o, const char *k, uint64_t v);

/* A command that takes no arguments: true once it answered SL_EINVAL
 * (proto/control.md section 4: bad arguments MUST get SL_EINVAL). */
static bool refuse_args(const sl_ctl_req_t *req, sl_ctl_call_t *call, const char *cmd) {
    if (req->arg_count == 0)
        return false;
    char msg[96];
    int n = snprintf(msg, sizeof msg, "usage: %s (it takes no arguments)", cmd);
    sl_ctl_reply(call, SL_EINVAL, msg, (size_t)n, false);
    return true;
}

static sl_err ctl_members(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                          sl_ctl_call_t *call) {
    if (refuse_args(req, call, "members"))
        return SL_OK;
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        return SL_ENOMEM;
    int64_t now = now_ms();
    size_t n = sl_swim_member_count(node->swim);
    for (size_t i = 0; i < n; i++) {
        sl_swim_member_t m;
        if (sl_swim_member_at(node->swim, i, &m) != SL_OK)
            continue;
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddItemToObject(o, "name", json_bytes(m.name));
        cJSON_AddItemToObject(o, "addr", json_bytes(m.addr));
        cJSON_AddStringToObject(o, "state", state_name(m.state));
        add_u64(o, "incarnation", m.incarnation); /* exact: a double keeps 53 bits */
        cJSON_AddItemToObject(o, "meta", json_meta(m.meta));
        cJSON_AddBoolToObject(o, "self", m.is_self);
        cJSON_AddNumberToObject(o, "state_age_ms",
                                (double)(m.state_change_ms ? now - m.state_change_ms : 0));
        cJSON_AddItemToArray(arr, o);
    }
    return reply_json(call, arr);
}

/* An exact integer: a double (cJSON's numbers) keeps only 53 bits, and
 * counters such as store.state_hash use all 64. */
static void add_u64(cJSON *o, const char *k, uint64_t v) {
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, v);
    cJSON_AddRawToObject(o, k, num);
}

/* hello: what this peer speaks (proto/control.md 4.6): the control
 * protocol's version, the peer's release and every command it serves. */
static sl_err ctl_hello(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    (void)ctx;
    if (refuse_args(req, call, "hello"))
        return SL_OK;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return SL_ENOMEM;
    cJSON_AddNumberToObject(root, "protocol", 1);
    cJSON_AddStringToObject(root, "version", SL_VERSION);
    cJSON_AddStringToObject(root, "name", node->name);
    cJSON *cmds = cJSON_AddArrayToObject(root, "commands");
    for (size_t i = 0; cmds && i < node->ctl_count; i++)
        cJSON_AddItemToArray(cmds, cJSON_CreateString(node->ctl[i].cmd));
    return reply_json(call, root);
}

static sl_err ctl_stats(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    if (refuse_args(req, call, "stats"))
        return SL_OK;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return SL_ENOMEM;
    cJSON_AddStringToObject(root, "name", node->name);
    cJSON_AddStringToObject(root, "addr", node->addr);
    cJSON_AddStringToObject(root, "version", SL_VERSION);
    add_u64(root, "uptime_ms", (sl_plat_now_ns() - node->start_ns) / 1000000ull);
    add_u64(root, "rss_bytes", sl_plat_rss_bytes());
    add_u64(root, "incarnation", sl_swim_incarnation(node->swim));
    add_u64(root, "health", sl_swim_health(node->swim));

    cJSON *mem = cJSON_AddObjectToObject(root, "members");
    uint64_t by_state[4] = {0, 0, 0, 0};
    size_t n = sl_swim_member_count(node->swim);
    for (size_t i = 0; i < n; i++) {
        sl_swim_member_t m;
        if (sl_swim_member_at(node->swim, i, &m) == SL_OK && m.state < 4)
            by_state[m.state]++;
    }
    add_u64(mem, "total", n);
    add_u64(mem, "alive", by_state[SL_STATE_ALIVE]);
    add_u64(mem, "suspect", by_state[SL_STATE_SUSPECT]);
    add_u64(mem, "dead", by_state[SL_STATE_DEAD]);
    add_u64(mem, "left", by_state[SL_STATE_LEFT]);

    sl_net_stats_t ns;
    sl_net_stats(node->net, &ns);
    cJSON *net = cJSON_AddObjectToObject(root, "net");
    add_u64(net, "msgs_in", ns.msgs_in);
    add_u64(net, "bytes_in", ns.bytes_in);
    add_u64(net, "msgs_out", ns.msgs_out);
    add_u64(net, "bytes_out", ns.bytes_out);
    add_u64(net, "replies_out", ns.replies_out);
    add_u64(net, "reply_bytes_out", ns.reply_bytes_out);
    add_u64(net, "dropped_out", ns.dropped_out);
    add_u64(net, "bad_frames", ns.bad_frames);
    add_u64(net, "oversized", ns.oversized);
    add_u64(net, "auth_denied", ns.auth_denied);
    add_u64(net, "handshake_failed", ns.handshake_failed);
    add_u64(net, "conns_open", ns.conns_open);
    add_u64(net, "conns_opened", ns.conns_opened);
    add_u64(net, "conns_evicted", ns.conns_evicted);
    add_u64(net, "pending", ns.pending);
    add_u64(net, "sent_back", ns.sent_back);
    add_u64(net, "received_back", ns.received_back);
    add_u64(net, "sent_shared", ns.sent_shared);
    add_u64(net, "conns_shared_closed", ns.conns_shared_closed);
    add_u64(net, "conns_redialled", ns.conns_redialled);
    add_u64(net, "sends_refused", ns.sends_refused);
    add_u64(net, "names_refused", ns.names_refused);
    add_u64(net, "inbound_refused", ns.inbound_refused);
    add_u64(net, "conns_full", ns.conns_full);
    add_u64(net, "conns_idle_closed", ns.conns_idle_closed);

    cJSON *dec = cJSON_AddObjectToObject(root, "decode");
    add_u64(dec, "ok", node->decode_ok);
    add_u64(dec, "bad", node->decode_bad);
    add_u64(dec, "rejected_by_swim", node->swim_rejected);
    add_u64(dec, "unrouted", node->unrouted);
    cJSON *errs = cJSON_AddObjectToObject(dec, "errors");
    for (int e = 1; e < SL_ERR_COUNT; e++)
        if (node->decode_err[e])
            add_u64(errs, sl_errname((sl_err)e), node->decode_err[e]);

    /* Everything counted as bad input, in one figure. */
    uint64_t by_modules = 0;
    cJSON *bim = cJSON_AddObjectToObject(root, "bad_input_by_module");
    for (size_t i = 0; i < node->bad_input_count; i++) {
        add_u64(bim, node->bad_input[i].module, node->bad_input[i].count);
        by_modules += node->bad_input[i].count;
    }
    sl_swim_stats_t ss;
    sl_swim_stats(node->swim, &ss);
    add_u64(root, "bad_input", ns.bad_frames + ns.oversized + ns.handshake_failed +
                                   ns.inbound_refused + node->decode_bad + node->swim_rejected +
                                   ss.records_refused + by_modules);

    cJSON *sw = cJSON_AddObjectToObject(root, "swim");
    add_u64(sw, "probes", ss.probes);
    add_u64(sw, "probe_acks", ss.probe_acks);
    add_u64(sw, "probe_failures", ss.probe_failures);
    add_u64(sw, "probes_hinted", ss.probes_hinted);
    add_u64(sw, "ping_reqs_sent", ss.ping_reqs_sent);
    add_u64(sw, "ping_reqs_served", ss.ping_reqs_served);
    add_u64(sw, "nacks_sent", ss.nacks_sent);
    add_u64(sw, "nacks_received", ss.nacks_received);
    add_u64(sw, "suspects", ss.suspects);
    add_u64(sw, "confirmations", ss.confirmations);
    add_u64(sw, "deaths", ss.deaths);
    add_u64(sw, "refutations", ss.refutations);
    add_u64(sw, "syncs_sent", ss.syncs_sent);
    add_u64(sw, "syncs_received", ss.syncs_received);
    add_u64(sw, "syncs_repair", ss.syncs_repair);
    add_u64(sw, "gossip_sent", ss.gossip_sent);
    add_u64(sw, "gossip_received", ss.gossip_received);
    add_u64(sw, "msgs_sent", ss.msgs_sent);
    add_u64(sw, "msgs_received", ss.msgs_received);
    add_u64(sw, "msgs_ignored", ss.msgs_ignored);
    add_u64(sw, "outputs_dropped", ss.outputs_dropped);
    add_u64(sw, "events_dropped", ss.events_dropped);
    add_u64(sw, "seed_dials", ss.seed_dials);
    add_u64(sw, "records_refused", ss.records_refused);
    add_u64(sw, "refused_incarnation", ss.refused_inc);
    add_u64(sw, "refused_address", ss.refused_addr);
    add_u64(sw, "refused_name", ss.refused_name);
    add_u64(sw, "refused_new", ss.refused_new);

    cJSON *ctl = cJSON_AddObjectToObject(root, "ctl");
    add_u64(ctl, "requests", node->ctl_requests);
    add_u64(ctl, "unknown", node->ctl_unknown);
    add_u64(ctl, "refused", node->ctl_refused);
    for (size_t i = 0; i < node->stats_hook_count; i++) {
        const stats_hook_t *h = &node->stats_hooks[i];
        sl_node_counter_t c[SL_NODE_MAX_COUNTERS];
        size_t k = h->fn(h->ctx, c, SL_NODE_MAX_COUNTERS);
        cJSON *g = cJSON_AddObjectToObject(root, h->group);
        for (size_t j = 0; j < k && j < SL_NODE_MAX_COUNTERS; j++)
            add_u64(g, c[j].name, c[j].value);
    }
    return reply_json(call, root);
}

/* ---- Registration ---- */

void sl_node_bad_input(sl_node_t *node, const char *module) {
    for (size_t i = 0; i < node->bad_input_count; i++)
        if (!strcmp(node->bad_input[i].module, module)) {
            node->bad_input[i].count++;
            return;
        }
    if (node->bad_input_count == SL_NODE_MAX_LISTENERS)
        return; /* assert-worthy misuse, but never abort on input */
    node->bad_input[node->bad_input_count++] = (bad_input_t){module, 1};
}

sl_err sl_node_ctl_register(sl_node_t *node, const char *cmd, sl_ctl_fn fn, void *ctx) {
    size_t len = strlen(cmd);
    if (len == 0 || len > CMD_MAX || !fn)
        return SL_EINVAL;
    for (size_t i = 0; i < node->ctl_count; i++)
        if (!strcmp(node->ctl[i].cmd, cmd))
            return SL_EEXIST;
    if (node->ctl_count == SL_NODE_MAX_CTL)
        return SL_EBUSY;
    ctl_entry_t *e = &node->ctl[node->ctl_count++];
    memcpy(e->cmd, cmd, len + 1);
    e->fn = fn;
    e->ctx = ctx;
    return SL_OK;
}

sl_err sl_node_ctl_chain(sl_node_t *node, const char *cmd, sl_ctl_fn fn, void *ctx,
                         sl_ctl_fn *prev_fn, void **prev_ctx) {
    for (size_t i = 0; i < node->ctl_count; i++)
        if (!strcmp(node->ctl[i].cmd, cmd)) {
            *prev_fn = node->ctl[i].fn;
            *prev_ctx = node->ctl[i].ctx;
            node->ctl[i].fn = fn;
            node->ctl[i].ctx = ctx;
            return SL_OK;
        }
    return SL_ENOTFOUND;
}

sl_err sl_node_route_register(sl_node_t *node, uint8_t lo, uint8_t hi, sl_node_msg_fn fn,
                              void *ctx) {
    if (lo < 16 || hi > 63 || lo > hi || !fn)
        return SL_EINVAL;
    for (size_t i = 0; i < node->route_count; i++)
        if (!(hi < node->routes[i].lo || lo > node->routes[i].hi))
            return SL_EEXIST;
    if (node->route_count == SL_NODE_MAX_ROUTES)
        return SL_EBUSY;
    node->routes[node->route_count++] = (route_t){lo, hi, fn, ctx};
    return SL_OK;
}

sl_err sl_node_stop_listen(sl_node_t *node, sl_node_stop_fn fn, void *ctx) {
    if (!node || !fn)
        return SL_EINVAL;
    if (node->stop_hook_count == SL_NODE_MAX_LISTENERS)
        return SL_EBUSY;
    node->stop_hooks[node->stop_hook_count++] = (stop_hook_t){fn, ctx};
    return SL_OK;
}

sl_err sl_node_stats_register(sl_node_t *node, const char *group, sl_node_stats_fn fn,
                              void *ctx) {
    size_t len = group ? strlen(group) : 0;
    if (len == 0 || len > CMD_MAX || !fn)
        return SL_EINVAL;
    if (node->stats_hook_count == SL_NODE_MAX_LISTENERS)
        return SL_EBUSY;
    stats_hook_t *h = &node->stats_hooks[node->stats_hook_count++];
    memcpy(h->group, group, len + 1);
    h->fn = fn;
    h->ctx = ctx;
    return SL_OK;
}

sl_err sl_node_member_listen(sl_node_t *node, sl_node_member_fn fn, void *ctx) {
    if (!fn)
        return SL_EINVAL;
    if (node->listener_count == SL_NODE_MAX_LISTENERS)
        return SL_EBUSY;
    node->listeners[node->listener_count++] = (listener_t){fn, ctx};
    return SL_OK;
}

sl_err sl_node_watch_fd(sl_node_t *node, int fd, sl_node_fd_fn fn, void *ctx) {
    if (!fn || fd < 0)
        return SL_EINVAL;
    sl_err err = sl_net_watch_fd(node->net, fd);
    if (err == SL_OK) {
        node->watches[node->watch_count].fd = fd;
        node->watches[node->watch_count].fn = fn;
        node->watches[node->watch_count++].ctx = ctx;
    }
    return err;
}

sl_err sl_node_tick_register(sl_node_t *node, sl_node_tick_fn fn, void *ctx) {
    if (!fn)
        return SL_EINVAL;
    if (node->tick_count == SL_NODE_MAX_TICKS)
        return SL_EBUSY;
    node->ticks[node->tick_count++] = (tick_t){fn, ctx, 0};
    return SL_OK;
}

void sl_node_tick_soon(sl_node_t *node, sl_node_tick_fn fn, void *ctx) {
    for (size_t i = 0; i < node->tick_count; i++)
        if (node->ticks[i].fn == fn && node->ticks[i].ctx == ctx)
            node->ticks[i].due_ns = 1; /* past, and not 0: the loop does not wait */
}

/* ---- Sending ---- */

sl_err sl_node_send(sl_node_t *node, const char *addr, uint8_t type, const uint8_t *body,
                    size_t body_len) {
    uint8_t header[SL_WIRE_HEADER_LEN] = {SL_WIRE_MAGIC0, SL_WIRE_MAGIC1, SL_WIRE_VERSION, type};
    return sl_net_send(node->net, addr, header, body, body_len);
}

sl_err sl_ctl_reply(sl_ctl_call_t *call, sl_err status, const void *body, size_t len, bool more) {
    if (call->replied_last)
        return SL_ESTATE;
    sl_msg_t rep;
    memset(&rep, 0, sizeof rep);
    rep.type = SL_MSG_CTL_REP;
    rep.u.ctl_rep.id = call->id;
    rep.u.ctl_rep.status = (uint32_t)status;
    rep.u.ctl_rep.more = more ? 1 : 0;
    rep.u.ctl_rep.body = (sl_bytes_t){len ? body : NULL, len};
    uint8_t header[SL_WIRE_HEADER_LEN];
    uint8_t *out = NULL;
    size_t out_len = 0;
    sl_err err = sl_msg_encode(&rep, header, &out, &out_len);
    if (err == SL_OK)
        err = sl_net_reply(call->node->net, &call->route, header, out, out_len);
    sl_free(out);
    call->replied_any = true;
    if (!more)
        call->replied_last = true;
    return err;
}

sl_err sl_ctl_reply_text(sl_ctl_call_t *call, sl_err status, const char *fmt, ...) {
    char b[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof b ? (size_t)n : sizeof b - 1;
    return sl_ctl_reply(call, status, b, len, false);
}

sl_ctl_call_t *sl_ctl_defer(sl_ctl_call_t *call) {
    if (call->replied_last || call->deferred)
        return NULL;
    sl_ctl_call_t *kept = sl_malloc(sizeof *kept);
    if (!kept)
        return NULL;
    *kept = *call;
    call->deferred = true;
    return kept;
}

void sl_ctl_call_free(sl_ctl_call_t **call) {
    if (!*call)
        return;
    sl_free(*call);
    *call = NULL;
}

/* True for an answer to a request: it goes back on the request's own
 * connection when that request is the message being handled. */
static bool is_answer(const sl_msg_t *m) {
    return m->type == SL_MSG_ACK || m->type == SL_MSG_NACK ||
           (m->type == SL_MSG_SYNC && m->u.sync.reply);
}

/* Sends everything the membership core wants sent, and logs its events.
 * Answers to the message being handled (node->back_valid) go back on the
 * connection it came in on, so that one TCP connection carries request
 * and answer and the request's TCP ACK rides on the answer
 * (docs/transport.md); everything else goes through our own outbound
 * connection to the destination. */
static void flush_swim(sl_node_t *node) {
    sl_swim_output_t out;
    while (sl_swim_next_output(node->swim, &out) == SL_OK) {
        uint8_t header[SL_WIRE_HEADER_LEN];
        uint8_t *body = NULL;
        size_t body_len = 0;
        sl_err err = sl_msg_encode(&out.msg, header, &body, &body_len);
        if (err != SL_OK) {
            node->send_errors++;
            sl_log(SL_LOG_WARNING, "PEER-ENCODE", "cannot encode %s: %s",
                   sl_msg_type_name(out.msg.type), sl_strerror(err));
            continue;
        }
        char addr[SL_ADDR_MAX + 1];
        size_t al = out.to_addr.len < SL_ADDR_MAX ? out.to_addr.len : SL_ADDR_MAX;
        memcpy(addr, out.to_addr.ptr, al);
        addr[al] = 0;
        bool back = node->back_valid && is_answer(&out.msg) &&
                    out.to_addr.len == node->back_addr_len &&
                    !memcmp(out.to_addr.ptr, node->back_addr, al) &&
                    sl_net_send_back(node->net, &node->back_route, header, body, body_len) ==
                        SL_OK;
        if (!back)
            sl_net_send(node->net, addr, header, body, body_len);
        sl_free(body);
    }
    node->back_valid = false;
    sl_swim_event_t ev;
    while (sl_swim_next_event(node->swim, &ev) == SL_OK) {
        int level = SL_LOG_INFO;
        if (ev.kind == SL_SWIM_EV_JOIN || ev.kind == SL_SWIM_EV_STATE)
            level = SL_LOG_NOTICE;
        if (ev.kind == SL_SWIM_EV_UPDATE)
            level = SL_LOG_DEBUG;
        const char *kind = ev.kind == SL_SWIM_EV_JOIN     ? "joined"
                           : ev.kind == SL_SWIM_EV_STATE  ? "is now"
                           : ev.kind == SL_SWIM_EV_UPDATE ? "updated"
                                                          : "forgotten";
        sl_log(level, "PEER-MEMBER", "%.*s %s %s (incarnation %" PRIu64 ", %.*s)",
               (int)ev.name.len, (const char *)ev.name.ptr, kind, state_name(ev.new_state),
               ev.incarnation, (int)ev.addr.len, (const char *)ev.addr.ptr);
        char addr[SL_ADDR_MAX + 1];
        size_t al = ev.addr.len < SL_ADDR_MAX ? ev.addr.len : SL_ADDR_MAX;
        memcpy(addr, ev.addr.ptr, al);
        addr[al] = 0;
        /* No point keeping a connection to a member that is gone; one to
           a member that came back (restarted: a higher incarnation, or
           alive again after dead or left) was made to its old process and
           may sit in ZeroMQ's re-dial back-off. (A member cleared of
           suspicion also refutes with a higher incarnation: that costs a
           reconnect.) */
        bool back = ev.new_state == SL_STATE_ALIVE &&
                    ((ev.kind == SL_SWIM_EV_UPDATE && ev.incarnation != ev.old_incarnation) ||
                     (ev.kind == SL_SWIM_EV_STATE &&
                      (ev.old_state == SL_STATE_DEAD || ev.old_state == SL_STATE_LEFT)));
        if (ev.kind == SL_SWIM_EV_STATE &&
            (ev.new_state == SL_STATE_DEAD || ev.new_state == SL_STATE_LEFT))
            sl_net_disconnect(node->net, addr);
        else if (back)
            sl_net_redial(node->net, addr);
        for (size_t i = 0; i < node->listener_count; i++)
            node->listeners[i].fn(node->listeners[i].ctx, node, &ev);
    }
    incarnation_save(node, sl_swim_incarnation(node->swim));
}

/* ---- Receiving ---- */

static void handle_ctl(sl_node_t *node, const sl_net_route_t *route, const sl_ctl_req_t *req) {
    sl_ctl_call_t call = {.node = node, .route = *route, .id = req->id};
    node->ctl_requests++;
    const ctl_entry_t *e = NULL;
    for (size_t i = 0; i < node->ctl_count && !e; i++)
        if (strlen(node->ctl[i].cmd) == req->cmd.len &&
            !memcmp(node->ctl[i].cmd, req->cmd.ptr, req->cmd.len))
            e = &node->ctl[i];
    if (!e) {
        node->ctl_unknown++;
        char msg[160];
        int n = snprintf(msg, sizeof msg, "unknown command '%.*s': is peerctl newer than this peer?",
                         (int)(req->cmd.len > 32 ? 32 : req->cmd.len), (const char *)req->cmd.ptr);
        sl_ctl_reply(&call, SL_EUNSUPPORTED, msg, (size_t)n, false); /* control.md 4 */
        return;
    }
    sl_err err = e->fn(e->ctx, node, req, &call);
    if (call.deferred)
        return; /* the module answers later through its copy */
    if (err != SL_OK && !call.replied_last) {
        char msg[160];
        int n = snprintf(msg, sizeof msg, "%s failed: %s", e->cmd, sl_strerror(err));
        sl_ctl_reply(&call, err, msg, (size_t)n, false);
    } else if (!call.replied_last) {
        sl_ctl_reply(&call, SL_OK, NULL, 0, false);
    }
}

/* Counts and logs (at most every 10 s) a control request on the gossip
 * port or another message on the control endpoint. */
static void ctl_refuse_note(sl_node_t *node, const char *what) {
    node->ctl_refused++;
    sl_node_bad_input(node, "ctl");
    uint64_t left_out;
    if (!sl_log_limit(&node->ctl_refused_log, sl_plat_now_ns() / 1000000, 10000, &left_out))
        return;
    sl_log(SL_LOG_WARNING, "PEER-CTL-REFUSED", "refused %" PRIu64 " message(s) (last: %s); "
           "control is served only on %s", left_out + 1, what,
           sl_net_control_endpoint(node->net)[0] ? sl_net_control_endpoint(node->net)
                                                 : "no endpoint (--control none)");
}

/* A control request on the gossip port: answered with where control is
 * served, never run (docs/security.md, "The control endpoint"). */
static void refuse_ctl_on_gossip(sl_node_t *node, const sl_net_route_t *route,
                                 const sl_ctl_req_t *req) {
    ctl_refuse_note(node, "a control request on the gossip port");
    sl_ctl_call_t call = {.node = node, .route = *route, .id = req->id};
    const char *ep = sl_net_control_endpoint(node->net);
    char msg[512];
    int n;
    if (!ep[0])
        n = snprintf(msg, sizeof msg, "control requests are not served on the gossip port, and "
                     "this peer has no control endpoint (--control none)");
    else if (!strncmp(ep, "ipc://", 6))
        n = snprintf(msg, sizeof msg, "control requests are not served on the gossip port: "
                     "this peer's control endpoint is the Unix socket %s; on its machine, as its "
                     "user, run peerctl --peer %s (or --peer DATA_DIR)", ep + 6, ep);
    else
        n = snprintf(msg, sizeof msg, "control requests are not served on the gossip port: "
                     "this peer's control endpoint is %s; run peerctl --peer %s", ep, ep + 6);
    sl_ctl_reply(&call, SL_EAUTH, msg, n < 0 ? 0 : (size_t)n, false);
}

static void handle_in(sl_node_t *node, const sl_net_in_t *in) {
    const uint8_t *h = in->header;
    uint8_t type = h[3];
    if (in->route.control && type != SL_MSG_CTL_REQ) {
        ctl_refuse_note(node, "a peer message on the control endpoint");
        return; /* the control endpoint serves clients only */
    }
    if (h[0] == SL_WIRE_MAGIC0 && h[1] == SL_WIRE_MAGIC1 && h[2] == SL_WIRE_VERSION && type >= 16 &&
        type <= 63) {
        for (size_t i = 0; i < node->route_count; i++)
            if (type >= node->routes[i].lo && type <= node->routes[i].hi) {
                node->decode_ok++;
                node->routes[i].fn(node->routes[i].ctx, node, type, in->body, in->body_len,
                                   sl_plat_now_ns());
                return;
            }
        node->unrouted++;
        return;
    }
    sl_msg_t msg;
    sl_err err = sl_msg_decode(in->header, SL_WIRE_HEADER_LEN, in->body, in->body_len, &msg);
    if (err != SL_OK) {
        node->decode_bad++;
        node->decode_err[err < SL_ERR_COUNT ? err : SL_EINTERNAL]++;
        sl_log(SL_LOG_DEBUG, "PEER-BAD-MSG", "dropped a message of type %u: %s", type,
               sl_strerror(err));
        return;
    }
    node->decode_ok++;
    switch (msg.type) {
    case SL_MSG_CTL_REQ:
        if (in->on_outbound)
            node->unrouted++; /* nobody to answer on that connection */
        else if (!in->route.control)
            refuse_ctl_on_gossip(node, &in->route, &msg.u.ctl_req);
        else
            handle_ctl(node, &in->route, &msg.u.ctl_req);
        break;
    case SL_MSG_CTL_REP:
        node->unrouted++;
        break;
    default:
        node->back_valid = !in->on_outbound && msg.from_addr.len <= SL_ADDR_MAX;
        if (node->back_valid) {
            node->back_route = in->route;
            memcpy(node->back_addr, msg.from_addr.ptr, msg.from_addr.len);
            node->back_addr_len = msg.from_addr.len;
            /* Its connection to us can carry what we send it too. */
            char from[SL_ADDR_MAX + 1];
            memcpy(from, msg.from_addr.ptr, msg.from_addr.len);
            from[msg.from_addr.len] = 0;
            sl_net_note_inbound(node->net, from, &in->route);
        }
        err = sl_swim_receive(node->swim, now_ms(), &msg);
        if (err != SL_OK) {
            node->swim_rejected++;
            sl_log(SL_LOG_DEBUG, "PEER-BAD-MSG", "membership core refused a %s: %s",
                   sl_msg_type_name(msg.type), sl_strerror(err));
        }
        break;
    }
    sl_msg_fini(&msg);
}

/* ---- Life cycle ---- */

sl_err sl_node_new(const sl_node_config_t *cfg, sl_node_t **out) {
    *out = NULL;
    if (!cfg || !cfg->name || !cfg->listen || strlen(cfg->name) > SL_NAME_MAX ||
        cfg->seed_count > SL_NODE_MAX_SEEDS)
        return SL_EINVAL;
    sl_node_t *node = sl_calloc(1, sizeof *node);
    if (!node)
        return SL_ENOMEM;
    sl_err err = SL_EINVAL;
    node->start_ns = sl_plat_now_ns();
    node->lock_fd = -1;
    node->leave_wait_ms = cfg->leave_wait_ms;
    node->has_key = cfg->key != NULL;
    node->allow_commands = cfg->allow_commands;
    node->test_faults = cfg->test_faults;
    snprintf(node->name, sizeof node->name, "%s", cfg->name);
    if (sl_net_addr_normalize(cfg->advertise ? cfg->advertise : cfg->listen, node->addr,
                              sizeof node->addr) != SL_OK)
        goto fail;
    uint64_t inc = 0;
    if (cfg->data_dir) {
        err = SL_ENOMEM;
        node->data_dir = sl_strdup(cfg->data_dir);
        if (!node->data_dir)
            goto fail;
        err = sl_plat_mkdirs(cfg->data_dir, 0700);
        if (err != SL_OK) {
            sl_log(SL_LOG_ERR, "PEER-DATA", "cannot create data directory %s; set --data DIR",
                   cfg->data_dir);
            goto fail;
        }
        char lock[4200];
        snprintf(lock, sizeof lock, "%s/lock", cfg->data_dir);
        err = sl_plat_lock(lock, &node->lock_fd);
        if (err == SL_EBUSY)
            sl_log(SL_LOG_ERR, "PEER-DATA",
                   "another peer is running with data directory %s; give each peer its own "
                   "--name or --data", cfg->data_dir);
        if (err != SL_OK)
            goto fail;
        if ((err = incarnation_load(node, &inc)) != SL_OK)
            goto fail;
        node->incarnation_saved = inc;
        inc++; /* a restart is the same member, newer */
        if ((err = incarnation_save(node, inc)) != SL_OK)
            goto fail;
    }
    node->seed_count = cfg->seed_count;
    if (cfg->seed_count)
        snprintf(node->first_seed, sizeof node->first_seed, "%s", cfg->seeds[0]);
    node->alone_warn_ns = node->start_ns + ALONE_WARN_FIRST_NS;
    sl_net_config_t ncfg = {.listen = cfg->listen, .key = cfg->key};
    if ((err = sl_net_new(&ncfg, &node->net)) != SL_OK)
        goto fail;
    /* With port 0 the kernel picked one: advertise that. */
    const char *port = strrchr(node->addr, ':');
    if (port && !strcmp(port, ":0")) {
        const char *real = strrchr(sl_net_endpoint(node->net), ':');
        snprintf(node->addr + (port - node->addr), sizeof node->addr - (size_t)(port - node->addr),
                 "%s", real);
    }
    /* The control endpoint, apart from gossip (docs/security.md). */
    char control[SL_NET_CONTROL_MAX];
    control[0] = 0;
    if (cfg->control && strcmp(cfg->control, "none"))
        snprintf(control, sizeof control, "%s", cfg->control);
    else if (!cfg->control && cfg->data_dir &&
             snprintf(control, sizeof control, "ipc://%s/control.sock", cfg->data_dir) >=
                 (int)sizeof control) {
        sl_log(SL_LOG_ERR, "PEER-CONTROL", "data directory path too long for a control socket: "
               "give a shorter --data, or --control ipc://SHORTER/PATH");
        err = SL_ETOOBIG;
        goto fail;
    }
    if (control[0] && (err = sl_net_control_listen(node->net, control)) != SL_OK)
        goto fail;
    /* One connection a pair (docs/transport.md): the transport needs our
     * address to know which side of a pair keeps its connection. */
    sl_net_set_self(node->net, node->addr);
    sl_swim_config_t scfg = cfg->swim;
    scfg.name = node->name;
    scfg.addr = node->addr;
    scfg.meta = cfg->meta;
    scfg.meta_len = cfg->meta_len;
    scfg.incarnation = inc;
    scfg.seed = sl_plat_now_ns() ^ sl_hash64(node->name, strlen(node->name), sl_plat_pid());
    if ((err = sl_swim_new(&scfg, &node->swim)) != SL_OK) {
        sl_log(SL_LOG_ERR, "PEER-START", "cannot start membership: %s", sl_strerror(err));
        goto fail;
    }
    sl_node_ctl_register(node, "members", ctl_members, NULL);
    sl_node_ctl_register(node, "stats", ctl_stats, NULL);
    sl_node_ctl_register(node, "hello", ctl_hello, NULL);
    if ((err = sl_swim_join(node->swim, now_ms(), cfg->seeds, cfg->seed_count)) != SL_OK)
        goto fail;
    sl_log(SL_LOG_NOTICE, "PEER-START",
           "%s listening on %s, advertising %s, incarnation %" PRIu64 ", %zu seed(s), data %s, "
           "control %s",
           node->name, sl_net_endpoint(node->net), node->addr, inc, cfg->seed_count,
           cfg->data_dir ? cfg->data_dir : "(none)",
           control[0] ? sl_net_control_endpoint(node->net) : "none");
    flush_swim(node);
    *out = node;
    return SL_OK;
fail:
    sl_node_destroy(&node);
    return err;
}

void sl_node_destroy(sl_node_t **pnode) {
    sl_node_t *node = pnode ? *pnode : NULL;
    if (!node)
        return;
    sl_swim_destroy(&node->swim);
    sl_net_destroy(&node->net);
    sl_plat_unlock(&node->lock_fd);
    sl_free(node->data_dir);
    sl_free(node);
    *pnode = NULL;
}

const sl_swim_t *sl_node_swim(const sl_node_t *node) {
    return node->swim;
}

const char *sl_node_control_endpoint(const sl_node_t *node) {
    return sl_net_control_endpoint(node->net);
}

bool sl_node_commands_allowed(const sl_node_t *node) {
    return node->has_key || node->allow_commands;
}

bool sl_node_test_faults(const sl_node_t *node) {
    return node->test_faults;
}

const sl_net_t *sl_node_net(const sl_node_t *node) {
    return node->net;
}

const char *sl_node_addr(const sl_node_t *node) {
    return node->addr;
}

const char *sl_node_name(const sl_node_t *node) {
    return node->name;
}

const char *sl_node_data_dir(const sl_node_t *node) {
    return node->data_dir;
}

/* The timers of one turn at `now_ns` (monotonic): swim's tick when due,
 * then every due tick hook, then what swim has to send. sl_node_step runs
 * them after the sockets; bench/scale runs them alone on a virtual clock
 * (node_bench.h). */
void sl_node_timers_at(sl_node_t *node, uint64_t now_ns) {
    int64_t now = (int64_t)(now_ns / 1000000ull);
    if (now >= sl_swim_next_deadline_ms(node->swim))
        sl_swim_tick(node->swim, now);
    for (size_t i = 0; i < node->tick_count; i++)
        if (now_ns >= node->ticks[i].due_ns)
            node->ticks[i].due_ns = node->ticks[i].fn(node->ticks[i].ctx, node, now_ns);
    flush_swim(node);
}

bool sl_node_deliver(sl_node_t *node, uint8_t type, const uint8_t *body, size_t len,
                     uint64_t now_ns) {
    for (size_t i = 0; i < node->route_count; i++)
        if (type >= node->routes[i].lo && type <= node->routes[i].hi) {
            node->routes[i].fn(node->routes[i].ctx, node, type, body, len, now_ns);
            return true;
        }
    return false;
}

sl_swim_t *sl_node_swim_mut(sl_node_t *node) { return node->swim; }

void sl_node_fail(sl_node_t *node, sl_err err) {
    if (node->failed == SL_OK)
        node->failed = err != SL_OK ? err : SL_EINTERNAL;
}

sl_err sl_node_step(sl_node_t *node, int max_wait_ms) {
    if (node->failed != SL_OK)
        return node->failed;
    uint64_t now_ns = sl_plat_now_ns();
    int64_t now = (int64_t)(now_ns / 1000000ull);
    int64_t deadline = sl_swim_next_deadline_ms(node->swim);
    int64_t wait = deadline == INT64_MAX ? max_wait_ms : deadline - now;
    /* (a tick's wait is rounded up: rounded down, a deadline less than a
       millisecond away gave a wait of 0 and the tick, not yet due when
       the poll returned, was not run; the loop spun on poll(2) until it
       was, a peer at rest's most frequent system call) */
    for (size_t i = 0; i < node->tick_count; i++)
        if (node->ticks[i].due_ns) {
            uint64_t due = node->ticks[i].due_ns;
            int64_t w = due <= now_ns ? 0 : (int64_t)((due - now_ns + 999999ull) / 1000000ull);
            wait = w < wait ? w : wait;
        }
    if (wait < 0)
        wait = 0;
    if (wait > max_wait_ms)
        wait = max_wait_ms;
    sl_net_in_t in;
    sl_err err = sl_net_poll(node->net, (int)wait, &in);
    for (int n = 1; err == SL_OK; n++) {
        handle_in(node, &in);
        flush_swim(node);
        if (n == MSGS_PER_TURN)
            break; /* read no further: a message read now would be released unhandled */
        err = sl_net_poll(node->net, 0, &in);
    }
    if (err != SL_OK && err != SL_EAGAIN)
        return err;
    for (size_t i = 0; i < node->watch_count; i++)
        if (sl_net_fd_ready(node->net, node->watches[i].fd))
            node->watches[i].fn(node->watches[i].ctx, node);
    now_ns = sl_plat_now_ns();
    now = (int64_t)(now_ns / 1000000ull);
    /* A member's connection to us closed: probe it now rather than when
     * its turn comes (a killed process is found a probe period sooner). */
    char lost[SL_ADDR_MAX + 16];
    while (sl_net_next_lost(node->net, lost, sizeof lost))
        sl_swim_probe_soon(node->swim, now, lost, strlen(lost));
    sl_node_timers_at(node, now_ns);
    /* What a burst (a join, a SYNC, a store catch-up) freed goes back to
     * the system now and then, so a peer at rest is as small as it can be. */
    if (now_ns >= node->trim_ns) {
        node->trim_ns = now_ns + TRIM_EVERY_NS;
        sl_plat_trim_memory();
    }
    /* Seeds are re-dialled for ever; say so when none has answered. */
    if (node->seed_count > 0 && now_ns >= node->alone_warn_ns) {
        node->alone_warn_ns = now_ns + ALONE_WARN_EVERY_NS;
        if (sl_swim_member_count(node->swim) <= 1)
            sl_log(SL_LOG_WARNING, "PEER-ALONE",
                   "no answer yet from %s%s; still trying. Check --join, that a peer runs "
                   "there, and that it uses the same --key (or none)",
                   node->first_seed, node->seed_count > 1 ? " or the other seeds" : "");
    }
    return node->failed; /* (SL_OK unless a module called sl_node_fail) */
}

sl_err sl_node_leave(sl_node_t *node, int wait_ms) {
    sl_log(SL_LOG_NOTICE, "PEER-LEAVE", "leaving the cluster");
    sl_err err = sl_swim_leave(node->swim, now_ms());
    if (err != SL_OK)
        return err;
    flush_swim(node);
    uint64_t end = sl_plat_now_ns() + (uint64_t)wait_ms * 1000000ull;
    while (sl_plat_now_ns() < end) {
        uint64_t left_ms = (end - sl_plat_now_ns()) / 1000000ull;
        if ((err = sl_node_step(node, (int)(left_ms < 50 ? left_ms : 50))) != SL_OK)
            return err;
    }
    sl_net_stats_t ns;
    sl_net_stats(node->net, &ns);
    if (!sl_swim_leave_sent(node->swim) || ns.pending > 0)
        sl_log(SL_LOG_WARNING, "PEER-LEAVE",
               "leaving before the announcement could go out (%" PRIu64 " waiting); others will "
               "see this peer as dead instead of left",
               ns.pending);
    return SL_OK;
}

sl_err sl_node_run(sl_node_t *node) {
    while (!sl_plat_stop_requested()) {
        sl_err err = sl_node_step(node, 1000);
        if (err != SL_OK) {
            sl_log(SL_LOG_ERR, "PEER-LOOP", "event loop failed: %s", sl_strerror(err));
            return err;
        }
    }
    sl_log(SL_LOG_NOTICE, "PEER-STOP", "signal %d: stopping", sl_plat_stop_requested());
    for (size_t i = 0; i < node->stop_hook_count; i++)
        node->stop_hooks[i].fn(node->stop_hooks[i].ctx, node);
    return sl_node_leave(node, node->leave_wait_ms);
}
