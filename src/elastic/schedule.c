/* The data-parallel step schedule of an elastic job: one shuffled order
 * per epoch, a cursor that is a function of the step, and each step's
 * global batch cut into contiguous slices by rank (include/starling/
 * elastic.h, docs/elastic.md "The step schedule"). Pure. */
#include <string.h>

#include "elastic_internal.h"
#include "starling/elastic.h"
#include "starling/rng.h"

static bool valid(const sl_elastic_sched_t *s) {
    return s->sample_count > 0 && s->sample_count <= UINT32_MAX && s->global_batch > 0;
}

uint64_t sl_elastic_steps_per_epoch(const sl_elastic_sched_t *s) {
    if (!valid(s))
        return 0;
    return (s->sample_count + s->global_batch - 1) / s->global_batch;
}

sl_err sl_elastic_batch(const sl_elastic_sched_t *s, uint64_t step, uint32_t rank,
                        uint32_t world, sl_elastic_batch_t *out) {
    memset(out, 0, sizeof *out);
    if (!valid(s) || world == 0 || rank >= world)
        return SL_EINVAL;
    uint64_t per_epoch = sl_elastic_steps_per_epoch(s);
    out->epoch = step / per_epoch;
    out->cursor = (step % per_epoch) * s->global_batch;
    out->total = s->sample_count - out->cursor;
    if (out->total > s->global_batch)
        out->total = s->global_batch;
    uint64_t lo = out->total * rank / world, hi = out->total * (rank + 1) / world;
    if (sl_elastic_bug_now() == SL_ELASTIC_BUG_EVEN_SLICES) {
        lo = out->total / world * rank;
        hi = lo + out->total / world;
    }
    out->offset = out->cursor + lo;
    out->count = hi - lo;
    return SL_OK;
}

sl_err sl_elastic_epoch_order(const sl_elastic_sched_t *s, uint64_t epoch, uint32_t *order) {
    if (!valid(s))
        return SL_EINVAL;
    uint64_t n = s->sample_count;
    for (uint64_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    sl_rng_t rng;
    sl_rng_seed(&rng, sl_mix64(s->seed ^ 0x65706f6368ull) ^ sl_mix64(epoch + 1)); /* "epoch" */
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = sl_rng_below(&rng, i + 1);
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    return SL_OK;
}
