/* Models: a spec becomes a list of layers over flat parameter, gradient
 * and statistics vectors, with every buffer allocated once; layers.c runs
 * them forward and backward through the backend ops.
 *
 * Layout: the conv stack keeps its activations CNHW so that one sgemm
 * covers the whole batch; FLATTEN turns them into NCHW rows for the dense
 * layers. Per conv spec layer the order is conv -> [bn] -> [pool] ->
 * bias+relu -> [dropout]: the bias and ReLU come after the max-pool
 * because max commutes with adding a per-channel constant and with any
 * monotone function, so they run on 4x fewer elements (bit-identical
 * results to conv+bias -> relu -> pool, up to ties). Dense spec layers are
 * dense -> [bn] -> bias+relu -> [dropout]; the output layer is dense ->
 * bias. Bias+activation and dropout work in place. */
#include <stdio.h>
#include <string.h>

#include "nn/nn_internal.h"

#define MAX_LAYERS (5 * SL_NN_SPEC_MAX_LAYERS + 4)

/* Takes `n` floats at the end of a flat vector, 16-float aligned. */
static size_t take(size_t *end, size_t n) {
    size_t at = *end;
    *end += (n + 15) & ~(size_t)15;
    return at;
}

/* The plan: layers with shapes and flat offsets, no device memory. */
typedef struct {
    sl_nn_layer_t layers[MAX_LAYERS]; /* planned layers */
    int count;                        /* used */
    size_t param_count;               /* flat length */
    size_t trainable;                 /* real parameters */
    size_t stat_count;                /* BN statistics */
    uint64_t flops;                   /* forward FLOPs per sample */
} plan_t;

static sl_nn_layer_t *add(plan_t *p, sl_nn_layer_kind kind, int spec_index,
                          const sl_nn_dims_t *in) {
    sl_nn_layer_t *l = &p->layers[p->count++];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->spec_index = spec_index;
    l->in = *in;
    l->out = *in;
    return l;
}

static void add_bias_act(plan_t *p, int si, sl_nn_dims_t *d, bool bias, sl_nn_act act) {
    sl_nn_layer_t *l = add(p, SL_NN_L_BIAS_ACT, si, d);
    l->in_place = true;
    l->act = act;
    if (bias) {
        l->b_count = (size_t)d->c;
        l->b_off = take(&p->param_count, l->b_count);
        p->trainable += l->b_count;
    }
    p->flops += (uint64_t)d->c * d->h * d->w;
}

static void add_bn(plan_t *p, int si, sl_nn_dims_t *d) {
    sl_nn_layer_t *l = add(p, SL_NN_L_BN, si, d);
    l->w_count = l->b_count = (size_t)d->c;
    l->w_off = take(&p->param_count, l->w_count);
    l->b_off = take(&p->param_count, l->b_count);
    l->s_off = take(&p->stat_count, 2 * (size_t)d->c);
    p->trainable += 2 * (size_t)d->c;
    p->flops += 2 * (uint64_t)d->c * d->h * d->w;
}

static void add_dropout(plan_t *p, int si, sl_nn_dims_t *d, float prob) {
    sl_nn_layer_t *l = add(p, SL_NN_L_DROPOUT, si, d);
    l->in_place = true;
    l->p = prob;
    p->flops += (uint64_t)d->c * d->h * d->w;
}

static void add_dense(plan_t *p, int si, sl_nn_dims_t *d, int units) {
    if (d->cnhw) {
        sl_nn_layer_t *f = add(p, SL_NN_L_FLATTEN, si, d);
        f->out = (sl_nn_dims_t){.c = d->c * d->h * d->w, .h = 1, .w = 1, .cnhw = false};
        *d = f->out;
    }
    sl_nn_dims_t in = {.c = d->c * d->h * d->w, .h = 1, .w = 1, .cnhw = false};
    sl_nn_layer_t *l = add(p, SL_NN_L_DENSE, si, &in);
    l->in = in;
    l->out = (sl_nn_dims_t){.c = units, .h = 1, .w = 1, .cnhw = false};
    l->w_count = (size_t)in.c * units;
    l->w_off = take(&p->param_count, l->w_count);
    p->trainable += l->w_count;
    p->flops += 2 * (uint64_t)l->w_count;
    *d = l->out;
}

static sl_err plan_build(const sl_nn_spec_t *spec, const sl_nn_shape_t *input, plan_t *p,
                         char *why, size_t why_len) {
    memset(p, 0, sizeof *p);
    if (input->channels < 1 || input->height < 1 || input->width < 1 || input->classes < 2)
        return sl_why(why, why_len, SL_EINVAL,
                      "model: input %dx%dx%d with %d classes is not trainable",
                      input->channels, input->height, input->width, input->classes);
    sl_nn_dims_t d = {.c = input->channels, .h = input->height, .w = input->width};
    for (int i = 0; i < spec->count; i++) {
        const sl_nn_spec_layer_t *s = &spec->layers[i];
        if (s->kind == SL_NN_SPEC_CONV) {
            int k = s->kernel;
            int oh = (d.h + 2 * s->pad - k) / s->stride + 1;
            int ow = (d.w + 2 * s->pad - k) / s->stride + 1;
            if (d.h + 2 * s->pad < k || d.w + 2 * s->pad < k)
                return sl_why(why, why_len, SL_EINVAL,
                              "model spec '%s': conv layer %d: %dx%d kernel larger than its "
                              "%dx%d input (with padding %d)",
                              spec->text, i + 1, k, k, d.h, d.w, s->pad);
            sl_nn_layer_t *l = add(p, SL_NN_L_CONV, i, &d);
            l->kernel = k;
            l->stride = s->stride;
            l->pad = s->pad;
            l->out = (sl_nn_dims_t){.c = s->units, .h = oh, .w = ow, .cnhw = true};
            l->w_count = (size_t)s->units * d.c * k * k;
            l->w_off = take(&p->param_count, l->w_count);
            p->trainable += l->w_count;
            p->flops += 2 * (uint64_t)l->w_count * oh * ow;
            d = l->out;
            if (s->batchnorm)
                add_bn(p, i, &d);
            if (s->pool > 1) {
                if (d.h < s->pool || d.w < s->pool)
                    return sl_why(why, why_len, SL_EINVAL,
                                  "model spec '%s': conv layer %d: %dx%d pool on a %dx%d "
                                  "map",
                                  spec->text, i + 1, s->pool, s->pool, d.h, d.w);
                sl_nn_layer_t *pl = add(p, SL_NN_L_POOL, i, &d);
                pl->kernel = pl->stride = s->pool;
                pl->out.h = d.h / s->pool;
                pl->out.w = d.w / s->pool;
                p->flops += (uint64_t)d.c * d.h * d.w;
                d = pl->out;
            }
        } else {
            add_dense(p, i, &d, s->units);
            if (s->batchnorm)
                add_bn(p, i, &d);
        }
        add_bias_act(p, i, &d, !s->batchnorm, SL_NN_ACT_RELU);
        if (s->dropout > 0.0f)
            add_dropout(p, i, &d, s->dropout);
    }
    add_dense(p, -1, &d, input->classes);
    add_bias_act(p, -1, &d, true, SL_NN_ACT_NONE);
    return SL_OK;
}

sl_err sl_nn_spec_measure(const sl_nn_spec_t *spec, const sl_nn_shape_t *input,
                          uint64_t *params, uint64_t *flops, char *why, size_t why_len) {
    plan_t *p = sl_malloc(sizeof *p);
    if (!p)
        return SL_ENOMEM;
    sl_err err = plan_build(spec, input, p, why, why_len);
    if (err == SL_OK) {
        if (params)
            *params = p->trainable;
        if (flops)
            *flops = p->flops;
    }
    sl_free(p);
    return err;
}

/* ---- building ---- */

static sl_err dev_alloc(sl_nn_model_t *m, size_t len, void **out) {
    return m->be->ops->alloc(m->be->self, len ? len : 16, out);
}

static void dev_free(sl_nn_model_t *m, void *p) {
    if (p)
        m->be->ops->free(m->be->self, p);
}

sl_err sl_nn_model_new(sl_nn_backend_t *be, const sl_nn_spec_t *spec,
                       const sl_nn_shape_t *input, int max_batch, sl_nn_model_t **out,
                       char *why, size_t why_len) {
    *out = NULL;
    if (max_batch < 1 || max_batch > 1 << 20)
        return sl_why(why, why_len, SL_EINVAL, "batch size %d out of range 1..1048576",
                      max_batch);
    plan_t *p = sl_malloc(sizeof *p);
    sl_nn_model_t *m = sl_calloc(1, sizeof *m);
    sl_err err = SL_ENOMEM;
    if (!p || !m)
        goto fail;
    err = plan_build(spec, input, p, why, why_len);
    if (err != SL_OK)
        goto fail;
    m->be = be;
    m->input = *input;
    m->spec = *spec;
    m->max_batch = max_batch;
    m->count = p->count;
    m->param_count = p->param_count;
    m->trainable = p->trainable;
    m->stat_count = p->stat_count;
    m->flops = p->flops;
    err = SL_ENOMEM;
    m->layers = sl_calloc((size_t)p->count, sizeof *m->layers);
    if (!m->layers)
        goto fail;
    memcpy(m->layers, p->layers, (size_t)p->count * sizeof *m->layers);
    const sl_nn_backend_ops_t *ops = be->ops;
    size_t gmax = (size_t)input->classes * max_batch;
    float *prev_out = NULL;
    for (int i = 0; i < m->count; i++) {
        sl_nn_layer_t *l = &m->layers[i];
        size_t in_n = sl_nn_dims_count(&l->in, max_batch);
        size_t out_n = sl_nn_dims_count(&l->out, max_batch);
        if (in_n > gmax)
            gmax = in_n;
        if (out_n > gmax)
            gmax = out_n;
        if (l->in_place) {
            if (!prev_out) {
                err = SL_EINTERNAL;
                goto fail;
            }
            l->y = prev_out;
        } else if ((err = dev_alloc(m, out_n * sizeof(float), (void **)&l->y)) != SL_OK) {
            goto fail;
        }
        if (l->kind == SL_NN_L_CONV) {
            size_t rows = (size_t)l->in.c * l->kernel * l->kernel;
            size_t per = rows * l->out.h * l->out.w * sizeof(float);
            size_t hint = ops->im2col_chunk_len;
            l->chunk = hint ? (int)(hint / per) : max_batch;
            if (l->chunk < 1)
                l->chunk = 1;
            if (l->chunk > max_batch)
                l->chunk = max_batch;
            size_t cols = (size_t)l->out.h * l->out.w * l->chunk;
            err = dev_alloc(m, rows * cols * sizeof(float), (void **)&l->col);
        } else if (l->kind == SL_NN_L_POOL) {
            err = dev_alloc(m, out_n * sizeof(int32_t), (void **)&l->argmax);
        } else if (l->kind == SL_NN_L_BN) {
            err = dev_alloc(m, (size_t)l->in.c * sizeof(float), (void **)&l->save_mean);
            if (err == SL_OK)
                err = dev_alloc(m, (size_t)l->in.c * sizeof(float), (void **)&l->save_invstd);
        }
        if (err != SL_OK)
            goto fail;
        prev_out = l->y;
    }
    m->gbuf_count = gmax;
    if ((err = dev_alloc(m, m->param_count * sizeof(float), (void **)&m->params)) != SL_OK ||
        (err = dev_alloc(m, m->param_count * sizeof(float), (void **)&m->grads)) != SL_OK ||
        (err = dev_alloc(m, gmax * sizeof(float), (void **)&m->gbuf[0])) != SL_OK ||
        (err = dev_alloc(m, gmax * sizeof(float), (void **)&m->gbuf[1])) != SL_OK)
        goto fail;
    if (m->stat_count &&
        (err = dev_alloc(m, m->stat_count * sizeof(float), (void **)&m->stats)) != SL_OK)
        goto fail;
    /* Alignment gaps stay zero in params and grads forever. */
    if ((err = ops->fill(be->self, m->params, 0.0f, m->param_count)) != SL_OK ||
        (err = ops->fill(be->self, m->grads, 0.0f, m->param_count)) != SL_OK)
        goto fail;
    sl_free(p);
    *out = m;
    return SL_OK;
fail:
    if (err == SL_ENOMEM && why && why_len && !why[0])
        sl_why(why, why_len, err, "model '%s': out of %s memory", spec->text,
               be->ops->name);
    sl_free(p);
    sl_nn_model_destroy(&m);
    return err;
}

void sl_nn_model_destroy(sl_nn_model_t **pm) {
    if (!pm || !*pm)
        return;
    sl_nn_model_t *m = *pm;
    if (m->layers)
        for (int i = 0; i < m->count; i++) {
            sl_nn_layer_t *l = &m->layers[i];
            if (!l->in_place)
                dev_free(m, l->y);
            dev_free(m, l->col);
            dev_free(m, l->argmax);
            dev_free(m, l->save_mean);
            dev_free(m, l->save_invstd);
        }
    dev_free(m, m->params);
    dev_free(m, m->grads);
    dev_free(m, m->stats);
    dev_free(m, m->gbuf[0]);
    dev_free(m, m->gbuf[1]);
    sl_free(m->layers);
    sl_free(m);
    *pm = NULL;
}

/* ---- initialisation ---- */

sl_err sl_nn_model_init_params(sl_nn_model_t *m, uint64_t seed) {
    float *host = sl_calloc(m->param_count ? m->param_count : 1, sizeof *host);
    float *stats = sl_calloc(m->stat_count ? m->stat_count : 1, sizeof *stats);
    sl_err err = SL_ENOMEM;
    if (!host || !stats)
        goto fail;
    sl_rng_t rng;
    sl_rng_seed(&rng, seed ^ 0x5354524C494E4954ull); /* "STRLINIT" */
    for (int i = 0; i < m->count; i++) {
        sl_nn_layer_t *l = &m->layers[i];
        if (l->kind == SL_NN_L_DENSE || l->kind == SL_NN_L_CONV) {
            size_t fan_in = l->kind == SL_NN_L_DENSE
                                ? (size_t)l->in.c
                                : (size_t)l->in.c * l->kernel * l->kernel;
            size_t fan_out = l->w_count / fan_in;
            float bound = l->spec_index < 0 ? sl_nn_init_xavier_bound(fan_in, fan_out)
                                            : sl_nn_init_he_bound(fan_in);
            sl_nn_init_uniform(&rng, host + l->w_off, l->w_count, bound);
        } else if (l->kind == SL_NN_L_BN) {
            for (size_t k = 0; k < l->w_count; k++)
                host[l->w_off + k] = 1.0f;
            for (int k = 0; k < l->in.c; k++)
                stats[l->s_off + (size_t)l->in.c + k] = 1.0f;
        }
    }
    const sl_nn_backend_ops_t *ops = m->be->ops;
    err = ops->upload(m->be->self, m->params, host, m->param_count * sizeof *host);
    if (err == SL_OK && m->stat_count)
        err = ops->upload(m->be->self, m->stats, stats, m->stat_count * sizeof *stats);
fail:
    sl_free(host);
    sl_free(stats);
    return err;
}

/* ---- tensors (export, checkpoints) ---- */

sl_err sl_nn_model_tensors(const sl_nn_model_t *m, sl_nn_tensor_fn fn, void *ctx) {
    char name[64];
    for (int i = 0; i < m->count; i++) {
        const sl_nn_layer_t *l = &m->layers[i];
        char base[24];
        if (l->spec_index < 0)
            snprintf(base, sizeof base, "out");
        else
            snprintf(base, sizeof base, "l%d", l->spec_index + 1);
        sl_err err = SL_OK;
        if (l->kind == SL_NN_L_DENSE) {
            int shape[2] = {l->in.c, l->out.c};
            snprintf(name, sizeof name, "%s.dense.weight", base);
            err = fn(ctx, name, false, l->w_off, shape, 2);
        } else if (l->kind == SL_NN_L_CONV) {
            int shape[4] = {l->out.c, l->in.c, l->kernel, l->kernel};
            snprintf(name, sizeof name, "%s.conv.weight", base);
            err = fn(ctx, name, false, l->w_off, shape, 4);
        } else if (l->kind == SL_NN_L_BIAS_ACT && l->b_count) {
            int shape[1] = {l->in.c};
            snprintf(name, sizeof name, "%s.%s.bias", base,
                     l->in.cnhw || l->in.h * l->in.w > 1 ? "conv" : "dense");
            err = fn(ctx, name, false, l->b_off, shape, 1);
        } else if (l->kind == SL_NN_L_BN) {
            int shape[1] = {l->in.c};
            snprintf(name, sizeof name, "%s.bn.weight", base);
            err = fn(ctx, name, false, l->w_off, shape, 1);
            snprintf(name, sizeof name, "%s.bn.bias", base);
            if (err == SL_OK)
                err = fn(ctx, name, false, l->b_off, shape, 1);
            snprintf(name, sizeof name, "%s.bn.running_mean", base);
            if (err == SL_OK)
                err = fn(ctx, name, true, l->s_off, shape, 1);
            snprintf(name, sizeof name, "%s.bn.running_var", base);
            if (err == SL_OK)
                err = fn(ctx, name, true, l->s_off + (size_t)l->in.c, shape, 1);
        }
        if (err != SL_OK)
            return err;
    }
    return SL_OK;
}
