/* Hashes: SipHash-2-4 (keyed, 64-bit) for rendezvous ranking, BLAKE2b for
 * content addresses, zlib's CRC-32 for disk records. */
#include <string.h>

#include <sodium.h>
#include <zlib.h>

#include "starling/hash.h"
#include "starling/rng.h"

uint64_t sl_hash64(const void *data, size_t len, uint64_t seed) {
    unsigned char key[crypto_shorthash_siphash24_KEYBYTES];
    uint64_t k0 = sl_mix64(seed), k1 = sl_mix64(k0);
    memcpy(key, &k0, 8);
    memcpy(key + 8, &k1, 8);
    unsigned char out[crypto_shorthash_siphash24_BYTES];
    crypto_shorthash_siphash24(out, data, len, key);
    uint64_t h;
    memcpy(&h, out, 8);
    return h;
}

uint64_t sl_hrw_weight(const char *id, size_t id_len, uint64_t round) {
    return sl_hash64(id, id_len, round ^ 0x5354524c494e47ULL); /* "STRLING" */
}

void sl_blake2b(const void *data, size_t len, uint8_t out[SL_BLAKE2B_LEN]) {
    crypto_generichash(out, SL_BLAKE2B_LEN, data, len, NULL, 0);
}

void sl_hex(const uint8_t *data, size_t len, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[data[i] >> 4];
        out[2 * i + 1] = digits[data[i] & 15];
    }
    out[2 * len] = '\0';
}

bool sl_unhex(const char *hex, size_t hex_len, uint8_t *out) {
    if (hex_len % 2)
        return false;
    for (size_t i = 0; i < hex_len; i++) {
        char c = hex[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return false;
        out[i / 2] = (uint8_t)(i % 2 ? out[i / 2] << 4 | d : d);
    }
    return true;
}

uint32_t sl_crc32(uint32_t crc, const void *data, size_t len) {
    const unsigned char *p = data;
    while (len > 0) {
        uInt chunk = len > 0x40000000u ? 0x40000000u : (uInt)len;
        crc = (uint32_t)crc32(crc, p, chunk);
        p += chunk;
        len -= chunk;
    }
    return crc;
}
