/* An elastic job's built-in trainer: one thread that trains the job's
 * model data-parallel in the worlds it is told to enter (trainer.h,
 * docs/elastic.md "The trainer"). The node's thread calls enter, leave,
 * local and pop; everything else happens on the trainer's own thread,
 * which owns the data set, the backend, the nn trainer and the ring link
 * of the current world.
 *
 * One step's all-reduce carries one vector: the summed gradients (P
 * floats), the running statistics weighted by this rank's sample count
 * (R floats), the summed loss and the right answers (2 floats). Divided
 * by the step's sample count it gives every rank the mean gradient, the
 * sample-weighted mean of the ranks' running statistics (so that ranks
 * keep the same statistics, bit for bit) and the step's mean loss and
 * accuracy. Nothing of the state changes until that all-reduce returned:
 * an interrupted step leaves the parameters as they were and puts the
 * statistics back.
 *
 * When every member can (a backend with device collectives, libnccl
 * loaded), that vector is summed over NCCL on the device instead: the
 * members agree on it over the ring when they enter (a vote, rank 0's
 * unique id, a second vote once each made its communicator), so that a
 * member that cannot, or fails, sends the whole world back to the ring. */
#include "elastic/trainer.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/why.h"
#include "elastic/ring_link.h"
#include "nn/nccl_lazy.h"
#include "platform/process.h"
#include "starling/hash.h"
#include "starling/platform.h"
#include "starling/rng.h"

#define MAX_ROWS 256       /* rows of one forward pass (the nn batch; more are chunked) */
#define STEP_EVENTS 20     /* STEP events per epoch, about */
#define DROPOUT_SALT 0x44524f504f5554ull /* "DROPOUT" */
#define NCCL_MAX_FAILS 3   /* own failures to make a communicator in a row before
                              this trainer stops offering NCCL */
#define NCCL_TIMEOUT_MS 10000 /* a communicator's creation, and one all-reduce, at most
                                 (cfg.nccl_timeout_ms, else the ring's, when set) */

struct sl_elastic_trainer {
    sl_elastic_trainer_cfg_t cfg; /* a copy (device points into `device`) */
    char device[16];              /* cfg.device's text */
    uint64_t job_hash;            /* the ring's job field */
    pthread_t thread;             /* the trainer's thread */
    pthread_mutex_t mu;           /* guards the fields down to `local` */
    pthread_cond_t cv;            /* signalled on enter and stop */
    sl_etev_t *head, *tail;       /* events, oldest first */
    bool stop;                    /* destroy asked */
    bool has_enter;               /* `enter` waits for the thread */
    sl_elastic_enter_t enter;     /* the world to enter next */
    bool in_world;                /* entered, no LEFT/DONE/FAILED yet */
    bool leave;                   /* leave asked */
    sl_ring_link_t *link;         /* the world's open link (leave aborts a call that
                                     waits on it), NULL when none */
    uint64_t die_after;           /* test: the ring dies at this send of the next step (0: no) */
    sl_elastic_trainer_state_fn on_state; /* test hook, or NULL */
    void *on_state_ctx;           /* its context */
    sl_elastic_local_t local;     /* what the trainer holds */
    /* The thread's own, below. */
    sl_elastic_ref_t world;       /* the world it trains in (events) */
    sl_nn_data_t *train, *test;   /* the data set */
    sl_nn_backend_t *be;          /* the backend */
    sl_nn_trainer_t *nn;          /* the model, optimizer state, device data */
    bool broken;                  /* the model cannot be built: FAILED on every enter */
    char broken_why[512];         /* why */
    sl_elastic_sched_t sched;     /* the step schedule */
    uint64_t steps_per_epoch;     /* of the schedule */
    uint64_t total_steps;         /* epochs * steps_per_epoch */
    uint32_t *order;              /* the shuffled order of epoch order_epoch */
    uint64_t order_epoch;         /* its epoch (UINT64_MAX: none yet) */
    size_t P, R;                  /* gradient and statistics floats */
    float *buf;                   /* a step's all-reduce vector: P + R + 2 floats */
    float *stats;                 /* the statistics before the step (R floats) */
    float *state;                 /* the state vector (transfer, test hook), or NULL */
    size_t state_count;           /* its floats */
    sl_nccl_t *nccl;              /* the world's NCCL communicator, NULL: the ring */
    int nccl_fails;               /* own failures to make one, in a row */
};

/* ---- events ---- */

static void wake(const sl_elastic_trainer_t *t) {
    if (t->cfg.wake_fd > 0)
        sl_plat_wake(t->cfg.wake_fd); /* a full pipe already wakes: fine */
}

static sl_etev_t *ev_new(sl_elastic_trainer_t *t, sl_etev_kind kind) {
    sl_etev_t *ev = sl_calloc(1, sizeof *ev);
    if (ev) {
        ev->kind = kind;
        ev->world = t->world;
        ev->step = t->local.step;
    }
    return ev;
}

/* Queues `ev` (NULL: out of memory, dropped); `end` also ends the world,
 * in the same critical section, so that once the node sees the event
 * in_world is false and it may enter the next. */
static void push(sl_elastic_trainer_t *t, sl_etev_t *ev, bool end) {
    pthread_mutex_lock(&t->mu);
    if (end)
        t->in_world = false;
    if (ev) {
        ev->next = NULL;
        if (t->tail)
            t->tail->next = ev;
        else
            t->head = ev;
        t->tail = ev;
    }
    pthread_mutex_unlock(&t->mu);
    wake(t);
}

static void push_text(sl_elastic_trainer_t *t, sl_etev_kind kind, sl_err err, bool end,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void push_text(sl_elastic_trainer_t *t, sl_etev_kind kind, sl_err err, bool end,
                      const char *fmt, ...) {
    sl_etev_t *ev = ev_new(t, kind);
    if (ev) {
        ev->err = err;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ev->text, sizeof ev->text, fmt, ap);
        va_end(ap);
    }
    push(t, ev, end);
}

static bool asked_to_leave(sl_elastic_trainer_t *t) {
    pthread_mutex_lock(&t->mu);
    bool leave = t->leave || t->stop;
    pthread_mutex_unlock(&t->mu);
    return leave;
}

static void set_local(sl_elastic_trainer_t *t, uint64_t step, const sl_elastic_ref_t *world) {
    pthread_mutex_lock(&t->mu);
    t->local.step = step;
    t->local.has_state = true;
    t->local.state_world = *world;
    pthread_mutex_unlock(&t->mu);
}

static double now_s(void) { return (double)sl_plat_now_ns() * 1e-9; }

/* ---- the model ---- */

/* Loads the data set and builds the nn trainer, once. */
static sl_err build(sl_elastic_trainer_t *t, char *why, size_t why_len) {
    const sl_elastic_job_t *j = &t->cfg.job;
    sl_nn_train_cfg_t c;
    sl_nn_train_cfg_init(&c);
    c.model = j->model;
    c.epochs = (int)j->epochs;
    c.batch = j->global_batch < MAX_ROWS ? (int)j->global_batch : MAX_ROWS;
    c.lr = (float)j->lr;
    c.momentum = (float)j->momentum;
    c.weight_decay = (float)j->weight_decay;
    c.step_epochs = (int)j->step_epochs;
    c.step_gamma = (float)j->step_gamma;
    c.warmup_epochs = (int)j->warmup_epochs;
    c.seed = j->seed;
    c.val_split = (float)j->val_split;
    c.limit = (size_t)j->dataset_limit;
    if (sl_nn_optim_parse(j->optimizer, &c.optimizer) != SL_OK)
        return sl_why(why, why_len, SL_EINVAL, "unknown optimizer '%s'", j->optimizer);
    if (sl_nn_schedule_parse(j->schedule, &c.schedule) != SL_OK)
        return sl_why(why, why_len, SL_EINVAL, "unknown schedule '%s'", j->schedule);
    sl_err err = sl_nn_data_load(j->dataset, &t->train, &t->test, why, why_len);
    if (err == SL_OK)
        err = sl_nn_backend_open(t->cfg.device, t->cfg.threads, &t->be, why, why_len);
    if (err == SL_OK)
        err = sl_nn_trainer_new(t->be, &c, t->train, t->test, &t->nn, why, why_len);
    if (err != SL_OK)
        return err;
    t->sched = (sl_elastic_sched_t){.seed = j->seed,
                                    .sample_count = sl_nn_dp_train_count(t->nn),
                                    .global_batch = j->global_batch};
    t->steps_per_epoch = sl_elastic_steps_per_epoch(&t->sched);
    if (t->steps_per_epoch == 0)
        return sl_why(why, why_len, SL_EINVAL, "no step schedule for %llu training samples",
                      (unsigned long long)t->sched.sample_count);
    t->total_steps = t->steps_per_epoch * j->epochs;
    t->P = sl_nn_dp_param_count(t->nn);
    t->R = sl_nn_dp_stat_count(t->nn);
    t->state_count = sl_nn_dp_state_count(t->nn);
    t->order = sl_malloc(t->sched.sample_count * sizeof *t->order);
    t->buf = sl_malloc((t->P + t->R + 2) * sizeof *t->buf);
    t->stats = sl_malloc((t->R ? t->R : 1) * sizeof *t->stats);
    t->state = sl_malloc(t->state_count * sizeof *t->state);
    if (!t->order || !t->buf || !t->stats || !t->state)
        return sl_why(why, why_len, SL_ENOMEM, "out of memory for the model's buffers");
    t->order_epoch = UINT64_MAX;
    push_text(t, SL_ETEV_LOG, SL_OK, false,
              "builtin trainer: %s, %llu parameters, %s, %llu training samples, %llu steps "
              "per epoch of %u",
              j->model, (unsigned long long)sl_nn_trainer_params(t->nn),
              sl_nn_backend_desc(t->be), (unsigned long long)t->sched.sample_count,
              (unsigned long long)t->steps_per_epoch, j->global_batch);
    return SL_OK;
}

static void call_hook(sl_elastic_trainer_t *t) {
    pthread_mutex_lock(&t->mu);
    sl_elastic_trainer_state_fn fn = t->on_state;
    void *ctx = t->on_state_ctx;
    pthread_mutex_unlock(&t->mu);
    if (fn && sl_nn_dp_state_get(t->nn, t->state) == SL_OK)
        fn(ctx, t->local.step, t->state, t->state_count);
}

/* ---- entering a world: the state ---- */

/* Gives this rank the state the world starts from: the source's (an
 * all-reduce in which the others give -0.0, which adds to any x giving x
 * exactly), the checkpoint's, or a fresh one. */
static sl_err take_state(sl_elastic_trainer_t *t, const sl_elastic_enter_t *w,
                         sl_ring_link_t *link, char *why, size_t why_len) {
    static const sl_elastic_ref_t none = {0};
    sl_err err;
    if (w->source >= 0) {
        bool me = (uint32_t)w->source == w->rank;
        if (me && (!t->local.has_state || t->local.step != w->start_step))
            return sl_why(why, why_len, SL_ESTATE,
                          "this rank is the source of step %llu but holds %s %llu",
                          (unsigned long long)w->start_step,
                          t->local.has_state ? "step" : "no state, at",
                          (unsigned long long)t->local.step);
        if (me) {
            if ((err = sl_nn_dp_state_get(t->nn, t->state)) != SL_OK)
                return sl_why(why, why_len, err, "cannot read the state: %s",
                              sl_strerror(err));
        } else {
            for (size_t i = 0; i < t->state_count; i++)
                t->state[i] = -0.0f;
        }
        err = sl_ring_link_allreduce(link, t->state, t->state_count, 1.0f);
        if (err != SL_OK)
            return sl_why(why, why_len, err, "state transfer from rank %d failed: %s",
                          w->source, sl_ring_link_error(link));
        if (!me) {
            if ((err = sl_nn_dp_state_set(t->nn, t->state)) != SL_OK)
                return sl_why(why, why_len, err, "cannot set the received state: %s",
                              sl_strerror(err));
            sl_nn_dp_set_step(t->nn, w->start_step, t->steps_per_epoch);
            set_local(t, w->start_step, &w->source_world);
        }
        return SL_OK;
    }
    if (w->start_step > 0) {
        err = sl_nn_checkpoint_load(t->nn, w->restore, why, why_len);
        if (err != SL_OK)
            return err;
        uint64_t at = sl_nn_dp_step(t->nn);
        set_local(t, at, &none);
        if (at != w->start_step)
            return sl_why(why, why_len, SL_EINVAL, "%s is at step %llu, the world starts at %llu",
                          w->restore, (unsigned long long)at,
                          (unsigned long long)w->start_step);
        return SL_OK;
    }
    if ((err = sl_nn_dp_reset(t->nn)) != SL_OK)
        return sl_why(why, why_len, err, "cannot initialise the model: %s", sl_strerror(err));
    set_local(t, 0, &none);
    return SL_OK;
}

/* ---- NCCL ---- */

static uint32_t nccl_timeout_ms(const sl_elastic_trainer_t *t) {
    if (t->cfg.nccl_timeout_ms)
        return t->cfg.nccl_timeout_ms;
    return t->cfg.ring_timeout_ms ? t->cfg.ring_timeout_ms : NCCL_TIMEOUT_MS;
}

/* Waits for the communicator's last operation (its creation, or the
 * enqueueing of a collective), and with `stream` for the backend's
 * stream too, within the timeout; a leave ends the wait (the caller
 * aborts the communicator, which ends a collective stuck on a member). */
static sl_err nccl_wait(sl_elastic_trainer_t *t, bool stream, const char *what, char *why,
                        size_t why_len) {
    double deadline = now_s() + nccl_timeout_ms(t) / 1000.0;
    for (unsigned spins = 0;; spins++) {
        sl_err err = sl_nccl_poll(t->nccl);
        if (err == SL_OK && stream)
            err = sl_nn_dp_device_query(t->nn);
        if (err == SL_OK)
            return SL_OK;
        if (err != SL_EAGAIN)
            return sl_why(why, why_len, err, "%s: %s", what,
                          sl_nccl_error(t->nccl)[0] ? sl_nccl_error(t->nccl)
                                                    : sl_strerror(err));
        if (asked_to_leave(t))
            return sl_why(why, why_len, SL_ECLOSED, "%s: left the world (asked to)", what);
        if (now_s() > deadline)
            return sl_why(why, why_len, SL_ETIMEDOUT, "%s: not done after %u ms", what,
                          nccl_timeout_ms(t));
        /* a step's all-reduce takes microseconds to milliseconds: spin a
           little, then sleep */
        if (spins < 200)
            sl_plat_yield();
        else
            sl_plat_sleep_us(50);
    }
}

typedef struct {
    sl_elastic_trainer_t *t; /* the trainer */
    char *why;               /* where a failure is told */
    size_t why_len;          /* its size */
} nccl_ctx_t;

/* sl_nn_dp_reduce_fn over the world's communicator. */
static sl_err nccl_reduce(void *arg, float *dev, size_t count, void *stream) {
    nccl_ctx_t *x = arg;
    sl_err err = sl_nccl_allreduce_sum(x->t->nccl, dev, count, stream);
    if (err != SL_OK)
        return sl_why(x->why, x->why_len, err, "%s", sl_nccl_error(x->t->nccl));
    return nccl_wait(x->t, true, "ncclAllReduce", x->why, x->why_len);
}

/* Decides with the others, over the ring, whether this world's gradients
 * go over NCCL, and makes the communicator when they do: a vote (every
 * member can), rank 0's unique id, a second vote (every member made its
 * communicator). Anything short of all is the ring for everyone; only a
 * failure of the ring itself is an error (the world is broken). */
static sl_err nccl_setup(sl_elastic_trainer_t *t, const sl_elastic_enter_t *w,
                         sl_ring_link_t *link, char *why, size_t why_len) {
    /* a world of one has nothing to sum; every member of a bigger one
       votes, whatever its own setting, so that the calls stay in step */
    if (w->size < 2 && t->cfg.nccl != SL_ELASTIC_NCCL_ALWAYS)
        return SL_OK;
    char mine[300] = "";
    bool can = false;
    const char *keyed_ok = sl_plat_getenv("STARLING_NCCL_KEYED");
    if (t->cfg.nccl == SL_ELASTIC_NCCL_OFF)
        snprintf(mine, sizeof mine, "nccl is off here");
    else if (t->cfg.has_key && !(keyed_ok && !strcmp(keyed_ok, "1")))
        snprintf(mine, sizeof mine,
                 "the cluster is keyed and nccl's connections are neither encrypted nor "
                 "authenticated (STARLING_NCCL_KEYED=1 on every peer allows them)");
    else if (!sl_nn_dp_device_collectives(t->nn))
        snprintf(mine, sizeof mine, "the %s backend has no device collectives",
                 sl_nn_backend_name(t->be));
    else if (t->nccl_fails >= NCCL_MAX_FAILS)
        snprintf(mine, sizeof mine, "nccl failed here %d times in a row", t->nccl_fails);
    else
        can = sl_nccl_load(mine, sizeof mine) == SL_OK;
    float v[1 + SL_NCCL_ID_LEN];
    v[0] = can ? 1.0f : 0.0f;
    sl_err err = sl_ring_link_allreduce(link, v, 1, 1.0f);
    if (err != SL_OK)
        return sl_why(why, why_len, err, "the nccl vote failed: %s", sl_ring_link_error(link));
    if (v[0] < (float)w->size) {
        push_text(t, SL_ETEV_LOG, SL_OK, false,
                  "all-reduce over the ring: %.0f of %u members can use nccl%s%s", v[0], w->size,
                  can ? "" : "; not this one: ", can ? "" : mine);
        return SL_OK;
    }
    /* rank 0 makes the id and sends it as bytes in floats (exact) */
    uint8_t id[SL_NCCL_ID_LEN];
    memset(v, 0, sizeof v);
    if (w->rank == 0 && sl_nccl_unique_id(id, mine, sizeof mine) == SL_OK) {
        v[0] = 1.0f;
        for (int i = 0; i < SL_NCCL_ID_LEN; i++)
            v[1 + i] = id[i];
    }
    if ((err = sl_ring_link_allreduce(link, v, 1 + SL_NCCL_ID_LEN, 1.0f)) != SL_OK)
        return sl_why(why, why_len, err, "the nccl id's transfer failed: %s",
                      sl_ring_link_error(link));
    bool ok = v[0] == 1.0f;
    for (int i = 0; i < SL_NCCL_ID_LEN; i++)
        id[i] = (uint8_t)v[1 + i];
    if (ok && (err = sl_nccl_new(id, (int)w->size, (int)w->rank, &t->nccl, mine,
                                 sizeof mine)) == SL_OK)
        err = nccl_wait(t, false, "ncclCommInitRankConfig", mine, sizeof mine);
    bool made = ok && err == SL_OK;
    v[0] = made ? 1.0f : 0.0f;
    if ((err = sl_ring_link_allreduce(link, v, 1, 1.0f)) != SL_OK) {
        sl_nccl_abort(&t->nccl);
        return sl_why(why, why_len, err, "the nccl vote failed: %s", sl_ring_link_error(link));
    }
    if (ok && !made && !asked_to_leave(t))
        t->nccl_fails++;
    if (v[0] < (float)w->size) {
        sl_nccl_abort(&t->nccl);
        push_text(t, SL_ETEV_LOG, SL_OK, false, "all-reduce over the ring: %s%s",
                  !ok    ? "rank 0 could not make an nccl id: "
                  : made ? "another member could not make its nccl communicator"
                         : "no nccl communicator here: ",
                  made ? "" : (ok || w->rank == 0 ? mine : "see rank 0's log"));
        return SL_OK;
    }
    t->nccl_fails = 0;
    int ver = sl_nccl_version();
    push_text(t, SL_ETEV_LOG, SL_OK, false, "all-reduce over nccl %d.%d.%d, %u ranks",
              ver / 10000, ver / 100 % 100, ver % 100, w->size);
    return SL_OK;
}

/* ---- one step ---- */

typedef struct {
    double loss;     /* the step's mean loss */
    double acc;      /* its accuracy */
    double lr;       /* the rate applied */
    uint64_t total;  /* its samples, all ranks */
} step_out_t;

static sl_err one_step(sl_elastic_trainer_t *t, const sl_elastic_enter_t *w,
                       sl_ring_link_t *link, step_out_t *so, char *why, size_t why_len) {
    uint64_t step = t->local.step;
    sl_elastic_batch_t b;
    sl_err err = sl_elastic_batch(&t->sched, step, w->rank, w->size, &b);
    if (err != SL_OK)
        return sl_why(why, why_len, err, "no batch for step %llu", (unsigned long long)step);
    if (b.epoch != t->order_epoch) {
        if ((err = sl_elastic_epoch_order(&t->sched, b.epoch, t->order)) != SL_OK)
            return sl_why(why, why_len, err, "no order for epoch %llu",
                          (unsigned long long)b.epoch);
        t->order_epoch = b.epoch;
    }
    /* Dropout: a function of the step and of where the rank's slice
     * starts in the epoch's order, so no two ranks share masks. */
    uint64_t seed = sl_mix64(t->cfg.job.seed ^ DROPOUT_SALT ^ (step * 0x9E3779B97F4A7C15ull));
    seed = sl_mix64(seed ^ b.offset);
    double loss = 0, correct = 0;
    if (t->R && (err = sl_nn_dp_stats_get(t->nn, t->stats)) != SL_OK)
        return sl_why(why, why_len, err, "cannot read the statistics: %s", sl_strerror(err));
    /* Over NCCL the summed gradients stay on the device. */
    err = sl_nn_dp_grads(t->nn, t->order + b.offset, b.count, seed, t->nccl ? NULL : t->buf,
                         &loss, &correct);
    if (err != SL_OK) {
        sl_why(why, why_len, err, "step %llu failed on %s: %s", (unsigned long long)step,
               sl_nn_backend_name(t->be), sl_strerror(err));
        goto undo;
    }
    if (t->R) {
        float *s = t->buf + t->P;
        if (b.count == 0 || (err = sl_nn_dp_stats_get(t->nn, s)) != SL_OK) {
            for (size_t i = 0; i < t->R; i++)
                s[i] = 0.0f;
        } else {
            for (size_t i = 0; i < t->R; i++)
                s[i] *= (float)b.count;
        }
        if (err != SL_OK)
            goto undo;
    }
    t->buf[t->P + t->R] = (float)loss;
    t->buf[t->P + t->R + 1] = (float)correct;
    pthread_mutex_lock(&t->mu);
    uint64_t die = t->die_after;
    t->die_after = 0;
    pthread_mutex_unlock(&t->mu);
    if (die)
        sl_ring_link_test_die_after(link, die);
    if (t->nccl) {
        why[0] = '\0';
        nccl_ctx_t ctx = {.t = t, .why = why, .why_len = why_len};
        err = sl_nn_dp_reduce_device(t->nn, t->buf + t->P, t->R + 2, (float)b.total,
                                     nccl_reduce, &ctx);
        if (err != SL_OK) {
            char inner[400];
            snprintf(inner, sizeof inner, "%s", why[0] ? why : sl_strerror(err));
            sl_why(why, why_len, err, "step %llu's all-reduce failed: %s",
                   (unsigned long long)step + 1, inner);
            goto undo;
        }
    } else {
        err = sl_ring_link_allreduce(link, t->buf, t->P + t->R + 2, (float)b.total);
        if (err != SL_OK) {
            sl_why(why, why_len, err, "step %llu's all-reduce failed: %s",
                   (unsigned long long)step + 1, sl_ring_link_error(link));
            goto undo;
        }
    }
    if (t->R && (err = sl_nn_dp_stats_set(t->nn, t->buf + t->P)) != SL_OK)
        return sl_why(why, why_len, err, "cannot set the statistics: %s", sl_strerror(err));
    err = sl_nn_dp_apply(t->nn, t->nccl ? NULL : t->buf, step, t->steps_per_epoch, &so->lr);
    if (err != SL_OK)
        return sl_why(why, why_len, err, "step %llu's update failed on %s: %s",
                      (unsigned long long)step + 1, sl_nn_backend_name(t->be),
                      sl_strerror(err));
    so->loss = t->buf[t->P + t->R];
    so->acc = t->buf[t->P + t->R + 1];
    so->total = b.total;
    set_local(t, step + 1, &w->world);
    return SL_OK;
undo:
    /* The forward passes moved the statistics; the step did not happen. */
    if (t->R)
        sl_nn_dp_stats_set(t->nn, t->stats);
    return err;
}

/* Validation and test metrics, each rank a slice, summed over the ring. */
static sl_err evaluate(sl_elastic_trainer_t *t, const sl_elastic_enter_t *w,
                       sl_ring_link_t *link, sl_nn_epoch_t *m, char *why, size_t why_len) {
    float sums[4];
    size_t n[2];
    for (int k = 0; k < 2; k++) {
        n[k] = sl_nn_dp_eval_count(t->nn, k == 1);
        size_t lo = n[k] * w->rank / w->size, hi = n[k] * (w->rank + 1) / w->size;
        double loss = 0, right = 0;
        sl_err err = sl_nn_dp_eval(t->nn, k == 1, lo, hi - lo, &loss, &right);
        if (err != SL_OK)
            return sl_why(why, why_len, err, "evaluation failed on %s: %s",
                          sl_nn_backend_name(t->be), sl_strerror(err));
        sums[2 * k] = (float)loss;
        sums[2 * k + 1] = (float)right;
    }
    sl_err err = sl_ring_link_allreduce(link, sums, 4, 1.0f);
    if (err != SL_OK)
        return sl_why(why, why_len, err, "the evaluation's all-reduce failed: %s",
                      sl_ring_link_error(link));
    m->has_val = n[0] > 0;
    m->val_loss = n[0] ? sums[0] / (double)n[0] : 0;
    m->val_acc = n[0] ? sums[1] / (double)n[0] : 0;
    m->has_test = n[1] > 0;
    m->test_loss = n[1] ? sums[2] / (double)n[1] : 0;
    m->test_acc = n[1] ? sums[3] / (double)n[1] : 0;
    return SL_OK;
}

/* Rank 0's checkpoint of the current step, DIR/ckpt-<step>.slck. */
static void checkpoint(sl_elastic_trainer_t *t) {
    sl_etev_t *ev = ev_new(t, SL_ETEV_CHECKPOINT);
    if (!ev)
        return;
    char why[512];
    snprintf(ev->path, sizeof ev->path, "%s/ckpt-%llu.slck", t->cfg.dir,
             (unsigned long long)t->local.step);
    sl_err err = sl_nn_checkpoint_save(t->nn, ev->path, why, sizeof why);
    if (err != SL_OK) {
        ev->kind = SL_ETEV_LOG;
        ev->err = err;
        snprintf(ev->text, sizeof ev->text, "no checkpoint of step %llu: %.440s",
                 (unsigned long long)t->local.step, why);
        ev->path[0] = '\0';
    }
    push(t, ev, false);
}

/* The end of the job: rank 0 writes the weights (DIR/model.npz, whole or
 * not at all: the export writes a temporary file and renames it) and every
 * rank says DONE. */
static void done(sl_elastic_trainer_t *t, const sl_elastic_enter_t *w) {
    sl_etev_t *ev = ev_new(t, SL_ETEV_DONE);
    if (ev && w->rank == 0) {
        char why[512];
        snprintf(ev->path, sizeof ev->path, "%s/model.npz", t->cfg.dir);
        sl_err err = sl_nn_export_npz(t->nn, ev->path, why, sizeof why);
        if (err != SL_OK) {
            ev->path[0] = '\0';
            ev->err = err;
            snprintf(ev->text, sizeof ev->text, "no final weights: %.480s", why);
        }
    }
    push(t, ev, true);
}

/* ---- a world ---- */

/* Per-world progress, for the STEP and EPOCH events. */
typedef struct {
    bool first;          /* no step yet in this world */
    double step_loss;    /* loss of the steps since the last STEP, summed */
    uint64_t step_count; /* those steps */
    double ep_loss;      /* this epoch's loss x samples, summed (steps seen here) */
    double ep_right;     /* its right answers */
    uint64_t ep_samples; /* its samples */
    double ep_t0;        /* when this trainer began the epoch (or entered) */
} progress_t;

/* After step `step` (now applied): STEP, the epoch's end, a checkpoint. */
/* The end of the epoch the state's step closes: every rank evaluates its
 * slice of the held-out sets, ranks 0 and 1 report (train loss and
 * accuracy of the steps this world saw of it; the sums are all-reduced,
 * so both hold the same figures). Two reporters, because a rank 0
 * killed just after the evaluation takes its report with it, and the
 * world after it starts past the epoch's end: nobody would evaluate it
 * again, and the epoch would have no record. */
static sl_err end_epoch(sl_elastic_trainer_t *t, const sl_elastic_enter_t *w,
                        sl_ring_link_t *link, progress_t *p, double lr, char *why,
                        size_t why_len) {
    uint32_t epoch = (uint32_t)(t->local.step / t->steps_per_epoch);
    sl_nn_epoch_t m;
    memset(&m, 0, sizeof m);
    double t1 = now_s();
    m.epoch = (int)epoch;
    m.epochs = (int)t->cfg.job.epochs;
    m.train_loss = p->ep_samples ? p->ep_loss / (double)p->ep_samples : NAN;
    m.train_acc = p->ep_samples ? p->ep_right / (double)p->ep_samples : NAN;
    m.samples = p->ep_samples;
    m.lr = lr;
    m.seconds = t1 - p->ep_t0;
    m.samples_per_s = m.seconds > 0 ? (double)m.samples / m.seconds : 0;
    sl_err err = evaluate(t, w, link, &m, why, why_len);
    if (err != SL_OK)
        return err;
    double t2 = now_s();
    m.eval_seconds = t2 - t1;
    if (w->rank <= 1) {
        sl_etev_t *ev = ev_new(t, SL_ETEV_EPOCH);
        if (ev) {
            ev->epoch = epoch;
            ev->metrics = m;
        }
        push(t, ev, false);
    }
    p->ep_loss = p->ep_right = 0;
    p->ep_samples = 0;
    p->ep_t0 = t2;
    return SL_OK;
}

static sl_err after_step(sl_elastic_trainer_t *t, const sl_elastic_enter_t *w,
                         sl_ring_link_t *link, progress_t *p, const step_out_t *so, char *why,
                         size_t why_len) {
    uint64_t step = t->local.step, spe = t->steps_per_epoch;
    uint32_t epoch = (uint32_t)((step - 1) / spe) + 1;
    p->step_loss += so->loss;
    p->step_count++;
    p->ep_loss += so->loss * (double)so->total;
    p->ep_right += so->acc * (double)so->total;
    p->ep_samples += so->total;
    if (!isfinite(so->loss)) {
        push_text(t, SL_ETEV_FAILED, SL_ERANGE, true,
                  "training diverged at step %llu (loss %g); lower the learning rate",
                  (unsigned long long)step, so->loss);
        return SL_ERANGE;
    }
    uint64_t every = spe / STEP_EVENTS ? spe / STEP_EVENTS : 1;
    if (p->first || step % every == 0) {
        sl_etev_t *ev = ev_new(t, SL_ETEV_STEP);
        if (ev) {
            ev->epoch = epoch;
            ev->first = p->first;
            ev->loss = p->step_loss / (double)p->step_count;
        }
        push(t, ev, false);
        p->step_loss = 0;
        p->step_count = 0;
        p->first = false;
    }
    if (step % spe == 0) {
        sl_err err = end_epoch(t, w, link, p, so->lr, why, why_len);
        if (err != SL_OK)
            return err;
    }
    if (w->rank == 0 && (step % t->cfg.job.checkpoint_every == 0 || step == t->total_steps))
        checkpoint(t);
    return SL_OK;
}

/* Closes the world's link once leave can no longer reach it, and its
 * communicator (aborted: a member may be stuck in it). */
static void link_close(sl_elastic_trainer_t *t, sl_ring_link_t **link) {
    sl_nccl_abort(&t->nccl);
    pthread_mutex_lock(&t->mu);
    t->link = NULL;
    pthread_mutex_unlock(&t->mu);
    sl_ring_link_close(link);
}

static void train_world(sl_elastic_trainer_t *t, const sl_elastic_enter_t *w) {
    char why[512] = "";
    t->world = w->world;
    if (!t->nn && !t->broken && build(t, t->broken_why, sizeof t->broken_why) != SL_OK) {
        t->broken = true;
        sl_nn_trainer_destroy(&t->nn);
    }
    if (t->broken) {
        push_text(t, SL_ETEV_FAILED, SL_EINVAL, true, "%s", t->broken_why);
        return;
    }
    if (asked_to_leave(t)) {
        push_text(t, SL_ETEV_LEFT, SL_OK, true, "left before it started");
        return;
    }
    const char *eps[SL_ELASTIC_MAX_NODES];
    for (uint32_t i = 0; i < w->size; i++)
        eps[i] = w->endpoints[i];
    sl_ring_link_cfg_t rc = {.job = t->job_hash,
                             .round = w->world.round,
                             .world = w->size,
                             .rank = w->rank,
                             .endpoints = eps,
                             .bind = w->bind[0] ? w->bind : NULL,
                             .key = t->cfg.has_key ? &t->cfg.key : NULL,
                             .timeout_ms = t->cfg.ring_timeout_ms};
    sl_ring_link_t *link = NULL;
    sl_err err = sl_ring_link_open(&rc, &link);
    pthread_mutex_lock(&t->mu);
    t->link = link; /* (closed below only after it is taken back) */
    if (t->leave)
        sl_ring_link_abort(link);
    pthread_mutex_unlock(&t->mu);
    if (err != SL_OK) {
        push_text(t, SL_ETEV_LEFT, err, true, "cannot open the ring at %s: %s",
                  rc.bind ? rc.bind : eps[w->rank], sl_strerror(err));
        return;
    }
    /* which wire the gradients take: plain TCP is unencrypted (docs/security.md) */
    sl_log(SL_LOG_INFO, "ELASTIC-RING", "round=%llu rank=%u size=%u transport=%s keyed=%s",
           (unsigned long long)w->world.round, w->rank, w->size,
           sl_ring_link_transport(link) == SL_RING_TCP ? "tcp" : "zmq",
           rc.key ? "yes" : "no");
    err = take_state(t, w, link, why, sizeof why);
    if (err == SL_OK)
        err = nccl_setup(t, w, link, why, sizeof why);
    if (err != SL_OK) {
        link_close(t, &link);
        /* a leave aborts a transfer that waits: asked, not broken */
        if (asked_to_leave(t))
            push_text(t, SL_ETEV_LEFT, SL_OK, true, "left before it started (%s)", why);
        else
            push_text(t, SL_ETEV_LEFT, err, true, "%s", why);
        return;
    }
    call_hook(t);
    progress_t p = {.first = true, .ep_t0 = now_s()};
    /* A world that starts at an epoch's end evaluates that epoch again: the
       world before may have been left in its evaluation (a leave aborts
       it), and the epoch would have no record. (The same metrics when it
       was not: the same state.) */
    if (t->local.step > 0 && t->local.step % t->steps_per_epoch == 0) {
        err = end_epoch(t, w, link, &p, NAN, why, sizeof why);
        if (err != SL_OK) {
            link_close(t, &link);
            push_text(t, SL_ETEV_LEFT, asked_to_leave(t) ? SL_OK : err, true, "%s", why);
            return;
        }
    }
    for (;;) {
        if (t->local.step >= t->total_steps) {
            link_close(t, &link);
            done(t, w);
            return;
        }
        if (asked_to_leave(t))
            break;
        step_out_t so;
        err = one_step(t, w, link, &so, why, sizeof why);
        if (err == SL_OK) {
            call_hook(t);
            err = after_step(t, w, link, &p, &so, why, sizeof why);
            if (err == SL_ERANGE) { /* FAILED is queued */
                link_close(t, &link);
                return;
            }
        }
        if (err != SL_OK)
            break;
    }
    link_close(t, &link);
    /* A rank asked to leave may find its neighbours gone first: the step
     * it had begun is dropped, and it left as asked. */
    if (err != SL_OK && !asked_to_leave(t))
        push_text(t, SL_ETEV_LEFT, err, true, "%s", why);
    else if (err != SL_OK)
        push_text(t, SL_ETEV_LEFT, SL_OK, true, "left at step %llu (%s)",
                  (unsigned long long)t->local.step, why);
    else
        push_text(t, SL_ETEV_LEFT, SL_OK, true, "left at step %llu",
                  (unsigned long long)t->local.step);
}

static void *run(void *arg) {
    sl_elastic_trainer_t *t = arg;
    for (;;) {
        pthread_mutex_lock(&t->mu);
        while (!t->stop && !t->has_enter)
            pthread_cond_wait(&t->cv, &t->mu);
        if (t->stop) {
            pthread_mutex_unlock(&t->mu);
            return NULL;
        }
        sl_elastic_enter_t *w = sl_malloc(sizeof *w);
        if (w)
            *w = t->enter;
        t->has_enter = false;
        pthread_mutex_unlock(&t->mu);
        if (!w) {
            push_text(t, SL_ETEV_LEFT, SL_ENOMEM, true, "out of memory entering a world");
            continue;
        }
        train_world(t, w);
        sl_free(w);
    }
}

/* ---- the node's side ---- */

sl_err sl_elastic_trainer_new(const sl_elastic_trainer_cfg_t *cfg, sl_elastic_trainer_t **out) {
    *out = NULL;
    if (cfg->job.trainer != SL_ELASTIC_TRAINER_BUILTIN)
        return SL_EINVAL;
    sl_elastic_trainer_t *t = sl_calloc(1, sizeof *t);
    if (!t)
        return SL_ENOMEM;
    t->cfg = *cfg;
    snprintf(t->device, sizeof t->device, "%s", cfg->device ? cfg->device : "auto");
    t->cfg.device = t->device;
    t->job_hash = sl_hash64(cfg->job_id, strlen(cfg->job_id), 0);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->thread, NULL, run, t) != 0) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        sl_free(t);
        return SL_ENOMEM;
    }
    *out = t;
    return SL_OK;
}

sl_err sl_elastic_trainer_enter(sl_elastic_trainer_t *t, const sl_elastic_enter_t *w) {
    if (w->size < 1 || w->size > SL_ELASTIC_MAX_NODES || w->rank >= w->size ||
        w->source >= (int)w->size || w->source < -1 || w->world.round == 0)
        return SL_EINVAL;
    pthread_mutex_lock(&t->mu);
    if (t->in_world) {
        pthread_mutex_unlock(&t->mu);
        return SL_ESTATE;
    }
    t->enter = *w;
    t->has_enter = true;
    t->in_world = true;
    t->leave = false;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return SL_OK;
}

void sl_elastic_trainer_leave(sl_elastic_trainer_t *t) {
    pthread_mutex_lock(&t->mu);
    if (t->in_world)
        t->leave = true;
    /* a call that waits for a member that has moved on (the world ended
       for it first) would wait out the ring's timeout */
    sl_ring_link_abort(t->link);
    pthread_mutex_unlock(&t->mu);
}

void sl_elastic_trainer_local(sl_elastic_trainer_t *t, sl_elastic_local_t *out) {
    pthread_mutex_lock(&t->mu);
    *out = t->local;
    pthread_mutex_unlock(&t->mu);
}

bool sl_elastic_trainer_in_world(sl_elastic_trainer_t *t) {
    pthread_mutex_lock(&t->mu);
    bool in = t->in_world;
    pthread_mutex_unlock(&t->mu);
    return in;
}

sl_etev_t *sl_elastic_trainer_pop(sl_elastic_trainer_t *t) {
    pthread_mutex_lock(&t->mu);
    sl_etev_t *ev = t->head;
    if (ev) {
        t->head = ev->next;
        if (!t->head)
            t->tail = NULL;
        ev->next = NULL;
    }
    pthread_mutex_unlock(&t->mu);
    return ev;
}

void sl_elastic_trainer_test_on_state(sl_elastic_trainer_t *t, sl_elastic_trainer_state_fn fn,
                                      void *ctx) {
    pthread_mutex_lock(&t->mu);
    t->on_state = fn;
    t->on_state_ctx = ctx;
    pthread_mutex_unlock(&t->mu);
}

void sl_elastic_trainer_test_die_after(sl_elastic_trainer_t *t, uint64_t sends) {
    pthread_mutex_lock(&t->mu);
    t->die_after = sends;
    pthread_mutex_unlock(&t->mu);
}

void sl_elastic_trainer_destroy(sl_elastic_trainer_t **pt) {
    if (!pt || !*pt)
        return;
    sl_elastic_trainer_t *t = *pt;
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    t->leave = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    for (sl_etev_t *ev = t->head, *next; ev; ev = next) {
        next = ev->next;
        sl_free(ev);
    }
    sl_nn_trainer_destroy(&t->nn);
    sl_nn_backend_destroy(&t->be);
    sl_nn_data_destroy(&t->train);
    sl_nn_data_destroy(&t->test);
    sl_free(t->order);
    sl_free(t->buf);
    sl_free(t->stats);
    sl_free(t->state);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    sl_free(t);
    *pt = NULL;
}
