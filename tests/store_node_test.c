/* The store inside the daemon's loop: two peers on loopback in one
 * process, stepped in turn. A write on one reaches the other through the
 * routed store messages; the control commands answer; a restarted peer
 * comes back with its data (a new incarnation) and converges again. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "starling/msg.h"
#include "starling/peer.h"
#include "starling/platform.h"
#include "starling/store.h"
#include "starling/store_node.h"
#include "testlib.h"

#define DEADLINE_MS 15000

static char tmpdir[256];

static uint64_t ms_since(uint64_t t0) { return (sl_plat_now_ns() - t0) / 1000000ull; }

typedef struct {
    sl_node_t *node;        /* the loop */
    sl_store_node_t *store; /* the store module */
} peer_t;

static void start(peer_t *p, const char *name, const char *seed) {
    char data[512], sdir[600];
    snprintf(data, sizeof data, "%s/%s", tmpdir, name);
    snprintf(sdir, sizeof sdir, "%s/%s-store", tmpdir, name);
    const char *seeds[1] = {seed};
    sl_node_config_t cfg = {.name = name, .listen = "tcp://127.0.0.1:0", .data_dir = data,
                            .seeds = seeds, .seed_count = seed ? 1 : 0, .leave_wait_ms = 100};
    sl_test_swim_timing(&cfg.swim);
    CHECK_OK(sl_node_new(&cfg, &p->node));
    sl_store_node_config_t scfg = {.dir = sdir, .sync_ms = 50};
    if (p->node)
        CHECK_OK(sl_store_node_attach(p->node, &scfg, &p->store));
}

static void stop(peer_t *p) {
    sl_node_destroy(&p->node);
    sl_store_node_destroy(&p->store);
}

static void step(peer_t *ps, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ps[i].node)
            sl_node_step(ps[i].node, 1);
}

static bool has(peer_t *p, const char *key, const char *want) {
    const uint8_t *v;
    size_t n;
    if (sl_store_get(sl_store_node_store(p->store), key, strlen(key), &v, &n) != SL_OK)
        return want == NULL;
    return want && n == strlen(want) && memcmp(v, want, n) == 0;
}

/* A control request from a client while the peers are stepped. */
static sl_err call(peer_t *ps, size_t np, peer_t *to, const char *cmd, const char *a0, const char *a1,
                   char *out, size_t cap, uint32_t *status) {
    sl_net_client_t *c = NULL;
    sl_err err = sl_net_client_new(sl_node_control_endpoint(to->node), NULL, &c);
    if (err)
        return err;
    sl_msg_t req;
    memset(&req, 0, sizeof req);
    req.type = SL_MSG_CTL_REQ;
    req.u.ctl_req.id = 5;
    req.u.ctl_req.cmd = (sl_bytes_t){(const uint8_t *)cmd, strlen(cmd)};
    const char *args[2] = {a0, a1};
    for (int i = 0; i < 2 && args[i]; i++)
        req.u.ctl_req.args[req.u.ctl_req.arg_count++] =
            (sl_bytes_t){(const uint8_t *)args[i], strlen(args[i])};
    uint8_t h[SL_WIRE_HEADER_LEN], *b = NULL;
    size_t bl = 0;
    CHECK_OK(sl_msg_encode(&req, h, &b, &bl));
    CHECK_OK(sl_net_client_send(c, h, b, bl, DEADLINE_MS));
    sl_free(b);
    size_t used = 0;
    out[0] = 0;
    uint64_t t0 = sl_plat_now_ns();
    err = SL_ETIMEDOUT;
    while (ms_since(t0) < DEADLINE_MS) {
        step(ps, np);
        uint8_t *rh = NULL, *rb = NULL;
        size_t rhl, rbl;
        if (sl_net_client_recv(c, 1, &rh, &rhl, &rb, &rbl) != SL_OK)
            continue;
        sl_msg_t rep;
        CHECK_OK(sl_msg_decode(rh, rhl, rb, rbl, &rep));
        *status = rep.u.ctl_rep.status;
        size_t l = rep.u.ctl_rep.body.len;
        if (used + l < cap) {
            memcpy(out + used, rep.u.ctl_rep.body.ptr, l);
            used += l;
            out[used] = 0;
        }
        bool more = rep.u.ctl_rep.more;
        sl_msg_fini(&rep);
        sl_free(rh);
        sl_free(rb);
        if (!more) {
            err = SL_OK;
            break;
        }
    }
    sl_net_client_destroy(&c);
    return err;
}

#define WAIT_FOR(cond)                                                                             \
    do {                                                                                           \
        uint64_t t0_ = sl_plat_now_ns();                                                           \
        while (!(cond) && ms_since(t0_) < DEADLINE_MS)                                             \
            step(ps, 2);                                                                           \
        CHECK_MSG(cond, "timed out waiting for %s", #cond);                                        \
    } while (0)

/* Peers a and b, b joined through a, each seeing both alive; false when
 * a could not start. */
static bool start_pair(peer_t ps[2]) {
    start(&ps[0], "a", NULL);
    if (!ps[0].node)
        return false;
    start(&ps[1], "b", sl_node_addr(ps[0].node));
    WAIT_FOR(sl_swim_alive_count(sl_node_swim(ps[0].node)) == 2 &&
             sl_swim_alive_count(sl_node_swim(ps[1].node)) == 2);
    return true;
}

static void test_two_peers(void) {
    peer_t ps[2] = {{0}};
    if (!start_pair(ps))
        return;
    CHECK_OK(sl_store_node_put(ps[0].store, "study/s1/state", 14, "running", 7));
    WAIT_FOR(has(&ps[1], "study/s1/state", "running"));
    char out[4096];
    uint32_t st = 99;
    CHECK_OK(call(ps, 2, &ps[1], "put", "trial/1", "claimed", out, sizeof out, &st));
    CHECK_INT(st, SL_OK);
    WAIT_FOR(has(&ps[0], "trial/1", "claimed"));
    CHECK_OK(call(ps, 2, &ps[0], "get", "trial/1", NULL, out, sizeof out, &st));
    CHECK_INT(st, SL_OK);
    CHECK_STR(out, "claimed");
    CHECK_OK(call(ps, 2, &ps[0], "keys", NULL, NULL, out, sizeof out, &st));
    CHECK_STR(out, "[\"study/s1/state\",\"trial/1\"]");
    CHECK_OK(call(ps, 2, &ps[0], "get", "nope", NULL, out, sizeof out, &st));
    CHECK_INT(st, SL_ENOTFOUND);
    CHECK_OK(call(ps, 2, &ps[0], "del", "trial/1", NULL, out, sizeof out, &st));
    CHECK_INT(st, SL_OK);
    WAIT_FOR(has(&ps[1], "trial/1", NULL));
    /* b restarts: a new incarnation, its data back from disk */
    stop(&ps[1]);
    CHECK_OK(sl_store_node_put(ps[0].store, "while/away", 10, "x", 1));
    start(&ps[1], "b", sl_node_addr(ps[0].node));
    CHECK(has(&ps[1], "study/s1/state", "running"));
    WAIT_FOR(has(&ps[1], "while/away", "x"));
    WAIT_FOR(sl_store_state_hash(sl_store_node_store(ps[0].store)) ==
             sl_store_state_hash(sl_store_node_store(ps[1].store)));
    stop(&ps[0]);
    stop(&ps[1]);
}

/* What a listener was last told of one key. */
typedef struct {
    const char *key; /* the key watched */
    char val[32];    /* its value as told ("" when gone) */
} heard_t;

static void on_change(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e) {
    heard_t *h = ctx;
    if (!key || key_len != strlen(h->key) || memcmp(key, h->key, key_len))
        return;
    snprintf(h->val, sizeof h->val, "%.*s", e ? (int)e->val_len : 0, e ? (const char *)e->val : "");
}

/* Two writes of one key in one turn (staged for the turn's group commit)
 * travel in one delta, the older atom first. The receiver's listeners
 * must hear of the newer value: they once heard nothing, the pair judged
 * by its first atom, which lost to the second (a study's live view then
 * missed a trial's last checkpoint manifest, cluster_study_test). */
static void test_two_writes_one_turn(void) {
    peer_t ps[2] = {{0}};
    if (!start_pair(ps))
        return;
    heard_t h = {.key = "t/ck"};
    CHECK_OK(sl_store_node_listen(ps[1].store, on_change, &h));
    CHECK_OK(sl_store_node_put_later(ps[0].store, "t/ck", 4, "8", 1));
    CHECK_OK(sl_store_node_put_later(ps[0].store, "t/ck", 4, "9", 1));
    WAIT_FOR(has(&ps[1], "t/ck", "9"));
    CHECK_STR(h.val, "9"); /* told, with the newer value */
    stop(&ps[0]);
    stop(&ps[1]);
}

/* proto/store.md 3.1 and envelope.md 2.1, on a peer: a DIGEST with an
 * empty reply_to, from a new replica lacking a's write, is applied (a
 * computes its answer) but gets none, not on the connection it came in on
 * either; a type-20 message (no protocol behind it) is dropped unread and
 * counted as decode.unrouted. A PING sent last on the same connection is
 * answered on it: everything before the ACK was handled before the PING,
 * so anything a sent back for the DIGEST would come before it. */
static void test_digest_without_reply_to(void) {
    peer_t ps[1] = {{0}};
    start(&ps[0], "a", NULL);
    if (!ps[0].node)
        return;
    CHECK_OK(sl_store_node_put(ps[0].store, "k", 1, "v", 1));
    sl_store_stats_t before, after;
    sl_store_stats(sl_store_node_store(ps[0].store), &before);
    sl_net_client_t *c = NULL;
    CHECK_OK(sl_net_client_new(sl_node_addr(ps[0].node), NULL, &c));
    if (!c) {
        stop(&ps[0]);
        return;
    }
    sl_store_dmsg_t d = {.type = SL_STORE_MSG_DIGEST, .sender = 0x5eed0001}; /* reply_to "" */
    sl_store_msg_t dm;
    CHECK_OK(sl_store_msg_encode(&d, SIZE_MAX, &dm));
    uint8_t h[SL_WIRE_HEADER_LEN] = {SL_WIRE_MAGIC0, SL_WIRE_MAGIC1, SL_WIRE_VERSION,
                                     SL_STORE_MSG_DIGEST};
    CHECK_OK(sl_net_client_send(c, h, dm.body, dm.len, DEADLINE_MS));
    h[3] = 20;
    CHECK_OK(sl_net_client_send(c, h, dm.body, dm.len, DEADLINE_MS));
    sl_store_msg_fini(&dm);
    sl_msg_t ping;
    memset(&ping, 0, sizeof ping);
    ping.type = SL_MSG_PING;
    ping.from = sl_bytes_str("mallory");
    ping.from_addr = sl_bytes_str("tcp://127.0.0.1:9");
    ping.u.ping.seq = 7;
    ping.u.ping.target = sl_bytes_str("a");
    uint8_t *b = NULL;
    size_t bl = 0;
    CHECK_OK(sl_msg_encode(&ping, h, &b, &bl));
    CHECK_OK(sl_net_client_send(c, h, b, bl, DEADLINE_MS));
    sl_free(b);
    int store_msgs = 0;
    bool acked = false;
    uint64_t t0 = sl_plat_now_ns();
    while (!acked && ms_since(t0) < DEADLINE_MS) {
        step(ps, 1);
        uint8_t *rh = NULL, *rb = NULL;
        size_t rhl, rbl;
        if (sl_net_client_recv(c, 1, &rh, &rhl, &rb, &rbl) != SL_OK)
            continue;
        if (rhl == SL_WIRE_HEADER_LEN && rh[3] >= SL_STORE_MSG_DIGEST && rh[3] <= SL_STORE_MSG_SUMMARY)
            store_msgs++;
        acked = rhl == SL_WIRE_HEADER_LEN && rh[3] == SL_MSG_ACK;
        sl_free(rh);
        sl_free(rb);
    }
    sl_net_client_destroy(&c);
    CHECK_MSG(acked, "no ACK for the PING sent after the DIGEST");
    CHECK_INT(store_msgs, 0);
    sl_store_stats(sl_store_node_store(ps[0].store), &after);
    CHECK_MSG(after.deltas_sent > before.deltas_sent, "the DIGEST was not handled");
    CHECK_INT(after.rejected, before.rejected);
    char out[16384];
    uint32_t st = 99;
    CHECK_OK(call(ps, 1, &ps[0], "stats", NULL, NULL, out, sizeof out, &st));
    CHECK_MSG(strstr(out, "\"unrouted\":1") != NULL, "type 20 not counted unrouted");
    stop(&ps[0]);
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR);
    snprintf(tmpdir, sizeof tmpdir, "%s/sl-store-node-%d",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
    mkdir(tmpdir, 0700);
    sl_test_run("two_peers", test_two_peers);
    sl_test_run("two_writes_one_turn", test_two_writes_one_turn);
    sl_test_run("digest_without_reply_to", test_digest_without_reply_to);
    sl_plat_remove_tree(tmpdir);
    return sl_test_finish();
}
