/* The store's disk: a write-ahead log with per-record checksums and group
 * commit, atomic snapshots, and the replica incarnation counter. The only
 * module that touches the store's files (src/disk.c).
 *
 * Directory layout:
 *   incarnation   8-byte counter + CRC, bumped (durably) at every open, so
 *                 each start is a new replica id and no dot is reused
 *   snapshot      "SLSNAP\0\1", u64 length, u32 CRC, type, body
 *   wal           "SLWAL\0\0\1", then records: u32 length, u32 CRC of
 *                 (length, type, body), type, body (little-endian)
 *   wal.tail.N    what recovery cut off the log at byte N (kept, never
 *                 deleted: nothing stored is thrown away)
 *
 *     sl_disk_t *d;
 *     sl_disk_open(dir, &d);                      // incarnation += 1
 *     sl_disk_recover(d, apply_record, store);     // snapshot, then WAL
 *     sl_disk_append(d, type, body, len);          // buffered
 *     sl_disk_sync(d);                             // write + fdatasync: ack after this
 *     sl_disk_snapshot(d, type, body, len);        // tmp, fsync, rename, dir fsync, WAL reset
 *
 * Recovery cuts the log at the first record that is incomplete (a torn
 * tail: the crash hit mid-write) or fails its checksum (corruption), logs
 * DISK-TORN or DISK-CORRUPT with the offset, and counts it. A snapshot that
 * fails its checks is refused (DISK-SNAPSHOT-CORRUPT), moved aside to
 * snapshot.bad.N, and counted; the log is still replayed. */
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

typedef struct sl_disk sl_disk_t;

typedef struct {
    uint64_t incarnation;       /* this start's incarnation (1, 2, ...) */
    uint64_t records_replayed;  /* WAL records handed to recovery */
    uint64_t snapshot_loaded;   /* 1 if a snapshot was replayed */
    uint64_t snapshot_rejected; /* snapshots refused as corrupt */
    uint64_t torn;              /* torn tails cut */
    uint64_t corrupt;           /* corrupt records found (log cut there) */
    uint64_t bytes_cut;         /* log bytes moved to wal.tail.N */
    uint64_t appended;          /* records appended since open */
    uint64_t syncs;             /* group commits (fdatasync calls) */
    uint64_t wal_bytes;         /* current log size */
} sl_disk_stats_t;

/* Opens (creating) `dir` and starts a new incarnation. */
sl_err sl_disk_open(const char *dir, sl_disk_t **out);
void sl_disk_close(sl_disk_t **d);
uint64_t sl_disk_incarnation(const sl_disk_t *d);

/* Called for the snapshot, then each WAL record in order. An error from it
 * stops recovery and is returned. */
typedef sl_err (*sl_disk_record_fn)(void *ctx, uint8_t type, const uint8_t *body, size_t len);

/* Replays the snapshot and the log; cuts a bad tail. Call once, before
 * appending. */
sl_err sl_disk_recover(sl_disk_t *d, sl_disk_record_fn fn, void *ctx);

/* Queues one record (copied); durable only after sl_disk_sync. */
sl_err sl_disk_append(sl_disk_t *d, uint8_t type, const void *body, size_t len);

/* Writes every queued record and fdatasyncs once (group commit). */
sl_err sl_disk_sync(sl_disk_t *d);

/* Replaces the snapshot atomically and empties the log (queued records
 * are synced first). */
sl_err sl_disk_snapshot(sl_disk_t *d, uint8_t type, const void *body, size_t len);

void sl_disk_stats(const sl_disk_t *d, sl_disk_stats_t *out);

/* Content-addressed chunk files under dir/blobs/xx/HEX (src/disk.c):
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
