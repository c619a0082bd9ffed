/* peerctl put/get/del/keys: see tools/peerctl_store.h. */
#include "peerctl_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peerctl_client.h"
#include "starling/mpack.h"

static int usage(const char *u) {
    fprintf(stderr, "usage: peerctl %s\n", u);
    return 2;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 65536 + 1, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            fclose(f);
            free(buf);
            return NULL; /* over 64 KiB: a blob, not a value */
        }
    }
    fclose(f);
    if (buf)
        buf[n] = 0;
    *len = n;
    return buf;
}

int sl_cmd_put(int argc, char **argv) {
    const char *key = NULL, *val = NULL, *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--file") && i + 1 < argc)
            file = argv[++i];
        else if (!key)
            key = argv[i];
        else if (!val)
            val = argv[i];
        else
            return usage("put KEY VALUE | put KEY --file FILE");
    }
    if (!key || (!val == !file))
        return usage("put KEY VALUE | put KEY --file FILE");
    char *buf = NULL;
    if (file) {
        size_t len;
        buf = read_all(file, &len);
        if (!buf) {
            fprintf(stderr, "peerctl: cannot read %s (or it is over 64 KiB: use peerctl blob put)\n",
                    file);
            return 1;
        }
        if (strlen(buf) != len) {
            fprintf(stderr, "peerctl: %s holds NUL bytes, which this version cannot send\n", file);
            free(buf);
            return 1;
        }
        val = buf;
    }
    const char *args[2] = {key, val};
    char *out = NULL;
    size_t n;
    int r = sl_peerctl_call_collect(&sl_peerctl_opts, "put", args, 2, &out, &n);
    sl_free(out);
    free(buf);
    return r;
}

static void json_string(const uint8_t *p, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '"' || p[i] == '\\')
            printf("\\%c", p[i]);
        else if (p[i] < 0x20)
            printf("\\u%04x", p[i]);
        else
            putchar(p[i]);
    }
    putchar('"');
}

int sl_cmd_get(int argc, char **argv) {
    const char *key = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!key)
            key = argv[i];
        else
            return usage("get KEY [--json]");
    }
    if (!key)
        return usage("get KEY [--json]");
    char *out = NULL;
    size_t n = 0;
    int r = sl_peerctl_call_collect(&sl_peerctl_opts, "get", &key, 1, &out, &n);
    if (r == 0) {
        if (!json) {
            fwrite(out, 1, n, stdout);
            if (n && out[n - 1] != '\n')
                putchar('\n');
        } else {
            printf("{\"key\":");
            json_string((const uint8_t *)key, strlen(key));
            if (sl_mpack_utf8_valid((const uint8_t *)out, n)) {
                printf(",\"value\":");
                json_string((const uint8_t *)out, n);
            } else {
                printf(",\"value_hex\":\"");
                for (size_t i = 0; i < n; i++)
                    printf("%02x", (uint8_t)out[i]);
                putchar('"');
            }
            printf("}\n");
        }
    }
    sl_free(out);
    return r;
}

int sl_cmd_del(int argc, char **argv) {
    if (argc != 2)
        return usage("del KEY");
    const char *key = argv[1];
    char *out = NULL;
    size_t n;
    int r = sl_peerctl_call_collect(&sl_peerctl_opts, "del", &key, 1, &out, &n);
    sl_free(out);
    return r;
}

int sl_cmd_keys(int argc, char **argv) {
    const char *prefix = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!prefix)
            prefix = argv[i];
        else
            return usage("keys [PREFIX] [--json]");
    }
    char *out = NULL;
    size_t n = 0;
    int r = sl_peerctl_call_collect(&sl_peerctl_opts, "keys", &prefix, prefix ? 1 : 0, &out, &n);
    if (r == 0 && json) {
        printf("%s\n", out);
    } else if (r == 0) {
        /* the peer's JSON array of strings, one key a line */
        for (size_t i = 0; i < n; i++) {
            if (out[i] != '"')
                continue;
            for (i++; i < n && out[i] != '"'; i++) {
                if (out[i] == '\\' && i + 1 < n) {
                    i++;
                    if (out[i] == 'u' && i + 4 < n) {
                        putchar((int)strtol((char[5]){out[i + 1], out[i + 2], out[i + 3], out[i + 4], 0},
                                            NULL, 16));
                        i += 4;
                        continue;
                    }
                }
                putchar(out[i]);
            }
            putchar('\n');
        }
    }
    sl_free(out);
    return r;
}
