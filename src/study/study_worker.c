/* A trial's worker thread: the builtin trainer or a command's child
 * process. See study_worker.h. Touches processes and files (like
 * the platform layer): it is the daemon's I/O edge for trainers. */
#include "study/study_worker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pwd.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "starling/platform.h"

extern char **environ;

#define COMMAND_STACK_LEN (512u << 10) /* a command worker's thread stack */

/* Data sets shared by the builtin workers of a peer. */
struct sl_study_data {
    pthread_mutex_t mu;     /* guards the fields below */
    char name[256];         /* data set loaded ("" = none) */
    sl_nn_data_t *train;    /* training set */
    sl_nn_data_t *test;     /* test set, or NULL */
    char why[256];          /* load error, if the last load failed */
};

struct sl_study_worker {
    sl_study_job_t job;     /* what to run (a copy) */
    pthread_t thread;       /* the thread */
    pthread_mutex_t mu;     /* guards the queue */
    sl_wev_t *head;         /* queue: oldest first */
    sl_wev_t *tail;         /* queue: newest */
    atomic_bool stop;       /* asked to stop */
    atomic_bool ended;      /* the thread is done */
    atomic_int child;       /* a command's process group, 0 when none */
};

sl_err sl_study_data_new(sl_study_data_t **out) {
    sl_study_data_t *d = sl_calloc(1, sizeof *d);
    if (!d)
        return SL_ENOMEM;
    pthread_mutex_init(&d->mu, NULL);
    *out = d;
    return SL_OK;
}

void sl_study_data_destroy(sl_study_data_t **d) {
    if (!d || !*d)
        return;
    sl_nn_data_destroy(&(*d)->train);
    sl_nn_data_destroy(&(*d)->test);
    pthread_mutex_destroy(&(*d)->mu);
    sl_free(*d);
    *d = NULL;
}

/* Loads `name` once (the first worker to need it pays). */
static sl_err data_get(sl_study_data_t *d, const char *name, sl_nn_data_t **tr,
                       sl_nn_data_t **te, char *why, size_t why_len) {
    pthread_mutex_lock(&d->mu);
    sl_err err = SL_OK;
    if (strcmp(d->name, name) != 0) {
        sl_nn_data_destroy(&d->train);
        sl_nn_data_destroy(&d->test);
        d->name[0] = 0;
        err = sl_nn_data_load(name, &d->train, &d->test, why, why_len);
        if (err == SL_OK)
            snprintf(d->name, sizeof d->name, "%s", name);
    }
    *tr = d->train;
    *te = d->test;
    pthread_mutex_unlock(&d->mu);
    return err;
}

/* Wakes the peer's loop, which would otherwise see the event only at its
 * next look (a full pipe already holds a wake-up: EAGAIN is fine). */
static void wake(const sl_study_worker_t *w) {
    if (w->job.wake_fd > 0) {
        ssize_t n = write(w->job.wake_fd, "", 1);
        (void)n;
    }
}

static void push(sl_study_worker_t *w, sl_wev_t *ev) {
    ev->next = NULL;
    pthread_mutex_lock(&w->mu);
    if (w->tail)
        w->tail->next = ev;
    else
        w->head = ev;
    w->tail = ev;
    pthread_mutex_unlock(&w->mu);
    wake(w);
}

static void push_simple(sl_study_worker_t *w, sl_wev_kind kind, bool failed, const char *text) {
    sl_wev_t *ev = sl_calloc(1, sizeof *ev);
    if (!ev)
        return;
    ev->kind = kind;
    ev->failed = failed;
    /* Long texts (a command's last output lines) are cut to the event's size. */
    snprintf(ev->text, sizeof ev->text, "%.*s", (int)sizeof ev->text - 1, text);
    push(w, ev);
}

static void push_report(sl_study_worker_t *w, const sl_report_t *r) {
    sl_wev_t *ev = sl_calloc(1, sizeof *ev);
    if (!ev)
        return;
    ev->kind = SL_WEV_EPOCH;
    ev->report = *r;
    push(w, ev);
}

/* ---- the builtin trainer ---- */

static void run_builtin(sl_study_worker_t *w) {
    sl_study_job_t *j = &w->job;
    char why[256] = "", model[SL_STUDY_TEMPLATE_MAX];
    sl_nn_data_t *tr = NULL, *te = NULL;
    sl_nn_backend_t *be = NULL;
    sl_nn_trainer_t *tn = NULL;
    sl_nn_train_cfg_t cfg;
    bool failed = true;
    if (sl_study_train_cfg(&j->spec, &j->config, j->trial_id, j->target_epochs, &cfg, model,
                           sizeof model, why, sizeof why) != SL_OK)
        goto out;
    if (data_get(j->data, j->spec.dataset, &tr, &te, why, sizeof why) != SL_OK)
        goto out;
    int threads = j->threads > 0 ? j->threads : (j->spec.threads > 0 ? j->spec.threads : 1);
    if (sl_nn_backend_open("cpu", threads, &be, why, sizeof why) != SL_OK)
        goto out;
    cfg.checkpoint_dir = j->dir;
    cfg.resume = true;
    if (sl_nn_trainer_new(be, &cfg, tr, te, &tn, why, sizeof why) != SL_OK)
        goto out;
    char line[SL_STUDY_TEMPLATE_MAX + 128];
    snprintf(line, sizeof line, "builtin trainer: %s, from epoch %d to %d, %d thread(s)", model,
             sl_nn_trainer_epochs_done(tn), j->target_epochs, threads);
    push_simple(w, SL_WEV_LOG, false, line);
    while (!atomic_load(&w->stop)) {
        sl_nn_epoch_t m;
        sl_err err = sl_nn_trainer_epoch(tn, &m, why, sizeof why);
        if (err == SL_ESTATE) {
            failed = false;
            snprintf(why, sizeof why, "trained to epoch %d", j->target_epochs);
            break;
        }
        if (err != SL_OK)
            goto out;
        if (!isfinite(m.train_loss)) {
            snprintf(why, sizeof why, "diverged at epoch %d (loss %g)", m.epoch, m.train_loss);
            goto out;
        }
        sl_report_t r;
        sl_report_from_epoch(&m, sl_nn_trainer_params(tn), sl_nn_trainer_flops(tn), &r);
        char enc[SL_REPORT_LINE_MAX];
        size_t len;
        if (sl_report_encode(&r, enc, sizeof enc, &len) == SL_OK)
            push_simple(w, SL_WEV_LOG, false, enc);
        push_report(w, &r);
    }
    if (atomic_load(&w->stop)) {
        failed = false;
        snprintf(why, sizeof why, "stopped");
    }
out:
    sl_nn_trainer_destroy(&tn);
    sl_nn_backend_destroy(&be);
    push_simple(w, SL_WEV_END, failed, why[0] ? why : "failed");
}

/* ---- a command's child process ---- */

/* The trial's first process: a shell that runs the command in the
 * background, in the trial's own process group, and waits for it. Its
 * parent-death signal is SIGTERM (spawn), on which it kills its whole
 * group: a command that forks (a pipeline, a launcher, `cmd &`) dies with
 * the peer, not only its first process, which PR_SET_PDEATHSIG alone
 * would reach (the setting is not inherited across fork). A command
 * killed by a signal makes the shell end by the same signal. */
static const char SUPERVISOR[] =
    "trap 'kill -KILL 0' TERM\n"
    "c=$1; shift\n"
    "eval \"$c\" &\n"
    "wait $!\n"
    "s=$?\n"
    "if [ $s -gt 128 ] && [ $s -lt 160 ]; then trap - TERM; kill -$((s - 128)) $$; fi\n"
    "exit $s\n";

/* What the child of spawn does, all prepared before vfork (the child may
 * only make system calls: it shares the peer's memory until it execs). */
typedef struct {
    char **argv;                  /* /bin/sh's arguments */
    char **envp;                  /* its environment */
    int out_fd;                   /* its stdout and stderr */
    const sl_study_user_t *user;  /* run as this user (set) or as the peer */
    pid_t parent;                 /* the peer's pid, to see it die before PDEATHSIG is set */
} spawn_t;

static void child_fail(const char *what) {
    ssize_t n = write(2, what, strlen(what));
    (void)n;
    _exit(127);
}

/* The vfork child: own process group, stdio, the trial user, the parent-
 * death signal (after setuid, which clears it), signals as exec expects. */
static void child_run(const spawn_t *sp, const sigset_t *old_mask) {
    if (setpgid(0, 0) != 0)
        child_fail("trial spawn: setpgid failed\n");
    if (dup2(sp->out_fd, 1) < 0 || dup2(sp->out_fd, 2) < 0)
        _exit(127);
    int in = open("/dev/null", O_RDONLY);
    if (in < 0 || dup2(in, 0) < 0)
        child_fail("trial spawn: cannot open /dev/null\n");
    if (in > 2)
        close(in);
    /* raw system calls, not glibc's setgroups/setgid/setuid: those apply
       the change to every thread of the process, and the list of threads
       they walk is the peer's (this child shares its memory until exec) */
    const sl_study_user_t *u = sp->user;
    if (u->set && (syscall(SYS_setgroups, (size_t)u->group_count, u->groups) != 0 ||
                   syscall(SYS_setresgid, u->gid, u->gid, u->gid) != 0 ||
                   syscall(SYS_setresuid, u->uid, u->uid, u->uid) != 0))
        child_fail("trial spawn: cannot switch to the trial user (setgroups, setgid or setuid "
                   "failed)\n");
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0)
        child_fail("trial spawn: prctl(PR_SET_PDEATHSIG) failed\n");
    if (getppid() != sp->parent)
        _exit(127); /* the peer died before the signal was set */
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) != 0)
            continue;
        if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN) {
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = SIG_DFL;
            sigaction(sig, &sa, NULL);
        }
    }
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    execve("/bin/sh", sp->argv, sp->envp);
    child_fail("trial spawn: cannot run /bin/sh\n");
}

/* Starts the trial's supervisor shell. vfork, not fork: the peer's page
 * tables are not copied nor its pages made copy-on-write for a child that
 * execs at once (a fork cost the peer about a millisecond of CPU a trial);
 * posix_spawn (which glibc does the same way) cannot set a parent-death
 * signal nor a user. The calling thread (the worker's) lives until the
 * child is reaped: the parent-death signal follows the thread that forked,
 * not the process. Signals are blocked around vfork so that no handler of
 * the peer runs in the child. */
static pid_t spawn(spawn_t *sp) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    sp->parent = getpid();
    pid_t pid = vfork();
    if (pid == 0)
        child_run(sp, &old);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid > 0)
        setpgid(pid, pid); /* (already done by the child; harmless) */
    return pid;
}

/* Hands the trial's checkpoint directory and what a restore put in it to
 * the trial user, so that its command can write and read its checkpoints;
 * the directories above it up to the peer's studies directory (S/w, S)
 * become searchable (o+x, not listable) so that the user reaches it. */
static void give_dir(const char *dir, const sl_study_user_t *u) {
    char up[1100];
    snprintf(up, sizeof up, "%s", dir);
    for (int level = 0; level < 2; level++) {
        char *slash = strrchr(up, '/');
        if (!slash || slash == up)
            break;
        *slash = 0;
        struct stat st;
        if (stat(up, &st) == 0 && !(st.st_mode & S_IXOTH))
            chmod(up, (st.st_mode & 07777) | S_IXOTH);
    }
    if (chown(dir, u->uid, u->gid) != 0)
        return; /* the command's writes fail and say so */
    char names[64][128];
    int n = sl_study_dir_files(dir, names, 64);
    for (int i = 0; i < n; i++) {
        char p[4096 + 300];
        snprintf(p, sizeof p, "%.1100s/%.127s", dir, names[i]);
        if (chown(p, u->uid, u->gid) != 0)
            continue;
    }
}

static uint64_t mono_ms(void) { return sl_plat_now_ns() / 1000000ull; }

/* Kills the child's process group and reaps it. */
static int reap(pid_t pid, int grace_ms) {
    int status = 0;
    uint64_t end = mono_ms() + (uint64_t)grace_ms;
    /* polling a child's exit (no condition to wait on), 1 ms first and
       doubling to 20: a command that exits right after its last report
       (most do) is reaped within a millisecond or two, not a fixed 20 ms
       that would hold the trial's slot */
    long step_ms = 1;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status;
        if (r < 0)
            return -1;
        if (mono_ms() >= end)
            break;
        struct timespec ts = {0, step_ms * 1000000L};
        nanosleep(&ts, NULL);
        step_ms = step_ms < 10 ? step_ms * 2 : 20;
    }
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

static void run_command(sl_study_worker_t *w) {
    sl_study_job_t *j = &w->job;
    char cmd[SL_STUDY_TEMPLATE_MAX * 2], why[256] = "", cfgjson[SL_CONFIG_JSON_MAX];
    size_t cl = 0;
    bool failed = true;
    int last = 0;
    if (sl_space_render(&j->spec, &j->config, j->trial_id, j->spec.command, cmd, sizeof cmd, why,
                        sizeof why) != SL_OK ||
        sl_space_encode(&j->spec, &j->config, cfgjson, sizeof cfgjson, &cl) != SL_OK) {
        push_simple(w, SL_WEV_END, true, why[0] ? why : "cannot render the command");
        return;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        push_simple(w, SL_WEV_END, true, "pipe failed");
        return;
    }
    char ep[16];
    snprintf(ep, sizeof ep, "%d", j->target_epochs);
    const char *mine[][2] = {{"STARLING_TRIAL_ID", j->trial_id},
                             {"STARLING_CHECKPOINT_DIR", j->dir},
                             {"STARLING_CONFIG", cfgjson},
                             {"STARLING_EPOCHS", ep}};
    size_t nenv = 0;
    while (environ[nenv])
        nenv++;
    char **envp = sl_calloc(nenv + 5, sizeof *envp);
    char *own[4] = {NULL, NULL, NULL, NULL};
    size_t ne = 0;
    bool env_ok = envp != NULL;
    for (size_t i = 0; env_ok && i < nenv; i++) {
        bool ours = false;
        for (int k = 0; k < 4; k++) {
            size_t kl = strlen(mine[k][0]);
            ours |= !strncmp(environ[i], mine[k][0], kl) && environ[i][kl] == '=';
        }
        if (!ours)
            envp[ne++] = environ[i];
    }
    for (int k = 0; env_ok && k < 4; k++) {
        size_t len = strlen(mine[k][0]) + 1 + strlen(mine[k][1]) + 1;
        own[k] = sl_malloc(len);
        if (!own[k]) {
            env_ok = false;
            break;
        }
        snprintf(own[k], len, "%s=%s", mine[k][0], mine[k][1]);
        envp[ne++] = own[k];
    }
    if (env_ok && j->user.set)
        give_dir(j->dir, &j->user);
    pid_t pid = -1;
    if (env_ok) {
        char *argv[] = {"sh", "-c", (char *)SUPERVISOR, "starling-trial", cmd, NULL};
        spawn_t sp = {.argv = argv, .envp = envp, .out_fd = fds[1], .user = &j->user};
        pid = spawn(&sp);
    }
    for (int k = 0; k < 4; k++)
        sl_free(own[k]);
    sl_free(envp);
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        push_simple(w, SL_WEV_END, true, env_ok ? "spawn failed" : "out of memory");
        return;
    }
    atomic_store(&w->child, (int)pid);
    close(fds[1]);
    char buf[SL_REPORT_LINE_MAX + 1];
    size_t n = 0;
    uint64_t deadline = j->spec.command_timeout_s
                            ? mono_ms() + (uint64_t)j->spec.command_timeout_s * 1000ull
                            : UINT64_MAX;
    bool reached = false, timed_out = false, eof = false;
    int garbage = 0;
    while (!eof && !reached && !atomic_load(&w->stop)) {
        if (mono_ms() >= deadline) {
            timed_out = true;
            break;
        }
        struct pollfd p = {fds[0], POLLIN, 0};
        int r = poll(&p, 1, 200);
        if (r <= 0)
            continue;
        ssize_t got = read(fds[0], buf + n, sizeof buf - 1 - n);
        if (got <= 0) {
            eof = true;
            got = 0;
        }
        n += (size_t)got;
        for (;;) {
            char *nl = memchr(buf, '\n', n);
            size_t ll = nl ? (size_t)(nl - buf) : n;
            if (!nl && !(eof && n > 0) && n < sizeof buf - 1)
                break;
            buf[ll] = 0;
            sl_report_t rep;
            char pw[128];
            sl_err err = sl_report_parse(buf, ll, &rep, pw, sizeof pw);
            if (err == SL_OK && rep.epoch == last + 1) {
                last = rep.epoch;
                push_report(w, &rep);
            } else if (err == SL_OK) {
                if (rep.epoch > last + 1 || last == 0) {
                    /* resumed: a command restarts where its checkpoint says */
                    last = rep.epoch;
                    push_report(w, &rep);
                }
            } else if (err != SL_ENOTFOUND) {
                garbage++;
                char l[512];
                snprintf(l, sizeof l, "[garbage report: %s] %.300s", pw, buf);
                push_simple(w, SL_WEV_LOG, false, l);
            }
            push_simple(w, SL_WEV_LOG, false, buf);
            size_t used = nl ? ll + 1 : n;
            memmove(buf, buf + used, n - used);
            n -= used;
            if (last >= j->target_epochs) {
                reached = true;
                break;
            }
            if (n == 0)
                break;
        }
    }
    close(fds[0]); /* the child's next write breaks its pipe */
    int status = reap(pid, reached || atomic_load(&w->stop) ? 2000 : (timed_out ? 0 : 5000));
    if (reached) {
        failed = false;
        snprintf(why, sizeof why, "trained to epoch %d", last);
    } else if (atomic_load(&w->stop)) {
        failed = false;
        snprintf(why, sizeof why, "stopped");
    } else if (timed_out) {
        snprintf(why, sizeof why, "timed out after %u s at epoch %d",
                 (unsigned)j->spec.command_timeout_s, last);
    } else if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        snprintf(why, sizeof why, "exit status %d at epoch %d", WEXITSTATUS(status), last);
    } else if (status >= 0 && WIFSIGNALED(status)) {
        snprintf(why, sizeof why, "killed by signal %d at epoch %d", WTERMSIG(status), last);
    } else {
        snprintf(why, sizeof why, "ended at epoch %d before epoch %d%s", last, j->target_epochs,
                 garbage ? " (garbage reports)" : "");
    }
    atomic_store(&w->child, 0);
    push_simple(w, SL_WEV_END, failed, why);
}

static void *thread_main(void *arg) {
    sl_study_worker_t *w = arg;
    if (w->job.spec.trainer == SL_TRAINER_COMMAND)
        run_command(w);
    else
        run_builtin(w);
    atomic_store(&w->ended, true);
    wake(w);
    return NULL;
}

sl_err sl_study_worker_start(const sl_study_job_t *job, sl_study_worker_t **out) {
    sl_study_worker_t *w = sl_calloc(1, sizeof *w);
    if (!w)
        return SL_ENOMEM;
    w->job = *job;
    pthread_mutex_init(&w->mu, NULL);
    atomic_init(&w->stop, false);
    atomic_init(&w->ended, false);
    atomic_init(&w->child, 0);
    /* A command's thread only reads a pipe: a small stack, which glibc
       keeps for the next thread (it caches 40 MB of stacks: five of the
       default 8 MB, fewer than a busy peer's workers, so each trial mapped,
       faulted in and unmapped a fresh one). The builtin trainer keeps the
       default. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (job->spec.trainer == SL_TRAINER_COMMAND)
        pthread_attr_setstacksize(&attr, COMMAND_STACK_LEN);
    int rc = pthread_create(&w->thread, &attr, thread_main, w);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_destroy(&w->mu);
        sl_free(w);
        return SL_ENOMEM;
    }
    *out = w;
    return SL_OK;
}

void sl_study_worker_stop(sl_study_worker_t *w) { atomic_store(&w->stop, true); }

void sl_study_worker_cancel(sl_study_worker_t *w) {
    atomic_store(&w->stop, true);
    int pid = atomic_load(&w->child);
    if (pid > 0)
        kill(-pid, SIGKILL);
}

sl_wev_t *sl_study_worker_pop(sl_study_worker_t *w) {
    pthread_mutex_lock(&w->mu);
    sl_wev_t *ev = w->head;
    if (ev) {
        w->head = ev->next;
        if (!w->head)
            w->tail = NULL;
    }
    pthread_mutex_unlock(&w->mu);
    return ev;
}

bool sl_study_worker_ended(sl_study_worker_t *w) { return atomic_load(&w->ended); }

bool sl_study_worker_pending(sl_study_worker_t *w) {
    pthread_mutex_lock(&w->mu);
    bool any = w->head != NULL;
    pthread_mutex_unlock(&w->mu);
    return any || atomic_load(&w->ended);
}

void sl_study_worker_destroy(sl_study_worker_t **wp) {
    if (!wp || !*wp)
        return;
    sl_study_worker_t *w = *wp;
    atomic_store(&w->stop, true);
    pthread_join(w->thread, NULL);
    sl_wev_t *ev;
    while ((ev = sl_study_worker_pop(w)))
        sl_free(ev);
    pthread_mutex_destroy(&w->mu);
    sl_free(w);
    *wp = NULL;
}

void sl_study_worker_abandon(sl_study_worker_t **wp) {
    if (!wp || !*wp)
        return;
    atomic_store(&(*wp)->stop, true);
    int pid = atomic_load(&(*wp)->child);
    if (pid > 0)
        kill(-pid, SIGKILL);
    pthread_detach((*wp)->thread);
    *wp = NULL; /* the thread still uses it; the process is about to exit */
}

sl_err sl_study_user_resolve(const char *name, sl_study_user_t *out, char *why, size_t why_len) {
    memset(out, 0, sizeof *out);
    if (!name || !name[0])
        return SL_OK;
    char buf[16384];
    struct passwd pw, *found = NULL;
    int rc = getpwnam_r(name, &pw, buf, sizeof buf, &found);
    if (rc != 0 || !found) {
        snprintf(why, why_len, "--trial-user %s: no such user", name);
        return SL_ENOTFOUND;
    }
    if (geteuid() != 0) {
        snprintf(why, why_len,
                 "--trial-user %s: the peer runs as uid %u, not root, and cannot switch users "
                 "(start it as root, or leave the flag out to run trials as the peer's user)",
                 name, (unsigned)geteuid());
        return SL_EINVAL;
    }
    if (pw.pw_uid == 0) {
        snprintf(why, why_len, "--trial-user %s: that is root; name an unprivileged user", name);
        return SL_EINVAL;
    }
    int count = SL_STUDY_USER_GROUPS_MAX;
    if (getgrouplist(name, pw.pw_gid, out->groups, &count) < 0) {
        snprintf(why, why_len, "--trial-user %s: in more than %d groups", name,
                 SL_STUDY_USER_GROUPS_MAX);
        return SL_EINVAL;
    }
    out->set = true;
    out->uid = pw.pw_uid;
    out->gid = pw.pw_gid;
    out->group_count = count;
    snprintf(out->name, sizeof out->name, "%s", name);
    return SL_OK;
}

sl_err sl_study_user_reach(const sl_study_user_t *u, const char *dir, char *why, size_t why_len) {
    if (!u->set)
        return SL_OK;
    char path[1100];
    if (!realpath(dir, path)) {
        snprintf(why, why_len, "--trial-user %s: cannot resolve %s", u->name, dir);
        return SL_EINVAL;
    }
    /* every directory above `dir` must let the user search it */
    char *last = strrchr(path, '/');
    if (last)
        *last = 0;
    for (char *end = last ? last : path;;) {
        struct stat st;
        if (stat(path[0] ? path : "/", &st) == 0) {
            bool in_group = st.st_gid == u->gid;
            for (int i = 0; i < u->group_count; i++)
                in_group |= st.st_gid == u->groups[i];
            bool ok = st.st_uid == u->uid ? (st.st_mode & S_IXUSR)
                      : in_group         ? (st.st_mode & S_IXGRP)
                                         : (st.st_mode & S_IXOTH);
            if (!ok) {
                snprintf(why, why_len,
                         "--trial-user %s: the user cannot reach the data directory %s (%s is "
                         "not searchable by it); choose a --data directory it can reach",
                         u->name, dir, path[0] ? path : "/");
                return SL_EINVAL;
            }
        }
        char *slash = strrchr(path, '/');
        if (!slash || end == path)
            break;
        *slash = 0;
        end = slash;
    }
    /* the peer's own directories: searchable, not listable */
    char p[1100];
    snprintf(p, sizeof p, "%s", dir);
    struct stat st;
    if (stat(p, &st) == 0 && !(st.st_mode & S_IXOTH))
        chmod(p, (st.st_mode & 07777) | S_IXOTH);
    return SL_OK;
}

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

int sl_study_dir_files(const char *dir, char names[][128], int max) {
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d))) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= 128 || strstr(e->d_name, ".tmp"))
            continue;
        char p[4096 + 300];
        struct stat st;
        snprintf(p, sizeof p, "%.1100s/%.127s", dir, e->d_name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
            snprintf(names[n++], 128, "%.127s", e->d_name);
    }
    closedir(d);
    /* name order, not the directory's: a checkpoint's blob layout and
       "the first file" a fetch returns must not depend on the file system */
    qsort(names, (size_t)n, sizeof names[0], by_name);
    return n;
}

void sl_study_dir_clear(const char *dir) {
    char names[64][128];
    int n = sl_study_dir_files(dir, names, 64);
    for (int i = 0; i < n; i++) {
        char p[4096 + 300];
        snprintf(p, sizeof p, "%.1100s/%.127s", dir, names[i]);
        unlink(p);
    }
}

bool sl_study_dir_empty(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool empty = true;
    struct dirent *e;
    while (empty && (e = readdir(d)))
        empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    return empty;
}
