/* Model spec grammar (docs/training.md has the user's version):
 *
 *   spec    = "linear" / stage *("/" stage)
 *   stage   = family ":" item *("," item)
 *   family  = "mlp" / "fc" / "dense" / "cnn" / "conv"
 *   item    = units / option
 *   units   = 1*DIGIT                      ; 1..65536
 *   option  = "bn" / "dropout=" number / "k=" 1*DIGIT / "pad=" (1*DIGIT / "same")
 *           / "stride=" 1*DIGIT / "pool=" 1*DIGIT
 *
 * Options apply to every layer of their stage wherever they appear in it.
 * Conv stages (cnn/conv) come before dense stages (mlp/fc/dense); conv
 * defaults: k=5, pad=0, stride=1, pool=2. The output layer (dense, one
 * unit per class) is implicit. Examples: `mlp:256,128`,
 * `cnn:32,64/fc:128,dropout=0.5`, `cnn:16,32,k=3,pad=same,bn`. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

/* Parses a decimal integer in [lo, hi] filling the whole token. */
static bool parse_int(const char *s, size_t len, long lo, long hi, long *out) {
    if (len == 0 || len > 9)
        return false;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool parse_prob(const char *s, size_t len, float *out) {
    char buf[32];
    if (len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    for (size_t i = 0; i < len; i++)
        if (!isdigit((unsigned char)buf[i]) && buf[i] != '.')
            return false;
    char *end;
    double v = strtod(buf, &end);
    if (*end || v < 0.0 || v > 0.95)
        return false;
    *out = (float)v;
    return true;
}

/* Options of one stage, applied to its layers once the stage is read. */
typedef struct {
    int kernel, stride, pad, pool; /* conv window (-1 pad = same) */
    bool bn;                       /* batch norm */
    float dropout;                 /* drop probability */
} stage_opts_t;

static sl_err parse_stage(const char *s, size_t len, bool *seen_dense, sl_nn_spec_t *out,
                          char *why, size_t why_len) {
    const char *colon = memchr(s, ':', len);
    if (!colon)
        return sl_why(why, why_len, SL_EINVAL,
                      "model spec: stage '%.*s' lacks 'family:' (mlp:, fc:, cnn:)",
                      (int)len, s);
    size_t flen = (size_t)(colon - s);
    bool conv;
    if ((flen == 3 && !memcmp(s, "mlp", 3)) || (flen == 2 && !memcmp(s, "fc", 2)) ||
        (flen == 5 && !memcmp(s, "dense", 5)))
        conv = false;
    else if ((flen == 3 && !memcmp(s, "cnn", 3)) || (flen == 4 && !memcmp(s, "conv", 4)))
        conv = true;
    else
        return sl_why(why, why_len, SL_EINVAL,
                      "model spec: unknown family '%.*s' (use mlp, fc, dense, cnn or conv)",
                      (int)flen, s);
    if (conv && *seen_dense)
        return sl_why(why, why_len, SL_EINVAL,
                      "model spec: conv stage '%.*s' after a dense stage; put cnn: first",
                      (int)len, s);
    if (!conv)
        *seen_dense = true;
    stage_opts_t o = {.kernel = 5, .stride = 1, .pad = 0, .pool = conv ? 2 : 1};
    int first = out->count, units = 0;
    const char *p = colon + 1, *end = s + len;
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *tend = comma ? comma : end;
        size_t tl = (size_t)(tend - p);
        long v;
        if (tl == 0)
            return sl_why(why, why_len, SL_EINVAL,
                          "model spec: empty item in stage '%.*s'", (int)len, s);
        if (isdigit((unsigned char)p[0])) {
            if (!parse_int(p, tl, 1, 65536, &v))
                return sl_why(why, why_len, SL_EINVAL,
                              "model spec: layer width '%.*s' is not an integer in 1..65536",
                              (int)tl, p);
            if (out->count >= SL_NN_SPEC_MAX_LAYERS)
                return sl_why(why, why_len, SL_ETOOBIG,
                              "model spec: more than %d layers", SL_NN_SPEC_MAX_LAYERS);
            sl_nn_spec_layer_t *l = &out->layers[out->count++];
            memset(l, 0, sizeof *l);
            l->kind = conv ? SL_NN_SPEC_CONV : SL_NN_SPEC_DENSE;
            l->units = (int)v;
            units++;
        } else if (tl == 2 && !memcmp(p, "bn", 2)) {
            o.bn = true;
        } else if (tl > 8 && !memcmp(p, "dropout=", 8)) {
            if (!parse_prob(p + 8, tl - 8, &o.dropout))
                return sl_why(why, why_len, SL_EINVAL,
                              "model spec: '%.*s': dropout must be a number in [0, 0.95]",
                              (int)tl, p);
        } else if (conv && tl > 2 && !memcmp(p, "k=", 2)) {
            if (!parse_int(p + 2, tl - 2, 1, 15, &v))
                return sl_why(why, why_len, SL_EINVAL,
                              "model spec: '%.*s': kernel size must be 1..15", (int)tl, p);
            o.kernel = (int)v;
        } else if (conv && tl > 7 && !memcmp(p, "stride=", 7)) {
            if (!parse_int(p + 7, tl - 7, 1, 8, &v))
                return sl_why(why, why_len, SL_EINVAL,
                              "model spec: '%.*s': stride must be 1..8", (int)tl, p);
            o.stride = (int)v;
        } else if (conv && tl > 4 && !memcmp(p, "pad=", 4)) {
            if (tl == 8 && !memcmp(p + 4, "same", 4))
                o.pad = -1;
            else if (parse_int(p + 4, tl - 4, 0, 7, &v))
                o.pad = (int)v;
            else
                return sl_why(why, why_len, SL_EINVAL,
                              "model spec: '%.*s': pad must be 0..7 or same", (int)tl, p);
        } else if (conv && tl > 5 && !memcmp(p, "pool=", 5)) {
            if (!parse_int(p + 5, tl - 5, 1, 8, &v))
                return sl_why(why, why_len, SL_EINVAL,
                              "model spec: '%.*s': pool must be 1..8 (1 = none)", (int)tl, p);
            o.pool = (int)v;
        } else {
            return sl_why(why, why_len, SL_EINVAL,
                          "model spec: unknown item '%.*s' in a %s stage", (int)tl, p,
                          conv ? "conv" : "dense");
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    if (units == 0)
        return sl_why(why, why_len, SL_EINVAL,
                      "model spec: stage '%.*s' names no layer width", (int)len, s);
    if (o.pad == -1 && o.stride != 1)
        return sl_why(why, why_len, SL_EINVAL,
                      "model spec: pad=same needs stride=1 in '%.*s'", (int)len, s);
    if (o.pad == -1 && o.kernel % 2 == 0)
        return sl_why(why, why_len, SL_EINVAL,
                      "model spec: pad=same needs an odd kernel in '%.*s'", (int)len, s);
    for (int i = first; i < out->count; i++) {
        sl_nn_spec_layer_t *l = &out->layers[i];
        l->kernel = conv ? o.kernel : 0;
        l->stride = conv ? o.stride : 0;
        l->pad = conv ? (o.pad == -1 ? o.kernel / 2 : o.pad) : 0;
        l->pool = conv ? o.pool : 1;
        l->batchnorm = o.bn;
        l->dropout = o.dropout;
    }
    return SL_OK;
}

sl_err sl_nn_spec_parse(const char *text, sl_nn_spec_t *out, char *why, size_t why_len) {
    memset(out, 0, sizeof *out);
    if (!text)
        return sl_why(why, why_len, SL_EINVAL, "model spec: missing");
    size_t len = strlen(text);
    if (len == 0)
        return sl_why(why, why_len, SL_EINVAL, "model spec: empty (try mlp:256,128)");
    if (len > SL_NN_SPEC_MAX_LEN)
        return sl_why(why, why_len, SL_ETOOBIG, "model spec: longer than %d characters",
                      SL_NN_SPEC_MAX_LEN);
    for (size_t i = 0; i < len; i++)
        if (isspace((unsigned char)text[i]) || !isprint((unsigned char)text[i]))
            return sl_why(why, why_len, SL_EINVAL,
                          "model spec: unexpected character at position %zu", i + 1);
    memcpy(out->text, text, len + 1);
    if (!strcmp(text, "linear"))
        return SL_OK;
    bool seen_dense = false;
    const char *p = text, *end = text + len;
    for (;;) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        const char *send = slash ? slash : end;
        if (send == p)
            return sl_why(why, why_len, SL_EINVAL, "model spec: empty stage in '%s'", text);
        sl_err err = parse_stage(p, (size_t)(send - p), &seen_dense, out, why, why_len);
        if (err != SL_OK)
            return err;
        if (!slash)
            break;
        p = slash + 1;
    }
    return SL_OK;
}
