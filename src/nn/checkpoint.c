/* Checkpoints: one versioned file with everything a run needs to continue
 * exactly where it stopped.
 *
 * Layout (integers little-endian, floats IEEE-754 binary32 little-endian):
 *
 *   off  size  field
 *     0     8  magic "SLNNCKPT"
 *     8     4  version (1)
 *    12     4  header length H (bytes from offset 16 to the payload)
 *    16     8  fingerprint (model spec, optimizer, input geometry, sizes, batch,
 *              seed, training and validation counts)
 *    24     4  epochs completed
 *    28     4  optimizer state vectors S (1 = momentum, 2 = Adam m and v)
 *    32     8  optimizer steps taken
 *    40    32  shuffle RNG state (4 x u64)
 *    72     8  seed
 *    80     8  P: floats in the flat parameter vector
 *    88     8  R: floats of running statistics (batch norm)
 *    96     4  L: spec length
 *   100     L  spec text
 *  16+H        payload: params[P], S x state[P], stats[R]
 *   end-4   4  CRC-32 (zlib) of every byte before it
 *
 * The loader is strict: exact length, magic, version, CRC, and a model
 * that matches the trainer's; nothing is applied unless all of it checks.
 * The encoder and decoder are pure; only the save/load wrappers touch the
 * file system, through the platform layer (sl_plat_write_file: a
 * temporary name, fsync, rename, fsync of the directory). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "starling/hash.h"
#include "starling/platform.h"
#include "base/le.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint.c assumes a little-endian host (floats are written as they lie in memory)"
#endif

#define MAGIC "SLNNCKPT"
#define VERSION 1
#define FIXED_HDR 84 /* header bytes before the spec text */
#define MAX_FILE_LEN ((size_t)1 << 36) /* a larger file is no checkpoint of ours */

/* Encodes the trainer's state (downloading it from the device). */
/* Fingerprint of the configuration a checkpoint must match: model,
 * optimizer kind, input geometry, batch size, seed and the split's sizes
 * (the learning rate, schedule and epoch count may change on resume). */
static uint64_t fingerprint(const sl_nn_trainer_t *t) {
    char buf[SL_NN_SPEC_MAX_LEN + 160];
    const sl_nn_model_t *m = t->model;
    int n = snprintf(buf, sizeof buf, "%s|%d|%d|%d|%d|%d|%zu|%zu|%d|%llu|%zu|%zu", m->spec.text,
                     (int)t->cfg.optimizer, m->input.channels, m->input.height, m->input.width,
                     m->input.classes, m->param_count, m->stat_count, t->cfg.batch,
                     (unsigned long long)t->cfg.seed, t->train_count, t->val_count);
    return sl_hash64(buf, (size_t)n, 0x534C434B);
}

sl_err sl_nn_checkpoint_encode(sl_nn_trainer_t *t, uint8_t **out, size_t *out_len) {
    sl_nn_model_t *m = t->model;
    const sl_nn_backend_ops_t *ops = t->be->ops;
    void *self = t->be->self;
    size_t L = strlen(m->spec.text), H = FIXED_HDR + L;
    uint32_t S = t->s2 ? 2 : 1;
    size_t P = m->param_count, R = m->stat_count;
    size_t len = 16 + H + (P * (1 + S) + R) * sizeof(float) + 4;
    uint8_t *b = sl_malloc(len);
    if (!b)
        return SL_ENOMEM;
    memcpy(b, MAGIC, 8);
    sl_put32le(b + 8, VERSION);
    sl_put32le(b + 12, (uint32_t)H);
    sl_put64le(b + 16, fingerprint(t));
    sl_put32le(b + 24, (uint32_t)t->epoch);
    sl_put32le(b + 28, S);
    sl_put64le(b + 32, t->step);
    for (int i = 0; i < 4; i++)
        sl_put64le(b + 40 + 8 * i, t->rng.s[i]);
    sl_put64le(b + 72, t->cfg.seed);
    sl_put64le(b + 80, P);
    sl_put64le(b + 88, R);
    sl_put32le(b + 96, (uint32_t)L);
    memcpy(b + 100, m->spec.text, L);
    uint8_t *p = b + 16 + H;
    sl_err err = ops->download(self, p, m->params, P * sizeof(float));
    p += P * sizeof(float);
    if (err == SL_OK)
        err = ops->download(self, p, t->s1, P * sizeof(float));
    p += P * sizeof(float);
    if (err == SL_OK && S == 2)
        err = ops->download(self, p, t->s2, P * sizeof(float));
    p += (S == 2) * P * sizeof(float);
    if (err == SL_OK && R)
        err = ops->download(self, p, m->stats, R * sizeof(float));
    p += R * sizeof(float);
    if (err != SL_OK) {
        sl_free(b);
        return err;
    }
    sl_put32le(p, sl_crc32(0, b, len - 4));
    *out = b;
    *out_len = len;
    return SL_OK;
}

sl_err sl_nn_checkpoint_decode(sl_nn_trainer_t *t, const uint8_t *b, size_t len,
                               const char *name, char *why, size_t why_len) {
    sl_nn_model_t *m = t->model;
    if (len < 16 + FIXED_HDR + 4)
        return sl_why(why, why_len, SL_ETRUNC, "%s: truncated: %zu bytes is too short",
                      name, len);
    if (memcmp(b, MAGIC, 8) != 0)
        return sl_why(why, why_len, SL_EPROTO, "%s: not a Starling checkpoint (bad magic)",
                      name);
    uint32_t version = sl_get32le(b + 8);
    if (version != VERSION)
        return sl_why(why, why_len, SL_EVERSION,
                      "%s: checkpoint version %u, this build reads version %d", name, version,
                      VERSION);
    uint32_t H = sl_get32le(b + 12);
    if (H < FIXED_HDR || H > FIXED_HDR + SL_NN_SPEC_MAX_LEN || 16 + (size_t)H + 4 > len)
        return sl_why(why, why_len, SL_EPROTO, "%s: header length %u is invalid", name, H);
    uint32_t S = sl_get32le(b + 28);
    uint64_t P = sl_get64le(b + 80), R = sl_get64le(b + 88);
    uint32_t L = sl_get32le(b + 96);
    if (S < 1 || S > 2 || L != H - FIXED_HDR || P > ((uint64_t)1 << 34) ||
        R > ((uint64_t)1 << 34))
        return sl_why(why, why_len, SL_EPROTO, "%s: header fields are inconsistent", name);
    uint64_t want = 16 + (uint64_t)H + (P * (1 + S) + R) * sizeof(float) + 4;
    if (want != len)
        return sl_why(why, why_len, len < want ? SL_ETRUNC : SL_EPROTO,
                      "%s: %s: header announces %llu bytes, file has %zu", name,
                      len < want ? "truncated" : "trailing bytes", (unsigned long long)want,
                      len);
    uint32_t crc = sl_get32le(b + len - 4);
    if (sl_crc32(0, b, len - 4) != crc)
        return sl_why(why, why_len, SL_ECORRUPT, "%s: CRC mismatch: the file is corrupt",
                      name);
    /* Intact; now does it belong to this run? */
    if (L != strlen(m->spec.text) || memcmp(b + 100, m->spec.text, L) != 0)
        return sl_why(why, why_len, SL_EINVAL,
                      "%s: checkpoint is for model '%.*s', this run trains '%s'", name,
                      (int)(L > 64 ? 64 : L), (const char *)(b + 100), m->spec.text);
    if (sl_get64le(b + 16) != fingerprint(t) || P != m->param_count ||
        R != m->stat_count || S != (t->s2 ? 2u : 1u))
        return sl_why(why, why_len, SL_EINVAL,
                      "%s: checkpoint was written with another optimizer, batch size, seed "
                      "or data split; start without --resume or use the same settings",
                      name);
    uint32_t epoch = sl_get32le(b + 24);
    if (epoch > (uint32_t)t->cfg.epochs)
        return sl_why(why, why_len, SL_EINVAL,
                      "%s: checkpoint is at epoch %u, beyond the %d epochs asked for", name,
                      epoch, t->cfg.epochs);
    sl_rng_t rng;
    for (int i = 0; i < 4; i++)
        rng.s[i] = sl_get64le(b + 40 + 8 * i);
    if (!(rng.s[0] | rng.s[1] | rng.s[2] | rng.s[3]))
        return sl_why(why, why_len, SL_EPROTO, "%s: RNG state is all zero", name);
    const sl_nn_backend_ops_t *ops = t->be->ops;
    void *self = t->be->self;
    const uint8_t *p = b + 16 + H;
    sl_err err = ops->upload(self, m->params, p, P * sizeof(float));
    p += P * sizeof(float);
    if (err == SL_OK)
        err = ops->upload(self, t->s1, p, P * sizeof(float));
    p += P * sizeof(float);
    if (err == SL_OK && S == 2)
        err = ops->upload(self, t->s2, p, P * sizeof(float));
    p += (S == 2) * P * sizeof(float);
    if (err == SL_OK && R)
        err = ops->upload(self, m->stats, p, R * sizeof(float));
    if (err != SL_OK)
        return sl_why(why, why_len, err, "%s: cannot restore to the device: %s", name,
                      sl_strerror(err));
    t->epoch = (int)epoch;
    t->step = sl_get64le(b + 32);
    t->rng = rng;
    return SL_OK;
}

sl_err sl_nn_checkpoint_save(sl_nn_trainer_t *t, const char *path, char *why, size_t why_len) {
    uint8_t *b = NULL;
    size_t len = 0;
    sl_err err = sl_nn_checkpoint_encode(t, &b, &len);
    if (err != SL_OK)
        return sl_why(why, why_len, err, "%s: cannot encode the checkpoint: %s", path,
                      sl_strerror(err));
    char dir[600];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (sl_plat_mkdirs(dir, 0755) != SL_OK) {
            sl_free(b);
            return sl_why(why, why_len, SL_EIO, "%s: cannot create the directory: %s", dir,
                          strerror(errno));
        }
    }
    err = sl_plat_write_file(path, b, len, 0644);
    sl_free(b);
    if (err != SL_OK)
        return sl_why(why, why_len, SL_EIO, "%s: cannot write the checkpoint: %s", path,
                      strerror(errno));
    return SL_OK;
}

sl_err sl_nn_checkpoint_load(sl_nn_trainer_t *t, const char *path, char *why, size_t why_len) {
    uint8_t *b = NULL;
    size_t len = 0;
    sl_err err = sl_plat_read_file(path, MAX_FILE_LEN, &b, &len);
    if (err == SL_ENOTFOUND)
        return sl_why(why, why_len, err, "%s: %s", path, strerror(ENOENT));
    if (err == SL_ETOOBIG)
        return sl_why(why, why_len, SL_EIO, "%s: not a regular file of sane size", path);
    if (err == SL_ENOMEM)
        return sl_why(why, why_len, err, "%s: out of memory reading it", path);
    if (err != SL_OK)
        return sl_why(why, why_len, SL_EIO, "%s: %s", path, strerror(errno));
    err = sl_nn_checkpoint_decode(t, b, len, path, why, why_len);
    sl_free(b);
    return err;
}
