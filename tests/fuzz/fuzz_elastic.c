/* libFuzzer target for what an elastic job reads from other peers: the job
 * file (src/elastic/job_spec.c) and every record decoder of the job's store
 * entries (src/elastic/job_records.c), and the view they make, read by the
 * rendezvous core.
 *
 * Input: byte 0 picks (byte0 % 3); the rest is:
 *   0 a job file (sl_elastic_job_parse)
 *   1 one store entry, "KEY\0VALUE": the key parser and the decoder of its
 *     kind (worlds with max_nodes 4 and 32; ckpt records of both trainers)
 *   2 a job's entries, each [key length u8][key][value length u16 LE][value],
 *     added to one view (job 0123456789abcdef, max 4) that the core then
 *     reads: every world's status, the head, and one turn of a core; a key
 *     of length 0 prunes the view at its anchor (sl_elastic_records_prune)
 *     before the entries after it are added, and the view is pruned once
 *     more at the end (the pruned view, read the same way); then the same
 *     entries are loaded whole (sl_elastic_records_load) and read again
 * tests/fuzz/corpus/elastic/ holds seeds in this layout (v-*: the vectors
 * of proto/vectors/elastic/gen.py).
 *
 * What must hold: no crash, leak or sanitizer report; whatever decodes
 * encodes again, and that encoding decodes to the same thing (one
 * canonical form); a parsed key builds back to the same bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starling/common.h"
#include "starling/elastic.h"

#define JOB "0123456789abcdef"

static void fail(const char *what) {
    fprintf(stderr, "fuzz_elastic: property broken: %s\n", what);
    abort();
}

static void job_file(const char *text, size_t len) {
    sl_elastic_job_t a, b;
    char why[256], enc[SL_ELASTIC_JOB_CANON_MAX], again[SL_ELASTIC_JOB_CANON_MAX];
    size_t n, n2;
    if (sl_elastic_job_parse(text, len, &a, why, sizeof why) != SL_OK)
        return;
    if (sl_elastic_job_encode(&a, enc, sizeof enc, &n) != SL_OK)
        fail("a parsed job does not encode");
    if (sl_elastic_job_parse(enc, n, &b, why, sizeof why) != SL_OK)
        fail("a job's canonical encoding does not parse");
    if (memcmp(&a, &b, sizeof a) != 0)
        fail("a job's canonical encoding parses to another job");
    if (sl_elastic_job_encode(&b, again, sizeof again, &n2) != SL_OK || n2 != n ||
        memcmp(enc, again, n) != 0)
        fail("a job's encoding is not stable");
    char id[SL_ELASTIC_JOB_ID_LEN + 1];
    if (sl_elastic_job_id(&a, id) != SL_OK || !sl_elastic_job_id_valid(id, strlen(id)))
        fail("a job has no valid id");
    sl_elastic_key_t k = {.kind = SL_ELASTIC_KEY_SPEC};
    memcpy(k.job, id, sizeof k.job);
    if (sl_elastic_spec_decode(&k, enc, n, &b, why, sizeof why) != SL_OK)
        fail("a job's canonical encoding is refused as its spec record");
}

static void one_entry(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul)
        return;
    const char *key = (const char *)data;
    size_t klen = (size_t)(nul - data);
    const uint8_t *val = nul + 1;
    size_t vlen = size - klen - 1;
    sl_elastic_key_t k;
    char why[256];
    if (sl_elastic_key_parse(key, klen, &k, why, sizeof why) != SL_OK)
        return;
    char built[SL_ELASTIC_KEY_MAX];
    size_t bl;
    if (sl_elastic_key_build(&k, built, sizeof built, &bl) != SL_OK || bl != klen ||
        memcmp(built, key, klen) != 0)
        fail("a parsed key does not build back to itself");
    uint8_t out[SL_ELASTIC_VALUE_MAX], again[SL_ELASTIC_VALUE_MAX];
    size_t on, an;
    switch (k.kind) {
    case SL_ELASTIC_KEY_VOL: {
        sl_elastic_vol_t v, v2;
        if (sl_elastic_vol_decode(&k, val, vlen, &v, why, sizeof why) != SL_OK)
            return;
        if (sl_elastic_vol_encode(&v, out, sizeof out, &on) != SL_OK ||
            sl_elastic_vol_decode(&k, out, on, &v2, why, sizeof why) != SL_OK ||
            memcmp(&v, &v2, sizeof v) != 0 ||
            sl_elastic_vol_encode(&v2, again, sizeof again, &an) != SL_OK || an != on ||
            memcmp(out, again, on) != 0)
            fail("a vol record does not round-trip");
        break;
    }
    case SL_ELASTIC_KEY_WORLD: {
        static const uint32_t maxes[] = {4, SL_ELASTIC_MAX_NODES};
        for (size_t i = 0; i < 2; i++) {
            sl_elastic_world_t w, w2;
            if (sl_elastic_world_decode(&k, maxes[i], val, vlen, &w, why, sizeof why) != SL_OK)
                continue;
            if (w.count > maxes[i])
                fail("a world over max_nodes decodes");
            if (sl_elastic_world_encode(&w, maxes[i], out, sizeof out, &on) != SL_OK ||
                sl_elastic_world_decode(&k, maxes[i], out, on, &w2, why, sizeof why) != SL_OK ||
                memcmp(&w, &w2, sizeof w) != 0 ||
                sl_elastic_world_encode(&w2, maxes[i], again, sizeof again, &an) != SL_OK ||
                an != on || memcmp(out, again, on) != 0)
                fail("a world record does not round-trip");
        }
        break;
    }
    case SL_ELASTIC_KEY_ACK: {
        sl_elastic_ack_t a, a2;
        if (sl_elastic_ack_decode(&k, val, vlen, &a, why, sizeof why) != SL_OK)
            return;
        if (sl_elastic_ack_encode(&a, out, sizeof out, &on) != SL_OK ||
            sl_elastic_ack_decode(&k, out, on, &a2, why, sizeof why) != SL_OK ||
            memcmp(&a, &a2, sizeof a) != 0 ||
            sl_elastic_ack_encode(&a2, again, sizeof again, &an) != SL_OK || an != on ||
            memcmp(out, again, on) != 0)
            fail("an ack record does not round-trip");
        break;
    }
    case SL_ELASTIC_KEY_CANCEL:
        if (sl_elastic_cancel_decode(val, vlen, why, sizeof why) != SL_OK)
            return;
        if (sl_elastic_cancel_encode(out, sizeof out, &on) != SL_OK ||
            sl_elastic_cancel_decode(out, on, why, sizeof why) != SL_OK)
            fail("a cancel record does not round-trip");
        break;
    case SL_ELASTIC_KEY_CKPT:
        for (int command = 0; command < 2; command++) {
            uint64_t step = 0;
            uint8_t blob[32];
            if (sl_elastic_ckpt_decode(val, vlen, command, &step, blob, why, sizeof why) ==
                    SL_OK &&
                (step < 1 || step > SL_ELASTIC_ROUND_MAX))
                fail("a ckpt record with a step out of range decodes");
        }
        break;
    case SL_ELASTIC_KEY_SPEC: {
        sl_elastic_job_t j;
        if (sl_elastic_spec_decode(&k, val, vlen, &j, why, sizeof why) != SL_OK)
            return;
        char enc[SL_ELASTIC_JOB_CANON_MAX], id[SL_ELASTIC_JOB_ID_LEN + 1];
        size_t n;
        if (sl_elastic_job_encode(&j, enc, sizeof enc, &n) != SL_OK || n != vlen ||
            memcmp(enc, val, n) != 0 || sl_elastic_job_id(&j, id) != SL_OK ||
            strcmp(id, k.job) != 0)
            fail("an accepted spec record is not its job's canonical encoding");
        break;
    }
    default: break; /* the other progress records are JSON the rendezvous never reads */
    }
}

static void read_view(sl_elastic_records_t *r);

static void many_entries(const uint8_t *data, size_t size) {
    sl_elastic_records_t *r = NULL;
    if (sl_elastic_records_new(JOB, 4, &r) != SL_OK)
        abort();
    char why[256], key[256];
    sl_elastic_entry_t *all = calloc(size + 1, sizeof *all);
    if (!all)
        abort();
    size_t count = 0, i = 0;
    while (i < size) {
        size_t kl = data[i++];
        bool moved;
        if (kl == 0) {
            if (sl_elastic_records_prune(r, &moved) == SL_ENOMEM)
                abort();
            continue;
        }
        if (size - i < kl + 2)
            break;
        memcpy(key, data + i, kl);
        i += kl;
        size_t vl = (size_t)data[i] | (size_t)data[i + 1] << 8;
        i += 2;
        if (size - i < vl)
            vl = size - i;
        sl_elastic_records_add(r, key, kl, data + i, vl, why, sizeof why);
        all[count++] = (sl_elastic_entry_t){(const char *)data + i - 2 - kl, kl, data + i, vl};
        i += vl;
    }
    read_view(r);
    bool moved;
    if (sl_elastic_records_prune(r, &moved) == SL_ENOMEM)
        abort();
    if (moved)
        read_view(r);
    sl_elastic_records_destroy(&r);
    size_t refused;
    if (sl_elastic_records_new(JOB, 4, &r) != SL_OK)
        abort();
    if (sl_elastic_records_load(r, all, count, &refused, why, sizeof why) == SL_OK)
        read_view(r);
    sl_elastic_records_destroy(&r);
    free(all);
}

/* The core reads the view of `r`: every world's status, the head, the
 * anchor it allows and two turns. */
static void read_view(sl_elastic_records_t *r) {
    sl_elastic_view_t view;
    memset(&view, 0, sizeof view);
    sl_elastic_records_view(r, &view);
    /* every volunteer alive, as this peer sees it */
    sl_round_member_t members[8];
    size_t mc = 0;
    for (size_t v = 0; v < view.vol_count && mc < 8; v++) {
        memset(&members[mc], 0, sizeof members[mc]);
        members[mc].id = view.vols[v].peer;
        members[mc].alive = true;
        mc++;
    }
    view.members = members;
    view.member_count = mc;
    view.synced = true;
    sl_elastic_status_t *st = calloc(view.world_count + 1, sizeof *st);
    if (!st)
        abort();
    sl_elastic_status_all(&view, st);
    free(st);
    sl_elastic_ref_t head, anchor;
    sl_elastic_head(&view, &head);
    size_t cap = view.past_count + view.ack_count, n;
    sl_elastic_past_t *past = calloc(cap + 1, sizeof *past);
    if (!past)
        abort();
    if (sl_elastic_anchor(&view, UINT64_MAX, &anchor, past, cap, &n) == SL_OK &&
        (n > cap || (anchor.round && anchor.round < view.anchor.round)))
        fail("an anchor moves back, or its past overflows");
    free(past);
    sl_elastic_config_t cfg = {.job_id = JOB, .min_nodes = 1, .max_nodes = 4,
                               .settle_ms = 300, .ack_timeout_ms = 5000};
    sl_elastic_t *core = NULL;
    const char *self = view.vol_count ? view.vols[0].peer : "a";
    if (sl_elastic_new(&cfg, self, &core) == SL_OK) {
        sl_elastic_local_t local = {.step = 0, .has_state = false};
        sl_elastic_out_t out;
        sl_elastic_step(core, &view, &local, 1000, &out);
        sl_elastic_step(core, &view, &local, 2000, &out);
        char cwhy[256];
        if (sl_elastic_check(core, cwhy, sizeof cwhy) != SL_OK) {
            fprintf(stderr, "fuzz_elastic: core check: %s\n", cwhy);
            abort();
        }
        sl_elastic_destroy(&core);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    switch (data[0] % 3) {
    case 0: job_file((const char *)data + 1, size - 1); break;
    case 1: one_entry(data + 1, size - 1); break;
    default: many_entries(data + 1, size - 1); break;
    }
    return 0;
}
