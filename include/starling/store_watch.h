/* Live changes of the store for clients: the `watch-keys [PREFIX]` control
 * command (peerctl watch), served next to a store_node.
 *
 * A watch is a control request that stays open: the peer streams reply
 * parts, each a batch of lines, one JSON object per changed key whose key
 * starts with PREFIX (all keys without one), in the order the changes
 * happened on this peer:
 *
 *   {"key":K,"type":"register","value":V,"encoding":"utf-8"|"base64"}
 *   {"key":K,"type":"counter","value":N}
 *   {"key":K,"type":"set"}            (the set changed; `get` shows it)
 *   {"key":K,"type":"map"}            (a field was added or changed)
 *   {"key":K,"deleted":true}
 *
 * Local writes are reported once durable, remote ones once applied. A
 * RESET snapshot (a peer back after a long absence) is not reported key by
 * key. Batches go out at most every 20 ms, in parts of at most 4 KiB; an
 * empty part every 2 s tells the client the peer is alive. A watch ends
 * when it falls 8 MiB behind (its backlog on the peer, 4 MiB, is full
 * while ZeroMQ's queue to the client holds its 1,024 parts: the client
 * reads too slowly or not at all), and when none of its parts, keepalives
 * included, has been taken for 4 s (the client is gone). What it held is
 * freed and trimmed from the peer's resident memory; what is still queued
 * to a client that stays connected but never reads (at most 4 MiB) is
 * freed when that connection closes. Stats: watch.open, started, ended,
 * ended_behind. */
#ifndef STARLING_STORE_WATCH_H
#define STARLING_STORE_WATCH_H

#include "starling/peer.h"
#include "starling/store_node.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_STORE_WATCH_MAX 64                /* open watches per peer */
#define SL_STORE_WATCH_KEEPALIVE_MS 2000u    /* empty part period */
#define SL_STORE_WATCH_MAX_BACKLOG (8u << 20) /* bytes a watch may be behind on the peer */

typedef struct sl_store_watch sl_store_watch_t;

/* Registers `watch-keys` on the node. The store node's change hook is
 * taken while at least one watch is open. */
sl_err sl_store_watch_attach(sl_node_t *node, sl_store_node_t *sn, sl_store_watch_t **out);

/* Ends every open watch (no further parts) and frees it. */
void sl_store_watch_destroy(sl_store_watch_t **w);

#ifdef __cplusplus
}
#endif

#endif
