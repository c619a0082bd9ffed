/* Studies in the peer daemon: see include/starling/study_node.h and
 * docs/studies.md ("The runtime"). Its store keys (all LWW registers; the
 * grow-only maps of the design are one key per entry) are built and parsed
 * in src/study/study_keys.c; their table is docs/studies.md's "Store
 * layout". */
#include "starling/study_node.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "starling/hash.h"

#include "platform/process.h"
#include "starling/platform.h"
#include "starling/study.h"
#include "study/study_keys.h"
#include "study/study_node_internal.h"

static const char *self_name(sl_study_node_t *sn) { return sl_node_name(sn->node); }

static uint64_t tick(void *ctx, sl_node_t *node, uint64_t now_ns);

/* The store node's listener: every study key that changes updates the
 * live view of its study (src/study/study_view.c); a RESET snapshot, not told
 * key by key, has every study read again. */
static void on_store_change(void *ctx, const uint8_t *key, size_t key_len,
                            const sl_store_entry_t *e) {
    sl_study_node_t *sn = ctx;
    if (!key) {
        sn->ids_stale = true;
        for (int i = 0; i < MAX_STUDIES; i++)
            sn->specs[i].live.stale = true;
        return;
    }
    sl_study_key_t k;
    sl_err err = sl_study_key_parse(key, key_len, &k);
    if (err == SL_ENOTFOUND)
        return; /* not a study's */
    if (k.kind == SL_STUDY_KEY_SPEC && e) {
        if (err != SL_OK) {
            sl_node_bad_input(sn->node, "study"); /* a study id that is not 16 hex digits */
            return;
        }
        sl_study_ids_add(&sn->ids, k.study);
    }
    if (err != SL_OK)
        return; /* a malformed trial id: no trial of a view */
    /* a turn soon (no sooner than the gap allows): an idle loop waits a
       whole tick period otherwise */
    sl_node_tick_soon(sn->node, tick, sn);
    cached_t *c = sl_study_node_cached(sn, &k);
    if (!c)
        return; /* read whole when it is first cached */
    if (sn->plant_lost_change && ++sn->plant_count % 50 == 0)
        return; /* planted for the checker's test: a change never told */
    bool present = e && e->type == SL_CRDT_LWW;
    sl_study_live_apply(sn, c, key, key_len, present ? e->val : NULL, present ? e->val_len : 0,
                        present);
}

/* ---- the view (for the control commands) ---- */

/* ---- writes ---- */

static void write_claim(sl_study_node_t *sn, const char *study, const char *trial,
                        const sl_claim_t *c) {
    char key[SL_STUDY_KEY_MAX], val[512];
    size_t len;
    if (sl_study_key_build(key, sizeof key, SL_STUDY_KEY_CLAIM, study, trial, 0, self_name(sn)) ==
            SL_OK &&
        sl_claim_encode(c, val, sizeof val, &len) == SL_OK)
        sl_study_node_put_str(sn, key, val, len);
}

static void put_result(sl_study_node_t *sn, const char *study, const sl_result_t *r) {
    char key[SL_STUDY_KEY_MAX], val[1024];
    size_t len;
    if (sl_study_key_build(key, sizeof key, SL_STUDY_KEY_RESULT, study, r->trial_id,
                           r->claim_epoch, r->writer) == SL_OK &&
        sl_result_encode(r, val, sizeof val, &len) == SL_OK)
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
    put_result(sn, study, &r);
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

static void job_flush_log(sl_study_node_t *sn, job_t *j) {
    if (!j->log_dirty || !j->log.data)
        return;
    char key[SL_STUDY_KEY_MAX];
    if (sl_study_node_log_key(sn, j->study, j->trial, j->epoch, key) == SL_OK)
        sl_study_node_put_str(sn, key, j->log.data, j->log.len);
    j->log_dirty = false;
    j->log_written_ms = sl_study_node_wall_ms();
}

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

/* Writes the job's metric report of epoch `e` (false: it could not). */
static bool put_report(sl_study_node_t *sn, job_t *j, int e, const char *line, size_t len) {
    char key[SL_STUDY_KEY_MAX];
    return sl_study_key_build(key, sizeof key, SL_STUDY_KEY_METRIC, j->study, j->trial,
                              (uint64_t)e, NULL) == SL_OK &&
           sl_study_node_put_str(sn, key, line, len) == SL_OK;
}

/* A command's report of its target epoch is held until its END (a few ms
 * later: the command writes its checkpoint and exits), then written in the
 * END's turn with that checkpoint, the result or release and the log: one
 * group commit, one DELTA to every member, where the report used to cost
 * one of its own (bench/results/study.md, "Scaling"). Nobody acts on it
 * sooner: the trial is running until its release or result. A peer killed
 * in between loses it with the checkpoint it would have come with, and
 * whoever resumes the trial reports that epoch again. */
static bool hold_report(job_t *j, int e, const char *line, size_t len) {
    sl_free(j->held);
    j->held = sl_malloc(len ? len : 1);
    if (!j->held)
        return false; /* (written at once, then) */
    memcpy(j->held, line, len);
    j->held_len = len;
    j->held_epoch = e;
    return true;
}

static void put_held_report(sl_study_node_t *sn, job_t *j) {
    if (!j->held)
        return;
    put_report(sn, j, j->held_epoch, j->held, j->held_len);
    sl_free(j->held);
    j->held = NULL;
}

static void job_free(sl_study_node_t *sn, job_t *j, bool wait) {
    put_held_report(sn, j);
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

/* Releases the job's claim (if the joined register still shows it ours:
 * the live view holds every peer's register of the trial). */
static void job_release(sl_study_node_t *sn, job_t *j) {
    cached_t *c = sl_study_node_cache(sn, j->study);
    trial_row_t *r = c ? sl_study_live_find(&c->live, j->trial) : NULL;
    sl_claim_t cur, next;
    if (r && sl_study_live_claim(r, &cur) &&
        sl_claim_release(&cur, self_name(sn), j->epoch, &next) == SL_OK)
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
    job->wake_fd = sn->wake[1];
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

/* A job's working directory, DATA/studies/S/w/N (the command's
 * STARLING_CHECKPOINT_DIR): one a finished job left empty, when there is
 * one, else a new one. Directories are reused, not made per trial: a
 * mkdir allocates an inode (about 0.15 ms here, most of what a no-op trial
 * cost the peer besides the store). */
static bool job_dir_take(sl_study_node_t *sn, cached_t *c, job_t *j) {
    bool fresh = c->free_count == 0;
    j->dir_num = fresh ? c->next_dir++ : c->free_dirs[--c->free_count];
    snprintf(j->dir, sizeof j->dir, "%s/%s/w/%u", sn->root, c->id, j->dir_num);
    if (fresh) /* (it may be there from before a restart: the restore empties it) */
        sl_plat_mkdirs(j->dir, 0700);
    return !fresh;
}

/* Whether the job's directory is known to be empty (one given back) is
 * what job_dir_take returns. */

/* Keeps a finished job's directory for the next job, emptied (its
 * checkpoints are replicated as blobs by then). Only after the worker has
 * ended and with no restore under way: nothing else writes into it. */
static void job_dir_give(sl_study_node_t *sn, const job_t *j) {
    cached_t *c = sl_study_node_cache(sn, j->study);
    if (!c || j->launch)
        return;
    sl_study_dir_clear(j->dir);
    if (!sl_study_dir_empty(j->dir))
        return; /* something the command made that is not a plain file: not reused */
    if (c->free_count == c->free_cap) {
        uint32_t cap = c->free_cap ? 2 * c->free_cap : 16;
        uint32_t *n = sl_realloc(c->free_dirs, cap * sizeof *n);
        if (!n)
            return;
        c->free_dirs = n;
        c->free_cap = cap;
    }
    c->free_dirs[c->free_count++] = j->dir_num;
}

/* Takes a claimed trial: restores its latest checkpoint (fetched from its
 * holders if need be; the lease is renewed meanwhile), then starts the
 * worker. */
static void start_job(sl_study_node_t *sn, cached_t *c, const sl_trial_t *t,
                      const sl_claim_t *claim) {
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
    const sl_study_spec_t *spec = &c->spec;
    memcpy(j->study, c->id, sizeof j->study);
    memcpy(j->trial, t->id, sizeof j->trial);
    j->epoch = claim->epoch;
    j->rung = t->rung;
    bool empty = job_dir_take(sn, c, j);
    j->started_ms = sl_study_node_wall_ms();
    j->log_written_ms = j->started_ms;
    j->renew_ms = j->started_ms + spec->lease_ms / 3;
    sn->claims++;
    j->outcome = -1;
    job->spec = *spec;
    memcpy(job->trial_id, t->id, sizeof job->trial_id);
    job->config = t->config;
    job->target_epochs = sl_sched_rung_epochs(spec, t->bracket, t->rung);
    snprintf(job->dir, sizeof job->dir, "%s", j->dir);
    job->threads = sn->cfg.threads;
    job->data = sn->data;
    job->user = sn->trial_user;
    j->launch = job;
    /* no checkpoint to restore and nothing in the way: start at once */
    char key[SL_STUDY_KEY_MAX];
    const uint8_t *v;
    size_t vl;
    if (empty && (sl_study_key_build(key, sizeof key, SL_STUDY_KEY_CKPT, j->study, j->trial, 0,
                                     NULL) != SL_OK ||
                  sl_study_node_get_str(sn, key, &v, &vl) != SL_OK)) {
        sl_free(ref);
        job_launch(sn, j, 0);
        return;
    }
    memcpy(ref->study, j->study, sizeof ref->study);
    memcpy(ref->trial, j->trial, sizeof ref->trial);
    ref->epoch = j->epoch;
    sl_study_ckpt_restore(sn, j->study, j->trial, j->dir, on_restored, ref);
}

/* The members a turn sees (sl_study_members_t, study/turn.h): every
 * alive or suspect member of the swim core's table, however many (it kept
 * the first 64 of the table, and the table's order differs between peers:
 * above 64 peers two of them chose different leaders and ranked claims
 * differently). The order does not matter: the cores break ties by id. */
sl_err sl_study_members_alive(const sl_swim_t *sw, sl_study_members_t *ms) {
    ms->count = 0;
    size_t n = sl_swim_member_count(sw);
    if (sl_study_members_reserve(ms, n) != SL_OK)
        return SL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        sl_swim_member_t m;
        if (sl_swim_member_at(sw, i, &m) != SL_OK)
            continue;
        if (m.state != SL_STATE_ALIVE && m.state != SL_STATE_SUSPECT)
            continue;
        size_t k = ms->count++;
        snprintf(ms->names[k], sizeof ms->names[k], "%.*s", (int)m.name.len,
                 (const char *)m.name.ptr);
        ms->slots[k] = 1;
        ms->suspect[k] = m.state == SL_STATE_SUSPECT && !m.is_self;
        ms->m[k] = (sl_round_member_t){ms->names[k], true, 1};
    }
    return SL_OK;
}

/* Each alive member with its slots: its --slots as it wrote them under
 * peer/NAME/slots (this peer's: `concurrency`); the turn core then takes
 * off the trials each runs (sl_turn_members_load). */
static sl_err members_build(sl_study_node_t *sn, cached_t *c, int concurrency,
                            sl_study_members_t *ms) {
    if (sl_study_members_alive(sl_node_swim(sn->node), ms) != SL_OK)
        return SL_ENOMEM;
    for (size_t k = 0; k < ms->count; k++) {
        int slots = concurrency;
        if (strcmp(ms->names[k], self_name(sn))) {
            char key[SL_STUDY_KEY_MAX];
            const uint8_t *val;
            size_t len;
            if (sl_study_slots_key(key, sizeof key, ms->names[k]) == SL_OK &&
                sl_study_node_get_str(sn, key, &val, &len) == SL_OK && len > 0 && len < 8) {
                char b[8];
                memcpy(b, val, len);
                b[len] = 0;
                slots = atoi(b) > 0 ? atoi(b) : (b[0] == '-' ? 0 : c->spec.concurrency);
            }
        }
        ms->slots[k] = slots;
    }
    return SL_OK;
}

/* (with STUDY-CLAIM and STUDY-RUN: each job's timeline, for the scaling
 * benchmark's analysis; info level, off by default) */
static void log_job_end(sl_study_node_t *sn, const job_t *j) {
    (void)sn;
    sl_log(SL_LOG_INFO, "STUDY-END", "study %s trial %s: claim epoch %" PRIu64
           ": rung %d, ended at epoch %d (%s) after %" PRIu64 " ms", j->study, j->trial,
           j->epoch, j->rung, j->last_epoch,
           j->outcome == SL_EPOCH_DONE    ? "done"
           : j->outcome == SL_EPOCH_PAUSE ? "paused"
                                          : "failed or stopped",
           sl_study_node_wall_ms() - j->started_ms);
}

/* A job that just reached its rung under ASHA: when this peer's view
 * promotes the trial (sl_sched_asha_promotes: the same rule the leader
 * applies, to the results recorded here, which hold this one at once),
 * the owner writes the promotion and trains on in the same directory,
 * under the same claim. The alternative, release then the leader's
 * promotion then a claim and a restore elsewhere, cost a promotion about
 * 100 ms (two replication delays and a turn), collided when two peers
 * took it on late views, and ran 1-2 epochs again whenever the claimer
 * restored before the rung's last checkpoint had its copies (one
 * promoted run in five in a 16-peer run). Leaders are an efficiency: a
 * promotion justified by the results recorded when it was made is one
 * ASHA allows from any peer, and the leader never promotes a trial whose
 * owner still holds it. */
static bool continue_promoted(sl_study_node_t *sn, job_t *j, const sl_study_spec_t *spec) {
    cached_t *c = sl_study_node_cache(sn, j->study);
    if (!c || spec->scheduler != SL_SCHED_ASHA || sl_plat_stop_requested())
        return false;
    live_t *lv = &c->live;
    sl_study_live_refresh(sn, c, sl_study_node_wall_ms()); /* (its reports are in) */
    trial_row_t *r = sl_study_live_find(lv, j->trial);
    const sl_trial_t *t = r ? sl_study_live_trial(lv, r) : NULL;
    if (!t || lv->cancelled || lv->finished || r->stop || r->has_result || !r->has_claim ||
        r->claim.released || r->claim.epoch != j->epoch || strcmp(r->claim.owner, self_name(sn)))
        return false;
    sl_sched_view_t sv = {.study_id = c->id, .capacity = 1, .cancelled = lv->cancelled,
                          .trials = lv->trials, .trial_count = lv->trial_count};
    char why[96]; /* (a decision's reason) */
    if (!sl_sched_asha_promotes(spec, &sv, j->trial, j->rung, why, sizeof why))
        return false;
    sl_study_job_t *job = sl_calloc(1, sizeof *job);
    if (!job)
        return false;
    job->spec = *spec;
    memcpy(job->trial_id, t->id, sizeof job->trial_id);
    job->config = t->config;
    job->target_epochs = sl_sched_rung_epochs(spec, t->bracket, j->rung + 1);
    snprintf(job->dir, sizeof job->dir, "%s", j->dir);
    job->threads = sn->cfg.threads;
    job->data = sn->data;
    job->user = sn->trial_user;
    char key[SL_STUDY_KEY_MAX], line[160];
    snprintf(line, sizeof line, "%s (by its owner)", why);
    if (sl_study_key_build(key, sizeof key, SL_STUDY_KEY_RUNG, j->study, j->trial,
                           (uint64_t)j->rung + 1, NULL) == SL_OK)
        sl_study_node_put_str(sn, key, line, strlen(line));
    sl_log(SL_LOG_INFO, "STUDY-PROMOTE", "study %s trial %s: to rung %d: %s", j->study, j->trial,
           j->rung + 1, line);
    sl_study_worker_destroy(&j->w); /* (it has ended: its END was the last event) */
    j->rung++;
    j->outcome = -1;
    j->launch = job;
    job_launch(sn, j, j->last_epoch);
    return true;
}

static void drain_job(sl_study_node_t *sn, job_t *j, const sl_study_spec_t *spec,
                      int failures_before) {
    sl_wev_t *ev;
    while (j->study[0] && j->w && (ev = sl_study_worker_pop(j->w))) {
        if (ev->kind == SL_WEV_LOG) {
            job_log(j, ev->text);
        } else if (ev->kind == SL_WEV_EPOCH) {
            char line[SL_REPORT_LINE_MAX];
            size_t len;
            int e = ev->report.epoch; /* (1 or more: sl_report_parse) */
            j->last_epoch = e;
            sl_epoch_outcome out = sl_claim_after_epoch(spec, j->rung, e, false, 0);
            bool ends = out == SL_EPOCH_DONE || out == SL_EPOCH_PAUSE;
            bool command = spec->trainer == SL_TRAINER_COMMAND;
            if (sl_report_encode(&ev->report, line, sizeof line, &len) == SL_OK) {
                /* (a held report is written at the END) */
                bool held = ends && command && hold_report(j, e, line, len);
                if (!held && put_report(sn, j, e, line, len))
                    j->reported = true;
            }
            if (!command && sl_claim_checkpoint_due(spec, e, out)) /* (builtin) */
                write_checkpoint(sn, j, e);
            else if (command && e > 1 && !ends)
                write_checkpoint(sn, j, e - 1); /* a command writes it after the line
                                                   (its target epoch's: at the END) */
            if (ends) {
                j->outcome = out; /* finished at the END event */
                sl_study_worker_stop(j->w);
            }
        } else { /* END */
            job_log(j, ev->text);
            put_held_report(sn, j); /* (before the checkpoint, result, release) */
            if (j->outcome == SL_EPOCH_DONE || j->outcome == SL_EPOCH_PAUSE) {
                if (spec->trainer == SL_TRAINER_COMMAND)
                    write_checkpoint(sn, j, j->last_epoch);
                if (j->outcome == SL_EPOCH_DONE)
                    write_result(sn, j->study, j->trial, SL_TRIAL_DONE, j->last_epoch, j->epoch,
                                 "completed");
                job_log(j, j->outcome == SL_EPOCH_DONE ? "done" : "paused at its rung");
                if (j->outcome == SL_EPOCH_PAUSE) {
                    log_job_end(sn, j);
                    if (continue_promoted(sn, j, spec)) {
                        sl_free(ev);
                        return;
                    }
                }
            } else if (ev->failed) {
                char key[SL_STUDY_KEY_MAX];
                if (sl_study_key_build(key, sizeof key, SL_STUDY_KEY_FAIL, j->study, j->trial,
                                       j->epoch, NULL) == SL_OK)
                    sl_study_node_put_str(sn, key, ev->text, strlen(ev->text));
                sl_epoch_outcome out =
                    sl_claim_after_epoch(spec, j->rung, j->last_epoch, true, failures_before + 1);
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
            job_dir_give(sn, j); /* (its child has been reaped) */
            sn->jobs_ended++;
            sn->job_ms_total += sl_study_node_wall_ms() - j->started_ms;
            if (j->outcome != SL_EPOCH_PAUSE) /* (logged already) */
                log_job_end(sn, j);
            job_free(sn, j, true);
            return;
        }
        sl_free(ev);
    }
}

/* This peer has joined and its replica has caught up: it held all that
 * another peer's DIGEST or SUMMARY, received since this process started,
 * said that peer held (a replica restored after kill -9 then shows the
 * claims others took over meanwhile), or CATCHUP_MS passed since the
 * join, in case no such message came. */
static bool caught_up(const sl_study_node_t *sn, uint64_t now) {
    return sn->joined_ms &&
           (sl_store_caught_up_ms(sl_store_node_store(sn->store)) >= sn->started_ms ||
            now >= sn->joined_ms + CATCHUP_MS);
}

/* No claims before this peer has joined and caught up (or waited a lease
 * alone). */
static bool may_claim(const sl_study_node_t *sn, const sl_study_spec_t *spec, uint64_t now) {
    return caught_up(sn, now) || now >= sn->started_ms + (spec ? spec->lease_ms : 10000);
}

/* The trials' states are derived again after the turn's own writes and
 * ended jobs (cheap: what changed and what is open). */
static void refresh(sl_study_node_t *sn, cached_t *c) {
    sl_study_live_refresh(sn, c, sl_study_node_wall_ms());
}

/* A wait seen this turn ends at `ms` (wall): the loop turns then, even
 * with no change. `due` is the earliest such end so far. */
static void due_at(uint64_t *due, uint64_t ms) {
    if (ms < *due)
        *due = ms;
}

/* The turn core's view of study `c` (study/turn.h), from its live view
 * as last refreshed (sl_study_live_turn_view). Borrowed from the live
 * view until its next refresh or write. */
static sl_err view_build(sl_study_node_t *sn, cached_t *c, sl_turn_view_t *v) {
    sl_live_env_t env = sl_study_live_env(sn);
    return sl_study_live_turn_view(&c->live, c->id, &c->spec, &env, v);
}

/* Carries out a turn phase's actions in order: the store writes (the
 * live view takes each at once), the jobs started, ended and renewed
 * (`jobs`: the jobs the phase was given). */
static void turn_do(sl_study_node_t *sn, cached_t *c, job_t **jobs, uint64_t now,
                    const sl_turn_out_t *out) {
    const sl_study_spec_t *spec = &c->spec;
    for (size_t i = 0; i < out->count; i++) {
        const sl_turn_action_t *a = &out->items[i];
        char key[SL_STUDY_KEY_MAX], val[SL_STUDY_RECORD_MAX];
        size_t len;
        job_t *j = jobs && a->kind >= SL_TURN_JOB_LOST ? jobs[a->job] : NULL;
        switch (a->kind) {
        case SL_TURN_WRITE_CLAIM:
            if (a->why == SL_TURN_CLAIM_ORPHAN)
                sl_log(SL_LOG_NOTICE, "STUDY-RELEASE", "study %s trial %s: claim epoch %" PRIu64
                       " held here with no job (from before a restart): released", c->id,
                       a->trial_id, a->claim.epoch);
            write_claim(sn, c->id, a->trial_id, &a->claim);
            break;
        case SL_TURN_WRITE_RECORD:
            if (sl_study_key_build(key, sizeof key, SL_STUDY_KEY_RECORD, c->id, a->trial_id, 0,
                                   NULL) == SL_OK &&
                sl_trial_record_encode(spec, &a->trial, val, sizeof val, &len) == SL_OK)
                sl_study_node_put_str(sn, key, val, len);
            break;
        case SL_TURN_WRITE_RUNG:
            if (sl_study_key_build(key, sizeof key, SL_STUDY_KEY_RUNG, c->id, a->trial_id,
                                   (uint64_t)a->rung, NULL) == SL_OK)
                sl_study_node_put_str(sn, key, a->reason, strlen(a->reason));
            sl_log(SL_LOG_INFO, "STUDY-PROMOTE", "study %s trial %s: to rung %d: %s", c->id,
                   a->trial_id, a->rung, a->reason);
            break;
        case SL_TURN_WRITE_STOP:
            if (sl_study_key_build(key, sizeof key, SL_STUDY_KEY_STOP, c->id, a->trial_id, 0,
                                   NULL) == SL_OK)
                sl_study_node_put_str(sn, key, a->reason, strlen(a->reason));
            break;
        case SL_TURN_WRITE_RESULT: put_result(sn, c->id, &a->result); break;
        case SL_TURN_WRITE_FINISHED:
            if (sl_study_key_build(key, sizeof key, SL_STUDY_KEY_FINISHED, c->id, NULL, 0, NULL) ==
                SL_OK)
                sl_study_node_put_str(sn, key, a->reason, strlen(a->reason));
            sl_log(SL_LOG_NOTICE, "STUDY-FINISH", "study %s (%s) finished: %s", c->id,
                   spec->name, a->reason);
            break;
        case SL_TURN_JOB_START:
            sl_log(SL_LOG_INFO, "STUDY-CLAIM", "study %s trial %s: claim epoch %" PRIu64
                   " (%s, rung %d, claimable for %" PRIu64 " ms)", c->id, a->trial_id,
                   a->claim.epoch, a->reason, a->trial.rung, now - a->at_ms);
            start_job(sn, c, &a->trial, &a->claim);
            break;
        case SL_TURN_JOB_LOST:
            job_log(j, "claim taken over: stopping");
            sl_log(SL_LOG_INFO, "STUDY-LOST", "study %s trial %s: claim epoch %" PRIu64
                   " lost to %s at epoch %" PRIu64 " after %" PRIu64 " ms", j->study, j->trial,
                   j->epoch, a->claim.owner, a->claim.epoch, now - j->started_ms);
            sn->claims_lost++;
            job_free(sn, j, false);
            break;
        case SL_TURN_JOB_END: job_free(sn, j, false); break;
        case SL_TURN_JOB_RENEW_AT: j->renew_ms = a->at_ms; break;
        }
    }
}

/* One turn of one study; `due` gathers when its waits end (due_at). The
 * decisions are the turn core's (study/turn.h): this builds its view,
 * runs its three phases and carries out their actions, deriving the view
 * again after each phase that wrote. */
static void study_turn(sl_study_node_t *sn, cached_t *c, uint64_t now, uint64_t *due) {
    live_t *lv = &c->live;
    const sl_study_spec_t *spec = &c->spec;
    sl_study_live_refresh(sn, c, now);
    char why[256];
    if (sn->check_view && !sl_study_live_check(sn, c, now, why, sizeof why)) {
        /* an invariant broke: counted (stats study.view_errors) and the
           peer stops through its loop's error path and exits non-zero, so
           the test that switched the check on fails (lib.sh peers_running) */
        sl_log(SL_LOG_ERR, "STUDY-VIEW", "the live view differs from the store: %s; stopping the peer",
               why);
        sn->view_errors++;
        sl_node_fail(sn->node, SL_EINTERNAL);
        return;
    }
    int concurrency = sn->cfg.slots > 0 ? sn->cfg.slots : (sn->cfg.slots < 0 ? 0 : spec->concurrency);
    sl_study_members_t *ms = &sn->members;
    sl_turn_out_t *out = &sn->turn_out;
    const char *self = self_name(sn);
    uint64_t writes0 = sn->writes;
    int jobs0 = running_jobs(sn);
    /* workers first: their reports change the view */
    for (int i = 0; i < MAX_JOBS; i++) {
        job_t *j = &sn->jobs[i];
        if (!j->study[0] || strcmp(j->study, c->id))
            continue;
        trial_row_t *r = sl_study_live_find(lv, j->trial);
        drain_job(sn, j, spec, r ? (int)r->fail_count : 0);
        /* (its log rides the report's commit: LOG_EVERY_MS) */
        if (j->study[0] && j->reported && now >= j->log_written_ms + LOG_EVERY_MS)
            job_flush_log(sn, j);
    }
    /* the jobs phase: stop the jobs whose claim moved on or whose trial
       ended, renew the others' leases */
    job_t *jobs[MAX_JOBS];
    sl_turn_job_t tj[MAX_JOBS];
    size_t nj = 0;
    for (int i = 0; i < MAX_JOBS; i++) {
        job_t *j = &sn->jobs[i];
        if (!j->study[0] || strcmp(j->study, c->id))
            continue;
        sl_turn_job_t *x = &tj[nj];
        memset(x, 0, sizeof *x);
        x->trial_id = j->trial;
        x->epoch = j->epoch;
        x->renew_ms = j->renew_ms;
        x->last_epoch = j->last_epoch;
        x->reported = j->reported;
        j->reported = false;
        sl_study_live_turn_job(lv, j->trial, x);
        jobs[nj++] = j;
    }
    sl_turn_view_t v = {.study_id = c->id, .spec = spec, .trials = lv->trials,
                        .trial_count = lv->trial_count, .cancelled = lv->cancelled,
                        .finished = lv->finished};
    sl_turn_out_clear(out);
    out->due_ms = UINT64_MAX;
    if (nj && sl_turn_jobs(&v, tj, nj, self, now, out) == SL_OK)
        turn_do(sn, c, jobs, now, out);
    due_at(due, out->due_ms);
    if (lv->finished)
        return;
    if (sn->writes != writes0 || running_jobs(sn) != jobs0)
        refresh(sn, c);
    /* (after the jobs: a slot freed this turn is taken again this turn) */
    if (members_build(sn, c, concurrency, ms) != SL_OK || view_build(sn, c, &v) != SL_OK)
        return; /* (no view this turn: a part of one could pick another leader) */
    sl_turn_members_load(&v, ms, self, running_jobs(sn));
    /* the leader of this round, if this peer */
    sl_turn_out_clear(out);
    uint64_t before = sn->writes;
    if (sl_turn_lead(&v, ms, self, now, out) == SL_OK)
        turn_do(sn, c, NULL, now, out);
    /* a job of this peer ended this turn and another leads: its result may
       have been the study's last, and then this peer ends the study
       (sl_turn_finish: the last round's leader may be down) */
    if (!out->led && running_jobs(sn) < jobs0) {
        sl_turn_out_clear(out);
        if (sl_turn_finish(&v, self, out) == SL_OK)
            turn_do(sn, c, NULL, now, out);
    }
    if (sn->writes != before) {
        refresh(sn, c);
        if (view_build(sn, c, &v) != SL_OK)
            return;
    }
    if (lv->finished || lv->cancelled || sl_plat_stop_requested())
        return;
    /* no claims before this peer has joined and caught up (or waited a
       lease alone): a fresh view would take every other member's trials
       for its own, and a replica restored from disk after a kill -9 still
       shows this peer's old claims, which others may have taken over
       since (an equal claim epoch would then go to the smaller name).
       A command trainer in an open cluster without --allow-commands:
       never claimed here (sl_study_node_cache told it once) */
    bool commands_ok = spec->trainer != SL_TRAINER_COMMAND || sl_node_commands_allowed(sn->node);
    bool may = commands_ok && may_claim(sn, spec, now);
    if (commands_ok && !may) {
        if (sn->joined_ms)
            due_at(due, sn->joined_ms + CATCHUP_MS);
        due_at(due, sn->started_ms + spec->lease_ms);
    }
    /* the claims phase: orphaned claims released, the trials to claim */
    sl_turn_out_clear(out);
    out->due_ms = UINT64_MAX;
    if (sl_turn_claims(&v, ms, self, now, may, out) == SL_OK)
        turn_do(sn, c, NULL, now, out);
    due_at(due, out->due_ms);
}

/* The least time between two turns. */
static uint64_t turn_gap_ns(const sl_study_node_t *sn) {
    uint64_t gap = (uint64_t)TURN_GAP_MS * 1000000ull;
    return gap < TURN_COST_X * sn->turn_cost_ns ? TURN_COST_X * sn->turn_cost_ns : gap;
}

/* Something changed since the last turn: the replica, a worker's queue,
 * membership. */
static bool changed(sl_study_node_t *sn) {
    if (sn->poked || sl_store_fingerprint(sl_store_node_store(sn->store)) != sn->turn_fp)
        return true;
    for (int i = 0; i < MAX_JOBS; i++)
        if (sn->jobs[i].study[0] && sn->jobs[i].w && sl_study_worker_pending(sn->jobs[i].w))
            return true;
    return false;
}

/* Whether a turn is due now: something changed and the gap since the last
 * turn has passed, a wait the last turn saw ended, or a tick period went
 * by. */
static bool turn_due(sl_study_node_t *sn, uint64_t now_ns) {
    uint64_t period = (uint64_t)sn->cfg.tick_ms * 1000000ull;
    if (now_ns >= sn->full_ns + period || now_ns >= sn->due_ns)
        return true;
    return now_ns >= sn->turn_ns + turn_gap_ns(sn) && changed(sn);
}

/* When the next turn is due, if nothing tells the loop sooner. */
static uint64_t next_turn_ns(sl_study_node_t *sn) {
    uint64_t next = sn->full_ns + (uint64_t)sn->cfg.tick_ms * 1000000ull;
    if (sn->due_ns < next)
        next = sn->due_ns;
    uint64_t gap_end = sn->turn_ns + turn_gap_ns(sn);
    if (gap_end < next && changed(sn))
        next = gap_end; /* what changed within the gap */
    return next;
}

static uint64_t tick(void *ctx, sl_node_t *node, uint64_t now_ns) {
    (void)node;
    sl_study_node_t *sn = ctx;
    uint64_t period = (uint64_t)sn->cfg.tick_ms * 1000000ull;
    /* the loop used to turn only every tick_ms, so each trial waited a
       tick or more at each step (proposed, claimed, reported, released)
       and a slot ran at most one trial per tick; now it turns as soon as
       something changed (told at once: the store's listener, the wake
       pipe, membership), at most once a gap, and when a wait ends */
    if (!turn_due(sn, now_ns))
        return next_turn_ns(sn);
    if (now_ns >= sn->full_ns + period)
        sn->full_ns = now_ns;
    sn->turn_ns = now_ns;
    sn->poked = false;
    uint64_t due = UINT64_MAX;
    sn->turn_fp = sl_store_fingerprint(sl_store_node_store(sn->store));
    uint64_t now = sl_study_node_wall_ms();
    /* (noted on every turn, studies or not: a peer that joined long before
       a study is submitted has caught up long before too) */
    if (!sn->joined_ms && sl_swim_alive_count(sl_node_swim(sn->node)) >= 2)
        sn->joined_ms = now;
    /* Others rank trials by who has slots: none (-1) until this peer may
       claim, then its --slots. A peer restarted after a kill -9 is alive
       again at once under its old name; while it caught up, others used
       to leave it the trials that ranked it first, and their load-aware
       assignment of promoted and released trials gave it its share, and
       all of them waited out its catch-up (caught_up). Written in the
       same turn as its old claims' release (release_orphans), so others
       see both in one DELTA. */
    bool ready = caught_up(sn, now);
    if (ready && !sn->ready_ms) {
        sn->ready_ms = now;
        sl_log(SL_LOG_INFO, "STUDY-READY", "caught up %" PRIu64 " ms after joining (%s)",
               now - sn->joined_ms, now >= sn->joined_ms + CATCHUP_MS ? "waited the most" : "the store's exchange");
    }
    int offer = ready ? sn->cfg.slots : -1;
    if (!sn->slots_written || offer != sn->slots_offered) {
        char key[SL_STUDY_KEY_MAX], val[16];
        snprintf(val, sizeof val, "%d", offer);
        sn->slots_written = sl_study_slots_key(key, sizeof key, self_name(sn)) == SL_OK &&
                            sl_study_node_put_str(sn, key, val, strlen(val)) == SL_OK;
        sn->slots_offered = offer;
    }
    idlist_t l = *sl_study_node_studies(sn); /* (a copy: the listener may add to it) */
    if (!sl_plat_stop_requested())
        for (int i = 0; i < l.count; i++) {
            cached_t *c = sl_study_node_cache(sn, l.ids[i]);
            if (c)
                study_turn(sn, c, now, &due);
        }
    reap_orphans(sn);
    sl_study_ckpt_settle(sn);
    /* a log no report carried (LOG_ALONE_MS) */
    for (int i = 0; i < MAX_JOBS; i++) {
        job_t *j = &sn->jobs[i];
        if (!j->study[0] || !j->log_dirty)
            continue;
        if (now >= j->log_written_ms + LOG_ALONE_MS)
            job_flush_log(sn, j);
        else
            due_at(&due, j->log_written_ms + LOG_ALONE_MS);
    }
    /* the fingerprint after the loop's own writes: they need no new turn */
    sn->turn_fp = sl_store_fingerprint(sl_store_node_store(sn->store));
    uint64_t end_ns = sl_plat_now_ns();
    sn->turn_cost_ns = end_ns > now_ns ? end_ns - now_ns : 0;
    sn->turns++;
    sn->turn_ns_total += sn->turn_cost_ns;
    /* (at least a gap ahead: a wait that ends now must not spin the loop) */
    sn->due_ns = UINT64_MAX;
    if (due != UINT64_MAX) {
        uint64_t in_ns = due > now ? (due - now) * 1000000ull : 0;
        sn->due_ns = now_ns + (in_ns > turn_gap_ns(sn) ? in_ns : turn_gap_ns(sn));
    }
    return next_turn_ns(sn);
}

/* stats.study: what the loop did, for benchmarks (per trial: divide by
 * the trials). */
static size_t study_stats(void *ctx, sl_node_counter_t *out, size_t cap) {
    sl_study_node_t *sn = ctx;
    uint64_t applied = 0, rescans = 0;
    for (int i = 0; i < MAX_STUDIES; i++) {
        applied += sn->specs[i].live.applied;
        rescans += sn->specs[i].live.rescans;
    }
    sl_node_counter_t c[] = {{"turns", sn->turns},
                             {"turn_us", sn->turn_ns_total / 1000},
                             {"writes", sn->writes},
                             {"claims", sn->claims},
                             {"claims_lost", sn->claims_lost},
                             {"view_errors", sn->view_errors},
                             {"jobs_ended", sn->jobs_ended},
                             {"job_ms", sn->job_ms_total},
                             {"keys_applied", applied},
                             {"rescans", rescans},
                             /* 1 once joined and caught up (see may_claim) */
                             {"ready", may_claim(sn, NULL, sl_study_node_wall_ms())},
                             {"ready_after_join_ms", sn->ready_ms ? sn->ready_ms - sn->joined_ms : 0}};
    size_t n = sizeof c / sizeof c[0] < cap ? sizeof c / sizeof c[0] : cap;
    memcpy(out, c, n * sizeof *c);
    return n;
}

/* A member joined, died or left: claims and leaders may move at once. */
static void on_member(void *ctx, sl_node_t *node, const sl_swim_event_t *ev) {
    (void)ev;
    ((sl_study_node_t *)ctx)->poked = true;
    sl_node_tick_soon(node, tick, ctx);
}

/* A worker wrote to the wake pipe: it has an event, or it ended. */
static void on_wake(void *ctx, sl_node_t *node) {
    sl_study_node_t *sn = ctx;
    sl_plat_wake_drain(sn->wake[0]);
    sl_node_tick_soon(node, tick, sn);
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
        put_held_report(sn, j);
        const sl_study_spec_t *spec = sl_study_node_spec(sn, j->study);
        sl_wev_t *ev;
        while ((ev = sl_study_worker_pop(j->w))) {
            if (ev->kind == SL_WEV_EPOCH && spec) {
                char key[SL_STUDY_KEY_MAX], line[SL_REPORT_LINE_MAX];
                size_t len;
                j->last_epoch = ev->report.epoch;
                if (sl_study_key_build(key, sizeof key, SL_STUDY_KEY_METRIC, j->study, j->trial,
                                       (uint64_t)ev->report.epoch, NULL) == SL_OK &&
                    sl_report_encode(&ev->report, line, sizeof line, &len) == SL_OK)
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
    char why[320];
    if ((err = sl_study_user_resolve(sn->cfg.trial_user, &sn->trial_user, why, sizeof why))) {
        sl_log(SL_LOG_ERR, "STUDY-USER", "%s", why);
        sl_free(sn);
        return err;
    }
    sn->cfg.trial_user = NULL; /* (resolved: the caller's string is not kept) */
    if (!sn->cfg.tick_ms)
        sn->cfg.tick_ms = 250;
    sn->started_ms = sl_study_node_wall_ms();
    /* the live view's check on every turn: debug builds, or SL_STUDY_CHECK
       (tests/cluster/study_test.sh); SL_STUDY_PLANT=lost-change drops a
       change in 50 from the view, for the test that shows the check
       catching it */
#ifndef NDEBUG
    sn->check_view = true;
#endif
    if (sl_plat_getenv("SL_STUDY_CHECK"))
        sn->check_view = true;
    const char *plant = sl_plat_getenv("SL_STUDY_PLANT");
    sn->plant_lost_change = plant && !strcmp(plant, "lost-change");
    const char *dd = sl_node_data_dir(node);
    snprintf(sn->root, sizeof sn->root, "%s/studies", dd ? dd : "./starling-studies");
    if ((err = sl_plat_mkdirs(sn->root, 0700)) != SL_OK)
        goto fail;
    if (dd && (err = sl_study_user_reach(&sn->trial_user, dd, why, sizeof why)) == SL_OK)
        err = sl_study_user_reach(&sn->trial_user, sn->root, why, sizeof why);
    if (err != SL_OK) {
        sl_log(SL_LOG_ERR, "STUDY-USER", "%s", why);
        goto fail;
    }
    if ((err = sl_study_data_new(&sn->data)) != SL_OK)
        goto fail;
    if ((err = sl_plat_wake_open(sn->wake)) != SL_OK)
        goto fail;
    if ((err = sl_node_watch_fd(node, sn->wake[0], on_wake, sn)) != SL_OK)
        goto fail;
    if ((err = sl_study_ctl_register(sn)) != SL_OK)
        goto fail;
    if ((err = sl_node_tick_register(node, tick, sn)) != SL_OK)
        goto fail;
    if ((err = sl_node_stop_listen(node, on_stop, sn)) != SL_OK)
        goto fail;
    if ((err = sl_node_member_listen(node, on_member, sn)) != SL_OK)
        goto fail;
    if ((err = sl_store_node_listen(store, on_store_change, sn)) != SL_OK)
        goto fail;
    if ((err = sl_node_stats_register(node, "study", study_stats, sn)) != SL_OK)
        goto fail;
    sn->ids_stale = true;
    *out = sn;
    return SL_OK;
fail:
    sl_study_data_destroy(&sn->data);
    sl_plat_wake_close(sn->wake);
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
        sl_plat_sleep_ms(10); /* waiting for threads to end at exit */
    }
    reap_orphans(sn);
    for (int i = 0; i < sn->orphan_count; i++)
        sl_study_worker_abandon(&sn->orphans[i]);
    for (int i = 0; i < MAX_JOBS; i++)
        sl_free(sn->jobs[i].launch);
    for (int i = 0; i < MAX_STUDIES; i++) {
        sl_study_live_fini(&sn->specs[i].live);
        sl_free(sn->specs[i].free_dirs);
    }
    sl_study_ckpt_fini(sn);
    sl_study_members_fini(&sn->members);
    sl_turn_out_fini(&sn->turn_out);
    if (sn->orphan_count == 0) { /* abandoned threads may still read the data sets */
        sl_study_data_destroy(&sn->data); /* and write to the wake pipe */
        sl_plat_wake_close(sn->wake);
    }
    sl_free(sn);
    *snp = NULL;
}
