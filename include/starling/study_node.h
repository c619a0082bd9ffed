/* Studies inside the peer daemon: the study cores (study.h, round.h)
 * driven by a running sl_node (peer.h) over the replicated store
 * (store_node.h). docs/studies.md, "The runtime", describes it.
 *
 *   tick      for each study in the store: build the view, compute the
 *             round leader from the alive members; the leader writes the
 *             scheduler's decisions; every peer claims trials by
 *             rendezvous rank with its free slots, renews its leases,
 *             starts workers (threads: the builtin trainer, or a command's
 *             child process), and writes what they report (per-epoch
 *             metrics, checkpoints, results) as it drains their queues
 *   commands  submit SPEC_JSON        -> {"study":ID,"name":..}
 *             status STUDY            -> JSON table of trials
 *             results STUDY           -> leaderboard, models.json, pareto.json
 *             logs STUDY TRIAL        -> the trial's log text
 *             fetch STUDY TRIAL       -> trained weights (.npz bytes; a
 *                                        command trial: its checkpoint file)
 *             plot STUDY              -> {"curves.svg":..,"pareto.svg":..}
 *             cancel STUDY            -> stops the study
 *   stop      on SIGTERM (sl_node_stop_listen): workers stop, their
 *             latest checkpoints are replicated, claims released.
 *
 * STUDY is a study id or a study name. Attach after the store and blob
 * nodes; destroy after sl_node_destroy, before the blob node. */
#ifndef STARLING_STUDY_NODE_H
#define STARLING_STUDY_NODE_H

#include "starling/blob_node.h"
#include "starling/peer.h"
#include "starling/store_node.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_study_node sl_study_node_t;

typedef struct {
    int slots;          /* trials this peer runs at once (0: each study's concurrency;
                           -1: none, a peer that only coordinates); written to
                           the store as peer/NAME/slots for the others' ranking */
    int threads;        /* BLAS threads per builtin trial (0: the spec's) */
    uint32_t tick_ms;   /* period of the study loop (0: 250) */
    sl_blob_node_t *blobs; /* where checkpoints go (required) */
    const char *trial_user; /* command trials run as this user (peer --trial-user;
                               NULL: as the peer's); attach refuses a user that does
                               not exist, root, or a peer not running as root */
} sl_study_node_config_t;

sl_err sl_study_node_attach(sl_node_t *node, sl_store_node_t *store,
                            const sl_study_node_config_t *cfg, sl_study_node_t **out);
void sl_study_node_destroy(sl_study_node_t **sn);

#ifdef __cplusplus
}
#endif
#endif
