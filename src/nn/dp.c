/* Data-parallel steps: what a trainer that splits each step across
 * workers (src/elastic/trainer.c) drives instead of sl_nn_trainer_epoch.
 *
 * A step is cut in two around the all-reduce: sl_nn_dp_grads sums the
 * gradients of this worker's rows (not averaged: the caller divides the
 * all-reduced sum by the step's sample count, so an uneven split weighs
 * every sample the same), sl_nn_dp_apply takes the mean back and steps
 * the optimizer with the run's learning-rate schedule. Between the two
 * the parameters are untouched, so a step whose all-reduce fails leaves
 * them as they were. The whole state (parameters, optimizer vectors,
 * running statistics) goes to and from one host vector for the transfer
 * from a world's source rank. The trainer's step counter is the
 * data-parallel step, and checkpoints carry it (checkpoint.c). */
#include <assert.h>
#include <string.h>

#include "nn/nn_internal.h"

/* What a trainer needs for data-parallel steps besides its own buffers. */
struct sl_nn_dp {
    int32_t *idx_host; /* a chunk's data-set row ids (max_batch entries) */
    int32_t *idx_dev;  /* their device copy (the host array when host_visible) */
    float *gsum;       /* device sum of the chunks' gradients, P + R + 2 floats (room for
                          sl_nn_dp_reduce_device's tail), or NULL when host_visible */
    bool on_device;    /* gsum holds this step's sums, not downloaded (grads NULL) */
    bool device_mean;  /* gsum holds the mean of the last sl_nn_dp_reduce_device */
};

void sl_nn_dp_free(sl_nn_trainer_t *t) {
    struct sl_nn_dp *dp = t->dp;
    if (!dp)
        return;
    const sl_nn_backend_ops_t *ops = t->be->ops;
    if (!ops->host_visible) {
        if (dp->idx_dev)
            ops->free(t->be->self, dp->idx_dev);
        if (dp->gsum)
            ops->free(t->be->self, dp->gsum);
    }
    sl_free(dp->idx_host);
    sl_free(dp);
    t->dp = NULL;
}

static sl_err dp_get(sl_nn_trainer_t *t, struct sl_nn_dp **out) {
    if (t->dp) {
        *out = t->dp;
        return SL_OK;
    }
    const sl_nn_backend_ops_t *ops = t->be->ops;
    void *self = t->be->self;
    struct sl_nn_dp *dp = sl_calloc(1, sizeof *dp);
    if (!dp)
        return SL_ENOMEM;
    t->dp = dp;
    size_t B = (size_t)t->cfg.batch;
    dp->idx_host = sl_malloc(B * sizeof *dp->idx_host);
    if (!dp->idx_host)
        goto fail;
    if (ops->host_visible) {
        dp->idx_dev = dp->idx_host;
    } else if (ops->alloc(self, B * sizeof(int32_t), (void **)&dp->idx_dev) != SL_OK ||
               ops->alloc(self, (t->model->param_count + t->model->stat_count + 2) * sizeof(float),
                          (void **)&dp->gsum) != SL_OK) {
        goto fail;
    }
    *out = dp;
    return SL_OK;
fail:
    sl_nn_dp_free(t);
    return SL_ENOMEM;
}

size_t sl_nn_dp_train_count(const sl_nn_trainer_t *t) { return t->train_count; }
size_t sl_nn_dp_param_count(const sl_nn_trainer_t *t) { return t->model->param_count; }
size_t sl_nn_dp_stat_count(const sl_nn_trainer_t *t) { return t->model->stat_count; }

size_t sl_nn_dp_state_count(const sl_nn_trainer_t *t) {
    return t->model->param_count * (t->s2 ? 3 : 2) + t->model->stat_count;
}

uint64_t sl_nn_dp_step(const sl_nn_trainer_t *t) { return t->step; }

void sl_nn_dp_set_step(sl_nn_trainer_t *t, uint64_t step, uint64_t steps_per_epoch) {
    uint64_t epoch = steps_per_epoch ? step / steps_per_epoch : 0;
    t->step = step;
    t->epoch = epoch > (uint64_t)t->cfg.epochs ? t->cfg.epochs : (int)epoch;
}

sl_err sl_nn_dp_grads(sl_nn_trainer_t *t, const uint32_t *rows, size_t count, uint64_t seed,
                      float *grads, double *loss_sum, double *correct) {
    sl_nn_model_t *m = t->model;
    const sl_nn_backend_ops_t *ops = t->be->ops;
    void *self = t->be->self;
    size_t P = m->param_count;
    *loss_sum = 0;
    *correct = 0;
    assert(grads || !ops->host_visible); /* a host backend's sums are the caller's */
    for (size_t i = 0; i < count; i++)
        if (rows[i] >= t->train_count)
            return SL_EINVAL;
    struct sl_nn_dp *dp;
    sl_err err = dp_get(t, &dp);
    if (err != SL_OK)
        return err;
    dp->on_device = false;
    dp->device_mean = false;
    if (count == 0) { /* a rank with no sample adds nothing to the sum */
        if (grads) {
            memset(grads, 0, P * sizeof *grads);
            return SL_OK;
        }
        err = ops->fill(self, dp->gsum, 0.0f, P);
        dp->on_device = err == SL_OK;
        return err;
    }
    /* On the cpu backend the caller's buffer is the accumulator. */
    float *gsum = ops->host_visible ? grads : dp->gsum;
    const sl_nn_data_t *d = t->train;
    int per = d->shape.channels * d->shape.height * d->shape.width;
    const size_t B = (size_t)t->cfg.batch;
    err = ops->zero_acc(self, t->acc, 2);
    for (size_t first = 0; first < count && err == SL_OK; first += B) {
        int n = (int)(count - first < B ? count - first : B);
        for (int r = 0; r < n; r++)
            dp->idx_host[r] = t->train_base[rows[first + (size_t)r]];
        /* The chunks of one call get different dropout masks. */
        uint64_t cseed = first ? sl_mix64(seed ^ (uint64_t)(first / B)) : seed;
        float *logits;
        if (!ops->host_visible)
            err = ops->upload(self, dp->idx_dev, dp->idx_host, (size_t)n * sizeof(int32_t));
        if (err == SL_OK)
            err = d->images_u8 ? ops->gather_u8(self, t->xbatch, t->train_images, dp->idx_dev, 0,
                                                n, per, d->scale, d->shift)
                               : ops->gather_f32(self, t->xbatch, t->train_images, dp->idx_dev,
                                                 0, n, per, d->scale, d->shift);
        if (err == SL_OK)
            err = ops->gather_i32(self, t->ybatch, t->train_labels, dp->idx_dev, 0, n);
        if (err == SL_OK)
            err = sl_nn_model_forward(m, t->xbatch, n, true, cseed, &logits);
        /* Scale 1: the gradient of the summed loss, not of the mean. */
        if (err == SL_OK)
            err = ops->softmax_xent(self, logits, t->ybatch, n, m->input.classes, m->gbuf[0],
                                    1.0f, t->acc);
        if (err == SL_OK)
            err = sl_nn_model_backward(m, t->xbatch, m->gbuf[0], n, cseed);
        /* Backward overwrites m->grads: chunks add up in gsum. */
        if (err == SL_OK)
            err = first ? ops->axpby(self, P, 1.0f, m->grads, 1.0f, gsum)
                        : ops->copy(self, gsum, m->grads, P);
    }
    double acc[2] = {0, 0};
    if (err == SL_OK)
        err = ops->download(self, acc, t->acc, sizeof acc);
    if (err == SL_OK && !ops->host_visible && grads)
        err = ops->download(self, grads, gsum, P * sizeof *grads);
    if (err == SL_OK)
        err = ops->sync(self);
    dp->on_device = err == SL_OK && !grads;
    *loss_sum = acc[0];
    *correct = acc[1];
    return err;
}

bool sl_nn_dp_device_collectives(const sl_nn_trainer_t *t) {
    const sl_nn_backend_ops_t *ops = t->be->ops;
    return !ops->host_visible && ops->stream && ops->query;
}

sl_err sl_nn_dp_device_query(sl_nn_trainer_t *t) {
    if (!sl_nn_dp_device_collectives(t))
        return SL_EUNSUPPORTED;
    return t->be->ops->query(t->be->self);
}

sl_err sl_nn_dp_reduce_device(sl_nn_trainer_t *t, float *tail, size_t tail_count, float divisor,
                              sl_nn_dp_reduce_fn fn, void *ctx) {
    if (!sl_nn_dp_device_collectives(t))
        return SL_EUNSUPPORTED;
    struct sl_nn_dp *dp = t->dp;
    if (!dp || !dp->on_device || tail_count > t->model->stat_count + 2)
        return SL_ESTATE;
    const sl_nn_backend_ops_t *ops = t->be->ops;
    void *self = t->be->self;
    size_t P = t->model->param_count, n = P + tail_count;
    dp->on_device = false; /* summed once */
    sl_err err = tail_count ? ops->upload(self, dp->gsum + P, tail, tail_count * sizeof *tail)
                            : ops->sync(self);
    if (err == SL_OK)
        err = fn(ctx, dp->gsum, n, ops->stream(self));
    if (err == SL_OK)
        err = ops->axpby(self, n, 1.0f / divisor, dp->gsum, 0.0f, dp->gsum);
    if (err == SL_OK && tail_count)
        err = ops->download(self, tail, dp->gsum + P, tail_count * sizeof *tail);
    dp->device_mean = err == SL_OK;
    return err;
}

sl_err sl_nn_dp_apply(sl_nn_trainer_t *t, const float *mean, uint64_t step,
                      uint64_t steps_per_epoch, double *lr_out) {
    if (steps_per_epoch == 0)
        return SL_EINVAL;
    sl_nn_model_t *m = t->model;
    const sl_nn_backend_ops_t *ops = t->be->ops;
    void *self = t->be->self;
    const float *g = mean;
    sl_err err = SL_OK;
    if (!mean) { /* the mean sl_nn_dp_reduce_device left on the device */
        if (!t->dp || !t->dp->device_mean)
            return SL_ESTATE;
        t->dp->device_mean = false;
        g = t->dp->gsum;
    } else if (!ops->host_visible) {
        err = ops->upload(self, m->grads, mean, m->param_count * sizeof *mean);
        g = m->grads;
    }
    uint64_t epoch = step / steps_per_epoch;
    double lr = sl_nn_optim_lr(&t->cfg, (int)epoch, (size_t)(step % steps_per_epoch),
                               (size_t)steps_per_epoch);
    sl_nn_opt_step_t st;
    sl_nn_optim_step_params(&t->cfg, lr, step + 1, &st);
    if (err == SL_OK)
        err = ops->opt_step(self, m->params, g, t->s1, t->s2, m->param_count, &st);
    if (err == SL_OK)
        err = ops->sync(self);
    if (err != SL_OK)
        return err;
    sl_nn_dp_set_step(t, step + 1, steps_per_epoch);
    if (lr_out)
        *lr_out = lr;
    return SL_OK;
}

sl_err sl_nn_dp_stats_get(sl_nn_trainer_t *t, float *host) {
    sl_nn_model_t *m = t->model;
    if (!m->stat_count)
        return SL_OK;
    return t->be->ops->download(t->be->self, host, m->stats, m->stat_count * sizeof *host);
}

sl_err sl_nn_dp_stats_set(sl_nn_trainer_t *t, const float *host) {
    sl_nn_model_t *m = t->model;
    if (!m->stat_count)
        return SL_OK;
    return t->be->ops->upload(t->be->self, m->stats, host, m->stat_count * sizeof *host);
}

/* The state vector's parts, in order: params, s1, s2 (Adam), stats. */
static int state_parts(sl_nn_trainer_t *t, float *dev[4], size_t len[4]) {
    sl_nn_model_t *m = t->model;
    int n = 0;
    dev[n] = m->params, len[n++] = m->param_count;
    dev[n] = t->s1, len[n++] = m->param_count;
    if (t->s2)
        dev[n] = t->s2, len[n++] = m->param_count;
    if (m->stat_count)
        dev[n] = m->stats, len[n++] = m->stat_count;
    return n;
}

sl_err sl_nn_dp_state_get(sl_nn_trainer_t *t, float *host) {
    float *dev[4];
    size_t len[4];
    int n = state_parts(t, dev, len);
    sl_err err = SL_OK;
    for (int i = 0; i < n && err == SL_OK; host += len[i], i++)
        err = t->be->ops->download(t->be->self, host, dev[i], len[i] * sizeof *host);
    return err;
}

sl_err sl_nn_dp_state_set(sl_nn_trainer_t *t, const float *host) {
    float *dev[4];
    size_t len[4];
    int n = state_parts(t, dev, len);
    sl_err err = SL_OK;
    for (int i = 0; i < n && err == SL_OK; host += len[i], i++)
        err = t->be->ops->upload(t->be->self, dev[i], host, len[i] * sizeof *host);
    if (err == SL_OK)
        err = t->be->ops->sync(t->be->self);
    return err;
}

sl_err sl_nn_dp_reset(sl_nn_trainer_t *t) {
    const sl_nn_backend_ops_t *ops = t->be->ops;
    size_t P = t->model->param_count;
    sl_err err = sl_nn_model_init_params(t->model, t->cfg.seed);
    if (err == SL_OK)
        err = ops->fill(t->be->self, t->s1, 0.0f, P);
    if (err == SL_OK && t->s2)
        err = ops->fill(t->be->self, t->s2, 0.0f, P);
    if (err == SL_OK)
        err = ops->sync(t->be->self);
    if (err == SL_OK)
        sl_nn_dp_set_step(t, 0, 1);
    return err;
}

size_t sl_nn_dp_eval_count(const sl_nn_trainer_t *t, bool test) {
    return test ? (t->test ? t->test->count : 0) : t->val_count;
}

sl_err sl_nn_dp_eval(sl_nn_trainer_t *t, bool test, size_t first, size_t count,
                     double *loss_sum, double *correct) {
    *loss_sum = 0;
    *correct = 0;
    if (first > sl_nn_dp_eval_count(t, test) || count > sl_nn_dp_eval_count(t, test) - first)
        return SL_EINVAL;
    if (count == 0)
        return SL_OK;
    const sl_nn_backend_ops_t *ops = t->be->ops;
    void *self = t->be->self;
    sl_nn_model_t *m = t->model;
    const sl_nn_data_t *d = test ? t->test : t->train;
    const void *images = test ? t->test_images : t->train_images;
    const int32_t *labels = test ? t->test_labels : t->train_labels;
    const int32_t *idx = test ? NULL : t->val_idx; /* val: rows through the split's ids */
    int per = d->shape.channels * d->shape.height * d->shape.width;
    const size_t B = (size_t)t->cfg.batch;
    sl_err err = ops->zero_acc(self, t->acc + 2, 2);
    for (size_t at = first; at < first + count && err == SL_OK; at += B) {
        int n = (int)(first + count - at < B ? first + count - at : B);
        float *logits;
        err = d->images_u8
                  ? ops->gather_u8(self, t->xbatch, images, idx, at, n, per, d->scale, d->shift)
                  : ops->gather_f32(self, t->xbatch, images, idx, at, n, per, d->scale,
                                    d->shift);
        if (err == SL_OK)
            err = ops->gather_i32(self, t->ybatch, labels, idx, at, n);
        if (err == SL_OK)
            err = sl_nn_model_forward(m, t->xbatch, n, false, 0, &logits);
        if (err == SL_OK)
            err = ops->softmax_xent(self, logits, t->ybatch, n, m->input.classes, NULL, 1.0f,
                                    t->acc + 2);
    }
    double acc[2] = {0, 0};
    if (err == SL_OK)
        err = ops->download(self, acc, t->acc + 2, sizeof acc);
    *loss_sum = acc[0];
    *correct = acc[1];
    return err;
}
