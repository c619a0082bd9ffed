/* libFuzzer target for the wire codec (src/wire/msg.c, src/wire/mpack.c).
 *
 * Input split (also how the seed corpus is laid out):
 *   byte 0, bits 0-2   header length H (0..7; cut to what is there)
 *   byte 0, bit 7      1: the body is also checked by sl_meta_validate
 *   byte 0, bit 6      1: the body is also read as a sequence of msgpack
 *                      values (floats allowed, depth 8) with the typed
 *                      reads and with sl_mpack_skip, which must agree, and
 *                      written back, which must give the same bytes
 *   bytes 1..H         the header frame
 *   the rest           the body frame
 * A well-formed message is 0x04, the 4 header bytes, then the body.
 *
 * What must hold: no crash, leak or sanitizer report on any input, and a
 * message that decodes re-encodes (never failing); the re-encoded body is
 * no longer than the input body, and identical to it unless the input
 * carries keys version 1 does not define (only those may be dropped: any
 * other difference means a non-canonical body was accepted);
 * encoded_len agrees; and the re-encoded bytes decode to an equal
 * message. A broken property aborts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/mpack.h"
#include "starling/msg.h"
#include "msg_eq.h"

static void fail(const char *what) {
    fprintf(stderr, "fuzz_msg: property broken: %s\n", what);
    abort();
}

/* Whether version 1 defines body key `key` for messages of `type`
 * (the tables of proto/membership.md and proto/control.md). */
static bool key_known(uint8_t type, uint64_t key) {
    switch (type) {
    case SL_MSG_PING: case SL_MSG_ACK: return key <= 4;
    case SL_MSG_PING_REQ: return key <= 6;
    case SL_MSG_NACK: return key <= 3;
    case SL_MSG_SYNC: return key <= 5 && key != 2;
    case SL_MSG_CTL_REQ: return key >= 3 && key <= 5;
    case SL_MSG_CTL_REP: return key >= 3 && key <= 6;
    default: return false;
    }
}

/* True if a body that decoded carries a key version 1 does not define (in
 * the body or in a member record): only then may its re-encoding differ
 * from it. Written from the spec's tables, apart from src/wire/msg.c. */
static bool has_unknown_keys(uint8_t type, const uint8_t *b, size_t bl) {
    sl_mpack_reader_t r;
    sl_mpack_map_t m, mm;
    uint64_t key, k2;
    uint32_t n;
    sl_mpack_reader_init(&r, b, bl);
    sl_mpack_map_begin(&r, UINT32_MAX, &m);
    while (sl_mpack_map_next(&r, &m, &key)) {
        if (!key_known(type, key))
            return true;
        bool records = (key == 2 && type != SL_MSG_SYNC && type < SL_MSG_CTL_REQ) ||
                       (key == 5 && type == SL_MSG_SYNC);
        if (!records) {
            sl_mpack_skip(&r, SL_MPACK_MAX_DEPTH);
            continue;
        }
        sl_mpack_read_array(&r, UINT32_MAX, &n);
        for (uint32_t i = 0; i < n && !r.err; i++) {
            sl_mpack_map_begin(&r, UINT32_MAX, &mm);
            while (sl_mpack_map_next(&r, &mm, &k2)) {
                if (k2 > 5)
                    return true;
                sl_mpack_skip(&r, SL_MPACK_MAX_DEPTH);
            }
        }
    }
    if (r.err)
        fail("a body that decoded does not walk");
    return false;
}

/* Reads one value of any type with the typed reads and writes it back
 * with the writer; at most `depth` levels of containers (as
 * sl_mpack_skip). */
static void walk(sl_mpack_reader_t *r, sl_mpack_writer_t *w, int depth) {
    const uint8_t *p;
    size_t n;
    switch (sl_mpack_peek(r)) {
    case SL_MPACK_NIL:
        if (!sl_mpack_read_nil(r))
            sl_mpack_write_nil(w);
        return;
    case SL_MPACK_BOOL: {
        bool v;
        if (!sl_mpack_read_bool(r, &v))
            sl_mpack_write_bool(w, v);
        return;
    }
    case SL_MPACK_UINT: {
        uint64_t v;
        if (!sl_mpack_read_uint(r, UINT64_MAX, &v))
            sl_mpack_write_uint(w, v);
        return;
    }
    case SL_MPACK_INT: {
        int64_t v;
        if (!sl_mpack_read_int(r, INT64_MIN, INT64_MAX, &v))
            sl_mpack_write_int(w, v);
        return;
    }
    case SL_MPACK_FLOAT: {
        double v;
        if (!sl_mpack_read_double(r, &v))
            sl_mpack_write_double(w, v);
        return;
    }
    case SL_MPACK_STR:
        if (!sl_mpack_read_str(r, 0, UINT32_MAX, &p, &n))
            sl_mpack_write_str(w, p, n);
        return;
    case SL_MPACK_BIN:
        if (!sl_mpack_read_bin(r, 0, UINT32_MAX, &p, &n))
            sl_mpack_write_bin(w, p, n);
        return;
    case SL_MPACK_ARRAY: {
        uint32_t count;
        if (depth < 1) {
            sl_mpack_skip(r, 0); /* fails */
            return;
        }
        if (sl_mpack_read_array(r, UINT32_MAX, &count))
            return;
        sl_mpack_write_array(w, count);
        for (uint32_t i = 0; i < count && !r->err; i++)
            walk(r, w, depth - 1);
        return;
    }
    case SL_MPACK_MAP: {
        sl_mpack_map_t m;
        if (depth < 1) {
            sl_mpack_skip(r, 0);
            return;
        }
        if (sl_mpack_map_begin(r, UINT32_MAX, &m))
            return;
        sl_mpack_write_map(w, m.left);
        bool str_keys = sl_mpack_peek(r) == SL_MPACK_STR;
        for (;;) {
            uint64_t key;
            if (str_keys ? !sl_mpack_map_next_str(r, &m, UINT32_MAX, &p, &n)
                         : !sl_mpack_map_next(r, &m, &key))
                break;
            if (str_keys)
                sl_mpack_write_str(w, p, n);
            else
                sl_mpack_write_uint(w, key);
            walk(r, w, depth - 1);
        }
        return;
    }
    default:
        sl_mpack_skip(r, 0); /* ext, 0xc1 or the end: fails */
        return;
    }
}

/* The reader and writer agree: a sequence of values the strict reader
 * accepts is written back byte for byte by the writer (one encoding per
 * value), and the typed reads accept exactly what sl_mpack_skip does. */
static void check_mpack(const uint8_t *b, size_t bl) {
    sl_mpack_reader_t r, rs;
    sl_mpack_writer_t w;
    sl_mpack_reader_init(&r, bl ? b : NULL, bl);
    sl_mpack_reader_init(&rs, bl ? b : NULL, bl);
    r.allow_float = rs.allow_float = true;
    sl_mpack_writer_init(&w, bl);
    while (sl_mpack_reader_left(&r) && !r.err) {
        walk(&r, &w, SL_MPACK_MAX_DEPTH);
        sl_mpack_skip(&rs, SL_MPACK_MAX_DEPTH);
        if ((r.err == SL_OK) != (rs.err == SL_OK) || (!r.err && r.p != rs.p))
            fail("typed reads and sl_mpack_skip disagree");
    }
    if (!r.err) {
        if (w.err || w.len != bl || (bl && memcmp(w.buf, b, bl) != 0))
            fail("writer does not reproduce what the strict reader accepted");
    }
    sl_mpack_writer_fini(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    size_t hl = ctl & 7u;
    if (hl > size - 1)
        hl = size - 1;
    const uint8_t *h = data + 1, *b = data + 1 + hl;
    size_t bl = size - 1 - hl;

    if (ctl & 0x80)
        (void)sl_meta_validate(bl ? b : NULL, bl);
    if (ctl & 0x40)
        check_mpack(b, bl);

    sl_msg_t m, m2;
    if (sl_msg_decode(h, hl, bl ? b : NULL, bl, &m) != SL_OK)
        return 0;
    uint8_t h2[SL_WIRE_HEADER_LEN], *b2 = NULL;
    size_t bl2 = 0, elen = 0;
    if (sl_msg_encode(&m, h2, &b2, &bl2) != SL_OK)
        fail("a decoded message does not encode");
    if (hl != SL_WIRE_HEADER_LEN || memcmp(h, h2, SL_WIRE_HEADER_LEN) != 0)
        fail("header differs");
    if (bl2 > bl)
        fail("re-encoding is longer than the input");
    if (bl2 == bl && memcmp(b, b2, bl) != 0)
        fail("two encodings of one message");
    if ((bl2 != bl || memcmp(b, b2, bl) != 0) && !has_unknown_keys(h[3], b, bl))
        fail("accepted a body that is not the canonical encoding of its message");
    if (sl_msg_encoded_len(&m, &elen) != SL_OK || elen != bl2)
        fail("encoded_len disagrees");
    if (sl_msg_decode(h2, sizeof h2, b2, bl2, &m2) != SL_OK)
        fail("re-encoded message does not decode");
    if (!sl_test_msg_eq(&m, &m2))
        fail("re-decoded message differs");
    sl_msg_fini(&m2);
    sl_msg_fini(&m);
    sl_free(b2);
    return 0;
}
