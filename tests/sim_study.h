/* What the study simulators share (tests/sim_study_test.c,
 * tests/sim_study_scale_test.c): the daemon's keys and values, a live
 * view fed from a peer's real store (src/sim/sim_store.h) as study_view.c
 * feeds the daemon's, and membership's answer. Static functions for the
 * tests that include it. */
#ifndef STARLING_TESTS_SIM_STUDY_H
#define STARLING_TESTS_SIM_STUDY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "starling/store.h"
#include "starling/study.h"
#include "study/live.h"
#include "study/study_keys.h"

/* Key `kind` of trial `trial` (NULL: the study's own) of study `study`
 * (n and peer as sl_study_key_build takes them), in a buffer kept until
 * the next call. */
static inline const char *sim_key(const char *study, sl_study_key_kind kind, const char *trial,
                                  uint64_t n, const char *peer) {
    static char key[SL_STUDY_KEY_MAX];
    if (sl_study_key_build(key, sizeof key, kind, study, trial, n, peer) != SL_OK)
        abort();
    return key;
}

/* A claim register's and a result's value as the daemon writes them. */
static inline size_t sim_claim_val(const sl_claim_t *c, char val[512]) {
    size_t len = 0;
    if (sl_claim_encode(c, val, 512, &len) != SL_OK)
        abort();
    return len;
}

static inline size_t sim_result_val(const sl_result_t *r, char val[1024]) {
    size_t len = 0;
    if (sl_result_encode(r, val, 1024, &len) != SL_OK)
        abort();
    return len;
}

/* Key `key` changed in `store` (a local write, or one a received DELTA
 * reported in sl_store_out_t.changed): the live view takes its value
 * now, as the store node's listener tells the daemon's. */
static inline void sim_told(live_t *lv, const sl_study_spec_t *spec, const sl_store_t *store,
                            const uint8_t *key, size_t key_len) {
    sl_store_entry_t e;
    bool live = sl_store_lookup(store, key, key_len, &e) == SL_OK && e.type == SL_CRDT_LWW;
    sl_study_live_set(lv, spec, key, key_len, live ? e.val : NULL, live ? e.val_len : 0, live);
}

/* What a received message changed in a peer's store, told to its live
 * view; a SNAPSHOT's RESET (all_changed) leaves it to be read whole. */
static inline void sim_told_out(live_t *lv, const sl_study_spec_t *spec, const sl_store_t *store,
                                const sl_store_out_t *out) {
    if (out->all_changed) {
        lv->stale = true;
        return;
    }
    for (size_t i = 0; i < out->changed_count; i++)
        sim_told(lv, spec, store, out->changed[i].key, out->changed[i].key_len);
}

typedef struct {
    live_t *lv;
    const sl_study_spec_t *spec;
} sim_scan_t;

static inline bool sim_scan_key(void *ctx, const uint8_t *key, size_t key_len,
                                const sl_store_entry_t *e) {
    const sim_scan_t *s = ctx;
    if (e->type == SL_CRDT_LWW)
        sl_study_live_set(s->lv, s->spec, key, key_len, e->val, e->val_len, true);
    return true;
}

/* The daemon's sl_study_live_refresh: a live view read whole from its
 * store when it is stale (after a restart), then what changed and the
 * open trials' states derived. */
static inline void sim_refresh(live_t *lv, sl_store_t *store, const char *study,
                               const sl_study_spec_t *spec, const sl_live_env_t *env,
                               uint64_t now_ms) {
    if (lv->stale) {
        sl_study_live_reset(lv);
        sim_scan_t s = {lv, spec};
        sl_store_scan(store, "", 0, sim_scan_key, &s);
    }
    sl_study_live_derive(lv, study, spec, env, now_ms);
}

/* Membership's answer for peer index q (-1: not a peer heard of). */
static inline sl_live_member sim_member(int q, bool alive, bool suspect) {
    return q < 0     ? SL_LIVE_UNKNOWN
           : !alive  ? SL_LIVE_GONE
           : suspect ? SL_LIVE_SUSPECT
                     : SL_LIVE_ALIVE;
}

#endif
