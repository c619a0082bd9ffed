/* Hybrid logical clock: monotonic, causal, close to wall time, and the
 * offset check that names the sender. */
#include "starling/hlc.h"
#include "starling/rng.h"
#include "testlib.h"

static void test_monotonic_and_wall(void) {
    sl_hlc_t c;
    sl_hlc_init(&c, 100);
    uint64_t a = sl_hlc_now(&c, 1000);
    CHECK_INT(sl_hlc_ms(a), 1000);
    uint64_t b = sl_hlc_now(&c, 1000); /* same ms: logical grows */
    CHECK(b > a);
    CHECK_INT(sl_hlc_ms(b), 1000);
    uint64_t d = sl_hlc_now(&c, 900); /* wall clock stepped back */
    CHECK(d > b);
    uint64_t e = sl_hlc_now(&c, 2000);
    CHECK_INT(e, sl_hlc_make(2000, 0));
}

static void test_receive_is_causal(void) {
    sl_hlc_t a, b;
    sl_hlc_init(&a, 100);
    sl_hlc_init(&b, 100);
    uint64_t ta = sl_hlc_now(&a, 5050); /* a's clock runs 50 ms ahead */
    uint64_t tb;
    CHECK_OK(sl_hlc_update(&b, 5000, ta, 7, &tb));
    CHECK(tb > ta);
    CHECK(sl_hlc_now(&b, 5000) > ta);
}

static void test_reject_far_ahead(void) {
    sl_hlc_t c;
    sl_hlc_init(&c, 100);
    uint64_t before = sl_hlc_now(&c, 1000);
    uint64_t out = 0;
    CHECK_ERR(sl_hlc_update(&c, 1000, sl_hlc_make(1101, 0), 0xabc, &out), SL_ERANGE);
    CHECK_INT(c.rejected, 1);
    CHECK_INT(c.last_offender, 0xabc);
    CHECK_INT(c.last, before);                        /* unchanged */
    CHECK_OK(sl_hlc_update(&c, 1000, sl_hlc_make(1100, 3), 0xabd, &out)); /* at the limit */
    CHECK(out > sl_hlc_make(1100, 3));
}

static void test_random_monotonic(void) {
    sl_rng_t r;
    sl_rng_seed(&r, 42);
    sl_hlc_t c;
    sl_hlc_init(&c, 1000);
    uint64_t prev = 0, wall = 100000;
    for (int i = 0; i < 100000; i++) {
        wall += sl_rng_below(&r, 3);
        uint64_t t;
        if (sl_rng_below(&r, 2)) {
            t = sl_hlc_now(&c, wall - sl_rng_below(&r, 50));
        } else {
            uint64_t remote = sl_hlc_make(wall + sl_rng_below(&r, 1200), (uint32_t)sl_rng_below(&r, 9));
            if (sl_hlc_update(&c, wall, remote, 1, &t) != SL_OK)
                continue;
            CHECK(t > remote);
        }
        CHECK(t > prev);
        prev = t;
    }
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR);
    sl_test_run("monotonic_and_wall", test_monotonic_and_wall);
    sl_test_run("receive_is_causal", test_receive_is_causal);
    sl_test_run("reject_far_ahead", test_reject_far_ahead);
    sl_test_run("random_monotonic", test_random_monotonic);
    return sl_test_finish();
}
