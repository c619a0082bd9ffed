/* The ring all-reduce schedule: reduce-scatter then all-gather, each
 * segment in chunks that pipeline (include/starling/elastic.h,
 * docs/elastic.md "The all-reduce"). Pure: it says what to send, receive,
 * add or copy; the transport moves the bytes. */
#include <string.h>

#include "starling/elastic.h"

void sl_ring_segment(uint32_t world, uint64_t count, uint32_t seg, uint64_t *off,
                     uint64_t *len) {
    /* count * seg may not fit in 64 bits for huge buffers: split it */
    uint64_t q = count / world, r = count % world;
    uint64_t lo = q * seg + r * seg / world, hi = q * (seg + 1) + r * (seg + 1) / world;
    *off = lo;
    *len = hi - lo;
}

sl_err sl_ring_iter_init(sl_ring_iter_t *it, const sl_ring_cfg_t *cfg) {
    memset(it, 0, sizeof *it);
    if (cfg->world == 0 || cfg->rank >= cfg->world || cfg->chunk == 0)
        return SL_EINVAL;
    it->cfg = *cfg;
    uint64_t most = cfg->count / cfg->world + (cfg->count % cfg->world != 0);
    it->chunks = (most + cfg->chunk - 1) / cfg->chunk;
    return SL_OK;
}

/* Chunk c of segment `seg`: false when the segment has no such chunk. */
static bool chunk_of(const sl_ring_cfg_t *cfg, uint32_t seg, uint64_t c, uint64_t *off,
                     uint64_t *len) {
    uint64_t so, sl;
    sl_ring_segment(cfg->world, cfg->count, seg, &so, &sl);
    if (c * cfg->chunk >= sl)
        return false;
    *off = so + c * cfg->chunk;
    *len = sl - c * cfg->chunk < cfg->chunk ? sl - c * cfg->chunk : cfg->chunk;
    return true;
}

bool sl_ring_next(sl_ring_iter_t *it, sl_ring_op_t *op) {
    const sl_ring_cfg_t *cfg = &it->cfg;
    uint32_t w = cfg->world, steps = w > 1 ? 2 * (w - 1) : 0;
    while (it->step < steps) {
        uint32_t k = it->step;
        uint64_t c = it->chunk;
        if (++it->chunk >= it->chunks) {
            it->chunk = 0;
            it->step++;
        }
        memset(op, 0, sizeof *op);
        op->step = k;
        op->chunk = c;
        uint32_t r = cfg->rank, send_seg, recv_seg;
        if (k < w - 1) { /* reduce-scatter */
            send_seg = (uint32_t)((r + w - k % w) % w);
            recv_seg = (uint32_t)((r + 2 * w - k % w - 1) % w);
            op->reduce = true;
        } else {         /* all-gather */
            uint32_t g = k - (w - 1);
            send_seg = (uint32_t)((r + 1 + w - g % w) % w);
            recv_seg = (uint32_t)((r + w - g % w) % w);
            op->finalize = g == 0;
        }
        op->has_send = chunk_of(cfg, send_seg, c, &op->send_off, &op->send_len);
        op->has_recv = chunk_of(cfg, recv_seg, c, &op->recv_off, &op->recv_len);
        if (!op->has_send)
            op->finalize = false;
        if (op->has_send || op->has_recv)
            return true;
    }
    return false;
}
