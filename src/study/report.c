/* Reports and results.
 *
 * A trial command prints one JSON object per line on its stdout, like
 * AutoGluon's reporter: {"epoch": 3, "val_acc": 0.91, "val_loss": 0.3}.
 * The parser is strict and bounded (4 KiB a line, 32 metrics, finite
 * numbers, names of letters/digits/_-.), and a bad line is an error code
 * for the caller to count, never a crash. Lines that are not JSON objects
 * are the command's own log output.
 *
 * The writers turn recorded trials into what users fetch: models.json
 * (the best models, as in Archai's multi-node search), pareto.json and a
 * text leaderboard. They write into a buffer; the caller writes files. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/why.h"
#include "starling/study.h"

static bool metric_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > SL_STUDY_NAME_MAX)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.' && *s != '/')
            return false;
    return true;
}

sl_err sl_report_parse(const char *line, size_t len, sl_report_t *out, char *why,
                       size_t why_len) {
    memset(out, 0, sizeof *out);
    while (len > 0 && isspace((unsigned char)line[len - 1]))
        len--;
    size_t start = 0;
    while (start < len && isspace((unsigned char)line[start]))
        start++;
    if (start == len || line[start] != '{')
        return sl_why(why, why_len, SL_ENOTFOUND, "not a report (no JSON object)");
    if (len > SL_REPORT_LINE_MAX)
        return sl_why(why, why_len, SL_ETOOBIG, "report: over %d bytes", SL_REPORT_LINE_MAX);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(line + start, len - start, &end, false);
    sl_err err = SL_EPROTO;
    if (!root) {
        sl_why(why, why_len, SL_EPROTO, "report: not valid JSON");
        goto fail;
    }
    if (end != line + len) {
        sl_why(why, why_len, SL_EPROTO, "report: text after the JSON object");
        goto fail;
    }
    if (!cJSON_IsObject(root)) {
        sl_why(why, why_len, SL_EPROTO, "report: not a JSON object");
        goto fail;
    }
    bool have_epoch = false;
    for (const cJSON *it = root->child; it; it = it->next) {
        for (const cJSON *j = root->child; j != it; j = j->next)
            if (strcmp(j->string, it->string) == 0) {
                sl_why(why, why_len, SL_EPROTO, "report: \"%.64s\" given twice", it->string);
                goto fail;
            }
        if (!metric_name_ok(it->string)) {
            sl_why(why, why_len, SL_EPROTO, "report: \"%.64s\" is not a metric name",
                   it->string);
            goto fail;
        }
        double v;
        if (cJSON_IsNumber(it))
            v = it->valuedouble;
        else if (cJSON_IsBool(it))
            v = cJSON_IsTrue(it) ? 1 : 0;
        else {
            sl_why(why, why_len, SL_EPROTO, "report: \"%s\" must be a number", it->string);
            goto fail;
        }
        if (!isfinite(v)) {
            err = sl_why(why, why_len, SL_ERANGE, "report: \"%s\" is not finite", it->string);
            goto fail;
        }
        if (strcmp(it->string, "epoch") == 0) {
            if (v != floor(v) || v < 1 || v > SL_STUDY_MAX_EPOCHS) {
                err = sl_why(why, why_len, SL_ERANGE,
                             "report: \"epoch\" must be an integer in [1, %d]",
                             SL_STUDY_MAX_EPOCHS);
                goto fail;
            }
            out->epoch = (int)v;
            have_epoch = true;
            continue;
        }
        if (out->metric_count == SL_REPORT_MAX_METRICS) {
            err = sl_why(why, why_len, SL_ETOOBIG, "report: over %d metrics",
                         SL_REPORT_MAX_METRICS);
            goto fail;
        }
        sl_metric_t *m = &out->metrics[out->metric_count++];
        snprintf(m->name, sizeof m->name, "%s", it->string);
        m->value = v;
    }
    if (!have_epoch) {
        sl_why(why, why_len, SL_EPROTO, "report: missing \"epoch\"");
        goto fail;
    }
    cJSON_Delete(root);
    return SL_OK;
fail:
    cJSON_Delete(root);
    memset(out, 0, sizeof *out);
    return err;
}

double sl_report_get(const sl_report_t *r, const char *name) {
    if (strcmp(name, "epoch") == 0)
        return r->epoch;
    for (int i = 0; i < r->metric_count; i++)
        if (strcmp(r->metrics[i].name, name) == 0)
            return r->metrics[i].value;
    return NAN;
}

/* ---- buffers ---- */

void sl_buf_fini(sl_buf_t *b) {
    sl_free(b->data);
    memset(b, 0, sizeof *b);
}

void sl_buf_printf(sl_buf_t *b, const char *fmt, ...) {
    if (b->failed)
        return;
    for (;;) {
        size_t room = b->cap > b->len ? b->cap - b->len : 0;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *d = sl_realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
}

/* ---- results ---- */

static void put_num(sl_buf_t *b, double v) {
    if (isfinite(v))
        sl_buf_printf(b, "%.6g", v);
    else
        sl_buf_printf(b, "null");
}

/* Indexes of results ordered best first by objective 0 (no value last). */
static size_t *order_results(const sl_study_spec_t *spec, const sl_trial_result_t *rs,
                             size_t count) {
    size_t *idx = sl_malloc((count ? count : 1) * sizeof *idx);
    if (!idx)
        return NULL;
    bool mx = spec->objectives[0].maximize;
    for (size_t i = 0; i < count; i++) {
        size_t x = i, j = i;
        idx[i] = x;
        while (j > 0) {
            const sl_trial_t *a = rs[x].trial, *p = rs[idx[j - 1]].trial;
            double va = a->objectives[0], vp = p->objectives[0];
            bool before = isnan(vp) ? (!isnan(va) || strcmp(a->id, p->id) < 0)
                                    : (!isnan(va) && ((mx ? va > vp : va < vp) ||
                                                      (va == vp && strcmp(a->id, p->id) < 0)));
            if (!before)
                break;
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = x;
    }
    return idx;
}

static sl_err put_trial(const sl_study_spec_t *spec, sl_buf_t *b, const sl_trial_result_t *r,
                        int rank) {
    char json[SL_CONFIG_JSON_MAX], model[SL_STUDY_TEMPLATE_MAX + 64], why[128];
    size_t len;
    sl_err err = sl_space_encode(spec, &r->trial->config, json, sizeof json, &len);
    if (err)
        return err;
    sl_buf_printf(b, "    {");
    if (rank > 0)
        sl_buf_printf(b, "\"rank\": %d, ", rank);
    sl_buf_printf(b, "\"trial\": \"%s\", \"state\": \"%s\", \"epochs\": %d, \"config\": %s",
                  r->trial->id, sl_trial_state_name(r->trial->state), r->trial->epochs_done,
                  json);
    if (spec->trainer == SL_TRAINER_BUILTIN &&
        sl_space_render(spec, &r->trial->config, r->trial->id, spec->model, model, sizeof model,
                        why, sizeof why) == SL_OK)
        sl_buf_printf(b, ", \"model\": \"%s\"", model);
    for (int i = 0; i < spec->param_count; i++)
        if (spec->params[i].kind == SL_PARAM_ARCH &&
            sl_space_arch_spec(&spec->params[i], r->trial->config.values[i].arch, model,
                               sizeof model) == SL_OK) {
            sl_buf_printf(b, ", \"archid\": \"%s\"", model);
            break;
        }
    sl_buf_printf(b, ", \"objectives\": {");
    for (int o = 0; o < spec->objective_count; o++) {
        sl_buf_printf(b, "%s\"%s\": ", o ? ", " : "", spec->objectives[o].metric);
        put_num(b, r->trial->objectives[o]);
    }
    sl_buf_printf(b, "}");
    if (r->epoch_count > 0) {
        const sl_report_t *last = &r->epochs[r->epoch_count - 1];
        sl_buf_printf(b, ", \"metrics\": {\"epoch\": %d", last->epoch);
        for (int m = 0; m < last->metric_count; m++) {
            sl_buf_printf(b, ", \"%s\": ", last->metrics[m].name);
            put_num(b, last->metrics[m].value);
        }
        sl_buf_printf(b, "}");
    }
    if (r->owner)
        sl_buf_printf(b, ", \"owner\": \"%s\"", r->owner);
    sl_buf_printf(b, "}");
    return SL_OK;
}

static void put_head(const sl_study_spec_t *spec, const char *study_id, sl_buf_t *b) {
    sl_buf_printf(b, "{\n  \"study\": \"%s\",\n  \"study_id\": \"%s\",\n", spec->name, study_id);
    sl_buf_printf(b, "  \"searcher\": \"%s\",\n  \"scheduler\": \"%s\",\n",
                  sl_search_name(spec->searcher), sl_sched_name(spec->scheduler));
    sl_buf_printf(b, "  \"partial_training_epochs\": %d,\n  \"full_training_epochs\": %d,\n",
                  spec->rungs[0], spec->max_epochs);
    sl_buf_printf(b, "  \"objectives\": [");
    for (int o = 0; o < spec->objective_count; o++)
        sl_buf_printf(b, "%s{\"metric\": \"%s\", \"goal\": \"%s\"}", o ? ", " : "",
                      spec->objectives[o].metric, spec->objectives[o].maximize ? "max" : "min");
    sl_buf_printf(b, "],\n");
}

sl_err sl_report_models_json(const sl_study_spec_t *spec, const char *study_id,
                             const sl_trial_result_t *rs, size_t count, int top, sl_buf_t *out) {
    size_t *idx = order_results(spec, rs, count);
    if (!idx)
        return SL_ENOMEM;
    put_head(spec, study_id, out);
    sl_buf_printf(out, "  \"trials\": %zu,\n  \"models\": [\n", count);
    int shown = 0;
    sl_err err = SL_OK;
    for (size_t i = 0; i < count && shown < top; i++) {
        const sl_trial_result_t *r = &rs[idx[i]];
        if (isnan(r->trial->objectives[0]))
            break;
        if (shown)
            sl_buf_printf(out, ",\n");
        if ((err = put_trial(spec, out, r, shown + 1)))
            break;
        shown++;
    }
    sl_buf_printf(out, "\n  ]\n}\n");
    sl_free(idx);
    if (!err && out->failed)
        err = SL_ENOMEM;
    return err;
}

sl_err sl_report_pareto_json(const sl_study_spec_t *spec, const char *study_id,
                             const sl_trial_result_t *rs, size_t count, sl_buf_t *out) {
    int dims = spec->objective_count;
    double *pts = sl_malloc((count ? count : 1) * (size_t)dims * sizeof *pts);
    size_t *map = sl_malloc((count ? count : 1) * sizeof *map);
    size_t *front = sl_malloc((count ? count : 1) * sizeof *front);
    size_t *idx = order_results(spec, rs, count);
    sl_err err = SL_ENOMEM;
    if (!pts || !map || !front || !idx)
        goto fail;
    bool maximize[SL_STUDY_MAX_OBJECTIVES];
    for (int d = 0; d < dims; d++)
        maximize[d] = spec->objectives[d].maximize;
    /* only trials with every objective, in leaderboard order */
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        const sl_trial_t *t = rs[idx[i]].trial;
        bool all = true;
        for (int d = 0; d < dims; d++)
            all = all && isfinite(t->objectives[d]);
        if (!all)
            continue;
        for (int d = 0; d < dims; d++)
            pts[n * (size_t)dims + d] = t->objectives[d];
        map[n++] = idx[i];
    }
    size_t fn = sl_pareto_front(pts, n, dims, maximize, front);
    put_head(spec, study_id, out);
    sl_buf_printf(out, "  \"trials\": %zu,\n  \"front\": [\n", n);
    err = SL_OK;
    for (size_t i = 0; i < fn && !err; i++) {
        if (i)
            sl_buf_printf(out, ",\n");
        err = put_trial(spec, out, &rs[map[front[i]]], 0);
    }
    sl_buf_printf(out, "\n  ]\n}\n");
    if (!err && out->failed)
        err = SL_ENOMEM;
fail:
    sl_free(pts);
    sl_free(map);
    sl_free(front);
    sl_free(idx);
    return err;
}

sl_err sl_report_leaderboard(const sl_study_spec_t *spec, const sl_trial_result_t *rs,
                             size_t count, sl_buf_t *out) {
    size_t *idx = order_results(spec, rs, count);
    if (!idx)
        return SL_ENOMEM;
    sl_buf_printf(out, "%-4s  %-16s", "rank", "trial");
    for (int o = 0; o < spec->objective_count; o++)
        sl_buf_printf(out, "  %12.12s", spec->objectives[o].metric);
    sl_buf_printf(out, "  %6s  %-9s  %s\n", "epochs", "state", "config");
    char json[SL_CONFIG_JSON_MAX];
    for (size_t i = 0; i < count; i++) {
        const sl_trial_t *t = rs[idx[i]].trial;
        size_t len;
        if (sl_space_encode(spec, &t->config, json, sizeof json, &len) != SL_OK)
            snprintf(json, sizeof json, "?");
        sl_buf_printf(out, "%-4zu  %-16s", i + 1, t->id);
        for (int o = 0; o < spec->objective_count; o++) {
            if (isfinite(t->objectives[o]))
                sl_buf_printf(out, "  %12.6g", t->objectives[o]);
            else
                sl_buf_printf(out, "  %12s", "-");
        }
        sl_buf_printf(out, "  %6d  %-9s  %s\n", t->epochs_done, sl_trial_state_name(t->state),
                      json);
    }
    sl_free(idx);
    return out->failed ? SL_ENOMEM : SL_OK;
}

/* ---- integration helpers ---- */

sl_err sl_report_encode(const sl_report_t *r, char *out, size_t out_cap, size_t *out_len) {
    size_t n = 0;
    int w = snprintf(out, out_cap, "{\"epoch\":%d", r->epoch);
    if (w < 0 || (size_t)w >= out_cap)
        return SL_ETOOBIG;
    n = (size_t)w;
    for (int i = 0; i < r->metric_count; i++) {
        if (!metric_name_ok(r->metrics[i].name) || !isfinite(r->metrics[i].value))
            return SL_EINVAL;
        char num[40];
        /* shortest text that reads back to the same double */
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(num, sizeof num, "%.*g", prec, r->metrics[i].value);
            if (strtod(num, NULL) == r->metrics[i].value)
                break;
        }
        w = snprintf(out + n, out_cap - n, ",\"%s\":%s", r->metrics[i].name, num);
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

static void add_metric(sl_report_t *r, const char *name, double v) {
    if (!isfinite(v) || r->metric_count == SL_REPORT_MAX_METRICS)
        return;
    sl_metric_t *m = &r->metrics[r->metric_count++];
    snprintf(m->name, sizeof m->name, "%s", name);
    m->value = v;
}

void sl_report_from_epoch(const sl_nn_epoch_t *m, uint64_t params, uint64_t flops,
                          sl_report_t *out) {
    memset(out, 0, sizeof *out);
    out->epoch = m->epoch;
    add_metric(out, "train_loss", m->train_loss);
    add_metric(out, "train_acc", m->train_acc);
    if (m->has_val) {
        add_metric(out, "val_loss", m->val_loss);
        add_metric(out, "val_acc", m->val_acc);
    }
    if (m->has_test) {
        add_metric(out, "test_loss", m->test_loss);
        add_metric(out, "test_acc", m->test_acc);
    }
    add_metric(out, "lr", m->lr);
    add_metric(out, "seconds", m->seconds);
    add_metric(out, "params", (double)params);
    add_metric(out, "flops", (double)flops);
}

sl_err sl_report_status(const sl_study_spec_t *spec, const sl_trial_result_t *rs, size_t count,
                        sl_buf_t *out) {
    sl_buf_printf(out, "%-16s  %-9s  %7s  %-10s", "trial", "state", "epoch", "owner");
    for (int o = 0; o < spec->objective_count; o++)
        sl_buf_printf(out, "  %10.10s", spec->objectives[o].metric);
    sl_buf_printf(out, "  %s\n", "config");
    /* in proposal order */
    size_t *idx = sl_malloc((count ? count : 1) * sizeof *idx);
    if (!idx)
        return SL_ENOMEM;
    for (size_t i = 0; i < count; i++) {
        size_t j = i;
        while (j > 0 && rs[idx[j - 1]].trial->ordinal > rs[i].trial->ordinal) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    char json[SL_CONFIG_JSON_MAX], ep[24];
    for (size_t k = 0; k < count; k++) {
        const sl_trial_result_t *r = &rs[idx[k]];
        const sl_trial_t *t = r->trial;
        size_t len;
        if (sl_space_encode(spec, &t->config, json, sizeof json, &len) != SL_OK)
            snprintf(json, sizeof json, "?");
        snprintf(ep, sizeof ep, "%d/%d", t->epochs_done,
                 spec->rungs[t->rung >= 0 && t->rung < spec->rung_count ? t->rung : 0]);
        sl_buf_printf(out, "%-16s  %-9s  %7s  %-10.10s", t->id, sl_trial_state_name(t->state), ep,
                      r->owner ? r->owner : "-");
        for (int o = 0; o < spec->objective_count; o++) {
            if (isfinite(t->objectives[o]))
                sl_buf_printf(out, "  %10.4g", t->objectives[o]);
            else
                sl_buf_printf(out, "  %10s", "-");
        }
        sl_buf_printf(out, "  %s\n", json);
    }
    sl_free(idx);
    return out->failed ? SL_ENOMEM : SL_OK;
}
