/* The cpu backend's sparse-operand matrix product (cpu_sparse.c): what
 * backend_cpu.c needs to hand a product with a mostly-zero operand to it
 * instead of OpenBLAS. Not a public API. */
#ifndef STARLING_NN_CPU_SPARSE_H
#define STARLING_NN_CPU_SPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One product O[M][N] (+)= S[M][K] * D[K][N] where S has many zeros.
 * Each of S, D and O is a row-major matrix or the transpose of one
 * (S[i][k] = s[k*lds + i] when s_trans, and so on), which covers both
 * C = op(A) op(B) with A sparse (S = op(A), D = op(B), O = C) and with B
 * sparse (S = op(B)^T, D = op(A)^T, O = C^T). */
typedef struct {
    int M, N, K;        /* logical sizes */
    const float *s;     /* sparse operand */
    int lds;            /* its row stride */
    bool s_trans;       /* s holds S^T */
    const float *d;     /* dense operand */
    int ldd;            /* its row stride */
    bool d_trans;       /* d holds D^T */
    float *o;           /* output */
    int ldo;            /* its row stride */
    bool o_trans;       /* o holds O^T */
    bool accumulate;    /* O += S D (else O = S D) */
    /* Scratch, sl_nn_spgemm_scratch_len bytes, 64-byte aligned: */
    void *scratch;      /* S compressed by rows, D^T copied when d_trans */
} sl_nn_spgemm_t;

/* Whether this CPU runs the sparse kernels (AVX2 and FMA). */
bool sl_nn_spgemm_available(void);
/* Bytes of scratch a product of these sizes needs. */
size_t sl_nn_spgemm_scratch_len(int M, int N, int K, bool d_trans);
/* Fraction of nonzeros in a row-major rows x cols matrix (stride ld),
 * estimated from a fixed sample of at most a few thousand elements. */
double sl_nn_spgemm_density(const float *p, int rows, int cols, int ld);
/* Whether the sparse product is expected to beat a dense sgemm of the
 * same sizes at this density of S (a cost model measured on Zen 3), the
 * dense sgemm running `dense_rate` multiply-adds a ns (its kernels'). */
bool sl_nn_spgemm_worth(int M, int N, int K, bool s_trans, bool d_trans, bool o_trans,
                        double density, double dense_rate);

/* The two phases, each split into `parts` independent parts (run_parts):
 * prepare compresses S's rows and transposes D; compute forms O. Every
 * output element is one sum over k in ascending order, whatever the
 * split, so the result does not depend on the thread count. */
void sl_nn_spgemm_prepare(void *job, int part, int parts);
void sl_nn_spgemm_compute(void *job, int part, int parts);

#endif
