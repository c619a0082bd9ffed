/* Tests of the shared base: errors, rng, hashes, allocation hook, and
 * removing a directory tree. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "starling/common.h"
#include "starling/platform.h"
#include "starling/hash.h"
#include "starling/rng.h"
#include "testlib.h"

static void test_errors(void) {
    CHECK_STR(sl_errname(SL_EPROTO), "SL_EPROTO");
    CHECK_STR(sl_strerror(SL_OK), "success");
    CHECK_STR(sl_strerror((sl_err)9999), "unknown error");
    for (int e = 0; e < SL_ERR_COUNT; e++)
        CHECK_MSG(sl_strerror((sl_err)e) && sl_errname((sl_err)e)[0] == 'S', "code %d", e);
}

static void test_rng_reproducible(void) {
    sl_rng_t a, b;
    sl_rng_seed(&a, 42);
    sl_rng_seed(&b, 42);
    for (int i = 0; i < 1000; i++)
        CHECK(sl_rng_next(&a) == sl_rng_next(&b));
    sl_rng_seed(&b, 43);
    CHECK(sl_rng_next(&a) != sl_rng_next(&b));
    int counts[10] = {0};
    for (int i = 0; i < 100000; i++)
        counts[sl_rng_below(&a, 10)]++;
    for (int i = 0; i < 10; i++)
        CHECK_MSG(counts[i] > 9500 && counts[i] < 10500, "bucket %d: %d", i, counts[i]);
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        double d = sl_rng_double(&a);
        CHECK(d >= 0 && d < 1);
        sum += d;
    }
    CHECK_NEAR(sum / 100000, 0.5, 0.01);
}

static void test_hashes(void) {
    CHECK(sl_hash64("abc", 3, 1) == sl_hash64("abc", 3, 1));
    CHECK(sl_hash64("abc", 3, 1) != sl_hash64("abc", 3, 2));
    CHECK(sl_hrw_weight("a", 1, 7) != sl_hrw_weight("b", 1, 7));
    uint8_t h[SL_BLAKE2B_LEN];
    char hex[2 * SL_BLAKE2B_LEN + 1];
    sl_blake2b("", 0, h);
    sl_hex(h, sizeof h, hex);
    /* BLAKE2b-256 of the empty string (RFC 7693 parameters). */
    CHECK_STR(hex, "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8");
    uint8_t back[SL_BLAKE2B_LEN];
    CHECK(sl_unhex(hex, strlen(hex), back));
    CHECK(memcmp(back, h, sizeof h) == 0);
    CHECK(!sl_unhex("0e5", 3, back));  /* odd length */
    CHECK(!sl_unhex("0E57", 4, back)); /* upper case is not sl_hex's form */
    CHECK(!sl_unhex("0g57", 4, back));
    CHECK_INT(sl_crc32(0, "123456789", 9), 0xcbf43926u);
}

static void test_alloc_failure_injection(void) {
    int64_t live = sl_alloc_live();
    sl_alloc_fail_after(2, false);
    void *a = sl_malloc(8);
    void *b = sl_malloc(8);
    void *c = sl_malloc(8);
    CHECK(a != NULL);
    CHECK(b == NULL);
    CHECK(c != NULL);
    sl_free(a);
    sl_free(c);
    CHECK_INT(sl_alloc_live(), live);
    sl_alloc_fail_after(1, true);
    CHECK(sl_malloc(1) == NULL);
    CHECK(sl_malloc(1) == NULL);
    sl_alloc_fail_after(0, false);
    char *s = sl_strdup("hello");
    CHECK_STR(s, "hello");
    sl_free(s);
}

/* sl_plat_remove_tree removes nested directories, dotfiles and links,
 * and never follows a link out of the tree. */
static void test_remove_tree(void) {
    char base[] = "/tmp/sl-base-test.XXXXXX";
    CHECK(mkdtemp(base) != NULL);
    char root[512], p[600], outside[512];
    snprintf(root, sizeof root, "%s/tree", base);
    snprintf(outside, sizeof outside, "%s/outside", base);
    snprintf(p, sizeof p, "%s/a/b/c", root);
    CHECK_OK(sl_plat_mkdirs(p, 0700));
    CHECK_OK(sl_plat_write_file(outside, "keep", 4, 0600));
    snprintf(p, sizeof p, "%s/a/b/c/file", root);
    CHECK_OK(sl_plat_write_file(p, "x", 1, 0600));
    snprintf(p, sizeof p, "%s/a/.hidden", root);
    CHECK_OK(sl_plat_write_file(p, "x", 1, 0600));
    snprintf(p, sizeof p, "%s/a/link", root);
    CHECK_INT(symlink(base, p), 0); /* a link to the tree's parent */
    sl_plat_remove_tree(root);
    struct stat st;
    CHECK(lstat(root, &st) != 0);
    CHECK(lstat(outside, &st) == 0);
    sl_plat_remove_tree(base);
    CHECK(lstat(base, &st) != 0);
    sl_plat_remove_tree(base); /* gone already: nothing to do */
}

/* A limited line: the first passes, repeats within the interval are
 * counted, the next after it passes with the count, which starts again. */
static void test_log_limit(void) {
    sl_log_limit_t lim = {0};
    uint64_t left = 99;
    CHECK(sl_log_limit(&lim, 0, 10000, &left));
    CHECK(left == 0);
    for (int i = 0; i < 5; i++)
        CHECK(!sl_log_limit(&lim, 1000 + (uint64_t)i, 10000, &left));
    CHECK(!sl_log_limit(&lim, 9999, 10000, &left));
    CHECK(sl_log_limit(&lim, 10001, 10000, &left));
    CHECK(left == 6);
    CHECK(!sl_log_limit(&lim, 10002, 10000, &left));
    CHECK(sl_log_limit(&lim, 30000, 10000, &left));
    CHECK(left == 1);
    /* a clock that went back does not silence the line for good */
    CHECK(sl_log_limit(&lim, 5, 10000, &left));
}

int main(void) {
    CHECK_OK(sl_init());
    sl_test_run("errors", test_errors);
    sl_test_run("rng_reproducible", test_rng_reproducible);
    sl_test_run("hashes", test_hashes);
    sl_test_run("alloc_failure_injection", test_alloc_failure_injection);
    sl_test_run("remove_tree", test_remove_tree);
    sl_test_run("log_limit", test_log_limit);
    return sl_test_finish();
}
