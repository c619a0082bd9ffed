/* Blobs: large values (checkpoints, trained models, datasets) stored
 * outside the map, content-addressed by BLAKE2b-256 and cut into chunks.
 *
 * The map holds a blob's manifest (hash, size, chunk hashes: encoded with
 * sl_blob_manifest_encode, a few dozen bytes per MiB) and its holders;
 * the bytes live as chunk files on R peers (default 2) chosen by
 * rendezvous hashing among the alive ones: every peer computes the same
 * placement from the same view, with no coordination. When a holder dies
 * sl_blob_plan says which alive peers must fetch a copy (from any alive
 * holder) and which extra copies may go once the placed peers hold it.
 * Every read is verified: each chunk against its hash, then the whole
 * against the blob hash (SL_ECORRUPT, logged BLOB-CORRUPT).
 *
 * Placement and planning are pure; reading and writing chunks goes through
 * src/platform/disk.c (sl_disk_chunk_*). */
#ifndef STARLING_BLOB_H
#define STARLING_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"
#include "starling/disk.h"
#include "starling/hash.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_BLOB_CHUNK_LEN (1u << 20)       /* default chunk size */
#define SL_BLOB_MAX_CHUNKS (1u << 16)      /* chunks in one blob (64 GiB at 1 MiB) */
#define SL_BLOB_DEFAULT_R 2                /* copies kept */

typedef struct {
    uint8_t hash[SL_BLAKE2B_LEN];     /* BLAKE2b-256 of the whole content */
    uint64_t size;                    /* content bytes */
    uint32_t chunk_len;               /* bytes per chunk (the last may be shorter) */
    uint32_t chunk_count;             /* chunks */
    uint8_t (*chunks)[SL_BLAKE2B_LEN];/* each chunk's BLAKE2b-256 */
} sl_blob_manifest_t;

/* Cuts `data` into chunks of `chunk_len` bytes (0: SL_BLOB_CHUNK_LEN) and
 * hashes them. */
sl_err sl_blob_manifest_build(const void *data, size_t len, uint32_t chunk_len,
                              sl_blob_manifest_t *out);
void sl_blob_manifest_fini(sl_blob_manifest_t *m);
/* Canonical msgpack {0: hash, 1: size, 2: chunk_len, 3: [chunk hashes]};
 * the decoder is strict (sizes must agree with the chunk count). */
sl_err sl_blob_manifest_encode(const sl_blob_manifest_t *m, uint8_t **out, size_t *len);
sl_err sl_blob_manifest_decode(const uint8_t *buf, size_t len, sl_blob_manifest_t *out);

/* Builds a manifest one chunk at a time (a file or a stream, never held
 * whole): every chunk but the last must be `chunk_len` bytes. Also how a
 * blob held as chunk files is verified whole: feed its chunks in order
 * and compare the finished hash. */
typedef struct sl_blob_builder sl_blob_builder_t;

sl_err sl_blob_builder_new(uint32_t chunk_len, sl_blob_builder_t **out);
void sl_blob_builder_destroy(sl_blob_builder_t **b);
/* Adds the next chunk; writes its hash to `chunk_hash` when not NULL.
 * SL_EINVAL for a chunk after a short one or over chunk_len, SL_ETOOBIG
 * past SL_BLOB_MAX_CHUNKS. */
sl_err sl_blob_builder_add(sl_blob_builder_t *b, const void *data, size_t len,
                           uint8_t chunk_hash[SL_BLAKE2B_LEN]);
/* The same for a chunk whose hash the caller has just computed (and
 * checked against a manifest): only the whole-blob hash is updated, so a
 * verified read hashes each chunk once, not twice. */
sl_err sl_blob_builder_add_hashed(sl_blob_builder_t *b, const void *data, size_t len,
                                  const uint8_t chunk_hash[SL_BLAKE2B_LEN]);
/* Chunks added so far. */
uint32_t sl_blob_builder_count(const sl_blob_builder_t *b);
/* The manifest of everything added (the builder is spent). */
sl_err sl_blob_builder_finish(sl_blob_builder_t *b, sl_blob_manifest_t *out);

/* A deep copy of `m`. */
sl_err sl_blob_manifest_copy(const sl_blob_manifest_t *m, sl_blob_manifest_t *out);

/* The `r` peers (indexes into names[0..n)) that should hold the blob,
 * highest rendezvous weight first; returns how many (min(r, n)). */
size_t sl_blob_place(const uint8_t hash[SL_BLAKE2B_LEN], const char *const *names, size_t n,
                     size_t r, size_t *out);

/* What to do for one blob given the alive peers and which of them hold a
 * copy (holds[i] for names[i]). */
typedef struct {
    size_t fetch[16];      /* alive peers that must fetch a copy */
    size_t fetch_count;    /* entries */
    size_t source;         /* an alive holder to fetch from */
    size_t drop[16];       /* holders outside the placement that may delete */
    size_t drop_count;     /* entries (only once every placed peer holds it) */
    bool lost;             /* no alive peer holds it */
} sl_blob_plan_t;

sl_err sl_blob_plan(const uint8_t hash[SL_BLAKE2B_LEN], const char *const *names, const bool *holds,
                    size_t n, size_t r, sl_blob_plan_t *out);

/* Checks `len` bytes against a chunk or blob hash: SL_ECORRUPT if not. */
sl_err sl_blob_verify(const void *data, size_t len, const uint8_t hash[SL_BLAKE2B_LEN]);

/* Writes the chunks of `data` through `disk` and builds the manifest.
 * Durable on SL_OK: the chunks are written with no fsync each, then
 * synced together (sl_blob_sync), about as fast as cp + sync. */
sl_err sl_blob_write(sl_disk_t *disk, const void *data, size_t len, uint32_t chunk_len,
                     sl_blob_manifest_t *out);
/* The same for a file's contents, read one chunk at a time (memory: one
 * chunk, whatever the file's size). SL_ETOOBIG, before anything is
 * written, for a file of more than `max_chunks` chunks; SL_ENOTFOUND if
 * it does not exist, SL_EINVAL if it is not a regular file. */
sl_err sl_blob_write_file(sl_disk_t *disk, const char *path, uint32_t chunk_len,
                          uint32_t max_chunks, sl_blob_manifest_t *out);
/* Makes every chunk of `m` durable here: fdatasync each chunk file, then
 * the directories they were renamed into (sl_disk_chunk_sync_dirs).
 * SL_ENOTFOUND if a chunk is not here. Call before recording a copy. */
sl_err sl_blob_sync(sl_disk_t *disk, const sl_blob_manifest_t *m);
/* Reads a blob back, verifying every chunk and the whole (SL_ECORRUPT,
 * SL_ENOTFOUND if a chunk is missing). `*data` is sl_free'd by the caller. */
sl_err sl_blob_read(sl_disk_t *disk, const sl_blob_manifest_t *m, uint8_t **data, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
