/* Tests of the wire codec (src/wire/msg.c): every vector in proto/vectors/
 * (valid ones decode and re-encode byte for byte, invalid ones fail with
 * exactly their stated error), decoded field values, every truncation of a
 * valid message, byte mutations, encoder limits, allocation failure. */
#include <dirent.h>
#include <stdlib.h>

#include "starling/msg.h"
#include "starling/rng.h"
#include "testlib.h"
#include "fuzz/msg_eq.h"

/* ---- Vector files (format: proto/vectors/README.md) ---- */

/* Decodes a vector field: "-" (empty) or segments joined by '+', each HEX
 * or HEX*COUNT. Returns a malloc'd buffer (never NULL) or NULL on a bad
 * field. */
static uint8_t *field_bytes(const char *f, size_t *len) {
    size_t cap = 64, n = 0;
    uint8_t *out = malloc(cap);
    *len = 0;
    if (strcmp(f, "-") == 0)
        return out;
    const char *p = f;
    while (*p) {
        const char *e = p;
        while (*e && *e != '+' && *e != '*')
            e++;
        size_t hl = (size_t)(e - p);
        char hex[8192];
        uint8_t piece[4096];
        if (hl >= sizeof hex)
            goto bad;
        memcpy(hex, p, hl);
        hex[hl] = 0;
        long pl = sl_test_unhex(hex, piece, sizeof piece);
        if (pl < 0)
            goto bad;
        unsigned long rep = 1;
        if (*e == '*') {
            char *end;
            rep = strtoul(e + 1, &end, 10);
            e = end;
        }
        if (n + (size_t)pl * rep > cap) {
            while (n + (size_t)pl * rep > cap)
                cap *= 2;
            out = realloc(out, cap);
        }
        for (unsigned long i = 0; i < rep; i++, n += (size_t)pl)
            memcpy(out + n, piece, (size_t)pl);
        p = *e == '+' ? e + 1 : e;
        if (*e && *e != '+')
            goto bad;
    }
    *len = n;
    return out;
bad:
    free(out);
    return NULL;
}

/* Error code from its name ("SL_ETRUNC"); SL_ERR_COUNT if unknown. */
static sl_err err_by_name(const char *name) {
    for (int e = 0; e < SL_ERR_COUNT; e++)
        if (strcmp(sl_errname((sl_err)e), name) == 0)
            return (sl_err)e;
    return SL_ERR_COUNT;
}

#define bytes_eq sl_test_bytes_eq
#define msg_eq sl_test_msg_eq

/* Decodes, checks re-encoding gives `want` (header + body) and that the
 * re-encoded bytes decode to an equal message. */
static void check_roundtrip(const char *where, const uint8_t *h, size_t hl, const uint8_t *b,
                            size_t bl, const uint8_t *want, size_t want_len) {
    sl_msg_t m, m2;
    uint8_t h2[SL_WIRE_HEADER_LEN], *b2 = NULL;
    size_t bl2 = 0, elen = 0;
    sl_err err = sl_msg_decode(h, hl, b, bl, &m);
    CHECK_MSG(err == SL_OK, "%s: decode: %s", where, sl_errname(err));
    if (err)
        return;
    err = sl_msg_encode(&m, h2, &b2, &bl2);
    CHECK_MSG(err == SL_OK, "%s: encode: %s", where, sl_errname(err));
    CHECK_MSG(memcmp(h2, h, SL_WIRE_HEADER_LEN) == 0, "%s: header differs", where);
    CHECK_MSG(bl2 == want_len && memcmp(b2, want, want_len) == 0,
              "%s: re-encoded %zu bytes, want %zu", where, bl2, want_len);
    CHECK_OK(sl_msg_encoded_len(&m, &elen));
    CHECK_MSG(elen == bl2, "%s: encoded_len %zu != %zu", where, elen, bl2);
    if (err == SL_OK) {
        CHECK_MSG(sl_msg_decode(h2, sizeof h2, b2, bl2, &m2) == SL_OK, "%s: re-decode", where);
        CHECK_MSG(msg_eq(&m, &m2), "%s: re-decoded message differs", where);
        sl_msg_fini(&m2);
    }
    sl_free(b2);
    sl_msg_fini(&m);
    sl_msg_fini(&m); /* idempotent */
}

typedef struct {
    int valid, compat, invalid; /* vectors run, by kind */
} counts_t;

static void run_vector_line(const char *file, int lineno, char *line, counts_t *c) {
    char *tok[6];
    int nt = 0;
    for (char *t = strtok(line, " \t\r"); t && nt < 6; t = strtok(NULL, " \t\r"))
        tok[nt++] = t;
    if (nt == 0 || tok[0][0] == '#')
        return;
    char where[256];
    snprintf(where, sizeof where, "%s:%d %s", file, lineno, nt > 1 ? tok[1] : "?");
    size_t hl = 0, bl = 0, rl = 0;
    uint8_t *h = NULL, *b = NULL, *re = NULL;
    if (strcmp(tok[0], "valid") == 0 && nt == 4) {
        h = field_bytes(tok[2], &hl);
        b = field_bytes(tok[3], &bl);
        CHECK_MSG(h && b, "%s: bad hex", where);
        if (h && b)
            check_roundtrip(where, h, hl, b, bl, b, bl);
        /* Every strict prefix of a valid body is truncated (for a large
         * body, 512 cuts spread over it). */
        size_t step = bl > 4096 ? bl / 512 : 1;
        for (size_t cut = 0; h && b && cut < bl; cut += step) {
            sl_msg_t m;
            sl_err err = sl_msg_decode(h, hl, b, cut, &m);
            CHECK_MSG(err == SL_ETRUNC, "%s: prefix %zu/%zu: %s", where, cut, bl,
                      sl_errname(err));
        }
        c->valid++;
    } else if (strcmp(tok[0], "compat") == 0 && nt == 5) {
        h = field_bytes(tok[2], &hl);
        b = field_bytes(tok[3], &bl);
        re = field_bytes(tok[4], &rl);
        CHECK_MSG(h && b && re, "%s: bad hex", where);
        if (h && b && re)
            check_roundtrip(where, h, hl, b, bl, re, rl);
        c->compat++;
    } else if (strcmp(tok[0], "invalid") == 0 && nt == 5) {
        sl_err want = err_by_name(tok[2]);
        CHECK_MSG(want != SL_ERR_COUNT && want != SL_OK, "%s: bad error name %s", where, tok[2]);
        h = field_bytes(tok[3], &hl);
        b = field_bytes(tok[4], &bl);
        CHECK_MSG(h && b, "%s: bad hex", where);
        if (h && b) {
            sl_msg_t m;
            int64_t live = sl_alloc_live();
            sl_err err = sl_msg_decode(h, hl, b, bl, &m);
            CHECK_MSG(err == want, "%s: got %s, want %s", where, sl_errname(err), tok[2]);
            if (err == SL_OK)
                sl_msg_fini(&m);
            CHECK_MSG(sl_alloc_live() == live, "%s: leaked", where);
        }
        c->invalid++;
    } else {
        CHECK_MSG(false, "%s: malformed vector line", where);
    }
    free(h);
    free(b);
    free(re);
}

static void test_vectors(void) {
    char dir[4096];
    sl_test_source_path("proto/vectors", dir, sizeof dir);
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot open %s", dir);
    if (!d)
        return;
    int files = 0;
    counts_t total = {0};
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl < 5 || strcmp(e->d_name + nl - 4, ".txt") != 0)
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        char *text = (char *)sl_test_read_file(path, &len);
        CHECK_MSG(text != NULL, "cannot read %s", path);
        if (!text)
            continue;
        files++;
        counts_t c = {0};
        int lineno = 0;
        char *save = NULL;
        /* strtok is used inside; split lines by hand. */
        for (char *line = text; line && *line;) {
            char *nl_p = strchr(line, '\n');
            if (nl_p)
                *nl_p = 0;
            lineno++;
            run_vector_line(e->d_name, lineno, line, &c);
            line = nl_p ? nl_p + 1 : NULL;
        }
        (void)save;
        if (strcmp(e->d_name, "envelope.txt") != 0) {
            CHECK_MSG(c.valid >= 3, "%s: only %d valid vectors", e->d_name, c.valid);
            CHECK_MSG(c.invalid >= 5, "%s: only %d invalid vectors", e->d_name, c.invalid);
        }
        total.valid += c.valid;
        total.compat += c.compat;
        total.invalid += c.invalid;
        free(text);
    }
    closedir(d);
    CHECK_MSG(files >= 8, "only %d vector files", files);
    printf("  %d files: %d valid, %d compat, %d invalid vectors\n", files, total.valid,
           total.compat, total.invalid);
}

/* ---- Field values and encoding from C ---- */

static sl_member_msg_t mk_member(const char *name, const char *addr, uint64_t inc, uint8_t state,
                                 const char *from) {
    sl_member_msg_t m = {0};
    m.name = sl_bytes_str(name);
    m.addr = sl_bytes_str(addr);
    m.incarnation = inc;
    m.state = state;
    m.from = sl_bytes_str(from);
    return m;
}

/* proto/vectors/ping.txt, "one-gossip". */
static const char PING_ONE_GOSSIP[] =
    "8500a5616c70686101b37463703a2f2f31302e302e302e313a3739343602918600a567616d6d6101b374"
    "63703a2f2f31302e302e302e333a3739343602070301048005a5616c70686103ccc804a462657461";

static void test_ping_fields(void) {
    uint8_t body[512];
    long bl = sl_test_unhex(PING_ONE_GOSSIP, body, sizeof body);
    const uint8_t hdr[4] = {'S', 'L', 1, SL_MSG_PING};
    sl_msg_t m;
    CHECK_OK(sl_msg_decode(hdr, 4, body, (size_t)bl, &m));
    CHECK_INT(m.type, SL_MSG_PING);
    CHECK(bytes_eq(m.from, sl_bytes_str("alpha")));
    CHECK(bytes_eq(m.from_addr, sl_bytes_str("tcp://10.0.0.1:7946")));
    CHECK_INT(m.u.ping.seq, 200);
    CHECK(bytes_eq(m.u.ping.target, sl_bytes_str("beta")));
    CHECK_INT(m.gossip_count, 1);
    CHECK(bytes_eq(m.gossip[0].name, sl_bytes_str("gamma")));
    CHECK_INT(m.gossip[0].incarnation, 7);
    CHECK_INT(m.gossip[0].state, SL_STATE_SUSPECT);
    CHECK(bytes_eq(m.gossip[0].from, sl_bytes_str("alpha")));
    CHECK(m.gossip[0].meta.len == 0 && m.gossip[0].meta.ptr == NULL);
    /* Views into the input, not copies. */
    CHECK(m.from.ptr > body && m.from.ptr < body + bl);
    sl_msg_fini(&m);

    /* The same message built in C encodes to the same bytes. */
    sl_msg_t e = {0};
    e.type = SL_MSG_PING;
    e.from = sl_bytes_str("alpha");
    e.from_addr = sl_bytes_str("tcp://10.0.0.1:7946");
    e.u.ping.seq = 200;
    e.u.ping.target = sl_bytes_str("beta");
    e.gossip[0] = mk_member("gamma", "tcp://10.0.0.3:7946", 7, SL_STATE_SUSPECT, "alpha");
    e.gossip_count = 1;
    uint8_t h2[4], *b2;
    size_t l2;
    CHECK_OK(sl_msg_encode(&e, h2, &b2, &l2));
    CHECK(memcmp(h2, hdr, 4) == 0);
    CHECK(l2 == (size_t)bl && memcmp(b2, body, l2) == 0);
    sl_free(b2);
}

static void test_each_type_from_c(void) {
    static const uint8_t meta[] = {0x82, 0xa4, 'g', 'p', 'u', 's', 0xa1, '2',
                                   0xa3, 'v', 'e', 'r', 0xa3, '0', '.', '1'};
    sl_member_msg_t members[3] = {
        mk_member("a", "tcp://127.0.0.1:1", 1, SL_STATE_ALIVE, ""),
        mk_member("b", "tcp://127.0.0.1:2", UINT64_MAX, SL_STATE_DEAD, "a"),
        mk_member("c", "tcp://127.0.0.1:3", 0, SL_STATE_LEFT, ""),
    };
    members[0].meta = (sl_bytes_t){meta, sizeof meta};
    sl_msg_t ms[7];
    memset(ms, 0, sizeof ms);
    for (int i = 0; i < 5; i++) {
        ms[i].from = sl_bytes_str("self");
        ms[i].from_addr = sl_bytes_str("tcp://127.0.0.1:9");
    }
    ms[0].type = SL_MSG_PING;
    ms[0].u.ping = (sl_ping_t){5, sl_bytes_str("a")};
    ms[0].gossip[0] = members[0];
    ms[0].gossip_count = 1;
    ms[1].type = SL_MSG_PING_REQ;
    ms[1].u.ping_req = (sl_ping_req_t){6, sl_bytes_str("b"), sl_bytes_str("tcp://x:1"), 1};
    ms[2].type = SL_MSG_ACK;
    ms[2].u.ack = (sl_ack_t){7, sl_bytes_str("b")};
    memcpy(ms[2].gossip, members, sizeof members);
    ms[2].gossip_count = 3;
    ms[3].type = SL_MSG_NACK;
    ms[3].u.nack.seq = 8;
    ms[4].type = SL_MSG_SYNC;
    ms[4].u.sync = (sl_sync_t){1, 0, members, 3};
    ms[5].type = SL_MSG_CTL_REQ;
    ms[5].u.ctl_req.id = 9;
    ms[5].u.ctl_req.cmd = sl_bytes_str("members");
    ms[5].u.ctl_req.args[0] = sl_bytes_str("--json");
    ms[5].u.ctl_req.arg_count = 1;
    ms[6].type = SL_MSG_CTL_REP;
    ms[6].u.ctl_rep = (sl_ctl_rep_t){9, SL_OK, 1, sl_bytes_str("[]")};
    for (int i = 0; i < 7; i++) {
        uint8_t h[4], *b;
        size_t bl, el;
        sl_msg_t d;
        CHECK_OK(sl_msg_encode(&ms[i], h, &b, &bl));
        CHECK_OK(sl_msg_encoded_len(&ms[i], &el));
        CHECK_INT(el, bl);
        CHECK_OK(sl_msg_decode(h, 4, b, bl, &d));
        CHECK_MSG(msg_eq(&ms[i], &d), "type %s", sl_msg_type_name(ms[i].type));
        sl_msg_fini(&d);
        sl_free(b);
    }
}

static void test_encode_rejects(void) {
    uint8_t h[4], *b = (uint8_t *)1;
    size_t bl = 1;
    sl_msg_t m = {0};
    m.type = SL_MSG_NACK;
    m.from = sl_bytes_str("n");
    m.from_addr = sl_bytes_str("a");
    CHECK_OK(sl_msg_encode(&m, h, &b, &bl));
    sl_free(b);

    sl_msg_t x = m;
    x.type = 9;
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_ETYPE);
    CHECK(b == NULL && bl == 0);
    x = m;
    x.from = sl_bytes_str("");
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_EINVAL);
    x.from = sl_bytes_str("0123456789012345678901234567890123456789012345678901234567890123X");
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_ETOOBIG);
    x.from = sl_bytes_str("tab\there");
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_EINVAL);
    x.from = sl_bytes_str("\xff");
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_EINVAL);
    x = m;
    x.gossip_count = SL_GOSSIP_MAX + 1;
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_ETOOBIG);
    x = m;
    x.gossip[0] = mk_member("g", "a", 1, 4, "");
    x.gossip_count = 1;
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_EINVAL);
    x.gossip[0].state = 0;
    x.gossip[0].meta = sl_bytes_str("\x81\xa1" "a" "\x01"); /* int value */
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_EINVAL);
    x.gossip[0].meta = (sl_bytes_t){(const uint8_t *)"x", SL_META_MAX_LEN + 1};
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_ETOOBIG);
    /* SYNC carries no gossip; control messages no sender. */
    x = m;
    x.type = SL_MSG_SYNC;
    x.gossip[0] = mk_member("g", "a", 1, 0, "");
    x.gossip_count = 1;
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_EINVAL);
    x = m;
    x.type = SL_MSG_CTL_REQ;
    x.u.ctl_req.cmd = sl_bytes_str("stats");
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_EINVAL);
    x.from = x.from_addr = (sl_bytes_t){0};
    CHECK_OK(sl_msg_encode(&x, h, &b, &bl));
    sl_free(b);
    x.u.ctl_req.arg_count = SL_CTL_MAX_ARGS + 1;
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_ETOOBIG);
    x.u.ctl_req.arg_count = 1;
    x.u.ctl_req.args[0] = (sl_bytes_t){NULL, 3};
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_EINVAL);
    x = m;
    x.type = SL_MSG_PING_REQ;
    x.u.ping_req = (sl_ping_req_t){1, sl_bytes_str("t"), sl_bytes_str("a"), 2};
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_EINVAL);
    /* A SYNC over SL_MSG_MAX_LEN in total. */
    static char big[SL_ADDR_MAX + 1];
    memset(big, 'x', SL_ADDR_MAX);
    sl_member_msg_t *many = calloc(SL_SYNC_MAX_MEMBERS, sizeof *many);
    static uint8_t meta[SL_META_MAX_LEN];
    size_t ml = 0;
    meta[ml++] = 0x83;
    for (int i = 0; i < 3; i++) { /* 3 x (1+2 + 2+128) + 1 = 400 bytes */
        meta[ml++] = 0xa2;
        meta[ml++] = 'k';
        meta[ml++] = (uint8_t)('0' + i);
        meta[ml++] = 0xd9;
        meta[ml++] = 128;
        memset(meta + ml, 'v', 128);
        ml += 128;
    }
    CHECK_OK(sl_meta_validate(meta, ml));
    for (int i = 0; i < SL_SYNC_MAX_MEMBERS; i++) {
        many[i] = mk_member("n", big, 1, 0, "");
        many[i].meta = (sl_bytes_t){meta, ml};
    }
    x = m;
    x.type = SL_MSG_SYNC;
    x.u.sync.members = many;
    x.u.sync.member_count = SL_SYNC_MAX_MEMBERS;
    int64_t live = sl_alloc_live();
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_ETOOBIG);
    size_t el;
    CHECK_ERR(sl_msg_encoded_len(&x, &el), SL_ETOOBIG);
    CHECK_INT(sl_alloc_live(), live);
    x.u.sync.member_count = SL_SYNC_MAX_MEMBERS + 1;
    CHECK_ERR(sl_msg_encode(&x, h, &b, &bl), SL_ETOOBIG);
    /* 6,000 of them fit: a big SYNC decodes. */
    x.u.sync.member_count = 6000;
    CHECK_OK(sl_msg_encode(&x, h, &b, &bl));
    sl_msg_t d;
    CHECK_OK(sl_msg_decode(h, 4, b, bl, &d));
    CHECK(msg_eq(&x, &d));
    sl_msg_fini(&d);
    sl_free(b);
    free(many);
}

static void test_meta_validate(void) {
    CHECK_OK(sl_meta_validate(NULL, 0));
    CHECK_OK(sl_meta_validate((const uint8_t *)"\x80", 1));
    CHECK_OK(sl_meta_validate((const uint8_t *)"\x81\xa1k\xa0", 4));
    CHECK_ERR(sl_meta_validate((const uint8_t *)"\x81\xa1k\xa0\x00", 5), SL_EPROTO);
    CHECK_ERR(sl_meta_validate((const uint8_t *)"\x81\xa1k", 3), SL_ETRUNC);
    CHECK_ERR(sl_meta_validate((const uint8_t *)"\x90", 1), SL_EPROTO);
    CHECK_ERR(sl_meta_validate((const uint8_t *)"\x82\xa1k\xa0\xa1k\xa0", 7), SL_EPROTO);
    CHECK_ERR(sl_meta_validate((const uint8_t *)"\x82\xa1l\xa0\xa1k\xa0", 7), SL_ENONCANON);
    CHECK_ERR(sl_meta_validate((const uint8_t *)"\x81\xa1\x01\xa0", 4), SL_EPROTO);
    CHECK_ERR(sl_meta_validate(NULL, 3), SL_EINVAL);
}

static void test_type_names(void) {
    CHECK_STR(sl_msg_type_name(SL_MSG_PING), "PING");
    CHECK_STR(sl_msg_type_name(SL_MSG_PING_REQ), "PING_REQ");
    CHECK_STR(sl_msg_type_name(SL_MSG_ACK), "ACK");
    CHECK_STR(sl_msg_type_name(SL_MSG_NACK), "NACK");
    CHECK_STR(sl_msg_type_name(SL_MSG_SYNC), "SYNC");
    CHECK_STR(sl_msg_type_name(SL_MSG_CTL_REQ), "CTL_REQ");
    CHECK_STR(sl_msg_type_name(SL_MSG_CTL_REP), "CTL_REP");
    CHECK_STR(sl_msg_type_name(0), "?");
    CHECK_STR(sl_msg_type_name(16), "?");
}

/* A SYNC decode fails cleanly when its one allocation fails. */
static void test_alloc_failure(void) {
    sl_member_msg_t members[2] = {
        mk_member("a", "tcp://127.0.0.1:1", 1, 0, ""),
        mk_member("b", "tcp://127.0.0.1:2", 2, 1, "a"),
    };
    sl_msg_t m = {0};
    m.type = SL_MSG_SYNC;
    m.from = sl_bytes_str("s");
    m.from_addr = sl_bytes_str("tcp://127.0.0.1:3");
    m.u.sync.members = members;
    m.u.sync.member_count = 2;
    uint8_t h[4], *b;
    size_t bl;
    int64_t live = sl_alloc_live();
    sl_alloc_fail_after(1, false);
    CHECK_ERR(sl_msg_encode(&m, h, &b, &bl), SL_ENOMEM);
    CHECK_INT(sl_alloc_live(), live);
    CHECK_OK(sl_msg_encode(&m, h, &b, &bl));
    sl_msg_t d;
    sl_alloc_fail_after(1, false);
    memset(&d, 0xab, sizeof d);
    CHECK_ERR(sl_msg_decode(h, 4, b, bl, &d), SL_ENOMEM);
    CHECK(d.u.sync.members == NULL && d.u.sync.member_count == 0);
    sl_msg_fini(&d);
    CHECK_INT(sl_alloc_live(), live + 1); /* only `b` */
    sl_alloc_fail_after(0, false);
    CHECK_OK(sl_msg_decode(h, 4, b, bl, &d));
    CHECK_INT(sl_alloc_live(), live + 2);
    sl_msg_fini(&d);
    sl_msg_fini(&d);
    CHECK_INT(sl_alloc_live(), live + 1);
    /* Other messages decode with no allocation at all. */
    sl_free(b);
    m.type = SL_MSG_NACK;
    CHECK_OK(sl_msg_encode(&m, h, &b, &bl));
    sl_alloc_fail_after(1, true);
    CHECK_OK(sl_msg_decode(h, 4, b, bl, &d));
    sl_alloc_fail_after(0, false);
    sl_free(b);
    CHECK_INT(sl_alloc_live(), live);
}

/* Random byte mutations of valid messages: never a crash or leak; what
 * decodes re-encodes canonically and decodes to the same message. */
static void test_mutations(void) {
    sl_member_msg_t members[3] = {
        mk_member("a", "tcp://127.0.0.1:1", 1, 0, ""),
        mk_member("bb", "tcp://127.0.0.1:2", 300, 1, "a"),
        mk_member("ccc", "tcp://127.0.0.1:3", 1u << 20, 3, ""),
    };
    sl_msg_t s = {0};
    s.type = SL_MSG_SYNC;
    s.from = sl_bytes_str("s");
    s.from_addr = sl_bytes_str("tcp://127.0.0.1:3");
    s.u.sync.members = members;
    s.u.sync.member_count = 3;
    uint8_t sh[4], *sb;
    size_t sbl;
    CHECK_OK(sl_msg_encode(&s, sh, &sb, &sbl));
    uint8_t pb[512];
    long pbl = sl_test_unhex(PING_ONE_GOSSIP, pb, sizeof pb);
    const uint8_t ph[4] = {'S', 'L', 1, SL_MSG_PING};
    sl_rng_t rng;
    sl_rng_seed(&rng, 7);
    int64_t live = sl_alloc_live();
    int decoded = 0, iters = 20000;
    for (int i = 0; i < iters; i++) {
        bool sync = i & 1;
        const uint8_t *src = sync ? sb : pb;
        size_t len = sync ? sbl : (size_t)pbl;
        uint8_t buf[1024];
        memcpy(buf, src, len);
        int flips = 1 + (int)sl_rng_below(&rng, 3);
        for (int f = 0; f < flips; f++)
            buf[sl_rng_below(&rng, len)] = (uint8_t)sl_rng_next(&rng);
        sl_msg_t m;
        if (sl_msg_decode(sync ? sh : ph, 4, buf, len, &m) != SL_OK)
            continue;
        decoded++;
        uint8_t h2[4], *b2;
        size_t l2;
        CHECK_OK(sl_msg_encode(&m, h2, &b2, &l2));
        CHECK(l2 <= len);
        if (l2 == len)
            CHECK(memcmp(b2, buf, len) == 0); /* canonical: one encoding */
        sl_msg_t m2;
        CHECK_OK(sl_msg_decode(h2, 4, b2, l2, &m2));
        CHECK(msg_eq(&m, &m2));
        sl_msg_fini(&m2);
        sl_msg_fini(&m);
        sl_free(b2);
    }
    sl_free(sb);
    CHECK_INT(sl_alloc_live(), live - 1);
    CHECK(decoded > 0);
    printf("  %d of %d mutants decoded\n", decoded, iters);
}

static void test_decode_args(void) {
    sl_msg_t m;
    const uint8_t h[4] = {'S', 'L', 1, SL_MSG_NACK};
    CHECK_ERR(sl_msg_decode(h, 4, NULL, 5, &m), SL_EINVAL);
    CHECK_ERR(sl_msg_decode(NULL, 0, NULL, 0, &m), SL_ETRUNC);
    CHECK_ERR(sl_msg_decode(h, 4, NULL, 0, &m), SL_ETRUNC);
}

/* sl_msg_ctl_req_encode: what clients send decodes to the request built. */
static void test_ctl_req_encode(void) {
    sl_bytes_t args[2] = {sl_bytes_str("k"), {(const uint8_t *)"a\0b", 3}};
    uint8_t h[SL_WIRE_HEADER_LEN], *b = NULL;
    size_t n = 0;
    CHECK_OK(sl_msg_ctl_req_encode(7, "put", args, 2, h, &b, &n));
    sl_msg_t m;
    CHECK_OK(sl_msg_decode(h, sizeof h, b, n, &m));
    CHECK_INT(m.type, SL_MSG_CTL_REQ);
    CHECK_INT(m.u.ctl_req.id, 7);
    CHECK(m.u.ctl_req.cmd.len == 3 && !memcmp(m.u.ctl_req.cmd.ptr, "put", 3));
    CHECK_INT(m.u.ctl_req.arg_count, 2);
    CHECK(m.u.ctl_req.args[1].len == 3 && !memcmp(m.u.ctl_req.args[1].ptr, "a\0b", 3));
    sl_msg_fini(&m);
    sl_free(b);
    sl_bytes_t many[SL_CTL_MAX_ARGS + 1];
    for (size_t i = 0; i <= SL_CTL_MAX_ARGS; i++)
        many[i] = sl_bytes_str("x");
    CHECK_ERR(sl_msg_ctl_req_encode(1, "keys", many, SL_CTL_MAX_ARGS + 1, h, &b, &n), SL_EINVAL);
}

int main(void) {
    sl_test_run("vectors", test_vectors);
    sl_test_run("ping_fields", test_ping_fields);
    sl_test_run("each_type_from_c", test_each_type_from_c);
    sl_test_run("encode_rejects", test_encode_rejects);
    sl_test_run("meta_validate", test_meta_validate);
    sl_test_run("type_names", test_type_names);
    sl_test_run("alloc_failure", test_alloc_failure);
    sl_test_run("mutations", test_mutations);
    sl_test_run("decode_args", test_decode_args);
    sl_test_run("ctl_req_encode", test_ctl_req_encode);
    return sl_test_finish();
}
