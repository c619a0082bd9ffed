/* Little-endian fixed-width integers in byte buffers, the byte order of
 * Starling's file formats (platform/disk.c: the WAL, snapshots and slot
 * files; nn/checkpoint.c: training checkpoints; nn/export.c: the zip and
 * numpy headers of .npz files). Internal to the library. */
#ifndef STARLING_BASE_LE_H
#define STARLING_BASE_LE_H

#include <stdint.h>

static inline void sl_put16le(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void sl_put32le(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void sl_put64le(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t sl_get32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t sl_get64le(const uint8_t *p) {
    return (uint64_t)sl_get32le(p) | (uint64_t)sl_get32le(p + 4) << 32;
}

#endif
