/* The elastic jobs' built-in trainer (src/elastic/trainer.c): 1, 2 and 3
 * trainers as threads in one process, their rings on 127.0.0.1, on 3,000
 * training and 400 test samples of Fashion-MNIST written to a directory
 * as IDX files (a model with batch norm and dropout, Adam).
 *
 *   worlds     W = 1, 2, 3 train every epoch; at every step every rank
 *              holds the same state, bit for bit (parameters, Adam's
 *              vectors, running statistics); the loss goes down; rank 0
 *              evaluates, checkpoints and writes the weights
 *   join       a world of 2 trains 7 steps and is left; a world of 3 goes
 *              on from there, the joiner taking rank 0's state: it holds
 *              rank 0's bits, and the three stay equal to the end
 *   die        a rank's ring dies in the middle of step 6's all-reduce:
 *              every rank leaves with an error within seconds, at step 5,
 *              and a trainer destroyed mid-run ends its neighbours' world
 *   restore    a checkpoint gives back the state that wrote it
 *   dp         the nn side: gradients of rows in chunks add up to those of
 *              one forward, zero rows give zeros, the state goes from one
 *              trainer to another bit for bit, evaluation slices add up
 *
 * That every sample is seen once per epoch is the schedule's property
 * (tests/elastic_schedule_test.c). Skipped (77) without the data set.
 * SL_ELASTIC_TRAINER_DEVICE=cuda runs it on the cuda backend (skipped
 * without one; with SL_CUDA_BACKEND naming the emulator's library, the
 * device-memory paths of src/nn/dp.c run on any machine). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "elastic/trainer.h"
#include "starling/hash.h"
#include "testlib.h"

#define MAXT 3           /* trainers at once */
#define TRAIN_N 3000     /* samples written (before the 10 % split) */
#define TEST_N 400       /* test samples written */
#define MAX_STEP 32      /* steps a run may reach */
#define SPE 9            /* steps per epoch: 2700 training samples / 300 */
#define STEPS 18         /* 2 epochs */

static char dir[256];
static const char *device = "cpu"; /* $SL_ELASTIC_TRAINER_DEVICE: cuda runs it on a GPU */
static int next_port;
static sl_elastic_job_t job;
static char job_id[SL_ELASTIC_JOB_ID_LEN + 1];

/* ---- trainers and what they report ---- */

typedef struct {
    sl_elastic_trainer_t *t;    /* the trainer */
    int pipe[2];                /* its wake_fd (write end) and our end */
    pthread_mutex_t mu;         /* guards the hook's fields */
    uint64_t hash[MAX_STEP + 1]; /* a hash of the state at each step */
    bool have[MAX_STEP + 1];    /* one was recorded */
    uint64_t leave_at;          /* the hook leaves at this step (0: never) */
    uint64_t die_at;            /* the hook sets the ring to die after this step (0: never) */
    uint64_t hold_at;           /* the hook waits at this step until it is 0 again */
    bool held;                  /* it waits */
    pthread_cond_t cv;          /* signals held and the release */
    sl_etev_t *events;          /* popped, oldest first */
    sl_etev_t **tail;           /* where the next goes */
} tr_t;

static tr_t tr[MAXT];

static void on_state(void *ctx, uint64_t step, const float *state, size_t count) {
    tr_t *x = ctx;
    uint64_t h = sl_hash64(state, count * sizeof *state, 0);
    pthread_mutex_lock(&x->mu);
    if (step <= MAX_STEP) {
        x->hash[step] = h;
        x->have[step] = true;
    }
    bool leave = x->leave_at && step == x->leave_at;
    bool die = x->die_at && step == x->die_at;
    pthread_mutex_unlock(&x->mu);
    if (leave)
        sl_elastic_trainer_leave(x->t);
    if (die) /* the second send of the next step's all-reduce */
        sl_elastic_trainer_test_die_after(x->t, 2);
    pthread_mutex_lock(&x->mu);
    if (x->hold_at && step == x->hold_at) {
        x->held = true;
        pthread_cond_broadcast(&x->cv);
        while (x->hold_at)
            pthread_cond_wait(&x->cv, &x->mu);
        x->held = false;
    }
    pthread_mutex_unlock(&x->mu);
}

/* Waits (60 s at most) until trainer i's hook holds it. */
static bool wait_held(int i) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 60;
    pthread_mutex_lock(&tr[i].mu);
    while (!tr[i].held && pthread_cond_timedwait(&tr[i].cv, &tr[i].mu, &dl) == 0) {
    }
    bool held = tr[i].held;
    pthread_mutex_unlock(&tr[i].mu);
    return held;
}

static void release(int i) {
    pthread_mutex_lock(&tr[i].mu);
    tr[i].hold_at = 0;
    pthread_cond_broadcast(&tr[i].cv);
    pthread_mutex_unlock(&tr[i].mu);
}

static void tr_start(int i) {
    tr_t *x = &tr[i];
    memset(x->hash, 0, sizeof x->hash);
    memset(x->have, 0, sizeof x->have);
    x->leave_at = x->die_at = x->hold_at = 0;
    x->events = NULL;
    x->tail = &x->events;
    CHECK(pipe(x->pipe) == 0);
    fcntl(x->pipe[0], F_SETFL, O_NONBLOCK);
    fcntl(x->pipe[1], F_SETFL, O_NONBLOCK);
    sl_elastic_trainer_cfg_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.job = job;
    memcpy(cfg.job_id, job_id, sizeof cfg.job_id);
    cfg.threads = 1;
    cfg.device = device;
    cfg.wake_fd = x->pipe[1];
    cfg.ring_timeout_ms = 3000;
    snprintf(cfg.dir, sizeof cfg.dir, "%s/r%d", dir, i);
    mkdir(cfg.dir, 0755);
    CHECK_OK(sl_elastic_trainer_new(&cfg, &x->t));
    sl_elastic_trainer_test_on_state(x->t, on_state, x);
}

static void tr_stop(int i) {
    tr_t *x = &tr[i];
    sl_elastic_trainer_destroy(&x->t);
    CHECK(x->t == NULL);
    for (sl_etev_t *ev = x->events, *next; ev; ev = next) {
        next = ev->next;
        sl_free(ev);
    }
    x->events = NULL;
    close(x->pipe[0]);
    close(x->pipe[1]);
}

static void drain(tr_t *x) {
    char b[64];
    while (read(x->pipe[0], b, sizeof b) > 0) {
    }
    for (sl_etev_t *ev; (ev = sl_elastic_trainer_pop(x->t));) {
        *x->tail = ev;
        x->tail = &ev->next;
    }
}

/* The first event of trainer i of a kind that ends a world (LEFT, DONE,
 * FAILED) after `after` (NULL: from the start), waiting up to `s` seconds
 * on its wake pipe; NULL if none came. */
static const sl_etev_t *wait_end(int i, const sl_etev_t *after, double s) {
    tr_t *x = &tr[i];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        drain(x);
        for (const sl_etev_t *ev = after ? after->next : x->events; ev; ev = ev->next)
            if (ev->kind == SL_ETEV_LEFT || ev->kind == SL_ETEV_DONE ||
                ev->kind == SL_ETEV_FAILED)
                return ev;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double left = s - (double)(t1.tv_sec - t0.tv_sec) - (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        if (left <= 0)
            return NULL;
        struct pollfd p = {.fd = x->pipe[0], .events = POLLIN};
        poll(&p, 1, (int)(left * 1000) + 1);
    }
}

static void enter(int i, uint64_t round, uint32_t rank, uint32_t size, const int *ports,
                  uint64_t start, int source, uint64_t source_round, const char *restore) {
    sl_elastic_enter_t w;
    memset(&w, 0, sizeof w);
    w.world.round = round;
    snprintf(w.world.leader, sizeof w.world.leader, "p0");
    w.rank = rank;
    w.size = size;
    for (uint32_t r = 0; r < size; r++)
        snprintf(w.endpoints[r], sizeof w.endpoints[r], "tcp://127.0.0.1:%d", ports[r]);
    w.start_step = start;
    w.source = source;
    w.source_world.round = source_round;
    if (source_round)
        snprintf(w.source_world.leader, sizeof w.source_world.leader, "p0");
    if (restore)
        snprintf(w.restore, sizeof w.restore, "%s", restore);
    CHECK_OK(sl_elastic_trainer_enter(tr[i].t, &w));
}

static void take_ports(int *ports, int n) {
    for (int i = 0; i < n; i++)
        ports[i] = next_port++;
}

/* Every trainer of 0..n-1 recorded the same state at every step in
 * [from, to]. */
static void check_equal(int n, uint64_t from, uint64_t to) {
    for (uint64_t s = from; s <= to; s++)
        for (int i = 0; i < n; i++) {
            CHECK_MSG(tr[i].have[s], "trainer %d recorded no state at step %llu", i,
                      (unsigned long long)s);
            CHECK_MSG(tr[i].hash[s] == tr[0].hash[s],
                      "trainer %d's state differs from rank 0's at step %llu", i,
                      (unsigned long long)s);
        }
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && st.st_size > 0;
}

/* ---- the nn side (src/nn/dp.c): chunks add up, state round trips ---- */

static float max_abs(const float *a, const float *b, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) {
        float d = b ? a[i] - b[i] : a[i];
        if (d < 0)
            d = -d;
        if (d > m)
            m = d;
    }
    return m;
}

static void test_dp(void) {
    char why[512], data[300];
    snprintf(data, sizeof data, "%s/data", dir);
    sl_nn_data_t *train = NULL, *test = NULL;
    sl_nn_backend_t *be = NULL;
    sl_nn_trainer_t *a = NULL, *b = NULL;
    float *ga = NULL, *gb = NULL, *sa = NULL, *sb = NULL, *s0 = NULL;
    CHECK_OK(sl_nn_data_load(data, &train, &test, why, sizeof why));
    CHECK_OK(sl_nn_backend_open(device, 1, &be, why, sizeof why));
    sl_nn_train_cfg_t c;
    sl_nn_train_cfg_init(&c);
    c.model = "mlp:32";
    c.val_split = 0.1f;
    c.limit = 1000;
    c.batch = 256; /* one forward */
    CHECK_OK(sl_nn_trainer_new(be, &c, train, test, &a, why, sizeof why));
    c.batch = 48; /* five chunks */
    CHECK_OK(sl_nn_trainer_new(be, &c, train, test, &b, why, sizeof why));
    if (!a || !b)
        goto out;
    CHECK_INT(sl_nn_dp_train_count(a), 900);
    size_t P = sl_nn_dp_param_count(a), S = sl_nn_dp_state_count(a);
    CHECK_INT(S, 2 * P); /* sgd: params and momentum, no statistics */
    CHECK_INT(sl_nn_dp_stat_count(a), 0);
    ga = sl_calloc(P, sizeof *ga);
    gb = sl_calloc(P, sizeof *gb);
    sa = sl_calloc(S, sizeof *sa);
    sb = sl_calloc(S, sizeof *sb);
    s0 = sl_calloc(S, sizeof *s0);
    uint32_t rows[200];
    for (uint32_t i = 0; i < 200; i++)
        rows[i] = (i * 7) % 900;
    double la, ca, lb, cb;
    CHECK_OK(sl_nn_dp_state_get(b, s0));
    CHECK_OK(sl_nn_dp_grads(a, rows, 200, 1, ga, &la, &ca));
    CHECK_OK(sl_nn_dp_grads(b, rows, 200, 1, gb, &lb, &cb));
    /* Summed, not averaged: about 200 x ln 10; the chunks add up to the
     * one forward's gradients up to rounding. */
    CHECK_MSG(la > 200 * 1.5 && la < 200 * 3.5, "loss sum %g", la);
    CHECK_NEAR(la, lb, 1e-4 * la);
    CHECK(ca == cb);
    CHECK_MSG(max_abs(ga, gb, P) <= 1e-4f * max_abs(ga, NULL, P), "chunked gradients differ by %g",
              (double)max_abs(ga, gb, P));
    CHECK(max_abs(ga, NULL, P) > 0);
    CHECK_OK(sl_nn_dp_grads(a, rows, 0, 1, ga, &la, &ca));
    CHECK(max_abs(ga, NULL, P) == 0 && la == 0 && ca == 0);
    uint32_t bad = 900;
    CHECK_ERR(sl_nn_dp_grads(a, &bad, 1, 1, ga, &la, &ca), SL_EINVAL);
    /* An applied mean moves the step and the state; the state moves to
     * another trainer bit for bit; reset gives the initial state back. */
    for (size_t i = 0; i < P; i++)
        gb[i] /= 200.0f;
    double lr = 0;
    CHECK_OK(sl_nn_dp_apply(a, gb, 0, 10, &lr));
    CHECK(lr > 0);
    CHECK_INT(sl_nn_dp_step(a), 1);
    CHECK_OK(sl_nn_dp_state_get(a, sa));
    CHECK(memcmp(sa, s0, S * sizeof *sa) != 0);
    CHECK_OK(sl_nn_dp_state_set(b, sa));
    CHECK_OK(sl_nn_dp_state_get(b, sb));
    CHECK(memcmp(sa, sb, S * sizeof *sa) == 0);
    CHECK_OK(sl_nn_dp_reset(a));
    CHECK_INT(sl_nn_dp_step(a), 0);
    CHECK_OK(sl_nn_dp_state_get(a, sa));
    CHECK(memcmp(sa, s0, S * sizeof *sa) == 0);
    /* Evaluation in slices adds up. */
    CHECK_INT(sl_nn_dp_eval_count(a, false), 100);
    CHECK_INT(sl_nn_dp_eval_count(a, true), TEST_N);
    double l1, c1, l2, c2, l3, c3;
    CHECK_OK(sl_nn_dp_eval(a, true, 0, TEST_N, &l1, &c1));
    CHECK_OK(sl_nn_dp_eval(a, true, 0, 150, &l2, &c2));
    CHECK_OK(sl_nn_dp_eval(a, true, 150, TEST_N - 150, &l3, &c3));
    CHECK_NEAR(l1, l2 + l3, 1e-6 * l1);
    CHECK(c1 == c2 + c3);
    CHECK_ERR(sl_nn_dp_eval(a, false, 50, 51, &l1, &c1), SL_EINVAL);
out:
    sl_free(ga);
    sl_free(gb);
    sl_free(sa);
    sl_free(sb);
    sl_free(s0);
    sl_nn_trainer_destroy(&a);
    sl_nn_trainer_destroy(&b);
    sl_nn_backend_destroy(&be);
    sl_nn_data_destroy(&train);
    sl_nn_data_destroy(&test);
}

/* ---- worlds of 1, 2, 3: to the end ---- */

static uint64_t last_hash10; /* rank 0's state at step 10 in the last run */

static void run_world(int n) {
    int ports[MAXT];
    take_ports(ports, n);
    for (int i = 0; i < n; i++)
        tr_start(i);
    for (int i = 0; i < n; i++)
        enter(i, 1, (uint32_t)i, (uint32_t)n, ports, 0, -1, 0, NULL);
    const sl_etev_t *end[MAXT];
    for (int i = 0; i < n; i++) {
        end[i] = wait_end(i, NULL, 120);
        CHECK_MSG(end[i] && end[i]->kind == SL_ETEV_DONE, "W=%d rank %d: %s", n, i,
                  end[i] ? end[i]->text : "no end");
        if (!end[i] || end[i]->kind != SL_ETEV_DONE)
            goto out;
        CHECK_INT(end[i]->step, STEPS);
        CHECK(!sl_elastic_trainer_in_world(tr[i].t));
        sl_elastic_local_t loc;
        sl_elastic_trainer_local(tr[i].t, &loc);
        CHECK_INT(loc.step, STEPS);
        CHECK(loc.has_state);
        CHECK_INT(loc.state_world.round, 1);
    }
    check_equal(n, 0, STEPS);
    /* The state moved (the hashes differ from step to step). */
    CHECK(tr[0].hash[0] != tr[0].hash[1] && tr[0].hash[1] != tr[0].hash[STEPS]);
    /* Rank 0's events: STEP (the first marked), EPOCH x 2, CHECKPOINT at
     * 5, 10, 15 and the end, DONE with the weights; rank 1's the same
     * EPOCHs (a second reporter) and no CHECKPOINT; the others' neither. */
    int epochs = 0, ckpts = 0, steps = 0;
    double first_loss = 0, last_loss = 0;
    sl_nn_epoch_t m[2];
    for (const sl_etev_t *ev = tr[0].events; ev; ev = ev->next) {
        if (ev->kind == SL_ETEV_STEP) {
            CHECK(ev->first == (steps == 0));
            CHECK_INT(ev->epoch, (ev->step - 1) / SPE + 1);
            if (steps++ == 0)
                first_loss = ev->loss;
            last_loss = ev->loss;
        } else if (ev->kind == SL_ETEV_EPOCH && epochs < 2) {
            m[epochs++] = ev->metrics;
        } else if (ev->kind == SL_ETEV_CHECKPOINT) {
            CHECK_MSG(ev->step == 5 || ev->step == 10 || ev->step == 15 || ev->step == STEPS,
                      "checkpoint at step %llu", (unsigned long long)ev->step);
            CHECK(exists(ev->path));
            ckpts++;
        }
    }
    CHECK_INT(epochs, 2);
    CHECK_INT(ckpts, 4);
    CHECK_MSG(steps == STEPS, "%d STEP events", steps);
    CHECK_MSG(last_loss < first_loss, "W=%d: loss %g -> %g", n, first_loss, last_loss);
    if (epochs == 2) {
        CHECK_INT(m[0].epoch, 1);
        CHECK_INT(m[1].epoch, 2);
        CHECK_INT(m[0].samples, 2700);
        CHECK_MSG(m[1].train_loss < m[0].train_loss, "W=%d: epoch loss %g -> %g", n,
                  m[0].train_loss, m[1].train_loss);
        CHECK(m[1].has_val && m[1].has_test);
        CHECK_MSG(m[1].val_acc > 0.6 && m[1].test_acc > 0.6, "W=%d: val %g test %g", n,
                  m[1].val_acc, m[1].test_acc);
    }
    CHECK(exists(end[0]->path) && strstr(end[0]->path, "/r0/model.npz"));
    for (int i = 1; i < n; i++) {
        CHECK(end[i]->path[0] == '\0');
        int seen = 0;
        for (const sl_etev_t *ev = tr[i].events; ev; ev = ev->next) {
            CHECK(ev->kind != SL_ETEV_CHECKPOINT);
            if (ev->kind != SL_ETEV_EPOCH)
                continue;
            CHECK_MSG(i == 1 && seen < epochs, "rank %d reported epoch %u", i, ev->epoch);
            if (i == 1 && seen < epochs) {
                CHECK_INT(ev->epoch, m[seen].epoch);
                CHECK(ev->metrics.train_loss == m[seen].train_loss &&
                      ev->metrics.test_acc == m[seen].test_acc &&
                      ev->metrics.val_loss == m[seen].val_loss);
            }
            seen++;
        }
        CHECK_INT(seen, i == 1 ? epochs : 0);
    }
    last_hash10 = tr[0].hash[10]; /* the run of r0/ckpt-10.slck */
out:
    for (int i = 0; i < n; i++)
        tr_stop(i);
}

static void test_world_1(void) { run_world(1); }
static void test_world_2(void) { run_world(2); }
static void test_world_3(void) { run_world(3); }

/* ---- restore: the checkpoint of step 10 of the world of 3 ---- */

static void test_restore(void) {
    char path[400];
    snprintf(path, sizeof path, "%s/r0/ckpt-10.slck", dir);
    CHECK(exists(path) && last_hash10 != 0);
    int ports[1];
    take_ports(ports, 1);
    tr_start(0);
    tr[0].leave_at = 11;
    enter(0, 9, 0, 1, ports, 10, -1, 0, path);
    const sl_etev_t *end = wait_end(0, NULL, 60);
    CHECK_MSG(end && end->kind == SL_ETEV_LEFT && end->err == SL_OK, "%s",
              end ? end->text : "no end");
    CHECK(tr[0].have[10] && tr[0].hash[10] == last_hash10 && !tr[0].have[9]);
    CHECK(tr[0].have[11] && !tr[0].have[12]);
    sl_elastic_local_t loc;
    sl_elastic_trainer_local(tr[0].t, &loc);
    CHECK_INT(loc.step, 11);
    CHECK_INT(loc.state_world.round, 9);
    /* A checkpoint of another step than the world's: LEFT with the reason. */
    take_ports(ports, 1);
    enter(0, 10, 0, 1, ports, 15, -1, 0, path);
    end = wait_end(0, end, 60);
    CHECK_MSG(end && end->kind == SL_ETEV_LEFT && end->err == SL_EINVAL &&
                  strstr(end->text, "at step 10"),
              "%s", end ? end->text : "no end");
    tr_stop(0);
}

/* ---- a world of 2, then of 3 with a joiner ---- */

static void test_join(void) {
    int ports[MAXT];
    take_ports(ports, 2);
    tr_start(0);
    tr_start(1);
    tr[0].leave_at = tr[1].leave_at = 7;
    enter(0, 1, 0, 2, ports, 0, -1, 0, NULL);
    enter(1, 1, 1, 2, ports, 0, -1, 0, NULL);
    const sl_etev_t *end[MAXT] = {NULL};
    for (int i = 0; i < 2; i++) {
        end[i] = wait_end(i, NULL, 60);
        CHECK_MSG(end[i] && end[i]->kind == SL_ETEV_LEFT && end[i]->err == SL_OK, "rank %d: %s",
                  i, end[i] ? end[i]->text : "no end");
        if (!end[i])
            goto out;
        CHECK_INT(end[i]->step, 7);
        sl_elastic_local_t loc;
        sl_elastic_trainer_local(tr[i].t, &loc);
        CHECK(loc.has_state && loc.step == 7 && loc.state_world.round == 1);
    }
    check_equal(2, 0, 7);
    tr[0].leave_at = tr[1].leave_at = 0;
    tr_start(2);
    sl_elastic_local_t loc;
    sl_elastic_trainer_local(tr[2].t, &loc);
    CHECK(!loc.has_state && loc.step == 0);
    take_ports(ports, 3);
    for (int i = 0; i < 3; i++)
        enter(i, 2, (uint32_t)i, 3, ports, 7, 0, 1, NULL);
    for (int i = 0; i < 3; i++) {
        end[i] = wait_end(i, end[i], 120);
        CHECK_MSG(end[i] && end[i]->kind == SL_ETEV_DONE, "rank %d: %s", i,
                  end[i] ? end[i]->text : "no end");
        if (!end[i])
            goto out;
    }
    /* The joiner took rank 0's state at step 7, and the three stayed equal. */
    CHECK(tr[2].have[7] && !tr[2].have[6]);
    check_equal(3, 7, STEPS);
    sl_elastic_trainer_local(tr[2].t, &loc);
    CHECK(loc.has_state && loc.step == STEPS && loc.state_world.round == 2);
out:
    for (int i = 0; i < 3; i++)
        if (tr[i].t)
            tr_stop(i);
}

/* ---- a rank dies ---- */

static void test_die(void) {
    int ports[MAXT];
    take_ports(ports, 3);
    for (int i = 0; i < 3; i++)
        tr_start(i);
    tr[2].die_at = 5;
    for (int i = 0; i < 3; i++)
        enter(i, 1, (uint32_t)i, 3, ports, 0, -1, 0, NULL);
    struct timespec t0, t1;
    const sl_etev_t *end[MAXT];
    for (int i = 0; i < 3; i++) {
        end[i] = wait_end(i, NULL, 60);
        if (i == 0)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK_MSG(end[i] && end[i]->kind == SL_ETEV_LEFT && end[i]->err != SL_OK, "rank %d: %s",
                  i, end[i] ? end[i]->text : "no end");
        if (!end[i])
            continue;
        CHECK_INT(end[i]->step, 5);
        sl_elastic_local_t loc;
        sl_elastic_trainer_local(tr[i].t, &loc);
        CHECK(loc.has_state && loc.step == 5 && loc.state_world.round == 1);
        CHECK(!tr[i].have[6]);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double spread = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK_MSG(spread < 5.0, "the ranks left %.1f s apart", spread);
    check_equal(3, 0, 5);
    uint64_t h5[MAXT];
    for (int i = 0; i < 3; i++) {
        pthread_mutex_lock(&tr[i].mu);
        h5[i] = tr[i].hash[5];
        tr[i].have[5] = false;
        tr[i].die_at = 0;
        pthread_mutex_unlock(&tr[i].mu);
    }
    /* The same ranks go on in a new world from their state. Rank 1 is held
     * in its hook after step 8: every rank is in the world (a second enter
     * is refused); then it leaves and is destroyed: the others' step 9
     * cannot finish, and they leave with an error at step 8. */
    pthread_mutex_lock(&tr[1].mu);
    tr[1].hold_at = 8;
    pthread_mutex_unlock(&tr[1].mu);
    take_ports(ports, 3);
    for (int i = 0; i < 3; i++)
        enter(i, 2, (uint32_t)i, 3, ports, 5, 0, 1, NULL);
    CHECK(wait_held(1));
    /* The interrupted step 6 left every rank's state as it was at step 5
     * (parameters untouched, statistics put back): what each holds on
     * entering the new world. */
    for (int i = 0; i < 3; i++) {
        pthread_mutex_lock(&tr[i].mu);
        bool same = tr[i].have[5] && tr[i].hash[5] == h5[i];
        pthread_mutex_unlock(&tr[i].mu);
        CHECK_MSG(same, "rank %d's state changed after step 5's world ended", i);
        CHECK(sl_elastic_trainer_in_world(tr[i].t));
    }
    sl_elastic_enter_t w;
    memset(&w, 0, sizeof w);
    w.world.round = 3;
    w.size = 1;
    w.source = -1;
    CHECK_ERR(sl_elastic_trainer_enter(tr[0].t, &w), SL_ESTATE);
    sl_elastic_trainer_leave(tr[1].t);
    release(1);
    sl_elastic_trainer_destroy(&tr[1].t);
    for (int i = 0; i < 3; i += 2) {
        const sl_etev_t *e = wait_end(i, end[i], 10);
        CHECK_MSG(e && e->kind == SL_ETEV_LEFT && e->err != SL_OK, "rank %d: %s", i,
                  e ? e->text : "no end");
        if (e)
            CHECK_INT(e->step, 8);
        CHECK(!sl_elastic_trainer_in_world(tr[i].t));
    }
    for (int i = 0; i < 3; i++)
        tr_stop(i);
}

int main(void) {
    CHECK_OK(sl_init());
    char why[512];
    sl_nn_data_t *train = NULL, *test = NULL;
    sl_err err = sl_nn_data_load("fashion-mnist", &train, &test, why, sizeof why);
    if (err != SL_OK || !test || !train->images_u8) {
        printf("skipped: %s\n", err != SL_OK ? why : "no byte images or test set");
        return SL_TEST_SKIP;
    }
    if (getenv("SL_ELASTIC_TRAINER_DEVICE"))
        device = getenv("SL_ELASTIC_TRAINER_DEVICE");
    sl_nn_backend_t *be = NULL;
    if (sl_nn_backend_open(device, 1, &be, why, sizeof why) != SL_OK) {
        printf("skipped: %s\n", why);
        return SL_TEST_SKIP;
    }
    printf("device: %s\n", sl_nn_backend_desc(be));
    /* The CUDA emulator runs one thread's kernels at a time (its fibers
     * are process-wide): on it, only the cases of one trainer. */
    bool one = strstr(sl_nn_backend_desc(be), "emulation") != NULL;
    sl_nn_backend_destroy(&be);
    snprintf(dir, sizeof dir, "/tmp/sl_elastic_trainer_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    char sub[300];
    snprintf(sub, sizeof sub, "%s/data", dir);
    mkdir(sub, 0755);
    CHECK(sl_test_write_idx(train, TRAIN_N, sub, "train-images-idx3-ubyte",
                            "train-labels-idx1-ubyte"));
    CHECK(sl_test_write_idx(test, TEST_N, sub, "t10k-images-idx3-ubyte",
                            "t10k-labels-idx1-ubyte"));
    sl_nn_data_destroy(&train);
    sl_nn_data_destroy(&test);
    char text[1024];
    snprintf(text, sizeof text,
             "{\"kind\": \"elastic\", \"name\": \"t\", \"seed\": 7, "
             "\"nodes\": {\"min\": 1, \"max\": 3}, "
             "\"trainer\": {\"type\": \"builtin\", \"model\": \"mlp:64,bn,dropout=0.1\"}, "
             "\"dataset\": {\"name\": \"%s\", \"val_split\": 0.1}, \"epochs\": 2, "
             "\"global_batch\": 300, \"optimizer\": {\"type\": \"adam\", \"lr\": 0.003}, "
             "\"checkpoint_every\": 5}",
             sub);
    CHECK_OK(sl_elastic_job_parse(text, strlen(text), &job, why, sizeof why));
    CHECK_OK(sl_elastic_job_id(&job, job_id));
    for (int i = 0; i < MAXT; i++) {
        pthread_mutex_init(&tr[i].mu, NULL);
        pthread_cond_init(&tr[i].cv, NULL);
    }
    next_port = 20000 + (int)(getpid() % 500) * 24; /* 19 ports a run */
    sl_test_run("dp", test_dp);
    sl_test_run("world_1", test_world_1);
    if (!one) {
        sl_test_run("world_2", test_world_2);
        sl_test_run("world_3", test_world_3);
    }
    sl_test_run("restore", test_restore);
    if (!one) {
        sl_test_run("join", test_join);
        sl_test_run("die", test_die);
    }
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    if (system(text) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return sl_test_finish();
}
