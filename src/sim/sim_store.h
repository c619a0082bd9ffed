/* The store on the simulator (docs/simulator.md, "The store on the
 * simulator"): N peers, each with the real store core (its replica, kept
 * across a crash as the daemon's is on disk), the real spread policy
 * (src/store/store_spread.h: a local write to every alive member up to
 * SL_SPREAD_PUSH_ALL others, rumor mongering past that) and the real
 * anti-entropy round core (src/store/store_round.h: whom to send a DIGEST
 * or SUMMARY, its default timers), on sl_sim's virtual clock and network
 * (delays, loss, partitions, pauses, crashes). A message is handled as
 * store_node.c's on_msg handles it: the store takes it, its answers go
 * back to the sender, a DELTA that brought something new is relayed, and
 * deltas held past a gap are taken once it fills; a node's writes go out
 * as one joined DELTA when the driver pushes them (store_node.c's
 * push_run after a turn). No WAL and no sockets: the replica is the
 * store in memory, addressed by node id.
 *
 * What membership says is the driver's: whom a DELTA may go to asks its
 * `member` hook (NULL: every other node, a static membership), and the
 * round cores hear of members going and coming through
 * sl_simstore_set_up and sl_simstore_back. A node restarted meets every
 * member anew (each urgent to its fresh round core, as SWIM's joins make
 * them to the daemon's) and every node up hears it came back.
 *
 * The simulators of the store's spread (tests/sim_store_spread_test.c)
 * and of studies (tests/sim_study_test.c, tests/sim_study_scale_test.c)
 * run on it. Internal: tests only, not the embedder's API. */
#ifndef STARLING_SIM_SIM_STORE_H
#define STARLING_SIM_SIM_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/sim.h"
#include "starling/store.h"
#include "store/store_round.h"

typedef struct sl_simstore sl_simstore_t;

typedef struct {
    /* A message node `id` received changed its replica (what the store
     * node's listeners hear): `out->changed` lists the keys when the
     * config asks for them, `out->all_changed` says a SNAPSHOT replaced
     * what is not listed. NULL: nobody listens. */
    void (*changed)(void *ctx, uint32_t id, const sl_store_out_t *out);
    /* Whether node `other` is an alive or suspect member as node `id`
     * sees it (a DELTA may go to it). NULL: every other node is. */
    bool (*member)(void *ctx, uint32_t id, uint32_t other);
    void *ctx; /* passed to both */
} sl_simstore_hooks_t;

typedef struct {
    uint32_t nodes;          /* node ids are 0..nodes-1; replica id = node id + 1 */
    uint64_t seed;           /* the run's seed (the network's and the picks' choices) */
    sl_sim_net_t net;        /* the network at the start */
    sl_store_round_config_t round; /* every round core's (max_peers 0: nodes) */
    bool no_anti_entropy;    /* rounds run but send nothing: rumor alone */
    int64_t clock_ms;        /* the stores' clock at virtual time 0 (their HLC reads a
                                wall clock in ms) */
    bool list_changed;       /* hooks.changed gets the keys a message changed */
    sl_simstore_hooks_t hooks;
} sl_simstore_config_t;

/* What one node sent so far. */
typedef struct {
    uint64_t pushed;  /* DELTAs of its own writes (sl_simstore_push) */
    uint64_t relayed; /* DELTAs received and sent on */
    uint64_t ae_sent; /* anti-entropy: DIGESTs, SUMMARYs and their answers */
} sl_simstore_counts_t;

/* Creates the stores and starts every node: each round core knows every
 * other node as an up member heard nothing from, none urgent (a cluster
 * formed long before), and its first round falls in its first sync_ms. */
sl_err sl_simstore_new(const sl_simstore_config_t *cfg, sl_simstore_t **out);
void sl_simstore_destroy(sl_simstore_t **c);

/* The simulator underneath (for faults: sl_sim_partition, sl_sim_pause,
 * sl_sim_set_net; and its rng). */
sl_sim_t *sl_simstore_sim(sl_simstore_t *c);
/* Node `id`'s replica (kept while it is down). */
sl_store_t *sl_simstore_store(sl_simstore_t *c, uint32_t id);
/* The stores' clock now (ms): what a write or a receive is stamped with. */
uint64_t sl_simstore_clock(const sl_simstore_t *c);
/* Runs the network and the rounds until virtual time `until_ms`. */
sl_err sl_simstore_run_until(sl_simstore_t *c, int64_t until_ms);

/* Node `id` made a local write (sl_store_put, _del, ...): its DELTA waits
 * for the next sl_simstore_push. Takes `d` (its body is freed). */
sl_err sl_simstore_wrote(sl_simstore_t *c, uint32_t id, sl_store_msg_t *d);
/* Node `id`'s writes since its last push go out as one DELTA (joined
 * while they form a run, as store_node.c's push_run) through the spread
 * policy. */
sl_err sl_simstore_push(sl_simstore_t *c, uint32_t id);

/* Membership at node `id` about node `other`: an alive or suspect member
 * or not (a round candidate), and joined or came back (urgent: a DIGEST
 * at its next round). Nothing while `id` is down. */
void sl_simstore_set_up(sl_simstore_t *c, uint32_t id, uint32_t other, bool up);
void sl_simstore_back(sl_simstore_t *c, uint32_t id, uint32_t other);

/* kill -9 of node `id`: its round core and unpushed writes are lost,
 * messages to it too; its replica stays. */
void sl_simstore_crash(sl_simstore_t *c, uint32_t id);
/* Node `id` restarts on its replica: a fresh round core meets every
 * member as joining (those the member hook says are), and every node up
 * hears it came back. */
sl_err sl_simstore_restart(sl_simstore_t *c, uint32_t id);

void sl_simstore_counts(const sl_simstore_t *c, uint32_t id, sl_simstore_counts_t *out);

#endif
