/* The deterministic simulator: a virtual clock and a virtual network under
 * any sans-I/O core (docs/simulator.md).
 *
 * Nodes are opaque to the simulator: a driver gives a table of operations
 * (start, stop, deliver, tick, next_deadline) and a context, and the
 * simulator calls them in virtual-time order. Nodes send byte messages to
 * each other with sl_sim_send(). The network drops, delays (so reorders)
 * and duplicates messages, and partitions groups of nodes; nodes can be
 * paused (messages wait, timers do not fire), crashed (state gone,
 * messages lost) and restarted. Every random choice comes from the seed, so
 * a run is a function of (seed, driver, schedule of faults): replay a
 * failing seed and it fails the same way.
 *
 * sl_simswim_* below is the membership driver: a cluster of sl_swim cores
 * on the simulator, with the checkers of INVARIANTS.md M1-M6. The store and
 * study cores get their own drivers on the same sl_sim. */
#ifndef STARLING_SIM_H
#define STARLING_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"
#include "starling/rng.h"
#include "starling/swim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_sim sl_sim_t;

/* Network behaviour, changeable at any time. */
typedef struct {
    double loss;           /* probability a message is dropped, 0..1 */
    double duplicate;      /* probability it arrives twice, 0..1 */
    uint32_t delay_min_ms; /* one-way delay, uniform in [min, max]; */
    uint32_t delay_max_ms; /*   a spread reorders messages */
} sl_sim_net_t;

/* What a driver does for its nodes. Every callback may call sl_sim_send. */
typedef struct {
    /* Node `id` starts (restarts > 0: after a crash). */
    sl_err (*start)(void *ctx, sl_sim_t *sim, uint32_t id, uint32_t restarts, int64_t now_ms);
    /* Node `id` crashed: drop its volatile state. */
    void (*stop)(void *ctx, sl_sim_t *sim, uint32_t id);
    /* A message from node `from` arrives at node `id`. */
    sl_err (*deliver)(void *ctx, sl_sim_t *sim, uint32_t id, uint32_t from, int64_t now_ms,
                      const uint8_t *data, size_t len);
    /* Node `id`'s timers are due. */
    sl_err (*tick)(void *ctx, sl_sim_t *sim, uint32_t id, int64_t now_ms);
    /* Absolute time node `id` next wants a tick (INT64_MAX: none). */
    int64_t (*next_deadline)(void *ctx, sl_sim_t *sim, uint32_t id);
} sl_sim_ops_t;

typedef struct {
    uint32_t nodes;         /* node ids are 0..nodes-1 */
    uint64_t seed;          /* the run's seed */
    sl_sim_net_t net;       /* initial network */
    const sl_sim_ops_t *ops; /* the driver */
    void *ctx;              /* passed to every op */
} sl_sim_config_t;

/* Counters of the run so far. */
typedef struct {
    uint64_t sent;       /* sl_sim_send calls */
    uint64_t delivered;  /* deliver callbacks */
    uint64_t lost;       /* dropped by loss */
    uint64_t cut;        /* dropped by a partition */
    uint64_t to_down;    /* dropped: destination crashed */
    uint64_t duplicated; /* extra copies */
    uint64_t ticks;      /* tick callbacks */
    uint64_t bytes;      /* bytes sent */
} sl_sim_stats_t;

typedef enum {
    SL_SIM_DOWN = 0,   /* not started or crashed */
    SL_SIM_UP = 1,     /* running */
    SL_SIM_PAUSED = 2  /* running but stopped (SIGSTOP) */
} sl_sim_node_state;

/* Creates the simulator; no node is started yet. */
sl_err sl_sim_new(const sl_sim_config_t *cfg, sl_sim_t **out);
void sl_sim_destroy(sl_sim_t **sim);

/* Virtual time now. */
int64_t sl_sim_now(const sl_sim_t *sim);
/* The run's random stream (for drivers and fault schedules). */
sl_rng_t *sl_sim_rng(sl_sim_t *sim);

/* Sends `len` bytes (copied) from `from` to `to` through the network. */
void sl_sim_send(sl_sim_t *sim, uint32_t from, uint32_t to, const uint8_t *data, size_t len);

/* Runs events until virtual time `until_ms` (inclusive); returns the first
 * error a callback returned (the run stops there). */
sl_err sl_sim_run_until(sl_sim_t *sim, int64_t until_ms);

/* The driver changed node `id` outside a callback (a local request such as
 * a leave or a metadata change): asks it for its next deadline again. */
sl_err sl_sim_reschedule(sl_sim_t *sim, uint32_t id);

/* Faults. */
void sl_sim_set_net(sl_sim_t *sim, const sl_sim_net_t *net);
const sl_sim_net_t *sl_sim_net(const sl_sim_t *sim);
/* `group[i]` is node i's side; messages between sides are dropped (also
 * those in flight when they arrive). NULL heals. */
sl_err sl_sim_partition(sl_sim_t *sim, const uint32_t *group);
bool sl_sim_partitioned(const sl_sim_t *sim);
/* Starts (or restarts after a crash) node `id` now. */
sl_err sl_sim_start(sl_sim_t *sim, uint32_t id);
/* Crashes node `id`: the driver's stop op runs, messages to it are lost. */
void sl_sim_crash(sl_sim_t *sim, uint32_t id);
/* Pauses or resumes node `id`; messages wait for it, no timers fire. */
sl_err sl_sim_pause(sl_sim_t *sim, uint32_t id, bool paused);
sl_sim_node_state sl_sim_node(const sl_sim_t *sim, uint32_t id);
uint32_t sl_sim_node_count(const sl_sim_t *sim);
/* Bytes node `id` has sent so far. */
uint64_t sl_sim_bytes_sent(const sl_sim_t *sim, uint32_t id);
void sl_sim_stats(const sl_sim_t *sim, sl_sim_stats_t *stats);

/* ---- Membership on the simulator (src/sim/sim_swim.c) ---- */

typedef struct sl_simswim sl_simswim_t;

typedef struct {
    uint32_t nodes;          /* cluster size */
    uint64_t seed;           /* run seed */
    sl_sim_net_t net;        /* initial network */
    sl_swim_timing_t timing; /* every core's timing (zero: defaults) */
    bool preload;            /* start formed: every core knows every
                                member (no joins; for large N) */
    uint32_t join_spread_ms; /* !preload: starts spread over this */
    bool check_cores;        /* sl_swim_check after every callback */
    bool check_safety;       /* M2/M3/M4 checks on every event */
    uint32_t msgs_per_period_cap; /* M6: messages a node may send in one
                                     probe period (0: 64 + 4k) */
} sl_simswim_config_t;

/* Creates the cluster and starts every node (names "n<i>", addresses
 * "sim://n<i>"; without preload node i joins through the others). */
sl_err sl_simswim_new(const sl_simswim_config_t *cfg, sl_simswim_t **out);
void sl_simswim_destroy(sl_simswim_t **c);

sl_sim_t *sl_simswim_sim(sl_simswim_t *c);
/* The core of node `id`, or NULL while it is down. */
sl_swim_t *sl_simswim_core(sl_simswim_t *c, uint32_t id);
sl_err sl_simswim_run_until(sl_simswim_t *c, int64_t until_ms);

/* Faults with their ground truth recorded for the checkers. */
void sl_simswim_crash(sl_simswim_t *c, uint32_t id);
/* Restarts a crashed node with its persisted incarnation + 1. */
sl_err sl_simswim_restart(sl_simswim_t *c, uint32_t id);
sl_err sl_simswim_pause(sl_simswim_t *c, uint32_t id, bool paused);
sl_err sl_simswim_leave(sl_simswim_t *c, uint32_t id);
sl_err sl_simswim_partition(sl_simswim_t *c, const uint32_t *group);
void sl_simswim_set_net(sl_simswim_t *c, const sl_sim_net_t *net);
/* Call after changing node `id`'s core directly (sl_swim_set_meta, ...):
 * sends its outputs, feeds its events to the checkers, reschedules it. */
sl_err sl_simswim_touch(sl_simswim_t *c, uint32_t id);

/* Watches node `member` reaching incarnation `inc` (or a later one) in
 * state `state` (SL_SWIM_STATE_NONE: any) in the other nodes' views:
 * records when each node first holds it. For dissemination and detection
 * figures; one watch at a time. */
void sl_simswim_watch(sl_simswim_t *c, uint32_t member, uint64_t inc, uint8_t state);
/* Nodes that hold the watched update, and the time the k-th did (k from
 * 1; -1 if fewer have it). */
uint32_t sl_simswim_watch_count(const sl_simswim_t *c);
int64_t sl_simswim_watch_time(const sl_simswim_t *c, uint32_t k);

/* Starts a measuring window: remembers the time and each node's bytes. */
void sl_simswim_mark(sl_simswim_t *c);
/* Bytes node `id` sent since the mark (wire encoding, header included). */
uint64_t sl_simswim_bytes_since_mark(const sl_simswim_t *c, uint32_t id);

/* Checks the end-of-run properties once the network has been quiet for
 * long enough: M1 (crashed nodes dead everywhere, and declared so by every
 * node up since the crash within `detect_bound_ms` of it; 0 skips the
 * bound), M3/M5 (identical views, every running node ALIVE at its
 * incarnation everywhere), M4 (left nodes LEFT everywhere), M6 (bytes per
 * running node per second since the mark under `rest_cap_bps`; 0 skips).
 * Violations are recorded. */
void sl_simswim_check_quiet(sl_simswim_t *c, int64_t detect_bound_ms, double rest_cap_bps);

/* Violations found so far (each line names the property: "M3: ..."), and
 * whether property `m` (1..6) was violated. */
size_t sl_simswim_violations(const sl_simswim_t *c);
const char *sl_simswim_violation(const sl_simswim_t *c, size_t i);
bool sl_simswim_violated(const sl_simswim_t *c, int m);

/* Earliest time at which node `observer` declared `member` DEAD (-1 if it
 * has not, since the member's last crash). */
int64_t sl_simswim_dead_seen(const sl_simswim_t *c, uint32_t observer, uint32_t member);
/* Time node `id` last crashed (-1 if never). */
int64_t sl_simswim_crash_time(const sl_simswim_t *c, uint32_t id);

#ifdef __cplusplus
}
#endif
#endif
