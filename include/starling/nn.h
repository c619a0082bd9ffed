/* Starling nn: the local training engine.
 *
 * A model is described by a small text spec (`mlp:256,128`,
 * `cnn:32,64/fc:128`; grammar in docs/training.md), built on a compute
 * backend (`cpu` with OpenBLAS, or `cuda` loaded at run time; see
 * nn_backend.h), and trained by a trainer that owns the model, the
 * optimizer state, the data on the device and the shuffle RNG:
 *
 *     sl_nn_backend_t *be; sl_nn_data_t *train, *test; sl_nn_trainer_t *t;
 *     sl_nn_backend_open("auto", 0, &be, why, sizeof why);
 *     sl_nn_data_load("fashion-mnist", &train, &test, why, sizeof why);
 *     sl_nn_train_cfg_t cfg; sl_nn_train_cfg_init(&cfg);
 *     cfg.model = "mlp:256,128";
 *     sl_nn_trainer_new(be, &cfg, train, test, &t, why, sizeof why);
 *     sl_nn_trainer_run(t, on_epoch, ctx, why, sizeof why);
 *
 * Functions that can fail for a user-facing reason (a bad file, a bad
 * spec) take `why`/`why_len`: on error they write a one-line message
 * naming the file or input and what is wrong (may be NULL).
 *
 * Threads: a trainer and its backend belong to one thread at a time.
 * Several trainers may run in parallel threads, each with its own backend;
 * on the cpu backend they share OpenBLAS's thread pool (its setting is
 * process-wide: `threads` of the last backend opened wins). */
#ifndef STARLING_NN_H
#define STARLING_NN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"
#include "starling/nn_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- backend ---- */

/* An opened compute backend: its ops table and instance. */
typedef struct sl_nn_backend sl_nn_backend_t;

/* Opens "cpu", "cuda" or "auto" (cuda when libstarling_cuda.so loads and
 * a device answers, else cpu). `threads` > 0 sets the BLAS thread count,
 * 0 leaves the environment's setting. "cuda" fails with SL_ENODEV or
 * SL_EUNSUPPORTED and a reason when it cannot be used. */
sl_err sl_nn_backend_open(const char *device, int threads, sl_nn_backend_t **out, char *why,
                          size_t why_len);
void sl_nn_backend_destroy(sl_nn_backend_t **be);
/* "cpu" or "cuda". */
const char *sl_nn_backend_name(const sl_nn_backend_t *be);
/* One line naming the device and library ("cpu: OpenBLAS 0.3.21 ..."). */
const char *sl_nn_backend_desc(const sl_nn_backend_t *be);
/* The ops table and instance, for code that drives the backend directly
 * (tests, the elastic all-reduce). */
const sl_nn_backend_ops_t *sl_nn_backend_ops(const sl_nn_backend_t *be);
void *sl_nn_backend_self(const sl_nn_backend_t *be);

/* ---- model spec ---- */

/* Limits of the spec grammar. */
#define SL_NN_SPEC_MAX_LEN 256    /* characters in a spec */
#define SL_NN_SPEC_MAX_LAYERS 32  /* conv + dense layers */

/* What a spec layer is. */
typedef enum {
    SL_NN_SPEC_CONV = 0, /* conv2d [+bn] [+pool] + relu [+dropout] */
    SL_NN_SPEC_DENSE = 1 /* dense [+bn] + relu [+dropout] */
} sl_nn_spec_kind;

/* One hidden layer of a parsed spec (the output layer is implicit). */
typedef struct {
    sl_nn_spec_kind kind; /* conv or dense */
    int units;            /* output channels (conv) or features (dense) */
    int kernel;           /* conv kernel size (square) */
    int stride;           /* conv stride */
    int pad;              /* conv zero padding per side */
    int pool;             /* max-pool window and stride after conv (1 = none) */
    bool batchnorm;       /* batch normalisation before the activation */
    float dropout;        /* drop probability after the activation (0 = none) */
} sl_nn_spec_layer_t;

/* A parsed model spec. */
typedef struct {
    int count;                                      /* hidden layers used */
    sl_nn_spec_layer_t layers[SL_NN_SPEC_MAX_LAYERS]; /* in order */
    char text[SL_NN_SPEC_MAX_LEN + 1];              /* the canonical text */
} sl_nn_spec_t;

/* Parses a spec. SL_EINVAL with a message naming the offending part. */
sl_err sl_nn_spec_parse(const char *text, sl_nn_spec_t *out, char *why, size_t why_len);

/* Input geometry of a data set / model. */
typedef struct {
    int channels; /* C (1 for MNIST) */
    int height;   /* H (28) */
    int width;    /* W (28) */
    int classes;  /* number of labels (10) */
} sl_nn_shape_t;

/* Trainable parameter count and forward FLOPs per sample (2 per
 * multiply-add of dense and conv layers, plus one per element of the
 * cheap layers) of the spec on that input. SL_EINVAL with a message when
 * the spec does not fit the input (a conv window larger than its input). */
sl_err sl_nn_spec_measure(const sl_nn_spec_t *spec, const sl_nn_shape_t *input,
                          uint64_t *params, uint64_t *flops, char *why, size_t why_len);

/* ---- data ---- */

/* A data set in host memory: images as bytes (IDX) or floats (CSV), and
 * int32 labels. Loaded once; the trainer uploads it to the device once. */
typedef struct {
    sl_nn_shape_t shape;   /* geometry and class count */
    size_t count;          /* number of samples */
    uint8_t *images_u8;    /* count x C*H*W bytes, or NULL */
    float *images_f32;     /* count x C*H*W floats (CSV), or NULL */
    float scale;           /* input = stored * scale + shift */
    float shift;           /* (bytes: 1/255 and 0) */
    int32_t *labels;       /* count labels in [0, classes) */
    char name[128];        /* where it came from, for messages */
} sl_nn_data_t;

/* Loads a training and a test set: "fashion-mnist" and "mnist" (from
 * /usr/share/datasets/NAME or $SL_DATASETS/NAME), a directory holding the
 * four IDX files (gzip-compressed or not), or a CSV file (label first,
 * then the pixel values; a header line is skipped; `test_out` then gets
 * NULL unless a FILE_test.csv sits beside it). */
sl_err sl_nn_data_load(const char *what, sl_nn_data_t **train_out, sl_nn_data_t **test_out,
                       char *why, size_t why_len);
/* Loads one IDX image file and its label file (gzip read directly). */
sl_err sl_nn_data_load_idx(const char *images_path, const char *labels_path,
                           sl_nn_data_t **out, char *why, size_t why_len);
/* Loads a CSV file: label,v1,v2,... per line; values are scaled by 1/255
 * when all are integers in [0, 255], else used as they are. Images are
 * square (C=1) when the value count is a square, else 1 x 1 x N. */
sl_err sl_nn_data_load_csv(const char *path, sl_nn_data_t **out, char *why, size_t why_len);
/* Parses IDX bytes already in memory (`name` is used in messages). */
sl_err sl_nn_data_parse_idx(const uint8_t *images, size_t images_len, const uint8_t *labels,
                            size_t labels_len, const char *name, sl_nn_data_t **out,
                            char *why, size_t why_len);
/* Keeps only the first `count` samples (a quick run). */
void sl_nn_data_truncate(sl_nn_data_t *data, size_t count);
/* Standardises the inputs: sets the scale and shift of `train` and of
 * `test` (may be NULL) so that train's values, over all its samples and
 * pixels, have mean 0 and standard deviation 1 (statistics of the training
 * set only, in double precision; the stored bytes are not touched). The
 * mean and standard deviation found (of the values before, i.e. bytes /
 * 255) go to *mean and *std when not NULL. SL_EINVAL for an empty or
 * constant training set. */
sl_err sl_nn_data_standardize(sl_nn_data_t *train, sl_nn_data_t *test, double *mean,
                              double *std);
void sl_nn_data_destroy(sl_nn_data_t **data);

/* ---- training ---- */

/* Learning-rate schedules (after the linear warm-up, if any). */
typedef enum {
    SL_NN_SCHED_NONE = 0,  /* constant */
    SL_NN_SCHED_STEP = 1,  /* times step_gamma every step_epochs epochs */
    SL_NN_SCHED_COSINE = 2 /* cosine from lr to 0 over the epochs */
} sl_nn_schedule;

/* Everything a training run is a function of. */
typedef struct {
    const char *model;         /* spec text */
    int epochs;                /* epochs to run in total */
    int batch;                 /* minibatch size */
    sl_nn_opt_kind optimizer;  /* sgd, nesterov, adam, adamw */
    float lr;                  /* base learning rate */
    float momentum;            /* sgd/nesterov momentum */
    float weight_decay;        /* L2 or decoupled decay */
    float beta1, beta2, eps;   /* Adam constants */
    sl_nn_schedule schedule;   /* learning-rate schedule */
    int step_epochs;           /* step schedule period in epochs */
    float step_gamma;          /* step schedule factor */
    int warmup_epochs;         /* linear warm-up from ~0 over these epochs */
    uint64_t seed;             /* initialisation, split, shuffles, dropout */
    float val_split;           /* fraction of training samples held out */
    size_t limit;              /* use only the first N training samples (0 = all) */
    const char *checkpoint_dir; /* write DIR/checkpoint.slck each epoch (NULL = none) */
    bool resume;               /* start from DIR/checkpoint.slck when present */
} sl_nn_train_cfg_t;

/* Parses "sgd", "nesterov", "adam", "adamw" (SL_EINVAL otherwise). */
sl_err sl_nn_optim_parse(const char *name, sl_nn_opt_kind *out);
const char *sl_nn_optim_name(sl_nn_opt_kind kind);
/* Parses "none", "step", "cosine" (SL_EINVAL otherwise). */
sl_err sl_nn_schedule_parse(const char *name, sl_nn_schedule *out);

/* Defaults: 10 epochs, batch 128, sgd, lr 0.05, momentum 0.9, Adam
 * 0.9/0.999/1e-8, no schedule (step: every 10 epochs x 0.1), seed 1. */
void sl_nn_train_cfg_init(sl_nn_train_cfg_t *cfg);

/* Metrics of one epoch. Accuracies are fractions in [0, 1]. */
typedef struct {
    int epoch;            /* 1-based epoch just finished */
    int epochs;           /* total epochs of the run */
    double train_loss;    /* mean loss over the epoch's training samples */
    double train_acc;     /* training accuracy seen during the epoch */
    bool has_val;         /* a validation split exists */
    double val_loss;      /* mean validation loss (has_val) */
    double val_acc;       /* validation accuracy (has_val) */
    bool has_test;        /* a test set exists */
    double test_loss;     /* mean test loss (has_test) */
    double test_acc;      /* test accuracy (has_test) */
    double lr;            /* learning rate at the epoch's last step */
    double seconds;       /* training time of the epoch (no evaluation) */
    double eval_seconds;  /* time spent evaluating after it */
    double samples_per_s; /* training samples per second */
    uint64_t samples;     /* training samples in the epoch */
} sl_nn_epoch_t;

/* Called after every epoch; return false to stop training early. */
typedef bool (*sl_nn_epoch_fn)(void *ctx, const sl_nn_epoch_t *metrics);
/* Called during an epoch every few batches (progress bars). */
typedef void (*sl_nn_progress_fn)(void *ctx, int epoch, size_t done, size_t total);

/* A training run: model, optimizer state, device data, RNG. */
typedef struct sl_nn_trainer sl_nn_trainer_t;

/* Builds the model, splits and uploads the data, initialises the weights
 * from the seed, and (cfg->resume) loads the checkpoint. `test` may be
 * NULL. The data sets are borrowed and must outlive the trainer. */
sl_err sl_nn_trainer_new(sl_nn_backend_t *be, const sl_nn_train_cfg_t *cfg,
                         const sl_nn_data_t *train, const sl_nn_data_t *test,
                         sl_nn_trainer_t **out, char *why, size_t why_len);
void sl_nn_trainer_destroy(sl_nn_trainer_t **t);
/* Sets the progress callback (NULL = none). */
void sl_nn_trainer_set_progress(sl_nn_trainer_t *t, sl_nn_progress_fn fn, void *ctx);
/* Runs one epoch (train, then evaluate), writes the checkpoint when
 * configured. SL_ESTATE when all epochs are done. */
sl_err sl_nn_trainer_epoch(sl_nn_trainer_t *t, sl_nn_epoch_t *metrics, char *why,
                           size_t why_len);
/* Runs the remaining epochs, calling on_epoch after each. */
sl_err sl_nn_trainer_run(sl_nn_trainer_t *t, sl_nn_epoch_fn on_epoch, void *ctx, char *why,
                         size_t why_len);
/* Epochs completed so far (after a resume: those of the checkpoint). */
int sl_nn_trainer_epochs_done(const sl_nn_trainer_t *t);
/* Loss and accuracy of the current weights on a data set (eval mode). */
sl_err sl_nn_trainer_evaluate(sl_nn_trainer_t *t, const sl_nn_data_t *data, double *loss,
                              double *acc);
/* Parameter count and forward FLOPs per sample of the trainer's model. */
uint64_t sl_nn_trainer_params(const sl_nn_trainer_t *t);
uint64_t sl_nn_trainer_flops(const sl_nn_trainer_t *t);
/* Copies the flat parameter vector to the host (count floats). */
sl_err sl_nn_trainer_get_params(sl_nn_trainer_t *t, float *host, size_t count);

/* ---- checkpoints and export ---- */

/* Writes a checkpoint (weights, optimizer state, running statistics,
 * epoch, RNG state; versioned header and CRC) atomically to `path`. */
sl_err sl_nn_checkpoint_save(sl_nn_trainer_t *t, const char *path, char *why, size_t why_len);
/* Loads a checkpoint into a trainer built with the same model, optimizer
 * and data geometry. Strict: a wrong magic, version, size, CRC or a model
 * mismatch is an error (SL_ECORRUPT, SL_EVERSION, SL_ETRUNC, SL_EINVAL)
 * and leaves the trainer unchanged. */
sl_err sl_nn_checkpoint_load(sl_nn_trainer_t *t, const char *path, char *why, size_t why_len);

/* Writes the trained weights as a NumPy .npz archive (an uncompressed zip
 * of .npy arrays; `numpy.load(path)` reads it). Layout in
 * docs/training.md. */
sl_err sl_nn_export_npz(sl_nn_trainer_t *t, const char *path, char *why, size_t why_len);

/* ---- data-parallel steps (src/nn/dp.c) ----
 *
 * What a data-parallel trainer (the elastic jobs' trainer,
 * src/elastic/trainer.c) drives instead of sl_nn_trainer_epoch. Each
 * worker builds the same trainer (same cfg: same split, same initial
 * weights); one step is
 *
 *     sl_nn_dp_grads(t, rows, count, seed, g, &loss, &correct);  // summed
 *     ... all-reduce g over the workers, divide by the step's samples ...
 *     sl_nn_dp_apply(t, g, step, steps_per_epoch, &lr);
 *
 * Between the two the parameters are untouched (a step whose all-reduce
 * fails is dropped by not applying it; the forward passes did move the
 * batch-norm running statistics: save and restore them with
 * sl_nn_dp_stats_get/_set). The trainer's step counter, which checkpoints
 * carry, is the data-parallel step; sl_nn_dp_apply advances it and the
 * epoch (step / steps_per_epoch). The cfg's batch is the most rows one
 * forward takes: more rows are cut into chunks and their gradients added. */

/* Training rows after the limit and the split (the schedule's sample
 * count; sl_nn_dp_grads' rows index them). */
size_t sl_nn_dp_train_count(const sl_nn_trainer_t *t);
/* Floats in a gradient vector: the flat parameter vector (with its zero
 * alignment gaps). */
size_t sl_nn_dp_param_count(const sl_nn_trainer_t *t);
/* Floats of running statistics (batch norm; 0 without). */
size_t sl_nn_dp_stat_count(const sl_nn_trainer_t *t);
/* Floats in the state vector: parameters, optimizer state (momentum, or
 * Adam's m and v), running statistics, in that order. */
size_t sl_nn_dp_state_count(const sl_nn_trainer_t *t);

/* Forward and backward (training mode) over `count` training rows
 * (`rows[i]` < sl_nn_dp_train_count): writes the gradient of the SUMMED
 * loss to `grads` (host, sl_nn_dp_param_count floats; NULL: left on the
 * device for sl_nn_dp_reduce_device), the summed loss and
 * the number of rows classified right. Zero rows give zero gradients.
 * Dropout masks derive from `seed` (one per chunk of cfg.batch rows).
 * SL_EINVAL for a row out of range; a backend error. */
sl_err sl_nn_dp_grads(sl_nn_trainer_t *t, const uint32_t *rows, size_t count, uint64_t seed,
                      float *grads, double *loss_sum, double *correct);
/* One optimizer step with the mean gradient `mean` (host; NULL: the
 * device mean of the last sl_nn_dp_reduce_device) as step `step`
 * (0-based, all workers together): the learning rate of the schedule at
 * (step / steps_per_epoch, step % steps_per_epoch), Adam's t = step + 1.
 * The step counter becomes step + 1; the rate used goes to *lr (may be
 * NULL). */
sl_err sl_nn_dp_apply(sl_nn_trainer_t *t, const float *mean, uint64_t step,
                      uint64_t steps_per_epoch, double *lr);
/* The running statistics to and from the host (sl_nn_dp_stat_count floats). */
sl_err sl_nn_dp_stats_get(sl_nn_trainer_t *t, float *host);
sl_err sl_nn_dp_stats_set(sl_nn_trainer_t *t, const float *host);
/* The whole state to and from the host (sl_nn_dp_state_count floats); the
 * step counter is not in it (sl_nn_dp_set_step). */
sl_err sl_nn_dp_state_get(sl_nn_trainer_t *t, float *host);
sl_err sl_nn_dp_state_set(sl_nn_trainer_t *t, const float *host);
/* Initialises the state from cfg.seed as sl_nn_trainer_new does (the
 * same weights), optimizer state zero, step 0. */
sl_err sl_nn_dp_reset(sl_nn_trainer_t *t);
/* The step counter, and setting it (the epoch follows). */
uint64_t sl_nn_dp_step(const sl_nn_trainer_t *t);
void sl_nn_dp_set_step(sl_nn_trainer_t *t, uint64_t step, uint64_t steps_per_epoch);
/* ---- the same step with the all-reduce on the device (NCCL) ----
 *
 *     sl_nn_dp_grads(t, rows, count, seed, NULL, &loss, &correct); // stays on the device
 *     sl_nn_dp_reduce_device(t, tail, tail_count, samples, fn, ctx);
 *     sl_nn_dp_apply(t, NULL, step, steps_per_epoch, &lr);         // the device mean
 *
 * On a backend with a stream (cuda; sl_nn_dp_device_collectives): the
 * summed gradients never leave the device. */

/* Whether the backend can run a collective on its device buffers
 * (backend ops `stream` and `query`). */
bool sl_nn_dp_device_collectives(const sl_nn_trainer_t *t);
/* Sums `count` floats at device pointer `dev` over the workers, in place,
 * queued on `stream` after every op before it, and returns once the sum
 * is there (waiting with sl_nn_dp_device_query and its own deadline). */
typedef sl_err (*sl_nn_dp_reduce_fn)(void *ctx, float *dev, size_t count, void *stream);
/* After sl_nn_dp_grads(..., NULL, ...): appends `tail` (tail_count host
 * floats, at most sl_nn_dp_stat_count + 2: what the workers sum beside the
 * gradients) to the device's summed gradients, calls `fn` on the whole
 * vector, divides it by `divisor` and gives the tail back in `tail`; the
 * mean gradient stays on the device for sl_nn_dp_apply(t, NULL, ...).
 * SL_EUNSUPPORTED without device collectives, SL_ESTATE without gradients
 * on the device; fn's error, a backend error. */
sl_err sl_nn_dp_reduce_device(sl_nn_trainer_t *t, float *tail, size_t tail_count, float divisor,
                              sl_nn_dp_reduce_fn fn, void *ctx);
/* Whether every op queued on the backend has finished, without waiting:
 * SL_OK, SL_EAGAIN, or the backend's error. */
sl_err sl_nn_dp_device_query(sl_nn_trainer_t *t);
/* Rows of the validation split (test false) or the test set (true). */
size_t sl_nn_dp_eval_count(const sl_nn_trainer_t *t, bool test);
/* Summed loss and right answers (eval mode) over rows [first,
 * first+count) of the validation split or the test set, so that workers
 * can each evaluate a slice and add. SL_EINVAL past the end. */
sl_err sl_nn_dp_eval(sl_nn_trainer_t *t, bool test, size_t first, size_t count,
                     double *loss_sum, double *correct);

#ifdef __cplusplus
}
#endif
#endif
