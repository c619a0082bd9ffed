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
    char peer[SL_NET_CONTROL_MAX]; /* the control endpoint: "tcp://host:port" or "ipc://path" */
    const char *key_file;        /* --key FILE or $STARLING_KEY; NULL for an open cluster */
    int timeout_ms;              /* --timeout MS: wait for each reply */
} sl_peerctl_opts_t;

/* The options in force; main() fills them before dispatching. */
extern sl_peerctl_opts_t sl_peerctl_opts;

/* Sets defaults: --peer from $STARLING_PEER, else the control socket of a
 * peer started with no options (ipc://$HOME/.local/share/starling/
 * HOSTNAME-7600/control.sock); --key from $STARLING_KEY. */
void sl_peerctl_opts_defaults(sl_peerctl_opts_t *o);

/* Turns what --peer takes into a control endpoint in `out`: "ipc://PATH"
 * as is; "HOST:PORT" or "tcp://HOST:PORT" (a ':', no '/', not an existing
 * file) normalised to TCP; anything else is a peer's data directory DIR,
 * meaning ipc://DIR/control.sock. 0 on success, -1 when it is none. */
int sl_peerctl_resolve(const char *v, char *out, size_t cap);

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

/* ---- One connection for many requests ----
 * For commands that make many requests (blob put/get send a chunk each):
 * one connection for all of them, and several requests in flight at once,
 * told apart by id. */

typedef struct sl_peerctl_conn sl_peerctl_conn_t;

/* One reply part. `body` points into raw_body; free with
 * sl_peerctl_part_fini. */
typedef struct {
    uint32_t id;            /* the request it answers */
    sl_err status;          /* SL_OK or the peer's error */
    bool more;              /* more parts of this reply follow */
    const uint8_t *body;    /* the part's bytes */
    size_t len;             /* bytes of body */
    uint8_t *raw_header;    /* the received frames */
    size_t raw_header_len;
    uint8_t *raw_body;
    size_t raw_body_len;
} sl_peerctl_part_t;

/* Opens a connection to o->peer (loading the key file). NULL, after
 * printing what to do, when that fails. */
sl_peerctl_conn_t *sl_peerctl_connect(const sl_peerctl_opts_t *o);
void sl_peerctl_close(sl_peerctl_conn_t **c);

/* Sends one request; its id goes to *id. 0, or non-zero after printing
 * an error. */
int sl_peerctl_send(sl_peerctl_conn_t *c, const char *cmd, const sl_bytes_t *args,
                    size_t arg_count, uint32_t *id);

/* Waits (--timeout) for the next reply part of any request. 0, or 1 after
 * printing an error (nothing came, or garbage did). */
int sl_peerctl_recv(sl_peerctl_conn_t *c, sl_peerctl_part_t *part);
void sl_peerctl_part_fini(sl_peerctl_part_t *part);

/* sl_peerctl_call_bytes on an open connection. */
int sl_peerctl_conn_call(sl_peerctl_conn_t *c, const char *cmd, const sl_bytes_t *args,
                         size_t arg_count, sl_peerctl_part_fn fn, void *ctx, sl_err *status);

/* Like sl_peerctl_call but gathers the whole reply into one NUL-terminated
 * buffer from sl_malloc (the caller frees it). */
int sl_peerctl_call_collect(const sl_peerctl_opts_t *o, const char *cmd,
                            const char *const *args, size_t arg_count, char **out, size_t *len);

#endif
