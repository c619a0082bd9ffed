/* The transport, internal: small ZeroMQ helpers shared by the peer side
 * (net.c) and the client side (client.c). */
#ifndef STARLING_NET_INTERNAL_H
#define STARLING_NET_INTERNAL_H

#include <zmq.h>

#include "starling/net.h"

static inline void set_int(void *sock, int opt, int v) {
    zmq_setsockopt(sock, opt, &v, sizeof v);
}

static inline sl_err apply_curve_client(void *sock, const sl_net_key_t *key) {
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, key->public_z85, SL_NET_KEY_Z85_LEN + 1) ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, key->public_z85, SL_NET_KEY_Z85_LEN + 1) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, key->secret_z85, SL_NET_KEY_Z85_LEN + 1))
        return SL_EUNSUPPORTED;
    return SL_OK;
}

/* Reads the rest of a multipart message and throws it away. */
static inline void drain(void *sock) {
    int more = 0;
    size_t ml = sizeof more;
    while (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml) == 0 && more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        zmq_msg_close(&m);
    }
}

#endif
