/* The study runtime's trial workers (src/study/study_worker.c) with command
 * templates: reports become epochs, other lines the log, garbage reports
 * are logged and never fatal, the environment carries the trial, a crash,
 * an early end and a timeout are failures with their reason, and a
 * cancelled worker ends at once (its process group killed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "starling/platform.h"
#include "starling/study.h"
#include "study/study_worker.h"
#include "testlib.h"

static char dir[256];

/* What a worker reported. */
typedef struct {
    int epochs;          /* EPOCH events */
    int last_epoch;      /* the last one's epoch */
    double last_acc;     /* its "acc" */
    char log[8192];      /* LOG lines, newline-separated */
    bool ended;          /* END seen */
    bool failed;         /* END: failed */
    char reason[512];    /* END: text */
} seen_t;

static void drain(sl_study_worker_t *w, seen_t *s) {
    sl_wev_t *ev;
    while ((ev = sl_study_worker_pop(w))) {
        if (ev->kind == SL_WEV_EPOCH) {
            s->epochs++;
            s->last_epoch = ev->report.epoch;
            s->last_acc = sl_report_get(&ev->report, "acc");
        } else if (ev->kind == SL_WEV_LOG) {
            size_t n = strlen(s->log);
            snprintf(s->log + n, sizeof s->log - n, "%s\n", ev->text);
        } else {
            s->ended = true;
            s->failed = ev->failed;
            snprintf(s->reason, sizeof s->reason, "%s", ev->text);
        }
        sl_free(ev);
    }
}

/* Runs `script` (sh) as a trial to `target` epochs; waits for the worker
 * to end (or cancels it after `cancel_after_ms`). Returns the wall ms. */
static uint64_t run(const char *script, int target, int timeout_s, int cancel_after_ms,
                    seen_t *s) {
    memset(s, 0, sizeof *s);
    char path[400], spec[2048], why[256] = "";
    snprintf(path, sizeof path, "%s/trial.sh", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return 0;
    fputs(script, f);
    fclose(f);
    snprintf(spec, sizeof spec,
             "{\"name\": \"w\", \"trainer\": {\"type\": \"command\", \"command\": \"sh %s {x}\", "
             "\"timeout_s\": %d}, \"search_space\": {\"x\": {\"type\": \"int\", \"low\": 1, "
             "\"high\": 2}}, \"scheduler\": {\"type\": \"fifo\", \"max_epochs\": 5}, "
             "\"objectives\": [{\"metric\": \"acc\", \"goal\": \"max\"}], \"budget\": {\"trials\": 1}}",
             path, timeout_s);
    sl_study_job_t job;
    memset(&job, 0, sizeof job);
    CHECK_MSG(sl_study_spec_parse(spec, strlen(spec), &job.spec, why, sizeof why) == SL_OK, "%s",
              why);
    job.config.values[0].integer = 2;
    snprintf(job.trial_id, sizeof job.trial_id, "00112233aabbccdd");
    job.target_epochs = target;
    snprintf(job.dir, sizeof job.dir, "%s", dir);
    sl_study_worker_t *w = NULL;
    uint64_t t0 = sl_plat_now_ns();
    CHECK_OK(sl_study_worker_start(&job, &w));
    if (!w)
        return 0;
    bool cancelled = false;
    while (!sl_study_worker_ended(w)) {
        drain(w, s);
        if (cancel_after_ms && !cancelled &&
            sl_plat_now_ns() - t0 > (uint64_t)cancel_after_ms * 1000000ull) {
            sl_study_worker_cancel(w);
            cancelled = true;
        }
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL); /* polling the worker's end, as the node's tick does */
    }
    drain(w, s);
    uint64_t ms = (sl_plat_now_ns() - t0) / 1000000ull;
    sl_study_worker_destroy(&w);
    CHECK(s->ended);
    return ms;
}

static void test_reports_and_garbage(void) {
    seen_t s;
    run("echo \"starting $1 $STARLING_TRIAL_ID $STARLING_CONFIG $STARLING_EPOCHS\" >&2\n"
        "echo '{\"epoch\": 1, \"acc\": 0.5}'\n"
        "echo '{\"epoch\": \"x\"}'\n"
        "echo 'plain text'\n"
        "echo '{\"epoch\": 2, \"acc\": 0.75}'\n"
        "echo '{\"epoch\": 3, \"acc\": 0.8}'\n",
        2, 30, 0, &s);
    CHECK(!s.failed);
    CHECK_INT(s.epochs, 2); /* stops at the target */
    CHECK_INT(s.last_epoch, 2);
    CHECK_NEAR(s.last_acc, 0.75, 1e-12);
    CHECK(strstr(s.log, "starting 2 00112233aabbccdd {\"x\":2} 2") != NULL);
    CHECK(strstr(s.log, "garbage report") != NULL);
    CHECK(strstr(s.log, "plain text") != NULL);
    CHECK_MSG(strstr(s.reason, "trained to epoch 2") != NULL, "%s", s.reason);
}

static void test_crash(void) {
    seen_t s;
    run("echo '{\"epoch\": 1, \"acc\": 0.5}'\nexit 3\n", 3, 30, 0, &s);
    CHECK(s.failed);
    CHECK_INT(s.epochs, 1);
    CHECK_MSG(strstr(s.reason, "exit status 3 at epoch 1") != NULL, "%s", s.reason);
    run("echo '{\"epoch\": 1, \"acc\": 0.5}'\n", 3, 30, 0, &s);
    CHECK(s.failed);
    CHECK_MSG(strstr(s.reason, "before epoch 3") != NULL, "%s", s.reason);
    run("kill -9 $$\n", 3, 30, 0, &s);
    CHECK(s.failed);
    /* the template's shell reports its child's signal as 128 + 9 */
    CHECK_MSG(strstr(s.reason, "signal 9") || strstr(s.reason, "exit status 137"), "%s",
              s.reason);
}

static void test_timeout(void) {
    seen_t s;
    uint64_t ms = run("echo '{\"epoch\": 1, \"acc\": 0.5}'\nsleep 30\n", 3, 1, 0, &s);
    CHECK(s.failed);
    CHECK_MSG(strstr(s.reason, "timed out after 1 s at epoch 1") != NULL, "%s", s.reason);
    CHECK_MSG(ms < 10000, "took %llu ms", (unsigned long long)ms);
}

static void test_cancel(void) {
    seen_t s;
    uint64_t ms = run("echo '{\"epoch\": 1, \"acc\": 0.5}'\nsleep 30\n", 3, 60, 300, &s);
    CHECK(!s.failed);
    CHECK_MSG(strstr(s.reason, "stopped") != NULL, "%s", s.reason);
    CHECK_MSG(ms < 10000, "took %llu ms", (unsigned long long)ms);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/study_worker_test.%d",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    mkdir(dir, 0700);
    sl_test_run("reports_and_garbage", test_reports_and_garbage);
    sl_test_run("crash", test_crash);
    sl_test_run("timeout", test_timeout);
    sl_test_run("cancel", test_cancel);
    char p[400];
    snprintf(p, sizeof p, "%s/trial.sh", dir);
    unlink(p);
    rmdir(dir);
    return sl_test_finish();
}
