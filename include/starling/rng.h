/* Seeded, reproducible pseudo-random numbers (xoshiro256**, seeded with
 * splitmix64). Every random choice in a protocol core or in training goes
 * through one of these, so a run is a function of its seed. */
#ifndef STARLING_RNG_H
#define STARLING_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint64_t s[4]; /* xoshiro256** state; never all zero */
} sl_rng_t;

void sl_rng_seed(sl_rng_t *rng, uint64_t seed);
uint64_t sl_rng_next(sl_rng_t *rng);
/* Uniform in [0, bound) without modulo bias; bound 0 returns 0. */
uint64_t sl_rng_below(sl_rng_t *rng, uint64_t bound);
/* Uniform double in [0, 1). */
double sl_rng_double(sl_rng_t *rng);
/* Standard normal (Box-Muller). */
double sl_rng_normal(sl_rng_t *rng);
/* splitmix64 step: a good 64-bit mixer, also for deriving seeds. */
uint64_t sl_mix64(uint64_t x);

#ifdef __cplusplus
}
#endif
#endif
