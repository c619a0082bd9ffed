/* Tests of the blob transfer core (src/blob/blob_xfer.c): the wire vectors
 * (proto/vectors/blob/blob.txt), and the fetch state machine driven by
 * in-memory holders (honest, corrupt, silent, lacking) on a virtual
 * clock: no sockets, no disk. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/blob_xfer.h"
#include "testlib.h"

/* proto/vectors/blob/blob.txt: valid vectors decode and re-encode byte for
 * byte (every strict prefix fails), compat ones re-encode without their
 * unknown keys, invalid ones fail with exactly their error. */
static void test_vectors(void) {
    char path[4096];
    sl_test_source_path("proto/vectors/blob/blob.txt", path, sizeof path);
    size_t len;
    char *text = (char *)sl_test_read_file(path, &len);
    CHECK_MSG(text != NULL, "cannot read %s", path);
    if (!text)
        return;
    int counts[3] = {0};
    static uint8_t h[8], b[1 << 16], re[1 << 16];
    static char f1[64], f2[1 << 17], f3[1 << 17], f4[1 << 17];
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || line[0] == 0)
            continue;
        char kind[16], name[64];
        int nt = sscanf(line, "%15s %63s %63s %131071s %131071s %131071s", kind, name, f1, f2, f3, f4);
        bool inv = strcmp(kind, "invalid") == 0, compat = strcmp(kind, "compat") == 0;
        const char *hh = inv ? f2 : f1, *bb = inv ? f3 : f2;
        long hl = sl_test_unhex(hh, h, sizeof h), bl = sl_test_unhex(bb, b, sizeof b);
        CHECK_MSG(nt >= 4 && hl == 4 && bl >= 0, "%s: malformed line", name);
        if (hl != 4 || bl < 0)
            continue;
        sl_blob_msg_t m;
        sl_err err = sl_blob_msg_decode(h[3], b, (size_t)bl, &m);
        if (inv) {
            CHECK_MSG(strcmp(sl_errname(err), f1) == 0, "%s: got %s, want %s", name,
                      sl_errname(err), f1);
            counts[2]++;
            continue;
        }
        CHECK_MSG(err == SL_OK, "%s: %s", name, sl_errname(err));
        if (err)
            continue;
        uint8_t *out;
        size_t out_len;
        CHECK_OK(sl_blob_msg_encode(&m, &out, &out_len));
        long rl = compat ? sl_test_unhex(f3, re, sizeof re) : bl;
        const uint8_t *want = compat ? re : b;
        CHECK_MSG(out_len == (size_t)rl && memcmp(out, want, out_len) == 0,
                  "%s: re-encoding differs", name);
        sl_free(out);
        for (long cut = 0; !compat && cut < bl; cut++) {
            err = sl_blob_msg_decode(h[3], b, (size_t)cut, &m);
            CHECK_MSG(err != SL_OK, "%s: prefix %ld decodes", name, cut);
        }
        counts[compat]++;
    }
    free(text);
    CHECK(counts[0] >= 7 && counts[1] >= 2 && counts[2] >= 20);
}

/* ---- a virtual network of holders ---- */

enum { HONEST, CORRUPT, SILENT, LACKING };

typedef struct {
    const char *addr; /* its address */
    int kind;         /* how it answers */
    int asked;        /* GETs it received */
} holder_t;

typedef struct {
    const uint8_t *data;   /* the blob */
    sl_blob_manifest_t m;  /* its manifest */
    holder_t *holders;     /* who answers */
    size_t holder_count;   /* entries */
    bool *written;         /* chunks the fetcher "wrote" */
    uint32_t max_in_flight;/* most GETs seen unanswered at once */
} net_t;

/* Runs a fetch to the end on a virtual clock: each GET is answered (or
 * not) at once; the clock steps 100 ms per turn. Returns the status. */
static sl_err run_fetch(net_t *n, sl_blob_fetch_t *f, uint64_t *now) {
    static uint8_t buf[4096];
    for (int turn = 0; turn < 10000; turn++) {
        sl_blob_req_t reqs[SL_BLOB_XFER_MAX_WINDOW];
        size_t k = sl_blob_fetch_poll(f, *now, reqs, SL_BLOB_XFER_MAX_WINDOW);
        sl_blob_fetch_stats_t st;
        sl_blob_fetch_stats(f, &st);
        if (st.in_flight > n->max_in_flight)
            n->max_in_flight = st.in_flight;
        /* answer in reverse order, to show order does not matter */
        for (size_t q = k; q-- > 0;) {
            holder_t *h = NULL;
            for (size_t i = 0; i < n->holder_count; i++)
                if (!strcmp(n->holders[i].addr, reqs[q].addr))
                    h = &n->holders[i];
            CHECK(h != NULL);
            if (!h)
                continue;
            h->asked++;
            if (h->kind == SILENT)
                continue;
            uint32_t i = reqs[q].index;
            size_t off = (size_t)i * n->m.chunk_len;
            size_t len = n->m.size - off < n->m.chunk_len ? n->m.size - off : n->m.chunk_len;
            sl_blob_msg_t c = {.type = SL_BLOB_MSG_CHUNK, .xfer = sl_blob_fetch_xfer(f),
                               .index = i, .status = SL_BLOB_CHUNK_OK, .data = buf,
                               .data_len = len};
            memcpy(c.chunk, reqs[q].chunk, SL_BLAKE2B_LEN);
            memcpy(buf, n->data + off, len);
            if (h->kind == CORRUPT)
                buf[len / 2] ^= 1;
            if (h->kind == LACKING) {
                c.status = SL_BLOB_CHUNK_MISSING;
                c.data_len = 0;
            }
            /* through the codec, as on the wire */
            uint8_t *body;
            size_t body_len;
            CHECK_OK(sl_blob_msg_encode(&c, &body, &body_len));
            sl_blob_msg_t d;
            CHECK_OK(sl_blob_msg_decode(SL_BLOB_MSG_CHUNK, body, body_len, &d));
            sl_err err = sl_blob_fetch_on_chunk(f, *now, &d);
            if (h->kind == HONEST) {
                CHECK_INT(err, SL_OK);
                CHECK(!memcmp(d.data, n->data + off, len));
                n->written[i] = true;
                sl_blob_fetch_stored(f, i, SL_OK);
                /* a duplicate answer is stale, and harmless */
                CHECK_ERR(sl_blob_fetch_on_chunk(f, *now, &d), SL_ESTATE);
            } else {
                CHECK_INT(err, h->kind == CORRUPT ? SL_ECORRUPT : SL_ENOTFOUND);
            }
            sl_free(body);
        }
        sl_err st2 = sl_blob_fetch_status(f);
        if (st2 != SL_EAGAIN)
            return st2;
        *now += 100;
    }
    return SL_ETIMEDOUT;
}

static void make_blob(net_t *n, uint8_t *data, size_t len, uint32_t chunk_len) {
    for (size_t i = 0; i < len; i++)
        data[i] = (uint8_t)(i * 7 + i / 251);
    memset(n, 0, sizeof *n);
    n->data = data;
    CHECK_OK(sl_blob_manifest_build(data, len, chunk_len, &n->m));
    n->written = calloc(n->m.chunk_count + 1, 1);
}

static void test_fetch_honest(void) {
    static uint8_t data[50 * 1024 + 3];
    net_t n;
    make_blob(&n, data, sizeof data, 1024);
    holder_t hs[] = {{"tcp://a:1", HONEST, 0}, {"tcp://b:1", HONEST, 0}};
    n.holders = hs;
    n.holder_count = 2;
    const char *src[] = {hs[0].addr, hs[1].addr};
    /* chunk 3 is held already: never asked for */
    bool have[51] = {false};
    have[3] = true;
    sl_blob_fetch_config_t cfg = {.window = 3};
    sl_blob_fetch_t *f;
    CHECK_OK(sl_blob_fetch_new(42, &n.m, have, src, 2, &cfg, &f));
    uint64_t now = 1000;
    CHECK_INT(run_fetch(&n, f, &now), SL_OK);
    sl_blob_fetch_stats_t st;
    sl_blob_fetch_stats(f, &st);
    CHECK_INT(st.held, 51);
    CHECK_INT(st.received, 50);
    CHECK(!n.written[3]);
    CHECK(n.max_in_flight <= 3); /* the window bounds memory */
    CHECK(hs[0].asked > 10 && hs[1].asked > 10); /* load spread over holders */
    CHECK_INT(st.corrupt + st.timeouts + st.missing, 0);
    sl_blob_fetch_destroy(&f);
    CHECK(f == NULL);
    sl_blob_fetch_destroy(&f); /* idempotent */
    sl_blob_manifest_fini(&n.m);
    free(n.written);
}

/* One holder corrupt, one silent (dead), one lacking, one honest: every
 * chunk still arrives, from the honest one, and each failure is counted. */
static void test_fetch_bad_holders(void) {
    static uint8_t data[20 * 1000];
    net_t n;
    make_blob(&n, data, sizeof data, 1000);
    holder_t hs[] = {{"tcp://corrupt:1", CORRUPT, 0},
                     {"tcp://silent:1", SILENT, 0},
                     {"tcp://lacking:1", LACKING, 0},
                     {"tcp://honest:1", HONEST, 0}};
    n.holders = hs;
    n.holder_count = 4;
    const char *src[] = {hs[0].addr, hs[1].addr, hs[2].addr, hs[3].addr};
    sl_blob_fetch_config_t cfg = {.window = 4, .timeout_ms = 500};
    sl_blob_fetch_t *f;
    CHECK_OK(sl_blob_fetch_new(7, &n.m, NULL, src, 4, &cfg, &f));
    uint64_t now = 0;
    CHECK_INT(run_fetch(&n, f, &now), SL_OK);
    sl_blob_fetch_stats_t st;
    sl_blob_fetch_stats(f, &st);
    CHECK_INT(st.held, 20);
    CHECK(st.corrupt >= 1 && st.timeouts >= 1 && st.missing >= 1);
    for (int i = 0; i < 20; i++)
        CHECK(n.written[i]);
    CHECK(n.max_in_flight <= 4);
    sl_blob_fetch_destroy(&f);
    sl_blob_manifest_fini(&n.m);
    free(n.written);
}

/* Only bad holders: the fetch gives up (never loops forever). */
static void test_fetch_gives_up(void) {
    static uint8_t data[3000];
    net_t n;
    make_blob(&n, data, sizeof data, 1000);
    holder_t hs[] = {{"tcp://corrupt:1", CORRUPT, 0}, {"tcp://silent:1", SILENT, 0}};
    n.holders = hs;
    n.holder_count = 2;
    const char *src[] = {hs[0].addr, hs[1].addr};
    sl_blob_fetch_config_t cfg = {.timeout_ms = 300};
    sl_blob_fetch_t *f;
    CHECK_OK(sl_blob_fetch_new(9, &n.m, NULL, src, 2, &cfg, &f));
    uint64_t now = 0;
    CHECK_INT(run_fetch(&n, f, &now), SL_ENOTFOUND);
    sl_blob_fetch_destroy(&f);
    sl_blob_manifest_fini(&n.m);
    free(n.written);
}

/* A holder that leaves the sources: its GETs in flight are asked
 * elsewhere at once, without waiting for the timeout. */
static void test_fetch_sources_change(void) {
    static uint8_t data[8 * 100];
    net_t n;
    make_blob(&n, data, sizeof data, 100);
    const char *src[] = {"tcp://dead:1"};
    sl_blob_fetch_config_t cfg = {.window = 4, .timeout_ms = 60000};
    sl_blob_fetch_t *f;
    CHECK_OK(sl_blob_fetch_new(11, &n.m, NULL, src, 1, &cfg, &f));
    sl_blob_req_t reqs[8];
    CHECK_INT(sl_blob_fetch_poll(f, 0, reqs, 8), 4);
    CHECK_INT(sl_blob_fetch_poll(f, 1, reqs, 8), 0); /* window full */
    CHECK(sl_blob_fetch_deadline(f) == 60000);
    holder_t hs[] = {{"tcp://new:1", HONEST, 0}};
    const char *src2[] = {hs[0].addr};
    CHECK_OK(sl_blob_fetch_set_sources(f, src2, 1));
    n.holders = hs;
    n.holder_count = 1;
    uint64_t now = 2;
    CHECK_INT(run_fetch(&n, f, &now), SL_OK);
    CHECK(now < 1000); /* no timeout was needed */
    /* a wrong transfer id, or an index never asked: refused as stale */
    sl_blob_msg_t c = {.type = SL_BLOB_MSG_CHUNK, .xfer = 12, .index = 0};
    CHECK_ERR(sl_blob_fetch_on_chunk(f, now, &c), SL_ESTATE);
    sl_blob_fetch_destroy(&f);
    sl_blob_manifest_fini(&n.m);
    free(n.written);
}

/* A write error fails the fetch with that error. */
static void test_fetch_write_error(void) {
    static uint8_t data[300];
    net_t n;
    make_blob(&n, data, sizeof data, 100);
    const char *src[] = {"tcp://a:1"};
    sl_blob_fetch_t *f;
    CHECK_OK(sl_blob_fetch_new(1, &n.m, NULL, src, 1, NULL, &f));
    sl_blob_req_t reqs[4];
    CHECK_INT(sl_blob_fetch_poll(f, 0, reqs, 4), 3);
    sl_blob_msg_t c = {.type = SL_BLOB_MSG_CHUNK, .xfer = 1, .index = 0, .data = data,
                       .data_len = 100};
    memcpy(c.chunk, n.m.chunks[0], SL_BLAKE2B_LEN);
    CHECK_OK(sl_blob_fetch_on_chunk(f, 0, &c));
    sl_blob_fetch_stored(f, 0, SL_EIO);
    CHECK_INT(sl_blob_fetch_status(f), SL_EIO);
    CHECK_INT(sl_blob_fetch_poll(f, 1, reqs, 4), 0);
    sl_blob_fetch_destroy(&f);
    sl_blob_manifest_fini(&n.m);
    free(n.written);
}

/* Every message kind round-trips through encode and decode. */
static void test_codec_roundtrip(void) {
    uint8_t data[1000];
    memset(data, 0xab, sizeof data);
    sl_blob_manifest_t m;
    CHECK_OK(sl_blob_manifest_build(data, sizeof data, 300, &m));
    uint8_t *man;
    size_t man_len;
    CHECK_OK(sl_blob_manifest_encode(&m, &man, &man_len));
    const char *addr = "tcp://10.0.0.7:7600";
    sl_blob_msg_t msgs[3] = {
        {.type = SL_BLOB_MSG_GET, .xfer = UINT64_MAX, .index = 3, .addr = (const uint8_t *)addr,
         .addr_len = strlen(addr)},
        {.type = SL_BLOB_MSG_CHUNK, .xfer = 1, .index = 2, .data = data, .data_len = 100},
        {.type = SL_BLOB_MSG_OFFER, .data = man, .data_len = man_len,
         .addr = (const uint8_t *)addr, .addr_len = strlen(addr)},
    };
    memcpy(msgs[0].blob, m.hash, SL_BLAKE2B_LEN);
    memcpy(msgs[0].chunk, m.chunks[3], SL_BLAKE2B_LEN);
    memcpy(msgs[1].chunk, m.chunks[2], SL_BLAKE2B_LEN);
    for (int i = 0; i < 3; i++) {
        uint8_t *body;
        size_t len;
        CHECK_OK(sl_blob_msg_encode(&msgs[i], &body, &len));
        sl_blob_msg_t d;
        CHECK_OK(sl_blob_msg_decode(msgs[i].type, body, len, &d));
        CHECK(d.xfer == msgs[i].xfer && d.index == msgs[i].index && d.status == msgs[i].status);
        CHECK(d.data_len == msgs[i].data_len && d.addr_len == msgs[i].addr_len);
        CHECK(!memcmp(d.blob, msgs[i].blob, SL_BLAKE2B_LEN));
        CHECK(!memcmp(d.chunk, msgs[i].chunk, SL_BLAKE2B_LEN));
        sl_free(body);
    }
    /* bounds are enforced when encoding too */
    sl_blob_msg_t big = {.type = SL_BLOB_MSG_CHUNK, .data = data,
                         .data_len = SL_BLOB_XFER_MAX_DATA + 1};
    uint8_t *body;
    size_t len;
    CHECK_ERR(sl_blob_msg_encode(&big, &body, &len), SL_ETOOBIG);
    sl_blob_msg_t noaddr = {.type = SL_BLOB_MSG_GET};
    CHECK_ERR(sl_blob_msg_encode(&noaddr, &body, &len), SL_ETOOBIG);
    sl_free(man);
    sl_blob_manifest_fini(&m);
}

/* Every allocation failure in the codec, the builder and a fetch is an
 * error, never a crash or a leak. */
static void test_alloc_failures(void) {
    static uint8_t data[5000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)i;
    for (uint64_t n = 1; n < 60; n++) {
        int64_t live = sl_alloc_live();
        sl_alloc_fail_after(n, false);
        sl_blob_manifest_t m;
        if (sl_blob_manifest_build(data, sizeof data, 1000, &m) == SL_OK) {
            uint8_t *enc = NULL;
            size_t enc_len;
            if (sl_blob_manifest_encode(&m, &enc, &enc_len) == SL_OK) {
                sl_blob_msg_t o = {.type = SL_BLOB_MSG_OFFER, .data = enc, .data_len = enc_len,
                                   .addr = (const uint8_t *)"tcp://a:1", .addr_len = 9};
                uint8_t *body;
                size_t len;
                if (sl_blob_msg_encode(&o, &body, &len) == SL_OK) {
                    sl_blob_msg_t d;
                    sl_blob_msg_decode(SL_BLOB_MSG_OFFER, body, len, &d);
                    sl_free(body);
                }
                sl_free(enc);
            }
            const char *src[] = {"tcp://a:1", "tcp://b:1"};
            sl_blob_fetch_t *f;
            if (sl_blob_fetch_new(1, &m, NULL, src, 2, NULL, &f) == SL_OK) {
                sl_blob_req_t reqs[4];
                sl_blob_fetch_poll(f, 0, reqs, 4);
                sl_blob_fetch_set_sources(f, src + 1, 1);
                sl_blob_fetch_destroy(&f);
            }
            sl_blob_manifest_fini(&m);
        }
        sl_blob_builder_t *b;
        if (sl_blob_builder_new(1000, &b) == SL_OK) {
            for (int k = 0; k < 5; k++)
                sl_blob_builder_add(b, data + k * 1000, 1000, NULL);
            if (sl_blob_builder_finish(b, &m) == SL_OK)
                sl_blob_manifest_fini(&m);
            sl_blob_builder_destroy(&b);
        }
        sl_alloc_fail_after(0, false);
        CHECK_INT(sl_alloc_live(), live);
    }
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR);
    sl_test_run("vectors", test_vectors);
    sl_test_run("codec_roundtrip", test_codec_roundtrip);
    sl_test_run("fetch_honest", test_fetch_honest);
    sl_test_run("fetch_bad_holders", test_fetch_bad_holders);
    sl_test_run("fetch_gives_up", test_fetch_gives_up);
    sl_test_run("fetch_sources_change", test_fetch_sources_change);
    sl_test_run("fetch_write_error", test_fetch_write_error);
    sl_test_run("alloc_failures", test_alloc_failures);
    return sl_test_finish();
}
