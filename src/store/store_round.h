/* The store's anti-entropy round (docs/store.md, "Anti-entropy at rest"):
 * the pure policy that decides, at each round, which member gets this
 * replica's DIGEST or SUMMARY, or nobody. The daemon (store_node.c) and
 * the simulator (tests/sim_store_test.c, tests/sim_store_spread_test.c)
 * run it. No store, SWIM, socket or clock inside: a table of peers, the
 * membership events, what peers told us and the replica's fingerprint
 * come in; a pick and the counters go out. The caller builds and sends
 * the message, then says so (sl_store_round_sent).
 *
 * A round, from the most to the least pressing:
 *   - a member that joined, came back or restarted (urgent) gets our
 *     DIGEST;
 *   - for `active_rounds` rounds after our fingerprint changed, a DIGEST
 *     to a member whose fingerprint differs and that was not sent this
 *     state yet (fresh);
 *   - every idle_ms, a SUMMARY to a member whose fingerprint differs;
 *   - every refresh_ms, a SUMMARY to any member, in case a fingerprint we
 *     hold went stale without a membership event.
 * So once every pair agrees, rounds send nothing but the refresh.
 *
 * Cost: O(1) per round whatever the members, at rest and while active.
 * The up members are kept in one array partitioned into three classes
 * (agree: their fingerprint is ours; sent: they differ and have this
 * state's DIGEST; fresh: the rest), so a random member of a class is one
 * index, and a member moves between classes with at most two swaps.
 * When our fingerprint changes every member leaves "agree" and "sent" at
 * once (the boundaries move, no element does); those whose fingerprint
 * is the new one are found through a hash of fingerprints to members and
 * moved back, which costs what hearing those fingerprints cost. The
 * reservoir pass over every member this replaced cost O(N) per active
 * round (issue 14). */
#ifndef STARLING_STORE_ROUND_H
#define STARLING_STORE_ROUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"

/* Fast rounds after each change of our state. */
#define SL_STORE_ROUND_ACTIVE 5
/* Peers a table holds at most by default: members, and those not yet
 * forgotten (sl_store_round_forget). A bound on what hostile membership
 * records can make it allocate, far above any fleet's size. */
#define SL_STORE_ROUND_MAX_PEERS 16384
/* Bytes of a peer's key (its store address). */
#define SL_STORE_ROUND_MAX_KEY 128
/* No peer (sl_store_round_pick_t.peer). */
#define SL_STORE_ROUND_NONE UINT32_MAX

typedef struct sl_store_round sl_store_round_t;

typedef struct {
    uint32_t sync_ms;       /* round period (0: 100) */
    uint32_t idle_ms;       /* SUMMARY period once our state stopped changing (0: 1000) */
    uint32_t refresh_ms;    /* a SUMMARY even to members that agree (0: 30000) */
    uint32_t active_rounds; /* fast rounds after a change (0: SL_STORE_ROUND_ACTIVE) */
    uint32_t max_peers;     /* table size limit (0: SL_STORE_ROUND_MAX_PEERS; at most 64x it) */
} sl_store_round_config_t;

typedef enum {
    SL_STORE_ROUND_QUIET = 0,   /* nothing to send this round */
    SL_STORE_ROUND_DIGEST = 1,  /* our DIGEST to `peer` */
    SL_STORE_ROUND_SUMMARY = 2  /* our SUMMARY to `peer` */
} sl_store_round_kind;

/* Why a peer was picked (for tests and the counters). */
typedef enum {
    SL_STORE_ROUND_WHY_NONE = 0,
    SL_STORE_ROUND_WHY_URGENT = 1,  /* joined, came back, restarted, or a heal */
    SL_STORE_ROUND_WHY_FRESH = 2,   /* differs, not sent our state while it changes */
    SL_STORE_ROUND_WHY_DIFFER = 3,  /* differs: the idle SUMMARY */
    SL_STORE_ROUND_WHY_REFRESH = 4  /* any member: the refresh SUMMARY */
} sl_store_round_why;

typedef struct {
    uint8_t kind; /* sl_store_round_kind */
    uint8_t why;  /* sl_store_round_why */
    uint32_t peer; /* the peer's id (SL_STORE_ROUND_NONE when quiet) */
} sl_store_round_pick_t;

typedef struct {
    uint64_t rounds;         /* rounds run */
    uint64_t digests_sent;   /* DIGESTs the caller said it sent */
    uint64_t summaries_sent; /* SUMMARYs the caller said it sent */
    uint64_t rounds_silent;  /* idle rounds that found every member agreeing */
    uint32_t peers;          /* peers in the table (not forgotten) */
    uint32_t up;             /* of them members now (candidates) */
    uint32_t urgent;         /* of them urgent */
    uint32_t agree;          /* up members whose fingerprint is ours */
    uint32_t fresh;          /* up members that differ and were not sent our state */
} sl_store_round_stats_t;

/* A round core; `seed` seeds its choices. */
sl_err sl_store_round_new(const sl_store_round_config_t *cfg, uint64_t seed,
                          sl_store_round_t **out);
void sl_store_round_destroy(sl_store_round_t **rp);

/* ---- the table: peers by key (the address DIGESTs carry) ---- */

/* The id of the peer with this key, made (not a member, nothing heard)
 * when `create` and it is new. SL_ENOTFOUND: absent and not made;
 * SL_EINVAL: key empty or over SL_STORE_ROUND_MAX_KEY; SL_EBUSY: the
 * table is full; SL_ENOMEM. An id stays the peer's until it is
 * forgotten; a new peer takes the lowest free one, so ids stay below the
 * largest number of peers the table held at once. */
sl_err sl_store_round_peer(sl_store_round_t *r, const void *key, size_t len, bool create,
                           uint32_t *id);
/* Forgets a peer that left or was reaped (the caller has retired its
 * replica id): its id and its key's room are reused. A fleet whose spot
 * instances come with new addresses meets new peers for ever; a table of
 * everyone ever met would fill up, and every pass over it would grow. */
void sl_store_round_forget(sl_store_round_t *r, uint32_t id);
/* Ids are below this; a forgotten one reads as a peer with the key "",
 * no replica id, not up. */
uint32_t sl_store_round_peer_count(const sl_store_round_t *r);
/* A peer's key (NUL-terminated), and the replica id it last told (0: none). */
const char *sl_store_round_peer_key(const sl_store_round_t *r, uint32_t id);
uint64_t sl_store_round_peer_rid(const sl_store_round_t *r, uint32_t id);
/* Whether a peer is a member now, and urgent. */
bool sl_store_round_peer_up(const sl_store_round_t *r, uint32_t id);
bool sl_store_round_peer_urgent(const sl_store_round_t *r, uint32_t id);

/* ---- events ---- */

/* Membership: the peer is an alive or suspect member other than this
 * peer (a candidate), or not. A member going down stops being urgent. */
void sl_store_round_set_up(sl_store_round_t *r, uint32_t id, bool up);
/* The peer joined, came back or restarted (it must be up): what it told
 * us and what we sent it are forgotten, it is urgent, and the next round
 * is due at once. */
void sl_store_round_back(sl_store_round_t *r, uint32_t id);
/* A heal: every up member is urgent, the next round due at once. */
void sl_store_round_heal(sl_store_round_t *r);
/* The peer's DIGEST or SUMMARY said its replica id and fingerprint.
 * `*old_rid` gets the replica id it had before (0: none): when it differs
 * from `rid` and is not 0, the peer restarted as a new replica (the
 * caller retires the old one), and what we sent it is forgotten. */
void sl_store_round_heard(sl_store_round_t *r, uint32_t id, uint64_t rid, uint64_t fp,
                          uint64_t *old_rid);

/* ---- rounds ---- */

/* When the next round is due (ns on the caller's clock; 0: now). */
uint64_t sl_store_round_due_ns(const sl_store_round_t *r);
/* Runs one round at `now_ns` with the replica's fingerprint `fp`
 * (sl_store_fingerprint): the next is due sync_ms later. `*pick` says
 * whom to send what; the caller sends it and calls sl_store_round_sent
 * if it went. */
void sl_store_round_run(sl_store_round_t *r, uint64_t now_ns, uint64_t fp,
                        sl_store_round_pick_t *pick);
/* The pick's message left: a DIGEST marks the peer sent this state. */
void sl_store_round_sent(sl_store_round_t *r, const sl_store_round_pick_t *pick);

void sl_store_round_stats(const sl_store_round_t *r, sl_store_round_stats_t *out);

/* Checks the table's invariants (classes, positions, lists, chains):
 * SL_OK, or SL_EINTERNAL naming the broken one in the log. O(N): tests and
 * debug builds. */
sl_err sl_store_round_check(const sl_store_round_t *r);

#endif
