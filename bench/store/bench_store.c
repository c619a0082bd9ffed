/* Store benchmarks (bench/results/store.md has the figures and the command).
 *
 *   bench_store merge   [N]   remote deltas merged per second, one core:
 *                             N keys of 64-byte values, as anti-entropy
 *                             chunks (1 MiB) and as single-write deltas,
 *                             inserting and then overwriting
 *   bench_store sync    [N]   bytes to reconcile two replicas of N keys that
 *                             differ in d keys (d = 0, 1, 100, 10^4, 10^5)
 *   bench_store memory  [N]   resident memory and metadata per key
 *   bench_store restart [N] DIR  restart from a snapshot + WAL tail
 *
 * Single-threaded, wall-clock timing (CLOCK_MONOTONIC); N defaults to 10^6. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "starling/disk.h"
#include "starling/store.h"

#define VAL_LEN 64

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double last_cpu; /* CPU seconds of the last deliver_all */

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

static void die(const char *what, sl_err err) {
    if (err) {
        fprintf(stderr, "%s: %s\n", what, sl_strerror(err));
        exit(1);
    }
}

static sl_store_t *mk(uint64_t rid) {
    sl_store_t *s;
    sl_store_config_t cfg = {.max_msg_len = 1u << 20, .max_sync_len = SIZE_MAX};
    die("store", sl_store_new(rid, &cfg, &s));
    return s;
}

static void key_of(char *k, size_t n, uint64_t i) { snprintf(k, n, "key/%07llu", (unsigned long long)i); }

static void value_of(uint8_t *v, uint64_t i, uint64_t round) {
    for (int j = 0; j < VAL_LEN; j++)
        v[j] = (uint8_t)(i * 31 + (uint64_t)j + round * 7);
}

/* Writes keys [0, n) on `s` (value round `round`); keeps the deltas if
 * asked. */
static void fill(sl_store_t *s, uint64_t n, uint64_t round, sl_store_msg_t *keep) {
    char k[32];
    uint8_t v[VAL_LEN];
    for (uint64_t i = 0; i < n; i++) {
        key_of(k, sizeof k, i);
        value_of(v, i, round);
        sl_store_msg_t d;
        die("put", sl_store_put(s, k, strlen(k), v, VAL_LEN, 1000 + round, &d));
        if (keep)
            keep[i] = d;
        else
            sl_store_msg_fini(&d);
    }
}

/* Everything `to` lacks from `from`, as messages. */
static void pull(sl_store_t *from, sl_store_t *to, sl_store_out_t *out) {
    sl_store_msg_t d;
    die("digest", sl_store_digest(to, true, &d));
    sl_store_out_init(out);
    bool p;
    die("receive digest", sl_store_receive(from, d.type, d.body, d.len, 2000, out, &p));
    sl_store_msg_fini(&d);
}

static double deliver_all(sl_store_t *to, sl_store_out_t *o, size_t *bytes) {
    double t0 = now_s(), c0 = cpu_s();
    for (size_t i = 0; i < o->count; i++) {
        sl_store_out_t back;
        sl_store_out_init(&back);
        bool p;
        die("receive", sl_store_receive(to, o->msgs[i].type, o->msgs[i].body, o->msgs[i].len,
                                        1u << 30, &back, &p));
        if (bytes)
            *bytes += o->msgs[i].len + 4;
        sl_store_out_fini(&back);
    }
    last_cpu = cpu_s() - c0;
    return now_s() - t0;
}

static void bench_merge(uint64_t n) {
    sl_store_t *w = mk(2), *r = mk(1);
    fill(w, n, 1, NULL);
    sl_store_out_t o;
    pull(w, r, &o);
    double t = deliver_all(r, &o, NULL);
    printf("merge  insert  %llu keys in %zu chunks: wall %.3f s, %.2f M deltas/s; CPU %.3f s, %.2f M/s per core\n",
           (unsigned long long)n, o.count, t, (double)n / t / 1e6, last_cpu, (double)n / last_cpu / 1e6);
    sl_store_out_fini(&o);
    fill(w, n, 2, NULL); /* every key overwritten */
    pull(w, r, &o);
    t = deliver_all(r, &o, NULL);
    printf("merge  update  %llu keys in %zu chunks: wall %.3f s, %.2f M deltas/s; CPU %.3f s, %.2f M/s per core\n",
           (unsigned long long)n, o.count, t, (double)n / t / 1e6, last_cpu, (double)n / last_cpu / 1e6);
    sl_store_out_fini(&o);
    /* single-write deltas, as pushed right after a local write */
    sl_store_msg_t *single = malloc(n * sizeof *single);
    fill(w, n, 3, single);
    double t0 = now_s(), c0 = cpu_s();
    for (uint64_t i = 0; i < n; i++) {
        sl_store_out_t back;
        sl_store_out_init(&back);
        bool p;
        die("receive", sl_store_receive(r, single[i].type, single[i].body, single[i].len, 1u << 30,
                                        &back, &p));
    }
    t = now_s() - t0;
    double c = cpu_s() - c0;
    printf("merge  single  %llu one-write messages: wall %.3f s, %.2f M deltas/s; CPU %.3f s, %.2f M/s per core\n",
           (unsigned long long)n, t, (double)n / t / 1e6, c, (double)n / c / 1e6);
    for (uint64_t i = 0; i < n; i++)
        sl_store_msg_fini(&single[i]);
    free(single);
    if (sl_store_state_hash(r) != sl_store_state_hash(w))
        printf("merge  ERROR: replicas differ\n");
    sl_store_destroy(&w);
    sl_store_destroy(&r);
}

/* Full push-pull from a to b and back; bytes on the wire (4-byte headers
 * counted). */
static size_t reconcile(sl_store_t *a, sl_store_t *b) {
    size_t bytes = 0;
    sl_store_msg_t d;
    die("digest", sl_store_digest(a, false, &d));
    bytes += d.len + 4;
    sl_store_out_t o1, o2;
    sl_store_out_init(&o1);
    bool p;
    die("receive", sl_store_receive(b, d.type, d.body, d.len, 2000, &o1, &p));
    sl_store_msg_fini(&d);
    for (int round = 0; o1.count && round < 8; round++) {
        sl_store_out_init(&o2);
        sl_store_t *to = round % 2 ? b : a;
        for (size_t i = 0; i < o1.count; i++) {
            bytes += o1.msgs[i].len + 4;
            die("receive", sl_store_receive(to, o1.msgs[i].type, o1.msgs[i].body, o1.msgs[i].len,
                                            1u << 30, &o2, &p));
        }
        sl_store_out_fini(&o1);
        o1 = o2;
    }
    sl_store_out_fini(&o1);
    return bytes;
}

static void bench_sync(uint64_t n) {
    sl_store_t *a = mk(1), *b = mk(2);
    fill(a, n, 1, NULL);
    reconcile(a, b);
    uint64_t ds[] = {0, 1, 100, 10000, 100000};
    uint8_t v[VAL_LEN];
    char k[32];
    printf("sync   %llu keys, key 11 bytes, value %d bytes: payload per key %d bytes\n",
           (unsigned long long)n, VAL_LEN, 11 + VAL_LEN);
    for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++) {
        uint64_t d = ds[di];
        if (d > n)
            break;
        for (uint64_t i = 0; i < d; i++) {
            uint64_t key = (i * 7919) % n;
            key_of(k, sizeof k, key);
            value_of(v, key, 10 + di);
            sl_store_msg_t m;
            die("put", sl_store_put(b, k, strlen(k), v, VAL_LEN, 5000 + di, &m));
            sl_store_msg_fini(&m);
        }
        double t0 = now_s();
        size_t bytes = reconcile(a, b);
        double t = now_s() - t0;
        double payload = (double)d * (11 + VAL_LEN);
        printf("sync   d=%-7llu bytes %-10zu payload %-9.0f ratio %-6.3f beyond payload %.1f B/key"
               "  %.3f s\n", (unsigned long long)d, bytes, payload, d ? (double)bytes / payload : 0.0,
               d ? ((double)bytes - payload) / (double)d : 0.0, t);
        if (sl_store_state_hash(a) != sl_store_state_hash(b))
            printf("sync   ERROR: replicas differ\n");
    }
    sl_store_destroy(&a);
    sl_store_destroy(&b);
}

static void bench_memory(uint64_t n) {
    long before = rss_kb();
    sl_store_t *s = mk(1);
    fill(s, n, 1, NULL); /* local writes: the same records remote deltas make */
    long after = rss_kb();
    sl_store_stats_t st;
    sl_store_stats(s, &st);
    double raw = (double)n * (11 + VAL_LEN);
    printf("memory %llu keys: raw keys+values %.1f MB\n", (unsigned long long)n, raw / 1e6);
    printf("memory store allocations %.1f MB (%.2f x raw), %.1f bytes per key beyond raw\n",
           (double)st.mem_bytes / 1e6, (double)st.mem_bytes / raw,
           ((double)st.mem_bytes - raw) / (double)n);
    printf("memory resident growth %.1f MB (%.2f x raw)\n", (double)(after - before) * 1024 / 1e6,
           (double)(after - before) * 1024 / raw);
    printf("memory per key: record 32 B (CRDT metadata: hlc 8 + dot 8 + type/flags 2 = 18 B;"
           " arena offset 8, lengths 6), index %.1f B, arena slack %.1f B\n",
           8.0 * (double)(1u << 21) / (double)n,
           (double)(st.arena_bytes + st.arena_garbage - raw) / (double)n);
    sl_store_destroy(&s);
}

static sl_err replay(void *ctx, uint8_t type, const uint8_t *body, size_t len) {
    return sl_store_replay(ctx, type, body, len);
}

static void bench_restart(uint64_t n, const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return;
    sl_disk_t *d;
    sl_store_t *s = mk(100);
    die("open", sl_disk_open(dir, &d));
    die("recover", sl_disk_recover(d, replay, s));
    fill(s, n, 1, NULL);
    sl_store_msg_t snap;
    die("snapshot", sl_store_snapshot(s, &snap));
    die("disk snapshot", sl_disk_snapshot(d, snap.type, snap.body, snap.len));
    printf("restart snapshot of %llu keys: %.1f MB\n", (unsigned long long)n, (double)snap.len / 1e6);
    sl_store_msg_fini(&snap);
    uint64_t tail = n / 10;
    char k[32];
    uint8_t v[VAL_LEN];
    for (uint64_t i = 0; i < tail; i++) {
        key_of(k, sizeof k, i * 3 % n);
        value_of(v, i, 9);
        sl_store_msg_t m;
        die("put", sl_store_put(s, k, strlen(k), v, VAL_LEN, 3000, &m));
        die("append", sl_disk_append(d, m.type, m.body, m.len));
        sl_store_msg_fini(&m);
        if (i % 1000 == 999)
            die("sync", sl_disk_sync(d));
    }
    die("sync", sl_disk_sync(d));
    uint64_t h = sl_store_state_hash(s);
    sl_store_destroy(&s);
    sl_disk_close(&d);
    double t0 = now_s(), c0 = cpu_s();
    die("open", sl_disk_open(dir, &d));
    s = mk(101);
    die("recover", sl_disk_recover(d, replay, s));
    double t = now_s() - t0, c = cpu_s() - c0;
    printf("restart %llu keys (snapshot + %llu WAL records): wall %.3f s, CPU %.3f s%s\n",
           (unsigned long long)n, (unsigned long long)tail, t, c,
           sl_store_state_hash(s) == h ? "" : " ERROR: state differs");
    sl_store_destroy(&s);
    sl_disk_close(&d);
    if (system(cmd) != 0)
        return;
}

int main(int argc, char **argv) {
    sl_log_set_level(SL_LOG_ERR);
    const char *mode = argc > 1 ? argv[1] : "all";
    uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000;
    const char *dir = argc > 3 ? argv[3] : "/tmp/sl-bench-store";
    bool all = strcmp(mode, "all") == 0;
    if (all || strcmp(mode, "merge") == 0)
        bench_merge(n);
    if (all || strcmp(mode, "sync") == 0)
        bench_sync(n);
    if (all || strcmp(mode, "memory") == 0)
        bench_memory(n);
    if (all || strcmp(mode, "restart") == 0)
        bench_restart(n, dir);
    return 0;
}
