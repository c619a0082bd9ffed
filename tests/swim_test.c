/* Unit tests of the membership core (include/starling/swim.h): a few cores
 * wired together by a tiny in-test network that encodes and decodes every
 * message with the real codec, on a clock the test moves by hand. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "starling/msg.h"
#include "starling/swim.h"
#include "testlib.h"

#define MAXN 24

/* The test network: cores by index, named "m<i>" at "tcp://m<i>". */
typedef struct {
    sl_swim_t *core[MAXN];   /* NULL: down (messages to it are lost) */
    int n;                   /* cores */
    int64_t now;             /* the clock */
    bool cut[MAXN][MAXN];    /* drop messages from i to j */
    int sent[MAXN][8];       /* messages sent by type, per core */
    int to_addr_count;       /* messages to `watch_addr` */
    const char *watch_addr;  /* count messages to this address */
    int carried;             /* messages carrying a record of `watch_name` */
    const char *watch_name;  /* count gossip about this member */
    uint64_t watch_inc;      /* ... at this incarnation or above */
} tnet_t;

static void name_of(int i, char *buf, size_t len) { snprintf(buf, len, "m%d", i); }
static void addr_of(int i, char *buf, size_t len) { snprintf(buf, len, "tcp://m%d", i); }

static sl_swim_t *make(int i, uint64_t inc, const sl_swim_timing_t *timing) {
    char name[16], addr[32];
    name_of(i, name, sizeof name);
    addr_of(i, addr, sizeof addr);
    sl_swim_config_t cfg;
    sl_swim_config_defaults(&cfg);
    /* The expectations below are worked out for this timing (the defaults
     * until the probe period became 1 s); zero fields of `timing` take it. */
    cfg.timing.probe_interval_ms = 500;
    cfg.timing.probe_timeout_ms = 250;
    cfg.timing.suspicion_mult = 4;
    cfg.name = name;
    cfg.addr = addr;
    cfg.incarnation = inc;
    cfg.seed = 42 + (uint64_t)i;
    cfg.any_addr = true; /* "tcp://m3": test names, never dialled */
    if (timing) {
        sl_swim_timing_t base = cfg.timing;
        cfg.timing = *timing;
        if (!cfg.timing.probe_interval_ms)
            cfg.timing.probe_interval_ms = base.probe_interval_ms;
        if (!cfg.timing.probe_timeout_ms)
            cfg.timing.probe_timeout_ms = base.probe_timeout_ms;
        if (!cfg.timing.suspicion_mult)
            cfg.timing.suspicion_mult = base.suspicion_mult;
    }
    sl_swim_t *s = NULL;
    CHECK_OK(sl_swim_new(&cfg, &s));
    return s;
}

static int index_of_addr(const tnet_t *t, sl_bytes_t a) {
    for (int i = 0; i < t->n; i++) {
        char addr[32];
        addr_of(i, addr, sizeof addr);
        if (a.len == strlen(addr) && memcmp(a.ptr, addr, a.len) == 0)
            return i;
    }
    return -1;
}

static bool bytes_is(sl_bytes_t b, const char *s) {
    return b.len == strlen(s) && memcmp(b.ptr, s, b.len) == 0;
}

/* Delivers every queued output (and what it causes) until all are quiet. */
static void pump(tnet_t *t) {
    for (int round = 0; round < 1000; round++) {
        bool any = false;
        for (int i = 0; i < t->n; i++) {
            sl_swim_t *s = t->core[i];
            if (!s)
                continue;
            sl_swim_output_t out;
            while (sl_swim_next_output(s, &out) == SL_OK) {
                any = true;
                uint8_t h[SL_WIRE_HEADER_LEN], *body = NULL;
                size_t len = 0;
                CHECK_OK(sl_msg_encode(&out.msg, h, &body, &len));
                if (out.msg.type < 8)
                    t->sent[i][out.msg.type]++;
                if (t->watch_addr && bytes_is(out.to_addr, t->watch_addr))
                    t->to_addr_count++;
                if (t->watch_name)
                    for (size_t g = 0; g < out.msg.gossip_count; g++)
                        if (bytes_is(out.msg.gossip[g].name, t->watch_name) &&
                            out.msg.gossip[g].incarnation >= t->watch_inc)
                            t->carried++;
                int j = index_of_addr(t, out.to_addr);
                if (j >= 0 && t->core[j] && !t->cut[i][j]) {
                    sl_msg_t m;
                    CHECK_OK(sl_msg_decode(h, sizeof h, body, len, &m));
                    sl_err e = sl_swim_receive(t->core[j], t->now, &m);
                    CHECK(e == SL_OK || e == SL_EPROTO);
                    sl_msg_fini(&m);
                }
                sl_free(body);
            }
        }
        if (!any)
            break;
    }
    for (int i = 0; i < t->n; i++) {
        sl_swim_event_t ev;
        if (!t->core[i])
            continue;
        while (sl_swim_next_event(t->core[i], &ev) == SL_OK) {
        }
        CHECK_OK(sl_swim_check(t->core[i]));
    }
}

/* Moves the clock to `until`, ticking each core at its deadlines. */
static void run(tnet_t *t, int64_t until) {
    while (t->now < until) {
        int64_t next = until;
        for (int i = 0; i < t->n; i++)
            if (t->core[i]) {
                int64_t d = sl_swim_next_deadline_ms(t->core[i]);
                if (d < next)
                    next = d;
            }
        if (next <= t->now)
            next = t->now + 1;
        t->now = next;
        for (int i = 0; i < t->n; i++)
            if (t->core[i] && sl_swim_next_deadline_ms(t->core[i]) <= t->now)
                CHECK_OK(sl_swim_tick(t->core[i], t->now));
        pump(t);
    }
}

static void tnet_init(tnet_t *t, int n, const sl_swim_timing_t *timing) {
    memset(t, 0, sizeof *t);
    t->n = n;
    for (int i = 0; i < n; i++)
        t->core[i] = make(i, 0, timing);
}

static void tnet_fini(tnet_t *t) {
    for (int i = 0; i < t->n; i++)
        sl_swim_destroy(&t->core[i]);
}

/* Every core joins through core 0. */
static void join_all(tnet_t *t) {
    const char *seed = "tcp://m0";
    for (int i = 1; i < t->n; i++)
        CHECK_OK(sl_swim_join(t->core[i], t->now, &seed, 1));
    pump(t);
}

static sl_swim_member_t member(sl_swim_t *s, int i) {
    char name[16];
    sl_swim_member_t m;
    memset(&m, 0, sizeof m);
    m.state = 0xEE;
    name_of(i, name, sizeof name);
    if (sl_swim_member_find(s, sl_bytes_str(name), &m) != SL_OK)
        m.state = 0xEE; /* unknown */
    return m;
}

static void test_config(void) {
    sl_swim_config_t cfg;
    sl_swim_config_defaults(&cfg);
    CHECK_INT(cfg.timing.probe_interval_ms, 1250);
    CHECK(cfg.timing.probe_timeout_ms < cfg.timing.probe_interval_ms);
    sl_swim_t *s = NULL;
    CHECK_ERR(sl_swim_new(&cfg, &s), SL_EINVAL); /* no name */
    cfg.name = "a";
    cfg.addr = "tcp://a";
    const uint8_t bad_meta[] = {0x81, 0x01, 0x02}; /* int key */
    cfg.meta = bad_meta;
    cfg.meta_len = sizeof bad_meta;
    CHECK_ERR(sl_swim_new(&cfg, &s), SL_EINVAL);
    cfg.meta = NULL;
    cfg.meta_len = 0;
    char longname[SL_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    cfg.name = longname;
    CHECK_ERR(sl_swim_new(&cfg, &s), SL_EINVAL);
    cfg.name = "a";
    CHECK_OK(sl_swim_new(&cfg, &s));
    CHECK_INT(sl_swim_member_count(s), 1);
    CHECK_INT(sl_swim_alive_count(s), 1);
    CHECK_INT(sl_swim_timing(s)->indirect_count, 3);
    CHECK_OK(sl_swim_check(s));
    sl_swim_destroy(&s);
    sl_swim_destroy(&s); /* idempotent */
    CHECK(s == NULL);
}

static void test_alloc_failures(void) {
    int64_t live = sl_alloc_live();
    sl_swim_config_t cfg;
    sl_swim_config_defaults(&cfg);
    cfg.name = "a";
    cfg.addr = "tcp://a";
    for (uint64_t n = 1; n < 12; n++) {
        sl_swim_t *s = NULL;
        sl_alloc_fail_after(n, false);
        sl_err e = sl_swim_new(&cfg, &s);
        sl_alloc_fail_after(0, false);
        CHECK(e == SL_OK || e == SL_ENOMEM);
        sl_swim_destroy(&s);
        CHECK_INT(sl_alloc_live(), live);
    }
}

static void test_join_and_converge(void) {
    tnet_t t;
    tnet_init(&t, 10, NULL);
    join_all(&t);
    run(&t, 500);
    for (int i = 0; i < t.n; i++) {
        CHECK_INT(sl_swim_alive_count(t.core[i]), 10);
        for (int j = 0; j < t.n; j++)
            CHECK_INT(member(t.core[i], j).state, SL_STATE_ALIVE);
    }
    sl_bytes_t names[16];
    CHECK_INT(sl_swim_alive_names(t.core[3], names, 16), 10);
    for (int i = 1; i < 10; i++) /* sorted bytewise */
        CHECK(memcmp(names[i - 1].ptr, names[i].ptr, 2) <= 0);
    tnet_fini(&t);
}

static void test_probe_ack(void) {
    tnet_t t;
    tnet_init(&t, 2, NULL);
    join_all(&t);
    run(&t, 10000);
    sl_swim_stats_t a, b;
    sl_swim_stats(t.core[0], &a);
    sl_swim_stats(t.core[1], &b);
    /* one probe per 500 ms period each, every one answered */
    CHECK(a.probes >= 18 && a.probes <= 21);
    CHECK_INT(a.probe_acks, a.probes);
    CHECK(a.probe_failures == 0 && b.probe_failures == 0);
    CHECK_INT(t.sent[0][SL_MSG_PING], a.probes);
    CHECK(t.sent[1][SL_MSG_ACK] >= (int)a.probes);
    CHECK_INT(sl_swim_health(t.core[0]), 0);
    tnet_fini(&t);
}

static void test_indirect_probe(void) {
    tnet_t t;
    tnet_init(&t, 4, NULL);
    join_all(&t);
    run(&t, 1000);
    /* 0 cannot reach 1 directly, but 2 and 3 can */
    t.cut[0][1] = t.cut[1][0] = true;
    run(&t, 11000);
    sl_swim_stats_t a, r2, r3;
    sl_swim_stats(t.core[0], &a);
    sl_swim_stats(t.core[2], &r2);
    sl_swim_stats(t.core[3], &r3);
    CHECK(a.ping_reqs_sent > 0);
    CHECK(r2.ping_reqs_served + r3.ping_reqs_served > 0);
    CHECK_INT(a.suspects, 0); /* the relays vouched for it */
    CHECK_INT(member(t.core[0], 1).state, SL_STATE_ALIVE);
    tnet_fini(&t);
}

static void test_suspect_refute(void) {
    tnet_t t;
    tnet_init(&t, 4, NULL);
    join_all(&t);
    run(&t, 1000);
    /* 1 hears nothing and says nothing for a while */
    for (int i = 0; i < 4; i++)
        t.cut[i][1] = t.cut[1][i] = true;
    int64_t until = t.now + 2000;
    bool suspected = false;
    while (t.now < until && !suspected) {
        run(&t, t.now + 50);
        suspected = member(t.core[0], 1).state == SL_STATE_SUSPECT;
    }
    CHECK(suspected);
    CHECK_INT(member(t.core[0], 1).incarnation, 0);
    /* back before the suspicion times out: the suspect hears of it (buddy
     * system, gossip) and refutes with a higher incarnation, which wins */
    for (int i = 0; i < 4; i++)
        t.cut[i][1] = t.cut[1][i] = false;
    run(&t, t.now + 1500);
    sl_swim_stats_t st;
    sl_swim_stats(t.core[1], &st);
    CHECK(st.refutations >= 1);
    CHECK(sl_swim_incarnation(t.core[1]) >= 1);
    for (int i = 0; i < 4; i++) {
        CHECK_INT(member(t.core[i], 1).state, SL_STATE_ALIVE);
        CHECK_INT(member(t.core[i], 1).incarnation, sl_swim_incarnation(t.core[1]));
    }
    CHECK(sl_swim_health(t.core[1]) >= 1); /* being accused costs health */
    tnet_fini(&t);
}

static void test_dead_after_crash(void) {
    tnet_t t;
    tnet_init(&t, 10, NULL);
    join_all(&t);
    run(&t, 2000);
    sl_swim_destroy(&t.core[4]); /* kill -9 */
    int64_t crash = t.now;
    int64_t all_dead = -1;
    while (t.now < crash + 10000 && all_dead < 0) {
        run(&t, t.now + 50);
        bool all = true;
        for (int i = 0; i < 10; i++)
            if (t.core[i])
                all &= member(t.core[i], 4).state == SL_STATE_DEAD;
        if (all)
            all_dead = t.now - crash;
    }
    CHECK(all_dead > 0);
    CHECK_MSG(all_dead <= 3500, "kill -9 seen everywhere after %lld ms", (long long)all_dead);
    for (int i = 0; i < 10; i++)
        if (t.core[i])
            CHECK_INT(sl_swim_alive_count(t.core[i]), 9);
    tnet_fini(&t);
}

/* A closed connection is a hint (sl_swim_probe_soon): the member is
 * probed at once, not when its turn in the round comes, and a failed probe
 * makes it suspect within one period. */
static void test_probe_soon(void) {
    tnet_t t;
    tnet_init(&t, 10, NULL);
    join_all(&t);
    run(&t, 2000);
    sl_swim_destroy(&t.core[4]); /* kill -9: its connections close */
    t.watch_addr = "tcp://m4";
    t.to_addr_count = 0;
    const char *gone = "tcp://m4";
    CHECK_OK(sl_swim_probe_soon(t.core[1], t.now, gone, strlen(gone)));
    pump(&t);
    CHECK_INT(t.to_addr_count, 1); /* m1's PING, at once */
    CHECK_ERR(sl_swim_probe_soon(t.core[1], t.now, "tcp://m99", 9), SL_ENOTFOUND);
    const char *self = "tcp://m1";
    CHECK_ERR(sl_swim_probe_soon(t.core[1], t.now, self, strlen(self)), SL_ENOTFOUND);
    int64_t hinted = t.now;
    run(&t, hinted + 501); /* probe timeout 250 ms, period 500 ms */
    uint8_t st = member(t.core[1], 4).state;
    CHECK(st == SL_STATE_SUSPECT || st == SL_STATE_DEAD);
    sl_swim_stats_t ss;
    sl_swim_stats(t.core[1], &ss);
    CHECK_INT(ss.probes_hinted, 1);
    CHECK(ss.probe_failures >= 1);
    /* A live member hinted costs one probe and stays alive. */
    const char *live = "tcp://m2";
    CHECK_OK(sl_swim_probe_soon(t.core[1], t.now, live, strlen(live)));
    run(&t, t.now + 2000);
    CHECK_INT(member(t.core[1], 2).state, SL_STATE_ALIVE);
    tnet_fini(&t);
}

/* Lifeguard: timeouts shrink with independent confirmations. */
static int64_t dead_after(int confirmers) {
    sl_swim_t *s = make(0, 0, NULL);
    char name[16], addr[32];
    for (int i = 1; i < 10; i++) {
        name_of(i, name, sizeof name);
        addr_of(i, addr, sizeof addr);
        sl_member_msg_t r = {0};
        r.name = sl_bytes_str(name);
        r.addr = sl_bytes_str(addr);
        r.state = SL_STATE_ALIVE;
        CHECK_OK(sl_swim_add_member(s, 0, &r));
    }
    sl_msg_t msg;
    memset(&msg, 0, sizeof msg);
    msg.type = SL_MSG_ACK; /* gossip only */
    msg.from = sl_bytes_str("m2");
    msg.from_addr = sl_bytes_str("tcp://m2");
    msg.u.ack.target = msg.from;
    msg.gossip_count = 1;
    msg.gossip[0].name = sl_bytes_str("m5");
    msg.gossip[0].addr = sl_bytes_str("tcp://m5");
    msg.gossip[0].state = SL_STATE_SUSPECT;
    for (int c = 0; c <= confirmers; c++) {
        name_of(c + 1, name, sizeof name);
        msg.gossip[0].from = sl_bytes_str(name);
        CHECK_OK(sl_swim_receive(s, 0, &msg));
    }
    CHECK_INT(member(s, 5).state, SL_STATE_SUSPECT);
    int64_t t = 0;
    while (member(s, 5).state == SL_STATE_SUSPECT && t < 60000) {
        /* the probes of m5 fail too, but only the suspicion timer kills */
        int64_t d = sl_swim_next_deadline_ms(s);
        t = d > t ? d : t + 1;
        CHECK_OK(sl_swim_tick(s, t));
        sl_swim_output_t out;
        while (sl_swim_next_output(s, &out) == SL_OK) {
        }
    }
    CHECK_INT(member(s, 5).state, SL_STATE_DEAD);
    sl_swim_stats_t st;
    sl_swim_stats(s, &st);
    CHECK_INT(st.confirmations, confirmers < 2 ? confirmers : 2);
    sl_swim_destroy(&s);
    return t;
}

static void test_suspicion_shrinks(void) {
    /* N = 10: min = 4 * 1 * 500 ms = 2 s, max = 3 * min = 6 s, k = 2. Our
     * own failed probes of m5 confirm as well, so the timer only gets
     * shorter than what the gossiped confirmations alone give. */
    int64_t t0 = dead_after(0), t1 = dead_after(1), t2 = dead_after(2), t5 = dead_after(5);
    CHECK(t0 <= 6000 && t0 > 2000);
    CHECK(t1 <= t0);
    CHECK(t2 < t0);
    CHECK_NEAR((double)t2, 2000, 1);
    CHECK_NEAR((double)t5, 2000, 1); /* never below the minimum */
    CHECK_NEAR((double)t1, 6000 - 4000 * (log(2) / log(3)), 2);
}

static void test_local_health(void) {
    /* Two members, the other silent: no relays to ask, so every failed
     * probe raises the score by one, up to awareness_max - 1, and the probe
     * period stretches with it. */
    sl_swim_t *s = make(0, 0, NULL);
    sl_member_msg_t r = {0};
    r.name = sl_bytes_str("m1");
    r.addr = sl_bytes_str("tcp://m1");
    CHECK_OK(sl_swim_add_member(s, 0, &r));
    int64_t t = 0;
    int pings = 0;
    int64_t last_ping = -1, gap = 0;
    uint32_t last_seq = 0;
    while (t < 30000) {
        int64_t d = sl_swim_next_deadline_ms(s);
        t = d > t ? d : t + 1;
        CHECK_OK(sl_swim_tick(s, t));
        sl_swim_output_t out;
        while (sl_swim_next_output(s, &out) == SL_OK)
            if (out.msg.type == SL_MSG_PING && out.msg.u.ping.seq != last_seq) {
                last_seq = out.msg.u.ping.seq; /* a new probe, not its retry */
                pings++;
                if (last_ping >= 0)
                    gap = t - last_ping;
                last_ping = t;
            }
        /* keep m1 alive in our view so that it is probed again */
        if (member(s, 1).state != SL_STATE_ALIVE) {
            r.incarnation = member(s, 1).incarnation + 1;
            CHECK_OK(sl_swim_add_member(s, t, &r));
        }
    }
    CHECK_INT(sl_swim_health(s), 7);
    CHECK_INT(gap, 8 * 500); /* (score + 1) * probe interval */
    CHECK(pings < 30000 / 500);
    /* answered probes bring the score back down, one per probe */
    sl_msg_t ack;
    memset(&ack, 0, sizeof ack);
    ack.type = SL_MSG_ACK;
    ack.from = sl_bytes_str("m1");
    ack.from_addr = sl_bytes_str("tcp://m1");
    ack.u.ack.target = ack.from;
    for (int i = 0; i < 400 && sl_swim_health(s) > 0; i++) {
        int64_t d = sl_swim_next_deadline_ms(s);
        t = d > t ? d : t + 1;
        CHECK_OK(sl_swim_tick(s, t));
        sl_swim_output_t out;
        uint32_t seq = 0;
        bool ping = false;
        while (sl_swim_next_output(s, &out) == SL_OK)
            if (out.msg.type == SL_MSG_PING) {
                seq = out.msg.u.ping.seq;
                ping = true;
            }
        if (ping) {
            ack.u.ack.seq = seq;
            CHECK_OK(sl_swim_receive(s, t + 1, &ack));
        }
        if (member(s, 1).state != SL_STATE_ALIVE) {
            r.incarnation = member(s, 1).incarnation + 1;
            CHECK_OK(sl_swim_add_member(s, t, &r));
        }
    }
    CHECK_INT(sl_swim_health(s), 0);
    sl_swim_destroy(&s);
}

static void test_leave_not_dead(void) {
    tnet_t t;
    tnet_init(&t, 10, NULL);
    join_all(&t);
    run(&t, 1000);
    CHECK_OK(sl_swim_leave(t.core[7], t.now));
    CHECK_INT(member(t.core[7], 7).state, SL_STATE_LEFT);
    pump(&t);
    CHECK(sl_swim_leave_sent(t.core[7]));
    CHECK(sl_swim_leave_acked(t.core[7])); /* the leave PINGs were answered */
    int64_t left_at = t.now;
    run(&t, t.now + 300); /* leave seen everywhere within 0.3 s */
    for (int i = 0; i < 10; i++)
        CHECK_INT(member(t.core[i], 7).state, SL_STATE_LEFT);
    sl_swim_destroy(&t.core[7]); /* the process exits */
    run(&t, left_at + 20000);
    for (int i = 0; i < 10; i++) {
        if (!t.core[i])
            continue;
        CHECK_INT(member(t.core[i], 7).state, SL_STATE_LEFT); /* never dead */
        CHECK_INT(sl_swim_alive_count(t.core[i]), 9);
        sl_swim_stats_t st;
        sl_swim_stats(t.core[i], &st);
        CHECK_INT(st.deaths, 0);
    }
    /* it comes back with a higher incarnation and is alive again */
    t.core[7] = make(7, member(t.core[0], 7).incarnation + 1, NULL);
    const char *seed = "tcp://m0";
    CHECK_OK(sl_swim_join(t.core[7], t.now, &seed, 1));
    run(&t, t.now + 1000);
    for (int i = 0; i < 10; i++) {
        CHECK_INT(member(t.core[i], 7).state, SL_STATE_ALIVE);
        CHECK_INT(member(t.core[i], 7).incarnation, 1);
    }
    tnet_fini(&t);
}

static void test_restart_lost_disk(void) {
    /* a member restarted without its saved incarnation (0) while the others
     * still hold it alive at 3 (or dead at 3): it refutes from the SYNC. */
    tnet_t t;
    tnet_init(&t, 5, NULL);
    sl_swim_destroy(&t.core[2]);
    t.core[2] = make(2, 3, NULL);
    join_all(&t);
    run(&t, 1000);
    CHECK_INT(member(t.core[0], 2).incarnation, 3);
    sl_swim_destroy(&t.core[2]);
    run(&t, 8000);
    CHECK_INT(member(t.core[0], 2).state, SL_STATE_DEAD);
    t.core[2] = make(2, 0, NULL);
    const char *seed = "tcp://m1";
    CHECK_OK(sl_swim_join(t.core[2], t.now, &seed, 1));
    run(&t, t.now + 1000);
    CHECK_INT(sl_swim_incarnation(t.core[2]), 4);
    for (int i = 0; i < 5; i++) {
        CHECK_INT(member(t.core[i], 2).state, SL_STATE_ALIVE);
        CHECK_INT(member(t.core[i], 2).incarnation, 4);
    }
    tnet_fini(&t);
}

static void test_record_order(void) {
    /* higher incarnation wins; at equal ones alive < suspect < dead < left */
    sl_swim_t *s = make(0, 0, NULL);
    sl_member_msg_t r = {0};
    r.name = sl_bytes_str("x");
    r.addr = sl_bytes_str("tcp://x");
    r.incarnation = 5;
    r.state = SL_STATE_LEFT;
    CHECK_OK(sl_swim_add_member(s, 0, &r));
    sl_swim_member_t m;
    r.state = SL_STATE_DEAD;
    CHECK_OK(sl_swim_add_member(s, 0, &r));
    CHECK_OK(sl_swim_member_find(s, r.name, &m));
    CHECK_INT(m.state, SL_STATE_LEFT);
    r.state = SL_STATE_ALIVE;
    r.incarnation = 5;
    CHECK_OK(sl_swim_add_member(s, 0, &r));
    CHECK_OK(sl_swim_member_find(s, r.name, &m));
    CHECK_INT(m.state, SL_STATE_LEFT);
    r.incarnation = 4;
    CHECK_OK(sl_swim_add_member(s, 0, &r));
    CHECK_OK(sl_swim_member_find(s, r.name, &m));
    CHECK_INT(m.incarnation, 5); /* incarnations never go down */
    r.incarnation = 6;
    r.addr = sl_bytes_str("tcp://x2"); /* restarted elsewhere: not before the old */
    CHECK_ERR(sl_swim_add_member(s, 0, &r), SL_EPROTO); /* address was given up */
    int64_t later = sl_swim_timing(s)->push_pull_interval_ms;
    CHECK_OK(sl_swim_add_member(s, later, &r));
    CHECK_OK(sl_swim_member_find(s, r.name, &m));
    CHECK_INT(m.state, SL_STATE_ALIVE);
    CHECK(bytes_is(m.addr, "tcp://x2"));
    r.state = SL_STATE_SUSPECT;
    CHECK_OK(sl_swim_add_member(s, later, &r));
    r.state = SL_STATE_ALIVE; /* same incarnation: no refutation */
    CHECK_OK(sl_swim_add_member(s, later, &r));
    CHECK_OK(sl_swim_member_find(s, r.name, &m));
    CHECK_INT(m.state, SL_STATE_SUSPECT);
    r.name.len = 0; /* malformed */
    CHECK_ERR(sl_swim_add_member(s, later, &r), SL_EPROTO);
    CHECK_OK(sl_swim_check(s));
    sl_swim_destroy(&s);
}

static void test_meta(void) {
    tnet_t t;
    tnet_init(&t, 3, NULL);
    join_all(&t);
    run(&t, 500);
    /* {"gpus": "2"} */
    const uint8_t meta[] = {0x81, 0xA4, 'g', 'p', 'u', 's', 0xA1, '2'};
    CHECK_OK(sl_swim_set_meta(t.core[1], t.now, meta, sizeof meta));
    CHECK_INT(sl_swim_incarnation(t.core[1]), 1);
    const uint8_t bad[] = {0x81, 0x01};
    CHECK_ERR(sl_swim_set_meta(t.core[1], t.now, bad, sizeof bad), SL_EINVAL);
    run(&t, t.now + 300);
    for (int i = 0; i < 3; i++) {
        sl_swim_member_t m = member(t.core[i], 1);
        CHECK_INT(m.incarnation, 1);
        CHECK_INT(m.meta.len, sizeof meta);
        CHECK(m.meta.len == sizeof meta && memcmp(m.meta.ptr, meta, sizeof meta) == 0);
    }
    tnet_fini(&t);
}

static void test_retransmit_limit(void) {
    /* N = 20 alive: limit = 4 * ceil(log10(21)) = 8 messages carry an
     * update, and then it is no longer sent */
    tnet_t t;
    tnet_init(&t, 20, NULL);
    join_all(&t);
    run(&t, 3000);
    t.watch_name = "m0";
    t.watch_inc = 1;
    const uint8_t meta[] = {0x81, 0xA1, 'k', 0xA1, 'v'};
    CHECK_OK(sl_swim_set_meta(t.core[0], t.now, meta, sizeof meta));
    sl_swim_t *keep[MAXN];
    memcpy(keep, t.core, sizeof keep);
    for (int i = 1; i < 20; i++)
        t.core[i] = NULL; /* count only what core 0 sends; the rest is lost */
    run(&t, t.now + 5000);
    CHECK_INT(t.carried, 8);
    memcpy(t.core, keep, sizeof keep);
    tnet_fini(&t);
}

static void test_push_pull(void) {
    /* two clusters formed apart merge by SYNC */
    tnet_t t;
    sl_swim_timing_t tm = {0};
    tm.push_pull_interval_ms = 2000;
    tnet_init(&t, 6, &tm);
    const char *s0 = "tcp://m0", *s3 = "tcp://m3";
    for (int i = 1; i < 3; i++)
        CHECK_OK(sl_swim_join(t.core[i], 0, &s0, 1));
    for (int i = 4; i < 6; i++)
        CHECK_OK(sl_swim_join(t.core[i], 0, &s3, 1));
    pump(&t);
    run(&t, 1000);
    CHECK_INT(sl_swim_alive_count(t.core[0]), 3);
    CHECK_INT(sl_swim_alive_count(t.core[5]), 3);
    /* a SYNC from 2 to 4 (as the daemon does for a new seed): both sides
     * take each other's table, and the reply comes back */
    CHECK_OK(sl_swim_join(t.core[2], t.now, &s3, 1));
    pump(&t);
    CHECK_INT(sl_swim_alive_count(t.core[2]), 6);
    CHECK_INT(sl_swim_alive_count(t.core[3]), 6);
    run(&t, t.now + 1000);
    for (int i = 0; i < 6; i++)
        CHECK_INT(sl_swim_alive_count(t.core[i]), 6);
    sl_swim_stats_t st;
    sl_swim_stats(t.core[3], &st);
    CHECK(st.syncs_received >= 1 && st.syncs_sent >= 1);
    tnet_fini(&t);
}

/* Runs `s` to time `until`, handing out what it sends; returns the record
 * count of the first SYNC it sent (-1: none) and marks the members named
 * in it in `seen` (by number, "m<i>"); `first_self` is set when the
 * SYNC's first record is the sender's own. */
static int next_sync(sl_swim_t *s, int64_t *t, int64_t until, bool *seen, int cap,
                     bool *first_self) {
    int got = -1;
    while (*t < until && got < 0) {
        int64_t d = sl_swim_next_deadline_ms(s);
        *t = d > *t ? (d < until ? d : until) : *t + 1;
        CHECK_OK(sl_swim_tick(s, *t));
        sl_swim_output_t out;
        while (sl_swim_next_output(s, &out) == SL_OK) {
            if (out.msg.type != SL_MSG_SYNC || got >= 0)
                continue;
            const sl_sync_t *sy = &out.msg.u.sync;
            got = (int)sy->member_count;
            *first_self = got > 0 && bytes_is(sy->members[0].name, "m0");
            for (size_t i = 0; i < sy->member_count; i++) {
                char nm[16] = {0};
                size_t l = sy->members[i].name.len < 15 ? sy->members[i].name.len : 15;
                memcpy(nm, sy->members[i].name.ptr, l);
                int k = atoi(nm + 1);
                if (k >= 0 && k < cap)
                    seen[k] = true;
            }
        }
    }
    return got;
}

/* The answer `s` gives to a SYNC from `from` (one record: its own). */
static int sync_answer(sl_swim_t *s, int64_t t, const char *from, const char *from_addr,
                       bool join) {
    sl_msg_t msg;
    memset(&msg, 0, sizeof msg);
    msg.type = SL_MSG_SYNC;
    msg.from = sl_bytes_str(from);
    msg.from_addr = sl_bytes_str(from_addr);
    sl_member_msg_t rec = {0};
    rec.name = msg.from;
    rec.addr = msg.from_addr;
    rec.incarnation = 1;
    rec.state = SL_STATE_ALIVE;
    msg.u.sync.join = join;
    msg.u.sync.members = &rec;
    msg.u.sync.member_count = 1;
    CHECK_OK(sl_swim_receive(s, t, &msg));
    sl_swim_output_t out;
    int got = -1;
    while (sl_swim_next_output(s, &out) == SL_OK)
        if (out.msg.type == SL_MSG_SYNC && out.msg.u.sync.reply && got < 0)
            got = (int)out.msg.u.sync.member_count;
    return got;
}

static void test_push_pull_slice(void) {
    /* Past 64 members, a periodic push-pull between members carries 64
     * records: our own, then what changed lately, then the rest in turn,
     * so the whole table goes out every ceil(199 / 63) = 4 push-pulls; a
     * join, a stranger's push-pull and a joiner's follow-up get it all */
    enum { N = 200 };
    sl_swim_timing_t tm = {0};
    tm.probe_interval_ms = 3600000; /* no probes: the others are not real */
    tm.push_pull_interval_ms = 1000; /* 4 s at 200 members (log2 scaling) */
    sl_swim_t *s = make(0, 1, &tm);
    char name[16], addr[32];
    for (int i = 1; i < N; i++) {
        name_of(i, name, sizeof name);
        addr_of(i, addr, sizeof addr);
        sl_member_msg_t r = {0};
        r.name = sl_bytes_str(name);
        r.addr = sl_bytes_str(addr);
        r.incarnation = 1;
        r.state = SL_STATE_ALIVE;
        CHECK_OK(sl_swim_add_member(s, 0, &r));
    }
    bool seen[N];
    bool self_first = false;
    int64_t t = 0;
    /* the members added at 0 are news for one interval: past it */
    memset(seen, 0, sizeof seen);
    while (t < 9000)
        next_sync(s, &t, 9000, seen, N, &self_first);
    memset(seen, 0, sizeof seen);
    for (int k = 0; k < 4; k++) {
        int n = next_sync(s, &t, t + 10000, seen, N, &self_first);
        CHECK_INT(n, 64);
        CHECK(self_first);
    }
    int covered = 0;
    for (int i = 0; i < N; i++)
        covered += seen[i];
    CHECK_INT(covered, N);
    /* a member turned suspect is in the next slice, wherever the turn is:
     * one just before the last slice's turn began (the table is in the
     * order added, so the turns run m1, m2, ...; the next one is 63 past
     * the last) */
    bool last[N];
    memset(last, 0, sizeof last);
    CHECK_INT(next_sync(s, &t, t + 10000, last, N, &self_first), 64);
    int pick = -1;
    for (int i = 1; i < N && pick < 0; i++)
        if (!last[i] && last[i == N - 1 ? 1 : i + 1])
            pick = i;
    CHECK(pick > 0);
    sl_msg_t msg;
    memset(&msg, 0, sizeof msg);
    msg.type = SL_MSG_ACK; /* gossip only */
    msg.from = sl_bytes_str("m2");
    msg.from_addr = sl_bytes_str("tcp://m2");
    msg.u.ack.target = msg.from;
    msg.gossip_count = 1;
    name_of(pick, name, sizeof name);
    addr_of(pick, addr, sizeof addr);
    msg.gossip[0].name = sl_bytes_str(name);
    msg.gossip[0].addr = sl_bytes_str(addr);
    msg.gossip[0].incarnation = 1;
    msg.gossip[0].state = SL_STATE_SUSPECT;
    msg.gossip[0].from = sl_bytes_str("m2");
    CHECK_OK(sl_swim_receive(s, t, &msg));
    CHECK_INT(member(s, pick).state, SL_STATE_SUSPECT);
    memset(seen, 0, sizeof seen);
    CHECK_INT(next_sync(s, &t, t + 10000, seen, N, &self_first), 64);
    CHECK_MSG(pick > 0 && seen[pick], "m%d, suspect, not in the next slice", pick);
    /* more news than a slice holds (100 suspects): the slices go on from
     * the last one taken, so two carry all of them (they sent the same
     * first 63 every time) */
    for (int i = 100; i < N; i++) {
        name_of(i, name, sizeof name);
        addr_of(i, addr, sizeof addr);
        msg.gossip[0].name = sl_bytes_str(name);
        msg.gossip[0].addr = sl_bytes_str(addr);
        CHECK_OK(sl_swim_receive(s, t, &msg));
    }
    memset(seen, 0, sizeof seen);
    for (int k = 0; k < 2; k++)
        CHECK_INT(next_sync(s, &t, t + 10000, seen, N, &self_first), 64);
    int suspects_sent = 0;
    for (int i = 100; i < N; i++)
        suspects_sent += seen[i] && member(s, i).state == SL_STATE_SUSPECT;
    CHECK_INT(suspects_sent, N - 100);
    /* answers: a member's push-pull gets a slice; a joiner and a stranger
     * the whole table */
    sl_swim_output_t out;
    while (sl_swim_next_output(s, &out) == SL_OK) {
    }
    CHECK_INT(sync_answer(s, t, "m5", "tcp://m5", false), 64);
    /* one that holds a record older than ours (m150 at incarnation 0) is
     * behind: it gets the whole table */
    {
        sl_msg_t sy;
        memset(&sy, 0, sizeof sy);
        sy.type = SL_MSG_SYNC;
        sy.from = sl_bytes_str("m5");
        sy.from_addr = sl_bytes_str("tcp://m5");
        sl_member_msg_t recs[2];
        memset(recs, 0, sizeof recs);
        recs[0].name = sy.from;
        recs[0].addr = sy.from_addr;
        recs[0].incarnation = 1;
        recs[0].state = SL_STATE_ALIVE;
        recs[1].name = sl_bytes_str("m150");
        recs[1].addr = sl_bytes_str("tcp://m150");
        recs[1].incarnation = 0;
        recs[1].state = SL_STATE_DEAD;
        sy.u.sync.members = recs;
        sy.u.sync.member_count = 2;
        CHECK_OK(sl_swim_receive(s, t, &sy));
        int whole = -1;
        while (sl_swim_next_output(s, &out) == SL_OK)
            if (out.msg.type == SL_MSG_SYNC && out.msg.u.sync.reply && whole < 0)
                whole = (int)out.msg.u.sync.member_count;
        CHECK_INT(whole, N);
    }
    CHECK_INT(sync_answer(s, t, "m6", "tcp://m6", true), N);
    CHECK_INT(sync_answer(s, t, "m900", "tcp://m900", false), N + 1);
    CHECK_OK(sl_swim_check(s));
    sl_swim_destroy(&s);
}

/* A gossip-only message from `from` to core `to`, carrying `rec` if given. */
static void gossip_from(tnet_t *t, int to, const char *from, const char *from_addr,
                        const sl_member_msg_t *rec) {
    sl_msg_t msg;
    memset(&msg, 0, sizeof msg);
    msg.type = SL_MSG_ACK;
    msg.from = sl_bytes_str(from);
    msg.from_addr = sl_bytes_str(from_addr);
    msg.u.ack.target = msg.from;
    if (rec) {
        msg.gossip_count = 1;
        msg.gossip[0] = *rec;
    }
    CHECK_OK(sl_swim_receive(t->core[to], t->now, &msg));
}

static void test_repair_from_sender(void) {
    /* 2 holds 1 dead (the refutation missed it, as in a storm of
     * suspicions); 1 does not know. A message from 1 makes 2 push-pull
     * with it: 1 hears of its death and refutes, and its answer brings 2
     * its record. Without it, 2 kept 1 dead until a periodic push-pull
     * (minutes at 200 members). */
    tnet_t t;
    tnet_init(&t, 4, NULL);
    join_all(&t);
    run(&t, 1000);
    sl_member_msg_t dead = {0};
    dead.name = sl_bytes_str("m1");
    dead.addr = sl_bytes_str("tcp://m1");
    dead.incarnation = 0;
    dead.state = SL_STATE_DEAD;
    dead.from = sl_bytes_str("m3");
    gossip_from(&t, 2, "m3", "tcp://m3", &dead);
    CHECK_INT(member(t.core[2], 1).state, SL_STATE_DEAD);
    sl_swim_stats_t st;
    sl_swim_stats(t.core[2], &st);
    CHECK_INT(st.syncs_repair, 0); /* (m3 is alive at 2) */
    gossip_from(&t, 2, "m1", "tcp://m1", NULL);
    pump(&t);
    sl_swim_stats(t.core[2], &st);
    CHECK_INT(st.syncs_repair, 1);
    CHECK_INT(member(t.core[2], 1).state, SL_STATE_ALIVE);
    CHECK(member(t.core[2], 1).incarnation >= 1);
    CHECK_INT(sl_swim_incarnation(t.core[1]), member(t.core[2], 1).incarnation);
    /* a sender 2 does not know (m4 joined, its gossip missed 2): asked
     * too, but not before REPAIR_PERIODS (2) probe periods since the last
     * (a joiner is often heard from before its join gossip, and its
     * first messages must not each bring a table from every member) */
    t.core[4] = make(4, 0, NULL);
    t.n = 5;
    const char *seed = "tcp://m0";
    CHECK_OK(sl_swim_join(t.core[4], t.now, &seed, 1));
    t.cut[0][2] = t.cut[1][2] = t.cut[3][2] = true; /* its join gossip misses 2 */
    pump(&t);
    CHECK_INT(member(t.core[2], 4).state, 0xEE);
    gossip_from(&t, 2, "m4", "tcp://m4", NULL);
    pump(&t);
    sl_swim_stats(t.core[2], &st);
    CHECK_INT(st.syncs_repair, 1);
    CHECK_INT(member(t.core[2], 4).state, 0xEE);
    t.now += 2 * 500; /* two probe periods (500 ms here) */
    gossip_from(&t, 2, "m4", "tcp://m4", NULL);
    pump(&t);
    sl_swim_stats(t.core[2], &st);
    CHECK_INT(st.syncs_repair, 2);
    CHECK_INT(member(t.core[2], 4).state, SL_STATE_ALIVE);
    /* an alive sender asks nothing */
    t.now += 2 * 500;
    gossip_from(&t, 2, "m4", "tcp://m4", NULL);
    pump(&t);
    sl_swim_stats(t.core[2], &st);
    CHECK_INT(st.syncs_repair, 2);
    tnet_fini(&t);
}

static void test_seeds_redialled(void) {
    /* an unreachable seed: re-dialled every join_retry_ms while alone */
    tnet_t t;
    tnet_init(&t, 3, NULL);
    t.watch_addr = "tcp://m2";
    sl_swim_destroy(&t.core[2]); /* down */
    const char *seeds[] = {"tcp://m2", "tcp://m0"};
    CHECK_OK(sl_swim_join(t.core[1], 0, seeds, 1));
    pump(&t);
    run(&t, 10000);
    CHECK_INT(t.to_addr_count, 11); /* t = 0, 1 s, ..., 10 s */
    CHECK_INT(sl_swim_alive_count(t.core[1]), 1);
    /* another seed works: now the dead one is tried at the low rate */
    CHECK_OK(sl_swim_join(t.core[1], t.now, seeds + 1, 1));
    run(&t, 11000);
    CHECK_INT(sl_swim_alive_count(t.core[1]), 2);
    t.to_addr_count = 0;
    run(&t, 11000 + 120000);
    CHECK(t.to_addr_count >= 4 && t.to_addr_count <= 5); /* every 30 s, forever */
    /* and when it comes up, the re-dial finds it */
    t.core[2] = make(2, 0, NULL);
    run(&t, t.now + 31000);
    CHECK_INT(sl_swim_alive_count(t.core[0]), 3);
    CHECK_INT(sl_swim_alive_count(t.core[2]), 3);
    tnet_fini(&t);
}

static void test_events(void) {
    sl_swim_t *a = make(0, 0, NULL);
    sl_msg_t msg;
    memset(&msg, 0, sizeof msg);
    msg.type = SL_MSG_ACK;
    msg.from = sl_bytes_str("m1");
    msg.from_addr = sl_bytes_str("tcp://m1");
    msg.u.ack.target = msg.from;
    msg.gossip_count = 1;
    msg.gossip[0].name = sl_bytes_str("m1");
    msg.gossip[0].addr = sl_bytes_str("tcp://m1");
    CHECK_OK(sl_swim_receive(a, 10, &msg));
    msg.gossip[0].state = SL_STATE_LEFT;
    CHECK_OK(sl_swim_receive(a, 20, &msg));
    sl_swim_event_t ev;
    CHECK_OK(sl_swim_next_event(a, &ev));
    CHECK_INT(ev.kind, SL_SWIM_EV_JOIN);
    CHECK(bytes_is(ev.name, "m1"));
    CHECK_INT(ev.old_state, SL_SWIM_STATE_NONE);
    CHECK_INT(ev.at_ms, 10);
    CHECK_OK(sl_swim_next_event(a, &ev));
    CHECK_INT(ev.kind, SL_SWIM_EV_STATE);
    CHECK_INT(ev.old_state, SL_STATE_ALIVE);
    CHECK_INT(ev.new_state, SL_STATE_LEFT);
    CHECK(bytes_is(ev.addr, "tcp://m1"));
    CHECK_ERR(sl_swim_next_event(a, &ev), SL_EAGAIN);
    /* non-membership types are refused */
    msg.type = SL_MSG_CTL_REQ;
    CHECK_ERR(sl_swim_receive(a, 30, &msg), SL_ETYPE);
    sl_swim_destroy(&a);
}

static void test_table_cap(void) {
    /* max_members bounds the table; a full one forgets the member given
     * up longest to take a new one, never a live one */
    sl_swim_timing_t tm = {0};
    tm.max_members = 4;
    sl_swim_t *s = make(0, 0, &tm);
    sl_member_msg_t r = {0};
    char name[16], addr[32];
    for (int i = 1; i <= 3; i++) {
        name_of(i, name, sizeof name);
        addr_of(i, addr, sizeof addr);
        r.name = sl_bytes_str(name);
        r.addr = sl_bytes_str(addr);
        r.incarnation = 1;
        r.state = SL_STATE_ALIVE;
        CHECK_OK(sl_swim_add_member(s, 10 * i, &r));
    }
    CHECK_INT(sl_swim_member_count(s), 4);
    r.name = sl_bytes_str("m9");
    r.addr = sl_bytes_str("tcp://m9");
    CHECK_ERR(sl_swim_add_member(s, 100, &r), SL_ETOOBIG);
    sl_swim_stats_t st;
    sl_swim_stats(s, &st);
    CHECK_INT(st.refused_new, 1);
    sl_member_msg_t d = {.name = sl_bytes_str("m2"), .addr = sl_bytes_str("tcp://m2"),
                         .incarnation = 1, .state = SL_STATE_DEAD};
    CHECK_OK(sl_swim_add_member(s, 200, &d));
    CHECK_OK(sl_swim_add_member(s, 300, &r));
    CHECK_INT(sl_swim_member_count(s), 4);
    sl_swim_member_t m;
    CHECK_ERR(sl_swim_member_find(s, sl_bytes_str("m2"), &m), SL_ENOTFOUND);
    CHECK_OK(sl_swim_member_find(s, sl_bytes_str("m9"), &m));
    CHECK_OK(sl_swim_member_find(s, sl_bytes_str("m1"), &m));
    CHECK_OK(sl_swim_check(s));
    sl_swim_destroy(&s);
}

static void test_reap(void) {
    sl_swim_timing_t tm = {0};
    tm.reap_ms = 20000;
    sl_swim_t *a = make(0, 0, &tm);
    for (int i = 1; i < 6; i++) {
        char name[16], addr[32];
        name_of(i, name, sizeof name);
        addr_of(i, addr, sizeof addr);
        sl_member_msg_t r = {0};
        r.name = sl_bytes_str(name);
        r.addr = sl_bytes_str(addr);
        r.state = i % 2 ? SL_STATE_DEAD : SL_STATE_ALIVE;
        CHECK_OK(sl_swim_add_member(a, 0, &r));
    }
    CHECK_INT(sl_swim_member_count(a), 6);
    CHECK_OK(sl_swim_tick(a, 40000));
    sl_swim_output_t out;
    while (sl_swim_next_output(a, &out) == SL_OK) {
    }
    CHECK_INT(sl_swim_member_count(a), 3);
    CHECK_INT(member(a, 2).state, SL_STATE_ALIVE);
    CHECK_INT(member(a, 3).state, 0xEE);
    CHECK_OK(sl_swim_check(a));
    sl_swim_destroy(&a);
}

int main(void) {
    sl_log_set_level(SL_LOG_WARNING);
    sl_test_run("config", test_config);
    sl_test_run("alloc_failures", test_alloc_failures);
    sl_test_run("join_and_converge", test_join_and_converge);
    sl_test_run("probe_ack", test_probe_ack);
    sl_test_run("indirect_probe", test_indirect_probe);
    sl_test_run("suspect_refute", test_suspect_refute);
    sl_test_run("dead_after_crash", test_dead_after_crash);
    sl_test_run("probe_soon", test_probe_soon);
    sl_test_run("suspicion_shrinks", test_suspicion_shrinks);
    sl_test_run("local_health", test_local_health);
    sl_test_run("leave_not_dead", test_leave_not_dead);
    sl_test_run("restart_lost_disk", test_restart_lost_disk);
    sl_test_run("record_order", test_record_order);
    sl_test_run("meta", test_meta);
    sl_test_run("retransmit_limit", test_retransmit_limit);
    sl_test_run("push_pull", test_push_pull);
    sl_test_run("push_pull_slice", test_push_pull_slice);
    sl_test_run("repair_from_sender", test_repair_from_sender);
    sl_test_run("seeds_redialled", test_seeds_redialled);
    sl_test_run("events", test_events);
    sl_test_run("reap", test_reap);
    sl_test_run("table_cap", test_table_cap);
    return sl_test_finish();
}
