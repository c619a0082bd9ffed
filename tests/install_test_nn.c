/* The training engine alone (docs/embedding.md, "The training engine
 * alone"): a program that links libstarling_nn and libstarling_base and
 * nothing of the peer. tests/install_test.cmake builds it in the build
 * tree against the starling_nn target only (ctest install_nn_test), and
 * tests/install_test.sh builds it against an install with
 * `pkg-config --static starling_nn`.
 *
 * Usage: app DIR. It trains a small model on a synthetic set (class k
 * lights up row 2k of an 8x8 image) with a checkpoint in DIR after each
 * epoch (written through the platform layer), builds a second trainer
 * that resumes from that checkpoint, and exits 0 when the second has the
 * first's weights bit for bit and has learnt the task. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starling/nn.h>
#include <starling/platform.h>

enum { SAMPLES = 512, SIDE = 8, CLASSES = 4 };

/* An IDX image file and its label file, in memory (sl_nn_data_parse_idx). */
static sl_nn_data_t *synthetic(void) {
    static uint8_t img[16 + SAMPLES * SIDE * SIDE], lab[8 + SAMPLES];
    const uint8_t img_head[16] = {0, 0, 8, 3, 0, 0, SAMPLES >> 8, SAMPLES & 255,
                                  0, 0, 0, SIDE, 0, 0, 0, SIDE};
    const uint8_t lab_head[8] = {0, 0, 8, 1, 0, 0, SAMPLES >> 8, SAMPLES & 255};
    memcpy(img, img_head, sizeof img_head);
    memcpy(lab, lab_head, sizeof lab_head);
    uint32_t x = 12345; /* a fixed LCG: the same set on every run */
    for (int k = 0; k < SAMPLES; k++) {
        int cls = k % CLASSES;
        lab[8 + k] = (uint8_t)cls;
        for (int i = 0; i < SIDE * SIDE; i++) {
            x = x * 1103515245u + 12345u;
            int noise = (int)((x >> 16) % 90);
            img[16 + k * SIDE * SIDE + i] = (uint8_t)((i / SIDE == 2 * cls ? 150 : 0) + noise);
        }
    }
    sl_nn_data_t *d = NULL;
    char why[256] = "";
    if (sl_nn_data_parse_idx(img, sizeof img, lab, sizeof lab, "synthetic", &d, why,
                             sizeof why) != SL_OK) {
        fprintf(stderr, "app: the synthetic set: %s\n", why);
        return NULL;
    }
    return d;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: app DIR\n");
        return 2;
    }
    char why[512] = "";
    int rc = 1;
    sl_nn_data_t *data = synthetic();
    sl_nn_backend_t *be = NULL;
    sl_nn_trainer_t *a = NULL, *b = NULL;
    float *pa = NULL, *pb = NULL;
    if (!data)
        goto done;
    if (sl_nn_backend_open("cpu", 1, &be, why, sizeof why) != SL_OK) {
        fprintf(stderr, "app: the cpu backend: %s\n", why);
        goto done;
    }
    sl_nn_train_cfg_t cfg;
    sl_nn_train_cfg_init(&cfg);
    cfg.model = "mlp:32";
    cfg.epochs = 3;
    cfg.batch = 32;
    cfg.seed = 7;
    cfg.checkpoint_dir = argv[1];
    if (sl_nn_trainer_new(be, &cfg, data, NULL, &a, why, sizeof why) != SL_OK ||
        sl_nn_trainer_run(a, NULL, NULL, why, sizeof why) != SL_OK) {
        fprintf(stderr, "app: training: %s\n", why);
        goto done;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/checkpoint.slck", argv[1]);
    if (sl_plat_path_kind(path) != SL_PLAT_PATH_FILE) {
        fprintf(stderr, "app: no checkpoint at %s\n", path);
        goto done;
    }
    cfg.resume = true;
    if (sl_nn_trainer_new(be, &cfg, data, NULL, &b, why, sizeof why) != SL_OK) {
        fprintf(stderr, "app: resuming from %s: %s\n", path, why);
        goto done;
    }
    size_t n = (size_t)sl_nn_trainer_params(a);
    pa = calloc(n, sizeof *pa);
    pb = calloc(n, sizeof *pb);
    double loss = 0, acc = 0;
    if (!pa || !pb || sl_nn_trainer_get_params(a, pa, n) != SL_OK ||
        sl_nn_trainer_get_params(b, pb, n) != SL_OK ||
        sl_nn_trainer_evaluate(b, data, &loss, &acc) != SL_OK) {
        fprintf(stderr, "app: reading the weights back failed\n");
        goto done;
    }
    printf("engine: %s, %zu parameters, resumed at epoch %d of %d, accuracy %.3f\n",
           sl_nn_backend_name(be), n, sl_nn_trainer_epochs_done(b), cfg.epochs, acc);
    if (sl_nn_trainer_epochs_done(b) != cfg.epochs || memcmp(pa, pb, n * sizeof *pa) != 0)
        fprintf(stderr, "app: the resumed trainer's weights differ from the checkpointed ones\n");
    else if (acc < 0.9)
        fprintf(stderr, "app: learnt only %.3f of the synthetic task\n", acc);
    else
        rc = 0;
done:
    free(pa);
    free(pb);
    sl_nn_trainer_destroy(&a);
    sl_nn_trainer_destroy(&b);
    sl_nn_backend_destroy(&be);
    sl_nn_data_destroy(&data);
    return rc;
}
