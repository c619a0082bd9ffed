/* The transport's client side (peerctl): one DEALER to a peer's control
 * or gossip endpoint, with Curve when a key is given. See
 * include/starling/net.h and docs/transport.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "starling/net.h"
#include "starling/platform.h"
#include "net/net_internal.h"

/* ---- Client ---- */

struct sl_net_client {
    void *ctx;             /* private context */
    void *sock;            /* DEALER to the peer */
    void *monitor;         /* PAIR reading the DEALER's events */
    bool tcp_connected;    /* a TCP connection was made */
    bool handshake_ok;     /* the handshake completed */
    bool handshake_failed; /* a handshake failed */
};

sl_err sl_net_client_new(const char *addr, const sl_net_key_t *key, sl_net_client_t **out) {
    *out = NULL;
    char ep[SL_NET_CONTROL_MAX];
    bool ipc = addr && !strncmp(addr, "ipc://", 6);
    if (ipc) {
        if (!addr[6] || strlen(addr) >= sizeof ep)
            return SL_EINVAL;
        snprintf(ep, sizeof ep, "%s", addr);
        key = NULL; /* a Unix socket is guarded by its file's permissions */
    } else if (sl_net_addr_normalize(addr, ep, sizeof ep) != SL_OK) {
        return SL_EINVAL;
    }
    sl_net_client_t *c = sl_calloc(1, sizeof *c);
    if (!c)
        return SL_ENOMEM;
    sl_err err = SL_EIO;
    c->ctx = zmq_ctx_new();
    if (!c->ctx)
        goto fail;
    c->sock = zmq_socket(c->ctx, ZMQ_DEALER);
    if (!c->sock)
        goto fail;
    set_int(c->sock, ZMQ_LINGER, 0);
    set_int(c->sock, ZMQ_IMMEDIATE, 1);
    set_int(c->sock, ZMQ_RECONNECT_IVL, 100);
    set_int(c->sock, ZMQ_HANDSHAKE_IVL, 3000);
    int64_t maxmsg = (int64_t)SL_MSG_MAX_LEN + 64;
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (key && (err = apply_curve_client(c->sock, key)) != SL_OK)
        goto fail;
    err = SL_EIO;
    char mon_ep[64];
    snprintf(mon_ep, sizeof mon_ep, "inproc://sl-client-monitor-%p", (void *)c);
    if (zmq_socket_monitor(c->sock, mon_ep, ZMQ_EVENT_ALL) != 0)
        goto fail;
    c->monitor = zmq_socket(c->ctx, ZMQ_PAIR);
    if (!c->monitor || zmq_connect(c->monitor, mon_ep) != 0)
        goto fail;
    set_int(c->monitor, ZMQ_LINGER, 0);
    if (zmq_connect(c->sock, ep) != 0) {
        err = SL_EINVAL;
        goto fail;
    }
    *out = c;
    return SL_OK;
fail:
    sl_net_client_destroy(&c);
    return err;
}

void sl_net_client_destroy(sl_net_client_t **pc) {
    sl_net_client_t *c = pc ? *pc : NULL;
    if (!c)
        return;
    if (c->sock) {
        zmq_socket_monitor(c->sock, NULL, 0);
        zmq_close(c->sock);
    }
    if (c->monitor)
        zmq_close(c->monitor);
    if (c->ctx)
        zmq_ctx_term(c->ctx);
    sl_free(c);
    *pc = NULL;
}

static void client_events(sl_net_client_t *c) {
    for (;;) {
        zmq_msg_t ev;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, c->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        uint16_t event = 0;
        if (zmq_msg_size(&ev) >= 2)
            memcpy(&event, zmq_msg_data(&ev), 2);
        zmq_msg_close(&ev);
        drain(c->monitor);
        if (event == ZMQ_EVENT_CONNECTED)
            c->tcp_connected = true;
        else if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
            c->handshake_ok = true;
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL ||
                 event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                 event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
            c->handshake_failed = true;
    }
}

sl_err sl_net_client_send(sl_net_client_t *c, const uint8_t header[SL_WIRE_HEADER_LEN],
                          const uint8_t *body, size_t body_len, int timeout_ms) {
    uint64_t deadline = sl_plat_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        if (zmq_send(c->sock, header, SL_WIRE_HEADER_LEN, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0) {
            zmq_send(c->sock, body, body_len, 0);
            return SL_OK;
        }
        if (errno != EAGAIN)
            return SL_EIO;
        uint64_t now = sl_plat_now_ns();
        if (now >= deadline)
            return SL_ETIMEDOUT;
        zmq_pollitem_t items[2] = {{c->sock, 0, ZMQ_POLLOUT, 0}, {c->monitor, 0, ZMQ_POLLIN, 0}};
        long wait = (long)((deadline - now) / 1000000ull);
        zmq_poll(items, 2, wait > 20 ? 20 : (wait < 1 ? 1 : wait));
        client_events(c);
    }
}

sl_err sl_net_client_recv(sl_net_client_t *c, int timeout_ms, uint8_t **header,
                          size_t *header_len, uint8_t **body, size_t *body_len) {
    *header = *body = NULL;
    *header_len = *body_len = 0;
    uint64_t deadline = sl_plat_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        zmq_msg_t h, b;
        zmq_msg_init(&h);
        if (zmq_msg_recv(&h, c->sock, ZMQ_DONTWAIT) >= 0) {
            zmq_msg_init(&b);
            bool ok = zmq_msg_more(&h) && zmq_msg_recv(&b, c->sock, ZMQ_DONTWAIT) >= 0 &&
                      !zmq_msg_more(&b);
            if (!ok) {
                drain(c->sock);
                zmq_msg_close(&h);
                zmq_msg_close(&b);
                return SL_EPROTO;
            }
            *header = sl_malloc(zmq_msg_size(&h) + 1);
            *body = sl_malloc(zmq_msg_size(&b) + 1);
            if (!*header || !*body) {
                sl_free(*header);
                sl_free(*body);
                *header = *body = NULL;
                zmq_msg_close(&h);
                zmq_msg_close(&b);
                return SL_ENOMEM;
            }
            memcpy(*header, zmq_msg_data(&h), zmq_msg_size(&h));
            memcpy(*body, zmq_msg_data(&b), zmq_msg_size(&b));
            (*body)[zmq_msg_size(&b)] = 0;
            *header_len = zmq_msg_size(&h);
            *body_len = zmq_msg_size(&b);
            zmq_msg_close(&h);
            zmq_msg_close(&b);
            return SL_OK;
        }
        zmq_msg_close(&h);
        uint64_t now = sl_plat_now_ns();
        if (now >= deadline)
            return SL_ETIMEDOUT;
        zmq_pollitem_t items[2] = {{c->sock, 0, ZMQ_POLLIN, 0}, {c->monitor, 0, ZMQ_POLLIN, 0}};
        long wait = (long)((deadline - now) / 1000000ull);
        zmq_poll(items, 2, wait > 50 ? 50 : (wait < 1 ? 1 : wait));
        client_events(c);
    }
}

sl_net_client_state sl_net_client_state_get(sl_net_client_t *c) {
    client_events(c);
    if (c->handshake_ok)
        return SL_NET_CLIENT_CONNECTED;
    if (c->handshake_failed)
        return SL_NET_CLIENT_HANDSHAKE_FAILED;
    if (c->tcp_connected)
        return SL_NET_CLIENT_TCP_ONLY;
    return SL_NET_CLIENT_NEVER_CONNECTED;
}
