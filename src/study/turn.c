/* The study turn's core: see src/study/turn.h and docs/studies.md ("The
 * runtime"). Pure: the view, the members, the jobs and the time in; the
 * actions out. It used to be the body of study_node.c's study_turn,
 * interleaved with the store writes and the workers, so only the cluster
 * tests ran it, and the simulator ran a model of it that could agree with
 * itself while the real loop was wrong. */
#include "study/turn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the list ---- */

void sl_turn_out_init(sl_turn_out_t *o) {
    memset(o, 0, sizeof *o);
    o->due_ms = UINT64_MAX;
}

void sl_turn_out_clear(sl_turn_out_t *o) {
    o->count = 0;
    o->led = false;
}

void sl_turn_out_fini(sl_turn_out_t *o) {
    sl_free(o->items);
    sl_turn_out_init(o);
}

/* A new action at the end of the list, zeroed but for its kind and trial;
 * NULL when out of memory. */
static sl_turn_action_t *push(sl_turn_out_t *o, sl_turn_kind kind, const char *trial_id) {
    if (o->count == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 8;
        sl_turn_action_t *n = sl_realloc(o->items, cap * sizeof *n);
        if (!n)
            return NULL;
        o->items = n;
        o->cap = cap;
    }
    sl_turn_action_t *a = &o->items[o->count++];
    memset(a, 0, sizeof *a);
    a->kind = kind;
    if (trial_id)
        snprintf(a->trial_id, sizeof a->trial_id, "%s", trial_id);
    return a;
}

static void due_at(sl_turn_out_t *o, uint64_t ms) {
    if (ms < o->due_ms)
        o->due_ms = ms;
}

static sl_err write_claim(sl_turn_out_t *o, const char *trial_id, const sl_claim_t *c,
                          sl_turn_claim_why why) {
    sl_turn_action_t *a = push(o, SL_TURN_WRITE_CLAIM, trial_id);
    if (!a)
        return SL_ENOMEM;
    a->claim = *c;
    a->why = why;
    return SL_OK;
}

static sl_err write_result(sl_turn_out_t *o, const char *trial_id, sl_trial_state st, int epochs,
                           uint64_t claim_epoch, const char *self, const char *reason) {
    sl_turn_action_t *a = push(o, SL_TURN_WRITE_RESULT, trial_id);
    if (!a)
        return SL_ENOMEM;
    sl_result_t *r = &a->result;
    memcpy(r->trial_id, a->trial_id, sizeof r->trial_id);
    r->state = st;
    r->epochs = epochs;
    r->claim_epoch = claim_epoch;
    snprintf(r->writer, sizeof r->writer, "%s", self);
    snprintf(r->reason, sizeof r->reason, "%s", reason);
    return SL_OK;
}

static sl_err write_text(sl_turn_out_t *o, sl_turn_kind kind, const char *trial_id,
                         const char *reason) {
    sl_turn_action_t *a = push(o, kind, trial_id);
    if (!a)
        return SL_ENOMEM;
    snprintf(a->reason, sizeof a->reason, "%s", reason);
    return SL_OK;
}

/* ---- the view ---- */

sl_trial_state sl_turn_trial_state(const sl_study_spec_t *spec, const sl_trial_t *t,
                                   const sl_claim_t *claim, bool has_claim,
                                   const sl_result_t *result, bool owner_alive, bool mine,
                                   const char *self, uint64_t now_ms) {
    if (result)
        return result->state;
    bool live = has_claim && !claim->released && claim->lease_expiry_ms > now_ms && owner_alive;
    if (live && !strcmp(claim->owner, self) && !mine)
        live = false; /* ours from before a restart */
    int target = sl_sched_rung_epochs(spec, t->bracket, t->rung);
    if (live)
        return SL_TRIAL_RUNNING;
    /* (paused below the top rung, as sl_claim_after_epoch pauses a worker:
       rungs are numbered across brackets, so a Hyperband bracket's top is
       the study's. The count of the trial's own bracket's rungs compared
       here, a trial of bracket 1 or above that reached a rung below the
       top was pending, not paused: nobody claimed it (its epochs were
       done) and the scheduler waited for it to pause, for ever. The
       simulator running this rule found it; its model had the right one.) */
    if (t->epochs_done >= target && t->rung + 1 < spec->rung_count)
        return SL_TRIAL_PAUSED;
    if (has_claim && !claim->released)
        return SL_TRIAL_PREEMPTED;
    return SL_TRIAL_PENDING;
}

/* ---- members ---- */

sl_err sl_study_members_reserve(sl_study_members_t *ms, size_t want) {
    if (want <= ms->cap)
        return SL_OK;
    size_t nc = ms->cap ? ms->cap : 64;
    while (nc < want)
        nc *= 2;
    char(*names)[SL_NAME_MAX + 1] = sl_realloc(ms->names, nc * sizeof *names);
    if (!names)
        return SL_ENOMEM;
    ms->names = names;
    sl_round_member_t *m = sl_realloc(ms->m, nc * sizeof *m);
    if (!m)
        return SL_ENOMEM;
    ms->m = m;
    int *slots = sl_realloc(ms->slots, nc * sizeof *slots);
    if (!slots)
        return SL_ENOMEM;
    ms->slots = slots;
    bool *suspect = sl_realloc(ms->suspect, nc * sizeof *suspect);
    if (!suspect)
        return SL_ENOMEM;
    memset(suspect + ms->cap, 0, (nc - ms->cap) * sizeof *suspect);
    ms->suspect = suspect;
    ms->cap = nc;
    /* (m[k].id points into names, which may have moved) */
    for (size_t k = 0; k < ms->count; k++)
        ms->m[k].id = ms->names[k];
    return SL_OK;
}

void sl_study_members_fini(sl_study_members_t *ms) {
    sl_free(ms->names);
    sl_free(ms->m);
    sl_free(ms->slots);
    sl_free(ms->suspect);
    memset(ms, 0, sizeof *ms);
}

int sl_study_members_top(const sl_study_members_t *ms, const char *trial_id) {
    int best = -1;
    uint64_t bw = 0;
    for (size_t k = 0; k < ms->count; k++) {
        if (ms->slots[k] <= 0)
            continue;
        uint64_t w = sl_round_trial_weight(ms->names[k], trial_id);
        if (best < 0 || w > bw || (w == bw && strcmp(ms->names[k], ms->names[best]) < 0)) {
            best = (int)k;
            bw = w;
        }
    }
    return best;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void sl_turn_members_load(const sl_turn_view_t *v, const sl_study_members_t *ms,
                          const char *self, int self_busy) {
    /* the running trials counted by owner in one pass over the open ones,
       each owner found by binary search among the members sorted by name:
       O((open + members) log members). It was a pass over the open trials
       for each member, O(open x members): at 256 members and some 750 open
       trials, 200,000 comparisons a turn on every peer. */
    size_t n = ms->count;
    const char **sorted = sl_calloc(n + 1, sizeof *sorted);
    int *busy = sl_calloc(n + 1, sizeof *busy);
    if (sorted && busy) {
        for (size_t k = 0; k < n; k++)
            sorted[k] = ms->names[k];
        qsort(sorted, n, sizeof *sorted, cmp_name);
        for (size_t o = 0; o < v->open_count; o++) {
            if (v->open[o].t->state != SL_TRIAL_RUNNING)
                continue;
            const char *owner = v->open[o].claim.owner;
            const char **hit = bsearch(&owner, sorted, n, sizeof *sorted, cmp_name);
            if (hit)
                busy[hit - sorted]++;
        }
    }
    for (size_t k = 0; k < n; k++) {
        int b = 0;
        if (!strcmp(ms->names[k], self)) {
            b = self_busy;
        } else if (sorted && busy) {
            const char *name = ms->names[k];
            const char **hit = bsearch(&name, sorted, n, sizeof *sorted, cmp_name);
            b = hit ? busy[hit - sorted] : 0;
        } else { /* (out of memory: the long way) */
            for (size_t o = 0; o < v->open_count; o++)
                b += v->open[o].t->state == SL_TRIAL_RUNNING &&
                     !strcmp(v->open[o].claim.owner, ms->names[k]);
        }
        int free_slots = ms->suspect[k] ? 0 : ms->slots[k] - b;
        ms->m[k] = (sl_round_member_t){ms->names[k], true, free_slots > 0 ? free_slots : 0};
    }
    sl_free(sorted);
    sl_free(busy);
}

/* ---- the jobs ---- */

sl_err sl_turn_jobs(const sl_turn_view_t *v, const sl_turn_job_t *jobs, size_t count,
                    const char *self, uint64_t now_ms, sl_turn_out_t *out) {
    const sl_study_spec_t *spec = v->spec;
    for (size_t i = 0; i < count; i++) {
        const sl_turn_job_t *j = &jobs[i];
        sl_turn_action_t *a;
        /* stop when the register moved on, the leader stopped it, or it ended */
        bool stop_done = j->found && (j->stop || j->has_result || v->cancelled || v->finished);
        bool lost = j->found && j->has_claim && sl_claim_must_stop(&j->claim, self, j->epoch);
        if (lost) {
            if (!(a = push(out, SL_TURN_JOB_LOST, j->trial_id)))
                return SL_ENOMEM;
            a->job = (int)i;
            a->claim = j->claim;
            continue;
        }
        if (stop_done) {
            if (!j->has_result &&
                write_result(out, j->trial_id, SL_TRIAL_DONE, j->last_epoch, j->epoch, self,
                             "stopped by the leader") != SL_OK)
                return SL_ENOMEM;
            sl_claim_t next;
            if (j->has_claim && sl_claim_release(&j->claim, self, j->epoch, &next) == SL_OK &&
                write_claim(out, j->trial_id, &next, SL_TURN_CLAIM_RELEASE) != SL_OK)
                return SL_ENOMEM;
            if (!(a = push(out, SL_TURN_JOB_END, j->trial_id)))
                return SL_ENOMEM;
            a->job = (int)i;
            continue;
        }
        uint64_t renew = j->renew_ms;
        bool rides = j->reported && now_ms + spec->lease_ms / SL_TURN_RENEW_RIDE >= j->renew_ms;
        if ((now_ms >= j->renew_ms || rides) && j->found && j->has_claim) {
            sl_claim_t next;
            if (sl_claim_renew(&j->claim, self, j->epoch, now_ms, spec->lease_ms, &next) ==
                    SL_OK &&
                write_claim(out, j->trial_id, &next, SL_TURN_CLAIM_RENEW) != SL_OK)
                return SL_ENOMEM;
            renew = now_ms + spec->lease_ms / 3;
            if (!(a = push(out, SL_TURN_JOB_RENEW_AT, j->trial_id)))
                return SL_ENOMEM;
            a->job = (int)i;
            a->at_ms = renew;
        }
        due_at(out, renew);
    }
    return SL_OK;
}

/* ---- the leader ---- */

static int cmp_open(const void *a, const void *b) {
    return strcmp((*(const sl_turn_open_t *const *)a)->id, (*(const sl_turn_open_t *const *)b)->id);
}

/* The open trial `id`, by binary search in `by_id` (the open trials
 * sorted by id, `count` of them), or NULL. */
static const sl_turn_open_t *open_find(const sl_turn_open_t *const *by_id, size_t count,
                                       const char *id) {
    size_t lo = 0, hi = by_id ? count : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(by_id[mid]->id, id);
        if (!c)
            return by_id[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The scheduler's decisions `d` as writes, and a "completed" result for
 * each trial trained to the study's top rung that has none and no live
 * claim (sl_turn_lead, sl_turn_finish). */
static sl_err decisions_out(const sl_turn_view_t *v, const sl_decisions_t *d, const char *self,
                            sl_turn_out_t *out) {
    const sl_study_spec_t *spec = v->spec;
    sl_err err = SL_OK;
    /* the open trials by id, for the stops (a cancel stops every one) */
    const sl_turn_open_t **by_id = NULL;
    for (size_t i = 0; i < d->count && !by_id; i++)
        if (d->items[i].kind == SL_DECISION_STOP) {
            if (!(by_id = sl_calloc(v->open_count + 1, sizeof *by_id)))
                return SL_ENOMEM;
            for (size_t o = 0; o < v->open_count; o++)
                by_id[o] = &v->open[o];
            qsort(by_id, v->open_count, sizeof *by_id, cmp_open);
        }
    for (size_t i = 0; i < d->count && err == SL_OK; i++) {
        const sl_decision_t *x = &d->items[i];
        sl_turn_action_t *a;
        if (x->kind == SL_DECISION_PROPOSE) {
            if (!(a = push(out, SL_TURN_WRITE_RECORD, x->trial_id))) {
                err = SL_ENOMEM;
                break;
            }
            sl_trial_t *nt = &a->trial;
            memcpy(nt->id, x->trial_id, sizeof nt->id);
            nt->ordinal = x->ordinal;
            nt->bracket = x->bracket;
            nt->rung = x->rung;
            nt->config = x->config;
        } else if (x->kind == SL_DECISION_PROMOTE) {
            if (!(a = push(out, SL_TURN_WRITE_RUNG, x->trial_id))) {
                err = SL_ENOMEM;
                break;
            }
            a->rung = x->rung;
            snprintf(a->reason, sizeof a->reason, "%s", x->reason);
        } else if (x->kind == SL_DECISION_STOP) {
            const sl_turn_open_t *r = open_find(by_id, v->open_count, x->trial_id);
            const sl_trial_t *t = r ? r->t : NULL;
            for (size_t k = 0; k < v->trial_count && !t; k++) /* (a final one: rare) */
                if (!strcmp(v->trials[k].id, x->trial_id))
                    t = &v->trials[k];
            if (!t)
                continue;
            if (t->state == SL_TRIAL_RUNNING)
                err = write_text(out, SL_TURN_WRITE_STOP, x->trial_id, x->reason);
            else
                err = write_result(out, x->trial_id, SL_TRIAL_DONE, t->epochs_done,
                                   r && r->has_claim ? r->claim.epoch : 0, self, x->reason);
        } else if (x->kind == SL_DECISION_FINISH) {
            err = write_text(out, SL_TURN_WRITE_FINISHED, NULL, x->reason);
        }
    }
    /* a trial trained to the study's top rung with no result and no live
       claim: its owner was killed between its last epoch's report and
       the result it writes when the worker ends. Nobody claims it (its
       epochs are done), it never pauses (its rung is the top) and the
       scheduler waits for its result: the study never finished. The
       leader writes the result. (Found by sim_study_test once its peers
       could be killed there.) */
    for (size_t o = 0; o < v->open_count && err == SL_OK; o++) {
        const sl_turn_open_t *r = &v->open[o];
        const sl_trial_t *t = r->t;
        if (r->has_result || t->state == SL_TRIAL_RUNNING || t->rung + 1 < spec->rung_count ||
            t->epochs_done < sl_sched_rung_epochs(spec, t->bracket, t->rung))
            continue;
        err = write_result(out, r->id, SL_TRIAL_DONE, t->epochs_done,
                           r->has_claim ? r->claim.epoch : 0, self,
                           "completed (its owner left before writing the result)");
    }
    sl_free(by_id);
    return err;
}

sl_err sl_turn_lead(const sl_turn_view_t *v, const sl_study_members_t *ms, const char *self,
                    uint64_t now_ms, sl_turn_out_t *out) {
    const sl_study_spec_t *spec = v->spec;
    sl_sched_view_t sv = {.study_id = v->study_id, .capacity = 1, .cancelled = v->cancelled,
                          .trials = v->trials, .trial_count = v->trial_count};
    uint64_t round = sl_sched_round(spec, &sv);
    int leader = sl_round_leader(ms->m, ms->count, sl_round_key(v->study_id, round));
    out->led = leader >= 0 && !strcmp(ms->names[leader], self);
    if (!out->led)
        return SL_OK;
    int cap = 0;
    for (size_t i = 0; i < ms->count; i++)
        cap += ms->m[i].free_slots;
    for (size_t o = 0; o < v->open_count; o++)
        cap += v->open[o].t->state == SL_TRIAL_RUNNING;
    /* a searcher that does not learn from results (random, grid) keeps
       LOOKAHEAD times the fleet's slots proposed ahead: a peer that frees
       a slot then finds a trial waiting for it, instead of waiting for its
       result to reach the leader and the leader's next proposal to reach
       it (two replication delays a trial) */
    if (spec->searcher != SL_SEARCH_EVOLUTION)
        cap *= SL_TURN_LOOKAHEAD;
    sv.capacity = cap > 0 ? cap : 1;
    sv.elapsed_s = v->start_ms && now_ms > v->start_ms ? (now_ms - v->start_ms) / 1000 : 0;
    sl_decisions_t d = {0};
    sl_err err = sl_sched_decide(spec, &sv, &d);
    if (err != SL_OK) {
        sl_decisions_fini(&d);
        return err == SL_ENOMEM ? SL_ENOMEM : SL_OK; /* (nothing decided this turn) */
    }
    err = decisions_out(v, &d, self, out);
    sl_decisions_fini(&d);
    return err;
}

sl_err sl_turn_finish(const sl_turn_view_t *v, const char *self, sl_turn_out_t *out) {
    const sl_study_spec_t *spec = v->spec;
    if (spec->scheduler != SL_SCHED_ASHA || v->finished || v->cancelled)
        return SL_OK;
    for (size_t o = 0; o < v->open_count; o++)
        if (v->open[o].t->state != SL_TRIAL_PAUSED)
            return SL_OK; /* (the common case: something still runs or waits) */
    /* (no elapsed time: a time budget spent is the leader's to act on) */
    sl_sched_view_t sv = {.study_id = v->study_id, .capacity = 1, .trials = v->trials,
                          .trial_count = v->trial_count};
    sl_decisions_t d = {0};
    sl_err err = sl_sched_decide(spec, &sv, &d);
    bool ends = err == SL_OK && d.count > 0 && d.items[d.count - 1].kind == SL_DECISION_FINISH;
    for (size_t i = 0; ends && i < d.count; i++)
        ends = d.items[i].kind == SL_DECISION_STOP || d.items[i].kind == SL_DECISION_FINISH;
    size_t first = out->count;
    if (ends && (err = decisions_out(v, &d, self, out)) == SL_OK)
        for (size_t i = first; i < out->count; i++)
            if (out->items[i].kind == SL_TURN_WRITE_FINISHED) {
                sl_turn_action_t *a = &out->items[i];
                size_t n = strlen(a->reason);
                snprintf(a->reason + n, sizeof a->reason - n, " (by the owner of its last job)");
            }
    sl_decisions_fini(&d);
    return err == SL_ENOMEM ? SL_ENOMEM : SL_OK;
}

/* ---- claims ---- */

/* Releases the claims the view shows held by `self` with no job here:
 * claims from before a restart (the replica restored from disk), or one
 * whose job could not start. Others could otherwise take such a trial
 * only once its lease lapsed (this peer is alive again under the same
 * name, so membership never says the owner died): a churning peer's
 * promoted trial, on the study's critical path, sat out a whole restart
 * and catch-up for it. Safe before the view has caught up: a release at
 * claim epoch E joins under any later claim (higher epoch) and changes
 * nothing but this peer's own hold of E. */
static sl_err release_orphans(const sl_turn_view_t *v, const char *self, sl_turn_out_t *out) {
    size_t n = 0;
    for (size_t o = 0; o < v->open_count && n < SL_TURN_ORPHANS_MAX; o++) {
        const sl_turn_open_t *r = &v->open[o];
        if (!r->has_claim || r->claim.released || strcmp(r->claim.owner, self) || r->has_result ||
            r->mine)
            continue;
        n++;
        sl_claim_t next;
        if (sl_claim_release(&r->claim, self, r->claim.epoch, &next) == SL_OK &&
            write_claim(out, r->id, &next, SL_TURN_CLAIM_ORPHAN) != SL_OK)
            return SL_ENOMEM;
    }
    return SL_OK;
}

/* The claims and job starts of the `np` trials sl_claim_pick chose
 * (`pick` into `at`, the open trials' indices). */
static sl_err write_takes(const sl_turn_view_t *v, const sl_study_members_t *ms, int self_at,
                          const size_t *at, const size_t *pick, const sl_claim_t *next,
                          size_t np, sl_turn_out_t *out) {
    for (size_t k = 0; k < np; k++) {
        sl_turn_open_t *r = &v->open[at[pick[k]]];
        sl_err err = write_claim(out, r->id, &next[k], SL_TURN_CLAIM_TAKE);
        if (err != SL_OK)
            return err;
        sl_turn_action_t *a = push(out, SL_TURN_JOB_START, r->id);
        if (!a)
            return SL_ENOMEM;
        a->claim = next[k];
        a->trial = *r->t;
        a->trial.curve = NULL;
        a->trial.curve_len = 0;
        snprintf(a->reason, sizeof a->reason, "%s",
                 !r->has_claim ? (sl_study_members_top(ms, r->id) == self_at ? "fresh, ranked first"
                                                                          : "fresh, overdue")
                 : r->owner_suspect && r->owner_alive ? "taken over from a suspect owner"
                                                      : "claimed before");
        a->at_ms = *r->claimable_ms;
        *r->claimable_ms = 0;
    }
    return SL_OK;
}

/* A fresh trial's place in a peer's own order (take_spread): the higher
 * rung, then the trial that weighs more for the peer, then the smaller id. */
typedef struct {
    const sl_turn_open_t *r; /* the open trial */
    uint64_t weight;         /* sl_round_trial_weight(self, its id) */
} spread_key_t;

static spread_key_t spread_key(const sl_turn_open_t *r, const char *self) {
    return (spread_key_t){r, sl_round_trial_weight(self, r->id)};
}

static bool spread_before(const spread_key_t *a, const spread_key_t *b) {
    if (a->r->t->rung != b->r->t->rung)
        return a->r->t->rung > b->r->t->rung;
    if (a->weight != b->weight)
        return a->weight > b->weight;
    return strcmp(a->r->id, b->r->id) < 0;
}

/* Up to `slots` of the `nf` fresh trials `self` may take (ranked first
 * to it, or overdue: `spread`, the open trials' indices, reordered: the
 * ones taken first), each the one that weighs most for `self` among those
 * left (sl_round_trial_weight): idle peers spread over them by a rank of
 * their own, which needs no view of the others' claims or free slots
 * (docs/studies.md, "Claims"). pick[k] = k for write_takes, next[k] the
 * register. */
static sl_err take_spread(const sl_turn_view_t *v, const char *self, uint64_t now_ms,
                          size_t *spread, size_t nf, size_t slots, size_t *pick,
                          sl_claim_t *next, size_t *taken) {
    static const sl_claim_t none;
    *taken = 0;
    for (size_t k = 0; k < nf && k < slots; k++) {
        size_t best = k;
        spread_key_t bk = spread_key(&v->open[spread[k]], self);
        for (size_t i = k + 1; i < nf; i++) {
            spread_key_t ik = spread_key(&v->open[spread[i]], self);
            if (spread_before(&ik, &bk)) {
                best = i;
                bk = ik;
            }
        }
        size_t o = spread[best];
        spread[best] = spread[k];
        spread[k] = o;
        sl_err err = sl_claim_take(&none, self, now_ms, false, v->spec->lease_ms, &next[k]);
        if (err != SL_OK)
            return err;
        pick[k] = k;
        (*taken)++;
    }
    return SL_OK;
}

sl_err sl_turn_claims(const sl_turn_view_t *v, const sl_study_members_t *ms, const char *self,
                      uint64_t now_ms, bool may_claim, sl_turn_out_t *out) {
    const sl_study_spec_t *spec = v->spec;
    if (v->finished || v->cancelled)
        return SL_OK;
    due_at(out, v->next_lapse_ms);
    uint64_t budget_end = v->start_ms + spec->budget_time_s * 1000;
    if (spec->budget_time_s && v->start_ms && now_ms < budget_end)
        due_at(out, budget_end); /* (for whoever leads then) */
    sl_err err = release_orphans(v, self, out);
    if (err != SL_OK || !may_claim)
        return err;
    int self_at = -1;
    for (size_t k = 0; k < ms->count; k++)
        if (!strcmp(ms->names[k], self))
            self_at = (int)k;
    if (self_at < 0 || ms->m[self_at].free_slots <= 0)
        return SL_OK;
    size_t nopen = v->open_count;
    sl_claim_cand_t *cands = sl_calloc(nopen + 1, sizeof *cands);
    size_t *at = sl_calloc(nopen + 1, sizeof *at);
    size_t *pick = sl_calloc(nopen + 1, sizeof *pick);
    sl_claim_t *next = sl_calloc(nopen + 1, sizeof *next);
    size_t *spread = sl_calloc(nopen + 1, sizeof *spread);
    err = SL_ENOMEM;
    if (!cands || !at || !pick || !next || !spread)
        goto out;
    /* The trials claimed before (a takeover, a promotion, a retry),
       oldest first (rung, then ordinal), by the load-aware assignment;
       then, with the slots left, the fresh trials (never claimed) that
       rank this peer first among the members with slots, whatever their
       load, and the fresh trials waiting STEAL_MS in this view, together,
       each peer the ones that weigh most for it (take_spread). The fresh
       trials used to go by the load-aware assignment too: at 256 peers,
       where a claim reaches the last members after 3-4 hops of the
       store's rumor (about 30 ms), idle peers whose views of the others'
       claims and free slots were that far apart assigned themselves the
       same overdue trial (1,700 crossed claims in a 2 s fill of the
       fleet, 50 slot-seconds thrown away); a rank of their own needs no
       such view. A peer's own first-ranked trials compete with the
       overdue ones by weight, not before them, so that no overdue trial
       waits for every peer's own trials to run out: the overdue ones
       once came second, with the slots left, and a trial that ranked
       first a peer busy with a long promoted run waited for it or for
       the study's end (a fresh trial started 2.9 s late in an 8-peer
       run, its promotions after it, and the study waited for them).
       Before that, a fresh trial went to the load-aware assignee at
       once: with trials ending every few milliseconds, another member's
       load as this peer sees it is a turn or two old, and it took trials
       the member it saw as busy took too (two runs of each no-op trial
       in three).
       The trials whose owner is suspect (a probe of it went unanswered:
       killed, or slow) are kept apart, from the top of the arrays down,
       and taken over with the slots left after all of these: a killed
       peer's trial used to wait for membership to declare it dead (or
       for its restart) while the slots that could resume it idled, and
       at the end of an ASHA study that trial is the study's critical
       path (issue 14: each kill of a late trial added about a second to
       a 4 s study on 256 simulated peers). A suspect that was only slow
       loses the epoch in progress: its job stops when it sees the higher
       claim epoch, as after any takeover; and only a slot with nothing
       else to run takes it. */
    size_t nc = 0, ns = 0, np = 0, nf = 0;
    for (size_t o = 0; o < nopen; o++) {
        sl_turn_open_t *r = &v->open[o];
        const sl_trial_t *t = r->t;
        int target = sl_sched_rung_epochs(spec, t->bracket, t->rung);
        if (r->has_result || r->stop || t->epochs_done >= target || r->mine) {
            *r->claimable_ms = 0;
            continue;
        }
        sl_claim_cand_t cd;
        memset(&cd, 0, sizeof cd);
        cd.trial_id = r->id;
        cd.ordinal = t->ordinal;
        cd.rung = t->rung;
        if (r->has_claim)
            cd.claim = r->claim;
        cd.owner_alive = r->has_claim && r->owner_alive;
        if (r->has_claim && !strcmp(r->claim.owner, self))
            cd.claim.lease_expiry_ms = 0; /* ours, but no worker here: from before a restart */
        cd.needs_work = true;
        bool suspect = false;
        if (!sl_claim_may_take(sl_claim_status_of(&cd.claim, self, now_ms, cd.owner_alive))) {
            suspect = cd.owner_alive && r->owner_suspect &&
                      sl_claim_may_take(sl_claim_status_of(&cd.claim, self, now_ms, false));
            if (!suspect) {
                *r->claimable_ms = 0;
                continue;
            }
            cd.owner_alive = false; /* (taken over as from a dead owner) */
        }
        if (!*r->claimable_ms)
            *r->claimable_ms = now_ms;
        cd.waited_ms = now_ms - *r->claimable_ms;
        if (suspect) {
            size_t i = nopen - 1 - ns++;
            cands[i] = cd;
            at[i] = o;
            continue;
        }
        bool fresh = !r->has_claim;
        bool first = fresh && sl_study_members_top(ms, r->id) == self_at;
        bool overdue = now_ms >= *r->claimable_ms + SL_TURN_STEAL_MS;
        if (fresh && !first && !overdue) {
            due_at(out, *r->claimable_ms + SL_TURN_STEAL_MS);
            continue;
        }
        if (fresh) {
            spread[nf++] = o;
            continue;
        }
        cands[nc] = cd;
        at[nc++] = o;
    }
    uint64_t handoff = UINT64_MAX;
    err = SL_OK;
    if (nc && sl_claim_pick(cands, nc, ms->m, ms->count, self, now_ms, spec->lease_ms, pick,
                            next, &np, &handoff) == SL_OK)
        err = write_takes(v, ms, self_at, at, pick, next, np, out);
    /* the suspects' trials with the slots left: the assignment as the
       others see it, but for this peer's slots taken just now (its
       members' free slots lowered while the pick runs) */
    int left = ms->m[self_at].free_slots - (int)np;
    size_t nt = 0;
    if (err == SL_OK && nf && left > 0 &&
        (err = take_spread(v, self, now_ms, spread, nf, (size_t)left, pick, next, &nt)) == SL_OK)
        err = write_takes(v, ms, self_at, spread, pick, next, nt, out);
    left -= (int)nt;
    if (err == SL_OK && ns && left > 0) {
        size_t base = nopen - ns, sp = 0;
        int had = ms->m[self_at].free_slots;
        ms->m[self_at].free_slots = left;
        uint64_t h2 = UINT64_MAX;
        sl_err perr = sl_claim_pick(&cands[base], ns, ms->m, ms->count, self, now_ms,
                                    spec->lease_ms, pick, next, &sp, &h2);
        ms->m[self_at].free_slots = had;
        if (perr == SL_OK)
            err = write_takes(v, ms, self_at, &at[base], pick, next, sp, out);
        due_at(out, h2);
    }
    /* one left to another member is handed on to this peer at its turn,
       if a slot is still free then */
    due_at(out, handoff);
out:
    sl_free(cands);
    sl_free(at);
    sl_free(pick);
    sl_free(next);
    sl_free(spread);
    return err;
}
