/* libFuzzer target for the study's decoders: what a peer reads from the
 * store (written by any other peer: a study's spec, trial records, claim
 * registers, results, checkpoint manifests) and from a command trial's
 * stdout (reports), and the live view that applies those keys one by one
 * (src/study/study_view.c).
 *
 * Input: byte 0 picks the decoder (byte0 % 6); the rest is the text.
 *   0 a study spec (sl_study_spec_parse)
 *   1 a trial record against a fixed spec with every kind of parameter
 *   2 a claim register        3 a result        4 a report line
 *   5 keys for a study's live view: records "SUFFIX\x01VALUE" separated by
 *     \x00, each applied under study/S/ as a write, then all as deletes
 * tests/fuzz/corpus/study/ holds seeds in this layout.
 *
 * What must hold: no crash, leak or sanitizer report; whatever decodes
 * encodes again, and that encoding decodes to itself (one canonical form);
 * a key the study key parser (src/study/study_keys.c) accepts names the
 * study it is under, and one of a kind without a number or a writer
 * builds back to its bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/common.h"
#include "starling/store.h"
#include "starling/study.h"
#include "study/study_keys.h"
#include "study/study_node_internal.h"

static void fail(const char *what) {
    fprintf(stderr, "fuzz_study: property broken: %s\n", what);
    abort();
}

/* The spec the trial records and the live view are read against. */
static const char SPEC[] =
    "{\"name\": \"fuzz\", \"seed\": 1,"
    " \"trainer\": {\"type\": \"command\", \"command\": \"true\"},"
    " \"search_space\": {"
    "  \"lr\": {\"type\": \"real\", \"low\": 0.0001, \"high\": 0.1, \"log\": true},"
    "  \"layers\": {\"type\": \"int\", \"low\": 1, \"high\": 4},"
    "  \"act\": {\"type\": \"categorical\", \"values\": [\"relu\", \"tanh\", 3]},"
    "  \"arch\": {\"type\": \"arch\", \"families\": [\"cnn\", \"mlp\"], \"layers\": [1, 2],"
    "            \"kernel\": [3, 5], \"channels\": [4, 8], \"fc\": [0, 64]}},"
    " \"searcher\": {\"type\": \"random\"},"
    " \"scheduler\": {\"type\": \"asha\", \"min_epochs\": 1, \"max_epochs\": 9, \"reduction\": 3},"
    " \"objectives\": [{\"metric\": \"acc\", \"goal\": \"max\"}, {\"metric\": \"loss\", \"goal\": \"min\"}],"
    " \"budget\": {\"trials\": 10}}";
#define STUDY_ID "0123456789abcdef"

static const sl_study_spec_t *fixed_spec(void) {
    static sl_study_spec_t spec;
    static bool ready;
    char why[256];
    if (!ready && sl_study_spec_parse(SPEC, strlen(SPEC), &spec, why, sizeof why) != SL_OK) {
        fprintf(stderr, "fuzz_study: the fixed spec is refused: %s\n", why);
        abort();
    }
    ready = true;
    return &spec;
}

static void trial_record(const char *text, size_t len) {
    const sl_study_spec_t *spec = fixed_spec();
    sl_trial_t t, t2;
    char why[256], out[SL_STUDY_RECORD_MAX], again[SL_STUDY_RECORD_MAX];
    size_t ol, al;
    if (sl_trial_record_decode(spec, STUDY_ID, NULL, text, len, &t, why, sizeof why) != SL_OK)
        return;
    if (sl_trial_record_encode(spec, &t, out, sizeof out, &ol) != SL_OK)
        fail("a decoded trial record does not encode");
    if (sl_trial_record_decode(spec, STUDY_ID, t.id, out, ol, &t2, why, sizeof why) != SL_OK)
        fail("an encoded trial record does not decode (or changes its id)");
    if (sl_trial_record_encode(spec, &t2, again, sizeof again, &al) != SL_OK || al != ol ||
        memcmp(again, out, ol) != 0)
        fail("a trial record's encoding is not stable");
}

static void claim(const char *text, size_t len) {
    sl_claim_t c, c2;
    char out[512], again[512];
    size_t ol, al;
    if (sl_claim_decode(text, len, &c) != SL_OK)
        return;
    if (sl_claim_encode(&c, out, sizeof out, &ol) != SL_OK)
        fail("a decoded claim does not encode");
    if (sl_claim_decode(out, ol, &c2) != SL_OK)
        fail("an encoded claim does not decode");
    if (sl_claim_encode(&c2, again, sizeof again, &al) != SL_OK || al != ol ||
        memcmp(again, out, ol) != 0)
        fail("a claim's encoding is not stable");
}

static void result(const char *text, size_t len) {
    sl_result_t r, r2;
    char out[1024], again[1024];
    size_t ol, al;
    if (sl_result_decode(text, len, &r) != SL_OK)
        return;
    if (sl_result_encode(&r, out, sizeof out, &ol) != SL_OK)
        fail("a decoded result does not encode");
    if (sl_result_decode(out, ol, &r2) != SL_OK)
        fail("an encoded result does not decode");
    if (sl_result_encode(&r2, again, sizeof again, &al) != SL_OK || al != ol ||
        memcmp(again, out, ol) != 0)
        fail("a result's encoding is not stable");
}

static void report(const char *text, size_t len) {
    sl_report_t r, r2;
    char why[128], out[SL_REPORT_LINE_MAX + 1], again[SL_REPORT_LINE_MAX + 1];
    size_t ol, al;
    if (sl_report_parse(text, len, &r, why, sizeof why) != SL_OK)
        return;
    if (sl_report_encode(&r, out, sizeof out, &ol) != SL_OK)
        fail("a parsed report does not encode");
    if (sl_report_parse(out, ol, &r2, why, sizeof why) != SL_OK)
        fail("an encoded report does not parse");
    if (sl_report_encode(&r2, again, sizeof again, &al) != SL_OK || al != ol ||
        memcmp(again, out, ol) != 0)
        fail("a report's encoding is not stable");
}

/* The parser's properties on one key. */
static void key_parse(const char *key, size_t len) {
    sl_study_key_t k;
    if (sl_study_key_parse(key, len, &k) != SL_OK)
        return;
    if (strcmp(k.study, STUDY_ID))
        fail("a parsed key names another study");
    if (k.sub_len > len || k.rest_len > k.sub_len)
        fail("a parsed key's parts are longer than it");
    bool plain = k.kind == SL_STUDY_KEY_SPEC || k.kind == SL_STUDY_KEY_START ||
                 k.kind == SL_STUDY_KEY_CANCEL || k.kind == SL_STUDY_KEY_FINISHED ||
                 k.kind == SL_STUDY_KEY_RECORD || k.kind == SL_STUDY_KEY_STOP ||
                 k.kind == SL_STUDY_KEY_CKPT;
    char back[SL_STUDY_KEY_MAX];
    if (plain &&
        (sl_study_key_build(back, sizeof back, k.kind, k.study, k.trial, 0, NULL) != SL_OK ||
         strlen(back) != len || memcmp(back, key, len)))
        fail("a parsed key does not build back to its bytes");
}

/* Applies each "SUFFIX\x01VALUE" record as a write, then each as a delete. */
static void live_view(const char *text, size_t len) {
    cached_t *c = calloc(1, sizeof *c);
    if (!c)
        return;
    memcpy(c->id, STUDY_ID, sizeof STUDY_ID);
    c->spec = *fixed_spec();
    for (int pass = 0; pass < 2; pass++) {
        size_t at = 0;
        while (at < len) {
            const char *rec = text + at;
            const char *end = memchr(rec, 0, len - at);
            size_t rl = end ? (size_t)(end - rec) : len - at;
            at += rl + 1;
            const char *sep = memchr(rec, 1, rl);
            size_t kl = sep ? (size_t)(sep - rec) : rl;
            char key[SL_STORE_MAX_KEY_LEN];
            int n = snprintf(key, sizeof key, "study/%s/%.*s", STUDY_ID, (int)kl, rec);
            if (n < 0 || (size_t)n >= sizeof key)
                continue;
            if (!pass)
                key_parse(key, (size_t)n);
            const uint8_t *val = sep ? (const uint8_t *)sep + 1 : (const uint8_t *)"";
            size_t vl = sep ? rl - kl - 1 : 0;
            sl_study_live_apply(NULL, c, (const uint8_t *)key, (size_t)n, pass ? NULL : val,
                                pass ? 0 : vl, pass == 0);
        }
    }
    sl_study_live_fini(&c->live);
    free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    sl_log_set_level(0);
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    switch (data[0] % 6) {
    case 0: {
        sl_study_spec_t spec;
        char why[256], id[SL_TRIAL_ID_LEN + 1];
        if (sl_study_spec_parse(text, len, &spec, why, sizeof why) == SL_OK)
            sl_study_spec_id(&spec, id);
        break;
    }
    case 1:
        trial_record(text, len);
        break;
    case 2:
        claim(text, len);
        break;
    case 3:
        result(text, len);
        break;
    case 4:
        report(text, len);
        break;
    default:
        live_view(text, len);
        break;
    }
    return 0;
}
