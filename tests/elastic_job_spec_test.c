/* The elastic job file (src/elastic/job_spec.c): the examples in
 * peers/examples/elastic-*.json parse; each invalid job is refused with a
 * message that names the field and the problem; the canonical encoding
 * parses back to the same job, and the job id depends on the content
 * only. */
#include <stdio.h>
#include <stdlib.h>

#include "starling/elastic.h"
#include "testlib.h"

/* A valid job that the cases below break one field at a time. */
static const char *base =
    "{\"kind\": \"elastic\", \"name\": \"j\", \"seed\": 7,"
    " \"nodes\": {\"min\": 2, \"max\": 4},"
    " \"trainer\": {\"type\": \"builtin\", \"model\": \"mlp:64\"},"
    " \"dataset\": \"fashion-mnist\", \"epochs\": 3, \"global_batch\": 256,"
    " \"optimizer\": {\"type\": \"adam\", \"lr\": 0.001},"
    " \"schedule\": {\"type\": \"step\", \"step_epochs\": 2, \"step_gamma\": 0.5},"
    " \"checkpoint_every\": 50}";

static const char *cmd =
    "{\"kind\": \"elastic\", \"name\": \"c\", \"nodes\": {\"min\": 1, \"max\": 1},"
    " \"trainer\": {\"type\": \"command\", \"command\": \"python3 \\\"t.py\\\"\"},"
    " \"epochs\": 1}";

static void parse_ok(const char *json, sl_elastic_job_t *j) {
    char why[256] = "";
    sl_err err = sl_elastic_job_parse(json, strlen(json), j, why, sizeof why);
    CHECK_MSG(err == SL_OK, "refused: %s", why);
}

/* Replaces the first `from` in base by `to` and expects `want` in the
 * refusal. */
static void bad_in(const char *src, const char *from, const char *to, const char *want) {
    const char *at = strstr(src, from);
    CHECK_MSG(at != NULL, "case \"%s\" does not apply", from);
    if (!at)
        return;
    char json[4096];
    snprintf(json, sizeof json, "%.*s%s%s", (int)(at - src), src, to, at + strlen(from));
    sl_elastic_job_t j;
    char why[256] = "";
    sl_err err = sl_elastic_job_parse(json, strlen(json), &j, why, sizeof why);
    CHECK_MSG(err == SL_EINVAL, "accepted (%s -> %s)", from, to);
    CHECK_MSG(strstr(why, want) != NULL, "%s -> %s: \"%s\" lacks \"%s\"", from, to, why, want);
}

static void bad(const char *from, const char *to, const char *want) {
    bad_in(base, from, to, want);
}

static void test_base(void) {
    sl_elastic_job_t j;
    parse_ok(base, &j);
    CHECK_STR(j.name, "j");
    CHECK_INT(j.seed, 7);
    CHECK_INT(j.min_nodes, 2);
    CHECK_INT(j.max_nodes, 4);
    CHECK_INT(j.trainer, SL_ELASTIC_TRAINER_BUILTIN);
    CHECK_STR(j.model, "mlp:64");
    CHECK_STR(j.dataset, "fashion-mnist");
    CHECK_INT(j.epochs, 3);
    CHECK_INT(j.global_batch, 256);
    CHECK_STR(j.optimizer, "adam");
    CHECK_NEAR(j.lr, 0.001, 0);
    CHECK_NEAR(j.momentum, 0.9, 0); /* default */
    CHECK_STR(j.schedule, "step");
    CHECK_INT(j.step_epochs, 2);
    CHECK_NEAR(j.step_gamma, 0.5, 0);
    CHECK_INT(j.checkpoint_every, 50);
    CHECK_NEAR(j.val_split, 0.1, 0);

    parse_ok(cmd, &j);
    CHECK_INT(j.trainer, SL_ELASTIC_TRAINER_COMMAND);
    CHECK_STR(j.command, "python3 \"t.py\"");
    CHECK_INT(j.stop_grace_s, 10);
    CHECK_INT(j.global_batch, 128);
    CHECK_INT(j.checkpoint_every, 100);
    CHECK_STR(j.dataset, "");
}

static void test_refusals(void) {
    bad("\"kind\": \"elastic\"", "\"kind\": \"study\"", "kind: must be \"elastic\"");
    bad("\"kind\": \"elastic\", ", "", "kind: required");
    bad("\"kind\": \"elastic\"", "\"kind\": 1", "kind: must be a string");
    bad("\"seed\": 7", "\"seed\": 7, \"colour\": 1", "colour: unknown field");
    bad("\"seed\": 7", "\"seed\": 7, \"seed\": 8", "seed: given twice");
    bad("\"seed\": 7", "\"seed\": -1", "seed: must be in [0, ");
    bad("\"seed\": 7", "\"seed\": 1.5", "seed: must be an integer");
    bad("\"name\": \"j\"", "\"name\": \"a b\"", "name: use letters");
    bad("\"name\": \"j\"", "\"name\": \"\"", "name: must not be empty");
    bad("\"name\": \"j\", ", "", "name: required");
    bad("\"name\": \"j\"",
        "\"name\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
        "name: longer than 64 characters");
    bad("\"nodes\": {\"min\": 2, \"max\": 4},", "", "nodes: required");
    bad("\"nodes\": {\"min\": 2, \"max\": 4}", "\"nodes\": 3", "nodes: must be an object");
    bad("\"min\": 2", "\"min\": 0", "nodes.min: must be in [1, 32], not 0");
    bad("\"min\": 2, ", "", "nodes.min: required");
    bad("\"max\": 4", "\"max\": 33", "nodes.max: must be in [1, 32], not 33");
    bad("\"max\": 4", "\"max\": 1", "nodes.max: must be >= nodes.min (2), not 1");
    bad("\"max\": 4", "\"max\": 4, \"most\": 5", "nodes.most: unknown field");
    bad("\"max\": 4", "\"max\": \"4\"", "nodes.max: must be a number");
    bad("\"trainer\": {\"type\": \"builtin\", \"model\": \"mlp:64\"},", "", "trainer: required");
    bad("\"type\": \"builtin\"", "\"type\": \"magic\"", "trainer.type: \"magic\" is not one of");
    bad("\"type\": \"builtin\", ", "", "trainer.type: required");
    bad("\"model\": \"mlp:64\"", "\"model\": \"xyz:3\"", "trainer.model: \"xyz:3\" does not parse");
    bad("\"model\": \"mlp:64\"", "\"model\": \"mlp:64\", \"lr\": 1", "trainer.lr: unknown field");
    bad("\"model\": \"mlp:64\"", "\"model\": \"cnn:8,8,8,8,8,8/fc:10\"",
        "trainer.model: \"cnn:8,8,8,8,8,8/fc:10\" does not fit 28x28 images");
    bad(", \"model\": \"mlp:64\"", "", "trainer.model: required");
    bad("\"dataset\": \"fashion-mnist\", ", "", "dataset: required for the builtin trainer");
    bad("\"dataset\": \"fashion-mnist\"", "\"dataset\": 3", "dataset: must be a name");
    bad("\"dataset\": \"fashion-mnist\"", "\"dataset\": {\"name\": \"mnist\", \"val_split\": 1}",
        "dataset.val_split: must be in [0, 0.9], not 1");
    bad("\"dataset\": \"fashion-mnist\"", "\"dataset\": {\"name\": \"mnist\", \"limit\": -1}",
        "dataset.limit: must be in [0, ");
    bad("\"dataset\": \"fashion-mnist\"", "\"dataset\": {\"nom\": \"mnist\"}",
        "dataset.nom: unknown field");
    bad("\"dataset\": \"fashion-mnist\"", "\"dataset\": \"a\\nb\"",
        "dataset: holds a control character");
    bad("\"epochs\": 3, ", "", "epochs: required");
    bad("\"epochs\": 3", "\"epochs\": 0", "epochs: must be in [1, 10000], not 0");
    bad("\"epochs\": 3", "\"epochs\": 10001", "epochs: must be in [1, 10000]");
    bad("\"global_batch\": 256", "\"global_batch\": 0", "global_batch: must be in [1, 1048576]");
    bad("\"global_batch\": 256", "\"global_batch\": 2.5", "global_batch: must be an integer");
    bad("\"type\": \"adam\"", "\"type\": \"lion\"",
        "optimizer.type: \"lion\" is not one of sgd, nesterov, adam, adamw");
    bad("\"lr\": 0.001", "\"lr\": 0", "optimizer.lr: must be in (0, 10], not 0");
    bad("\"lr\": 0.001", "\"lr\": 11", "optimizer.lr: must be in (0, 10]");
    bad("\"lr\": 0.001", "\"lr\": 0.1, \"momentum\": 1", "optimizer.momentum: must be in [0, 1)");
    bad("\"lr\": 0.001", "\"weight_decay\": -0.1", "optimizer.weight_decay: must be in [0, 1)");
    bad("\"lr\": 0.001", "\"beta\": 0.5", "optimizer.beta: unknown field");
    bad("\"optimizer\": {\"type\": \"adam\", \"lr\": 0.001}", "\"optimizer\": \"adam\"",
        "optimizer: must be an object");
    bad("\"type\": \"step\"", "\"type\": \"linear\"",
        "schedule.type: \"linear\" is not one of none, step, cosine");
    bad("\"step_epochs\": 2", "\"step_epochs\": 0", "schedule.step_epochs: must be in [1, 10000]");
    bad("\"step_gamma\": 0.5", "\"step_gamma\": 0", "schedule.step_gamma: must be in (0, 1]");
    bad("\"step_gamma\": 0.5", "\"step_gamma\": 0.5, \"warmup_epochs\": -1",
        "schedule.warmup_epochs: must be in [0, 10000]");
    bad("\"step_gamma\": 0.5", "\"gamma\": 0.5", "schedule.gamma: unknown field");
    bad("\"checkpoint_every\": 50", "\"checkpoint_every\": 0", "checkpoint_every: must be in [1, ");
    bad("\"checkpoint_every\": 50", "\"checkpoint_every\": 50, \"description\": 5",
        "description: must be a string");
    bad("\"checkpoint_every\": 50}", "\"checkpoint_every\": 50} x", "job: text after the JSON");
    bad("\"checkpoint_every\": 50}", "\"checkpoint_every\": 50", "job: not valid JSON");
    bad("{\"kind\"", "[{\"kind\"", "job: not valid JSON");

    bad_in(cmd, "\"command\": \"python3 \\\"t.py\\\"\"", "\"command\": \"\"",
           "trainer.command: must not be empty");
    bad_in(cmd, ", \"command\": \"python3 \\\"t.py\\\"\"", "", "trainer.command: required");
    bad_in(cmd, "\"command\": \"python3", "\"model\": \"mlp:3\", \"command\": \"python3",
           "trainer.model: unknown field");
    bad_in(cmd, "\"t.py\\\"\"", "\"t.py\\\"\", \"stop_grace_s\": 0",
           "trainer.stop_grace_s: must be in [1, 600], not 0");
    bad_in(cmd, "\"epochs\": 1", "\"epochs\": 1, \"optimizer\": {\"type\": \"sgd\"}",
           "optimizer: only the builtin trainer reads it");
    bad_in(cmd, "\"epochs\": 1", "\"epochs\": 1, \"schedule\": {\"type\": \"none\"}",
           "schedule: only the builtin trainer reads it");

    /* not an object, too big */
    sl_elastic_job_t j;
    char why[256];
    CHECK_ERR(sl_elastic_job_parse("[]", 2, &j, why, sizeof why), SL_EINVAL);
    CHECK_STR(why, "job: must be a JSON object");
    size_t big = SL_ELASTIC_JOB_MAX_LEN + 1;
    char *text = malloc(big);
    CHECK(text != NULL);
    memset(text, ' ', big);
    CHECK_ERR(sl_elastic_job_parse(text, big, &j, why, sizeof why), SL_ETOOBIG);
    CHECK(strstr(why, "job: over 65536 bytes") != NULL);
    free(text);
}

static void round_trip(const char *json) {
    sl_elastic_job_t a, b;
    parse_ok(json, &a);
    char enc[SL_ELASTIC_JOB_CANON_MAX], enc2[SL_ELASTIC_JOB_CANON_MAX];
    size_t n, n2;
    CHECK_OK(sl_elastic_job_encode(&a, enc, sizeof enc, &n));
    CHECK_INT(strlen(enc), n);
    parse_ok(enc, &b);
    CHECK_OK(sl_elastic_job_encode(&b, enc2, sizeof enc2, &n2));
    CHECK_MSG(n == n2 && memcmp(enc, enc2, n) == 0, "not canonical:\n%s\n%s", enc, enc2);
    CHECK(memcmp(&a, &b, sizeof a) == 0); /* parse zeroes the struct first */
    char ia[SL_ELASTIC_JOB_ID_LEN + 1], ib[SL_ELASTIC_JOB_ID_LEN + 1];
    CHECK_OK(sl_elastic_job_id(&a, ia));
    CHECK_OK(sl_elastic_job_id(&b, ib));
    CHECK_STR(ia, ib);
    CHECK(sl_elastic_job_id_valid(ia, strlen(ia)));
}

static void test_round_trip(void) {
    round_trip(base);
    round_trip(cmd);
    /* the canonical form of base, pinned: a change here changes job ids */
    sl_elastic_job_t j;
    parse_ok(base, &j);
    char enc[SL_ELASTIC_JOB_CANON_MAX];
    CHECK_OK(sl_elastic_job_encode(&j, enc, sizeof enc, NULL));
    CHECK_STR(enc,
              "{\"kind\":\"elastic\",\"name\":\"j\",\"seed\":7,\"nodes\":{\"min\":2,\"max\":4},"
              "\"trainer\":{\"type\":\"builtin\",\"model\":\"mlp:64\"},\"dataset\":{\"name\":"
              "\"fashion-mnist\",\"limit\":0,\"val_split\":0.1},\"epochs\":3,\"global_batch\":"
              "256,\"optimizer\":{\"type\":\"adam\",\"lr\":0.001,\"momentum\":0.9,"
              "\"weight_decay\":0},\"schedule\":{\"type\":\"step\",\"step_epochs\":2,"
              "\"step_gamma\":0.5,\"warmup_epochs\":0},\"checkpoint_every\":50}");
    /* the same job written differently has the same id; another has another */
    const char *same =
        "{\"checkpoint_every\": 50, \"epochs\": 3, \"kind\": \"elastic\", \"name\": \"j\","
        " \"seed\": 7, \"nodes\": {\"max\": 4, \"min\": 2}, \"description\": \"x\","
        " \"trainer\": {\"model\": \"mlp:64\", \"type\": \"builtin\"},"
        " \"dataset\": {\"name\": \"fashion-mnist\", \"val_split\": 0.1}, \"global_batch\": 256,"
        " \"optimizer\": {\"type\": \"adam\", \"lr\": 1e-3, \"momentum\": 0.9},"
        " \"schedule\": {\"type\": \"step\", \"step_epochs\": 2, \"step_gamma\": 0.5}}";
    sl_elastic_job_t s;
    parse_ok(same, &s);
    char i1[17], i2[17];
    CHECK_OK(sl_elastic_job_id(&j, i1));
    CHECK_OK(sl_elastic_job_id(&s, i2));
    CHECK_STR(i1, i2);
    s.seed = 8;
    CHECK_OK(sl_elastic_job_id(&s, i2));
    CHECK(strcmp(i1, i2) != 0);
    CHECK(!sl_elastic_job_id_valid("0123456789abcdeF", 16));
    CHECK(!sl_elastic_job_id_valid("0123456789abcde", 15));
    /* a buffer too small */
    CHECK_ERR(sl_elastic_job_encode(&j, enc, 40, NULL), SL_ETOOBIG);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(SL_ELASTIC_JOB_MAX_LEN + 1);
    size_t n = buf ? fread(buf, 1, SL_ELASTIC_JOB_MAX_LEN + 1, f) : 0;
    fclose(f);
    *len = n;
    return buf;
}

static void test_examples(void) {
    const char *files[] = {"peers/examples/elastic-mlp.json", "peers/examples/elastic-torch.json"};
    for (size_t i = 0; i < 2; i++) {
        size_t len;
        char *text = slurp(files[i], &len);
        CHECK_MSG(text != NULL, "cannot read %s", files[i]);
        if (!text)
            continue;
        sl_elastic_job_t j;
        char why[256] = "";
        sl_err err = sl_elastic_job_parse(text, len, &j, why, sizeof why);
        CHECK_MSG(err == SL_OK, "%s refused: %s", files[i], why);
        if (i == 0) {
            CHECK_INT(j.trainer, SL_ELASTIC_TRAINER_BUILTIN);
            CHECK_STR(j.dataset, "fashion-mnist");
            CHECK_INT(j.min_nodes, 2);
            CHECK_INT(j.max_nodes, 4);
        } else {
            CHECK_INT(j.trainer, SL_ELASTIC_TRAINER_COMMAND);
        }
        free(text);
    }
}

int main(void) {
    sl_test_run("base", test_base);
    sl_test_run("refusals", test_refusals);
    sl_test_run("round_trip", test_round_trip);
    sl_test_run("examples", test_examples);
    return sl_test_finish();
}
