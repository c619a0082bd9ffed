/* peerctl blob put/get/ls: see tools/peerctl_blob.h and docs/cli.md.
 *
 * Large files never travel in one message: put sends one chunk per
 * request (blob-chunk, at most 1 MiB), then the manifest (blob-commit);
 * get asks the peer to bring the blob local (blob-fetch, polled), then
 * reads it one chunk per request (blob-read) into a temporary file beside
 * OUTFILE, checks the whole against the hash, and renames it into place.
 * All on one connection, with up to WINDOW chunk requests in flight so
 * that the peer's disk, the wire and our hashing overlap. So memory stays
 * at a few chunks whatever the file's size. */
#include "peerctl_blob.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "peerctl_client.h"
#include "starling/blob.h"
#include "starling/platform.h"

#define HEX_LEN (2 * SL_BLAKE2B_LEN)
#define GET_WAIT_MS 600000 /* longest a get waits for the peer to gather the blob */
#define WINDOW 4           /* chunk requests in flight */

static const char *blob_help =
    "usage: peerctl blob put FILE            store FILE as a blob; prints its hash\n"
    "       peerctl blob get HASH OUTFILE    write the blob to OUTFILE (atomically,\n"
    "                                        only once verified against HASH)\n"
    "       peerctl blob ls [--json]         blobs in the store: hash, size, holders\n"
    "                                        (a holder not alive now is marked down)\n"
    "\n"
    "Blobs are content-addressed (BLAKE2b-256), cut into 1 MiB chunks, and kept\n"
    "on 2 peers chosen by rendezvous hashing; another peer copies a blob when a\n"
    "holder dies. Files stream one chunk at a time. See docs/store.md (Blobs).\n";

static int usage(void) {
    fputs(blob_help, stderr);
    return 2;
}

/* Collects a reply (one part) into a fixed buffer. */
typedef struct {
    uint8_t *buf; /* bytes (sl_malloc'd) */
    size_t len;   /* bytes gathered */
} part_t;

static int take_part(void *ctx, const uint8_t *body, size_t len) {
    part_t *p = ctx;
    uint8_t *n = sl_realloc(p->buf, p->len + len + 1);
    if (!n)
        return 1;
    if (len)
        memcpy(n + p->len, body, len);
    p->len += len;
    n[p->len] = 0;
    p->buf = n;
    return 0;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A chunk sent and not yet acknowledged. */
typedef struct {
    uint32_t id;           /* its request */
    char hex[HEX_LEN + 1]; /* the hash the peer must store it under */
} sent_t;

/* Takes one blob-chunk answer off the connection and checks it names the
 * hash we computed for that chunk. */
static int take_chunk_ack(sl_peerctl_conn_t *c, sent_t *sent, size_t *count) {
    sl_peerctl_part_t part;
    if (sl_peerctl_recv(c, &part))
        return 1;
    size_t k = 0;
    while (k < *count && sent[k].id != part.id)
        k++;
    int rc = 0;
    if (k == *count) {
        /* a stale reply: not ours */
    } else if (part.status != SL_OK) {
        fprintf(stderr, "peerctl blob put: %.*s\n", (int)part.len,
                part.body ? (const char *)part.body : "failed");
        rc = 1;
    } else if (part.len != HEX_LEN || memcmp(part.body, sent[k].hex, HEX_LEN) != 0) {
        fprintf(stderr, "peerctl blob put: the peer stored a chunk under another hash "
                        "(damaged in transit?); try again\n");
        rc = 1;
    }
    if (k < *count)
        sent[k] = sent[--*count];
    sl_peerctl_part_fini(&part);
    return rc;
}

static int blob_put(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "peerctl blob put: cannot read %s: %s\n", path, strerror(errno));
        return 1;
    }
    uint8_t *chunk = malloc(SL_BLOB_CHUNK_LEN);
    sl_blob_builder_t *b = NULL;
    sl_peerctl_conn_t *conn = NULL;
    sent_t sent[WINDOW];
    size_t in_flight = 0;
    int rc = 1;
    if (!chunk || sl_blob_builder_new(SL_BLOB_CHUNK_LEN, &b) != SL_OK) {
        fprintf(stderr, "peerctl blob put: out of memory\n");
        goto done;
    }
    if (!(conn = sl_peerctl_connect(&sl_peerctl_opts)))
        goto done;
    for (;;) {
        size_t n = 0, got;
        while (n < SL_BLOB_CHUNK_LEN && (got = fread(chunk + n, 1, SL_BLOB_CHUNK_LEN - n, f)) > 0)
            n += got;
        if (ferror(f)) {
            fprintf(stderr, "peerctl blob put: cannot read %s: %s\n", path, strerror(errno));
            goto done;
        }
        if (n == 0)
            break;
        uint8_t h[SL_BLAKE2B_LEN];
        sl_err err = sl_blob_builder_add(b, chunk, n, h);
        if (err) {
            fprintf(stderr, "peerctl blob put: %s is too large (at most %u chunks of 1 MiB)\n",
                    path, SL_BLOB_MAX_CHUNKS);
            goto done;
        }
        while (in_flight == WINDOW)
            if (take_chunk_ack(conn, sent, &in_flight))
                goto done;
        sl_bytes_t arg = {chunk, n};
        if (sl_peerctl_send(conn, "blob-chunk", &arg, 1, &sent[in_flight].id))
            goto done;
        sl_hex(h, SL_BLAKE2B_LEN, sent[in_flight++].hex);
        if (n < SL_BLOB_CHUNK_LEN)
            break;
    }
    while (in_flight > 0)
        if (take_chunk_ack(conn, sent, &in_flight))
            goto done;
    sl_blob_manifest_t m;
    if (sl_blob_builder_finish(b, &m) != SL_OK)
        goto done;
    uint8_t *enc;
    size_t enc_len;
    sl_err err = sl_blob_manifest_encode(&m, &enc, &enc_len);
    char hex[HEX_LEN + 1];
    sl_hex(m.hash, SL_BLAKE2B_LEN, hex);
    sl_blob_manifest_fini(&m);
    if (err || enc_len > SL_CTL_ARG_MAX) {
        fprintf(stderr, "peerctl blob put: %s is too large for one blob; split it\n", path);
        if (!err)
            sl_free(enc);
        goto done;
    }
    /* the peer verifies the chunks it holds a few at a time: poll until it is done */
    sl_bytes_t arg = {enc, enc_len};
    uint64_t start = sl_plat_now_ns() / 1000000ull;
    int pause = 5;
    for (;;) {
        part_t rep = {NULL, 0};
        rc = sl_peerctl_conn_call(conn, "blob-commit", &arg, 1, take_part, &rep, NULL);
        bool done = rc == 0 && rep.buf && strstr((char *)rep.buf, "\"state\":\"done\"");
        sl_free(rep.buf);
        if (rc || done)
            break;
        if (sl_plat_now_ns() / 1000000ull - start > GET_WAIT_MS) {
            fprintf(stderr, "peerctl blob put: the peer is still verifying after %d s\n",
                    GET_WAIT_MS / 1000);
            rc = 1;
            break;
        }
        sleep_ms(pause);
        if (pause < 50)
            pause *= 2;
    }
    sl_free(enc);
    if (rc == 0)
        printf("%s\n", hex);
done:
    sl_peerctl_close(&conn);
    sl_blob_builder_destroy(&b);
    free(chunk);
    fclose(f);
    return rc;
}

/* Asks the peer to bring the blob local; waits until it says ready. Fills
 * size and chunk count. */
static int wait_ready(const char *hash, uint64_t *size, uint32_t *chunks, uint32_t *chunk_len) {
    uint64_t start = sl_plat_now_ns() / 1000000ull;
    int pause = 5;
    for (;;) {
        uint64_t now = sl_plat_now_ns() / 1000000ull;
        sl_bytes_t arg = sl_bytes_str(hash);
        part_t rep = {NULL, 0};
        sl_err status;
        int r = sl_peerctl_call_bytes(&sl_peerctl_opts, "blob-fetch", &arg, 1, take_part, &rep,
                                      &status);
        if (r && status == SL_OK) { /* transport trouble: already explained */
            sl_free(rep.buf);
            return 1;
        }
        if (r) {
            /* a blob put elsewhere a moment ago may not be in this peer's store yet */
            bool unknown = status == SL_ENOTFOUND && rep.buf && strstr((char *)rep.buf, "no such blob");
            if (!unknown || now - start > (uint64_t)sl_peerctl_opts.timeout_ms) {
                fprintf(stderr, "peerctl blob get: %s\n", rep.buf ? (char *)rep.buf : "failed");
                sl_free(rep.buf);
                return 1;
            }
        } else {
            cJSON *o = cJSON_Parse((char *)rep.buf);
            const cJSON *st = cJSON_GetObjectItem(o, "state");
            bool ready = cJSON_IsString(st) && !strcmp(st->valuestring, "ready");
            if (ready) {
                *size = (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "size"));
                *chunks = (uint32_t)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "chunks"));
                *chunk_len = (uint32_t)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "chunk_len"));
            }
            cJSON_Delete(o);
            if (ready) {
                sl_free(rep.buf);
                return 0;
            }
            if (now - start > GET_WAIT_MS) {
                fprintf(stderr, "peerctl blob get: the peer is still gathering the blob after "
                                "%d s; try again later\n", GET_WAIT_MS / 1000);
                sl_free(rep.buf);
                return 1;
            }
        }
        sl_free(rep.buf);
        sleep_ms(pause);
        if (pause < 50) /* a short poll: a 1 MiB chunk takes a few ms */
            pause *= 2;
    }
}

/* A chunk asked for and not yet written out. */
typedef struct {
    uint32_t id;   /* its request */
    uint8_t *data; /* the bytes received so far (sl_malloc'd) */
    size_t len;    /* bytes of data */
    bool done;     /* the whole reply is in */
} asked_t;

/* Takes one blob-read reply part into the slot it answers. 0 on success
 * (or a stale part), 3 when the peer's copy went bad (retry), else 1. */
static int take_chunk(sl_peerctl_conn_t *c, asked_t *slots, uint32_t from, uint32_t to) {
    sl_peerctl_part_t part;
    if (sl_peerctl_recv(c, &part))
        return 1;
    asked_t *a = NULL;
    for (uint32_t i = from; i < to && !a; i++)
        if (slots[i % WINDOW].id == part.id && !slots[i % WINDOW].done)
            a = &slots[i % WINDOW];
    int rc = 0;
    if (!a) {
        /* a stale reply: not ours */
    } else if (part.status == SL_ECORRUPT || part.status == SL_ENOTFOUND) {
        rc = 3;
    } else if (part.status != SL_OK) {
        fprintf(stderr, "peerctl blob get: %.*s\n", (int)part.len,
                part.body ? (const char *)part.body : "failed");
        rc = 1;
    } else {
        uint8_t *n = sl_realloc(a->data, a->len + part.len + 1);
        if (!n) {
            fprintf(stderr, "peerctl blob get: out of memory\n");
            rc = 1;
        } else {
            if (part.len)
                memcpy(n + a->len, part.body, part.len);
            a->data = n;
            a->len += part.len;
            a->done = !part.more;
        }
    }
    sl_peerctl_part_fini(&part);
    return rc;
}

/* Reads every chunk into `f` in order, WINDOW requests in flight, hashing
 * as it goes; 0 when the whole matches `want`, 3 when the peer's copy went
 * bad meanwhile (retry). */
static int read_chunks(const char *hash, const uint8_t want[SL_BLAKE2B_LEN], uint64_t size,
                       uint32_t chunks, uint32_t chunk_len, FILE *f) {
    sl_blob_builder_t *b;
    if (sl_blob_builder_new(chunk_len, &b) != SL_OK)
        return 1;
    sl_peerctl_conn_t *conn = sl_peerctl_connect(&sl_peerctl_opts);
    asked_t slots[WINDOW];
    memset(slots, 0, sizeof slots);
    uint32_t next_ask = 0, next_write = 0;
    int rc = conn ? 0 : 1;
    while (!rc && next_write < chunks) {
        while (!rc && next_ask < chunks && next_ask - next_write < WINDOW) {
            char num[16];
            snprintf(num, sizeof num, "%" PRIu32, next_ask);
            sl_bytes_t args[2] = {sl_bytes_str(hash), sl_bytes_str(num)};
            asked_t *a = &slots[next_ask % WINDOW];
            *a = (asked_t){0};
            rc = sl_peerctl_send(conn, "blob-read", args, 2, &a->id) ? 1 : 0;
            next_ask++;
        }
        if (!rc)
            rc = take_chunk(conn, slots, next_write, next_ask);
        for (asked_t *a = &slots[next_write % WINDOW]; !rc && next_write < next_ask && a->done;
             a = &slots[next_write % WINDOW]) {
            if (sl_blob_builder_add(b, a->data, a->len, NULL) != SL_OK ||
                fwrite(a->data, 1, a->len, f) != a->len) {
                fprintf(stderr, "peerctl blob get: cannot write the output file: %s\n",
                        strerror(errno));
                rc = 1;
            }
            sl_free(a->data);
            *a = (asked_t){0};
            next_write++;
        }
    }
    for (size_t i = 0; i < WINDOW; i++)
        sl_free(slots[i].data);
    sl_peerctl_close(&conn);
    sl_blob_manifest_t m;
    if (!rc && sl_blob_builder_finish(b, &m) == SL_OK) {
        if (m.size != size || memcmp(m.hash, want, SL_BLAKE2B_LEN) != 0) {
            fprintf(stderr, "peerctl blob get: BLOB-CORRUPT: the bytes received do not match "
                            "the hash; nothing written\n");
            rc = 1;
        }
        sl_blob_manifest_fini(&m);
    }
    sl_blob_builder_destroy(&b);
    return rc;
}

static bool parse_hash(const char *s, uint8_t out[SL_BLAKE2B_LEN]) {
    if (strlen(s) != HEX_LEN || strspn(s, "0123456789abcdef") != HEX_LEN)
        return false;
    for (size_t i = 0; i < SL_BLAKE2B_LEN; i++) {
        unsigned v;
        sscanf(s + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
    return true;
}

static int blob_get(const char *hash, const char *out) {
    uint8_t want[SL_BLAKE2B_LEN];
    if (!parse_hash(hash, want)) {
        fprintf(stderr, "peerctl blob get: HASH must be 64 lower-case hex digits "
                        "(as `peerctl blob put` or `peerctl blob ls` print it)\n");
        return 2;
    }
    size_t tl = strlen(out) + 32;
    char *tmp = malloc(tl);
    if (!tmp)
        return 1;
    snprintf(tmp, tl, "%s.tmp-%ld", out, (long)getpid());
    int rc = 1;
    for (int attempt = 0; attempt < 3; attempt++) {
        uint64_t size = 0;
        uint32_t chunks = 0, chunk_len = 0;
        if (wait_ready(hash, &size, &chunks, &chunk_len))
            break;
        FILE *f = fopen(tmp, "wb");
        if (!f) {
            fprintf(stderr, "peerctl blob get: cannot create %s: %s\n", tmp, strerror(errno));
            break;
        }
        rc = read_chunks(hash, want, size, chunks, chunk_len ? chunk_len : SL_BLOB_CHUNK_LEN, f);
        if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
            fprintf(stderr, "peerctl blob get: cannot write %s: %s\n", tmp, strerror(errno));
            rc = 1;
        }
        fclose(f);
        if (rc != 3)
            break;
        rc = 1; /* the peer's copy went bad under us: it fetches again */
    }
    if (rc == 0 && rename(tmp, out) != 0) {
        fprintf(stderr, "peerctl blob get: cannot rename %s to %s: %s\n", tmp, out, strerror(errno));
        rc = 1;
    }
    if (rc == 0)
        sl_plat_sync_parent_dir(out); /* the rename survives a power loss too */
    if (rc != 0)
        unlink(tmp);
    free(tmp);
    return rc;
}

static int blob_ls(bool json) {
    char *text = NULL;
    size_t len = 0;
    if (sl_peerctl_call_collect(&sl_peerctl_opts, "blob-ls", NULL, 0, &text, &len) != 0)
        return 1;
    if (json) {
        printf("%s\n", text);
        sl_free(text);
        return 0;
    }
    cJSON *arr = cJSON_Parse(text);
    sl_free(text);
    if (!cJSON_IsArray(arr)) {
        fprintf(stderr, "peerctl blob ls: the peer sent a reply that is not a JSON array\n");
        cJSON_Delete(arr);
        return 1;
    }
    printf("%-64s %12s  %s\n", "HASH", "SIZE", "HOLDERS");
    const cJSON *o;
    cJSON_ArrayForEach(o, arr) {
        const cJSON *h = cJSON_GetObjectItem(o, "hash");
        printf("%-64s %12.0f  ", cJSON_IsString(h) ? h->valuestring : "?",
               cJSON_GetNumberValue(cJSON_GetObjectItem(o, "size")));
        const cJSON *n, *a;
        bool first = true;
        cJSON_ArrayForEach(n, cJSON_GetObjectItem(o, "holders")) {
            bool alive = false;
            cJSON_ArrayForEach(a, cJSON_GetObjectItem(o, "alive_holders"))
                alive |= cJSON_IsString(a) && cJSON_IsString(n) && !strcmp(a->valuestring, n->valuestring);
            printf("%s%s%s", first ? "" : ",", cJSON_IsString(n) ? n->valuestring : "?",
                   alive ? "" : " (down)");
            first = false;
        }
        printf("\n");
    }
    cJSON_Delete(arr);
    return 0;
}

int sl_cmd_blob(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(blob_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(blob_help, stdout);
            return 0;
        }
    if (!strcmp(argv[1], "put") && argc == 3)
        return blob_put(argv[2]);
    if (!strcmp(argv[1], "get") && argc == 4)
        return blob_get(argv[2], argv[3]);
    if (!strcmp(argv[1], "ls") && (argc == 2 || (argc == 3 && !strcmp(argv[2], "--json"))))
        return blob_ls(argc == 3);
    return usage();
}
