/* A study's live view, the pure core: what the replica holds of each
 * trial, kept up to date key by key, and the trials' states derived from
 * it (docs/studies.md, "The live view"; the inputs are study/live.h's).
 *
 * Each study key that changes updates the part of its trial it stands
 * for: the record, a rung, a peer's claim register, an epoch's report, a
 * failure, a result, the stop flag, the checkpoint manifest. A derive
 * then works out only the trials whose keys changed (the join of their
 * claims, their merged result, their rung and metrics) and the state of
 * the open ones (no result yet: a lease lapses and an owner dies without
 * any key changing). So a turn costs what changed and what is open, not
 * the size of the study: the view used to be rebuilt from a scan of every
 * key on every turn, O(keys) a turn and O(trials^2) a study.
 *
 * It reads no store, node or membership: the daemon feeds it
 * (src/study/study_view.c: the store node's listener, a full read of the
 * store after a RESET, swim's members), and the simulator feeds it each
 * simulated peer's replica (tests/sim_study_test.c), so both run this
 * code. */
#include "study/live.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/hash.h"
#include "study/study_keys.h"

#define KEY_SEED 0x6b6579ull /* key_hash of a part's key */

/* ---- rows and the index ---- */

static size_t index_slot(const live_t *lv, const char *tid) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the id's bytes */
    for (int i = 0; i < SL_TRIAL_ID_LEN; i++)
        h = (h ^ (uint8_t)tid[i]) * 1099511628211ull;
    h = sl_mix64(h);
    size_t mask = lv->index_cap - 1, at = (size_t)h & mask;
    while (lv->index[at] && memcmp(lv->rows[lv->index[at] - 1].id, tid, SL_TRIAL_ID_LEN))
        at = (at + 1) & mask;
    return at;
}

/* Keeps the index at most half full (rebuilt from the rows when it grows). */
static bool index_reserve(live_t *lv, size_t rows) {
    if (lv->index && lv->index_cap >= 2 * rows + 2)
        return true;
    size_t cap = 64;
    while (cap < 2 * rows + 2)
        cap *= 2;
    uint32_t *n = sl_calloc(cap, sizeof *n);
    if (!n)
        return false;
    sl_free(lv->index);
    lv->index = n;
    lv->index_cap = cap;
    for (size_t i = 0; i < lv->count; i++)
        lv->index[index_slot(lv, lv->rows[i].id)] = (uint32_t)i + 1;
    return true;
}

trial_row_t *sl_study_live_find(const live_t *lv, const char *trial_id) {
    if (!lv->index_cap || strlen(trial_id) != SL_TRIAL_ID_LEN)
        return NULL;
    size_t slot = index_slot(lv, trial_id);
    return lv->index[slot] ? &lv->rows[lv->index[slot] - 1] : NULL;
}

/* Appends `x` to a uint32 list. */
static bool list_push(uint32_t **list, size_t *count, size_t *cap, uint32_t x) {
    if (*count == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        uint32_t *n = sl_realloc(*list, nc * sizeof *n);
        if (!n)
            return false;
        *list = n;
        *cap = nc;
    }
    (*list)[(*count)++] = x;
    return true;
}

static void mark_dirty(live_t *lv, trial_row_t *r) {
    if (r->dirty)
        return;
    if (list_push(&lv->dirty, &lv->dirty_count, &lv->dirty_cap, (uint32_t)(r - lv->rows)))
        r->dirty = true;
    else
        lv->stale = true; /* out of memory: read it whole later */
}

/* The row of trial `tid` (tl bytes), added if new; NULL when the id is
 * malformed or out of memory (the view is then marked stale). */
static trial_row_t *row_get(live_t *lv, const sl_study_spec_t *spec, const char *tid, size_t tl) {
    if (!sl_study_id_valid(tid, tl))
        return NULL; /* (and never a key or a path) */
    if (!index_reserve(lv, lv->count + 1)) {
        lv->stale = true;
        return NULL;
    }
    size_t slot = index_slot(lv, tid);
    if (lv->index[slot])
        return &lv->rows[lv->index[slot] - 1];
    if (lv->count == lv->cap) {
        size_t nc = lv->cap ? lv->cap * 2 : 64;
        trial_row_t *n = sl_realloc(lv->rows, nc * sizeof *n);
        if (!n) {
            lv->stale = true;
            return NULL;
        }
        lv->rows = n;
        lv->cap = nc;
    }
    int me = spec->max_epochs + 1;
    trial_row_t *r = &lv->rows[lv->count];
    memset(r, 0, sizeof *r);
    r->curve = sl_malloc((size_t)me * sizeof *r->curve);
    /* reports (2.5 KB an epoch) only once the trial has one: most trials
       of a study are pending or short when they are first seen */
    r->has_report = sl_calloc((size_t)me, sizeof *r->has_report);
    if (!r->curve || !r->has_report) {
        sl_free(r->curve);
        sl_free(r->has_report);
        lv->stale = true;
        return NULL;
    }
    for (int e = 0; e < me; e++)
        r->curve[e] = NAN;
    memcpy(r->id, tid, SL_TRIAL_ID_LEN);
    r->id[SL_TRIAL_ID_LEN] = 0;
    lv->count++;
    lv->index[slot] = (uint32_t)lv->count;
    return r;
}

static void row_fini(trial_row_t *r) {
    sl_free(r->curve);
    sl_free(r->reports);
    sl_free(r->has_report);
    sl_free(r->claims);
    sl_free(r->results);
    sl_free(r->fails);
}

void sl_study_live_fini(live_t *lv) {
    for (size_t i = 0; i < lv->count; i++)
        row_fini(&lv->rows[i]);
    sl_free(lv->rows);
    sl_free(lv->index);
    sl_free(lv->trials);
    sl_free(lv->trial_row);
    sl_free(lv->dirty);
    sl_free(lv->open);
    sl_free(lv->turn_open);
    memset(lv, 0, sizeof *lv);
}

void sl_study_live_reset(live_t *lv) {
    uint64_t applied = lv->applied, rescans = lv->rescans + 1;
    sl_study_live_fini(lv);
    lv->applied = applied;
    lv->rescans = rescans;
}

/* ---- the record and the open list ---- */

/* Sets the trial's record: a new one joins `trials`; one seen before
 * keeps what was derived from the other keys (its state, metrics). */
static bool set_record(live_t *lv, trial_row_t *r, const sl_trial_t *t) {
    r->rec_rung = t->rung;
    if (r->tix) {
        sl_trial_t *x = &lv->trials[r->tix - 1];
        x->ordinal = t->ordinal;
        x->bracket = t->bracket;
        x->config = t->config;
        return true;
    }
    if (lv->trial_count == lv->trial_cap) {
        size_t nc = lv->trial_cap ? 2 * lv->trial_cap : 64;
        sl_trial_t *nt = sl_realloc(lv->trials, nc * sizeof *nt);
        if (!nt)
            return false;
        lv->trials = nt;
        uint32_t *nr = sl_realloc(lv->trial_row, nc * sizeof *nr);
        if (!nr)
            return false;
        lv->trial_row = nr;
        lv->trial_cap = nc;
    }
    lv->trial_row[lv->trial_count] = (uint32_t)(r - lv->rows);
    r->tix = (uint32_t)++lv->trial_count;
    sl_trial_t *x = &lv->trials[r->tix - 1];
    *x = *t;
    memcpy(x->id, r->id, sizeof x->id);
    x->curve = r->curve;
    x->curve_len = 0; /* (derived) */
    return true;
}

static void open_remove(live_t *lv, trial_row_t *r) {
    if (!r->open_at)
        return;
    size_t at = r->open_at - 1, last = lv->open_count - 1;
    if (at != last) {
        lv->open[at] = lv->open[last];
        lv->rows[lv->open[at]].open_at = (uint32_t)at + 1;
    }
    lv->open_count--;
    r->open_at = 0;
}

static void drop_record(live_t *lv, trial_row_t *r) {
    if (!r->tix)
        return;
    open_remove(lv, r);
    size_t at = r->tix - 1, last = lv->trial_count - 1;
    if (at != last) {
        lv->trials[at] = lv->trials[last];
        lv->trial_row[at] = lv->trial_row[last];
        lv->rows[lv->trial_row[at]].tix = (uint32_t)at + 1;
    }
    lv->trial_count--;
    r->tix = 0;
}

/* ---- parts ---- */

/* Sets (present) or removes the part under `h` in a list of parts of
 * `size` bytes whose first field is the key hash. */
static bool part_set(void **list, uint32_t *count, size_t size, uint64_t h, const void *part,
                     bool present) {
    uint8_t *l = *list;
    for (uint32_t i = 0; i < *count; i++) {
        uint64_t k;
        memcpy(&k, l + i * size, sizeof k);
        if (k != h)
            continue;
        if (present)
            memcpy(l + i * size, part, size);
        else {
            memmove(l + i * size, l + (i + 1) * size, (*count - i - 1) * size);
            (*count)--;
        }
        return true;
    }
    if (!present)
        return true;
    uint8_t *n = sl_realloc(l, (*count + 1) * size);
    if (!n)
        return false;
    memcpy(n + *count * size, part, size);
    *list = n;
    (*count)++;
    return true;
}

static void set_flag(bool *flag, bool present) { *flag = present; }

void sl_study_live_set(live_t *lv, const sl_study_spec_t *spec, const uint8_t *key,
                       size_t key_len, const uint8_t *val, size_t val_len, bool present) {
    sl_study_key_t k;
    if (sl_study_key_parse(key, key_len, &k) != SL_OK)
        return; /* (a trial id that is not 16 hex digits adds no row) */
    const char *v = (const char *)val;
    switch (k.kind) {
    case SL_STUDY_KEY_CANCEL: set_flag(&lv->cancelled, present); return;
    case SL_STUDY_KEY_FINISHED: set_flag(&lv->finished, present); return;
    case SL_STUDY_KEY_START: {
        char b[32];
        snprintf(b, sizeof b, "%.*s", present ? (int)(val_len < 31 ? val_len : 31) : 0, v);
        lv->start_ms = strtoull(b, NULL, 10);
        return;
    }
    case SL_STUDY_KEY_RECORD:
    case SL_STUDY_KEY_RUNG:
    case SL_STUDY_KEY_CLAIM:
    case SL_STUDY_KEY_METRIC:
    case SL_STUDY_KEY_FAIL:
    case SL_STUDY_KEY_RESULT:
    case SL_STUDY_KEY_STOP:
    case SL_STUDY_KEY_CKPT: break;
    default: return; /* spec (written once), logs and anything else: not part of the view */
    }
    trial_row_t *r = row_get(lv, spec, k.trial, strlen(k.trial));
    if (!r)
        return;
    lv->applied++;
    /* the number after the kind's name (bounded, NUL-terminated) */
    char num[24] = "";
    if (k.rest_len < sizeof num) {
        memcpy(num, k.rest, k.rest_len);
        num[k.rest_len] = 0;
    }
    uint64_t h = sl_hash64(k.sub, k.sub_len, KEY_SEED);
    char why[128];
    bool ok = true;
    switch (k.kind) {
    case SL_STUDY_KEY_RECORD: {
        /* records are written once: the same bytes again (this peer's own
           write, told once durable) need no decode, the costliest parse */
        uint64_t vh = present ? sl_hash64(v, val_len, KEY_SEED + 1) : 0;
        if (present && r->tix && r->rec_hash == vh)
            return;
        r->rec_hash = vh;
        sl_trial_t t;
        if (present &&
            sl_trial_record_decode(spec, k.study, k.trial, v, val_len, &t, why, sizeof why) ==
                SL_OK)
            ok = set_record(lv, r, &t);
        else
            drop_record(lv, r);
        break;
    }
    case SL_STUDY_KEY_RUNG: {
        int rung = atoi(num);
        if (rung >= 0 && rung < SL_STUDY_MAX_RUNGS) {
            if (present)
                r->rung_keys |= 1u << rung;
            else
                r->rung_keys &= ~(1u << rung);
        }
        break;
    }
    case SL_STUDY_KEY_CLAIM: {
        claim_part_t p = {.key_hash = h};
        bool has = present && sl_claim_decode(v, val_len, &p.claim) == SL_OK;
        ok = part_set((void **)&r->claims, &r->claim_count, sizeof p, h, &p, has);
        break;
    }
    case SL_STUDY_KEY_METRIC: {
        int ep = atoi(num);
        if (ep >= 1 && ep <= spec->max_epochs) {
            sl_report_t rep;
            if (!r->reports)
                r->reports = sl_calloc((size_t)spec->max_epochs + 1, sizeof *r->reports);
            bool has = present && r->reports &&
                       sl_report_parse(v, val_len, &rep, why, sizeof why) == SL_OK;
            ok = !present || r->reports;
            if (has) {
                r->reports[ep - 1] = rep;
                r->curve[ep - 1] = sl_report_get(&rep, spec->objectives[0].metric);
            } else {
                r->curve[ep - 1] = NAN;
            }
            r->has_report[ep - 1] = has;
        }
        break;
    }
    case SL_STUDY_KEY_FAIL:
        ok = part_set((void **)&r->fails, &r->fail_count, sizeof h, h, &h, present);
        break;
    case SL_STUDY_KEY_RESULT: {
        result_part_t p = {.key_hash = h};
        bool has = present && sl_result_decode(v, val_len, &p.result) == SL_OK;
        if (has)
            memcpy(p.result.trial_id, r->id, sizeof p.result.trial_id);
        ok = part_set((void **)&r->results, &r->result_count, sizeof p, h, &p, has);
        break;
    }
    case SL_STUDY_KEY_STOP: r->stop = present; break;
    case SL_STUDY_KEY_CKPT: {
        cJSON *j = present ? cJSON_ParseWithLength(v, val_len) : NULL;
        r->ck_epoch = sl_study_manifest_epoch(j);
        cJSON_Delete(j);
        break;
    }
    default: break;
    }
    if (!ok)
        lv->stale = true; /* out of memory: read it whole later */
    mark_dirty(lv, r);
}

/* ---- deriving ---- */

bool sl_study_live_claim(const trial_row_t *r, sl_claim_t *out) {
    memset(out, 0, sizeof *out);
    for (uint32_t i = 0; i < r->claim_count; i++) {
        if (!i)
            *out = r->claims[0].claim;
        else
            sl_claim_merge(out, &r->claims[i].claim, out);
    }
    return r->claim_count > 0;
}

int sl_study_live_rung(const trial_row_t *r) {
    for (int k = SL_STUDY_MAX_RUNGS - 1; k > r->rec_rung; k--)
        if (r->rung_keys & (1u << k))
            return k;
    return r->rec_rung;
}

/* The join of the claims, the merged result, the rung, the metrics. */
static void derive_parts(live_t *lv, const sl_study_spec_t *spec, trial_row_t *r) {
    r->has_claim = sl_study_live_claim(r, &r->claim);
    r->has_result = r->result_count > 0;
    memset(&r->result, 0, sizeof r->result);
    for (uint32_t i = 0; i < r->result_count; i++) {
        if (!i)
            r->result = r->results[0].result;
        else
            sl_result_merge(&r->result, &r->results[i].result, &r->result);
    }
    sl_trial_t *t = sl_study_live_trial(lv, r);
    if (!t)
        return;
    t->rung = sl_study_live_rung(r);
    int last = 0;
    for (int o = 0; o < SL_STUDY_MAX_OBJECTIVES; o++)
        t->objectives[o] = NAN;
    for (int e = 1; e <= spec->max_epochs; e++)
        if (r->has_report[e - 1]) {
            last = e;
            for (int o = 0; o < spec->objective_count; o++) {
                double x = sl_report_get(&r->reports[e - 1], spec->objectives[o].metric);
                if (!isnan(x))
                    t->objectives[o] = x;
            }
        }
    t->epochs_done = last;
    t->curve = r->curve;
    t->curve_len = spec->max_epochs;
}

/* ---- membership ---- */

sl_live_member sl_study_live_owner(const sl_live_env_t *env, const char *owner) {
    if (!owner[0])
        return SL_LIVE_GONE; /* (no owner) */
    if (!strcmp(owner, env->self))
        return SL_LIVE_ALIVE;
    return env->member(env->ctx, owner);
}

/* The trial's state from its parts, the clock and membership: the turn
 * core's rule (sl_turn_trial_state), which the simulator runs too. */
static void derive_state(const sl_live_env_t *env, const char *study,
                         const sl_study_spec_t *spec, trial_row_t *r, sl_trial_t *t,
                         uint64_t now) {
    /* (membership and the jobs are asked only where the answer counts) */
    bool held = r->has_claim && !r->claim.released && r->claim.lease_expiry_ms > now;
    bool alive = held && sl_study_live_owner(env, r->claim.owner) != SL_LIVE_GONE;
    bool mine = alive && !strcmp(r->claim.owner, env->self) &&
                env->runs(env->ctx, study, r->id);
    t->state = sl_turn_trial_state(spec, t, &r->claim, r->has_claim,
                                   r->has_result ? &r->result : NULL, alive, mine, env->self,
                                   now);
}

void sl_study_live_derive(live_t *lv, const char *study, const sl_study_spec_t *spec,
                          const sl_live_env_t *env, uint64_t now_ms) {
    for (size_t i = 0; i < lv->dirty_count; i++) {
        trial_row_t *r = &lv->rows[lv->dirty[i]];
        r->dirty = false;
        derive_parts(lv, spec, r);
        bool open = r->tix && !r->has_result;
        if (open && !r->open_at) {
            if (list_push(&lv->open, &lv->open_count, &lv->open_cap, lv->dirty[i]))
                r->open_at = (uint32_t)lv->open_count;
            else
                lv->stale = true;
        } else if (!open) {
            open_remove(lv, r);
        }
        sl_trial_t *t = sl_study_live_trial(lv, r);
        if (t && r->has_result)
            t->state = r->result.state; /* final: not derived again */
    }
    lv->dirty_count = 0;
    lv->next_lapse_ms = UINT64_MAX;
    for (size_t i = 0; i < lv->open_count; i++) {
        trial_row_t *r = &lv->rows[lv->open[i]];
        derive_state(env, study, spec, r, sl_study_live_trial(lv, r), now_ms);
        /* its state and whether it may be claimed change then */
        uint64_t lapse = r->claim.lease_expiry_ms;
        if (r->has_claim && !r->claim.released && lapse > now_ms && lapse < lv->next_lapse_ms)
            lv->next_lapse_ms = lapse;
    }
}

/* ---- what the turn reads ---- */

sl_err sl_study_live_turn_view(live_t *lv, const char *study, const sl_study_spec_t *spec,
                               const sl_live_env_t *env, sl_turn_view_t *v) {
    if (lv->open_count > lv->turn_open_cap) {
        size_t cap = lv->turn_open_cap ? lv->turn_open_cap : 64;
        while (cap < lv->open_count)
            cap *= 2;
        sl_turn_open_t *n = sl_realloc(lv->turn_open, cap * sizeof *n);
        if (!n)
            return SL_ENOMEM;
        lv->turn_open = n;
        lv->turn_open_cap = cap;
    }
    for (size_t o = 0; o < lv->open_count; o++) {
        trial_row_t *r = &lv->rows[lv->open[o]];
        /* (one question of membership a trial: the daemon's is a lookup) */
        sl_live_member m = r->has_claim ? sl_study_live_owner(env, r->claim.owner) : SL_LIVE_GONE;
        lv->turn_open[o] = (sl_turn_open_t){
            .id = r->id,
            .t = &lv->trials[r->tix - 1],
            .claim = r->claim,
            .has_claim = r->has_claim,
            .has_result = r->has_result,
            .stop = r->stop,
            .owner_alive = m != SL_LIVE_GONE, /* (not heard of: its lease decides) */
            .owner_suspect = m == SL_LIVE_SUSPECT,
            .mine = env->runs(env->ctx, study, r->id),
            .claimable_ms = &r->claimable_ms};
    }
    *v = (sl_turn_view_t){.study_id = study, .spec = spec, .trials = lv->trials,
                          .trial_count = lv->trial_count, .open = lv->turn_open,
                          .open_count = lv->open_count, .cancelled = lv->cancelled,
                          .finished = lv->finished, .start_ms = lv->start_ms,
                          .next_lapse_ms = lv->next_lapse_ms};
    return SL_OK;
}

void sl_study_live_turn_job(live_t *lv, const char *trial_id, sl_turn_job_t *x) {
    trial_row_t *r = sl_study_live_find(lv, trial_id);
    x->found = r != NULL;
    memset(&x->claim, 0, sizeof x->claim);
    x->has_claim = r && sl_study_live_claim(r, &x->claim);
    x->has_result = r && r->has_result;
    x->stop = r && r->stop;
}

/* ---- the check ---- */

static bool same_double(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

bool sl_study_live_same(const live_t *a, const live_t *b, const char *study, char *why,
                        size_t why_len) {
    if (a->trial_count != b->trial_count || a->cancelled != b->cancelled ||
        a->finished != b->finished || a->start_ms != b->start_ms) {
        snprintf(why, why_len, "study %s: %zu trials, cancelled %d, finished %d live; %zu, %d, %d "
                 "in the store", study, a->trial_count, a->cancelled, a->finished, b->trial_count,
                 b->cancelled, b->finished);
        return false;
    }
    for (size_t i = 0; i < b->count; i++) {
        const trial_row_t *y = &b->rows[i];
        const trial_row_t *x = sl_study_live_find(a, y->id);
        const sl_trial_t *ty = sl_study_live_trial(b, y), *tx = x ? sl_study_live_trial(a, x) : NULL;
        if (!ty)
            continue;
        const char *what = NULL;
        if (!tx)
            what = "missing";
        else if (tx->state != ty->state || tx->rung != ty->rung ||
                 tx->epochs_done != ty->epochs_done || tx->ordinal != ty->ordinal)
            what = "state, rung, epochs or ordinal";
        else if (x->has_claim != y->has_claim || memcmp(&x->claim, &y->claim, sizeof x->claim))
            what = "claim";
        else if (x->has_result != y->has_result ||
                 (x->has_result && memcmp(&x->result, &y->result, sizeof x->result)))
            what = "result";
        else if (x->fail_count != y->fail_count || x->stop != y->stop ||
                 x->ck_epoch != y->ck_epoch)
            what = "failures, stop or checkpoint";
        else if ((x->open_at != 0) != (ty->state != SL_TRIAL_DONE && ty->state != SL_TRIAL_FAILED &&
                                       !y->has_result))
            what = "open list";
        for (int o = 0; !what && o < SL_STUDY_MAX_OBJECTIVES; o++)
            if (!same_double(tx->objectives[o], ty->objectives[o]))
                what = "objectives";
        if (what) {
            snprintf(why, why_len, "study %s trial %s: %s differs from the store", study, y->id,
                     what);
            return false;
        }
    }
    return true;
}

/* A checkpoint manifest's epoch (the manifests are study_ckpt.c's). */
int sl_study_manifest_epoch(const cJSON *manifest) {
    const cJSON *ep = cJSON_GetObjectItem(manifest, "epoch");
    if (!cJSON_IsNumber(ep) || !(ep->valuedouble >= 1 && ep->valuedouble <= SL_STUDY_MAX_EPOCHS) ||
        ep->valuedouble != floor(ep->valuedouble))
        return 0;
    return (int)ep->valuedouble;
}
