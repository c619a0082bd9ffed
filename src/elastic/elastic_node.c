/* Elastic jobs in the daemon: the rendezvous core driven by the store and
 * membership, the trainer driven by the core (docs/elastic.md, "The
 * runtime"). The I/O edge of the elastic subsystem: every decision is the
 * core's (src/elastic/rendezvous.c); this file reads its inputs from the
 * replica and SWIM, writes its records, and starts and stops the trainer
 * or the command. The top of the node's files (docs/house.md): it calls
 * elastic_ctl.c, command_ckpt.c and elastic_jobs.c (the jobs followed,
 * their records and writes), and none of them calls it. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elastic/elastic_node_internal.h"
#include "platform/process.h"
#include "starling/platform.h"
#include "starling/swim.h"

#define TICK_MS 50          /* a turn at least this often while a job runs */
#define IDLE_TICK_MS 250    /* and this often otherwise */
#define CATCHUP_MS 1000     /* a peer that heard no digest acts on its replica after this */

static uint64_t wall_ms(void) { return sl_plat_wall_ms(); }

static uint64_t tick(void *ctx, sl_node_t *node, uint64_t now_ns);

/* The store's listener: a job key that changed goes into its job's
 * records at once (the rendezvous reads them at the next turn, soon). */
static void on_store_change(void *ctx, const uint8_t *key, size_t key_len,
                            const sl_store_entry_t *e) {
    sl_elastic_node_t *en = ctx;
    if (!key) {
        en->rescan = true;
        sl_node_tick_soon(en->node, tick, en);
        return;
    }
    if (key_len < 4 + SL_ELASTIC_JOB_ID_LEN + 2 || memcmp(key, "job/", 4) || !e ||
        e->type != SL_CRDT_LWW)
        return;
    en_job_t *j = sl_en_find(en, (const char *)key + 4, SL_ELASTIC_JOB_ID_LEN);
    if (!j) {
        if (key_len == 4 + SL_ELASTIC_JOB_ID_LEN + 5 &&
            !memcmp(key + 4 + SL_ELASTIC_JOB_ID_LEN, "/spec", 5))
            sl_en_take_spec(en, key, key_len, e->val, e->val_len);
        else
            return; /* read whole once its spec comes */
    } else {
        sl_en_take_entry(en, j, key, key_len, e->val, e->val_len);
    }
    sl_node_tick_soon(en->node, tick, en);
}

/* ---- the membership view ---- */

/* This peer's view for the core: every member SWIM knows, alive (or
 * suspect) or not, and this peer itself; rebuilt when membership changed. */
static sl_err members_view(sl_elastic_node_t *en) {
    if (!en->members_stale)
        return SL_OK;
    const sl_swim_t *sw = sl_node_swim(en->node);
    size_t n = sl_swim_member_count(sw) + 1;
    if (n > en->member_cap) {
        sl_round_member_t *m = sl_realloc(en->members, n * sizeof *m);
        if (m)
            en->members = m;
        char(*names)[SL_ELASTIC_ID_MAX + 1] = sl_realloc(en->member_names, n * sizeof *names);
        if (names)
            en->member_names = names;
        if (!m || !names)
            return SL_ENOMEM;
        en->member_cap = n;
    }
    size_t k = 0;
    bool self_seen = false;
    for (size_t i = 0; i + 1 < n; i++) {
        sl_swim_member_t m;
        if (sl_swim_member_at(sw, i, &m) != SL_OK || m.name.len > SL_ELASTIC_ID_MAX)
            continue;
        memcpy(en->member_names[k], m.name.ptr, m.name.len);
        en->member_names[k][m.name.len] = 0;
        bool me = !strcmp(en->member_names[k], sl_en_self(en));
        self_seen |= me;
        en->members[k] = (sl_round_member_t){en->member_names[k],
                                              me || m.state == SL_STATE_ALIVE ||
                                                  m.state == SL_STATE_SUSPECT,
                                              1};
        k++;
    }
    if (!self_seen) {
        snprintf(en->member_names[k], sizeof en->member_names[k], "%s", sl_en_self(en));
        en->members[k] = (sl_round_member_t){en->member_names[k], true, 1};
        k++;
    }
    en->member_count = k;
    en->members_stale = false;
    return SL_OK;
}

/* The replica caught up with another peer's since this peer started (or
 * it waited CATCHUP_MS after joining, or alone). */
static bool synced(const sl_elastic_node_t *en, uint64_t now) {
    if (sl_store_caught_up_ms(sl_store_node_store(en->store)) >= en->started_ms)
        return true;
    if (en->joined_ms)
        return now >= en->joined_ms + CATCHUP_MS;
    return now >= en->started_ms + 3 * CATCHUP_MS; /* alone */
}

/* ---- worlds ---- */

/* The ring endpoint member `peer` published (peer/NAME/ring). */
static bool ring_of(sl_elastic_node_t *en, const char *peer, char out[SL_ELASTIC_EP_MAX]) {
    char key[SL_ELASTIC_ID_MAX + 16];
    int kl = snprintf(key, sizeof key, "peer/%s/ring", peer);
    const uint8_t *v;
    size_t len;
    if (sl_store_get(sl_store_node_store(en->store), key, (size_t)kl, &v, &len) != SL_OK ||
        len == 0 || len >= SL_ELASTIC_EP_MAX || memcmp(v, "tcp://", 6) != 0)
        return false;
    memcpy(out, v, len);
    out[len] = 0;
    return true;
}

static void command_begin(sl_elastic_node_t *en, en_job_t *j);

/* Enters j->next now: the trainer has left its last world and the
 * checkpoint to restore, if any, is on disk. */
static void enter(sl_elastic_node_t *en, en_job_t *j) {
    j->pending = false;
    j->world = j->next;
    j->in_world = true;
    en->worlds_started++;
    if (j->spec.trainer == SL_ELASTIC_TRAINER_COMMAND) {
        command_begin(en, j);
        return;
    }
    sl_err err = sl_elastic_trainer_enter(j->trainer, &j->world);
    if (err != SL_OK) {
        sl_en_log(en, j, "cannot enter round %" PRIu64 ": %s", j->world.world.round,
                  sl_strerror(err));
        j->in_world = false;
        j->broken = j->world.world;
    }
}

static void on_ckpt_copied(void *ctx, sl_err err, const uint8_t hash[SL_BLAKE2B_LEN]);
static void cmd_ckpt_restored(sl_elastic_node_t *en, en_job_t *j, bool ok);

typedef struct {
    sl_elastic_node_t *en;
    char id[SL_ELASTIC_JOB_ID_LEN + 1];
    uint64_t round;
} fetch_ctx_t;

/* Enters j->next when it can: after the last world's LEFT, and with the
 * checkpoint to restore copied here. */
static void try_enter(sl_elastic_node_t *en, en_job_t *j) {
    if (!j->pending || j->fetching)
        return;
    if (j->spec.trainer == SL_ELASTIC_TRAINER_BUILTIN && sl_elastic_trainer_in_world(j->trainer))
        return; /* its LEFT comes at the step boundary */
    if (j->spec.trainer == SL_ELASTIC_TRAINER_COMMAND && j->command)
        return; /* the last world's process is still stopping */
    if (j->spec.trainer == SL_ELASTIC_TRAINER_COMMAND &&
        sl_en_cmd_ckpt_restore(en, j, cmd_ckpt_restored))
        return; /* the newest checkpoint is copied here first */
    sl_elastic_enter_t *w = &j->next;
    if (j->spec.trainer == SL_ELASTIC_TRAINER_BUILTIN && w->source < 0 && w->start_step > 0 &&
        !w->restore[0]) {
        if (!j->has_ckpt || j->ckpt_step != w->start_step) {
            sl_en_log(en, j, "round %" PRIu64 " starts from the checkpoint of step %" PRIu64
                      ", which this replica does not name (it names %" PRIu64 "): leaving it",
                      w->world.round, w->start_step, j->has_ckpt ? j->ckpt_step : 0);
            j->pending = false;
            j->broken = w->world;
            return;
        }
        snprintf(w->restore, sizeof w->restore, "%.500s/ckpt-%" PRIu64 ".slck", j->dir,
                 w->start_step);
        if (!sl_plat_can_read(w->restore)) {
            fetch_ctx_t *f = sl_calloc(1, sizeof *f);
            if (!f)
                return;
            f->en = en;
            memcpy(f->id, j->id, sizeof f->id);
            f->round = w->world.round;
            j->fetching = true;
            sl_err err = sl_blob_node_get_file(en->cfg.blobs, j->ckpt_blob, w->restore,
                                               on_ckpt_copied, f);
            if (err != SL_OK) {
                sl_free(f);
                j->fetching = false;
                sl_en_log(en, j, "cannot copy the checkpoint of step %" PRIu64 ": %s",
                          w->start_step, sl_strerror(err));
                j->pending = false;
                j->broken = w->world;
            }
            return;
        }
    }
    enter(en, j);
}

/* A command job's checkpoint directory is restored (ok) or cannot be. */
static void cmd_ckpt_restored(sl_elastic_node_t *en, en_job_t *j, bool ok) {
    j->fetching = false;
    if (!ok) {
        j->pending = false;
        j->broken = j->next.world;
    } else {
        try_enter(en, j);
    }
    sl_node_tick_soon(en->node, tick, en);
}

static void on_ckpt_copied(void *ctx, sl_err err, const uint8_t hash[SL_BLAKE2B_LEN]) {
    (void)hash;
    fetch_ctx_t *f = ctx;
    sl_elastic_node_t *en = f->en;
    en_job_t *j = sl_en_find(en, f->id, SL_ELASTIC_JOB_ID_LEN);
    if (j && j->fetching) {
        j->fetching = false;
        if (err != SL_OK) {
            sl_en_log(en, j, "the checkpoint's copy failed: %s", sl_strerror(err));
            j->pending = false;
            j->broken = j->next.world;
        } else if (j->pending && j->next.world.round == f->round) {
            try_enter(en, j);
        }
    }
    sl_free(f);
    sl_node_tick_soon(en->node, tick, en);
}

/* The core's START: the world's endpoints, source and checkpoint. */
static void start_world(sl_elastic_node_t *en, en_job_t *j, const sl_elastic_view_t *v,
                        const sl_elastic_action_t *a) {
    sl_elastic_enter_t *w = &j->next;
    memset(w, 0, sizeof *w);
    w->world = a->world.id;
    w->rank = a->rank;
    w->size = a->world.count;
    w->start_step = a->start_step;
    w->source = a->source;
    for (uint32_t i = 0; i < a->world.count; i++)
        if (!ring_of(en, a->world.members[i], w->endpoints[i])) {
            sl_en_log(en, j, "round %" PRIu64 ": no ring endpoint of %s in this replica; "
                      "leaving the world", a->world.id.round, a->world.members[i]);
            j->broken = a->world.id;
            return;
        }
    if (a->source >= 0)
        for (size_t i = 0; i < v->ack_count; i++)
            if (v->acks[i]->world.round == a->world.id.round &&
                !strcmp(v->acks[i]->peer, a->world.members[a->source]))
                w->source_world = v->acks[i]->state_world;
    j->pending = true;
    uint64_t now = wall_ms();
    sl_log(SL_LOG_INFO, "ELASTIC-START",
           "job=%s round=%" PRIu64 " rank=%u size=%u start_step=%" PRIu64
           " source=%d wall_ms=%" PRIu64,
           j->id, w->world.round, w->rank, w->size, w->start_step, w->source, now);
    sl_en_log(en, j, "round %" PRIu64 " (leader %s) starts: rank %u of %u, from step %" PRIu64
              " (%s)", w->world.round, w->world.leader, w->rank, w->size, w->start_step,
              w->source >= 0   ? "the state of a member"
              : w->start_step ? "the checkpoint"
                              : "the seed");
    if (w->rank == 0) { /* the world's record of itself, for status and plots */
        cJSON *o = cJSON_CreateObject(), *m = cJSON_AddArrayToObject(o, "world");
        for (uint32_t i = 0; i < a->world.count; i++)
            cJSON_AddItemToArray(m, cJSON_CreateString(a->world.members[i]));
        cJSON_AddStringToObject(o, "leader", w->world.leader);
        cJSON_AddNumberToObject(o, "start_step", (double)w->start_step);
        cJSON_AddNumberToObject(o, "source", w->source);
        cJSON_AddNumberToObject(o, "started_ms", (double)now);
        char *text = cJSON_PrintUnformatted(o);
        sl_elastic_key_t k = {.kind = SL_ELASTIC_KEY_START, .round = w->world.round};
        if (text)
            sl_en_put(en, j, &k, text, strlen(text));
        cJSON_free(text);
        cJSON_Delete(o);
    }
    try_enter(en, j);
}

/* The core's STOP: the trainer leaves at its step boundary (a command is
 * stopped); the next START waits for that. */
static void stop_world(sl_elastic_node_t *en, en_job_t *j, const char *reason) {
    sl_en_log(en, j, "round %" PRIu64 " ends: %s", j->world.world.round, reason);
    j->pending = false;
    if (j->trainer)
        sl_elastic_trainer_leave(j->trainer);
    if (j->command)
        sl_elastic_command_stop(j->command);
}

/* ---- the trainer's events ---- */

static void put_json(sl_elastic_node_t *en, en_job_t *j, sl_elastic_key_kind kind,
                     uint64_t num, cJSON *o) {
    char *text = cJSON_PrintUnformatted(o);
    sl_elastic_key_t k = {.kind = kind, .round = num};
    if (text)
        sl_en_put(en, j, &k, text, strlen(text));
    cJSON_free(text);
    cJSON_Delete(o);
}

static void on_step(sl_elastic_node_t *en, en_job_t *j, const sl_etev_t *ev) {
    uint64_t now = wall_ms();
    j->step = ev->step;
    if (ev->first)
        sl_log(SL_LOG_INFO, "ELASTIC-STEPPING",
               "job=%s round=%" PRIu64 " step=%" PRIu64 " wall_ms=%" PRIu64, j->id,
               ev->world.round, ev->step, now);
    if (!j->in_world || j->world.rank != 0)
        return;
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "step", (double)ev->step);
    if (isfinite(ev->loss))
        cJSON_AddNumberToObject(c, "loss", ev->loss);
    cJSON_AddNumberToObject(c, "world", j->world.size);
    cJSON_AddNumberToObject(c, "round", (double)ev->world.round);
    cJSON_AddNumberToObject(c, "wall_ms", (double)now);
    cJSON *p = cJSON_Duplicate(c, true);
    cJSON_AddNumberToObject(p, "epoch", ev->epoch);
    if (ev->step > 0) /* (a command's world before its script reports: no point yet) */
        put_json(en, j, SL_ELASTIC_KEY_CURVE, ev->step, c);
    else
        cJSON_Delete(c);
    if (ev->first || now >= j->prog_ms + EN_PROG_GAP_MS) {
        j->prog_ms = now;
        put_json(en, j, SL_ELASTIC_KEY_PROG, 0, p);
    } else {
        cJSON_Delete(p);
    }
}

/* Whether the replica holds job j's key of this kind (and number). */
static bool has_record(sl_elastic_node_t *en, const en_job_t *j, sl_elastic_key_kind kind,
                       uint64_t num) {
    sl_elastic_key_t k = {.kind = kind, .round = num};
    memcpy(k.job, j->id, sizeof k.job);
    char text[SL_ELASTIC_KEY_MAX];
    size_t kl;
    const uint8_t *v;
    size_t len;
    return sl_elastic_key_build(&k, text, sizeof text, &kl) == SL_OK &&
           sl_store_get(sl_store_node_store(en->store), text, kl, &v, &len) == SL_OK;
}

static void on_epoch(sl_elastic_node_t *en, en_job_t *j, const sl_etev_t *ev) {
    const sl_nn_epoch_t *m = &ev->metrics;
    /* an epoch evaluated again by a world that starts at its end (the
       trainer's "a world that starts at an epoch's end") keeps the first
       record: the same state, and that one has the epoch's train loss */
    if (!isfinite(m->train_loss) && has_record(en, j, SL_ELASTIC_KEY_EPOCH, ev->epoch))
        return;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "epoch", ev->epoch);
    cJSON_AddNumberToObject(o, "step", (double)ev->step);
    const struct {
        const char *name;
        double v;
        bool has;
    } f[] = {{"train_loss", m->train_loss, true}, {"val_loss", m->val_loss, m->has_val},
             {"val_acc", m->val_acc, m->has_val},  {"test_loss", m->test_loss, m->has_test},
             {"test_acc", m->test_acc, m->has_test}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].has && isfinite(f[i].v)) /* (a command job reports what it has) */
            cJSON_AddNumberToObject(o, f[i].name, f[i].v);
    cJSON_AddNumberToObject(o, "world", j->world.size);
    cJSON_AddNumberToObject(o, "wall_ms", (double)wall_ms());
    sl_en_log(en, j, "epoch %u done at step %" PRIu64 "%s", ev->epoch, ev->step,
              isfinite(m->train_loss) ? "" : " (no train loss reported)");
    put_json(en, j, SL_ELASTIC_KEY_EPOCH, ev->epoch, o);
}

/* A checkpoint file of rank 0: stored as a blob, named by job/J/ckpt. */
static void on_checkpoint(sl_elastic_node_t *en, en_job_t *j, const sl_etev_t *ev) {
    uint8_t h[SL_BLAKE2B_LEN];
    sl_err err = sl_blob_node_put_file(en->cfg.blobs, ev->path, h);
    if (err != SL_OK) {
        sl_en_log(en, j, "cannot store the checkpoint of step %" PRIu64 ": %s", ev->step,
                  sl_strerror(err));
        return;
    }
    char hex[2 * SL_BLAKE2B_LEN + 1];
    sl_hex(h, sizeof h, hex);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "step", (double)ev->step);
    cJSON_AddStringToObject(o, "blob", hex);
    cJSON_AddNumberToObject(o, "round", (double)ev->world.round);
    cJSON_AddNumberToObject(o, "wall_ms", (double)wall_ms());
    put_json(en, j, SL_ELASTIC_KEY_CKPT, 0, o);
    sl_en_log(en, j, "checkpoint of step %" PRIu64 " stored (blob %.16s)", ev->step, hex);
}

static void on_done(sl_elastic_node_t *en, en_job_t *j, const sl_etev_t *ev) {
    sl_en_log(en, j, "every epoch is trained (step %" PRIu64 ")", ev->step);
    if (!ev->path[0])
        return; /* rank 0 writes the job's end */
    uint8_t h[SL_BLAKE2B_LEN];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "step", (double)ev->step);
    cJSON_AddNumberToObject(o, "round", (double)ev->world.round);
    cJSON_AddNumberToObject(o, "wall_ms", (double)wall_ms());
    if (sl_blob_node_put_file(en->cfg.blobs, ev->path, h) == SL_OK) {
        char hex[2 * SL_BLAKE2B_LEN + 1];
        sl_hex(h, sizeof h, hex);
        cJSON_AddStringToObject(o, "model", hex);
    }
    put_json(en, j, SL_ELASTIC_KEY_DONE, 0, o);
}

static void on_failed(sl_elastic_node_t *en, en_job_t *j, const char *why) {
    sl_en_log(en, j, "cannot train this job: %s", why);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "why", why);
    cJSON_AddNumberToObject(o, "wall_ms", (double)wall_ms());
    char *text = cJSON_PrintUnformatted(o);
    sl_elastic_key_t k = {.kind = SL_ELASTIC_KEY_FAIL};
    snprintf(k.peer, sizeof k.peer, "%s", sl_en_self(en));
    if (text)
        sl_en_put(en, j, &k, text, strlen(text));
    cJSON_free(text);
    cJSON_Delete(o);
    j->finished = true;
}

static void drain_trainer(sl_elastic_node_t *en, en_job_t *j) {
    sl_etev_t *ev;
    while (j->trainer && (ev = sl_elastic_trainer_pop(j->trainer))) {
        switch (ev->kind) {
        case SL_ETEV_STEP: on_step(en, j, ev); break;
        case SL_ETEV_EPOCH: on_epoch(en, j, ev); break;
        case SL_ETEV_CHECKPOINT: on_checkpoint(en, j, ev); break;
        case SL_ETEV_LOG: sl_en_log(en, j, "%s", ev->text); break;
        case SL_ETEV_LEFT:
            en->worlds_left++;
            sl_log(SL_LOG_INFO, "ELASTIC-LEFT",
                   "job=%s round=%" PRIu64 " step=%" PRIu64 " wall_ms=%" PRIu64 " why=%s",
                   j->id, ev->world.round, ev->step, wall_ms(),
                   ev->err ? ev->text : "asked to");
            if (ev->err != SL_OK) {
                en->broken_worlds++;
                j->broken = ev->world;
                sl_en_log(en, j, "round %" PRIu64 " broke at step %" PRIu64 ": %s",
                          ev->world.round, ev->step, ev->text);
            }
            if (sl_elastic_ref_eq(&ev->world, &j->world.world))
                j->in_world = false;
            break;
        case SL_ETEV_DONE: on_done(en, j, ev); j->in_world = false; break;
        case SL_ETEV_FAILED: on_failed(en, j, ev->text); break;
        }
        sl_free(ev);
    }
    try_enter(en, j);
}

/* ---- command jobs ---- */

static void command_begin(sl_elastic_node_t *en, en_job_t *j) {
    sl_elastic_command_cfg_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.command, sizeof c.command, "%s", j->spec.command);
    c.stop_grace_s = j->spec.stop_grace_s;
    memcpy(c.job_id, j->id, sizeof c.job_id);
    c.round = j->world.world.round;
    c.rank = j->world.rank;
    c.world_size = j->world.size;
    c.restart_count = j->restarts++;
    /* MASTER_ADDR:MASTER_PORT: rank 0's ring endpoint (tcp://HOST:PORT),
       which the command job does not use otherwise */
    const char *ep = j->world.endpoints[0] + 6, *colon = strrchr(ep, ':');
    snprintf(c.master_addr, sizeof c.master_addr, "%.*s", colon ? (int)(colon - ep) : 0, ep);
    c.master_port = colon ? (uint16_t)atoi(colon + 1) : 0;
    sl_en_cmd_ckpt_dir(j, c.checkpoint_dir, sizeof c.checkpoint_dir);
    sl_plat_mkdirs(c.checkpoint_dir, 0700);
    /* (the peer's working directory, as for study commands: a command
       names its script as the user wrote it) */
    c.wake_fd = en->wake[1];
    sl_err err = sl_elastic_command_start(&c, &j->command);
    if (err != SL_OK) {
        sl_en_log(en, j, "cannot start the command: %s", sl_strerror(err));
        j->in_world = false;
        j->broken = j->world.world;
        return;
    }
    /* the world runs (ELASTIC-STEPPING; rank 0: its progress, until the
       script reports its own) */
    sl_etev_t ev = {.kind = SL_ETEV_STEP, .world = j->world.world, .first = true,
                    .step = j->step, .loss = NAN};
    on_step(en, j, &ev);
}

/* A line of a command's output: a JSON object with "step" (and "loss")
 * is progress, one with "epoch" an epoch's metrics (as starling.report
 * writes them); rank 0's go into the job's records. */
static void command_report(sl_elastic_node_t *en, en_job_t *j, const char *line) {
    if (j->world.rank != 0 || line[0] != '{')
        return;
    cJSON *o = cJSON_Parse(line);
    const cJSON *step = cJSON_GetObjectItem(o, "step"), *epoch = cJSON_GetObjectItem(o, "epoch");
    sl_etev_t ev = {.world = j->world.world};
    if (cJSON_IsNumber(step) && step->valuedouble >= 0 && step->valuedouble < 1e15) {
        ev.kind = SL_ETEV_STEP;
        ev.step = (uint64_t)step->valuedouble;
        const cJSON *loss = cJSON_GetObjectItem(o, "loss");
        ev.loss = cJSON_IsNumber(loss) ? loss->valuedouble : NAN;
        if (cJSON_IsNumber(epoch))
            ev.epoch = (uint32_t)epoch->valuedouble;
        on_step(en, j, &ev);
    } else if (cJSON_IsNumber(epoch) && epoch->valuedouble >= 1 && epoch->valuedouble < 1e9) {
        const char *names[] = {"train_loss", "val_loss", "val_acc", "test_loss", "test_acc"};
        double v[5];
        for (int i = 0; i < 5; i++) {
            const cJSON *x = cJSON_GetObjectItem(o, names[i]);
            v[i] = cJSON_IsNumber(x) ? x->valuedouble : NAN;
        }
        ev.kind = SL_ETEV_EPOCH;
        ev.epoch = (uint32_t)epoch->valuedouble;
        ev.step = j->step; /* the last step the script reported */
        ev.metrics.train_loss = v[0];
        ev.metrics.has_val = isfinite(v[1]) || isfinite(v[2]);
        ev.metrics.val_loss = v[1];
        ev.metrics.val_acc = v[2];
        ev.metrics.has_test = isfinite(v[3]) || isfinite(v[4]);
        ev.metrics.test_loss = v[3];
        ev.metrics.test_acc = v[4];
        on_epoch(en, j, &ev);
    }
    cJSON_Delete(o);
}

static void drain_command(sl_elastic_node_t *en, en_job_t *j) {
    sl_ecev_t *ev;
    bool ended = false;
    while (j->command && (ev = sl_elastic_command_pop(j->command))) {
        if (ev->kind == SL_ECEV_LOG) {
            sl_en_log(en, j, "| %s", ev->text);
            command_report(en, j, ev->text);
        } else {
            ended = true;
            sl_en_log(en, j, "the command of round %" PRIu64 " ended: %s",
                      j->world.world.round, ev->text);
            if (!ev->stopped && ev->status == 0 && j->world.rank == 0) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddNumberToObject(o, "round", (double)j->world.world.round);
                cJSON_AddNumberToObject(o, "wall_ms", (double)wall_ms());
                put_json(en, j, SL_ELASTIC_KEY_DONE, 0, o);
            } else if (!ev->stopped) {
                j->broken = j->world.world; /* the world goes on without this run */
            }
        }
        sl_free(ev);
    }
    if (ended) {
        sl_elastic_command_destroy(&j->command);
        j->in_world = false;
    }
    try_enter(en, j);
}

/* ---- one turn of a job ---- */


static void finish(sl_elastic_node_t *en, en_job_t *j, const char *why) {
    if (j->finished)
        return;
    j->finished = true;
    sl_en_log(en, j, "%s", why);
    if (j->trainer)
        sl_elastic_trainer_leave(j->trainer);
    if (j->command)
        sl_elastic_command_stop(j->command);
}

static void write_action(sl_elastic_node_t *en, en_job_t *j, const sl_elastic_action_t *a) {
    uint8_t buf[SL_ELASTIC_VALUE_MAX];
    size_t n = 0;
    sl_elastic_key_t k = {0};
    sl_err err;
    switch (a->kind) {
    case SL_ELASTIC_WRITE_VOL:
        k.kind = SL_ELASTIC_KEY_VOL;
        snprintf(k.peer, sizeof k.peer, "%s", a->vol.peer);
        err = sl_elastic_vol_encode(&a->vol, buf, sizeof buf, &n);
        break;
    case SL_ELASTIC_WRITE_WORLD:
        k.kind = SL_ELASTIC_KEY_WORLD;
        k.round = a->world.id.round;
        snprintf(k.peer, sizeof k.peer, "%s", a->world.id.leader);
        err = sl_elastic_world_encode(&a->world, j->spec.max_nodes, buf, sizeof buf, &n);
        break;
    default:
        k.kind = SL_ELASTIC_KEY_ACK;
        k.round = a->ack.world.round;
        snprintf(k.peer, sizeof k.peer, "%s", a->ack.peer);
        err = sl_elastic_ack_encode(&a->ack, buf, sizeof buf, &n);
        break;
    }
    if (err == SL_OK)
        err = sl_en_put(en, j, &k, buf, n);
    if (err != SL_OK) {
        sl_log(SL_LOG_ERR, "ELASTIC", "job %s: cannot write the rendezvous's record: %s", j->id,
               sl_strerror(err));
        return;
    }
    /* in the view before the next turn, whether or not the listener told it */
    char text[SL_ELASTIC_KEY_MAX];
    size_t kl;
    memcpy(k.job, j->id, sizeof k.job);
    if (sl_elastic_key_build(&k, text, sizeof text, &kl) == SL_OK)
        sl_en_take_entry(en, j, (const uint8_t *)text, kl, buf, n);
}

/* Whether this peer is in (or joining) one of job j's worlds. */
static bool engaged(const en_job_t *j) {
    sl_elastic_phase p = j->core ? sl_elastic_phase_of(j->core) : SL_ELASTIC_IDLE;
    return !j->finished && (p == SL_ELASTIC_WAITING || p == SL_ELASTIC_TRAINING ||
                            j->in_world || j->pending || j->command);
}

static void job_turn(sl_elastic_node_t *en, en_job_t *j, uint64_t now, bool held) {
    if (j->trainer)
        drain_trainer(en, j);
    if (j->command) {
        drain_command(en, j);
        sl_en_cmd_ckpt_scan(en, j, now);
    }
    if (j->finished)
        return;
    if (has_record(en, j, SL_ELASTIC_KEY_DONE, 0)) {
        finish(en, j, "the job is done");
        return;
    }
    /* A peer trains in one job's world at a time (its cores, its GPU and
       its ring port are one): another job does not hear from it, not even
       a volunteer record, until that world is over. */
    if (held && !engaged(j))
        return;
    if (j->spec.trainer == SL_ELASTIC_TRAINER_BUILTIN && !j->trainer) {
        sl_elastic_trainer_cfg_t tc;
        memset(&tc, 0, sizeof tc);
        tc.job = j->spec;
        memcpy(tc.job_id, j->id, sizeof tc.job_id);
        tc.threads = en->cfg.threads;
        tc.device = en->cfg.device;
        tc.has_key = en->has_key;
        tc.key = en->key;
        snprintf(tc.dir, sizeof tc.dir, "%.500s", j->dir);
        tc.wake_fd = en->wake[1];
        sl_err err = sl_elastic_trainer_new(&tc, &j->trainer);
        if (err != SL_OK) {
            on_failed(en, j, sl_strerror(err));
            return;
        }
    }
    if (j->spec.trainer == SL_ELASTIC_TRAINER_COMMAND && !sl_node_commands_allowed(en->node)) {
        on_failed(en, j, "command jobs are refused in an open cluster (start the peers "
                         "with --key, or --allow-commands)");
        return;
    }
    /* After a STOP the core waits for the trainer to leave: the step in
       progress may still be applied (every rank finishes it), and the
       next ack must name the step the state is really at. */
    if (sl_elastic_phase_of(j->core) == SL_ELASTIC_IDLE && j->trainer &&
        sl_elastic_trainer_in_world(j->trainer))
        return;
    /* a record the pruned view cannot judge arrived (a partition's other
       side wrote below the anchor): read the job's records whole again
       (docs/elastic.md, "The pruned view") */
    if (sl_elastic_records_stale(j->recs)) {
        sl_log(SL_LOG_INFO, "ELASTIC-ANCHOR", "job %s: a record below the anchor arrived: "
               "reading the job's records again", j->id);
        if (sl_en_reload(en, j) != SL_OK)
            return;
    }
    sl_elastic_view_t v;
    memset(&v, 0, sizeof v);
    sl_elastic_records_view(j->recs, &v);
    v.members = en->members;
    v.member_count = en->member_count;
    v.synced = synced(en, now);
    sl_elastic_local_t local;
    memset(&local, 0, sizeof local);
    if (j->trainer)
        sl_elastic_trainer_local(j->trainer, &local);
    if (!local.has_state && j->has_ckpt)
        local.step = j->ckpt_step; /* no state in memory: the checkpoint it can restore */
    local.broken = j->broken;
    sl_elastic_out_t out;
    sl_err err = sl_elastic_step(j->core, &v, &local, (int64_t)now, &out);
    if (err != SL_OK) {
        sl_log(SL_LOG_ERR, "ELASTIC", "job %s: the rendezvous refused this view: %s", j->id,
               sl_strerror(err));
        return;
    }
    for (size_t i = 0; i < out.count; i++) {
        const sl_elastic_action_t *a = &out.actions[i];
        switch (a->kind) {
        case SL_ELASTIC_WRITE_VOL:
        case SL_ELASTIC_WRITE_WORLD:
        case SL_ELASTIC_WRITE_ACK: write_action(en, j, a); break;
        case SL_ELASTIC_START: start_world(en, j, &v, a); break;
        case SL_ELASTIC_STOP: stop_world(en, j, a->reason); break;
        }
    }
    /* the records below the newest anchor the view allows go: a turn's
       cost does not grow with the job's history */
    bool moved;
    if (sl_elastic_records_prune(j->recs, &moved) == SL_OK && moved) {
        sl_elastic_records_view(j->recs, &v);
        sl_log(SL_LOG_DEBUG, "ELASTIC-ANCHOR", "job %s: anchored at round %llu/%s", j->id,
               (unsigned long long)v.anchor.round, v.anchor.leader);
    }
    if (sl_elastic_phase_of(j->core) == SL_ELASTIC_CANCELLED)
        finish(en, j, "the job was cancelled");
}

static uint64_t tick(void *ctx, sl_node_t *node, uint64_t now_ns) {
    (void)node;
    sl_elastic_node_t *en = ctx;
    uint64_t now = wall_ms();
    en->turns++;
    if (!en->joined_ms && sl_swim_alive_count(sl_node_swim(en->node)) >= 2)
        en->joined_ms = now;
    if (!en->ring_written) {
        char key[SL_ELASTIC_ID_MAX + 16];
        int kl = snprintf(key, sizeof key, "peer/%s/ring", sl_en_self(en));
        en->ring_written = sl_store_node_put(en->store, key, (size_t)kl, en->ring,
                                             strlen(en->ring)) == SL_OK;
    }
    if (en->rescan) {
        en->rescan = false;
        sl_en_read_specs(en);
        for (int i = 0; i < EN_MAX_JOBS; i++)
            if (en->jobs[i].used)
                sl_en_reload(en, &en->jobs[i]);
    }
    bool busy = false, held = false;
    for (int i = 0; i < EN_MAX_JOBS; i++)
        held |= en->jobs[i].used && engaged(&en->jobs[i]);
    if (members_view(en) == SL_OK && !sl_plat_stop_requested())
        for (int i = 0; i < EN_MAX_JOBS; i++) {
            en_job_t *j = &en->jobs[i];
            if (!j->used)
                continue;
            job_turn(en, j, now, held && !engaged(j));
            held |= engaged(j); /* (a world it just acked holds it for the jobs after) */
            busy |= !j->finished;
        }
    if (now >= en->log_flush_ms) {
        sl_en_flush_logs(en);
        en->log_flush_ms = now + 1000;
    }
    return now_ns + (uint64_t)(busy ? TICK_MS : IDLE_TICK_MS) * 1000000ull;
}

/* ---- the node ---- */

static size_t stats(void *ctx, sl_node_counter_t *out, size_t cap) {
    sl_elastic_node_t *en = ctx;
    uint64_t jobs = 0;
    for (int i = 0; i < EN_MAX_JOBS; i++)
        jobs += en->jobs[i].used;
    sl_node_counter_t c[] = {{"jobs", jobs},
                             {"turns", en->turns},
                             {"writes", en->writes},
                             {"bad_records", en->bad_records},
                             {"worlds_started", en->worlds_started},
                             {"worlds_left", en->worlds_left},
                             {"broken_worlds", en->broken_worlds}};
    size_t n = sizeof c / sizeof c[0] < cap ? sizeof c / sizeof c[0] : cap;
    memcpy(out, c, n * sizeof *c);
    return n;
}

static void on_member(void *ctx, sl_node_t *node, const sl_swim_event_t *ev) {
    (void)ev;
    ((sl_elastic_node_t *)ctx)->members_stale = true;
    sl_node_tick_soon(node, tick, ctx);
}

static void on_wake(void *ctx, sl_node_t *node) {
    sl_elastic_node_t *en = ctx;
    sl_plat_wake_drain(en->wake[0]);
    sl_node_tick_soon(node, tick, en);
}

/* SIGTERM: the trainers leave their worlds (the others see this peer's
 * connections close and go on without it). */
static void on_stop(void *ctx, sl_node_t *node) {
    (void)node;
    sl_elastic_node_t *en = ctx;
    for (int i = 0; i < EN_MAX_JOBS; i++) {
        en_job_t *j = &en->jobs[i];
        if (j->used && j->trainer)
            sl_elastic_trainer_leave(j->trainer);
        if (j->used && j->command)
            sl_elastic_command_stop(j->command);
    }
}

/* This peer's ring endpoint: its advertised host, the ring port. */
static sl_err ring_endpoint(sl_elastic_node_t *en) {
    const char *addr = sl_node_addr(en->node), *colon = strrchr(addr, ':');
    if (!colon || strncmp(addr, "tcp://", 6) != 0)
        return SL_EINVAL;
    unsigned port = en->cfg.ring_port ? en->cfg.ring_port : (unsigned)atoi(colon + 1) + 1;
    if (port == 0 || port > 65535)
        return SL_EINVAL;
    int n = snprintf(en->ring, sizeof en->ring, "%.*s:%u", (int)(colon - addr), addr, port);
    return n > 0 && (size_t)n < sizeof en->ring ? SL_OK : SL_ETOOBIG;
}

sl_err sl_elastic_node_attach(sl_node_t *node, sl_store_node_t *store,
                              const sl_elastic_node_config_t *cfg, sl_elastic_node_t **out) {
    if (!cfg || !cfg->blobs)
        return SL_EINVAL;
    sl_elastic_node_t *en = sl_calloc(1, sizeof *en);
    if (!en)
        return SL_ENOMEM;
    en->node = node;
    en->store = store;
    en->cfg = *cfg;
    if (cfg->key) {
        en->has_key = true;
        en->key = *cfg->key;
    }
    en->cfg.key = NULL;
    if (!en->cfg.settle_ms)
        en->cfg.settle_ms = 300;
    if (!en->cfg.ack_timeout_ms)
        en->cfg.ack_timeout_ms = 15000;
    en->started_ms = wall_ms();
    const char *dd = sl_node_data_dir(node);
    snprintf(en->root, sizeof en->root, "%.580s/jobs", dd ? dd : ".");
    sl_err err = ring_endpoint(en);
    if (err == SL_OK)
        err = sl_plat_mkdirs(en->root, 0700);
    if (err == SL_OK)
        err = sl_plat_wake_open(en->wake);
    if (err == SL_OK)
        err = sl_node_watch_fd(node, en->wake[0], on_wake, en);
    if (err == SL_OK)
        err = sl_en_ctl_register(en);
    if (err == SL_OK)
        err = sl_node_tick_register(node, tick, en);
    if (err == SL_OK)
        err = sl_node_stop_listen(node, on_stop, en);
    if (err == SL_OK)
        err = sl_node_member_listen(node, on_member, en);
    if (err == SL_OK)
        err = sl_store_node_listen(store, on_store_change, en);
    if (err == SL_OK)
        err = sl_node_stats_register(node, "elastic", stats, en);
    if (err != SL_OK) {
        sl_log(SL_LOG_ERR, "ELASTIC", "cannot attach the elastic jobs: %s", sl_strerror(err));
        sl_plat_wake_close(en->wake);
        sl_free(en);
        return err;
    }
    en->rescan = true; /* jobs already in the replica (a restart) */
    en->members_stale = true;
    sl_log(SL_LOG_INFO, "ELASTIC", "ring endpoint %s", en->ring);
    *out = en;
    return SL_OK;
}

void sl_elastic_node_destroy(sl_elastic_node_t **enp) {
    if (!enp || !*enp)
        return;
    sl_elastic_node_t *en = *enp;
    for (int i = 0; i < EN_MAX_JOBS; i++) {
        en_job_t *j = &en->jobs[i];
        if (j->used)
            sl_en_job_free(en, j);
    }
    sl_free(en->members);
    sl_free(en->member_names);
    sl_plat_wake_close(en->wake);
    sl_free(en);
    *enp = NULL;
}
