/* An operator's "[tcp://]HOST:PORT" made numeric, once, at start
 * (sl_addr_resolve, include/starling/addr.h): addr.c's parser splits it,
 * and the platform layer's resolver (platform/resolve.c) looks the host
 * name up with a deadline. */
#include <stdio.h>
#include <string.h>

#include "platform/resolve.h"
#include "starling/addr.h"

sl_err sl_addr_resolve(const char *in, int timeout_ms, char *out, size_t cap) {
    if (!in)
        return SL_EINVAL;
    size_t len = strlen(in);
    const char *port = strrchr(in, ':');
    if (!port || !port[1])
        return SL_EINVAL;
    if (sl_addr_is_numeric((const uint8_t *)in, len)) {
        const char *s = !strncmp(in, "tcp://", 6) ? in + 6 : in;
        int n = snprintf(out, cap, "tcp://%s", s);
        return n < 0 || (size_t)n >= cap ? SL_EINVAL : SL_OK;
    }
    char host[256];
    if (sl_addr_host((const uint8_t *)in, len, host, sizeof host) != SL_OK || !host[0])
        return SL_EINVAL;
    char numeric[64]; /* INET6_ADDRSTRLEN and the brackets */
    sl_err err = sl_plat_resolve_host(host, timeout_ms, numeric, sizeof numeric);
    if (err != SL_OK)
        return err;
    int n = snprintf(out, cap, "tcp://%s%s", numeric, port);
    return n < 0 || (size_t)n >= cap ? SL_EINVAL : SL_OK;
}
