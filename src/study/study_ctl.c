/* The study runtime's control commands (submit, status, results, logs,
 * fetch, plot, cancel): see include/starling/study_node.h. They answer
 * from this peer's replica. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "starling/platform.h"
#include "study/study_keys.h"
#include "study/study_node_internal.h"

/* ---- control commands ---- */

static char *arg_str(const sl_ctl_req_t *req, size_t i) {
    if (i >= req->arg_count)
        return NULL;
    char *s = sl_malloc(req->args[i].len + 1);
    if (!s)
        return NULL;
    memcpy(s, req->args[i].ptr, req->args[i].len);
    s[req->args[i].len] = 0;
    return s;
}

/* Replies with a large body in parts of up to 1 MiB. */
static sl_err reply_big(sl_ctl_call_t *call, const void *data, size_t len) {
    const uint8_t *p = data;
    size_t part = 1u << 20;
    do {
        size_t n = len > part ? part : len;
        sl_err err = sl_ctl_reply(call, SL_OK, p, n, len > n);
        if (err != SL_OK)
            return err;
        p += n;
        len -= n;
    } while (len > 0);
    return SL_OK;
}

static sl_err cmd_submit(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                         sl_ctl_call_t *call) {
    sl_study_node_t *sn = ctx;
    if (req->arg_count != 1)
        return sl_ctl_reply_text(call, SL_EINVAL, "usage: submit STUDY_JSON");
    /* checked before anything is written: a spec the store cannot hold
       once left study/ID/start behind (the spec's put failed after it) */
    if (req->args[0].len > SL_STORE_MAX_VALUE_LEN) {
        sl_node_bad_input(node, "study");
        return sl_ctl_reply_text(call, SL_ETOOBIG,
                          "study refused: the study file is %zu bytes, over the %d a stored "
                          "value may hold; shorten it (its search space, its command)",
                          req->args[0].len, SL_STORE_MAX_VALUE_LEN);
    }
    sl_study_spec_t *spec = sl_calloc(1, sizeof *spec);
    if (!spec)
        return SL_ENOMEM;
    char why[512] = "";
    sl_err err = sl_study_spec_parse((const char *)req->args[0].ptr, req->args[0].len, spec,
                                     why, sizeof why);
    if (err != SL_OK) {
        sl_free(spec);
        return sl_ctl_reply_text(call, err, "study refused: %s", why);
    }
    if (spec->trainer == SL_TRAINER_COMMAND && !sl_node_commands_allowed(node)) {
        /* anyone who reaches an open cluster could run commands as the
           peers' user (docs/security.md) */
        sl_free(spec);
        sl_node_bad_input(node, "study");
        return sl_ctl_reply_text(call, SL_EAUTH,
                          "study refused: command trainers are off in an open cluster (anyone "
                          "who reaches it could run commands as the peers' user); start every "
                          "peer with --key FILE, or with --allow-commands if every client that "
                          "can reach the peers is trusted");
    }
    char id[SL_TRIAL_ID_LEN + 1], key[SL_STUDY_KEY_MAX], body[256];
    sl_study_spec_id(spec, id);
    err = sl_study_key_build(key, sizeof key, SL_STUDY_KEY_SPEC, id, NULL, 0, NULL);
    const uint8_t *v;
    size_t vl;
    bool exists = err == SL_OK && sl_study_node_get_str(sn, key, &v, &vl) == SL_OK;
    if (!exists) {
        char start[32];
        snprintf(start, sizeof start, "%" PRIu64, sl_study_node_wall_ms());
        char sk[SL_STUDY_KEY_MAX];
        if (err == SL_OK)
            err = sl_study_key_build(sk, sizeof sk, SL_STUDY_KEY_START, id, NULL, 0, NULL);
        if (err == SL_OK)
            err = sl_study_node_put_now(sn, sk, start, strlen(start));
        if (err == SL_OK)
            err = sl_study_node_put_now(sn, key, (const char *)req->args[0].ptr, req->args[0].len);
        if (err != SL_OK) {
            sl_free(spec);
            return sl_ctl_reply_text(call, err, "cannot store the study: %s", sl_strerror(err));
        }
        sl_log(SL_LOG_NOTICE, "STUDY-SUBMIT", "study %s (%s) submitted: %s, %s, %u trials", id,
               spec->name, sl_search_name(spec->searcher), sl_sched_name(spec->scheduler),
               (unsigned)spec->budget_trials);
    }
    snprintf(body, sizeof body, "{\"study\":\"%s\",\"name\":\"%s\",\"new\":%s}", id, spec->name,
             exists ? "false" : "true");
    sl_free(spec);
    return sl_ctl_reply(call, SL_OK, body, strlen(body), false);
}

/* Resolves the first argument and builds the view; replies on error. */
static sl_err open_study(sl_study_node_t *sn, const sl_ctl_req_t *req, sl_ctl_call_t *call,
                         size_t want_args, view_t *v, bool *replied) {
    *replied = true;
    if (req->arg_count != want_args) {
        sl_ctl_reply_text(call, SL_EINVAL, "usage: %.*s STUDY%s", (int)req->cmd.len,
                   (const char *)req->cmd.ptr, want_args > 1 ? " TRIAL" : "");
        return SL_EINVAL;
    }
    char *a = arg_str(req, 0), id[SL_TRIAL_ID_LEN + 1];
    sl_err err = a ? sl_study_node_resolve(sn, a, id) : SL_ENOMEM;
    if (err != SL_OK) {
        sl_ctl_reply_text(call, SL_ENOTFOUND, "no study '%s' on this peer (peerctl submit prints the id)",
                   a ? a : "");
        sl_free(a);
        return err;
    }
    sl_free(a);
    err = sl_study_view_build(sn, id, v);
    if (err != SL_OK)
        sl_ctl_reply_text(call, err, "study %s: cannot read it: %s", id, sl_strerror(err));
    return err;
}

static cJSON *report_json(const sl_report_t *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "epoch", r->epoch);
    for (int i = 0; i < r->metric_count; i++)
        cJSON_AddNumberToObject(o, r->metrics[i].name, r->metrics[i].value);
    return o;
}

static sl_err cmd_status(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                         sl_ctl_call_t *call) {
    (void)node;
    sl_study_node_t *sn = ctx;
    view_t v;
    bool replied;
    if (open_study(sn, req, call, 1, &v, &replied) != SL_OK)
        return SL_OK;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "study", v.id);
    cJSON_AddStringToObject(root, "name", v.spec->name);
    cJSON_AddNumberToObject(root, "budget", v.spec->budget_trials);
    cJSON_AddNumberToObject(root, "max_epochs", v.spec->max_epochs);
    cJSON_AddStringToObject(root, "objective", v.spec->objectives[0].metric);
    char key[SL_STUDY_KEY_MAX];
    const uint8_t *fv;
    size_t fl;
    if (sl_study_key_build(key, sizeof key, SL_STUDY_KEY_FINISHED, v.id, NULL, 0, NULL) == SL_OK &&
        sl_study_node_get_str(sn, key, &fv, &fl) == SL_OK) {
        char b[200];
        snprintf(b, sizeof b, "%.*s", (int)(fl < 199 ? fl : 199), (const char *)fv);
        cJSON_AddStringToObject(root, "finished", b);
    } else {
        cJSON_AddNullToObject(root, "finished");
    }
    cJSON_AddBoolToObject(root, "cancelled", v.cancelled);
    cJSON *arr = cJSON_AddArrayToObject(root, "trials");
    for (size_t i = 0; i < v.count; i++) {
        row_t *r = &v.rows[i];
        cJSON *o = cJSON_CreateObject();
        char cfg[SL_CONFIG_JSON_MAX];
        size_t cl;
        cJSON_AddStringToObject(o, "trial", r->t.id);
        cJSON_AddNumberToObject(o, "ordinal", (double)r->t.ordinal);
        if (sl_space_encode(v.spec, &r->t.config, cfg, sizeof cfg, &cl) == SL_OK)
            cJSON_AddItemToObject(o, "config", cJSON_ParseWithLength(cfg, cl));
        cJSON_AddStringToObject(o, "owner", r->has_claim ? r->claim.owner : "");
        cJSON_AddNumberToObject(o, "claim_epoch", r->has_claim ? (double)r->claim.epoch : 0);
        cJSON_AddStringToObject(o, "state", sl_trial_state_name(r->t.state));
        cJSON_AddNumberToObject(o, "epoch", r->t.epochs_done);
        cJSON_AddNumberToObject(o, "rung", r->t.rung);
        cJSON_AddNumberToObject(o, "target", sl_sched_rung_epochs(v.spec, r->t.bracket, r->t.rung));
        cJSON_AddNumberToObject(o, "failures", r->failures);
        cJSON_AddNumberToObject(o, "checkpoint", r->ck_epoch);
        if (r->has_result)
            cJSON_AddStringToObject(o, "reason", r->result.reason);
        if (r->t.epochs_done > 0 && r->has_report[r->t.epochs_done - 1])
            cJSON_AddItemToObject(o, "metrics", report_json(&r->reports[r->t.epochs_done - 1]));
        cJSON_AddItemToArray(arr, o);
    }
    char *txt = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    sl_study_view_fini(&v);
    if (!txt)
        return SL_ENOMEM;
    sl_err err = reply_big(call, txt, strlen(txt));
    free(txt);
    return err;
}

/* The result writers' input from a view. */
static sl_trial_result_t *results_of(view_t *v, sl_report_t **packed) {
    sl_trial_result_t *rs = sl_calloc(v->count + 1, sizeof *rs);
    *packed = sl_calloc((v->count + 1) * (size_t)(v->spec->max_epochs + 1), sizeof **packed);
    if (!rs || !*packed) {
        sl_free(rs);
        sl_free(*packed);
        *packed = NULL;
        return NULL;
    }
    for (size_t i = 0; i < v->count; i++) {
        row_t *r = &v->rows[i];
        sl_report_t *p = *packed + i * (size_t)(v->spec->max_epochs + 1);
        int n = 0;
        for (int e = 1; e <= v->spec->max_epochs; e++)
            if (r->has_report[e - 1])
                p[n++] = r->reports[e - 1];
        rs[i].trial = &r->t;
        rs[i].epochs = p;
        rs[i].epoch_count = n;
        rs[i].owner = r->has_claim ? r->claim.owner : NULL;
    }
    return rs;
}

static sl_err cmd_results(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                          sl_ctl_call_t *call) {
    (void)node;
    sl_study_node_t *sn = ctx;
    view_t v;
    bool replied;
    if (open_study(sn, req, call, 1, &v, &replied) != SL_OK)
        return SL_OK;
    sl_report_t *packed = NULL;
    sl_trial_result_t *rs = results_of(&v, &packed);
    sl_buf_t lb = {0}, mb = {0}, pb = {0};
    sl_err err = rs ? SL_OK : SL_ENOMEM;
    if (err == SL_OK)
        err = sl_report_leaderboard(v.spec, rs, v.count, &lb);
    if (err == SL_OK)
        err = sl_report_models_json(v.spec, v.id, rs, v.count, 10, &mb);
    if (err == SL_OK)
        err = sl_report_pareto_json(v.spec, v.id, rs, v.count, &pb);
    if (err == SL_OK) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "study", v.id);
        cJSON_AddStringToObject(root, "leaderboard", lb.data ? lb.data : "");
        cJSON_AddItemToObject(root, "models", cJSON_Parse(mb.data ? mb.data : "null"));
        cJSON_AddItemToObject(root, "pareto", cJSON_Parse(pb.data ? pb.data : "null"));
        char *txt = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        err = txt ? reply_big(call, txt, strlen(txt)) : SL_ENOMEM;
        free(txt);
    } else {
        sl_ctl_reply_text(call, err, "cannot build the results: %s", sl_strerror(err));
        err = SL_OK;
    }
    sl_buf_fini(&lb);
    sl_buf_fini(&mb);
    sl_buf_fini(&pb);
    sl_free(rs);
    sl_free(packed);
    sl_study_view_fini(&v);
    return err;
}

static sl_err cmd_plot(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                       sl_ctl_call_t *call) {
    (void)node;
    sl_study_node_t *sn = ctx;
    view_t v;
    bool replied;
    if (open_study(sn, req, call, 1, &v, &replied) != SL_OK)
        return SL_OK;
    sl_report_t *packed = NULL;
    sl_trial_result_t *rs = results_of(&v, &packed);
    cJSON *root = cJSON_CreateObject();
    sl_buf_t b = {0};
    if (rs && sl_plot_curves(v.spec, rs, v.count, v.spec->objectives[0].metric, &b) == SL_OK &&
        b.data)
        cJSON_AddStringToObject(root, "curves.svg", b.data);
    sl_buf_fini(&b);
    memset(&b, 0, sizeof b);
    if (rs && v.spec->objective_count >= 2 &&
        sl_plot_pareto(v.spec, rs, v.count, 0, 1, &b) == SL_OK && b.data)
        cJSON_AddStringToObject(root, "pareto.svg", b.data);
    sl_buf_fini(&b);
    char *txt = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    sl_err err = txt ? reply_big(call, txt, strlen(txt)) : SL_ENOMEM;
    free(txt);
    sl_free(rs);
    sl_free(packed);
    sl_study_view_fini(&v);
    return err;
}

static row_t *find_row(view_t *v, const sl_ctl_req_t *req) {
    for (size_t i = 0; i < v->count; i++)
        if (req->args[1].len >= 4 && req->args[1].len <= SL_TRIAL_ID_LEN &&
            !memcmp(v->rows[i].t.id, req->args[1].ptr, req->args[1].len))
            return &v->rows[i];
    return NULL;
}

static sl_err cmd_logs(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                       sl_ctl_call_t *call) {
    (void)node;
    sl_study_node_t *sn = ctx;
    view_t v;
    bool replied;
    if (open_study(sn, req, call, 2, &v, &replied) != SL_OK)
        return SL_OK;
    row_t *r = find_row(&v, req);
    sl_err err;
    if (!r) {
        err = sl_ctl_reply_text(call, SL_ENOTFOUND, "study %s has no trial '%.*s'", v.id,
                         (int)req->args[1].len, (const char *)req->args[1].ptr);
    } else {
        sl_buf_t b = {0};
        err = sl_study_node_log(sn, v.id, r->t.id, &b);
        if (err == SL_OK)
            err = b.len ? reply_big(call, b.data, b.len) : sl_ctl_reply(call, SL_OK, "", 0, false);
        else
            err = sl_ctl_reply_text(call, err, "cannot read the log of %s: %s", r->t.id, sl_strerror(err));
        sl_buf_fini(&b);
    }
    sl_study_view_fini(&v);
    return err;
}

/* A fetch waiting for its trial's checkpoint blob. */
typedef struct {
    sl_ctl_call_t *call;                 /* deferred */
    char study[SL_TRIAL_ID_LEN + 1];
    char trial[SL_TRIAL_ID_LEN + 1];
    char dir[1100];                      /* where the checkpoint is restored */
} fetch_t;

/* The trained weights of a restored checkpoint: the builtin trainer's
 * checkpoint exported as .npz, or a command trial's first file. */
static sl_err export_weights(sl_study_node_t *sn, const fetch_t *f, int ep, uint8_t **data,
                             size_t *len, char *why, size_t cap) {
    view_t v;
    sl_err err = sl_study_view_build(sn, f->study, &v);
    if (err)
        return err;
    row_t *r = NULL;
    for (size_t i = 0; i < v.count; i++)
        if (!strcmp(v.rows[i].t.id, f->trial))
            r = &v.rows[i];
    char path[1300];
    if (!r) {
        err = SL_ENOTFOUND;
    } else if (v.spec->trainer == SL_TRAINER_BUILTIN) {
        /* load the checkpoint into a trainer and export the weights */
        sl_nn_train_cfg_t cfg;
        char model[SL_STUDY_TEMPLATE_MAX];
        sl_nn_data_t *tr = NULL, *te = NULL;
        sl_nn_backend_t *be = NULL;
        sl_nn_trainer_t *tn = NULL;
        err = sl_study_train_cfg(v.spec, &r->t.config, r->t.id, ep, &cfg, model, sizeof model,
                                 why, cap);
        /* the same settings as the run (the checkpoint checks them); this
           loads the data set and blocks the loop for about a second */
        if (err == SL_OK)
            err = sl_nn_data_load(v.spec->dataset, &tr, &te, why, cap);
        if (err == SL_OK)
            err = sl_nn_backend_open("cpu", 1, &be, why, cap);
        if (err == SL_OK)
            err = sl_nn_trainer_new(be, &cfg, tr, te, &tn, why, cap);
        snprintf(path, sizeof path, "%s/checkpoint.slck", f->dir);
        if (err == SL_OK)
            err = sl_nn_checkpoint_load(tn, path, why, cap);
        snprintf(path, sizeof path, "%s/model.npz", f->dir);
        if (err == SL_OK)
            err = sl_nn_export_npz(tn, path, why, cap);
        sl_nn_trainer_destroy(&tn);
        sl_nn_backend_destroy(&be);
        sl_nn_data_destroy(&tr);
        sl_nn_data_destroy(&te);
    } else {
        char names[MAX_FILES][128];
        int n = sl_study_dir_files(f->dir, names, MAX_FILES);
        snprintf(path, sizeof path, "%s/%.127s", f->dir, n > 0 ? names[0] : "none");
    }
    if (err == SL_OK)
        err = sl_plat_read_file(path, 256u << 20, data, len);
    sl_study_view_fini(&v);
    return err;
}

static void on_fetch_restored(sl_study_node_t *sn, void *ctx, int ep, const char *why) {
    fetch_t *f = ctx;
    if (ep > 0) {
        uint8_t *data = NULL;
        size_t len = 0;
        char ewhy[256] = "";
        sl_err err = export_weights(sn, f, ep, &data, &len, ewhy, sizeof ewhy);
        if (err == SL_OK)
            reply_big(f->call, data, len);
        else
            sl_ctl_reply_text(f->call, err, "cannot export trial %s: %s", f->trial,
                       ewhy[0] ? ewhy : sl_strerror(err));
        sl_free(data);
    } else if (ep == 0) {
        sl_ctl_reply_text(f->call, SL_ENOTFOUND, "trial %s has no replicated checkpoint%s%s", f->trial,
                   why ? ": " : " yet", why ? why : "");
    }
    sl_plat_remove_tree(f->dir); /* (the fetch's own directory) */
    sl_ctl_call_free(&f->call);
    sl_free(f);
}

/* fetch STUDY TRIAL: the reply comes once the trial's checkpoint blob is
 * here (fetched from its holders if need be). */
static sl_err cmd_fetch(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                        sl_ctl_call_t *call) {
    (void)node;
    sl_study_node_t *sn = ctx;
    static unsigned fetches; /* distinct directories for fetches at once */
    view_t v;
    bool replied;
    if (open_study(sn, req, call, 2, &v, &replied) != SL_OK)
        return SL_OK;
    row_t *r = find_row(&v, req);
    sl_err err = SL_OK;
    fetch_t *f = NULL;
    if (!r) {
        err = sl_ctl_reply_text(call, SL_ENOTFOUND, "study %s has no trial '%.*s'", v.id,
                         (int)req->args[1].len, (const char *)req->args[1].ptr);
    } else if (!(f = sl_calloc(1, sizeof *f)) || !(f->call = sl_ctl_defer(call))) {
        sl_free(f);
        err = SL_ENOMEM;
    } else {
        memcpy(f->study, v.id, sizeof f->study);
        memcpy(f->trial, r->t.id, sizeof f->trial);
        snprintf(f->dir, sizeof f->dir, "%.1000s/fetch-%s-%u", sn->root, r->t.id, fetches++);
        sl_plat_mkdirs(f->dir, 0700);
    }
    sl_study_view_fini(&v);
    if (f && f->call)
        sl_study_ckpt_restore(sn, f->study, f->trial, f->dir, on_fetch_restored, f);
    return err;
}

static sl_err cmd_cancel(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                         sl_ctl_call_t *call) {
    (void)node;
    sl_study_node_t *sn = ctx;
    view_t v;
    bool replied;
    if (open_study(sn, req, call, 1, &v, &replied) != SL_OK)
        return SL_OK;
    char key[SL_STUDY_KEY_MAX];
    static const char cancelled[] = "cancelled";
    sl_err err = sl_study_key_build(key, sizeof key, SL_STUDY_KEY_CANCEL, v.id, NULL, 0, NULL);
    if (err == SL_OK)
        err = sl_study_node_put_now(sn, key, cancelled, sizeof cancelled - 1);
    char body[128];
    snprintf(body, sizeof body, "{\"study\":\"%s\",\"cancelled\":true}", v.id);
    sl_study_view_fini(&v);
    if (err != SL_OK)
        return sl_ctl_reply_text(call, err, "cannot cancel: %s", sl_strerror(err));
    return sl_ctl_reply(call, SL_OK, body, strlen(body), false);
}

sl_err sl_study_ctl_register(sl_study_node_t *sn) {
    static const struct {
        const char *name;
        sl_ctl_fn fn;
    } cmds[] = {{"submit", cmd_submit}, {"status", cmd_status}, {"results", cmd_results},
                {"logs", cmd_logs},     {"fetch", cmd_fetch},   {"plot", cmd_plot},
                {"cancel", cmd_cancel}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        sl_err err = sl_node_ctl_register(sn->node, cmds[i].name, cmds[i].fn, sn);
        if (err != SL_OK)
            return err;
    }
    return SL_OK;
}
