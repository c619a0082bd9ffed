/* Issue 12, item 1: the control protocol apart from gossip (docs/security.md,
 * "The control endpoint"). One node, stepped by the test, and a client.
 *
 *   gossip_refused   a CTL_REQ on the gossip ROUTER is answered SL_EAUTH
 *                    with where control is served, never run, and counted
 *                    in bad_input; the same request on the control
 *                    endpoint runs
 *   control_socket   the default endpoint is ipc://DATA/control.sock,
 *                    mode 0600, gone after the node is destroyed; a peer
 *                    message on it is refused and counted
 *   tcp_policy       a TCP control endpoint off loopback is refused
 *                    without a key (SL_EAUTH), allowed on loopback;
 *                    sl_net_host_is_loopback's cases
 *   privileges       commands are allowed with a key or allow_commands
 *                    only; test faults only with test_faults
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "starling/net.h"
#include "starling/peer.h"
#include "starling/platform.h"
#include "testlib.h"

#define DEADLINE_MS 5000

static char tmpdir[256];
static int ran; /* calls of the "probe" command */

static sl_err ctl_probe(void *ctx, sl_node_t *node, const sl_ctl_req_t *req, sl_ctl_call_t *call) {
    (void)ctx;
    (void)node;
    (void)req;
    ran++;
    return sl_ctl_reply(call, SL_OK, "{}", 2, false);
}

static sl_node_t *start(const char *name, const char *control, const sl_net_key_t *key) {
    char data[512];
    snprintf(data, sizeof data, "%s/%s", tmpdir, name);
    sl_node_config_t cfg = {.name = name, .listen = "tcp://127.0.0.1:0", .data_dir = data,
                            .control = control, .key = key, .leave_wait_ms = 50};
    sl_test_swim_timing(&cfg.swim);
    sl_node_t *n = NULL;
    CHECK_OK(sl_node_new(&cfg, &n));
    if (n)
        CHECK_OK(sl_node_ctl_register(n, "probe", ctl_probe, NULL));
    return n;
}

/* Sends `cmd` to `addr` and steps `n` until the reply; its status and
 * body into *status and out. */
static sl_err call(sl_node_t *n, const char *addr, const char *cmd, uint32_t *status, char *out,
                   size_t cap) {
    sl_net_client_t *c = NULL;
    sl_err err = sl_net_client_new(addr, NULL, &c);
    if (err != SL_OK)
        return err;
    uint8_t h[SL_WIRE_HEADER_LEN], *b = NULL;
    size_t bl = 0;
    CHECK_OK(sl_msg_ctl_req_encode(9, cmd, NULL, 0, h, &b, &bl));
    CHECK_OK(sl_net_client_send(c, h, b, bl, DEADLINE_MS));
    sl_free(b);
    uint64_t t0 = sl_plat_now_ns();
    err = SL_ETIMEDOUT;
    while ((sl_plat_now_ns() - t0) / 1000000ull < DEADLINE_MS) {
        sl_node_step(n, 5);
        uint8_t *rh = NULL, *rb = NULL;
        size_t rhl, rbl;
        if (sl_net_client_recv(c, 1, &rh, &rhl, &rb, &rbl) != SL_OK)
            continue;
        sl_msg_t rep;
        CHECK_OK(sl_msg_decode(rh, rhl, rb, rbl, &rep));
        *status = rep.u.ctl_rep.status;
        size_t l = rep.u.ctl_rep.body.len < cap - 1 ? rep.u.ctl_rep.body.len : cap - 1;
        memcpy(out, rep.u.ctl_rep.body.ptr, l);
        out[l] = 0;
        sl_msg_fini(&rep);
        sl_free(rh);
        sl_free(rb);
        err = SL_OK;
        break;
    }
    sl_net_client_destroy(&c);
    return err;
}

static void test_gossip_refused(void) {
    sl_node_t *n = start("g", NULL, NULL);
    if (!n)
        return;
    uint32_t st = 0;
    char body[16384];
    ran = 0;
    CHECK_OK(call(n, sl_node_addr(n), "probe", &st, body, sizeof body));
    CHECK_INT(st, SL_EAUTH);
    CHECK_INT(ran, 0);
    CHECK_MSG(strstr(body, "not served on the gossip port") != NULL, "body: %s", body);
    CHECK_MSG(strstr(body, "control.sock") != NULL, "body names no endpoint: %s", body);
    CHECK_MSG(strstr(body, "peerctl --peer") != NULL, "body says not how: %s", body);
    CHECK_OK(call(n, sl_node_control_endpoint(n), "probe", &st, body, sizeof body));
    CHECK_INT(st, SL_OK);
    CHECK_INT(ran, 1);
    /* counted: stats' bad_input_by_module.ctl and ctl.refused */
    CHECK_OK(call(n, sl_node_control_endpoint(n), "stats", &st, body, sizeof body));
    CHECK_MSG(strstr(body, "\"bad_input_by_module\":{\"ctl\":1}") != NULL, "stats: %.300s", body);
    CHECK_MSG(strstr(body, "\"refused\":1") != NULL, "stats: %.300s", body);
    sl_node_destroy(&n);
}

static void test_control_socket(void) {
    sl_node_t *n = start("s", NULL, NULL);
    if (!n)
        return;
    char want[600];
    snprintf(want, sizeof want, "ipc://%s/s/control.sock", tmpdir);
    CHECK_STR(sl_node_control_endpoint(n), want);
    struct stat st;
    CHECK(stat(want + 6, &st) == 0);
    CHECK(S_ISSOCK(st.st_mode));
    CHECK_INT(st.st_mode & 0777, 0600);
    /* a peer message (a PING-sized membership type) on the control endpoint */
    sl_net_client_t *c = NULL;
    CHECK_OK(sl_net_client_new(want, NULL, &c));
    uint8_t h[SL_WIRE_HEADER_LEN] = {SL_WIRE_MAGIC0, SL_WIRE_MAGIC1, SL_WIRE_VERSION, 20};
    CHECK_OK(sl_net_client_send(c, h, (const uint8_t *)"\x80", 1, DEADLINE_MS));
    uint32_t code = 0;
    char body[16384];
    for (int i = 0; i < 40; i++)
        sl_node_step(n, 5);
    CHECK_OK(call(n, want, "stats", &code, body, sizeof body));
    CHECK_MSG(strstr(body, "\"ctl\":1") != NULL, "not counted: %.300s", body);
    sl_net_client_destroy(&c);
    sl_node_destroy(&n);
    CHECK(stat(want + 6, &st) != 0); /* no stale socket says a peer listens */
    /* none: no endpoint */
    n = start("none", "none", NULL);
    if (n)
        CHECK_STR(sl_node_control_endpoint(n), "");
    sl_node_destroy(&n);
}

static void test_tcp_policy(void) {
    char data[512];
    snprintf(data, sizeof data, "%s/t", tmpdir);
    sl_node_config_t cfg = {.name = "t", .listen = "tcp://127.0.0.1:0", .data_dir = data,
                            .control = "tcp://0.0.0.0:0"};
    sl_test_swim_timing(&cfg.swim);
    sl_node_t *n = NULL;
    CHECK_ERR(sl_node_new(&cfg, &n), SL_EAUTH);
    CHECK(n == NULL);
    cfg.control = "127.0.0.1:0";
    CHECK_OK(sl_node_new(&cfg, &n));
    if (n)
        CHECK(!strncmp(sl_node_control_endpoint(n), "tcp://127.0.0.1:", 16));
    sl_node_destroy(&n);
    /* with a key, off loopback is allowed (CurveZMQ and ZAP) */
    sl_net_key_t key;
    CHECK_OK(sl_net_key_generate(&key));
    cfg.control = "tcp://0.0.0.0:0";
    cfg.key = &key;
    CHECK_OK(sl_node_new(&cfg, &n));
    sl_node_destroy(&n);
    static const char *const yes[] = {"127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"};
    static const char *const no[] = {"0.0.0.0", "*", "10.0.0.1", "127.0.0.1.evil.com",
                                     "127.0.0.x", "128.0.0.1", "", "::", "localhost.evil"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        CHECK_MSG(sl_net_host_is_loopback(yes[i], strlen(yes[i])), "%s", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        CHECK_MSG(!sl_net_host_is_loopback(no[i], strlen(no[i])), "%s", no[i]);
}

static void test_privileges(void) {
    char data[512];
    snprintf(data, sizeof data, "%s/p", tmpdir);
    sl_node_config_t cfg = {.name = "p", .listen = "tcp://127.0.0.1:0", .data_dir = data};
    sl_test_swim_timing(&cfg.swim);
    sl_node_t *n = NULL;
    CHECK_OK(sl_node_new(&cfg, &n));
    if (n) {
        CHECK(!sl_node_commands_allowed(n));
        CHECK(!sl_node_test_faults(n));
    }
    sl_node_destroy(&n);
    cfg.allow_commands = cfg.test_faults = true;
    CHECK_OK(sl_node_new(&cfg, &n));
    if (n) {
        CHECK(sl_node_commands_allowed(n));
        CHECK(sl_node_test_faults(n));
    }
    sl_node_destroy(&n);
    sl_net_key_t key;
    CHECK_OK(sl_net_key_generate(&key));
    cfg.allow_commands = cfg.test_faults = false;
    cfg.key = &key;
    CHECK_OK(sl_node_new(&cfg, &n));
    if (n)
        CHECK(sl_node_commands_allowed(n)); /* key holders are trusted */
    sl_node_destroy(&n);
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR);
    CHECK_OK(sl_init());
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sl-ctl-node-%d", (int)getpid());
    CHECK_OK(sl_plat_mkdirs(tmpdir, 0700));
    sl_test_run("gossip_refused", test_gossip_refused);
    sl_test_run("control_socket", test_control_socket);
    sl_test_run("tcp_policy", test_tcp_policy);
    sl_test_run("privileges", test_privileges);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return sl_test_finish();
}
