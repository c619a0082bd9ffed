/* peerctl put/get/del/keys: see tools/peerctl_store.h. */
#include "peerctl_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <sodium.h>
#include <unistd.h>

#include "peerctl_client.h"
#include "starling/mpack.h"
#include "starling/store.h"

static int usage(const char *u) {
    fprintf(stderr, "usage: peerctl %s\n", u);
    return 2;
}

static const char *put_help =
    "usage: peerctl put KEY VALUE\n"
    "       peerctl put KEY --file FILE   (FILE may be - for stdin)\n"
    "\n"
    "Stores a register value under KEY (1..512 bytes of UTF-8). Values are bytes:\n"
    "--file sends the file's exact contents, NUL and non-UTF-8 bytes included.\n"
    "A value holds at most 65536 bytes (64 KiB); store larger data as a blob\n"
    "(peerctl blob put FILE). The reply comes once the write is on this peer's disk.\n";

static const char *get_help =
    "usage: peerctl get KEY [--json]\n"
    "\n"
    "Prints KEY's value. To a terminal a newline is added when the value lacks\n"
    "one; to a pipe or file the value's exact bytes are written, nothing added.\n"
    "--json prints {\"key\": K, \"value\": V, \"encoding\": E}: E is \"utf-8\" with V\n"
    "the JSON string when the value is valid UTF-8, else \"base64\" with V the\n"
    "value in standard base64 (RFC 4648).\n";

static bool is_help(const char *a) { return !strcmp(a, "--help") || !strcmp(a, "-h"); }

/* Reads a whole file (or stdin for "-") of at most `max` bytes.
 * Returns 0, or 1 (cannot read), or 2 (larger than max). */
static int read_all(const char *path, size_t max, char **out, size_t *len) {
    bool in = !strcmp(path, "-");
    FILE *f = in ? stdin : fopen(path, "rb");
    if (!f)
        return 1;
    char *buf = malloc(max + 2);
    size_t n = 0, got;
    while (buf && n <= max && (got = fread(buf + n, 1, max + 1 - n, f)) > 0)
        n += got;
    int rc = !buf || ferror(f) ? 1 : n > max ? 2 : 0;
    if (!in)
        fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}

int sl_cmd_put(int argc, char **argv) {
    const char *key = NULL, *val = NULL, *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(put_help, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--file") && i + 1 < argc)
            file = argv[++i];
        else if (!key)
            key = argv[i];
        else if (!val)
            val = argv[i];
        else
            return usage("put KEY VALUE | put KEY --file FILE (see peerctl put --help)");
    }
    if (!key || (!val == !file))
        return usage("put KEY VALUE | put KEY --file FILE (see peerctl put --help)");
    char *buf = NULL;
    size_t len = val ? strlen(val) : 0;
    if (file) {
        int r = read_all(file, SL_STORE_MAX_VALUE_LEN, &buf, &len);
        if (r == 2) {
            fprintf(stderr, "peerctl put: %s is larger than a value may be (%u bytes, 64 KiB); "
                            "store it as a blob: peerctl blob put %s\n",
                    file, SL_STORE_MAX_VALUE_LEN, file);
            return 1;
        }
        if (r) {
            fprintf(stderr, "peerctl put: cannot read %s: %s\n", file, strerror(errno));
            return 1;
        }
        val = buf;
    } else if (len > SL_STORE_MAX_VALUE_LEN) {
        fprintf(stderr, "peerctl put: the value is %zu bytes, over the limit of %u (64 KiB); "
                        "store it as a blob: peerctl blob put FILE\n",
                len, SL_STORE_MAX_VALUE_LEN);
        return 1;
    }
    sl_bytes_t args[2] = {sl_bytes_str(key), {(const uint8_t *)val, len}};
    int r = sl_peerctl_call_bytes(&sl_peerctl_opts, "put", args, 2, NULL, NULL, NULL);
    free(buf);
    return r;
}

/* Length of the UTF-8 sequence at p (at most n bytes) that is printable,
 * or 0: not UTF-8, or a C1 control (U+0080..U+009F). */
static size_t utf8_printable(const unsigned char *p, size_t n) {
    size_t len = p[0] >= 0xc2 && p[0] <= 0xdf   ? 2
                 : p[0] >= 0xe0 && p[0] <= 0xef ? 3
                 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4
                                                : 0;
    if (!len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if (p[0] == 0xc2 && p[1] < 0xa0)
        return 0; /* C1 control: 0x9b is a CSI to some terminals */
    return len;
}

void sl_peerctl_print_safe(FILE *f, const char *s, size_t n, bool keep_lines) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c == '\\') {
            fputs("\\\\", f);
            i++;
        } else if (keep_lines && (c == '\n' || c == '\t')) {
            fputc(c, f);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\x%02x", c);
            i++;
        } else if (c < 0x80) {
            fputc(c, f);
            i++;
        } else {
            size_t len = utf8_printable(p + i, n - i);
            if (len) {
                fwrite(p + i, 1, len, f);
                i += len;
            } else {
                fprintf(f, "\\x%02x", c);
                i++;
            }
        }
    }
}

void sl_peerctl_print_json_safe(FILE *f, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t len = c >= 0x80 ? utf8_printable(p + i, n - i) : 0;
        if (c >= 0x20 && c < 0x7f) {
            fputc(c, f);
            i++;
        } else if (len) {
            fwrite(p + i, 1, len, f);
            i += len;
        } else if (c == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] < 0xa0) {
            fprintf(f, "\\u%04x", p[i + 1]); /* a C1 control */
            i += 2;
        } else {
            fprintf(f, "\\u%04x", c);
            i++;
        }
    }
}

static void json_string(const uint8_t *p, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '"' || p[i] == '\\') {
            printf("\\%c", p[i]);
        } else if (p[i] < 0x20 || p[i] == 0x7f) {
            printf("\\u%04x", p[i]);
        } else if (p[i] == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] < 0xa0) {
            printf("\\u%04x", p[i + 1]); /* a C1 control */
            i++;
        } else {
            putchar(p[i]);
        }
    }
    putchar('"');
}

int sl_cmd_get(int argc, char **argv) {
    const char *key = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(get_help, stdout);
            return 0;
        }
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
    if (r == 0 && !json) {
        /* only a person at a terminal gets a newline added and control
           characters shown as \xNN: pipes get the bytes */
        if (isatty(fileno(stdout))) {
            sl_peerctl_print_safe(stdout, out, n, true);
            if (n && out[n - 1] != '\n')
                putchar('\n');
        } else {
            fwrite(out, 1, n, stdout);
        }
    } else if (r == 0) {
        printf("{\"key\":");
        json_string((const uint8_t *)key, strlen(key));
        if (sl_mpack_utf8_valid((const uint8_t *)out, n)) {
            printf(",\"value\":");
            json_string((const uint8_t *)out, n);
            printf(",\"encoding\":\"utf-8\"}\n");
        } else {
            size_t cap = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
            char *b64 = malloc(cap);
            if (!b64) {
                sl_free(out);
                return 1;
            }
            sodium_bin2base64(b64, cap, (const unsigned char *)out, n,
                              sodium_base64_VARIANT_ORIGINAL);
            printf(",\"value\":\"%s\",\"encoding\":\"base64\"}\n", b64);
            free(b64);
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
        sl_peerctl_print_json_safe(stdout, out, strlen(out));
        putchar('\n');
    } else if (r == 0) {
        /* the peer's JSON array of strings, one key a line, control
           characters shown as \xNN (sl_peerctl_print_safe) */
        char *key = malloc(n + 1);
        if (!key) {
            sl_free(out);
            return 1;
        }
        for (size_t i = 0; i < n; i++) {
            if (out[i] != '"')
                continue;
            size_t kl = 0;
            for (i++; i < n && out[i] != '"'; i++) {
                if (out[i] == '\\' && i + 1 < n) {
                    i++;
                    if (out[i] == 'u' && i + 4 < n) {
                        long u = strtol((char[5]){out[i + 1], out[i + 2], out[i + 3], out[i + 4], 0},
                                        NULL, 16);
                        key[kl++] = (char)(u < 0x100 ? u : '?');
                        i += 4;
                        continue;
                    }
                }
                key[kl++] = out[i];
            }
            sl_peerctl_print_safe(stdout, key, kl, false);
            putchar('\n');
        }
        free(key);
    }
    sl_free(out);
    return r;
}
