/* Tests of the canonical msgpack writer and strict reader (src/wire/mpack.c):
 * exact bytes at every encoding boundary, rejection of every non-minimal
 * form, map key order, limits before truncation, skip depth, UTF-8,
 * allocation failure, and a randomized round trip checked against
 * msgpack-c's own unpacker. */
#include <math.h>
#include <stdlib.h>

#include <msgpack.h>

#include "starling/mpack.h"
#include "starling/rng.h"
#include "testlib.h"

/* Bytes of `hex` into a static buffer (tests only). */
static const uint8_t *hx(const char *hex, size_t *len) {
    static uint8_t buf[1 << 16];
    long n = sl_test_unhex(hex, buf, sizeof buf);
    CHECK(n >= 0);
    *len = n < 0 ? 0 : (size_t)n;
    return buf;
}

/* Encodes with `fn` into a fresh writer and compares with `want` hex. */
#define CHECK_WRITES(call, want)                                              \
    do {                                                                      \
        sl_mpack_writer_t w_;                                                 \
        uint8_t *out_;                                                        \
        size_t len_, wlen_;                                                   \
        sl_mpack_writer_init(&w_, 1 << 20);                                   \
        sl_mpack_writer_t *w = &w_;                                           \
        call;                                                                 \
        CHECK_OK(sl_mpack_writer_finish(&w_, &out_, &len_));                  \
        const uint8_t *want_ = hx(want, &wlen_);                              \
        CHECK_MSG(len_ == wlen_ && memcmp(out_, want_, len_) == 0,            \
                  "%s: wrote %zu bytes, want %s", #call, len_, want);        \
        sl_free(out_);                                                        \
    } while (0)

static void test_write_uint_boundaries(void) {
    CHECK_WRITES(sl_mpack_write_uint(w, 0), "00");
    CHECK_WRITES(sl_mpack_write_uint(w, 127), "7f");
    CHECK_WRITES(sl_mpack_write_uint(w, 128), "cc80");
    CHECK_WRITES(sl_mpack_write_uint(w, 255), "ccff");
    CHECK_WRITES(sl_mpack_write_uint(w, 256), "cd0100");
    CHECK_WRITES(sl_mpack_write_uint(w, 65535), "cdffff");
    CHECK_WRITES(sl_mpack_write_uint(w, 65536), "ce00010000");
    CHECK_WRITES(sl_mpack_write_uint(w, 0xffffffffu), "ceffffffff");
    CHECK_WRITES(sl_mpack_write_uint(w, 0x100000000ull), "cf0000000100000000");
    CHECK_WRITES(sl_mpack_write_uint(w, UINT64_MAX), "cfffffffffffffffff");
}

static void test_write_int_boundaries(void) {
    CHECK_WRITES(sl_mpack_write_int(w, 0), "00");
    CHECK_WRITES(sl_mpack_write_int(w, 200), "ccc8");
    CHECK_WRITES(sl_mpack_write_int(w, -1), "ff");
    CHECK_WRITES(sl_mpack_write_int(w, -32), "e0");
    CHECK_WRITES(sl_mpack_write_int(w, -33), "d0df");
    CHECK_WRITES(sl_mpack_write_int(w, -128), "d080");
    CHECK_WRITES(sl_mpack_write_int(w, -129), "d1ff7f");
    CHECK_WRITES(sl_mpack_write_int(w, -32768), "d18000");
    CHECK_WRITES(sl_mpack_write_int(w, -32769), "d2ffff7fff");
    CHECK_WRITES(sl_mpack_write_int(w, INT32_MIN), "d280000000");
    CHECK_WRITES(sl_mpack_write_int(w, (int64_t)INT32_MIN - 1), "d3ffffffff7fffffff");
    CHECK_WRITES(sl_mpack_write_int(w, INT64_MIN), "d38000000000000000");
    CHECK_WRITES(sl_mpack_write_int(w, INT64_MAX), "cf7fffffffffffffff");
}

static void test_write_other(void) {
    CHECK_WRITES(sl_mpack_write_nil(w), "c0");
    CHECK_WRITES(sl_mpack_write_bool(w, false), "c2");
    CHECK_WRITES(sl_mpack_write_bool(w, true), "c3");
    CHECK_WRITES(sl_mpack_write_str(w, "", 0), "a0");
    CHECK_WRITES(sl_mpack_write_str(w, "abc", 3), "a3616263");
    CHECK_WRITES(sl_mpack_write_bin(w, "", 0), "c400");
    CHECK_WRITES(sl_mpack_write_bin(w, "\x01\x02", 2), "c4020102");
    CHECK_WRITES(sl_mpack_write_array(w, 15), "9f");
    CHECK_WRITES(sl_mpack_write_array(w, 16), "dc0010");
    CHECK_WRITES(sl_mpack_write_array(w, 65536), "dd00010000");
    CHECK_WRITES(sl_mpack_write_map(w, 15), "8f");
    CHECK_WRITES(sl_mpack_write_map(w, 16), "de0010");
    CHECK_WRITES(sl_mpack_write_map(w, 65535), "deffff");
    CHECK_WRITES(sl_mpack_write_map(w, 65536), "df00010000");
    CHECK_WRITES(sl_mpack_write_double(w, 1.5), "cb3ff8000000000000");
    CHECK_WRITES(sl_mpack_write_double(w, -NAN), "cb7ff8000000000000");
    CHECK_WRITES(sl_mpack_write_raw(w, "\x80", 1), "80");
    /* Lengths at the str form boundaries. */
    static char s[70000];
    memset(s, 'x', sizeof s);
    size_t lens[] = {31, 32, 255, 256, 65535, 65536};
    const char *heads[] = {"bf", "d920", "d9ff", "da0100", "daffff", "db00010000"};
    for (size_t i = 0; i < 6; i++) {
        sl_mpack_writer_t w;
        sl_mpack_writer_init(&w, 1 << 20);
        CHECK_OK(sl_mpack_write_str(&w, s, lens[i]));
        size_t hl;
        const uint8_t *h = hx(heads[i], &hl);
        CHECK_INT(w.len, hl + lens[i]);
        CHECK(memcmp(w.buf, h, hl) == 0);
        sl_mpack_writer_fini(&w);
    }
    size_t bl[] = {255, 256, 65536};
    const char *bh[] = {"c4ff", "c50100", "c600010000"};
    for (size_t i = 0; i < 3; i++) {
        sl_mpack_writer_t w;
        sl_mpack_writer_init(&w, 1 << 20);
        CHECK_OK(sl_mpack_write_bin(&w, s, bl[i]));
        size_t hl;
        const uint8_t *h = hx(bh[i], &hl);
        CHECK_INT(w.len, hl + bl[i]);
        CHECK(memcmp(w.buf, h, hl) == 0);
        sl_mpack_writer_fini(&w);
    }
}

static void test_writer_errors(void) {
    sl_mpack_writer_t w;
    uint8_t *out;
    size_t len;
    /* Over the limit: sticky SL_ETOOBIG, nothing handed over. */
    sl_mpack_writer_init(&w, 4);
    CHECK_OK(sl_mpack_write_uint(&w, 1));
    CHECK_ERR(sl_mpack_write_str(&w, "abcd", 4), SL_ETOOBIG);
    CHECK_ERR(sl_mpack_write_uint(&w, 1), SL_ETOOBIG);
    CHECK_ERR(sl_mpack_writer_finish(&w, &out, &len), SL_ETOOBIG);
    CHECK(out == NULL && len == 0);
    /* Invalid UTF-8 in a str. */
    sl_mpack_writer_init(&w, 100);
    CHECK_ERR(sl_mpack_write_str(&w, "\xff", 1), SL_EINVAL);
    CHECK_ERR(sl_mpack_writer_finish(&w, &out, &len), SL_EINVAL);
    /* Counting writer: same length, no allocation. */
    int64_t live = sl_alloc_live();
    sl_mpack_writer_init_count(&w, 1000);
    sl_mpack_write_map(&w, 1);
    sl_mpack_write_uint(&w, 300);
    sl_mpack_write_str(&w, "hello", 5);
    CHECK_INT(sl_alloc_live(), live);
    CHECK_INT(w.len, 1 + 3 + 6);
    CHECK_OK(sl_mpack_writer_finish(&w, &out, &len));
    CHECK(out == NULL);
    /* Allocation failure: SL_ENOMEM, no leak. */
    sl_alloc_fail_after(1, false);
    sl_mpack_writer_init(&w, 1000);
    CHECK_ERR(sl_mpack_write_uint(&w, 5), SL_ENOMEM);
    CHECK_ERR(sl_mpack_writer_finish(&w, &out, &len), SL_ENOMEM);
    sl_alloc_fail_after(0, false);
    CHECK_INT(sl_alloc_live(), live);
    /* Growth past the first buffer. */
    sl_mpack_writer_init(&w, 1 << 20);
    for (int i = 0; i < 10000; i++)
        sl_mpack_write_uint(&w, (uint64_t)i);
    CHECK_OK(sl_mpack_writer_finish(&w, &out, &len));
    sl_mpack_reader_t r;
    sl_mpack_reader_init(&r, out, len);
    for (int i = 0; i < 10000; i++) {
        uint64_t v;
        sl_mpack_read_uint(&r, UINT64_MAX, &v);
        CHECK_MSG(v == (uint64_t)i, "value %d", i);
    }
    CHECK_OK(sl_mpack_reader_end(&r));
    sl_free(out);
    sl_mpack_writer_fini(&w); /* idempotent after finish */
}

/* Reads one uint from hex, returning the error. */
static sl_err rd_uint(const char *hex, uint64_t max, uint64_t *v) {
    size_t n;
    const uint8_t *b = hx(hex, &n);
    sl_mpack_reader_t r;
    sl_mpack_reader_init(&r, b, n);
    sl_mpack_read_uint(&r, max, v);
    return sl_mpack_reader_end(&r);
}

static sl_err rd_int(const char *hex, int64_t *v) {
    size_t n;
    const uint8_t *b = hx(hex, &n);
    sl_mpack_reader_t r;
    sl_mpack_reader_init(&r, b, n);
    sl_mpack_read_int(&r, INT64_MIN, INT64_MAX, v);
    return sl_mpack_reader_end(&r);
}

static void test_read_ints(void) {
    uint64_t u;
    int64_t i;
    CHECK_OK(rd_uint("7f", UINT64_MAX, &u));
    CHECK_INT(u, 127);
    CHECK_OK(rd_uint("cc80", UINT64_MAX, &u));
    CHECK_INT(u, 128);
    CHECK_OK(rd_uint("cfffffffffffffffff", UINT64_MAX, &u));
    CHECK(u == UINT64_MAX);
    /* Every non-minimal form. */
    CHECK_ERR(rd_uint("cc7f", UINT64_MAX, &u), SL_ENONCANON);
    CHECK_ERR(rd_uint("cc00", UINT64_MAX, &u), SL_ENONCANON);
    CHECK_ERR(rd_uint("cd00ff", UINT64_MAX, &u), SL_ENONCANON);
    CHECK_ERR(rd_uint("ce0000ffff", UINT64_MAX, &u), SL_ENONCANON);
    CHECK_ERR(rd_uint("cf00000000ffffffff", UINT64_MAX, &u), SL_ENONCANON);
    CHECK_ERR(rd_uint("d005", UINT64_MAX, &u), SL_ENONCANON); /* signed form, >= 0 */
    CHECK_ERR(rd_uint("d30000000000000005", UINT64_MAX, &u), SL_ENONCANON);
    CHECK_ERR(rd_int("d0e0", &i), SL_ENONCANON);               /* -32 fits fixint */
    CHECK_ERR(rd_int("d1ff80", &i), SL_ENONCANON);             /* -128 fits int8 */
    CHECK_ERR(rd_int("d2ffff8000", &i), SL_ENONCANON);         /* fits int16 */
    CHECK_ERR(rd_int("d3ffffffff80000000", &i), SL_ENONCANON); /* fits int32 */
    CHECK_ERR(rd_int("d07f", &i), SL_ENONCANON);               /* positive in int8 */
    /* Ranges and types. */
    CHECK_ERR(rd_uint("ff", UINT64_MAX, &u), SL_EPROTO); /* negative */
    CHECK_ERR(rd_uint("d0df", UINT64_MAX, &u), SL_EPROTO);
    CHECK_ERR(rd_uint("cd0100", 255, &u), SL_EPROTO);
    CHECK_ERR(rd_uint("c3", 1, &u), SL_EPROTO);
    CHECK_ERR(rd_uint("cd01", UINT64_MAX, &u), SL_ETRUNC);
    CHECK_ERR(rd_uint("", UINT64_MAX, &u), SL_ETRUNC);
    CHECK_ERR(rd_uint("0000", UINT64_MAX, &u), SL_EPROTO); /* trailing */
    CHECK_OK(rd_int("d38000000000000000", &i));
    CHECK(i == INT64_MIN);
    CHECK_OK(rd_int("e0", &i));
    CHECK_INT(i, -32);
    CHECK_OK(rd_int("cc80", &i));
    CHECK_INT(i, 128);
    CHECK_ERR(rd_int("cf8000000000000000", &i), SL_EPROTO); /* > INT64_MAX */
    size_t n;
    const uint8_t *b = hx("ff", &n);
    sl_mpack_reader_t r;
    sl_mpack_reader_init(&r, b, n);
    CHECK_ERR(sl_mpack_read_int(&r, 0, 10, &i), SL_EPROTO);
}

static sl_err rd_str(const char *hex, size_t min, size_t max, bool bin) {
    size_t n, len;
    const uint8_t *b = hx(hex, &n), *p;
    sl_mpack_reader_t r;
    sl_mpack_reader_init(&r, b, n);
    if (bin)
        sl_mpack_read_bin(&r, min, max, &p, &len);
    else
        sl_mpack_read_str(&r, min, max, &p, &len);
    return sl_mpack_reader_end(&r);
}

static void test_read_strings(void) {
    CHECK_OK(rd_str("a3616263", 0, 10, false));
    CHECK_OK(rd_str("a0", 0, 10, false));
    CHECK_ERR(rd_str("a0", 1, 10, false), SL_EPROTO);
    CHECK_ERR(rd_str("a3616263", 0, 2, false), SL_ETOOBIG);
    CHECK_ERR(rd_str("a36162", 0, 10, false), SL_ETRUNC);
    /* The limit is checked before the bytes are required. */
    CHECK_ERR(rd_str("db7fffffff", 0, 64, false), SL_ETOOBIG);
    CHECK_ERR(rd_str("c6ffffffff", 0, 64, true), SL_ETOOBIG);
    CHECK_ERR(rd_str("d903616263", 0, 10, false), SL_ENONCANON);
    CHECK_ERR(rd_str("da0003616263", 0, 10, false), SL_ENONCANON);
    CHECK_ERR(rd_str("db00000003616263", 0, 10, false), SL_ENONCANON);
    CHECK_OK(rd_str("d920" "6161616161616161616161616161616161616161616161616161616161616161", 0,
                    64, false));
    CHECK_ERR(rd_str("c4026263", 0, 10, false), SL_EPROTO); /* bin where str wanted */
    CHECK_ERR(rd_str("a26263", 0, 10, true), SL_EPROTO);    /* str where bin wanted */
    CHECK_OK(rd_str("c400", 0, 10, true));
    CHECK_ERR(rd_str("c5000162", 0, 10, true), SL_ENONCANON);
    CHECK_ERR(rd_str("c60000000162", 0, 10, true), SL_ENONCANON);
    CHECK_OK(rd_str("c402ff00", 0, 10, true)); /* bin: any bytes */
    CHECK_ERR(rd_str("a2ff00", 0, 10, false), SL_EPROTO);
    /* A zero-length value is a NULL view. */
    size_t n, len;
    const uint8_t *b = hx("a0", &n), *p = b;
    sl_mpack_reader_t r;
    sl_mpack_reader_init(&r, b, n);
    CHECK_OK(sl_mpack_read_str(&r, 0, 1, &p, &len));
    CHECK(p == NULL && len == 0);
}

static void test_utf8(void) {
    struct {
        const char *s;
        bool ok;
    } cases[] = {
        {"", true},
        {"plain ascii", true},
        {"\xc3\xa9", true},          /* é */
        {"\xe2\x82\xac", true},      /* € */
        {"\xf0\x9f\x90\xa6", true},  /* bird */
        {"\xf4\x8f\xbf\xbf", true},  /* U+10FFFF */
        {"\xc0\xaf", false},         /* overlong */
        {"\xe0\x80\xaf", false},     /* overlong */
        {"\xf0\x80\x80\xaf", false}, /* overlong */
        {"\xed\xa0\x80", false},     /* surrogate */
        {"\xf4\x90\x80\x80", false}, /* > U+10FFFF */
        {"\xf5\x80\x80\x80", false},
        {"\x80", false},             /* lone continuation */
        {"\xc3", false},             /* cut */
        {"\xe2\x82", false},
        {"\xc3\x28", false},
        {"\xff", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(sl_mpack_utf8_valid((const uint8_t *)cases[i].s, strlen(cases[i].s)) ==
                      cases[i].ok,
                  "case %zu", i);
}

static void test_floats(void) {
    size_t n;
    const uint8_t *b = hx("cb3ff8000000000000", &n);
    sl_mpack_reader_t r;
    double d;
    sl_mpack_reader_init(&r, b, n);
    CHECK_ERR(sl_mpack_read_double(&r, &d), SL_EPROTO); /* floats not allowed */
    sl_mpack_reader_init(&r, b, n);
    r.allow_float = true;
    CHECK_OK(sl_mpack_read_double(&r, &d));
    CHECK(d == 1.5);
    b = hx("ca3fc00000", &n);
    sl_mpack_reader_init(&r, b, n);
    r.allow_float = true;
    CHECK_ERR(sl_mpack_read_double(&r, &d), SL_ENONCANON); /* float32 */
    b = hx("cb7ff8000000000001", &n);
    sl_mpack_reader_init(&r, b, n);
    r.allow_float = true;
    CHECK_ERR(sl_mpack_read_double(&r, &d), SL_ENONCANON); /* another NaN */
    b = hx("cb7ff8000000000000", &n);
    sl_mpack_reader_init(&r, b, n);
    r.allow_float = true;
    CHECK_OK(sl_mpack_read_double(&r, &d));
    CHECK(isnan(d));
    b = hx("cb7ff0000000000000", &n); /* +inf is fine */
    sl_mpack_reader_init(&r, b, n);
    r.allow_float = true;
    CHECK_OK(sl_mpack_read_double(&r, &d));
    CHECK(isinf(d));
}

/* Reads a uint-keyed map of uints from hex; returns the error. */
static sl_err rd_map(const char *hex) {
    size_t n;
    const uint8_t *b = hx(hex, &n);
    sl_mpack_reader_t r;
    sl_mpack_map_t m;
    uint64_t k, v;
    sl_mpack_reader_init(&r, b, n);
    sl_mpack_map_begin(&r, 8, &m);
    while (sl_mpack_map_next(&r, &m, &k))
        sl_mpack_read_uint(&r, UINT64_MAX, &v);
    return sl_mpack_reader_end(&r);
}

static sl_err rd_strmap(const char *hex) {
    size_t n;
    const uint8_t *b = hx(hex, &n), *k, *v;
    size_t kl, vl;
    sl_mpack_reader_t r;
    sl_mpack_map_t m;
    sl_mpack_reader_init(&r, b, n);
    sl_mpack_map_begin(&r, 8, &m);
    while (sl_mpack_map_next_str(&r, &m, 8, &k, &kl))
        sl_mpack_read_str(&r, 0, 8, &v, &vl);
    return sl_mpack_reader_end(&r);
}

static void test_maps(void) {
    CHECK_OK(rd_map("80"));
    CHECK_OK(rd_map("83000101020205"));
    CHECK_ERR(rd_map("83000100020205"), SL_EPROTO);    /* duplicate */
    CHECK_ERR(rd_map("83020101000005"), SL_ENONCANON); /* out of order */
    CHECK_ERR(rd_map("82a161010101"), SL_EPROTO);        /* str key in an int map */
    CHECK_ERR(rd_map("820001cc0201"), SL_ENONCANON); /* non-minimal key */
    CHECK_ERR(rd_map("890000"), SL_ETOOBIG);         /* 9 entries, max 8 */
    CHECK_ERR(rd_map("850001"), SL_ETRUNC);          /* count exceeds bytes */
    CHECK_ERR(rd_map("de000200010101"), SL_ENONCANON);
    CHECK_OK(rd_map("82ce0001000001ce0001000101"));   /* large keys */
    CHECK_ERR(rd_map("81cf000000010000000001"), SL_EPROTO); /* key > UINT32_MAX */
    CHECK_ERR(rd_map("8100"), SL_ETRUNC);
    CHECK_OK(rd_strmap("82a161a0a162a0"));
    CHECK_OK(rd_strmap("82a161a0a26161a0"));           /* prefix first */
    CHECK_ERR(rd_strmap("82a26161a0a161a0"), SL_ENONCANON);
    CHECK_ERR(rd_strmap("82a161a0a161a0"), SL_EPROTO); /* duplicate */
    CHECK_ERR(rd_strmap("81a0a0"), SL_EPROTO);         /* empty key */
    CHECK_ERR(rd_strmap("81a9616161616161616161a0"), SL_ETOOBIG);
    CHECK_ERR(rd_strmap("8101a0"), SL_EPROTO);
}

static sl_err rd_skip(const char *hex, int depth) {
    size_t n;
    const uint8_t *b = hx(hex, &n);
    sl_mpack_reader_t r;
    sl_mpack_reader_init(&r, b, n);
    sl_mpack_skip(&r, depth);
    return sl_mpack_reader_end(&r);
}

static void test_skip(void) {
    CHECK_OK(rd_skip("c0", 0));
    CHECK_OK(rd_skip("a3616263", 0));
    CHECK_ERR(rd_skip("90", 0), SL_ETOOBIG);
    CHECK_OK(rd_skip("90", 1));
    CHECK_OK(rd_skip("9291c0c3", 2));
    CHECK_ERR(rd_skip("9291c0c3", 1), SL_ETOOBIG);
    CHECK_OK(rd_skip("919191919191919100", 8));
    CHECK_ERR(rd_skip("91919191919191919100", 100), SL_ETOOBIG); /* capped at 8 */
    CHECK_OK(rd_skip("8201a0029100", 2));
    CHECK_ERR(rd_skip("8202a0019100", 2), SL_ENONCANON);
    CHECK_ERR(rd_skip("8201a001a0", 2), SL_EPROTO);
    CHECK_OK(rd_skip("82a161c0a162c0", 1));
    CHECK_ERR(rd_skip("82a161c002c0", 1), SL_EPROTO); /* mixed key types */
    CHECK_ERR(rd_skip("82a162c0a161c0", 1), SL_ENONCANON);
    CHECK_ERR(rd_skip("91cc01", 1), SL_ENONCANON);
    CHECK_ERR(rd_skip("91d90161", 1), SL_ENONCANON);
    CHECK_ERR(rd_skip("cb3ff8000000000000", 0), SL_EPROTO);
    CHECK_ERR(rd_skip("d40100", 0), SL_EPROTO);
    CHECK_ERR(rd_skip("c1", 0), SL_EPROTO);
    CHECK_ERR(rd_skip("a2ff00", 0), SL_EPROTO);
    CHECK_ERR(rd_skip("ddffffffff", 1), SL_ETRUNC); /* bounded: no 4e9 loop */
    CHECK_ERR(rd_skip("dfffffffff", 1), SL_ETRUNC);
}

static void test_read_raw(void) {
    size_t n, len;
    const uint8_t *b = hx("01" "8201a00292c3c2" "05", &n), *p;
    sl_mpack_reader_t r;
    uint64_t v;
    sl_mpack_reader_init(&r, b, n);
    sl_mpack_read_uint(&r, 10, &v);
    CHECK_OK(sl_mpack_read_raw(&r, 2, &p, &len));
    CHECK(p == b + 1 && len == 7);
    sl_mpack_read_uint(&r, 10, &v);
    CHECK_INT(v, 5);
    CHECK_OK(sl_mpack_reader_end(&r));
    sl_mpack_reader_init(&r, b + 1, 7);
    CHECK_ERR(sl_mpack_read_raw(&r, 1, &p, &len), SL_ETOOBIG);
    CHECK(p == NULL && len == 0);
}

static void test_sticky_and_offsets(void) {
    size_t n;
    const uint8_t *b = hx("01a3616263cc05", &n);
    sl_mpack_reader_t r;
    uint64_t v;
    const uint8_t *p;
    size_t len;
    sl_mpack_reader_init(&r, b, n);
    CHECK_OK(sl_mpack_read_uint(&r, 10, &v));
    CHECK_OK(sl_mpack_read_str(&r, 0, 10, &p, &len));
    CHECK(p == b + 2 && len == 3); /* a view into the input */
    CHECK_ERR(sl_mpack_read_uint(&r, 10, &v), SL_ENONCANON);
    CHECK_INT(r.err_off, 5);
    CHECK_ERR(sl_mpack_read_nil(&r), SL_ENONCANON); /* sticky */
    CHECK_ERR(sl_mpack_reader_end(&r), SL_ENONCANON);
    CHECK_ERR(sl_mpack_reader_fail(&r, SL_EPROTO), SL_ENONCANON);
    sl_mpack_reader_init(&r, NULL, 0);
    CHECK(sl_mpack_peek(&r) == SL_MPACK_INVALID);
    CHECK_ERR(sl_mpack_read_nil(&r), SL_ETRUNC);
}

/* Random trees of values: written with our writer, read back with our
 * reader (all canonical) and with msgpack-c's unpacker (same values). */
typedef struct {
    sl_rng_t rng;
    uint64_t vals[4096];
    int kinds[4096];
    int n;
} gen_t;

static uint64_t rand_uint(sl_rng_t *rng) {
    int bits = (int)sl_rng_below(rng, 65);
    uint64_t v = sl_rng_next(rng);
    return bits == 64 ? v : v & ((1ull << bits) - 1);
}

static void test_random_roundtrip(void) {
    int seeds = sl_test_seed_count(200);
    for (int seed = 0; seed < seeds; seed++) {
        gen_t g;
        sl_rng_seed(&g.rng, (uint64_t)seed);
        g.n = 1 + (int)sl_rng_below(&g.rng, 200);
        sl_mpack_writer_t w;
        sl_mpack_writer_init(&w, 1 << 20);
        sl_mpack_write_array(&w, (uint32_t)g.n);
        for (int i = 0; i < g.n; i++) {
            g.kinds[i] = (int)sl_rng_below(&g.rng, 4);
            g.vals[i] = rand_uint(&g.rng);
            switch (g.kinds[i]) {
            case 0: sl_mpack_write_uint(&w, g.vals[i]); break;
            case 1: sl_mpack_write_int(&w, (int64_t)g.vals[i] | INT64_MIN); break;
            case 2: sl_mpack_write_str(&w, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                                       g.vals[i] % 49); break;
            default: sl_mpack_write_bin(&w, NULL, 0); break;
            }
        }
        uint8_t *buf;
        size_t len;
        CHECK_OK(sl_mpack_writer_finish(&w, &buf, &len));
        /* Ours. */
        sl_mpack_reader_t r;
        uint32_t count;
        sl_mpack_reader_init(&r, buf, len);
        sl_mpack_read_array(&r, 1000, &count);
        CHECK_INT(count, g.n);
        for (int i = 0; i < g.n && !r.err; i++) {
            uint64_t u;
            int64_t s;
            const uint8_t *p;
            size_t l;
            switch (g.kinds[i]) {
            case 0:
                sl_mpack_read_uint(&r, UINT64_MAX, &u);
                CHECK(u == g.vals[i]);
                break;
            case 1:
                sl_mpack_read_int(&r, INT64_MIN, INT64_MAX, &s);
                CHECK(s == ((int64_t)g.vals[i] | INT64_MIN));
                break;
            case 2:
                sl_mpack_read_str(&r, 0, 100, &p, &l);
                CHECK_INT(l, g.vals[i] % 49);
                break;
            default:
                sl_mpack_read_bin(&r, 0, 0, &p, &l);
                break;
            }
        }
        CHECK_OK(sl_mpack_reader_end(&r));
        /* msgpack-c's. */
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        size_t off = 0;
        CHECK(msgpack_unpack_next(&up, (const char *)buf, len, &off) == MSGPACK_UNPACK_SUCCESS);
        CHECK_INT(off, len);
        CHECK(up.data.type == MSGPACK_OBJECT_ARRAY && up.data.via.array.size == (uint32_t)g.n);
        for (int i = 0; i < g.n && up.data.type == MSGPACK_OBJECT_ARRAY; i++) {
            msgpack_object o = up.data.via.array.ptr[i];
            switch (g.kinds[i]) {
            case 0:
                CHECK(o.type == MSGPACK_OBJECT_POSITIVE_INTEGER && o.via.u64 == g.vals[i]);
                break;
            case 1:
                CHECK(o.type == MSGPACK_OBJECT_NEGATIVE_INTEGER &&
                      o.via.i64 == ((int64_t)g.vals[i] | INT64_MIN));
                break;
            case 2:
                CHECK(o.type == MSGPACK_OBJECT_STR && o.via.str.size == g.vals[i] % 49);
                break;
            default:
                CHECK(o.type == MSGPACK_OBJECT_BIN && o.via.bin.size == 0);
                break;
            }
        }
        msgpack_unpacked_destroy(&up);
        /* Every strict prefix is truncated. */
        for (size_t cut = 0; cut < len; cut++) {
            sl_mpack_reader_init(&r, buf, cut);
            CHECK_ERR(sl_mpack_skip(&r, 1), SL_ETRUNC);
        }
        sl_free(buf);
    }
}

int main(void) {
    sl_test_run("write_uint_boundaries", test_write_uint_boundaries);
    sl_test_run("write_int_boundaries", test_write_int_boundaries);
    sl_test_run("write_other", test_write_other);
    sl_test_run("writer_errors", test_writer_errors);
    sl_test_run("read_ints", test_read_ints);
    sl_test_run("read_strings", test_read_strings);
    sl_test_run("utf8", test_utf8);
    sl_test_run("floats", test_floats);
    sl_test_run("maps", test_maps);
    sl_test_run("skip", test_skip);
    sl_test_run("read_raw", test_read_raw);
    sl_test_run("sticky_and_offsets", test_sticky_and_offsets);
    sl_test_run("random_roundtrip", test_random_roundtrip);
    return sl_test_finish();
}
