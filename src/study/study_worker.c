/* A trial's worker thread: the builtin trainer or a command's child
 * process. See study_worker.h. The daemon's edge for trainers: the child,
 * its pipe, the trial user and the checkpoint directory's files are
 * reached through the platform layer (src/platform/spawn.c, users.c,
 * files.c). */
#include "study/study_worker.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/process.h"
#include "starling/platform.h"

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
    if (w->job.wake_fd > 0)
        sl_plat_wake(w->job.wake_fd);
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

/* ---- a command's child process (sl_plat_spawn) ---- */

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
        sl_plat_make_searchable(up);
    }
    if (!sl_plat_chown(dir, u->uid, u->gid))
        return; /* the command's writes fail and say so */
    char names[64][128];
    int n = sl_plat_dir_files(dir, names, 64);
    for (int i = 0; i < n; i++) {
        char p[4096 + 300];
        snprintf(p, sizeof p, "%.1100s/%.127s", dir, names[i]);
        sl_plat_chown(p, u->uid, u->gid); /* (as for the directory) */
    }
}

static uint64_t mono_ms(void) { return sl_plat_now_ns() / 1000000ull; }

/* What run_command's line reader keeps between lines. */
typedef struct {
    sl_study_worker_t *w; /* the worker */
    int last;             /* the last epoch reported */
    int garbage;          /* report lines that did not parse */
    bool reached;         /* the target epoch was reported */
} lines_ctx_t;

/* One line of the command's output: a report becomes an EPOCH event,
 * every line a LOG event; stops reading at the target epoch. */
static bool on_line(void *arg, char *text, size_t len) {
    lines_ctx_t *x = arg;
    sl_report_t rep;
    char pw[128];
    sl_err err = sl_report_parse(text, len, &rep, pw, sizeof pw);
    if (err == SL_OK && rep.epoch == x->last + 1) {
        x->last = rep.epoch;
        push_report(x->w, &rep);
    } else if (err == SL_OK) {
        if (rep.epoch > x->last + 1 || x->last == 0) {
            /* resumed: a command restarts where its checkpoint says */
            x->last = rep.epoch;
            push_report(x->w, &rep);
        }
    } else if (err != SL_ENOTFOUND) {
        x->garbage++;
        char l[512];
        snprintf(l, sizeof l, "[garbage report: %s] %.300s", pw, text);
        push_simple(x->w, SL_WEV_LOG, false, l);
    }
    push_simple(x->w, SL_WEV_LOG, false, text);
    x->reached = x->last >= x->w->job.target_epochs;
    return !x->reached;
}

static void run_command(sl_study_worker_t *w) {
    sl_study_job_t *j = &w->job;
    char cmd[SL_STUDY_TEMPLATE_MAX * 2], why[256] = "", cfgjson[SL_CONFIG_JSON_MAX];
    size_t cl = 0;
    bool failed = true;
    if (sl_space_render(&j->spec, &j->config, j->trial_id, j->spec.command, cmd, sizeof cmd, why,
                        sizeof why) != SL_OK ||
        sl_space_encode(&j->spec, &j->config, cfgjson, sizeof cfgjson, &cl) != SL_OK) {
        push_simple(w, SL_WEV_END, true, why[0] ? why : "cannot render the command");
        return;
    }
    int fds[2];
    if (sl_plat_pipe(fds) != SL_OK) {
        push_simple(w, SL_WEV_END, true, "pipe failed");
        return;
    }
    char ep[16];
    snprintf(ep, sizeof ep, "%d", j->target_epochs);
    const sl_plat_env_t env[] = {{"STARLING_TRIAL_ID", j->trial_id},
                                 {"STARLING_CHECKPOINT_DIR", j->dir},
                                 {"STARLING_CONFIG", cfgjson},
                                 {"STARLING_EPOCHS", ep}};
    if (j->user.set)
        give_dir(j->dir, &j->user);
    sl_plat_user_t user = {.uid = j->user.uid,
                           .gid = j->user.gid,
                           .groups = j->user.groups,
                           .group_count = j->user.group_count};
    sl_plat_spawn_t sp = {.command = cmd,
                          .name = "starling-trial",
                          .env = env,
                          .env_count = sizeof env / sizeof env[0],
                          .out_fd = fds[1],
                          .user = j->user.set ? &user : NULL};
    pid_t pid = -1;
    sl_err err = sl_plat_spawn(&sp, &pid);
    sl_plat_close(fds[1]);
    if (err != SL_OK) {
        sl_plat_close(fds[0]);
        push_simple(w, SL_WEV_END, true, err == SL_ENOMEM ? "out of memory" : "spawn failed");
        return;
    }
    atomic_store(&w->child, (int)pid);
    char buf[SL_REPORT_LINE_MAX + 1];
    sl_plat_lines_t lines = {.buf = buf, .cap = sizeof buf};
    lines_ctx_t x = {.w = w};
    uint64_t deadline = j->spec.command_timeout_s
                            ? mono_ms() + (uint64_t)j->spec.command_timeout_s * 1000ull
                            : UINT64_MAX;
    bool timed_out = false, eof = false;
    while (!eof && !x.reached && !atomic_load(&w->stop)) {
        if (mono_ms() >= deadline) {
            timed_out = true;
            break;
        }
        if (sl_plat_readable(fds[0], 200))
            eof = !sl_plat_lines_read(&lines, fds[0], on_line, &x);
    }
    sl_plat_close(fds[0]); /* the child's next write breaks its pipe */
    bool reached = x.reached;
    int last = x.last, garbage = x.garbage;
    int status =
        sl_plat_reap(pid, reached || atomic_load(&w->stop) ? 2000 : (timed_out ? 0 : 5000));
    if (reached) {
        failed = false;
        snprintf(why, sizeof why, "trained to epoch %d", last);
    } else if (atomic_load(&w->stop)) {
        failed = false;
        snprintf(why, sizeof why, "stopped");
    } else if (timed_out) {
        snprintf(why, sizeof why, "timed out after %u s at epoch %d",
                 (unsigned)j->spec.command_timeout_s, last);
    } else if (sl_plat_exit_code(status) > 0) {
        snprintf(why, sizeof why, "exit status %d at epoch %d", sl_plat_exit_code(status), last);
    } else if (sl_plat_exit_signal(status)) {
        snprintf(why, sizeof why, "killed by signal %d at epoch %d", sl_plat_exit_signal(status),
                 last);
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
    sl_plat_kill_group(atomic_load(&w->child));
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
    sl_plat_kill_group(atomic_load(&(*wp)->child));
    pthread_detach((*wp)->thread);
    *wp = NULL; /* the thread still uses it; the process is about to exit */
}

sl_err sl_study_user_resolve(const char *name, sl_study_user_t *out, char *why, size_t why_len) {
    memset(out, 0, sizeof *out);
    if (!name || !name[0])
        return SL_OK;
    sl_plat_user_t pu;
    sl_err err = sl_plat_user_find(name, &pu, out->groups, SL_STUDY_USER_GROUPS_MAX);
    if (err == SL_ENOTFOUND) {
        snprintf(why, why_len, "--trial-user %s: no such user", name);
        return SL_ENOTFOUND;
    }
    if (sl_plat_euid() != 0) {
        snprintf(why, why_len,
                 "--trial-user %s: the peer runs as uid %u, not root, and cannot switch users "
                 "(start it as root, or leave the flag out to run trials as the peer's user)",
                 name, (unsigned)sl_plat_euid());
        return SL_EINVAL;
    }
    if (err == SL_OK && pu.uid == 0) {
        snprintf(why, why_len, "--trial-user %s: that is root; name an unprivileged user", name);
        return SL_EINVAL;
    }
    if (err != SL_OK) {
        snprintf(why, why_len, "--trial-user %s: in more than %d groups", name,
                 SL_STUDY_USER_GROUPS_MAX);
        return SL_EINVAL;
    }
    out->set = true;
    out->uid = pu.uid;
    out->gid = pu.gid;
    out->group_count = pu.group_count;
    snprintf(out->name, sizeof out->name, "%s", name);
    return SL_OK;
}

sl_err sl_study_user_reach(const sl_study_user_t *u, const char *dir, char *why, size_t why_len) {
    if (!u->set)
        return SL_OK;
    char path[1100];
    if (sl_plat_realpath(dir, path, sizeof path) != SL_OK) {
        snprintf(why, why_len, "--trial-user %s: cannot resolve %s", u->name, dir);
        return SL_EINVAL;
    }
    const sl_plat_user_t pu = {.uid = u->uid,
                               .gid = u->gid,
                               .groups = u->groups,
                               .group_count = u->group_count};
    /* every directory above `dir` must let the user search it */
    char *last = strrchr(path, '/');
    if (last)
        *last = 0;
    for (char *end = last ? last : path;;) {
        if (!sl_plat_user_can_search(&pu, path[0] ? path : "/")) {
            snprintf(why, why_len,
                     "--trial-user %s: the user cannot reach the data directory %s (%s is "
                     "not searchable by it); choose a --data directory it can reach",
                     u->name, dir, path[0] ? path : "/");
            return SL_EINVAL;
        }
        char *slash = strrchr(path, '/');
        if (!slash || end == path)
            break;
        *slash = 0;
        end = slash;
    }
    /* the peer's own directories: searchable, not listable */
    sl_plat_make_searchable(dir);
    return SL_OK;
}

/* (the platform's, under the names the study files call) */
int sl_study_dir_files(const char *dir, char names[][128], int max) {
    return sl_plat_dir_files(dir, names, max);
}

void sl_study_dir_clear(const char *dir) { sl_plat_dir_clear(dir); }

bool sl_study_dir_empty(const char *dir) { return sl_plat_dir_empty(dir); }
