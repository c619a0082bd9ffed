/* Parity with PyTorch: the benchmark's two models (mlp:256,128 and
 * cnn:32,64), built and initialised by the engine, run forward and
 * backward on the first 128 Fashion-MNIST images; PyTorch, given the same
 * weights (through the documented tensor layouts), must compute the same
 * loss and gradients (to 1e-5). Skipped (77) without the data set or
 * without a python3 that imports torch. */
#include <stdlib.h>
#include <unistd.h>

#include "nn/nn_internal.h"
#include "testlib.h"

static char dir[256];
static sl_nn_model_t *model;

static void dump(const char *name, const void *p, size_t len) {
    char f[512];
    snprintf(f, sizeof f, "%s/%s", dir, name);
    FILE *o = fopen(f, "wb");
    CHECK(o && fwrite(p, 1, len, o) == len);
    if (o)
        fclose(o);
}

static sl_err dump_tensor(void *ctx, const char *name, bool is_stat, size_t offset,
                          const int *shape, int ndim) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)shape[i];
    char f[128];
    snprintf(f, sizeof f, "par_%s", name);
    dump(f, model->params + offset, n * sizeof(float));
    snprintf(f, sizeof f, "grad_%s", name);
    dump(f, model->grads + offset, n * sizeof(float));
    return SL_OK;
}

static const char script[] =
    "import sys, numpy as np, torch, torch.nn.functional as F\n"
    "d, spec, ours = sys.argv[1], sys.argv[2], float(sys.argv[3])\n"
    "L = lambda n, s: torch.from_numpy(np.fromfile(f'{d}/{n}', np.float32)).reshape(s)\n"
    "x = L('x', (128, 1, 28, 28))\n"
    "y = torch.from_numpy(np.fromfile(f'{d}/y', np.int32).astype(np.int64))\n"
    "def P(n, s):\n"
    "    return L('par_' + n, s).requires_grad_()\n"
    "if spec.startswith('cnn'):\n"
    "    t = [('l1.conv.weight', (32, 1, 5, 5)), ('l1.conv.bias', (32,)),\n"
    "         ('l2.conv.weight', (64, 32, 5, 5)), ('l2.conv.bias', (64,)),\n"
    "         ('out.dense.weight', (1024, 10)), ('out.dense.bias', (10,))]\n"
    "    p = [P(n, s) for n, s in t]\n"
    "    h = F.max_pool2d(F.relu(F.conv2d(x, p[0], p[1])), 2)\n"
    "    h = F.max_pool2d(F.relu(F.conv2d(h, p[2], p[3])), 2)\n"
    "    o = h.flatten(1) @ p[4] + p[5]\n"
    "else:\n"
    "    t = [('l1.dense.weight', (784, 256)), ('l1.dense.bias', (256,)),\n"
    "         ('l2.dense.weight', (256, 128)), ('l2.dense.bias', (128,)),\n"
    "         ('out.dense.weight', (128, 10)), ('out.dense.bias', (10,))]\n"
    "    p = [P(n, s) for n, s in t]\n"
    "    h = F.relu(x.flatten(1) @ p[0] + p[1])\n"
    "    h = F.relu(h @ p[2] + p[3])\n"
    "    o = h @ p[4] + p[5]\n"
    "loss = F.cross_entropy(o, y)\n"
    "loss.backward()\n"
    "worst = abs(loss.item() - ours) / max(1.0, abs(ours))\n"
    "for (n, s), q in zip(t, p):\n"
    "    g = L('grad_' + n, s)\n"
    "    err = ((g - q.grad).abs().max() / max(1e-3, q.grad.abs().max().item())).item()\n"
    "    print(f'{n}: relative max difference {err:.3g}')\n"
    "    worst = max(worst, err)\n"
    "print('loss torch %.7f ours %.7f' % (loss.item(), ours))\n"
    "sys.exit(0 if worst < 1e-5 else 1)\n";

static const char *python;
static sl_nn_data_t *train, *test;

static void check_spec(const char *text) {
    sl_nn_backend_t *be = NULL;
    char why[256];
    CHECK_OK(sl_nn_backend_open("cpu", 0, &be, why, sizeof why));
    sl_nn_spec_t spec;
    CHECK_OK(sl_nn_spec_parse(text, &spec, why, sizeof why));
    CHECK_OK(sl_nn_model_new(be, &spec, &train->shape, 128, &model, why, sizeof why));
    if (!model) {
        sl_nn_backend_destroy(&be);
        return;
    }
    CHECK_OK(sl_nn_model_init_params(model, 1));
    float *x = malloc(128 * 784 * sizeof *x);
    int32_t y[128];
    CHECK_OK(sl_nn_backend_cpu.gather_u8(be->self, x, train->images_u8, NULL, 0, 128, 784,
                                         train->scale, train->shift));
    CHECK_OK(sl_nn_backend_cpu.gather_i32(be->self, y, train->labels, NULL, 0, 128));
    float *logits;
    double acc[2] = {0, 0};
    CHECK_OK(sl_nn_model_forward(model, x, 128, true, 1, &logits));
    CHECK_OK(sl_nn_backend_cpu.softmax_xent(be->self, logits, y, 128, 10, model->gbuf[0],
                                            1.0f / 128, acc));
    CHECK_OK(sl_nn_model_backward(model, x, model->gbuf[0], 128, 1));
    CHECK_OK(sl_nn_model_tensors(model, dump_tensor, NULL));
    dump("x", x, 128 * 784 * sizeof *x);
    dump("y", y, sizeof y);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s/check.py %s '%s' %.9g 2>&1", python, dir, dir, text,
             acc[0] / 128);
    FILE *p = popen(cmd, "r");
    char line[256];
    while (p && fgets(line, sizeof line, p))
        printf("  %s: %s", text, line);
    int rc = p ? pclose(p) : -1;
    CHECK_MSG(rc == 0, "%s: PyTorch disagrees (status %d)", text, rc);
    free(x);
    sl_nn_model_destroy(&model);
    sl_nn_backend_destroy(&be);
}

static void test_mlp(void) { check_spec("mlp:256,128"); }
static void test_cnn(void) { check_spec("cnn:32,64"); }

int main(void) {
    CHECK_OK(sl_init());
    char why[512];
    if (sl_nn_data_load("fashion-mnist", &train, &test, why, sizeof why) != SL_OK) {
        printf("skipped: %s\n", why);
        return SL_TEST_SKIP;
    }
    static const char *const pythons[] = {"/usr/bin/python3", "python3"};
    for (size_t i = 0; i < 2 && !python; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "%s -c 'import torch, numpy' >/dev/null 2>&1", pythons[i]);
        if (system(cmd) == 0)
            python = pythons[i];
    }
    if (!python) {
        printf("skipped: no python3 with torch and numpy\n");
        sl_nn_data_destroy(&train);
        sl_nn_data_destroy(&test);
        return SL_TEST_SKIP;
    }
    snprintf(dir, sizeof dir, "/tmp/sl_nn_parity_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    char path[300];
    snprintf(path, sizeof path, "%s/check.py", dir);
    FILE *f = fopen(path, "w");
    if (!f || fputs(script, f) < 0)
        return 1;
    fclose(f);
    sl_test_run("mlp", test_mlp);
    sl_test_run("cnn", test_cnn);
    sl_nn_data_destroy(&train);
    sl_nn_data_destroy(&test);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return sl_test_finish();
}
