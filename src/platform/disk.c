/* The store's disk: see include/starling/disk.h. POSIX files only. */
#include "starling/disk.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "starling/hash.h"
#include "base/le.h"

#define MAGIC_LEN 8
#define WAL_MAGIC "SLWAL\0\0\2"
#define WAL_MAGIC_V1 "SLWAL\0\0\1"   /* format 1: read, then rewritten as 2 */
#define SNAP_MAGIC "SLSNAP\0\2"
#define SNAP_MAGIC_V1 "SLSNAP\0\1"
#define WAL_HDR (MAGIC_LEN + 8 + 4)   /* magic, u64 generation, u32 CRC of the generation */
#define REC_MAGIC 0x7e52ac53u         /* starts every record: where a scan resynchronises */
#define REC_HDR 13                    /* u32 magic, u32 len, u32 crc, u8 type */
#define REC_HDR_V1 9                  /* u32 len, u32 crc, u8 type */
#define SNAP_HDR (MAGIC_LEN + 8 + 8 + 4 + 1) /* magic, u64 generation, u64 len, u32 crc, type */
#define SNAP_HDR_V1 (MAGIC_LEN + 8 + 4 + 1)
#define SLOT_LEN 512                  /* a slot of an identity file: a sector of its own */
#define SLOT_DATA 36                  /* "SLID", u64 seq, u64 value, 16-byte id; then u32 CRC */
#define PROBE_LEN (64u << 10)         /* what a probe of a full disk writes */

struct sl_disk {
    char *dir;              /* directory */
    int dir_fd;             /* open for fsync after renames */
    int wal_fd;             /* log, open for append after recovery; -1 before */
    uint64_t gen;           /* the log's generation (the snapshot it follows) */
    uint8_t id[SL_DISK_ID_LEN]; /* this directory's random id (file replica) */
    uint8_t *buf;           /* queued records, encoded */
    size_t buf_len;         /* bytes queued */
    size_t buf_cap;         /* allocated */
    bool recovered;         /* sl_disk_recover ran */
    bool down;              /* the last write failed: appends refused until a retry succeeds */
    uint8_t chunk_dirs[32]; /* blobs/xx directories to fsync at the next sl_disk_chunk_sync_dirs (bit xx) */
    bool blobs_dir_new;     /* blobs/ to fsync then too (it may have gained a directory) */
    sl_disk_stats_t st;     /* counters */
};

/* Test switch (declared by the tests that use it, not in a header): writes
 * to the disk opened on `dir` fail as on a full disk (ENOSPC after half
 * the bytes), until called with NULL. In-place rewrites of the identity
 * files are not affected: they need no space. */
static char fault_full_dir[512];

void sl_disk_test_full(const char *dir);
void sl_disk_test_full(const char *dir) {
    snprintf(fault_full_dir, sizeof fault_full_dir, "%s", dir ? dir : "");
}

static bool fault_full(const sl_disk_t *d) {
    return d && fault_full_dir[0] && strcmp(d->dir, fault_full_dir) == 0;
}

static char *path_of(const sl_disk_t *d, const char *name) {
    size_t n = strlen(d->dir) + strlen(name) + 2;
    char *p = sl_malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", d->dir, name);
    return p;
}

static sl_err io_err(const char *what, const char *path) {
    sl_log(SL_LOG_ERR, "DISK-IO", "%s %s: %s", what, path, strerror(errno));
    return SL_EIO;
}

/* Writes all of `buf`; on the disk the fault switch names, half of it and
 * then ENOSPC. */
static sl_err write_all_d(const sl_disk_t *d, int fd, const void *buf, size_t len) {
    const uint8_t *p = buf;
    bool full = fault_full(d);
    if (full)
        len /= 2;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return SL_EIO;
        p += n;
        len -= (size_t)n;
    }
    if (full) {
        errno = ENOSPC;
        return SL_EIO;
    }
    return SL_OK;
}

static sl_err write_all(int fd, const void *buf, size_t len) {
    return write_all_d(NULL, fd, buf, len);
}

static sl_err read_file(const char *path, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? SL_ENOTFOUND : io_err("cannot open", path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return io_err("cannot stat", path);
    }
    size_t size = (size_t)st.st_size;
    uint8_t *buf = sl_malloc(size ? size : 1);
    if (!buf) {
        close(fd);
        return SL_ENOMEM;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    *out = buf;
    *len = got;
    return SL_OK;
}

/* fsyncs the directory that holds `path`. */
static sl_err sync_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    int dfd;
    if (!slash) {
        dfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    } else {
        char *dir = sl_strdup(path);
        if (!dir)
            return SL_ENOMEM;
        dir[slash - path ? slash - path : 1] = 0;
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        sl_free(dir);
    }
    sl_err err = dfd < 0 || fsync(dfd) != 0 ? io_err("cannot sync directory of", path) : SL_OK;
    if (dfd >= 0)
        close(dfd);
    return err;
}

/* Writes `a` then `b` to a new file `path` and fsyncs it (not renamed). */
static sl_err write_synced(const sl_disk_t *d, const char *path, const void *a, size_t alen,
                           const void *b, size_t blen) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return io_err("cannot create", path);
    if (write_all_d(d, fd, a, alen) || write_all_d(d, fd, b, blen) || fsync(fd) != 0) {
        sl_err err = io_err("cannot write", path);
        close(fd);
        unlink(path);
        return err;
    }
    close(fd);
    return SL_OK;
}

/* Writes `path` atomically: tmp file, fsync, rename, directory fsync. */
static sl_err write_atomic(const sl_disk_t *d, const char *path, const void *a, size_t alen,
                           const void *b, size_t blen) {
    size_t n = strlen(path) + 5;
    char *tmp = sl_malloc(n);
    if (!tmp)
        return SL_ENOMEM;
    snprintf(tmp, n, "%s.tmp", path);
    sl_err err = write_synced(d, tmp, a, alen, b, blen);
    if (!err && rename(tmp, path) != 0) {
        err = io_err("cannot rename", tmp);
        unlink(tmp);
    }
    if (!err)
        err = sync_parent(path); /* make the rename durable */
    sl_free(tmp);
    return err;
}

/* ---- identity files: two checksummed slots, rewritten in place ---- */

static void slot_encode(uint8_t *p, uint64_t seq, uint64_t value, const uint8_t *id) {
    memset(p, 0, SLOT_LEN);
    memcpy(p, "SLID", 4);
    sl_put64le(p + 4, seq);
    sl_put64le(p + 12, value);
    if (id)
        memcpy(p + 20, id, SL_DISK_ID_LEN);
    sl_put32le(p + SLOT_DATA, sl_crc32(0, p, SLOT_DATA));
}

static bool slot_ok(const uint8_t *p) {
    return memcmp(p, "SLID", 4) == 0 && sl_crc32(0, p, SLOT_DATA) == sl_get32le(p + SLOT_DATA);
}

/* The newest good slot of `buf` (len bytes): 0 or 1, or -1 if none. */
static int slot_newest(const uint8_t *buf, size_t len) {
    int best = -1;
    for (int k = 0; k < 2; k++) {
        const uint8_t *p = buf + (size_t)k * SLOT_LEN;
        if (len >= (size_t)(k + 1) * SLOT_LEN && slot_ok(p) &&
            (best < 0 || sl_get64le(p + 4) > sl_get64le(buf + (size_t)best * SLOT_LEN + 4)))
            best = k;
    }
    return best;
}

sl_err sl_disk_slot_read(const char *path, uint64_t *value, uint8_t *id) {
    uint8_t *buf;
    size_t len;
    sl_err err = read_file(path, &buf, &len);
    if (err)
        return err;
    int k = slot_newest(buf, len);
    if (k >= 0) {
        *value = sl_get64le(buf + (size_t)k * SLOT_LEN + 12);
        if (id)
            memcpy(id, buf + (size_t)k * SLOT_LEN + 20, SL_DISK_ID_LEN);
    }
    sl_free(buf);
    return k >= 0 ? SL_OK : SL_ECORRUPT;
}

sl_err sl_disk_slot_write(const char *path, uint64_t value, const uint8_t *id) {
    uint8_t old[2 * SLOT_LEN], slot[SLOT_LEN];
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        /* the one time the file needs space: both slots, put in place whole */
        slot_encode(old, 1, value, id);
        slot_encode(old + SLOT_LEN, 0, value, id);
        return write_atomic(NULL, path, old, sizeof old, NULL, 0);
    }
    if (fd < 0)
        return io_err("cannot open", path);
    ssize_t got = pread(fd, old, sizeof old, 0);
    int newest = slot_newest(old, got > 0 ? (size_t)got : 0);
    uint64_t seq = newest >= 0 ? sl_get64le(old + (size_t)newest * SLOT_LEN + 4) + 1 : 1;
    int target = newest == 0 ? 1 : 0; /* never over the newest good slot */
    slot_encode(slot, seq, value, id);
    sl_err err = SL_OK;
    if (pwrite(fd, slot, SLOT_LEN, (off_t)target * SLOT_LEN) != SLOT_LEN || fdatasync(fd) != 0)
        err = io_err("cannot write", path);
    close(fd);
    return err;
}

/* The store's identity (file replica): the directory's random id, made
 * once, and the incarnation, bumped at every open. A directory of format 1
 * had only the incarnation (file incarnation): it gets an id and goes on
 * counting. */
static sl_err bump_identity(sl_disk_t *d) {
    char *path = path_of(d, "replica"), *old = path_of(d, "incarnation");
    sl_err err = path && old ? SL_OK : SL_ENOMEM;
    uint64_t inc = 0;
    bool legacy = false;
    if (!err)
        err = sl_disk_slot_read(path, &inc, d->id);
    if (err == SL_ENOTFOUND) {
        uint8_t *buf;
        size_t len;
        err = read_file(old, &buf, &len);
        if (err == SL_OK) {
            legacy = true;
            if (len != 12 || sl_crc32(0, buf, 8) != sl_get32le(buf + 8))
                err = SL_ECORRUPT;
            else
                inc = sl_get64le(buf);
            sl_free(buf);
        } else if (err == SL_ENOTFOUND) {
            err = SL_OK;
        }
        if (!err) {
            if (sodium_init() < 0)
                err = SL_EINTERNAL;
            else
                randombytes_buf(d->id, sizeof d->id);
        }
    }
    if (err == SL_ECORRUPT)
        sl_log(SL_LOG_ERR, "DISK-INCARNATION",
               "%s is corrupt (both slots): refusing to start (a reused incarnation could "
               "reissue dots); restore it or remove the directory",
               legacy ? old : path);
    if (!err && (err = sl_disk_slot_write(path, inc + 1, d->id)) == SL_OK)
        d->st.incarnation = inc + 1;
    if (!err && legacy && unlink(old) == 0)
        fsync(d->dir_fd);
    sl_free(path);
    sl_free(old);
    return err;
}

sl_err sl_disk_open(const char *dir, sl_disk_t **out) {
    *out = NULL;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return io_err("cannot create directory", dir);
    sl_disk_t *d = sl_calloc(1, sizeof *d);
    if (!d)
        return SL_ENOMEM;
    d->wal_fd = -1;
    d->dir_fd = -1;
    d->blobs_dir_new = true; /* an earlier process may have left blobs/xx unsynced */
    d->dir = sl_strdup(dir);
    if (!d->dir) {
        sl_disk_close(&d);
        return SL_ENOMEM;
    }
    d->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->dir_fd < 0) {
        sl_err err = io_err("cannot open directory", dir);
        sl_disk_close(&d);
        return err;
    }
    sl_err err = bump_identity(d);
    if (err) {
        sl_disk_close(&d);
        return err;
    }
    *out = d;
    return SL_OK;
}

void sl_disk_close(sl_disk_t **dp) {
    sl_disk_t *d = *dp;
    if (!d)
        return;
    if (d->wal_fd >= 0)
        close(d->wal_fd);
    if (d->dir_fd >= 0)
        close(d->dir_fd);
    sl_free(d->buf);
    sl_free(d->dir);
    sl_free(d);
    *dp = NULL;
}

uint64_t sl_disk_incarnation(const sl_disk_t *d) { return d->st.incarnation; }

const uint8_t *sl_disk_id(const sl_disk_t *d) { return d->id; }

void sl_disk_stats(const sl_disk_t *d, sl_disk_stats_t *out) {
    *out = d->st;
    out->queued_bytes = d->buf_len;
    out->down = d->down;
}

/* ---- records ---- */

/* Encodes one record at `p` (REC_HDR + len bytes). */
static void rec_encode(uint8_t *p, uint8_t type, const void *body, size_t len) {
    sl_put32le(p, REC_MAGIC);
    sl_put32le(p + 4, (uint32_t)len);
    p[12] = type;
    if (len)
        memcpy(p + REC_HDR, body, len);
    uint32_t crc = sl_crc32(0, p + 4, 4);
    crc = sl_crc32(crc, p + 12, 1 + len);
    sl_put32le(p + 8, crc);
}

static sl_err queue(sl_disk_t *d, uint8_t type, const void *body, size_t len) {
    size_t need = d->buf_len + REC_HDR + len;
    if (need > d->buf_cap) {
        size_t cap = d->buf_cap ? d->buf_cap : 65536;
        while (cap < need)
            cap *= 2;
        uint8_t *n = sl_realloc(d->buf, cap);
        if (!n)
            return SL_ENOMEM;
        d->buf = n;
        d->buf_cap = cap;
    }
    rec_encode(d->buf + d->buf_len, type, body, len);
    d->buf_len = need;
    return SL_OK;
}

/* Whether a whole, good record starts at `off`; its body length if so. */
static bool rec_good(const uint8_t *buf, size_t len, size_t off, uint32_t *rlen) {
    if (len - off < REC_HDR || sl_get32le(buf + off) != REC_MAGIC)
        return false;
    uint32_t n = sl_get32le(buf + off + 4);
    if (n > SL_DISK_MAX_RECORD || len - off - REC_HDR < n)
        return false;
    uint32_t crc = sl_crc32(0, buf + off + 4, 4);
    crc = sl_crc32(crc, buf + off + 12, 1 + (size_t)n);
    if (crc != sl_get32le(buf + off + 8))
        return false;
    *rlen = n;
    return true;
}

/* Whether the bytes from `off` to the end could be the start of a record
 * that a crash cut short (a torn tail), or nothing written yet (zeros). */
static bool rec_torn(const uint8_t *buf, size_t len, size_t off) {
    size_t left = len - off;
    uint8_t magic[4];
    sl_put32le(magic, REC_MAGIC);
    if (left < 4)
        return memcmp(buf + off, magic, left) == 0;
    bool zeros = true;
    for (size_t i = off; i < len && zeros; i++)
        zeros = buf[i] == 0;
    if (zeros)
        return true;
    if (memcmp(buf + off, magic, 4) != 0)
        return false;
    if (left < REC_HDR)
        return true;
    uint32_t n = sl_get32le(buf + off + 4);
    return n <= SL_DISK_MAX_RECORD && left - REC_HDR < n;
}

/* The next good record after `off`, or `len` if none. */
static size_t rec_next(const uint8_t *buf, size_t len, size_t off) {
    uint8_t magic[4];
    sl_put32le(magic, REC_MAGIC);
    uint32_t rlen;
    for (size_t i = off + 1; i + REC_HDR <= len; i++) {
        const uint8_t *p = memchr(buf + i, magic[0], len - i);
        if (!p)
            break;
        i = (size_t)(p - buf);
        if (i + REC_HDR <= len && memcmp(p, magic, 4) == 0 && rec_good(buf, len, i, &rlen))
            return i;
    }
    return len;
}

/* ---- recovery ---- */

/* A log or snapshot file as read at recovery. */
typedef struct {
    const char *name; /* file name in the directory */
    uint8_t *buf;     /* its bytes (NULL: absent) */
    size_t len;       /* bytes */
    int version;      /* 1 or 2; 0: bad or torn header */
    uint64_t gen;     /* generation (format 1: 0) */
} file_t;

static sl_err file_read(sl_disk_t *d, const char *name, file_t *f) {
    memset(f, 0, sizeof *f);
    f->name = name;
    char *path = path_of(d, name);
    if (!path)
        return SL_ENOMEM;
    sl_err err = read_file(path, &f->buf, &f->len);
    sl_free(path);
    return err == SL_ENOTFOUND ? SL_OK : err;
}

/* Checks a snapshot's header and checksum; NULL if good, else why not. */
static const char *snap_check(file_t *f) {
    const uint8_t *b = f->buf;
    if (f->len >= SNAP_HDR && memcmp(b, SNAP_MAGIC, MAGIC_LEN) == 0) {
        if (sl_get64le(b + 16) != f->len - SNAP_HDR)
            return "wrong length (truncated?)";
        uint32_t crc = sl_crc32(sl_crc32(0, b + 8, 8), b + SNAP_HDR - 1, f->len - SNAP_HDR + 1);
        if (crc != sl_get32le(b + 24))
            return "checksum mismatch";
        f->version = 2;
        f->gen = sl_get64le(b + 8);
        return NULL;
    }
    if (f->len >= SNAP_HDR_V1 && memcmp(b, SNAP_MAGIC_V1, MAGIC_LEN) == 0) {
        if (sl_get64le(b + MAGIC_LEN) != f->len - SNAP_HDR_V1)
            return "wrong length (truncated?)";
        if (sl_crc32(0, b + SNAP_HDR_V1 - 1, f->len - SNAP_HDR_V1 + 1) != sl_get32le(b + 16))
            return "checksum mismatch";
        f->version = 1;
        return NULL;
    }
    return "bad header";
}

static void snap_body(const file_t *f, uint8_t *type, const uint8_t **body, size_t *len) {
    size_t hdr = f->version == 2 ? SNAP_HDR : SNAP_HDR_V1;
    *type = f->buf[hdr - 1];
    *body = f->buf + hdr;
    *len = f->len - hdr;
}

/* Moves a refused file aside (NAME.bad.INCARNATION), kept for a person. */
static void move_aside(sl_disk_t *d, const char *name) {
    char bad[96];
    snprintf(bad, sizeof bad, "%s.bad.%" PRIu64, name, d->st.incarnation);
    char *from = path_of(d, name), *to = path_of(d, bad);
    if (from && to && rename(from, to) == 0)
        fsync(d->dir_fd);
    sl_free(from);
    sl_free(to);
}

/* Loads the newest good snapshot: `snapshot`, else the one before it
 * (`snapshot.prev`), which is kept until a newer one is durable. */
static sl_err load_snapshot(sl_disk_t *d, sl_disk_record_fn fn, void *ctx, bool *have,
                            uint64_t *gen) {
    static const char *names[] = {"snapshot", "snapshot.prev"};
    *have = false;
    *gen = 0;
    sl_err err = SL_OK;
    for (int k = 0; k < 2 && !*have && !err; k++) {
        file_t f;
        if ((err = file_read(d, names[k], &f)) || !f.buf)
            continue;
        const char *why = snap_check(&f);
        if (why) {
            d->st.snapshot_rejected++;
            sl_log(SL_LOG_ERR, "DISK-SNAPSHOT-CORRUPT",
                   "%s/%s refused (%s): moved to %s.bad.%" PRIu64 "; %s", d->dir, names[k], why,
                   names[k], d->st.incarnation,
                   k == 0 ? "trying the previous snapshot and the logs after it"
                          : "replaying the logs alone; peers resend the rest");
            move_aside(d, names[k]);
        } else {
            uint8_t type;
            const uint8_t *body;
            size_t len;
            snap_body(&f, &type, &body, &len);
            err = fn(ctx, type, body, len);
            if (!err) {
                *have = true;
                *gen = f.gen;
                d->st.snapshot_loaded = 1;
                d->st.snapshot_fallback = k == 1;
                if (k == 1)
                    sl_log(SL_LOG_WARNING, "DISK-SNAPSHOT-FALLBACK",
                           "%s: loaded the previous snapshot (generation %" PRIu64
                           ") and replaying the logs after it",
                           d->dir, f.gen);
                if (f.version == 1) { /* format 1: rewritten as format 2 */
                    uint8_t hdr[SNAP_HDR];
                    memcpy(hdr, SNAP_MAGIC, MAGIC_LEN);
                    sl_put64le(hdr + 8, 0);
                    sl_put64le(hdr + 16, len);
                    hdr[SNAP_HDR - 1] = type;
                    sl_put32le(hdr + 24, sl_crc32(sl_crc32(0, hdr + 8, 8), body - 1, len + 1));
                    char *path = path_of(d, names[k]);
                    err = path ? write_atomic(d, path, hdr, sizeof hdr, body, len) : SL_ENOMEM;
                    sl_free(path);
                }
            }
        }
        sl_free(f.buf);
    }
    return err;
}

/* Keeps the bytes after `off` in wal.tail.OFF.INC, then cuts the log there. */
static sl_err cut_wal(sl_disk_t *d, const uint8_t *buf, size_t len, size_t off) {
    char name[64];
    snprintf(name, sizeof name, "wal.tail.%zu.%" PRIu64, off, d->st.incarnation);
    char *tail = path_of(d, name), *path = path_of(d, "wal");
    sl_err err = tail && path ? write_atomic(d, tail, buf + off, len - off, NULL, 0) : SL_ENOMEM;
    if (!err && truncate(path, (off_t)off) != 0)
        err = io_err("cannot cut", path);
    if (!err)
        d->st.bytes_cut += len - off;
    sl_free(tail);
    sl_free(path);
    return err;
}

/* Reads a log's header: version 2 (with its generation), 1, or 0 (bad or
 * torn; *torn tells which). */
static void wal_header(file_t *f, bool *torn) {
    *torn = false;
    if (f->len >= WAL_HDR && memcmp(f->buf, WAL_MAGIC, MAGIC_LEN) == 0 &&
        sl_crc32(0, f->buf + 8, 8) == sl_get32le(f->buf + 16)) {
        f->version = 2;
        f->gen = sl_get64le(f->buf + 8);
    } else if (f->len >= MAGIC_LEN && memcmp(f->buf, WAL_MAGIC_V1, MAGIC_LEN) == 0) {
        f->version = 1;
    } else {
        size_t n = f->len < MAGIC_LEN ? f->len : MAGIC_LEN;
        *torn = f->len < WAL_HDR && memcmp(f->buf, WAL_MAGIC, n) == 0;
    }
}

/* Replays the records of a format 2 log. A bad record is skipped up to
 * the next good one (each record starts with a magic and carries its own
 * length and checksum, so one bad record costs that record); a bad tail
 * ends the replay, and in the live log (`live`) it is cut off and kept.
 * Sets *end to where the good part of the log ends. */
static sl_err replay_v2(sl_disk_t *d, const file_t *f, bool live, sl_disk_record_fn fn, void *ctx,
                        size_t *end) {
    const uint8_t *buf = f->buf;
    size_t len = f->len, off = WAL_HDR;
    sl_err err = SL_OK;
    while (off < len && !err) {
        uint32_t rlen;
        if (rec_good(buf, len, off, &rlen)) {
            if (!(err = fn(ctx, buf[off + 12], buf + off + REC_HDR, rlen)))
                d->st.records_replayed++;
            off += REC_HDR + rlen;
            continue;
        }
        size_t next = rec_next(buf, len, off);
        if (next < len) {
            d->st.corrupt++;
            d->st.skipped++;
            d->st.bytes_skipped += next - off;
            sl_log(SL_LOG_ERR, "DISK-CORRUPT",
                   "%s/%s: bad record at byte %zu: skipped %zu bytes to the next good record "
                   "(byte %zu); the writes it held are lost here and fetched again from peers",
                   d->dir, f->name, off, next - off, next);
            off = next;
            continue;
        }
        if (rec_torn(buf, len, off)) {
            d->st.torn++;
            sl_log(SL_LOG_WARNING, "DISK-TORN",
                   "%s/%s: torn tail at byte %zu (%zu bytes): a write a crash cut short%s",
                   d->dir, f->name, off, len - off, live ? "; cut, kept in wal.tail.*" : "");
        } else {
            d->st.corrupt++;
            sl_log(SL_LOG_ERR, "DISK-CORRUPT",
                   "%s/%s: bad record at byte %zu and nothing good after it: %zu bytes lost%s; "
                   "peers resend what they held",
                   d->dir, f->name, off, len - off, live ? " (cut, kept in wal.tail.*)" : "");
        }
        if (live)
            err = cut_wal(d, buf, len, off);
        len = off;
    }
    *end = len;
    return err;
}

/* Replays a format 1 log (cut at the first bad record, as format 1 did),
 * queueing each record to be rewritten as format 2. */
static sl_err replay_v1(sl_disk_t *d, const file_t *f, sl_disk_record_fn fn, void *ctx) {
    const uint8_t *buf = f->buf;
    size_t off = MAGIC_LEN;
    sl_err err = SL_OK;
    while (off < f->len && !err) {
        size_t left = f->len - off;
        uint32_t rlen = left >= REC_HDR_V1 ? sl_get32le(buf + off) : 0;
        bool whole = left >= REC_HDR_V1 && rlen <= SL_DISK_MAX_RECORD && left - REC_HDR_V1 >= rlen;
        uint32_t crc = 0;
        if (whole) {
            crc = sl_crc32(0, buf + off, 4);
            crc = sl_crc32(crc, buf + off + 8, 1 + (size_t)rlen);
        }
        if (!whole || crc != sl_get32le(buf + off + 4)) {
            d->st.corrupt++;
            sl_log(SL_LOG_ERR, "DISK-CORRUPT",
                   "%s/wal (format 1): bad record at byte %zu: %zu bytes after it cut, kept in "
                   "wal.tail.*; peers resend what they held",
                   d->dir, off, left);
            return cut_wal(d, buf, f->len, off);
        }
        if (!(err = fn(ctx, buf[off + 8], buf + off + REC_HDR_V1, rlen)) &&
            !(err = queue(d, buf[off + 8], buf + off + REC_HDR_V1, rlen)))
            d->st.records_replayed++;
        off += REC_HDR_V1 + rlen;
    }
    return err;
}

/* Writes a new, empty log of generation `gen` to `name` (tmp, fsync,
 * rename, directory fsync). */
static sl_err wal_create(sl_disk_t *d, const char *name, uint64_t gen, const void *body,
                         size_t body_len) {
    uint8_t hdr[WAL_HDR];
    memcpy(hdr, WAL_MAGIC, MAGIC_LEN);
    sl_put64le(hdr + 8, gen);
    sl_put32le(hdr + 16, sl_crc32(0, hdr + 8, 8));
    char *path = path_of(d, name);
    sl_err err = path ? write_atomic(d, path, hdr, sizeof hdr, body, body_len) : SL_ENOMEM;
    sl_free(path);
    return err;
}

sl_err sl_disk_recover(sl_disk_t *d, sl_disk_record_fn fn, void *ctx) {
    if (d->recovered)
        return SL_ESTATE;
    bool have;
    uint64_t base;
    sl_err err = load_snapshot(d, fn, ctx, &have, &base);
    file_t prev = {0}, cur = {0};
    char *path = path_of(d, "wal");
    if (!err && !path)
        err = SL_ENOMEM;
    if (err || (err = file_read(d, "wal.prev", &prev)) || (err = file_read(d, "wal", &cur)))
        goto fail;
    bool prev_torn, cur_torn;
    if (prev.buf)
        wal_header(&prev, &prev_torn);
    if (cur.buf && cur.len == 0) { /* created, never written: as if absent */
        sl_free(cur.buf);
        cur.buf = NULL;
    }
    if (cur.buf)
        wal_header(&cur, &cur_torn);
    /* the log before the snapshot: needed when the snapshot is an older
       one (or none), and after a crash inside sl_disk_snapshot */
    size_t end;
    if (prev.version == 2 && (!have || prev.gen >= base) && (!cur.buf || cur.version != 2 || prev.gen <= cur.gen) &&
        (err = replay_v2(d, &prev, false, fn, ctx, &end)))
        goto fail;
    end = 0;
    if (cur.version == 2 && (!have || cur.gen >= base)) {
        if ((err = replay_v2(d, &cur, true, fn, ctx, &end)))
            goto fail;
        d->gen = cur.gen;
    } else if (cur.version == 1) {
        /* format 1: replayed, then rewritten as format 2 */
        if ((err = replay_v1(d, &cur, fn, ctx)) ||
            (err = wal_create(d, "wal", base, d->buf, d->buf_len)))
            goto fail;
        sl_log(SL_LOG_NOTICE, "DISK-UPGRADE", "%s: log of format 1 rewritten as format 2 (%" PRIu64
               " records)", d->dir, d->st.records_replayed);
        end = WAL_HDR + d->buf_len;
        d->buf_len = 0;
        d->gen = base;
    } else if (!cur.buf && prev.version == 2 && have && prev.gen == base) {
        /* a crash inside sl_disk_snapshot left the live log as wal.prev */
        char *pp = path_of(d, "wal.prev");
        if (!pp || rename(pp, path) != 0 || fsync(d->dir_fd) != 0)
            err = pp ? io_err("cannot rename", pp) : SL_ENOMEM;
        sl_free(pp);
        if (err)
            goto fail;
        end = prev.len;
        d->gen = prev.gen;
    }
    if (cur.buf && cur.version == 0 && !cur_torn && cur.len > WAL_HDR &&
        rec_next(cur.buf, cur.len, WAL_HDR - 1) < cur.len) {
        /* a bad header before good records: the records are replayed (a
           stale one changes nothing: its dots are known) and the header
           is written again, so one bad byte costs no record */
        d->st.corrupt++;
        sl_log(SL_LOG_ERR, "DISK-CORRUPT", "%s: bad header: its records replayed, header "
               "written again", path);
        if ((err = replay_v2(d, &cur, true, fn, ctx, &end)))
            goto fail;
        uint8_t hdr[WAL_HDR];
        memcpy(hdr, WAL_MAGIC, MAGIC_LEN);
        sl_put64le(hdr + 8, base);
        sl_put32le(hdr + 16, sl_crc32(0, hdr + 8, 8));
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || pwrite(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr || fdatasync(fd) != 0)
            err = io_err("cannot write the header of", path);
        if (fd >= 0)
            close(fd);
        if (err)
            goto fail;
        d->gen = base;
    } else if (cur.buf && cur.version == 0) {
        if (cur_torn) {
            d->st.torn++;
        } else {
            d->st.corrupt++;
            sl_log(SL_LOG_ERR, "DISK-CORRUPT", "%s: bad header: moved to wal.bad.%" PRIu64
                   "; peers resend what it held", path, d->st.incarnation);
            move_aside(d, "wal");
        }
    }
    if (end == 0) { /* no live log to go on with: a new one */
        d->gen = prev.version == 2 && prev.gen > base ? prev.gen : base;
        if ((err = wal_create(d, "wal", d->gen, NULL, 0)))
            goto fail;
        end = WAL_HDR;
    }
    d->wal_fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (d->wal_fd < 0) {
        err = io_err("cannot open", path);
        goto fail;
    }
    if (d->st.skipped)
        sl_log(SL_LOG_ERR, "DISK-LOST",
               "%s: %" PRIu64 " bad records skipped (%" PRIu64 " bytes), %" PRIu64
               " good ones replayed; what the bad ones held is fetched again from peers, or "
               "lost if this peer has none",
               d->dir, d->st.skipped, d->st.bytes_skipped, d->st.records_replayed);
    d->st.wal_bytes = end;
    d->recovered = true;
fail:
    sl_free(prev.buf);
    sl_free(cur.buf);
    sl_free(path);
    return err;
}

/* ---- writing ---- */

static void set_down(sl_disk_t *d, int e) {
    d->st.write_failures++;
    if (d->down)
        return;
    d->down = true;
    sl_log(SL_LOG_ERR, "DISK-DOWN",
           "cannot write %s/wal: %s; the store refuses writes until the disk takes them again "
           "(tried again with back-off); reads go on",
           d->dir, strerror(e));
}

static void set_up(sl_disk_t *d) {
    if (!d->down)
        return;
    d->down = false;
    sl_log(SL_LOG_NOTICE, "DISK-UP", "%s takes writes again: the store accepts writes", d->dir);
}

bool sl_disk_down(const sl_disk_t *d) { return d->down; }

sl_err sl_disk_append(sl_disk_t *d, uint8_t type, const void *body, size_t len) {
    if (!d->recovered)
        return SL_ESTATE;
    if (len > SL_DISK_MAX_RECORD)
        return SL_ETOOBIG;
    if (d->down)
        return SL_EIO; /* nothing queues while the disk refuses writes */
    sl_err err = queue(d, type, body, len);
    if (!err)
        d->st.appended++;
    return err;
}

sl_err sl_disk_sync(sl_disk_t *d) {
    if (!d->recovered)
        return SL_ESTATE;
    if (!d->buf_len)
        return SL_OK;
    if (write_all_d(d, d->wal_fd, d->buf, d->buf_len) || fdatasync(d->wal_fd) != 0) {
        int e = errno;
        /* what part of the write reached the file goes: the next try
           writes the queue again from where the log ended */
        if (ftruncate(d->wal_fd, (off_t)d->st.wal_bytes) != 0)
            sl_log(SL_LOG_ERR, "DISK-IO", "cannot cut %s/wal back to %" PRIu64 " bytes: %s",
                   d->dir, d->st.wal_bytes, strerror(errno));
        set_down(d, e);
        return SL_EIO;
    }
    d->st.wal_bytes += d->buf_len;
    d->st.syncs++;
    d->buf_len = 0;
    set_up(d);
    return SL_OK;
}

sl_err sl_disk_retry(sl_disk_t *d) {
    if (!d->down)
        return SL_OK;
    if (d->buf_len)
        return sl_disk_sync(d);
    /* nothing queued: a probe file of PROBE_LEN bytes says whether the
       disk takes writes again */
    char *path = path_of(d, "probe");
    uint8_t *zeros = sl_calloc(1, PROBE_LEN);
    sl_err err = path && zeros ? SL_OK : SL_ENOMEM;
    if (!err) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || write_all_d(d, fd, zeros, PROBE_LEN) || fdatasync(fd) != 0)
            err = SL_EIO;
        if (fd >= 0)
            close(fd);
        unlink(path);
    }
    if (!err)
        set_up(d);
    else
        d->st.write_failures++;
    sl_free(zeros);
    sl_free(path);
    return err;
}

sl_err sl_disk_snapshot(sl_disk_t *d, uint8_t type, const void *body, size_t len) {
    sl_err err = sl_disk_sync(d);
    if (err)
        return err;
    uint64_t gen = d->gen + 1;
    uint8_t hdr[SNAP_HDR];
    memcpy(hdr, SNAP_MAGIC, MAGIC_LEN);
    sl_put64le(hdr + 8, gen);
    sl_put64le(hdr + 16, len);
    hdr[SNAP_HDR - 1] = type;
    sl_put32le(hdr + 24, sl_crc32(sl_crc32(sl_crc32(0, hdr + 8, 8), &type, 1), body, len));
    uint8_t whdr[WAL_HDR];
    memcpy(whdr, WAL_MAGIC, MAGIC_LEN);
    sl_put64le(whdr + 8, gen);
    sl_put32le(whdr + 16, sl_crc32(0, whdr + 8, 8));
    char *snap = path_of(d, "snapshot"), *snap_tmp = path_of(d, "snapshot.tmp"),
         *snap_prev = path_of(d, "snapshot.prev"), *wal = path_of(d, "wal"),
         *wal_tmp = path_of(d, "wal.tmp"), *wal_prev = path_of(d, "wal.prev");
    int fd = -1;
    if (!snap || !snap_tmp || !snap_prev || !wal || !wal_tmp || !wal_prev) {
        err = SL_ENOMEM;
        goto fail;
    }
    /* everything that needs space first: the new snapshot and the new,
       empty log, both synced under temporary names */
    if ((err = write_synced(d, snap_tmp, hdr, sizeof hdr, body, len)) ||
        (err = write_synced(d, wal_tmp, whdr, sizeof whdr, NULL, 0)))
        goto fail;
    fd = open(wal_tmp, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) {
        err = io_err("cannot open", wal_tmp);
        goto fail;
    }
    /* then renames only. The snapshot and log of now become the previous
       ones, kept until the next snapshot is durable: at any crash point
       recovery finds a good snapshot and every log after it */
    if ((rename(snap, snap_prev) != 0 && errno != ENOENT) || rename(wal, wal_prev) != 0 ||
        fsync(d->dir_fd) != 0) {
        err = io_err("cannot keep the previous snapshot in", d->dir);
        goto fail;
    }
    if (rename(wal_tmp, wal) != 0) {
        err = io_err("cannot rename", wal_tmp); /* the live log goes on as wal.prev */
        goto fail;
    }
    close(d->wal_fd); /* from here the new log is the live one */
    d->wal_fd = fd;
    fd = -1;
    d->gen = gen;
    d->st.wal_bytes = WAL_HDR;
    if (rename(snap_tmp, snap) != 0 || fsync(d->dir_fd) != 0)
        err = io_err("cannot put in place", snap_tmp);
fail:
    if (fd >= 0)
        close(fd);
    if (err && snap_tmp)
        unlink(snap_tmp);
    if (err && wal_tmp)
        unlink(wal_tmp);
    sl_free(snap);
    sl_free(snap_tmp);
    sl_free(snap_prev);
    sl_free(wal);
    sl_free(wal_tmp);
    sl_free(wal_prev);
    return err;
}

/* ---- blob chunks ---- */

static int hex_digit(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* blobs/xx holding this chunk is to be fsynced at the next sync_dirs. */
static void mark_dir(sl_disk_t *d, const char *hex) {
    unsigned xx = (unsigned)(hex_digit(hex[0]) << 4 | hex_digit(hex[1]));
    d->chunk_dirs[xx / 8] |= (uint8_t)(1u << (xx % 8));
}

static sl_err chunk_path(sl_disk_t *d, const char *hex, bool mk, char **out) {
    size_t hl = strlen(hex);
    if (hl < 4 || hl > 128 || strspn(hex, "0123456789abcdef") != hl)
        return SL_EINVAL;
    size_t n = strlen(d->dir) + hl + 16;
    char *p = sl_malloc(n);
    if (!p)
        return SL_ENOMEM;
    snprintf(p, n, "%s/blobs", d->dir);
    if (mk && mkdir(p, 0700) != 0 && errno != EEXIST) {
        sl_free(p);
        return io_err("cannot create", "blobs");
    }
    snprintf(p, n, "%s/blobs/%.2s", d->dir, hex);
    if (mk) {
        if (mkdir(p, 0700) == 0)
            d->blobs_dir_new = true;
        else if (errno != EEXIST) {
            sl_free(p);
            return io_err("cannot create", "blobs/xx");
        }
    }
    snprintf(p, n, "%s/blobs/%.2s/%s", d->dir, hex, hex);
    *out = p;
    return SL_OK;
}

/* Is the file at `p` already exactly these bytes? Content-addressed: such
   a file is kept; one that differs (a damaged copy) is replaced, since
   the caller counts on this chunk being good. */
static bool same_file(const char *p, const void *data, size_t len) {
    struct stat st;
    if (stat(p, &st) != 0 || (size_t)st.st_size != len)
        return false;
    uint8_t *old = NULL;
    size_t old_len = 0;
    bool same = read_file(p, &old, &old_len) == SL_OK && old_len == len &&
                memcmp(old, data, len) == 0;
    sl_free(old);
    return same;
}

sl_err sl_disk_chunk_put(sl_disk_t *d, const char *hex, const void *data, size_t len) {
    char *p;
    sl_err err = chunk_path(d, hex, true, &p);
    if (err)
        return err;
    if (!same_file(p, data, len))
        err = write_atomic(d, p, data, len, NULL, 0);
    sl_free(p);
    return err;
}

sl_err sl_disk_chunk_write(sl_disk_t *d, const char *hex, const void *data, size_t len) {
    char *p;
    sl_err err = chunk_path(d, hex, true, &p);
    if (err)
        return err;
    if (same_file(p, data, len)) {
        sl_free(p);
        return SL_OK;
    }
    size_t n = strlen(p) + 5;
    char *tmp = sl_malloc(n);
    if (!tmp) {
        sl_free(p);
        return SL_ENOMEM;
    }
    snprintf(tmp, n, "%s.tmp", p);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        err = io_err("cannot create", tmp);
        goto done;
    }
    if (write_all(fd, data, len)) {
        err = io_err("cannot write", tmp);
        close(fd);
        unlink(tmp);
        goto done;
    }
#ifdef SYNC_FILE_RANGE_WRITE
    /* start writeback now, so that the sync before the blob is recorded
       finds little left to write (100 x 1 MiB: 35 ms then, not 120) */
    sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#endif
    close(fd);
    /* the rename makes the file appear whole to this process; after a
       crash before sl_disk_chunk_sync it may be missing, short or
       damaged, which every reader catches by its hash */
    if (rename(tmp, p) != 0) {
        err = io_err("cannot rename", tmp);
        unlink(tmp);
        goto done;
    }
    mark_dir(d, hex);
done:
    sl_free(tmp);
    sl_free(p);
    return err;
}

sl_err sl_disk_chunk_sync(sl_disk_t *d, const char *hex) {
    char *p;
    sl_err err = chunk_path(d, hex, false, &p);
    if (err)
        return err;
    /* its directory entry too: the rename may be an earlier process's,
       never synced (it crashed), so do not count on this one's marks */
    mark_dir(d, hex);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        err = errno == ENOENT ? SL_ENOTFOUND : io_err("cannot open", p);
    else {
        if (fdatasync(fd) != 0)
            err = io_err("cannot sync", p);
        close(fd);
    }
    sl_free(p);
    return err;
}

static sl_err sync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? SL_OK : io_err("cannot open", path);
    sl_err err = fsync(fd) != 0 ? io_err("cannot sync", path) : SL_OK;
    close(fd);
    return err;
}

sl_err sl_disk_chunk_sync_dirs(sl_disk_t *d) {
    size_t n = strlen(d->dir) + 16;
    char *p = sl_malloc(n);
    if (!p)
        return SL_ENOMEM;
    sl_err err = SL_OK;
    for (unsigned xx = 0; xx < 256 && !err; xx++) {
        if (!(d->chunk_dirs[xx / 8] & (1u << (xx % 8))))
            continue;
        snprintf(p, n, "%s/blobs/%02x", d->dir, xx);
        if (!(err = sync_dir(p)))
            d->chunk_dirs[xx / 8] &= (uint8_t)~(1u << (xx % 8));
    }
    if (!err && d->blobs_dir_new) {
        snprintf(p, n, "%s/blobs", d->dir);
        if (!(err = sync_dir(p)) && !(err = sync_dir(d->dir)))
            d->blobs_dir_new = false;
    }
    sl_free(p);
    return err;
}

bool sl_disk_chunk_has(sl_disk_t *d, const char *hex) {
    char *p;
    if (chunk_path(d, hex, false, &p))
        return false;
    struct stat st;
    bool has = stat(p, &st) == 0 && S_ISREG(st.st_mode);
    sl_free(p);
    return has;
}

sl_err sl_disk_chunk_get(sl_disk_t *d, const char *hex, uint8_t **data, size_t *len) {
    char *p;
    sl_err err = chunk_path(d, hex, false, &p);
    if (err)
        return err;
    err = read_file(p, data, len);
    sl_free(p);
    return err;
}

sl_err sl_disk_chunk_del(sl_disk_t *d, const char *hex) {
    char *p;
    sl_err err = chunk_path(d, hex, false, &p);
    if (err)
        return err;
    if (unlink(p) != 0)
        err = errno == ENOENT ? SL_ENOTFOUND : io_err("cannot remove", p);
    sl_free(p);
    return err;
}

/* ---- files read and written in pieces ---- */

struct sl_disk_in {
    int fd;        /* open for reading */
    uint64_t size; /* bytes at open */
};

sl_err sl_disk_in_open(const char *path, sl_disk_in_t **out) {
    *out = NULL;
    sl_disk_in_t *in = sl_calloc(1, sizeof *in);
    if (!in)
        return SL_ENOMEM;
    in->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    sl_err err = SL_OK;
    if (in->fd < 0)
        err = errno == ENOENT ? SL_ENOTFOUND : io_err("cannot open", path);
    else if (fstat(in->fd, &st) != 0)
        err = io_err("cannot stat", path);
    else if (!S_ISREG(st.st_mode))
        err = SL_EINVAL; /* a directory or a device: not a blob's contents */
    if (err) {
        if (in->fd >= 0)
            close(in->fd);
        sl_free(in);
        return err;
    }
#ifdef POSIX_FADV_SEQUENTIAL
    posix_fadvise(in->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    in->size = (uint64_t)st.st_size;
    *out = in;
    return SL_OK;
}

uint64_t sl_disk_in_size(const sl_disk_in_t *in) { return in->size; }

sl_err sl_disk_in_read(sl_disk_in_t *in, void *buf, size_t len, size_t *got) {
    uint8_t *p = buf;
    *got = 0;
    while (*got < len) {
        ssize_t n = read(in->fd, p + *got, len - *got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return io_err("cannot read", "input file");
        if (n == 0)
            break;
        *got += (size_t)n;
    }
    return SL_OK;
}

void sl_disk_in_close(sl_disk_in_t **pin) {
    sl_disk_in_t *in = pin ? *pin : NULL;
    if (!in)
        return;
    close(in->fd);
    sl_free(in);
    *pin = NULL;
}

struct sl_disk_out {
    int fd;     /* the temporary file, open for writing */
    char *path; /* where it goes */
    char *tmp;  /* its temporary name, beside it */
};

sl_err sl_disk_out_open(const char *path, unsigned mode, sl_disk_out_t **out) {
    static unsigned counter; /* several outputs to one path at once get their own names */
    *out = NULL;
    sl_disk_out_t *o = sl_calloc(1, sizeof *o);
    if (!o)
        return SL_ENOMEM;
    o->fd = -1;
    size_t n = strlen(path) + 48;
    if (!(o->path = sl_strdup(path)) || !(o->tmp = sl_malloc(n))) {
        sl_disk_out_abort(&o);
        return SL_ENOMEM;
    }
    for (int tries = 0; o->fd < 0 && tries < 100; tries++) {
        snprintf(o->tmp, n, "%s.tmp-%ld-%u", path, (long)getpid(), counter++);
        o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
        if (o->fd < 0 && errno != EEXIST)
            break;
    }
    if (o->fd < 0) {
        sl_err err = errno == ENOENT ? SL_ENOTFOUND : io_err("cannot create", o->tmp);
        sl_free(o->tmp);
        o->tmp = NULL; /* nothing to remove */
        sl_disk_out_abort(&o);
        return err;
    }
    *out = o;
    return SL_OK;
}

sl_err sl_disk_out_write(sl_disk_out_t *o, const void *data, size_t len) {
    return write_all(o->fd, data, len) ? io_err("cannot write", o->tmp) : SL_OK;
}

sl_err sl_disk_out_commit(sl_disk_out_t **po) {
    sl_disk_out_t *o = *po;
    sl_err err = SL_OK;
    if (fsync(o->fd) != 0)
        err = io_err("cannot sync", o->tmp);
    if (close(o->fd) != 0 && !err)
        err = io_err("cannot write", o->tmp);
    o->fd = -1;
    if (!err && rename(o->tmp, o->path) != 0)
        err = io_err("cannot rename", o->tmp);
    if (err) {
        sl_disk_out_abort(po);
        return err;
    }
    /* the rename durable: fsync the directory that holds it */
    char *slash = strrchr(o->tmp, '/');
    if (slash == o->tmp)
        slash[1] = 0; /* in / */
    else if (slash)
        *slash = 0;
    err = sync_dir(slash ? o->tmp : ".");
    sl_free(o->tmp);
    o->tmp = NULL; /* renamed: nothing to remove */
    sl_disk_out_abort(po);
    return err;
}

void sl_disk_out_abort(sl_disk_out_t **po) {
    sl_disk_out_t *o = po ? *po : NULL;
    if (!o)
        return;
    if (o->fd >= 0)
        close(o->fd);
    if (o->tmp)
        unlink(o->tmp);
    sl_free(o->tmp);
    sl_free(o->path);
    sl_free(o);
    *po = NULL;
}
