/* Hashes: a fast keyed 64-bit hash for rendezvous (HRW) ranking and tables,
 * and BLAKE2b for content addressing. Both are deterministic across machines. */
#ifndef STARLING_HASH_H
#define STARLING_HASH_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SL_BLAKE2B_LEN 32 /* bytes of a content hash */

/* SipHash-2-4 of `data` under a key derived from `seed`. */
uint64_t sl_hash64(const void *data, size_t len, uint64_t seed);

/* Rendezvous weight of `id` for `round`: every peer computes the same
 * value; the highest weight among alive members wins. */
uint64_t sl_hrw_weight(const char *id, size_t id_len, uint64_t round);

/* BLAKE2b-256 of `data`. */
void sl_blake2b(const void *data, size_t len, uint8_t out[SL_BLAKE2B_LEN]);

/* Lower-case hex of `len` bytes into `out` (2*len+1 bytes). */
void sl_hex(const uint8_t *data, size_t len, char *out);

/* The bytes of `hex_len` lower-case hex digits (sl_hex's form) into `out`
 * (hex_len / 2 bytes); false, and `out` undefined, for an odd length or
 * any other character. */
bool sl_unhex(const char *hex, size_t hex_len, uint8_t *out);

/* CRC-32 (zlib's) of `data`, for records on disk; `crc` chains calls
 * (start with 0). */
uint32_t sl_crc32(uint32_t crc, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif
