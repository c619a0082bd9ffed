/* Search spaces: sampling stays in bounds and is a function of the seed;
 * the canonical encoding round-trips and is what trial ids hash; grids
 * enumerate every distinct point once; templates render. */
#include <math.h>
#include <stdlib.h>

#include "starling/study.h"
#include "testlib.h"

static const char *spec_json =
    "{\"name\": \"sp\", \"seed\": 1,"
    " \"trainer\": {\"type\": \"command\", \"command\": \"train --lr {lr} --n {n} --opt {opt} "
    "--arch '{arch}' --id {trial} {{x}}\"},"
    " \"search_space\": {"
    "  \"lr\": {\"type\": \"real\", \"low\": 0.0001, \"high\": 0.1, \"log\": true},"
    "  \"n\": {\"type\": \"int\", \"low\": 1, \"high\": 5},"
    "  \"opt\": {\"type\": \"categorical\", \"values\": [\"adam\", \"sgd\", 0.5, true]},"
    "  \"arch\": {\"type\": \"arch\", \"families\": [\"mlp\", \"cnn\"], \"layers\": [1, 2, 3],"
    "            \"units\": [64, 128], \"channels\": [8, 16], \"kernel\": [3, 5], \"fc\": [0, 32]}},"
    " \"scheduler\": {\"type\": \"fifo\", \"epochs\": 2},"
    " \"objectives\": [{\"metric\": \"acc\", \"goal\": \"max\"}],"
    " \"budget\": {\"trials\": 10}}";

static sl_study_spec_t spec;

static void load(void) {
    char why[256] = "";
    sl_err err = sl_study_spec_parse(spec_json, strlen(spec_json), &spec, why, sizeof why);
    CHECK_MSG(err == SL_OK, "%s", why);
}

static void test_sample_bounds(void) {
    sl_rng_t rng;
    sl_rng_seed(&rng, 42);
    int lr = sl_study_spec_param(&spec, "lr"), n = sl_study_spec_param(&spec, "n");
    int opt = sl_study_spec_param(&spec, "opt"), arch = sl_study_spec_param(&spec, "arch");
    CHECK(lr >= 0 && n >= 0 && opt >= 0 && arch >= 0);
    int low_decade = 0, seen_n[6] = {0}, fam[2] = {0};
    for (int i = 0; i < 5000; i++) {
        sl_config_t c;
        sl_space_sample(&spec, &rng, &c);
        double x = c.values[lr].real;
        CHECK(x >= 0.0001 && x <= 0.1);
        if (x < 0.001)
            low_decade++;
        CHECK(c.values[n].integer >= 1 && c.values[n].integer <= 5);
        seen_n[c.values[n].integer]++;
        CHECK(c.values[opt].choice >= 0 && c.values[opt].choice < 4);
        fam[c.values[arch].arch[SL_ARCH_FAMILY]]++;
        /* canonical: 4 significant digits */
        char t[64];
        snprintf(t, sizeof t, "%.4g", x);
        CHECK(strtod(t, NULL) == x);
    }
    /* log scale: a third of the samples in the lowest of three decades */
    CHECK_MSG(low_decade > 1400 && low_decade < 1950, "low decade %d", low_decade);
    for (int v = 1; v <= 5; v++)
        CHECK(seen_n[v] > 800);
    CHECK(fam[0] > 2000 && fam[1] > 2000);
}

static void test_seeded(void) {
    sl_rng_t a, b;
    sl_rng_seed(&a, 9);
    sl_rng_seed(&b, 9);
    for (int i = 0; i < 100; i++) {
        sl_config_t x, y;
        sl_space_sample(&spec, &a, &x);
        sl_space_sample(&spec, &b, &y);
        CHECK(sl_space_equal(&spec, &x, &y));
        CHECK(memcmp(&x, &y, sizeof x) == 0); /* canonical bytes too */
    }
}

static void test_encode_roundtrip(void) {
    sl_rng_t rng;
    sl_rng_seed(&rng, 3);
    for (int i = 0; i < 500; i++) {
        sl_config_t c, d;
        sl_space_sample(&spec, &rng, &c);
        char json[SL_CONFIG_JSON_MAX], again[SL_CONFIG_JSON_MAX], why[128] = "";
        size_t len, len2;
        CHECK_OK(sl_space_encode(&spec, &c, json, sizeof json, &len));
        CHECK_INT(len, strlen(json));
        CHECK_MSG(sl_space_decode(&spec, json, len, &d, why, sizeof why) == SL_OK, "%s: %s", json,
                  why);
        CHECK(sl_space_equal(&spec, &c, &d));
        CHECK_OK(sl_space_encode(&spec, &d, again, sizeof again, &len2));
        CHECK_STR(json, again);
    }
}

static void test_encoding_fixed(void) {
    sl_config_t c;
    memset(&c, 0, sizeof c);
    int lr = sl_study_spec_param(&spec, "lr"), n = sl_study_spec_param(&spec, "n");
    int opt = sl_study_spec_param(&spec, "opt"), arch = sl_study_spec_param(&spec, "arch");
    c.values[lr].real = 0.00123456;
    c.values[n].integer = 3;
    c.values[opt].choice = 2;
    c.values[arch].arch[SL_ARCH_FAMILY] = 1;
    c.values[arch].arch[SL_ARCH_LAYERS] = 1;
    c.values[arch].arch[SL_ARCH_CHANNELS] = 1;
    c.values[arch].arch[SL_ARCH_KERNEL] = 0;
    c.values[arch].arch[SL_ARCH_FC] = 1;
    c.values[arch].arch[SL_ARCH_UNITS] = 1; /* ignored by cnn: canon zeroes it */
    sl_space_canon(&spec, &c);
    CHECK_INT(c.values[arch].arch[SL_ARCH_UNITS], 0);
    char json[SL_CONFIG_JSON_MAX];
    size_t len;
    CHECK_OK(sl_space_encode(&spec, &c, json, sizeof json, &len));
    CHECK_STR(json, "{\"arch\":\"cnn:16,32,k=3,pad=same/fc:32\",\"lr\":0.001235,\"n\":3,\"opt\":0.5}");
    /* ids: a function of study id, bracket and content */
    char a[SL_TRIAL_ID_LEN + 1], b[SL_TRIAL_ID_LEN + 1], d[SL_TRIAL_ID_LEN + 1];
    sl_trial_id("0123456789abcdef", 0, json, len, a);
    sl_trial_id("0123456789abcdef", 0, json, len, b);
    CHECK_STR(a, b);
    sl_trial_id("0123456789abcdef", 1, json, len, d);
    CHECK(strcmp(a, d) != 0);
    sl_trial_id("0123456789abcdee", 0, json, len, d);
    CHECK(strcmp(a, d) != 0);
    /* a boolean categorical value is a bare literal; strings are quoted */
    c.values[opt].choice = 3;
    CHECK_OK(sl_space_encode(&spec, &c, json, sizeof json, &len));
    CHECK(strstr(json, "\"opt\":true") != NULL);
    c.values[opt].choice = 0;
    CHECK_OK(sl_space_encode(&spec, &c, json, sizeof json, &len));
    CHECK(strstr(json, "\"opt\":\"adam\"") != NULL);
    /* templates */
    char out[512], why[128];
    CHECK_OK(sl_space_render(&spec, &c, a, spec.command, out, sizeof out, why, sizeof why));
    char want[512];
    snprintf(want, sizeof want,
             "train --lr 0.001235 --n 3 --opt adam --arch 'cnn:16,32,k=3,pad=same/fc:32' --id %s "
             "{x}",
             a);
    CHECK_STR(out, want);
    CHECK_ERR(sl_space_render(&spec, &c, a, "x {nope}", out, sizeof out, why, sizeof why),
              SL_EINVAL);
    CHECK(strstr(why, "{nope}") != NULL);
    CHECK_ERR(sl_space_render(&spec, &c, a, "{lr}{lr}{lr}", out, 8, why, sizeof why), SL_ETOOBIG);
}

static void test_decode_invalid(void) {
    sl_config_t c;
    char why[128];
    const char *bad[] = {
        "[]",
        "{\"arch\":\"mlp:64\",\"lr\":0.01,\"n\":3}",                       /* missing opt */
        "{\"arch\":\"mlp:64\",\"lr\":0.5,\"n\":3,\"opt\":\"adam\"}",        /* lr too high */
        "{\"arch\":\"mlp:64\",\"lr\":0.01,\"n\":3.5,\"opt\":\"adam\"}",     /* n not integer */
        "{\"arch\":\"mlp:64\",\"lr\":0.01,\"n\":3,\"opt\":\"rmsprop\"}",    /* unknown choice */
        "{\"arch\":\"mlp:64\",\"lr\":0.01,\"n\":3,\"opt\":\"0.5\"}",        /* string vs number */
        "{\"arch\":\"mlp:65\",\"lr\":0.01,\"n\":3,\"opt\":\"adam\"}",       /* not in the space */
        "{\"arch\":\"mlp:64\",\"lr\":0.01,\"n\":3,\"opt\":\"adam\",\"x\":1}", /* extra key */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(sl_space_decode(&spec, bad[i], strlen(bad[i]), &c, why, sizeof why) != SL_OK,
                  "accepted %s", bad[i]);
    const char *ok = "{\"arch\":\"mlp:64\",\"lr\":0.01,\"n\":3,\"opt\":\"adam\"}";
    CHECK_OK(sl_space_decode(&spec, ok, strlen(ok), &c, why, sizeof why));
}

static void test_grid(void) {
    /* arch: mlp 3 layers x 2 units = 6, cnn 3 x 2 channels x 2 kernels x 2 fc = 24 */
    uint64_t n = sl_space_grid_size(&spec);
    int lr = sl_study_spec_param(&spec, "lr");
    CHECK_INT(spec.params[lr].grid_points, 3);
    CHECK_INT(n, 30ull * 3 * 3 * 4);
    char (*seen)[SL_CONFIG_JSON_MAX] = calloc(n, sizeof *seen);
    for (uint64_t i = 0; i < n; i++) {
        sl_config_t c;
        CHECK_OK(sl_space_grid_point(&spec, i, &c));
        size_t len;
        CHECK_OK(sl_space_encode(&spec, &c, seen[i], sizeof seen[i], &len));
        for (uint64_t j = 0; j < i; j++)
            if (strcmp(seen[i], seen[j]) == 0) {
                CHECK_MSG(0, "grid points %llu and %llu equal: %s", (unsigned long long)i,
                          (unsigned long long)j, seen[i]);
                break;
            }
    }
    free(seen);
    sl_config_t c;
    CHECK_ERR(sl_space_grid_point(&spec, n, &c), SL_ENOTFOUND);
    /* grid values of lr: the ends and the geometric middle */
    CHECK_OK(sl_space_grid_point(&spec, 0, &c));
    int arch = sl_study_spec_param(&spec, "arch");
    (void)arch;
}

static void test_mutate_crossover(void) {
    sl_rng_t rng;
    sl_rng_seed(&rng, 5);
    int changed = 0;
    for (int i = 0; i < 1000; i++) {
        sl_config_t a, b, c;
        sl_space_sample(&spec, &rng, &a);
        sl_space_sample(&spec, &rng, &b);
        c = a;
        sl_space_mutate(&spec, &rng, 0.2, &c);
        if (!sl_space_equal(&spec, &a, &c))
            changed++;
        /* still canonical and in the space */
        char json[SL_CONFIG_JSON_MAX], why[128];
        size_t len;
        sl_config_t d;
        CHECK_OK(sl_space_encode(&spec, &c, json, sizeof json, &len));
        CHECK_MSG(sl_space_decode(&spec, json, len, &d, why, sizeof why) == SL_OK, "%s", why);
        sl_space_crossover(&spec, &rng, &a, &b, &c);
        for (int p = 0; p < spec.param_count; p++)
            CHECK(memcmp(&c.values[p], &a.values[p], sizeof c.values[p]) == 0 ||
                  memcmp(&c.values[p], &b.values[p], sizeof c.values[p]) == 0);
    }
    CHECK_MSG(changed > 900, "mutation changed only %d of 1000", changed);
}

static void test_trial_record(void) {
    sl_rng_t rng;
    sl_rng_seed(&rng, 8);
    for (int i = 0; i < 200; i++) {
        sl_trial_t t, u;
        memset(&t, 0, sizeof t);
        sl_space_sample(&spec, &rng, &t.config);
        t.ordinal = (uint64_t)i;
        t.bracket = 0;
        t.rung = 0;
        char json[SL_CONFIG_JSON_MAX], rec[SL_STUDY_RECORD_MAX], why[128] = "";
        size_t len, rlen;
        CHECK_OK(sl_space_encode(&spec, &t.config, json, sizeof json, &len));
        sl_trial_id("sid", 0, json, len, t.id);
        CHECK_OK(sl_trial_record_encode(&spec, &t, rec, sizeof rec, &rlen));
        CHECK_MSG(sl_trial_record_decode(&spec, "sid", t.id, rec, rlen, &u, why, sizeof why) ==
                      SL_OK,
                  "%s: %s", rec, why);
        CHECK_STR(u.id, t.id);
        CHECK_INT(u.ordinal, (uint64_t)i);
        CHECK(sl_space_equal(&spec, &t.config, &u.config));
        /* under the wrong key: refused */
        CHECK_ERR(sl_trial_record_decode(&spec, "sid", "0000000000000000", rec, rlen, &u, why,
                                         sizeof why),
                  SL_EPROTO);
        CHECK(strstr(why, "hashes to") != NULL);
    }
    const char *bad[] = {"{}", "{\"ordinal\":-1,\"bracket\":0,\"rung\":0,\"config\":{}}",
                         "{\"ordinal\":1,\"bracket\":0,\"rung\":5,\"config\":{}}",
                         "{\"ordinal\":1,\"bracket\":0,\"rung\":0,\"config\":[]}",
                         "{\"ordinal\":1,\"bracket\":0,\"rung\":0,\"config\":{\"lr\":1}}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sl_trial_t u;
        char why[128];
        CHECK_MSG(sl_trial_record_decode(&spec, "sid", NULL, bad[i], strlen(bad[i]), &u, why,
                                         sizeof why) != SL_OK,
                  "accepted %s", bad[i]);
    }
}

int main(void) {
    load();
    sl_test_run("sample_bounds", test_sample_bounds);
    sl_test_run("seeded", test_seeded);
    sl_test_run("encode_roundtrip", test_encode_roundtrip);
    sl_test_run("encoding_fixed", test_encoding_fixed);
    sl_test_run("decode_invalid", test_decode_invalid);
    sl_test_run("grid", test_grid);
    sl_test_run("mutate_crossover", test_mutate_crossover);
    sl_test_run("trial_record", test_trial_record);
    return sl_test_finish();
}
