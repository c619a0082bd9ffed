/* The elastic command worker (src/elastic/command.c): the environment a
 * command sees (torchrun's names), its output as LOG events, its exit
 * status, a stop's SIGTERM honoured, SIGKILL once the grace has passed, a
 * command's other processes dying with it, and a command that cannot
 * start. Every wait is for a condition (an event, a file, a process's
 * end) with a deadline. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elastic/command.h"
#include "starling/platform.h"
#include "testlib.h"

#define DEADLINE_MS 20000 /* for anything the tests wait for */

static char dir[256]; /* the tests' scratch directory */
static int wake[2];   /* the workers' wake_fd */

/* What a worker reported. */
typedef struct {
    char log[32768];   /* LOG lines, newline-separated */
    int lines;         /* how many */
    bool ended;        /* END seen */
    int status;        /* END: status */
    bool stopped;      /* END: stopped */
    char reason[512];  /* END: text */
} seen_t;

static uint64_t now_ms(void) { return sl_plat_now_ns() / 1000000ull; }

static void drain(sl_elastic_command_t *c, seen_t *s) {
    sl_ecev_t *ev;
    while ((ev = sl_elastic_command_pop(c))) {
        if (ev->kind == SL_ECEV_LOG) {
            size_t n = strlen(s->log);
            snprintf(s->log + n, sizeof s->log - n, "%s\n", ev->text);
            s->lines++;
        } else {
            CHECK(!s->ended); /* one END */
            s->ended = true;
            s->status = ev->status;
            s->stopped = ev->stopped;
            snprintf(s->reason, sizeof s->reason, "%s", ev->text);
        }
        sl_free(ev);
    }
}

/* Waits on the wake pipe (the workers write a byte per event) until
 * `want` is in every worker's log ("" for END); false at the deadline. */
static bool wait_for_ms(sl_elastic_command_t **c, seen_t *s, int count, const char *want,
                        uint64_t deadline_ms) {
    uint64_t end = now_ms() + deadline_ms;
    for (;;) {
        int done = 0;
        for (int i = 0; i < count; i++) {
            drain(c[i], &s[i]);
            done += want[0] ? strstr(s[i].log, want) != NULL : s[i].ended;
        }
        if (done == count)
            return true;
        if (now_ms() >= end)
            return false;
        struct pollfd p = {wake[0], POLLIN, 0};
        if (poll(&p, 1, 1000) > 0) {
            char b[256];
            ssize_t n = read(wake[0], b, sizeof b);
            (void)n;
        }
    }
}

/* The same for one worker and a whole line. */
static bool wait_for(sl_elastic_command_t *c, seen_t *s, const char *line) {
    char want[300];
    snprintf(want, sizeof want, "%s%s", line, line[0] ? "\n" : "");
    return wait_for_ms(&c, s, 1, want, DEADLINE_MS);
}

static void cfg_init(sl_elastic_command_cfg_t *cfg, const char *command, uint32_t grace_s) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->command, sizeof cfg->command, "%s", command);
    cfg->stop_grace_s = grace_s;
    snprintf(cfg->job_id, sizeof cfg->job_id, "0123456789abcdef");
    cfg->round = 42;
    cfg->rank = 2;
    cfg->world_size = 3;
    cfg->restart_count = 5;
    snprintf(cfg->master_addr, sizeof cfg->master_addr, "10.1.2.3");
    cfg->master_port = 29517;
    snprintf(cfg->checkpoint_dir, sizeof cfg->checkpoint_dir, "%s/ckpt", dir);
    snprintf(cfg->cwd, sizeof cfg->cwd, "%s", dir);
    cfg->wake_fd = wake[1];
}

/* Runs `command` to its end (or stops it once `ready` is logged, when
 * given); returns the ms from the stop (or the start) to the END. */
static uint64_t run(const char *command, uint32_t grace_s, const char *ready, seen_t *s) {
    memset(s, 0, sizeof *s);
    sl_elastic_command_cfg_t cfg;
    cfg_init(&cfg, command, grace_s);
    sl_elastic_command_t *c = NULL;
    CHECK_OK(sl_elastic_command_start(&cfg, &c));
    if (!c)
        return 0;
    uint64_t t0 = now_ms();
    if (ready) {
        CHECK_MSG(wait_for(c, s, ready), "no \"%s\" from: %s\nlog: %s", ready, command, s->log);
        t0 = now_ms();
        sl_elastic_command_stop(c);
        sl_elastic_command_stop(c); /* (twice: one SIGTERM, one grace) */
    }
    CHECK_MSG(wait_for(c, s, ""), "no END from: %s\nlog: %s", command, s->log);
    uint64_t ms = now_ms() - t0;
    CHECK(sl_elastic_command_ended(c));
    drain(c, s);
    sl_elastic_command_destroy(&c);
    CHECK(c == NULL);
    return ms;
}

/* Reads `name` in the scratch directory; "" when missing. */
static void read_text(const char *name, char *out, size_t cap) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t len = 0;
    uint8_t *data = sl_test_read_file(path, &len);
    snprintf(out, cap, "%s", data ? (const char *)data : "");
    free(data);
}

/* The value of NAME in an `env` listing, or NULL. */
static const char *env_get(const char *listing, const char *name, char *out, size_t cap) {
    size_t nl = strlen(name);
    for (const char *p = listing; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (!strncmp(p, name, nl) && p[nl] == '=') {
            const char *v = p + nl + 1, *e = strchr(v, '\n');
            snprintf(out, cap, "%.*s", e ? (int)(e - v) : (int)strlen(v), v);
            return out;
        }
    }
    return NULL;
}

/* Lines of `listing` that start with `prefix`. */
static int count_lines(const char *listing, const char *prefix) {
    int n = 0;
    for (const char *p = listing; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        n += !strncmp(p, prefix, strlen(prefix));
    return n;
}

/* Whether process `pid` is gone (or a zombie, which runs nothing). */
static bool gone(pid_t pid) {
    char path[64], st[512] = "";
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    size_t n = fread(st, 1, sizeof st - 1, f);
    fclose(f);
    st[n] = 0;
    const char *paren = strrchr(st, ')');
    return paren && (paren[2] == 'Z' || paren[2] == 'X');
}

static bool wait_gone(pid_t pid) {
    uint64_t end = now_ms() + DEADLINE_MS;
    while (!gone(pid)) {
        if (now_ms() >= end)
            return false;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL); /* polling a process's end: nothing to wait on */
    }
    return true;
}

static void test_environment(void) {
    /* inherited values of torchrun's names are replaced, an inherited
       error file is removed, the rest of the peer's environment stays */
    setenv("RANK", "99", 1);
    setenv("TORCHELASTIC_ERROR_FILE", "/nonexistent/error.json", 1);
    setenv("SL_TEST_INHERITED", "kept", 1);
    unsetenv("NCCL_ASYNC_ERROR_HANDLING");
    unsetenv("PYTHONUNBUFFERED");
    seen_t s;
    run("env > env.txt; pwd > pwd.txt", 10, NULL, &s);
    CHECK_INT(s.status, 0);
    CHECK(!s.stopped);
    char listing[65536], v[700];
    read_text("env.txt", listing, sizeof listing);
    char ckpt[300];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    const char *want[][2] = {
        {"RANK", "2"},
        {"GROUP_RANK", "2"},
        {"ROLE_RANK", "2"},
        {"LOCAL_RANK", "0"},
        {"WORLD_SIZE", "3"},
        {"GROUP_WORLD_SIZE", "3"},
        {"ROLE_WORLD_SIZE", "3"},
        {"LOCAL_WORLD_SIZE", "1"},
        {"ROLE_NAME", "default"},
        {"MASTER_ADDR", "10.1.2.3"},
        {"MASTER_PORT", "29517"},
        {"TORCHELASTIC_RESTART_COUNT", "5"},
        {"TORCHELASTIC_MAX_RESTARTS", "0"},
        {"TORCHELASTIC_RUN_ID", "0123456789abcdef"},
        {"TORCHELASTIC_USE_AGENT_STORE", "False"},
        {"NCCL_ASYNC_ERROR_HANDLING", "1"},
        {"PYTHONUNBUFFERED", "1"},
        {"STARLING_JOB", "0123456789abcdef"},
        {"STARLING_ROUND", "42"},
        {"STARLING_CHECKPOINT_DIR", ckpt},
        {"SL_TEST_INHERITED", "kept"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *got = env_get(listing, want[i][0], v, sizeof v);
        CHECK_MSG(got && !strcmp(got, want[i][1]), "%s: \"%s\", want \"%s\"", want[i][0],
                  got ? got : "(unset)", want[i][1]);
    }
    CHECK(env_get(listing, "TORCHELASTIC_ERROR_FILE", v, sizeof v) == NULL);
    CHECK_INT(count_lines(listing, "RANK="), 1); /* replaced, not added */
    /* the working directory is cfg.cwd */
    char pwd[400], want_pwd[400];
    read_text("pwd.txt", pwd, sizeof pwd);
    snprintf(want_pwd, sizeof want_pwd, "%s\n", dir);
    CHECK_STR(pwd, want_pwd);
    /* a peer's own setting of NCCL_ASYNC_ERROR_HANDLING is kept */
    setenv("NCCL_ASYNC_ERROR_HANDLING", "0", 1);
    run("env > env.txt", 10, NULL, &s);
    read_text("env.txt", listing, sizeof listing);
    CHECK_STR(env_get(listing, "NCCL_ASYNC_ERROR_HANDLING", v, sizeof v), "0");
    unsetenv("NCCL_ASYNC_ERROR_HANDLING");
    unsetenv("RANK");
    unsetenv("TORCHELASTIC_ERROR_FILE");
    unsetenv("SL_TEST_INHERITED");
}

static void test_output_and_status(void) {
    seen_t s;
    run("echo one; echo two >&2; printf 'three'", 10, NULL, &s);
    CHECK_STR(s.log, "one\ntwo\nthree\n");
    CHECK_INT(s.status, 0);
    CHECK(!s.stopped);
    CHECK_STR(s.reason, "exited with status 0");
    run("echo failing; exit 3", 10, NULL, &s);
    CHECK_STR(s.log, "failing\n");
    CHECK_INT(s.status, 3);
    CHECK_STR(s.reason, "exited with status 3");
    /* a line longer than an event comes in pieces, none lost */
    run("head -c 1200 /dev/zero | tr '\\0' x; echo; echo after", 10, NULL, &s);
    CHECK_INT(s.lines, 4); /* 511 + 511 + 178, then "after" */
    CHECK(strstr(s.log, "\nafter\n") != NULL);
    CHECK_INT((int)strlen(s.log), 1200 + 3 + 6);
    /* killed by a signal: 128 + the signal */
    run("sh -c 'kill -USR1 $$'", 10, NULL, &s);
    CHECK_INT(s.status, 128 + SIGUSR1);
}

/* (Each command below says "ready" from the program that the SIGTERM is
 * for, once that program is running: a SIGTERM that comes while the
 * command's shell is between two programs ends the shell after the one
 * it runs then, which would make the tests depend on timing.) */
static void test_stop_term(void) {
    seen_t s;
    /* the default action: the program dies by SIGTERM, and so the command */
    uint64_t ms = run("sh -c 'echo ready; sleep 60'", 10, "ready", &s);
    CHECK_INT(s.status, 128 + SIGTERM);
    CHECK(s.stopped);
    CHECK_MSG(ms < 9000, "a SIGTERM took %llu ms", (unsigned long long)ms);
    /* a program that handles SIGTERM (checkpoints, exits) ends its own way */
    ms = run("sh -c 'trap \"echo saving; exit 5\" TERM; echo ready; sleep 60 & wait'", 10,
             "ready", &s);
    CHECK_INT(s.status, 5);
    CHECK(s.stopped);
    CHECK(strstr(s.log, "saving\n") != NULL);
    CHECK_MSG(ms < 9000, "a handled SIGTERM took %llu ms", (unsigned long long)ms);
    /* ... and takes its time (within the grace): the command's shell waits
       for it, runs nothing after it and ends with its status */
    ms = run("sh -c 'trap \"sleep 0.3; echo saved; exit 0\" TERM; echo ready; sleep 60 & "
             "wait'; echo after",
             10, "ready", &s);
    CHECK_MSG(strstr(s.log, "saved\n") != NULL && strstr(s.log, "after") == NULL, "log: %s",
              s.log);
    CHECK_INT(s.status, 0);
    CHECK(s.stopped);
    CHECK(ms >= 300);
    run("sh -c 'echo ready; sleep 60'; echo after", 10, "ready", &s);
    CHECK(strstr(s.log, "after") == NULL);
    CHECK_INT(s.status, 128 + SIGTERM);
}

static void test_stop_kill_after_grace(void) {
    seen_t s;
    uint64_t ms = run("trap 'echo ignoring TERM' TERM; echo ready; "
                      "while :; do sleep 0.05; done",
                      1, "ready", &s);
    CHECK_INT(s.status, 128 + SIGKILL);
    CHECK(s.stopped);
    CHECK_MSG(strstr(s.reason, "grace") != NULL, "reason: %s", s.reason);
    CHECK_MSG(ms >= 1000 && ms < 9000, "SIGKILL %llu ms after the stop, grace 1 s",
              (unsigned long long)ms);
    CHECK(strstr(s.log, "ignoring TERM\n") != NULL);
}

static void test_group_dies(void) {
    seen_t s;
    char pid_text[64];
    /* stopped: a child that ignores SIGTERM dies too (SIGKILL to the
       group after the grace) */
    run("sh -c 'trap \"\" TERM; exec sleep 300' & echo $! > child.pid; echo ready; wait", 1,
        "ready", &s);
    CHECK(s.stopped);
    read_text("child.pid", pid_text, sizeof pid_text);
    pid_t child = (pid_t)atoi(pid_text);
    CHECK(child > 0);
    CHECK_MSG(child > 0 && wait_gone(child), "the command's child %d lives on", (int)child);
    /* ended on its own: what it left behind dies with it */
    run("sleep 300 & echo $! > child.pid; echo started", 10, NULL, &s);
    CHECK_INT(s.status, 0);
    CHECK(!s.stopped);
    read_text("child.pid", pid_text, sizeof pid_text);
    child = (pid_t)atoi(pid_text);
    CHECK(child > 0);
    CHECK_MSG(child > 0 && wait_gone(child), "the command's leftover %d lives on", (int)child);
}

static void test_destroy_kills(void) {
    sl_elastic_command_cfg_t cfg;
    cfg_init(&cfg, "trap '' TERM; echo $$ > shell.pid; echo ready; sleep 300", 600);
    sl_elastic_command_t *c = NULL;
    CHECK_OK(sl_elastic_command_start(&cfg, &c));
    seen_t s;
    memset(&s, 0, sizeof s);
    CHECK(wait_for(c, &s, "ready"));
    char pid_text[64];
    read_text("shell.pid", pid_text, sizeof pid_text);
    pid_t shell = (pid_t)atoi(pid_text);
    uint64_t t0 = now_ms();
    sl_elastic_command_destroy(&c); /* SIGKILL at once, not after 600 s */
    CHECK(c == NULL);
    CHECK_MSG(now_ms() - t0 < 9000, "destroy took %llu ms", (unsigned long long)(now_ms() - t0));
    CHECK(shell > 0 && wait_gone(shell));
    sl_elastic_command_destroy(&c); /* idempotent */
}

static void test_cannot_start(void) {
    sl_elastic_command_cfg_t cfg;
    cfg_init(&cfg, "echo never", 10);
    snprintf(cfg.cwd, sizeof cfg.cwd, "%s/no-such-directory", dir);
    sl_elastic_command_t *c = NULL;
    CHECK_OK(sl_elastic_command_start(&cfg, &c));
    seen_t s;
    memset(&s, 0, sizeof s);
    CHECK(wait_for(c, &s, ""));
    CHECK_INT(s.status, 127);
    CHECK_MSG(strstr(s.log, "working directory") != NULL, "log: %s", s.log);
    CHECK(strstr(s.log, "never") == NULL);
    sl_elastic_command_destroy(&c);
}

/* The peer dies (kill -9): the command's programs die with it, even one
 * that ignores SIGTERM and SIGHUP (the shell's parent-death signal makes
 * it kill the whole group). The "peer" is a forked copy of this test. */
static void test_peer_death(void) {
    char path[400];
    snprintf(path, sizeof path, "%s/prog.pid", dir);
    unlink(path);
    pid_t peer = fork();
    if (peer == 0) {
        sl_elastic_command_cfg_t cfg;
        cfg_init(&cfg,
                 "sh -c 'trap \"\" TERM HUP; echo $$ > prog.tmp && mv prog.tmp prog.pid; "
                 "exec sleep 300'",
                 600);
        cfg.wake_fd = 0;
        sl_elastic_command_t *c = NULL;
        if (sl_elastic_command_start(&cfg, &c) != SL_OK)
            _exit(1);
        for (;;)
            pause();
    }
    CHECK(peer > 0);
    if (peer <= 0)
        return;
    uint64_t end = now_ms() + DEADLINE_MS;
    while (access(path, R_OK) != 0 && now_ms() < end) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL); /* polling for a file: nothing to wait on */
    }
    char pid_text[64];
    read_text("prog.pid", pid_text, sizeof pid_text);
    pid_t prog = (pid_t)atoi(pid_text);
    kill(peer, SIGKILL);
    int ws;
    waitpid(peer, &ws, 0);
    CHECK_MSG(prog > 0, "the command never started");
    CHECK_MSG(prog > 0 && wait_gone(prog), "the command's program %d outlived its peer",
              (int)prog);
}

/* A TCP port on 127.0.0.1 that nothing listens on now, from this
 * process's own stretch of 20000-32767 (below the kernel's ephemeral
 * ports): a fixed MASTER_PORT met another program's store on a shared
 * machine, and gloo then dialled that program's ranks. */
static uint16_t free_port(void) {
    for (int i = 0; i < 4000; i++) {
        uint16_t port = (uint16_t)(20000 + ((unsigned)getpid() * 7u + (unsigned)i * 13u) % 12768u);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            return 0;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        close(fd);
        if (ok)
            return port;
    }
    return 0;
}

/* peers/examples/torch_ddp_train.py, written for torchrun, as two ranks
 * of a world: stopped mid-way (SIGTERM: the ranks agree on a step, rank 0
 * checkpoints it, both exit 0), then started again as the next world,
 * which resumes from rank 0's checkpoint and trains to the end. Skipped
 * where Debian's python3 has no torch or the data set is missing. */
static void test_torch_script(void) {
    if (system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0 ||
        access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK) != 0) {
        printf("     (skipped: no torch in /usr/bin/python3 or no dataset-fashion-mnist)\n");
        return;
    }
    char rel[400], script[PATH_MAX], command[1024];
    sl_test_source_path("peers/examples/torch_ddp_train.py", rel, sizeof rel);
    CHECK(realpath(rel, script) != NULL);
    snprintf(command, sizeof command,
             "/usr/bin/python3 %.900s --epochs 20 --limit 6000 --log-every 5 --checkpoint-every 0 "
             "--threads 1",
             script);
    int resumed_at = -1;
    for (int world = 0; world < 2; world++) {
        sl_elastic_command_t *c[2] = {NULL, NULL};
        uint16_t master_port = free_port();
        CHECK_MSG(master_port != 0, "no free port for rank 0's store");
        seen_t s[2];
        memset(s, 0, sizeof s);
        for (int r = 0; r < 2; r++) {
            sl_elastic_command_cfg_t cfg;
            cfg_init(&cfg, command, 30);
            cfg.rank = (uint32_t)r;
            cfg.world_size = 2;
            cfg.round = (uint64_t)world + 1;
            cfg.restart_count = (uint32_t)world;
            snprintf(cfg.master_addr, sizeof cfg.master_addr, "127.0.0.1");
            cfg.master_port = master_port;
            snprintf(cfg.checkpoint_dir, sizeof cfg.checkpoint_dir, "%s/torch-%d", dir, r);
            CHECK_OK(sl_plat_mkdirs(cfg.checkpoint_dir, 0700));
            CHECK_OK(sl_elastic_command_start(&cfg, &c[r]));
        }
        if (world == 0) {
            CHECK_MSG(wait_for_ms(c, s, 1, "\nstep 10 loss ", 120000), "rank 0: %s", s[0].log);
            sl_elastic_command_stop(c[0]);
            sl_elastic_command_stop(c[1]);
        }
        CHECK_MSG(wait_for_ms(c, s, 2, "", 120000), "rank 0: %s\nrank 1: %s", s[0].log,
                  s[1].log);
        for (int r = 0; r < 2; r++) {
            CHECK_MSG(s[r].status == 0, "rank %d: %s\n%s", r, s[r].reason, s[r].log);
            CHECK(s[r].stopped == (world == 0));
            sl_elastic_command_destroy(&c[r]);
        }
        const char *at = strstr(s[0].log, world == 0 ? "stopped by SIGTERM at step "
                                                     : "rank 0 of 2: resumed at step ");
        CHECK_MSG(at != NULL, "rank 0: %s", s[0].log);
        const char *num = at ? strstr(at, "at step ") : NULL;
        int step = num ? atoi(num + strlen("at step ")) : -1;
        if (world == 0) {
            resumed_at = step;
            CHECK(step >= 10 && step < 620);
        } else {
            CHECK_INT(step, resumed_at);
            CHECK_MSG(strstr(s[0].log, "step 620 loss ") && strstr(s[0].log, "\ntest_acc 0."),
                      "rank 0: %s", s[0].log);
            CHECK(strstr(s[1].log, "rank 1 of 2: resumed at step ") != NULL);
        }
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/sl_elastic_command_%d", (int)getpid());
    char ckpt[300];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    if (sl_plat_mkdirs(ckpt, 0700) != SL_OK || pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "cannot make %s or a pipe\n", ckpt);
        return 1;
    }
    sl_test_run("environment", test_environment);
    sl_test_run("output_and_status", test_output_and_status);
    sl_test_run("stop_term", test_stop_term);
    sl_test_run("stop_kill_after_grace", test_stop_kill_after_grace);
    sl_test_run("group_dies", test_group_dies);
    sl_test_run("destroy_kills", test_destroy_kills);
    sl_test_run("cannot_start", test_cannot_start);
    sl_test_run("peer_death", test_peer_death);
    sl_test_run("torch_script", test_torch_script);
    sl_plat_remove_tree(dir);
    return sl_test_finish();
}
