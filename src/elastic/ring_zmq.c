/* The ring's ZeroMQ transport (ring_transport.h; docs/elastic.md "The
 * ring's transport"): a DEALER to rank+1, a ROUTER from rank-1, CurveZMQ
 * with the cluster key's ZAP check when the cluster is keyed (always
 * then: the ring's bytes are encrypted). Its own ZeroMQ context: the
 * ring's bytes never queue behind the peer's gossip in net.c's I/O
 * thread. A message is two frames, the 32-byte header and the payload;
 * sends go straight from the caller's buffer (zmq_msg_init_data without
 * a free function: no copy, no allocation); libzmq's decoder allocates
 * each received payload, which the driver adds or copies from. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "base/le.h"
#include "base/why.h"
#include "elastic/ring_transport.h"
#include "elastic/ring_wire.h"
#include "starling/net.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01" /* RFC 27: one per context */
#define ZAP_DOMAIN "starling-ring"
#define RID_LEN 16 /* routing id: "slr1", round (8), rank (4) */
#define HANDSHAKE_FAILED                                                                 \
    (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |        \
     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
#define MON_EVENTS                                                                       \
    (ZMQ_EVENT_CONNECTED | ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | HANDSHAKE_FAILED)

typedef struct {
    uint64_t job;            /* cfg.job */
    uint64_t round;          /* cfg.round */
    uint32_t world;          /* cfg.world */
    uint32_t rank;           /* cfg.rank */
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
    bool dealer_lost;        /* the DEALER's connection broke */
    bool prev_lost;          /* rank-1's connection broke */
    bool auth_failed;        /* the handshake with rank+1 failed (its key, or its ZAP said no) */
    bool dealer_refused;     /* rank+1 closed a connection mid-handshake */
    bool router_refused;     /* a connection here failed its handshake before rank-1 sent */
    uint64_t strays;         /* messages from another sender, dropped */
    zmq_msg_t f[4];          /* receive frames, reused (no allocation by this code) */
} zring_t;

static uint32_t prev_rank(const zring_t *z) {
    return (z->rank + z->world - 1) % z->world;
}

static uint32_t next_rank(const zring_t *z) {
    return (z->rank + 1) % z->world;
}

static void set_int(void *sock, int opt, int v) {
    zmq_setsockopt(sock, opt, &v, sizeof v);
}

static void make_rid(uint8_t *rid, uint64_t round, uint32_t rank) {
    memcpy(rid, "slr1", 4);
    sl_put64le(rid + 4, round);
    sl_put32le(rid + 12, rank);
}

/* A greeting's header: HELLO or WELCOME of this link's job and round. */
static void greeting(uint8_t *h, const zring_t *z, uint32_t step) {
    sl_ring_hdr_t hd = {.job = z->job, .round = z->round, .step = step};
    sl_ring_hdr_put(h, &hd);
}

/* ---- ZAP: accept only the cluster's public key (sl_net_zap_answer) ---- */

/* Answers the ROUTER's ZAP requests (RFC 27) until the context shuts down;
 * a thread of its own, so a handshake completes while the caller computes
 * between all-reduces. */
static void *zap_main(void *arg) {
    zring_t *z = arg;
    while (sl_net_zap_answer(z->zap, z->key_public, 0, NULL, 0) >= 0 || errno != ETERM)
        ;
    zmq_close(z->zap);
    return NULL;
}

/* ---- Open and close ---- */

/* Closes every socket and terminates the context: afterwards ZeroMQ holds
 * nothing of the caller's buffer (linger 0 drops what was not sent, and
 * zmq_ctx_term returns once every message is released). */
static void teardown(zring_t *z) {
    if (!z->ctx)
        return;
    void *socks[] = {z->dealer, z->router, z->mon_dealer, z->mon_router};
    for (size_t i = 0; i < sizeof socks / sizeof socks[0]; i++)
        if (socks[i]) {
            set_int(socks[i], ZMQ_LINGER, 0);
            zmq_close(socks[i]);
        }
    z->dealer = z->router = z->mon_dealer = z->mon_router = NULL;
    zmq_ctx_shutdown(z->ctx);
    if (z->zap_running)
        pthread_join(z->zap_thread, NULL);
    else if (z->zap)
        zmq_close(z->zap);
    z->zap = NULL;
    z->zap_running = false;
    while (zmq_ctx_term(z->ctx) != 0 && errno == EINTR) {
    }
    z->ctx = NULL;
}

static void zclose(void **tp) {
    zring_t *z = tp ? *tp : NULL;
    if (!z)
        return;
    teardown(z);
    for (int i = 0; i < 4; i++)
        zmq_msg_close(&z->f[i]);
    sl_free(z);
    *tp = NULL;
}

static sl_err monitor(zring_t *z, void *sock, const char *name, void **pair) {
    char ep[96]; /* (room for any name: gcc cannot bound it) */
    snprintf(ep, sizeof ep, "inproc://sl-ring-%s", name);
    if (zmq_socket_monitor(sock, ep, MON_EVENTS) != 0)
        return SL_EIO;
    *pair = zmq_socket(z->ctx, ZMQ_PAIR);
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

/* Binds the ROUTER, connects the DEALER, with keys and monitors. */
static sl_err open_sockets(zring_t *z, const sl_ring_link_cfg_t *cfg, char *why, size_t why_len) {
    const char *bind = cfg->bind ? cfg->bind : cfg->endpoints[cfg->rank];
    const char *dial = cfg->endpoints[next_rank(z)];
    uint8_t rid[RID_LEN];
    make_rid(rid, cfg->round, cfg->rank);
    make_rid(z->prev_rid, cfg->round, prev_rank(z));
    char name[48];
    z->ctx = zmq_ctx_new();
    if (!z->ctx)
        return sl_why(why, why_len, SL_EIO, "cannot make a zeromq context: %s",
                      zmq_strerror(errno));
    if (cfg->key) {
        z->keyed = true;
        if (!zmq_z85_decode(z->key_public, cfg->key->public_z85))
            return sl_why(why, why_len, SL_EAUTH, "the cluster key's public half is not z85");
        /* The ZAP handler must be bound before any Curve server socket. */
        z->zap = zmq_socket(z->ctx, ZMQ_REP);
        if (!z->zap || zmq_bind(z->zap, ZAP_ENDPOINT) != 0)
            return sl_why(why, why_len, SL_EIO, "cannot bind the zap handler: %s",
                          zmq_strerror(errno));
        if (pthread_create(&z->zap_thread, NULL, zap_main, z) != 0)
            return sl_why(why, why_len, SL_EIO, "cannot start the zap thread");
        z->zap_running = true;
    }
    z->router = zmq_socket(z->ctx, ZMQ_ROUTER);
    z->dealer = zmq_socket(z->ctx, ZMQ_DEALER);
    if (!z->router || !z->dealer)
        return sl_why(why, why_len, SL_EIO, "cannot make the ring's sockets: %s",
                      zmq_strerror(errno));
    /* No high-water mark: the window bounds what is queued, and a send
     * never blocks (a blocked send beside a receive could deadlock). */
    set_int(z->router, ZMQ_RCVHWM, 0);
    set_int(z->dealer, ZMQ_SNDHWM, 0);
    set_int(z->router, ZMQ_LINGER, 0);
    set_int(z->dealer, ZMQ_LINGER, 0);
    set_int(z->dealer, ZMQ_RECONNECT_IVL, 50);
    /* A peer that stops answering at the TCP level is seen within the
     * timeout, not at the kernel's retransmission limit. */
    uint32_t timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : SL_RING_LINK_TIMEOUT_MS;
    set_int(z->dealer, ZMQ_HEARTBEAT_IVL, (int)(timeout_ms / 4 ? timeout_ms / 4 : 1));
    set_int(z->dealer, ZMQ_HEARTBEAT_TIMEOUT, (int)timeout_ms);
    set_int(z->router, ZMQ_HEARTBEAT_IVL, (int)(timeout_ms / 4 ? timeout_ms / 4 : 1));
    set_int(z->router, ZMQ_HEARTBEAT_TIMEOUT, (int)timeout_ms);
    set_int(z->router, ZMQ_SNDBUF, 4 << 20);
    set_int(z->router, ZMQ_RCVBUF, 4 << 20);
    set_int(z->dealer, ZMQ_SNDBUF, 4 << 20);
    set_int(z->dealer, ZMQ_RCVBUF, 4 << 20);
    zmq_setsockopt(z->dealer, ZMQ_ROUTING_ID, rid, RID_LEN);
    if (z->keyed) {
        set_int(z->router, ZMQ_CURVE_SERVER, 1);
        if (zmq_setsockopt(z->router, ZMQ_CURVE_SECRETKEY, cfg->key->secret_z85,
                           SL_NET_KEY_Z85_LEN + 1) != 0 ||
            zmq_setsockopt(z->router, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN)) != 0 ||
            apply_curve_client(z->dealer, cfg->key) != SL_OK)
            return sl_why(why, why_len, SL_EAUTH, "cannot set the ring's curve keys: %s",
                          zmq_strerror(errno));
    }
    snprintf(name, sizeof name, "%p-r", (void *)z);
    if (monitor(z, z->router, name, &z->mon_router) != SL_OK)
        return sl_why(why, why_len, SL_EIO, "cannot monitor the ring's router: %s",
                      zmq_strerror(errno));
    snprintf(name, sizeof name, "%p-d", (void *)z);
    if (monitor(z, z->dealer, name, &z->mon_dealer) != SL_OK)
        return sl_why(why, why_len, SL_EIO, "cannot monitor the ring's dealer: %s",
                      zmq_strerror(errno));
    if (zmq_bind(z->router, bind) != 0)
        return sl_why(why, why_len, SL_EIO, "cannot bind %s: %s", bind, zmq_strerror(errno));
    if (zmq_connect(z->dealer, dial) != 0)
        return sl_why(why, why_len, SL_EIO, "cannot connect to %s: %s", dial,
                      zmq_strerror(errno));
    return SL_OK;
}

static sl_err zopen(const sl_ring_link_cfg_t *cfg, size_t chunk_bytes, void **tp, char *why,
                    size_t why_len) {
    (void)chunk_bytes;
    zring_t *z = sl_calloc(1, sizeof *z);
    if (!z)
        return SL_ENOMEM;
    z->job = cfg->job;
    z->round = cfg->round;
    z->world = cfg->world;
    z->rank = cfg->rank;
    z->dealer_fd = z->dealer_conn_fd = z->prev_fd = -1;
    for (int i = 0; i < 4; i++)
        zmq_msg_init(&z->f[i]);
    *tp = z;
    return open_sockets(z, cfg, why, why_len); /* on failure the driver closes it */
}

/* ---- Events and the greeting ---- */

/* Reads the monitors' events: a broken connection, a failed handshake. */
static void read_events(zring_t *z) {
    void *mons[2] = {z->mon_dealer, z->mon_router};
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
                    z->dealer_conn_fd = value;
                    z->dealer_connects++;
                } else if (event == ZMQ_EVENT_DISCONNECTED && z->welcomed && value == z->dealer_fd)
                    z->dealer_lost = true;
                else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
                    z->dealer_refused |= z->welcomed; /* closed mid-handshake */
                else if (event & HANDSHAKE_FAILED)
                    z->auth_failed = true;
            } else if ((event & HANDSHAKE_FAILED) && !z->prev_known) {
                /* a key or protocol it failed, not a mere close */
                z->router_refused |= event != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
            } else if (event == ZMQ_EVENT_DISCONNECTED && z->prev_known && value == z->prev_fd) {
                z->prev_lost = true; /* strangers' connections are not the ring's business */
            }
        }
    }
}

/* Whether a message (its header frame) is a HELLO of this link's job and round. */
static bool is_hello(const zring_t *z, zmq_msg_t *h) {
    uint8_t want[SL_RING_LINK_HEADER_LEN];
    greeting(want, z, SL_RING_LINK_HELLO);
    return zmq_msg_size(h) == sizeof want && memcmp(zmq_msg_data(h), want, sizeof want) == 0;
}

/* Rank-1's HELLO: its connection is the one it came on (from then on a
 * break of it ends the link), and it is welcomed on it. Every HELLO is
 * answered: rank-1 sends one for each connection it makes, and only the
 * answer on its live one reaches it. */
static void welcome(zring_t *z, zmq_msg_t *hello) {
    int fd = zmq_msg_get(hello, ZMQ_SRCFD);
    z->prev_fd = fd >= 0 ? fd : z->prev_fd;
    z->prev_known = true;
    z->prev_lost = false;
    uint8_t h[SL_RING_LINK_HEADER_LEN];
    greeting(h, z, SL_RING_LINK_WELCOME);
    if (zmq_send(z->router, z->prev_rid, RID_LEN, ZMQ_SNDMORE | ZMQ_DONTWAIT) == RID_LEN)
        zmq_send(z->router, h, sizeof h, ZMQ_DONTWAIT);
}

/* Whether a DEALER message is a WELCOME of this link (rank+1 answers
 * every HELLO; later ones are skipped). */
static bool is_welcome(const zring_t *z, zmq_msg_t *m) {
    uint8_t want[SL_RING_LINK_HEADER_LEN];
    greeting(want, z, SL_RING_LINK_WELCOME);
    return !zmq_msg_more(m) && zmq_msg_size(m) == sizeof want &&
           memcmp(zmq_msg_data(m), want, sizeof want) == 0;
}

/* The DEALER side of the greeting: a HELLO on each new connection to
 * rank+1's port, until rank+1's WELCOME comes back on it; only then does
 * data go out (data sent to a stale link of an older round would be lost
 * with it). */
static sl_err zpump(void *t, bool *ready, char *why, size_t why_len) {
    (void)why;
    (void)why_len;
    zring_t *z = t;
    read_events(z);
    if (z->welcomed) {
        *ready = true;
        return SL_EAGAIN;
    }
    if (z->dealer_connects != z->hellos_for && z->dealer_conn_fd >= 0) {
        uint8_t h[SL_RING_LINK_HEADER_LEN];
        greeting(h, z, SL_RING_LINK_HELLO);
        if (zmq_send(z->dealer, h, sizeof h, ZMQ_DONTWAIT) == (int)sizeof h)
            z->hellos_for = z->dealer_connects;
    }
    zmq_msg_t m;
    zmq_msg_init(&m);
    while (!z->welcomed && zmq_msg_recv(&m, z->dealer, ZMQ_DONTWAIT) >= 0) {
        if (is_welcome(z, &m)) {
            z->welcomed = true;
            z->dealer_fd = z->dealer_conn_fd;
        }
        while (zmq_msg_more(&m) && zmq_msg_recv(&m, z->dealer, 0) >= 0) {
        }
    }
    zmq_msg_close(&m);
    *ready = z->welcomed;
    return z->welcomed ? SL_OK : SL_EAGAIN;
}

/* ---- Messages ---- */

static sl_err zsend(void *t, const uint8_t *hdr, const void *p, size_t len, char *why,
                    size_t why_len) {
    zring_t *z = t;
    /* straight from the buffer: no free function, so no allocation
     * either; the buffer outlives the message because rank+1 says when it
     * has them all (DONE) */
    zmq_msg_t m;
    zmq_msg_init_data(&m, (void *)p, len, NULL, NULL);
    if (zmq_send(z->dealer, hdr, SL_RING_LINK_HEADER_LEN, ZMQ_SNDMORE) !=
            (int)SL_RING_LINK_HEADER_LEN ||
        zmq_msg_send(&m, z->dealer, 0) < 0) {
        int e = errno;
        zmq_msg_close(&m);
        return sl_why(why, why_len, SL_ECLOSED, "cannot send to rank %u: %s", next_rank(z),
                      zmq_strerror(e));
    }
    return SL_OK;
}

static sl_err zrecv(void *t, const sl_ring_hdr_t *want, size_t len, void *dst, bool direct,
                    const uint8_t **src, char *why, size_t why_len) {
    (void)dst;
    (void)direct;
    zring_t *z = t;
    read_events(z); /* before the receive: a message that came before a disconnect is read */
    for (;;) {
        if (zmq_msg_recv(&z->f[0], z->router, ZMQ_DONTWAIT) < 0) {
            if (errno == EAGAIN)
                return SL_EAGAIN;
            return sl_why(why, why_len, SL_ECLOSED, "cannot receive from rank %u: %s",
                          prev_rank(z), zmq_strerror(errno));
        }
        int n = 1; /* frames kept in f[0..2]; any beyond go through f[3] */
        bool extra = false;
        zmq_msg_t *last = &z->f[0];
        while (zmq_msg_more(last)) {
            last = &z->f[n < 3 ? n : 3];
            if (zmq_msg_recv(last, z->router, 0) < 0)
                return sl_why(why, why_len, SL_ECLOSED, "cannot receive a frame: %s",
                              zmq_strerror(errno));
            if (n < 3)
                n++;
            else
                extra = true;
        }
        if (zmq_msg_size(&z->f[0]) != RID_LEN ||
            memcmp(zmq_msg_data(&z->f[0]), z->prev_rid, RID_LEN) != 0) {
            z->strays++; /* not rank-1 of this round (ROUTER names the connection) */
            continue;
        }
        bool hl = zmq_msg_size(&z->f[1]) == SL_RING_LINK_HEADER_LEN;
        sl_ring_hdr_t got = {0};
        if (hl)
            sl_ring_hdr_get(zmq_msg_data(&z->f[1]), &got);
        if (n == 2 && !extra && hl && got.step == SL_RING_LINK_HELLO) {
            if (!is_hello(z, &z->f[1]))
                return sl_why(why, why_len, SL_EPROTO,
                              "unexpected ring message: a hello of job %016llx round %llu, "
                              "wanted job %016llx round %llu",
                              (unsigned long long)got.job, (unsigned long long)got.round,
                              (unsigned long long)z->job, (unsigned long long)z->round);
            welcome(z, &z->f[1]);
            continue;
        }
        if (n != 3 || extra)
            return sl_why(why, why_len, SL_EPROTO,
                          "rank %u sent a message of %s frames, a ring message has 2",
                          prev_rank(z), extra ? "3 or more" : "1");
        sl_err err = sl_ring_hdr_check(&got, hl, zmq_msg_size(&z->f[2]), want, len, why, why_len);
        if (err != SL_OK)
            return err;
        *src = zmq_msg_data(&z->f[2]);
        return SL_OK;
    }
}

static sl_err zcheck(void *t, bool sending, bool receiving, char *why, size_t why_len) {
    zring_t *z = t;
    if (z->auth_failed)
        return sl_why(why, why_len, SL_EAUTH,
                      "the handshake with rank %u (%s) failed: wrong cluster key?", next_rank(z),
                      z->keyed ? "curve" : "no key");
    if (z->dealer_refused && sending)
        return sl_why(why, why_len, SL_ECLOSED,
                      "rank %u closed the connection during the handshake (it refused our "
                      "cluster key, or it died)", next_rank(z));
    if (z->prev_lost && receiving)
        return sl_why(why, why_len, SL_ECLOSED, "rank %u closed its connection mid-reduce",
                      prev_rank(z));
    if (z->dealer_lost && sending)
        return sl_why(why, why_len, SL_ECLOSED, "the connection to rank %u broke mid-reduce",
                      next_rank(z));
    return SL_OK;
}

static sl_err zwait(void *t, int timeout_ms, bool finishing, char *why, size_t why_len) {
    zring_t *z = t;
    zmq_pollitem_t items[4] = {
        {.socket = z->router, .events = ZMQ_POLLIN},
        {.socket = z->mon_router, .events = ZMQ_POLLIN},
        {.socket = z->mon_dealer, .events = ZMQ_POLLIN},
        {.socket = z->dealer, .events = ZMQ_POLLIN}, /* the WELCOME, a DONE */
    };
    /* in the call, the DEALER only until the WELCOME (an early DONE would
     * wake every poll); finishing, only it and its events */
    zmq_pollitem_t *first = finishing ? &items[2] : items;
    int n = finishing ? 2 : z->welcomed ? 3 : 4;
    if (zmq_poll(first, n, timeout_ms) < 0 && errno != EINTR)
        return sl_why(why, why_len, SL_EIO, "zmq_poll: %s", zmq_strerror(errno));
    return SL_OK;
}

/* ---- The call's end ---- */

static sl_err zdone_send(void *t, const uint8_t *done, char *why, size_t why_len) {
    zring_t *z = t;
    if (zmq_send(z->router, z->prev_rid, RID_LEN, ZMQ_SNDMORE | ZMQ_DONTWAIT) != RID_LEN ||
        zmq_send(z->router, done, SL_RING_LINK_HEADER_LEN, ZMQ_DONTWAIT) !=
            (int)SL_RING_LINK_HEADER_LEN)
        return sl_why(why, why_len, SL_ECLOSED, "cannot tell rank %u this call is done: %s",
                      prev_rank(z), zmq_strerror(errno));
    return SL_OK;
}

static sl_err zdone_recv(void *t, const uint8_t *done, char *why, size_t why_len) {
    zring_t *z = t;
    for (;;) {
        if (zmq_msg_recv(&z->f[1], z->dealer, ZMQ_DONTWAIT) < 0) {
            if (errno == EAGAIN) {
                if (z->dealer_lost) /* (events read by zpump, before the receive) */
                    return sl_why(why, why_len, SL_ECLOSED,
                                  "the connection to rank %u broke before it said done",
                                  next_rank(z));
                return SL_EAGAIN;
            }
            return sl_why(why, why_len, SL_ECLOSED, "cannot receive from rank %u: %s",
                          next_rank(z), zmq_strerror(errno));
        }
        if (is_welcome(z, &z->f[1]))
            continue; /* an answer to an earlier HELLO */
        if (zmq_msg_more(&z->f[1]) || zmq_msg_size(&z->f[1]) != SL_RING_LINK_HEADER_LEN ||
            memcmp(zmq_msg_data(&z->f[1]), done, SL_RING_LINK_HEADER_LEN) != 0) {
            while (zmq_msg_more(&z->f[1]) && zmq_msg_recv(&z->f[1], z->dealer, 0) >= 0) {
            }
            return sl_why(why, why_len, SL_EPROTO,
                          "rank %u answered with something other than done", next_rank(z));
        }
        return SL_OK;
    }
}

/* A connection from rank-1's side failed its handshake before rank-1
 * ever sent: the likeliest cause of whatever came next is its key. */
static sl_err zblame(void *t, sl_err err, char *prefix, size_t prefix_len) {
    zring_t *z = t;
    if (!z->router_refused || z->prev_known)
        return err;
    snprintf(prefix, prefix_len,
             "a connection from rank %u's side failed its handshake (wrong cluster key?), "
             "then: ", prev_rank(z));
    return SL_EAUTH;
}

const sl_ring_ops_t sl_ring_zmq_ops = {
    .open = zopen,
    .close = zclose,
    .pump = zpump,
    .send = zsend,
    .recv = zrecv,
    .check = zcheck,
    .wait = zwait,
    .done_send = zdone_send,
    .done_recv = zdone_recv,
    .blame = zblame,
};
