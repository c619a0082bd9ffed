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
 *   study/S/t/T/ck             checkpoint manifest {"epoch":..,"blob":HEX,"files":[[name,len]..]}
 *                              naming a blob with its copies (src/study_ckpt.c) */
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

#include "starling/hash.h"

#include "starling/platform.h"
#include "starling/study.h"
#include "study_node_internal.h"

uint64_t sl_study_node_wall_ms(void) { return sl_plat_wall_ms(); }

static const char *self_name(sl_study_node_t *sn) { return sl_node_name(sn->node); }

/* Counts the write (the view is rebuilt after the loop's own writes) and
 * says when it failed. */
static sl_err wrote(sl_study_node_t *sn, const char *key, sl_err err) {
    sn->writes++;
    if (err != SL_OK)
        sl_log(SL_LOG_WARNING, "STUDY-PUT", "cannot write %s: %s", key, sl_strerror(err));
    return err;
}

/* Durable at the end of the loop's turn, with the turn's other writes in
 * one sync (sl_store_node_put_later): a trial's several writes a turn cost
 * one fsync, not one each. */
sl_err sl_study_node_put_str(sl_study_node_t *sn, const char *key, const char *val, size_t len) {
    return wrote(sn, key, sl_store_node_put_later(sn->store, key, strlen(key), val, len));
}

/* Durable before it returns, and pushed to peers: for a command that
 * answers a client (submit, cancel), which may then ask another peer. */
sl_err sl_study_node_put_now(sl_study_node_t *sn, const char *key, const char *val, size_t len) {
    return wrote(sn, key, sl_store_node_put(sn->store, key, strlen(key), val, len));
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

static cached_t *cache_of(sl_study_node_t *sn, const char *id) {
    for (int i = 0; i < MAX_STUDIES; i++)
        if (!strcmp(sn->specs[i].id, id))
            return &sn->specs[i];
    return NULL;
}

static size_t memo_slot(const cached_t *c, const char *tid) {
    uint64_t h = sl_hash64(tid, SL_TRIAL_ID_LEN, 7);
    size_t mask = c->memo_cap - 1, at = (size_t)h & mask;
    while (c->memo[at].id[0] && memcmp(c->memo[at].id, tid, SL_TRIAL_ID_LEN))
        at = (at + 1) & mask;
    return at;
}

/* Decodes trial record `val` of trial `tid`, from the memo when the same
 * bytes were decoded before. */
static sl_err record_decode(cached_t *c, const sl_study_spec_t *spec, const char *study,
                            const char *tid, const char *val, size_t vl, sl_trial_t *t) {
    uint64_t vh = sl_hash64(val, vl, 11);
    if (c && c->memo_cap) {
        const rec_memo_t *m = &c->memo[memo_slot(c, tid)];
        if (m->id[0] && m->val_hash == vh && m->val_len == vl) {
            *t = m->t;
            return SL_OK;
        }
    }
    char why[128];
    sl_err err = sl_trial_record_decode(spec, study, tid, val, vl, t, why, sizeof why);
    if (err != SL_OK || !c)
        return err;
    if (2 * (c->memo_count + 1) > c->memo_cap) { /* grow: at most half full */
        size_t cap = c->memo_cap ? 2 * c->memo_cap : 256;
        rec_memo_t *old = c->memo;
        size_t old_cap = c->memo_cap;
        rec_memo_t *n = sl_calloc(cap, sizeof *n);
        if (!n)
            return SL_OK; /* decoded; not remembered */
        c->memo = n;
        c->memo_cap = cap;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].id[0])
                c->memo[memo_slot(c, old[i].id)] = old[i];
        sl_free(old);
    }
    rec_memo_t *m = &c->memo[memo_slot(c, tid)];
    if (!m->id[0])
        c->memo_count++;
    memcpy(m->id, tid, SL_TRIAL_ID_LEN);
    m->val_hash = vh;
    m->val_len = (uint32_t)vl;
    m->t = *t;
    return SL_OK;
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
    for (size_t i = 0; i < v->count && !v->borrowed; i++) {
        sl_free(v->rows[i].curve);
        sl_free(v->rows[i].reports);
        sl_free(v->rows[i].has_report);
    }
    sl_free(v->rows);
    sl_free(v->index);
    memset(v, 0, sizeof *v);
}

/* The index slot of trial id `tid`: its row's, or the empty one where it goes. */
static size_t index_slot(const view_t *v, const char *tid) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the id's bytes */
    for (int i = 0; i < SL_TRIAL_ID_LEN; i++)
        h = (h ^ (uint8_t)tid[i]) * 1099511628211ull;
    size_t mask = v->index_cap - 1, at = (size_t)h & mask;
    while (v->index[at] && memcmp(v->rows[v->index[at] - 1].t.id, tid, SL_TRIAL_ID_LEN))
        at = (at + 1) & mask;
    return at;
}

/* Keeps the index at most half full (rebuilt from the rows when it grows). */
static bool index_reserve(view_t *v, size_t rows) {
    if (v->index && v->index_cap >= 2 * rows + 2)
        return true;
    size_t cap = 64;
    while (cap < 2 * rows + 2)
        cap *= 2;
    uint32_t *n = sl_calloc(cap, sizeof *n);
    if (!n)
        return false;
    sl_free(v->index);
    v->index = n;
    v->index_cap = cap;
    for (size_t i = 0; i < v->count; i++)
        v->index[index_slot(v, v->rows[i].t.id)] = (uint32_t)i + 1;
    return true;
}

/* The row of trial `tid`, added if new. A hash index, not a search of the
 * rows: the view is built for every key of the study on every turn, so a
 * linear search made each turn quadratic in the trials. */
static row_t *row_get(view_t *v, const char *tid, size_t tl) {
    if (tl != SL_TRIAL_ID_LEN || !index_reserve(v, v->count + 1))
        return NULL;
    size_t slot = index_slot(v, tid);
    if (v->index[slot])
        return &v->rows[v->index[slot] - 1];
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
    /* reports (2.5 KB an epoch) only once the trial has one: most rows
       of a view are pending or short */
    r->has_report = sl_calloc((size_t)me, sizeof *r->has_report);
    if (!r->curve || !r->has_report) {
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
    v->index[slot] = (uint32_t)v->count;
    return r;
}

/* A view build's scan: pass 1 sums each live row's key digest, pass 2
 * parses the keys of the rows whose digest changed. */
typedef struct {
    cached_t *c; /* the study's cache: its live rows */
    int pass;    /* 1 or 2 */
} scan_ctx_t;

static bool digest_reserve(cached_t *c, size_t rows) {
    if (rows <= c->digest_cap)
        return true;
    size_t cap = c->digest_cap ? c->digest_cap : 64;
    while (cap < rows)
        cap *= 2;
    uint64_t *d = sl_realloc(c->digest, cap * sizeof *d);
    if (!d)
        return false;
    c->digest = d;
    uint64_t *n = sl_realloc(c->digest_now, cap * sizeof *n);
    if (!n)
        return false;
    c->digest_now = n;
    memset(c->digest + c->digest_cap, 0, (cap - c->digest_cap) * sizeof *d);
    memset(c->digest_now + c->digest_cap, 0, (cap - c->digest_cap) * sizeof *n);
    c->digest_cap = cap;
    return true;
}

/* Forgets what a live row was parsed from (its arrays are kept). */
static void row_reset(const sl_study_spec_t *spec, row_t *r) {
    row_t keep = *r;
    memset(r, 0, sizeof *r);
    memcpy(r->t.id, keep.t.id, sizeof r->t.id);
    r->curve = keep.curve;
    r->reports = keep.reports;
    r->has_report = keep.has_report;
    r->t.curve = keep.curve;
    r->t.curve_len = spec->max_epochs;
    for (int e = 0; e <= spec->max_epochs; e++) {
        r->curve[e] = NAN;
        r->has_report[e] = false;
    }
    for (int o = 0; o < SL_STUDY_MAX_OBJECTIVES; o++)
        r->t.objectives[o] = NAN;
}

static bool scan_trials(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e) {
    scan_ctx_t *sc = ctx;
    view_t *v = &sc->c->live;
    if (e->type != SL_CRDT_LWW)
        return true;
    size_t pre = 6 + SL_TRIAL_ID_LEN + 3; /* study/S/t/ */
    const char *k = (const char *)key + pre;
    size_t kl = key_len - pre;
    const char *slash = memchr(k, '/', kl);
    size_t tl = slash ? (size_t)(slash - k) : kl;
    /* what follows the trial id ("rung/2", "m/00003", ...), and a copy of
       the number after its first slash (bounded, NUL-terminated) */
    const char *sub = slash ? slash + 1 : "";
    size_t subl = slash ? kl - tl - 1 : 0;
    if (subl >= 4 && (!memcmp(sub, "log/", 4) || !memcmp(sub, "ckd/", 4)))
        return true; /* logs and checkpoint chunks: not part of the view */
    row_t *r = row_get(v, k, tl);
    if (!r)
        return true;
    size_t idx = (size_t)(r - v->rows);
    if (sc->pass == 1) {
        if (digest_reserve(sc->c, v->count))
            sc->c->digest_now[idx] += sl_hash64(key, key_len, sl_hash64(e->val, e->val_len, 1));
        return true;
    }
    if (idx >= sc->c->digest_cap || sc->c->digest_now[idx] == sc->c->digest[idx])
        return true; /* unchanged since it was parsed */
    const char *val = (const char *)e->val;
    size_t vl = e->val_len;
    const char *num_at = memchr(sub, '/', subl);
    char num[24] = ""; /* rung and epoch numbers; longer tails (names) are not numbers */
    if (num_at) {
        size_t nl = subl - (size_t)(num_at + 1 - sub);
        if (nl < sizeof num) {
            memcpy(num, num_at + 1, nl);
            num[nl] = 0;
        }
    }
#define SUB_IS(lit) (subl == sizeof(lit) - 1 && !memcmp(sub, lit, sizeof(lit) - 1))
#define SUB_HAS(lit) (subl >= sizeof(lit) - 1 && !memcmp(sub, lit, sizeof(lit) - 1))
    char why[128];
    if (!slash) {
        sl_trial_t t;
        if (record_decode(v->cache, v->spec, v->id, r->t.id, val, vl, &t) == SL_OK) {
            int rung = r->t.rung > t.rung ? r->t.rung : t.rung;
            r->t.ordinal = t.ordinal;
            r->t.bracket = t.bracket;
            r->t.config = t.config;
            r->t.rung = rung;
            r->has_record = true;
        }
    } else if (SUB_HAS("rung/")) {
        int rung = atoi(num);
        if (rung > r->t.rung && rung < SL_STUDY_MAX_RUNGS)
            r->t.rung = rung;
    } else if (SUB_HAS("claim/")) {
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
    } else if (SUB_HAS("m/")) {
        int ep = atoi(num);
        sl_report_t rep;
        if (!r->reports)
            r->reports = sl_calloc((size_t)v->spec->max_epochs + 1, sizeof *r->reports);
        if (r->reports && ep >= 1 && ep <= v->spec->max_epochs &&
            sl_report_parse(val, vl, &rep, why, sizeof why) == SL_OK) {
            r->reports[ep - 1] = rep;
            r->has_report[ep - 1] = true;
            r->curve[ep - 1] = sl_report_get(&rep, v->spec->objectives[0].metric);
        }
    } else if (SUB_HAS("fail/")) {
        r->failures++;
    } else if (SUB_HAS("res/")) {
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
    } else if (SUB_IS("stop")) {
        r->stop = true;
    } else if (SUB_IS("ck")) {
        cJSON *j = cJSON_ParseWithLength(val, vl);
        const cJSON *ep = cJSON_GetObjectItem(j, "epoch");
        if (cJSON_IsNumber(ep))
            r->ck_epoch = (int)ep->valuedouble;
        cJSON_Delete(j);
    }
#undef SUB_IS
#undef SUB_HAS
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
    cached_t *c = cache_of(sn, id);
    if (!c)
        return SL_ENOTFOUND;
    v->cache = c;
    view_t *live = &c->live;
    if (!live->spec) {
        memcpy(live->id, id, sizeof live->id);
        live->spec = v->spec;
        live->cache = c;
    }
    /* the live rows: every key hashed (pass 1), the changed trials parsed
       again (pass 2); a build used to parse every key of the study on
       every turn, O(trials) of JSON per turn */
    char pre[64];
    snprintf(pre, sizeof pre, "study/%s/t/", id);
    scan_ctx_t sc = {c, 1};
    sl_store_scan(sl_store_node_store(sn->store), pre, strlen(pre), scan_trials, &sc);
    if (!digest_reserve(c, live->count))
        return SL_ENOMEM;
    for (size_t i = 0; i < live->count; i++)
        if (c->digest_now[i] != c->digest[i])
            row_reset(spec, &live->rows[i]);
    sc.pass = 2;
    sl_store_scan(sl_store_node_store(sn->store), pre, strlen(pre), scan_trials, &sc);
    for (size_t i = 0; i < live->count; i++) {
        c->digest[i] = c->digest_now[i];
        c->digest_now[i] = 0;
    }
    /* the view: copies of the live rows (their arrays borrowed) */
    v->rows = sl_malloc((live->count + 1) * sizeof *v->rows);
    if (!v->rows)
        return SL_ENOMEM;
    v->cap = live->count + 1;
    v->borrowed = true;
    for (size_t i = 0; i < live->count; i++)
        if (live->rows[i].has_record)
            v->rows[v->count++] = live->rows[i];
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
        if (!r->has_record) { /* (a borrowed view holds only rows with one) */
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
    sl_free(v->index); /* rows moved: rebuilt if a lookup ever needs it */
    v->index = NULL;
    v->index_cap = 0;
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

/* Stores a job's checkpoint directory (once per epoch). */
static void write_checkpoint(sl_study_node_t *sn, job_t *j, int epoch) {
    if (epoch <= j->ck_written)
        return;
    sl_study_ckpt_write(sn, j->study, j->trial, j->dir, epoch);
    j->ck_written = epoch;
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
    sl_free(j->launch);
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

/* Starts the job's worker from epoch `from` (its checkpoint is in dir). */
static void job_launch(sl_study_node_t *sn, job_t *j, int from) {
    sl_study_job_t *job = j->launch;
    j->launch = NULL;
    j->ck_written = from;
    j->last_epoch = from;
    char line[256];
    snprintf(line, sizeof line, "[%s] claim epoch %" PRIu64 ": rung %d, epochs %d..%d",
             self_name(sn), j->epoch, j->rung, from + 1, job->target_epochs);
    job_log(j, line);
    sl_log(SL_LOG_INFO, "STUDY-RUN", "study %s trial %s: %s", j->study, j->trial, line);
    sl_err err = sl_study_worker_start(job, &j->w);
    sl_free(job);
    if (err != SL_OK) {
        job_release(sn, j);
        job_free(sn, j, true);
    }
}

/* Which job a restore was for: the slot may hold another by then. */
typedef struct {
    char study[SL_TRIAL_ID_LEN + 1];
    char trial[SL_TRIAL_ID_LEN + 1];
    uint64_t epoch; /* claim epoch */
} job_ref_t;

static void on_restored(sl_study_node_t *sn, void *ctx, int epoch, const char *why) {
    job_ref_t *ref = ctx;
    job_t *j = epoch >= 0 ? sl_study_node_job(sn, ref->study, ref->trial) : NULL;
    if (j && j->launch && j->epoch == ref->epoch) {
        if (why) {
            char line[400];
            snprintf(line, sizeof line, "[%s] checkpoint not restored (%s): starting over",
                     self_name(sn), why);
            job_log(j, line);
            sl_log(SL_LOG_WARNING, "STUDY-CKPT", "trial %s: %s", j->trial, line);
        }
        job_launch(sn, j, epoch);
    }
    sl_free(ref);
}

/* Takes a claimed trial: restores its latest checkpoint (fetched from its
 * holders if need be; the lease is renewed meanwhile), then starts the
 * worker. */
static void start_job(sl_study_node_t *sn, view_t *v, row_t *r, const sl_claim_t *claim) {
    job_t *j = NULL;
    for (int i = 0; i < MAX_JOBS && !j; i++)
        if (!sn->jobs[i].study[0])
            j = &sn->jobs[i];
    if (!j)
        return;
    memset(j, 0, sizeof *j);
    sl_study_job_t *job = sl_calloc(1, sizeof *job);
    job_ref_t *ref = sl_calloc(1, sizeof *ref);
    if (!job || !ref) {
        sl_free(job);
        sl_free(ref);
        return; /* the lease lapses and someone else takes it */
    }
    memcpy(j->study, v->id, sizeof j->study);
    memcpy(j->trial, r->t.id, sizeof j->trial);
    j->epoch = claim->epoch;
    j->rung = r->t.rung;
    snprintf(j->dir, sizeof j->dir, "%s/%s/%s", sn->root, v->id, r->t.id);
    sl_plat_mkdirs(j->dir, 0700);
    j->renew_ms = sl_study_node_wall_ms() + v->spec->lease_ms / 3;
    j->outcome = -1;
    job->spec = *v->spec;
    memcpy(job->trial_id, r->t.id, sizeof job->trial_id);
    job->config = r->t.config;
    job->target_epochs = sl_sched_rung_epochs(v->spec, r->t.bracket, r->t.rung);
    snprintf(job->dir, sizeof job->dir, "%s", j->dir);
    job->threads = sn->cfg.threads;
    job->data = sn->data;
    j->launch = job;
    memcpy(ref->study, j->study, sizeof ref->study);
    memcpy(ref->trial, j->trial, sizeof ref->trial);
    ref->epoch = j->epoch;
    sl_study_ckpt_restore(sn, j->study, j->trial, j->dir, on_restored, ref);
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
    while (j->study[0] && j->w && (ev = sl_study_worker_pop(j->w))) {
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
            /* a done trial's result ends it (its state is read from the
               result first, and nobody claims it again): releasing the
               claim too would be one more replicated write a trial */
            if (j->outcome != SL_EPOCH_DONE)
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
    /* the view is rebuilt below only when the loop wrote or a job ended:
       building it reads every key of the study */
    uint64_t writes0 = sn->writes;
    int jobs0 = running_jobs(sn);
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
    if (sn->writes != writes0 || running_jobs(sn) != jobs0) {
        sl_study_view_fini(&v);
        if (sl_study_view_build(sn, id, &v) != SL_OK)
            goto out;
    }
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
        /* a searcher that does not learn from results (random, grid) keeps
           LOOKAHEAD times the fleet's slots proposed ahead: a peer that
           frees a slot then finds a trial waiting for it, instead of
           waiting for its result to reach the leader and the leader's
           next proposal to reach it (two replication delays a trial) */
        if (spec->searcher != SL_SEARCH_EVOLUTION)
            cap *= LOOKAHEAD;
        uint64_t before = sn->writes;
        lead(sn, &v, cap);
        if (sn->writes != before) {
            sl_study_view_fini(&v);
            if (sl_study_view_build(sn, id, &v) != SL_OK)
                goto out;
        }
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

/* Whether a turn is due now: something changed (the replica, a worker's
 * queue, membership) and the gap since the last turn has passed, or a
 * tick period went by with no change. */
static bool turn_due(sl_study_node_t *sn, uint64_t now_ns) {
    uint64_t period = (uint64_t)sn->cfg.tick_ms * 1000000ull;
    if (now_ns >= sn->full_ns + period)
        return true;
    uint64_t gap = (uint64_t)TURN_GAP_MS * 1000000ull;
    if (gap < TURN_COST_X * sn->turn_cost_ns)
        gap = TURN_COST_X * sn->turn_cost_ns;
    if (now_ns < sn->turn_ns + gap)
        return false;
    if (sn->poked || sl_store_fingerprint(sl_store_node_store(sn->store)) != sn->turn_fp)
        return true;
    for (int i = 0; i < MAX_JOBS; i++)
        if (sn->jobs[i].study[0] && sn->jobs[i].w && sl_study_worker_pending(sn->jobs[i].w))
            return true;
    return false;
}

/* Any study not finished here, or a job: then changes are polled. */
static bool any_active(sl_study_node_t *sn, const idlist_t *l) {
    if (running_jobs(sn) > 0)
        return true;
    for (int i = 0; i < l->count; i++) {
        char key[96];
        const uint8_t *val;
        size_t len;
        snprintf(key, sizeof key, "study/%s/finished", l->ids[i]);
        if (sl_study_node_get_str(sn, key, &val, &len) != SL_OK)
            return true;
    }
    return false;
}

static uint64_t tick(void *ctx, sl_node_t *node, uint64_t now_ns) {
    (void)node;
    sl_study_node_t *sn = ctx;
    uint64_t period = (uint64_t)sn->cfg.tick_ms * 1000000ull;
    /* the loop used to turn only every tick_ms, so each trial waited a
       tick or more at each step (proposed, claimed, reported, released)
       and a slot ran at most one trial per tick; now it turns as soon as
       something changed, polled every POLL_MS while a study is active */
    if (!turn_due(sn, now_ns)) {
        uint64_t next = now_ns + (sn->active ? (uint64_t)POLL_MS * 1000000ull : period);
        return next < sn->full_ns + period ? next : sn->full_ns + period;
    }
    if (now_ns >= sn->full_ns + period)
        sn->full_ns = now_ns;
    sn->turn_ns = now_ns;
    sn->poked = false;
    sn->turn_fp = sl_store_fingerprint(sl_store_node_store(sn->store));
    uint64_t now = sl_study_node_wall_ms();
    if (!sn->slots_written) { /* others rank trials by who has slots */
        char key[SL_NAME_MAX + 32], val[16];
        snprintf(key, sizeof key, "peer/%s/slots", self_name(sn));
        snprintf(val, sizeof val, "%d", sn->cfg.slots);
        sn->slots_written = sl_study_node_put_str(sn, key, val, strlen(val)) == SL_OK;
    }
    idlist_t l = {.count = 0};
    if (!sl_plat_stop_requested()) {
        list_studies(sn, &l);
        for (int i = 0; i < l.count; i++)
            study_turn(sn, l.ids[i], now);
    }
    sn->active = any_active(sn, &l);
    reap_orphans(sn);
    sl_study_ckpt_settle(sn);
    if (now >= sn->log_flush_ms) {
        for (int i = 0; i < MAX_JOBS; i++)
            if (sn->jobs[i].study[0])
                job_flush_log(sn, &sn->jobs[i]);
        sn->log_flush_ms = now + 1000;
    }
    /* the fingerprint after the loop's own writes: they need no new turn */
    sn->turn_fp = sl_store_fingerprint(sl_store_node_store(sn->store));
    uint64_t end_ns = sl_plat_now_ns();
    sn->turn_cost_ns = end_ns > now_ns ? end_ns - now_ns : 0;
    return now_ns + (sn->active ? (uint64_t)POLL_MS * 1000000ull : period);
}

/* A member joined, died or left: claims and leaders may move at once. */
static void on_member(void *ctx, sl_node_t *node, const sl_swim_event_t *ev) {
    (void)node;
    (void)ev;
    ((sl_study_node_t *)ctx)->poked = true;
}

/* How long a leaving peer waits for its last checkpoints' copies. */
#define STOP_SETTLE_MS 1500

/* SIGTERM: stop every worker, store the latest checkpoint on disk as a
 * blob, let the loop run until the blobs have their copies and the
 * manifests name them (at most STOP_SETTLE_MS), then release the claims.
 * A builtin epoch in progress is abandoned (the process exits): the last
 * completed epoch's checkpoint is what resumes. The tick claims nothing
 * once a stop is requested. */
static void on_stop(void *ctx, sl_node_t *node) {
    sl_study_node_t *sn = ctx;
    for (int i = 0; i < MAX_JOBS; i++) {
        job_t *j = &sn->jobs[i];
        if (!j->study[0] || !j->w)
            continue; /* a job still restoring has nothing new to keep */
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
    }
    uint64_t end = sl_plat_now_ns() + STOP_SETTLE_MS * 1000000ull;
    while (sl_study_ckpt_unsettled(sn) && sl_plat_now_ns() < end)
        if (sl_node_step(node, 20) != SL_OK)
            break;
    if (sl_study_ckpt_unsettled(sn))
        sl_log(SL_LOG_WARNING, "STUDY-CKPT", "leaving before the last checkpoints had their "
               "copies: their trials resume from the previous ones");
    for (int i = 0; i < MAX_JOBS; i++) {
        job_t *j = &sn->jobs[i];
        if (!j->study[0])
            continue;
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
    if (!sn->cfg.blobs) {
        sl_free(sn);
        return SL_EINVAL;
    }
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
    if ((err = sl_node_member_listen(node, on_member, sn)) != SL_OK)
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
        if (sn->jobs[i].study[0] && sn->jobs[i].w) {
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
    for (int i = 0; i < MAX_JOBS; i++)
        sl_free(sn->jobs[i].launch);
    for (int i = 0; i < MAX_STUDIES; i++) {
        sl_free(sn->specs[i].memo);
        sl_study_view_fini(&sn->specs[i].live);
        sl_free(sn->specs[i].digest);
        sl_free(sn->specs[i].digest_now);
    }
    sl_study_ckpt_fini(sn);
    if (sn->orphan_count == 0) /* abandoned threads may still read the data sets */
        sl_study_data_destroy(&sn->data);
    sl_free(sn);
    *snp = NULL;
}
