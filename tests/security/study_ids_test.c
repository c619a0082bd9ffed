/* Issue 12, item 12 (studies): an id read from the store names a path or
 * a key only when it is 16 lower-case hex digits (sl_study_id_valid).
 *
 *   valid_ids   the check itself: a spec's own id passes; "../../../x",
 *               upper case, 15 or 17 digits, a NUL, NULL do not
 *   live_view   a trial key whose id is 16 bytes but not hex (dots, an
 *               ESC) adds no row to a study's live view; a hex one does
 *               (a trial id ends at the key's next '/')
 *
 * Built against the code before the fix, it does not compile (no
 * sl_study_id_valid): the cluster test study_checks_test.sh shows that
 * code running a study outside its data directory. */
#include <string.h>

#include "starling/study.h"
#include "study/study_node_internal.h"
#include "testlib.h"

static const char *spec_json =
    "{\"name\": \"ids\", \"seed\": 3, \"dataset\": {\"name\": \"fashion-mnist\", \"val_split\": 0.2},"
    " \"trainer\": {\"type\": \"builtin\", \"optimizer\": \"adam\", \"batch\": 64, \"model\": \"mlp:32\"},"
    " \"search_space\": {\"lr\": {\"type\": \"real\", \"low\": 0.0005, \"high\": 0.01, \"log\": true}},"
    " \"scheduler\": {\"type\": \"fifo\", \"max_epochs\": 2},"
    " \"objectives\": [{\"metric\": \"val_acc\", \"goal\": \"max\"}], \"budget\": {\"trials\": 4}}";

static void test_valid_ids(void) {
    static sl_study_spec_t spec;
    char why[256], id[SL_TRIAL_ID_LEN + 1];
    CHECK_OK(sl_study_spec_parse(spec_json, strlen(spec_json), &spec, why, sizeof why));
    sl_study_spec_id(&spec, id);
    CHECK(sl_study_id_valid(id, strlen(id)));
    CHECK(sl_study_id_valid("0123456789abcdef", 16));
    CHECK(!sl_study_id_valid("../../../escaped", 16));
    CHECK(!sl_study_id_valid("0123456789ABCDEF", 16));
    CHECK(!sl_study_id_valid("0123456789abcde", 15));
    CHECK(!sl_study_id_valid("0123456789abcdef0", 17));
    CHECK(!sl_study_id_valid("01234567\0" "9abcdef", 16));
    CHECK(!sl_study_id_valid(NULL, 16));
}

static void apply(cached_t *c, const char *key, const char *val) {
    sl_study_live_apply(NULL, c, (const uint8_t *)key, strlen(key), (const uint8_t *)val,
                        strlen(val), true);
}

static void test_live_view(void) {
    static cached_t c;
    memset(&c, 0, sizeof c);
    char why[256];
    CHECK_OK(sl_study_spec_parse(spec_json, strlen(spec_json), &c.spec, why, sizeof why));
    sl_study_spec_id(&c.spec, c.id);
    char key[128];
    snprintf(key, sizeof key, "study/%s/t/................/rung/1", c.id);
    apply(&c, key, "1");
    snprintf(key, sizeof key, "study/%s/t/\x1b]0;title\x07" "abcdef/rung/1", c.id);
    apply(&c, key, "1");
    CHECK_INT((int)c.live.count, 0);
    snprintf(key, sizeof key, "study/%s/t/0123456789abcdef/rung/1", c.id);
    apply(&c, key, "1");
    CHECK_INT((int)c.live.count, 1);
    sl_study_live_fini(&c.live);
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR);
    sl_test_run("valid_ids", test_valid_ids);
    sl_test_run("live_view", test_live_view);
    return sl_test_finish();
}
