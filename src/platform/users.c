/* Users: looking one up by name, and what it may reach. The study's
 * command trials run as a user of their own (peer --trial-user): the peer
 * hands that user its trial's directory and checks that it can reach the
 * data directory (src/study/study_worker.c). */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "starling/platform.h"

sl_err sl_plat_user_find(const char *name, sl_plat_user_t *out, gid_t *groups, int cap) {
    memset(out, 0, sizeof *out);
    char buf[16384];
    struct passwd pw, *found = NULL;
    if (getpwnam_r(name, &pw, buf, sizeof buf, &found) != 0 || !found)
        return SL_ENOTFOUND;
    int count = cap;
    if (getgrouplist(name, pw.pw_gid, groups, &count) < 0)
        return SL_ETOOBIG;
    out->uid = pw.pw_uid;
    out->gid = pw.pw_gid;
    out->groups = groups;
    out->group_count = count;
    return SL_OK;
}

uid_t sl_plat_euid(void) { return geteuid(); }

sl_err sl_plat_realpath(const char *path, char *out, size_t cap) {
    char *r = realpath(path, NULL);
    if (!r)
        return errno == ENOENT ? SL_ENOTFOUND : SL_EINVAL;
    size_t n = strlen(r);
    sl_err err = n < cap ? SL_OK : SL_ETOOBIG;
    if (!err)
        memcpy(out, r, n + 1);
    free(r); /* (realpath's, not ours: malloc'd by libc) */
    return err;
}

bool sl_plat_user_can_search(const sl_plat_user_t *u, const char *dir) {
    struct stat st;
    if (stat(dir, &st) != 0)
        return true; /* what cannot be seen is not refused here */
    bool in_group = st.st_gid == u->gid;
    for (int i = 0; i < u->group_count; i++)
        in_group |= st.st_gid == u->groups[i];
    return st.st_uid == u->uid ? (st.st_mode & S_IXUSR)
           : in_group          ? (st.st_mode & S_IXGRP)
                               : (st.st_mode & S_IXOTH);
}

void sl_plat_make_searchable(const char *dir) {
    struct stat st;
    if (stat(dir, &st) == 0 && !(st.st_mode & S_IXOTH))
        chmod(dir, (st.st_mode & 07777) | S_IXOTH);
}

bool sl_plat_chown(const char *path, uid_t uid, gid_t gid) { return chown(path, uid, gid) == 0; }
