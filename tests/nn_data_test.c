/* Data loaders: good IDX files (plain and gzip) and CSV files load; each
 * kind of bad file is rejected with an error that names the file and
 * says what is wrong. Files are built in a temporary directory. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "starling/nn.h"
#include "testlib.h"

static char dir[256];

static void path_of(char *out, size_t len, const char *name) {
    snprintf(out, len, "%s/%s", dir, name);
}

static void write_file(const char *name, const void *data, size_t len) {
    char p[512];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(fwrite(data, 1, len, f) == len);
    fclose(f);
}

static void write_gz(const char *name, const void *data, size_t len) {
    char p[512];
    path_of(p, sizeof p, name);
    gzFile f = gzopen(p, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(gzwrite(f, data, (unsigned)len) == (int)len);
    gzclose(f);
}

static void be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* IDX images: n images of h x w; byte i of image k is (k * 7 + i) & 255. */
static size_t make_images(uint8_t *buf, uint32_t n, uint32_t h, uint32_t w) {
    buf[0] = buf[1] = 0;
    buf[2] = 0x08;
    buf[3] = 3;
    be32(buf + 4, n);
    be32(buf + 8, h);
    be32(buf + 12, w);
    for (uint32_t k = 0; k < n; k++)
        for (uint32_t i = 0; i < h * w; i++)
            buf[16 + k * h * w + i] = (uint8_t)((k * 7 + i) & 255);
    return 16 + (size_t)n * h * w;
}

static size_t make_labels(uint8_t *buf, uint32_t n) {
    buf[0] = buf[1] = 0;
    buf[2] = 0x08;
    buf[3] = 1;
    be32(buf + 4, n);
    for (uint32_t k = 0; k < n; k++)
        buf[8 + k] = (uint8_t)(k % 10);
    return 8 + (size_t)n;
}

static uint8_t img[16 + 50 * 6 * 5], lab[8 + 50];
static size_t img_len, lab_len;

/* Loads images `iname` with labels `lname`; expects `want` and, for an
 * error, a message naming `names` and containing `says`. */
static void expect(const char *iname, const char *lname, sl_err want, const char *names,
                   const char *says) {
    char ip[512], lp[512], why[512] = "";
    path_of(ip, sizeof ip, iname);
    path_of(lp, sizeof lp, lname);
    sl_nn_data_t *d = NULL;
    sl_err err = sl_nn_data_load_idx(ip, lp, &d, why, sizeof why);
    CHECK_MSG(err == want, "%s + %s: got %s, want %s (%s)", iname, lname, sl_errname(err),
              sl_errname(want), why);
    if (want != SL_OK) {
        CHECK(d == NULL);
        CHECK_MSG(strstr(why, names) != NULL, "message '%s' does not name %s", why, names);
        CHECK_MSG(strstr(why, says) != NULL, "message '%s' lacks '%s'", why, says);
    }
    sl_nn_data_destroy(&d);
}

static void test_idx_good(void) {
    write_file("img", img, img_len);
    write_file("lab", lab, lab_len);
    write_gz("img.gz", img, img_len);
    write_gz("lab.gz", lab, lab_len);
    char ip[512], lp[512], why[256];
    const char *pairs[2][2] = {{"img", "lab"}, {"img.gz", "lab.gz"}};
    for (int i = 0; i < 2; i++) {
        path_of(ip, sizeof ip, pairs[i][0]);
        path_of(lp, sizeof lp, pairs[i][1]);
        sl_nn_data_t *d = NULL;
        CHECK_OK(sl_nn_data_load_idx(ip, lp, &d, why, sizeof why));
        if (!d)
            continue;
        CHECK_INT(d->count, 50);
        CHECK_INT(d->shape.channels, 1);
        CHECK_INT(d->shape.height, 6);
        CHECK_INT(d->shape.width, 5);
        CHECK_INT(d->shape.classes, 10);
        CHECK_INT(d->labels[13], 3);
        CHECK_INT(d->images_u8[30 * 2 + 4], (2 * 7 + 4) & 255);
        CHECK_NEAR(d->scale, 1.0 / 255, 1e-9);
        sl_nn_data_truncate(d, 20);
        CHECK_INT(d->count, 20);
        sl_nn_data_destroy(&d);
        CHECK(d == NULL);
    }
    /* A directory with the four standard names loads as train + test. */
    write_gz("train-images-idx3-ubyte.gz", img, img_len);
    write_gz("train-labels-idx1-ubyte.gz", lab, lab_len);
    write_file("t10k-images-idx3-ubyte", img, img_len);
    write_file("t10k-labels-idx1-ubyte", lab, lab_len);
    sl_nn_data_t *tr = NULL, *te = NULL;
    CHECK_OK(sl_nn_data_load(dir, &tr, &te, why, sizeof why));
    CHECK(tr && te && tr->count == 50 && te->count == 50);
    sl_nn_data_destroy(&tr);
    sl_nn_data_destroy(&te);
}

static void test_idx_bad(void) {
    uint8_t buf[sizeof img + 16];
    /* truncated images and labels, plain and gzip */
    write_file("img_trunc", img, img_len - 7);
    expect("img_trunc", "lab", SL_ETRUNC, "img_trunc", "truncated");
    write_file("lab_trunc", lab, lab_len - 1);
    expect("img", "lab_trunc", SL_ETRUNC, "lab_trunc", "truncated");
    write_file("tiny", img, 3);
    expect("tiny", "lab", SL_ETRUNC, "tiny", "too short");
    /* a gzip stream cut short, and one with a damaged body */
    char gp[512];
    path_of(gp, sizeof gp, "img.gz");
    size_t gl;
    uint8_t *gz = sl_test_read_file(gp, &gl);
    CHECK(gz && gl > 40);
    if (gz) {
        write_file("img_cut.gz", gz, gl / 2);
        expect("img_cut.gz", "lab", SL_ETRUNC, "img_cut.gz", "gzip");
        for (size_t i = 20; i < gl - 12; i += 3)
            gz[i] ^= 0x5a;
        write_file("img_bad.gz", gz, gl);
        char ip[512], lp[512], why[512] = "";
        path_of(ip, sizeof ip, "img_bad.gz");
        path_of(lp, sizeof lp, "lab");
        sl_nn_data_t *d = NULL;
        sl_err err = sl_nn_data_load_idx(ip, lp, &d, why, sizeof why);
        CHECK_MSG(err == SL_ECORRUPT || err == SL_ETRUNC, "damaged gzip: %s (%s)",
                  sl_errname(err), why);
        CHECK(strstr(why, "img_bad.gz") != NULL);
        free(gz);
    }
    /* wrong magic, wrong element type, wrong dimension count */
    memcpy(buf, img, img_len);
    buf[0] = 0x1f;
    write_file("img_magic", buf, img_len);
    expect("img_magic", "lab", SL_EPROTO, "img_magic", "not an IDX file");
    memcpy(buf, img, img_len);
    buf[2] = 0x0d;
    write_file("img_float", buf, img_len);
    expect("img_float", "lab", SL_EUNSUPPORTED, "img_float", "element type");
    expect("lab", "lab", SL_EPROTO, "lab", "dimensions");
    expect("img", "img", SL_EPROTO, "img", "dimensions");
    /* zero dimension, trailing bytes */
    memcpy(buf, img, img_len);
    be32(buf + 8, 0);
    write_file("img_zero", buf, img_len);
    expect("img_zero", "lab", SL_EPROTO, "img_zero", "zero");
    memcpy(buf, img, img_len);
    buf[img_len] = 1;
    write_file("img_long", buf, img_len + 1);
    expect("img_long", "lab", SL_EPROTO, "img_long", "unexpected bytes");
    /* a header announcing far more than is there */
    memcpy(buf, img, img_len);
    be32(buf + 4, 1000000);
    write_file("img_many", buf, img_len);
    expect("img_many", "lab", SL_ETRUNC, "img_many", "truncated");
    be32(buf + 4, 0x7fffffff);
    write_file("img_huge", buf, img_len);
    expect("img_huge", "lab", SL_ETOOBIG, "img_huge", "over 4 GiB");
    /* mismatched counts */
    uint8_t lab2[8 + 40];
    write_file("lab40", lab2, make_labels(lab2, 40));
    expect("img", "lab40", SL_EINVAL, "lab40", "50 images but 40 labels");
    /* missing file, directory without the files */
    expect("nope", "lab", SL_ENOTFOUND, "nope", "No such file");
    sl_nn_data_t *tr, *te;
    char why[512];
    char sub[512];
    path_of(sub, sizeof sub, "empty");
    CHECK(mkdir(sub, 0755) == 0);
    CHECK_ERR(sl_nn_data_load(sub, &tr, &te, why, sizeof why), SL_ENOTFOUND);
    CHECK(strstr(why, "train-images-idx3-ubyte") != NULL);
    CHECK_ERR(sl_nn_data_load("no-such-set", &tr, &te, why, sizeof why), SL_ENOTFOUND);
}

static void test_idx_parse_memory(void) {
    sl_nn_data_t *d = NULL;
    char why[256];
    CHECK_OK(sl_nn_data_parse_idx(img, img_len, lab, lab_len, "mem", &d, why, sizeof why));
    CHECK(d && d->count == 50);
    sl_nn_data_destroy(&d);
    CHECK_ERR(sl_nn_data_parse_idx(img, img_len - 1, lab, lab_len, "mem", &d, why, sizeof why),
              SL_ETRUNC);
    CHECK(strstr(why, "mem (images)") != NULL);
}

static sl_err load_csv(const char *name, const char *text, sl_nn_data_t **d, char *why,
                       size_t why_len) {
    write_file(name, text, strlen(text));
    char p[512];
    path_of(p, sizeof p, name);
    return sl_nn_data_load_csv(p, d, why, why_len);
}

static void test_csv(void) {
    sl_nn_data_t *d = NULL;
    char why[512] = "";
    CHECK_OK(load_csv("a.csv", "label,p1,p2,p3,p4\n1,0,255,3,4\r\n0,5,6,7,8\n\n2,9,10,11,12\n",
                      &d, why, sizeof why));
    CHECK(d != NULL);
    if (d) {
        CHECK_INT(d->count, 3);
        CHECK_INT(d->shape.height, 2);
        CHECK_INT(d->shape.width, 2);
        CHECK_INT(d->shape.classes, 3);
        CHECK(d->images_u8 != NULL);
        CHECK_INT(d->images_u8[1], 255);
        CHECK_INT(d->labels[2], 2);
    }
    sl_nn_data_destroy(&d);
    CHECK_OK(load_csv("f.csv", "0,0.5,-1.25,3\n1,1e-3,2,2\n", &d, why, sizeof why));
    CHECK(d && d->images_f32 && d->shape.width == 3 && d->shape.height == 1);
    if (d)
        CHECK_NEAR(d->images_f32[1], -1.25, 1e-6);
    sl_nn_data_destroy(&d);
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"0,1,2\n1,2\n", ":2: 2 fields where the first row has 3"},
        {"0,1,x2\n", ":1: field 3 ('x2') is not a number"},
        {"-1,1,2\n", ":1: label '-1'"},
        {"0.5,1,2\n", ":1: label '0.5'"},
        {"3\n", ":1: a row needs a label"},
        {"0,,2\n", ":1: field 2 is empty"},
        {"", "no data rows"},
        {"a,b\n", "no data rows"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why[0] = '\0';
        CHECK_MSG(load_csv("bad.csv", bad[i].text, &d, why, sizeof why) != SL_OK, "case %zu", i);
        CHECK(d == NULL);
        CHECK_MSG(strstr(why, "bad.csv") && strstr(why, bad[i].says), "case %zu: '%s' lacks '%s'",
                  i, why, bad[i].says);
    }
}

/* --normalize: after standardising, the training set's converted values
 * have mean 0 and standard deviation 1; the test set gets the same scale
 * and shift; a constant training set is refused. */
static void test_standardize(void) {
    char why[256];
    sl_nn_data_t *tr = NULL, *te = NULL;
    CHECK_OK(sl_nn_data_parse_idx(img, img_len, lab, lab_len, "train", &tr, why, sizeof why));
    CHECK_OK(sl_nn_data_parse_idx(img, img_len, lab, lab_len, "test", &te, why, sizeof why));
    if (!tr || !te)
        return;
    size_t n = tr->count * (size_t)tr->shape.height * tr->shape.width;
    double want_mean = 0.0;
    for (size_t i = 0; i < n; i++)
        want_mean += tr->images_u8[i] / 255.0;
    want_mean /= (double)n;
    double mean = -1.0, sd = -1.0;
    CHECK_OK(sl_nn_data_standardize(tr, te, &mean, &sd));
    CHECK_NEAR(mean, want_mean, 1e-6); /* scale is the float 1/255 */
    double s = 0.0, ss = 0.0;
    for (size_t i = 0; i < n; i++) {
        double x = tr->images_u8[i] * (double)tr->scale + tr->shift;
        s += x;
        ss += x * x;
    }
    CHECK_NEAR(s / (double)n, 0.0, 1e-5);
    CHECK_NEAR(ss / (double)n, 1.0, 1e-5);
    CHECK(te->scale == tr->scale && te->shift == tr->shift);
    /* Constant inputs have no scale to divide by. */
    memset(tr->images_u8, 7, n);
    tr->scale = 1.0f / 255.0f;
    tr->shift = 0.0f;
    CHECK_ERR(sl_nn_data_standardize(tr, NULL, NULL, NULL), SL_EINVAL);
    sl_nn_data_destroy(&tr);
    sl_nn_data_destroy(&te);
}

int main(void) {
    CHECK_OK(sl_init());
    snprintf(dir, sizeof dir, "/tmp/sl_nn_data_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    img_len = make_images(img, 50, 6, 5);
    lab_len = make_labels(lab, 50);
    sl_test_run("idx_good", test_idx_good);
    sl_test_run("idx_bad", test_idx_bad);
    sl_test_run("idx_parse_memory", test_idx_parse_memory);
    sl_test_run("csv", test_csv);
    sl_test_run("standardize", test_standardize);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return sl_test_finish();
}
