/* `peerctl members` and `peerctl stats`: what one peer knows of the
 * cluster, as a table for people or as JSON for programs. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peerctl.h"
#include "peerctl_client.h"
#include "peerctl_store.h"

/* Parses `[--json] [global options]` after a command name. Returns -1 on
 * --help (already printed), 2 on a bad flag, 0 otherwise. */
static int parse_args(const char *cmd, const char *help, int argc, char **argv, bool *json) {
    *json = false;
    for (int i = 1; i < argc;) {
        if (!strcmp(argv[i], "--json")) {
            *json = true;
            i++;
            continue;
        }
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: peerctl [--peer DATA_DIR|ipc://PATH|HOST:PORT] [--key FILE] %s [--json]\n\n%s\n",
                   cmd, help);
            return -1;
        }
        int r = sl_peerctl_opts_take(&sl_peerctl_opts, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r == 0) {
            fprintf(stderr, "peerctl %s: unknown argument '%s'; see peerctl %s --help\n", cmd,
                    argv[i], cmd);
            return 2;
        }
    }
    return 0;
}

/* A copy of JSON `text` with each bare integer of 16 digits or more put
 * in quotes, so that cJSON (whose numbers are doubles, exact to 2^53)
 * keeps its digits as a string: incarnations and store.state_hash use all
 * 64 bits. NULL when out of memory. */
static char *quote_big_ints(const char *text) {
    size_t len = strlen(text);
    char *out = malloc(len * 2 + 1), *o = out;
    if (!out)
        return NULL;
    bool in_str = false;
    for (size_t i = 0; i < len;) {
        char ch = text[i];
        if (in_str) {
            *o++ = ch;
            i++;
            if (ch == '\\' && i < len)
                *o++ = text[i++];
            else if (ch == '"')
                in_str = false;
            continue;
        }
        if (ch == '"') {
            in_str = true;
            *o++ = text[i++];
            continue;
        }
        size_t j = i;
        while (j < len && text[j] >= '0' && text[j] <= '9')
            j++;
        bool number_ends = j == len || !strchr(".eE", text[j]);
        if (j - i >= 16 && number_ends && (i == 0 || !strchr(".-+eE", text[i - 1]))) {
            *o++ = '"';
            memcpy(o, text + i, j - i);
            o += j - i;
            *o++ = '"';
            i = j;
        } else if (j > i) {
            memcpy(o, text + i, j - i);
            o += j - i;
            i = j;
        } else {
            *o++ = text[i++];
        }
    }
    *o = 0;
    return out;
}

static const char *str_of(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static int by_name(const void *a, const void *b) {
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    return strcmp(str_of(x, "name"), str_of(y, "name"));
}

static int print_members_table(const char *text) {
    char *exact = quote_big_ints(text);
    cJSON *arr = exact ? cJSON_Parse(exact) : NULL;
    free(exact);
    if (!cJSON_IsArray(arr)) {
        fprintf(stderr, "peerctl members: the peer sent a reply that is not a member list\n");
        cJSON_Delete(arr);
        return 1;
    }
    int n = cJSON_GetArraySize(arr);
    cJSON **rows = calloc((size_t)n + 1, sizeof *rows);
    if (!rows) {
        cJSON_Delete(arr);
        return 1;
    }
    int name_w = 4, addr_w = 7;
    /* walked, not indexed: cJSON_GetArrayItem walks its list from the
       start, and indexing each member made printing quadratic (a table
       of 114,000 members did not print in 20 s) */
    const cJSON *item = arr->child;
    for (int i = 0; i < n && item; i++, item = item->next) {
        rows[i] = (cJSON *)item;
        int nl = (int)strlen(str_of(rows[i], "name")) +
                 (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rows[i], "self")) ? 7 : 0);
        int al = (int)strlen(str_of(rows[i], "addr"));
        name_w = nl > name_w ? nl : name_w;
        addr_w = al > addr_w ? al : addr_w;
    }
    qsort(rows, (size_t)n, sizeof *rows, by_name);
    int counts[4] = {0, 0, 0, 0};
    printf("%-*s  %-*s  %-7s  %11s  %s\n", name_w, "NAME", addr_w, "ADDRESS", "STATE",
           "INCARNATION", "META");
    for (int i = 0; i < n; i++) {
        const cJSON *m = rows[i];
        char name[256];
        bool self = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "self"));
        snprintf(name, sizeof name, "%s%s", str_of(m, "name"), self ? " (self)" : "");
        const cJSON *inc = cJSON_GetObjectItemCaseSensitive(m, "incarnation");
        const char *state = str_of(m, "state");
        static const char *const states[4] = {"alive", "suspect", "dead", "left"};
        for (int s = 0; s < 4; s++)
            if (!strcmp(state, states[s]))
                counts[s]++;
        char inc_text[32];
        if (cJSON_IsString(inc))
            snprintf(inc_text, sizeof inc_text, "%.20s", inc->valuestring);
        else
            snprintf(inc_text, sizeof inc_text, "%.0f", cJSON_IsNumber(inc) ? inc->valuedouble : 0.0);
        /* names, addresses and metadata come from other peers: shown with
           control characters as \xNN (sl_peerctl_print_safe) */
        char line[1024];
        int ll = snprintf(line, sizeof line, "%-*s  %-*s  %-7s  %11s  ", name_w, name, addr_w,
                          str_of(m, "addr"), state, inc_text);
        sl_peerctl_print_safe(stdout, line, ll < (int)sizeof line ? (size_t)ll : sizeof line - 1,
                              false);
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(m, "meta");
        const cJSON *kv;
        bool first = true;
        cJSON_ArrayForEach(kv, meta) {
            ll = snprintf(line, sizeof line, "%s%s=%s", first ? "" : " ", kv->string,
                          cJSON_IsString(kv) ? kv->valuestring : "?");
            sl_peerctl_print_safe(stdout, line,
                                  ll < (int)sizeof line ? (size_t)ll : sizeof line - 1, false);
            first = false;
        }
        printf("\n");
    }
    printf("%d members: %d alive, %d suspect, %d dead, %d left\n", n, counts[0], counts[1],
           counts[2], counts[3]);
    free(rows);
    cJSON_Delete(arr);
    return 0;
}

int sl_cmd_members(int argc, char **argv) {
    bool json;
    int r = parse_args("members", "Lists the members the peer knows: name, address, state (alive,\n"
                                  "suspect, dead, left), incarnation and metadata. --json prints an\n"
                                  "array of objects with those fields.",
                       argc, argv, &json);
    if (r)
        return r < 0 ? 0 : r;
    char *text = NULL;
    size_t len = 0;
    if (sl_peerctl_call_collect(&sl_peerctl_opts, "members", NULL, 0, &text, &len) != 0)
        return 1;
    int rc = 0;
    if (json) { /* names come from other peers: sl_peerctl_print_json_safe */
        sl_peerctl_print_json_safe(stdout, text, len && text[len - 1] == '\n' ? len - 1 : len);
        putchar('\n');
    } else
        rc = print_members_table(text);
    sl_free(text);
    return rc;
}

/* Prints "prefix.key  value" lines for a JSON object, depth first. */
static void print_flat(const cJSON *obj, const char *prefix) {
    const cJSON *v;
    cJSON_ArrayForEach(v, obj) {
        char key[256];
        snprintf(key, sizeof key, "%s%s%s", prefix, prefix[0] ? "." : "", v->string ? v->string : "?");
        if (cJSON_IsObject(v)) {
            print_flat(v, key);
        } else if (cJSON_IsNumber(v)) {
            printf("%-32s %.0f\n", key, v->valuedouble);
        } else if (cJSON_IsString(v)) {
            printf("%-32s %s\n", key, v->valuestring);
        } else if (cJSON_IsBool(v)) {
            printf("%-32s %s\n", key, cJSON_IsTrue(v) ? "true" : "false");
        } else {
            char *s = cJSON_PrintUnformatted(v);
            printf("%-32s %s\n", key, s ? s : "?");
            free(s);
        }
    }
}

int sl_cmd_stats(int argc, char **argv) {
    bool json;
    int r = parse_args("stats", "Prints the peer's counters: messages and bytes in and out, messages\n"
                                "dropped, malformed or unauthenticated input, connections, members\n"
                                "by state, resident memory. --json prints them as one JSON object.",
                       argc, argv, &json);
    if (r)
        return r < 0 ? 0 : r;
    char *text = NULL;
    size_t len = 0;
    if (sl_peerctl_call_collect(&sl_peerctl_opts, "stats", NULL, 0, &text, &len) != 0)
        return 1;
    int rc = 0;
    if (json) {
        printf("%s%s", text, len && text[len - 1] == '\n' ? "" : "\n");
    } else {
        char *exact = quote_big_ints(text);
        cJSON *obj = exact ? cJSON_Parse(exact) : NULL;
        free(exact);
        if (!cJSON_IsObject(obj)) {
            fprintf(stderr, "peerctl stats: the peer sent a reply that is not a JSON object\n");
            rc = 1;
        } else {
            print_flat(obj, "");
        }
        cJSON_Delete(obj);
    }
    sl_free(text);
    return rc;
}
