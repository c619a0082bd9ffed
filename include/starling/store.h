/* The replicated store: a map from string keys to CRDT values
 * (include/starling/crdt.h) that every peer holds whole, with Scuttlebutt
 * anti-entropy over version vectors. Sans-I/O: local operations and
 * received messages go in with the current time; messages to send and
 * records to persist come out. src/platform/disk.c persists, src/net/net.c sends.
 *
 * Dots and version vectors. Every update is one atom tagged with a dot
 * (replica id, sequence). A replica id is one incarnation of a peer (a new
 * one at every start, so a dot is never issued twice). The store applies
 * one replica's dots in sequence order only, so what it has seen of each
 * replica is a single number: the version vector (vv) holds, per replica,
 * the largest sequence seen, and every smaller one was seen too.
 *
 * Messages (proto/store.md has the exact bodies; types 16..19):
 *   DIGEST   the sender's vv (and retired replicas). On receipt the store
 *            answers with the deltas the sender lacks and, if the sender
 *            has something it lacks, its own DIGEST (push-pull).
 *   SUMMARY  a 64-bit fingerprint of what a DIGEST would carry: two
 *            replicas that agree cost a few dozen bytes. On receipt the
 *            store answers with a SUMMARY (it agrees) or its DIGEST.
 *   DELTA    ranges (replica, from, to] and the live atoms with dots in
 *            them: the receiver applies it only where its vv equals a
 *            range's `from` or more, then its vv moves to `to`. Atoms that
 *            were overwritten or removed are not sent: their range still
 *            covers them. A sync is cut into messages of at most
 *            max_msg_len bytes; each is self-contained.
 *   SNAPSHOT the whole state in chunks, with a reset flag: for a peer that
 *            was away longer than garbage collection waits (its vv is
 *            below the last collection's cut), or that lacks a retired
 *            replica's atoms. Also the on-disk snapshot format.
 * Atoms are never sent back to the replica that made them.
 *
 * Local writes return the DELTA to persist (write-ahead) and then send:
 *
 *     sl_store_msg_t d;
 *     err = sl_store_put(s, "k", 1, "v", 1, now_ms, &d);
 *     wal append d, sync, then acknowledge the client and send d to peers
 *     sl_store_msg_fini(&d);
 *
 * Garbage: removals leave DEAD atoms and LWW tombstones. sl_store_gc()
 * runs a two-step stability barrier over the live replicas' version
 * vectors (learnt from their digests): it records the element-wise minimum
 * (cut) and maximum (target) of the vvs, and once every live vv reaches the
 * target, drops every DEAD atom and tombstone whose dot is under the cut
 * (all replicas have it, and nothing concurrent with it can still arrive).
 * A replica in the vv that is neither live nor retired (a crashed peer, an
 * old incarnation) holds collection back: it may still bring atoms
 * concurrent with a removal. Retired replicas (old incarnations) leave the
 * version vectors once every live peer has all their dots.
 *
 * Memory: keys and LWW values live in an arena of 1 MiB blocks, records are
 * 32 bytes in one array, the index is open addressing over 32-bit record
 * numbers: no allocation per key for registers. Sets, counters and maps
 * hold an sl_crdt_val_t each. */
#ifndef STARLING_STORE_H
#define STARLING_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"
#include "starling/crdt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_STORE_MAX_KEY_LEN 512       /* bytes of a key (UTF-8) */
#define SL_STORE_MAX_VALUE_LEN 65536   /* bytes of a value; larger: blobs */
#define SL_STORE_MAX_RANGES 4096       /* ranges or vv entries per message */
#define SL_STORE_MAX_REPLICAS 65535    /* replica ids one store can know */
#define SL_STORE_MAX_ADDR 128          /* bytes of a DIGEST's reply address */
/* Most dots of one replica a message may claim past what the receiver
 * holds (a DELTA range's to - from; a RESET SNAPSHOT's vv entry over the
 * receiver's): 2^32, 50 days of 1,000 writes a second by one replica.
 * Senders cut longer ranges; a receiver refuses a claim beyond it
 * (proto/store.md, rule 3). */
#define SL_STORE_MAX_DOT_LEAD (UINT64_C(1) << 32)
#define SL_STORE_LOG_EVERY_MS 10000    /* at most one refusal log line per 10 s */

/* Wire message types (proto/store.md). */
#define SL_STORE_MSG_DIGEST 16
#define SL_STORE_MSG_DELTA 17
#define SL_STORE_MSG_SNAPSHOT 18
#define SL_STORE_MSG_SUMMARY 19

#define SL_STORE_SNAP_RESET 0x01 /* SNAPSHOT flag: replace what the sender knows */

typedef struct sl_store sl_store_t;

typedef struct {
    uint64_t max_clock_offset_ms; /* remote stamps further ahead are refused (0: 500) */
    size_t max_msg_len;           /* bytes per message built (0: 1 MiB) */
    size_t max_sync_len;          /* bytes one sync answer may total (0: 8 MiB) */
} sl_store_config_t;

/* An encoded message (or WAL record): type and body. */
typedef struct {
    uint8_t type;  /* SL_STORE_MSG_* */
    uint8_t *body; /* canonical msgpack body (sl_free'd by _fini) */
    size_t len;    /* bytes in body */
} sl_store_msg_t;

/* A key a received message changed (sl_store_out_t.changed). */
typedef struct {
    const uint8_t *key; /* its bytes, into the received body (valid while it is) */
    uint32_t key_len;   /* bytes */
} sl_store_key_t;

/* What handling a message gave: a list of messages to send (to the peer
 * whose message was handled), and the keys it changed. */
typedef struct {
    sl_store_msg_t *msgs; /* messages */
    size_t count;         /* messages in msgs */
    size_t cap;           /* allocated */
    bool list_changed;    /* set by the caller before sl_store_receive: list the
                             keys changed in `changed` (else it stays empty) */
    sl_store_key_t *changed; /* DELTA: each key whose value it changed, once per run
                                of its atoms (read the value with sl_store_lookup) */
    size_t changed_count; /* entries in changed */
    size_t changed_cap;   /* allocated */
    bool all_changed;     /* the map changed in ways not listed key by key: a
                             SNAPSHOT applied (a RESET replaces the map), or
                             the list could not grow; readers re-read all */
    char reply_to[SL_STORE_MAX_ADDR + 1]; /* where they go: the DIGEST's
                                             reply address ("" if none) */
    uint64_t from;        /* the handled message's sender replica id */
    uint64_t peer_fp;     /* DIGEST, SUMMARY: the sender's fingerprint
                             (sl_store_fingerprint), else 0 */
    bool agreed;          /* SUMMARY: it matched this replica's */
} sl_store_out_t;

void sl_store_msg_fini(sl_store_msg_t *m);
void sl_store_out_init(sl_store_out_t *o);
void sl_store_out_fini(sl_store_out_t *o);

/* ---- Decoded messages (src/store/store_codec.c) ---- */

typedef struct {
    uint64_t rid;  /* replica */
    uint64_t from; /* DELTA: receiver must have seen up to here; else 0 */
    uint64_t to;   /* DELTA: covers (from, to]; DIGEST/SNAPSHOT: vv entry */
} sl_store_range_t;

typedef struct {
    const uint8_t *key;  /* key bytes (into the message) */
    uint32_t key_len;    /* 1..SL_STORE_MAX_KEY_LEN */
    sl_crdt_item_t it;   /* the atom (bytes into the message) */
} sl_store_item_t;

typedef struct {
    uint8_t type;               /* SL_STORE_MSG_* */
    uint64_t sender;            /* sender's replica id */
    bool reply;                 /* DIGEST, SUMMARY: answers one (no digest back) */
    bool want_reset;            /* DIGEST: asks for a RESET snapshot */
    const uint8_t *reply_to;    /* DIGEST, SUMMARY: the sender's address (into the body) */
    uint32_t reply_to_len;      /* DIGEST, SUMMARY: its bytes, 0..SL_STORE_MAX_ADDR */
    uint64_t fingerprint;       /* SUMMARY: the sender's sl_store_fingerprint */
    uint64_t snap_id;           /* SNAPSHOT: identifies one snapshot */
    uint32_t chunk;             /* SNAPSHOT: this chunk's index */
    uint32_t chunks;            /* SNAPSHOT: number of chunks */
    uint8_t flags;              /* SNAPSHOT: SL_STORE_SNAP_RESET */
    sl_store_range_t *ranges;   /* DELTA ranges; DIGEST and SNAPSHOT: vv */
    uint32_t range_count;       /* entries in ranges */
    sl_store_range_t *retired;  /* DIGEST, SNAPSHOT: retired replicas, final seq in `to` */
    uint32_t retired_count;     /* entries in retired */
    sl_store_item_t *items;     /* DELTA, SNAPSHOT atoms */
    uint32_t item_count;        /* entries in items */
    sl_dot_t *dots;             /* storage for DEAD contexts */
    uint32_t dot_count;         /* entries used in dots */
    void *alloc;                /* decoder-owned memory (sl_store_dmsg_fini) */
} sl_store_dmsg_t;

/* Decodes a body of type `type`, strictly (canonical msgpack, every field
 * required, bounds on every length and count, atoms valid, dots inside
 * their ranges). Pointers point into `body`. Errors as in mpack.h, plus
 * SL_ETYPE for a type outside 16..19. */
sl_err sl_store_msg_decode(uint8_t type, const uint8_t *body, size_t len, sl_store_dmsg_t *out);
void sl_store_dmsg_fini(sl_store_dmsg_t *m);

/* Encodes `m` (canonical; ranges, vv and retired sorted by rid; each atom's
 * rid must be in them). SL_ETOOBIG past `max_len` bytes. */
sl_err sl_store_msg_encode(const sl_store_dmsg_t *m, size_t max_len, sl_store_msg_t *out);

/* Encoded size of one atom inside a DELTA/SNAPSHOT (for chunking). */
size_t sl_store_item_encoded_len(const sl_store_item_t *item, uint32_t ridx);

/* ---- Lifecycle ---- */

sl_err sl_store_new(uint64_t rid, const sl_store_config_t *cfg, sl_store_t **out);
void sl_store_destroy(sl_store_t **s);
uint64_t sl_store_rid(const sl_store_t *s);

/* ---- Local operations: apply, and return the DELTA to persist and send ---- */

sl_err sl_store_put(sl_store_t *s, const void *key, size_t key_len, const void *val,
                    size_t val_len, uint64_t now_ms, sl_store_msg_t *delta);
/* Deletes a key of any type (SL_ENOTFOUND if absent). */
sl_err sl_store_del(sl_store_t *s, const void *key, size_t key_len, uint64_t now_ms,
                    sl_store_msg_t *delta);
sl_err sl_store_set_add(sl_store_t *s, const void *key, size_t key_len, const void *elem,
                        size_t elem_len, uint64_t now_ms, sl_store_msg_t *delta);
sl_err sl_store_set_remove(sl_store_t *s, const void *key, size_t key_len, const void *elem,
                           size_t elem_len, uint64_t now_ms, sl_store_msg_t *delta);
sl_err sl_store_counter_add(sl_store_t *s, const void *key, size_t key_len, int64_t by,
                            uint64_t now_ms, sl_store_msg_t *delta);
sl_err sl_store_gmap_put(sl_store_t *s, const void *key, size_t key_len, const void *field,
                         size_t field_len, const void *val, size_t val_len, uint64_t now_ms,
                         sl_store_msg_t *delta);

/* ---- Reads ---- */

typedef struct {
    uint8_t type;              /* sl_crdt_type */
    const uint8_t *val;        /* LWW: value bytes (valid until the next write) */
    size_t val_len;            /* LWW: bytes */
    uint64_t hlc;              /* LWW: timestamp */
    sl_dot_t dot;              /* LWW: the write's dot */
    const sl_crdt_val_t *crdt; /* other types: the value (borrowed) */
} sl_store_entry_t;

/* Is `key` a valid key: 1..SL_STORE_MAX_KEY_LEN bytes of UTF-8 with no
 * control character (C0, DEL or C1: U+0000..U+001F, U+007F..U+009F)?
 * Local writes refuse others (SL_EINVAL), receivers refuse messages that
 * carry one. */
bool sl_store_key_valid(const void *key, size_t len);

/* Looks a key up: SL_ENOTFOUND if absent, deleted or empty. */
sl_err sl_store_lookup(const sl_store_t *s, const void *key, size_t key_len,
                       sl_store_entry_t *out);
/* LWW shorthand: SL_EINVAL if the key holds another type. */
sl_err sl_store_get(const sl_store_t *s, const void *key, size_t key_len, const uint8_t **val,
                    size_t *val_len);
/* Calls fn for every live key starting with `prefix` (any order); fn
 * returning false stops. */
void sl_store_scan(const sl_store_t *s, const void *prefix, size_t prefix_len,
                   bool (*fn)(void *ctx, const uint8_t *key, size_t key_len,
                              const sl_store_entry_t *e),
                   void *ctx);

/* ---- Anti-entropy ---- */

/* The address peers should answer this replica's digests at (the
 * transport's advertised endpoint); empty by default. */
sl_err sl_store_set_addr(sl_store_t *s, const char *addr);

/* This replica's DIGEST (`reply` marks an answer to one). */
sl_err sl_store_digest(sl_store_t *s, bool reply, sl_store_msg_t *out);

/* A 64-bit hash of exactly what this replica's DIGEST carries (the vv it
 * reports, the retired list, want_reset), never 0. Two replicas with the
 * same fingerprint hold the same state (up to a hash collision), since
 * what a replica holds is determined by its vv. */
uint64_t sl_store_fingerprint(const sl_store_t *s);

/* The receive time (sl_store_receive's now_ms) at which this replica was
 * last seen to hold everything some peer held when it sent its DIGEST or
 * SUMMARY; 0 = never. A replica restored from disk after a crash is
 * caught up with the cluster once this passes the time it rejoined. */
uint64_t sl_store_caught_up_ms(const sl_store_t *s);

/* This replica's SUMMARY: its fingerprint and address (`reply` marks an
 * answer to a SUMMARY). */
sl_err sl_store_summary(sl_store_t *s, bool reply, sl_store_msg_t *out);

/* Handles a message from a peer. `replies` gets what to send back to that
 * peer, and the keys the message changed (`changed` when the caller set
 * `list_changed`, and `all_changed`: what the daemon tells its listeners,
 * with no second decode); `*persist` is
 * set when the message changed the state and should be appended to the
 * WAL as is. Malformed or hostile input is refused with its
 * error, counted, and changes nothing (the caller counts it as bad input);
 * refusals are logged at most once per SL_STORE_LOG_EVERY_MS of now_ms. */
sl_err sl_store_receive(sl_store_t *s, uint8_t type, const uint8_t *body, size_t len,
                        uint64_t now_ms, sl_store_out_t *replies, bool *persist);

/* A DELTA that starts past what this replica holds of one of its
 * replicas (a gap: an earlier delta of that replica was lost or is late)
 * is applied for its other replicas and kept aside (at most
 * SL_STORE_HELD_MAX deltas and SL_STORE_HELD_BYTES bytes, the oldest
 * dropped first: anti-entropy repairs what was dropped). Once the gap is
 * filled, sl_store_take_ready hands it back, removed, to be received like
 * any message (sl_store_receive: applied, persisted, told); SL_ENOTFOUND
 * when none is ready. Kept deltas that every replica's entry has passed
 * are dropped. Call it after each DELTA or SNAPSHOT received. */
#define SL_STORE_HELD_MAX 64
#define SL_STORE_HELD_BYTES (4u << 20)
sl_err sl_store_take_ready(sl_store_t *s, sl_store_msg_t *out);

/* Applies a WAL or snapshot record during recovery (no clock check, no
 * replies). */
sl_err sl_store_replay(sl_store_t *s, uint8_t type, const uint8_t *body, size_t len);

/* Tells the store that everything applied so far is on disk (call after
 * each WAL sync). From the first call on, digests report this durable
 * version vector: peers then never count, for garbage collection, on
 * atoms this replica would lose in a crash. */
void sl_store_mark_durable(sl_store_t *s);

/* Asks peers for a RESET snapshot (through this replica's digests) until
 * one has been applied. Call after recovering from disk, and when
 * membership says this peer had been declared dead: state that others
 * may have collected as garbage meanwhile is then replaced, not merged
 * back (atoms the cluster never saw are kept). */
void sl_store_request_reset(sl_store_t *s);

/* The whole state as one SNAPSHOT body (the disk snapshot; no size cap). */
sl_err sl_store_snapshot(sl_store_t *s, sl_store_msg_t *out);

/* The replicas (other than this one) that are members now, from
 * membership: each member's current incarnation, alive or down (a crashed
 * member counts until it comes back as a new incarnation, or is removed
 * for good). Garbage collection waits for all of them. */
sl_err sl_store_set_live(sl_store_t *s, const uint64_t *rids, size_t count);
/* Marks an old incarnation as gone for good: it leaves the version vectors
 * once every live peer has seen all its dots. */
sl_err sl_store_retire(sl_store_t *s, uint64_t rid);
/* One step of garbage collection (see above); returns atoms dropped. */
size_t sl_store_gc(sl_store_t *s);

/* ---- Introspection ---- */

typedef struct {
    uint64_t keys;            /* live keys */
    uint64_t records;         /* records in use (live keys, tombstones, removed-but-kept) */
    uint64_t replicas;        /* entries in the version vector */
    uint64_t retired;         /* replicas retired */
    uint64_t arena_bytes;     /* arena bytes in use (keys, register values) */
    uint64_t arena_garbage;   /* arena bytes no longer referenced */
    uint64_t mem_bytes;       /* bytes allocated by the store's tables and arena */
    uint64_t applied;         /* atoms applied that changed the state */
    uint64_t dup;             /* atoms received that were already seen */
    uint64_t gaps;            /* delta ranges skipped for a gap */
    uint64_t rejected;        /* messages refused (malformed, clock, limits) */
    uint64_t clock_rejected;  /* of which for a timestamp too far ahead */
    uint64_t gc_dropped;      /* DEAD atoms and tombstones collected */
    uint64_t snapshots_sent;  /* SNAPSHOT chunks built for peers */
    uint64_t deltas_sent;     /* DELTA messages built for peers */
    uint64_t forged;          /* of rejected: claims beyond what the sender may claim
                                 (dots past the lead or this replica's own, snapshot
                                 chunks that disagree, control characters in keys) */
    uint64_t healed;          /* times a peer believed this replica's counter past
                                 its own, and the counter moved past that */
    uint64_t resent;          /* atoms of this replica sent again to a peer that
                                 believed it had them (after a heal: those with
                                 seq past what the peer last reported, rule 9) */
    uint64_t rejoined;        /* atoms joined from the replica that made them
                                 although the vv counted their dots seen (and
                                 that changed the state: a forged claim had
                                 moved the vv, rule 4) */
} sl_store_stats_t;

void sl_store_stats(const sl_store_t *s, sl_store_stats_t *out);
/* Order-independent hash of what readers see (keys and live values). */
uint64_t sl_store_state_hash(const sl_store_t *s);
/* This replica's vv entry for `rid` (0 if unknown or retired). */
uint64_t sl_store_vv_get(const sl_store_t *s, uint64_t rid);
/* Invariant checker (index consistent with records, vv covers every atom);
 * SL_EINTERNAL with a log line if broken. */
sl_err sl_store_check(const sl_store_t *s);

#ifdef __cplusplus
}
#endif
#endif
