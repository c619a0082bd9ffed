/* peerctl's store commands (tools/peerctl_store.c), served by the peer's
 * store module (src/store/store_node.c):
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
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

int sl_cmd_put(int argc, char **argv);
int sl_cmd_get(int argc, char **argv);
int sl_cmd_del(int argc, char **argv);
int sl_cmd_keys(int argc, char **argv);
int sl_cmd_watch(int argc, char **argv);

/* Writes n bytes of p (a key, or a value or text a peer sent) to f for a
 * person's terminal: control characters (C0, DEL, and C1: U+0080..U+009F,
 * or such bytes outside UTF-8) and bytes that are not UTF-8 become \xNN,
 * a backslash \\, so that nothing read from the store moves the cursor,
 * retitles the window or hides a line (even from data written before
 * peers refused such keys). keep_lines keeps newlines and tabs. */
void sl_peerctl_print_safe(FILE *f, const char *p, size_t n, bool keep_lines);

/* The same for JSON text a peer sent (valid JSON stays valid): raw control
 * characters, DEL, C1 controls and bytes that are not UTF-8 become
 * \u00NN (a peer escapes C0 itself; an older one sent C1 raw). */
void sl_peerctl_print_json_safe(FILE *f, const char *p, size_t n);

#endif
