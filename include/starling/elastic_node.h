/* Elastic jobs inside the peer daemon: the rendezvous core (elastic.h)
 * driven by a running sl_node over the replicated store, with the job's
 * trainer on this peer (docs/elastic.md, "The runtime").
 *
 *   tick      for each job in the store: its records into the core's view,
 *             this peer's membership and what its trainer holds in; the
 *             core's records written, worlds started and stopped; the
 *             trainer's progress, epochs, checkpoints (as blobs) and the
 *             final model written back
 *   commands  the study commands take a job id or name too: submit (a job
 *             file), status, logs, results, plot, fetch, cancel
 *
 * Attach after the store, blob and study nodes; destroy after
 * sl_node_destroy, before the blob node. */
#ifndef STARLING_ELASTIC_NODE_H
#define STARLING_ELASTIC_NODE_H

#include "starling/blob_node.h"
#include "starling/net.h"
#include "starling/peer.h"
#include "starling/store_node.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_elastic_node sl_elastic_node_t;

typedef struct {
    sl_blob_node_t *blobs;    /* checkpoints and final models (required) */
    uint16_t ring_port;       /* the all-reduce's TCP port (0: the gossip port + 1) */
    int threads;              /* BLAS threads of the trainer (0: its default) */
    const char *device;       /* training backend: "cpu", "cuda", "auto" (NULL: auto) */
    const sl_net_key_t *key;  /* the cluster key: the ring is CurveZMQ (NULL: open) */
    uint32_t settle_ms;       /* a leader waits this long for more volunteers (0: 300) */
    uint32_t ack_timeout_ms;  /* a peer gives up on a world not started by then (0: 15000) */
} sl_elastic_node_config_t;

sl_err sl_elastic_node_attach(sl_node_t *node, sl_store_node_t *store,
                              const sl_elastic_node_config_t *cfg, sl_elastic_node_t **out);
void sl_elastic_node_destroy(sl_elastic_node_t **en);

#ifdef __cplusplus
}
#endif
#endif
