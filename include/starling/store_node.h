/* The store inside the peer daemon: attaches a replicated store
 * (store.h) with its disk (disk.h) to a running sl_node (peer.h) through
 * the node's extension points, and answers the store's control commands.
 *
 *   routes    message types 16..19 (proto/store.md)
 *   ticks     anti-entropy rounds (quiet at rest: see docs/store.md,
 *             "Anti-entropy at rest"), group commit of received deltas,
 *             garbage collection, retiring old incarnations, snapshots
 *   events    a member that joins or comes back gets a DIGEST at once
 *   stats     store.digests_sent, summaries_sent, rounds_silent
 *   commands  put KEY VALUE      store a register value (UTF-8 or bytes);
 *                                the reply comes once the write is synced
 *             get KEY            the value's bytes (SL_ENOTFOUND)
 *             del KEY            delete (any type)
 *             keys [PREFIX]      JSON array of the live keys, sorted
 *             store-fault block ADDR... | heal
 *                                test-only: drop store traffic to and
 *                                from these peers (partition benchmarks)
 *
 * Members are matched to replica ids through the reply address their
 * digests carry: a member whose address now comes with a new replica id
 * has restarted, and its old id is retired. A member not heard from yet
 * holds garbage collection back.
 *
 * Call sl_store_node_destroy after sl_node_destroy (the node holds
 * pointers to this module until then). */
#ifndef STARLING_STORE_NODE_H
#define STARLING_STORE_NODE_H

#include "starling/peer.h"
#include "starling/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_store_node sl_store_node_t;

typedef struct {
    const char *dir;           /* the store's directory (WAL, snapshot, blobs); created */
    uint32_t sync_ms;          /* round period while the state changes (0: 100 ms) */
    uint32_t idle_ms;          /* SUMMARY period once it stopped (0: 1000 ms) */
    uint32_t refresh_ms;       /* a SUMMARY even to members that agree (0: 30000 ms) */
    uint32_t snapshot_records; /* WAL records between snapshots (0: 100000) */
} sl_store_node_config_t;

/* Opens the store's disk (a new incarnation), recovers, and registers the
 * routes, ticks and commands on `node`. */
sl_err sl_store_node_attach(sl_node_t *node, const sl_store_node_config_t *cfg,
                            sl_store_node_t **out);
void sl_store_node_destroy(sl_store_node_t **sn);

/* The store (read it freely between loop turns; write through the calls
 * below so writes are logged, synced and pushed). */
sl_store_t *sl_store_node_store(sl_store_node_t *sn);

/* Local writes: applied, appended to the WAL, synced, then pushed to two
 * alive members. SL_OK means durable here. */
sl_err sl_store_node_put(sl_store_node_t *sn, const void *key, size_t key_len, const void *val,
                         size_t val_len);
sl_err sl_store_node_del(sl_store_node_t *sn, const void *key, size_t key_len);

/* A register write made durable at the end of this loop turn, with every
 * other write of the turn in one sync (group commit), and only then sent
 * to peers. It reads back at once here; a crash before the turn ends loses
 * it, and no other peer ever saw it. For modules that write many keys a
 * turn (studies); the `put` and `del` commands answer the same way. */
sl_err sl_store_node_put_later(sl_store_node_t *sn, const void *key, size_t key_len,
                               const void *val, size_t val_len);

/* Told of a key that changed: a local write (once durable) or an applied
 * remote DELTA. `e` is the key's entry now (valid during the call only),
 * NULL when it was deleted or is empty. A RESET snapshot (a peer back
 * after a long absence) is not reported key by key. */
typedef void (*sl_store_node_change_fn)(void *ctx, const uint8_t *key, size_t key_len,
                                        const sl_store_entry_t *e);

/* Sets the one change hook (NULL to clear it). */
void sl_store_node_on_change(sl_store_node_t *sn, sl_store_node_change_fn fn, void *ctx);

#define SL_STORE_NODE_MAX_LISTENERS 4 /* sl_store_node_listen */

/* Adds a listener for the life of the store node, beside the hook: told
 * of every changed key as the hook is, and of a RESET snapshot with key
 * and e NULL (anything may have changed: read the store again). For a
 * module that keeps its own view of some keys up to date (the studies)
 * instead of scanning the store. SL_EBUSY past the maximum. */
sl_err sl_store_node_listen(sl_store_node_t *sn, sl_store_node_change_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
