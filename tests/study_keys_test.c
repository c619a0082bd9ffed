/* A study's store keys (src/study/study_keys.c), the one place that builds
 * and parses them:
 *
 *   build      every kind's bytes, pinned (they are what peers of other
 *              versions read and write)
 *   round_trip each built key parses back to its kind, ids and rest
 *   prefix     the scan prefixes of all studies, a study and a trial
 *   slots      peer/P/slots, a peer's offer to every study
 *   refused    bad ids, a missing writer, a key that does not fit
 *   parse      users' keys are not a study's; malformed ids are told apart
 *              (with the kind their shape says); the sub-keys a reader
 *              ignores (ckd/, a bare t/T/) and the lenient rests */
#include <string.h>

#include "study/study_keys.h"
#include "testlib.h"

#define S "0123456789abcdef"
#define T "fedcba9876543210"

static const struct {
    sl_study_key_kind kind;
    uint64_t n;
    const char *peer;
    const char *key;
    const char *rest;
} cases[] = {
    {SL_STUDY_KEY_SPEC, 0, NULL, "study/" S "/spec", ""},
    {SL_STUDY_KEY_START, 0, NULL, "study/" S "/start", ""},
    {SL_STUDY_KEY_CANCEL, 0, NULL, "study/" S "/cancel", ""},
    {SL_STUDY_KEY_FINISHED, 0, NULL, "study/" S "/finished", ""},
    {SL_STUDY_KEY_RECORD, 0, NULL, "study/" S "/t/" T, ""},
    {SL_STUDY_KEY_RUNG, 2, NULL, "study/" S "/t/" T "/rung/2", "2"},
    {SL_STUDY_KEY_CLAIM, 0, "p1", "study/" S "/t/" T "/claim/p1", "p1"},
    {SL_STUDY_KEY_METRIC, 3, NULL, "study/" S "/t/" T "/m/00003", "00003"},
    {SL_STUDY_KEY_METRIC, 123456, NULL, "study/" S "/t/" T "/m/123456", "123456"},
    {SL_STUDY_KEY_FAIL, 7, NULL, "study/" S "/t/" T "/fail/7", "7"},
    {SL_STUDY_KEY_RESULT, 4, "peer-2", "study/" S "/t/" T "/res/peer-2@4", "peer-2@4"},
    {SL_STUDY_KEY_STOP, 0, NULL, "study/" S "/t/" T "/stop", ""},
    {SL_STUDY_KEY_LOG, 12, "p/3", "study/" S "/t/" T "/log/0000000012/p/3", "0000000012/p/3"},
    {SL_STUDY_KEY_CKPT, 0, NULL, "study/" S "/t/" T "/ck", ""},
};
#define NCASES (sizeof cases / sizeof cases[0])

static bool is_study_kind(sl_study_key_kind k) {
    return k == SL_STUDY_KEY_SPEC || k == SL_STUDY_KEY_START || k == SL_STUDY_KEY_CANCEL ||
           k == SL_STUDY_KEY_FINISHED;
}

static void test_build(void) {
    for (size_t i = 0; i < NCASES; i++) {
        char key[SL_STUDY_KEY_MAX];
        CHECK_OK(sl_study_key_build(key, sizeof key, cases[i].kind, S, T, cases[i].n,
                                    cases[i].peer));
        CHECK_STR(key, cases[i].key);
    }
    /* a study's own keys need no trial */
    char key[SL_STUDY_KEY_MAX];
    CHECK_OK(sl_study_key_build(key, sizeof key, SL_STUDY_KEY_SPEC, S, NULL, 0, NULL));
    CHECK_STR(key, "study/" S "/spec");
    /* the longest key fits SL_STUDY_KEY_MAX */
    char name[SL_NAME_MAX + 1];
    memset(name, 'x', SL_NAME_MAX);
    name[SL_NAME_MAX] = 0;
    CHECK_OK(sl_study_key_build(key, sizeof key, SL_STUDY_KEY_LOG, S, T, UINT64_MAX, name));
    CHECK_INT(strlen(key), SL_STUDY_KEY_MAX - 1);
    CHECK_OK(sl_study_key_build(key, sizeof key, SL_STUDY_KEY_RESULT, S, T, UINT64_MAX, name));
}

static void test_round_trip(void) {
    for (size_t i = 0; i < NCASES; i++) {
        sl_study_key_t k;
        const char *key = cases[i].key;
        CHECK_OK(sl_study_key_parse(key, strlen(key), &k));
        CHECK_INT(k.kind, cases[i].kind);
        CHECK_STR(k.study, S);
        CHECK_STR(k.trial, is_study_kind(cases[i].kind) ? "" : T);
        CHECK_INT(k.rest_len, strlen(cases[i].rest));
        CHECK(!memcmp(k.rest, cases[i].rest, k.rest_len));
        /* sub is what follows t/T/ */
        size_t at = strlen("study/" S "/t/" T "/");
        if (is_study_kind(cases[i].kind) || cases[i].kind == SL_STUDY_KEY_RECORD)
            CHECK_INT(k.sub_len, 0);
        else
            CHECK(k.sub == key + at && k.sub_len == strlen(key) - at);
    }
}

static void test_prefix(void) {
    char p[SL_STUDY_KEY_MAX];
    CHECK_OK(sl_study_key_prefix(p, sizeof p, NULL, NULL));
    CHECK_STR(p, "study/");
    CHECK_OK(sl_study_key_prefix(p, sizeof p, S, NULL));
    CHECK_STR(p, "study/" S "/");
    CHECK_OK(sl_study_key_prefix(p, sizeof p, S, T));
    CHECK_STR(p, "study/" S "/t/" T "/");
    CHECK_ERR(sl_study_key_prefix(p, sizeof p, NULL, T), SL_EINVAL);
    CHECK_ERR(sl_study_key_prefix(p, sizeof p, "../../../escaped", NULL), SL_EINVAL);
    CHECK_ERR(sl_study_key_prefix(p, 10, S, NULL), SL_ETOOBIG);
    CHECK_STR(p, "");
}

static void test_slots(void) {
    char key[SL_STUDY_KEY_MAX];
    CHECK_OK(sl_study_slots_key(key, sizeof key, "p1"));
    CHECK_STR(key, "peer/p1/slots");
    CHECK_ERR(sl_study_slots_key(key, sizeof key, ""), SL_EINVAL);
    CHECK_ERR(sl_study_slots_key(key, sizeof key, NULL), SL_EINVAL);
    CHECK_ERR(sl_study_slots_key(key, 8, "p1"), SL_ETOOBIG);
    /* not a study's key */
    sl_study_key_t k;
    CHECK_ERR(sl_study_key_parse("peer/p1/slots", 13, &k), SL_ENOTFOUND);
}

static void test_refused(void) {
    char key[SL_STUDY_KEY_MAX];
    CHECK_ERR(sl_study_key_build(key, sizeof key, SL_STUDY_KEY_SPEC, "../../../escaped", NULL, 0,
                                 NULL),
              SL_EINVAL);
    CHECK_ERR(sl_study_key_build(key, sizeof key, SL_STUDY_KEY_SPEC, "0123456789ABCDEF", NULL, 0,
                                 NULL),
              SL_EINVAL);
    CHECK_ERR(sl_study_key_build(key, sizeof key, SL_STUDY_KEY_SPEC, NULL, NULL, 0, NULL),
              SL_EINVAL);
    CHECK_ERR(sl_study_key_build(key, sizeof key, SL_STUDY_KEY_RECORD, S, NULL, 0, NULL),
              SL_EINVAL);
    CHECK_ERR(sl_study_key_build(key, sizeof key, SL_STUDY_KEY_STOP, S, "0123", 0, NULL),
              SL_EINVAL);
    CHECK_ERR(sl_study_key_build(key, sizeof key, SL_STUDY_KEY_CLAIM, S, T, 0, NULL), SL_EINVAL);
    CHECK_ERR(sl_study_key_build(key, sizeof key, SL_STUDY_KEY_RESULT, S, T, 1, ""), SL_EINVAL);
    CHECK_ERR(sl_study_key_build(key, sizeof key, SL_STUDY_KEY_OTHER, S, T, 0, NULL), SL_EINVAL);
    CHECK_ERR(sl_study_key_build(key, 20, SL_STUDY_KEY_CKPT, S, T, 0, NULL), SL_ETOOBIG);
    CHECK_STR(key, "");
}

static sl_err parse(const char *key, sl_study_key_t *k) {
    return sl_study_key_parse(key, strlen(key), k);
}

static void test_parse(void) {
    sl_study_key_t k;
    /* users' keys, and ids of another length: not a study's */
    CHECK_ERR(parse("study/s1/state", &k), SL_ENOTFOUND);
    CHECK_ERR(parse("trial/1", &k), SL_ENOTFOUND);
    CHECK_ERR(parse("study/" S, &k), SL_ENOTFOUND);
    CHECK_ERR(parse("study/" S "x/spec", &k), SL_ENOTFOUND);
    CHECK_ERR(parse("", &k), SL_ENOTFOUND);
    /* shaped as a study's, with an id that is not: refused, the kind told */
    CHECK_ERR(parse("study/../../../escaped/spec", &k), SL_EPROTO);
    CHECK_INT(k.kind, SL_STUDY_KEY_SPEC);
    CHECK_STR(k.study, "");
    CHECK_ERR(parse("study/" S "/t/................/rung/1", &k), SL_EPROTO);
    CHECK_INT(k.kind, SL_STUDY_KEY_RUNG);
    CHECK_STR(k.trial, "");
    CHECK_ERR(parse("study/" S "/t/\x1b]0;title\x07" "abcdef/rung/1", &k), SL_EPROTO);
    CHECK_ERR(parse("study/" S "/t/0123/m/00001", &k), SL_EPROTO);
    CHECK_ERR(parse("study/" S "/t/", &k), SL_EPROTO);
    CHECK_INT(k.kind, SL_STUDY_KEY_RECORD);
    CHECK_ERR(parse("study/" S "/t//ckd/", &k), SL_EPROTO);
    /* a NUL inside the key is a byte like any other */
    CHECK_ERR(sl_study_key_parse("study/01234567\0" "9abcdef/spec", 27, &k), SL_EPROTO);
    /* kinds no reader knows */
    CHECK_OK(parse("study/" S "/state", &k));
    CHECK_INT(k.kind, SL_STUDY_KEY_OTHER);
    CHECK_OK(parse("study/" S "/specx", &k));
    CHECK_INT(k.kind, SL_STUDY_KEY_OTHER);
    CHECK_OK(parse("study/" S "/t", &k));
    CHECK_INT(k.kind, SL_STUDY_KEY_OTHER);
    CHECK_OK(parse("study/" S "/t/" T "/ckd/0", &k));
    CHECK_INT(k.kind, SL_STUDY_KEY_OTHER);
    CHECK_STR(k.trial, T);
    CHECK_OK(parse("study/" S "/t/" T "/", &k));
    CHECK_INT(k.kind, SL_STUDY_KEY_OTHER);
    CHECK_OK(parse("study/" S "/t/" T "/stop/1", &k));
    CHECK_INT(k.kind, SL_STUDY_KEY_OTHER);
    CHECK_OK(parse("study/" S "/t/" T "/rung", &k));
    CHECK_INT(k.kind, SL_STUDY_KEY_OTHER);
    CHECK_OK(parse("study/" S "/t/" T "/rungs/1", &k));
    CHECK_INT(k.kind, SL_STUDY_KEY_OTHER);
    /* the rest is the reader's to judge: empty, or not a number */
    CHECK_OK(parse("study/" S "/t/" T "/rung/", &k));
    CHECK_INT(k.kind, SL_STUDY_KEY_RUNG);
    CHECK_INT(k.rest_len, 0);
    CHECK_OK(parse("study/" S "/t/" T "/m/x/y", &k));
    CHECK_INT(k.kind, SL_STUDY_KEY_METRIC);
    CHECK_INT(k.rest_len, 3);
    /* a bare log: a trial's log from before one key per run */
    CHECK_OK(parse("study/" S "/t/" T "/log", &k));
    CHECK_INT(k.kind, SL_STUDY_KEY_LOG);
    CHECK_INT(k.rest_len, 0);
    CHECK_INT(k.sub_len, 3);
}

int main(void) {
    sl_test_run("build", test_build);
    sl_test_run("round_trip", test_round_trip);
    sl_test_run("prefix", test_prefix);
    sl_test_run("slots", test_slots);
    sl_test_run("refused", test_refused);
    sl_test_run("parse", test_parse);
    return sl_test_finish();
}
