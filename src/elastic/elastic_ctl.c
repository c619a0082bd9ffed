/* The control commands of elastic jobs. They share the study commands'
 * names (docs/cli.md): each takes over its study twin with
 * sl_node_ctl_chain and answers for a job (a job file, a job id or name),
 * passing anything else on to the studies. What a job's status says is
 * read from the replica: the rendezvous's worlds and the records the
 * peers report (proto/elastic.md "Progress records"). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elastic/elastic_node_internal.h"
#include "starling/platform.h"

enum { C_SUBMIT, C_STATUS, C_RESULTS, C_LOGS, C_FETCH, C_PLOT, C_CANCEL, C_COUNT };
static const char *const cmd_names[C_COUNT] = {"submit", "status", "results", "logs",
                                               "fetch",  "plot",   "cancel"};

/* Replies with a JSON object (freed), in parts of up to 1 MiB. */
static sl_err reply_json(sl_ctl_call_t *call, cJSON *o) {
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text)
        return SL_ENOMEM;
    const char *p = text;
    size_t len = strlen(text), part = 1u << 20;
    sl_err err;
    do {
        size_t n = len > part ? part : len;
        err = sl_ctl_reply(call, SL_OK, p, n, len > n);
        p += n;
        len -= n;
    } while (err == SL_OK && len > 0);
    cJSON_free(text);
    return err;
}

/* The job a request's first argument names, with at most `max_args`
 * arguments. NULL when the request is answered here already: passed on to
 * the studies (not a job) or refused (usage), *err what to return. */
static en_job_t *job_for(sl_elastic_node_t *en, int c, sl_node_t *node, const sl_ctl_req_t *req,
                         sl_ctl_call_t *call, size_t max_args, sl_err *err) {
    static const char *const usage[C_COUNT] = {"", "status JOB", "results JOB",
                                               "logs JOB [PEER]", "fetch JOB", "plot JOB",
                                               "cancel JOB"};
    en_job_t *j = req->arg_count >= 1 ? sl_en_lookup(en, (const char *)req->args[0].ptr,
                                                       req->args[0].len)
                                      : NULL;
    if (!j)
        *err = en->prev[c].fn(en->prev[c].ctx, node, req, call);
    else if (req->arg_count > max_args) {
        *err = sl_ctl_reply_text(call, SL_EINVAL, "usage: %s", usage[c]);
        j = NULL;
    }
    return j;
}

/* ---- what the replica holds of a job ---- */

typedef struct {
    cJSON *starts;  /* start/R records, with "round" */
    cJSON *epochs;  /* m/E records */
    cJSON *curve;   /* c/S records */
    cJSON *fails;   /* fail/P records, with "peer" */
    cJSON *logs;    /* log/P texts by peer */
    cJSON *prog;    /* the prog record */
    cJSON *ckpt;    /* the ckpt record */
    cJSON *done;    /* the done record */
    bool cancelled; /* a cancel record */
} reports_t;

static void reports_fini(reports_t *r) {
    cJSON_Delete(r->starts);
    cJSON_Delete(r->epochs);
    cJSON_Delete(r->curve);
    cJSON_Delete(r->fails);
    cJSON_Delete(r->logs);
    cJSON_Delete(r->prog);
    cJSON_Delete(r->ckpt);
    cJSON_Delete(r->done);
}

/* A report record's value: a JSON object, else NULL (counted nowhere: the
 * rendezvous never reads these, a reader shows what parses). */
static cJSON *object_of(const uint8_t *val, size_t len) {
    if (len > SL_ELASTIC_VALUE_MAX)
        return NULL;
    cJSON *o = cJSON_ParseWithLength((const char *)val, len);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static bool scan_report(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e) {
    reports_t *r = ctx;
    sl_elastic_key_t k;
    if (e->type != SL_CRDT_LWW || sl_elastic_key_parse((const char *)key, key_len, &k, NULL, 0))
        return true;
    cJSON *o = NULL;
    switch (k.kind) {
    case SL_ELASTIC_KEY_CANCEL: r->cancelled = true; break;
    case SL_ELASTIC_KEY_LOG: {
        char *text = sl_malloc(e->val_len + 1);
        if (!text)
            break;
        memcpy(text, e->val, e->val_len);
        text[e->val_len] = 0; /* (a NUL inside cuts the shown text there) */
        cJSON_AddItemToObject(r->logs, k.peer, cJSON_CreateString(text));
        sl_free(text);
        break;
    }
    case SL_ELASTIC_KEY_START:
    case SL_ELASTIC_KEY_EPOCH:
    case SL_ELASTIC_KEY_CURVE:
    case SL_ELASTIC_KEY_FAIL:
        if (!(o = object_of(e->val, e->val_len)))
            break;
        if (k.kind == SL_ELASTIC_KEY_FAIL) {
            cJSON_AddStringToObject(o, "peer", k.peer);
            cJSON_AddItemToArray(r->fails, o);
        } else {
            cJSON_AddNumberToObject(o, k.kind == SL_ELASTIC_KEY_START   ? "round"
                                       : k.kind == SL_ELASTIC_KEY_EPOCH ? "epoch"
                                                                        : "step",
                                    (double)k.round);
            cJSON_AddItemToArray(k.kind == SL_ELASTIC_KEY_START   ? r->starts
                                 : k.kind == SL_ELASTIC_KEY_EPOCH ? r->epochs
                                                                  : r->curve,
                                 o);
        }
        break;
    case SL_ELASTIC_KEY_PROG: cJSON_Delete(r->prog); r->prog = object_of(e->val, e->val_len); break;
    case SL_ELASTIC_KEY_CKPT: cJSON_Delete(r->ckpt); r->ckpt = object_of(e->val, e->val_len); break;
    case SL_ELASTIC_KEY_DONE: cJSON_Delete(r->done); r->done = object_of(e->val, e->val_len); break;
    default: break;
    }
    return true;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *x = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static const char *sort_key;
static int by_num(const void *a, const void *b) {
    double x = num(*(cJSON *const *)a, sort_key), y = num(*(cJSON *const *)b, sort_key);
    return (x > y) - (x < y);
}

/* Sorts an array of objects by a numeric field (the store's order is its own). */
static void sort_by(cJSON *arr, const char *field) {
    int n = cJSON_GetArraySize(arr);
    if (n < 2)
        return;
    cJSON **items = sl_calloc((size_t)n, sizeof *items);
    if (!items)
        return;
    for (int i = n - 1; i >= 0; i--)
        items[i] = cJSON_DetachItemFromArray(arr, i);
    sort_key = field;
    qsort(items, (size_t)n, sizeof *items, by_num);
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, items[i]);
    sl_free(items);
}

static void reports_read(sl_elastic_node_t *en, const en_job_t *j, reports_t *r) {
    memset(r, 0, sizeof *r);
    r->starts = cJSON_CreateArray();
    r->epochs = cJSON_CreateArray();
    r->curve = cJSON_CreateArray();
    r->fails = cJSON_CreateArray();
    r->logs = cJSON_CreateObject();
    char prefix[32];
    int n = snprintf(prefix, sizeof prefix, "job/%s/", j->id);
    sl_store_scan(sl_store_node_store(en->store), prefix, (size_t)n, scan_report, r);
    sort_by(r->starts, "round");
    sort_by(r->epochs, "epoch");
    sort_by(r->curve, "step");
}

static const char *state_of(const en_job_t *j, const reports_t *r, const sl_elastic_ref_t *head) {
    if (r->done)
        return "done";
    if (r->cancelled)
        return "cancelled";
    double prog_ms = num(r->prog, "wall_ms");
    const cJSON *f;
    cJSON_ArrayForEach(f, r->fails) {
        if (!(num(f, "wall_ms") < prog_ms))
            return "failed"; /* nothing trained since */
    }
    (void)j;
    return head->round && num(r->prog, "round") == (double)head->round ? "running" : "waiting";
}

cJSON *sl_en_status_json(sl_elastic_node_t *en, en_job_t *j) {
    reports_t r;
    reports_read(en, j, &r);
    sl_elastic_view_t v;
    memset(&v, 0, sizeof v);
    sl_elastic_records_view(j->recs, &v);
    sl_elastic_ref_t head;
    memset(&head, 0, sizeof head);
    sl_elastic_head(&v, &head);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", "elastic");
    cJSON_AddStringToObject(o, "job", j->id);
    cJSON_AddStringToObject(o, "name", j->spec.name);
    cJSON_AddStringToObject(o, "state", state_of(j, &r, &head));
    cJSON_AddStringToObject(o, "trainer", j->spec.trainer == SL_ELASTIC_TRAINER_BUILTIN
                                              ? "builtin"
                                              : "command");
    cJSON *nodes = cJSON_AddObjectToObject(o, "nodes");
    cJSON_AddNumberToObject(nodes, "min", j->spec.min_nodes);
    cJSON_AddNumberToObject(nodes, "max", j->spec.max_nodes);
    double step = num(r.prog, "step"), epoch = num(r.prog, "epoch");
    if (r.done && isfinite(num(r.done, "step"))) { /* (prog is written at most every 250 ms) */
        step = num(r.done, "step");
        epoch = j->spec.epochs;
    }
    cJSON_AddNumberToObject(o, "step", isfinite(step) ? step : 0);
    cJSON_AddNumberToObject(o, "epoch", isfinite(epoch) ? epoch : 0);
    cJSON_AddNumberToObject(o, "epochs", j->spec.epochs);
    cJSON_AddNumberToObject(o, "round", (double)head.round);
    cJSON *world = cJSON_AddArrayToObject(o, "world");
    for (size_t i = 0; i < v.world_count; i++)
        if (sl_elastic_ref_eq(&v.worlds[i]->id, &head))
            for (uint32_t m = 0; m < v.worlds[i]->count; m++)
                cJSON_AddItemToArray(world, cJSON_CreateString(v.worlds[i]->members[m]));
    cJSON *metrics = cJSON_AddObjectToObject(o, "metrics");
    double loss = num(r.prog, "loss");
    if (isfinite(loss))
        cJSON_AddNumberToObject(metrics, "train_loss", loss);
    cJSON_AddItemToObject(metrics, "epochs", r.epochs);
    r.epochs = NULL;
    cJSON *rounds = cJSON_AddArrayToObject(o, "rounds");
    const cJSON *s;
    cJSON_ArrayForEach(s, r.starts) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "round", num(s, "round"));
        cJSON_AddItemToObject(x, "world", cJSON_Duplicate(cJSON_GetObjectItem(s, "world"), true));
        const cJSON *l = cJSON_GetObjectItem(s, "leader");
        cJSON_AddStringToObject(x, "leader", cJSON_IsString(l) ? l->valuestring : "");
        cJSON_AddNumberToObject(x, "start_step", num(s, "start_step"));
        cJSON_AddNumberToObject(x, "started_ms", num(s, "started_ms"));
        cJSON_AddItemToArray(rounds, x);
    }
    if (r.ckpt)
        cJSON_AddNumberToObject(o, "checkpoint_step", num(r.ckpt, "step"));
    if (cJSON_GetArraySize(r.fails) > 0) {
        cJSON_AddItemToObject(o, "failures", r.fails);
        r.fails = NULL;
    }
    if (r.done && cJSON_IsString(cJSON_GetObjectItem(r.done, "model")))
        cJSON_AddStringToObject(o, "model", cJSON_GetObjectItem(r.done, "model")->valuestring);
    reports_fini(&r);
    return o;
}

/* ---- the commands ---- */

static sl_err cmd_submit(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                         sl_ctl_call_t *call) {
    sl_elastic_node_t *en = ctx;
    if (req->arg_count != 1)
        return en->prev[C_SUBMIT].fn(en->prev[C_SUBMIT].ctx, node, req, call);
    cJSON *doc = cJSON_ParseWithLength((const char *)req->args[0].ptr, req->args[0].len);
    const cJSON *kind = cJSON_GetObjectItem(doc, "kind");
    bool elastic = cJSON_IsString(kind) && !strcmp(kind->valuestring, "elastic");
    cJSON_Delete(doc);
    if (!elastic)
        return en->prev[C_SUBMIT].fn(en->prev[C_SUBMIT].ctx, node, req, call);
    char why[512];
    sl_elastic_job_t job;
    sl_err err = sl_elastic_job_parse((const char *)req->args[0].ptr, req->args[0].len, &job,
                                      why, sizeof why);
    if (err != SL_OK)
        return sl_ctl_reply_text(call, err, "job refused: %s", why);
    if (job.trainer == SL_ELASTIC_TRAINER_COMMAND && !sl_node_commands_allowed(node))
        return sl_ctl_reply_text(call, SL_EAUTH,
                          "job refused: a command job runs a command on every peer, and this "
                          "cluster is open (no --key); start the peers with --key, or with "
                          "--allow-commands on a trusted network");
    char canon[SL_ELASTIC_JOB_CANON_MAX], id[SL_ELASTIC_JOB_ID_LEN + 1];
    size_t len;
    if ((err = sl_elastic_job_encode(&job, canon, sizeof canon, &len)) != SL_OK ||
        (err = sl_elastic_job_id(&job, id)) != SL_OK)
        return sl_ctl_reply_text(call, err, "job refused: %s", sl_strerror(err));
    /* followed here first: a peer that runs as many jobs as it can takes
       no new one (nothing is written; another peer can take it) */
    if (!sl_en_add(en, id, &job))
        return sl_ctl_reply_text(call, SL_EBUSY,
                          "this peer runs %d jobs, none of them over: submit through another "
                          "peer, or once one ends", EN_MAX_JOBS);
    char key[64];
    int kl = snprintf(key, sizeof key, "job/%s/spec", id);
    if ((err = sl_store_node_put(en->store, key, (size_t)kl, canon, len)) != SL_OK)
        return sl_ctl_reply_text(call, err, "cannot store the job: %s", sl_strerror(err));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", "elastic");
    cJSON_AddStringToObject(o, "job", id);
    cJSON_AddStringToObject(o, "name", job.name);
    return reply_json(call, o);
}

static sl_err cmd_status(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                         sl_ctl_call_t *call) {
    sl_elastic_node_t *en = ctx;
    sl_err err;
    en_job_t *j = job_for(en, C_STATUS, node, req, call, 1, &err);
    if (!j)
        return err;
    return reply_json(call, sl_en_status_json(en, j));
}

static sl_err cmd_results(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                          sl_ctl_call_t *call) {
    sl_elastic_node_t *en = ctx;
    sl_err err;
    en_job_t *j = job_for(en, C_RESULTS, node, req, call, 1, &err);
    if (!j)
        return err;
    cJSON *o = sl_en_status_json(en, j);
    reports_t r;
    reports_read(en, j, &r);
    cJSON *curve = cJSON_AddArrayToObject(o, "curve"); /* [step, loss, world, wall_ms] */
    const cJSON *c;
    cJSON_ArrayForEach(c, r.curve) {
        double row[4] = {num(c, "step"), num(c, "loss"), num(c, "world"), num(c, "wall_ms")};
        cJSON_AddItemToArray(curve, cJSON_CreateDoubleArray(row, 4));
    }
    if (r.done)
        cJSON_AddItemToObject(o, "done", cJSON_Duplicate(r.done, true));
    reports_fini(&r);
    return reply_json(call, o);
}

static sl_err cmd_logs(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                       sl_ctl_call_t *call) {
    sl_elastic_node_t *en = ctx;
    sl_err err;
    en_job_t *j = job_for(en, C_LOGS, node, req, call, 2, &err);
    if (!j)
        return err;
    reports_t r;
    reports_read(en, j, &r);
    sl_buf_t b = {0};
    const cJSON *l;
    cJSON_ArrayForEach(l, r.logs) {
        if (req->arg_count == 2 && (strlen(l->string) != req->args[1].len ||
                                    memcmp(l->string, req->args[1].ptr, req->args[1].len)))
            continue;
        sl_buf_printf(&b, "==> %s <==\n%s", l->string, l->valuestring);
    }
    reports_fini(&r);
    err = b.failed ? SL_ENOMEM : sl_ctl_reply(call, SL_OK, b.data ? b.data : "", b.len, false);
    sl_buf_fini(&b);
    return err;
}

static sl_err cmd_cancel(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                         sl_ctl_call_t *call) {
    sl_elastic_node_t *en = ctx;
    sl_err err;
    en_job_t *j = job_for(en, C_CANCEL, node, req, call, 1, &err);
    if (!j)
        return err;
    uint8_t buf[16];
    size_t n;
    sl_elastic_key_t k = {.kind = SL_ELASTIC_KEY_CANCEL};
    err = sl_elastic_cancel_encode(buf, sizeof buf, &n);
    if (err == SL_OK)
        err = sl_en_put(en, j, &k, buf, n);
    if (err != SL_OK)
        return sl_ctl_reply_text(call, err, "cannot cancel: %s", sl_strerror(err));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "job", j->id);
    cJSON_AddBoolToObject(o, "cancelled", true);
    return reply_json(call, o);
}

static sl_err cmd_plot(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                       sl_ctl_call_t *call) {
    sl_elastic_node_t *en = ctx;
    sl_err err;
    en_job_t *j = job_for(en, C_PLOT, node, req, call, 1, &err);
    if (!j)
        return err;
    reports_t r;
    reports_read(en, j, &r);
    int n = cJSON_GetArraySize(r.curve);
    double *x = sl_calloc((size_t)n + 1, sizeof *x), *loss = sl_calloc((size_t)n + 1, sizeof *loss),
           *t = sl_calloc((size_t)n + 1, sizeof *t), *size = sl_calloc((size_t)n + 1, sizeof *size);
    cJSON *o = NULL;
    if (x && loss && t && size) {
        int i = 0;
        const cJSON *c;
        double t0 = NAN;
        cJSON_ArrayForEach(c, r.curve) {
            x[i] = num(c, "step");
            loss[i] = num(c, "loss");
            if (!isfinite(t0))
                t0 = num(c, "wall_ms");
            t[i] = (num(c, "wall_ms") - t0) / 1000.0;
            size[i] = num(c, "world");
            i++;
        }
        sl_buf_t a = {0}, b = {0};
        char title[160];
        snprintf(title, sizeof title, "%s: training loss", j->spec.name);
        sl_plot_series(title, "step", "train loss", x, loss, (size_t)n, false, &a);
        snprintf(title, sizeof title, "%s: peers training", j->spec.name);
        sl_plot_series(title, "seconds", "world size", t, size, (size_t)n, true, &b);
        if (!a.failed && !b.failed) {
            o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "loss.svg", a.data ? a.data : "");
            cJSON_AddStringToObject(o, "world.svg", b.data ? b.data : "");
        }
        sl_buf_fini(&a);
        sl_buf_fini(&b);
    }
    sl_free(x);
    sl_free(loss);
    sl_free(t);
    sl_free(size);
    reports_fini(&r);
    return o ? reply_json(call, o) : SL_ENOMEM;
}

/* fetch JOB: the final model (.npz), copied here first if need be. */
typedef struct {
    sl_elastic_node_t *en;
    sl_ctl_call_t *call;
} fetch_t;

static void fetched(void *ctx, sl_err err, const uint8_t hash[SL_BLAKE2B_LEN]) {
    fetch_t *f = ctx;
    uint8_t *data = NULL;
    size_t len = 0;
    if (err == SL_OK)
        err = sl_blob_node_read(f->en->cfg.blobs, hash, &data, &len);
    if (err != SL_OK) {
        sl_ctl_reply_text(f->call, err, "cannot copy the model here: %s", sl_strerror(err));
    } else {
        const uint8_t *p = data;
        size_t part = 1u << 20;
        do {
            size_t n = len > part ? part : len;
            if (sl_ctl_reply(f->call, SL_OK, p, n, len > n) != SL_OK)
                break;
            p += n;
            len -= n;
        } while (len > 0);
    }
    sl_free(data);
    sl_ctl_call_free(&f->call);
    sl_free(f);
}

static sl_err cmd_fetch(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                        sl_ctl_call_t *call) {
    sl_elastic_node_t *en = ctx;
    sl_err err;
    en_job_t *j = job_for(en, C_FETCH, node, req, call, 1, &err);
    if (!j)
        return err;
    reports_t r;
    reports_read(en, j, &r);
    const cJSON *m = cJSON_GetObjectItem(r.done, "model");
    uint8_t h[SL_BLAKE2B_LEN];
    bool ok = cJSON_IsString(m) && strlen(m->valuestring) == 2 * SL_BLAKE2B_LEN &&
              sl_unhex(m->valuestring, 2 * SL_BLAKE2B_LEN, h);
    reports_fini(&r);
    if (!ok)
        return sl_ctl_reply_text(call, SL_ENOTFOUND,
                          j->spec.trainer == SL_ELASTIC_TRAINER_COMMAND
                              ? "job %s is a command job: its model is what its script saved"
                              : "job %s has no final model yet (it is not done)",
                          j->id);
    fetch_t *f = sl_calloc(1, sizeof *f);
    if (!f || !(f->call = sl_ctl_defer(call))) {
        sl_free(f);
        return SL_ENOMEM;
    }
    f->en = en;
    err = sl_blob_node_fetch(en->cfg.blobs, h, fetched, f);
    if (err != SL_OK) {
        sl_ctl_reply_text(f->call, err, "cannot copy the model here: %s", sl_strerror(err));
        sl_ctl_call_free(&f->call);
        sl_free(f);
    }
    return SL_OK;
}

sl_err sl_en_ctl_register(sl_elastic_node_t *en) {
    static const sl_ctl_fn fns[C_COUNT] = {cmd_submit, cmd_status, cmd_results, cmd_logs,
                                           cmd_fetch,  cmd_plot,   cmd_cancel};
    for (int c = 0; c < C_COUNT; c++) {
        sl_err err = sl_node_ctl_chain(en->node, cmd_names[c], fns[c], en, &en->prev[c].fn,
                                       &en->prev[c].ctx);
        if (err != SL_OK)
            return err;
    }
    return SL_OK;
}
