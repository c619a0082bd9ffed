/* Studies in the peer daemon: see include/starling/study_node.h and
 * docs/studies.md ("The runtime"). Store keys (all LWW registers; the
 * grow-only maps of the design are one key per entry):
 *   study/S/spec               the study file
 *   study/S/start              wall ms of the submit
 *   study/S/cancel             present: cancelled
 *   study/S/finished           the reason
 *   study/S/t/T                trial record (sl_trial_record_encode)
 *   study/S/t/T/rung/R         a promotion to rung R
 *   study/S/t/T/claim/P        peer P's claim register (sl_claim_encode); readers
 *                              join every peer's with sl_claim_merge, so claim
 *                              epochs only grow whatever order writes land in
 *   study/S/t/T/m/EEEEE        epoch E's report line
 *   study/S/t/T/fail/E         a failure under claim epoch E
 *   study/S/t/T/res/W@E        a result (sl_result_encode); readers merge
 *   study/S/t/T/stop           the leader stops a running trial
 *   study/S/t/T/log/C/P        the log of peer P's run under claim epoch C (C
 *                              zero-padded; tail, text): one writer per key, so
 *                              no line is lost when owners overlap; readers
 *                              join them in key order (sl_study_node_log)
 *   study/S/t/T/ck             checkpoint manifest {"epoch":..,"files":[[name,len,chunks]..]}
 *   study/S/t/T/ckd/E/NAME/C   chunk C of a checkpoint file (<= 60000 bytes)
 * Checkpoints travel as store values in chunks (blob transfer between
 * peers is not wired into the daemon yet: a known shortcut). */
#include "starling/study_node.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "starling/platform.h"
#include "starling/study.h"
#include "study_node_internal.h"

uint64_t sl_study_node_wall_ms(void) { return sl_plat_wall_ms(); }

static const char *self_name(sl_study_node_t *sn) { return sl_node_name(sn->node); }

sl_err sl_study_node_put_str(sl_study_node_t *sn, const char *key, const char *val, size_t len) {
    sl_err err = sl_store_node_put(sn->store, key, strlen(key), val, len);
    if (err != SL_OK)
        sl_log(SL_LOG_WARNING, "STUDY-PUT", "cannot write %s: %s", key, sl_strerror(err));
    return err;
}

sl_err sl_study_node_get_str(sl_study_node_t *sn, const char *key, const uint8_t **v, size_t *len) {
    return sl_store_get(sl_store_node_store(sn->store), key, strlen(key), v, len);
}

/* ---- specs ---- */

const sl_study_spec_t *sl_study_node_spec(sl_study_node_t *sn, const char *id) {
    for (int i = 0; i < MAX_STUDIES; i++)
        if (!strcmp(sn->specs[i].id, id))
            return &sn->specs[i].spec;
    char key[128];
    snprintf(key, sizeof key, "study/%s/spec", id);
    const uint8_t *v;
    size_t len;
    if (sl_study_node_get_str(sn, key, &v, &len) != SL_OK)
        return NULL;
    for (int i = 0; i < MAX_STUDIES; i++)
        if (!sn->specs[i].id[0]) {
            char why[256];
            if (sl_study_spec_parse((const char *)v, len, &sn->specs[i].spec, why, sizeof why) !=
                SL_OK) {
                sl_log(SL_LOG_WARNING, "STUDY-SPEC", "study %s: stored spec refused: %s", id,
                       why);
                return NULL;
            }
            snprintf(sn->specs[i].id, sizeof sn->specs[i].id, "%s", id);
            return &sn->specs[i].spec;
        }
    return NULL;
}

/* Study ids in the store. */
typedef struct {
    char ids[MAX_STUDIES][SL_TRIAL_ID_LEN + 1]; /* found */
    int count;                                  /* used */
} idlist_t;

static bool scan_ids(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e) {
    (void)e;
    idlist_t *l = ctx;
    const char *k = (const char *)key;
    if (key_len == 6 + SL_TRIAL_ID_LEN + 5 && !memcmp(k + 6 + SL_TRIAL_ID_LEN, "/spec", 5) &&
        l->count < MAX_STUDIES) {
        memcpy(l->ids[l->count], k + 6, SL_TRIAL_ID_LEN);
        l->ids[l->count][SL_TRIAL_ID_LEN] = 0;
        l->count++;
    }
    return true;
}

static void list_studies(sl_study_node_t *sn, idlist_t *l) {
    l->count = 0;
    sl_store_scan(sl_store_node_store(sn->store), "study/", 6, scan_ids, l);
}

/* Resolves a study id or name. */
sl_err sl_study_node_resolve(sl_study_node_t *sn, const char *arg, char id[SL_TRIAL_ID_LEN + 1]) {
    idlist_t l;
    list_studies(sn, &l);
    for (int i = 0; i < l.count; i++) {
        const sl_study_spec_t *s = sl_study_node_spec(sn, l.ids[i]);
        if (!strcmp(l.ids[i], arg) || (s && !strcmp(s->name, arg))) {
            memcpy(id, l.ids[i], SL_TRIAL_ID_LEN + 1);
            return SL_OK;
        }
    }
    return SL_ENOTFOUND;
}

/* ---- the view ---- */

void sl_study_view_fini(view_t *v) {
    for (size_t i = 0; i < v->count; i++) {
        sl_free(v->rows[i].curve);
        sl_free(v->rows[i].reports);
        sl_free(v->rows[i].has_report);
    }
    sl_free(v->rows);
    memset(v, 0, sizeof *v);
}

static row_t *row_get(view_t *v, const char *tid, size_t tl) {
    if (tl != SL_TRIAL_ID_LEN)
        return NULL;
    for (size_t i = 0; i < v->count; i++)
        if (!memcmp(v->rows[i].t.id, tid, SL_TRIAL_ID_LEN))
            return &v->rows[i];
    if (v->count == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 32;
        row_t *n = sl_realloc(v->rows, nc * sizeof *n);
        if (!n)
            return NULL;
        v->rows = n;
        v->cap = nc;
    }
    int me = v->spec->max_epochs + 1;
    row_t *r = &v->rows[v->count];
    memset(r, 0, sizeof *r);
    r->curve = sl_calloc((size_t)me, sizeof *r->curve);
    r->reports = sl_calloc((size_t)me, sizeof *r->reports);
    r->has_report = sl_calloc((size_t)me, sizeof *r->has_report);
    if (!r->curve || !r->reports || !r->has_report) {
        sl_free(r->curve);
        sl_free(r->reports);
        sl_free(r->has_report);
        return NULL;
    }
    for (int e = 0; e < me; e++)
        r->curve[e] = NAN;
    memcpy(r->t.id, tid, SL_TRIAL_ID_LEN);
    r->t.curve = r->curve;
    r->t.curve_len = v->spec->max_epochs;
    for (int o = 0; o < SL_STUDY_MAX_OBJECTIVES; o++)
        r->t.objectives[o] = NAN;
    v->count++;
    return r;
}

static bool scan_trials(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e) {
    view_t *v = ctx;
    if (e->type != SL_CRDT_LWW)
        return true;
    size_t pre = 6 + SL_TRIAL_ID_LEN + 3; /* study/S/t/ */
    const char *k = (const char *)key + pre;
    size_t kl = key_len - pre;
    const char *slash = memchr(k, '/', kl);
    size_t tl = slash ? (size_t)(slash - k) : kl;
    row_t *r = row_get(v, k, tl);
    if (!r)
        return true;
    const char *val = (const char *)e->val;
    size_t vl = e->val_len;
    char sub[600];
    snprintf(sub, sizeof sub, "%.*s", slash ? (int)(kl - tl - 1) : 0, slash ? slash + 1 : "");
    char why[128];
    if (!slash) {
        sl_trial_t t;
        if (sl_trial_record_decode(v->spec, v->id, r->t.id, val, vl, &t, why, sizeof why) ==
            SL_OK) {
            int rung = r->t.rung > t.rung ? r->t.rung : t.rung;
            r->t.ordinal = t.ordinal;
            r->t.bracket = t.bracket;
            r->t.config = t.config;
            r->t.rung = rung;
            r->has_record = true;
        }
    } else if (!strncmp(sub, "rung/", 5)) {
        int rung = atoi(sub + 5);
        if (rung > r->t.rung && rung < SL_STUDY_MAX_RUNGS)
            r->t.rung = rung;
    } else if (!strncmp(sub, "claim/", 6)) {
        sl_claim_t c;
        if (sl_claim_decode(val, vl, &c) == SL_OK) {
            if (r->has_claim) {
                sl_claim_t m;
                sl_claim_merge(&r->claim, &c, &m);
                r->claim = m;
            } else {
                r->claim = c;
            }
            r->has_claim = true;
        }
    } else if (!strncmp(sub, "m/", 2)) {
        int ep = atoi(sub + 2);
        sl_report_t rep;
        if (ep >= 1 && ep <= v->spec->max_epochs &&
            sl_report_parse(val, vl, &rep, why, sizeof why) == SL_OK) {
            r->reports[ep - 1] = rep;
            r->has_report[ep - 1] = true;
            r->curve[ep - 1] = sl_report_get(&rep, v->spec->objectives[0].metric);
        }
    } else if (!strncmp(sub, "fail/", 5)) {
        r->failures++;
    } else if (!strncmp(sub, "res/", 4)) {
        sl_result_t res;
        if (sl_result_decode(val, vl, &res) == SL_OK) {
            memcpy(res.trial_id, r->t.id, sizeof res.trial_id);
            if (r->has_result) {
                sl_result_t m;
                sl_result_merge(&r->result, &res, &m);
                r->result = m;
            } else {
                r->result = res;
            }
            r->has_result = true;
        }
    } else if (!strcmp(sub, "stop")) {
        r->stop = true;
    } else if (!strcmp(sub, "ck")) {
        cJSON *j = cJSON_ParseWithLength(val, vl);
        const cJSON *ep = cJSON_GetObjectItem(j, "epoch");
        if (cJSON_IsNumber(ep))
            r->ck_epoch = (int)ep->valuedouble;
        cJSON_Delete(j);
    }
    return true;
}

/* Whether `owner` is alive in this peer's view. */
static bool alive(sl_study_node_t *sn, const char *owner) {
    if (!owner[0])
        return false;
    if (!strcmp(owner, self_name(sn)))
        return true;
    sl_swim_member_t m;
    sl_bytes_t b = {.ptr = (const uint8_t *)owner, .len = strlen(owner)};
    if (sl_swim_member_find(sl_node_swim(sn->node), b, &m) != SL_OK)
        return true; /* not heard of yet (this peer just started): its lease decides */
    return m.state == SL_STATE_ALIVE || m.state == SL_STATE_SUSPECT;
}

job_t *sl_study_node_job(sl_study_node_t *sn, const char *study, const char *trial) {
    for (int i = 0; i < MAX_JOBS; i++)
        if (sn->jobs[i].study[0] && !strcmp(sn->jobs[i].study, study) &&
            !strcmp(sn->jobs[i].trial, trial))
            return &sn->jobs[i];
    return NULL;
}

/* Reads study S into v (states derived as docs/studies.md says). */
sl_err sl_study_view_build(sl_study_node_t *sn, const char *id, view_t *v) {
    memset(v, 0, sizeof *v);
    const sl_study_spec_t *spec = sl_study_node_spec(sn, id);
    if (!spec)
        return SL_ENOTFOUND;
    memcpy(v->id, id, sizeof v->id);
    v->spec = (sl_study_spec_t *)spec;
    char pre[64];
    snprintf(pre, sizeof pre, "study/%s/t/", id);
    sl_store_scan(sl_store_node_store(sn->store), pre, strlen(pre), scan_trials, v);
    const uint8_t *val;
    size_t len;
    char key[96];
    snprintf(key, sizeof key, "study/%s/cancel", id);
    v->cancelled = sl_study_node_get_str(sn, key, &val, &len) == SL_OK;
    snprintf(key, sizeof key, "study/%s/finished", id);
    v->finished = sl_study_node_get_str(sn, key, &val, &len) == SL_OK;
    snprintf(key, sizeof key, "study/%s/start", id);
    if (sl_study_node_get_str(sn, key, &val, &len) == SL_OK) {
        char b[32];
        snprintf(b, sizeof b, "%.*s", (int)(len < 31 ? len : 31), (const char *)val);
        v->start_ms = strtoull(b, NULL, 10);
    }
    /* drop rows without a record (their record has not arrived yet) */
    size_t w = 0;
    uint64_t now = sl_study_node_wall_ms();
    for (size_t i = 0; i < v->count; i++) {
        row_t *r = &v->rows[i];
        if (!r->has_record) {
            sl_free(r->curve);
            sl_free(r->reports);
            sl_free(r->has_report);
            continue;
        }
        int last = 0;
        for (int e = 1; e <= spec->max_epochs; e++)
            if (r->has_report[e - 1]) {
                last = e;
                for (int o = 0; o < spec->objective_count; o++) {
                    double x = sl_report_get(&r->reports[e - 1], spec->objectives[o].metric);
                    if (!isnan(x))
                        r->t.objectives[o] = x;
                }
            }
        r->t.epochs_done = last;
        int target = sl_sched_rung_epochs(spec, r->t.bracket, r->t.rung);
        bool live = r->has_claim && !r->claim.released && r->claim.lease_expiry_ms > now &&
                    alive(sn, r->claim.owner);
        if (r->has_claim && !strcmp(r->claim.owner, self_name(sn)) && !r->claim.released &&
            !sl_study_node_job(sn, id, r->t.id))
            live = false; /* ours from before a restart */
        if (r->has_result)
            r->t.state = r->result.state;
        else if (live)
            r->t.state = SL_TRIAL_RUNNING;
        else if (last >= target && r->t.rung + 1 < sl_sched_rung_count(spec, r->t.bracket))
            r->t.state = SL_TRIAL_PAUSED;
        else if (r->has_claim && !r->claim.released)
            r->t.state = SL_TRIAL_PREEMPTED;
        else
            r->t.state = SL_TRIAL_PENDING;
        if (w != i)
            v->rows[w] = *r;
        w++;
    }
    v->count = w;
    return SL_OK;
}

/* ---- writes ---- */

static void write_claim(sl_study_node_t *sn, const char *study, const char *trial,
                        const sl_claim_t *c) {
    char key[128], val[512];
    size_t len;
    snprintf(key, sizeof key, "study/%s/t/%s/claim/%s", study, trial, self_name(sn));
    if (sl_claim_encode(c, val, sizeof val, &len) == SL_OK)
        sl_study_node_put_str(sn, key, val, len);
}

static void write_result(sl_study_node_t *sn, const char *study, const char *trial,
                         sl_trial_state st, int epochs, uint64_t claim_epoch, const char *reason) {
    sl_result_t r;
    memset(&r, 0, sizeof r);
    memcpy(r.trial_id, trial, sizeof r.trial_id);
    r.state = st;
    r.epochs = epochs;
    r.claim_epoch = claim_epoch;
    snprintf(r.writer, sizeof r.writer, "%s", self_name(sn));
    snprintf(r.reason, sizeof r.reason, "%s", reason);
    char key[256], val[1024];
    size_t len;
    snprintf(key, sizeof key, "study/%s/t/%s/res/%s@%" PRIu64, study, trial, self_name(sn),
             claim_epoch);
    if (sl_result_encode(&r, val, sizeof val, &len) == SL_OK)
        sl_study_node_put_str(sn, key, val, len);
}

/* Replicates the files of a job's checkpoint directory as chunks, then
 * the manifest, then drops the previous checkpoint's chunks. */
static void write_checkpoint(sl_study_node_t *sn, job_t *j, int epoch) {
    if (epoch <= j->ck_written)
        return;
    char names[MAX_FILES][128];
    int n = sl_study_dir_files(j->dir, names, MAX_FILES);
    if (n == 0)
        return;
    cJSON *man = cJSON_CreateObject();
    cJSON_AddNumberToObject(man, "epoch", epoch);
    cJSON *files = cJSON_AddArrayToObject(man, "files");
    for (int i = 0; i < n; i++) {
        char p[1300];
        snprintf(p, sizeof p, "%s/%.127s", j->dir, names[i]);
        uint8_t *data = NULL;
        size_t len = 0;
        if (sl_plat_read_file(p, 256u << 20, &data, &len) != SL_OK)
            continue;
        int chunks = (int)((len + CHUNK - 1) / CHUNK);
        for (int c = 0; c < chunks; c++) {
            char key[400];
            snprintf(key, sizeof key, "study/%s/t/%s/ckd/%d/%.127s/%d", j->study, j->trial, epoch,
                     names[i], c);
            size_t l = len - (size_t)c * CHUNK < CHUNK ? len - (size_t)c * CHUNK : CHUNK;
            sl_store_node_put(sn->store, key, strlen(key), data + (size_t)c * CHUNK, l);
        }
        sl_free(data);
        cJSON *f = cJSON_CreateArray();
        cJSON_AddItemToArray(f, cJSON_CreateString(names[i]));
        cJSON_AddItemToArray(f, cJSON_CreateNumber((double)len));
        cJSON_AddItemToArray(f, cJSON_CreateNumber(chunks));
        cJSON_AddItemToArray(files, f);
    }
    char *txt = cJSON_PrintUnformatted(man);
    cJSON_Delete(man);
    if (!txt)
        return;
    char key[128];
    snprintf(key, sizeof key, "study/%s/t/%s/ck", j->study, j->trial);
    /* the previous manifest's chunks go once the new one is written */
    const uint8_t *old;
    size_t ol;
    cJSON *prev = NULL;
    if (sl_study_node_get_str(sn, key, &old, &ol) == SL_OK)
        prev = cJSON_ParseWithLength((const char *)old, ol);
    sl_study_node_put_str(sn, key, txt, strlen(txt));
    free(txt);
    int pe = cJSON_IsNumber(cJSON_GetObjectItem(prev, "epoch"))
                 ? (int)cJSON_GetObjectItem(prev, "epoch")->valuedouble
                 : 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(prev, "files")) {
        const cJSON *nm = cJSON_GetArrayItem(f, 0), *ch = cJSON_GetArrayItem(f, 2);
        if (pe == epoch || !cJSON_IsString(nm) || !cJSON_IsNumber(ch))
            continue;
        for (int c = 0; c < (int)ch->valuedouble; c++) {
            char k[400];
            snprintf(k, sizeof k, "study/%s/t/%s/ckd/%d/%s/%d", j->study, j->trial, pe,
                     nm->valuestring, c);
            sl_store_node_del(sn->store, k, strlen(k));
        }
    }
    cJSON_Delete(prev);
    j->ck_written = epoch;
}

/* Writes the replicated checkpoint of a trial into `dir`; its epoch, or 0. */
int sl_study_node_restore(sl_study_node_t *sn, const char *study, const char *trial,
                              const char *dir) {
    sl_study_dir_clear(dir);
    char key[128];
    snprintf(key, sizeof key, "study/%s/t/%s/ck", study, trial);
    const uint8_t *v;
    size_t vl;
    if (sl_study_node_get_str(sn, key, &v, &vl) != SL_OK)
        return 0;
    cJSON *man = cJSON_ParseWithLength((const char *)v, vl);
    int epoch = cJSON_IsNumber(cJSON_GetObjectItem(man, "epoch"))
                    ? (int)cJSON_GetObjectItem(man, "epoch")->valuedouble
                    : 0;
    const cJSON *f;
    bool ok = true;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(man, "files")) {
        const cJSON *nm = cJSON_GetArrayItem(f, 0), *ln = cJSON_GetArrayItem(f, 1),
                    *ch = cJSON_GetArrayItem(f, 2);
        if (!cJSON_IsString(nm) || !cJSON_IsNumber(ln) || !cJSON_IsNumber(ch) ||
            strchr(nm->valuestring, '/') || ln->valuedouble > (256u << 20)) {
            ok = false;
            break;
        }
        size_t len = (size_t)ln->valuedouble;
        uint8_t *buf = sl_malloc(len ? len : 1);
        size_t at = 0;
        for (int c = 0; buf && c < (int)ch->valuedouble; c++) {
            char k[400];
            snprintf(k, sizeof k, "study/%s/t/%s/ckd/%d/%s/%d", study, trial, epoch,
                     nm->valuestring, c);
            const uint8_t *cv;
            size_t cl;
            if (sl_study_node_get_str(sn, k, &cv, &cl) != SL_OK || at + cl > len) {
                ok = false;
                break;
            }
            memcpy(buf + at, cv, cl);
            at += cl;
        }
        if (ok && buf && at == len) {
            char p[1300];
            snprintf(p, sizeof p, "%.1100s/%.127s", dir, nm->valuestring);
            ok = sl_plat_write_file(p, buf, len, 0600) == SL_OK;
        } else {
            ok = false;
        }
        sl_free(buf);
        if (!ok)
            break;
    }
    cJSON_Delete(man);
    if (!ok) {
        sl_log(SL_LOG_WARNING, "STUDY-CKPT",
               "trial %s: replicated checkpoint of epoch %d incomplete here; starting over",
               trial, epoch);
        sl_study_dir_clear(dir);
        return 0;
    }
    return epoch;
}

static void job_log(job_t *j, const char *line) {
    sl_buf_printf(&j->log, "%s\n", line);
    j->log_dirty = true;
    if (j->log.len > LOG_MAX) { /* keep the tail */
        size_t cut = j->log.len - LOG_MAX / 2;
        memmove(j->log.data, j->log.data + cut, j->log.len - cut + 1);
        j->log.len -= cut;
    }
}

/* A job's log key: one per (claim epoch, owner), so each has one writer. */
static void log_key(sl_study_node_t *sn, const char *study, const char *trial, uint64_t epoch,
                    char *key, size_t cap) {
    snprintf(key, cap, "study/%s/t/%s/log/%010" PRIu64 "/%s", study, trial, epoch,
             self_name(sn));
}

static void job_flush_log(sl_study_node_t *sn, job_t *j) {
    if (!j->log_dirty || !j->log.data)
        return;
    char key[SL_NAME_MAX + 128];
    log_key(sn, j->study, j->trial, j->epoch, key, sizeof key);
    sl_study_node_put_str(sn, key, j->log.data, j->log.len);
    j->log_dirty = false;
}

/* The parts of a trial's log, to be put in key order. */
typedef struct {
    char **keys;  /* "C/P" (claim epoch, owner) or "" for a log from before */
    char **texts; /* the text */
    size_t count; /* used */
    bool oom;     /* an allocation failed */
} log_parts_t;

static bool scan_logs(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e) {
    log_parts_t *lp = ctx;
    if (e->type != SL_CRDT_LWW || lp->count >= 4096)
        return true;
    size_t pre = 6 + SL_TRIAL_ID_LEN + 3 + SL_TRIAL_ID_LEN + 4; /* study/S/t/T/log */
    if (key_len < pre || (key_len > pre && key[pre] != '/'))
        return true;
    char **nk = sl_realloc(lp->keys, (lp->count + 1) * sizeof *nk);
    if (nk)
        lp->keys = nk;
    char **nt = nk ? sl_realloc(lp->texts, (lp->count + 1) * sizeof *nt) : NULL;
    if (nt)
        lp->texts = nt;
    char *k = nt ? sl_malloc(key_len - pre + 1) : NULL;
    char *t = k ? sl_malloc(e->val_len + 1) : NULL;
    if (!t) {
        sl_free(k);
        lp->oom = true;
        return false;
    }
    memcpy(k, key + pre, key_len - pre);
    k[key_len - pre] = 0;
    memcpy(t, e->val, e->val_len);
    t[e->val_len] = 0;
    lp->keys[lp->count] = k;
    lp->texts[lp->count] = t;
    lp->count++;
    return true;
}

sl_err sl_study_node_log(sl_study_node_t *sn, const char *study, const char *trial,
                         sl_buf_t *out) {
    char pre[96];
    snprintf(pre, sizeof pre, "study/%s/t/%s/log", study, trial);
    log_parts_t lp = {0};
    sl_store_scan(sl_store_node_store(sn->store), pre, strlen(pre), scan_logs, &lp);
    sl_err err = lp.oom ? SL_ENOMEM : SL_OK;
    /* key order: claim epochs ascending (zero-padded), owners by name */
    for (size_t i = 1; i < lp.count; i++)
        for (size_t k = i; k > 0 && strcmp(lp.keys[k - 1], lp.keys[k]) > 0; k--) {
            char *tk = lp.keys[k], *tt = lp.texts[k];
            lp.keys[k] = lp.keys[k - 1];
            lp.texts[k] = lp.texts[k - 1];
            lp.keys[k - 1] = tk;
            lp.texts[k - 1] = tt;
        }
    job_t *j = sl_study_node_job(sn, study, trial);
    char mine[SL_NAME_MAX + 128] = "";
    if (j)
        log_key(sn, study, trial, j->epoch, mine, sizeof mine);
    for (size_t i = 0; i < lp.count && err == SL_OK; i++) {
        if (j && !strcmp(lp.keys[i], mine + strlen(pre)))
            continue; /* this peer's running job: its buffer is newer */
        sl_buf_printf(out, "%s", lp.texts[i]);
    }
    if (err == SL_OK && j && j->log.data)
        sl_buf_printf(out, "%s", j->log.data);
    if (out->failed)
        err = SL_ENOMEM;
    for (size_t i = 0; i < lp.count; i++) {
        sl_free(lp.keys[i]);
        sl_free(lp.texts[i]);
    }
    sl_free(lp.keys);
    sl_free(lp.texts);
    return err;
}

/* Joins the cancelled workers that have ended. */
static void reap_orphans(sl_study_node_t *sn) {
    int w = 0;
    for (int i = 0; i < sn->orphan_count; i++) {
        if (sl_study_worker_ended(sn->orphans[i]))
            sl_study_worker_destroy(&sn->orphans[i]);
        else
            sn->orphans[w++] = sn->orphans[i];
    }
    sn->orphan_count = w;
}

static void job_free(sl_study_node_t *sn, job_t *j, bool wait) {
    job_flush_log(sn, j);
    if (wait) {
        sl_study_worker_destroy(&j->w);
    } else if (j->w) { /* never wait on the loop: it ends on its own */
        sl_study_worker_cancel(j->w);
        reap_orphans(sn);
        if (sn->orphan_count < MAX_JOBS)
            sn->orphans[sn->orphan_count++] = j->w;
        else
            sl_study_worker_abandon(&j->w);
        j->w = NULL;
    }
    sl_buf_fini(&j->log);
    memset(j, 0, sizeof *j);
}

/* Joins every peer's claim register of a trial. */
typedef struct {
    sl_claim_t claim; /* the join */
    bool any;         /* one was found */
} claim_join_t;

static bool scan_claims(void *ctx, const uint8_t *key, size_t key_len,
                        const sl_store_entry_t *e) {
    (void)key;
    (void)key_len;
    claim_join_t *cj = ctx;
    sl_claim_t c, m;
    if (e->type != SL_CRDT_LWW || sl_claim_decode((const char *)e->val, e->val_len, &c) != SL_OK)
        return true;
    if (cj->any) {
        sl_claim_merge(&cj->claim, &c, &m);
        cj->claim = m;
    } else {
        cj->claim = c;
        cj->any = true;
    }
    return true;
}

/* Releases the job's claim (if the joined register still shows it ours). */
static void job_release(sl_study_node_t *sn, job_t *j) {
    char pre[128];
    snprintf(pre, sizeof pre, "study/%s/t/%s/claim/", j->study, j->trial);
    claim_join_t cj = {.any = false};
    sl_store_scan(sl_store_node_store(sn->store), pre, strlen(pre), scan_claims, &cj);
    sl_claim_t next;
    if (cj.any && sl_claim_release(&cj.claim, self_name(sn), j->epoch, &next) == SL_OK)
        write_claim(sn, j->study, j->trial, &next);
}

/* ---- the loop ---- */

static int running_jobs(sl_study_node_t *sn) {
    int n = 0;
    for (int i = 0; i < MAX_JOBS; i++)
        n += sn->jobs[i].study[0] != 0;
    return n;
}

static void start_job(sl_study_node_t *sn, view_t *v, row_t *r, const sl_claim_t *claim) {
    job_t *j = NULL;
    for (int i = 0; i < MAX_JOBS && !j; i++)
        if (!sn->jobs[i].study[0])
            j = &sn->jobs[i];
    if (!j)
        return;
    memset(j, 0, sizeof *j);
    memcpy(j->study, v->id, sizeof j->study);
    memcpy(j->trial, r->t.id, sizeof j->trial);
    j->epoch = claim->epoch;
    j->rung = r->t.rung;
    snprintf(j->dir, sizeof j->dir, "%s/%s/%s", sn->root, v->id, r->t.id);
    sl_plat_mkdirs(j->dir, 0700);
    int from = sl_study_node_restore(sn, v->id, r->t.id, j->dir);
    j->ck_written = from;
    j->last_epoch = from;
    sl_study_job_t job;
    memset(&job, 0, sizeof job);
    job.spec = *v->spec;
    memcpy(job.trial_id, r->t.id, sizeof job.trial_id);
    job.config = r->t.config;
    job.target_epochs = sl_sched_rung_epochs(v->spec, r->t.bracket, r->t.rung);
    snprintf(job.dir, sizeof job.dir, "%s", j->dir);
    job.threads = sn->cfg.threads;
    job.data = sn->data;
    char line[256];
    snprintf(line, sizeof line, "[%s] claim epoch %" PRIu64 ": rung %d, epochs %d..%d",
             self_name(sn), claim->epoch, r->t.rung, from + 1, job.target_epochs);
    job_log(j, line);
    sl_log(SL_LOG_INFO, "STUDY-RUN", "study %s trial %s: %s", v->id, r->t.id, line);
    j->renew_ms = sl_study_node_wall_ms() + v->spec->lease_ms / 3;
    j->outcome = -1;
    if (sl_study_worker_start(&job, &j->w) != SL_OK) {
        job_release(sn, j);
        job_free(sn, j, true);
    }
}

/* The leader's turn: run the scheduler and write its decisions. */
static void lead(sl_study_node_t *sn, view_t *v, int capacity) {
    sl_sched_view_t sv = {.study_id = v->id, .capacity = capacity > 0 ? capacity : 1,
                          .cancelled = v->cancelled};
    sl_trial_t *ts = sl_calloc(v->count + 1, sizeof *ts);
    if (!ts)
        return;
    for (size_t i = 0; i < v->count; i++)
        ts[i] = v->rows[i].t;
    sv.trials = ts;
    sv.trial_count = v->count;
    uint64_t now = sl_study_node_wall_ms();
    sv.elapsed_s = v->start_ms && now > v->start_ms ? (now - v->start_ms) / 1000 : 0;
    sl_decisions_t d = {0};
    if (sl_sched_decide(v->spec, &sv, &d) != SL_OK) {
        sl_free(ts);
        return;
    }
    for (size_t i = 0; i < d.count; i++) {
        const sl_decision_t *x = &d.items[i];
        char key[256], val[SL_STUDY_RECORD_MAX];
        size_t len;
        row_t *r = NULL;
        for (size_t k = 0; k < v->count; k++)
            if (!strcmp(v->rows[k].t.id, x->trial_id))
                r = &v->rows[k];
        if (x->kind == SL_DECISION_PROPOSE) {
            sl_trial_t t;
            memset(&t, 0, sizeof t);
            memcpy(t.id, x->trial_id, sizeof t.id);
            t.ordinal = x->ordinal;
            t.bracket = x->bracket;
            t.rung = x->rung;
            t.config = x->config;
            snprintf(key, sizeof key, "study/%s/t/%s", v->id, x->trial_id);
            if (sl_trial_record_encode(v->spec, &t, val, sizeof val, &len) == SL_OK)
                sl_study_node_put_str(sn, key, val, len);
        } else if (x->kind == SL_DECISION_PROMOTE) {
            snprintf(key, sizeof key, "study/%s/t/%s/rung/%d", v->id, x->trial_id, x->rung);
            sl_study_node_put_str(sn, key, x->reason, strlen(x->reason));
        } else if (x->kind == SL_DECISION_STOP && r) {
            if (r->t.state == SL_TRIAL_RUNNING) {
                snprintf(key, sizeof key, "study/%s/t/%s/stop", v->id, x->trial_id);
                sl_study_node_put_str(sn, key, x->reason, strlen(x->reason));
            } else {
                write_result(sn, v->id, x->trial_id, SL_TRIAL_DONE, r->t.epochs_done,
                             r->has_claim ? r->claim.epoch : 0, x->reason);
            }
        } else if (x->kind == SL_DECISION_FINISH) {
            snprintf(key, sizeof key, "study/%s/finished", v->id);
            sl_study_node_put_str(sn, key, x->reason, strlen(x->reason));
            sl_log(SL_LOG_NOTICE, "STUDY-FINISH", "study %s (%s) finished: %s", v->id,
                   v->spec->name, x->reason);
        }
    }
    sl_decisions_fini(&d);
    sl_free(ts);
}

/* Alive members (sorted by id for determinism is not needed: the cores
 * break ties by id). */
typedef struct {
    char names[64][SL_NAME_MAX + 1]; /* member ids */
    sl_round_member_t m[64];         /* the cores' view */
    size_t count;                    /* used */
} members_t;

static void members_build(sl_study_node_t *sn, const view_t *v, int concurrency,
                          members_t *ms) {
    const sl_swim_t *sw = sl_node_swim(sn->node);
    ms->count = 0;
    size_t n = sl_swim_member_count(sw);
    for (size_t i = 0; i < n && ms->count < 64; i++) {
        sl_swim_member_t m;
        if (sl_swim_member_at(sw, i, &m) != SL_OK)
            continue;
        bool al = m.state == SL_STATE_ALIVE || m.state == SL_STATE_SUSPECT;
        if (!al)
            continue;
        size_t k = ms->count++;
        snprintf(ms->names[k], sizeof ms->names[k], "%.*s", (int)m.name.len,
                 (const char *)m.name.ptr);
        int busy = 0, slots = concurrency;
        if (!m.is_self) { /* its --slots, as it wrote them (peer/NAME/slots) */
            char key[SL_NAME_MAX + 32];
            const uint8_t *val;
            size_t len;
            snprintf(key, sizeof key, "peer/%s/slots", ms->names[k]);
            if (sl_study_node_get_str(sn, key, &val, &len) == SL_OK && len > 0 && len < 8) {
                char b[8];
                memcpy(b, val, len);
                b[len] = 0;
                slots = atoi(b) > 0 ? atoi(b) : (b[0] == '-' ? 0 : v->spec->concurrency);
            }
        }
        if (m.is_self) {
            busy = running_jobs(sn);
        } else if (v) {
            for (size_t t = 0; t < v->count; t++)
                busy += v->rows[t].t.state == SL_TRIAL_RUNNING &&
                        !strcmp(v->rows[t].claim.owner, ms->names[k]);
        }
        int free_slots = slots - busy;
        ms->m[k] = (sl_round_member_t){ms->names[k], true, free_slots > 0 ? free_slots : 0};
    }
}

static void drain_job(sl_study_node_t *sn, job_t *j, const sl_study_spec_t *spec,
                      const row_t *r) {
    sl_wev_t *ev;
    while (j->study[0] && (ev = sl_study_worker_pop(j->w))) {
        if (ev->kind == SL_WEV_LOG) {
            job_log(j, ev->text);
        } else if (ev->kind == SL_WEV_EPOCH) {
            char key[128], line[SL_REPORT_LINE_MAX];
            size_t len;
            int e = ev->report.epoch;
            j->last_epoch = e;
            snprintf(key, sizeof key, "study/%s/t/%s/m/%05d", j->study, j->trial, e);
            if (sl_report_encode(&ev->report, line, sizeof line, &len) == SL_OK)
                sl_study_node_put_str(sn, key, line, len);
            sl_epoch_outcome out = sl_claim_after_epoch(spec, j->rung, e, false, 0);
            if (spec->trainer == SL_TRAINER_BUILTIN && sl_claim_checkpoint_due(spec, e, out))
                write_checkpoint(sn, j, e);
            else if (spec->trainer == SL_TRAINER_COMMAND && e > 1)
                write_checkpoint(sn, j, e - 1); /* a command writes it after the line */
            if (out == SL_EPOCH_DONE || out == SL_EPOCH_PAUSE) {
                j->outcome = out; /* finished at the END event */
                sl_study_worker_stop(j->w);
            }
        } else { /* END */
            job_log(j, ev->text);
            if (j->outcome == SL_EPOCH_DONE || j->outcome == SL_EPOCH_PAUSE) {
                if (spec->trainer == SL_TRAINER_COMMAND)
                    write_checkpoint(sn, j, j->last_epoch);
                if (j->outcome == SL_EPOCH_DONE)
                    write_result(sn, j->study, j->trial, SL_TRIAL_DONE, j->last_epoch, j->epoch,
                                 "completed");
                job_log(j, j->outcome == SL_EPOCH_DONE ? "done" : "paused at its rung");
            } else if (ev->failed) {
                char key[160];
                snprintf(key, sizeof key, "study/%s/t/%s/fail/%" PRIu64, j->study, j->trial,
                         j->epoch);
                sl_study_node_put_str(sn, key, ev->text, strlen(ev->text));
                int failures = (r ? r->failures : 0) + 1;
                sl_epoch_outcome out =
                    sl_claim_after_epoch(spec, j->rung, j->last_epoch, true, failures);
                if (out == SL_EPOCH_FAILED)
                    write_result(sn, j->study, j->trial, SL_TRIAL_FAILED, j->last_epoch,
                                 j->epoch, ev->text);
            }
            job_release(sn, j);
            sl_free(ev);
            job_free(sn, j, true);
            return;
        }
        sl_free(ev);
    }
}

static void study_turn(sl_study_node_t *sn, const char *id, uint64_t now) {
    view_t v;
    if (sl_study_view_build(sn, id, &v) != SL_OK)
        return;
    const sl_study_spec_t *spec = v.spec;
    int concurrency = sn->cfg.slots > 0 ? sn->cfg.slots : (sn->cfg.slots < 0 ? 0 : spec->concurrency);
    members_t *ms = sl_calloc(1, sizeof *ms);
    if (!ms)
        goto out;
    members_build(sn, &v, concurrency, ms);
    /* workers first: their reports change the view */
    for (int i = 0; i < MAX_JOBS; i++) {
        job_t *j = &sn->jobs[i];
        if (!j->study[0] || strcmp(j->study, id))
            continue;
        row_t *r = NULL;
        for (size_t k = 0; k < v.count; k++)
            if (!strcmp(v.rows[k].t.id, j->trial))
                r = &v.rows[k];
        drain_job(sn, j, spec, r);
        if (!j->study[0])
            continue;
        /* stop when the register moved on, the leader stopped it, or it ended */
        bool stop_done = r && (r->stop || r->has_result || v.cancelled || v.finished);
        bool lost = r && r->has_claim && sl_claim_must_stop(&r->claim, self_name(sn), j->epoch);
        if (lost) {
            job_log(j, "claim taken over: stopping");
            job_free(sn, j, false);
            continue;
        }
        if (stop_done) {
            if (r && !r->has_result)
                write_result(sn, j->study, j->trial, SL_TRIAL_DONE, j->last_epoch, j->epoch,
                             "stopped by the leader");
            job_release(sn, j);
            job_free(sn, j, false);
            continue;
        }
        if (now >= j->renew_ms && r && r->has_claim) {
            sl_claim_t next;
            if (sl_claim_renew(&r->claim, self_name(sn), j->epoch, now, spec->lease_ms, &next) ==
                SL_OK)
                write_claim(sn, j->study, j->trial, &next);
            j->renew_ms = now + spec->lease_ms / 3;
        }
    }
    if (v.finished)
        goto out;
    sl_study_view_fini(&v);
    if (sl_study_view_build(sn, id, &v) != SL_OK)
        goto out;
    /* the leader of this round */
    sl_sched_view_t sv = {.study_id = id, .capacity = 1, .cancelled = v.cancelled};
    sl_trial_t *ts = sl_calloc(v.count + 1, sizeof *ts);
    if (!ts)
        goto out;
    for (size_t i = 0; i < v.count; i++)
        ts[i] = v.rows[i].t;
    sv.trials = ts;
    sv.trial_count = v.count;
    uint64_t round = sl_sched_round(spec, &sv);
    sl_free(ts);
    int leader = sl_round_leader(ms->m, ms->count, sl_round_key(id, round));
    if (leader >= 0 && !strcmp(ms->names[leader], self_name(sn))) {
        int cap = 0;
        for (size_t i = 0; i < ms->count; i++)
            cap += ms->m[i].free_slots;
        for (size_t i = 0; i < v.count; i++)
            cap += v.rows[i].t.state == SL_TRIAL_RUNNING;
        lead(sn, &v, cap);
        sl_study_view_fini(&v);
        if (sl_study_view_build(sn, id, &v) != SL_OK)
            goto out;
    }
    if (v.finished || v.cancelled || sl_plat_stop_requested())
        goto out;
    /* no claims before this peer has joined and caught up (or waited a
       lease alone): a fresh view would take every other member's trials
       for its own, and a replica restored from disk after a kill -9 still
       shows this peer's old claims, which others may have taken over
       since (an equal claim epoch would then go to the smaller name) */
    if (!sn->joined_ms && sl_swim_alive_count(sl_node_swim(sn->node)) >= 2)
        sn->joined_ms = now;
    if (!(sn->joined_ms && now >= sn->joined_ms + CATCHUP_MS) &&
        now < sn->started_ms + spec->lease_ms)
        goto out;
    /* claims */
    sl_claim_cand_t *cands = sl_calloc(v.count + 1, sizeof *cands);
    size_t *pick = sl_calloc(v.count + 1, sizeof *pick);
    sl_claim_t *next = sl_calloc(v.count + 1, sizeof *next);
    size_t nc = 0, np = 0;
    if (!cands || !pick || !next)
        goto claims_out;
    for (size_t i = 0; i < v.count; i++) {
        row_t *r = &v.rows[i];
        int target = sl_sched_rung_epochs(spec, r->t.bracket, r->t.rung);
        if (r->has_result || r->stop || r->t.epochs_done >= target ||
            sl_study_node_job(sn, id, r->t.id))
            continue;
        sl_claim_cand_t *c = &cands[nc++];
        c->trial_id = r->t.id;
        c->ordinal = r->t.ordinal;
        c->rung = r->t.rung;
        if (r->has_claim)
            c->claim = r->claim;
        c->owner_alive = r->has_claim && alive(sn, r->claim.owner);
        if (r->has_claim && !strcmp(r->claim.owner, self_name(sn)))
            c->claim.lease_expiry_ms = 0; /* ours, but no worker here: from before a restart */
        c->needs_work = true;
    }
    if (nc && sl_claim_pick(cands, nc, ms->m, ms->count, self_name(sn), now, spec->lease_ms,
                            pick, next, &np) == SL_OK) {
        for (size_t k = 0; k < np; k++) {
            row_t *r = NULL;
            for (size_t i = 0; i < v.count; i++)
                if (v.rows[i].t.id == cands[pick[k]].trial_id)
                    r = &v.rows[i];
            if (!r)
                continue;
            write_claim(sn, id, r->t.id, &next[k]);
            start_job(sn, &v, r, &next[k]);
        }
    }
claims_out:
    sl_free(cands);
    sl_free(pick);
    sl_free(next);
out:
    sl_free(ms);
    sl_study_view_fini(&v);
}

static uint64_t tick(void *ctx, sl_node_t *node, uint64_t now_ns) {
    (void)node;
    sl_study_node_t *sn = ctx;
    uint64_t now = sl_study_node_wall_ms();
    if (!sn->slots_written) { /* others rank trials by who has slots */
        char key[SL_NAME_MAX + 32], val[16];
        snprintf(key, sizeof key, "peer/%s/slots", self_name(sn));
        snprintf(val, sizeof val, "%d", sn->cfg.slots);
        sn->slots_written = sl_study_node_put_str(sn, key, val, strlen(val)) == SL_OK;
    }
    if (!sl_plat_stop_requested()) {
        idlist_t l;
        list_studies(sn, &l);
        for (int i = 0; i < l.count; i++)
            study_turn(sn, l.ids[i], now);
    }
    reap_orphans(sn);
    if (now >= sn->log_flush_ms) {
        for (int i = 0; i < MAX_JOBS; i++)
            if (sn->jobs[i].study[0])
                job_flush_log(sn, &sn->jobs[i]);
        sn->log_flush_ms = now + 1000;
    }
    return now_ns + (uint64_t)sn->cfg.tick_ms * 1000000ull;
}

/* SIGTERM: stop every worker, replicate the latest checkpoint on disk,
 * release the claims. A builtin epoch in progress is abandoned (the
 * process exits): the last completed epoch's checkpoint is what resumes. */
static void on_stop(void *ctx, sl_node_t *node) {
    (void)node;
    sl_study_node_t *sn = ctx;
    for (int i = 0; i < MAX_JOBS; i++) {
        job_t *j = &sn->jobs[i];
        if (!j->study[0])
            continue;
        sl_study_worker_stop(j->w);
        const sl_study_spec_t *spec = sl_study_node_spec(sn, j->study);
        sl_wev_t *ev;
        while ((ev = sl_study_worker_pop(j->w))) {
            if (ev->kind == SL_WEV_EPOCH && spec) {
                char key[128], line[SL_REPORT_LINE_MAX];
                size_t len;
                j->last_epoch = ev->report.epoch;
                snprintf(key, sizeof key, "study/%s/t/%s/m/%05d", j->study, j->trial,
                         ev->report.epoch);
                if (sl_report_encode(&ev->report, line, sizeof line, &len) == SL_OK)
                    sl_study_node_put_str(sn, key, line, len);
            } else if (ev->kind == SL_WEV_LOG) {
                job_log(j, ev->text);
            }
            sl_free(ev);
        }
        if (spec && spec->trainer == SL_TRAINER_BUILTIN)
            write_checkpoint(sn, j, j->last_epoch);
        else if (spec && j->last_epoch > 1)
            write_checkpoint(sn, j, j->last_epoch - 1);
        job_log(j, "peer leaving: checkpointed, claim released");
        job_release(sn, j);
        job_free(sn, j, false);
    }
}

sl_err sl_study_node_attach(sl_node_t *node, sl_store_node_t *store,
                            const sl_study_node_config_t *cfg, sl_study_node_t **out) {
    sl_study_node_t *sn = sl_calloc(1, sizeof *sn);
    if (!sn)
        return SL_ENOMEM;
    sl_err err;
    sn->node = node;
    sn->store = store;
    if (cfg)
        sn->cfg = *cfg;
    if (!sn->cfg.tick_ms)
        sn->cfg.tick_ms = 250;
    sn->started_ms = sl_study_node_wall_ms();
    const char *dd = sl_node_data_dir(node);
    snprintf(sn->root, sizeof sn->root, "%s/studies", dd ? dd : "./starling-studies");
    if ((err = sl_plat_mkdirs(sn->root, 0700)) != SL_OK)
        goto fail;
    if ((err = sl_study_data_new(&sn->data)) != SL_OK)
        goto fail;
    if ((err = sl_study_ctl_register(sn)) != SL_OK)
        goto fail;
    if ((err = sl_node_tick_register(node, tick, sn)) != SL_OK)
        goto fail;
    if ((err = sl_node_stop_listen(node, on_stop, sn)) != SL_OK)
        goto fail;
    *out = sn;
    return SL_OK;
fail:
    sl_study_data_destroy(&sn->data);
    sl_free(sn);
    return err;
}

void sl_study_node_destroy(sl_study_node_t **snp) {
    if (!snp || !*snp)
        return;
    sl_study_node_t *sn = *snp;
    for (int i = 0; i < MAX_JOBS; i++)
        if (sn->jobs[i].study[0]) {
            sl_study_worker_cancel(sn->jobs[i].w);
            if (sn->orphan_count < MAX_JOBS)
                sn->orphans[sn->orphan_count++] = sn->jobs[i].w;
            else
                sl_study_worker_abandon(&sn->jobs[i].w);
            sl_buf_fini(&sn->jobs[i].log);
        }
    /* cancelled commands end within a poll period; a builtin epoch may not */
    uint64_t end = sl_plat_now_ns() + 500000000ull;
    while (sn->orphan_count > 0 && sl_plat_now_ns() < end) {
        reap_orphans(sn);
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL); /* waiting for threads to end at exit */
    }
    reap_orphans(sn);
    for (int i = 0; i < sn->orphan_count; i++)
        sl_study_worker_abandon(&sn->orphans[i]);
    if (sn->orphan_count == 0) /* abandoned threads may still read the data sets */
        sl_study_data_destroy(&sn->data);
    sl_free(sn);
    *snp = NULL;
}
