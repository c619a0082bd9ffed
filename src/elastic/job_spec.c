/* The elastic job file: a JSON object with "kind": "elastic", parsed with
 * cJSON into a validated sl_elastic_job_t. Unknown fields are refused and
 * every refusal names the field by its path and says what is wrong
 * ("nodes.max: must be in [1, 32], not 40"). The canonical encoding fills
 * every default in, in a fixed order; the job id is a hash of it. The
 * user's reference is docs/elastic.md ("The job file"); peers/examples/
 * elastic-*.json are examples. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/why.h"
#include "starling/elastic.h"
#include "starling/hash.h"
#include "starling/nn.h"

#define refuse(why, why_len, ...) sl_why(why, why_len, SL_EINVAL, __VA_ARGS__)

/* "path.key", or "key" at the top. */
#define FIELD(path, key) (path), (*(path) ? "." : ""), (key)

static const cJSON *get(const cJSON *obj, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* A number in [lo, hi] (lo_open: > lo, hi_open: < hi); absent keeps *out
 * unless required. */
static sl_err get_num(const cJSON *obj, const char *path, const char *key, bool required,
                      double lo, bool lo_open, double hi, bool hi_open, double *out, char *why,
                      size_t why_len) {
    const cJSON *v = get(obj, key);
    if (!v)
        return required ? refuse(why, why_len, "%s%s%s: required", FIELD(path, key)) : SL_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return refuse(why, why_len, "%s%s%s: must be a number", FIELD(path, key));
    double d = v->valuedouble;
    if ((lo_open ? d <= lo : d < lo) || (hi_open ? d >= hi : d > hi))
        return refuse(why, why_len, "%s%s%s: must be in %c%.15g, %.15g%c, not %.15g", FIELD(path, key),
                      lo_open ? '(' : '[', lo, hi, hi_open ? ')' : ']', d);
    *out = d;
    return SL_OK;
}

static sl_err get_u64(const cJSON *obj, const char *path, const char *key, bool required,
                      double lo, double hi, uint64_t *out, char *why, size_t why_len) {
    double d = (double)*out;
    sl_err err = get_num(obj, path, key, required, lo, false, hi, false, &d, why, why_len);
    if (err)
        return err;
    if (d != floor(d))
        return refuse(why, why_len, "%s%s%s: must be an integer, not %g", FIELD(path, key), d);
    *out = (uint64_t)d;
    return SL_OK;
}

static sl_err get_u32(const cJSON *obj, const char *path, const char *key, bool required,
                      uint32_t lo, uint32_t hi, uint32_t *out, char *why, size_t why_len) {
    uint64_t v = *out;
    sl_err err = get_u64(obj, path, key, required, lo, hi, &v, why, why_len);
    if (!err)
        *out = (uint32_t)v;
    return err;
}

static bool name_ok(const char *s) {
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
            return false;
    return true;
}

static sl_err parse_nodes(const cJSON *o, sl_elastic_job_t *j, char *why, size_t why_len) {
    static const char *const keys[] = {"min", "max", NULL};
    sl_err err;
    if (!o)
        return refuse(why, why_len, "nodes: required ({\"min\": N, \"max\": M})");
    if (!cJSON_IsObject(o))
        return refuse(why, why_len, "nodes: must be an object {\"min\": N, \"max\": M}");
    if ((err = sl_json_check_keys(o, "nodes", keys, why, why_len)) ||
        (err = get_u32(o, "nodes", "min", true, 1, SL_ELASTIC_MAX_NODES, &j->min_nodes, why,
                       why_len)) ||
        (err = get_u32(o, "nodes", "max", true, 1, SL_ELASTIC_MAX_NODES, &j->max_nodes, why,
                       why_len)))
        return err;
    if (j->max_nodes < j->min_nodes)
        return refuse(why, why_len, "nodes.max: must be >= nodes.min (%u), not %u",
                      j->min_nodes, j->max_nodes);
    return SL_OK;
}

static sl_err parse_trainer(const cJSON *t, sl_elastic_job_t *j, char *why, size_t why_len) {
    sl_err err;
    if (!t)
        return refuse(why, why_len, "trainer: required (an object with a \"type\")");
    if (!cJSON_IsObject(t))
        return refuse(why, why_len, "trainer: must be an object with a \"type\"");
    char type[16] = "";
    if ((err = sl_json_get_str(t, "trainer", "type", true, type, sizeof type, why, why_len)))
        return err;
    if (strcmp(type, "builtin") == 0) {
        static const char *const keys[] = {"type", "model", NULL};
        j->trainer = SL_ELASTIC_TRAINER_BUILTIN;
        if ((err = sl_json_check_keys(t, "trainer", keys, why, why_len)) ||
            (err = sl_json_get_str(t, "trainer", "model", true, j->model, sizeof j->model, why,
                           why_len)))
            return err;
        sl_nn_spec_t ns;
        char msg[200];
        if ((err = sl_nn_spec_parse(j->model, &ns, msg, sizeof msg)) == SL_ENOMEM)
            return err;
        if (err)
            return refuse(why, why_len, "trainer.model: \"%s\" does not parse: %s", j->model,
                          msg);
        return SL_OK;
    }
    if (strcmp(type, "command") == 0) {
        static const char *const keys[] = {"type", "command", "stop_grace_s", NULL};
        j->trainer = SL_ELASTIC_TRAINER_COMMAND;
        if ((err = sl_json_check_keys(t, "trainer", keys, why, why_len)) ||
            (err = sl_json_get_str(t, "trainer", "command", true, j->command, sizeof j->command, why,
                           why_len)) ||
            (err = get_u32(t, "trainer", "stop_grace_s", false, 1, 600, &j->stop_grace_s, why,
                           why_len)))
            return err;
        return SL_OK;
    }
    return refuse(why, why_len, "trainer.type: \"%s\" is not one of builtin, command", type);
}

static sl_err parse_dataset(const cJSON *root, sl_elastic_job_t *j, char *why,
                            size_t why_len) {
    sl_err err;
    const cJSON *ds = get(root, "dataset");
    if (!ds)
        return SL_OK;
    if (cJSON_IsString(ds))
        return sl_json_get_str(root, "", "dataset", true, j->dataset, sizeof j->dataset, why, why_len);
    if (!cJSON_IsObject(ds))
        return refuse(why, why_len, "dataset: must be a name or {\"name\": ...}");
    static const char *const keys[] = {"name", "limit", "val_split", NULL};
    if ((err = sl_json_check_keys(ds, "dataset", keys, why, why_len)) ||
        (err = sl_json_get_str(ds, "dataset", "name", true, j->dataset, sizeof j->dataset, why,
                       why_len)) ||
        (err = get_u64(ds, "dataset", "limit", false, 0, 1e12, &j->dataset_limit, why,
                       why_len)) ||
        (err = get_num(ds, "dataset", "val_split", false, 0, false, 0.9, false, &j->val_split,
                       why, why_len)))
        return err;
    return SL_OK;
}

static sl_err parse_optimizer(const cJSON *o, sl_elastic_job_t *j, char *why, size_t why_len) {
    static const char *const keys[] = {"type", "lr", "momentum", "weight_decay", NULL};
    sl_err err;
    if (!o)
        return SL_OK;
    if (!cJSON_IsObject(o))
        return refuse(why, why_len, "optimizer: must be an object {\"type\": ..., \"lr\": ...}");
    if ((err = sl_json_check_keys(o, "optimizer", keys, why, why_len)) ||
        (err = sl_json_get_str(o, "optimizer", "type", false, j->optimizer, sizeof j->optimizer, why,
                       why_len)))
        return err;
    sl_nn_opt_kind k;
    if (sl_nn_optim_parse(j->optimizer, &k) != SL_OK)
        return refuse(why, why_len,
                      "optimizer.type: \"%s\" is not one of sgd, nesterov, adam, adamw",
                      j->optimizer);
    if ((err = get_num(o, "optimizer", "lr", false, 0, true, 10, false, &j->lr, why,
                       why_len)) ||
        (err = get_num(o, "optimizer", "momentum", false, 0, false, 1, true, &j->momentum, why,
                       why_len)) ||
        (err = get_num(o, "optimizer", "weight_decay", false, 0, false, 1, true,
                       &j->weight_decay, why, why_len)))
        return err;
    return SL_OK;
}

static sl_err parse_schedule(const cJSON *o, sl_elastic_job_t *j, char *why, size_t why_len) {
    static const char *const keys[] = {"type", "step_epochs", "step_gamma", "warmup_epochs",
                                       NULL};
    sl_err err;
    if (!o)
        return SL_OK;
    if (!cJSON_IsObject(o))
        return refuse(why, why_len, "schedule: must be an object {\"type\": ...}");
    if ((err = sl_json_check_keys(o, "schedule", keys, why, why_len)) ||
        (err = sl_json_get_str(o, "schedule", "type", false, j->schedule, sizeof j->schedule, why,
                       why_len)))
        return err;
    sl_nn_schedule k;
    if (sl_nn_schedule_parse(j->schedule, &k) != SL_OK)
        return refuse(why, why_len, "schedule.type: \"%s\" is not one of none, step, cosine",
                      j->schedule);
    if ((err = get_u32(o, "schedule", "step_epochs", false, 1, SL_ELASTIC_MAX_EPOCHS,
                       &j->step_epochs, why, why_len)) ||
        (err = get_num(o, "schedule", "step_gamma", false, 0, true, 1, false, &j->step_gamma,
                       why, why_len)) ||
        (err = get_u32(o, "schedule", "warmup_epochs", false, 0, SL_ELASTIC_MAX_EPOCHS,
                       &j->warmup_epochs, why, why_len)))
        return err;
    return SL_OK;
}

static void defaults(sl_elastic_job_t *j) {
    memset(j, 0, sizeof *j);
    j->seed = 1;
    j->stop_grace_s = 10;
    j->val_split = 0.1;
    j->global_batch = 128;
    snprintf(j->optimizer, sizeof j->optimizer, "sgd");
    j->lr = 0.05;
    j->momentum = 0.9;
    snprintf(j->schedule, sizeof j->schedule, "none");
    j->step_epochs = 10;
    j->step_gamma = 0.1;
    j->checkpoint_every = 100;
}

sl_err sl_elastic_job_parse(const char *json, size_t len, sl_elastic_job_t *out, char *why,
                            size_t why_len) {
    static const char *const keys[] = {"kind",     "name",         "seed",
                                       "nodes",    "trainer",      "dataset",
                                       "epochs",   "global_batch", "optimizer",
                                       "schedule", "checkpoint_every", "description",
                                       NULL};
    if (why && why_len)
        why[0] = '\0';
    if (!json || !out)
        return refuse(why, why_len, "job: no input");
    if (len > SL_ELASTIC_JOB_MAX_LEN) {
        refuse(why, why_len, "job: over %d bytes", SL_ELASTIC_JOB_MAX_LEN);
        return SL_ETOOBIG;
    }
    sl_elastic_job_t *j = sl_calloc(1, sizeof *j);
    if (!j)
        return SL_ENOMEM;
    defaults(j);
    sl_err err = SL_EINVAL;
    cJSON *root = NULL;
    if ((err = sl_json_parse_object(json, len, "job", &root, why, why_len)))
        goto fail;
    char kind[16] = "";
    if ((err = sl_json_check_keys(root, "", keys, why, why_len)) ||
        (err = sl_json_get_str(root, "", "kind", true, kind, sizeof kind, why, why_len)))
        goto fail;
    if (strcmp(kind, "elastic") != 0) {
        err = refuse(why, why_len, "kind: must be \"elastic\", not \"%s\"", kind);
        goto fail;
    }
    if ((err = sl_json_get_str(root, "", "name", true, j->name, sizeof j->name, why, why_len)))
        goto fail;
    if (!name_ok(j->name)) {
        err = refuse(why, why_len, "name: use letters, digits, '_', '-' or '.'");
        goto fail;
    }
    /* seed: a non-negative integer that a double holds exactly */
    if ((err = get_u64(root, "", "seed", false, 0, 9007199254740991.0, &j->seed, why,
                       why_len)) ||
        (err = parse_nodes(get(root, "nodes"), j, why, why_len)) ||
        (err = parse_trainer(get(root, "trainer"), j, why, why_len)) ||
        (err = parse_dataset(root, j, why, why_len)) ||
        (err = get_u32(root, "", "epochs", true, 1, SL_ELASTIC_MAX_EPOCHS, &j->epochs, why,
                       why_len)) ||
        (err = get_u32(root, "", "global_batch", false, 1, SL_ELASTIC_MAX_BATCH,
                       &j->global_batch, why, why_len)) ||
        (err = get_u32(root, "", "checkpoint_every", false, 1, 1000000000u,
                       &j->checkpoint_every, why, why_len)))
        goto fail;
    const cJSON *opt = get(root, "optimizer"), *sched = get(root, "schedule");
    if (j->trainer == SL_ELASTIC_TRAINER_COMMAND && (opt || sched)) {
        err = refuse(why, why_len,
                     "%s: only the builtin trainer reads it (a command sets its own)",
                     opt ? "optimizer" : "schedule");
        goto fail;
    }
    if ((err = parse_optimizer(opt, j, why, why_len)) ||
        (err = parse_schedule(sched, j, why, why_len)))
        goto fail;
    if (j->trainer == SL_ELASTIC_TRAINER_BUILTIN) {
        if (!j->dataset[0]) {
            err = refuse(why, why_len,
                         "dataset: required for the builtin trainer (e.g. \"fashion-mnist\")");
            goto fail;
        }
        if (strcmp(j->dataset, "fashion-mnist") == 0 || strcmp(j->dataset, "mnist") == 0) {
            sl_nn_spec_t ns;
            char msg[200];
            uint64_t params, flops;
            sl_nn_shape_t mnist = {.channels = 1, .height = 28, .width = 28, .classes = 10};
            if (sl_nn_spec_parse(j->model, &ns, msg, sizeof msg) == SL_OK &&
                (err = sl_nn_spec_measure(&ns, &mnist, &params, &flops, msg, sizeof msg))) {
                if (err != SL_ENOMEM)
                    err = refuse(why, why_len,
                                 "trainer.model: \"%s\" does not fit 28x28 images: %s",
                                 j->model, msg);
                goto fail;
            }
        }
    }
    const cJSON *desc = get(root, "description");
    if (desc && !cJSON_IsString(desc)) {
        err = refuse(why, why_len, "description: must be a string");
        goto fail;
    }
    cJSON_Delete(root);
    *out = *j;
    sl_free(j);
    return SL_OK;
fail:
    cJSON_Delete(root);
    sl_free(j);
    return err ? err : SL_EINVAL;
}

/* Appends a JSON string (the parser refused control characters). */
static void put_str(char *out, size_t cap, size_t *n, const char *s) {
    char buf[2 * SL_ELASTIC_TEXT_MAX + 3];
    size_t k = 0;
    buf[k++] = '"';
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            buf[k++] = '\\';
        buf[k++] = *s;
    }
    buf[k++] = '"';
    buf[k] = '\0';
    int w = snprintf(out + (*n < cap ? *n : cap), *n < cap ? cap - *n : 0, "%s", buf);
    *n += (size_t)w;
}

/* The shortest of %.15g..%.17g that reads back as the same double. */
static const char *num(double v, char buf[32]) {
    for (int p = 15; p <= 17; p++) {
        snprintf(buf, 32, "%.*g", p, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

#define PUT(...)                                                                     \
    do {                                                                             \
        int w_ = snprintf(out + (n < cap ? n : cap), n < cap ? cap - n : 0, __VA_ARGS__); \
        n += (size_t)w_;                                                             \
    } while (0)

sl_err sl_elastic_job_encode(const sl_elastic_job_t *j, char *out, size_t cap, size_t *len) {
    if (!j || !out || cap == 0)
        return SL_EINVAL;
    size_t n = 0;
    PUT("{\"kind\":\"elastic\",\"name\":");
    put_str(out, cap, &n, j->name);
    PUT(",\"seed\":%llu,\"nodes\":{\"min\":%u,\"max\":%u},\"trainer\":{",
        (unsigned long long)j->seed, j->min_nodes, j->max_nodes);
    if (j->trainer == SL_ELASTIC_TRAINER_BUILTIN) {
        PUT("\"type\":\"builtin\",\"model\":");
        put_str(out, cap, &n, j->model);
    } else {
        PUT("\"type\":\"command\",\"command\":");
        put_str(out, cap, &n, j->command);
        PUT(",\"stop_grace_s\":%u", j->stop_grace_s);
    }
    PUT("}");
    if (j->dataset[0]) {
        PUT(",\"dataset\":{\"name\":");
        put_str(out, cap, &n, j->dataset);
        char b[32];
        PUT(",\"limit\":%llu,\"val_split\":%s}", (unsigned long long)j->dataset_limit,
            num(j->val_split, b));
    }
    PUT(",\"epochs\":%u,\"global_batch\":%u", j->epochs, j->global_batch);
    if (j->trainer == SL_ELASTIC_TRAINER_BUILTIN) {
        char b1[32], b2[32], b3[32], b4[32];
        PUT(",\"optimizer\":{\"type\":\"%s\",\"lr\":%s,\"momentum\":%s,"
            "\"weight_decay\":%s},\"schedule\":{\"type\":\"%s\",\"step_epochs\":%u,"
            "\"step_gamma\":%s,\"warmup_epochs\":%u}",
            j->optimizer, num(j->lr, b1), num(j->momentum, b2), num(j->weight_decay, b3),
            j->schedule, j->step_epochs, num(j->step_gamma, b4), j->warmup_epochs);
    }
    PUT(",\"checkpoint_every\":%u}", j->checkpoint_every);
    if (n >= cap)
        return SL_ETOOBIG;
    if (len)
        *len = n;
    return SL_OK;
}

sl_err sl_elastic_job_id(const sl_elastic_job_t *job, char out[SL_ELASTIC_JOB_ID_LEN + 1]) {
    char buf[SL_ELASTIC_JOB_CANON_MAX];
    size_t n;
    sl_err err = sl_elastic_job_encode(job, buf, sizeof buf, &n);
    if (err)
        return err;
    snprintf(out, SL_ELASTIC_JOB_ID_LEN + 1, "%016llx",
             (unsigned long long)sl_hash64(buf, n, 0x454c4153ull));
    return SL_OK;
}

bool sl_elastic_job_id_valid(const char *id, size_t len) {
    if (!id || len != SL_ELASTIC_JOB_ID_LEN)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return false;
    return true;
}
