/* Search spaces: sampling, grids, mutation and crossover of configurations,
 * and their canonical encoding. The encoding is what trial ids hash, so it
 * is byte-for-byte the same on every machine: keys in name order, reals
 * rounded to their parameter's significant digits and printed in the
 * shortest form that reads back to the same double. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/hash.h"
#include "starling/study.h"

/* Rounds to `digits` significant digits through the decimal text, so
 * every machine gets the same double. */
static double round_digits(double v, int digits) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.*g", digits, v);
    return strtod(buf, NULL);
}

void sl_number_text(double v, char *out, size_t cap) {
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(out, cap, "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

static const int *arch_vals(const sl_param_t *p, int dim) { return p->arch_values[dim]; }

/* Whether an arch dimension matters for a family (mlp has no kernel or fc). */
static bool arch_dim_used(int family, int dim) {
    if (dim == SL_ARCH_FAMILY || dim == SL_ARCH_LAYERS)
        return true;
    return family == 1 ? dim != SL_ARCH_UNITS : dim == SL_ARCH_UNITS;
}

void sl_space_canon(const sl_study_spec_t *spec, sl_config_t *cfg) {
    for (int i = 0; i < spec->param_count; i++) {
        const sl_param_t *p = &spec->params[i];
        sl_value_t *v = &cfg->values[i];
        switch (p->kind) {
        case SL_PARAM_REAL: {
            double x = isfinite(v->real) ? v->real : p->low;
            x = round_digits(x, p->digits);
            if (x < p->low)
                x = p->low;
            if (x > p->high)
                x = p->high;
            memset(v, 0, sizeof *v);
            v->real = x;
            break;
        }
        case SL_PARAM_INT: {
            int64_t x = v->integer;
            if (x < (int64_t)p->low)
                x = (int64_t)p->low;
            if (x > (int64_t)p->high)
                x = (int64_t)p->high;
            memset(v, 0, sizeof *v);
            v->integer = x;
            break;
        }
        case SL_PARAM_CAT: {
            int c = v->choice;
            if (c < 0 || c >= p->choice_count)
                c = 0;
            memset(v, 0, sizeof *v);
            v->choice = c;
            break;
        }
        case SL_PARAM_ARCH: {
            int a[SL_ARCH_DIMS];
            for (int d = 0; d < SL_ARCH_DIMS; d++) {
                a[d] = v->arch[d];
                if (a[d] < 0 || a[d] >= p->arch_count[d])
                    a[d] = 0;
            }
            int fam = arch_vals(p, SL_ARCH_FAMILY)[a[SL_ARCH_FAMILY]];
            for (int d = 0; d < SL_ARCH_DIMS; d++)
                if (!arch_dim_used(fam, d))
                    a[d] = 0;
            memset(v, 0, sizeof *v);
            memcpy(v->arch, a, sizeof a);
            break;
        }
        }
    }
    for (int i = spec->param_count; i < SL_STUDY_MAX_PARAMS; i++)
        memset(&cfg->values[i], 0, sizeof cfg->values[i]);
}

bool sl_space_equal(const sl_study_spec_t *spec, const sl_config_t *a, const sl_config_t *b) {
    for (int i = 0; i < spec->param_count; i++) {
        const sl_value_t *x = &a->values[i], *y = &b->values[i];
        switch (spec->params[i].kind) {
        case SL_PARAM_REAL:
            if (x->real != y->real)
                return false;
            break;
        case SL_PARAM_INT:
            if (x->integer != y->integer)
                return false;
            break;
        case SL_PARAM_CAT:
            if (x->choice != y->choice)
                return false;
            break;
        case SL_PARAM_ARCH:
            if (memcmp(x->arch, y->arch, sizeof x->arch) != 0)
                return false;
            break;
        }
    }
    return true;
}

static double sample_real(const sl_param_t *p, sl_rng_t *rng) {
    double u = sl_rng_double(rng);
    if (p->log)
        return exp(log(p->low) + u * (log(p->high) - log(p->low)));
    return p->low + u * (p->high - p->low);
}

void sl_space_sample(const sl_study_spec_t *spec, sl_rng_t *rng, sl_config_t *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < spec->param_count; i++) {
        const sl_param_t *p = &spec->params[i];
        sl_value_t *v = &out->values[i];
        switch (p->kind) {
        case SL_PARAM_REAL:
            v->real = sample_real(p, rng);
            break;
        case SL_PARAM_INT:
            if (p->log) {
                double x = exp(log(p->low) +
                               sl_rng_double(rng) * (log(p->high + 1) - log(p->low)));
                v->integer = (int64_t)floor(x);
            } else {
                v->integer = (int64_t)p->low +
                             (int64_t)sl_rng_below(rng, (uint64_t)(p->high - p->low) + 1);
            }
            break;
        case SL_PARAM_CAT:
            v->choice = (int)sl_rng_below(rng, (uint64_t)p->choice_count);
            break;
        case SL_PARAM_ARCH:
            for (int d = 0; d < SL_ARCH_DIMS; d++)
                v->arch[d] = (int)sl_rng_below(rng, (uint64_t)p->arch_count[d]);
            break;
        }
    }
    sl_space_canon(spec, out);
}

/* The index of the parameter called `name`, or -1 (the spec's parser
 * checks placeholders with it; rendering fills them). */
int sl_study_spec_param(const sl_study_spec_t *spec, const char *name) {
    for (int i = 0; i < spec->param_count; i++)
        if (strcmp(spec->params[i].name, name) == 0)
            return i;
    return -1;
}

/* ---- text ---- */

sl_err sl_space_arch_spec(const sl_param_t *p, const int arch[SL_ARCH_DIMS], char *out,
                          size_t out_cap) {
    int fam = p->arch_values[SL_ARCH_FAMILY][arch[SL_ARCH_FAMILY]];
    int layers = p->arch_values[SL_ARCH_LAYERS][arch[SL_ARCH_LAYERS]];
    size_t n = 0;
    int w;
#define PUT(...)                                                                               \
    do {                                                                                       \
        w = snprintf(out + n, n < out_cap ? out_cap - n : 0, __VA_ARGS__);                     \
        if (w < 0 || (size_t)w >= (n < out_cap ? out_cap - n : 0))                             \
            return SL_ETOOBIG;                                                                 \
        n += (size_t)w;                                                                        \
    } while (0)
    if (fam == 0) {
        int width = p->arch_values[SL_ARCH_UNITS][arch[SL_ARCH_UNITS]];
        PUT("mlp:");
        for (int l = 0; l < layers; l++)
            PUT("%s%d", l ? "," : "", width);
    } else {
        int kernel = p->arch_values[SL_ARCH_KERNEL][arch[SL_ARCH_KERNEL]];
        int fc = p->arch_values[SL_ARCH_FC][arch[SL_ARCH_FC]];
        int width = p->arch_values[SL_ARCH_CHANNELS][arch[SL_ARCH_CHANNELS]];
        PUT("cnn:");
        /* channels double with each conv layer (each halves the image) */
        for (int l = 0, c = width; l < layers; l++, c = c * 2 > 4096 ? 4096 : c * 2)
            PUT("%s%d", l ? "," : "", c);
        PUT(",k=%d,pad=same", kernel);
        if (fc > 0)
            PUT("/fc:%d", fc);
    }
#undef PUT
    return SL_OK;
}

sl_err sl_space_value_text(const sl_study_spec_t *spec, int param, const sl_value_t *v,
                           char *out, size_t out_cap) {
    const sl_param_t *p = &spec->params[param];
    int w = 0;
    switch (p->kind) {
    case SL_PARAM_REAL: {
        char buf[40];
        sl_number_text(v->real, buf, sizeof buf);
        w = snprintf(out, out_cap, "%s", buf);
        break;
    }
    case SL_PARAM_INT:
        w = snprintf(out, out_cap, "%lld", (long long)v->integer);
        break;
    case SL_PARAM_CAT:
        w = snprintf(out, out_cap, "%s", p->choices[v->choice]);
        break;
    case SL_PARAM_ARCH:
        return sl_space_arch_spec(p, v->arch, out, out_cap);
    }
    return w < 0 || (size_t)w >= out_cap ? SL_ETOOBIG : SL_OK;
}

sl_err sl_space_encode(const sl_study_spec_t *spec, const sl_config_t *cfg, char *out,
                       size_t out_cap, size_t *out_len) {
    size_t n = 0;
    char val[SL_STUDY_TEMPLATE_MAX];
    if (out_cap < 3)
        return SL_ETOOBIG;
    out[n++] = '{';
    for (int i = 0; i < spec->param_count; i++) {
        const sl_param_t *p = &spec->params[i];
        sl_err err = sl_space_value_text(spec, i, &cfg->values[i], val, sizeof val);
        if (err)
            return err;
        bool quote = p->kind == SL_PARAM_ARCH ||
                     (p->kind == SL_PARAM_CAT && !p->choice_is_number[cfg->values[i].choice]);
        int w = snprintf(out + n, out_cap - n, "%s\"%s\":%s%s%s", i ? "," : "", p->name,
                         quote ? "\"" : "", val, quote ? "\"" : "");
        if (w < 0 || (size_t)w >= out_cap - n)
            return SL_ETOOBIG;
        n += (size_t)w;
    }
    if (n + 2 > out_cap)
        return SL_ETOOBIG;
    out[n++] = '}';
    out[n] = '\0';
    if (out_len)
        *out_len = n;
    return SL_OK;
}

/* Finds the arch value whose rendering is `text` (dimensions the family
 * ignores stay 0). */
static bool arch_from_text(const sl_param_t *p, const char *text, int out[SL_ARCH_DIMS]) {
    char buf[SL_STUDY_TEMPLATE_MAX];
    int a[SL_ARCH_DIMS] = {0}, lim[SL_ARCH_DIMS];
    for (a[0] = 0; a[0] < p->arch_count[0]; a[0]++) {
        int fam = p->arch_values[0][a[0]];
        for (int d = 1; d < SL_ARCH_DIMS; d++)
            lim[d] = arch_dim_used(fam, d) ? p->arch_count[d] : 1;
        for (a[1] = 0; a[1] < lim[1]; a[1]++)
            for (a[2] = 0; a[2] < lim[2]; a[2]++)
                for (a[3] = 0; a[3] < lim[3]; a[3]++)
                    for (a[4] = 0; a[4] < lim[4]; a[4]++)
                        for (a[5] = 0; a[5] < lim[5]; a[5]++)
                            if (sl_space_arch_spec(p, a, buf, sizeof buf) == SL_OK &&
                                strcmp(buf, text) == 0) {
                                memcpy(out, a, sizeof a);
                                return true;
                            }
    }
    return false;
}

sl_err sl_space_decode(const sl_study_spec_t *spec, const char *json, size_t len,
                       sl_config_t *out, char *why, size_t why_len) {
    sl_err err = SL_EPROTO;
    if (len > SL_CONFIG_JSON_MAX) {
        snprintf(why, why_len, "config: over %d bytes", SL_CONFIG_JSON_MAX);
        return SL_ETOOBIG;
    }
    cJSON *root = cJSON_ParseWithLength(json, len);
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(root)) {
        snprintf(why, why_len, "config: not a JSON object");
        goto fail;
    }
    if (cJSON_GetArraySize(root) != spec->param_count) {
        snprintf(why, why_len, "config: has %d keys, the space has %d parameters",
                 cJSON_GetArraySize(root), spec->param_count);
        goto fail;
    }
    for (int i = 0; i < spec->param_count; i++) {
        const sl_param_t *p = &spec->params[i];
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, p->name);
        sl_value_t *x = &out->values[i];
        if (!v) {
            snprintf(why, why_len, "config.%s: missing", p->name);
            goto fail;
        }
        switch (p->kind) {
        case SL_PARAM_REAL:
            if (!cJSON_IsNumber(v) || !(v->valuedouble >= p->low && v->valuedouble <= p->high)) {
                snprintf(why, why_len, "config.%s: must be a number in [%g, %g]", p->name,
                         p->low, p->high);
                goto fail;
            }
            x->real = v->valuedouble;
            break;
        case SL_PARAM_INT:
            if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
                v->valuedouble < p->low || v->valuedouble > p->high) {
                snprintf(why, why_len, "config.%s: must be an integer in [%g, %g]", p->name,
                         p->low, p->high);
                goto fail;
            }
            x->integer = (int64_t)v->valuedouble;
            break;
        case SL_PARAM_CAT: {
            char txt[64];
            const char *s = NULL;
            if (cJSON_IsString(v))
                s = v->valuestring;
            else if (cJSON_IsNumber(v))
                sl_number_text(v->valuedouble, txt, sizeof txt), s = txt;
            else if (cJSON_IsBool(v))
                s = cJSON_IsTrue(v) ? "true" : "false";
            x->choice = -1;
            for (int c = 0; s && c < p->choice_count; c++)
                if (strcmp(p->choices[c], s) == 0 &&
                    p->choice_is_number[c] == !cJSON_IsString(v))
                    x->choice = c;
            if (x->choice < 0) {
                snprintf(why, why_len, "config.%s: not one of its values", p->name);
                goto fail;
            }
            break;
        }
        case SL_PARAM_ARCH:
            if (!cJSON_IsString(v) || !arch_from_text(p, v->valuestring, x->arch)) {
                snprintf(why, why_len, "config.%s: not an architecture of the space", p->name);
                goto fail;
            }
            break;
        }
    }
    sl_space_canon(spec, out);
    err = SL_OK;
fail:
    cJSON_Delete(root);
    return err;
}

sl_err sl_space_render(const sl_study_spec_t *spec, const sl_config_t *cfg, const char *trial_id,
                       const char *tmpl, char *out, size_t out_cap, char *why, size_t why_len) {
    size_t n = 0;
    char val[SL_STUDY_TEMPLATE_MAX];
    for (const char *s = tmpl; *s; s++) {
        const char *piece = NULL;
        size_t plen = 1;
        if ((s[0] == '{' && s[1] == '{') || (s[0] == '}' && s[1] == '}')) {
            piece = s;
            s++;
        } else if (s[0] == '{') {
            const char *end = strchr(s, '}');
            if (!end) {
                snprintf(why, why_len, "unmatched '{' in \"%s\"", tmpl);
                return SL_EINVAL;
            }
            char name[SL_STUDY_NAME_MAX + 1];
            size_t nl = (size_t)(end - s - 1);
            if (nl == 0 || nl > SL_STUDY_NAME_MAX) {
                snprintf(why, why_len, "bad placeholder in \"%s\"", tmpl);
                return SL_EINVAL;
            }
            memcpy(name, s + 1, nl);
            name[nl] = '\0';
            int idx = sl_study_spec_param(spec, name);
            if (idx >= 0) {
                sl_err err = sl_space_value_text(spec, idx, &cfg->values[idx], val, sizeof val);
                if (err)
                    return err;
                piece = val;
            } else if (strcmp(name, "trial") == 0 && trial_id) {
                piece = trial_id;
            } else {
                snprintf(why, why_len, "unknown placeholder {%s}", name);
                return SL_EINVAL;
            }
            plen = strlen(piece);
            s = end;
        } else {
            piece = s;
        }
        if (n + plen + 1 > out_cap) {
            snprintf(why, why_len, "rendered template over %zu characters", out_cap - 1);
            return SL_ETOOBIG;
        }
        memcpy(out + n, piece, plen);
        n += plen;
    }
    out[n] = '\0';
    return SL_OK;
}

void sl_trial_id(const char *study_id, int bracket, const char *config_json, size_t len,
                 char out[SL_TRIAL_ID_LEN + 1]) {
    char head[64];
    int hn = snprintf(head, sizeof head, "%s|%d|", study_id, bracket);
    uint64_t h = sl_hash64(head, (size_t)hn, 0x7472);
    h = sl_hash64(config_json, len, h);
    snprintf(out, SL_TRIAL_ID_LEN + 1, "%016llx", (unsigned long long)h);
}

/* ---- grids ---- */

/* The grid values of a real/int parameter (distinct, ascending). */
static int grid_values(const sl_param_t *p, double *vals) {
    int g = p->grid_points, n = 0;
    for (int i = 0; i < g; i++) {
        double t = g == 1 ? 0.5 : (double)i / (g - 1), x;
        if (p->log)
            x = exp(log(p->low) + t * (log(p->high) - log(p->low)));
        else
            x = p->low + t * (p->high - p->low);
        if (p->kind == SL_PARAM_INT)
            x = floor(x + 0.5);
        else
            x = round_digits(x, p->digits);
        if (x < p->low)
            x = p->low;
        if (x > p->high)
            x = p->high;
        if (n == 0 || vals[n - 1] != x)
            vals[n++] = x;
    }
    return n;
}

/* Distinct canonical architectures, in order: per family, layers, width,
 * kernel, fc (the last fastest). */
static uint64_t arch_family_size(const sl_param_t *p, int f) {
    int fam = p->arch_values[SL_ARCH_FAMILY][f];
    uint64_t n = 1;
    for (int d = 1; d < SL_ARCH_DIMS; d++)
        if (arch_dim_used(fam, d))
            n *= (uint64_t)p->arch_count[d];
    return n;
}

static uint64_t param_grid_size(const sl_param_t *p) {
    double vals[1000];
    switch (p->kind) {
    case SL_PARAM_REAL:
    case SL_PARAM_INT:
        return (uint64_t)grid_values(p, vals);
    case SL_PARAM_CAT:
        return (uint64_t)p->choice_count;
    case SL_PARAM_ARCH: {
        uint64_t n = 0;
        for (int f = 0; f < p->arch_count[SL_ARCH_FAMILY]; f++)
            n += arch_family_size(p, f);
        return n;
    }
    }
    return 1;
}

uint64_t sl_space_grid_size(const sl_study_spec_t *spec) {
    uint64_t n = 1;
    for (int i = 0; i < spec->param_count; i++) {
        uint64_t k = param_grid_size(&spec->params[i]);
        if (k == 0 || n > UINT64_MAX / k)
            return 0;
        n *= k;
    }
    return n;
}

sl_err sl_space_grid_point(const sl_study_spec_t *spec, uint64_t n, sl_config_t *out) {
    uint64_t total = sl_space_grid_size(spec);
    if (total == 0 || n >= total)
        return SL_ENOTFOUND;
    memset(out, 0, sizeof *out);
    double vals[1000];
    for (int i = spec->param_count - 1; i >= 0; i--) {
        const sl_param_t *p = &spec->params[i];
        uint64_t k = param_grid_size(p), idx = n % k;
        n /= k;
        sl_value_t *v = &out->values[i];
        switch (p->kind) {
        case SL_PARAM_REAL:
            grid_values(p, vals);
            v->real = vals[idx];
            break;
        case SL_PARAM_INT:
            grid_values(p, vals);
            v->integer = (int64_t)vals[idx];
            break;
        case SL_PARAM_CAT:
            v->choice = (int)idx;
            break;
        case SL_PARAM_ARCH: {
            int f = 0;
            while (idx >= arch_family_size(p, f))
                idx -= arch_family_size(p, f++);
            v->arch[SL_ARCH_FAMILY] = f;
            int fam = p->arch_values[SL_ARCH_FAMILY][f];
            for (int d = SL_ARCH_DIMS - 1; d > SL_ARCH_LAYERS; d--) {
                if (!arch_dim_used(fam, d))
                    continue;
                v->arch[d] = (int)(idx % (uint64_t)p->arch_count[d]);
                idx /= (uint64_t)p->arch_count[d];
            }
            v->arch[SL_ARCH_LAYERS] = (int)idx;
            break;
        }
        }
    }
    sl_space_canon(spec, out);
    return SL_OK;
}

/* ---- evolution operators ---- */

static void mutate_one(const sl_param_t *p, sl_rng_t *rng, sl_value_t *v) {
    switch (p->kind) {
    case SL_PARAM_REAL: {
        double lo = p->log ? log(p->low) : p->low, hi = p->log ? log(p->high) : p->high;
        double x = p->log ? log(v->real) : v->real;
        x += sl_rng_normal(rng) * 0.2 * (hi - lo);
        if (x < lo)
            x = lo + (lo - x);
        if (x > hi)
            x = hi - (x - hi);
        if (x < lo)
            x = lo;
        v->real = p->log ? exp(x) : x;
        break;
    }
    case SL_PARAM_INT: {
        int64_t span = (int64_t)(p->high - p->low);
        int64_t step = 1 + (int64_t)sl_rng_below(rng, (uint64_t)(span / 5 + 1));
        v->integer += sl_rng_below(rng, 2) ? step : -step;
        if (v->integer < (int64_t)p->low)
            v->integer = (int64_t)p->low + ((int64_t)p->low - v->integer);
        if (v->integer > (int64_t)p->high)
            v->integer = (int64_t)p->high;
        break;
    }
    case SL_PARAM_CAT:
        if (p->choice_count > 1)
            v->choice = (v->choice + 1 +
                         (int)sl_rng_below(rng, (uint64_t)p->choice_count - 1)) %
                        p->choice_count;
        break;
    case SL_PARAM_ARCH: {
        /* one dimension, one step (Archai's neighbour move) */
        int fam = p->arch_values[SL_ARCH_FAMILY][v->arch[SL_ARCH_FAMILY]];
        int dims[SL_ARCH_DIMS], nd = 0;
        for (int d = 0; d < SL_ARCH_DIMS; d++)
            if (p->arch_count[d] > 1 && arch_dim_used(fam, d))
                dims[nd++] = d;
        if (nd == 0)
            break;
        int d = dims[sl_rng_below(rng, (uint64_t)nd)];
        int x = v->arch[d] + (sl_rng_below(rng, 2) ? 1 : -1);
        if (x < 0)
            x = 1;
        if (x >= p->arch_count[d])
            x = p->arch_count[d] - 2;
        v->arch[d] = x;
        break;
    }
    }
}

void sl_space_mutate(const sl_study_spec_t *spec, sl_rng_t *rng, double rate, sl_config_t *cfg) {
    if (spec->param_count == 0)
        return;
    int forced = (int)sl_rng_below(rng, (uint64_t)spec->param_count);
    for (int i = 0; i < spec->param_count; i++)
        if (i == forced || sl_rng_double(rng) < rate)
            mutate_one(&spec->params[i], rng, &cfg->values[i]);
    sl_space_canon(spec, cfg);
}

void sl_space_crossover(const sl_study_spec_t *spec, sl_rng_t *rng, const sl_config_t *a,
                        const sl_config_t *b, sl_config_t *out) {
    sl_config_t c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < spec->param_count; i++)
        c.values[i] = sl_rng_below(rng, 2) ? b->values[i] : a->values[i];
    sl_space_canon(spec, &c);
    *out = c;
}

/* ---- proposal records ---- */

sl_err sl_trial_record_encode(const sl_study_spec_t *spec, const sl_trial_t *t, char *out,
                              size_t out_cap, size_t *out_len) {
    char json[SL_CONFIG_JSON_MAX];
    size_t len;
    sl_err err = sl_space_encode(spec, &t->config, json, sizeof json, &len);
    if (err)
        return err;
    int n = snprintf(out, out_cap, "{\"ordinal\":%llu,\"bracket\":%d,\"rung\":%d,\"config\":%s}",
                     (unsigned long long)t->ordinal, t->bracket, t->rung, json);
    if (n < 0 || (size_t)n >= out_cap)
        return SL_ETOOBIG;
    if (out_len)
        *out_len = (size_t)n;
    return SL_OK;
}

sl_err sl_trial_record_decode(const sl_study_spec_t *spec, const char *study_id,
                              const char *want_id, const char *json, size_t len, sl_trial_t *t,
                              char *why, size_t why_len) {
    if (len > SL_STUDY_RECORD_MAX) {
        snprintf(why, why_len, "trial record: over %d bytes", SL_STUDY_RECORD_MAX);
        return SL_ETOOBIG;
    }
    sl_err err = SL_EPROTO;
    cJSON *root = cJSON_ParseWithLength(json, len);
    memset(t, 0, sizeof *t);
    char *cfg_text = NULL;
    if (!cJSON_IsObject(root) || cJSON_GetArraySize(root) != 4) {
        snprintf(why, why_len, "trial record: not an object of 4 fields");
        goto fail;
    }
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "ordinal");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "bracket");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(root, "rung");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "config");
    if (!cJSON_IsNumber(o) || o->valuedouble < 0 || o->valuedouble >= SL_STUDY_MAX_TRIALS ||
        o->valuedouble != floor(o->valuedouble)) {
        snprintf(why, why_len, "trial record: bad ordinal");
        goto fail;
    }
    if (!cJSON_IsNumber(b) || b->valuedouble < 0 || b->valuedouble >= SL_STUDY_MAX_BRACKETS ||
        b->valuedouble != floor(b->valuedouble) || !cJSON_IsNumber(r) || r->valuedouble < 0 ||
        r->valuedouble >= spec->rung_count || r->valuedouble != floor(r->valuedouble)) {
        snprintf(why, why_len, "trial record: bad bracket or rung");
        goto fail;
    }
    if (!cJSON_IsObject(c)) {
        snprintf(why, why_len, "trial record: bad config");
        goto fail;
    }
    cfg_text = cJSON_PrintUnformatted(c);
    if (!cfg_text) {
        err = SL_ENOMEM;
        goto fail;
    }
    if ((err = sl_space_decode(spec, cfg_text, strlen(cfg_text), &t->config, why, why_len)))
        goto fail;
    t->ordinal = (uint64_t)o->valuedouble;
    t->bracket = (int)b->valuedouble;
    t->rung = (int)r->valuedouble;
    t->state = SL_TRIAL_PENDING;
    for (int i = 0; i < SL_STUDY_MAX_OBJECTIVES; i++)
        t->objectives[i] = NAN;
    char canon[SL_CONFIG_JSON_MAX];
    size_t clen;
    if ((err = sl_space_encode(spec, &t->config, canon, sizeof canon, &clen)))
        goto fail;
    sl_trial_id(study_id, t->bracket, canon, clen, t->id);
    err = SL_EPROTO;
    if (want_id && strcmp(want_id, t->id) != 0) {
        snprintf(why, why_len, "trial record: content hashes to %s, not %s", t->id, want_id);
        goto fail;
    }
    err = SL_OK;
fail:
    free(cfg_text);
    cJSON_Delete(root);
    return err;
}
