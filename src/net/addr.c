/* Numeric peer addresses (include/starling/addr.h): the check every
 * address from the network passes before anything dials it. Pure: the
 * resolver for operator-given names is in platform/resolve.c. */
#include <arpa/inet.h>
#include <string.h>

#include "starling/addr.h"

/* Splits "[tcp://]HOST:PORT" into host (brackets kept) and port text. */
static bool split(const uint8_t *p, size_t len, const char **host, size_t *host_len,
                  const char **port, size_t *port_len) {
    const char *s = (const char *)p;
    if (!p || len == 0)
        return false;
    if (len >= 6 && !memcmp(s, "tcp://", 6)) {
        s += 6;
        len -= 6;
    }
    size_t colon = len;
    while (colon > 0 && s[colon - 1] != ':')
        colon--;
    if (colon == 0)
        return false;
    *host = s;
    *host_len = colon - 1;
    *port = s + colon;
    *port_len = len - colon;
    return *host_len > 0 && *port_len > 0;
}

static bool port_ok(const char *p, size_t len) {
    if (len > 5 || p[0] == '0')
        return false;
    unsigned v = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    return v >= 1 && v <= 65535;
}

bool sl_addr_is_numeric(const uint8_t *p, size_t len) {
    const char *host, *port;
    size_t hl, pl;
    if (!split(p, len, &host, &hl, &port, &pl) || !port_ok(port, pl))
        return false;
    char buf[INET6_ADDRSTRLEN + 1];
    unsigned char bin[16];
    if (host[0] == '[') {
        if (hl < 3 || host[hl - 1] != ']' || hl - 2 >= sizeof buf)
            return false;
        memcpy(buf, host + 1, hl - 2);
        buf[hl - 2] = 0;
        return inet_pton(AF_INET6, buf, bin) == 1;
    }
    if (hl >= sizeof buf)
        return false;
    memcpy(buf, host, hl);
    buf[hl] = 0;
    /* inet_pton takes only the dotted quad of four decimal numbers: no
     * "127.1", no octal, no hex, nothing a resolver would look up */
    return inet_pton(AF_INET, buf, bin) == 1;
}

sl_err sl_addr_host(const uint8_t *p, size_t len, char *out, size_t cap) {
    const char *host, *port;
    size_t hl, pl;
    if (!split(p, len, &host, &hl, &port, &pl))
        return SL_EINVAL;
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        host++;
        hl -= 2;
    }
    if (hl + 1 > cap)
        return SL_EINVAL;
    memcpy(out, host, hl);
    out[hl] = 0;
    return SL_OK;
}
