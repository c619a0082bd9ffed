/* libFuzzer target for the wire codec (src/msg.c, src/mpack.c).
 *
 * Input split (also how the seed corpus is laid out):
 *   byte 0, bits 0-2   header length H (0..7; cut to what is there)
 *   byte 0, bit 7      1: the body is also checked by sl_meta_validate
 *   byte 0, bit 6      1: the body is also walked by sl_mpack_skip (floats
 *                      allowed, depth 8)
 *   bytes 1..H         the header frame
 *   the rest           the body frame
 * A well-formed message is 0x04, the 4 header bytes, then the body.
 *
 * What must hold: no crash, leak or sanitizer report on any input, and a
 * message that decodes re-encodes (never failing), the re-encoded body is
 * no longer than the input body and identical to it when as long (one
 * canonical encoding), encoded_len agrees, and the re-encoded bytes decode
 * to an equal message. A broken property aborts. */
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
    if (ctl & 0x40) {
        sl_mpack_reader_t r;
        sl_mpack_reader_init(&r, bl ? b : NULL, bl);
        r.allow_float = true;
        while (sl_mpack_reader_left(&r) && sl_mpack_skip(&r, SL_MPACK_MAX_DEPTH) == SL_OK)
            ;
    }

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
