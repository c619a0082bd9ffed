/* The cpu backend's sparse-operand matrix product.
 *
 * Why: the training engine's products are full of zeros. Fashion-MNIST
 * pixels are half zero; ReLU outputs are about half zero, and so are the
 * gradients that flow back through a ReLU; behind a 2x2 max-pool three
 * quarters of a conv layer's output gradient is zero before the ReLU
 * masks more (83-97 % measured on cnn:32,64). A dense sgemm multiplies
 * all of them. Here the sparse operand S is compressed row by row (the
 * nonzeros and their k), and each row of the output is the sum of the
 * rows of D that its nonzeros pick, each scaled by its value:
 *
 *     O[i][j0:j0+64] = sum over k with S[i][k] != 0 of S[i][k] * D[k][j0:j0+64]
 *
 * with the 64 sums in eight AVX registers (FMA), k ascending. For a
 * row-major output, k runs in blocks of KB so that the block of D being
 * read (KB x 64 floats, 16 KiB) stays in L1 while every row of S passes
 * over it; the partial sums wait in O between blocks. A transposed output
 * (O^T, the product with a sparse right operand) is formed 8 rows at a
 * time in a tile and written with 8x8 transposes.
 *
 * Exactness: every output element is one sum over k in ascending order,
 * the same whatever the thread split (no sum is split), so the result is
 * a function of the inputs alone. It differs from OpenBLAS's in the last
 * bits (another order of the same additions), and skipping S's zeros
 * skips 0 * inf = NaN: a product whose D holds an infinity or a NaN where
 * S is zero gives a finite result here (training has diverged by then).
 *
 * The kernels need AVX2 and FMA; without them backend_cpu.c never calls
 * this (sl_nn_spgemm_available). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cpu_sparse.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SPARSE_X86 1
#define SPARSE_TARGET __attribute__((target("avx2,fma")))
#else
#define SPARSE_X86 0
#define SPARSE_TARGET
#endif

/* k per block of a row-major output's product (KB x 64 floats of D = 16 KiB). */
#define KB 64
/* Output columns per register panel (8 AVX registers of 8 floats). */
#define PANEL 64
/* Nonzeros a row of a k-block must hold on average for a transposed
 * output to be formed block by block (below, each row's k at once; see
 * compute_trans). */
#define TRANS_BLOCKED_MIN_NNZ 16

/* Scratch layout: blk[M][nkb + 1] (row i's nonzeros of k-block b are
 * entries blk[i][b] .. blk[i][b+1] - 1 of the row; the last is the row's
 * count), then idx[M*K] and val[M*K] (row i at i*K, K entries of room),
 * then D packed by panels, dp[N/64][K][64] (the tail panel padded): a
 * panel's rows are 256 bytes apart, so a k-block of it is 16 KiB of
 * contiguous memory. Read in place, rows of D 1 KiB apart (a 256-column
 * D) fall into a quarter of L1's sets and evict each other. */
typedef struct {
    int32_t *blk;
    int32_t *idx;
    float *val;
    float *dp;
    int nkb;
} layout_t;

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static int blocks_of(int K) { return (K + KB - 1) / KB; }

static layout_t layout(const sl_nn_spgemm_t *j) {
    layout_t l;
    l.nkb = blocks_of(j->K);
    char *p = j->scratch;
    l.blk = (int32_t *)p;
    p += align64((size_t)j->M * (l.nkb + 1) * sizeof(int32_t));
    l.idx = (int32_t *)p;
    p += align64((size_t)j->M * j->K * sizeof(int32_t));
    l.val = (float *)p;
    p += align64((size_t)j->M * j->K * sizeof(float));
    l.dp = (float *)p;
    return l;
}

static int panels_of(int N) { return (N + PANEL - 1) / PANEL; }

size_t sl_nn_spgemm_scratch_len(int M, int N, int K, bool d_trans) {
    (void)d_trans;
    return align64((size_t)M * (blocks_of(K) + 1) * sizeof(int32_t)) +
           2 * align64((size_t)M * K * sizeof(float)) +
           align64((size_t)panels_of(N) * K * PANEL * sizeof(float));
}

bool sl_nn_spgemm_available(void) {
#if SPARSE_X86
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

double sl_nn_spgemm_density(const float *p, int rows, int cols, int ld) {
    /* Up to 8 rows spread over the matrix; of each, 4 runs of up to 256
     * elements spread over the row (sequential reads, a few microseconds). */
    int nr = rows < 8 ? rows : 8;
    long seen = 0, nonzero = 0;
    for (int r = 0; r < nr; r++) {
        const float *row = p + (size_t)((long)rows * r / nr) * ld;
        int runs = cols <= 1024 ? 1 : 4;
        int len = cols <= 1024 ? cols : 256;
        for (int q = 0; q < runs; q++) {
            const float *x = row + (size_t)((long)(cols - len) * q / (runs > 1 ? runs - 1 : 1));
            for (int t = 0; t < len; t++)
                nonzero += x[t] != 0.0f;
            seen += len;
        }
    }
    return seen ? (double)nonzero / (double)seen : 1.0;
}

/* Kernel calls one output row makes over its panels: a full panel of 64
 * columns is one, a partial one a call per power of two (kernel_tail
 * for the last < 8). */
static int calls_per_row(int N) {
    int calls = N / PANEL, w = N % PANEL;
    for (int c = 32; c >= 8; c /= 2)
        if (w >= c)
            calls++, w -= c;
    return calls + (w > 0);
}

/* Cost model in nanoseconds, fitted to single-thread timings on the EPYC
 * (Zen 3) the engine is benchmarked on (bench/results/train.md): OpenBLAS
 * runs these shapes at about 45 multiply-adds a nanosecond there with its
 * AVX2 kernels (dense_rate: backend_cpu.c gives 70 for its AVX-512 ones,
 * with which every product of the MLP is faster dense); the sparse
 * kernel at about 32 per nonzero (with a transposed output 24 formed by
 * k-blocks, 17 in one pass per row), plus
 * about 8 ns a kernel call (one per row, k-block and panel: rows with few
 * nonzeros a block pay mostly this); compressing S costs 0.25 ns an
 * element (0.5 transposed), packing D 0.1 (0.3 transposed). Sparse is chosen when it is expected to take
 * under 0.95 of the dense time. Chosen so: the MLP's products (operands
 * half zero; 0.74-0.92 of OpenBLAS's time measured) and a conv layer's
 * weight and input gradients (its output gradient 83-97 % zero behind
 * max-pooling; about 0.5); not a conv's forward product (col half zero,
 * but a transposed S and output: about as fast as OpenBLAS at 65-75 %
 * zeros in place, faster only beyond 80 %) nor conv1's products
 * (25-long rows or 25 outputs: overhead-bound). */
bool sl_nn_spgemm_worth(int M, int N, int K, bool s_trans, bool d_trans, bool o_trans,
                        double density, double dense_rate) {
    double macs = (double)M * N * K;
    double dense = macs / dense_rate;
    bool by_blocks = !o_trans || density * KB >= TRANS_BLOCKED_MIN_NNZ;
    double calls = (double)M * (by_blocks ? blocks_of(K) : 1) * calls_per_row(N);
    double packed = (double)K * panels_of(N) * PANEL;
    double rate = !o_trans ? 32.0 : by_blocks ? 24.0 : 17.0;
    double sparse = density * macs / rate + calls * 8.0 +
                    (double)M * K * (s_trans ? 0.5 : 0.25) + packed * (d_trans ? 0.3 : 0.1);
    return sparse < 0.95 * dense;
}

/* ---- prepare: compress S's rows, copy D^T ---- */

#if SPARSE_X86
/* For each 8-bit mask, the lanes of its set bits packed to the front. */
static int32_t compress_lut[256][8];

static void lut_init(void) {
    for (int m = 0; m < 256; m++) {
        int n = 0;
        for (int b = 0; b < 8; b++)
            if (m >> b & 1)
                compress_lut[m][n++] = b;
        for (; n < 8; n++)
            compress_lut[m][n] = 0;
    }
}

static pthread_once_t lut_once = PTHREAD_ONCE_INIT;

/* Row-major S row: 8 at a time, the nonzeros packed with a permutation
 * (writes 8 entries, advances by the count; the row has K entries of room
 * and only whole groups of 8 are written this way). */
SPARSE_TARGET static void compress_row(const float *x, int K, int32_t *idx, float *val,
                                       int32_t *blk) {
    int n = 0, k = 0;
    const __m256 zero = _mm256_setzero_ps();
    const __m256i step = _mm256_set1_epi32(8);
    __m256i kv = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (; k + 8 <= K; k += 8, kv = _mm256_add_epi32(kv, step)) {
        if (k % KB == 0)
            blk[k / KB] = n;
        __m256 v = _mm256_loadu_ps(x + k);
        int m = _mm256_movemask_ps(_mm256_cmp_ps(v, zero, _CMP_NEQ_UQ));
        if (!m)
            continue;
        __m256i perm = _mm256_loadu_si256((const __m256i *)compress_lut[m]);
        _mm256_storeu_ps(val + n, _mm256_permutevar8x32_ps(v, perm));
        _mm256_storeu_si256((__m256i *)(idx + n), _mm256_permutevar8x32_epi32(kv, perm));
        n += __builtin_popcount((unsigned)m);
    }
    for (; k < K; k++) {
        if (k % KB == 0)
            blk[k / KB] = n;
        idx[n] = k;
        val[n] = x[k];
        n += x[k] != 0.0f;
    }
    blk[blocks_of(K)] = n;
}

/* 8x8 transpose: rows r[0..7] in, columns out in r[0..7]. */
SPARSE_TARGET static inline void transpose8(__m256 r[8]) {
    __m256 a0 = _mm256_unpacklo_ps(r[0], r[1]), a1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 a2 = _mm256_unpacklo_ps(r[2], r[3]), a3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 a4 = _mm256_unpacklo_ps(r[4], r[5]), a5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 a6 = _mm256_unpacklo_ps(r[6], r[7]), a7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xEE);
    __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xEE);
    __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xEE);
    __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xEE);
    r[0] = _mm256_permute2f128_ps(b0, b4, 0x20);
    r[1] = _mm256_permute2f128_ps(b1, b5, 0x20);
    r[2] = _mm256_permute2f128_ps(b2, b6, 0x20);
    r[3] = _mm256_permute2f128_ps(b3, b7, 0x20);
    r[4] = _mm256_permute2f128_ps(b0, b4, 0x31);
    r[5] = _mm256_permute2f128_ps(b1, b5, 0x31);
    r[6] = _mm256_permute2f128_ps(b2, b6, 0x31);
    r[7] = _mm256_permute2f128_ps(b3, b7, 0x31);
}

/* dst[c][r] = src[r][c] for r < rows, c < cols (strides lds, ldd). */
SPARSE_TARGET static void transpose(const float *src, size_t lds, float *dst, size_t ldd,
                                    int rows, int cols) {
    int r = 0;
    for (; r + 8 <= rows; r += 8) {
        int c = 0;
        for (; c + 8 <= cols; c += 8) {
            __m256 v[8];
            for (int q = 0; q < 8; q++)
                v[q] = _mm256_loadu_ps(src + (size_t)(r + q) * lds + c);
            transpose8(v);
            for (int q = 0; q < 8; q++)
                _mm256_storeu_ps(dst + (size_t)(c + q) * ldd + r, v[q]);
        }
        for (; c < cols; c++)
            for (int q = 0; q < 8; q++)
                dst[(size_t)c * ldd + r + q] = src[(size_t)(r + q) * lds + c];
    }
    for (; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)c * ldd + r] = src[(size_t)r * lds + c];
}

/* Rows [i, i+8) of a transposed S (S[r][k] = s[k*lds + r]) compressed as
 * compress_row does, without writing S out as rows first: 8x8 blocks of s
 * are transposed in registers and each of the 8 vectors (8 k of one row)
 * compressed into its row. Row r's entries go to idx/val + r*K, its block
 * starts to blk + r*bstride. (Strips of 16 rows, which read each 64-byte
 * line of s once instead of twice, measured slower: 32 write streams.) */
SPARSE_TARGET static void compress_cols8(const float *s, size_t lds, int K, int32_t *idx,
                                         float *val, int32_t *blk, int bstride) {
    int n[8] = {0};
    int k = 0;
    const __m256 zero = _mm256_setzero_ps();
    for (; k + 8 <= K; k += 8) {
        __m256 v[8];
        for (int q = 0; q < 8; q++)
            v[q] = _mm256_loadu_ps(s + (size_t)(k + q) * lds);
        transpose8(v);
        const __m256i kv = _mm256_add_epi32(_mm256_set1_epi32(k),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int r = 0; r < 8; r++) {
            if (k % KB == 0)
                blk[r * bstride + k / KB] = n[r];
            int m = _mm256_movemask_ps(_mm256_cmp_ps(v[r], zero, _CMP_NEQ_UQ));
            if (!m)
                continue;
            __m256i perm = _mm256_loadu_si256((const __m256i *)compress_lut[m]);
            size_t at = (size_t)r * K + n[r];
            _mm256_storeu_ps(val + at, _mm256_permutevar8x32_ps(v[r], perm));
            _mm256_storeu_si256((__m256i *)(idx + at), _mm256_permutevar8x32_epi32(kv, perm));
            n[r] += __builtin_popcount((unsigned)m);
        }
    }
    for (int r = 0; r < 8; r++) {
        int32_t *ri = idx + (size_t)r * K;
        float *rv = val + (size_t)r * K;
        for (int kk = k; kk < K; kk++) {
            if (kk % KB == 0)
                blk[r * bstride + kk / KB] = n[r];
            float x = s[(size_t)kk * lds + r];
            ri[n[r]] = kk;
            rv[n[r]] = x;
            n[r] += x != 0.0f;
        }
        blk[r * bstride + blocks_of(K)] = n[r];
    }
}

/* One row of a transposed S (column i of s), element by element. */
static void compress_col(const float *s, size_t lds, int K, int32_t *idx, float *val,
                         int32_t *blk) {
    int n = 0;
    for (int k = 0; k < K; k++) {
        if (k % KB == 0)
            blk[k / KB] = n;
        float x = s[(size_t)k * lds];
        idx[n] = k;
        val[n] = x;
        n += x != 0.0f;
    }
    blk[blocks_of(K)] = n;
}

SPARSE_TARGET static void prepare(const sl_nn_spgemm_t *j, int part, int parts) {
    layout_t l = layout(j);
    const int M = j->M, N = j->N, K = j->K;
    int i0 = (int)((long)M * part / parts), i1 = (int)((long)M * (part + 1) / parts);
    pthread_once(&lut_once, lut_init);
    if (j->s_trans) {
        int i = i0;
        for (; i + 8 <= i1; i += 8)
            compress_cols8(j->s + i, (size_t)j->lds, K, l.idx + (size_t)i * K,
                           l.val + (size_t)i * K, l.blk + (size_t)i * (l.nkb + 1), l.nkb + 1);
        for (; i < i1; i++)
            compress_col(j->s + i, (size_t)j->lds, K, l.idx + (size_t)i * K,
                         l.val + (size_t)i * K, l.blk + (size_t)i * (l.nkb + 1));
    } else {
        for (int i = i0; i < i1; i++)
            compress_row(j->s + (size_t)i * j->lds, K, l.idx + (size_t)i * K,
                         l.val + (size_t)i * K, l.blk + (size_t)i * (l.nkb + 1));
    }
    /* Pack D's rows [k0, k1) by panels. */
    int k0 = (int)((long)K * part / parts), k1 = (int)((long)K * (part + 1) / parts);
    if (k1 <= k0)
        return;
    for (int p = 0; p < panels_of(N); p++) {
        int c = p * PANEL, w = N - c < PANEL ? N - c : PANEL;
        float *dst = l.dp + ((size_t)p * K + k0) * PANEL;
        if (j->d_trans) /* D[k][c + t] = d[(c + t)*ldd + k] */
            transpose(j->d + (size_t)c * j->ldd + k0, (size_t)j->ldd, dst, PANEL, w, k1 - k0);
        else
            for (int k = k0; k < k1; k++)
                memcpy(dst + (size_t)(k - k0) * PANEL, j->d + (size_t)k * j->ldd + c,
                       (size_t)w * sizeof(float));
    }
}
#endif

void sl_nn_spgemm_prepare(void *arg, int part, int parts) {
#if SPARSE_X86
    prepare(arg, part, parts);
#else
    (void)arg;
    (void)part;
    (void)parts;
#endif
}

/* ---- compute ---- */

#if SPARSE_X86
/* out[0 : 8*NV] = (load ? out : 0) + sum over entries p in [ps, pe) of
 * val[p] * D row idx[p] (row k at dbase + k*dstride). (Two interleaved
 * streams of entries, 32 columns wide, measured slower here in place:
 * each 64-column panel then reads the entries twice.) */
#define SPARSE_KERNEL(NAME, NV)                                                              \
    SPARSE_TARGET static void NAME(const int32_t *idx, const float *val, int ps, int pe,      \
                                   const float *dbase, size_t dstride, float *out, bool load) { \
        __m256 acc[NV];                                                                      \
        _Pragma("GCC unroll 8") for (int q = 0; q < NV; q++) acc[q] =                        \
            load ? _mm256_loadu_ps(out + 8 * q) : _mm256_setzero_ps();                        \
        for (int p = ps; p < pe; p++) {                                                      \
            const __m256 v = _mm256_broadcast_ss(val + p);                                    \
            const float *r = dbase + (size_t)idx[p] * dstride;                               \
            _Pragma("GCC unroll 8") for (int q = 0; q < NV; q++) acc[q] =                    \
                _mm256_fmadd_ps(v, _mm256_loadu_ps(r + 8 * q), acc[q]);                      \
        }                                                                                    \
        _Pragma("GCC unroll 8") for (int q = 0; q < NV; q++)                                 \
            _mm256_storeu_ps(out + 8 * q, acc[q]);                                           \
    }

SPARSE_KERNEL(kernel8, 8)
SPARSE_KERNEL(kernel4, 4)
SPARSE_KERNEL(kernel2, 2)
SPARSE_KERNEL(kernel1, 1)

/* The same for w < 8 columns (masked loads and stores). */
SPARSE_TARGET static void kernel_tail(const int32_t *idx, const float *val, int ps, int pe,
                                      const float *dbase, size_t dstride, float *out, bool load,
                                      int w) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(w), lane);
    __m256 acc = load ? _mm256_maskload_ps(out, mask) : _mm256_setzero_ps();
    for (int p = ps; p < pe; p++) {
        const __m256 v = _mm256_broadcast_ss(val + p);
        acc = _mm256_fmadd_ps(v, _mm256_maskload_ps(dbase + (size_t)idx[p] * dstride, mask), acc);
    }
    _mm256_maskstore_ps(out, mask, acc);
}

/* Columns [0, w) (w <= PANEL) of one output row segment. */
SPARSE_TARGET static void panel(const int32_t *idx, const float *val, int ps, int pe,
                                const float *dbase, size_t dstride, float *out, bool load, int w) {
    int c = 0;
    if (w - c >= 64) {
        kernel8(idx, val, ps, pe, dbase + c, dstride, out + c, load);
        c += 64;
    }
    if (w - c >= 32) {
        kernel4(idx, val, ps, pe, dbase + c, dstride, out + c, load);
        c += 32;
    }
    if (w - c >= 16) {
        kernel2(idx, val, ps, pe, dbase + c, dstride, out + c, load);
        c += 16;
    }
    if (w - c >= 8) {
        kernel1(idx, val, ps, pe, dbase + c, dstride, out + c, load);
        c += 8;
    }
    if (w > c)
        kernel_tail(idx, val, ps, pe, dbase + c, dstride, out + c, load, w - c);
}

/* Row-major output: rows [i0, i1), columns [j0, j1). */
SPARSE_TARGET static void compute_rows(const sl_nn_spgemm_t *j, const layout_t *l, int i0,
                                       int i1, int j0, int j1) {
    const int stride = l->nkb + 1;
    for (int c = j0; c < j1; c += PANEL) {
        int w = j1 - c < PANEL ? j1 - c : PANEL;
        const float *dbase = l->dp + (size_t)(c / PANEL) * j->K * PANEL;
        for (int b = 0; b < l->nkb; b++)
            for (int i = i0; i < i1; i++) {
                const int32_t *bk = l->blk + (size_t)i * stride;
                int ps = bk[b], pe = bk[b + 1];
                if (b > 0 && ps == pe)
                    continue;
                size_t base = (size_t)i * j->K;
                panel(l->idx + base, l->val + base, ps, pe, dbase, PANEL,
                      j->o + (size_t)i * j->ldo + c, b > 0 || j->accumulate, w);
            }
    }
}

/* o[(c + t)*ldo + i0 + r] (+)= tile[r][t] for r < rows, t < w: the
 * tile's rows become columns of o, 8x8 blocks at a time. */
SPARSE_TARGET static void store_transposed(const float *tile, int rows, int w, float *o,
                                           size_t ldo, bool accumulate) {
    int t = 0;
    if (rows == 8)
        for (; t + 8 <= w; t += 8) {
            __m256 v[8];
            for (int q = 0; q < 8; q++)
                v[q] = _mm256_loadu_ps(tile + q * PANEL + t);
            transpose8(v);
            for (int q = 0; q < 8; q++) {
                float *d = o + (size_t)(t + q) * ldo;
                _mm256_storeu_ps(d, accumulate ? _mm256_add_ps(_mm256_loadu_ps(d), v[q]) : v[q]);
            }
        }
    for (; t < w; t++)
        for (int r = 0; r < rows; r++) {
            float *d = o + (size_t)t * ldo + r;
            *d = accumulate ? *d + tile[r * PANEL + t] : tile[r * PANEL + t];
        }
}

/* Rows of O a transposed output's tile holds (TROWS x 64 floats, 8 KiB:
 * with a k-block of D, 16 KiB, it stays in L1). */
#define TROWS 32

/* Transposed output: rows [i0, i1) of O (columns of o), all N columns,
 * TROWS rows at a time through a tile, then written out with 8x8
 * transposes. With enough nonzeros per row and k-block, k runs in blocks
 * as for a row-major output (the block of D stays in L1 while the tile's
 * rows pass over it; the partial sums wait in the tile): conv2's forward
 * product (S 70 % zero) 0.65-0.7x the time of one pass per row. With few
 * (S 80 % zero), the extra kernel call per row and block costs more than
 * the reads of D from L2 it saves, and each row takes all its k in one
 * call. Either way every output element is the same sum in the same
 * order. */
SPARSE_TARGET static void compute_trans(const sl_nn_spgemm_t *j, const layout_t *l, int i0,
                                        int i1) {
    const int stride = l->nkb + 1;
    float tile[TROWS * PANEL] __attribute__((aligned(64)));
    long nnz = 0;
    for (int i = i0; i < i1; i++)
        nnz += l->blk[(size_t)i * stride + l->nkb];
    const bool blocked = nnz >= (long)TRANS_BLOCKED_MIN_NNZ * (i1 - i0) * l->nkb;
    const int nb = blocked ? l->nkb : 1;
    for (int ib = i0; ib < i1; ib += TROWS) {
        int rows = i1 - ib < TROWS ? i1 - ib : TROWS;
        for (int c = 0; c < j->N; c += PANEL) {
            int w = j->N - c < PANEL ? j->N - c : PANEL;
            const float *dbase = l->dp + (size_t)(c / PANEL) * j->K * PANEL;
            for (int b = 0; b < nb; b++)
                for (int r = 0; r < rows; r++) {
                    int i = ib + r;
                    const int32_t *bk = l->blk + (size_t)i * stride;
                    int ps = blocked ? bk[b] : bk[0], pe = blocked ? bk[b + 1] : bk[l->nkb];
                    if (b > 0 && ps == pe)
                        continue;
                    size_t base = (size_t)i * j->K;
                    panel(l->idx + base, l->val + base, ps, pe, dbase, PANEL, tile + r * PANEL,
                          b > 0, w);
                }
            for (int r = 0; r < rows; r += 8)
                store_transposed(tile + r * PANEL, rows - r < 8 ? rows - r : 8, w,
                                 j->o + (size_t)c * j->ldo + ib + r, (size_t)j->ldo,
                                 j->accumulate);
        }
    }
}
#endif

void sl_nn_spgemm_compute(void *arg, int part, int parts) {
#if SPARSE_X86
    const sl_nn_spgemm_t *j = arg;
    layout_t l = layout(j);
    if (j->o_trans) {
        /* By rows of O in multiples of 8 (columns of o: 32-byte runs). */
        int groups = (j->M + 7) / 8;
        int i0 = 8 * (int)((long)groups * part / parts);
        int i1 = 8 * (int)((long)groups * (part + 1) / parts);
        if (i0 < j->M)
            compute_trans(j, &l, i0, i1 < j->M ? i1 : j->M);
    } else if (j->N >= PANEL * parts) {
        /* By whole panels of columns: each part reads its own slice of D. */
        int panels = (j->N + PANEL - 1) / PANEL;
        int c0 = PANEL * (int)((long)panels * part / parts);
        int c1 = PANEL * (int)((long)panels * (part + 1) / parts);
        compute_rows(j, &l, 0, j->M, c0, c1 < j->N ? c1 : j->N);
    } else {
        int i0 = (int)((long)j->M * part / parts), i1 = (int)((long)j->M * (part + 1) / parts);
        compute_rows(j, &l, i0, i1, 0, j->N);
    }
#else
    (void)arg;
    (void)part;
    (void)parts;
#endif
}
