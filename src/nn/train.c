/* The training loop: seeded split and shuffles, minibatches gathered on
 * the device, forward, loss, backward and optimizer step as backend ops
 * (no host round-trip inside an epoch: the shuffle order is uploaded once
 * per epoch and the metric accumulators downloaded once per epoch), then
 * evaluation and an optional checkpoint.
 *
 * A run is a function of its configuration: the split, every shuffle, the
 * initial weights and every dropout mask derive from cfg.seed, the shuffle
 * RNG state is checkpointed, and the learning rate is a function of
 * (epoch, step). On the cpu backend a resumed run continues bit for bit. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "starling/platform.h"

#define SPLIT_SALT 0x53504C4954000000ull   /* "SPLIT" */
#define SHUFFLE_SALT 0x53485546464C4500ull /* "SHUFFLE" */

void sl_nn_train_cfg_init(sl_nn_train_cfg_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->model = "mlp:256,128";
    cfg->epochs = 10;
    cfg->batch = 128;
    cfg->optimizer = SL_NN_OPT_SGD;
    cfg->lr = 0.05f;
    cfg->momentum = 0.9f;
    cfg->beta1 = 0.9f;
    cfg->beta2 = 0.999f;
    cfg->eps = 1e-8f;
    cfg->schedule = SL_NN_SCHED_NONE;
    cfg->step_epochs = 10;
    cfg->step_gamma = 0.1f;
    cfg->seed = 1;
}

static double now_s(void) { return (double)sl_plat_now_ns() * 1e-9; }

static sl_err check_cfg(const sl_nn_train_cfg_t *c, char *why, size_t why_len) {
    if (c->epochs < 1 || c->epochs > 1000000)
        return sl_why(why, why_len, SL_EINVAL, "epochs %d out of range 1..1000000", c->epochs);
    if (c->batch < 1 || c->batch > 65536)
        return sl_why(why, why_len, SL_EINVAL, "batch %d out of range 1..65536", c->batch);
    if (!(c->lr > 0.0f) || !isfinite(c->lr) || c->lr > 100.0f)
        return sl_why(why, why_len, SL_EINVAL, "learning rate %g must be in (0, 100]",
                      (double)c->lr);
    if (!(c->momentum >= 0.0f && c->momentum < 1.0f))
        return sl_why(why, why_len, SL_EINVAL, "momentum %g must be in [0, 1)",
                      (double)c->momentum);
    if (!(c->weight_decay >= 0.0f && c->weight_decay < 1.0f))
        return sl_why(why, why_len, SL_EINVAL, "weight decay %g must be in [0, 1)",
                      (double)c->weight_decay);
    if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f) || !(c->beta2 >= 0.0f && c->beta2 < 1.0f) ||
        !(c->eps > 0.0f))
        return sl_why(why, why_len, SL_EINVAL, "Adam betas must be in [0, 1), eps > 0");
    if (!(c->val_split >= 0.0f && c->val_split <= 0.9f))
        return sl_why(why, why_len, SL_EINVAL, "validation split %g must be in [0, 0.9]",
                      (double)c->val_split);
    if (c->warmup_epochs < 0 || c->warmup_epochs > c->epochs)
        return sl_why(why, why_len, SL_EINVAL, "warm-up of %d epochs exceeds the %d epochs",
                      c->warmup_epochs, c->epochs);
    if ((unsigned)c->optimizer > SL_NN_OPT_ADAMW || (unsigned)c->schedule > SL_NN_SCHED_COSINE)
        return sl_why(why, why_len, SL_EINVAL, "unknown optimizer or schedule");
    if (c->schedule == SL_NN_SCHED_STEP && (c->step_epochs < 1 || !(c->step_gamma > 0.0f)))
        return sl_why(why, why_len, SL_EINVAL, "step schedule needs a period >= 1 and gamma > 0");
    return SL_OK;
}

static void shuffle(sl_rng_t *rng, int32_t *a, size_t n) {
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)sl_rng_below(rng, i);
        int32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

static sl_err dev_alloc(sl_nn_trainer_t *t, size_t len, void **out) {
    return t->be->ops->alloc(t->be->self, len ? len : 16, out);
}

/* Puts `len` bytes of host data on the device (in place when the device
 * is the host), remembering what it allocated. */
static sl_err place(sl_nn_trainer_t *t, int slot, const void *host, size_t len,
                    const void **dev) {
    if (t->be->ops->host_visible) {
        *dev = host;
        return SL_OK;
    }
    sl_err err = dev_alloc(t, len, &t->owned[slot]);
    if (err == SL_OK)
        err = t->be->ops->upload(t->be->self, t->owned[slot], host, len);
    *dev = t->owned[slot];
    return err;
}

sl_err sl_nn_trainer_new(sl_nn_backend_t *be, const sl_nn_train_cfg_t *cfg,
                         const sl_nn_data_t *train, const sl_nn_data_t *test,
                         sl_nn_trainer_t **out, char *why, size_t why_len) {
    *out = NULL;
    if (why && why_len)
        why[0] = '\0';
    sl_err err = check_cfg(cfg, why, why_len);
    if (err != SL_OK)
        return err;
    if (!train || train->count == 0)
        return sl_why(why, why_len, SL_EINVAL, "empty training set");
    if (test && (test->shape.channels != train->shape.channels ||
                 test->shape.height != train->shape.height ||
                 test->shape.width != train->shape.width))
        return sl_why(why, why_len, SL_EINVAL,
                      "test set %s is %dx%dx%d but training set %s is %dx%dx%d", test->name,
                      test->shape.channels, test->shape.height, test->shape.width,
                      train->name, train->shape.channels, train->shape.height,
                      train->shape.width);
    sl_nn_spec_t spec;
    err = sl_nn_spec_parse(cfg->model, &spec, why, why_len);
    if (err != SL_OK)
        return err;
    sl_nn_trainer_t *t = sl_calloc(1, sizeof *t);
    if (!t)
        return SL_ENOMEM;
    const sl_nn_backend_ops_t *ops = be->ops;
    t->be = be;
    t->cfg = *cfg;
    snprintf(t->model_text, sizeof t->model_text, "%s", cfg->model);
    t->cfg.model = t->model_text;
    if (cfg->checkpoint_dir) {
        snprintf(t->ckpt_dir, sizeof t->ckpt_dir, "%s", cfg->checkpoint_dir);
        t->cfg.checkpoint_dir = t->ckpt_dir;
    }
    t->train = train;
    t->test = test && test->count ? test : NULL;
    sl_nn_shape_t shape = train->shape;
    if (t->test && t->test->shape.classes > shape.classes)
        shape.classes = t->test->shape.classes;
    err = sl_nn_model_new(be, &spec, &shape, cfg->batch, &t->model, why, why_len);
    if (err != SL_OK)
        goto fail;
    if ((err = sl_nn_model_init_params(t->model, cfg->seed)) != SL_OK)
        goto fail;
    size_t pc = t->model->param_count;
    if ((err = dev_alloc(t, pc * sizeof(float), (void **)&t->s1)) != SL_OK ||
        (err = ops->fill(be->self, t->s1, 0.0f, pc)) != SL_OK)
        goto fail;
    if (sl_nn_optim_has_s2(cfg->optimizer) &&
        ((err = dev_alloc(t, pc * sizeof(float), (void **)&t->s2)) != SL_OK ||
         (err = ops->fill(be->self, t->s2, 0.0f, pc)) != SL_OK))
        goto fail;

    /* Split: a seeded shuffle of the (limited) rows; the tail validates. */
    size_t n = train->count;
    if (cfg->limit && cfg->limit < n)
        n = cfg->limit;
    if (n > INT32_MAX) {
        err = sl_why(why, why_len, SL_ETOOBIG, "training set over 2^31 samples");
        goto fail;
    }
    err = SL_ENOMEM;
    t->train_idx_host = sl_malloc(n * sizeof *t->train_idx_host);
    if (!t->train_idx_host)
        goto fail;
    for (size_t i = 0; i < n; i++)
        t->train_idx_host[i] = (int32_t)i;
    t->val_count = (size_t)((double)n * cfg->val_split);
    if (t->val_count) {
        sl_rng_t split;
        sl_rng_seed(&split, cfg->seed ^ SPLIT_SALT);
        shuffle(&split, t->train_idx_host, n);
    }
    t->train_count = n - t->val_count;
    t->train_base = sl_malloc(t->train_count * sizeof *t->train_base);
    if (!t->train_base) {
        err = SL_ENOMEM;
        goto fail;
    }
    memcpy(t->train_base, t->train_idx_host, t->train_count * sizeof *t->train_base);
    if (t->train_count == 0) {
        err = sl_why(why, why_len, SL_EINVAL, "no training samples left after the split");
        goto fail;
    }
    size_t per = (size_t)shape.channels * shape.height * shape.width;
    size_t elem = train->images_u8 ? 1 : sizeof(float);
    const void *timg = train->images_u8 ? (const void *)train->images_u8
                                        : (const void *)train->images_f32;
    if ((err = place(t, 0, timg, n * per * elem, &t->train_images)) != SL_OK ||
        (err = place(t, 1, train->labels, n * sizeof(int32_t), (const void **)&t->train_labels)) !=
            SL_OK)
        goto fail;
    if (t->test) {
        size_t te = t->test->images_u8 ? 1 : sizeof(float);
        const void *img = t->test->images_u8 ? (const void *)t->test->images_u8
                                             : (const void *)t->test->images_f32;
        if ((err = place(t, 2, img, t->test->count * per * te, &t->test_images)) != SL_OK ||
            (err = place(t, 3, t->test->labels, t->test->count * sizeof(int32_t),
                         (const void **)&t->test_labels)) != SL_OK)
            goto fail;
    }
    if (ops->host_visible) {
        t->perm = t->train_idx_host;
        t->val_idx = t->val_count ? t->train_idx_host + t->train_count : NULL;
    } else {
        if ((err = dev_alloc(t, t->train_count * sizeof(int32_t), (void **)&t->perm)) != SL_OK)
            goto fail;
        if (t->val_count &&
            ((err = dev_alloc(t, t->val_count * sizeof(int32_t), (void **)&t->val_idx)) != SL_OK ||
             (err = ops->upload(be->self, t->val_idx, t->train_idx_host + t->train_count,
                                t->val_count * sizeof(int32_t))) != SL_OK))
            goto fail;
    }
    if ((err = dev_alloc(t, (size_t)cfg->batch * per * sizeof(float), (void **)&t->xbatch)) !=
            SL_OK ||
        (err = dev_alloc(t, (size_t)cfg->batch * sizeof(int32_t), (void **)&t->ybatch)) !=
            SL_OK ||
        (err = dev_alloc(t, 4 * sizeof(double), (void **)&t->acc)) != SL_OK)
        goto fail;
    sl_rng_seed(&t->rng, cfg->seed ^ SHUFFLE_SALT);
    if (cfg->resume && cfg->checkpoint_dir) {
        char path[600];
        snprintf(path, sizeof path, "%s/checkpoint.slck", cfg->checkpoint_dir);
        err = sl_nn_checkpoint_load(t, path, why, why_len);
        if (err == SL_ENOTFOUND) { /* none yet: a fresh start */
            err = SL_OK;
            if (why && why_len)
                why[0] = '\0';
        }
        if (err != SL_OK)
            goto fail;
    }
    *out = t;
    return SL_OK;
fail:
    if (err == SL_ENOMEM && why && why_len && !why[0])
        sl_why(why, why_len, err, "out of %s memory for the run", be->ops->name);
    sl_nn_trainer_destroy(&t);
    return err;
}

void sl_nn_trainer_destroy(sl_nn_trainer_t **pt) {
    if (!pt || !*pt)
        return;
    sl_nn_trainer_t *t = *pt;
    const sl_nn_backend_ops_t *ops = t->be->ops;
    void *self = t->be->self;
#define DFREE(p)                                                                                \
    do {                                                                                        \
        if (p)                                                                                  \
            ops->free(self, (void *)(p));                                                       \
    } while (0)
    DFREE(t->s1);
    DFREE(t->s2);
    for (int i = 0; i < 4; i++)
        DFREE(t->owned[i]);
    if (!ops->host_visible) {
        DFREE(t->perm);
        DFREE(t->val_idx);
    }
    DFREE(t->xbatch);
    DFREE(t->ybatch);
    DFREE(t->acc);
#undef DFREE
    sl_nn_dp_free(t);
    sl_nn_model_destroy(&t->model);
    sl_free(t->train_idx_host);
    sl_free(t->train_base);
    sl_free(t);
    *pt = NULL;
}

void sl_nn_trainer_set_progress(sl_nn_trainer_t *t, sl_nn_progress_fn fn, void *ctx) {
    t->progress = fn;
    t->progress_ctx = ctx;
}

int sl_nn_trainer_epochs_done(const sl_nn_trainer_t *t) { return t->epoch; }
uint64_t sl_nn_trainer_params(const sl_nn_trainer_t *t) { return t->model->trainable; }
uint64_t sl_nn_trainer_flops(const sl_nn_trainer_t *t) { return t->model->flops; }

sl_err sl_nn_trainer_get_params(sl_nn_trainer_t *t, float *host, size_t count) {
    if (count > t->model->param_count)
        return SL_EINVAL;
    return t->be->ops->download(t->be->self, host, t->model->params, count * sizeof(float));
}

/* Gathers rows [first, first+rows) of `idx` (or of the set itself when
 * idx is NULL) into the minibatch buffers. */
static sl_err gather(sl_nn_trainer_t *t, const sl_nn_data_t *d, const void *images,
                     const int32_t *labels, const int32_t *idx, size_t first, int rows) {
    const sl_nn_backend_ops_t *ops = t->be->ops;
    void *self = t->be->self;
    int per = d->shape.channels * d->shape.height * d->shape.width;
    sl_err err = d->images_u8 ? ops->gather_u8(self, t->xbatch, images, idx, first, rows, per,
                                               d->scale, d->shift)
                              : ops->gather_f32(self, t->xbatch, images, idx, first, rows, per,
                                                d->scale, d->shift);
    if (err == SL_OK)
        err = ops->gather_i32(self, t->ybatch, labels, idx, first, rows);
    return err;
}

/* Loss and accuracy over `count` rows of a device set. */
static sl_err eval_set(sl_nn_trainer_t *t, const sl_nn_data_t *d, const void *images,
                       const int32_t *labels, const int32_t *idx, size_t count, double *loss,
                       double *acc) {
    const sl_nn_backend_ops_t *ops = t->be->ops;
    void *self = t->be->self;
    sl_nn_model_t *m = t->model;
    sl_err err = ops->zero_acc(self, t->acc + 2, 2);
    for (size_t first = 0; first < count && err == SL_OK; first += (size_t)t->cfg.batch) {
        int rows = (int)(count - first < (size_t)t->cfg.batch ? count - first : (size_t)t->cfg.batch);
        float *logits;
        err = gather(t, d, images, labels, idx, first, rows);
        if (err == SL_OK)
            err = sl_nn_model_forward(m, t->xbatch, rows, false, 0, &logits);
        if (err == SL_OK)
            err = ops->softmax_xent(self, logits, t->ybatch, rows, m->input.classes, NULL, 1.0f,
                                    t->acc + 2);
    }
    double host[2] = {0, 0};
    if (err == SL_OK)
        err = ops->download(self, host, t->acc + 2, sizeof host);
    *loss = count ? host[0] / (double)count : 0.0;
    *acc = count ? host[1] / (double)count : 0.0;
    return err;
}

sl_err sl_nn_trainer_evaluate(sl_nn_trainer_t *t, const sl_nn_data_t *data, double *loss,
                              double *acc) {
    if (data == t->test)
        return eval_set(t, data, t->test_images, t->test_labels, NULL, data->count, loss, acc);
    if (data == t->train)
        return eval_set(t, data, t->train_images, t->train_labels, NULL,
                        t->train_count + t->val_count, loss, acc);
    if (!t->be->ops->host_visible)
        return SL_EUNSUPPORTED;
    int per = data->shape.channels * data->shape.height * data->shape.width;
    if (per != t->model->input.channels * t->model->input.height * t->model->input.width)
        return SL_EINVAL;
    const void *img = data->images_u8 ? (const void *)data->images_u8
                                      : (const void *)data->images_f32;
    return eval_set(t, data, img, data->labels, NULL, data->count, loss, acc);
}

sl_err sl_nn_trainer_epoch(sl_nn_trainer_t *t, sl_nn_epoch_t *mt, char *why, size_t why_len) {
    if (t->epoch >= t->cfg.epochs)
        return sl_why(why, why_len, SL_ESTATE, "all %d epochs are done", t->cfg.epochs);
    const sl_nn_backend_ops_t *ops = t->be->ops;
    void *self = t->be->self;
    sl_nn_model_t *m = t->model;
    const int B = t->cfg.batch;
    const size_t n = t->train_count;
    const size_t steps = (n + (size_t)B - 1) / (size_t)B;
    const int e = t->epoch;
    memset(mt, 0, sizeof *mt);
    double t0 = now_s();
    /* Each epoch shuffles the split's order afresh: the order is then a
     * function of the RNG state alone, which the checkpoint holds. */
    memcpy(t->train_idx_host, t->train_base, n * sizeof *t->train_base);
    shuffle(&t->rng, t->train_idx_host, n);
    sl_err err = SL_OK;
    if (!ops->host_visible)
        err = ops->upload(self, t->perm, t->train_idx_host, n * sizeof(int32_t));
    if (err == SL_OK)
        err = ops->zero_acc(self, t->acc, 2);
    size_t every = steps / 50 ? steps / 50 : 1;
    double lr = t->cfg.lr;
    for (size_t s = 0; s < steps && err == SL_OK; s++) {
        size_t first = s * (size_t)B;
        int rows = (int)(n - first < (size_t)B ? n - first : (size_t)B);
        uint64_t seed = sl_mix64(t->cfg.seed ^ (t->step * 0x9E3779B97F4A7C15ull));
        float *logits;
        err = gather(t, t->train, t->train_images, t->train_labels, t->perm, first, rows);
        if (err == SL_OK)
            err = sl_nn_model_forward(m, t->xbatch, rows, true, seed, &logits);
        if (err == SL_OK)
            err = ops->softmax_xent(self, logits, t->ybatch, rows, m->input.classes, m->gbuf[0],
                                    1.0f / (float)rows, t->acc);
        if (err == SL_OK)
            err = sl_nn_model_backward(m, t->xbatch, m->gbuf[0], rows, seed);
        if (err == SL_OK) {
            sl_nn_opt_step_t st;
            lr = sl_nn_optim_lr(&t->cfg, e, s, steps);
            sl_nn_optim_step_params(&t->cfg, lr, t->step + 1, &st);
            err = ops->opt_step(self, m->params, m->grads, t->s1, t->s2, m->param_count, &st);
        }
        t->step++;
        if (t->progress && (s % every == 0 || s + 1 == steps))
            t->progress(t->progress_ctx, e + 1, s + 1, steps);
    }
    double host[2] = {0, 0};
    if (err == SL_OK)
        err = ops->download(self, host, t->acc, sizeof host);
    if (err == SL_OK)
        err = ops->sync(self);
    if (err != SL_OK)
        return sl_why(why, why_len, err, "training epoch %d failed on %s: %s", e + 1,
                      ops->name, sl_strerror(err));
    double t1 = now_s();
    mt->epoch = e + 1;
    mt->epochs = t->cfg.epochs;
    mt->samples = n;
    mt->train_loss = host[0] / (double)n;
    mt->train_acc = host[1] / (double)n;
    mt->lr = lr;
    mt->seconds = t1 - t0;
    mt->samples_per_s = mt->seconds > 0 ? (double)n / mt->seconds : 0.0;
    if (!isfinite(mt->train_loss))
        return sl_why(why, why_len, SL_ERANGE,
                      "training diverged in epoch %d (loss is %g); lower the learning rate",
                      e + 1, mt->train_loss);
    if (t->val_count) {
        mt->has_val = true;
        err = eval_set(t, t->train, t->train_images, t->train_labels, t->val_idx, t->val_count,
                       &mt->val_loss, &mt->val_acc);
    }
    if (err == SL_OK && t->test) {
        mt->has_test = true;
        err = eval_set(t, t->test, t->test_images, t->test_labels, NULL, t->test->count,
                       &mt->test_loss, &mt->test_acc);
    }
    if (err != SL_OK)
        return sl_why(why, why_len, err, "evaluation after epoch %d failed: %s", e + 1,
                      sl_strerror(err));
    mt->eval_seconds = now_s() - t1;
    t->epoch++;
    if (t->cfg.checkpoint_dir) {
        char path[600];
        snprintf(path, sizeof path, "%s/checkpoint.slck", t->cfg.checkpoint_dir);
        err = sl_nn_checkpoint_save(t, path, why, why_len);
        if (err != SL_OK)
            return err;
    }
    return SL_OK;
}

sl_err sl_nn_trainer_run(sl_nn_trainer_t *t, sl_nn_epoch_fn on_epoch, void *ctx, char *why,
                         size_t why_len) {
    while (t->epoch < t->cfg.epochs) {
        sl_nn_epoch_t mt;
        sl_err err = sl_nn_trainer_epoch(t, &mt, why, why_len);
        if (err != SL_OK)
            return err;
        if (on_epoch && !on_epoch(ctx, &mt))
            break;
    }
    return SL_OK;
}
