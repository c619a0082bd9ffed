/* Starling nn, cuda backend: the kernels and the ops that launch them.
 *
 * Every per-element formula comes from src/nn/ops_math.h (the functions
 * the cpu backend loops over), so the CPU tests check what runs here. The
 * library is compiled with --fmad=false: a*b+c rounds twice, as in the
 * cpu backend (C11, no FP contraction), so element-wise results agree bit
 * for bit except where expf/logf differ by an ulp.
 *
 * Reductions (bias gradients, batch-norm statistics, the loss and
 * accuracy accumulators, the squared norm) run one block per output in a
 * fixed order: results are deterministic, with no atomics. col2im and the
 * max-pool backward are gathers (each thread owns one input element and
 * sums its contributions in the cpu backend's order), so they need no
 * atomics either and match the cpu backend bit for bit.
 *
 * Every op queues its kernel on the instance's stream and returns without
 * waiting; launch errors are picked up at once (sl_cuda_launched),
 * execution errors at the next sync or download. */
#include "nn/cuda/cuda_internal.h"
#include "nn/ops_math.h"

/* Threads per block of every kernel here (a multiple of the warp size). */
#define THREADS 256

/* Grid-stride loop over [0, n). */
#define GRID_STRIDE(i, n)                                                                \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n);     \
         i += (size_t)gridDim.x * blockDim.x)

/* Starts an op: the instance, or returns the deferred error. */
#define ENTER(c, self)                                                                   \
    sl_cuda_t *c = (sl_cuda_t *)(self);                                                  \
    do {                                                                                 \
        sl_err enter_err_ = sl_cuda_enter(c);                                            \
        if (enter_err_ != SL_OK)                                                         \
            return enter_err_;                                                           \
    } while (0)

/* Sum of v over the block, returned to every thread. Needs blockDim.x a
 * multiple of 32 and at most 1024; every thread of the block must call it.
 * The order of additions is fixed, so the result is deterministic. */
template <typename T> __device__ T block_sum(T v) {
    __shared__ T part[32];
    __shared__ T total;
    const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5);
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    __syncthreads(); /* readers of a previous call's part/total are done */
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const int nwarps = (int)(blockDim.x >> 5);
        v = lane < nwarps ? part[lane] : T(0);
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0)
            total = v;
    }
    __syncthreads();
    return total;
}

/* ---- fill, axpby ---- */

__global__ void k_fill(float *dst, float value, size_t count) {
    GRID_STRIDE(i, count)
    dst[i] = value;
}

sl_err sl_cuda_fill(void *self, float *dst, float value, size_t count) {
    ENTER(c, self);
    if (!count)
        return SL_OK;
    k_fill<<<sl_cuda_blocks(c, count), THREADS, 0, c->stream>>>(dst, value, count);
    return sl_cuda_launched(c, "fill");
}

__global__ void k_axpby(size_t count, float alpha, const float *x, float beta, float *y) {
    GRID_STRIDE(i, count)
    y[i] = alpha * x[i] + beta * y[i];
}

sl_err sl_cuda_axpby(void *self, size_t count, float alpha, const float *x, float beta,
                     float *y) {
    ENTER(c, self);
    if (!count)
        return SL_OK;
    k_axpby<<<sl_cuda_blocks(c, count), THREADS, 0, c->stream>>>(count, alpha, x, beta, y);
    return sl_cuda_launched(c, "axpby");
}

/* ---- data ---- */

template <typename S>
__global__ void k_gather(float *dst, const S *src, const int32_t *idx, size_t first, int rows,
                         int cols, float scale, float shift) {
    const size_t total = (size_t)rows * (size_t)cols;
    GRID_STRIDE(t, total) {
        size_t r = t / (size_t)cols, col = t % (size_t)cols;
        size_t row = idx ? (size_t)idx[first + r] : first + r;
        dst[t] = sl_op_convert((float)src[row * (size_t)cols + col], scale, shift);
    }
}

sl_err sl_cuda_gather_u8(void *self, float *dst, const uint8_t *src, const int32_t *idx,
                         size_t first, int rows, int cols, float scale, float shift) {
    ENTER(c, self);
    size_t total = (size_t)rows * (size_t)cols;
    if (rows <= 0 || cols <= 0)
        return SL_OK;
    k_gather<uint8_t><<<sl_cuda_blocks(c, total), THREADS, 0, c->stream>>>(
        dst, src, idx, first, rows, cols, scale, shift);
    return sl_cuda_launched(c, "gather_u8");
}

sl_err sl_cuda_gather_f32(void *self, float *dst, const float *src, const int32_t *idx,
                          size_t first, int rows, int cols, float scale, float shift) {
    ENTER(c, self);
    size_t total = (size_t)rows * (size_t)cols;
    if (rows <= 0 || cols <= 0)
        return SL_OK;
    k_gather<float><<<sl_cuda_blocks(c, total), THREADS, 0, c->stream>>>(
        dst, src, idx, first, rows, cols, scale, shift);
    return sl_cuda_launched(c, "gather_f32");
}

__global__ void k_gather_i32(int32_t *dst, const int32_t *src, const int32_t *idx, size_t first,
                             int rows) {
    GRID_STRIDE(r, rows)
    dst[r] = src[idx ? (size_t)idx[first + r] : first + r];
}

sl_err sl_cuda_gather_i32(void *self, int32_t *dst, const int32_t *src, const int32_t *idx,
                          size_t first, int rows) {
    ENTER(c, self);
    if (rows <= 0)
        return SL_OK;
    k_gather_i32<<<sl_cuda_blocks(c, (size_t)rows), THREADS, 0, c->stream>>>(dst, src, idx,
                                                                              first, rows);
    return sl_cuda_launched(c, "gather_i32");
}

/* [a][b][inner] -> [b][a][inner]: reads coalesced, writes in runs of inner. */
__global__ void k_swap_axes(float *dst, const float *src, int a, int b, int inner) {
    const size_t total = (size_t)a * b * inner;
    GRID_STRIDE(t, total) {
        size_t k = t % (size_t)inner;
        size_t j = (t / (size_t)inner) % (size_t)b;
        size_t i = t / ((size_t)inner * b);
        dst[(j * (size_t)a + i) * inner + k] = src[t];
    }
}

sl_err sl_cuda_swap_axes(void *self, float *dst, const float *src, int a, int b, int inner) {
    ENTER(c, self);
    size_t total = (size_t)a * b * inner;
    if (a <= 0 || b <= 0 || inner <= 0)
        return SL_OK;
    k_swap_axes<<<sl_cuda_blocks(c, total), THREADS, 0, c->stream>>>(dst, src, a, b, inner);
    return sl_cuda_launched(c, "swap_axes");
}

/* ---- fused bias + activation ---- */

__global__ void k_bias_act_fwd(float *y, const float *bias, int channels, int inner, size_t total,
                               int act) {
    GRID_STRIDE(t, total) {
        float v = y[t];
        if (bias)
            v += bias[(t / (size_t)inner) % (size_t)channels];
        y[t] = sl_op_act(v, act);
    }
}

sl_err sl_cuda_bias_act_fwd(void *self, float *y, const float *bias, int outer, int channels,
                            int inner, sl_nn_act act) {
    ENTER(c, self);
    size_t total = (size_t)outer * channels * inner;
    if (!total || (!bias && act == SL_NN_ACT_NONE))
        return SL_OK;
    k_bias_act_fwd<<<sl_cuda_blocks(c, total), THREADS, 0, c->stream>>>(y, bias, channels,
                                                                         inner, total, (int)act);
    return sl_cuda_launched(c, "bias_act_fwd");
}

__global__ void k_act_grad(float *dy, const float *y, size_t total, int act) {
    GRID_STRIDE(t, total)
    dy[t] = sl_op_act_grad(y[t], dy[t], act);
}

/* One block per channel: the activation gradient in place, and its sum. */
__global__ void k_bias_act_bwd(float *dy, const float *y, float *dbias, int outer, int channels,
                               int inner, int act) {
    const int ch = (int)blockIdx.x;
    const size_t m = (size_t)outer * inner;
    float sum = 0.0f;
    for (size_t j = threadIdx.x; j < m; j += blockDim.x) {
        size_t o = j / (size_t)inner, i = j % (size_t)inner;
        size_t at = (o * (size_t)channels + (size_t)ch) * inner + i;
        float v = sl_op_act_grad(y[at], dy[at], act);
        dy[at] = v;
        sum += v;
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0)
        dbias[ch] = sum;
}

sl_err sl_cuda_bias_act_bwd(void *self, float *dy, const float *y, float *dbias, int outer,
                            int channels, int inner, sl_nn_act act) {
    ENTER(c, self);
    size_t total = (size_t)outer * channels * inner;
    if (channels <= 0)
        return SL_OK;
    if (dbias) {
        /* channels blocks: the grid's x dimension holds 2^31 - 1 of them. */
        k_bias_act_bwd<<<(unsigned)channels, THREADS, 0, c->stream>>>(dy, y, dbias, outer,
                                                                      channels, inner, (int)act);
        return sl_cuda_launched(c, "bias_act_bwd");
    }
    if (!total || act == SL_NN_ACT_NONE)
        return SL_OK;
    k_act_grad<<<sl_cuda_blocks(c, total), THREADS, 0, c->stream>>>(dy, y, total, (int)act);
    return sl_cuda_launched(c, "act_grad");
}

/* ---- im2col / col2im ---- */

__global__ void k_im2col(const float *x, float *col, sl_nn_window_t win, size_t ncols,
                         size_t total) {
    GRID_STRIDE(t, total) {
        long src = sl_op_im2col_src(&win, (long)(t / ncols), (long)(t % ncols));
        col[t] = src < 0 ? 0.0f : x[src];
    }
}

sl_err sl_cuda_im2col(void *self, const float *x, float *col, const sl_nn_window_t *win) {
    ENTER(c, self);
    size_t rows = (size_t)win->channels * win->kh * win->kw;
    size_t ncols = (size_t)win->batch * win->out_h * win->out_w;
    size_t total = rows * ncols;
    if (!total)
        return SL_OK;
    k_im2col<<<sl_cuda_blocks(c, total), THREADS, 0, c->stream>>>(x, col, *win, ncols, total);
    return sl_cuda_launched(c, "im2col");
}

/* One thread per element of dx: the sum of every column entry im2col
 * read from it, in the cpu backend's order (kernel row i, then column j). */
__global__ void k_col2im(const float *col, float *dx, sl_nn_window_t win, size_t total) {
    const long hw = (long)win.h * win.w, ohw = (long)win.out_h * win.out_w;
    const long ncols = ohw * win.batch;
    GRID_STRIDE(t, total) {
        int x = (int)(t % (size_t)win.w);
        int y = (int)((t / (size_t)win.w) % (size_t)win.h);
        int n = (int)((t / (size_t)hw) % (size_t)win.batch);
        int ch = (int)(t / ((size_t)hw * win.batch));
        float sum = 0.0f;
        for (int i = 0; i < win.kh; i++) {
            int ty = y + win.pad - i;
            if (ty < 0 || ty % win.stride)
                continue;
            int oy = ty / win.stride;
            if (oy >= win.out_h)
                continue;
            for (int j = 0; j < win.kw; j++) {
                int tx = x + win.pad - j;
                if (tx < 0 || tx % win.stride)
                    continue;
                int ox = tx / win.stride;
                if (ox >= win.out_w)
                    continue;
                long row = ((long)ch * win.kh + i) * win.kw + j;
                sum += col[row * ncols + (long)n * ohw + (long)oy * win.out_w + ox];
            }
        }
        dx[sl_op_plane(&win, ch, n, hw) + (long)y * win.w + x] = sum;
    }
}

sl_err sl_cuda_col2im(void *self, const float *col, float *dx, const sl_nn_window_t *win) {
    ENTER(c, self);
    size_t total = (size_t)win->channels * win->batch * win->h * win->w;
    if (!total)
        return SL_OK;
    k_col2im<<<sl_cuda_blocks(c, total), THREADS, 0, c->stream>>>(col, dx, *win, total);
    return sl_cuda_launched(c, "col2im");
}

/* ---- max-pool ---- */

__global__ void k_maxpool_fwd(const float *x, float *y, int32_t *argmax, sl_nn_window_t win,
                              size_t total) {
    const long hw = (long)win.h * win.w, ohw = (long)win.out_h * win.out_w;
    GRID_STRIDE(t, total) {
        long k = (long)(t % (size_t)ohw);
        int n = (int)((t / (size_t)ohw) % (size_t)win.batch);
        int ch = (int)(t / ((size_t)ohw * win.batch));
        long ob = sl_op_plane(&win, ch, n, ohw) + k;
        y[ob] = sl_op_maxpool_at(x + sl_op_plane(&win, ch, n, hw), &win, (int)(k / win.out_w),
                                 (int)(k % win.out_w), &argmax[ob]);
    }
}

sl_err sl_cuda_maxpool_fwd(void *self, const float *x, float *y, int32_t *argmax,
                           const sl_nn_window_t *win) {
    ENTER(c, self);
    size_t total = (size_t)win->channels * win->batch * win->out_h * win->out_w;
    if (!total)
        return SL_OK;
    k_maxpool_fwd<<<sl_cuda_blocks(c, total), THREADS, 0, c->stream>>>(x, y, argmax, *win,
                                                                        total);
    return sl_cuda_launched(c, "maxpool_fwd");
}

/* One thread per input element: the sum of dy over the outputs whose
 * window holds it and chose it, in ascending output order (the cpu
 * backend's order). A window lying wholly on padding (pad >= kernel) is
 * not supported: the engine never builds one. */
__global__ void k_maxpool_bwd(const float *dy, const int32_t *argmax, float *dx,
                              sl_nn_window_t win, size_t total) {
    const long hw = (long)win.h * win.w, ohw = (long)win.out_h * win.out_w;
    GRID_STRIDE(t, total) {
        int x = (int)(t % (size_t)win.w);
        int y = (int)((t / (size_t)win.w) % (size_t)win.h);
        int n = (int)((t / (size_t)hw) % (size_t)win.batch);
        int ch = (int)(t / ((size_t)hw * win.batch));
        int ylo = y + win.pad - win.kh + 1, xlo = x + win.pad - win.kw + 1;
        int oy0 = ylo <= 0 ? 0 : (ylo + win.stride - 1) / win.stride;
        int ox0 = xlo <= 0 ? 0 : (xlo + win.stride - 1) / win.stride;
        int oy1 = (y + win.pad) / win.stride, ox1 = (x + win.pad) / win.stride;
        if (oy1 > win.out_h - 1)
            oy1 = win.out_h - 1;
        if (ox1 > win.out_w - 1)
            ox1 = win.out_w - 1;
        const long ob = sl_op_plane(&win, ch, n, ohw);
        const int32_t me = y * win.w + x;
        float sum = 0.0f;
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                long k = ob + (long)oy * win.out_w + ox;
                if (argmax[k] == me)
                    sum += dy[k];
            }
        dx[sl_op_plane(&win, ch, n, hw) + me] = sum;
    }
}

sl_err sl_cuda_maxpool_bwd(void *self, const float *dy, const int32_t *argmax, float *dx,
                           const sl_nn_window_t *win) {
    ENTER(c, self);
    size_t total = (size_t)win->channels * win->batch * win->h * win->w;
    if (!total)
        return SL_OK;
    k_maxpool_bwd<<<sl_cuda_blocks(c, total), THREADS, 0, c->stream>>>(dy, argmax, dx, *win,
                                                                        total);
    return sl_cuda_launched(c, "maxpool_bwd");
}

/* ---- batch norm: one block per channel ---- */

__global__ void k_batchnorm_fwd(const float *x, float *y, const float *gamma, const float *beta,
                                float *running_mean, float *running_var, float *save_mean,
                                float *save_invstd, int outer, int channels, int inner,
                                float momentum, float eps, bool training) {
    const int ch = (int)blockIdx.x;
    const size_t m = (size_t)outer * inner;
    const size_t stride = (size_t)channels * inner, base = (size_t)ch * inner;
    float mean, invstd;
    if (training) {
        double s = 0.0;
        for (size_t j = threadIdx.x; j < m; j += blockDim.x)
            s += x[(j / inner) * stride + base + j % inner];
        s = block_sum(s);
        mean = (float)(s / (double)m);
        double v = 0.0;
        for (size_t j = threadIdx.x; j < m; j += blockDim.x) {
            float d = x[(j / inner) * stride + base + j % inner] - mean;
            v += (double)(d * d);
        }
        v = block_sum(v);
        float var = (float)(v / (double)m);
        invstd = sl_op_bn_invstd(var, eps);
        if (threadIdx.x == 0) {
            save_mean[ch] = mean;
            save_invstd[ch] = invstd;
            float unbiased = m > 1 ? (float)(v / (double)(m - 1)) : var;
            running_mean[ch] = sl_op_ema(running_mean[ch], mean, momentum);
            running_var[ch] = sl_op_ema(running_var[ch], unbiased, momentum);
        }
    } else {
        mean = running_mean[ch];
        invstd = sl_op_bn_invstd(running_var[ch], eps);
    }
    const float g = gamma[ch], b = beta[ch];
    for (size_t j = threadIdx.x; j < m; j += blockDim.x) {
        size_t at = (j / inner) * stride + base + j % inner;
        y[at] = sl_op_bn_fwd(x[at], mean, invstd, g, b);
    }
}

sl_err sl_cuda_batchnorm_fwd(void *self, const float *x, float *y, const float *gamma,
                             const float *beta, float *running_mean, float *running_var,
                             float *save_mean, float *save_invstd, int outer, int channels,
                             int inner, float momentum, float eps, bool training) {
    ENTER(c, self);
    if (channels <= 0 || outer <= 0 || inner <= 0)
        return SL_OK;
    if (training && (!save_mean || !save_invstd))
        return SL_EINVAL;
    k_batchnorm_fwd<<<(unsigned)channels, THREADS, 0, c->stream>>>(
        x, y, gamma, beta, running_mean, running_var, save_mean, save_invstd, outer, channels,
        inner, momentum, eps, training);
    return sl_cuda_launched(c, "batchnorm_fwd");
}

__global__ void k_batchnorm_bwd(const float *dy, const float *x, const float *gamma,
                                const float *save_mean, const float *save_invstd, float *dx,
                                float *dgamma, float *dbeta, int outer, int channels,
                                int inner) {
    const int ch = (int)blockIdx.x;
    const size_t m = (size_t)outer * inner;
    const size_t stride = (size_t)channels * inner, base = (size_t)ch * inner;
    const float mean = save_mean[ch], invstd = save_invstd[ch];
    double sdy = 0.0, sdyx = 0.0;
    for (size_t j = threadIdx.x; j < m; j += blockDim.x) {
        size_t at = (j / inner) * stride + base + j % inner;
        float d = dy[at];
        sdy += d;
        sdyx += (double)d * ((x[at] - mean) * invstd);
    }
    /* Both sums complete before any dx is written: dx may alias dy. */
    sdy = block_sum(sdy);
    sdyx = block_sum(sdyx);
    if (threadIdx.x == 0) {
        dgamma[ch] = (float)sdyx;
        dbeta[ch] = (float)sdy;
    }
    const float mdy = (float)(sdy / (double)m), mdyx = (float)(sdyx / (double)m), g = gamma[ch];
    for (size_t j = threadIdx.x; j < m; j += blockDim.x) {
        size_t at = (j / inner) * stride + base + j % inner;
        dx[at] = sl_op_bn_bwd(dy[at], x[at], mean, invstd, g, mdy, mdyx);
    }
}

sl_err sl_cuda_batchnorm_bwd(void *self, const float *dy, const float *x, const float *gamma,
                             const float *save_mean, const float *save_invstd, float *dx,
                             float *dgamma, float *dbeta, int outer, int channels, int inner) {
    ENTER(c, self);
    if (channels <= 0 || outer <= 0 || inner <= 0)
        return SL_OK;
    k_batchnorm_bwd<<<(unsigned)channels, THREADS, 0, c->stream>>>(
        dy, x, gamma, save_mean, save_invstd, dx, dgamma, dbeta, outer, channels, inner);
    return sl_cuda_launched(c, "batchnorm_bwd");
}

/* ---- dropout ---- */

__global__ void k_dropout(const float *x, float *y, size_t count, float p, uint64_t seed) {
    GRID_STRIDE(i, count)
    y[i] = sl_op_dropout(x[i], seed, (uint64_t)i, p);
}

sl_err sl_cuda_dropout(void *self, const float *x, float *y, size_t count, float p,
                       uint64_t seed) {
    ENTER(c, self);
    if (!count)
        return SL_OK;
    k_dropout<<<sl_cuda_blocks(c, count), THREADS, 0, c->stream>>>(x, y, count, p, seed);
    return sl_cuda_launched(c, "dropout");
}

/* ---- softmax cross-entropy: one block, rows strided over its threads ---- */

__global__ void k_softmax_xent(const float *logits, const int32_t *labels, int rows,
                               int classes, float *dlogits, float grad_scale, double *acc) {
    double loss = 0.0, correct = 0.0;
    for (int r = (int)threadIdx.x; r < rows; r += (int)blockDim.x) {
        int ok = 0;
        size_t off = (size_t)r * (size_t)classes;
        loss += sl_op_xent_row(logits + off, classes, labels[r], dlogits ? dlogits + off : NULL,
                               grad_scale, &ok);
        correct += ok;
    }
    loss = block_sum(loss);
    correct = block_sum(correct);
    if (threadIdx.x == 0) {
        acc[0] += loss;
        acc[1] += correct;
    }
}

sl_err sl_cuda_softmax_xent(void *self, const float *logits, const int32_t *labels, int rows,
                            int classes, float *dlogits, float grad_scale, double *acc) {
    ENTER(c, self);
    if (rows <= 0 || classes <= 0)
        return SL_OK;
    k_softmax_xent<<<1, THREADS, 0, c->stream>>>(logits, labels, rows, classes, dlogits,
                                                 grad_scale, acc);
    return sl_cuda_launched(c, "softmax_xent");
}

/* ---- optimizer: one instantiation per rule, like the cpu backend ---- */

template <int KIND>
__global__ void k_opt_step(float *w, const float *g, float *s1, float *s2, size_t count,
                           sl_nn_opt_step_t st) {
    st.kind = (sl_nn_opt_kind)KIND; /* a constant: the switch in sl_op_opt folds */
    GRID_STRIDE(i, count)
    sl_op_opt(&w[i], g[i], &s1[i], s2 ? &s2[i] : &s1[i], &st);
}

sl_err sl_cuda_opt_step(void *self, float *w, const float *g, float *s1, float *s2,
                        size_t count, const sl_nn_opt_step_t *step) {
    ENTER(c, self);
    if (!count)
        return SL_OK;
    unsigned blocks = sl_cuda_blocks(c, count);
    switch (step->kind) {
    case SL_NN_OPT_SGD:
        k_opt_step<SL_NN_OPT_SGD><<<blocks, THREADS, 0, c->stream>>>(w, g, s1, s2, count, *step);
        break;
    case SL_NN_OPT_NESTEROV:
        k_opt_step<SL_NN_OPT_NESTEROV><<<blocks, THREADS, 0, c->stream>>>(w, g, s1, s2, count,
                                                                          *step);
        break;
    case SL_NN_OPT_ADAM:
        if (!s2)
            return SL_EINVAL;
        k_opt_step<SL_NN_OPT_ADAM><<<blocks, THREADS, 0, c->stream>>>(w, g, s1, s2, count, *step);
        break;
    case SL_NN_OPT_ADAMW:
        if (!s2)
            return SL_EINVAL;
        k_opt_step<SL_NN_OPT_ADAMW><<<blocks, THREADS, 0, c->stream>>>(w, g, s1, s2, count,
                                                                       *step);
        break;
    default:
        return SL_EINVAL;
    }
    return sl_cuda_launched(c, "opt_step");
}

/* ---- squared norm: one block ---- */

__global__ void k_sum_squares(const float *x, size_t count, double *out) {
    double s = 0.0;
    for (size_t i = threadIdx.x; i < count; i += blockDim.x)
        s += (double)x[i] * x[i];
    s = block_sum(s);
    if (threadIdx.x == 0)
        out[0] = s;
}

sl_err sl_cuda_sum_squares(void *self, const float *x, size_t count, double *out) {
    ENTER(c, self);
    k_sum_squares<<<1, 1024, 0, c->stream>>>(x, count, out);
    return sl_cuda_launched(c, "sum_squares");
}
