/* peerctl's study commands: submit, status, watch, logs, results, fetch,
 * plot, cancel. They talk to the study runtime of a peer
 * (include/starling/study_node.h); docs/studies.md shows them in use. */
#include "peerctl_study.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "peerctl_client.h"
#include "peerctl_job.h"
#include "peerctl_store.h"
#include "starling/common.h"

static int usage(const char *u) {
    fprintf(stderr, "usage: peerctl %s\n", u);
    return 2;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            if (cap >= (1u << 20)) {
                free(buf);
                buf = NULL;
                break;
            }
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *len = n;
    }
    return buf;
}

static int write_file(const char *dir, const char *name, const void *data, size_t len) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        fprintf(stderr, "peerctl: cannot write %s: %s\n", p, strerror(errno));
        if (f)
            fclose(f);
        return 1;
    }
    fclose(f);
    return 0;
}

static int make_dir(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "peerctl: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    return 0;
}

/* One call, the reply parsed as JSON (NULL after printing an error). */
static cJSON *call_json(const char *cmd, const char *const *args, size_t n, int *rc) {
    char *out = NULL;
    size_t len = 0;
    *rc = sl_peerctl_call_collect(&sl_peerctl_opts, cmd, args, n, &out, &len);
    if (*rc)
        return NULL;
    cJSON *j = cJSON_ParseWithLength(out, len);
    sl_free(out);
    if (!j) {
        fprintf(stderr, "peerctl: the peer's %s reply is not JSON\n", cmd);
        *rc = 1;
    }
    return j;
}

int sl_cmd_submit(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-')
        return usage("submit FILE.json   (a study or an elastic job; prints its id)");
    size_t len;
    char *text = read_file(argv[1], &len);
    if (!text) {
        fprintf(stderr, "peerctl: cannot read %s (missing, or over 1 MiB)\n", argv[1]);
        return 1;
    }
    const char *args[1] = {text};
    int rc;
    cJSON *j = call_json("submit", args, 1, &rc);
    free(text);
    if (!j)
        return rc;
    const cJSON *id = cJSON_GetObjectItem(j, sl_job_is(j) ? "job" : "study");
    printf("%s\n", cJSON_IsString(id) ? id->valuestring : "?");
    cJSON_Delete(j);
    return 0;
}

static const char *str_of(const cJSON *o, const char *k) {
    const cJSON *x = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(x) ? x->valuestring : "";
}

static double num_of(const cJSON *o, const char *k) {
    const cJSON *x = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : 0;
}

/* Counts of trials by state; returns whether the study has finished. */
static bool print_status(const cJSON *st, bool bars) {
    const cJSON *trials = cJSON_GetObjectItem(st, "trials");
    const char *obj = str_of(st, "objective");
    int max_e = (int)num_of(st, "max_epochs");
    printf("study %s (%s): %d/%d trials proposed%s%s\n", str_of(st, "study"), str_of(st, "name"),
           cJSON_GetArraySize(trials), (int)num_of(st, "budget"),
           cJSON_IsString(cJSON_GetObjectItem(st, "finished")) ? ", finished: " : "",
           str_of(st, "finished"));
    printf("%-16s %-9s %-10s %7s %10s  %s\n", "TRIAL", "STATE", "OWNER", "EPOCH", obj, "CONFIG");
    const cJSON *t;
    int counts[6] = {0};
    const char *names[6] = {"pending", "running", "paused", "done", "failed", "preempted"};
    cJSON_ArrayForEach(t, trials) {
        const char *state = str_of(t, "state");
        for (int i = 0; i < 6; i++)
            counts[i] += !strcmp(state, names[i]);
        char ep[32], m[32] = "-";
        snprintf(ep, sizeof ep, "%d/%d", (int)num_of(t, "epoch"), (int)num_of(t, "target"));
        const cJSON *mt = cJSON_GetObjectItem(t, "metrics");
        if (cJSON_IsNumber(cJSON_GetObjectItem(mt, obj)))
            snprintf(m, sizeof m, "%.4g", num_of(mt, obj));
        char *cfg = cJSON_PrintUnformatted(cJSON_GetObjectItem(t, "config"));
        /* ids, names and configurations come from the store: shown with
           control characters as \xNN (sl_peerctl_print_safe) */
        char row[160];
        snprintf(row, sizeof row, "%-16.16s %-9.9s %-10.10s %7s %10s  ", str_of(t, "trial"), state,
                 str_of(t, "owner"), ep, m);
        sl_peerctl_print_safe(stdout, row, strlen(row), false);
        sl_peerctl_print_safe(stdout, cfg ? cfg : "", cfg ? strlen(cfg) : 0, false);
        free(cfg);
        if (bars && max_e > 0) {
            int w = 20, done = (int)num_of(t, "epoch") * w / max_e;
            printf("  [");
            for (int i = 0; i < w; i++)
                putchar(i < done ? '#' : '.');
            printf("]");
        }
        printf("\n");
    }
    printf("pending %d, running %d, paused %d, done %d, failed %d, preempted %d\n", counts[0],
           counts[1], counts[2], counts[3], counts[4], counts[5]);
    return cJSON_IsString(cJSON_GetObjectItem(st, "finished"));
}

int sl_cmd_status(int argc, char **argv) {
    const char *study = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!study && argv[i][0] != '-')
            study = argv[i];
        else
            return usage("status STUDY [--json]");
    }
    if (!study)
        return usage("status STUDY [--json]");
    const char *args[1] = {study};
    if (json) {
        char *out = NULL;
        size_t len;
        int rc = sl_peerctl_call_collect(&sl_peerctl_opts, "status", args, 1, &out, &len);
        if (!rc) { /* C1 controls and stray bytes as \u00NN: sl_peerctl_print_json_safe */
            sl_peerctl_print_json_safe(stdout, out, len);
            putchar('\n');
        }
        sl_free(out);
        return rc;
    }
    int rc;
    cJSON *st = call_json("status", args, 1, &rc);
    if (!st)
        return rc;
    if (sl_job_is(st))
        sl_job_print_status(st);
    else
        print_status(st, false);
    cJSON_Delete(st);
    return 0;
}

static cJSON *job_status(const char *id, int *rc) {
    const char *args[1] = {id};
    return call_json("status", args, 1, rc);
}

int sl_cmd_watch_study(const char *study) {
    const char *args[1] = {study};
    bool tty = isatty(1);
    for (;;) {
        int rc;
        cJSON *st = call_json("status", args, 1, &rc);
        if (!st)
            return rc;
        if (sl_job_is(st)) {
            cJSON_Delete(st);
            return sl_job_watch(study, job_status);
        }
        if (tty)
            printf("\033[H\033[2J");
        bool fin = print_status(st, true);
        cJSON_Delete(st);
        fflush(stdout);
        if (fin)
            return 0;
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL); /* a display refresh period */
    }
}

int sl_cmd_logs(int argc, char **argv) {
    const char *study = NULL, *trial = NULL;
    bool follow = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--follow"))
            follow = true;
        else if (!study)
            study = argv[i];
        else if (!trial)
            trial = argv[i];
        else
            return usage("logs STUDY TRIAL [-f] | logs JOB [PEER] [-f]");
    }
    if (!study)
        return usage("logs STUDY TRIAL [-f] | logs JOB [PEER] [-f]");
    const char *args[2] = {study, trial};
    size_t shown = 0;
    for (;;) {
        char *out = NULL;
        size_t len = 0;
        int rc = sl_peerctl_call_collect(&sl_peerctl_opts, "logs", args, trial ? 2 : 1, &out,
                                         &len);
        if (rc)
            return rc;
        if (len < shown)
            shown = 0; /* the log was cut to its tail */
        /* a trial's log holds its command's output: lines and tabs kept,
           other control characters as \xNN at a terminal */
        if (isatty(fileno(stdout)))
            sl_peerctl_print_safe(stdout, out + shown, len - shown, true);
        else
            fwrite(out + shown, 1, len - shown, stdout);
        fflush(stdout);
        shown = len;
        sl_free(out);
        if (!follow)
            return 0;
        /* stop following once the trial is final */
        int rc2;
        const char *sa[1] = {study};
        cJSON *st = call_json("status", sa, 1, &rc2);
        bool final = sl_job_is(st) && (!strcmp(str_of(st, "state"), "done") ||
                                       !strcmp(str_of(st, "state"), "failed") ||
                                       !strcmp(str_of(st, "state"), "cancelled"));
        const cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(st, "trials")) {
            if (trial && !strncmp(str_of(t, "trial"), trial, strlen(trial)))
                final = !strcmp(str_of(t, "state"), "done") || !strcmp(str_of(t, "state"), "failed");
        }
        bool fin = cJSON_IsString(cJSON_GetObjectItem(st, "finished"));
        cJSON_Delete(st);
        if (final || fin)
            return 0;
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL); /* a refresh period */
    }
}

int sl_cmd_results(int argc, char **argv) {
    const char *study = NULL, *out_dir = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out_dir = argv[++i];
        else if (!study && argv[i][0] != '-')
            study = argv[i];
        else
            return usage("results STUDY [--json] [--out DIR]");
    }
    if (!study)
        return usage("results STUDY [--json] [--out DIR]");
    const char *args[1] = {study};
    int rc;
    cJSON *r = call_json("results", args, 1, &rc);
    if (!r)
        return rc;
    if (sl_job_is(r)) {
        rc = (out_dir && make_dir(out_dir)) ? 1 : sl_job_results(r, out_dir, json);
        cJSON_Delete(r);
        return rc;
    }
    if (json) {
        char *t = cJSON_Print(r);
        printf("%s\n", t ? t : "");
        free(t);
    } else {
        printf("%s", str_of(r, "leaderboard"));
    }
    if (out_dir) {
        rc = make_dir(out_dir);
        char *m = cJSON_Print(cJSON_GetObjectItem(r, "models"));
        char *p = cJSON_Print(cJSON_GetObjectItem(r, "pareto"));
        if (!rc && m)
            rc = write_file(out_dir, "models.json", m, strlen(m));
        if (!rc && p)
            rc = write_file(out_dir, "pareto.json", p, strlen(p));
        const char *lb = str_of(r, "leaderboard");
        if (!rc)
            rc = write_file(out_dir, "leaderboard.txt", lb, strlen(lb));
        free(m);
        free(p);
        if (!rc)
            fprintf(stderr, "wrote %s/models.json, %s/pareto.json, %s/leaderboard.txt\n", out_dir,
                    out_dir, out_dir);
    }
    cJSON_Delete(r);
    return rc;
}

int sl_cmd_fetch(int argc, char **argv) {
    if (argc != 4 && argc != 3)
        return usage("fetch STUDY TRIAL DIR   (writes DIR/TRIAL.npz)\n"
                     "       peerctl fetch JOB DIR           (writes DIR/JOB.npz, the final model)");
    bool job = argc == 3;
    const char *args[2] = {argv[1], argv[2]}, *dir = argv[argc - 1];
    char *out = NULL;
    size_t len = 0;
    int rc = sl_peerctl_call_collect(&sl_peerctl_opts, "fetch", args, job ? 1 : 2, &out, &len);
    if (rc)
        return rc;
    rc = make_dir(dir);
    char name[256];
    snprintf(name, sizeof name, "%.250s.npz", job ? argv[1] : argv[2]);
    if (!rc)
        rc = write_file(dir, name, out, len);
    if (!rc)
        fprintf(stderr, "wrote %s/%s (%zu bytes)\n", dir, name, len);
    sl_free(out);
    return rc;
}

int sl_cmd_plot(int argc, char **argv) {
    const char *study = NULL, *out_dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out_dir = argv[++i];
        else if (!study && argv[i][0] != '-')
            study = argv[i];
        else
            return usage("plot STUDY --out DIR");
    }
    if (!study || !out_dir)
        return usage("plot STUDY --out DIR");
    const char *args[1] = {study};
    int rc;
    cJSON *r = call_json("plot", args, 1, &rc);
    if (!r)
        return rc;
    rc = make_dir(out_dir);
    const cJSON *f;
    cJSON_ArrayForEach(f, r) {
        if (rc || !cJSON_IsString(f) || strchr(f->string, '/'))
            continue;
        rc = write_file(out_dir, f->string, f->valuestring, strlen(f->valuestring));
        if (!rc)
            fprintf(stderr, "wrote %s/%s\n", out_dir, f->string);
    }
    cJSON_Delete(r);
    return rc;
}

int sl_cmd_cancel(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-')
        return usage("cancel STUDY");
    const char *args[1] = {argv[1]};
    int rc;
    cJSON *r = call_json("cancel", args, 1, &rc);
    if (!r)
        return rc;
    printf("cancelled %s\n", str_of(r, cJSON_GetObjectItem(r, "job") ? "job" : "study"));
    cJSON_Delete(r);
    return 0;
}
