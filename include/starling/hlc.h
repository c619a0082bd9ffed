/* Hybrid logical clock (Kulkarni et al., "Logical Physical Clocks"): a
 * 64-bit timestamp that is close to wall-clock time, never goes backwards
 * and is causally ordered (a write that saw another gets a larger stamp).
 *
 * Layout: the high 48 bits are milliseconds since the Unix epoch, the low
 * 16 bits a logical counter. Pure: the caller passes the wall clock in.
 *
 *     sl_hlc_t c;
 *     sl_hlc_init(&c, 500);                  // accept at most 500 ms ahead
 *     uint64_t t = sl_hlc_now(&c, wall_ms);  // stamp a local event
 *     err = sl_hlc_update(&c, wall_ms, remote, sender_rid, &t);
 *     // SL_ERANGE: `remote` is more than 500 ms ahead of wall_ms; the
 *     // clock is unchanged, c.rejected counts it, c.last_offender names
 *     // the sender and HLC-REJECT is logged (one line per 10 s at most,
 *     // with the count of rejections not logged). */
#ifndef STARLING_HLC_H
#define STARLING_HLC_H

#include <stdint.h>

#include "starling/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_HLC_LOGICAL_BITS 16
#define SL_HLC_LOGICAL_MASK ((1u << SL_HLC_LOGICAL_BITS) - 1)

typedef struct {
    uint64_t last;          /* largest timestamp issued or seen */
    uint64_t max_offset_ms; /* remote stamps further ahead are rejected */
    uint64_t rejected;      /* remote stamps rejected so far */
    uint64_t last_offender; /* sender id of the latest rejected stamp */
    sl_log_limit_t reject_log; /* HLC-REJECT: a line per SL_HLC_LOG_EVERY_MS */
} sl_hlc_t;

#define SL_HLC_LOG_EVERY_MS 10000 /* at most one HLC-REJECT line per 10 s */

/* Starts a clock that rejects remote stamps more than `max_offset_ms`
 * ahead of the local wall clock (0 means 500 ms). */
void sl_hlc_init(sl_hlc_t *c, uint64_t max_offset_ms);

/* Timestamp for a local event at wall time `wall_ms`: larger than every
 * stamp issued or seen before. */
uint64_t sl_hlc_now(sl_hlc_t *c, uint64_t wall_ms);

/* Merges a remote stamp (receive event) sent by `sender`; `*out` (may be
 * NULL) gets the new local stamp. SL_ERANGE if `remote` is more than
 * max_offset_ms ahead of `wall_ms`: then nothing changes but the counters. */
sl_err sl_hlc_update(sl_hlc_t *c, uint64_t wall_ms, uint64_t remote, uint64_t sender,
                     uint64_t *out);

/* Builds a stamp from milliseconds and a logical count, and takes it apart. */
static inline uint64_t sl_hlc_make(uint64_t ms, uint32_t logical) {
    return (ms << SL_HLC_LOGICAL_BITS) | (logical & SL_HLC_LOGICAL_MASK);
}
static inline uint64_t sl_hlc_ms(uint64_t t) { return t >> SL_HLC_LOGICAL_BITS; }

#ifdef __cplusplus
}
#endif
#endif
