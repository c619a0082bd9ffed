/* Canonical msgpack: a writer into a growable buffer and a strict, bounded
 * reader. Every Starling message body (proto/envelope.md, "Canonical
 * msgpack profile") is written and read with these calls, so bytes are
 * deterministic: one value has exactly one encoding.
 *
 * The profile, in short:
 *   - integers, lengths and counts use their smallest encoding; a
 *     non-negative integer is always a positive (fixint/uint*) encoding;
 *   - maps have integer keys strictly ascending (or, for string-keyed maps
 *     such as member metadata, byte strings strictly ascending);
 *   - str holds valid UTF-8; bin holds bytes;
 *   - floats are float64 only (never float32), NaN only as 0x7ff8000000000000,
 *     and only where a reader allows them (membership has none);
 *   - ext types are never used.
 *
 * Both sides keep the FIRST error (sticky): after an error every call
 * returns it again and does nothing, so a sequence of calls can be checked
 * once at the end, or after each call with `goto fail`.
 *
 * Writing (the writer never produces a non-canonical value):
 *
 *     sl_mpack_writer_t w;
 *     sl_mpack_writer_init(&w, SL_MSG_MAX_LEN);
 *     sl_mpack_write_map(&w, 2);
 *     sl_mpack_write_uint(&w, 0);  sl_mpack_write_str(&w, "a", 1);
 *     sl_mpack_write_uint(&w, 1);  sl_mpack_write_uint(&w, 42);
 *     err = sl_mpack_writer_finish(&w, &buf, &len);   // buf: sl_free it
 *
 * Reading a map with integer keys (keys checked strictly ascending):
 *
 *     sl_mpack_reader_t r;
 *     sl_mpack_map_t m;
 *     uint64_t key;
 *     sl_mpack_reader_init(&r, buf, len);
 *     sl_mpack_map_begin(&r, 16, &m);
 *     while (sl_mpack_map_next(&r, &m, &key)) {
 *         switch (key) {
 *         case 0: sl_mpack_read_str(&r, 1, 64, &p, &n); break;
 *         case 1: sl_mpack_read_uint(&r, UINT32_MAX, &v); break;
 *         default: sl_mpack_skip(&r, 2); break; // unknown key: ignored
 *         }
 *     }
 *     sl_mpack_reader_end(&r);     // SL_EPROTO if bytes are left over
 *     if (r.err) ...               // the first error, if any
 *
 * Errors the reader reports:
 *   SL_ETRUNC     the input ends inside a value
 *   SL_ENONCANON  valid msgpack outside the profile (a non-minimal int or
 *                 length, keys out of order, float32, non-canonical NaN)
 *   SL_ETOOBIG    a declared length or count over the caller's limit, or
 *                 nesting deeper than SL_MPACK_MAX_DEPTH (limits are checked
 *                 before the bytes are required to be present)
 *   SL_EPROTO     anything else: wrong type, value out of range, duplicate
 *                 key, invalid UTF-8, ext type, trailing bytes
 *
 * Pure: no globals, no allocation, no I/O in the reader; work is linear in
 * the input length. The writer allocates through sl_realloc. */
#ifndef STARLING_MPACK_H
#define STARLING_MPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starling/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Deepest nesting sl_mpack_skip() ever follows. */
#define SL_MPACK_MAX_DEPTH 8

/* ---- Writer ---- */

typedef struct {
    uint8_t *buf;   /* bytes written so far (sl_realloc'd); NULL if counting */
    size_t len;     /* bytes written (or counted) */
    size_t cap;     /* bytes allocated in buf */
    size_t max_len; /* writing past this many bytes fails with SL_ETOOBIG */
    bool counting;  /* true: only count bytes, store nothing */
    sl_err err;     /* first error, SL_OK while all is well */
} sl_mpack_writer_t;

/* Starts an empty writer whose output may not exceed `max_len` bytes. */
void sl_mpack_writer_init(sl_mpack_writer_t *w, size_t max_len);

/* Starts a writer that only counts the bytes it would write (no
 * allocation): w->len is the encoded size once done. */
void sl_mpack_writer_init_count(sl_mpack_writer_t *w, size_t max_len);

/* Releases the buffer (if not taken by _finish). Idempotent. */
void sl_mpack_writer_fini(sl_mpack_writer_t *w);

/* Hands over the buffer: `*out` (sl_free it; NULL for an empty output) and
 * `*len`. Returns the writer's first error instead, if any, and then frees
 * the buffer. The writer is left empty either way. */
sl_err sl_mpack_writer_finish(sl_mpack_writer_t *w, uint8_t **out, size_t *len);

/* Each write appends one canonical value (or a container header: the
 * caller then writes `count` values, or `count` key/value pairs). They
 * return the writer's (sticky) error. */
sl_err sl_mpack_write_nil(sl_mpack_writer_t *w);
sl_err sl_mpack_write_bool(sl_mpack_writer_t *w, bool v);
sl_err sl_mpack_write_uint(sl_mpack_writer_t *w, uint64_t v);
sl_err sl_mpack_write_int(sl_mpack_writer_t *w, int64_t v);
sl_err sl_mpack_write_double(sl_mpack_writer_t *w, double v); /* float64 */
sl_err sl_mpack_write_str(sl_mpack_writer_t *w, const void *s, size_t len);
sl_err sl_mpack_write_bin(sl_mpack_writer_t *w, const void *p, size_t len);
sl_err sl_mpack_write_array(sl_mpack_writer_t *w, uint32_t count);
sl_err sl_mpack_write_map(sl_mpack_writer_t *w, uint32_t count);

/* Appends bytes that already are one canonical value (for instance a
 * validated metadata map). The caller vouches for them. */
sl_err sl_mpack_write_raw(sl_mpack_writer_t *w, const void *p, size_t len);

/* Str payloads must be valid UTF-8; the writer checks and fails with
 * SL_EINVAL otherwise. */

/* ---- Reader ---- */

typedef struct {
    const uint8_t *start; /* first byte of the input */
    const uint8_t *p;     /* next byte to read */
    const uint8_t *end;   /* one past the last byte */
    bool allow_float;     /* false: any float is SL_EPROTO (membership) */
    sl_err err;           /* first error, SL_OK while all is well */
    size_t err_off;       /* offset of the value that failed (for logs) */
} sl_mpack_reader_t;

/* Reads `len` bytes at `buf` (borrowed). Floats are refused unless the
 * caller sets r->allow_float. */
void sl_mpack_reader_init(sl_mpack_reader_t *r, const void *buf, size_t len);

/* Bytes not read yet. */
static inline size_t sl_mpack_reader_left(const sl_mpack_reader_t *r) {
    return (size_t)(r->end - r->p);
}

/* Checks that the whole input was read: SL_EPROTO if bytes remain. */
sl_err sl_mpack_reader_end(sl_mpack_reader_t *r);

/* Records `err` as the reader's error (if it has none yet) and returns
 * the reader's error: for semantic checks made by the caller. */
sl_err sl_mpack_reader_fail(sl_mpack_reader_t *r, sl_err err);

/* Msgpack type of the next value, without consuming it. */
typedef enum {
    SL_MPACK_NIL,
    SL_MPACK_BOOL,
    SL_MPACK_UINT,   /* non-negative integer */
    SL_MPACK_INT,    /* negative integer */
    SL_MPACK_FLOAT,
    SL_MPACK_STR,
    SL_MPACK_BIN,
    SL_MPACK_ARRAY,
    SL_MPACK_MAP,
    SL_MPACK_EXT,
    SL_MPACK_INVALID /* 0xc1, or the input is exhausted */
} sl_mpack_type;
sl_mpack_type sl_mpack_peek(const sl_mpack_reader_t *r);

sl_err sl_mpack_read_nil(sl_mpack_reader_t *r);
sl_err sl_mpack_read_bool(sl_mpack_reader_t *r, bool *out);

/* A non-negative integer no greater than `max` (SL_EPROTO above it). */
sl_err sl_mpack_read_uint(sl_mpack_reader_t *r, uint64_t max, uint64_t *out);

/* An integer in [min, max] (SL_EPROTO outside). */
sl_err sl_mpack_read_int(sl_mpack_reader_t *r, int64_t min, int64_t max, int64_t *out);

/* A float64 (only with r->allow_float). */
sl_err sl_mpack_read_double(sl_mpack_reader_t *r, double *out);

/* A str of min_len..max_len bytes of valid UTF-8: `*ptr` points into the
 * input (NULL when the length is 0). Under min_len is SL_EPROTO, over
 * max_len SL_ETOOBIG. */
sl_err sl_mpack_read_str(sl_mpack_reader_t *r, size_t min_len, size_t max_len,
                         const uint8_t **ptr, size_t *len);

/* A bin of min_len..max_len bytes, as for str (no UTF-8 check). */
sl_err sl_mpack_read_bin(sl_mpack_reader_t *r, size_t min_len, size_t max_len,
                         const uint8_t **ptr, size_t *len);

/* An array header of at most `max` elements (SL_ETOOBIG above). The
 * caller then reads `*count` values. */
sl_err sl_mpack_read_array(sl_mpack_reader_t *r, uint32_t max, uint32_t *count);

/* A map header of at most `max` entries; for maps whose keys the caller
 * checks itself. Prefer sl_mpack_map_begin/next. */
sl_err sl_mpack_read_map(sl_mpack_reader_t *r, uint32_t max, uint32_t *count);

/* Skips one value of any type, checking it is canonical and holds at most
 * `max_depth` levels of arrays/maps (0: a scalar only; 1: a flat array or
 * map; capped at SL_MPACK_MAX_DEPTH), else SL_ETOOBIG. Maps inside it must
 * have strictly ascending uint keys or strictly ascending str keys. */
sl_err sl_mpack_skip(sl_mpack_reader_t *r, int max_depth);

/* As sl_mpack_skip, and returns the skipped value's bytes (a view into the
 * input): for carrying an embedded canonical value unchanged, or hashing
 * it. */
sl_err sl_mpack_read_raw(sl_mpack_reader_t *r, int max_depth, const uint8_t **ptr,
                         size_t *len);

/* Iterating a canonical map. */
typedef struct {
    uint32_t left;          /* entries not read yet */
    bool first;             /* no key read yet */
    uint64_t last_key;      /* previous integer key */
    const uint8_t *last_str;/* previous str key (str-keyed maps) */
    size_t last_str_len;    /* its length */
} sl_mpack_map_t;

/* Reads a map header of at most `max` entries into `m`. */
sl_err sl_mpack_map_begin(sl_mpack_reader_t *r, uint32_t max, sl_mpack_map_t *m);

/* Reads the next integer key (0..UINT32_MAX) into `*key` and returns true,
 * the caller then reads its value; returns false when the map is done or
 * on error (check r->err). A key equal to the previous one is SL_EPROTO
 * (duplicate), a smaller one SL_ENONCANON (out of order). */
bool sl_mpack_map_next(sl_mpack_reader_t *r, sl_mpack_map_t *m, uint64_t *key);

/* As sl_mpack_map_next for str keys of 1..max_len bytes, ordered bytewise
 * (a prefix sorts first). */
bool sl_mpack_map_next_str(sl_mpack_reader_t *r, sl_mpack_map_t *m, size_t max_len,
                           const uint8_t **key, size_t *key_len);

/* True if `len` bytes at `p` are valid UTF-8 (no overlongs, no surrogates,
 * nothing above U+10FFFF). */
bool sl_mpack_utf8_valid(const uint8_t *p, size_t len);

#ifdef __cplusplus
}
#endif
#endif
