/* Export of trained weights as a NumPy .npz archive: an uncompressed
 * ("stored") zip whose members are .npy files (format version 1.0,
 * little-endian float32, C order). `numpy.load(path)` reads it with no
 * pickle. Members: one per tensor (names and layouts in
 * docs/training.md: `l1.conv.weight` [Cout, Cin, k, k], `l2.dense.weight`
 * [in, out] so that y = x @ W + b, `l1.conv.bias`, `l1.bn.weight`, ...,
 * `out.dense.weight`, `out.dense.bias`), plus `spec` (the model spec as a
 * 0-d unicode array) and `input` (int32 [C, H, W, classes]). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "starling/hash.h"
#include "starling/platform.h"
#include "base/le.h"

#define MAX_MEMBERS 256

/* One member already written, for the central directory. */
typedef struct {
    char name[80];    /* member file name ("l1.conv.weight.npy") */
    uint32_t crc;     /* CRC-32 of its bytes */
    uint32_t size;    /* its length */
    uint32_t offset;  /* offset of its local header */
} member_t;

typedef struct {
    uint8_t *data;                /* the archive being built (written whole at the end) */
    size_t cap;                   /* bytes allocated at data */
    const char *path;             /* its name, for messages */
    member_t members[MAX_MEMBERS]; /* written so far */
    int count;                    /* members used */
    uint32_t offset;              /* bytes written */
    const float *params;          /* host copy of the flat parameters */
    const float *stats;           /* host copy of the statistics */
    bool failed;                  /* out of memory growing data */
} npz_t;

static void out(npz_t *z, const void *p, size_t n) {
    if (!z->failed && (size_t)z->offset + n > z->cap) {
        size_t cap = z->cap ? z->cap : 1 << 16;
        while (cap < (size_t)z->offset + n)
            cap *= 2;
        uint8_t *d = sl_realloc(z->data, cap);
        if (d) {
            z->data = d;
            z->cap = cap;
        } else {
            z->failed = true;
        }
    }
    if (!z->failed)
        memcpy(z->data + z->offset, p, n);
    z->offset += (uint32_t)n;
}

/* Writes one .npy member: header dict then `data`. */
static sl_err member(npz_t *z, const char *name, const char *descr, const int *shape, int ndim,
                     const void *data, size_t data_len) {
    if (z->count >= MAX_MEMBERS)
        return SL_ETOOBIG;
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr);
    for (int i = 0; i < ndim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%d,%s", shape[i],
                      i + 1 < ndim ? " " : "");
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    size_t pre = 10 + (size_t)n + 1; /* magic(6) ver(2) hlen(2) dict '\n' */
    size_t pad = (64 - pre % 64) % 64;
    size_t hlen = (size_t)n + pad + 1;
    uint8_t head[10 + 256 + 64];
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    sl_put16le(head + 8, (uint16_t)hlen);
    memcpy(head + 10, dict, (size_t)n);
    memset(head + 10 + n, ' ', pad);
    head[10 + n + pad] = '\n';
    size_t head_len = 10 + hlen;
    member_t *m = &z->members[z->count++];
    snprintf(m->name, sizeof m->name, "%s.npy", name);
    m->crc = sl_crc32(sl_crc32(0, head, head_len), data, data_len);
    m->size = (uint32_t)(head_len + data_len);
    m->offset = z->offset;
    uint16_t name_len = (uint16_t)strlen(m->name);
    uint8_t lh[30];
    sl_put32le(lh, 0x04034b50);
    sl_put16le(lh + 4, 20);     /* version needed */
    sl_put16le(lh + 6, 0);      /* flags */
    sl_put16le(lh + 8, 0);      /* stored */
    sl_put16le(lh + 10, 0);     /* time */
    sl_put16le(lh + 12, 0x21);  /* date: 1980-01-01 */
    sl_put32le(lh + 14, m->crc);
    sl_put32le(lh + 18, m->size);
    sl_put32le(lh + 22, m->size);
    sl_put16le(lh + 26, name_len);
    sl_put16le(lh + 28, 0);
    out(z, lh, sizeof lh);
    out(z, m->name, name_len);
    out(z, head, head_len);
    out(z, data, data_len);
    return SL_OK;
}

static sl_err tensor_cb(void *ctx, const char *name, bool is_stat, size_t offset,
                        const int *shape, int ndim) {
    npz_t *z = ctx;
    size_t count = 1;
    for (int i = 0; i < ndim; i++)
        count *= (size_t)shape[i];
    const float *src = (is_stat ? z->stats : z->params) + offset;
    return member(z, name, "<f4", shape, ndim, src, count * sizeof(float));
}

sl_err sl_nn_export_npz(sl_nn_trainer_t *t, const char *path, char *why, size_t why_len) {
    sl_nn_model_t *m = t->model;
    float *params = sl_malloc(m->param_count * sizeof(float) + 4);
    float *stats = sl_malloc(m->stat_count * sizeof(float) + 4);
    npz_t *z = sl_calloc(1, sizeof *z);
    uint32_t *spec_u = NULL;
    sl_err err = SL_ENOMEM;
    if (!params || !stats || !z)
        goto fail;
    const sl_nn_backend_ops_t *ops = t->be->ops;
    err = ops->download(t->be->self, params, m->params, m->param_count * sizeof(float));
    if (err == SL_OK && m->stat_count)
        err = ops->download(t->be->self, stats, m->stats, m->stat_count * sizeof(float));
    if (err != SL_OK)
        goto fail;
    z->path = path;
    z->params = params;
    z->stats = stats;
    /* spec: 0-d '<U{n}' array (UCS-4 little-endian). */
    size_t sl = strlen(m->spec.text);
    err = SL_ENOMEM;
    spec_u = sl_malloc((sl ? sl : 1) * 4);
    if (!spec_u)
        goto fail;
    for (size_t i = 0; i < sl; i++)
        sl_put32le((uint8_t *)&spec_u[i], (uint8_t)m->spec.text[i]);
    char descr[24]; /* "<U" and a size_t's 20 digits */
    snprintf(descr, sizeof descr, "<U%zu", sl ? sl : 1);
    if (!sl)
        spec_u[0] = 0;
    err = member(z, "spec", descr, NULL, 0, spec_u, (sl ? sl : 1) * 4);
    int32_t input[4];
    int ishape[1] = {4};
    int32_t iv[4] = {m->input.channels, m->input.height, m->input.width, m->input.classes};
    for (int i = 0; i < 4; i++)
        sl_put32le((uint8_t *)&input[i], (uint32_t)iv[i]);
    if (err == SL_OK)
        err = member(z, "input", "<i4", ishape, 1, input, sizeof input);
    if (err == SL_OK)
        err = sl_nn_model_tensors(m, tensor_cb, z);
    if (err != SL_OK)
        goto fail;
    uint32_t cd_start = z->offset;
    for (int i = 0; i < z->count; i++) {
        member_t *mb = &z->members[i];
        uint16_t name_len = (uint16_t)strlen(mb->name);
        uint8_t ch[46];
        memset(ch, 0, sizeof ch);
        sl_put32le(ch, 0x02014b50);
        sl_put16le(ch + 4, 20);
        sl_put16le(ch + 6, 20);
        sl_put16le(ch + 12, 0);
        sl_put16le(ch + 14, 0x21);
        sl_put32le(ch + 16, mb->crc);
        sl_put32le(ch + 20, mb->size);
        sl_put32le(ch + 24, mb->size);
        sl_put16le(ch + 28, name_len);
        sl_put32le(ch + 42, mb->offset);
        out(z, ch, sizeof ch);
        out(z, mb->name, name_len);
    }
    uint8_t end[22];
    memset(end, 0, sizeof end);
    sl_put32le(end, 0x06054b50);
    sl_put16le(end + 8, (uint16_t)z->count);
    sl_put16le(end + 10, (uint16_t)z->count);
    sl_put32le(end + 12, z->offset - cd_start);
    sl_put32le(end + 16, cd_start);
    out(z, end, sizeof end);
    err = SL_ENOMEM;
    if (z->failed)
        goto fail;
    /* the whole archive at once: a reader never sees half of one */
    if (sl_plat_write_file(path, z->data, z->offset, 0644) != SL_OK) {
        err = sl_why(why, why_len, SL_EIO, "%s: cannot write: %s", path, strerror(errno));
        goto fail;
    }
    err = SL_OK;
fail:
    if (z)
        sl_free(z->data);
    if (err == SL_ENOMEM)
        sl_why(why, why_len, err, "%s: out of memory exporting", path);
    sl_free(spec_u);
    sl_free(params);
    sl_free(stats);
    sl_free(z);
    return err;
}
