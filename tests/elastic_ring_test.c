/* The ring all-reduce schedule (src/elastic/ring.c), run by W ranks in
 * memory that pass messages through one FIFO per link in a random
 * interleaving (a rank that waits for a message lets another run): for
 * random W (1..8), lengths (0, below W, not divisible by W, large) and
 * chunk sizes, every rank ends with the element-wise average, all with the
 * same bits; every message arrives where and with the length the
 * receiver's schedule expects; nobody waits forever. */
#include <math.h>
#include <stdlib.h>

#include "starling/elastic.h"
#include "starling/rng.h"
#include "testlib.h"

#define MAXW 8
#define QCAP 4096

typedef struct {
    uint32_t step;   /* sender's op */
    uint64_t chunk;  /* ditto */
    uint64_t len;    /* elements */
    float *data;     /* owned copy */
} msg_t;

typedef struct {
    msg_t q[QCAP];   /* FIFO from rank-1 */
    size_t head, tail;
} link_t;

typedef struct {
    sl_ring_iter_t it;
    sl_ring_op_t op;  /* current op */
    bool have_op;     /* op is loaded */
    bool sent;        /* its send is done */
    bool done;        /* no more ops */
    float *buf;
} rank_t;

static link_t links[MAXW]; /* links[r]: messages into rank r */

static int ring_once(uint32_t w, uint64_t count, uint64_t chunk, sl_rng_t *rng, int *max_inflight) {
    rank_t ranks[MAXW];
    double *want = calloc(count ? count : 1, sizeof *want);
    memset(ranks, 0, sizeof ranks);
    memset(links, 0, sizeof links);
    for (uint32_t r = 0; r < w; r++) {
        sl_ring_cfg_t cfg = {.world = w, .rank = r, .count = count, .chunk = chunk};
        CHECK_OK(sl_ring_iter_init(&ranks[r].it, &cfg));
        ranks[r].buf = calloc(count ? count : 1, sizeof(float));
        for (uint64_t i = 0; i < count; i++) {
            ranks[r].buf[i] = (float)(sl_rng_double(rng) * 2 - 1);
            want[i] += ranks[r].buf[i];
        }
    }
    for (uint64_t i = 0; i < count; i++)
        want[i] /= w;
    int failures = 0;
    uint32_t active = w;
    long idle = 0;
    while (active > 0 && idle < 100000) {
        uint32_t r = (uint32_t)sl_rng_below(rng, w);
        rank_t *k = &ranks[r];
        if (k->done) {
            idle++;
            continue;
        }
        if (!k->have_op) {
            if (!sl_ring_next(&k->it, &k->op)) {
                k->done = true;
                active--;
                continue;
            }
            k->have_op = true;
            k->sent = false;
        }
        sl_ring_op_t *op = &k->op;
        if (!k->sent) {
            if (op->has_send) {
                if (op->finalize)
                    for (uint64_t i = 0; i < op->send_len; i++)
                        k->buf[op->send_off + i] /= (float)w;
                link_t *l = &links[(r + 1) % w];
                if (l->tail - l->head == QCAP) {
                    failures++;
                    break;
                }
                msg_t *m = &l->q[l->tail++ % QCAP];
                m->step = op->step;
                m->chunk = op->chunk;
                m->len = op->send_len;
                m->data = malloc(op->send_len * sizeof(float));
                memcpy(m->data, k->buf + op->send_off, op->send_len * sizeof(float));
                if ((int)(l->tail - l->head) > *max_inflight)
                    *max_inflight = (int)(l->tail - l->head);
            }
            k->sent = true;
        }
        if (op->has_recv) {
            link_t *l = &links[r];
            if (l->head == l->tail) { /* wait: someone else runs */
                idle++;
                continue;
            }
            msg_t *m = &l->q[l->head++ % QCAP];
            CHECK_MSG(m->step == op->step && m->chunk == op->chunk && m->len == op->recv_len,
                      "W %u count %llu chunk %llu: rank %u expects step %u chunk %llu len %llu, "
                      "gets step %u chunk %llu len %llu", w, (unsigned long long)count,
                      (unsigned long long)chunk, r, op->step, (unsigned long long)op->chunk,
                      (unsigned long long)op->recv_len, m->step, (unsigned long long)m->chunk,
                      (unsigned long long)m->len);
            uint64_t n = m->len < op->recv_len ? m->len : op->recv_len;
            for (uint64_t i = 0; i < n; i++) {
                if (op->reduce)
                    k->buf[op->recv_off + i] += m->data[i];
                else
                    k->buf[op->recv_off + i] = m->data[i];
            }
            free(m->data);
        }
        k->have_op = false;
        idle = 0;
    }
    CHECK_MSG(active == 0, "W %u count %llu chunk %llu: %u ranks never finished", w,
              (unsigned long long)count, (unsigned long long)chunk, active);
    for (uint32_t r = 0; r < w; r++) {
        CHECK_MSG(links[r].head == links[r].tail, "rank %u has %zu messages left", r,
                  links[r].tail - links[r].head);
        while (links[r].head < links[r].tail)
            free(links[r].q[links[r].head++ % QCAP].data);
    }
    for (uint64_t i = 0; i < count && active == 0; i++) {
        double tol = 1e-5 * w;
        if (fabs(ranks[0].buf[i] - want[i]) > tol) {
            CHECK_MSG(false, "W %u count %llu chunk %llu: element %llu is %g, the average %g", w,
                      (unsigned long long)count, (unsigned long long)chunk,
                      (unsigned long long)i, ranks[0].buf[i], want[i]);
            break;
        }
        for (uint32_t r = 1; r < w; r++)
            if (memcmp(&ranks[r].buf[i], &ranks[0].buf[i], sizeof(float)) != 0) {
                CHECK_MSG(false, "W %u: ranks 0 and %u differ at element %llu", w, r,
                          (unsigned long long)i);
                i = count;
                break;
            }
    }
    for (uint32_t r = 0; r < w; r++)
        free(ranks[r].buf);
    free(want);
    return failures;
}

static void test_average(void) {
    sl_rng_t rng;
    sl_rng_seed(&rng, 13);
    int pipelined = 0, cases = 0;
    for (uint32_t w = 1; w <= MAXW; w++) {
        uint64_t lens[] = {0, 1, w - 1, w, w + 1, 7 * w + 3, 1000, 4096 + w / 2};
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
            for (int c = 0; c < 6; c++) {
                uint64_t chunk = c == 0 ? 1 : c == 1 ? 1000000 : 1 + sl_rng_below(&rng, 100);
                int inflight = 0;
                CHECK_INT(ring_once(w, lens[li], chunk, &rng, &inflight), 0);
                pipelined += inflight > 1;
                cases++;
                if (sl_test_failures)
                    return;
            }
    }
    for (int i = 0; i < 200; i++) { /* and random ones */
        uint32_t w = 1 + (uint32_t)sl_rng_below(&rng, MAXW);
        int inflight = 0;
        CHECK_INT(ring_once(w, sl_rng_below(&rng, 3000), 1 + sl_rng_below(&rng, 300), &rng,
                            &inflight), 0);
        if (sl_test_failures)
            return;
    }
    CHECK(pipelined > cases / 4); /* chunks did overlap */
}

/* The schedule's shape: 2(W-1) steps, each segment's chunks in order, the
 * owner's segment finalized once. */
static void test_shape(void) {
    sl_ring_iter_t it;
    sl_ring_cfg_t cfg = {.world = 3, .rank = 1, .count = 10, .chunk = 2};
    CHECK_OK(sl_ring_iter_init(&it, &cfg));
    sl_ring_op_t op;
    int ops = 0, finals = 0;
    uint32_t last_step = 0;
    uint64_t fin_off = 99, fin_len = 0;
    while (sl_ring_next(&it, &op)) {
        ops++;
        CHECK(op.step >= last_step);
        last_step = op.step;
        CHECK_INT(op.reduce, op.step < 2);
        if (op.finalize) {
            finals++;
            if (fin_off == 99)
                fin_off = op.send_off;
            fin_len += op.send_len;
        }
    }
    CHECK_INT(last_step, 3);
    CHECK_INT(ops, 4 * 2); /* segments of 3, 3, 4: two chunks each, 4 steps */
    uint64_t off, len;
    sl_ring_segment(3, 10, 2, &off, &len); /* rank 1 owns segment 2 */
    CHECK_INT(fin_off, off);
    CHECK_INT(fin_len, len);
    CHECK_INT(finals, 2);
    cfg.world = 1;
    cfg.rank = 0;
    CHECK_OK(sl_ring_iter_init(&it, &cfg));
    CHECK(!sl_ring_next(&it, &op)); /* a world of one has nothing to do */
    cfg.rank = 1;
    CHECK_ERR(sl_ring_iter_init(&it, &cfg), SL_EINVAL);
    cfg.rank = 0;
    cfg.chunk = 0;
    CHECK_ERR(sl_ring_iter_init(&it, &cfg), SL_EINVAL);
    /* segments cover the buffer, in order, for sizes that overflow a
     * naive count * seg */
    uint64_t big = UINT64_MAX / 3, end = 0;
    for (uint32_t s = 0; s < 7; s++) {
        sl_ring_segment(7, big, s, &off, &len);
        CHECK_INT(off, end);
        end = off + len;
    }
    CHECK(end == big);
}

int main(void) {
    sl_test_run("shape", test_shape);
    sl_test_run("average", test_average);
    return sl_test_finish();
}
