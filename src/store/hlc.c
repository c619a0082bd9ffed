/* Hybrid logical clock: see include/starling/hlc.h. */
#include "starling/hlc.h"

#include <inttypes.h>
#include <stdio.h>

void sl_hlc_init(sl_hlc_t *c, uint64_t max_offset_ms) {
    c->last = 0;
    c->max_offset_ms = max_offset_ms ? max_offset_ms : 500;
    c->rejected = 0;
    c->last_offender = 0;
    c->reject_log = (sl_log_limit_t){0};
}

/* Next stamp after max(last, wall): the physical part follows the wall
 * clock when it is ahead, else the logical counter grows (and carries into
 * the millisecond part if it ever overflows, so stamps stay monotonic). */
static uint64_t advance(uint64_t last, uint64_t wall_ms) {
    uint64_t phys = sl_hlc_make(wall_ms, 0);
    return phys > last ? phys : last + 1;
}

uint64_t sl_hlc_now(sl_hlc_t *c, uint64_t wall_ms) {
    c->last = advance(c->last, wall_ms);
    return c->last;
}

sl_err sl_hlc_update(sl_hlc_t *c, uint64_t wall_ms, uint64_t remote, uint64_t sender,
                     uint64_t *out) {
    if (sl_hlc_ms(remote) > wall_ms + c->max_offset_ms) {
        c->rejected++;
        c->last_offender = sender;
        /* one line per SL_HLC_LOG_EVERY_MS: a peer whose clock is off (or
         * that forges stamps) sends one per message */
        uint64_t left_out;
        if (!sl_log_limit(&c->reject_log, wall_ms, SL_HLC_LOG_EVERY_MS, &left_out))
            return SL_ERANGE;
        char more[64] = "";
        if (left_out)
            snprintf(more, sizeof more, " (%" PRIu64 " more rejected in the %u s before)",
                     left_out, SL_HLC_LOG_EVERY_MS / 1000);
        sl_log(SL_LOG_WARNING, "HLC-REJECT",
               "timestamp from %016" PRIx64 " is %" PRIu64 " ms ahead of local time"
               " (limit %" PRIu64 " ms): check that peer's clock%s",
               sender, sl_hlc_ms(remote) - wall_ms, c->max_offset_ms, more);
        return SL_ERANGE;
    }
    uint64_t base = remote > c->last ? remote : c->last;
    c->last = advance(base, wall_ms);
    if (out)
        *out = c->last;
    return SL_OK;
}
