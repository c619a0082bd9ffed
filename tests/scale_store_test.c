/* Issue 14, item 3: the store's per-tick work no longer grows with the
 * members (bench/results/scale.md). What that keeps must stay right:
 *   - the fingerprint is kept between changes (sl_store_fingerprint was a
 *     sort of every replica, asked for at every round): after every kind
 *     of change it equals the one computed afresh;
 *   - the collector skips while nothing it reads moves: after idle calls
 *     it still collects what a later removal leaves, on both replicas.
 * And a delta that arrives past a gap is kept (bounded) and applied once
 * the gap fills, not left to anti-entropy. */
#include <stdlib.h>

#include "starling/store.h"
#include "store/store_internal.h"
#include "testlib.h"

static sl_store_t *mk(uint64_t rid) {
    sl_store_t *s;
    sl_store_config_t cfg = {0};
    CHECK_OK(sl_store_new(rid, &cfg, &s));
    return s;
}

static void deliver(sl_store_t *to, sl_store_out_t *out, sl_store_out_t *back) {
    for (size_t i = 0; i < out->count; i++)
        CHECK_OK(sl_store_receive(to, out->msgs[i].type, out->msgs[i].body, out->msgs[i].len,
                                  1000, back, &(bool){0}));
}

/* Push-pull from a to b until neither has anything to say. */
static void sync_pair(sl_store_t *a, sl_store_t *b) {
    sl_store_out_t o1, o2;
    sl_store_out_init(&o1);
    sl_store_msg_t d;
    CHECK_OK(sl_store_digest(a, false, &d));
    CHECK_OK(sl_store_receive(b, d.type, d.body, d.len, 1000, &o1, &(bool){0}));
    sl_store_msg_fini(&d);
    for (int round = 0; round < 20 && o1.count; round++) {
        sl_store_out_init(&o2);
        deliver(round % 2 ? b : a, &o1, &o2);
        sl_store_out_fini(&o1);
        o1 = o2;
    }
    sl_store_out_fini(&o1);
}

static void put(sl_store_t *s, const char *k) {
    sl_store_msg_t d;
    CHECK_OK(sl_store_put(s, k, strlen(k), "v", 1, 1000, &d));
    sl_store_msg_fini(&d);
}

static void del(sl_store_t *s, const char *k) {
    sl_store_msg_t d;
    CHECK_OK(sl_store_del(s, k, strlen(k), 1000, &d));
    sl_store_msg_fini(&d);
}

/* The kept fingerprint (asked twice: the second call takes the cache)
 * against one computed afresh. */
static int fp_checks, fp_wrong;
static void check_fp(sl_store_t *s, const char *after) {
    uint64_t kept = sl_store_fingerprint(s);
    kept = sl_store_fingerprint(s);
    s->fp_cached = 0;
    uint64_t fresh = sl_store_fingerprint(s);
    fp_checks++;
    if (kept != fresh) {
        fp_wrong++;
        CHECK_MSG(false, "fingerprint kept after %s is not the store's", after);
    }
}

static void test_fingerprint_kept(void) {
    sl_store_t *a = mk(10), *b = mk(20);
    check_fp(a, "nothing");
    /* asked many times at rest: the same (and the periodic check agrees) */
    for (int i = 0; i < 40; i++)
        check_fp(a, "nothing again");
    put(a, "k1");
    check_fp(a, "a put");
    del(a, "k1");
    check_fp(a, "a delete");
    sl_store_msg_t d;
    CHECK_OK(sl_store_set_add(a, "s", 1, "e", 1, 1000, &d));
    sl_store_msg_fini(&d);
    check_fp(a, "a set add");
    CHECK_OK(sl_store_counter_add(a, "c", 1, 3, 1000, &d));
    sl_store_msg_fini(&d);
    check_fp(a, "a counter add");
    sl_store_mark_durable(a);
    check_fp(a, "marking durable");
    put(a, "k2");
    check_fp(a, "a put past the durable mark");
    sl_store_mark_durable(a);
    check_fp(a, "marking durable again");
    put(b, "b1");
    check_fp(a, "b's write (not a's)");
    sync_pair(b, a);
    check_fp(a, "receiving b's write");
    check_fp(b, "b after the exchange");
    uint64_t live_a = 20, live_b = 10;
    CHECK_OK(sl_store_set_live(a, &live_a, 1));
    check_fp(a, "a live list");
    CHECK_OK(sl_store_set_live(b, &live_b, 1));
    for (int i = 0; i < 3; i++) {
        sl_store_gc(a);
        check_fp(a, "collecting");
        sync_pair(a, b);
        sync_pair(b, a);
        check_fp(a, "an exchange");
    }
    CHECK_OK(sl_store_retire(a, 20));
    check_fp(a, "retiring");
    sync_pair(a, b);
    sync_pair(b, a);
    sl_store_gc(a);
    check_fp(a, "collecting after retiring");
    sl_store_request_reset(a);
    check_fp(a, "asking for a reset");
    /* a fresh replica below a's cut takes a RESET snapshot (the maps swap) */
    sl_store_t *c = mk(30);
    check_fp(c, "nothing (c)");
    sync_pair(c, a);
    check_fp(c, "a reset snapshot");
    CHECK(fp_checks > 50 && fp_wrong == 0);
    sl_store_destroy(&a);
    sl_store_destroy(&b);
    sl_store_destroy(&c);
}

static uint64_t records(sl_store_t *s) {
    sl_store_stats_t st;
    sl_store_stats(s, &st);
    return st.records;
}

static void test_gc_after_idle(void) {
    sl_store_t *a = mk(10), *b = mk(20);
    uint64_t la = 20, lb = 10;
    CHECK_OK(sl_store_set_live(a, &la, 1));
    CHECK_OK(sl_store_set_live(b, &lb, 1));
    put(a, "x");
    del(a, "x");
    sync_pair(a, b);
    sync_pair(b, a);
    for (int round = 0; round < 3; round++) {
        sl_store_gc(a);
        sl_store_gc(b);
        sync_pair(a, b);
        sync_pair(b, a);
    }
    CHECK_INT(records(a), 0);
    CHECK_INT(records(b), 0);
    /* at rest: the collector goes idle (skips) */
    for (int i = 0; i < 10; i++) {
        CHECK_INT(sl_store_gc(a), 0);
        CHECK_INT(sl_store_gc(b), 0);
    }
    CHECK(a->gc_idle && b->gc_idle);
    /* a removal on b: both collect it once both hold it */
    put(b, "y");
    del(b, "y");
    sync_pair(b, a);
    sync_pair(a, b);
    CHECK_INT(records(a), 1);
    for (int round = 0; round < 3; round++) {
        sl_store_gc(a);
        sl_store_gc(b);
        sync_pair(a, b);
        sync_pair(b, a);
    }
    CHECK_MSG(records(a) == 0 && records(b) == 0,
              "the tombstone of y is left: %" PRIu64 " and %" PRIu64 " records", records(a),
              records(b));
    sl_store_destroy(&a);
    sl_store_destroy(&b);
}

static bool has(sl_store_t *s, const char *k) {
    const uint8_t *v;
    size_t n;
    return sl_store_get(s, k, strlen(k), &v, &n) == SL_OK;
}

/* Receives `m` and then every kept delta it made ready, as the store
 * node does; returns how many kept ones were applied. */
static int receive_all(sl_store_t *s, const sl_store_msg_t *m) {
    sl_store_out_t o;
    sl_store_out_init(&o);
    bool persist = false;
    CHECK_OK(sl_store_receive(s, m->type, m->body, m->len, 1000, &o, &persist));
    sl_store_out_fini(&o);
    int n = 0;
    sl_store_msg_t r;
    while (sl_store_take_ready(s, &r) == SL_OK) {
        sl_store_out_init(&o);
        persist = false;
        CHECK_OK(sl_store_receive(s, r.type, r.body, r.len, 1000, &o, &persist));
        CHECK_MSG(persist, "a kept delta applied changes the state (and is logged)");
        sl_store_out_fini(&o);
        sl_store_msg_fini(&r);
        n++;
    }
    return n;
}

/* A write pushed past a gap (the delta before it lost or late) was dropped,
 * and waited for anti-entropy; it is kept and applied when the gap fills. */
static void test_delta_past_gap(void) {
    sl_store_t *a = mk(10), *b = mk(20);
    enum { W = 72 };
    sl_store_msg_t d[W];
    for (int i = 0; i < W; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        CHECK_OK(sl_store_put(a, k, strlen(k), "v", 1, 1000, &d[i]));
    }
    /* 0, then 2 (1 is late): 2 waits, kept */
    CHECK_INT(receive_all(b, &d[0]), 0);
    CHECK_INT(receive_all(b, &d[2]), 0);
    CHECK(has(b, "k0") && !has(b, "k2"));
    sl_store_stats_t st;
    sl_store_stats(b, &st);
    CHECK_INT(st.gaps, 1);
    CHECK_INT(b->held_count, 1);
    /* the same delta again is not kept twice */
    CHECK_INT(receive_all(b, &d[2]), 0);
    CHECK_INT(b->held_count, 1);
    /* 1 arrives: 2 follows at once, without anti-entropy */
    CHECK_INT(receive_all(b, &d[1]), 1);
    CHECK_MSG(has(b, "k1") && has(b, "k2"), "k2 waits for anti-entropy after its gap filled");
    CHECK_INT(b->held_count, 0);
    CHECK_INT(sl_store_vv_get(b, 10), 3);
    /* bounded: 4 is late, 5..71 come (67 kept past the gap: the oldest 3
       dropped), then 3 and 4: 8..71 follow, 5..7 wait for anti-entropy */
    receive_all(b, &d[3]);
    for (int i = 5; i < W; i++)
        receive_all(b, &d[i]);
    CHECK_INT(b->held_count, SL_STORE_HELD_MAX);
    CHECK_INT(b->held_dropped, 3);
    CHECK(b->held_bytes <= SL_STORE_HELD_BYTES);
    CHECK_INT(receive_all(b, &d[4]), 0); /* 5 was dropped: the gap stays */
    CHECK(has(b, "k4") && !has(b, "k5") && !has(b, "k71"));
    sync_pair(a, b); /* anti-entropy brings 5..7, and the kept ones with it */
    CHECK(has(b, "k5") && has(b, "k71"));
    sl_store_msg_t r;
    CHECK_ERR(sl_store_take_ready(b, &r), SL_ENOTFOUND); /* nothing new left in them: dropped */
    CHECK_INT(b->held_count, 0);
    CHECK_INT(b->held_bytes, 0);
    CHECK_INT(sl_store_state_hash(a), sl_store_state_hash(b));
    for (int i = 0; i < W; i++)
        sl_store_msg_fini(&d[i]);
    sl_store_destroy(&a);
    sl_store_destroy(&b);
}

int main(void) {
    sl_test_run("fingerprint_kept", test_fingerprint_kept);
    sl_test_run("gc_after_idle", test_gc_after_idle);
    sl_test_run("delta_past_gap", test_delta_past_gap);
    return sl_test_finish();
}
