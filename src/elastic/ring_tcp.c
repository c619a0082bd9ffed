/* The ring's plain TCP transport (ring_transport.h; docs/elastic.md "The
 * ring's transport", proto/elastic.md "The ring"), for clusters without
 * a key. No I/O thread: the caller's thread does the socket calls
 * (nonblocking, platform/tcp.h) between the driver's looks at the
 * schedule, so a message costs no hand-off between threads; each payload
 * is received straight into the caller's buffer at the schedule's offset
 * (all-gather) or into one scratch chunk the driver adds from
 * (reduce-scatter), and sent straight from the buffer.
 *
 * A frame is the 32-byte header, the payload's length (u64 LE), then the
 * payload. This rank listens on its endpoint and connects to rank+1's: on
 * each connection it makes it sends HELLO (its rank in the header's chunk)
 * and sends data only after rank+1's WELCOME on it; a refused, reset or
 * closed connection before the WELCOME is retried every 50 ms (rank+1 may
 * not listen yet, or its link of an older round may still hold the port
 * and drop this HELLO). Of the connections it accepts, the first whose
 * first frame is rank-1's HELLO of this job and round becomes rank-1's
 * (WELCOME goes back on it); any other first frame closes the connection
 * (a stale round, a stranger), and rank-1's HELLO of another job is
 * SL_EPROTO. DONE goes back to rank-1 on its connection. */
#include <string.h>

#include "base/why.h"
#include "elastic/ring_transport.h"
#include "elastic/ring_wire.h"
#include "platform/tcp.h"
#include "starling/platform.h"

#define PENDING 4               /* accepted connections not yet greeted, at most */
#define RETRY_NS 50000000ull    /* between tries to reach rank+1 before its WELCOME */
#define SOCK_BUF_BYTES (4 << 20) /* SO_SNDBUF/SO_RCVBUF, as the zmq link's */

typedef enum {
    NEXT_IDLE,       /* no connection; a try at retry_at_ns */
    NEXT_CONNECTING, /* connect under way */
    NEXT_GREETING,   /* HELLO going out, WELCOME awaited */
    NEXT_UP          /* welcomed: data goes */
} next_state_t;

typedef struct {
    int fd;                            /* accepted, -1: a free slot */
    uint8_t in[SL_RING_WIRE_FRAME_LEN]; /* its first frame, as it comes */
    size_t got;                        /* bytes of in[] read */
} pending_t;

typedef struct {
    uint64_t job;                  /* cfg.job */
    uint64_t round;                /* cfg.round */
    uint32_t world;                /* cfg.world */
    uint32_t rank;                 /* cfg.rank */
    int lfd;                       /* listening */
    pending_t pend[PENDING];       /* accepted, first frame not read yet */
    uint32_t evict;                /* the slot a new connection takes when all are used */
    uint64_t strays;               /* connections dropped: not rank-1 of this round */
    /* to rank+1 */
    sl_plat_tcp_addr_t next_addr;  /* rank+1's endpoint, resolved */
    int nfd;                       /* the connection, -1: none */
    next_state_t nstate;           /* where it stands */
    uint64_t retry_at_ns;          /* NEXT_IDLE: when to connect again */
    uint8_t hello[SL_RING_WIRE_FRAME_LEN]; /* this link's HELLO */
    size_t hello_off;              /* bytes of it sent on nfd */
    uint8_t nin[SL_RING_WIRE_FRAME_LEN]; /* a frame from rank+1 (WELCOME, DONE), as it comes */
    size_t nin_got;                /* bytes of nin[] read */
    bool next_lost;                /* the welcomed connection closed or broke */
    bool have_done;                /* rank+1's DONE came, not taken yet */
    uint8_t done[SL_RING_LINK_HEADER_LEN]; /* its header */
    uint8_t shdr[SL_RING_WIRE_FRAME_LEN]; /* the frame prefix going out */
    const uint8_t *spay;           /* its payload, in the caller's buffer */
    size_t slen;                   /* payload bytes */
    size_t soff;                   /* bytes of prefix + payload sent */
    bool sbusy;                    /* a message is still going out */
    /* from rank-1 */
    int pfd;                       /* its connection (its HELLO came on it), -1: none yet */
    bool prev_lost;                /* it closed or broke */
    uint8_t pin[SL_RING_WIRE_FRAME_LEN]; /* the next frame's prefix, as it comes */
    size_t pin_got;                /* bytes of pin[] read */
    size_t pay_got;                /* payload bytes read (pin whole and checked) */
    uint8_t pout[2 * SL_RING_WIRE_FRAME_LEN]; /* WELCOME / DONE going to rank-1 */
    size_t pout_len;               /* bytes queued in pout[] */
    uint8_t *scratch;              /* one chunk: a reduce-scatter payload before the add */
} tring_t;

static uint32_t prev_rank(const tring_t *t) {
    return (t->rank + t->world - 1) % t->world;
}

static uint32_t next_rank(const tring_t *t) {
    return (t->rank + 1) % t->world;
}

/* A header-only frame of this link: HELLO, WELCOME (chunk: the sender's rank). */
static void greeting(uint8_t *p, const tring_t *t, uint32_t step) {
    sl_ring_hdr_t h = {.job = t->job, .round = t->round, .step = step, .chunk = t->rank};
    sl_ring_frame_put(p, &h, 0);
}

/* ---- Open and close ---- */

static void tclose(void **tp) {
    tring_t *t = tp ? *tp : NULL;
    if (!t)
        return;
    sl_plat_tcp_close(&t->lfd);
    sl_plat_tcp_close(&t->nfd);
    sl_plat_tcp_close(&t->pfd);
    for (int i = 0; i < PENDING; i++)
        sl_plat_tcp_close(&t->pend[i].fd);
    sl_free(t->scratch);
    sl_free(t);
    *tp = NULL;
}

static sl_err topen(const sl_ring_link_cfg_t *cfg, size_t chunk_bytes, void **tp, char *why,
                    size_t why_len) {
    tring_t *t = sl_calloc(1, sizeof *t);
    if (!t)
        return SL_ENOMEM;
    *tp = t; /* on failure the driver closes it */
    t->job = cfg->job;
    t->round = cfg->round;
    t->world = cfg->world;
    t->rank = cfg->rank;
    t->lfd = t->nfd = t->pfd = -1;
    for (int i = 0; i < PENDING; i++)
        t->pend[i].fd = -1;
    greeting(t->hello, t, SL_RING_LINK_HELLO);
    if (!(t->scratch = sl_malloc(chunk_bytes)))
        return sl_why(why, why_len, SL_ENOMEM, "no memory for the ring's scratch chunk");
    const char *bind = cfg->bind ? cfg->bind : cfg->endpoints[cfg->rank];
    const char *dial = cfg->endpoints[next_rank(t)];
    sl_plat_tcp_addr_t ba;
    sl_err err = sl_plat_tcp_addr(bind, true, &ba);
    if (err != SL_OK)
        return sl_why(why, why_len, err == SL_EINVAL ? SL_EINVAL : SL_EIO,
                      "cannot bind %s: %s", bind,
                      err == SL_EINVAL ? "not tcp://HOST:PORT" : "the host does not resolve");
    char text[120] = "";
    if (sl_plat_tcp_listen(&ba, SOCK_BUF_BYTES, &t->lfd, text, sizeof text) != SL_OK)
        return sl_why(why, why_len, SL_EIO, "cannot bind %s: %s", bind, text);
    err = sl_plat_tcp_addr(dial, false, &t->next_addr);
    if (err != SL_OK)
        return sl_why(why, why_len, err == SL_EINVAL ? SL_EINVAL : SL_EIO,
                      "cannot connect to %s: %s", dial,
                      err == SL_EINVAL ? "not tcp://HOST:PORT" : "the host does not resolve");
    t->nstate = NEXT_IDLE; /* the first pump connects */
    return SL_OK;
}

/* ---- Rank+1's side ---- */

/* Drops the connection to rank+1 before its WELCOME; a new one in a while. */
static void next_retry(tring_t *t) {
    sl_plat_tcp_close(&t->nfd);
    t->nstate = NEXT_IDLE;
    t->nin_got = 0;
    t->retry_at_ns = sl_plat_now_ns() + RETRY_NS;
}

/* Sends what is left of the message going out. */
static sl_err flush_send(tring_t *t, bool *progress, char *why, size_t why_len) {
    while (t->sbusy) {
        size_t sent = 0, pre = SL_RING_WIRE_FRAME_LEN;
        const uint8_t *a = t->shdr + (t->soff < pre ? t->soff : pre);
        size_t alen = t->soff < pre ? pre - t->soff : 0;
        size_t boff = t->soff > pre ? t->soff - pre : 0;
        if (sl_plat_tcp_send2(t->nfd, a, alen, t->spay + boff, t->slen - boff, &sent) != SL_OK) {
            t->next_lost = true;
            return sl_why(why, why_len, SL_ECLOSED, "the connection to rank %u broke mid-reduce",
                          next_rank(t));
        }
        if (sent == 0)
            break;
        t->soff += sent;
        *progress = true;
        if (t->soff == pre + t->slen)
            t->sbusy = false;
    }
    return SL_OK;
}

/* Reads the frames rank+1 sends on a welcomed connection: DONE, at most
 * one per call (a late WELCOME is skipped). */
static sl_err next_frames(tring_t *t, char *why, size_t why_len) {
    for (;;) {
        size_t got = 0;
        sl_err err = sl_plat_tcp_recv(t->nfd, t->nin + t->nin_got,
                                      sizeof t->nin - t->nin_got, &got);
        if (err == SL_EAGAIN)
            return SL_OK;
        if (err != SL_OK) {
            t->next_lost = true; /* an error once the call still needs it (tcheck, done_recv) */
            return SL_OK;
        }
        if ((t->nin_got += got) < sizeof t->nin)
            continue;
        t->nin_got = 0;
        sl_ring_hdr_t h;
        uint64_t len;
        sl_ring_frame_get(t->nin, &h, &len);
        if (len == 0 && h.step == SL_RING_LINK_WELCOME)
            continue;
        if (len != 0 || h.step != SL_RING_LINK_DONE || t->have_done)
            return sl_why(why, why_len, SL_EPROTO,
                          "rank %u answered with something other than done", next_rank(t));
        memcpy(t->done, t->nin, sizeof t->done);
        t->have_done = true;
    }
}

/* Connects, greets, and reads what comes from rank+1. */
static sl_err pump_next(tring_t *t, unsigned revents, bool *progress, char *why,
                        size_t why_len) {
    switch (t->nstate) {
    case NEXT_IDLE:
        if (sl_plat_now_ns() < t->retry_at_ns)
            return SL_OK;
        if (sl_plat_tcp_connect(&t->next_addr, SOCK_BUF_BYTES, &t->nfd) != SL_OK) {
            next_retry(t);
            return SL_OK;
        }
        t->nstate = NEXT_CONNECTING;
        return SL_OK;
    case NEXT_CONNECTING: {
        sl_err err = sl_plat_tcp_connected(t->nfd);
        if (err == SL_EAGAIN)
            return SL_OK;
        if (err != SL_OK) {
            next_retry(t);
            return SL_OK;
        }
        t->nstate = NEXT_GREETING;
        t->hello_off = 0;
    }
        /* fall through */
    case NEXT_GREETING: {
        if (t->hello_off < sizeof t->hello) {
            size_t sent = 0;
            if (sl_plat_tcp_send2(t->nfd, t->hello + t->hello_off, sizeof t->hello - t->hello_off,
                                  NULL, 0, &sent) != SL_OK) {
                next_retry(t);
                return SL_OK;
            }
            t->hello_off += sent;
        }
        if (!(revents & (SL_PLAT_TCP_IN | SL_PLAT_TCP_ERR)))
            return SL_OK;
        size_t got = 0;
        sl_err err = sl_plat_tcp_recv(t->nfd, t->nin + t->nin_got, sizeof t->nin - t->nin_got,
                                      &got);
        if (err == SL_EAGAIN)
            return SL_OK;
        if (err != SL_OK) { /* a stale link's close, or rank+1 not there: again */
            next_retry(t);
            return SL_OK;
        }
        if ((t->nin_got += got) < sizeof t->nin)
            return SL_OK;
        t->nin_got = 0;
        sl_ring_hdr_t h;
        uint64_t len;
        sl_ring_frame_get(t->nin, &h, &len);
        if (h.step != SL_RING_LINK_WELCOME || len != 0 || h.job != t->job ||
            h.round != t->round || h.chunk != next_rank(t)) {
            next_retry(t); /* not rank+1 of this round on that port */
            return SL_OK;
        }
        t->nstate = NEXT_UP;
        *progress = true;
        return SL_OK;
    }
    case NEXT_UP:
        if (!t->next_lost && (revents & (SL_PLAT_TCP_IN | SL_PLAT_TCP_ERR)))
            return next_frames(t, why, why_len);
        return SL_OK;
    }
    return SL_OK;
}

/* ---- Rank-1's side ---- */

/* Sends the WELCOME / DONE queued for rank-1 (header-only frames: they
 * go at once into an empty socket buffer; a connection that is gone
 * takes them nowhere, as a ROUTER drops them). */
static void flush_prev(tring_t *t) {
    if (t->pfd < 0 || t->pout_len == 0)
        return;
    size_t sent = 0;
    if (sl_plat_tcp_send2(t->pfd, t->pout, t->pout_len, NULL, 0, &sent) != SL_OK) {
        t->prev_lost = true;
        t->pout_len = 0;
        return;
    }
    memmove(t->pout, t->pout + sent, t->pout_len - sent);
    t->pout_len -= sent;
}

static void queue_prev(tring_t *t, const uint8_t *frame) {
    if (t->pout_len + SL_RING_WIRE_FRAME_LEN <= sizeof t->pout) {
        memcpy(t->pout + t->pout_len, frame, SL_RING_WIRE_FRAME_LEN);
        t->pout_len += SL_RING_WIRE_FRAME_LEN;
    }
    flush_prev(t);
}

/* A pending connection's first frame is whole: rank-1's HELLO makes it
 * rank-1's connection; anything else closes it. */
static sl_err greeted(tring_t *t, pending_t *p, bool *progress, char *why, size_t why_len) {
    sl_ring_hdr_t h;
    uint64_t len;
    sl_ring_frame_get(p->in, &h, &len);
    switch (sl_ring_greet_check(&h, len, t->job, t->round, prev_rank(t), why, why_len)) {
    case SL_RING_GREET_FOREIGN:
        return SL_EPROTO;
    case SL_RING_GREET_STRAY:
        sl_plat_tcp_close(&p->fd);
        t->strays++;
        return SL_OK;
    case SL_RING_GREET_OK:
        break;
    }
    /* rank-1 connects again only when its connection broke before our
     * WELCOME reached it: the newest one is rank-1's */
    sl_plat_tcp_close(&t->pfd);
    t->pfd = p->fd;
    p->fd = -1;
    t->prev_lost = false;
    t->pin_got = t->pay_got = 0;
    t->pout_len = 0;
    uint8_t w[SL_RING_WIRE_FRAME_LEN];
    greeting(w, t, SL_RING_LINK_WELCOME);
    queue_prev(t, w);
    *progress = true;
    return SL_OK;
}

static void accept_all(tring_t *t) {
    for (;;) {
        int fd = -1;
        if (sl_plat_tcp_accept(t->lfd, SOCK_BUF_BYTES, &fd) != SL_OK)
            return;
        pending_t *slot = NULL;
        for (int i = 0; i < PENDING && !slot; i++)
            if (t->pend[i].fd < 0)
                slot = &t->pend[i];
        if (!slot) { /* all taken (strangers that say nothing): the oldest goes */
            slot = &t->pend[t->evict++ % PENDING];
            sl_plat_tcp_close(&slot->fd);
            t->strays++;
        }
        slot->fd = fd;
        slot->got = 0;
    }
}

/* ---- The operations ---- */

/* One look at every socket (poll, no wait), then what it says: accepts,
 * first frames, the connection to rank+1, what is queued to go out. */
static sl_err tpump(void *tp, bool *ready, char *why, size_t why_len) {
    tring_t *t = tp;
    bool progress = false;
    sl_plat_tcp_poll_t p[2 + PENDING];
    size_t n = 0;
    p[n++] = (sl_plat_tcp_poll_t){.fd = t->lfd, .events = SL_PLAT_TCP_IN};
    p[n++] = (sl_plat_tcp_poll_t){.fd = t->nstate == NEXT_UP && t->next_lost ? -1 : t->nfd,
                                  .events = SL_PLAT_TCP_IN};
    for (int i = 0; i < PENDING; i++)
        p[n++] = (sl_plat_tcp_poll_t){.fd = t->pend[i].fd, .events = SL_PLAT_TCP_IN};
    sl_err err = sl_plat_tcp_poll(p, n, 0);
    if (err != SL_OK)
        return sl_why(why, why_len, err, "cannot poll the ring's sockets");
    if ((err = flush_send(t, &progress, why, why_len)) != SL_OK)
        return err;
    flush_prev(t);
    if ((err = pump_next(t, t->nfd >= 0 ? p[1].revents : 0, &progress, why, why_len)) != SL_OK)
        return err;
    for (int i = 0; i < PENDING; i++) {
        pending_t *q = &t->pend[i];
        if (q->fd < 0 || !(p[2 + i].revents & (SL_PLAT_TCP_IN | SL_PLAT_TCP_ERR)))
            continue;
        size_t got = 0;
        err = sl_plat_tcp_recv(q->fd, q->in + q->got, sizeof q->in - q->got, &got);
        if (err == SL_EAGAIN)
            continue;
        if (err != SL_OK) { /* closed before its first frame */
            sl_plat_tcp_close(&q->fd);
            continue;
        }
        if ((q->got += got) == sizeof q->in && (err = greeted(t, q, &progress, why, why_len)))
            return err;
    }
    if (p[0].revents & SL_PLAT_TCP_IN)
        accept_all(t);
    *ready = t->nstate == NEXT_UP;
    return progress ? SL_OK : SL_EAGAIN;
}

static sl_err tsend(void *tp, const uint8_t *hdr, const void *p, size_t len, char *why,
                    size_t why_len) {
    tring_t *t = tp;
    bool progress = false;
    sl_err err = flush_send(t, &progress, why, why_len);
    if (err != SL_OK)
        return err;
    if (t->sbusy)
        return SL_EAGAIN;
    sl_ring_hdr_t h;
    sl_ring_hdr_get(hdr, &h);
    sl_ring_frame_put(t->shdr, &h, len);
    t->spay = p;
    t->slen = len;
    t->soff = 0;
    t->sbusy = true;
    return flush_send(t, &progress, why, why_len);
}

static sl_err trecv(void *tp, const sl_ring_hdr_t *want, size_t len, void *dst, bool direct,
                    const uint8_t **src, char *why, size_t why_len) {
    tring_t *t = tp;
    if (t->pfd < 0)
        return SL_EAGAIN; /* rank-1 has not greeted yet */
    uint8_t *to = direct ? dst : t->scratch;
    for (;;) {
        size_t got = 0;
        bool head = t->pin_got < sizeof t->pin;
        sl_err err = head ? sl_plat_tcp_recv(t->pfd, t->pin + t->pin_got,
                                             sizeof t->pin - t->pin_got, &got)
                          : sl_plat_tcp_recv(t->pfd, to + t->pay_got, len - t->pay_got, &got);
        if (err == SL_EAGAIN)
            return SL_EAGAIN;
        if (err != SL_OK) {
            t->prev_lost = true;
            return sl_why(why, why_len, SL_ECLOSED, "rank %u closed its connection mid-reduce",
                          prev_rank(t));
        }
        if (head) {
            if ((t->pin_got += got) < sizeof t->pin)
                continue;
            /* the header and length before a byte of payload is read:
             * never more than the schedule says */
            sl_ring_hdr_t h;
            uint64_t plen;
            sl_ring_frame_get(t->pin, &h, &plen);
            if ((err = sl_ring_hdr_check(&h, true, plen, want, len, why, why_len)) != SL_OK)
                return err;
            t->pay_got = 0;
        } else {
            t->pay_got += got;
        }
        if (t->pin_got == sizeof t->pin && t->pay_got == len) {
            t->pin_got = t->pay_got = 0;
            *src = direct ? NULL : t->scratch;
            return SL_OK;
        }
    }
}

static sl_err tcheck(void *tp, bool sending, bool receiving, char *why, size_t why_len) {
    tring_t *t = tp;
    if (t->next_lost && sending)
        return sl_why(why, why_len, SL_ECLOSED, "the connection to rank %u broke mid-reduce",
                      next_rank(t));
    if (t->prev_lost && receiving)
        return sl_why(why, why_len, SL_ECLOSED, "rank %u closed its connection mid-reduce",
                      prev_rank(t));
    return SL_OK;
}

static sl_err twait(void *tp, int timeout_ms, bool finishing, char *why, size_t why_len) {
    tring_t *t = tp;
    sl_plat_tcp_poll_t p[3 + PENDING];
    size_t n = 0;
    unsigned next_ev = SL_PLAT_TCP_IN;
    if (t->nstate == NEXT_CONNECTING || t->sbusy ||
        (t->nstate == NEXT_GREETING && t->hello_off < sizeof t->hello))
        next_ev |= SL_PLAT_TCP_OUT;
    if (t->nstate == NEXT_IDLE) {
        uint64_t now = sl_plat_now_ns();
        int until = t->retry_at_ns > now ? (int)((t->retry_at_ns - now) / 1000000) + 1 : 0;
        timeout_ms = until < timeout_ms ? until : timeout_ms;
    }
    if (!t->next_lost)
        p[n++] = (sl_plat_tcp_poll_t){.fd = t->nfd, .events = next_ev};
    if (!finishing) {
        p[n++] = (sl_plat_tcp_poll_t){.fd = t->lfd, .events = SL_PLAT_TCP_IN};
        p[n++] = (sl_plat_tcp_poll_t){.fd = t->prev_lost ? -1 : t->pfd,
                                      .events = SL_PLAT_TCP_IN};
        for (int i = 0; i < PENDING; i++)
            p[n++] = (sl_plat_tcp_poll_t){.fd = t->pend[i].fd, .events = SL_PLAT_TCP_IN};
    }
    sl_err err = sl_plat_tcp_poll(p, n, timeout_ms);
    if (err != SL_OK)
        return sl_why(why, why_len, err, "cannot poll the ring's sockets");
    return SL_OK;
}

static sl_err tdone_send(void *tp, const uint8_t *done, char *why, size_t why_len) {
    (void)why;
    (void)why_len;
    tring_t *t = tp;
    sl_ring_hdr_t h;
    sl_ring_hdr_get(done, &h);
    uint8_t f[SL_RING_WIRE_FRAME_LEN];
    sl_ring_frame_put(f, &h, 0);
    queue_prev(t, f);
    return SL_OK;
}

static sl_err tdone_recv(void *tp, const uint8_t *done, char *why, size_t why_len) {
    tring_t *t = tp;
    if (t->have_done) {
        t->have_done = false;
        if (memcmp(t->done, done, sizeof t->done) != 0)
            return sl_why(why, why_len, SL_EPROTO,
                          "rank %u answered with something other than done", next_rank(t));
        return SL_OK;
    }
    if (t->next_lost)
        return sl_why(why, why_len, SL_ECLOSED,
                      "the connection to rank %u broke before it said done", next_rank(t));
    return SL_EAGAIN;
}

const sl_ring_ops_t sl_ring_tcp_ops = {
    .open = topen,
    .close = tclose,
    .pump = tpump,
    .send = tsend,
    .recv = trecv,
    .check = tcheck,
    .wait = twait,
    .done_send = tdone_send,
    .done_recv = tdone_recv,
};
