/* Issue 12, item 7: a RESET SNAPSHOT whose chunks name different replicas
 * left an atom on the receiver that was never replicated (its chunk's vv
 * covered it, the last chunk's vv, the one joined, did not): permanent
 * divergence. Every chunk of one snapshot must repeat the first's chunk
 * count, flags, vv and retired list; a snapshot may not claim dots of
 * the receiver it never issued, nor more than the lead past what the
 * receiver holds. Real store cores; the forged chunks are injected.
 *
 *   chunks_disagree  two chunks, two different vvs: refused, counted, the
 *                    receiver still converges with its honest peer
 *   claims           a snapshot with the receiver's own dots past its
 *                    counter, or 2^40 dots of a replica: refused
 *   honest_chunks    a real chunked RESET still applies (the check
 *                    refuses only what disagrees)
 */
#include <stdlib.h>

#include "starling/hlc.h"
#include "starling/store.h"
#include "testlib.h"

#define NOW 1000

static sl_store_t *mk(uint64_t rid, size_t max_msg) {
    sl_store_t *s;
    sl_store_config_t cfg = {.max_msg_len = max_msg};
    CHECK_OK(sl_store_new(rid, &cfg, &s));
    return s;
}

static void put(sl_store_t *s, const char *k, const char *v) {
    sl_store_msg_t d;
    CHECK_OK(sl_store_put(s, k, strlen(k), v, strlen(v), NOW, &d));
    sl_store_msg_fini(&d);
}

static int has_key(sl_store_t *s, const char *k) {
    const uint8_t *v;
    size_t n;
    return sl_store_get(s, k, strlen(k), &v, &n) == SL_OK;
}

/* One round started by `a` (its SUMMARY to `b`), answers back and forth. */
static void exchange(sl_store_t *a, sl_store_t *b) {
    sl_store_out_t o1, o2;
    sl_store_out_init(&o1);
    sl_store_msg_t d;
    CHECK_OK(sl_store_summary(a, false, &d));
    CHECK_OK(sl_store_receive(b, d.type, d.body, d.len, NOW, &o1, &(bool){0}));
    sl_store_msg_fini(&d);
    for (int round = 0; round < 40 && o1.count; round++) {
        sl_store_t *to = round % 2 ? b : a;
        sl_store_out_init(&o2);
        for (size_t i = 0; i < o1.count; i++)
            CHECK_OK(sl_store_receive(to, o1.msgs[i].type, o1.msgs[i].body, o1.msgs[i].len, NOW,
                                      &o2, &(bool){0}));
        sl_store_out_fini(&o1);
        o1 = o2;
    }
    sl_store_out_fini(&o1);
}

/* Sends one forged RESET chunk: vv (one entry `rid` = `seq`), one LWW atom
 * of `rid` at `seq` under `key`. */
static sl_err chunk(sl_store_t *to, uint32_t index, uint32_t count, uint64_t rid, uint64_t seq,
                    const char *key) {
    sl_store_range_t vv = {rid, 0, seq};
    sl_store_item_t item = {.key = (const uint8_t *)key, .key_len = (uint32_t)strlen(key),
                            .it = {.kind = SL_ITEM_LWW, .type = SL_CRDT_LWW, .dot = {rid, seq},
                                   .hlc = sl_hlc_make(NOW - 100, 0),
                                   .a = (const uint8_t *)"x", .a_len = 1}};
    sl_store_dmsg_t m = {.type = SL_STORE_MSG_SNAPSHOT, .sender = 0xf00d, .snap_id = 7,
                         .chunk = index, .chunks = count, .flags = SL_STORE_SNAP_RESET,
                         .ranges = &vv, .range_count = 1, .items = &item, .item_count = 1};
    sl_store_msg_t msg;
    CHECK_OK(sl_store_msg_encode(&m, 1 << 20, &msg));
    sl_store_out_t o;
    sl_store_out_init(&o);
    sl_err err = sl_store_receive(to, msg.type, msg.body, msg.len, NOW, &o, &(bool){0});
    sl_store_out_fini(&o);
    sl_store_msg_fini(&msg);
    return err;
}

static uint64_t rejected(sl_store_t *s) {
    sl_store_stats_t st;
    sl_store_stats(s, &st);
    return st.rejected;
}

static void test_chunks_disagree(void) {
    sl_store_t *v = mk(0x51, 0), *p = mk(0x52, 0);
    put(v, "v/1", "a");
    put(p, "p/1", "b");
    exchange(v, p);
    CHECK(sl_store_state_hash(v) == sl_store_state_hash(p));
    /* chunk 0 names replica e1, chunk 1 names e2 */
    chunk(v, 0, 2, 0xe1, 1, "evil");
    chunk(v, 1, 2, 0xe2, 1, "y");
    CHECK_MSG(rejected(v) >= 1, "the disagreeing chunk was not refused");
    for (int i = 0; i < 3; i++) {
        exchange(v, p);
        exchange(p, v);
    }
    CHECK_MSG(sl_store_state_hash(v) == sl_store_state_hash(p),
              "permanent divergence: %016" PRIx64 " against %016" PRIx64 " (evil: %d and %d)",
              sl_store_state_hash(v), sl_store_state_hash(p), has_key(v, "evil"),
              has_key(p, "evil"));
    CHECK_OK(sl_store_check(v));
    CHECK(has_key(v, "v/1") && has_key(v, "p/1"));
    sl_store_destroy(&v);
    sl_store_destroy(&p);
}

static void test_claims(void) {
    sl_store_t *v = mk(0x51, 0);
    put(v, "v/1", "a");
    uint64_t r0 = rejected(v);
    /* the receiver's own dots, past the one it issued */
    CHECK_ERR(chunk(v, 0, 1, 0x51, 9, "mine"), SL_EPROTO);
    /* 2^40 dots of a replica it holds none of */
    CHECK_ERR(chunk(v, 0, 1, 0xe1, UINT64_C(1) << 40, "far"), SL_EPROTO);
    CHECK_INT(rejected(v), r0 + 2);
    CHECK(!has_key(v, "mine") && !has_key(v, "far"));
    CHECK_INT(sl_store_vv_get(v, 0xe1), 0);
    CHECK_INT(sl_store_vv_get(v, 0x51), 1);
    CHECK_OK(sl_store_check(v));
    sl_store_destroy(&v);
}

static void test_honest_chunks(void) {
    sl_store_t *v = mk(0x51, 4096), *p = mk(0x52, 4096);
    char k[32];
    for (int i = 0; i < 400; i++) {
        snprintf(k, sizeof k, "p/%d", i);
        put(p, k, "value-of-some-length");
    }
    put(v, "v/1", "a");
    sl_store_request_reset(v);
    exchange(v, p);
    exchange(p, v);
    sl_store_stats_t st;
    sl_store_stats(p, &st);
    CHECK_MSG(st.snapshots_sent > 1, "one chunk only (%" PRIu64 ")", st.snapshots_sent);
    CHECK_INT(rejected(v), 0);
    CHECK(sl_store_state_hash(v) == sl_store_state_hash(p));
    CHECK(has_key(v, "p/399") && has_key(p, "v/1"));
    sl_store_destroy(&v);
    sl_store_destroy(&p);
}

/* A peer that took a forged claim about the receiver's dots (within the
 * bound) sends it a RESET whose vv names the receiver's own dots past its
 * counter: refused, but the receiver's next round heals its counter from
 * that peer's DIGEST, and the next RESET applies. */
static void test_reset_after_forgery(void) {
    sl_store_t *v = mk(0x51, 0), *p = mk(0x52, 0);
    put(v, "v/1", "a");
    put(p, "p/1", "b");
    exchange(v, p);
    sl_store_range_t r = {0x51, 1, 1000};
    sl_store_dmsg_t m = {.type = SL_STORE_MSG_DELTA, .sender = 0xf00d, .ranges = &r,
                         .range_count = 1};
    sl_store_msg_t msg;
    CHECK_OK(sl_store_msg_encode(&m, 1 << 20, &msg));
    sl_store_out_t o;
    sl_store_out_init(&o);
    CHECK_OK(sl_store_receive(p, msg.type, msg.body, msg.len, NOW, &o, &(bool){0}));
    sl_store_out_fini(&o);
    sl_store_msg_fini(&msg);
    sl_store_request_reset(v);
    /* v's digest asks for the reset; p's RESET names v's dots up to 1000 */
    sl_store_msg_t d;
    CHECK_OK(sl_store_digest(v, false, &d));
    sl_store_out_init(&o);
    CHECK_OK(sl_store_receive(p, d.type, d.body, d.len, NOW, &o, &(bool){0}));
    sl_store_msg_fini(&d);
    sl_err first = SL_OK;
    for (size_t i = 0; i < o.count; i++)
        if (o.msgs[i].type == SL_STORE_MSG_SNAPSHOT)
            first = sl_store_receive(v, o.msgs[i].type, o.msgs[i].body, o.msgs[i].len, NOW,
                                     &(sl_store_out_t){0}, &(bool){0});
    sl_store_out_fini(&o);
    CHECK_ERR(first, SL_EPROTO);
    for (int i = 0; i < 3; i++) {
        exchange(v, p);
        exchange(p, v);
    }
    CHECK_MSG(sl_store_vv_get(v, 0x51) >= 1000, "v's counter stayed at %" PRIu64,
              sl_store_vv_get(v, 0x51));
    put(v, "v/2", "c");
    exchange(v, p);
    CHECK(has_key(p, "v/2"));
    CHECK(sl_store_state_hash(v) == sl_store_state_hash(p));
    CHECK(sl_store_fingerprint(v) == sl_store_fingerprint(p));
    CHECK_OK(sl_store_check(v));
    sl_store_destroy(&v);
    sl_store_destroy(&p);
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR);
    sl_test_run("chunks_disagree", test_chunks_disagree);
    sl_test_run("claims", test_claims);
    sl_test_run("honest_chunks", test_honest_chunks);
    sl_test_run("reset_after_forgery", test_reset_after_forgery);
    return sl_test_finish();
}
