/* Starling nn, cuda backend: what its two translation units share.
 *
 * backend_cuda.cu holds the lifecycle, memory, cuBLAS and the exported
 * table; kernels.cu holds the element-wise, window and reduction kernels
 * and the ops that launch them. Everything is queued on one in-order
 * stream; nothing here waits for the device except sync, download and
 * upload (see nn_backend.h). C++17, built only by nvcc. */
#ifndef STARLING_NN_CUDA_INTERNAL_H
#define STARLING_NN_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "starling/nn_backend.h"

/* One opened device. */
typedef struct {
    int device;          /* CUDA device ordinal */
    cudaStream_t stream; /* the one in-order stream every op is queued on */
    cublasHandle_t blas; /* cuBLAS handle bound to `stream` */
    int max_blocks;      /* grid-size cap for grid-stride kernels (SMs * 32) */
    sl_err deferred;     /* first sticky (device-fatal) error; every later op returns it */
} sl_cuda_t;

/* Logs through sl_log when the executable exports it, else on stderr
 * (cuda_errors.cu). */
void sl_cuda_report(int level, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Maps a CUDA runtime status to sl_err (SL_OK for cudaSuccess). */
sl_err sl_cuda_map(cudaError_t e);
/* Maps a cuBLAS status to sl_err. */
sl_err sl_cuda_map_blas(cublasStatus_t s);
/* Logs a failed CUDA call `what` and returns its sl_err (SL_OK for
 * cudaSuccess); a device-fatal error is also kept in c->deferred (first
 * wins). c may be NULL (open). */
sl_err sl_cuda_fail(sl_cuda_t *c, cudaError_t e, const char *what);
/* The same for a cuBLAS status. */
sl_err sl_cuda_fail_blas(sl_cuda_t *c, cublasStatus_t s, const char *what);
/* After a kernel launch: picks up a launch error (bad configuration, no
 * kernel image for this device) without waiting for the device. */
sl_err sl_cuda_launched(sl_cuda_t *c, const char *what);

/* Starts an op on the calling thread: returns the deferred error if one
 * was recorded, and makes c's device current (cached per thread). */
sl_err sl_cuda_enter(sl_cuda_t *c);

/* Blocks for a grid-stride kernel over n elements of 256-thread blocks. */
static inline unsigned sl_cuda_blocks(const sl_cuda_t *c, size_t n) {
    size_t b = (n + 255) / 256;
    if (b > (size_t)c->max_blocks)
        b = (size_t)c->max_blocks;
    return (unsigned)(b ? b : 1);
}

/* ---- ops implemented in kernels.cu (signatures as in nn_backend.h) ---- */

sl_err sl_cuda_fill(void *self, float *dst, float value, size_t count);
sl_err sl_cuda_axpby(void *self, size_t count, float alpha, const float *x, float beta,
                     float *y);
sl_err sl_cuda_gather_u8(void *self, float *dst, const uint8_t *src, const int32_t *idx,
                         size_t first, int rows, int cols, float scale, float shift);
sl_err sl_cuda_gather_f32(void *self, float *dst, const float *src, const int32_t *idx,
                          size_t first, int rows, int cols, float scale, float shift);
sl_err sl_cuda_gather_i32(void *self, int32_t *dst, const int32_t *src, const int32_t *idx,
                          size_t first, int rows);
sl_err sl_cuda_swap_axes(void *self, float *dst, const float *src, int a, int b, int inner);
sl_err sl_cuda_bias_act_fwd(void *self, float *y, const float *bias, int outer, int channels,
                            int inner, sl_nn_act act);
sl_err sl_cuda_bias_act_bwd(void *self, float *dy, const float *y, float *dbias, int outer,
                            int channels, int inner, sl_nn_act act);
sl_err sl_cuda_im2col(void *self, const float *x, float *col, const sl_nn_window_t *win);
sl_err sl_cuda_col2im(void *self, const float *col, float *dx, const sl_nn_window_t *win);
sl_err sl_cuda_maxpool_fwd(void *self, const float *x, float *y, int32_t *argmax,
                           const sl_nn_window_t *win);
sl_err sl_cuda_maxpool_bwd(void *self, const float *dy, const int32_t *argmax, float *dx,
                           const sl_nn_window_t *win);
sl_err sl_cuda_batchnorm_fwd(void *self, const float *x, float *y, const float *gamma,
                             const float *beta, float *running_mean, float *running_var,
                             float *save_mean, float *save_invstd, int outer, int channels,
                             int inner, float momentum, float eps, bool training);
sl_err sl_cuda_batchnorm_bwd(void *self, const float *dy, const float *x, const float *gamma,
                             const float *save_mean, const float *save_invstd, float *dx,
                             float *dgamma, float *dbeta, int outer, int channels, int inner);
sl_err sl_cuda_dropout(void *self, const float *x, float *y, size_t count, float p,
                       uint64_t seed);
sl_err sl_cuda_softmax_xent(void *self, const float *logits, const int32_t *labels, int rows,
                            int classes, float *dlogits, float grad_scale, double *acc);
sl_err sl_cuda_opt_step(void *self, float *w, const float *g, float *s1, float *s2,
                        size_t count, const sl_nn_opt_step_t *step);
sl_err sl_cuda_sum_squares(void *self, const float *x, size_t count, double *out);

#endif
