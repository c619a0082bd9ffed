/* Small files: whole-file reads with a size cap (gunzipped when gzip),
 * atomic writes, mkdir -p, what a path names (and whether it can be read,
 * its size and time), a directory's files. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/why.h"
#include "starling/platform.h"

sl_err sl_plat_read_file(const char *path, size_t max_len, uint8_t **data, size_t *len) {
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? SL_ENOTFOUND : SL_EIO;
    sl_err err = SL_EIO;
    uint8_t *buf = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0)
        goto fail;
    if ((uint64_t)st.st_size > max_len) {
        err = SL_ETOOBIG;
        goto fail;
    }
    buf = sl_malloc((size_t)st.st_size + 1);
    if (!buf) {
        err = SL_ENOMEM;
        goto fail;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = 0;
    close(fd);
    *data = buf;
    *len = got;
    return SL_OK;
fail:
    sl_free(buf);
    close(fd);
    return err;
}

sl_err sl_plat_read_file_gz(const char *path, size_t max_len, uint8_t **out, size_t *out_len,
                            char *why, size_t why_len) {
    *out = NULL;
    *out_len = 0;
    struct stat st;
    if (stat(path, &st) != 0)
        return sl_why(why, why_len, errno == ENOENT ? SL_ENOTFOUND : SL_EIO, "%s: %s", path,
                      strerror(errno));
    if (S_ISDIR(st.st_mode))
        return sl_why(why, why_len, SL_EINVAL, "%s: is a directory, not a data file", path);
    gzFile f = gzopen(path, "rb");
    if (!f)
        return sl_why(why, why_len, SL_EIO, "%s: cannot open: %s", path, strerror(errno));
    gzbuffer(f, 1 << 17);
    size_t cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 4096, len = 0;
    /* A gzip file ends with its uncompressed size mod 2^32: size the
     * buffer from it, so reading never doubles it (one copy in memory). */
    FILE *raw = fopen(path, "rb");
    if (raw) {
        uint8_t head[2], tail[4];
        if (fread(head, 1, 2, raw) == 2 && head[0] == 0x1f && head[1] == 0x8b &&
            fseek(raw, -4, SEEK_END) == 0 && fread(tail, 1, 4, raw) == 4) {
            size_t isize = (size_t)tail[0] | (size_t)tail[1] << 8 | (size_t)tail[2] << 16 |
                           (size_t)tail[3] << 24;
            if (isize + 1 > cap && isize < max_len)
                cap = isize + 1;
        }
        fclose(raw);
    }
    uint8_t *buf = sl_malloc(cap);
    sl_err err = SL_ENOMEM;
    if (!buf)
        goto fail;
    for (;;) {
        if (len == cap) {
            if (cap >= max_len) {
                err = sl_why(why, why_len, SL_ETOOBIG, "%s: larger than %zu MiB", path,
                             max_len >> 20);
                goto fail;
            }
            uint8_t *nb = sl_realloc(buf, cap * 2);
            if (!nb)
                goto fail;
            buf = nb;
            cap *= 2;
        }
        size_t want = cap - len > (1u << 30) ? (1u << 30) : cap - len;
        int n = gzread(f, buf + len, (unsigned)want);
        if (n < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            err = sl_why(why, why_len, zerr == Z_BUF_ERROR ? SL_ETRUNC : SL_ECORRUPT,
                         "%s: %s (corrupt or truncated gzip data)", path,
                         msg ? msg : "read error");
            goto fail;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    int zerr;
    const char *msg = gzerror(f, &zerr);
    if (zerr != Z_OK && zerr != Z_STREAM_END) {
        err = sl_why(why, why_len, zerr == Z_BUF_ERROR ? SL_ETRUNC : SL_ECORRUPT,
                     "%s: %s (corrupt or truncated gzip data)", path, msg ? msg : "");
        goto fail;
    }
    gzclose(f);
    *out = buf;
    *out_len = len;
    return SL_OK;
fail:
    if (err == SL_ENOMEM)
        sl_why(why, why_len, err, "%s: out of memory reading it", path);
    gzclose(f);
    sl_free(buf);
    return err;
}

void sl_plat_remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (!S_ISDIR(st.st_mode)) {
        unlink(path);
        return;
    }
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char p[4096];
            if (snprintf(p, sizeof p, "%s/%s", path, e->d_name) < (int)sizeof p)
                sl_plat_remove_tree(p);
        }
        closedir(d);
    }
    rmdir(path);
}

void sl_plat_sync_parent_dir(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = 0;
    else if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

sl_err sl_plat_write_file(const char *path, const void *data, size_t len, unsigned mode) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return SL_EINVAL;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return SL_EIO;
    const uint8_t *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto fail;
        p += n;
        left -= (size_t)n;
    }
    if (fsync(fd) != 0)
        goto fail;
    close(fd);
    fd = -1;
    if (rename(tmp, path) != 0)
        goto fail;
    sl_plat_sync_parent_dir(path); /* make the rename durable */
    return SL_OK;
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return SL_EIO;
}

sl_err sl_plat_mkdirs(const char *path, unsigned mode) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return SL_EINVAL;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, mode) != 0 && errno != EEXIST)
                return SL_EIO;
            buf[i] = c;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return SL_EIO;
    return SL_OK;
}

bool sl_plat_file_is_shared(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0)
        return false;
    return (st.st_mode & (S_IRGRP | S_IROTH)) != 0;
}

sl_err sl_plat_lock(const char *path, int *fd) {
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (*fd < 0)
        return SL_EIO;
    if (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
        sl_err err = errno == EWOULDBLOCK ? SL_EBUSY : SL_EIO;
        close(*fd);
        *fd = -1;
        return err;
    }
    return SL_OK;
}

void sl_plat_unlock(int *fd) {
    if (*fd >= 0) {
        flock(*fd, LOCK_UN);
        close(*fd);
    }
    *fd = -1;
}

bool sl_plat_can_read(const char *path) { return access(path, R_OK) == 0; }

sl_err sl_plat_file_info(const char *path, sl_plat_file_info_t *out) {
    struct stat st;
    if (stat(path, &st) != 0)
        return SL_ENOTFOUND;
    out->len = (uint64_t)st.st_size;
    out->mtime_s = (uint64_t)st.st_mtim.tv_sec;
    out->mtime_ns = (uint64_t)st.st_mtim.tv_nsec;
    return SL_OK;
}

sl_plat_path_kind_t sl_plat_path_kind(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0)
        return SL_PLAT_PATH_NONE;
    return S_ISDIR(st.st_mode) ? SL_PLAT_PATH_DIR : SL_PLAT_PATH_FILE;
}

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

int sl_plat_dir_files(const char *dir, char names[][128], int max) {
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d))) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= 128 || strstr(e->d_name, ".tmp"))
            continue;
        char p[4096 + 300];
        struct stat st;
        snprintf(p, sizeof p, "%.1100s/%.127s", dir, e->d_name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
            snprintf(names[n++], 128, "%.127s", e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    return n;
}

void sl_plat_dir_clear(const char *dir) {
    char names[64][128];
    int n = sl_plat_dir_files(dir, names, 64);
    for (int i = 0; i < n; i++) {
        char p[4096 + 300];
        snprintf(p, sizeof p, "%.1100s/%.127s", dir, names[i]);
        unlink(p);
    }
}

bool sl_plat_dir_empty(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool empty = true;
    struct dirent *e;
    while (empty && (e = readdir(d)))
        empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    return empty;
}
