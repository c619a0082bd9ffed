/* peerctl: the command-line client. This file holds main() and the
 * dispatch table; each sub-command lives in tools/peerctl_*.c. */
#include <stdio.h>
#include <string.h>

#include "peerctl.h"
#include "starling/common.h"

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: peerctl COMMAND [ARGS]\n\ncommands:\n  train   train a model locally\n");
        return argc < 2 ? 2 : 0;
    }
    if (sl_init() != SL_OK) {
        fprintf(stderr, "peerctl: cannot start the crypto library\n");
        return 1;
    }
    if (!strcmp(argv[1], "train"))
        return sl_cmd_train(argc - 1, argv + 1);
    fprintf(stderr, "peerctl: unknown command '%s'; see peerctl --help\n", argv[1]);
    return 2;
}
