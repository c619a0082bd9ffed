/* peerctl's sub-commands: each lives in its own tools/peerctl_*.c and is
 * called with argv starting at the sub-command's name. They return the
 * process exit status (0 ok, 1 failed, 2 bad usage). */
#ifndef STARLING_PEERCTL_H
#define STARLING_PEERCTL_H

/* `peerctl train ...`: local training run (tools/peerctl_train.c). */
int sl_cmd_train(int argc, char **argv);

#endif
