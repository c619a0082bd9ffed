/* The study spec: every study example in peers/examples parses; each invalid
 * spec is refused with a message that names the field and the problem. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>

#include "starling/study.h"
#include "testlib.h"

/* A small valid study that the invalid cases below break one field at a
 * time (by text substitution). */
static const char *base =
    "{\"name\": \"t\", \"seed\": 7, \"dataset\": \"fashion-mnist\","
    " \"trainer\": {\"type\": \"builtin\", \"model\": \"{arch}\"},"
    " \"search_space\": {"
    "  \"lr\": {\"type\": \"real\", \"low\": 0.0001, \"high\": 0.1, \"log\": true},"
    "  \"arch\": {\"type\": \"arch\", \"families\": [\"mlp\", \"cnn\"], \"layers\": [1, 2],"
    "            \"width\": [16, 32], \"kernel\": [3, 5], \"fc\": [0, 64]}},"
    " \"searcher\": {\"type\": \"random\"},"
    " \"scheduler\": {\"type\": \"asha\", \"min_epochs\": 1, \"max_epochs\": 9, \"reduction\": 3},"
    " \"objectives\": [{\"metric\": \"val_acc\", \"goal\": \"max\"}],"
    " \"budget\": {\"trials\": 20}}";

static void parse_ok(const char *json, sl_study_spec_t *s) {
    char why[256] = "";
    sl_err err = sl_study_spec_parse(json, strlen(json), s, why, sizeof why);
    CHECK_MSG(err == SL_OK, "refused: %s", why);
}

static void test_base(void) {
    sl_study_spec_t s;
    parse_ok(base, &s);
    CHECK_STR(s.name, "t");
    CHECK_INT(s.seed, 7);
    CHECK_INT(s.param_count, 2);
    CHECK_STR(s.params[0].name, "arch"); /* sorted by name */
    CHECK_STR(s.params[1].name, "lr");
    CHECK(s.params[1].log);
    CHECK_INT(s.scheduler, SL_SCHED_ASHA);
    CHECK_INT(s.rung_count, 3);
    CHECK_INT(s.rungs[0], 1);
    CHECK_INT(s.rungs[1], 3);
    CHECK_INT(s.rungs[2], 9);
    CHECK_INT(s.budget_trials, 20);
    CHECK_INT(s.concurrency, 1);
    CHECK_INT(s.retries, 2);
    CHECK_INT(s.checkpoint_every, 1);
    CHECK(s.objectives[0].maximize);
    char a[SL_TRIAL_ID_LEN + 1], b[SL_TRIAL_ID_LEN + 1];
    sl_study_spec_id(&s, a);
    sl_study_spec_t s2;
    parse_ok(base, &s2);
    sl_study_spec_id(&s2, b);
    CHECK_STR(a, b);
    CHECK_INT(strlen(a), SL_TRIAL_ID_LEN);
    s2.seed = 8;
    sl_study_spec_id(&s2, b);
    CHECK(strcmp(a, b) != 0);
}

/* Numbers in a categorical's values become the text a command template
 * gets: whole numbers as integers (3000, never 3e+03), others in their
 * shortest exact form. */
static void test_number_choices(void) {
    const char *buf =
        "{\"name\": \"n\", \"seed\": 1,"
        " \"trainer\": {\"type\": \"command\", \"command\": \"t --n {n}\"},"
        " \"search_space\": {\"n\": {\"type\": \"categorical\","
        "  \"values\": [0, 3000, -12, 0.5, 1e-05, 123456789012]}},"
        " \"searcher\": {\"type\": \"random\"}, \"scheduler\": {\"type\": \"fifo\", \"max_epochs\": 1},"
        " \"objectives\": [{\"metric\": \"a\", \"goal\": \"max\"}],"
        " \"budget\": {\"trials\": 2}}";
    sl_study_spec_t s;
    parse_ok(buf, &s);
    const sl_param_t *p = NULL;
    for (int i = 0; i < s.param_count; i++)
        if (!strcmp(s.params[i].name, "n"))
            p = &s.params[i];
    CHECK(p != NULL);
    if (!p)
        return;
    CHECK_STR(p->choices[0], "0");
    CHECK_STR(p->choices[1], "3000");
    CHECK_STR(p->choices[2], "-12");
    CHECK_STR(p->choices[3], "0.5");
    CHECK_STR(p->choices[4], "1e-05");
    CHECK_STR(p->choices[5], "123456789012");
    /* a config naming each value decodes back to it (a proposal is read
       by every peer: the spec's text and the config's must agree) */
    for (int c = 0; c < p->choice_count; c++) {
        sl_config_t cfg, back;
        memset(&cfg, 0, sizeof cfg);
        cfg.values[0].choice = c;
        char json[256], why[128] = "";
        size_t len;
        CHECK_OK(sl_space_encode(&s, &cfg, json, sizeof json, &len));
        sl_err err = sl_space_decode(&s, json, len, &back, why, sizeof why);
        CHECK_MSG(err == SL_OK && back.values[0].choice == c, "%s: %s", json, why);
    }
}

static void test_ladders(void) {
    sl_study_spec_t s;
    char buf[4096];
    /* max not on the ladder: the top rung becomes max */
    snprintf(buf, sizeof buf, "%s", base);
    char *p = strstr(buf, "\"max_epochs\": 9");
    memcpy(p, "\"max_epochs\":10", 15);
    parse_ok(buf, &s);
    CHECK_INT(s.rung_count, 3);
    CHECK_INT(s.rungs[2], 10);
    /* hyperband: brackets default to the rung count; trials to the sum */
    const char *hb =
        "{\"name\": \"hb\", \"trainer\": {\"type\": \"command\", \"command\": \"x {lr}\"},"
        " \"search_space\": {\"lr\": {\"type\": \"real\", \"low\": 0, \"high\": 1}},"
        " \"scheduler\": {\"type\": \"hyperband\", \"min_epochs\": 1, \"max_epochs\": 27},"
        " \"objectives\": [{\"metric\": \"acc\", \"goal\": \"max\"}]}";
    parse_ok(hb, &s);
    CHECK_INT(s.rung_count, 4);
    CHECK_INT(s.brackets, 4);
    /* s_max = 3: brackets of 27, 12 (ceil 4/3*9), 6, 4 */
    CHECK_INT(s.budget_trials, 27 + 12 + 6 + 4);
    CHECK_INT(s.trainer, SL_TRAINER_COMMAND);
    CHECK_INT(s.command_timeout_s, 3600);
}

static void test_examples(void) {
    char dir[512];
    sl_test_source_path("peers/examples", dir, sizeof dir);
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot open %s", dir);
    if (!d)
        return;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t flen;
        uint8_t *text = sl_test_read_file(path, &flen);
        CHECK(text != NULL);
        if (!text)
            continue;
        /* elastic jobs ("kind": "elastic") are not studies: their own
           test, elastic_job_spec_test, parses them */
        cJSON *doc = cJSON_ParseWithLength((const char *)text, flen);
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(doc, "kind");
        bool is_job = cJSON_IsString(kind) && !strcmp(kind->valuestring, "elastic");
        cJSON_Delete(doc);
        if (is_job) {
            free(text);
            continue;
        }
        sl_study_spec_t s;
        char why[256] = "";
        sl_err err = sl_study_spec_parse((const char *)text, flen, &s, why, sizeof why);
        CHECK_MSG(err == SL_OK, "%s: %s", e->d_name, why);
        free(text);
        n++;
    }
    closedir(d);
    CHECK_MSG(n >= 4, "only %d examples", n);
}

/* One invalid case: replace `from` in base by `to`; the message must
 * contain `want`. */
typedef struct {
    const char *from, *to, *want;
} bad_t;

static const bad_t bad[] = {
    {"\"low\": 0.0001", "\"low\": 0", "search_space.lr.low: must be > 0 with log scale"},
    {"\"low\": 0.0001", "\"low\": -1", "search_space.lr.low: must be > 0 with log scale"},
    {"\"high\": 0.1", "\"high\": 0.00001", "search_space.lr.high: must be greater than low"},
    {"\"high\": 0.1", "\"high\": \"big\"", "search_space.lr.high: must be a number"},
    {"\"log\": true", "\"log\": 1", "search_space.lr.log: must be true or false"},
    {"\"type\": \"real\"", "\"type\": \"float\"", "search_space.lr.type: \"float\" is not one of"},
    {"\"type\": \"real\", ", "", "search_space.lr.type: required"},
    {"\"log\": true}", "\"log\": true, \"step\": 2}", "search_space.lr.step: unknown field"},
    {"\"name\": \"t\"", "\"name\": \"a b\"", "name: use letters"},
    {"\"name\": \"t\", ", "", "name: required"},
    {"\"seed\": 7", "\"seed\": -3", "seed: must be in"},
    {"\"seed\": 7", "\"seed\": 1.5", "seed: must be an integer"},
    {"\"seed\": 7", "\"sead\": 7", "sead: unknown field"},
    {"\"dataset\": \"fashion-mnist\"", "\"dataset\": 3", "dataset: must be a name"},
    {"\"dataset\": \"fashion-mnist\"", "\"dataset\": {\"name\": \"x\", \"val_split\": 2}",
     "dataset.val_split: must be in"},
    {"\"families\": [\"mlp\", \"cnn\"]", "\"families\": [\"rnn\"]",
     "search_space.arch.families[0]: must be \"mlp\" or \"cnn\""},
    {"\"layers\": [1, 2]", "\"layers\": [1, 1]", "search_space.arch.layers[1]: 1 given twice"},
    {"\"layers\": [1, 2]", "\"layers\": [0]", "search_space.arch.layers[0]: must be an integer in"},
    {"\"layers\": [1, 2]", "\"layers\": []", "search_space.arch.layers: must hold 1 to"},
    {"\"layers\": [1, 2]", "\"layers\": [1, 6]", "does not fit 28x28 images"},
    {"\"kernel\": [3, 5]", "\"kernel\": [3, 99]", "search_space.arch.kernel[1]: must be an integer"},
    {"\"width\": [16, 32]", "\"width\": [16], \"units\": [8]",
     "search_space.arch.width: give width, or units"},
    {"\"model\": \"{arch}\"", "\"model\": \"{arhc}\"",
     "trainer.model: unknown placeholder {arhc}"},
    {"\"model\": \"{arch}\"", "\"model\": \"mlp:64\"",
     "search_space.arch: an arch parameter must appear in trainer.model"},
    {"\"model\": \"{arch}\"", "\"model\": \"{arch\"", "trainer.model: unmatched '{'"},
    {"\"model\": \"{arch}\"", "\"model\": \"{arch}/fc:x\"", "does not parse"},
    {"\"type\": \"builtin\"", "\"type\": \"docker\"", "trainer.type: \"docker\" is not one of"},
    {"\"type\": \"builtin\", ", "", "trainer.type: required"},
    {"\"model\": \"{arch}\"}", "\"model\": \"{arch}\", \"optimizer\": \"rmsprop\"}",
     "trainer.optimizer: \"rmsprop\" is not one of"},
    {"\"model\": \"{arch}\"}", "\"model\": \"{arch}\", \"batch\": 0}", "trainer.batch: must be in"},
    {"\"type\": \"random\"", "\"type\": \"bayes\"", "searcher.type: \"bayes\" is not one of"},
    {"\"type\": \"random\"", "\"type\": \"evolution\", \"population\": 1",
     "searcher.population: must be in"},
    {"\"type\": \"random\"", "\"type\": \"evolution\"", "searcher.generational: a generational"},
    {"\"type\": \"asha\"", "\"type\": \"median\"", "scheduler.type: \"median\" is not one of"},
    {"\"min_epochs\": 1", "\"min_epochs\": 20", "scheduler.min_epochs: must be <= max_epochs"},
    {"\"reduction\": 3", "\"reduction\": 1", "scheduler.reduction: must be in [2, 100]"},
    {"\"max_epochs\": 9, ", "", "scheduler.max_epochs: required"},
    {"\"reduction\": 3", "\"reduction\": 3, \"brackets\": 2", "scheduler.brackets: only for hyperband"},
    {"\"goal\": \"max\"", "\"goal\": \"up\"", "objectives[0].goal: must be \"max\" or \"min\""},
    {"\"metric\": \"val_acc\", ", "", "objectives[0].metric: required"},
    {"[{\"metric\": \"val_acc\", \"goal\": \"max\"}]", "[]", "objectives: must be a list of 1 to"},
    {"[{\"metric\": \"val_acc\", \"goal\": \"max\"}]",
     "[{\"metric\": \"val_acc\", \"goal\": \"max\"}, {\"metric\": \"val_acc\", \"goal\": \"min\"}]",
     "objectives[1].metric: \"val_acc\" given twice"},
    {"\"budget\": {\"trials\": 20}", "\"budget\": {\"trials\": 0}", "budget.trials: must be in"},
    {"\"budget\": {\"trials\": 20}", "\"budget\": {}", "budget.trials: required for the random"},
    {"\"budget\": {\"trials\": 20}", "\"budget\": {\"trials\": 20, \"hours\": 2}",
     "budget.hours: unknown field"},
    {"\"budget\": {\"trials\": 20}", "\"budget\": {\"trials\": 20}, \"concurrency\": 0",
     "concurrency: must be in"},
    {"\"budget\": {\"trials\": 20}", "\"budget\": {\"trials\": 20}, \"lease_ms\": 5",
     "lease_ms: must be in"},
    {"\"budget\": {\"trials\": 20}", "\"budget\": {\"trials\": 20}, \"retries\": -1",
     "retries: must be in"},
    {"\"budget\": {\"trials\": 20}", "\"budget\": {\"trials\": 20}, \"checkpoint_every\": 0",
     "checkpoint_every: must be in"},
    {"\"seed\": 7", "\"seed\": 7, \"seed\": 8", "seed: given twice"},
    {"\"search_space\": {", "\"search_space\": {\"momentum2\": {\"type\": \"real\", \"low\": 0, \"high\": 1},",
     "search_space.momentum2: not used by the builtin trainer"},
    {"\"search_space\": {", "\"search_space\": {\"opt\": {\"type\": \"categorical\", \"values\": []},",
     "search_space.opt.values: must be a list of 1 to"},
    {"\"search_space\": {", "\"search_space\": {\"optimizer\": {\"type\": \"categorical\", \"values\": [\"adam\", \"adam\"]},",
     "search_space.optimizer.values[1]: \"adam\" given twice"},
    {"\"search_space\": {", "\"search_space\": {\"optimizer\": {\"type\": \"categorical\", \"values\": [\"adam\", \"lion\"]},",
     "search_space.optimizer.values[1]: \"lion\" is not one of"},
    {"\"search_space\": {", "\"search_space\": {\"batch\": {\"type\": \"int\", \"low\": 16.5, \"high\": 64},",
     "search_space.batch.low: an int parameter needs integer bounds"},
    {"\"search_space\": {", "\"search_space\": {\"trial\": {\"type\": \"int\", \"low\": 1, \"high\": 2},",
     "search_space.trial: a parameter name"},
    {"\"scheduler\": {", "\"scheduler2\": {", "scheduler2: unknown field"},
    {"{\"name\"", "[{\"name\"", "study: not valid JSON"},
    {"\"dataset\": \"fashion-mnist\",", "", "dataset: required for the builtin trainer"},
    {"\"budget\": {\"trials\": 20}}", "\"budget\": {\"trials\": 20}} {}", "study: text after the JSON object"},
};

static void test_invalid(void) {
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[8192];
        const char *at = strstr(base, bad[i].from);
        CHECK_MSG(at != NULL, "case %zu: '%s' not in base", i, bad[i].from);
        if (!at)
            continue;
        size_t pre = (size_t)(at - base);
        snprintf(buf, sizeof buf, "%.*s%s%s", (int)pre, base, bad[i].to, at + strlen(bad[i].from));
        sl_study_spec_t s;
        memset(&s, 0x5a, sizeof s);
        char why[256] = "";
        sl_err err = sl_study_spec_parse(buf, strlen(buf), &s, why, sizeof why);
        CHECK_MSG(err != SL_OK, "case %zu accepted: %s", i, buf);
        CHECK_MSG(strstr(why, bad[i].want) != NULL, "case %zu: got \"%s\", want \"%s\"", i, why,
                  bad[i].want);
        /* nothing written on refusal */
        CHECK_INT(((unsigned char *)&s)[0], 0x5a);
    }
}

static void test_not_json(void) {
    sl_study_spec_t s;
    char why[128];
    CHECK_ERR(sl_study_spec_parse("", 0, &s, why, sizeof why), SL_EINVAL);
    CHECK_ERR(sl_study_spec_parse("[1,2]", 5, &s, why, sizeof why), SL_EINVAL);
    CHECK(strstr(why, "study: must be a JSON object") != NULL);
    CHECK_ERR(sl_study_spec_parse("{}", 2, &s, why, sizeof why), SL_EINVAL);
    CHECK(strstr(why, "name: required") != NULL);
    static char huge[SL_STUDY_SPEC_MAX_LEN + 2];
    memset(huge, ' ', sizeof huge);
    CHECK_ERR(sl_study_spec_parse(huge, sizeof huge, &s, why, sizeof why), SL_ETOOBIG);
}

static void test_alloc_failures(void) {
    /* every allocation failing in turn: an error, never a crash or leak */
    int64_t live = sl_alloc_live();
    for (uint64_t n = 1; n < 8; n++) {
        sl_study_spec_t s;
        char why[128];
        sl_alloc_fail_after(n, false);
        sl_err err = sl_study_spec_parse(base, strlen(base), &s, why, sizeof why);
        sl_alloc_fail_after(0, false);
        CHECK(err == SL_OK || err == SL_ENOMEM);
    }
    CHECK_INT(sl_alloc_live(), live);
}

static void test_train_cfg(void) {
    char buf[4096];
    const char *from = "\"search_space\": {";
    const char *at = strstr(base, from);
    snprintf(buf, sizeof buf, "%.*s%s\"optimizer\": {\"type\": \"categorical\", \"values\": "
             "[\"sgd\", \"adamw\"]}, \"batch\": {\"type\": \"int\", \"low\": 32, \"high\": 256},%s",
             (int)(at - base), base, from, at + strlen(from));
    sl_study_spec_t s;
    parse_ok(buf, &s);
    sl_config_t c;
    memset(&c, 0, sizeof c);
    int arch = sl_study_spec_param(&s, "arch");
    c.values[arch].arch[SL_ARCH_FAMILY] = 1;
    c.values[arch].arch[SL_ARCH_LAYERS] = 1;
    c.values[arch].arch[SL_ARCH_FC] = 1;
    c.values[sl_study_spec_param(&s, "lr")].real = 0.002;
    c.values[sl_study_spec_param(&s, "batch")].integer = 64;
    c.values[sl_study_spec_param(&s, "optimizer")].choice = 1;
    sl_space_canon(&s, &c);
    sl_nn_train_cfg_t cfg;
    char model[256], why[128] = "";
    CHECK_OK(sl_study_train_cfg(&s, &c, "0123456789abcdef", 3, &cfg, model, sizeof model, why,
                                sizeof why));
    CHECK_STR(cfg.model, "cnn:16,32,k=3,pad=same/fc:64");
    CHECK_INT(cfg.epochs, 3);
    CHECK_INT(cfg.batch, 64);
    CHECK_NEAR(cfg.lr, 0.002, 1e-9);
    CHECK_INT(cfg.optimizer, SL_NN_OPT_ADAMW);
    CHECK_NEAR(cfg.val_split, 0.1, 1e-6);
    uint64_t seed = cfg.seed;
    CHECK_OK(sl_study_train_cfg(&s, &c, "0123456789abcdee", 3, &cfg, model, sizeof model, why,
                                sizeof why));
    CHECK(cfg.seed != seed);
}

/* Random mutations of a valid spec: refused or accepted, never a crash
 * (the sanitizer build runs this too), and an accepted one is valid. */
static void test_mutations(void) {
    sl_rng_t rng;
    sl_rng_seed(&rng, 5);
    size_t n = strlen(base);
    char *buf = malloc(n + 64);
    static const char charset[] = "{}[]\":,0123456789.-eE tfnul\\";
    int accepted = 0;
    for (int i = 0; i < 20000; i++) {
        memcpy(buf, base, n + 1);
        size_t len = n;
        int edits = 1 + (int)sl_rng_below(&rng, 3);
        for (int e = 0; e < edits; e++) {
            size_t at = sl_rng_below(&rng, len);
            switch (sl_rng_below(&rng, 3)) {
            case 0: /* replace a byte */
                buf[at] = charset[sl_rng_below(&rng, sizeof charset - 1)];
                break;
            case 1: /* delete a byte */
                memmove(buf + at, buf + at + 1, len - at);
                len--;
                break;
            default: /* duplicate a byte */
                memmove(buf + at + 1, buf + at, len - at + 1);
                len++;
                break;
            }
        }
        sl_study_spec_t s;
        char why[256] = "";
        sl_err err = sl_study_spec_parse(buf, len, &s, why, sizeof why);
        if (err == SL_OK) {
            accepted++;
            CHECK(s.param_count >= 1 && s.rung_count >= 1 && s.budget_trials >= 1);
        } else {
            CHECK_MSG(why[0] != '\0', "refused without a reason: %.*s", (int)len, buf);
            CHECK(strchr(why, ':') != NULL); /* "field: problem" */
        }
    }
    free(buf);
    CHECK(accepted > 0);
}

int main(void) {
    sl_test_run("base", test_base);
    sl_test_run("number_choices", test_number_choices);
    sl_test_run("ladders", test_ladders);
    sl_test_run("examples", test_examples);
    sl_test_run("invalid", test_invalid);
    sl_test_run("not_json", test_not_json);
    sl_test_run("alloc_failures", test_alloc_failures);
    sl_test_run("train_cfg", test_train_cfg);
    sl_test_run("mutations", test_mutations);
    return sl_test_finish();
}
