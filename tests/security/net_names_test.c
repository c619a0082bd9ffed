/* No DNS on the I/O path, and replies only to the sender (issue 12, items
 * 5 and 8), at the transport: numeric addresses (sl_addr_is_numeric), a
 * send to a host name refused by sl_net_send, and the remote address of a
 * message checked by sl_net_in_from between peers on two loopback
 * addresses. Run with arguments it is the attacker of the cluster tests
 * (tests/security/net_dns_test.sh, blob_reflect_test.sh):
 *   net_names_test dns ADDR N          N PINGs gossiping members at host
 *                                      names, N blob GETs and N store
 *                                      SUMMARYs answered to host names, to
 *                                      the peer at ADDR
 *   net_names_test digest ADDR REPLY N N store DIGESTs of a new replica
 *                                      (empty version vector: "send me
 *                                      everything") naming REPLY
 *   net_names_test get ADDR REPLY CHUNK BLOB N
 *                                      N blob GETs of chunk CHUNK (hex) to
 *                                      ADDR, naming REPLY for the answer
 *   net_names_test flood ADDR ROUNDS   ROUNDS SYNCs of 16,384 made-up members
 *                                      each (issue 12, item 6)
 *   net_names_test sink ADDR FILE      a ZeroMQ ROUTER at ADDR that writes
 *                                      the bytes it received to FILE (every
 *                                      100 ms) until killed */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "starling/addr.h"
#include "starling/blob_xfer.h"
#include "starling/hash.h"
#include "starling/msg.h"
#include "starling/net.h"
#include "starling/platform.h"
#include "starling/store.h"
#include "testlib.h"

static bool numeric(const char *s) { return sl_addr_is_numeric((const uint8_t *)s, strlen(s)); }

static void test_numeric(void) {
    CHECK(numeric("tcp://127.0.0.1:7600"));
    CHECK(numeric("10.1.2.3:1"));
    CHECK(numeric("tcp://[::1]:7600"));
    CHECK(numeric("tcp://[fe80::1:2]:65535"));
    CHECK(!numeric("tcp://localhost:7600"));
    CHECK(!numeric("tcp://peer.example.com:7600"));
    CHECK(!numeric("tcp://127.1:7600"));        /* what inet_aton would take, a resolver too */
    CHECK(!numeric("tcp://0x7f.0.0.1:7600"));
    CHECK(!numeric("tcp://127.0.0.1:0"));
    CHECK(!numeric("tcp://127.0.0.1:65536"));
    CHECK(!numeric("tcp://127.0.0.1:07600"));
    CHECK(!numeric("tcp://127.0.0.1"));
    CHECK(!numeric("tcp://::1:7600"));          /* IPv6 needs brackets */
    CHECK(!numeric("tcp://1.2.3.4:5;peer.example.com:7600")); /* ZeroMQ's source;destination */
    CHECK(!numeric("tcp://*:7600"));
    CHECK(!numeric(""));
    char host[64];
    CHECK_OK(sl_addr_host((const uint8_t *)"tcp://[::1]:5", 13, host, sizeof host));
    CHECK_STR(host, "::1");
    char out[SL_ADDR_MAX + 16];
    CHECK_OK(sl_addr_resolve("127.0.0.9:5", 100, out, sizeof out));
    CHECK_STR(out, "tcp://127.0.0.9:5");
    CHECK_OK(sl_addr_resolve("tcp://localhost:5", 5000, out, sizeof out));
    CHECK(numeric(out));
    CHECK_ERR(sl_addr_resolve("nohost", 100, out, sizeof out), SL_EINVAL);
}

static sl_net_t *listen_on(const char *ep) {
    sl_net_config_t cfg = {.listen = ep};
    sl_net_t *n = NULL;
    CHECK_OK(sl_net_new(&cfg, &n));
    if (n)
        sl_net_set_self(n, sl_net_endpoint(n));
    return n;
}

static void test_transport(void) {
    sl_net_t *a = listen_on("tcp://127.0.0.2:0");
    sl_net_t *b = listen_on("tcp://127.0.0.3:0");
    if (!a || !b)
        return;
    uint8_t hdr[SL_WIRE_HEADER_LEN] = {SL_WIRE_MAGIC0, SL_WIRE_MAGIC1, SL_WIRE_VERSION, 30};
    /* a host name is never handed to ZeroMQ (whose I/O thread would
     * resolve it) */
    sl_net_stats_t st;
    CHECK_ERR(sl_net_send(a, "tcp://nowhere.invalid:7600", hdr, (const uint8_t *)"x", 1),
              SL_EINVAL);
    sl_net_stats(a, &st);
    CHECK_INT(st.names_refused, 1);
    CHECK_INT(st.conns_opened, 0);
    /* a message from a (bound to 127.0.0.2) comes from 127.0.0.2, not the
     * kernel's loopback default 127.0.0.1 */
    CHECK_OK(sl_net_send(a, sl_net_endpoint(b), hdr, (const uint8_t *)"x", 1));
    sl_net_in_t in;
    uint64_t t0 = sl_plat_now_ns();
    sl_err err = SL_EAGAIN;
    while (err != SL_OK && sl_plat_now_ns() - t0 < 5000000000ull) {
        sl_net_poll(a, 10, &in);
        err = sl_net_poll(b, 10, &in);
    }
    CHECK_OK(err);
    CHECK_STR(sl_net_in_peer(b), "127.0.0.2");
    CHECK(sl_net_in_from(b, sl_net_endpoint(a)));
    CHECK(sl_net_in_from(b, "tcp://127.0.0.2:9"));
    CHECK(!sl_net_in_from(b, "tcp://127.0.0.4:9"));
    CHECK(!sl_net_in_from(b, "tcp://127.0.0.1:9"));
    CHECK(!sl_net_in_from(b, "tcp://victim.example:9"));
    /* the sender's connection to b is not taken over for another address */
    sl_net_note_inbound(b, "tcp://127.0.0.4:7600", &in.route);
    sl_net_stats(b, &st);
    CHECK_INT(st.inbound_refused, 1);
    sl_net_destroy(&a);
    sl_net_destroy(&b);
}

/* ---- the attacker ---- */

static int send_raw(sl_net_client_t *c, uint8_t type, const uint8_t *body, size_t len) {
    uint8_t hdr[SL_WIRE_HEADER_LEN] = {SL_WIRE_MAGIC0, SL_WIRE_MAGIC1, SL_WIRE_VERSION, type};
    return sl_net_client_send(c, hdr, body, len, 2000) == SL_OK ? 0 : 1;
}

static int send_get(sl_net_client_t *c, const char *reply, const uint8_t chunk[SL_BLAKE2B_LEN],
                    const uint8_t blob[SL_BLAKE2B_LEN], uint32_t i) {
    sl_blob_msg_t g = {.type = SL_BLOB_MSG_GET, .xfer = 1000 + i, .index = 0,
                       .addr = (const uint8_t *)reply, .addr_len = strlen(reply)};
    memcpy(g.chunk, chunk, SL_BLAKE2B_LEN);
    memcpy(g.blob, blob, SL_BLAKE2B_LEN);
    uint8_t *body;
    size_t len;
    if (sl_blob_msg_encode(&g, &body, &len) != SL_OK)
        return 1;
    int rc = send_raw(c, SL_BLOB_MSG_GET, body, len);
    sl_free(body);
    return rc;
}

/* A store DIGEST (want everything) or SUMMARY (a fingerprint nobody has)
 * of a made-up replica, answered to `reply`. */
static int send_store(sl_net_client_t *c, uint8_t type, const char *reply, uint64_t rid) {
    sl_store_dmsg_t m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.sender = rid;
    m.reply_to = (const uint8_t *)reply;
    m.reply_to_len = (uint32_t)strlen(reply);
    m.fingerprint = rid * 0x9e3779b97f4a7c15ull;
    sl_store_msg_t out;
    if (sl_store_msg_encode(&m, SL_MSG_MAX_LEN, &out) != SL_OK)
        return 1;
    int rc = send_raw(c, type, out.body, out.len);
    sl_store_msg_fini(&out);
    return rc;
}

static int attack_digest(const char *addr, const char *reply, int n) {
    sl_net_client_t *c = NULL;
    if (sl_net_client_new(addr, NULL, &c) != SL_OK)
        return 1;
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad |= send_store(c, SL_STORE_MSG_DIGEST, reply, 0x5eed0000u + (uint64_t)i);
    nanosleep(&(struct timespec){0, 200000000}, NULL);
    sl_net_client_destroy(&c);
    return bad;
}

static int unhex(const char *s, uint8_t *out) {
    if (strlen(s) != 2 * SL_BLAKE2B_LEN)
        return 1;
    for (size_t i = 0; i < SL_BLAKE2B_LEN; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return 1;
        out[i] = (uint8_t)v;
    }
    return 0;
}

static int attack_dns(const char *addr, int n) {
    sl_net_client_t *c = NULL;
    if (sl_net_client_new(addr, NULL, &c) != SL_OK)
        return 1;
    uint8_t zero[SL_BLAKE2B_LEN] = {0};
    int bad = 0;
    for (int i = 0; i < n; i++) {
        char name[32], ghost[64], reply[64];
        snprintf(name, sizeof name, "ghost%d", i);
        snprintf(ghost, sizeof ghost, "tcp://ghost%d.dns.test:7600", i);
        snprintf(reply, sizeof reply, "tcp://reply%d.dns.test:7600", i);
        sl_msg_t m;
        memset(&m, 0, sizeof m);
        m.type = SL_MSG_PING;
        m.from = sl_bytes_str("mallory");
        m.from_addr = sl_bytes_str("tcp://127.0.0.1:9");
        m.u.ping.seq = (uint32_t)i + 1;
        m.u.ping.target = sl_bytes_str("nobody");
        m.gossip[0].name = sl_bytes_str(name);
        m.gossip[0].addr = sl_bytes_str(ghost);
        m.gossip[0].incarnation = 1;
        m.gossip[0].state = SL_STATE_ALIVE;
        m.gossip_count = 1;
        uint8_t hdr[SL_WIRE_HEADER_LEN];
        uint8_t *body;
        size_t len;
        if (sl_msg_encode(&m, hdr, &body, &len) != SL_OK)
            return 1;
        bad |= sl_net_client_send(c, hdr, body, len, 2000) != SL_OK;
        sl_free(body);
        bad |= send_get(c, reply, zero, zero, (uint32_t)i);
        bad |= send_store(c, SL_STORE_MSG_SUMMARY, reply, 0xd15ea5e0u + (uint64_t)i);
    }
    nanosleep(&(struct timespec){0, 200000000}, NULL); /* zero linger: let the queue drain */
    sl_net_client_destroy(&c);
    return bad;
}

static int attack_get(const char *addr, const char *reply, const char *chunk_hex,
                      const char *blob_hex, int n) {
    uint8_t chunk[SL_BLAKE2B_LEN], blob[SL_BLAKE2B_LEN];
    if (unhex(chunk_hex, chunk) || unhex(blob_hex, blob))
        return 2;
    sl_net_client_t *c = NULL;
    if (sl_net_client_new(addr, NULL, &c) != SL_OK)
        return 1;
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad |= send_get(c, reply, chunk, blob, (uint32_t)i);
    nanosleep(&(struct timespec){0, 200000000}, NULL);
    sl_net_client_destroy(&c);
    return bad;
}

static int attack_flood(const char *addr, int rounds) {
    enum { FAKES = 16384 };
    sl_member_msg_t *recs = calloc(FAKES, sizeof *recs);
    char *names = malloc((size_t)FAKES * 24);
    sl_net_client_t *c = NULL;
    if (!recs || !names || sl_net_client_new(addr, NULL, &c) != SL_OK)
        return 1;
    int bad = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < FAKES; i++) {
            char *n = names + (size_t)i * 24;
            snprintf(n, 24, "fake-%d-%d", r, i);
            recs[i].name = sl_bytes_str(n);
            recs[i].addr = sl_bytes_str("tcp://127.0.0.1:9");
            recs[i].incarnation = 1;
            recs[i].state = SL_STATE_ALIVE;
        }
        sl_msg_t m;
        memset(&m, 0, sizeof m);
        m.type = SL_MSG_SYNC;
        m.from = sl_bytes_str("mallory");
        m.from_addr = sl_bytes_str("tcp://127.0.0.1:9");
        m.u.sync.reply = 1; /* no answer wanted */
        m.u.sync.members = recs;
        m.u.sync.member_count = FAKES;
        uint8_t hdr[SL_WIRE_HEADER_LEN];
        uint8_t *body;
        size_t len;
        if (sl_msg_encode(&m, hdr, &body, &len) != SL_OK)
            return 1;
        bad |= sl_net_client_send(c, hdr, body, len, 5000) != SL_OK;
        sl_free(body);
    }
    nanosleep(&(struct timespec){0, 500000000}, NULL);
    sl_net_client_destroy(&c);
    free(recs);
    free(names);
    return bad;
}

static int sink(const char *addr, const char *file) {
    void *ctx = zmq_ctx_new();
    void *r = zmq_socket(ctx, ZMQ_ROUTER);
    if (zmq_bind(r, addr) != 0) {
        fprintf(stderr, "sink: cannot bind %s: %s\n", addr, zmq_strerror(errno));
        return 1;
    }
    uint64_t total = 0;
    char buf[65536];
    for (;;) {
        zmq_pollitem_t it = {r, 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, 100);
        int got;
        while ((got = zmq_recv(r, buf, sizeof buf, ZMQ_DONTWAIT)) >= 0)
            total += (uint64_t)got;
        FILE *f = fopen(file, "w");
        if (f) {
            fprintf(f, "%llu\n", (unsigned long long)total);
            fclose(f);
        }
    }
}

int main(int argc, char **argv) {
    sl_log_set_level(SL_LOG_ERR);
    if (argc >= 4 && !strcmp(argv[1], "dns"))
        return attack_dns(argv[2], atoi(argv[3]));
    if (argc >= 7 && !strcmp(argv[1], "get"))
        return attack_get(argv[2], argv[3], argv[4], argv[5], atoi(argv[6]));
    if (argc >= 5 && !strcmp(argv[1], "digest"))
        return attack_digest(argv[2], argv[3], atoi(argv[4]));
    if (argc >= 4 && !strcmp(argv[1], "flood"))
        return attack_flood(argv[2], atoi(argv[3]));
    if (argc >= 4 && !strcmp(argv[1], "sink"))
        return sink(argv[2], argv[3]);
    if (argc > 1) {
        fprintf(stderr, "usage: see the comment at the top of net_names_test.c\n");
        return 2;
    }
    sl_test_run("numeric", test_numeric);
    sl_test_run("transport", test_transport);
    return sl_test_finish();
}
