/* The store's disk: see include/starling/disk.h. POSIX files only. */
#include "starling/disk.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "starling/hash.h"

#define WAL_MAGIC "SLWAL\0\0\1"
#define SNAP_MAGIC "SLSNAP\0\1"
#define MAGIC_LEN 8
#define REC_HDR 9 /* u32 len, u32 crc, u8 type */
#define SNAP_HDR (MAGIC_LEN + 8 + 4 + 1)

struct sl_disk {
    char *dir;              /* directory */
    int dir_fd;             /* open for fsync after renames */
    int wal_fd;             /* log, open for append after recovery; -1 before */
    uint8_t *buf;           /* queued records, encoded */
    size_t buf_len;         /* bytes queued */
    size_t buf_cap;         /* allocated */
    bool recovered;         /* sl_disk_recover ran */
    uint8_t chunk_dirs[32]; /* blobs/xx directories to fsync at the next sl_disk_chunk_sync_dirs (bit xx) */
    bool blobs_dir_new;     /* blobs/ to fsync then too (it may have gained a directory) */
    sl_disk_stats_t st;     /* counters */
};

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

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

static sl_err write_all(int fd, const void *buf, size_t len) {
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return SL_EIO;
        p += n;
        len -= (size_t)n;
    }
    return SL_OK;
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

/* Writes `path` atomically: tmp file, fsync, rename, directory fsync. */
static sl_err write_atomic(sl_disk_t *d, const char *path, const void *a, size_t alen,
                           const void *b, size_t blen) {
    size_t n = strlen(path) + 5;
    char *tmp = sl_malloc(n);
    if (!tmp)
        return SL_ENOMEM;
    snprintf(tmp, n, "%s.tmp", path);
    sl_err err = SL_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        err = io_err("cannot create", tmp);
        goto fail;
    }
    if (write_all(fd, a, alen) || write_all(fd, b, blen) || fsync(fd) != 0) {
        err = io_err("cannot write", tmp);
        close(fd);
        unlink(tmp);
        goto fail;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        err = io_err("cannot rename", tmp);
        unlink(tmp);
        goto fail;
    }
    /* make the rename durable: fsync the directory that holds it */
    char *slash = strrchr(tmp, '/');
    int dfd = d->dir_fd;
    if (slash) {
        *slash = 0;
        dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    if (dfd < 0 || fsync(dfd) != 0)
        err = io_err("cannot sync directory of", path);
    if (dfd >= 0 && dfd != d->dir_fd)
        close(dfd);
fail:
    sl_free(tmp);
    return err;
}

static sl_err bump_incarnation(sl_disk_t *d) {
    char *path = path_of(d, "incarnation");
    if (!path)
        return SL_ENOMEM;
    uint8_t *buf;
    size_t len;
    uint64_t inc = 0;
    sl_err err = read_file(path, &buf, &len);
    if (err == SL_OK) {
        if (len != 12 || sl_crc32(0, buf, 8) != get32(buf + 8)) {
            sl_log(SL_LOG_ERR, "DISK-INCARNATION",
                   "%s is corrupt: refusing to start (a reused incarnation could reissue "
                   "dots); restore it or remove the directory", path);
            err = SL_ECORRUPT;
        } else {
            inc = get64(buf);
        }
        sl_free(buf);
    } else if (err == SL_ENOTFOUND) {
        err = SL_OK;
    }
    if (!err) {
        uint8_t rec[12];
        put64(rec, inc + 1);
        put32(rec + 8, sl_crc32(0, rec, 8));
        err = write_atomic(d, path, rec, sizeof rec, NULL, 0);
        if (!err)
            d->st.incarnation = inc + 1;
    }
    sl_free(path);
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
    sl_err err = bump_incarnation(d);
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

void sl_disk_stats(const sl_disk_t *d, sl_disk_stats_t *out) { *out = d->st; }

static sl_err load_snapshot(sl_disk_t *d, sl_disk_record_fn fn, void *ctx) {
    char *path = path_of(d, "snapshot");
    if (!path)
        return SL_ENOMEM;
    uint8_t *buf;
    size_t len;
    sl_err err = read_file(path, &buf, &len);
    if (err == SL_ENOTFOUND) {
        sl_free(path);
        return SL_OK;
    }
    if (err) {
        sl_free(path);
        return err;
    }
    const char *why = NULL;
    if (len < SNAP_HDR || memcmp(buf, SNAP_MAGIC, MAGIC_LEN) != 0)
        why = "bad header";
    else if (get64(buf + MAGIC_LEN) != len - SNAP_HDR)
        why = "wrong length (truncated?)";
    else if (sl_crc32(sl_crc32(0, buf + SNAP_HDR - 1, 1), buf + SNAP_HDR, len - SNAP_HDR) !=
             get32(buf + MAGIC_LEN + 8))
        why = "checksum mismatch";
    if (why) {
        d->st.snapshot_rejected++;
        char bad[64];
        snprintf(bad, sizeof bad, "snapshot.bad.%" PRIu64, d->st.incarnation);
        char *bad_path = path_of(d, bad);
        sl_log(SL_LOG_ERR, "DISK-SNAPSHOT-CORRUPT",
               "snapshot %s refused (%s): moved to %s; replaying the log, peers resend the rest",
               path, why, bad_path ? bad_path : bad);
        if (bad_path && rename(path, bad_path) == 0)
            fsync(d->dir_fd);
        sl_free(bad_path);
    } else {
        err = fn(ctx, buf[SNAP_HDR - 1], buf + SNAP_HDR, len - SNAP_HDR);
        if (!err)
            d->st.snapshot_loaded = 1;
    }
    sl_free(buf);
    sl_free(path);
    return err;
}

/* Keeps the bytes after `off` in wal.tail.OFF, then cuts the log there. */
static sl_err cut_wal(sl_disk_t *d, const char *path, const uint8_t *buf, size_t len, size_t off) {
    char name[64];
    snprintf(name, sizeof name, "wal.tail.%zu.%" PRIu64, off, d->st.incarnation);
    char *tail = path_of(d, name);
    if (!tail)
        return SL_ENOMEM;
    sl_err err = write_atomic(d, tail, buf + off, len - off, NULL, 0);
    sl_free(tail);
    if (err)
        return err;
    if (truncate(path, (off_t)off) != 0)
        return io_err("cannot cut", path);
    d->st.bytes_cut += len - off;
    return SL_OK;
}

sl_err sl_disk_recover(sl_disk_t *d, sl_disk_record_fn fn, void *ctx) {
    if (d->recovered)
        return SL_ESTATE;
    sl_err err = load_snapshot(d, fn, ctx);
    if (err)
        return err;
    char *path = path_of(d, "wal");
    if (!path)
        return SL_ENOMEM;
    uint8_t *buf = NULL;
    size_t len = 0;
    err = read_file(path, &buf, &len);
    if (err == SL_ENOTFOUND)
        err = SL_OK;
    if (err)
        goto fail;
    size_t off = 0;
    if (len >= MAGIC_LEN && memcmp(buf, WAL_MAGIC, MAGIC_LEN) == 0) {
        off = MAGIC_LEN;
    } else if (len > 0) {
        /* a torn header (crash while creating) or not our file */
        bool prefix = memcmp(buf, WAL_MAGIC, len < MAGIC_LEN ? len : MAGIC_LEN) == 0;
        if (!prefix || len >= MAGIC_LEN) {
            sl_log(SL_LOG_ERR, "DISK-CORRUPT", "%s: bad header, log moved aside", path);
            d->st.corrupt++;
        } else {
            d->st.torn++;
        }
        if ((err = cut_wal(d, path, buf, len, 0)))
            goto fail;
        len = 0;
    }
    while (off < len) {
        size_t left = len - off;
        const char *why = NULL;
        bool torn = false;
        uint32_t rlen = 0;
        if (left < REC_HDR) {
            why = "record header cut short";
            torn = true;
        } else {
            rlen = get32(buf + off);
            if (rlen > SL_DISK_MAX_RECORD) {
                why = "record length over the limit";
            } else if (left - REC_HDR < rlen) {
                why = "record cut short";
                torn = true;
            } else {
                uint32_t crc = sl_crc32(0, buf + off, 4);
                crc = sl_crc32(crc, buf + off + 8, 1 + (size_t)rlen);
                if (crc != get32(buf + off + 4))
                    why = "checksum mismatch";
            }
        }
        if (why) {
            if (torn) {
                d->st.torn++;
                sl_log(SL_LOG_WARNING, "DISK-TORN",
                       "%s: torn tail at byte %zu (%s): cut, %zu bytes kept in wal.tail.*",
                       path, off, why, left);
            } else {
                d->st.corrupt++;
                sl_log(SL_LOG_ERR, "DISK-CORRUPT",
                       "%s: corrupt record at byte %zu (%s): log cut there, %zu bytes kept in "
                       "wal.tail.*; peers resend what followed",
                       path, off, why, left);
            }
            if ((err = cut_wal(d, path, buf, len, off)))
                goto fail;
            len = off;
            break;
        }
        err = fn(ctx, buf[off + 8], buf + off + REC_HDR, rlen);
        if (err)
            goto fail;
        d->st.records_replayed++;
        off += REC_HDR + rlen;
    }
    d->wal_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (d->wal_fd < 0) {
        err = io_err("cannot open", path);
        goto fail;
    }
    if (len == 0) {
        if (ftruncate(d->wal_fd, 0) != 0 || write_all(d->wal_fd, WAL_MAGIC, MAGIC_LEN) ||
            fdatasync(d->wal_fd) != 0 || fsync(d->dir_fd) != 0) {
            err = io_err("cannot start", path);
            goto fail;
        }
        len = MAGIC_LEN;
    }
    d->st.wal_bytes = len;
    d->recovered = true;
fail:
    sl_free(buf);
    sl_free(path);
    return err;
}

sl_err sl_disk_append(sl_disk_t *d, uint8_t type, const void *body, size_t len) {
    if (!d->recovered)
        return SL_ESTATE;
    if (len > SL_DISK_MAX_RECORD)
        return SL_ETOOBIG;
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
    uint8_t *p = d->buf + d->buf_len;
    put32(p, (uint32_t)len);
    p[8] = type;
    if (len)
        memcpy(p + REC_HDR, body, len);
    uint32_t crc = sl_crc32(0, p, 4);
    crc = sl_crc32(crc, p + 8, 1 + len);
    put32(p + 4, crc);
    d->buf_len = need;
    d->st.appended++;
    return SL_OK;
}

sl_err sl_disk_sync(sl_disk_t *d) {
    if (!d->recovered)
        return SL_ESTATE;
    if (!d->buf_len)
        return SL_OK;
    if (write_all(d->wal_fd, d->buf, d->buf_len) || fdatasync(d->wal_fd) != 0)
        return io_err("cannot write", "wal");
    d->st.wal_bytes += d->buf_len;
    d->st.syncs++;
    d->buf_len = 0;
    return SL_OK;
}

sl_err sl_disk_snapshot(sl_disk_t *d, uint8_t type, const void *body, size_t len) {
    sl_err err = sl_disk_sync(d);
    if (err)
        return err;
    uint8_t hdr[SNAP_HDR];
    memcpy(hdr, SNAP_MAGIC, MAGIC_LEN);
    put64(hdr + MAGIC_LEN, len);
    hdr[SNAP_HDR - 1] = type;
    put32(hdr + MAGIC_LEN + 8, sl_crc32(sl_crc32(0, &type, 1), body, len));
    char *path = path_of(d, "snapshot");
    if (!path)
        return SL_ENOMEM;
    err = write_atomic(d, path, hdr, sizeof hdr, body, len);
    sl_free(path);
    if (err)
        return err;
    /* the snapshot holds everything the log did: empty the log */
    if (ftruncate(d->wal_fd, MAGIC_LEN) != 0 || fdatasync(d->wal_fd) != 0)
        return io_err("cannot reset", "wal");
    d->st.wal_bytes = MAGIC_LEN;
    return SL_OK;
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
