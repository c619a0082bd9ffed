/* The store's disk: a write-ahead log with per-record checksums and group
 * commit, snapshots kept twice, and the store's identity. The only module
 * that touches the store's files (src/platform/disk.c).
 *
 * Directory layout (format 2; docs/store.md "On disk"):
 *   replica       the directory's identity: two 512-byte slots, each "SLID",
 *                 u64 seq, u64 incarnation, 16-byte random id, u32 CRC;
 *                 rewritten in place (the older slot, pwrite + fdatasync),
 *                 so it needs no free space after the first start and a torn
 *                 write leaves the other slot. The id is made once, at
 *                 random; the incarnation is bumped at every open
 *   snapshot      "SLSNAP\0\2", u64 generation, u64 length, u32 CRC of
 *                 (generation, type, body), type, body
 *   snapshot.prev the snapshot before it, kept until the next is durable
 *   wal           "SLWAL\0\0\2", u64 generation, u32 CRC of it; then
 *                 records: u32 magic 0x7e52ac53, u32 length, u32 CRC of
 *                 (length, type, body), type, body (little-endian)
 *   wal.prev      the log before the snapshot (replayed when the snapshot
 *                 falls back to snapshot.prev)
 *   wal.tail.N.I  what recovery cut off the log at byte N (kept, never
 *                 deleted: nothing stored is thrown away)
 *
 * A snapshot of generation G holds every record of the logs before G; the
 * log of generation G follows it. A directory of format 1 ("SLWAL\0\0\1",
 * file incarnation) is read and rewritten as format 2 at its first open.
 *
 *     sl_disk_t *d;
 *     sl_disk_open(dir, &d);                      // incarnation += 1
 *     sl_disk_recover(d, apply_record, store);     // snapshot, then WAL
 *     sl_disk_append(d, type, body, len);          // buffered
 *     sl_disk_sync(d);                             // write + fdatasync: ack after this
 *     sl_disk_snapshot(d, type, body, len);        // new snapshot and log; old ones kept as .prev
 *
 * Recovery skips a record that fails its checks and goes on from the next
 * good one (found by its magic), logging DISK-CORRUPT with the offsets and
 * counting it: one bad record costs that record (a bad log header costs
 * none: the records after it are replayed and the header written again).
 * A bad tail (nothing good after it) is cut and kept in wal.tail.*:
 * DISK-TORN when a crash cut a write short, DISK-CORRUPT otherwise. A snapshot that fails its checks is
 * refused (DISK-SNAPSHOT-CORRUPT), moved aside to NAME.bad.I and counted;
 * recovery then loads snapshot.prev and replays wal.prev and wal.
 *
 * A failed write (a full disk) puts the disk down: what reached the log of
 * it is cut back, the queued records stay queued, and appends are refused
 * (SL_EIO) until sl_disk_retry finds the disk takes writes again. DISK-DOWN
 * and DISK-UP are logged once per change. */
#ifndef STARLING_DISK_H
#define STARLING_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_DISK_MAX_RECORD (64u << 20) /* bytes of one WAL record body */
#define SL_DISK_ID_LEN 16              /* bytes of a directory's random id */

typedef struct sl_disk sl_disk_t;

typedef struct {
    uint64_t incarnation;       /* this start's incarnation (1, 2, ...) */
    uint64_t records_replayed;  /* WAL records handed to recovery */
    uint64_t snapshot_loaded;   /* 1 if a snapshot was replayed */
    uint64_t snapshot_rejected; /* snapshots refused as corrupt */
    uint64_t torn;              /* torn tails cut */
    uint64_t snapshot_fallback; /* 1 if the previous snapshot was loaded */
    uint64_t corrupt;           /* corrupt records found */
    uint64_t skipped;           /* of them, skipped with good records after them */
    uint64_t bytes_skipped;     /* log bytes those took */
    uint64_t bytes_cut;         /* log bytes moved to wal.tail.N */
    uint64_t appended;          /* records appended since open */
    uint64_t syncs;             /* group commits (fdatasync calls) */
    uint64_t wal_bytes;         /* current log size */
    uint64_t queued_bytes;      /* appended, not written yet */
    uint64_t down;              /* 1 while writes fail (a full disk) */
    uint64_t write_failures;    /* failed log writes and probes */
} sl_disk_stats_t;

/* Opens (creating) `dir` and starts a new incarnation. */
sl_err sl_disk_open(const char *dir, sl_disk_t **out);
void sl_disk_close(sl_disk_t **d);
uint64_t sl_disk_incarnation(const sl_disk_t *d);

/* The directory's random id (SL_DISK_ID_LEN bytes), made at its first open
 * and never a function of the peer's name: a directory that starts empty
 * is a new replica. */
const uint8_t *sl_disk_id(const sl_disk_t *d);

/* Called for the snapshot, then each WAL record in order. An error from it
 * stops recovery and is returned. */
typedef sl_err (*sl_disk_record_fn)(void *ctx, uint8_t type, const uint8_t *body, size_t len);

/* Replays the snapshot and the log; cuts a bad tail. Call once, before
 * appending. */
sl_err sl_disk_recover(sl_disk_t *d, sl_disk_record_fn fn, void *ctx);

/* Queues one record (copied); durable only after sl_disk_sync. */
sl_err sl_disk_append(sl_disk_t *d, uint8_t type, const void *body, size_t len);

/* Writes every queued record and fdatasyncs once (group commit). On a
 * failure the disk goes down (sl_disk_down) and the records stay queued. */
sl_err sl_disk_sync(sl_disk_t *d);

/* Whether the last write failed: appends are refused until a retry works. */
bool sl_disk_down(const sl_disk_t *d);

/* When down: writes the queued records, or with none a probe file of
 * 64 KiB; SL_OK (and up again) if the disk took it. Call with back-off. */
sl_err sl_disk_retry(sl_disk_t *d);

/* Writes a new snapshot and starts a new, empty log (queued records are
 * synced first); the snapshot and log before it are kept as snapshot.prev
 * and wal.prev. Everything that needs space is written before any rename,
 * so a full disk leaves the old ones in place. */
sl_err sl_disk_snapshot(sl_disk_t *d, uint8_t type, const void *body, size_t len);

void sl_disk_stats(const sl_disk_t *d, sl_disk_stats_t *out);

/* A small durable value in a file of two checksummed slots (the layout of
 * `replica` above): sl_disk_slot_write overwrites the older slot in place
 * with pwrite + fdatasync, so once the file exists it needs no free space
 * and a torn write leaves the newer slot. `id` (SL_DISK_ID_LEN bytes) may
 * be NULL. Read: the newest good slot; SL_ENOTFOUND if there is no file,
 * SL_ECORRUPT if neither slot is good. */
sl_err sl_disk_slot_read(const char *path, uint64_t *value, uint8_t *id);
sl_err sl_disk_slot_write(const char *path, uint64_t value, const uint8_t *id);

/* Content-addressed chunk files under dir/blobs/xx/HEX (src/platform/disk.c):
 * written atomically, read back whole. SL_ENOTFOUND if absent. A file
 * already there with the same bytes is kept; one that differs (damaged)
 * is replaced. sl_disk_chunk_put is durable when it returns (two fsyncs:
 * file and directory). */
sl_err sl_disk_chunk_put(sl_disk_t *d, const char *hex, const void *data, size_t len);
sl_err sl_disk_chunk_get(sl_disk_t *d, const char *hex, uint8_t **data, size_t *len);
sl_err sl_disk_chunk_del(sl_disk_t *d, const char *hex);
bool sl_disk_chunk_has(sl_disk_t *d, const char *hex);

/* Batched durability for many chunks (a blob): sl_disk_chunk_write puts
 * the file in place (temporary file, rename) with no fsync and starts its
 * writeback; sl_disk_chunk_sync fdatasyncs one chunk file, and
 * sl_disk_chunk_sync_dirs fsyncs, once each, the directories that chunk
 * files were renamed into since their last sync. Write them all, sync
 * each, sync the directories, and only then record or acknowledge:
 *
 *     for each chunk: sl_disk_chunk_write(d, hex[i], data[i], len[i]);
 *     for each chunk: sl_disk_chunk_sync(d, hex[i]);
 *     sl_disk_chunk_sync_dirs(d);              // now durable
 *
 * A crash before the syncs may leave a chunk file missing, empty or
 * damaged: readers verify every chunk against its hash, so such a file is
 * refused, never accepted. */
sl_err sl_disk_chunk_write(sl_disk_t *d, const char *hex, const void *data, size_t len);
sl_err sl_disk_chunk_sync(sl_disk_t *d, const char *hex);
sl_err sl_disk_chunk_sync_dirs(sl_disk_t *d);

/* A file read in pieces (sl_blob_node_put_file): sl_disk_in_read fills
 * `buf` up to `len` bytes, short only at the end of the file (0 there). */
typedef struct sl_disk_in sl_disk_in_t;

sl_err sl_disk_in_open(const char *path, sl_disk_in_t **out);
uint64_t sl_disk_in_size(const sl_disk_in_t *in);
sl_err sl_disk_in_read(sl_disk_in_t *in, void *buf, size_t len, size_t *got);
void sl_disk_in_close(sl_disk_in_t **in);

/* A file written in pieces and put in place atomically (sl_blob_node_get_file):
 * the bytes go to a temporary file beside `path` (PATH.tmp-PID-N, created
 * with `mode` less the umask); sl_disk_out_commit fsyncs it, renames it
 * over `path` and fsyncs the directory; sl_disk_out_abort removes it. So
 * `path` holds the whole file or is untouched. Both consume the handle. */
typedef struct sl_disk_out sl_disk_out_t;

sl_err sl_disk_out_open(const char *path, unsigned mode, sl_disk_out_t **out);
sl_err sl_disk_out_write(sl_disk_out_t *o, const void *data, size_t len);
sl_err sl_disk_out_commit(sl_disk_out_t **o);
void sl_disk_out_abort(sl_disk_out_t **o);

#ifdef __cplusplus
}
#endif
#endif
