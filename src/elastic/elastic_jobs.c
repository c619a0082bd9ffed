/* The jobs an elastic node follows (docs/elastic.md, "The runtime"): the
 * table of them, each job's records read from the replica (its spec, the
 * rendezvous's records, its checkpoint pointer), the writes of its keys,
 * and its log. The lowest of the node's files: elastic_node.c (the loop),
 * elastic_ctl.c (the commands) and command_ckpt.c (a command job's
 * checkpoints) call it, and it calls none of them (docs/house.md). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "elastic/elastic_node_internal.h"
#include "starling/platform.h"

const char *sl_en_self(const sl_elastic_node_t *en) { return sl_node_name(en->node); }

static uint64_t wall_ms(void) { return sl_plat_wall_ms(); }

void sl_en_log(sl_elastic_node_t *en, en_job_t *j, const char *fmt, ...) {
    (void)en;
    char line[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    sl_log(SL_LOG_INFO, "ELASTIC", "job %s: %s", j->id, line);
    uint64_t now = wall_ms();
    sl_buf_printf(&j->log, "%02u:%02u:%02u.%03u %s\n", (unsigned)(now / 3600000 % 24),
                  (unsigned)(now / 60000 % 60), (unsigned)(now / 1000 % 60),
                  (unsigned)(now % 1000), line);
    if (j->log.len > EN_LOG_MAX) { /* keep the tail, from a line's start */
        const char *cut = j->log.data + j->log.len - EN_LOG_MAX / 2;
        const char *nl = strchr(cut, '\n');
        cut = nl ? nl + 1 : cut;
        size_t keep = j->log.len - (size_t)(cut - j->log.data);
        memmove(j->log.data, cut, keep + 1);
        j->log.len = keep;
    }
    j->log_dirty = true;
}

sl_err sl_en_put(sl_elastic_node_t *en, const en_job_t *j, const sl_elastic_key_t *k,
                 const void *val, size_t len) {
    sl_elastic_key_t key = *k;
    memcpy(key.job, j->id, sizeof key.job);
    char text[SL_ELASTIC_KEY_MAX];
    size_t kl;
    sl_err err = sl_elastic_key_build(&key, text, sizeof text, &kl);
    if (err == SL_OK)
        err = sl_store_node_put(en->store, text, kl, val, len);
    if (err != SL_OK)
        sl_log(SL_LOG_WARNING, "ELASTIC", "job %s: cannot write its record of kind %d: %s",
               j->id, (int)key.kind, sl_strerror(err));
    en->writes++;
    return err;
}

/* The tail of this peer's log of job j into the store (job/J/log/NAME),
 * durable at the end of the loop turn (sl_store_node_put_later). */
static void flush_log(sl_elastic_node_t *en, en_job_t *j) {
    sl_elastic_key_t k = {.kind = SL_ELASTIC_KEY_LOG};
    snprintf(k.peer, sizeof k.peer, "%s", sl_en_self(en));
    memcpy(k.job, j->id, sizeof k.job);
    char text[SL_ELASTIC_KEY_MAX];
    size_t kl;
    if (sl_elastic_key_build(&k, text, sizeof text, &kl) == SL_OK &&
        sl_store_node_put_later(en->store, text, kl, j->log.data, j->log.len) == SL_OK)
        j->log_dirty = false;
}

void sl_en_flush_logs(sl_elastic_node_t *en) {
    for (int i = 0; i < EN_MAX_JOBS; i++)
        if (en->jobs[i].used && en->jobs[i].log_dirty)
            flush_log(en, &en->jobs[i]);
}

/* ---- the jobs followed ---- */

en_job_t *sl_en_find(sl_elastic_node_t *en, const char *id, size_t len) {
    for (int i = 0; i < EN_MAX_JOBS; i++) {
        en_job_t *j = &en->jobs[i];
        if (j->used && ((len == SL_ELASTIC_JOB_ID_LEN && !memcmp(j->id, id, len)) ||
                        (strlen(j->spec.name) == len && !memcmp(j->spec.name, id, len))))
            return j;
    }
    return NULL;
}

/* Takes one store entry of job j into its records (the rendezvous's) or
 * its checkpoint pointer; a malformed one is counted and left out. */
void sl_en_take_entry(sl_elastic_node_t *en, en_job_t *j, const uint8_t *key, size_t key_len,
                      const uint8_t *val, size_t val_len) {
    char why[256];
    sl_elastic_key_t k;
    if (sl_elastic_key_parse((const char *)key, key_len, &k, why, sizeof why) != SL_OK)
        goto bad;
    if (k.kind == SL_ELASTIC_KEY_CKPT) {
        uint64_t step;
        uint8_t h[SL_BLAKE2B_LEN] = {0};
        if (sl_elastic_ckpt_decode(val, val_len, j->spec.trainer == SL_ELASTIC_TRAINER_COMMAND,
                                   &step, h, why, sizeof why) != SL_OK)
            goto bad;
        if (!j->has_ckpt || step >= j->ckpt_step) {
            j->has_ckpt = true;
            j->ckpt_step = step;
            memcpy(j->ckpt_blob, h, sizeof h);
        }
        return;
    }
    sl_err err = sl_elastic_records_add(j->recs, (const char *)key, key_len, val, val_len, why,
                                        sizeof why);
    if (err == SL_OK || err == SL_EEXIST)
        return;
bad:
    en->bad_records++;
    sl_node_bad_input(en->node, "elastic");
    sl_log(SL_LOG_WARNING, "ELASTIC-RECORD", "job %s: %.*s refused: %s", j->id, (int)key_len,
           (const char *)key, why);
}

typedef struct {
    sl_elastic_node_t *en;
    en_job_t *j;
    sl_elastic_entry_t *entries; /* the rendezvous's records, copied */
    size_t count, cap;           /* entries */
    sl_err err;                  /* SL_ENOMEM once a copy failed */
} scan_ctx_t;

static bool scan_job(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e) {
    scan_ctx_t *c = ctx;
    if (e->type != SL_CRDT_LWW)
        return true;
    sl_elastic_key_t k;
    char why[200];
    if (sl_elastic_key_parse((const char *)key, key_len, &k, why, sizeof why) != SL_OK ||
        (k.kind != SL_ELASTIC_KEY_WORLD && k.kind != SL_ELASTIC_KEY_ACK)) {
        sl_en_take_entry(c->en, c->j, key, key_len, e->val, e->val_len);
        return true;
    }
    /* worlds and acks: read in rising rounds, below (the history may be
       longer than a view holds) */
    if (c->count == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 256;
        sl_elastic_entry_t *ne = sl_calloc(nc, sizeof *ne);
        if (!ne) {
            c->err = SL_ENOMEM;
            return false;
        }
        if (c->count)
            memcpy(ne, c->entries, c->count * sizeof *ne);
        sl_free(c->entries);
        c->entries = ne;
        c->cap = nc;
    }
    char *copy = sl_calloc(key_len + e->val_len + 1, 1);
    if (!copy) {
        c->err = SL_ENOMEM;
        return false;
    }
    memcpy(copy, key, key_len);
    if (e->val_len)
        memcpy(copy + key_len, e->val, e->val_len);
    c->entries[c->count++] =
        (sl_elastic_entry_t){.key = copy, .key_len = key_len, .val = copy + key_len,
                             .val_len = e->val_len};
    return true;
}

/* Reads every record of job j from the replica again: the rendezvous's
 * worlds and acks in rising rounds, pruned as they come
 * (sl_elastic_records_load), so a history of any length fits the view. */
sl_err sl_en_reload(sl_elastic_node_t *en, en_job_t *j) {
    sl_elastic_records_destroy(&j->recs);
    sl_err err = sl_elastic_records_new(j->id, j->spec.max_nodes, &j->recs);
    if (err != SL_OK)
        return err;
    char prefix[32];
    int n = snprintf(prefix, sizeof prefix, "job/%s/", j->id);
    scan_ctx_t c = {.en = en, .j = j};
    sl_store_scan(sl_store_node_store(en->store), prefix, (size_t)n, scan_job, &c);
    size_t refused = 0;
    char why[256] = "";
    if (c.err == SL_OK)
        c.err = sl_elastic_records_load(j->recs, c.entries, c.count, &refused, why, sizeof why);
    if (refused) {
        en->bad_records += refused;
        sl_log(SL_LOG_WARNING, "ELASTIC-RECORD", "job %s: %zu records refused (the last: %s)",
               j->id, refused, why);
    }
    for (size_t i = 0; i < c.count; i++)
        sl_free((void *)c.entries[i].key);
    sl_free(c.entries);
    return c.err;
}

/* Forgets a job (its records stay in the store: a command reads it back). */
void sl_en_job_free(sl_elastic_node_t *en, en_job_t *j) {
    if (j->log_dirty)
        flush_log(en, j);
    sl_elastic_trainer_destroy(&j->trainer);
    sl_elastic_command_destroy(&j->command);
    sl_elastic_destroy(&j->core);
    sl_elastic_records_destroy(&j->recs);
    sl_buf_fini(&j->log);
    memset(j, 0, sizeof *j);
}

en_job_t *sl_en_add(sl_elastic_node_t *en, const char *id, const sl_elastic_job_t *spec) {
    en_job_t *j = sl_en_find(en, id, SL_ELASTIC_JOB_ID_LEN);
    if (j)
        return j;
    for (int i = 0; i < EN_MAX_JOBS && !j; i++)
        if (!en->jobs[i].used)
            j = &en->jobs[i];
    for (int i = 0; i < EN_MAX_JOBS && !j; i++) /* a job that ended makes room */
        if (en->jobs[i].finished && !en->jobs[i].command &&
            !(en->jobs[i].trainer && sl_elastic_trainer_in_world(en->jobs[i].trainer))) {
            j = &en->jobs[i];
            sl_en_job_free(en, j);
        }
    if (!j) {
        sl_log(SL_LOG_WARNING, "ELASTIC", "job %s: this peer runs %d jobs already; it is "
               "left to the others", id, EN_MAX_JOBS);
        return NULL;
    }
    memset(j, 0, sizeof *j);
    memcpy(j->id, id, SL_ELASTIC_JOB_ID_LEN);
    j->spec = *spec;
    snprintf(j->dir, sizeof j->dir, "%s/%s", en->root, id);
    sl_elastic_config_t cc = {.job_id = j->id,
                              .min_nodes = spec->min_nodes,
                              .max_nodes = spec->max_nodes,
                              .settle_ms = en->cfg.settle_ms,
                              .ack_timeout_ms = en->cfg.ack_timeout_ms};
    if (sl_plat_mkdirs(j->dir, 0700) != SL_OK || sl_elastic_new(&cc, sl_en_self(en), &j->core) ||
        sl_en_reload(en, j) != SL_OK) {
        sl_log(SL_LOG_ERR, "ELASTIC", "job %s: cannot follow it (directory %s, or memory)", id,
               j->dir);
        sl_elastic_destroy(&j->core);
        sl_elastic_records_destroy(&j->recs);
        return NULL;
    }
    j->used = true;
    sl_en_log(en, j, "following job %s (%s): %u to %u peers, %s trainer", j->id, spec->name,
              spec->min_nodes, spec->max_nodes,
              spec->trainer == SL_ELASTIC_TRAINER_BUILTIN ? "built-in" : "command");
    return j;
}

/* A spec seen in the store: checked (its id must be its hash) and followed. */
void sl_en_take_spec(sl_elastic_node_t *en, const uint8_t *key, size_t key_len,
                     const uint8_t *val, size_t val_len) {
    char why[256];
    sl_elastic_key_t k;
    sl_elastic_job_t spec;
    if (sl_elastic_key_parse((const char *)key, key_len, &k, why, sizeof why) != SL_OK ||
        sl_elastic_spec_decode(&k, val, val_len, &spec, why, sizeof why) != SL_OK) {
        en->bad_records++;
        sl_node_bad_input(en->node, "elastic");
        sl_log(SL_LOG_WARNING, "ELASTIC-RECORD", "%.*s refused: %s", (int)key_len,
               (const char *)key, why);
        return;
    }
    sl_en_add(en, k.job, &spec);
}

typedef struct {
    sl_elastic_node_t *en;
    const char *name;
    size_t len;
    en_job_t *found;
} lookup_t;

static bool scan_named(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e) {
    lookup_t *l = ctx;
    sl_elastic_key_t k;
    sl_elastic_job_t spec;
    if (e->type != SL_CRDT_LWW ||
        sl_elastic_key_parse((const char *)key, key_len, &k, NULL, 0) != SL_OK ||
        k.kind != SL_ELASTIC_KEY_SPEC ||
        sl_elastic_spec_decode(&k, e->val, e->val_len, &spec, NULL, 0) != SL_OK)
        return true;
    if ((l->len == SL_ELASTIC_JOB_ID_LEN && !memcmp(k.job, l->name, l->len)) ||
        (strlen(spec.name) == l->len && !memcmp(spec.name, l->name, l->len))) {
        l->found = sl_en_add(l->en, k.job, &spec);
        return false;
    }
    return true;
}

en_job_t *sl_en_lookup(sl_elastic_node_t *en, const char *id_or_name, size_t len) {
    en_job_t *j = sl_en_find(en, id_or_name, len);
    if (j || len == 0 || len > SL_ELASTIC_NAME_MAX)
        return j;
    /* one this peer let go (it ended, and room was needed): read back */
    lookup_t l = {en, id_or_name, len, NULL};
    sl_store_scan(sl_store_node_store(en->store), "job/", 4, scan_named, &l);
    return l.found;
}

static bool scan_specs(void *ctx, const uint8_t *key, size_t key_len, const sl_store_entry_t *e) {
    sl_elastic_node_t *en = ctx;
    if (e->type == SL_CRDT_LWW && key_len == 4 + SL_ELASTIC_JOB_ID_LEN + 5 &&
        !memcmp(key + 4 + SL_ELASTIC_JOB_ID_LEN, "/spec", 5))
        sl_en_take_spec(en, key, key_len, e->val, e->val_len);
    return true;
}

void sl_en_read_specs(sl_elastic_node_t *en) {
    sl_store_scan(sl_store_node_store(en->store), "job/", 4, scan_specs, en);
}
