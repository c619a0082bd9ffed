/* peerctl's blob commands (tools/peerctl_blob.c), served by the peer's
 * blob service (src/blob/blob_node.c):
 *   peerctl blob put FILE            prints the blob's hash
 *   peerctl blob get HASH OUTFILE    writes OUTFILE atomically once verified
 *   peerctl blob ls [--json]         hash, size, holders */
#ifndef STARLING_PEERCTL_BLOB_H
#define STARLING_PEERCTL_BLOB_H

int sl_cmd_blob(int argc, char **argv);

#endif
