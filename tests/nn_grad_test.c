/* Finite-difference gradient checks for every layer of the training
 * engine, on the cpu backend: dense, conv2d (padding, stride, several
 * input channels in both layouts), max-pool (2x2 fast path and general),
 * ReLU, batch norm (conv and dense), dropout (a fixed seeded mask), flatten
 * and softmax cross-entropy; gradients of every parameter and of the
 * input. Plus the optimizer rules against a straight re-derivation, and
 * the cpu backend's threaded sgemm against its single-threaded one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "nn/ops_math.h"
#include "testlib.h"

#define ROWS 4

/* A model on the cpu backend with a random input batch and labels. */
typedef struct {
    sl_nn_backend_t *be;  /* cpu backend */
    sl_nn_model_t *m;     /* the model under test */
    float *x;             /* input [ROWS][C*H*W] */
    int32_t labels[ROWS]; /* labels */
    size_t in_count;      /* floats in x */
    sl_rng_t rng;         /* parameter randomisation */
    uint8_t *real;        /* 1 where a flat parameter is a real one (not a gap) */
} fixture_t;

static sl_err randomize(void *ctx, const char *name, bool is_stat, size_t offset,
                        const int *shape, int ndim) {
    fixture_t *f = ctx;
    if (is_stat)
        return SL_OK;
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)shape[i];
    for (size_t i = 0; i < n; i++) {
        f->m->params[offset + i] = (float)(sl_rng_double(&f->rng) - 0.5) * 1.2f;
        f->real[offset + i] = 1;
    }
    return SL_OK;
}

static bool setup(fixture_t *f, const char *spec_text, int c, int h, int w, int classes,
                  uint64_t seed) {
    memset(f, 0, sizeof *f);
    char why[256] = "";
    sl_nn_spec_t spec;
    CHECK_OK(sl_nn_spec_parse(spec_text, &spec, why, sizeof why));
    CHECK_OK(sl_nn_backend_open("cpu", 0, &f->be, why, sizeof why));
    sl_nn_shape_t shape = {.channels = c, .height = h, .width = w, .classes = classes};
    sl_err err = sl_nn_model_new(f->be, &spec, &shape, ROWS, &f->m, why, sizeof why);
    CHECK_MSG(err == SL_OK, "%s: %s", spec_text, why);
    if (err != SL_OK)
        return false;
    CHECK_OK(sl_nn_model_init_params(f->m, 7));
    /* Random (not He-sized) parameters so BN gammas, biases and every
     * weight matter and no ReLU sits exactly at its kink. */
    sl_rng_seed(&f->rng, seed);
    f->real = calloc(f->m->param_count, 1);
    CHECK_OK(sl_nn_model_tensors(f->m, randomize, f));
    sl_rng_t rng = f->rng;
    f->in_count = (size_t)c * h * w * ROWS;
    f->x = malloc(f->in_count * sizeof(float));
    for (size_t i = 0; i < f->in_count; i++)
        f->x[i] = (float)(sl_rng_double(&rng) * 2.0 - 1.0);
    for (int r = 0; r < ROWS; r++)
        f->labels[r] = (int32_t)(r % classes);
    f->m->want_input_grad = true;
    return true;
}

static void teardown(fixture_t *f) {
    sl_nn_model_destroy(&f->m);
    sl_nn_backend_destroy(&f->be);
    free(f->x);
    free(f->real);
}

/* Mean loss of a training-mode forward pass with the fixed dropout seed. */
static double loss_of(fixture_t *f) {
    float *logits;
    double acc[2] = {0, 0};
    CHECK_OK(sl_nn_model_forward(f->m, f->x, ROWS, true, 1234, &logits));
    CHECK_OK(sl_nn_backend_cpu.softmax_xent(f->be->self, logits, f->labels, ROWS,
                                            f->m->input.classes, NULL, 1.0f, acc));
    return acc[0] / ROWS;
}

static bool close_enough(double num, double ana) {
    double scale = fabs(num) > fabs(ana) ? fabs(num) : fabs(ana);
    return fabs(num - ana) <= 2e-3 + 3e-2 * scale;
}

/* A point where the one-sided slopes disagree sits on a kink of ReLU or
 * max-pool (the loss is not differentiable there): it is skipped. */
static bool at_kink(double lp, double l0, double lm, double h) {
    double right = (lp - l0) / h, left = (l0 - lm) / h;
    return !close_enough(right, left);
}

/* Analytic gradients by backward, then central differences for every
 * parameter (alignment gaps excluded) and every input value. */
static void check_model_full(const char *spec, int c, int h, int w, int classes, uint64_t seed,
                             int chunk) {
    fixture_t f;
    if (!setup(&f, spec, c, h, w, classes, seed)) {
        teardown(&f);
        return;
    }
    sl_nn_model_t *m = f.m;
    /* Conv layers in chunks of `chunk` samples (im2col recomputed in
     * backward, dW accumulated over chunks); 0 keeps the built size. */
    for (int i = 0; chunk && i < m->count; i++)
        if (m->layers[i].kind == SL_NN_L_CONV && m->layers[i].chunk > chunk)
            m->layers[i].chunk = chunk;
    float *logits;
    double acc[2] = {0, 0};
    CHECK_OK(sl_nn_model_forward(m, f.x, ROWS, true, 1234, &logits));
    CHECK_OK(sl_nn_backend_cpu.softmax_xent(f.be->self, logits, f.labels, ROWS, classes,
                                            m->gbuf[0], 1.0f / ROWS, acc));
    CHECK_OK(sl_nn_model_backward(m, f.x, m->gbuf[0], ROWS, 1234));
    float *grads = malloc(m->param_count * sizeof(float));
    memcpy(grads, m->grads, m->param_count * sizeof(float));
    float *dx = malloc(f.in_count * sizeof(float));
    CHECK(m->input_grad != NULL);
    if (m->input_grad)
        memcpy(dx, m->input_grad, f.in_count * sizeof(float));
    const float hstep = 1e-3f;
    const double l0 = loss_of(&f);
    int bad = 0, checked = 0, kinks = 0;
    for (size_t i = 0; i < m->param_count; i++) {
        float keep = m->params[i];
        if (!f.real[i]) {
            CHECK(keep == 0.0f && grads[i] == 0.0f);
            continue; /* alignment gap */
        }
        m->params[i] = keep + hstep;
        double lp = loss_of(&f);
        m->params[i] = keep - hstep;
        double lm = loss_of(&f);
        m->params[i] = keep;
        double num = (lp - lm) / (2.0 * hstep);
        checked++;
        if (at_kink(lp, l0, lm, hstep)) {
            kinks++;
            continue;
        }
        if (!close_enough(num, grads[i]) && bad++ < 5)
            sl_test_fail(__FILE__, __LINE__, "%s: d/dparam[%zu]: numeric %g, backward %g", spec,
                         i, num, (double)grads[i]);
    }
    CHECK_MSG(checked > 0, "%s: no parameter checked", spec);
    for (size_t i = 0; i < f.in_count; i++) {
        float keep = f.x[i];
        f.x[i] = keep + hstep;
        double lp = loss_of(&f);
        f.x[i] = keep - hstep;
        double lm = loss_of(&f);
        f.x[i] = keep;
        double num = (lp - lm) / (2.0 * hstep);
        checked++;
        if (at_kink(lp, l0, lm, hstep)) {
            kinks++;
            continue;
        }
        if (!close_enough(num, dx[i]) && bad++ < 10)
            sl_test_fail(__FILE__, __LINE__, "%s: d/dx[%zu]: numeric %g, backward %g", spec, i,
                         num, (double)dx[i]);
    }
    CHECK_MSG(kinks * 10 <= checked, "%s: %d of %d points sit on a ReLU/max kink", spec, kinks,
              checked);
    free(grads);
    free(dx);
    teardown(&f);
}

static void check_model_seed(const char *spec, int c, int h, int w, int classes, uint64_t seed) {
    check_model_full(spec, c, h, w, classes, seed, 0);
}

static void check_model(const char *spec, int c, int h, int w, int classes) {
    check_model_seed(spec, c, h, w, classes, 99);
}

static void test_dense(void) { check_model("mlp:5", 1, 3, 3, 3); }
static void test_dense_two_layers(void) { check_model("mlp:6,4", 2, 2, 2, 3); }
/* Seed 99 puts a BN output on the ReLU kink for one unit; seed 1 does not. */
static void test_dense_batchnorm(void) { check_model_seed("mlp:6,bn", 1, 3, 3, 3, 1); }
static void test_dense_dropout(void) { check_model("mlp:8,dropout=0.3", 1, 3, 3, 3); }
static void test_logistic(void) { check_model("linear", 1, 2, 3, 4); }
static void test_conv_nchw_channels(void) { check_model("cnn:3,k=3,pool=1", 2, 5, 5, 3); }
static void test_conv_pad_pool(void) { check_model("cnn:3,k=3,pad=same,pool=2", 1, 6, 6, 3); }
static void test_conv_stride_cnhw(void) {
    check_model("cnn:2,3,k=3,pad=1,stride=2,pool=1", 2, 7, 7, 3);
}
static void test_conv_general_pool(void) { check_model("cnn:2,k=2,pool=3", 1, 7, 7, 3); }
static void test_conv_odd_pool(void) { check_model("cnn:2,k=2,pool=2", 1, 6, 6, 3); }
static void test_conv_bn_flatten_dense(void) {
    check_model("cnn:3,k=3,bn,pool=2/fc:5,bn,dropout=0.2", 2, 6, 6, 3);
}
static void test_conv_chunked(void) {
    check_model_full("cnn:2,3,k=3,pad=1,stride=2,pool=1", 2, 7, 7, 3, 99, 1);
    check_model_full("cnn:3,k=3,bn,pool=2/fc:5", 2, 6, 6, 3, 99, 3);
}
static void test_conv_dropout(void) { check_model("cnn:2,4,k=3,pool=1,dropout=0.25", 1, 6, 6, 2); }

/* The optimizer rules, re-derived step by step. */
static void test_optimizers(void) {
    sl_nn_train_cfg_t cfg;
    sl_nn_train_cfg_init(&cfg);
    cfg.lr = 0.1f;
    cfg.momentum = 0.9f;
    cfg.weight_decay = 0.01f;
    for (int kind = 0; kind < 4; kind++) {
        cfg.optimizer = (sl_nn_opt_kind)kind;
        float w = 1.0f, s1 = 0.0f, s2 = 0.0f;
        double rw = 1.0, rm = 0.0, rv = 0.0;
        for (int t = 1; t <= 5; t++) {
            float g = 0.5f - 0.1f * t;
            sl_nn_opt_step_t st;
            sl_nn_optim_step_params(&cfg, cfg.lr, (uint64_t)t, &st);
            sl_op_opt(&w, g, &s1, &s2, &st);
            double gp = g + (kind == SL_NN_OPT_ADAMW ? 0.0 : 0.01 * rw);
            if (kind <= SL_NN_OPT_NESTEROV) {
                rm = 0.9 * rm + gp;
                rw -= 0.1 * (kind == SL_NN_OPT_NESTEROV ? gp + 0.9 * rm : rm);
            } else {
                if (kind == SL_NN_OPT_ADAMW)
                    rw -= 0.1 * 0.01 * rw;
                rm = 0.9 * rm + 0.1 * gp;
                rv = 0.999 * rv + 0.001 * gp * gp;
                double mh = rm / (1 - pow(0.9, t)), vh = rv / (1 - pow(0.999, t));
                rw -= 0.1 * mh / (sqrt(vh) + 1e-8);
            }
            CHECK_MSG(fabs(w - rw) < 1e-5, "%s step %d: %g vs %g",
                      sl_nn_optim_name((sl_nn_opt_kind)kind), t, (double)w, rw);
        }
    }
}

/* Schedules: warm-up ramps, step decays, cosine ends at 0. */
static void test_schedules(void) {
    sl_nn_train_cfg_t cfg;
    sl_nn_train_cfg_init(&cfg);
    cfg.lr = 1.0f;
    cfg.epochs = 10;
    CHECK_NEAR(sl_nn_optim_lr(&cfg, 3, 5, 10), 1.0, 1e-12);
    cfg.schedule = SL_NN_SCHED_STEP;
    cfg.step_epochs = 3;
    cfg.step_gamma = 0.5f;
    CHECK_NEAR(sl_nn_optim_lr(&cfg, 2, 9, 10), 1.0, 1e-12);
    CHECK_NEAR(sl_nn_optim_lr(&cfg, 3, 0, 10), 0.5, 1e-12);
    CHECK_NEAR(sl_nn_optim_lr(&cfg, 9, 0, 10), 0.125, 1e-12);
    cfg.schedule = SL_NN_SCHED_COSINE;
    CHECK_NEAR(sl_nn_optim_lr(&cfg, 0, 0, 10), 1.0, 1e-12);
    CHECK_NEAR(sl_nn_optim_lr(&cfg, 5, 0, 10), 0.5, 1e-9);
    CHECK(sl_nn_optim_lr(&cfg, 9, 9, 10) < 0.01);
    cfg.warmup_epochs = 2;
    CHECK_NEAR(sl_nn_optim_lr(&cfg, 0, 0, 10), 1.0 / 20, 1e-12);
    CHECK_NEAR(sl_nn_optim_lr(&cfg, 1, 9, 10), 1.0, 1e-12);
    CHECK_NEAR(sl_nn_optim_lr(&cfg, 2, 0, 10), 1.0, 1e-9);
}

/* The dropout mask is a pure function of (seed, index): the rate is right
 * and the same seed gives the same mask. */
static void test_dropout_mask(void) {
    int kept = 0;
    for (uint64_t i = 0; i < 100000; i++) {
        int k = sl_op_dropout_keep(42, i, 0.3f);
        kept += k;
        CHECK(k == sl_op_dropout_keep(42, i, 0.3f));
    }
    CHECK_MSG(kept > 69000 && kept < 71000, "kept %d of 100000 at p=0.3", kept);
    CHECK(sl_op_dropout_keep(1, 5, 0.0f));
}

/* The window ops (im2col, col2im, max-pool forward and backward) are split
 * over the cpu backend's threads by samples: every layout (NCHW, CNHW),
 * dense and padded/strided window gives bit-for-bit the 1-thread result
 * with 2 and 3 threads, odd batch sizes included (every case is above
 * the size the backend splits at). */
static void test_window_split(void) {
    /* channels, h, w, k, stride, pad, batch, cnhw */
    static const int cases[][8] = {{1, 28, 28, 5, 1, 0, 37, 0}, {32, 12, 12, 5, 1, 0, 21, 1},
                                   {3, 11, 9, 3, 2, 1, 101, 0}, {4, 24, 24, 2, 2, 0, 19, 1},
                                   {2, 9, 9, 3, 3, 0, 300, 0}};
    char why[256] = "";
    sl_nn_backend_t *be[3] = {NULL, NULL, NULL};
    for (int t = 0; t < 3; t++)
        CHECK_OK(sl_nn_backend_open("cpu", t + 1, &be[t], why, sizeof why));
    if (!be[0] || !be[1] || !be[2])
        return;
    sl_rng_t rng;
    sl_rng_seed(&rng, 12);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int *c = cases[ci];
        sl_nn_window_t win = {.channels = c[0], .batch = c[6], .h = c[1], .w = c[2], .kh = c[3],
                              .kw = c[3], .stride = c[4], .pad = c[5]};
        win.out_h = (c[1] + 2 * c[5] - c[3]) / c[4] + 1;
        win.out_w = (c[2] + 2 * c[5] - c[3]) / c[4] + 1;
        win.plane_stride_c = c[7] ? c[6] : 1;
        win.plane_stride_n = c[7] ? 1 : c[0];
        bool pool = c[3] == c[4] && c[5] == 0;
        size_t nx = (size_t)c[0] * c[1] * c[2] * c[6];
        size_t ny = (size_t)c[0] * win.out_h * win.out_w * c[6];
        size_t ncol = (size_t)c[0] * c[3] * c[3] * win.out_h * win.out_w * c[6];
        float *x = malloc(nx * sizeof *x), *dy = malloc(ny * sizeof *dy);
        float *col[3], *dx[3], *y[3];
        int32_t *arg[3];
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)(sl_rng_double(&rng) - 0.5);
        for (size_t i = 0; i < ny; i++)
            dy[i] = (float)(sl_rng_double(&rng) - 0.5);
        for (int t = 0; t < 3; t++) {
            col[t] = malloc(ncol * sizeof(float));
            dx[t] = malloc(nx * sizeof(float));
            y[t] = malloc(ny * sizeof(float));
            arg[t] = malloc(ny * sizeof(int32_t));
            const sl_nn_backend_ops_t *o = be[t]->ops;
            CHECK_OK(o->im2col(be[t]->self, x, col[t], &win));
            CHECK_OK(o->col2im(be[t]->self, col[t], dx[t], &win));
            if (pool) {
                CHECK_OK(o->maxpool_fwd(be[t]->self, x, y[t], arg[t], &win));
                CHECK_OK(o->maxpool_bwd(be[t]->self, dy, arg[t], dx[t], &win));
            }
        }
        for (int t = 1; t < 3; t++) {
            CHECK_MSG(!memcmp(col[0], col[t], ncol * sizeof(float)),
                      "case %zu: im2col with %d threads differs", ci, t + 1);
            CHECK_MSG(!memcmp(dx[0], dx[t], nx * sizeof(float)),
                      "case %zu: col2im/pool backward with %d threads differs", ci, t + 1);
            if (pool)
                CHECK_MSG(!memcmp(y[0], y[t], ny * sizeof(float)) &&
                              !memcmp(arg[0], arg[t], ny * sizeof(int32_t)),
                          "case %zu: max-pool with %d threads differs", ci, t + 1);
        }
        for (int t = 0; t < 3; t++) {
            free(col[t]);
            free(dx[t]);
            free(y[t]);
            free(arg[t]);
        }
        free(x);
        free(dy);
    }
    for (int t = 0; t < 3; t++)
        sl_nn_backend_destroy(&be[t]);
}

/* The cpu backend splits a large sgemm over its threads (column or row
 * blocks, no split sums): for every shape and transpose the product is
 * bit-for-bit reproducible for a given thread count, equals the
 * single-threaded one up to rounding (OpenBLAS's kernels round a block's
 * edge tiles differently), and leaves C outside [m][n] alone. */
static void test_sgemm_split(void) {
    static const int shapes[][3] = {{64, 8192, 800}, {800, 4608, 64}, {64, 800, 4608},
                                    {32, 25, 73728}, {785, 257, 129}, {129, 37, 1000},
                                    {10, 128, 128},  {513, 300, 33}};
    char why[256] = "";
    sl_nn_backend_t *one = NULL, *more[2] = {NULL, NULL};
    CHECK_OK(sl_nn_backend_open("cpu", 1, &one, why, sizeof why));
    CHECK_OK(sl_nn_backend_open("cpu", 2, &more[0], why, sizeof why));
    CHECK_OK(sl_nn_backend_open("cpu", 3, &more[1], why, sizeof why));
    sl_rng_t rng;
    sl_rng_seed(&rng, 11);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            bool ta = t & 1, tb = t & 2;
            int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
            size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb,
                   nc = (size_t)m * ldc;
            float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
            float *c0 = malloc(nc * sizeof *c0), *c1 = malloc(nc * sizeof *c1);
            for (size_t i = 0; i < na; i++)
                a[i] = (float)(sl_rng_double(&rng) - 0.5);
            for (size_t i = 0; i < nb; i++)
                b[i] = (float)(sl_rng_double(&rng) - 0.5);
            for (size_t i = 0; i < nc; i++)
                c0[i] = (float)(sl_rng_double(&rng) - 0.5);
            float beta = t == 1 ? 0.0f : 0.5f;
            memcpy(c1, c0, nc * sizeof *c0);
            CHECK_OK(one->ops->sgemm(one->self, ta, tb, m, n, k, 0.75f, a, lda, b, ldb, beta,
                                     c0, ldc));
            for (int w = 0; w < 2; w++) {
                float *c2 = malloc(nc * sizeof *c2), *c3 = malloc(nc * sizeof *c3);
                memcpy(c2, c1, nc * sizeof *c1);
                memcpy(c3, c1, nc * sizeof *c1);
                CHECK_OK(more[w]->ops->sgemm(more[w]->self, ta, tb, m, n, k, 0.75f, a, lda, b,
                                             ldb, beta, c2, ldc));
                CHECK_OK(more[w]->ops->sgemm(more[w]->self, ta, tb, m, n, k, 0.75f, a, lda, b,
                                             ldb, beta, c3, ldc));
                CHECK_MSG(!memcmp(c2, c3, nc * sizeof *c2),
                          "sgemm %dx%dx%d ta=%d tb=%d: %d threads not reproducible", m, n, k,
                          ta, tb, w + 2);
                double worst = 0;
                for (size_t i = 0; i < nc; i++)
                    if (fabs((double)c0[i] - c2[i]) > worst)
                        worst = fabs((double)c0[i] - c2[i]);
                /* Outside [m][n] (the ldc gaps) nothing was written. */
                for (int r = 0; r < m; r++)
                    CHECK(!memcmp(c1 + (size_t)r * ldc + n, c2 + (size_t)r * ldc + n,
                                  (size_t)(ldc - n) * sizeof *c1));
                CHECK_MSG(worst <= 1e-6 * k, "sgemm %dx%dx%d ta=%d tb=%d: %d threads differ "
                          "from 1 by %g", m, n, k, ta, tb, w + 2, worst);
                free(c2);
                free(c3);
            }
            free(a);
            free(b);
            free(c0);
            free(c1);
        }
    sl_nn_backend_destroy(&one);
    sl_nn_backend_destroy(&more[0]);
    sl_nn_backend_destroy(&more[1]);
}

/* The sparse-operand product (cpu_sparse.c, taken when one operand is
 * mostly zeros): SL_NN_CPU_SPARSE=always forces it, never forbids it. On
 * shapes of the engine's products (MLP, conv weight and input gradients)
 * and odd ones, with A or B sparse (half, a tenth, none or all of it
 * nonzero, whole zero rows), every transposition, beta 0 and 1: equal to
 * the dense product within float tolerance, bit-for-bit the same for 1, 2
 * and 3 threads, and nothing written outside C's [m][n]. */
static void test_sgemm_sparse(void) {
    static const int shapes[][3] = {{128, 256, 784}, {784, 256, 128}, {128, 256, 128},
                                    {64, 800, 1280}, {800, 1280, 64}, {37, 91, 300},
                                    {200, 33, 70},   {9, 1000, 130}};
    static const double densities[] = {0.5, 0.1, 0.0, 1.0};
    char why[256] = "";
    sl_nn_backend_t *dense = NULL, *sp[3] = {NULL, NULL, NULL};
    setenv("SL_NN_CPU_SPARSE", "never", 1);
    CHECK_OK(sl_nn_backend_open("cpu", 1, &dense, why, sizeof why));
    setenv("SL_NN_CPU_SPARSE", "always", 1);
    for (int w = 0; w < 3; w++)
        CHECK_OK(sl_nn_backend_open("cpu", w + 1, &sp[w], why, sizeof why));
    unsetenv("SL_NN_CPU_SPARSE");
    sl_rng_t rng;
    sl_rng_seed(&rng, 12);
    int runs = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 16; t++) {
            int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            bool ta = t & 1, tb = t & 2, sparse_b = t & 4;
            float beta = t & 8 ? 1.0f : 0.0f;
            double dens = densities[(s + (size_t)t) % 4];
            int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
            int arows = ta ? k : m, brows = tb ? n : k;
            size_t na = (size_t)arows * lda, nb = (size_t)brows * ldb, nc = (size_t)m * ldc;
            float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
            float *c[5];
            for (int q = 0; q < 5; q++)
                c[q] = malloc(nc * sizeof *c[q]);
            for (size_t i = 0; i < na; i++) {
                bool keep = sparse_b || sl_rng_double(&rng) < dens;
                a[i] = keep ? (float)(sl_rng_double(&rng) - 0.5) : 0.0f;
            }
            for (size_t i = 0; i < nb; i++) {
                bool keep = !sparse_b || sl_rng_double(&rng) < dens;
                b[i] = keep ? (float)(sl_rng_double(&rng) - 0.5) : 0.0f;
            }
            /* A few whole zero rows in the sparse operand's storage. */
            float *z = sparse_b ? b : a;
            int zrows = sparse_b ? brows : arows, zld = sparse_b ? ldb : lda;
            for (int r = 0; r < zrows; r += 7)
                memset(z + (size_t)r * zld, 0, (size_t)zld * sizeof *z);
            for (size_t i = 0; i < nc; i++)
                c[0][i] = (float)(sl_rng_double(&rng) - 0.5);
            for (int q = 1; q < 5; q++)
                memcpy(c[q], c[0], nc * sizeof *c[0]);
            CHECK_OK(dense->ops->sgemm(dense->self, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta,
                                       c[1], ldc));
            for (int w = 0; w < 3; w++)
                CHECK_OK(sp[w]->ops->sgemm(sp[w]->self, ta, tb, m, n, k, 1.0f, a, lda, b, ldb,
                                           beta, c[2 + w], ldc));
            double worst = 0;
            for (int r = 0; r < m; r++) {
                for (int j = 0; j < n; j++) {
                    double d = fabs((double)c[1][(size_t)r * ldc + j] - c[2][(size_t)r * ldc + j]);
                    worst = d > worst ? d : worst;
                }
                CHECK(!memcmp(c[0] + (size_t)r * ldc + n, c[2] + (size_t)r * ldc + n,
                              (size_t)(ldc - n) * sizeof *c[0]));
            }
            CHECK_MSG(worst <= 1e-6 * k + 1e-6,
                      "sparse sgemm %dx%dx%d ta=%d tb=%d sparse %s density %.1f beta %g: "
                      "differs from dense by %g",
                      m, n, k, ta, tb, sparse_b ? "B" : "A", dens, beta, worst);
            for (int w = 1; w < 3; w++)
                CHECK_MSG(!memcmp(c[2], c[2 + w], nc * sizeof *c[2]),
                          "sparse sgemm %dx%dx%d ta=%d tb=%d: %d threads differ from 1", m, n, k,
                          ta, tb, w + 1);
            runs++;
            free(a);
            free(b);
            for (int q = 0; q < 5; q++)
                free(c[q]);
        }
    CHECK(runs == 8 * 16);
    sl_nn_backend_destroy(&dense);
    for (int w = 0; w < 3; w++)
        sl_nn_backend_destroy(&sp[w]);
}

/* The element-wise ops (minibatch gather, bias+activation forward and
 * backward, the optimizer step) are split over the cpu backend's threads
 * by rows, channels or elements while the pool polls
 * (SL_NN_CPU_POLL=always forces that here, whatever the machine's load):
 * 2 and 3 threads give bit-for-bit the 1-thread result, for dense (rows of
 * features) and conv (CNHW planes) views and odd sizes. */
static void test_elementwise_split(void) {
    char why[256] = "";
    setenv("SL_NN_CPU_POLL", "always", 1);
    sl_nn_backend_t *be[3] = {NULL, NULL, NULL};
    for (int t = 0; t < 3; t++)
        CHECK_OK(sl_nn_backend_open("cpu", t + 1, &be[t], why, sizeof why));
    unsetenv("SL_NN_CPU_POLL");
    if (!be[0] || !be[1] || !be[2])
        return;
    sl_rng_t rng;
    sl_rng_seed(&rng, 13);
    /* outer, channels, inner: dense rows, conv CNHW planes, odd shapes */
    static const int views[][3] = {{128, 256, 1}, {131, 77, 1}, {1, 32, 24 * 24 * 65},
                                   {1, 7, 4099}, {3, 5, 3001}};
    for (size_t v = 0; v < sizeof views / sizeof views[0]; v++) {
        int outer = views[v][0], ch = views[v][1], inner = views[v][2];
        size_t n = (size_t)outer * ch * inner;
        float *x = malloc(n * sizeof *x), *bias = malloc((size_t)ch * sizeof *bias);
        for (size_t i = 0; i < n; i++)
            x[i] = (float)(sl_rng_double(&rng) - 0.5);
        for (int c = 0; c < ch; c++)
            bias[c] = (float)(sl_rng_double(&rng) - 0.5);
        float *y[3], *dy[3], *db[3];
        for (int t = 0; t < 3; t++) {
            const sl_nn_backend_ops_t *o = be[t]->ops;
            y[t] = malloc(n * sizeof(float));
            dy[t] = malloc(n * sizeof(float));
            db[t] = malloc((size_t)ch * sizeof(float));
            memcpy(y[t], x, n * sizeof(float));
            CHECK_OK(o->bias_act_fwd(be[t]->self, y[t], bias, outer, ch, inner, SL_NN_ACT_RELU));
            for (size_t i = 0; i < n; i++)
                dy[t][i] = x[(i * 7919) % n];
            CHECK_OK(o->bias_act_bwd(be[t]->self, dy[t], y[t], db[t], outer, ch, inner,
                                     SL_NN_ACT_RELU));
        }
        for (int t = 1; t < 3; t++)
            CHECK_MSG(!memcmp(y[0], y[t], n * sizeof(float)) &&
                          !memcmp(dy[0], dy[t], n * sizeof(float)) &&
                          !memcmp(db[0], db[t], (size_t)ch * sizeof(float)),
                      "bias_act %dx%dx%d with %d threads differs", outer, ch, inner, t + 1);
        for (int t = 0; t < 3; t++) {
            free(y[t]);
            free(dy[t]);
            free(db[t]);
        }
        free(x);
        free(bias);
    }
    /* gather: 301 rows of 784 bytes in a shuffled order */
    int rows = 301, cols = 784, total = 1000;
    uint8_t *img = malloc((size_t)total * cols);
    int32_t *idx = malloc((size_t)total * sizeof *idx);
    for (size_t i = 0; i < (size_t)total * cols; i++)
        img[i] = (uint8_t)sl_rng_next(&rng);
    for (int i = 0; i < total; i++)
        idx[i] = (int32_t)((i * 389) % total);
    float *g[3];
    for (int t = 0; t < 3; t++) {
        g[t] = malloc((size_t)rows * cols * sizeof(float));
        CHECK_OK(be[t]->ops->gather_u8(be[t]->self, g[t], img, idx, 17, rows, cols, 1 / 255.0f,
                                       -0.25f));
    }
    for (int t = 1; t < 3; t++)
        CHECK_MSG(!memcmp(g[0], g[t], (size_t)rows * cols * sizeof(float)),
                  "gather with %d threads differs", t + 1);
    CHECK(g[0][5] == img[(size_t)idx[17] * cols + 5] * (1 / 255.0f) - 0.25f);
    for (int t = 0; t < 3; t++)
        free(g[t]);
    free(img);
    free(idx);
    /* optimizer: every rule over an odd count */
    size_t count = 100003;
    for (int kind = SL_NN_OPT_SGD; kind <= SL_NN_OPT_ADAMW; kind++) {
        sl_nn_opt_step_t st = {.kind = kind, .lr = 0.01f, .momentum = 0.9f,
                               .weight_decay = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f,
                               .eps = 1e-8f, .bias_corr1 = 10.0f, .bias_corr2 = 1000.0f};
        float *w[3], *s1[3], *s2[3], *grad = malloc(count * sizeof *grad);
        for (size_t i = 0; i < count; i++)
            grad[i] = (float)(sl_rng_double(&rng) - 0.5);
        for (int t = 0; t < 3; t++) {
            w[t] = malloc(count * sizeof(float));
            s1[t] = malloc(count * sizeof(float));
            s2[t] = malloc(count * sizeof(float));
            for (size_t i = 0; i < count; i++) {
                w[t][i] = grad[(i * 31) % count];
                s1[t][i] = grad[(i * 17) % count] * 0.1f;
                s2[t][i] = grad[i] * grad[i];
            }
            for (int step = 0; step < 3; step++)
                CHECK_OK(be[t]->ops->opt_step(be[t]->self, w[t], grad, s1[t],
                                              kind >= SL_NN_OPT_ADAM ? s2[t] : NULL, count,
                                              &st));
        }
        for (int t = 1; t < 3; t++)
            CHECK_MSG(!memcmp(w[0], w[t], count * sizeof(float)) &&
                          !memcmp(s1[0], s1[t], count * sizeof(float)) &&
                          !memcmp(s2[0], s2[t], count * sizeof(float)),
                      "optimizer %d with %d threads differs", kind, t + 1);
        for (int t = 0; t < 3; t++) {
            free(w[t]);
            free(s1[t]);
            free(s2[t]);
        }
        free(grad);
    }
    for (int t = 0; t < 3; t++)
        sl_nn_backend_destroy(&be[t]);
}

int main(void) {
    CHECK_OK(sl_init());
    sl_test_run("dense", test_dense);
    sl_test_run("dense_two_layers", test_dense_two_layers);
    sl_test_run("dense_batchnorm", test_dense_batchnorm);
    sl_test_run("dense_dropout", test_dense_dropout);
    sl_test_run("logistic", test_logistic);
    sl_test_run("conv_nchw_channels", test_conv_nchw_channels);
    sl_test_run("conv_pad_pool", test_conv_pad_pool);
    sl_test_run("conv_stride_cnhw", test_conv_stride_cnhw);
    sl_test_run("conv_general_pool", test_conv_general_pool);
    sl_test_run("conv_odd_pool", test_conv_odd_pool);
    sl_test_run("conv_bn_flatten_dense", test_conv_bn_flatten_dense);
    sl_test_run("conv_dropout", test_conv_dropout);
    sl_test_run("conv_chunked", test_conv_chunked);
    sl_test_run("optimizers", test_optimizers);
    sl_test_run("schedules", test_schedules);
    sl_test_run("dropout_mask", test_dropout_mask);
    sl_test_run("sgemm_split", test_sgemm_split);
    sl_test_run("sgemm_sparse", test_sgemm_sparse);
    sl_test_run("window_split", test_window_split);
    sl_test_run("elementwise_split", test_elementwise_split);
    return sl_test_finish();
}
