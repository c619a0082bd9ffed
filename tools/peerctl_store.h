/* peerctl's store commands (tools/peerctl_store.c), served by the peer's
 * store module (src/store_node.c):
 *   peerctl put KEY VALUE | put KEY --file FILE
 *   peerctl get KEY [--json]
 *   peerctl del KEY
 *   peerctl keys [PREFIX] [--json]
 *   peerctl watch [PREFIX | STUDY] [--json]   (tools/peerctl_watch.c)
 * To enable them, tools/peerctl.c's command table needs one line each
 * ({"put", sl_cmd_put, ...}) and peers/peer.c must attach the store
 * (sl_store_node_attach) after sl_node_new. */
#ifndef STARLING_PEERCTL_STORE_H
#define STARLING_PEERCTL_STORE_H

int sl_cmd_put(int argc, char **argv);
int sl_cmd_get(int argc, char **argv);
int sl_cmd_del(int argc, char **argv);
int sl_cmd_keys(int argc, char **argv);
int sl_cmd_watch(int argc, char **argv);

#endif
