/* Checkpoints: a run stopped after an epoch and resumed from its
 * checkpoint ends with exactly the weights (bit for bit, on the cpu) and
 * metrics of the run that never stopped; damaged or foreign checkpoints
 * are rejected with the stated error and change nothing. */
#include <stdlib.h>
#include <unistd.h>

#include "nn/nn_internal.h"
#include "testlib.h"

static char dir[256];
static sl_nn_backend_t *be;
static sl_nn_data_t *train, *test;

/* A learnable synthetic set: 8x8 images, class k lights up row 2k. */
static sl_nn_data_t *make_set(uint32_t n, uint64_t seed) {
    size_t il = 16 + (size_t)n * 64, ll = 8 + n;
    uint8_t *img = calloc(1, il), *lab = calloc(1, ll);
    img[2] = 8;
    img[3] = 3;
    img[4] = (uint8_t)(n >> 24);
    img[5] = (uint8_t)(n >> 16);
    img[6] = (uint8_t)(n >> 8);
    img[7] = (uint8_t)n;
    img[11] = 8;
    img[15] = 8;
    lab[2] = 8;
    lab[3] = 1;
    memcpy(lab + 4, img + 4, 4);
    sl_rng_t rng;
    sl_rng_seed(&rng, seed);
    for (uint32_t k = 0; k < n; k++) {
        int cls = (int)sl_rng_below(&rng, 4);
        lab[8 + k] = (uint8_t)cls;
        for (int i = 0; i < 64; i++) {
            int noise = (int)sl_rng_below(&rng, 90);
            img[16 + (size_t)k * 64 + i] = (uint8_t)((i / 8 == 2 * cls ? 150 : 0) + noise);
        }
    }
    sl_nn_data_t *d = NULL;
    char why[256];
    CHECK_OK(sl_nn_data_parse_idx(img, il, lab, ll, "synthetic", &d, why, sizeof why));
    free(img);
    free(lab);
    return d;
}

static void base_cfg(sl_nn_train_cfg_t *cfg, const char *model, sl_nn_opt_kind opt) {
    sl_nn_train_cfg_init(cfg);
    cfg->model = model;
    cfg->optimizer = opt;
    cfg->lr = opt >= SL_NN_OPT_ADAM ? 0.003f : 0.05f;
    cfg->weight_decay = 1e-4f;
    cfg->epochs = 3;
    cfg->batch = 32;
    cfg->val_split = 0.1f;
    cfg->seed = 5;
    cfg->schedule = SL_NN_SCHED_COSINE;
    cfg->warmup_epochs = 1;
}

static float *params_of(sl_nn_trainer_t *t, size_t *count) {
    *count = t->model->param_count;
    float *p = malloc(*count * sizeof *p);
    CHECK_OK(sl_nn_trainer_get_params(t, p, *count));
    return p;
}

/* Uninterrupted vs. stopped after epoch `stop` and resumed. */
static void check_resume(const char *model, sl_nn_opt_kind opt, int stop) {
    char why[512] = "";
    sl_nn_train_cfg_t cfg;
    base_cfg(&cfg, model, opt);
    sl_nn_trainer_t *a = NULL, *b = NULL;
    CHECK_OK(sl_nn_trainer_new(be, &cfg, train, test, &a, why, sizeof why));
    if (!a) {
        sl_test_fail(__FILE__, __LINE__, "%s", why);
        return;
    }
    sl_nn_epoch_t ma = {0}, mb = {0};
    for (int e = 0; e < cfg.epochs; e++)
        CHECK_OK(sl_nn_trainer_epoch(a, &ma, why, sizeof why));
    CHECK_ERR(sl_nn_trainer_epoch(a, &ma, NULL, 0), SL_ESTATE);

    char ck[300];
    snprintf(ck, sizeof ck, "%s/%s-%d", dir, sl_nn_optim_name(opt), stop);
    cfg.checkpoint_dir = ck;
    CHECK_OK(sl_nn_trainer_new(be, &cfg, train, test, &b, why, sizeof why));
    for (int e = 0; e < stop; e++)
        CHECK_OK(sl_nn_trainer_epoch(b, &mb, why, sizeof why));
    sl_nn_trainer_destroy(&b);
    cfg.resume = true;
    CHECK_OK(sl_nn_trainer_new(be, &cfg, train, test, &b, why, sizeof why));
    if (!b) {
        sl_test_fail(__FILE__, __LINE__, "resume: %s", why);
        sl_nn_trainer_destroy(&a);
        return;
    }
    CHECK_INT(sl_nn_trainer_epochs_done(b), stop);
    CHECK_OK(sl_nn_trainer_run(b, NULL, NULL, why, sizeof why));
    CHECK_INT(sl_nn_trainer_epochs_done(b), cfg.epochs);
    /* The last epoch's metrics as well: run b's last epoch again from the
     * checkpoint before it would differ, so compare weights and loss. */
    size_t na, nb;
    float *pa = params_of(a, &na), *pb = params_of(b, &nb);
    CHECK_INT(na, nb);
    CHECK_MSG(na == nb && memcmp(pa, pb, na * sizeof *pa) == 0,
              "%s/%s: resumed weights differ from uninterrupted ones", model,
              sl_nn_optim_name(opt));
    double la, aa, lb, ab;
    CHECK_OK(sl_nn_trainer_evaluate(a, test, &la, &aa));
    CHECK_OK(sl_nn_trainer_evaluate(b, test, &lb, &ab));
    CHECK(la == lb && aa == ab);
    CHECK_MSG(aa > 0.9, "%s learnt only %.3f of the synthetic task", model, aa);
    free(pa);
    free(pb);
    sl_nn_trainer_destroy(&a);
    sl_nn_trainer_destroy(&b);
}

static void test_resume_sgd_mlp(void) { check_resume("mlp:32,16", SL_NN_OPT_SGD, 1); }
static void test_resume_nesterov_dropout(void) {
    check_resume("mlp:32,dropout=0.3", SL_NN_OPT_NESTEROV, 2);
}
static void test_resume_adam_cnn_bn(void) {
    check_resume("cnn:4,k=3,bn/fc:16,dropout=0.2", SL_NN_OPT_ADAM, 1);
}
static void test_resume_adamw_cnn(void) { check_resume("cnn:4,k=3,pad=same", SL_NN_OPT_ADAMW, 2); }

static void write_bytes(const char *path, const uint8_t *b, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b, 1, len, f) == len);
    if (f)
        fclose(f);
}

/* Each kind of damage is refused with its error, and the trainer keeps
 * its weights. */
static void test_corrupt_rejected(void) {
    char why[512] = "", path[300], bad[300];
    sl_nn_train_cfg_t cfg;
    base_cfg(&cfg, "mlp:16", SL_NN_OPT_SGD);
    snprintf(path, sizeof path, "%s/good.slck", dir);
    snprintf(bad, sizeof bad, "%s/bad.slck", dir);
    sl_nn_trainer_t *t = NULL, *fresh = NULL, *other = NULL;
    CHECK_OK(sl_nn_trainer_new(be, &cfg, train, test, &t, why, sizeof why));
    if (!t)
        return;
    sl_nn_epoch_t m;
    CHECK_OK(sl_nn_trainer_epoch(t, &m, why, sizeof why));
    CHECK_OK(sl_nn_checkpoint_save(t, path, why, sizeof why));
    size_t len;
    uint8_t *good = sl_test_read_file(path, &len);
    CHECK(good && len > 200);
    if (!good)
        goto done;
    CHECK_OK(sl_nn_trainer_new(be, &cfg, train, test, &fresh, why, sizeof why));
    size_t n0;
    float *before = params_of(fresh, &n0);
    uint8_t *b = malloc(len + 8);
    struct {
        const char *what;
        sl_err want;
        const char *says;
    } cases[] = {
        {"flip a weight byte", SL_ECORRUPT, "CRC mismatch"},
        {"truncate", SL_ETRUNC, "truncated"},
        {"append", SL_EPROTO, "trailing bytes"},
        {"bad magic", SL_EPROTO, "bad magic"},
        {"future version", SL_EVERSION, "version 9"},
        {"empty", SL_ETRUNC, "too short"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t bl = len;
        memcpy(b, good, len);
        if (i == 0)
            b[len - 100] ^= 0x04;
        else if (i == 1)
            bl = len - 9;
        else if (i == 2)
            b[bl++] = 0;
        else if (i == 3)
            b[0] = 'X';
        else if (i == 4)
            b[8] = 9;
        else
            bl = 0;
        write_bytes(bad, b, bl);
        why[0] = '\0';
        sl_err err = sl_nn_checkpoint_load(fresh, bad, why, sizeof why);
        CHECK_MSG(err == cases[i].want, "%s: got %s, want %s (%s)", cases[i].what,
                  sl_errname(err), sl_errname(cases[i].want), why);
        CHECK_MSG(strstr(why, cases[i].says) && strstr(why, "bad.slck"),
                  "%s: message '%s' lacks '%s'", cases[i].what, why, cases[i].says);
        CHECK_INT(sl_nn_trainer_epochs_done(fresh), 0);
    }
    size_t n1;
    float *after = params_of(fresh, &n1);
    CHECK(n0 == n1 && memcmp(before, after, n0 * sizeof *before) == 0);
    free(after);
    /* A sound checkpoint of another model or optimizer does not load. */
    sl_nn_train_cfg_t oc = cfg;
    oc.model = "mlp:17";
    CHECK_OK(sl_nn_trainer_new(be, &oc, train, test, &other, why, sizeof why));
    CHECK_ERR(sl_nn_checkpoint_load(other, path, why, sizeof why), SL_EINVAL);
    CHECK(strstr(why, "model 'mlp:16'") != NULL);
    sl_nn_trainer_destroy(&other);
    oc = cfg;
    oc.optimizer = SL_NN_OPT_NESTEROV;
    CHECK_OK(sl_nn_trainer_new(be, &oc, train, test, &other, why, sizeof why));
    CHECK_ERR(sl_nn_checkpoint_load(other, path, why, sizeof why), SL_EINVAL);
    CHECK(strstr(why, "optimizer") != NULL);
    sl_nn_trainer_destroy(&other);
    oc = cfg;
    oc.seed = 6;
    CHECK_OK(sl_nn_trainer_new(be, &oc, train, test, &other, why, sizeof why));
    CHECK_ERR(sl_nn_checkpoint_load(other, path, why, sizeof why), SL_EINVAL);
    sl_nn_trainer_destroy(&other);
    oc = cfg;
    oc.val_split = 0.2f;
    CHECK_OK(sl_nn_trainer_new(be, &oc, train, test, &other, why, sizeof why));
    CHECK_ERR(sl_nn_checkpoint_load(other, path, why, sizeof why), SL_EINVAL);
    sl_nn_trainer_destroy(&other);
    /* The good one loads. */
    CHECK_OK(sl_nn_checkpoint_load(fresh, path, why, sizeof why));
    CHECK_INT(sl_nn_trainer_epochs_done(fresh), 1);
    CHECK_ERR(sl_nn_checkpoint_load(fresh, "/nonexistent/x.slck", why, sizeof why),
              SL_ENOTFOUND);
    free(b);
    free(before);
    free(good);
done:
    sl_nn_trainer_destroy(&fresh);
    sl_nn_trainer_destroy(&t);
}

/* --resume with a checkpoint from a run that asked for fewer epochs is
 * fine; one from beyond the epochs asked for is refused. */
static void test_resume_bounds(void) {
    char why[512] = "", ck[300];
    sl_nn_train_cfg_t cfg;
    base_cfg(&cfg, "mlp:8", SL_NN_OPT_SGD);
    snprintf(ck, sizeof ck, "%s/bounds", dir);
    cfg.checkpoint_dir = ck;
    cfg.epochs = 2;
    sl_nn_trainer_t *t = NULL;
    CHECK_OK(sl_nn_trainer_new(be, &cfg, train, test, &t, why, sizeof why));
    CHECK_OK(sl_nn_trainer_run(t, NULL, NULL, why, sizeof why));
    sl_nn_trainer_destroy(&t);
    cfg.resume = true;
    cfg.epochs = 1;
    CHECK_ERR(sl_nn_trainer_new(be, &cfg, train, test, &t, why, sizeof why), SL_EINVAL);
    CHECK(t == NULL && strstr(why, "beyond") != NULL);
    cfg.epochs = 3;
    CHECK_OK(sl_nn_trainer_new(be, &cfg, train, test, &t, why, sizeof why));
    CHECK_INT(t ? sl_nn_trainer_epochs_done(t) : -1, 2);
    sl_nn_trainer_destroy(&t);
}

int main(void) {
    CHECK_OK(sl_init());
    snprintf(dir, sizeof dir, "/tmp/sl_nn_ckpt_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    char why[256];
    CHECK_OK(sl_nn_backend_open("cpu", 0, &be, why, sizeof why));
    train = make_set(1200, 1);
    test = make_set(300, 2);
    sl_test_run("resume_sgd_mlp", test_resume_sgd_mlp);
    sl_test_run("resume_nesterov_dropout", test_resume_nesterov_dropout);
    sl_test_run("resume_adam_cnn_bn", test_resume_adam_cnn_bn);
    sl_test_run("resume_adamw_cnn", test_resume_adamw_cnn);
    sl_test_run("corrupt_rejected", test_corrupt_rejected);
    sl_test_run("resume_bounds", test_resume_bounds);
    sl_nn_data_destroy(&train);
    sl_nn_data_destroy(&test);
    sl_nn_backend_destroy(&be);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return sl_test_finish();
}
