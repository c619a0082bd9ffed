/* The study spec: a JSON file parsed with cJSON into a plain, validated
 * sl_study_spec_t. Every refusal names the field by its path and says what
 * is wrong ("search_space.lr.low: must be > 0 with log scale"). The user's
 * reference is docs/studies.md; peers/examples/ holds examples. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/why.h"
#include "starling/hash.h"
#include "starling/nn.h"
#include "starling/study.h"

/* Every refusal of a spec is SL_EINVAL with its reason. */
#define refuse(why, why_len, ...) sl_why(why, why_len, SL_EINVAL, __VA_ARGS__)

const char *sl_search_name(sl_search_kind kind) {
    switch (kind) {
    case SL_SEARCH_RANDOM: return "random";
    case SL_SEARCH_GRID: return "grid";
    case SL_SEARCH_EVOLUTION: return "evolution";
    }
    return "?";
}

const char *sl_sched_name(sl_sched_kind kind) {
    switch (kind) {
    case SL_SCHED_FIFO: return "fifo";
    case SL_SCHED_SH: return "sh";
    case SL_SCHED_ASHA: return "asha";
    case SL_SCHED_HYPERBAND: return "hyperband";
    }
    return "?";
}

/* ---- small typed readers: each names the field on error ---- */

static const cJSON *get(const cJSON *obj, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* A number field: absent keeps *out (when !required). */
static sl_err get_num(const cJSON *obj, const char *path, const char *key, bool required,
                      double lo, double hi, double *out, char *why, size_t why_len) {
    const cJSON *v = get(obj, key);
    if (!v) {
        if (required)
            return refuse(why, why_len, "%s.%s: required", path, key);
        return SL_OK;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return refuse(why, why_len, "%s.%s: must be a number", path, key);
    if (v->valuedouble < lo || v->valuedouble > hi)
        return refuse(why, why_len, "%s.%s: must be in [%g, %g], not %g", path, key, lo, hi,
                      v->valuedouble);
    *out = v->valuedouble;
    return SL_OK;
}

static sl_err get_int(const cJSON *obj, const char *path, const char *key, bool required,
                      double lo, double hi, int64_t *out, char *why, size_t why_len) {
    double d = (double)*out;
    sl_err err = get_num(obj, path, key, required, lo, hi, &d, why, why_len);
    if (err)
        return err;
    if (d != floor(d))
        return refuse(why, why_len, "%s.%s: must be an integer, not %g", path, key, d);
    *out = (int64_t)d;
    return SL_OK;
}

static sl_err get_i(const cJSON *obj, const char *path, const char *key, bool required,
                    int lo, int hi, int *out, char *why, size_t why_len) {
    int64_t v = *out;
    sl_err err = get_int(obj, path, key, required, lo, hi, &v, why, why_len);
    *out = (int)v;
    return err;
}

static sl_err get_bool(const cJSON *obj, const char *path, const char *key, bool *out,
                       char *why, size_t why_len) {
    const cJSON *v = get(obj, key);
    if (!v)
        return SL_OK;
    if (!cJSON_IsBool(v))
        return refuse(why, why_len, "%s.%s: must be true or false", path, key);
    *out = cJSON_IsTrue(v);
    return SL_OK;
}

static bool name_ok(const char *s) {
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
            return false;
    return true;
}

/* ---- search space ---- */

static sl_err parse_choices_int(const cJSON *arr, const char *path, int lo, int hi, int *vals,
                                int *count, char *why, size_t why_len) {
    if (!cJSON_IsArray(arr))
        return refuse(why, why_len, "%s: must be a list of integers", path);
    int n = cJSON_GetArraySize(arr);
    if (n < 1 || n > SL_STUDY_MAX_CHOICES)
        return refuse(why, why_len, "%s: must hold 1 to %d values", path,
                      SL_STUDY_MAX_CHOICES);
    int i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) ||
            it->valuedouble < lo || it->valuedouble > hi)
            return refuse(why, why_len, "%s[%d]: must be an integer in [%d, %d]", path, i, lo,
                          hi);
        vals[i] = (int)it->valuedouble;
        for (int j = 0; j < i; j++)
            if (vals[j] == vals[i])
                return refuse(why, why_len, "%s[%d]: %d given twice", path, i, vals[i]);
    }
    *count = n;
    return SL_OK;
}

static sl_err parse_arch(const cJSON *o, const char *path, sl_param_t *p, char *why,
                         size_t why_len) {
    static const char *const keys[] = {"type", "families", "layers", "width", "units",
                                       "channels", "kernel", "fc", NULL};
    char sub[160];
    sl_err err = sl_json_check_keys(o, path, keys, why, why_len);
    if (err)
        return err;
    const cJSON *fam = get(o, "families");
    if (!fam) {
        p->arch_count[SL_ARCH_FAMILY] = 1;
        p->arch_values[SL_ARCH_FAMILY][0] = 0;
    } else {
        if (!cJSON_IsArray(fam) || cJSON_GetArraySize(fam) < 1 || cJSON_GetArraySize(fam) > 2)
            return refuse(why, why_len, "%s.families: must list \"mlp\" and/or \"cnn\"", path);
        int i = 0;
        for (const cJSON *it = fam->child; it; it = it->next, i++) {
            int f = -1;
            if (cJSON_IsString(it) && strcmp(it->valuestring, "mlp") == 0)
                f = 0;
            else if (cJSON_IsString(it) && strcmp(it->valuestring, "cnn") == 0)
                f = 1;
            if (f < 0)
                return refuse(why, why_len, "%s.families[%d]: must be \"mlp\" or \"cnn\"", path,
                              i);
            if (i == 1 && p->arch_values[SL_ARCH_FAMILY][0] == f)
                return refuse(why, why_len, "%s.families[1]: given twice", path);
            p->arch_values[SL_ARCH_FAMILY][i] = f;
        }
        p->arch_count[SL_ARCH_FAMILY] = i;
    }
    /* "width" sets both units (mlp) and channels (cnn) */
    const cJSON *width = get(o, "width");
    if (width && (get(o, "units") || get(o, "channels")))
        return refuse(why, why_len, "%s.width: give width, or units and/or channels", path);
    struct {
        const char *key;
        int dim, lo, hi, dflt;
    } dims[] = {{"layers", SL_ARCH_LAYERS, 1, 8, 2},
                {width ? "width" : "units", SL_ARCH_UNITS, 1, 4096, 128},
                {width ? "width" : "channels", SL_ARCH_CHANNELS, 1, 1024, 16},
                {"kernel", SL_ARCH_KERNEL, 1, 11, 3},
                {"fc", SL_ARCH_FC, 0, 4096, 0}};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        const cJSON *a = get(o, dims[d].key);
        snprintf(sub, sizeof sub, "%s.%s", path, dims[d].key);
        if (!a) {
            p->arch_count[dims[d].dim] = 1;
            p->arch_values[dims[d].dim][0] = dims[d].dflt;
            continue;
        }
        err = parse_choices_int(a, sub, dims[d].lo, dims[d].hi, p->arch_values[dims[d].dim],
                                &p->arch_count[dims[d].dim], why, why_len);
        if (err)
            return err;
    }
    return SL_OK;
}

static sl_err parse_param(const cJSON *o, const char *name, sl_param_t *p, char *why,
                          size_t why_len) {
    char path[128];
    snprintf(path, sizeof path, "search_space.%s", name);
    if (!name_ok(name) || strlen(name) > SL_STUDY_NAME_MAX || strcmp(name, "trial") == 0)
        return refuse(why, why_len,
                      "%s: a parameter name is 1 to %d letters, digits, '_', '-' or '.' and not "
                      "\"trial\"",
                      path, SL_STUDY_NAME_MAX);
    snprintf(p->name, sizeof p->name, "%s", name);
    if (!cJSON_IsObject(o))
        return refuse(why, why_len, "%s: must be an object with a \"type\"", path);
    const cJSON *t = get(o, "type");
    if (!cJSON_IsString(t))
        return refuse(why, why_len, "%s.type: required (real, int, categorical or arch)", path);
    const char *type = t->valuestring;
    sl_err err;
    if (strcmp(type, "real") == 0 || strcmp(type, "int") == 0) {
        static const char *const keys[] = {"type", "low", "high", "log", "digits", "grid_points",
                                           NULL};
        bool is_int = type[0] == 'i';
        p->kind = is_int ? SL_PARAM_INT : SL_PARAM_REAL;
        if ((err = sl_json_check_keys(o, path, keys, why, why_len)))
            return err;
        if ((err = get_num(o, path, "low", true, -1e15, 1e15, &p->low, why, why_len)) ||
            (err = get_num(o, path, "high", true, -1e15, 1e15, &p->high, why, why_len)) ||
            (err = get_bool(o, path, "log", &p->log, why, why_len)))
            return err;
        p->digits = 4;
        p->grid_points = 3;
        if ((err = get_i(o, path, "digits", false, 1, 15, &p->digits, why, why_len)) ||
            (err = get_i(o, path, "grid_points", false, 1, 1000, &p->grid_points, why,
                         why_len)))
            return err;
        if (is_int && (p->low != floor(p->low) || p->high != floor(p->high)))
            return refuse(why, why_len, "%s.low: an int parameter needs integer bounds", path);
        if (p->log && p->low <= 0)
            return refuse(why, why_len, "%s.low: must be > 0 with log scale", path);
        if (!(p->high > p->low))
            return refuse(why, why_len, "%s.high: must be greater than low (%g)", path, p->low);
        if (is_int && p->grid_points > p->high - p->low + 1)
            p->grid_points = (int)(p->high - p->low + 1);
        return SL_OK;
    }
    if (strcmp(type, "categorical") == 0) {
        static const char *const keys[] = {"type", "values", NULL};
        p->kind = SL_PARAM_CAT;
        if ((err = sl_json_check_keys(o, path, keys, why, why_len)))
            return err;
        const cJSON *vals = get(o, "values");
        if (!vals)
            return refuse(why, why_len, "%s.values: required", path);
        int n = cJSON_GetArraySize(vals);
        if (!cJSON_IsArray(vals) || n < 1 || n > SL_STUDY_MAX_CHOICES)
            return refuse(why, why_len, "%s.values: must be a list of 1 to %d values", path,
                          SL_STUDY_MAX_CHOICES);
        int i = 0;
        for (const cJSON *it = vals->child; it; it = it->next, i++) {
            char *txt = p->choices[i];
            if (cJSON_IsString(it)) {
                if (strlen(it->valuestring) > SL_STUDY_CHOICE_MAX || !*it->valuestring)
                    return refuse(why, why_len, "%s.values[%d]: 1 to %d characters", path, i,
                                  SL_STUDY_CHOICE_MAX);
                for (const char *c = it->valuestring; *c; c++)
                    if ((unsigned char)*c < 0x20 || *c == '"' || *c == '\\' || *c == '{' ||
                        *c == '}')
                        return refuse(why, why_len,
                                      "%s.values[%d]: no control characters, quotes, "
                                      "backslashes or braces",
                                      path, i);
                snprintf(txt, SL_STUDY_CHOICE_MAX + 1, "%s", it->valuestring);
            } else if (cJSON_IsNumber(it) && isfinite(it->valuedouble)) {
                sl_number_text(it->valuedouble, txt, SL_STUDY_CHOICE_MAX + 1);
                p->choice_is_number[i] = true;
            } else if (cJSON_IsBool(it)) {
                snprintf(txt, SL_STUDY_CHOICE_MAX + 1, "%s", cJSON_IsTrue(it) ? "true" : "false");
                p->choice_is_number[i] = true; /* a bare JSON literal */
            } else {
                return refuse(why, why_len, "%s.values[%d]: must be a string, number or boolean",
                              path, i);
            }
            for (int j = 0; j < i; j++)
                if (strcmp(p->choices[j], txt) == 0)
                    return refuse(why, why_len, "%s.values[%d]: \"%s\" given twice", path, i,
                                  txt);
        }
        p->choice_count = n;
        return SL_OK;
    }
    if (strcmp(type, "arch") == 0) {
        p->kind = SL_PARAM_ARCH;
        return parse_arch(o, path, p, why, why_len);
    }
    return refuse(why, why_len, "%s.type: \"%s\" is not one of real, int, categorical, arch",
                  path, type);
}

static int cmp_param(const void *a, const void *b) {
    return strcmp(((const sl_param_t *)a)->name, ((const sl_param_t *)b)->name);
}

/* ---- trainer checks ---- */

/* Calls fn on every {name} placeholder of a template; refuses stray braces. */
static sl_err scan_template(const char *tmpl, const char *path, const sl_study_spec_t *spec,
                            bool *used, char *why, size_t why_len) {
    for (const char *s = tmpl; *s; s++) {
        if (s[0] == '{' && s[1] == '{') {
            s++;
            continue;
        }
        if (s[0] == '}' && s[1] == '}') {
            s++;
            continue;
        }
        if (*s == '}')
            return refuse(why, why_len, "%s: unmatched '}' (write }} for a literal brace)", path);
        if (*s != '{')
            continue;
        const char *end = strchr(s, '}');
        if (!end)
            return refuse(why, why_len, "%s: unmatched '{' (write {{ for a literal brace)", path);
        size_t n = (size_t)(end - s - 1);
        char name[SL_STUDY_NAME_MAX + 1];
        if (n == 0 || n > SL_STUDY_NAME_MAX)
            return refuse(why, why_len, "%s: empty or overlong placeholder", path);
        memcpy(name, s + 1, n);
        name[n] = '\0';
        int idx = sl_study_spec_param(spec, name);
        if (idx < 0 && strcmp(name, "trial") != 0)
            return refuse(why, why_len, "%s: unknown placeholder {%s} (not in search_space)",
                          path, name);
        if (idx >= 0)
            used[idx] = true;
        s = end;
    }
    return SL_OK;
}

/* Builtin trainer: every arch value must render to a valid model spec. */
static sl_err check_model(const sl_study_spec_t *spec, char *why, size_t why_len) {
    sl_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    char text[SL_STUDY_TEMPLATE_MAX + 64], msg[200];
    for (int i = 0; i < spec->param_count; i++) {
        const sl_param_t *p = &spec->params[i];
        if (p->kind == SL_PARAM_REAL)
            cfg.values[i].real = p->low;
        if (p->kind == SL_PARAM_INT)
            cfg.values[i].integer = (int64_t)p->low;
    }
    /* Each arch dimension value with the others at every family; the
     * product would be exhaustive but can be large. */
    for (int i = 0; i < spec->param_count; i++) {
        const sl_param_t *p = &spec->params[i];
        if (p->kind != SL_PARAM_ARCH)
            continue;
        for (int d = 0; d < SL_ARCH_DIMS; d++) {
            for (int v = 0; v < p->arch_count[d]; v++) {
                for (int f = 0; f < p->arch_count[SL_ARCH_FAMILY]; f++) {
                    int *a = cfg.values[i].arch;
                    memset(a, 0, sizeof cfg.values[i].arch);
                    a[SL_ARCH_FAMILY] = f;
                    /* the largest layer count with each value of d */
                    a[SL_ARCH_LAYERS] = p->arch_count[SL_ARCH_LAYERS] - 1;
                    a[d] = v;
                    sl_err err = sl_space_render(spec, &cfg, "0000000000000000", spec->model,
                                                 text, sizeof text, msg, sizeof msg);
                    if (err)
                        return refuse(why, why_len, "trainer.model: %s", msg);
                    sl_nn_spec_t ns;
                    if (sl_nn_spec_parse(text, &ns, msg, sizeof msg) != SL_OK)
                        return refuse(why, why_len,
                                      "search_space.%s: gives model \"%s\" that does not parse: "
                                      "%s",
                                      p->name, text, msg);
                    /* the 28x28 data sets: every model must fit the images */
                    uint64_t params, flops;
                    sl_nn_shape_t mnist = {.channels = 1, .height = 28, .width = 28,
                                           .classes = 10};
                    sl_err merr = SL_OK;
                    if (strcmp(spec->dataset, "fashion-mnist") == 0 ||
                        strcmp(spec->dataset, "mnist") == 0)
                        merr = sl_nn_spec_measure(&ns, &mnist, &params, &flops, msg, sizeof msg);
                    if (merr == SL_ENOMEM)
                        return merr;
                    if (merr)
                        return refuse(why, why_len,
                                      "search_space.%s: gives model \"%s\" that does not fit "
                                      "28x28 images: %s",
                                      p->name, text, msg);
                }
            }
        }
    }
    return SL_OK;
}

static const char *const builtin_hparams[] = {"lr", "batch", "optimizer", "momentum",
                                              "weight_decay", "epochs_scale", NULL};

static sl_err parse_trainer(const cJSON *t, sl_study_spec_t *s, char *why, size_t why_len) {
    sl_err err;
    if (!cJSON_IsObject(t))
        return refuse(why, why_len, "trainer: required (an object with a \"type\")");
    char type[16] = "";
    if ((err = sl_json_get_str(t, "trainer", "type", true, type, sizeof type, why, why_len)))
        return err;
    bool used[SL_STUDY_MAX_PARAMS] = {false};
    if (strcmp(type, "builtin") == 0) {
        static const char *const keys[] = {"type", "model", "optimizer", "lr", "batch", "threads",
                                           NULL};
        s->trainer = SL_TRAINER_BUILTIN;
        if ((err = sl_json_check_keys(t, "trainer", keys, why, why_len)))
            return err;
        if (!get(t, "model")) {
            int arch = -1, n = 0;
            for (int i = 0; i < s->param_count; i++)
                if (s->params[i].kind == SL_PARAM_ARCH)
                    arch = i, n++;
            if (n != 1)
                return refuse(why, why_len,
                              "trainer.model: required (a model spec such as \"mlp:256,128\" or "
                              "\"{arch}\") unless search_space has exactly one arch parameter");
            snprintf(s->model, sizeof s->model, "{%s}", s->params[arch].name);
        } else if ((err = sl_json_get_str(t, "trainer", "model", true, s->model, sizeof s->model, why,
                                  why_len))) {
            return err;
        }
        snprintf(s->optimizer, sizeof s->optimizer, "adam");
        if ((err = sl_json_get_str(t, "trainer", "optimizer", false, s->optimizer, sizeof s->optimizer,
                           why, why_len)))
            return err;
        sl_nn_opt_kind ok;
        if (sl_nn_optim_parse(s->optimizer, &ok) != SL_OK)
            return refuse(why, why_len,
                          "trainer.optimizer: \"%s\" is not one of sgd, nesterov, adam, adamw",
                          s->optimizer);
        s->lr = 0.001;
        s->batch = 128;
        s->threads = 1;
        if ((err = get_num(t, "trainer", "lr", false, 1e-9, 10, &s->lr, why, why_len)) ||
            (err = get_i(t, "trainer", "batch", false, 1, 65536, &s->batch, why, why_len)) ||
            (err = get_i(t, "trainer", "threads", false, 1, 256, &s->threads, why, why_len)))
            return err;
        if ((err = scan_template(s->model, "trainer.model", s, used, why, why_len)))
            return err;
        for (int i = 0; i < s->param_count; i++) {
            const sl_param_t *p = &s->params[i];
            bool known = false;
            for (size_t k = 0; builtin_hparams[k]; k++)
                if (strcmp(p->name, builtin_hparams[k]) == 0)
                    known = true;
            if (p->kind == SL_PARAM_ARCH && !used[i])
                return refuse(why, why_len,
                              "search_space.%s: an arch parameter must appear in trainer.model "
                              "as {%s}",
                              p->name, p->name);
            if (!known && !used[i])
                return refuse(why, why_len,
                              "search_space.%s: not used by the builtin trainer (it reads lr, "
                              "batch, optimizer, momentum, weight_decay, or {%s} in "
                              "trainer.model)",
                              p->name, p->name);
            if (strcmp(p->name, "optimizer") == 0) {
                if (p->kind != SL_PARAM_CAT)
                    return refuse(why, why_len, "search_space.optimizer: must be categorical");
                for (int c = 0; c < p->choice_count; c++)
                    if (sl_nn_optim_parse(p->choices[c], &ok) != SL_OK)
                        return refuse(why, why_len,
                                      "search_space.optimizer.values[%d]: \"%s\" is not one of "
                                      "sgd, nesterov, adam, adamw",
                                      c, p->choices[c]);
            }
            if ((strcmp(p->name, "lr") == 0 || strcmp(p->name, "momentum") == 0 ||
                 strcmp(p->name, "weight_decay") == 0) &&
                p->kind == SL_PARAM_REAL && p->low < 0)
                return refuse(why, why_len, "search_space.%s.low: must be >= 0", p->name);
            if (strcmp(p->name, "batch") == 0 && (p->kind != SL_PARAM_INT || p->low < 1))
                return refuse(why, why_len, "search_space.batch: must be an int >= 1");
        }
        return check_model(s, why, why_len);
    }
    if (strcmp(type, "command") == 0) {
        static const char *const keys[] = {"type", "command", "timeout_s", NULL};
        s->trainer = SL_TRAINER_COMMAND;
        if ((err = sl_json_check_keys(t, "trainer", keys, why, why_len)) ||
            (err = sl_json_get_str(t, "trainer", "command", true, s->command, sizeof s->command, why,
                           why_len)))
            return err;
        int64_t to = 3600;
        if ((err = get_int(t, "trainer", "timeout_s", false, 1, 7 * 86400, &to, why, why_len)))
            return err;
        s->command_timeout_s = (uint32_t)to;
        return scan_template(s->command, "trainer.command", s, used, why, why_len);
    }
    return refuse(why, why_len, "trainer.type: \"%s\" is not one of builtin, command", type);
}

/* ---- searcher, scheduler, objectives, budget ---- */

static sl_err parse_searcher(const cJSON *o, sl_study_spec_t *s, char *why, size_t why_len) {
    sl_err err;
    s->searcher = SL_SEARCH_RANDOM;
    s->population = 8;
    s->mutation_rate = 0.3;
    s->crossover_rate = 0.5;
    s->generational = true;
    if (!o)
        return SL_OK;
    if (!cJSON_IsObject(o))
        return refuse(why, why_len, "searcher: must be an object with a \"type\"");
    char type[16] = "random";
    if ((err = sl_json_get_str(o, "searcher", "type", false, type, sizeof type, why, why_len)))
        return err;
    if (strcmp(type, "random") == 0 || strcmp(type, "grid") == 0) {
        static const char *const keys[] = {"type", NULL};
        s->searcher = type[0] == 'r' ? SL_SEARCH_RANDOM : SL_SEARCH_GRID;
        return sl_json_check_keys(o, "searcher", keys, why, why_len);
    }
    if (strcmp(type, "evolution") == 0) {
        static const char *const keys[] = {"type", "population", "mutation_rate",
                                           "crossover_rate", "generational", NULL};
        s->searcher = SL_SEARCH_EVOLUTION;
        if ((err = sl_json_check_keys(o, "searcher", keys, why, why_len)) ||
            (err = get_i(o, "searcher", "population", false, 2, 1024, &s->population, why,
                         why_len)) ||
            (err = get_num(o, "searcher", "mutation_rate", false, 0, 1, &s->mutation_rate, why,
                           why_len)) ||
            (err = get_num(o, "searcher", "crossover_rate", false, 0, 1, &s->crossover_rate, why,
                           why_len)) ||
            (err = get_bool(o, "searcher", "generational", &s->generational, why, why_len)))
            return err;
        return SL_OK;
    }
    return refuse(why, why_len, "searcher.type: \"%s\" is not one of random, grid, evolution",
                  type);
}

static sl_err parse_scheduler(const cJSON *o, sl_study_spec_t *s, char *why, size_t why_len) {
    sl_err err;
    s->scheduler = SL_SCHED_FIFO;
    s->min_epochs = 1;
    s->max_epochs = 10;
    s->reduction = 3;
    if (!cJSON_IsObject(o))
        return refuse(why, why_len, "scheduler: required (an object with a \"type\")");
    char type[16] = "";
    if ((err = sl_json_get_str(o, "scheduler", "type", true, type, sizeof type, why, why_len)))
        return err;
    if (strcmp(type, "fifo") == 0) {
        static const char *const keys[] = {"type", "epochs", "max_epochs", NULL};
        s->scheduler = SL_SCHED_FIFO;
        if ((err = sl_json_check_keys(o, "scheduler", keys, why, why_len)))
            return err;
        if (get(o, "epochs") && get(o, "max_epochs"))
            return refuse(why, why_len, "scheduler.epochs: give epochs or max_epochs, not both");
        const char *k = get(o, "epochs") ? "epochs" : "max_epochs";
        if ((err = get_i(o, "scheduler", k, true, 1, SL_STUDY_MAX_EPOCHS, &s->max_epochs, why,
                         why_len)))
            return err;
        s->min_epochs = s->max_epochs;
        s->rung_count = 1;
        s->rungs[0] = s->max_epochs;
        return SL_OK;
    }
    if (strcmp(type, "sh") == 0 || strcmp(type, "successive_halving") == 0)
        s->scheduler = SL_SCHED_SH;
    else if (strcmp(type, "asha") == 0)
        s->scheduler = SL_SCHED_ASHA;
    else if (strcmp(type, "hyperband") == 0)
        s->scheduler = SL_SCHED_HYPERBAND;
    else
        return refuse(why, why_len,
                      "scheduler.type: \"%s\" is not one of fifo, sh, asha, hyperband", type);
    static const char *const keys[] = {"type", "min_epochs", "max_epochs", "reduction",
                                       "brackets", NULL};
    if ((err = sl_json_check_keys(o, "scheduler", keys, why, why_len)) ||
        (err = get_i(o, "scheduler", "min_epochs", false, 1, SL_STUDY_MAX_EPOCHS, &s->min_epochs,
                     why, why_len)) ||
        (err = get_i(o, "scheduler", "max_epochs", true, 1, SL_STUDY_MAX_EPOCHS, &s->max_epochs,
                     why, why_len)) ||
        (err = get_i(o, "scheduler", "reduction", false, 2, 100, &s->reduction, why, why_len)))
        return err;
    if (get(o, "brackets") && s->scheduler != SL_SCHED_HYPERBAND)
        return refuse(why, why_len, "scheduler.brackets: only for hyperband");
    if (s->min_epochs > s->max_epochs)
        return refuse(why, why_len, "scheduler.min_epochs: must be <= max_epochs (%d)",
                      s->max_epochs);
    /* The ladder: min, min*eta, ... while <= max; the top rung is max. */
    s->rung_count = 0;
    for (int64_t r = s->min_epochs; r <= s->max_epochs; r *= s->reduction) {
        if (s->rung_count == SL_STUDY_MAX_RUNGS)
            return refuse(why, why_len,
                          "scheduler.min_epochs: too many rungs (over %d); raise min_epochs or "
                          "reduction",
                          SL_STUDY_MAX_RUNGS);
        s->rungs[s->rung_count++] = (int)r;
    }
    s->rungs[s->rung_count - 1] = s->max_epochs;
    if ((err = get_i(o, "scheduler", "brackets", false, 1, SL_STUDY_MAX_BRACKETS, &s->brackets,
                     why, why_len)))
        return err;
    if (s->scheduler == SL_SCHED_HYPERBAND) {
        if (s->brackets == 0)
            s->brackets = s->rung_count < SL_STUDY_MAX_BRACKETS ? s->rung_count
                                                                : SL_STUDY_MAX_BRACKETS;
        if (s->brackets > s->rung_count)
            return refuse(why, why_len, "scheduler.brackets: at most the rung count (%d)",
                          s->rung_count);
    }
    return SL_OK;
}

static sl_err parse_objectives(const cJSON *o, sl_study_spec_t *s, char *why, size_t why_len) {
    if (!o)
        return refuse(why, why_len,
                      "objectives: required (e.g. [{\"metric\": \"val_acc\", \"goal\": "
                      "\"max\"}])");
    int n = cJSON_GetArraySize(o);
    if (!cJSON_IsArray(o) || n < 1 || n > SL_STUDY_MAX_OBJECTIVES)
        return refuse(why, why_len, "objectives: must be a list of 1 to %d objectives",
                      SL_STUDY_MAX_OBJECTIVES);
    int i = 0;
    for (const cJSON *it = o->child; it; it = it->next, i++) {
        static const char *const keys[] = {"metric", "goal", NULL};
        char path[32], goal[8] = "";
        snprintf(path, sizeof path, "objectives[%d]", i);
        if (!cJSON_IsObject(it))
            return refuse(why, why_len, "%s: must be an object {metric, goal}", path);
        sl_objective_t *ob = &s->objectives[i];
        sl_err err = sl_json_check_keys(it, path, keys, why, why_len);
        if (!err)
            err = sl_json_get_str(it, path, "metric", true, ob->metric, sizeof ob->metric, why, why_len);
        if (!err)
            err = sl_json_get_str(it, path, "goal", true, goal, sizeof goal, why, why_len);
        if (err)
            return err;
        if (!name_ok(ob->metric) || strcmp(ob->metric, "epoch") == 0)
            return refuse(why, why_len, "%s.metric: \"%s\" is not a metric name", path,
                          ob->metric);
        if (strcmp(goal, "max") == 0)
            ob->maximize = true;
        else if (strcmp(goal, "min") == 0)
            ob->maximize = false;
        else
            return refuse(why, why_len, "%s.goal: must be \"max\" or \"min\", not \"%s\"", path,
                          goal);
        for (int j = 0; j < i; j++)
            if (strcmp(s->objectives[j].metric, ob->metric) == 0)
                return refuse(why, why_len, "%s.metric: \"%s\" given twice", path, ob->metric);
    }
    s->objective_count = n;
    return SL_OK;
}

/* Hyperband: configs of bracket b (starting at rung b of the ladder). */
static uint64_t hb_bracket_size(const sl_study_spec_t *s, int b) {
    int smax = s->rung_count - 1, sb = smax - b;
    uint64_t p = 1; /* ceil((s+1)/(s_b+1) * eta^s_b) in integers */
    for (int i = 0; i < sb; i++)
        p *= (uint64_t)s->reduction;
    return ((uint64_t)(smax + 1) * p + (uint64_t)sb) / (uint64_t)(sb + 1);
}

sl_err sl_study_spec_parse(const char *json, size_t len, sl_study_spec_t *out, char *why,
                           size_t why_len) {
    static const char *const keys[] = {"name", "seed", "dataset", "trainer", "search_space",
                                       "searcher", "scheduler", "objectives", "budget",
                                       "checkpoint_every", "concurrency", "retries", "lease_ms",
                                       "description", NULL};
    sl_err err = SL_EINVAL;
    if (why && why_len)
        why[0] = '\0';
    if (len > SL_STUDY_SPEC_MAX_LEN) {
        refuse(why, why_len, "study: over %d bytes", SL_STUDY_SPEC_MAX_LEN);
        return SL_ETOOBIG;
    }
    sl_study_spec_t *s = sl_calloc(1, sizeof *s);
    if (!s)
        return SL_ENOMEM;
    cJSON *root = NULL;
    if ((err = sl_json_parse_object(json, len, "study", &root, why, why_len)))
        goto fail;
    if ((err = sl_json_check_keys(root, "", keys, why, why_len)) ||
        (err = sl_json_get_str(root, "", "name", true, s->name, sizeof s->name, why, why_len)))
        goto fail;
    err = SL_EINVAL;
    if (!name_ok(s->name)) {
        refuse(why, why_len, "name: use letters, digits, '_', '-' or '.'");
        goto fail;
    }
    /* seed: a non-negative integer that a double holds exactly */
    int64_t seed = 1;
    if ((err = get_int(root, "", "seed", false, 0, 9007199254740991.0, &seed, why, why_len)))
        goto fail;
    s->seed = (uint64_t)seed;

    const cJSON *ds = get(root, "dataset");
    s->val_split = 0.1;
    if (cJSON_IsString(ds)) {
        if ((err = sl_json_get_str(root, "", "dataset", true, s->dataset, sizeof s->dataset, why,
                           why_len)))
            goto fail;
    } else if (cJSON_IsObject(ds)) {
        static const char *const dkeys[] = {"name", "limit", "val_split", NULL};
        int64_t limit = 0;
        if ((err = sl_json_check_keys(ds, "dataset", dkeys, why, why_len)) ||
            (err = sl_json_get_str(ds, "dataset", "name", true, s->dataset, sizeof s->dataset, why,
                           why_len)) ||
            (err = get_int(ds, "dataset", "limit", false, 0, 1e12, &limit, why, why_len)) ||
            (err = get_num(ds, "dataset", "val_split", false, 0, 0.9, &s->val_split, why,
                           why_len)))
            goto fail;
        s->dataset_limit = (uint64_t)limit;
    } else if (ds) {
        err = refuse(why, why_len, "dataset: must be a name or {\"name\": ...}");
        goto fail;
    }

    const cJSON *space = get(root, "search_space");
    if (!cJSON_IsObject(space) || !space->child) {
        err = refuse(why, why_len, "search_space: required (an object of parameters)");
        goto fail;
    }
    if (cJSON_GetArraySize(space) > SL_STUDY_MAX_PARAMS) {
        err = refuse(why, why_len, "search_space: more than %d parameters", SL_STUDY_MAX_PARAMS);
        goto fail;
    }
    {
        for (const cJSON *it = space->child; it; it = it->next) {
            for (const cJSON *j = it->next; j; j = j->next)
                if (strcmp(it->string, j->string) == 0) {
                    err = refuse(why, why_len, "search_space.%s: given twice", it->string);
                    goto fail;
                }
            if ((err = parse_param(it, it->string, &s->params[s->param_count++], why, why_len)))
                goto fail;
        }
    }
    qsort(s->params, (size_t)s->param_count, sizeof s->params[0], cmp_param);

    if ((err = parse_searcher(get(root, "searcher"), s, why, why_len)) ||
        (err = parse_scheduler(get(root, "scheduler"), s, why, why_len)) ||
        (err = parse_objectives(get(root, "objectives"), s, why, why_len)) ||
        (err = parse_trainer(get(root, "trainer"), s, why, why_len)))
        goto fail;

    if (s->trainer == SL_TRAINER_BUILTIN && !s->dataset[0]) {
        err = refuse(why, why_len,
                     "dataset: required for the builtin trainer (e.g. \"fashion-mnist\")");
        goto fail;
    }
    /* budget */
    const cJSON *b = get(root, "budget");
    int64_t trials = 0, time_s = 0;
    if (b) {
        static const char *const bkeys[] = {"trials", "time_s", NULL};
        if (!cJSON_IsObject(b)) {
            err = refuse(why, why_len, "budget: must be an object {trials, time_s}");
            goto fail;
        }
        if ((err = sl_json_check_keys(b, "budget", bkeys, why, why_len)) ||
            (err = get_int(b, "budget", "trials", false, 1, SL_STUDY_MAX_TRIALS, &trials, why,
                           why_len)) ||
            (err = get_int(b, "budget", "time_s", false, 1, 365 * 86400.0, &time_s, why,
                           why_len)))
            goto fail;
    }
    err = SL_EINVAL;
    uint64_t grid = sl_space_grid_size(s);
    if (s->searcher == SL_SEARCH_GRID) {
        if (grid == 0 || grid > SL_STUDY_MAX_TRIALS) {
            refuse(why, why_len, "searcher.type: the grid has over %d points; lower grid_points",
                   SL_STUDY_MAX_TRIALS);
            goto fail;
        }
        if (trials == 0)
            trials = (int64_t)grid;
    }
    if (s->scheduler == SL_SCHED_HYPERBAND) {
        uint64_t total = 0;
        for (int br = 0; br < s->brackets; br++)
            total += hb_bracket_size(s, br);
        if (trials == 0)
            trials = (int64_t)(total < SL_STUDY_MAX_TRIALS ? total : SL_STUDY_MAX_TRIALS);
    }
    if (s->searcher == SL_SEARCH_EVOLUTION && trials == 0)
        trials = (int64_t)s->population * 4;
    if (trials == 0) {
        refuse(why, why_len, "budget.trials: required for the %s searcher",
               sl_search_name(s->searcher));
        goto fail;
    }
    s->budget_trials = (uint32_t)trials;
    s->budget_time_s = (uint64_t)time_s;
    if (s->searcher == SL_SEARCH_EVOLUTION && s->generational &&
        s->scheduler != SL_SCHED_FIFO) {
        refuse(why, why_len,
               "searcher.generational: a generational evolution needs the fifo scheduler (set "
               "\"generational\": false to use asha)");
        goto fail;
    }
    if (s->searcher == SL_SEARCH_EVOLUTION &&
        (s->scheduler == SL_SCHED_SH || s->scheduler == SL_SCHED_HYPERBAND)) {
        refuse(why, why_len, "searcher.type: evolution works with the fifo or asha scheduler");
        goto fail;
    }

    s->checkpoint_every = 1;
    s->concurrency = 1;
    s->retries = 2;
    int lease = 10000;
    if ((err = get_i(root, "", "checkpoint_every", false, 1, SL_STUDY_MAX_EPOCHS,
                     &s->checkpoint_every, why, why_len)) ||
        (err = get_i(root, "", "concurrency", false, 1, 256, &s->concurrency, why, why_len)) ||
        (err = get_i(root, "", "retries", false, 0, 100, &s->retries, why, why_len)) ||
        (err = get_i(root, "", "lease_ms", false, 100, 3600000, &lease, why, why_len)))
        goto fail;
    s->lease_ms = (uint32_t)lease;
    const cJSON *desc = get(root, "description");
    if (desc && !cJSON_IsString(desc)) {
        err = refuse(why, why_len, "description: must be a string");
        goto fail;
    }
    cJSON_Delete(root);
    *out = *s;
    sl_free(s);
    return SL_OK;
fail:
    cJSON_Delete(root);
    sl_free(s);
    return err ? err : SL_EINVAL;
}

bool sl_study_id_valid(const char *id, size_t len) {
    if (!id || len != SL_TRIAL_ID_LEN)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return false;
    return true;
}

void sl_study_spec_id(const sl_study_spec_t *spec, char out[SL_TRIAL_ID_LEN + 1]) {
    /* The spec struct is plain data with deterministic padding (calloc'd
     * and copied whole), but hashing its bytes would tie the id to this
     * build's layout. Hash a canonical text instead. */
    char buf[4096];
    int n = snprintf(buf, sizeof buf, "%s|%llu|%s|%llu|%g|%d|%s|%s|%g|%d|%s|%d|%d|%g|%g|%d|%d|%d|%d",
                     spec->name, (unsigned long long)spec->seed, spec->dataset,
                     (unsigned long long)spec->dataset_limit, spec->val_split, spec->trainer,
                     spec->model, spec->optimizer, spec->lr, spec->batch, spec->command,
                     spec->searcher, spec->population, spec->mutation_rate,
                     spec->crossover_rate, spec->scheduler, spec->min_epochs, spec->max_epochs,
                     spec->reduction);
    uint64_t h = sl_hash64(buf, (size_t)(n < (int)sizeof buf ? n : (int)sizeof buf - 1), 0x5354);
    for (int i = 0; i < spec->param_count; i++) {
        const sl_param_t *p = &spec->params[i];
        n = snprintf(buf, sizeof buf, "%s|%d|%.17g|%.17g|%d|%d|%d", p->name, p->kind, p->low,
                     p->high, p->log, p->digits, p->choice_count);
        h ^= sl_mix64(sl_hash64(buf, (size_t)n, h));
        for (int c = 0; c < p->choice_count; c++)
            h = sl_hash64(p->choices[c], strlen(p->choices[c]), h);
        for (int d = 0; d < SL_ARCH_DIMS; d++)
            for (int c = 0; c < p->arch_count[d]; c++)
                h = sl_mix64(h ^ (uint64_t)(p->arch_values[d][c] + 1000 * d));
    }
    for (int i = 0; i < spec->objective_count; i++)
        h = sl_hash64(spec->objectives[i].metric, strlen(spec->objectives[i].metric),
                      h + spec->objectives[i].maximize);
    h = sl_mix64(h ^ spec->budget_trials ^ ((uint64_t)spec->brackets << 40));
    snprintf(out, SL_TRIAL_ID_LEN + 1, "%016llx", (unsigned long long)h);
}

sl_err sl_study_train_cfg(const sl_study_spec_t *spec, const sl_config_t *config,
                          const char *trial_id, int epochs, sl_nn_train_cfg_t *cfg, char *model,
                          size_t model_cap, char *why, size_t why_len) {
    if (spec->trainer != SL_TRAINER_BUILTIN)
        return refuse(why, why_len, "trainer: not the builtin trainer");
    sl_err err = sl_space_render(spec, config, trial_id, spec->model, model, model_cap, why,
                                 why_len);
    if (err)
        return err;
    sl_nn_train_cfg_init(cfg);
    cfg->model = model;
    cfg->epochs = epochs;
    cfg->batch = spec->batch;
    cfg->lr = (float)spec->lr;
    cfg->val_split = (float)spec->val_split;
    cfg->limit = (size_t)spec->dataset_limit;
    if (sl_nn_optim_parse(spec->optimizer, &cfg->optimizer) != SL_OK)
        return refuse(why, why_len, "trainer.optimizer: \"%s\" is unknown", spec->optimizer);
    for (int i = 0; i < spec->param_count; i++) {
        const sl_param_t *p = &spec->params[i];
        const sl_value_t *v = &config->values[i];
        double x = p->kind == SL_PARAM_REAL ? v->real
                   : p->kind == SL_PARAM_INT ? (double)v->integer
                   : p->kind == SL_PARAM_CAT && p->choice_is_number[v->choice]
                       ? strtod(p->choices[v->choice], NULL)
                       : NAN;
        if (strcmp(p->name, "lr") == 0 && isfinite(x))
            cfg->lr = (float)x;
        else if (strcmp(p->name, "batch") == 0 && isfinite(x))
            cfg->batch = (int)x;
        else if (strcmp(p->name, "momentum") == 0 && isfinite(x))
            cfg->momentum = (float)x;
        else if (strcmp(p->name, "weight_decay") == 0 && isfinite(x))
            cfg->weight_decay = (float)x;
        else if (strcmp(p->name, "optimizer") == 0 && p->kind == SL_PARAM_CAT &&
                 sl_nn_optim_parse(p->choices[v->choice], &cfg->optimizer) != SL_OK)
            return refuse(why, why_len, "search_space.optimizer: \"%s\" is unknown",
                          p->choices[v->choice]);
    }
    uint64_t h = trial_id ? sl_hash64(trial_id, strlen(trial_id), spec->seed) : spec->seed;
    cfg->seed = sl_mix64(h) | 1;
    return SL_OK;
}
