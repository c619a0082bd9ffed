/* The node's loop without its sockets, on a clock the caller gives: for
 * bench/scale (one peer's per-tick work at N members, counted by
 * callgrind) and tests. Not part of the embedding API. */
#ifndef STARLING_NODE_BENCH_H
#define STARLING_NODE_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/peer.h"
#include "starling/swim.h"

/* Runs the timers of one loop turn at `now_ns` (monotonic ns): swim's
 * tick when due, every due tick hook, then swim's output. */
void sl_node_timers_at(sl_node_t *node, uint64_t now_ns);
/* Hands a message body to the module that claimed its type, as if it had
 * come in; false when none did. */
bool sl_node_deliver(sl_node_t *node, uint8_t type, const uint8_t *body, size_t len,
                     uint64_t now_ns);
/* The node's membership core, to add members without a network. */
sl_swim_t *sl_node_swim_mut(sl_node_t *node);

#endif
