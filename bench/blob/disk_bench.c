/* A durable blob put from a file, through the library with no peer, two
 * ways (bench/blob/run.py runs it beside cp and cp + sync):
 *
 *   per_chunk  each chunk written with sl_disk_chunk_put: temporary file,
 *              fsync, rename, directory fsync (how blobs were written
 *              before the batched sync)
 *   batched    sl_blob_write_file: chunks written with no fsync each,
 *              then fdatasync of each and of their directories once
 *              (how sl_blob_node_put_file writes them now)
 *
 * Both read the file a chunk at a time and hash each chunk and the whole,
 * so the difference is the syncing. Each way writes into a fresh
 * directory under DIR, removed afterwards. Prints one JSON line:
 *   {"per_chunk_s":..,"batched_s":..,"chunks":..}
 *
 *   sl-blob-disk-bench FILE DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "starling/blob.h"
#include "starling/platform.h"

/* The old way: a builder for the hashes, sl_disk_chunk_put for each chunk. */
static sl_err put_per_chunk(sl_disk_t *disk, const char *path, uint32_t *chunks) {
    FILE *f = fopen(path, "rb");
    uint8_t *buf = malloc(SL_BLOB_CHUNK_LEN);
    sl_blob_builder_t *b = NULL;
    sl_err err = f && buf ? sl_blob_builder_new(SL_BLOB_CHUNK_LEN, &b) : SL_EIO;
    size_t n;
    while (!err && (n = fread(buf, 1, SL_BLOB_CHUNK_LEN, f)) > 0) {
        uint8_t h[SL_BLAKE2B_LEN];
        char hex[2 * SL_BLAKE2B_LEN + 1];
        if (!(err = sl_blob_builder_add(b, buf, n, h))) {
            sl_hex(h, SL_BLAKE2B_LEN, hex);
            err = sl_disk_chunk_put(disk, hex, buf, n);
        }
    }
    sl_blob_manifest_t m;
    if (!err && !(err = sl_blob_builder_finish(b, &m))) {
        *chunks = m.chunk_count;
        sl_blob_manifest_fini(&m);
    }
    sl_blob_builder_destroy(&b);
    free(buf);
    if (f)
        fclose(f);
    return err;
}

static sl_err put_batched(sl_disk_t *disk, const char *path, uint32_t *chunks) {
    sl_blob_manifest_t m;
    sl_err err = sl_blob_write_file(disk, path, 0, SL_BLOB_MAX_CHUNKS, &m);
    if (!err) {
        *chunks = m.chunk_count;
        sl_blob_manifest_fini(&m);
    }
    return err;
}

static double timed(sl_err (*put)(sl_disk_t *, const char *, uint32_t *), const char *file,
                    const char *dir, uint32_t *chunks) {
    sl_disk_t *disk;
    if (sl_disk_open(dir, &disk) != SL_OK) {
        fprintf(stderr, "sl-blob-disk-bench: cannot open %s\n", dir);
        exit(1);
    }
    uint64_t t0 = sl_plat_now_ns();
    sl_err err = put(disk, file, chunks);
    double s = (double)(sl_plat_now_ns() - t0) / 1e9;
    sl_disk_close(&disk);
    sl_plat_remove_tree(dir);
    if (err) {
        fprintf(stderr, "sl-blob-disk-bench: put failed: %s\n", sl_strerror(err));
        exit(1);
    }
    return s;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: sl-blob-disk-bench FILE DIR\n");
        return 2;
    }
    if (sl_init() != SL_OK)
        return 1;
    sl_log_set_level(SL_LOG_ERR);
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/per-chunk", argv[2]);
    snprintf(b, sizeof b, "%s/batched", argv[2]);
    uint32_t chunks = 0;
    double per_chunk = timed(put_per_chunk, argv[1], a, &chunks);
    double batched = timed(put_batched, argv[1], b, &chunks);
    printf("{\"per_chunk_s\":%.4f,\"batched_s\":%.4f,\"chunks\":%u}\n", per_chunk, batched, chunks);
    return 0;
}
