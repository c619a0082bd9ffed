/* Starling nn: the element-wise math, written once.
 *
 * Every per-element formula of the training engine is a small static
 * inline function here. The cpu backend (backend_cpu.c) loops over them;
 * the cuda kernels (src/nn/cuda/ (*.cu files)) call the same functions from device
 * code (SL_OPS_FN expands to __host__ __device__ under nvcc). So the CPU
 * gradient tests check the formulas the GPU runs.
 *
 * Rules for this file: no libc beyond <math.h> float functions (expf,
 * logf, sqrtf, fmaxf), no allocation, no globals, no I/O; plain C that is
 * also valid C++17. */
#ifndef STARLING_NN_OPS_MATH_H
#define STARLING_NN_OPS_MATH_H

#include <math.h>
#include <stdint.h>

#include "starling/nn_backend.h"

#if defined(__CUDACC__)
#define SL_OPS_FN static __host__ __device__ __forceinline__
#else
#define SL_OPS_FN static inline
#endif

/* ---- activations ---- */

/* act(x). */
SL_OPS_FN float sl_op_act(float x, int act) {
    return (act == SL_NN_ACT_RELU && !(x > 0.0f)) ? 0.0f : x;
}

/* d act / d x times dy, from the forward OUTPUT y (ReLU: y > 0). */
SL_OPS_FN float sl_op_act_grad(float y, float dy, int act) {
    return (act == SL_NN_ACT_RELU && !(y > 0.0f)) ? 0.0f : dy;
}

/* ---- data ---- */

/* Stored byte or float to the network's input scale. */
SL_OPS_FN float sl_op_convert(float v, float scale, float shift) {
    return v * scale + shift;
}

/* ---- dropout (counter-based, no stored mask) ---- */

/* splitmix64 finaliser: the hash behind the dropout mask. */
SL_OPS_FN uint64_t sl_op_mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Whether element `index` survives dropout with drop probability p under
 * `seed`: a 24-bit uniform draw compared with p * 2^24. */
SL_OPS_FN int sl_op_dropout_keep(uint64_t seed, uint64_t index, float p) {
    uint32_t draw = (uint32_t)(sl_op_mix64(seed ^ (index * 0xD1B54A32D192ED03ull)) >> 40);
    uint32_t threshold = (uint32_t)(p * 16777216.0f);
    return draw >= threshold;
}

/* y for element `index`: x / (1 - p) when kept, else 0. */
SL_OPS_FN float sl_op_dropout(float x, uint64_t seed, uint64_t index, float p) {
    return sl_op_dropout_keep(seed, index, p) ? x * (1.0f / (1.0f - p)) : 0.0f;
}

/* ---- batch norm ---- */

/* Forward for one element given the channel's mean and inverse std. */
SL_OPS_FN float sl_op_bn_fwd(float x, float mean, float invstd, float gamma, float beta) {
    return gamma * ((x - mean) * invstd) + beta;
}

/* Inverse standard deviation from a biased variance. */
SL_OPS_FN float sl_op_bn_invstd(float var, float eps) {
    return 1.0f / sqrtf(var + eps);
}

/* Backward for one element: mean_dy = mean of dy over the channel,
 * mean_dy_xhat = mean of dy * xhat over the channel. */
SL_OPS_FN float sl_op_bn_bwd(float dy, float x, float mean, float invstd, float gamma,
                             float mean_dy, float mean_dy_xhat) {
    float xhat = (x - mean) * invstd;
    return gamma * invstd * (dy - mean_dy - xhat * mean_dy_xhat);
}

/* Running statistic update. */
SL_OPS_FN float sl_op_ema(float running, float batch, float momentum) {
    return (1.0f - momentum) * running + momentum * batch;
}

/* ---- softmax cross-entropy (one row) ---- */

/* One row of `classes` logits with label `label`: returns the loss
 * (log-sum-exp minus the label's logit, computed stably), sets *correct to
 * 1 when the first argmax is the label, and when dlogits != NULL writes
 * (softmax - onehot) * grad_scale (dlogits may alias logits). A label out
 * of range gives loss 0, correct 0 and zero gradient. */
SL_OPS_FN float sl_op_xent_row(const float *logits, int classes, int label, float *dlogits,
                               float grad_scale, int *correct) {
    float mx = logits[0];
    int arg = 0;
    for (int k = 1; k < classes; k++)
        if (logits[k] > mx) {
            mx = logits[k];
            arg = k;
        }
    float sum = 0.0f;
    for (int k = 0; k < classes; k++)
        sum += expf(logits[k] - mx);
    float lse = mx + logf(sum);
    int valid = label >= 0 && label < classes;
    float loss = valid ? lse - logits[label] : 0.0f;
    *correct = valid && arg == label;
    if (dlogits) {
        float inv = 1.0f / sum;
        for (int k = 0; k < classes; k++) {
            float pk = expf(logits[k] - mx) * inv;
            dlogits[k] = valid ? (pk - (k == label ? 1.0f : 0.0f)) * grad_scale : 0.0f;
        }
    }
    return loss;
}

/* ---- optimizer (one parameter) ---- */

/* Updates w, s1 (momentum / Adam m) and s2 (Adam v) for gradient g.
 *  sgd:      g' = g + wd*w; s1 = m*s1 + g'; w -= lr*s1
 *  nesterov: g' = g + wd*w; s1 = m*s1 + g'; w -= lr*(g' + m*s1)
 *  adam:     g' = g + wd*w; s1 = b1*s1 + (1-b1)*g'; s2 = b2*s2 + (1-b2)*g'^2;
 *            w -= lr * (s1*c1) / (sqrt(s2*c2) + eps)
 *  adamw:    as adam with g' = g, then w -= lr*wd*w applied first
 * (c1, c2 the host-computed bias corrections). These match PyTorch's
 * torch.optim.SGD (dampening 0), Adam and AdamW. */
SL_OPS_FN void sl_op_opt(float *w, float g, float *s1, float *s2, const sl_nn_opt_step_t *st) {
    float wv = *w;
    switch (st->kind) {
    case SL_NN_OPT_SGD:
    case SL_NN_OPT_NESTEROV: {
        float gp = g + st->weight_decay * wv;
        float v = st->momentum * *s1 + gp;
        *s1 = v;
        float d = st->kind == SL_NN_OPT_NESTEROV ? gp + st->momentum * v : v;
        *w = wv - st->lr * d;
        break;
    }
    case SL_NN_OPT_ADAM:
    case SL_NN_OPT_ADAMW: {
        float gp = g;
        if (st->kind == SL_NN_OPT_ADAM)
            gp += st->weight_decay * wv;
        else
            wv -= st->lr * st->weight_decay * wv;
        float m = st->beta1 * *s1 + (1.0f - st->beta1) * gp;
        float v = st->beta2 * *s2 + (1.0f - st->beta2) * gp * gp;
        *s1 = m;
        *s2 = v;
        *w = wv - st->lr * (m * st->bias_corr1) / (sqrtf(v * st->bias_corr2) + st->eps);
        break;
    }
    }
}

/* ---- windows (im2col, col2im, max-pool) ---- */

/* Element offset of plane (c, n) in a tensor with the window's plane
 * strides and planes of `plane_len` elements. */
SL_OPS_FN long sl_op_plane(const sl_nn_window_t *win, int c, int n, long plane_len) {
    return ((long)c * win->plane_stride_c + (long)n * win->plane_stride_n) * plane_len;
}

/* The input offset im2col reads for column-matrix entry (row, col), or -1
 * where the window lies on padding. row = (c*kh + i)*kw + j, col = n *
 * out_h*out_w + oy*out_w + ox. */
SL_OPS_FN long sl_op_im2col_src(const sl_nn_window_t *win, long row, long col) {
    int j = (int)(row % win->kw);
    int i = (int)((row / win->kw) % win->kh);
    int c = (int)(row / ((long)win->kw * win->kh));
    long ohw = (long)win->out_h * win->out_w;
    int n = (int)(col / ohw);
    long p = col % ohw;
    int oy = (int)(p / win->out_w), ox = (int)(p % win->out_w);
    int y = oy * win->stride - win->pad + i, x = ox * win->stride - win->pad + j;
    if (y < 0 || y >= win->h || x < 0 || x >= win->w)
        return -1;
    return sl_op_plane(win, c, n, (long)win->h * win->w) + (long)y * win->w + x;
}

/* Max over the window of output (oy, ox) in one input plane; *arg gets the
 * winner's offset within the plane (first max in row-major order). */
SL_OPS_FN float sl_op_maxpool_at(const float *plane, const sl_nn_window_t *win, int oy, int ox,
                                 int32_t *arg) {
    int y0 = oy * win->stride - win->pad, x0 = ox * win->stride - win->pad;
    float best = -INFINITY;
    int32_t best_at = -1;
    for (int i = 0; i < win->kh; i++) {
        int y = y0 + i;
        if (y < 0 || y >= win->h)
            continue;
        for (int j = 0; j < win->kw; j++) {
            int x = x0 + j;
            if (x < 0 || x >= win->w)
                continue;
            float v = plane[y * win->w + x];
            if (best_at < 0 || v > best) {
                best = v;
                best_at = y * win->w + x;
            }
        }
    }
    *arg = best_at < 0 ? 0 : best_at;
    return best_at < 0 ? 0.0f : best;
}

#endif
