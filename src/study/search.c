/* Searchers: what the trial with proposal index `ordinal` trains.
 *
 * Each is a pure function of (spec, ordinal, trials seen): every random
 * choice comes from an RNG seeded by the study seed, the ordinal and an
 * attempt counter, and the trials seen are put in ordinal order before
 * use, so two leaders with the same view propose the same configuration,
 * whatever order their stores listed the trials in.
 *
 *   random     independent samples, re-drawn (up to 64 times) when equal
 *              to an earlier trial's configuration
 *   grid       the ordinal-th point of the grid; exhausted past its end
 *   evolution  NSGA-II style: the elite of the results seen by
 *              non-dominated rank then crowding, binary tournaments,
 *              crossover and mutation. Generational: generation g (the
 *              ordinals g*P .. g*P+P-1) is bred from the final results of
 *              the generations before it and waits for them (SL_EAGAIN);
 *              asynchronous: from whatever has finished. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "starling/study.h"

#define DEDUP_ATTEMPTS 64

static void seed_rng(sl_rng_t *rng, uint64_t seed, uint64_t ordinal, uint64_t attempt) {
    sl_rng_seed(rng, sl_mix64(sl_mix64(seed ^ 0x5ea2c4ULL) ^ ordinal) + attempt * 0x9e3779b97f4a7c15ULL);
}

/* The trials seen, in two parts (the view, and what the caller proposed
 * since), read as one list: a scheduler need not copy the whole view to
 * add its proposals. */
typedef struct {
    const sl_trial_t *a; /* first part */
    size_t na;           /* its entries */
    const sl_trial_t *b; /* second part */
    size_t nb;           /* its entries */
} seen_t;

static const sl_trial_t *seen_at(const seen_t *s, size_t i) {
    return i < s->na ? &s->a[i] : &s->b[i - s->na];
}

/* Is cfg equal to the config of a seen trial with an ordinal below `ordinal`? */
static bool seen_before(const sl_study_spec_t *spec, const seen_t *seen, uint64_t ordinal,
                        const sl_config_t *cfg) {
    for (size_t i = 0; i < seen->na + seen->nb; i++) {
        const sl_trial_t *t = seen_at(seen, i);
        if (t->ordinal < ordinal && sl_space_equal(spec, &t->config, cfg))
            return true;
    }
    return false;
}

static void random_next(const sl_study_spec_t *spec, uint64_t ordinal, const seen_t *seen,
                        sl_config_t *out) {
    sl_rng_t rng;
    for (int a = 0; a < DEDUP_ATTEMPTS; a++) {
        seed_rng(&rng, spec->seed, ordinal, (uint64_t)a);
        sl_space_sample(spec, &rng, out);
        if (!seen_before(spec, seen, ordinal, out))
            return;
    }
}

static bool is_final(sl_trial_state s) { return s == SL_TRIAL_DONE || s == SL_TRIAL_FAILED; }

/* A parent candidate: final, or (asynchronous) paused at a rung with a
 * result of lower fidelity. */
static bool is_parent(const sl_study_spec_t *spec, sl_trial_state s) {
    return is_final(s) || (!spec->generational && s == SL_TRIAL_PAUSED);
}

/* Parent pool entry: index into seen, rank, crowding. */
typedef struct {
    size_t idx;   /* into seen */
    int rank;     /* non-dominated rank */
    double crowd; /* crowding distance */
} parent_t;

/* Sorts by (rank, -crowding, ordinal) with an insertion sort (no global
 * state, so peers may run searchers on several threads). */
static void sort_parents(parent_t *p, size_t n, const seen_t *seen) {
    for (size_t i = 1; i < n; i++) {
        parent_t x = p[i];
        size_t j = i;
        while (j > 0) {
            const parent_t *y = &p[j - 1];
            bool after = y->rank > x.rank ||
                         (y->rank == x.rank &&
                          (y->crowd < x.crowd ||
                           (y->crowd == x.crowd &&
                            seen_at(seen, y->idx)->ordinal > seen_at(seen, x.idx)->ordinal)));
            if (!after)
                break;
            p[j] = *y;
            j--;
        }
        p[j] = x;
    }
}

static sl_err evolution_next(const sl_study_spec_t *spec, uint64_t ordinal, const seen_t *sv,
                             sl_config_t *out) {
    uint64_t P = (uint64_t)spec->population;
    uint64_t gen = ordinal / P;
    size_t n = sv->na + sv->nb;
    if (gen == 0) {
        random_next(spec, ordinal, sv, out);
        return SL_OK;
    }
    /* the parent pool */
    size_t pool_n = 0, before = 0;
    for (size_t i = 0; i < n; i++) {
        const sl_trial_t *t = seen_at(sv, i);
        bool eligible = spec->generational ? t->ordinal < gen * P : t->ordinal < ordinal;
        if (!eligible)
            continue;
        before++;
        if (is_parent(spec, t->state))
            pool_n++;
    }
    if (spec->generational && (before < gen * P || pool_n < before))
        return SL_EAGAIN; /* the previous generations are not all final */
    if (pool_n < 2) {
        random_next(spec, ordinal, sv, out);
        return SL_OK;
    }
    parent_t *pool = sl_malloc(pool_n * sizeof *pool);
    double *pts = sl_malloc(pool_n * (size_t)spec->objective_count * sizeof *pts);
    int *rank = sl_malloc(pool_n * sizeof *rank);
    double *crowd = sl_malloc(pool_n * sizeof *crowd);
    sl_err err = SL_ENOMEM;
    if (!pool || !pts || !rank || !crowd)
        goto fail;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const sl_trial_t *t = seen_at(sv, i);
        bool eligible = spec->generational ? t->ordinal < gen * P : t->ordinal < ordinal;
        if (eligible && is_parent(spec, t->state))
            pool[k++].idx = i;
    }
    /* ordinal order first, so ranks and crowding see the same sequence */
    for (size_t i = 1; i < pool_n; i++) {
        parent_t x = pool[i];
        size_t j = i;
        while (j > 0 && seen_at(sv, pool[j - 1].idx)->ordinal > seen_at(sv, x.idx)->ordinal) {
            pool[j] = pool[j - 1];
            j--;
        }
        pool[j] = x;
    }
    bool maximize[SL_STUDY_MAX_OBJECTIVES];
    int dims = spec->objective_count;
    for (int d = 0; d < dims; d++)
        maximize[d] = spec->objectives[d].maximize;
    for (size_t i = 0; i < pool_n; i++)
        for (int d = 0; d < dims; d++) {
            const sl_trial_t *t = seen_at(sv, pool[i].idx);
            pts[i * (size_t)dims + d] = t->state == SL_TRIAL_FAILED ? NAN : t->objectives[d];
        }
    if ((err = sl_pareto_rank(pts, pool_n, dims, maximize, rank)) ||
        (err = sl_pareto_crowding(pts, pool_n, dims, rank, crowd)))
        goto fail;
    for (size_t i = 0; i < pool_n; i++) {
        pool[i].rank = rank[i];
        pool[i].crowd = crowd[i];
    }
    sort_parents(pool, pool_n, sv);
    size_t elite = pool_n < P ? pool_n : (size_t)P;
    sl_rng_t rng;
    for (int a = 0; a < DEDUP_ATTEMPTS; a++) {
        seed_rng(&rng, spec->seed, ordinal, (uint64_t)a);
        /* binary tournament: the lower position in the sorted elite wins */
        size_t x = sl_rng_below(&rng, elite), y = sl_rng_below(&rng, elite);
        size_t pa = x < y ? x : y;
        sl_config_t child = seen_at(sv, pool[pa].idx)->config;
        if (sl_rng_double(&rng) < spec->crossover_rate) {
            x = sl_rng_below(&rng, elite);
            y = sl_rng_below(&rng, elite);
            size_t pb = x < y ? x : y;
            sl_space_crossover(spec, &rng, &child, &seen_at(sv, pool[pb].idx)->config, &child);
        }
        sl_space_mutate(spec, &rng, spec->mutation_rate, &child);
        *out = child;
        if (!seen_before(spec, sv, ordinal, &child))
            break;
    }
    err = SL_OK;
fail:
    sl_free(pool);
    sl_free(pts);
    sl_free(rank);
    sl_free(crowd);
    return err;
}

sl_err sl_search_next2(const sl_study_spec_t *spec, uint64_t ordinal, const sl_trial_t *seen,
                       size_t seen_count, const sl_trial_t *more, size_t more_count,
                       sl_config_t *out) {
    seen_t sv = {seen, seen ? seen_count : 0, more, more ? more_count : 0};
    switch (spec->searcher) {
    case SL_SEARCH_RANDOM:
        random_next(spec, ordinal, &sv, out);
        return SL_OK;
    case SL_SEARCH_GRID:
        return sl_space_grid_point(spec, ordinal, out);
    case SL_SEARCH_EVOLUTION:
        return evolution_next(spec, ordinal, &sv, out);
    }
    return SL_EINVAL;
}

sl_err sl_search_next(const sl_study_spec_t *spec, uint64_t ordinal, const sl_trial_t *seen,
                      size_t seen_count, sl_config_t *out) {
    return sl_search_next2(spec, ordinal, seen, seen_count, NULL, 0, out);
}
