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
