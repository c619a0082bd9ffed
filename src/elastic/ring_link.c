/* The ring all-reduce over ZeroMQ (src/elastic/ring_link.h,
 * docs/elastic.md "The ring's transport"). The schedule is sl_ring_next's;
 * this file moves its messages: a DEALER to rank+1, a ROUTER from rank-1,
 * two cursors over the schedule (sends run up to `window` operations ahead
 * of the receives, each send waiting for the receive it depends on), one
 * zmq_poll when neither can move. Its own ZeroMQ context: the ring's
 * bytes never queue behind the peer's gossip in net.c's I/O thread. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <zmq.h>

#include "base/le.h"
#include "elastic/ring_link.h"
#include "starling/net.h"
#include "starling/platform.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ring's payload is little-endian float32: port the payload encoding first"
#endif

#define ZAP_ENDPOINT "inproc://zeromq.zap.01" /* RFC 27: one per context */
#define ZAP_DOMAIN "starling-ring"
#define RID_LEN 16 /* routing id: "slr1", round (8), rank (4) */
#define HANDSHAKE_FAILED                                                                 \
    (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |        \
     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
#define MON_EVENTS                                                                       \
    (ZMQ_EVENT_CONNECTED | ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | HANDSHAKE_FAILED)

struct sl_ring_link {
    uint64_t job;            /* cfg.job */
    uint64_t round;          /* cfg.round */
    uint32_t world;          /* cfg.world */
    uint32_t rank;           /* cfg.rank */
    uint64_t chunk;          /* floats per message */
    uint32_t window;         /* operations sent ahead of the receives */
    uint32_t timeout_ms;     /* no progress this long ends the link */
    uint32_t calls;          /* all-reduces begun (the header's call) */
    void *ctx;               /* this link's ZeroMQ context, NULL once torn down */
    void *router;            /* bound; receives from rank-1 */
    void *dealer;            /* connected to rank+1 */
    void *mon_router;        /* PAIR reading the ROUTER's monitor events */
    void *mon_dealer;        /* PAIR reading the DEALER's monitor events */
    bool keyed;              /* CurveZMQ + ZAP */
    uint8_t key_public[32];  /* the cluster's public key, binary, for ZAP */
    void *zap;               /* ZAP handler (REP), owned by zap_thread once it runs */
    bool zap_running;        /* zap_thread was started */
    pthread_t zap_thread;    /* answers ZAP requests until the context shuts down */
    uint8_t prev_rid[RID_LEN]; /* routing id rank-1's DEALER sets */
    int dealer_fd;           /* the DEALER's connection rank+1 welcomed, else -1 */
    int dealer_conn_fd;      /* its latest connection (from CONNECTED), else -1 */
    uint32_t dealer_connects; /* CONNECTED events seen */
    uint32_t hellos_for;     /* the connection count the last HELLO went out at */
    bool welcomed;           /* rank+1 answered HELLO on this link's connection */
    int prev_fd;             /* rank-1's connection (the one its HELLO came on), or -1 */
    bool prev_known;         /* rank-1's HELLO came (prev_fd is its connection) */
    atomic_bool abort;       /* sl_ring_link_abort: leave at once */
    bool dealer_lost;        /* the DEALER's connection broke */
    bool prev_lost;          /* rank-1's connection broke */
    bool auth_failed;        /* the handshake with rank+1 failed (its key, or its ZAP said no) */
    bool dealer_refused;     /* rank+1 closed a connection mid-handshake */
    bool router_refused;     /* a connection here failed its handshake before rank-1 sent */
    uint64_t strays;         /* messages from another sender, dropped */
    uint64_t sends_left;     /* test switch: die after this many sends (0: never) */
    zmq_msg_t f[4];          /* receive frames, reused (no allocation by this code) */
    sl_err err;              /* what ended the link, SL_OK while it works */
    char errbuf[200];        /* ditto, in words */
};

static void set_int(void *sock, int opt, int v) {
    zmq_setsockopt(sock, opt, &v, sizeof v);
}

static void make_rid(uint8_t *rid, uint64_t round, uint32_t rank) {
    memcpy(rid, "slr1", 4);
    sl_put64le(rid + 4, round);
    sl_put32le(rid + 12, rank);
}

/* The first frame: job, round, call, step, chunk (docs/elastic.md). */
static void make_header(uint8_t *h, const sl_ring_link_t *l, uint32_t call, uint32_t step,
                        uint64_t chunk) {
    sl_put64le(h, l->job);
    sl_put64le(h + 8, l->round);
    sl_put32le(h + 16, call);
    sl_put32le(h + 20, step);
    sl_put64le(h + 24, chunk);
}

/* ---- ZAP: accept only the cluster's public key (sl_net_zap_answer) ---- */

/* Answers the ROUTER's ZAP requests (RFC 27) until the context shuts down;
 * a thread of its own, so a handshake completes while the caller computes
 * between all-reduces. */
static void *zap_main(void *arg) {
    sl_ring_link_t *l = arg;
    while (sl_net_zap_answer(l->zap, l->key_public, 0, NULL, 0) >= 0 || errno != ETERM)
        ;
    zmq_close(l->zap);
    return NULL;
}

/* ---- Teardown and errors ---- */

/* Closes every socket and terminates the context: afterwards ZeroMQ holds
 * nothing of the caller's buffer (linger 0 drops what was not sent, and
 * zmq_ctx_term returns once every message is released). */
static void teardown(sl_ring_link_t *l) {
    if (!l->ctx)
        return;
    void *socks[] = {l->dealer, l->router, l->mon_dealer, l->mon_router};
    for (size_t i = 0; i < sizeof socks / sizeof socks[0]; i++)
        if (socks[i]) {
            set_int(socks[i], ZMQ_LINGER, 0);
            zmq_close(socks[i]);
        }
    l->dealer = l->router = l->mon_dealer = l->mon_router = NULL;
    zmq_ctx_shutdown(l->ctx);
    if (l->zap_running)
        pthread_join(l->zap_thread, NULL);
    else if (l->zap)
        zmq_close(l->zap);
    l->zap = NULL;
    l->zap_running = false;
    while (zmq_ctx_term(l->ctx) != 0 && errno == EINTR) {
    }
    l->ctx = NULL;
}

static sl_err fail(sl_ring_link_t *l, sl_err err, const char *fmt, ...) {
    if (l->err == SL_OK) {
        int n = 0;
        if (err != SL_EPROTO && l->router_refused && !l->prev_known) {
            /* the likeliest cause: rank-1 holds another key */
            err = SL_EAUTH;
            n = snprintf(l->errbuf, sizeof l->errbuf,
                         "a connection from rank %u's side failed its handshake (wrong cluster "
                         "key?), then: ", (l->rank + l->world - 1) % l->world);
        }
        l->err = err;
        va_list ap;
        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < sizeof l->errbuf)
            vsnprintf(l->errbuf + n, sizeof l->errbuf - (size_t)n, fmt, ap);
        va_end(ap);
        sl_log(SL_LOG_WARNING, "RING-LINK-FAILED", "round %llu rank %u: %s",
               (unsigned long long)l->round, l->rank, l->errbuf);
    }
    teardown(l);
    return l->err;
}

const char *sl_ring_link_error(const sl_ring_link_t *l) {
    return l->errbuf;
}

/* ---- Open and close ---- */

static sl_err monitor(sl_ring_link_t *l, void *sock, const char *name, void **pair) {
    char ep[96]; /* (room for any name: gcc cannot bound it) */
    snprintf(ep, sizeof ep, "inproc://sl-ring-%s", name);
    if (zmq_socket_monitor(sock, ep, MON_EVENTS) != 0)
        return SL_EIO;
    *pair = zmq_socket(l->ctx, ZMQ_PAIR);
    if (!*pair || zmq_connect(*pair, ep) != 0)
        return SL_EIO;
    return SL_OK;
}

static sl_err apply_curve_client(void *sock, const sl_net_key_t *key) {
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, key->public_z85, SL_NET_KEY_Z85_LEN + 1) ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, key->public_z85, SL_NET_KEY_Z85_LEN + 1) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, key->secret_z85, SL_NET_KEY_Z85_LEN + 1))
        return SL_EAUTH;
    return SL_OK;
}

static sl_err open_sockets(sl_ring_link_t *l, const sl_ring_link_cfg_t *cfg);

sl_err sl_ring_link_open(const sl_ring_link_cfg_t *cfg, sl_ring_link_t **out) {
    *out = NULL;
    if (cfg->world == 0 || cfg->rank >= cfg->world || (cfg->world > 1 && !cfg->endpoints))
        return SL_EINVAL;
    size_t chunk_bytes = cfg->chunk_bytes ? cfg->chunk_bytes : SL_RING_LINK_CHUNK_BYTES;
    if (chunk_bytes < sizeof(float))
        return SL_EINVAL;
    sl_ring_link_t *l = sl_calloc(1, sizeof *l);
    if (!l)
        return SL_ENOMEM;
    l->job = cfg->job;
    l->round = cfg->round;
    l->world = cfg->world;
    l->rank = cfg->rank;
    l->chunk = chunk_bytes / sizeof(float);
    l->window = cfg->window ? cfg->window : SL_RING_LINK_WINDOW;
    l->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : SL_RING_LINK_TIMEOUT_MS;
    l->dealer_fd = l->dealer_conn_fd = l->prev_fd = -1;
    for (int i = 0; i < 4; i++)
        zmq_msg_init(&l->f[i]);
    sl_err err = cfg->world > 1 ? open_sockets(l, cfg) : SL_OK;
    if (err != SL_OK) {
        sl_ring_link_close(&l); /* what failed was logged (RING-LINK-FAILED) */
        return err;
    }
    *out = l;
    return SL_OK;
}

/* Binds the ROUTER, connects the DEALER, with keys and monitors. */
static sl_err open_sockets(sl_ring_link_t *l, const sl_ring_link_cfg_t *cfg) {
    uint32_t prev = (cfg->rank + cfg->world - 1) % cfg->world, next = (cfg->rank + 1) % cfg->world;
    const char *bind = cfg->bind ? cfg->bind : cfg->endpoints[cfg->rank];
    const char *dial = cfg->endpoints[next];
    uint8_t rid[RID_LEN];
    make_rid(rid, cfg->round, cfg->rank);
    make_rid(l->prev_rid, cfg->round, prev);
    char name[48];
    l->ctx = zmq_ctx_new();
    if (!l->ctx)
        return fail(l, SL_EIO, "cannot make a zeromq context: %s", zmq_strerror(errno));
    if (cfg->key) {
        l->keyed = true;
        if (!zmq_z85_decode(l->key_public, cfg->key->public_z85))
            return fail(l, SL_EAUTH, "the cluster key's public half is not z85");
        /* The ZAP handler must be bound before any Curve server socket. */
        l->zap = zmq_socket(l->ctx, ZMQ_REP);
        if (!l->zap || zmq_bind(l->zap, ZAP_ENDPOINT) != 0)
            return fail(l, SL_EIO, "cannot bind the zap handler: %s", zmq_strerror(errno));
        if (pthread_create(&l->zap_thread, NULL, zap_main, l) != 0)
            return fail(l, SL_EIO, "cannot start the zap thread");
        l->zap_running = true;
    }
    l->router = zmq_socket(l->ctx, ZMQ_ROUTER);
    l->dealer = zmq_socket(l->ctx, ZMQ_DEALER);
    if (!l->router || !l->dealer)
        return fail(l, SL_EIO, "cannot make the ring's sockets: %s", zmq_strerror(errno));
    /* No high-water mark: the window bounds what is queued, and a send
     * never blocks (a blocked send beside a receive could deadlock). */
    set_int(l->router, ZMQ_RCVHWM, 0);
    set_int(l->dealer, ZMQ_SNDHWM, 0);
    set_int(l->router, ZMQ_LINGER, 0);
    set_int(l->dealer, ZMQ_LINGER, 0);
    set_int(l->dealer, ZMQ_RECONNECT_IVL, 50);
    /* A peer that stops answering at the TCP level is seen within the
     * timeout, not at the kernel's retransmission limit. */
    set_int(l->dealer, ZMQ_HEARTBEAT_IVL, (int)(l->timeout_ms / 4 ? l->timeout_ms / 4 : 1));
    set_int(l->dealer, ZMQ_HEARTBEAT_TIMEOUT, (int)l->timeout_ms);
    set_int(l->router, ZMQ_HEARTBEAT_IVL, (int)(l->timeout_ms / 4 ? l->timeout_ms / 4 : 1));
    set_int(l->router, ZMQ_HEARTBEAT_TIMEOUT, (int)l->timeout_ms);
    set_int(l->router, ZMQ_SNDBUF, 4 << 20);
    set_int(l->router, ZMQ_RCVBUF, 4 << 20);
    set_int(l->dealer, ZMQ_SNDBUF, 4 << 20);
    set_int(l->dealer, ZMQ_RCVBUF, 4 << 20);
    zmq_setsockopt(l->dealer, ZMQ_ROUTING_ID, rid, RID_LEN);
    if (l->keyed) {
        set_int(l->router, ZMQ_CURVE_SERVER, 1);
        if (zmq_setsockopt(l->router, ZMQ_CURVE_SECRETKEY, cfg->key->secret_z85,
                           SL_NET_KEY_Z85_LEN + 1) != 0 ||
            zmq_setsockopt(l->router, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN)) != 0 ||
            apply_curve_client(l->dealer, cfg->key) != SL_OK)
            return fail(l, SL_EAUTH, "cannot set the ring's curve keys: %s", zmq_strerror(errno));
    }
    snprintf(name, sizeof name, "%p-r", (void *)l);
    if (monitor(l, l->router, name, &l->mon_router) != SL_OK)
        return fail(l, SL_EIO, "cannot monitor the ring's router: %s", zmq_strerror(errno));
    snprintf(name, sizeof name, "%p-d", (void *)l);
    if (monitor(l, l->dealer, name, &l->mon_dealer) != SL_OK)
        return fail(l, SL_EIO, "cannot monitor the ring's dealer: %s", zmq_strerror(errno));
    if (zmq_bind(l->router, bind) != 0)
        return fail(l, SL_EIO, "cannot bind %s: %s", bind, zmq_strerror(errno));
    if (zmq_connect(l->dealer, dial) != 0)
        return fail(l, SL_EIO, "cannot connect to %s: %s", dial, zmq_strerror(errno));
    return SL_OK;
}

void sl_ring_link_close(sl_ring_link_t **lp) {
    sl_ring_link_t *l = lp ? *lp : NULL;
    if (!l)
        return;
    teardown(l);
    for (int i = 0; i < 4; i++)
        zmq_msg_close(&l->f[i]);
    sl_free(l);
    *lp = NULL;
}

void sl_ring_link_abort(sl_ring_link_t *l) {
    if (l)
        atomic_store(&l->abort, true);
}

void sl_ring_link_test_die_after(sl_ring_link_t *l, uint64_t sends) {
    l->sends_left = sends;
}

/* ---- The all-reduce ---- */

/* Reads the monitors' events: a broken connection, a failed handshake. */
static void read_events(sl_ring_link_t *l) {
    void *mons[2] = {l->mon_dealer, l->mon_router};
    for (int m = 0; m < 2; m++) {
        for (;;) {
            zmq_msg_t ev, addr;
            zmq_msg_init(&ev);
            if (zmq_msg_recv(&ev, mons[m], ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&ev);
                break;
            }
            zmq_msg_init(&addr);
            if (zmq_msg_more(&ev))
                zmq_msg_recv(&addr, mons[m], 0);
            zmq_msg_close(&addr);
            if (zmq_msg_size(&ev) < 6) {
                zmq_msg_close(&ev);
                continue;
            }
            uint16_t event;
            int32_t value;
            memcpy(&event, zmq_msg_data(&ev), 2);
            memcpy(&value, (uint8_t *)zmq_msg_data(&ev) + 2, 4);
            zmq_msg_close(&ev);
            /* CONNECTED and ACCEPTED carry the connection's descriptor (the
             * handshake events carry an error code) */
            if (m == 0) { /* the DEALER: one connection at a time, to rank+1's port */
                /* Until rank+1 welcomed this link, a connection that breaks
                 * or closes mid-handshake is not an error: the port may
                 * still be held by rank+1's link of an older round (which
                 * drops this round's HELLO and closes), or not bound yet;
                 * ZeroMQ reconnects and the HELLO goes again. A dead
                 * rank+1 is then told by membership, or the timeout. */
                if (event == ZMQ_EVENT_CONNECTED) {
                    l->dealer_conn_fd = value;
                    l->dealer_connects++;
                } else if (event == ZMQ_EVENT_DISCONNECTED && l->welcomed && value == l->dealer_fd)
                    l->dealer_lost = true;
                else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
                    l->dealer_refused |= l->welcomed; /* closed mid-handshake */
                else if (event & HANDSHAKE_FAILED)
                    l->auth_failed = true;
            } else if ((event & HANDSHAKE_FAILED) && !l->prev_known) {
                /* a key or protocol it failed, not a mere close */
                l->router_refused |= event != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
            } else if (event == ZMQ_EVENT_DISCONNECTED && l->prev_known && value == l->prev_fd) {
                l->prev_lost = true; /* strangers' connections are not the ring's business */
            }
        }
    }
}

/* dst[i] += src[i], src as received (a float's bytes, maybe unaligned).
 * Element-wise, so the vectoriser changes no bit; GCC at -O2 (this
 * library's flags) vectorises only what its cheapest model allows, so
 * the loop asks for it: 28% of a 64 MiB call's time was this loop. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("tree-vectorize")))
#endif
static void add_floats(float *restrict dst, const uint8_t *restrict src, uint64_t n) {
    if ((uintptr_t)src % _Alignof(float) == 0) {
        const float *restrict s = (const float *)(const void *)src;
        for (uint64_t i = 0; i < n; i++)
            dst[i] += s[i];
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, src + i * sizeof v, sizeof v);
        dst[i] += v;
    }
}

/* dst[i] = (dst[i] + src[i]) / d: the reduce-scatter's last add and the
 * finalize division in one pass over the segment this rank finalizes
 * (the same two roundings, so the same bits as add_floats then
 * div_floats; one read and write of 1/W of the buffer fewer). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("tree-vectorize")))
#endif
static void add_div_floats(float *restrict dst, const uint8_t *restrict src, uint64_t n,
                           float d) {
    if ((uintptr_t)src % _Alignof(float) == 0) {
        const float *restrict s = (const float *)(const void *)src;
        for (uint64_t i = 0; i < n; i++)
            dst[i] = (dst[i] + s[i]) / d;
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, src + i * sizeof v, sizeof v);
        dst[i] = (dst[i] + v) / d;
    }
}

/* p[i] /= d: a division, not a product by 1/d (other bits); the scalar
 * loop was 18% of a 64 MiB call at W=2. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("tree-vectorize")))
#endif
static void div_floats(float *restrict p, uint64_t n, float d) {
    for (uint64_t i = 0; i < n; i++)
        p[i] /= d;
}

/* (a, b) before (c, d) in the schedule's order. */
static bool before(uint32_t a, uint64_t b, uint32_t c, uint64_t d) {
    return a < c || (a == c && b < d);
}

/* Receives every message that is waiting, applying each to the buffer.
 * Returns SL_EAGAIN when none was, SL_OK after at least one. */
/* Whether a message (its header frame) is a HELLO of this link's job and round. */
static bool is_hello(const sl_ring_link_t *l, zmq_msg_t *h) {
    uint8_t want[SL_RING_LINK_HEADER_LEN];
    make_header(want, l, 0, SL_RING_LINK_HELLO, 0);
    return zmq_msg_size(h) == sizeof want && memcmp(zmq_msg_data(h), want, sizeof want) == 0;
}

/* Rank-1's HELLO: its connection is the one it came on (from then on a
 * break of it ends the link), and it is welcomed on it. Every HELLO is
 * answered: rank-1 sends one for each connection it makes, and only the
 * answer on its live one reaches it. */
static void welcome(sl_ring_link_t *l, zmq_msg_t *hello) {
    int fd = zmq_msg_get(hello, ZMQ_SRCFD);
    l->prev_fd = fd >= 0 ? fd : l->prev_fd;
    l->prev_known = true;
    l->prev_lost = false;
    uint8_t h[SL_RING_LINK_HEADER_LEN];
    make_header(h, l, 0, SL_RING_LINK_WELCOME, 0);
    if (zmq_send(l->router, l->prev_rid, RID_LEN, ZMQ_SNDMORE | ZMQ_DONTWAIT) == RID_LEN)
        zmq_send(l->router, h, sizeof h, ZMQ_DONTWAIT);
}

/* The DEALER side of the greeting: a HELLO on each new connection to
 * rank+1's port, until rank+1's WELCOME comes back on it; only then does
 * data go out (data sent to a stale link of an older round would be lost
 * with it). Later WELCOMEs (answers to earlier HELLOs) are skipped by the
 * readers of the DEALER. */
static void greet(sl_ring_link_t *l) {
    if (l->welcomed)
        return;
    if (l->dealer_connects != l->hellos_for && l->dealer_conn_fd >= 0) {
        uint8_t h[SL_RING_LINK_HEADER_LEN];
        make_header(h, l, 0, SL_RING_LINK_HELLO, 0);
        if (zmq_send(l->dealer, h, sizeof h, ZMQ_DONTWAIT) == (int)sizeof h)
            l->hellos_for = l->dealer_connects;
    }
    zmq_msg_t m;
    zmq_msg_init(&m);
    while (!l->welcomed && zmq_msg_recv(&m, l->dealer, ZMQ_DONTWAIT) >= 0) {
        uint8_t want[SL_RING_LINK_HEADER_LEN];
        make_header(want, l, 0, SL_RING_LINK_WELCOME, 0);
        if (!zmq_msg_more(&m) && zmq_msg_size(&m) == sizeof want &&
            memcmp(zmq_msg_data(&m), want, sizeof want) == 0) {
            l->welcomed = true;
            l->dealer_fd = l->dealer_conn_fd;
        }
        while (zmq_msg_more(&m) && zmq_msg_recv(&m, l->dealer, 0) >= 0) {
        }
    }
    zmq_msg_close(&m);
}

static sl_err recv_some(sl_ring_link_t *l, float *buf, uint32_t call, float divisor,
                        sl_ring_iter_t *it, sl_ring_op_t *op, bool *have, uint64_t *done) {
    bool any = false;
    while (*have) {
        if (!op->has_recv) {
            (*done)++;
            *have = sl_ring_next(it, op);
            any = true;
            continue;
        }
        if (zmq_msg_recv(&l->f[0], l->router, ZMQ_DONTWAIT) < 0) {
            if (errno == EAGAIN)
                break;
            return fail(l, SL_ECLOSED, "cannot receive from rank %u: %s",
                        (l->rank + l->world - 1) % l->world, zmq_strerror(errno));
        }
        int n = 1; /* frames kept in f[0..2]; any beyond go through f[3] */
        bool extra = false;
        zmq_msg_t *last = &l->f[0];
        while (zmq_msg_more(last)) {
            last = &l->f[n < 3 ? n : 3];
            if (zmq_msg_recv(last, l->router, 0) < 0)
                return fail(l, SL_ECLOSED, "cannot receive a frame: %s", zmq_strerror(errno));
            if (n < 3)
                n++;
            else
                extra = true;
        }
        if (zmq_msg_size(&l->f[0]) != RID_LEN ||
            memcmp(zmq_msg_data(&l->f[0]), l->prev_rid, RID_LEN) != 0) {
            l->strays++; /* not rank-1 of this round (ROUTER names the connection) */
            continue;
        }
        if (n == 2 && !extra && zmq_msg_size(&l->f[1]) == SL_RING_LINK_HEADER_LEN &&
            sl_get32le((const uint8_t *)zmq_msg_data(&l->f[1]) + 20) == SL_RING_LINK_HELLO) {
            const uint8_t *h = zmq_msg_data(&l->f[1]);
            if (!is_hello(l, &l->f[1]))
                return fail(l, SL_EPROTO,
                            "unexpected ring message: a hello of job %016llx round %llu, "
                            "wanted job %016llx round %llu",
                            (unsigned long long)sl_get64le(h), (unsigned long long)sl_get64le(h + 8),
                            (unsigned long long)l->job, (unsigned long long)l->round);
            welcome(l, &l->f[1]);
            continue;
        }
        uint8_t want[SL_RING_LINK_HEADER_LEN];
        make_header(want, l, call, op->step, op->chunk);
        size_t got_len = n == 3 ? zmq_msg_size(&l->f[2]) : 0;
        if (n != 3 || extra)
            return fail(l, SL_EPROTO, "rank %u sent a message of %s frames, a ring message has 2",
                        (l->rank + l->world - 1) % l->world, extra ? "3 or more" : "1");
        if (zmq_msg_size(&l->f[1]) != SL_RING_LINK_HEADER_LEN ||
            memcmp(zmq_msg_data(&l->f[1]), want, SL_RING_LINK_HEADER_LEN) != 0 ||
            got_len != op->recv_len * sizeof(float)) {
            const uint8_t *h = zmq_msg_data(&l->f[1]);
            bool hl = zmq_msg_size(&l->f[1]) == SL_RING_LINK_HEADER_LEN;
            return fail(l, SL_EPROTO,
                        "unexpected ring message: job %016llx round %llu call %u step %u "
                        "chunk %llu with %zu bytes, wanted job %016llx round %llu call %u "
                        "step %u chunk %llu with %llu",
                        hl ? (unsigned long long)sl_get64le(h) : 0ULL,
                        hl ? (unsigned long long)sl_get64le(h + 8) : 0ULL,
                        hl ? sl_get32le(h + 16) : 0, hl ? sl_get32le(h + 20) : 0,
                        hl ? (unsigned long long)sl_get64le(h + 24) : 0ULL, got_len,
                        (unsigned long long)l->job, (unsigned long long)l->round, call, op->step,
                        (unsigned long long)op->chunk,
                        (unsigned long long)(op->recv_len * sizeof(float)));
        }
        const uint8_t *src = zmq_msg_data(&l->f[2]);
        float *dst = buf + op->recv_off;
        if (op->reduce && op->step == l->world - 2 && divisor != 1.0f) {
            /* the last add of the segment this rank finalizes: its
             * all-gather sends it as it is (its finalize op divides nothing) */
            add_div_floats(dst, src, op->recv_len, divisor);
        } else if (op->reduce) {
            add_floats(dst, src, op->recv_len);
        } else {
            memcpy(dst, src, op->recv_len * sizeof(float));
        }
        (*done)++;
        *have = sl_ring_next(it, op);
        any = true;
    }
    return any ? SL_OK : SL_EAGAIN;
}

/* The end of a call: this rank has everything from rank-1, so it tells
 * rank-1 (DONE), and waits for rank+1's DONE: rank+1 has then received
 * every message sent from the caller's buffer, and ZeroMQ holds none of
 * it when the call returns. One message each way per call. */
static sl_err finish(sl_ring_link_t *l, uint32_t call) {
    uint8_t h[SL_RING_LINK_HEADER_LEN];
    make_header(h, l, call, SL_RING_LINK_DONE, 0);
    if (zmq_send(l->router, l->prev_rid, RID_LEN, ZMQ_SNDMORE | ZMQ_DONTWAIT) != RID_LEN ||
        zmq_send(l->router, h, sizeof h, ZMQ_DONTWAIT) != (int)sizeof h)
        return fail(l, SL_ECLOSED, "cannot tell rank %u this call is done: %s",
                    (l->rank + l->world - 1) % l->world, zmq_strerror(errno));
    uint64_t timeout_ns = (uint64_t)l->timeout_ms * 1000000;
    uint64_t deadline = sl_plat_now_ns() + timeout_ns;
    for (;;) {
        read_events(l); /* before the receive, as in the call */
        if (zmq_msg_recv(&l->f[1], l->dealer, ZMQ_DONTWAIT) >= 0) {
            uint8_t w[SL_RING_LINK_HEADER_LEN];
            make_header(w, l, 0, SL_RING_LINK_WELCOME, 0);
            if (!zmq_msg_more(&l->f[1]) && zmq_msg_size(&l->f[1]) == sizeof w &&
                memcmp(zmq_msg_data(&l->f[1]), w, sizeof w) == 0)
                continue; /* an answer to an earlier HELLO */
            if (zmq_msg_more(&l->f[1]) || zmq_msg_size(&l->f[1]) != sizeof h ||
                memcmp(zmq_msg_data(&l->f[1]), h, sizeof h) != 0) {
                while (zmq_msg_more(&l->f[1]) && zmq_msg_recv(&l->f[1], l->dealer, 0) >= 0) {
                }
                return fail(l, SL_EPROTO, "rank %u answered with something other than done",
                            (l->rank + 1) % l->world);
            }
            return SL_OK;
        }
        if (errno != EAGAIN)
            return fail(l, SL_ECLOSED, "cannot receive from rank %u: %s", (l->rank + 1) % l->world,
                        zmq_strerror(errno));
        if (l->dealer_lost)
            return fail(l, SL_ECLOSED, "the connection to rank %u broke before it said done",
                        (l->rank + 1) % l->world);
        if (atomic_load(&l->abort))
            return fail(l, SL_ECLOSED, "left the world (asked to)");
        uint64_t now = sl_plat_now_ns();
        if (now >= deadline)
            return fail(l, SL_ETIMEDOUT, "rank %u did not say done in %u ms",
                        (l->rank + 1) % l->world, l->timeout_ms);
        zmq_pollitem_t items[2] = {
            {.socket = l->dealer, .events = ZMQ_POLLIN},
            {.socket = l->mon_dealer, .events = ZMQ_POLLIN},
        };
        long wait_ms = (long)((deadline - now) / 1000000) + 1;
        if (zmq_poll(items, 2, wait_ms < 50 ? wait_ms : 50) < 0 && errno != EINTR)
            return fail(l, SL_EIO, "zmq_poll: %s", zmq_strerror(errno));
    }
}

sl_err sl_ring_link_allreduce(sl_ring_link_t *l, float *buf, uint64_t count, float divisor) {
    if (l->err != SL_OK)
        return l->err;
    if (!(divisor > 0))
        return SL_EINVAL;
    uint32_t call = l->calls++;
    if (l->world == 1 || count == 0) { /* nothing to exchange (no DONE either) */
        if (divisor != 1.0f)
            div_floats(buf, count, divisor);
        return SL_OK;
    }
    sl_ring_cfg_t rc = {.world = l->world, .rank = l->rank, .count = count, .chunk = l->chunk};
    sl_ring_iter_t sit, rit;
    sl_ring_op_t sop, rop;
    if (sl_ring_iter_init(&sit, &rc) != SL_OK || sl_ring_iter_init(&rit, &rc) != SL_OK)
        return SL_EINVAL;
    bool shave = sl_ring_next(&sit, &sop), rhave = sl_ring_next(&rit, &rop);
    uint64_t sent = 0, received = 0; /* operations passed by each cursor */
    uint64_t timeout_ns = (uint64_t)l->timeout_ms * 1000000;
    uint64_t deadline = sl_plat_now_ns() + timeout_ns;
    while (shave || rhave) {
        bool progress = false;
        if (atomic_load(&l->abort))
            return fail(l, SL_ECLOSED, "left the world (asked to)");
        read_events(l);
        bool was = l->welcomed;
        greet(l);
        progress = l->welcomed != was;
        /* Sends: once welcomed, within the window, and after the receive
         * each depends on (chunk c of step k needs chunk c of step k-1
         * here). */
        while (shave && l->welcomed) {
            if (sop.has_send) {
                if (sent >= received + l->window)
                    break;
                if (sop.step > 0 && rhave && !before(sop.step - 1, sop.chunk, rop.step, rop.chunk))
                    break;
                if (l->sends_left && --l->sends_left == 0)
                    return fail(l, SL_ECLOSED, "test: this rank dies mid-reduce");
                float *p = buf + sop.send_off;
                /* a finalize chunk was divided as it was received (the
                 * reduce-scatter's last add, recv_some) */
                uint8_t h[SL_RING_LINK_HEADER_LEN];
                make_header(h, l, call, sop.step, sop.chunk);
                /* straight from the buffer: no free function, so no
                 * allocation either; the buffer outlives the message
                 * because rank+1 says when it has them all (DONE) */
                zmq_msg_t m;
                zmq_msg_init_data(&m, p, sop.send_len * sizeof(float), NULL, NULL);
                if (zmq_send(l->dealer, h, sizeof h, ZMQ_SNDMORE) != (int)sizeof h ||
                    zmq_msg_send(&m, l->dealer, 0) < 0) {
                    int e = errno;
                    zmq_msg_close(&m);
                    return fail(l, SL_ECLOSED, "cannot send to rank %u: %s",
                                (l->rank + 1) % l->world, zmq_strerror(e));
                }
            }
            sent++;
            shave = sl_ring_next(&sit, &sop);
            progress = true;
        }
        read_events(l); /* before the receive: a message that came before a disconnect is read */
        sl_err err = recv_some(l, buf, call, divisor, &rit, &rop, &rhave, &received);
        if (err == SL_OK)
            progress = true;
        else if (err != SL_EAGAIN)
            return err;
        if (progress) {
            deadline = sl_plat_now_ns() + timeout_ns;
            continue;
        }
        if (l->auth_failed)
            return fail(l, SL_EAUTH, "the handshake with rank %u (%s) failed: wrong cluster key?",
                        (l->rank + 1) % l->world, l->keyed ? "curve" : "no key");
        if (l->dealer_refused && shave)
            return fail(l, SL_ECLOSED,
                        "rank %u closed the connection during the handshake (it refused our "
                        "cluster key, or it died)", (l->rank + 1) % l->world);
        if (l->prev_lost && rhave)
            return fail(l, SL_ECLOSED, "rank %u closed its connection mid-reduce",
                        (l->rank + l->world - 1) % l->world);
        if (l->dealer_lost && shave)
            return fail(l, SL_ECLOSED, "the connection to rank %u broke mid-reduce",
                        (l->rank + 1) % l->world);
        uint64_t now = sl_plat_now_ns();
        if (now >= deadline)
            return fail(l, SL_ETIMEDOUT, "no progress for %u ms (step %u chunk %llu next)",
                        l->timeout_ms, rhave ? rop.step : sop.step,
                        (unsigned long long)(rhave ? rop.chunk : sop.chunk));
        zmq_pollitem_t items[4] = {
            {.socket = l->router, .events = ZMQ_POLLIN},
            {.socket = l->mon_dealer, .events = ZMQ_POLLIN},
            {.socket = l->mon_router, .events = ZMQ_POLLIN},
            {.socket = l->dealer, .events = ZMQ_POLLIN}, /* the WELCOME */
        };
        long wait_ms = (long)((deadline - now) / 1000000) + 1;
        if (zmq_poll(items, l->welcomed ? 3 : 4, wait_ms < 50 ? wait_ms : 50) < 0 &&
            errno != EINTR)
            return fail(l, SL_EIO, "zmq_poll: %s", zmq_strerror(errno));
    }
    return finish(l, call);
}
