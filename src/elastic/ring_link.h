/* The ring all-reduce's link: the I/O side of src/elastic/ring.c
 * (docs/elastic.md "The ring's transport", proto/elastic.md "The ring").
 *
 * Each rank of a world of W listens on its own endpoint and connects to
 * rank+1's: it sends to rank+1 and receives from rank-1. Two transports
 * carry the same messages (a 32-byte header: job, round, call, step,
 * chunk, little-endian, and the float32 payload, checked against what
 * sl_ring_next says this rank receives next):
 *   tcp  (src/elastic/ring_tcp.c) plain TCP, the socket I/O on the
 *        caller's thread, each payload received straight into the buffer
 *        (all-gather) or one scratch chunk (reduce-scatter); the default
 *        for a cluster without a key;
 *   zmq  (src/elastic/ring_zmq.c) a ZeroMQ DEALER/ROUTER pair, CurveZMQ
 *        with the cluster key's ZAP check: always for a keyed cluster.
 * The two-cursor pipelining, the adds and the call's end are one driver
 * (ring_link.c). Up to `window` messages are sent ahead of this rank's
 * receives; sends go straight from the caller's buffer (no copy). A call
 * ends when this rank has received everything and rank+1 said DONE (a
 * header-only message on the same connection, the other way): then
 * nothing of the caller's buffer is still on its way out.
 *
 * Any error ends the link: the sockets are closed at once (the buffer is
 * no longer referenced when sl_ring_link_allreduce returns, whatever it
 * returns) and every later call returns the same error. The caller turns
 * it into a world change:
 *   SL_EPROTO     a message that is not the one the schedule expects
 *                 (header, length, frame count)
 *   SL_ECLOSED    the connection to rank+1 or from rank-1 broke while
 *                 this rank still had something to send or receive
 *   SL_ETIMEDOUT  no progress for timeout_ms (a silent or stopped peer)
 *   SL_EAUTH      the CurveZMQ handshake with rank+1 failed (wrong key)
 * sl_ring_link_error says which, in words. */
#ifndef STARLING_ELASTIC_RING_LINK_H
#define STARLING_ELASTIC_RING_LINK_H

#include "elastic/ring_wire.h"
#include "starling/elastic.h"
#include "starling/net.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default bytes per message (docs/elastic.md, "Chunk and window"): over
 * ZeroMQ 256 KiB; over plain TCP 4 MiB, where a larger message costs no
 * extra copy and fewer wake-ups (W=4, 64 MiB: 1.03-1.07x gloo against
 * 0.89-1.03x with 256 KiB, bench/results/elastic.md). */
#define SL_RING_LINK_CHUNK_BYTES 262144
#define SL_RING_LINK_TCP_CHUNK_BYTES 4194304
#define SL_RING_LINK_WINDOW 1           /* default operations sent ahead of the receives */
#define SL_RING_LINK_TIMEOUT_MS 10000   /* default: no progress this long ends the link */

/* Which transport a link uses (sl_ring_link_cfg_t.transport). */
typedef enum {
    SL_RING_AUTO = 0, /* tcp without a key (zmq if STARLING_RING_TRANSPORT=zmq), zmq with one */
    SL_RING_ZMQ,      /* ZeroMQ (with or without a key) */
    SL_RING_TCP       /* plain TCP; a key is then SL_EINVAL (it would not encrypt) */
} sl_ring_transport_t;

typedef struct {
    uint64_t job;                  /* the job's id, hashed (sl_hash of its name) */
    uint64_t round;                /* the world's round */
    uint32_t world;                /* ranks, >= 1 */
    uint32_t rank;                 /* this rank, < world */
    const char *const *endpoints;  /* world entries, "tcp://host:port", in rank order */
    const char *bind;              /* where this rank listens; NULL: endpoints[rank] */
    const sl_net_key_t *key;       /* cluster key (CurveZMQ + ZAP), NULL when open */
    size_t chunk_bytes;            /* payload bytes per message (whole floats); 0: default */
    uint32_t window;               /* messages sent ahead of the receives, >= 1; 0: default */
    uint32_t timeout_ms;           /* no progress this long is SL_ETIMEDOUT; 0: default */
    sl_ring_transport_t transport; /* SL_RING_AUTO: by the key */
} sl_ring_link_cfg_t;

typedef struct sl_ring_link sl_ring_link_t;

/* Binds this rank's endpoint and starts the connection to rank+1 (it
 * completes later; the first all-reduce waits for it, within
 * timeout_ms). A world of one opens no socket. */
sl_err sl_ring_link_open(const sl_ring_link_cfg_t *cfg, sl_ring_link_t **out);

/* All-reduces `count` floats in place with every other rank of the world
 * (each calls it with the same count and divisor, in the same order of
 * calls): every rank ends with the element-wise sum divided by `divisor`
 * (the world size for an average, the step's sample count for a
 * sample-weighted mean, 1 for the sum), the same bits on every rank, the
 * bits of the in-memory schedule (tests/elastic_ring_test.c). */
sl_err sl_ring_link_allreduce(sl_ring_link_t *link, float *buf, uint64_t count, float divisor);

/* What ended the link, in words ("" while it works). */
const char *sl_ring_link_error(const sl_ring_link_t *link);

/* Ends the link from another thread: a call in progress (or the next)
 * returns SL_ECLOSED within about 50 ms, "left the world (asked to)". The
 * link stays valid until sl_ring_link_close (by the thread that calls
 * sl_ring_link_allreduce). */
void sl_ring_link_abort(sl_ring_link_t *link);

/* The default bytes per message of a transport (SL_RING_ZMQ or SL_RING_TCP). */
size_t sl_ring_link_default_chunk(sl_ring_transport_t transport);

/* The transport a link uses (SL_RING_ZMQ or SL_RING_TCP; a world of one
 * says what it would have used). */
sl_ring_transport_t sl_ring_link_transport(const sl_ring_link_t *link);

/* Test switch: this rank fails with SL_ECLOSED, its sockets closed, at
 * its `sends`-th send from now (a rank that dies mid-reduce). */
void sl_ring_link_test_die_after(sl_ring_link_t *link, uint64_t sends);

/* Closes the sockets and frees the link; NULL-safe, nulls *link. */
void sl_ring_link_close(sl_ring_link_t **link);

#ifdef __cplusplus
}
#endif

#endif
