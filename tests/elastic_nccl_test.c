/* The elastic trainer's NCCL path (src/elastic/trainer.c "NCCL",
 * src/nn/nccl_lazy.c, src/nn/dp.c's device all-reduce): each rank a
 * process of its own (the CUDA emulator runs one thread's kernels at a
 * time), its ring on 127.0.0.1, on 600 training and 100 test samples of
 * Fashion-MNIST (mlp:32,bn, Adam: the statistics ride with the gradients).
 *
 * Two ctests run this file (tests/elastic_nccl_test.cmake):
 *   elastic_nccl_emu_test  the cuda backend over the CUDA emulator and
 *                          NCCL over its emulation (libnccl_emu.so), on
 *                          any machine:
 *     nccl_1      a world of one over NCCL (SL_ELASTIC_NCCL_ALWAYS)
 *     nccl_2      two ranks over NCCL: the members agree on it, every rank
 *                 holds the same state at every step, the loss goes down
 *     change      a world of two left at step 4, the next world (a new
 *                 communicator) goes on from rank 0's state to the end
 *     cpu_member  a member on the cpu backend: the world uses the ring
 *     no_lib      a member without libnccl: the ring
 *     off         a member whose trainer has NCCL off: the ring
 *     keyed       a keyed cluster: the ring (NCCL's connections are in the
 *                 clear), unless STARLING_NCCL_KEYED=1
 *     kill        rank 1's process dies after step 3: rank 0 leaves with
 *                 the all-reduce's error, at step 3, within seconds
 *     init_fails  rank 1 cannot make its communicator: the ring, after
 *                 rank 0 waited out its creation's deadline
 *     stopped     rank 1 is stopped (SIGSTOP) after step 3: rank 0 leaves
 *                 with a timeout, at step 3
 *   elastic_nccl_test      the real libnccl on a real GPU: nccl_1 only
 *                          (NCCL refuses two ranks on one device);
 *                          skipped (77) without a GPU or libnccl.
 * Skipped (77) without the data set. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elastic/trainer.h"
#include "nn/nccl_lazy.h"
#include "starling/hash.h"
#include "testlib.h"

#define TRAIN_N 600  /* samples written (before the 10 % split) */
#define TEST_N 100   /* test samples */
#define STEPS 12     /* 2 epochs of 6 steps (540 samples, 100 a step) */
#define MAXR 2       /* ranks at once */

static char dir[256];
static int next_port;
static sl_elastic_job_t job;
static char job_id[SL_ELASTIC_JOB_ID_LEN + 1];

/* ---- a rank: a child process ---- */

/* What one rank does. */
typedef struct {
    uint32_t rank, size;    /* its place in the world(s) */
    int ports[MAXR];        /* the ring ports, by rank */
    int ports2[MAXR];       /* the second world's (change) */
    const char *device;     /* its backend */
    int nccl;               /* SL_ELASTIC_NCCL_* */
    const char *nccl_lib;   /* STARLING_NCCL_LIB for it (NULL: the test's) */
    uint64_t leave_at;      /* leave the first world at this step, then enter a second
                               (0: one world) */
    uint64_t die_at;        /* the process ends at this step (0: never) */
    uint64_t stop_at;       /* it stops itself (SIGSTOP) at this step; the parent kills it */
    bool fail_init;         /* its communicators fail to be made (the emulation's switch) */
    uint32_t nccl_timeout_ms; /* NCCL's timeout (0: the ring's, 8 s) */
    const sl_net_key_t *key; /* the cluster key (NULL: none) */
    bool keyed_ok;          /* STARLING_NCCL_KEYED=1 */
} rank_spec_t;

/* What a rank told the parent. */
typedef struct {
    uint64_t hash[STEPS + 1]; /* the state's hash at each step */
    bool have[STEPS + 1];     /* one came */
    double first_loss;        /* of the first STEP event */
    double last_loss;         /* of the last */
    int nccl_worlds;          /* "all-reduce over nccl" lines */
    int ring_worlds;          /* "all-reduce over the ring" lines */
    char logs[2048];          /* every LOG line */
    int ends;                 /* world ends */
    int end_kind[2];          /* the events that ended them */
    int end_err[2];           /* their errors */
    uint64_t end_step[2];     /* their steps */
    char end_text[2][512];    /* their texts */
    double end_s[2];          /* when they came, since the child started */
    bool exited;              /* the child exited */
    int status;               /* its wait status */
} rank_out_t;

static int out_fd = -1;        /* the child's end of its pipe */
static uint64_t child_die_at;  /* the child ends at this step (0: never) */
static uint64_t child_leave_at; /* it leaves its first world at this step (0: never) */
static uint64_t child_stop_at;  /* it stops itself (SIGSTOP) at this step (0: never) */
static bool child_second;      /* it is in its second world */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    for (int i = 0; i < n; i++)
        if (line[i] == '\n')
            line[i] = ' ';
    line[n++] = '\n';
    ssize_t w = write(out_fd, line, (size_t)n); /* one line, atomic under PIPE_BUF */
    (void)w;
}

static void on_state(void *ctx, uint64_t step, const float *state, size_t count) {
    sl_elastic_trainer_t *t = ctx;
    say("S %llu %llu", (unsigned long long)step,
        (unsigned long long)sl_hash64(state, count * sizeof *state, 0));
    if (child_die_at && step == child_die_at)
        _exit(0); /* a member gone: its sockets close */
    if (child_stop_at && step == child_stop_at)
        raise(SIGSTOP); /* a member silent: its sockets stay open */
    /* on the trainer's thread, so that every rank leaves at this step */
    if (child_leave_at && step == child_leave_at && !child_second)
        sl_elastic_trainer_leave(t);
}

static void enter(sl_elastic_trainer_t *t, const rank_spec_t *rs, uint64_t round,
                  const int *ports, uint64_t start, int source) {
    sl_elastic_enter_t w;
    memset(&w, 0, sizeof w);
    w.world.round = round;
    snprintf(w.world.leader, sizeof w.world.leader, "p0");
    w.rank = rs->rank;
    w.size = rs->size;
    for (uint32_t r = 0; r < rs->size; r++)
        snprintf(w.endpoints[r], sizeof w.endpoints[r], "tcp://127.0.0.1:%d", ports[r]);
    w.start_step = start;
    w.source = source;
    w.source_world.round = source >= 0 ? round - 1 : 0;
    if (source >= 0)
        snprintf(w.source_world.leader, sizeof w.source_world.leader, "p0");
    if (sl_elastic_trainer_enter(t, &w) != SL_OK)
        _exit(3);
}

/* Runs in the child: the world(s), every event told to the parent. */
static void child(const rank_spec_t *rs) {
    if (rs->nccl_lib)
        setenv("STARLING_NCCL_LIB", rs->nccl_lib, 1);
    if (rs->fail_init)
        setenv("NCCL_EMU_FAIL_INIT", "1", 1);
    if (rs->keyed_ok)
        setenv("STARLING_NCCL_KEYED", "1", 1);
    child_die_at = rs->die_at;
    child_leave_at = rs->leave_at;
    child_stop_at = rs->stop_at;
    int pfd[2];
    if (pipe(pfd) != 0)
        _exit(2);
    sl_elastic_trainer_cfg_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.job = job;
    memcpy(cfg.job_id, job_id, sizeof cfg.job_id);
    cfg.threads = 1;
    cfg.device = rs->device;
    cfg.wake_fd = pfd[1];
    cfg.ring_timeout_ms = 8000; /* ranks that start apart on a loaded machine */
    cfg.nccl_timeout_ms = rs->nccl_timeout_ms;
    if (rs->key) {
        cfg.has_key = true;
        cfg.key = *rs->key;
    }
    cfg.nccl = rs->nccl;
    snprintf(cfg.dir, sizeof cfg.dir, "%s/r%u", dir, rs->rank);
    mkdir(cfg.dir, 0755);
    sl_elastic_trainer_t *t = NULL;
    if (sl_elastic_trainer_new(&cfg, &t) != SL_OK)
        _exit(2);
    sl_elastic_trainer_test_on_state(t, on_state, t);
    enter(t, rs, 1, rs->ports, 0, -1);
    double t0 = now_s();
    int worlds = 0;
    for (;;) {
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        poll(&p, 1, 1000);
        char b[64];
        if (read(pfd[0], b, sizeof b) < 0 && errno != EINTR)
            _exit(2);
        for (sl_etev_t *ev; (ev = sl_elastic_trainer_pop(t)); sl_free(ev)) {
            if (ev->kind == SL_ETEV_STEP)
                say("P %llu %.9g", (unsigned long long)ev->step, ev->loss);
            else if (ev->kind == SL_ETEV_LOG)
                say("L %s", ev->text);
            else if (ev->kind == SL_ETEV_LEFT || ev->kind == SL_ETEV_DONE ||
                     ev->kind == SL_ETEV_FAILED) {
                say("E %d %d %llu %.3f %s", (int)ev->kind, (int)ev->err,
                    (unsigned long long)ev->step, now_s() - t0, ev->text);
                worlds++;
                if (ev->kind == SL_ETEV_LEFT && rs->leave_at && worlds == 1) {
                    child_second = true;
                    enter(t, rs, 2, rs->ports2, ev->step, 0);
                    continue;
                }
                sl_free(ev);
                sl_elastic_trainer_destroy(&t);
                _exit(0);
            }
        }
        if (now_s() - t0 > 100)
            _exit(4);
    }
}

static pid_t start_rank(const rank_spec_t *rs, int *fd) {
    int p[2];
    CHECK(pipe(p) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        out_fd = p[1];
        child(rs);
        _exit(5);
    }
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    *fd = p[0];
    return pid;
}

static void parse(rank_out_t *o, char *line) {
    unsigned long long a, b;
    double loss;
    if (sscanf(line, "S %llu %llu", &a, &b) == 2 && a <= STEPS) {
        o->hash[a] = b;
        o->have[a] = true;
    } else if (sscanf(line, "P %llu %lg", &a, &loss) == 2) {
        if (!o->first_loss)
            o->first_loss = loss;
        o->last_loss = loss;
    } else if (line[0] == 'L') {
        if (strstr(line, "all-reduce over nccl"))
            o->nccl_worlds++;
        if (strstr(line, "all-reduce over the ring"))
            o->ring_worlds++;
        size_t n = strlen(o->logs);
        snprintf(o->logs + n, sizeof o->logs - n, "%s\n", line + 2);
    } else if (line[0] == 'E' && o->ends < 2) {
        int k = o->ends++, kind, err, off = 0;
        double s;
        if (sscanf(line, "E %d %d %llu %lg %n", &kind, &err, &a, &s, &off) >= 4) {
            o->end_kind[k] = kind;
            o->end_err[k] = err;
            o->end_step[k] = a;
            o->end_s[k] = s;
            snprintf(o->end_text[k], sizeof o->end_text[k], "%s", off ? line + off : "");
        }
    }
}

/* Runs `n` ranks to their end (120 s at most), collecting what they say. */
static void run_ranks(const rank_spec_t *rs, int n, rank_out_t *out) {
    pid_t pid[MAXR];
    int fd[MAXR];
    char buf[MAXR][8192];
    size_t len[MAXR] = {0};
    memset(out, 0, sizeof *out * (size_t)n);
    for (int i = 0; i < n; i++)
        pid[i] = start_rank(&rs[i], &fd[i]);
    double t0 = now_s();
    int open_fds = n;
    bool stopped[MAXR] = {false};
    while (open_fds > 0 && now_s() - t0 < 120) {
        for (int i = 0; i < n; i++)
            if (rs[i].stop_at && out[i].have[rs[i].stop_at])
                stopped[i] = true; /* it stops itself once it said so */
        /* a stopped rank keeps its pipe open: done once the others are */
        int running = 0;
        for (int i = 0; i < n; i++)
            running += fd[i] >= 0 && !stopped[i];
        if (running == 0)
            break;
        struct pollfd p[MAXR];
        for (int i = 0; i < n; i++)
            p[i] = (struct pollfd){.fd = fd[i], .events = POLLIN};
        poll(p, (nfds_t)n, 500);
        for (int i = 0; i < n; i++) {
            if (fd[i] < 0)
                continue;
            ssize_t r = read(fd[i], buf[i] + len[i], sizeof buf[i] - 1 - len[i]);
            if (r == 0) {
                close(fd[i]);
                fd[i] = -1;
                open_fds--;
            }
            if (r <= 0)
                continue;
            len[i] += (size_t)r;
            buf[i][len[i]] = '\0';
            char *nl;
            while ((nl = strchr(buf[i], '\n'))) {
                *nl = '\0';
                parse(&out[i], buf[i]);
                size_t used = (size_t)(nl + 1 - buf[i]);
                memmove(buf[i], nl + 1, len[i] - used + 1);
                len[i] -= used;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        if (fd[i] >= 0) {
            kill(pid[i], SIGKILL);
            close(fd[i]);
        } else if (stopped[i]) {
            kill(pid[i], SIGKILL);
        }
        out[i].exited = waitpid(pid[i], &out[i].status, 0) == pid[i];
    }
}

static rank_spec_t spec(uint32_t rank, uint32_t size, const int *ports, const char *device) {
    rank_spec_t s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    s.size = size;
    for (uint32_t r = 0; r < size; r++)
        s.ports[r] = ports[r];
    s.device = device;
    return s;
}

static void take_ports(int *ports, int n) {
    for (int i = 0; i < n; i++)
        ports[i] = next_port++;
}

/* Rank i ended its k-th world with DONE at the last step. */
static void check_done(const rank_out_t *o, int i, int k) {
    CHECK_MSG(o->ends > k, "rank %d: world %d never ended; its log:\n%s", i, k + 1, o->logs);
    CHECK_MSG(o->end_kind[k] == SL_ETEV_DONE && o->end_step[k] == STEPS,
              "rank %d: world %d ended with event %d at step %llu: %s\n%s", i, k + 1,
              o->end_kind[k], (unsigned long long)o->end_step[k], o->end_text[k], o->logs);
}

static void check_equal(const rank_out_t *o, int n, uint64_t from, uint64_t to) {
    for (uint64_t s = from; s <= to; s++)
        for (int i = 1; i < n; i++) {
            CHECK_MSG(o[i].have[s] && o[0].have[s], "no state of rank %d at step %llu", i,
                      (unsigned long long)s);
            CHECK_MSG(o[i].hash[s] == o[0].hash[s], "rank %d's state differs at step %llu", i,
                      (unsigned long long)s);
        }
}

/* ---- cases ---- */

static void test_nccl_1(void) {
    int ports[1];
    take_ports(ports, 1);
    rank_spec_t rs = spec(0, 1, ports, "cuda");
    rs.nccl = SL_ELASTIC_NCCL_ALWAYS;
    rank_out_t o;
    run_ranks(&rs, 1, &o);
    CHECK_MSG(o.nccl_worlds == 1, "no world over nccl; the log:\n%s", o.logs);
    check_done(&o, 0, 0);
    CHECK_MSG(o.last_loss < o.first_loss, "loss %g -> %g", o.first_loss, o.last_loss);
    printf("  world of one over nccl: loss %.4f -> %.4f\n", o.first_loss, o.last_loss);
}

static void test_nccl_2(void) {
    int ports[2];
    take_ports(ports, 2);
    rank_spec_t rs[2] = {spec(0, 2, ports, "cuda"), spec(1, 2, ports, "cuda")};
    rank_out_t o[2];
    run_ranks(rs, 2, o);
    for (int i = 0; i < 2; i++) {
        CHECK_MSG(o[i].nccl_worlds == 1, "rank %d: no world over nccl; its log:\n%s", i,
                  o[i].logs);
        check_done(&o[i], i, 0);
    }
    check_equal(o, 2, 0, STEPS);
    CHECK_MSG(o[0].last_loss < o[0].first_loss, "loss %g -> %g", o[0].first_loss,
              o[0].last_loss);
    printf("  two ranks over nccl: the same state at every step, loss %.4f -> %.4f\n",
           o[0].first_loss, o[0].last_loss);
}

static void test_change(void) {
    int ports[2], ports2[2];
    take_ports(ports, 2);
    take_ports(ports2, 2);
    rank_spec_t rs[2] = {spec(0, 2, ports, "cuda"), spec(1, 2, ports, "cuda")};
    for (int i = 0; i < 2; i++) {
        rs[i].leave_at = 4;
        memcpy(rs[i].ports2, ports2, sizeof ports2);
    }
    rank_out_t o[2];
    run_ranks(rs, 2, o);
    for (int i = 0; i < 2; i++) {
        CHECK_MSG(o[i].ends == 2 && o[i].end_kind[0] == SL_ETEV_LEFT && o[i].end_err[0] == SL_OK,
                  "rank %d: the first world did not end as asked (%d ends): %s", i, o[i].ends,
                  o[i].end_text[0]);
        CHECK_MSG(o[i].nccl_worlds == 2, "rank %d: %d worlds over nccl; its log:\n%s", i,
                  o[i].nccl_worlds, o[i].logs);
        check_done(&o[i], i, 1);
    }
    CHECK(o[0].end_step[0] == 4 && o[1].end_step[0] == 4);
    check_equal(o, 2, 0, STEPS);
}

static void test_cpu_member(void) {
    int ports[2];
    take_ports(ports, 2);
    rank_spec_t rs[2] = {spec(0, 2, ports, "cuda"), spec(1, 2, ports, "cpu")};
    rank_out_t o[2];
    run_ranks(rs, 2, o);
    for (int i = 0; i < 2; i++) {
        CHECK_MSG(o[i].ring_worlds == 1 && o[i].nccl_worlds == 0,
                  "rank %d: not the ring; its log:\n%s", i, o[i].logs);
        check_done(&o[i], i, 0);
    }
    CHECK_MSG(strstr(o[1].logs, "1 of 2 members can use nccl; not this one: the cpu backend"),
              "rank 1's log:\n%s", o[1].logs);
}

static void test_no_lib(void) {
    int ports[2];
    take_ports(ports, 2);
    rank_spec_t rs[2] = {spec(0, 2, ports, "cuda"), spec(1, 2, ports, "cuda")};
    rs[1].nccl_lib = "/nonexistent/libnccl.so.2";
    rank_out_t o[2];
    run_ranks(rs, 2, o);
    for (int i = 0; i < 2; i++) {
        CHECK_MSG(o[i].ring_worlds == 1 && o[i].nccl_worlds == 0,
                  "rank %d: not the ring; its log:\n%s", i, o[i].logs);
        check_done(&o[i], i, 0);
    }
    check_equal(o, 2, 0, STEPS);
    CHECK_MSG(strstr(o[1].logs, "nccl not available: cannot load /nonexistent/libnccl.so.2"),
              "rank 1's log:\n%s", o[1].logs);
}

static void test_off(void) {
    int ports[2];
    take_ports(ports, 2);
    rank_spec_t rs[2] = {spec(0, 2, ports, "cuda"), spec(1, 2, ports, "cuda")};
    rs[0].nccl = SL_ELASTIC_NCCL_OFF;
    rank_out_t o[2];
    run_ranks(rs, 2, o);
    for (int i = 0; i < 2; i++) {
        CHECK_MSG(o[i].ring_worlds == 1 && o[i].nccl_worlds == 0,
                  "rank %d: not the ring; its log:\n%s", i, o[i].logs);
        check_done(&o[i], i, 0);
    }
    check_equal(o, 2, 0, STEPS);
    CHECK_MSG(strstr(o[0].logs, "1 of 2 members can use nccl; not this one: nccl is off here"),
              "rank 0's log:\n%s", o[0].logs);
}

static void test_keyed(void) {
    sl_net_key_t key;
    CHECK_OK(sl_net_key_generate(&key));
    for (int allowed = 0; allowed < 2; allowed++) {
        int ports[2];
        take_ports(ports, 2);
        rank_spec_t rs[2] = {spec(0, 2, ports, "cuda"), spec(1, 2, ports, "cuda")};
        for (int i = 0; i < 2; i++) {
            rs[i].key = &key;
            rs[i].keyed_ok = allowed;
        }
        rank_out_t o[2];
        run_ranks(rs, 2, o);
        for (int i = 0; i < 2; i++) {
            CHECK_MSG(o[i].nccl_worlds == allowed && o[i].ring_worlds == !allowed,
                      "rank %d (STARLING_NCCL_KEYED %s): its log:\n%s", i,
                      allowed ? "1" : "unset", o[i].logs);
            check_done(&o[i], i, 0);
        }
        check_equal(o, 2, 0, STEPS);
        if (!allowed)
            CHECK_MSG(strstr(o[0].logs, "0 of 2 members can use nccl; not this one: the cluster "
                                        "is keyed"),
                      "rank 0's log:\n%s", o[0].logs);
    }
}

static void test_kill(void) {
    int ports[2];
    take_ports(ports, 2);
    rank_spec_t rs[2] = {spec(0, 2, ports, "cuda"), spec(1, 2, ports, "cuda")};
    rs[1].die_at = 3;
    rank_out_t o[2];
    run_ranks(rs, 2, o);
    CHECK_MSG(o[0].nccl_worlds == 1, "no world over nccl; the log:\n%s", o[0].logs);
    CHECK_MSG(o[0].ends == 1 && o[0].end_kind[0] == SL_ETEV_LEFT && o[0].end_err[0] != SL_OK,
              "rank 0 did not leave with an error (%d ends, event %d): %s", o[0].ends,
              o[0].end_kind[0], o[0].end_text[0]);
    CHECK_MSG(o[0].end_step[0] == 3, "rank 0 left at step %llu",
              (unsigned long long)o[0].end_step[0]);
    CHECK_MSG(strstr(o[0].end_text[0], "all-reduce failed: ncclAllReduce: "), "%s",
              o[0].end_text[0]);
    CHECK(o[1].ends == 0);
    printf("  rank 1 gone after step 3: rank 0 left at %.2f s: %s\n", o[0].end_s[0],
           o[0].end_text[0]);
}

/* Whether a GPU (or the emulator) and libnccl are usable, asked in a
 * child: CUDA does not survive a fork, and a child that loads NCCL itself
 * is what no_lib needs. Writes what it found, or why not, to `what`. */
static int probe(char *what, size_t what_len, bool *emu) {
    int p[2];
    if (pipe(p) != 0)
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        char why[512], line[1024];
        sl_nn_backend_t *be = NULL;
        int rc = 0;
        if (sl_nn_backend_open("cuda", 1, &be, why, sizeof why) != SL_OK) {
            snprintf(line, sizeof line, "%s", why);
            rc = 1;
        } else if (sl_nccl_load(why, sizeof why) != SL_OK) {
            snprintf(line, sizeof line, "%s", why);
            rc = 1;
        } else {
            snprintf(line, sizeof line, "%s; nccl %d", sl_nn_backend_desc(be),
                     sl_nccl_version());
        }
        sl_nn_backend_destroy(&be);
        ssize_t w = write(p[1], line, strlen(line));
        (void)w;
        _exit(rc);
    }
    close(p[1]);
    ssize_t n = read(p[0], what, what_len - 1);
    what[n > 0 ? n : 0] = '\0';
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    *emu = strstr(what, "emulation") != NULL;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_init_fails(void) {
    int ports[2];
    take_ports(ports, 2);
    rank_spec_t rs[2] = {spec(0, 2, ports, "cuda"), spec(1, 2, ports, "cuda")};
    rs[1].fail_init = true;
    rs[0].nccl_timeout_ms = rs[1].nccl_timeout_ms = 1500;
    rank_out_t o[2];
    run_ranks(rs, 2, o);
    for (int i = 0; i < 2; i++) {
        CHECK_MSG(o[i].ring_worlds == 1 && o[i].nccl_worlds == 0,
                  "rank %d: not the ring; its log:\n%s", i, o[i].logs);
        check_done(&o[i], i, 0);
    }
    check_equal(o, 2, 0, STEPS);
    CHECK_MSG(strstr(o[1].logs, "no nccl communicator here: ncclCommInitRankConfig: "
                                "unhandled system error (emulated) (2): creation failed"),
              "rank 1's log:\n%s", o[1].logs);
    CHECK_MSG(strstr(o[0].logs, "no nccl communicator here: ncclCommInitRankConfig: not done "
                                "after 1500 ms"),
              "rank 0's log:\n%s", o[0].logs);
}

static void test_stopped(void) {
    int ports[2];
    take_ports(ports, 2);
    rank_spec_t rs[2] = {spec(0, 2, ports, "cuda"), spec(1, 2, ports, "cuda")};
    rs[1].stop_at = 3;
    rs[0].nccl_timeout_ms = rs[1].nccl_timeout_ms = 1500;
    rank_out_t o[2];
    run_ranks(rs, 2, o);
    CHECK_MSG(o[0].nccl_worlds == 1, "no world over nccl; the log:\n%s", o[0].logs);
    CHECK_MSG(o[0].ends == 1 && o[0].end_kind[0] == SL_ETEV_LEFT &&
                  o[0].end_err[0] == SL_ETIMEDOUT,
              "rank 0 did not leave on a timeout (%d ends, event %d, err %d): %s", o[0].ends,
              o[0].end_kind[0], o[0].end_err[0], o[0].end_text[0]);
    CHECK_MSG(o[0].end_step[0] == 3, "rank 0 left at step %llu",
              (unsigned long long)o[0].end_step[0]);
    CHECK_MSG(strstr(o[0].end_text[0], "ncclAllReduce: not done after 1500 ms"), "%s",
              o[0].end_text[0]);
}

int main(void) {
    CHECK_OK(sl_init());
    char why[512];
    bool emu = false;
    if (probe(why, sizeof why, &emu) != 0) {
        printf("skipped: %s\n", why);
        return SL_TEST_SKIP;
    }
    printf("device: %s%s\n", why, emu ? " (the emulation: STARLING_NCCL_LIB)" : "");
    sl_nn_data_t *train = NULL, *test = NULL;
    sl_err err = sl_nn_data_load("fashion-mnist", &train, &test, why, sizeof why);
    if (err != SL_OK || !test || !train->images_u8) {
        printf("skipped: %s\n", err != SL_OK ? why : "no byte images or test set");
        return SL_TEST_SKIP;
    }
    snprintf(dir, sizeof dir, "/tmp/sl_elastic_nccl_XXXXXX");
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
             "{\"kind\": \"elastic\", \"name\": \"n\", \"seed\": 5, "
             "\"nodes\": {\"min\": 1, \"max\": 2}, "
             "\"trainer\": {\"type\": \"builtin\", \"model\": \"mlp:32,bn\"}, "
             "\"dataset\": {\"name\": \"%s\", \"val_split\": 0.1}, \"epochs\": 2, "
             "\"global_batch\": 100, \"optimizer\": {\"type\": \"adam\", \"lr\": 0.003}, "
             "\"checkpoint_every\": 100}",
             sub);
    CHECK_OK(sl_elastic_job_parse(text, strlen(text), &job, why, sizeof why));
    CHECK_OK(sl_elastic_job_id(&job, job_id));
    next_port = 20000 + (int)(getpid() % 500) * 24 + 12; /* beside elastic_trainer_test's */
    sl_test_run("nccl_1", test_nccl_1);
    if (emu) { /* NCCL refuses two ranks on one GPU */
        sl_test_run("nccl_2", test_nccl_2);
        sl_test_run("change", test_change);
        sl_test_run("cpu_member", test_cpu_member);
        sl_test_run("no_lib", test_no_lib);
        sl_test_run("off", test_off);
        sl_test_run("keyed", test_keyed);
        sl_test_run("kill", test_kill);
        sl_test_run("init_fails", test_init_fails);
        sl_test_run("stopped", test_stopped);
    }
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    if (system(text) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return sl_test_finish();
}
