/* Plain TCP sockets, nonblocking (platform/tcp.h): what the elastic ring's
 * own transport needs, and no more. The caller polls; nothing here waits
 * except sl_plat_tcp_poll and a name's lookup in sl_plat_tcp_addr. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/why.h"
#include "platform/tcp.h"

sl_err sl_plat_tcp_addr(const char *endpoint, bool passive, sl_plat_tcp_addr_t *out) {
    memset(out, 0, sizeof *out);
    if (!endpoint || strncmp(endpoint, "tcp://", 6) != 0)
        return SL_EINVAL;
    const char *host = endpoint + 6, *colon = strrchr(host, ':');
    if (!colon || colon == host)
        return SL_EINVAL;
    char h[256], *end = NULL;
    size_t hlen = (size_t)(colon - host);
    if (host[0] == '[') { /* [IPv6]:port */
        if (hlen < 3 || host[hlen - 1] != ']')
            return SL_EINVAL;
        host++;
        hlen -= 2;
    }
    if (hlen >= sizeof h)
        return SL_EINVAL;
    memcpy(h, host, hlen);
    h[hlen] = '\0';
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (errno || !colon[1] || *end || port == 0 || port > 65535)
        return SL_EINVAL;
    char ps[8];
    snprintf(ps, sizeof ps, "%lu", port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
    bool any = passive && strcmp(h, "*") == 0;
    if (any)
        hints.ai_family = AF_INET;
    if (getaddrinfo(any ? NULL : h, ps, &hints, &res) != 0 || !res)
        return SL_ENOTFOUND;
    /* IPv4 first, as the peer's resolver (platform/resolve.c) */
    const struct addrinfo *pick = NULL;
    for (const struct addrinfo *a = res; a && !pick; a = a->ai_next)
        if (a->ai_family == AF_INET)
            pick = a;
    if (!pick)
        pick = res;
    sl_err err = SL_ENOTFOUND;
    if (pick->ai_addrlen <= sizeof out->raw) {
        memcpy(out->raw, pick->ai_addr, pick->ai_addrlen);
        out->len = (uint32_t)pick->ai_addrlen;
        err = SL_OK;
    }
    freeaddrinfo(res);
    return err;
}

/* Nonblocking, close-on-exec, no Nagle (a message's header and payload
 * leave at once), and the buffers asked for. */
static sl_err tune(int fd, int buf_bytes, bool stream) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
        return SL_EIO;
    int one = 1;
    if (stream)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (buf_bytes > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf_bytes, sizeof buf_bytes);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf_bytes, sizeof buf_bytes);
    }
    return SL_OK;
}

sl_err sl_plat_tcp_listen(const sl_plat_tcp_addr_t *a, int buf_bytes, int *fd, char *why,
                          size_t why_len) {
    *fd = -1;
    const struct sockaddr *sa = (const struct sockaddr *)(const void *)a->raw;
    int s = socket(sa->sa_family, SOCK_STREAM, 0);
    if (s < 0)
        return sl_why(why, why_len, SL_EIO, "socket: %s", strerror(errno));
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    /* set before listen, so accepted connections inherit them (and the
     * window scale is agreed for them in the handshake) */
    if (tune(s, buf_bytes, false) != SL_OK || bind(s, sa, a->len) != 0 || listen(s, 16) != 0) {
        int e = errno;
        close(s);
        return sl_why(why, why_len, SL_EIO, "%s", strerror(e));
    }
    *fd = s;
    return SL_OK;
}

sl_err sl_plat_tcp_connect(const sl_plat_tcp_addr_t *a, int buf_bytes, int *fd) {
    *fd = -1;
    const struct sockaddr *sa = (const struct sockaddr *)(const void *)a->raw;
    int s = socket(sa->sa_family, SOCK_STREAM, 0);
    if (s < 0)
        return SL_EIO;
    if (tune(s, buf_bytes, true) != SL_OK) {
        close(s);
        return SL_EIO;
    }
    if (connect(s, sa, a->len) != 0 && errno != EINPROGRESS && errno != EINTR) {
        close(s); /* refused at once (loopback): the caller retries as for a late refusal */
        return SL_ECLOSED;
    }
    *fd = s;
    return SL_OK;
}

sl_err sl_plat_tcp_connected(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    if (poll(&p, 1, 0) < 0)
        return SL_EAGAIN;
    if (!(p.revents & (POLLOUT | POLLERR | POLLHUP)))
        return SL_EAGAIN;
    int e = 0;
    socklen_t el = sizeof e;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0 || e != 0 || (p.revents & POLLHUP))
        return SL_ECLOSED;
    return SL_OK;
}

sl_err sl_plat_tcp_accept(int lfd, int buf_bytes, int *fd) {
    *fd = -1;
    int s = accept(lfd, NULL, NULL);
    if (s < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
            return SL_EAGAIN;
        return SL_EIO;
    }
    (void)buf_bytes; /* inherited from the listener */
    if (tune(s, 0, true) != SL_OK) {
        close(s);
        return SL_EAGAIN;
    }
    *fd = s;
    return SL_OK;
}

sl_err sl_plat_tcp_send2(int fd, const void *a, size_t alen, const void *b, size_t blen,
                         size_t *sent) {
    *sent = 0;
    struct iovec iov[2];
    int n = 0;
    if (alen)
        iov[n++] = (struct iovec){.iov_base = (void *)a, .iov_len = alen};
    if (blen)
        iov[n++] = (struct iovec){.iov_base = (void *)b, .iov_len = blen};
    if (n == 0)
        return SL_OK;
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t k = sendmsg(fd, &m, MSG_NOSIGNAL);
    if (k >= 0) {
        *sent = (size_t)k;
        return SL_OK;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return SL_OK;
    return SL_ECLOSED;
}

sl_err sl_plat_tcp_recv(int fd, void *p, size_t len, size_t *got) {
    *got = 0;
    ssize_t k = recv(fd, p, len, 0);
    if (k > 0) {
        *got = (size_t)k;
        return SL_OK;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return SL_EAGAIN;
    return SL_ECLOSED; /* 0: EOF; else a reset or another failure */
}

sl_err sl_plat_tcp_poll(sl_plat_tcp_poll_t *p, size_t n, int timeout_ms) {
    struct pollfd fds[8];
    if (n > sizeof fds / sizeof fds[0])
        return SL_EINVAL;
    for (size_t i = 0; i < n; i++) {
        fds[i] = (struct pollfd){.fd = p[i].fd,
                                 .events = (short)((p[i].events & SL_PLAT_TCP_IN ? POLLIN : 0) |
                                                   (p[i].events & SL_PLAT_TCP_OUT ? POLLOUT : 0))};
        p[i].revents = 0;
    }
    int k = poll(fds, (nfds_t)n, timeout_ms);
    if (k < 0)
        return errno == EINTR ? SL_OK : SL_EIO;
    for (size_t i = 0; i < n; i++)
        p[i].revents = (fds[i].revents & POLLIN ? SL_PLAT_TCP_IN : 0u) |
                       (fds[i].revents & POLLOUT ? SL_PLAT_TCP_OUT : 0u) |
                       (fds[i].revents & (POLLERR | POLLHUP | POLLNVAL) ? SL_PLAT_TCP_ERR : 0u);
    return SL_OK;
}

void sl_plat_tcp_close(int *fd) {
    if (fd && *fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}
