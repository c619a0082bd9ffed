/* Short training runs on a Fashion-MNIST subset reach stated accuracies
 * (cpu backend); the exported .npz reproduces the engine's predictions in
 * numpy; `peerctl train` prints its JSON lines and refuses bad arguments.
 * Skipped (77) where the data set is not installed. Stated accuracies,
 * measured with seed 1 (about 2-3 points of margin below them):
 *   mlp:256,128        3 epochs, 20000 samples, 10% validation: test >= 82%
 *   cnn:8,16,k=3/fc:32 3 epochs, 10000 samples:                 test >= 80%
 *   cnn:8,k=3,bn/fc:32,dropout=0.2, Adam, 2 epochs, 10000:      test >= 80% */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/nn_internal.h"
#include "testlib.h"

static sl_nn_backend_t *be;
static sl_nn_data_t *train, *test;
static char dir[256];

static sl_nn_trainer_t *run(const char *model, sl_nn_opt_kind opt, float lr, int epochs,
                            size_t limit, float val_split, sl_nn_epoch_t *last) {
    sl_nn_train_cfg_t cfg;
    sl_nn_train_cfg_init(&cfg);
    cfg.model = model;
    cfg.optimizer = opt;
    cfg.lr = lr;
    cfg.epochs = epochs;
    cfg.limit = limit;
    cfg.val_split = val_split;
    cfg.seed = 1;
    char why[512] = "";
    sl_nn_trainer_t *t = NULL;
    CHECK_OK(sl_nn_trainer_new(be, &cfg, train, test, &t, why, sizeof why));
    if (!t) {
        sl_test_fail(__FILE__, __LINE__, "%s: %s", model, why);
        return NULL;
    }
    for (int e = 0; e < epochs; e++) {
        CHECK_OK(sl_nn_trainer_epoch(t, last, why, sizeof why));
        printf("  %s epoch %d: loss %.4f val %.4f test %.4f (%.2f s)\n", model, last->epoch,
               last->train_loss, last->val_acc, last->test_acc, last->seconds);
        CHECK(last->epoch == e + 1 && last->seconds > 0 && last->samples_per_s > 0);
    }
    return t;
}

static void test_mlp(void) {
    sl_nn_epoch_t m;
    sl_nn_trainer_t *t = run("mlp:256,128", SL_NN_OPT_SGD, 0.05f, 3, 20000, 0.1f, &m);
    if (!t)
        return;
    CHECK(m.has_val && m.has_test);
    CHECK_INT(m.samples, 18000);
    CHECK_MSG(m.test_acc >= 0.82, "test accuracy %.4f < 0.82", m.test_acc);
    CHECK_MSG(m.val_acc >= 0.82, "validation accuracy %.4f < 0.82", m.val_acc);
    CHECK_INT(sl_nn_trainer_params(t), 235146);
    /* evaluate() agrees with the epoch's test metric */
    double loss, acc;
    CHECK_OK(sl_nn_trainer_evaluate(t, test, &loss, &acc));
    CHECK(acc == m.test_acc && loss == m.test_loss);

    /* Export, then let numpy run the network and compare predictions. */
    char npz[300], py[300], cmd[1200];
    snprintf(npz, sizeof npz, "%s/mlp.npz", dir);
    char why[512] = "";
    CHECK_OK(sl_nn_export_npz(t, npz, why, sizeof why));
    const char *python = "python3";
    if (system("python3 -c 'import numpy' 2>/dev/null") != 0)
        python = "/usr/bin/python3";
    if (strcmp(python, "python3") && system("/usr/bin/python3 -c 'import numpy' 2>/dev/null")) {
        printf("  (numpy missing: export read-back not checked)\n");
        sl_nn_trainer_destroy(&t);
        return;
    }
    snprintf(py, sizeof py, "%s/check.py", dir);
    FILE *f = fopen(py, "w");
    CHECK(f != NULL);
    if (f) {
        fprintf(f,
                "import gzip, sys, numpy as np\n"
                "z = np.load(sys.argv[1])\n"
                "assert str(z['spec']) == 'mlp:256,128', z['spec']\n"
                "assert list(z['input']) == [1, 28, 28, 10]\n"
                "assert z['l1.dense.weight'].shape == (784, 256)\n"
                "x = np.frombuffer(gzip.open(sys.argv[2]).read(), np.uint8, offset=16)\n"
                "x = x.reshape(-1, 784).astype(np.float32) / 255\n"
                "y = np.frombuffer(gzip.open(sys.argv[3]).read(), np.uint8, offset=8)\n"
                "h = np.maximum(x @ z['l1.dense.weight'] + z['l1.dense.bias'], 0)\n"
                "h = np.maximum(h @ z['l2.dense.weight'] + z['l2.dense.bias'], 0)\n"
                "o = h @ z['out.dense.weight'] + z['out.dense.bias']\n"
                "print('%%.4f' %% (o.argmax(1) == y).mean())\n");
        fclose(f);
    }
    const char *root = getenv("SL_DATASETS") ? getenv("SL_DATASETS") : "/usr/share/datasets";
    snprintf(cmd, sizeof cmd,
             "%s %s %s %s/fashion-mnist/t10k-images-idx3-ubyte.gz "
             "%s/fashion-mnist/t10k-labels-idx1-ubyte.gz",
             python, py, npz, root, root);
    FILE *p = popen(cmd, "r");
    char line[64] = "";
    CHECK(p && fgets(line, sizeof line, p));
    int rc = p ? pclose(p) : -1;
    CHECK_MSG(rc == 0, "numpy check failed (%d): %s", rc, cmd);
    double np_acc = atof(line);
    CHECK_MSG(np_acc > m.test_acc - 0.002 && np_acc < m.test_acc + 0.002,
              "numpy accuracy %.4f vs engine %.4f", np_acc, m.test_acc);
    sl_nn_trainer_destroy(&t);
}

static void test_cnn(void) {
    sl_nn_epoch_t m;
    sl_nn_trainer_t *t = run("cnn:8,16,k=3/fc:32", SL_NN_OPT_SGD, 0.05f, 3, 10000, 0.0f, &m);
    if (!t)
        return;
    CHECK(!m.has_val);
    CHECK_MSG(m.test_acc >= 0.80, "test accuracy %.4f < 0.80", m.test_acc);
    sl_nn_trainer_destroy(&t);
}

static void test_cnn_bn_dropout_adam(void) {
    sl_nn_epoch_t m;
    sl_nn_trainer_t *t =
        run("cnn:8,k=3,bn/fc:32,dropout=0.2", SL_NN_OPT_ADAM, 0.002f, 2, 10000, 0.0f, &m);
    if (!t)
        return;
    CHECK_MSG(m.test_acc >= 0.80, "test accuracy %.4f < 0.80", m.test_acc);
    sl_nn_trainer_destroy(&t);
}

/* The command line: JSON lines with the promised fields; bad usage exits 2
 * with a message. */
static void test_cli(void) {
    const char *bdir = getenv("SL_BUILD_DIR");
    if (!bdir) {
        printf("  (SL_BUILD_DIR unset: CLI not checked)\n");
        return;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s/peerctl train --dataset fashion-mnist --model mlp:32 --epochs 2 --limit 3000 "
             "--val-split 0.1 --device cpu --json --checkpoint %s/cli --export %s/cli.npz "
             "2>/dev/null",
             bdir, dir, dir);
    FILE *p = popen(cmd, "r");
    char line[1024];
    int lines = 0;
    while (p && fgets(line, sizeof line, p)) {
        lines++;
        static const char *keys[] = {"\"epoch\":", "\"train_loss\":", "\"val_acc\":0.",
                                     "\"test_acc\":0.", "\"seconds\":", "\"samples_per_s\":",
                                     "\"device\":\"cpu\""};
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
            CHECK_MSG(strstr(line, keys[k]) != NULL, "line '%s' lacks %s", line, keys[k]);
        CHECK(line[0] == '{');
    }
    CHECK_INT(p ? pclose(p) : -1, 0);
    CHECK_INT(lines, 2);
    struct stat st;
    snprintf(cmd, sizeof cmd, "%s/cli/checkpoint.slck", dir);
    CHECK(stat(cmd, &st) == 0);
    snprintf(cmd, sizeof cmd, "%s/cli.npz", dir);
    CHECK(stat(cmd, &st) == 0);
    /* --resume after the last epoch: nothing left to do, no output */
    snprintf(cmd, sizeof cmd,
             "%s/peerctl train --model mlp:32 --epochs 2 --limit 3000 --val-split 0.1 --json "
             "--checkpoint %s/cli --resume --device cpu 2>/dev/null | wc -l",
             bdir, dir);
    p = popen(cmd, "r");
    CHECK(p && fgets(line, sizeof line, p) && atoi(line) == 0);
    if (p)
        pclose(p);
    static const struct {
        const char *args, *says;
    } bad[] = {
        {"--epochs 0", "--epochs '0'"},
        {"--model mlp:x", "model spec"},
        {"--optimizer lbfgs", "--optimizer 'lbfgs'"},
        {"--device tpu", "--device 'tpu'"},
        {"--bogus", "unknown option '--bogus'"},
        {"--resume", "--resume needs --checkpoint"},
        {"--lr", "--lr needs a value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(cmd, sizeof cmd, "%s/peerctl train %s 2>&1; echo rc=$?", bdir, bad[i].args);
        p = popen(cmd, "r");
        char out[2048] = "";
        size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
        out[n] = '\0';
        if (p)
            pclose(p);
        CHECK_MSG(strstr(out, bad[i].says) != NULL, "%s: output '%s' lacks '%s'", bad[i].args,
                  out, bad[i].says);
        CHECK_MSG(strstr(out, "rc=2") != NULL, "%s: exit status not 2: %s", bad[i].args, out);
    }
    snprintf(cmd, sizeof cmd, "%s/peerctl train --help | grep -c -- --val-split", bdir);
    p = popen(cmd, "r");
    CHECK(p && fgets(line, sizeof line, p) && atoi(line) >= 1);
    if (p)
        pclose(p);
}

int main(void) {
    CHECK_OK(sl_init());
    char why[512];
    sl_err err = sl_nn_data_load("fashion-mnist", &train, &test, why, sizeof why);
    if (err != SL_OK) {
        printf("skipped: %s\n", why);
        return SL_TEST_SKIP;
    }
    snprintf(dir, sizeof dir, "/tmp/sl_nn_train_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    CHECK_OK(sl_nn_backend_open("cpu", 0, &be, why, sizeof why));
    sl_test_run("mlp", test_mlp);
    sl_test_run("cnn", test_cnn);
    sl_test_run("cnn_bn_dropout_adam", test_cnn_bn_dropout_adam);
    sl_test_run("cli", test_cli);
    sl_nn_backend_destroy(&be);
    sl_nn_data_destroy(&train);
    sl_nn_data_destroy(&test);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return sl_test_finish();
}
