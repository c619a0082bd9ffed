/* The ring's message header, built and checked in one place for both
 * transports (src/elastic/ring_wire.c; proto/elastic.md "The ring").
 * Pure: bytes in, verdict and text out; fuzzed by tests/fuzz/fuzz_ring.c.
 *
 * A header is 32 bytes, little-endian: job u64, round u64, call u32,
 * step u32, chunk u64. Over ZeroMQ it is a message's first frame; over
 * plain TCP a frame is the header then the payload's length in bytes
 * (u64), 40 bytes, then the payload. */
#ifndef STARLING_ELASTIC_RING_WIRE_H
#define STARLING_ELASTIC_RING_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"

#define SL_RING_LINK_HEADER_LEN 32       /* bytes of a message's header */
#define SL_RING_WIRE_FRAME_LEN 40        /* a TCP frame's prefix: header, payload length */
#define SL_RING_LINK_DONE 0xffffffffu    /* the step of a call's DONE (rank+1 to rank) */
#define SL_RING_LINK_HELLO 0xfffffffeu   /* the step of a HELLO (rank to rank+1, each connection) */
#define SL_RING_LINK_WELCOME 0xfffffffdu /* the step of its answer (rank+1 to rank) */

typedef struct {
    uint64_t job;   /* the job's id, hashed */
    uint64_t round; /* the world's round */
    uint32_t call;  /* all-reduces on the link before this one */
    uint32_t step;  /* the schedule's step, or DONE / HELLO / WELCOME */
    uint64_t chunk; /* the chunk; a TCP HELLO's sender rank, a WELCOME's */
} sl_ring_hdr_t;

/* Writes `h` as 32 bytes at `p`. */
void sl_ring_hdr_put(uint8_t *p, const sl_ring_hdr_t *h);

/* Reads 32 bytes at `p`. */
void sl_ring_hdr_get(const uint8_t *p, sl_ring_hdr_t *h);

/* A TCP frame's 40-byte prefix: header and payload length. */
void sl_ring_frame_put(uint8_t *p, const sl_ring_hdr_t *h, uint64_t payload_len);
void sl_ring_frame_get(const uint8_t *p, sl_ring_hdr_t *h, uint64_t *payload_len);

/* Whether a received message, `got` with `got_len` payload bytes (the
 * header `got_hdr_ok` false when its frame was not 32 bytes), is the one
 * the schedule expects, `want` with `want_len`: SL_OK, or SL_EPROTO with
 * "unexpected ring message: ... wanted ..." in `why`. */
sl_err sl_ring_hdr_check(const sl_ring_hdr_t *got, bool got_hdr_ok, uint64_t got_len,
                         const sl_ring_hdr_t *want, uint64_t want_len, char *why,
                         size_t why_len);

/* What a TCP connection's first frame to a rank is (the greeting of
 * rank `from` of `job` and `round`): */
typedef enum {
    SL_RING_GREET_OK = 0, /* rank-1's HELLO: welcome it */
    SL_RING_GREET_STRAY,  /* not a HELLO of this round's rank-1 (an older round, a stranger):
                             drop the connection */
    SL_RING_GREET_FOREIGN /* rank-1's HELLO of this round but another job: a protocol error */
} sl_ring_greet_t;

/* Classifies a first frame (its 40 bytes read as sl_ring_frame_get did);
 * for SL_RING_GREET_FOREIGN, `why` says what came and what was wanted. */
sl_ring_greet_t sl_ring_greet_check(const sl_ring_hdr_t *got, uint64_t payload_len, uint64_t job,
                                    uint64_t round, uint32_t from, char *why, size_t why_len);

#endif
