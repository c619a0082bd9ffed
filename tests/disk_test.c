/* The store's disk: WAL recovery after a cut at every byte offset, corrupt
 * records and snapshots refused and counted without losing what came
 * before, group commit, atomic snapshots, incarnations, blob chunks, and a
 * store that restarts from its disk to the same state. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "starling/disk.h"
#include "starling/store.h"
#include "starling/platform.h"
#include "testlib.h"

static char base[256];

static void fresh(char *dir, size_t n, const char *name) {
    snprintf(dir, n, "%s/%s", base, name);
    sl_plat_remove_tree(dir);
}

typedef struct {
    int count;           /* records seen */
    uint8_t types[4096]; /* their types */
    size_t lens[4096];   /* their lengths */
    uint8_t first[4096]; /* their first byte (or 0) */
} seen_t;

static sl_err collect(void *ctx, uint8_t type, const uint8_t *body, size_t len) {
    seen_t *s = ctx;
    if (s->count < 4096) {
        s->types[s->count] = type;
        s->lens[s->count] = len;
        s->first[s->count] = len ? body[0] : 0;
    }
    s->count++;
    return SL_OK;
}

static void write_file(const char *path, const uint8_t *p, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    if (len)
        CHECK(fwrite(p, 1, len, f) == len);
    fclose(f);
}

#define NREC 24
static size_t rec_len(int i) { return (size_t)(i * 7) % 61; }

static void test_basic_and_incarnation(void) {
    char dir[300];
    fresh(dir, sizeof dir, "basic");
    sl_disk_t *d;
    CHECK_OK(sl_disk_open(dir, &d));
    CHECK_INT(sl_disk_incarnation(d), 1);
    seen_t s = {0};
    CHECK_ERR(sl_disk_append(d, 17, "x", 1), SL_ESTATE); /* recover first */
    CHECK_OK(sl_disk_recover(d, collect, &s));
    CHECK_INT(s.count, 0);
    for (int i = 0; i < 10; i++)
        CHECK_OK(sl_disk_append(d, 17, "abc", 3));
    CHECK_OK(sl_disk_sync(d)); /* one group commit for ten records */
    sl_disk_stats_t st;
    sl_disk_stats(d, &st);
    CHECK_INT(st.syncs, 1);
    CHECK_OK(sl_disk_append(d, 17, "lost", 4)); /* never synced */
    sl_disk_close(&d);
    CHECK_OK(sl_disk_open(dir, &d));
    CHECK_INT(sl_disk_incarnation(d), 2);
    memset(&s, 0, sizeof s);
    CHECK_OK(sl_disk_recover(d, collect, &s));
    CHECK_INT(s.count, 10);
    sl_disk_close(&d);
    /* a corrupt incarnation file: refuse to start rather than reuse dots */
    char p[400];
    snprintf(p, sizeof p, "%s/incarnation", dir);
    write_file(p, (const uint8_t *)"garbage!garbage!", 12);
    CHECK_ERR(sl_disk_open(dir, &d), SL_ECORRUPT);
    CHECK(d == NULL);
}

/* The WAL cut at every byte offset recovers exactly the records that fit,
 * in order, and the log then takes new records. */
static void test_cut_every_offset(void) {
    char dir[300], p[400];
    fresh(dir, sizeof dir, "cut-src");
    sl_disk_t *d;
    CHECK_OK(sl_disk_open(dir, &d));
    seen_t s = {0};
    CHECK_OK(sl_disk_recover(d, collect, &s));
    uint8_t body[64];
    size_t ends[NREC];
    size_t off = 8;
    for (int i = 0; i < NREC; i++) {
        memset(body, i + 1, sizeof body);
        CHECK_OK(sl_disk_append(d, (uint8_t)(16 + i % 3), body, rec_len(i)));
        CHECK_OK(sl_disk_sync(d)); /* acknowledged */
        off += 9 + rec_len(i);
        ends[i] = off;
    }
    sl_disk_close(&d);
    snprintf(p, sizeof p, "%s/wal", dir);
    size_t len;
    uint8_t *wal = sl_test_read_file(p, &len);
    CHECK(wal && len == ends[NREC - 1]);
    if (!wal)
        return;
    char cdir[300];
    for (size_t k = 0; k <= len; k++) {
        fresh(cdir, sizeof cdir, "cut");
        mkdir(cdir, 0700);
        snprintf(p, sizeof p, "%s/wal", cdir);
        write_file(p, wal, k);
        CHECK_OK(sl_disk_open(cdir, &d));
        memset(&s, 0, sizeof s);
        CHECK_OK(sl_disk_recover(d, collect, &s));
        int want = 0;
        while (want < NREC && ends[want] <= k)
            want++;
        CHECK_MSG(s.count == want, "cut at %zu: %d records, want %d", k, s.count, want);
        for (int i = 0; i < s.count && i < NREC; i++)
            CHECK_MSG(s.lens[i] == rec_len(i) && s.types[i] == 16 + i % 3 &&
                          (s.lens[i] == 0 || s.first[i] == i + 1),
                      "cut at %zu: record %d differs", k, i);
        sl_disk_stats_t st;
        sl_disk_stats(d, &st);
        bool clean = k == (want ? ends[want - 1] : 8) || k == 0;
        CHECK_MSG(clean ? st.torn == 0 : st.torn == 1, "cut at %zu: torn=%d", k, (int)st.torn);
        CHECK_INT(st.corrupt, 0);
        /* the log takes new records after the cut */
        CHECK_OK(sl_disk_append(d, 30, "new", 3));
        CHECK_OK(sl_disk_sync(d));
        sl_disk_close(&d);
        CHECK_OK(sl_disk_open(cdir, &d));
        memset(&s, 0, sizeof s);
        CHECK_OK(sl_disk_recover(d, collect, &s));
        CHECK_MSG(s.count == want + 1 && s.types[want] == 30, "cut at %zu: append after cut", k);
        sl_disk_close(&d);
        if (sl_test_failures)
            break;
    }
    free(wal);
}

static void test_corrupt_record_and_snapshot(void) {
    char dir[300], p[400];
    fresh(dir, sizeof dir, "corrupt");
    sl_disk_t *d;
    seen_t s = {0};
    CHECK_OK(sl_disk_open(dir, &d));
    CHECK_OK(sl_disk_recover(d, collect, &s));
    CHECK_OK(sl_disk_snapshot(d, 18, "SNAPSHOT-BODY", 13));
    for (int i = 0; i < 10; i++)
        CHECK_OK(sl_disk_append(d, 17, "0123456789", 10));
    CHECK_OK(sl_disk_sync(d));
    sl_disk_close(&d);
    /* flip one byte in record 5's body */
    snprintf(p, sizeof p, "%s/wal", dir);
    size_t len;
    uint8_t *wal = sl_test_read_file(p, &len);
    CHECK(wal != NULL);
    wal[8 + 5 * 19 + 9 + 3] ^= 0x40;
    write_file(p, wal, len);
    CHECK_OK(sl_disk_open(dir, &d));
    memset(&s, 0, sizeof s);
    CHECK_OK(sl_disk_recover(d, collect, &s));
    CHECK_INT(s.count, 6); /* the snapshot and the five records before */
    CHECK_INT(s.types[0], 18);
    sl_disk_stats_t st;
    sl_disk_stats(d, &st);
    CHECK_INT(st.corrupt, 1);
    CHECK_INT(st.snapshot_loaded, 1);
    CHECK_INT(st.bytes_cut, len - (8 + 5 * 19));
    sl_disk_close(&d);
    /* the cut bytes are kept, not deleted */
    DIR *dd = opendir(dir);
    int tails = 0;
    struct dirent *e;
    while (dd && (e = readdir(dd)))
        tails += strncmp(e->d_name, "wal.tail.", 9) == 0;
    if (dd)
        closedir(dd);
    CHECK_INT(tails, 1);
    free(wal);
    /* a corrupt snapshot: refused, counted, moved aside; the log still replays */
    snprintf(p, sizeof p, "%s/snapshot", dir);
    uint8_t *snap = sl_test_read_file(p, &len);
    CHECK(snap != NULL);
    snap[len - 2] ^= 1;
    write_file(p, snap, len);
    free(snap);
    CHECK_OK(sl_disk_open(dir, &d));
    memset(&s, 0, sizeof s);
    CHECK_OK(sl_disk_recover(d, collect, &s));
    CHECK_INT(s.count, 5);
    sl_disk_stats(d, &st);
    CHECK_INT(st.snapshot_rejected, 1);
    CHECK_INT(st.snapshot_loaded, 0);
    sl_disk_close(&d);
    CHECK(access(p, F_OK) != 0);
}

static sl_err to_store(void *ctx, uint8_t type, const uint8_t *body, size_t len) {
    return sl_store_replay(ctx, type, body, len);
}

/* A store with its disk restarts to the same state, as a new incarnation. */
static void test_store_restart(void) {
    char dir[300];
    fresh(dir, sizeof dir, "store");
    sl_disk_t *d;
    sl_store_t *s;
    CHECK_OK(sl_disk_open(dir, &d));
    CHECK_OK(sl_store_new(1000 + sl_disk_incarnation(d), NULL, &s));
    CHECK_OK(sl_disk_recover(d, to_store, s));
    sl_store_msg_t m;
    for (int i = 0; i < 2000; i++) {
        char k[32];
        snprintf(k, sizeof k, "key/%d", i % 500);
        CHECK_OK(sl_store_put(s, k, strlen(k), k, strlen(k), 1000 + (uint64_t)i, &m));
        CHECK_OK(sl_disk_append(d, m.type, m.body, m.len));
        sl_store_msg_fini(&m);
        if (i == 1000) {
            CHECK_OK(sl_store_snapshot(s, &m));
            CHECK_OK(sl_disk_snapshot(d, m.type, m.body, m.len));
            sl_store_msg_fini(&m);
        }
        if (i % 64 == 0)
            CHECK_OK(sl_disk_sync(d));
    }
    CHECK_OK(sl_disk_sync(d));
    uint64_t h = sl_store_state_hash(s);
    sl_store_destroy(&s);
    sl_disk_close(&d);
    CHECK_OK(sl_disk_open(dir, &d));
    CHECK_INT(sl_disk_incarnation(d), 2);
    CHECK_OK(sl_store_new(1000 + sl_disk_incarnation(d), NULL, &s));
    CHECK_OK(sl_disk_recover(d, to_store, s));
    CHECK_INT(sl_store_state_hash(s), h);
    CHECK_INT(sl_store_vv_get(s, 1001), 2000);
    CHECK_OK(sl_store_put(s, "after", 5, "x", 1, 5000, &m)); /* a new dot, new replica */
    sl_store_dmsg_t dm;
    CHECK_OK(sl_store_msg_decode(m.type, m.body, m.len, &dm));
    CHECK_INT(dm.items[0].it.dot.rid, 1002);
    CHECK_INT(dm.items[0].it.dot.seq, 1);
    sl_store_dmsg_fini(&dm);
    sl_store_msg_fini(&m);
    CHECK_OK(sl_store_check(s));
    sl_store_destroy(&s);
    sl_disk_close(&d);
}

static void test_chunks(void) {
    char dir[300];
    fresh(dir, sizeof dir, "chunks");
    sl_disk_t *d;
    CHECK_OK(sl_disk_open(dir, &d));
    const char *hex = "0123abcd";
    CHECK_OK(sl_disk_chunk_put(d, hex, "payload", 7));
    CHECK_OK(sl_disk_chunk_put(d, hex, "payload", 7));
    uint8_t *data;
    size_t len;
    CHECK_OK(sl_disk_chunk_get(d, hex, &data, &len));
    CHECK(len == 7 && memcmp(data, "payload", 7) == 0);
    sl_free(data);
    /* a damaged copy of the same size (here: other bytes under this name)
       is replaced by the next put, not taken for the good one */
    CHECK_OK(sl_disk_chunk_put(d, "4567ef01", "damaged", 7));
    CHECK_OK(sl_disk_chunk_put(d, "4567ef01", "payload", 7));
    CHECK_OK(sl_disk_chunk_get(d, "4567ef01", &data, &len));
    CHECK(len == 7 && memcmp(data, "payload", 7) == 0);
    sl_free(data);
    CHECK_ERR(sl_disk_chunk_get(d, "ffff0000", &data, &len), SL_ENOTFOUND);
    CHECK_ERR(sl_disk_chunk_put(d, "../../x", "a", 1), SL_EINVAL);
    CHECK_OK(sl_disk_chunk_del(d, hex));
    CHECK_ERR(sl_disk_chunk_get(d, hex, &data, &len), SL_ENOTFOUND);
    sl_disk_close(&d);
}

int main(void) {
    sl_log_set_level(SL_LOG_ERR - 1); /* the corruption tests log on purpose */
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(base, sizeof base, "%s/sl-disk-test-%d", tmp, (int)getpid());
    mkdir(base, 0700);
    sl_test_run("basic_and_incarnation", test_basic_and_incarnation);
    sl_test_run("cut_every_offset", test_cut_every_offset);
    sl_test_run("corrupt_record_and_snapshot", test_corrupt_record_and_snapshot);
    sl_test_run("store_restart", test_store_restart);
    sl_test_run("chunks", test_chunks);
    sl_plat_remove_tree(base);
    return sl_test_finish();
}
