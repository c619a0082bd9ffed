/* An elastic command job's worker: the command under sl_plat_spawn with
 * torchrun's environment, a thread that reads its output into LOG events,
 * stops it (SIGTERM, then SIGKILL after the grace) and reaps it. See
 * command.h. */
#include "elastic/command.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "platform/process.h"
#include "starling/platform.h"

#define COMMAND_STACK_LEN (256u << 10) /* the thread only reads a pipe */
#define POLL_MS 50                     /* how often the thread looks for the child's end */
#define DRAIN_MS 1000                  /* output read after the end, at most */

struct sl_elastic_command {
    sl_elastic_command_cfg_t cfg; /* what to run (a copy) */
    pthread_t thread;             /* reads, stops and reaps */
    pthread_mutex_t mu;           /* guards the fields below */
    sl_ecev_t *head;              /* queue: oldest first */
    sl_ecev_t *tail;              /* queue: newest */
    pid_t pid;                    /* the child's process group while it is unreaped, else 0 */
    bool stopping;                /* sl_elastic_command_stop was called */
    uint64_t stop_ns;             /* when (monotonic) */
    bool term_sent;               /* SIGTERM went to the group */
    bool kill_now;                /* destroy: SIGKILL without the grace */
    bool ended;                   /* the END event is queued */
};

/* Queues an event (END also marks the worker ended) and writes a byte on
 * wake_fd, as the study worker does (a full pipe already holds a
 * wake-up). */
static void push(sl_elastic_command_t *c, sl_ecev_kind kind, const char *text, int status) {
    sl_ecev_t *ev = sl_calloc(1, sizeof *ev);
    pthread_mutex_lock(&c->mu);
    if (ev) { /* (out of memory: a lost line; an END still ends the worker) */
        ev->kind = kind;
        ev->status = status;
        ev->stopped = c->stopping;
        snprintf(ev->text, sizeof ev->text, "%s", text);
        if (c->tail)
            c->tail->next = ev;
        else
            c->head = ev;
        c->tail = ev;
    }
    if (kind == SL_ECEV_END)
        c->ended = true;
    pthread_mutex_unlock(&c->mu);
    if (c->cfg.wake_fd > 0)
        sl_plat_wake(c->cfg.wake_fd);
}

static bool on_line(void *arg, char *text, size_t len) {
    push(arg, SL_ECEV_LOG, text, 0);
    return true;
}

/* Sends what stop and destroy asked for and the grace allows; under mu.
 * Returns how long until the SIGKILL is due (ms), or -1 when none is. */
static int signal_locked(sl_elastic_command_t *c) {
    if (!c->pid)
        return -1;
    if (c->kill_now) {
        sl_plat_kill_group(c->pid);
        return -1;
    }
    if (!c->stopping)
        return -1;
    if (!c->term_sent) {
        sl_plat_term_group(c->pid);
        c->term_sent = true;
    }
    uint64_t due = c->stop_ns + (uint64_t)c->cfg.stop_grace_s * 1000000000ull;
    uint64_t now = sl_plat_now_ns();
    if (now >= due) {
        sl_plat_kill_group(c->pid);
        return -1;
    }
    return (int)((due - now) / 1000000ull) + 1;
}

#define ENV_COUNT 21 /* variables build_env sets or unsets */

/* torchrun's environment (command.h; docs/elastic.md "Command jobs"). */
typedef struct {
    char rank[16], world[16], restarts[16], port[8], round[24];
} env_text_t;

static size_t build_env(const sl_elastic_command_cfg_t *cfg, env_text_t *t, sl_plat_env_t *env) {
    snprintf(t->rank, sizeof t->rank, "%u", (unsigned)cfg->rank);
    snprintf(t->world, sizeof t->world, "%u", (unsigned)cfg->world_size);
    snprintf(t->restarts, sizeof t->restarts, "%u", (unsigned)cfg->restart_count);
    snprintf(t->port, sizeof t->port, "%u", (unsigned)cfg->master_port);
    snprintf(t->round, sizeof t->round, "%" PRIu64, cfg->round);
    /* (getenv from this thread: the peer sets no variables once it runs) */
    const char *nccl = sl_plat_getenv("NCCL_ASYNC_ERROR_HANDLING");
    const char *unbuffered = sl_plat_getenv("PYTHONUNBUFFERED");
    const sl_plat_env_t all[] = {
        {"RANK", t->rank},
        {"GROUP_RANK", t->rank},
        {"ROLE_RANK", t->rank},
        {"LOCAL_RANK", "0"},
        {"WORLD_SIZE", t->world},
        {"GROUP_WORLD_SIZE", t->world},
        {"ROLE_WORLD_SIZE", t->world},
        {"LOCAL_WORLD_SIZE", "1"},
        {"ROLE_NAME", "default"},
        {"MASTER_ADDR", cfg->master_addr},
        {"MASTER_PORT", t->port},
        {"TORCHELASTIC_RESTART_COUNT", t->restarts},
        {"TORCHELASTIC_MAX_RESTARTS", "0"},
        {"TORCHELASTIC_RUN_ID", cfg->job_id},
        {"TORCHELASTIC_USE_AGENT_STORE", "False"},
        {"TORCHELASTIC_ERROR_FILE", NULL},
        {"NCCL_ASYNC_ERROR_HANDLING", nccl && nccl[0] ? nccl : "1"},
        {"PYTHONUNBUFFERED", unbuffered && unbuffered[0] ? unbuffered : "1"},
        {"STARLING_JOB", cfg->job_id},
        {"STARLING_ROUND", t->round},
        {"STARLING_CHECKPOINT_DIR", cfg->checkpoint_dir},
    };
    _Static_assert(sizeof all / sizeof all[0] == ENV_COUNT, "ENV_COUNT is build_env's count");
    memcpy(env, all, sizeof all);
    return ENV_COUNT;
}

/* The END event's words and status (exit code, or 128 + signal). */
static void end_text(int ws, bool term_sent, int *status, char *text, size_t cap) {
    if (sl_plat_exit_code(ws) >= 0) {
        *status = sl_plat_exit_code(ws);
        snprintf(text, cap, "exited with status %d", *status);
    } else if (sl_plat_exit_signal(ws) > 0) {
        int sig = sl_plat_exit_signal(ws);
        *status = 128 + sig;
        snprintf(text, cap, "killed by signal %d (%s)%s", sig, strsignal(sig),
                 sig == SIGKILL && term_sent
                     ? ", still running when the stop's grace ran out"
                     : "");
    } else {
        *status = 128 + SIGKILL;
        snprintf(text, cap, "lost (not a child of this peer any more)");
    }
}

static void *thread_main(void *arg) {
    sl_elastic_command_t *c = arg;
    char text[512];
    int fds[2] = {-1, -1};
    if (sl_plat_pipe(fds) != SL_OK) {
        push(c, SL_ECEV_END, "cannot start: pipe failed", 127);
        return NULL;
    }
    env_text_t et;
    sl_plat_env_t env[ENV_COUNT];
    size_t n = build_env(&c->cfg, &et, env);
    sl_plat_spawn_t sp = {.command = c->cfg.command,
                          .name = "starling-elastic",
                          .env = env,
                          .env_count = n,
                          .cwd = c->cfg.cwd,
                          .out_fd = fds[1]};
    pid_t pid = 0;
    sl_err err = sl_plat_spawn(&sp, &pid);
    sl_plat_close(fds[1]);
    if (err != SL_OK) {
        sl_plat_close(fds[0]);
        snprintf(text, sizeof text, "cannot start: %s", sl_strerror(err));
        push(c, SL_ECEV_END, text, 127);
        return NULL;
    }
    pthread_mutex_lock(&c->mu);
    c->pid = pid;
    int wait_ms = signal_locked(c); /* a stop that came before the child */
    pthread_mutex_unlock(&c->mu);
    char buf[sizeof ((sl_ecev_t *)0)->text];
    sl_plat_lines_t lines = {.buf = buf, .cap = sizeof buf};
    bool open = true;
    /* The output until the child (the supervisor shell) ends, looking
       for its end every POLL_MS: the pipe's end of file is no sign of it
       (a command's leftover can hold the pipe, and a command may close its
       output and go on). */
    while (!sl_plat_child_ended(pid)) {
        int ms = wait_ms >= 0 && wait_ms < POLL_MS ? wait_ms : POLL_MS;
        /* (a closed pipe: -1, which only waits the ms) */
        if (sl_plat_readable(open ? fds[0] : -1, ms) &&
            !sl_plat_lines_read(&lines, fds[0], on_line, c))
            open = false;
        pthread_mutex_lock(&c->mu);
        wait_ms = signal_locked(c);
        pthread_mutex_unlock(&c->mu);
    }
    /* what is left of its group dies with it; then the rest of the output */
    sl_plat_kill_group(pid);
    uint64_t end = sl_plat_now_ns() + DRAIN_MS * 1000000ull;
    while (open && sl_plat_now_ns() < end) {
        if (sl_plat_readable(fds[0], DRAIN_MS) && !sl_plat_lines_read(&lines, fds[0], on_line, c))
            open = false;
    }
    sl_plat_close(fds[0]);
    pthread_mutex_lock(&c->mu);
    c->pid = 0; /* reaped below: its id may be reused from then on */
    bool term_sent = c->term_sent;
    pthread_mutex_unlock(&c->mu);
    int ws = sl_plat_reap(pid, 0);
    int status;
    end_text(ws, term_sent, &status, text, sizeof text);
    push(c, SL_ECEV_END, text, status);
    return NULL;
}

sl_err sl_elastic_command_start(const sl_elastic_command_cfg_t *cfg, sl_elastic_command_t **out) {
    sl_elastic_command_t *c = sl_calloc(1, sizeof *c);
    if (!c)
        return SL_ENOMEM;
    c->cfg = *cfg;
    pthread_mutex_init(&c->mu, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, COMMAND_STACK_LEN);
    int rc = pthread_create(&c->thread, &attr, thread_main, c);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_destroy(&c->mu);
        sl_free(c);
        return SL_ENOMEM;
    }
    *out = c;
    return SL_OK;
}

void sl_elastic_command_stop(sl_elastic_command_t *c) {
    pthread_mutex_lock(&c->mu);
    if (!c->stopping) {
        c->stopping = true;
        c->stop_ns = sl_plat_now_ns();
        signal_locked(c);
    }
    pthread_mutex_unlock(&c->mu);
}

sl_ecev_t *sl_elastic_command_pop(sl_elastic_command_t *c) {
    pthread_mutex_lock(&c->mu);
    sl_ecev_t *ev = c->head;
    if (ev) {
        c->head = ev->next;
        if (!c->head)
            c->tail = NULL;
        ev->next = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    return ev;
}

bool sl_elastic_command_ended(sl_elastic_command_t *c) {
    pthread_mutex_lock(&c->mu);
    bool ended = c->ended;
    pthread_mutex_unlock(&c->mu);
    return ended;
}

void sl_elastic_command_destroy(sl_elastic_command_t **cp) {
    if (!cp || !*cp)
        return;
    sl_elastic_command_t *c = *cp;
    pthread_mutex_lock(&c->mu);
    if (!c->stopping) {
        c->stopping = true;
        c->stop_ns = sl_plat_now_ns();
    }
    c->kill_now = true;
    signal_locked(c);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    sl_ecev_t *ev;
    while ((ev = sl_elastic_command_pop(c)))
        sl_free(ev);
    pthread_mutex_destroy(&c->mu);
    sl_free(c);
    *cp = NULL;
}
