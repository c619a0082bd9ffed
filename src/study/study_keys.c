/* A study's store keys, built and parsed in one place (their table:
 * docs/studies.md, "Store layout"). The loop, the control commands, the
 * live view and the checkpoints used to print and count them by hand
 * ("study/%s/t/%s/...", `6 + SL_TRIAL_ID_LEN`): twenty prints and eight
 * offsets that had to agree. */
#include "study/study_keys.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define ROOT "study/"
#define ROOT_LEN (sizeof ROOT - 1)

/* The names after study/S/ (a study's own keys). */
static const struct {
    const char *name;
    sl_study_key_kind kind;
} study_names[] = {
    {"spec", SL_STUDY_KEY_SPEC},
    {"start", SL_STUDY_KEY_START},
    {"cancel", SL_STUDY_KEY_CANCEL},
    {"finished", SL_STUDY_KEY_FINISHED},
};

/* The names after study/S/t/T/: alone (stop, ck) or before '/' and a rest
 * (rung/R, ...). A bare "log" is a trial's log from before it was one key
 * per run, so log is both. */
static const struct {
    const char *name;
    sl_study_key_kind kind;
    bool alone;    /* the name is the whole sub-key */
    bool has_rest; /* "name/rest" */
} trial_names[] = {
    {"rung", SL_STUDY_KEY_RUNG, false, true},     {"claim", SL_STUDY_KEY_CLAIM, false, true},
    {"m", SL_STUDY_KEY_METRIC, false, true},      {"fail", SL_STUDY_KEY_FAIL, false, true},
    {"res", SL_STUDY_KEY_RESULT, false, true},    {"stop", SL_STUDY_KEY_STOP, true, false},
    {"log", SL_STUDY_KEY_LOG, true, true},        {"ck", SL_STUDY_KEY_CKPT, true, false},
};

static bool id_ok(const char *id) { return id && sl_study_id_valid(id, strlen(id)); }

static sl_err fits(int n, char *out, size_t cap) {
    if (n < 0 || (size_t)n >= cap) {
        if (cap)
            out[0] = '\0';
        return SL_ETOOBIG;
    }
    return SL_OK;
}

sl_err sl_study_key_build(char *out, size_t cap, sl_study_key_kind kind, const char *study,
                          const char *trial, uint64_t n, const char *peer) {
    if (!out || !id_ok(study))
        return SL_EINVAL;
    for (size_t i = 0; i < sizeof study_names / sizeof study_names[0]; i++)
        if (study_names[i].kind == kind)
            return fits(snprintf(out, cap, ROOT "%s/%s", study, study_names[i].name), out, cap);
    if (!id_ok(trial))
        return SL_EINVAL;
    bool needs_peer = kind == SL_STUDY_KEY_CLAIM || kind == SL_STUDY_KEY_RESULT ||
                      kind == SL_STUDY_KEY_LOG;
    if (needs_peer && (!peer || !peer[0]))
        return SL_EINVAL;
    int w;
    switch (kind) {
    case SL_STUDY_KEY_RECORD: w = snprintf(out, cap, ROOT "%s/t/%s", study, trial); break;
    case SL_STUDY_KEY_RUNG:
        w = snprintf(out, cap, ROOT "%s/t/%s/rung/%" PRIu64, study, trial, n);
        break;
    case SL_STUDY_KEY_CLAIM:
        w = snprintf(out, cap, ROOT "%s/t/%s/claim/%s", study, trial, peer);
        break;
    case SL_STUDY_KEY_METRIC:
        w = snprintf(out, cap, ROOT "%s/t/%s/m/%05" PRIu64, study, trial, n);
        break;
    case SL_STUDY_KEY_FAIL:
        w = snprintf(out, cap, ROOT "%s/t/%s/fail/%" PRIu64, study, trial, n);
        break;
    case SL_STUDY_KEY_RESULT:
        w = snprintf(out, cap, ROOT "%s/t/%s/res/%s@%" PRIu64, study, trial, peer, n);
        break;
    case SL_STUDY_KEY_STOP: w = snprintf(out, cap, ROOT "%s/t/%s/stop", study, trial); break;
    case SL_STUDY_KEY_LOG:
        w = snprintf(out, cap, ROOT "%s/t/%s/log/%010" PRIu64 "/%s", study, trial, n, peer);
        break;
    case SL_STUDY_KEY_CKPT: w = snprintf(out, cap, ROOT "%s/t/%s/ck", study, trial); break;
    default: return SL_EINVAL;
    }
    return fits(w, out, cap);
}

sl_err sl_study_key_prefix(char *out, size_t cap, const char *study, const char *trial) {
    if (!out || (study && !id_ok(study)) || (trial && (!study || !id_ok(trial))))
        return SL_EINVAL;
    if (!study)
        return fits(snprintf(out, cap, ROOT), out, cap);
    if (!trial)
        return fits(snprintf(out, cap, ROOT "%s/", study), out, cap);
    return fits(snprintf(out, cap, ROOT "%s/t/%s/", study, trial), out, cap);
}

sl_err sl_study_slots_key(char *out, size_t cap, const char *peer) {
    if (!out || !peer || !peer[0])
        return SL_EINVAL;
    return fits(snprintf(out, cap, "peer/%s/slots", peer), out, cap);
}

/* Whether the n bytes at p are `name`. */
static bool is(const char *p, size_t n, const char *name) {
    return n == strlen(name) && !memcmp(p, name, n);
}

/* The kind of a trial's sub-key (what follows "t/T/"), with its rest. */
static void trial_kind(sl_study_key_t *out) {
    const char *s = out->sub;
    size_t n = out->sub_len;
    for (size_t i = 0; i < sizeof trial_names / sizeof trial_names[0]; i++) {
        size_t nl = strlen(trial_names[i].name);
        if (n < nl || memcmp(s, trial_names[i].name, nl))
            continue;
        if (n == nl && trial_names[i].alone) {
            out->kind = trial_names[i].kind;
            return;
        }
        if (n > nl && s[nl] == '/' && trial_names[i].has_rest) {
            out->kind = trial_names[i].kind;
            out->rest = s + nl + 1;
            out->rest_len = n - nl - 1;
            return;
        }
    }
}

sl_err sl_study_key_parse(const void *key, size_t len, sl_study_key_t *out) {
    const char *k = key;
    memset(out, 0, sizeof *out);
    out->sub = out->rest = "";
    const size_t pre = ROOT_LEN + SL_TRIAL_ID_LEN + 1; /* study/S/ */
    if (!k || len < pre || memcmp(k, ROOT, ROOT_LEN) || k[pre - 1] != '/')
        return SL_ENOTFOUND;
    const char *p = k + pre;
    size_t n = len - pre;
    bool study_ok = sl_study_id_valid(k + ROOT_LEN, SL_TRIAL_ID_LEN);
    if (study_ok)
        memcpy(out->study, k + ROOT_LEN, SL_TRIAL_ID_LEN);
    if (n < 2 || memcmp(p, "t/", 2)) {
        for (size_t i = 0; i < sizeof study_names / sizeof study_names[0]; i++)
            if (is(p, n, study_names[i].name))
                out->kind = study_names[i].kind;
        return study_ok ? SL_OK : SL_EPROTO;
    }
    p += 2;
    n -= 2;
    const char *slash = memchr(p, '/', n);
    size_t tl = slash ? (size_t)(slash - p) : n;
    if (slash) {
        out->sub = slash + 1;
        out->sub_len = n - tl - 1;
        trial_kind(out);
    } else {
        out->kind = SL_STUDY_KEY_RECORD;
    }
    if (!study_ok || !sl_study_id_valid(p, tl))
        return SL_EPROTO;
    memcpy(out->trial, p, SL_TRIAL_ID_LEN);
    return SL_OK;
}
