/* Claims and leases (T3): epochs only grow; only a free, released, dead-
 * owner or lapsed claim may be taken; only the holder renews; a worker
 * stops on a higher epoch or on losing its epoch; the register merge is a
 * join (commutative, associative, idempotent) whose epoch never goes
 * back; results merge to one. */
#include <stdlib.h>

#include "starling/study.h"
#include "testlib.h"

static sl_claim_t claim(const char *owner, uint64_t epoch, uint64_t exp, bool rel) {
    sl_claim_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.owner, sizeof c.owner, "%s", owner);
    c.epoch = epoch;
    c.lease_expiry_ms = exp;
    c.released = rel;
    return c;
}

static void test_lifecycle(void) {
    sl_claim_t c0 = claim("", 0, 0, false), c1, c2, c3, c4;
    CHECK_INT(sl_claim_status_of(&c0, "a", 0, true), SL_CLAIM_FREE);
    CHECK_OK(sl_claim_take(&c0, "a", 1000, true, 500, &c1));
    CHECK_STR(c1.owner, "a");
    CHECK_INT(c1.epoch, 1);
    CHECK_INT(c1.lease_expiry_ms, 1500);
    /* held: b may not take it */
    CHECK_INT(sl_claim_status_of(&c1, "b", 1200, true), SL_CLAIM_HELD);
    CHECK_ERR(sl_claim_take(&c1, "b", 1200, true, 500, &c2), SL_EBUSY);
    CHECK_INT(sl_claim_status_of(&c1, "a", 1200, true), SL_CLAIM_MINE);
    CHECK_ERR(sl_claim_take(&c1, "a", 1200, true, 500, &c2), SL_EBUSY);
    /* renew by the holder only */
    CHECK_OK(sl_claim_renew(&c1, "a", 1, 1400, 500, &c2));
    CHECK_INT(c2.lease_expiry_ms, 1900);
    CHECK_INT(c2.epoch, 1);
    CHECK_ERR(sl_claim_renew(&c1, "b", 1, 1400, 500, &c3), SL_ESTATE);
    CHECK_ERR(sl_claim_renew(&c1, "a", 2, 1400, 500, &c3), SL_ESTATE);
    /* the owner dies: b takes epoch 2 */
    CHECK_INT(sl_claim_status_of(&c2, "b", 1500, false), SL_CLAIM_OWNER_DEAD);
    CHECK_OK(sl_claim_take(&c2, "b", 1500, false, 500, &c3));
    CHECK_INT(c3.epoch, 2);
    /* a, back from a pause, sees epoch 2 and stops; its renewal fails */
    CHECK(sl_claim_must_stop(&c3, "a", 1));
    CHECK(!sl_claim_must_stop(&c3, "b", 2));
    CHECK_ERR(sl_claim_renew(&c3, "a", 1, 1600, 500, &c4), SL_ESTATE);
    /* the lease lapses: c takes epoch 3 */
    CHECK_INT(sl_claim_status_of(&c3, "c", 2000, true), SL_CLAIM_LAPSED);
    CHECK_OK(sl_claim_take(&c3, "c", 2000, true, 500, &c4));
    CHECK_INT(c4.epoch, 3);
    /* release: anyone may take it next */
    sl_claim_t r, t;
    CHECK_ERR(sl_claim_release(&c4, "b", 3, &r), SL_ESTATE);
    CHECK_OK(sl_claim_release(&c4, "c", 3, &r));
    CHECK_INT(sl_claim_status_of(&r, "a", 2100, true), SL_CLAIM_RELEASED);
    CHECK_OK(sl_claim_take(&r, "a", 2100, true, 500, &t));
    CHECK_INT(t.epoch, 4);
    CHECK_ERR(sl_claim_take(&c0, "", 0, true, 1, &t), SL_EINVAL);
}

static void test_split_brain(void) {
    /* two peers in a partition both take epoch 2 */
    sl_claim_t base = claim("a", 1, 100, false), x, y, m1, m2;
    CHECK_OK(sl_claim_take(&base, "c", 200, false, 500, &x));
    CHECK_OK(sl_claim_take(&base, "b", 210, false, 500, &y));
    CHECK_INT(x.epoch, 2);
    CHECK_INT(y.epoch, 2);
    sl_claim_merge(&x, &y, &m1);
    sl_claim_merge(&y, &x, &m2);
    CHECK(memcmp(&m1, &m2, sizeof m1) == 0);
    CHECK_STR(m1.owner, "b");
    /* after the heal exactly one of them keeps working */
    CHECK(sl_claim_must_stop(&m1, "c", 2));
    CHECK(!sl_claim_must_stop(&m1, "b", 2));
}

static void random_claim(sl_rng_t *rng, sl_claim_t *c) {
    static const char *own[] = {"", "a", "b", "c"};
    const char *o = own[sl_rng_below(rng, 4)];
    *c = claim(o, o[0] ? 1 + sl_rng_below(rng, 3) : 0, sl_rng_below(rng, 3) * 100,
               o[0] && sl_rng_below(rng, 2));
}

static void test_merge_laws(void) {
    sl_rng_t rng;
    sl_rng_seed(&rng, 11);
    for (int i = 0; i < 20000; i++) {
        sl_claim_t a, b, c, ab, ba, abc1, abc2, bc, aa, t;
        random_claim(&rng, &a);
        random_claim(&rng, &b);
        random_claim(&rng, &c);
        sl_claim_merge(&a, &b, &ab);
        sl_claim_merge(&b, &a, &ba);
        CHECK(memcmp(&ab, &ba, sizeof ab) == 0);
        sl_claim_merge(&ab, &c, &abc1);
        sl_claim_merge(&b, &c, &bc);
        sl_claim_merge(&a, &bc, &abc2);
        CHECK(memcmp(&abc1, &abc2, sizeof ab) == 0);
        sl_claim_merge(&a, &a, &aa);
        CHECK(memcmp(&aa, &a, sizeof a) == 0);
        /* T3: the merged epoch is the max: epochs never go back */
        CHECK_INT(ab.epoch, a.epoch > b.epoch ? a.epoch : b.epoch);
        /* a take always raises the epoch */
        if (sl_claim_take(&ab, "d", 50, false, 10, &t) == SL_OK)
            CHECK(t.epoch > ab.epoch);
    }
}

static void test_results(void) {
    sl_result_t a, b, m1, m2;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    snprintf(a.trial_id, sizeof a.trial_id, "t1");
    b = a;
    a.state = SL_TRIAL_DONE;
    a.epochs = 9;
    a.claim_epoch = 2;
    snprintf(a.writer, sizeof a.writer, "p1");
    b.state = SL_TRIAL_DONE;
    b.epochs = 9;
    b.claim_epoch = 3;
    snprintf(b.writer, sizeof b.writer, "p2");
    sl_result_merge(&a, &b, &m1);
    sl_result_merge(&b, &a, &m2);
    CHECK(memcmp(&m1, &m2, sizeof m1) == 0);
    sl_result_merge(&m1, &a, &m2);
    CHECK(memcmp(&m1, &m2, sizeof m1) == 0); /* written twice: still one */
    sl_result_merge(&m1, &b, &m2);
    CHECK(memcmp(&m1, &m2, sizeof m1) == 0);
    CHECK_INT(m1.claim_epoch, 2);
    /* done beats failed */
    b.state = SL_TRIAL_FAILED;
    b.claim_epoch = 1;
    sl_result_merge(&b, &a, &m1);
    CHECK_INT(m1.state, SL_TRIAL_DONE);
}

static void test_codecs(void) {
    sl_claim_t c = claim("peer-7", 12, 123456789012ull, true), d;
    char buf[512];
    size_t len;
    CHECK_OK(sl_claim_encode(&c, buf, sizeof buf, &len));
    CHECK_STR(buf, "{\"owner\":\"peer-7\",\"epoch\":12,\"lease_expiry_ms\":123456789012,"
                   "\"released\":true}");
    CHECK_OK(sl_claim_decode(buf, len, &d));
    CHECK(memcmp(&c, &d, sizeof c) == 0);
    CHECK_ERR(sl_claim_encode(&c, buf, 10, &len), SL_ETOOBIG);
    const char *bad[] = {"{}", "[]", "{\"owner\":\"a\",\"epoch\":-1,\"lease_expiry_ms\":0,\"released\":false}",
                         "{\"owner\":\"a\",\"epoch\":1.5,\"lease_expiry_ms\":0,\"released\":false}",
                         "{\"owner\":\"\",\"epoch\":3,\"lease_expiry_ms\":0,\"released\":false}",
                         "{\"owner\":\"a\",\"epoch\":1,\"lease_expiry_ms\":0,\"released\":1}",
                         "{\"owner\":\"a\",\"epoch\":1,\"lease_expiry_ms\":0,\"released\":false,\"x\":1}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(sl_claim_decode(bad[i], strlen(bad[i]), &d) == SL_EPROTO, "accepted %s", bad[i]);
    sl_result_t r, q;
    memset(&r, 0, sizeof r);
    snprintf(r.trial_id, sizeof r.trial_id, "0123456789abcdef");
    r.state = SL_TRIAL_FAILED;
    r.epochs = 2;
    r.claim_epoch = 3;
    snprintf(r.writer, sizeof r.writer, "peer-1");
    snprintf(r.reason, sizeof r.reason, "exit status 1");
    CHECK_OK(sl_result_encode(&r, buf, sizeof buf, &len));
    CHECK_OK(sl_result_decode(buf, len, &q));
    CHECK(memcmp(&r, &q, sizeof r) == 0);
    snprintf(r.reason, sizeof r.reason, "say \"hi\"");
    CHECK_ERR(sl_result_encode(&r, buf, sizeof buf, &len), SL_EINVAL);
    const char *rb = "{\"trial\":\"x\",\"state\":\"running\",\"epochs\":1,\"claim_epoch\":1,"
                     "\"writer\":\"p\",\"reason\":\"\"}";
    CHECK_ERR(sl_result_decode(rb, strlen(rb), &q), SL_EPROTO);
}

static void test_pick(void) {
    sl_round_member_t m[3] = {{"a", true, 1}, {"b", true, 2}, {"c", false, 5}};
    char ids[6][17];
    sl_claim_cand_t c[6];
    for (int i = 0; i < 6; i++) {
        snprintf(ids[i], sizeof ids[i], "%016d", i + 1);
        memset(&c[i], 0, sizeof c[i]);
        c[i].trial_id = ids[i];
        c[i].ordinal = (uint64_t)i;
        c[i].needs_work = true;
    }
    c[5].rung = 1;                           /* a promotion: claimed first */
    c[2].claim = claim("c", 4, 10000, false); /* owner dead in the view: takeover */
    c[3].claim = claim("b", 1, 10000, false); /* held by a live owner */
    c[3].owner_alive = true;
    c[4].needs_work = false;                 /* paused or done */
    size_t pa[6], pb[6], na, nb;
    sl_claim_t xa[6], xb[6];
    CHECK_OK(sl_claim_pick(c, 6, m, 3, "a", 500, 1000, pa, xa, &na, NULL));
    CHECK_OK(sl_claim_pick(c, 6, m, 3, "b", 500, 1000, pb, xb, &nb, NULL));
    /* a has 1 slot, b 2, c is dead: 3 of the 4 claimable trials go */
    CHECK_INT(na, 1);
    CHECK_INT(nb, 2);
    bool taken[6] = {false};
    for (size_t i = 0; i < na; i++) {
        taken[pa[i]] = true;
        CHECK_STR(xa[i].owner, "a");
        CHECK_INT(xa[i].epoch, c[pa[i]].claim.epoch + 1);
        CHECK_INT(xa[i].lease_expiry_ms, 1500);
    }
    for (size_t i = 0; i < nb; i++) {
        CHECK(!taken[pb[i]]); /* the same view: disjoint picks */
        taken[pb[i]] = true;
    }
    CHECK(taken[5]);              /* the promotion went first */
    CHECK(!taken[3] && !taken[4]); /* held, not needing work */
    /* no free slot: nothing */
    m[0].free_slots = 0;
    CHECK_OK(sl_claim_pick(c, 6, m, 3, "a", 500, 1000, pa, xa, &na, NULL));
    CHECK_INT(na, 0);
}

/* A trial the view assigns to a member that does not take it (dead but
 * not yet known so, or seeing it later) goes on to the next member by
 * weight after SL_CLAIM_HANDOFF_MS, to the one after that after twice
 * that, and so on; never to a member with no free slot. */
static void test_handoff(void) {
    sl_round_member_t m[4] = {{"a", true, 1}, {"b", true, 1}, {"c", true, 1}, {"d", true, 0}};
    sl_claim_cand_t c;
    memset(&c, 0, sizeof c);
    c.trial_id = "00000000000000aa";
    c.needs_work = true;
    const char *names[] = {"a", "b", "c"};
    const char *by_rank[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        size_t r = sl_round_rank(m, 4, c.trial_id, names[i]);
        CHECK(r < 3);
        CHECK(by_rank[r] == NULL); /* ranks are distinct */
        by_rank[r] = names[i];
    }
    size_t pick[1], np;
    sl_claim_t next[1];
    uint64_t turn;
    /* the top member takes it at once; the others wait their turn, and are
       told when it comes */
    CHECK_OK(sl_claim_pick(&c, 1, m, 4, by_rank[0], 500, 1000, pick, next, &np, &turn));
    CHECK_INT(np, 1);
    CHECK(turn == UINT64_MAX);
    for (size_t r = 1; r < 3; r++) {
        c.waited_ms = SL_CLAIM_HANDOFF_MS * (r + 1) - 1;
        CHECK_OK(sl_claim_pick(&c, 1, m, 4, by_rank[r], 500, 1000, pick, next, &np, &turn));
        CHECK_INT(np, 0);
        CHECK_INT(turn, 501);
        c.waited_ms = SL_CLAIM_HANDOFF_MS * (r + 1);
        CHECK_OK(sl_claim_pick(&c, 1, m, 4, by_rank[r], 500, 1000, pick, next, &np, &turn));
        CHECK_INT(np, 1);
        CHECK(turn == UINT64_MAX);
        CHECK_STR(next[0].owner, by_rank[r]);
        CHECK_INT(next[0].epoch, 1);
    }
    /* no free slot: never */
    c.waited_ms = 60000;
    CHECK_OK(sl_claim_pick(&c, 1, m, 4, "d", 500, 1000, pick, next, &np, NULL));
    CHECK_INT(np, 0);
    /* a claim held by a live owner is never handed on */
    c.claim = claim("a", 1, 10000, false);
    c.owner_alive = true;
    CHECK_OK(sl_claim_pick(&c, 1, m, 4, by_rank[2], 500, 1000, pick, next, &np, NULL));
    CHECK_INT(np, 0);
}

static void test_after_epoch(void) {
    const char *j = "{\"name\": \"x\", \"trainer\": {\"type\": \"command\", \"command\": \"t\"},"
                    " \"search_space\": {\"lr\": {\"type\": \"real\", \"low\": 0, \"high\": 1}},"
                    " \"scheduler\": {\"type\": \"asha\", \"min_epochs\": 1, \"max_epochs\": 9},"
                    " \"objectives\": [{\"metric\": \"a\", \"goal\": \"max\"}],"
                    " \"budget\": {\"trials\": 5}, \"retries\": 1, \"checkpoint_every\": 2}";
    sl_study_spec_t s;
    char why[200] = "";
    CHECK_MSG(sl_study_spec_parse(j, strlen(j), &s, why, sizeof why) == SL_OK, "%s", why);
    CHECK_INT(sl_claim_after_epoch(&s, 0, 1, false, 0), SL_EPOCH_PAUSE);
    CHECK_INT(sl_claim_after_epoch(&s, 1, 2, false, 0), SL_EPOCH_CONTINUE);
    CHECK_INT(sl_claim_after_epoch(&s, 1, 3, false, 0), SL_EPOCH_PAUSE);
    CHECK_INT(sl_claim_after_epoch(&s, 2, 9, false, 0), SL_EPOCH_DONE);
    CHECK_INT(sl_claim_after_epoch(&s, 2, 5, true, 1), SL_EPOCH_RETRY);
    CHECK_INT(sl_claim_after_epoch(&s, 2, 5, true, 2), SL_EPOCH_FAILED);
    CHECK(sl_claim_checkpoint_due(&s, 4, SL_EPOCH_CONTINUE));
    CHECK(!sl_claim_checkpoint_due(&s, 5, SL_EPOCH_CONTINUE));
    CHECK(sl_claim_checkpoint_due(&s, 3, SL_EPOCH_PAUSE));
    CHECK(sl_claim_checkpoint_due(&s, 9, SL_EPOCH_DONE));
    CHECK(!sl_claim_checkpoint_due(&s, 4, SL_EPOCH_RETRY));
}

int main(void) {
    sl_test_run("codecs", test_codecs);
    sl_test_run("pick", test_pick);
    sl_test_run("handoff", test_handoff);
    sl_test_run("after_epoch", test_after_epoch);
    sl_test_run("lifecycle", test_lifecycle);
    sl_test_run("split_brain", test_split_brain);
    sl_test_run("merge_laws", test_merge_laws);
    sl_test_run("results", test_results);
    return sl_test_finish();
}
