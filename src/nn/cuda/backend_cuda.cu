/* Starling nn, cuda backend: device lifecycle, memory, cuBLAS, and the
 * table libstarling_cuda.so exports.
 *
 * Entry point: backend.c dlopen()s libstarling_cuda.so and dlsym()s
 * SL_NN_BACKEND_ENTRY ("sl_nn_backend_cuda_entry", nn_backend.h), which
 * returns the table below and the ABI version it was built against. It is
 * the only symbol this library exports (-fvisibility=hidden).
 *
 * The library depends on libcublas.so and the CUDA driver (libcuda.so,
 * which the static CUDA runtime loads itself), never on libstarling: it
 * allocates its one small host struct with calloc and logs through
 * sl_log only when the executable exports it (a weak reference), else on
 * stderr.
 *
 * No device: cudaGetDeviceCount fails (no driver: error 35,
 * cudaErrorInsufficientDriver; no GPU: 100, cudaErrorNoDevice) and `open`
 * returns SL_ENODEV quietly; backend.c then falls back to the cpu backend
 * (--device auto) or says so (--device cuda).
 *
 * Environment: SL_CUDA_DEVICE picks the device ordinal (default 0);
 * SL_CUDA_TF32=1 lets cuBLAS use TF32 tensor cores for sgemm (faster on
 * sm_80+, about 3 decimal digits: off by default, so the results stay
 * within the CPU tests' tolerance). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cuda/cuda_internal.h"

/* ---- lifecycle ---- */

static void cuda_close(void **self);

static sl_err cuda_open(void **self, int threads, char *desc, size_t desc_len) {
    (void)threads; /* one stream; the host side needs no threads */
    *self = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= 0) {
        /* The ordinary case on a machine without a GPU: no noise. */
        if (desc && desc_len)
            snprintf(desc, desc_len, "cuda: no device (%s)",
                     e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device found");
        cudaGetLastError(); /* clear it */
        return e == cudaErrorMemoryAllocation ? SL_ENOMEM : SL_ENODEV;
    }
    int dev = 0;
    const char *env = getenv("SL_CUDA_DEVICE");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end || v < 0 || v >= count) {
            sl_cuda_report(3, "CUDA-DEVICE", "SL_CUDA_DEVICE=%s: want an ordinal in 0..%d", env,
                   count - 1);
            return SL_ENODEV;
        }
        dev = (int)v;
    }
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, dev);
    if (e != cudaSuccess)
        return sl_cuda_fail(NULL, e, "cudaGetDeviceProperties");
    if (prop.major < 8) {
        sl_cuda_report(4, "CUDA-ARCH", "%s is sm_%d%d; this build has code for sm_80 and later only",
               prop.name, prop.major, prop.minor);
        return SL_ENODEV;
    }
    sl_cuda_t *c = (sl_cuda_t *)calloc(1, sizeof *c);
    if (!c)
        return SL_ENOMEM;
    c->device = dev;
    c->max_blocks = (prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 16) * 32;
    *self = c;
    sl_err err = sl_cuda_enter(c);
    if (err == SL_OK)
        err = sl_cuda_fail(c, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
                           "cudaStreamCreateWithFlags");
    if (err == SL_OK)
        err = sl_cuda_fail_blas(c, cublasCreate(&c->blas), "cublasCreate");
    if (err == SL_OK)
        err = sl_cuda_fail_blas(c, cublasSetStream(c->blas, c->stream), "cublasSetStream");
    const char *tf32 = getenv("SL_CUDA_TF32");
    bool use_tf32 = tf32 && !strcmp(tf32, "1");
    if (err == SL_OK)
        err = sl_cuda_fail_blas(
            c, cublasSetMathMode(c->blas, use_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
            "cublasSetMathMode");
    if (err != SL_OK)
        goto fail;
    if (desc && desc_len) {
        int driver = 0, runtime = 0, blas = 0;
        cudaDriverGetVersion(&driver);
        cudaRuntimeGetVersion(&runtime);
        cublasGetVersion(c->blas, &blas);
        snprintf(desc, desc_len,
                 "cuda: %s, sm_%d%d, %d SMs, %.0f GiB, driver %d.%d, runtime %d.%d, cuBLAS %d%s",
                 prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                 (double)prop.totalGlobalMem / (1024.0 * 1024 * 1024), driver / 1000,
                 (driver % 1000) / 10, runtime / 1000, (runtime % 1000) / 10, blas,
                 use_tf32 ? ", TF32" : "");
    }
    return SL_OK;
fail:
    cuda_close(self);
    return err;
}

static void cuda_close(void **self) {
    if (!self || !*self)
        return;
    sl_cuda_t *c = (sl_cuda_t *)*self;
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    if (c->blas)
        cublasDestroy(c->blas);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    cudaGetLastError(); /* nothing to report to: clear it */
    free(c);
    *self = NULL;
}

static sl_err cuda_sync(void *self) {
    sl_cuda_t *c = (sl_cuda_t *)self;
    sl_err err = sl_cuda_enter(c);
    if (err != SL_OK)
        return err;
    return sl_cuda_fail(c, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
}

static void *cuda_stream(void *self) { return ((sl_cuda_t *)self)->stream; }

static sl_err cuda_query(void *self) {
    sl_cuda_t *c = (sl_cuda_t *)self;
    sl_err err = sl_cuda_enter(c);
    if (err != SL_OK)
        return err;
    cudaError_t e = cudaStreamQuery(c->stream);
    if (e == cudaErrorNotReady)
        return SL_EAGAIN;
    return sl_cuda_fail(c, e, "cudaStreamQuery");
}

/* ---- memory ---- */

static sl_err cuda_alloc(void *self, size_t len, void **out) {
    sl_cuda_t *c = (sl_cuda_t *)self;
    *out = NULL;
    sl_err err = sl_cuda_enter(c);
    if (err != SL_OK)
        return err;
    /* cudaMalloc aligns to 256 bytes; a zero-length buffer still gets one. */
    cudaError_t e = cudaMalloc(out, len ? len : 256);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError(); /* not sticky: the instance stays usable */
        *out = NULL;
        return SL_ENOMEM;
    }
    return sl_cuda_fail(c, e, "cudaMalloc");
}

static void cuda_free(void *self, void *dev) {
    (void)self;
    if (!dev)
        return;
    /* cudaFree waits for the device; a failure here (a sticky earlier
     * error) was already recorded by the op that caused it. */
    if (cudaFree(dev) != cudaSuccess)
        cudaGetLastError();
}

static sl_err cuda_upload(void *self, void *dev, const void *host, size_t len) {
    sl_cuda_t *c = (sl_cuda_t *)self;
    sl_err err = sl_cuda_enter(c);
    if (err != SL_OK || !len)
        return err;
    /* Queued in order on the stream, then waited for: the caller may
     * reuse `host` on return whatever kind of memory it is. Uploads are
     * rare (the data set once, the shuffle order once per epoch). */
    err = sl_cuda_fail(c, cudaMemcpyAsync(dev, host, len, cudaMemcpyHostToDevice, c->stream),
                       "cudaMemcpyAsync (upload)");
    if (err == SL_OK)
        err = sl_cuda_fail(c, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize (upload)");
    return err;
}

static sl_err cuda_download(void *self, void *host, const void *dev, size_t len) {
    sl_cuda_t *c = (sl_cuda_t *)self;
    sl_err err = sl_cuda_enter(c);
    if (err != SL_OK || !len)
        return err;
    err = sl_cuda_fail(c, cudaMemcpyAsync(host, dev, len, cudaMemcpyDeviceToHost, c->stream),
                       "cudaMemcpyAsync (download)");
    if (err == SL_OK)
        err = sl_cuda_fail(c, cudaStreamSynchronize(c->stream),
                           "cudaStreamSynchronize (download)");
    return err;
}

static sl_err cuda_copy(void *self, float *dst, const float *src, size_t count) {
    sl_cuda_t *c = (sl_cuda_t *)self;
    sl_err err = sl_cuda_enter(c);
    if (err != SL_OK || !count || dst == src)
        return err;
    /* The cpu backend's memmove allows overlap; cudaMemcpy does not. The
     * engine never copies between overlapping ranges. */
    if (dst < src + count && src < dst + count)
        return SL_EINVAL;
    return sl_cuda_fail(c, cudaMemcpyAsync(dst, src, count * sizeof *dst,
                                           cudaMemcpyDeviceToDevice, c->stream),
                        "cudaMemcpyAsync (copy)");
}

static sl_err cuda_zero_acc(void *self, double *acc, int count) {
    sl_cuda_t *c = (sl_cuda_t *)self;
    sl_err err = sl_cuda_enter(c);
    if (err != SL_OK || count <= 0)
        return err;
    return sl_cuda_fail(c, cudaMemsetAsync(acc, 0, (size_t)count * sizeof *acc, c->stream),
                        "cudaMemsetAsync (zero_acc)");
}

/* ---- BLAS ---- */

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
 * same buffers with A and B swapped and m and n swapped; the transpose
 * flags and leading dimensions carry over unchanged. */
static sl_err cuda_sgemm(void *self, bool ta, bool tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *cm,
                         int ldc) {
    sl_cuda_t *c = (sl_cuda_t *)self;
    sl_err err = sl_cuda_enter(c);
    if (err != SL_OK || m <= 0 || n <= 0)
        return err;
    /* cuBLAS wants every leading dimension >= 1, even where k == 0 makes
     * a row-major stride of 0 natural (it then only scales C by beta). */
    lda = lda > 0 ? lda : 1;
    ldb = ldb > 0 ? ldb : 1;
    return sl_cuda_fail_blas(c,
                             cublasSgemm(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                         ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb,
                                         a, lda, &beta, cm, ldc),
                             "cublasSgemm");
}

/* ---- the table ---- */

static const sl_nn_backend_ops_t cuda_ops = {
    .name = "cuda",
    .host_visible = false,
    .open = cuda_open,
    .close = cuda_close,
    .sync = cuda_sync,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .fill = sl_cuda_fill,
    .sgemm = cuda_sgemm,
    .axpby = sl_cuda_axpby,
    .gather_u8 = sl_cuda_gather_u8,
    .gather_f32 = sl_cuda_gather_f32,
    .gather_i32 = sl_cuda_gather_i32,
    .swap_axes = sl_cuda_swap_axes,
    .bias_act_fwd = sl_cuda_bias_act_fwd,
    .bias_act_bwd = sl_cuda_bias_act_bwd,
    .im2col = sl_cuda_im2col,
    .col2im = sl_cuda_col2im,
    .maxpool_fwd = sl_cuda_maxpool_fwd,
    .maxpool_bwd = sl_cuda_maxpool_bwd,
    .batchnorm_fwd = sl_cuda_batchnorm_fwd,
    .batchnorm_bwd = sl_cuda_batchnorm_bwd,
    .dropout = sl_cuda_dropout,
    .softmax_xent = sl_cuda_softmax_xent,
    .zero_acc = cuda_zero_acc,
    .opt_step = sl_cuda_opt_step,
    .sum_squares = sl_cuda_sum_squares,
    .stream = cuda_stream,
    .query = cuda_query,
};

/* The one exported symbol; its name is SL_NN_BACKEND_ENTRY. */
extern "C" __attribute__((visibility("default"))) const sl_nn_backend_ops_t *
sl_nn_backend_cuda_entry(int *abi) {
    if (abi)
        *abi = SL_NN_BACKEND_ABI;
    return &cuda_ops;
}

/* The entry point has the type backend.c calls it through. */
static_assert(sizeof(SL_NN_BACKEND_ENTRY) == sizeof("sl_nn_backend_cuda_entry"),
              "SL_NN_BACKEND_ENTRY renamed: rename the function above");
[[maybe_unused]] static const sl_nn_backend_entry_fn entry_type_check = sl_nn_backend_cuda_entry;
