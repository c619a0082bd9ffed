/* Model spec grammar: what parses, what is rejected with which message,
 * and the parameter counts and FLOPs the specs report. */
#include "starling/nn.h"
#include "testlib.h"

static const sl_nn_shape_t mnist = {.channels = 1, .height = 28, .width = 28, .classes = 10};

static void test_parse_mlp(void) {
    sl_nn_spec_t s;
    char why[256];
    CHECK_OK(sl_nn_spec_parse("mlp:256,128", &s, why, sizeof why));
    CHECK_INT(s.count, 2);
    CHECK_INT(s.layers[0].kind, SL_NN_SPEC_DENSE);
    CHECK_INT(s.layers[0].units, 256);
    CHECK_INT(s.layers[1].units, 128);
    CHECK(!s.layers[0].batchnorm);
    CHECK_STR(s.text, "mlp:256,128");
    CHECK_OK(sl_nn_spec_parse("mlp:64,bn,dropout=0.25,32", &s, why, sizeof why));
    CHECK_INT(s.count, 2);
    CHECK(s.layers[0].batchnorm && s.layers[1].batchnorm); /* options cover the stage */
    CHECK_NEAR(s.layers[1].dropout, 0.25, 1e-6);
    CHECK_OK(sl_nn_spec_parse("linear", &s, why, sizeof why));
    CHECK_INT(s.count, 0);
}

static void test_parse_cnn(void) {
    sl_nn_spec_t s;
    char why[256];
    CHECK_OK(sl_nn_spec_parse("cnn:32,64/fc:128", &s, why, sizeof why));
    CHECK_INT(s.count, 3);
    CHECK_INT(s.layers[0].kind, SL_NN_SPEC_CONV);
    CHECK_INT(s.layers[0].kernel, 5);
    CHECK_INT(s.layers[0].pad, 0);
    CHECK_INT(s.layers[0].pool, 2);
    CHECK_INT(s.layers[1].units, 64);
    CHECK_INT(s.layers[2].kind, SL_NN_SPEC_DENSE);
    CHECK_INT(s.layers[2].pool, 1);
    CHECK_OK(sl_nn_spec_parse("cnn:16,k=3,pad=same,bn,pool=1/conv:8,stride=2,k=3", &s, why,
                              sizeof why));
    CHECK_INT(s.layers[0].pad, 1);
    CHECK_INT(s.layers[0].pool, 1);
    CHECK(s.layers[0].batchnorm);
    CHECK_INT(s.layers[1].stride, 2);
    CHECK(!s.layers[1].batchnorm);
}

/* Each bad spec is rejected and the message names the offending part. */
static void test_reject(void) {
    static const struct {
        const char *spec, *says;
    } bad[] = {
        {"", "empty"},
        {"mlp", "family:"},
        {"rnn:5", "unknown family 'rnn'"},
        {"mlp:", "empty item"},
        {"mlp:0", "'0'"},
        {"mlp:70000", "'70000'"},
        {"mlp:12x", "'12x'"},
        {"mlp:5,,6", "empty item"},
        {"mlp:5/", "empty stage"},
        {"mlp:bn", "names no layer width"},
        {"mlp:5,k=3", "unknown item 'k=3'"},
        {"mlp:5,dropout=1.5", "dropout"},
        {"cnn:8,k=0", "kernel size"},
        {"cnn:8,pad=same,k=4", "odd kernel"},
        {"cnn:8,pool=9", "pool"},
        {"fc:10/cnn:8", "after a dense stage"},
        {"mlp:5 ,6", "unexpected character"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sl_nn_spec_t s;
        char why[256] = "";
        sl_err err = sl_nn_spec_parse(bad[i].spec, &s, why, sizeof why);
        CHECK_MSG(err != SL_OK, "'%s' accepted", bad[i].spec);
        CHECK_MSG(strstr(why, bad[i].says) != NULL, "'%s': message '%s' lacks '%s'", bad[i].spec,
                  why, bad[i].says);
    }
    char longspec[400];
    memset(longspec, '1', sizeof longspec - 1);
    memcpy(longspec, "mlp:", 4);
    longspec[sizeof longspec - 1] = '\0';
    sl_nn_spec_t s;
    CHECK_ERR(sl_nn_spec_parse(longspec, &s, NULL, 0), SL_ETOOBIG);
    CHECK_ERR(sl_nn_spec_parse(NULL, &s, NULL, 0), SL_EINVAL);
}

/* Parameter counts match a hand count (and PyTorch's for the same nets). */
static void test_measure(void) {
    sl_nn_spec_t s;
    char why[256];
    uint64_t params, flops;
    CHECK_OK(sl_nn_spec_parse("mlp:256,128", &s, why, sizeof why));
    CHECK_OK(sl_nn_spec_measure(&s, &mnist, &params, &flops, why, sizeof why));
    CHECK_INT(params, 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
    CHECK_INT(flops, 2 * (784 * 256 + 256 * 128 + 128 * 10) + 256 + 128 + 10);
    CHECK_OK(sl_nn_spec_parse("cnn:32,64", &s, why, sizeof why));
    CHECK_OK(sl_nn_spec_measure(&s, &mnist, &params, &flops, why, sizeof why));
    CHECK_INT(params, (32 * 25 + 32) + (64 * 32 * 25 + 64) + (1024 * 10 + 10));
    uint64_t conv = 2ull * 32 * 25 * 24 * 24 + 2ull * 64 * 800 * 8 * 8;
    CHECK_INT(flops, conv + 32 * 24 * 24 + 32 * 12 * 12 + 64 * 8 * 8 + 64 * 4 * 4 +
                         2 * 1024 * 10 + 10);
    CHECK_OK(sl_nn_spec_parse("cnn:8,bn/fc:16,bn", &s, why, sizeof why));
    CHECK_OK(sl_nn_spec_measure(&s, &mnist, &params, &flops, why, sizeof why));
    CHECK_INT(params, (8 * 25 + 2 * 8) + (8 * 12 * 12 * 16 + 2 * 16) + (16 * 10 + 10));
    /* Windows that do not fit the input are rejected with the layer named. */
    CHECK_OK(sl_nn_spec_parse("cnn:8,16,32,k=5", &s, why, sizeof why));
    CHECK_ERR(sl_nn_spec_measure(&s, &mnist, &params, &flops, why, sizeof why), SL_EINVAL);
    CHECK_MSG(strstr(why, "conv layer 3") != NULL, "message: %s", why);
}

int main(void) {
    CHECK_OK(sl_init());
    sl_test_run("parse_mlp", test_parse_mlp);
    sl_test_run("parse_cnn", test_parse_cnn);
    sl_test_run("reject", test_reject);
    sl_test_run("measure", test_measure);
    return sl_test_finish();
}
