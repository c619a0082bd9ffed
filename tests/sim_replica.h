/* The scaling simulator's model of the replicated store
 * (tests/sim_study_scale_test.c, hundreds of peers, where a real store per
 * peer would cost too much): a peer's replica of a study's keys as
 * last-writer-wins registers, with the order its keys changed in (what
 * anti-entropy or a push sends on). The keys and values are the daemon's
 * (study/study_keys.h and the cores' codecs); the live view they feed is
 * the real one (study/live.h). tests/sim_study_test.c runs the real store
 * and uses only the shared helpers below the model (keys, values,
 * membership's answer). Static functions for the tests that include it. */
#ifndef STARLING_TESTS_SIM_REPLICA_H
#define STARLING_TESTS_SIM_REPLICA_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "starling/hash.h"
#include "starling/study.h"
#include "study/live.h"
#include "study/study_keys.h"

/* One key of a replica: a last-writer-wins register. */
typedef struct {
    char *key;        /* the key (NUL-terminated) */
    size_t key_len;   /* bytes */
    char *val;        /* its value; NULL: deleted */
    size_t val_len;   /* bytes */
    uint64_t stamp;   /* the write's time (the world's write counter): the higher wins */
} kv_t;

/* A peer's replica of the study's keys (the store, modelled). */
typedef struct {
    kv_t *e;            /* entries */
    size_t count;       /* used */
    size_t cap;         /* allocated */
    uint32_t *index;    /* open addressing by key: entry + 1, 0 = empty */
    size_t index_cap;   /* slots (a power of two, > 2 * count) */
    uint32_t *log;      /* entries in the order they changed here (anti-entropy sends
                           what changed since it last met a peer) */
    size_t log_count;   /* used */
    size_t log_cap;     /* allocated */
} replica_t;

static inline size_t rep_slot(const replica_t *r, const char *key, size_t kl) {
    size_t mask = r->index_cap - 1, at = (size_t)sl_hash64(key, kl, 7) & mask;
    while (r->index[at]) {
        const kv_t *e = &r->e[r->index[at] - 1];
        if (e->key_len == kl && !memcmp(e->key, key, kl))
            break;
        at = (at + 1) & mask;
    }
    return at;
}

static inline kv_t *rep_find(const replica_t *r, const char *key, size_t kl) {
    if (!r->index_cap)
        return NULL;
    size_t at = rep_slot(r, key, kl);
    return r->index[at] ? &r->e[r->index[at] - 1] : NULL;
}

static inline void *rep_grow(void *p, size_t *cap, size_t want, size_t size) {
    if (want <= *cap)
        return p;
    size_t nc = *cap ? *cap : 64;
    while (nc < want)
        nc *= 2;
    void *n = realloc(p, nc * size);
    if (!n)
        abort(); /* (a test's allocation) */
    *cap = nc;
    return n;
}

/* Sets `key` to `val` (NULL: deleted) written at `stamp`, unless it holds
 * a later write. true: it changed. */
static inline bool rep_set(replica_t *r, const char *key, size_t kl, const char *val, size_t vl,
                    uint64_t stamp) {
    kv_t *e = rep_find(r, key, kl);
    if (e && e->stamp >= stamp)
        return false;
    if (!e) {
        if (r->index_cap < 2 * r->count + 2) {
            size_t cap = r->index_cap ? 2 * r->index_cap : 256;
            free(r->index);
            r->index = calloc(cap, sizeof *r->index);
            if (!r->index)
                abort(); /* (a test's allocation) */
            r->index_cap = cap;
            for (size_t i = 0; i < r->count; i++)
                r->index[rep_slot(r, r->e[i].key, r->e[i].key_len)] = (uint32_t)i + 1;
        }
        r->e = rep_grow(r->e, &r->cap, r->count + 1, sizeof *r->e);
        e = &r->e[r->count++];
        memset(e, 0, sizeof *e);
        e->key = malloc(kl + 1);
        if (!e->key)
            abort();
        memcpy(e->key, key, kl);
        e->key[kl] = 0;
        e->key_len = kl;
        r->index[rep_slot(r, key, kl)] = (uint32_t)r->count;
    }
    free(e->val);
    e->val = NULL;
    if (val) {
        e->val = malloc(vl + 1);
        if (!e->val)
            abort();
        memcpy(e->val, val, vl);
        e->val[vl] = 0;
    }
    e->val_len = vl;
    e->stamp = stamp;
    r->log = rep_grow(r->log, &r->log_cap, r->log_count + 1, sizeof *r->log);
    r->log[r->log_count++] = (uint32_t)(e - r->e);
    return true;
}

static inline void rep_fini(replica_t *r) {
    for (size_t i = 0; i < r->count; i++) {
        free(r->e[i].key);
        free(r->e[i].val);
    }
    free(r->e);
    free(r->index);
    free(r->log);
    memset(r, 0, sizeof *r);
}

/* ---- what the simulated peers share: keys, values, the live view ---- */

/* Key `kind` of trial `trial` (NULL: the study's own) of study `study`
 * (n and peer as sl_study_key_build takes them), in a buffer kept until
 * the next call. */
static inline const char *sim_key(const char *study, sl_study_key_kind kind, const char *trial,
                                  uint64_t n, const char *peer) {
    static char key[SL_STUDY_KEY_MAX];
    if (sl_study_key_build(key, sizeof key, kind, study, trial, n, peer) != SL_OK)
        abort();
    return key;
}

/* A claim register's and a result's value as the daemon writes them. */
static inline size_t sim_claim_val(const sl_claim_t *c, char val[512]) {
    size_t len = 0;
    if (sl_claim_encode(c, val, 512, &len) != SL_OK)
        abort();
    return len;
}

static inline size_t sim_result_val(const sl_result_t *r, char val[1024]) {
    size_t len = 0;
    if (sl_result_encode(r, val, 1024, &len) != SL_OK)
        abort();
    return len;
}

/* Key `e` changed in a replica: its live view takes it, as the store
 * node's listener tells the daemon's. */
static inline void sim_told(live_t *lv, const sl_study_spec_t *spec, const kv_t *e) {
    sl_study_live_set(lv, spec, (const uint8_t *)e->key, e->key_len, (const uint8_t *)e->val,
                      e->val_len, e->val != NULL);
}

/* The daemon's sl_study_live_refresh: a live view read whole from its
 * replica when it is stale (after a restart), then what changed and the
 * open trials' states derived. */
static inline void sim_refresh(live_t *lv, const replica_t *r, const char *study,
                               const sl_study_spec_t *spec, const sl_live_env_t *env,
                               uint64_t now_ms) {
    if (lv->stale) {
        sl_study_live_reset(lv);
        for (size_t i = 0; i < r->count; i++)
            if (r->e[i].val)
                sim_told(lv, spec, &r->e[i]);
    }
    sl_study_live_derive(lv, study, spec, env, now_ms);
}

/* Membership's answer for peer index q (-1: not a peer heard of). */
static inline sl_live_member sim_member(int q, bool alive, bool suspect) {
    return q < 0     ? SL_LIVE_UNKNOWN
           : !alive  ? SL_LIVE_GONE
           : suspect ? SL_LIVE_SUSPECT
                     : SL_LIVE_ALIVE;
}

#endif
