/* The daemon's side of a study's live view (the pure core is
 * src/study/live.c; docs/studies.md, "The live view"): what it is fed and
 * what it asks, from the node.
 *
 * The store node tells the study runtime of every key that changes (a
 * local write, an applied DELTA; sl_store_node_listen) and the view takes
 * each at once (sl_study_live_apply). The whole study is read
 * (sl_store_scan) only when its spec is first cached and after a RESET
 * snapshot, which the store does not report key by key. The members the
 * derive asks of are swim's, this peer's jobs the node's. Debug builds
 * compare the live view with a fresh read of the store on every turn
 * (sl_study_live_check). */
#include <stdio.h>
#include <string.h>

#include "starling/study.h"
#include "study/live.h"
#include "study/study_keys.h"
#include "study/study_node_internal.h"

void sl_study_live_apply(sl_study_node_t *sn, cached_t *c, const uint8_t *key, size_t key_len,
                         const uint8_t *val, size_t val_len, bool present) {
    (void)sn;
    sl_study_live_set(&c->live, &c->spec, key, key_len, val, val_len, present);
}

/* ---- what the view asks of the node ---- */

static sl_live_member member_of(void *ctx, const char *name) {
    sl_study_node_t *sn = ctx;
    sl_swim_member_t m;
    sl_bytes_t b = {.ptr = (const uint8_t *)name, .len = strlen(name)};
    if (sl_swim_member_find(sl_node_swim(sn->node), b, &m) != SL_OK)
        return SL_LIVE_UNKNOWN;
    return m.state == SL_STATE_ALIVE     ? SL_LIVE_ALIVE
           : m.state == SL_STATE_SUSPECT ? SL_LIVE_SUSPECT
                                         : SL_LIVE_GONE;
}

static bool runs(void *ctx, const char *study, const char *trial) {
    return sl_study_node_job(ctx, study, trial) != NULL;
}

sl_live_env_t sl_study_live_env(sl_study_node_t *sn) {
    return (sl_live_env_t){.self = sl_node_name(sn->node), .member = member_of, .runs = runs,
                           .ctx = sn};
}

job_t *sl_study_node_job(sl_study_node_t *sn, const char *study, const char *trial) {
    for (int i = 0; i < MAX_JOBS; i++)
        if (sn->jobs[i].study[0] && !strcmp(sn->jobs[i].study, study) &&
            !strcmp(sn->jobs[i].trial, trial))
            return &sn->jobs[i];
    return NULL;
}

/* ---- the full read, the refresh and the check ---- */

static bool scan_key(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e) {
    cached_t *c = ctx;
    if (e->type == SL_CRDT_LWW)
        sl_study_live_set(&c->live, &c->spec, key, key_len, e->val, e->val_len, true);
    return true;
}

/* Reads every key of study `c` into `lv` (emptied first). */
static void rescan(sl_study_node_t *sn, cached_t *c) {
    sl_study_live_reset(&c->live);
    char pre[SL_STUDY_KEY_MAX];
    if (sl_study_key_prefix(pre, sizeof pre, c->id, NULL) == SL_OK)
        sl_store_scan(sl_store_node_store(sn->store), pre, strlen(pre), scan_key, c);
}

void sl_study_live_refresh(sl_study_node_t *sn, cached_t *c, uint64_t now_ms) {
    if (c->live.stale) {
        c->live.stale = false;
        rescan(sn, c);
    }
    sl_live_env_t env = sl_study_live_env(sn);
    sl_study_live_derive(&c->live, c->id, &c->spec, &env, now_ms);
}

bool sl_study_live_check(sl_study_node_t *sn, cached_t *c, uint64_t now_ms, char *why,
                         size_t why_len) {
    cached_t *fresh = sl_calloc(1, sizeof *fresh);
    if (!fresh)
        return true; /* nothing to compare with */
    memcpy(fresh->id, c->id, sizeof fresh->id);
    fresh->spec = c->spec;
    rescan(sn, fresh);
    sl_study_live_refresh(sn, fresh, now_ms);
    sl_study_live_refresh(sn, c, now_ms);
    bool ok = sl_study_live_same(&c->live, &fresh->live, c->id, why, why_len);
    sl_study_live_fini(&fresh->live);
    sl_free(fresh);
    return ok;
}
