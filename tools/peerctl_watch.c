/* peerctl watch: live changes. With a study's id or name, the study's
 * progress (tools/peerctl_study.c); otherwise the store's changes under a
 * key prefix, streamed by the peer's watch-keys command
 * (include/starling/store_watch.h has the line format). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "peerctl_client.h"
#include "peerctl_store.h"
#include "peerctl_study.h"
#include "starling/store_watch.h"

static const char *help =
    "usage: peerctl watch [PREFIX] [--json] [--keys]\n"
    "       peerctl watch STUDY [--study]\n"
    "\n"
    "With the id or name of a study this peer knows, redraws the study's progress\n"
    "(trials, states, epochs, bars) until it ends. Otherwise streams every change\n"
    "to keys that start with PREFIX (all keys when there is none) as it reaches\n"
    "this peer, until interrupted:\n"
    "\n"
    "  12:00:01.250  runs/a = \"hello\"\n"
    "  12:00:01.270  runs/n (counter) = 3\n"
    "  12:00:02.010  runs/a deleted\n"
    "\n"
    "--json prints one JSON object per change instead:\n"
    "  {\"key\":K,\"type\":\"register\",\"value\":V,\"encoding\":\"utf-8\"|\"base64\"},\n"
    "  {\"key\":K,\"type\":\"counter\",\"value\":N}, {\"key\":K,\"type\":\"set\"|\"map\"},\n"
    "  {\"key\":K,\"deleted\":true}.\n"
    "--keys forces a key prefix that is also a study's name; --study forces a study.\n"
    "The watch ends with an error if the peer stops answering, or if this client\n"
    "reads more than 8 MiB slower than the changes arrive.\n";

static void stamp(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    printf("%02d:%02d:%02d.%03ld  ", tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

/* One change line as a person reads it. */
static void print_change(const char *line, size_t len) {
    cJSON *c = cJSON_ParseWithLength(line, len);
    const char *key = cJSON_GetStringValue(cJSON_GetObjectItem(c, "key"));
    if (!key) {
        /* not ours to read: shown as is, control characters as \xNN */
        sl_peerctl_print_safe(stdout, line, len, false);
        putchar('\n');
        cJSON_Delete(c);
        return;
    }
    stamp();
    /* keys and values as a person's terminal may show them: a key's NUL
       ends cJSON's string, and nothing is printed raw (sl_peerctl_print_safe) */
    sl_peerctl_print_safe(stdout, key, strlen(key), false);
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(c, "type"));
    const cJSON *v = cJSON_GetObjectItem(c, "value");
    if (cJSON_IsTrue(cJSON_GetObjectItem(c, "deleted")))
        printf(" deleted\n");
    else if (type && !strcmp(type, "register")) {
        const char *enc = cJSON_GetStringValue(cJSON_GetObjectItem(c, "encoding"));
        const char *s = cJSON_GetStringValue(v);
        printf(" = %s\"", enc && !strcmp(enc, "base64") ? "base64:" : "");
        sl_peerctl_print_safe(stdout, s ? s : "?", s ? strlen(s) : 1, false);
        printf("\"\n");
    } else if (type && !strcmp(type, "counter"))
        printf(" (counter) = %.0f\n", cJSON_GetNumberValue(v));
    else
        printf(" (%s changed)\n", type ? type : "value");
    cJSON_Delete(c);
}

typedef struct {
    bool json;
} watch_ctx_t;

/* A reply part: lines of changes (an empty part only says the peer is
 * alive). */
static int on_part(void *ctx, const uint8_t *body, size_t len) {
    const watch_ctx_t *w = ctx;
    const char *p = (const char *)body, *end = p + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (w->json) {
            sl_peerctl_print_json_safe(stdout, p, n);
            putchar('\n');
        } else
            print_change(p, n);
        p += n + 1;
    }
    fflush(stdout);
    return 0;
}

static int watch_keys(const char *prefix, bool json) {
    sl_peerctl_opts_t o = sl_peerctl_opts;
    /* the peer sends an empty part every SL_STORE_WATCH_KEEPALIVE_MS */
    int min_ms = 5 * (int)SL_STORE_WATCH_KEEPALIVE_MS;
    if (o.timeout_ms < min_ms)
        o.timeout_ms = min_ms;
    watch_ctx_t w = {json};
    const char *args[1] = {prefix};
    return sl_peerctl_call(&o, "watch-keys", args, prefix ? 1 : 0, on_part, &w);
}

/* Is `name` a study this peer knows? 1 yes, 0 no, -1 could not ask (the
 * error has been printed). */
static int is_study(const char *name) {
    sl_bytes_t arg = sl_bytes_str(name);
    sl_err status = SL_OK;
    int rc = sl_peerctl_call_bytes(&sl_peerctl_opts, "status", &arg, 1, NULL, NULL, &status);
    if (rc == 0)
        return 1;
    if (status == SL_ENOTFOUND || status == SL_EINVAL || status == SL_EUNSUPPORTED)
        return 0; /* no such study (or no study module: an unknown command) */
    return -1;
}

int sl_cmd_watch(int argc, char **argv) {
    const char *arg = NULL;
    bool json = false, keys = false, study = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(help, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--keys"))
            keys = true;
        else if (!strcmp(argv[i], "--study"))
            study = true;
        else if (!arg && argv[i][0] != '-')
            arg = argv[i];
        else {
            fprintf(stderr, "peerctl watch: unexpected '%s'; see peerctl watch --help\n", argv[i]);
            return 2;
        }
    }
    if ((keys && study) || (study && (!arg || json))) {
        fprintf(stderr, "peerctl watch: --study takes a STUDY and no --json; --keys and --study "
                        "exclude each other; see peerctl watch --help\n");
        return 2;
    }
    if (!study && arg && !keys) {
        int s = is_study(arg);
        if (s < 0)
            return 1;
        study = s == 1;
    }
    return study ? sl_cmd_watch_study(arg) : watch_keys(arg, json);
}
