/* Trial claims and leases, as a pure state machine over one register per
 * trial: (owner, claim epoch, lease expiry, released).
 *
 *   take     allowed when nobody holds it, the owner released it, the
 *            owner is dead in this peer's view, or the lease lapsed; the
 *            taker writes epoch + 1 and a fresh lease
 *   renew    only by the owner, at the epoch it took, while the register
 *            still says so; otherwise the worker must stop
 *   stop     a worker stops as soon as it sees a higher epoch, or its
 *            epoch won by another peer (two takers in a partition)
 *   merge    the register's join: higher epoch, then smaller owner id,
 *            then released, then later expiry. Commutative, associative,
 *            idempotent: every replica settles on one owner per epoch.
 *
 * Results are records keyed by trial; sl_result_merge keeps one of two
 * whatever the order, so a trial finished twice keeps one result. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "starling/study.h"

const char *sl_claim_status_name(sl_claim_status s) {
    switch (s) {
    case SL_CLAIM_FREE: return "free";
    case SL_CLAIM_RELEASED: return "released";
    case SL_CLAIM_OWNER_DEAD: return "owner dead";
    case SL_CLAIM_LAPSED: return "lease lapsed";
    case SL_CLAIM_HELD: return "held";
    case SL_CLAIM_MINE: return "mine";
    }
    return "?";
}

sl_claim_status sl_claim_status_of(const sl_claim_t *cur, const char *self, uint64_t now_ms,
                                   bool owner_alive) {
    if (cur->owner[0] == '\0')
        return SL_CLAIM_FREE;
    if (cur->released)
        return SL_CLAIM_RELEASED;
    if (strcmp(cur->owner, self) == 0)
        return now_ms < cur->lease_expiry_ms ? SL_CLAIM_MINE : SL_CLAIM_LAPSED;
    if (!owner_alive)
        return SL_CLAIM_OWNER_DEAD;
    if (now_ms >= cur->lease_expiry_ms)
        return SL_CLAIM_LAPSED;
    return SL_CLAIM_HELD;
}

bool sl_claim_may_take(sl_claim_status s) {
    return s == SL_CLAIM_FREE || s == SL_CLAIM_RELEASED || s == SL_CLAIM_OWNER_DEAD ||
           s == SL_CLAIM_LAPSED;
}

sl_err sl_claim_take(const sl_claim_t *cur, const char *self, uint64_t now_ms, bool owner_alive,
                     uint32_t lease_ms, sl_claim_t *next) {
    if (strlen(self) == 0 || strlen(self) > SL_PEER_ID_MAX)
        return SL_EINVAL;
    if (!sl_claim_may_take(sl_claim_status_of(cur, self, now_ms, owner_alive)))
        return SL_EBUSY;
    sl_claim_t n;
    memset(&n, 0, sizeof n);
    snprintf(n.owner, sizeof n.owner, "%s", self);
    n.epoch = cur->epoch + 1;
    n.lease_expiry_ms = now_ms + lease_ms;
    n.released = false;
    *next = n;
    return SL_OK;
}

/* The register still says `self` holds `epoch`. */
static bool holds(const sl_claim_t *cur, const char *self, uint64_t epoch) {
    return cur->epoch == epoch && !cur->released && strcmp(cur->owner, self) == 0;
}

sl_err sl_claim_renew(const sl_claim_t *cur, const char *self, uint64_t epoch, uint64_t now_ms,
                      uint32_t lease_ms, sl_claim_t *next) {
    if (!holds(cur, self, epoch))
        return SL_ESTATE;
    *next = *cur;
    uint64_t exp = now_ms + lease_ms;
    if (exp > next->lease_expiry_ms)
        next->lease_expiry_ms = exp;
    return SL_OK;
}

sl_err sl_claim_release(const sl_claim_t *cur, const char *self, uint64_t epoch,
                        sl_claim_t *next) {
    if (!holds(cur, self, epoch))
        return SL_ESTATE;
    *next = *cur;
    next->released = true;
    return SL_OK;
}

bool sl_claim_must_stop(const sl_claim_t *seen, const char *self, uint64_t epoch) {
    if (seen->epoch > epoch)
        return true;
    if (seen->epoch == epoch && seen->owner[0] && strcmp(seen->owner, self) != 0)
        return true;
    return false;
}

void sl_claim_merge(const sl_claim_t *a, const sl_claim_t *b, sl_claim_t *out) {
    const sl_claim_t *w;
    int c;
    if (a->epoch != b->epoch)
        w = a->epoch > b->epoch ? a : b;
    else if ((c = strcmp(a->owner, b->owner)) != 0)
        /* an owner beats none; between two, the smaller id */
        w = !a->owner[0] ? b : !b->owner[0] ? a : c < 0 ? a : b;
    else if (a->released != b->released)
        w = a->released ? a : b;
    else
        w = a->lease_expiry_ms >= b->lease_expiry_ms ? a : b;
    sl_claim_t r = *w;
    *out = r;
}

/* Order of result records: a beats b. */
static bool result_beats(const sl_result_t *a, const sl_result_t *b) {
    bool ad = a->state == SL_TRIAL_DONE, bd = b->state == SL_TRIAL_DONE;
    if (ad != bd)
        return ad;
    if (a->epochs != b->epochs)
        return a->epochs > b->epochs;
    if (a->claim_epoch != b->claim_epoch)
        return a->claim_epoch < b->claim_epoch;
    int c = strcmp(a->writer, b->writer);
    if (c != 0)
        return c < 0;
    return strcmp(a->reason, b->reason) <= 0;
}

void sl_result_merge(const sl_result_t *a, const sl_result_t *b, sl_result_t *out) {
    sl_result_t r = result_beats(a, b) ? *a : *b;
    *out = r;
}

/* ---- records ---- */

static bool id_ok(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n > max)
        return false;
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == '"' || *s == '\\')
            return false;
    return true;
}

sl_err sl_claim_encode(const sl_claim_t *c, char *out, size_t out_cap, size_t *out_len) {
    if (!id_ok(c->owner, SL_PEER_ID_MAX))
        return SL_EINVAL;
    int n = snprintf(out, out_cap,
                     "{\"owner\":\"%s\",\"epoch\":%llu,\"lease_expiry_ms\":%llu,\"released\":%s}",
                     c->owner, (unsigned long long)c->epoch,
                     (unsigned long long)c->lease_expiry_ms, c->released ? "true" : "false");
    if (n < 0 || (size_t)n >= out_cap)
        return SL_ETOOBIG;
    if (out_len)
        *out_len = (size_t)n;
    return SL_OK;
}

/* A non-negative integer field below 2^53. */
static bool get_u64(const cJSON *obj, const char *key, uint64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740991.0 ||
        v->valuedouble != floor(v->valuedouble))
        return false;
    *out = (uint64_t)v->valuedouble;
    return true;
}

static bool get_text(const cJSON *obj, const char *key, char *out, size_t cap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap || !id_ok(v->valuestring, cap - 1))
        return false;
    memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
    return true;
}

sl_err sl_claim_decode(const char *json, size_t len, sl_claim_t *out) {
    if (len > SL_STUDY_RECORD_MAX)
        return SL_ETOOBIG;
    cJSON *root = cJSON_ParseWithLength(json, len);
    sl_claim_t c;
    memset(&c, 0, sizeof c);
    const cJSON *rel = cJSON_GetObjectItemCaseSensitive(root, "released");
    bool ok = cJSON_IsObject(root) && cJSON_GetArraySize(root) == 4 &&
              get_text(root, "owner", c.owner, sizeof c.owner) && get_u64(root, "epoch", &c.epoch) &&
              get_u64(root, "lease_expiry_ms", &c.lease_expiry_ms) && cJSON_IsBool(rel) &&
              (c.owner[0] != '\0' || c.epoch == 0);
    c.released = ok && cJSON_IsTrue(rel);
    cJSON_Delete(root);
    if (!ok)
        return SL_EPROTO;
    *out = c;
    return SL_OK;
}

sl_err sl_result_encode(const sl_result_t *r, char *out, size_t out_cap, size_t *out_len) {
    if (!id_ok(r->writer, SL_PEER_ID_MAX) || !id_ok(r->reason, sizeof r->reason - 1) ||
        !id_ok(r->trial_id, SL_TRIAL_ID_LEN) ||
        (r->state != SL_TRIAL_DONE && r->state != SL_TRIAL_FAILED))
        return SL_EINVAL;
    int n = snprintf(out, out_cap,
                     "{\"trial\":\"%s\",\"state\":\"%s\",\"epochs\":%d,\"claim_epoch\":%llu,"
                     "\"writer\":\"%s\",\"reason\":\"%s\"}",
                     r->trial_id, sl_trial_state_name(r->state), r->epochs,
                     (unsigned long long)r->claim_epoch, r->writer, r->reason);
    if (n < 0 || (size_t)n >= out_cap)
        return SL_ETOOBIG;
    if (out_len)
        *out_len = (size_t)n;
    return SL_OK;
}

sl_err sl_result_decode(const char *json, size_t len, sl_result_t *out) {
    if (len > SL_STUDY_RECORD_MAX)
        return SL_ETOOBIG;
    cJSON *root = cJSON_ParseWithLength(json, len);
    sl_result_t r;
    memset(&r, 0, sizeof r);
    char state[16] = "";
    uint64_t epochs = 0;
    bool ok = cJSON_IsObject(root) && cJSON_GetArraySize(root) == 6 &&
              get_text(root, "trial", r.trial_id, sizeof r.trial_id) &&
              get_text(root, "state", state, sizeof state) && get_u64(root, "epochs", &epochs) &&
              epochs <= SL_STUDY_MAX_EPOCHS && get_u64(root, "claim_epoch", &r.claim_epoch) &&
              get_text(root, "writer", r.writer, sizeof r.writer) &&
              get_text(root, "reason", r.reason, sizeof r.reason);
    cJSON_Delete(root);
    if (ok && strcmp(state, "done") == 0)
        r.state = SL_TRIAL_DONE;
    else if (ok && strcmp(state, "failed") == 0)
        r.state = SL_TRIAL_FAILED;
    else
        return SL_EPROTO;
    r.epochs = (int)epochs;
    *out = r;
    return SL_OK;
}

/* ---- picking trials, and what a worker does after an epoch ---- */

/* When self's turn comes in the hand-off of a candidate assigned to
 * another member (sl_claim_pick): after (rank + 1) steps of waiting. */
static uint64_t handoff_at(const sl_claim_cand_t *c, const sl_round_member_t *members,
                           size_t member_count, const char *self, uint64_t now_ms) {
    size_t rank = sl_round_rank(members, member_count, c->trial_id, self);
    return now_ms - c->waited_ms + SL_CLAIM_HANDOFF_MS * (rank + 1);
}

/* a before b in claim priority. */
static bool cand_before(const sl_claim_cand_t *a, const sl_claim_cand_t *b) {
    if (a->rung != b->rung)
        return a->rung > b->rung;
    if (a->ordinal != b->ordinal)
        return a->ordinal < b->ordinal;
    return strcmp(a->trial_id, b->trial_id) < 0;
}

sl_err sl_claim_pick(const sl_claim_cand_t *cands, size_t count,
                     const sl_round_member_t *members, size_t member_count, const char *self,
                     uint64_t now_ms, uint32_t lease_ms, size_t *pick, sl_claim_t *next,
                     size_t *pick_count, uint64_t *handoff_ms) {
    *pick_count = 0;
    if (handoff_ms)
        *handoff_ms = UINT64_MAX;
    if (count == 0)
        return SL_OK;
    size_t *order = sl_malloc(count * sizeof *order);
    const char **ids = sl_malloc(count * sizeof *ids);
    int *owner = sl_malloc(count * sizeof *owner);
    sl_err err = SL_ENOMEM;
    if (!order || !ids || !owner)
        goto fail;
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        const sl_claim_cand_t *c = &cands[i];
        if (!c->needs_work ||
            !sl_claim_may_take(sl_claim_status_of(&c->claim, self, now_ms, c->owner_alive)))
            continue;
        size_t j = n++;
        while (j > 0 && cand_before(c, &cands[order[j - 1]])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    for (size_t k = 0; k < n; k++)
        ids[k] = cands[order[k]].trial_id;
    if ((err = sl_round_assign(members, member_count, ids, n, owner)))
        goto fail;
    int slots = 0;
    for (size_t i = 0; i < member_count; i++)
        if (members[i].alive && !strcmp(members[i].id, self))
            slots = members[i].free_slots;
    /* first what the assignment gives self; then, with slots left, what
       another member let wait past self's turn */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < n && slots > 0; k++) {
            const sl_claim_cand_t *c = &cands[order[k]];
            bool mine = owner[k] >= 0 && !strcmp(members[owner[k]].id, self);
            if (pass == 0 ? !mine : mine)
                continue;
            if (pass == 1) {
                uint64_t turn = handoff_at(c, members, member_count, self, now_ms);
                if (turn > now_ms) {
                    if (handoff_ms && turn < *handoff_ms)
                        *handoff_ms = turn;
                    continue;
                }
            }
            if (sl_claim_take(&c->claim, self, now_ms, c->owner_alive, lease_ms,
                              &next[*pick_count]) != SL_OK)
                continue;
            pick[(*pick_count)++] = order[k];
            slots--;
        }
    }
    err = SL_OK;
fail:
    sl_free(order);
    sl_free(ids);
    sl_free(owner);
    return err;
}

sl_epoch_outcome sl_claim_after_epoch(const sl_study_spec_t *spec, int rung, int epoch,
                                      bool failed, int failures) {
    if (failed)
        return failures > spec->retries ? SL_EPOCH_FAILED : SL_EPOCH_RETRY;
    if (rung < 0)
        rung = 0;
    if (rung >= spec->rung_count)
        rung = spec->rung_count - 1;
    if (epoch < spec->rungs[rung])
        return SL_EPOCH_CONTINUE;
    return rung == spec->rung_count - 1 ? SL_EPOCH_DONE : SL_EPOCH_PAUSE;
}

bool sl_claim_checkpoint_due(const sl_study_spec_t *spec, int epoch, sl_epoch_outcome outcome) {
    if (outcome == SL_EPOCH_PAUSE || outcome == SL_EPOCH_DONE)
        return true;
    if (outcome != SL_EPOCH_CONTINUE)
        return false;
    return spec->checkpoint_every > 0 && epoch % spec->checkpoint_every == 0;
}
