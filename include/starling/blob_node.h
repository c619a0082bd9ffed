/* The blob service inside the peer daemon: keeps blobs (blob.h) as chunk
 * files on R peers placed by rendezvous hashing, records them in the
 * store, moves chunks between peers (blob_xfer.h, proto/blob.md), and
 * re-replicates when a holder dies.
 *
 *   store     blob/HASH           register: the manifest (sl_blob_manifest_encode)
 *             blob/HASH/h/NAME    register "1": member NAME holds a verified copy
 *                                 (each holder writes and deletes only its own key)
 *             blob/HASH/dead      register "1": deleted; holders drop their copies
 *   disk      DATA/blob/blobs/xx/CHUNKHASH, one file per chunk
 *   routes    message types 24..26 (GET, CHUNK, OFFER)
 *   ticks     every reconcile_ms, and at once after a membership event,
 *             each peer runs sl_blob_plan for every blob over the alive
 *             members: a placed peer without a copy fetches one from the
 *             alive holders and then records itself; a holder outside the
 *             placement drops its copy once every placed peer holds one
 *   commands  blob-chunk BYTES    store one chunk here (peerctl blob put)
 *             blob-commit MANIFEST record a blob whose chunks are all here
 *                                 (polled: {"state":"verifying"|"done"})
 *             blob-fetch HASH     bring a blob here; {"state":"ready"|"fetching"}
 *             blob-read HASH I    chunk I of a blob held here, verified
 *             blob-ls             JSON array: hash, size, chunks, holders,
 *                                 alive_holders (as this peer sees them)
 *   stats     "blob": puts, chunks served and fetched, corrupt chunks, ...
 *
 * Every chunk is verified against its hash where it is read from disk (a
 * holder answers MISSING for a bad copy, deletes it and withdraws as
 * holder, so re-replication repairs it) and again where it arrives; both
 * are counted in stats.blob.corrupt and logged BLOB-CORRUPT. A fetched
 * blob is verified whole before it counts as held.
 *
 * The loop is never held for a whole blob: checking which chunks are
 * here, verifying the whole, and get_file's copy out read a few chunk
 * files per loop turn; transfers keep a few chunks in flight. Memory is a
 * few chunks whatever the blob's size, except in the calls that take or
 * give the bytes in memory (put, read). put and put_file work on the
 * caller's turn (put_file with one chunk in memory).
 *
 * Durability: chunk files are written with no fsync each; before a copy
 * is recorded as held or a put answers, the blob's chunks are fdatasynced
 * and their directories fsynced once (sl_blob_sync). A crash before that
 * may lose the blob, and may leave a chunk file damaged, which every read
 * refuses by its hash.
 *
 * Cache: a copy fetched for a reader (blob get, fetch, get_file) on a
 * peer that is not one of the blob's R holders is kept as a cache of at
 * most cache_max_bytes (default 2 GiB, `peer --blob-cache MB`), least
 * recently used out first; never a copy used in the last cache_idle_ms
 * or the most recently used one (a reader may be streaming it), never a
 * held blob, never a chunk that a held blob shares (stats blob.evicted,
 * log BLOB-EVICT). Copies left on disk by an earlier run are found at
 * start and go first.
 *
 * For other modules (studies' checkpoints): put from memory or a file,
 * then fetch (asynchronous, callback on the loop), then read or write to
 * a file:
 *
 *     uint8_t h[SL_BLAKE2B_LEN];
 *     sl_blob_node_put(bn, buf, len, h);           // here now; replicated soon
 *     ...
 *     sl_blob_node_get_file(bn, h, "ckpt.bin", on_done, ctx);
 *     // on_done(ctx, SL_OK, h) once ckpt.bin holds the verified bytes
 *
 * Call sl_blob_node_destroy after sl_node_destroy. */
#ifndef STARLING_BLOB_NODE_H
#define STARLING_BLOB_NODE_H

#include "starling/blob.h"
#include "starling/blob_xfer.h"
#include "starling/peer.h"
#include "starling/store_node.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_blob_node sl_blob_node_t;

typedef struct {
    const char *dir;        /* where chunk files go (created) */
    uint32_t r;             /* copies kept (0: SL_BLOB_DEFAULT_R) */
    uint32_t window;        /* chunks in flight per transfer (0: 4) */
    uint32_t timeout_ms;    /* a chunk request unanswered this long goes elsewhere (0: 3000) */
    uint32_t reconcile_ms;  /* period of the placement check (0: 1000) */
    uint32_t max_jobs;      /* transfers at once (0: 8) */
    uint64_t cache_max_bytes; /* copies fetched for readers on a peer that is not
                                 their holder are kept up to this size, least
                                 recently used out first (0: 2 GiB) */
    uint32_t cache_idle_ms; /* a cached copy used this recently stays even
                               over the size (0: 10000) */
} sl_blob_node_config_t;

/* Opens the chunk directory and registers routes, ticks, commands and
 * counters on `node`; `store` is where manifests and holders are kept. */
sl_err sl_blob_node_attach(sl_node_t *node, sl_store_node_t *store,
                           const sl_blob_node_config_t *cfg, sl_blob_node_t **out);
void sl_blob_node_destroy(sl_blob_node_t **bn);

/* Stores `len` bytes as a blob: chunks written here, manifest and this
 * peer as holder recorded in the store (durable here on SL_OK: one
 * batched sync of the chunks, then the store's), and the placed peers
 * told to pull a copy. `hash` gets the blob's hash. Hashes and writes
 * everything before it returns (about 4 ms per MiB here). SL_ETOOBIG
 * past the manifest limit (about 1.8 GiB at 1 MiB chunks). */
sl_err sl_blob_node_put(sl_blob_node_t *bn, const void *data, size_t len,
                        uint8_t hash[SL_BLAKE2B_LEN]);
/* The same for a file's contents, read one chunk at a time (memory: one
 * chunk whatever the file's size). SL_ETOOBIG before anything is written
 * for a file past the manifest limit; SL_ENOTFOUND, SL_EINVAL (not a
 * regular file), SL_EIO. */
sl_err sl_blob_node_put_file(sl_blob_node_t *bn, const char *path, uint8_t hash[SL_BLAKE2B_LEN]);

/* Called on the loop thread when a fetch ends: SL_OK (the blob is here,
 * verified), SL_ENOTFOUND (unknown blob, or no holder could give a
 * chunk), SL_ECORRUPT, SL_EIO. */
typedef void (*sl_blob_done_fn)(void *ctx, sl_err err, const uint8_t hash[SL_BLAKE2B_LEN]);

/* Brings a blob's chunks here from its alive holders. `done` may be
 * called before this returns (already here) and is never called if this
 * returns an error. SL_ENOTFOUND when the store has no such blob,
 * SL_EBUSY when max_jobs transfers run. */
sl_err sl_blob_node_fetch(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                          sl_blob_done_fn done, void *ctx);
/* Fetch, then write the blob to `path` atomically, then `done`: the
 * chunks are copied, a few per loop turn, to a temporary file beside
 * `path` (PATH.tmp-PID-N), each verified and the whole hashed again, then
 * fsync, rename over `path`, fsync of the directory. A fetch or copy that
 * fails (SL_ECORRUPT, SL_ENOTFOUND, SL_EIO...) leaves `path` untouched
 * and no temporary file. A blob already here is copied out at once. */
sl_err sl_blob_node_get_file(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                             const char *path, sl_blob_done_fn done, void *ctx);
/* A blob held here, read whole and verified (sl_free the bytes).
 * SL_ENOTFOUND when a chunk is not here (fetch first). */
sl_err sl_blob_node_read(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN], uint8_t **data,
                         size_t *len);

/* Alive members that hold a verified copy, as this peer's store and
 * membership view say. A writer that must survive its own loss (a study
 * checkpoint) waits until this reaches the R copies before relying on it. */
size_t sl_blob_node_holders(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]);

/* Deletes a blob: marks it dead in the store (blob/HASH/dead); every
 * holder drops its copy at its next placement check (chunks another blob
 * it holds still uses are kept), and once no member records a copy the
 * manifest goes too. Reads and fetches already under way may fail; a
 * put of the same bytes afterwards brings it back. Blobs are
 * content-addressed: delete only bytes no one else may have stored (a
 * study's checkpoint blob begins with a line naming its trial and epoch).
 * SL_ENOTFOUND for an unknown blob. */
sl_err sl_blob_node_delete(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]);

/* The number of copies kept (the config's r). */
uint32_t sl_blob_node_r(const sl_blob_node_t *bn);

typedef struct {
    uint64_t puts;           /* blobs stored from here */
    uint64_t chunks_written; /* chunk files written (put, fetch, blob-chunk) */
    uint64_t gets_served;    /* GETs answered with data */
    uint64_t gets_missing;   /* GETs answered MISSING */
    uint64_t chunks_fetched; /* chunks received and verified */
    uint64_t corrupt;        /* chunks refused for a hash mismatch (BLOB-CORRUPT) */
    uint64_t timeouts;       /* chunk requests that timed out */
    uint64_t fetches_done;   /* transfers completed and verified */
    uint64_t fetches_failed; /* transfers given up */
    uint64_t replicated;     /* copies made by re-replication or offers */
    uint64_t dropped;        /* extra copies removed */
    uint64_t send_dropped;   /* messages the transport refused */
    uint64_t bad_msgs;       /* messages that failed to decode */
    uint64_t jobs;           /* transfers running now */
    uint64_t cache_bytes;    /* bytes of cached copies (fetched here, not held) */
    uint64_t cache_blobs;    /* cached copies */
    uint64_t evicted;        /* cached copies removed */
} sl_blob_node_stats_t;

void sl_blob_node_stats(const sl_blob_node_t *bn, sl_blob_node_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif
