/* Trial checkpoints as blobs (docs/studies.md, "Checkpoints and
 * takeover"). A checkpoint directory's files, concatenated in name order,
 * after a line naming the study, trial and epoch, are one blob kept on R
 * peers; the trial's manifest register
 *   study/S/t/T/ck   {"epoch":E,"blob":HEX,"head":N,"files":[[NAME,LEN],...]}
 * says where the files start (after N bytes) and how long each is
 * names the latest checkpoint that has its R copies (or one copy on each
 * alive member, when fewer are alive). So a new checkpoint is written
 * first, the manifest follows once it is replicated, and the previous
 * blob is deleted last: whoever takes the trial over always finds a
 * manifest whose blob survives the loss of the writer.
 *
 * A checkpoint of at most INLINE_MAX bytes (a command trial's few bytes of
 * state) rides in the manifest itself, {"epoch":E,"inline":HEX,"files":..}:
 * the store gives every peer a copy at once, where a blob would cost a
 * put, R copies recorded, the old one's copies removed and its deletion,
 * each a store write pushed to every peer, for every epoch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "starling/hash.h"
#include "starling/platform.h"
#include "study/study_keys.h"
#include "study/study_node_internal.h"

#define MAX_FILE_LEN (256u << 20)
#define RESTORE_TRIES 3
#define INLINE_MAX 1024

/* ---- writing ---- */

static sl_err manifest_key(const char *study, const char *trial, char key[SL_STUDY_KEY_MAX]) {
    return sl_study_key_build(key, SL_STUDY_KEY_MAX, SL_STUDY_KEY_CKPT, study, trial, 0, NULL);
}

static void pending_free(ck_pending_t *p) {
    sl_free(p->manifest);
    memset(p, 0, sizeof *p);
}

/* Reads the directory's files into one buffer and describes them. */
static sl_err pack(const char *dir, const char *head, uint8_t **out, size_t *out_len,
                   cJSON *files) {
    char names[MAX_FILES][128];
    int n = sl_study_dir_files(dir, names, MAX_FILES);
    if (n <= 0)
        return SL_ENOTFOUND; /* (in name order: the blob's layout) */
    size_t len = strlen(head);
    uint8_t *buf = sl_malloc(len + 1);
    if (!buf)
        return SL_ENOMEM;
    memcpy(buf, head, len);
    for (int i = 0; i < n; i++) {
        char p[1300];
        snprintf(p, sizeof p, "%.1100s/%.127s", dir, names[i]);
        uint8_t *data;
        size_t dl;
        sl_err err = sl_plat_read_file(p, MAX_FILE_LEN, &data, &dl);
        if (err) {
            sl_free(buf);
            return err;
        }
        uint8_t *nb = sl_realloc(buf, len + dl + 1);
        if (!nb) {
            sl_free(data);
            sl_free(buf);
            return SL_ENOMEM;
        }
        buf = nb;
        memcpy(buf + len, data, dl);
        len += dl;
        sl_free(data);
        cJSON *f = cJSON_CreateArray();
        cJSON_AddItemToArray(f, cJSON_CreateString(names[i]));
        cJSON_AddItemToArray(f, cJSON_CreateNumber((double)dl));
        cJSON_AddItemToArray(files, f);
    }
    *out = buf;
    *out_len = len;
    return SL_OK;
}

/* The blob a manifest names (false: none or malformed). */
static bool manifest_blob(const uint8_t *v, size_t len, uint8_t hash[SL_BLAKE2B_LEN]) {
    cJSON *man = cJSON_ParseWithLength((const char *)v, len);
    const char *hex = cJSON_GetStringValue(cJSON_GetObjectItem(man, "blob"));
    bool ok = hex && strlen(hex) == 2 * SL_BLAKE2B_LEN && sl_unhex(hex, strlen(hex), hash);
    cJSON_Delete(man);
    return ok;
}

/* The pending blob checkpoint of a trial, if any. */
static ck_pending_t *pending_of(sl_study_node_t *sn, const char *study, const char *trial) {
    for (int i = 0; i < MAX_PENDING; i++)
        if (!strcmp(sn->pending[i].study, study) && !strcmp(sn->pending[i].trial, trial))
            return &sn->pending[i];
    return NULL;
}

/* A small checkpoint: its manifest carries the files (takes `man`). */
static void write_inline(sl_study_node_t *sn, const char *study, const char *trial, cJSON *man,
                         int epoch, const uint8_t *data, size_t len) {
    char *hex = sl_malloc(2 * len + 1), *txt = NULL;
    if (hex) {
        sl_hex(data, len, hex);
        cJSON_AddNumberToObject(man, "epoch", epoch);
        cJSON_AddStringToObject(man, "inline", hex);
        txt = cJSON_PrintUnformatted(man);
    }
    sl_free(hex);
    cJSON_Delete(man);
    char key[SL_STUDY_KEY_MAX];
    bool keyed = manifest_key(study, trial, key) == SL_OK;
    const uint8_t *old;
    size_t ol;
    uint8_t prev[SL_BLAKE2B_LEN];
    bool had = keyed && sl_study_node_get_str(sn, key, &old, &ol) == SL_OK &&
               manifest_blob(old, ol, prev);
    if (!txt || !keyed || sl_study_node_put_str(sn, key, txt, strlen(txt)) != SL_OK) {
        sl_log(SL_LOG_WARNING, "STUDY-CKPT", "trial %s: cannot store the checkpoint of epoch %d; "
               "the previous one stays", trial, epoch);
        free(txt);
        return;
    }
    free(txt);
    /* what it replaces: a blob checkpoint, and one still waiting for copies */
    if (had)
        sl_blob_node_delete(sn->cfg.blobs, prev);
    ck_pending_t *p = pending_of(sn, study, trial);
    if (p) {
        sl_blob_node_delete(sn->cfg.blobs, p->hash);
        pending_free(p);
    }
}

void sl_study_ckpt_write(sl_study_node_t *sn, const char *study, const char *trial,
                         const char *dir, int epoch) {
    cJSON *man = cJSON_CreateObject();
    cJSON *files = cJSON_AddArrayToObject(man, "files");
    uint8_t *buf = NULL;
    size_t len = 0;
    uint8_t hash[SL_BLAKE2B_LEN];
    /* blobs are content-addressed: this line makes each trial's each
       epoch its own blob, so deleting one trial's old checkpoint never
       touches another's that happens to hold the same bytes */
    char head[128];
    snprintf(head, sizeof head, "starling checkpoint 1 %s %s %d\n", study, trial, epoch);
    sl_err err = pack(dir, head, &buf, &len, files);
    if (!err && len - strlen(head) <= INLINE_MAX) {
        write_inline(sn, study, trial, man, epoch, buf + strlen(head), len - strlen(head));
        sl_free(buf);
        return;
    }
    if (!err)
        err = sl_blob_node_put(sn->cfg.blobs, buf, len, hash);
    sl_free(buf);
    char *txt = NULL;
    if (!err) {
        char hex[2 * SL_BLAKE2B_LEN + 1];
        sl_hex(hash, SL_BLAKE2B_LEN, hex);
        cJSON_AddNumberToObject(man, "epoch", epoch);
        cJSON_AddStringToObject(man, "blob", hex);
        cJSON_AddNumberToObject(man, "head", (double)strlen(head));
        txt = cJSON_PrintUnformatted(man);
    }
    cJSON_Delete(man);
    if (!txt) {
        if (err != SL_ENOTFOUND) /* an empty directory has nothing to keep */
            sl_log(SL_LOG_WARNING, "STUDY-CKPT", "trial %s: cannot store the checkpoint of epoch "
                   "%d: %s; the previous one stays", trial, epoch, sl_strerror(err ? err : SL_ENOMEM));
        return;
    }
    /* one pending checkpoint per trial: a newer one replaces it */
    ck_pending_t *slot = pending_of(sn, study, trial);
    if (slot && memcmp(slot->hash, hash, SL_BLAKE2B_LEN) != 0)
        sl_blob_node_delete(sn->cfg.blobs, slot->hash);
    for (int i = 0; i < MAX_PENDING && !slot; i++)
        if (!sn->pending[i].study[0])
            slot = &sn->pending[i];
    if (!slot) {
        sl_log(SL_LOG_WARNING, "STUDY-CKPT", "trial %s: %d checkpoints already wait for their "
               "copies; epoch %d's is dropped", trial, MAX_PENDING, epoch);
        sl_blob_node_delete(sn->cfg.blobs, hash);
        free(txt);
        return;
    }
    if (slot->study[0])
        pending_free(slot);
    snprintf(slot->study, sizeof slot->study, "%s", study);
    snprintf(slot->trial, sizeof slot->trial, "%s", trial);
    memcpy(slot->hash, hash, SL_BLAKE2B_LEN);
    slot->epoch = epoch;
    slot->manifest = sl_malloc(strlen(txt) + 1);
    if (slot->manifest)
        memcpy(slot->manifest, txt, strlen(txt) + 1);
    free(txt);
    if (!slot->manifest)
        pending_free(slot);
    sl_study_ckpt_settle(sn);
}

static size_t alive_count(sl_study_node_t *sn) {
    return sl_swim_alive_count(sl_node_swim(sn->node));
}

void sl_study_ckpt_settle(sl_study_node_t *sn) {
    size_t r = sl_blob_node_r(sn->cfg.blobs), alive = alive_count(sn);
    size_t need = r < alive ? r : alive;
    for (int i = 0; i < MAX_PENDING; i++) {
        ck_pending_t *p = &sn->pending[i];
        if (!p->study[0] || sl_blob_node_holders(sn->cfg.blobs, p->hash) < need)
            continue;
        char key[SL_STUDY_KEY_MAX];
        if (manifest_key(p->study, p->trial, key) != SL_OK)
            continue;
        const uint8_t *old;
        size_t ol;
        uint8_t prev[SL_BLAKE2B_LEN];
        bool had = sl_study_node_get_str(sn, key, &old, &ol) == SL_OK && manifest_blob(old, ol, prev);
        if (sl_study_node_put_str(sn, key, p->manifest, strlen(p->manifest)) != SL_OK)
            continue; /* the next tick tries again */
        if (had && memcmp(prev, p->hash, SL_BLAKE2B_LEN) != 0)
            sl_blob_node_delete(sn->cfg.blobs, prev);
        pending_free(p);
    }
}

bool sl_study_ckpt_unsettled(const sl_study_node_t *sn) {
    for (int i = 0; i < MAX_PENDING; i++)
        if (sn->pending[i].study[0])
            return true;
    return false;
}

/* ---- restoring ---- */

struct ck_restore {
    sl_study_node_t *sn;
    char study[SL_TRIAL_ID_LEN + 1];
    char trial[SL_TRIAL_ID_LEN + 1];
    char dir[1100];
    char *manifest;             /* the manifest being restored */
    int tries;                  /* fetches started */
    sl_study_ckpt_done_fn done; /* told once */
    void *ctx;
    ck_restore_t *next;         /* sn->restores */
};

static void restore_end(ck_restore_t *rs, int epoch, const char *why) {
    sl_study_node_t *sn = rs->sn;
    for (ck_restore_t **p = &sn->restores; *p; p = &(*p)->next)
        if (*p == rs) {
            *p = rs->next;
            break;
        }
    if (!epoch)
        sl_study_dir_clear(rs->dir);
    rs->done(sn, rs->ctx, epoch, why);
    sl_free(rs->manifest);
    sl_free(rs);
}

/* Writes a checkpoint's files into the directory from `data` (a blob: its
 * head line, then the files; inline: the files), as the manifest lists
 * them; the epoch, or 0. */
static int unpack(ck_restore_t *rs, const uint8_t *data, size_t len, char *why, size_t cap) {
    cJSON *man = cJSON_Parse(rs->manifest);
    const cJSON *hd = cJSON_GetObjectItem(man, "head"), *f;
    int epoch = sl_study_manifest_epoch(man);
    if (hd && (!cJSON_IsNumber(hd) || hd->valuedouble < 0 || hd->valuedouble > (double)len))
        epoch = 0;
    size_t at = epoch && hd ? (size_t)hd->valuedouble : 0;
    /* (a writer packs at most MAX_FILES) */
    const cJSON *files = cJSON_GetObjectItem(man, "files");
    if (cJSON_GetArraySize(files) > MAX_FILES)
        epoch = 0;
    sl_study_dir_clear(rs->dir);
    cJSON_ArrayForEach(f, files) {
        const cJSON *nm = cJSON_GetArrayItem(f, 0), *ln = cJSON_GetArrayItem(f, 1);
        if (!epoch || !cJSON_IsString(nm) || !cJSON_IsNumber(ln) || ln->valuedouble < 0 ||
            ln->valuedouble > (double)(len - at) || strchr(nm->valuestring, '/') ||
            !nm->valuestring[0] || nm->valuestring[0] == '.') {
            snprintf(why, cap, "the checkpoint manifest does not match its data");
            epoch = 0;
            break;
        }
        char p[1300];
        snprintf(p, sizeof p, "%.1100s/%.127s", rs->dir, nm->valuestring);
        size_t n = (size_t)ln->valuedouble;
        sl_err err = sl_plat_write_file(p, data + at, n, 0600);
        if (err != SL_OK) {
            snprintf(why, cap, "cannot write %.127s: %s", nm->valuestring, sl_strerror(err));
            epoch = 0;
            break;
        }
        at += n;
    }
    if (epoch && at != len) {
        snprintf(why, cap, "the checkpoint manifest does not match its data");
        epoch = 0;
    }
    cJSON_Delete(man);
    return epoch;
}

/* An inline checkpoint: unpacked at once (true), or not inline (false). */
static bool restore_inline(ck_restore_t *rs) {
    cJSON *man = cJSON_Parse(rs->manifest);
    const cJSON *in = cJSON_GetObjectItem(man, "inline");
    if (!in) {
        cJSON_Delete(man);
        return false;
    }
    const char *hex = cJSON_GetStringValue(in);
    size_t hex_len = hex ? strlen(hex) : 0;
    uint8_t data[INLINE_MAX];
    char why[256] = "the inline checkpoint is malformed";
    bool ok = hex && hex_len <= 2 * INLINE_MAX && sl_unhex(hex, hex_len, data);
    int epoch = ok ? unpack(rs, data, hex_len / 2, why, sizeof why) : 0;
    cJSON_Delete(man);
    restore_end(rs, epoch, epoch ? NULL : why);
    return true;
}

static void try_fetch(ck_restore_t *rs);

static void on_fetched(void *ctx, sl_err err, const uint8_t hash[SL_BLAKE2B_LEN]) {
    ck_restore_t *rs = ctx;
    char why[256] = "";
    uint8_t *data;
    size_t len;
    if (err == SL_OK && (err = sl_blob_node_read(rs->sn->cfg.blobs, hash, &data, &len)) != SL_OK) {
        snprintf(why, sizeof why, "cannot read the checkpoint blob: %s", sl_strerror(err));
        restore_end(rs, 0, why);
        return;
    }
    if (err == SL_OK) {
        int epoch = unpack(rs, data, len, why, sizeof why);
        sl_free(data);
        restore_end(rs, epoch, epoch ? NULL : why);
        return;
    }
    /* the writer may have moved on to a newer checkpoint meanwhile */
    if (rs->tries < RESTORE_TRIES) {
        try_fetch(rs);
        return;
    }
    snprintf(why, sizeof why, "no holder could give the checkpoint blob: %s", sl_strerror(err));
    restore_end(rs, 0, why);
}

/* (Re)reads the manifest and fetches its blob. */
static void try_fetch(ck_restore_t *rs) {
    char key[SL_STUDY_KEY_MAX];
    const uint8_t *v;
    size_t vl;
    uint8_t hash[SL_BLAKE2B_LEN];
    if (manifest_key(rs->study, rs->trial, key) != SL_OK ||
        sl_study_node_get_str(rs->sn, key, &v, &vl) != SL_OK) {
        restore_end(rs, 0, NULL); /* no checkpoint: start from the beginning */
        return;
    }
    sl_free(rs->manifest);
    rs->manifest = sl_malloc(vl + 1);
    if (!rs->manifest) {
        restore_end(rs, 0, "out of memory");
        return;
    }
    memcpy(rs->manifest, v, vl);
    rs->manifest[vl] = 0;
    if (restore_inline(rs))
        return;
    if (!manifest_blob(v, vl, hash)) {
        restore_end(rs, 0, "the checkpoint manifest is malformed");
        return;
    }
    rs->tries++;
    sl_err err = sl_blob_node_fetch(rs->sn->cfg.blobs, hash, on_fetched, rs);
    if (err) { /* on_fetched was not called */
        char why[160];
        snprintf(why, sizeof why, "cannot fetch the checkpoint blob: %s", sl_strerror(err));
        restore_end(rs, 0, why);
    }
}

void sl_study_ckpt_restore(sl_study_node_t *sn, const char *study, const char *trial,
                           const char *dir, sl_study_ckpt_done_fn done, void *ctx) {
    ck_restore_t *rs = sl_calloc(1, sizeof *rs);
    if (!rs) {
        done(sn, ctx, 0, "out of memory");
        return;
    }
    rs->sn = sn;
    snprintf(rs->study, sizeof rs->study, "%s", study);
    snprintf(rs->trial, sizeof rs->trial, "%s", trial);
    snprintf(rs->dir, sizeof rs->dir, "%s", dir);
    rs->done = done;
    rs->ctx = ctx;
    rs->next = sn->restores;
    sn->restores = rs;
    try_fetch(rs);
}

void sl_study_ckpt_fini(sl_study_node_t *sn) {
    for (int i = 0; i < MAX_PENDING; i++)
        pending_free(&sn->pending[i]);
    while (sn->restores) { /* the node is gone: only their contexts are let go */
        ck_restore_t *rs = sn->restores;
        sn->restores = rs->next;
        rs->done(sn, rs->ctx, -1, NULL);
        sl_free(rs->manifest);
        sl_free(rs);
    }
}
