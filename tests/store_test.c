/* The store: local operations, the keys a received message changed,
 * anti-entropy between replicas (digests, chunked deltas, never echoing),
 * garbage collection, retiring, reset snapshots, disk snapshots and
 * hostile input. */
#include <stdlib.h>

#include "starling/mpack.h"
#include "starling/store.h"
#include "testlib.h"

static sl_store_t *mk(uint64_t rid, size_t max_msg) {
    sl_store_t *s;
    sl_store_config_t cfg = {.max_msg_len = max_msg};
    CHECK_OK(sl_store_new(rid, &cfg, &s));
    return s;
}

/* Delivers `out` to `to`, collecting what `to` answers into `back`. */
static size_t deliver(sl_store_t *to, sl_store_out_t *out, sl_store_out_t *back, size_t *bytes) {
    size_t n = 0;
    for (size_t i = 0; i < out->count; i++) {
        bool persist;
        if (bytes)
            *bytes += out->msgs[i].len + 4;
        CHECK_OK(sl_store_receive(to, out->msgs[i].type, out->msgs[i].body, out->msgs[i].len,
                                  1000, back, &persist));
        n++;
    }
    return n;
}

/* Push-pull from a to b until neither has anything to say. */
static size_t sync_pair(sl_store_t *a, sl_store_t *b) {
    size_t bytes = 0;
    sl_store_out_t o1, o2;
    sl_store_out_init(&o1);
    sl_store_msg_t d;
    CHECK_OK(sl_store_digest(a, false, &d));
    CHECK_OK(sl_store_receive(b, d.type, d.body, d.len, 1000, &o1, &(bool){0}));
    bytes += d.len + 4;
    sl_store_msg_fini(&d);
    for (int round = 0; round < 20 && o1.count; round++) {
        sl_store_out_init(&o2);
        deliver(round % 2 ? b : a, &o1, &o2, &bytes);
        sl_store_out_fini(&o1);
        o1 = o2;
    }
    CHECK_INT(o1.count, 0);
    sl_store_out_fini(&o1);
    return bytes;
}

static void put(sl_store_t *s, const char *k, const char *v) {
    sl_store_msg_t d;
    CHECK_OK(sl_store_put(s, k, strlen(k), v, strlen(v), 1000, &d));
    sl_store_msg_fini(&d);
}

static void check_get(sl_store_t *s, const char *k, const char *want) {
    const uint8_t *v;
    size_t n;
    sl_err err = sl_store_get(s, k, strlen(k), &v, &n);
    if (!want) {
        CHECK_ERR(err, SL_ENOTFOUND);
        return;
    }
    CHECK_OK(err);
    CHECK_MSG(err == SL_OK && n == strlen(want) && memcmp(v, want, n) == 0, "key %s", k);
}

/* Receives local write `d` at b and says which keys b reports changed. */
static void receive_changes(sl_store_t *b, sl_store_msg_t *d, uint64_t now_ms, const char *want) {
    sl_store_out_t o;
    sl_store_out_init(&o);
    o.list_changed = true;
    bool persist;
    CHECK_OK(sl_store_receive(b, d->type, d->body, d->len, now_ms, &o, &persist));
    char got[64] = "";
    for (size_t i = 0; i < o.changed_count; i++) {
        size_t at = strlen(got);
        snprintf(got + at, sizeof got - at, "%s%.*s", at ? " " : "", (int)o.changed[i].key_len,
                 (const char *)o.changed[i].key);
    }
    CHECK_MSG(strcmp(got, want) == 0, "changed \"%s\", want \"%s\"", got, want);
    CHECK(!o.all_changed);
    sl_store_out_fini(&o);
    sl_store_msg_fini(d);
}

/* A received DELTA reports each key whose value it changed (what the
 * store node tells its listeners); a RESET snapshot reports the map. */
static void test_change_reports(void) {
    sl_store_t *a = mk(1, 0), *b = mk(2, 0);
    sl_store_msg_t d, dup;
    CHECK_OK(sl_store_put(a, "k1", 2, "v1", 2, 1000, &d));
    dup = (sl_store_msg_t){.type = d.type, .len = d.len, .body = sl_malloc(d.len)};
    memcpy(dup.body, d.body, d.len);
    receive_changes(b, &d, 1000, "k1");
    receive_changes(b, &dup, 1000, ""); /* seen: nothing changed */
    CHECK_OK(sl_store_set_add(a, "s", 1, "x", 1, 1001, &d));
    receive_changes(b, &d, 1001, "s");
    /* a write that loses to b's later one changes nothing there */
    sl_store_msg_t late;
    CHECK_OK(sl_store_put(b, "k2", 2, "b", 1, 3000, &late));
    sl_store_msg_fini(&late);
    CHECK_OK(sl_store_put(a, "k2", 2, "a", 1, 1002, &d));
    receive_changes(b, &d, 1002, "");
    check_get(b, "k2", "b");
    CHECK_OK(sl_store_del(a, "k1", 2, 1003, &d));
    receive_changes(b, &d, 1003, "k1");
    check_get(b, "k1", NULL);
    /* a replica that asks for a RESET gets the map whole: all changed */
    sl_store_t *c = mk(3, 0);
    sl_store_request_reset(c);
    sl_store_msg_t q;
    sl_store_out_t o, back;
    sl_store_out_init(&o);
    sl_store_out_init(&back);
    CHECK_OK(sl_store_digest(c, false, &q));
    CHECK_OK(sl_store_receive(a, q.type, q.body, q.len, 1004, &o, &(bool){0}));
    sl_store_msg_fini(&q);
    bool reset = false;
    for (size_t i = 0; i < o.count; i++) {
        CHECK_OK(sl_store_receive(c, o.msgs[i].type, o.msgs[i].body, o.msgs[i].len, 1004, &back,
                                  &(bool){0}));
        reset |= o.msgs[i].type == SL_STORE_MSG_SNAPSHOT;
    }
    CHECK(reset);
    CHECK(back.all_changed);
    CHECK_INT(back.changed_count, 0);
    check_get(c, "k2", "a");
    sl_store_out_fini(&o);
    sl_store_out_fini(&back);
    sl_store_destroy(&a);
    sl_store_destroy(&b);
    sl_store_destroy(&c);
}

static void test_local_ops(void) {
    sl_store_t *s = mk(1, 0);
    put(s, "a", "1");
    put(s, "a", "22");
    put(s, "b", "");
    check_get(s, "a", "22");
    check_get(s, "b", "");
    check_get(s, "c", NULL);
    sl_store_msg_t d;
    CHECK_OK(sl_store_del(s, "a", 1, 1000, &d));
    sl_store_msg_fini(&d);
    check_get(s, "a", NULL);
    CHECK_ERR(sl_store_del(s, "a", 1, 1000, &d), SL_ENOTFOUND);
    CHECK_OK(sl_store_counter_add(s, "n", 1, 5, 1000, &d));
    sl_store_msg_fini(&d);
    CHECK_OK(sl_store_counter_add(s, "n", 1, -2, 1000, &d));
    sl_store_msg_fini(&d);
    sl_store_entry_t e;
    CHECK_OK(sl_store_lookup(s, "n", 1, &e));
    CHECK_INT(sl_crdt_counter_value(e.crdt), 3);
    CHECK_ERR(sl_store_put(s, "n", 1, "x", 1, 1000, &d), SL_EINVAL); /* wrong type */
    CHECK_OK(sl_store_set_add(s, "s", 1, "x", 1, 1000, &d));
    sl_store_msg_fini(&d);
    CHECK_OK(sl_store_set_remove(s, "s", 1, "x", 1, 1000, &d));
    sl_store_msg_fini(&d);
    CHECK_ERR(sl_store_lookup(s, "s", 1, &e), SL_ENOTFOUND);
    CHECK_OK(sl_store_gmap_put(s, "m", 1, "ep1", 3, "0.9", 3, 1000, &d));
    sl_store_msg_fini(&d);
    CHECK_OK(sl_store_lookup(s, "m", 1, &e));
    CHECK(sl_crdt_gmap_get(e.crdt, (const uint8_t *)"ep1", 3) != NULL);
    static uint8_t big[SL_STORE_MAX_VALUE_LEN + 1];
    CHECK_ERR(sl_store_put(s, "big", 3, big, sizeof big, 1000, &d), SL_ETOOBIG);
    CHECK_ERR(sl_store_put(s, "\xff", 1, "x", 1, 1000, &d), SL_EINVAL);
    CHECK_ERR(sl_store_put(s, "", 0, "x", 1, 1000, &d), SL_EINVAL);
    CHECK_INT(sl_store_vv_get(s, 1), 9);
    CHECK_OK(sl_store_check(s));
    sl_store_destroy(&s);
    CHECK(s == NULL);
}

static void test_sync_two(void) {
    sl_store_t *a = mk(10, 0), *b = mk(20, 0);
    char k[32], v[32];
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof k, "k%03d", i);
        snprintf(v, sizeof v, "a%d", i);
        put(a, k, v);
        if (i % 3 == 0) {
            snprintf(v, sizeof v, "b%d", i);
            put(b, k, v);
        }
    }
    sync_pair(a, b);
    CHECK_INT(sl_store_state_hash(a), sl_store_state_hash(b));
    CHECK_INT(sl_store_vv_get(a, 20), sl_store_vv_get(b, 20));
    CHECK_INT(sl_store_vv_get(b, 10), 100);
    /* nothing differs: a digest, no deltas, small */
    size_t bytes = sync_pair(a, b);
    CHECK_MSG(bytes < 64, "in-sync exchange took %zu bytes", bytes);
    CHECK_OK(sl_store_check(a));
    CHECK_OK(sl_store_check(b));
    sl_store_destroy(&a);
    sl_store_destroy(&b);
}

/* SUMMARY: replicas that agree answer a summary with one (a reply gets
 * nothing back) and record each other as holding their state; a replica
 * that differs answers with its DIGEST, which starts the push-pull. */
static void test_summary(void) {
    sl_store_t *a = mk(10, 0), *b = mk(20, 0);
    put(a, "x", "1");
    sync_pair(a, b);
    CHECK_INT(sl_store_fingerprint(a), sl_store_fingerprint(b));
    CHECK(sl_store_fingerprint(a) != 0);

    sl_store_msg_t m;
    sl_store_out_t out, back;
    bool persist;
    CHECK_OK(sl_store_summary(a, false, &m));
    CHECK_MSG(m.len < 48, "summary of %zu bytes", m.len);
    sl_store_out_init(&out);
    CHECK_OK(sl_store_receive(b, m.type, m.body, m.len, 1000, &out, &persist));
    sl_store_msg_fini(&m);
    CHECK(out.agreed && !persist);
    CHECK_INT(out.peer_fp, sl_store_fingerprint(b));
    CHECK_INT(out.count, 1);
    CHECK_INT(out.msgs[0].type, SL_STORE_MSG_SUMMARY);
    sl_store_out_init(&back); /* b's reply: a agrees and answers nothing */
    deliver(a, &out, &back, NULL);
    CHECK(back.agreed);
    CHECK_INT(back.count, 0);
    sl_store_out_fini(&back);
    sl_store_out_fini(&out);

    put(a, "y", "2"); /* now a is ahead: b's summary gets a's DIGEST */
    CHECK(sl_store_fingerprint(a) != sl_store_fingerprint(b));
    CHECK_OK(sl_store_summary(b, false, &m));
    sl_store_out_init(&out);
    CHECK_OK(sl_store_receive(a, m.type, m.body, m.len, 1000, &out, &persist));
    sl_store_msg_fini(&m);
    CHECK(!out.agreed);
    CHECK_INT(out.count, 1);
    CHECK_INT(out.msgs[0].type, SL_STORE_MSG_DIGEST);
    for (int round = 0; round < 10 && out.count; round++) { /* the push-pull it starts */
        sl_store_out_init(&back);
        deliver(round % 2 ? a : b, &out, &back, NULL);
        sl_store_out_fini(&out);
        out = back;
    }
    CHECK_INT(out.count, 0);
    sl_store_out_fini(&out);
    check_get(b, "y", "2");
    CHECK_INT(sl_store_fingerprint(a), sl_store_fingerprint(b));

    /* a DIGEST's fingerprint as the receiver computes it is the sender's own */
    CHECK_OK(sl_store_digest(a, false, &m));
    sl_store_out_init(&out);
    CHECK_OK(sl_store_receive(b, m.type, m.body, m.len, 1000, &out, &persist));
    CHECK_INT(out.peer_fp, sl_store_fingerprint(a));
    sl_store_out_fini(&out);
    sl_store_msg_fini(&m);
    sl_store_destroy(&a);
    sl_store_destroy(&b);
}

/* sl_store_caught_up_ms: set when the replica holds all that a peer's
 * DIGEST or SUMMARY said it held (at once, or once the answer to its pull
 * is applied), not before. */
static void test_caught_up(void) {
    sl_store_t *a = mk(11, 0), *b = mk(21, 0);
    put(a, "k1", "1");
    put(a, "k2", "2");
    CHECK_INT(sl_store_caught_up_ms(b), 0);
    /* a's digest: b lacks a's writes, so it is not caught up and pulls */
    sl_store_msg_t m;
    sl_store_out_t out, back;
    CHECK_OK(sl_store_digest(a, false, &m));
    sl_store_out_init(&out);
    CHECK_OK(sl_store_receive(b, m.type, m.body, m.len, 5000, &out, &(bool){0}));
    sl_store_msg_fini(&m);
    CHECK_INT(sl_store_caught_up_ms(b), 0);
    CHECK_INT(out.count, 1);
    CHECK_INT(out.msgs[0].type, SL_STORE_MSG_DIGEST);
    /* a answers with its deltas; applied, b holds what a's digest said */
    sl_store_out_init(&back);
    deliver(a, &out, &back, NULL);
    sl_store_out_fini(&out);
    CHECK(back.count >= 1);
    sl_store_out_init(&out);
    deliver(b, &back, &out, NULL); /* (at 1000 ms) */
    sl_store_out_fini(&back);
    sl_store_out_fini(&out);
    CHECK_INT(sl_store_caught_up_ms(b), 1000);
    check_get(b, "k2", "2");

    /* a summary that differs moves nothing; one that agrees does */
    put(a, "k3", "3");
    CHECK_OK(sl_store_summary(a, false, &m));
    sl_store_out_init(&out);
    CHECK_OK(sl_store_receive(b, m.type, m.body, m.len, 7000, &out, &(bool){0}));
    sl_store_msg_fini(&m);
    sl_store_out_fini(&out);
    CHECK_INT(sl_store_caught_up_ms(b), 1000);
    sync_pair(a, b);
    CHECK_OK(sl_store_summary(a, false, &m));
    sl_store_out_init(&out);
    CHECK_OK(sl_store_receive(b, m.type, m.body, m.len, 9000, &out, &(bool){0}));
    sl_store_msg_fini(&m);
    CHECK(out.agreed);
    sl_store_out_fini(&out);
    CHECK_INT(sl_store_caught_up_ms(b), 9000);

    /* a digest b already covers: caught up at once, no pull */
    CHECK_OK(sl_store_digest(a, false, &m));
    sl_store_out_init(&out);
    CHECK_OK(sl_store_receive(b, m.type, m.body, m.len, 11000, &out, &(bool){0}));
    sl_store_msg_fini(&m);
    CHECK_INT(out.count, 0);
    sl_store_out_fini(&out);
    CHECK_INT(sl_store_caught_up_ms(b), 11000);
    sl_store_destroy(&a);
    sl_store_destroy(&b);
}

static void test_chunked_and_bounded(void) {
    sl_store_t *a = mk(10, 4096), *b = mk(20, 4096);
    char k[32], v[200];
    memset(v, 'v', sizeof v - 1);
    v[sizeof v - 1] = 0;
    for (int i = 0; i < 500; i++) {
        snprintf(k, sizeof k, "key/%04d", i);
        put(a, k, v);
    }
    for (int i = 0; i < 500; i += 2) { /* overwritten dots are not sent */
        snprintf(k, sizeof k, "key/%04d", i);
        put(a, k, "short");
    }
    sl_store_msg_t d;
    CHECK_OK(sl_store_digest(b, false, &d));
    sl_store_out_t o;
    sl_store_out_init(&o);
    CHECK_OK(sl_store_receive(a, d.type, d.body, d.len, 1000, &o, &(bool){0}));
    sl_store_msg_fini(&d);
    CHECK(o.count > 10);
    for (size_t i = 0; i < o.count; i++)
        CHECK_MSG(o.msgs[i].len <= 4096 + 256, "message %zu is %zu bytes", i, o.msgs[i].len);
    /* drop one chunk in the middle: later chunks stop at the gap */
    sl_store_out_t back;
    sl_store_out_init(&back);
    for (size_t i = 0; i < o.count; i++) {
        if (i == 3)
            continue;
        CHECK_OK(sl_store_receive(b, o.msgs[i].type, o.msgs[i].body, o.msgs[i].len, 1000, &back,
                                  &(bool){0}));
    }
    sl_store_out_fini(&o);
    sl_store_out_fini(&back);
    sl_store_stats_t st;
    sl_store_stats(b, &st);
    CHECK(st.gaps > 0);
    CHECK(sl_store_vv_get(b, 10) < 750);
    sync_pair(b, a);
    CHECK_INT(sl_store_vv_get(b, 10), 750);
    CHECK_INT(sl_store_state_hash(a), sl_store_state_hash(b));
    sl_store_destroy(&a);
    sl_store_destroy(&b);
}

/* A DELTA must never carry the receiver's own atoms back to it. */
static void test_no_echo(void) {
    sl_store_t *a = mk(10, 0), *b = mk(20, 0);
    put(a, "x", "1");
    put(b, "y", "2");
    sync_pair(a, b);
    sl_store_msg_t d;
    CHECK_OK(sl_store_digest(b, false, &d));
    /* pretend b knows nothing of a, and a knows nothing of b: a must still
     * not send b its own atoms */
    sl_store_t *a2 = mk(11, 0);
    put(a2, "z", "3");
    sl_store_out_t o;
    sl_store_out_init(&o);
    sl_store_out_t tmp;
    sl_store_out_init(&tmp);
    sl_store_msg_t da;
    CHECK_OK(sl_store_digest(a, false, &da));
    CHECK_OK(sl_store_receive(b, da.type, da.body, da.len, 1000, &tmp, &(bool){0}));
    sl_store_msg_fini(&da);
    sl_store_out_fini(&tmp);
    sl_store_msg_fini(&d);
    /* b holds a's and its own atoms; ask b for everything as a stranger
     * would, but claiming to be a: only b's atoms come back */
    sl_store_dmsg_t q = {.type = SL_STORE_MSG_DIGEST, .sender = 10};
    sl_store_msg_t qm;
    CHECK_OK(sl_store_msg_encode(&q, 1 << 20, &qm));
    CHECK_OK(sl_store_receive(b, qm.type, qm.body, qm.len, 1000, &o, &(bool){0}));
    sl_store_msg_fini(&qm);
    for (size_t i = 0; i < o.count; i++) {
        sl_store_dmsg_t m;
        CHECK_OK(sl_store_msg_decode(o.msgs[i].type, o.msgs[i].body, o.msgs[i].len, &m));
        for (uint32_t k = 0; k < m.item_count; k++)
            CHECK(m.items[k].it.dot.rid != 10);
        for (uint32_t k = 0; k < m.range_count && m.type == SL_STORE_MSG_DELTA; k++)
            CHECK(m.ranges[k].rid != 10);
        sl_store_dmsg_fini(&m);
    }
    sl_store_out_fini(&o);
    sl_store_destroy(&a);
    sl_store_destroy(&a2);
    sl_store_destroy(&b);
}

static void test_gc_and_retire(void) {
    sl_store_t *a = mk(10, 0), *b = mk(20, 0);
    uint64_t la = 20, lb = 10;
    CHECK_OK(sl_store_set_live(a, &la, 1));
    CHECK_OK(sl_store_set_live(b, &lb, 1));
    sl_store_msg_t d;
    for (int i = 0; i < 50; i++) {
        char k[16];
        snprintf(k, sizeof k, "t%d", i);
        put(a, k, "x");
        CHECK_OK(sl_store_del(a, k, strlen(k), 1000, &d));
        sl_store_msg_fini(&d);
    }
    CHECK_OK(sl_store_set_add(b, "s", 1, "e", 1, 1000, &d));
    sl_store_msg_fini(&d);
    CHECK_OK(sl_store_set_remove(b, "s", 1, "e", 1, 1000, &d));
    sl_store_msg_fini(&d);
    sync_pair(a, b);
    sync_pair(b, a);
    sl_store_stats_t st;
    sl_store_stats(a, &st);
    CHECK_INT(st.keys, 0);
    CHECK_INT(st.records, 51); /* tombstones and the DEAD atom */
    for (int round = 0; round < 3; round++) {
        sl_store_gc(a);
        sl_store_gc(b);
        sync_pair(a, b);
        sync_pair(b, a);
    }
    sl_store_stats(a, &st);
    CHECK_INT(st.records, 0); /* removed keys cost nothing once all saw them */
    sl_store_stats(b, &st);
    CHECK_INT(st.records, 0);
    CHECK(st.arena_bytes == 0);
    /* a restarts as 11: 10 retires once everyone has all its dots */
    sl_store_t *a2 = mk(11, 0);
    sl_store_out_t o;
    sl_store_out_init(&o);
    put(b, "after", "gc");
    sync_pair(a2, b); /* a2 is below b's cut: it gets a reset snapshot */
    sl_store_stats(b, &st);
    CHECK(st.snapshots_sent > 0);
    CHECK_INT(sl_store_state_hash(a2), sl_store_state_hash(b));
    CHECK_INT(sl_store_vv_get(a2, 10), 100);
    uint64_t l2 = 20, lb2 = 11;
    CHECK_OK(sl_store_set_live(a2, &l2, 1));
    CHECK_OK(sl_store_set_live(b, &lb2, 1));
    CHECK_OK(sl_store_retire(b, 10));
    CHECK_OK(sl_store_retire(a2, 10));
    sync_pair(a2, b);
    sync_pair(b, a2);
    sl_store_gc(a2);
    sl_store_gc(b);
    sl_store_stats(b, &st);
    CHECK_INT(st.retired, 1);
    CHECK_INT(sl_store_vv_get(b, 10), 0); /* left the version vector */
    sync_pair(a2, b);
    CHECK_INT(sl_store_state_hash(a2), sl_store_state_hash(b));
    sl_store_out_fini(&o);
    sl_store_destroy(&a);
    sl_store_destroy(&a2);
    sl_store_destroy(&b);
}

static void test_snapshot_replay(void) {
    sl_store_t *a = mk(10, 0), *b = mk(20, 0);
    sl_store_msg_t d;
    for (int i = 0; i < 300; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i % 97);
        put(a, k, "value");
        CHECK_OK(sl_store_counter_add(a, "ctr", 3, 1, 1000, &d));
        sl_store_msg_fini(&d);
        CHECK_OK(sl_store_gmap_put(b, "metrics", 7, k, strlen(k), "1", 1, 1000, &d));
        sl_store_msg_fini(&d);
    }
    sync_pair(a, b);
    sl_store_msg_t snap;
    CHECK_OK(sl_store_snapshot(a, &snap));
    sl_store_t *c = mk(30, 0);
    CHECK_OK(sl_store_replay(c, snap.type, snap.body, snap.len));
    CHECK_INT(sl_store_state_hash(c), sl_store_state_hash(a));
    CHECK_INT(sl_store_vv_get(c, 10), 600);
    CHECK_INT(sl_store_vv_get(c, 20), 300);
    CHECK_OK(sl_store_check(c));
    /* replaying it again changes nothing */
    CHECK_OK(sl_store_replay(c, snap.type, snap.body, snap.len));
    CHECK_INT(sl_store_state_hash(c), sl_store_state_hash(a));
    sl_store_msg_fini(&snap);
    sl_store_destroy(&a);
    sl_store_destroy(&b);
    sl_store_destroy(&c);
}

static void test_hostile(void) {
    sl_store_t *a = mk(10, 0);
    put(a, "x", "1");
    sl_store_out_t o;
    sl_store_out_init(&o);
    bool persist;
    /* a delta claiming a's own dots beyond what a issued */
    sl_store_item_t item = {.key = (const uint8_t *)"x", .key_len = 1,
                            .it = {.kind = SL_ITEM_LWW, .type = SL_CRDT_LWW, .dot = {10, 5},
                                   .hlc = 1, .a = (const uint8_t *)"evil", .a_len = 4}};
    sl_store_range_t r = {10, 4, 5};
    sl_store_dmsg_t m = {.type = SL_STORE_MSG_DELTA, .sender = 99, .ranges = &r, .range_count = 1,
                         .items = &item, .item_count = 1};
    sl_store_msg_t msg;
    CHECK_OK(sl_store_msg_encode(&m, 1 << 20, &msg));
    CHECK_ERR(sl_store_receive(a, msg.type, msg.body, msg.len, 1000, &o, &persist), SL_EPROTO);
    sl_store_msg_fini(&msg);
    /* a timestamp far in the future: refused, sender named, nothing changed */
    r = (sl_store_range_t){77, 0, 1};
    item.it.dot = (sl_dot_t){77, 1};
    item.it.hlc = (uint64_t)10000000 << 16;
    CHECK_OK(sl_store_msg_encode(&m, 1 << 20, &msg));
    CHECK_ERR(sl_store_receive(a, msg.type, msg.body, msg.len, 1000, &o, &persist), SL_ERANGE);
    sl_store_msg_fini(&msg);
    check_get(a, "x", "1");
    /* garbage and truncations */
    uint8_t junk[64];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 37);
    CHECK(sl_store_receive(a, SL_STORE_MSG_DELTA, junk, sizeof junk, 1000, &o, &persist) != SL_OK);
    CHECK_ERR(sl_store_receive(a, 40, junk, sizeof junk, 1000, &o, &persist), SL_ETYPE);
    sl_store_stats_t st;
    sl_store_stats(a, &st);
    CHECK_INT(st.rejected, 4);
    CHECK_INT(st.clock_rejected, 1);
    check_get(a, "x", "1");
    CHECK_OK(sl_store_check(a));
    sl_store_out_fini(&o);
    sl_store_destroy(&a);
}

static void test_alloc_failures(void) {
    /* every allocation failure is an error, never a crash or a leak */
    for (uint64_t n = 1; n < 400; n++) {
        int64_t live = sl_alloc_live();
        sl_store_t *a = NULL, *b = NULL;
        sl_alloc_fail_after(n, false);
        if (sl_store_new(10, NULL, &a) == SL_OK && sl_store_new(20, NULL, &b) == SL_OK) {
            sl_store_msg_t d;
            for (int i = 0; i < 5; i++) {
                char k[8];
                snprintf(k, sizeof k, "k%d", i);
                if (sl_store_put(a, k, strlen(k), "v", 1, 1000, &d) == SL_OK)
                    sl_store_msg_fini(&d);
                if (sl_store_set_add(b, "s", 1, k, strlen(k), 1000, &d) == SL_OK)
                    sl_store_msg_fini(&d);
            }
            sl_store_out_t o;
            sl_store_out_init(&o);
            if (sl_store_digest(a, false, &d) == SL_OK) {
                sl_store_receive(b, d.type, d.body, d.len, 1000, &o, &(bool){0});
                sl_store_msg_fini(&d);
            }
            sl_store_out_fini(&o);
        }
        sl_alloc_fail_after(0, false);
        sl_store_destroy(&a);
        sl_store_destroy(&b);
        CHECK_INT(sl_alloc_live(), live);
    }
}

/* proto/vectors/store/store.txt: valid vectors decode and re-encode byte
 * for byte (every strict prefix is SL_ETRUNC), compat ones re-encode
 * without their unknown keys, invalid ones fail with exactly their error. */
static void test_vectors(void) {
    char path[4096];
    sl_test_source_path("proto/vectors/store/store.txt", path, sizeof path);
    size_t len;
    char *text = (char *)sl_test_read_file(path, &len);
    CHECK_MSG(text != NULL, "cannot read %s", path);
    if (!text)
        return;
    int counts[3] = {0};
    static uint8_t h[8], b[1 << 16], re[1 << 16];
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || line[0] == 0)
            continue;
        char kind[16], name[64], f1[64], f2[1 << 17], f3[1 << 17], f4[1 << 17];
        int nt = sscanf(line, "%15s %63s %63s %131071s %131071s %131071s", kind, name, f1, f2, f3, f4);
        bool inv = strcmp(kind, "invalid") == 0, compat = strcmp(kind, "compat") == 0;
        const char *hh = inv ? f2 : f1, *bb = inv ? f3 : f2;
        long hl = sl_test_unhex(hh, h, sizeof h), bl = sl_test_unhex(bb, b, sizeof b);
        CHECK_MSG(nt >= 4 && hl == 4 && bl >= 0, "%s: malformed line", name);
        if (hl != 4 || bl < 0)
            continue;
        sl_store_dmsg_t m;
        sl_err err = sl_store_msg_decode(h[3], b, (size_t)bl, &m);
        if (inv) {
            CHECK_MSG(strcmp(sl_errname(err), f1) == 0, "%s: got %s, want %s", name,
                      sl_errname(err), f1);
            if (err == SL_OK)
                sl_store_dmsg_fini(&m);
            counts[2]++;
            continue;
        }
        CHECK_MSG(err == SL_OK, "%s: %s", name, sl_errname(err));
        if (err)
            continue;
        sl_store_msg_t out;
        CHECK_OK(sl_store_msg_encode(&m, SIZE_MAX, &out));
        long rl = compat ? sl_test_unhex(f3, re, sizeof re) : bl;
        const uint8_t *want = compat ? re : b;
        CHECK_MSG(out.len == (size_t)rl && memcmp(out.body, want, out.len) == 0,
                  "%s: re-encoding differs", name);
        sl_store_msg_fini(&out);
        sl_store_dmsg_fini(&m);
        for (long cut = 0; !compat && cut < bl; cut++) {
            err = sl_store_msg_decode(h[3], b, (size_t)cut, &m);
            CHECK_MSG(err == SL_ETRUNC, "%s: prefix %ld: %s", name, cut, sl_errname(err));
            if (err == SL_OK)
                sl_store_dmsg_fini(&m);
        }
        counts[compat]++;
    }
    free(text);
    CHECK(counts[0] >= 10 && counts[1] >= 1 && counts[2] >= 20);
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR);
    sl_test_run("local_ops", test_local_ops);
    sl_test_run("change_reports", test_change_reports);
    sl_test_run("sync_two", test_sync_two);
    sl_test_run("summary", test_summary);
    sl_test_run("caught_up", test_caught_up);
    sl_test_run("chunked_and_bounded", test_chunked_and_bounded);
    sl_test_run("no_echo", test_no_echo);
    sl_test_run("gc_and_retire", test_gc_and_retire);
    sl_test_run("snapshot_replay", test_snapshot_replay);
    sl_test_run("hostile", test_hostile);
    sl_test_run("alloc_failures", test_alloc_failures);
    sl_test_run("vectors", test_vectors);
    return sl_test_finish();
}
