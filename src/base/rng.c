/* xoshiro256** seeded through splitmix64 (Blackman and Vigna). */
#include <math.h>

#include "starling/rng.h"

uint64_t sl_mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void sl_rng_seed(sl_rng_t *rng, uint64_t seed) {
    for (int i = 0; i < 4; i++) {
        seed = sl_mix64(seed);
        rng->s[i] = seed;
    }
    if (!(rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3]))
        rng->s[0] = 1;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sl_rng_next(sl_rng_t *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t sl_rng_below(sl_rng_t *rng, uint64_t bound) {
    if (bound == 0)
        return 0;
    uint64_t threshold = -bound % bound; /* reject the biased low range */
    for (;;) {
        uint64_t r = sl_rng_next(rng);
        if (r >= threshold)
            return r % bound;
    }
}

double sl_rng_double(sl_rng_t *rng) { return (sl_rng_next(rng) >> 11) * 0x1.0p-53; }

double sl_rng_normal(sl_rng_t *rng) {
    double u1 = sl_rng_double(rng), u2 = sl_rng_double(rng);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
