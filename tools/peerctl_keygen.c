/* `peerctl keygen`: prints a new cluster key file to stdout. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "peerctl.h"
#include "starling/net.h"

int sl_cmd_keygen(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: peerctl keygen > cluster.key\n\n"
                   "Prints a new cluster key. Give the same file to every peer (peer --key FILE)\n"
                   "and every client (peerctl --key FILE); keep it secret (chmod 600).\n");
            return 0;
        }
        fprintf(stderr, "peerctl keygen: unexpected argument '%s'; usage: peerctl keygen > cluster.key\n",
                argv[i]);
        return 2;
    }
    sl_net_key_t key;
    char text[512];
    if (sl_net_key_generate(&key) != SL_OK || sl_net_key_format(&key, text, sizeof text) != SL_OK) {
        fprintf(stderr, "peerctl keygen: this libzmq has no CURVE support; install libzmq with libsodium\n");
        return 1;
    }
    if (isatty(STDOUT_FILENO))
        fprintf(stderr, "peerctl keygen: save this, e.g. `peerctl keygen > cluster.key && chmod 600 cluster.key`\n");
    fputs(text, stdout);
    memset(&key, 0, sizeof key);
    memset(text, 0, sizeof text);
    return fflush(stdout) == 0 ? 0 : 1;
}
