/* The cuda backend against the cpu backend: every op of the backend table
 * on the same inputs (sgemm in all four transpose cases with padded
 * strides, gathers, axis swaps, bias+activation forward and backward in
 * the dense and conv views, im2col/col2im and max-pool in both layouts
 * with padding, stride and overlapping windows, batch norm in training and
 * eval, dropout, softmax cross-entropy with its device accumulators,
 * every optimizer rule, the squared norm), then whole models (forward,
 * backward, input gradients) and short training runs on both backends.
 * Results must agree within tolerance (bit for bit where the formulas of
 * ops_math.h leave no room: gathers, dropout, pooling, col2im, argmax).
 *
 * Skipped (exit 77) where no GPU is usable: no driver, no device, or no
 * libstarling_cuda.so in this build. That the library then fails cleanly
 * (SL_ENODEV, or SL_EUNSUPPORTED when it is not built) is checked first.
 * SL_NN_CUDA_TEST_ON_CPU=1 runs every case with the cpu backend standing
 * in for the device: a check of this test itself on machines without one. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "nn/nn_internal.h"
#include "nn/ops_math.h"
#include "testlib.h"

static sl_nn_backend_t *cpu_be, *dev_be;  /* the reference and the one under test */
static const sl_nn_backend_ops_t *C, *D;  /* their tables */
static void *cs, *ds;                     /* their instances */
static sl_rng_t rng;                      /* inputs */

/* ---- device buffers of the current case ---- */

static void *bufs[256];
static int nbufs;

/* A device copy of len host bytes (zeroed when host is NULL). */
static void *up(const void *host, size_t len) {
    void *d = NULL;
    CHECK_OK(D->alloc(ds, len, &d));
    if (!d)
        return NULL;
    if (nbufs < (int)(sizeof bufs / sizeof *bufs))
        bufs[nbufs++] = d;
    void *zero = NULL;
    if (!host)
        host = zero = calloc(1, len ? len : 1);
    CHECK_OK(D->upload(ds, d, host, len));
    free(zero);
    return d;
}

/* A host copy of len device bytes (freed by the caller). */
static void *down(const void *dev, size_t len) {
    void *h = calloc(1, len ? len : 1);
    CHECK_OK(D->download(ds, h, dev, len));
    return h;
}

static void free_bufs(void) {
    CHECK_OK(D->sync(ds));
    for (int i = 0; i < nbufs; i++)
        D->free(ds, bufs[i]);
    nbufs = 0;
}

static float *rand_floats(size_t n, float lo, float hi) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = lo + (hi - lo) * (float)sl_rng_double(&rng);
    return p;
}

/* cpu result `want` against device result `got` (downloaded). */
static void near(const char *what, const float *want, const float *got, size_t n, double atol,
                 double rtol) {
    size_t bad = 0, first = 0;
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double a = want[i], b = got[i], d = fabs(a - b);
        double lim = atol + rtol * (fabs(a) > fabs(b) ? fabs(a) : fabs(b));
        if (!(d <= lim)) {
            if (!bad)
                first = i;
            bad++;
        }
        if (d > worst)
            worst = d;
    }
    CHECK_MSG(bad == 0, "%s: %zu of %zu differ; first [%zu] cpu %.9g device %.9g; max diff %g",
              what, bad, n, first, bad ? want[first] : 0.0, bad ? got[first] : 0.0, worst);
}

static void same_i32(const char *what, const int32_t *want, const int32_t *got, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (want[i] != got[i]) {
            sl_test_fail(__FILE__, __LINE__, "%s: [%zu] cpu %d device %d", what, i, want[i],
                         got[i]);
            return;
        }
}

/* Downloads n floats from dev and compares them with want. */
static void near_dev(const char *what, const float *want, const float *dev, size_t n,
                     double atol, double rtol) {
    float *got = down(dev, n * sizeof *got);
    near(what, want, got, n, atol, rtol);
    free(got);
}

/* ---- memory ---- */

static void test_memory(void) {
    const size_t n = 1000;
    float *h = rand_floats(n, -1, 1);
    float *d = up(h, n * sizeof *h);
    float *e = up(NULL, n * sizeof *e);
    CHECK_OK(D->copy(ds, e, d, n));
    near_dev("upload/copy/download", h, e, n, 0, 0);
    CHECK_OK(D->fill(ds, e + 10, 2.5f, 100));
    for (int i = 10; i < 110; i++)
        h[i] = 2.5f;
    near_dev("fill", h, e, n, 0, 0);
    double *acc = up(NULL, 4 * sizeof(double));
    double ones[4] = {1, 1, 1, 1}, got[4];
    CHECK_OK(D->upload(ds, acc, ones, sizeof ones));
    CHECK_OK(D->zero_acc(ds, acc, 3));
    CHECK_OK(D->download(ds, got, acc, sizeof got));
    CHECK(got[0] == 0 && got[1] == 0 && got[2] == 0 && got[3] == 1);
    void *z = NULL;
    CHECK_OK(D->alloc(ds, 0, &z)); /* zero bytes still gives a buffer */
    CHECK(z != NULL);
    D->free(ds, z);
    D->free(ds, NULL);
    free(h);
    free_bufs();
}

/* ---- BLAS ---- */

static void gemm_case(bool ta, bool tb, int m, int n, int k, float alpha, float beta, int pad) {
    int arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
    int lda = acols + pad, ldb = bcols + pad, ldc = n + pad;
    float *a = rand_floats((size_t)arows * lda, -1, 1);
    float *b = rand_floats((size_t)brows * ldb, -1, 1);
    float *c = rand_floats((size_t)m * ldc, -1, 1);
    float *da = up(a, (size_t)arows * lda * 4), *db = up(b, (size_t)brows * ldb * 4);
    float *dc = up(c, (size_t)m * ldc * 4);
    CHECK_OK(C->sgemm(cs, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
    CHECK_OK(D->sgemm(ds, ta, tb, m, n, k, alpha, da, lda, db, ldb, beta, dc, ldc));
    char what[96];
    snprintf(what, sizeof what, "sgemm %c%c m=%d n=%d k=%d pad=%d", ta ? 'T' : 'N', tb ? 'T' : 'N',
             m, n, k, pad);
    near_dev(what, c, dc, (size_t)m * ldc, 1e-5 * sqrt((double)k) + 1e-5, 1e-4);
    free(a);
    free(b);
    free(c);
}

static void test_sgemm(void) {
    for (int t = 0; t < 4; t++) {
        gemm_case(t & 1, t & 2, 37, 29, 61, 1.0f, 0.0f, 0);
        gemm_case(t & 1, t & 2, 128, 256, 784, 1.0f, 0.0f, 0);
        gemm_case(t & 1, t & 2, 5, 7, 3, 0.5f, 1.0f, 3);
        gemm_case(t & 1, t & 2, 16, 1, 33, -2.0f, 0.25f, 1);
    }
    gemm_case(false, false, 4, 4, 0, 1.0f, 0.5f, 0); /* k = 0: C = beta * C */
    free_bufs();
}

static void test_axpby(void) {
    const size_t n = 10007;
    float *x = rand_floats(n, -1, 1), *y = rand_floats(n, -1, 1);
    float *dx = up(x, n * 4), *dy = up(y, n * 4);
    CHECK_OK(C->axpby(cs, n, 0.3f, x, -1.5f, y));
    CHECK_OK(D->axpby(ds, n, 0.3f, dx, -1.5f, dy));
    near_dev("axpby", y, dy, n, 0, 0);
    free(x);
    free(y);
    free_bufs();
}

/* ---- data ---- */

static void test_gather(void) {
    const int N = 300, cols = 49, rows = 64;
    uint8_t *u8 = malloc((size_t)N * cols);
    for (int i = 0; i < N * cols; i++)
        u8[i] = (uint8_t)(sl_rng_next(&rng) & 0xff);
    float *f32 = rand_floats((size_t)N * cols, -3, 3);
    int32_t *lab = malloc(N * sizeof *lab), *idx = malloc(N * sizeof *idx);
    for (int i = 0; i < N; i++) {
        lab[i] = (int32_t)(sl_rng_next(&rng) % 10);
        idx[i] = (int32_t)(sl_rng_next(&rng) % (uint64_t)N);
    }
    uint8_t *du8 = up(u8, (size_t)N * cols);
    float *df32 = up(f32, (size_t)N * cols * 4);
    int32_t *dlab = up(lab, N * 4), *didx = up(idx, N * 4);
    float *want = malloc((size_t)rows * cols * 4);
    float *dout = up(NULL, (size_t)rows * cols * 4);
    int32_t wl[64], *dl = up(NULL, rows * 4);
    for (int with_idx = 0; with_idx < 2; with_idx++) {
        const int32_t *hi = with_idx ? idx : NULL, *di = with_idx ? didx : NULL;
        CHECK_OK(C->gather_u8(cs, want, u8, hi, 100, rows, cols, 1.0f / 255, -0.5f));
        CHECK_OK(D->gather_u8(ds, dout, du8, di, 100, rows, cols, 1.0f / 255, -0.5f));
        near_dev("gather_u8", want, dout, (size_t)rows * cols, 0, 0);
        CHECK_OK(C->gather_f32(cs, want, f32, hi, 7, rows, cols, 2.0f, 1.0f));
        CHECK_OK(D->gather_f32(ds, dout, df32, di, 7, rows, cols, 2.0f, 1.0f));
        near_dev("gather_f32", want, dout, (size_t)rows * cols, 0, 0);
        CHECK_OK(C->gather_i32(cs, wl, lab, hi, 33, rows));
        CHECK_OK(D->gather_i32(ds, dl, dlab, di, 33, rows));
        int32_t *got = down(dl, rows * 4);
        same_i32("gather_i32", wl, got, rows);
        free(got);
    }
    free(u8);
    free(f32);
    free(lab);
    free(idx);
    free(want);
    free_bufs();
}

static void test_swap_axes(void) {
    const int a = 13, b = 7, inner = 36;
    size_t n = (size_t)a * b * inner;
    float *src = rand_floats(n, -1, 1), *want = malloc(n * 4);
    float *dsrc = up(src, n * 4), *ddst = up(NULL, n * 4);
    CHECK_OK(C->swap_axes(cs, want, src, a, b, inner));
    CHECK_OK(D->swap_axes(ds, ddst, dsrc, a, b, inner));
    near_dev("swap_axes", want, ddst, n, 0, 0);
    free(src);
    free(want);
    free_bufs();
}

/* ---- bias + activation ---- */

static void bias_act_case(int outer, int channels, int inner) {
    size_t n = (size_t)outer * channels * inner;
    for (int act = 0; act < 2; act++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            float *y = rand_floats(n, -1, 1), *bias = rand_floats((size_t)channels, -0.5f, 0.5f);
            float *dy = rand_floats(n, -1, 1);
            float *dyv = up(y, n * 4), *dbv = up(bias, (size_t)channels * 4);
            float *ddy = up(dy, n * 4), *ddb = up(NULL, (size_t)channels * 4);
            const float *hb = with_bias ? bias : NULL, *db = with_bias ? dbv : NULL;
            CHECK_OK(C->bias_act_fwd(cs, y, hb, outer, channels, inner, (sl_nn_act)act));
            CHECK_OK(D->bias_act_fwd(ds, dyv, db, outer, channels, inner, (sl_nn_act)act));
            char what[96];
            snprintf(what, sizeof what, "bias_act_fwd %dx%dx%d act %d bias %d", outer, channels,
                     inner, act, with_bias);
            near_dev(what, y, dyv, n, 0, 0);
            float *dbias = calloc((size_t)channels, 4);
            CHECK_OK(C->bias_act_bwd(cs, dy, y, with_bias ? dbias : NULL, outer, channels, inner,
                                     (sl_nn_act)act));
            CHECK_OK(D->bias_act_bwd(ds, ddy, dyv, with_bias ? ddb : NULL, outer, channels, inner,
                                     (sl_nn_act)act));
            snprintf(what, sizeof what, "bias_act_bwd dy %dx%dx%d act %d", outer, channels, inner,
                     act);
            near_dev(what, dy, ddy, n, 0, 0);
            if (with_bias) {
                snprintf(what, sizeof what, "bias_act_bwd dbias %dx%dx%d act %d", outer,
                         channels, inner, act);
                near_dev(what, dbias, ddb, (size_t)channels, 1e-5 * sqrt((double)n / channels),
                         1e-5);
            }
            free(y);
            free(bias);
            free(dy);
            free(dbias);
        }
    free_bufs();
}

static void test_bias_act(void) {
    bias_act_case(128, 256, 1); /* dense */
    bias_act_case(33, 10, 1);
    bias_act_case(1, 32, 128 * 24 * 24 / 16); /* conv, CNHW */
    bias_act_case(3, 5, 17);
}

/* ---- windows ---- */

static sl_nn_window_t window(int C_, int B, int h, int w, int k, int stride, int pad, bool cnhw) {
    sl_nn_window_t win = {.channels = C_, .batch = B, .h = h, .w = w, .kh = k, .kw = k,
                          .stride = stride, .pad = pad};
    win.out_h = (h + 2 * pad - k) / stride + 1;
    win.out_w = (w + 2 * pad - k) / stride + 1;
    win.plane_stride_c = cnhw ? B : 1;
    win.plane_stride_n = cnhw ? 1 : C_;
    return win;
}

static void im2col_case(sl_nn_window_t win) {
    size_t xn = (size_t)win.channels * win.batch * win.h * win.w;
    size_t cn = (size_t)win.channels * win.kh * win.kw * win.batch * win.out_h * win.out_w;
    float *x = rand_floats(xn, -1, 1), *col = malloc(cn * 4), *g = rand_floats(cn, -1, 1);
    float *dxw = malloc(xn * 4);
    float *dx = up(x, xn * 4), *dcol = up(NULL, cn * 4), *dg = up(g, cn * 4);
    float *ddx = up(NULL, xn * 4);
    CHECK_OK(C->im2col(cs, x, col, &win));
    CHECK_OK(D->im2col(ds, dx, dcol, &win));
    char what[128];
    snprintf(what, sizeof what, "im2col C%d B%d %dx%d k%d s%d p%d %s", win.channels, win.batch,
             win.h, win.w, win.kh, win.stride, win.pad, win.plane_stride_c == 1 ? "NCHW" : "CNHW");
    near_dev(what, col, dcol, cn, 0, 0);
    CHECK_OK(C->col2im(cs, g, dxw, &win));
    CHECK_OK(D->col2im(ds, dg, ddx, &win));
    what[0] = 'c', what[1] = 'o', what[2] = 'l', what[3] = '2', what[4] = 'i', what[5] = 'm';
    near_dev(what, dxw, ddx, xn, 1e-6, 1e-6);
    free(x);
    free(col);
    free(g);
    free(dxw);
    free_bufs();
}

static void test_im2col(void) {
    im2col_case(window(1, 8, 28, 28, 5, 1, 0, false)); /* the first conv of the benchmark */
    im2col_case(window(4, 6, 12, 12, 5, 1, 0, true));
    im2col_case(window(3, 2, 7, 7, 3, 2, 1, false));
    im2col_case(window(2, 3, 6, 5, 3, 1, 1, true));
    im2col_case(window(2, 2, 9, 9, 4, 3, 2, false));
}

static void pool_case(sl_nn_window_t win) {
    size_t xn = (size_t)win.channels * win.batch * win.h * win.w;
    size_t yn = (size_t)win.channels * win.batch * win.out_h * win.out_w;
    float *x = rand_floats(xn, -1, 1), *y = malloc(yn * 4), *dy = rand_floats(yn, -1, 1);
    float *dx = malloc(xn * 4);
    int32_t *arg = malloc(yn * 4);
    float *d_x = up(x, xn * 4), *d_y = up(NULL, yn * 4), *d_dy = up(dy, yn * 4);
    float *d_dx = up(NULL, xn * 4);
    int32_t *d_arg = up(NULL, yn * 4);
    CHECK_OK(C->maxpool_fwd(cs, x, y, arg, &win));
    CHECK_OK(D->maxpool_fwd(ds, d_x, d_y, d_arg, &win));
    char what[128];
    snprintf(what, sizeof what, "maxpool C%d B%d %dx%d k%d s%d p%d %s", win.channels, win.batch,
             win.h, win.w, win.kh, win.stride, win.pad, win.plane_stride_c == 1 ? "NCHW" : "CNHW");
    near_dev(what, y, d_y, yn, 0, 0);
    int32_t *got = down(d_arg, yn * 4);
    same_i32(what, arg, got, yn);
    free(got);
    CHECK_OK(C->maxpool_bwd(cs, dy, arg, dx, &win));
    CHECK_OK(D->maxpool_bwd(ds, d_dy, d_arg, d_dx, &win));
    near_dev(what, dx, d_dx, xn, 0, 0);
    free(x);
    free(y);
    free(dy);
    free(dx);
    free(arg);
    free_bufs();
}

static void test_maxpool(void) {
    pool_case(window(32, 16, 24, 24, 2, 2, 0, true)); /* the benchmark's first pool */
    pool_case(window(3, 4, 8, 8, 2, 2, 0, false));
    pool_case(window(2, 3, 7, 7, 3, 2, 1, false)); /* overlapping, padded */
    pool_case(window(2, 3, 9, 6, 3, 1, 1, true));
    pool_case(window(1, 2, 7, 7, 3, 3, 0, false)); /* odd size, remainder dropped */
}

/* ---- batch norm ---- */

static void bn_case(int outer, int channels, int inner) {
    size_t n = (size_t)outer * channels * inner, c = (size_t)channels;
    float *x = rand_floats(n, -2, 3), *gamma = rand_floats(c, 0.5f, 1.5f);
    float *beta = rand_floats(c, -0.5f, 0.5f), *rm = rand_floats(c, -0.1f, 0.1f);
    float *rv = rand_floats(c, 0.9f, 1.1f), *dy = rand_floats(n, -1, 1);
    float *y = malloc(n * 4), *sm = malloc(c * 4), *si = malloc(c * 4);
    float *dx = malloc(n * 4), *dg = malloc(c * 4), *db = malloc(c * 4);
    float *d_x = up(x, n * 4), *d_g = up(gamma, c * 4), *d_b = up(beta, c * 4);
    float *d_rm = up(rm, c * 4), *d_rv = up(rv, c * 4), *d_dy = up(dy, n * 4);
    float *d_y = up(NULL, n * 4), *d_sm = up(NULL, c * 4), *d_si = up(NULL, c * 4);
    float *d_dg = up(NULL, c * 4), *d_db = up(NULL, c * 4);
    CHECK_OK(C->batchnorm_fwd(cs, x, y, gamma, beta, rm, rv, sm, si, outer, channels, inner,
                              0.1f, 1e-5f, true));
    CHECK_OK(D->batchnorm_fwd(ds, d_x, d_y, d_g, d_b, d_rm, d_rv, d_sm, d_si, outer, channels,
                              inner, 0.1f, 1e-5f, true));
    near_dev("batchnorm_fwd y", y, d_y, n, 1e-5, 1e-4);
    near_dev("batchnorm_fwd mean", sm, d_sm, c, 1e-6, 1e-5);
    near_dev("batchnorm_fwd invstd", si, d_si, c, 1e-6, 1e-5);
    near_dev("batchnorm_fwd running mean", rm, d_rm, c, 1e-6, 1e-5);
    near_dev("batchnorm_fwd running var", rv, d_rv, c, 1e-6, 1e-5);
    /* dx aliases dy, as the engine may have it */
    CHECK_OK(C->batchnorm_bwd(cs, dy, x, gamma, sm, si, dy, dg, db, outer, channels, inner));
    CHECK_OK(D->batchnorm_bwd(ds, d_dy, d_x, d_g, d_sm, d_si, d_dy, d_dg, d_db, outer, channels,
                              inner));
    near_dev("batchnorm_bwd dx", dy, d_dy, n, 1e-5, 1e-3);
    near_dev("batchnorm_bwd dgamma", dg, d_dg, c, 1e-4, 1e-4);
    near_dev("batchnorm_bwd dbeta", db, d_db, c, 1e-4, 1e-4);
    /* eval: running statistics, save_* untouched (NULL) */
    CHECK_OK(C->batchnorm_fwd(cs, x, y, gamma, beta, rm, rv, NULL, NULL, outer, channels, inner,
                              0.1f, 1e-5f, false));
    CHECK_OK(D->batchnorm_fwd(ds, d_x, d_y, d_g, d_b, d_rm, d_rv, NULL, NULL, outer, channels,
                              inner, 0.1f, 1e-5f, false));
    near_dev("batchnorm_fwd eval", y, d_y, n, 1e-5, 1e-4);
    (void)dx;
    free(x), free(gamma), free(beta), free(rm), free(rv), free(dy);
    free(y), free(sm), free(si), free(dx), free(dg), free(db);
    free_bufs();
}

static void test_batchnorm(void) {
    bn_case(64, 20, 1);        /* dense */
    bn_case(1, 8, 16 * 12 * 12); /* conv, CNHW */
    bn_case(5, 3, 49);         /* conv, NCHW */
    bn_case(2, 4, 1);          /* tiny batch */
}

/* ---- dropout, loss, optimizer, norm ---- */

static void test_dropout(void) {
    const size_t n = 50000;
    float *x = rand_floats(n, -1, 1), *y = malloc(n * 4);
    float *d_x = up(x, n * 4), *d_y = up(NULL, n * 4);
    for (int k = 0; k < 3; k++) {
        float p = k == 0 ? 0.5f : k == 1 ? 0.1f : 0.0f;
        CHECK_OK(C->dropout(cs, x, y, n, p, 1234u + (uint64_t)k));
        CHECK_OK(D->dropout(ds, d_x, d_y, n, p, 1234u + (uint64_t)k));
        near_dev("dropout", y, d_y, n, 0, 0);
    }
    /* in place */
    CHECK_OK(C->dropout(cs, x, x, n, 0.3f, 99));
    CHECK_OK(D->dropout(ds, d_x, d_x, n, 0.3f, 99));
    near_dev("dropout in place", x, d_x, n, 0, 0);
    free(x);
    free(y);
    free_bufs();
}

static void test_softmax_xent(void) {
    const int rows = 200, classes = 10;
    size_t n = (size_t)rows * classes;
    float *logits = rand_floats(n, -4, 4), *dl = malloc(n * 4);
    int32_t *lab = malloc(rows * 4);
    for (int r = 0; r < rows; r++)
        lab[r] = (int32_t)(sl_rng_next(&rng) % classes);
    lab[3] = -1;     /* out of range: loss 0, no gradient */
    lab[4] = classes;
    float *d_logits = up(logits, n * 4), *d_dl = up(NULL, n * 4);
    int32_t *d_lab = up(lab, rows * 4);
    double acc[2] = {0.5, 1.0}, *d_acc = up(acc, sizeof acc);
    CHECK_OK(C->softmax_xent(cs, logits, lab, rows, classes, dl, 1.0f / rows, acc));
    CHECK_OK(D->softmax_xent(ds, d_logits, d_lab, rows, classes, d_dl, 1.0f / rows, d_acc));
    near_dev("softmax_xent dlogits", dl, d_dl, n, 1e-7, 1e-5);
    /* a second call accumulates; without dlogits (evaluation) */
    CHECK_OK(C->softmax_xent(cs, logits, lab, 50, classes, NULL, 1.0f, acc));
    CHECK_OK(D->softmax_xent(ds, d_logits, d_lab, 50, classes, NULL, 1.0f, d_acc));
    double got[2];
    CHECK_OK(D->download(ds, got, d_acc, sizeof got));
    CHECK_NEAR(got[0], acc[0], 1e-4 * acc[0]);
    CHECK(got[1] == acc[1]);
    /* dlogits aliasing logits */
    CHECK_OK(C->softmax_xent(cs, logits, lab, rows, classes, logits, 0.5f, acc));
    CHECK_OK(D->softmax_xent(ds, d_logits, d_lab, rows, classes, d_logits, 0.5f, d_acc));
    near_dev("softmax_xent in place", logits, d_logits, n, 1e-7, 1e-5);
    free(logits);
    free(dl);
    free(lab);
    free_bufs();
}

static void test_opt_step(void) {
    const size_t n = 4099;
    sl_nn_train_cfg_t cfg;
    sl_nn_train_cfg_init(&cfg);
    cfg.momentum = 0.9f;
    cfg.weight_decay = 1e-3f;
    for (int kind = 0; kind < 4; kind++) {
        cfg.optimizer = (sl_nn_opt_kind)kind;
        bool two = sl_nn_optim_has_s2(cfg.optimizer);
        float *w = rand_floats(n, -1, 1), *s1 = calloc(n, 4), *s2 = calloc(n, 4);
        float *d_w = up(w, n * 4), *d_s1 = up(NULL, n * 4), *d_s2 = up(NULL, n * 4);
        for (int t = 1; t <= 4; t++) {
            float *g = rand_floats(n, -1, 1), *d_g = up(g, n * 4);
            sl_nn_opt_step_t st;
            sl_nn_optim_step_params(&cfg, 0.05, (uint64_t)t, &st);
            CHECK_OK(C->opt_step(cs, w, g, s1, two ? s2 : NULL, n, &st));
            CHECK_OK(D->opt_step(ds, d_w, d_g, d_s1, two ? d_s2 : NULL, n, &st));
            free(g);
        }
        char what[64];
        snprintf(what, sizeof what, "opt_step %s w", sl_nn_optim_name(cfg.optimizer));
        near_dev(what, w, d_w, n, 1e-6, 1e-5);
        snprintf(what, sizeof what, "opt_step %s s1", sl_nn_optim_name(cfg.optimizer));
        near_dev(what, s1, d_s1, n, 1e-6, 1e-5);
        if (two)
            near_dev("opt_step s2", s2, d_s2, n, 1e-9, 1e-5);
        free(w);
        free(s1);
        free(s2);
        free_bufs();
    }
    /* Adam without its second state vector is refused */
    sl_nn_opt_step_t st = {.kind = SL_NN_OPT_ADAM, .lr = 0.1f};
    float *d = up(NULL, 64);
    CHECK_ERR(D->opt_step(ds, d, d, d, NULL, 4, &st), SL_EINVAL);
    free_bufs();
}

static void test_sum_squares(void) {
    const size_t n = 235146;
    float *x = rand_floats(n, -1, 1);
    float *d_x = up(x, n * 4);
    double want, got, *d_out = up(NULL, sizeof(double));
    CHECK_OK(C->sum_squares(cs, x, n, &want));
    CHECK_OK(D->sum_squares(ds, d_x, n, d_out));
    CHECK_OK(D->download(ds, &got, d_out, sizeof got));
    CHECK_NEAR(got, want, 1e-9 * want);
    free(x);
    free_bufs();
}

/* ---- whole models ---- */

static void model_case(const char *text, int c, int h, int w, int classes, int rows) {
    char why[256] = "";
    sl_nn_spec_t spec;
    CHECK_OK(sl_nn_spec_parse(text, &spec, why, sizeof why));
    sl_nn_shape_t shape = {.channels = c, .height = h, .width = w, .classes = classes};
    sl_nn_model_t *mc = NULL, *md = NULL;
    CHECK_OK(sl_nn_model_new(cpu_be, &spec, &shape, rows, &mc, why, sizeof why));
    CHECK_OK(sl_nn_model_new(dev_be, &spec, &shape, rows, &md, why, sizeof why));
    if (!mc || !md)
        goto done;
    CHECK_OK(sl_nn_model_init_params(mc, 11));
    CHECK_OK(sl_nn_model_init_params(md, 11));
    mc->want_input_grad = md->want_input_grad = true;
    size_t in = (size_t)c * h * w * rows;
    float *x = rand_floats(in, 0, 1), *d_x = up(x, in * 4);
    int32_t *lab = malloc(rows * 4);
    for (int r = 0; r < rows; r++)
        lab[r] = (int32_t)(sl_rng_next(&rng) % classes);
    int32_t *d_lab = up(lab, rows * 4);
    double acc[2] = {0, 0}, *d_acc = up(acc, sizeof acc);
    for (int step = 0; step < 2; step++) {
        float *lc, *ld;
        CHECK_OK(sl_nn_model_forward(mc, x, rows, true, 77 + step, &lc));
        CHECK_OK(sl_nn_model_forward(md, d_x, rows, true, 77 + step, &ld));
        char what[128];
        snprintf(what, sizeof what, "%s logits", text);
        near_dev(what, lc, ld, (size_t)rows * classes, 1e-4, 1e-3);
        CHECK_OK(C->softmax_xent(cs, lc, lab, rows, classes, mc->gbuf[0], 1.0f / rows, acc));
        CHECK_OK(D->softmax_xent(ds, ld, d_lab, rows, classes, md->gbuf[0], 1.0f / rows, d_acc));
        CHECK_OK(sl_nn_model_backward(mc, x, mc->gbuf[0], rows, 77 + step));
        CHECK_OK(sl_nn_model_backward(md, d_x, md->gbuf[0], rows, 77 + step));
        snprintf(what, sizeof what, "%s parameter gradients", text);
        near_dev(what, mc->grads, md->grads, mc->param_count, 1e-4, 2e-3);
        CHECK(mc->input_grad && md->input_grad);
        if (mc->input_grad && md->input_grad) {
            snprintf(what, sizeof what, "%s input gradients", text);
            near_dev(what, mc->input_grad, md->input_grad, in, 1e-4, 2e-3);
        }
        /* eval mode too (BN running statistics, no dropout) */
        CHECK_OK(sl_nn_model_forward(mc, x, rows, false, 0, &lc));
        CHECK_OK(sl_nn_model_forward(md, d_x, rows, false, 0, &ld));
        snprintf(what, sizeof what, "%s eval logits", text);
        near_dev(what, lc, ld, (size_t)rows * classes, 1e-4, 1e-3);
    }
    double got[2];
    CHECK_OK(D->download(ds, got, d_acc, sizeof got));
    CHECK_NEAR(got[0], acc[0], 1e-3 * (acc[0] + 1));
    CHECK(got[1] == acc[1]);
    free(x);
    free(lab);
done:
    free_bufs();
    sl_nn_model_destroy(&mc);
    sl_nn_model_destroy(&md);
}

static void test_models(void) {
    model_case("mlp:256,128", 1, 28, 28, 10, 64);
    model_case("mlp:32,bn,dropout=0.3", 1, 6, 6, 4, 17);
    model_case("cnn:32,64", 1, 28, 28, 10, 8);
    model_case("cnn:4,8,k=3,pad=same,bn/fc:16,dropout=0.2", 2, 10, 10, 5, 9);
    model_case("cnn:3,k=3,stride=2,pool=3", 1, 13, 13, 3, 6);
}

/* ---- training runs ---- */

/* A learnable synthetic set: class k lights quadrant k of an 8x8 image. */
static sl_nn_data_t *synthetic(size_t count) {
    sl_nn_data_t *d = calloc(1, sizeof *d);
    d->shape = (sl_nn_shape_t){.channels = 1, .height = 8, .width = 8, .classes = 4};
    d->count = count;
    d->images_u8 = malloc(count * 64);
    d->labels = malloc(count * 4);
    d->scale = 1.0f / 255.0f;
    for (size_t i = 0; i < count; i++) {
        int k = (int)(sl_rng_next(&rng) % 4);
        d->labels[i] = k;
        for (int p = 0; p < 64; p++) {
            int y = p / 8, x = p % 8, q = (y >= 4) * 2 + (x >= 4);
            int v = (int)(sl_rng_next(&rng) % 160) + (q == k ? 40 : 0);
            d->images_u8[i * 64 + p] = (uint8_t)v;
        }
    }
    snprintf(d->name, sizeof d->name, "synthetic");
    return d;
}

static void free_data(sl_nn_data_t *d) {
    if (!d)
        return;
    free(d->images_u8);
    free(d->labels);
    free(d);
}

static void train_case(const char *model, sl_nn_opt_kind opt, float lr, const sl_nn_data_t *tr,
                       const sl_nn_data_t *te, size_t limit, int epochs, double acc_tol) {
    sl_nn_train_cfg_t cfg;
    sl_nn_train_cfg_init(&cfg);
    cfg.model = model;
    cfg.optimizer = opt;
    cfg.lr = lr;
    cfg.epochs = epochs;
    cfg.batch = 32;
    cfg.limit = limit;
    cfg.val_split = 0.1f;
    char why[256] = "";
    sl_nn_trainer_t *tc = NULL, *td = NULL;
    CHECK_OK(sl_nn_trainer_new(cpu_be, &cfg, tr, te, &tc, why, sizeof why));
    CHECK_OK(sl_nn_trainer_new(dev_be, &cfg, tr, te, &td, why, sizeof why));
    if (!tc || !td)
        goto done;
    for (int e = 0; e < epochs; e++) {
        sl_nn_epoch_t a, b;
        CHECK_OK(sl_nn_trainer_epoch(tc, &a, why, sizeof why));
        CHECK_OK(sl_nn_trainer_epoch(td, &b, why, sizeof why));
        printf("  %s epoch %d: cpu loss %.5f test %.4f, device loss %.5f test %.4f\n", model,
               e + 1, a.train_loss, a.test_acc, b.train_loss, b.test_acc);
        CHECK_NEAR(b.train_loss, a.train_loss, 2e-3 * (a.train_loss + 0.1));
        CHECK_NEAR(b.train_acc, a.train_acc, acc_tol);
        CHECK_NEAR(b.val_acc, a.val_acc, acc_tol);
        CHECK_NEAR(b.test_acc, a.test_acc, acc_tol);
        CHECK(b.samples == a.samples && b.seconds > 0);
    }
    size_t count = tc->model->param_count;
    float *pc = calloc(count, 4), *pd = calloc(count, 4);
    CHECK_OK(sl_nn_trainer_get_params(tc, pc, count));
    CHECK_OK(sl_nn_trainer_get_params(td, pd, count));
    char what[96];
    snprintf(what, sizeof what, "%s trained parameters", model);
    near(what, pc, pd, count, 2e-3, 2e-2);
    free(pc);
    free(pd);
done:
    sl_nn_trainer_destroy(&tc);
    sl_nn_trainer_destroy(&td);
}

static void test_training(void) {
    sl_nn_data_t *tr = synthetic(1000), *te = synthetic(300);
    train_case("mlp:32,16", SL_NN_OPT_SGD, 0.05f, tr, te, 0, 2, 0.03);
    train_case("cnn:4,k=3,pad=same/fc:16,bn", SL_NN_OPT_ADAM, 0.002f, tr, te, 0, 2, 0.03);
    free_data(tr);
    free_data(te);
    /* Fashion-MNIST, when installed: the benchmark's MLP on a subset (not
     * on the CPU emulator, whose reference sgemm would take half a minute). */
    if (strstr(sl_nn_backend_desc(dev_be), "emulation"))
        return;
    sl_nn_data_t *ftr = NULL, *fte = NULL;
    char why[256];
    if (sl_nn_data_load("fashion-mnist", &ftr, &fte, why, sizeof why) == SL_OK) {
        train_case("mlp:256,128", SL_NN_OPT_SGD, 0.05f, ftr, fte, 6000, 1, 0.01);
        sl_nn_data_destroy(&ftr);
        sl_nn_data_destroy(&fte);
    } else {
        printf("  fashion-mnist not installed: %s\n", why);
    }
}

/* ---- main ---- */

static sl_err open_err;   /* what opening the cuda backend gave */
static char open_why[512]; /* and why */

/* Opening either works or fails cleanly: SL_ENODEV (no driver, no GPU) or
 * SL_EUNSUPPORTED (the library is not built or cannot load). */
static void test_open(void) {
    open_err = sl_nn_backend_open("cuda", 0, &dev_be, open_why, sizeof open_why);
    if (open_err == SL_OK)
        CHECK_STR(sl_nn_backend_name(dev_be), "cuda");
    else
        CHECK_MSG(open_err == SL_ENODEV || open_err == SL_EUNSUPPORTED, "open cuda: %s (%s)",
                  sl_errname(open_err), open_why);
}

int main(void) {
    CHECK_OK(sl_init());
    /* Tests run from the repository root: point backend.c at this build's
     * library unless the caller already chose one. */
    const char *build = getenv("SL_BUILD_DIR");
    char path[1024];
    if (build && !getenv("SL_CUDA_BACKEND")) {
        snprintf(path, sizeof path, "%s/libstarling_cuda.so", build);
        if (access(path, R_OK) == 0)
            setenv("SL_CUDA_BACKEND", path, 1);
    }
    sl_test_run("open", test_open);
    if (open_err != SL_OK) {
        if (sl_test_failures)
            return sl_test_finish();
        const char *on_cpu = getenv("SL_NN_CUDA_TEST_ON_CPU");
        if (!on_cpu || strcmp(on_cpu, "1") != 0) {
            printf("skipped: %s\n", open_why[0] ? open_why : sl_strerror(open_err));
            return SL_TEST_SKIP;
        }
        printf("no cuda device (%s): checking this test with cpu against cpu\n", open_why);
        char why[256] = "";
        CHECK_OK(sl_nn_backend_open("cpu", 0, &dev_be, why, sizeof why));
    }
    char why[256] = "";
    CHECK_OK(sl_nn_backend_open("cpu", 0, &cpu_be, why, sizeof why));
    if (!dev_be || !cpu_be)
        return 1;
    printf("device: %s\n", sl_nn_backend_desc(dev_be));
    C = sl_nn_backend_ops(cpu_be);
    D = sl_nn_backend_ops(dev_be);
    cs = sl_nn_backend_self(cpu_be);
    ds = sl_nn_backend_self(dev_be);
    sl_rng_seed(&rng, 20261122);
    sl_test_run("memory", test_memory);
    sl_test_run("sgemm", test_sgemm);
    sl_test_run("axpby", test_axpby);
    sl_test_run("gather", test_gather);
    sl_test_run("swap_axes", test_swap_axes);
    sl_test_run("bias_act", test_bias_act);
    sl_test_run("im2col", test_im2col);
    sl_test_run("maxpool", test_maxpool);
    sl_test_run("batchnorm", test_batchnorm);
    sl_test_run("dropout", test_dropout);
    sl_test_run("softmax_xent", test_softmax_xent);
    sl_test_run("opt_step", test_opt_step);
    sl_test_run("sum_squares", test_sum_squares);
    sl_test_run("models", test_models);
    sl_test_run("training", test_training);
    sl_nn_backend_destroy(&dev_be);
    sl_nn_backend_destroy(&cpu_be);
    return sl_test_finish();
}
