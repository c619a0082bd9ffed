/* Starling nn: what the engine's files share (not a public API; tests
 * include it to reach the layers directly). */
#ifndef STARLING_NN_INTERNAL_H
#define STARLING_NN_INTERNAL_H

#include <stdarg.h>

#include "base/why.h"
#include "starling/nn.h"
#include "starling/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An opened backend. */
struct sl_nn_backend {
    const sl_nn_backend_ops_t *ops; /* the table */
    void *self;                     /* its instance */
    void *dl;                       /* dlopen handle of the cuda library, or NULL */
    char desc[192];                 /* device description */
};

/* sl_why (base/why.h) writes a refusal's reason into why; returns err. */

/* ---- layers ---- */

typedef enum {
    SL_NN_L_DENSE = 0,    /* y = x W (W is [in][out]); no bias, see BIAS_ACT */
    SL_NN_L_CONV = 1,     /* im2col + sgemm; output CNHW; no bias */
    SL_NN_L_POOL = 2,     /* max-pool, layout preserved */
    SL_NN_L_BN = 3,       /* batch normalisation */
    SL_NN_L_BIAS_ACT = 4, /* in place: bias per channel and activation */
    SL_NN_L_DROPOUT = 5,  /* in place: inverted dropout */
    SL_NN_L_FLATTEN = 6   /* CNHW -> NCHW copy (the dense view) */
} sl_nn_layer_kind;

/* Per-sample shape of a tensor and the layout of its batch. */
typedef struct {
    int c, h, w; /* channels (or features), height, width */
    bool cnhw;   /* batch layout CNHW (conv stack) instead of NCHW */
} sl_nn_dims_t;

/* One layer of a built model. */
typedef struct {
    sl_nn_layer_kind kind;  /* what it computes */
    int spec_index;         /* the spec layer it belongs to (-1 = output) */
    sl_nn_dims_t in, out;   /* input and output shape */
    bool in_place;          /* output buffer is the input buffer */
    sl_nn_act act;          /* BIAS_ACT activation */
    size_t w_off, w_count;  /* weights / BN gamma in the flat params */
    size_t b_off, b_count;  /* bias / BN beta in the flat params (count 0 = none) */
    size_t s_off;           /* BN running mean (s_off) and variance (+c) in stats */
    int kernel, stride, pad; /* conv and pool window */
    float p;                /* dropout probability */
    float *y;               /* output activations (device), max_batch rows */
    float *col;             /* CONV: im2col buffer of `chunk` samples (reused for dcol) */
    int chunk;              /* CONV: samples per im2col/sgemm chunk */
    int32_t *argmax;        /* POOL: winners */
    float *save_mean;       /* BN: batch mean */
    float *save_invstd;     /* BN: batch inverse std */
} sl_nn_layer_t;

/* A built model: layers, flat parameter / gradient / statistics vectors
 * and the activation buffers, all on the backend's device. */
typedef struct {
    sl_nn_backend_t *be;        /* borrowed backend */
    sl_nn_shape_t input;        /* input geometry and classes */
    sl_nn_spec_t spec;          /* the spec it was built from */
    int max_batch;              /* rows every buffer holds */
    int count;                  /* layers in use */
    sl_nn_layer_t *layers;      /* count layers */
    size_t param_count;         /* flat vector length (with 16-float alignment gaps) */
    size_t trainable;           /* real trainable parameters */
    size_t stat_count;          /* BN running statistics */
    uint64_t flops;             /* forward FLOPs per sample */
    float *params;              /* flat parameters (device) */
    float *grads;               /* flat gradients (device) */
    float *stats;               /* running statistics (device), or NULL */
    float *gbuf[2];             /* backward ping-pong buffers (device) */
    size_t gbuf_count;          /* floats in each gbuf */
    bool want_input_grad;       /* tests: backward also computes d input */
    float *input_grad;          /* where it was left (a gbuf) after backward */
} sl_nn_model_t;

/* Builds a model for `spec` on `input`, buffers sized for max_batch rows;
 * parameters uninitialised (see sl_nn_model_init_params). */
sl_err sl_nn_model_new(sl_nn_backend_t *be, const sl_nn_spec_t *spec,
                       const sl_nn_shape_t *input, int max_batch, sl_nn_model_t **out,
                       char *why, size_t why_len);
void sl_nn_model_destroy(sl_nn_model_t **m);
/* He-uniform weights for ReLU layers, Xavier-uniform for the output layer,
 * zero biases, BN gamma 1 beta 0, running mean 0 var 1; from `seed`. */
sl_err sl_nn_model_init_params(sl_nn_model_t *m, uint64_t seed);
/* Forward pass of `rows` samples x (NCHW, device); returns the logits
 * buffer ([rows][classes], device). Dropout masks derive from seed. */
sl_err sl_nn_model_forward(sl_nn_model_t *m, const float *x, int rows, bool training,
                           uint64_t seed, float **logits);
/* Backward pass after a training forward of the same x, rows and seed:
 * dlogits ([rows][classes], device, may be consumed) -> m->grads. */
sl_err sl_nn_model_backward(sl_nn_model_t *m, const float *x, float *dlogits, int rows,
                            uint64_t seed);
/* Flat offset and element count of every trainable tensor, for export:
 * calls fn(ctx, name, offset, shape, ndim) in order. */
typedef sl_err (*sl_nn_tensor_fn)(void *ctx, const char *name, bool is_stat, size_t offset,
                                  const int *shape, int ndim);
sl_err sl_nn_model_tensors(const sl_nn_model_t *m, sl_nn_tensor_fn fn, void *ctx);

/* Elements in a batch of `rows` of a per-sample shape. */
static inline size_t sl_nn_dims_count(const sl_nn_dims_t *d, int rows) {
    return (size_t)d->c * d->h * d->w * (size_t)rows;
}

/* ---- initialisation (init.c) ---- */

/* Fills w[count] uniformly in [-bound, bound) from rng. */
void sl_nn_init_uniform(sl_rng_t *rng, float *w, size_t count, float bound);
/* He-uniform bound sqrt(6 / fan_in) and Xavier-uniform sqrt(6 / (in + out)). */
float sl_nn_init_he_bound(size_t fan_in);
float sl_nn_init_xavier_bound(size_t fan_in, size_t fan_out);

/* ---- optimizer (optim.c) ---- */

/* Learning rate at (0-based) epoch `epoch`, step `step` of `steps` in it. */
double sl_nn_optim_lr(const sl_nn_train_cfg_t *cfg, int epoch, size_t step, size_t steps);
/* The step parameters for global step t (1-based, Adam bias correction). */
void sl_nn_optim_step_params(const sl_nn_train_cfg_t *cfg, double lr, uint64_t t,
                             sl_nn_opt_step_t *out);
/* Whether the optimizer keeps a second state vector (Adam). */
bool sl_nn_optim_has_s2(sl_nn_opt_kind kind);

/* ---- trainer (train.c), for checkpoint.c and export.c ---- */

struct sl_nn_trainer {
    sl_nn_backend_t *be;          /* borrowed backend */
    sl_nn_train_cfg_t cfg;        /* configuration (strings copied below) */
    char model_text[SL_NN_SPEC_MAX_LEN + 1]; /* cfg.model storage */
    char ckpt_dir[512];           /* cfg.checkpoint_dir storage */
    sl_nn_model_t *model;         /* the network */
    float *s1, *s2;               /* optimizer state (device); s2 NULL unless Adam */
    const sl_nn_data_t *train;    /* borrowed training set (host) */
    const sl_nn_data_t *test;     /* borrowed test set (host) or NULL */
    const void *train_images;     /* training images on the device */
    const int32_t *train_labels;  /* training labels on the device */
    const void *test_images;      /* test images on the device (or NULL) */
    const int32_t *test_labels;   /* test labels on the device (or NULL) */
    void *owned[4];               /* device copies this trainer allocated */
    int32_t *train_base;          /* training row ids after the split (host) */
    int32_t *train_idx_host;      /* this epoch's order: train_base shuffled (host) */
    size_t train_count;           /* training rows (after split and limit) */
    int32_t *perm;                /* device copy of this epoch's order */
    int32_t *val_idx;             /* device validation row ids, or NULL */
    size_t val_count;             /* validation rows */
    float *xbatch;                /* device minibatch input */
    int32_t *ybatch;              /* device minibatch labels */
    double *acc;                  /* device accumulators: train[2], eval[2] */
    sl_rng_t rng;                 /* shuffle RNG (checkpointed) */
    int epoch;                    /* epochs completed */
    uint64_t step;                /* optimizer steps taken */
    sl_nn_progress_fn progress;   /* progress callback */
    void *progress_ctx;           /* its context */
    struct sl_nn_dp *dp;          /* data-parallel step buffers (dp.c), made on first use */
};

/* Frees what dp.c made for the trainer (sl_nn_trainer_destroy calls it). */
void sl_nn_dp_free(sl_nn_trainer_t *t);

/* Pure checkpoint codec (checkpoint.c): encode downloads the state into a
 * new buffer; decode validates everything before applying anything. */
sl_err sl_nn_checkpoint_encode(sl_nn_trainer_t *t, uint8_t **out, size_t *out_len);
sl_err sl_nn_checkpoint_decode(sl_nn_trainer_t *t, const uint8_t *buf, size_t len,
                               const char *name, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
