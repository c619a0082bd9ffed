/* Logging: syslog levels, stable ids, one pluggable sink. The default sink
 * writes "time level id message" lines to stderr. Cores never read a clock:
 * the simulator installs a sink that stamps its virtual time. Only ISO C
 * here (stdio, timespec_get): base/ sits below platform/, which owns the
 * operating system's calls, so it cannot call up into it. */
#include <stdio.h>
#include <time.h>

#include "starling/common.h"

static sl_log_sink_fn log_sink;  /* NULL: default stderr sink */
static void *log_sink_ctx;       /* passed to log_sink */
static int log_level = SL_LOG_NOTICE; /* messages above this are dropped */

static const char *level_name(int level) {
    switch (level) {
    case SL_LOG_ERR: return "error";
    case SL_LOG_WARNING: return "warn";
    case SL_LOG_NOTICE: return "notice";
    case SL_LOG_INFO: return "info";
    default: return "debug";
    }
}

static void stderr_sink(void *ctx, int level, const char *id, const char *msg) {
    struct timespec ts = {0};
    timespec_get(&ts, TIME_UTC);
    /* UTC time of day (POSIX time has no leap seconds: a day is 86400 s) */
    long day_s = (long)(ts.tv_sec % 86400);
    fprintf(stderr, "%02ld:%02ld:%02ld.%03ld %-6s %-18s %s\n", day_s / 3600, day_s / 60 % 60,
            day_s % 60, ts.tv_nsec / 1000000, level_name(level), id, msg);
}

void sl_log_set_sink(sl_log_sink_fn sink, void *ctx) {
    log_sink = sink;
    log_sink_ctx = ctx;
}

void sl_log_set_level(int level) { log_level = level; }

int sl_log_get_level(void) { return log_level; }

void sl_logv(int level, const char *id, const char *fmt, va_list ap) {
    if (level > log_level)
        return;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (log_sink)
        log_sink(log_sink_ctx, level, id, msg);
    else
        stderr_sink(NULL, level, id, msg);
}

void sl_log(int level, const char *id, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sl_logv(level, id, fmt, ap);
    va_end(ap);
}

bool sl_log_limit(sl_log_limit_t *lim, uint64_t now_ms, uint64_t every_ms, uint64_t *left_out) {
    if (lim->last_ms && now_ms >= lim->last_ms && now_ms - lim->last_ms < every_ms) {
        lim->left_out++;
        return false;
    }
    *left_out = lim->left_out;
    lim->last_ms = now_ms ? now_ms : 1;
    lim->left_out = 0;
    return true;
}
