/* Weight initialisation: seeded uniform draws with He and Xavier bounds. */
#include <math.h>

#include "nn/nn_internal.h"

void sl_nn_init_uniform(sl_rng_t *rng, float *w, size_t count, float bound) {
    for (size_t i = 0; i < count; i++)
        w[i] = (float)((2.0 * sl_rng_double(rng) - 1.0) * bound);
}

float sl_nn_init_he_bound(size_t fan_in) {
    return (float)sqrt(6.0 / (double)(fan_in ? fan_in : 1));
}

float sl_nn_init_xavier_bound(size_t fan_in, size_t fan_out) {
    size_t s = fan_in + fan_out;
    return (float)sqrt(6.0 / (double)(s ? s : 1));
}
