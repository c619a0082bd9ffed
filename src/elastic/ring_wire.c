/* The ring's message header (src/elastic/ring_wire.h, proto/elastic.md
 * "The ring"): one place builds, reads and checks it for the ZeroMQ and
 * the TCP transport. Pure. */
#include <stdbool.h>
#include <string.h>

#include "base/le.h"
#include "base/why.h"
#include "elastic/ring_wire.h"

void sl_ring_hdr_put(uint8_t *p, const sl_ring_hdr_t *h) {
    sl_put64le(p, h->job);
    sl_put64le(p + 8, h->round);
    sl_put32le(p + 16, h->call);
    sl_put32le(p + 20, h->step);
    sl_put64le(p + 24, h->chunk);
}

void sl_ring_hdr_get(const uint8_t *p, sl_ring_hdr_t *h) {
    h->job = sl_get64le(p);
    h->round = sl_get64le(p + 8);
    h->call = sl_get32le(p + 16);
    h->step = sl_get32le(p + 20);
    h->chunk = sl_get64le(p + 24);
}

void sl_ring_frame_put(uint8_t *p, const sl_ring_hdr_t *h, uint64_t payload_len) {
    sl_ring_hdr_put(p, h);
    sl_put64le(p + SL_RING_LINK_HEADER_LEN, payload_len);
}

void sl_ring_frame_get(const uint8_t *p, sl_ring_hdr_t *h, uint64_t *payload_len) {
    sl_ring_hdr_get(p, h);
    *payload_len = sl_get64le(p + SL_RING_LINK_HEADER_LEN);
}

sl_err sl_ring_hdr_check(const sl_ring_hdr_t *got, bool got_hdr_ok, uint64_t got_len,
                         const sl_ring_hdr_t *want, uint64_t want_len, char *why,
                         size_t why_len) {
    if (got_hdr_ok && got->job == want->job && got->round == want->round &&
        got->call == want->call && got->step == want->step && got->chunk == want->chunk &&
        got_len == want_len)
        return SL_OK;
    sl_ring_hdr_t z = {0};
    const sl_ring_hdr_t *g = got_hdr_ok ? got : &z;
    return sl_why(why, why_len, SL_EPROTO,
                  "unexpected ring message: job %016llx round %llu call %u step %u chunk %llu "
                  "with %llu bytes, wanted job %016llx round %llu call %u step %u chunk %llu "
                  "with %llu",
                  (unsigned long long)g->job, (unsigned long long)g->round, g->call, g->step,
                  (unsigned long long)g->chunk, (unsigned long long)got_len,
                  (unsigned long long)want->job, (unsigned long long)want->round, want->call,
                  want->step, (unsigned long long)want->chunk, (unsigned long long)want_len);
}

sl_ring_greet_t sl_ring_greet_check(const sl_ring_hdr_t *got, uint64_t payload_len, uint64_t job,
                                    uint64_t round, uint32_t from, char *why, size_t why_len) {
    if (got->step != SL_RING_LINK_HELLO || got->call != 0 || payload_len != 0 ||
        got->round != round || got->chunk != from)
        return SL_RING_GREET_STRAY;
    if (got->job != job) {
        sl_why(why, why_len, SL_EPROTO,
               "unexpected ring message: a hello of job %016llx round %llu, wanted job %016llx "
               "round %llu",
               (unsigned long long)got->job, (unsigned long long)got->round,
               (unsigned long long)job, (unsigned long long)round);
        return SL_RING_GREET_FOREIGN;
    }
    return SL_RING_GREET_OK;
}
