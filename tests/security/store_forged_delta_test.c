/* Issue 12, item 2: one forged 28-byte DELTA claiming a replica's dots up
 * to 2^40 silently stopped that replica's writes from replicating (the
 * receivers took the claim, and every later write of the victim looked
 * old to them). Three real store cores exchange messages as peers do (a
 * local write's DELTA to every peer, then push-pull rounds); the forgery
 * is injected into one of them.
 *
 *   forged_2_40    the message: refused and counted; the victim's
 *                  next 20 writes reach both peers; state hashes converge
 *   heal           a forged claim small enough to pass (1,000 dots): the
 *                  victim learns from the poisoned peer's DIGEST that its
 *                  counter is believed further, moves past it, and its
 *                  later writes reach that peer; its WAL replays the move
 *                  (no dot issued twice after a restart)
 *   own_claims     claims about the receiver's own dots: a DELTA or a
 *                  DIGEST beyond the lead is refused, the counter is kept
 *   cut_ranges     a replica with more than 2^32 dots is still relayed
 *                  (ranges are cut at the lead, not refused)
 *   few_ahead      a claim only 5 dots ahead, then 20 writes: the victim's
 *                  counter passes it before any DIGEST shows it (no heal);
 *                  the poisoned peer joins the 5 from their writer anyway
 *   heal_resend    writes the poisoned peer counted as seen and never got
 *                  (its pushes lost) go to it again at the heal: exactly
 *                  those past what it last reported
 *   relayed        the claim reached a second peer through the first, and
 *                  the heal came from the second: both get the writes
 *   stale_after_gc the writer's word never brings back a collected delete
 *
 * `store_forged_delta_test send ADDR RID_HEX [FROM TO]` sends the issue's
 * forged DELTA (dots of RID up to 2^40, or (FROM, TO], no atom) to the
 * peer at ADDR, as a raw ZeroMQ client with no key:
 * store_forged_cluster_test.sh uses it on real peers. `store_forged_delta_test future ADDR N` sends N DELTAs whose
 * atom is stamped an hour ahead (each refused, HLC-REJECT).
 */
#include <stdlib.h>

#include <time.h>

#include "starling/hlc.h"
#include "starling/net.h"
#include "starling/store.h"
#include "testlib.h"

#define NOW 1000

#ifndef SL_STORE_MAX_DOT_LEAD /* built against the code before the fix, to see it fail */
#define SL_STORE_MAX_DOT_LEAD (UINT64_C(1) << 32)
#define FORGED(st) 0
#define HEALED(st) 0
#else
#define FORGED(st) (st).forged
#define HEALED(st) (st).healed
#endif
#ifdef SL_STORE_OLD_STATS /* before the re-send (rule 9) and the originator's word (rule 4) */
#define RESENT(st) 0
#define REJOINED(st) 0
#else
#define RESENT(st) (st).resent
#define REJOINED(st) (st).rejoined
#endif

typedef struct {
    sl_store_msg_t *msgs; /* a replica's WAL: every record it persisted */
    size_t count;         /* records */
} wal_t;

static sl_store_t *mk(uint64_t rid) {
    sl_store_t *s;
    CHECK_OK(sl_store_new(rid, NULL, &s));
    return s;
}

static void wal_add(wal_t *w, const sl_store_msg_t *m) {
    w->msgs = realloc(w->msgs, (w->count + 1) * sizeof *w->msgs);
    sl_store_msg_t *c = &w->msgs[w->count++];
    c->type = m->type;
    c->len = m->len;
    c->body = sl_malloc(m->len ? m->len : 1);
    memcpy(c->body, m->body, m->len);
}

static void wal_free(wal_t *w) {
    for (size_t i = 0; i < w->count; i++)
        sl_store_msg_fini(&w->msgs[i]);
    free(w->msgs);
}

/* A local put on `s`, its DELTA delivered to `peers` as a peer's write
 * path does (WAL, then send to everyone). */
static void put_send(sl_store_t *s, wal_t *w, sl_store_t **peers, int n, const char *k,
                     const char *v) {
    sl_store_msg_t d;
    CHECK_OK(sl_store_put(s, k, strlen(k), v, strlen(v), NOW, &d));
    if (w)
        wal_add(w, &d);
    for (int i = 0; i < n; i++) {
        sl_store_out_t o;
        sl_store_out_init(&o);
        bool persist;
        CHECK_OK(sl_store_receive(peers[i], d.type, d.body, d.len, NOW, &o, &persist));
        sl_store_out_fini(&o);
    }
    sl_store_msg_fini(&d);
}

/* One round started by `a` as a peer's sync does (its SUMMARY to `b`;
 * a different fingerprint brings b's DIGEST back, then deltas and digests
 * go back and forth until none is left). */
static void exchange(sl_store_t *a, sl_store_t *b) {
    sl_store_out_t o1, o2;
    sl_store_out_init(&o1);
    sl_store_msg_t d;
    CHECK_OK(sl_store_summary(a, false, &d));
    CHECK_OK(sl_store_receive(b, d.type, d.body, d.len, NOW, &o1, &(bool){0}));
    sl_store_msg_fini(&d);
    for (int round = 0; round < 20 && o1.count; round++) {
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

/* Anti-entropy rounds over every ordered pair, as gossip would. */
static void rounds(sl_store_t **s, int n, int count) {
    for (int r = 0; r < count; r++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                if (i != j)
                    exchange(s[i], s[j]);
}

/* The forged DELTA: sender `sender`, one range (victim, from, to], no atom. */
static sl_err inject_delta(sl_store_t *to, uint64_t sender, uint64_t victim, uint64_t from,
                           uint64_t upto, size_t *len) {
    sl_store_range_t r = {victim, from, upto};
    sl_store_dmsg_t m = {.type = SL_STORE_MSG_DELTA, .sender = sender, .ranges = &r,
                         .range_count = 1};
    sl_store_msg_t msg;
    CHECK_OK(sl_store_msg_encode(&m, 1 << 20, &msg));
    if (len)
        *len = msg.len + 4; /* with the 4-byte header */
    sl_store_out_t o;
    sl_store_out_init(&o);
    sl_err err = sl_store_receive(to, msg.type, msg.body, msg.len, NOW, &o, &(bool){0});
    sl_store_out_fini(&o);
    sl_store_msg_fini(&msg);
    return err;
}

static int has_key(sl_store_t *s, const char *k) {
    const uint8_t *v;
    size_t n;
    return sl_store_get(s, k, strlen(k), &v, &n) == SL_OK;
}

static uint64_t rejected(sl_store_t *s) {
    sl_store_stats_t st;
    sl_store_stats(s, &st);
    return st.rejected;
}

static void test_forged_2_40(void) {
    sl_store_t *a = mk(0xa1), *b = mk(0xb2), *c = mk(0xc3);
    sl_store_t *all[] = {a, b, c}, *bc[] = {b, c};
    put_send(a, NULL, bc, 2, "before", "1");
    rounds(all, 3, 1);
    size_t len;
    inject_delta(b, 0xf00d, 0xa1, 0, UINT64_C(1) << 40, &len);
    CHECK_MSG(len <= 40, "a small message (the issue's was 28 bytes), not %zu", len);
    CHECK_MSG(rejected(b) >= 1, "the forged delta was not refused (rejected %" PRIu64 ")",
              rejected(b));
    char k[32];
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "after/%d", i);
        put_send(a, NULL, bc, 2, k, "v");
    }
    rounds(all, 3, 2);
    int missing_b = 0, missing_c = 0;
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "after/%d", i);
        missing_b += !has_key(b, k);
        missing_c += !has_key(c, k);
    }
    CHECK_MSG(missing_b == 0, "%d of the victim's 20 later writes never reached the poisoned peer",
              missing_b);
    CHECK_INT(missing_c, 0);
    CHECK_MSG(sl_store_state_hash(a) == sl_store_state_hash(b) &&
                  sl_store_state_hash(b) == sl_store_state_hash(c),
              "state hashes differ: %016" PRIx64 " %016" PRIx64 " %016" PRIx64,
              sl_store_state_hash(a), sl_store_state_hash(b), sl_store_state_hash(c));
    CHECK_INT(sl_store_vv_get(b, 0xa1), 21);
    CHECK_OK(sl_store_check(b));
    sl_store_destroy(&a);
    sl_store_destroy(&b);
    sl_store_destroy(&c);
}

static void test_heal(void) {
    sl_store_t *a = mk(0xa1), *b = mk(0xb2), *c = mk(0xc3);
    sl_store_t *all[] = {a, b, c}, *bc[] = {b, c};
    wal_t w = {0};
    put_send(a, &w, bc, 2, "before", "1");
    rounds(all, 3, 1);
    /* within the lead: b takes it (it cannot tell) */
    CHECK_OK(inject_delta(b, 0xf00d, 0xa1, 1, 1000, NULL));
    CHECK_INT(sl_store_vv_get(b, 0xa1), 1000);
    /* the victim's next round with b brings b's DIGEST, and its belief */
    exchange(a, b);
    sl_store_stats_t st;
    sl_store_stats(a, &st);
    CHECK_INT(HEALED(st), 1);
    CHECK_MSG(sl_store_vv_get(a, 0xa1) >= 1000, "the victim's counter stayed at %" PRIu64,
              sl_store_vv_get(a, 0xa1));
    char k[32];
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "after/%d", i);
        put_send(a, &w, bc, 2, k, "v");
    }
    int missing = 0;
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "after/%d", i);
        missing += !has_key(b, k) + !has_key(c, k);
    }
    CHECK_MSG(missing == 0, "%d of the victim's later writes missing at its peers", missing);
    rounds(all, 3, 2);
    CHECK(sl_store_state_hash(a) == sl_store_state_hash(b));
    CHECK(sl_store_state_hash(b) == sl_store_state_hash(c));
    CHECK_INT(sl_store_vv_get(c, 0xa1), sl_store_vv_get(a, 0xa1));
    /* restart: the WAL replays the move, so the next dot is a new one */
    sl_store_t *a2 = mk(0xa1);
    for (size_t i = 0; i < w.count; i++)
        CHECK_OK(sl_store_replay(a2, w.msgs[i].type, w.msgs[i].body, w.msgs[i].len));
    CHECK_INT(sl_store_vv_get(a2, 0xa1), sl_store_vv_get(a, 0xa1));
    CHECK(sl_store_state_hash(a2) == sl_store_state_hash(a));
    CHECK_OK(sl_store_check(a2));
    wal_free(&w);
    sl_store_destroy(&a2);
    sl_store_destroy(&a);
    sl_store_destroy(&b);
    sl_store_destroy(&c);
}

/* The heal with no write after it, digests reporting what is durable (as
 * in the daemon): the three replicas agree again (fingerprints, so rounds
 * go quiet, and garbage collection is not held back by the moved dots). */
static void test_heal_quiet(void) {
    sl_store_t *a = mk(0xa1), *b = mk(0xb2), *c = mk(0xc3);
    sl_store_t *all[] = {a, b, c}, *bc[] = {b, c};
    put_send(a, NULL, bc, 2, "before", "1");
    for (int i = 0; i < 3; i++)
        sl_store_mark_durable(all[i]);
    rounds(all, 3, 1);
    CHECK_OK(inject_delta(b, 0xf00d, 0xa1, 1, 1000, NULL));
    sl_store_mark_durable(b);
    /* (the daemon marks a store durable after a WAL sync: b and c log
     * what they receive; a logs nothing for its heal) */
    for (int r = 0; r < 3; r++) {
        rounds(all, 3, 1);
        sl_store_mark_durable(b);
        sl_store_mark_durable(c);
    }
    sl_store_stats_t st;
    sl_store_stats(a, &st);
    CHECK_INT(HEALED(st), 1);
    CHECK_MSG(sl_store_fingerprint(a) == sl_store_fingerprint(b) &&
                  sl_store_fingerprint(b) == sl_store_fingerprint(c),
              "fingerprints differ after the heal: rounds never go quiet");
    CHECK_INT(sl_store_vv_get(c, 0xa1), 1000);
    sl_store_destroy(&a);
    sl_store_destroy(&b);
    sl_store_destroy(&c);
}

static void test_own_claims(void) {
    sl_store_t *a = mk(0xa1), *b = mk(0xb2);
    sl_store_t *ab[] = {a, b}, *only_b[] = {b};
    put_send(a, NULL, only_b, 1, "k", "1");
    rounds(ab, 2, 1);
    uint64_t r0 = rejected(a);
    /* a DELTA with the victim's own dots beyond what it issued */
    CHECK_ERR(inject_delta(a, 0xf00d, 0xa1, 0, 50, NULL), SL_EPROTO);
    /* a DIGEST believing the victim issued 2^40 dots: beyond the lead */
    sl_store_range_t vv[2] = {{0xa1, 0, UINT64_C(1) << 40}, {0xb2, 0, 0}};
    sl_store_dmsg_t m = {.type = SL_STORE_MSG_DIGEST, .sender = 0xb2, .ranges = vv,
                         .range_count = 1};
    sl_store_msg_t msg;
    CHECK_OK(sl_store_msg_encode(&m, 1 << 20, &msg));
    sl_store_out_t o;
    sl_store_out_init(&o);
    CHECK_ERR(sl_store_receive(a, msg.type, msg.body, msg.len, NOW, &o, &(bool){0}), SL_EPROTO);
    sl_store_out_fini(&o);
    sl_store_msg_fini(&msg);
    CHECK_INT(rejected(a), r0 + 2);
    sl_store_stats_t st;
    sl_store_stats(a, &st);
    CHECK_INT(FORGED(st), 2);
    CHECK_INT(sl_store_vv_get(a, 0xa1), 1);
    put_send(a, NULL, only_b, 1, "k2", "2");
    CHECK(has_key(b, "k2"));
    sl_store_destroy(&a);
    sl_store_destroy(&b);
}

/* A replica past 2^32 dots (a legitimate heal can put it there): a peer
 * that knows none of them catches up in ranges of at most the lead. */
static void test_cut_ranges(void) {
    sl_store_t *a = mk(0xa1), *b = mk(0xb2), *c = mk(0xc3);
    sl_store_t *only_b[] = {b};
    put_send(a, NULL, only_b, 1, "k", "1");
    /* b believes a is 2^32 + 1 dots further (a forgery at the lead), a heals */
    uint64_t lead = SL_STORE_MAX_DOT_LEAD;
    CHECK_OK(inject_delta(b, 0xf00d, 0xa1, 1, 1 + lead, NULL));
    exchange(a, b);
    put_send(a, NULL, only_b, 1, "k2", "2");
    CHECK(has_key(b, "k2"));
    /* c, new, learns a's 2^32 + 2 dots from a, then from b */
    for (int i = 0; i < 3; i++)
        exchange(c, a);
    CHECK_INT(sl_store_vv_get(c, 0xa1), lead + 2);
    CHECK(has_key(c, "k2"));
    CHECK(sl_store_state_hash(a) == sl_store_state_hash(c));
    sl_store_destroy(&a);
    sl_store_destroy(&b);
    sl_store_destroy(&c);
}

static sl_store_stats_t stats(sl_store_t *s) {
    sl_store_stats_t st;
    sl_store_stats(s, &st);
    return st;
}

/* How many of keys PREFIX/0..n-1 `s` lacks. */
static int missing_of(sl_store_t *s, const char *prefix, int n) {
    char k[48];
    int missing = 0;
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "%s/%d", prefix, i);
        missing += !has_key(s, k);
    }
    return missing;
}

/* The gap the heal left: a forged claim only 5 dots ahead of the victim's
 * counter, then 20 writes by the victim, each delivered to both peers at
 * once. The first 5 look old to the poisoned peer, and the victim's
 * counter passes the claim before any DIGEST could show it: no heal ever
 * fires. The poisoned peer joins them anyway, from the replica that made
 * them (rule 4). A restart of the victim from its WAL issues no dot twice. */
static void test_few_ahead(void) {
    sl_store_t *a = mk(0xa1), *b = mk(0xb2), *c = mk(0xc3);
    sl_store_t *all[] = {a, b, c}, *bc[] = {b, c};
    wal_t w = {0};
    put_send(a, &w, bc, 2, "before", "1");
    rounds(all, 3, 1);
    uint64_t counter = sl_store_vv_get(a, 0xa1);
    CHECK_OK(inject_delta(b, 0xf00d, 0xa1, counter, counter + 5, NULL));
    CHECK_INT(sl_store_vv_get(b, 0xa1), counter + 5);
    char k[32];
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "after/%d", i);
        put_send(a, &w, bc, 2, k, "v");
    }
    rounds(all, 3, 3);
    int missing = missing_of(b, "after", 20);
    CHECK_MSG(missing == 0, "%d of the victim's 20 writes after a claim 5 dots ahead never "
              "reached the poisoned peer", missing);
    CHECK_INT(missing_of(c, "after", 20), 0);
    CHECK_INT(HEALED(stats(a)), 0); /* no DIGEST ever showed the claim ahead */
    CHECK_INT(REJOINED(stats(b)), 5);
    CHECK_MSG(sl_store_state_hash(a) == sl_store_state_hash(b) &&
                  sl_store_state_hash(b) == sl_store_state_hash(c),
              "state hashes differ: %016" PRIx64 " %016" PRIx64 " %016" PRIx64,
              sl_store_state_hash(a), sl_store_state_hash(b), sl_store_state_hash(c));
    CHECK_OK(sl_store_check(b));
    /* restart of the victim from its WAL: its next write takes a new dot,
     * past every dot any peer holds of it, and reaches both */
    sl_store_t *a2 = mk(0xa1);
    for (size_t i = 0; i < w.count; i++)
        CHECK_OK(sl_store_replay(a2, w.msgs[i].type, w.msgs[i].body, w.msgs[i].len));
    CHECK(sl_store_state_hash(a2) == sl_store_state_hash(a));
    uint64_t top = sl_store_vv_get(b, 0xa1) > sl_store_vv_get(c, 0xa1) ? sl_store_vv_get(b, 0xa1)
                                                                         : sl_store_vv_get(c, 0xa1);
    put_send(a2, NULL, bc, 2, "restarted", "r");
    sl_store_entry_t e;
    CHECK_OK(sl_store_lookup(a2, "restarted", 9, &e));
    CHECK_MSG(e.dot.seq > top, "the restarted victim issued dot %" PRIu64 " again (peers hold up "
              "to %" PRIu64 ")", e.dot.seq, top);
    CHECK(has_key(b, "restarted") && has_key(c, "restarted"));
    wal_free(&w);
    sl_store_destroy(&a2);
    sl_store_destroy(&a);
    sl_store_destroy(&b);
    sl_store_destroy(&c);
}

/* Writes the victim made while the poisoned peer already counted their
 * dots as seen and that never reached it directly (its pushes lost): the
 * victim's next round with it heals, and sends it (and every peer) again
 * exactly its own atoms past what that peer last reported; 100 older
 * writes, which the peers had confirmed, do not go again. A second
 * forgery costs only the writes since. */
static void test_heal_resend(void) {
    sl_store_t *a = mk(0xa1), *b = mk(0xb2), *c = mk(0xc3);
    sl_store_t *all[] = {a, b, c}, *bc[] = {b, c}, *only_c[] = {c};
    char k[32];
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof k, "old/%d", i);
        put_send(a, NULL, bc, 2, k, "o");
    }
    rounds(all, 3, 1);
    uint64_t counter = sl_store_vv_get(a, 0xa1);
    CHECK_OK(inject_delta(b, 0xf00d, 0xa1, counter, counter + 1000, NULL));
    for (int i = 0; i < 5; i++) {
        snprintf(k, sizeof k, "hidden/%d", i);
        put_send(a, NULL, only_c, 1, k, "h");
    }
    CHECK_INT(missing_of(b, "hidden", 5), 5);
    exchange(a, b); /* b's DIGEST shows the claim: a heals and sends again */
    CHECK_INT(HEALED(stats(a)), 1);
    int missing = missing_of(b, "hidden", 5);
    CHECK_MSG(missing == 0, "%d of 5 writes the poisoned peer counted as seen never reached it "
              "after the heal", missing);
    CHECK_INT(RESENT(stats(a)), 5); /* the window, not the 100 older writes */
    rounds(all, 3, 2);
    /* and the same 5 to c, whose last report was as old (a claim may
     * reach other peers through the poisoned one's deltas) */
    CHECK_INT(RESENT(stats(a)), 10);
    CHECK(sl_store_state_hash(a) == sl_store_state_hash(b));
    CHECK(sl_store_state_hash(b) == sl_store_state_hash(c));
    /* again: only the writes since b's last report go */
    counter = sl_store_vv_get(a, 0xa1);
    CHECK_OK(inject_delta(b, 0xf00d, 0xa1, counter, counter + 1000, NULL));
    for (int i = 0; i < 3; i++) {
        snprintf(k, sizeof k, "hidden2/%d", i);
        put_send(a, NULL, only_c, 1, k, "h");
    }
    rounds(all, 3, 2);
    CHECK_INT(missing_of(b, "hidden2", 3), 0);
    CHECK_INT(HEALED(stats(a)), 2);
    CHECK_INT(RESENT(stats(a)), 16);
    CHECK(sl_store_state_hash(a) == sl_store_state_hash(b));
    CHECK(sl_store_state_hash(b) == sl_store_state_hash(c));
    CHECK_OK(sl_store_check(b));
    sl_store_destroy(&a);
    sl_store_destroy(&b);
    sl_store_destroy(&c);
}

/* The claim reaches a second peer through the poisoned one's deltas, and
 * the victim heals from that second peer's DIGEST first: the poisoned
 * peer's own DIGEST then shows nothing past the victim's counter (and
 * their fingerprints agree, so no DIGEST even comes), yet it lacks the
 * hidden writes too. The heal owes every peer its window. */
static void test_relayed(void) {
    sl_store_t *a = mk(0xa1), *b = mk(0xb2), *c = mk(0xc3);
    sl_store_t *all[] = {a, b, c}, *bc[] = {b, c};
    char k[32];
    for (int i = 0; i < 10; i++) {
        snprintf(k, sizeof k, "old/%d", i);
        put_send(a, NULL, bc, 2, k, "o");
    }
    rounds(all, 3, 1);
    uint64_t counter = sl_store_vv_get(a, 0xa1);
    CHECK_OK(inject_delta(b, 0xf00d, 0xa1, counter, counter + 1000, NULL));
    for (int i = 0; i < 5; i++) {
        snprintf(k, sizeof k, "hid/%d", i);
        put_send(a, NULL, NULL, 0, k, "h"); /* every push lost */
    }
    exchange(b, c); /* c takes b's range of a's dots: poisoned too */
    CHECK_INT(sl_store_vv_get(c, 0xa1), counter + 1000);
    exchange(a, c); /* the heal, from c's DIGEST */
    CHECK_INT(HEALED(stats(a)), 1);
    CHECK_INT(missing_of(c, "hid", 5), 0);
    exchange(a, b);
    int missing = missing_of(b, "hid", 5);
    CHECK_MSG(missing == 0, "%d of 5 hidden writes never reached the peer the forgery was sent "
              "to, after a heal from another peer", missing);
    rounds(all, 3, 2);
    CHECK(sl_store_state_hash(a) == sl_store_state_hash(b));
    CHECK(sl_store_state_hash(b) == sl_store_state_hash(c));
    sl_store_destroy(&a);
    sl_store_destroy(&b);
    sl_store_destroy(&c);
}

/* The originator's word (rule 4) never brings back what garbage
 * collection removed: a stale copy of a write, delivered again by its
 * writer's connection after a delete of it was collected everywhere,
 * stays dead. */
static void test_stale_after_gc(void) {
    sl_store_t *a = mk(0xa1), *b = mk(0xb2), *c = mk(0xc3);
    sl_store_t *all[] = {a, b, c}, *bc[] = {b, c}, *ac[] = {a, c};
    uint64_t rids[] = {0xa1, 0xb2, 0xc3};
    for (int i = 0; i < 3; i++) {
        uint64_t others[2];
        int n = 0;
        for (int j = 0; j < 3; j++)
            if (j != i)
                others[n++] = rids[j];
        CHECK_OK(sl_store_set_live(all[i], others, 2));
    }
    sl_store_msg_t stale;
    CHECK_OK(sl_store_put(a, "k", 1, "1", 1, NOW, &stale));
    for (int i = 0; i < 2; i++) {
        sl_store_out_t o;
        sl_store_out_init(&o);
        CHECK_OK(sl_store_receive(bc[i], stale.type, stale.body, stale.len, NOW, &o, &(bool){0}));
        sl_store_out_fini(&o);
    }
    sl_store_msg_t d;
    CHECK_OK(sl_store_del(b, "k", 1, NOW + 1, &d));
    for (int i = 0; i < 2; i++) {
        sl_store_out_t o;
        sl_store_out_init(&o);
        CHECK_OK(sl_store_receive(ac[i], d.type, d.body, d.len, NOW + 1, &o, &(bool){0}));
        sl_store_out_fini(&o);
    }
    sl_store_msg_fini(&d);
    for (int r = 0; r < 6 && stats(b).gc_dropped == 0; r++) {
        rounds(all, 3, 1);
        for (int i = 0; i < 3; i++)
            sl_store_gc(all[i]);
    }
    CHECK_MSG(stats(b).gc_dropped == 1, "the tombstone was not collected (%" PRIu64 ")",
              stats(b).gc_dropped);
    sl_store_out_t o;
    sl_store_out_init(&o);
    CHECK_OK(sl_store_receive(b, stale.type, stale.body, stale.len, NOW + 2, &o, &(bool){0}));
    sl_store_out_fini(&o);
    sl_store_msg_fini(&stale);
    CHECK_MSG(!has_key(b, "k"), "a stale copy brought a collected delete's key back");
    CHECK(sl_store_state_hash(b) == sl_store_state_hash(c));
    sl_store_destroy(&a);
    sl_store_destroy(&b);
    sl_store_destroy(&c);
}

/* The forged DELTA on the wire, to a real peer: dots (from, to] of RID
 * (default 0, 2^40). */
static int send_forged(const char *addr, const char *rid_hex, uint64_t from, uint64_t to) {
    uint64_t rid = strtoull(rid_hex, NULL, 16);
    sl_store_range_t r = {rid, from, to};
    sl_store_dmsg_t m = {.type = SL_STORE_MSG_DELTA, .sender = 0xf00d, .ranges = &r,
                         .range_count = 1};
    sl_store_msg_t msg;
    sl_net_client_t *c = NULL;
    if (!rid || sl_store_msg_encode(&m, 1 << 20, &msg) != SL_OK)
        return 2;
    uint8_t h[4] = {0x53, 0x4c, 0x01, SL_STORE_MSG_DELTA};
    sl_err err = sl_net_client_new(addr, NULL, &c);
    if (!err)
        err = sl_net_client_send(c, h, msg.body, msg.len, 5000);
    fprintf(stderr, "sent a %zu-byte DELTA claiming dots %" PRIu64 "..%" PRIu64 " of %016" PRIx64
            " to %s: %s\n", msg.len + 4, from + 1, to, rid, addr, sl_strerror(err));
    sl_net_client_destroy(&c); /* lingers until sent */
    sl_store_msg_fini(&msg);
    return err ? 1 : 0;
}

/* N DELTAs from replica f00d, each one LWW atom stamped an hour ahead. */
static int send_future(const char *addr, int n) {
    sl_net_client_t *c = NULL;
    sl_err err = sl_net_client_new(addr, NULL, &c);
    uint64_t hlc = sl_hlc_make((uint64_t)time(NULL) * 1000 + 3600000, 0);
    int sent = 0;
    for (int i = 0; !err && i < n; i++) {
        sl_store_range_t r = {0xf00d, (uint64_t)i, (uint64_t)i + 1};
        sl_store_item_t item = {.key = (const uint8_t *)"future", .key_len = 6,
                                .it = {.kind = SL_ITEM_LWW, .type = SL_CRDT_LWW,
                                       .dot = {0xf00d, (uint64_t)i + 1}, .hlc = hlc,
                                       .a = (const uint8_t *)"x", .a_len = 1}};
        sl_store_dmsg_t m = {.type = SL_STORE_MSG_DELTA, .sender = 0xf00d, .ranges = &r,
                             .range_count = 1, .items = &item, .item_count = 1};
        sl_store_msg_t msg;
        if ((err = sl_store_msg_encode(&m, 1 << 20, &msg)))
            break;
        uint8_t h[4] = {0x53, 0x4c, 0x01, SL_STORE_MSG_DELTA};
        err = sl_net_client_send(c, h, msg.body, msg.len, 5000);
        sl_store_msg_fini(&msg);
        sent += !err;
    }
    fprintf(stderr, "sent %d DELTAs stamped an hour ahead to %s\n", sent, addr);
    sl_net_client_destroy(&c);
    return err ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "send") == 0)
        return send_forged(argv[2], argv[3], 0, UINT64_C(1) << 40);
    if (argc == 6 && strcmp(argv[1], "send") == 0)
        return send_forged(argv[2], argv[3], strtoull(argv[4], NULL, 10),
                           strtoull(argv[5], NULL, 10));
    if (argc == 4 && strcmp(argv[1], "future") == 0)
        return send_future(argv[2], atoi(argv[3]));
    sl_log_set_level(SL_LOG_ERR);
    sl_test_run("forged_2_40", test_forged_2_40);
    sl_test_run("heal", test_heal);
    sl_test_run("heal_quiet", test_heal_quiet);
    sl_test_run("own_claims", test_own_claims);
    sl_test_run("cut_ranges", test_cut_ranges);
    sl_test_run("few_ahead", test_few_ahead);
    sl_test_run("heal_resend", test_heal_resend);
    sl_test_run("relayed", test_relayed);
    sl_test_run("stale_after_gc", test_stale_after_gc);
    return sl_test_finish();
}
