/* The store's disk: WAL recovery after a cut at every byte offset, a
 * corrupt record skipped (the records after it kept), a corrupt snapshot
 * refused for the one before it, group commit, the identity file (random
 * id, incarnation, two slots), a directory of format 1 read and upgraded,
 * blob chunks, and a store that restarts from its disk to the same state. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "starling/disk.h"
#include "starling/hash.h"
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

#define WAL_HDR 20 /* magic, generation, CRC */
#define REC_HDR 13 /* magic, length, CRC, type */
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
    uint8_t id[SL_DISK_ID_LEN];
    memcpy(id, sl_disk_id(d), sizeof id);
    sl_disk_close(&d);
    CHECK_OK(sl_disk_open(dir, &d));
    CHECK_INT(sl_disk_incarnation(d), 2);
    CHECK(memcmp(id, sl_disk_id(d), sizeof id) == 0); /* the directory's id stays */
    memset(&s, 0, sizeof s);
    CHECK_OK(sl_disk_recover(d, collect, &s));
    CHECK_INT(s.count, 10);
    sl_disk_close(&d);
    /* another directory: another id (random, not a function of anything) */
    char other[300];
    fresh(other, sizeof other, "basic-other");
    CHECK_OK(sl_disk_open(other, &d));
    CHECK(memcmp(id, sl_disk_id(d), sizeof id) != 0);
    CHECK_INT(sl_disk_incarnation(d), 1);
    sl_disk_close(&d);
    /* one slot of the identity file torn: the other holds it */
    char p[400];
    snprintf(p, sizeof p, "%s/replica", dir);
    size_t len;
    uint8_t *rep = sl_test_read_file(p, &len);
    CHECK(rep && len == 1024);
    if (!rep)
        return;
    int newest = rep[4] > rep[512 + 4] ? 0 : 1; /* seq, low byte */
    memset(rep + 512 * newest, 0x55, 40);
    write_file(p, rep, len);
    CHECK_OK(sl_disk_open(dir, &d));
    CHECK_INT(sl_disk_incarnation(d), 2); /* the older slot said 1: 1 + 1 */
    CHECK(memcmp(id, sl_disk_id(d), sizeof id) == 0);
    sl_disk_close(&d);
    /* both slots corrupt: refuse to start rather than reuse dots */
    memset(rep, 0x55, len);
    write_file(p, rep, len);
    free(rep);
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
    size_t off = WAL_HDR;
    for (int i = 0; i < NREC; i++) {
        memset(body, i + 1, sizeof body);
        CHECK_OK(sl_disk_append(d, (uint8_t)(16 + i % 3), body, rec_len(i)));
        CHECK_OK(sl_disk_sync(d)); /* acknowledged */
        off += REC_HDR + rec_len(i);
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
        bool clean = k == (want ? ends[want - 1] : WAL_HDR) || k == 0;
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

/* One flipped byte in a record's body, and one in another's length: each
 * costs its record; every record after them is replayed. */
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
    /* flip one byte in record 5's body, and one in record 7's length */
    snprintf(p, sizeof p, "%s/wal", dir);
    size_t len;
    uint8_t *wal = sl_test_read_file(p, &len);
    CHECK(wal != NULL && len == WAL_HDR + 10 * 23);
    if (!wal)
        return;
    wal[WAL_HDR + 5 * 23 + REC_HDR + 3] ^= 0x40;
    wal[WAL_HDR + 7 * 23 + 4] ^= 0x08;
    write_file(p, wal, len);
    CHECK_OK(sl_disk_open(dir, &d));
    memset(&s, 0, sizeof s);
    CHECK_OK(sl_disk_recover(d, collect, &s));
    CHECK_INT(s.count, 9); /* the snapshot and the 8 good records: 2 lost, not 5 */
    CHECK_INT(s.types[0], 18);
    sl_disk_stats_t st;
    sl_disk_stats(d, &st);
    CHECK_INT(st.corrupt, 2);
    CHECK_INT(st.skipped, 2);
    CHECK_INT(st.bytes_skipped, 2 * 23);
    CHECK_INT(st.snapshot_loaded, 1);
    CHECK_INT(st.bytes_cut, 0);
    /* the log takes records after them, and they are read back too */
    CHECK_OK(sl_disk_append(d, 17, "after", 5));
    CHECK_OK(sl_disk_sync(d));
    sl_disk_close(&d);
    CHECK_OK(sl_disk_open(dir, &d));
    memset(&s, 0, sizeof s);
    CHECK_OK(sl_disk_recover(d, collect, &s));
    CHECK_INT(s.count, 10);
    CHECK(s.lens[9] == 5);
    sl_disk_close(&d);
    /* garbage (not zeros) at the end, as a bad disk writes: cut and kept */
    free(wal);
    uint8_t *cur = sl_test_read_file(p, &len);
    wal = cur ? malloc(len + 40) : NULL;
    CHECK(wal != NULL);
    if (!wal) {
        free(cur);
        return;
    }
    memcpy(wal, cur, len);
    free(cur);
    memset(wal + len, 0xa7, 40);
    write_file(p, wal, len + 40);
    CHECK_OK(sl_disk_open(dir, &d));
    memset(&s, 0, sizeof s);
    CHECK_OK(sl_disk_recover(d, collect, &s));
    CHECK_INT(s.count, 10);
    sl_disk_stats(d, &st);
    CHECK_INT(st.bytes_cut, 40);
    sl_disk_close(&d);
    DIR *dd = opendir(dir);
    int tails = 0;
    struct dirent *e;
    while (dd && (e = readdir(dd)))
        tails += strncmp(e->d_name, "wal.tail.", 9) == 0;
    if (dd)
        closedir(dd);
    CHECK_INT(tails, 1);
    free(wal);
    /* a flipped byte in the log's header (its generation): the records
       after it are all replayed, and the header written again */
    cur = sl_test_read_file(p, &len);
    CHECK(cur != NULL);
    if (!cur)
        return;
    cur[9] ^= 0x01;
    write_file(p, cur, len);
    free(cur);
    for (int round = 0; round < 2; round++) {
        CHECK_OK(sl_disk_open(dir, &d));
        memset(&s, 0, sizeof s);
        CHECK_OK(sl_disk_recover(d, collect, &s));
        CHECK_INT(s.count, 10);
        sl_disk_stats(d, &st);
        uint64_t want = round == 0 ? 3 : 2; /* the header once; the two bad records stay */
        CHECK_INT(st.corrupt, want);
        sl_disk_close(&d);
    }
    /* a corrupt snapshot with no older one: refused, counted, moved aside;
       the logs still replay */
    snprintf(p, sizeof p, "%s/snapshot", dir);
    uint8_t *snap = sl_test_read_file(p, &len);
    CHECK(snap != NULL);
    snap[len - 2] ^= 1;
    write_file(p, snap, len);
    free(snap);
    CHECK_OK(sl_disk_open(dir, &d));
    memset(&s, 0, sizeof s);
    CHECK_OK(sl_disk_recover(d, collect, &s));
    CHECK_INT(s.count, 9);
    sl_disk_stats(d, &st);
    CHECK_INT(st.snapshot_rejected, 1);
    CHECK_INT(st.snapshot_loaded, 0);
    sl_disk_close(&d);
    CHECK(access(p, F_OK) != 0);
}

/* The newest snapshot corrupt: the one before it and the logs after it
 * give back every record. */
static void test_snapshot_fallback(void) {
    char dir[300], p[400];
    fresh(dir, sizeof dir, "fallback");
    sl_disk_t *d;
    seen_t s = {0};
    CHECK_OK(sl_disk_open(dir, &d));
    CHECK_OK(sl_disk_recover(d, collect, &s));
    CHECK_OK(sl_disk_append(d, 17, "a", 1));
    CHECK_OK(sl_disk_snapshot(d, 18, "S1", 2)); /* holds "a" */
    CHECK_OK(sl_disk_append(d, 17, "bb", 2));
    CHECK_OK(sl_disk_snapshot(d, 18, "S2", 2)); /* holds "a", "bb" */
    CHECK_OK(sl_disk_append(d, 17, "ccc", 3));
    CHECK_OK(sl_disk_sync(d));
    sl_disk_close(&d);
    /* as it is: S2 and "ccc" */
    CHECK_OK(sl_disk_open(dir, &d));
    memset(&s, 0, sizeof s);
    CHECK_OK(sl_disk_recover(d, collect, &s));
    CHECK(s.count == 2 && s.types[0] == 18 && s.lens[1] == 3);
    sl_disk_close(&d);
    snprintf(p, sizeof p, "%s/snapshot", dir);
    size_t len;
    uint8_t *snap = sl_test_read_file(p, &len);
    CHECK(snap != NULL);
    if (!snap)
        return;
    snap[len - 1] ^= 1;
    write_file(p, snap, len);
    free(snap);
    CHECK_OK(sl_disk_open(dir, &d));
    memset(&s, 0, sizeof s);
    CHECK_OK(sl_disk_recover(d, collect, &s));
    /* S1, then "bb" (wal.prev), then "ccc" (wal) */
    CHECK_INT(s.count, 3);
    CHECK(s.types[0] == 18 && s.lens[0] == 2 && s.first[0] == 'S');
    CHECK(s.lens[1] == 2 && s.lens[2] == 3);
    sl_disk_stats_t st;
    sl_disk_stats(d, &st);
    CHECK_INT(st.snapshot_rejected, 1);
    CHECK_INT(st.snapshot_fallback, 1);
    /* the next snapshot is durable before the older one goes */
    CHECK_OK(sl_disk_snapshot(d, 18, "S3", 2));
    sl_disk_close(&d);
    CHECK_OK(sl_disk_open(dir, &d));
    memset(&s, 0, sizeof s);
    CHECK_OK(sl_disk_recover(d, collect, &s));
    CHECK(s.count == 1 && s.types[0] == 18);
    sl_disk_close(&d);
}

/* A crash inside sl_disk_snapshot, after each of its renames: recovery
 * finds a good snapshot and every log after it. */
static void test_snapshot_crash_points(void) {
    char dir[300], a[400], b[400];
    for (int point = 0; point < 3; point++) {
        fresh(dir, sizeof dir, "crash");
        sl_disk_t *d;
        seen_t s = {0};
        CHECK_OK(sl_disk_open(dir, &d));
        CHECK_OK(sl_disk_recover(d, collect, &s));
        CHECK_OK(sl_disk_append(d, 17, "a", 1));
        CHECK_OK(sl_disk_snapshot(d, 18, "S1", 2)); /* holds "a" */
        CHECK_OK(sl_disk_append(d, 17, "bb", 2));
        CHECK_OK(sl_disk_sync(d));
        sl_disk_close(&d);
        /* the renames of the next snapshot, up to the crash */
        snprintf(a, sizeof a, "%s/snapshot", dir);
        snprintf(b, sizeof b, "%s/snapshot.prev", dir);
        CHECK(rename(a, b) == 0);
        if (point >= 1) {
            snprintf(a, sizeof a, "%s/wal", dir);
            snprintf(b, sizeof b, "%s/wal.prev", dir);
            CHECK(rename(a, b) == 0);
        }
        if (point >= 2) { /* the new, empty log of generation 2 in place */
            static const uint8_t hdr[WAL_HDR] = {'S', 'L', 'W', 'A', 'L', 0, 0, 2, 2};
            uint8_t h[WAL_HDR];
            memcpy(h, hdr, WAL_HDR);
            uint32_t crc = sl_crc32(0, h + 8, 8);
            for (int i = 0; i < 4; i++)
                h[16 + i] = (uint8_t)(crc >> (8 * i));
            snprintf(a, sizeof a, "%s/wal", dir);
            write_file(a, h, sizeof h);
        }
        for (int round = 0; round < 2; round++) {
            CHECK_OK(sl_disk_open(dir, &d));
            memset(&s, 0, sizeof s);
            CHECK_OK(sl_disk_recover(d, collect, &s));
            /* S1, "bb", and from the second round on "ccc" */
            CHECK_MSG(s.count == 2 + round && s.types[0] == 18 && s.lens[1] == 2,
                      "crash point %d, round %d: %d records", point, round, s.count);
            if (round == 0)
                CHECK_OK(sl_disk_append(d, 17, "ccc", 3));
            CHECK_OK(sl_disk_sync(d));
            sl_disk_close(&d);
        }
    }
}

static void put32le(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A directory of format 1 (wal "SLWAL\0\0\1", 9-byte record headers, a
 * snapshot "SLSNAP\0\1", a 12-byte incarnation file) is read, and
 * rewritten as format 2. */
static void test_format1(void) {
    char dir[300], p[400];
    fresh(dir, sizeof dir, "format1");
    mkdir(dir, 0700);
    uint8_t inc[12] = {41};
    put32le(inc + 8, sl_crc32(0, inc, 8));
    snprintf(p, sizeof p, "%s/incarnation", dir);
    write_file(p, inc, sizeof inc);
    uint8_t wal[8 + 3 * 12];
    memcpy(wal, "SLWAL\0\0\1", 8);
    for (int i = 0; i < 3; i++) {
        uint8_t *r = wal + 8 + 12 * i;
        put32le(r, 3);
        r[8] = 17;
        memset(r + 9, 'a' + i, 3);
        uint32_t crc = sl_crc32(sl_crc32(0, r, 4), r + 8, 4);
        put32le(r + 4, crc);
    }
    snprintf(p, sizeof p, "%s/wal", dir);
    write_file(p, wal, sizeof wal);
    /* a format 1 snapshot: magic, u64 length, u32 CRC of (type, body), type, body */
    uint8_t snap[8 + 8 + 4 + 1 + 3] = {'S', 'L', 'S', 'N', 'A', 'P', 0, 1, 3};
    snap[20] = 18;
    memcpy(snap + 21, "OLD", 3);
    put32le(snap + 16, sl_crc32(0, snap + 20, 4));
    char sp[400];
    snprintf(sp, sizeof sp, "%s/snapshot", dir);
    write_file(sp, snap, sizeof snap);
    sl_disk_t *d;
    for (int round = 0; round < 2; round++) {
        CHECK_OK(sl_disk_open(dir, &d));
        CHECK_INT(sl_disk_incarnation(d), 42 + round);
        seen_t s = {0};
        CHECK_OK(sl_disk_recover(d, collect, &s));
        CHECK_INT(s.count, 4); /* the snapshot, then the 3 records */
        CHECK(s.types[0] == 18 && s.lens[0] == 3 && s.first[0] == 'O');
        CHECK(s.first[3] == 'c');
        size_t sl;
        uint8_t *now_snap = sl_test_read_file(sp, &sl);
        CHECK(now_snap && memcmp(now_snap, "SLSNAP\0\2", 8) == 0);
        free(now_snap);
        sl_disk_close(&d);
        size_t len;
        uint8_t *now = sl_test_read_file(p, &len);
        CHECK(now && len == WAL_HDR + 3 * (REC_HDR + 3) && memcmp(now, "SLWAL\0\0\2", 8) == 0);
        free(now);
    }
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
    sl_test_run("snapshot_fallback", test_snapshot_fallback);
    sl_test_run("snapshot_crash_points", test_snapshot_crash_points);
    sl_test_run("format1", test_format1);
    sl_test_run("store_restart", test_store_restart);
    sl_test_run("chunks", test_chunks);
    sl_plat_remove_tree(base);
    return sl_test_finish();
}
