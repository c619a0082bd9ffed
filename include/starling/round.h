/* Rounds and leaders: rendezvous (highest-random-weight) choices that every
 * peer computes from its own membership view, with no election messages.
 *
 *   leader     the leader of round r of a study is the alive member with
 *              the highest sl_hrw_weight(member id, key(study, r)); when
 *              it dies, the next in the succession order leads the same
 *              round (all its state is in the store)
 *   claims     each pending trial goes to the alive member with free
 *              capacity that ranks highest for it, taking trials in the
 *              caller's priority order, so peers with the same view
 *              claim disjoint trials and claims rarely collide
 *
 * Pure functions: no clock, no sockets. Ties (equal weights) go to the
 * smaller member id, so the answer never depends on the input order. */
#ifndef STARLING_ROUND_H
#define STARLING_ROUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One member as this peer sees it. */
typedef struct {
    const char *id;  /* member id (borrowed) */
    bool alive;      /* alive (or suspect) in this peer's view */
    int free_slots;  /* trials it can start now (its concurrency minus running) */
} sl_round_member_t;

/* The rendezvous key of round `round` of a study: different studies get
 * different leaders for the same round number. */
uint64_t sl_round_key(const char *study_id, uint64_t round);

/* Index of the leader of the round with key `key` among the alive
 * members, or -1 when none is alive. */
int sl_round_leader(const sl_round_member_t *members, size_t count, uint64_t key);

/* The alive members in succession order for `key` (order[0] is the
 * leader, order[1] takes over if it dies, ...). Returns how many. */
size_t sl_round_succession(const sl_round_member_t *members, size_t count, uint64_t key,
                           size_t *order);

/* Rank weight of a peer for a trial (higher claims first). */
uint64_t sl_round_trial_weight(const char *peer_id, const char *trial_id);

/* Assigns trials (in the caller's priority order: promotions before fresh
 * trials, then by ordinal) to alive members with free slots: each to the
 * member of highest weight that still has a slot. owner_out[i] is the
 * member index, or -1 when no slot is left. */
sl_err sl_round_assign(const sl_round_member_t *members, size_t count,
                       const char *const *trial_ids, size_t trial_count, int *owner_out);

/* How many alive members with free slots outrank `self` for a trial (0:
 * self weighs highest among them). */
size_t sl_round_rank(const sl_round_member_t *members, size_t count, const char *trial_id,
                     const char *self);

#ifdef __cplusplus
}
#endif
#endif
