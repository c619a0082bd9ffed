/* peerctl's views of an elastic job: the study commands (submit, status,
 * watch, logs, results, fetch, plot, cancel) take a job too, and the peer
 * answers with the job's status object ("kind": "elastic", docs/elastic.md
 * "What a user sees"); this file shows it. */
#include "peerctl_job.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "peerctl_client.h"
#include "peerctl_store.h"
#include "starling/common.h"
#include "starling/study.h"

bool sl_job_is(const cJSON *reply) {
    const cJSON *k = cJSON_GetObjectItem(reply, "kind");
    return cJSON_IsString(k) && !strcmp(k->valuestring, "elastic");
}

static const char *str_of(const cJSON *o, const char *k) {
    const cJSON *x = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(x) ? x->valuestring : "";
}

static double num_of(const cJSON *o, const char *k) {
    const cJSON *x = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* "a, b, c" of a world's member names, shown safe. */
static void print_world(const cJSON *world) {
    const cJSON *m;
    bool first = true;
    cJSON_ArrayForEach(m, world) {
        if (!cJSON_IsString(m))
            continue;
        printf("%s", first ? "" : ", ");
        sl_peerctl_print_safe(stdout, m->valuestring, strlen(m->valuestring), false);
        first = false;
    }
}

static bool final_state(const char *s) {
    return !strcmp(s, "done") || !strcmp(s, "failed") || !strcmp(s, "cancelled");
}

bool sl_job_print_status(const cJSON *st) {
    const char *state = str_of(st, "state");
    printf("job %s (", str_of(st, "job"));
    sl_peerctl_print_safe(stdout, str_of(st, "name"), strlen(str_of(st, "name")), false);
    printf("): %s, %s trainer, %g to %g peers\n", state, str_of(st, "trainer"),
           num_of(cJSON_GetObjectItem(st, "nodes"), "min"),
           num_of(cJSON_GetObjectItem(st, "nodes"), "max"));
    const cJSON *world = cJSON_GetObjectItem(st, "world");
    printf("round %g, world of %d: ", num_of(st, "round"), cJSON_GetArraySize(world));
    print_world(world);
    const cJSON *metrics = cJSON_GetObjectItem(st, "metrics");
    double loss = num_of(metrics, "train_loss");
    printf("\nstep %g, epoch %g of %g", num_of(st, "step"), num_of(st, "epoch"),
           num_of(st, "epochs"));
    if (isfinite(loss))
        printf(", train loss %.4f", loss);
    if (isfinite(num_of(st, "checkpoint_step")))
        printf(", checkpoint at step %g", num_of(st, "checkpoint_step"));
    printf("\n");
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(metrics, "epochs")) {
        printf("  epoch %-4g step %-7g train loss %.4f", num_of(e, "epoch"), num_of(e, "step"),
               num_of(e, "train_loss"));
        if (isfinite(num_of(e, "val_acc")))
            printf("  val acc %.4f", num_of(e, "val_acc"));
        if (isfinite(num_of(e, "test_acc")))
            printf("  test acc %.4f", num_of(e, "test_acc"));
        printf("  (%g peers)\n", num_of(e, "world"));
    }
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(st, "rounds")) {
        printf("  round %-4g from step %-7g leader ", num_of(r, "round"), num_of(r, "start_step"));
        sl_peerctl_print_safe(stdout, str_of(r, "leader"), strlen(str_of(r, "leader")), false);
        printf(", world: ");
        print_world(cJSON_GetObjectItem(r, "world"));
        printf("\n");
    }
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(st, "failures")) {
        printf("  failed on ");
        sl_peerctl_print_safe(stdout, str_of(r, "peer"), strlen(str_of(r, "peer")), false);
        printf(": ");
        sl_peerctl_print_safe(stdout, str_of(r, "why"), strlen(str_of(r, "why")), false);
        printf("\n");
    }
    return final_state(state);
}

static void stamp(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    printf("%02d:%02d:%02d  ", tm.tm_hour, tm.tm_min, tm.tm_sec);
}

int sl_job_watch(const char *job, cJSON *(*status)(const char *id, int *rc)) {
    double last_round = -1, last_step = -1;
    int last_epochs = 0;
    char last_state[32] = "";
    for (;;) {
        int rc;
        cJSON *st = status(job, &rc);
        if (!st)
            return rc;
        const char *state = str_of(st, "state");
        double round = num_of(st, "round"), step = num_of(st, "step");
        if (round != last_round && round > 0) {
            stamp();
            const cJSON *w = cJSON_GetObjectItem(st, "world");
            printf("round %g: world of %d: ", round, cJSON_GetArraySize(w));
            print_world(w);
            printf("\n");
            last_round = round;
        }
        const cJSON *eps = cJSON_GetObjectItem(cJSON_GetObjectItem(st, "metrics"), "epochs");
        for (int i = last_epochs; i < cJSON_GetArraySize(eps); i++) {
            const cJSON *e = cJSON_GetArrayItem(eps, i);
            stamp();
            printf("epoch %g done: train loss %.4f", num_of(e, "epoch"), num_of(e, "train_loss"));
            if (isfinite(num_of(e, "test_acc")))
                printf(", test acc %.4f", num_of(e, "test_acc"));
            printf("\n");
        }
        last_epochs = cJSON_GetArraySize(eps);
        if (step != last_step && isfinite(step)) {
            double loss = num_of(cJSON_GetObjectItem(st, "metrics"), "train_loss");
            stamp();
            printf("step %g, epoch %g of %g", step, num_of(st, "epoch"), num_of(st, "epochs"));
            if (isfinite(loss))
                printf(", train loss %.4f", loss);
            printf(", %s\n", state);
            last_step = step;
        }
        if (strcmp(state, last_state)) {
            snprintf(last_state, sizeof last_state, "%s", state);
            if (final_state(state)) {
                stamp();
                printf("job %s\n", state);
            }
        }
        bool fin = final_state(state);
        cJSON_Delete(st);
        fflush(stdout);
        if (fin)
            return 0;
        struct timespec ts = {0, 500 * 1000000L};
        nanosleep(&ts, NULL); /* a display refresh period */
    }
}

static int write_text(const char *dir, const char *name, const char *text) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "peerctl: cannot write %s\n", path);
        return 1;
    }
    fprintf(stderr, "wrote %s\n", path);
    return 0;
}

int sl_job_results(const cJSON *r, const char *out_dir, bool json) {
    if (json) {
        char *t = cJSON_Print(r);
        printf("%s\n", t ? t : "");
        free(t);
    } else {
        sl_job_print_status(r);
    }
    if (!out_dir)
        return 0;
    /* curves.csv: the loss curve and the world size; results.json: all */
    sl_buf_t csv = {0};
    sl_buf_printf(&csv, "step,loss,world,wall_ms\n");
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(r, "curve")) {
        sl_buf_printf(&csv, "%.17g,%.9g,%.17g,%.17g\n", cJSON_GetArrayItem(row, 0)->valuedouble,
                      cJSON_GetArrayItem(row, 1)->valuedouble,
                      cJSON_GetArrayItem(row, 2)->valuedouble,
                      cJSON_GetArrayItem(row, 3)->valuedouble);
    }
    char *all = cJSON_Print(r);
    int rc = csv.failed || !all;
    if (!rc)
        rc = write_text(out_dir, "curves.csv", csv.data);
    if (!rc)
        rc = write_text(out_dir, "results.json", all);
    free(all);
    sl_buf_fini(&csv);
    if (rc || !cJSON_IsString(cJSON_GetObjectItem(r, "model")))
        return rc;
    /* the final model */
    const char *args[1] = {str_of(r, "job")};
    char *out = NULL;
    size_t len = 0;
    rc = sl_peerctl_call_collect(&sl_peerctl_opts, "fetch", args, 1, &out, &len);
    if (!rc) {
        char path[4200];
        snprintf(path, sizeof path, "%s/model.npz", out_dir);
        FILE *f = fopen(path, "wb");
        rc = !f || fwrite(out, 1, len, f) != len;
        if (f && fclose(f) != 0)
            rc = 1;
        fprintf(stderr, rc ? "peerctl: cannot write %s\n" : "wrote %s\n", path);
    }
    sl_free(out);
    return rc;
}
