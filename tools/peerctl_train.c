/* `peerctl train`: a local training run, the way a user debugs a model on
 * a laptop before sending a search to the fleet. Text output (a progress
 * bar per epoch on a terminal, one summary line per epoch) or, with
 * --json, one JSON object per epoch on stdout. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "peerctl.h"
#include "starling/nn.h"

static const char usage[] =
    "usage: peerctl train [OPTIONS]\n"
    "\n"
    "Trains a model locally and reports metrics per epoch.\n"
    "\n"
    "  --dataset D        fashion-mnist (default), mnist, a directory of IDX files\n"
    "                     (gzip or not), or a CSV file (label,v1,v2,...)\n"
    "  --model SPEC       mlp:256,128 (default), cnn:32,64/fc:128, ... (docs/training.md)\n"
    "  --epochs N         epochs (default 10)\n"
    "  --batch B          minibatch size (default 128)\n"
    "  --optimizer O      sgd (default), nesterov, adam, adamw\n"
    "  --lr X             learning rate (default 0.05)\n"
    "  --momentum M       sgd/nesterov momentum (default 0.9)\n"
    "  --weight-decay W   L2 (sgd, nesterov, adam) or decoupled (adamw) decay (default 0)\n"
    "  --schedule S       none (default), step, cosine\n"
    "  --step-epochs N    step schedule period (default 10)\n"
    "  --step-gamma G     step schedule factor (default 0.1)\n"
    "  --warmup E         linear warm-up over E epochs (default 0)\n"
    "  --device D         auto (default: cuda when usable, else cpu), cpu, cuda\n"
    "  --threads T        BLAS threads (default: the environment's setting)\n"
    "  --seed S           seed of initialisation, split, shuffles, dropout (default 1)\n"
    "  --val-split F      hold out this fraction of the training set (default 0)\n"
    "  --limit N          use only the first N training samples\n"
    "  --normalize        standardise the inputs with the training set's pixel mean\n"
    "                     and standard deviation (default: pixels / 255)\n"
    "  --checkpoint DIR   write DIR/checkpoint.slck after every epoch\n"
    "  --resume           continue from DIR/checkpoint.slck when it exists\n"
    "  --export FILE      write the trained weights as a NumPy .npz file\n"
    "  --json             one JSON object per epoch on stdout\n"
    "  --quiet            no progress bar\n"
    "  --help             this text\n"
    "\n"
    "JSON fields: epoch, epochs, train_loss, train_acc, val_loss, val_acc (null without\n"
    "--val-split), test_loss, test_acc, lr, seconds (training time of the epoch),\n"
    "eval_seconds, samples_per_s, device.\n";

/* What the command line asked for. */
typedef struct {
    sl_nn_train_cfg_t cfg; /* training configuration */
    const char *dataset;   /* data set name or path */
    const char *device;    /* auto, cpu, cuda */
    const char *export_path; /* --export FILE or NULL */
    int threads;           /* BLAS threads, 0 = environment */
    bool json;             /* JSON lines */
    bool quiet;            /* no progress bar */
    bool normalize;        /* standardise the inputs (training-set statistics) */
} opts_t;

/* Per-run output state. */
typedef struct {
    const opts_t *o;       /* options */
    const char *device;    /* backend name */
    bool bar;              /* draw a progress bar on stderr */
} run_t;

static int bad(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "peerctl train: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\nsee peerctl train --help\n");
    return 2;
}

static bool parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v))
        return false;
    *out = (float)v;
    return true;
}

static int parse_args(int argc, char **argv, opts_t *o) {
    memset(o, 0, sizeof *o);
    sl_nn_train_cfg_init(&o->cfg);
    o->dataset = "fashion-mnist";
    o->device = "auto";
    for (int i = 1; i < argc; i++) {
        char *arg = argv[i], *val = NULL;
        char name[64];
        if (strncmp(arg, "--", 2) != 0)
            return bad("unexpected argument '%s'%s", arg, "");
        snprintf(name, sizeof name, "%s", arg);
        char *eq = strchr(name, '=');
        if (eq) {
            *eq = '\0';
            val = arg + (eq - name) + 1;
        }
        bool flag = !strcmp(name, "--json") || !strcmp(name, "--resume") ||
                    !strcmp(name, "--quiet") || !strcmp(name, "--normalize") || !strcmp(name, "--help") || !strcmp(name, "-h");
        if (flag) {
            if (val)
                return bad("%s takes no value%s", name, "");
            if (!strcmp(name, "--json"))
                o->json = true;
            else if (!strcmp(name, "--resume"))
                o->cfg.resume = true;
            else if (!strcmp(name, "--quiet"))
                o->quiet = true;
            else if (!strcmp(name, "--normalize"))
                o->normalize = true;
            else {
                fputs(usage, stdout);
                return -1;
            }
            continue;
        }
        static const char *const known[] = {
            "--dataset", "--model", "--epochs", "--batch", "--optimizer", "--schedule",
            "--lr", "--momentum", "--weight-decay", "--step-epochs", "--step-gamma",
            "--warmup", "--device", "--threads", "--seed", "--val-split", "--limit",
            "--checkpoint", "--export"};
        bool is_known = false;
        for (size_t k = 0; k < sizeof known / sizeof *known; k++)
            is_known = is_known || !strcmp(name, known[k]);
        if (!is_known)
            return bad("unknown option '%s'%s", name, "");
        if (!val) {
            if (i + 1 >= argc)
                return bad("%s needs a value%s", name, "");
            val = argv[++i];
        }
        long l;
        float f;
        if (!strcmp(name, "--dataset"))
            o->dataset = val;
        else if (!strcmp(name, "--model"))
            o->cfg.model = val;
        else if (!strcmp(name, "--epochs")) {
            if (!parse_long(val, 1, 1000000, &l))
                return bad("--epochs '%s': want an integer in 1..1000000%s", val, "");
            o->cfg.epochs = (int)l;
        } else if (!strcmp(name, "--batch")) {
            if (!parse_long(val, 1, 65536, &l))
                return bad("--batch '%s': want an integer in 1..65536%s", val, "");
            o->cfg.batch = (int)l;
        } else if (!strcmp(name, "--optimizer")) {
            if (sl_nn_optim_parse(val, &o->cfg.optimizer) != SL_OK)
                return bad("--optimizer '%s': use sgd, nesterov, adam or adamw%s", val, "");
        } else if (!strcmp(name, "--schedule")) {
            if (sl_nn_schedule_parse(val, &o->cfg.schedule) != SL_OK)
                return bad("--schedule '%s': use none, step or cosine%s", val, "");
        } else if (!strcmp(name, "--lr")) {
            if (!parse_float(val, &f) || !(f > 0))
                return bad("--lr '%s': want a positive number%s", val, "");
            o->cfg.lr = f;
        } else if (!strcmp(name, "--momentum")) {
            if (!parse_float(val, &f) || f < 0 || f >= 1)
                return bad("--momentum '%s': want a number in [0, 1)%s", val, "");
            o->cfg.momentum = f;
        } else if (!strcmp(name, "--weight-decay")) {
            if (!parse_float(val, &f) || f < 0 || f >= 1)
                return bad("--weight-decay '%s': want a number in [0, 1)%s", val, "");
            o->cfg.weight_decay = f;
        } else if (!strcmp(name, "--step-epochs")) {
            if (!parse_long(val, 1, 1000000, &l))
                return bad("--step-epochs '%s': want a positive integer%s", val, "");
            o->cfg.step_epochs = (int)l;
        } else if (!strcmp(name, "--step-gamma")) {
            if (!parse_float(val, &f) || !(f > 0))
                return bad("--step-gamma '%s': want a positive number%s", val, "");
            o->cfg.step_gamma = f;
        } else if (!strcmp(name, "--warmup")) {
            if (!parse_long(val, 0, 1000000, &l))
                return bad("--warmup '%s': want a non-negative integer%s", val, "");
            o->cfg.warmup_epochs = (int)l;
        } else if (!strcmp(name, "--device")) {
            if (strcmp(val, "auto") && strcmp(val, "cpu") && strcmp(val, "cuda"))
                return bad("--device '%s': use auto, cpu or cuda%s", val, "");
            o->device = val;
        } else if (!strcmp(name, "--threads")) {
            if (!parse_long(val, 1, 1024, &l))
                return bad("--threads '%s': want an integer in 1..1024%s", val, "");
            o->threads = (int)l;
        } else if (!strcmp(name, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(val, &end, 10);
            if (!*val || *end || errno || val[0] == '-')
                return bad("--seed '%s': want a non-negative integer%s", val, "");
            o->cfg.seed = s;
        } else if (!strcmp(name, "--val-split")) {
            if (!parse_float(val, &f) || f < 0 || f > 0.9f)
                return bad("--val-split '%s': want a fraction in [0, 0.9]%s", val, "");
            o->cfg.val_split = f;
        } else if (!strcmp(name, "--limit")) {
            if (!parse_long(val, 1, 2000000000L, &l))
                return bad("--limit '%s': want a positive integer%s", val, "");
            o->cfg.limit = (size_t)l;
        } else if (!strcmp(name, "--checkpoint"))
            o->cfg.checkpoint_dir = val;
        else if (!strcmp(name, "--export"))
            o->export_path = val;
        else
            return bad("unknown option '%s'%s", name, "");
    }
    if (o->cfg.resume && !o->cfg.checkpoint_dir)
        return bad("--resume needs --checkpoint DIR%s%s", "", "");
    return 0;
}

static void on_progress(void *ctx, int epoch, size_t done, size_t total) {
    run_t *r = ctx;
    if (!r->bar)
        return;
    int width = 30, fill = total ? (int)(done * (size_t)width / total) : width;
    char bar[32];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\repoch %d/%d [%s] %3d%%", epoch, r->o->cfg.epochs, bar,
            total ? (int)(done * 100 / total) : 100);
    fflush(stderr);
}

static void json_num(const char *key, bool has, double v, bool last) {
    if (has && isfinite(v))
        printf("\"%s\":%.6g%s", key, v, last ? "" : ",");
    else
        printf("\"%s\":null%s", key, last ? "" : ",");
}

static bool on_epoch(void *ctx, const sl_nn_epoch_t *m) {
    run_t *r = ctx;
    if (r->bar)
        fprintf(stderr, "\r\033[K");
    if (r->o->json) {
        printf("{\"epoch\":%d,\"epochs\":%d,", m->epoch, m->epochs);
        json_num("train_loss", true, m->train_loss, false);
        json_num("train_acc", true, m->train_acc, false);
        json_num("val_loss", m->has_val, m->val_loss, false);
        json_num("val_acc", m->has_val, m->val_acc, false);
        json_num("test_loss", m->has_test, m->test_loss, false);
        json_num("test_acc", m->has_test, m->test_acc, false);
        json_num("lr", true, m->lr, false);
        json_num("seconds", true, m->seconds, false);
        json_num("eval_seconds", true, m->eval_seconds, false);
        json_num("samples_per_s", true, m->samples_per_s, false);
        printf("\"device\":\"%s\"}\n", r->device);
        fflush(stdout);
        return true;
    }
    char val[32] = "", test[32] = "";
    if (m->has_val)
        snprintf(val, sizeof val, "  val %.2f%%", 100 * m->val_acc);
    if (m->has_test)
        snprintf(test, sizeof test, "  test %.2f%%", 100 * m->test_acc);
    printf("epoch %d/%d  loss %.4f  train %.2f%%%s%s  %.2f s  %.0f samples/s\n", m->epoch,
           m->epochs, m->train_loss, 100 * m->train_acc, val, test, m->seconds,
           m->samples_per_s);
    fflush(stdout);
    return true;
}

int sl_cmd_train(int argc, char **argv) {
    opts_t o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    char why[512] = "";
    sl_nn_spec_t spec;
    if (sl_nn_spec_parse(o.cfg.model, &spec, why, sizeof why) != SL_OK) {
        fprintf(stderr, "peerctl train: %s\n", why);
        return 2;
    }
    sl_nn_backend_t *be = NULL;
    sl_nn_data_t *train = NULL, *test = NULL;
    sl_nn_trainer_t *t = NULL;
    rc = 1;
    if (sl_nn_backend_open(o.device, o.threads, &be, why, sizeof why) != SL_OK) {
        fprintf(stderr, "peerctl train: %s\n", why[0] ? why : "cannot open the device");
        goto done;
    }
    if (sl_nn_data_load(o.dataset, &train, &test, why, sizeof why) != SL_OK) {
        fprintf(stderr, "peerctl train: %s\n", why);
        goto done;
    }
    double mean = 0.0, sd = 0.0;
    if (o.normalize && sl_nn_data_standardize(train, test, &mean, &sd) != SL_OK) {
        fprintf(stderr, "peerctl train: --normalize: %s has constant inputs or a test set of "
                        "another scale\n", o.dataset);
        goto done;
    }
    if (sl_nn_trainer_new(be, &o.cfg, train, test, &t, why, sizeof why) != SL_OK) {
        fprintf(stderr, "peerctl train: %s\n", why);
        goto done;
    }
    run_t r = {.o = &o, .device = sl_nn_backend_name(be),
               .bar = !o.quiet && isatty(STDERR_FILENO)};
    fprintf(stderr, "peerctl train: backend %s (%s)\n", sl_nn_backend_name(be),
            sl_nn_backend_desc(be));
    fprintf(stderr,
            "peerctl train: model %s: %llu parameters, %.3f MFLOPs/sample; data %s: %zu "
            "training samples%s%s\n",
            spec.text, (unsigned long long)sl_nn_trainer_params(t),
            (double)sl_nn_trainer_flops(t) / 1e6, o.dataset,
            o.cfg.limit && o.cfg.limit < train->count ? o.cfg.limit : train->count,
            test ? ", test set" : "", o.cfg.val_split > 0 ? ", validation split" : "");
    if (o.normalize)
        fprintf(stderr, "peerctl train: inputs standardised: (x - %.6f) / %.6f\n", mean, sd);
    if (sl_nn_trainer_epochs_done(t) > 0)
        fprintf(stderr, "peerctl train: resumed after epoch %d\n", sl_nn_trainer_epochs_done(t));
    sl_nn_trainer_set_progress(t, on_progress, &r);
    if (sl_nn_trainer_run(t, on_epoch, &r, why, sizeof why) != SL_OK) {
        if (r.bar)
            fprintf(stderr, "\n");
        fprintf(stderr, "peerctl train: %s\n", why);
        goto done;
    }
    if (o.export_path) {
        if (sl_nn_export_npz(t, o.export_path, why, sizeof why) != SL_OK) {
            fprintf(stderr, "peerctl train: %s\n", why);
            goto done;
        }
        fprintf(stderr, "peerctl train: weights written to %s\n", o.export_path);
    }
    rc = 0;
done:
    sl_nn_trainer_destroy(&t);
    sl_nn_data_destroy(&train);
    sl_nn_data_destroy(&test);
    sl_nn_backend_destroy(&be);
    return rc;
}
