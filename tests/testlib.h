/* The test harness every tests/NAME_test.c uses: checks that report the file,
 * line and values, a runner per test function, and small helpers. A test
 * file's main() calls sl_test_run() for each case and returns
 * sl_test_finish(); exit 77 (SL_TEST_SKIP) means "skipped here". */
#ifndef STARLING_TESTLIB_H
#define STARLING_TESTLIB_H

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "starling/common.h"
#include "starling/nn.h"
#include "starling/swim.h"

#define SL_TEST_SKIP 77

extern int sl_test_failures; /* checks failed in the current test */

void sl_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sl_test_run(const char *name, void (*fn)(void));
int sl_test_finish(void);

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond))                                                         \
            sl_test_fail(__FILE__, __LINE__, "check failed: %s", #cond);     \
    } while (0)

#define CHECK_MSG(cond, ...)                                                 \
    do {                                                                     \
        if (!(cond))                                                         \
            sl_test_fail(__FILE__, __LINE__, __VA_ARGS__);                   \
    } while (0)

#define CHECK_INT(a, b)                                                      \
    do {                                                                     \
        long long a_ = (long long)(a), b_ = (long long)(b);                  \
        if (a_ != b_)                                                        \
            sl_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a,   \
                         #b, a_, b_);                                        \
    } while (0)

#define CHECK_ERR(expr, want)                                                \
    do {                                                                     \
        sl_err got_ = (expr), want_ = (want);                                \
        if (got_ != want_)                                                   \
            sl_test_fail(__FILE__, __LINE__, "%s: got %s, want %s", #expr,   \
                         sl_errname(got_), sl_errname(want_));               \
    } while (0)

#define CHECK_OK(expr) CHECK_ERR(expr, SL_OK)

#define CHECK_STR(a, b)                                                      \
    do {                                                                     \
        const char *a_ = (a), *b_ = (b);                                     \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                               \
            sl_test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"",   \
                         #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");    \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                \
    do {                                                                     \
        double a_ = (a), b_ = (b);                                           \
        if (!(a_ - b_ <= (tol) && b_ - a_ <= (tol)))                         \
            sl_test_fail(__FILE__, __LINE__, "%s ~= %s: %g vs %g (tol %g)",  \
                         #a, #b, a_, b_, (double)(tol));                     \
    } while (0)

/* Reads a whole file (NUL-terminated for convenience); NULL on failure. */
uint8_t *sl_test_read_file(const char *path, size_t *len);

/* Path of a file in the source tree ($SL_SOURCE_DIR, else "."). */
const char *sl_test_source_path(const char *rel, char *buf, size_t buf_len);

/* Decodes hex (whitespace ignored); returns bytes written or -1. */
long sl_test_unhex(const char *hex, uint8_t *out, size_t out_cap);

/* Membership timings for peers that one test process steps together:
 * quicker than the defaults, but a peer that misses its turns for a second
 * (every peer is stepped by one thread; a sanitizer build on a loaded
 * machine moves a 64 MiB blob in slow slices) is not declared dead, so a
 * test's placement does not change under it. Tests that need a death
 * detected stop the peer (it leaves) or shorten these themselves. */
void sl_test_swim_timing(sl_swim_config_t *cfg);

/* Writes the first n samples of d as an IDX pair, DIR/IMAGES and
 * DIR/LABELS (28x28 images, as the data set loader reads them). */
bool sl_test_write_idx(const sl_nn_data_t *d, size_t n, const char *dir, const char *images,
                       const char *labels);

/* Number of seeds a simulation test runs: $SL_SEEDS, else `fallback`. */
int sl_test_seed_count(int fallback);

#endif
