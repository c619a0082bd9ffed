/* The ring all-reduce's link (src/elastic/ring_link.c and its two
 * transports, ring_tcp.c and ring_zmq.c): W = 1..4 ranks as threads on
 * 127.0.0.1, each with its own link, against the in-memory schedule (the
 * harness of tests/elastic_ring_test.c, here run in order): every rank
 * ends with the oracle's bits, for lengths 0, below W, not divisible by
 * W, random and 16 MiB, small chunks and windows, and several calls on
 * one link. Every unkeyed case runs over plain TCP and over ZeroMQ. A
 * keyed ring (ZeroMQ: CurveZMQ + ZAP) works; a rank with the wrong key
 * fails cleanly and so do the others; a message of another job is a
 * protocol error; a rank that dies mid-reduce ends the others' all-reduce
 * within the timeout; over TCP, a stale connection of an older round and
 * strangers that send garbage or nothing do not disturb the ring. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <stdlib.h>
#include <unistd.h>

#include "elastic/ring_link.h"
#include "elastic/ring_wire.h"
#include "starling/platform.h"
#include "starling/rng.h"
#include "testlib.h"

#define MAXW 4

/* ---- the oracle: sl_ring_next's operations run in memory ---- */

typedef struct {
    float *data;  /* copy of the sent range */
    uint64_t len; /* floats */
} omsg_t;

typedef struct {
    omsg_t *q;   /* FIFO into this rank */
    size_t head; /* next to take */
    size_t tail; /* next free */
    size_t cap;  /* allocated */
} oq_t;

/* Every rank's buffer in `bufs` becomes what the schedule makes of it,
 * finalize dividing by `divisor` (as the link does). */
static void oracle(uint32_t w, uint64_t count, uint64_t chunk, float divisor, float **bufs) {
    if (w == 1) {
        if (divisor != 1.0f)
            for (uint64_t i = 0; i < count; i++)
                bufs[0][i] /= divisor;
        return;
    }
    sl_ring_iter_t it[MAXW];
    sl_ring_op_t op[MAXW];
    bool have[MAXW], sent[MAXW];
    oq_t q[MAXW];
    memset(q, 0, sizeof q);
    for (uint32_t r = 0; r < w; r++) {
        sl_ring_cfg_t cfg = {.world = w, .rank = r, .count = count, .chunk = chunk};
        sl_ring_iter_init(&it[r], &cfg);
        have[r] = sl_ring_next(&it[r], &op[r]);
        sent[r] = false;
    }
    for (bool any = true; any;) {
        any = false;
        for (uint32_t r = 0; r < w; r++) {
            while (have[r]) {
                sl_ring_op_t *o = &op[r];
                if (!sent[r] && o->has_send) {
                    float *p = bufs[r] + o->send_off;
                    if (o->finalize)
                        for (uint64_t i = 0; i < o->send_len; i++)
                            p[i] /= divisor;
                    oq_t *d = &q[(r + 1) % w];
                    if (d->tail == d->cap) {
                        d->cap = d->cap ? 2 * d->cap : 64;
                        d->q = realloc(d->q, d->cap * sizeof *d->q);
                    }
                    d->q[d->tail].data = malloc(o->send_len * sizeof(float) + 1);
                    memcpy(d->q[d->tail].data, p, o->send_len * sizeof(float));
                    d->q[d->tail++].len = o->send_len;
                }
                sent[r] = true;
                if (o->has_recv) {
                    if (q[r].head == q[r].tail)
                        break;
                    omsg_t *m = &q[r].q[q[r].head++];
                    for (uint64_t i = 0; i < o->recv_len; i++)
                        bufs[r][o->recv_off + i] =
                            o->reduce ? bufs[r][o->recv_off + i] + m->data[i] : m->data[i];
                    free(m->data);
                }
                have[r] = sl_ring_next(&it[r], &op[r]);
                sent[r] = false;
                any = true;
            }
        }
    }
    for (uint32_t r = 0; r < w; r++) {
        CHECK_MSG(!have[r], "the oracle's rank %u never finished", r);
        free(q[r].q);
    }
}

/* ---- ranks as threads ---- */

typedef struct {
    sl_ring_link_cfg_t cfg;    /* this rank's link */
    const char *eps[MAXW];     /* endpoints */
    float *buf;                /* reduced in place */
    uint64_t count;            /* floats */
    float divisor;             /* finalize */
    int calls;                 /* all-reduces in a row (buffers of calls > 1 restart from in[]) */
    float **in;                /* calls' inputs, [call][i] */
    float **out;               /* calls' results, [call][i] */
    uint64_t die_after;        /* test switch, 0: never */
    sl_err err;                /* first failure */
    char why[200];             /* its text */
    uint64_t took_ms;          /* open to close */
} rank_t;

static void *rank_main(void *arg) {
    rank_t *k = arg;
    uint64_t t0 = sl_plat_now_ns();
    sl_ring_link_t *link = NULL;
    k->err = sl_ring_link_open(&k->cfg, &link);
    if (k->err == SL_OK && k->die_after)
        sl_ring_link_test_die_after(link, k->die_after);
    for (int c = 0; c < k->calls && k->err == SL_OK; c++) {
        if (k->in)
            memcpy(k->buf, k->in[c], k->count * sizeof(float));
        k->err = sl_ring_link_allreduce(link, k->buf, k->count, k->divisor);
        if (k->out && k->err == SL_OK)
            memcpy(k->out[c], k->buf, k->count * sizeof(float));
    }
    if (link)
        snprintf(k->why, sizeof k->why, "%s", sl_ring_link_error(link));
    sl_ring_link_close(&link);
    CHECK(link == NULL);
    k->took_ms = (sl_plat_now_ns() - t0) / 1000000;
    return NULL;
}

static char eps_text[MAXW][64];
static sl_rng_t rng;
static sl_ring_transport_t transport; /* of the unkeyed cases run now */

static const char *transport_name(sl_ring_transport_t t) {
    return t == SL_RING_TCP ? "tcp" : t == SL_RING_ZMQ ? "zmq" : "auto";
}

/* W consecutive ports below 32768 that nothing listens on now, a
 * different block per run. */
static void pick_endpoints(uint32_t w, sl_rng_t *rng) {
    for (;;) {
        unsigned base = 20000 + (unsigned)sl_rng_below(rng, 12000 / MAXW) * MAXW;
        bool free_ = true;
        for (uint32_t r = 0; r < MAXW && free_; r++) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(base + r)),
                                    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
            free_ = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
            if (fd >= 0)
                close(fd);
        }
        if (!free_)
            continue;
        for (uint32_t r = 0; r < w; r++)
            snprintf(eps_text[r], sizeof eps_text[r], "tcp://127.0.0.1:%u", base + r);
        return;
    }
}

static void setup(rank_t *ranks, uint32_t w, uint64_t count, size_t chunk_bytes, uint32_t window,
                  sl_rng_t *rng) {
    pick_endpoints(w, rng);
    for (uint32_t r = 0; r < w; r++) {
        rank_t *k = &ranks[r];
        memset(k, 0, sizeof *k);
        for (uint32_t i = 0; i < w; i++)
            k->eps[i] = eps_text[i];
        k->cfg = (sl_ring_link_cfg_t){.job = 0x5157a11e, .round = 7, .world = w, .rank = r,
                                      .endpoints = k->eps, .chunk_bytes = chunk_bytes,
                                      .window = window, .timeout_ms = 5000,
                                      .transport = transport};
        k->count = count;
        k->divisor = (float)w;
        k->calls = 1;
        k->buf = malloc(count * sizeof(float) + 1);
        for (uint64_t i = 0; i < count; i++)
            k->buf[i] = (float)(sl_rng_double(rng) * 2 - 1);
    }
}

static void run(rank_t *ranks, uint32_t w) {
    pthread_t th[MAXW];
    for (uint32_t r = 0; r < w; r++)
        pthread_create(&th[r], NULL, rank_main, &ranks[r]);
    for (uint32_t r = 0; r < w; r++)
        pthread_join(th[r], NULL);
}

static void release(rank_t *ranks, uint32_t w) {
    for (uint32_t r = 0; r < w; r++)
        free(ranks[r].buf);
}

/* What the ranks' buffers must become (default chunk, divisor W). */
static void want_of(rank_t *ranks, uint32_t w, float **want) {
    for (uint32_t r = 0; r < w; r++) {
        want[r] = malloc(ranks[r].count * sizeof(float) + 1);
        memcpy(want[r], ranks[r].buf, ranks[r].count * sizeof(float));
    }
    oracle(w, ranks[0].count, sl_ring_link_default_chunk(transport) / sizeof(float), (float)w,
           want);
}

/* Every rank succeeded with the oracle's bits; frees want. */
static void check_want(rank_t *ranks, uint32_t w, float **want, const char *what) {
    for (uint32_t r = 0; r < w; r++) {
        CHECK_MSG(ranks[r].err == SL_OK, "rank %u %s: %s (%s)", r, what,
                  sl_errname(ranks[r].err), ranks[r].why);
        if (ranks[r].err == SL_OK)
            CHECK_MSG(memcmp(ranks[r].buf, want[r], ranks[r].count * sizeof(float)) == 0,
                      "rank %u %s differs from the oracle", r, what);
        free(want[r]);
    }
}

/* One all-reduce of `count` floats on W ranks: the oracle's bits everywhere. */
static void same_as_oracle(uint32_t w, uint64_t count, size_t chunk_bytes, uint32_t window,
                           sl_rng_t *rng) {
    rank_t ranks[MAXW];
    float *want[MAXW];
    setup(ranks, w, count, chunk_bytes, window, rng);
    for (uint32_t r = 0; r < w; r++) {
        want[r] = malloc(count * sizeof(float) + 1);
        memcpy(want[r], ranks[r].buf, count * sizeof(float));
    }
    uint64_t chunk =
        (chunk_bytes ? chunk_bytes : sl_ring_link_default_chunk(transport)) / sizeof(float);
    oracle(w, count, chunk, (float)w, want);
    run(ranks, w);
    for (uint32_t r = 0; r < w; r++) {
        CHECK_MSG(ranks[r].err == SL_OK,
                  "%s: W %u count %llu chunk %zu window %u: rank %u: %s (%s)",
                  transport_name(transport), w, (unsigned long long)count, chunk_bytes, window, r,
                  sl_errname(ranks[r].err), ranks[r].why);
        if (ranks[r].err == SL_OK)
            CHECK_MSG(memcmp(ranks[r].buf, want[r], count * sizeof(float)) == 0,
                      "W %u count %llu chunk %zu: rank %u differs from the oracle", w,
                      (unsigned long long)count, chunk_bytes, r);
        if (r > 0 && ranks[r].err == SL_OK && ranks[0].err == SL_OK)
            CHECK_MSG(memcmp(ranks[r].buf, ranks[0].buf, count * sizeof(float)) == 0,
                      "W %u: ranks 0 and %u differ", w, r);
        free(want[r]);
    }
    release(ranks, w);
}

static void test_lengths(void) {
    for (uint32_t w = 1; w <= MAXW; w++) {
        uint64_t counts[] = {0, w - 1, 1000003, 1 + sl_rng_below(&rng, 300000),
                             (uint64_t)16 << 20 >> 2};
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
            same_as_oracle(w, counts[i], 0, 0, &rng);
    }
}

static void test_chunks_and_windows(void) {
    /* many chunks per step, windows from lockstep to deep, a chunk that
     * is not a whole number of floats (rounded down) */
    size_t chunks[] = {4, 1000, 4096, 65536, 65538};
    uint32_t windows[] = {1, 2, 4, 16};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++)
        for (size_t j = 0; j < sizeof windows / sizeof windows[0]; j++) {
            uint32_t w = 2 + (uint32_t)sl_rng_below(&rng, MAXW - 1);
            uint64_t count = chunks[i] < 100 ? 97 : 1 + sl_rng_below(&rng, 200000);
            same_as_oracle(w, count, chunks[i], windows[j], &rng);
        }
}

/* Three all-reduces on one link, each with its own input; divisor 1 (sums). */
static void test_calls(void) {
    uint32_t w = 3;
    uint64_t count = 50001;
    int calls = 3;
    rank_t ranks[MAXW];
    setup(ranks, w, count, 8192, 4, &rng);
    float *in[MAXW][3], *out[MAXW][3], *want[MAXW];
    for (uint32_t r = 0; r < w; r++) {
        ranks[r].divisor = 1.0f;
        ranks[r].calls = calls;
        ranks[r].in = in[r];
        ranks[r].out = out[r];
        for (int c = 0; c < calls; c++) {
            in[r][c] = malloc(count * sizeof(float));
            out[r][c] = calloc(count, sizeof(float));
            for (uint64_t i = 0; i < count; i++)
                in[r][c][i] = (float)(sl_rng_double(&rng) * 10);
        }
    }
    run(ranks, w);
    for (int c = 0; c < calls; c++) {
        for (uint32_t r = 0; r < w; r++) {
            want[r] = malloc(count * sizeof(float));
            memcpy(want[r], in[r][c], count * sizeof(float));
        }
        oracle(w, count, 8192 / sizeof(float), 1.0f, want);
        for (uint32_t r = 0; r < w; r++) {
            CHECK_MSG(ranks[r].err == SL_OK, "rank %u: %s (%s)", r, sl_errname(ranks[r].err),
                      ranks[r].why);
            CHECK_MSG(memcmp(out[r][c], want[r], count * sizeof(float)) == 0,
                      "call %d: rank %u differs from the oracle", c, r);
            free(want[r]);
        }
    }
    for (uint32_t r = 0; r < w; r++)
        for (int c = 0; c < calls; c++) {
            free(in[r][c]);
            free(out[r][c]);
        }
    release(ranks, w);
}

static void test_keyed(void) {
    sl_net_key_t key, other;
    CHECK_OK(sl_net_key_generate(&key));
    CHECK_OK(sl_net_key_generate(&other));
    /* every rank keyed: the oracle's bits */
    uint32_t w = 3;
    uint64_t count = 300001;
    rank_t ranks[MAXW];
    float *want[MAXW];
    setup(ranks, w, count, 0, 0, &rng);
    for (uint32_t r = 0; r < w; r++) {
        ranks[r].cfg.key = &key;
        ranks[r].cfg.transport = SL_RING_AUTO; /* a key: zmq */
        want[r] = malloc(count * sizeof(float));
        memcpy(want[r], ranks[r].buf, count * sizeof(float));
    }
    oracle(w, count, SL_RING_LINK_CHUNK_BYTES / sizeof(float), (float)w, want);
    run(ranks, w);
    for (uint32_t r = 0; r < w; r++) {
        CHECK_MSG(ranks[r].err == SL_OK, "keyed rank %u: %s (%s)", r, sl_errname(ranks[r].err),
                  ranks[r].why);
        CHECK(memcmp(ranks[r].buf, want[r], count * sizeof(float)) == 0);
        free(want[r]);
    }
    release(ranks, w);

    /* rank 1 holds another key: it and the others fail, none hangs; rank
     * 1, dialling a server of the cluster's key, sees its handshake fail */
    setup(ranks, w, count, 0, 0, &rng);
    for (uint32_t r = 0; r < w; r++) {
        ranks[r].cfg.key = r == 1 ? &other : &key;
        ranks[r].cfg.transport = SL_RING_AUTO;
        ranks[r].cfg.timeout_ms = 2000;
    }
    run(ranks, w);
    int auth = 0;
    for (uint32_t r = 0; r < w; r++) {
        CHECK_MSG(ranks[r].err == SL_EAUTH || ranks[r].err == SL_ECLOSED ||
                      ranks[r].err == SL_ETIMEDOUT,
                  "wrong key, rank %u: %s (%s)", r, sl_errname(ranks[r].err), ranks[r].why);
        CHECK_MSG(ranks[r].took_ms < 2000 + 3000, "wrong key, rank %u took %llu ms", r,
                  (unsigned long long)ranks[r].took_ms);
        auth += ranks[r].err == SL_EAUTH;
    }
    /* a handshake failed somewhere (which rank sees it first is a race:
     * the others may see their neighbour close first) */
    CHECK_MSG(auth >= 1, "wrong key: no rank saw the handshake fail (%s, %s, %s)",
              sl_errname(ranks[0].err), sl_errname(ranks[1].err), sl_errname(ranks[2].err));
    /* an open rank in a keyed ring fails too */
    release(ranks, w);
    setup(ranks, w, count, 0, 0, &rng);
    for (uint32_t r = 0; r < w; r++) {
        ranks[r].cfg.key = r == 2 ? NULL : &key;
        ranks[r].cfg.transport = SL_RING_ZMQ; /* (an open rank on tcp would not even dial) */
        ranks[r].cfg.timeout_ms = 2000;
    }
    run(ranks, w);
    for (uint32_t r = 0; r < w; r++)
        CHECK_MSG(ranks[r].err != SL_OK && ranks[r].took_ms < 5000,
                  "an open rank in a keyed ring, rank %u: %s after %llu ms", r,
                  sl_errname(ranks[r].err), (unsigned long long)ranks[r].took_ms);
    release(ranks, w);
}

/* A message of another job: rank 2's receive is a protocol error. */
static void test_mismatch(void) {
    uint32_t w = 3;
    rank_t ranks[MAXW];
    setup(ranks, w, 10000, 0, 0, &rng);
    for (uint32_t r = 0; r < w; r++)
        ranks[r].cfg.timeout_ms = 2000;
    ranks[1].cfg.job ^= 1;
    run(ranks, w);
    /* the first rank to receive a message of the other job says so (the
     * others may see that rank's sockets close first) */
    int proto = 0;
    for (uint32_t r = 0; r < w; r++) {
        proto += ranks[r].err == SL_EPROTO && strstr(ranks[r].why, "unexpected ring message");
        CHECK_MSG(ranks[r].err != SL_OK && ranks[r].took_ms < 5000, "rank %u: %s after %llu ms",
                  r, sl_errname(ranks[r].err), (unsigned long long)ranks[r].took_ms);
    }
    CHECK_MSG(proto >= 1, "no rank saw the other job's message (%s, %s, %s)",
              sl_errname(ranks[0].err), sl_errname(ranks[1].err), sl_errname(ranks[2].err));
    /* a different length (the count) is one too */
    release(ranks, w);
    setup(ranks, w, 10000, 0, 0, &rng);
    for (uint32_t r = 0; r < w; r++)
        ranks[r].cfg.timeout_ms = 2000;
    ranks[0].count = 9000;
    run(ranks, w);
    CHECK_MSG(ranks[1].err == SL_EPROTO || ranks[2].err == SL_EPROTO || ranks[0].err == SL_EPROTO,
              "a shorter count: %s, %s, %s", sl_errname(ranks[0].err), sl_errname(ranks[1].err),
              sl_errname(ranks[2].err));
    release(ranks, w);
}

/* Rank 2 of 4 closes its sockets after some sends: the others get an
 * error within the timeout, none hangs. */
static void test_death(void) {
    uint32_t w = 4, timeout_ms = 3000;
    uint64_t afters[] = {1, 7, 80}; /* 96 sends in all */
    for (size_t i = 0; i < sizeof afters / sizeof afters[0]; i++) {
        rank_t ranks[MAXW];
        setup(ranks, w, (uint64_t)4 << 20, 65536, 4, &rng);
        for (uint32_t r = 0; r < w; r++)
            ranks[r].cfg.timeout_ms = timeout_ms;
        ranks[2].die_after = afters[i];
        uint64_t t0 = sl_plat_now_ns();
        run(ranks, w);
        uint64_t took = (sl_plat_now_ns() - t0) / 1000000;
        CHECK_ERR(ranks[2].err, SL_ECLOSED);
        for (uint32_t r = 0; r < w; r++) {
            CHECK_MSG(ranks[r].err == SL_ECLOSED || ranks[r].err == SL_ETIMEDOUT,
                      "death after %llu sends, rank %u: %s (%s)", (unsigned long long)afters[i],
                      r, sl_errname(ranks[r].err), ranks[r].why);
        }
        /* once every rank has passed the whole ring (step 4 of 6), rank 3
         * has rank 2's connection and sees it break, not the timeout */
        CHECK_MSG(afters[i] < 80 || ranks[3].err == SL_ECLOSED, "rank 3: %s (%s)",
                  sl_errname(ranks[3].err),
                  ranks[3].why);
        CHECK_MSG(took < timeout_ms + 2000, "death after %llu sends: the ring ended after %llu ms",
                  (unsigned long long)afters[i], (unsigned long long)took);
        if (sl_test_failures == 0 && getenv("SL_VERBOSE"))
            fprintf(stderr, "death after %llu sends: ended in %llu ms (%s / %s / %s / %s)\n",
                    (unsigned long long)afters[i], (unsigned long long)took,
                    sl_errname(ranks[0].err), sl_errname(ranks[1].err), sl_errname(ranks[2].err),
                    sl_errname(ranks[3].err));
        release(ranks, w);
    }
}

static void test_args(void) {
    sl_ring_link_t *l = NULL;
    sl_ring_link_cfg_t cfg = {.world = 2, .rank = 2, .transport = transport};
    CHECK_ERR(sl_ring_link_open(&cfg, &l), SL_EINVAL);
    cfg.rank = 0; /* no endpoints */
    CHECK_ERR(sl_ring_link_open(&cfg, &l), SL_EINVAL);
    /* the transport by the key: tcp without one, zmq with one; tcp with a
     * key would send it in the clear */
    sl_net_key_t key;
    CHECK_OK(sl_net_key_generate(&key));
    cfg = (sl_ring_link_cfg_t){.world = 1};
    CHECK_OK(sl_ring_link_open(&cfg, &l));
    CHECK(sl_ring_link_transport(l) == SL_RING_TCP);
    sl_ring_link_close(&l);
    cfg.key = &key;
    CHECK_OK(sl_ring_link_open(&cfg, &l));
    CHECK(sl_ring_link_transport(l) == SL_RING_ZMQ);
    sl_ring_link_close(&l);
    cfg.transport = SL_RING_TCP;
    CHECK_ERR(sl_ring_link_open(&cfg, &l), SL_EINVAL);
    cfg = (sl_ring_link_cfg_t){.world = 1, .transport = transport};
    CHECK_OK(sl_ring_link_open(&cfg, &l));
    float x[3] = {2, 4, 6};
    CHECK_ERR(sl_ring_link_allreduce(l, x, 3, 0), SL_EINVAL);
    CHECK_OK(sl_ring_link_allreduce(l, x, 3, 2));
    CHECK(x[0] == 1 && x[1] == 2 && x[2] == 3);
    sl_ring_link_close(&l);
    sl_ring_link_close(&l); /* idempotent */
    /* an endpoint already bound: SL_EIO, no link */
    pick_endpoints(2, &rng);
    const char *eps[2] = {eps_text[0], eps_text[1]};
    cfg = (sl_ring_link_cfg_t){.world = 2, .rank = 0, .endpoints = eps, .transport = transport};
    sl_ring_link_t *a = NULL, *b = (sl_ring_link_t *)&cfg;
    CHECK_OK(sl_ring_link_open(&cfg, &a));
    CHECK_ERR(sl_ring_link_open(&cfg, &b), SL_EIO);
    CHECK(b == NULL);
    sl_ring_link_close(&a);
    /* an endpoint that is not tcp://HOST:PORT */
    const char *bad[2] = {"tcp://127.0.0.1", eps_text[1]};
    cfg.endpoints = bad;
    CHECK(sl_ring_link_open(&cfg, &a) != SL_OK);
    CHECK(a == NULL);
}

/* A world changes: rank 1's port is still held by its link of the round
 * before when rank 0 of the new round connects (the old link drops the
 * new round's HELLO and closes). The new round completes once rank 1's
 * new link binds: no error, the oracle's bits. */
static void test_stale_port(void) {
    rank_t ranks[MAXW];
    setup(ranks, 2, 100000, 0, 0, &rng);
    float *want[2];
    want_of(ranks, 2, want);
    /* the old round's link on rank 1's endpoint */
    const char *old_eps[2] = {"tcp://127.0.0.1:1", eps_text[1]};
    sl_ring_link_cfg_t oc = {.job = 0x5157a11e, .round = 6, .world = 2, .rank = 1,
                             .endpoints = old_eps, .timeout_ms = 5000, .transport = transport};
    sl_ring_link_t *old = NULL;
    CHECK_OK(sl_ring_link_open(&oc, &old));
    pthread_t th[2];
    pthread_create(&th[0], NULL, rank_main, &ranks[0]);
    /* rank 0 greets rank 1's port, held by the old link, for a while */
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL); /* the overlap whose effect is checked below */
    sl_ring_link_close(&old);
    pthread_create(&th[1], NULL, rank_main, &ranks[1]);
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    check_want(ranks, 2, want, "after a stale link on the port");
    release(ranks, 2);
}

/* sl_ring_link_abort ends a call waiting for a rank that never comes,
 * long before the timeout. */
typedef struct {
    sl_ring_link_t *link;
    float buf[64];
    sl_err err;
} abort_ctx_t;

static void *abort_main(void *arg) {
    abort_ctx_t *a = arg;
    a->err = sl_ring_link_allreduce(a->link, a->buf, 64, 1.0f);
    return NULL;
}

static void test_abort(void) {
    pick_endpoints(2, &rng);
    const char *eps[2] = {eps_text[0], eps_text[1]};
    sl_ring_link_cfg_t c = {.job = 1, .round = 3, .world = 2, .rank = 0, .endpoints = eps,
                            .timeout_ms = 20000, .transport = transport};
    abort_ctx_t a = {0};
    CHECK_OK(sl_ring_link_open(&c, &a.link));
    pthread_t th;
    uint64_t t0 = sl_plat_now_ns();
    pthread_create(&th, NULL, abort_main, &a);
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL); /* let the call wait */
    sl_ring_link_abort(a.link);
    pthread_join(th, NULL);
    uint64_t ms = (sl_plat_now_ns() - t0) / 1000000;
    CHECK_ERR(a.err, SL_ECLOSED);
    CHECK(strstr(sl_ring_link_error(a.link), "asked to") != NULL);
    CHECK_MSG(ms < 2000, "the aborted call took %llu ms", (unsigned long long)ms);
    sl_ring_link_close(&a.link);
}

/* A raw connection to 127.0.0.1:port once something listens there
 * (within 5 s), with a 5 s receive timeout; -1 if it never did. */
static int dial_raw(unsigned port) {
    uint64_t until = sl_plat_now_ns() + 5000000000ull;
    while (sl_plat_now_ns() < until) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            struct timeval tv = {.tv_sec = 5};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            return fd;
        }
        if (fd >= 0)
            close(fd);
        struct timespec ts = {0, 10 * 1000000L}; /* a retry's pause, not a condition */
        nanosleep(&ts, NULL);
    }
    return -1;
}

/* Whether the link closed a raw connection (EOF or reset, not the 5 s
 * timeout), reading whatever it sent first. */
static bool closed_by_peer(int fd) {
    char b[64];
    for (;;) {
        ssize_t n = recv(fd, b, sizeof b, 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return true;
        if (n < 0)
            return false;
    }
}

/* Over TCP, before rank 0 of round 7 reaches rank 1, three others do: a
 * stranger that sends 40 bytes of garbage, rank 0's link of round 6 (a
 * stale HELLO) and one that connects and says nothing. Rank 1 drops the
 * first two (they see the connection close), the ring completes with the
 * oracle's bits, and nothing anyone sent reached the buffer. */
static void test_strangers(void) {
    rank_t ranks[MAXW];
    setup(ranks, 2, 300001, 0, 0, &rng);
    float *want[2];
    want_of(ranks, 2, want);
    unsigned port1 = (unsigned)atoi(strrchr(eps_text[1], ':') + 1);
    pthread_t th[2];
    pthread_create(&th[1], NULL, rank_main, &ranks[1]);
    int garbage = dial_raw(port1), stale = dial_raw(port1), silent = dial_raw(port1);
    CHECK_MSG(garbage >= 0 && stale >= 0 && silent >= 0, "rank 1 never listened");
    uint8_t junk[SL_RING_WIRE_FRAME_LEN + 8];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)sl_rng_below(&rng, 256);
    uint8_t hello[SL_RING_WIRE_FRAME_LEN];
    sl_ring_hdr_t h = {.job = ranks[0].cfg.job, .round = 6, .step = SL_RING_LINK_HELLO,
                       .chunk = 0};
    sl_ring_frame_put(hello, &h, 0);
    CHECK(send(garbage, junk, sizeof junk, MSG_NOSIGNAL) == (ssize_t)sizeof junk);
    CHECK(send(stale, hello, sizeof hello, MSG_NOSIGNAL) == (ssize_t)sizeof hello);
    pthread_create(&th[0], NULL, rank_main, &ranks[0]);
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    CHECK_MSG(closed_by_peer(garbage), "the garbage's connection was not closed");
    CHECK_MSG(closed_by_peer(stale), "the stale round's connection was not closed");
    check_want(ranks, 2, want, "beside strangers");
    close(garbage);
    close(stale);
    close(silent);
    release(ranks, 2);
}

/* proto/elastic.md 5.3's vectors: the TCP frames' 40-byte prefixes, and
 * what the greeting check makes of a HELLO. */
static void test_wire(void) {
    struct {
        sl_ring_hdr_t h;
        uint64_t len;
        const char *hex;
    } v[] = {
        {{0x5157a11e, 7, 0, SL_RING_LINK_HELLO, 0}, 0,
         "1ea1575100000000070000000000000000000000feffffff00000000000000000000000000000000"},
        {{0x5157a11e, 7, 0, SL_RING_LINK_WELCOME, 1}, 0,
         "1ea1575100000000070000000000000000000000fdffffff01000000000000000000000000000000"},
        {{0x5157a11e, 7, 2, 1, 3}, 262144,
         "1ea15751000000000700000000000000020000000100000003000000000000000000040000000000"},
        {{0x5157a11e, 7, 2, SL_RING_LINK_DONE, 0}, 0,
         "1ea1575100000000070000000000000002000000ffffffff00000000000000000000000000000000"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t f[SL_RING_WIRE_FRAME_LEN];
        char hex[2 * sizeof f + 1];
        sl_ring_frame_put(f, &v[i].h, v[i].len);
        for (size_t j = 0; j < sizeof f; j++)
            snprintf(hex + 2 * j, 3, "%02x", f[j]);
        CHECK_MSG(strcmp(hex, v[i].hex) == 0, "vector %zu: %s", i, hex);
        sl_ring_hdr_t back;
        uint64_t len;
        sl_ring_frame_get(f, &back, &len);
        CHECK(memcmp(&back, &v[i].h, sizeof back) == 0 && len == v[i].len);
    }
    char why[200];
    sl_ring_hdr_t hello = v[0].h;
    CHECK(sl_ring_greet_check(&hello, 0, 0x5157a11e, 7, 0, why, sizeof why) == SL_RING_GREET_OK);
    CHECK(sl_ring_greet_check(&hello, 0, 0x5157a11e, 8, 0, why, sizeof why) ==
          SL_RING_GREET_STRAY); /* another round */
    CHECK(sl_ring_greet_check(&hello, 0, 0x5157a11e, 7, 1, why, sizeof why) ==
          SL_RING_GREET_STRAY); /* another rank */
    CHECK(sl_ring_greet_check(&hello, 4, 0x5157a11e, 7, 0, why, sizeof why) ==
          SL_RING_GREET_STRAY); /* a payload */
    CHECK(sl_ring_greet_check(&hello, 0, 0x5157a11f, 7, 0, why, sizeof why) ==
          SL_RING_GREET_FOREIGN);
    CHECK(strstr(why, "a hello of job 000000005157a11e") != NULL);
    CHECK_ERR(sl_ring_hdr_check(&v[2].h, true, 262144, &v[2].h, 262140, why, sizeof why),
              SL_EPROTO);
    CHECK(strstr(why, "with 262144 bytes") && strstr(why, "with 262140"));
}

int main(void) {
    uint64_t seed = getenv("SL_SEED") ? strtoull(getenv("SL_SEED"), NULL, 10)
                                      : sl_plat_now_ns() ^ (uint64_t)getpid();
    fprintf(stderr, "seed %llu (SL_SEED=%llu replays it)\n", (unsigned long long)seed,
            (unsigned long long)seed);
    sl_rng_seed(&rng, seed);
    sl_test_run("wire", test_wire);
    sl_ring_transport_t both[] = {SL_RING_TCP, SL_RING_ZMQ};
    for (size_t i = 0; i < sizeof both / sizeof both[0]; i++) {
        transport = both[i];
        char name[64];
#define RUN(t)                                                                           \
    (snprintf(name, sizeof name, "%s_%s", #t, transport_name(transport)),                \
     sl_test_run(name, test_##t))
        RUN(args);
        RUN(lengths);
        RUN(chunks_and_windows);
        RUN(calls);
        RUN(mismatch);
        RUN(death);
        RUN(stale_port);
        RUN(abort);
#undef RUN
    }
    sl_test_run("keyed", test_keyed);
    transport = SL_RING_TCP;
    sl_test_run("strangers_tcp", test_strangers);
    return sl_test_finish();
}
