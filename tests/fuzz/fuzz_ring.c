/* libFuzzer target for what a rank of the ring reads from a connection
 * (src/elastic/ring_wire.c, proto/elastic.md "The ring"): the decoder of
 * the TCP frames' 40-byte prefix, the greeting check and the header check
 * the TCP transport (src/elastic/ring_tcp.c) makes, walked as a rank
 * receives, against the schedule (sl_ring_next).
 *
 * Input: byte 0: the world (2 + b % 3); byte 1: the rank (% world); bytes
 * 2-3: the count of floats (u16 LE); byte 4: floats per chunk (1 + b);
 * then the stream from rank-1: its first frame (the greeting), then for
 * each receive of the schedule a frame and its payload.
 * tests/fuzz/corpus/ring/ holds seeds in this layout (a whole call of a
 * world of 2 and of 3, a stale round's hello, a stranger's bytes).
 *
 * What must hold: no crash or sanitizer report; every prefix encodes back
 * to its bytes; the greeting is accepted only for rank-1's HELLO of this
 * job and round; a frame passes the check only when it is exactly what
 * the schedule expects, its payload no longer than the schedule says;
 * every refusal says "unexpected ring message". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elastic/ring_wire.h"
#include "starling/elastic.h"

#define JOB 0x5157a11eull
#define ROUND 7u

static void fail(const char *what) {
    fprintf(stderr, "fuzz_ring: property broken: %s\n", what);
    abort();
}

/* The 40 bytes at p decode and encode back to themselves. */
static void frame(const uint8_t *p, sl_ring_hdr_t *h, uint64_t *len) {
    uint8_t again[SL_RING_WIRE_FRAME_LEN];
    sl_ring_frame_get(p, h, len);
    sl_ring_frame_put(again, h, *len);
    if (memcmp(again, p, sizeof again) != 0)
        fail("a frame prefix does not encode back to its bytes");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 5)
        return 0;
    uint32_t world = 2 + data[0] % 3, rank = data[1] % world;
    uint64_t count = (uint64_t)data[2] | (uint64_t)data[3] << 8;
    uint64_t chunk = 1 + (uint64_t)data[4];
    const uint8_t *p = data + 5, *end = data + size;
    uint32_t prev = (rank + world - 1) % world;
    char why[200];

    /* the greeting */
    if (end - p < SL_RING_WIRE_FRAME_LEN)
        return 0;
    sl_ring_hdr_t h;
    uint64_t len;
    frame(p, &h, &len);
    p += SL_RING_WIRE_FRAME_LEN;
    why[0] = '\0';
    switch (sl_ring_greet_check(&h, len, JOB, ROUND, prev, why, sizeof why)) {
    case SL_RING_GREET_STRAY:
        return 0;
    case SL_RING_GREET_FOREIGN:
        if (h.job == JOB || h.round != ROUND || h.chunk != prev ||
            !strstr(why, "unexpected ring message"))
            fail("a foreign hello that is not rank-1's of another job, or says nothing");
        return 0;
    case SL_RING_GREET_OK:
        if (h.step != SL_RING_LINK_HELLO || h.job != JOB || h.round != ROUND || h.chunk != prev ||
            h.call != 0 || len != 0)
            fail("a greeting accepted that is not rank-1's hello of this job and round");
        break;
    }

    /* the call's messages, as the schedule receives them */
    sl_ring_cfg_t cfg = {.world = world, .rank = rank, .count = count, .chunk = chunk};
    sl_ring_iter_t it;
    sl_ring_op_t op;
    if (sl_ring_iter_init(&it, &cfg) != SL_OK)
        fail("a valid schedule refused");
    while (sl_ring_next(&it, &op)) {
        if (!op.has_recv)
            continue;
        if (end - p < SL_RING_WIRE_FRAME_LEN)
            return 0;
        frame(p, &h, &len);
        p += SL_RING_WIRE_FRAME_LEN;
        sl_ring_hdr_t want = {.job = JOB, .round = ROUND, .call = 0, .step = op.step,
                              .chunk = op.chunk};
        uint64_t want_len = op.recv_len * sizeof(float);
        why[0] = '\0';
        if (sl_ring_hdr_check(&h, true, len, &want, want_len, why, sizeof why) != SL_OK) {
            if (!strstr(why, "unexpected ring message") || !memchr(why, '\0', sizeof why))
                fail("a refused frame's text does not say so");
            return 0;
        }
        if (memcmp(&h, &want, sizeof h) != 0 || len != want_len)
            fail("a frame passed that is not the one the schedule expects");
        if (len > chunk * sizeof(float))
            fail("a payload longer than a chunk passed");
        if ((uint64_t)(end - p) < len)
            return 0;
        p += len;
    }
    return 0;
}
