/* Plain TCP sockets, nonblocking, for a transport that does its socket
 * I/O on the caller's thread (src/platform/tcp.c). Internal: the elastic
 * ring's own transport (src/elastic/ring_tcp.c) is its user; the peer's
 * messages go over ZeroMQ (src/net/).
 *
 * Every socket is nonblocking, close-on-exec, TCP_NODELAY, and sends with
 * MSG_NOSIGNAL (a closed peer is SL_ECLOSED, never SIGPIPE). A socket is
 * an int descriptor; -1 is none. */
#ifndef STARLING_PLATFORM_TCP_H
#define STARLING_PLATFORM_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"

/* An address to bind or dial, resolved once (sl_plat_tcp_addr). */
typedef struct {
    uint8_t raw[128]; /* a struct sockaddr_storage's bytes */
    uint32_t len;     /* of raw in use, 0: none */
} sl_plat_tcp_addr_t;

/* What poll watches and saw (sl_plat_tcp_poll). */
#define SL_PLAT_TCP_IN 1u  /* readable: data, a connection to accept, or EOF */
#define SL_PLAT_TCP_OUT 2u /* writable, or a connect finished */
#define SL_PLAT_TCP_ERR 4u /* (seen only) an error or hang-up on the socket */

typedef struct {
    int fd;           /* the socket, -1: skipped */
    unsigned events;  /* SL_PLAT_TCP_IN | OUT to watch */
    unsigned revents; /* what was seen (IN, OUT, ERR) */
} sl_plat_tcp_poll_t;

/* Parses "tcp://HOST:PORT" (HOST a name, an IPv4 address, "[IPv6]", or
 * "*" for any address when `passive`) and resolves it (getaddrinfo, IPv4
 * preferred). SL_EINVAL: not of that form, or a port outside 1-65535;
 * SL_ENOTFOUND: the host does not resolve. May block on a name's lookup:
 * for opening a link, not for a loop. */
sl_err sl_plat_tcp_addr(const char *endpoint, bool passive, sl_plat_tcp_addr_t *out);

/* A listening socket on `a` (SO_REUSEADDR: a port a closed link of an
 * earlier round left in TIME_WAIT binds at once). `buf_bytes` > 0 sets
 * SO_SNDBUF/SO_RCVBUF of the connections it accepts (0: the kernel's,
 * autotuned). SL_EIO with errno's text in `why` when the bind fails (the
 * port is taken). */
sl_err sl_plat_tcp_listen(const sl_plat_tcp_addr_t *a, int buf_bytes, int *fd, char *why,
                          size_t why_len);

/* Starts a connection to `a` (nonblocking: it completes later; poll for
 * OUT, then sl_plat_tcp_connected). SL_ECLOSED: refused at once. */
sl_err sl_plat_tcp_connect(const sl_plat_tcp_addr_t *a, int buf_bytes, int *fd);

/* Whether a started connection is up: SL_OK, SL_EAGAIN still under way,
 * SL_ECLOSED refused or failed. */
sl_err sl_plat_tcp_connected(int fd);

/* Takes one waiting connection: SL_OK (*fd set), SL_EAGAIN none waits,
 * SL_EIO the listener failed. */
sl_err sl_plat_tcp_accept(int lfd, int buf_bytes, int *fd);

/* Sends from two pieces, `a` then `b` (either may be empty), in one call:
 * *sent bytes went (maybe fewer than alen + blen, maybe 0). SL_OK, or
 * SL_ECLOSED when the connection is gone (reset, closed, EPIPE). */
sl_err sl_plat_tcp_send2(int fd, const void *a, size_t alen, const void *b, size_t blen,
                         size_t *sent);

/* Receives up to `len` bytes into `p`: SL_OK with *got > 0, SL_EAGAIN
 * when nothing waits, SL_ECLOSED on EOF or a reset. */
sl_err sl_plat_tcp_recv(int fd, void *p, size_t len, size_t *got);

/* Waits until one of `n` sockets is ready or `timeout_ms` passed (0: a
 * look). SL_OK (revents filled, maybe all 0 on a timeout or a signal),
 * SL_EIO when poll itself fails. */
sl_err sl_plat_tcp_poll(sl_plat_tcp_poll_t *p, size_t n, int timeout_ms);

/* Closes *fd (at once, unsent data dropped: SO_LINGER 0 is not used, a
 * plain close) and sets it to -1; -1 is fine. */
void sl_plat_tcp_close(int *fd);

#endif
