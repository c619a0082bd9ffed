/* Pareto fronts: fast non-dominated sorting and crowding distance
 * (Deb et al., NSGA-II), over points with objectives in either direction.
 * NaN is the worst value of its objective. Deterministic: ties are broken
 * by index, never by memory order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "starling/study.h"

/* The value to minimise. */
static double cost(double v, bool maximize) {
    if (isnan(v))
        return INFINITY;
    return maximize ? -v : v;
}

bool sl_pareto_dominates(const double *a, const double *b, int dims, const bool *maximize) {
    bool better = false;
    for (int d = 0; d < dims; d++) {
        double x = cost(a[d], maximize[d]), y = cost(b[d], maximize[d]);
        if (x > y)
            return false;
        if (x < y)
            better = true;
    }
    return better;
}

sl_err sl_pareto_rank(const double *points, size_t count, int dims, const bool *maximize,
                      int *rank_out) {
    if (count == 0)
        return SL_OK;
    if (dims < 1 || dims > SL_STUDY_MAX_OBJECTIVES)
        return SL_EINVAL;
    /* Peel fronts: O(fronts x n^2) time, O(n) memory (a dominance matrix
     * would be n^2 bytes: 10 GB at 100,000 trials). */
    size_t *left = sl_malloc(count * sizeof *left);
    uint8_t *in_front = sl_malloc(count);
    if (!left || !in_front) {
        sl_free(left);
        sl_free(in_front);
        return SL_ENOMEM;
    }
    size_t n = count;
    for (size_t i = 0; i < count; i++)
        left[i] = i;
    for (int r = 0; n > 0; r++) {
        for (size_t a = 0; a < n; a++) {
            in_front[a] = 1;
            for (size_t b = 0; b < n; b++)
                if (b != a && sl_pareto_dominates(points + left[b] * (size_t)dims,
                                                  points + left[a] * (size_t)dims, dims,
                                                  maximize)) {
                    in_front[a] = 0;
                    break;
                }
        }
        size_t m = 0;
        for (size_t a = 0; a < n; a++) {
            if (in_front[a])
                rank_out[left[a]] = r;
            else
                left[m++] = left[a];
        }
        n = m;
    }
    sl_free(left);
    sl_free(in_front);
    return SL_OK;
}

/* qsort context for crowding (C11 has no qsort_r): a static is fine since
 * the cores are called from one thread per peer; use indexes + insertion
 * sort instead to stay reentrant. */
static void sort_by(size_t *idx, size_t n, const double *points, int dims, int d) {
    for (size_t i = 1; i < n; i++) {
        size_t x = idx[i];
        double v = points[x * (size_t)dims + d];
        size_t j = i;
        while (j > 0) {
            size_t y = idx[j - 1];
            double w = points[y * (size_t)dims + d];
            /* NaN sorts last; ties by index */
            bool gt = isnan(w) ? !isnan(v) || y > x : (!isnan(v) && (w > v || (w == v && y > x)));
            if (!gt)
                break;
            idx[j] = y;
            j--;
        }
        idx[j] = x;
    }
}

sl_err sl_pareto_crowding(const double *points, size_t count, int dims, const int *rank,
                          double *crowd_out) {
    if (count == 0)
        return SL_OK;
    size_t *idx = sl_malloc(count * sizeof *idx);
    if (!idx)
        return SL_ENOMEM;
    for (size_t i = 0; i < count; i++)
        crowd_out[i] = 0;
    int max_rank = 0;
    for (size_t i = 0; i < count; i++)
        if (rank[i] > max_rank)
            max_rank = rank[i];
    for (int r = 0; r <= max_rank; r++) {
        size_t n = 0;
        for (size_t i = 0; i < count; i++)
            if (rank[i] == r)
                idx[n++] = i;
        if (n == 0)
            continue;
        for (int d = 0; d < dims; d++) {
            sort_by(idx, n, points, dims, d);
            double lo = points[idx[0] * (size_t)dims + d];
            double hi = points[idx[n - 1] * (size_t)dims + d];
            crowd_out[idx[0]] = INFINITY;
            crowd_out[idx[n - 1]] = INFINITY;
            double span = hi - lo;
            if (!(span > 0) || !isfinite(span))
                continue;
            for (size_t k = 1; k + 1 < n; k++) {
                double a = points[idx[k - 1] * (size_t)dims + d];
                double b = points[idx[k + 1] * (size_t)dims + d];
                if (isfinite(a) && isfinite(b))
                    crowd_out[idx[k]] += (b - a) / span;
            }
        }
    }
    sl_free(idx);
    return SL_OK;
}

size_t sl_pareto_front(const double *points, size_t count, int dims, const bool *maximize,
                       size_t *out) {
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        bool dominated = false;
        for (size_t j = 0; j < count && !dominated; j++)
            if (j != i && sl_pareto_dominates(points + j * (size_t)dims,
                                              points + i * (size_t)dims, dims, maximize))
                dominated = true;
        if (!dominated)
            out[n++] = i;
    }
    return n;
}
