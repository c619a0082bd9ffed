/* Starling nn: the compute backend interface.
 *
 * One table of function pointers with designated initializers (nng's
 * transport ops), two implementations: `cpu` (src/nn/backend_cpu.c,
 * OpenBLAS) and `cuda` (src/nn/cuda/ (*.cu files), cuBLAS plus kernels, built into
 * libstarling_cuda.so and dlopen()ed by src/nn/backend.c). The training
 * engine never touches memory through a device pointer: it calls these ops.
 *
 * Memory model
 *  - A "device pointer" is what `alloc` returned (plus an element offset):
 *    host memory for cpu, GPU global memory for cuda. The engine does
 *    pointer arithmetic on it (`buf + off`) but never dereferences it.
 *  - `upload`/`download` are the only host<->device transfers. The engine
 *    uploads the data set once, the shuffle permutation once per epoch, and
 *    downloads the metric accumulators once per epoch; everything inside an
 *    epoch (gather a minibatch, forward, backward, optimizer step, metric
 *    accumulation) is ops on device pointers, so a cuda backend queues it
 *    all on one stream with no host round-trip.
 *  - Ops are ordered: each sees the effects of every op called before it
 *    on the same backend (one in-order stream). `sync` waits for all of
 *    them and returns the first deferred error.
 *  - `host_visible` (cpu) says device pointers are host pointers: the
 *    engine may then use host buffers in place (no copy of the data set).
 *
 * Matrices are row-major. Tensors of images use either layout NCHW
 * ([batch][channel][h][w], what the data set and dense layers see) or CNHW
 * ([channel][batch][h][w], what the conv stack uses internally so that one
 * sgemm covers the whole batch: Y[Cout][B*Ho*Wo] = W[Cout][C*kh*kw] *
 * col[C*kh*kw][B*Ho*Wo]). Ops that touch image planes take the plane
 * strides so either layout works: plane (c, n) starts at element
 * (c * plane_stride_c + n * plane_stride_n) * (h * w).
 * NCHW: plane_stride_c = 1, plane_stride_n = C. CNHW: plane_stride_c = B,
 * plane_stride_n = 1.
 *
 * Element-wise formulas live once in src/nn/ops_math.h (static inline,
 * __host__ __device__ under nvcc): the cpu backend loops over them, the
 * cuda kernels call them, so the CPU tests check what the GPU computes.
 *
 * Every op returns sl_err: SL_OK, or the mapped CUDA/cuBLAS error (a
 * launch failure, SL_ENOMEM, SL_ENODEV). Shapes are validated by the
 * engine; an op may assert on a negative or absurd size (API misuse). */
#ifndef STARLING_NN_BACKEND_H
#define STARLING_NN_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version of the table below; the cuda shared object exports the
 * version it was built against and backend.c refuses a mismatch. */
#define SL_NN_BACKEND_ABI 2

/* Activation applied by the fused bias ops. */
typedef enum {
    SL_NN_ACT_NONE = 0, /* identity */
    SL_NN_ACT_RELU = 1  /* max(0, x) */
} sl_nn_act;

/* Optimizer step kinds (see ops_math.h for the exact update formulas). */
typedef enum {
    SL_NN_OPT_SGD = 0,      /* v = m*v + g + wd*w; w -= lr*v */
    SL_NN_OPT_NESTEROV = 1, /* v = m*v + g'; w -= lr*(g' + m*v) */
    SL_NN_OPT_ADAM = 2,     /* L2 weight decay added to the gradient */
    SL_NN_OPT_ADAMW = 3     /* decoupled weight decay: w -= lr*wd*w */
} sl_nn_opt_kind;

/* Hyper-parameters of one optimizer step; scalars computed on the host
 * each step (the learning rate follows the schedule), passed by value. */
typedef struct {
    sl_nn_opt_kind kind; /* which update rule */
    float lr;            /* learning rate for this step */
    float momentum;      /* SGD/Nesterov momentum (0 = plain SGD) */
    float weight_decay;  /* L2 (sgd, nesterov, adam) or decoupled (adamw) */
    float beta1;         /* Adam first-moment decay */
    float beta2;         /* Adam second-moment decay */
    float eps;           /* Adam denominator epsilon */
    float bias_corr1;    /* Adam: 1 / (1 - beta1^t), host-computed */
    float bias_corr2;    /* Adam: 1 / (1 - beta2^t), host-computed */
} sl_nn_opt_step_t;

/* Shape of an image-plane op (im2col, col2im, max-pool). */
typedef struct {
    int channels;        /* C */
    int batch;           /* B */
    int h, w;            /* input plane height and width */
    int kh, kw;          /* kernel (window) height and width */
    int stride;          /* stride in both directions */
    int pad;             /* zero padding on each side */
    int out_h, out_w;    /* output plane size: (h + 2*pad - kh)/stride + 1 */
    int plane_stride_c;  /* input layout: planes between channels (see top) */
    int plane_stride_n;  /* input layout: planes between samples */
} sl_nn_window_t;

/* The backend table. `self` is the instance `open` created. Every field is
 * required unless its comment says optional. */
typedef struct sl_nn_backend_ops {
    const char *name; /* "cpu" or "cuda" */
    bool host_visible; /* device pointers are host pointers (cpu) */

    /* ---- lifecycle ---- */
    /* Creates an instance. `threads` > 0 asks the BLAS/device for that many
     * threads, 0 leaves the library's own setting (environment) alone.
     * Writes a human description of the device ("cpu: OpenBLAS 0.3.21,
     * 2 threads", "cuda: NVIDIA H100, sm_90") into `desc`. SL_ENODEV when
     * no device can be used. */
    sl_err (*open)(void **self, int threads, char *desc, size_t desc_len);
    /* Frees everything the instance holds; `*self` becomes NULL. */
    void (*close)(void **self);
    /* Waits for every queued op; returns the first deferred error. */
    sl_err (*sync)(void *self);

    /* ---- memory ---- */
    /* Device buffer of `len` bytes, aligned to at least 64 bytes. */
    sl_err (*alloc)(void *self, size_t len, void **out);
    /* Frees a buffer from alloc; NULL is a no-op. */
    void (*free)(void *self, void *dev);
    /* Host -> device, `len` bytes; the host buffer may be reused on return. */
    sl_err (*upload)(void *self, void *dev, const void *host, size_t len);
    /* Device -> host, `len` bytes; waits for queued ops first. */
    sl_err (*download)(void *self, void *host, const void *dev, size_t len);
    /* Device -> device copy of `count` floats. */
    sl_err (*copy)(void *self, float *dst, const float *src, size_t count);
    /* dst[i] = value for i < count. */
    sl_err (*fill)(void *self, float *dst, float value, size_t count);

    /* ---- BLAS ---- */
    /* Row-major C[m][n] = alpha * op(A) * op(B) + beta * C, op = transpose
     * when trans_a / trans_b; lda/ldb/ldc are row strides as in
     * cblas_sgemm(CblasRowMajor, ...). */
    sl_err (*sgemm)(void *self, bool trans_a, bool trans_b, int m, int n, int k,
                    float alpha, const float *a, int lda, const float *b, int ldb,
                    float beta, float *c, int ldc);
    /* y[i] = alpha * x[i] + beta * y[i] (gradient averaging, all-reduce). */
    sl_err (*axpby)(void *self, size_t count, float alpha, const float *x, float beta,
                    float *y);

    /* ---- data ---- */
    /* Minibatch gather with conversion: for r < rows, c < cols:
     * dst[r*cols + c] = src[row(r)*cols + c] * scale + shift, where
     * row(r) = idx ? idx[first + r] : first + r. `src` is uint8 (images
     * stored as bytes, 4x less memory) or float. */
    sl_err (*gather_u8)(void *self, float *dst, const uint8_t *src, const int32_t *idx,
                        size_t first, int rows, int cols, float scale, float shift);
    sl_err (*gather_f32)(void *self, float *dst, const float *src, const int32_t *idx,
                         size_t first, int rows, int cols, float scale, float shift);
    /* Labels: dst[r] = src[row(r)] (row as above). */
    sl_err (*gather_i32)(void *self, int32_t *dst, const int32_t *src, const int32_t *idx,
                         size_t first, int rows);
    /* Axis swap of a [a][b][inner] tensor into [b][a][inner]: CNHW <-> NCHW
     * (flatten before a dense layer, and its backward). */
    sl_err (*swap_axes)(void *self, float *dst, const float *src, int a, int b, int inner);

    /* ---- layers ---- */
    /* y viewed as [outer][channels][inner]:
     * y[o][c][i] = act(y[o][c][i] + (bias ? bias[c] : 0)). Dense: outer =
     * batch, channels = features, inner = 1. Conv (CNHW): outer = 1,
     * channels = Cout, inner = B*Ho*Wo. */
    sl_err (*bias_act_fwd)(void *self, float *y, const float *bias, int outer, int channels,
                           int inner, sl_nn_act act);
    /* Backward of bias_act_fwd, in place on dy (same view):
     * dy[o][c][i] *= act'(y[o][c][i]) (y is the forward output), then
     * when dbias != NULL: dbias[c] = sum over o, i of dy[o][c][i]
     * (overwritten, not accumulated). */
    sl_err (*bias_act_bwd)(void *self, float *dy, const float *y, float *dbias, int outer,
                           int channels, int inner, sl_nn_act act);

    /* col[(c*kh + i)*kw + j][n*out_h*out_w + p] = x at plane (c, n), row
     * oy*stride - pad + i, column ox*stride - pad + j (0 outside), p = oy *
     * out_w + ox. col has C*kh*kw rows and B*out_h*out_w columns. */
    sl_err (*im2col)(void *self, const float *x, float *col, const sl_nn_window_t *win);
    /* Adjoint of im2col: dx = 0, then dx[...] += col[...] for every entry
     * im2col read (dx in the layout the window's plane strides give). */
    sl_err (*col2im)(void *self, const float *col, float *dx, const sl_nn_window_t *win);

    /* Max-pool over every plane (channels*batch planes, layout from the
     * strides; the output uses the same plane strides with out_h*out_w
     * planes). argmax[k] = offset within the input plane of the winner of
     * output k (first max wins; padding never wins). */
    sl_err (*maxpool_fwd)(void *self, const float *x, float *y, int32_t *argmax,
                          const sl_nn_window_t *win);
    /* dx = 0, then dx[plane][argmax[k]] += dy[k]. */
    sl_err (*maxpool_bwd)(void *self, const float *dy, const int32_t *argmax, float *dx,
                          const sl_nn_window_t *win);

    /* Batch norm over x viewed as [outer][channels][inner]; statistics per
     * channel over outer*inner values. Training: computes batch mean and
     * inverse std (biased variance) into save_mean / save_invstd
     * ([channels]), y = gamma * (x - mean) * invstd + beta, and
     * running = (1 - momentum) * running + momentum * batch (running_var
     * takes the unbiased variance). Eval (training false): uses the running
     * statistics and leaves save_* untouched (they may be NULL). */
    sl_err (*batchnorm_fwd)(void *self, const float *x, float *y, const float *gamma,
                            const float *beta, float *running_mean, float *running_var,
                            float *save_mean, float *save_invstd, int outer, int channels,
                            int inner, float momentum, float eps, bool training);
    /* Training-mode backward: dx, dgamma, dbeta (overwritten) from dy, x
     * and the saved mean / inverse std. dx may alias dy. */
    sl_err (*batchnorm_bwd)(void *self, const float *dy, const float *x, const float *gamma,
                            const float *save_mean, const float *save_invstd, float *dx,
                            float *dgamma, float *dbeta, int outer, int channels, int inner);

    /* Inverted dropout: keep element i with probability 1 - p, decided by
     * sl_op_dropout_keep(seed, i, p) (a counter-based hash: no mask is
     * stored, cpu and cuda agree bit for bit); y[i] = keep ? x[i] / (1 - p)
     * : 0. Backward is the same op on dy with the same seed. x may alias y. */
    sl_err (*dropout)(void *self, const float *x, float *y, size_t count, float p,
                      uint64_t seed);

    /* Softmax cross-entropy over logits [rows][classes] with labels [rows].
     * Adds the summed loss to acc[0] and the number of rows whose argmax
     * (first max) equals the label to acc[1] (acc is 2 doubles on the
     * device, accumulated across calls, zeroed by the engine with
     * `zero_acc`). When dlogits != NULL writes
     * dlogits = (softmax - onehot) * grad_scale (dlogits may alias logits). */
    sl_err (*softmax_xent)(void *self, const float *logits, const int32_t *labels, int rows,
                           int classes, float *dlogits, float grad_scale, double *acc);
    /* acc[i] = 0 for i < count (doubles on the device). */
    sl_err (*zero_acc)(void *self, double *acc, int count);

    /* ---- optimizer ---- */
    /* One step over a flat parameter vector: w, g, and the state vectors
     * s1 (momentum / Adam m) and s2 (Adam v; NULL for sgd/nesterov). */
    sl_err (*opt_step)(void *self, float *w, const float *g, float *s1, float *s2,
                       size_t count, const sl_nn_opt_step_t *step);

    /* ---- reductions ---- */
    /* out[0] = sum of x[i]^2 as a double on the device (gradient norm,
     * divergence checks). */
    sl_err (*sum_squares)(void *self, const float *x, size_t count, double *out);

    /* ---- hints (optional; 0 = none) ---- */
    /* Preferred size in bytes of one im2col column buffer: when set, conv
     * layers run their sgemms over chunks of the minibatch whose columns
     * fit it (cache-resident on a CPU), recomputing im2col in backward.
     * 0 (a GPU) = one im2col and one sgemm per layer for the whole batch. */
    size_t im2col_chunk_len;

    /* ---- collectives (optional; NULL = none: cpu) ---- */
    /* The native stream every op is queued on (cuda: its cudaStream_t), so
     * that a collective library (NCCL, src/nn/nccl_lazy.c) queues its
     * operations in order with the ops. */
    void *(*stream)(void *self);
    /* Whether every queued op has finished, without waiting: SL_OK,
     * SL_EAGAIN while some still run, or the first deferred error. A
     * collective that never finishes (a peer gone) is waited for with this
     * and a deadline, where `sync` would block for ever. */
    sl_err (*query)(void *self);
} sl_nn_backend_ops_t;

/* The built-in cpu backend (always present). */
extern const sl_nn_backend_ops_t sl_nn_backend_cpu;

/* The symbol libstarling_cuda.so exports: returns its table and writes the
 * ABI version it was built against. backend.c dlsym()s this name. */
typedef const sl_nn_backend_ops_t *(*sl_nn_backend_entry_fn)(int *abi);
#define SL_NN_BACKEND_ENTRY "sl_nn_backend_cuda_entry"

#ifdef __cplusplus
}
#endif
#endif
