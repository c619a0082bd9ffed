/* Membership forgeries (issue 12, item 6): what one received message may
 * claim about a member, against the core alone (include/starling/swim.h,
 * docs/membership.md "What a record may claim"). Each case is an attack
 * that worked before the fix:
 *   - DEAD at incarnation 2^64-1 evicted a live member for good (its
 *     refutation wrapped to 0);
 *   - a record at a higher incarnation moved a live member's address to
 *     the attacker's, who then got its PINGs and SYNCs;
 *   - SYNCs of 16,384 made-up members each grew the table without bound
 *     (176 MB, a real death hidden behind the probe round);
 *   - a host name as an address made the peer dial it (DNS on the I/O
 *     thread, item 5).
 * Only numeric addresses and default timing: the file builds against the
 * library before the fix too, and fails there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/msg.h"
#include "starling/swim.h"
#include "testlib.h"

#define ATTACKER "tcp://10.0.0.66:7600"

static sl_swim_t *make_core(const char *name, const char *addr) {
    sl_swim_config_t cfg;
    sl_swim_config_defaults(&cfg);
    cfg.name = name;
    cfg.addr = addr;
    cfg.incarnation = 1;
    cfg.seed = 7;
    sl_swim_t *s = NULL;
    CHECK_OK(sl_swim_new(&cfg, &s));
    return s;
}

static sl_member_msg_t rec(const char *name, const char *addr, uint64_t inc, uint8_t state) {
    sl_member_msg_t r = {0};
    r.name = sl_bytes_str(name);
    r.addr = sl_bytes_str(addr);
    r.incarnation = inc;
    r.state = state;
    return r;
}

/* A PING from the attacker to `target` carrying `n` records. */
static sl_err ping_with(sl_swim_t *s, int64_t now, const char *target,
                        const sl_member_msg_t *recs, size_t n) {
    sl_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = SL_MSG_PING;
    m.from = sl_bytes_str("mallory");
    m.from_addr = sl_bytes_str(ATTACKER);
    m.u.ping.seq = 77;
    m.u.ping.target = sl_bytes_str(target);
    for (size_t i = 0; i < n; i++)
        m.gossip[i] = recs[i];
    m.gossip_count = n;
    return sl_swim_receive(s, now, &m);
}

static void drain(sl_swim_t *s) {
    sl_swim_output_t o;
    sl_swim_event_t e;
    while (sl_swim_next_output(s, &o) == SL_OK) {
    }
    while (sl_swim_next_event(s, &e) == SL_OK) {
    }
}

static void test_incarnation_overflow(void) {
    sl_swim_t *a = make_core("a", "tcp://10.0.0.1:7600");
    sl_member_msg_t b = rec("b", "tcp://10.0.0.2:7600", 3, SL_STATE_ALIVE);
    CHECK_OK(sl_swim_add_member(a, 0, &b));
    /* DEAD at 2^64-1: before, b was dead for good (nothing is higher) */
    sl_member_msg_t f = rec("b", "tcp://10.0.0.2:7600", UINT64_MAX, SL_STATE_DEAD);
    CHECK(ping_with(a, 10, "a", &f, 1) != SL_OK);
    sl_swim_member_t m;
    CHECK_OK(sl_swim_member_find(a, sl_bytes_str("b"), &m));
    CHECK_INT(m.state, SL_STATE_ALIVE);
    CHECK_INT(m.incarnation, 3);
    /* LEFT far above what is known: an absurd jump is refused too */
    f = rec("b", "tcp://10.0.0.2:7600", 3 + ((uint64_t)1 << 40), SL_STATE_LEFT);
    CHECK(ping_with(a, 20, "a", &f, 1) != SL_OK);
    CHECK_OK(sl_swim_member_find(a, sl_bytes_str("b"), &m));
    CHECK_INT(m.state, SL_STATE_ALIVE);
    /* an ordinary accusation still works: b refutes it the usual way */
    f = rec("b", "tcp://10.0.0.2:7600", 4, SL_STATE_DEAD);
    CHECK_OK(ping_with(a, 30, "a", &f, 1));
    CHECK_OK(sl_swim_member_find(a, sl_bytes_str("b"), &m));
    CHECK_INT(m.state, SL_STATE_DEAD);
    /* about a itself: before, its refutation wrapped to incarnation 0 */
    f = rec("a", "tcp://10.0.0.1:7600", UINT64_MAX, SL_STATE_DEAD);
    CHECK(ping_with(a, 40, "a", &f, 1) != SL_OK);
    f = rec("a", "tcp://10.0.0.1:7600", UINT64_MAX - 1, SL_STATE_LEFT);
    CHECK(ping_with(a, 50, "a", &f, 1) != SL_OK);
    CHECK(sl_swim_incarnation(a) >= 1);
    CHECK(sl_swim_incarnation(a) < 1000);
    CHECK_OK(sl_swim_member_find(a, sl_bytes_str("a"), &m));
    CHECK_INT(m.state, SL_STATE_ALIVE);
    /* a real accusation of a is refuted one above it */
    f = rec("a", "tcp://10.0.0.1:7600", sl_swim_incarnation(a), SL_STATE_SUSPECT);
    uint64_t before = sl_swim_incarnation(a);
    CHECK_OK(ping_with(a, 60, "a", &f, 1));
    CHECK_INT(sl_swim_incarnation(a), before + 1);
    CHECK_OK(sl_swim_check(a));
    drain(a);
    sl_swim_destroy(&a);
}

static void test_address_hijack(void) {
    sl_swim_t *a = make_core("a", "tcp://10.0.0.1:7600");
    sl_member_msg_t b = rec("b", "tcp://10.0.0.2:7600", 3, SL_STATE_ALIVE);
    CHECK_OK(sl_swim_add_member(a, 0, &b));
    sl_swim_member_t m;
    /* b ALIVE one higher at the attacker's address: before, a sent b's
     * traffic to the attacker from then on */
    sl_member_msg_t f = rec("b", ATTACKER, 4, SL_STATE_ALIVE);
    CHECK(ping_with(a, 10, "a", &f, 1) != SL_OK);
    CHECK_OK(sl_swim_member_find(a, sl_bytes_str("b"), &m));
    CHECK_MSG(m.addr.len == strlen("tcp://10.0.0.2:7600") &&
                  !memcmp(m.addr.ptr, "tcp://10.0.0.2:7600", m.addr.len),
              "b's address moved to %.*s", (int)m.addr.len, (const char *)m.addr.ptr);
    CHECK_INT(m.incarnation, 3);
    /* declared dead, then at once alive elsewhere: still refused */
    sl_member_msg_t pair[2] = {rec("b", "tcp://10.0.0.2:7600", 4, SL_STATE_DEAD),
                               rec("b", ATTACKER, 5, SL_STATE_ALIVE)};
    CHECK(ping_with(a, 20, "a", pair, 2) != SL_OK);
    CHECK_OK(sl_swim_member_find(a, sl_bytes_str("b"), &m));
    CHECK(!memcmp(m.addr.ptr, "tcp://10.0.0.2:7600", m.addr.len));
    /* its refutation at the old address is taken */
    sl_member_msg_t back = rec("b", "tcp://10.0.0.2:7600", 6, SL_STATE_ALIVE);
    CHECK_OK(ping_with(a, 30, "a", &back, 1));
    CHECK_OK(sl_swim_member_find(a, sl_bytes_str("b"), &m));
    CHECK_INT(m.state, SL_STATE_ALIVE);
    CHECK_INT(m.incarnation, 6);
    /* a member that restarted on another port of its host is taken at
     * once, when we hold it dead */
    sl_member_msg_t gone = rec("b", "tcp://10.0.0.2:7600", 6, SL_STATE_LEFT);
    CHECK_OK(ping_with(a, 32, "a", &gone, 1));
    sl_member_msg_t port = rec("b", "tcp://10.0.0.2:7601", 7, SL_STATE_ALIVE);
    CHECK_OK(ping_with(a, 34, "a", &port, 1));
    CHECK_OK(sl_swim_member_find(a, sl_bytes_str("b"), &m));
    CHECK(!memcmp(m.addr.ptr, "tcp://10.0.0.2:7601", m.addr.len));
    /* a member that really moved (dead here for a push-pull interval, then
     * back on another host at a higher incarnation) is taken there */
    sl_member_msg_t dead = rec("b", "tcp://10.0.0.2:7601", 7, SL_STATE_DEAD);
    CHECK_OK(ping_with(a, 40, "a", &dead, 1));
    int64_t later = 40 + 2 * 30000 + 1;
    sl_member_msg_t early = rec("b", "tcp://10.0.0.3:7600", 8, SL_STATE_ALIVE);
    CHECK(ping_with(a, 50, "a", &early, 1) != SL_OK);
    sl_member_msg_t moved = rec("b", "tcp://10.0.0.3:7600", 8, SL_STATE_ALIVE);
    CHECK_OK(ping_with(a, later, "a", &moved, 1));
    CHECK_OK(sl_swim_member_find(a, sl_bytes_str("b"), &m));
    CHECK(!memcmp(m.addr.ptr, "tcp://10.0.0.3:7600", m.addr.len));
    CHECK_INT(m.state, SL_STATE_ALIVE);
    CHECK_OK(sl_swim_check(a));
    drain(a);
    sl_swim_destroy(&a);
}

#define FAKES 16384

/* A SYNC push from the attacker naming FAKES made-up members. */
static sl_err flood(sl_swim_t *s, int64_t now, int round, sl_member_msg_t *recs, char *names) {
    for (int i = 0; i < FAKES; i++) {
        char *n = names + (size_t)i * 16;
        snprintf(n, 16, "f%d-%d", round, i);
        recs[i] = rec(n, "tcp://10.9.0.1:7600", 1, SL_STATE_ALIVE);
        recs[i].addr = sl_bytes_str("tcp://10.9.0.1:7600");
    }
    sl_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = SL_MSG_SYNC;
    m.from = sl_bytes_str("mallory");
    m.from_addr = sl_bytes_str(ATTACKER);
    m.u.sync.members = recs;
    m.u.sync.member_count = FAKES;
    sl_err err = sl_swim_receive(s, now, &m);
    drain(s);
    return err;
}

static void test_table_flood(void) {
    sl_swim_t *a = make_core("a", "tcp://10.0.0.1:7600");
    sl_member_msg_t b = rec("b", "tcp://10.0.0.2:7600", 3, SL_STATE_ALIVE);
    CHECK_OK(sl_swim_add_member(a, 0, &b));
    sl_member_msg_t *recs = malloc(sizeof *recs * FAKES);
    char *names = malloc((size_t)FAKES * 16);
    CHECK(recs && names);
    sl_swim_stats_t st;
    for (int r = 0; r < 20; r++) {
        CHECK(flood(a, 1000 + r * 100, r, recs, names) != SL_OK);
        sl_swim_stats(a, &st);
    }
    /* before: 327,682 records; now at most one interval's worth of
     * strangers (1024 by default), 64 a message */
    size_t n = sl_swim_member_count(a);
    CHECK_MSG(n <= 2 + 1024, "%zu members after 20 floods", n);
    /* and the next interval lets in no more than its own budget */
    CHECK(flood(a, 1000 + 2 * 60000, 99, recs, names) != SL_OK);
    n = sl_swim_member_count(a);
    CHECK_MSG(n <= 2 + 1024 + 64 && n <= 4096, "%zu members after the next interval", n);
    /* a full table makes room by forgetting members given up, never live
     * ones: here the made-up members are all still ALIVE, so the cap holds */
    for (int r = 0; r < 80; r++)
        flood(a, 200000 + (int64_t)r * 60001, 100 + r, recs, names);
    n = sl_swim_member_count(a);
    CHECK_MSG(n <= 4096, "%zu members with the table full", n);
    sl_swim_member_t bm;
    CHECK_OK(sl_swim_member_find(a, sl_bytes_str("b"), &bm));
    drain(a);
    CHECK_OK(sl_swim_check(a));
    sl_swim_destroy(&a);

    /* the answer to our own join still brings a whole (large) table */
    sl_swim_t *j = make_core("j", "tcp://10.0.0.5:7600");
    const char *seed = "tcp://10.0.0.2:7600";
    CHECK_OK(sl_swim_join(j, 0, &seed, 1));
    drain(j);
    for (int i = 0; i < 1000; i++) {
        char *nm = names + (size_t)i * 16;
        snprintf(nm, 16, "m%d", i);
        recs[i] = rec(nm, "tcp://10.0.1.1:7600", 1, SL_STATE_ALIVE);
    }
    sl_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = SL_MSG_SYNC;
    m.from = sl_bytes_str("m0");
    m.from_addr = sl_bytes_str("tcp://10.0.1.1:7600");
    m.u.sync.reply = 1;
    m.u.sync.members = recs;
    m.u.sync.member_count = 1000;
    CHECK_OK(sl_swim_receive(j, 10, &m));
    CHECK_INT(sl_swim_member_count(j), 1001);
    drain(j);
    sl_swim_destroy(&j);
    free(recs);
    free(names);
}

static void test_names_refused(void) {
    sl_swim_t *a = make_core("a", "tcp://10.0.0.1:7600");
    /* a member at a host name: dialling it would block the I/O thread */
    sl_member_msg_t f = rec("n", "tcp://nowhere.invalid:7600", 1, SL_STATE_ALIVE);
    CHECK(ping_with(a, 10, "a", &f, 1) != SL_OK);
    sl_swim_member_t m;
    CHECK_ERR(sl_swim_member_find(a, sl_bytes_str("n"), &m), SL_ENOTFOUND);
    drain(a);
    /* a PING whose reply address is a name is not answered */
    sl_msg_t p;
    memset(&p, 0, sizeof p);
    p.type = SL_MSG_PING;
    p.from = sl_bytes_str("mallory");
    p.from_addr = sl_bytes_str("tcp://nowhere.invalid:7600");
    p.u.ping.seq = 5;
    p.u.ping.target = sl_bytes_str("a");
    CHECK(sl_swim_receive(a, 20, &p) != SL_OK);
    sl_swim_output_t o;
    int to_name = 0;
    while (sl_swim_next_output(a, &o) == SL_OK)
        to_name += o.to_addr.len && memchr(o.to_addr.ptr, 'n', o.to_addr.len) != NULL;
    CHECK_INT(to_name, 0);
    /* nor a PING_REQ naming a target by host name */
    p.type = SL_MSG_PING_REQ;
    p.from_addr = sl_bytes_str(ATTACKER);
    p.u.ping_req.seq = 6;
    p.u.ping_req.target = sl_bytes_str("v");
    p.u.ping_req.target_addr = sl_bytes_str("tcp://victim.invalid:7600");
    CHECK(sl_swim_receive(a, 30, &p) != SL_OK);
    to_name = 0;
    while (sl_swim_next_output(a, &o) == SL_OK)
        to_name += o.to_addr.len && memchr(o.to_addr.ptr, 'v', o.to_addr.len) != NULL;
    CHECK_INT(to_name, 0);
    sl_swim_destroy(&a);
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR);
    sl_test_run("incarnation_overflow", test_incarnation_overflow);
    sl_test_run("address_hijack", test_address_hijack);
    sl_test_run("table_flood", test_table_flood);
    sl_test_run("names_refused", test_names_refused);
    return sl_test_finish();
}
