/* The elastic job's store keys and records (src/elastic/job_records.c):
 * keys build and parse back; every record round-trips through its
 * canonical bytes; each malformed key or value is refused with its error;
 * a job's entries turn into the rendezvous core's view. */
#include <stdio.h>
#include <stdlib.h>

#include "starling/elastic.h"
#include "testlib.h"

#define J "0123456789abcdef"

static size_t unhex(const char *hex, uint8_t *out) {
    size_t n = 0;
    for (; hex[0] && hex[1]; hex += 2) {
        unsigned v;
        sscanf(hex, "%2x", &v);
        out[n++] = (uint8_t)v;
    }
    return n;
}

static sl_elastic_key_t key_of(const char *text) {
    sl_elastic_key_t k;
    char why[200] = "";
    sl_err err = sl_elastic_key_parse(text, strlen(text), &k, why, sizeof why);
    CHECK_MSG(err == SL_OK, "%s refused: %s", text, why);
    return k;
}

static void test_keys(void) {
    const char *good[] = {"job/" J "/spec", "job/" J "/cancel", "job/" J "/vol/p1",
                          "job/" J "/w/7/leader-a", "job/" J "/ack/9007199254740991/p/2",
                          "job/" J "/vol/\xc3\xa9t\xc3\xa9"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        sl_elastic_key_t k = key_of(good[i]);
        char out[SL_ELASTIC_KEY_MAX];
        size_t n;
        CHECK_OK(sl_elastic_key_build(&k, out, sizeof out, &n));
        CHECK_STR(out, good[i]);
        CHECK_INT(n, strlen(good[i]));
    }
    sl_elastic_key_t k = key_of("job/" J "/ack/12/p/2");
    CHECK_INT(k.kind, SL_ELASTIC_KEY_ACK);
    CHECK_INT(k.round, 12);
    CHECK_STR(k.peer, "p/2");
    CHECK_STR(k.job, J);

    struct {
        const char *key;
        sl_err err;
        const char *why;
    } bad[] = {
        {"job/0123456789ABCDEF/spec", SL_EPROTO, "not job/<16 hex>"},
        {"job/0123456789abcde/spec", SL_EPROTO, "not job/<16 hex>"},
        {"study/" J "/spec", SL_EPROTO, "not job/<16 hex>"},
        {"job/" J, SL_EPROTO, "not job/<16 hex>"},
        {"job/" J "/", SL_EPROTO, "unknown record"},
        {"job/" J "/specs", SL_EPROTO, "unknown record"},
        {"job/" J "/vol/", SL_EPROTO, "unknown record"},
        {"job/" J "/w/0/a", SL_EPROTO, "the round must be"},
        {"job/" J "/w/07/a", SL_EPROTO, "the round must be"},
        {"job/" J "/w/-1/a", SL_EPROTO, "the round must be"},
        {"job/" J "/w/9007199254740992/a", SL_EPROTO, "the round must be"},
        {"job/" J "/w/99999999999999999/a", SL_EPROTO, "the round must be"},
        {"job/" J "/w/3", SL_EPROTO, "the round must be"},
        {"job/" J "/w/3/", SL_EPROTO, "the peer id"},
        {"job/" J "/ack/3/a\tb", SL_EPROTO, "the peer id"},
        {"job/" J "/vol/\xff", SL_EPROTO, "the peer id"},
        {"job/" J "/vol/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         SL_EPROTO, "the peer id"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char why[200] = "";
        CHECK_ERR(sl_elastic_key_parse(bad[i].key, strlen(bad[i].key), &k, why, sizeof why),
                  bad[i].err);
        CHECK_MSG(strstr(why, bad[i].why) != NULL, "%s: \"%s\" lacks \"%s\"", bad[i].key, why,
                  bad[i].why);
    }
    char big[300];
    memset(big, 'a', sizeof big);
    memcpy(big, "job/" J "/vol/", 25);
    char why[200];
    CHECK_ERR(sl_elastic_key_parse(big, sizeof big, &k, why, sizeof why), SL_ETOOBIG);
    /* the builder refuses what would not parse back */
    sl_elastic_key_t b = {.kind = SL_ELASTIC_KEY_WORLD, .job = J, .round = 0, .peer = "a"};
    char out[SL_ELASTIC_KEY_MAX];
    CHECK_ERR(sl_elastic_key_build(&b, out, sizeof out, NULL), SL_EINVAL);
    b.round = 1;
    b.peer[0] = '\0';
    CHECK_ERR(sl_elastic_key_build(&b, out, sizeof out, NULL), SL_EINVAL);
    snprintf(b.peer, sizeof b.peer, "a");
    CHECK_ERR(sl_elastic_key_build(&b, out, 10, NULL), SL_ETOOBIG);
    snprintf(b.job, sizeof b.job, "xyz");
    CHECK_ERR(sl_elastic_key_build(&b, out, sizeof out, NULL), SL_EINVAL);
}

/* The vectors of proto/elastic.md (proto/vectors/elastic/gen.py). */
static void test_vectors(void) {
    uint8_t buf[SL_ELASTIC_VALUE_MAX], want[256];
    size_t n, wn;
    sl_elastic_vol_t v = {.peer = "p1", .round = 5};
    CHECK_OK(sl_elastic_vol_encode(&v, buf, sizeof buf, &n));
    wn = unhex("810005", want);
    CHECK(n == wn && memcmp(buf, want, n) == 0);

    sl_elastic_world_t w = {.id = {3, "b"}, .parent = {2, "a"}, .count = 2,
                            .members = {"a", "b"}};
    CHECK_OK(sl_elastic_world_encode(&w, 4, buf, sizeof buf, &n));
    wn = unhex("830002" "01a161" "0292a161a162", want);
    CHECK_MSG(n == wn && memcmp(buf, want, n) == 0, "world: %zu bytes", n);
    /* a graft: a root naming the world it grafts onto (fields 3, 4) */
    sl_elastic_world_t g = {.id = {5, "c"}, .graft = {3, "a"}, .count = 2, .members = {"b", "c"}};
    CHECK_OK(sl_elastic_world_encode(&g, 4, buf, sizeof buf, &n));
    wn = unhex("850000" "01a0" "0292a162a163" "0303" "04a161", want);
    CHECK_MSG(n == wn && memcmp(buf, want, n) == 0, "graft: %zu bytes", n);
    sl_elastic_key_t gk = {.kind = SL_ELASTIC_KEY_WORLD, .job = "0123456789abcdef", .round = 5,
                           .peer = "c"};
    sl_elastic_world_t back;
    char why[200] = "";
    CHECK_OK(sl_elastic_world_decode(&gk, 4, buf, n, &back, why, sizeof why));
    CHECK(sl_elastic_ref_eq(&back.graft, &g.graft) && back.parent.round == 0);
    g.parent = (sl_elastic_ref_t){2, "a"}; /* a graft has no parent */
    CHECK_ERR(sl_elastic_world_encode(&g, 4, buf, sizeof buf, &n), SL_EINVAL);
    g.parent = (sl_elastic_ref_t){0, ""};
    g.graft.round = 5; /* not below its own round */
    CHECK_ERR(sl_elastic_world_encode(&g, 4, buf, sizeof buf, &n), SL_EINVAL);

    sl_elastic_ack_t a = {.peer = "c", .world = {3, "b"}, .tip = {0, ""}, .step = 300,
                          .has_state = true, .state_world = {2, "a"}};
    CHECK_OK(sl_elastic_ack_encode(&a, buf, sizeof buf, &n));
    wn = unhex("8700a162" "0100" "02a0" "03cd012c" "04c3" "0502" "06a161", want);
    CHECK_MSG(n == wn && memcmp(buf, want, n) == 0, "ack: %zu bytes", n);

    CHECK_OK(sl_elastic_cancel_encode(buf, sizeof buf, &n));
    CHECK(n == 1 && buf[0] == 0x80);
}

static void test_round_trips(void) {
    uint8_t buf[SL_ELASTIC_VALUE_MAX];
    size_t n;
    char why[200] = "";
    /* a full world of 32 members with 64-byte ids */
    sl_elastic_world_t w;
    memset(&w, 0, sizeof w);
    w.id.round = SL_ELASTIC_ROUND_MAX;
    memset(w.id.leader, 'L', SL_ELASTIC_ID_MAX);
    w.parent.round = SL_ELASTIC_ROUND_MAX - 1;
    snprintf(w.parent.leader, sizeof w.parent.leader, "p");
    w.count = SL_ELASTIC_MAX_NODES;
    for (uint32_t i = 0; i < w.count; i++) {
        memset(w.members[i], 'm', SL_ELASTIC_ID_MAX);
        w.members[i][1] = (char)('0' + i / 10);
        w.members[i][2] = (char)('0' + i % 10);
    }
    CHECK_OK(sl_elastic_world_encode(&w, SL_ELASTIC_MAX_NODES, buf, sizeof buf, &n));
    char key[SL_ELASTIC_KEY_MAX];
    sl_elastic_key_t k = {.kind = SL_ELASTIC_KEY_WORLD, .job = J, .round = w.id.round};
    memcpy(k.peer, w.id.leader, sizeof k.peer);
    CHECK_OK(sl_elastic_key_build(&k, key, sizeof key, NULL));
    sl_elastic_key_t k2 = key_of(key);
    sl_elastic_world_t w2;
    CHECK_OK(sl_elastic_world_decode(&k2, SL_ELASTIC_MAX_NODES, buf, n, &w2, why, sizeof why));
    CHECK(memcmp(&w, &w2, sizeof w) == 0);
    /* more members than the job's max */
    CHECK_ERR(sl_elastic_world_decode(&k2, 31, buf, n, &w2, why, sizeof why), SL_ETOOBIG);
    CHECK_ERR(sl_elastic_world_encode(&w, 31, buf, sizeof buf, &n), SL_EINVAL);

    sl_elastic_ack_t a = {.peer = "c", .world = {9, "b"}, .tip = {4, "x"}, .step = 77,
                          .has_state = false, .state_world = {0, ""}};
    CHECK_OK(sl_elastic_ack_encode(&a, buf, sizeof buf, &n));
    sl_elastic_ack_t a2;
    k = key_of("job/" J "/ack/9/c");
    CHECK_OK(sl_elastic_ack_decode(&k, buf, n, &a2, why, sizeof why));
    CHECK(memcmp(&a, &a2, sizeof a) == 0);

    sl_elastic_vol_t v = {.peer = "q", .round = 12}, v2;
    CHECK_OK(sl_elastic_vol_encode(&v, buf, sizeof buf, &n));
    k = key_of("job/" J "/vol/q");
    CHECK_OK(sl_elastic_vol_decode(&k, buf, n, &v2, why, sizeof why));
    CHECK_STR(v2.peer, v.peer); /* (field by field: the struct has padding) */
    CHECK_INT(v2.round, v.round);

    /* encoders refuse what decoders would */
    sl_elastic_vol_t v0 = {.peer = "q", .round = 0};
    CHECK_ERR(sl_elastic_vol_encode(&v0, buf, sizeof buf, &n), SL_EINVAL);
    a.tip.round = 9;
    CHECK_ERR(sl_elastic_ack_encode(&a, buf, sizeof buf, &n), SL_EINVAL);
    w.count = 2;
    snprintf(w.members[1], sizeof w.members[1], "%s", w.members[0]);
    CHECK_ERR(sl_elastic_world_encode(&w, 4, buf, sizeof buf, &n), SL_EINVAL);
    CHECK_ERR(sl_elastic_cancel_encode(buf, 0, &n), SL_ETOOBIG);

    /* the spec record: the canonical text of a job whose id is J */
    const char *job = "{\"kind\":\"elastic\",\"name\":\"x\",\"nodes\":{\"min\":1,\"max\":2},"
                      "\"trainer\":{\"type\":\"command\",\"command\":\"true\"},\"epochs\":1}";
    sl_elastic_job_t jb, jb2;
    CHECK_OK(sl_elastic_job_parse(job, strlen(job), &jb, why, sizeof why));
    char canon[SL_ELASTIC_JOB_CANON_MAX], id[SL_ELASTIC_JOB_ID_LEN + 1];
    size_t cn;
    CHECK_OK(sl_elastic_job_encode(&jb, canon, sizeof canon, &cn));
    CHECK_OK(sl_elastic_job_id(&jb, id));
    sl_elastic_key_t sk = {.kind = SL_ELASTIC_KEY_SPEC};
    memcpy(sk.job, id, sizeof sk.job);
    CHECK_OK(sl_elastic_spec_decode(&sk, canon, cn, &jb2, why, sizeof why));
    CHECK(memcmp(&jb, &jb2, sizeof jb) == 0);
    CHECK_ERR(sl_elastic_spec_decode(&sk, job, strlen(job), &jb2, why, sizeof why), SL_EPROTO);
    CHECK(strstr(why, "spec: not the job's canonical encoding") != NULL);
    sk = key_of("job/" J "/spec");
    CHECK_ERR(sl_elastic_spec_decode(&sk, canon, cn, &jb2, why, sizeof why), SL_EPROTO);
    CHECK(strstr(why, "not the key's " J) != NULL);
    CHECK_ERR(sl_elastic_spec_decode(&sk, "{}", 2, &jb2, why, sizeof why), SL_EPROTO);
    CHECK(strstr(why, "spec: kind: required") != NULL);
}

/* Malformed values: each with its error and reason. */
static void test_malformed(void) {
    struct {
        int kind; /* 0 vol, 1 world, 2 ack, 3 cancel */
        const char *hex;
        sl_err err;
        const char *why;
    } cases[] = {
        {0, "", SL_ETRUNC, "vol: input ends early"},
        {0, "80", SL_EPROTO, "vol: field 0 missing"},
        {0, "8100 00", SL_EPROTO, "vol: "},           /* round 0 */
        {0, "8100cf0020000000000000", SL_EPROTO, "vol: "}, /* 2^53 */
        {0, "8100cc05", SL_ENONCANON, "vol: "},       /* 5 as uint8 */
        {0, "820005 0005", SL_EPROTO, "vol: "},       /* key 0 twice */
        {0, "820105 0005", SL_ENONCANON, "vol: "},    /* keys out of order */
        {0, "8100a135", SL_EPROTO, "vol: "},          /* a str */
        {0, "810005 00", SL_EPROTO, "vol: "},         /* a byte after */
        {0, "820005 01cb3ff0000000000000", SL_EPROTO, "vol: "}, /* a float, unknown key */
        {0, "820005 0190", SL_OK, ""},                /* an unknown key is skipped */
        {0, "820005 01c1", SL_EPROTO, "vol: "},
        {1, "830000 01a0 0290", SL_EPROTO, "world: "}, /* no member */
        {1, "830000 01a0 0291a161", SL_OK, ""},
        {1, "830000 01a161 0291a161", SL_EPROTO, "world: a parent leader goes with"},
        {1, "830001 01a0 0291a161", SL_EPROTO, "world: a parent leader goes with"},
        {1, "830003 01a161 0291a161", SL_EPROTO, "world: parent round 3 is not below"},
        {1, "830000 01a0 0292a161a161", SL_EPROTO, "world: member 1 is also member 0"},
        {1, "830000 01a0 0295a161a162a163a164a165", SL_ETOOBIG, "world: "},
        {1, "830000 01a0 0291a0", SL_EPROTO, "world: "},
        {1, "830000 01a0 0291a109", SL_EPROTO, "world: "},
        {1, "830000 01a0 0291c40161", SL_EPROTO, "world: "},
        {1, "820000 01a0", SL_EPROTO, "world: field 2 missing"},
        {1, "830000 01a0 02dc0001a161", SL_ENONCANON, "world: "},
        {2, "8700a162 0100 02a0 03cd012c 04c3 0502 06a161", SL_OK, ""},
        {2, "8700a162 0100 02a0 03cd012c 0401 0502 06a161", SL_EPROTO, "ack: "},
        {2, "8600a162 0100 02a0 03cd012c 04c3 0502", SL_EPROTO, "ack: field 6 missing"},
        {2, "8700a162 0103 02a161 03cd012c 04c3 0502 06a161", SL_EPROTO,
         "ack: its tip and state world must be below"},
        {2, "8700a162 0100 02a0 03cd012c 04c3 0503 06a161", SL_EPROTO,
         "ack: its tip and state world must be below"},
        {2, "8700a162 0100 02a161 03cd012c 04c3 0502 06a161", SL_EPROTO,
         "ack: a leader goes with"},
        {2, "8700a162 0100 02a0 03cd012c 04c3 0502 06a0", SL_EPROTO, "ack: a leader goes with"},
        {2, "8700a0 0100 02a0 03cd012c 04c3 0502 06a161", SL_EPROTO, "ack: "},
        {2, "8700a162 0100 02a0 03d1012c 04c3 0502 06a161", SL_ENONCANON, "ack: "},
        {3, "80", SL_OK, ""},
        {3, "8100c0", SL_OK, ""},
        {3, "90", SL_EPROTO, "cancel: "},
        {3, "8100cb0000000000000000", SL_EPROTO, "cancel: "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char hex[256];
        size_t h = 0;
        for (const char *p = cases[i].hex; *p; p++)
            if (*p != ' ')
                hex[h++] = *p;
        hex[h] = '\0';
        uint8_t val[128];
        size_t n = unhex(hex, val);
        char why[200] = "";
        sl_err err = SL_OK;
        sl_elastic_key_t k;
        switch (cases[i].kind) {
        case 0: {
            sl_elastic_vol_t v;
            k = key_of("job/" J "/vol/p");
            err = sl_elastic_vol_decode(&k, val, n, &v, why, sizeof why);
            break;
        }
        case 1: {
            sl_elastic_world_t w;
            k = key_of("job/" J "/w/3/b");
            err = sl_elastic_world_decode(&k, 4, val, n, &w, why, sizeof why);
            break;
        }
        case 2: {
            sl_elastic_ack_t a;
            k = key_of("job/" J "/ack/3/c");
            err = sl_elastic_ack_decode(&k, val, n, &a, why, sizeof why);
            break;
        }
        default: err = sl_elastic_cancel_decode(val, n, why, sizeof why); break;
        }
        CHECK_MSG(err == cases[i].err, "case %zu (%s): %s, not %s (%s)", i, cases[i].hex,
                  sl_strerror(err), sl_strerror(cases[i].err), why);
        CHECK_MSG(strstr(why, cases[i].why) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, why,
                  cases[i].why);
    }
    /* over the value bound */
    static uint8_t huge[SL_ELASTIC_VALUE_MAX + 1];
    char why[200];
    CHECK_ERR(sl_elastic_cancel_decode(huge, sizeof huge, why, sizeof why), SL_ETOOBIG);
}

/* Decodes `val` under `key` with the decoder of its kind (max_nodes 4) and
 * re-encodes it into out (*out_len; 0 for the spec). */
static sl_err decode_any(const char *key, const uint8_t *val, size_t n, uint8_t *out,
                         size_t *out_len) {
    sl_elastic_key_t k;
    char why[200];
    sl_err err = sl_elastic_key_parse(key, strlen(key), &k, why, sizeof why);
    *out_len = 0;
    if (err)
        return err;
    switch (k.kind) {
    case SL_ELASTIC_KEY_VOL: {
        sl_elastic_vol_t v;
        if ((err = sl_elastic_vol_decode(&k, val, n, &v, why, sizeof why)))
            return err;
        return sl_elastic_vol_encode(&v, out, SL_ELASTIC_VALUE_MAX, out_len);
    }
    case SL_ELASTIC_KEY_WORLD: {
        sl_elastic_world_t w;
        if ((err = sl_elastic_world_decode(&k, 4, val, n, &w, why, sizeof why)))
            return err;
        return sl_elastic_world_encode(&w, 4, out, SL_ELASTIC_VALUE_MAX, out_len);
    }
    case SL_ELASTIC_KEY_ACK: {
        sl_elastic_ack_t a;
        if ((err = sl_elastic_ack_decode(&k, val, n, &a, why, sizeof why)))
            return err;
        return sl_elastic_ack_encode(&a, out, SL_ELASTIC_VALUE_MAX, out_len);
    }
    case SL_ELASTIC_KEY_CANCEL:
        if ((err = sl_elastic_cancel_decode(val, n, why, sizeof why)))
            return err;
        return sl_elastic_cancel_encode(out, SL_ELASTIC_VALUE_MAX, out_len);
    default: return SL_EINVAL;
    }
}

/* proto/vectors/elastic/elastic.txt (gen.py): valid values decode and
 * encode to the same bytes, compat ones to their canonical form, invalid
 * ones fail with the named error. */
static void test_vector_file(void) {
    FILE *f = fopen("proto/vectors/elastic/elastic.txt", "r");
    CHECK_MSG(f != NULL, "cannot open proto/vectors/elastic/elastic.txt");
    if (!f)
        return;
    char line[2048];
    int count = 0;
    static uint8_t val[SL_ELASTIC_VALUE_MAX], canon[SL_ELASTIC_VALUE_MAX],
        out[SL_ELASTIC_VALUE_MAX];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char kind[16], name[64], a[256], b[256], c[2 * SL_ELASTIC_VALUE_MAX / 4],
            d[2 * SL_ELASTIC_VALUE_MAX / 4];
        int got = sscanf(line, "%15s %63s %255s %255s %1023s %1023s", kind, name, a, b, c, d);
        size_t n, cn, on;
        sl_err err;
        count++;
        if (strcmp(kind, "valid") == 0 && got == 4) {
            n = unhex(b, val);
            err = decode_any(a, val, n, out, &on);
            CHECK_MSG(err == SL_OK && on == n && memcmp(out, val, n) == 0, "%s: %s", name,
                      sl_strerror(err));
        } else if (strcmp(kind, "compat") == 0 && got == 5) {
            n = unhex(b, val);
            cn = unhex(c, canon);
            err = decode_any(a, val, n, out, &on);
            CHECK_MSG(err == SL_OK && on == cn && memcmp(out, canon, cn) == 0, "%s: %s", name,
                      sl_strerror(err));
        } else if (strcmp(kind, "invalid") == 0 && got == 5) {
            n = strcmp(c, "-") == 0 ? 0 : unhex(c, val);
            err = decode_any(b, val, n, out, &on);
            CHECK_MSG(strcmp(sl_errname(err), a) == 0, "%s: %s, not %s", name,
                      sl_errname(err), a);
        } else {
            CHECK_MSG(false, "bad line: %s", line);
        }
    }
    fclose(f);
    CHECK_MSG(count >= 30, "only %d vectors", count);
}

static void add_ok(sl_elastic_records_t *r, const char *key, const uint8_t *v, size_t n) {
    char why[200] = "";
    sl_err err = sl_elastic_records_add(r, key, strlen(key), v, n, why, sizeof why);
    CHECK_MSG(err == SL_OK, "%s refused: %s", key, why);
}

static void test_view(void) {
    sl_elastic_records_t *r = NULL;
    CHECK_ERR(sl_elastic_records_new("nope", 4, &r), SL_EINVAL);
    CHECK_ERR(sl_elastic_records_new(J, 33, &r), SL_EINVAL);
    CHECK_OK(sl_elastic_records_new(J, 3, &r));
    uint8_t buf[SL_ELASTIC_VALUE_MAX];
    size_t n;
    char why[200] = "";
    /* a root world of a, b sealed by a; both acked; c volunteers */
    sl_elastic_world_t w = {.id = {1, "a"}, .parent = {0, ""}, .count = 2, .members = {"a", "b"}};
    CHECK_OK(sl_elastic_world_encode(&w, 3, buf, sizeof buf, &n));
    add_ok(r, "job/" J "/w/1/a", buf, n);
    for (int i = 0; i < 2; i++) {
        sl_elastic_ack_t a = {.world = {1, "a"}};
        CHECK_OK(sl_elastic_ack_encode(&a, buf, sizeof buf, &n));
        add_ok(r, i ? "job/" J "/ack/1/b" : "job/" J "/ack/1/a", buf, n);
    }
    sl_elastic_vol_t v = {.round = 2};
    CHECK_OK(sl_elastic_vol_encode(&v, buf, sizeof buf, &n));
    add_ok(r, "job/" J "/vol/c", buf, n);
    add_ok(r, "job/" J "/spec", (const uint8_t *)"ignored", 7);

    /* a volunteer record only rises: a later round replaces it, an
       earlier one changes nothing */
    sl_elastic_vol_t v5 = {.round = 5}, v4 = {.round = 4};
    CHECK_OK(sl_elastic_vol_encode(&v5, buf, sizeof buf, &n));
    add_ok(r, "job/" J "/vol/c", buf, n);
    CHECK_OK(sl_elastic_vol_encode(&v4, buf, sizeof buf, &n));
    add_ok(r, "job/" J "/vol/c", buf, n);
    /* the report records are not the rendezvous's: taken and skipped */
    add_ok(r, "job/" J "/prog", (const uint8_t *)"{}", 2);
    add_ok(r, "job/" J "/c/7", (const uint8_t *)"{}", 2);
    add_ok(r, "job/" J "/log/c", (const uint8_t *)"text", 4);

    /* refusals leave the view as it was */
    CHECK_OK(sl_elastic_world_encode(&w, 3, buf, sizeof buf, &n));
    CHECK_ERR(sl_elastic_records_add(r, "job/" J "/w/1/a", 26, buf, n, why, sizeof why),
              SL_EEXIST);
    CHECK(strstr(why, "world: a second record of round 1 by a") != NULL);
    sl_elastic_ack_t a = {.world = {1, "a"}};
    CHECK_OK(sl_elastic_ack_encode(&a, buf, sizeof buf, &n));
    CHECK_ERR(sl_elastic_records_add(r, "job/" J "/ack/1/b", 28, buf, n, why, sizeof why),
              SL_EEXIST);
    CHECK(strstr(why, "ack: a second record of round 1 by b") != NULL);
    CHECK_ERR(sl_elastic_records_add(r, "job/fedcba9876543210/vol/c", 26, buf, n, why,
                                     sizeof why),
              SL_EPROTO);
    CHECK(strstr(why, "of job fedcba9876543210") != NULL);

    sl_elastic_view_t view;
    memset(&view, 0, sizeof view);
    sl_elastic_records_view(r, &view);
    CHECK_INT(view.world_count, 1);
    CHECK_INT(view.ack_count, 2);
    CHECK_INT(view.vol_count, 1);
    CHECK(!view.cancelled);
    CHECK_STR(view.vols[0].peer, "c");
    CHECK_INT(view.vols[0].round, 5);
    CHECK_STR(view.acks[1]->peer, "b");
    /* the core reads it: the root is established (both members acked) */
    sl_elastic_status_t st;
    CHECK_OK(sl_elastic_status(&view, &w.id, &st));
    CHECK(st.found && st.established && st.all_acked);
    sl_elastic_ref_t head;
    CHECK_OK(sl_elastic_head(&view, &head));
    CHECK(sl_elastic_ref_eq(&head, &w.id));

    CHECK_OK(sl_elastic_cancel_encode(buf, sizeof buf, &n));
    add_ok(r, "job/" J "/cancel", buf, n);
    sl_elastic_records_view(r, &view);
    CHECK(view.cancelled);

    /* many records: pointers stay right as the arrays grow; the bound holds */
    for (uint64_t i = 2; i < 200; i++) {
        char key[SL_ELASTIC_KEY_MAX];
        sl_elastic_world_t wi = {.id = {i, "a"}, .parent = {i - 1, "a"}, .count = 1,
                                 .members = {"a"}};
        CHECK_OK(sl_elastic_world_encode(&wi, 3, buf, sizeof buf, &n));
        snprintf(key, sizeof key, "job/" J "/w/%llu/a", (unsigned long long)i);
        add_ok(r, key, buf, n);
    }
    sl_elastic_records_view(r, &view);
    CHECK_INT(view.world_count, 199);
    for (size_t i = 0; i < view.world_count; i++)
        CHECK_INT(view.worlds[i]->id.round, i + 1);
    sl_elastic_records_destroy(&r);
    CHECK(r == NULL);

    CHECK_OK(sl_elastic_records_new(J, 3, &r));
    sl_elastic_vol_t vv = {.round = 1};
    CHECK_OK(sl_elastic_vol_encode(&vv, buf, sizeof buf, &n));
    for (int i = 0; i <= SL_ELASTIC_MAX_RECORDS; i++) {
        char key[SL_ELASTIC_KEY_MAX];
        snprintf(key, sizeof key, "job/" J "/vol/p%d", i);
        sl_err err = sl_elastic_records_add(r, key, strlen(key), buf, n, why, sizeof why);
        if (i < SL_ELASTIC_MAX_RECORDS)
            CHECK_OK(err);
        else
            CHECK_ERR(err, SL_ETOOBIG);
    }
    sl_elastic_records_destroy(&r);
}

static void add_world(sl_elastic_records_t *r, uint64_t round, uint64_t parent,
                      uint64_t graft) {
    sl_elastic_world_t w = {.id = {round, "a"}, .count = 2, .members = {"a", "b"}};
    if (parent)
        w.parent = (sl_elastic_ref_t){parent, "a"};
    if (graft)
        w.graft = (sl_elastic_ref_t){graft, "a"};
    uint8_t buf[SL_ELASTIC_VALUE_MAX];
    size_t n;
    char key[SL_ELASTIC_KEY_MAX];
    CHECK_OK(sl_elastic_world_encode(&w, 3, buf, sizeof buf, &n));
    snprintf(key, sizeof key, "job/" J "/w/%llu/a", (unsigned long long)round);
    add_ok(r, key, buf, n);
}

static void add_ack(sl_elastic_records_t *r, const char *peer, uint64_t round, uint64_t tip) {
    sl_elastic_ack_t a = {.world = {round, "a"}, .step = round, .has_state = tip > 0};
    if (tip)
        a.tip = a.state_world = (sl_elastic_ref_t){tip, "a"};
    uint8_t buf[SL_ELASTIC_VALUE_MAX];
    size_t n;
    char key[SL_ELASTIC_KEY_MAX];
    CHECK_OK(sl_elastic_ack_encode(&a, buf, sizeof buf, &n));
    snprintf(key, sizeof key, "job/" J "/ack/%llu/%s", (unsigned long long)round, peer);
    add_ok(r, key, buf, n);
}

/* The pruned view (docs/elastic.md): a chain of five worlds of a, b, each
 * acked by both, is pruned at the head's parent; the records below it go,
 * and each peer's newest ack below it is remembered. A record below the
 * anchor read afterwards is left out and makes the records stale, as does
 * a world that carries on a world below it. */
static void test_prune(void) {
    sl_elastic_records_t *r = NULL;
    CHECK_OK(sl_elastic_records_new(J, 3, &r));
    for (uint64_t i = 1; i <= 5; i++) {
        add_world(r, i, i - 1, 0);
        add_ack(r, "a", i, i - 1);
        add_ack(r, "b", i, i - 1);
    }
    sl_elastic_view_t view;
    memset(&view, 0, sizeof view);
    sl_elastic_records_view(r, &view);
    CHECK_INT(view.anchor.round, 0);
    bool moved;
    CHECK_OK(sl_elastic_records_prune(r, &moved));
    CHECK(moved);
    sl_elastic_records_view(r, &view);
    CHECK_INT(view.anchor.round, 4);   /* the head's parent */
    CHECK_INT(view.world_count, 2);    /* 4 and 5 */
    CHECK_INT(view.ack_count, 4);
    CHECK_INT(view.past_count, 2);     /* a and b: their acks of round 3 */
    CHECK_STR(view.past[0].peer, "a");
    CHECK_INT(view.past[0].tip.round, 3);
    CHECK(view.past[0].tip_in_lineage && view.past[0].state_in_lineage);
    CHECK_INT(view.past[0].from_none, 0); /* it acked an established world */
    sl_elastic_ref_t head;
    CHECK_OK(sl_elastic_head(&view, &head));
    CHECK_INT(head.round, 5);
    CHECK_OK(sl_elastic_records_prune(r, &moved));
    CHECK(!moved); /* the head's parent already */
    CHECK(!sl_elastic_records_stale(r));

    /* a world past the anchor naming a base below it: stale */
    add_world(r, 6, 0, 2);
    CHECK(sl_elastic_records_stale(r));
    sl_elastic_records_destroy(&r);

    /* a record below the anchor, new to the records: left out, stale */
    CHECK_OK(sl_elastic_records_new(J, 3, &r));
    for (uint64_t i = 1; i <= 5; i++) {
        add_world(r, i, i - 1, 0);
        add_ack(r, "a", i, i - 1);
        add_ack(r, "b", i, i - 1);
    }
    CHECK_OK(sl_elastic_records_prune(r, &moved));
    add_ack(r, "c", 2, 0);
    CHECK_INT(sl_elastic_records_left_out(r), 1);
    CHECK(sl_elastic_records_stale(r));
    sl_elastic_records_view(r, &view);
    CHECK_INT(view.ack_count, 4);
    sl_elastic_records_destroy(&r);
}

/* job/J/ckpt: a builtin job's names one blob, a command job's its files. */
static void test_ckpt(void) {
    const char *hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    char text[512], why[256];
    uint64_t step = 0;
    uint8_t blob[32];
    snprintf(text, sizeof text, "{\"step\": 40, \"blob\": \"%s\", \"round\": 3}", hex);
    CHECK_OK(sl_elastic_ckpt_decode(text, strlen(text), false, &step, blob, why, sizeof why));
    CHECK_INT(step, 40);
    CHECK_INT(blob[1], 0x11);
    /* a command job's needs files */
    CHECK_ERR(sl_elastic_ckpt_decode(text, strlen(text), true, &step, blob, why, sizeof why),
              SL_EPROTO);
    snprintf(text, sizeof text, "{\"step\": 2, \"files\": {\"ckpt-40.pt\": \"%s\"}}", hex);
    CHECK_OK(sl_elastic_ckpt_decode(text, strlen(text), true, &step, blob, why, sizeof why));
    CHECK_INT(step, 2);
    static const char *const bad[] = {
        "[]", "{\"step\": 0, \"blob\": \"00\"}", "{\"step\": 1.5}", "{\"step\": -3}",
        "{\"step\": 1e300}", "not json", "{\"step\": 4, \"blob\": \"zz\"}",
        "{\"step\": 2, \"files\": {\".hidden\": \"00\"}}",
        "{\"step\": 2, \"files\": {\"a/b\": \"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\"}}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sl_err e1 = sl_elastic_ckpt_decode(bad[i], strlen(bad[i]), false, &step, blob, why,
                                           sizeof why);
        sl_err e2 = sl_elastic_ckpt_decode(bad[i], strlen(bad[i]), true, &step, blob, why,
                                           sizeof why);
        CHECK_MSG(e1 == SL_EPROTO && e2 == SL_EPROTO, "ckpt record %s: %s, %s", bad[i],
                  sl_errname(e1), sl_errname(e2));
    }
}

int main(void) {
    sl_test_run("keys", test_keys);
    sl_test_run("vectors", test_vectors);
    sl_test_run("vector_file", test_vector_file);
    sl_test_run("round_trips", test_round_trips);
    sl_test_run("malformed", test_malformed);
    sl_test_run("view", test_view);
    sl_test_run("ckpt", test_ckpt);
    sl_test_run("prune", test_prune);
    return sl_test_finish();
}
