/* A study's live view, the pure core (src/study/live.c): keys in, a
 * trial's state out by the turn core's rule, from the claim, this peer's
 * name, membership's answer and whether this peer runs the trial; the
 * turn's view of the open trials; a view kept key by key against a full
 * read of the same keys. The daemon feeds it from its store and swim
 * (src/study/study_view.c), the simulators from their replicas
 * (sim_study_test, sim_study_scale_test). */
#include <math.h>
#include <stdlib.h>

#include "starling/study.h"
#include "study/live.h"
#include "study/study_keys.h"
#include "testlib.h"

#define NOW 100000
#define LEASE 3000

static sl_study_spec_t spec;
static char study[SL_TRIAL_ID_LEN + 1];
static sl_trial_t rec; /* the one trial's record (its id computed from its content) */
static sl_live_member member_b = SL_LIVE_ALIVE; /* membership's answer for "b" */
static bool runs_it; /* this peer ("a") runs a job of the trial */

static sl_live_member member(void *ctx, const char *name) {
    (void)ctx;
    return !strcmp(name, "b") ? member_b : SL_LIVE_UNKNOWN;
}

static bool runs(void *ctx, const char *s, const char *trial) {
    (void)ctx;
    return runs_it && !strcmp(s, study) && !strcmp(trial, rec.id);
}

static const sl_live_env_t env = {.self = "a", .member = member, .runs = runs};

static void setup(void) {
    const char *json =
        "{\"name\": \"live\", \"trainer\": {\"type\": \"command\", \"command\": \"t {x}\"},"
        " \"search_space\": {\"x\": {\"type\": \"real\", \"low\": 0.0, \"high\": 1.0}},"
        " \"searcher\": {\"type\": \"random\"},"
        " \"scheduler\": {\"type\": \"fifo\", \"epochs\": 4},"
        " \"objectives\": [{\"metric\": \"score\", \"goal\": \"max\"}],"
        " \"budget\": {\"trials\": 10}, \"lease_ms\": 3000}";
    char why[256], val[SL_STUDY_RECORD_MAX];
    size_t len;
    sl_err err = sl_study_spec_parse(json, strlen(json), &spec, why, sizeof why);
    CHECK_MSG(err == SL_OK, "spec: %s", why);
    if (err != SL_OK)
        exit(1);
    sl_study_spec_id(&spec, study);
    memset(&rec, 0, sizeof rec);
    rec.config.values[0].real = 0.25;
    CHECK_OK(sl_trial_record_encode(&spec, &rec, val, sizeof val, &len));
    CHECK_OK(sl_trial_record_decode(&spec, study, NULL, val, len, &rec, why, sizeof why));
}

/* Sets key `kind` (n, peer) of the trial to `val` (NULL: deletes it). */
static void set(live_t *lv, sl_study_key_kind kind, uint64_t n, const char *peer,
                const char *val) {
    char key[SL_STUDY_KEY_MAX];
    CHECK_OK(sl_study_key_build(key, sizeof key, kind, study, rec.id, n, peer));
    sl_study_live_set(lv, &spec, (const uint8_t *)key, strlen(key), (const uint8_t *)val,
                      val ? strlen(val) : 0, val != NULL);
}

static void set_record(live_t *lv) {
    char val[SL_STUDY_RECORD_MAX];
    size_t len;
    CHECK_OK(sl_trial_record_encode(&spec, &rec, val, sizeof val, &len));
    set(lv, SL_STUDY_KEY_RECORD, 0, NULL, val);
}

static void set_claim(live_t *lv, const char *owner, uint64_t epoch) {
    sl_claim_t c = {.epoch = epoch, .lease_expiry_ms = NOW + LEASE};
    snprintf(c.owner, sizeof c.owner, "%s", owner);
    char val[512];
    size_t len;
    CHECK_OK(sl_claim_encode(&c, val, sizeof val, &len));
    set(lv, SL_STUDY_KEY_CLAIM, 0, owner, val);
}

/* The trial's state after a derive at NOW. */
static sl_trial_state state(live_t *lv) {
    sl_study_live_derive(lv, study, &spec, &env, NOW);
    trial_row_t *r = sl_study_live_find(lv, rec.id);
    const sl_trial_t *t = r ? sl_study_live_trial(lv, r) : NULL;
    CHECK(t != NULL);
    return t ? t->state : SL_TRIAL_FAILED;
}

static void test_states(void) {
    live_t lv = {0};
    set_record(&lv);
    CHECK_INT(state(&lv), SL_TRIAL_PENDING);
    CHECK_INT((int)lv.open_count, 1);
    CHECK(lv.next_lapse_ms == UINT64_MAX);
    /* b's claim: running while membership holds b alive, suspect or not
       heard of; preempted once b is gone */
    set_claim(&lv, "b", 1);
    member_b = SL_LIVE_ALIVE;
    CHECK_INT(state(&lv), SL_TRIAL_RUNNING);
    CHECK(lv.next_lapse_ms == NOW + LEASE);
    member_b = SL_LIVE_SUSPECT;
    CHECK_INT(state(&lv), SL_TRIAL_RUNNING);
    member_b = SL_LIVE_UNKNOWN;
    CHECK_INT(state(&lv), SL_TRIAL_RUNNING);
    member_b = SL_LIVE_GONE;
    CHECK_INT(state(&lv), SL_TRIAL_PREEMPTED);
    /* this peer's claim (a higher epoch): running only while it runs a
       job of it (without one, its claim is from before a restart) */
    set_claim(&lv, "a", 2);
    runs_it = false;
    CHECK_INT(state(&lv), SL_TRIAL_PREEMPTED);
    runs_it = true;
    CHECK_INT(state(&lv), SL_TRIAL_RUNNING);
    /* a report: its epochs and objective; a result ends it */
    set(&lv, SL_STUDY_KEY_METRIC, 1, NULL, "{\"epoch\":1,\"score\":0.5}");
    CHECK_INT(state(&lv), SL_TRIAL_RUNNING);
    trial_row_t *r = sl_study_live_find(&lv, rec.id);
    CHECK_INT(sl_study_live_trial(&lv, r)->epochs_done, 1);
    CHECK(sl_study_live_trial(&lv, r)->objectives[0] == 0.5);
    sl_result_t res = {.state = SL_TRIAL_DONE, .epochs = 4, .claim_epoch = 2};
    snprintf(res.writer, sizeof res.writer, "a");
    char val[1024];
    size_t len;
    CHECK_OK(sl_result_encode(&res, val, sizeof val, &len));
    set(&lv, SL_STUDY_KEY_RESULT, 2, "a", val);
    CHECK_INT(state(&lv), SL_TRIAL_DONE);
    CHECK_INT((int)lv.open_count, 0);
    sl_study_live_fini(&lv);
    member_b = SL_LIVE_ALIVE;
    runs_it = false;
}

/* The turn's view: the open trial with its claim's join and what
 * membership says of its owner; a job's trial as the jobs phase reads it. */
static void test_turn_view(void) {
    live_t lv = {0};
    set_record(&lv);
    set_claim(&lv, "b", 1);
    set_claim(&lv, "c", 2); /* (c not heard of: its lease decides) */
    set(&lv, SL_STUDY_KEY_STOP, 0, NULL, "stopped by the leader");
    member_b = SL_LIVE_SUSPECT;
    sl_study_live_derive(&lv, study, &spec, &env, NOW);
    sl_turn_view_t v;
    CHECK_OK(sl_study_live_turn_view(&lv, study, &spec, &env, &v));
    CHECK_INT((int)v.open_count, 1);
    CHECK_INT((int)v.trial_count, 1);
    CHECK_STR(v.open[0].id, rec.id);
    CHECK_STR(v.open[0].claim.owner, "c"); /* the join: the higher epoch */
    CHECK(v.open[0].owner_alive && !v.open[0].owner_suspect && v.open[0].stop);
    set_claim(&lv, "b", 3);
    sl_study_live_derive(&lv, study, &spec, &env, NOW);
    CHECK_OK(sl_study_live_turn_view(&lv, study, &spec, &env, &v));
    CHECK(v.open[0].owner_alive && v.open[0].owner_suspect);
    sl_turn_job_t x = {.trial_id = rec.id};
    sl_study_live_turn_job(&lv, rec.id, &x);
    CHECK(x.found && x.has_claim && x.claim.epoch == 3 && x.stop && !x.has_result);
    sl_turn_job_t none = {.trial_id = "0123456789abcdef"};
    sl_study_live_turn_job(&lv, none.trial_id, &none);
    CHECK(!none.found && !none.has_claim);
    sl_study_live_fini(&lv);
    member_b = SL_LIVE_ALIVE;
}

/* A view kept key by key shows what a full read of the same keys does;
 * a change it was never told of is found (the daemon's debug check). */
static void test_same_as_full_read(void) {
    live_t kept = {0}, full = {0};
    set_record(&kept);
    set_claim(&kept, "b", 1);
    set(&kept, SL_STUDY_KEY_METRIC, 1, NULL, "{\"epoch\":1,\"score\":0.5}");
    set(&kept, SL_STUDY_KEY_METRIC, 2, NULL, "{\"epoch\":2,\"score\":0.6}");
    set(&kept, SL_STUDY_KEY_METRIC, 2, NULL, NULL); /* (deleted) */
    set_claim(&kept, "b", 2);
    /* the full read: the keys present, in another order */
    sl_study_live_reset(&full);
    set_claim(&full, "b", 2);
    set(&full, SL_STUDY_KEY_METRIC, 1, NULL, "{\"epoch\":1,\"score\":0.5}");
    set_record(&full);
    sl_study_live_derive(&kept, study, &spec, &env, NOW);
    sl_study_live_derive(&full, study, &spec, &env, NOW);
    char why[256] = "";
    CHECK_MSG(sl_study_live_same(&kept, &full, study, why, sizeof why), "%s", why);
    CHECK_INT((int)full.rescans, 1);
    /* a report the kept view was never told of */
    set(&full, SL_STUDY_KEY_METRIC, 2, NULL, "{\"epoch\":2,\"score\":0.6}");
    sl_study_live_derive(&full, study, &spec, &env, NOW);
    CHECK(!sl_study_live_same(&kept, &full, study, why, sizeof why));
    CHECK(strstr(why, "differs from the store") != NULL);
    sl_study_live_fini(&kept);
    sl_study_live_fini(&full);
}

int main(void) {
    setup();
    sl_test_run("states", test_states);
    sl_test_run("turn_view", test_turn_view);
    sl_test_run("same_as_full_read", test_same_as_full_read);
    return sl_test_finish();
}
