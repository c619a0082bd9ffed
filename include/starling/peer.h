/* The peer daemon's event loop: one thread that polls the transport,
 * decodes what arrives, feeds the protocol cores, sends what they output,
 * runs their timers at their next deadline, and answers control requests
 * from clients (peerctl). peers/peer.c is its command line.
 *
 * Extension points for the modules built on membership (the store, the
 * studies):
 *   - control commands are a table: sl_node_ctl_register("put", fn, ctx);
 *   - message types are routed by range: membership is 1..15, control is
 *     64..65, and sl_node_route_register(lo, hi, fn, ctx) claims a range
 *     inside 16..63 for a module that decodes its own bodies;
 *   - sl_node_tick_register(fn, ctx) runs a module's timers;
 *   - sl_node_member_listen(fn, ctx) tells a module of every membership
 *     event (join, state change, update, reap);
 *   - sl_node_stats_register adds a module's counters to `stats`;
 *   - sl_node_send sends a raw message to a member's address. */
#ifndef STARLING_PEER_H
#define STARLING_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"
#include "starling/msg.h"
#include "starling/net.h"
#include "starling/swim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_NODE_MAX_SEEDS 64    /* --join addresses and peers-file lines */
#define SL_NODE_MAX_CTL 64      /* registered control commands */
#define SL_NODE_MAX_ROUTES 16   /* registered message-type ranges */
#define SL_NODE_MAX_TICKS 16    /* registered timer callbacks */
#define SL_NODE_MAX_LISTENERS 16 /* registered membership-event listeners */

typedef struct sl_node sl_node_t;

typedef struct {
    const char *name;             /* member name, 1..SL_NAME_MAX bytes */
    const char *listen;           /* where the ROUTER binds ("tcp://0.0.0.0:7600") */
    const char *advertise;        /* where others reach us; NULL: the listen address */
    const char *data_dir;         /* state directory (created); NULL keeps nothing */
    const sl_net_key_t *key;      /* cluster key, or NULL for an open cluster */
    const char *const *seeds;     /* addresses to join through */
    size_t seed_count;            /* 0..SL_NODE_MAX_SEEDS */
    const uint8_t *meta;          /* encoded metadata map (sl_meta_validate) */
    size_t meta_len;              /* bytes of meta */
    sl_swim_config_t swim;        /* membership timers and limits */
    int leave_wait_ms;            /* after announcing a leave, keep serving this long */
    const char *control;          /* control endpoint for clients: "ipc://PATH", "HOST:PORT"
                                     (sl_net_control_listen) or "none"; NULL means
                                     ipc://DATA_DIR/control.sock, none without data_dir.
                                     The gossip ROUTER never serves control requests */
    bool allow_commands;          /* open cluster: run command trainers anyway */
    bool test_faults;             /* answer test-only fault commands (store-fault) */
} sl_node_config_t;

/* Binds, loads and bumps the incarnation under data_dir, and starts
 * joining. SL_EBUSY when the listen address is in use. */
sl_err sl_node_new(const sl_node_config_t *cfg, sl_node_t **out);

/* Closes everything. Idempotent; nulls *node. */
void sl_node_destroy(sl_node_t **node);

/* Runs until SIGTERM/SIGINT (sl_plat_stop_requested), then leaves the
 * cluster gracefully: announce, keep serving for leave_wait_ms so the
 * announcement goes out, return SL_OK. */
sl_err sl_node_run(sl_node_t *node);

/* One turn of the loop: waits at most `max_wait_ms` for input, handles
 * it, runs due timers and sends what the cores output. */
sl_err sl_node_step(sl_node_t *node, int max_wait_ms);

/* Stops the loop with an error, for a module that finds one of its
 * invariants broken (the study view check): sl_node_step returns `err`
 * (the first one given) from then on, so sl_node_run logs PEER-LOOP and
 * returns it without a graceful leave, and the peer exits non-zero. */
void sl_node_fail(sl_node_t *node, sl_err err);

/* Announces a graceful leave and serves for `wait_ms` more. */
sl_err sl_node_leave(sl_node_t *node, int wait_ms);

/* The membership core (read-only use by other modules). */
const sl_swim_t *sl_node_swim(const sl_node_t *node);

/* The transport (for counters). */
const sl_net_t *sl_node_net(const sl_node_t *node);

/* This peer's advertised address ("tcp://host:port"). */
const char *sl_node_addr(const sl_node_t *node);

/* This peer's member name. */
const char *sl_node_name(const sl_node_t *node);

/* The state directory (--data), or NULL when the node keeps none. Modules
 * keep their files under it (the store's log, blobs). */
const char *sl_node_data_dir(const sl_node_t *node);

/* The control endpoint bound ("ipc:///DATA/control.sock"), "" when none. */
const char *sl_node_control_endpoint(const sl_node_t *node);

/* Whether this peer may run command trainers: in a keyed cluster (key
 * holders are trusted), or in an open one started with allow_commands
 * (--allow-commands). docs/security.md. */
bool sl_node_commands_allowed(const sl_node_t *node);

/* Whether test-only fault commands are enabled (--test-faults). */
bool sl_node_test_faults(const sl_node_t *node);

/* ---- Control commands ---- */

/* A request being answered. Valid only during the handler call. */
typedef struct sl_ctl_call sl_ctl_call_t;

/* Answers `req`. Call sl_ctl_reply once (or several times with more=true
 * then once with more=false). Returning an error without replying sends
 * that error with a generic message. */
typedef sl_err (*sl_ctl_fn)(void *ctx, sl_node_t *node, const sl_ctl_req_t *req,
                            sl_ctl_call_t *call);

/* Adds a command (name up to 32 bytes). SL_EEXIST if taken, SL_EBUSY when
 * the table is full. `members` and `stats` are built in. */
sl_err sl_node_ctl_register(sl_node_t *node, const char *cmd, sl_ctl_fn fn, void *ctx);
/* Takes over command `cmd`, registered before: `fn` answers it from now
 * on, and *prev_fn / *prev_ctx get the handler it replaces, to pass on
 * the requests it does not own (jobs and studies share `status`, `logs`...:
 * the elastic node answers for a job and passes a study on).
 * SL_ENOTFOUND if no such command is registered. */
sl_err sl_node_ctl_chain(sl_node_t *node, const char *cmd, sl_ctl_fn fn, void *ctx,
                         sl_ctl_fn *prev_fn, void **prev_ctx);

/* Sends one reply part: `status` SL_OK with a JSON (or byte) body, or an
 * error with a message for people as the body. Parts go out without
 * waiting for the client: up to 1024 may queue, so stream few large parts
 * (up to about 4 MiB each) rather than many small ones. SL_EAGAIN when the
 * part was dropped (client gone or too far behind): stop sending. */
sl_err sl_ctl_reply(sl_ctl_call_t *call, sl_err status, const void *body, size_t len, bool more);
/* One whole reply, its body printf-style text (at most 1 KiB: a message
 * for people with an error status, or a small JSON body). */
sl_err sl_ctl_reply_text(sl_ctl_call_t *call, sl_err status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Keeps a request open after its handler returns, for a command that
 * streams replies as things happen (the store's watch-keys). Call it in
 * the handler, before any part with more=false; it returns a copy that
 * stays valid until sl_ctl_call_free (NULL when out of memory, or when
 * the call was already answered or deferred), and the handler's return
 * then sends nothing. Reply through the copy with sl_ctl_reply (more=true
 * for each part); SL_EAGAIN means the client is gone or too far behind:
 * stop sending. Free the copy when done, before sl_node_destroy. */
sl_ctl_call_t *sl_ctl_defer(sl_ctl_call_t *call);
void sl_ctl_call_free(sl_ctl_call_t **call);

/* ---- Other message types ---- */

/* A message of a claimed type: `header` is SL_WIRE_HEADER_LEN bytes,
 * checked for magic and version; the body is undecoded. */
typedef void (*sl_node_msg_fn)(void *ctx, sl_node_t *node, uint8_t type,
                               const uint8_t *body, size_t body_len, uint64_t now_ns);

/* Claims types lo..hi (within 16..63). SL_EEXIST on overlap. */
sl_err sl_node_route_register(sl_node_t *node, uint8_t lo, uint8_t hi, sl_node_msg_fn fn,
                              void *ctx);

/* Called every turn of the loop; returns the time (monotonic ns) it next
 * wants to run, or 0 for no particular time. */
typedef uint64_t (*sl_node_tick_fn)(void *ctx, sl_node_t *node, uint64_t now_ns);

sl_err sl_node_tick_register(sl_node_t *node, sl_node_tick_fn fn, void *ctx);

/* Runs a registered tick at the end of this loop turn (or the next turn,
 * without waiting), whatever time it asked for: for work a message
 * handler started that must not wait for the tick's own period (the
 * store's group commit). */
void sl_node_tick_soon(sl_node_t *node, sl_node_tick_fn fn, void *ctx);

/* Called for each membership event, after the node has logged it. The
 * event's views are valid only during the call. */
typedef void (*sl_node_member_fn)(void *ctx, sl_node_t *node, const sl_swim_event_t *ev);

sl_err sl_node_member_listen(sl_node_t *node, sl_node_member_fn fn, void *ctx);

/* Called when a watched descriptor is readable; it reads what made it so. */
typedef void (*sl_node_fd_fn)(void *ctx, sl_node_t *node);

/* Wakes the loop when `fd` is readable and then calls fn: for a module
 * whose threads hand it work (they write a byte to a pipe), so that the
 * loop needs no polling to notice (sl_net_watch_fd). SL_EBUSY past
 * SL_NET_MAX_WATCHES. */
sl_err sl_node_watch_fd(sl_node_t *node, int fd, sl_node_fd_fn fn, void *ctx);

/* One named counter a module adds to `stats`. */
typedef struct {
    const char *name; /* counter name (a static string) */
    uint64_t value;   /* its value */
} sl_node_counter_t;

#define SL_NODE_MAX_COUNTERS 32 /* counters one module reports */

/* Fills up to `cap` counters and returns how many. */
typedef size_t (*sl_node_stats_fn)(void *ctx, sl_node_counter_t *out, size_t cap);

/* Adds a module's counters to `stats` as the object `group` (up to 32
 * bytes). At most SL_NODE_MAX_LISTENERS modules. */
sl_err sl_node_stats_register(sl_node_t *node, const char *group, sl_node_stats_fn fn,
                              void *ctx);

/* Called once on SIGTERM/SIGINT inside sl_node_run, before the leave is
 * announced: a module stops its work and writes what must survive (the
 * studies checkpoint and release their claims). The hook may call
 * sl_node_step to keep the node serving while it waits. */
typedef void (*sl_node_stop_fn)(void *ctx, sl_node_t *node);

sl_err sl_node_stop_listen(sl_node_t *node, sl_node_stop_fn fn, void *ctx);

/* Sends a message of any type to the peer at `addr` (never blocks;
 * SL_EAGAIN when dropped). */
sl_err sl_node_send(sl_node_t *node, const char *addr, uint8_t type, const uint8_t *body,
                    size_t body_len);

/* Counts one refused piece of input that a module (store, blob, study)
 * checked and dropped after the codec accepted it: a forged claim, a
 * request for another address. It is part of `bad_input` in `stats`,
 * and `bad_input_by_module.<module>` says where. `module` is a
 * static string. */
void sl_node_bad_input(sl_node_t *node, const char *module);

#ifdef __cplusplus
}
#endif
#endif
