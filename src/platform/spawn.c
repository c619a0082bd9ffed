/* Child processes: a command under a supervisor shell in a process group
 * of its own that dies with the peer, reaping it, its exit status, and its
 * output through a pipe as lines. The study's command trials and the elastic command jobs run
 * through here. See platform.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "starling/platform.h"

extern char **environ;

/* The child's first process: a shell that runs the command in the
 * background, in the group of its own, and waits for it. Its parent-death
 * signal is SIGHUP (child_run), on which it kills its whole group: a
 * command that forks (a pipeline, a launcher, `cmd &`) dies with the peer,
 * not only its first process, which PR_SET_PDEATHSIG alone would reach
 * (the setting is not inherited across fork).
 *
 * A SIGTERM sent to the group (a stop) is for the command's programs: the
 * shells between them and the caller must outlive them, or the caller
 * would see the end (and kill the group) before a program that handles
 * SIGTERM has saved its work. So both shells trap it rather than ignore it
 * (an ignored signal would stay ignored in the programs they run): this
 * one waits on until the command has really ended (`wait` returns early
 * when a trapped signal arrives; the command is still there, kill -0 says
 * so), and the command's own shell (dash forks even for its last command)
 * exits with the status of the program it was waiting for, running nothing
 * after it. A command killed by a signal makes the shell end by the same
 * signal. */
static const char SUPERVISOR[] =
    "trap 'kill -KILL 0' HUP\n"
    "trap : TERM\n"
    "c=$1; shift\n"
    "(trap 'exit $?' TERM; eval \"$c\") &\n"
    "p=$!\n"
    "while :; do\n"
    "  wait $p\n"
    "  s=$?\n"
    "  kill -0 $p 2>/dev/null || break\n"
    "done\n"
    "if [ $s -gt 128 ] && [ $s -lt 160 ]; then trap - TERM HUP; kill -$((s - 128)) $$; fi\n"
    "exit $s\n";

/* What the vfork child does, all prepared before vfork (the child may
 * only make system calls: it shares the peer's memory until it execs). */
typedef struct {
    char **argv;                /* /bin/sh's arguments */
    char **envp;                /* its environment */
    const char *cwd;            /* its working directory, or NULL */
    int out_fd;                 /* its stdout and stderr */
    const sl_plat_user_t *user; /* switch to this user, or NULL */
    pid_t parent;               /* the peer's pid, to see it die before PDEATHSIG is set */
} child_t;

static void child_fail(const char *what) {
    ssize_t n = write(2, what, strlen(what));
    (void)n;
    _exit(127);
}

/* The vfork child: own process group, stdio, directory, the user, the
 * parent-death signal (after setuid, which clears it), signals as exec
 * expects. */
static void child_run(const child_t *ch, const sigset_t *old_mask) {
    if (setpgid(0, 0) != 0)
        child_fail("spawn: setpgid failed\n");
    if (dup2(ch->out_fd, 1) < 0 || dup2(ch->out_fd, 2) < 0)
        _exit(127);
    int in = open("/dev/null", O_RDONLY);
    if (in < 0 || dup2(in, 0) < 0)
        child_fail("spawn: cannot open /dev/null\n");
    if (in > 2)
        close(in);
    /* raw system calls, not glibc's setgroups/setgid/setuid: those apply
       the change to every thread of the process, and the list of threads
       they walk is the peer's (this child shares its memory until exec) */
    const sl_plat_user_t *u = ch->user;
    if (u && (syscall(SYS_setgroups, (size_t)u->group_count, u->groups) != 0 ||
              syscall(SYS_setresgid, u->gid, u->gid, u->gid) != 0 ||
              syscall(SYS_setresuid, u->uid, u->uid, u->uid) != 0))
        child_fail("spawn: cannot switch to the trial user (setgroups, setgid or setuid "
                   "failed)\n");
    /* (a vfork child has its own working directory: CLONE_FS is not set) */
    if (ch->cwd && chdir(ch->cwd) != 0)
        child_fail("spawn: cannot enter the working directory (chdir failed)\n");
    if (prctl(PR_SET_PDEATHSIG, SIGHUP) != 0)
        child_fail("spawn: prctl(PR_SET_PDEATHSIG) failed\n");
    if (getppid() != ch->parent)
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
    execve("/bin/sh", ch->argv, ch->envp);
    child_fail("spawn: cannot run /bin/sh\n");
}

/* Whether environ's entry `entry` is NAME=... for one of `env`'s names. */
static bool overridden(const char *entry, const sl_plat_env_t *env, size_t count) {
    for (size_t k = 0; k < count; k++) {
        size_t kl = strlen(env[k].name);
        if (!strncmp(entry, env[k].name, kl) && entry[kl] == '=')
            return true;
    }
    return false;
}

/* vfork, not fork: the peer's page tables are not copied nor its pages
 * made copy-on-write for a child that execs at once (a fork cost the peer
 * about a millisecond of CPU a trial); posix_spawn (which glibc does the
 * same way) cannot set a parent-death signal nor a user. Signals are
 * blocked around vfork so that no handler of the peer runs in the child. */
sl_err sl_plat_spawn(const sl_plat_spawn_t *sp, pid_t *pid_out) {
    size_t nenv = 0;
    while (environ[nenv])
        nenv++;
    sl_err err = SL_ENOMEM;
    char **envp = sl_calloc(nenv + sp->env_count + 1, sizeof *envp);
    char **own = sl_calloc(sp->env_count + 1, sizeof *own);
    if (!envp || !own)
        goto out;
    size_t ne = 0;
    for (size_t i = 0; i < nenv; i++)
        if (!overridden(environ[i], sp->env, sp->env_count))
            envp[ne++] = environ[i];
    for (size_t k = 0; k < sp->env_count; k++) {
        if (!sp->env[k].value)
            continue;
        size_t len = strlen(sp->env[k].name) + 1 + strlen(sp->env[k].value) + 1;
        if (!(own[k] = sl_malloc(len)))
            goto out;
        snprintf(own[k], len, "%s=%s", sp->env[k].name, sp->env[k].value);
        envp[ne++] = own[k];
    }
    char *argv[] = {"sh", "-c", (char *)SUPERVISOR, (char *)sp->name, (char *)sp->command, NULL};
    child_t ch = {.argv = argv,
                  .envp = envp,
                  .cwd = sp->cwd && sp->cwd[0] ? sp->cwd : NULL,
                  .out_fd = sp->out_fd,
                  .user = sp->user};
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    ch.parent = getpid();
    pid_t pid = vfork();
    if (pid == 0)
        child_run(&ch, &old);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        err = SL_EIO;
        goto out;
    }
    setpgid(pid, pid); /* (already done by the child; harmless) */
    *pid_out = pid;
    err = SL_OK;
out:
    for (size_t k = 0; own && k < sp->env_count; k++)
        sl_free(own[k]);
    sl_free(own);
    sl_free(envp);
    return err;
}

bool sl_plat_child_ended(pid_t pid) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0)
        return errno != EINTR; /* not our child (any more) */
    return info.si_pid == pid;
}

static uint64_t mono_ms(void) { return sl_plat_now_ns() / 1000000ull; }

int sl_plat_reap(pid_t pid, int grace_ms) {
    int status = 0;
    uint64_t end = mono_ms() + (uint64_t)grace_ms;
    /* polling a child's exit (no condition to wait on), 1 ms first and
       doubling to 20: a command that exits right after its last report
       (most do) is reaped within a millisecond or two, not a fixed 20 ms
       that would hold the trial's slot */
    long step_ms = 1;
    bool ended;
    while (!(ended = sl_plat_child_ended(pid)) && mono_ms() < end) {
        struct timespec ts = {0, step_ms * 1000000L};
        nanosleep(&ts, NULL);
        step_ms = step_ms < 10 ? step_ms * 2 : 20;
    }
    /* the child is not reaped yet, so its group's id is still its own */
    kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return ended ? status : -1;
}

bool sl_plat_lines_read(sl_plat_lines_t *lb, int fd,
                        bool (*line)(void *arg, char *text, size_t len), void *arg) {
    ssize_t got = read(fd, lb->buf + lb->len, lb->cap - 1 - lb->len);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    bool eof = got <= 0;
    if (got > 0)
        lb->len += (size_t)got;
    while (lb->len > 0) {
        char *nl = memchr(lb->buf, '\n', lb->len);
        size_t ll = nl ? (size_t)(nl - lb->buf) : lb->len;
        if (!nl && !eof && lb->len < lb->cap - 1)
            break;
        lb->buf[ll] = 0;
        bool more = line(arg, lb->buf, ll);
        size_t used = nl ? ll + 1 : lb->len;
        memmove(lb->buf, lb->buf + used, lb->len - used);
        lb->len -= used;
        if (!more)
            break;
    }
    return !eof;
}

sl_err sl_plat_pipe(int fds[2]) {
    if (pipe2(fds, O_CLOEXEC) != 0) {
        fds[0] = fds[1] = -1;
        return SL_EIO;
    }
    return SL_OK;
}

void sl_plat_close(int fd) {
    if (fd >= 0)
        close(fd);
}

bool sl_plat_readable(int fd, int timeout_ms) {
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, timeout_ms) > 0;
}

void sl_plat_kill_group(pid_t pid) {
    if (pid > 0)
        kill(-pid, SIGKILL);
}

void sl_plat_term_group(pid_t pid) {
    if (pid > 0)
        kill(-pid, SIGTERM);
}

int sl_plat_exit_code(int status) {
    return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int sl_plat_exit_signal(int status) {
    return status >= 0 && WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}
