/* How a DELTA spreads through the cluster (docs/store.md, "How writes
 * spread"): the pure policy that the daemon (src/store/store_node.c) and
 * the simulator (tests/sim_store_spread_test.c, bench/store/spread_bench.c)
 * share. No I/O: member counts, a DELTA's origin and an rng in, how many
 * and which members out.
 *
 * Small clusters (at most SL_SPREAD_PUSH_ALL others): a local write goes
 * to every alive member and nothing is relayed, so each member receives
 * every write of a replica once, straight from its writer.
 *
 * Larger clusters: rumor mongering. A local write goes to
 * SL_SPREAD_FANOUT random members; every receiver for which such a DELTA
 * (one range, of its sender's own dots: a write as its writer pushed it)
 * applied something new sends the same bytes on to SL_SPREAD_FANOUT
 * random members (a duplicate, or a DELTA with nothing new, goes no
 * further). A relayed DELTA is an ordinary DELTA: its `sender` is still
 * the writer, so no wire change; one that comes back to its writer is
 * taken as a duplicate (proto/store.md, rule 3). Anti-entropy's answers
 * (a replica's DELTA of others' dots) are not relayed. Each peer sends
 * about SL_SPREAD_FANOUT messages per write whatever N, and a write
 * reaches all but about e^-SL_SPREAD_FANOUT of the members in O(log N)
 * hops; anti-entropy (the rounds that follow a change) brings it to the
 * rest. Past a few thousand peers that rest grows as N e^-F, and with it
 * the time until the last peer holds a write. */
#ifndef STARLING_STORE_SPREAD_H
#define STARLING_STORE_SPREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/rng.h"
#include "starling/store.h"

/* Up to this many other alive members, a local write goes to all of them
 * (the study benchmarks rely on it: bench/results/study.md). */
#define SL_SPREAD_PUSH_ALL 32
/* Past that, members a local write or a relay goes to. A write then
 * misses about e^-F of the members (the rumor dies out there), which
 * anti-entropy's rounds must find: at 1,000 peers and 1 % loss, F = 4
 * left 2 % of them to it and a lone write reached the last one after
 * p99 1.05 s; F = 6 leaves 0.3 % and 0.6 s (bench/results/store.md). */
#define SL_SPREAD_FANOUT 6
/* A received DELTA longer than this is not relayed: pushes are at most
 * 256 KiB (a turn's writes), and a catch-up answer of anti-entropy (up to
 * 1 MiB a message) is not worth sending again to members that have it. */
#define SL_SPREAD_RELAY_MAX_LEN (256u << 10)
/* The most members one DELTA goes to (sl_store_spread_pick's `out`). */
#define SL_SPREAD_MAX_TARGETS SL_SPREAD_PUSH_ALL

typedef enum {
    SL_SPREAD_LOCAL = 0, /* this replica's own writes, just made durable */
    SL_SPREAD_RELAY = 1  /* a DELTA received from a peer that applied something new */
} sl_spread_origin;

/* How many random other members a DELTA goes to, with `others` alive
 * members besides this one: at most SL_SPREAD_MAX_TARGETS and at most
 * `others`. For a relay, `body` and `len` are the DELTA as received (its
 * store message body): 0 unless it is a write as its writer pushed it,
 * at most SL_SPREAD_RELAY_MAX_LEN bytes (the bytes are only peeked at:
 * its sender and its one range's replica, not decoded). */
size_t sl_store_spread_fanout(size_t others, sl_spread_origin origin, const uint8_t *body,
                              size_t len);

/* Whether member `i` may receive a DELTA (alive, not this peer). */
typedef bool (*sl_spread_ok_fn)(void *ctx, size_t i);

/* Picks up to `k` (<= SL_SPREAD_MAX_TARGETS) distinct members at random
 * among the `count` indexed 0..count-1, each one `ok` accepts, into `out`;
 * returns how many. A few random tries per target when k is small next to
 * count (O(k) when most members are alive: no pass over the members); a
 * pass from a random start otherwise, or when the tries fall short. */
size_t sl_store_spread_pick(sl_rng_t *rng, size_t count, size_t k, sl_spread_ok_fn ok, void *ctx,
                            uint32_t *out);

/* A local write's DELTA as the store core encoded it (one range, of its
 * sender's dots, its atoms last): its sender and range, read from the
 * two leading fields without decoding the atoms. false: not such a DELTA. */
bool sl_store_spread_range(const uint8_t *body, size_t len, uint64_t *sender,
                           sl_store_range_t *range);

/* Joins `count` local writes' DELTAs of one replica whose ranges follow
 * one another (each `from` the `to` before it) into one DELTA: the first
 * one's sender, the range from the first `from` to the last `to`, and
 * every atom, in order, as their bytes were encoded (an atom names its
 * replica by its index in the ranges: 0 in each and in the join). No
 * decode and no encode of the atoms, and the same bytes the codec would
 * make of them. SL_EINVAL: not such a run; SL_ETOOBIG: over `max_len`. */
sl_err sl_store_spread_join(const sl_store_msg_t *deltas, size_t count, size_t max_len,
                            sl_store_msg_t *out);

#endif
