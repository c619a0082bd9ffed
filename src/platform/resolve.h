/* A host name's address, looked up with a deadline (src/platform/
 * resolve.c). Internal: net/addr_resolve.c's sl_addr_resolve
 * (include/starling/addr.h) is what the peer calls. */
#ifndef STARLING_PLATFORM_RESOLVE_H
#define STARLING_PLATFORM_RESOLVE_H

#include <stddef.h>

#include "starling/common.h"

/* Looks `host` (a name or a numeric address, no port) up with getaddrinfo
 * on a thread of its own and waits at most `timeout_ms` for it; the
 * answer, IPv4 preferred, goes to `out` as numeric text (an IPv6 address
 * in brackets). SL_EINVAL: an empty or over-long host, or `cap` too small;
 * SL_ENOTFOUND: it does not resolve; SL_ETIMEDOUT: no answer in time;
 * SL_ENOMEM, SL_EIO: no thread. For start-up only: it may block for
 * `timeout_ms`. */
sl_err sl_plat_resolve_host(const char *host, int timeout_ms, char *out, size_t cap);

#endif
