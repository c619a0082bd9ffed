/* Resolving an operator's host name once, at start, with a deadline
 * (sl_plat_resolve_host, platform/resolve.h; net/addr_resolve.c's
 * sl_addr_resolve parses HOST:PORT and calls it). getaddrinfo has no
 * timeout of its own: it runs on a detached thread, and the caller waits
 * for it at most timeout_ms; a resolver that answers later frees its own
 * result. */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <arpa/inet.h>

#include "platform/resolve.h"

/* One lookup, shared by the waiting caller and the resolver thread; the
 * last of the two to let go frees it. */
typedef struct {
    pthread_mutex_t mu;      /* guards everything below */
    pthread_cond_t cv;       /* signalled when done */
    int refs;                /* 2 while both hold it */
    bool done;               /* the resolver finished */
    int gai_err;             /* getaddrinfo's result */
    char host[256];          /* the name looked up */
    char numeric[INET6_ADDRSTRLEN + 2]; /* the answer, IPv6 in brackets */
} lookup_t;

static void lookup_put(lookup_t *l) {
    pthread_mutex_lock(&l->mu);
    int left = --l->refs;
    pthread_mutex_unlock(&l->mu);
    if (left == 0) {
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        sl_free(l);
    }
}

static void *resolve_thread(void *arg) {
    lookup_t *l = arg;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(l->host, NULL, &hints, &res);
    char numeric[sizeof l->numeric] = "";
    if (rc == 0) {
        /* IPv4 first: most clusters run on it, and ZeroMQ sockets are not
         * IPv6-enabled by default */
        const struct addrinfo *pick = NULL;
        for (const struct addrinfo *a = res; a && !pick; a = a->ai_next)
            if (a->ai_family == AF_INET)
                pick = a;
        for (const struct addrinfo *a = res; a && !pick; a = a->ai_next)
            if (a->ai_family == AF_INET6)
                pick = a;
        char buf[INET6_ADDRSTRLEN];
        if (!pick)
            rc = EAI_NONAME;
        else if (pick->ai_family == AF_INET &&
                 inet_ntop(AF_INET, &((struct sockaddr_in *)pick->ai_addr)->sin_addr, buf,
                           sizeof buf))
            snprintf(numeric, sizeof numeric, "%s", buf);
        else if (pick->ai_family == AF_INET6 &&
                 inet_ntop(AF_INET6, &((struct sockaddr_in6 *)pick->ai_addr)->sin6_addr, buf,
                           sizeof buf))
            snprintf(numeric, sizeof numeric, "[%s]", buf);
        else
            rc = EAI_FAIL;
        freeaddrinfo(res);
    }
    pthread_mutex_lock(&l->mu);
    l->gai_err = rc;
    memcpy(l->numeric, numeric, sizeof numeric);
    l->done = true;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    lookup_put(l);
    return NULL;
}

sl_err sl_plat_resolve_host(const char *host, int timeout_ms, char *out, size_t cap) {
    lookup_t *l = sl_calloc(1, sizeof *l);
    if (!l)
        return SL_ENOMEM;
    int hn = snprintf(l->host, sizeof l->host, "%s", host ? host : "");
    if (hn <= 0 || (size_t)hn >= sizeof l->host) {
        sl_free(l);
        return SL_EINVAL;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->refs = 2;
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &attr, resolve_thread, l) != 0) {
        pthread_attr_destroy(&attr);
        l->refs = 1;
        lookup_put(l);
        return SL_EIO;
    }
    pthread_attr_destroy(&attr);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&l->mu);
    while (!l->done)
        if (pthread_cond_timedwait(&l->cv, &l->mu, &dl) == ETIMEDOUT)
            break;
    bool done = l->done;
    int rc = l->gai_err;
    char numeric[sizeof l->numeric];
    memcpy(numeric, l->numeric, sizeof numeric);
    pthread_mutex_unlock(&l->mu);
    lookup_put(l);
    if (!done)
        return SL_ETIMEDOUT;
    if (rc != 0)
        return SL_ENOTFOUND;
    int n = snprintf(out, cap, "%s", numeric);
    return n < 0 || (size_t)n >= cap ? SL_EINVAL : SL_OK;
}
