/* The test harness (see testlib.h). */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

#include "testlib.h"

int sl_test_failures;
static int tests_run;    /* cases run so far */
static int tests_failed; /* cases with at least one failed check */

void sl_test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    sl_test_failures++;
}

void sl_test_run(const char *name, void (*fn)(void)) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sl_test_failures = 0;
    fn();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    tests_run++;
    if (sl_test_failures) {
        tests_failed++;
        printf("FAIL %s (%d checks failed, %.0f ms)\n", name, sl_test_failures, ms);
    } else {
        printf("ok   %s (%.0f ms)\n", name, ms);
    }
    fflush(stdout);
}

int sl_test_finish(void) {
    printf("%d passed, %d failed\n", tests_run - tests_failed, tests_failed);
    return tests_failed ? 1 : 0;
}

uint8_t *sl_test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap + 1);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (got == 0)
            break;
        n += got;
    }
    fclose(f);
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

const char *sl_test_source_path(const char *rel, char *buf, size_t buf_len) {
    const char *root = getenv("SL_SOURCE_DIR");
    snprintf(buf, buf_len, "%s/%s", root ? root : ".", rel);
    return buf;
}

long sl_test_unhex(const char *hex, uint8_t *out, size_t out_cap) {
    size_t n = 0;
    int hi = -1;
    for (const char *p = hex; *p; p++) {
        if (isspace((unsigned char)*p))
            continue;
        int v;
        if (*p >= '0' && *p <= '9')
            v = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            v = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            v = *p - 'A' + 10;
        else
            return -1;
        if (hi < 0) {
            hi = v;
        } else {
            if (n == out_cap)
                return -1;
            out[n++] = (uint8_t)(hi << 4 | v);
            hi = -1;
        }
    }
    return hi < 0 ? (long)n : -1;
}

int sl_test_seed_count(int fallback) {
    const char *s = getenv("SL_SEEDS");
    int n = s ? atoi(s) : 0;
    return n > 0 ? n : fallback;
}

void sl_test_swim_timing(sl_swim_config_t *cfg) {
    sl_swim_config_defaults(cfg);
    cfg->timing.probe_interval_ms = 200;
    cfg->timing.probe_timeout_ms = 150;
    cfg->timing.suspicion_mult = 5; /* dead after 1-3 s of suspicion unrefuted */
    cfg->timing.gossip_interval_ms = 20;
}

static void put_be32(FILE *f, uint32_t v) {
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    fwrite(b, 1, 4, f);
}

bool sl_test_write_idx(const sl_nn_data_t *d, size_t n, const char *dir, const char *images,
                       const char *labels) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, images);
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    put_be32(f, 0x803);
    put_be32(f, (uint32_t)n);
    put_be32(f, 28);
    put_be32(f, 28);
    fwrite(d->images_u8, 1, n * 784, f);
    bool ok = fclose(f) == 0;
    snprintf(path, sizeof path, "%s/%s", dir, labels);
    f = fopen(path, "wb");
    if (!f)
        return false;
    put_be32(f, 0x801);
    put_be32(f, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        fputc(d->labels[i], f);
    return fclose(f) == 0 && ok;
}
