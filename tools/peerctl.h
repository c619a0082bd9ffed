/* peerctl's sub-commands: each lives in its own tools/peerctl_*.c and is
 * called with argv starting at the sub-command's name. They return the
 * process exit status (0 ok, 1 failed, 2 bad usage). Options shared by the
 * commands that talk to a peer (--peer, --key, --timeout) are in
 * sl_peerctl_opts (peerctl_client.h). */
#ifndef STARLING_PEERCTL_H
#define STARLING_PEERCTL_H

/* `peerctl train ...`: local training run (tools/peerctl_train.c). */
int sl_cmd_train(int argc, char **argv);

/* `peerctl keygen`: print a new cluster key file (tools/peerctl_keygen.c). */
int sl_cmd_keygen(int argc, char **argv);

/* `peerctl members [--json]` (tools/peerctl_members.c). */
int sl_cmd_members(int argc, char **argv);

/* `peerctl stats [--json]` (tools/peerctl_members.c). */
int sl_cmd_stats(int argc, char **argv);

#endif
