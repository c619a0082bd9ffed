/* What a ring transport gives the link's driver (src/elastic/ring_link.c):
 * one table of operations per transport, chosen at open (ring_zmq.c,
 * ring_tcp.c). The driver owns the schedule's two cursors, the adds, the
 * deadline and abort; a transport moves one message at a time and says
 * what went wrong in `why` (the driver ends the link with it).
 *
 * Every operation but close returns SL_OK (done, or something moved),
 * SL_EAGAIN (nothing now) or the error that ends the link. */
#ifndef STARLING_ELASTIC_RING_TRANSPORT_H
#define STARLING_ELASTIC_RING_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "elastic/ring_link.h"

typedef struct {
    /* Listens and starts the connection to rank+1 (world >= 2). */
    sl_err (*open)(const sl_ring_link_cfg_t *cfg, size_t chunk_bytes, void **t, char *why,
                   size_t why_len);
    /* Closes every socket at once and frees; NULL-safe, nulls *t. After
     * it the transport holds nothing of the caller's buffer. */
    void (*close)(void **t);
    /* Connections and the greeting, both ways: SL_OK when something moved;
     * *ready once rank+1 welcomed this link (data may go). */
    sl_err (*pump)(void *t, bool *ready, char *why, size_t why_len);
    /* Sends one message: the 32-byte header, then `len` payload bytes from
     * the caller's buffer (still referenced after SL_OK until the call's
     * DONE: the schedule does not write a region before what was sent from
     * it went round). SL_EAGAIN: not now (the message before is still
     * going out); nothing was taken. */
    sl_err (*send)(void *t, const uint8_t *hdr, const void *p, size_t len, char *why,
                   size_t why_len);
    /* Receives the message the schedule expects next, `want` with `len`
     * payload bytes; SL_OK when it is whole: *src NULL when the payload
     * went straight into `dst` (allowed when `direct`), else the bytes to
     * apply (valid until the next call). SL_EPROTO for any other message. */
    sl_err (*recv)(void *t, const sl_ring_hdr_t *want, size_t len, void *dst, bool direct,
                   const uint8_t **src, char *why, size_t why_len);
    /* A connection the call still needs is gone (sending: to rank+1;
     * receiving: from rank-1): the error, else SL_OK. */
    sl_err (*check)(void *t, bool sending, bool receiving, char *why, size_t why_len);
    /* Waits at most `timeout_ms` for something to move; `finishing`: for
     * rank+1's DONE alone (what else comes waits for the next call). */
    sl_err (*wait)(void *t, int timeout_ms, bool finishing, char *why, size_t why_len);
    /* The call's end: DONE (a header) to rank-1, then rank+1's DONE,
     * `done`: SL_OK once it came, SL_EAGAIN not yet, SL_ECLOSED when the
     * connection to rank+1 broke first. */
    sl_err (*done_send)(void *t, const uint8_t *done, char *why, size_t why_len);
    sl_err (*done_recv)(void *t, const uint8_t *done, char *why, size_t why_len);
    /* Optional: a likelier cause of `err` than the text says (the zmq
     * link: a failed handshake from rank-1's side means a wrong key);
     * returns the error to report and writes a prefix for the text. */
    sl_err (*blame)(void *t, sl_err err, char *prefix, size_t prefix_len);
} sl_ring_ops_t;

extern const sl_ring_ops_t sl_ring_zmq_ops; /* ring_zmq.c */
extern const sl_ring_ops_t sl_ring_tcp_ops; /* ring_tcp.c */

#endif
