/* Robustness of the checkpoint and IDX loaders: thousands of random
 * corruptions (bit flips, byte stores, truncations, extensions, header
 * fields set to extreme values, with and without a recomputed CRC) never
 * crash, never read out of bounds (run under ASan by tools/test), and
 * either fail with an error or, where the damage keeps the file valid,
 * load something consistent. $SL_SEEDS scales the iteration count. */
#include <stdlib.h>

#include "nn/nn_internal.h"
#include "starling/hash.h"
#include "testlib.h"

static sl_rng_t rng;

/* Bytes of the checkpoint header worth aiming header mutations at. */
#define FIXED_HDR_GUESS 100

static void put32le(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* One random mutation of b (length *len, capacity cap). */
static void mutate(uint8_t *b, size_t *len, size_t cap, size_t header) {
    static const uint32_t extremes[] = {0, 1, 0x7fffffff, 0xffffffff, 0x80000000, 16, 84};
    switch (sl_rng_below(&rng, 6)) {
    case 0: /* bit flip */
        if (*len)
            b[sl_rng_below(&rng, *len)] ^= (uint8_t)(1u << sl_rng_below(&rng, 8));
        break;
    case 1: /* byte store in the header */
        if (*len)
            b[sl_rng_below(&rng, header < *len ? header : *len)] = (uint8_t)sl_rng_next(&rng);
        break;
    case 2: /* truncate */
        *len = (size_t)sl_rng_below(&rng, *len + 1);
        break;
    case 3: /* extend with junk */
        while (*len < cap && sl_rng_below(&rng, 4))
            b[(*len)++] = (uint8_t)sl_rng_next(&rng);
        break;
    default: { /* a 32-bit header field set to an extreme value */
        if (*len < 8)
            break;
        size_t lim = header < *len ? header : *len;
        size_t at = (size_t)sl_rng_below(&rng, lim - 3);
        uint32_t v = extremes[sl_rng_below(&rng, sizeof extremes / sizeof *extremes)];
        if (sl_rng_below(&rng, 2))
            put32le(b + at, v);
        else {
            b[at] = (uint8_t)(v >> 24);
            b[at + 1] = (uint8_t)(v >> 16);
            b[at + 2] = (uint8_t)(v >> 8);
            b[at + 3] = (uint8_t)v;
        }
        break;
    }
    }
}

static void test_checkpoint_fuzz(void) {
    sl_nn_backend_t *be = NULL;
    sl_nn_data_t *d = NULL;
    sl_nn_trainer_t *t = NULL;
    char why[512];
    uint8_t img[16 + 40 * 16], lab[8 + 40];
    memset(img, 0, sizeof img);
    memset(lab, 0, sizeof lab);
    img[2] = 8, img[3] = 3, img[7] = 40, img[11] = 4, img[15] = 4;
    lab[2] = 8, lab[3] = 1, lab[7] = 40;
    for (int i = 0; i < 40; i++) {
        lab[8 + i] = (uint8_t)(i % 3);
        for (int k = 0; k < 16; k++)
            img[16 + i * 16 + k] = (uint8_t)(i * 13 + k * 7);
    }
    CHECK_OK(sl_nn_backend_open("cpu", 0, &be, why, sizeof why));
    CHECK_OK(sl_nn_data_parse_idx(img, sizeof img, lab, sizeof lab, "fuzz", &d, why, sizeof why));
    sl_nn_train_cfg_t cfg;
    sl_nn_train_cfg_init(&cfg);
    cfg.model = "cnn:2,k=3,bn,pool=1/fc:4";
    cfg.optimizer = SL_NN_OPT_ADAM;
    cfg.lr = 0.01f;
    cfg.epochs = 5;
    cfg.batch = 8;
    CHECK_OK(sl_nn_trainer_new(be, &cfg, d, NULL, &t, why, sizeof why));
    if (!t)
        goto done;
    sl_nn_epoch_t m;
    CHECK_OK(sl_nn_trainer_epoch(t, &m, why, sizeof why));
    uint8_t *good;
    size_t len;
    CHECK_OK(sl_nn_checkpoint_encode(t, &good, &len));
    size_t cap = len + 64;
    uint8_t *b = malloc(cap);
    int iters = 2000 * sl_test_seed_count(10), accepted = 0;
    for (int it = 0; it < iters; it++) {
        memcpy(b, good, len);
        size_t bl = len;
        int rounds = 1 + (int)sl_rng_below(&rng, 3);
        for (int r = 0; r < rounds; r++)
            mutate(b, &bl, cap, 16 + FIXED_HDR_GUESS);
        bool fix_crc = sl_rng_below(&rng, 2) && bl >= 4;
        if (fix_crc)
            put32le(b + bl - 4, sl_crc32(0, b, bl - 4));
        sl_err err = sl_nn_checkpoint_decode(t, b, bl, "fuzz.slck", why, sizeof why);
        if (err == SL_OK) {
            accepted++;
            /* Only a CRC-consistent file of the right size can load. */
            CHECK(bl == len);
            CHECK(sl_nn_trainer_epochs_done(t) <= cfg.epochs);
        } else {
            CHECK_MSG(strstr(why, "fuzz.slck") != NULL, "error text '%s' lacks the name", why);
        }
    }
    /* The untouched checkpoint still loads after all that. */
    CHECK_OK(sl_nn_checkpoint_decode(t, good, len, "good", why, sizeof why));
    CHECK_INT(sl_nn_trainer_epochs_done(t), 1);
    CHECK_MSG(accepted < iters / 2, "%d of %d mutants accepted", accepted, iters);
    free(b);
    free(good);
done:
    sl_nn_trainer_destroy(&t);
    sl_nn_data_destroy(&d);
    sl_nn_backend_destroy(&be);
}

static void test_idx_fuzz(void) {
    uint8_t img[16 + 30 * 9 + 64], lab[8 + 30 + 64];
    memset(img, 0, sizeof img);
    memset(lab, 0, sizeof lab);
    img[2] = 8, img[3] = 3, img[7] = 30, img[11] = 3, img[15] = 3;
    lab[2] = 8, lab[3] = 1, lab[7] = 30;
    for (int i = 0; i < 30; i++)
        lab[8 + i] = (uint8_t)(i % 10);
    const size_t il0 = 16 + 30 * 9, ll0 = 8 + 30;
    uint8_t bi[sizeof img], bl[sizeof lab];
    int iters = 2000 * sl_test_seed_count(10), ok = 0;
    for (int it = 0; it < iters; it++) {
        size_t il = il0, ll = ll0;
        memcpy(bi, img, sizeof img);
        memcpy(bl, lab, sizeof lab);
        if (sl_rng_below(&rng, 2))
            mutate(bi, &il, sizeof bi, 16);
        else
            mutate(bl, &ll, sizeof bl, 8);
        /* Exact-size inputs in fresh heap blocks, so ASan sees any overread. */
        uint8_t *hi = malloc(il ? il : 1), *hl = malloc(ll ? ll : 1);
        memcpy(hi, bi, il);
        memcpy(hl, bl, ll);
        sl_nn_data_t *d = NULL;
        char why[512] = "";
        sl_err err = sl_nn_data_parse_idx(hi, il, hl, ll, "fz", &d, why, sizeof why);
        if (err == SL_OK) {
            ok++;
            CHECK(d != NULL);
            if (d) {
                size_t per = (size_t)d->shape.height * d->shape.width;
                CHECK(16 + d->count * per == il);
                CHECK(8 + d->count == ll);
                for (size_t k = 0; k < d->count; k++)
                    CHECK(d->labels[k] >= 0 && d->labels[k] < d->shape.classes);
            }
        } else {
            CHECK(d == NULL);
            CHECK_MSG(strstr(why, "fz") != NULL, "error text '%s' lacks the name", why);
        }
        sl_nn_data_destroy(&d);
        free(hi);
        free(hl);
    }
    CHECK(ok > 0 && ok < iters);
}

int main(void) {
    CHECK_OK(sl_init());
    sl_rng_seed(&rng, 20261122);
    sl_test_run("checkpoint_fuzz", test_checkpoint_fuzz);
    sl_test_run("idx_fuzz", test_idx_fuzz);
    return sl_test_finish();
}
