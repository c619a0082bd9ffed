/* The data-parallel step schedule (src/elastic/schedule.c). E4: every
 * sample is seen exactly once per epoch whatever the world size does,
 * with the world changing at random steps and an interrupted step redone
 * by the next world; each step's slices are disjoint, in rank order, and
 * cover the step's global batch; the epoch orders are permutations, the
 * same on every call and different from one epoch to the next. */
#include <stdlib.h>

#include "starling/elastic.h"
#include "starling/rng.h"
#include "testlib.h"

static void test_order_is_a_permutation(void) {
    sl_elastic_sched_t s = {.seed = 42, .sample_count = 1000, .global_batch = 64};
    uint32_t *a = calloc(1000, sizeof *a), *b = calloc(1000, sizeof *b);
    uint8_t *seen = calloc(1000, 1);
    CHECK_OK(sl_elastic_epoch_order(&s, 3, a));
    for (int i = 0; i < 1000; i++) {
        CHECK(a[i] < 1000);
        if (a[i] < 1000)
            seen[a[i]]++;
    }
    for (int i = 0; i < 1000; i++)
        CHECK_INT(seen[i], 1);
    CHECK_OK(sl_elastic_epoch_order(&s, 3, b));
    CHECK(memcmp(a, b, 1000 * sizeof *a) == 0); /* the same on every peer */
    CHECK_OK(sl_elastic_epoch_order(&s, 4, b));
    CHECK(memcmp(a, b, 1000 * sizeof *a) != 0); /* a new order each epoch */
    s.seed = 43;
    CHECK_OK(sl_elastic_epoch_order(&s, 3, b));
    CHECK(memcmp(a, b, 1000 * sizeof *a) != 0); /* and each job */
    free(a);
    free(b);
    free(seen);
}

static void test_batches(void) {
    sl_elastic_sched_t s = {.seed = 1, .sample_count = 10, .global_batch = 4};
    CHECK_INT(sl_elastic_steps_per_epoch(&s), 3);
    sl_elastic_batch_t b;
    CHECK_OK(sl_elastic_batch(&s, 0, 0, 3, &b)); /* 4 over 3 ranks: 1, 1, 2 */
    CHECK_INT(b.epoch, 0);
    CHECK_INT(b.cursor, 0);
    CHECK_INT(b.total, 4);
    CHECK_INT(b.offset, 0);
    CHECK_INT(b.count, 1);
    CHECK_OK(sl_elastic_batch(&s, 0, 2, 3, &b));
    CHECK_INT(b.offset, 2);
    CHECK_INT(b.count, 2);
    CHECK_OK(sl_elastic_batch(&s, 2, 0, 1, &b)); /* the epoch's last step: what is left */
    CHECK_INT(b.cursor, 8);
    CHECK_INT(b.total, 2);
    CHECK_INT(b.count, 2);
    CHECK_OK(sl_elastic_batch(&s, 2, 2, 3, &b)); /* more ranks than samples */
    CHECK_INT(b.total, 2);
    CHECK_INT(b.offset + b.count, 10);
    CHECK_OK(sl_elastic_batch(&s, 7, 0, 2, &b)); /* step 7: epoch 2, its second step */
    CHECK_INT(b.epoch, 2);
    CHECK_INT(b.cursor, 4);
    CHECK_ERR(sl_elastic_batch(&s, 0, 3, 3, &b), SL_EINVAL);
    CHECK_ERR(sl_elastic_batch(&s, 0, 0, 0, &b), SL_EINVAL);
    sl_elastic_sched_t bad = {.seed = 1, .sample_count = 0, .global_batch = 4};
    CHECK_ERR(sl_elastic_batch(&bad, 0, 0, 1, &b), SL_EINVAL);
    bad.sample_count = 10;
    bad.global_batch = 0;
    CHECK_ERR(sl_elastic_batch(&bad, 0, 0, 1, &b), SL_EINVAL);
    CHECK_INT(sl_elastic_steps_per_epoch(&bad), 0);
}

/* E4 under random world changes. */
static void test_every_sample_once_per_epoch(void) {
    sl_rng_t rng;
    sl_rng_seed(&rng, 2026);
    int changes = 0, redone = 0;
    for (int trial = 0; trial < 300; trial++) {
        sl_elastic_sched_t s = {.seed = sl_rng_next(&rng),
                                .sample_count = 1 + sl_rng_below(&rng, 700),
                                .global_batch = 1 + (uint32_t)sl_rng_below(&rng, 80)};
        uint64_t n = s.sample_count, per = sl_elastic_steps_per_epoch(&s);
        uint32_t *order = calloc(n, sizeof *order);
        uint32_t *seen = calloc(n, sizeof *seen);
        uint32_t world = 1 + (uint32_t)sl_rng_below(&rng, 9);
        uint64_t epoch = 0;
        CHECK_OK(sl_elastic_epoch_order(&s, 0, order));
        for (uint64_t step = 0; step < 3 * per;) {
            if (sl_rng_below(&rng, 5) == 0) { /* the world changes at this boundary */
                world = 1 + (uint32_t)sl_rng_below(&rng, 9);
                changes++;
            }
            /* sometimes a member dies mid-step: nothing of it is applied,
             * and the next world redoes the same step */
            bool interrupted = sl_rng_below(&rng, 10) == 0;
            uint64_t next = s.sample_count; /* where this step's slices must end */
            uint64_t expect = 0;
            for (uint32_t r = 0; r < world; r++) {
                sl_elastic_batch_t b;
                CHECK_OK(sl_elastic_batch(&s, step, r, world, &b));
                CHECK_INT(b.epoch, step / per);
                if (r == 0)
                    expect = b.cursor;
                CHECK_INT(b.offset, expect); /* contiguous, in rank order */
                expect = b.offset + b.count;
                next = b.cursor + b.total;
                if (interrupted)
                    continue;
                if (b.epoch != epoch) { /* an epoch ended: every sample exactly once */
                    for (uint64_t i = 0; i < n; i++)
                        CHECK_MSG(seen[i] == 1, "trial %d epoch %llu: sample %llu seen %u times",
                                  trial, (unsigned long long)epoch, (unsigned long long)i,
                                  seen[i]);
                    memset(seen, 0, n * sizeof *seen);
                    epoch = b.epoch;
                    CHECK_OK(sl_elastic_epoch_order(&s, epoch, order));
                }
                for (uint64_t i = b.offset; i < b.offset + b.count; i++)
                    seen[order[i]]++;
            }
            CHECK_INT(expect, next); /* the slices cover the step's batch */
            if (interrupted) {
                redone++;
                continue;
            }
            step++;
        }
        for (uint64_t i = 0; i < n; i++)
            CHECK_MSG(seen[i] == 1, "trial %d last epoch: sample %llu seen %u times", trial,
                      (unsigned long long)i, seen[i]);
        free(order);
        free(seen);
        if (sl_test_failures)
            break;
    }
    CHECK(changes > 1000);
    CHECK(redone > 500);
}

int main(void) {
    sl_test_run("order_is_a_permutation", test_order_is_a_permutation);
    sl_test_run("batches", test_batches);
    sl_test_run("every_sample_once_per_epoch", test_every_sample_once_per_epoch);
    return sl_test_finish();
}
