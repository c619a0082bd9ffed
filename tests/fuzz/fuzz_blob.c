/* libFuzzer target for the blob decoders (src/blob/blob_xfer.c, src/blob/blob.c)
 * and the fetch state machine's handling of hostile chunks.
 *
 * Input: byte 0 picks the message type (24 + byte0 % 4: 27 is an unknown
 * type, refused); bit 6 also decodes the rest as a blob manifest; bit 7
 * also hands a decoded CHUNK to a fetch in progress (it must refuse it or
 * take it, and a taken chunk must match its hash). The rest is the body.
 * tests/fuzz/corpus/blob/v-* are the test vectors in this layout
 * (proto/vectors/blob/gen.py writes them).
 *
 * What must hold: no crash, leak or sanitizer report; a body that decodes
 * re-encodes to bytes no longer than the input, identical when as long,
 * that decode again to the same re-encoding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/blob_xfer.h"

static void fail(const char *what) {
    fprintf(stderr, "fuzz_blob: property broken: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    uint8_t type = (uint8_t)(SL_BLOB_MSG_GET + (ctl & 3));
    const uint8_t *body = data + 1;
    size_t len = size - 1;
    sl_log_set_level(0);
    sl_blob_msg_t m;
    if (sl_blob_msg_decode(type, body, len, &m) == SL_OK) {
        uint8_t *out, *again;
        size_t out_len, again_len;
        if (sl_blob_msg_encode(&m, &out, &out_len) != SL_OK)
            fail("a decoded message does not re-encode");
        if (out_len > len || (out_len == len && memcmp(out, body, len) != 0))
            fail("re-encoding is not the canonical form of the input");
        sl_blob_msg_t m2;
        if (sl_blob_msg_decode(type, out, out_len, &m2) != SL_OK)
            fail("the re-encoding does not decode");
        if (sl_blob_msg_encode(&m2, &again, &again_len) != SL_OK || again_len != out_len ||
            memcmp(again, out, out_len) != 0)
            fail("re-encoding is not stable");
        if ((ctl & 0x80) && type == SL_BLOB_MSG_CHUNK) {
            /* a fetch of a 4-chunk blob with every chunk in flight */
            static uint8_t blob[4 * 64];
            memset(blob, 0x5a, sizeof blob);
            sl_blob_manifest_t man;
            sl_blob_fetch_t *f;
            const char *src[] = {"tcp://a:1", "tcp://b:1"};
            sl_blob_fetch_config_t cfg = {.window = 4};
            if (sl_blob_manifest_build(blob, sizeof blob, 64, &man) == SL_OK) {
                if (sl_blob_fetch_new(m.xfer, &man, NULL, src, 2, &cfg, &f) == SL_OK) {
                    sl_blob_req_t reqs[4];
                    sl_blob_fetch_poll(f, 0, reqs, 4);
                    sl_err err = sl_blob_fetch_on_chunk(f, 0, &m);
                    if (err == SL_OK && (m.index >= 4 || m.data_len != 64 ||
                                         sl_blob_verify(m.data, m.data_len, man.chunks[m.index])))
                        fail("a chunk that does not match its hash was taken");
                    sl_blob_fetch_destroy(&f);
                }
                sl_blob_manifest_fini(&man);
            }
        }
        sl_free(again);
        sl_free(out);
    }
    if (ctl & 0x40) {
        sl_blob_manifest_t man;
        if (sl_blob_manifest_decode(body, len, &man) == SL_OK) {
            uint8_t *out;
            size_t out_len;
            if (sl_blob_manifest_encode(&man, &out, &out_len) != SL_OK)
                fail("a decoded manifest does not re-encode");
            if (out_len > len)
                fail("a manifest re-encodes longer than its input");
            sl_free(out);
            sl_blob_manifest_fini(&man);
        }
    }
    return 0;
}
