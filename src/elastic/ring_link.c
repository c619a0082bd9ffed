/* The ring all-reduce's link (src/elastic/ring_link.h, docs/elastic.md
 * "The ring's transport"): the driver both transports share. The
 * schedule is sl_ring_next's; this file walks it with two cursors (sends
 * run up to `window` operations ahead of the receives, each send waiting
 * for the receive it depends on), applies what is received (the adds,
 * the finalize division), keeps the deadline and the abort, and ends the
 * call with DONE. The transport (ring_transport.h: ring_tcp.c without a
 * key, ring_zmq.c with one) moves the messages. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "elastic/ring_link.h"
#include "elastic/ring_transport.h"
#include "platform/process.h"
#include "starling/platform.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ring's payload is little-endian float32: port the payload encoding first"
#endif

#define WAIT_MS 50 /* longest wait between looks at the abort flag */

struct sl_ring_link {
    uint64_t job;                  /* cfg.job */
    uint64_t round;                /* cfg.round */
    uint32_t world;                /* cfg.world */
    uint32_t rank;                 /* cfg.rank */
    uint64_t chunk;                /* floats per message */
    uint32_t window;               /* operations sent ahead of the receives */
    uint32_t timeout_ms;           /* no progress this long ends the link */
    uint32_t calls;                /* all-reduces begun (the header's call) */
    sl_ring_transport_t transport; /* SL_RING_ZMQ or SL_RING_TCP */
    const sl_ring_ops_t *ops;      /* the transport's operations */
    void *t;                       /* its state, NULL once closed (or a world of one) */
    bool ready;                    /* rank+1 welcomed this link: data may go */
    atomic_bool abort;             /* sl_ring_link_abort: leave at once */
    uint64_t sends_left;           /* test switch: die after this many sends (0: never) */
    sl_err err;                    /* what ended the link, SL_OK while it works */
    char errbuf[240];              /* ditto, in words */
};

/* ---- Errors ---- */

/* Ends the link with `err` and the text in `text`: the transport's
 * sockets closed at once (nothing of the caller's buffer is held after
 * it), every later call returns the same. */
static sl_err end_link(sl_ring_link_t *l, sl_err err, const char *text) {
    if (l->err == SL_OK) {
        char prefix[120] = "";
        if (l->ops && l->ops->blame && l->t && err != SL_EPROTO)
            err = l->ops->blame(l->t, err, prefix, sizeof prefix);
        l->err = err;
        snprintf(l->errbuf, sizeof l->errbuf, "%s%s", prefix, text);
        sl_log(SL_LOG_WARNING, "RING-LINK-FAILED", "round %llu rank %u: %s",
               (unsigned long long)l->round, l->rank, l->errbuf);
    }
    if (l->ops)
        l->ops->close(&l->t);
    return l->err;
}

static sl_err fail(sl_ring_link_t *l, sl_err err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static sl_err fail(sl_ring_link_t *l, sl_err err, const char *fmt, ...) {
    char text[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return end_link(l, err, text);
}

const char *sl_ring_link_error(const sl_ring_link_t *l) {
    return l->errbuf;
}

/* ---- Open and close ---- */

sl_err sl_ring_link_open(const sl_ring_link_cfg_t *cfg, sl_ring_link_t **out) {
    *out = NULL;
    if (cfg->world == 0 || cfg->rank >= cfg->world || (cfg->world > 1 && !cfg->endpoints))
        return SL_EINVAL;
    /* without a key, our own TCP (no I/O thread, no copy out of a message);
     * with one, ZeroMQ's CurveZMQ (the ring's bytes are encrypted) */
    sl_ring_transport_t tr = cfg->transport;
    if (tr == SL_RING_AUTO) {
        /* STARLING_RING_TRANSPORT=zmq: a cluster without a key on the
         * ZeroMQ link all the same (to compare the two in one build) */
        const char *env = sl_plat_getenv("STARLING_RING_TRANSPORT");
        tr = cfg->key || (env && strcmp(env, "zmq") == 0) ? SL_RING_ZMQ : SL_RING_TCP;
    }
    if ((tr == SL_RING_TCP && cfg->key) || (tr != SL_RING_TCP && tr != SL_RING_ZMQ))
        return SL_EINVAL;
    size_t chunk_bytes = cfg->chunk_bytes ? cfg->chunk_bytes : sl_ring_link_default_chunk(tr);
    if (chunk_bytes < sizeof(float))
        return SL_EINVAL;
    sl_ring_link_t *l = sl_calloc(1, sizeof *l);
    if (!l)
        return SL_ENOMEM;
    l->job = cfg->job;
    l->round = cfg->round;
    l->world = cfg->world;
    l->rank = cfg->rank;
    l->chunk = chunk_bytes / sizeof(float);
    l->window = cfg->window ? cfg->window : SL_RING_LINK_WINDOW;
    l->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : SL_RING_LINK_TIMEOUT_MS;
    l->transport = tr;
    if (cfg->world > 1) {
        l->ops = tr == SL_RING_TCP ? &sl_ring_tcp_ops : &sl_ring_zmq_ops;
        char why[200] = "";
        sl_err err = l->ops->open(cfg, l->chunk * sizeof(float), &l->t, why, sizeof why);
        if (err != SL_OK) {
            end_link(l, err, why); /* logged (RING-LINK-FAILED) */
            sl_ring_link_close(&l);
            return err;
        }
    }
    *out = l;
    return SL_OK;
}

void sl_ring_link_close(sl_ring_link_t **lp) {
    sl_ring_link_t *l = lp ? *lp : NULL;
    if (!l)
        return;
    if (l->ops)
        l->ops->close(&l->t);
    sl_free(l);
    *lp = NULL;
}

void sl_ring_link_abort(sl_ring_link_t *l) {
    if (l)
        atomic_store(&l->abort, true);
}

size_t sl_ring_link_default_chunk(sl_ring_transport_t transport) {
    return transport == SL_RING_TCP ? SL_RING_LINK_TCP_CHUNK_BYTES : SL_RING_LINK_CHUNK_BYTES;
}

sl_ring_transport_t sl_ring_link_transport(const sl_ring_link_t *l) {
    return l->transport;
}

void sl_ring_link_test_die_after(sl_ring_link_t *l, uint64_t sends) {
    l->sends_left = sends;
}

/* ---- Applying what is received ---- */

/* dst[i] += src[i], src as received (a float's bytes, maybe unaligned).
 * Element-wise, so the vectoriser changes no bit; GCC at -O2 (this
 * library's flags) vectorises only what its cheapest model allows, so
 * the loop asks for it: 28% of a 64 MiB call's time was this loop. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("tree-vectorize")))
#endif
static void add_floats(float *restrict dst, const uint8_t *restrict src, uint64_t n) {
    if ((uintptr_t)src % _Alignof(float) == 0) {
        const float *restrict s = (const float *)(const void *)src;
        for (uint64_t i = 0; i < n; i++)
            dst[i] += s[i];
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, src + i * sizeof v, sizeof v);
        dst[i] += v;
    }
}

/* dst[i] = (dst[i] + src[i]) / d: the reduce-scatter's last add and the
 * finalize division in one pass over the segment this rank finalizes
 * (the same two roundings, so the same bits as add_floats then
 * div_floats; one read and write of 1/W of the buffer fewer). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("tree-vectorize")))
#endif
static void add_div_floats(float *restrict dst, const uint8_t *restrict src, uint64_t n,
                           float d) {
    if ((uintptr_t)src % _Alignof(float) == 0) {
        const float *restrict s = (const float *)(const void *)src;
        for (uint64_t i = 0; i < n; i++)
            dst[i] = (dst[i] + s[i]) / d;
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, src + i * sizeof v, sizeof v);
        dst[i] = (dst[i] + v) / d;
    }
}

/* p[i] /= d: a division, not a product by 1/d (other bits); the scalar
 * loop was 18% of a 64 MiB call at W=2. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("tree-vectorize")))
#endif
static void div_floats(float *restrict p, uint64_t n, float d) {
    for (uint64_t i = 0; i < n; i++)
        p[i] /= d;
}

/* ---- The all-reduce ---- */

/* (a, b) before (c, d) in the schedule's order. */
static bool before(uint32_t a, uint64_t b, uint32_t c, uint64_t d) {
    return a < c || (a == c && b < d);
}

static sl_ring_hdr_t header(const sl_ring_link_t *l, uint32_t call, uint32_t step,
                            uint64_t chunk) {
    return (sl_ring_hdr_t){.job = l->job, .round = l->round, .call = call, .step = step,
                           .chunk = chunk};
}

/* Receives every message that is waiting, applying each to the buffer.
 * Returns SL_EAGAIN when none was, SL_OK after at least one. */
static sl_err recv_some(sl_ring_link_t *l, float *buf, uint32_t call, float divisor,
                        sl_ring_iter_t *it, sl_ring_op_t *op, bool *have, uint64_t *done) {
    bool any = false;
    while (*have) {
        if (op->has_recv) {
            sl_ring_hdr_t want = header(l, call, op->step, op->chunk);
            float *dst = buf + op->recv_off;
            const uint8_t *src = NULL;
            char why[200] = "";
            /* the all-gather's chunks land where they belong; the
             * reduce-scatter's are added from the transport's bytes */
            sl_err err = l->ops->recv(l->t, &want, op->recv_len * sizeof(float), dst,
                                      !op->reduce, &src, why, sizeof why);
            if (err == SL_EAGAIN)
                break;
            if (err != SL_OK)
                return end_link(l, err, why);
            if (op->reduce && op->step == l->world - 2 && divisor != 1.0f) {
                /* the last add of the segment this rank finalizes: its
                 * all-gather sends it as it is (its finalize op divides
                 * nothing) */
                add_div_floats(dst, src, op->recv_len, divisor);
            } else if (op->reduce) {
                add_floats(dst, src, op->recv_len);
            } else if (src) {
                memcpy(dst, src, op->recv_len * sizeof(float));
            }
        }
        (*done)++;
        *have = sl_ring_next(it, op);
        any = true;
    }
    return any ? SL_OK : SL_EAGAIN;
}

/* Sends what the window and the dependencies allow; *progress when one
 * went. */
static sl_err send_some(sl_ring_link_t *l, const float *buf, uint32_t call, sl_ring_iter_t *sit,
                        sl_ring_op_t *sop, bool *shave, uint64_t *sent, uint64_t received,
                        const sl_ring_op_t *rop, bool rhave, bool *progress) {
    while (*shave && l->ready) {
        if (sop->has_send) {
            if (*sent >= received + l->window)
                break;
            /* chunk c of step k needs chunk c of step k-1 here */
            if (sop->step > 0 && rhave && !before(sop->step - 1, sop->chunk, rop->step, rop->chunk))
                break;
            if (l->sends_left == 1)
                return fail(l, SL_ECLOSED, "test: this rank dies mid-reduce");
            /* a finalize chunk was divided as it was received (the
             * reduce-scatter's last add, recv_some) */
            uint8_t h[SL_RING_LINK_HEADER_LEN];
            sl_ring_hdr_t hd = header(l, call, sop->step, sop->chunk);
            sl_ring_hdr_put(h, &hd);
            char why[200] = "";
            sl_err err = l->ops->send(l->t, h, buf + sop->send_off, sop->send_len * sizeof(float),
                                      why, sizeof why);
            if (err == SL_EAGAIN)
                break;
            if (err != SL_OK)
                return end_link(l, err, why);
            if (l->sends_left)
                l->sends_left--;
        }
        (*sent)++;
        *shave = sl_ring_next(sit, sop);
        *progress = true;
    }
    return SL_OK;
}

/* The end of a call: this rank has everything from rank-1, so it tells
 * rank-1 (DONE), and waits for rank+1's DONE: rank+1 has then received
 * every message sent from the caller's buffer, and the transport holds
 * none of it when the call returns. One message each way per call. */
static sl_err finish(sl_ring_link_t *l, uint32_t call) {
    uint8_t h[SL_RING_LINK_HEADER_LEN];
    sl_ring_hdr_t hd = header(l, call, SL_RING_LINK_DONE, 0);
    sl_ring_hdr_put(h, &hd);
    char why[200] = "";
    sl_err err = l->ops->done_send(l->t, h, why, sizeof why);
    if (err != SL_OK)
        return end_link(l, err, why);
    uint64_t deadline = sl_plat_now_ns() + (uint64_t)l->timeout_ms * 1000000;
    for (;;) {
        bool ready = l->ready;
        if ((err = l->ops->pump(l->t, &ready, why, sizeof why)) != SL_OK && err != SL_EAGAIN)
            return end_link(l, err, why);
        err = l->ops->done_recv(l->t, h, why, sizeof why);
        if (err == SL_OK)
            return SL_OK;
        if (err != SL_EAGAIN)
            return end_link(l, err, why);
        if (atomic_load(&l->abort))
            return fail(l, SL_ECLOSED, "left the world (asked to)");
        uint64_t now = sl_plat_now_ns();
        if (now >= deadline)
            return fail(l, SL_ETIMEDOUT, "rank %u did not say done in %u ms",
                        (l->rank + 1) % l->world, l->timeout_ms);
        long wait_ms = (long)((deadline - now) / 1000000) + 1;
        if ((err = l->ops->wait(l->t, wait_ms < WAIT_MS ? (int)wait_ms : WAIT_MS, true, why,
                                sizeof why)) != SL_OK)
            return end_link(l, err, why);
    }
}

sl_err sl_ring_link_allreduce(sl_ring_link_t *l, float *buf, uint64_t count, float divisor) {
    if (l->err != SL_OK)
        return l->err;
    if (!(divisor > 0))
        return SL_EINVAL;
    uint32_t call = l->calls++;
    if (l->world == 1 || count == 0) { /* nothing to exchange (no DONE either) */
        if (divisor != 1.0f)
            div_floats(buf, count, divisor);
        return SL_OK;
    }
    sl_ring_cfg_t rc = {.world = l->world, .rank = l->rank, .count = count, .chunk = l->chunk};
    sl_ring_iter_t sit, rit;
    sl_ring_op_t sop, rop;
    if (sl_ring_iter_init(&sit, &rc) != SL_OK || sl_ring_iter_init(&rit, &rc) != SL_OK)
        return SL_EINVAL;
    bool shave = sl_ring_next(&sit, &sop), rhave = sl_ring_next(&rit, &rop);
    uint64_t sent = 0, received = 0; /* operations passed by each cursor */
    uint64_t timeout_ns = (uint64_t)l->timeout_ms * 1000000;
    uint64_t deadline = sl_plat_now_ns() + timeout_ns;
    char why[200] = "";
    while (shave || rhave) {
        bool progress = false;
        if (atomic_load(&l->abort))
            return fail(l, SL_ECLOSED, "left the world (asked to)");
        sl_err err = l->ops->pump(l->t, &l->ready, why, sizeof why);
        if (err == SL_OK)
            progress = true;
        else if (err != SL_EAGAIN)
            return end_link(l, err, why);
        /* Sends: once welcomed, within the window, and after the receive
         * each depends on. */
        if ((err = send_some(l, buf, call, &sit, &sop, &shave, &sent, received, &rop, rhave,
                             &progress)) != SL_OK)
            return err;
        err = recv_some(l, buf, call, divisor, &rit, &rop, &rhave, &received);
        if (err == SL_OK)
            progress = true;
        else if (err != SL_EAGAIN)
            return err;
        if (progress) {
            deadline = sl_plat_now_ns() + timeout_ns;
            continue;
        }
        if ((err = l->ops->check(l->t, shave, rhave, why, sizeof why)) != SL_OK)
            return end_link(l, err, why);
        uint64_t now = sl_plat_now_ns();
        if (now >= deadline)
            return fail(l, SL_ETIMEDOUT, "no progress for %u ms (step %u chunk %llu next)",
                        l->timeout_ms, rhave ? rop.step : sop.step,
                        (unsigned long long)(rhave ? rop.chunk : sop.chunk));
        long wait_ms = (long)((deadline - now) / 1000000) + 1;
        if ((err = l->ops->wait(l->t, wait_ms < WAIT_MS ? (int)wait_ms : WAIT_MS, false, why,
                                sizeof why)) != SL_OK)
            return end_link(l, err, why);
    }
    return finish(l, call);
}
