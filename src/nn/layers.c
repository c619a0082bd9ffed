/* Layers: the forward and backward pass of every layer kind of a built
 * model (model.c builds the list), as backend ops on device pointers.
 *
 * Conv layers run im2col + one sgemm per chunk of the minibatch (the
 * backend's im2col_chunk_len hint; one chunk on a GPU): output CNHW,
 * Y[Cout][B*Ho*Wo] = W[Cout][C*k*k] * col. Backward: dW = dY * col^T
 * (accumulated over chunks, im2col recomputed when there are several),
 * dcol = W^T * dY into the same column buffer, then col2im. Dense: Y = X W
 * with W [in][out], dW = X^T dY, dX = dY W^T. No layer allocates: every
 * buffer was sized for max_batch when the model was built. */
#include "nn/nn_internal.h"

/* ---- forward and backward ---- */

/* [outer][channels][inner] view of a batch of `rows`. */
static void view(const sl_nn_dims_t *d, int rows, int *outer, int *inner) {
    if (d->cnhw) {
        *outer = 1;
        *inner = rows * d->h * d->w;
    } else {
        *outer = rows;
        *inner = d->h * d->w;
    }
}

/* The window of a conv or pool layer for a batch of `rows`. */
static sl_nn_window_t window(const sl_nn_layer_t *l, int rows) {
    sl_nn_window_t w = {
        .channels = l->in.c,
        .batch = rows,
        .h = l->in.h,
        .w = l->in.w,
        .kh = l->kernel,
        .kw = l->kernel,
        .stride = l->stride,
        .pad = l->pad,
        .out_h = l->out.h,
        .out_w = l->out.w,
        .plane_stride_c = l->in.cnhw ? rows : 1,
        .plane_stride_n = l->in.cnhw ? 1 : l->in.c,
    };
    return w;
}

/* The conv layer's chunks of a batch of `rows`: as few as l->chunk
 * allows, of equal size (within one sample), so that no chunk is a short
 * leftover (128 samples in chunks of at most 10: 13 of 9-10, not 12 of 10
 * and one of 8). Chunk q covers samples [chunk_start(q), chunk_start(q+1)). */
static int chunk_count(const sl_nn_layer_t *l, int rows) {
    return (rows + l->chunk - 1) / l->chunk;
}

static int chunk_start(int rows, int chunks, int q) {
    return (int)((long)rows * q / chunks);
}

/* Element offset of sample n0 in a conv layer's input batch of `rows`. */
static size_t chunk_offset(const sl_nn_layer_t *l, int rows, int n0) {
    size_t hw = (size_t)l->in.h * l->in.w;
    return l->in.cnhw ? (size_t)n0 * hw : (size_t)n0 * l->in.c * hw;
}

static uint64_t dropout_seed(uint64_t seed, int layer) {
    return sl_mix64(seed + 0x44524F504F555400ull + (uint64_t)layer);
}

sl_err sl_nn_model_forward(sl_nn_model_t *m, const float *x, int rows, bool training,
                           uint64_t seed, float **logits) {
    if (rows < 1 || rows > m->max_batch)
        return SL_EINVAL;
    const sl_nn_backend_ops_t *ops = m->be->ops;
    void *self = m->be->self;
    sl_err err = SL_OK;
    const float *in = x;
    for (int i = 0; i < m->count && err == SL_OK; i++) {
        sl_nn_layer_t *l = &m->layers[i];
        float *W = m->params + l->w_off;
        int outer, inner;
        switch (l->kind) {
        case SL_NN_L_DENSE:
            err = ops->sgemm(self, false, false, rows, l->out.c, l->in.c, 1.0f, in, l->in.c, W,
                             l->out.c, 0.0f, l->y, l->out.c);
            break;
        case SL_NN_L_CONV: {
            sl_nn_window_t win = window(l, rows);
            int ckk = l->in.c * l->kernel * l->kernel, ohw = l->out.h * l->out.w;
            int chunks = chunk_count(l, rows);
            for (int q = 0; q < chunks && err == SL_OK; q++) {
                int n0 = chunk_start(rows, chunks, q);
                win.batch = chunk_start(rows, chunks, q + 1) - n0;
                err = ops->im2col(self, in + chunk_offset(l, rows, n0), l->col, &win);
                if (err == SL_OK)
                    err = ops->sgemm(self, false, false, l->out.c, win.batch * ohw, ckk, 1.0f, W,
                                     ckk, l->col, win.batch * ohw, 0.0f, l->y + (size_t)n0 * ohw,
                                     rows * ohw);
            }
            break;
        }
        case SL_NN_L_POOL: {
            sl_nn_window_t win = window(l, rows);
            err = ops->maxpool_fwd(self, in, l->y, l->argmax, &win);
            break;
        }
        case SL_NN_L_BN:
            view(&l->in, rows, &outer, &inner);
            err = ops->batchnorm_fwd(self, in, l->y, W, m->params + l->b_off,
                                     m->stats + l->s_off, m->stats + l->s_off + l->in.c,
                                     l->save_mean, l->save_invstd, outer, l->in.c, inner, 0.1f,
                                     1e-5f, training);
            break;
        case SL_NN_L_BIAS_ACT:
            view(&l->in, rows, &outer, &inner);
            err = ops->bias_act_fwd(self, l->y, l->b_count ? m->params + l->b_off : NULL, outer,
                                    l->in.c, inner, l->act);
            break;
        case SL_NN_L_DROPOUT:
            if (training)
                err = ops->dropout(self, l->y, l->y, sl_nn_dims_count(&l->in, rows), l->p,
                                   dropout_seed(seed, i));
            break;
        case SL_NN_L_FLATTEN:
            err = ops->swap_axes(self, l->y, in, l->in.c, rows, l->in.h * l->in.w);
            break;
        }
        in = l->y;
    }
    *logits = m->layers[m->count - 1].y;
    return err;
}

sl_err sl_nn_model_backward(sl_nn_model_t *m, const float *x, float *dlogits, int rows,
                            uint64_t seed) {
    if (rows < 1 || rows > m->max_batch)
        return SL_EINVAL;
    const sl_nn_backend_ops_t *ops = m->be->ops;
    void *self = m->be->self;
    sl_err err = SL_OK;
    float *dy = dlogits;
    m->input_grad = NULL;
    for (int i = m->count - 1; i >= 0 && err == SL_OK; i--) {
        sl_nn_layer_t *l = &m->layers[i];
        const float *in = i ? m->layers[i - 1].y : x;
        bool need_dx = i > 0 || m->want_input_grad;
        float *other = dy == m->gbuf[0] ? m->gbuf[1] : m->gbuf[0];
        float *W = m->params + l->w_off, *dW = m->grads + l->w_off;
        float *dx = dy;
        int outer, inner;
        switch (l->kind) {
        case SL_NN_L_DENSE:
            err = ops->sgemm(self, true, false, l->in.c, l->out.c, rows, 1.0f, in, l->in.c, dy,
                             l->out.c, 0.0f, dW, l->out.c);
            if (err == SL_OK && need_dx) {
                dx = other;
                err = ops->sgemm(self, false, true, rows, l->in.c, l->out.c, 1.0f, dy, l->out.c,
                                 W, l->out.c, 0.0f, dx, l->in.c);
            }
            break;
        case SL_NN_L_CONV: {
            sl_nn_window_t win = window(l, rows);
            int ckk = l->in.c * l->kernel * l->kernel, ohw = l->out.h * l->out.w;
            if (need_dx)
                dx = other;
            int chunks = chunk_count(l, rows);
            for (int q = 0; q < chunks && err == SL_OK; q++) {
                int n0 = chunk_start(rows, chunks, q);
                win.batch = chunk_start(rows, chunks, q + 1) - n0;
                int n = win.batch * ohw;
                const float *dyc = dy + (size_t)n0 * ohw;
                size_t off = chunk_offset(l, rows, n0);
                /* One chunk: col still holds the forward's columns. */
                if (chunks > 1)
                    err = ops->im2col(self, in + off, l->col, &win);
                if (err == SL_OK)
                    err = ops->sgemm(self, false, true, l->out.c, ckk, n, 1.0f, dyc, rows * ohw,
                                     l->col, n, n0 ? 1.0f : 0.0f, dW, ckk);
                if (err == SL_OK && need_dx)
                    err = ops->sgemm(self, true, false, ckk, n, l->out.c, 1.0f, W, ckk, dyc,
                                     rows * ohw, 0.0f, l->col, n);
                if (err == SL_OK && need_dx)
                    err = ops->col2im(self, l->col, dx + off, &win);
            }
            break;
        }
        case SL_NN_L_POOL: {
            sl_nn_window_t win = window(l, rows);
            dx = other;
            err = ops->maxpool_bwd(self, dy, l->argmax, dx, &win);
            break;
        }
        case SL_NN_L_BN:
            view(&l->in, rows, &outer, &inner);
            err = ops->batchnorm_bwd(self, dy, in, W, l->save_mean, l->save_invstd, dy, dW,
                                     m->grads + l->b_off, outer, l->in.c, inner);
            break;
        case SL_NN_L_BIAS_ACT:
            view(&l->in, rows, &outer, &inner);
            err = ops->bias_act_bwd(self, dy, l->y, l->b_count ? m->grads + l->b_off : NULL,
                                    outer, l->in.c, inner, l->act);
            break;
        case SL_NN_L_DROPOUT:
            if (need_dx)
                err = ops->dropout(self, dy, dy, sl_nn_dims_count(&l->in, rows), l->p,
                                   dropout_seed(seed, i));
            break;
        case SL_NN_L_FLATTEN:
            if (need_dx) {
                dx = other;
                err = ops->swap_axes(self, dx, dy, rows, l->in.c, l->in.h * l->in.w);
            }
            break;
        }
        dy = dx;
    }
    if (m->want_input_grad)
        m->input_grad = dy;
    return err;
}

