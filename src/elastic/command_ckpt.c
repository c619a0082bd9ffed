/* A command job's checkpoints (docs/elastic.md "Command jobs"): the
 * script saves them in STARLING_CHECKPOINT_DIR, a directory of each peer;
 * the node of rank 0 replicates that directory as blobs, named by
 * job/J/ckpt with a generation number (the record's "step"), and every
 * peer restores the newest generation into its own directory before a
 * world's command starts there, so any member (a survivor that was not
 * rank 0, a fresh peer) resumes from it. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "elastic/elastic_node_internal.h"
#include "starling/platform.h"

#define MAX_FILES 16        /* files of a checkpoint directory replicated */
#define SCAN_MS 250         /* how often rank 0's directory is looked at */
#define STORE_GAP_MS 1000   /* and stored at most this often (a script may checkpoint
                               many times a second) */
#define GEN_FILE ".starling-generation" /* the generation the directory holds */

void sl_en_cmd_ckpt_dir(const en_job_t *j, char *out, size_t cap) {
    snprintf(out, cap, "%.580s/ckpt", j->dir);
}

/* The generation the directory holds (0: none known). */
static uint64_t dir_generation(const char *dir) {
    char p[700], text[32];
    snprintf(p, sizeof p, "%.600s/" GEN_FILE, dir);
    uint8_t *data = NULL;
    size_t len = 0;
    unsigned long long g = 0;
    if (sl_plat_read_file(p, 24, &data, &len) == SL_OK) {
        memcpy(text, data, len);
        text[len] = 0;
        if (sscanf(text, "%llu", &g) != 1)
            g = 0;
    }
    sl_free(data);
    return g;
}

static void set_dir_generation(const char *dir, uint64_t g) {
    char p[700], text[32];
    snprintf(p, sizeof p, "%.600s/" GEN_FILE, dir);
    int n = snprintf(text, sizeof text, "%" PRIu64 "\n", g);
    sl_plat_write_file(p, text, (size_t)n, 0600);
}

/* A fingerprint of the directory's files (names, sizes, times). */
static uint64_t dir_print(const char *dir, int *count) {
    char names[MAX_FILES][128];
    int n = sl_plat_dir_files(dir, names, MAX_FILES);
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        char p[800];
        sl_plat_file_info_t st;
        snprintf(p, sizeof p, "%.600s/%.127s", dir, names[i]);
        if (sl_plat_file_info(p, &st) != SL_OK)
            continue;
        h = sl_hash64(names[i], strlen(names[i]), h);
        uint64_t v[3] = {st.len, st.mtime_s, st.mtime_ns};
        h = sl_hash64(v, sizeof v, h);
    }
    *count = n;
    return h;
}

void sl_en_cmd_ckpt_scan(sl_elastic_node_t *en, en_job_t *j, uint64_t now) {
    if (!j->in_world || j->world.rank != 0 || now < j->ck_scan_ms)
        return;
    j->ck_scan_ms = now + SCAN_MS;
    char dir[640];
    sl_en_cmd_ckpt_dir(j, dir, sizeof dir);
    int n;
    uint64_t print = dir_print(dir, &n);
    /* Any moment's files are whole checkpoints: the script writes each
       atomically (a temporary name, left out here, then a rename). A file
       removed while it is stored fails this turn's copy; the next takes
       the directory again. (Waiting for it to hold still does not work: a
       script that checkpoints every few hundred milliseconds never does.) */
    if (n == 0 || print == j->ck_stored || now < j->ck_stored_ms + STORE_GAP_MS)
        return;
    char names[MAX_FILES][128];
    n = sl_plat_dir_files(dir, names, MAX_FILES);
    cJSON *o = cJSON_CreateObject(), *files = cJSON_AddObjectToObject(o, "files");
    for (int i = 0; i < n; i++) {
        char p[800], hex[2 * SL_BLAKE2B_LEN + 1];
        uint8_t h[SL_BLAKE2B_LEN];
        snprintf(p, sizeof p, "%.600s/%.127s", dir, names[i]);
        sl_err err = sl_blob_node_put_file(en->cfg.blobs, p, h);
        if (err != SL_OK) {
            sl_en_log(en, j, "cannot store checkpoint file %s: %s", names[i], sl_strerror(err));
            cJSON_Delete(o);
            return;
        }
        sl_hex(h, sizeof h, hex);
        cJSON_AddStringToObject(files, names[i], hex);
    }
    uint64_t gen = (j->has_ckpt ? j->ckpt_step : 0) + 1;
    cJSON_AddNumberToObject(o, "step", (double)gen);
    cJSON_AddNumberToObject(o, "round", (double)j->world.world.round);
    cJSON_AddNumberToObject(o, "wall_ms", (double)now);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    sl_elastic_key_t k = {.kind = SL_ELASTIC_KEY_CKPT};
    if (text && sl_en_put(en, j, &k, text, strlen(text)) == SL_OK) {
        j->ck_stored = print;
        j->ck_stored_ms = now;
        j->has_ckpt = true;
        j->ckpt_step = gen;
        set_dir_generation(dir, gen);
        sl_en_log(en, j, "checkpoint generation %" PRIu64 " stored (%d files)", gen, n);
    }
    cJSON_free(text);
}

/* ---- restoring the newest generation ---- */

typedef struct {
    sl_elastic_node_t *en;
    char id[SL_ELASTIC_JOB_ID_LEN + 1];
    uint64_t gen;
    int count, next;
    char names[MAX_FILES][128];
    uint8_t hashes[MAX_FILES][SL_BLAKE2B_LEN];
    char dir[640];
    sl_en_restored_fn done;                 /* told when the copy ends, or cannot go on */
} restore_t;

static void restore_next(restore_t *r);

static void on_copied(void *ctx, sl_err err, const uint8_t hash[SL_BLAKE2B_LEN]) {
    (void)hash;
    restore_t *r = ctx;
    en_job_t *j = sl_en_find(r->en, r->id, SL_ELASTIC_JOB_ID_LEN);
    if (err != SL_OK || !j) {
        if (j) {
            sl_en_log(r->en, j, "cannot copy checkpoint file %s: %s", r->names[r->next - 1],
                      sl_strerror(err));
            r->done(r->en, j, false);
        }
        sl_free(r);
        return;
    }
    restore_next(r);
}

static void restore_next(restore_t *r) {
    en_job_t *j = sl_en_find(r->en, r->id, SL_ELASTIC_JOB_ID_LEN);
    if (!j) {
        sl_free(r);
        return;
    }
    if (r->next == r->count) {
        set_dir_generation(r->dir, r->gen);
        sl_en_log(r->en, j, "checkpoint generation %" PRIu64 " restored (%d files)", r->gen,
                  r->count);
        r->done(r->en, j, true);
        sl_free(r);
        return;
    }
    int i = r->next++;
    char p[800];
    snprintf(p, sizeof p, "%.600s/%.127s", r->dir, r->names[i]);
    sl_err err = sl_blob_node_get_file(r->en->cfg.blobs, r->hashes[i], p, on_copied, r);
    if (err != SL_OK)
        on_copied(r, err, r->hashes[i]);
}

bool sl_en_cmd_ckpt_restore(sl_elastic_node_t *en, en_job_t *j, sl_en_restored_fn done) {
    char dir[640];
    sl_en_cmd_ckpt_dir(j, dir, sizeof dir);
    sl_plat_mkdirs(dir, 0700);
    if (!j->has_ckpt || dir_generation(dir) == j->ckpt_step)
        return false; /* nothing newer to copy */
    char key[64];
    int kl = snprintf(key, sizeof key, "job/%s/ckpt", j->id);
    const uint8_t *v;
    size_t len;
    if (sl_store_get(sl_store_node_store(en->store), key, (size_t)kl, &v, &len) != SL_OK)
        return false;
    cJSON *o = cJSON_ParseWithLength((const char *)v, len);
    const cJSON *files = cJSON_GetObjectItem(o, "files"), *f;
    restore_t *r = sl_calloc(1, sizeof *r);
    bool ok = r && cJSON_IsObject(files);
    cJSON_ArrayForEach(f, files) {
        ok = ok && r->count < MAX_FILES && cJSON_IsString(f) &&
             strlen(f->valuestring) == 2 * SL_BLAKE2B_LEN && strlen(f->string) < 128 &&
             f->string[0] && f->string[0] != '.' && !strchr(f->string, '/') &&
             sl_unhex(f->valuestring, 2 * SL_BLAKE2B_LEN, r->hashes[r->count]);
        if (ok)
            snprintf(r->names[r->count++], sizeof r->names[0], "%s", f->string);
    }
    cJSON_Delete(o);
    if (!ok) {
        sl_free(r);
        sl_en_log(en, j, "the checkpoint record names no files this peer can restore");
        return false;
    }
    /* the directory holds what the generation holds, nothing older */
    sl_plat_dir_clear(dir);
    r->en = en;
    memcpy(r->id, j->id, sizeof r->id);
    r->gen = j->ckpt_step;
    r->done = done;
    memcpy(r->dir, dir, sizeof r->dir);
    j->fetching = true;
    restore_next(r);
    return true;
}
