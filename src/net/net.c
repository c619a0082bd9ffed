/* The transport over ZeroMQ, the peer's side: one ROUTER in, capped lazy
 * DEALERs out, CurveZMQ + ZAP when a cluster key is set (the client's
 * DEALER is client.c). See include/starling/net.h and docs/transport.md. */
#include <errno.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "starling/addr.h"
#include "starling/net.h"
#include "starling/platform.h"
#include "net/addr_index.h"
#include "net/net_internal.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_DOMAIN "starling"
#define PENDING_MAX 16          /* messages queued per connecting socket */
#define PENDING_POLL_MS 2       /* poll interval while messages wait */
#define HANDSHAKE_IVL_MS 5000   /* a handshake must finish within this */
#define RECONNECT_IVL_MS 100    /* first reconnect delay */
#define RECONNECT_MAX_MS 2000   /* reconnect back-off ceiling */
#define HANDSHAKING_MAX 256     /* inbound connections tracked while in handshake */
#define SHARED_MSG_MAX 65536    /* largest body sent on another peer's connection to us */
#define SHARED_IDLE_NS 5000000000ull /* an unused duplicate connection is closed after this */
#define SWEEP_NS 1000000000ull  /* how often duplicates and retired connections are looked for */
#define RETIRE_NS 1000000000ull /* a retired connection is still read this long */
/* What an epoll event's data names: a side socket, a watched descriptor
 * (EV_WATCH + its index) or a DEALER (EV_CONN + its conns index). */
#define EV_ROUTER 0
#define EV_MONITOR 1
#define EV_ZAP 2
#define EV_CONTROL 3
#define EV_WATCH 16
#define EV_CONN 1024
/* An outbound connection unused this long is closed. Longer than SWIM's
 * round-robin takes to probe a member again at the cap (256 x 1.25 s):
 * with 2 minutes, 150-200 peers at rest each closed and reopened 0.4
 * connections a second, and every close made the other side probe it. */
#define IDLE_CLOSE_NS 600000000000ull
#define CLOSE_LINGER_MS 250     /* what a connection closed in use still had queued goes out
                                   within this (ZeroMQ writes it after zmq_close) */

/* A message waiting for a fresh outbound connection to come up. */
typedef struct {
    zmq_msg_t header; /* header frame */
    zmq_msg_t body;   /* body frame */
} pending_t;

/* One outbound DEALER. */
typedef struct {
    char addr[SL_ADDR_MAX + 16]; /* normalised endpoint; "" when the slot is free */
    void *sock;                  /* DEALER socket, NULL when free */
    uint64_t last_used;          /* LRU tick of the last send */
    uint64_t opened_ns;          /* when connect was called */
    uint64_t sent_ns;            /* when a message last went out on it */
    uint64_t recv_ns;            /* when a message last came in on it */
    uint64_t big_ns;             /* when a message too large to share last went out on it */
    uint64_t retired_ns;         /* when sl_net_disconnect retired it; 0 = in use */
    int fd;                      /* its ZMQ_FD (edge-triggered), polled as a plain descriptor */
    bool may_read;               /* may hold input: its fd fired, or a send ran, since it read empty */
    bool delivering;             /* its last send went into ZeroMQ's queue */
    pending_t pending[PENDING_MAX]; /* ring of waiting messages */
    size_t pending_head;         /* index of the oldest waiting message */
    size_t pending_count;        /* waiting messages */
} conn_t;

/* Another peer's outbound connection to our ROUTER, usable in reverse:
 * sending to that peer on it spares a second TCP connection per pair. */
typedef struct {
    char addr[SL_ADDR_MAX + 16]; /* the peer's normalised advertised address; "" = free */
    uint8_t id[SL_NET_ROUTE_MAX]; /* routing id of its connection on our ROUTER */
    size_t id_len;               /* bytes of id */
    int fd;                      /* its TCP socket (ZMQ_SRCFD), -1 unknown */
    uint64_t last_used;          /* LRU tick of the last learn or send */
} shared_t;

struct sl_net {
    void *ctx;                 /* this transport's own ZeroMQ context */
    void *router;              /* inbound ROUTER */
    void *zap;                 /* ZAP handler (REP), NULL without a key */
    void *monitor;             /* PAIR reading the ROUTER's events */
    bool has_key;              /* Curve on every socket */
    sl_net_key_t key;          /* the cluster key when has_key */
    uint8_t key_public[32];    /* binary public key, for ZAP checks */
    char endpoint[SL_ADDR_MAX + 16]; /* bound endpoint */
    size_t max_conns;          /* outbound cap */
    int sndhwm;                /* outbound queue per socket */
    int rcvhwm;                /* inbound queue per connection */
    size_t max_msg_len;        /* largest body accepted */
    uint64_t grace_ns;         /* how long a message may wait for a connection */
    conn_t *conns;             /* max_conns slots */
    shared_t *shared;          /* max_conns * 2 slots: inbound connections we may send on */
    sl_addr_index_t conn_ix;   /* conns by address */
    sl_addr_index_t shared_ix; /* shared by address */
    char self[SL_ADDR_MAX + 16]; /* our advertised address, normalised ("" = not set) */
    /* Ring of the peers whose connection to us closed (sl_net_next_lost). */
    char lost[SL_NET_LOST_MAX][SL_ADDR_MAX + 16];
    size_t lost_head;          /* oldest entry of lost */
    size_t lost_count;         /* entries in lost */
    uint64_t swept_ns;         /* last look for duplicate connections */
    uint64_t tick;             /* LRU clock */
    bool have_in;              /* in_* hold the last message */
    zmq_msg_t in_route;        /* last message: routing id */
    zmq_msg_t in_header;       /* last message: header */
    zmq_msg_t in_body;         /* last message: body */
    char in_peer[64];          /* last message: its connection's remote IP
                                  (ZeroMQ's Peer-Address), "" when unknown */
    int handshaking[HANDSHAKING_MAX]; /* fds of accepted connections still in handshake, oldest first */
    size_t handshaking_count;  /* entries in handshaking */
    sl_net_stats_t stats;      /* counters */
    int epfd;                  /* epoll set: ROUTER, monitor, ZAP, control, watches, DEALERs */
    struct epoll_event *evs;   /* epoll_wait's output, max_conns + 4 + SL_NET_MAX_WATCHES */
    int router_fd;             /* the sockets' ZMQ_FDs (edge-triggered, see sl_net_poll) */
    int monitor_fd;
    int zap_fd;                /* -1 without a key */
    bool router_may_read;      /* may hold input: its fd fired, or a reply went, since it read empty */
    bool monitor_may_read;
    bool zap_may_read;
    struct {
        int fd;                /* a plain descriptor polled beside the sockets */
        bool ready;            /* the last poll saw it readable */
    } watches[SL_NET_MAX_WATCHES];
    size_t watch_count;
    size_t next_conn;          /* where the next DEALER read scan starts (fairness) */
    void *control;             /* control ROUTER (sl_net_control_listen), NULL when none */
    int control_fd;            /* its ZMQ_FD (edge-triggered, as router_fd) */
    bool control_may_read;     /* may hold input (as router_may_read) */
    char control_endpoint[SL_NET_CONTROL_MAX]; /* its bound endpoint, "" when none */
};

/* ---- Keys ---- */

sl_err sl_net_key_generate(sl_net_key_t *key) {
    memset(key, 0, sizeof *key);
    if (zmq_curve_keypair(key->public_z85, key->secret_z85) != 0)
        return SL_EUNSUPPORTED;
    return SL_OK;
}

sl_err sl_net_key_format(const sl_net_key_t *key, char *buf, size_t cap) {
    int n = snprintf(buf, cap,
                     "# Starling cluster key. Every peer and client of the cluster uses this\n"
                     "# same file (peer --key FILE, peerctl --key FILE). Keep it secret:\n"
                     "# whoever holds it can join, read and write. Made by `peerctl keygen`.\n"
                     "starling-cluster-key 1\n"
                     "public = %s\n"
                     "secret = %s\n",
                     key->public_z85, key->secret_z85);
    if (n < 0 || (size_t)n >= cap)
        return SL_ETOOBIG;
    return SL_OK;
}

/* Copies the value of "name = value" into out when the line matches. */
static bool key_field(const char *line, size_t len, const char *name, char *out) {
    size_t nl = strlen(name);
    if (len < nl || memcmp(line, name, nl) != 0)
        return false;
    size_t i = nl;
    while (i < len && (line[i] == ' ' || line[i] == '\t'))
        i++;
    if (i >= len || line[i] != '=')
        return false;
    i++;
    while (i < len && (line[i] == ' ' || line[i] == '\t'))
        i++;
    size_t end = len;
    while (end > i && (line[end - 1] == ' ' || line[end - 1] == '\t' || line[end - 1] == '\r'))
        end--;
    if (end - i != SL_NET_KEY_Z85_LEN) {
        out[0] = '?'; /* present but malformed */
        out[1] = 0;
        return true;
    }
    memcpy(out, line + i, SL_NET_KEY_Z85_LEN);
    out[SL_NET_KEY_Z85_LEN] = 0;
    return true;
}

sl_err sl_net_key_parse(const char *text, size_t len, sl_net_key_t *key) {
    memset(key, 0, sizeof *key);
    bool magic = false;
    size_t pos = 0;
    while (pos < len) {
        size_t end = pos;
        while (end < len && text[end] != '\n')
            end++;
        const char *line = text + pos;
        size_t ll = end - pos;
        while (ll > 0 && (*line == ' ' || *line == '\t')) {
            line++;
            ll--;
        }
        while (ll > 0 && (line[ll - 1] == '\r' || line[ll - 1] == ' '))
            ll--;
        if (ll == 0 || line[0] == '#') {
            /* blank or comment */
        } else if (ll == strlen("starling-cluster-key 1") &&
                   !memcmp(line, "starling-cluster-key 1", ll)) {
            magic = true;
        } else if (key_field(line, ll, "public", key->public_z85) ||
                   key_field(line, ll, "secret", key->secret_z85)) {
            /* stored */
        } else {
            return SL_EPROTO;
        }
        pos = end + 1;
    }
    if (!magic || strlen(key->secret_z85) != SL_NET_KEY_Z85_LEN)
        return SL_EPROTO;
    uint8_t bin[32];
    if (!zmq_z85_decode(bin, key->secret_z85))
        return SL_EPROTO;
    char derived[SL_NET_KEY_Z85_LEN + 1];
    if (zmq_curve_public(derived, key->secret_z85) != 0)
        return SL_EPROTO;
    if (key->public_z85[0]) {
        if (strlen(key->public_z85) != SL_NET_KEY_Z85_LEN || !zmq_z85_decode(bin, key->public_z85))
            return SL_EPROTO;
        if (strcmp(derived, key->public_z85) != 0)
            return SL_EAUTH;
    }
    memcpy(key->public_z85, derived, sizeof derived);
    return SL_OK;
}

sl_err sl_net_key_load(const char *path, sl_net_key_t *key) {
    uint8_t *data = NULL;
    size_t len = 0;
    sl_err err = sl_plat_read_file(path, 4096, &data, &len);
    if (err != SL_OK)
        return err;
    err = sl_net_key_parse((const char *)data, len, key);
    memset(data, 0, len); /* do not leave the secret in freed memory */
    sl_free(data);
    if (err == SL_OK && sl_plat_file_is_shared(path))
        sl_log(SL_LOG_WARNING, "NET-KEY-PERMS",
               "key file %s is readable by other users; run: chmod 600 %s", path, path);
    return err;
}

/* ---- Addresses ---- */

/* The rest of `s` after `prefix` ("tcp://", "ipc://"), or NULL. */
static const char *after_prefix(const char *s, const char *prefix) {
    size_t n = strlen(prefix);
    return strncmp(s, prefix, n) ? NULL : s + n;
}

sl_err sl_net_addr_normalize(const char *in, char *out, size_t cap) {
    if (!in || !in[0])
        return SL_EINVAL;
    const char *s = after_prefix(in, "tcp://");
    if (!s)
        s = in;
    const char *colon = strrchr(s, ':');
    if (!colon || !colon[1])
        return SL_EINVAL;
    char *endp = NULL;
    long port = strtol(colon + 1, &endp, 10);
    if (*endp || port < 0 || port > 65535)
        return SL_EINVAL;
    size_t host_len = (size_t)(colon - s);
    int n;
    if (host_len == 0)
        n = snprintf(out, cap, "tcp://127.0.0.1:%ld", port);
    else
        n = snprintf(out, cap, "tcp://%.*s:%ld", (int)host_len, s, port);
    if (n < 0 || (size_t)n >= cap || (size_t)n > SL_ADDR_MAX)
        return SL_EINVAL;
    return SL_OK;
}

/* ---- Socket set-up ---- */

static void conn_clear_pending(conn_t *c) {
    while (c->pending_count > 0) {
        pending_t *p = &c->pending[c->pending_head];
        zmq_msg_close(&p->header);
        zmq_msg_close(&p->body);
        c->pending_head = (c->pending_head + 1) % PENDING_MAX;
        c->pending_count--;
    }
    c->pending_head = 0;
}

/* Closes an outbound connection. What waits in its pending ring (never
 * handed to ZeroMQ) is dropped and counted. With `linger_ms` > 0, what
 * ZeroMQ has taken but not yet written still goes out (in its I/O
 * thread, for at most that long): a connection closed while in use (the
 * cap, a duplicate, idle) loses nothing it accepted. With 0 it is thrown
 * away: for a destination that is gone or was restarted, and at exit. */
/* Adds a descriptor to the epoll set, its events named by `tag` (EV_*).
 * One set kept across calls: a wait costs the descriptors that fired, not
 * all of them (poll(2) walked every DEALER's on every wake-up: at 150
 * peers a fifth of a peer's time in eventfd_poll, fdget and the like). */
static bool ep_add(sl_net_t *net, int fd, uint64_t tag) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
    return epoll_ctl(net->epfd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

static void ep_del(sl_net_t *net, int fd) {
    struct epoll_event ev = {0};
    epoll_ctl(net->epfd, EPOLL_CTL_DEL, fd, &ev);
}

static void conn_close(sl_net_t *net, conn_t *c, int linger_ms) {
    if (!c->sock)
        return;
    net->stats.dropped_out += c->pending_count;
    conn_clear_pending(c);
    ep_del(net, c->fd); /* before ZeroMQ closes it */
    set_int(c->sock, ZMQ_LINGER, linger_ms);
    zmq_close(c->sock);
    sl_addr_index_del(&net->conn_ix, (size_t)(c - net->conns));
    c->sock = NULL;
    c->addr[0] = 0;
    net->stats.conns_open--;
}

sl_err sl_net_new(const sl_net_config_t *cfg, sl_net_t **out) {
    *out = NULL;
    sl_err err = SL_ENOMEM;
    char endpoint[SL_ADDR_MAX + 16];
    if (!cfg || sl_net_addr_normalize(cfg->listen, endpoint, sizeof endpoint) != SL_OK)
        return SL_EINVAL;
    sl_net_t *net = sl_calloc(1, sizeof *net);
    if (!net)
        return SL_ENOMEM;
    net->max_conns = cfg->max_conns ? cfg->max_conns : SL_NET_MAX_CONNS;
    net->sndhwm = cfg->sndhwm ? cfg->sndhwm : 64;
    net->rcvhwm = cfg->rcvhwm ? cfg->rcvhwm : 256;
    net->max_msg_len = cfg->max_msg_len ? cfg->max_msg_len : SL_MSG_MAX_LEN;
    net->grace_ns = (uint64_t)(cfg->connect_grace_ms ? cfg->connect_grace_ms : 1000) * 1000000ull;
    net->conns = sl_calloc(net->max_conns, sizeof *net->conns);
    net->epfd = -1;
    net->evs = sl_calloc(net->max_conns + 4 + SL_NET_MAX_WATCHES, sizeof *net->evs);
    net->shared = sl_calloc(net->max_conns * 2, sizeof *net->shared);
    if (!net->conns || !net->evs || !net->shared ||
        sl_addr_index_init(&net->conn_ix, net->max_conns) != SL_OK ||
        sl_addr_index_init(&net->shared_ix, net->max_conns * 2) != SL_OK)
        goto fail;
    zmq_msg_init(&net->in_route);
    zmq_msg_init(&net->in_header);
    zmq_msg_init(&net->in_body);
    err = SL_EIO;
    net->ctx = zmq_ctx_new();
    if (!net->ctx)
        goto fail;
    if (cfg->key) {
        net->has_key = true;
        net->key = *cfg->key;
        if (!zmq_z85_decode(net->key_public, net->key.public_z85)) {
            err = SL_EINVAL;
            goto fail;
        }
        /* The ZAP handler must be bound before any Curve server socket. */
        net->zap = zmq_socket(net->ctx, ZMQ_REP);
        if (!net->zap || zmq_bind(net->zap, ZAP_ENDPOINT) != 0)
            goto fail;
        set_int(net->zap, ZMQ_LINGER, 0);
    }
    net->router = zmq_socket(net->ctx, ZMQ_ROUTER);
    if (!net->router)
        goto fail;
    set_int(net->router, ZMQ_LINGER, 0);
    set_int(net->router, ZMQ_ROUTER_MANDATORY, 1);
    /* The ROUTER sends only replies: to clients (a stream of parts may
     * queue further than a peer's messages) and to peers' requests. */
    set_int(net->router, ZMQ_SNDHWM, cfg->reply_hwm ? cfg->reply_hwm : 1024);
    set_int(net->router, ZMQ_RCVHWM, net->rcvhwm);
    set_int(net->router, ZMQ_HANDSHAKE_IVL, HANDSHAKE_IVL_MS);
    /* Hard cap: ZeroMQ drops the connection of a sender past twice the
     * limit; between the limit and that, we drop and count the message. */
    int64_t maxmsg = (int64_t)net->max_msg_len * 2 + 64;
    zmq_setsockopt(net->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (net->has_key) {
        set_int(net->router, ZMQ_CURVE_SERVER, 1);
        if (zmq_setsockopt(net->router, ZMQ_CURVE_SECRETKEY, net->key.secret_z85,
                           SL_NET_KEY_Z85_LEN + 1) != 0) {
            err = SL_EUNSUPPORTED;
            goto fail;
        }
        zmq_setsockopt(net->router, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN));
    }
    char mon_ep[64];
    snprintf(mon_ep, sizeof mon_ep, "inproc://sl-net-monitor-%p", (void *)net);
    if (zmq_socket_monitor(net->router, mon_ep,
                           ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED |
                               ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0)
        goto fail;
    net->monitor = zmq_socket(net->ctx, ZMQ_PAIR);
    if (!net->monitor || zmq_connect(net->monitor, mon_ep) != 0)
        goto fail;
    set_int(net->monitor, ZMQ_LINGER, 0);
    if (zmq_bind(net->router, endpoint) != 0) {
        err = errno == EADDRINUSE ? SL_EBUSY : (errno == EINVAL || errno == ENODEV) ? SL_EINVAL : SL_EIO;
        sl_log(SL_LOG_ERR, "NET-BIND", "cannot listen on %s: %s", endpoint, zmq_strerror(errno));
        goto fail;
    }
    size_t ep_len = sizeof net->endpoint;
    if (zmq_getsockopt(net->router, ZMQ_LAST_ENDPOINT, net->endpoint, &ep_len) != 0)
        goto fail;
    size_t fd_len = sizeof(int);
    net->zap_fd = -1;
    if (zmq_getsockopt(net->router, ZMQ_FD, &net->router_fd, &fd_len) != 0 ||
        zmq_getsockopt(net->monitor, ZMQ_FD, &net->monitor_fd, &fd_len) != 0 ||
        (net->zap && zmq_getsockopt(net->zap, ZMQ_FD, &net->zap_fd, &fd_len) != 0))
        goto fail;
    net->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (net->epfd < 0 || !ep_add(net, net->router_fd, EV_ROUTER) ||
        !ep_add(net, net->monitor_fd, EV_MONITOR) ||
        (net->zap && !ep_add(net, net->zap_fd, EV_ZAP)))
        goto fail;
    net->router_may_read = net->monitor_may_read = net->zap_may_read = true;
    *out = net;
    return SL_OK;
fail:
    sl_net_destroy(&net);
    return err;
}

void sl_net_destroy(sl_net_t **pnet) {
    sl_net_t *net = pnet ? *pnet : NULL;
    if (!net)
        return;
    if (net->conns) {
        for (size_t i = 0; i < net->max_conns; i++)
            conn_close(net, &net->conns[i], 0);
        sl_free(net->conns);
    }
    sl_free(net->evs);
    if (net->epfd >= 0)
        close(net->epfd);
    sl_free(net->shared);
    sl_addr_index_fini(&net->conn_ix);
    sl_addr_index_fini(&net->shared_ix);
    zmq_msg_close(&net->in_route);
    zmq_msg_close(&net->in_header);
    zmq_msg_close(&net->in_body);
    if (net->router) {
        zmq_socket_monitor(net->router, NULL, 0);
        zmq_close(net->router);
    }
    if (net->monitor)
        zmq_close(net->monitor);
    if (net->control) {
        zmq_close(net->control);
        const char *path = after_prefix(net->control_endpoint, "ipc://");
        if (path)
            unlink(path); /* a stale socket file would say we listen */
    }
    if (net->zap)
        zmq_close(net->zap);
    if (net->ctx)
        zmq_ctx_term(net->ctx);
    memset(&net->key, 0, sizeof net->key);
    sl_free(net);
    *pnet = NULL;
}

const char *sl_net_endpoint(const sl_net_t *net) {
    return net->endpoint;
}

const char *sl_net_in_peer(const sl_net_t *net) {
    return net->in_peer;
}

bool sl_net_in_from(const sl_net_t *net, const char *addr) {
    char host[64];
    if (!net->in_peer[0])
        return true; /* not TCP (inproc, ipc): nothing to compare */
    if (!addr || sl_addr_host((const uint8_t *)addr, strlen(addr), host, sizeof host) != SL_OK)
        return false;
    const char *peer = net->in_peer;
    size_t pl = strlen(peer);
    if (pl >= 2 && peer[0] == '[' && peer[pl - 1] == ']') {
        peer++;
        pl -= 2;
    }
    if (pl > 7 && !strncmp(peer, "::ffff:", 7)) { /* IPv4 on an IPv6 socket */
        peer += 7;
        pl -= 7;
    }
    return strlen(host) == pl && !memcmp(host, peer, pl);
}

/* ---- The control endpoint ---- */

bool sl_net_host_is_loopback(const char *host, size_t len) {
    if (len >= 2 && host[0] == '[' && host[len - 1] == ']') {
        host++;
        len -= 2;
    }
    if ((len == 9 && !memcmp(host, "localhost", 9)) || (len == 3 && !memcmp(host, "::1", 3)))
        return true;
    /* 127.0.0.0/8, written as four numbers */
    if (len < 9 || len > 15 || memcmp(host, "127.", 4))
        return false;
    int dots = 0;
    for (size_t i = 0; i < len; i++) {
        if (host[i] == '.')
            dots++;
        else if (host[i] < '0' || host[i] > '9')
            return false;
    }
    return dots == 3;
}

sl_err sl_net_control_listen(sl_net_t *net, const char *endpoint) {
    if (net->control || !endpoint)
        return SL_EINVAL;
    char ep[SL_NET_CONTROL_MAX];
    const char *ipc_path = after_prefix(endpoint, "ipc://");
    bool ipc = ipc_path != NULL;
    if (ipc) {
        /* the kernel's limit on a Unix socket's path (sun_path, 108 with its NUL) */
        size_t path_len = strlen(ipc_path);
        if (path_len == 0 || path_len > 107) {
            sl_log(SL_LOG_ERR, "NET-CONTROL",
                   "control socket path is %zu bytes, over the 107 a Unix socket allows: give a "
                   "shorter --data, or --control ipc://SHORTER/PATH", path_len);
            return SL_ETOOBIG;
        }
        snprintf(ep, sizeof ep, "%s", endpoint);
    } else {
        if (sl_net_addr_normalize(endpoint, ep, sizeof ep) != SL_OK)
            return SL_EINVAL;
        const char *host = after_prefix(ep, "tcp://"), *colon = strrchr(host, ':');
        if (!net->has_key && !sl_net_host_is_loopback(host, (size_t)(colon - host))) {
            sl_log(SL_LOG_ERR, "NET-CONTROL",
                   "control endpoint %s is off loopback and the cluster has no key: anyone who "
                   "reaches it could run commands; use --key, or a loopback or ipc:// endpoint",
                   ep);
            return SL_EAUTH;
        }
    }
    sl_err err = SL_EIO;
    void *sock = zmq_socket(net->ctx, ZMQ_ROUTER);
    if (!sock)
        return SL_EIO;
    set_int(sock, ZMQ_LINGER, 0);
    set_int(sock, ZMQ_ROUTER_MANDATORY, 1);
    set_int(sock, ZMQ_SNDHWM, 1024);
    set_int(sock, ZMQ_RCVHWM, net->rcvhwm);
    set_int(sock, ZMQ_HANDSHAKE_IVL, HANDSHAKE_IVL_MS);
    int64_t maxmsg = (int64_t)net->max_msg_len * 2 + 64;
    zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (net->has_key && !ipc) {
        /* TCP with a key: CurveZMQ and the same ZAP check as the ROUTER */
        set_int(sock, ZMQ_CURVE_SERVER, 1);
        if (zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, net->key.secret_z85,
                           SL_NET_KEY_Z85_LEN + 1) != 0) {
            err = SL_EUNSUPPORTED;
            goto fail;
        }
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN));
    }
    /* A Unix socket is created with mode 0600 (the umask is set around
     * the bind, which ZeroMQ makes in this thread), then chmod'ed to be
     * sure: only the peer's own user may connect. */
    mode_t old_mask = 0;
    if (ipc)
        old_mask = umask(0077);
    int rc = zmq_bind(sock, ep);
    int bind_errno = errno;
    if (ipc)
        umask(old_mask);
    if (rc != 0) {
        err = bind_errno == EADDRINUSE ? SL_EBUSY : bind_errno == EINVAL ? SL_EINVAL : SL_EIO;
        sl_log(SL_LOG_ERR, "NET-CONTROL", "cannot listen for control on %s: %s", ep,
               zmq_strerror(bind_errno));
        goto fail;
    }
    if (ipc && chmod(ipc_path, 0600) != 0) {
        sl_log(SL_LOG_ERR, "NET-CONTROL", "cannot make %s private (mode 0600): %s", ipc_path,
               strerror(errno));
        goto fail;
    }
    size_t ep_len = sizeof net->control_endpoint;
    size_t fd_len = sizeof(int);
    if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, net->control_endpoint, &ep_len) != 0 ||
        zmq_getsockopt(sock, ZMQ_FD, &net->control_fd, &fd_len) != 0 ||
        !ep_add(net, net->control_fd, EV_CONTROL))
        goto fail;
    net->control = sock;
    net->control_may_read = true;
    return SL_OK;
fail:
    zmq_close(sock);
    net->control_endpoint[0] = 0;
    return err;
}

const char *sl_net_control_endpoint(const sl_net_t *net) {
    return net->control_endpoint;
}

/* ---- Outbound ---- */

static const char *conn_key(const void *table, size_t i) {
    return ((const conn_t *)table)[i].addr;
}

static conn_t *conn_find(sl_net_t *net, const char *addr) {
    size_t i = sl_addr_index_find(&net->conn_ix, addr, conn_key, net->conns);
    return i == SL_ADDR_INDEX_NONE ? NULL : &net->conns[i];
}

/* A free slot, or the least recently used connection closed to make one.
 * A connection with messages waiting for it to come up is not taken (they
 * would be lost after the caller was told they were queued): NULL when
 * every connection has some, and the caller refuses the send. */
static conn_t *conn_slot(sl_net_t *net) {
    conn_t *slot = NULL;
    for (size_t i = 0; i < net->max_conns; i++) {
        conn_t *c = &net->conns[i];
        if (!c->sock)
            return c;
        if (c->pending_count == 0 && (!slot || c->last_used < slot->last_used))
            slot = c;
    }
    if (slot) {
        sl_log(SL_LOG_DEBUG, "NET-EVICT", "closing least recently used connection to %s",
               slot->addr);
        conn_close(net, slot, CLOSE_LINGER_MS);
        net->stats.conns_evicted++;
    }
    return slot;
}

/* Opens an outbound connection to `addr` in a slot of the table.
 * SL_EAGAIN when no slot can be freed now (conn_slot), SL_EIO when
 * ZeroMQ refuses. */
static sl_err conn_open(sl_net_t *net, const char *addr, conn_t **out) {
    *out = NULL;
    conn_t *slot = conn_slot(net);
    if (!slot) {
        net->stats.conns_full++;
        return SL_EAGAIN;
    }
    void *s = zmq_socket(net->ctx, ZMQ_DEALER);
    if (!s)
        return SL_EIO;
    set_int(s, ZMQ_LINGER, 0);
    set_int(s, ZMQ_IMMEDIATE, 1);
    set_int(s, ZMQ_SNDHWM, net->sndhwm);
    /* The destination answers our requests on this connection
     * (sl_net_send_back) and, once it knows it, sends everything else
     * small on it too (send_shared): it is inbound as much as outbound. */
    set_int(s, ZMQ_RCVHWM, net->rcvhwm);
    set_int(s, ZMQ_RECONNECT_IVL, RECONNECT_IVL_MS);
    set_int(s, ZMQ_RECONNECT_IVL_MAX, RECONNECT_MAX_MS);
    set_int(s, ZMQ_HANDSHAKE_IVL, HANDSHAKE_IVL_MS);
    int64_t maxmsg = (int64_t)net->max_msg_len * 2 + 64;
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    /* Bound to one IPv4 address (127.0.0.2, say): connect from it too, so
     * that the other side sees the address we advertise as the source
     * (on loopback the kernel would pick 127.0.0.1), which is what it
     * checks a reply address against (sl_net_in_from). */
    char dial[2 * (SL_ADDR_MAX + 16)];
    char host[64];
    snprintf(dial, sizeof dial, "%s", addr);
    if (sl_addr_host((const uint8_t *)net->endpoint, strlen(net->endpoint), host,
                     sizeof host) == SL_OK &&
        strcmp(host, "0.0.0.0") && strcmp(host, "127.0.0.1") && !strchr(host, ':') &&
        sl_addr_is_numeric((const uint8_t *)net->endpoint, strlen(net->endpoint)))
        snprintf(dial, sizeof dial, "tcp://%s:0;%s", host, addr + 6);
    if ((net->has_key && apply_curve_client(s, &net->key) != SL_OK) || zmq_connect(s, dial) != 0) {
        zmq_close(s);
        return SL_EIO;
    }
    memset(slot, 0, sizeof *slot);
    snprintf(slot->addr, sizeof slot->addr, "%s", addr);
    slot->sock = s;
    size_t fd_len = sizeof slot->fd;
    if (zmq_getsockopt(s, ZMQ_FD, &slot->fd, &fd_len) != 0 ||
        !ep_add(net, slot->fd, EV_CONN + (uint64_t)(slot - net->conns))) {
        zmq_close(s);
        slot->sock = NULL;
        slot->addr[0] = 0;
        return SL_EIO;
    }
    slot->may_read = true;
    slot->opened_ns = sl_plat_now_ns();
    sl_addr_index_add(&net->conn_ix, (size_t)(slot - net->conns), slot->addr);
    net->stats.conns_opened++;
    net->stats.conns_open++;
    *out = slot;
    return SL_OK;
}

/* Keeps `addr` for sl_net_next_lost (the oldest goes when full). */
static void lost_add(sl_net_t *net, const char *addr) {
    if (net->lost_count == SL_NET_LOST_MAX) {
        net->lost_head = (net->lost_head + 1) % SL_NET_LOST_MAX;
        net->lost_count--;
    }
    snprintf(net->lost[(net->lost_head + net->lost_count++) % SL_NET_LOST_MAX],
             sizeof net->lost[0], "%s", addr);
}

/* Tries to hand one message to ZeroMQ without blocking. The frames are
 * consumed on success and left intact on EAGAIN. A send may take in the
 * socket's pending commands, a reader's wake-up among them, without its
 * ZMQ_FD firing again (the descriptor is edge-triggered): the DEALER is
 * marked to be read. */
static bool try_send(conn_t *c, zmq_msg_t *header, zmq_msg_t *body) {
    c->may_read = true;
    if (zmq_msg_send(header, c->sock, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return false;
    /* Multipart messages are atomic: once the first frame is in, the rest
     * goes in too. */
    if (zmq_msg_send(body, c->sock, ZMQ_DONTWAIT) < 0)
        return false;
    return true;
}

/* Sends what waits on a fresh connection; drops it once the grace is over. */
static void conn_flush(sl_net_t *net, conn_t *c, uint64_t now) {
    while (c->pending_count > 0) {
        pending_t *p = &c->pending[c->pending_head];
        size_t len = zmq_msg_size(&p->header) + zmq_msg_size(&p->body);
        if (!try_send(c, &p->header, &p->body))
            break;
        c->delivering = true; /* so a refusal later is a hint, as after a direct send */
        net->stats.msgs_out++;
        net->stats.bytes_out += len;
        zmq_msg_close(&p->header);
        zmq_msg_close(&p->body);
        c->pending_head = (c->pending_head + 1) % PENDING_MAX;
        c->pending_count--;
    }
    if (c->pending_count > 0 && now - c->opened_ns > net->grace_ns) {
        sl_log(SL_LOG_DEBUG, "NET-DROP", "dropping %zu messages for %s: not connected",
               c->pending_count, c->addr);
        net->stats.dropped_out += c->pending_count;
        conn_clear_pending(c);
    }
}

/* ---- Sharing a pair's connection ----
 *
 * Every peer talks to every other, so with one DEALER each way a pair
 * would hold two TCP connections, and each costs tens of KB on both sides
 * (ZeroMQ's pipes and buffers). A peer that knows the other's connection
 * to it sends on that instead of opening its own. When both opened one
 * before either knew (both probed at once), the pair keeps the one opened
 * by the lower address: the higher sends on it and closes its own once
 * that has been idle a while. Large messages still take our own
 * connection, where the DEALER's small queue bounds what waits for them;
 * while they flow, everything to that peer does, so that a stream of
 * store deltas stays in order. */

static const char *shared_key(const void *table, size_t i) {
    return ((const shared_t *)table)[i].addr;
}

static shared_t *shared_find(sl_net_t *net, const char *ep) {
    size_t i = sl_addr_index_find(&net->shared_ix, ep, shared_key, net->shared);
    return i == SL_ADDR_INDEX_NONE ? NULL : &net->shared[i];
}

/* Forgets a peer's connection to us (gone, full, or its slot reused). */
static void shared_clear(sl_net_t *net, shared_t *sh) {
    sl_addr_index_del(&net->shared_ix, (size_t)(sh - net->shared));
    memset(sh, 0, sizeof *sh);
}

/* True when the pair keeps the other side's connection: our address sorts
 * higher than the destination's. */
static bool prefer_theirs(const sl_net_t *net, const char *ep) {
    return strcmp(net->self, ep) > 0;
}

void sl_net_set_self(sl_net_t *net, const char *addr) {
    if (sl_net_addr_normalize(addr, net->self, sizeof net->self) != SL_OK)
        net->self[0] = 0;
}

void sl_net_note_inbound(sl_net_t *net, const char *addr, const sl_net_route_t *route) {
    char ep[SL_ADDR_MAX + 16];
    if (!net->self[0] || route->len == 0 || route->len > SL_NET_ROUTE_MAX ||
        sl_net_addr_normalize(addr, ep, sizeof ep) != SL_OK || !strcmp(ep, net->self))
        return;
    /* Only a connection that comes from that address's host speaks for it:
     * else anyone naming another peer's address in a message would get
     * what we send that peer (docs/transport.md, "Addresses"). */
    if (!sl_net_in_from(net, ep)) {
        net->stats.inbound_refused++;
        return;
    }
    shared_t *sh = shared_find(net, ep);
    if (!sh) {
        sh = &net->shared[0];
        for (size_t i = 0; i < net->max_conns * 2 && sh->addr[0]; i++)
            if (!net->shared[i].addr[0] || net->shared[i].last_used < sh->last_used)
                sh = &net->shared[i];
        shared_clear(net, sh);
        snprintf(sh->addr, sizeof sh->addr, "%s", ep);
        sl_addr_index_add(&net->shared_ix, (size_t)(sh - net->shared), sh->addr);
    }
    memcpy(sh->id, route->id, route->len);
    sh->id_len = route->len;
    sh->fd = route->fd;
    sh->last_used = ++net->tick;
}

static bool router_send(sl_net_t *net, const sl_net_route_t *route,
                        const uint8_t header[SL_WIRE_HEADER_LEN], const uint8_t *body,
                        size_t body_len);

/* Sends on the destination's connection to us, if we know one and the
 * pair keeps it. False when the message must take our own connection. */
static bool send_shared(sl_net_t *net, const char *ep, const conn_t *own, uint64_t now,
                        const uint8_t header[SL_WIRE_HEADER_LEN], const uint8_t *body,
                        size_t body_len) {
    shared_t *sh = shared_find(net, ep);
    if (!sh || body_len > SHARED_MSG_MAX ||
        (own && (!prefer_theirs(net, ep) || now - own->big_ns < SHARED_IDLE_NS)))
        return false;
    sl_net_route_t route = {.len = sh->id_len};
    memcpy(route.id, sh->id, sh->id_len);
    if (!router_send(net, &route, header, body, body_len)) {
        shared_clear(net, sh); /* that connection is gone (or full): use ours */
        return false;
    }
    sh->last_used = ++net->tick;
    net->stats.msgs_out++;
    net->stats.bytes_out += SL_WIRE_HEADER_LEN + body_len;
    net->stats.sent_shared++;
    return true;
}

/* Closes retired connections once they have been read for RETIRE_NS, and
 * our connections that duplicate a kept one of the other side's once
 * nothing has gone out on them for SHARED_IDLE_NS (answers to what we sent
 * on them have come back by then). */
static void close_idle(sl_net_t *net, uint64_t now) {
    if (now - net->swept_ns < SWEEP_NS)
        return;
    net->swept_ns = now;
    for (size_t i = 0; i < net->max_conns; i++) {
        conn_t *c = &net->conns[i];
        if (c->sock && c->retired_ns && now - c->retired_ns >= RETIRE_NS) {
            conn_close(net, c, 0);
            continue;
        }
        if (net->self[0] && c->sock && c->pending_count == 0 &&
            now - c->opened_ns > SHARED_IDLE_NS && now - c->sent_ns > SHARED_IDLE_NS &&
            prefer_theirs(net, c->addr) && shared_find(net, c->addr)) {
            sl_log(SL_LOG_DEBUG, "NET-SHARE", "closing our connection to %s: it sends on its own",
                   c->addr);
            conn_close(net, c, CLOSE_LINGER_MS);
            net->stats.conns_shared_closed++;
            continue;
        }
        if (c->sock && c->pending_count == 0 && now - c->opened_ns > IDLE_CLOSE_NS &&
            now - c->sent_ns > IDLE_CLOSE_NS && now - c->recv_ns > IDLE_CLOSE_NS) {
            sl_log(SL_LOG_DEBUG, "NET-IDLE", "closing our connection to %s: unused for %llu s",
                   c->addr, (unsigned long long)(IDLE_CLOSE_NS / 1000000000ull));
            conn_close(net, c, CLOSE_LINGER_MS);
            net->stats.conns_idle_closed++;
        }
    }
}

sl_err sl_net_send(sl_net_t *net, const char *addr, const uint8_t header[SL_WIRE_HEADER_LEN],
                   const uint8_t *body, size_t body_len) {
    char ep[SL_ADDR_MAX + 16];
    if (sl_net_addr_normalize(addr, ep, sizeof ep) != SL_OK) {
        net->stats.dropped_out++;
        return SL_EINVAL;
    }
    /* No DNS on the I/O path: ZeroMQ would resolve a name inside its I/O
     * thread, and one that does not answer stalls every socket. */
    if (!sl_addr_is_numeric((const uint8_t *)ep, strlen(ep))) {
        net->stats.dropped_out++;
        net->stats.names_refused++;
        return SL_EINVAL;
    }
    conn_t *c = conn_find(net, ep);
    if (c)
        c->retired_ns = 0; /* the member is back before its connection closed */
    uint64_t now = sl_plat_now_ns();
    if (send_shared(net, ep, c, now, header, body, body_len))
        return SL_OK;
    if (!c) {
        /* Every slot holds messages waiting for a fresh connection (a
         * burst to more new destinations than the cap): refused, and the
         * caller told (SL_EAGAIN), rather than closing one of them. */
        sl_err err = conn_open(net, ep, &c);
        now = sl_plat_now_ns(); /* not before its opened_ns */
        if (err != SL_OK) {
            net->stats.dropped_out++;
            return err;
        }
    }
    c->last_used = ++net->tick;
    if (body_len > SHARED_MSG_MAX)
        c->big_ns = now;
    if (c->pending_count > 0)
        conn_flush(net, c, now);
    zmq_msg_t h, b;
    if (zmq_msg_init_size(&h, SL_WIRE_HEADER_LEN) != 0)
        return SL_ENOMEM;
    if (zmq_msg_init_size(&b, body_len) != 0) {
        zmq_msg_close(&h);
        return SL_ENOMEM;
    }
    memcpy(zmq_msg_data(&h), header, SL_WIRE_HEADER_LEN);
    if (body_len)
        memcpy(zmq_msg_data(&b), body, body_len);
    c->sent_ns = now;
    if (c->pending_count == 0 && try_send(c, &h, &b)) {
        c->delivering = true;
        net->stats.msgs_out++;
        net->stats.bytes_out += SL_WIRE_HEADER_LEN + body_len;
        return SL_OK;
    }
    /* A DEALER that took messages and now refuses one has lost its
     * connection (ZMQ_IMMEDIATE queues nothing without one), or its peer
     * stopped reading: either way a hint for membership, as a closed
     * inbound connection is (sl_net_next_lost). A killed peer is found
     * this way when the pair's one connection was ours, which no monitor
     * reports. */
    if (c->delivering && c->pending_count == 0) {
        c->delivering = false;
        lost_add(net, c->addr);
        net->stats.sends_refused++;
    }
    /* Not connected (yet) or the queue is full. A young connection gets a
     * short grace in a small queue; anything else is dropped. */
    if (now - c->opened_ns <= net->grace_ns && c->pending_count < PENDING_MAX) {
        pending_t *p = &c->pending[(c->pending_head + c->pending_count) % PENDING_MAX];
        zmq_msg_init(&p->header);
        zmq_msg_init(&p->body);
        zmq_msg_move(&p->header, &h);
        zmq_msg_move(&p->body, &b);
        c->pending_count++;
        zmq_msg_close(&h);
        zmq_msg_close(&b);
        return SL_OK;
    }
    zmq_msg_close(&h);
    zmq_msg_close(&b);
    net->stats.dropped_out++;
    return SL_EAGAIN;
}

/* Sends one message on the ROUTER to the connection `route`. False when
 * that connection is gone or its queue is full (ROUTER_MANDATORY). */
static bool router_send(sl_net_t *net, const sl_net_route_t *route,
                        const uint8_t header[SL_WIRE_HEADER_LEN], const uint8_t *body,
                        size_t body_len) {
    void *sock = route->control ? net->control : net->router;
    if (route->control)
        net->control_may_read = true;
    else
        net->router_may_read = true; /* (a send may take in the reader's wake-up: try_send) */
    if (!sock || route->len == 0 || route->len > SL_NET_ROUTE_MAX ||
        zmq_send(sock, route->id, route->len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return false;
    /* Multipart messages are atomic: once the first frame is in, the rest
     * goes in too. */
    zmq_send(sock, header, SL_WIRE_HEADER_LEN, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(sock, body, body_len, ZMQ_DONTWAIT);
    return true;
}

sl_err sl_net_reply(sl_net_t *net, const sl_net_route_t *route,
                    const uint8_t header[SL_WIRE_HEADER_LEN], const uint8_t *body,
                    size_t body_len) {
    if (!router_send(net, route, header, body, body_len)) {
        net->stats.dropped_out++;
        return SL_EAGAIN;
    }
    net->stats.replies_out++;
    net->stats.reply_bytes_out += SL_WIRE_HEADER_LEN + body_len;
    return SL_OK;
}

sl_err sl_net_send_back(sl_net_t *net, const sl_net_route_t *route,
                        const uint8_t header[SL_WIRE_HEADER_LEN], const uint8_t *body,
                        size_t body_len) {
    if (!router_send(net, route, header, body, body_len))
        return SL_EAGAIN; /* not counted as dropped: the caller sends it another way */
    net->stats.msgs_out++;
    net->stats.bytes_out += SL_WIRE_HEADER_LEN + body_len;
    net->stats.sent_back++;
    return SL_OK;
}

/* Forgets the member at `addr`'s connections: ours to it is retired
 * (sl_net_disconnect) or closed at once (sl_net_redial), and its to us is
 * no longer shared. */
static void forget_member(sl_net_t *net, const char *addr, bool close_now) {
    char ep[SL_ADDR_MAX + 16];
    if (sl_net_addr_normalize(addr, ep, sizeof ep) != SL_OK)
        return;
    conn_t *c = conn_find(net, ep);
    if (c && close_now) {
        conn_close(net, c, 0);
        net->stats.conns_redialled++;
    } else if (c && !c->retired_ns) {
        net->stats.dropped_out += c->pending_count;
        conn_clear_pending(c);
        c->retired_ns = sl_plat_now_ns();
    }
    shared_t *sh = shared_find(net, ep);
    if (sh)
        shared_clear(net, sh);
}

void sl_net_disconnect(sl_net_t *net, const char *addr) {
    /* Not closed at once: the peer may have sent us messages on it (it
     * does when the pair shares it) that are still in its queue, and a
     * member declared dead by mistake goes on sending until it learns.
     * What waits to go out is dropped; the rest is read a while yet. */
    forget_member(net, addr, false);
}

void sl_net_redial(sl_net_t *net, const char *addr) {
    forget_member(net, addr, true);
}

void sl_net_stats(const sl_net_t *net, sl_net_stats_t *stats) {
    *stats = net->stats;
    stats->pending = 0;
    for (size_t i = 0; i < net->max_conns; i++)
        stats->pending += net->conns[i].pending_count;
}

/* ---- Inbound ---- */

static bool has_more(void *sock) {
    int more = 0;
    size_t ml = sizeof more;
    return zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml) == 0 && more;
}

int sl_net_zap_answer(void *zap, const uint8_t key_public[32], int flags, char *addr,
                      size_t addr_cap) {
    zmq_msg_t f[7];
    int n = 0;
    for (; n < 7; n++) {
        zmq_msg_init(&f[n]);
        if (zmq_msg_recv(&f[n], zap, n == 0 ? flags : ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f[n]);
            if (n == 0)
                return -1;
            break;
        }
        if (!zmq_msg_more(&f[n])) {
            n++;
            break;
        }
    }
    int verdict = 0;
    if (n < 7 || has_more(zap)) {
        /* A malformed request from our own libzmq: nothing sensible to send. */
        drain(zap);
    } else {
        /* frames: version, request id, domain, address, routing id, mechanism, credentials */
        bool ok = zmq_msg_size(&f[5]) == 5 && !memcmp(zmq_msg_data(&f[5]), "CURVE", 5) &&
                  zmq_msg_size(&f[6]) == 32 && !memcmp(zmq_msg_data(&f[6]), key_public, 32);
        const char *text = ok ? "OK" : "not a member of this cluster";
        zmq_send(zap, "1.0", 3, ZMQ_SNDMORE);
        zmq_send(zap, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
        zmq_send(zap, ok ? "200" : "400", 3, ZMQ_SNDMORE);
        zmq_send(zap, text, strlen(text), ZMQ_SNDMORE);
        zmq_send(zap, ok ? "member" : "", ok ? 6 : 0, ZMQ_SNDMORE);
        zmq_send(zap, "", 0, 0);
        verdict = ok ? 1 : 0;
        if (addr && addr_cap)
            snprintf(addr, addr_cap, "%.*s", (int)zmq_msg_size(&f[3]),
                     (const char *)zmq_msg_data(&f[3]));
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
    return verdict;
}

/* One ZAP request of the ROUTER's: false when none was waiting. */
static bool serve_zap(sl_net_t *net) {
    char addr[64] = "";
    int verdict = sl_net_zap_answer(net->zap, net->key_public, ZMQ_DONTWAIT, addr, sizeof addr);
    if (verdict < 0)
        return false;
    if (verdict == 0 && addr[0]) {
        net->stats.auth_denied++;
        sl_log(SL_LOG_NOTICE, "NET-AUTH-DENIED", "refused a connection from %s: wrong key", addr);
    }
    return true;
}

/* A connection of our ROUTER closed: if a peer shared it with us, forget
 * it and keep the peer's address for sl_net_next_lost. (A file descriptor
 * reused by a newer connection before this event is read may name the
 * wrong peer: that costs it one early probe.) */
static void note_lost(sl_net_t *net, int fd) {
    for (size_t i = 0; fd >= 0 && i < net->max_conns * 2; i++) {
        shared_t *sh = &net->shared[i];
        if (!sh->addr[0] || sh->fd != fd)
            continue;
        lost_add(net, sh->addr);
        shared_clear(net, sh);
    }
}

bool sl_net_next_lost(sl_net_t *net, char *addr, size_t cap) {
    if (net->lost_count == 0)
        return false;
    snprintf(addr, cap, "%s", net->lost[net->lost_head]);
    net->lost_head = (net->lost_head + 1) % SL_NET_LOST_MAX;
    net->lost_count--;
    return true;
}

/* One event of the ROUTER's monitor; false when none was waiting. */
static bool serve_monitor(sl_net_t *net) {
    zmq_msg_t ev;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, net->monitor, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        return false;
    }
    uint16_t event = 0;
    uint32_t value = 0;
    if (zmq_msg_size(&ev) >= 6) {
        memcpy(&event, zmq_msg_data(&ev), 2);
        memcpy(&value, (uint8_t *)zmq_msg_data(&ev) + 2, 4);
    }
    zmq_msg_close(&ev);
    drain(net->monitor);
    /* The events name the connection (its fd) only on accept and
     * disconnect, not on handshake results; results pop the oldest
     * connection still in handshake. A connection that closes while still
     * in handshake failed it too (libzmq reports no event for bytes that
     * are not ZeroMQ at all when security is on). Counts are exact once
     * connections close; which connection they are pinned on may not be. */
    int fd = (int)value;
    size_t i;
    switch (event) {
    case ZMQ_EVENT_ACCEPTED:
        if (net->handshaking_count == HANDSHAKING_MAX) {
            memmove(net->handshaking, net->handshaking + 1,
                    (HANDSHAKING_MAX - 1) * sizeof net->handshaking[0]);
            net->handshaking_count--;
        }
        net->handshaking[net->handshaking_count++] = fd;
        break;
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        if (net->handshaking_count > 0) {
            memmove(net->handshaking, net->handshaking + 1,
                    (net->handshaking_count - 1) * sizeof net->handshaking[0]);
            net->handshaking_count--;
        }
        if (event != ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            net->stats.handshake_failed++;
            sl_log(SL_LOG_INFO, "NET-HANDSHAKE-FAILED",
                   "an inbound connection failed its handshake (wrong key, no key, or not ZeroMQ)");
        }
        break;
    case ZMQ_EVENT_DISCONNECTED:
        note_lost(net, fd);
        for (i = 0; i < net->handshaking_count && net->handshaking[i] != fd; i++) {
        }
        if (i < net->handshaking_count) {
            memmove(net->handshaking + i, net->handshaking + i + 1,
                    (net->handshaking_count - i - 1) * sizeof net->handshaking[0]);
            net->handshaking_count--;
            net->stats.handshake_failed++;
            sl_log(SL_LOG_INFO, "NET-HANDSHAKE-FAILED",
                   "an inbound connection closed before completing its handshake");
        }
        break;
    default:
        break;
    }
    return true;
}

/* Serves the monitor's events and ZAP's requests until none is left. */
static void serve_side_sockets(sl_net_t *net) {
    while (net->monitor_may_read)
        net->monitor_may_read = serve_monitor(net);
    while (net->zap && net->zap_may_read)
        net->zap_may_read = serve_zap(net);
}

static void release_in(sl_net_t *net) {
    if (!net->have_in)
        return;
    zmq_msg_close(&net->in_route);
    zmq_msg_close(&net->in_header);
    zmq_msg_close(&net->in_body);
    zmq_msg_init(&net->in_route);
    zmq_msg_init(&net->in_header);
    zmq_msg_init(&net->in_body);
    net->have_in = false;
    net->in_peer[0] = 0;
}

/* Reads one message from `router` (the ROUTER or the control ROUTER, with
 * its routing id) or, when `c` is not NULL, from that outbound DEALER
 * (header and body only: a reply to something we sent). SL_OK: a good
 * message; SL_EAGAIN: nothing; SL_EPROTO: a bad one, counted and dropped
 * (more may follow). */
static sl_err read_one(sl_net_t *net, void *router, conn_t *c, sl_net_in_t *in) {
    void *sock = c ? c->sock : router;
    bool ok;
    if (!c) {
        if (zmq_msg_recv(&net->in_route, sock, ZMQ_DONTWAIT) < 0)
            return SL_EAGAIN;
        net->have_in = true;
        ok = zmq_msg_more(&net->in_route) && zmq_msg_size(&net->in_route) <= SL_NET_ROUTE_MAX &&
             zmq_msg_recv(&net->in_header, sock, ZMQ_DONTWAIT) >= 0;
    } else {
        if (zmq_msg_recv(&net->in_header, sock, ZMQ_DONTWAIT) < 0)
            return SL_EAGAIN;
        net->have_in = true;
        ok = true;
    }
    ok = ok && zmq_msg_more(&net->in_header) &&
         zmq_msg_size(&net->in_header) == SL_WIRE_HEADER_LEN &&
         zmq_msg_recv(&net->in_body, sock, ZMQ_DONTWAIT) >= 0 && !zmq_msg_more(&net->in_body);
    if (!ok) {
        drain(sock);
        net->stats.bad_frames++;
        release_in(net);
        return SL_EPROTO;
    }
    size_t body_len = zmq_msg_size(&net->in_body);
    if (body_len > net->max_msg_len) {
        net->stats.oversized++;
        release_in(net);
        return SL_EPROTO;
    }
    net->stats.msgs_in++;
    const char *peer = zmq_msg_gets(&net->in_header, "Peer-Address");
    snprintf(net->in_peer, sizeof net->in_peer, "%s", peer ? peer : "");
    net->stats.bytes_in += SL_WIRE_HEADER_LEN + body_len;
    in->header = zmq_msg_data(&net->in_header);
    in->body = body_len ? zmq_msg_data(&net->in_body) : NULL;
    in->body_len = body_len;
    in->on_outbound = c != NULL;
    if (c) {
        net->stats.received_back++;
        c->recv_ns = sl_plat_now_ns();
        in->route.len = 0;
        in->route.fd = -1;
    } else {
        in->route.len = zmq_msg_size(&net->in_route);
        memcpy(in->route.id, zmq_msg_data(&net->in_route), in->route.len);
        in->route.fd = zmq_msg_get(&net->in_header, ZMQ_SRCFD);
        in->route.control = router == net->control;
    }
    return SL_OK;
}

/* read_one past bad messages. */
static sl_err read_good(sl_net_t *net, void *router, conn_t *c, sl_net_in_t *in) {
    sl_err err;
    while ((err = read_one(net, router, c, in)) == SL_EPROTO) {
    }
    return err;
}

/* Reads one message from the ROUTER or, failing that, from the outbound
 * DEALERs, starting after the one read last so none starves. Only the
 * sockets that may hold input are tried, until each reads empty: a
 * receive on an empty ZeroMQ socket costs two system calls (it looks for
 * commands), and trying every DEALER for every message made a peer with
 * 30 connections spend a third of its time in poll(2) and getpid(2). */
static sl_err read_any(sl_net_t *net, sl_net_in_t *in) {
    if (net->router_may_read) {
        if (read_good(net, net->router, NULL, in) == SL_OK)
            return SL_OK;
        net->router_may_read = false;
    }
    if (net->control && net->control_may_read) {
        if (read_good(net, net->control, NULL, in) == SL_OK)
            return SL_OK;
        net->control_may_read = false;
    }
    for (size_t k = 0; k < net->max_conns; k++) {
        size_t i = (net->next_conn + k) % net->max_conns;
        conn_t *c = &net->conns[i];
        if (!c->sock || !c->may_read)
            continue;
        if (read_good(net, NULL, c, in) == SL_OK) {
            net->next_conn = (i + 1) % net->max_conns;
            return SL_OK;
        }
        c->may_read = false;
    }
    return SL_EAGAIN;
}

sl_err sl_net_poll(sl_net_t *net, int timeout_ms, sl_net_in_t *in) {
    release_in(net);
    memset(in, 0, sizeof *in);
    uint64_t start = sl_plat_now_ns();
    bool polled = false;
    for (;;) {
        /* Flush what waits for fresh connections. */
        uint64_t now = sl_plat_now_ns();
        close_idle(net, now);
        bool waiting = false;
        for (size_t i = 0; i < net->max_conns; i++) {
            conn_t *c = &net->conns[i];
            if (c->sock && c->pending_count > 0) {
                conn_flush(net, c, now);
                waiting |= c->pending_count > 0;
            }
        }
        serve_side_sockets(net);
        if (read_any(net, in) == SL_OK)
            return SL_OK;
        int wait_ms;
        if (timeout_ms < 0) {
            wait_ms = -1;
        } else {
            /* (polled at least once, even with no time to wait: only a
               poll marks the DEALERs that received something) */
            uint64_t elapsed_ms = (now - start) / 1000000ull;
            if (elapsed_ms >= (uint64_t)timeout_ms && polled)
                return SL_EAGAIN;
            wait_ms = elapsed_ms >= (uint64_t)timeout_ms ? 0 : timeout_ms - (int)elapsed_ms;
        }
        if (waiting && (wait_ms < 0 || wait_ms > PENDING_POLL_MS))
            wait_ms = PENDING_POLL_MS;
        /* Every socket by its ZMQ_FD, in one epoll set. The descriptors
           are edge-triggered: one fires when its socket has new commands
           (input arrived, a connection changed), and any call on the
           socket may take them in first, so a socket is marked to be read
           when its descriptor fires or after a send on it, and read until
           empty. zmq_poll asked each socket item for ZMQ_EVENTS twice a
           call (a poll(2) and a getpid(2) each, inside ZeroMQ) and polled
           twice: eight system calls a wake-up for three sockets */
        int cap = (int)(net->max_conns + 4 + SL_NET_MAX_WATCHES);
        int rc = epoll_wait(net->epfd, net->evs, cap, wait_ms);
        polled = true;
        if (rc < 0) {
            if (errno == EINTR)
                return SL_EAGAIN;
            return SL_EIO;
        }
        bool readable = net->router_may_read, woken = false;
        for (int k = 0; k < rc; k++) {
            uint64_t tag = net->evs[k].data.u64;
            uint32_t e = net->evs[k].events;
            if (tag >= EV_CONN) {
                size_t i = (size_t)(tag - EV_CONN);
                if (i < net->max_conns && net->conns[i].sock && (e & EPOLLIN))
                    readable = net->conns[i].may_read = true;
            } else if (tag >= EV_WATCH) {
                size_t w = (size_t)(tag - EV_WATCH);
                if (w < net->watch_count && (e & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                    woken = net->watches[w].ready = true;
            } else if (tag == EV_ROUTER) {
                readable |= net->router_may_read |= (e & EPOLLIN) != 0;
            } else if (tag == EV_MONITOR) {
                net->monitor_may_read |= (e & EPOLLIN) != 0;
            } else if (tag == EV_ZAP) {
                net->zap_may_read |= (e & EPOLLIN) != 0;
            } else if (tag == EV_CONTROL && net->control) {
                net->control_may_read |= (e & EPOLLIN) != 0;
            }
        }
        serve_side_sockets(net);
        if (net->control)
            readable |= net->control_may_read;
        if (readable && read_any(net, in) == SL_OK)
            return SL_OK;
        if (woken || timeout_ms == 0)
            return SL_EAGAIN;
        if (rc == 0 && !waiting)
            return SL_EAGAIN;
    }
}

sl_err sl_net_watch_fd(sl_net_t *net, int fd) {
    if (net->watch_count == SL_NET_MAX_WATCHES)
        return SL_EBUSY;
    if (!ep_add(net, fd, EV_WATCH + net->watch_count))
        return errno == EPERM ? SL_EINVAL : SL_EIO; /* (EPERM: a regular file) */
    net->watches[net->watch_count].fd = fd;
    net->watches[net->watch_count++].ready = false;
    return SL_OK;
}

bool sl_net_fd_ready(sl_net_t *net, int fd) {
    for (size_t w = 0; w < net->watch_count; w++)
        if (net->watches[w].fd == fd && net->watches[w].ready) {
            net->watches[w].ready = false;
            return true;
        }
    return false;
}
