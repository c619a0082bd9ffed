/* The elastic job's store keys and records: the one place that builds and
 * parses job/J/... keys and encodes and decodes their values (canonical
 * msgpack, proto/envelope.md section 3), and turns a job's entries into
 * the rendezvous core's view (sl_elastic_view_t). Every record is written
 * by another peer, so every decoder is strict and bounded: the format and
 * the receiver's rules are proto/elastic.md. */
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/why.h"
#include "starling/hash.h"
#include "starling/elastic.h"
#include "starling/mpack.h"

#define bad(why, why_len, ...) sl_why(why, why_len, SL_EPROTO, __VA_ARGS__)

/* A peer id: 1..64 bytes of UTF-8 without control characters. */
static bool peer_ok(const char *p, size_t n) {
    if (n == 0 || n > SL_ELASTIC_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
            return false;
    return sl_mpack_utf8_valid((const uint8_t *)p, n);
}

/* A round: decimal, 1..SL_ELASTIC_ROUND_MAX, no leading zero. */
static bool round_parse(const char *p, size_t n, uint64_t *out) {
    if (n == 0 || n > 16 || p[0] == '0')
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    if (v > SL_ELASTIC_ROUND_MAX)
        return false;
    *out = v;
    return true;
}

sl_err sl_elastic_key_build(const sl_elastic_key_t *k, char *out, size_t cap, size_t *len) {
    if (!k || !out || !sl_elastic_job_id_valid(k->job, strnlen(k->job, sizeof k->job)))
        return SL_EINVAL;
    bool has_peer = k->kind == SL_ELASTIC_KEY_VOL || k->kind == SL_ELASTIC_KEY_WORLD ||
                    k->kind == SL_ELASTIC_KEY_ACK || k->kind == SL_ELASTIC_KEY_FAIL ||
                    k->kind == SL_ELASTIC_KEY_LOG;
    bool has_round = k->kind == SL_ELASTIC_KEY_WORLD || k->kind == SL_ELASTIC_KEY_ACK ||
                     k->kind == SL_ELASTIC_KEY_START || k->kind == SL_ELASTIC_KEY_CURVE ||
                     k->kind == SL_ELASTIC_KEY_EPOCH;
    if (has_peer && !peer_ok(k->peer, strnlen(k->peer, sizeof k->peer)))
        return SL_EINVAL;
    if (has_round && (k->round == 0 || k->round > SL_ELASTIC_ROUND_MAX))
        return SL_EINVAL;
    int n;
    switch (k->kind) {
    case SL_ELASTIC_KEY_SPEC: n = snprintf(out, cap, "job/%s/spec", k->job); break;
    case SL_ELASTIC_KEY_CANCEL: n = snprintf(out, cap, "job/%s/cancel", k->job); break;
    case SL_ELASTIC_KEY_VOL: n = snprintf(out, cap, "job/%s/vol/%s", k->job, k->peer); break;
    case SL_ELASTIC_KEY_WORLD:
        n = snprintf(out, cap, "job/%s/w/%llu/%s", k->job, (unsigned long long)k->round,
                     k->peer);
        break;
    case SL_ELASTIC_KEY_ACK:
        n = snprintf(out, cap, "job/%s/ack/%llu/%s", k->job, (unsigned long long)k->round,
                     k->peer);
        break;
    case SL_ELASTIC_KEY_START:
    case SL_ELASTIC_KEY_CURVE:
    case SL_ELASTIC_KEY_EPOCH:
        n = snprintf(out, cap, "job/%s/%s/%llu", k->job,
                     k->kind == SL_ELASTIC_KEY_START   ? "start"
                     : k->kind == SL_ELASTIC_KEY_CURVE ? "c"
                                                       : "m",
                     (unsigned long long)k->round);
        break;
    case SL_ELASTIC_KEY_PROG: n = snprintf(out, cap, "job/%s/prog", k->job); break;
    case SL_ELASTIC_KEY_CKPT: n = snprintf(out, cap, "job/%s/ckpt", k->job); break;
    case SL_ELASTIC_KEY_DONE: n = snprintf(out, cap, "job/%s/done", k->job); break;
    case SL_ELASTIC_KEY_FAIL:
    case SL_ELASTIC_KEY_LOG:
        n = snprintf(out, cap, "job/%s/%s/%s", k->job,
                     k->kind == SL_ELASTIC_KEY_FAIL ? "fail" : "log", k->peer);
        break;
    default: return SL_EINVAL;
    }
    if (n < 0 || (size_t)n >= cap)
        return SL_ETOOBIG;
    if (len)
        *len = (size_t)n;
    return SL_OK;
}

sl_err sl_elastic_key_parse(const char *key, size_t len, sl_elastic_key_t *out, char *why,
                            size_t why_len) {
    if (!key || !out)
        return SL_EINVAL;
    memset(out, 0, sizeof *out);
    if (len >= SL_ELASTIC_KEY_MAX)
        return sl_why(why, why_len, SL_ETOOBIG, "elastic key: over %d bytes",
                      SL_ELASTIC_KEY_MAX - 1);
    if (len < 4 + SL_ELASTIC_JOB_ID_LEN + 1 || memcmp(key, "job/", 4) != 0 ||
        key[4 + SL_ELASTIC_JOB_ID_LEN] != '/' ||
        !sl_elastic_job_id_valid(key + 4, SL_ELASTIC_JOB_ID_LEN))
        return bad(why, why_len, "elastic key: not job/<16 hex>/...");
    memcpy(out->job, key + 4, SL_ELASTIC_JOB_ID_LEN);
    const char *p = key + 4 + SL_ELASTIC_JOB_ID_LEN + 1, *end = key + len;
    size_t rest = (size_t)(end - p);
    if (rest == 4 && memcmp(p, "spec", 4) == 0) {
        out->kind = SL_ELASTIC_KEY_SPEC;
        return SL_OK;
    }
    static const struct {
        const char *name;
        sl_elastic_key_kind kind;
    } single[] = {{"cancel", SL_ELASTIC_KEY_CANCEL}, {"prog", SL_ELASTIC_KEY_PROG},
                  {"ckpt", SL_ELASTIC_KEY_CKPT},     {"done", SL_ELASTIC_KEY_DONE}},
      numbered[] = {{"start/", SL_ELASTIC_KEY_START}, {"c/", SL_ELASTIC_KEY_CURVE},
                    {"m/", SL_ELASTIC_KEY_EPOCH}},
      by_peer[] = {{"vol/", SL_ELASTIC_KEY_VOL}, {"fail/", SL_ELASTIC_KEY_FAIL},
                   {"log/", SL_ELASTIC_KEY_LOG}};
    for (size_t i = 0; i < sizeof single / sizeof single[0]; i++)
        if (rest == strlen(single[i].name) && memcmp(p, single[i].name, rest) == 0) {
            out->kind = single[i].kind;
            return SL_OK;
        }
    for (size_t i = 0; i < sizeof numbered / sizeof numbered[0]; i++) {
        size_t nl = strlen(numbered[i].name);
        if (rest > nl && memcmp(p, numbered[i].name, nl) == 0) {
            if (!round_parse(p + nl, rest - nl, &out->round))
                return bad(why, why_len, "elastic key: job/%s/%s takes 1..2^53-1 in decimal",
                           out->job, numbered[i].name);
            out->kind = numbered[i].kind;
            return SL_OK;
        }
    }
    const char *peer = NULL;
    for (size_t i = 0; i < sizeof by_peer / sizeof by_peer[0] && !peer; i++) {
        size_t nl = strlen(by_peer[i].name);
        if (rest > nl && memcmp(p, by_peer[i].name, nl) == 0) {
            out->kind = by_peer[i].kind;
            peer = p + nl;
        }
    }
    if (!peer) {
        if (rest > 2 && memcmp(p, "w/", 2) == 0)
            out->kind = SL_ELASTIC_KEY_WORLD, p += 2;
        else if (rest > 4 && memcmp(p, "ack/", 4) == 0)
            out->kind = SL_ELASTIC_KEY_ACK, p += 4;
        else
            return bad(why, why_len, "elastic key: unknown record after job/%s/", out->job);
        const char *slash = memchr(p, '/', (size_t)(end - p));
        if (!slash || !round_parse(p, (size_t)(slash - p), &out->round))
            return bad(why, why_len,
                       "elastic key: the round must be 1..2^53-1 in decimal, then /peer");
        peer = slash + 1;
    }
    size_t pn = (size_t)(end - peer);
    if (!peer_ok(peer, pn))
        return bad(why, why_len,
                   "elastic key: the peer id must be 1..64 bytes of UTF-8 without control "
                   "characters");
    memcpy(out->peer, peer, pn);
    out->peer[pn] = '\0';
    return SL_OK;
}

/* ---- values ---- */

sl_err sl_elastic_ckpt_decode(const void *val, size_t len, bool command, uint64_t *step,
                              uint8_t blob[32], char *why, size_t why_len) {
    if (len > SL_ELASTIC_VALUE_MAX)
        return sl_why(why, why_len, SL_ETOOBIG, "ckpt: over %d bytes", SL_ELASTIC_VALUE_MAX);
    cJSON *o = cJSON_ParseWithLength((const char *)val, len);
    const cJSON *st = cJSON_GetObjectItem(o, "step"), *b = cJSON_GetObjectItem(o, "blob"),
                *files = cJSON_GetObjectItem(o, "files"), *f;
    sl_err err = SL_OK;
    if (!cJSON_IsObject(o))
        err = bad(why, why_len, "ckpt: not a JSON object");
    else if (!cJSON_IsNumber(st) || !(st->valuedouble >= 1) ||
             st->valuedouble > (double)SL_ELASTIC_ROUND_MAX ||
             st->valuedouble != (double)(uint64_t)st->valuedouble)
        err = bad(why, why_len, "ckpt: \"step\" must be a whole number in [1, 2^53-1]");
    else if (!command && !(cJSON_IsString(b) && strlen(b->valuestring) == 64 &&
                           sl_unhex(b->valuestring, 64, blob)))
        err = bad(why, why_len, "ckpt: \"blob\" must be 64 lower-case hex digits");
    else if (command && !cJSON_IsObject(files))
        err = bad(why, why_len, "ckpt: a command job's names its \"files\"");
    int n = 0;
    const cJSON *list = command && err == SL_OK ? files : NULL;
    cJSON_ArrayForEach(f, list) {
        uint8_t h[32];
        if (++n > 16 || !cJSON_IsString(f) || strlen(f->valuestring) != 64 ||
            !sl_unhex(f->valuestring, 64, h) || !f->string[0] || f->string[0] == '.' ||
            strlen(f->string) >= 128 || strchr(f->string, '/')) {
            err = bad(why, why_len, "ckpt: \"files\" maps at most 16 plain file names (not "
                                    "starting with '.') to 64 hex digits");
            break;
        }
    }
    if (err == SL_OK)
        *step = (uint64_t)st->valuedouble;
    cJSON_Delete(o);
    return err;
}

static sl_err finish(sl_mpack_writer_t *w, uint8_t *out, size_t cap, size_t *len) {
    uint8_t *buf = NULL;
    size_t n = 0;
    sl_err err = sl_mpack_writer_finish(w, &buf, &n);
    if (err)
        return err;
    if (n > cap) {
        sl_free(buf);
        return SL_ETOOBIG;
    }
    if (n)
        memcpy(out, buf, n);
    sl_free(buf);
    if (len)
        *len = n;
    return SL_OK;
}

static bool ref_ok(const sl_elastic_ref_t *r) {
    size_t n = strnlen(r->leader, sizeof r->leader);
    if (r->round > SL_ELASTIC_ROUND_MAX)
        return false;
    return r->round == 0 ? n == 0 : peer_ok(r->leader, n);
}

static void put_ref(sl_mpack_writer_t *w, uint64_t k, const sl_elastic_ref_t *r) {
    sl_mpack_write_uint(w, k);
    sl_mpack_write_uint(w, r->round);
    sl_mpack_write_uint(w, k + 1);
    sl_mpack_write_str(w, r->leader, strlen(r->leader));
}

sl_err sl_elastic_vol_encode(const sl_elastic_vol_t *v, uint8_t *out, size_t cap, size_t *len) {
    if (!v || v->round == 0 || v->round > SL_ELASTIC_ROUND_MAX)
        return SL_EINVAL;
    sl_mpack_writer_t w;
    sl_mpack_writer_init(&w, SL_ELASTIC_VALUE_MAX);
    sl_mpack_write_map(&w, 1);
    sl_mpack_write_uint(&w, 0);
    sl_mpack_write_uint(&w, v->round);
    return finish(&w, out, cap, len);
}

sl_err sl_elastic_world_encode(const sl_elastic_world_t *wd, uint32_t max_nodes, uint8_t *out,
                               size_t cap, size_t *len) {
    if (!wd || wd->id.round == 0 || !ref_ok(&wd->id) || !ref_ok(&wd->parent) ||
        wd->parent.round >= wd->id.round || !ref_ok(&wd->graft) ||
        wd->graft.round >= wd->id.round || (wd->graft.round && wd->parent.round) ||
        wd->count == 0 || wd->count > max_nodes || wd->count > SL_ELASTIC_MAX_NODES)
        return SL_EINVAL;
    for (uint32_t i = 0; i < wd->count; i++) {
        if (!peer_ok(wd->members[i], strnlen(wd->members[i], sizeof wd->members[i])))
            return SL_EINVAL;
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(wd->members[i], wd->members[j]) == 0)
                return SL_EINVAL;
    }
    sl_mpack_writer_t w;
    sl_mpack_writer_init(&w, SL_ELASTIC_VALUE_MAX);
    sl_mpack_write_map(&w, wd->graft.round ? 5 : 3);
    put_ref(&w, 0, &wd->parent);
    sl_mpack_write_uint(&w, 2);
    sl_mpack_write_array(&w, wd->count);
    for (uint32_t i = 0; i < wd->count; i++)
        sl_mpack_write_str(&w, wd->members[i], strlen(wd->members[i]));
    if (wd->graft.round) /* only a graft has them */
        put_ref(&w, 3, &wd->graft);
    return finish(&w, out, cap, len);
}

sl_err sl_elastic_ack_encode(const sl_elastic_ack_t *a, uint8_t *out, size_t cap, size_t *len) {
    if (!a || a->world.round == 0 || !ref_ok(&a->world) || !ref_ok(&a->tip) ||
        !ref_ok(&a->state_world) || a->tip.round >= a->world.round ||
        a->state_world.round >= a->world.round || a->step > SL_ELASTIC_ROUND_MAX)
        return SL_EINVAL;
    sl_mpack_writer_t w;
    sl_mpack_writer_init(&w, SL_ELASTIC_VALUE_MAX);
    sl_mpack_write_map(&w, 7);
    sl_mpack_write_uint(&w, 0);
    sl_mpack_write_str(&w, a->world.leader, strlen(a->world.leader));
    put_ref(&w, 1, &a->tip);
    sl_mpack_write_uint(&w, 3);
    sl_mpack_write_uint(&w, a->step);
    sl_mpack_write_uint(&w, 4);
    sl_mpack_write_bool(&w, a->has_state);
    put_ref(&w, 5, &a->state_world);
    return finish(&w, out, cap, len);
}

sl_err sl_elastic_cancel_encode(uint8_t *out, size_t cap, size_t *len) {
    sl_mpack_writer_t w;
    sl_mpack_writer_init(&w, SL_ELASTIC_VALUE_MAX);
    sl_mpack_write_map(&w, 0);
    return finish(&w, out, cap, len);
}

/* The reader's error as a reason. */
static sl_err reader_why(const sl_mpack_reader_t *r, const char *what, char *why,
                         size_t why_len) {
    return sl_why(why, why_len, r->err, "%s: %s at byte %zu", what, sl_strerror(r->err),
                  r->err_off);
}

/* Starts a record's map; every field below `fields` is required. */
typedef struct {
    sl_mpack_reader_t r;
    sl_mpack_map_t m;
    uint32_t seen; /* bit i: field i read */
} rec_t;

static sl_err rec_begin(rec_t *x, const void *val, size_t len, const char *what, char *why,
                        size_t why_len) {
    memset(x, 0, sizeof *x);
    if (len > SL_ELASTIC_VALUE_MAX)
        return sl_why(why, why_len, SL_ETOOBIG, "%s: over %d bytes", what,
                      SL_ELASTIC_VALUE_MAX);
    sl_mpack_reader_init(&x->r, val, len);
    if (sl_mpack_map_begin(&x->r, 64, &x->m) != SL_OK)
        return reader_why(&x->r, what, why, why_len);
    return SL_OK;
}

/* Reads a peer id str (1..64 bytes, no control character) into out;
 * allow_empty for the leader of round 0. */
static void read_peer(sl_mpack_reader_t *r, bool allow_empty, char out[SL_ELASTIC_ID_MAX + 1]) {
    const uint8_t *p;
    size_t n;
    if (sl_mpack_read_str(r, allow_empty ? 0 : 1, SL_ELASTIC_ID_MAX, &p, &n) != SL_OK)
        return;
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x20 || p[i] == 0x7f) {
            sl_mpack_reader_fail(r, SL_EPROTO);
            return;
        }
    if (n)
        memcpy(out, p, n);
    out[n] = '\0';
}

static sl_err rec_end(rec_t *x, uint32_t fields, const char *what, char *why, size_t why_len) {
    if (x->r.err == SL_OK)
        sl_mpack_reader_end(&x->r);
    if (x->r.err)
        return reader_why(&x->r, what, why, why_len);
    for (uint32_t i = 0; i < fields; i++)
        if (!(x->seen & (1u << i)))
            return bad(why, why_len, "%s: field %u missing", what, i);
    return SL_OK;
}

/* Unknown keys: skipped after checking they are canonical (envelope 3.1). */
static void skip_unknown(rec_t *x) {
    sl_mpack_skip(&x->r, SL_MPACK_MAX_DEPTH);
}

sl_err sl_elastic_vol_decode(const sl_elastic_key_t *key, const void *val, size_t len,
                             sl_elastic_vol_t *out, char *why, size_t why_len) {
    if (!key || key->kind != SL_ELASTIC_KEY_VOL || !out)
        return SL_EINVAL;
    memset(out, 0, sizeof *out);
    rec_t x;
    sl_err err = rec_begin(&x, val, len, "vol", why, why_len);
    if (err)
        return err;
    uint64_t k;
    while (sl_mpack_map_next(&x.r, &x.m, &k)) {
        if (k == 0) {
            if (sl_mpack_read_uint(&x.r, SL_ELASTIC_ROUND_MAX, &out->round) == SL_OK &&
                out->round == 0)
                sl_mpack_reader_fail(&x.r, SL_EPROTO);
        } else {
            skip_unknown(&x);
            continue;
        }
        x.seen |= 1u << k;
    }
    if ((err = rec_end(&x, 1, "vol", why, why_len)))
        return err;
    snprintf(out->peer, sizeof out->peer, "%s", key->peer);
    return SL_OK;
}

sl_err sl_elastic_world_decode(const sl_elastic_key_t *key, uint32_t max_nodes,
                               const void *val, size_t len, sl_elastic_world_t *out,
                               char *why, size_t why_len) {
    if (!key || key->kind != SL_ELASTIC_KEY_WORLD || !out || max_nodes == 0 ||
        max_nodes > SL_ELASTIC_MAX_NODES)
        return SL_EINVAL;
    memset(out, 0, sizeof *out);
    rec_t x;
    sl_err err = rec_begin(&x, val, len, "world", why, why_len);
    if (err)
        return err;
    uint64_t k;
    while (sl_mpack_map_next(&x.r, &x.m, &k)) {
        switch (k) {
        case 0: sl_mpack_read_uint(&x.r, SL_ELASTIC_ROUND_MAX, &out->parent.round); break;
        case 1: read_peer(&x.r, true, out->parent.leader); break;
        case 2: {
            uint32_t n = 0;
            if (sl_mpack_read_array(&x.r, max_nodes, &n) != SL_OK)
                break;
            if (n == 0) {
                sl_mpack_reader_fail(&x.r, SL_EPROTO);
                break;
            }
            for (uint32_t i = 0; i < n && x.r.err == SL_OK; i++)
                read_peer(&x.r, false, out->members[i]);
            out->count = n;
            break;
        }
        case 3:
            if (sl_mpack_read_uint(&x.r, SL_ELASTIC_ROUND_MAX, &out->graft.round) == SL_OK &&
                out->graft.round == 0)
                sl_mpack_reader_fail(&x.r, SL_EPROTO); /* no graft: the fields are absent */
            break;
        case 4: read_peer(&x.r, false, out->graft.leader); break;
        default: skip_unknown(&x); continue;
        }
        x.seen |= 1u << k;
    }
    if ((err = rec_end(&x, 3, "world", why, why_len)))
        return err;
    if (out->parent.round >= key->round)
        return bad(why, why_len, "world: parent round %llu is not below the world's (%llu)",
                   (unsigned long long)out->parent.round, (unsigned long long)key->round);
    if ((out->parent.round == 0) != (out->parent.leader[0] == '\0'))
        return bad(why, why_len, "world: a parent leader goes with a parent round, and only then");
    if (!(x.seen >> 3 & 1) != !(x.seen >> 4 & 1))
        return bad(why, why_len, "world: a graft round goes with a graft leader, and only then");
    if (out->graft.round >= key->round)
        return bad(why, why_len, "world: graft round %llu is not below the world's (%llu)",
                   (unsigned long long)out->graft.round, (unsigned long long)key->round);
    if (out->graft.round && out->parent.round)
        return bad(why, why_len, "world: a graft is a root (it has no parent)");
    for (uint32_t i = 0; i < out->count; i++)
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(out->members[i], out->members[j]) == 0)
                return bad(why, why_len, "world: member %u is also member %u", i, j);
    out->id.round = key->round;
    snprintf(out->id.leader, sizeof out->id.leader, "%s", key->peer);
    return SL_OK;
}

sl_err sl_elastic_ack_decode(const sl_elastic_key_t *key, const void *val, size_t len,
                             sl_elastic_ack_t *out, char *why, size_t why_len) {
    if (!key || key->kind != SL_ELASTIC_KEY_ACK || !out)
        return SL_EINVAL;
    memset(out, 0, sizeof *out);
    rec_t x;
    sl_err err = rec_begin(&x, val, len, "ack", why, why_len);
    if (err)
        return err;
    uint64_t k;
    while (sl_mpack_map_next(&x.r, &x.m, &k)) {
        switch (k) {
        case 0: read_peer(&x.r, false, out->world.leader); break;
        case 1: sl_mpack_read_uint(&x.r, SL_ELASTIC_ROUND_MAX, &out->tip.round); break;
        case 2: read_peer(&x.r, true, out->tip.leader); break;
        case 3: sl_mpack_read_uint(&x.r, SL_ELASTIC_ROUND_MAX, &out->step); break;
        case 4: sl_mpack_read_bool(&x.r, &out->has_state); break;
        case 5: sl_mpack_read_uint(&x.r, SL_ELASTIC_ROUND_MAX, &out->state_world.round); break;
        case 6: read_peer(&x.r, true, out->state_world.leader); break;
        default: skip_unknown(&x); continue;
        }
        x.seen |= 1u << k;
    }
    if ((err = rec_end(&x, 7, "ack", why, why_len)))
        return err;
    if (out->tip.round >= key->round || out->state_world.round >= key->round)
        return bad(why, why_len, "ack: its tip and state world must be below its round (%llu)",
                   (unsigned long long)key->round);
    if ((out->tip.round == 0) != (out->tip.leader[0] == '\0') ||
        (out->state_world.round == 0) != (out->state_world.leader[0] == '\0'))
        return bad(why, why_len, "ack: a leader goes with a round above 0, and only then");
    out->world.round = key->round;
    snprintf(out->peer, sizeof out->peer, "%s", key->peer);
    return SL_OK;
}

sl_err sl_elastic_cancel_decode(const void *val, size_t len, char *why, size_t why_len) {
    rec_t x;
    sl_err err = rec_begin(&x, val, len, "cancel", why, why_len);
    if (err)
        return err;
    uint64_t k;
    while (sl_mpack_map_next(&x.r, &x.m, &k))
        skip_unknown(&x);
    return rec_end(&x, 0, "cancel", why, why_len);
}

sl_err sl_elastic_spec_decode(const sl_elastic_key_t *key, const void *val, size_t len,
                              sl_elastic_job_t *out, char *why, size_t why_len) {
    if (!key || key->kind != SL_ELASTIC_KEY_SPEC || !out || (!val && len))
        return SL_EINVAL;
    if (len > SL_ELASTIC_JOB_CANON_MAX)
        return sl_why(why, why_len, SL_ETOOBIG, "spec: over %d bytes", SL_ELASTIC_JOB_CANON_MAX);
    char msg[200];
    sl_err err = sl_elastic_job_parse(val ? val : "", len, out, msg, sizeof msg);
    if (err == SL_ENOMEM)
        return err;
    if (err)
        return bad(why, why_len, "spec: %s", msg);
    char canon[SL_ELASTIC_JOB_CANON_MAX], id[SL_ELASTIC_JOB_ID_LEN + 1];
    size_t n;
    if (sl_elastic_job_encode(out, canon, sizeof canon, &n) != SL_OK || n != len ||
        memcmp(canon, val, n) != 0)
        return bad(why, why_len, "spec: not the job's canonical encoding");
    if (sl_elastic_job_id(out, id) != SL_OK || strcmp(id, key->job) != 0)
        return bad(why, why_len, "spec: its id is %s, not the key's %s", id, key->job);
    return SL_OK;
}

/* ---- the records of one job, as the core's view ---- */

struct sl_elastic_records {
    char job[SL_ELASTIC_JOB_ID_LEN + 1];
    uint32_t max_nodes;
    sl_elastic_world_t *worlds;
    const sl_elastic_world_t **world_ptrs;
    size_t world_count, world_cap;
    sl_elastic_ack_t *acks;
    const sl_elastic_ack_t **ack_ptrs;
    size_t ack_count, ack_cap;
    sl_elastic_vol_t *vols;
    size_t vol_count, vol_cap;
    bool cancelled;
    sl_elastic_ref_t anchor;   /* pruned below it (round 0: not pruned) */
    sl_elastic_past_t *past;   /* what the core keeps of the acks below it */
    size_t past_count;         /* entries */
    uint64_t left_out;         /* records below the anchor read since it was set */
    bool stale;                /* a record arrived that the pruned view cannot judge:
                                  the records must be read again, whole */
};

sl_err sl_elastic_records_new(const char *job_id, uint32_t max_nodes,
                              sl_elastic_records_t **out) {
    if (!job_id || !out || !sl_elastic_job_id_valid(job_id, strlen(job_id)) || max_nodes == 0 ||
        max_nodes > SL_ELASTIC_MAX_NODES)
        return SL_EINVAL;
    sl_elastic_records_t *r = sl_calloc(1, sizeof *r);
    if (!r)
        return SL_ENOMEM;
    memcpy(r->job, job_id, SL_ELASTIC_JOB_ID_LEN);
    r->max_nodes = max_nodes;
    *out = r;
    return SL_OK;
}

void sl_elastic_records_destroy(sl_elastic_records_t **rp) {
    if (!rp || !*rp)
        return;
    sl_elastic_records_t *r = *rp;
    sl_free(r->worlds);
    sl_free(r->world_ptrs);
    sl_free(r->acks);
    sl_free(r->ack_ptrs);
    sl_free(r->vols);
    sl_free(r->past);
    sl_free(r);
    *rp = NULL;
}

/* Grows an array of `size`-byte entries (and, if ptrs, its pointer array,
 * re-pointed) to hold one more. */
static sl_err grow(void **arr, const void ***ptrs, size_t *cap, size_t count, size_t size) {
    if (count < *cap)
        return SL_OK;
    size_t nc = *cap ? *cap * 2 : 8;
    if (nc > SL_ELASTIC_MAX_RECORDS)
        nc = SL_ELASTIC_MAX_RECORDS;
    void *na = sl_calloc(nc, size);
    const void **np = ptrs ? sl_calloc(nc, sizeof *np) : NULL;
    if (!na || (ptrs && !np)) {
        sl_free(na);
        sl_free(np);
        return SL_ENOMEM;
    }
    if (count)
        memcpy(na, *arr, count * size);
    sl_free(*arr);
    *arr = na;
    if (ptrs) {
        for (size_t i = 0; i < count; i++)
            np[i] = (const char *)na + i * size;
        sl_free(*ptrs);
        *ptrs = np;
    }
    *cap = nc;
    return SL_OK;
}

sl_err sl_elastic_records_add(sl_elastic_records_t *r, const char *key, size_t key_len,
                              const void *val, size_t val_len, char *why, size_t why_len) {
    if (!r || !key)
        return SL_EINVAL;
    sl_elastic_key_t k;
    sl_err err = sl_elastic_key_parse(key, key_len, &k, why, why_len);
    if (err)
        return err;
    if (strcmp(k.job, r->job) != 0)
        return bad(why, why_len, "elastic key: of job %s, not %s", k.job, r->job);
    switch (k.kind) {
    case SL_ELASTIC_KEY_SPEC:
    case SL_ELASTIC_KEY_START:
    case SL_ELASTIC_KEY_PROG:
    case SL_ELASTIC_KEY_CURVE:
    case SL_ELASTIC_KEY_EPOCH:
    case SL_ELASTIC_KEY_CKPT:
    case SL_ELASTIC_KEY_DONE:
    case SL_ELASTIC_KEY_FAIL:
    case SL_ELASTIC_KEY_LOG: return SL_OK; /* not the rendezvous's */
    case SL_ELASTIC_KEY_CANCEL:
        if ((err = sl_elastic_cancel_decode(val, val_len, why, why_len)))
            return err;
        r->cancelled = true;
        return SL_OK;
    case SL_ELASTIC_KEY_VOL: {
        sl_elastic_vol_t v;
        if ((err = sl_elastic_vol_decode(&k, val, val_len, &v, why, why_len)))
            return err;
        /* a register that only rises: a peer volunteers again, for a
           later round, each time it is idle (an older value read late,
           or again, changes nothing) */
        for (size_t i = 0; i < r->vol_count; i++)
            if (strcmp(r->vols[i].peer, v.peer) == 0) {
                if (v.round > r->vols[i].round)
                    r->vols[i].round = v.round;
                return SL_OK;
            }
        if (r->vol_count >= SL_ELASTIC_MAX_RECORDS)
            return sl_why(why, why_len, SL_ETOOBIG, "vol: over %d records",
                          SL_ELASTIC_MAX_RECORDS);
        if ((err = grow((void **)&r->vols, NULL, &r->vol_cap, r->vol_count, sizeof v)))
            return err;
        r->vols[r->vol_count++] = v;
        return SL_OK;
    }
    case SL_ELASTIC_KEY_WORLD: {
        sl_elastic_world_t w;
        if ((err = sl_elastic_world_decode(&k, r->max_nodes, val, val_len, &w, why, why_len)))
            return err;
        if (!sl_elastic_anchor_judges(&r->anchor, &w)) {
            /* below the anchor, and new to this replica (a replica's records
               are read once), or carrying on a world the view left out:
               what the view kept of the past may be wrong */
            r->stale = true;
            if (w.id.round < r->anchor.round) {
                r->left_out++;
                return SL_OK;
            }
        }
        for (size_t i = 0; i < r->world_count; i++)
            if (sl_elastic_ref_eq(&r->worlds[i].id, &w.id))
                return sl_why(why, why_len, SL_EEXIST, "world: a second record of round %llu by %s",
                           (unsigned long long)w.id.round, w.id.leader);
        if (r->world_count >= SL_ELASTIC_MAX_RECORDS) {
            r->stale = true; /* the view misses it: read them again, in order */
            return sl_why(why, why_len, SL_ETOOBIG, "world: over %d records",
                          SL_ELASTIC_MAX_RECORDS);
        }
        if ((err = grow((void **)&r->worlds, (const void ***)&r->world_ptrs, &r->world_cap,
                        r->world_count, sizeof w)))
            return err;
        r->worlds[r->world_count] = w;
        r->world_ptrs[r->world_count] = &r->worlds[r->world_count];
        r->world_count++;
        return SL_OK;
    }
    case SL_ELASTIC_KEY_ACK: {
        sl_elastic_ack_t a;
        if ((err = sl_elastic_ack_decode(&k, val, val_len, &a, why, why_len)))
            return err;
        if (a.world.round < r->anchor.round) {
            r->left_out++;
            r->stale = true;
            return SL_OK;
        }
        for (size_t i = 0; i < r->ack_count; i++)
            if (r->acks[i].world.round == a.world.round && strcmp(r->acks[i].peer, a.peer) == 0)
                return sl_why(why, why_len, SL_EEXIST, "ack: a second record of round %llu by %s",
                           (unsigned long long)a.world.round, a.peer);
        if (r->ack_count >= SL_ELASTIC_MAX_RECORDS) {
            r->stale = true;
            return sl_why(why, why_len, SL_ETOOBIG, "ack: over %d records",
                          SL_ELASTIC_MAX_RECORDS);
        }
        if ((err = grow((void **)&r->acks, (const void ***)&r->ack_ptrs, &r->ack_cap,
                        r->ack_count, sizeof a)))
            return err;
        r->acks[r->ack_count] = a;
        r->ack_ptrs[r->ack_count] = &r->acks[r->ack_count];
        r->ack_count++;
        return SL_OK;
    }
    }
    return SL_EINVAL;
}

void sl_elastic_records_view(const sl_elastic_records_t *r, sl_elastic_view_t *view) {
    view->worlds = r->world_ptrs;
    view->world_count = r->world_count;
    view->acks = r->ack_ptrs;
    view->ack_count = r->ack_count;
    view->vols = r->vols;
    view->vol_count = r->vol_count;
    view->cancelled = r->cancelled;
    view->anchor = r->anchor;
    view->past = r->past;
    view->past_count = r->past_count;
}

/* Keeps the `count` entries of `size` bytes of `arr` whose round (a
 * uint64_t at `round_off`) is at least `cut`, in order, and points `ptrs`
 * at them; returns how many are kept. */
static size_t keep_from(void *arr, const void **ptrs, size_t count, size_t size,
                        size_t round_off, uint64_t cut) {
    char *a = arr;
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t round;
        memcpy(&round, a + i * size + round_off, sizeof round);
        if (round < cut)
            continue;
        if (k != i)
            memcpy(a + k * size, a + i * size, size);
        k++;
    }
    for (size_t i = 0; i < k; i++)
        ptrs[i] = a + i * size;
    return k;
}

/* Prunes at the newest anchor at or below round `limit`. */
static sl_err prune_to(sl_elastic_records_t *r, uint64_t limit, bool *moved) {
    *moved = false;
    sl_elastic_view_t v;
    memset(&v, 0, sizeof v);
    sl_elastic_records_view(r, &v);
    size_t cap = r->past_count + r->ack_count;
    sl_elastic_past_t *past = sl_calloc(cap ? cap : 1, sizeof *past);
    if (!past)
        return SL_ENOMEM;
    sl_elastic_ref_t anchor;
    size_t n;
    sl_err err = sl_elastic_anchor(&v, limit, &anchor, past, cap, &n);
    if (err || sl_elastic_ref_eq(&anchor, &r->anchor)) {
        sl_free(past);
        return err;
    }
    /* the records below it go */
    r->world_count = keep_from(r->worlds, (const void **)r->world_ptrs, r->world_count,
                               sizeof *r->worlds, offsetof(sl_elastic_world_t, id.round),
                               anchor.round);
    r->ack_count = keep_from(r->acks, (const void **)r->ack_ptrs, r->ack_count, sizeof *r->acks,
                             offsetof(sl_elastic_ack_t, world.round), anchor.round);
    sl_free(r->past);
    r->past = past;
    r->past_count = n;
    r->anchor = anchor;
    *moved = true;
    return SL_OK;
}

sl_err sl_elastic_records_prune(sl_elastic_records_t *r, bool *moved) {
    return prune_to(r, UINT64_MAX, moved);
}

/* A world or ack entry of a history being loaded: its round, and (a world)
 * the round of the parent or graft it names. */
typedef struct {
    uint64_t round;  /* the key's round */
    uint64_t base;   /* a world: its parent's or graft's round (0: none or unknown) */
    size_t i;        /* index in the entries */
} load_item_t;

static int load_item_cmp(const void *a, const void *b) {
    const load_item_t *x = a, *y = b;
    if (x->round != y->round)
        return x->round < y->round ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

sl_err sl_elastic_records_load(sl_elastic_records_t *r, const sl_elastic_entry_t *entries,
                               size_t count, size_t *refused, char *why, size_t why_len) {
    *refused = 0;
    load_item_t *items = sl_calloc(count ? count : 1, sizeof *items);
    uint64_t *later = sl_calloc(count + 1, sizeof *later);
    if (!items || !later) {
        sl_free(items);
        sl_free(later);
        return SL_ENOMEM;
    }
    size_t n = 0;
    char w2[200];
    sl_err err = SL_OK;
    for (size_t i = 0; i < count; i++) {
        const sl_elastic_entry_t *e = &entries[i];
        sl_elastic_key_t k;
        bool ordered = sl_elastic_key_parse(e->key, e->key_len, &k, w2, sizeof w2) == SL_OK &&
                       (k.kind == SL_ELASTIC_KEY_WORLD || k.kind == SL_ELASTIC_KEY_ACK);
        if (!ordered) { /* volunteers, cancel, the rest: in any order */
            err = sl_elastic_records_add(r, e->key, e->key_len, e->val, e->val_len, w2,
                                         sizeof w2);
            if (err == SL_ENOMEM)
                goto done;
            if (err && err != SL_EEXIST) {
                (*refused)++;
                snprintf(why, why_len, "%s", w2);
            }
            continue;
        }
        items[n].round = k.round;
        items[n].i = i;
        sl_elastic_world_t w;
        if (k.kind == SL_ELASTIC_KEY_WORLD &&
            sl_elastic_world_decode(&k, r->max_nodes, e->val, e->val_len, &w, w2, sizeof w2) ==
                SL_OK)
            items[n].base = w.parent.round ? w.parent.round : w.graft.round;
        n++;
    }
    qsort(items, n, sizeof *items, load_item_cmp);
    /* later[j]: the lowest base a world from item j on names; an anchor
       above it would make that world stale once read */
    later[n] = UINT64_MAX;
    for (size_t j = n; j-- > 0;)
        later[j] = items[j].base && items[j].base < later[j + 1] ? items[j].base : later[j + 1];
    for (size_t j = 0; j < n; j++) {
        if (j > 0 && items[j].round != items[j - 1].round &&
            (r->world_count >= SL_ELASTIC_MAX_RECORDS / 2 ||
             r->ack_count >= SL_ELASTIC_MAX_RECORDS / 2)) {
            bool moved; /* a whole prefix of the history is in: prune it */
            if ((err = prune_to(r, later[j], &moved)) == SL_ENOMEM)
                goto done;
        }
        const sl_elastic_entry_t *e = &entries[items[j].i];
        err = sl_elastic_records_add(r, e->key, e->key_len, e->val, e->val_len, w2, sizeof w2);
        if (err == SL_ENOMEM)
            goto done;
        if (err && err != SL_EEXIST) {
            (*refused)++;
            snprintf(why, why_len, "%s", w2);
        }
    }
    err = SL_OK;
done:
    sl_free(items);
    sl_free(later);
    return err;
}

uint64_t sl_elastic_records_left_out(const sl_elastic_records_t *r) { return r->left_out; }

bool sl_elastic_records_stale(const sl_elastic_records_t *r) { return r->stale; }
