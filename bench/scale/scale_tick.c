/* sl-scale-tick: one peer's work per tick at rest, with N members.
 *
 * One real node (swim core, loop timers) with the real store module, on a
 * virtual clock (node/node_bench.h: the loop's timers without its sockets).
 * N - 1 other members are added to the swim core; each then "sends" the
 * store a DIGEST and a SUMMARY that agree with what it holds (our own,
 * re-signed with its replica id and address, handed to the store's route),
 * as every member of a settled cluster has. Then K ticks of 10 ms run at
 * rest in run_ticks(), with the members' refresh SUMMARYs (one in 30 s;
 * its answer is not sent, see refresh_build), which callgrind counts
 * alone:
 *
 *   valgrind --tool=callgrind --toggle-collect=run_ticks \
 *       build/sl-scale-tick 150 12000
 *
 * and instructions per tick = the total Ir / K. The swim probe period is
 * set to an hour (no member answers: the other members are not real), so
 * swim's probing is not in the count; its gossip, push-pull and reaping
 * are. Prints what the store node saw (members, replicas, agreed). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "starling/hash.h"
#include "starling/peer.h"
#include "starling/platform.h"
#include "starling/store.h"
#include "starling/store_node.h"
#include "starling/swim.h"

#include "node/node_bench.h"

#define TICK_NS 10000000ull /* 10 ms */

static uint64_t now_ns;

/* Our message of `type` as the member at `addr` with replica `rid` would
 * send it, delivered to the store's route. */
static void as_member(sl_node_t *node, sl_store_t *st, uint8_t type, const char *addr,
                      uint64_t rid) {
    sl_store_msg_t ours, theirs;
    if ((type == SL_STORE_MSG_DIGEST ? sl_store_digest(st, false, &ours)
                                     : sl_store_summary(st, false, &ours)) != SL_OK) {
        fprintf(stderr, "sl-scale-tick: cannot build our message\n");
        exit(1);
    }
    sl_store_dmsg_t m;
    if (sl_store_msg_decode(type, ours.body, ours.len, &m) != SL_OK) {
        fprintf(stderr, "sl-scale-tick: cannot decode our message\n");
        exit(1);
    }
    m.sender = rid;
    m.reply_to = (const uint8_t *)addr;
    m.reply_to_len = (uint32_t)strlen(addr);
    if (sl_store_msg_encode(&m, 1u << 20, &theirs) != SL_OK) {
        fprintf(stderr, "sl-scale-tick: cannot encode\n");
        exit(1);
    }
    sl_store_dmsg_fini(&m);
    sl_store_msg_fini(&ours);
    sl_node_deliver(node, type, theirs.body, theirs.len, now_ns);
    sl_store_msg_fini(&theirs);
}

/* What each member sends at rest: its refresh SUMMARY to a random member
 * every 30 s (the store's refresh_ms), so one in 30 s reaches a peer on
 * average, whatever N; each agrees with ours. Built before the measured
 * part. */
typedef struct {
    sl_store_msg_t *msgs; /* one per other member */
    int count;
} refresh_t;

static refresh_t refreshes;

static void refresh_build(sl_store_t *st, int n) {
    refreshes.msgs = calloc((size_t)n, sizeof *refreshes.msgs);
    for (int i = 1; i < n; i++) {
        char addr[48];
        snprintf(addr, sizeof addr, "tcp://127.0.0.1:%d", 20000 + i);
        sl_store_msg_t ours;
        sl_store_dmsg_t m;
        if (sl_store_summary(st, false, &ours) != SL_OK ||
            sl_store_msg_decode(SL_STORE_MSG_SUMMARY, ours.body, ours.len, &m) != SL_OK) {
            fprintf(stderr, "sl-scale-tick: cannot build a refresh\n");
            exit(1);
        }
        m.sender = sl_hash64(addr, strlen(addr), 5) | 1;
        /* (marked as an answer, so none goes back: the answer would go to
           an address where nothing listens, and past 64 of them the net
           layer's connection cap closes and reopens one per send; a real
           member's refresh comes on its connection, answered on it) */
        m.reply = true;
        m.reply_to = (const uint8_t *)addr;
        m.reply_to_len = (uint32_t)strlen(addr);
        if (sl_store_msg_encode(&m, 1u << 20, &refreshes.msgs[refreshes.count++]) != SL_OK)
            exit(1);
        sl_store_dmsg_fini(&m);
        sl_store_msg_fini(&ours);
    }
}

/* K ticks at rest, with the members' refreshes. */
static void ticks(sl_node_t *node, int k, int n) {
    (void)n;
    uint64_t every_ns = 30000ull * 1000000ull, next = now_ns;
    int who = 0;
    for (int i = 0; i < k; i++) {
        now_ns += TICK_NS;
        while (refreshes.count && now_ns >= next) {
            const sl_store_msg_t *m = &refreshes.msgs[who++ % refreshes.count];
            sl_node_deliver(node, SL_STORE_MSG_SUMMARY, m->body, m->len, now_ns);
            next += every_ns;
        }
        sl_node_timers_at(node, now_ns);
    }
}

/* The measured part. */
__attribute__((noinline)) void run_ticks(sl_node_t *node, int k, int n) { ticks(node, k, n); }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 50;
    int k = argc > 2 ? atoi(argv[2]) : 12000;
    if (n < 1 || n > 1000 || k < 1) {
        fprintf(stderr, "usage: sl-scale-tick N K (members 1..1000, ticks)\n");
        return 2;
    }
    char dir[] = "/tmp/sl-scale-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char data[64], sdir[64];
    snprintf(data, sizeof data, "%s/node", dir);
    snprintf(sdir, sizeof sdir, "%s/store", dir);
    sl_node_config_t cfg = {.name = "p0000", .listen = "tcp://127.0.0.1:0", .data_dir = data};
    sl_swim_config_defaults(&cfg.swim);
    cfg.swim.timing.probe_interval_ms = 3600 * 1000;
    cfg.swim.timing.probe_timeout_ms = 1000;
    sl_node_t *node = NULL;
    sl_store_node_t *sn = NULL;
    sl_store_node_config_t scfg = {.dir = sdir};
    if (sl_node_new(&cfg, &node) != SL_OK || sl_store_node_attach(node, &scfg, &sn) != SL_OK) {
        fprintf(stderr, "sl-scale-tick: cannot start the node\n");
        return 1;
    }
    sl_store_t *st = sl_store_node_store(sn);
    now_ns = sl_plat_now_ns();
    /* some keys, some deleted (tombstones for the collector) */
    for (int i = 0; i < 64; i++) {
        char key[32];
        int len = snprintf(key, sizeof key, "bench/key/%03d", i);
        sl_store_node_put(sn, key, (size_t)len, "value", 5);
    }
    for (int t = 0; t < 10; t++) {
        now_ns += TICK_NS;
        sl_node_timers_at(node, now_ns);
    }
    for (int i = 0; i < 16; i++) {
        char key[32];
        int len = snprintf(key, sizeof key, "bench/key/%03d", i);
        sl_store_node_del(sn, key, (size_t)len);
    }
    for (int t = 0; t < 10; t++) {
        now_ns += TICK_NS;
        sl_node_timers_at(node, now_ns);
    }
    /* the other members, alive, each holding what we hold */
    sl_swim_t *sw = sl_node_swim_mut(node);
    for (int i = 1; i < n; i++) {
        char name[16], addr[48];
        snprintf(name, sizeof name, "p%04d", i);
        snprintf(addr, sizeof addr, "tcp://127.0.0.1:%d", 20000 + i);
        sl_member_msg_t r = {0};
        r.name = sl_bytes_str(name);
        r.addr = sl_bytes_str(addr);
        r.state = SL_STATE_ALIVE;
        if (sl_swim_add_member(sw, (int64_t)(now_ns / 1000000ull), &r) != SL_OK) {
            fprintf(stderr, "sl-scale-tick: cannot add member %d\n", i);
            return 1;
        }
    }
    /* each member wrote once (its peer/NAME/slots, as the study module does) */
    for (int i = 1; i < n; i++) {
        char addr[48], key[32];
        snprintf(addr, sizeof addr, "tcp://127.0.0.1:%d", 20000 + i);
        int len = snprintf(key, sizeof key, "peer/p%04d/slots", i);
        sl_store_config_t fc = {0};
        sl_store_t *f = NULL;
        sl_store_msg_t d;
        if (sl_store_new(sl_hash64(addr, strlen(addr), 5) | 1, &fc, &f) != SL_OK ||
            sl_store_put(f, key, (size_t)len, "1", 1, now_ns / 1000000ull, &d) != SL_OK) {
            fprintf(stderr, "sl-scale-tick: cannot write as member %d\n", i);
            return 1;
        }
        sl_node_deliver(node, SL_STORE_MSG_DELTA, d.body, d.len, now_ns);
        sl_store_msg_fini(&d);
        sl_store_destroy(&f);
    }
    for (int round = 0; round < 2; round++) /* (the second: after the collector's first look) */
        for (int i = 1; i < n; i++) {
            char addr[48];
            snprintf(addr, sizeof addr, "tcp://127.0.0.1:%d", 20000 + i);
            uint64_t rid = sl_hash64(addr, strlen(addr), 5) | 1;
            as_member(node, st, SL_STORE_MSG_DIGEST, addr, rid);
            as_member(node, st, SL_STORE_MSG_SUMMARY, addr, rid);
            now_ns += TICK_NS / 10;
            sl_node_timers_at(node, now_ns);
        }
    /* settle: 20 s */
    for (int t = 0; t < 2000; t++) {
        now_ns += TICK_NS;
        sl_node_timers_at(node, now_ns);
    }
    sl_store_stats_t ss;
    sl_store_stats(st, &ss);
    refresh_build(st, n);
    ticks(node, 3000, n); /* (30 s: each member's first refresh, answered, opens its connection) */
    sl_store_stats(st, &ss);
    run_ticks(node, k, n);
    sl_store_stats_t se;
    sl_store_stats(st, &se);
    printf("members %zu replicas %" PRIu64 " keys %" PRIu64 " ticks %d gc_dropped %" PRIu64
           " deltas_sent %" PRIu64 "\n",
           sl_swim_member_count(sw), (uint64_t)se.replicas, (uint64_t)se.keys, k,
           (uint64_t)se.gc_dropped, (uint64_t)(se.deltas_sent - ss.deltas_sent));
    for (int i = 0; i < refreshes.count; i++)
        sl_store_msg_fini(&refreshes.msgs[i]);
    free(refreshes.msgs);
    sl_store_node_destroy(&sn);
    sl_node_destroy(&node);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return 0;
}
