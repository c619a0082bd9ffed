/* Small files: whole-file reads with a size cap, atomic writes, mkdir -p. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

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
