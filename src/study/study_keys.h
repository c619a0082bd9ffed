/* A study's store keys: the one place that builds and parses them
 * (src/study/study_keys.c). What each key holds is the table of
 * docs/studies.md, "Store layout"; the kinds below name their keys.
 *
 * S and T are SL_TRIAL_ID_LEN lower-case hex digits (sl_study_id_valid):
 * the store is writable by any member, and an id read from a key names
 * a path or another key only once the parser has checked it. Internal to
 * the library (the study's loop, control commands, view and checkpoints)
 * and its tests. */
#ifndef STARLING_STUDY_KEYS_H
#define STARLING_STUDY_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "starling/msg.h"
#include "starling/study.h"

/* Room for any key built here: the longest is
 * study/S/t/T/log/CCCCCCCCCC/P with a 20-digit epoch and a 64-byte name. */
#define SL_STUDY_KEY_MAX (6 + SL_TRIAL_ID_LEN + 3 + SL_TRIAL_ID_LEN + 5 + 20 + 1 + SL_NAME_MAX + 1)

typedef enum {
    SL_STUDY_KEY_OTHER = 0, /* under study/S/ (or t/T/) but none of the kinds below */
    SL_STUDY_KEY_SPEC,      /* study/S/spec */
    SL_STUDY_KEY_START,     /* study/S/start */
    SL_STUDY_KEY_CANCEL,    /* study/S/cancel */
    SL_STUDY_KEY_FINISHED,  /* study/S/finished */
    SL_STUDY_KEY_RECORD,    /* study/S/t/T */
    SL_STUDY_KEY_RUNG,      /* study/S/t/T/rung/R */
    SL_STUDY_KEY_CLAIM,     /* study/S/t/T/claim/P */
    SL_STUDY_KEY_METRIC,    /* study/S/t/T/m/EEEEE */
    SL_STUDY_KEY_FAIL,      /* study/S/t/T/fail/E */
    SL_STUDY_KEY_RESULT,    /* study/S/t/T/res/W@E */
    SL_STUDY_KEY_STOP,      /* study/S/t/T/stop */
    SL_STUDY_KEY_LOG,       /* study/S/t/T/log/CCCCCCCCCC/P (a bare study/S/t/T/log:
                               a trial's log from before one key per run) */
    SL_STUDY_KEY_CKPT,      /* study/S/t/T/ck */
} sl_study_key_kind;

/* A study key taken apart. sub and rest point into the parsed key (not
 * NUL-terminated). */
typedef struct {
    sl_study_key_kind kind;           /* which key */
    char study[SL_TRIAL_ID_LEN + 1];  /* S */
    char trial[SL_TRIAL_ID_LEN + 1];  /* T ("" for a study's own keys) */
    const char *sub;                  /* after "t/T/": "rung/2", "claim/P" ("" for none) */
    size_t sub_len;                   /* its bytes */
    const char *rest;                 /* after the kind's name and '/': "2", "P", "C/P" */
    size_t rest_len;                  /* its bytes (0 for the kinds without) */
} sl_study_key_t;

/* Writes the key of `kind` into out (cap bytes, NUL-terminated). trial
 * names the trial of a trial's key (ignored for a study's own keys); n is
 * the rung (RUNG), the epoch (METRIC) or the claim epoch (FAIL, RESULT,
 * LOG); peer the writer (CLAIM, RESULT, LOG). SL_EINVAL: an id that is not
 * SL_TRIAL_ID_LEN lower-case hex digits, a missing peer or kind OTHER;
 * SL_ETOOBIG: it does not fit (out is then ""). */
sl_err sl_study_key_build(char *out, size_t cap, sl_study_key_kind kind, const char *study,
                          const char *trial, uint64_t n, const char *peer);
/* The prefix every key of a trial (study and trial given: "study/S/t/T/"),
 * of a study (trial NULL: "study/S/") or of all studies (both NULL:
 * "study/") starts with, for a scan. Errors as sl_study_key_build's. */
sl_err sl_study_key_prefix(char *out, size_t cap, const char *study, const char *trial);
/* peer/P/slots, the trial slots peer P offers every study. SL_EINVAL: no name;
 * SL_ETOOBIG: it does not fit. */
sl_err sl_study_slots_key(char *out, size_t cap, const char *peer);
/* Takes `key` (len bytes) apart. SL_ENOTFOUND: not a study's key (no
 * "study/", then SL_TRIAL_ID_LEN bytes and '/': the store holds users' own
 * keys too). SL_EPROTO: shaped as one, but its study or trial id is not
 * SL_TRIAL_ID_LEN lower-case hex digits (written by a faulty or hostile
 * member); out->kind still names what the key's shape says. Kinds with a
 * number or a writer are told by their name alone ("rung/" with any
 * rest): their readers judge rest. */
sl_err sl_study_key_parse(const void *key, size_t len, sl_study_key_t *out);

#endif
