/* libFuzzer target for the store decoders (src/store/store_codec.c, src/blob/blob.c)
 * and the store's handling of hostile messages (src/store/store.c).
 *
 * Input: byte 0's low 6 bits pick the message type, 16..20 (the values
 * 16..19 are the types themselves; 20 is an unknown type, refused); bit 7
 * of byte 0 also delivers the message to a store holding a little state
 * (it must refuse or apply it, and stay consistent: sl_store_check); bit
 * 6 also decodes the rest as a blob manifest. The rest is the body.
 * tests/fuzz/corpus/store/v-* are the test vectors in this layout
 * (proto/vectors/store/gen.py writes them).
 *
 * What must hold: no crash, leak or sanitizer report; a body that decodes
 * re-encodes (never failing) to bytes no longer than the input, identical
 * when as long, that decode again to the same re-encoding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/blob.h"
#include "starling/store.h"

static void fail(const char *what) {
    fprintf(stderr, "fuzz_store: property broken: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    uint8_t type = (uint8_t)(16 + ((ctl & 0x3f) + 4) % 5);
    const uint8_t *body = data + 1;
    size_t len = size - 1;
    sl_log_set_level(0);
    sl_store_dmsg_t m;
    if (sl_store_msg_decode(type, body, len, &m) == SL_OK) {
        sl_store_msg_t out, again;
        if (sl_store_msg_encode(&m, SIZE_MAX, &out) != SL_OK)
            fail("a decoded message does not re-encode");
        if (out.len > len || (out.len == len && memcmp(out.body, body, len) != 0))
            fail("re-encoding is not the canonical form of the input");
        sl_store_dmsg_t m2;
        if (sl_store_msg_decode(type, out.body, out.len, &m2) != SL_OK)
            fail("the re-encoding does not decode");
        if (sl_store_msg_encode(&m2, SIZE_MAX, &again) != SL_OK || again.len != out.len ||
            memcmp(again.body, out.body, out.len) != 0)
            fail("re-encoding is not stable");
        sl_store_msg_fini(&again);
        sl_store_dmsg_fini(&m2);
        sl_store_msg_fini(&out);
        sl_store_dmsg_fini(&m);
    }
    if (ctl & 0x80) {
        sl_store_t *s;
        if (sl_store_new(0x0000000100000001ull, NULL, &s) != SL_OK)
            return 0;
        sl_store_msg_t d;
        if (sl_store_put(s, "k", 1, "v", 1, 1000, &d) == SL_OK)
            sl_store_msg_fini(&d);
        if (sl_store_set_add(s, "set", 3, "e1", 2, 1000, &d) == SL_OK)
            sl_store_msg_fini(&d);
        sl_store_out_t o;
        sl_store_out_init(&o);
        bool persist;
        sl_store_receive(s, type, body, len, (uint64_t)1 << 40, &o, &persist);
        if (sl_store_check(s) != SL_OK)
            fail("store inconsistent after a hostile message");
        sl_store_out_fini(&o);
        sl_store_destroy(&s);
    }
    if (ctl & 0x40) {
        sl_blob_manifest_t bm;
        if (sl_blob_manifest_decode(body, len, &bm) == SL_OK)
            sl_blob_manifest_fini(&bm);
    }
    return 0;
}
