/* Peer addresses: which ones may be dialled from the event loop, and how an
 * operator's host name becomes one (docs/transport.md, "No DNS on the I/O
 * path").
 *
 * ZeroMQ resolves a host name inside its I/O thread, with a blocking
 * getaddrinfo: one name that does not resolve stalls every socket of the
 * process for as long as the resolver waits. So an address that arrives
 * in a message (a member's endpoint, a reply address) must be numeric,
 * and a name given by the operator is resolved once, at start, with a
 * deadline. */
#ifndef STARLING_ADDR_H
#define STARLING_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_ADDR_RESOLVE_MS 5000 /* how long start-up waits for one host name */

/* True when `p[0..len)` is "[tcp://]HOST:PORT" with HOST a numeric IPv4
 * address (four decimal numbers) or a numeric IPv6 address in brackets,
 * and PORT a decimal number 1..65535: an address dialling which needs no
 * DNS. Pure. */
bool sl_addr_is_numeric(const uint8_t *p, size_t len);

/* The host part of "[tcp://]HOST:PORT" (without IPv6 brackets) into `out`
 * (NUL-terminated). SL_EINVAL when `p` has no host and port or `cap` is
 * too small. Pure. */
sl_err sl_addr_host(const uint8_t *p, size_t len, char *out, size_t cap);

/* Turns "[tcp://]HOST:PORT" into "tcp://NUMERIC:PORT", resolving a host
 * name with getaddrinfo on a thread of its own and waiting at most
 * `timeout_ms` for it (IPv4 preferred). A numeric address is returned
 * normalised without any lookup. SL_EINVAL for a malformed address,
 * SL_ENOTFOUND when the name does not resolve, SL_ETIMEDOUT when the
 * resolver did not answer in time. For start-up only: it may block for
 * `timeout_ms`. */
sl_err sl_addr_resolve(const char *in, int timeout_ms, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
