/* Schedulers: the recorded trials in, the next decisions out.
 *
 * All rungs live on one ladder (spec->rungs: min, min*eta, ..., max
 * epochs). A trial trains to its target rung's epochs, then its worker
 * marks it paused (or done at the top rung); the scheduler promotes it to
 * the next rung or stops it. Decisions are a pure function of the spec and
 * the view, so every leader with the same view decides the same, and a
 * decision already applied is never made again (a promoted trial is no
 * longer paused at its old rung; a proposed ordinal is in the view).
 *
 *   fifo       one rung (max epochs); proposals only
 *   asha       promote a paused trial at rung k when it is in the top
 *              floor(n_k / eta) of the n_k results recorded at rung k
 *              (Li et al., "A System for Massively Parallel
 *              Hyperparameter Tuning"); nobody waits for stragglers
 *   sh         synchronous successive halving: rung k of a bracket is
 *              decided only once every trial that reached it has a result
 *              there (or failed), so the decisions do not depend on the
 *              order results arrive in
 *   hyperband  brackets b = 0 .. B-1 of synchronous SH, bracket b starting
 *              at rung b with ceil((s+1)/(s_b+1) * eta^s_b) trials
 *
 * Proposals keep at most `capacity` fresh trials waiting, so a searcher
 * that learns from results (evolution) sees them, and so ASHA's
 * promotions, which peers claim first, are not starved. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/study.h"

const char *sl_trial_state_name(sl_trial_state s) {
    switch (s) {
    case SL_TRIAL_PENDING: return "pending";
    case SL_TRIAL_RUNNING: return "running";
    case SL_TRIAL_PAUSED: return "paused";
    case SL_TRIAL_DONE: return "done";
    case SL_TRIAL_FAILED: return "failed";
    case SL_TRIAL_PREEMPTED: return "preempted";
    }
    return "?";
}

void sl_decisions_fini(sl_decisions_t *d) {
    sl_free(d->items);
    memset(d, 0, sizeof *d);
}

static sl_decision_t *push(sl_decisions_t *d, sl_decision_kind kind) {
    if (d->count == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 16;
        sl_decision_t *n = sl_realloc(d->items, cap * sizeof *n);
        if (!n)
            return NULL;
        d->items = n;
        d->cap = cap;
    }
    sl_decision_t *x = &d->items[d->count++];
    memset(x, 0, sizeof *x);
    x->kind = kind;
    return x;
}

static bool is_final(sl_trial_state s) { return s == SL_TRIAL_DONE || s == SL_TRIAL_FAILED; }

static int bracket_start(const sl_study_spec_t *spec, int bracket) {
    return spec->scheduler == SL_SCHED_HYPERBAND ? bracket : 0;
}

int sl_sched_rung_epochs(const sl_study_spec_t *spec, int bracket, int rung) {
    (void)bracket;
    if (rung < 0)
        rung = 0;
    if (rung >= spec->rung_count)
        rung = spec->rung_count - 1;
    return spec->rungs[rung];
}

int sl_sched_rung_count(const sl_study_spec_t *spec, int bracket) {
    return spec->rung_count - bracket_start(spec, bracket);
}

double sl_trial_metric_at(const sl_trial_t *t, int epoch) {
    if (!t->curve || epoch < 1 || epoch > t->curve_len)
        return NAN;
    return t->curve[epoch - 1];
}

/* Hyperband bracket sizes (before the trials budget caps them). */
static uint64_t hb_size(const sl_study_spec_t *spec, int b) {
    int smax = spec->rung_count - 1, sb = smax - b;
    /* ceil((s+1)/(s_b+1) * eta^s_b) in integers: the same on every machine */
    uint64_t p = 1;
    for (int i = 0; i < sb; i++)
        p *= (uint64_t)spec->reduction;
    return ((uint64_t)(smax + 1) * p + (uint64_t)sb) / (uint64_t)(sb + 1);
}

/* Bracket of a proposal ordinal; -1 past the last bracket. */
static int bracket_of(const sl_study_spec_t *spec, uint64_t ordinal) {
    if (spec->scheduler != SL_SCHED_HYPERBAND)
        return 0;
    uint64_t acc = 0;
    for (int b = 0; b < spec->brackets; b++) {
        acc += hb_size(spec, b);
        if (ordinal < acc)
            return b;
    }
    return -1;
}

/* Trials of a bracket once all are proposed (capped by the budget). */
static uint64_t bracket_size(const sl_study_spec_t *spec, int b) {
    if (spec->scheduler != SL_SCHED_HYPERBAND)
        return spec->budget_trials;
    uint64_t before = 0;
    for (int i = 0; i < b; i++)
        before += hb_size(spec, i);
    if (before >= spec->budget_trials)
        return 0;
    uint64_t n = hb_size(spec, b);
    return before + n > spec->budget_trials ? spec->budget_trials - before : n;
}

/* One candidate at a rung: the trial and its value there. */
typedef struct {
    const sl_trial_t *t; /* borrowed from the view */
    double v;            /* metric at the rung's epoch */
} cand_t;

/* a ranks before b: better value (NaN last), then smaller id. */
static bool better(const cand_t *a, const cand_t *b, bool maximize) {
    bool an = isnan(a->v), bn = isnan(b->v);
    if (an != bn)
        return bn;
    if (!an && a->v != b->v)
        return maximize ? a->v > b->v : a->v < b->v;
    return strcmp(a->t->id, b->t->id) < 0;
}

static int cmp_max(const void *a, const void *b) {
    return better(a, b, true) ? -1 : better(b, a, true) ? 1 : 0;
}

static int cmp_min(const void *a, const void *b) {
    return better(a, b, false) ? -1 : better(b, a, false) ? 1 : 0;
}

/* `better` is a total order (ids are unique), so qsort's instability
 * cannot make two peers rank differently. */
static void sort_cands(cand_t *c, size_t n, bool maximize) {
    if (n > 1)
        qsort(c, n, sizeof *c, maximize ? cmp_max : cmp_min);
}

/* Candidates at rung k of bracket b: trials promoted to rung >= k.
 * `complete` says whether each of them has a result there or failed. */
static size_t rung_cands(const sl_study_spec_t *spec, const sl_sched_view_t *view, int b, int k,
                         cand_t *out, bool *complete) {
    size_t n = 0;
    *complete = true;
    int epochs = spec->rungs[k];
    for (size_t i = 0; i < view->trial_count; i++) {
        const sl_trial_t *t = &view->trials[i];
        if (t->bracket != b || t->rung < k)
            continue;
        double v = sl_trial_metric_at(t, epochs);
        if (isnan(v) && t->state != SL_TRIAL_FAILED) {
            /* a trial stopped before this rung has no result and never will */
            if (!(is_final(t->state) && t->epochs_done < epochs))
                *complete = false;
            continue;
        }
        if (isnan(v))
            continue; /* failed: out of the ranking */
        out[n].t = t;
        out[n].v = v;
        n++;
    }
    return n;
}

static void set_reason(sl_decision_t *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_reason(sl_decision_t *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->reason, sizeof d->reason, fmt, ap);
    va_end(ap);
}

static bool obj_max(const sl_study_spec_t *spec) { return spec->objectives[0].maximize; }

/* ASHA: every rung, top floor(n/eta) of the recorded results. */
static sl_err asha_promote(const sl_study_spec_t *spec, const sl_sched_view_t *view,
                           cand_t *buf, sl_decisions_t *out, size_t *made) {
    for (int k = spec->rung_count - 2; k >= 0; k--) {
        bool complete;
        size_t n = rung_cands(spec, view, 0, k, buf, &complete);
        size_t top = n / (size_t)spec->reduction;
        sort_cands(buf, n, obj_max(spec));
        for (size_t i = 0; i < top; i++) {
            const sl_trial_t *t = buf[i].t;
            if (t->rung != k || t->state != SL_TRIAL_PAUSED)
                continue;
            sl_decision_t *d = push(out, SL_DECISION_PROMOTE);
            if (!d)
                return SL_ENOMEM;
            memcpy(d->trial_id, t->id, sizeof d->trial_id);
            d->rung = k + 1;
            d->bracket = t->bracket;
            d->epochs = spec->rungs[k + 1];
            set_reason(d, "rung %d: %s=%.4g is #%zu of %zu (top %zu)", k,
                       spec->objectives[0].metric, buf[i].v, i + 1, n, top);
            (*made)++;
        }
    }
    return SL_OK;
}

bool sl_sched_asha_promotes(const sl_study_spec_t *spec, const sl_sched_view_t *view,
                            const char *trial_id, int rung, char *reason, size_t reason_len) {
    if (spec->scheduler != SL_SCHED_ASHA || rung < 0 || rung > spec->rung_count - 2)
        return false;
    const sl_trial_t *t = NULL;
    for (size_t i = 0; i < view->trial_count && !t; i++)
        if (!strcmp(view->trials[i].id, trial_id))
            t = &view->trials[i];
    int epochs = spec->rungs[rung];
    double v = t ? sl_trial_metric_at(t, epochs) : NAN;
    if (!t || t->bracket != 0 || t->rung != rung || isnan(v))
        return false;
    /* its place among the results at the rung, in `better`'s order (the
       candidates rung_cands gives asha_promote), counted, not sorted */
    cand_t me = {t, v};
    bool maximize = obj_max(spec);
    size_t n = 0, ahead = 0;
    for (size_t i = 0; i < view->trial_count; i++) {
        const sl_trial_t *u = &view->trials[i];
        if (u->bracket != 0 || u->rung < rung)
            continue;
        cand_t c = {u, sl_trial_metric_at(u, epochs)};
        if (isnan(c.v))
            continue;
        n++;
        ahead += u != t && better(&c, &me, maximize);
    }
    size_t top = n / (size_t)spec->reduction;
    if (ahead >= top)
        return false;
    if (reason)
        snprintf(reason, reason_len, "rung %d: %s=%.4g is #%zu of %zu (top %zu)", rung,
                 spec->objectives[0].metric, v, ahead + 1, n, top);
    return true;
}

/* Synchronous SH in bracket b: a rung is decided when complete. */
static sl_err sh_decide(const sl_study_spec_t *spec, const sl_sched_view_t *view, int b,
                        cand_t *buf, sl_decisions_t *out, size_t *made) {
    uint64_t size = bracket_size(spec, b), have = 0;
    for (size_t i = 0; i < view->trial_count; i++)
        if (view->trials[i].bracket == b)
            have++;
    if (size == 0 || have < size)
        return SL_OK; /* the bracket is not fully proposed yet */
    for (int k = bracket_start(spec, b); k < spec->rung_count - 1; k++) {
        bool complete;
        size_t n = rung_cands(spec, view, b, k, buf, &complete);
        if (!complete)
            return SL_OK; /* rung k still running: nothing above it either */
        size_t members = 0;
        for (size_t i = 0; i < view->trial_count; i++)
            if (view->trials[i].bracket == b && view->trials[i].rung >= k)
                members++;
        size_t keep = members / (size_t)spec->reduction;
        if (keep < 1)
            keep = 1;
        sort_cands(buf, n, obj_max(spec));
        for (size_t i = 0; i < n; i++) {
            const sl_trial_t *t = buf[i].t;
            if (t->rung != k || t->state != SL_TRIAL_PAUSED)
                continue;
            sl_decision_t *d = push(out, i < keep ? SL_DECISION_PROMOTE : SL_DECISION_STOP);
            if (!d)
                return SL_ENOMEM;
            memcpy(d->trial_id, t->id, sizeof d->trial_id);
            d->bracket = b;
            if (i < keep) {
                d->rung = k + 1;
                d->epochs = spec->rungs[k + 1];
                set_reason(d, "bracket %d rung %d: #%zu of %zu (keep %zu)", b, k, i + 1,
                           members, keep);
            } else {
                d->rung = k;
                d->epochs = spec->rungs[k];
                set_reason(d, "stopped at rung %d: #%zu of %zu (keep %zu)", k, i + 1, members,
                           keep);
            }
            (*made)++;
        }
    }
    return SL_OK;
}

/* A trial record for a proposal made in this call (so the searcher sees
 * it when it draws the next one). */
static sl_err propose(const sl_study_spec_t *spec, const sl_sched_view_t *view,
                      sl_decisions_t *out, bool *exhausted, size_t *made) {
    uint64_t next = 0;
    size_t waiting = 0;
    for (size_t i = 0; i < view->trial_count; i++) {
        const sl_trial_t *t = &view->trials[i];
        if (t->ordinal + 1 > next)
            next = t->ordinal + 1;
        if ((t->state == SL_TRIAL_PENDING || t->state == SL_TRIAL_PREEMPTED) &&
            t->rung == bracket_start(spec, t->bracket) && t->epochs_done == 0)
            waiting++;
    }
    size_t cap = (size_t)(view->capacity > 0 ? view->capacity : 1);
    *exhausted = view->trial_count >= spec->budget_trials || next >= spec->budget_trials;
    if (*exhausted || waiting >= cap)
        return SL_OK;
    size_t room = cap - waiting;
    /* the searcher sees the view and the proposals made in this call (not
       a copy of the view with them appended: O(trials) bytes a call) */
    sl_trial_t *made_now = sl_malloc(room * sizeof *made_now);
    if (!made_now)
        return SL_ENOMEM;
    size_t n = view->trial_count, m = 0;
    sl_err err = SL_OK;
    char json[SL_CONFIG_JSON_MAX];
    while (room > 0) {
        if (n >= spec->budget_trials || next >= spec->budget_trials) {
            *exhausted = true;
            break;
        }
        int b = bracket_of(spec, next);
        if (b < 0) {
            *exhausted = true;
            break;
        }
        sl_config_t cfg;
        err = sl_search_next2(spec, next, view->trials, view->trial_count, made_now, m, &cfg);
        if (err == SL_EAGAIN) {
            err = SL_OK;
            break;
        }
        if (err == SL_ENOTFOUND) {
            err = SL_OK;
            *exhausted = true;
            break;
        }
        if (err)
            break;
        size_t len;
        if ((err = sl_space_encode(spec, &cfg, json, sizeof json, &len)))
            break;
        char id[SL_TRIAL_ID_LEN + 1];
        sl_trial_id(view->study_id, b, json, len, id);
        bool dup = false;
        for (size_t i = 0; i < view->trial_count && !dup; i++)
            dup = strcmp(view->trials[i].id, id) == 0;
        for (size_t i = 0; i < m && !dup; i++)
            dup = strcmp(made_now[i].id, id) == 0;
        if (dup) {
            /* the searcher ran out of distinct points */
            *exhausted = true;
            break;
        }
        sl_decision_t *d = push(out, SL_DECISION_PROPOSE);
        if (!d) {
            err = SL_ENOMEM;
            break;
        }
        memcpy(d->trial_id, id, sizeof id);
        d->ordinal = next;
        d->bracket = b;
        d->rung = bracket_start(spec, b);
        d->epochs = spec->rungs[d->rung];
        d->config = cfg;
        set_reason(d, "trial %llu of %u (%s)", (unsigned long long)next + 1, spec->budget_trials,
                   sl_search_name(spec->searcher));
        sl_trial_t *t = &made_now[m++];
        memset(t, 0, sizeof *t);
        memcpy(t->id, id, sizeof id);
        t->ordinal = next;
        t->bracket = b;
        t->rung = d->rung;
        t->state = SL_TRIAL_PENDING;
        t->config = cfg;
        for (int o = 0; o < SL_STUDY_MAX_OBJECTIVES; o++)
            t->objectives[o] = NAN;
        n++;
        next++;
        room--;
        (*made)++;
    }
    sl_free(made_now);
    return err;
}

sl_err sl_sched_decide(const sl_study_spec_t *spec, const sl_sched_view_t *view,
                       sl_decisions_t *out) {
    size_t open = 0, running = 0;
    for (size_t i = 0; i < view->trial_count; i++) {
        sl_trial_state s = view->trials[i].state;
        if (!is_final(s))
            open++;
        if (s == SL_TRIAL_RUNNING)
            running++;
    }
    bool timed_out = spec->budget_time_s && view->elapsed_s >= spec->budget_time_s;
    if (view->cancelled || timed_out) {
        for (size_t i = 0; i < view->trial_count; i++) {
            const sl_trial_t *t = &view->trials[i];
            if (is_final(t->state))
                continue;
            sl_decision_t *d = push(out, SL_DECISION_STOP);
            if (!d)
                return SL_ENOMEM;
            memcpy(d->trial_id, t->id, sizeof d->trial_id);
            d->rung = t->rung;
            d->bracket = t->bracket;
            d->epochs = t->epochs_done;
            set_reason(d, "%s", view->cancelled ? "cancelled" : "time budget spent");
        }
        if (running == 0 && !push(out, SL_DECISION_FINISH))
            return SL_ENOMEM;
        if (running == 0)
            set_reason(&out->items[out->count - 1], "%s",
                       view->cancelled ? "cancelled" : "time budget spent");
        return SL_OK;
    }
    sl_err err = SL_OK;
    size_t made = 0;
    cand_t *buf = sl_malloc((view->trial_count + 1) * sizeof *buf);
    if (!buf)
        return SL_ENOMEM;
    if (spec->scheduler == SL_SCHED_ASHA)
        err = asha_promote(spec, view, buf, out, &made);
    else if (spec->scheduler == SL_SCHED_SH)
        err = sh_decide(spec, view, 0, buf, out, &made);
    else if (spec->scheduler == SL_SCHED_HYPERBAND)
        for (int b = 0; b < spec->brackets && !err; b++)
            err = sh_decide(spec, view, b, buf, out, &made);
    sl_free(buf);
    if (err)
        return err;
    bool exhausted = false;
    if ((err = propose(spec, view, out, &exhausted, &made)))
        return err;
    if (!exhausted || made > 0)
        return SL_OK;
    /* Nothing more to propose or promote: once nothing runs, the trials
     * still paused will never be promoted; stop them and finish. */
    size_t paused = 0;
    for (size_t i = 0; i < view->trial_count; i++)
        if (view->trials[i].state == SL_TRIAL_PAUSED)
            paused++;
    if (open > paused)
        return SL_OK;
    for (size_t i = 0; i < view->trial_count; i++) {
        const sl_trial_t *t = &view->trials[i];
        if (t->state != SL_TRIAL_PAUSED)
            continue;
        sl_decision_t *d = push(out, SL_DECISION_STOP);
        if (!d)
            return SL_ENOMEM;
        memcpy(d->trial_id, t->id, sizeof d->trial_id);
        d->rung = t->rung;
        d->bracket = t->bracket;
        d->epochs = t->epochs_done;
        set_reason(d, "stopped at rung %d: not promoted", t->rung);
    }
    sl_decision_t *d = push(out, SL_DECISION_FINISH);
    if (!d)
        return SL_ENOMEM;
    set_reason(d, "all %zu trials final", view->trial_count);
    return SL_OK;
}

uint64_t sl_sched_round(const sl_study_spec_t *spec, const sl_sched_view_t *view) {
    uint64_t next = 0, results = 0, rungs = 0;
    int top[SL_STUDY_MAX_BRACKETS] = {0};
    for (size_t i = 0; i < view->trial_count; i++) {
        const sl_trial_t *t = &view->trials[i];
        if (t->ordinal + 1 > next)
            next = t->ordinal + 1;
        if (t->state == SL_TRIAL_PAUSED || is_final(t->state))
            results++;
        if (t->bracket >= 0 && t->bracket < SL_STUDY_MAX_BRACKETS && t->rung > top[t->bracket])
            top[t->bracket] = t->rung;
    }
    if (spec->searcher == SL_SEARCH_EVOLUTION && spec->generational)
        return next / (uint64_t)spec->population;
    if (spec->scheduler == SL_SCHED_SH || spec->scheduler == SL_SCHED_HYPERBAND) {
        for (int b = 0; b < SL_STUDY_MAX_BRACKETS; b++)
            rungs += (uint64_t)top[b];
        return rungs;
    }
    return results;
}

sl_err sl_sched_check_promotion(const sl_study_spec_t *spec, const sl_sched_view_t *view,
                                const char *trial_id, int rung, char *why, size_t why_len) {
    const sl_trial_t *t = NULL;
    for (size_t i = 0; i < view->trial_count; i++)
        if (strcmp(view->trials[i].id, trial_id) == 0)
            t = &view->trials[i];
    if (!t) {
        snprintf(why, why_len, "promotion of unknown trial %s", trial_id);
        return SL_EINTERNAL;
    }
    int k = rung - 1;
    if (k < 0 || rung >= spec->rung_count || t->rung != k || t->state != SL_TRIAL_PAUSED) {
        snprintf(why, why_len, "trial %s promoted to rung %d from rung %d in state %s", trial_id,
                 rung, t->rung, sl_trial_state_name(t->state));
        return SL_EINTERNAL;
    }
    double v = sl_trial_metric_at(t, spec->rungs[k]);
    if (isnan(v)) {
        snprintf(why, why_len, "trial %s promoted without a result at rung %d", trial_id, k);
        return SL_EINTERNAL;
    }
    /* Count independently of the ranking code: results at rung k that are
     * strictly better, and the total. */
    bool maximize = obj_max(spec);
    size_t n = 0, ahead = 0, members = 0;
    bool complete = true;
    for (size_t i = 0; i < view->trial_count; i++) {
        const sl_trial_t *u = &view->trials[i];
        if (u->bracket != t->bracket || u->rung < k)
            continue;
        members++;
        double w = sl_trial_metric_at(u, spec->rungs[k]);
        if (isnan(w)) {
            if (u->state != SL_TRIAL_FAILED && !(is_final(u->state) && u->epochs_done < spec->rungs[k]))
                complete = false;
            continue;
        }
        n++;
        if ((maximize ? w > v : w < v) || (w == v && strcmp(u->id, t->id) < 0))
            ahead++;
    }
    size_t allowed;
    if (spec->scheduler == SL_SCHED_ASHA) {
        allowed = n / (size_t)spec->reduction;
    } else if (spec->scheduler == SL_SCHED_SH || spec->scheduler == SL_SCHED_HYPERBAND) {
        if (!complete) {
            snprintf(why, why_len, "trial %s promoted from rung %d before the rung was complete",
                     trial_id, k);
            return SL_EINTERNAL;
        }
        allowed = members / (size_t)spec->reduction;
        if (allowed < 1)
            allowed = 1;
    } else {
        snprintf(why, why_len, "the %s scheduler never promotes", sl_sched_name(spec->scheduler));
        return SL_EINTERNAL;
    }
    if (ahead >= allowed) {
        snprintf(why, why_len,
                 "trial %s promoted from rung %d as #%zu of %zu results (only the top %zu may be)",
                 trial_id, k, ahead + 1, n, allowed);
        return SL_EINTERNAL;
    }
    return SL_OK;
}
