/* Internals shared by the blob node's files, which call only downwards in
 * this order: src/blob/blob_node.c (messages, tick, lifecycle), blob_ctl.c
 * (the control commands), blob_jobs.c (transfers, copies out, placement,
 * puts), blob_cache.c (the cache of copies fetched for readers) and
 * blob_state.c (what the node knows and looks up). */
#ifndef STARLING_BLOB_NODE_INTERNAL_H
#define STARLING_BLOB_NODE_INTERNAL_H

#include "starling/blob_node.h"
#include "starling/disk.h"
#include "starling/platform.h"
#include "starling/rng.h"

#define HEX_LEN (2 * SL_BLAKE2B_LEN)
#define MAX_MEMBERS 1024
#define MAX_WAITERS 8
#define RECENT 64                      /* finished fetches remembered for blob-fetch */
#define SLICE_BYTES (4u << 20)         /* chunk bytes read per job per loop turn (~20 ms) */
/* chunks in a manifest that fits one store value: 34 bytes each, ~60 of header */
#define MAX_MANIFEST_CHUNKS ((SL_STORE_MAX_VALUE_LEN - 64) / (SL_BLAKE2B_LEN + 2))
#define DEFAULT_CACHE_BYTES (2ull << 30) /* fetched copies kept when not a holder */
#define DEFAULT_CACHE_IDLE_MS 10000      /* a cached copy used this recently stays */
#define UPLOADS 2048 /* blob-chunk hashes kept from removal until their commit (2 GiB of chunks) */
#define PREFIX "blob/"
#define PREFIX_LEN 5

/* Someone waiting for a fetch. */
typedef struct {
    sl_blob_done_fn done; /* callback (NULL: none) */
    void *ctx;            /* its context */
    char *path;           /* get_file: write the blob here first (sl_free'd) */
} waiter_t;

/* What a job is doing. Checking and verifying read and hash chunk files,
 * a few per loop turn, so a large blob never stalls the loop. */
enum { PHASE_CHECK, PHASE_FETCH, PHASE_VERIFY };

/* One transfer (or, for blob-commit, one verification) running. */
typedef struct {
    uint8_t hash[SL_BLAKE2B_LEN];     /* the blob */
    sl_blob_manifest_t m;             /* its manifest (owned) */
    int phase;                        /* PHASE_* */
    uint32_t next;                    /* CHECK, VERIFY: next chunk to read */
    bool *have;                       /* CHECK: chunks found here and good */
    sl_blob_fetch_t *f;               /* FETCH: the pure state machine */
    sl_blob_builder_t *whole;         /* VERIFY: hash of the chunks read so far */
    char sources[SL_BLOB_XFER_MAX_ADDR + 1]; /* an extra holder to ask (an OFFER's) */
    bool record;                      /* record this peer as holder when done */
    bool commit;                      /* verify only, then commit (blob-commit) */
    bool synced;                      /* VERIFY fdatasyncs each chunk as it reads it */
    bool per_chunk;                   /* VERIFY checks each chunk's hash too (after the
                                         whole failed: to find and remove the bad one) */
    uint64_t progress_ms;             /* last time a chunk arrived (or start) */
    uint64_t timeouts_seen;           /* FETCH: the fetch's timeouts already counted */
    waiter_t waiters[MAX_WAITERS];    /* callbacks */
    size_t waiter_count;              /* entries */
} job_t;

/* How a recent fetch ended (for blob-fetch polls). */
typedef struct {
    uint8_t hash[SL_BLAKE2B_LEN]; /* the blob */
    sl_err err;                   /* its outcome */
    bool used;                    /* entry holds something */
} recent_t;

/* sl_blob_node_get_file after the fetch: a blob held here copied out to
 * a temporary file beside the target, a slice per loop turn, each chunk
 * verified and the whole hashed again, then fsync and rename. */
typedef struct {
    uint8_t hash[SL_BLAKE2B_LEN]; /* the blob */
    sl_blob_manifest_t m;         /* its manifest (owned) */
    sl_disk_out_t *out;           /* the temporary file */
    sl_blob_builder_t *whole;     /* hash of the chunks written so far */
    uint32_t next;                /* next chunk to write */
    sl_blob_done_fn done;         /* callback (NULL: none) */
    void *ctx;                    /* its context */
    char *retry_path;             /* started without a fetch: on a missing or bad
                                     chunk, fetch and write again to this path */
} writer_t;

/* A copy fetched for a reader (blob get, sl_blob_node_fetch) on a peer
 * that is not one of its holders: kept as a cache, least recently used
 * out first once the cache is over its size. */
typedef struct {
    sl_blob_manifest_t m; /* its manifest (owned: the chunks to remove even
                             once the store has forgotten the blob) */
    uint64_t used_ms;     /* last fetched or read (0: found on disk at start) */
} cached_t;

/* An alive member. */
typedef struct {
    char name[SL_NAME_MAX + 1]; /* member name */
    char addr[SL_ADDR_MAX + 1]; /* advertised address */
} member_t;

struct sl_blob_node {
    sl_node_t *node;             /* the daemon */
    sl_store_node_t *store;      /* manifests and holders */
    sl_disk_t *disk;             /* chunk files */
    uint32_t r;                  /* copies kept */
    sl_blob_fetch_config_t fcfg; /* per-transfer settings */
    uint32_t reconcile_ms;       /* placement check period */
    uint32_t max_jobs;           /* transfers at once */
    job_t **jobs;                /* transfers running */
    size_t job_count;            /* entries */
    recent_t recent[RECENT];     /* outcomes of finished fetches */
    size_t recent_next;          /* ring position */
    uint64_t next_reconcile_ms;  /* when to check placement next */
    writer_t **writers;          /* get_file copies being written */
    size_t writer_count;         /* entries */
    cached_t *cache;             /* cached copies, in no order */
    size_t cache_count;          /* entries */
    uint64_t cache_max_bytes;    /* cache size past which copies go */
    uint32_t cache_idle_ms;      /* a copy used this recently is never evicted */
    bool cache_scanned;          /* copies left on disk by an earlier run looked for */
    uint8_t (*uploads)[SL_BLAKE2B_LEN]; /* the last UPLOADS chunks blob-chunk stored (a ring,
                                           allocated at the first): a blob being put through
                                           the CLI has no manifest yet to protect them */
    size_t upload_count;         /* entries used */
    size_t upload_next;          /* ring position */
    sl_rng_t rng;                /* transfer ids */
    sl_blob_node_stats_t st;     /* counters */
    uint64_t refused_addr;       /* GETs and OFFERs naming an address not the sender's */
    sl_log_limit_t refused_log;  /* BLOB-REFUSED: a line per 10 s */
    sl_log_limit_t bad_msg_log;  /* BLOB-BAD-MSG: a line per 10 s */
};

/* Manifests found in the store (sl_blob_node_list), sorted. */
typedef struct {
    uint8_t (*hashes)[SL_BLAKE2B_LEN]; /* manifests found */
    size_t count;                      /* entries */
    size_t cap;                        /* allocated */
} hash_list_t;

/* Chunk hashes that must stay (sl_blob_cache_kept), sorted. */
typedef struct {
    uint8_t (*h)[SL_BLAKE2B_LEN]; /* chunk hashes, sorted once built */
    size_t count;                 /* entries */
    size_t cap;                   /* allocated */
} chunk_set_t;

static inline uint64_t now_ms(void) { return sl_plat_now_ns() / 1000000ull; }

/* ---- blob_state.c: what the node knows and looks up ---- */

/* 64 lower-case hex digits to a hash. */
bool sl_blob_node_unhex(const uint8_t *s, size_t len, uint8_t out[SL_BLAKE2B_LEN]);
/* The store keys: blob/HEX (the manifest; `out` holds PREFIX_LEN + HEX_LEN
 * + 1), blob/HEX/h/NAME (a holder; 0 when it does not fit `cap`) and
 * blob/HEX/dead (deleted; returns its length). */
void sl_blob_manifest_key(const uint8_t hash[SL_BLAKE2B_LEN], char *out);
size_t sl_blob_holder_key(const uint8_t hash[SL_BLAKE2B_LEN], const char *name, char *out,
                          size_t cap);
size_t sl_blob_dead_key(const uint8_t hash[SL_BLAKE2B_LEN], char *out);
/* Does the store record member `name` as holder of the blob? */
bool sl_blob_node_holds(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                        const char *name);
/* Does any member, alive or not, still record a copy? */
bool sl_blob_node_has_holders(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]);
/* Is the blob marked deleted (blob/HASH/dead)? */
bool sl_blob_node_is_dead(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]);
/* The manifest of a blob the store knows (sl_blob_manifest_fini it). */
sl_err sl_blob_node_lookup(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                           sl_blob_manifest_t *m);
/* The length of chunk `i` of `m`. */
size_t sl_blob_chunk_size(const sl_blob_manifest_t *m, uint32_t i);
/* Logs BLOB-CORRUPT: `what` `index` of blob `hash` `where`. */
void sl_blob_log_corrupt(const char *what, const uint8_t hash[SL_BLAKE2B_LEN], uint32_t index,
                         const char *where);
/* Chunk `i` of `m` from disk, its size checked and, with `check_hash`,
 * its bytes: SL_ENOTFOUND, SL_ECORRUPT. */
sl_err sl_blob_node_load_chunk(sl_blob_node_t *bn, const sl_blob_manifest_t *m, uint32_t i,
                               bool check_hash, uint8_t **data, size_t *len);
/* Chunk `i` of `m` from disk, checked against its hash: SL_ENOTFOUND, SL_ECORRUPT. */
sl_err sl_blob_node_read_chunk(sl_blob_node_t *bn, const sl_blob_manifest_t *m, uint32_t i,
                               uint8_t **data, size_t *len);
/* The alive (and suspect) members, names and addresses (sl_free *out). */
size_t sl_blob_node_alive(const sl_blob_node_t *bn, member_t **out);
/* The transfer running for a blob, or NULL. */
job_t *sl_blob_node_find_job(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]);
/* The copy out running for a blob, or NULL. */
writer_t *sl_blob_node_find_writer(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]);
/* How the last fetch of a blob ended, or NULL; remember records it. */
recent_t *sl_blob_node_recent(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]);
void sl_blob_node_remember(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN], sl_err err);
/* The blob is no longer known to be whole here. */
void sl_blob_node_forget(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]);
/* A transfer or a copy-out is using the blob's chunks. */
bool sl_blob_node_busy(const sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]);
/* Every blob the store has a manifest for (sl_free l->hashes). */
void sl_blob_node_list(const sl_blob_node_t *bn, hash_list_t *l);
/* memcmp of two hashes, for qsort and bsearch. */
int sl_blob_node_cmp_hash(const void *a, const void *b);

/* ---- blob_jobs.c: transfers, copies out, placement, puts ---- */

/* A local chunk was found bad (removed) or missing: stop claiming the blob. */
void sl_blob_node_lost_chunk(sl_blob_node_t *bn, const uint8_t blob[SL_BLAKE2B_LEN],
                             const uint8_t chunk[SL_BLAKE2B_LEN], uint32_t index, sl_err why);
/* Starts (or joins) a transfer: check what is here, fetch the rest from
 * `extra_source` and the alive holders, verify the whole, then record
 * this peer as holder (`record`) or commit (`commit_after`: verify only);
 * `done` when it ends, after writing the blob to `path` if given. */
sl_err sl_blob_node_start_job(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN],
                              const sl_blob_manifest_t *given, const char *extra_source,
                              bool record, bool commit_after, sl_blob_done_fn done, void *ctx,
                              const char *path);
/* Moves a transfer on (a slice of checks, the GETs due); ends it when over. */
void sl_blob_node_pump(sl_blob_node_t *bn, job_t *job, uint64_t now);
/* The node's tick (registered by blob_node.c): placement checks, slices
 * of every transfer and copy out; returns the next deadline. */
uint64_t sl_blob_node_on_tick(void *ctx, sl_node_t *node, uint64_t now_ns);
/* Work was started between two ticks: a tick at the end of this turn. */
void sl_blob_node_tick_soon(sl_blob_node_t *bn);
/* Ends every transfer and copy out without a word (the node is going). */
void sl_blob_node_free_work(sl_blob_node_t *bn);

/* ---- blob_cache.c ---- */

cached_t *sl_blob_cache_find(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]);
/* A reader used the copy (no-op if it is not a cached one). */
void sl_blob_cache_touch(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]);
/* A copy is here for readers (`used_ms` 0: found on disk at start). */
void sl_blob_cache_add(sl_blob_node_t *bn, const sl_blob_manifest_t *m, uint64_t used_ms);
/* The copy is no longer cache (dropped or held): out of the list, chunks left. */
void sl_blob_cache_forget(sl_blob_node_t *bn, const uint8_t hash[SL_BLAKE2B_LEN]);
uint64_t sl_blob_cache_bytes(const sl_blob_node_t *bn);
/* Chunks that must stay whatever is removed (`evict`: cache entries
 * being evicted, NULL none); false when it cannot tell (remove nothing). */
bool sl_blob_cache_kept(sl_blob_node_t *bn, const bool *evict, chunk_set_t *keep);
/* Evicts what is over the size (see blob_cache.c). */
void sl_blob_cache_trim(sl_blob_node_t *bn, uint64_t now);
/* Counts copies an earlier run left on disk (once, at the first placement check). */
void sl_blob_cache_scan(sl_blob_node_t *bn, const hash_list_t *l);

/* ---- blob_ctl.c ---- */

/* Registers blob-chunk, blob-commit, blob-fetch, blob-read, blob-ls. */
sl_err sl_blob_ctl_register(sl_blob_node_t *bn);

#endif
