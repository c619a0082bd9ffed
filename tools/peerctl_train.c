/* `peerctl train`: placeholder until the training engine lands. */
#include <stdio.h>

#include "peerctl.h"

int sl_cmd_train(int argc, char **argv) {
    fprintf(stderr, "peerctl train: the training engine is not built yet\n");
    return 1;
}
