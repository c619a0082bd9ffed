/* The study node's keys in the store (src/study/study_node.c is the loop
 * above it): reads and writes of the study's registers (a write goes
 * through the live view at once, src/study/study_view.c), the specs'
 * cache, the studies' ids and names, the view the control commands copy,
 * and a trial's log. The files of the study node sit in one order, each
 * calling only those below it: study_node.c (the loop), study_ctl.c (the
 * commands), study_ckpt.c (checkpoints), this file, study_view.c (the
 * live view) (docs/house.md). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "starling/platform.h"
#include "starling/study.h"
#include "study/study_keys.h"
#include "study/study_node_internal.h"

uint64_t sl_study_node_wall_ms(void) { return sl_plat_wall_ms(); }
static const char *self_name(sl_study_node_t *sn) { return sl_node_name(sn->node); }

/* Counts the write and says when it failed. */
static sl_err wrote(sl_study_node_t *sn, const char *key, sl_err err) {
    sn->writes++;
    uint64_t left_out;
    if (err != SL_OK &&
        sl_log_limit(&sn->write_failed_log, sl_study_node_wall_ms(), 10000, &left_out))
        sl_log(SL_LOG_WARNING, "STUDY-PUT", "cannot write %s: %s (%" PRIu64 " more failed writes unlogged)",
               key, sl_strerror(err), left_out);
    return err;
}

/* The cache entry of the study whose key `k` is, if cached. */
cached_t *sl_study_node_cached(sl_study_node_t *sn, const sl_study_key_t *k) {
    for (int i = 0; i < MAX_STUDIES; i++)
        if (sn->specs[i].id[0] && !strcmp(sn->specs[i].id, k->study))
            return &sn->specs[i];
    return NULL;
}

/* Durable at the end of the loop's turn, with the turn's other writes in
 * one sync (sl_store_node_put_later): a trial's several writes a turn cost
 * one fsync, not one each. The live view takes it at once (the store
 * tells its listeners only once it is durable). */
sl_err sl_study_node_put_str(sl_study_node_t *sn, const char *key, const char *val, size_t len) {
    size_t kl = strlen(key);
    sl_err err = sl_store_node_put_later(sn->store, key, kl, val, len);
    sl_study_key_t k;
    cached_t *c =
        err == SL_OK && sl_study_key_parse(key, kl, &k) == SL_OK ? sl_study_node_cached(sn, &k) : NULL;
    if (c)
        sl_study_live_apply(sn, c, (const uint8_t *)key, kl, (const uint8_t *)val, len, true);
    return wrote(sn, key, err);
}

/* Durable before it returns, and pushed to peers: for a command that
 * answers a client (submit, cancel), which may then ask another peer.
 * (The store tells the listener before it returns.) */
sl_err sl_study_node_put_now(sl_study_node_t *sn, const char *key, const char *val, size_t len) {
    return wrote(sn, key, sl_store_node_put(sn->store, key, strlen(key), val, len));
}

sl_err sl_study_node_get_str(sl_study_node_t *sn, const char *key, const uint8_t **v, size_t *len) {
    return sl_store_get(sl_store_node_store(sn->store), key, strlen(key), v, len);
}

/* ---- specs and the studies in the store ---- */

cached_t *sl_study_node_cache(sl_study_node_t *sn, const char *id) {
    for (int i = 0; i < MAX_STUDIES; i++)
        if (!strcmp(sn->specs[i].id, id))
            return &sn->specs[i];
    char key[SL_STUDY_KEY_MAX];
    const uint8_t *v;
    size_t len;
    if (sl_study_key_build(key, sizeof key, SL_STUDY_KEY_SPEC, id, NULL, 0, NULL) != SL_OK ||
        sl_study_node_get_str(sn, key, &v, &len) != SL_OK)
        return NULL; /* (an id that is not 16 hex digits names no key) */
    for (int i = 0; i < MAX_STUDIES; i++)
        if (!sn->specs[i].id[0]) {
            cached_t *c = &sn->specs[i];
            char why[256];
            if (sl_study_spec_parse((const char *)v, len, &c->spec, why, sizeof why) != SL_OK) {
                sl_log(SL_LOG_WARNING, "STUDY-SPEC", "study %s: stored spec refused: %s", id,
                       why);
                return NULL;
            }
            if (c->spec.trainer == SL_TRAINER_COMMAND && !sl_node_commands_allowed(sn->node)) {
                /* (a spec written to the store directly: told once per load) */
                sl_node_bad_input(sn->node, "study");
                sl_log(SL_LOG_WARNING, "STUDY-COMMAND-REFUSED",
                       "study %s has a command trainer and this open cluster's peer was not "
                       "started with --allow-commands: it will not run its trials", id);
            }
            snprintf(c->id, sizeof c->id, "%s", id);
            /* read whole at the first refresh; the listener keeps it from then on */
            c->live.stale = true;
            return c;
        }
    return NULL;
}

const sl_study_spec_t *sl_study_node_spec(sl_study_node_t *sn, const char *id) {
    cached_t *c = sl_study_node_cache(sn, id);
    return c ? &c->spec : NULL;
}

/* Adds the study id of a spec key (checked by the key's parser). */
void sl_study_ids_add(idlist_t *l, const char *id) {
    for (int i = 0; i < l->count; i++)
        if (!strcmp(l->ids[i], id))
            return;
    if (l->count == MAX_STUDIES)
        return;
    memcpy(l->ids[l->count], id, SL_TRIAL_ID_LEN + 1);
    l->count++;
}

static bool scan_ids(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e) {
    (void)e;
    sl_study_key_t k;
    if (sl_study_key_parse(key, key_len, &k) == SL_OK && k.kind == SL_STUDY_KEY_SPEC)
        sl_study_ids_add(ctx, k.study);
    return true;
}

/* The studies in the store: read once (and after a RESET snapshot), then
 * kept by the listener from their spec keys. */
const idlist_t *sl_study_node_studies(sl_study_node_t *sn) {
    if (sn->ids_stale) {
        sn->ids_stale = false;
        sn->ids.count = 0;
        char pre[SL_STUDY_KEY_MAX];
        if (sl_study_key_prefix(pre, sizeof pre, NULL, NULL) == SL_OK)
            sl_store_scan(sl_store_node_store(sn->store), pre, strlen(pre), scan_ids, &sn->ids);
    }
    return &sn->ids;
}

/* Resolves a study id or name. */
sl_err sl_study_node_resolve(sl_study_node_t *sn, const char *arg, char id[SL_TRIAL_ID_LEN + 1]) {
    const idlist_t *l = sl_study_node_studies(sn);
    for (int i = 0; i < l->count; i++) {
        const sl_study_spec_t *s = sl_study_node_spec(sn, l->ids[i]);
        if (!strcmp(l->ids[i], arg) || (s && !strcmp(s->name, arg))) {
            memcpy(id, l->ids[i], SL_TRIAL_ID_LEN + 1);
            return SL_OK;
        }
    }
    return SL_ENOTFOUND;
}

void sl_study_view_fini(view_t *v) {
    sl_free(v->rows);
    memset(v, 0, sizeof *v);
}

/* A copy of study S's live view (states derived as docs/studies.md says). */
sl_err sl_study_view_build(sl_study_node_t *sn, const char *id, view_t *v) {
    memset(v, 0, sizeof *v);
    cached_t *c = sl_study_node_cache(sn, id);
    if (!c)
        return SL_ENOTFOUND;
    sl_study_live_refresh(sn, c, sl_study_node_wall_ms());
    live_t *lv = &c->live;
    memcpy(v->id, c->id, sizeof v->id);
    v->spec = &c->spec;
    v->rows = sl_malloc((lv->trial_count + 1) * sizeof *v->rows);
    if (!v->rows)
        return SL_ENOMEM;
    for (size_t i = 0; i < lv->trial_count; i++) {
        const trial_row_t *r = &lv->rows[lv->trial_row[i]];
        row_t *w = &v->rows[v->count++];
        memset(w, 0, sizeof *w);
        w->t = lv->trials[i];
        w->has_record = true;
        w->curve = r->curve;
        w->reports = r->reports;
        w->has_report = r->has_report;
        w->claim = r->claim;
        w->has_claim = r->has_claim;
        w->result = r->result;
        w->has_result = r->has_result;
        w->failures = (int)r->fail_count;
        w->stop = r->stop;
        w->ck_epoch = r->ck_epoch;
    }
    v->cancelled = lv->cancelled;
    v->finished = lv->finished;
    v->start_ms = lv->start_ms;
    return SL_OK;
}

/* A job's log key: one per (claim epoch, owner), so each has one writer. */
sl_err sl_study_node_log_key(sl_study_node_t *sn, const char *study, const char *trial, uint64_t epoch,
                      char key[SL_STUDY_KEY_MAX]) {
    return sl_study_key_build(key, SL_STUDY_KEY_MAX, SL_STUDY_KEY_LOG, study, trial, epoch,
                              self_name(sn));
}

/* The parts of a trial's log, to be put in key order. */
typedef struct {
    char **keys;  /* "log/C/P" (claim epoch, owner), or "log" for a log from before */
    char **texts; /* the text */
    size_t count; /* used */
    bool oom;     /* an allocation failed */
} log_parts_t;

static bool scan_logs(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e) {
    log_parts_t *lp = ctx;
    sl_study_key_t lk;
    if (e->type != SL_CRDT_LWW || lp->count >= 4096 ||
        sl_study_key_parse(key, key_len, &lk) != SL_OK || lk.kind != SL_STUDY_KEY_LOG)
        return true;
    /* the part's key: what follows the trial id (the bare log sorts first) */
    const char *part = lk.sub;
    size_t part_len = lk.sub_len;
    char **nk = sl_realloc(lp->keys, (lp->count + 1) * sizeof *nk);
    if (nk)
        lp->keys = nk;
    char **nt = nk ? sl_realloc(lp->texts, (lp->count + 1) * sizeof *nt) : NULL;
    if (nt)
        lp->texts = nt;
    char *k = nt ? sl_malloc(part_len + 1) : NULL;
    char *t = k ? sl_malloc(e->val_len + 1) : NULL;
    if (!t) {
        sl_free(k);
        lp->oom = true;
        return false;
    }
    memcpy(k, part, part_len);
    k[part_len] = 0;
    memcpy(t, e->val, e->val_len);
    t[e->val_len] = 0;
    lp->keys[lp->count] = k;
    lp->texts[lp->count] = t;
    lp->count++;
    return true;
}

sl_err sl_study_node_log(sl_study_node_t *sn, const char *study, const char *trial,
                         sl_buf_t *out) {
    char pre[SL_STUDY_KEY_MAX];
    sl_err err = sl_study_key_prefix(pre, sizeof pre, study, trial);
    if (err != SL_OK)
        return err;
    log_parts_t lp = {0};
    sl_store_scan(sl_store_node_store(sn->store), pre, strlen(pre), scan_logs, &lp);
    err = lp.oom ? SL_ENOMEM : SL_OK;
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
    char mine[SL_STUDY_KEY_MAX];
    sl_study_key_t mk;
    /* this peer's running job's part: its buffer is newer */
    const char *mine_part = j && sl_study_node_log_key(sn, study, trial, j->epoch, mine) == SL_OK &&
                                    sl_study_key_parse(mine, strlen(mine), &mk) == SL_OK
                                ? mk.sub
                                : NULL;
    for (size_t i = 0; i < lp.count && err == SL_OK; i++) {
        if (mine_part && !strcmp(lp.keys[i], mine_part))
            continue;
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