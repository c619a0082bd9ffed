/* Issue 12 item 3: a full disk. Through disk.c's fault switch (writes to
 * one directory fail with ENOSPC after half their bytes, as a full disk
 * does): a failed write leaves no partial record in the log and nothing
 * more queues while the disk is down; the disk is used again without a
 * reopen once it takes writes; a peer whose disk is full neither applies
 * nor queues what other peers send it, refuses local writes before they
 * touch its replica, and catches up by itself when the disk is back.
 *
 * On the code before the fix the log grew by every retried partial write
 * (1 MB -> 268 MB), the write queue and the replica grew with every
 * received delta (RSS 874 MB in 4 s), and nothing put the disk back in use. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "starling/disk.h"
#include "starling/peer.h"
#include "starling/platform.h"
#include "starling/store.h"
#include "starling/store_node.h"
#include "testlib.h"

/* disk.c's test switch (not in a public header) */
void sl_disk_test_full(const char *dir);

#define DEADLINE_MS 20000

static char tmpdir[256];

static uint64_t ms_since(uint64_t t0) { return (sl_plat_now_ns() - t0) / 1000000ull; }

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static sl_err count(void *ctx, uint8_t type, const uint8_t *body, size_t len) {
    (void)type;
    (void)body;
    (void)len;
    (*(int *)ctx)++;
    return SL_OK;
}

/* The disk alone: a failed sync cuts its partial write back, appends are
 * refused while down (nothing queues), retries fail without growing the
 * log, and once the disk takes writes the queued records go in whole. */
static void test_disk_down_and_up(void) {
    char dir[300], wal[400];
    snprintf(dir, sizeof dir, "%s/disk", tmpdir);
    snprintf(wal, sizeof wal, "%s/wal", dir);
    sl_disk_t *d;
    int n = 0;
    CHECK_OK(sl_disk_open(dir, &d));
    CHECK_OK(sl_disk_recover(d, count, &n));
    char body[1000];
    memset(body, 'v', sizeof body);
    for (int i = 0; i < 10; i++)
        CHECK_OK(sl_disk_append(d, 17, body, sizeof body));
    CHECK_OK(sl_disk_sync(d));
    long before = file_size(wal);
    sl_disk_test_full(dir);
    for (int i = 0; i < 5; i++)
        CHECK_OK(sl_disk_append(d, 17, body, sizeof body));
    CHECK_ERR(sl_disk_sync(d), SL_EIO);
    CHECK(sl_disk_down(d));
    CHECK_INT(file_size(wal), before); /* the half-written records are gone */
    /* down: nothing more queues, whatever is asked */
    sl_disk_stats_t st;
    sl_disk_stats(d, &st);
    uint64_t queued = st.queued_bytes;
    for (int i = 0; i < 1000; i++)
        CHECK_ERR(sl_disk_append(d, 17, body, sizeof body), SL_EIO);
    for (int i = 0; i < 50; i++)
        CHECK_ERR(sl_disk_retry(d), SL_EIO);
    sl_disk_stats(d, &st);
    CHECK_INT(st.queued_bytes, queued);
    CHECK_INT(file_size(wal), before); /* retries do not grow the log */
    CHECK(st.down == 1 && st.write_failures >= 51);
    /* the disk takes writes again: up without a reopen */
    sl_disk_test_full(NULL);
    CHECK_OK(sl_disk_retry(d));
    CHECK(!sl_disk_down(d));
    CHECK_OK(sl_disk_append(d, 17, body, sizeof body));
    CHECK_OK(sl_disk_sync(d));
    /* a probe when nothing is queued */
    sl_disk_test_full(dir);
    CHECK_OK(sl_disk_append(d, 17, body, sizeof body));
    CHECK_ERR(sl_disk_sync(d), SL_EIO);
    sl_disk_test_full(NULL);
    CHECK_OK(sl_disk_retry(d)); /* the queued one */
    sl_disk_close(&d);
    CHECK_OK(sl_disk_open(dir, &d));
    n = 0;
    CHECK_OK(sl_disk_recover(d, count, &n));
    CHECK_INT(n, 10 + 5 + 1 + 1); /* every record, none twice, no garbage */
    sl_disk_stats(d, &st);
    CHECK_INT(st.corrupt + st.torn, 0);
    /* a snapshot on a full disk fails and leaves the old files in place */
    sl_disk_test_full(dir);
    CHECK_ERR(sl_disk_snapshot(d, 18, body, sizeof body), SL_EIO);
    sl_disk_test_full(NULL);
    CHECK_OK(sl_disk_append(d, 17, "x", 1));
    CHECK_OK(sl_disk_sync(d));
    sl_disk_close(&d);
    CHECK_OK(sl_disk_open(dir, &d));
    n = 0;
    CHECK_OK(sl_disk_recover(d, count, &n));
    CHECK_INT(n, 18);
    sl_disk_close(&d);
}

typedef struct {
    sl_node_t *node;        /* the loop */
    sl_store_node_t *store; /* the store module */
    char sdir[600];         /* its store directory */
} peer_t;

static void start(peer_t *p, const char *name, const char *seed) {
    char data[512];
    snprintf(data, sizeof data, "%s/%s", tmpdir, name);
    snprintf(p->sdir, sizeof p->sdir, "%s/%s-store", tmpdir, name);
    const char *seeds[1] = {seed};
    sl_node_config_t cfg = {.name = name, .listen = "tcp://127.0.0.1:0", .data_dir = data,
                            .seeds = seeds, .seed_count = seed ? 1 : 0, .leave_wait_ms = 100};
    sl_test_swim_timing(&cfg.swim);
    CHECK_OK(sl_node_new(&cfg, &p->node));
    sl_store_node_config_t scfg = {.dir = p->sdir, .sync_ms = 50, .idle_ms = 200};
    if (p->node)
        CHECK_OK(sl_store_node_attach(p->node, &scfg, &p->store));
}

static void stop(peer_t *p) {
    sl_node_destroy(&p->node);
    sl_store_node_destroy(&p->store);
}

static void step(peer_t *ps, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ps[i].node)
            sl_node_step(ps[i].node, 1);
}

static bool has(peer_t *p, const char *key) {
    const uint8_t *v;
    size_t n;
    return sl_store_get(sl_store_node_store(p->store), key, strlen(key), &v, &n) == SL_OK;
}

static uint64_t keys_of(peer_t *p) {
    sl_store_stats_t st;
    sl_store_stats(sl_store_node_store(p->store), &st);
    return st.keys;
}

#define WAIT_FOR(cond)                                                                             \
    do {                                                                                           \
        uint64_t t0_ = sl_plat_now_ns();                                                           \
        while (!(cond) && ms_since(t0_) < DEADLINE_MS)                                             \
            step(ps, 2);                                                                           \
        CHECK_MSG(cond, "timed out waiting for %s", #cond);                                        \
    } while (0)

#define NKEYS 300

static bool has_all(peer_t *p) {
    char k[32];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(k, sizeof k, "a/%d", i);
        if (!has(p, k))
            return false;
    }
    return true;
}

/* Two peers; B's disk fills. A's writes reach B and are neither applied
 * nor queued there; B refuses its own writes before they touch its
 * replica; the disk back, B takes writes again and catches up without a
 * restart, and a restart finds every write B acknowledged. */
static void test_peer_full_disk(void) {
    peer_t ps[2] = {{0}};
    start(&ps[0], "a", NULL);
    if (!ps[0].node)
        return;
    start(&ps[1], "b", sl_node_addr(ps[0].node));
    if (!ps[1].node) {
        stop(&ps[0]);
        return;
    }
    CHECK_OK(sl_store_node_put(ps[0].store, "hello", 5, "1", 1));
    WAIT_FOR(has(&ps[1], "hello"));
    CHECK_OK(sl_store_node_put(ps[1].store, "b/0", 3, "1", 1));
    char wal[700];
    snprintf(wal, sizeof wal, "%s/wal", ps[1].sdir);
    long wal_before = file_size(wal);
    uint64_t keys_before = keys_of(&ps[1]);

    sl_disk_test_full(ps[1].sdir);
    /* the write that finds the disk full is refused */
    CHECK_ERR(sl_store_node_put(ps[1].store, "b/1", 3, "1", 1), SL_EIO);
    /* and every one after it, before it touches the replica */
    for (int i = 0; i < 1000; i++)
        CHECK_ERR(sl_store_node_put(ps[1].store, "b/2", 3, "1", 1), SL_EIO);
    CHECK(!has(&ps[1], "b/2"));
    /* A writes 300 keys of 1 KiB: B gets them and does not apply them */
    char val[1024];
    memset(val, 'a', sizeof val);
    for (int i = 0; i < NKEYS; i++) {
        char k[32];
        snprintf(k, sizeof k, "a/%d", i);
        CHECK_OK(sl_store_node_put(ps[0].store, k, strlen(k), val, sizeof val));
    }
    uint64_t t0 = sl_plat_now_ns();
    bool applied = false;
    while (ms_since(t0) < 2000 && !applied) {
        step(ps, 2);
        applied = has(&ps[1], "a/0") || has(&ps[1], "a/299");
    }
    CHECK_MSG(!applied, "b applied a received delta while its disk was full");
    CHECK_MSG(keys_of(&ps[1]) <= keys_before + 1, "b's replica grew from %llu to %llu keys",
              (unsigned long long)keys_before, (unsigned long long)keys_of(&ps[1]));
    long wal_full = file_size(wal);
    CHECK_MSG(wal_full == wal_before, "b's log changed from %ld to %ld bytes on a full disk",
              wal_before, wal_full);

    /* space returns: B takes writes again, without a restart */
    sl_disk_test_full(NULL);
    WAIT_FOR(sl_store_node_put(ps[1].store, "b/3", 3, "1", 1) == SL_OK);
    WAIT_FOR(has_all(&ps[1]));
    WAIT_FOR(sl_store_state_hash(sl_store_node_store(ps[0].store)) ==
             sl_store_state_hash(sl_store_node_store(ps[1].store)));
    CHECK(has(&ps[0], "b/3"));
    /* the log grew by what B took after the disk came back, not by itself */
    long wal_after = file_size(wal);
    CHECK_MSG(wal_after < wal_before + 4 * NKEYS * 1100, "b's log is %ld bytes", wal_after);
    /* a restart finds every write B acknowledged, and a clean log */
    stop(&ps[1]);
    start(&ps[1], "b", sl_node_addr(ps[0].node));
    if (ps[1].node) {
        CHECK(has(&ps[1], "b/0") && has(&ps[1], "b/3") && has_all(&ps[1]));
    }
    stop(&ps[1]);
    stop(&ps[0]);
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR - 1); /* the disk logs its failures on purpose */
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/sl-disk-full-%d", tmp, (int)getpid());
    mkdir(tmpdir, 0700);
    sl_test_run("disk_down_and_up", test_disk_down_and_up);
    sl_test_run("peer_full_disk", test_peer_full_disk);
    sl_plat_remove_tree(tmpdir);
    return sl_test_finish();
}
