/* Reports and results: a trial's stdout lines parse strictly (garbage is
 * an error code, never fatal); models.json and pareto.json are valid JSON
 * with the right trials; the leaderboard is ordered; the SVG plots hold
 * one curve per trial and the front. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

#include "starling/study.h"
#include "testlib.h"

static void test_parse_ok(void) {
    sl_report_t r;
    char why[128];
    const char *l = "{\"epoch\": 3, \"val_acc\": 0.91, \"loss\": 1e-3, \"done\": true}\n";
    CHECK_OK(sl_report_parse(l, strlen(l), &r, why, sizeof why));
    CHECK_INT(r.epoch, 3);
    CHECK_INT(r.metric_count, 3);
    CHECK_NEAR(sl_report_get(&r, "val_acc"), 0.91, 1e-12);
    CHECK_NEAR(sl_report_get(&r, "loss"), 0.001, 1e-12);
    CHECK_NEAR(sl_report_get(&r, "done"), 1, 0);
    CHECK_NEAR(sl_report_get(&r, "epoch"), 3, 0);
    CHECK(isnan(sl_report_get(&r, "nope")));
    const char *ws = "  {\"epoch\":1,\"a/b\":2}\r\n";
    CHECK_OK(sl_report_parse(ws, strlen(ws), &r, why, sizeof why));
    CHECK_NEAR(sl_report_get(&r, "a/b"), 2, 0);
}

static void test_parse_garbage(void) {
    struct {
        const char *line;
        sl_err err;
        const char *why;
    } cases[] = {
        {"Epoch 1/10: loss 0.3", SL_ENOTFOUND, "not a report"},
        {"", SL_ENOTFOUND, "not a report"},
        {"[1, 2]", SL_ENOTFOUND, "not a report"},
        {"{\"epoch\": 1, ", SL_EPROTO, "not valid JSON"},
        {"{\"epoch\": 1} trailing", SL_EPROTO, "text after"},
        {"{\"val_acc\": 0.9}", SL_EPROTO, "missing \"epoch\""},
        {"{\"epoch\": 0}", SL_ERANGE, "\"epoch\" must be an integer"},
        {"{\"epoch\": 2.5}", SL_ERANGE, "\"epoch\" must be an integer"},
        {"{\"epoch\": 1, \"acc\": \"high\"}", SL_EPROTO, "\"acc\" must be a number"},
        {"{\"epoch\": 1, \"acc\": {\"x\": 1}}", SL_EPROTO, "\"acc\" must be a number"},
        {"{\"epoch\": 1, \"acc\": null}", SL_EPROTO, "\"acc\" must be a number"},
        {"{\"epoch\": 1, \"acc\": 1e999}", SL_ERANGE, "not finite"},
        {"{\"epoch\": 1, \"a\": 1, \"a\": 2}", SL_EPROTO, "given twice"},
        {"{\"epoch\": 1, \"bad name\": 1}", SL_EPROTO, "not a metric name"},
        {"{\"epoch\": 1, \"\": 1}", SL_EPROTO, "not a metric name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_report_t r;
        char why[128] = "";
        sl_err err = sl_report_parse(cases[i].line, strlen(cases[i].line), &r, why, sizeof why);
        CHECK_MSG(err == cases[i].err, "case %zu: %s, want %s", i, sl_errname(err),
                  sl_errname(cases[i].err));
        CHECK_MSG(strstr(why, cases[i].why) != NULL, "case %zu: why \"%s\"", i, why);
    }
    /* bounds: too many metrics, too long a line */
    char line[SL_REPORT_LINE_MAX + 64];
    size_t n = (size_t)snprintf(line, sizeof line, "{\"epoch\": 1");
    for (int i = 0; i < SL_REPORT_MAX_METRICS + 1; i++)
        n += (size_t)snprintf(line + n, sizeof line - n, ", \"m%d\": %d", i, i);
    snprintf(line + n, sizeof line - n, "}");
    sl_report_t r;
    char why[128];
    CHECK_ERR(sl_report_parse(line, strlen(line), &r, why, sizeof why), SL_ETOOBIG);
    memset(line, ' ', sizeof line);
    line[0] = '{';
    line[sizeof line - 1] = '\0';
    CHECK_ERR(sl_report_parse(line, strlen(line) - 1, &r, why, sizeof why), SL_EPROTO);
    line[sizeof line - 2] = '}';
    memcpy(line + 1, "\"epoch\":1", 9);
    CHECK_ERR(sl_report_parse(line, strlen(line), &r, why, sizeof why), SL_ETOOBIG);
    /* random bytes never crash */
    sl_rng_t rng;
    sl_rng_seed(&rng, 1);
    for (int i = 0; i < 20000; i++) {
        char b[64];
        size_t len = sl_rng_below(&rng, sizeof b);
        for (size_t k = 0; k < len; k++)
            b[k] = "{}\":,0123456789.eE-+ epochacv[]tn\\"[sl_rng_below(&rng, 34)];
        if (len)
            b[0] = '{';
        (void)sl_report_parse(b, len, &r, why, sizeof why);
    }
}

/* ---- results ---- */

static const char *spec_json =
    "{\"name\": \"res\", \"dataset\": \"fashion-mnist\", \"trainer\": {\"type\": \"builtin\"},"
    " \"search_space\": {\"arch\": {\"type\": \"arch\", \"families\": [\"mlp\"], \"layers\": [1, 2, 3],"
    "  \"units\": [32, 64, 128, 256]}, \"lr\": {\"type\": \"real\", \"low\": 0.001, \"high\": 0.1}},"
    " \"scheduler\": {\"type\": \"fifo\", \"epochs\": 3},"
    " \"objectives\": [{\"metric\": \"val_acc\", \"goal\": \"max\"}, {\"metric\": \"params\", \"goal\": \"min\"}],"
    " \"budget\": {\"trials\": 8}}";

#define N 8
static sl_study_spec_t spec;
static sl_trial_t trials[N];
static sl_report_t reps[N][3];
static sl_trial_result_t rs[N];

static void build(void) {
    char why[256] = "";
    sl_err err = sl_study_spec_parse(spec_json, strlen(spec_json), &spec, why, sizeof why);
    CHECK_MSG(err == SL_OK, "%s", why);
    /* acc and params: trial i has acc 0.8 + 0.01 * (i % 5), params 1000 * (i + 1) */
    for (int i = 0; i < N; i++) {
        sl_trial_t *t = &trials[i];
        memset(t, 0, sizeof *t);
        snprintf(t->id, sizeof t->id, "%016x", 0xa0 + i);
        t->ordinal = (uint64_t)i;
        int arch = sl_study_spec_param(&spec, "arch");
        t->config.values[arch].arch[SL_ARCH_LAYERS] = i % 3;
        t->config.values[arch].arch[SL_ARCH_UNITS] = i % 4;
        t->config.values[sl_study_spec_param(&spec, "lr")].real = 0.001 * (i + 1);
        sl_space_canon(&spec, &t->config);
        t->state = i == 7 ? SL_TRIAL_FAILED : SL_TRIAL_DONE;
        t->epochs_done = i == 7 ? 1 : 3;
        double acc = 0.8 + 0.01 * (i % 5);
        t->objectives[0] = i == 7 ? NAN : acc;
        t->objectives[1] = 1000.0 * (i + 1);
        for (int e = 0; e < 3; e++) {
            reps[i][e].epoch = e + 1;
            reps[i][e].metric_count = 2;
            snprintf(reps[i][e].metrics[0].name, sizeof reps[i][e].metrics[0].name, "val_acc");
            reps[i][e].metrics[0].value = acc - 0.1 / (e + 1);
            snprintf(reps[i][e].metrics[1].name, sizeof reps[i][e].metrics[1].name, "params");
            reps[i][e].metrics[1].value = t->objectives[1];
        }
        rs[i].trial = t;
        rs[i].epochs = reps[i];
        rs[i].epoch_count = t->epochs_done;
        rs[i].owner = "peer-1";
    }
}

static void test_models_json(void) {
    sl_buf_t b = {0};
    CHECK_OK(sl_report_models_json(&spec, "0123456789abcdef", rs, N, 3, &b));
    cJSON *j = cJSON_Parse(b.data);
    CHECK_MSG(j != NULL, "models.json is not JSON:\n%s", b.data);
    const cJSON *models = cJSON_GetObjectItem(j, "models");
    CHECK_INT(cJSON_GetArraySize(models), 3);
    /* best val_acc is 0.84: trial 4 (i % 5 == 4) */
    const cJSON *m0 = cJSON_GetArrayItem(models, 0);
    CHECK_STR(cJSON_GetObjectItem(m0, "trial")->valuestring, trials[4].id);
    CHECK_INT(cJSON_GetObjectItem(m0, "rank")->valueint, 1);
    CHECK(cJSON_IsObject(cJSON_GetObjectItem(m0, "config")));
    CHECK_STR(cJSON_GetObjectItem(m0, "model")->valuestring, "mlp:32,32");
    CHECK_STR(cJSON_GetObjectItem(m0, "archid")->valuestring, "mlp:32,32");
    CHECK_STR(cJSON_GetObjectItem(j, "study")->valuestring, "res");
    CHECK_INT(cJSON_GetObjectItem(j, "full_training_epochs")->valueint, 3);
    /* second: 0.83 (trial 3), third: 0.82 (trial 2) */
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(models, 1), "trial")->valuestring,
              trials[3].id);
    cJSON_Delete(j);
    sl_buf_fini(&b);
}

static void test_pareto_json(void) {
    sl_buf_t b = {0};
    CHECK_OK(sl_report_pareto_json(&spec, "0123456789abcdef", rs, N, &b));
    cJSON *j = cJSON_Parse(b.data);
    CHECK_MSG(j != NULL, "pareto.json is not JSON:\n%s", b.data);
    const cJSON *front = cJSON_GetObjectItem(j, "front");
    /* (acc, params): 0:(.80,1k) 1:(.81,2k) 2:(.82,3k) 3:(.83,4k) 4:(.84,5k)
     * 5:(.80,6k) 6:(.81,7k) 7: failed. Front: 0..4. */
    CHECK_INT(cJSON_GetArraySize(front), 5);
    int seen = 0;
    for (int i = 0; i < cJSON_GetArraySize(front); i++) {
        const char *id = cJSON_GetObjectItem(cJSON_GetArrayItem(front, i), "trial")->valuestring;
        for (int k = 0; k < 5; k++)
            if (strcmp(id, trials[k].id) == 0)
                seen |= 1 << k;
    }
    CHECK_INT(seen, 0x1f);
    cJSON_Delete(j);
    sl_buf_fini(&b);
}

static void test_leaderboard(void) {
    sl_buf_t b = {0};
    CHECK_OK(sl_report_leaderboard(&spec, rs, N, &b));
    CHECK(strncmp(b.data, "rank", 4) == 0);
    const char *first = strchr(b.data, '\n') + 1;
    CHECK(strncmp(first, "1     ", 6) == 0);
    CHECK(strstr(first, trials[4].id) == first + 6);
    /* the failed trial is last */
    const char *failed = strstr(b.data, trials[7].id);
    CHECK(failed && strstr(failed, "failed") != NULL);
    CHECK(strstr(failed, "\n") == b.data + b.len - 1);
    sl_buf_fini(&b);
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static void test_plots(void) {
    sl_buf_t b = {0};
    CHECK_OK(sl_plot_curves(&spec, rs, N, "val_acc", &b));
    CHECK(strncmp(b.data, "<svg ", 5) == 0);
    CHECK(strcmp(b.data + b.len - 7, "</svg>\n") == 0);
    CHECK_INT(count(b.data, "<polyline"), N);
    CHECK(strstr(b.data, "best ") != NULL);
    CHECK_INT(count(b.data, "<"), count(b.data, ">"));
    sl_buf_fini(&b);
    CHECK_OK(sl_plot_pareto(&spec, rs, N, 1, 0, &b));
    CHECK_INT(count(b.data, "<circle"), N - 1);
    CHECK_INT(count(b.data, "fill=\"#d62728\"><title>"), 5);
    CHECK(strstr(b.data, "5 of 7 on it") != NULL);
    sl_buf_fini(&b);
    CHECK_ERR(sl_plot_pareto(&spec, rs, N, 0, 2, &b), SL_EINVAL);
    sl_buf_fini(&b);
    /* empty input still gives a valid picture */
    CHECK_OK(sl_plot_curves(&spec, rs, 0, "val_acc", &b));
    CHECK(strstr(b.data, "</svg>") != NULL);
    sl_buf_fini(&b);
    CHECK_OK(sl_plot_pareto(&spec, rs, 0, 0, 1, &b));
    sl_buf_fini(&b);
    CHECK_OK(sl_report_models_json(&spec, "x", rs, 0, 5, &b));
    cJSON *j = cJSON_Parse(b.data);
    CHECK(j != NULL);
    cJSON_Delete(j);
    sl_buf_fini(&b);
}

static void test_encode_and_status(void) {
    sl_nn_epoch_t m;
    memset(&m, 0, sizeof m);
    m.epoch = 4;
    m.train_loss = 0.25;
    m.train_acc = 0.9;
    m.has_val = true;
    m.val_acc = 0.8875;
    m.val_loss = 0.3;
    m.lr = 0.001;
    m.seconds = 7.5;
    sl_report_t r, back;
    sl_report_from_epoch(&m, 105866, 2258000, &r);
    CHECK_INT(r.epoch, 4);
    CHECK_NEAR(sl_report_get(&r, "val_acc"), 0.8875, 0);
    CHECK_NEAR(sl_report_get(&r, "params"), 105866, 0);
    CHECK(isnan(sl_report_get(&r, "test_acc")));
    char line[SL_REPORT_LINE_MAX], why[128];
    size_t len;
    CHECK_OK(sl_report_encode(&r, line, sizeof line, &len));
    CHECK_OK(sl_report_parse(line, len, &back, why, sizeof why));
    CHECK_INT(back.metric_count, r.metric_count);
    for (int i = 0; i < r.metric_count; i++) {
        CHECK_STR(back.metrics[i].name, r.metrics[i].name);
        CHECK(back.metrics[i].value == r.metrics[i].value);
    }
    CHECK_ERR(sl_report_encode(&r, line, 12, &len), SL_ETOOBIG);
    sl_buf_t b = {0};
    CHECK_OK(sl_report_status(&spec, rs, N, &b));
    CHECK(strncmp(b.data, "trial", 5) == 0);
    const char *row = strchr(b.data, '\n') + 1;
    CHECK(strncmp(row, trials[0].id, 16) == 0); /* proposal order */
    CHECK(strstr(row, "done") != NULL && strstr(row, "3/3") != NULL && strstr(row, "peer-1"));
    sl_buf_fini(&b);
}

int main(void) {
    sl_test_run("parse_ok", test_parse_ok);
    sl_test_run("parse_garbage", test_parse_garbage);
    build();
    sl_test_run("models_json", test_models_json);
    sl_test_run("pareto_json", test_pareto_json);
    sl_test_run("leaderboard", test_leaderboard);
    sl_test_run("plots", test_plots);
    sl_test_run("encode_and_status", test_encode_and_status);
    return sl_test_finish();
}
