/* The client side of the control protocol, shared by every peerctl
 * command that talks to a running peer (members, stats, and later store
 * and study commands): the global options, connecting with or without the
 * cluster key, one request and its stream of replies, and error messages
 * that say what to do. */
#ifndef STARLING_PEERCTL_CLIENT_H
#define STARLING_PEERCTL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"
#include "starling/msg.h"
#include "starling/net.h"

#define SL_PEERCTL_TIMEOUT_MS 5000 /* default wait for each reply */

/* Options every client command shares (set by peerctl's global flags). */
typedef struct {
    char peer[SL_ADDR_MAX + 16]; /* "host:port" as the user wrote it (or the default) */
    const char *key_file;        /* --key FILE or $STARLING_KEY; NULL for an open cluster */
    int timeout_ms;              /* --timeout MS: wait for each reply */
} sl_peerctl_opts_t;

/* The options in force; main() fills them before dispatching. */
extern sl_peerctl_opts_t sl_peerctl_opts;

/* Sets defaults: --peer from $STARLING_PEER else 127.0.0.1:SL_NET_DEFAULT_PORT,
 * --key from $STARLING_KEY. */
void sl_peerctl_opts_defaults(sl_peerctl_opts_t *o);

/* Consumes a global flag at argv[*i] (--peer X, --peer=X, --key X,
 * --timeout MS). Returns 1 when consumed (advancing *i), 0 when argv[*i]
 * is not a global flag, -1 after printing an error for a bad value. */
int sl_peerctl_opts_take(sl_peerctl_opts_t *o, int argc, char **argv, int *i);

/* Called with each reply part's body, in order. Return non-zero to stop. */
typedef int (*sl_peerctl_part_fn)(void *ctx, const uint8_t *body, size_t len);

/* Sends `cmd` with `args` to the peer and feeds every reply part to `fn`.
 * On a transport problem prints a user-facing error and returns 1; on a
 * reply with an error status prints the peer's message and returns 1;
 * else 0. */
int sl_peerctl_call(const sl_peerctl_opts_t *o, const char *cmd, const char *const *args,
                    size_t arg_count, sl_peerctl_part_fn fn, void *ctx);

/* Like sl_peerctl_call with byte-string arguments (NUL bytes allowed).
 * When `status` is not NULL, an error reply is not printed: its status
 * goes to *status, its message to `fn`, and the call returns 1. */
int sl_peerctl_call_bytes(const sl_peerctl_opts_t *o, const char *cmd, const sl_bytes_t *args,
                          size_t arg_count, sl_peerctl_part_fn fn, void *ctx, sl_err *status);

/* Like sl_peerctl_call but gathers the whole reply into one NUL-terminated
 * buffer from sl_malloc (the caller frees it). */
int sl_peerctl_call_collect(const sl_peerctl_opts_t *o, const char *cmd,
                            const char *const *args, size_t arg_count, char **out, size_t *len);

#endif
