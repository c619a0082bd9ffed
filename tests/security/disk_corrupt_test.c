/* Issue 12 item 11: one flipped byte on a lone peer's disk. A store (the
 * daemon's store module on one peer, snapshot every 1,000 records) takes
 * 2,500 writes, so its directory holds two snapshots and a log of 500
 * records; then one byte is flipped:
 *   - in a record of the log: recovery skips that record and replays the
 *     499 after it: every write but one comes back (2,499 keys);
 *   - in the newest snapshot: recovery loads the one before it and
 *     replays both logs after it: all 2,500 keys come back.
 * On the code before the fix the log was cut at the bad record (2,250
 * keys) and a bad snapshot was dropped with everything it held (500 keys;
 * the campaign: 1,100,075 keys lost). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "starling/peer.h"
#include "starling/platform.h"
#include "starling/store.h"
#include "starling/store_node.h"
#include "testlib.h"

#define NKEYS 2500

static char tmpdir[256];

typedef struct {
    sl_node_t *node;        /* the loop */
    sl_store_node_t *store; /* the store module */
} peer_t;

static void start(peer_t *p, const char *name) {
    char data[512], sdir[600];
    snprintf(data, sizeof data, "%s/%s", tmpdir, name);
    snprintf(sdir, sizeof sdir, "%s/%s-store", tmpdir, name);
    sl_node_config_t cfg = {.name = name, .listen = "tcp://127.0.0.1:0", .data_dir = data};
    sl_test_swim_timing(&cfg.swim);
    CHECK_OK(sl_node_new(&cfg, &p->node));
    sl_store_node_config_t scfg = {.dir = sdir, .snapshot_records = 1000};
    p->store = NULL;
    if (p->node)
        CHECK_OK(sl_store_node_attach(p->node, &scfg, &p->store));
}

static void stop(peer_t *p) {
    sl_node_destroy(&p->node);
    sl_store_node_destroy(&p->store);
}

static uint64_t keys_of(peer_t *p) {
    sl_store_stats_t st;
    sl_store_stats(sl_store_node_store(p->store), &st);
    return st.keys;
}

/* A lone peer `name` that took NKEYS writes, stopped. */
static void fill(const char *name) {
    peer_t p;
    start(&p, name);
    if (!p.store)
        return;
    for (int i = 0; i < NKEYS; i++) {
        char k[32], v[64];
        snprintf(k, sizeof k, "key/%05d", i);
        snprintf(v, sizeof v, "value of key %d, some bytes to flip", i);
        CHECK_OK(sl_store_node_put(p.store, k, strlen(k), v, strlen(v)));
    }
    CHECK_INT(keys_of(&p), NKEYS);
    stop(&p);
}

/* Flips one byte of `file` in the store of `name`, `at` (0..1) of its way in. */
static void flip(const char *name, const char *file, double at) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s-store/%s", tmpdir, name, file);
    size_t len;
    uint8_t *b = sl_test_read_file(path, &len);
    CHECK(b != NULL && len > 100);
    if (!b || len <= 100)
        return;
    b[(size_t)((double)len * at)] ^= 0x20;
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK(fwrite(b, 1, len, f) == len);
        fclose(f);
    }
    free(b);
}

static uint64_t keys_after_restart(const char *name) {
    peer_t p;
    start(&p, name);
    uint64_t n = p.store ? keys_of(&p) : 0;
    if (p.store)
        CHECK_OK(sl_store_check(sl_store_node_store(p.store)));
    stop(&p);
    return n;
}

static void test_flipped_wal_byte(void) {
    fill("wal");
    flip("wal", "wal", 0.5);
    uint64_t n = keys_after_restart("wal");
    CHECK_MSG(n == NKEYS - 1, "one flipped byte in the log: %llu of %d keys",
              (unsigned long long)n, NKEYS);
}

static void test_flipped_snapshot_byte(void) {
    fill("snap");
    flip("snap", "snapshot", 0.5);
    uint64_t n = keys_after_restart("snap");
    CHECK_MSG(n == NKEYS, "one flipped byte in the snapshot: %llu of %d keys",
              (unsigned long long)n, NKEYS);
    /* and the store goes on from there: a write, a restart, all of them */
    peer_t p;
    start(&p, "snap");
    if (p.store)
        CHECK_OK(sl_store_node_put(p.store, "after", 5, "x", 1));
    stop(&p);
    CHECK_INT(keys_after_restart("snap"), NKEYS + 1);
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR - 1); /* the damage is logged on purpose */
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/sl-disk-corrupt-%d", tmp, (int)getpid());
    mkdir(tmpdir, 0700);
    sl_test_run("flipped_wal_byte", test_flipped_wal_byte);
    sl_test_run("flipped_snapshot_byte", test_flipped_snapshot_byte);
    sl_plat_remove_tree(tmpdir);
    return sl_test_finish();
}
