/* Moving blob chunks between peers: the wire messages (proto/blob.md,
 * types 24..26) and the fetch state machine, both pure (no sockets, no
 * clock, no disk), so tests drive them without a network.
 *
 * A transfer is always pulled by the peer that wants the bytes: it asks
 * holders for chunks, at most `window` at a time, and a holder answers
 * each GET with one CHUNK (at most SL_BLOB_XFER_MAX_DATA bytes of data).
 * That is the flow control: memory is bounded by the chunks in flight,
 * never by the blob's size, and a slow or dead holder only costs a
 * timeout, after which the chunk is asked of the next holder. A put
 * "pushes" by sending an OFFER (the manifest and where to pull from) to
 * each placed peer, which then pulls.
 *
 *     sl_blob_fetch_t *f;
 *     sl_blob_fetch_new(xfer_id, &manifest, have, sources, n, NULL, &f);
 *     loop:
 *       k = sl_blob_fetch_poll(f, now_ms, reqs, cap);   // GETs to send now
 *       on CHUNK: err = sl_blob_fetch_on_chunk(f, now_ms, &msg);
 *                 SL_OK: write msg.data as chunk msg.index, then
 *                        sl_blob_fetch_stored(f, msg.index, write_err)
 *       sl_blob_fetch_status(f): SL_EAGAIN while running, SL_OK when every
 *                                chunk is held, else why it failed
 *     sl_blob_fetch_destroy(&f);
 *
 * Each chunk is checked against its hash before the caller writes it;
 * a mismatch (SL_ECORRUPT) is counted and the chunk is asked of another
 * holder. The whole blob is verified by the caller once all chunks are
 * written (sl_blob_hasher over the chunk files). */
#ifndef STARLING_BLOB_XFER_H
#define STARLING_BLOB_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/blob.h"
#include "starling/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Wire message types (proto/blob.md). */
#define SL_BLOB_MSG_GET 24   /* ask a holder for one chunk */
#define SL_BLOB_MSG_CHUNK 25 /* one chunk, or why not */
#define SL_BLOB_MSG_OFFER 26 /* a manifest and a holder to pull it from */

#define SL_BLOB_XFER_MAX_DATA SL_BLOB_CHUNK_LEN /* bytes of data in one CHUNK */
#define SL_BLOB_XFER_MAX_ADDR 128               /* bytes of an address */
#define SL_BLOB_XFER_MAX_MANIFEST 65536         /* bytes of an OFFER's manifest */
#define SL_BLOB_XFER_MAX_SOURCES 16             /* holders one fetch asks */
#define SL_BLOB_XFER_MAX_WINDOW 16              /* chunks in flight per fetch */

/* CHUNK status values. */
#define SL_BLOB_CHUNK_OK 0       /* data follows */
#define SL_BLOB_CHUNK_MISSING 1  /* the holder does not have it */

/* One message, decoded or to encode. Byte fields point into the body
 * (decoded) or at the caller's bytes (to encode). */
typedef struct {
    uint8_t type;                   /* SL_BLOB_MSG_* */
    uint64_t xfer;                  /* GET, CHUNK: the asker's transfer id */
    uint8_t blob[SL_BLAKE2B_LEN];   /* GET: the blob's hash */
    uint32_t index;                 /* GET, CHUNK: chunk index */
    uint8_t chunk[SL_BLAKE2B_LEN];  /* GET, CHUNK: the chunk's hash */
    uint8_t status;                 /* CHUNK: SL_BLOB_CHUNK_* */
    const uint8_t *data;            /* CHUNK: the bytes; OFFER: the encoded manifest */
    size_t data_len;                /* bytes in data */
    const uint8_t *addr;            /* GET: where to answer; OFFER: a holder */
    size_t addr_len;                /* 1..SL_BLOB_XFER_MAX_ADDR bytes */
} sl_blob_msg_t;

/* Decodes a body of type `type` strictly: canonical msgpack, every field
 * present, bounds on every length, a CHUNK that is not OK carries no data,
 * an OFFER's manifest decodes. Unknown keys are skipped. Errors as in
 * mpack.h, SL_ETYPE for a type outside 24..26. */
sl_err sl_blob_msg_decode(uint8_t type, const uint8_t *body, size_t len, sl_blob_msg_t *out);
/* Canonical body of `m` (sl_free'd by the caller). */
sl_err sl_blob_msg_encode(const sl_blob_msg_t *m, uint8_t **out, size_t *len);

/* ---- Fetch: pull one blob's missing chunks from its holders ---- */

typedef struct sl_blob_fetch sl_blob_fetch_t;

typedef struct {
    uint32_t window;     /* chunks in flight (0: 4; at most SL_BLOB_XFER_MAX_WINDOW) */
    uint32_t timeout_ms; /* a GET unanswered this long is asked elsewhere (0: 3000) */
    uint32_t max_tries;  /* asks per chunk before the fetch fails (0: 2 per source, at least 3) */
} sl_blob_fetch_config_t;

/* A GET to send: the chunk `index` of the blob, to `addr` (borrowed from
 * the fetch, valid until its next call). */
typedef struct {
    const char *addr;                /* the holder to ask */
    uint32_t index;                  /* chunk index */
    uint8_t chunk[SL_BLAKE2B_LEN];   /* the chunk's hash */
} sl_blob_req_t;

typedef struct {
    uint32_t chunks;     /* chunks in the blob */
    uint32_t held;       /* chunks held (had, or fetched and stored) */
    uint32_t in_flight;  /* GETs unanswered */
    uint64_t requested;  /* GETs issued */
    uint64_t received;   /* chunks accepted */
    uint64_t corrupt;    /* chunks refused for a hash mismatch */
    uint64_t missing;    /* answers saying the holder lacks the chunk */
    uint64_t timeouts;   /* GETs that timed out */
    uint64_t stale;      /* answers for nothing in flight (late or duplicate) */
} sl_blob_fetch_stats_t;

/* Starts a fetch of `m` (copied). `have[i]` (or NULL: none) says chunk i
 * is held already. `sources` are the holders' addresses (copied, at most
 * SL_BLOB_XFER_MAX_SOURCES). */
sl_err sl_blob_fetch_new(uint64_t xfer, const sl_blob_manifest_t *m, const bool *have,
                         const char *const *sources, size_t source_count,
                         const sl_blob_fetch_config_t *cfg, sl_blob_fetch_t **out);
void sl_blob_fetch_destroy(sl_blob_fetch_t **f);

uint64_t sl_blob_fetch_xfer(const sl_blob_fetch_t *f);
const sl_blob_manifest_t *sl_blob_fetch_manifest(const sl_blob_fetch_t *f);

/* Replaces the holders to ask (membership changed). GETs in flight to a
 * holder no longer listed are asked elsewhere at the next poll. */
sl_err sl_blob_fetch_set_sources(sl_blob_fetch_t *f, const char *const *sources, size_t count);

/* Expires GETs older than the timeout and returns up to `cap` GETs to
 * send now (never more than the window allows). */
size_t sl_blob_fetch_poll(sl_blob_fetch_t *f, uint64_t now_ms, sl_blob_req_t *reqs, size_t cap);

/* The earliest time a GET in flight times out (0 if none). */
uint64_t sl_blob_fetch_deadline(const sl_blob_fetch_t *f);

/* Handles a CHUNK for this fetch: SL_OK when its data is the chunk (write
 * it, then call sl_blob_fetch_stored); SL_ECORRUPT when the data does not
 * match the hash, SL_ENOTFOUND when the holder lacks it (both: asked
 * elsewhere); SL_ESTATE when nothing is in flight for that index. */
sl_err sl_blob_fetch_on_chunk(sl_blob_fetch_t *f, uint64_t now_ms, const sl_blob_msg_t *msg);

/* The caller wrote chunk `index` (err SL_OK) or could not (the fetch
 * then fails with err). */
void sl_blob_fetch_stored(sl_blob_fetch_t *f, uint32_t index, sl_err err);

/* SL_EAGAIN while chunks are missing, SL_OK once every chunk is held,
 * otherwise the reason it failed (SL_ENOTFOUND: no holder could give
 * some chunk within max_tries asks). */
sl_err sl_blob_fetch_status(const sl_blob_fetch_t *f);

void sl_blob_fetch_stats(const sl_blob_fetch_t *f, sl_blob_fetch_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif
