/* The daemon's event loop in one process: nodes on loopback stepped in
 * turn find each other; control commands are a table other modules add
 * to; message types 16..63 are routed by range; the incarnation is kept
 * under the data directory and raised on every start. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "starling/msg.h"
#include "starling/peer.h"
#include "starling/platform.h"
#include "testlib.h"

#define DEADLINE_MS 10000
static const uint8_t META[] = {0x81, 0xa1, 'k', 0xa1, 'v'}; /* {"k": "v"} */

static uint64_t ms_since(uint64_t t0) {
    return (sl_plat_now_ns() - t0) / 1000000ull;
}

static char tmpdir[256];

static sl_node_t *start(const char *name, const char *seed) {
    char data[512];
    snprintf(data, sizeof data, "%s/%s", tmpdir, name);
    const char *seeds[1] = {seed};
    sl_node_config_t cfg = {.name = name, .listen = "tcp://127.0.0.1:0", .data_dir = data,
                            .seeds = seeds, .seed_count = seed ? 1 : 0, .meta = META,
                            .meta_len = sizeof META, .leave_wait_ms = 200};
    sl_test_swim_timing(&cfg.swim);
    sl_node_t *n = NULL;
    CHECK_OK(sl_node_new(&cfg, &n));
    return n;
}

static void step_all(sl_node_t **nodes, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (nodes[i])
            CHECK_OK(sl_node_step(nodes[i], 1));
}

static size_t alive_seen(const sl_node_t *n) {
    return sl_swim_alive_count(sl_node_swim(n));
}

/* A module's command: echoes its arguments in two parts. */
static int echo_calls;
static sl_err ctl_echo(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    echo_calls++;
    CHECK(ctx == (void *)&echo_calls);
    if (req->arg_count == 0)
        return SL_EINVAL; /* the node answers with the error */
    sl_err err = sl_ctl_reply(call, SL_OK, req->args[0].ptr, req->args[0].len, true);
    if (err == SL_OK)
        err = sl_ctl_reply(call, SL_OK, "!", 1, false);
    return err;
}

/* A module's command streaming many parts. */
static sl_err ctl_stream(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    sl_err err = SL_OK;
    for (int i = 0; i < 500 && err == SL_OK; i++)
        err = sl_ctl_reply(call, SL_OK, "x", 1, i < 499);
    return err;
}

/* A module's message range. */
static int routed;
static uint8_t routed_type;
static void on_store_msg(void *ctx, sl_node_t *node, uint8_t type, const uint8_t *body,
                         size_t body_len, uint64_t now_ns) {
    routed++;
    routed_type = type;
    CHECK_INT(body_len, 3);
    CHECK(!memcmp(body, "abc", 3));
}

/* Sends a control request to nodes[at] through a client while stepping
 * every node (one thread plays all sides: a node left unstepped while a
 * slow client connects would miss its probes' answers and be declared
 * dead); returns the concatenated reply body. */
static sl_err call(sl_node_t **nodes, size_t count, size_t at, const char *cmd, const char *arg,
                   char *out, size_t cap, uint32_t *status) {
    sl_node_t *n = nodes[at];
    sl_net_client_t *c = NULL;
    sl_err err = sl_net_client_new(sl_node_control_endpoint(n), NULL, &c);
    if (err != SL_OK)
        return err;
    sl_msg_t req;
    memset(&req, 0, sizeof req);
    req.type = SL_MSG_CTL_REQ;
    req.u.ctl_req.id = 77;
    req.u.ctl_req.cmd = sl_bytes_str(cmd);
    if (arg) {
        req.u.ctl_req.args[0] = sl_bytes_str(arg);
        req.u.ctl_req.arg_count = 1;
    }
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
        step_all(nodes, count);
        uint8_t *rh = NULL, *rb = NULL;
        size_t rhl, rbl;
        if (sl_net_client_recv(c, 1, &rh, &rhl, &rb, &rbl) != SL_OK)
            continue;
        sl_msg_t rep;
        CHECK_OK(sl_msg_decode(rh, rhl, rb, rbl, &rep));
        CHECK_INT(rep.type, SL_MSG_CTL_REP);
        CHECK_INT(rep.u.ctl_rep.id, 77);
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

/* A module listening to membership events. */
static int joins_seen, lefts_seen;
static void on_member(void *ctx, sl_node_t *node, const sl_swim_event_t *ev) {
    if (ev->kind == SL_SWIM_EV_JOIN)
        joins_seen++;
    if (ev->kind == SL_SWIM_EV_STATE && ev->new_state == SL_STATE_LEFT)
        lefts_seen++;
}

static void test_cluster_in_one_process(void) {
    sl_node_t *nodes[3] = {NULL, NULL, NULL};
    nodes[0] = start("a", NULL);
    CHECK_OK(sl_node_member_listen(nodes[0], on_member, NULL));
    CHECK_STR(sl_node_name(nodes[0]), "a");
    CHECK(sl_node_data_dir(nodes[0]) && strstr(sl_node_data_dir(nodes[0]), "/a"));
    nodes[1] = start("b", sl_node_addr(nodes[0]));
    nodes[2] = start("c", sl_node_addr(nodes[0]));
    uint64_t t0 = sl_plat_now_ns();
    while (ms_since(t0) < DEADLINE_MS &&
           !(alive_seen(nodes[0]) == 3 && alive_seen(nodes[1]) == 3 && alive_seen(nodes[2]) == 3))
        step_all(nodes, 3);
    for (int i = 0; i < 3; i++)
        CHECK_INT(alive_seen(nodes[i]), 3);

    /* Built-in commands and a registered one. */
    char out[65536];
    uint32_t status = 99;
    CHECK_OK(call(nodes, 3, 1, "members", NULL, out, sizeof out, &status));
    CHECK_INT(status, SL_OK);
    CHECK(strstr(out, "\"name\":\"a\"") && strstr(out, "\"name\":\"c\""));
    CHECK(strstr(out, "\"state\":\"alive\""));
    CHECK(strstr(out, "\"meta\":{\"k\":\"v\"}"));
    CHECK_OK(call(nodes, 3, 1, "stats", NULL, out, sizeof out, &status));
    CHECK(strstr(out, "\"msgs_in\"") && strstr(out, "\"bad_input\""));
    CHECK_OK(call(nodes, 3, 1, "nope", NULL, out, sizeof out, &status));
    CHECK_INT(status, SL_EUNSUPPORTED); /* proto/control.md section 4 */
    CHECK(strstr(out, "unknown command"));
    CHECK_OK(call(nodes, 3, 1, "members", "x", out, sizeof out, &status));
    CHECK_INT(status, SL_EINVAL); /* bad arguments */
    CHECK_OK(call(nodes, 3, 1, "stats", "x", out, sizeof out, &status));
    CHECK_INT(status, SL_EINVAL);
    CHECK_OK(call(nodes, 3, 1, "hello", NULL, out, sizeof out, &status));
    CHECK_INT(status, SL_OK);
    CHECK(strstr(out, "\"protocol\":1") && strstr(out, "\"members\",\"stats\",\"hello\""));

    CHECK_OK(sl_node_ctl_register(nodes[1], "echo", ctl_echo, &echo_calls));
    CHECK_ERR(sl_node_ctl_register(nodes[1], "echo", ctl_echo, NULL), SL_EEXIST);
    CHECK_ERR(sl_node_ctl_register(nodes[1], "members", ctl_echo, NULL), SL_EEXIST);
    CHECK_OK(call(nodes, 3, 1, "echo", "hello", out, sizeof out, &status));
    CHECK_INT(status, SL_OK);
    CHECK_STR(out, "hello!");
    CHECK_OK(call(nodes, 3, 1, "echo", NULL, out, sizeof out, &status));
    CHECK_INT(status, SL_EINVAL);
    CHECK_INT(echo_calls, 2);
    CHECK_OK(sl_node_ctl_register(nodes[1], "stream", ctl_stream, NULL));
    CHECK_OK(call(nodes, 3, 1, "stream", NULL, out, sizeof out, &status));
    CHECK_INT(status, SL_OK);
    CHECK_INT(strlen(out), 500);

    /* Routing of types 16..63. */
    CHECK_OK(sl_node_route_register(nodes[2], 16, 23, on_store_msg, NULL));
    CHECK_ERR(sl_node_route_register(nodes[2], 20, 30, on_store_msg, NULL), SL_EEXIST);
    CHECK_ERR(sl_node_route_register(nodes[2], 10, 20, on_store_msg, NULL), SL_EINVAL);
    CHECK_ERR(sl_node_route_register(nodes[2], 60, 64, on_store_msg, NULL), SL_EINVAL);
    CHECK_OK(sl_node_send(nodes[0], sl_node_addr(nodes[2]), 17, (const uint8_t *)"abc", 3));
    CHECK_OK(sl_node_send(nodes[0], sl_node_addr(nodes[2]), 40, (const uint8_t *)"abc", 3));
    t0 = sl_plat_now_ns();
    while (ms_since(t0) < DEADLINE_MS && routed == 0)
        step_all(nodes, 3);
    CHECK_INT(routed, 1);
    CHECK_INT(routed_type, 17);

    /* Graceful leave: the others see `left`. */
    CHECK_OK(sl_node_leave(nodes[2], 0));
    sl_swim_member_t m;
    t0 = sl_plat_now_ns();
    bool left = false;
    while (ms_since(t0) < DEADLINE_MS && !left) {
        step_all(nodes, 3);
        left = sl_swim_member_find(sl_node_swim(nodes[0]), sl_bytes_str("c"), &m) == SL_OK &&
               m.state == SL_STATE_LEFT;
    }
    CHECK(left);
    CHECK_INT(joins_seen, 2);
    CHECK_INT(lefts_seen, 1);
    for (int i = 0; i < 3; i++)
        sl_node_destroy(&nodes[i]);
}

/* A pair of peers ends up on one TCP connection (docs/transport.md, "One
 * connection a pair"): each sends on the other's connection to it when it
 * knows one, and when both opened one, the side whose address sorts higher
 * closes its own once it has been idle a few seconds. Probes and their
 * answers keep flowing, nothing is dropped. */
static void test_one_connection_a_pair(void) {
    sl_node_t *nodes[2] = {start("p", NULL), NULL};
    nodes[1] = start("q", sl_node_addr(nodes[0]));
    sl_swim_stats_t ss[2];
    sl_net_stats_t ns[2];
    uint64_t t0 = sl_plat_now_ns();
    for (;;) {
        step_all(nodes, 2);
        for (int i = 0; i < 2; i++) {
            sl_swim_stats(sl_node_swim(nodes[i]), &ss[i]);
            sl_net_stats(sl_node_net(nodes[i]), &ns[i]);
        }
        if ((ss[0].probe_acks >= 5 && ss[1].probe_acks >= 5 &&
             ns[0].conns_open + ns[1].conns_open == 1) ||
            ms_since(t0) > 4 * DEADLINE_MS)
            break;
    }
    CHECK_INT(ns[0].conns_open + ns[1].conns_open, 1);
    int shares = ns[0].conns_open == 0 ? 0 : 1; /* the side that sends on the other's */
    CHECK(ns[shares].sent_shared >= 5);
    CHECK(ns[shares].conns_shared_closed <= 1);
    CHECK_INT(ns[1 - shares].conns_shared_closed, 0);
    /* The shared connection carries on: more probes answered, no new one. */
    uint64_t acks[2] = {ss[0].probe_acks, ss[1].probe_acks};
    t0 = sl_plat_now_ns();
    while (ms_since(t0) < DEADLINE_MS) {
        step_all(nodes, 2);
        sl_swim_stats(sl_node_swim(nodes[0]), &ss[0]);
        sl_swim_stats(sl_node_swim(nodes[1]), &ss[1]);
        if (ss[0].probe_acks >= acks[0] + 3 && ss[1].probe_acks >= acks[1] + 3)
            break;
    }
    for (int i = 0; i < 2; i++) {
        CHECK(ss[i].probe_acks >= acks[i] + 3);
        sl_net_stats(sl_node_net(nodes[i]), &ns[i]);
        CHECK_INT(ns[i].dropped_out, 0);
        CHECK_INT(ns[i].replies_out, 0);
    }
    CHECK_INT(ns[0].conns_open + ns[1].conns_open, 1);
    char out[65536];
    uint32_t status = 99;
    CHECK_OK(call(nodes, 2, 0, "stats", NULL, out, sizeof out, &status));
    CHECK(strstr(out, "\"sent_shared\"") && strstr(out, "\"conns_shared_closed\""));
    for (int i = 0; i < 2; i++)
        sl_node_destroy(&nodes[i]);
}

/* A command that only counts its calls (answered by the node's empty OK). */
static int counted_calls;
static sl_err ctl_count(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    counted_calls++;
    return SL_OK;
}

/* More messages waiting than one loop turn handles (256): every one is
 * handled. The loop used to read one message past its per-turn limit and
 * drop it, losing one in 257 whenever more than 256 waited (a pipelined
 * client's puts beside the peers' store deltas). One connection queues at
 * most 256 (the ROUTER's receive high-water mark), so the backlog comes
 * from several clients. */
static void test_backlog_loses_nothing(void) {
    enum { CLIENTS = 4, PER_CLIENT = 200, REQUESTS = CLIENTS * PER_CLIENT };
    sl_node_t *n = start("busy", NULL);
    CHECK_OK(sl_node_ctl_register(n, "count", ctl_count, NULL));
    counted_calls = 0;
    sl_net_client_t *c[CLIENTS] = {NULL};
    for (int k = 0; k < CLIENTS; k++) {
        CHECK_OK(sl_net_client_new(sl_node_control_endpoint(n), NULL, &c[k]));
        for (uint32_t i = 0; i < PER_CLIENT; i++) {
            sl_msg_t req;
            memset(&req, 0, sizeof req);
            req.type = SL_MSG_CTL_REQ;
            req.u.ctl_req.id = (uint32_t)k * PER_CLIENT + i;
            req.u.ctl_req.cmd = sl_bytes_str("count");
            uint8_t h[SL_WIRE_HEADER_LEN], *b = NULL;
            size_t bl = 0;
            CHECK_OK(sl_msg_encode(&req, h, &b, &bl));
            CHECK_OK(sl_net_client_send(c[k], h, b, bl, DEADLINE_MS));
            sl_free(b);
        }
    }
    /* let them reach the node's socket before it reads any, so that more
     * than a turn's worth waits (a backlog to build, not a condition) */
    usleep(300 * 1000);
    static bool answered[REQUESTS];
    memset(answered, 0, sizeof answered);
    int replies = 0;
    uint64_t t0 = sl_plat_now_ns();
    while (replies < REQUESTS && ms_since(t0) < 3000) {
        sl_node_step(n, 1);
        for (int k = 0; k < CLIENTS; k++) {
            uint8_t *rh = NULL, *rb = NULL;
            size_t rhl, rbl;
            while (sl_net_client_recv(c[k], 0, &rh, &rhl, &rb, &rbl) == SL_OK) {
                sl_msg_t rep;
                CHECK_OK(sl_msg_decode(rh, rhl, rb, rbl, &rep));
                uint32_t id = rep.u.ctl_rep.id;
                CHECK(id < REQUESTS && id / PER_CLIENT == (uint32_t)k && !answered[id]);
                CHECK_INT(rep.u.ctl_rep.status, SL_OK);
                answered[id] = true;
                replies++;
                sl_msg_fini(&rep);
                sl_free(rh);
                sl_free(rb);
            }
        }
    }
    CHECK_INT(counted_calls, REQUESTS);
    CHECK_INT(replies, REQUESTS);
    for (int k = 0; k < CLIENTS; k++)
        sl_net_client_destroy(&c[k]);
    sl_node_destroy(&n);
}

/* A watched descriptor wakes the loop and gets its callback, once per
 * time it became readable (the callback reads it empty). */
typedef struct {
    int fd;
    int calls;
} watch_t;

static void on_readable(void *ctx, sl_node_t *node) {
    (void)node;
    watch_t *w = ctx;
    char b[16];
    while (read(w->fd, b, sizeof b) > 0) {
    }
    w->calls++;
}

static void test_watch_fd(void) {
    sl_node_t *n = start("w0", NULL);
    int fds[2];
    CHECK(pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0);
    watch_t w = {fds[0], 0};
    CHECK_OK(sl_node_watch_fd(n, fds[0], on_readable, &w));
    for (int i = 0; i < 5; i++)
        CHECK_OK(sl_node_step(n, 10));
    CHECK_INT(w.calls, 0); /* nothing written: never called */
    CHECK(write(fds[1], "x", 1) == 1);
    uint64_t end = sl_plat_now_ns() + 5000000000ull;
    while (w.calls == 0 && sl_plat_now_ns() < end)
        CHECK_OK(sl_node_step(n, 1000));
    CHECK_INT(w.calls, 1);
    for (int i = 0; i < 5; i++)
        CHECK_OK(sl_node_step(n, 10));
    CHECK_INT(w.calls, 1); /* read empty: not called again */
    close(fds[0]);
    close(fds[1]);
    sl_node_destroy(&n);
}

static void test_incarnation_persisted(void) {
    sl_node_t *n = start("solo", NULL);
    uint64_t first = sl_swim_incarnation(sl_node_swim(n));
    sl_node_destroy(&n);
    CHECK(n == NULL);
    n = start("solo", NULL);
    CHECK_INT(sl_swim_incarnation(sl_node_swim(n)), first + 1);
    sl_node_destroy(&n);
    char path[512];
    snprintf(path, sizeof path, "%s/solo/incarnation", tmpdir);
    uint8_t *data = NULL;
    size_t len = 0;
    CHECK_OK(sl_plat_read_file(path, 64, &data, &len));
    CHECK_INT(strtoull((const char *)data, NULL, 10), first + 1);
    sl_free(data);
    /* Two peers cannot share a data directory. */
    n = start("solo", NULL);
    char dir0[512];
    snprintf(dir0, sizeof dir0, "%s/solo", tmpdir);
    sl_node_config_t twin = {.name = "solo", .listen = "tcp://127.0.0.1:0", .data_dir = dir0};
    sl_swim_config_defaults(&twin.swim);
    sl_node_t *t = NULL;
    CHECK_ERR(sl_node_new(&twin, &t), SL_EBUSY);
    CHECK(t == NULL);
    sl_node_destroy(&n);
    /* A corrupt file is an error, not a silent reset. */
    CHECK_OK(sl_plat_write_file(path, "garbage", 7, 0644));
    char dir[512];
    snprintf(dir, sizeof dir, "%s/solo", tmpdir);
    sl_node_config_t cfg = {.name = "solo", .listen = "tcp://127.0.0.1:0", .data_dir = dir};
    sl_swim_config_defaults(&cfg.swim);
    CHECK_ERR(sl_node_new(&cfg, &n), SL_ECORRUPT);
    CHECK(n == NULL);
}

int main(void) {
    CHECK_OK(sl_init());
    sl_log_set_level(SL_LOG_WARNING);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sl-peer-node-test.%ld", (long)getpid());
    CHECK_OK(sl_plat_mkdirs(tmpdir, 0700));
    sl_test_run("cluster_in_one_process", test_cluster_in_one_process);
    sl_test_run("one_connection_a_pair", test_one_connection_a_pair);
    sl_test_run("backlog_loses_nothing", test_backlog_loses_nothing);
    sl_test_run("incarnation_persisted", test_incarnation_persisted);
    sl_test_run("watch_fd", test_watch_fd);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return sl_test_finish();
}
