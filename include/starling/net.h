/* The transport: ZeroMQ sockets between peers, and between a peer and its
 * clients (docs/transport.md, docs/security.md).
 *
 * A peer binds one ROUTER for everything inbound. To send to another peer
 * it uses an outbound DEALER per destination, connected lazily and capped
 * (at most `max_conns` open; the least recently used is closed first,
 * never one whose first messages still wait for it to come up; one
 * unused for 10 minutes is closed).
 * A peer answers a request on the connection it came in on
 * (sl_net_send_back through the ROUTER), so that request and reply share
 * one TCP connection and the TCP acknowledgement of the request rides on
 * the reply; the DEALERs are read too, for those answers. All
 * sockets use ZMQ_IMMEDIATE, small high-water marks and zero linger, so a
 * dead or slow destination never blocks the caller or grows memory: a
 * message that cannot go out now is dropped and counted. A message is two
 * frames (SL_WIRE_HEADER_LEN-byte header, body); inbound frames of another
 * shape or over the size limit are dropped and counted.
 *
 * With a cluster key every socket uses CurveZMQ. All peers of a cluster
 * share one key file holding one Curve keypair: each ROUTER is a Curve
 * server with that keypair, each DEALER a Curve client with it, and the
 * ZAP handler (run inside sl_net_poll) accepts only clients presenting the
 * cluster's public key. Without the key a process can neither complete the
 * handshake nor read or write a message.
 *
 * Single-threaded: one sl_net_t belongs to the thread that polls it. This
 * is the only module that touches sockets. */
#ifndef STARLING_NET_H
#define STARLING_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"
#include "starling/msg.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_NET_DEFAULT_PORT 7600 /* peers listen here unless told otherwise */
#define SL_NET_MAX_CONNS 256     /* outbound connections open at once (default cap) */
#define SL_NET_ROUTE_MAX 32      /* bytes of a ZeroMQ routing id */
#define SL_NET_KEY_Z85_LEN 40    /* Z85 text of a 32-byte Curve key */

/* ---- Cluster keys ---- */

/* A cluster key: one Curve25519 keypair shared by every member. */
typedef struct {
    char public_z85[SL_NET_KEY_Z85_LEN + 1]; /* public key, Z85 text */
    char secret_z85[SL_NET_KEY_Z85_LEN + 1]; /* secret key, Z85 text */
} sl_net_key_t;

/* Makes a new random key. */
sl_err sl_net_key_generate(sl_net_key_t *key);

/* Writes the key file text (comment lines, then "public = ..." and
 * "secret = ...") into `buf`. SL_ETOOBIG if `cap` is too small (512 is
 * enough). */
sl_err sl_net_key_format(const sl_net_key_t *key, char *buf, size_t cap);

/* Parses key file text. Accepts '#' comments and blank lines; needs the
 * secret; checks the public key, when present, matches it. SL_EPROTO on a
 * malformed file, SL_EAUTH when public and secret do not belong together. */
sl_err sl_net_key_parse(const char *text, size_t len, sl_net_key_t *key);

/* Reads one ZAP request (ZeroMQ RFC 27) from the REP socket `zap` and
 * answers it: accepted when the mechanism is CURVE and the client's
 * long-term key is `key_public` (the cluster's). `flags`: 0 waits,
 * ZMQ_DONTWAIT does not. Returns 1 accepted, 0 refused (`addr` gets the
 * client's address when given) or malformed (no answer, `addr` empty), -1
 * when nothing was read (errno says why: EAGAIN, ETERM). The peer's ROUTER
 * and the elastic ring's links answer through it. */
int sl_net_zap_answer(void *zap, const uint8_t key_public[32], int flags, char *addr,
                      size_t addr_cap);

/* Reads and parses a key file. SL_ENOTFOUND when missing. Warns in the
 * log (never printing the key) when the file is readable by others. */
sl_err sl_net_key_load(const char *path, sl_net_key_t *key);

/* ---- Addresses ---- */

/* Normalises "host:port", "tcp://host:port" or ":port" (host 127.0.0.1)
 * into "tcp://host:port". SL_EINVAL when it is not an address. */
sl_err sl_net_addr_normalize(const char *in, char *out, size_t cap);

/* ---- The peer transport ---- */

typedef struct sl_net sl_net_t;

typedef struct {
    const char *listen;       /* bind endpoint ("tcp://127.0.0.1:7600"; port 0 picks one) */
    const sl_net_key_t *key;  /* cluster key, or NULL for an open cluster */
    size_t max_conns;         /* outbound cap; 0 means SL_NET_MAX_CONNS */
    int sndhwm;               /* messages queued per outbound socket; 0 means 64 */
    int reply_hwm;            /* reply parts queued per client; 0 means 1024 */
    int rcvhwm;               /* messages queued per inbound connection; 0 means 256 */
    size_t max_msg_len;       /* body bytes accepted; 0 means SL_MSG_MAX_LEN */
    int connect_grace_ms;     /* how long a message waits for a fresh connection; 0 means 1000 */
} sl_net_config_t;

/* Where an inbound message came from, to reply on the same connection
 * (clients such as peerctl get their answers this way, and peers the
 * answers to their requests). */
typedef struct {
    uint8_t id[SL_NET_ROUTE_MAX]; /* ZeroMQ routing id */
    size_t len;                   /* bytes of id */
    int fd;                       /* its TCP socket, to tell when it closes; -1 unknown */
    bool control;                 /* came on the control endpoint (sl_net_control_listen) */
} sl_net_route_t;

/* One inbound message; the pointers stay valid until the next sl_net_poll
 * or sl_net_destroy. */
typedef struct {
    const uint8_t *header; /* SL_WIRE_HEADER_LEN bytes */
    const uint8_t *body;   /* body bytes (may be NULL when body_len is 0) */
    size_t body_len;       /* bytes of body */
    sl_net_route_t route;  /* the ROUTER connection it came in on (len 0 when on_outbound) */
    bool on_outbound;      /* came on one of our outbound connections: the answer
                              to something we sent; cannot be answered back */
} sl_net_in_t;

/* Counters, all since start. */
typedef struct {
    uint64_t msgs_in;          /* well-formed messages received */
    uint64_t bytes_in;         /* their header + body bytes */
    uint64_t msgs_out;         /* messages handed to ZeroMQ for other peers
                                  (sl_net_send and sl_net_send_back) */
    uint64_t bytes_out;        /* their header + body bytes */
    uint64_t replies_out;      /* replies to clients (sl_net_reply) */
    uint64_t reply_bytes_out;  /* their header + body bytes */
    uint64_t dropped_out;      /* sends dropped: not connected in time, queue full, bad address */
    uint64_t bad_frames;       /* inbound messages of the wrong shape (frames, header length) */
    uint64_t oversized;        /* inbound messages over max_msg_len */
    uint64_t auth_denied;      /* ZAP refusals (wrong client key) */
    uint64_t handshake_failed; /* failed handshakes: wrong key, no key, garbage bytes */
    uint64_t conns_opened;     /* outbound connections opened */
    uint64_t conns_evicted;    /* outbound connections closed to respect the cap */
    uint64_t conns_open;       /* outbound connections open now */
    uint64_t pending;          /* messages waiting for a fresh connection now */
    uint64_t sent_back;        /* of msgs_out: sent back on the requester's connection */
    uint64_t received_back;    /* of msgs_in: answers received on our outbound connections */
    uint64_t sent_shared;      /* of msgs_out: sent on the destination's connection to us */
    uint64_t conns_shared_closed; /* outbound connections closed as duplicates of the
                                     destination's connection to us */
    uint64_t conns_redialled;  /* outbound connections closed for a member that came back */
    uint64_t sends_refused;    /* outbound connections that took messages, then refused one */
    uint64_t names_refused;    /* of dropped_out: sends to a host name (no DNS on the I/O path) */
    uint64_t inbound_refused;  /* sl_net_note_inbound calls for an address of another host */
    uint64_t conns_full;       /* of dropped_out: sends refused because every outbound
                                  connection had messages waiting for it to come up */
    uint64_t conns_idle_closed; /* outbound connections closed after 10 minutes unused */
} sl_net_stats_t;

/* Binds the ROUTER (and, with a key, the ZAP handler). SL_EBUSY when the
 * address is in use, SL_EINVAL when it is malformed, SL_EIO otherwise. */
sl_err sl_net_new(const sl_net_config_t *cfg, sl_net_t **out);

/* Closes every socket at once (zero linger). Idempotent; nulls *net. */
void sl_net_destroy(sl_net_t **net);

/* The endpoint actually bound ("tcp://127.0.0.1:41234"). */
const char *sl_net_endpoint(const sl_net_t *net);

/* The remote IP address of the connection the message last returned by
 * sl_net_poll came in on (ZeroMQ's Peer-Address: "127.0.0.2", "::1"), or
 * "" when unknown; valid until the next sl_net_poll. */
const char *sl_net_in_peer(const sl_net_t *net);

/* Whether `addr` ("tcp://HOST:PORT") has the host the message last
 * returned by sl_net_poll came from: a reply address a request may name
 * (docs/transport.md, "Addresses"). True when the remote address is
 * unknown (not TCP). */
bool sl_net_in_from(const sl_net_t *net, const char *addr);

/* ---- The control endpoint (docs/security.md, "The control endpoint") ----
 *
 * A second ROUTER, apart from the one peers gossip on, for clients
 * (peerctl): messages that come on it have route.control set, and
 * replies on such a route go back on it. */

#define SL_NET_CONTROL_MAX 160 /* bytes of a control endpoint ("ipc://" + a path) */

/* Binds the control ROUTER at `endpoint`: "ipc://PATH" (a Unix socket,
 * created with mode 0600; no CurveZMQ, the file's permissions guard it;
 * SL_ETOOBIG past the kernel's 107-byte path) or "HOST:PORT" /
 * "tcp://HOST:PORT" (with the cluster key, CurveZMQ and the ZAP check of
 * the peers' ROUTER; without one, only a loopback host: SL_EAUTH
 * otherwise). SL_EBUSY when in use, SL_EINVAL when malformed or already
 * listening. */
sl_err sl_net_control_listen(sl_net_t *net, const char *endpoint);

/* The control endpoint bound ("ipc:///d/control.sock"), "" when none. */
const char *sl_net_control_endpoint(const sl_net_t *net);

/* Whether `host` (len bytes, no port) is a loopback address: 127.x.y.z,
 * ::1 (bracketed or not) or localhost. */
bool sl_net_host_is_loopback(const char *host, size_t len);

/* Sends header + body to the peer whose ROUTER is at `addr` (any form
 * sl_net_addr_normalize takes). Never blocks: a message that cannot go out
 * is dropped and counted, and SL_EAGAIN says so (the destination's queue
 * is full, or every outbound connection is young with messages waiting
 * for it: conns_full). SL_OK on a new connection means queued: it goes out
 * when the connection is up, or is dropped and counted (dropped_out)
 * after `connect_grace_ms`. */
sl_err sl_net_send(sl_net_t *net, const char *addr, const uint8_t header[SL_WIRE_HEADER_LEN],
                   const uint8_t *body, size_t body_len);

/* Replies on the inbound connection `route` (to a client). Never blocks;
 * SL_EAGAIN when the client is gone or not reading (more than reply_hwm
 * parts waiting: send fewer, larger parts). */
sl_err sl_net_reply(sl_net_t *net, const sl_net_route_t *route,
                    const uint8_t header[SL_WIRE_HEADER_LEN], const uint8_t *body,
                    size_t body_len);

/* Sends header + body to another peer back on the inbound connection
 * `route` its request came in on (a membership ACK, NACK or SYNC reply):
 * the peer receives it on its outbound connection to us (on_outbound).
 * Counted as a message out. Never blocks; SL_EAGAIN, uncounted, when that
 * connection is gone or full: send it with sl_net_send instead. */
sl_err sl_net_send_back(sl_net_t *net, const sl_net_route_t *route,
                        const uint8_t header[SL_WIRE_HEADER_LEN], const uint8_t *body,
                        size_t body_len);

/* Waits up to `timeout_ms` (0: do not wait; -1: forever) for one inbound
 * message (on the ROUTER or an outbound DEALER), serving authentication
 * and retrying queued sends meanwhile. SL_OK with `*in` filled, or
 * SL_EAGAIN when none came (or a signal interrupted the wait). */
sl_err sl_net_poll(sl_net_t *net, int timeout_ms, sl_net_in_t *in);

/* Retires the outbound connection to `addr`, if open, and forgets its
 * connection to us (a member left or died): what waits to go out on it is
 * dropped, nothing more is sent on it, and it is closed after about a
 * second in which what the peer sent on it is still read. Sending to
 * `addr` again before then takes it back into use. */
void sl_net_disconnect(sl_net_t *net, const char *addr);

/* The member at `addr` came back (a restart): closes the outbound
 * connection to it, if open, and forgets its old connection to us. After
 * its old process died, ZeroMQ re-dials that connection with a growing
 * back-off (up to 2 s), and a message too large to go on the member's own
 * connection to us waited for it; the next send dials at once. What waits
 * to go out on it is dropped (it was meant for the old process). */
void sl_net_redial(sl_net_t *net, const char *addr);

/* Sets our own advertised address. Once set, the transport shares one
 * TCP connection per pair of peers (docs/transport.md, "One connection a
 * pair"): sl_net_note_inbound tells it which connections other peers
 * opened to us, and sl_net_send uses those instead of opening its own. */
void sl_net_set_self(sl_net_t *net, const char *addr);

/* The peer advertising `addr` sent us a well-formed message on its
 * connection `route` (an inbound message, not on_outbound): later sends to
 * `addr` may go on it. Ignored until sl_net_set_self. */
void sl_net_note_inbound(sl_net_t *net, const char *addr, const sl_net_route_t *route);

/* Pops the address of a peer whose connection to us (one noted with
 * sl_net_note_inbound) has closed, or whose outbound connection took
 * messages and then refused one: a hint that it may have died, for
 * membership to check at once (sl_swim_probe_soon). False when none. The
 * last SL_NET_LOST_MAX are kept. */
#define SL_NET_LOST_MAX 16
bool sl_net_next_lost(sl_net_t *net, char *addr, size_t cap);

/* Polls a plain descriptor (readable) with the sockets, for input that
 * does not come over the network: a pipe that threads write to. When it
 * is readable, sl_net_poll returns at once (a message, or SL_EAGAIN) and
 * sl_net_fd_ready says so. SL_EBUSY past SL_NET_MAX_WATCHES. */
#define SL_NET_MAX_WATCHES 4
sl_err sl_net_watch_fd(sl_net_t *net, int fd);
/* Whether the last poll saw `fd` (a watched one) readable; clears it. */
bool sl_net_fd_ready(sl_net_t *net, int fd);

/* A copy of the counters. */
void sl_net_stats(const sl_net_t *net, sl_net_stats_t *stats);

/* ---- The client side (peerctl) ---- */

typedef struct sl_net_client sl_net_client_t;

/* Connects a DEALER to the peer at `addr` ("HOST:PORT", "tcp://..." or
 * "ipc://PATH"), with Curve when `key` is not NULL (never on ipc://).
 * Connecting is asynchronous: this does not fail when no peer listens;
 * sl_net_client_recv then times out. */
sl_err sl_net_client_new(const char *addr, const sl_net_key_t *key, sl_net_client_t **out);
void sl_net_client_destroy(sl_net_client_t **client);

/* Sends one message; waits up to `timeout_ms` for the connection.
 * SL_ETIMEDOUT when it could not be sent in time. */
sl_err sl_net_client_send(sl_net_client_t *c, const uint8_t header[SL_WIRE_HEADER_LEN],
                          const uint8_t *body, size_t body_len, int timeout_ms);

/* Receives one message (header and body into buffers from sl_malloc that
 * the caller frees) within `timeout_ms`. SL_ETIMEDOUT when nothing came. */
sl_err sl_net_client_recv(sl_net_client_t *c, int timeout_ms, uint8_t **header,
                          size_t *header_len, uint8_t **body, size_t *body_len);

/* What the client saw of its connection, to explain a timeout. */
typedef enum {
    SL_NET_CLIENT_NEVER_CONNECTED = 0, /* no TCP connection was made */
    SL_NET_CLIENT_HANDSHAKE_FAILED,    /* connected, but security handshake failed */
    SL_NET_CLIENT_CONNECTED,           /* connected and handshake done */
    SL_NET_CLIENT_TCP_ONLY             /* connected, handshake never completed */
} sl_net_client_state;

sl_net_client_state sl_net_client_state_get(sl_net_client_t *c);

#ifdef __cplusplus
}
#endif
#endif
